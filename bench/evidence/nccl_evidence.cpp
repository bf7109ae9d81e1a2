#include "bench/evidence/nccl_evidence.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/evidence/log_text.hpp"

namespace cclbench {

using evidence_detail::contains;
using evidence_detail::LogRecord;
using evidence_detail::parse_leading_int;
using evidence_detail::split_words;
using evidence_detail::trim;

std::string_view to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::p2p: return "P2P";
    case TransportKind::shm: return "SHM";
    case TransportKind::net: return "NET";
    case TransportKind::collnet: return "COLLNET";
  }
  return "?";
}

std::string_view to_string(EdgeScope scope) {
  switch (scope) {
    case EdgeScope::intra_node: return "intra_node";
    case EdgeScope::inter_node: return "inter_node";
    case EdgeScope::unknown: return "unknown";
  }
  return "unknown";
}

namespace {

constexpr std::size_t kMaxWarnings = 50;
constexpr std::size_t kMaxNotesPerKind = 10;
// Formats were read from these releases; anything else is parsed where recognisable and flagged.
constexpr int kKnownMinorLow = 18;
constexpr int kKnownMinorHigh = 28;

std::optional<int> to_int(std::string_view text) {
  const auto value = parse_leading_int(text);
  if (!value || *value < -2147483647LL || *value > 2147483647LL) return std::nullopt;
  return static_cast<int>(*value);
}

// The value after `name` in a "name value name value" message.
std::optional<std::string_view> word_after(const std::vector<std::string_view>& words, std::string_view name) {
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == name) return words[i + 1];
  }
  return std::nullopt;
}

std::optional<int> int_after(const std::vector<std::string_view>& words, std::string_view name) {
  const auto word = word_after(words, name);
  if (!word) return std::nullopt;
  return to_int(*word);
}

// "7[7]" -> rank 7, dev 7
bool parse_rank_dev(std::string_view text, int& rank, std::optional<int>& dev) {
  const std::size_t open = text.find('[');
  const auto parsed_rank = to_int(text.substr(0, open));
  if (!parsed_rank || *parsed_rank < 0) return false;
  rank = *parsed_rank;
  if (open != std::string_view::npos) dev = to_int(text.substr(open + 1));
  return true;
}

// Parses the "via ..." part into kind/net/dev/proxy/gdr. False for a transport we do not know.
bool parse_transport(std::string_view via, ChannelConnection& connection) {
  connection.transport = std::string(via);
  connection.gdr = contains(via, "/GDRDMA");
  if (via.starts_with("P2P/")) { connection.kind = TransportKind::p2p; return true; }
  if (via.starts_with("SHM/")) { connection.kind = TransportKind::shm; return true; }
  const bool is_net = via.starts_with("NET/");
  const bool is_collnet = via.starts_with("COLLNET/");
  if (!is_net && !is_collnet) return false;
  connection.kind = is_net ? TransportKind::net : TransportKind::collnet;
  std::string_view rest = via.substr(is_net ? 4 : 8);
  // The plugin name may itself contain '/', the device is the last all-digit component before flags.
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  connection.net = std::string(rest.substr(0, slash));
  rest.remove_prefix(slash + 1);
  const auto dev = parse_leading_int(rest);
  if (!dev || *dev < 0 || *dev > 1000000) return false;
  connection.net_dev = static_cast<int>(*dev);
  std::size_t i = 0;
  while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
  if (i < rest.size() && rest[i] == '(') {
    const auto proxy = to_int(rest.substr(i + 1));
    if (proxy) connection.proxy_rank = *proxy;
  }
  return true;
}

struct ProcessKey {
  std::string host;
  int pid;
  auto operator<=>(const ProcessKey&) const = default;
};

struct ProcessState {
  std::size_t process_index = 0;
  std::map<std::string, std::string> comm_key_by_ptr;   // comm pointer -> communicator id
  std::map<std::string, int> rank_by_ptr;               // comm pointer -> this process's rank
  std::map<int, std::string> current_ptr_by_tid;        // the comm whose init ran last on a thread
  std::string last_ptr;
  // Pending COLL lines per thread for 2.19-2.23 tuning lines that lack the collective name.
  std::map<int, TuningChoice> pending_coll_by_tid;
};

class Parser {
 public:
  EvidenceSummary finish();
  void parse_text(const std::string& name, std::string_view text);
  void add_input(LogInput input) { summary_.inputs.push_back(std::move(input)); }
  void note(std::string_view kind, const std::string& text);

 private:
  ProcessState& process_for(const LogRecord& record, const std::string& file);
  CommunicatorEvidence& comm_by_id(const std::string& id);
  std::string comm_id_for_ptr(ProcessState& state, const LogRecord& record, const std::string& ptr);
  void on_record(const LogRecord& record, const std::string& file);
  void on_init_line(const LogRecord& record, const std::string& file, ProcessState& state,
                    const std::vector<std::string_view>& words);
  void on_geometry_line(const LogRecord& record, const std::string& file, ProcessState& state,
                        const std::vector<std::string_view>& words);
  void on_channel_line(const LogRecord& record, const std::string& file, ProcessState& state);
  void on_collnet_line(const LogRecord& record, const std::string& file, ProcessState& state);
  void on_version(std::string_view message, ProcessEvidence* process);
  void attach_connection(ChannelConnection connection, const LogRecord& record, ProcessState& state,
                         int reporter_rank);
  RankEvidence& rank_entry(CommunicatorEvidence& comm, int rank, const LogRecord& record, const std::string& file,
                           const std::string& ptr);

  EvidenceSummary summary_;
  std::map<ProcessKey, ProcessState> processes_;
  std::map<std::string, std::size_t> comm_index_;
  std::map<std::string, std::size_t> note_counts_;
  std::vector<std::pair<ProcessKey, TuningChoice>> tuning_;
};

void Parser::note(std::string_view kind, const std::string& text) {
  std::size_t& count = note_counts_[std::string(kind)];
  ++count;
  if (count <= kMaxNotesPerKind) summary_.notes.push_back(text);
}

ProcessState& Parser::process_for(const LogRecord& record, const std::string& file) {
  ProcessKey key{std::string(record.host), record.pid};
  if (record.host.empty()) key = ProcessKey{"file:" + file, -1};
  auto found = processes_.find(key);
  if (found != processes_.end()) return found->second;
  ProcessState state;
  state.process_index = summary_.processes.size();
  ProcessEvidence process;
  process.log_file = file;
  process.host = std::string(record.host);
  process.pid = record.pid;
  summary_.processes.push_back(std::move(process));
  return processes_.emplace(key, std::move(state)).first->second;
}

CommunicatorEvidence& Parser::comm_by_id(const std::string& id) {
  auto found = comm_index_.find(id);
  if (found != comm_index_.end()) return summary_.communicators[found->second];
  comm_index_[id] = summary_.communicators.size();
  CommunicatorEvidence comm;
  comm.id = id;
  summary_.communicators.push_back(std::move(comm));
  return summary_.communicators.back();
}

std::string Parser::comm_id_for_ptr(ProcessState& state, const LogRecord& record, const std::string& ptr) {
  auto found = state.comm_key_by_ptr.find(ptr);
  if (found != state.comm_key_by_ptr.end()) return found->second;
  // No "Init START/COMPLETE" line for this pointer (log starts late, or INIT lines truncated): the
  // communicator cannot be matched across processes, so it stays private to this process.
  std::string id = "process " + std::string(record.host) + ":" + std::to_string(record.pid) + " comm " + ptr;
  state.comm_key_by_ptr[ptr] = id;
  return id;
}

RankEvidence& Parser::rank_entry(CommunicatorEvidence& comm, int rank, const LogRecord& record,
                                 const std::string& file, const std::string& ptr) {
  auto found = comm.ranks.find(rank);
  if (found != comm.ranks.end()) {
    RankEvidence& existing = found->second;
    if (existing.host != record.host || existing.pid != record.pid) {
      note("duplicate_rank", "rank " + std::to_string(rank) + " of " + comm.id + " appears in two processes (" +
                                 existing.host + ":" + std::to_string(existing.pid) + " and " +
                                 std::string(record.host) + ":" + std::to_string(record.pid) +
                                 "): logs of different runs mixed? keeping the first");
    }
    return existing;
  }
  RankEvidence entry;
  entry.rank = rank;
  entry.host = std::string(record.host);
  entry.node = entry.host;
  entry.pid = record.pid;
  entry.cuda_dev = record.cuda_dev;
  entry.comm_ptr = ptr;
  entry.log_file = file;
  return comm.ranks.emplace(rank, std::move(entry)).first->second;
}

void Parser::on_version(std::string_view message, ProcessEvidence* process) {
  // "NCCL version 2.28.3+cuda13.0"
  const std::size_t at = message.find("NCCL version ");
  if (at == std::string_view::npos) return;
  const auto words = split_words(message.substr(at + 13));
  if (words.empty()) return;
  const std::string version(words.front());
  if (process) process->nccl_version = version;
  if (std::find(summary_.nccl_versions.begin(), summary_.nccl_versions.end(), version) == summary_.nccl_versions.end()) {
    summary_.nccl_versions.push_back(version);
  }
}

void Parser::on_init_line(const LogRecord& record, const std::string& file, ProcessState& state,
                          const std::vector<std::string_view>& words) {
  const auto ptr = word_after(words, "comm");
  const auto rank = int_after(words, "rank");
  const auto nranks = int_after(words, "nranks");
  if (!ptr || !rank || *rank < 0) {
    note("unparsed_init", "unrecognised init line " + file + ":" + std::to_string(record.line_number));
    return;
  }
  const std::string pointer(*ptr);
  std::string id;
  if (const auto comm_id = word_after(words, "commId")) {
    id = "commId " + std::string(*comm_id);
  } else if (word_after(words, "parent")) {
    // Split communicators print no shared id; members agree on size, split counter and color.
    id = "split nranks " + (nranks ? std::to_string(*nranks) : std::string("?"));
    if (const auto split_count = int_after(words, "splitCount")) id += " splitCount " + std::to_string(*split_count);
    if (const auto color = int_after(words, "color")) id += " color " + std::to_string(*color);
  } else {
    id = comm_id_for_ptr(state, record, pointer);
  }
  state.comm_key_by_ptr[pointer] = id;
  state.rank_by_ptr[pointer] = *rank;
  state.current_ptr_by_tid[record.tid] = pointer;
  state.last_ptr = pointer;
  CommunicatorEvidence& comm = comm_by_id(id);
  if (nranks) {
    if (comm.nranks && *comm.nranks != *nranks) {
      note("nranks_mismatch", comm.id + ": processes disagree on nranks (" + std::to_string(*comm.nranks) + " vs " +
                                  std::to_string(*nranks) + ")");
    }
    comm.nranks = *nranks;
  }
  RankEvidence& entry = rank_entry(comm, *rank, record, file, pointer);
  if (entry.pid != record.pid || entry.host != record.host) return;
  if (const auto cuda_dev = int_after(words, "cudaDev")) entry.cuda_dev = *cuda_dev;
  if (const auto nvml_dev = int_after(words, "nvmlDev")) entry.nvml_dev = *nvml_dev;
  if (const auto bus_id = word_after(words, "busId")) entry.bus_id = std::string(*bus_id);
  if (contains(record.message, "Init COMPLETE")) entry.init_complete = true;
}

void Parser::on_geometry_line(const LogRecord& record, const std::string& file, ProcessState& state,
                              const std::vector<std::string_view>& words) {
  // "comm 0x.. rank R nRanks N nNodes M localRanks L localRank l MNNVL x"
  const auto ptr = word_after(words, "comm");
  const auto rank = int_after(words, "rank");
  if (!ptr || !rank || *rank < 0) {
    note("unparsed_init", "unrecognised comm geometry line " + file + ":" + std::to_string(record.line_number));
    return;
  }
  const std::string pointer(*ptr);
  const std::string id = comm_id_for_ptr(state, record, pointer);
  state.rank_by_ptr[pointer] = *rank;
  if (!state.current_ptr_by_tid.count(record.tid)) state.current_ptr_by_tid[record.tid] = pointer;
  if (state.last_ptr.empty()) state.last_ptr = pointer;
  CommunicatorEvidence& comm = comm_by_id(id);
  if (const auto nranks = int_after(words, "nRanks")) comm.nranks = *nranks;
  const auto nnodes = int_after(words, "nNodes");
  if (nnodes) comm.nnodes = *nnodes;
  RankEvidence& entry = rank_entry(comm, *rank, record, file, pointer);
  if (entry.pid != record.pid || entry.host != record.host) return;
  entry.nnodes = nnodes;
  entry.local_ranks = int_after(words, "localRanks");
  entry.local_rank = int_after(words, "localRank");
}

void Parser::attach_connection(ChannelConnection connection, const LogRecord& record, ProcessState& state,
                               int reporter_rank) {
  // Connection lines carry no communicator: they belong to the communicator whose setup is running
  // on the same thread (init, or the lazy connect of a later collective on the caller's thread).
  std::string pointer;
  const auto current = state.current_ptr_by_tid.find(record.tid);
  if (current != state.current_ptr_by_tid.end()) pointer = current->second;
  if (pointer.empty()) pointer = state.last_ptr;
  if (!pointer.empty() && state.rank_by_ptr.count(pointer) && state.rank_by_ptr[pointer] != reporter_rank) {
    // The reporting rank does not match: prefer another communicator of this process where it does.
    for (const auto& [other_ptr, other_rank] : state.rank_by_ptr) {
      if (other_rank == reporter_rank) { pointer = other_ptr; break; }
    }
  }
  std::string id;
  if (pointer.empty()) {
    id = "process " + connection.reported_by_host + ":" + std::to_string(connection.reported_by_pid) +
         " (no init line)";
    note("unattributed_connection", "connection lines of " + connection.reported_by_host + ":" +
                                        std::to_string(connection.reported_by_pid) +
                                        " precede any communicator init line (NCCL_DEBUG_SUBSYS without INIT, or a "
                                        "truncated log?); kept under a per-process communicator");
  } else {
    id = state.comm_key_by_ptr.count(pointer) ? state.comm_key_by_ptr[pointer] : comm_id_for_ptr(state, record, pointer);
  }
  CommunicatorEvidence& comm = comm_by_id(id);
  if (pointer.empty() && !comm.ranks.count(reporter_rank)) {
    rank_entry(comm, reporter_rank, record, connection.source, "");
  }
  connection.reported_by_rank = reporter_rank;
  comm.connections.push_back(std::move(connection));
}

void Parser::on_channel_line(const LogRecord& record, const std::string& file, ProcessState& state) {
  // "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA" | "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"
  const std::string where = file + ":" + std::to_string(record.line_number);
  std::string_view message = record.message;
  const std::size_t via = message.find(" via ");
  const std::size_t colon = message.find(" : ");
  const std::size_t arrow = message.find(" -> ");
  if (via == std::string_view::npos || colon == std::string_view::npos || arrow == std::string_view::npos ||
      !(colon < arrow && arrow < via)) {
    // "Channel 00/04 : 0 1 2 3" lists a ring's order and is no connection; anything else is reported.
    const std::string_view after_colon = colon == std::string_view::npos ? message : message.substr(colon + 3);
    const bool ring_layout = colon != std::string_view::npos && via == std::string_view::npos &&
                             after_colon.find_first_not_of("0123456789 ") == std::string_view::npos;
    if (!ring_layout) {
      note("unparsed_connection", "unrecognised connection line " + where + ": '" +
                                      std::string(message.substr(0, 160)) + "'");
    }
    return;
  }
  ChannelConnection connection;
  connection.source = where;
  connection.reported_by_host = std::string(record.host);
  connection.reported_by_pid = record.pid;
  const std::string_view channel_part = message.substr(8, colon - 8);  // "00/0" or "00"
  const auto channel = to_int(channel_part);
  const std::size_t slash = channel_part.find('/');
  if (slash != std::string_view::npos) connection.conn_index = to_int(channel_part.substr(slash + 1));
  const std::string_view from_part = trim(message.substr(colon + 3, arrow - colon - 3));
  std::string_view to_part = trim(message.substr(arrow + 4, via - arrow - 4));
  if (to_part.ends_with("[send]")) {
    connection.direction = "send";
    to_part = trim(to_part.substr(0, to_part.size() - 6));
  } else if (to_part.ends_with("[receive]")) {
    connection.direction = "receive";
    to_part = trim(to_part.substr(0, to_part.size() - 9));
  }
  const std::string_view transport = trim(message.substr(via + 5));
  if (!channel || *channel < 0 || !parse_rank_dev(from_part, connection.from_rank, connection.from_dev) ||
      !parse_rank_dev(to_part, connection.to_rank, connection.to_dev) || !parse_transport(transport, connection)) {
    note("unparsed_connection", "unrecognised connection line " + where + ": '" +
                                    std::string(record.message.substr(0, 160)) + "'");
    return;
  }
  connection.channel = *channel;
  // NET receive lines are printed by the receiver; every other line by the sender.
  const int reporter = connection.direction == "receive" ? connection.to_rank : connection.from_rank;
  attach_connection(std::move(connection), record, state, reporter);
}

void Parser::on_collnet_line(const LogRecord& record, const std::string& file, ProcessState& state) {
  // "CollNet 00/0 : 3 [send] via COLLNET/SHARP/0/GDRDMA"
  const std::string where = file + ":" + std::to_string(record.line_number);
  const std::string_view message = record.message;
  const std::size_t colon = message.find(" : ");
  const std::size_t via = message.find(" via ");
  if (colon == std::string_view::npos || via == std::string_view::npos || via < colon) {
    note("unparsed_connection", "unrecognised CollNet line " + where);
    return;
  }
  ChannelConnection connection;
  connection.source = where;
  connection.reported_by_host = std::string(record.host);
  connection.reported_by_pid = record.pid;
  const std::string_view channel_part = message.substr(8, colon - 8);
  const auto channel = to_int(channel_part);
  const std::size_t slash = channel_part.find('/');
  if (slash != std::string_view::npos) connection.conn_index = to_int(channel_part.substr(slash + 1));
  const std::string_view middle = message.substr(colon + 3, via - colon - 3);
  const auto rank = to_int(middle);
  connection.direction = contains(middle, "[receive]") ? "receive" : "send";
  if (!channel || !rank || *rank < 0 || !parse_transport(trim(message.substr(via + 5)), connection)) {
    note("unparsed_connection", "unrecognised CollNet line " + where);
    return;
  }
  connection.channel = *channel;
  connection.from_rank = *rank;
  connection.to_rank = *rank;
  attach_connection(std::move(connection), record, state, *rank);
}

void parse_device_list(std::string_view list, std::vector<NetDevice>& devices, bool ib) {
  // IB: " [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE [RO]"; Socket: " [0]lo:127.0.0.1<0> [1]eth0:10.0.0.5<0>"
  devices.clear();
  for (std::string_view word : split_words(list)) {
    if (word.size() < 4 || word.front() != '[') continue;
    const std::size_t close = word.find(']');
    if (close == std::string_view::npos) continue;
    const auto index = to_int(word.substr(1, close - 1));
    if (!index) continue;  // "[RO]"
    NetDevice device;
    device.index = *index;
    const std::string_view rest = word.substr(close + 1);
    const std::size_t colon = rest.find(':');
    device.name = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      const std::string_view after = rest.substr(colon + 1);
      if (ib) {
        device.port = to_int(after);
        const std::size_t slash = after.find('/');
        if (slash != std::string_view::npos) device.link_layer = std::string(after.substr(slash + 1));
      } else {
        device.address = std::string(after);
      }
    }
    devices.push_back(std::move(device));
  }
}

void Parser::on_record(const LogRecord& original, const std::string& file) {
  LogRecord record = original;
  if (record.glued && !record.host.empty()) {
    // Interleaved writers glue records together; trust the host only as the longest host already
    // seen in a clean record that ends the glued token, otherwise drop the record.
    std::string_view best;
    for (const auto& [key, state] : processes_) {
      if (key.pid >= 0 && key.host.size() > best.size() && record.host.ends_with(key.host)) {
        best = record.host.substr(record.host.size() - key.host.size());
      }
    }
    if (best.empty()) {
      note("interleaved", "interleaved record with an unreadable host skipped at " + file + ":" +
                              std::to_string(record.line_number));
      return;
    }
    record.host = best;
  }
  if (record.warn) {
    if (summary_.warnings.size() < kMaxWarnings) {
      summary_.warnings.push_back(std::string(record.host) + ":" + std::to_string(record.pid) + " " +
                                  std::string(record.message.substr(0, 300)));
    }
    return;
  }
  ProcessState& state = process_for(record, file);
  ProcessEvidence& process = summary_.processes[state.process_index];
  const std::string_view message = record.message;
  if (message.starts_with("NCCL version ")) {
    on_version(message, &process);
  } else if (message.starts_with("Using network ")) {
    const std::string network(trim(message.substr(14)));
    if (std::find(process.networks.begin(), process.networks.end(), network) == process.networks.end()) {
      process.networks.push_back(network);
    }
  } else if (message.starts_with("NET/IB : Using")) {
    const std::size_t oob = message.find("; OOB ");
    parse_device_list(message.substr(14, oob == std::string_view::npos ? std::string_view::npos : oob - 14),
                      process.ib_devices, true);
    if (oob != std::string_view::npos) process.ib_oob = std::string(trim(message.substr(oob + 6)));
  } else if (message.starts_with("NET/IB : No device found")) {
    process.ib_no_device = true;
  } else if (message.starts_with("NET/Socket : Using")) {
    parse_device_list(message.substr(18), process.socket_devices, false);
  } else if (message.starts_with("Channel ")) {
    on_channel_line(record, file, state);
  } else if (message.starts_with("CollNet ")) {
    on_collnet_line(record, file, state);
  } else if (message.starts_with("Connected all rings, use ring PXN")) {
    const auto words = split_words(message);
    std::string pointer = state.current_ptr_by_tid.count(record.tid) ? state.current_ptr_by_tid[record.tid] : state.last_ptr;
    if (!pointer.empty()) {
      CommunicatorEvidence& comm = comm_by_id(comm_id_for_ptr(state, record, pointer));
      comm.ring_pxn = int_after(words, "PXN");
      comm.ring_gdr = int_after(words, "GDR");
    }
  } else if ((message.starts_with("comm ") || contains(message, " comm ")) && contains(message, " rank ")) {
    const auto words = split_words(message);
    if (contains(message, "Init START") || contains(message, "Init COMPLETE")) {
      on_init_line(record, file, state, words);
    } else if (contains(message, " nNodes ") && contains(message, " localRanks ")) {
      on_geometry_line(record, file, state, words);
    }
  }
}

EvidenceSummary Parser::finish() {
  // Tuning choices go to the communicator of their COLL line's comm pointer.
  for (auto& [key, choice] : tuning_) {
    auto state = processes_.find(key);
    if (!choice.comm.empty() && state != processes_.end() && state->second.comm_key_by_ptr.count(choice.comm)) {
      comm_by_id(state->second.comm_key_by_ptr[choice.comm]).tuning.push_back(std::move(choice));
    } else {
      summary_.unattributed_tuning.push_back(std::move(choice));
    }
  }
  // NCCL_HOSTID (or containers with one hostname) can make NCCL see each process as its own node
  // while the hostname is shared: then the process, not the hostname, is the node.
  for (CommunicatorEvidence& comm : summary_.communicators) {
    std::map<std::string, std::set<int>> pids_by_host;
    for (const auto& [rank, entry] : comm.ranks) pids_by_host[entry.host].insert(entry.pid);
    for (auto& [rank, entry] : comm.ranks) {
      if (entry.local_ranks == 1 && pids_by_host[entry.host].size() > 1) {
        entry.node = entry.host + ":" + std::to_string(entry.pid);
      }
      if (!comm.nnodes && entry.nnodes) comm.nnodes = entry.nnodes;
    }
  }
  // Version caveats and missing evidence, stated once.
  for (const std::string& version : summary_.nccl_versions) {
    const auto major = parse_leading_int(version);
    const std::size_t dot = version.find('.');
    const auto minor = dot == std::string::npos ? std::nullopt : parse_leading_int(std::string_view(version).substr(dot + 1));
    if (!major || !minor || *major != 2 || *minor < kKnownMinorLow || *minor > kKnownMinorHigh) {
      summary_.notes.push_back("NCCL " + version + " is outside the versions whose log formats this parser was written from (2." +
                               std::to_string(kKnownMinorLow) + " to 2." + std::to_string(kKnownMinorHigh) +
                               "): recognisable lines were parsed, anything else is ignored");
    }
  }
  std::size_t connections = 0;
  for (const auto& comm : summary_.communicators) connections += comm.connections.size();
  std::uint64_t nccl_lines = 0;
  for (const auto& input : summary_.inputs) nccl_lines += input.nccl_lines;
  if (summary_.nccl_versions.empty() && nccl_lines > 0) {
    summary_.notes.push_back("no 'NCCL version' line found");
  }
  if (connections == 0) {
    summary_.notes.push_back(
        "no connection lines ('Channel .. via ..') found: NCCL must run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS "
        "including INIT (and NET), and a collective must have run (NCCL 2.22+ connects lazily)");
  }
  for (const auto& [kind, count] : note_counts_) {
    if (count > kMaxNotesPerKind) {
      summary_.notes.push_back(std::to_string(count - kMaxNotesPerKind) + " more notes of kind '" + kind + "' left out");
    }
  }
  return std::move(summary_);
}

void Parser::parse_text(const std::string& name, std::string_view text) {
  LogInput input;
  input.path = name;
  if (text.empty()) {
    input.status = "empty";
    input.reason = "file is empty";
    note("input", "'" + name + "' is empty");
    add_input(std::move(input));
    return;
  }
  if (text.find('\0') != std::string_view::npos) {
    input.status = "binary";
    input.reason = "file contains NUL bytes: not a text log";
    note("input", "'" + name + "' is not a text log (contains NUL bytes); skipped");
    add_input(std::move(input));
    return;
  }
  std::uint64_t lines = 0;
  std::uint64_t nccl_lines = 0;
  evidence_detail::split_records(
      text,
      [&](const LogRecord& record) {
        ++nccl_lines;
        lines = std::max(lines, record.line_number);
        on_record(record, name);
      },
      [&](std::string_view line, std::uint64_t number) {
        lines = std::max(lines, number);
        // At NCCL_DEBUG=VERSION/WARN the version line is printed bare.
        if (line.starts_with("NCCL version ")) on_version(line, nullptr);
      });
  for (const TuningChoice& choice : parse_tuning(text, name)) {
    tuning_.emplace_back(ProcessKey{choice.host.empty() ? "file:" + name : choice.host, choice.host.empty() ? -1 : choice.pid},
                         choice);
  }
  input.lines = lines;
  input.nccl_lines = nccl_lines;
  if (nccl_lines == 0) {
    input.status = "no_nccl_lines";
    input.reason = "no 'NCCL INFO' lines";
    note("input", "'" + name + "' has no 'NCCL INFO' lines");
  } else {
    input.status = "ok";
  }
  add_input(std::move(input));
}

std::vector<std::string> expand_paths(const std::vector<std::string>& paths_or_dirs) {
  std::vector<std::string> files;
  for (const std::string& path : paths_or_dirs) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) throw UsageError("no such file or directory: '" + path + "'");
    if (S_ISDIR(info.st_mode)) {
      std::vector<std::string> inside;
      std::error_code error;
      for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
        std::error_code type_error;
        if (entry.is_regular_file(type_error)) inside.push_back(entry.path().string());
      }
      if (error) throw UsageError("cannot list directory '" + path + "': " + error.message());
      if (inside.empty()) throw UsageError("directory '" + path + "' holds no files");
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(path);
    }
  }
  return files;
}

}  // namespace

EvidenceSummary parse_nccl_log_texts(const std::vector<std::pair<std::string, std::string>>& named_texts) {
  Parser parser;
  for (const auto& [name, text] : named_texts) parser.parse_text(name, text);
  return parser.finish();
}

EvidenceSummary parse_nccl_logs(const std::vector<std::string>& paths_or_dirs) {
  if (paths_or_dirs.empty()) throw UsageError("no NCCL log file or directory given");
  Parser parser;
  for (const std::string& file : expand_paths(paths_or_dirs)) {
    std::string text;
    try {
      text = read_text_file(file);
    } catch (const UsageError& error) {
      LogInput input;
      input.path = file;
      input.status = "unreadable";
      input.reason = error.what();
      parser.note("input", error.what());
      parser.add_input(std::move(input));
      continue;
    }
    parser.parse_text(file, text);
  }
  return parser.finish();
}

}  // namespace cclbench
