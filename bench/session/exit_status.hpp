#pragma once
// coll_perf's exit status once the cases ran (docs/results.md "Exit status"; the error paths map their
// exceptions in run_end.hpp).
#include "bench/core/errors.hpp"

namespace cclbench {

struct RunEnding {
  bool interrupted = false;            // stopped between cases by a signal (on any rank)
  int stop_signal = 0;                 // the signal this rank received; 0 where another rank got it
  bool transport_gate_failed = false;  // --expect-transport not met (or no NCCL evidence for it)
  bool any_case_failed = false;        // a case failed verification or errored
  bool nothing_measured = false;       // every case was skipped
};

// In this order: interrupted (SIGTERM 143, else 130), transport gate (3), a failed case (1),
// nothing measured (7), else 0.
ExitCode exit_code_for(const RunEnding& ending);

}  // namespace cclbench
