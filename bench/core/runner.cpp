#include "bench/core/runner.hpp"

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/core/errors.hpp"
#include "bench/core/stats.hpp"

namespace cclbench {
namespace {

CaseSpec make_spec(const CollectiveDescriptor& descriptor, DataType dtype, ReduceOp op, int root, bool in_place, std::uint64_t bytes,
                   int nranks) {
  CaseSpec spec;
  spec.collective = descriptor.kind;
  spec.descriptor = &descriptor;
  spec.dtype = dtype;
  spec.op = op;
  spec.root = root;
  spec.in_place = in_place;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor.byte_counts(bytes, size_of(dtype), nranks);
  return spec;
}

nlohmann::json spec_to_wire(const CaseSpec& spec) {
  return {static_cast<int>(spec.collective), static_cast<int>(spec.dtype), static_cast<int>(spec.op),
          spec.root, spec.in_place, spec.requested_bytes};
}

class PhaseScope {
 public:
  PhaseScope(PhaseMonitor& monitor, const CaseSpec& spec, Phase phase) : monitor_(monitor) { monitor_.enter(spec, phase); }
  ~PhaseScope() { monitor_.leave(); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseMonitor& monitor_;
};

}  // namespace

std::vector<CaseSpec> make_cases(const Config& config, const CollectiveRegistry& registry, int nranks) {
  std::vector<CaseSpec> cases;
  const std::vector<std::uint64_t> sizes = sweep_sizes(config);
  std::vector<bool> placements;
  if (config.placement != Placement::in_place) placements.push_back(false);
  if (config.placement != Placement::out_of_place) placements.push_back(true);
  for (Collective collective : config.collectives) {
    const CollectiveDescriptor& descriptor = registry.find(collective);
    const std::vector<ReduceOp> ops = descriptor.reduces ? config.ops : std::vector<ReduceOp>{ReduceOp::none};
    for (DataType dtype : config.dtypes) {
      for (ReduceOp op : ops) {
        for (std::uint64_t bytes : sizes) {
          for (bool in_place : placements) {
            cases.push_back(make_spec(descriptor, dtype, op, config.root, in_place, bytes, nranks));
          }
        }
      }
    }
  }
  return cases;
}

std::vector<CaseSpec> agree_on_cases(const std::vector<CaseSpec>& local_cases, const CollectiveRegistry& registry,
                                     const MpiContext& context) {
  std::string wire;
  if (context.world_rank == 0) {
    nlohmann::json list = nlohmann::json::array();
    for (const CaseSpec& spec : local_cases) list.push_back(spec_to_wire(spec));
    wire = list.dump();
  }
  unsigned long long length = wire.size();
  mpi_check(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, context.world), "MPI_Bcast(case list length)", context);
  wire.resize(length);
  mpi_check(MPI_Bcast(wire.data(), static_cast<int>(length), MPI_CHAR, 0, context.world), "MPI_Bcast(case list)", context);
  if (context.world_rank == 0) return local_cases;

  const int nranks = local_cases.empty() ? 0 : local_cases.front().nranks;
  std::vector<CaseSpec> cases;
  for (const auto& item : nlohmann::json::parse(wire)) {
    cases.push_back(make_spec(registry.find(static_cast<Collective>(item[0].get<int>())), static_cast<DataType>(item[1].get<int>()),
                              static_cast<ReduceOp>(item[2].get<int>()), item[3].get<int>(), item[4].get<bool>(),
                              item[5].get<std::uint64_t>(), nranks));
  }
  if (cases.size() != local_cases.size()) {
    std::cerr << "cclbench: warning: rank " << context.world_rank << " (" << context.hostname << ") built "
              << local_cases.size() << " cases but rank 0 built " << cases.size() << "; following rank 0\n";
  }
  return cases;
}

Runner::Runner(Backend& backend, const MpiContext& context, RunnerOptions options, PhaseMonitor& monitor,
               const std::atomic<int>& stop_signal)
    : backend_(backend), context_(context), options_(options), monitor_(monitor), stop_signal_(stop_signal) {}

RunOutcome Runner::run(const std::vector<CaseSpec>& cases, CaseObserver* observer,
                       const std::function<void(const CaseResult&)>& on_result,
                       const std::function<void(int cycle)>& on_cycle_end) {
  for (int cycle = 0; options_.cycles == 0 || cycle < options_.cycles; ++cycle) {
    for (const CaseSpec& spec : cases) {
      // The whole case is watched, not only its phases: the stop vote, the result exchanges and the
      // observers' gathers wait on every other rank too, and a rank frozen between two phases
      // (SIGSTOP, a stalled host) would otherwise hold this one there with no watchdog armed.
      PhaseScope whole_case(monitor_, spec, Phase::boundary);
      // Every rank stops at the same case boundary, so nobody waits in a collective alone.
      int local_stop = stop_signal_.load() != 0 ? 1 : 0;
      int any_stop = 0;
      mpi_check(MPI_Allreduce(&local_stop, &any_stop, 1, MPI_INT, MPI_MAX, context_.world), "MPI_Allreduce(stop)", context_);
      if (any_stop) return RunOutcome::interrupted;
      if (observer) observer->before_case(spec);
      CaseResult result = run_case(spec);
      result.cycle = cycle;
      if (observer) observer->after_case(result);
      on_result(result);
    }
    if (on_cycle_end) on_cycle_end(cycle);
    // -N 0 with an empty case list would spin without ever checking the stop signal.
    if (cases.empty()) break;
  }
  return RunOutcome::complete;
}

CaseResult Runner::run_case(const CaseSpec& spec) {
  CaseResult result;
  result.spec = spec;
  result.backend = backend_.name();
  result.emulated = backend_.emulated();
  result.iterations = options_.iterations;
  result.warmup = options_.warmup_iterations;
  result.check_iterations = options_.check_iterations;
  result.mode = backend_.measurement_mode();

  if (const auto reason = backend_.unsupported_reason(spec)) {
    result.status = CaseStatus::skipped;
    result.reason = *reason;
    return result;
  }
  if (spec.counts.param_count == 0) {
    result.status = CaseStatus::skipped;
    result.reason = "size " + std::to_string(spec.requested_bytes) + " B gives 0 elements per rank for " +
                    std::to_string(spec.nranks) + " ranks";
    return result;
  }

  // Phase 1: timed. The pattern of repetition 0 is in the buffers; warm-up connects lazily.
  TimedIterations timed;
  {
    PhaseScope scope(monitor_, spec, Phase::fill);
    backend_.fill(spec, 0);
  }
  {
    PhaseScope scope(monitor_, spec, Phase::warm_up);
    backend_.warm_up(spec, options_.warmup_iterations);
  }
  {
    PhaseScope scope(monitor_, spec, Phase::timed);
    timed = backend_.run_timed(spec, options_.iterations);
  }
  if (static_cast<int>(timed.iteration_us.size()) != options_.iterations) {
    throw FatalError(ExitCode::runtime_error, "backend returned " + std::to_string(timed.iteration_us.size()) +
                                                  " samples for " + std::to_string(options_.iterations) + " iterations");
  }

  // A collective completes when its slowest rank does: per-iteration max over ranks.
  std::vector<double> slowest(timed.iteration_us.size());
  mpi_check(MPI_Allreduce(timed.iteration_us.data(), slowest.data(), static_cast<int>(slowest.size()), MPI_DOUBLE, MPI_MAX,
                          context_.world),
            "MPI_Allreduce(iteration times)", context_);
  double batch = timed.batch_us;
  switch (options_.batch_average) {
    case BatchAverage::rank0:
      mpi_check(MPI_Bcast(&batch, 1, MPI_DOUBLE, 0, context_.world), "MPI_Bcast(batch time)", context_);
      break;
    case BatchAverage::mean:
      mpi_check(MPI_Allreduce(&timed.batch_us, &batch, 1, MPI_DOUBLE, MPI_SUM, context_.world), "MPI_Allreduce(batch time)", context_);
      batch /= context_.world_size;
      break;
    case BatchAverage::min:
      mpi_check(MPI_Allreduce(&timed.batch_us, &batch, 1, MPI_DOUBLE, MPI_MIN, context_.world), "MPI_Allreduce(batch time)", context_);
      break;
    case BatchAverage::max:
      mpi_check(MPI_Allreduce(&timed.batch_us, &batch, 1, MPI_DOUBLE, MPI_MAX, context_.world), "MPI_Allreduce(batch time)", context_);
      break;
  }
  // The gated time counts where every rank has one; a collective ends with its slowest rank.
  int have_gated = timed.gated_us.has_value() ? 1 : 0;
  int all_gated = 0;
  mpi_check(MPI_Allreduce(&have_gated, &all_gated, 1, MPI_INT, MPI_MIN, context_.world), "MPI_Allreduce(gated present)", context_);
  const double local_gated = timed.gated_us.value_or(0.0);
  double gated = 0;
  mpi_check(MPI_Allreduce(&local_gated, &gated, 1, MPI_DOUBLE, MPI_MAX, context_.world), "MPI_Allreduce(gated time)", context_);
  result.samples_us = slowest;
  // Each rank's share, gathered on every rank (two numbers per rank), for the straggler check.
  const RankShare own = rank_share(timed.iteration_us, slowest);
  const double local_share[2] = {own.mean_us, static_cast<double>(own.slowest_iterations)};
  std::vector<double> shares(2 * static_cast<std::size_t>(context_.world_size));
  mpi_check(MPI_Allgather(local_share, 2, MPI_DOUBLE, shares.data(), 2, MPI_DOUBLE, context_.world),
            "MPI_Allgather(rank shares)", context_);
  for (int rank = 0; rank < context_.world_size; ++rank) {
    result.rank_mean_us.push_back(shares[2 * rank]);
    result.rank_slowest_iterations.push_back(static_cast<int>(shares[2 * rank + 1]));
  }
  result.samples_from = timed.samples_from;
  result.time_us = summarize(slowest);
  result.batch_time_us = batch;
  if (all_gated) result.gated_time_us = gated;
  const double bandwidth_time = *bandwidth_time_us(result);
  if (bandwidth_time > 0) {
    const Bandwidth bandwidth = bandwidth_of(spec, bandwidth_time);
    result.algbw_gbps = bandwidth.algbw_gbps;
    if (busbw_null_reason(spec.nranks) == nullptr) result.busbw_gbps = bandwidth.busbw_gbps;
  }

  // Phase 2: checked runs, each on fresh data, never timed.
  if (options_.check_iterations > 0) {
    long long wrong_here = 0;
    for (int check = 0; check < options_.check_iterations; ++check) {
      const auto rep = static_cast<std::uint32_t>(check + 1);
      PhaseScope scope(monitor_, spec, Phase::check);
      backend_.fill(spec, rep);
      backend_.run_once(spec);
      wrong_here += backend_.count_wrong(spec, rep);
    }
    long long wrong_total = 0;
    mpi_check(MPI_Allreduce(&wrong_here, &wrong_total, 1, MPI_LONG_LONG, MPI_SUM, context_.world), "MPI_Allreduce(wrong)", context_);
    result.wrong = wrong_total;
  }

  if (result.wrong && *result.wrong > 0) {
    result.status = CaseStatus::failed;
    result.reason = std::to_string(*result.wrong) + " wrong elements over " + std::to_string(options_.check_iterations) +
                    " checked runs";
  } else if (!result.time_us || result.time_us->mean <= 0) {
    result.status = CaseStatus::error;
    result.reason = "no positive time measured (timer resolution?)";
  } else {
    result.status = CaseStatus::ok;
  }
  return result;
}

}  // namespace cclbench
