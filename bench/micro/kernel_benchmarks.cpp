// Throughput of the verification kernels against the device's own copy bandwidth, the cost of the
// per-iteration CUDA event pair the NCCL backend puts around each timed iteration, and the
// per-iteration cost of CUDA graph replay (-G): bare, with event-record nodes around each
// iteration, and a one-rank NCCL AllReduce through the backend's own -G path.
//
// Kernel benchmarks use manual time from CUDA events (the device time, not the host's), reported
// as bytes_per_second plus a GB/s counter (1e9 bytes). A copy of N bytes moves 2N bytes (read +
// write); fill writes N, verify reads N: the counters count the bytes each touches.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/pattern.hpp"
#include "bench/core/types.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/nccl_backend.hpp"
#include "kernels/pattern_kernels.hpp"

namespace cclbench {
namespace {

// Device, stream, two buffers and an event pair, or the reason there is no GPU.
struct GpuFixture {
  std::string error;
  Stream stream;
  DeviceBuffer a;
  DeviceBuffer b;
  DeviceBuffer counter;
  Event start;
  Event stop;

  explicit GpuFixture(std::size_t bytes) {
    if (visible_gpu_count(&error) == 0) {
      if (error.empty()) error = "no CUDA device visible";
      return;
    }
    try {
      stream = Stream(0, "micro");
      a = DeviceBuffer(0, bytes, "micro");
      b = DeviceBuffer(0, bytes, "micro");
      counter = DeviceBuffer(0, sizeof(unsigned long long), "micro");
      start = Event(0, "micro");
      stop = Event(0, "micro");
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  bool usable(benchmark::State& state) const {
    if (!error.empty()) state.SkipWithError(("no CUDA device: " + error).c_str());
    return error.empty();
  }
  // Times `work` on the stream with the event pair; returns seconds, or a negative value on error.
  template <typename Work>
  double time(Work&& work) {
    if (cudaEventRecord(start.get(), stream.get()) != cudaSuccess) return -1;
    if (work() != cudaSuccess) return -1;
    if (cudaEventRecord(stop.get(), stream.get()) != cudaSuccess) return -1;
    if (cudaEventSynchronize(stop.get()) != cudaSuccess) return -1;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start.get(), stop.get()) != cudaSuccess) return -1;
    return ms / 1e3;
  }
};

void report(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration) * state.iterations());
  state.counters["GBps"] = benchmark::Counter(bytes_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

DataType dtype_of(std::int64_t index) { return all_data_types().at(static_cast<std::size_t>(index)); }

void BM_DeviceCopy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  GpuFixture gpu(bytes);
  if (!gpu.usable(state)) return;
  for (auto _ : state) {
    const double seconds =
        gpu.time([&] { return cudaMemcpyAsync(gpu.b.get(), gpu.a.get(), bytes, cudaMemcpyDeviceToDevice, gpu.stream.get()); });
    if (seconds < 0) return state.SkipWithError("cudaMemcpyAsync failed");
    state.SetIterationTime(seconds);
  }
  report(state, 2.0 * static_cast<double>(bytes));
}

void BM_PatternFill(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const DataType dtype = dtype_of(state.range(1));
  state.SetLabel(std::string(name_of(dtype)));
  GpuFixture gpu(bytes);
  if (!gpu.usable(state)) return;
  const PatternParams params = make_pattern(dtype, ReduceOp::sum, 8, 1);
  const std::uint64_t count = bytes / size_of(dtype);
  for (auto _ : state) {
    const double seconds = gpu.time([&] { return launch_pattern_fill(gpu.a.get(), count, params, 3, 0, gpu.stream.get()); });
    if (seconds < 0) return state.SkipWithError("fill kernel failed");
    state.SetIterationTime(seconds);
  }
  report(state, static_cast<double>(count * size_of(dtype)));
}

// Verify of an all_reduce result over 8 ranks: each element recomputes the 8-rank reduction.
void BM_PatternVerify(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const DataType dtype = dtype_of(state.range(1));
  state.SetLabel(std::string(name_of(dtype)));
  GpuFixture gpu(bytes);
  if (!gpu.usable(state)) return;
  const PatternParams params = make_pattern(dtype, ReduceOp::sum, 8, 1);
  const std::uint64_t count = bytes / size_of(dtype);
  const RecvLayout layout{Collective::all_reduce, 0, 0, count};
  auto* counter = static_cast<unsigned long long*>(gpu.counter.get());
  for (auto _ : state) {
    const double seconds = gpu.time([&] {
      return launch_pattern_verify(gpu.a.get(), count, params, layout, CompareMode::exact, 0.0, counter, gpu.stream.get());
    });
    if (seconds < 0) return state.SkipWithError("verify kernel failed");
    state.SetIterationTime(seconds);
  }
  report(state, static_cast<double>(count * size_of(dtype)));
}

// Host-observed cost of one empty kernel launch plus completion, without and with the event pair
// the backend records around every timed iteration; the difference is the timing overhead.
// `event_us` is what the event pair itself reports for the empty kernel (the timing floor).
void BM_EmptyKernel(benchmark::State& state) {
  const bool with_events = state.range(0) != 0;
  GpuFixture gpu(256);
  if (!gpu.usable(state)) return;
  double event_seconds = 0;
  for (auto _ : state) {
    if (with_events) {
      const double seconds = gpu.time([&] { return launch_empty_kernel(gpu.stream.get()); });
      if (seconds < 0) return state.SkipWithError("event timing failed");
      event_seconds += seconds;
    } else {
      if (launch_empty_kernel(gpu.stream.get()) != cudaSuccess || cudaStreamSynchronize(gpu.stream.get()) != cudaSuccess) {
        return state.SkipWithError("empty kernel failed");
      }
    }
  }
  state.SetLabel(with_events ? "with event pair" : "without events");
  if (with_events) state.counters["event_us"] = benchmark::Counter(event_seconds * 1e6 / static_cast<double>(state.iterations()));
}

// Per-iteration GPU time of a replayed graph of 20 empty kernels, without (0) and with (1) an
// event-record node pair around each kernel: the difference is what -G used to add to every
// iteration before the timed graph held nothing but the collectives. Manual time = one event pair
// around 10 replays / (10 x 20); the counter iteration_us is the same figure.
// The iteration count is fixed: the manual time is 1/200 of what one benchmark iteration takes,
// so Google Benchmark's automatic count (aimed at 0.5 s of manual time) ran about 100 s of replays
// per variant before printing anything.
void BM_GraphReplayEmptyKernels(benchmark::State& state) {
  constexpr int kIterations = 20;
  constexpr int kReplays = 10;
  const bool instrumented = state.range(0) != 0;
  state.SetLabel(instrumented ? "event nodes around each kernel" : "kernels only");
  GpuFixture gpu(256);
  if (!gpu.usable(state)) return;
  std::vector<Event> nodes;
  for (int i = 0; instrumented && i < 2 * kIterations; ++i) nodes.emplace_back(0, "micro");
  Graph graph;
  {
    if (cudaStreamBeginCapture(gpu.stream.get(), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      return state.SkipWithError("cudaStreamBeginCapture failed");
    }
    bool ok = true;
    for (int i = 0; i < kIterations && ok; ++i) {
      if (instrumented) ok = cudaEventRecordWithFlags(nodes[2 * i].get(), gpu.stream.get(), cudaEventRecordExternal) == cudaSuccess;
      ok = ok && launch_empty_kernel(gpu.stream.get()) == cudaSuccess;
      if (instrumented && ok) ok = cudaEventRecordWithFlags(nodes[2 * i + 1].get(), gpu.stream.get(), cudaEventRecordExternal) == cudaSuccess;
    }
    cudaGraph_t captured = nullptr;
    if (cudaStreamEndCapture(gpu.stream.get(), &captured) != cudaSuccess || !ok) return state.SkipWithError("graph capture failed");
    try {
      graph = Graph(captured, 0, "micro");
    } catch (const std::exception& error) {
      return state.SkipWithError(error.what());
    }
    if (cudaGraphUpload(graph.exec(), gpu.stream.get()) != cudaSuccess) return state.SkipWithError("cudaGraphUpload failed");
  }
  double total = 0;
  for (auto _ : state) {
    const double seconds = gpu.time([&] {
      cudaError_t result = cudaSuccess;
      for (int replay = 0; replay < kReplays && result == cudaSuccess; ++replay) result = cudaGraphLaunch(graph.exec(), gpu.stream.get());
      return result;
    });
    if (seconds < 0) return state.SkipWithError("graph replay failed");
    const double per_iteration = seconds / (kReplays * kIterations);
    total += per_iteration;
    state.SetIterationTime(per_iteration);
  }
  state.counters["iteration_us"] = benchmark::Counter(total * 1e6 / static_cast<double>(state.iterations()));
}

// The backend's -G path on one rank: AllReduce float sum of range(0) bytes, -n 20 -G 10. Reports
// the per-collective batch time (host clock around the replays, nccl-tests' method), the gated
// time (one event pair around the replays) and the instrumented replay's mean, in us; the
// benchmark's own time is the batch time, so graph capture (inside run_timed, outside its clocks)
// is not in it. MPI and the one-rank communicator are made once, at the first use, and shared by
// every size (a communicator per size cost seconds of NCCL init each); the iteration count is fixed.
constexpr std::uint64_t kGraphAllReduceMaxBytes = 8 << 20;

void BM_NcclGraphAllReduce(benchmark::State& state) {
  std::string error;
  if (visible_gpu_count(&error) == 0) return state.SkipWithError(("no CUDA device: " + error).c_str());
  static const std::unique_ptr<MpiSession> session = std::make_unique<MpiSession>(nullptr, nullptr);
  if (session->context().world_size != 1) return state.SkipWithError("one process only (no mpirun)");
  const auto bytes = static_cast<std::uint64_t>(state.range(0));
  if (bytes > kGraphAllReduceMaxBytes) return state.SkipWithError("size above the shared backend's buffers");
  static std::string backend_error;
  static const std::unique_ptr<Backend> backend = [&]() -> std::unique_ptr<Backend> {
    Config config;
    config.min_bytes = 1;
    config.max_bytes = kGraphAllReduceMaxBytes;
    config.graph_launches = 10;
    config.timeout_seconds = 60;
    try {
      return make_nccl_backend(config, session->context());
    } catch (const std::exception& failure) {
      backend_error = failure.what();
      return nullptr;
    }
  }();
  if (!backend) return state.SkipWithError(backend_error.c_str());
  CaseSpec spec;
  spec.collective = Collective::all_reduce;
  spec.descriptor = &kAllReduce;
  spec.dtype = DataType::float32;
  spec.op = ReduceOp::sum;
  spec.requested_bytes = bytes;
  spec.nranks = 1;
  spec.counts = descriptor_of(spec.collective).byte_counts(bytes, size_of(spec.dtype), 1);
  backend->fill(spec, 0);
  backend->warm_up(spec, 5);
  double batch = 0, gated = 0, instrumented = 0;
  for (auto _ : state) {
    const TimedIterations timed = backend->run_timed(spec, 20);
    double mean = 0;
    for (double us : timed.iteration_us) mean += us / static_cast<double>(timed.iteration_us.size());
    batch += timed.batch_us;
    gated += timed.gated_us.value_or(0.0);
    instrumented += mean;
    state.SetIterationTime(timed.batch_us * 1e-6);
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["batch_us"] = benchmark::Counter(batch / n);
  state.counters["gated_us"] = benchmark::Counter(gated / n);
  state.counters["instrumented_us"] = benchmark::Counter(instrumented / n);
}

void sizes_and_dtypes(benchmark::internal::Benchmark* bench) {
  for (std::int64_t bytes : {1ll << 20, 64ll << 20, 256ll << 20}) {
    for (std::int64_t dtype = 0; dtype < static_cast<std::int64_t>(all_data_types().size()); ++dtype) bench->Args({bytes, dtype});
  }
}

BENCHMARK(BM_DeviceCopy)->Arg(1 << 20)->Arg(64 << 20)->Arg(256 << 20)->UseManualTime();
BENCHMARK(BM_PatternFill)->Apply(sizes_and_dtypes)->UseManualTime();
BENCHMARK(BM_PatternVerify)->Apply(sizes_and_dtypes)->UseManualTime();
BENCHMARK(BM_EmptyKernel)->Arg(0)->Arg(1)->UseRealTime();
// 500 x 200 graph iterations: well under a second per variant on an H200.
BENCHMARK(BM_GraphReplayEmptyKernels)->Arg(0)->Arg(1)->UseManualTime()->Iterations(500);
// Each iteration captures two graphs of 20 collectives and replays 10 + 10 + 1 of them.
BENCHMARK(BM_NcclGraphAllReduce)->Arg(8 << 10)->Arg(512 << 10)->Arg(8 << 20)->UseManualTime()->Iterations(10);

}  // namespace
}  // namespace cclbench
