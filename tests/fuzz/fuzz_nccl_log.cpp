// libFuzzer target: the NCCL log parser behind nccl_evidence and the transport gate
// (parse_nccl_log_texts, then the JSON the tool writes). Input: bytes split at the first 0xFF byte
// into two "files" (a multi-rank log is several files). Accepted outcomes: a summary (possibly one
// that records the input as unusable) or a UsageError. A finding is another exception or a
// sanitizer report; dumping the summary also catches invalid UTF-8 leaking into the JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/evidence/nccl_evidence.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> files;
  const auto split = all.find('\xff');
  if (split == std::string::npos) {
    files.emplace_back("node5.100.log", all);
  } else {
    files.emplace_back("node5.100.log", all.substr(0, split));
    files.emplace_back("node7.200.log", all.substr(split + 1));
  }
  try {
    const cclbench::EvidenceSummary summary = cclbench::parse_nccl_log_texts(files);
    // Finding (2026-11-30): log text quoted into the summary keeps invalid UTF-8, and a strict
    // dump() throws json type_error 316, so nccl_evidence exits 5 on one corrupt byte in a log.
    // The fix (tests/fuzz/findings/apps_utf8.patch) dumps with the replace handler; dump the
    // same way here so that fuzzing goes on past it. Anything else thrown is still a finding.
    (void)cclbench::to_json(summary).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const cclbench::UsageError&) {
  }
  return 0;
}
