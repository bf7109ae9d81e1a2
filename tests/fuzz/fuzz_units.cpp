// libFuzzer target: the user-number parsers (parse_size, parse_integer, parse_number).
// Input: one selector byte, then the text. Accepted outcomes are a value or a UsageError; anything
// else (another exception type, a sanitizer report, a value outside the requested range, a size that
// does not survive format_size -> parse_size) is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "bench/core/errors.hpp"
#include "bench/core/units.hpp"

namespace {

[[noreturn]] void finding() { std::abort(); }

void fuzz_size(std::string_view text) {
  std::uint64_t value = 0;
  try {
    value = cclbench::parse_size(text, "-b");
  } catch (const cclbench::UsageError&) {
    return;
  }
  // format_size prints exact powers with a suffix: it must read back as the same byte count.
  const std::string formatted = cclbench::format_size(value);
  if (cclbench::parse_size(formatted, "-b") != value) finding();
}

void fuzz_integer(std::string_view text, std::uint8_t range_selector) {
  // Ranges the apps really use, plus the full int64 range.
  static constexpr std::int64_t kRanges[][2] = {{1, 1000000},
                                               {0, 1000},
                                               {0, 1},
                                               {0, 3},
                                               {1, 64},
                                               {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}};
  const auto& range = kRanges[range_selector % (sizeof(kRanges) / sizeof(kRanges[0]))];
  try {
    const std::int64_t value = cclbench::parse_integer(text, "-n", range[0], range[1]);
    if (value < range[0] || value > range[1]) finding();
  } catch (const cclbench::UsageError&) {
  }
}

void fuzz_number(std::string_view text, std::uint8_t range_selector) {
  static constexpr double kRanges[][2] = {{1.0001, 1024}, {0, 86400}, {-1e300, 1e300}};
  const auto& range = kRanges[range_selector % (sizeof(kRanges) / sizeof(kRanges[0]))];
  try {
    const double value = cclbench::parse_number(text, "-f", range[0], range[1]);
    if (!std::isfinite(value) || value < range[0] || value > range[1]) finding();
  } catch (const cclbench::UsageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (selector % 3) {
    case 0: fuzz_size(text); break;
    case 1: fuzz_integer(text, static_cast<std::uint8_t>(selector / 3)); break;
    default: fuzz_number(text, static_cast<std::uint8_t>(selector / 3)); break;
  }
  return 0;
}
