// Case records and CSV rows: the measurement-mode fields (schema 1.2) and where bandwidth comes from.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/reporters.hpp"

namespace cclbench {
namespace {

CaseResult timed_result() {
  CaseResult result;
  result.spec.collective = Collective::all_reduce;
  result.spec.descriptor = &kAllReduce;
  result.spec.op = ReduceOp::mulsum;
  result.spec.requested_bytes = 8192;
  result.spec.nranks = 4;
  result.spec.counts = descriptor_of(Collective::all_reduce).byte_counts(8192, 4, 4);
  result.backend = "nccl";
  result.iterations = 20;
  result.time_us = TimeStats{6.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1.0};
  result.batch_time_us = 2.0;
  result.algbw_gbps = 1.0;  // bandwidth_from is named only where a bandwidth was computed
  result.samples_us = {6.0};
  result.status = CaseStatus::ok;
  return result;
}

std::size_t commas(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), ',')); }

TEST(Record, MeasurementModeFieldsAreInEveryRecordAndCsvRow) {
  CaseResult result = timed_result();
  result.mode.graph_launches = 10;
  result.mode.ops_per_launch = 4;
  result.mode.registration = "symmetric";
  result.mode.unalign_elements = 3;
  result.mode.cta_policy = 1;
  result.samples_from = "instrumented_graph_replay";
  result.cycle = 2;
  result.gated_time_us = 1.5;
  const nlohmann::json record = case_record(result, "", false);
  EXPECT_EQ(record["schema_version"], "1.6.0");
  EXPECT_EQ(record["op"], "mulsum");
  EXPECT_EQ(record["graph_launches"], 10);
  EXPECT_EQ(record["ops_per_launch"], 4);
  EXPECT_EQ(record["registration"], "symmetric");
  EXPECT_EQ(record["unalign_elements"], 3);
  EXPECT_EQ(record["cta_policy"], 1);
  EXPECT_EQ(record["samples_from"], "instrumented_graph_replay");
  EXPECT_EQ(record["cycle"], 2);
  EXPECT_EQ(record["bandwidth_from"], "gated_time_us");

  const std::string header = csv_header();
  const std::string row = csv_row(record);
  ASSERT_EQ(commas(header), commas(row));
  EXPECT_NE(header.find(",samples_from,graph_launches,ops_per_launch,registration,unalign_elements,cta_policy,cycle"),
            std::string::npos);
  EXPECT_NE(row.find(",instrumented_graph_replay,10,4,symmetric,3,1,2"), std::string::npos) << row;
}

TEST(Record, EagerDefaultsAndAnUnsetCtaPolicyIsNull) {
  CaseResult result = timed_result();
  result.samples_from = "per_iteration_events";
  const nlohmann::json full = with_record_defaults(case_record(result, "", false));
  EXPECT_EQ(full["graph_launches"], 0);
  EXPECT_EQ(full["ops_per_launch"], 1);
  EXPECT_EQ(full["registration"], "none");
  EXPECT_TRUE(full["cta_policy"].is_null());
  EXPECT_EQ(full["cycle"], 0);
  EXPECT_EQ(full["bandwidth_from"], "time_us.mean");  // no gated time, not a graph run
  EXPECT_EQ(*bandwidth_time_us(result), 6.0);
  result.samples_from.clear();  // a skipped case was never timed
  EXPECT_TRUE(case_record(result, "", false)["samples_from"].is_null());
}

// Schema 1.3 lean records: a field at its default (the values written out here, from the schema's
// "default" annotations) is left out, and the CSV row still has every column, filled with the default.
TEST(Record, FieldsAtTheirDefaultAreLeftOutAndCsvFillsThem) {
  CaseResult result = timed_result();
  result.check_iterations = 1;
  const nlohmann::json record = case_record(result, "", false);
  for (const char* key : {"root", "emulated", "check_iterations", "graph_launches", "ops_per_launch", "registration",
                          "unalign_elements", "cta_policy", "cycle"}) {
    EXPECT_FALSE(record.contains(key)) << key << " holds its default and is still written";
  }
  EXPECT_TRUE(record.contains("point"));    // not a defaulted field
  EXPECT_TRUE(record.contains("per_rank"));  // 4 ranks
  const std::string row = csv_row(record);
  ASSERT_EQ(commas(csv_header()), commas(row));
  // ...,emulated,gated_time_us,bandwidth_from,samples_from,graph_launches,...,cycle
  EXPECT_NE(row.find(",false,,time_us.mean,,0,1,none,0,,0"), std::string::npos) << row;
  // ...,dtype,op,root,in_place,...: root empty (null) for a collective without one.
  EXPECT_NE(row.find(",float,mulsum,,false,8192,"), std::string::npos) << row;
}

TEST(Record, OneRankPerRankIsLeftOutOnlyWhereItRepeatsTheRecord) {
  CaseResult result = timed_result();
  result.spec.nranks = 1;
  result.rank_mean_us = {6.0};            // time_us.mean
  result.rank_slowest_iterations = {20};  // iterations
  const nlohmann::json lean = case_record(result, "", false);
  EXPECT_FALSE(lean.contains("per_rank"));
  EXPECT_EQ(with_record_defaults(lean)["per_rank"],
            nlohmann::json::parse(R"({"mean_us": [6.0], "slowest_iterations": [20]})"));
  result.rank_slowest_iterations = {19};  // differs: written
  EXPECT_EQ(case_record(result, "", false)["per_rank"]["slowest_iterations"], nlohmann::json::parse("[19]"));
  result.spec.nranks = 2;  // never left out at more ranks
  result.rank_mean_us = {6.0, 5.0};
  result.rank_slowest_iterations = {20, 0};
  EXPECT_TRUE(case_record(result, "", false).contains("per_rank"));
}

TEST(Record, EmptyRailArraysAreLeftOutAndFilledBack) {
  CaseResult result = timed_result();
  result.evidence["rails"] = nlohmann::json::parse(
      R"({"nodes": [{"host": "a", "flags": [], "ib_ports": [], "netdevs": [], "netdev_rails": [], "netdevs_zero_omitted": 3},
                    {"host": "b", "flags": ["b: imbalanced"], "ib_ports": [], "netdevs": [], "netdev_rails": []}], "flags": ["b: imbalanced"]})");
  const nlohmann::json lean = case_record(result, "", false);
  EXPECT_EQ(lean["evidence"]["rails"], nlohmann::json::parse(
      R"({"nodes": [{"host": "a", "netdevs_zero_omitted": 3}, {"host": "b", "flags": ["b: imbalanced"]}], "flags": ["b: imbalanced"]})"));
  EXPECT_EQ(with_record_defaults(lean)["evidence"]["rails"], result.evidence["rails"]);
}

// A graph run without a gated time (shared GPU): the instrumented replay's samples carry event
// nodes' GPU time, so bandwidth comes from the graph's batch time instead.
TEST(Record, GraphRunWithoutGatedTimeTakesBandwidthFromTheBatchTime) {
  CaseResult result = timed_result();
  result.mode.graph_launches = 3;
  EXPECT_EQ(*bandwidth_time_us(result), 2.0);
  EXPECT_STREQ(bandwidth_source(result), "batch_time_us");
  result.gated_time_us = 1.25;
  EXPECT_EQ(*bandwidth_time_us(result), 1.25);
  EXPECT_STREQ(bandwidth_source(result), "gated_time_us");
}

}  // namespace
}  // namespace cclbench
