#pragma once
// What a coll_perf run holds while its cases run, and how it is put together.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"
#include "bench/session/backend_choice.hpp"
#include "bench/session/result_sink.hpp"
#include "bench/session/startup.hpp"

namespace cclbench {

// Declared before the run's own locals: the error paths still finish the sink and abort the
// backend after those are gone, and the sink keeps a reference to the Config.
struct RunResources {
  std::optional<StartupInput> startup;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ResultSink> sink;
};

// The sink with the document's sections known before the first case: manifest (rank 0), bindings
// (gathered from every rank) and, for the MPI backend, why there is no transport evidence.
std::unique_ptr<ResultSink> open_result_sink(const Config& config, const MpiContext& context, const Backend& backend,
                                             const BackendChoice& choice, const std::string& program);

// The watchdog's last act: say why, write "timeout" into the outputs, make the backend give up.
std::function<void(const std::string&)> on_watchdog_timeout(RunResources& resources, const std::string& program);

RunnerOptions runner_options(const Config& config);

}  // namespace cclbench
