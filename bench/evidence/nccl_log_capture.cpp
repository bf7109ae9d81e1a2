#include "bench/evidence/nccl_log_capture.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <system_error>

#include "bench/core/errors.hpp"
#include "bench/evidence/tuning_probe.hpp"

namespace cclbench {
namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// NCCL's %h: the host name up to its first '.' (getHostName(.., '.') in NCCL's utils).
std::string nccl_short_hostname() {
  std::array<char, 1025> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) return "unknown";
  std::string name = host.data();
  const auto dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

}  // namespace

TemporaryDirectory::TemporaryDirectory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/cclbench-nccl-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw FatalError(ExitCode::runtime_error, "cannot create a temporary NCCL log directory from '" + pattern +
                                                  "': " + std::strerror(errno) + " (give --nccl-log-dir DIR)");
  }
  path_ = buffer.data();
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

NcclLogCapture setup_log_capture(const Config& config, const MpiContext& context, NcclLogPurpose purpose,
                                 const std::string& program) {
  NcclLogCapture capture;
  capture.active = true;
  std::string dir = config.log_dir;
  if (dir.empty() && purpose == NcclLogPurpose::timed) {
    if (!config.json_path.empty()) dir = directory_of(config.json_path) + "/nccl";
    else if (!config.jsonl_path.empty()) dir = directory_of(config.jsonl_path) + "/nccl";
  }
  if (dir.empty()) {
    capture.temporary = std::make_unique<TemporaryDirectory>();
    dir = capture.temporary->path();
  }
  capture.plan = setup_nccl_logging(dir, purpose);
  if (capture.plan.file_pattern.empty()) {
    capture.plan.notes.push_back("NCCL_DEBUG_FILE is empty: NCCL writes to stdout and coll_perf cannot read its log");
  } else {
    capture.own_log_path = expand_nccl_debug_file(capture.plan.file_pattern, nccl_short_hostname(), static_cast<long>(::getpid()));
  }
  if (context.world_rank == 0) {
    for (const std::string& note : capture.plan.notes) std::cerr << program << ": note: NCCL logging: " << note << "\n";
    if (capture.temporary) {
      std::cerr << program << ": note: NCCL logs go to the temporary directory " << dir
                << " (removed at exit; keep them with --nccl-log-dir DIR)\n";
    }
  }
  return capture;
}

GatheredLogs gather_nccl_logs(const NcclLogCapture& capture, const MpiContext& context) {
  constexpr std::uintmax_t kMaxLogBytes = 64ull << 20;  // a larger file is cut: INIT/NET lines come first
  std::string status = "ok";
  std::string text;
  const std::string& path = capture.own_log_path;
  if (path.empty()) {
    status = "NCCL_DEBUG_FILE unset or empty: no log file";
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      status = "cannot open " + path + ": " + std::strerror(errno);
    } else {
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (text.size() > kMaxLogBytes) text.resize(kMaxLogBytes);
    }
  }
  const std::string payload = path + "\n" + status + "\n" + text;
  const std::vector<std::string> gathered = gather_strings(context, context.world, payload);
  GatheredLogs logs;
  for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
    const std::string& item = gathered[rank];
    const auto first = item.find('\n');
    const auto second = first == std::string::npos ? std::string::npos : item.find('\n', first + 1);
    if (second == std::string::npos) continue;
    const std::string file = item.substr(0, first);
    const std::string file_status = item.substr(first + 1, second - first - 1);
    logs.files.push_back(file.empty() ? "(rank " + std::to_string(rank) + ": none)" : file);
    if (file_status == "ok") {
      logs.texts.emplace_back(file, item.substr(second + 1));
    } else {
      LogInput input;
      input.path = file.empty() ? "rank " + std::to_string(rank) : file;
      input.status = "unreadable";
      input.reason = "rank " + std::to_string(rank) + ": " + file_status;
      logs.unreadable.push_back(input);
    }
  }
  return logs;
}

}  // namespace cclbench
