#pragma once
// coll_perf's outputs, written by rank 0 as results come.
#include <cstddef>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/case.hpp"
#include "bench/core/config.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/reporters.hpp"
#include "bench/evidence/rails.hpp"

namespace cclbench {

// Rank 0 writes: the console table, JSONL (one record appended per case), and -J/--csv rewritten
// atomically after every case, so whatever happens next, every finished case is on disk.
class ResultSink {
 public:
  ResultSink(const Config& config, std::string program, bool writer, nlohmann::json manifest)
      : config_(config), program_(std::move(program)), writer_(writer), manifest_(std::move(manifest)), table_(std::cout),
        samples_reference_(samples_reference(config)) {}

  void add(const CaseResult& result, bool emulated) {
    if (!writer_) return;
    nlohmann::json record = case_record(result, config_.point, emulated);
    if (!config_.quiet) table_.add(result);
    if (!config_.samples_path.empty()) {
      const nlohmann::json line = {{"schema_version", kResultsSchemaVersion}, {"case_id", record["case_id"]},
                                   {"point", record["point"]}, {"samples_us", result.samples_us}};
      append_line_durable(config_.samples_path, line.dump());
      record["samples_file"] = samples_reference_;
    }
    if (!config_.jsonl_path.empty()) append_line_durable(config_.jsonl_path, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    records_.push_back(std::move(record));
    // -N: -J and --csv are rewritten once per cycle (JSONL still gets every record as it comes),
    // so a long soak does not rewrite a growing file after every case.
    if (config_.run_cycles == 1) flush("running");
  }

  void end_cycle() {
    if (writer_ && config_.run_cycles != 1) flush("running");
  }

  void set_section(const std::string& key, nlohmann::json value) { sections_[key] = std::move(value); }

  void finish(const std::string& status) {
    if (!writer_) return;
    if (!config_.quiet) table_.finish();
    flush(status);
  }

  bool any_failed() const {
    for (const auto& record : records_) {
      const auto& status = record.at("status");
      if (status == "failed" || status == "error") return true;
    }
    return false;
  }
  std::size_t count() const { return records_.size(); }
  // Every case skipped (none ok, none failed): the reason of the first, for the exit-7 message; empty
  // when something was measured.
  std::string nothing_measured_reason() const {
    if (records_.empty()) return "";
    for (const auto& record : records_) {
      if (record.at("status") != "skipped") return "";
    }
    const auto& reason = records_.front().at("reason");
    return "every case was skipped (" + std::to_string(records_.size()) + " case(s); first: " +
           (reason.is_string() ? reason.get<std::string>() : std::string("no reason recorded")) + ")";
  }

 private:
  void flush(const std::string& status) {
    if (!config_.json_path.empty()) {
      nlohmann::json document = {{"schema_version", kResultsSchemaVersion},
                                 {"program", program_},
                                 {"status", status},
                                 {"manifest", manifest_},
                                 {"notes", document_notes()}};
      for (const auto& [key, value] : sections_.items()) document[key] = value;
      write_file_atomic(config_.json_path, lean_document_text(document, records_));
    }
    if (!config_.csv_path.empty()) {
      std::string csv = csv_header() + "\n";
      for (const auto& record : records_) csv += csv_row(record) + "\n";
      write_file_atomic(config_.csv_path, csv);
    }
  }

  // How records name the --samples file: its file name when it sits next to every record file (-J,
  // --jsonl), so that readers find it relative to the record; else the path as given.
  static std::string samples_reference(const Config& config) {
    const std::string& path = config.samples_path;
    if (path.empty()) return path;
    const auto folder = [](const std::string& file) {
      const auto slash = file.find_last_of('/');
      return slash == std::string::npos ? std::string(".") : file.substr(0, slash);
    };
    for (const std::string* output : {&config.json_path, &config.jsonl_path}) {
      if (!output->empty() && folder(*output) != folder(path)) return path;
    }
    if (config.json_path.empty() && config.jsonl_path.empty()) return path;
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }

  // Text that is the same for every case, once per document.
  nlohmann::json document_notes() const {
    return {{"rails", std::string(kRailCounterNote) + "; read under " + config_.sysfs_root +
                          " by the node-local rank 0 before fill and after checking, "
                      "so warm-up and checked runs are included; interfaces that moved no bytes are counted "
                      "(netdevs_zero_omitted), not listed, unless --all-netdevs"},
            {"samples", config_.samples_path.empty()
                            ? nlohmann::json("per-iteration samples not written (coll_perf --samples FILE writes them)")
                            : nlohmann::json("per-iteration samples of each case: the JSONL file in its samples_file")}};
  }

  // The document pretty-printed except for the cases, one compact record per line: readable, and
  // about half the bytes of an indented dump.
  static std::string lean_document_text(const nlohmann::json& document, const std::vector<nlohmann::json>& records) {
    constexpr auto replace = nlohmann::json::error_handler_t::replace;
    std::string text = document.dump(2, ' ', false, replace);
    text.erase(text.find_last_of('}'));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    text += ",\n  \"cases\": [";
    for (std::size_t i = 0; i < records.size(); ++i) text += (i ? ",\n    " : "\n    ") + records[i].dump(-1, ' ', false, replace);
    text += records.empty() ? "]\n}\n" : "\n  ]\n}\n";
    return text;
  }

  const Config& config_;
  std::string program_;
  bool writer_;
  nlohmann::json manifest_;
  nlohmann::json sections_ = nlohmann::json::object();
  ConsoleTable table_;
  std::string samples_reference_;
  std::vector<nlohmann::json> records_;
};

}  // namespace cclbench
