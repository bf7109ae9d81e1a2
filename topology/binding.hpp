#pragma once
// Per-rank binding record: the affinity a measurement ran under, captured by each rank on its own
// node (live machine, this process). Host code only.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cclbench::topology {

struct BindingInput {
  std::string host;  // "" -> gethostname()
  int rank = 0;
  int local_rank = 0;
  std::string gpu_pci_bus_id;  // "" when the rank has no GPU
  std::string nccl_ib_hca;     // NCCL_IB_HCA value or ""
  std::string sysfs_root = "/sys";
};

// Live machine, this process. Never throws for missing information: fields become null with a
// "..._reason". Keys: host, rank, local_rank, gpu_pci_bus_id, cpu_binding ("0-15,32-47"),
// cpu_binding_numa_nodes, memory_binding {policy, nodeset}, gpu_numa_node, gpu_cpu_affinity,
// cpus_local_to_gpu, nccl_ib_hca, allowed_nics [{name, port, netdev, path_class, numa_nodes}]
// nearest first (NICs NCCL may use for this GPU: spec allows it and its port is not known down),
// rdma_nic_count (RDMA NICs on the node; present when the GPU was found), hwloc_version.
// cpu_binding is hwloc_get_cpubind(HWLOC_CPUBIND_PROCESS): the union over the process's threads. Schema: results_schema/topology.schema.json#/$defs/binding_record.
nlohmann::json capture_binding_record(const BindingInput& input);

// e.g. "rank 3 on node7 runs on CPUs 0-63 (NUMA 0) but its GPU 0000:c1:00.0 is on NUMA 1";
// nullopt when fine or unknown.
std::optional<std::string> binding_warning(const nlohmann::json& record);

// Full model of the live machine as JSON (what topo_map --json writes), for topology/<host>.json.
// Throws UsageError for an invalid bus id or NCCL_IB_HCA spec, FatalError when hwloc fails.
nlohmann::json capture_live_topology_json(const std::vector<std::string>& gpu_pci_bus_ids,
                                          const std::string& nccl_ib_hca, const std::string& sysfs_root);

}  // namespace cclbench::topology
