#include "bench/core/config.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string_view>
#include <utility>
#include <cctype>

#include <nlohmann/json.hpp>

#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/units.hpp"

namespace cclbench {
namespace {

// Every flag of nccl-tests 2.19 (src/common.cu's getopt table) and what coll_perf does with it.
// Refused flags are rejected by name with the reason, never ignored; accepted no-ops take
// nccl-tests' value (0/1) and change nothing, for the reason given.
const std::vector<NcclTestsFlag> kNcclTestsFlags = {
    {"-t", "--nthreads", FlagHandling::refused, "one thread per process; use -g N or one MPI rank per GPU"},
    {"-g", "--ngpus", FlagHandling::implemented, ""},
    {"-b", "--minbytes", FlagHandling::implemented, ""},
    {"-e", "--maxbytes", FlagHandling::implemented, ""},
    {"-i", "--stepbytes", FlagHandling::implemented, ""},
    {"-f", "--stepfactor", FlagHandling::implemented, ""},
    {"-n", "--iters", FlagHandling::implemented, ""},
    {"-m", "--agg_iters", FlagHandling::implemented, ""},
    {"-w", "--warmup_iters", FlagHandling::implemented, ""},
    {"-N", "--run_cycles", FlagHandling::implemented, ""},
    {"-p", "--parallel_init", FlagHandling::refused, "communicators are always initialised in one group"},
    {"-c", "--check", FlagHandling::implemented, ""},
    {"-o", "--op", FlagHandling::implemented, ""},
    {"-d", "--datatype", FlagHandling::implemented, ""},
    {"-r", "--root", FlagHandling::implemented, ""},
    {"-z", "--blocking", FlagHandling::implemented, ""},
    {"-y", "--stream_null", FlagHandling::refused, "the default stream is never used"},
    {"-T", "--timeout", FlagHandling::implemented, ""},
    {"-G", "--cudagraph", FlagHandling::implemented, ""},
    {"-C", "--report_cputime", FlagHandling::accepted_no_op,
     "the host-clock batch time (launches + completion) is always recorded as batch_time_us; the launch-only CPU time is not reported"},
    {"-S", "--report_timestamps", FlagHandling::accepted_no_op,
     "the run manifest carries the start time and JSONL records are appended as each case completes"},
    {"-J", "--output_file", FlagHandling::implemented, ""},
    {"-a", "--average", FlagHandling::implemented, ""},
    {"-R", "--local_register", FlagHandling::implemented, ""},
    {"-x", "--cta_policy", FlagHandling::implemented, ""},
    {"-D", "--device_implementation", FlagHandling::refused, "NCCL device-API kernels are not measured by cclbench"},
    {"-V", "--device_cta_count", FlagHandling::refused, "only meaningful with -D, which is not supported"},
    {"-M", "--memory", FlagHandling::accepted_no_op,
     "device buffers are sized once (2 x the largest message) and a shrink to fit is reported at start"},
    {"-u", "--unalign", FlagHandling::implemented, ""},
    {"-I", "--per_iter_timing", FlagHandling::accepted_no_op,
     "per-iteration times are always measured (time_us percentiles, samples_us)"},
    {"-K", "--per_iter_skip", FlagHandling::refused, "warm-up (-w) is separate from timed iterations"},
    {"-h", "--help", FlagHandling::implemented, ""},
};

const NcclTestsFlag* find_nccl_tests_flag(const std::string& flag) {
  for (const NcclTestsFlag& entry : kNcclTestsFlags) {
    if (flag == entry.short_name || flag == entry.long_name) return &entry;
  }
  return nullptr;
}

template <typename T, typename Parse>
std::vector<T> parse_list(const std::string& text, const char* flag, Parse parse, const std::vector<T>& all_values,
                          const std::string& accepted) {
  std::vector<T> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item == "all") {
      values.insert(values.end(), all_values.begin(), all_values.end());
      continue;
    }
    const auto value = parse(item);
    if (!value) throw UsageError(std::string(flag) + ": unknown value '" + item + "' (accepted: " + accepted + ", all)");
    values.push_back(*value);
  }
  if (values.empty() || text.back() == ',') {
    throw UsageError(std::string(flag) + ": empty list (accepted: " + accepted + ", all)");
  }
  return values;
}

template <typename T>
std::string joined_names(const std::vector<T>& values) {
  std::string out;
  for (const auto& value : values) {
    if (!out.empty()) out += ", ";
    out += name_of(value);
  }
  return out;
}

// Splits "--flag=value" and finds the value of a flag that takes one.
class ArgCursor {
 public:
  ArgCursor(int argc, const char* const argv[]) : argc_(argc), argv_(argv) {}
  bool done() const { return index_ >= argc_; }
  std::string next_flag() {
    std::string arg = argv_[index_++];
    inline_value_.reset();
    if (arg.rfind("--", 0) == 0) {
      const auto equals = arg.find('=');
      if (equals != std::string::npos) {
        inline_value_ = arg.substr(equals + 1);
        arg = arg.substr(0, equals);
      }
    } else if (arg.size() > 2 && arg[0] == '-' && arg[1] != '-') {
      inline_value_ = arg.substr(2);  // -b8K, as getopt allows
      arg = arg.substr(0, 2);
    }
    return arg;
  }
  std::string value(const std::string& flag) {
    if (inline_value_) return *std::exchange(inline_value_, std::nullopt);
    if (index_ >= argc_) throw UsageError(flag + ": missing value");
    return argv_[index_++];
  }
  bool has_inline_value() const { return inline_value_.has_value(); }

 private:
  int argc_;
  const char* const* argv_;
  int index_ = 1;
  std::optional<std::string> inline_value_;
};

}  // namespace

std::optional<Collective> collective_of_program(const std::string& program_name) {
  const auto slash = program_name.find_last_of('/');
  const std::string base = slash == std::string::npos ? program_name : program_name.substr(slash + 1);
  if (base == "all_reduce_perf") return Collective::all_reduce;
  if (base == "all_gather_perf") return Collective::all_gather;
  if (base == "reduce_scatter_perf") return Collective::reduce_scatter;
  if (base == "alltoall_perf") return Collective::alltoall;
  if (base == "broadcast_perf") return Collective::broadcast;
  if (base == "reduce_perf") return Collective::reduce;
  if (base == "sendrecv_perf") return Collective::sendrecv;
  return std::nullopt;
}

std::string help_text(const std::string& program_name) {
  std::ostringstream out;
  out << "usage: " << program_name << " [flags]\n"
      << "\n"
      << "Measures NCCL (GPU) or MPI (host memory) collectives over a size sweep, checks every result\n"
      << "exactly, and reports nccl-tests-compatible times and bandwidths with percentiles.\n"
      << "\n"
      << "nccl-tests flags (same meaning as nccl-tests 2.19):\n"
      << "  -b, --minbytes SIZE       smallest size (K/M/G = powers of 1024)            [32M]\n"
      << "  -e, --maxbytes SIZE       largest size                                      [32M]\n"
      << "  -f, --stepfactor F        multiply the size by F each step (> 1)            [off]\n"
      << "  -i, --stepbytes SIZE      add SIZE each step when no -f is given            [1M]\n"
      << "  -n, --iters N             timed iterations per case                         [20]\n"
      << "  -w, --warmup_iters N      untimed warm-up iterations per case               [1]\n"
      << "  -c, --check N             checked runs per case (0 = no checking)           [1]\n"
      << "  -o, --op OP[,OP]          sum, prod, max, min, avg, mulsum, all             [sum]\n"
      << "                            (mulsum: ncclRedOpCreatePreMulSum, rank r's scalar 1 + r%2)\n"
      << "  -d, --datatype T[,T]      int8 uint8 int32 uint32 int64 uint64 half float double\n"
      << "                            bfloat16 f8e4m3 f8e5m2, all                       [float]\n"
      << "  -r, --root R              root rank of broadcast and reduce                 [0]\n"
      << "  -g, --ngpus N             GPUs driven by each process (NCCL backend)        [1]\n"
      << "  -a, --average 0|1|2|3     batch time across ranks: rank0, mean, min, max    [1]\n"
      << "  -T, --timeout SECONDS     watchdog: end all ranks if start-up/a case hangs   [off]\n"
      << "                            (with --learn-deadlines: the ceiling of each deadline)\n"
      << "  -G, --cudagraph K         capture the -n iterations (collectives only) in a CUDA graph,\n"
      << "                            replay it K times: time = host clock / (K x n x m)\n"
      << "  -m, --agg_iters M         collectives per iteration, in one ncclGroup; times / M  [1]\n"
      << "  -N, --run_cycles N        run the whole sweep N times (0 = until SIGINT/SIGTERM) [1]\n"
      << "  -R, --local_register 0|1|2  1: ncclCommRegister the buffers; 2: ncclMemAlloc +\n"
      << "                            ncclCommWindowRegister (symmetric, NCCL >= 2.27)    [0]\n"
      << "  -u, --unalign N           buffers start N elements past their alignment      [0]\n"
      << "  -x, --cta_policy 0|1|2    ncclConfig_t.CTAPolicy: default, efficiency, zero (2: NCCL\n"
      << "                            >= 2.28)                                  [not set]\n"
      << "  -z, --blocking 0|1        1: wait for each iteration before the next        [0]\n"
      << "  -J, --output_file FILE    JSON results (manifest, bindings, evidence, cases)\n"
      << "\n"
      << "nccl-tests flags accepted with no effect (value 0|1):\n";
  for (const NcclTestsFlag& flag : kNcclTestsFlags) {
    if (flag.handling == FlagHandling::accepted_no_op) out << "  " << flag.short_name << ", " << flag.long_name << ": " << flag.note << "\n";
  }
  out << "nccl-tests flags refused (exit 2):\n";
  for (const NcclTestsFlag& flag : kNcclTestsFlags) {
    if (flag.handling == FlagHandling::refused) out << "  " << flag.short_name << ", " << flag.long_name << ": " << flag.note << "\n";
  }
  out << "\n"
      << "cclbench flags:\n"
      << "  --sizes SIZE[,SIZE]       exactly these sizes instead of -b/-e/-f/-i (e.g. 14336,28672)\n"
      << "  --backend nccl|mpi        nccl when a GPU is visible                       [auto]\n"
      << "  --coll C[,C]              all_reduce all_gather reduce_scatter alltoall\n"
      << "                            broadcast reduce sendrecv, all          [the first four]\n"
      << "  --placement both|in|out   in-place, out-of-place or both                    [both]\n"
      << "  --csv FILE                one CSV row per case\n"
      << "  --jsonl FILE              append one JSON record per case as it completes\n"
      << "  --samples FILE            append each case's per-iteration times (us) to FILE\n"
      << "                            (JSONL); records name the file                    [off]\n"
      << "  --nccl-log-dir DIR        NCCL logs (NCCL_DEBUG_FILE=DIR/%h.%p.log), parsed into\n"
      << "                            the transport evidence  [<dir of -J/--jsonl>/nccl, else a temp dir]\n"
      << "  --log-dir DIR             the same as --nccl-log-dir\n"
      << "  --expect-transport SPEC   fail (exit 3) unless NCCL's logs prove it, e.g.\n"
      << "                            inter=NET/IB+GDRDMA,intra=P2P (no evidence = failure)\n"
      << "  --tuning-probe FILE       run every case once, untimed, with NCCL TUNING logging and\n"
      << "                            write NCCL's algorithm/protocol per case to FILE (no results)\n"
      << "  --tuning-from FILE        attach a --tuning-probe FILE's choices to each case record\n"
      << "  --share-gpu               several MPI ranks on one GPU (NCCL_HOSTID per rank):\n"
      << "                            emulated, correctness only, never a performance figure\n"
      << "  --point NAME              sweep-point label recorded with every case\n"
      << "  --split-ranks N           one job, many runs: MPI_COMM_WORLD in consecutive groups of N\n"
      << "                            ranks, each measured on its own communicator with its own\n"
      << "                            watchdog and -J, as a launch of those ranks alone would be\n"
      << "  --split-points FILE       with --split-ranks: JSON list, one {\"point\": NAME,\n"
      << "                            \"json\": PATH} per group in rank order (its --point and -J)\n"
      << "  --sysfs-root DIR          root of /sys for rail counters                    [/sys]\n"
      << "  --all-netdevs             rail evidence also lists interfaces that moved no bytes\n"
      << "  --netdevs IF[,IF]         interfaces that are rails: their byte counters per case\n"
      << "                            and host (TCP: NCCL NET/Socket, MPI's TCP BTL)\n"
      << "                            [NCCL's NET/Socket interfaces, from its log]\n"
      << "  --quiet                   no console table\n"
      << "  --learn-deadlines         the watchdog's deadline for each phase of a case (start-up,\n"
      << "                            the probe, warm-up, timed, check) learned from this run:\n"
      << "                            20 s floor + 10 x the same collective's smaller sizes scaled\n"
      << "                            by bytes (+ a connect floor for the first call); -T caps it\n"
      << "  --progress                report each phase entered and left, with its deadline, on\n"
      << "                            stderr ('cclbench-progress {json}' lines) for a runner that\n"
      << "                            stops a launch frozen whole\n"
      << "  -h, --help                this text\n"
      << "\n"
      << "Exit status: 0 ok, 1 a case failed or data was wrong, 2 bad usage, 3 transport\n"
      << "expectation not met, 4 timeout, 5 runtime error, 6 peer lost, 7 nothing measured,\n"
      << "130/143 interrupted.\n"
      << "\n"
      << "Examples:\n"
      << "  " << program_name << " -b 8K -e 64M -f 2 -g 8                      # one process, 8 GPUs\n"
      << "  mpirun -np 8 " << program_name << " -b 8K -e 64M -f 2                # one rank per GPU\n"
      << "  mpirun -np 16 --host node5:8,node7:8 -x NCCL_IB_HCA==mlx5_0:1,mlx5_3:1 \\\n"
      << "      " << program_name << " -b 8K -e 64M -f 2 --expect-transport inter=NET/IB+GDRDMA,intra=P2P\n"
      << "  mpirun -np 4 " << program_name << " --share-gpu -b 8K -e 1M -f 4       # CI smoke, one GPU\n"
      << "  mpirun -np 4 " << program_name << " --backend mpi -b 8K -e 64M -f 2 -J out.json\n"
      << "  " << program_name << " --coll all_reduce -d all -o all -b 1M -e 1M    # every dtype and op\n";
  return out.str();
}

std::optional<Config> parse_config(int argc, const char* const argv[]) {
  Config config;
  const std::string program = argc > 0 ? argv[0] : "coll_perf";
  for (int i = 0; i < argc; ++i) config.argv.emplace_back(argv[i]);
  const auto fixed_collective = collective_of_program(program);
  bool step_factor_given = false;
  bool step_bytes_given = false;
  bool range_given = false;

  ArgCursor cursor(argc, argv);
  while (!cursor.done()) {
    const std::string flag = cursor.next_flag();
    if (flag == "-h" || flag == "--help") {
      std::cout << help_text(program) << fault_injection_help();
      return std::nullopt;
    } else if (flag == "-b" || flag == "--minbytes") {
      config.min_bytes = parse_size(cursor.value(flag), flag);
      range_given = true;
    } else if (flag == "-e" || flag == "--maxbytes") {
      config.max_bytes = parse_size(cursor.value(flag), flag);
      range_given = true;
    } else if (flag == "--sizes") {
      config.sizes.clear();
      std::string rest = cursor.value(flag);
      for (std::size_t start = 0; start <= rest.size();) {
        const std::size_t comma = std::min(rest.find(',', start), rest.size());
        const std::uint64_t size = parse_size(rest.substr(start, comma - start), flag);
        if (size == 0) throw UsageError("--sizes: sizes must be > 0");
        config.sizes.push_back(size);
        start = comma + 1;
      }
      std::sort(config.sizes.begin(), config.sizes.end());
      config.sizes.erase(std::unique(config.sizes.begin(), config.sizes.end()), config.sizes.end());
      if (config.sizes.size() > 4096) throw UsageError("--sizes: more than 4096 sizes");
    } else if (flag == "-f" || flag == "--stepfactor") {
      config.step_factor = parse_number(cursor.value(flag), flag, 1.0001, 1024);
      step_factor_given = true;
    } else if (flag == "-i" || flag == "--stepbytes") {
      config.step_bytes = parse_size(cursor.value(flag), flag);
      if (config.step_bytes == 0) throw UsageError(flag + ": must be > 0");
      step_bytes_given = true;
    } else if (flag == "-n" || flag == "--iters") {
      config.iterations = static_cast<int>(parse_integer(cursor.value(flag), flag, 1, 1000000));
    } else if (flag == "-w" || flag == "--warmup_iters") {
      config.warmup_iterations = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1000000));
    } else if (flag == "-c" || flag == "--check") {
      config.check_iterations = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1000));
    } else if (flag == "-o" || flag == "--op") {
      config.ops = parse_list<ReduceOp>(cursor.value(flag), "-o", parse_reduce_op, all_reduce_ops(), joined_names(all_reduce_ops()));
    } else if (flag == "-d" || flag == "--datatype") {
      config.dtypes = parse_list<DataType>(cursor.value(flag), "-d", parse_data_type, all_data_types(), joined_names(all_data_types()));
    } else if (flag == "-r" || flag == "--root") {
      config.root = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1 << 20));
    } else if (flag == "-g" || flag == "--ngpus") {
      config.gpus_per_process = static_cast<int>(parse_integer(cursor.value(flag), flag, 1, 64));
    } else if (flag == "-a" || flag == "--average") {
      config.batch_average = static_cast<BatchAverage>(parse_integer(cursor.value(flag), flag, 0, 3));
    } else if (flag == "-T" || flag == "--timeout") {
      config.timeout_seconds = parse_number(cursor.value(flag), flag, 0, 86400);
    } else if (flag == "-G" || flag == "--cudagraph") {
      config.graph_launches = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 100000));
    } else if (flag == "-z" || flag == "--blocking") {
      config.blocking = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1));
    } else if (flag == "-m" || flag == "--agg_iters") {
      config.ops_per_launch = static_cast<int>(parse_integer(cursor.value(flag), flag, 1, 1024));
    } else if (flag == "-N" || flag == "--run_cycles") {
      config.run_cycles = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1000000));
    } else if (flag == "-R" || flag == "--local_register") {
      config.registration = static_cast<Registration>(parse_integer(cursor.value(flag), flag, 0, 2));
    } else if (flag == "-u" || flag == "--unalign") {
      config.unalign_elements = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 4096));
    } else if (flag == "-x" || flag == "--cta_policy") {
      config.cta_policy = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 2));
    } else if (flag == "-I" || flag == "--per_iter_timing") {
      config.per_iter_timing = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1));
    } else if (flag == "-C" || flag == "--report_cputime") {
      config.report_cputime = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1));
    } else if (flag == "-S" || flag == "--report_timestamps") {
      config.report_timestamps = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1));
    } else if (flag == "-M" || flag == "--memory") {
      config.memory_report = static_cast<int>(parse_integer(cursor.value(flag), flag, 0, 1));
    } else if (flag == "-J" || flag == "--output_file") {
      config.json_path = cursor.value(flag);
    } else if (flag == "--backend") {
      const std::string value = cursor.value(flag);
      if (value == "nccl") config.backend = BackendKind::nccl;
      else if (value == "mpi") config.backend = BackendKind::mpi;
      else if (value == "auto") config.backend = BackendKind::automatic;
      else throw UsageError("--backend: unknown value '" + value + "' (accepted: nccl, mpi, auto)");
    } else if (flag == "--coll") {
      if (fixed_collective) throw UsageError("--coll: this program measures " + std::string(name_of(*fixed_collective)) + " only; use coll_perf --coll");
      config.collectives = parse_list<Collective>(cursor.value(flag), "--coll", parse_collective, all_collectives(), joined_names(all_collectives()));
    } else if (flag == "--placement") {
      const std::string value = cursor.value(flag);
      if (value == "both") config.placement = Placement::both;
      else if (value == "in") config.placement = Placement::in_place;
      else if (value == "out") config.placement = Placement::out_of_place;
      else throw UsageError("--placement: unknown value '" + value + "' (accepted: both, in, out)");
    } else if (flag == "--csv") {
      config.csv_path = cursor.value(flag);
    } else if (flag == "--jsonl") {
      config.jsonl_path = cursor.value(flag);
    } else if (flag == "--samples") {
      config.samples_path = cursor.value(flag);
      if (config.samples_path.empty()) throw UsageError("--samples: needs a file name");
    } else if (flag == "--all-netdevs") {
      config.all_netdevs = true;
    } else if (flag == "--netdevs") {
      config.netdevs = parse_netdev_list(cursor.value(flag));
    } else if (flag == "--log-dir" || flag == "--nccl-log-dir") {
      config.log_dir = cursor.value(flag);
      if (config.log_dir.empty()) throw UsageError(flag + ": needs a directory");
    } else if (flag == "--tuning-probe") {
      config.tuning_probe_path = cursor.value(flag);
      if (config.tuning_probe_path.empty()) throw UsageError("--tuning-probe: needs a file name");
    } else if (flag == "--tuning-from") {
      config.tuning_from_path = cursor.value(flag);
      if (config.tuning_from_path.empty()) throw UsageError("--tuning-from: needs a file name");
    } else if (flag == "--expect-transport") {
      config.expect_transport = cursor.value(flag);
      if (config.expect_transport.empty()) throw UsageError("--expect-transport: empty spec (e.g. inter=NET/IB+GDRDMA,intra=P2P)");
    } else if (flag == "--share-gpu") {
      config.share_gpu = true;
    } else if (flag == "--point") {
      config.point = cursor.value(flag);
      check_point_name(config.point, "--point");
    } else if (flag == "--split-ranks") {
      config.split_ranks = static_cast<int>(parse_integer(cursor.value(flag), flag, 1, 1 << 20));
    } else if (flag == "--split-points") {
      config.split_points_path = cursor.value(flag);
      if (config.split_points_path.empty()) throw UsageError("--split-points: needs a file name");
    } else if (flag == "--sysfs-root") {
      config.sysfs_root = cursor.value(flag);
    } else if (flag == "--quiet") {
      config.quiet = true;
    } else if (flag == "--learn-deadlines") {
      config.learn_deadlines = true;
    } else if (flag == "--progress") {
      config.progress_lines = true;
    } else {
      if (const NcclTestsFlag* known = find_nccl_tests_flag(flag); known && known->handling == FlagHandling::refused) {
        throw UsageError(flag + ": nccl-tests flag not supported by cclbench (" + known->note + ")");
      }
      throw UsageError("unknown flag '" + flag + "' (see --help)");
    }
  }

  if (config.min_bytes > config.max_bytes) {
    throw UsageError("-b " + format_size(config.min_bytes) + " is larger than -e " + format_size(config.max_bytes) +
                     " (accepted: -b <= -e)");
  }
  if (step_factor_given && step_bytes_given) throw UsageError("-f and -i are exclusive: give one");
  if (!config.sizes.empty()) {
    if (range_given || step_factor_given || step_bytes_given) throw UsageError("--sizes replaces -b/-e/-f/-i: give one or the other");
    config.min_bytes = config.sizes.front();
    config.max_bytes = config.sizes.back();
  }
  if (!step_factor_given) config.step_factor = 1;
  if (config.min_bytes == 0 && config.step_factor > 1) {
    throw UsageError("-b 0 with -f never grows (accepted: -b > 0 with -f)");
  }
  if (fixed_collective) config.collectives = {*fixed_collective};
  if (config.collectives.empty()) {
    config.collectives = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::alltoall};
  }
  if (config.dtypes.empty()) config.dtypes = {DataType::float32};
  if (config.ops.empty()) config.ops = {ReduceOp::sum};
  if (config.graph_launches > 0 && config.blocking) throw UsageError("-G and -z 1 are exclusive");
  if (config.backend == BackendKind::mpi && config.gpus_per_process != 1) throw UsageError("-g: the MPI backend uses host memory (accepted: -g 1 with --backend mpi)");
  if (config.backend == BackendKind::mpi) {
    if (const auto refusal = mpi_backend_refusal(config)) throw UsageError(*refusal + " (--backend mpi)");
  }
  if (config.backend == BackendKind::mpi && config.share_gpu) throw UsageError("--share-gpu needs --backend nccl");
  if (!config.tuning_probe_path.empty() && !config.tuning_from_path.empty()) {
    throw UsageError("--tuning-probe and --tuning-from are exclusive: probe first, then measure with --tuning-from");
  }
  if (!config.tuning_probe_path.empty() && (!config.json_path.empty() || !config.csv_path.empty() || !config.jsonl_path.empty() ||
                                            !config.samples_path.empty())) {
    throw UsageError("--tuning-probe writes no performance records (drop -J/--csv/--jsonl/--samples; measure with --tuning-from)");
  }
  if (!config.tuning_probe_path.empty() && config.backend == BackendKind::mpi) {
    throw UsageError("--tuning-probe needs --backend nccl (the MPI backend has no NCCL algorithm choice)");
  }
  if (config.share_gpu && config.gpus_per_process != 1) throw UsageError("--share-gpu: one GPU per rank (accepted: -g 1)");
  if ((config.split_ranks > 0) != !config.split_points_path.empty()) {
    throw UsageError("--split-ranks N and --split-points FILE go together (each group needs its point and -J)");
  }
  if (config.split_ranks > 0) {
    // One path for the whole job would be written by every group's rank 0 at once.
    if (!config.json_path.empty() || !config.point.empty()) {
      throw UsageError("--split-points gives each group its --point and -J: drop -J and --point with --split-ranks");
    }
    if (!config.csv_path.empty() || !config.jsonl_path.empty() || !config.samples_path.empty() ||
        !config.tuning_probe_path.empty() || !config.tuning_from_path.empty()) {
      throw UsageError("--split-ranks: --csv, --jsonl, --samples, --tuning-probe and --tuning-from name one file for the whole job "
                       "(accepted with --split-ranks: the -J of each group in --split-points)");
    }
  }
  return config;
}

void check_point_name(const std::string& name, const std::string& flag) {
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '=' || c == '+')) {
      throw UsageError(flag + ": '" + name + "' has characters outside [A-Za-z0-9_.=+-]");
    }
  }
}

std::vector<SplitPoint> parse_split_points(const std::string& text, const std::string& file_name, int groups) {
  const std::string where = "--split-points " + file_name;
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  if (!list.is_array()) throw UsageError(where + ": not a JSON list of {\"point\": NAME, \"json\": PATH}");
  if (list.size() != static_cast<std::size_t>(groups)) {
    throw UsageError(where + ": " + std::to_string(list.size()) + " entries for " + std::to_string(groups) +
                     " group(s) (one entry per group of --split-ranks, in rank order)");
  }
  std::vector<SplitPoint> points;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& entry = list[i];
    const std::string item = where + ": entry " + std::to_string(i);
    if (!entry.is_object() || !entry.contains("point") || !entry["point"].is_string() || !entry.contains("json") ||
        !entry["json"].is_string()) {
      throw UsageError(item + ": expected {\"point\": NAME, \"json\": PATH}");
    }
    SplitPoint point{entry["point"].get<std::string>(), entry["json"].get<std::string>()};
    check_point_name(point.point, item + " point");
    if (point.json_path.empty()) throw UsageError(item + ": empty json path");
    for (const SplitPoint& earlier : points) {
      if (earlier.json_path == point.json_path) throw UsageError(item + ": json path '" + point.json_path + "' given twice");
    }
    points.push_back(std::move(point));
  }
  return points;
}

std::string_view name_of(Registration registration) {
  switch (registration) {
    case Registration::none: return "none";
    case Registration::local: return "local";
    case Registration::symmetric: return "symmetric";
  }
  return "none";
}

const std::vector<NcclTestsFlag>& nccl_tests_flags() { return kNcclTestsFlags; }

std::optional<std::string> mpi_backend_refusal(const Config& config) {
  if (config.graph_launches > 0) return "-G: CUDA graphs need the NCCL backend";
  if (config.registration != Registration::none) return "-R: buffer registration is an NCCL feature; the MPI backend uses host memory";
  if (config.cta_policy >= 0) return "-x: the CTA policy is an NCCL communicator setting";
  if (config.ops_per_launch > 1) return "-m: MPI has no aggregated launch (ncclGroupStart/End)";
  if (config.unalign_elements > 0) return "-u: misaligned buffers are implemented for the NCCL backend only";
  return std::nullopt;
}

std::vector<std::uint64_t> sweep_sizes(const Config& config) {
  if (!config.sizes.empty()) return config.sizes;
  std::vector<std::uint64_t> sizes;
  std::uint64_t size = config.min_bytes;
  constexpr std::size_t kMaxSteps = 4096;
  while (size <= config.max_bytes && sizes.size() < kMaxSteps) {
    sizes.push_back(size);
    std::uint64_t next = size + config.step_bytes;
    if (config.step_factor > 1) {
      // Converting a double >= 2^64 to uint64 is undefined (found by fuzz_parse_config with -e 16E).
      const double scaled = static_cast<double>(size) * config.step_factor;
      if (scaled >= 18446744073709551616.0) break;
      next = static_cast<std::uint64_t>(scaled);
    }
    if (next <= size) break;  // only with -b 0 and -f, rejected above; guards against overflow
    size = next;
  }
  if (sizes.size() >= kMaxSteps) throw UsageError("the sweep has more than 4096 sizes; use a larger -f or -i");
  return sizes;
}

std::vector<std::string> parse_netdev_list(std::string_view value) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string item(value.substr(start, comma - start));
    const bool bad_char = std::any_of(item.begin(), item.end(), [](char c) {
      const auto byte = static_cast<unsigned char>(c);
      return c == '/' || c == ':' || byte <= ' ' || byte == 0x7f;
    });
    if (item.empty() || item.size() > 15 || item == "." || item == ".." || bad_char) {
      throw UsageError("--netdevs: '" + item.substr(0, 40) +
                       "' is not an interface name (1-15 characters, no '/', ':', ',' or whitespace)");
    }
    if (std::find(names.begin(), names.end(), item) != names.end()) throw UsageError("--netdevs: '" + item + "' given twice");
    names.push_back(item);
    start = comma + 1;
  }
  return names;
}

}  // namespace cclbench
