#pragma once
// The watchdog: a thread that ends every rank when one phase of a case (fill, warm-up, the timed
// loop, a check, the tuning probe's call, or the exchanges around them) runs past its deadline. It
// names the case, size, phase, rank and host, the deadline against the time the phase ran and the
// same collective's smaller sizes, lets the backend abort its communicators, and calls MPI_Abort so
// no rank hangs.
//
// Deadlines are either fixed (-T alone, nccl-tests' meaning) or learned from the run
// (--learn-deadlines, bench/core/deadlines.hpp; -T is then their ceiling). With a ProgressWriter
// (--progress) every phase entered and left is reported, with its deadline, so that a runner outside
// the process can stop a launch whose every process is frozen (no watchdog of its own left).
//
// Phases nest: the runner watches a whole case (its stop vote and result exchanges with the other
// ranks) and each phase inside it. Leaving an inner phase re-arms the enclosing one with a fresh
// deadline, so no exchange between phases is ever unwatched: a peer frozen there (SIGSTOP) would
// otherwise hold this rank in an MPI call forever.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/core/deadlines.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/progress.hpp"
#include "bench/core/runner.hpp"

namespace cclbench {

// After its message, a rank other than 0 waits this long (at most the deadline) before MPI_Abort, so
// rank 0, the writer, has time to time out too and write -J with status "timeout" (a stalled rank
// holds rank 0 in the same collective). 0 for rank 0 and for a single rank.
inline constexpr double kWriterGraceSeconds = 10.0;
double abort_delay_seconds(int world_rank, int world_size, double timeout_seconds);

struct WatchdogOptions {
  double fixed_timeout_s = 0;               // -T without --learn-deadlines; 0: no fixed deadline
  std::optional<DeadlineSettings> learned;  // --learn-deadlines (its ceiling_s is -T)
  const ProgressWriter* progress = nullptr; // --progress
};

class Watchdog final : public PhaseMonitor {
 public:
  // `on_timeout(message)` runs on the watchdog thread before MPI_Abort (print, abort comms).
  Watchdog(const MpiContext& context, WatchdogOptions options, std::function<void(const std::string&)> on_timeout);
  // A fixed -T watchdog (0: none).
  Watchdog(const MpiContext& context, double timeout_seconds, std::function<void(const std::string&)> on_timeout);
  ~Watchdog() override;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void enter(const CaseSpec& spec, Phase phase) override;
  void leave() override;

 private:
  struct Watched {
    std::string what;       // "case ... (size N B, phase) on rank R (host)"
    CaseSpec spec;
    Phase phase = Phase::boundary;
    std::chrono::steady_clock::time_point started;
    Deadline deadline;
    std::string smaller;    // the same collective's smaller sizes, for the message
  };
  void watch();
  Deadline deadline_for(const Watched& entry) const;  // with mutex_ held
  void arm(Watched& entry);                           // with mutex_ held
  void report(const char* event, const Watched& entry, std::optional<double> elapsed_s) const;
  std::string timeout_message(const Watched& entry) const;

  const MpiContext& context_;
  WatchdogOptions options_;
  std::optional<DeadlineModel> model_;
  std::function<void(const std::string&)> on_timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<Watched> watched_;  // the open phases, innermost last; armed while not empty
  std::thread thread_;
};

}  // namespace cclbench
