#pragma once
// Host NUMA placement through hwloc: which NUMA node a GPU hangs off (PCI bus id lookup with the
// I/O filter on), and pinned host buffers bound to a chosen node. No CUDA types in the interface
// except the registration done by PinnedNumaBuffer.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

struct hwloc_topology;

namespace cclbench::p2p {

class HostTopology {
 public:
  // Loads the live topology with important I/O objects kept. Throws FatalError on failure.
  HostTopology();
  ~HostTopology();
  HostTopology(const HostTopology&) = delete;
  HostTopology& operator=(const HostTopology&) = delete;

  // OS indexes of the NUMA nodes, ascending.
  std::vector<int> numa_nodes() const;
  // The NUMA node (OS index) local to the PCI device "dddd:bb:dd.f" (CUDA's bus id spelling), or
  // nullopt with *reason set (device not in the topology, ancestor spans several nodes...).
  std::optional<int> numa_node_of_pci(const std::string& bus_id, std::string* reason) const;
  // OS indexes of the NUMA nodes holding the pages of [address, address + bytes).
  std::vector<int> memory_location(const void* address, std::size_t bytes) const;

  hwloc_topology* get() const { return topology_; }

 private:
  hwloc_topology* topology_ = nullptr;
};

// Host memory bound (HWLOC_MEMBIND_BIND, strict) to one NUMA node, then pinned and mapped with
// cudaHostRegister (portable), so every GPU can copy from it and kernels can read/write it.
class PinnedNumaBuffer {
 public:
  PinnedNumaBuffer(const HostTopology& topology, int numa_node, std::size_t bytes);
  ~PinnedNumaBuffer();
  PinnedNumaBuffer(const PinnedNumaBuffer&) = delete;
  PinnedNumaBuffer& operator=(const PinnedNumaBuffer&) = delete;
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // Empty when the strict binding worked, else why it did not (then the binding is best effort).
  const std::string& binding_error() const { return binding_error_; }

 private:
  const HostTopology& topology_;
  std::string binding_error_;
  std::size_t bytes_;
  void* data_ = nullptr;
  bool registered_ = false;
};

// "0000:3B:00.0" / "00000000:3b:00.0" -> domain, bus, device, function. False when malformed.
bool parse_pci_bus_id(const std::string& text, unsigned* domain, unsigned* bus, unsigned* device, unsigned* function);

}  // namespace cclbench::p2p
