#pragma once
// The transport section of a coll_perf document: rank 0 parses the gathered NCCL logs, applies
// --expect-transport and writes the one-line summary.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/evidence/nccl_log_capture.hpp"
#include "bench/evidence/transport_gate.hpp"

namespace cclbench {

struct TransportVerdict {
  nlohmann::json section;     // the "transport" section of -J
  bool gate_failed = false;
  std::string gate_message;
};

// Rank 0: parse the gathered logs, apply --expect-transport, build the section and the summary line.
TransportVerdict transport_verdict(const GatheredLogs& logs, const NcclLogCapture& capture,
                                   const std::optional<ExpectSpec>& spec);

}  // namespace cclbench
