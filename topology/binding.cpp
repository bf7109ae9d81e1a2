#include "topology/binding.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <memory>

#include "topology/hwloc_bitmap.hpp"
#include "topology/nccl_hca.hpp"
#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

const char* membind_policy_name(hwloc_membind_policy_t policy) {
  switch (policy) {
    case HWLOC_MEMBIND_DEFAULT: return "default";
    case HWLOC_MEMBIND_FIRSTTOUCH: return "firsttouch";
    case HWLOC_MEMBIND_BIND: return "bind";
    case HWLOC_MEMBIND_INTERLEAVE: return "interleave";
    case HWLOC_MEMBIND_NEXTTOUCH: return "nexttouch";
    case HWLOC_MEMBIND_MIXED: return "mixed";
    default: return "unknown";
  }
}

void set_null(nlohmann::json& record, const std::string& key, const std::string& reason) {
  record[key] = nullptr;
  record[key + "_reason"] = reason;
}

nlohmann::json capture_record_fields(const BindingInput& input);  // everything but "warning"

}  // namespace

nlohmann::json capture_binding_record(int rank, int local_rank, const std::string& gpu_pci_bus_id) {
  BindingInput input;
  input.rank = rank;
  input.local_rank = local_rank;
  input.gpu_pci_bus_id = gpu_pci_bus_id;
  if (const char* spec = std::getenv("NCCL_IB_HCA")) input.nccl_ib_hca = spec;
  return capture_binding_record(input);
}

nlohmann::json capture_binding_record(const BindingInput& input) {
  nlohmann::json record = capture_record_fields(input);
  const std::optional<std::string> warning = binding_warning(record);
  record["warning"] = warning ? nlohmann::json(*warning) : nlohmann::json(nullptr);
  return record;
}

namespace {

nlohmann::json capture_record_fields(const BindingInput& input) {
  nlohmann::json record;
  std::string host = input.host;
  if (host.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0) host = name;
  }
  record["host"] = host;
  record["rank"] = input.rank;
  record["local_rank"] = input.local_rank;
  record["hwloc_version"] = hwloc_version();
  record["nccl_ib_hca"] = input.nccl_ib_hca.empty() ? nlohmann::json(nullptr) : nlohmann::json(input.nccl_ib_hca);
  const char* gpu_keys[] = {"gpu_numa_node", "gpu_cpu_affinity", "cpus_local_to_gpu", "allowed_nics"};

  std::string bus_id;
  std::string gpu_reason;
  if (input.gpu_pci_bus_id.empty()) {
    gpu_reason = "this rank has no GPU";
    set_null(record, "gpu_pci_bus_id", gpu_reason);
  } else {
    try {
      bus_id = normalize_pci_bus_id(input.gpu_pci_bus_id);
      record["gpu_pci_bus_id"] = bus_id;
    } catch (const std::exception& error) {
      gpu_reason = error.what();
      set_null(record, "gpu_pci_bus_id", gpu_reason);
    }
  }

  std::optional<HwlocTopology> handle;
  try {
    handle.emplace(HwlocTopology::load_live());
  } catch (const std::exception& error) {
    const std::string reason = std::string("hwloc: ") + error.what();
    for (const char* key : {"cpu_binding", "cpu_binding_numa_nodes", "memory_binding"}) set_null(record, key, reason);
    for (const char* key : gpu_keys) set_null(record, key, bus_id.empty() ? gpu_reason : reason);
    return record;
  }
  hwloc_topology_t topology = handle->get();

  Bitmap cpus(hwloc_bitmap_alloc());
  Bitmap cpu_nodes(hwloc_bitmap_alloc());
  bool have_cpus = false;
  if (cpus && cpu_nodes && hwloc_get_cpubind(topology, cpus.get(), HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(cpus.get())) {
    have_cpus = true;
    record["cpu_binding"] = list_string(cpus.get());
    hwloc_cpuset_to_nodeset(topology, cpus.get(), cpu_nodes.get());
    record["cpu_binding_numa_nodes"] = list_string(cpu_nodes.get());
  } else {
    set_null(record, "cpu_binding", "hwloc_get_cpubind is not supported or failed here");
    set_null(record, "cpu_binding_numa_nodes", "CPU binding unknown");
  }

  Bitmap mem_nodes(hwloc_bitmap_alloc());
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
  if (mem_nodes && hwloc_get_membind(topology, mem_nodes.get(), &policy, HWLOC_MEMBIND_BYNODESET) == 0) {
    record["memory_binding"] = {{"policy", membind_policy_name(policy)}, {"nodeset", list_string(mem_nodes.get())}};
  } else {
    set_null(record, "memory_binding", "hwloc_get_membind is not supported or failed here");
  }

  if (bus_id.empty()) {
    for (const char* key : gpu_keys) set_null(record, key, gpu_reason);
    return record;
  }
  MapperOptions options;
  options.gpu_pci_bus_ids = {bus_id};
  options.sysfs_root = input.sysfs_root;
  NodeTopology model;
  try {
    model = build_node_topology(*handle, options);
  } catch (const std::exception& error) {
    for (const char* key : gpu_keys) set_null(record, key, error.what());
    return record;
  }
  record["rdma_nic_count"] = model.nics.size();
  const Gpu& gpu = model.gpus.at(0);
  if (!gpu.found) {
    for (const char* key : gpu_keys) set_null(record, key, "GPU " + bus_id + " is not in hwloc's PCI tree");
    return record;
  }
  if (gpu.numa_nodes.size() == 1) {
    record["gpu_numa_node"] = gpu.numa_nodes[0];
  } else {
    set_null(record, "gpu_numa_node", gpu.numa_nodes.empty() ? "hwloc attaches the GPU to no NUMA node"
                                                             : "the GPU is local to NUMA nodes " + format_index_list(gpu.numa_nodes));
  }
  if (gpu.cpuset.empty()) {
    set_null(record, "gpu_cpu_affinity", "the GPU has no local CPU set");
    set_null(record, "cpus_local_to_gpu", "the GPU has no local CPU set");
  } else {
    record["gpu_cpu_affinity"] = gpu.cpuset;
    Bitmap gpu_cpus(hwloc_bitmap_alloc());
    if (have_cpus && gpu_cpus && hwloc_bitmap_list_sscanf(gpu_cpus.get(), gpu.cpuset.c_str()) == 0) {
      record["cpus_local_to_gpu"] = hwloc_bitmap_isincluded(cpus.get(), gpu_cpus.get()) != 0;
    } else {
      set_null(record, "cpus_local_to_gpu", "CPU binding unknown");
    }
  }
  try {
    const HcaSpec spec = parse_nccl_ib_hca(input.nccl_ib_hca);
    nlohmann::json nics = nlohmann::json::array();
    for (const NicChoice& choice : model.nic_choices(0, spec)) {
      if (!choice.allowed) continue;
      const Nic& nic = model.nics.at(choice.nic);
      nics.push_back({{"name", choice.name},
                      {"port", choice.port ? nlohmann::json(*choice.port) : nlohmann::json(nullptr)},
                      {"netdev", choice.netdev ? nlohmann::json(*choice.netdev) : nlohmann::json(nullptr)},
                      {"path_class", choice.path ? nlohmann::json(to_string(*choice.path)) : nlohmann::json(nullptr)},
                      {"numa_nodes", nic.numa_nodes.empty() ? nlohmann::json(nullptr) : nlohmann::json(nic.numa_nodes)}});
    }
    record["allowed_nics"] = std::move(nics);
  } catch (const std::exception& error) {
    set_null(record, "allowed_nics", error.what());
  }
  return record;
}

}  // namespace

std::optional<std::string> binding_warning(const nlohmann::json& record) {
  if (!record.is_object()) return std::nullopt;
  const auto text = [&](const char* key) -> std::string {
    const auto it = record.find(key);
    if (it == record.end() || it->is_null()) return "?";
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  const std::string who = "rank " + text("rank") + " on " + text("host");
  std::vector<std::string> problems;
  const auto local = record.find("cpus_local_to_gpu");
  if (local != record.end() && local->is_boolean() && !local->get<bool>()) {
    problems.push_back(who + " runs on CPUs " + text("cpu_binding") + " (NUMA " + text("cpu_binding_numa_nodes") +
                       ") but its GPU " + text("gpu_pci_bus_id") + " is on NUMA " +
                       (record.contains("gpu_numa_node") && !record["gpu_numa_node"].is_null()
                            ? text("gpu_numa_node")
                            : "(CPUs " + text("gpu_cpu_affinity") + ")"));
  }
  // A node without RDMA NICs (single-node runs) is fine; NICs that the spec or port states all rule
  // out are not.
  const auto nics = record.find("allowed_nics");
  const auto nic_count = record.find("rdma_nic_count");
  const bool node_has_nics = nic_count != record.end() && nic_count->is_number_integer() && nic_count->get<long long>() > 0;
  if (node_has_nics && nics != record.end() && nics->is_array() && nics->empty()) {
    problems.push_back(who + ": no usable NIC for its GPU " + text("gpu_pci_bus_id") +
                       (record.contains("nccl_ib_hca") && !record["nccl_ib_hca"].is_null() ? " under NCCL_IB_HCA=" + text("nccl_ib_hca") : ""));
  }
  if (problems.empty()) return std::nullopt;
  std::string joined = problems[0];
  for (std::size_t i = 1; i < problems.size(); ++i) joined += "; " + problems[i];
  return joined;
}

nlohmann::json capture_live_topology_json(const std::vector<std::string>& gpu_pci_bus_ids,
                                          const std::string& nccl_ib_hca, const std::string& sysfs_root) {
  const HcaSpec spec = parse_nccl_ib_hca(nccl_ib_hca);
  MapperOptions options;
  options.gpu_pci_bus_ids = gpu_pci_bus_ids;
  options.sysfs_root = sysfs_root;
  const HwlocTopology handle = HwlocTopology::load_live();
  return to_json(build_node_topology(handle, options), spec);
}

}  // namespace cclbench::topology
