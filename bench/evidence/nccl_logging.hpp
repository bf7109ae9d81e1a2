#pragma once
// NCCL log capture: call before the first NCCL call of the process (NCCL reads NCCL_DEBUG* once).
//
// Timed runs: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV. INIT and NET carry the
// transport evidence (version, network, devices, "Channel .. via .." lines); GRAPH the rings and
// trees; ENV the variables NCCL honoured. TUNING and COLL stay OFF for timed runs: COLL prints one
// line per collective call from the enqueue path and TUNING one per launch plan, host work inside
// the timed loop. A separate untimed probe process (NcclLogPurpose::probe, its own log directory)
// adds TUNING,COLL to record the algorithm/protocol per size (parse_tuning()).
//
// NCCL_DEBUG_FILE=<dir>/%h.%p.log: one file per process, named by host and pid, so the parser maps
// ranks to hosts.
//
// A user's explicit NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE are kept; the plan says so in
// `notes`, and says when the kept values leave the transport gate without evidence.
#include <string>
#include <utility>
#include <vector>

namespace cclbench {

enum class NcclLogPurpose { timed, probe };

inline constexpr const char* kTimedSubsys = "INIT,NET,GRAPH,ENV";
inline constexpr const char* kProbeSubsys = "INIT,NET,GRAPH,ENV,TUNING,COLL";

struct NcclLogPlan {
  std::vector<std::pair<std::string, std::string>> to_set;  // variables to set (the user set none of these)
  std::string log_dir;           // where the logs will be ("." when the user's file has no directory)
  std::string file_pattern;      // effective NCCL_DEBUG_FILE ("" = NCCL writes to stdout)
  std::string debug_level;       // effective NCCL_DEBUG
  std::string debug_subsys;      // effective NCCL_DEBUG_SUBSYS
  bool evidence_expected = true; // false when the effective settings cannot show transports
  std::vector<std::string> notes;
};

// Pure: decides from `environment` ("NAME=value") without touching the process.
NcclLogPlan plan_nccl_logging(const std::vector<std::string>& environment, const std::string& log_dir,
                              NcclLogPurpose purpose = NcclLogPurpose::timed);

// Creates `log_dir` (when the plan writes there) and sets the planned variables in this process
// (setenv without overwriting). Throws FatalError when the directory cannot be created.
NcclLogPlan setup_nccl_logging(const std::string& log_dir, NcclLogPurpose purpose = NcclLogPurpose::timed);

}  // namespace cclbench
