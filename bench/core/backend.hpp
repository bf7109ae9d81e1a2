#pragma once
// The seam between the runner and a communication library. A backend owns its buffers and
// communicators; the runner owns the sequence (fill, warm up, time, check) and the statistics.
// All methods are collective over the backend's ranks: every rank calls them in the same order.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/core/case.hpp"

namespace cclbench {

struct TimedIterations {
  // One entry per iteration: the time of that iteration in microseconds, the max over the ranks
  // this process drives (one for MPI, -g N for NCCL single-process).
  std::vector<double> iteration_us;
  // nccl-tests' method: host clock around the whole loop (launches + completion) / iterations.
  double batch_us = 0;
  // Where the backend can run the iterations back to back on the GPU (the NCCL backend's gated
  // loop): one event pair around all of them / iterations. No launch gaps and nothing recorded
  // between iterations, so this is the uninstrumented GPU time. Absent otherwise.
  std::optional<double> gated_us;
  // Where iteration_us came from: "per_iteration_events" (an event pair around each iteration),
  // "instrumented_graph_replay" (-G: a separate graph with event-record nodes around each
  // iteration, replayed once; the batch and gated times come from a graph without them) or
  // "host_clock" (MPI_Wtime around each call).
  std::string samples_from;
};

class Backend {
 public:
  // How a case is measured beyond its spec (-G, -m, -R, -u, -x); the MPI backend has only defaults.
  virtual MeasurementMode measurement_mode() const { return {}; }

  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;  // "mpi" or "nccl"
  virtual int nranks() const = 0;        // total ranks of the communicator
  virtual bool emulated() const { return false; }  // several ranks share one GPU: correctness only

  // Why this case cannot run here (unsupported dtype/op, buffers too small...), or nullopt.
  // Must give the same answer on every rank.
  virtual std::optional<std::string> unsupported_reason(const CaseSpec& spec) const = 0;

  // Writes the pattern of repetition `rep` into the send buffers (the receive buffers for
  // in-place cases) and poisons the receive buffers.
  virtual void fill(const CaseSpec& spec, std::uint32_t rep) = 0;
  // Runs the collective `iterations` times, untimed (warm-up; connections are made here).
  virtual void warm_up(const CaseSpec& spec, int iterations) = 0;
  // Runs and times `iterations` iterations; nothing else happens inside the timed region.
  virtual TimedIterations run_timed(const CaseSpec& spec, int iterations) = 0;
  // Runs the collective once on the data written by fill() (no buffer rotation).
  virtual void run_once(const CaseSpec& spec) = 0;
  // Counts, on this process's ranks, received elements that differ from the pattern of `rep`.
  virtual std::int64_t count_wrong(const CaseSpec& spec, std::uint32_t rep) = 0;

  // Called from the watchdog thread or a fatal-error path: make every local communicator give up
  // (ncclCommAbort) so no thread stays blocked. Must be safe to call concurrently with the above.
  virtual void abort_communication() noexcept {}
};

}  // namespace cclbench
