#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts all_reduce_counts(std::uint64_t requested_bytes, std::size_t element_size, int) {
  const std::uint64_t count = requested_bytes / element_size;
  return {count, count, count, 0, 0, element_size};
}

std::uint64_t all_reduce_algbw_bytes(const ByteCounts& counts, int) { return counts.param_count * counts.element_size; }

// Each rank sends and receives 2(n-1)/n of the data in a ring (reduce-scatter then all-gather).
double all_reduce_bus_factor(int nranks) { return 2.0 * (nranks - 1) / nranks; }

}  // namespace

const CollectiveDescriptor kAllReduce = {Collective::all_reduce, "AllReduce", true, false,
                                         all_reduce_counts, all_reduce_algbw_bytes, all_reduce_bus_factor};

}  // namespace cclbench
