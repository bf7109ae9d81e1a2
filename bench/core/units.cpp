#include "bench/core/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "bench/core/errors.hpp"

namespace cclbench {
namespace {

std::string quoted(std::string_view text) {
  constexpr std::size_t kMaxShown = 40;
  std::string shown(text.substr(0, kMaxShown));
  for (char& c : shown) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  }
  if (text.size() > kMaxShown) shown += "...";
  return "'" + shown + "'";
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  const std::string accepted = " (accepted: a whole number of bytes with an optional K, M or G suffix, powers of 1024, e.g. 8K, 64M)";
  if (text.empty()) throw UsageError(std::string(what) + ": empty size" + accepted);
  std::uint64_t multiplier = 1;
  std::string_view digits = text;
  if (digits.back() == 'B' || digits.back() == 'b') digits.remove_suffix(1);
  if (!digits.empty()) {
    switch (std::toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K': multiplier = 1ull << 10; digits.remove_suffix(1); break;
      case 'M': multiplier = 1ull << 20; digits.remove_suffix(1); break;
      case 'G': multiplier = 1ull << 30; digits.remove_suffix(1); break;
      case 'T': multiplier = 1ull << 40; digits.remove_suffix(1); break;
      default: break;
    }
  }
  if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits.front()))) {
    throw UsageError(std::string(what) + ": bad size " + quoted(text) + accepted);
  }
  std::uint64_t value = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error == std::errc::result_out_of_range) {
    throw UsageError(std::string(what) + ": size " + quoted(text) + " is too large");
  }
  if (error != std::errc() || end != digits.data() + digits.size()) {
    throw UsageError(std::string(what) + ": bad size " + quoted(text) + accepted);
  }
  if (value > std::numeric_limits<std::uint64_t>::max() / multiplier) {
    throw UsageError(std::string(what) + ": size " + quoted(text) + " is too large");
  }
  return value * multiplier;
}

std::int64_t parse_integer(std::string_view text, std::string_view what, std::int64_t min_value,
                           std::int64_t max_value) {
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string range = " (accepted: a whole number from " + std::to_string(min_value) + " to " +
                            std::to_string(max_value) + ")";
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(what) + ": bad number " + quoted(text) + range);
  }
  if (value < min_value || value > max_value) {
    throw UsageError(std::string(what) + ": " + quoted(text) + " is out of range" + range);
  }
  return value;
}

double parse_number(std::string_view text, std::string_view what, double min_value, double max_value) {
  // std::from_chars for double is available in libstdc++ 11+.
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string range = " (accepted: a number from " + std::to_string(min_value) + " to " +
                            std::to_string(max_value) + ")";
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw UsageError(std::string(what) + ": bad number " + quoted(text) + range);
  }
  if (value < min_value || value > max_value) {
    throw UsageError(std::string(what) + ": " + quoted(text) + " is out of range" + range);
  }
  return value;
}

std::string format_size(std::uint64_t bytes) {
  if (bytes != 0 && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + "G";
  if (bytes != 0 && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes != 0 && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace cclbench
