// case_record() and the console table as units: the record's fields and nulls-with-meaning, and the
// nccl-tests two-half table with "-" for missing values. Expected values are written out by hand.
#include "bench/core/reporters.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"

namespace cclbench {
namespace {

CaseResult all_reduce_8k(bool in_place, std::optional<double> gated) {
  CaseResult result;
  result.spec.collective = Collective::all_reduce;
  result.spec.descriptor = &kAllReduce;
  result.spec.dtype = DataType::float32;
  result.spec.op = ReduceOp::sum;
  result.spec.in_place = in_place;
  result.spec.requested_bytes = 8192;
  result.spec.nranks = 4;
  result.spec.counts = descriptor_of(Collective::all_reduce).byte_counts(8192, 4, 4);
  result.backend = "nccl";
  result.iterations = 3;
  result.warmup = 1;
  result.check_iterations = 1;
  result.time_us = TimeStats{20.0, 18.0, 19.0, 25.0, 26.0, 26.0, 5.0};
  result.batch_time_us = 21.0;
  result.gated_time_us = gated;
  // 8192 B / 16.384 us = 0.5 GB/s; all_reduce busbw x 2(n-1)/n = 1.5 for n = 4.
  result.algbw_gbps = 0.5;
  result.busbw_gbps = 0.75;
  result.wrong = 0;
  result.status = CaseStatus::ok;
  result.samples_us = {18.0, 19.0, 23.0};
  return result;
}

TEST(CaseRecord, CarriesPointEmulatedSchemaAndBandwidthSource) {
  const nlohmann::json record = case_record(all_reduce_8k(false, 16.384), "intra.node1", false);
  EXPECT_EQ(record.at("schema_version"), "1.6.0");
  EXPECT_EQ(record.at("case_id"), "all_reduce.float.sum.out.8K");
  EXPECT_EQ(record.at("point"), "intra.node1");
  EXPECT_FALSE(record.contains("emulated"));  // schema 1.3: false is the default, left out
  EXPECT_EQ(record.at("bytes"), 8192);
  EXPECT_EQ(record.at("count"), 2048);
  EXPECT_EQ(record.at("gated_time_us"), 16.384);
  EXPECT_EQ(record.at("bandwidth_from"), "gated_time_us");
  EXPECT_EQ(record.at("time_us").at("p50"), 19.0);
  EXPECT_EQ(record.at("wrong"), 0);
  EXPECT_EQ(record.at("status"), "ok");
  EXPECT_TRUE(record.at("reason").is_null());
  EXPECT_FALSE(record.contains("samples_us"));  // schema 1.2: samples go to the --samples side file
}

TEST(CaseRecord, MissingValuesAreNullNeverZero) {
  CaseResult skipped = all_reduce_8k(true, std::nullopt);
  skipped.time_us.reset();
  skipped.batch_time_us.reset();
  skipped.algbw_gbps.reset();
  skipped.busbw_gbps.reset();
  skipped.wrong.reset();
  skipped.samples_us.clear();
  skipped.status = CaseStatus::skipped;
  skipped.reason = "MPI has no bfloat16 type";
  const nlohmann::json record = case_record(skipped, "", true);
  for (const char* key : {"time_us", "batch_time_us", "gated_time_us", "algbw_gbps", "busbw_gbps", "wrong"}) {
    EXPECT_TRUE(record.at(key).is_null()) << key << ": " << record.at(key);
  }
  EXPECT_EQ(record.at("status"), "skipped");
  EXPECT_EQ(record.at("reason"), "MPI has no bfloat16 type");
  EXPECT_EQ(record.at("emulated"), true);
  EXPECT_EQ(record.at("case_id"), "all_reduce.float.sum.in.8K");
}

TEST(ConsoleTable, OutOfPlaceAndInPlaceShareALineAndMissingPrintsDash) {
  std::ostringstream out;
  {
    ConsoleTable table(out);
    table.add(all_reduce_8k(false, std::nullopt));
    CaseResult in_place = all_reduce_8k(true, std::nullopt);
    in_place.wrong.reset();  // not checked
    table.add(in_place);
    table.finish();
  }
  const std::string text = out.str();
  // One data line for 8192 B holding both halves: out-of-place wrong 0, in-place wrong "-".
  std::istringstream lines(text);
  std::string line;
  int data_lines = 0;
  while (std::getline(lines, line)) {
    if (line.find("8192") == std::string::npos || line.rfind("#", 0) == 0) continue;
    ++data_lines;
    EXPECT_NE(line.find("0.75"), std::string::npos) << line;
    EXPECT_NE(line.find(" - "), std::string::npos) << "an unchecked in-place half prints '-': " << line;
  }
  EXPECT_EQ(data_lines, 1) << text;
}

// One communicator rank: busbw has no meaning (nccl-tests' (n-1)/n makes it 0.00), so it is null
// with a reason; what counts is the communicator's ranks, so one process with -g 4 keeps its busbw.
CaseResult one_rank(bool in_place, Collective collective = Collective::all_reduce) {
  CaseResult result = all_reduce_8k(in_place, 16.384);
  result.spec.collective = collective;
  result.spec.descriptor = &descriptor_of(collective);
  result.spec.op = collective == Collective::all_reduce ? ReduceOp::sum : ReduceOp::none;
  result.spec.nranks = 1;
  result.spec.counts = descriptor_of(collective).byte_counts(8192, 4, 1);
  result.busbw_gbps.reset();
  return result;
}

TEST(BusbwAtOneRank, TheReasonDependsOnTheCommunicatorRanksOnly) {
  ASSERT_NE(busbw_null_reason(1), nullptr);
  EXPECT_STREQ(busbw_null_reason(1), "1 rank: no link is crossed");
  EXPECT_EQ(busbw_null_reason(2), nullptr);
  EXPECT_EQ(busbw_null_reason(4), nullptr);  // one process with -g 4: four ranks cross NVLink/PCIe
}

TEST(BusbwAtOneRank, RecordHoldsNullWithTheReasonAndKeepsAlgbwAndTime) {
  const nlohmann::json record = case_record(one_rank(false), "", false);
  EXPECT_TRUE(record.at("busbw_gbps").is_null());
  EXPECT_EQ(record.at("busbw_reason"), "1 rank: no link is crossed");
  EXPECT_EQ(record.at("algbw_gbps"), 0.5);
  EXPECT_EQ(record.at("time_us").at("mean"), 20.0);
  const nlohmann::json four = case_record(all_reduce_8k(false, 16.384), "", false);
  EXPECT_EQ(four.at("busbw_gbps"), 0.75);
  EXPECT_FALSE(four.contains("busbw_reason"));
}

TEST(BusbwAtOneRank, CsvCellIsEmptyAndTheReasonHasItsColumn) {
  const std::string header = csv_header();
  const std::string row = csv_row(case_record(one_rank(false), "", false));
  auto cells = [](const std::string& text) {
    std::vector<std::string> out(1);
    for (char c : text) {
      if (c == ',') out.emplace_back(); else out.back() += c;
    }
    return out;
  };
  const std::vector<std::string> names = cells(header);
  const std::vector<std::string> values = cells(row);
  ASSERT_EQ(names.size(), values.size());
  const auto column = [&](const std::string& name) {
    const auto at = std::find(names.begin(), names.end(), name);
    EXPECT_NE(at, names.end()) << name;
    return values.at(static_cast<std::size_t>(at - names.begin()));
  };
  EXPECT_EQ(column("busbw_gbps"), "");
  EXPECT_EQ(column("busbw_reason"), "1 rank: no link is crossed");
  EXPECT_EQ(column("algbw_gbps"), "0.5");
  const std::vector<std::string> four = cells(csv_row(case_record(all_reduce_8k(false, 16.384), "", false)));
  EXPECT_EQ(four.back(), "");  // busbw_reason, the last column: empty where busbw exists
}

TEST(BusbwAtOneRank, ConsolePrintsADashAndTheReasonOnceForTheRun) {
  std::ostringstream out;
  {
    ConsoleTable table(out);
    table.add(one_rank(false));
    table.add(one_rank(true));
    table.add(one_rank(false, Collective::all_gather));
    table.add(one_rank(true, Collective::all_gather));
    table.finish();
  }
  const std::string text = out.str();
  const std::string note = "# busbw: - (1 rank: no link is crossed)\n";
  const auto first = text.find(note);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(note, first + 1), std::string::npos) << "printed once:\n" << text;
  EXPECT_EQ(text.find("Avg bus bandwidth"), std::string::npos) << "no average of no figure:\n" << text;
  std::istringstream lines(text);
  std::string line;
  int data_lines = 0;
  while (std::getline(lines, line)) {
    if (line.find("8192") == std::string::npos || line.rfind("#", 0) == 0) continue;
    ++data_lines;
    // time algbw busbw per half: 16.38 0.50 - for both halves.
    std::istringstream words(line);
    std::vector<std::string> word{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    ASSERT_EQ(word.size(), 17u) << line;
    EXPECT_EQ(word[5], "16.38") << line;
    EXPECT_EQ(word[6], "0.50") << line;
    EXPECT_EQ(word[7], "-") << line;
    EXPECT_EQ(word[12], "0.50") << line;
    EXPECT_EQ(word[13], "-") << line;
  }
  EXPECT_EQ(data_lines, 2) << text;
}

TEST(BusbwAtOneRank, ManyRanksPrintNoReason) {
  std::ostringstream out;
  {
    ConsoleTable table(out);
    table.add(all_reduce_8k(false, 16.384));
    table.finish();
  }
  EXPECT_EQ(out.str().find("busbw: -"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("Avg bus bandwidth    : 0.75"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace cclbench
