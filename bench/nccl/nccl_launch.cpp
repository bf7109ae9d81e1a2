// One launch of the NCCL backend (every local GPU in one group), waiting for its completion, and
// what happens on an error: the communicators are aborted and the error names case, phase and rank.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/nccl/group_launch.hpp"
#include "bench/nccl/nccl_backend_internal.hpp"
#include "kernels/p2p_kernels.hpp"

namespace cclbench::nccl_detail {

std::string NcclBackend::rank_text() const {
  std::string ranks;
  for (const LocalGpu& gpu : gpus_) ranks += (ranks.empty() ? "" : ",") + std::to_string(gpu.rank);
  return "rank " + ranks + " on host " + mpi_.hostname;
}

std::string NcclBackend::where(const CaseSpec& spec, const char* phase) const {
  return "case " + spec.case_id() + ", size " + std::to_string(spec.counts.size_bytes()) + " B, " + phase + ", " + rank_text();
}

void NcclBackend::fail(ExitCode code, const std::string& message) {
  // Nothing may wait on these communicators any more (not even our destructor).
  comms_.abort_all();
  throw FatalError(code, message);
}

void NcclBackend::stop_after_abort(const CaseSpec& spec, const char* phase) {
  if (comms_.state() != Communicators::State::aborted_here) {
    // The -T watchdog aborted the communicators and is calling MPI_Abort: let it end the process,
    // so the run's status and exit code are the watchdog's, not those of a second error here.
    std::this_thread::sleep_for(std::chrono::seconds(60));
    throw FatalError(ExitCode::timeout, "the NCCL communicators were aborted from another thread (-T watchdog) (" +
                                            where(spec, phase) + ")");
  }
  throw FatalError(ExitCode::runtime_error, "the NCCL communicators were aborted after an earlier error (" + where(spec, phase) + ")");
}

void NcclBackend::abort_communication() noexcept {
  const std::string note = comms_.abort_from_any_thread();
  if (!note.empty()) {
    try {
      std::fprintf(stderr, "cclbench: note: %s (%s)\n", note.c_str(), rank_text().c_str());
    } catch (...) {
    }
  }
}

void NcclBackend::cuda_or_fail(cudaError_t result, const char* what, const CaseSpec& spec, const char* phase) {
  if (result != cudaSuccess) fail(ExitCode::runtime_error, std::string(what) + ": " + cudaGetErrorString(result) + " (" + where(spec, phase) + ")");
}

NcclBackend::Pointers NcclBackend::pointers(const CaseSpec& spec, const LocalGpu& gpu, std::uint64_t shift_bytes) const {
  const CasePointers p = case_pointers(spec, gpu.send_base, gpu.recv_base, gpu.rank, shift_bytes, config_.unalign_elements);
  return {p.send, p.recv};
}

// One iteration on every local GPU, in one group (GroupLauncher, bench/nccl/group_launch.hpp),
// under the communicators' lock.
void NcclBackend::launch(const CaseSpec& spec, int iteration, int ops) {
  LaunchResult result;
  std::string last_error;
  {
    Communicators::Use use(comms_);
    if (!use.live()) {
      result = {ncclInvalidUsage, "ncclGroupStart", 0};
    } else {
      result = launcher_.launch(spec, iteration, ops);
      if (result.result != ncclSuccess) {
        const char* last = ncclGetLastError(comms_.handles()[result.target]);
        if (last != nullptr) last_error = last;
      }
    }
  }
  if (comms_.stopping()) stop_after_abort(spec, "launch");
  if (result.result != ncclSuccess) {
    fail(ExitCode::runtime_error, std::string(result.call) + ": " + ncclGetErrorString(result.result) +
                                      (last_error.empty() ? "" : ": " + last_error) + " (" + where(spec, "launch") + ")");
  }
  // The slowdown test knob: real GPU time on the timed stream, inside whatever is timed around it
  // (captured into a graph as a kernel node that reads its length when it runs).
  if (delay_every_ > 0 && iteration % delay_every_ == delay_every_ - 1) {
    for (const LocalGpu& gpu : gpus_) {
      cuda_or_fail(cudaSetDevice(gpu.device), "cudaSetDevice", spec, "launch");
      cuda_or_fail(kernels::launch_delay(static_cast<const unsigned long long*>(gpu.delay_cycles.get()), gpu.stream.get()),
                   "slowdown spin kernel launch", spec, "launch");
    }
  }
}

// Polls instead of blocking so that an NCCL async error ends the wait. The -T watchdog of the
// app ends a hang first (it names the phase and writes the run's status); the backend's own
// deadline, a little later, is the backstop for callers without a watchdog.
void NcclBackend::wait_for_completion(const CaseSpec& spec, const char* phase) {
  using Clock = std::chrono::steady_clock;
  const bool has_deadline = config_.timeout_seconds > 0;
  const double backstop_seconds = config_.timeout_seconds + std::max(2.0, 0.1 * config_.timeout_seconds);
  const Clock::time_point deadline =
      has_deadline ? Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(backstop_seconds))
                   : Clock::time_point::max();
  std::vector<char> done(gpus_.size(), 0);
  std::size_t remaining = gpus_.size();
  while (remaining > 0) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (done[i]) continue;
      const cudaError_t status = cudaStreamQuery(gpus_[i].stream.get());
      if (status == cudaSuccess) {
        done[i] = 1;
        --remaining;
        continue;
      }
      if (comms_.stopping()) stop_after_abort(spec, phase);
      if (status != cudaErrorNotReady) cuda_or_fail(status, "cudaStreamQuery", spec, phase);
      ncclResult_t async = ncclSuccess;
      ncclResult_t query = ncclSuccess;
      std::string last_error;
      {
        Communicators::Use use(comms_);
        if (!use.live()) continue;  // handled by the state check above on the next pass
        query = ncclCommGetAsyncError(comms_.handles()[i], &async);
        if (query != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
          const char* last = ncclGetLastError(comms_.handles()[i]);
          if (last != nullptr) last_error = last;
        }
      }
      if (query != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        const ncclResult_t error = query != ncclSuccess ? query : async;
        if (has_deadline && (error == ncclRemoteError || error == ncclSystemError)) {
          // Often the echo of a peer whose -T watchdog just aborted its communicator: give that
          // peer's MPI_Abort (exit 4, naming the case that hung) time to end the job first.
          std::this_thread::sleep_for(std::chrono::seconds(5));
        }
        fail(ExitCode::runtime_error, std::string("NCCL asynchronous error: ") + ncclGetErrorString(error) +
                                          (last_error.empty() ? "" : ": " + last_error) + " (" + where(spec, phase) + ", GPU " +
                                          gpus_[i].binding.pci_bus_id + ")");
      }
    }
    if (remaining == 0) break;
    if (has_deadline && Clock::now() > deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", config_.timeout_seconds);
      fail(ExitCode::timeout, std::string("timeout: the collective did not complete within ") + seconds + " s (-T) (" +
                                  where(spec, phase) + ")");
    }
    std::this_thread::yield();
  }
  // The streams may have drained because another thread aborted the communicators.
  if (comms_.stopping()) stop_after_abort(spec, phase);
}

}  // namespace cclbench::nccl_detail
