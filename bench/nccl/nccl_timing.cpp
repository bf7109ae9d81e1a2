// The NCCL backend's timed phases: warm-up, the timed loop (CUDA events per iteration behind a
// blocker kernel, the gated and the batch time; -G graph replays) and the slowdown test knob's
// calibration, which probes the same timed batches.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/nccl_backend_internal.hpp"
#include "kernels/p2p_kernels.hpp"

namespace cclbench::nccl_detail {
namespace {

// Timed iterations queued behind the blocker kernel at most (CUDA's launch queue holds about a
// thousand launches; every iteration is two events and one or a few kernels per GPU).
constexpr int kMaxGatedIterations = 200;
constexpr std::uint64_t kGateTimeoutNs = 30ull * 1000 * 1000 * 1000;

}  // namespace

void NcclBackend::ensure_events(std::size_t count) {
  for (LocalGpu& gpu : gpus_) {
    while (gpu.starts.size() < count) {
      gpu.starts.emplace_back(gpu.device, rank_text());
      gpu.stops.emplace_back(gpu.device, rank_text());
    }
  }
}

void NcclBackend::record(std::vector<Event> LocalGpu::*events, std::size_t index, const CaseSpec& spec, unsigned flags) {
  for (LocalGpu& gpu : gpus_) {
    // cudaEventRecordExternal: inside a stream capture, a real event-record node of the graph.
    const cudaError_t result = flags == 0 ? cudaEventRecord((gpu.*events)[index].get(), gpu.stream.get())
                                          : cudaEventRecordWithFlags((gpu.*events)[index].get(), gpu.stream.get(), flags);
    cuda_or_fail(result, "cudaEventRecord", spec, "timed iterations");
  }
}

double NcclBackend::max_elapsed_us(std::size_t index, const CaseSpec& spec) {
  double slowest = 0;
  for (const LocalGpu& gpu : gpus_) {
    float ms = 0;
    cuda_or_fail(cudaEventElapsedTime(&ms, gpu.starts[index].get(), gpu.stops[index].get()), "cudaEventElapsedTime", spec,
                 "timed iterations");
    slowest = std::max(slowest, static_cast<double>(ms) * 1000.0);
  }
  return slowest;
}

void NcclBackend::warm_up(const CaseSpec& spec, int iterations) {
  for (int iteration = 0; iteration < iterations; ++iteration) launch(spec, iteration, config_.ops_per_launch);
  wait_for_completion(spec, "warm-up");
}

// The blocker may hold `queued_launches` launches (CUDA's launch queue holds about a thousand) and
// must not starve ranks of other processes on the same GPU; with -z 1 the host waits per iteration.
bool NcclBackend::can_gate(std::size_t queued_launches) const {
  return !config_.blocking && max_sharing_ == 1 && queued_launches <= static_cast<std::size_t>(kMaxGatedIterations);
}

// Queues `count` iterations behind a blocker kernel on every local GPU and releases it once every
// rank has queued, so each GPU runs them back to back; waits for them. With per_iteration_events
// each iteration lies between its own event pair (starts[i], stops[i]); without, one pair
// (starts[0], stops[0]) spans them all.
void NcclBackend::run_gated(const CaseSpec& spec, std::size_t count, bool per_iteration_events) {
  behind_blocker(spec, "timed iterations", "timed iterations", [&] {
    if (!per_iteration_events) record(&LocalGpu::starts, 0, spec, 0);
    for (std::size_t iteration = 0; iteration < count; ++iteration) {
      if (per_iteration_events) record(&LocalGpu::starts, iteration, spec, 0);
      launch(spec, static_cast<int>(iteration), config_.ops_per_launch);
      if (per_iteration_events) record(&LocalGpu::stops, iteration, spec, 0);
    }
    if (!per_iteration_events) record(&LocalGpu::stops, 0, spec, 0);
  });
}

void NcclBackend::behind_blocker(const CaseSpec& spec, const char* phase, const char* in_front_of,
                                 const std::function<void()>& queue) {
  volatile int* words = static_cast<volatile int*>(gate_words_.get());
  words[0] = 0;
  words[1] = 0;
  {
    kernels::BlockerRelease release(&words[0]);
    for (const LocalGpu& gpu : gpus_) {
      cuda_or_fail(cudaSetDevice(gpu.device), "cudaSetDevice", spec, phase);
      cuda_or_fail(kernels::launch_blocker(&words[0], const_cast<int*>(&words[1]), kGateTimeoutNs, gpu.stream.get()),
                   "blocker kernel launch", spec, phase);
    }
    queue();
    // Release only once every rank has queued: otherwise an early rank's first collective waits
    // for a peer that is still queueing, and that wait is timed as its first iteration (seen on
    // two H200 ranks: 128 us against 9 us for the rest).
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before releasing the blocker)", mpi_);
  }
  wait_for_completion(spec, phase);
  if (words[1] != 0) {
    fail(ExitCode::runtime_error, std::string("the blocker kernel in front of the ") + in_front_of +
                                      " timed out before the host released it (" + where(spec, phase) + ")");
  }
}

TimedIterations NcclBackend::run_timed(const CaseSpec& spec, int iterations) {
  TimedIterations timed;
  if (iterations <= 0) return timed;
  using Clock = std::chrono::steady_clock;
  const auto count = static_cast<std::size_t>(iterations);
  ensure_events(count);
  if (slowdown_) calibrate_slowdown(spec, iterations);
  if (config_.graph_launches > 0) return run_timed_graph(spec, iterations);
  // -m: every time below covers `ops` collectives per iteration and is reported per collective.
  const int ops = config_.ops_per_launch;

  wait_for_completion(spec, "before timed iterations");
  // Every rank starts together, as nccl-tests does (its timed loop starts after a barrier).
  mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before timed iterations)", mpi_);

  // (a) Per-iteration GPU time. Recording two events per iteration costs host time, so in a plain
  // loop the GPU would idle between a start event and the collective's launch, and that gap would
  // be timed. Instead every iteration is queued behind a blocker kernel that the host releases
  // once all are queued: the GPU then runs them back to back and each event pair spans only its
  // own collective. Not done with -z (each iteration waits for the last), with GPUs shared by
  // several processes (a spinning blocker would starve the other ranks' kernels), or for more
  // iterations than the launch queue surely holds (a full queue would block the host behind the
  // blocker it has not released yet).
  const bool gated = can_gate(count);
  if (gated) {
    run_gated(spec, count, true);
  } else {
    for (std::size_t iteration = 0; iteration < count; ++iteration) {
      record(&LocalGpu::starts, iteration, spec, 0);
      launch(spec, static_cast<int>(iteration), ops);
      record(&LocalGpu::stops, iteration, spec, 0);
      // -z 1: the host waits for each iteration (outside the event pair).
      if (config_.blocking) wait_for_completion(spec, "timed iterations");
    }
    wait_for_completion(spec, "timed iterations");
  }
  for (std::size_t i = 0; i < count; ++i) timed.iteration_us.push_back(max_elapsed_us(i, spec) / ops);
  timed.samples_from = "per_iteration_events";

  // (b) The gated time: the same iterations back to back behind the blocker again, with one event
  // pair around all of them and nothing between them. The per-iteration events of (a) cost GPU
  // time and keep consecutive collectives from overlapping their launch (2-6 us per iteration on
  // H200s, measured); this pass is uninstrumented, and algbw/busbw come from it.
  if (gated) {
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before gated iterations)", mpi_);
    run_gated(spec, count, false);
    timed.gated_us = max_elapsed_us(0, spec) / (static_cast<double>(count) * ops);
  }

  // (c) nccl-tests' batch time: the same iterations again with nothing between them, the host
  // clock around queueing them all and waiting for the last (nccl-tests' `time` column).
  mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before batch iterations)", mpi_);
  const Clock::time_point begin = Clock::now();
  for (std::size_t iteration = 0; iteration < count; ++iteration) {
    launch(spec, static_cast<int>(iteration), ops);
    if (config_.blocking) wait_for_completion(spec, "batch iterations");
  }
  wait_for_completion(spec, "batch iterations");
  const Clock::time_point end = Clock::now();
  timed.batch_us = std::chrono::duration<double, std::micro>(end - begin).count() / (static_cast<double>(iterations) * ops);
  return timed;
}

std::vector<Graph> NcclBackend::capture(const CaseSpec& spec, int iterations, int ops, bool instrumented) {
  wait_for_completion(spec, "before graph capture");
  for (const LocalGpu& gpu : gpus_) {
    // Thread-local mode, as nccl-tests: NCCL may allocate (cudaMalloc) while connecting during capture.
    cuda_or_fail(cudaStreamBeginCapture(gpu.stream.get(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", spec,
                 "graph capture");
  }
  try {
    for (int iteration = 0; iteration < iterations; ++iteration) {
      const auto index = static_cast<std::size_t>(iteration);
      // cudaEventRecordExternal: inside a capture, a real event-record node of the graph.
      if (instrumented) record(&LocalGpu::starts, index, spec, cudaEventRecordExternal);
      launch(spec, iteration, ops);
      if (instrumented) record(&LocalGpu::stops, index, spec, cudaEventRecordExternal);
    }
  } catch (...) {
    for (const LocalGpu& gpu : gpus_) {
      cudaGraph_t discarded = nullptr;
      if (cudaStreamEndCapture(gpu.stream.get(), &discarded) == cudaSuccess && discarded) cudaGraphDestroy(discarded);
    }
    throw;
  }
  std::vector<Graph> graphs;
  for (const LocalGpu& gpu : gpus_) {
    cudaGraph_t graph = nullptr;
    cuda_or_fail(cudaStreamEndCapture(gpu.stream.get(), &graph), "cudaStreamEndCapture", spec, "graph capture");
    graphs.emplace_back(graph, gpu.device, where(spec, "graph capture"));
    // Uploaded before any timed replay. nccl-tests does not upload, so its first replay pays for
    // it (amortized over its K x n collectives): ours can only be lower by that, never higher.
    cuda_or_fail(cudaGraphUpload(graphs.back().exec(), gpu.stream.get()), "cudaGraphUpload", spec, "graph capture");
  }
  wait_for_completion(spec, "graph upload");
  return graphs;
}

void NcclBackend::replay(const std::vector<Graph>& graphs, int times, const CaseSpec& spec, const char* phase) {
  for (int replay = 0; replay < times; ++replay) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      cuda_or_fail(cudaGraphLaunch(graphs[i].exec(), gpus_[i].stream.get()), "cudaGraphLaunch", spec, phase);
    }
  }
}

// -G K, nccl-tests' method (src/common.cu BenchTime): the n iterations (each -m collectives in one
// group) are captured into one graph per GPU with nothing else in it, and after a barrier the host
// clock runs around K replays and their completion: batch = that / (K x n x m). Event-record nodes
// inside the graph cost GPU time per iteration (about 3.7 us on an H200, measured as the gap to
// nccl-tests), so they are kept out of it:
//   gated:   one event pair on the stream around K replays of the same graph, behind the blocker
//            where it may run (not with a shared GPU, at most 200 replays queued);
//   samples: a second graph with an event pair around each iteration, replayed once; the record
//            says so (samples_from = instrumented_graph_replay).
TimedIterations NcclBackend::run_timed_graph(const CaseSpec& spec, int iterations) {
  using Clock = std::chrono::steady_clock;
  TimedIterations timed;
  const auto count = static_cast<std::size_t>(iterations);
  const int ops = config_.ops_per_launch;
  const int replays = config_.graph_launches;
  const double collectives = static_cast<double>(replays) * iterations * ops;

  const std::vector<Graph> graphs = capture(spec, iterations, ops, false);
  // (a) nccl-tests' time: Barrier, timer reset, K launches per GPU, completeColl (stream sync).
  mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before timed graph replays)", mpi_);
  const Clock::time_point begin = Clock::now();
  replay(graphs, replays, spec, "timed graph replays");
  wait_for_completion(spec, "timed graph replays");
  const Clock::time_point end = Clock::now();
  timed.batch_us = std::chrono::duration<double, std::micro>(end - begin).count() / collectives;

  // (b) GPU time of the same K replays: one event pair around all of them.
  mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before gated graph replays)", mpi_);
  if (can_gate(static_cast<std::size_t>(replays))) {
    behind_blocker(spec, "gated graph replays", "graph replays", [&] {
      record(&LocalGpu::starts, 0, spec, 0);
      replay(graphs, replays, spec, "gated graph replays");
      record(&LocalGpu::stops, 0, spec, 0);
    });
  } else {
    // Without the blocker the GPU idles for one graph launch after the start event: amortized
    // over K x n x m collectives.
    record(&LocalGpu::starts, 0, spec, 0);
    replay(graphs, replays, spec, "gated graph replays");
    record(&LocalGpu::stops, 0, spec, 0);
    wait_for_completion(spec, "gated graph replays");
  }
  timed.gated_us = max_elapsed_us(0, spec) / collectives;

  // (c) Per-iteration samples from a separate, instrumented graph, replayed once.
  const std::vector<Graph> instrumented = capture(spec, iterations, ops, true);
  mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before the instrumented graph replay)", mpi_);
  replay(instrumented, 1, spec, "instrumented graph replay");
  wait_for_completion(spec, "instrumented graph replay");
  for (std::size_t i = 0; i < count; ++i) timed.iteration_us.push_back(max_elapsed_us(i, spec) / ops);
  timed.samples_from = "instrumented_graph_replay";
  return timed;
}

double NcclBackend::probe_time_us(const CaseSpec& spec, int iterations) {
  const int ops = config_.ops_per_launch;
  double per_collective = 0;
  wait_for_completion(spec, "slowdown calibration");
  if (config_.graph_launches > 0) {
    const std::vector<Graph> graphs = capture(spec, iterations, ops, false);
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(slowdown calibration)", mpi_);
    record(&LocalGpu::starts, 0, spec, 0);
    replay(graphs, config_.graph_launches, spec, "slowdown calibration");
    record(&LocalGpu::stops, 0, spec, 0);
    wait_for_completion(spec, "slowdown calibration");
    per_collective = max_elapsed_us(0, spec) / (static_cast<double>(config_.graph_launches) * iterations * ops);
  } else if (can_gate(static_cast<std::size_t>(iterations))) {
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(slowdown calibration)", mpi_);
    run_gated(spec, static_cast<std::size_t>(iterations), false);
    per_collective = max_elapsed_us(0, spec) / (static_cast<double>(iterations) * ops);
  } else {
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(slowdown calibration)", mpi_);
    record(&LocalGpu::starts, 0, spec, 0);
    for (int iteration = 0; iteration < iterations; ++iteration) launch(spec, iteration, ops);
    record(&LocalGpu::stops, 0, spec, 0);
    wait_for_completion(spec, "slowdown calibration");
    per_collective = max_elapsed_us(0, spec) / (static_cast<double>(iterations) * ops);
  }
  // Every rank takes the same decisions from the same numbers: a collective ends with its slowest rank.
  double agreed = 0;
  mpi_check(MPI_Allreduce(&per_collective, &agreed, 1, MPI_DOUBLE, MPI_MAX, mpi_.world), "MPI_Allreduce(slowdown probe)",
            mpi_);
  return agreed;
}

// The slowdown test knob (bench/core/slowdown_injection.hpp): the spin's spacing and length from this
// case's own time per collective, each probe the median of three uninstrumented timed batches; then
// the case is measured as usual, slowed. Rank 0 says what was set and reached (run.log keeps it).
void NcclBackend::calibrate_slowdown(const CaseSpec& spec, int iterations) {
  const DelayProbe probe = [&](int every, double units) {
    delay_every_ = every;
    const auto cycles = static_cast<unsigned long long>(units);
    for (const LocalGpu& gpu : gpus_) {
      cuda_or_fail(cudaSetDevice(gpu.device), "cudaSetDevice", spec, "slowdown calibration");
      cuda_or_fail(cudaMemcpy(gpu.delay_cycles.get(), &cycles, sizeof cycles, cudaMemcpyHostToDevice), "cudaMemcpy",
                   spec, "slowdown calibration");
    }
    double times[3];
    for (double& time : times) time = probe_time_us(spec, iterations);
    std::sort(times, times + 3);
    return times[1];
  };
  InjectedDelay delay;
  try {
    delay = calibrate_delay(slowdown_->pct, iterations, gpus_.front().cycles_per_us, probe);
  } catch (const std::runtime_error& error) {
    fail(ExitCode::runtime_error, std::string(error.what()) + " (" + where(spec, "slowdown calibration") + ")");
  }
  probe(delay.every, delay.delay_units);  // leaves the calibrated spin on for the timed phases
  if (mpi_.world_rank == 0) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "coll_perf: injected slowdown (test knob): %s: +%g%% asked, +%.2f%% calibrated (%.0f cycles of spin "
                  "after every %d collective(s); %.2f us a collective without it, %.2f us for a zero-length spin)\n",
                  spec.case_id().c_str(), delay.pct, delay.achieved_pct, delay.delay_units, delay.every, delay.base_us,
                  delay.overhead_us);
    std::fputs(line, stderr);
  }
}

}  // namespace cclbench::nccl_detail
