#pragma once
// Transport evidence from NCCL's own INFO logs: what NCCL actually used, per communicator, per peer
// pair and channel. Launch flags and environment variables only say what was asked for; a cluster
// that silently fell back from RDMA to TCP sockets is visible only in these lines.
//
// Formats recognised (read from NCCL's sources, tags v2.18.3-1 .. v2.28.9-1):
//   line prefix   "[timestamp] host:pid:tid [cudaDev] NCCL INFO <message>" (timestamp optional)
//   version       "NCCL version 2.28.3+cuda13.0"
//   network       "Using network IB" / "Using network Socket" (or a plugin's name)
//   devices       "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.5<0>"
//                 "NET/Socket : Using [0]lo:127.0.0.1<0>"
//   init          "[ncclCommInitRank ]comm 0x.. rank R nranks N cudaDev D nvmlDev V busId B commId 0x.. - Init START"
//                 (split communicators print "parent 0x.. [splitCount S ]color C key K" instead of commId)
//   geometry      "comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL x" (2.19+)
//   connections   "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "... via P2P/IPC", "... via P2P/direct pointer",
//                 "... via P2P/indirect/2[2]", "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
//                 "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA", "... [receive] via NET/IB/1",
//                 "... [send] via NET/IB/0(1)/GDRDMA" (PXN through rank 1), "... via NET/Socket/0",
//                 "CollNet 00/0 : 3 [send] via COLLNET/SHARP/0/GDRDMA"
//   ring summary  "Connected all rings, use ring PXN 0 GDR 1" (2.27+)
//   tuning        see parse_tuning() below.
// Lines that look like a connection but do not parse are reported, never silently dropped.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cclbench {

inline constexpr const char* kNcclEvidenceSchemaVersion = "1.0.0";

// One algorithm/protocol decision NCCL logged for a collective (TUNING subsystem; COLL gives the count).
struct TuningChoice {
  std::string collective;                // "AllReduce", "AllGather", ...
  std::optional<std::uint64_t> bytes;    // as NCCL printed it (count x type size on 2.24+)
  std::optional<std::uint64_t> count;    // from the matching COLL line, when present
  std::optional<int> datatype;           // ncclDataType_t value from the COLL line
  std::string algorithm;                 // "RING", "TREE", "NVLS", "PAT", "COLLNET_DIRECT", ...
  std::string protocol;                  // "LL", "LL128", "SIMPLE"
  std::optional<int> channel_lo;         // 2.24+: channel{Lo..Hi}
  std::optional<int> channel_hi;
  std::optional<double> predicted_time_us;  // 2.19-2.23 print NCCL's model estimate instead
  std::string comm;                      // comm pointer of the COLL line ("" when absent)
  std::string host;
  int pid = -1;
  std::string source;                    // "file:line"
};

// The TUNING/COLL lines of one log text. 2.24+: "AllReduce: 8192 Bytes -> Algo RING proto LL
// channel{Lo..Hi}={0..1}"; 2.19-2.23: "8192 Bytes -> Algo 1 proto 0 time 12.5" paired with the
// preceding "AllReduce: opCount 0 sendbuff .. count 2048 datatype 7 op 0 root 0 comm 0x.. [nranks=16]
// stream 0x.." line of the same thread. Only rank 0 prints TUNING lines in NCCL 2.22+.
std::vector<TuningChoice> parse_tuning(std::string_view log_text, std::string_view source_name = "log");

enum class TransportKind { p2p, shm, net, collnet };
std::string_view to_string(TransportKind kind);

// One "Channel ..." line: a connection from one rank to another as one of its two endpoints saw it.
struct ChannelConnection {
  int channel = 0;
  std::optional<int> conn_index;   // absent in SHM lines
  int from_rank = 0;
  int to_rank = 0;
  std::optional<int> from_dev;
  std::optional<int> to_dev;
  std::string direction;           // "send", "receive", or "" (P2P/SHM lines say neither)
  TransportKind kind = TransportKind::p2p;
  std::string transport;           // text after "via ", e.g. "NET/IB/0/GDRDMA", "P2P/CUMEM/read"
  std::string net;                 // NET: plugin name ("IB", "Socket"); COLLNET: its name
  std::optional<int> net_dev;      // NET/COLLNET device index
  std::optional<int> proxy_rank;   // PXN: "NET/IB/0(1)" -> 1
  bool gdr = false;                // "/GDRDMA"
  std::string reported_by_host;    // host of the log line
  int reported_by_pid = -1;
  int reported_by_rank = -1;       // rank of the process that logged it, in this communicator
  std::string source;              // "file:line"
};

struct NetDevice {
  int index = 0;
  std::string name;          // "mlx5_0" or an interface name for sockets
  std::optional<int> port;   // IB port
  std::string link_layer;    // "RoCE", "IB" (IB devices)
  std::string address;       // socket devices: "127.0.0.1<0>"
};

// What one log file (one process) says about itself.
struct ProcessEvidence {
  std::string log_file;
  std::string host;
  int pid = -1;
  std::string nccl_version;               // "" when absent
  std::vector<std::string> networks;      // distinct "Using network X" values
  std::vector<NetDevice> ib_devices;      // from "NET/IB : Using ..."
  std::vector<NetDevice> socket_devices;  // from "NET/Socket : Using ..."
  std::string ib_oob;                     // "eth0:10.0.0.5<0>"
  bool ib_no_device = false;              // "NET/IB : No device found."
};

struct RankEvidence {
  int rank = 0;
  std::string host;
  std::string node;                   // host, or host:pid when NCCL put each process on its own node
  int pid = -1;
  std::optional<int> cuda_dev;
  std::optional<int> nvml_dev;
  std::string bus_id;
  std::string comm_ptr;
  std::optional<int> local_rank;
  std::optional<int> local_ranks;
  std::optional<int> nnodes;
  bool init_complete = false;
  std::string log_file;
};

struct CommunicatorEvidence {
  std::string id;                          // "commId 0x..", "split ..." or "file <path> comm 0x.."
  std::optional<int> nranks;
  std::optional<int> nnodes;
  std::map<int, RankEvidence> ranks;       // only ranks whose log was given
  std::vector<ChannelConnection> connections;
  std::optional<int> ring_pxn;             // "Connected all rings, use ring PXN x GDR y"
  std::optional<int> ring_gdr;
  std::vector<TuningChoice> tuning;
};

struct LogInput {
  std::string path;
  std::string status;          // "ok", "empty", "binary", "no_nccl_lines", "unreadable"
  std::string reason;          // for any status but "ok"
  std::uint64_t lines = 0;
  std::uint64_t nccl_lines = 0;
};

struct EvidenceSummary {
  std::vector<LogInput> inputs;
  std::vector<ProcessEvidence> processes;
  std::vector<CommunicatorEvidence> communicators;
  std::vector<std::string> nccl_versions;   // distinct
  std::vector<std::string> warnings;        // NCCL WARN lines (first 50)
  std::vector<std::string> notes;           // what could not be parsed or attributed, version caveats
  std::vector<TuningChoice> unattributed_tuning;
};

// Edge scope from the hosts (nodes) of both ranks; unknown when a rank's log was not given and
// its node cannot be inferred.
enum class EdgeScope { intra_node, inter_node, unknown };
std::string_view to_string(EdgeScope scope);
EdgeScope edge_scope(const CommunicatorEvidence& comm, const ChannelConnection& connection);
// "node5", "node5:1234" or "?" for a rank of `comm`.
std::string node_label(const CommunicatorEvidence& comm, int rank);
// Short class of a connection for counting and messages: "NET/IB+GDRDMA", "NET/Socket", "P2P/CUMEM",
// "P2P/direct pointer", "SHM", "COLLNET/SHARP+GDRDMA".
std::string transport_class(const ChannelConnection& connection);

// Parses log files and directories (every regular file directly inside a directory, sorted).
// Missing paths throw UsageError; unreadable, empty or binary files are recorded in `inputs` and
// `notes`, never fatal: the gate then fails for lack of evidence rather than passing.
EvidenceSummary parse_nccl_logs(const std::vector<std::string>& paths_or_dirs);

// The same from in-memory texts (name, content), in order. Used by tests and by callers that
// already hold the log.
EvidenceSummary parse_nccl_log_texts(const std::vector<std::pair<std::string, std::string>>& named_texts);

nlohmann::json to_json(const TuningChoice& choice);
// The whole summary (without "schema_version"; nccl_evidence adds the document envelope).
nlohmann::json to_json(const EvidenceSummary& summary);

}  // namespace cclbench
