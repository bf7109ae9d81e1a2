#include "bench/core/slowdown_injection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "bench/core/errors.hpp"
#include "bench/core/units.hpp"

namespace cclbench {

SlowdownInjection parse_slowdown_injection(std::string_view text) {
  SlowdownInjection injection;
  injection.text = std::string(text);
  std::string_view number = text;
  if (!number.empty() && number.back() == '%') number.remove_suffix(1);
  try {
    injection.pct = parse_number(number, "PCT", 0.0, kMaxSlowdownPct);
  } catch (const UsageError& error) {
    throw UsageError(std::string(kSlowdownVariable) + "='" + injection.text + "': " + error.what() +
                     " (expected a slowdown in percent, e.g. 5)");
  }
  if (!(injection.pct > 0)) {
    throw UsageError(std::string(kSlowdownVariable) + "='" + injection.text + "': the slowdown must be above 0%");
  }
  return injection;
}

std::optional<SlowdownInjection> slowdown_injection_from_environment() {
  const char* value = std::getenv(kSlowdownVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  const char* testing = std::getenv(kTestingVariable);
  if (testing == nullptr || std::string_view(testing) != "1") {
    throw UsageError(std::string(kSlowdownVariable) + " is a test knob (it slows the measurement on purpose): refused " +
                     "outside cclbench's tests, which also set " + kTestingVariable + "=1; unset it");
  }
  return parse_slowdown_injection(value);
}

std::string slowdown_injection_warning(const SlowdownInjection& injection, const std::string& program) {
  return program + ": warning: " + kSlowdownVariable + "='" + injection.text + "' is set (test knob): every timed " +
         "case is slowed on purpose by a spin kernel in its timed region, calibrated to +" + injection.text +
         (injection.text.ends_with('%') ? "" : "%") + " of its own time; these numbers are not the GPU's";
}

int delay_spacing(double overhead_us, double target_us, int max_every) {
  const int limit = std::max(max_every, 1);
  if (!(target_us > 0) || overhead_us <= 0.5 * target_us) return 1;
  const double wanted = std::ceil(2.0 * overhead_us / target_us);
  return wanted >= limit ? limit : std::max(1, static_cast<int>(wanted));
}

double corrected_delay(double delay_units, int every, double units_per_us, double wanted_us, double measured_us) {
  const double next = delay_units + (wanted_us - measured_us) * static_cast<double>(every) * units_per_us;
  return next > 0 ? next : 0.0;
}

InjectedDelay calibrate_delay(double pct, int max_every, double units_per_us, const DelayProbe& probe) {
  InjectedDelay delay;
  delay.pct = pct;
  delay.base_us = probe(0, 0.0);
  if (!(delay.base_us > 0) || !std::isfinite(delay.base_us)) {
    throw std::runtime_error("slowdown injection: the case has no positive time to calibrate against");
  }
  const double target_us = delay.base_us * pct / 100.0;  // per operation
  const double wanted_us = delay.base_us + target_us;
  // A zero-length kernel after every operation: what the kernel itself costs.
  delay.overhead_us = std::max(0.0, probe(1, 0.0) - delay.base_us);
  delay.every = delay_spacing(delay.overhead_us, target_us, max_every);
  if (delay.every > 1) {
    // Spaced out, the kernel may cost less each (it overlaps the next launch): measured again.
    delay.overhead_us = std::max(0.0, (probe(delay.every, 0.0) - delay.base_us) * delay.every);
  }
  delay.delay_units = std::max(0.0, delay.every * target_us - delay.overhead_us) * units_per_us;
  for (int round = 0; round < 3; ++round) {
    const double measured = probe(delay.every, delay.delay_units);
    delay.delay_units = corrected_delay(delay.delay_units, delay.every, units_per_us, wanted_us, measured);
  }
  delay.achieved_pct = (probe(delay.every, delay.delay_units) / delay.base_us - 1.0) * 100.0;
  return delay;
}

}  // namespace cclbench
