#pragma once
// Capturing NCCL's own log for evidence: where a run's NCCL logs go (planned before NCCL's first
// call, since NCCL reads NCCL_DEBUG* once) and every rank's log gathered to rank 0 afterwards.
// Collective over the world: every rank calls these in the same order; a missing or unreadable
// file is recorded, never thrown on one rank only.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/evidence/nccl_evidence.hpp"
#include "bench/evidence/nccl_logging.hpp"

namespace cclbench {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it when this goes away.
class TemporaryDirectory {
 public:
  TemporaryDirectory();
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Where this run's NCCL logs go and what NCCL was told. Set up before the first NCCL call.
struct NcclLogCapture {
  bool active = false;          // the NCCL backend runs (logging planned)
  NcclLogPlan plan;
  std::unique_ptr<TemporaryDirectory> temporary;
  std::string own_log_path;     // this process's file (NCCL_DEBUG_FILE expanded)
};

// Plans the logging for `purpose` (NCCL_DEBUG_FILE in --nccl-log-dir, else next to -J/--jsonl for
// timed runs, else a temporary directory); rank 0 prints the plan's notes.
NcclLogCapture setup_log_capture(const Config& config, const MpiContext& context, NcclLogPurpose purpose,
                                 const std::string& program);

// Every rank's own NCCL log, gathered to rank 0 as (file name, text). A rank whose file is missing
// or unreadable sends the reason instead; it then counts as "no evidence" for that rank.
struct GatheredLogs {
  std::vector<std::pair<std::string, std::string>> texts;  // rank 0 only
  std::vector<LogInput> unreadable;                        // rank 0 only
  std::vector<std::string> files;
};

GatheredLogs gather_nccl_logs(const NcclLogCapture& capture, const MpiContext& context);

}  // namespace cclbench
