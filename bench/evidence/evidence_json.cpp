// Edge classification and JSON rendering of the parsed NCCL evidence.
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "bench/evidence/nccl_evidence.hpp"

namespace cclbench {

namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json text_or_null(const std::string& text) { return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text); }

const NetDevice* device_of(const EvidenceSummary& summary, const std::string& host, int pid, const std::string& net,
                           int index) {
  for (const ProcessEvidence& process : summary.processes) {
    if (process.host != host || process.pid != pid) continue;
    const auto& devices = net == "Socket" ? process.socket_devices : process.ib_devices;
    for (const NetDevice& device : devices) {
      if (device.index == index) return &device;
    }
  }
  return nullptr;
}

}  // namespace

std::string transport_class(const ChannelConnection& connection) {
  switch (connection.kind) {
    case TransportKind::net:
    case TransportKind::collnet:
      return std::string(to_string(connection.kind)) + "/" + connection.net + (connection.gdr ? "+GDRDMA" : "");
    case TransportKind::shm:
      return "SHM";
    case TransportKind::p2p: {
      // "P2P/CUMEM/read" -> "P2P/CUMEM"; "P2P/direct pointer/read" -> "P2P/direct pointer"
      const std::string_view rest = std::string_view(connection.transport).substr(4);
      return "P2P/" + std::string(rest.substr(0, rest.find('/')));
    }
  }
  return connection.transport;
}

std::string node_label(const CommunicatorEvidence& comm, int rank) {
  const auto found = comm.ranks.find(rank);
  return found == comm.ranks.end() ? std::string("?") : found->second.node;
}

EdgeScope edge_scope(const CommunicatorEvidence& comm, const ChannelConnection& connection) {
  if (connection.kind == TransportKind::collnet) return EdgeScope::inter_node;
  const auto from = comm.ranks.find(connection.from_rank);
  const auto to = comm.ranks.find(connection.to_rank);
  if (from != comm.ranks.end() && to != comm.ranks.end()) {
    return from->second.node == to->second.node ? EdgeScope::intra_node : EdgeScope::inter_node;
  }
  if (comm.nnodes && *comm.nnodes == 1) return EdgeScope::intra_node;
  // NCCL only connects P2P and SHM between ranks of one node (same host hash).
  if (connection.kind == TransportKind::p2p || connection.kind == TransportKind::shm) return EdgeScope::intra_node;
  const auto known = from != comm.ranks.end() ? from : to;
  if (known == comm.ranks.end() || !known->second.local_ranks) return EdgeScope::unknown;
  // When every rank of the known rank's node is in the logs, the other rank must be elsewhere.
  std::size_t on_node = 0;
  for (const auto& [rank, entry] : comm.ranks) {
    if (entry.node == known->second.node) ++on_node;
  }
  if (on_node == static_cast<std::size_t>(*known->second.local_ranks)) return EdgeScope::inter_node;
  return EdgeScope::unknown;
}

nlohmann::json to_json(const TuningChoice& choice) {
  return {
      {"collective", choice.collective},
      {"bytes", optional_json(choice.bytes)},
      {"count", optional_json(choice.count)},
      {"datatype", optional_json(choice.datatype)},
      {"algorithm", choice.algorithm},
      {"protocol", choice.protocol},
      {"channel_lo", optional_json(choice.channel_lo)},
      {"channel_hi", optional_json(choice.channel_hi)},
      {"predicted_time_us", optional_json(choice.predicted_time_us)},
      {"comm", text_or_null(choice.comm)},
      {"host", text_or_null(choice.host)},
      {"pid", choice.pid >= 0 ? nlohmann::json(choice.pid) : nlohmann::json(nullptr)},
      {"source", choice.source},
  };
}

nlohmann::json to_json(const EvidenceSummary& summary) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const LogInput& input : summary.inputs) {
    inputs.push_back({{"path", input.path},
                      {"status", input.status},
                      {"reason", text_or_null(input.reason)},
                      {"lines", input.lines},
                      {"nccl_lines", input.nccl_lines}});
  }
  nlohmann::json processes = nlohmann::json::array();
  for (const ProcessEvidence& process : summary.processes) {
    nlohmann::json ib = nlohmann::json::array();
    for (const NetDevice& device : process.ib_devices) {
      ib.push_back({{"index", device.index},
                    {"name", device.name},
                    {"port", optional_json(device.port)},
                    {"link_layer", text_or_null(device.link_layer)}});
    }
    nlohmann::json sockets = nlohmann::json::array();
    for (const NetDevice& device : process.socket_devices) {
      sockets.push_back({{"index", device.index}, {"name", device.name}, {"address", text_or_null(device.address)}});
    }
    processes.push_back({{"log_file", process.log_file},
                         {"host", text_or_null(process.host)},
                         {"pid", process.pid >= 0 ? nlohmann::json(process.pid) : nlohmann::json(nullptr)},
                         {"nccl_version", text_or_null(process.nccl_version)},
                         {"networks", process.networks},
                         {"ib_devices", std::move(ib)},
                         {"ib_oob", text_or_null(process.ib_oob)},
                         {"ib_no_device", process.ib_no_device},
                         {"socket_devices", std::move(sockets)}});
  }
  nlohmann::json communicators = nlohmann::json::array();
  for (const CommunicatorEvidence& comm : summary.communicators) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& [rank, entry] : comm.ranks) {
      ranks.push_back({{"rank", rank},
                       {"host", text_or_null(entry.host)},
                       {"node", text_or_null(entry.node)},
                       {"pid", entry.pid >= 0 ? nlohmann::json(entry.pid) : nlohmann::json(nullptr)},
                       {"cuda_dev", optional_json(entry.cuda_dev)},
                       {"nvml_dev", optional_json(entry.nvml_dev)},
                       {"bus_id", text_or_null(entry.bus_id)},
                       {"comm_ptr", text_or_null(entry.comm_ptr)},
                       {"local_rank", optional_json(entry.local_rank)},
                       {"local_ranks", optional_json(entry.local_ranks)},
                       {"init_complete", entry.init_complete},
                       {"log_file", entry.log_file}});
    }
    nlohmann::json connections = nlohmann::json::array();
    std::map<std::string, std::map<std::string, std::uint64_t>> classes;  // scope -> class -> count
    std::map<std::tuple<std::string, std::string, int>, std::uint64_t> devices_used;
    std::map<std::tuple<std::string, std::string, int>, std::pair<std::string, int>> device_owner;
    for (const ChannelConnection& connection : comm.connections) {
      const EdgeScope scope = edge_scope(comm, connection);
      const std::string klass = transport_class(connection);
      ++classes[std::string(to_string(scope))][klass];
      nlohmann::json device = nullptr;
      if (connection.net_dev) {
        const auto key = std::make_tuple(connection.reported_by_host, connection.net, *connection.net_dev);
        ++devices_used[key];
        device_owner[key] = {connection.reported_by_host, connection.reported_by_pid};
        if (const NetDevice* found = device_of(summary, connection.reported_by_host, connection.reported_by_pid,
                                               connection.net, *connection.net_dev)) {
          device = found->port ? found->name + ":" + std::to_string(*found->port) : found->name;
        }
      }
      connections.push_back({{"channel", connection.channel},
                             {"conn_index", optional_json(connection.conn_index)},
                             {"from_rank", connection.from_rank},
                             {"to_rank", connection.to_rank},
                             {"from_node", node_label(comm, connection.from_rank)},
                             {"to_node", node_label(comm, connection.to_rank)},
                             {"scope", to_string(scope)},
                             {"direction", text_or_null(connection.direction)},
                             {"kind", to_string(connection.kind)},
                             {"class", klass},
                             {"transport", connection.transport},
                             {"net", text_or_null(connection.net)},
                             {"net_dev", optional_json(connection.net_dev)},
                             {"device", std::move(device)},
                             {"proxy_rank", optional_json(connection.proxy_rank)},
                             {"gdr", connection.gdr},
                             {"reported_by_rank", connection.reported_by_rank},
                             {"source", connection.source}});
    }
    nlohmann::json class_counts = nlohmann::json::object();
    for (const auto& [scope, counts] : classes) class_counts[scope] = counts;
    nlohmann::json used = nlohmann::json::array();
    for (const auto& [key, count] : devices_used) {
      const auto& [host, net, index] = key;
      const auto& [owner_host, owner_pid] = device_owner[key];
      const NetDevice* found = device_of(summary, owner_host, owner_pid, net, index);
      nlohmann::json name = nullptr;
      if (found) name = found->port ? found->name + ":" + std::to_string(*found->port) : found->name;
      used.push_back({{"host", text_or_null(host)}, {"net", net}, {"net_dev", index}, {"device", std::move(name)}, {"connections", count}});
    }
    nlohmann::json tuning = nlohmann::json::array();
    for (const TuningChoice& choice : comm.tuning) tuning.push_back(to_json(choice));
    communicators.push_back({{"id", comm.id},
                             {"nranks", optional_json(comm.nranks)},
                             {"nnodes", optional_json(comm.nnodes)},
                             {"ranks_in_logs", comm.ranks.size()},
                             {"ranks", std::move(ranks)},
                             {"transport_classes", std::move(class_counts)},
                             {"net_devices_used", std::move(used)},
                             {"ring_pxn", optional_json(comm.ring_pxn)},
                             {"ring_gdr", optional_json(comm.ring_gdr)},
                             {"connections", std::move(connections)},
                             {"tuning", std::move(tuning)}});
  }
  nlohmann::json unattributed = nlohmann::json::array();
  for (const TuningChoice& choice : summary.unattributed_tuning) unattributed.push_back(to_json(choice));
  return {{"inputs", std::move(inputs)},
          {"nccl_versions", summary.nccl_versions},
          {"processes", std::move(processes)},
          {"communicators", std::move(communicators)},
          {"unattributed_tuning", std::move(unattributed)},
          {"warnings", summary.warnings},
          {"notes", summary.notes}};
}

}  // namespace cclbench
