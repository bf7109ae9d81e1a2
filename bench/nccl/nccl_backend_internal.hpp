#pragma once
// The NCCL backend's class, shared by its source files (internal to bench/nccl; users include
// nccl_backend.hpp):
//   nccl_backend.cpp       set-up: devices, communicators, buffers, registration; the public functions
//   nccl_case_support.cpp  which cases this backend can run (unsupported_reason), measurement_mode
//   nccl_launch.cpp        one launch of every local GPU, waiting for completion, errors and aborts
//   nccl_timing.cpp        warm-up, the timed loop (eager, gated, graphs), the slowdown knob's calibration
//   nccl_verify.cpp        fill, the checked run, fault injection and the device-side count of wrong elements
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/group_launch.hpp"
#include "bench/nccl/nccl_backend.hpp"
#include "bench/nccl/nccl_communicators.hpp"

namespace cclbench::nccl_detail {

constexpr std::uint64_t kMiB = 1ull << 20;
// Left free on each GPU for what NCCL allocates lazily at the first collective per peer
// (connection and proxy buffers), so a sweep that fits now still fits after warm-up.
constexpr std::uint64_t kNcclReserveBytes = 1ull << 30;

inline std::string mib(std::uint64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

// Memory from ncclMemAlloc (-R 2: symmetric windows need it), freed with ncclMemFree.
class NcclMemory {
 public:
  NcclMemory() = default;
  NcclMemory(int device, std::size_t bytes, const std::string& where) : device_(device) {
    DeviceScope scope(device);
    const ncclResult_t result = ncclMemAlloc(&data_, bytes);
    if (result != ncclSuccess) {
      data_ = nullptr;
      throw FatalError(ExitCode::runtime_error, std::string("ncclMemAlloc(") + std::to_string(bytes) +
                                                    " B): " + ncclGetErrorString(result) + " (" + where + ")");
    }
  }
  ~NcclMemory() {
    if (data_ == nullptr) return;
    DeviceScope scope(device_);
    ncclMemFree(data_);
  }
  NcclMemory(NcclMemory&& other) noexcept { *this = std::move(other); }
  NcclMemory& operator=(NcclMemory&& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    return *this;
  }
  void* get() const { return data_; }

 private:
  int device_ = 0;
  void* data_ = nullptr;
};

struct LocalGpu {
  int device = 0;
  int rank = 0;
  LocalGpuBinding binding;
  std::string uuid;  // cudaDeviceProp::uuid's 16 bytes: one physical GPU, the same on every rank
  Stream stream;
  DeviceBuffer send;      // cudaMalloc (-R 0, 1)
  DeviceBuffer recv;
  NcclMemory nccl_send;   // ncclMemAlloc (-R 2)
  NcclMemory nccl_recv;
  void* send_base = nullptr;  // whichever of the two is in use
  void* recv_base = nullptr;
  void* send_handle = nullptr;  // -R 1: ncclCommRegister handles
  void* recv_handle = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  ncclWindow_t send_window = nullptr;  // -R 2
  ncclWindow_t recv_window = nullptr;
#endif
  DeviceBuffer scratch;  // wrong-element counter
  DeviceBuffer delay_cycles;  // the slowdown test knob's spin length (kernels::launch_delay)
  double cycles_per_us = 0;   // the SM clock's nominal rate: the calibration's first guess
  std::vector<Event> starts;
  std::vector<Event> stops;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(const Config& config, const MpiContext& mpi, std::optional<FaultInjection> injection,
              std::optional<SlowdownInjection> slowdown);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string name() const override { return "nccl"; }
  int nranks() const override { return nranks_; }
  bool emulated() const override { return config_.share_gpu; }
  MeasurementMode measurement_mode() const override;
  std::optional<std::string> unsupported_reason(const CaseSpec& spec) const override;
  void fill(const CaseSpec& spec, std::uint32_t rep) override;
  void warm_up(const CaseSpec& spec, int iterations) override;
  TimedIterations run_timed(const CaseSpec& spec, int iterations) override;
  void run_once(const CaseSpec& spec) override;
  std::int64_t count_wrong(const CaseSpec& spec, std::uint32_t rep) override;
  void abort_communication() noexcept override;

  std::vector<LocalGpuBinding> bindings() const {
    std::vector<LocalGpuBinding> out;
    for (const LocalGpu& gpu : gpus_) out.push_back(gpu.binding);
    return out;
  }

 private:
  struct Pointers {
    const void* send;
    void* recv;
  };

  std::string rank_text() const;
  std::string where(const CaseSpec& spec, const char* phase) const;
  [[noreturn]] void fail(ExitCode code, const std::string& message);
  // Called when the communicators are no longer usable at the start of an NCCL call.
  [[noreturn]] void stop_after_abort(const CaseSpec& spec, const char* phase);
  void cuda_or_fail(cudaError_t result, const char* what, const CaseSpec& spec, const char* phase);
  Pointers pointers(const CaseSpec& spec, const LocalGpu& gpu, std::uint64_t shift_bytes) const;
  // One iteration: `ops` collectives (-m) on every local GPU, in one group.
  void launch(const CaseSpec& spec, int iteration, int ops);
  void wait_for_completion(const CaseSpec& spec, const char* phase);
  void ensure_events(std::size_t count);
  void record(std::vector<Event> LocalGpu::*events, std::size_t index, const CaseSpec& spec, unsigned flags);
  double max_elapsed_us(std::size_t index, const CaseSpec& spec);
  void run_gated(const CaseSpec& spec, std::size_t count, bool per_iteration_events);
  // Runs `queue` (it records the events and queues the work on every local GPU) behind a blocker kernel on every
  // local GPU, releases the blocker once every rank has queued, and waits for the work.
  void behind_blocker(const CaseSpec& spec, const char* phase, const char* in_front_of,
                      const std::function<void()>& queue);
  bool can_gate(std::size_t queued_launches) const;
  TimedIterations run_timed_graph(const CaseSpec& spec, int iterations);
  // One graph per local GPU holding `iterations` launches of `ops` collectives each, with an
  // event-record node pair around each iteration when `instrumented`; instantiated and uploaded.
  std::vector<Graph> capture(const CaseSpec& spec, int iterations, int ops, bool instrumented);
  void replay(const std::vector<Graph>& graphs, int times, const CaseSpec& spec, const char* phase);
  // Ranks that share a GPU create their CUDA contexts in turns, in world-rank order (collective over
  // the world; nothing waits when no GPU is shared). See bench/nccl/context_turns.hpp.
  void create_contexts_in_turns(const std::string& who);
  void register_buffers(const std::string& who);
  void release_registrations() noexcept;
  void inject_faults(const CaseSpec& spec);
  // The slowdown test knob: calibrates the spin for this case (every rank agrees on the times).
  void calibrate_slowdown(const CaseSpec& spec, int iterations);
  // The GPU time per collective of one uninstrumented timed batch (eager behind the blocker, or the
  // -G replays), the max over ranks: the probe of the calibration.
  double probe_time_us(const CaseSpec& spec, int iterations);

  Config config_;
  MpiContext mpi_;
  int nranks_ = 0;
  int min_compute_capability_ = 0;  // 10*major + minor, minimum over every GPU of every rank
  int nccl_runtime_version_ = 0;    // ncclGetVersion of the loaded library (the same on every rank)
  std::uint64_t wanted_buffer_bytes_ = 0;
  std::uint64_t buffer_bytes_ = 0;  // per send and per receive buffer, the same on every rank
  std::uint64_t min_free_bytes_ = 0;
  int max_sharing_ = 1;
  bool native_alltoall_ = false;  // ncclAlltoAll: NCCL >= 2.28 at build and at run time
  std::uint64_t unalign_pad_bytes_ = 0;  // -u: extra bytes allocated per buffer
  // -R that NCCL refused (the same text on every rank): every case is skipped with it.
  std::optional<std::string> registration_failure_;
  bool registered_ = false;  // handles/windows to release before the communicators go
  // mulsum per data type: nullopt when ncclRedOpCreatePreMulSum accepts it, else NCCL's reason.
  mutable std::vector<std::pair<DataType, std::optional<std::string>>> premulsum_support_;
  std::vector<LocalGpu> gpus_;
  GroupLauncher launcher_;  // built once the communicators and buffers exist
  PinnedBuffer wrong_host_;
  std::optional<FaultInjection> injection_;  // test hook (CCLBENCH_INJECT_WRONG), off when empty
  std::optional<SlowdownInjection> slowdown_;  // test knob (CCLBENCH_INJECT_SLOWDOWN), off when empty
  int delay_every_ = 0;  // > 0: a spin kernel after every delay_every_-th iteration (the knob, calibrated)
  PinnedBuffer gate_words_;  // [0]: release flag for the blocker kernel, [1]: set by it on timeout
  Communicators comms_;  // declared last: destroyed (or aborted) before the buffers and streams
};

}  // namespace cclbench::nccl_detail
