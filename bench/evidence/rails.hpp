#pragma once
// Rail counters: bytes each HCA port (and each network interface) moved around a case, so a run
// can show that both rails carried traffic. Counters come from sysfs under a configurable root so
// tests use a fake tree:
//   <root>/class/infiniband/<hca>/ports/<p>/counters/port_{xmit,rcv}_data   (units of 4 bytes)
//   <root>/class/infiniband/<hca>/ports/<p>/{counters,hw_counters}/*         (error counters)
//   <root>/class/infiniband/<hca>/device/net/<if>                            (RoCE netdev of the HCA)
//   <root>/class/net/<if>/statistics/{tx,rx}_bytes
// Port counters count ALL traffic on the port (other jobs, storage, management), not only NCCL's.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cclbench {

struct IbPortCounters {
  std::string hca;                                  // "mlx5_0"
  int port = 1;
  std::string netdev;                               // "eth0" for RoCE, "" when none
  std::string link_layer;                           // "Ethernet", "InfiniBand", "" when unreadable
  std::optional<std::uint64_t> xmit_data_words;     // port_xmit_data (x4 = bytes)
  std::optional<std::uint64_t> rcv_data_words;      // port_rcv_data
  std::map<std::string, std::uint64_t> error_counters;  // counters/ and hw_counters/ entries that count errors
  std::string reason;                               // why a data counter is missing
  std::string rail() const { return hca + ":" + std::to_string(port); }
};

struct NetdevCounters {
  std::string name;
  std::optional<std::uint64_t> tx_bytes;
  std::optional<std::uint64_t> rx_bytes;
  std::string reason;
};

struct RailSnapshot {
  std::string sysfs_root;
  std::vector<IbPortCounters> ib_ports;   // sorted by hca, port
  std::string ib_missing_reason;          // "no /sys/class/infiniband" style reason; "" when present
  std::vector<NetdevCounters> netdevs;    // sorted by name
  std::string net_missing_reason;
};

struct RailOptions {
  // Expected rails: "mlx5_0" (every port) or "mlx5_0:1". Empty: every IB port found is a rail.
  std::vector<std::string> expected_rails;
  double min_share = 0.25;                // a rail below this share of the rails' bytes is flagged
  std::vector<std::string> netdevs;       // interfaces to report; empty: all but "lo"
  // Interfaces whose tx and rx deltas are both 0 (and readable) are left out of the record unless
  // named in `netdevs` or this is set (coll_perf --all-netdevs); the record counts them instead.
  bool keep_zero_netdevs = false;
  // Interfaces that are rails (schema 1.5): the traffic of NCCL's NET/Socket transport or MPI's TCP
  // BTL shows only in netdev counters. From coll_perf --netdevs, else from NCCL's
  // "NET/Socket : Using [0]eth0<...> [1]eth3<...>" line. Each gets a row in the node's
  // netdev_rails (source "netdev"), with its share among these interfaces on that host.
  std::vector<std::string> netdev_rails;
  std::string netdev_rails_from;          // "--netdevs", "nccl_log" or "" (none)
};

// The constant text that explains rail_delta_json's numbers: written once per document (coll_perf
// puts it in the -J document's "notes"), not once per case and node.
inline constexpr const char* kRailCounterNote =
    "port counters count all traffic on the port (other jobs, storage, management), not only this case's NCCL "
    "traffic; IB data counters are in 4-byte units and were multiplied by 4";

// Never throws for a missing or partial tree: absent counters are recorded with a reason.
RailSnapshot read_rail_counters(const std::string& sysfs_root = "/sys");

// Per-rail byte deltas (x4 applied), shares among the expected rails, error counter increments,
// the imbalance flag and netdev byte deltas (kRailCounterNote says what they count).
// A counter that decreased (wrap or reset) is null with a reason, never a negative or a guess.
nlohmann::json rail_delta_json(const RailSnapshot& before, const RailSnapshot& after, const RailOptions& options);

// The interfaces of NCCL's "NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth3:...<0>" lines in a
// log text, in index order, without repeats; empty when the text has no such line.
std::vector<std::string> socket_interfaces_from_nccl_log(const std::string& text);

// Rails named by an NCCL_IB_HCA value: "mlx5_0:1,mlx5_3:1" or "=mlx5_0,mlx5_3" -> the list;
// an exclusion list ("^mlx5_1") names no expected rail -> empty (every port counts).
std::vector<std::string> rails_from_nccl_ib_hca(std::string_view value);

}  // namespace cclbench
