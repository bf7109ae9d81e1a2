#pragma once
// The -T watchdog: a thread that ends every rank when one phase of a case (fill, warm-up, the
// timed loop, a check, or the exchanges around them) runs longer than the timeout. It names the
// case, size, phase, rank and host, lets the backend abort its communicators, and calls MPI_Abort
// so no rank hangs.
//
// Phases nest: the runner watches a whole case (its stop vote and result exchanges with the other
// ranks) and each phase inside it. Leaving an inner phase re-arms the enclosing one with a fresh
// deadline, so no exchange between phases is ever unwatched: a peer frozen there (SIGSTOP) would
// otherwise hold this rank in an MPI call forever.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"

namespace cclbench {

// After its message, a rank other than 0 waits this long (at most -T) before MPI_Abort, so rank 0,
// the writer, has time to time out too and write -J with status "timeout" (a stalled rank holds
// rank 0 in the same collective). 0 for rank 0 and for a single rank.
inline constexpr double kWriterGraceSeconds = 10.0;
double abort_delay_seconds(int world_rank, int world_size, double timeout_seconds);

class Watchdog final : public PhaseMonitor {
 public:
  // `on_timeout(message)` runs on the watchdog thread before MPI_Abort (print, abort comms).
  Watchdog(const MpiContext& context, double timeout_seconds, std::function<void(const std::string&)> on_timeout);
  ~Watchdog() override;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void enter(const CaseSpec& spec, const char* phase) override;
  void leave() override;

 private:
  void watch();
  void arm_innermost();  // with mutex_ held

  const MpiContext& context_;
  std::chrono::duration<double> timeout_;
  std::function<void(const std::string&)> on_timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<std::string> watched_;  // what each open phase is, innermost last; armed while not empty
  std::thread thread_;
};

}  // namespace cclbench
