#pragma once
// The GPU-NIC-NUMA mapper: an hwloc topology (the live machine or an XML file) reduced to what a
// communication result needs: GPUs and RDMA NICs with their PCI bus ids, NUMA nodes and CPU sets,
// the path class between any two of them (nvidia-smi topo -m's X/PIX/PXB/PHB/NODE/SYS, NV# where
// the caller knows NVLink counts) and, per GPU, the NICs in the order NCCL prefers them.
// Host code only: no CUDA headers. GPU bus ids come from the caller (CUDA order) or, without them,
// from a PCI class scan (NVIDIA display/3D controllers in bus-id order = CUDA's PCI_BUS_ID order).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/nccl_hca.hpp"

struct hwloc_topology;  // hwloc's opaque type; hwloc.h stays out of our headers

namespace cclbench::topology {

inline constexpr const char* kTopologySchemaVersion = "1.0.0";

// Ordered nearest first: sorting by this order is how NCCL ranks NICs for a GPU.
enum class PathClass { self, nvlink, pix, pxb, phb, node, sys };

struct Path {
  PathClass kind = PathClass::sys;
  int nvlinks = 0;  // only for PathClass::nvlink
  friend bool operator==(const Path&, const Path&) = default;
};

// "X", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS".
std::string to_string(const Path& path);
// True when `a` is strictly nearer than `b` (more NVLinks is nearer).
bool nearer(const Path& a, const Path& b);

// Loads `xml` with hwloc in a child process and throws a UsageError naming `what` when the child
// dies by a signal (hwloc asserts or crashes on some malformed files). load_xml_text calls it after
// its screening; exposed for tests that feed it what the screening would refuse.
void trial_load_in_child(const std::string& xml, const std::string& what);

// Owns one loaded hwloc topology (move-only).
class HwlocTopology {
 public:
  // This machine, with PCI bridges and OS devices kept, and CPUs/NUMA nodes outside this process's
  // cgroup included (device CPU affinity as nvidia-smi shows it). GPU plugins (cuda, nvml, ...) are
  // disabled so that loading never initialises a GPU runtime. Throws FatalError(runtime_error).
  static HwlocTopology load_live();
  // An hwloc 2.x XML export. Empty, binary, truncated, non-hwloc and newer-major files are refused
  // with a UsageError naming `what` before hwloc sees them (its parsers print to stderr).
  static HwlocTopology load_xml_file(const std::string& path);
  static HwlocTopology load_xml_text(std::string_view xml, const std::string& what);

  HwlocTopology(HwlocTopology&& other) noexcept;
  HwlocTopology& operator=(HwlocTopology&& other) noexcept;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology();

  hwloc_topology* get() const { return topology_; }
  bool is_live() const { return live_; }
  const std::string& source() const { return source_; }  // "live" or the XML path

 private:
  HwlocTopology(hwloc_topology* topology, bool live, std::string source)
      : topology_(topology), live_(live), source_(std::move(source)) {}
  hwloc_topology* topology_ = nullptr;
  bool live_ = false;
  std::string source_;
};

// The hwloc release this was built against, e.g. "2.9.0" (hwloc has no run-time release query).
std::string hwloc_version();

// "0000:C1:00.0", "00000000:c1:00.0", "c1:00.0" -> "0000:c1:00.0". Throws UsageError.
std::string normalize_pci_bus_id(std::string_view bus_id);

struct NumaNode {
  unsigned os_index = 0;
  std::string cpuset;  // hwloc list format, "0-15,32-47"
  std::optional<unsigned long long> local_memory_bytes;
};

struct Gpu {
  int index = 0;            // CUDA index when bus ids came from CUDA, else scan order
  std::string pci_bus_id;   // normalised
  bool found = false;       // present in the hwloc topology
  std::string name;
  std::optional<std::string> pci_id;  // "10de:2bb5"
  std::vector<unsigned> numa_nodes;   // empty: unknown
  std::string cpuset;                 // "" unknown
};

struct NicPort {
  int number = 0;
  std::optional<std::string> state;       // "ACTIVE", "DOWN", ...
  std::optional<std::string> link_layer;  // "InfiniBand" or "Ethernet"
  std::optional<std::string> rate;        // "400 Gb/sec (4X NDR)"
  std::optional<double> rate_gbps;
};

struct Nic {
  int index = 0;
  std::string name;  // RDMA device, "mlx5_0"
  std::string pci_bus_id;
  std::optional<std::string> netdev;  // "eth0": the network OS device of the same PCI function
  std::vector<unsigned> numa_nodes;
  std::string cpuset;
  std::vector<NicPort> ports;  // empty: unknown
  std::string ports_source;    // "sysfs", "hwloc" or "none"
};

// A network interface whose PCI function has no RDMA device (Ethernet, management port).
struct NetInterface {
  std::string name;
  std::string pci_bus_id;
  std::vector<unsigned> numa_nodes;
};

struct MapperOptions {
  std::vector<std::string> gpu_pci_bus_ids;  // CUDA order; empty: PCI class scan
  std::vector<std::string> gpu_names;        // optional, parallel to gpu_pci_bus_ids
  std::string sysfs_root;                    // "" = never read sysfs (offline XML)
  std::vector<std::vector<int>> nvlink_counts;  // optional [gpu][gpu] NVLink counts
};

// One NIC port as a candidate for a GPU.
struct NicChoice {
  int nic = 0;
  std::string name;
  std::optional<int> port;
  std::optional<std::string> netdev;
  std::optional<Path> path;  // nullopt: unknown (GPU not in the topology)
  bool allowed = false;      // NCCL_IB_HCA allows it and its port is not known to be down
  std::string reason;        // why not allowed
};

struct NodeTopology {
  std::string source;  // "live" or the XML path
  bool live = false;
  std::optional<std::string> host;
  std::string hwloc_version;
  std::string gpu_discovery;  // "caller_bus_ids" or "pci_class_scan"
  bool has_pci = false;       // any PCI device in the topology at all
  std::vector<NumaNode> numa_nodes;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<NetInterface> other_netdevs;
  // Square, GPUs first then NICs; nullopt where unknown.
  std::vector<std::vector<std::optional<Path>>> paths;

  std::optional<Path> gpu_gpu(int a, int b) const { return paths.at(a).at(b); }
  std::optional<Path> gpu_nic(int gpu, int nic) const { return paths.at(gpu).at(gpus.size() + nic); }
  std::optional<Path> nic_nic(int a, int b) const { return paths.at(gpus.size() + a).at(gpus.size() + b); }
  // All NIC ports for `gpu`, nearest first (ties: NIC index, port); `allowed` set from `spec`.
  std::vector<NicChoice> nic_choices(int gpu, const HcaSpec& spec) const;
};

NodeTopology build_node_topology(const HwlocTopology& topology, const MapperOptions& options);

// The full model (results_schema/topology.schema.json).
nlohmann::json to_json(const NodeTopology& model, const HcaSpec& spec);

// Surprises of NCCL's prefix matching on this node, e.g. "NCCL_IB_HCA entry 'mlx5_1' is a prefix:
// it also matches mlx5_10 (write '=mlx5_1' for that device alone)". Empty for exact specs.
std::vector<std::string> hca_prefix_notes(const NodeTopology& model, const HcaSpec& spec);

// nvidia-smi topo -m layout, then a "GPU -> NIC" table of the allowed NICs.
std::string format_topo_matrix(const NodeTopology& model, const HcaSpec& spec);

// "0-3,8" from a list of indices.
std::string format_index_list(const std::vector<unsigned>& indices);

}  // namespace cclbench::topology
