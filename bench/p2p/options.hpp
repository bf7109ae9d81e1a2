#pragma once
// p2p_matrix's command line, parsed once into an immutable Options.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/core/slowdown_injection.hpp"
#include "bench/p2p/test_registry.hpp"

namespace cclbench::p2p {

struct Options {
  std::vector<TestId> tests;                  // -t (default: all), registry order
  std::optional<std::uint64_t> min_bytes;     // -b
  std::optional<std::uint64_t> max_bytes;     // -e
  std::uint64_t step_factor = 2;              // -f
  int repetitions = 5;                        // -n: timed samples per measurement
  int warmup = 2;                             // -w: untimed (but verified) samples before them
  std::optional<std::pair<int, int>> pair;    // --pair S,D
  std::string json_path;                      // --json (%h -> host name)
  std::string csv_path;                       // --csv  (%h -> host name)
  std::string out_dir;                        // --out DIR: DIR/<host>.json and DIR/<host>.csv
  std::uint64_t chase_bytes = 256ull << 20;   // --chase-bytes
  std::uint64_t chase_stride = 256;           // --chase-stride
  std::uint64_t chase_loads = 10000;          // --chase-loads per sample
  int latency_copies = 100;                   // --latency-copies per sample
  int sm_blocks = 0;                          // --sm-blocks (0: SMs x resident blocks per SM)
  double blocker_timeout_s = 10;              // --blocker-timeout
  bool inject_corruption = false;             // --inject-corruption (tests the verifier)
  std::optional<SlowdownInjection> slowdown;  // CCLBENCH_INJECT_SLOWDOWN (test knob, tests only)
  bool quiet = false;                         // -q: no text matrices on stdout
  bool progress = false;                      // --progress: each measurement begun, on stderr, for a runner
  bool list = false;                          // --list
  bool help = false;                          // -h/--help
  std::vector<std::string> argv;              // as given, recorded in the JSON
};

// Throws UsageError with one line naming the flag for anything invalid.
Options parse_options(int argc, const char* const argv[]);

std::string help_text();

// The copy sizes of one test: the -b..-e sweep when given (multiplying by -f), else the test's
// default (latency tests ignore the sweep: 4-byte copies, --chase-bytes chain).
std::vector<std::uint64_t> sizes_for(const Options& options, const TestInfo& test);

// Replaces every "%h" in `path` by `host`.
std::string expand_host(const std::string& path, const std::string& host);

}  // namespace cclbench::p2p
