#include "bench/session/exit_status.hpp"

#include <csignal>

namespace cclbench {

ExitCode exit_code_for(const RunEnding& ending) {
  if (ending.interrupted) {
    return ending.stop_signal == SIGTERM ? ExitCode::interrupted_term : ExitCode::interrupted_int;
  }
  if (ending.transport_gate_failed) return ExitCode::transport_mismatch;
  if (ending.any_case_failed) return ExitCode::cases_failed;
  if (ending.nothing_measured) return ExitCode::nothing_measured;
  return ExitCode::ok;
}

}  // namespace cclbench
