#include "bench/evidence/tuning_probe.hpp"

#include <optional>

namespace cclbench {

// NCCL_DEBUG_FILE expansion as NCCL's debug.cc does it: %h host, %p pid, %% a percent sign, any
// other %x kept as is.
std::string expand_nccl_debug_file(const std::string& pattern, const std::string& host, long pid) {
  std::string path;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 >= pattern.size()) {
      path += pattern[i];
      continue;
    }
    const char code = pattern[++i];
    if (code == 'h') path += host;
    else if (code == 'p') path += std::to_string(pid);
    else if (code == '%') path += '%';
    else { path += '%'; path += code; }
  }
  return path;
}

// NCCL's name of a collective in COLL/TUNING lines; "" for those NCCL runs as grouped send/recv
// (no algorithm choice is logged for them).
std::string nccl_collective_name(Collective collective) {
  switch (collective) {
    case Collective::all_reduce: return "AllReduce";
    case Collective::all_gather: return "AllGather";
    case Collective::reduce_scatter: return "ReduceScatter";
    case Collective::broadcast: return "Broadcast";
    case Collective::reduce: return "Reduce";
    default: return "";
  }
}

// Matches the TUNING choices of rank 0's log to the probe's cases, in order: the next choice of the
// same collective whose count (or byte count) equals the case's, else the next of the same
// collective (marked "matched_by": "order").
nlohmann::json match_tuning(const std::vector<CaseSpec>& cases, const std::vector<bool>& ran,
                            const std::vector<TuningChoice>& choices) {
  nlohmann::json entries = nlohmann::json::array();
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CaseSpec& spec = cases[i];
    nlohmann::json entry = {{"case_id", spec.case_id()}, {"collective", std::string(name_of(spec.collective))},
                            {"bytes", spec.counts.size_bytes()}, {"tuning", nullptr}};
    const std::string name = nccl_collective_name(spec.collective);
    if (!ran[i]) {
      entry["reason"] = "case not run by the probe (unsupported here)";
    } else if (name.empty()) {
      entry["reason"] = "NCCL runs " + std::string(name_of(spec.collective)) + " as grouped send/recv: no algorithm choice is logged";
    } else {
      const std::uint64_t count = spec.counts.param_count;
      const std::uint64_t bytes = count * spec.counts.element_size;
      std::optional<std::size_t> exact;
      std::optional<std::size_t> by_order;
      for (std::size_t j = cursor; j < choices.size(); ++j) {
        if (choices[j].collective != name) continue;
        if (!by_order) by_order = j;
        const bool same = choices[j].count ? *choices[j].count == count : (choices[j].bytes && *choices[j].bytes == bytes);
        if (same) { exact = j; break; }
      }
      const std::optional<std::size_t> chosen = exact ? exact : by_order;
      if (!chosen) {
        entry["reason"] = "no TUNING line for " + name + " in rank 0's NCCL log (NCCL_DEBUG_SUBSYS without TUNING, or NCCL printed none)";
      } else {
        nlohmann::json tuning = to_json(choices[*chosen]);
        tuning["matched_by"] = exact ? "size" : "order";
        entry["tuning"] = tuning;
        cursor = *chosen + 1;
      }
    }
    entries.push_back(entry);
  }
  return entries;
}

}  // namespace cclbench
