#pragma once
// Parsing of user-supplied numbers and sizes, nccl-tests compatible: K/M/G are powers of 1024.
#include <cstdint>
#include <string>
#include <string_view>

namespace cclbench {

// "8K" -> 8192, "64M", "1G", "4096", "4096B". Case-insensitive suffix. Throws UsageError naming
// `what` (e.g. "-b") for empty strings, junk, negatives, zero-length suffix-only and overflow.
std::uint64_t parse_size(std::string_view text, std::string_view what);

// Whole decimal number in [min_value, max_value]. Throws UsageError naming `what`.
std::int64_t parse_integer(std::string_view text, std::string_view what, std::int64_t min_value,
                           std::int64_t max_value);

// Finite decimal number in [min_value, max_value]. Throws UsageError naming `what`.
double parse_number(std::string_view text, std::string_view what, double min_value, double max_value);

// 8192 -> "8K", 67108864 -> "64M", 1000 -> "1000" (exact powers only; used in case ids and tables).
std::string format_size(std::uint64_t bytes);

}  // namespace cclbench
