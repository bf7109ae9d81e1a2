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
// (notes), zero-delta netdevs counted, not listed.
inline constexpr const char* kResultsSchemaVersion = "1.2.0";

// One record as written to JSONL and to the "cases" array: to_json() plus schema_version, point
// and emulated.
nlohmann::json case_record(const CaseResult& result, const std::string& point, bool emulated);

// Prints nccl-tests' two-half table: a line per (collective, dtype, op, size), out-of-place then
// in-place, each half with time algbw busbw #wrong p50 p99. Missing values print as "-".
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
};

std::string csv_header();
std::string csv_row(const nlohmann::json& record);

}  // namespace cclbench
