#pragma once
// Immutable run configuration, parsed once from argv (nccl-tests-compatible flags plus ours).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/core/types.hpp"

namespace cclbench {

enum class BackendKind { automatic, nccl, mpi };
enum class Placement { both, out_of_place, in_place };
enum class BatchAverage { rank0 = 0, mean = 1, min = 2, max = 3 };  // nccl-tests -a
// nccl-tests -R: 0 none, 1 ncclCommRegister of the buffers, 2 ncclMemAlloc + ncclCommWindowRegister
// (NCCL_WIN_COLL_SYMMETRIC).
enum class Registration { none = 0, local = 1, symmetric = 2 };
std::string_view name_of(Registration registration);  // "none", "local", "symmetric"

struct Config {
  // Sweep (-b -e -f -i). step_factor > 1 means multiply, else add step_bytes.
  std::uint64_t min_bytes = 32ull << 20;
  std::uint64_t max_bytes = 32ull << 20;
  double step_factor = 1;
  std::uint64_t step_bytes = 1ull << 20;
  // --sizes: an exact list instead of the -b/-e/-f/-i sweep (sorted, distinct; the model's message sizes).
  std::vector<std::uint64_t> sizes;
  int iterations = 20;            // -n
  int warmup_iterations = 1;      // -w (per size)
  int check_iterations = 1;       // -c (0 = no checking)
  std::vector<Collective> collectives;  // --coll (default: the four)
  std::vector<DataType> dtypes;         // -d (default: float)
  std::vector<ReduceOp> ops;            // -o (default: sum)
  int root = 0;                   // -r
  Placement placement = Placement::both;
  BatchAverage batch_average = BatchAverage::mean;  // -a
  BackendKind backend = BackendKind::automatic;
  int gpus_per_process = 1;       // -g
  double timeout_seconds = 0;     // -T (0 = no watchdog); with --learn-deadlines the ceiling (0 = none)
  bool learn_deadlines = false;   // --learn-deadlines: each phase's deadline from this run's smaller sizes
  bool progress_lines = false;    // --progress: each phase entered/left on stderr, for a supervising runner
  int graph_launches = 0;         // -G
  int blocking = 0;               // -z (0: stream-ordered; 1: wait for each iteration on the host)
  int ops_per_launch = 1;         // -m: collectives aggregated in one ncclGroup per iteration
  int run_cycles = 1;             // -N: sweeps of every case (0 = until SIGINT/SIGTERM)
  Registration registration = Registration::none;  // -R
  int unalign_elements = 0;       // -u: send/receive buffers start this many elements past alignment
  int cta_policy = -1;            // -x: ncclConfig_t.CTAPolicy (-1 = not set, NCCL's default)
  // Accepted nccl-tests flags that change nothing here (see kAcceptedNoOp in config.cpp); kept so
  // the manifest's argv and --help tell what was asked.
  int per_iter_timing = 0;        // -I
  int report_cputime = 0;         // -C
  int report_timestamps = 0;      // -S
  int memory_report = 0;          // -M
  bool share_gpu = false;         // --share-gpu: emulated ranks on one GPU (correctness only)
  std::string json_path;          // -J
  std::string csv_path;           // --csv
  std::string jsonl_path;         // --jsonl (appended record by record)
  std::string samples_path;       // --samples FILE: per-iteration times, one JSONL line per case
  bool all_netdevs = false;       // --all-netdevs: rail evidence lists interfaces that moved no bytes
  std::vector<std::string> netdevs;  // --netdevs IF[,IF]: interfaces that are rails (netdev counters)
  std::string log_dir;            // --nccl-log-dir (alias --log-dir): NCCL logs; "" = next to -J/--jsonl or a temp dir
  std::string expect_transport;   // --expect-transport SPEC
  std::string sysfs_root = "/sys";// --sysfs-root (rail counters)
  std::string tuning_probe_path;  // --tuning-probe FILE: untimed probe run, writes algo/proto per case
  std::string tuning_from_path;   // --tuning-from FILE: attach a probe's algo/proto to each case
  std::string point;              // --point NAME: sweep point label recorded with each case
  // --split-ranks N: MPI_COMM_WORLD in consecutive groups of N ranks, each group a run of its own
  // (its own communicator, watchdog, -J); --split-points FILE names each group's point and -J.
  int split_ranks = 0;            // 0: no split
  std::string split_points_path;
  std::vector<std::string> argv;  // as given, for the manifest
  bool quiet = false;             // --quiet: no console table
};

// One group's entry of a --split-points file: what --point and -J would be for a launch of that group alone.
struct SplitPoint {
  std::string point;
  std::string json_path;
};

// A --split-points file's text: a JSON list of {"point": NAME, "json": PATH}, one per group in group
// order. Throws UsageError naming the file and the entry when the text is not such a list, a point
// has characters outside [A-Za-z0-9_.=+-], a path is empty or given twice, or the list does not have
// `groups` entries.
std::vector<SplitPoint> parse_split_points(const std::string& text, const std::string& file_name, int groups);

// Throws UsageError unless --point NAME is made of [A-Za-z0-9_.=+-] (`flag` names the source in the message).
void check_point_name(const std::string& name, const std::string& flag);

// The fixed collective of an alias binary (all_reduce_perf...), or nullopt for coll_perf.
std::optional<Collective> collective_of_program(const std::string& program_name);

// Parses argv. Throws UsageError (exit 2) with one line naming the flag and what is accepted.
// Returns nullopt when --help was given (help already printed to stdout).
std::optional<Config> parse_config(int argc, const char* const argv[]);

// Why the MPI backend cannot run `config` (a flag that only means something to NCCL), or nullopt.
std::optional<std::string> mpi_backend_refusal(const Config& config);

// What coll_perf does with each nccl-tests 2.19 flag, for --help and the flag table test.
enum class FlagHandling { implemented, accepted_no_op, refused };
struct NcclTestsFlag {
  const char* short_name;  // "-b"
  const char* long_name;   // "--minbytes"
  FlagHandling handling;
  const char* note;        // for no-ops and refusals: why (empty for implemented flags)
};
const std::vector<NcclTestsFlag>& nccl_tests_flags();

// The help text (also the source of docs/cli.md's coll_perf section: cclbench docs).
std::string help_text(const std::string& program_name);

// The requested sizes in order: min, min*f... (or +i) up to and including max.
std::vector<std::uint64_t> sweep_sizes(const Config& config);

// A --netdevs value "eth0,eth3" -> {"eth0", "eth3"}; throws UsageError naming the bad item when an
// item is not a valid Linux interface name (1-15 bytes, not "." or "..", no '/', ':' or whitespace)
// or is repeated.
std::vector<std::string> parse_netdev_list(std::string_view value);

}  // namespace cclbench
