#pragma once
// Test-only slowdown injection: the proof that `cclbench smoke --against` catches a slower GPU
// (docs/ci.md). With CCLBENCH_INJECT_SLOWDOWN=PCT, p2p_matrix and coll_perf put real GPU work
// inside every timed region: a one-thread spin kernel on the timed stream (after each copy of a
// sample; after every k-th collective of a timed batch, k chosen so that the kernel's own launch
// cost stays below half of its share), its length calibrated per case on the case's own
// uninjected time so that the case takes PCT percent longer. Nothing is edited afterwards: the
// times, bandwidths and verdicts are those of the slowed GPU.
//
// Off unless set, and refused (exit 2) unless CCLBENCH_TESTING=1 is set too: only cclbench's tests
// set both, and `cclbench` removes both from every launch it did not itself inject into, so the
// knob can never reach a user's results. When on, the tool prints one warning line and records
// the variable in its manifest (coll_perf) or JSON settings (p2p_matrix).
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cclbench {

inline constexpr const char* kSlowdownVariable = "CCLBENCH_INJECT_SLOWDOWN";
inline constexpr const char* kTestingVariable = "CCLBENCH_TESTING";
inline constexpr double kMaxSlowdownPct = 100.0;

struct SlowdownInjection {
  double pct = 0;    // the slowdown asked for, percent of the case's own time (0 < pct <= 100)
  std::string text;  // the variable's value, for messages and the manifest
};

// Parses the variable's value: a percentage, "5" or "5%". Throws UsageError naming the variable.
SlowdownInjection parse_slowdown_injection(std::string_view text);

// The variable parsed, or nullopt when it is unset or empty. Throws UsageError when it is set
// without CCLBENCH_TESTING=1 (the knob is refused outside tests) or malformed.
std::optional<SlowdownInjection> slowdown_injection_from_environment();

// The one warning line a tool prints when the knob is on (no trailing newline).
std::string slowdown_injection_warning(const SlowdownInjection& injection, const std::string& program);

// The calibrated delay of one case.
struct InjectedDelay {
  double pct = 0;            // asked for
  int every = 1;             // a spin kernel after every `every`-th operation of a timed batch
  double delay_units = 0;    // the spin's length, in the probe's units (SM clock cycles)
  double base_us = 0;        // time per operation without the kernel
  double overhead_us = 0;    // what one zero-length spin kernel costs (per kernel)
  double achieved_pct = 0;   // time per operation with the delay, over base_us, minus 1, in percent
};

// Measures the case's time per operation (microseconds) with the spin kernel after every `every`-th
// operation and `delay_units` long; every == 0: no kernel at all. Returns a robust value (a median
// of a few timed batches).
using DelayProbe = std::function<double(int every, double delay_units)>;

// Calibrates the delay: the time per operation without the kernel and with a zero-length one (its
// overhead), the spacing `every` (1, or more where the overhead would exceed half of the target
// slowdown; at most max_every), a first delay from units_per_us, then three corrections from
// measurement. Throws std::runtime_error when the case has no positive time.
InjectedDelay calibrate_delay(double pct, int max_every, double units_per_us, const DelayProbe& probe);

// The spacing for an overhead per kernel and a target slowdown per operation (both microseconds):
// 1 while the overhead stays within half the target, else ceil(2 x overhead / target), at most
// max_every (>= 1).
int delay_spacing(double overhead_us, double target_us, int max_every);

// The next delay (units) from the last one and the time it gave: the error per operation times
// `every`, converted with units_per_us; never negative.
double corrected_delay(double delay_units, int every, double units_per_us, double wanted_us, double measured_us);

}  // namespace cclbench
