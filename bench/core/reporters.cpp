#include "bench/core/reporters.hpp"

#include <cstdio>
#include <sstream>

namespace cclbench {
namespace {

std::string fixed(const std::optional<double>& value, int precision, int width) {
  char buffer[64];
  if (!value) {
    std::snprintf(buffer, sizeof(buffer), "%*s", width, "-");
  } else {
    std::snprintf(buffer, sizeof(buffer), "%*.*f", width, precision, *value);
  }
  return buffer;
}

std::optional<double> time_field(const CaseResult& result, double TimeStats::*field) {
  if (!result.time_us) return std::nullopt;
  return (*result.time_us).*field;
}

std::string half(const CaseResult* result) {
  // As wide as a printed half (" " + 9 + " " + 7 + " " + 7 + " " + 6 + " " + 9 + " " + 9), so an
  // in-place-only line keeps its values under the in-place header.
  if (result == nullptr) return std::string(53, ' ');
  std::string wrong = "-";
  if (result->wrong) wrong = std::to_string(*result->wrong);
  if (result->status == CaseStatus::skipped) wrong = "skip";
  if (result->status == CaseStatus::error) wrong = "err";
  char buffer[160];
  const double time_precision = 2;
  std::snprintf(buffer, sizeof(buffer), " %s %s %s %6s %s %s",
                fixed(bandwidth_time_us(*result), time_precision, 9).c_str(),
                fixed(result->algbw_gbps, 2, 7).c_str(), fixed(result->busbw_gbps, 2, 7).c_str(), wrong.c_str(),
                fixed(time_field(*result, &TimeStats::p50), time_precision, 9).c_str(),
                fixed(time_field(*result, &TimeStats::p99), time_precision, 9).c_str());
  return buffer;
}

std::string group_of(const CaseResult& result) {
  return std::string(name_of(result.spec.collective)) + "/" + std::string(name_of(result.spec.dtype)) + "/" +
         std::string(name_of(result.spec.op)) + "/" + std::to_string(result.spec.requested_bytes);
}

std::string csv_field(const nlohmann::json& value) {
  if (value.is_null()) return "";
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\n") != std::string::npos) {
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"') quoted += '"';
      quoted += c == '\n' ? ' ' : c;
    }
    return quoted + "\"";
  }
  return text;
}

}  // namespace

namespace {

constexpr const char* kRailNodeArrays[] = {"flags", "ib_ports", "netdevs", "netdev_rails"};

// per_rank at one rank says nothing that time_us and iterations do not: the one rank's mean is
// time_us.mean and it is the slowest in every iteration (null when the case was not timed).
nlohmann::json one_rank_per_rank(const nlohmann::json& record) {
  const auto time = record.find("time_us");
  if (time == record.end() || !time->is_object() || !record.contains("iterations")) return nullptr;
  return {{"mean_us", nlohmann::json::array({time->at("mean")})},
          {"slowest_iterations", nlohmann::json::array({record.at("iterations")})}};
}

bool one_rank(const nlohmann::json& record) {
  const auto nranks = record.find("nranks");
  return nranks != record.end() && *nranks == 1;
}

// Leaves out what holds its default (schema 1.3); with_record_defaults() is the inverse.
void leave_out_defaults(nlohmann::json& record) {
  for (const auto& [key, value] : record_defaults().items()) {
    const auto found = record.find(key);
    if (found != record.end() && *found == value) record.erase(found);
  }
  if (one_rank(record) && record.contains("per_rank") && record["per_rank"] == one_rank_per_rank(record)) {
    record.erase("per_rank");
  }
  const auto evidence = record.find("evidence");
  if (evidence == record.end() || !evidence->is_object() || !evidence->contains("rails")) return;
  nlohmann::json& rails = (*evidence)["rails"];
  if (!rails.is_object()) return;
  if (rails.contains("flags") && rails["flags"] == nlohmann::json::array()) rails.erase("flags");
  if (!rails.contains("nodes") || !rails["nodes"].is_array()) return;
  for (auto& node : rails["nodes"]) {
    for (const char* key : kRailNodeArrays) {
      if (node.is_object() && node.contains(key) && node[key] == nlohmann::json::array()) node.erase(key);
    }
  }
}

}  // namespace

const nlohmann::json& record_defaults() {
  static const nlohmann::json defaults = {
      {"root", nullptr},        {"emulated", false},       {"check_iterations", 1}, {"graph_launches", 0},
      {"ops_per_launch", 1},    {"registration", "none"},  {"unalign_elements", 0}, {"cta_policy", nullptr},
      {"cycle", 0}};
  return defaults;
}

nlohmann::json with_record_defaults(const nlohmann::json& record) {
  nlohmann::json full = record;
  for (const auto& [key, value] : record_defaults().items()) {
    if (!full.contains(key)) full[key] = value;
  }
  if (one_rank(full) && !full.contains("per_rank")) full["per_rank"] = one_rank_per_rank(full);
  const auto evidence = full.find("evidence");
  if (evidence == full.end() || !evidence->is_object() || !evidence->contains("rails")) return full;
  nlohmann::json& rails = (*evidence)["rails"];
  if (!rails.is_object()) return full;
  if (!rails.contains("flags")) rails["flags"] = nlohmann::json::array();
  if (!rails.contains("nodes") || !rails["nodes"].is_array()) return full;
  for (auto& node : rails["nodes"]) {
    for (const char* key : kRailNodeArrays) {
      if (node.is_object() && !node.contains(key)) node[key] = nlohmann::json::array();
    }
  }
  return full;
}

nlohmann::json case_record(const CaseResult& result, const std::string& point, bool emulated) {
  nlohmann::json record = to_json(result);
  record["schema_version"] = kResultsSchemaVersion;
  record["point"] = point.empty() ? nlohmann::json(nullptr) : nlohmann::json(point);
  record["emulated"] = emulated;
  leave_out_defaults(record);
  return record;
}

void ConsoleTable::print_header(const CaseResult& first) {
  out_ << "#\n# " << first.spec.collective_descriptor().display_name << ", " << first.spec.nranks << " ranks, backend "
       << first.backend << ", " << first.iterations << " iterations, " << first.warmup << " warm-up\n";
  if (first.mode.graph_launches > 0) {
    out_ << "# CUDA graph: the -n iterations captured once (collectives only), replayed " << first.mode.graph_launches
         << " times; p50/p99 from a separate replay with event nodes around each iteration\n";
  }
  if (first.emulated) {
    out_ << "# EMULATED: ranks share GPUs (--share-gpu): correctness only; times and bandwidths are not performance figures\n";
  }
  if (const char* why = busbw_null_reason(first.spec.nranks); why != nullptr && !busbw_reason_printed_) {
    out_ << "# busbw: - (" << why << ")\n";
    busbw_reason_printed_ = true;
  }
  out_
       << "# time: the time algbw/busbw come from, in us: gated_time_us (all iterations back to back on the GPU, one event\n"
       << "#   pair around them) where the backend has it, else the mean per-iteration time; each iteration ends with the\n"
       << "#   slowest rank. p50/p99: per-iteration times (each between its own event pair)\n"
       << "#                                                    out-of-place                                           in-place\n"
       << "#       size         count      type   redop    root      time   algbw   busbw #wrong       p50       p99      time   algbw   busbw #wrong       p50       p99\n"
       << "#        (B)    (elements)                                (us)  (GB/s)  (GB/s)              (us)      (us)      (us)  (GB/s)  (GB/s)              (us)      (us)\n";
}

void ConsoleTable::print_line(const CaseResult* out_of_place, const CaseResult* in_place) {
  const CaseResult& any = out_of_place ? *out_of_place : *in_place;
  const std::string root = any.spec.collective_descriptor().rooted ? std::to_string(any.spec.root) : "-1";
  char prefix[128];
  std::snprintf(prefix, sizeof(prefix), "%12llu  %12llu  %8s  %6s  %6s", static_cast<unsigned long long>(any.spec.counts.size_bytes()),
                static_cast<unsigned long long>(any.spec.counts.param_count), std::string(name_of(any.spec.dtype)).c_str(),
                std::string(name_of(any.spec.op)).c_str(), root.c_str());
  out_ << prefix << half(out_of_place) << half(in_place) << "\n";
  for (const CaseResult* result : {out_of_place, in_place}) {
    if (result && result->emulated) emulated_ = true;
    if (result && result->busbw_gbps) {
      busbw_sum_ += *result->busbw_gbps;
      ++busbw_count_;
    }
  }
  out_.flush();
}

void ConsoleTable::add(const CaseResult& result) {
  // One header per collective; one line per (dtype, op, size) with the out-of-place half first.
  const std::string table = std::string(name_of(result.spec.collective));
  if (table != current_table_) {
    finish();
    print_header(result);
    current_table_ = table;
  }
  if (!result.spec.in_place) {
    if (pending_) print_line(&*pending_, nullptr);
    pending_ = result;
    return;
  }
  if (pending_ && group_of(*pending_) == group_of(result)) {
    print_line(&*pending_, &result);
  } else {
    if (pending_) print_line(&*pending_, nullptr);
    print_line(nullptr, &result);
  }
  pending_.reset();
}

void ConsoleTable::finish() {
  if (pending_) print_line(&*pending_, nullptr);
  pending_.reset();
  if (busbw_count_ > 0) {
    char line[160];
    std::snprintf(line, sizeof(line), "# Avg bus bandwidth    : %g%s\n#\n", busbw_sum_ / busbw_count_,
                  emulated_ ? " (emulated: not a performance figure)" : "");
    out_ << line;
  }
  busbw_sum_ = 0;
  busbw_count_ = 0;
  emulated_ = false;
}

std::string csv_header() {
  return "point,case_id,collective,backend,nranks,dtype,op,root,in_place,bytes,count,requested_bytes,iterations,warmup,"
         "time_us_mean,time_us_min,time_us_p50,time_us_p95,time_us_p99,time_us_max,time_us_cv_pct,batch_time_us,"
         "algbw_gbps,busbw_gbps,wrong,status,reason,emulated,gated_time_us,bandwidth_from,samples_from,graph_launches,"
         "ops_per_launch,registration,unalign_elements,cta_policy,cycle,busbw_reason";
}

std::string csv_row(const nlohmann::json& lean_record) {
  // Every column is filled: a field the record leaves out at its default (schema 1.3) is that default.
  const nlohmann::json record = with_record_defaults(lean_record);
  std::ostringstream row;
  const nlohmann::json null_json = nullptr;
  const auto& time = record.at("time_us");
  auto timing = [&](const char* key) { return time.is_null() ? null_json : time.at(key); };
  const nlohmann::json fields[] = {record.at("point"),        record.at("case_id"),   record.at("collective"),
                                   record.at("backend"),      record.at("nranks"),    record.at("dtype"),
                                   record.at("op"),           record.at("root"),      record.at("in_place"),
                                   record.at("bytes"),        record.at("count"),     record.at("requested_bytes"),
                                   record.at("iterations"),   record.at("warmup"),    timing("mean"),
                                   timing("min"),             timing("p50"),          timing("p95"),
                                   timing("p99"),             timing("max"),          timing("cv_pct"),
                                   record.at("batch_time_us"), record.at("algbw_gbps"), record.at("busbw_gbps"),
                                   record.at("wrong"),        record.at("status"),    record.at("reason"),
                                   record.at("emulated"),     record.value("gated_time_us", null_json),
                                   record.value("bandwidth_from", null_json), record.value("samples_from", null_json),
                                   record.at("graph_launches"), record.at("ops_per_launch"),
                                   record.at("registration"),  record.at("unalign_elements"),
                                   record.at("cta_policy"),    record.at("cycle"),
                                   record.value("busbw_reason", null_json)};
  bool first = true;
  for (const auto& field : fields) {
    if (!first) row << ',';
    row << csv_field(field);
    first = false;
  }
  return row.str();
}

}  // namespace cclbench
