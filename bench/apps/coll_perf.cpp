// coll_perf: collectives over a size sweep, nccl-tests compatible, with exact checking,
// percentiles, and evidence attached. Also built as all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, broadcast_perf, reduce_perf and sendrecv_perf.
// The data flow: config -> context -> cases -> backend -> runner -> results -> reporters. What each
// step decides lives in bench/session (backend choice, outputs, exit status) and the libraries below.
#include <algorithm>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/progress.hpp"
#include "bench/core/runner.hpp"
#include "bench/core/startup_guard.hpp"
#include "bench/core/watchdog.hpp"
#include "bench/evidence/tuning_run.hpp"
#include "bench/session/backend_choice.hpp"
#include "bench/session/run_end.hpp"
#include "bench/session/run_observers.hpp"
#include "bench/session/run_resources.hpp"
#include "bench/session/startup.hpp"
#include "bench/session/stop_signal.hpp"

namespace cclbench {
namespace {

// After the last case: the evidence gathering (NCCL logs, rails) and the writes, as one allowance a
// supervising runner watches (--progress); the in-process watchdog has no case left to watch. Seconds on
// a healthy run (MPI gathers of a few log files, one JSON write); a frozen process there cost 120 s + the
// grace with the first allowance tried (the GPU fault matrix's frozen one-rank probe).
constexpr double kFinishAllowanceSeconds = 45;

// -T alone is a fixed deadline (nccl-tests' meaning); --learn-deadlines learns each phase's deadline
// from the run (bench/core/deadlines.hpp), -T then its ceiling.
WatchdogOptions watchdog_options(const Config& config, const Backend& backend, const ProgressWriter* progress) {
  WatchdogOptions options;
  options.progress = progress;
  if (!config.learn_deadlines) {
    options.fixed_timeout_s = config.timeout_seconds;
    return options;
  }
  DeadlineSettings settings = deadline_settings(backend.name(), backend.nranks(), config.timeout_seconds);
  const MeasurementMode mode = backend.measurement_mode();
  const int calls_per_iteration = std::max(1, mode.graph_launches) * std::max(1, mode.ops_per_launch);
  settings.warm_up_calls = std::max(1, config.warmup_iterations) * calls_per_iteration;
  settings.timed_calls = 3 * std::max(1, config.iterations) * calls_per_iteration;  // per-iteration, gated, batch
  settings.check_calls = 1;
  options.learned = settings;
  return options;
}

int measure(RunResources& resources, const MpiContext& context, const std::string& program, StartupGuard& startup_guard,
            const ProgressWriter* progress) {
  const StartupInput& startup = *resources.startup;
  const Config& config = startup.config;
  const CollectiveRegistry& registry = standard_collectives();
  std::vector<CaseSpec> cases = make_cases(config, registry, context.world_size * config.gpus_per_process);
  const BackendChoice choice = choose_backend(config);
  const NcclLogCapture capture = plan_nccl_log_capture(choice, config, context, program);  // before NCCL's first call
  resources.backend = open_backend(choice, config, context, cases, program);
  Backend& backend = *resources.backend;
  if (backend.nranks() != context.world_size * config.gpus_per_process) cases = make_cases(config, registry, backend.nranks());
  cases = agree_on_cases(cases, registry, context);
  announce_backend(choice, backend, context, program);
  if (!config.tuning_probe_path.empty()) {
    // Every probe call is watched like a timed case's phases: nothing is written before the probe
    // file, so a timeout only ends the ranks.
    Watchdog watchdog(context, watchdog_options(config, backend, progress), [&backend, program](const std::string& message) {
      std::cerr << (program + ": error: " + message + "\n") << std::flush;
      backend.abort_communication();
    });
    startup_guard.disarm();
    const int code = run_tuning_probe(config, context, backend, cases, capture, program, watchdog);
    if (progress) progress->emit({{"event", "finish"}, {"deadline_s", kFinishAllowanceSeconds}});
    return code;
  }

  resources.sink = open_result_sink(config, context, backend, choice, program);
  ResultSink& sink = *resources.sink;
  Watchdog watchdog(context, watchdog_options(config, backend, progress), on_watchdog_timeout(resources, program));
  Runner runner(backend, context, runner_options(config), watchdog, stop_signal());
  const bool emulated = backend.emulated();
  CollPerfObservers observers(config, context, watchdog, startup.tuning_document,
                              capture.active ? capture.own_log_path : std::string());
  sink.set_section("rails_options", observers.rails_options_json());
  startup_guard.disarm();  // the cases start: the -T watchdog watches from here
  const RunOutcome outcome = runner.run(
      cases, &observers, [&](const CaseResult& result) { sink.add(result, emulated); }, [&](int) { sink.end_cycle(); });
  if (progress) progress->emit({{"event", "finish"}, {"deadline_s", kFinishAllowanceSeconds}});

  const std::optional<TransportVerdict> verdict = report_transport(choice, capture, context, startup.expect, sink);
  return finish_run(outcome, verdict, startup.expect, sink, context, program);
}

int run(int argc, char** argv) {
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  // Start-up is bounded by -T too (MPI_Init, the agreements, the backend's initialisation): a peer frozen or
  // unreachable there would otherwise hold every rank until the launcher's bound.
  const bool learned = command_line_has(argc, argv, "--learn-deadlines");
  StartupGuard startup_guard(startup_timeout_seconds(argc, argv), program,
                             learned ? "the start-up allowance of --learn-deadlines, capped by -T" : "-T");
  std::unique_ptr<MpiSession> session;
  try {
    session = std::make_unique<MpiSession>(&argc, &argv);
  } catch (const FatalError& error) {
    std::cerr << (program + ": error: " + error.what() + "\n");  // one write: ranks share stderr
    return to_int(error.code());
  }
  const MpiContext& context = session->context();
  startup_guard.mpi_ready(context);
  install_stop_signal_handlers();
  // --progress: read before the config parser, so that the start-up is reported too.
  std::optional<ProgressWriter> progress;
  if (command_line_has(argc, argv, "--progress")) {
    progress.emplace(2, context.job_rank, context.hostname);
    const double remaining = startup_guard.remaining_seconds();
    progress->emit({{"event", "start"}, {"phase", "start-up"},
                    {"deadline_s", remaining > 0 ? nlohmann::json(remaining) : nlohmann::json(nullptr)}});
  }

  // --split-ranks: declared before the resources, so that the backend (its communicators) is gone
  // before the group's MPI communicators are freed.
  std::unique_ptr<MpiGroupSplit> group;
  const MpiContext* run_context = &context;  // the job's, or this rank's group's after the split
  RunResources resources;
  try {
    std::optional<StartupInput> startup = agree_on_startup(argc, argv, context);  // the whole job agrees on usage
    if (!startup) return 0;  // --help
    if (startup->config.split_ranks > 0) {
      group = std::make_unique<MpiGroupSplit>(context, startup->config.split_ranks);
      run_context = &group->context();
      startup = startup_of_group(std::move(*startup), *run_context);
      if (progress) progress.emplace(2, context.job_rank, context.hostname, run_context->group_index);
    }
    resources.startup = std::move(startup);
    return measure(resources, *run_context, program, startup_guard, progress ? &*progress : nullptr);
  } catch (const UsageError& error) {
    return exit_after_usage_error(error, *run_context, program);
  } catch (const FatalError& error) {
    return exit_after_fatal_error(error, resources, *run_context, program);
  } catch (const std::exception& error) {
    return exit_after_error(error, resources, *run_context, program);
  }
}

}  // namespace
}  // namespace cclbench

int main(int argc, char** argv) { return cclbench::run(argc, argv); }
