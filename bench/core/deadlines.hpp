#pragma once
// Deadlines learned from the run (coll_perf --learn-deadlines): how long each watched phase of a case
// (fill, warm-up, timed iterations, checked runs, the tuning probe's call) may take, from what this
// run has already measured rather than from a worst case fixed before it.
//
//   deadline = floor + slack x predicted  (+ the connect floor while the communicator has not yet
//              completed a collective: NCCL and the MPI backend's TCP transport connect lazily)
//   predicted: the same phase of the same collective at the largest size already measured at or
//              below this one, scaled by bytes (linear: latency-bound small sizes overestimate, never
//              underestimate); else the same phase of any collective, the largest such prediction;
//              else (the first case of a launch) its own warm-up scaled by its calls, and for the warm-up
//              itself the worst case: every byte at 1 MB/s.
//   -T, when given, is a ceiling on every deadline.
//
// A slow but working rail is still measured: its smaller sizes were slow too, so its deadlines are
// long. A phase that runs past its deadline is hundreds of times slower than its own smaller sizes
// predicted, a finding either way, and the watchdog's message says so with the figures.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "bench/core/case.hpp"

namespace cclbench {

// What a watched phase is. `boundary` is the whole case around its phases (the stop vote, the
// result exchanges); `stall` is the test hook's (CCLBENCH_TEST_STALL), watched as the case's warm-up.
enum class Phase { boundary, fill, warm_up, timed, check, probe, stall };
const char* phase_name(Phase phase);  // "fill", "warm-up", "timed iterations", ...

struct DeadlineSettings {
  double floor_s = 20;          // every phase at least: a loaded host's scheduler, the exchanges
  double connect_floor_s = 60;  // added until the communicator's first collective completed
  double slack = 10;            // times the prediction
  double ceiling_s = 0;         // -T; 0: none
  // For the worst case when nothing was measured: collective calls per phase and the launch's ranks.
  int warm_up_calls = 1;
  int timed_calls = 60;  // passes x -n x -G replays x -m
  int check_calls = 1;
  int nranks = 1;
};

// coll_perf's start-up with --learn-deadlines (MPI wire-up, the backend's initialisation: NCCL's
// communicator, the agreements): the phase floor plus NCCL's connect floor at `nranks`.
double startup_allowance_seconds(int nranks);

// The settings for a backend ("nccl" or "mpi") at `nranks` ranks: the floors of docs/results.md.
DeadlineSettings deadline_settings(const std::string& backend, int nranks, double ceiling_s);

struct Deadline {
  double seconds = 0;
  std::optional<double> predicted_s;  // the prediction it scaled, when there was one
  std::string basis;                  // how it was reached, in words (for the watchdog's message)
};

class DeadlineModel {
 public:
  explicit DeadlineModel(DeadlineSettings settings) : settings_(settings) {}

  Deadline deadline(const CaseSpec& spec, Phase phase) const;
  // A phase that completed, and how long it took. A collective phase ends the connect allowance.
  void record(const CaseSpec& spec, Phase phase, double seconds);
  // The measured phases of `spec`'s collective at sizes below or at its own, as "16M 0.61 s, 32M
  // 1.26 s" (the last `limit`), for the watchdog's message.
  std::string history(const CaseSpec& spec, Phase phase, std::size_t limit = 4) const;
  bool connected() const { return connected_; }
  const DeadlineSettings& settings() const { return settings_; }

 private:
  struct Prediction {
    double seconds;
    std::string from;
  };
  std::optional<Prediction> predict(const CaseSpec& spec, Phase phase) const;
  double worst_case_seconds(const CaseSpec& spec, Phase phase) const;

  DeadlineSettings settings_;
  bool connected_ = false;
  // The last warm-up: the first case of a launch has nothing smaller, but its own warm-up ran the same calls.
  std::string warm_up_case_;
  double warm_up_seconds_ = 0;
  // (phase, collective) -> bytes -> the longest time that phase took at that size.
  std::map<std::pair<int, int>, std::map<std::uint64_t, double>> measured_;
};

}  // namespace cclbench
