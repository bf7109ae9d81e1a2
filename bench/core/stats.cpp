#include "bench/core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace cclbench {

double nearest_rank_percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) throw std::invalid_argument("percentile of no samples");
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

TimeStats summarize(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("statistics of no samples");
  std::sort(samples.begin(), samples.end());
  TimeStats stats;
  const double n = static_cast<double>(samples.size());
  stats.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  stats.min = samples.front();
  stats.max = samples.back();
  stats.p50 = nearest_rank_percentile(samples, 50);
  stats.p95 = nearest_rank_percentile(samples, 95);
  stats.p99 = nearest_rank_percentile(samples, 99);
  if (samples.size() > 1 && stats.mean > 0) {
    double squares = 0;
    for (double sample : samples) squares += (sample - stats.mean) * (sample - stats.mean);
    stats.cv_pct = std::sqrt(squares / (n - 1)) / stats.mean * 100.0;
  }
  return stats;
}

RankShare rank_share(const std::vector<double>& own, const std::vector<double>& slowest) {
  if (own.empty() || own.size() != slowest.size()) throw std::invalid_argument("rank share needs one time per iteration");
  RankShare share;
  share.mean_us = std::accumulate(own.begin(), own.end(), 0.0) / static_cast<double>(own.size());
  // slowest[i] is the MPI_MAX of the ranks' own[i]: the max is one of the inputs, bit for bit.
  for (std::size_t i = 0; i < own.size(); ++i) share.slowest_iterations += own[i] == slowest[i] ? 1 : 0;
  return share;
}

Bandwidth bandwidth_of(const CaseSpec& spec, double time_us) {
  const CollectiveDescriptor& descriptor = spec.collective_descriptor();
  const double seconds = time_us * 1e-6;
  const double algbw = static_cast<double>(descriptor.algbw_bytes(spec.counts, spec.nranks)) / 1e9 / seconds;
  return {algbw, algbw * descriptor.bus_factor(spec.nranks)};
}

}  // namespace cclbench
