#include "bench/evidence/tuning_run.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iostream>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/reporters.hpp"
#include "bench/evidence/nccl_evidence.hpp"
#include "bench/evidence/tuning_probe.hpp"

namespace cclbench {

nlohmann::json read_tuning_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--tuning-from: cannot read '" + path + "': " + std::strerror(errno));
  nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (!document.is_object() || document.value("kind", "") != "tuning_probe" || !document.contains("cases") ||
      !document["cases"].is_array()) {
    throw UsageError("--tuning-from: '" + path + "' is not a coll_perf --tuning-probe file");
  }
  return document;
}

int run_tuning_probe(const Config& config, const MpiContext& context, Backend& backend, const std::vector<CaseSpec>& cases,
                     const NcclLogCapture& capture, const std::string& program, PhaseMonitor& monitor) {
  std::vector<bool> ran(cases.size(), false);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (backend.unsupported_reason(cases[i])) continue;
    monitor.enter(cases[i], Phase::probe);
    backend.fill(cases[i], 0);
    backend.run_once(cases[i]);
    monitor.leave();
    ran[i] = true;
  }
  const GatheredLogs logs = gather_nccl_logs(capture, context);
  if (context.world_rank != 0) return to_int(ExitCode::ok);
  // NCCL 2.22+ prints TUNING on rank 0 only; older versions on every rank with the same choices.
  std::vector<TuningChoice> choices;
  std::string nccl_version;
  if (!logs.texts.empty()) {
    choices = parse_tuning(logs.texts.front().second, logs.texts.front().first);
    const EvidenceSummary summary = parse_nccl_log_texts({logs.texts.front()});
    if (!summary.nccl_versions.empty()) nccl_version = summary.nccl_versions.front();
  }
  nlohmann::json document = {
      {"schema_version", kResultsSchemaVersion},
      {"kind", "tuning_probe"},
      {"program", program},
      {"argv", config.argv},
      {"nccl_version", nccl_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(nccl_version)},
      {"nranks", backend.nranks()},
      {"note", "one untimed call per case with NCCL_DEBUG_SUBSYS including TUNING; never mixed with timed runs"},
      {"logging_notes", capture.plan.notes},
      {"log_files", logs.files},
      {"cases", match_tuning(cases, ran, choices)}};
  write_file_atomic(config.tuning_probe_path, document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::size_t found = 0;
  for (const auto& entry : document["cases"]) found += entry["tuning"].is_null() ? 0 : 1;
  std::cout << "tuning probe: " << found << " of " << cases.size() << " cases with an algorithm/protocol choice -> "
            << config.tuning_probe_path << "\n";
  return to_int(ExitCode::ok);
}

}  // namespace cclbench
