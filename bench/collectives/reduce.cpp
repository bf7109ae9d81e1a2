#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts reduce_counts(std::uint64_t requested_bytes, std::size_t element_size, int) {
  const std::uint64_t count = requested_bytes / element_size;
  return {count, count, count, 0, 0, element_size};
}

std::uint64_t reduce_algbw_bytes(const ByteCounts& counts, int) { return counts.param_count * counts.element_size; }

double reduce_bus_factor(int) { return 1.0; }

}  // namespace

const CollectiveDescriptor kReduce = {Collective::reduce, "Reduce", true, true,
                                      reduce_counts, reduce_algbw_bytes, reduce_bus_factor};

}  // namespace cclbench
