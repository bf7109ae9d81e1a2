#include "bench/evidence/rails.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/evidence/log_text.hpp"
#include "bench/evidence/nccl_evidence.hpp"

namespace cclbench {

namespace {

namespace fs = std::filesystem;

// Counter names that count failures; their increments during a case are reported.
bool is_error_counter(std::string_view name) {
  static constexpr std::string_view kMarkers[] = {"err", "discard", "downed", "out_of_sequence", "timeout",
                                                  "dropped", "recovery", "integrity", "overrun"};
  return std::any_of(std::begin(kMarkers), std::end(kMarkers),
                     [&](std::string_view marker) { return name.find(marker) != std::string_view::npos; });
}

std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream stream(path);
  if (!stream) return std::nullopt;
  std::string text;
  std::getline(stream, text);
  if (stream.bad()) return std::nullopt;
  return std::string(evidence_detail::trim(text));
}

std::optional<std::uint64_t> read_counter(const fs::path& path, std::string& reason) {
  const auto text = read_small_file(path);
  if (!text) {
    reason = "cannot read " + path.string();
    return std::nullopt;
  }
  if (text->empty() || text->find_first_not_of("0123456789") != std::string::npos || text->size() > 20) {
    reason = "unexpected content in " + path.string() + ": '" + text->substr(0, 40) + "'";
    return std::nullopt;
  }
  try {
    return std::stoull(*text);
  } catch (const std::exception&) {
    reason = "counter out of range in " + path.string();
    return std::nullopt;
  }
}

std::vector<std::string> sorted_entries(const fs::path& directory) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool directory_exists(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

void read_error_counters(const fs::path& directory, IbPortCounters& port) {
  if (!directory_exists(directory)) return;
  for (const std::string& name : sorted_entries(directory)) {
    if (!is_error_counter(name)) continue;
    std::string ignored;
    if (const auto value = read_counter(directory / name, ignored)) port.error_counters[name] = *value;
  }
}

bool rail_selected(const std::vector<std::string>& expected, const IbPortCounters& port) {
  if (expected.empty()) return true;
  return std::any_of(expected.begin(), expected.end(),
                     [&](const std::string& rail) { return rail == port.hca || rail == port.rail(); });
}

// after - before, or null with a reason when the counter went backwards or is missing.
nlohmann::json delta(const std::optional<std::uint64_t>& before, const std::optional<std::uint64_t>& after,
                     std::uint64_t scale, std::string& reason, const std::string& what) {
  if (!before || !after) {
    if (reason.empty()) reason = what + " counter unavailable";
    return nullptr;
  }
  if (*after < *before) {
    reason = what + " counter decreased (" + std::to_string(*before) + " -> " + std::to_string(*after) +
             "): wrapped or reset during the case";
    return nullptr;
  }
  return (*after - *before) * scale;
}

}  // namespace

RailSnapshot read_rail_counters(const std::string& sysfs_root) {
  RailSnapshot snapshot;
  snapshot.sysfs_root = sysfs_root;
  const fs::path ib_root = fs::path(sysfs_root) / "class" / "infiniband";
  if (!directory_exists(ib_root)) {
    snapshot.ib_missing_reason = "no " + ib_root.string() + ": no RDMA device or driver";
  } else {
    for (const std::string& hca : sorted_entries(ib_root)) {
      const fs::path ports = ib_root / hca / "ports";
      std::string netdev;
      const auto net_names = sorted_entries(ib_root / hca / "device" / "net");
      if (!net_names.empty()) netdev = net_names.front();
      for (const std::string& port_name : sorted_entries(ports)) {
        const auto port_number = evidence_detail::parse_leading_int(port_name);
        if (!port_number || *port_number < 0 || *port_number > 255) continue;
        IbPortCounters port;
        port.hca = hca;
        port.port = static_cast<int>(*port_number);
        port.netdev = netdev;
        const fs::path port_dir = ports / port_name;
        if (const auto layer = read_small_file(port_dir / "link_layer")) port.link_layer = *layer;
        std::string xmit_reason;
        std::string rcv_reason;
        port.xmit_data_words = read_counter(port_dir / "counters" / "port_xmit_data", xmit_reason);
        port.rcv_data_words = read_counter(port_dir / "counters" / "port_rcv_data", rcv_reason);
        port.reason = !xmit_reason.empty() ? xmit_reason : rcv_reason;
        read_error_counters(port_dir / "counters", port);
        read_error_counters(port_dir / "hw_counters", port);
        snapshot.ib_ports.push_back(std::move(port));
      }
    }
    if (snapshot.ib_ports.empty()) snapshot.ib_missing_reason = ib_root.string() + " lists no HCA port";
  }
  const fs::path net_root = fs::path(sysfs_root) / "class" / "net";
  if (!directory_exists(net_root)) {
    snapshot.net_missing_reason = "no " + net_root.string();
  } else {
    for (const std::string& name : sorted_entries(net_root)) {
      NetdevCounters netdev;
      netdev.name = name;
      std::string tx_reason;
      std::string rx_reason;
      netdev.tx_bytes = read_counter(net_root / name / "statistics" / "tx_bytes", tx_reason);
      netdev.rx_bytes = read_counter(net_root / name / "statistics" / "rx_bytes", rx_reason);
      netdev.reason = !tx_reason.empty() ? tx_reason : rx_reason;
      snapshot.netdevs.push_back(std::move(netdev));
    }
  }
  return snapshot;
}

nlohmann::json rail_delta_json(const RailSnapshot& before, const RailSnapshot& after, const RailOptions& options) {
  nlohmann::json result;
  result["sysfs_root"] = after.sysfs_root;
  result["expected_rails"] = options.expected_rails;
  result["min_share"] = options.min_share;
  nlohmann::json flags = nlohmann::json::array();

  nlohmann::json ports = nlohmann::json::array();
  std::uint64_t rails_total = 0;
  bool rails_complete = true;
  std::vector<std::pair<std::string, std::uint64_t>> rail_bytes;
  std::uint64_t error_total = 0;
  for (const IbPortCounters& now : after.ib_ports) {
    const auto then = std::find_if(before.ib_ports.begin(), before.ib_ports.end(), [&](const IbPortCounters& port) {
      return port.hca == now.hca && port.port == now.port;
    });
    std::string reason;
    nlohmann::json xmit = nullptr;
    nlohmann::json rcv = nullptr;
    nlohmann::json errors = nlohmann::json::object();
    if (then == before.ib_ports.end()) {
      reason = "port not present in the first snapshot";
    } else {
      if (!then->reason.empty()) reason = then->reason;
      else if (!now.reason.empty()) reason = now.reason;
      xmit = delta(then->xmit_data_words, now.xmit_data_words, 4, reason, "port_xmit_data");
      std::string rcv_reason;
      rcv = delta(then->rcv_data_words, now.rcv_data_words, 4, rcv_reason, "port_rcv_data");
      if (reason.empty()) reason = rcv_reason;
      for (const auto& [name, value] : now.error_counters) {
        const auto old = then->error_counters.find(name);
        if (old == then->error_counters.end() || value < old->second) continue;
        if (value > old->second) {
          errors[name] = value - old->second;
          error_total += value - old->second;
        }
      }
    }
    const bool expected = rail_selected(options.expected_rails, now);
    nlohmann::json total = nullptr;
    if (xmit.is_number() && rcv.is_number()) total = xmit.get<std::uint64_t>() + rcv.get<std::uint64_t>();
    if (expected) {
      if (total.is_number()) {
        rails_total += total.get<std::uint64_t>();
        rail_bytes.emplace_back(now.rail(), total.get<std::uint64_t>());
      } else {
        rails_complete = false;
      }
    }
    if (!errors.empty()) flags.push_back("rail " + now.rail() + " error counters increased: " + errors.dump());
    ports.push_back({{"source", "hca"},
                     {"rail", now.rail()},
                     {"hca", now.hca},
                     {"port", now.port},
                     {"netdev", now.netdev.empty() ? nlohmann::json(nullptr) : nlohmann::json(now.netdev)},
                     {"link_layer", now.link_layer.empty() ? nlohmann::json(nullptr) : nlohmann::json(now.link_layer)},
                     {"expected_rail", expected},
                     {"xmit_bytes", xmit},
                     {"rcv_bytes", rcv},
                     {"total_bytes", total},
                     {"share", nullptr},
                     {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)},
                     {"error_increments", errors}});
  }
  // Shares among the expected rails.
  for (auto& port : ports) {
    if (!port["expected_rail"].get<bool>() || !port["total_bytes"].is_number() || rails_total == 0) continue;
    port["share"] = static_cast<double>(port["total_bytes"].get<std::uint64_t>()) / static_cast<double>(rails_total);
  }
  for (const std::string& rail : options.expected_rails) {
    const bool present = std::any_of(after.ib_ports.begin(), after.ib_ports.end(), [&](const IbPortCounters& port) {
      return rail == port.hca || rail == port.rail();
    });
    if (!present) flags.push_back("expected rail " + rail + " has no counters under " + after.sysfs_root);
  }
  nlohmann::json imbalanced = nullptr;
  std::string imbalance_reason;
  const std::size_t rail_count = options.expected_rails.empty() ? after.ib_ports.size() : options.expected_rails.size();
  if (!after.ib_missing_reason.empty()) {
    imbalance_reason = "no IB counters (ib_reason)";  // not the same long text twice per case
  } else if (rail_count < 2) {
    imbalance_reason = "fewer than two rails expected";
  } else if (!rails_complete || rail_bytes.size() < rail_count) {
    imbalance_reason = "counters of some expected rail are missing";
  } else if (rails_total == 0) {
    imbalance_reason = "no bytes moved on the expected rails";
  } else {
    bool low = false;
    for (const auto& [rail, bytes] : rail_bytes) {
      const double share = static_cast<double>(bytes) / static_cast<double>(rails_total);
      if (share < options.min_share) {
        low = true;
        std::ostringstream text;
        text.precision(3);
        text << "rail " << rail << " carried " << share * 100.0 << "% of the bytes on the expected rails (< "
             << options.min_share * 100.0 << "%)";
        flags.push_back(text.str());
      }
    }
    imbalanced = low;
  }
  result["ib_ports"] = ports;
  result["ib_reason"] = after.ib_missing_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(after.ib_missing_reason);
  result["rails_total_bytes"] = rails_complete && after.ib_missing_reason.empty() ? nlohmann::json(rails_total) : nlohmann::json(nullptr);
  result["imbalanced"] = imbalanced;
  result["imbalance_reason"] = imbalance_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(imbalance_reason);
  result["error_increments_total"] = error_total;

  nlohmann::json netdevs = nlohmann::json::array();
  std::size_t zero_netdevs = 0;
  for (const NetdevCounters& now : after.netdevs) {
    const bool named = std::find(options.netdevs.begin(), options.netdevs.end(), now.name) != options.netdevs.end();
    const bool wanted = options.netdevs.empty() ? now.name != "lo" : named;
    if (!wanted) continue;
    const auto then = std::find_if(before.netdevs.begin(), before.netdevs.end(),
                                   [&](const NetdevCounters& netdev) { return netdev.name == now.name; });
    std::string reason;
    nlohmann::json tx = nullptr;
    nlohmann::json rx = nullptr;
    if (then == before.netdevs.end()) {
      reason = "interface not present in the first snapshot";
    } else {
      if (!then->reason.empty()) reason = then->reason;
      else if (!now.reason.empty()) reason = now.reason;
      tx = delta(then->tx_bytes, now.tx_bytes, 1, reason, "tx_bytes");
      std::string rx_reason;
      rx = delta(then->rx_bytes, now.rx_bytes, 1, rx_reason, "rx_bytes");
      if (reason.empty()) reason = rx_reason;
    }
    const bool idle = reason.empty() && tx == 0 && rx == 0;
    if (idle && !named && !options.keep_zero_netdevs) {
      ++zero_netdevs;
      continue;
    }
    netdevs.push_back({{"name", now.name},
                       {"tx_bytes", tx},
                       {"rx_bytes", rx},
                       {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)}});
  }
  for (const std::string& name : options.netdevs) {
    const bool present = std::any_of(after.netdevs.begin(), after.netdevs.end(),
                                     [&](const NetdevCounters& netdev) { return netdev.name == name; });
    if (!present) {
      netdevs.push_back({{"name", name}, {"tx_bytes", nullptr}, {"rx_bytes", nullptr},
                         {"reason", after.net_missing_reason.empty() ? "no such interface" : after.net_missing_reason}});
    }
  }
  result["netdevs"] = netdevs;

  // Interfaces that are rails (--netdevs, or NCCL's NET/Socket list): one row each, in the order
  // given, with shares among them on this host. Absent or unreadable counters are null with a reason.
  nlohmann::json netdev_rails = nlohmann::json::array();
  std::uint64_t netdev_total = 0;
  bool netdev_complete = true;
  for (const std::string& name : options.netdev_rails) {
    const auto now = std::find_if(after.netdevs.begin(), after.netdevs.end(),
                                  [&](const NetdevCounters& netdev) { return netdev.name == name; });
    const auto then = std::find_if(before.netdevs.begin(), before.netdevs.end(),
                                   [&](const NetdevCounters& netdev) { return netdev.name == name; });
    std::string reason;
    nlohmann::json tx = nullptr;
    nlohmann::json rx = nullptr;
    if (now == after.netdevs.end()) {
      reason = after.net_missing_reason.empty() ? "no such interface under " + after.sysfs_root + "/class/net"
                                                : after.net_missing_reason;
    } else if (then == before.netdevs.end()) {
      reason = "interface not present in the first snapshot";
    } else {
      if (!then->reason.empty()) reason = then->reason;
      else if (!now->reason.empty()) reason = now->reason;
      tx = delta(then->tx_bytes, now->tx_bytes, 1, reason, "tx_bytes");
      std::string rx_reason;
      rx = delta(then->rx_bytes, now->rx_bytes, 1, rx_reason, "rx_bytes");
      if (reason.empty()) reason = rx_reason;
    }
    nlohmann::json total = nullptr;
    if (tx.is_number() && rx.is_number()) {
      total = tx.get<std::uint64_t>() + rx.get<std::uint64_t>();
      netdev_total += total.get<std::uint64_t>();
    } else {
      netdev_complete = false;
    }
    netdev_rails.push_back({{"source", "netdev"},
                            {"rail", name},
                            {"netdev", name},
                            {"tx_bytes", tx},
                            {"rx_bytes", rx},
                            {"total_bytes", total},
                            {"share", nullptr},
                            {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)}});
  }
  for (auto& row : netdev_rails) {
    if (!netdev_complete || !row["total_bytes"].is_number() || netdev_total == 0) continue;  // no share of an unknown whole
    const double share = static_cast<double>(row["total_bytes"].get<std::uint64_t>()) / static_cast<double>(netdev_total);
    row["share"] = share;
    if (options.netdev_rails.size() >= 2 && netdev_complete && share < options.min_share) {
      std::ostringstream text;
      text.precision(3);
      text << "rail " << row["rail"].get<std::string>() << " (netdev) carried " << share * 100.0
           << "% of the bytes on the netdev rails (< " << options.min_share * 100.0 << "%)";
      flags.push_back(text.str());
    }
  }
  if (!options.netdev_rails.empty()) {
    result["netdev_rails_from"] = options.netdev_rails_from;
    result["netdev_rails_total_bytes"] = netdev_complete ? nlohmann::json(netdev_total) : nlohmann::json(nullptr);
  }
  result["netdev_rails"] = netdev_rails;
  result["netdevs_zero_omitted"] = zero_netdevs;
  result["net_reason"] = after.net_missing_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(after.net_missing_reason);
  result["flags"] = flags;
  return result;
}

std::vector<std::string> socket_interfaces_from_nccl_log(const std::string& text) {
  std::vector<std::string> names;
  if (text.find("NET/Socket : Using") == std::string::npos) return names;  // the common case: no parse
  const EvidenceSummary summary = parse_nccl_log_texts({{"nccl log", text}});
  for (const ProcessEvidence& process : summary.processes) {
    std::vector<NetDevice> devices = process.socket_devices;
    std::stable_sort(devices.begin(), devices.end(), [](const NetDevice& a, const NetDevice& b) { return a.index < b.index; });
    for (const NetDevice& device : devices) {
      if (!device.name.empty() && std::find(names.begin(), names.end(), device.name) == names.end()) names.push_back(device.name);
    }
  }
  return names;
}

std::vector<std::string> rails_from_nccl_ib_hca(std::string_view value) {
  value = evidence_detail::trim(value);
  if (value.empty() || value.front() == '^') return {};
  if (value.front() == '=') value.remove_prefix(1);
  std::vector<std::string> rails;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view item = evidence_detail::trim(value.substr(start, comma - start));
    if (!item.empty()) rails.emplace_back(item);
    start = comma + 1;
  }
  return rails;
}

}  // namespace cclbench
