#include "bench/core/pattern.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace cclbench {
namespace {

// Every reduced value must stay below the dtype's largest exact integer, so any summation order
// gives the same bits, and the 0xFF poison is never a valid value.
TEST(Pattern, ReductionsStayExactForEveryDtypeAndRankCount) {
  for (DataType dtype : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      for (int nranks : {1, 2, 3, 8, 16, 64}) {
        const PatternParams p = make_pattern(dtype, op, nranks, 1);
        for (std::uint64_t index = 0; index < 257; ++index) {
          const std::uint64_t reduced = pattern_reduced(p, index);
          ASSERT_LT(reduced, max_exact_integer(dtype)) << name_of(dtype) << " " << name_of(op) << " n=" << nranks;
          if (op == ReduceOp::prod) {
            ASSERT_GE(reduced, 1u);
          }
        }
      }
    }
  }
}

TEST(Pattern, ValuesDependOnRankIndexAndRepetition) {
  const PatternParams rep1 = make_pattern(DataType::float32, ReduceOp::none, 8, 1);
  const PatternParams rep2 = make_pattern(DataType::float32, ReduceOp::none, 8, 2);
  std::set<std::uint32_t> seen;
  int differs_by_rank = 0, differs_by_rep = 0;
  for (std::uint64_t index = 0; index < 1000; ++index) {
    seen.insert(pattern_value(rep1, 0, index));
    differs_by_rank += pattern_value(rep1, 0, index) != pattern_value(rep1, 1, index);
    differs_by_rep += pattern_value(rep1, 0, index) != pattern_value(rep2, 0, index);
  }
  EXPECT_GT(seen.size(), 500u);
  EXPECT_GT(differs_by_rank, 950);
  EXPECT_GT(differs_by_rep, 950);
}

TEST(Pattern, SumMatchesExplicitLoopAndAvgIsTheCommonValue) {
  const PatternParams sum = make_pattern(DataType::float16, ReduceOp::sum, 5, 3);
  for (std::uint64_t index = 0; index < 100; ++index) {
    std::uint64_t total = 0;
    for (int rank = 0; rank < 5; ++rank) total += pattern_value(sum, rank, index);
    EXPECT_EQ(pattern_reduced(sum, index), total);
  }
  const PatternParams avg = make_pattern(DataType::float32, ReduceOp::avg, 6, 3);
  for (std::uint64_t index = 0; index < 100; ++index) {
    EXPECT_EQ(pattern_value(avg, 0, index), pattern_value(avg, 5, index));
    EXPECT_EQ(pattern_reduced(avg, index), pattern_value(avg, 2, index));
  }
}

// nccl-tests' PreMulSum scalar (verifiable.h, ncclVerifiablePremulScalar): 1 on even ranks, 2 on
// odd ranks. The reduced value is the scalar-weighted sum, written out here independently.
TEST(Pattern, MulsumIsTheSumOfEachRanksValueTimesItsScalar) {
  for (DataType dtype : {DataType::float32, DataType::int8, DataType::fp8_e4m3, DataType::bfloat16}) {
    for (int nranks : {1, 2, 3, 4, 7, 16, 64}) {
      const PatternParams p = make_pattern(dtype, ReduceOp::mulsum, nranks, 2);
      int nonzero = 0;
      for (std::uint64_t index = 0; index < 200; ++index) {
        std::uint64_t expected = 0;
        for (int rank = 0; rank < nranks; ++rank) expected += (rank % 2 == 1 ? 2u : 1u) * pattern_value(p, rank, index);
        ASSERT_EQ(pattern_reduced(p, index), expected) << name_of(dtype) << " n=" << nranks;
        ASSERT_LT(expected, max_exact_integer(dtype)) << name_of(dtype) << " n=" << nranks;
        nonzero += pattern_value(p, nranks - 1, index) != 0;
      }
      EXPECT_GT(nonzero, 0) << name_of(dtype) << " n=" << nranks << ": the last rank never contributes";
    }
  }
  EXPECT_EQ(premul_scalar(0), 1u);
  EXPECT_EQ(premul_scalar(5), 2u);
}

TEST(Pattern, SourcesFollowEachCollectivesLayout) {
  Source source{};
  // all_gather: block s of the output comes from rank s.
  ASSERT_TRUE(pattern_source(Collective::all_gather, 0, 4, 0, 10, 25, &source));
  EXPECT_FALSE(source.reduced);
  EXPECT_EQ(source.rank, 2);
  EXPECT_EQ(source.index, 5u);
  // alltoall: rank 1 receives from rank s the block addressed to 1.
  ASSERT_TRUE(pattern_source(Collective::alltoall, 1, 4, 0, 10, 35, &source));
  EXPECT_EQ(source.rank, 3);
  EXPECT_EQ(source.index, 15u);
  // reduce_scatter: rank 2 gets the reduction of the third block.
  ASSERT_TRUE(pattern_source(Collective::reduce_scatter, 2, 4, 0, 10, 3, &source));
  EXPECT_TRUE(source.reduced);
  EXPECT_EQ(source.index, 23u);
  // reduce: only the root's output is defined.
  EXPECT_FALSE(pattern_source(Collective::reduce, 1, 4, 0, 10, 3, &source));
  // sendrecv: from the previous rank, wrapping.
  ASSERT_TRUE(pattern_source(Collective::sendrecv, 0, 4, 0, 10, 3, &source));
  EXPECT_EQ(source.rank, 3);
}

}  // namespace
}  // namespace cclbench
