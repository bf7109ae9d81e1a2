#include "bench/collectives/collective.hpp"

namespace cclbench {

std::uint64_t aligned_block(std::uint64_t count, std::size_t element_size, int nranks) {
  const std::uint64_t per_rank = count / static_cast<std::uint64_t>(nranks);
  const std::uint64_t granule = element_size >= 16 ? 1 : 16 / element_size;
  return per_rank & ~(granule - 1);
}

const CollectiveRegistry& standard_collectives() {
  static const CollectiveRegistry registry(
      {&kAllReduce, &kAllGather, &kReduceScatter, &kAlltoAll, &kBroadcast, &kReduce, &kSendRecv});
  return registry;
}

const CollectiveDescriptor& descriptor_of(Collective collective) { return standard_collectives().find(collective); }

}  // namespace cclbench
