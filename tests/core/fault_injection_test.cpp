// The CCLBENCH_INJECT_WRONG test hook: its grammar, which elements it picks, and that a flipped
// element is wrong for the exact comparison and far outside the avg tolerance in every data type.
#include "bench/core/fault_injection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/element_codec.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/pattern.hpp"

namespace cclbench {
namespace {

CaseSpec spec_for(Collective collective, DataType dtype, std::uint64_t bytes, int nranks, bool in_place = false, int root = 0) {
  CaseSpec spec;
  spec.collective = collective;
  spec.descriptor = &descriptor_of(collective);
  spec.dtype = dtype;
  spec.op = descriptor_of(collective).reduces ? ReduceOp::sum : ReduceOp::none;
  spec.in_place = in_place;
  spec.root = root;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(bytes, size_of(dtype), nranks);
  return spec;
}

TEST(FaultInjection, ParsesEveryKey) {
  const FaultInjection all = parse_fault_injection("count=3,rank=1,gpu=2,collective=alltoall,case=alltoall.int32.none.out.8K");
  EXPECT_EQ(all.count, 3);
  EXPECT_EQ(all.rank, 1);
  EXPECT_EQ(all.gpu, 2);
  ASSERT_TRUE(all.collective.has_value());
  EXPECT_EQ(*all.collective, Collective::alltoall);
  EXPECT_EQ(all.case_id, "alltoall.int32.none.out.8K");
  const FaultInjection defaults = parse_fault_injection("count=1");
  EXPECT_EQ(defaults.rank, 0);
  EXPECT_EQ(defaults.gpu, 0);
  EXPECT_FALSE(defaults.collective.has_value());
  EXPECT_TRUE(defaults.case_id.empty());
}

TEST(FaultInjection, RejectsMalformedTextNamingTheVariable) {
  for (const char* text : {"", "rank=1", "count=0", "count=-1", "count=x", "count=3,rank", "count=3,colour=red",
                           "count=3,collective=allfoo", "count=3,case=", "count=3,,rank=1", "count=3,gpu=1x"}) {
    try {
      parse_fault_injection(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const UsageError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("CCLBENCH_INJECT_WRONG='", 0), 0u) << error.what();
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
    }
  }
}

TEST(FaultInjection, TargetMustExistInTheLaunch) {
  const FaultInjection rank3 = parse_fault_injection("count=1,rank=3");
  EXPECT_NO_THROW(check_fault_injection_target(rank3, 4, 1));
  EXPECT_THROW(check_fault_injection_target(rank3, 3, 1), UsageError);
  const FaultInjection gpu1 = parse_fault_injection("count=1,gpu=1");
  EXPECT_NO_THROW(check_fault_injection_target(gpu1, 1, 2));
  EXPECT_THROW(check_fault_injection_target(gpu1, 1, 1), UsageError);
}

TEST(FaultInjection, AppliesOnlyToTheChosenRankGpuCollectiveAndCase) {
  const CaseSpec gather = spec_for(Collective::all_gather, DataType::int32, 8192, 4);
  const CaseSpec reduce = spec_for(Collective::all_reduce, DataType::int32, 8192, 4);
  const FaultInjection any = parse_fault_injection("count=1,rank=1,gpu=1");
  EXPECT_TRUE(fault_applies(any, gather, 1, 1));
  EXPECT_FALSE(fault_applies(any, gather, 0, 1));
  EXPECT_FALSE(fault_applies(any, gather, 1, 0));
  const FaultInjection gathers = parse_fault_injection("count=1,collective=all_gather");
  EXPECT_TRUE(fault_applies(gathers, gather, 0, 0));
  EXPECT_FALSE(fault_applies(gathers, reduce, 0, 0));
  const FaultInjection one_case = parse_fault_injection("count=1,case=all_gather.int32.none.out.8K");
  EXPECT_TRUE(fault_applies(one_case, gather, 0, 0));
  CaseSpec in_place = gather;
  in_place.in_place = true;
  EXPECT_FALSE(fault_applies(one_case, in_place, 0, 0));
}

TEST(FaultInjection, PicksDistinctComparedElementsAcrossEveryBlock) {
  // AllGather/AlltoAll receive one block per peer rank, ReduceScatter one block: the picks are
  // distinct, inside the receive range, and (for count >= ranks) reach every peer's block.
  for (Collective collective : all_collectives()) {
    for (bool in_place : {false, true}) {
      const CaseSpec spec = spec_for(collective, DataType::float32, 16384, 4, in_place, 2);
      const std::uint64_t received = spec.counts.recv_count;
      const FaultInjection eight = parse_fault_injection("count=8");
      const std::vector<std::uint64_t> picks = fault_indices(eight, spec, 2);
      ASSERT_EQ(picks.size(), 8u) << name_of(collective);
      EXPECT_EQ(std::set<std::uint64_t>(picks.begin(), picks.end()).size(), 8u) << name_of(collective);
      std::set<std::uint64_t> blocks;
      for (std::uint64_t index : picks) {
        EXPECT_LT(index, received) << name_of(collective);
        blocks.insert(index / spec.counts.param_count);
      }
      EXPECT_EQ(blocks.size(), received / spec.counts.param_count) << name_of(collective) << ": not every block";
    }
  }
}

TEST(FaultInjection, NeverMoreThanTheComparedElementsAndNoneOffTheReduceRoot) {
  const CaseSpec reduce = spec_for(Collective::reduce, DataType::int32, 8192, 4, false, 0);
  const FaultInjection three = parse_fault_injection("count=3");
  EXPECT_EQ(fault_indices(three, reduce, 0).size(), 3u);
  EXPECT_TRUE(fault_indices(three, reduce, 1).empty()) << "non-root reduce ranks compare nothing";
  // 64 B of int32 over 4 ranks: 4 elements per AllGather block, 16 received.
  const CaseSpec tiny = spec_for(Collective::all_gather, DataType::int32, 64, 4);
  ASSERT_EQ(tiny.counts.recv_count, 16u);
  const std::vector<std::uint64_t> all = fault_indices(parse_fault_injection("count=1000"), tiny, 0);
  EXPECT_EQ(all.size(), 16u);
  EXPECT_EQ(std::set<std::uint64_t>(all.begin(), all.end()).size(), 16u);
}

// Every value the pattern can put in a buffer (up to 4096), for every dtype: after the flip the
// bits differ (exact comparison) and, for the float types NCCL averages (fp8 has no avg), the value
// is outside the avg tolerance at 64 ranks, at least half the value away, or not finite.
TEST(FaultInjection, FlipIsWrongForExactAndToleranceComparisons) {
  for (DataType dtype : all_data_types()) {
    const std::uint64_t top = std::min<std::uint64_t>(max_exact_integer(dtype), 4096);
    const double tolerance = avg_relative_tolerance(dtype, 64);
    const bool averaged = is_floating(dtype) && dtype != DataType::fp8_e4m3 && dtype != DataType::fp8_e5m2;
    for (std::uint64_t value = 0; value <= top; ++value) {
      unsigned char bytes[8] = {};
      encode_small_integer(dtype, value, bytes);
      const std::uint64_t before = load_element_bits(dtype, bytes);
      flip_element(bytes, element_bytes(dtype));
      const std::uint64_t after = load_element_bits(dtype, bytes);
      ASSERT_NE(before, after) << name_of(dtype) << " " << value;
      if (averaged) {
        const double got = decode_to_double(dtype, after);
        ASSERT_FALSE(within_tolerance(got, static_cast<double>(value), tolerance))
            << name_of(dtype) << " " << value << " became " << got;
        // Far outside, not at the edge: at least half the value (or 1) away, or not finite.
        if (std::isfinite(got)) {
          ASSERT_GE(std::fabs(got - static_cast<double>(value)), 0.5 * std::max<double>(static_cast<double>(value), 1.0))
              << name_of(dtype) << " " << value;
        }
      }
    }
  }
}

TEST(FaultInjection, FlipChangesTheHandWrittenBitsOfFloat32AndHalf) {
  // float32 1.0f = 0x3F800000 -> 0x7F800000 (+inf); 3.0f = 0x40400000 -> 0x00400000 (subnormal).
  unsigned char one[4] = {0x00, 0x00, 0x80, 0x3F};
  flip_element(one, 4);
  EXPECT_EQ(one[3], 0x7F);
  unsigned char three[4] = {0x00, 0x00, 0x40, 0x40};
  flip_element(three, 4);
  EXPECT_EQ(three[3], 0x00);
  EXPECT_EQ(three[2], 0x40);
  // half 0.0 = 0x0000 -> 0x4000 = 2.0; int8 5 -> 69.
  unsigned char zero_half[2] = {0x00, 0x00};
  flip_element(zero_half, 2);
  EXPECT_EQ(zero_half[1], 0x40);
  EXPECT_EQ(decode_to_double(DataType::float16, load_element_bits(DataType::float16, zero_half)), 2.0);
  unsigned char five = 5;
  flip_element(&five, 1);
  EXPECT_EQ(five, 69);
}

}  // namespace
}  // namespace cclbench
