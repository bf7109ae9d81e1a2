#pragma once
// One descriptor per collective: how a requested size becomes element counts and buffer sizes, and
// how a time becomes algbw/busbw. Conventions are nccl-tests 2.19's (src/<coll>.cu and
// doc/PERFORMANCE.md), so our size/count columns and bandwidths line up with theirs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bench/core/types.hpp"

namespace cclbench {

// All counts are in elements. `size_bytes` is nccl-tests' "size" column: max(send, recv) bytes.
struct ByteCounts {
  std::uint64_t send_count = 0;
  std::uint64_t recv_count = 0;
  std::uint64_t param_count = 0;          // nccl-tests' "count" column and the count passed to NCCL
  std::uint64_t send_inplace_offset = 0;  // in-place: send pointer = recv + offset * rank
  std::uint64_t recv_inplace_offset = 0;
  std::size_t element_size = 0;
  std::uint64_t send_bytes() const { return send_count * element_size; }
  std::uint64_t recv_bytes() const { return recv_count * element_size; }
  std::uint64_t size_bytes() const { return send_bytes() > recv_bytes() ? send_bytes() : recv_bytes(); }
};

struct CollectiveDescriptor {
  Collective kind;
  std::string_view display_name;  // "AllReduce"
  bool reduces;                   // takes a reduction op
  bool rooted;                    // takes a root
  ByteCounts (*byte_counts)(std::uint64_t requested_bytes, std::size_t element_size, int nranks);
  // Bytes that algbw divides by the time (nccl-tests' getBw numerator).
  std::uint64_t (*algbw_bytes)(const ByteCounts& counts, int nranks);
  // busbw = algbw * bus_factor(n).
  double (*bus_factor)(int nranks);
};

// The explicit registry, in nccl-tests' order.
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
