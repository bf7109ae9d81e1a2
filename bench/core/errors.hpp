#pragma once
// Error types and exit codes shared by every cclbench executable.
// Throw at boundaries; the runner records per-case failures, and main() maps an escaping error to
// one plain stderr line and a distinct exit status.
#include <stdexcept>
#include <string>

namespace cclbench {

enum class ExitCode : int {
  ok = 0,
  cases_failed = 1,        // ran to the end, but some case failed verification or errored
  usage = 2,               // bad flag, value, file or environment: nothing was run
  transport_mismatch = 3,  // --expect-transport gate failed (or had no evidence)
  timeout = 4,             // watchdog fired: a collective did not finish within -T seconds
  runtime_error = 5,       // CUDA/NCCL/MPI/system error
  peer_lost = 6,           // another rank died
  nothing_measured = 7,    // every requested measurement was impossible (e.g. no GPU)
  interrupted_int = 130,   // SIGINT
  interrupted_term = 143,  // SIGTERM
};

inline int to_int(ExitCode code) { return static_cast<int>(code); }

// Bad input from the user: flag, value, file, environment. Exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure with a chosen exit status (runtime errors, timeouts, transport gate...).
class FatalError : public std::runtime_error {
 public:
  FatalError(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

}  // namespace cclbench
