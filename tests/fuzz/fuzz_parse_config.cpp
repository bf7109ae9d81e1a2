// libFuzzer target: the whole coll_perf command line (parse_config), then the sweep and the case
// list it implies (sweep_sizes, make_cases), as main() uses them.
// Input: argv[0] selector byte, then arguments separated by '\n' (so that every flag/value split,
// including "--flag=value" and "-b8K", is reachable). Accepted outcomes: a Config, nullopt (--help)
// or a UsageError. Another exception, a sanitizer report, or a Config that breaks its own
// invariants (-b > -e, empty lists) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/runner.hpp"

namespace {

[[noreturn]] void finding() { std::abort(); }

constexpr const char* kPrograms[] = {"coll_perf", "all_reduce_perf", "alltoall_perf", "sendrecv_perf", "broadcast_perf"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // --help prints the help text; keep the fuzzer's output readable.
  std::cout.setstate(std::ios::badbit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 4096) return 0;
  std::vector<std::string> args;
  args.emplace_back(kPrograms[data[0] % (sizeof(kPrograms) / sizeof(kPrograms[0]))]);
  std::string current;
  for (std::size_t i = 1; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else if (c != '\0') {  // argv strings cannot hold NUL
      current.push_back(c);
    }
  }
  if (size > 1) args.push_back(current);
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);

  std::optional<cclbench::Config> config;
  try {
    config = cclbench::parse_config(static_cast<int>(args.size()), argv.data());
  } catch (const cclbench::UsageError&) {
    return 0;
  }
  if (!config) return 0;  // --help
  if (config->min_bytes > config->max_bytes) finding();
  if (config->collectives.empty() || config->dtypes.empty() || config->ops.empty()) finding();
  try {
    const std::vector<std::uint64_t> sizes = cclbench::sweep_sizes(*config);
    if (sizes.empty() || sizes.front() != config->min_bytes || sizes.back() > config->max_bytes) finding();
    for (std::size_t i = 1; i < sizes.size(); ++i) {
      if (sizes[i] <= sizes[i - 1]) finding();
    }
    for (int nranks : {1, 4, 16}) (void)cclbench::make_cases(*config, cclbench::standard_collectives(), nranks);
  } catch (const cclbench::UsageError&) {
  }
  return 0;
}
