#pragma once
#include <vector>

#include "bench/core/case.hpp"

namespace cclbench {

// Nearest-rank percentile (as nccl-tests' -I): the smallest sample with at least p% of samples at
// or below it, i.e. sorted[ceil(p/100 * n) - 1]. p in (0, 100]. `sorted` must be ascending, non-empty.
double nearest_rank_percentile(const std::vector<double>& sorted, double p);

// mean/min/p50/p95/p99/max and CV (sample standard deviation / mean, in %; 0 for one sample).
TimeStats summarize(std::vector<double> samples);

// One rank's share of a case, for the report's straggler check: its mean per-iteration time and
// the number of iterations in which its time was the max over ranks (ties count for every tied
// rank, so the counts of a case may sum to more than its iterations). `own` and `slowest` (the
// element-wise max over ranks) have one entry per iteration, the same length.
struct RankShare {
  double mean_us = 0;
  int slowest_iterations = 0;
};
RankShare rank_share(const std::vector<double>& own, const std::vector<double>& slowest);

// Per-iteration element-wise max across ranks is computed by the runner; these are its inputs.
struct Bandwidth {
  double algbw_gbps;
  double busbw_gbps;
};
// GB = 1e9 bytes. time_us must be > 0.
Bandwidth bandwidth_of(const CaseSpec& spec, double time_us);

}  // namespace cclbench
