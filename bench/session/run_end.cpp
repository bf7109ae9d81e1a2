#include "bench/session/run_end.hpp"

#include <iostream>

#include "bench/session/exit_status.hpp"
#include "bench/session/stop_signal.hpp"

namespace cclbench {
namespace {

// Rank 0 decides whether --expect-transport was met and says why not; every rank learns it.
bool agree_on_gate(const std::optional<TransportVerdict>& verdict, const std::optional<ExpectSpec>& expect,
                   const MpiContext& context, const std::string& program) {
  if (!expect) return false;
  int gate_failed = 0;
  if (context.world_rank == 0) {
    if (!verdict) {
      std::cerr << program << ": error: transport expectation '" << expect->text
                << "' failed: no NCCL evidence (the MPI backend ran; no evidence is a failure)\n";
      gate_failed = 1;
    } else if (verdict->gate_failed) {
      std::cerr << (program + ": error: " + verdict->gate_message + "\n");
      gate_failed = 1;
    }
  }
  mpi_check(MPI_Bcast(&gate_failed, 1, MPI_INT, 0, context.world), "MPI_Bcast(gate)", context);
  return gate_failed != 0;
}

// Rank 0 decides from the records (a failed case, or nothing measured) and every rank learns it.
int agree_on_case_status(RunEnding ending, const ResultSink& sink, const MpiContext& context, const std::string& program) {
  int exit_code = to_int(ExitCode::ok);
  if (context.world_rank == 0) {
    const std::string nothing = sink.nothing_measured_reason();
    ending.any_case_failed = sink.any_failed();
    ending.nothing_measured = !nothing.empty();
    exit_code = to_int(exit_code_for(ending));
    if (exit_code == to_int(ExitCode::nothing_measured)) {
      std::cerr << (program + ": error: nothing measured: " + nothing + "\n");
    }
  }
  mpi_check(MPI_Bcast(&exit_code, 1, MPI_INT, 0, context.world), "MPI_Bcast(status)", context);
  return exit_code;
}

void print_rank_error(const std::exception& error, const MpiContext& context, const std::string& program) {
  std::cerr << (program + ": error: rank " + std::to_string(context.world_rank) + " (" + context.hostname + "): " +
                error.what() + "\n")
            << std::flush;
}

}  // namespace

std::optional<TransportVerdict> report_transport(const BackendChoice& choice, const NcclLogCapture& capture,
                                                 const MpiContext& context, const std::optional<ExpectSpec>& expect,
                                                 ResultSink& sink) {
  const bool writer = context.world_rank == 0;
  if (choice.kind != BackendKind::nccl) {
    if (writer) std::cout << "transport: not applicable (MPI backend: no NCCL communicator)" << std::endl;
    return std::nullopt;
  }
  const GatheredLogs logs = gather_nccl_logs(capture, context);
  if (!writer) return std::nullopt;
  TransportVerdict verdict = transport_verdict(logs, capture, expect);
  sink.set_section("transport", verdict.section);
  std::cout << verdict.section["summary"].get<std::string>() << std::endl;
  return verdict;
}

int finish_run(RunOutcome outcome, const std::optional<TransportVerdict>& verdict,
               const std::optional<ExpectSpec>& expect, ResultSink& sink, const MpiContext& context,
               const std::string& program) {
  RunEnding ending;
  if (outcome == RunOutcome::interrupted) {
    sink.finish("interrupted");
    ending.interrupted = true;
    ending.stop_signal = stop_signal().load();
    if (context.world_rank == 0) {
      std::cerr << program << ": interrupted by signal " << ending.stop_signal << " after " << sink.count()
                << " cases; records are on disk\n";
    }
    return to_int(exit_code_for(ending));
  }
  sink.finish("complete");
  // The gate decides after every result is on disk; every rank leaves with the same status.
  ending.transport_gate_failed = agree_on_gate(verdict, expect, context, program);
  if (ending.transport_gate_failed) return to_int(exit_code_for(ending));
  return agree_on_case_status(ending, sink, context, program);
}

int exit_after_usage_error(const UsageError& error, const MpiContext& context, const std::string& program) {
  if (context.world_rank == 0) std::cerr << (program + ": error: " + error.what() + "\n");  // one write: ranks share stderr
  return to_int(ExitCode::usage);
}

int exit_after_fatal_error(const FatalError& error, RunResources& resources, const MpiContext& context,
                           const std::string& program) {
  print_rank_error(error, context, program);
  if (resources.sink) {
    try {
      resources.sink->finish("failed");
    } catch (const std::exception&) {
    }
  }
  if (resources.backend) resources.backend->abort_communication();
  if (context.world_size > 1) abort_all_ranks(context, to_int(error.code()));
  return to_int(error.code());
}

int exit_after_error(const std::exception& error, RunResources& resources, const MpiContext& context,
                     const std::string& program) {
  print_rank_error(error, context, program);
  if (resources.backend) resources.backend->abort_communication();
  if (context.world_size > 1) abort_all_ranks(context, to_int(ExitCode::runtime_error));
  return to_int(ExitCode::runtime_error);
}

}  // namespace cclbench
