#include "bench/evidence/nccl_logging.hpp"

#include <cstdlib>
#include <map>
#include <set>

#include "bench/core/file_io.hpp"
#include "bench/evidence/ascii_case.hpp"
#include "bench/evidence/log_text.hpp"

namespace cclbench {

namespace {

// Whether NCCL_DEBUG_SUBSYS `value` enables `subsystem` (NCCL's rules: comma list, '^' inverts, ALL).
bool subsys_enables(std::string_view value, std::string_view subsystem) {
  bool invert = false;
  if (!value.empty() && value.front() == '^') {
    invert = true;
    value.remove_prefix(1);
  }
  bool listed = false;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string item = evidence_detail::upper(evidence_detail::trim(value.substr(start, comma - start)));
    if (item == subsystem || item == "ALL") listed = true;
    start = comma + 1;
  }
  return invert ? !listed : listed;
}

}  // namespace

NcclLogPlan plan_nccl_logging(const std::vector<std::string>& environment, const std::string& log_dir,
                              NcclLogPurpose purpose) {
  std::map<std::string, std::string> user;
  for (const std::string& entry : environment) {
    const std::size_t equals = entry.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = entry.substr(0, equals);
    if (name == "NCCL_DEBUG" || name == "NCCL_DEBUG_SUBSYS" || name == "NCCL_DEBUG_FILE") {
      user[name] = entry.substr(equals + 1);
    }
  }
  NcclLogPlan plan;
  const std::string wanted_subsys = purpose == NcclLogPurpose::probe ? kProbeSubsys : kTimedSubsys;
  const std::string wanted_file = log_dir + "/%h.%p.log";

  if (user.count("NCCL_DEBUG")) {
    plan.debug_level = user["NCCL_DEBUG"];
    plan.notes.push_back("NCCL_DEBUG=" + plan.debug_level + " was set by the user and is kept");
    const std::string level = evidence_detail::upper(plan.debug_level);
    if (level != "INFO" && level != "TRACE") {
      plan.evidence_expected = false;
      plan.notes.push_back("NCCL_DEBUG=" + plan.debug_level +
                           " prints no INFO lines: the transport gate will fail for lack of evidence");
    }
  } else {
    plan.debug_level = "INFO";
    plan.to_set.emplace_back("NCCL_DEBUG", "INFO");
  }

  if (user.count("NCCL_DEBUG_SUBSYS")) {
    plan.debug_subsys = user["NCCL_DEBUG_SUBSYS"];
    plan.notes.push_back("NCCL_DEBUG_SUBSYS=" + plan.debug_subsys + " was set by the user and is kept");
    if (!subsys_enables(plan.debug_subsys, "INIT")) {
      plan.evidence_expected = false;
      plan.notes.push_back("NCCL_DEBUG_SUBSYS=" + plan.debug_subsys +
                           " lacks INIT: no communicator or connection lines, the transport gate will fail for lack "
                           "of evidence");
    } else if (!subsys_enables(plan.debug_subsys, "NET")) {
      plan.notes.push_back("NCCL_DEBUG_SUBSYS=" + plan.debug_subsys +
                           " lacks NET: connection lines still come with INIT, but network-only details may be missing");
    }
    if (purpose == NcclLogPurpose::timed &&
        (subsys_enables(plan.debug_subsys, "COLL") || subsys_enables(plan.debug_subsys, "TUNING"))) {
      plan.notes.push_back("NCCL_DEBUG_SUBSYS=" + plan.debug_subsys +
                           " enables COLL or TUNING: NCCL logs from the enqueue path during timed iterations, which "
                           "adds host overhead to the measurement");
    }
    if (purpose == NcclLogPurpose::probe && !subsys_enables(plan.debug_subsys, "TUNING")) {
      plan.notes.push_back("NCCL_DEBUG_SUBSYS=" + plan.debug_subsys +
                           " lacks TUNING: the probe cannot record algorithm and protocol choices");
    }
  } else {
    plan.debug_subsys = wanted_subsys;
    plan.to_set.emplace_back("NCCL_DEBUG_SUBSYS", wanted_subsys);
  }

  if (user.count("NCCL_DEBUG_FILE")) {
    plan.file_pattern = user["NCCL_DEBUG_FILE"];
    const std::size_t slash = plan.file_pattern.rfind('/');
    plan.log_dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : plan.file_pattern.substr(0, slash));
    plan.notes.push_back("NCCL_DEBUG_FILE=" + plan.file_pattern + " was set by the user and is kept: logs go there, not to " +
                         wanted_file);
    if (plan.file_pattern.find("%p") == std::string::npos) {
      plan.notes.push_back("NCCL_DEBUG_FILE has no %p: processes of one host overwrite one file, losing evidence");
    }
    if (plan.file_pattern.find("%h") == std::string::npos) {
      plan.notes.push_back("NCCL_DEBUG_FILE has no %h: files of different hosts can collide on shared storage");
    }
  } else {
    plan.file_pattern = wanted_file;
    plan.log_dir = log_dir;
    plan.to_set.emplace_back("NCCL_DEBUG_FILE", wanted_file);
  }
  return plan;
}

NcclLogPlan setup_nccl_logging(const std::string& log_dir, NcclLogPurpose purpose) {
  std::vector<std::string> environment;
  for (const char* name : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) {
    if (const char* value = std::getenv(name)) environment.push_back(std::string(name) + "=" + value);
  }
  NcclLogPlan plan = plan_nccl_logging(environment, log_dir, purpose);
  if (plan.log_dir == log_dir) make_directories(log_dir);
  for (const auto& [name, value] : plan.to_set) ::setenv(name.c_str(), value.c_str(), 0);
  return plan;
}

}  // namespace cclbench
