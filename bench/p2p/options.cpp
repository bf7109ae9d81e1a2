#include "bench/p2p/options.hpp"

#include <algorithm>
#include <limits>

#include "bench/core/errors.hpp"
#include "bench/core/units.hpp"

namespace cclbench::p2p {
namespace {

std::pair<int, int> parse_pair(const std::string& text) {
  const auto comma = text.find(',');
  if (comma == std::string::npos) throw UsageError("--pair: expected two GPU indices 'S,D', got '" + text.substr(0, 40) + "'");
  const auto src = parse_integer(text.substr(0, comma), "--pair (source)", 0, 1023);
  const auto dst = parse_integer(text.substr(comma + 1), "--pair (destination)", 0, 1023);
  return {static_cast<int>(src), static_cast<int>(dst)};
}

}  // namespace

std::string help_text() {
  return
      "usage: p2p_matrix [options]\n"
      "Measures every GPU pair of this node (copy engine and SM copies, read/write, uni/bidirectional,\n"
      "P2P on and staged through the host, latency) and host<->device bandwidth with NUMA-local and\n"
      "remote pinned memory. Every copy is verified; GB = 1e9 bytes.\n"
      "  -t, --tests LIST      comma-separated test names, or 'all' (default); see --list\n"
      "      --list            print the test names and what they measure, then exit\n"
      "  -b, --minbytes SIZE   sweep start (K/M/G = powers of 1024); without -b/-e each test uses its\n"
      "                        default size (256M; 1G for device_local_copy_*)\n"
      "  -e, --maxbytes SIZE   sweep end (default: the -b value)\n"
      "  -f, --stepfactor N    sweep multiplier (default 2)\n"
      "  -n, --iters N         timed samples per measurement (default 5): median, min, max, CV\n"
      "  -w, --warmup N        untimed samples before them (default 2)\n"
      "      --pair S,D        only the pair S->D (and GPUs S and D for single-GPU tests)\n"
      "      --json FILE       write the JSON result (%h = host name)\n"
      "      --csv FILE        write the CSV result (%h = host name)\n"
      "      --out DIR         write DIR/<host>.json and DIR/<host>.csv\n"
      "      --chase-bytes SIZE   pointer-chase buffer (default 256M, larger than L2)\n"
      "      --chase-stride SIZE  distance between chase nodes (default 256, > a cache line)\n"
      "      --chase-loads N      dependent loads per latency sample (default 10000)\n"
      "      --latency-copies N   back-to-back copies per CE latency sample (default 100)\n"
      "      --sm-blocks N        blocks of the SM copy kernel (default: SMs x resident blocks)\n"
      "      --blocker-timeout S  seconds the start gate waits for the host (default 10)\n"
      "      --inject-corruption  flip one bit of every copy's destination before it is verified\n"
      "                        (proves the verifier: every copy measurement must come out 'failed')\n"
      "  -q, --quiet           no text matrices on stdout\n"
      "  --progress            report each measurement (test, pair, size) as it begins, with its\n"
      "                        deadline, on stderr ('cclbench-progress {json}' lines) for a runner\n"
      "  -h, --help            this help\n"
      "Under mpirun only local rank 0 of each host measures (use --out DIR or %h in file names).\n"
      "Exit status: 0 ok, 1 a measurement failed verification or errored, 2 bad input,\n"
      "7 nothing could be measured (e.g. no GPU).\n";
}

Options parse_options(int argc, const char* const argv[]) {
  Options options;
  options.tests = select_tests("all");
  for (int i = 0; i < argc; ++i) options.argv.emplace_back(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(flag + ": missing value");
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else if (flag == "--list") {
      options.list = true;
    } else if (flag == "--inject-corruption") {
      options.inject_corruption = true;
    } else if (flag == "-q" || flag == "--quiet") {
      options.quiet = true;
    } else if (flag == "--progress") {
      options.progress = true;
    } else if (flag == "-t" || flag == "--tests") {
      options.tests = select_tests(value());
    } else if (flag == "-b" || flag == "--minbytes") {
      options.min_bytes = parse_size(value(), "-b");
    } else if (flag == "-e" || flag == "--maxbytes") {
      options.max_bytes = parse_size(value(), "-e");
    } else if (flag == "-f" || flag == "--stepfactor") {
      options.step_factor = static_cast<std::uint64_t>(parse_integer(value(), "-f", 2, 1024));
    } else if (flag == "-n" || flag == "--iters") {
      options.repetitions = static_cast<int>(parse_integer(value(), "-n", 1, 100000));
    } else if (flag == "-w" || flag == "--warmup") {
      options.warmup = static_cast<int>(parse_integer(value(), "-w", 0, 100000));
    } else if (flag == "--pair") {
      options.pair = parse_pair(value());
    } else if (flag == "--json") {
      options.json_path = value();
      if (options.json_path.empty()) throw UsageError("--json: empty file name");
    } else if (flag == "--csv") {
      options.csv_path = value();
      if (options.csv_path.empty()) throw UsageError("--csv: empty file name");
    } else if (flag == "--out") {
      options.out_dir = value();
      if (options.out_dir.empty()) throw UsageError("--out: empty directory name");
    } else if (flag == "--chase-bytes") {
      options.chase_bytes = parse_size(value(), "--chase-bytes");
    } else if (flag == "--chase-stride") {
      options.chase_stride = parse_size(value(), "--chase-stride");
    } else if (flag == "--chase-loads") {
      options.chase_loads = static_cast<std::uint64_t>(parse_integer(value(), "--chase-loads", 1, 1'000'000'000));
    } else if (flag == "--latency-copies") {
      options.latency_copies = static_cast<int>(parse_integer(value(), "--latency-copies", 1, 1000));
    } else if (flag == "--sm-blocks") {
      options.sm_blocks = static_cast<int>(parse_integer(value(), "--sm-blocks", 1, 1 << 20));
    } else if (flag == "--blocker-timeout") {
      options.blocker_timeout_s = parse_number(value(), "--blocker-timeout", 0.001, 3600);
    } else {
      std::string shown = flag.substr(0, 40);
      for (char& c : shown) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
      }
      throw UsageError("unknown option '" + shown + "' (see --help)");
    }
  }
  // The slowdown test knob (environment, refused outside tests): read once, here, with the flags.
  if (!options.help && !options.list) options.slowdown = slowdown_injection_from_environment();
  if (options.min_bytes && options.max_bytes && *options.min_bytes > *options.max_bytes) {
    throw UsageError("-b " + format_size(*options.min_bytes) + " is larger than -e " + format_size(*options.max_bytes));
  }
  if ((options.min_bytes && *options.min_bytes == 0) || (options.max_bytes && *options.max_bytes == 0)) {
    throw UsageError("-b/-e: sizes must be at least 1 byte");
  }
  if (options.chase_stride < 8 || options.chase_stride % 8 != 0) {
    throw UsageError("--chase-stride: must be a multiple of 8 bytes, at least 8");
  }
  if (options.chase_bytes < 2 * options.chase_stride) {
    throw UsageError("--chase-bytes: must hold at least two nodes of --chase-stride bytes");
  }
  if (!options.out_dir.empty() && (!options.json_path.empty() || !options.csv_path.empty())) {
    throw UsageError("--out: cannot be combined with --json or --csv");
  }
  return options;
}

std::vector<std::uint64_t> sizes_for(const Options& options, const TestInfo& test) {
  if (test.metric == Metric::load_latency_ns) return {options.chase_bytes};
  if (test.metric == Metric::latency_us || (!options.min_bytes && !options.max_bytes)) return {test.default_bytes};
  // -e alone sweeps up from 8K (the low end of the decode-size range), or is one size when smaller.
  const std::uint64_t last = options.max_bytes ? *options.max_bytes : *options.min_bytes;
  const std::uint64_t first = options.min_bytes ? *options.min_bytes : std::min<std::uint64_t>(8ull << 10, last);
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t size = first; size <= last;) {
    sizes.push_back(size);
    if (size > std::numeric_limits<std::uint64_t>::max() / options.step_factor) break;
    size *= options.step_factor;
  }
  return sizes;
}

std::string expand_host(const std::string& path, const std::string& host) {
  std::string expanded;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'h') {
      expanded += host;
      ++i;
    } else {
      expanded += path[i];
    }
  }
  return expanded;
}

}  // namespace cclbench::p2p
