#pragma once
// Algorithm/protocol evidence for coll_perf: --tuning-probe (one untimed call per case with TUNING
// logging, written to a file) and --tuning-from (the probe's choices attached to each record).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"
#include "bench/evidence/nccl_log_capture.hpp"

namespace cclbench {

// A --tuning-probe file, checked at startup (UsageError when unreadable or of another kind).
nlohmann::json read_tuning_file(const std::string& path);

// --tuning-from FILE: rank 0 attaches the probe's algorithm/protocol to each record.
class TuningAttacher final : public CaseObserver {
 public:
  // `document` is read_tuning_file()'s result on rank 0, null elsewhere (only rank 0 writes).
  TuningAttacher(const std::string& path, const nlohmann::json& document) : path_(path) {
    if (!document.is_object()) return;
    for (const auto& entry : document["cases"]) {
      if (entry.is_object() && entry.contains("case_id") && entry["case_id"].is_string()) {
        by_case_[entry["case_id"].get<std::string>()] = entry;
      }
    }
    nccl_version_ = document.value("nccl_version", nlohmann::json(nullptr));
    enabled_ = true;
  }
  void before_case(const CaseSpec&) override {}
  void after_case(CaseResult& result) override {
    if (!enabled_) return;
    const auto found = by_case_.find(result.spec.case_id());
    if (found == by_case_.end()) {
      result.evidence["tuning"] = nullptr;
      result.evidence["tuning_reason"] = "case not in the probe file " + path_;
      return;
    }
    nlohmann::json tuning = found->second.value("tuning", nlohmann::json(nullptr));
    if (tuning.is_null()) {
      result.evidence["tuning"] = nullptr;
      result.evidence["tuning_reason"] = found->second.value("reason", std::string("the probe recorded no choice"));
      return;
    }
    tuning["probe_file"] = path_;
    tuning["probe_nccl_version"] = nccl_version_;
    result.evidence["tuning"] = tuning;
  }

 private:
  std::string path_;
  bool enabled_ = false;
  std::map<std::string, nlohmann::json> by_case_;
  nlohmann::json nccl_version_;
};

// Runs every case once, untimed (fill + one call), with TUNING logging; writes FILE. No records.
// Each call is watched (`monitor`: the watchdog, Phase::probe), like every phase of a timed run.
int run_tuning_probe(const Config& config, const MpiContext& context, Backend& backend, const std::vector<CaseSpec>& cases,
                     const NcclLogCapture& capture, const std::string& program, PhaseMonitor& monitor);

}  // namespace cclbench
