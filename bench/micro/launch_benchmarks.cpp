// Host cost of the NCCL backend's launch loop per local GPU count (-g N): the backend's own
// GroupLauncher (bench/nccl/group_launch.hpp), one iteration = one group around the collectives of
// N GPUs, as in nccl-tests' startColl.
//
// BM_LaunchPathNoop: the loop driven with a no-op NCCL call layer, so it runs on any machine and
// isolates what our code adds around NCCL (pointer arithmetic, rotation, dispatch). The counter
// per_gpu is the CPU time per iteration / N, in seconds; nccl_calls and groups count what the loop issued per
// iteration (one group around all GPUs, N collectives).
// BM_LaunchPathNccl: the same loop on real communicators over min(N, visible GPUs) devices (the
// counter gpus says how many), 8 KiB float per rank, buffers from cudaMalloc (/0, coll_perf's) or
// ncclMemAlloc (/1, nccl-tests 2.19's): manual time = host clock around 20 launches and their
// completion / 20 (coll_perf's batch time), launch_us = host time inside the launches alone per
// iteration. No MPI and no NCCL_DEBUG in this process, unlike coll_perf. Skipped without a GPU.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/group_launch.hpp"
#include "bench/nccl/nccl_backend.hpp"

namespace cclbench {
namespace {

constexpr std::array<Collective, 4> kCollectives = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                                                    Collective::alltoall};
constexpr std::uint64_t kMessageBytes = 8 << 10;
constexpr std::uint64_t kBufferBytes = 1 << 20;

CaseSpec make_case(Collective collective, int nranks) {
  CaseSpec spec;
  spec.collective = collective;
  spec.dtype = DataType::float32;
  spec.op = descriptor_of(collective).reduces ? ReduceOp::sum : ReduceOp::none;
  spec.requested_bytes = kMessageBytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(kMessageBytes, size_of(spec.dtype), nranks);
  return spec;
}

// The no-op NCCL layer: every call succeeds at once and is counted (plain function pointers carry
// no context, hence the one counter object of this file).
struct NoopCounts {
  std::uint64_t collectives = 0;
  std::uint64_t groups = 0;
};
NoopCounts noop_counts;

ncclResult_t noop_group_start() {
  ++noop_counts.groups;
  return ncclSuccess;
}
ncclResult_t noop_group_end() { return ncclSuccess; }
ncclResult_t noop_reducing(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_moving(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_rooted(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_reduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_send(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_recv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  ++noop_counts.collectives;
  return ncclSuccess;
}
ncclResult_t noop_premulsum(ncclRedOp_t* op, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) {
  *op = ncclSum;
  return ncclSuccess;
}
ncclResult_t noop_destroy(ncclRedOp_t, ncclComm_t) { return ncclSuccess; }

NcclCalls noop_calls() {
  NcclCalls calls{};
  calls.group_start = noop_group_start;
  calls.group_end = noop_group_end;
  calls.all_reduce = noop_reducing;
  calls.all_gather = noop_moving;
  calls.reduce_scatter = noop_reducing;
  calls.broadcast = noop_rooted;
  calls.reduce = noop_reduce;
  calls.alltoall = noop_moving;
  calls.send = noop_send;
  calls.recv = noop_recv;
  calls.red_op_create_premulsum = noop_premulsum;
  calls.red_op_destroy = noop_destroy;
  return calls;
}

void BM_LaunchPathNoop(benchmark::State& state) {
  const Collective collective = kCollectives.at(static_cast<std::size_t>(state.range(0)));
  const int gpus = static_cast<int>(state.range(1));
  state.SetLabel(std::string(descriptor_of(collective).display_name) + " g" + std::to_string(gpus));
  // Host buffers stand in for device memory: the loop only computes addresses inside them.
  std::vector<std::vector<char>> memory;
  std::vector<LaunchTarget> targets;
  for (int i = 0; i < gpus; ++i) {
    memory.emplace_back(kBufferBytes);
    memory.emplace_back(kBufferBytes);
    // A distinct non-null handle per GPU; the no-op layer never dereferences it.
    auto* comm = reinterpret_cast<ncclComm_t>(memory[memory.size() - 2].data());
    targets.push_back({comm, nullptr, memory[memory.size() - 2].data(), memory.back().data(), i});
  }
  GroupLauncher launcher(noop_calls(), std::move(targets), gpus, kBufferBytes, 0);
  const CaseSpec spec = make_case(collective, gpus);
  noop_counts = {};
  int iteration = 0;
  for (auto _ : state) {
    const LaunchResult result = launcher.launch(spec, iteration++, 1);
    if (result.result != ncclSuccess) return state.SkipWithError(result.call);
  }
  const auto iterations = static_cast<double>(state.iterations());
  // Seconds of CPU time per GPU and iteration (printed with an SI prefix: 9.5n = 9.5 ns).
  state.counters["per_gpu"] =
      benchmark::Counter(static_cast<double>(gpus), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["nccl_calls"] = benchmark::Counter(static_cast<double>(noop_counts.collectives) / iterations);
  state.counters["groups"] = benchmark::Counter(static_cast<double>(noop_counts.groups) / iterations);
}

// Device memory from ncclMemAlloc, as nccl-tests 2.19 allocates its buffers (coll_perf uses
// cudaMalloc except with -R 2): the micro benchmark runs both to tell whether that matters.
class NcclMemAllocBuffer {
 public:
  NcclMemAllocBuffer(int device, std::size_t bytes) : device_(device) {
    DeviceScope scope(device);
    const ncclResult_t result = ncclMemAlloc(&data_, bytes);
    if (result != ncclSuccess) {
      data_ = nullptr;
      throw std::runtime_error(std::string("ncclMemAlloc: ") + ncclGetErrorString(result));
    }
  }
  ~NcclMemAllocBuffer() {
    if (data_ == nullptr) return;
    DeviceScope scope(device_);
    ncclMemFree(data_);
  }
  NcclMemAllocBuffer(const NcclMemAllocBuffer&) = delete;
  NcclMemAllocBuffer& operator=(const NcclMemAllocBuffer&) = delete;
  void* get() const { return data_; }

 private:
  int device_;
  void* data_ = nullptr;
};

// Communicators, streams and buffers on `gpus` devices of this process (ncclCommInitAll, as
// nccl-tests' -g), made once per GPU count and buffer kind and kept for the whole run.
struct RealGroup {
  std::string error;
  int gpus = 0;
  bool native_alltoall = false;
  std::vector<Stream> streams;
  std::vector<DeviceBuffer> buffers;                            // cudaMalloc
  std::vector<std::unique_ptr<NcclMemAllocBuffer>> nccl_buffers;  // ncclMemAlloc
  std::vector<void*> addresses;                                 // send, recv per GPU
  std::vector<ncclComm_t> comms;

  RealGroup(int wanted, bool nccl_mem_alloc) {
    std::string count_error;
    const int visible = visible_gpu_count(&count_error);
    if (visible == 0) {
      error = "no CUDA device: " + (count_error.empty() ? std::string("none visible") : count_error);
      return;
    }
    gpus = std::min(wanted, visible);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
    int version = 0;
    native_alltoall = ncclGetVersion(&version) == ncclSuccess && version >= NCCL_VERSION(2, 28, 0);
#endif
    try {
      for (int device = 0; device < gpus; ++device) {
        streams.emplace_back(device, "micro");
        for (int side = 0; side < 2; ++side) {
          if (nccl_mem_alloc) {
            nccl_buffers.push_back(std::make_unique<NcclMemAllocBuffer>(device, kBufferBytes));
            addresses.push_back(nccl_buffers.back()->get());
          } else {
            buffers.emplace_back(device, kBufferBytes, "micro");
            addresses.push_back(buffers.back().get());
          }
        }
      }
    } catch (const std::exception& failure) {
      error = failure.what();
      return;
    }
    std::vector<int> devices(static_cast<std::size_t>(gpus));
    for (int device = 0; device < gpus; ++device) devices[static_cast<std::size_t>(device)] = device;
    comms.assign(devices.size(), nullptr);
    const ncclResult_t result = ncclCommInitAll(comms.data(), gpus, devices.data());
    if (result != ncclSuccess) {
      error = std::string("ncclCommInitAll: ") + ncclGetErrorString(result);
      comms.clear();
    }
  }
  ~RealGroup() {
    for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  }
  RealGroup(const RealGroup&) = delete;
  RealGroup& operator=(const RealGroup&) = delete;

  std::vector<LaunchTarget> targets() const {
    std::vector<LaunchTarget> out;
    for (int i = 0; i < gpus; ++i) {
      const auto index = static_cast<std::size_t>(i);
      out.push_back({comms[index], streams[index].get(), addresses[2 * index], addresses[2 * index + 1], i});
    }
    return out;
  }
  bool synchronize() const {
    for (const Stream& stream : streams) {
      if (cudaStreamSynchronize(stream.get()) != cudaSuccess) return false;
    }
    return true;
  }
};

RealGroup& real_group(int wanted, bool nccl_mem_alloc) {
  // Never destroyed: a static destructor would run after the CUDA runtime has shut down, where freeing a
  // stream fails ("driver shutting down") and the throw ends the process in std::terminate (seen on an
  // H200). The process exit releases the devices.
  static auto* const groups = new std::map<std::pair<int, bool>, std::unique_ptr<RealGroup>>();
  std::unique_ptr<RealGroup>& group = (*groups)[{wanted, nccl_mem_alloc}];
  if (!group) group = std::make_unique<RealGroup>(wanted, nccl_mem_alloc);
  return *group;
}

void BM_LaunchPathNccl(benchmark::State& state) {
  constexpr int kLaunches = 20;
  using Clock = std::chrono::steady_clock;
  const Collective collective = kCollectives.at(static_cast<std::size_t>(state.range(0)));
  const int wanted = static_cast<int>(state.range(1));
  const bool nccl_mem_alloc = state.range(2) != 0;
  RealGroup& group = real_group(wanted, nccl_mem_alloc);
  if (!group.error.empty()) return state.SkipWithError(group.error.c_str());
  state.SetLabel(std::string(descriptor_of(collective).display_name) + " g" + std::to_string(group.gpus) +
                 (group.gpus < wanted ? " (" + std::to_string(wanted) + " asked)" : "") +
                 (nccl_mem_alloc ? " ncclMemAlloc" : " cudaMalloc"));
  GroupLauncher launcher(real_nccl_calls(group.native_alltoall), group.targets(), group.gpus, kBufferBytes, 0);
  const CaseSpec spec = make_case(collective, group.gpus);
  // Warm-up: connections are made lazily at the first collective.
  for (int i = 0; i < 5; ++i) {
    if (launcher.launch(spec, i, 1).result != ncclSuccess) return state.SkipWithError("warm-up launch failed");
  }
  if (!group.synchronize()) return state.SkipWithError("cudaStreamSynchronize failed");
  double launch_seconds = 0;
  double batch_seconds = 0;
  for (auto _ : state) {
    const Clock::time_point begin = Clock::now();
    for (int i = 0; i < kLaunches; ++i) {
      const LaunchResult result = launcher.launch(spec, i, 1);
      if (result.result != ncclSuccess) return state.SkipWithError((std::string(result.call) + ": " + ncclGetErrorString(result.result)).c_str());
    }
    const Clock::time_point launched = Clock::now();
    if (!group.synchronize()) return state.SkipWithError("cudaStreamSynchronize failed");
    const Clock::time_point end = Clock::now();
    launch_seconds += std::chrono::duration<double>(launched - begin).count() / kLaunches;
    const double batch = std::chrono::duration<double>(end - begin).count() / kLaunches;
    batch_seconds += batch;
    state.SetIterationTime(batch);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["gpus"] = benchmark::Counter(group.gpus);
  state.counters["launch_us"] = benchmark::Counter(launch_seconds * 1e6 / iterations);
  state.counters["batch_us"] = benchmark::Counter(batch_seconds * 1e6 / iterations);
}

void collectives_and_gpus(benchmark::internal::Benchmark* bench) {
  for (std::int64_t collective = 0; collective < static_cast<std::int64_t>(kCollectives.size()); ++collective) {
    for (std::int64_t gpus : {1, 2, 4, 8}) bench->Args({collective, gpus});
  }
}

// Third argument: buffers from cudaMalloc (0, coll_perf's) or ncclMemAlloc (1, nccl-tests 2.19's).
void collectives_gpus_and_buffers(benchmark::internal::Benchmark* bench) {
  for (std::int64_t collective = 0; collective < static_cast<std::int64_t>(kCollectives.size()); ++collective) {
    for (std::int64_t gpus : {1, 2, 4, 8}) {
      for (std::int64_t nccl_mem_alloc : {0, 1}) bench->Args({collective, gpus, nccl_mem_alloc});
    }
  }
}

BENCHMARK(BM_LaunchPathNoop)->Apply(collectives_and_gpus);
// 25 x 20 launches: a fixed count, so a slow GPU shape cannot make the run grow.
BENCHMARK(BM_LaunchPathNccl)->Apply(collectives_gpus_and_buffers)->UseManualTime()->Iterations(25);

}  // namespace
}  // namespace cclbench
