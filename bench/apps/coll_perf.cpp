// coll_perf: collectives over a size sweep, nccl-tests compatible, with exact checking,
// percentiles, and evidence attached. Also built as all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, broadcast_perf, reduce_perf and sendrecv_perf.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/reporters.hpp"
#include "bench/core/runner.hpp"
#include "bench/core/units.hpp"
#include "bench/core/version.hpp"
#include "bench/core/watchdog.hpp"
#include "bench/evidence/manifest.hpp"
#include "bench/evidence/nccl_evidence.hpp"
#include "bench/evidence/nccl_logging.hpp"
#include "bench/evidence/rails.hpp"
#include "bench/evidence/transport_gate.hpp"
#include "bench/evidence/tuning_probe.hpp"
#include "bench/mpi/mpi_backend.hpp"
#include "topology/binding.hpp"
#if defined(CCLBENCH_WITH_NCCL)
#include "bench/nccl/nccl_backend.hpp"
#endif

namespace cclbench {
namespace {

std::atomic<int> g_stop_signal{0};  // written by the signal handler only (async-signal-safe)

extern "C" void on_stop_signal(int signal_number) {
  if (g_stop_signal.exchange(signal_number) != 0) {
    // Second signal: the user insists. Completed records are already on disk.
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

std::string program_name(const char* argv0) {
  const std::string path = argv0 ? argv0 : "coll_perf";
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Rank 0 writes: the console table, JSONL (one record appended per case), and -J/--csv rewritten
// atomically after every case, so whatever happens next, every finished case is on disk.
class ResultSink {
 public:
  ResultSink(const Config& config, std::string program, bool writer, nlohmann::json manifest)
      : config_(config), program_(std::move(program)), writer_(writer), manifest_(std::move(manifest)), table_(std::cout),
        samples_reference_(samples_reference(config)) {}

  void add(const CaseResult& result, bool emulated) {
    if (!writer_) return;
    nlohmann::json record = case_record(result, config_.point, emulated);
    if (!config_.quiet) table_.add(result);
    if (!config_.samples_path.empty()) {
      const nlohmann::json line = {{"schema_version", kResultsSchemaVersion}, {"case_id", record["case_id"]},
                                   {"point", record["point"]}, {"samples_us", result.samples_us}};
      append_line_durable(config_.samples_path, line.dump());
      record["samples_file"] = samples_reference_;
    }
    if (!config_.jsonl_path.empty()) append_line_durable(config_.jsonl_path, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    records_.push_back(std::move(record));
    // -N: -J and --csv are rewritten once per cycle (JSONL still gets every record as it comes),
    // so a long soak does not rewrite a growing file after every case.
    if (config_.run_cycles == 1) flush("running");
  }

  void end_cycle() {
    if (writer_ && config_.run_cycles != 1) flush("running");
  }

  void set_section(const std::string& key, nlohmann::json value) { sections_[key] = std::move(value); }

  void finish(const std::string& status) {
    if (!writer_) return;
    if (!config_.quiet) table_.finish();
    flush(status);
  }

  bool any_failed() const {
    for (const auto& record : records_) {
      const auto& status = record.at("status");
      if (status == "failed" || status == "error") return true;
    }
    return false;
  }
  std::size_t count() const { return records_.size(); }
  // Every case skipped (none ok, none failed): the reason of the first, for the exit-7 message; empty
  // when something was measured.
  std::string nothing_measured_reason() const {
    if (records_.empty()) return "";
    for (const auto& record : records_) {
      if (record.at("status") != "skipped") return "";
    }
    const auto& reason = records_.front().at("reason");
    return "every case was skipped (" + std::to_string(records_.size()) + " case(s); first: " +
           (reason.is_string() ? reason.get<std::string>() : std::string("no reason recorded")) + ")";
  }

 private:
  void flush(const std::string& status) {
    if (!config_.json_path.empty()) {
      nlohmann::json document = {{"schema_version", kResultsSchemaVersion},
                                 {"program", program_},
                                 {"status", status},
                                 {"manifest", manifest_},
                                 {"notes", document_notes()}};
      for (const auto& [key, value] : sections_.items()) document[key] = value;
      write_file_atomic(config_.json_path, lean_document_text(document, records_));
    }
    if (!config_.csv_path.empty()) {
      std::string csv = csv_header() + "\n";
      for (const auto& record : records_) csv += csv_row(record) + "\n";
      write_file_atomic(config_.csv_path, csv);
    }
  }

  // How records name the --samples file: its file name when it sits next to every record file (-J,
  // --jsonl), so that readers find it relative to the record; else the path as given.
  static std::string samples_reference(const Config& config) {
    const std::string& path = config.samples_path;
    if (path.empty()) return path;
    const auto folder = [](const std::string& file) {
      const auto slash = file.find_last_of('/');
      return slash == std::string::npos ? std::string(".") : file.substr(0, slash);
    };
    for (const std::string* output : {&config.json_path, &config.jsonl_path}) {
      if (!output->empty() && folder(*output) != folder(path)) return path;
    }
    if (config.json_path.empty() && config.jsonl_path.empty()) return path;
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }

  // Text that is the same for every case, once per document.
  nlohmann::json document_notes() const {
    return {{"rails", std::string(kRailCounterNote) + "; read under " + config_.sysfs_root +
                          " by the node-local rank 0 before fill and after checking, "
                      "so warm-up and checked runs are included; interfaces that moved no bytes are counted "
                      "(netdevs_zero_omitted), not listed, unless --all-netdevs"},
            {"samples", config_.samples_path.empty()
                            ? nlohmann::json("per-iteration samples not written (coll_perf --samples FILE writes them)")
                            : nlohmann::json("per-iteration samples of each case: the JSONL file in its samples_file")}};
  }

  // The document pretty-printed except for the cases, one compact record per line: readable, and
  // about half the bytes of an indented dump.
  static std::string lean_document_text(const nlohmann::json& document, const std::vector<nlohmann::json>& records) {
    constexpr auto replace = nlohmann::json::error_handler_t::replace;
    std::string text = document.dump(2, ' ', false, replace);
    text.erase(text.find_last_of('}'));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    text += ",\n  \"cases\": [";
    for (std::size_t i = 0; i < records.size(); ++i) text += (i ? ",\n    " : "\n    ") + records[i].dump(-1, ' ', false, replace);
    text += records.empty() ? "]\n}\n" : "\n  ]\n}\n";
    return text;
  }

  const Config& config_;
  std::string program_;
  bool writer_;
  nlohmann::json manifest_;
  nlohmann::json sections_ = nlohmann::json::object();
  ConsoleTable table_;
  std::string samples_reference_;
  std::vector<nlohmann::json> records_;
};

// Test-only fault hook: CCLBENCH_TEST_STALL=<rank>:<case index> makes that rank hang inside the
// watched phase of that case, so tests can prove that the watchdog ends every rank. It is read
// once, only by coll_perf, and does nothing unless set.
class TestStallHook final : public CaseObserver {
 public:
  TestStallHook(const MpiContext& context, PhaseMonitor& monitor) : context_(context), monitor_(monitor) {
    const char* value = std::getenv("CCLBENCH_TEST_STALL");
    if (value == nullptr) return;
    const std::string text = value;
    const auto colon = text.find(':');
    if (colon == std::string::npos) throw UsageError("CCLBENCH_TEST_STALL: expected <rank>:<case index>");
    stall_rank_ = static_cast<int>(parse_integer(text.substr(0, colon), "CCLBENCH_TEST_STALL rank", 0, 1 << 20));
    stall_case_ = static_cast<int>(parse_integer(text.substr(colon + 1), "CCLBENCH_TEST_STALL case", 0, 1 << 20));
  }
  void before_case(const CaseSpec& spec) override {
    if (stall_rank_ == context_.world_rank && case_index_ == stall_case_) {
      monitor_.enter(spec, "test stall (CCLBENCH_TEST_STALL)");
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    ++case_index_;
  }
  void after_case(CaseResult&) override {}

 private:
  const MpiContext& context_;
  PhaseMonitor& monitor_;
  int stall_rank_ = -1;
  int stall_case_ = -1;
  int case_index_ = 0;
};

void check_outputs(const Config& config) {
  if (!config.json_path.empty()) check_writable_output(config.json_path, "-J");
  if (!config.csv_path.empty()) check_writable_output(config.csv_path, "--csv");
  if (!config.jsonl_path.empty()) check_writable_output(config.jsonl_path, "--jsonl");
  if (!config.samples_path.empty()) check_writable_output(config.samples_path, "--samples");
  if (!config.tuning_probe_path.empty()) check_writable_output(config.tuning_probe_path, "--tuning-probe");
}

// Every rank agrees on one usage error (rank 0's), so all exit 2 together with one message.
void agree_on_usage(const MpiContext& context, std::string local_error) {
  int length = context.world_rank == 0 ? static_cast<int>(local_error.size()) : 0;
  mpi_check(MPI_Bcast(&length, 1, MPI_INT, 0, context.world), "MPI_Bcast(usage)", context);
  if (length == 0) return;
  local_error.resize(length);
  mpi_check(MPI_Bcast(local_error.data(), length, MPI_CHAR, 0, context.world), "MPI_Bcast(usage)", context);
  throw UsageError(local_error);
}

// The backend this run uses, decided before anything touches NCCL (NCCL logging must be set up
// first). `note` says why when automatic selection fell back to MPI.
BackendKind resolve_backend(const Config& config, std::string& note) {
  BackendKind kind = config.backend;
#if defined(CCLBENCH_WITH_NCCL)
  if (kind == BackendKind::automatic) {
    std::string reason;
    kind = visible_gpu_count(&reason) > 0 ? BackendKind::nccl : BackendKind::mpi;
    if (kind == BackendKind::mpi) note = "no GPU visible (" + reason + "): running the MPI backend on host memory";
  }
#else
  if (kind == BackendKind::nccl) {
    throw UsageError("--backend nccl: this build has no CUDA/NCCL support (rebuild with the CUDA toolkit and NCCL)");
  }
  if (kind == BackendKind::automatic) {
    note = "built without CUDA/NCCL: running the MPI backend on host memory";
    kind = BackendKind::mpi;
  }
#endif
  return kind;
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const Config& config, const MpiContext& context,
                                      const std::vector<CaseSpec>& cases, const std::optional<FaultInjection>& injection) {
#if defined(CCLBENCH_WITH_NCCL)
  if (kind == BackendKind::nccl) return make_nccl_backend(config, context, injection);
#else
  (void)config;
  (void)kind;
#endif
  return make_mpi_backend(context, cases, injection);
}

// ---------------------------------------------------------------------------------------------
// Evidence: NCCL log capture and the transport gate, run manifest, binding records, rail counters,
// algorithm/protocol per case. Everything here runs between cases or after the run, never inside
// timed iterations. Functions that gather are collective over the world: every rank calls them in
// the same order, and none of them throws on one rank only for a local problem (a missing file is
// recorded, not thrown).

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

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when this goes away.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
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
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Where this run's NCCL logs go and what NCCL was told. Set up before the first NCCL call.
struct NcclLogCapture {
  bool active = false;          // the NCCL backend runs (logging planned)
  NcclLogPlan plan;
  std::unique_ptr<TemporaryDirectory> temporary;
  std::string own_log_path;     // this process's file (NCCL_DEBUG_FILE expanded)
};

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

// Every rank's own NCCL log, gathered to rank 0 as (file name, text). A rank whose file is missing
// or unreadable sends the reason instead; it then counts as "no evidence" for that rank.
struct GatheredLogs {
  std::vector<std::pair<std::string, std::string>> texts;  // rank 0 only
  std::vector<LogInput> unreadable;                        // rank 0 only
  std::vector<std::string> files;
};

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

// "inter-node NET/Socket x24; intra-node P2P/CUMEM x8" over every communicator.
std::string transport_classes_text(const EvidenceSummary& summary, nlohmann::json& inter, nlohmann::json& intra) {
  std::map<std::string, std::map<std::string, std::uint64_t>> classes;
  for (const CommunicatorEvidence& comm : summary.communicators) {
    for (const ChannelConnection& connection : comm.connections) {
      ++classes[std::string(to_string(edge_scope(comm, connection)))][transport_class(connection)];
    }
  }
  inter = nlohmann::json::object();
  intra = nlohmann::json::object();
  std::string text;
  for (const auto& [scope, counts] : classes) {
    text += (text.empty() ? "" : "; ") + scope;
    for (const auto& [klass, count] : counts) {
      text += " " + klass + " x" + std::to_string(count);
      if (scope == to_string(EdgeScope::inter_node)) inter[klass] = count;
      if (scope == to_string(EdgeScope::intra_node)) intra[klass] = count;
    }
  }
  return text.empty() ? "no connection lines in the NCCL logs" : text;
}

struct TransportVerdict {
  nlohmann::json section;     // the "transport" section of -J
  bool gate_failed = false;
  std::string gate_message;
};

// Rank 0: parse the gathered logs, apply --expect-transport, build the section and the summary line.
TransportVerdict transport_verdict(const GatheredLogs& logs, const NcclLogCapture& capture,
                                   const std::optional<ExpectSpec>& spec) {
  EvidenceSummary summary = parse_nccl_log_texts(logs.texts);
  for (const LogInput& input : logs.unreadable) {
    summary.inputs.push_back(input);
    summary.notes.push_back(input.reason);
  }
  TransportVerdict verdict;
  nlohmann::json inter;
  nlohmann::json intra;
  const std::string classes = transport_classes_text(summary, inter, intra);
  std::string versions;
  for (const std::string& version : summary.nccl_versions) versions += (versions.empty() ? "" : ",") + version;
  std::string line = "transport: " + classes + " (NCCL " + (versions.empty() ? std::string("version unknown") : versions) +
                     ", " + std::to_string(logs.texts.size()) + " log(s))";
  nlohmann::json& section = verdict.section;
  section["log_dir"] = capture.temporary ? nlohmann::json(nullptr) : nlohmann::json(capture.plan.log_dir);
  if (capture.temporary) section["log_dir_reason"] = "temporary directory, removed at exit (give --nccl-log-dir)";
  section["log_files"] = logs.files;
  section["nccl_debug"] = capture.plan.debug_level;
  section["nccl_debug_subsys"] = capture.plan.debug_subsys;
  section["logging_notes"] = capture.plan.notes;
  section["inter_node"] = inter;
  section["intra_node"] = intra;
  if (spec) {
    const GateResult gate = check_expectation(summary, *spec);
    section["expect"] = spec->text;
    section["gate"] = to_json(gate, *spec);
    section["status"] = gate.passed ? "passed" : "failed";
    section["reason"] = gate.passed ? nlohmann::json(nullptr) : nlohmann::json(gate.message);
    verdict.gate_failed = !gate.passed;
    verdict.gate_message = gate.message;
    line += gate.passed ? "; expectation '" + spec->text + "' met" : "; expectation '" + spec->text + "' FAILED";
  } else {
    section["expect"] = nullptr;
    section["gate"] = nullptr;
    section["status"] = "not_gated";
    section["reason"] = "no --expect-transport given";
  }
  section["summary"] = line;
  section["evidence"] = to_json(summary);
  return verdict;
}

// ---- run manifest ----

std::string mpi_library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
  int length = 0;
  if (MPI_Get_library_version(text.data(), &length) != MPI_SUCCESS) return "";
  std::string version(text.data(), static_cast<std::size_t>(std::max(0, length)));
  while (!version.empty() && (version.back() == '\n' || version.back() == ' ' || version.back() == '\0')) version.pop_back();
  const auto newline = version.find('\n');  // Open MPI: "Open MPI v4.1.4, package: ..., repo rev: ..., ..."
  return newline == std::string::npos ? version : version.substr(0, newline);
}

std::vector<std::string> gather_hostnames(const MpiContext& context) {
  const std::vector<std::string> all = gather_strings(context, context.world, context.hostname);
  std::vector<std::string> unique;
  for (const std::string& host : all) {
    if (std::find(unique.begin(), unique.end(), host) == unique.end()) unique.push_back(host);
  }
  return unique;
}

// The full manifest (bench/evidence/manifest.hpp) plus coll_perf's flat fields kept for readers of
// schema 1.0 (tool_version, git_commit, world_size, backend, nranks, emulated).
nlohmann::json run_manifest(const Config& config, const MpiContext& context, const std::vector<std::string>& hostnames,
                            const Backend& backend) {
  ManifestInput input;
  input.argv = config.argv;
  input.hostnames = hostnames;
  input.environment = current_environment();
  const std::string mpi = mpi_library_version();
  if (!mpi.empty()) input.mpi = mpi;
  else input.reasons["mpi"] = "MPI_Get_library_version failed";
#if defined(CCLBENCH_WITH_NCCL)
  const nlohmann::json gpu = gpu_environment_json();
  const auto take = [&](const char* key, const char* field) {
    nlohmann::json value = gpu.value(field, nlohmann::json(nullptr));
    const std::string reason = gpu.value(std::string(field) + "_reason", std::string("unknown"));
    if (std::string(key) == "cuda_driver") input.cuda_driver = value;
    else if (std::string(key) == "cuda_runtime") input.cuda_runtime = value;
    else input.nccl = value;
    if (value.is_null()) input.reasons[key] = reason;
  };
  take("cuda_driver", "cuda_driver_version");
  take("cuda_runtime", "cuda_runtime_version");
  take("nccl", "nccl_version");
  input.gpus = gpu.value("gpus", nlohmann::json::array());
  if (gpu.contains("gpus_reason")) input.extra["gpus_note"] = gpu["gpus_reason"];
#else
  input.reasons["cuda_driver"] = "built without CUDA";
  input.reasons["cuda_runtime"] = "built without CUDA";
  input.reasons["nccl"] = "built without NCCL";
  input.reasons["gpus"] = "built without CUDA";
#endif
  input.reasons["nics"] = "per rank in bindings[].allowed_nics (RDMA NICs NCCL may use for the rank's GPU)";
  nlohmann::json manifest = build_manifest(input);
  manifest["tool_version"] = kToolVersion;
  manifest["git_commit"] = kGitCommit;
  manifest["world_size"] = context.world_size;
  manifest["backend"] = backend.name();
  manifest["nranks"] = backend.nranks();
  manifest["emulated"] = backend.emulated();
  return manifest;
}

// ---- binding records ----

// Every rank's record(s), gathered to rank 0 in rank order; rank 0 prints a warning for each rank
// whose CPUs are not local to its GPU. One record per GPU this process drives (-g N gives N), or
// one without GPU for the MPI backend.
nlohmann::json gather_bindings(const Config& config, const MpiContext& context, const Backend& backend,
                               const std::string& program) {
  nlohmann::json local = nlohmann::json::array();
  const char* hca = std::getenv("NCCL_IB_HCA");
  const auto capture = [&](int rank, const std::string& bus_id) {
    topology::BindingInput input;
    input.host = context.hostname;
    input.rank = rank;
    input.local_rank = context.local_rank;
    input.gpu_pci_bus_id = bus_id;
    input.nccl_ib_hca = hca ? hca : "";
    input.sysfs_root = config.sysfs_root;
    try {
      local.push_back(topology::capture_binding_record(input));
    } catch (const std::exception& error) {
      // The API promises not to throw for missing information; a bad bus id or spec still may.
      local.push_back({{"host", context.hostname}, {"rank", rank},
                       {"error", std::string("binding record not captured: ") + error.what()}});
    }
  };
#if defined(CCLBENCH_WITH_NCCL)
  const std::vector<LocalGpuBinding> gpus = local_gpu_bindings(backend);
  for (const LocalGpuBinding& gpu : gpus) capture(gpu.rank, gpu.pci_bus_id);
  if (gpus.empty()) capture(context.world_rank, "");
#else
  (void)backend;
  capture(context.world_rank, "");
#endif
  const std::vector<std::string> gathered = gather_strings(context, context.world, local.dump());
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& text : gathered) {
    const nlohmann::json records = nlohmann::json::parse(text, nullptr, false);
    if (!records.is_array()) continue;
    for (const auto& record : records) {
      all.push_back(record);
      if (record.contains("error")) {
        std::cerr << program << ": warning: rank " << record.value("rank", -1) << ": " << record["error"].get<std::string>() << "\n";
      } else if (record.contains("warning") && record["warning"].is_string()) {
        std::cerr << program << ": warning: " << record["warning"].get<std::string>() << "\n";
      } else if (!record.contains("warning")) {
        if (const auto warning = topology::binding_warning(record)) std::cerr << program << ": warning: " << *warning << "\n";
      }
    }
  }
  return all;
}

// ---- per-case observers: rail counters, algorithm/protocol, test stall ----

// Around every case (never inside the timed loop: before fill, after checking), the node-local
// rank 0 reads the rail counters of its node; deltas are gathered to world rank 0 per node.
class RailCounterObserver final : public CaseObserver {
 public:
  RailCounterObserver(const Config& config, const MpiContext& context) : config_(config), context_(context) {
    if (const char* hca = std::getenv("NCCL_IB_HCA")) options_.expected_rails = rails_from_nccl_ib_hca(hca);
    options_.keep_zero_netdevs = config.all_netdevs;
  }
  void before_case(const CaseSpec&) override {
    if (context_.local_rank == 0) before_ = read_rail_counters(config_.sysfs_root);
  }
  void after_case(CaseResult& result) override {
    std::string local;
    if (context_.local_rank == 0) {
      try {
        const RailSnapshot after = read_rail_counters(config_.sysfs_root);
        nlohmann::json delta = rail_delta_json(before_, after, options_);
        delta["host"] = context_.hostname;
        // The same for every node and case: kept once, in the case's rails object.
        delta.erase("expected_rails");
        delta.erase("min_share");
        delta.erase("sysfs_root");  // --sysfs-root, in the document's notes.rails
        local = delta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } catch (const std::exception& error) {
        local = nlohmann::json({{"host", context_.hostname}, {"error", std::string("rail counters: ") + error.what()}})
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
    const std::vector<std::string> gathered = gather_strings(context_, context_.world, local);
    if (context_.world_rank != 0) return;
    nlohmann::json nodes = nlohmann::json::array();
    nlohmann::json flags = nlohmann::json::array();
    for (const std::string& text : gathered) {
      if (text.empty()) continue;
      nlohmann::json node = nlohmann::json::parse(text, nullptr, false);
      if (node.is_discarded()) continue;
      for (const auto& flag : node.value("flags", nlohmann::json::array())) flags.push_back(node.value("host", "?") + ": " + flag.get<std::string>());
      nodes.push_back(std::move(node));
    }
    // What the counters count is the document's notes.rails, not repeated here.
    // expected_rails and min_share are the same for every case: the document's rails_options.
    result.evidence["rails"] = {
        {"nodes", nodes},
        {"flags", flags}};
  }

 private:
  const Config& config_;
  const MpiContext& context_;
  RailOptions options_;
  RailSnapshot before_;

 public:
  nlohmann::json options_json() const {
    return {{"expected_rails", options_.expected_rails}, {"min_share", options_.min_share},
            {"all_netdevs", options_.keep_zero_netdevs}};
  }
};

// A --tuning-probe file, checked at startup (UsageError when unreadable or of another kind).
nlohmann::json read_tuning_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--tuning-from: cannot read '" + path + "': " + std::strerror(errno));
  nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (!document.is_object() || document.value("kind", "") != "tuning_probe" || !document.contains("cases") ||
      !document["cases"].is_array()) {
    throw UsageError("--tuning-from: '" + path + "' is not a coll_perf --tuning-probe file");
  }
  return document;
}

// --tuning-from FILE: rank 0 attaches the probe's algorithm/protocol to each record.
class TuningAttacher final : public CaseObserver {
 public:
  // `document` is read_tuning_file()'s result on rank 0, null elsewhere (only rank 0 writes).
  TuningAttacher(const std::string& path, const nlohmann::json& document) : path_(path) {
    if (!document.is_object()) return;
    for (const auto& entry : document["cases"]) {
      if (entry.is_object() && entry.contains("case_id") && entry["case_id"].is_string()) {
        by_case_[entry["case_id"].get<std::string>()] = entry;
      }
    }
    nccl_version_ = document.value("nccl_version", nlohmann::json(nullptr));
    enabled_ = true;
  }
  void before_case(const CaseSpec&) override {}
  void after_case(CaseResult& result) override {
    if (!enabled_) return;
    const auto found = by_case_.find(result.spec.case_id());
    if (found == by_case_.end()) {
      result.evidence["tuning"] = nullptr;
      result.evidence["tuning_reason"] = "case not in the probe file " + path_;
      return;
    }
    nlohmann::json tuning = found->second.value("tuning", nlohmann::json(nullptr));
    if (tuning.is_null()) {
      result.evidence["tuning"] = nullptr;
      result.evidence["tuning_reason"] = found->second.value("reason", std::string("the probe recorded no choice"));
      return;
    }
    tuning["probe_file"] = path_;
    tuning["probe_nccl_version"] = nccl_version_;
    result.evidence["tuning"] = tuning;
  }

 private:
  std::string path_;
  bool enabled_ = false;
  std::map<std::string, nlohmann::json> by_case_;
  nlohmann::json nccl_version_;
};

class ObserverList final : public CaseObserver {
 public:
  explicit ObserverList(std::vector<CaseObserver*> observers) : observers_(std::move(observers)) {}
  void before_case(const CaseSpec& spec) override {
    for (CaseObserver* observer : observers_) observer->before_case(spec);
  }
  void after_case(CaseResult& result) override {
    for (CaseObserver* observer : observers_) observer->after_case(result);
  }

 private:
  std::vector<CaseObserver*> observers_;
};

// ---- --tuning-probe ----

// Runs every case once, untimed (fill + one call), with TUNING logging; writes FILE. No records.
int run_tuning_probe(const Config& config, const MpiContext& context, Backend& backend, const std::vector<CaseSpec>& cases,
                     const NcclLogCapture& capture, const std::string& program) {
  std::vector<bool> ran(cases.size(), false);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (backend.unsupported_reason(cases[i])) continue;
    backend.fill(cases[i], 0);
    backend.run_once(cases[i]);
    ran[i] = true;
  }
  const GatheredLogs logs = gather_nccl_logs(capture, context);
  if (context.world_rank != 0) return to_int(ExitCode::ok);
  // NCCL 2.22+ prints TUNING on rank 0 only; older versions on every rank with the same choices.
  std::vector<TuningChoice> choices;
  std::string nccl_version;
  if (!logs.texts.empty()) {
    choices = parse_tuning(logs.texts.front().second, logs.texts.front().first);
    const EvidenceSummary summary = parse_nccl_log_texts({logs.texts.front()});
    if (!summary.nccl_versions.empty()) nccl_version = summary.nccl_versions.front();
  }
  nlohmann::json document = {
      {"schema_version", kResultsSchemaVersion},
      {"kind", "tuning_probe"},
      {"program", program},
      {"argv", config.argv},
      {"nccl_version", nccl_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(nccl_version)},
      {"nranks", backend.nranks()},
      {"note", "one untimed call per case with NCCL_DEBUG_SUBSYS including TUNING; never mixed with timed runs"},
      {"logging_notes", capture.plan.notes},
      {"log_files", logs.files},
      {"cases", match_tuning(cases, ran, choices)}};
  write_file_atomic(config.tuning_probe_path, document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::size_t found = 0;
  for (const auto& entry : document["cases"]) found += entry["tuning"].is_null() ? 0 : 1;
  std::cout << "tuning probe: " << found << " of " << cases.size() << " cases with an algorithm/protocol choice -> "
            << config.tuning_probe_path << "\n";
  return to_int(ExitCode::ok);
}

int run(int argc, char** argv) {
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  std::unique_ptr<MpiSession> session;
  try {
    session = std::make_unique<MpiSession>(&argc, &argv);
  } catch (const FatalError& error) {
    std::cerr << (std::string(program) + ": error: " + error.what() + "\n");  // one write: ranks share stderr
    return to_int(error.code());
  }
  const MpiContext& context = session->context();
  const bool writer = context.world_rank == 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  // Declared before what refers to it: the sink keeps a reference to the Config and is still used
  // by the error handlers below, after the try block's own locals are gone.
  std::optional<Config> parsed;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ResultSink> sink;
  try {
    std::string usage_error;
    nlohmann::json tuning_document;
    try {
      parsed = parse_config(argc, argv);
      if (parsed && !parsed->expect_transport.empty()) parse_expect_spec(parsed->expect_transport);
      if (parsed && writer) {
        check_outputs(*parsed);
        if (!parsed->tuning_from_path.empty()) tuning_document = read_tuning_file(parsed->tuning_from_path);
      }
    } catch (const UsageError& error) {
      usage_error = error.what();
    } catch (const FatalError& error) {
      usage_error = error.what();
    }
    agree_on_usage(context, usage_error);
    if (!parsed) return 0;  // --help
    const Config& config = *parsed;

    // The expectation is checked for syntax before anything runs (a typo must not cost a run).
    std::optional<ExpectSpec> expect;
    if (!config.expect_transport.empty()) expect = parse_expect_spec(config.expect_transport);

    std::vector<CaseSpec> cases = make_cases(config, context.world_size * config.gpus_per_process);
    std::string note;
    const BackendKind kind = resolve_backend(config, note);
    if (kind == BackendKind::mpi) {
      if (const auto refusal = mpi_backend_refusal(config)) throw UsageError(*refusal + " (" + (note.empty() ? "--backend mpi" : note) + ")");
    }
    if (!config.tuning_probe_path.empty() && kind != BackendKind::nccl) {
      throw UsageError("--tuning-probe needs the NCCL backend (" + (note.empty() ? std::string("--backend mpi") : note) + ")");
    }
    // NCCL reads NCCL_DEBUG* once, at its first call: plan the log capture before the backend exists.
    NcclLogCapture capture;
    if (kind == BackendKind::nccl) {
      capture = setup_log_capture(config, context,
                                  config.tuning_probe_path.empty() ? NcclLogPurpose::timed : NcclLogPurpose::probe, program);
    }
    // Test hook: read once, checked against this launch, announced in one line.
    const std::optional<FaultInjection> injection = fault_injection_from_environment();
    if (injection) {
      check_fault_injection_target(*injection, context.world_size, kind == BackendKind::nccl ? config.gpus_per_process : 1);
      if (writer) std::cerr << program << ": " << fault_injection_warning(*injection) << "\n";
    }
    backend = make_backend(kind, config, context, cases, injection);
    if (backend->nranks() != context.world_size * config.gpus_per_process) {
      cases = make_cases(config, backend->nranks());
    }
    cases = agree_on_cases(cases, context);
    if (writer && !note.empty()) std::cerr << program << ": note: " << note << "\n";
    if (writer && backend->emulated()) {
      std::cerr << program << ": note: " << backend->nranks()
                << " ranks share GPUs (--share-gpu): results check correctness only, timings are not performance figures\n";
    }
    if (!config.tuning_probe_path.empty()) return run_tuning_probe(config, context, *backend, cases, capture, program);

    const std::vector<std::string> hostnames = gather_hostnames(context);
    nlohmann::json manifest = writer ? run_manifest(config, context, hostnames, *backend) : nlohmann::json(nullptr);
    const nlohmann::json bindings = gather_bindings(config, context, *backend, program);
    TuningAttacher tuning(config.tuning_from_path, tuning_document);
    sink = std::make_unique<ResultSink>(config, program, writer, manifest);
    sink->set_section("bindings", bindings);
    if (kind != BackendKind::nccl) {
      sink->set_section("transport", nullptr);
      sink->set_section("transport_reason", "MPI backend: no NCCL communicator, transport evidence is not applicable");
    }

    Backend* backend_for_abort = backend.get();
    Watchdog watchdog(context, config.timeout_seconds, [&](const std::string& message) {
      std::cerr << (std::string(program) + ": error: " + message + "\n") << std::flush;  // one write: ranks share stderr
      // The main thread is blocked inside a watched phase, never inside a write: safe to flush.
      try {
        sink->finish("timeout");
      } catch (const std::exception&) {
      }
      backend_for_abort->abort_communication();
    });
    RunnerOptions options{config.iterations, config.warmup_iterations, config.check_iterations, config.batch_average,
                          config.run_cycles};
    Runner runner(*backend, context, options, watchdog, g_stop_signal);
    const bool emulated = backend->emulated();
    TestStallHook stall_hook(context, watchdog);
    RailCounterObserver rails(config, context);
    if (sink) sink->set_section("rails_options", rails.options_json());
    ObserverList observers({&stall_hook, &rails, &tuning});
    const RunOutcome outcome = runner.run(
        cases, &observers, [&](const CaseResult& result) { sink->add(result, emulated); }, [&](int) { sink->end_cycle(); });

    // Transport evidence: NCCL connects lazily, so the connection lines exist only now, after the
    // cases' warm-ups. Every rank reads its own log; rank 0 parses them all.
    std::optional<TransportVerdict> verdict;
    if (kind == BackendKind::nccl) {
      const GatheredLogs logs = gather_nccl_logs(capture, context);
      if (writer) {
        verdict = transport_verdict(logs, capture, expect);
        sink->set_section("transport", verdict->section);
        std::cout << verdict->section["summary"].get<std::string>() << std::endl;
      }
    } else if (writer) {
      std::cout << "transport: not applicable (MPI backend: no NCCL communicator)" << std::endl;
    }

    if (outcome == RunOutcome::interrupted) {
      sink->finish("interrupted");
      const int signal_number = g_stop_signal.load();
      if (writer) std::cerr << program << ": interrupted by signal " << signal_number << " after " << sink->count() << " cases; records are on disk\n";
      return signal_number == SIGTERM ? to_int(ExitCode::interrupted_term) : to_int(ExitCode::interrupted_int);
    }
    sink->finish("complete");
    // The gate decides after every result is on disk; every rank leaves with the same status.
    int gate_failed = 0;
    if (expect) {
      if (writer) {
        if (!verdict) {
          std::cerr << program << ": error: transport expectation '" << expect->text
                    << "' failed: no NCCL evidence (the MPI backend ran; no evidence is a failure)\n";
          gate_failed = 1;
        } else if (verdict->gate_failed) {
          std::cerr << (std::string(program) + ": error: " + verdict->gate_message + "\n");
          gate_failed = 1;
        }
      }
      mpi_check(MPI_Bcast(&gate_failed, 1, MPI_INT, 0, context.world), "MPI_Bcast(gate)", context);
    }
    if (gate_failed) return to_int(ExitCode::transport_mismatch);
    // README: 1 when a case failed; 7 when nothing was measured (every case skipped); else 0.
    int exit_code = to_int(ExitCode::ok);
    if (writer) {
      const std::string nothing = sink->nothing_measured_reason();
      if (sink->any_failed()) {
        exit_code = to_int(ExitCode::cases_failed);
      } else if (!nothing.empty()) {
        exit_code = to_int(ExitCode::nothing_measured);
        std::cerr << (std::string(program) + ": error: nothing measured: " + nothing + "\n");
      }
    }
    mpi_check(MPI_Bcast(&exit_code, 1, MPI_INT, 0, context.world), "MPI_Bcast(status)", context);
    return exit_code;
  } catch (const UsageError& error) {
    if (writer) std::cerr << (std::string(program) + ": error: " + error.what() + "\n");  // one write: ranks share stderr
    return to_int(ExitCode::usage);
  } catch (const FatalError& error) {
    std::cerr << (std::string(program) + ": error: rank " + std::to_string(context.world_rank) + " (" + context.hostname + "): " + error.what() + "\n") << std::flush;
    if (sink) {
      try {
        sink->finish("failed");
      } catch (const std::exception&) {
      }
    }
    if (backend) backend->abort_communication();
    if (context.world_size > 1) abort_all_ranks(context, to_int(error.code()));
    return to_int(error.code());
  } catch (const std::exception& error) {
    std::cerr << (std::string(program) + ": error: rank " + std::to_string(context.world_rank) + " (" + context.hostname + "): " + error.what() + "\n") << std::flush;
    if (backend) backend->abort_communication();
    if (context.world_size > 1) abort_all_ranks(context, to_int(ExitCode::runtime_error));
    return to_int(ExitCode::runtime_error);
  }
}

}  // namespace
}  // namespace cclbench

int main(int argc, char** argv) { return cclbench::run(argc, argv); }
