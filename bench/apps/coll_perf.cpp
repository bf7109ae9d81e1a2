// coll_perf: collectives over a size sweep, nccl-tests compatible, with exact checking,
// percentiles, and evidence attached. Also built as all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, broadcast_perf, reduce_perf and sendrecv_perf.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/reporters.hpp"
#include "bench/core/runner.hpp"
#include "bench/core/units.hpp"
#include "bench/core/version.hpp"
#include "bench/core/watchdog.hpp"
#include "bench/mpi/mpi_backend.hpp"
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
      : config_(config), program_(std::move(program)), writer_(writer), manifest_(std::move(manifest)), table_(std::cout) {}

  void add(const CaseResult& result, bool emulated) {
    if (!writer_) return;
    nlohmann::json record = case_record(result, config_.point, emulated);
    if (!config_.quiet) table_.add(result);
    if (!config_.jsonl_path.empty()) append_line_durable(config_.jsonl_path, record.dump());
    records_.push_back(std::move(record));
    flush("running");
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

 private:
  void flush(const std::string& status) {
    if (!config_.json_path.empty()) {
      nlohmann::json document = {{"schema_version", kResultsSchemaVersion},
                                 {"program", program_},
                                 {"status", status},
                                 {"manifest", manifest_},
                                 {"cases", records_}};
      for (const auto& [key, value] : sections_.items()) document[key] = value;
      write_file_atomic(config_.json_path, document.dump(2) + "\n");
    }
    if (!config_.csv_path.empty()) {
      std::string csv = csv_header() + "\n";
      for (const auto& record : records_) csv += csv_row(record) + "\n";
      write_file_atomic(config_.csv_path, csv);
    }
  }

  const Config& config_;
  std::string program_;
  bool writer_;
  nlohmann::json manifest_;
  nlohmann::json sections_ = nlohmann::json::object();
  ConsoleTable table_;
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
  if (!config.log_dir.empty()) make_directories(config.log_dir);
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

std::unique_ptr<Backend> make_backend(const Config& config, const MpiContext& context, const std::vector<CaseSpec>& cases,
                                      std::string& note) {
  BackendKind kind = config.backend;
#if defined(CCLBENCH_WITH_NCCL)
  if (kind == BackendKind::automatic) {
    std::string reason;
    kind = visible_gpu_count(&reason) > 0 ? BackendKind::nccl : BackendKind::mpi;
    if (kind == BackendKind::mpi) note = "no GPU visible (" + reason + "): running the MPI backend on host memory";
  }
  if (kind == BackendKind::nccl) return make_nccl_backend(config, context);
#else
  if (kind == BackendKind::nccl) {
    throw UsageError("--backend nccl: this build has no CUDA/NCCL support (rebuild with the CUDA toolkit and NCCL)");
  }
  if (kind == BackendKind::automatic) note = "built without CUDA/NCCL: running the MPI backend on host memory";
#endif
  return make_mpi_backend(context, cases);
}

nlohmann::json base_manifest(const Config& config, const MpiContext& context) {
  return {{"tool", "cclbench"},
          {"tool_version", kToolVersion},
          {"git_commit", kGitCommit},
          {"argv", config.argv},
          {"world_size", context.world_size},
          {"hostname", context.hostname}};
}

int run(int argc, char** argv) {
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  std::unique_ptr<MpiSession> session;
  try {
    session = std::make_unique<MpiSession>(&argc, &argv);
  } catch (const FatalError& error) {
    std::cerr << program << ": error: " << error.what() << "\n";
    return to_int(error.code());
  }
  const MpiContext& context = session->context();
  const bool writer = context.world_rank == 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  std::unique_ptr<Backend> backend;
  std::unique_ptr<ResultSink> sink;
  try {
    std::optional<Config> parsed;
    std::string usage_error;
    try {
      parsed = parse_config(argc, argv);
      if (parsed && writer) check_outputs(*parsed);
    } catch (const UsageError& error) {
      usage_error = error.what();
    } catch (const FatalError& error) {
      usage_error = error.what();
    }
    agree_on_usage(context, usage_error);
    if (!parsed) return 0;  // --help
    const Config& config = *parsed;

    std::vector<CaseSpec> cases = make_cases(config, context.world_size * config.gpus_per_process);
    std::string note;
    backend = make_backend(config, context, cases, note);
    if (backend->nranks() != context.world_size * config.gpus_per_process) {
      cases = make_cases(config, backend->nranks());
    }
    cases = agree_on_cases(cases, context);
    if (writer && !note.empty()) std::cerr << program << ": note: " << note << "\n";
    if (writer && backend->emulated()) {
      std::cerr << program << ": note: " << backend->nranks()
                << " ranks share GPUs (--share-gpu): results check correctness only, timings are not performance figures\n";
    }

    nlohmann::json manifest = base_manifest(config, context);
    manifest["backend"] = backend->name();
    manifest["nranks"] = backend->nranks();
    manifest["emulated"] = backend->emulated();
    sink = std::make_unique<ResultSink>(config, program, writer, manifest);

    Backend* backend_for_abort = backend.get();
    Watchdog watchdog(context, config.timeout_seconds, [&](const std::string& message) {
      std::cerr << program << ": error: " << message << std::endl;
      // The main thread is blocked inside a watched phase, never inside a write: safe to flush.
      try {
        sink->finish("timeout");
      } catch (const std::exception&) {
      }
      backend_for_abort->abort_communication();
    });
    RunnerOptions options{config.iterations, config.warmup_iterations, config.check_iterations, config.batch_average};
    Runner runner(*backend, context, options, watchdog, g_stop_signal);
    const bool emulated = backend->emulated();
    TestStallHook stall_hook(context, watchdog);
    const RunOutcome outcome = runner.run(cases, &stall_hook, [&](const CaseResult& result) { sink->add(result, emulated); });

    if (outcome == RunOutcome::interrupted) {
      sink->finish("interrupted");
      const int signal_number = g_stop_signal.load();
      if (writer) std::cerr << program << ": interrupted by signal " << signal_number << " after " << sink->count() << " cases; records are on disk\n";
      return signal_number == SIGTERM ? to_int(ExitCode::interrupted_term) : to_int(ExitCode::interrupted_int);
    }
    sink->finish("complete");
    return sink->any_failed() ? to_int(ExitCode::cases_failed) : to_int(ExitCode::ok);
  } catch (const UsageError& error) {
    if (writer) std::cerr << program << ": error: " << error.what() << "\n";
    return to_int(ExitCode::usage);
  } catch (const FatalError& error) {
    std::cerr << program << ": error: rank " << context.world_rank << " (" << context.hostname << "): " << error.what() << std::endl;
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
    std::cerr << program << ": error: rank " << context.world_rank << " (" << context.hostname << "): " << error.what() << std::endl;
    if (backend) backend->abort_communication();
    if (context.world_size > 1) abort_all_ranks(context, to_int(ExitCode::runtime_error));
    return to_int(ExitCode::runtime_error);
  }
}

}  // namespace
}  // namespace cclbench

int main(int argc, char** argv) { return cclbench::run(argc, argv); }
