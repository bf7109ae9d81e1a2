#pragma once
// The transport gate: an expectation such as "inter=NET/IB+GDRDMA,intra=P2P" checked against what
// NCCL's logs prove. Absence of evidence is a failure, never a pass.
//
// Spec grammar:  SPEC := ITEM (',' ITEM)* ;  ITEM := ('inter' | 'intra') '=' ALT ('|' ALT)*
//                ALT  := KIND ('/' PART)* ['+GDRDMA'] ;  KIND := NET | P2P | SHM | COLLNET (any case)
// A connection matches ALT when its transport ("NET/IB/0/GDRDMA", "P2P/CUMEM/read", "SHM/direct/direct")
// starts with ALT's parts, compared case-insensitively, and, with +GDRDMA, it used GPUDirect RDMA.
// The network name "IB" also matches NVIDIA's external IB plugin names ("IBext", "IBext_v8").
// Examples: inter=NET/IB+GDRDMA,intra=P2P   inter=NET/Socket   intra=SHM   intra=P2P|SHM   inter=NET/IB
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/evidence/nccl_evidence.hpp"

namespace cclbench {

struct TransportPattern {
  std::vector<std::string> parts;  // {"NET", "IB"}
  bool require_gdr = false;
  std::string text;                // "NET/IB+GDRDMA"
};

struct TransportRequirement {
  std::vector<TransportPattern> alternatives;
  std::string text;                // "NET/IB+GDRDMA|COLLNET"
};

struct ExpectSpec {
  std::optional<TransportRequirement> inter;
  std::optional<TransportRequirement> intra;
  std::string text;
};

struct GateResult {
  bool passed = false;
  std::vector<std::string> problems;   // one plain sentence each, deduplicated, in log order
  std::string message;                 // one line: verdict plus the first problems
  std::uint64_t inter_node_connections = 0;
  std::uint64_t intra_node_connections = 0;
  std::map<std::string, std::uint64_t> inter_node_classes;  // "NET/IB+GDRDMA" -> count
  std::map<std::string, std::uint64_t> intra_node_classes;
};

// Throws UsageError naming the bad part ("--expect: unknown transport 'RDMA' in 'inter=RDMA'").
ExpectSpec parse_expect_spec(std::string_view text);

bool matches(const TransportPattern& pattern, const ChannelConnection& connection);
bool matches(const TransportRequirement& requirement, const ChannelConnection& connection);

GateResult check_expectation(const EvidenceSummary& summary, const ExpectSpec& spec);

nlohmann::json to_json(const GateResult& result, const ExpectSpec& spec);

}  // namespace cclbench
