#include "bench/p2p/numa.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bench/core/errors.hpp"
#include "bench/p2p/cuda_check.hpp"
#include "bench/cuda/cuda_handles.hpp"

namespace cclbench::p2p {
namespace {

// RAII for an hwloc bitmap.
class Bitmap {
 public:
  Bitmap() : bitmap_(hwloc_bitmap_alloc()) {
    if (!bitmap_) throw FatalError(ExitCode::runtime_error, "hwloc_bitmap_alloc failed");
  }
  ~Bitmap() { hwloc_bitmap_free(bitmap_); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  hwloc_bitmap_t get() const { return bitmap_; }

 private:
  hwloc_bitmap_t bitmap_;
};

std::vector<int> nodes_in(const HostTopology& topology, hwloc_const_nodeset_t nodeset) {
  std::vector<int> nodes;
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topology.get(), HWLOC_OBJ_NUMANODE, node)) != nullptr) {
    if (hwloc_bitmap_isset(nodeset, node->os_index)) nodes.push_back(static_cast<int>(node->os_index));
  }
  return nodes;
}

}  // namespace

bool parse_pci_bus_id(const std::string& text, unsigned* domain, unsigned* bus, unsigned* device, unsigned* function) {
  char tail = 0;
  return std::sscanf(text.c_str(), "%x:%x:%x.%x%c", domain, bus, device, function, &tail) == 4 && *bus <= 0xff &&
         *device <= 0x1f && *function <= 0x7;
}

HostTopology::HostTopology() {
  if (hwloc_topology_init(&topology_) != 0) throw FatalError(ExitCode::runtime_error, "hwloc_topology_init failed");
  // PCI devices are filtered out by default; the GPU -> NUMA lookup needs them.
  if (hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
      hwloc_topology_load(topology_) != 0) {
    const std::string why = std::strerror(errno);
    hwloc_topology_destroy(topology_);
    throw FatalError(ExitCode::runtime_error, "hwloc topology load failed: " + why);
  }
}

HostTopology::~HostTopology() { hwloc_topology_destroy(topology_); }

std::vector<int> HostTopology::numa_nodes() const {
  return nodes_in(*this, hwloc_topology_get_topology_nodeset(topology_));
}

std::optional<int> HostTopology::numa_node_of_pci(const std::string& bus_id, std::string* reason) const {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (!parse_pci_bus_id(bus_id, &domain, &bus, &device, &function)) {
    *reason = "cannot parse PCI bus id '" + bus_id + "'";
    return std::nullopt;
  }
  hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topology_, domain, bus, device, function);
  if (!pci) {
    const auto all = numa_nodes();
    if (all.size() == 1) return all.front();  // one node: it is local to everything
    // hwloc may not see PCI devices (some containers); the kernel's own answer is one file away.
    char path[96];
    std::snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", domain, bus, device, function);
    if (std::FILE* file = std::fopen(path, "r")) {
      int node = -1;
      const bool read = std::fscanf(file, "%d", &node) == 1;
      std::fclose(file);
      if (read && std::find(all.begin(), all.end(), node) != all.end()) return node;
    }
    *reason = "PCI device " + bus_id + " not found in the hwloc topology, and " + path + " names no NUMA node of it";
    return std::nullopt;
  }
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topology_, pci);
  if (!ancestor || !ancestor->nodeset) {
    *reason = "no non-I/O ancestor with a nodeset for " + bus_id;
    return std::nullopt;
  }
  const auto nodes = nodes_in(*this, ancestor->nodeset);
  if (nodes.size() != 1) {
    *reason = "the CPU-side ancestor of " + bus_id + " spans " + std::to_string(nodes.size()) + " NUMA nodes";
    return std::nullopt;
  }
  return nodes.front();
}

std::vector<int> HostTopology::memory_location(const void* address, std::size_t bytes) const {
  Bitmap nodeset;
  if (hwloc_get_area_memlocation(topology_, address, bytes, nodeset.get(), HWLOC_MEMBIND_BYNODESET) != 0) return {};
  return nodes_in(*this, nodeset.get());
}

PinnedNumaBuffer::PinnedNumaBuffer(const HostTopology& topology, int numa_node, std::size_t bytes)
    : topology_(topology), bytes_(bytes) {
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology.get(), static_cast<unsigned>(numa_node));
  if (!node) throw FatalError(ExitCode::runtime_error, "NUMA node " + std::to_string(numa_node) + " not in the topology");
  data_ = hwloc_alloc_membind(topology.get(), bytes, node->nodeset, HWLOC_MEMBIND_BIND,
                              HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
  if (!data_) {
    // Containers often forbid mbind(); fall back to hwloc's best effort and say so. The pages'
    // real location is checked afterwards (memory_location) and recorded with the result.
    binding_error_ = std::strerror(errno);
    data_ = hwloc_alloc_membind(topology.get(), bytes, node->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
  }
  if (!data_) {
    throw AllocationFailure("cannot allocate " + std::to_string(bytes) + " bytes of host memory bound to NUMA node " +
                            std::to_string(numa_node) + ": " + std::strerror(errno));
  }
  // Registration faults every page in under the binding above, then pins it.
  const cudaError_t result = cudaHostRegister(data_, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    hwloc_free(topology.get(), data_, bytes);
    data_ = nullptr;
    const std::string message = "cudaHostRegister of " + std::to_string(bytes) + " bytes on NUMA node " +
                                std::to_string(numa_node) + " failed: " + cudaGetErrorString(result);
    // Pinning more than the locked-memory limit (ulimit -l, container) is a size that does not fit.
    if (result == cudaErrorMemoryAllocation) throw AllocationFailure(message);
    throw FatalError(ExitCode::runtime_error, message);
  }
  registered_ = true;
}

PinnedNumaBuffer::~PinnedNumaBuffer() {
  if (!data_) return;
  if (registered_) (void)cudaHostUnregister(data_);
  hwloc_free(topology_.get(), data_, bytes_);
}

}  // namespace cclbench::p2p
