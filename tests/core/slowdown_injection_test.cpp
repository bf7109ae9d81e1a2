// The CCLBENCH_INJECT_SLOWDOWN test knob: its grammar, its refusal outside tests, the spacing of the
// spin kernels and the calibration against a model GPU whose clock differs from the nominal one.
#include "bench/core/slowdown_injection.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "bench/core/errors.hpp"

namespace cclbench {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(SlowdownInjection, ParsesAPercentage) {
  EXPECT_DOUBLE_EQ(parse_slowdown_injection("5").pct, 5.0);
  EXPECT_DOUBLE_EQ(parse_slowdown_injection("10%").pct, 10.0);
  EXPECT_DOUBLE_EQ(parse_slowdown_injection("2.5").pct, 2.5);
  for (const char* bad : {"", "0", "-5", "101", "five", "5%%", "nan"}) {
    EXPECT_THROW(parse_slowdown_injection(bad), UsageError) << bad;
  }
}

TEST(SlowdownInjection, OffUnlessSetAndRefusedOutsideTests) {
  ScopedEnv testing(kTestingVariable, nullptr);
  {
    ScopedEnv unset(kSlowdownVariable, nullptr);
    EXPECT_FALSE(slowdown_injection_from_environment().has_value());
  }
  {
    ScopedEnv knob(kSlowdownVariable, "5");
    try {
      (void)slowdown_injection_from_environment();
      FAIL() << "the knob was accepted without " << kTestingVariable << "=1";
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("refused outside cclbench's tests"), std::string::npos) << error.what();
    }
    ScopedEnv other(kTestingVariable, "yes");
    EXPECT_THROW((void)slowdown_injection_from_environment(), UsageError);
  }
  ScopedEnv knob(kSlowdownVariable, "5");
  ScopedEnv allowed(kTestingVariable, "1");
  const auto injection = slowdown_injection_from_environment();
  ASSERT_TRUE(injection.has_value());
  EXPECT_DOUBLE_EQ(injection->pct, 5.0);
}

TEST(SlowdownInjection, SpacingKeepsTheKernelsOwnCostWithinHalfTheTarget) {
  // Worked by hand: target 1.75 us a copy; a kernel costing 0.5 us fits (<= 0.875), one of 1.0 us
  // needs every 2nd (ceil(2 x 1.0 / 1.75) = 2); an 8K collective of 3 us at 5% (0.15 us) with a
  // 1 us kernel needs every ceil(13.3) = 14th; never more than the batch.
  EXPECT_EQ(delay_spacing(0.5, 1.75, 50), 1);
  EXPECT_EQ(delay_spacing(1.0, 1.75, 50), 2);
  EXPECT_EQ(delay_spacing(1.0, 0.15, 50), 14);
  EXPECT_EQ(delay_spacing(1.0, 0.01, 50), 50);
  EXPECT_EQ(delay_spacing(1.0, 0.01, 1), 1);
  EXPECT_EQ(delay_spacing(0.0, 0.0, 50), 1);
}

TEST(SlowdownInjection, CalibratesAgainstTheMeasuredTime) {
  // A model GPU: 36 us a copy, a spin kernel costs 1 us whatever its length plus its spin, and the
  // SM clock runs at 1.7 GHz while the calibration assumes 1.98 (units per us): the corrections
  // from measurement must bring the slowdown to the 5% asked for.
  int probes = 0;
  const DelayProbe model = [&probes](int every, double units) {
    ++probes;
    return every == 0 ? 36.0 : 36.0 + (1.0 + units / 1700.0) / every;
  };
  const InjectedDelay delay = calibrate_delay(5.0, 50, 1980.0, model);
  EXPECT_EQ(delay.every, 2);  // 1 us > half of 1.8 us
  EXPECT_DOUBLE_EQ(delay.base_us, 36.0);
  EXPECT_NEAR(delay.overhead_us, 1.0, 1e-9);
  EXPECT_NEAR(delay.achieved_pct, 5.0, 0.02);
  // The spin that gives it on the model: 2 x 1.8 us - 1 us = 2.6 us at 1.7 GHz.
  EXPECT_NEAR(delay.delay_units, 2.6 * 1700.0, 10.0);
  EXPECT_EQ(probes, 7);
  EXPECT_THROW(calibrate_delay(5.0, 50, 1980.0, [](int, double) { return 0.0; }), std::runtime_error);
}

}  // namespace
}  // namespace cclbench
