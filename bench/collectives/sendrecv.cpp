#include "bench/collectives/collective.hpp"

namespace cclbench {
namespace {

// Each rank sends its buffer to rank+1 and receives from rank-1 (a ring shift).
ByteCounts sendrecv_counts(std::uint64_t requested_bytes, std::size_t element_size, int) {
  const std::uint64_t count = requested_bytes / element_size;
  return {count, count, count, 0, 0, element_size};
}

std::uint64_t sendrecv_algbw_bytes(const ByteCounts& counts, int) { return counts.param_count * counts.element_size; }

double sendrecv_bus_factor(int) { return 1.0; }

}  // namespace

const CollectiveDescriptor kSendRecv = {Collective::sendrecv, "SendRecv", false, false,
                                        sendrecv_counts, sendrecv_algbw_bytes, sendrecv_bus_factor};

}  // namespace cclbench
