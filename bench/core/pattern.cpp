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
  if (op == ReduceOp::mulsum) {
    // Each value counts premul_scalar(rank) times: the sum of the scalars (1 per even rank, 2 per
    // odd rank) bounds the range. Below that, the fixed subset of contributing ranks (value 1
    // each, weighted at most 2) has at most exact / 2 members.
    const std::uint64_t weight = ranks + ranks / 2;
    params.sum_range = static_cast<std::uint32_t>(exact >= weight ? exact / weight : 0);
    if (params.sum_range == 0) params.max_value = static_cast<std::uint32_t>(exact / 2);
  }
  // NCCL averages integers as sum-then-divide (FuncSumPostDiv) in the data type itself, so the
  // sum n*c must not overflow; floats premultiply by 1/n and never exceed c.
  if (op == ReduceOp::avg && !is_floating(dtype)) params.max_value = static_cast<std::uint32_t>(exact / ranks);
  std::uint32_t twos = 0;
  while (twos < 8 && (2ull << twos) <= exact) ++twos;  // 2^twos <= exact
  params.prod_twos = static_cast<std::uint32_t>(std::min<std::uint64_t>(twos, ranks));
  return params;
}

}  // namespace cclbench
