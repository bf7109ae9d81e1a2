// coll_perf's exit status after the cases ran. Expected numbers: docs/results.md's table ("Exit status:
// 0 ok, 1 a case failed, 2 bad usage, 3 transport expectation not met, ... 7 nothing measured,
// 130/143 interrupted") and the usual 128 + signal convention (SIGINT 2, SIGTERM 15).
#include <gtest/gtest.h>

#include <csignal>

#include "bench/session/exit_status.hpp"

namespace cclbench {
namespace {

int code_of(const RunEnding& ending) { return to_int(exit_code_for(ending)); }

TEST(ExitStatus, CleanRunIsZero) { EXPECT_EQ(code_of({}), 0); }

TEST(ExitStatus, EachEndingHasItsReadmeNumber) {
  EXPECT_EQ(code_of({.any_case_failed = true}), 1);
  EXPECT_EQ(code_of({.transport_gate_failed = true}), 3);
  EXPECT_EQ(code_of({.nothing_measured = true}), 7);
  EXPECT_EQ(code_of({.interrupted = true, .stop_signal = SIGINT}), 130);
  EXPECT_EQ(code_of({.interrupted = true, .stop_signal = SIGTERM}), 143);
}

TEST(ExitStatus, RankThatGotNoSignalStillExitsAsInterrupted) {
  // Another rank received the signal: every rank stops together, this one saw no signal itself.
  EXPECT_EQ(code_of({.interrupted = true, .stop_signal = 0}), 130);
}

TEST(ExitStatus, InterruptionWinsOverEverythingElse) {
  EXPECT_EQ(code_of({.interrupted = true, .stop_signal = SIGTERM, .transport_gate_failed = true, .any_case_failed = true}), 143);
}

TEST(ExitStatus, TransportGateWinsOverCaseResults) {
  EXPECT_EQ(code_of({.transport_gate_failed = true, .any_case_failed = true, .nothing_measured = true}), 3);
}

TEST(ExitStatus, FailedCaseWinsOverNothingMeasured) {
  EXPECT_EQ(code_of({.any_case_failed = true, .nothing_measured = true}), 1);
}

}  // namespace
}  // namespace cclbench
