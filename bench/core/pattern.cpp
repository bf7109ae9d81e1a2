#include "bench/core/pattern.hpp"

#include <algorithm>

namespace cclbench {

PatternParams make_pattern(DataType dtype, ReduceOp op, int nranks, std::uint32_t rep) {
  // Values stay below the largest exact integer so that an all-ones byte poison (0xFF: NaN for
  // floats, -1 or 255 for integers) is never a valid value, and small enough to read in a dump.
  constexpr std::uint64_t kLargestValue = 1000;
  const std::uint64_t exact = std::min<std::uint64_t>(max_exact_integer(dtype) - 1, kLargestValue);
  const auto ranks = static_cast<std::uint64_t>(std::max(nranks, 1));
  PatternParams params{};
  params.dtype = dtype;
  params.op = op;
  params.nranks = std::max(nranks, 1);
  params.rep = rep;
  params.max_value = static_cast<std::uint32_t>(exact);
  params.sum_range = static_cast<std::uint32_t>(exact >= ranks ? exact / ranks : 0);
  std::uint32_t twos = 0;
  while (twos < 8 && (2ull << twos) <= exact) ++twos;  // 2^twos <= exact
  params.prod_twos = static_cast<std::uint32_t>(std::min<std::uint64_t>(twos, ranks));
  return params;
}

}  // namespace cclbench
