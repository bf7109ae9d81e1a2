#pragma once
// Serializers for CaseResult: the console table (nccl-tests columns plus p50/p99), CSV rows, and the
// JSON document of -J. They only format; the app decides when and where to write.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/case.hpp"

namespace cclbench {

// 1.1: gated_time_us, bandwidth_from. 1.2: per_rank, samples_from, graph_launches, ops_per_launch,
// registration, unalign_elements, cta_policy, cycle; op mulsum; bandwidth_from batch_time_us; lean
// records - samples_us moved to a --samples side file (samples_file), rails notes once per document
// (notes), zero-delta netdevs counted, not listed. 1.3: a field that holds its documented default
// is left out of the record (record_defaults(); the schema's "default" annotations), and so is
// per_rank at one rank where it only repeats time_us.mean and iterations.
// 1.4: busbw_gbps is null at one rank (busbw_null_reason), and busbw_reason says why; the -J
// manifest has env_by_host and env_rank_disagreements (gather_environment_by_host).
inline constexpr const char* kResultsSchemaVersion = "1.6.0";

// One record as written to JSONL and to the "cases" array: to_json() plus schema_version, point
// and emulated, with the fields that hold their default left out (schema 1.3).
nlohmann::json case_record(const CaseResult& result, const std::string& point, bool emulated);

// The defaults a schema 1.3 record leaves out: top-level fields, and the rails evidence's empty
// arrays (evidence.rails.flags, evidence.rails.nodes[].flags/ib_ports/netdevs). The same values as
// case_record.schema.json's "default" annotations and scripts/cclbench_lib/model/records.py RECORD_DEFAULTS.
const nlohmann::json& record_defaults();
// A record with every left-out field filled back: what readers (csv_row) see.
nlohmann::json with_record_defaults(const nlohmann::json& record);

// Prints nccl-tests' two-half table: a line per (collective, dtype, op, size), out-of-place then
// in-place, each half with time algbw busbw #wrong p50 p99. Missing values print as "-"; where busbw
// has no meaning (busbw_null_reason: one rank) the first header says why, once.
class ConsoleTable {
 public:
  explicit ConsoleTable(std::ostream& out) : out_(out) {}
  void add(const CaseResult& result);
  void finish();  // flushes a half line (out-of-place only runs)

 private:
  void print_header(const CaseResult& first);
  void print_line(const CaseResult* out_of_place, const CaseResult* in_place);

  std::ostream& out_;
  std::optional<CaseResult> pending_;
  std::string current_table_;
  double busbw_sum_ = 0;
  int busbw_count_ = 0;
  bool emulated_ = false;  // the current table's results came from --share-gpu ranks
  bool busbw_reason_printed_ = false;  // "busbw: - (why)" once per run, not per collective
};

std::string csv_header();
std::string csv_row(const nlohmann::json& record);

}  // namespace cclbench
