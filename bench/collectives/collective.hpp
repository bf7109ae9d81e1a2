#pragma once
// One descriptor per collective (the shape is bench/core/collective_descriptor.hpp). Conventions
// are nccl-tests 2.19's (src/<coll>.cu and doc/PERFORMANCE.md), so our size/count columns and
// bandwidths line up with theirs.
#include <cstddef>
#include <cstdint>

#include "bench/core/collective_descriptor.hpp"
#include "bench/core/types.hpp"

namespace cclbench {

// The explicit registry, in nccl-tests' order: what apps hand to make_cases and agree_on_cases.
const CollectiveRegistry& standard_collectives();
// standard_collectives().find(collective), for backends and tests.
const CollectiveDescriptor& descriptor_of(Collective collective);

extern const CollectiveDescriptor kAllReduce;
extern const CollectiveDescriptor kAllGather;
extern const CollectiveDescriptor kReduceScatter;
extern const CollectiveDescriptor kAlltoAll;
extern const CollectiveDescriptor kBroadcast;
extern const CollectiveDescriptor kReduce;
extern const CollectiveDescriptor kSendRecv;

// nccl-tests rounds per-rank blocks down to a 16-byte multiple of elements: (count/n) & ~(16/elt-1).
std::uint64_t aligned_block(std::uint64_t count, std::size_t element_size, int nranks);

}  // namespace cclbench
