#include "bench/session/run_resources.hpp"

#include <exception>
#include <iostream>
#include <vector>

#include "bench/session/run_manifest.hpp"

namespace cclbench {

std::unique_ptr<ResultSink> open_result_sink(const Config& config, const MpiContext& context, const Backend& backend,
                                             const BackendChoice& choice, const std::string& program) {
  const bool writer = context.world_rank == 0;
  const std::vector<std::string> hostnames = gather_hostnames(context);
  const nlohmann::json environment = gather_environment_by_host(context);  // collective: every rank
  nlohmann::json manifest =
      writer ? run_manifest(config, context, hostnames, backend, environment) : nlohmann::json(nullptr);
  const nlohmann::json bindings = gather_bindings(config, context, backend, program);
  auto sink = std::make_unique<ResultSink>(config, program, writer, manifest);
  sink->set_section("bindings", bindings);
  // The automatic choice fell back (no GPU visible, no NCCL in this build): the document says so, as the console does.
  if (!choice.note.empty()) sink->set_section("backend_note", choice.note);
  if (choice.kind != BackendKind::nccl) {
    sink->set_section("transport", nullptr);
    sink->set_section("transport_reason", "MPI backend: no NCCL communicator, transport evidence is not applicable");
  }
  return sink;
}

std::function<void(const std::string&)> on_watchdog_timeout(RunResources& resources, const std::string& program) {
  Backend* backend_for_abort = resources.backend.get();
  return [&resources, program, backend_for_abort](const std::string& message) {
    std::cerr << (program + ": error: " + message + "\n") << std::flush;  // one write: ranks share stderr
    // The main thread is blocked inside a watched phase, never inside a write: safe to flush.
    try {
      resources.sink->finish("timeout");
    } catch (const std::exception&) {
    }
    backend_for_abort->abort_communication();
  };
}

RunnerOptions runner_options(const Config& config) {
  return {config.iterations, config.warmup_iterations, config.check_iterations, config.batch_average, config.run_cycles};
}

}  // namespace cclbench
