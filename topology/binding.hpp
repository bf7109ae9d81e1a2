#pragma once
// Per-rank binding record: the affinity one measurement ran under, captured by each rank on its own
// node (live machine, this process). Host code only: no CUDA, no MPI.
//
// Stable API for coll_perf, p2p_matrix and any other tool (keep these signatures):
//
//   #include "topology/binding.hpp"
//   // after cudaSetDevice(): bus id from cudaDeviceGetPCIBusId(), any case/width ("0000:C1:00.0")
//   nlohmann::json record = cclbench::topology::capture_binding_record(rank, local_rank, bus_id);
//   // ... gather the records to rank 0 (e.g. as record.dump() strings) and store them as an array
//   // "bindings" in the result file; print record["warning"] when it is a string.
//
// capture_binding_record() never throws: whatever cannot be found becomes null with a
// "<key>_reason" string. It loads hwloc's view of the live machine (no GPU plugins, so it never
// initialises CUDA/NVML) and takes about as long as `lstopo` (tens of ms): call it once per rank,
// outside timed regions. Keys (schema: results_schema/topology.schema.json#/$defs/binding_record):
//   host, rank, local_rank, hwloc_version
//   nccl_ib_hca             the NCCL_IB_HCA value in force, or null when unset
//   gpu_pci_bus_id          "0000:c1:00.0" (normalised), null when the rank has no GPU
//   cpu_binding             hwloc_get_cpubind(HWLOC_CPUBIND_PROCESS): the CPUs this process may
//                           run on (union over its threads), hwloc list format "0-15,32-47"
//   cpu_binding_numa_nodes  NUMA nodes of those CPUs, "0" or "0-1"
//   memory_binding          {policy, nodeset} from hwloc_get_membind
//   gpu_numa_node           NUMA node of the GPU's PCI path (null when none or several)
//   gpu_cpu_affinity        CPUs local to the GPU
//   cpus_local_to_gpu       cpu_binding is within gpu_cpu_affinity
//   rdma_nic_count          RDMA NICs on the node (present once the GPU was found)
//   allowed_nics            [{name, port, netdev, path_class, numa_nodes}], nearest to the GPU
//                           first: the NIC ports NCCL may use for it (NCCL_IB_HCA allows them and
//                           their port is not known to be down)
//   warning                 binding_warning() of the record, or null: CPUs not local to the GPU,
//                           or a node with RDMA NICs none of which is usable for this GPU
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cclbench::topology {

// The simple entry point: host from gethostname(), NCCL_IB_HCA from the environment, sysfs at /sys.
// `gpu_pci_bus_id` "" when the rank has no GPU.
nlohmann::json capture_binding_record(int rank, int local_rank, const std::string& gpu_pci_bus_id);

struct BindingInput {
  std::string host;  // "" -> gethostname()
  int rank = 0;
  int local_rank = 0;
  std::string gpu_pci_bus_id;  // "" when the rank has no GPU
  std::string nccl_ib_hca;     // NCCL_IB_HCA value or ""
  std::string sysfs_root = "/sys";
};

// The same with every input explicit (tests, tools that override NCCL_IB_HCA or sysfs).
nlohmann::json capture_binding_record(const BindingInput& input);

// e.g. "rank 3 on node7 runs on CPUs 0-63 (NUMA 0) but its GPU 0000:c1:00.0 is on NUMA 1";
// nullopt when fine or unknown. capture_binding_record() stores it as "warning".
std::optional<std::string> binding_warning(const nlohmann::json& record);

// Full model of the live machine as JSON (what topo_map --json writes), for topology/<host>.json.
// Throws UsageError for an invalid bus id or NCCL_IB_HCA spec, FatalError when hwloc fails.
nlohmann::json capture_live_topology_json(const std::vector<std::string>& gpu_pci_bus_ids,
                                          const std::string& nccl_ib_hca, const std::string& sysfs_root);

}  // namespace cclbench::topology
