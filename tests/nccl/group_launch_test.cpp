// The NCCL backend's launch loop (GroupLauncher) driven with a recording NCCL call layer, on the
// host (label unit). Expected call sequences and addresses are written out from nccl-tests 2.19's
// startColl (one group around all GPUs when there are several, rotation shift =
// size * (iter % (maxbytes / size)), in-place send = recv + sendInplaceOffset * rank * element),
// not computed with the code under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/nccl/group_launch.hpp"

namespace cclbench {
namespace {

struct Call {
  std::string name;
  std::uintptr_t comm = 0;
  std::uintptr_t stream = 0;
  std::uintptr_t send = 0;
  std::uintptr_t recv = 0;
  std::size_t count = 0;
  int peer = -1;
  ncclRedOp_t op = ncclSum;
};

// Plain function pointers carry no context: the recorder is this file's one log.
std::vector<Call> calls_log;
int fail_at_call = -1;               // index in calls_log whose collective returns an error
std::uint64_t last_premul_scalar = 0;

std::uintptr_t address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

ncclResult_t record(Call call) {
  calls_log.push_back(call);
  return static_cast<int>(calls_log.size()) - 1 == fail_at_call ? ncclInternalError : ncclSuccess;
}
ncclResult_t group_start() { return record({"group_start"}); }
ncclResult_t group_end() { return record({"group_end"}); }
ncclResult_t all_reduce(const void* s, void* r, size_t n, ncclDataType_t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return record({"all_reduce", address(c), address(st), address(s), address(r), n, -1, op});
}
ncclResult_t all_gather(const void* s, void* r, size_t n, ncclDataType_t, ncclComm_t c, cudaStream_t st) {
  return record({"all_gather", address(c), address(st), address(s), address(r), n});
}
ncclResult_t reduce_scatter(const void* s, void* r, size_t n, ncclDataType_t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
  return record({"reduce_scatter", address(c), address(st), address(s), address(r), n, -1, op});
}
ncclResult_t broadcast(const void* s, void* r, size_t n, ncclDataType_t, int root, ncclComm_t c, cudaStream_t st) {
  return record({"broadcast", address(c), address(st), address(s), address(r), n, root});
}
ncclResult_t reduce(const void* s, void* r, size_t n, ncclDataType_t, ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st) {
  return record({"reduce", address(c), address(st), address(s), address(r), n, root, op});
}
ncclResult_t alltoall(const void* s, void* r, size_t n, ncclDataType_t, ncclComm_t c, cudaStream_t st) {
  return record({"alltoall", address(c), address(st), address(s), address(r), n});
}
ncclResult_t send(const void* s, size_t n, ncclDataType_t, int peer, ncclComm_t c, cudaStream_t st) {
  return record({"send", address(c), address(st), address(s), 0, n, peer});
}
ncclResult_t recv(void* r, size_t n, ncclDataType_t, int peer, ncclComm_t c, cudaStream_t st) {
  return record({"recv", address(c), address(st), 0, address(r), n, peer});
}
ncclResult_t premulsum(ncclRedOp_t* op, void* scalar, ncclDataType_t, ncclScalarResidence_t, ncclComm_t c) {
  last_premul_scalar = *static_cast<std::uint64_t*>(scalar);
  *op = static_cast<ncclRedOp_t>(100);
  return record({"premulsum", address(c)});
}
ncclResult_t destroy(ncclRedOp_t, ncclComm_t c) { return record({"destroy", address(c)}); }

NcclCalls recording_calls(bool native_alltoall) {
  NcclCalls calls{};
  calls.group_start = group_start;
  calls.group_end = group_end;
  calls.all_reduce = all_reduce;
  calls.all_gather = all_gather;
  calls.reduce_scatter = reduce_scatter;
  calls.broadcast = broadcast;
  calls.reduce = reduce;
  calls.alltoall = native_alltoall ? alltoall : nullptr;
  calls.send = send;
  calls.recv = recv;
  calls.red_op_create_premulsum = premulsum;
  calls.red_op_destroy = destroy;
  return calls;
}

// GPU i: comm 0x1000*(i+1), stream 0x100*(i+1), send base 0x10000000*(i+1), recv base that + 0x8000000.
constexpr std::uintptr_t kSendBase = 0x10000000;
constexpr std::uintptr_t kRecvOffset = 0x8000000;
std::vector<LaunchTarget> fake_targets(int gpus) {
  std::vector<LaunchTarget> targets;
  for (int i = 0; i < gpus; ++i) {
    const auto k = static_cast<std::uintptr_t>(i + 1);
    targets.push_back({reinterpret_cast<ncclComm_t>(0x1000 * k), reinterpret_cast<cudaStream_t>(0x100 * k),
                       reinterpret_cast<const void*>(kSendBase * k), reinterpret_cast<void*>(kSendBase * k + kRecvOffset), i});
  }
  return targets;
}

CaseSpec spec_of(Collective collective, std::uint64_t bytes, int nranks, bool in_place = false, ReduceOp op = ReduceOp::sum) {
  CaseSpec spec;
  spec.collective = collective;
  spec.dtype = DataType::float32;
  spec.op = descriptor_of(collective).reduces ? op : ReduceOp::none;
  spec.in_place = in_place;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(bytes, size_of(spec.dtype), nranks);
  return spec;
}

class GroupLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    calls_log.clear();
    fail_at_call = -1;
  }
};

TEST_F(GroupLauncherTest, OneGroupAroundAllGpusPerIteration) {
  GroupLauncher launcher(recording_calls(true), fake_targets(4), 4, 1 << 20, 0);
  const CaseSpec spec = spec_of(Collective::all_reduce, 8192, 4);
  for (int iteration = 0; iteration < 3; ++iteration) {
    calls_log.clear();
    ASSERT_EQ(launcher.launch(spec, iteration, 1).result, ncclSuccess);
    ASSERT_EQ(calls_log.size(), 6u);
    EXPECT_EQ(calls_log.front().name, "group_start");
    EXPECT_EQ(calls_log.back().name, "group_end");
    for (int gpu = 0; gpu < 4; ++gpu) {
      const Call& call = calls_log[static_cast<std::size_t>(gpu) + 1];
      const auto k = static_cast<std::uintptr_t>(gpu + 1);
      EXPECT_EQ(call.name, "all_reduce");
      EXPECT_EQ(call.comm, 0x1000 * k);
      EXPECT_EQ(call.stream, 0x100 * k);
      EXPECT_EQ(call.count, 2048u);  // 8192 B of float
      EXPECT_EQ(call.op, ncclSum);
      // 1 MiB / 8 KiB = 128 slots; iteration i uses slot i.
      EXPECT_EQ(call.send, kSendBase * k + 8192u * static_cast<unsigned>(iteration));
      EXPECT_EQ(call.recv, kSendBase * k + kRecvOffset + 8192u * static_cast<unsigned>(iteration));
    }
  }
}

TEST_F(GroupLauncherTest, OneGpuIsNotGrouped) {
  GroupLauncher launcher(recording_calls(true), fake_targets(1), 1, 1 << 20, 0);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_gather, 4096, 1), 0, 1).result, ncclSuccess);
  ASSERT_EQ(calls_log.size(), 1u);
  EXPECT_EQ(calls_log[0].name, "all_gather");
}

TEST_F(GroupLauncherTest, RotationWrapsAtTheBufferEnd) {
  GroupLauncher launcher(recording_calls(true), fake_targets(2), 2, 1 << 20, 0);
  // ReduceScatter 8 KiB over 2 ranks: send 8192 B (size column), 128 slots: iteration 130 -> slot 2.
  ASSERT_EQ(launcher.launch(spec_of(Collective::reduce_scatter, 8192, 2), 130, 1).result, ncclSuccess);
  ASSERT_EQ(calls_log.size(), 4u);
  EXPECT_EQ(calls_log[1].name, "reduce_scatter");
  EXPECT_EQ(calls_log[1].count, 1024u);  // per-rank block: 2048 / 2
  EXPECT_EQ(calls_log[1].send, kSendBase + 16384u);
  EXPECT_EQ(calls_log[2].recv, 2 * kSendBase + kRecvOffset + 16384u);
}

TEST_F(GroupLauncherTest, AggregatedOpsUseSuccessiveSlotsInOneGroup) {
  GroupLauncher launcher(recording_calls(true), fake_targets(2), 2, 1 << 20, 0);
  // -m 3, iteration 5: slots 15, 16, 17 (nccl-tests: iter * agg_iters + aiter).
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_reduce, 8192, 2), 5, 3).result, ncclSuccess);
  ASSERT_EQ(calls_log.size(), 8u);
  EXPECT_EQ(calls_log[0].name, "group_start");
  EXPECT_EQ(calls_log[7].name, "group_end");
  EXPECT_EQ(calls_log[1].send, kSendBase + 15u * 8192u);
  EXPECT_EQ(calls_log[2].send, 2 * kSendBase + 15u * 8192u);
  EXPECT_EQ(calls_log[3].send, kSendBase + 16u * 8192u);
  EXPECT_EQ(calls_log[6].send, 2 * kSendBase + 17u * 8192u);
}

TEST_F(GroupLauncherTest, InPlaceAllGatherSendsFromItsBlockOfTheReceiveBuffer) {
  GroupLauncher launcher(recording_calls(true), fake_targets(4), 4, 1 << 20, 0);
  // 8 KiB float over 4 ranks: 512 elements per rank, so rank r sends from recv + 2048 * r bytes.
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_gather, 8192, 4, true), 0, 1).result, ncclSuccess);
  for (int gpu = 0; gpu < 4; ++gpu) {
    const Call& call = calls_log[static_cast<std::size_t>(gpu) + 1];
    const auto k = static_cast<std::uintptr_t>(gpu + 1);
    EXPECT_EQ(call.count, 512u);
    EXPECT_EQ(call.recv, kSendBase * k + kRecvOffset);
    EXPECT_EQ(call.send, kSendBase * k + kRecvOffset + 2048u * static_cast<unsigned>(gpu));
  }
}

TEST_F(GroupLauncherTest, UnalignShiftsBothBuffersByElements) {
  GroupLauncher launcher(recording_calls(true), fake_targets(1), 1, 1 << 20, 3);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_reduce, 4096, 1), 1, 1).result, ncclSuccess);
  EXPECT_EQ(calls_log[0].send, kSendBase + 4096u + 12u);  // slot 1 + 3 floats
  EXPECT_EQ(calls_log[0].recv, kSendBase + kRecvOffset + 4096u + 12u);
}

TEST_F(GroupLauncherTest, AlltoAllWithoutNativeCallIsSendRecvPairsPerPeer) {
  GroupLauncher launcher(recording_calls(false), fake_targets(2), 2, 1 << 20, 0);
  // 8 KiB over 2 ranks: 1024 floats per peer block (4096 B).
  ASSERT_EQ(launcher.launch(spec_of(Collective::alltoall, 8192, 2), 0, 1).result, ncclSuccess);
  const std::vector<std::string> expected = {"group_start", "group_start", "send", "recv", "send", "recv", "group_end",
                                             "group_start", "send", "recv", "send", "recv", "group_end", "group_end"};
  ASSERT_EQ(calls_log.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(calls_log[i].name, expected[i]) << i;
  EXPECT_EQ(calls_log[4].peer, 1);
  EXPECT_EQ(calls_log[4].send, kSendBase + 4096u);
  EXPECT_EQ(calls_log[5].recv, kSendBase + kRecvOffset + 4096u);
  EXPECT_EQ(calls_log[4].count, 1024u);
}

TEST_F(GroupLauncherTest, MulsumCreatesTheRanksScalarPerCallAndDestroysIt) {
  GroupLauncher launcher(recording_calls(true), fake_targets(2), 2, 1 << 20, 0);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_reduce, 8192, 2, false, ReduceOp::mulsum), 0, 1).result, ncclSuccess);
  const std::vector<std::string> expected = {"group_start", "premulsum", "all_reduce", "destroy",
                                             "premulsum", "all_reduce", "destroy", "group_end"};
  ASSERT_EQ(calls_log.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(calls_log[i].name, expected[i]) << i;
  EXPECT_EQ(calls_log[2].op, static_cast<ncclRedOp_t>(100));
  EXPECT_EQ(last_premul_scalar, 0x40000000u);  // rank 1's scalar 2 as an IEEE float
}

TEST_F(GroupLauncherTest, AFailedCallNamesItsGpuAndStillClosesTheGroup) {
  GroupLauncher launcher(recording_calls(true), fake_targets(3), 3, 1 << 20, 0);
  fail_at_call = 2;  // group_start, GPU 0, GPU 1 <- fails
  const LaunchResult result = launcher.launch(spec_of(Collective::all_reduce, 8192, 3), 0, 1);
  EXPECT_EQ(result.result, ncclInternalError);
  EXPECT_EQ(std::string(result.call), "ncclAllReduce");
  EXPECT_EQ(result.target, 1u);
  ASSERT_EQ(calls_log.size(), 4u);  // GPU 2 is not launched, the group is closed
  EXPECT_EQ(calls_log.back().name, "group_end");
}

TEST_F(GroupLauncherTest, ANewCaseOnTheSameLauncherUsesItsOwnCollectiveAndCounts) {
  GroupLauncher launcher(recording_calls(true), fake_targets(2), 2, 1 << 20, 0);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_reduce, 8192, 2), 0, 1).result, ncclSuccess);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_reduce, 65536, 2), 1, 1).result, ncclSuccess);
  ASSERT_EQ(launcher.launch(spec_of(Collective::all_gather, 8192, 2, true), 0, 1).result, ncclSuccess);
  ASSERT_EQ(calls_log.size(), 12u);
  EXPECT_EQ(calls_log[5].count, 16384u);
  EXPECT_EQ(calls_log[5].send, kSendBase + 65536u);
  EXPECT_EQ(calls_log[9].name, "all_gather");
  EXPECT_EQ(calls_log[9].count, 1024u);
  EXPECT_EQ(calls_log[10].send, 2 * kSendBase + kRecvOffset + 4096u);  // rank 1's block
}

}  // namespace
}  // namespace cclbench
