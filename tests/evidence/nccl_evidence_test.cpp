#include "bench/evidence/nccl_evidence.hpp"

#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "bench/core/errors.hpp"
#include "bench/evidence/transport_gate.hpp"

namespace cclbench {
namespace {

const std::string kLogs = std::string(CCLBENCH_SOURCE_DIR) + "/tests/data/evidence/logs/";
const std::string kBad = std::string(CCLBENCH_SOURCE_DIR) + "/tests/data/evidence/bad/";
const std::string kTuning = std::string(CCLBENCH_SOURCE_DIR) + "/tests/data/evidence/tuning/";

GateResult gate(const std::string& scenario, const std::string& spec) {
  return check_expectation(parse_nccl_logs({kLogs + scenario}), parse_expect_spec(spec));
}

bool any_problem_contains(const GateResult& result, const std::string& text) {
  return std::any_of(result.problems.begin(), result.problems.end(),
                     [&](const std::string& problem) { return problem.find(text) != std::string::npos; });
}

TEST(NcclEvidenceParse, TwoNodesTwoRailsGivesOneCommunicatorWithHostsDevicesAndTransports) {
  const EvidenceSummary summary = parse_nccl_logs({kLogs + "ib_gdr_two_rails"});
  ASSERT_EQ(summary.inputs.size(), 16u);
  ASSERT_EQ(summary.nccl_versions, std::vector<std::string>{"2.28.3+cuda13.0"});
  ASSERT_EQ(summary.communicators.size(), 1u);
  const CommunicatorEvidence& comm = summary.communicators.front();
  EXPECT_EQ(comm.id, "commId 0x9f3c2a1e5d7b4c11");
  EXPECT_EQ(comm.nranks, 16);
  EXPECT_EQ(comm.nnodes, 2);
  ASSERT_EQ(comm.ranks.size(), 16u);
  EXPECT_EQ(comm.ranks.at(7).host, "node5");
  EXPECT_EQ(comm.ranks.at(8).host, "node7");
  EXPECT_EQ(comm.ranks.at(8).local_rank, 0);
  EXPECT_EQ(comm.ranks.at(8).local_ranks, 8);
  EXPECT_EQ(comm.ranks.at(3).bus_id, "3e000");
  EXPECT_TRUE(comm.ranks.at(3).init_complete);
  EXPECT_EQ(comm.ring_gdr, 1);
  EXPECT_EQ(comm.ring_pxn, 0);
  // 14 intra-node ring edges x 4 channels P2P; 2 inter-node edges x 4 channels seen from both ends.
  std::size_t p2p = 0, net_send = 0, net_receive = 0;
  for (const ChannelConnection& connection : comm.connections) {
    if (connection.kind == TransportKind::p2p) {
      ++p2p;
      EXPECT_EQ(edge_scope(comm, connection), EdgeScope::intra_node);
    } else {
      ASSERT_EQ(connection.kind, TransportKind::net);
      EXPECT_EQ(connection.net, "IB");
      EXPECT_TRUE(connection.gdr);
      EXPECT_EQ(connection.net_dev, connection.channel % 2);
      EXPECT_EQ(edge_scope(comm, connection), EdgeScope::inter_node);
      (connection.direction == "send" ? net_send : net_receive)++;
    }
  }
  EXPECT_EQ(p2p, 56u);
  EXPECT_EQ(net_send, 8u);
  EXPECT_EQ(net_receive, 8u);
  const ProcessEvidence& process = summary.processes.front();
  ASSERT_EQ(process.ib_devices.size(), 2u);
  EXPECT_EQ(process.ib_devices[1].name, "mlx5_3");
  EXPECT_EQ(process.ib_devices[1].port, 1);
  EXPECT_EQ(process.ib_devices[1].link_layer, "RoCE");
  EXPECT_EQ(process.ib_oob, "eth0:10.0.5.1<0>");
  EXPECT_EQ(process.networks, std::vector<std::string>{"IB"});
}

TEST(NcclEvidenceParse, JsonNamesTheHcaOfEachNetDeviceUsed) {
  const nlohmann::json json = to_json(parse_nccl_logs({kLogs + "ib_gdr_two_rails"}));
  const auto& used = json["communicators"][0]["net_devices_used"];
  ASSERT_EQ(used.size(), 4u);  // 2 hosts x 2 rails
  std::set<std::string> devices;
  for (const auto& entry : used) devices.insert(entry["device"].get<std::string>());
  EXPECT_EQ(devices, (std::set<std::string>{"mlx5_0:1", "mlx5_3:1"}));
  EXPECT_EQ(json["communicators"][0]["transport_classes"]["inter_node"]["NET/IB+GDRDMA"], 16);
  EXPECT_EQ(json["communicators"][0]["transport_classes"]["intra_node"]["P2P/CUMEM"], 56);
}

TEST(TransportGate, RdmaWithGdrOverBothRailsPasses) {
  const GateResult result = gate("ib_gdr_two_rails", "inter=NET/IB+GDRDMA,intra=P2P");
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_TRUE(result.problems.empty());
  EXPECT_EQ(result.inter_node_connections, 16u);
  EXPECT_EQ(result.intra_node_connections, 56u);
  EXPECT_NE(result.message.find("met"), std::string::npos);
}

TEST(TransportGate, SilentSocketFallbackFailsNamingRanksHostsAndTransport) {
  const GateResult result = gate("socket_fallback", "inter=NET/IB+GDRDMA,intra=P2P");
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(any_problem_contains(
      result, "inter-node edge 7[node5] -> 8[node7] channel 0 used NET/Socket/0, expected NET/IB+GDRDMA"))
      << result.message;
  EXPECT_TRUE(any_problem_contains(result, "15[node7] -> 0[node5] channel 1 used NET/Socket/1"));
  EXPECT_TRUE(any_problem_contains(result, "host node5 (8 processes) used network Socket"));
  EXPECT_NE(result.message.find("7[node5] -> 8[node7]"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("failed"), std::string::npos);
}

TEST(TransportGate, SocketFallbackPassesWhenSocketsAreWhatWasExpected) {
  EXPECT_TRUE(gate("socket_fallback", "inter=NET/Socket,intra=P2P").passed);
}

TEST(TransportGate, IbWithoutGdrPassesNetIbButFailsNetIbGdr) {
  EXPECT_TRUE(gate("ib_no_gdr", "inter=NET/IB").passed);
  EXPECT_TRUE(gate("ib_no_gdr", "inter=net/ib,intra=p2p").passed);
  const GateResult result = gate("ib_no_gdr", "inter=NET/IB+GDRDMA");
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(any_problem_contains(result, "used NET/IB/0, expected NET/IB+GDRDMA"));
}

TEST(TransportGate, PxnConnectionsStillCountAsNetIbGdr) {
  const EvidenceSummary summary = parse_nccl_logs({kLogs + "ib_gdr_pxn"});
  bool saw_proxy = false;
  for (const auto& connection : summary.communicators.front().connections) {
    if (connection.proxy_rank) saw_proxy = true;
  }
  EXPECT_TRUE(saw_proxy);
  EXPECT_EQ(summary.communicators.front().ring_pxn, 1);
  EXPECT_TRUE(check_expectation(summary, parse_expect_spec("inter=NET/IB+GDRDMA,intra=P2P")).passed);
}

TEST(TransportGate, P2pVersusShmInsideANode) {
  EXPECT_TRUE(gate("one_node_p2p", "intra=P2P").passed);
  EXPECT_TRUE(gate("one_node_p2p", "intra=P2P/CUMEM").passed);
  EXPECT_FALSE(gate("one_node_p2p", "intra=P2P/IPC").passed);
  EXPECT_FALSE(gate("one_node_p2p", "intra=SHM").passed);
  EXPECT_TRUE(gate("one_node_shm", "intra=SHM").passed);
  const GateResult shm = gate("one_node_shm", "intra=P2P");
  EXPECT_FALSE(shm.passed);
  EXPECT_TRUE(any_problem_contains(shm, "intra-node edge 0[node5] -> 1[node5] channel 0 used SHM/direct/direct, expected P2P"));
  EXPECT_TRUE(gate("one_node_shm", "intra=P2P|SHM").passed);
  EXPECT_FALSE(gate("ib_gdr_shm_intra", "inter=NET/IB+GDRDMA,intra=P2P").passed);
  EXPECT_TRUE(gate("ib_gdr_shm_intra", "inter=NET/IB+GDRDMA,intra=SHM").passed);
}

TEST(TransportGate, MissingEvidenceForARequiredClassFails) {
  // Single node: no inter-node edge exists, so inter=... has no evidence.
  const GateResult single_node = gate("one_node_p2p", "inter=NET/IB+GDRDMA,intra=P2P");
  EXPECT_FALSE(single_node.passed);
  EXPECT_TRUE(any_problem_contains(single_node, "no inter-node connection"));
  // One rank: no connection at all.
  const GateResult one_rank = gate("single_rank", "intra=P2P");
  EXPECT_FALSE(one_rank.passed);
  EXPECT_TRUE(any_problem_contains(one_rank, "no connection lines"));
}

TEST(TransportGate, LogsOfOneNodeOnlyDoNotProveTheOtherNode) {
  std::vector<std::string> files;
  for (int rank = 0; rank < 8; ++rank) files.push_back(kLogs + "ib_gdr_two_rails/node5." + std::to_string(41000 + rank * 7) + ".log");
  const EvidenceSummary summary = parse_nccl_logs(files);
  const CommunicatorEvidence& comm = summary.communicators.front();
  // Every node5 rank is present (localRanks 8), so rank 8's edge is inter-node even without its log.
  for (const auto& connection : comm.connections) {
    if (connection.kind == TransportKind::net) {
      EXPECT_EQ(edge_scope(comm, connection), EdgeScope::inter_node);
    }
  }
  const GateResult result = check_expectation(summary, parse_expect_spec("inter=NET/IB+GDRDMA,intra=P2P"));
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(any_problem_contains(result, "logs cover 8 of 16 ranks")) << result.message;
}

TEST(TransportGate, EdgeWithUnknownPlacementIsNotEvidence) {
  // Only rank 7's log: its NET edge to rank 8 cannot be placed (node5 not complete).
  const EvidenceSummary summary = parse_nccl_logs({kLogs + "ib_gdr_two_rails/node5.41049.log"});
  const CommunicatorEvidence& comm = summary.communicators.front();
  bool saw_unknown = false;
  for (const auto& connection : comm.connections) {
    if (connection.kind == TransportKind::net) saw_unknown |= edge_scope(comm, connection) == EdgeScope::unknown;
  }
  EXPECT_TRUE(saw_unknown);
  const GateResult result = check_expectation(summary, parse_expect_spec("inter=NET/IB+GDRDMA"));
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(any_problem_contains(result, "cannot tell whether it is inter- or intra-node"));
}

TEST(TransportGate, RanksOnOneHostWithOwnHostIdsAreSeparateNodes) {
  const EvidenceSummary summary = parse_nccl_logs({kLogs + "sockets_one_host"});
  const CommunicatorEvidence& comm = summary.communicators.front();
  EXPECT_EQ(comm.ranks.at(0).node, "h200box:7100");
  EXPECT_EQ(comm.ranks.at(1).node, "h200box:7101");
  EXPECT_TRUE(check_expectation(summary, parse_expect_spec("inter=NET/Socket")).passed);
  const GateResult rdma = check_expectation(summary, parse_expect_spec("inter=NET/IB"));
  EXPECT_FALSE(rdma.passed);
  EXPECT_TRUE(any_problem_contains(rdma, "inter-node edge 0[h200box:7100] -> 1[h200box:7101] channel 0 used NET/Socket/0"));
}

TEST(TransportGate, Nccl218FormatWithoutGeometryLine) {
  const EvidenceSummary summary = parse_nccl_logs({kLogs + "nccl_2_18_two_nodes"});
  ASSERT_EQ(summary.communicators.size(), 1u);
  EXPECT_EQ(summary.communicators.front().nranks, 4);
  EXPECT_FALSE(summary.communicators.front().nnodes.has_value());
  const GateResult result = check_expectation(summary, parse_expect_spec("inter=NET/IB+GDRDMA,intra=P2P/IPC"));
  EXPECT_TRUE(result.passed) << result.message;
  EXPECT_EQ(result.inter_node_connections, 8u);
  EXPECT_EQ(result.intra_node_connections, 4u);
}

TEST(ExpectSpec, ParsesItemsAlternativesAndFlags) {
  const ExpectSpec spec = parse_expect_spec(" inter=NET/IB+GDRDMA|COLLNET , intra=P2P ");
  ASSERT_TRUE(spec.inter.has_value());
  ASSERT_EQ(spec.inter->alternatives.size(), 2u);
  EXPECT_EQ(spec.inter->alternatives[0].parts, (std::vector<std::string>{"NET", "IB"}));
  EXPECT_TRUE(spec.inter->alternatives[0].require_gdr);
  EXPECT_FALSE(spec.inter->alternatives[1].require_gdr);
  ASSERT_TRUE(spec.intra.has_value());
  EXPECT_EQ(spec.intra->text, "P2P");
}

TEST(ExpectSpec, BadSpecsAreUsageErrors) {
  for (const char* bad : {"", "   ", "inter", "inter=", "inter=RDMA", "inter=NET/IB+FAST", "intra=P2P+GDRDMA",
                          "inter=NET/IB,inter=NET/Socket", "cross=NET", "inter=NET//IB", "inter=NET|", ",", "inter=NET,"}) {
    EXPECT_THROW(parse_expect_spec(bad), UsageError) << "'" << bad << "'";
  }
  try {
    parse_expect_spec("inter=RDMA");
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("unknown transport 'RDMA'"), std::string::npos);
  }
}

TEST(ExpectSpec, IbMatchesExternalIbPluginNames) {
  ChannelConnection connection;
  connection.kind = TransportKind::net;
  connection.transport = "NET/IBext_v8/0/GDRDMA";
  connection.net = "IBext_v8";
  connection.gdr = true;
  EXPECT_TRUE(matches(*parse_expect_spec("inter=NET/IB+GDRDMA").inter, connection));
  EXPECT_FALSE(matches(*parse_expect_spec("inter=NET/Socket").inter, connection));
}

TEST(NcclEvidenceBadInput, EmptyBinaryAndForeignFilesAreRecordedNotFatal) {
  const EvidenceSummary summary =
      parse_nccl_logs({kBad + "empty.log", kBad + "binary.log", kBad + "not_nccl.log"});
  ASSERT_EQ(summary.inputs.size(), 3u);
  EXPECT_EQ(summary.inputs[0].status, "empty");
  EXPECT_EQ(summary.inputs[1].status, "binary");
  EXPECT_EQ(summary.inputs[2].status, "no_nccl_lines");
  const GateResult result = check_expectation(summary, parse_expect_spec("inter=NET/IB"));
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(any_problem_contains(result, "no usable NCCL log"));
}

TEST(NcclEvidenceBadInput, NonexistentPathIsAUsageError) {
  EXPECT_THROW(parse_nccl_logs({kBad + "does_not_exist.log"}), UsageError);
  EXPECT_THROW(parse_nccl_logs({}), UsageError);
}

TEST(NcclEvidenceBadInput, InterleavedAndMalformedLinesAreReportedNeverInvented) {
  const EvidenceSummary summary = parse_nccl_logs({kBad + "interleaved.log"});
  for (const ProcessEvidence& process : summary.processes) EXPECT_EQ(process.host, "node5");
  std::size_t connections = 0;
  for (const auto& comm : summary.communicators) connections += comm.connections.size();
  EXPECT_EQ(connections, 0u);
  const auto noted = [&](const std::string& text) {
    return std::any_of(summary.notes.begin(), summary.notes.end(),
                       [&](const std::string& note) { return note.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(noted("via WARP/drive"));
  EXPECT_TRUE(noted("Channel xx/0"));
}

TEST(NcclEvidenceBadInput, UnknownVersionIsParsedWhereRecognisableAndFlagged) {
  const EvidenceSummary summary = parse_nccl_logs({kBad + "future_version.log"});
  EXPECT_EQ(summary.nccl_versions, std::vector<std::string>{"2.35.1+cuda14.0"});
  ASSERT_EQ(summary.communicators.size(), 1u);
  EXPECT_EQ(summary.communicators.front().connections.size(), 1u);
  const auto noted = [&](const std::string& text) {
    return std::any_of(summary.notes.begin(), summary.notes.end(),
                       [&](const std::string& note) { return note.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(noted("2.35.1+cuda14.0 is outside the versions"));
  EXPECT_TRUE(noted("QUANTUM/entangled"));
}

TEST(NcclEvidenceBadInput, TruncatedLogKeepsWhatItHas) {
  const EvidenceSummary summary = parse_nccl_logs({kBad + "truncated.log"});
  ASSERT_EQ(summary.communicators.size(), 1u);
  EXPECT_EQ(summary.communicators.front().ranks.count(7), 1u);
  EXPECT_FALSE(check_expectation(summary, parse_expect_spec("inter=NET/IB")).passed);
}

TEST(NcclEvidenceBadInput, GarbageTextNeverCrashes) {
  std::string garbage;
  for (int i = 0; i < 20000; ++i) garbage += static_cast<char>(1 + (i * 7919) % 254);
  garbage += "\nNCCL INFO \n:::: [] NCCL INFO Channel  : -> via \nx:1:2 [99999999999999999999] NCCL INFO Channel 99999999999999999999/0 : 1[1] -> 2[2] via NET/IB/99999999999999/GDRDMA\n";
  garbage += std::string(100000, 'A') + " NCCL INFO comm 0x1 rank 99999999999 nranks -5 - Init START\n";
  const EvidenceSummary summary = parse_nccl_log_texts({{"garbage", garbage}});
  EXPECT_FALSE(check_expectation(summary, parse_expect_spec("inter=NET/IB")).passed);
  (void)to_json(summary).dump();
}

TEST(Tuning, Nccl228LinesGiveCollectiveBytesAlgoProtoChannelsAndCount) {
  const EvidenceSummary summary = parse_nccl_logs({kTuning + "nccl_2_28.log"});
  ASSERT_EQ(summary.communicators.size(), 1u);
  const auto& tuning = summary.communicators.front().tuning;
  ASSERT_EQ(tuning.size(), 4u);
  EXPECT_EQ(tuning[0].collective, "AllReduce");
  EXPECT_EQ(tuning[0].bytes, 8192u);
  EXPECT_EQ(tuning[0].count, 2048u);
  EXPECT_EQ(tuning[0].datatype, 7);
  EXPECT_EQ(tuning[0].algorithm, "RING");
  EXPECT_EQ(tuning[0].protocol, "LL");
  EXPECT_EQ(tuning[0].channel_lo, 0);
  EXPECT_EQ(tuning[0].channel_hi, 1);
  EXPECT_EQ(tuning[1].protocol, "SIMPLE");
  EXPECT_EQ(tuning[1].channel_hi, 15);
  EXPECT_EQ(tuning[3].collective, "ReduceScatter");
  EXPECT_EQ(tuning[3].algorithm, "PAT");
}

TEST(Tuning, Nccl222NumericLinesArePairedWithTheirCollLine) {
  const auto choices = parse_tuning(
      "node5:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 2048 datatype 7 op 0 root 0 comm 0xabc [nranks=8] stream 0x3\n"
      "node5:1:1 [0] NCCL INFO 8192 Bytes -> Algo 1 proto 0 time 11.250000\n"
      "node5:1:1 [0] NCCL INFO AllGather: opCount 2 sendbuff 0x1 recvbuff 0x2 count 4096 datatype 0 op 0 root 0 comm 0xabc [nranks=8] stream 0x3\n"
      "node5:1:1 [0] NCCL INFO 4096 Bytes -> Algo 0 proto 2 time 9.5\n");
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].collective, "AllReduce");
  EXPECT_EQ(choices[0].algorithm, "RING");
  EXPECT_EQ(choices[0].protocol, "LL");
  EXPECT_EQ(choices[0].comm, "0xabc");
  ASSERT_TRUE(choices[0].predicted_time_us.has_value());
  EXPECT_DOUBLE_EQ(*choices[0].predicted_time_us, 11.25);
  EXPECT_FALSE(choices[0].channel_lo.has_value());
  EXPECT_EQ(choices[1].collective, "AllGather");
  EXPECT_EQ(choices[1].algorithm, "TREE");
  EXPECT_EQ(choices[1].protocol, "SIMPLE");
  EXPECT_EQ(choices[1].count, 4096u);
}

TEST(Tuning, TextWithoutTuningLinesGivesNothing) {
  EXPECT_TRUE(parse_tuning("").empty());
  EXPECT_TRUE(parse_tuning("node5:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n").empty());
  EXPECT_TRUE(parse_tuning("node5:1:1 [0] NCCL INFO x Bytes -> Algo\n").empty());
}

}  // namespace
}  // namespace cclbench
