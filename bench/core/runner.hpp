#pragma once
// The measurement sequence, the same for every backend:
//   per case: unsupported? -> fill -> warm-up -> timed loop -> per-iteration max over ranks ->
//   statistics and bandwidth -> checked runs on fresh data -> CaseResult
// Rank 0 decides the case list and iteration counts and broadcasts them, so every rank runs exactly
// the same sequence. Nothing but the collective runs inside the timed loop.
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bench/core/backend.hpp"
#include "bench/core/case.hpp"
#include "bench/core/config.hpp"
#include "bench/core/deadlines.hpp"
#include "bench/core/mpi_context.hpp"

namespace cclbench {

// The cases of a config for `nranks` ranks, in nccl-tests order: collective, dtype, op, size,
// then out-of-place before in-place. Data-movement collectives get op none once. Each case points at
// its descriptor in `registry` (the app's list, e.g. bench/collectives' standard_collectives()).
std::vector<CaseSpec> make_cases(const Config& config, const CollectiveRegistry& registry, int nranks);

// Rank 0's list, received by every rank (serialized and broadcast over `context.world`).
std::vector<CaseSpec> agree_on_cases(const std::vector<CaseSpec>& local_cases, const CollectiveRegistry& registry,
                                     const MpiContext& context);

// Hooks around each case, called on every rank (they may communicate). `before` runs before
// fill, `after` after the result is final; `after` may attach evidence to the result.
class CaseObserver {
 public:
  virtual ~CaseObserver() = default;
  virtual void before_case(const CaseSpec& spec) = 0;
  virtual void after_case(CaseResult& result) = 0;
};

// Told what phase runs, so a watchdog can name it when it hangs and learn from how long it took.
class PhaseMonitor {
 public:
  virtual ~PhaseMonitor() = default;
  virtual void enter(const CaseSpec& spec, Phase phase) = 0;
  virtual void leave() = 0;
};

struct RunnerOptions {
  int iterations = 20;
  int warmup_iterations = 1;
  int check_iterations = 1;
  BatchAverage batch_average = BatchAverage::mean;
  int cycles = 1;  // -N: sweeps over the case list; 0 = until the stop signal
};

enum class RunOutcome { complete, interrupted };

class Runner {
 public:
  Runner(Backend& backend, const MpiContext& context, RunnerOptions options, PhaseMonitor& monitor,
         const std::atomic<int>& stop_signal);

  // Runs every case, options.cycles times (each result says its cycle), handing each finished
  // result to `on_result` (on every rank; rank 0 writes) and calling `on_cycle_end` after each
  // complete cycle. Stops between cases, on every rank together, once `stop_signal` is non-zero on
  // any rank.
  RunOutcome run(const std::vector<CaseSpec>& cases, CaseObserver* observer,
                 const std::function<void(const CaseResult&)>& on_result,
                 const std::function<void(int cycle)>& on_cycle_end = {});

  CaseResult run_case(const CaseSpec& spec);

 private:
  Backend& backend_;
  const MpiContext& context_;
  RunnerOptions options_;
  PhaseMonitor& monitor_;
  const std::atomic<int>& stop_signal_;
};

}  // namespace cclbench
