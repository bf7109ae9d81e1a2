#include "bench/evidence/transport_verdict.hpp"

#include <cstdint>
#include <map>

namespace cclbench {
namespace {

// "inter-node NET/Socket x24; intra-node P2P/CUMEM x8" over every communicator.
std::string transport_classes_text(const EvidenceSummary& summary, nlohmann::json& inter, nlohmann::json& intra) {
  std::map<std::string, std::map<std::string, std::uint64_t>> classes;
  for (const CommunicatorEvidence& comm : summary.communicators) {
    for (const ChannelConnection& connection : comm.connections) {
      ++classes[std::string(to_string(edge_scope(comm, connection)))][transport_class(connection)];
    }
  }
  inter = nlohmann::json::object();
  intra = nlohmann::json::object();
  std::string text;
  for (const auto& [scope, counts] : classes) {
    text += (text.empty() ? "" : "; ") + scope;
    for (const auto& [klass, count] : counts) {
      text += " " + klass + " x" + std::to_string(count);
      if (scope == to_string(EdgeScope::inter_node)) inter[klass] = count;
      if (scope == to_string(EdgeScope::intra_node)) intra[klass] = count;
    }
  }
  return text.empty() ? "no connection lines in the NCCL logs" : text;
}

}  // namespace

TransportVerdict transport_verdict(const GatheredLogs& logs, const NcclLogCapture& capture,
                                   const std::optional<ExpectSpec>& spec) {
  EvidenceSummary summary = parse_nccl_log_texts(logs.texts);
  for (const LogInput& input : logs.unreadable) {
    summary.inputs.push_back(input);
    summary.notes.push_back(input.reason);
  }
  TransportVerdict verdict;
  nlohmann::json inter;
  nlohmann::json intra;
  const std::string classes = transport_classes_text(summary, inter, intra);
  std::string versions;
  for (const std::string& version : summary.nccl_versions) versions += (versions.empty() ? "" : ",") + version;
  std::string line = "transport: " + classes + " (NCCL " + (versions.empty() ? std::string("version unknown") : versions) +
                     ", " + std::to_string(logs.texts.size()) + " log(s))";
  nlohmann::json& section = verdict.section;
  section["log_dir"] = capture.temporary ? nlohmann::json(nullptr) : nlohmann::json(capture.plan.log_dir);
  if (capture.temporary) section["log_dir_reason"] = "temporary directory, removed at exit (give --nccl-log-dir)";
  section["log_files"] = logs.files;
  section["nccl_debug"] = capture.plan.debug_level;
  section["nccl_debug_subsys"] = capture.plan.debug_subsys;
  section["logging_notes"] = capture.plan.notes;
  section["inter_node"] = inter;
  section["intra_node"] = intra;
  if (spec) {
    const GateResult gate = check_expectation(summary, *spec);
    section["expect"] = spec->text;
    section["gate"] = to_json(gate, *spec);
    section["status"] = gate.passed ? "passed" : "failed";
    section["reason"] = gate.passed ? nlohmann::json(nullptr) : nlohmann::json(gate.message);
    verdict.gate_failed = !gate.passed;
    verdict.gate_message = gate.message;
    line += gate.passed ? "; expectation '" + spec->text + "' met" : "; expectation '" + spec->text + "' FAILED";
  } else {
    section["expect"] = nullptr;
    section["gate"] = nullptr;
    section["status"] = "not_gated";
    section["reason"] = "no --expect-transport given";
  }
  section["summary"] = line;
  section["evidence"] = to_json(summary);
  return verdict;
}

}  // namespace cclbench
