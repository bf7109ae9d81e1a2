#pragma once
// What the harness needs to know about a collective, as plain data: how a requested size becomes
// element counts and buffer sizes, and how a time becomes algbw/busbw. The core defines the shape;
// bench/collectives fills in one descriptor per collective (nccl-tests 2.19's conventions) and the
// app hands that list to the case builder and the runner. Nothing in bench/core names a collective's
// implementation.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

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

// The collectives a run may use, handed in by the app (bench/collectives builds the standard list).
// The descriptors must outlive the registry and every CaseSpec made from it.
class CollectiveRegistry {
 public:
  explicit CollectiveRegistry(std::vector<const CollectiveDescriptor*> descriptors);
  // The descriptor of `collective`; std::invalid_argument when the list has none.
  const CollectiveDescriptor& find(Collective collective) const;

 private:
  std::vector<const CollectiveDescriptor*> descriptors_;
};

}  // namespace cclbench
