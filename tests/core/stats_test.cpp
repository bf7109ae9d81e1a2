#include "bench/core/stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
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

TEST(RankShare, MeanAndIterationsWhereThisRankWasTheMax) {
  // Ranks' times per iteration: this rank {5, 9, 7, 7}; the max over ranks {6, 9, 8, 7}.
  const RankShare share = rank_share({5, 9, 7, 7}, {6, 9, 8, 7});
  EXPECT_DOUBLE_EQ(share.mean_us, 7);
  EXPECT_EQ(share.slowest_iterations, 2);  // iterations 1 and 3 (3 is a tie: counted)
  EXPECT_EQ(rank_share({4}, {4}).slowest_iterations, 1);
  EXPECT_THROW(rank_share({}, {}), std::invalid_argument);
  EXPECT_THROW(rank_share({1, 2}, {2}), std::invalid_argument);
}

}  // namespace
}  // namespace cclbench
