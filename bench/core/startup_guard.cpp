#include "bench/core/startup_guard.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "bench/core/deadlines.hpp"
#include "bench/core/errors.hpp"

namespace cclbench {

bool command_line_has(int argc, char** argv, const char* flag) {
  for (int index = 1; index < argc; ++index) {
    if (std::string(argv[index]) == flag) return true;
  }
  return false;
}

int launch_size_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    char* end = nullptr;
    const long size = std::strtol(value, &end, 10);
    if (end != value && *end == '\0' && size > 0 && size < (1 << 24)) return static_cast<int>(size);
  }
  return 1;
}

double startup_timeout_seconds(int argc, char** argv) {
  double seconds = 0.0;
  for (int index = 1; index + 1 < argc; ++index) {
    const std::string flag = argv[index];
    if (flag != "-T" && flag != "--timeout") continue;
    char* end = nullptr;
    const double value = std::strtod(argv[index + 1], &end);
    seconds = (end != argv[index + 1] && *end == '\0' && value > 0 && value <= 86400) ? value : 0.0;
  }
  if (!command_line_has(argc, argv, "--learn-deadlines")) return seconds;
  const double allowance = startup_allowance_seconds(launch_size_from_environment());
  return seconds > 0 ? std::min(seconds, allowance) : allowance;
}

double StartupGuard::remaining_seconds() const {
  if (timeout_.count() <= 0) return 0.0;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return std::max(0.0, timeout_.count() - elapsed);
}

StartupGuard::StartupGuard(double timeout_seconds, std::string program, std::string basis)
    : timeout_(timeout_seconds), program_(std::move(program)), basis_(std::move(basis)) {
  if (timeout_seconds > 0) thread_ = std::thread([this] { watch(); });
}

StartupGuard::~StartupGuard() {
  disarm();
  if (thread_.joinable()) thread_.join();
}

void StartupGuard::mpi_ready(const MpiContext& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = &context;
}

void StartupGuard::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void StartupGuard::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  if (changed_.wait_until(lock, deadline, [this] { return !armed_; })) return;
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::ostringstream message;
  message << program_ << ": timeout: start-up (MPI wire-up, backend initialisation, case agreement) did not finish within "
          << timeout_.count() << " s (" << basis_ << ") on " << (context_ ? "rank " + std::to_string(context_->world_rank) + " " : "")
          << "(" << host << "); aborting every rank\n";
  const std::string text = message.str();
  std::fwrite(text.data(), 1, text.size(), stderr);  // one write: ranks share stderr
  std::fflush(stderr);
  const int code = to_int(ExitCode::timeout);
  if (context_ != nullptr) abort_all_ranks(*context_, code);
  std::_Exit(code);
}

}  // namespace cclbench
