#include "bench/core/case.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "bench/core/units.hpp"

namespace cclbench {
namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// Measured doubles go into records with 7 significant digits (a relative 5e-8, far below any timer's
// resolution) instead of 17: 0.42485000000000006 becomes 0.42485. Most of a record's bytes were digits.
double recorded(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.7g", value);
  return std::strtod(text, nullptr);
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(recorded(*value)) : nlohmann::json(nullptr);
}

}  // namespace

// Graph mode without a gated time (e.g. --share-gpu): the per-iteration samples come from the
// instrumented replay, whose event nodes cost GPU time, so the graph's own batch time is used.
bool graph_batch_time(const CaseResult& result) {
  return !result.gated_time_us && result.mode.graph_launches > 0 && result.batch_time_us.has_value();
}

std::optional<double> bandwidth_time_us(const CaseResult& result) {
  if (result.gated_time_us) return result.gated_time_us;
  if (graph_batch_time(result)) return result.batch_time_us;
  if (result.time_us) return result.time_us->mean;
  return std::nullopt;
}

const char* bandwidth_source(const CaseResult& result) {
  if (result.gated_time_us) return "gated_time_us";
  return graph_batch_time(result) ? "batch_time_us" : "time_us.mean";
}

const char* busbw_null_reason(int nranks) { return nranks == 1 ? "1 rank: no link is crossed" : nullptr; }

const CollectiveDescriptor& CaseSpec::collective_descriptor() const {
  if (descriptor == nullptr || descriptor->kind != collective) {
    throw std::logic_error("case of " + std::string(name_of(collective)) + " without its collective descriptor");
  }
  return *descriptor;
}

std::string CaseSpec::case_id() const {
  std::string id = std::string(name_of(collective)) + "." + std::string(name_of(dtype)) + "." + std::string(name_of(op)) +
                   (in_place ? ".in." : ".out.") + format_size(requested_bytes);
  if (collective_descriptor().rooted) id += ".r" + std::to_string(root);
  return id;
}

std::string_view name_of(CaseStatus status) {
  switch (status) {
    case CaseStatus::ok: return "ok";
    case CaseStatus::failed: return "failed";
    case CaseStatus::skipped: return "skipped";
    case CaseStatus::error: return "error";
  }
  return "error";
}

nlohmann::json to_json(const CaseResult& result) {
  const CaseSpec& spec = result.spec;
  nlohmann::json record;
  record["case_id"] = spec.case_id();
  record["collective"] = name_of(spec.collective);
  record["backend"] = result.backend;
  record["nranks"] = spec.nranks;
  record["dtype"] = name_of(spec.dtype);
  record["op"] = name_of(spec.op);
  record["root"] = spec.collective_descriptor().rooted ? nlohmann::json(spec.root) : nlohmann::json(nullptr);
  record["in_place"] = spec.in_place;
  record["requested_bytes"] = spec.requested_bytes;
  record["bytes"] = spec.counts.size_bytes();
  record["count"] = spec.counts.param_count;
  record["send_bytes"] = spec.counts.send_bytes();
  record["recv_bytes"] = spec.counts.recv_bytes();
  record["iterations"] = result.iterations;
  record["warmup"] = result.warmup;
  record["check_iterations"] = result.check_iterations;
  if (result.time_us) {
    const TimeStats& t = *result.time_us;
    record["time_us"] = {{"mean", recorded(t.mean)}, {"min", recorded(t.min)}, {"p50", recorded(t.p50)},
                         {"p95", recorded(t.p95)},   {"p99", recorded(t.p99)}, {"max", recorded(t.max)},
                         {"cv_pct", recorded(t.cv_pct)}};
  } else {
    record["time_us"] = nullptr;
  }
  record["batch_time_us"] = optional_json(result.batch_time_us);
  record["gated_time_us"] = optional_json(result.gated_time_us);
  record["bandwidth_from"] = result.algbw_gbps ? nlohmann::json(bandwidth_source(result)) : nlohmann::json(nullptr);
  record["algbw_gbps"] = optional_json(result.algbw_gbps);
  record["busbw_gbps"] = optional_json(result.busbw_gbps);
  // Schema 1.4: present exactly where the rank count leaves busbw without meaning (then always null).
  if (const char* why = busbw_null_reason(spec.nranks)) record["busbw_reason"] = why;
  record["wrong"] = optional_json(result.wrong);
  record["status"] = name_of(result.status);
  record["reason"] = result.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(result.reason);
  // Per-iteration samples are not part of the record (they made -n 2000 records 38 KB): coll_perf
  // --samples writes them to a side file that the record names (samples_file).
  if (result.rank_mean_us.empty()) {
    record["per_rank"] = nullptr;
  } else {
    std::vector<double> rank_mean_us;
    for (const double mean : result.rank_mean_us) rank_mean_us.push_back(recorded(mean));
    record["per_rank"] = {{"mean_us", rank_mean_us}, {"slowest_iterations", result.rank_slowest_iterations}};
  }
  record["samples_from"] = result.samples_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(result.samples_from);
  record["graph_launches"] = result.mode.graph_launches;
  record["ops_per_launch"] = result.mode.ops_per_launch;
  record["registration"] = result.mode.registration;
  record["unalign_elements"] = result.mode.unalign_elements;
  record["cta_policy"] = optional_json(result.mode.cta_policy);
  record["cycle"] = result.cycle;
  record["evidence"] = result.evidence;
  return record;
}

}  // namespace cclbench
