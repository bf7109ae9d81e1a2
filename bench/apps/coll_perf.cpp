// coll_perf: collectives over a size sweep, nccl-tests compatible, with exact checking,
// percentiles, and evidence attached. Also built as all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, alltoall_perf, broadcast_perf, reduce_perf and sendrecv_perf.
// The data flow: config -> context -> cases -> backend -> runner -> results -> reporters. What each
// step decides lives in bench/session (backend choice, outputs, exit status) and the libraries below.
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
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

int measure(RunResources& resources, const MpiContext& context, const std::string& program, StartupGuard& startup_guard) {
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
    startup_guard.disarm();
    return run_tuning_probe(config, context, backend, cases, capture, program);
  }

  resources.sink = open_result_sink(config, context, backend, choice, program);
  ResultSink& sink = *resources.sink;
  Watchdog watchdog(context, config.timeout_seconds, on_watchdog_timeout(resources, program));
  Runner runner(backend, context, runner_options(config), watchdog, stop_signal());
  const bool emulated = backend.emulated();
  CollPerfObservers observers(config, context, watchdog, startup.tuning_document,
                              capture.active ? capture.own_log_path : std::string());
  sink.set_section("rails_options", observers.rails_options_json());
  startup_guard.disarm();  // the cases start: the -T watchdog watches from here
  const RunOutcome outcome = runner.run(
      cases, &observers, [&](const CaseResult& result) { sink.add(result, emulated); }, [&](int) { sink.end_cycle(); });

  const std::optional<TransportVerdict> verdict = report_transport(choice, capture, context, startup.expect, sink);
  return finish_run(outcome, verdict, startup.expect, sink, context, program);
}

int run(int argc, char** argv) {
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  // Start-up is bounded by -T too (MPI_Init, the agreements, the backend's initialisation): a peer frozen or
  // unreachable there would otherwise hold every rank until the launcher's bound.
  StartupGuard startup_guard(startup_timeout_seconds(argc, argv), program);
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

  RunResources resources;
  try {
    resources.startup = agree_on_startup(argc, argv, context);
    if (!resources.startup) return 0;  // --help
    return measure(resources, context, program, startup_guard);
  } catch (const UsageError& error) {
    return exit_after_usage_error(error, context, program);
  } catch (const FatalError& error) {
    return exit_after_fatal_error(error, resources, context, program);
  } catch (const std::exception& error) {
    return exit_after_error(error, resources, context, program);
  }
}

}  // namespace
}  // namespace cclbench

int main(int argc, char** argv) { return cclbench::run(argc, argv); }
