#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

ByteCounts broadcast_counts(std::uint64_t requested_bytes, std::size_t element_size, int) {
  const std::uint64_t count = requested_bytes / element_size;
  return {count, count, count, 0, 0, element_size};
}

std::uint64_t broadcast_algbw_bytes(const ByteCounts& counts, int) { return counts.param_count * counts.element_size; }

double broadcast_bus_factor(int) { return 1.0; }

}  // namespace

const CollectiveDescriptor kBroadcast = {Collective::broadcast, "Broadcast", false, true,
                                         broadcast_counts, broadcast_algbw_bytes, broadcast_bus_factor};

}  // namespace cclbench
