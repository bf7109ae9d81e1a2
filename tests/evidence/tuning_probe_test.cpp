// coll_perf's probe helpers: NCCL_DEBUG_FILE expansion and matching TUNING lines to cases.
#include <gtest/gtest.h>

#include "bench/collectives/collective.hpp"
#include "bench/evidence/nccl_evidence.hpp"
#include "bench/evidence/tuning_probe.hpp"

namespace cclbench {
namespace {

CaseSpec spec(Collective collective, std::uint64_t bytes, bool in_place = false) {
  CaseSpec result;
  result.collective = collective;
  result.descriptor = &descriptor_of(collective);
  result.dtype = DataType::float32;
  result.op = collective == Collective::all_gather || collective == Collective::alltoall ? ReduceOp::none : ReduceOp::sum;
  result.in_place = in_place;
  result.requested_bytes = bytes;
  result.nranks = 4;
  result.counts.element_size = 4;
  result.counts.param_count = collective == Collective::all_gather ? bytes / 4 / 4 : bytes / 4;
  result.counts.send_count = result.counts.param_count;
  result.counts.recv_count = bytes / 4;
  return result;
}

TEST(NcclDebugFile, ExpandsHostPidAndPercentLikeNccl) {
  EXPECT_EQ(expand_nccl_debug_file("/r/nccl/%h.%p.log", "node5", 4242), "/r/nccl/node5.4242.log");
  EXPECT_EQ(expand_nccl_debug_file("a%%b%x%", "h", 1), "a%b%x%");
  EXPECT_EQ(expand_nccl_debug_file("plain.log", "h", 1), "plain.log");
}

TEST(TuningProbe, MatchesChoicesBySizeInOrderAndExplainsGaps) {
  const std::string log =
      "node5:100:100 [0] NCCL INFO AllReduce: 8192 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
      "node5:100:100 [0] NCCL INFO AllReduce: 8192 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
      "node5:100:100 [0] NCCL INFO AllReduce: 65536 Bytes -> Algo TREE proto LL128 channel{Lo..Hi}={0..3}\n"
      "node5:100:100 [0] NCCL INFO AllGather: 2048 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}\n";
  const std::vector<TuningChoice> choices = parse_tuning(log, "node5.100.log");
  ASSERT_EQ(choices.size(), 4u);
  const std::vector<CaseSpec> cases = {spec(Collective::all_reduce, 8192), spec(Collective::all_reduce, 8192, true),
                                       spec(Collective::all_reduce, 65536), spec(Collective::all_gather, 8192),
                                       spec(Collective::alltoall, 8192), spec(Collective::all_reduce, 1 << 20)};
  const nlohmann::json entries = match_tuning(cases, {true, true, true, true, true, false}, choices);
  ASSERT_EQ(entries.size(), cases.size());
  EXPECT_EQ(entries[0]["case_id"], "all_reduce.float.sum.out.8K");
  EXPECT_EQ(entries[0]["tuning"]["algorithm"], "RING");
  EXPECT_EQ(entries[0]["tuning"]["matched_by"], "size");
  EXPECT_EQ(entries[1]["tuning"]["protocol"], "LL");  // the in-place call's own line, not the first again
  EXPECT_EQ(entries[2]["tuning"]["algorithm"], "TREE");
  EXPECT_EQ(entries[2]["tuning"]["protocol"], "LL128");
  EXPECT_EQ(entries[3]["tuning"]["algorithm"], "RING");  // 512 floats per rank = 2048 bytes
  EXPECT_EQ(entries[3]["tuning"]["matched_by"], "size");
  EXPECT_TRUE(entries[4]["tuning"].is_null());
  EXPECT_NE(entries[4]["reason"].get<std::string>().find("send/recv"), std::string::npos);
  EXPECT_TRUE(entries[5]["tuning"].is_null());
  EXPECT_NE(entries[5]["reason"].get<std::string>().find("not run"), std::string::npos);
}

TEST(TuningProbe, NoTuningLinesGiveNullWithAReasonNeverAGuess) {
  const std::vector<CaseSpec> cases = {spec(Collective::all_reduce, 8192)};
  const nlohmann::json entries = match_tuning(cases, {true}, {});
  EXPECT_TRUE(entries[0]["tuning"].is_null());
  EXPECT_NE(entries[0]["reason"].get<std::string>().find("no TUNING line"), std::string::npos);
}

}  // namespace
}  // namespace cclbench
