#pragma once
// How a coll_perf run ends: the transport evidence read after the cases, the exit status every rank
// agrees on, and the error paths.
#include <exception>
#include <optional>
#include <string>

#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"
#include "bench/evidence/nccl_log_capture.hpp"
#include "bench/evidence/transport_gate.hpp"
#include "bench/evidence/transport_verdict.hpp"
#include "bench/session/backend_choice.hpp"
#include "bench/session/result_sink.hpp"
#include "bench/session/run_resources.hpp"

namespace cclbench {

// NCCL connects lazily, so the connection lines exist only after the cases' warm-ups: every rank
// reads its own log, rank 0 parses them all, sets the transport section and prints its summary
// (MPI backend: a line saying it does not apply). The verdict is rank 0's; nullopt elsewhere.
std::optional<TransportVerdict> report_transport(const BackendChoice& choice, const NcclLogCapture& capture,
                                                 const MpiContext& context, const std::optional<ExpectSpec>& expect,
                                                 ResultSink& sink);

// Writes the final outputs and returns the exit status (exit_status.hpp), the same on every rank.
int finish_run(RunOutcome outcome, const std::optional<TransportVerdict>& verdict,
               const std::optional<ExpectSpec>& expect, ResultSink& sink, const MpiContext& context,
               const std::string& program);

// Error paths: rank 0 prints a usage error (exit 2); a fatal or other error is printed by the rank
// that had it, the outputs say "failed", and every rank is ended (no hangs).
int exit_after_usage_error(const UsageError& error, const MpiContext& context, const std::string& program);
int exit_after_fatal_error(const FatalError& error, RunResources& resources, const MpiContext& context,
                           const std::string& program);
int exit_after_error(const std::exception& error, RunResources& resources, const MpiContext& context,
                     const std::string& program);

}  // namespace cclbench
