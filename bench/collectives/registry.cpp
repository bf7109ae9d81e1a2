#include "bench/collectives/collective.hpp"

namespace cclbench {

std::uint64_t aligned_block(std::uint64_t count, std::size_t element_size, int nranks) {
  const std::uint64_t per_rank = count / static_cast<std::uint64_t>(nranks);
  const std::uint64_t granule = element_size >= 16 ? 1 : 16 / element_size;
  return per_rank & ~(granule - 1);
}

const CollectiveDescriptor& descriptor_of(Collective collective) {
  switch (collective) {
    case Collective::all_reduce: return kAllReduce;
    case Collective::all_gather: return kAllGather;
    case Collective::reduce_scatter: return kReduceScatter;
    case Collective::alltoall: return kAlltoAll;
    case Collective::broadcast: return kBroadcast;
    case Collective::reduce: return kReduce;
    case Collective::sendrecv: return kSendRecv;
  }
  return kAllReduce;
}

}  // namespace cclbench
