#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts alltoall_counts(std::uint64_t requested_bytes, std::size_t element_size, int nranks) {
  const std::uint64_t block = aligned_block(requested_bytes / element_size, element_size, nranks);
  return {block * nranks, block * nranks, block, 0, 0, element_size};
}

std::uint64_t alltoall_algbw_bytes(const ByteCounts& counts, int nranks) {
  return counts.param_count * counts.element_size * nranks;
}

double alltoall_bus_factor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

}  // namespace

const CollectiveDescriptor kAlltoAll = {Collective::alltoall, "AlltoAll", false, false,
                                        alltoall_counts, alltoall_algbw_bytes, alltoall_bus_factor};

}  // namespace cclbench
