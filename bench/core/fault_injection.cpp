#include "bench/core/fault_injection.hpp"

#include <cstdlib>

#include "bench/core/errors.hpp"
#include "bench/core/pattern.hpp"
#include "bench/core/units.hpp"

namespace cclbench {
namespace {

constexpr std::int64_t kMaxFlips = 1 << 20;

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw UsageError(std::string(kFaultInjectionVariable) + "='" + text + "': " + why +
                   " (expected count=N[,rank=R][,gpu=G][,collective=NAME][,case=CASE_ID])");
}

// Whether element `index` of `comm_rank`'s receive region is compared by the check.
bool compared(const CaseSpec& spec, int comm_rank, std::uint64_t index) {
  Source source{};
  return pattern_source(spec.collective, comm_rank, spec.nranks, spec.root, spec.counts.param_count, index, &source);
}

}  // namespace

FaultInjection parse_fault_injection(std::string_view text) {
  FaultInjection injection;
  injection.text = std::string(text);
  bool have_count = false;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) bad(injection.text, "'" + std::string(item) + "' is not key=value");
    const std::string key(item.substr(0, equals));
    const std::string value(item.substr(equals + 1));
    try {
      if (key == "count") {
        injection.count = parse_integer(value, "count", 1, kMaxFlips);
        have_count = true;
      } else if (key == "rank") {
        injection.rank = static_cast<int>(parse_integer(value, "rank", 0, 1 << 20));
      } else if (key == "gpu") {
        injection.gpu = static_cast<int>(parse_integer(value, "gpu", 0, 1 << 10));
      } else if (key == "collective") {
        injection.collective = parse_collective(value);
        if (!injection.collective) bad(injection.text, "unknown collective '" + value + "'");
      } else if (key == "case") {
        if (value.empty()) bad(injection.text, "case is empty");
        injection.case_id = value;
      } else {
        bad(injection.text, "unknown key '" + key + "'");
      }
    } catch (const UsageError& error) {
      const std::string message = error.what();
      if (message.starts_with(kFaultInjectionVariable)) throw;
      bad(injection.text, message);
    }
  }
  if (!have_count) bad(injection.text, "count is required");
  return injection;
}

std::optional<FaultInjection> fault_injection_from_environment() {
  const char* value = std::getenv(kFaultInjectionVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return parse_fault_injection(value);
}

bool fault_applies(const FaultInjection& injection, const CaseSpec& spec, int world_rank, int local_gpu) {
  if (world_rank != injection.rank || local_gpu != injection.gpu) return false;
  if (injection.collective && *injection.collective != spec.collective) return false;
  return injection.case_id.empty() || injection.case_id == spec.case_id();
}

std::vector<std::uint64_t> fault_indices(const FaultInjection& injection, const CaseSpec& spec, int comm_rank) {
  const std::uint64_t total = spec.counts.recv_count;
  if (total == 0 || injection.count <= 0 || !compared(spec, comm_rank, 0)) return {};
  // Every collective compares either all of a rank's receive range or none of it (pattern_source
  // depends on the index only through arithmetic), so the compared elements are 0..total-1.
  const auto wanted = static_cast<std::uint64_t>(injection.count);
  const std::uint64_t flips = wanted < total ? wanted : total;
  std::vector<std::uint64_t> indices;
  indices.reserve(flips);
  // k * total / flips: strictly increasing for flips <= total, so distinct; spread over every
  // block of gathered/scattered layouts. No overflow: k < 2^20 and total (elements of one buffer)
  // is far below 2^44.
  for (std::uint64_t k = 0; k < flips; ++k) indices.push_back(k * total / flips);
  return indices;
}

void flip_element(unsigned char* element, std::size_t element_size) {
  if (element_size == 0) return;
  element[element_size - 1] ^= 0x40;  // little-endian: the last byte holds the sign and top exponent bits
}

void check_fault_injection_target(const FaultInjection& injection, int world_size, int gpus_per_process) {
  if (injection.rank >= world_size) {
    throw UsageError(std::string(kFaultInjectionVariable) + ": rank " + std::to_string(injection.rank) +
                     " is not an MPI rank of this launch (" + std::to_string(world_size) + " rank(s))");
  }
  if (injection.gpu >= gpus_per_process) {
    throw UsageError(std::string(kFaultInjectionVariable) + ": gpu " + std::to_string(injection.gpu) +
                     " is not a GPU index of a process here (" + std::to_string(gpus_per_process) +
                     " per process; the MPI backend has only 0)");
  }
}

std::string fault_injection_warning(const FaultInjection& injection) {
  return std::string("warning: ") + kFaultInjectionVariable + "='" + injection.text + "' is set: rank " +
         std::to_string(injection.rank) + " GPU " + std::to_string(injection.gpu) + " flips " +
         std::to_string(injection.count) + " received element(s) per checked run" +
         (injection.collective ? " of " + std::string(name_of(*injection.collective)) : std::string()) +
         (injection.case_id.empty() ? std::string() : " in case " + injection.case_id) +
         ": those cases fail on purpose (a test of the verification)";
}

std::string fault_injection_help() {
  const char* value = std::getenv(kFaultInjectionVariable);
  if (value == nullptr || *value == '\0') return {};
  return std::string("\nTest hook (set now: ") + kFaultInjectionVariable + "='" + value + "'):\n" +
         "  " + kFaultInjectionVariable + "=count=N[,rank=R][,gpu=G][,collective=NAME][,case=CASE_ID]\n" +
         "                            after each checked run, flip N distinct received elements on MPI rank R\n" +
         "                            (its GPU G with -g N) before the comparison: those cases must report\n" +
         "                            wrong = N, status failed, exit status 1. Recorded in the manifest.\n";
}

}  // namespace cclbench
