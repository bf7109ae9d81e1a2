// The -T watchdog as a unit: the abort delay rule, a disarmed watchdog never fires, and an armed
// one that runs out prints the case/size/phase/rank/host message and ends the process with exit 4.
// No test here depends on the machine's speed: the firing timeout is 0.2 s against an hour-long
// sleep, and the non-firing ones use 600 s against microseconds.
#include "bench/core/watchdog.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/mpi_context.hpp"

namespace cclbench {
namespace {

CaseSpec small_all_reduce() {
  CaseSpec spec;
  spec.collective = Collective::all_reduce;
  spec.descriptor = &kAllReduce;
  spec.dtype = DataType::float32;
  spec.op = ReduceOp::sum;
  spec.requested_bytes = 1024;
  spec.nranks = 1;
  spec.counts = descriptor_of(spec.collective).byte_counts(1024, 4, 1);
  return spec;
}

TEST(WatchdogAbortDelay, OnlyNonWritersWaitAndNeverLongerThanTheTimeout) {
  EXPECT_EQ(abort_delay_seconds(0, 4, 3.0), 0.0);    // rank 0 writes -J: aborts at once
  EXPECT_EQ(abort_delay_seconds(2, 1, 3.0), 0.0);    // alone: nobody to wait for
  EXPECT_EQ(abort_delay_seconds(1, 4, 3.0), 3.0);    // -T 3: waits 3 s
  EXPECT_EQ(abort_delay_seconds(3, 4, 600.0), 10.0); // capped at 10 s
}

TEST(Watchdog, DisarmedOrDisabledNeverFires) {
  MpiContext context;  // no MPI: a watchdog that never fires makes no MPI call
  context.hostname = "testhost";
  std::atomic<int> fired{0};
  {
    Watchdog off(context, 0.0, [&](const std::string&) { ++fired; });  // -T 0: no thread at all
    off.enter(small_all_reduce(), "timed loop");
    off.leave();
  }
  {
    Watchdog dog(context, 600.0, [&](const std::string&) { ++fired; });
    for (int i = 0; i < 100; ++i) {  // re-arming moves the deadline; leaving disarms
      dog.enter(small_all_reduce(), "warm-up");
      dog.leave();
    }
    dog.enter(small_all_reduce(), "check");  // armed at destruction: the destructor still returns
  }
  EXPECT_EQ(fired.load(), 0);
}

TEST(WatchdogDeathTest, ExpiredPhaseNamesTheCaseAndExitsWithTheTimeoutCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MpiSession session(nullptr, nullptr);
        Watchdog dog(session.context(), 0.2, [](const std::string& message) { std::cerr << "on_timeout: " << message << std::endl; });
        dog.enter(small_all_reduce(), "timed loop");
        std::this_thread::sleep_for(std::chrono::hours(1));
      },
      ::testing::ExitedWithCode(4),
      "on_timeout: timeout: case all_reduce\\.float\\.sum\\.out\\.1K \\(size 1024 B, timed loop\\) on rank 0 \\([^)]*\\) "
      "did not finish within 0\\.2 s \\(-T\\); aborting every rank");
}

TEST(WatchdogDeathTest, LeavingAPhaseReArmsTheEnclosingOne) {
  // The runner watches the whole case around its phases: between two phases (the result exchanges),
  // a rank waiting on a frozen peer must still be ended, naming the enclosing phase.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MpiSession session(nullptr, nullptr);
        Watchdog dog(session.context(), 0.2, [](const std::string& message) { std::cerr << "on_timeout: " << message << std::endl; });
        dog.enter(small_all_reduce(), "case boundary or result exchange");
        dog.enter(small_all_reduce(), "timed loop");
        dog.leave();
        std::this_thread::sleep_for(std::chrono::hours(1));
      },
      ::testing::ExitedWithCode(4),
      "on_timeout: timeout: case all_reduce\\.float\\.sum\\.out\\.1K \\(size 1024 B, case boundary or result exchange\\) "
      "on rank 0 \\([^)]*\\) did not finish within 0\\.2 s");
}

TEST(Watchdog, LeavingEveryPhaseDisarms) {
  MpiContext context;  // no MPI: a watchdog that never fires makes no MPI call
  context.hostname = "testhost";
  std::atomic<int> fired{0};
  {
    Watchdog dog(context, 0.05, [&](const std::string&) { ++fired; });
    dog.enter(small_all_reduce(), "case boundary or result exchange");
    dog.enter(small_all_reduce(), "warm-up");
    dog.leave();
    dog.leave();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // 6 timeouts long: nothing armed
  }
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace cclbench
