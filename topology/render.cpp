// JSON and nvidia-smi-style text for a NodeTopology.
#include <algorithm>
#include <sstream>

#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

nlohmann::json optional_string(const std::optional<std::string>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json path_json(const std::optional<Path>& path) {
  return path ? nlohmann::json(to_string(*path)) : nlohmann::json(nullptr);
}

nlohmann::json choice_json(const NicChoice& choice) {
  nlohmann::json out = {{"nic_index", choice.nic},
                        {"name", choice.name},
                        {"port", choice.port ? nlohmann::json(*choice.port) : nlohmann::json(nullptr)},
                        {"netdev", optional_string(choice.netdev)},
                        {"path_class", path_json(choice.path)},
                        {"allowed", choice.allowed}};
  if (!choice.reason.empty()) out["not_allowed_reason"] = choice.reason;
  return out;
}

std::string numa_text(const std::vector<unsigned>& nodes) {
  return nodes.empty() ? "N/A" : format_index_list(nodes);
}

std::string port_text(const NicPort& port) {
  std::string text = "port " + std::to_string(port.number) + " " + port.state.value_or("state?");
  if (port.link_layer) text += " " + std::string(*port.link_layer == "Ethernet" ? "RoCE" : *port.link_layer == "InfiniBand" ? "IB" : *port.link_layer);
  if (port.rate) text += " " + *port.rate;
  return text;
}

}  // namespace

std::vector<std::string> hca_prefix_notes(const NodeTopology& model, const HcaSpec& spec) {
  std::vector<std::string> notes;
  if (!spec.is_set() || spec.exact()) return notes;
  for (const HcaSpecEntry& entry : spec.entries()) {
    std::vector<std::string> longer;
    for (const Nic& nic : model.nics) {
      if (nic.name.size() > entry.name.size() && nic.name.starts_with(entry.name)) longer.push_back(nic.name);
    }
    const bool names_a_device = std::any_of(model.nics.begin(), model.nics.end(), [&](const Nic& nic) { return nic.name == entry.name; });
    if (longer.empty() || !names_a_device) continue;  // "mlx5" meaning "every mlx5_*" is no surprise
    std::string list = longer[0];
    for (std::size_t i = 1; i < longer.size(); ++i) list += ", " + longer[i];
    notes.push_back("NCCL_IB_HCA entry '" + entry.name + "' is a prefix, as in NCCL: it also " +
                    (spec.exclude() ? "excludes " : "matches ") + list + " (write '" + (spec.exclude() ? "^=" : "=") +
                    entry.name + "' for that device alone)");
  }
  return notes;
}

nlohmann::json to_json(const NodeTopology& model, const HcaSpec& spec) {
  nlohmann::json doc;
  doc["schema_version"] = kTopologySchemaVersion;
  doc["source"] = model.source;
  doc["source_kind"] = model.live ? "live" : "xml";
  doc["host"] = optional_string(model.host);
  if (!model.host) doc["host_reason"] = "the XML topology records no HostName";
  doc["hwloc_version"] = model.hwloc_version;
  doc["gpu_discovery"] = model.gpu_discovery;
  doc["has_pci"] = model.has_pci;
  doc["nccl_ib_hca"] = spec.is_set() ? nlohmann::json(spec.text()) : nlohmann::json(nullptr);
  doc["nccl_ib_hca_notes"] = hca_prefix_notes(model, spec);

  doc["numa_nodes"] = nlohmann::json::array();
  for (const NumaNode& node : model.numa_nodes) {
    nlohmann::json entry = {{"os_index", node.os_index}, {"cpuset", node.cpuset}};
    entry["local_memory_bytes"] = node.local_memory_bytes ? nlohmann::json(*node.local_memory_bytes) : nlohmann::json(nullptr);
    doc["numa_nodes"].push_back(std::move(entry));
  }

  doc["gpus"] = nlohmann::json::array();
  for (const Gpu& gpu : model.gpus) {
    nlohmann::json entry = {{"index", gpu.index}, {"name", gpu.name}, {"pci_bus_id", gpu.pci_bus_id}, {"found_in_topology", gpu.found}};
    entry["pci_id"] = optional_string(gpu.pci_id);
    if (gpu.numa_nodes.empty()) {
      entry["numa_nodes"] = nullptr;
      entry["numa_nodes_reason"] = gpu.found ? "hwloc attaches this device to no NUMA node" : "bus id not in the hwloc topology";
    } else {
      entry["numa_nodes"] = gpu.numa_nodes;
    }
    entry["cpu_affinity"] = gpu.cpuset.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu.cpuset);
    if (gpu.cpuset.empty()) entry["cpu_affinity_reason"] = gpu.found ? "no local CPU set" : "bus id not in the hwloc topology";
    doc["gpus"].push_back(std::move(entry));
  }

  doc["nics"] = nlohmann::json::array();
  for (const Nic& nic : model.nics) {
    nlohmann::json entry = {{"index", nic.index}, {"name", nic.name}, {"pci_bus_id", nic.pci_bus_id}};
    entry["netdev"] = optional_string(nic.netdev);
    if (!nic.netdev) entry["netdev_reason"] = "no network OS device on the same PCI function";
    entry["numa_nodes"] = nic.numa_nodes.empty() ? nlohmann::json(nullptr) : nlohmann::json(nic.numa_nodes);
    if (nic.numa_nodes.empty()) entry["numa_nodes_reason"] = "hwloc attaches this device to no NUMA node";
    entry["cpu_affinity"] = nic.cpuset.empty() ? nlohmann::json(nullptr) : nlohmann::json(nic.cpuset);
    entry["ports_source"] = nic.ports_source;
    entry["ports"] = nlohmann::json::array();
    const std::string missing = nic.ports_source == "sysfs" ? "not readable in sysfs" : "not recorded by hwloc (offline XML or no sysfs)";
    for (const NicPort& port : nic.ports) {
      nlohmann::json p = {{"port", port.number}};
      p["state"] = optional_string(port.state);
      p["link_layer"] = optional_string(port.link_layer);
      p["protocol"] = !port.link_layer                ? nlohmann::json(nullptr)
                      : *port.link_layer == "Ethernet" ? nlohmann::json("RoCE")
                      : *port.link_layer == "InfiniBand" ? nlohmann::json("IB")
                                                         : nlohmann::json(nullptr);
      p["rate"] = optional_string(port.rate);
      p["rate_gbps"] = port.rate_gbps ? nlohmann::json(*port.rate_gbps) : nlohmann::json(nullptr);
      if (!port.state) p["state_reason"] = missing;
      if (!port.link_layer) p["link_layer_reason"] = missing;
      if (!port.rate) p["rate_reason"] = missing;
      if (p["protocol"].is_null()) p["protocol_reason"] = port.link_layer ? "link layer is neither InfiniBand nor Ethernet" : "link layer unknown";
      entry["ports"].push_back(std::move(p));
    }
    if (nic.ports.empty()) entry["ports_reason"] = "no port information (offline XML without port records, or sysfs unreadable)";
    doc["nics"].push_back(std::move(entry));
  }

  doc["other_netdevs"] = nlohmann::json::array();
  for (const NetInterface& netdev : model.other_netdevs) {
    doc["other_netdevs"].push_back({{"name", netdev.name}, {"pci_bus_id", netdev.pci_bus_id},
                                    {"numa_nodes", netdev.numa_nodes.empty() ? nlohmann::json(nullptr) : nlohmann::json(netdev.numa_nodes)}});
  }

  nlohmann::json devices = nlohmann::json::array();
  for (const Gpu& gpu : model.gpus) devices.push_back("GPU" + std::to_string(gpu.index));
  for (const Nic& nic : model.nics) devices.push_back("NIC" + std::to_string(nic.index));
  doc["devices"] = devices;
  doc["path_matrix"] = nlohmann::json::array();
  for (const auto& row : model.paths) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& cell : row) cells.push_back(path_json(cell));
    doc["path_matrix"].push_back(std::move(cells));
  }

  doc["gpu_nics"] = nlohmann::json::array();
  for (std::size_t g = 0; g < model.gpus.size(); ++g) {
    nlohmann::json order = nlohmann::json::array();
    nlohmann::json allowed = nlohmann::json::array();
    for (const NicChoice& choice : model.nic_choices(static_cast<int>(g), spec)) {
      order.push_back(choice_json(choice));
      if (choice.allowed) allowed.push_back(choice_json(choice));
    }
    doc["gpu_nics"].push_back({{"gpu_index", model.gpus[g].index}, {"pci_bus_id", model.gpus[g].pci_bus_id},
                               {"nic_order", std::move(order)}, {"allowed_nics", std::move(allowed)}});
  }
  return doc;
}

std::string format_topo_matrix(const NodeTopology& model, const HcaSpec& spec) {
  std::ostringstream out;
  std::vector<std::string> names;
  for (const Gpu& gpu : model.gpus) names.push_back("GPU" + std::to_string(gpu.index));
  for (const Nic& nic : model.nics) names.push_back("NIC" + std::to_string(nic.index));

  for (const std::string& name : names) out << '\t' << name;
  out << "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  for (std::size_t i = 0; i < names.size(); ++i) {
    out << names[i];
    for (std::size_t j = 0; j < names.size(); ++j) {
      const auto& cell = model.paths[i][j];
      out << '\t' << (!cell ? std::string("N/A") : cell->kind == PathClass::self ? std::string(" X ") : to_string(*cell));
    }
    if (i < model.gpus.size()) {
      const Gpu& gpu = model.gpus[i];
      // GPU NUMA ID is the NUMA node of the GPU's own memory (coherent C2C systems); PCIe GPUs have none.
      out << '\t' << (gpu.cpuset.empty() ? "N/A" : gpu.cpuset) << '\t' << numa_text(gpu.numa_nodes) << "\t\tN/A";
    }
    out << '\n';
  }
  out << "\nLegend:\n\n"
         "  X    = Self\n"
         "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
         "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
         "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
         "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
         "  PIX  = Connection traversing at most a single PCIe bridge\n"
         "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  if (!model.nics.empty()) {
    out << "\nNIC Legend:\n\n";
    for (const Nic& nic : model.nics) out << "  NIC" << nic.index << ": " << nic.name << '\n';
  }
  out << "\nGPU -> NIC (nearest first; NCCL_IB_HCA=" << (spec.is_set() ? spec.text() : "<unset>") << "):\n\n";
  if (model.gpus.empty()) out << "  no GPU\n";
  for (std::size_t g = 0; g < model.gpus.size(); ++g) {
    out << "  GPU" << model.gpus[g].index << " (" << model.gpus[g].pci_bus_id << "):";
    bool any = false;
    for (const NicChoice& choice : model.nic_choices(static_cast<int>(g), spec)) {
      if (!choice.allowed) continue;
      out << (any ? ", " : " ") << choice.name;
      if (choice.port) out << ':' << *choice.port;
      if (choice.netdev) out << '/' << *choice.netdev;
      out << ' ' << (choice.path ? to_string(*choice.path) : std::string("N/A"));
      any = true;
    }
    out << (any ? "\n" : " no allowed NIC\n");
  }
  for (const std::string& note : hca_prefix_notes(model, spec)) out << "\n  note: " << note << '\n';
  if (!model.nics.empty()) {
    out << "\nNICs:\n\n";
    for (const Nic& nic : model.nics) {
      out << "  NIC" << nic.index << ": " << nic.name << " (" << nic.pci_bus_id << ", netdev " << nic.netdev.value_or("none")
          << ", NUMA " << numa_text(nic.numa_nodes) << ")";
      if (nic.ports.empty()) out << " ports unknown";
      for (std::size_t p = 0; p < nic.ports.size(); ++p) out << (p == 0 ? " " : "; ") << port_text(nic.ports[p]);
      out << '\n';
    }
  }
  out << "\nNUMA nodes:\n\n";
  if (model.numa_nodes.empty()) out << "  none reported\n";
  for (const NumaNode& node : model.numa_nodes) out << "  NUMA" << node.os_index << ": CPUs " << (node.cpuset.empty() ? "none" : node.cpuset) << '\n';
  if (!model.other_netdevs.empty()) {
    out << "\nNetwork interfaces without RDMA:\n\n";
    for (const NetInterface& netdev : model.other_netdevs) {
      out << "  " << netdev.name << " (" << netdev.pci_bus_id << ", NUMA " << numa_text(netdev.numa_nodes) << ")\n";
    }
  }
  return out.str();
}

}  // namespace cclbench::topology
