#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts all_gather_counts(std::uint64_t requested_bytes, std::size_t element_size, int nranks) {
  const std::uint64_t base = aligned_block(requested_bytes / element_size, element_size, nranks);
  return {base, base * nranks, base, base, 0, element_size};
}

std::uint64_t all_gather_algbw_bytes(const ByteCounts& counts, int nranks) {
  return counts.param_count * counts.element_size * nranks;
}

double all_gather_bus_factor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

}  // namespace

const CollectiveDescriptor kAllGather = {Collective::all_gather, "AllGather", false, false,
                                         all_gather_counts, all_gather_algbw_bytes, all_gather_bus_factor};

}  // namespace cclbench
