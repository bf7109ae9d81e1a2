// The -T watchdog as a unit: the abort delay rule, a disarmed watchdog never fires, and an armed
// one that runs out prints the case/size/phase/rank/host message and ends the process with exit 4.
// No test here depends on the machine's speed: the firing timeout is 0.2 s against an hour-long
// sleep, and the non-firing ones use 600 s against microseconds.
#include "bench/core/watchdog.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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
    off.enter(small_all_reduce(), Phase::timed);
    off.leave();
  }
  {
    Watchdog dog(context, 600.0, [&](const std::string&) { ++fired; });
    for (int i = 0; i < 100; ++i) {  // re-arming moves the deadline; leaving disarms
      dog.enter(small_all_reduce(), Phase::warm_up);
      dog.leave();
    }
    dog.enter(small_all_reduce(), Phase::check);  // armed at destruction: the destructor still returns
  }
  EXPECT_EQ(fired.load(), 0);
}

TEST(WatchdogDeathTest, ExpiredPhaseNamesTheCaseAndExitsWithTheTimeoutCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MpiSession session(nullptr, nullptr);
        Watchdog dog(session.context(), 0.2, [](const std::string& message) { std::cerr << "on_timeout: " << message << std::endl; });
        dog.enter(small_all_reduce(), Phase::timed);
        std::this_thread::sleep_for(std::chrono::hours(1));
      },
      ::testing::ExitedWithCode(4),
      "on_timeout: timeout: case all_reduce\\.float\\.sum\\.out\\.1K \\(size 1024 B, timed iterations\\) on rank 0 \\([^)]*\\) "
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
        dog.enter(small_all_reduce(), Phase::boundary);
        dog.enter(small_all_reduce(), Phase::timed);
        dog.leave();
        std::this_thread::sleep_for(std::chrono::hours(1));
      },
      ::testing::ExitedWithCode(4),
      "on_timeout: timeout: case all_reduce\\.float\\.sum\\.out\\.1K \\(size 1024 B, case boundary or result exchange\\) "
      "on rank 0 \\([^)]*\\) did not finish within 0\\.2 s");
}

CaseSpec all_reduce_of(std::uint64_t bytes) {
  CaseSpec spec = small_all_reduce();
  spec.requested_bytes = bytes;
  spec.counts = descriptor_of(spec.collective).byte_counts(bytes, 4, 1);
  return spec;
}

TEST(WatchdogDeathTest, ALearnedDeadlineNamesThePredictionTheTimeItRanAndTheSmallerSizes) {
  // Floor 0.3 s, slack 10: the 2K timed phase took about 0.1 s, so 4K's deadline is 0.3 + 10 x 0.2 = about 2.3 s,
  // and a hang there ends in about 2.3 s, with the figures in the message. The sleep is 100 ms, not 10: a loaded
  // machine oversleeps by milliseconds (15.2 ms for 10 in CI), and the figures' ranges allow up to 99 ms of that.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MpiSession session(nullptr, nullptr);
        DeadlineSettings settings = deadline_settings("mpi", 1, 0);
        settings.floor_s = 0.3;
        settings.connect_floor_s = 0.5;
        Watchdog dog(session.context(), WatchdogOptions{0, settings, nullptr},
                     [](const std::string& message) { std::cerr << "on_timeout: " << message << std::endl; });
        dog.enter(all_reduce_of(1024), Phase::warm_up);  // the connect
        dog.leave();
        dog.enter(all_reduce_of(2048), Phase::timed);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        dog.leave();
        dog.enter(all_reduce_of(4096), Phase::timed);
        std::this_thread::sleep_for(std::chrono::hours(1));
      },
      ::testing::ExitedWithCode(4),
      "on_timeout: timeout: case all_reduce\\.float\\.sum\\.out\\.4K \\(size 4096 B, timed iterations\\) on rank 0 "
      "\\([^)]*\\) did not finish within (2\\.[3-9]|3\\.[0-9]|4\\.[0-2])[0-9]* s \\(learned deadline: 0\\.3 s floor \\+ "
      "10 x 0\\.[23][0-9]* s predicted from all_reduce 2K's timed iterations \\(0\\.1[0-9]* s\\) scaled by bytes\\); "
      "it ran [234](\\.[0-9]+)? s, over [0-9]+x what its smaller sizes predicted; the same collective's timed iterations "
      "took 2K 0\\.1[0-9]* s; "
      "aborting every rank");
}

TEST(WatchdogProgress, EveryPhaseIsReportedWithItsDeadline) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    MpiContext context;
    context.hostname = "testhost";
    ProgressWriter progress(fds[1], 3, "node7");
    DeadlineSettings settings = deadline_settings("nccl", 2, 0);
    Watchdog dog(context, WatchdogOptions{0, settings, &progress}, [](const std::string&) {});
    dog.enter(all_reduce_of(8192), Phase::boundary);
    dog.enter(all_reduce_of(8192), Phase::warm_up);
    dog.leave();
    dog.leave();
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
  close(fds[0]);
  std::vector<nlohmann::json> events;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    ASSERT_EQ(line.rfind("cclbench-progress {", 0), 0u) << line;
    events.push_back(nlohmann::json::parse(line.substr(std::string("cclbench-progress ").size())));
  }
  ASSERT_EQ(events.size(), 4u) << text;
  EXPECT_EQ(events[0]["event"], "enter");
  EXPECT_EQ(events[0]["phase"], "case boundary or result exchange");
  EXPECT_EQ(events[0]["rank"], 3);
  EXPECT_EQ(events[0]["host"], "node7");
  EXPECT_EQ(events[0]["case"], "all_reduce.float.sum.out.8K");
  EXPECT_EQ(events[0]["collective"], "all_reduce");
  EXPECT_EQ(events[0]["bytes"], 8192);
  EXPECT_DOUBLE_EQ(events[0]["deadline_s"].get<double>(), 20.0);
  // The first warm-up: floor + worst case (1 call: 2 x 0.02 x 2 + 2 x 8192 / 1e6) + NCCL's connect floor at 2 ranks.
  EXPECT_EQ(events[1]["phase"], "warm-up");
  EXPECT_NEAR(events[1]["deadline_s"].get<double>(), 20.0 + 0.096384 + 40.04, 1e-3);
  // Leaving the warm-up re-arms the case boundary: its deadline is what is watched from then on.
  EXPECT_EQ(events[2]["event"], "leave");
  EXPECT_EQ(events[2]["phase"], "warm-up");
  EXPECT_TRUE(events[2]["elapsed_s"].is_number());
  EXPECT_DOUBLE_EQ(events[2]["deadline_s"].get<double>(), 20.0);
  EXPECT_EQ(events[3]["event"], "leave");
  EXPECT_TRUE(events[3]["deadline_s"].is_null());
}

TEST(Watchdog, LeavingEveryPhaseDisarms) {
  MpiContext context;  // no MPI: a watchdog that never fires makes no MPI call
  context.hostname = "testhost";
  std::atomic<int> fired{0};
  {
    Watchdog dog(context, 0.05, [&](const std::string&) { ++fired; });
    dog.enter(small_all_reduce(), Phase::boundary);
    dog.enter(small_all_reduce(), Phase::warm_up);
    dog.leave();
    dog.leave();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // 6 timeouts long: nothing armed
  }
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace cclbench
