#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts reduce_scatter_counts(std::uint64_t requested_bytes, std::size_t element_size, int nranks) {
  const std::uint64_t base = aligned_block(requested_bytes / element_size, element_size, nranks);
  return {base * nranks, base, base, 0, base, element_size};
}

std::uint64_t reduce_scatter_algbw_bytes(const ByteCounts& counts, int nranks) {
  return counts.param_count * counts.element_size * nranks;
}

double reduce_scatter_bus_factor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

}  // namespace

const CollectiveDescriptor kReduceScatter = {Collective::reduce_scatter, "ReduceScatter", true, false,
                                             reduce_scatter_counts, reduce_scatter_algbw_bytes, reduce_scatter_bus_factor};

}  // namespace cclbench
