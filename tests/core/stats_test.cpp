#include "bench/core/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <stdexcept>

namespace cclbench {
namespace {

TEST(Percentile, NearestRankDefinition) {
  const std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(nearest_rank_percentile(ten, 50), 5);   // ceil(5) = 5th
  EXPECT_EQ(nearest_rank_percentile(ten, 95), 10);  // ceil(9.5) = 10th
  EXPECT_EQ(nearest_rank_percentile(ten, 99), 10);
  EXPECT_EQ(nearest_rank_percentile(ten, 10), 1);
  EXPECT_EQ(nearest_rank_percentile(ten, 11), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(nearest_rank_percentile(hundred, 99), 99);
  EXPECT_EQ(nearest_rank_percentile(hundred, 95), 95);
  EXPECT_EQ(nearest_rank_percentile({7.0}, 99), 7.0);
  EXPECT_THROW(nearest_rank_percentile({}, 50), std::invalid_argument);
}

TEST(Summarize, MeanMinMaxAndSampleCv) {
  const TimeStats stats = summarize({4, 2, 6, 8});
  EXPECT_DOUBLE_EQ(stats.mean, 5);
  EXPECT_DOUBLE_EQ(stats.min, 2);
  EXPECT_DOUBLE_EQ(stats.max, 8);
  EXPECT_DOUBLE_EQ(stats.p50, 4);
  // sample standard deviation of {2,4,6,8} = sqrt(20/3)
  EXPECT_NEAR(stats.cv_pct, std::sqrt(20.0 / 3.0) / 5 * 100, 1e-12);
  EXPECT_DOUBLE_EQ(summarize({3}).cv_pct, 0);
}

// A latency-like set of 100 samples, values chosen so p50, p95, p99 and max all differ, with the
// expected statistics worked out by hand (nearest rank: the ceil(p/100 x 100)-th smallest).
//   90 x 10, 5 x 20 (ranks 91-95), 3 x 50 (96-98), 1 x 80 (99th), 1 x 200 (100th)
//   p50 = 50th = 10, p95 = 95th = 20, p99 = 99th = 80, max = 200
//   mean = (900 + 100 + 150 + 80 + 200) / 100 = 14.3
//   sum of squares 64900; sum of squared deviations 64900 - 100 x 14.3^2 = 44451; / 99 = 449
//   CV = sqrt(449) / 14.3 x 100 = 148.1791615413... %
std::vector<double> hand_set() {
  std::vector<double> samples;
  // Interleaved, not sorted: summarize() must sort.
  for (int i = 0; i < 90; ++i) {
    samples.push_back(10);
    if (i == 7) samples.push_back(200);
    if (i % 20 == 3) samples.push_back(20);  // i = 3, 23, 43, 63, 83
    if (i == 50 || i == 60 || i == 70) samples.push_back(50);
    if (i == 33) samples.push_back(80);
  }
  return samples;
}

TEST(Summarize, HandWorkedSetWherePercentilesAndMaxDiffer) {
  const std::vector<double> samples = hand_set();
  ASSERT_EQ(samples.size(), 100u);
  const TimeStats stats = summarize(samples);
  EXPECT_DOUBLE_EQ(stats.min, 10);
  EXPECT_DOUBLE_EQ(stats.p50, 10);
  EXPECT_DOUBLE_EQ(stats.p95, 20);
  EXPECT_DOUBLE_EQ(stats.p99, 80);
  EXPECT_DOUBLE_EQ(stats.max, 200);
  EXPECT_NEAR(stats.mean, 14.3, 1e-12);
  EXPECT_NEAR(stats.cv_pct, 148.17916154, 1e-6);
}

// 20 samples 1..20 (shuffled): p50 = 10th = 10, p95 = ceil(19)-th = 19, p99 = ceil(19.8)-th = 20 =
// max. Mean 10.5; sample variance 35 (n(n+1)/12 for 1..n); CV = sqrt(35) / 10.5 = 56.3436169819...%.
TEST(Summarize, TwentySamplesHandWorked) {
  const TimeStats stats = summarize({7, 14, 1, 20, 9, 3, 18, 12, 5, 16, 2, 11, 19, 6, 15, 10, 4, 17, 8, 13});
  EXPECT_DOUBLE_EQ(stats.p50, 10);
  EXPECT_DOUBLE_EQ(stats.p95, 19);
  EXPECT_DOUBLE_EQ(stats.p99, 20);
  EXPECT_DOUBLE_EQ(stats.max, 20);
  EXPECT_DOUBLE_EQ(stats.mean, 10.5);
  EXPECT_NEAR(stats.cv_pct, 56.34361698, 1e-6);
}

// A second, deliberately naive implementation: the p-th percentile is the smallest sample x with
// at least p% of the samples <= x (counted, no sorting, integer comparison); mean and CV in long
// double, two passes.
double naive_percentile(const std::vector<double>& samples, int p) {
  double best = 0;
  bool found = false;
  for (double candidate : samples) {
    std::size_t at_or_below = 0;
    for (double other : samples) at_or_below += other <= candidate ? 1 : 0;
    if (at_or_below * 100 >= static_cast<std::size_t>(p) * samples.size() && (!found || candidate < best)) {
      best = candidate;
      found = true;
    }
  }
  return best;
}

TEST(Summarize, AgreesWithANaiveImplementationOnSkewedSets) {
  std::uint32_t state = 12345;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;  // Numerical Recipes LCG
    return state >> 8;
  };
  for (std::size_t n : {100u, 137u, 200u, 1000u}) {
    SCOPED_TRACE(n);
    std::vector<double> samples;
    for (std::size_t i = 0; i < n; ++i) {
      const double base = 5.0 + static_cast<double>(next() % 100000) / 10000.0;  // 5..15 us
      const bool tail = next() % 25 == 0;                                         // ~4% slow iterations
      samples.push_back(tail ? base * (3 + next() % 40) : base);
    }
    long double sum = 0;
    for (double x : samples) sum += x;
    const long double mean = sum / static_cast<long double>(n);
    long double squares = 0;
    for (double x : samples) squares += (x - mean) * (x - mean);
    const long double cv = std::sqrt(squares / static_cast<long double>(n - 1)) / mean * 100;

    const TimeStats stats = summarize(samples);
    EXPECT_EQ(stats.p50, naive_percentile(samples, 50));
    EXPECT_EQ(stats.p95, naive_percentile(samples, 95));
    EXPECT_EQ(stats.p99, naive_percentile(samples, 99));
    EXPECT_EQ(stats.max, *std::max_element(samples.begin(), samples.end()));
    EXPECT_EQ(stats.min, *std::min_element(samples.begin(), samples.end()));
    EXPECT_NEAR(stats.mean, static_cast<double>(mean), 1e-9 * static_cast<double>(mean));
    EXPECT_NEAR(stats.cv_pct, static_cast<double>(cv), 1e-9 * static_cast<double>(cv));
    // The sets are built so the statistics are distinct (a mix-up between them would show).
    EXPECT_LT(stats.p50, stats.p95);
    EXPECT_LT(stats.p95, stats.p99);
    EXPECT_LT(stats.p99, stats.max);
  }
}

}  // namespace
}  // namespace cclbench
