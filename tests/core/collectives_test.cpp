// Byte counts and bandwidth factors against nccl-tests 2.19 (src/*.cu, doc/PERFORMANCE.md).
#include "bench/collectives/collective.hpp"

#include <gtest/gtest.h>

#include "bench/core/case.hpp"
#include "bench/core/stats.hpp"

namespace cclbench {
namespace {

CaseSpec spec_for(Collective collective, std::uint64_t bytes, int nranks, DataType dtype = DataType::float32) {
  CaseSpec spec;
  spec.collective = collective;
  spec.descriptor = &descriptor_of(collective);
  spec.dtype = dtype;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(bytes, size_of(dtype), nranks);
  return spec;
}

TEST(BusFactor, MatchesPerformanceMdForEveryRankCount) {
  for (int n : {1, 2, 8, 16}) {
    SCOPED_TRACE(n);
    EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(n), 2.0 * (n - 1) / n);
    EXPECT_DOUBLE_EQ(kAllGather.bus_factor(n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(kReduceScatter.bus_factor(n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(kAlltoAll.bus_factor(n), static_cast<double>(n - 1) / n);
    EXPECT_DOUBLE_EQ(kBroadcast.bus_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(kReduce.bus_factor(n), 1.0);
    EXPECT_DOUBLE_EQ(kSendRecv.bus_factor(n), 1.0);
  }
  EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(16), 1.875);
  EXPECT_DOUBLE_EQ(kAllGather.bus_factor(8), 0.875);
}

// Bus factors written out by hand (nccl-tests doc/PERFORMANCE.md: AllReduce 2(n-1)/n; AllGather,
// ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce, SendRecv 1), as decimal literals.
TEST(BusFactor, HandWrittenTable) {
  struct Row {
    int n;
    double all_reduce, spread;  // spread: AllGather, ReduceScatter, AlltoAll
  };
  const Row rows[] = {{2, 1.0, 0.5},   {3, 1.3333333333333333, 0.6666666666666666}, {4, 1.5, 0.75},
                      {5, 1.6, 0.8},   {8, 1.75, 0.875},                            {16, 1.875, 0.9375}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.n);
    EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(row.n), row.all_reduce);
    EXPECT_DOUBLE_EQ(kAllGather.bus_factor(row.n), row.spread);
    EXPECT_DOUBLE_EQ(kReduceScatter.bus_factor(row.n), row.spread);
    EXPECT_DOUBLE_EQ(kAlltoAll.bus_factor(row.n), row.spread);
    EXPECT_DOUBLE_EQ(kBroadcast.bus_factor(row.n), 1.0);
    EXPECT_DOUBLE_EQ(kReduce.bus_factor(row.n), 1.0);
    EXPECT_DOUBLE_EQ(kSendRecv.bus_factor(row.n), 1.0);
  }
}

// algbw and busbw of every collective, worked out by hand: 1 MiB of floats on 4 ranks in 50 us.
// Every collective moves S = 1048576 bytes by nccl-tests' definition (AllGather/ReduceScatter/
// AlltoAll: 65536-element blocks x 4 bytes x 4 ranks), so algbw = 1048576 / 50e-6 / 1e9 = 20.97152.
TEST(Bandwidth, EveryCollectiveByHand) {
  struct Row {
    Collective collective;
    double algbw, busbw;
  };
  const Row rows[] = {{Collective::all_reduce, 20.97152, 31.45728},    {Collective::all_gather, 20.97152, 15.72864},
                      {Collective::reduce_scatter, 20.97152, 15.72864}, {Collective::alltoall, 20.97152, 15.72864},
                      {Collective::broadcast, 20.97152, 20.97152},     {Collective::reduce, 20.97152, 20.97152},
                      {Collective::sendrecv, 20.97152, 20.97152}};
  for (const Row& row : rows) {
    SCOPED_TRACE(std::string(name_of(row.collective)));
    const Bandwidth bandwidth = bandwidth_of(spec_for(row.collective, 1 << 20, 4), 50.0);
    EXPECT_NEAR(bandwidth.algbw_gbps, row.algbw, 1e-9);
    EXPECT_NEAR(bandwidth.busbw_gbps, row.busbw, 1e-9);
  }
  // Three ranks do not divide 1 MiB: AllGather blocks are 262144/3 = 87381 rounded down to a
  // multiple of 4 floats = 87380, so S = 87380 x 4 x 3 = 1048560 B; in 50 us that is 20.9712 GB/s,
  // busbw x 2/3 = 13.9808.
  const Bandwidth three = bandwidth_of(spec_for(Collective::all_gather, 1 << 20, 3), 50.0);
  EXPECT_NEAR(three.algbw_gbps, 20.9712, 1e-9);
  EXPECT_NEAR(three.busbw_gbps, 13.9808, 1e-9);
  // 1000 B of int8 ReduceScatter on 3 ranks: 320-element blocks, S = 960 B; 2 us -> 0.48, x 2/3 = 0.32.
  const Bandwidth small = bandwidth_of(spec_for(Collective::reduce_scatter, 1000, 3, DataType::int8), 2.0);
  EXPECT_NEAR(small.algbw_gbps, 0.48, 1e-12);
  EXPECT_NEAR(small.busbw_gbps, 0.32, 1e-12);
}

TEST(ByteCounts, AllReduceUsesTheWholeBuffer) {
  const CaseSpec spec = spec_for(Collective::all_reduce, 64 << 20, 16);
  EXPECT_EQ(spec.counts.param_count, (64u << 20) / 4);
  EXPECT_EQ(spec.counts.size_bytes(), 64u << 20);
  // algbw = S / t with S the buffer size: 64 MiB in 1 ms.
  const Bandwidth bandwidth = bandwidth_of(spec, 1000.0);
  EXPECT_NEAR(bandwidth.algbw_gbps, 67.108864, 1e-9);
  EXPECT_NEAR(bandwidth.busbw_gbps, 67.108864 * 1.875, 1e-9);
}

TEST(ByteCounts, AllGatherSplitsAlignedBlocksAndCountsTheGatheredBytes) {
  // 8K of floats over 8 ranks: 2048/8 = 256 per rank (already a multiple of 16/4 = 4).
  const CaseSpec spec = spec_for(Collective::all_gather, 8192, 8);
  EXPECT_EQ(spec.counts.param_count, 256u);
  EXPECT_EQ(spec.counts.send_count, 256u);
  EXPECT_EQ(spec.counts.recv_count, 2048u);
  EXPECT_EQ(spec.counts.send_inplace_offset, 256u);
  EXPECT_EQ(spec.counts.size_bytes(), 8192u);
  const Bandwidth bandwidth = bandwidth_of(spec, 1.0);
  EXPECT_NEAR(bandwidth.algbw_gbps, 8192 / 1e9 / 1e-6, 1e-9);
  EXPECT_NEAR(bandwidth.busbw_gbps, bandwidth.algbw_gbps * 7 / 8, 1e-9);
}

TEST(ByteCounts, BlocksRoundDownTo16Bytes) {
  // 1000 bytes of int8 over 3 ranks: 333 per rank, rounded down to 320 (multiple of 16).
  const CaseSpec spec = spec_for(Collective::reduce_scatter, 1000, 3, DataType::int8);
  EXPECT_EQ(spec.counts.param_count, 320u);
  EXPECT_EQ(spec.counts.send_count, 960u);
  EXPECT_EQ(spec.counts.recv_count, 320u);
  EXPECT_EQ(spec.counts.recv_inplace_offset, 320u);
  EXPECT_EQ(spec.counts.size_bytes(), 960u);
}

TEST(ByteCounts, AlltoAllMovesBlocksToEveryPeer) {
  const CaseSpec spec = spec_for(Collective::alltoall, 1 << 20, 16, DataType::bfloat16);
  EXPECT_EQ(spec.counts.param_count, (1u << 19) / 16);
  EXPECT_EQ(spec.counts.send_count, 1u << 19);
  EXPECT_EQ(spec.counts.recv_count, 1u << 19);
  EXPECT_EQ(spec.counts.size_bytes(), 1u << 20);
  EXPECT_NEAR(bandwidth_of(spec, 100).busbw_gbps, (1 << 20) / 1e9 / 1e-4 * 15 / 16, 1e-9);
}

TEST(ByteCounts, TooSmallForTheRankCountGivesZeroElements) {
  const CaseSpec spec = spec_for(Collective::all_gather, 32, 16);
  EXPECT_EQ(spec.counts.param_count, 0u);
}

TEST(CaseId, IsStableAndNamesEverything) {
  CaseSpec spec = spec_for(Collective::all_reduce, 8192, 4);
  spec.op = ReduceOp::sum;
  EXPECT_EQ(spec.case_id(), "all_reduce.float.sum.out.8K");
  spec.in_place = true;
  EXPECT_EQ(spec.case_id(), "all_reduce.float.sum.in.8K");
  CaseSpec rooted = spec_for(Collective::broadcast, 64 << 20, 4, DataType::bfloat16);
  rooted.root = 2;
  EXPECT_EQ(rooted.case_id(), "broadcast.bfloat16.none.out.64M.r2");
}

}  // namespace
}  // namespace cclbench
