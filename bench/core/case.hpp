#pragma once
// A benchmark case (what to run) and its result (what was measured), as plain data. Reporters
// serialize CaseResult; nothing here prints.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/collective_descriptor.hpp"
#include "bench/core/types.hpp"

namespace cclbench {

struct CaseSpec {
  Collective collective = Collective::all_reduce;
  DataType dtype = DataType::float32;
  ReduceOp op = ReduceOp::none;  // none for data-movement collectives
  int root = 0;
  bool in_place = false;
  std::uint64_t requested_bytes = 0;  // the -b..-e sweep value
  int nranks = 1;
  ByteCounts counts;
  // The registered descriptor of `collective` (make_cases sets it from the registry it is handed).
  const CollectiveDescriptor* descriptor = nullptr;

  // *descriptor; std::logic_error when unset or of another collective.
  const CollectiveDescriptor& collective_descriptor() const;

  // Stable identifier used by resume and compare: "all_reduce.float.sum.out.8K" (root appended
  // for rooted collectives: ".r0").
  std::string case_id() const;
};

// The launch settings that change what a case measures, recorded with every case so that records
// measured differently are never compared as if they were alike.
struct MeasurementMode {
  int graph_launches = 0;              // -G: 0 = eager launches
  int ops_per_launch = 1;              // -m: collectives aggregated per ncclGroup
  std::string registration = "none";   // -R: none, local, symmetric
  int unalign_elements = 0;            // -u
  std::optional<int> cta_policy;       // -x: null = not set (NCCL's default)
};

enum class CaseStatus { ok, failed, skipped, error };
std::string_view name_of(CaseStatus status);

// Statistics over the per-iteration times (each one the max over ranks), in microseconds.
struct TimeStats {
  double mean = 0, min = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
  double cv_pct = 0;  // sample standard deviation / mean * 100
};

struct CaseResult {
  CaseSpec spec;
  std::string backend;
  bool emulated = false;  // ranks shared GPUs (--share-gpu): correctness only, never a performance figure
  int iterations = 0;
  int warmup = 0;
  int check_iterations = 0;
  std::optional<TimeStats> time_us;
  std::optional<double> batch_time_us;  // nccl-tests method: host clock around the loop / iterations
  std::optional<double> gated_time_us;  // back to back behind the blocker, one event pair around all / iterations
  std::optional<double> algbw_gbps;     // from bandwidth_time_us()
  std::optional<double> busbw_gbps;     // null where busbw_null_reason() says why, and when not timed
  std::optional<std::int64_t> wrong;    // null when not checked
  CaseStatus status = CaseStatus::error;
  std::string reason;                   // empty when ok
  std::vector<double> samples_us;       // per-iteration max-over-ranks times, for compare's noise model
  // Per world rank (MPI process; with -g N it covers its N GPUs): mean time per iteration and how
  // many iterations it was the slowest (rank_share in stats.hpp). Empty without timing.
  std::vector<double> rank_mean_us;
  std::vector<int> rank_slowest_iterations;
  std::string samples_from;             // TimedIterations::samples_from; empty when not timed
  MeasurementMode mode;
  int cycle = 0;                        // -N: which sweep (0-based)
  nlohmann::json evidence = nlohmann::json::object();  // algo/proto, rail deltas... attached by apps
};

// The time algbw/busbw come from: gated_time_us where there is one (no launch gaps, no
// per-iteration events), else time_us.mean; nullopt without timing.
std::optional<double> bandwidth_time_us(const CaseResult& result);
// Its name in records ("gated_time_us" or "time_us.mean").
const char* bandwidth_source(const CaseResult& result);

// Why a case of this many communicator ranks has no busbw, or nullptr where it has one. busbw is
// what crosses the links between ranks; at one rank (one process with one GPU) no link is crossed
// and nccl-tests' (n-1)/n factor makes it 0.00, which is no figure. The participants of the
// communicator count, not the processes: one process with -g 4 has 4 ranks and a busbw.
const char* busbw_null_reason(int nranks);

// nccl-tests' record layout, plus our percentiles. Missing values are null.
nlohmann::json to_json(const CaseResult& result);

}  // namespace cclbench
