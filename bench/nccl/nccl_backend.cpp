#include "bench/nccl/nccl_backend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/element_codec.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/pattern.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/group_launch.hpp"
#include "kernels/p2p_kernels.hpp"
#include "kernels/pattern_kernels.hpp"

namespace cclbench {
namespace {

constexpr std::uint64_t kBufferAlignment = 4096;
constexpr std::uint64_t kMiB = 1ull << 20;
// Left free on each GPU for what NCCL allocates lazily at the first collective per peer
// (connection and proxy buffers), so a sweep that fits now still fits after warm-up.
constexpr std::uint64_t kNcclReserveBytes = 1ull << 30;
constexpr std::size_t kScratchBytes = 256;  // the device-side wrong-element counter
constexpr int kBusIdChars = 32;
// Timed iterations queued behind the blocker kernel at most (CUDA's launch queue holds about a
// thousand launches; every iteration is two events and one or a few kernels per GPU).
constexpr int kMaxGatedIterations = 200;
constexpr std::uint64_t kGateTimeoutNs = 30ull * 1000 * 1000 * 1000;

bool is_fp8(DataType dtype) { return dtype == DataType::fp8_e4m3 || dtype == DataType::fp8_e5m2; }

// The op the pattern is built for: data-movement collectives carry no op.
ReduceOp pattern_op(const CaseSpec& spec) {
  return descriptor_of(spec.collective).reduces ? spec.op : ReduceOp::none;
}

CompareMode compare_mode(const CaseSpec& spec) {
  return verification_mode(spec) == "tolerance" ? CompareMode::tolerance : CompareMode::exact;
}

std::string mib(std::uint64_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

std::uint64_t round_up(std::uint64_t value, std::uint64_t granule) { return (value + granule - 1) / granule * granule; }

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

struct AgreedError {
  ExitCode code;
  std::string message;
};

// Every rank learns the error of the lowest world rank that has one, so all ranks leave a
// collective decision point together instead of some waiting forever in the next collective.
std::optional<AgreedError> agree_on_error(const MpiContext& mpi, const std::optional<AgreedError>& local) {
  const int mine = local ? mpi.world_rank : INT_MAX;
  int first = INT_MAX;
  mpi_check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, mpi.world), "MPI_Allreduce(error rank)", mpi);
  if (first == INT_MAX) return std::nullopt;
  int header[2] = {0, 0};
  if (mine == first) {
    header[0] = to_int(local->code);
    header[1] = static_cast<int>(local->message.size());
  }
  mpi_check(MPI_Bcast(header, 2, MPI_INT, first, mpi.world), "MPI_Bcast(error header)", mpi);
  std::string message(static_cast<std::size_t>(header[1]), '\0');
  if (mine == first) message = local->message;
  mpi_check(MPI_Bcast(message.data(), header[1], MPI_CHAR, first, mpi.world), "MPI_Bcast(error message)", mpi);
  return AgreedError{static_cast<ExitCode>(header[0]), message};
}

void throw_if_agreed_error(const MpiContext& mpi, const std::optional<AgreedError>& local) {
  if (const auto agreed = agree_on_error(mpi, local)) throw FatalError(agreed->code, agreed->message);
}

struct BusIdRecord {
  char bus_id[kBusIdChars];
  int world_rank;
  int device;
};

struct UniqueIdMessage {
  int ok;
  char error[256];
  ncclUniqueId id;
};

struct LocalGpu {
  int device = 0;
  int rank = 0;
  LocalGpuBinding binding;
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

// Owns the communicators: destroyed normally, or aborted after an error (a destroy could wait
// for peers that will never come).
//
// Thread safety. The main thread makes every NCCL call on these communicators while holding
// `use_` (see Use). The watchdog thread may call abort_from_any_thread() at any time: it takes
// `use_` (waiting at most kAbortLockWait for an NCCL call of the main thread to return), marks the
// communicators aborted and calls ncclCommAbort on each, so no communicator is freed while the main
// thread is inside NCCL. If the main thread stays inside a blocking NCCL call (a connection waiting
// for a stalled peer), ncclCommAbort is skipped: the caller's MPI_Abort ends the process, and the
// main thread never touches the communicators again (Use sees the mark).
class Communicators {
 public:
  enum class State { live, aborted_here, aborted_elsewhere };

  Communicators() = default;
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    if (stopping()) return;
    if (std::uncaught_exceptions() > 0) {
      abort_all();
      return;
    }
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }
  std::vector<ncclComm_t>& handles() { return comms_; }
  const std::vector<ncclComm_t>& handles() const { return comms_; }
  State state() const { return state_.load(); }

  // The main thread's licence to call NCCL: holds the lock, and tells whether the communicators
  // are still usable.
  class Use {
   public:
    explicit Use(Communicators& owner) : lock_(owner.use_, std::defer_lock) {
      // Once an abort is requested the main thread stops taking the lock, so the aborting thread
      // gets it at the next release (std::timed_mutex promises no fairness).
      if (owner.abort_requested_.load()) return;
      lock_.lock();
      live_ = owner.state_.load() == State::live;
    }
    bool live() const { return live_; }

   private:
    std::unique_lock<std::timed_mutex> lock_;
    bool live_ = false;
  };

  // True once the communicators are aborted or an abort from another thread is under way: the
  // main thread makes no further NCCL call.
  bool stopping() const { return abort_requested_.load() || state_.load() != State::live; }

  // On the thread that makes the NCCL calls, after an error it detected itself.
  void abort_all() noexcept {
    State expected = State::live;
    if (!state_.compare_exchange_strong(expected, State::aborted_here)) return;
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommAbort(comm);
    }
  }

  // From the -T watchdog thread, or from the main thread when it holds no Use. Returns a note
  // when ncclCommAbort could not run or did not return in time; empty otherwise.
  std::string abort_from_any_thread() noexcept {
    abort_requested_.store(true);
    std::unique_lock<std::timed_mutex> lock(use_, std::defer_lock);
    const bool locked = lock.try_lock_for(kAbortLockWait);
    State expected = State::live;
    if (!state_.compare_exchange_strong(expected, State::aborted_elsewhere)) return {};  // already aborted
    if (!locked) return "the main thread is blocked inside an NCCL call; ncclCommAbort skipped, MPI_Abort ends the process";
    // ncclCommAbort normally returns quickly (kernels poll its abort flag); it must not keep the
    // watchdog from calling MPI_Abort if it does not.
    try {
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread([comms = comms_, done] {
        for (ncclComm_t comm : comms) {
          if (comm != nullptr) ncclCommAbort(comm);
        }
        done->store(true);
      }).detach();
      const auto give_up = std::chrono::steady_clock::now() + kAbortReturnWait;
      while (!done->load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!done->load()) return "ncclCommAbort did not return within 10 s; MPI_Abort ends the process";
    } catch (const std::exception& error) {
      return std::string("could not start ncclCommAbort: ") + error.what();
    }
    return {};
  }

 private:
  static constexpr std::chrono::seconds kAbortLockWait{2};
  static constexpr std::chrono::seconds kAbortReturnWait{10};
  std::vector<ncclComm_t> comms_;
  std::timed_mutex use_;
  std::atomic<State> state_{State::live};
  std::atomic<bool> abort_requested_{false};
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
  bool can_gate(std::size_t queued_launches) const;
  TimedIterations run_timed_graph(const CaseSpec& spec, int iterations);
  // One graph per local GPU holding `iterations` launches of `ops` collectives each, with an
  // event-record node pair around each iteration when `instrumented`; instantiated and uploaded.
  std::vector<Graph> capture(const CaseSpec& spec, int iterations, int ops, bool instrumented);
  void replay(const std::vector<Graph>& graphs, int times, const CaseSpec& spec, const char* phase);
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

NcclBackend::NcclBackend(const Config& config, const MpiContext& mpi, std::optional<FaultInjection> injection,
                         std::optional<SlowdownInjection> slowdown)
    : config_(config), mpi_(mpi), injection_(std::move(injection)), slowdown_(std::move(slowdown)) {
  prepare_nccl_environment(config_, mpi_);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (int version = 0; ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 28, 0)) native_alltoall_ = true;
#endif
  const int per_process = config_.gpus_per_process;
  if (per_process < 1) throw UsageError("-g must be at least 1 (got " + std::to_string(per_process) + ")");
  nranks_ = mpi_.world_size * per_process;
  const std::string who = "host " + mpi_.hostname + ", world rank " + std::to_string(mpi_.world_rank) + " (local rank " +
                          std::to_string(mpi_.local_rank) + " of " + std::to_string(mpi_.local_size) + ")";

  // 1. Which devices this process drives.
  std::optional<AgreedError> local_error;
  std::string count_error;
  const int visible = visible_gpu_count(&count_error);
  const char* visible_env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string visible_text =
      std::to_string(visible) + " visible (CUDA_VISIBLE_DEVICES=" + (visible_env ? visible_env : "<unset>") + ")";
  std::vector<int> devices;
  if (visible == 0) {
    local_error = AgreedError{ExitCode::nothing_measured,
                              who + ": no CUDA device for the NCCL backend: " + (count_error.empty() ? "none visible" : count_error)};
  } else if (config_.share_gpu) {
    for (int i = 0; i < per_process; ++i) devices.push_back((mpi_.local_rank * per_process + i) % visible);
  } else if (visible == per_process) {
    // Either the only process on this node, or the launcher bound each rank to its own GPUs
    // (Slurm, CUDA_VISIBLE_DEVICES per rank): the bus-id check below tells the two apart.
    for (int i = 0; i < per_process; ++i) devices.push_back(i);
  } else if ((mpi_.local_rank + 1) * per_process > visible) {
    local_error = AgreedError{ExitCode::usage, who + " " + too_few_gpus_message(visible_text, visible, per_process,
                                                                              mpi_.local_rank, mpi_.local_size)};
  } else {
    for (int i = 0; i < per_process; ++i) devices.push_back(mpi_.local_rank * per_process + i);
  }
  for (std::size_t i = 0; !local_error && i < devices.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (devices[i] == devices[j]) {
        local_error = AgreedError{ExitCode::usage, who + " would drive two NCCL ranks on device " + std::to_string(devices[i]) +
                                                       " (" + visible_text + "): NCCL refuses that within one process; use -g " +
                                                       std::to_string(std::max(1, visible)) + " or fewer"};
        break;
      }
    }
  }
  // 2. Device properties.
  int min_cc_here = INT_MAX;
  for (std::size_t i = 0; !local_error && i < devices.size(); ++i) {
    LocalGpu gpu;
    gpu.device = devices[i];
    gpu.rank = mpi_.world_rank * per_process + static_cast<int>(i);
    cudaDeviceProp prop{};
    char bus_id[kBusIdChars] = {};
    cudaError_t result = cudaGetDeviceProperties(&prop, gpu.device);
    if (result == cudaSuccess) result = cudaDeviceGetPCIBusId(bus_id, kBusIdChars, gpu.device);
    if (result != cudaSuccess) {
      local_error = AgreedError{ExitCode::runtime_error, who + ": cannot query device " + std::to_string(gpu.device) + ": " +
                                                             cudaGetErrorString(result)};
      break;
    }
    gpu.binding = {gpu.rank, gpu.device, bus_id, prop.name, prop.major, prop.minor};
    min_cc_here = std::min(min_cc_here, prop.major * 10 + prop.minor);
    gpus_.push_back(std::move(gpu));
  }
  throw_if_agreed_error(mpi_, local_error);

  // 3. Two ranks on one GPU (every rank of the node sees the same table, so the same message).
  std::vector<BusIdRecord> mine(gpus_.size());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    std::memset(&mine[i], 0, sizeof(BusIdRecord));
    std::strncpy(mine[i].bus_id, gpus_[i].binding.pci_bus_id.c_str(), kBusIdChars - 1);
    mine[i].world_rank = mpi_.world_rank;
    mine[i].device = gpus_[i].device;
  }
  std::vector<BusIdRecord> node_table = mine;
  if (mpi_.node != MPI_COMM_NULL && mpi_.local_size > 1) {
    node_table.resize(mine.size() * static_cast<std::size_t>(mpi_.local_size));
    const int bytes = static_cast<int>(mine.size() * sizeof(BusIdRecord));
    mpi_check(MPI_Allgather(mine.data(), bytes, MPI_BYTE, node_table.data(), bytes, MPI_BYTE, mpi_.node),
              "MPI_Allgather(GPU bus ids)", mpi_);
  }
  for (std::size_t a = 0; a < node_table.size() && !local_error; ++a) {
    for (std::size_t b = a + 1; b < node_table.size(); ++b) {
      if (std::strncmp(node_table[a].bus_id, node_table[b].bus_id, kBusIdChars) != 0) continue;
      if (node_table[a].world_rank == node_table[b].world_rank) continue;  // caught above
      if (!config_.share_gpu) {
        local_error = AgreedError{
            ExitCode::usage, "host " + mpi_.hostname + ": world ranks " + std::to_string(node_table[a].world_rank) + " and " +
                                 std::to_string(node_table[b].world_rank) + " both use GPU " + node_table[a].bus_id +
                                 " (their device " + std::to_string(node_table[a].device) + " and " +
                                 std::to_string(node_table[b].device) + "; " + visible_text +
                                 "): give each rank its own GPU, or pass --share-gpu for a correctness-only run"};
      }
      break;
    }
  }
  for (const LocalGpu& gpu : gpus_) {
    const int sharing = static_cast<int>(std::count_if(node_table.begin(), node_table.end(), [&](const BusIdRecord& record) {
      return gpu.binding.pci_bus_id == record.bus_id;
    }));
    max_sharing_ = std::max(max_sharing_, sharing);
  }
  throw_if_agreed_error(mpi_, local_error);

  // 4. fp8 support must be the same answer on every rank: the minimum compute capability.
  mpi_check(MPI_Allreduce(&min_cc_here, &min_compute_capability_, 1, MPI_INT, MPI_MIN, mpi_.world),
            "MPI_Allreduce(compute capability)", mpi_);

  if (ncclGetVersion(&nccl_runtime_version_) != ncclSuccess) nccl_runtime_version_ = 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &nccl_runtime_version_, 1, MPI_INT, MPI_MIN, mpi_.world),
            "MPI_Allreduce(NCCL version)", mpi_);

  // 5. Communicators: one unique id from world rank 0, one ncclCommInitRank per local GPU, all
  // in one group (a single thread drives them).
  UniqueIdMessage unique{};
  if (mpi_.world_rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&unique.id);
    unique.ok = result == ncclSuccess;
    if (!unique.ok) std::snprintf(unique.error, sizeof unique.error, "ncclGetUniqueId: %s", ncclGetErrorString(result));
  }
  mpi_check(MPI_Bcast(&unique, sizeof unique, MPI_BYTE, 0, mpi_.world), "MPI_Bcast(NCCL unique id)", mpi_);
  if (!unique.ok) throw FatalError(ExitCode::runtime_error, std::string(unique.error) + " (on world rank 0)");

  // -x: nccl-tests sets ncclConfig_t.CTAPolicy (NCCL 2.27+; policy 2, zero, 2.28+). The version
  // is the minimum over all ranks, so every rank refuses together.
  if (config_.cta_policy >= 0) {
    const int needed = config_.cta_policy >= 2 ? NCCL_VERSION(2, 28, 0) : NCCL_VERSION(2, 27, 0);
    if (NCCL_VERSION_CODE < needed || nccl_runtime_version_ < needed) {
      throw FatalError(ExitCode::usage, "-x " + std::to_string(config_.cta_policy) + ": ncclConfig_t.CTAPolicy " +
                                            (config_.cta_policy >= 2 ? "2 needs NCCL 2.28" : "needs NCCL 2.27") +
                                            " or newer (built with " + std::to_string(NCCL_VERSION_CODE) + ", running " +
                                            std::to_string(nccl_runtime_version_) + ")");
    }
  }
  if (config_.registration == Registration::symmetric &&
      (NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0) || nccl_runtime_version_ < NCCL_VERSION(2, 27, 0))) {
    throw FatalError(ExitCode::usage, "-R 2: ncclCommWindowRegister needs NCCL 2.27 or newer (running " +
                                          std::to_string(nccl_runtime_version_) + "); use -R 1");
  }
  for (LocalGpu& gpu : gpus_) gpu.stream = Stream(gpu.device, who + ", device " + std::to_string(gpu.device));
  comms_.handles().assign(gpus_.size(), nullptr);
  ncclResult_t init_result = ncclGroupStart();
  int failed_index = -1;
  for (std::size_t i = 0; i < gpus_.size() && init_result == ncclSuccess; ++i) {
    cuda_check(cudaSetDevice(gpus_[i].device), "cudaSetDevice", who);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (config_.cta_policy >= 0) {
      ncclConfig_t comm_config = NCCL_CONFIG_INITIALIZER;
      comm_config.CTAPolicy = config_.cta_policy;
      init_result = ncclCommInitRankConfig(&comms_.handles()[i], nranks_, unique.id, gpus_[i].rank, &comm_config);
    } else {
      init_result = ncclCommInitRank(&comms_.handles()[i], nranks_, unique.id, gpus_[i].rank);
    }
#else
    init_result = ncclCommInitRank(&comms_.handles()[i], nranks_, unique.id, gpus_[i].rank);
#endif
    if (init_result != ncclSuccess) failed_index = static_cast<int>(i);
  }
  const ncclResult_t group_result = ncclGroupEnd();
  if (init_result == ncclSuccess) init_result = group_result;
  if (init_result != ncclSuccess) {
    const ncclComm_t comm = failed_index >= 0 ? nullptr : comms_.handles().front();
    const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
    comms_.abort_all();
    throw FatalError(ExitCode::runtime_error, "ncclCommInitRank (" + std::to_string(nranks_) + " ranks): " +
                                                  ncclGetErrorString(init_result) + (last && *last ? std::string(": ") + last : "") +
                                                  " (" + who + ")");
  }

  // 6. Buffers: send and receive each sized for the largest message of the sweep, allocated once,
  // plus nccl-tests' -u pad (8 bytes, the largest element, per misaligned element),
  // shrunk (the same on every rank) when free memory after NCCL init cannot hold them.
  unalign_pad_bytes_ = 8ull * static_cast<std::uint64_t>(config_.unalign_elements);
  wanted_buffer_bytes_ = round_up(std::max<std::uint64_t>(config_.max_bytes, 1), kBufferAlignment);
  std::uint64_t fit_here = UINT64_MAX;
  std::uint64_t free_here = UINT64_MAX;
  for (const LocalGpu& gpu : gpus_) {
    DeviceScope scope(gpu.device);
    std::size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", who);
    const std::uint64_t share = free_bytes / static_cast<std::uint64_t>(max_sharing_);
    free_here = std::min<std::uint64_t>(free_here, share);
    const std::uint64_t reserved = kNcclReserveBytes + kScratchBytes + 2 * unalign_pad_bytes_;
    const std::uint64_t usable = share > reserved ? share - reserved : 0;
    fit_here = std::min<std::uint64_t>(fit_here, usable / 2 / kBufferAlignment * kBufferAlignment);
  }
  std::uint64_t fit = 0;
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  mpi_check(MPI_Allreduce(&fit_here, &fit, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, mpi_.world), "MPI_Allreduce(buffer fit)", mpi_);
  mpi_check(MPI_Allreduce(&free_here, &min_free_bytes_, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, mpi_.world),
            "MPI_Allreduce(free memory)", mpi_);
  buffer_bytes_ = std::min(wanted_buffer_bytes_, fit);
  if (buffer_bytes_ < wanted_buffer_bytes_ && mpi_.world_rank == 0) {
    // nccl-tests' behaviour: shrink the buffers to what fits and say so; larger sizes are then
    // skipped, each with its reason in the results.
    std::fprintf(stderr,
                 "cclbench: note: -e %llu B needs 2 x %s of device buffers per rank, but the smallest free device memory "
                 "per rank after NCCL init is %s (%s kept for NCCL connections): buffers reduced to 2 x %s, larger sizes are "
                 "skipped\n",
                 static_cast<unsigned long long>(config_.max_bytes), mib(wanted_buffer_bytes_).c_str(), mib(min_free_bytes_).c_str(),
                 mib(kNcclReserveBytes).c_str(), mib(buffer_bytes_).c_str());
  }
  // Device memory per rank: send + receive buffers of the largest message and a few bytes of
  // counters, within the 3 x largest message + 64 MiB budget. An allocation failure (another
  // process took the memory meanwhile) is one clear error on every rank, not a crash.
  const std::size_t allocation =
      static_cast<std::size_t>(round_up(std::max(buffer_bytes_, kBufferAlignment) + unalign_pad_bytes_, kBufferAlignment));
  try {
    for (LocalGpu& gpu : gpus_) {
      const std::string buffer_where = who + ", device " + std::to_string(gpu.device);
      if (config_.registration == Registration::symmetric) {
        gpu.nccl_send = NcclMemory(gpu.device, allocation, buffer_where);
        gpu.nccl_recv = NcclMemory(gpu.device, allocation, buffer_where);
        gpu.send_base = gpu.nccl_send.get();
        gpu.recv_base = gpu.nccl_recv.get();
      } else {
        gpu.send = DeviceBuffer(gpu.device, allocation, buffer_where);
        gpu.recv = DeviceBuffer(gpu.device, allocation, buffer_where);
        gpu.send_base = gpu.send.get();
        gpu.recv_base = gpu.recv.get();
      }
      gpu.scratch = DeviceBuffer(gpu.device, kScratchBytes, buffer_where);
    }
  } catch (const FatalError& error) {
    local_error = AgreedError{ExitCode::runtime_error, std::string("cannot allocate 2 x ") + mib(allocation) +
                                                           " of device buffers: " + error.what() + "; lower -e"};
  }
  if (const auto agreed = agree_on_error(mpi_, local_error)) {
    comms_.abort_all();  // a peer may already have given up: never wait for it in ncclCommDestroy
    throw FatalError(agreed->code, agreed->message);
  }
  wrong_host_ = PinnedBuffer(gpus_.size() * sizeof(unsigned long long), who);
  gate_words_ = PinnedBuffer(2 * sizeof(int), who);  // pinned host memory is device-visible under UVA
  if (slowdown_) {
    for (LocalGpu& gpu : gpus_) {
      gpu.delay_cycles = DeviceBuffer(gpu.device, sizeof(unsigned long long), who);
      int khz = 0;
      if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, gpu.device) != cudaSuccess || khz <= 0) {
        (void)cudaGetLastError();
        khz = 1'500'000;  // only the first guess of a calibration that corrects itself by measurement
      }
      gpu.cycles_per_us = khz / 1000.0;
    }
  }
  register_buffers(who);
  std::vector<LaunchTarget> targets;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    targets.push_back({comms_.handles()[i], gpus_[i].stream.get(), gpus_[i].send_base, gpus_[i].recv_base, gpus_[i].rank});
  }
  launcher_ = GroupLauncher(real_nccl_calls(native_alltoall_), std::move(targets), nranks_, buffer_bytes_, config_.unalign_elements);
  if (!gpus_.empty()) cuda_check(cudaSetDevice(gpus_.front().device), "cudaSetDevice", who);
}

// -R 1: ncclCommRegister of each whole buffer (local, no communication); -R 2: the buffers from
// ncclMemAlloc registered as symmetric windows (collective over the communicator: one group for
// every local GPU). Where NCCL refuses, the lowest failing rank's reason is agreed on and every
// case is skipped with it; the run itself goes on.
void NcclBackend::register_buffers(const std::string& who) {
  if (config_.registration == Registration::none) return;
  std::optional<AgreedError> local_error;
  auto note = [&](ncclResult_t result, const char* call, std::size_t i) {
    if (result == ncclSuccess || local_error) return;
    const char* last = ncclGetLastError(comms_.handles()[i]);
    local_error = AgreedError{ExitCode::runtime_error, std::string(call) + ": " + ncclGetErrorString(result) +
                                                           (last && *last ? std::string(": ") + last : "") + " (" + who + ")"};
  };
  const std::size_t bytes = static_cast<std::size_t>(
      round_up(std::max(buffer_bytes_, kBufferAlignment) + unalign_pad_bytes_, kBufferAlignment));
  if (config_.registration == Registration::local) {
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      LocalGpu& gpu = gpus_[i];
      DeviceScope scope(gpu.device);
      note(ncclCommRegister(comms_.handles()[i], gpu.send_base, bytes, &gpu.send_handle), "ncclCommRegister", i);
      note(ncclCommRegister(comms_.handles()[i], gpu.recv_base, bytes, &gpu.recv_handle), "ncclCommRegister", i);
    }
  } else {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    ncclResult_t result = ncclGroupStart();
    note(result, "ncclGroupStart", 0);
    for (std::size_t i = 0; i < gpus_.size() && result == ncclSuccess; ++i) {
      LocalGpu& gpu = gpus_[i];
      DeviceScope scope(gpu.device);
      result = ncclCommWindowRegister(comms_.handles()[i], gpu.send_base, bytes, &gpu.send_window, NCCL_WIN_COLL_SYMMETRIC);
      note(result, "ncclCommWindowRegister", i);
      if (result == ncclSuccess) {
        result = ncclCommWindowRegister(comms_.handles()[i], gpu.recv_base, bytes, &gpu.recv_window, NCCL_WIN_COLL_SYMMETRIC);
        note(result, "ncclCommWindowRegister", i);
      }
    }
    note(ncclGroupEnd(), "ncclGroupEnd (ncclCommWindowRegister)", 0);
#endif
  }
  registered_ = true;  // whatever succeeded is released in the destructor
  if (const auto agreed = agree_on_error(mpi_, local_error)) {
    registration_failure_ = "-R " + std::to_string(static_cast<int>(config_.registration)) + " (" +
                            std::string(name_of(config_.registration)) + " registration) refused by NCCL: " + agreed->message;
  }
}

void NcclBackend::release_registrations() noexcept {
  if (!registered_ || comms_.stopping()) return;  // aborted communicators own nothing any more
  registered_ = false;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    LocalGpu& gpu = gpus_[i];
    if (gpu.send_handle) ncclCommDeregister(comms_.handles()[i], gpu.send_handle);
    if (gpu.recv_handle) ncclCommDeregister(comms_.handles()[i], gpu.recv_handle);
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  if (config_.registration == Registration::symmetric) {
    // Collective, like the registration: every rank reaches here at the end of a normal run.
    ncclGroupStart();
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      if (gpus_[i].send_window) ncclCommWindowDeregister(comms_.handles()[i], gpus_[i].send_window);
      if (gpus_[i].recv_window) ncclCommWindowDeregister(comms_.handles()[i], gpus_[i].recv_window);
    }
    ncclGroupEnd();
  }
#endif
}

NcclBackend::~NcclBackend() {
  // After an error the communicators are aborted (Communicators' destructor); nothing to release.
  if (std::uncaught_exceptions() == 0) release_registrations();
}

MeasurementMode NcclBackend::measurement_mode() const {
  MeasurementMode mode;
  mode.graph_launches = config_.graph_launches;
  mode.ops_per_launch = config_.ops_per_launch;
  mode.registration = std::string(name_of(config_.registration));
  mode.unalign_elements = config_.unalign_elements;
  if (config_.cta_policy >= 0) mode.cta_policy = config_.cta_policy;
  return mode;
}

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

std::optional<std::string> NcclBackend::unsupported_reason(const CaseSpec& spec) const {
  const CollectiveDescriptor& descriptor = descriptor_of(spec.collective);
  if (spec.nranks != nranks_) {
    return "case is for " + std::to_string(spec.nranks) + " ranks, the NCCL communicator has " + std::to_string(nranks_);
  }
  if (is_fp8(spec.dtype) && (NCCL_VERSION_CODE < NCCL_VERSION(2, 24, 0) || nccl_runtime_version_ < NCCL_VERSION(2, 24, 0))) {
    return std::string(name_of(spec.dtype)) + " needs NCCL 2.24 or newer (built with " + std::to_string(NCCL_VERSION_CODE) +
           ", running " + std::to_string(nccl_runtime_version_) + ")";
  }
  if (is_fp8(spec.dtype) && min_compute_capability_ < 90) {
    return std::string(name_of(spec.dtype)) + " needs compute capability 9.0 or newer on every GPU (lowest here: " +
           std::to_string(min_compute_capability_ / 10) + "." + std::to_string(min_compute_capability_ % 10) + ")";
  }
  if (is_fp8(spec.dtype) && spec.op == ReduceOp::avg) {
    // Seen on NCCL 2.28.3 / H200: ncclAllReduce(..., ncclFloat8e4m3, ncclAvg) returns ncclInvalidArgument.
    return std::string(name_of(spec.dtype)) + " with avg: NCCL rejects ncclAvg on fp8 types (ncclInvalidArgument)";
  }
  if (is_fp8(spec.dtype) && spec.op == ReduceOp::mulsum) {
    // Seen on NCCL 2.28.3 / H200: ncclRedOpCreatePreMulSum succeeds for fp8, but the launch with that
    // op returns ncclInvalidArgument (as for ncclAvg, which NCCL runs as a premultiplied sum).
    return std::string(name_of(spec.dtype)) + " with mulsum: NCCL rejects PreMulSum on fp8 types at launch (ncclInvalidArgument)";
  }
  if (descriptor.reduces && spec.op == ReduceOp::none) return std::string(descriptor.display_name) + " needs a reduction op";
  if (registration_failure_) return *registration_failure_;
  if (descriptor.reduces && spec.op == ReduceOp::mulsum) {
    // Asked of NCCL once per data type (a local call: every rank gets the same answer from the
    // same library), so a type NCCL cannot premultiply is a skip with its reason, not a failed launch.
    auto known = std::find_if(premulsum_support_.begin(), premulsum_support_.end(),
                              [&](const auto& entry) { return entry.first == spec.dtype; });
    if (known == premulsum_support_.end()) {
      std::optional<std::string> reason;
      auto& self = const_cast<NcclBackend&>(*this);  // the cache is mutable; the call needs a live communicator
      Communicators::Use use(self.comms_);
      if (!use.live() || gpus_.empty()) return std::nullopt;  // aborted: the launch reports it, nothing cached
      {
        DeviceScope scope(gpus_.front().device);
        const NcclCalls calls = real_nccl_calls(native_alltoall_);
        const PremulSumOp probe(calls, spec.dtype, gpus_.front().rank, self.comms_.handles().front());
        if (probe.result() != ncclSuccess) {
          const char* last = ncclGetLastError(self.comms_.handles().front());
          reason = std::string("mulsum on ") + std::string(name_of(spec.dtype)) + ": ncclRedOpCreatePreMulSum: " +
                   ncclGetErrorString(probe.result()) + (last && *last ? std::string(": ") + last : "");
        }
      }
      known = premulsum_support_.insert(premulsum_support_.end(), {spec.dtype, reason});
    }
    if (known->second) return known->second;
  }
  if (descriptor.rooted && (spec.root < 0 || spec.root >= nranks_)) {
    return "root " + std::to_string(spec.root) + " is not a rank of " + std::to_string(nranks_);
  }
  if (spec.in_place && nranks_ > 1 && config_.check_iterations > 0 &&
      (spec.collective == Collective::alltoall || spec.collective == Collective::sendrecv)) {
    // On one buffer, blocks are overwritten while they may still be sent (NCCL promises nothing
    // in place for ncclAlltoAll or grouped send/recv): nccl-tests runs it but cannot check it.
    return "in-place " + std::string(descriptor.display_name) +
           " overwrites data it still has to send (NCCL defines no in-place result), so it cannot be verified; run with -c 0 to time it";
  }
  if (spec.counts.size_bytes() > buffer_bytes_) {
    return "needs 2 x " + mib(spec.counts.size_bytes()) + " of device buffers per rank but only 2 x " + mib(buffer_bytes_) +
           " fit (smallest free device memory per rank after NCCL init: " + mib(min_free_bytes_) + ", " +
           mib(kNcclReserveBytes) + " kept for NCCL connections)";
  }
  return std::nullopt;
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

void NcclBackend::fill(const CaseSpec& spec, std::uint32_t rep) {
  const PatternParams params = make_pattern(spec.dtype, pattern_op(spec), nranks_, rep);
  const CompareMode mode = compare_mode(spec);
  for (const LocalGpu& gpu : gpus_) {
    DeviceScope scope(gpu.device);
    const Pointers p = pointers(spec, gpu, 0);
    const RecvLayout layout{spec.collective, gpu.rank, spec.root, spec.counts.param_count};
    cuda_or_fail(launch_pattern_poison(p.recv, spec.counts.recv_count, params, layout, mode, gpu.stream.get()),
                 "poison kernel", spec, "fill");
    // In place, the send region lies inside the receive buffer: written after the poison.
    cuda_or_fail(launch_pattern_fill(const_cast<void*>(p.send), spec.counts.send_count, params, gpu.rank, 0, gpu.stream.get()),
                 "fill kernel", spec, "fill");
  }
  wait_for_completion(spec, "fill");
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
  volatile int* words = static_cast<volatile int*>(gate_words_.get());
  words[0] = 0;
  words[1] = 0;
  {
    kernels::BlockerRelease release(&words[0]);
    for (const LocalGpu& gpu : gpus_) {
      cuda_or_fail(cudaSetDevice(gpu.device), "cudaSetDevice", spec, "timed iterations");
      cuda_or_fail(kernels::launch_blocker(&words[0], const_cast<int*>(&words[1]), kGateTimeoutNs, gpu.stream.get()),
                   "blocker kernel launch", spec, "timed iterations");
    }
    if (!per_iteration_events) record(&LocalGpu::starts, 0, spec, 0);
    for (std::size_t iteration = 0; iteration < count; ++iteration) {
      if (per_iteration_events) record(&LocalGpu::starts, iteration, spec, 0);
      launch(spec, static_cast<int>(iteration), config_.ops_per_launch);
      if (per_iteration_events) record(&LocalGpu::stops, iteration, spec, 0);
    }
    if (!per_iteration_events) record(&LocalGpu::stops, 0, spec, 0);
    // Release only once every rank has queued: otherwise an early rank's first collective waits
    // for a peer that is still queueing, and that wait is timed as its first iteration (seen on
    // two H200 ranks: 128 us against 9 us for the rest).
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before releasing the blocker)", mpi_);
  }
  wait_for_completion(spec, "timed iterations");
  if (words[1] != 0) {
    fail(ExitCode::runtime_error, "the blocker kernel in front of the timed iterations timed out before the host released it (" +
                                      where(spec, "timed iterations") + ")");
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
    volatile int* words = static_cast<volatile int*>(gate_words_.get());
    words[0] = 0;
    words[1] = 0;
    {
      kernels::BlockerRelease release(&words[0]);
      for (const LocalGpu& gpu : gpus_) {
        cuda_or_fail(cudaSetDevice(gpu.device), "cudaSetDevice", spec, "gated graph replays");
        cuda_or_fail(kernels::launch_blocker(&words[0], const_cast<int*>(&words[1]), kGateTimeoutNs, gpu.stream.get()),
                     "blocker kernel launch", spec, "gated graph replays");
      }
      record(&LocalGpu::starts, 0, spec, 0);
      replay(graphs, replays, spec, "gated graph replays");
      record(&LocalGpu::stops, 0, spec, 0);
      mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(before releasing the blocker)", mpi_);
    }
    wait_for_completion(spec, "gated graph replays");
    if (words[1] != 0) {
      fail(ExitCode::runtime_error, "the blocker kernel in front of the graph replays timed out before the host released it (" +
                                        where(spec, "gated graph replays") + ")");
    }
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

void NcclBackend::run_once(const CaseSpec& spec) {
  // Iteration 0, one collective: no rotation, the data fill() wrote. With -G the checked
  // collective runs from a captured graph too, as in nccl-tests.
  if (config_.graph_launches > 0) {
    const std::vector<Graph> graphs = capture(spec, 1, 1, false);
    replay(graphs, 1, spec, "checked run");
  } else {
    launch(spec, 0, 1);
  }
  wait_for_completion(spec, "checked run");
}

// Test hook (CCLBENCH_INJECT_WRONG): flips the chosen elements of the chosen GPU's receive region,
// the one count_wrong() compares next. Each element is read back, flipped on the host and written
// again in the GPU's stream, so the verify kernel queued after it sees the flip.
void NcclBackend::inject_faults(const CaseSpec& spec) {
  if (!injection_) return;
  const std::size_t element = spec.counts.element_size;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const LocalGpu& gpu = gpus_[i];
    if (!fault_applies(*injection_, spec, mpi_.job_rank, static_cast<int>(i))) continue;
    const std::vector<std::uint64_t> indices = fault_indices(*injection_, spec, gpu.rank);
    if (indices.empty()) continue;
    DeviceScope scope(gpu.device);
    auto* recv = static_cast<unsigned char*>(pointers(spec, gpu, 0).recv);
    std::vector<unsigned char> bytes(indices.size() * element);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      cuda_or_fail(cudaMemcpyAsync(bytes.data() + k * element, recv + indices[k] * element, element, cudaMemcpyDeviceToHost,
                                   gpu.stream.get()),
                   "cudaMemcpyAsync(fault injection read)", spec, "verify");
    }
    cuda_or_fail(cudaStreamSynchronize(gpu.stream.get()), "cudaStreamSynchronize(fault injection)", spec, "verify");
    for (std::size_t k = 0; k < indices.size(); ++k) {
      flip_element(bytes.data() + k * element, element);
      cuda_or_fail(cudaMemcpyAsync(recv + indices[k] * element, bytes.data() + k * element, element, cudaMemcpyHostToDevice,
                                   gpu.stream.get()),
                   "cudaMemcpyAsync(fault injection write)", spec, "verify");
    }
    // `bytes` is pageable and goes out of scope here: wait until the writes have left it.
    cuda_or_fail(cudaStreamSynchronize(gpu.stream.get()), "cudaStreamSynchronize(fault injection)", spec, "verify");
  }
}

std::int64_t NcclBackend::count_wrong(const CaseSpec& spec, std::uint32_t rep) {
  inject_faults(spec);
  const PatternParams params = make_pattern(spec.dtype, pattern_op(spec), nranks_, rep);
  const CompareMode mode = compare_mode(spec);
  const double tolerance = mode == CompareMode::tolerance ? avg_relative_tolerance(spec.dtype, nranks_) : 0.0;
  auto* host_counts = static_cast<unsigned long long*>(wrong_host_.get());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const LocalGpu& gpu = gpus_[i];
    DeviceScope scope(gpu.device);
    const Pointers p = pointers(spec, gpu, 0);
    const RecvLayout layout{spec.collective, gpu.rank, spec.root, spec.counts.param_count};
    auto* counter = static_cast<unsigned long long*>(gpu.scratch.get());
    cuda_or_fail(cudaMemsetAsync(counter, 0, sizeof *counter, gpu.stream.get()), "cudaMemsetAsync", spec, "verify");
    cuda_or_fail(launch_pattern_verify(p.recv, spec.counts.recv_count, params, layout, mode, tolerance, counter, gpu.stream.get()),
                 "verify kernel", spec, "verify");
    cuda_or_fail(cudaMemcpyAsync(&host_counts[i], counter, sizeof *counter, cudaMemcpyDeviceToHost, gpu.stream.get()),
                 "cudaMemcpyAsync", spec, "verify");
  }
  wait_for_completion(spec, "verify");
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i) wrong += static_cast<std::int64_t>(host_counts[i]);
  return wrong;
}

}  // namespace

std::string too_few_gpus_message(const std::string& visible_text, int visible, int per_process, int local_rank,
                                 int local_size) {
  const std::string needs = "needs GPUs " + std::to_string(local_rank * per_process) + ".." +
                            std::to_string((local_rank + 1) * per_process - 1) + " but only " + visible_text;
  const std::string share = "or pass --share-gpu for a correctness-only run";
  // Not even one process fits its -g: the fix is a smaller -g, not fewer ranks ("at most 0 ranks").
  if (per_process > visible) {
    return needs + ": -g " + std::to_string(per_process) + " asks for more GPUs than this node has; use -g " +
           std::to_string(visible) + " or fewer" + (local_size > 1 ? " with one rank per node" : "") + ", " + share;
  }
  return needs + ": start at most " + std::to_string(visible / per_process) + " rank(s) per node with -g " +
         std::to_string(per_process) + " (this node started " + std::to_string(local_size) + "), " + share;
}

std::string_view verification_mode(const CaseSpec& spec) {
  const bool reduces = descriptor_of(spec.collective).reduces;
  return reduces && spec.op == ReduceOp::avg && is_floating(spec.dtype) ? "tolerance" : "exact";
}

void prepare_nccl_environment(const Config& config, const MpiContext& mpi) {
  if (!config.share_gpu) return;
  const std::string host_id = mpi.hostname + "-cclbench-rank" + std::to_string(mpi.world_rank);
  setenv("NCCL_HOSTID", host_id.c_str(), 1);
  // 0: a user's choice wins. NET/Socket on loopback, never an HCA or a net plugin: on a machine
  // with InfiniBand, NCCL would otherwise pick NET/IB for the emulated "inter-node" links.
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("NCCL_NET", "Socket", 0);
}

std::unique_ptr<Backend> make_nccl_backend(const Config& config, const MpiContext& mpi,
                                           std::optional<FaultInjection> injection,
                                           std::optional<SlowdownInjection> slowdown) {
  return std::make_unique<NcclBackend>(config, mpi, std::move(injection), std::move(slowdown));
}

std::vector<LocalGpuBinding> local_gpu_bindings(const Backend& backend) {
  if (const auto* nccl = dynamic_cast<const NcclBackend*>(&backend)) return nccl->bindings();
  return {};
}

std::vector<std::string> local_gpu_bus_ids(const Backend& backend) {
  std::vector<std::string> ids;
  for (const LocalGpuBinding& binding : local_gpu_bindings(backend)) ids.push_back(binding.pci_bus_id);
  return ids;
}

nlohmann::json to_json(const LocalGpuBinding& binding) {
  return {{"rank", binding.rank},
          {"device", binding.device},
          {"pci_bus_id", binding.pci_bus_id},
          {"name", binding.name},
          {"compute_capability", std::to_string(binding.compute_capability_major) + "." +
                                     std::to_string(binding.compute_capability_minor)}};
}

}  // namespace cclbench
