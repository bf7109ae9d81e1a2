// The NCCL backend's set-up (devices, communicators, buffers, registration, teardown) and the public
// functions of nccl_backend.hpp. The rest of the class: see nccl_backend_internal.hpp.
#include "bench/nccl/nccl_backend.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/context_turns.hpp"
#include "bench/nccl/group_launch.hpp"
#include "bench/nccl/nccl_backend_internal.hpp"

namespace cclbench::nccl_detail {
namespace {

constexpr std::uint64_t kBufferAlignment = 4096;
constexpr std::size_t kScratchBytes = 256;  // the device-side wrong-element counter
constexpr int kBusIdChars = 32;
constexpr std::size_t kUuidBytes = sizeof(cudaUUID_t);

std::uint64_t round_up(std::uint64_t value, std::uint64_t granule) { return (value + granule - 1) / granule * granule; }

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

}  // namespace

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
  // 2. Device properties. Nothing up to step 4 creates a CUDA context: the device count, properties,
  // bus id and UUID need none (the first call that does is step 4's cudaSetDevice where ranks take
  // turns, else step 6's Stream: cudaSetDevice, or cudaStreamCreateWithFlags on device 0, current already).
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
    gpu.uuid.assign(prop.uuid.bytes, kUuidBytes);
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

  // 4. CUDA contexts, in turns where ranks share a GPU (before anything below creates one).
  create_contexts_in_turns(who);

  // 5. fp8 support must be the same answer on every rank: the minimum compute capability.
  mpi_check(MPI_Allreduce(&min_cc_here, &min_compute_capability_, 1, MPI_INT, MPI_MIN, mpi_.world),
            "MPI_Allreduce(compute capability)", mpi_);

  if (ncclGetVersion(&nccl_runtime_version_) != ncclSuccess) nccl_runtime_version_ = 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &nccl_runtime_version_, 1, MPI_INT, MPI_MIN, mpi_.world),
            "MPI_Allreduce(NCCL version)", mpi_);

  // 6. Communicators: one unique id from world rank 0, one ncclCommInitRank per local GPU, all
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

  // 7. Buffers: send and receive each sized for the largest message of the sweep, allocated once,
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

// Three ranks on one GPU took 9.0 or 18.0 ms an 8K all_reduce batch, by launch (with these turns:
// 9.0 ms in every launch, docs/bring-up.md); the cause (bench/nccl/context_turns.hpp): the GPU time-slices its contexts in the order they were
// created, and a ring taking its slices out of its own cyclic order waits about a whole round a step.
// So ranks that share a GPU create their contexts in turns, in world-rank order: turn t's ranks
// create theirs, then every rank passes a barrier. The start-up guard (-T) covers this like every other start-up collective:
// a rank frozen in its turn ends the launch. A failed creation is agreed on after the last turn, so
// no rank waits in a barrier the failing one never reaches.
void NcclBackend::create_contexts_in_turns(const std::string& who) {
  // Every rank drives -g GPUs by now (step 1 found them or every rank threw): equal record sizes.
  const std::size_t per_rank = gpus_.size();
  std::string mine;
  for (const LocalGpu& gpu : gpus_) mine += gpu.uuid;
  std::string all(mine.size() * static_cast<std::size_t>(mpi_.world_size), '\0');
  const int bytes = static_cast<int>(mine.size());
  mpi_check(MPI_Allgather(mine.data(), bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, mpi_.world), "MPI_Allgather(GPU UUIDs)",
            mpi_);
  std::vector<std::vector<std::string>> gpus_of_rank(static_cast<std::size_t>(mpi_.world_size));
  for (std::size_t rank = 0; rank < gpus_of_rank.size(); ++rank) {
    for (std::size_t i = 0; i < per_rank; ++i) {
      gpus_of_rank[rank].push_back(all.substr((rank * per_rank + i) * kUuidBytes, kUuidBytes));
    }
  }
  const std::vector<int> turns = context_turns(gpus_of_rank);
  const int count = turn_count(turns);
  if (count <= 1) return;  // no GPU shared: no order to keep, nothing to wait for
  const int my_turn = turns[static_cast<std::size_t>(mpi_.world_rank)];
  std::optional<AgreedError> local_error;
  for (int turn = 0; turn < count; ++turn) {
    for (std::size_t i = 0; turn == my_turn && !local_error && i < gpus_.size(); ++i) {
      // cudaSetDevice creates the primary context (CUDA 12+); cudaFree(0) makes sure of it on any runtime.
      const char* call = "cudaSetDevice";
      cudaError_t result = cudaSetDevice(gpus_[i].device);
      if (result == cudaSuccess) {
        call = "cudaFree(0)";
        result = cudaFree(nullptr);
      }
      if (result != cudaSuccess) {
        local_error = AgreedError{ExitCode::runtime_error, std::string(call) + ": " + cudaGetErrorString(result) + " (" + who +
                                                               ", device " + std::to_string(gpus_[i].device) +
                                                               ", creating its CUDA context in turn " + std::to_string(turn) +
                                                               " of " + std::to_string(count) + ")"};
      }
    }
    mpi_check(MPI_Barrier(mpi_.world), "MPI_Barrier(CUDA context turns)", mpi_);
  }
  throw_if_agreed_error(mpi_, local_error);
  if (mpi_.world_rank == 0) {
    std::string by_rank;
    for (const int turn : turns) by_rank += (by_rank.empty() ? "" : ",") + std::to_string(turn);
    std::fprintf(stderr,
                 "cclbench: note: ranks sharing a GPU created their CUDA contexts in %d turns, in world-rank order "
                 "(turn of world rank 0..%d: %s)\n",
                 count, mpi_.world_size - 1, by_rank.c_str());
  }
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

}  // namespace cclbench::nccl_detail

namespace cclbench {

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
  return std::make_unique<nccl_detail::NcclBackend>(config, mpi, std::move(injection), std::move(slowdown));
}

std::vector<LocalGpuBinding> local_gpu_bindings(const Backend& backend) {
  if (const auto* nccl = dynamic_cast<const nccl_detail::NcclBackend*>(&backend)) return nccl->bindings();
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
