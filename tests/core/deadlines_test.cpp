// The learned deadlines (bench/core/deadlines.hpp) as a unit. Every expected value is worked out here by hand
// from the rule's documented constants (floor 20 s, slack 10, worst case: every byte at 1 MB/s with a 20 ms ring
// step, connect floor 40 s + 20 ms per rank for NCCL, 20 s + 20 ms per rank for MPI), never from the code's own
// expression.
#include "bench/core/deadlines.hpp"

#include <gtest/gtest.h>

#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

CaseSpec spec_of(Collective collective, std::uint64_t bytes, int nranks = 2) {
  CaseSpec spec;
  spec.collective = collective;
  spec.descriptor = &descriptor_of(collective);
  spec.dtype = DataType::float32;
  spec.op = descriptor_of(collective).reduces ? ReduceOp::sum : ReduceOp::none;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(bytes, 4, nranks);
  return spec;
}

DeadlineModel connected_model(const std::string& backend = "nccl", double ceiling = 0) {
  DeadlineModel model(deadline_settings(backend, 2, ceiling));
  model.record(spec_of(Collective::all_reduce, 1024), Phase::warm_up, 5.0);  // the first call: the connect
  return model;
}

TEST(Deadlines, SettingsFollowTheBackendAndRankCount) {
  const DeadlineSettings nccl = deadline_settings("nccl", 16, 0);
  EXPECT_DOUBLE_EQ(nccl.floor_s, 20.0);
  EXPECT_DOUBLE_EQ(nccl.slack, 10.0);
  EXPECT_NEAR(nccl.connect_floor_s, 40.0 + 16 * 0.02, 1e-9);
  EXPECT_NEAR(deadline_settings("nccl", 4096, 0).connect_floor_s, 40.0 + 81.92, 1e-9);
  EXPECT_NEAR(deadline_settings("mpi", 4, 0).connect_floor_s, 20.0 + 0.08, 1e-9);
  EXPECT_NEAR(startup_allowance_seconds(16), 20.0 + 40.0 + 0.32, 1e-9);
}

TEST(Deadlines, TheFirstCollectiveGetsTheConnectFloorAndTheWorstCase) {
  DeadlineModel model(deadline_settings("nccl", 2, 0));
  // 8 KiB all_reduce at 2 ranks: one warm-up call, worst case 2 x 0.02 x 2 + 2 x 8192 / 1e6 = 0.096384 s.
  const Deadline first = model.deadline(spec_of(Collective::all_reduce, 8192), Phase::warm_up);
  EXPECT_NEAR(first.seconds, 20.0 + 0.096384 + 40.04, 1e-9);
  EXPECT_FALSE(first.predicted_s.has_value());
  EXPECT_NE(first.basis.find("connect floor"), std::string::npos) << first.basis;
  // A fill is no collective: no connect floor, its worst case is the bytes at 1 MB/s.
  EXPECT_NEAR(model.deadline(spec_of(Collective::all_reduce, 8192), Phase::fill).seconds, 20.0 + 8192 / 1e6, 1e-9);
  // Once a collective phase completed, the connect floor is gone, and that first call taught nothing.
  model.record(spec_of(Collective::all_reduce, 8192), Phase::warm_up, 30.0);
  EXPECT_TRUE(model.connected());
  EXPECT_NEAR(model.deadline(spec_of(Collective::all_reduce, 8192), Phase::warm_up).seconds, 20.0 + 0.096384, 1e-9);
}

TEST(Deadlines, ASizeIsPredictedFromTheSameCollectivesSmallerSizeScaledByBytes) {
  DeadlineModel model = connected_model();
  model.record(spec_of(Collective::all_reduce, 16 << 20), Phase::timed, 0.5);
  model.record(spec_of(Collective::all_reduce, 32 << 20), Phase::timed, 1.25);
  const Deadline at64 = model.deadline(spec_of(Collective::all_reduce, 64 << 20), Phase::timed);
  ASSERT_TRUE(at64.predicted_s.has_value());
  EXPECT_DOUBLE_EQ(*at64.predicted_s, 2.5);          // 32M's 1.25 s x 2
  EXPECT_DOUBLE_EQ(at64.seconds, 20.0 + 10 * 2.5);   // 45 s
  EXPECT_NE(at64.basis.find("all_reduce 32M"), std::string::npos) << at64.basis;
  // The same size again (the in-place case after the out-of-place one) is predicted from itself.
  EXPECT_DOUBLE_EQ(model.deadline(spec_of(Collective::all_reduce, 32 << 20), Phase::timed).seconds, 20.0 + 12.5);
  // The longest of two records at one size counts (placements, noise).
  model.record(spec_of(Collective::all_reduce, 32 << 20), Phase::timed, 1.0);
  EXPECT_DOUBLE_EQ(*model.deadline(spec_of(Collective::all_reduce, 64 << 20), Phase::timed).predicted_s, 2.5);
  EXPECT_EQ(model.history(spec_of(Collective::all_reduce, 64 << 20), Phase::timed), "16M 0.5 s, 32M 1.25 s");
}

TEST(Deadlines, ASlowButWorkingRailGetsLongDeadlines) {
  // A rail at 40 Mbit/s: 2M's timed phase took 60 s, so 4M may take 20 + 10 x 120 s, never cut short.
  DeadlineModel model = connected_model("mpi");
  model.record(spec_of(Collective::all_gather, 2 << 20), Phase::timed, 60.0);
  EXPECT_DOUBLE_EQ(model.deadline(spec_of(Collective::all_gather, 4 << 20), Phase::timed).seconds, 1220.0);
}

TEST(Deadlines, WithoutItsOwnSmallerSizesACollectiveUsesTheOthersLargestPrediction) {
  DeadlineModel model = connected_model();
  model.record(spec_of(Collective::all_reduce, 1 << 20), Phase::timed, 0.2);
  model.record(spec_of(Collective::all_gather, 1 << 20), Phase::timed, 0.3);
  // alltoall 2M: nothing of its own; all_reduce predicts 0.4 s, all_gather 0.6 s: the larger.
  const Deadline deadline = model.deadline(spec_of(Collective::alltoall, 2 << 20), Phase::timed);
  EXPECT_DOUBLE_EQ(*deadline.predicted_s, 0.6);
  EXPECT_NE(deadline.basis.find("all_gather 1M"), std::string::npos) << deadline.basis;
  // A larger size never predicts a smaller one: all_reduce 8K has nothing at or below it.
  EXPECT_FALSE(model.deadline(spec_of(Collective::all_reduce, 8192), Phase::timed).predicted_s.has_value());
}

TEST(Deadlines, TheFirstCaseOfALaunchIsPredictedFromItsOwnWarmUp) {
  DeadlineSettings settings = deadline_settings("mpi", 4, 0);
  settings.warm_up_calls = 5;
  settings.timed_calls = 15;
  DeadlineModel first(settings);
  const CaseSpec at16m = spec_of(Collective::all_reduce, 16 << 20, 4);
  first.record(at16m, Phase::warm_up, 0.5);  // the connect too: 5 calls in 0.5 s
  // 15 timed calls at 0.1 s each: 1.5 s predicted, 20 + 10 x 1.5 = 35 s.
  const Deadline timed = first.deadline(at16m, Phase::timed);
  EXPECT_DOUBLE_EQ(timed.seconds, 35.0);
  EXPECT_NE(timed.basis.find("this case's warm-up"), std::string::npos) << timed.basis;
  // A rail far slower than any assumed rate (4 Mbit/s: 16M's 5 warm-up calls in 320 s) is measured, not cut short:
  // 15 calls predicted at 64 s each, 20 + 10 x 960 s.
  first.record(at16m, Phase::warm_up, 320.0);
  EXPECT_DOUBLE_EQ(first.deadline(at16m, Phase::timed).seconds, 9620.0);
  // Another case's warm-up predicts nothing for it: the worst case, 15 x (0.02 x 2 x 4 + 2 x 16 MiB / 1e6).
  EXPECT_NEAR(first.deadline(spec_of(Collective::all_gather, 16 << 20, 4), Phase::timed).seconds,
              20.0 + 15 * (0.16 + 2.0 * (16 << 20) / 1e6), 1e-6);
}

TEST(Deadlines, TheCeilingCapsEveryDeadline) {
  DeadlineModel model = connected_model("nccl", 30.0);
  model.record(spec_of(Collective::all_reduce, 1 << 20), Phase::timed, 10.0);
  const Deadline capped = model.deadline(spec_of(Collective::all_reduce, 2 << 20), Phase::timed);
  EXPECT_DOUBLE_EQ(capped.seconds, 30.0);
  EXPECT_NE(capped.basis.find("-T ceiling"), std::string::npos) << capped.basis;
}

TEST(Deadlines, TheBoundaryAndTheStallAreNeverLearned) {
  DeadlineModel model = connected_model();
  model.record(spec_of(Collective::all_reduce, 1 << 20), Phase::boundary, 100.0);
  EXPECT_DOUBLE_EQ(model.deadline(spec_of(Collective::all_reduce, 1 << 20), Phase::boundary).seconds, 20.0);
  EXPECT_EQ(model.history(spec_of(Collective::all_reduce, 1 << 20), Phase::boundary), "");
}

}  // namespace
}  // namespace cclbench
