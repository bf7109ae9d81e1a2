// GPU tests of the pattern kernels and the NCCL backend (label gpu). Each test skips with the CUDA
// error when no device is visible. Run under mpirun -np 2 (ctest nccl_share_gpu_mpi) the
// SharedGpu test drives two emulated ranks on one GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/config.hpp"
#include "bench/core/element_codec.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/pattern.hpp"
#include "bench/nccl/nccl_backend.hpp"
#include "kernels/pattern_kernels.hpp"
#include "tests/tools/gpu_presence.hpp"

namespace cclbench {
namespace {

// Skips without a GPU; fails when /dev/nvidia<N> or nvidia-smi shows one the product cannot see.
#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    std::string gpu_error;                                                     \
    if (visible_gpu_count(&gpu_error) == 0) {                                  \
      SKIP_OR_FAIL_WITHOUT_GPU(gpu_error);                                     \
    }                                                                          \
  } while (0)

// MPI is started only by tests that get past the GPU check, once per process.
const MpiContext& mpi() {
  static const std::unique_ptr<MpiSession> session = std::make_unique<MpiSession>(nullptr, nullptr);
  return session->context();
}

struct DeviceMemory {
  void* data = nullptr;
  explicit DeviceMemory(std::size_t bytes) { EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess); }
  ~DeviceMemory() { cudaFree(data); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

std::vector<unsigned char> copy_back(const void* device, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

std::vector<ReduceOp> pattern_ops() {
  return {ReduceOp::none, ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg, ReduceOp::mulsum};
}

TEST(PatternKernels, DeviceFillMatchesHostReferenceBitForBit) {
  SKIP_WITHOUT_GPU();
  constexpr std::uint64_t kCount = 4099;  // not a multiple of any block size
  constexpr int kRanks = 5;
  constexpr int kRank = 3;
  constexpr std::uint64_t kFirst = 17;
  for (DataType dtype : all_data_types()) {
    for (ReduceOp op : pattern_ops()) {
      for (std::uint32_t rep : {0u, 7u}) {
        const PatternParams params = make_pattern(dtype, op, kRanks, rep);
        const std::size_t bytes = kCount * size_of(dtype);
        DeviceMemory device(bytes);
        ASSERT_EQ(launch_pattern_fill(device.data, kCount, params, kRank, kFirst, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<unsigned char> got = copy_back(device.data, bytes);
        std::vector<unsigned char> expected(bytes);
        for (std::uint64_t i = 0; i < kCount; ++i) {
          encode_small_integer(dtype, pattern_value(params, kRank, kFirst + i), &expected[i * size_of(dtype)]);
        }
        ASSERT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0) << name_of(dtype) << " " << name_of(op) << " rep " << rep;
      }
    }
  }
}

TEST(PatternKernels, PoisonDiffersEverywhereAndVerifyCountsExactlyTheBadElements) {
  SKIP_WITHOUT_GPU();
  constexpr std::uint64_t kBlock = 1000;
  constexpr int kRanks = 4;
  for (DataType dtype : all_data_types()) {
    const PatternParams params = make_pattern(dtype, ReduceOp::none, kRanks, 2);
    const RecvLayout layout{Collective::all_gather, 1, 0, kBlock};
    const std::uint64_t count = kBlock * kRanks;
    const std::size_t element = size_of(dtype);
    DeviceMemory data(count * element);
    DeviceMemory wrong(sizeof(unsigned long long));
    // The host reference of an all_gather result, written to the device.
    std::vector<unsigned char> reference(count * element);
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t value = 0;
      ASSERT_TRUE(pattern_expected(params, layout.collective, layout.rank, layout.root, layout.param_count, i, &value));
      encode_small_integer(dtype, value, &reference[i * element]);
    }
    auto count_wrong = [&]() {
      unsigned long long result = 0;
      EXPECT_EQ(cudaMemset(wrong.data, 0, sizeof result), cudaSuccess);
      EXPECT_EQ(launch_pattern_verify(data.data, count, params, layout, CompareMode::exact, 0.0,
                                      static_cast<unsigned long long*>(wrong.data), nullptr),
                cudaSuccess);
      EXPECT_EQ(cudaMemcpy(&result, wrong.data, sizeof result, cudaMemcpyDeviceToHost), cudaSuccess);
      return result;
    };
    ASSERT_EQ(cudaMemcpy(data.data, reference.data(), reference.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(count_wrong(), 0u) << name_of(dtype);
    for (std::uint64_t i : {0ull, 999ull, 2500ull}) reference[i * element] ^= 0x01;  // three corrupted elements
    ASSERT_EQ(cudaMemcpy(data.data, reference.data(), reference.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(count_wrong(), 3u) << name_of(dtype);
    ASSERT_EQ(launch_pattern_poison(data.data, count, params, layout, CompareMode::exact, nullptr), cudaSuccess);
    EXPECT_EQ(count_wrong(), count) << name_of(dtype) << ": poison must never equal the expected value";
  }
}

TEST(PatternKernels, ToleranceModeAcceptsRoundingAndRejectsNanPoison) {
  SKIP_WITHOUT_GPU();
  constexpr std::uint64_t kCount = 3000;
  constexpr int kRanks = 3;
  for (DataType dtype : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64, DataType::fp8_e4m3,
                         DataType::fp8_e5m2}) {
    const PatternParams params = make_pattern(dtype, ReduceOp::avg, kRanks, 4);
    const RecvLayout layout{Collective::all_reduce, 0, 0, kCount};
    const std::size_t element = size_of(dtype);
    const double tolerance = avg_relative_tolerance(dtype, kRanks);
    DeviceMemory data(kCount * element);
    DeviceMemory wrong(sizeof(unsigned long long));
    auto count_wrong = [&]() {
      unsigned long long result = 0;
      EXPECT_EQ(cudaMemset(wrong.data, 0, sizeof result), cudaSuccess);
      EXPECT_EQ(launch_pattern_verify(data.data, kCount, params, layout, CompareMode::tolerance, tolerance,
                                      static_cast<unsigned long long*>(wrong.data), nullptr),
                cudaSuccess);
      EXPECT_EQ(cudaMemcpy(&result, wrong.data, sizeof result, cudaMemcpyDeviceToHost), cudaSuccess);
      return result;
    };
    // Every element one unit in the last place above the exact average (a rounding NCCL may make):
    // accepted. Then the NaN poison: every element rejected.
    std::vector<unsigned char> values(kCount * element);
    for (std::uint64_t i = 0; i < kCount; ++i) {
      std::uint64_t expected = 0;
      ASSERT_TRUE(pattern_expected(params, layout.collective, 0, 0, kCount, i, &expected));
      std::uint64_t bits = encode_small_integer_bits(dtype, expected);
      if (expected > 0) ++bits;  // next representable magnitude
      for (std::size_t b = 0; b < element; ++b) values[i * element + b] = static_cast<unsigned char>(bits >> (8 * b));
    }
    ASSERT_EQ(cudaMemcpy(data.data, values.data(), values.size(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(count_wrong(), 0u) << name_of(dtype);
    ASSERT_EQ(launch_pattern_poison(data.data, kCount, params, layout, CompareMode::tolerance, nullptr), cudaSuccess);
    EXPECT_EQ(count_wrong(), kCount) << name_of(dtype);
  }
}

CaseSpec make_spec(Collective collective, DataType dtype, ReduceOp op, std::uint64_t bytes, bool in_place, int nranks) {
  CaseSpec spec;
  spec.collective = collective;
  spec.descriptor = &descriptor_of(collective);
  spec.dtype = dtype;
  spec.op = descriptor_of(collective).reduces ? op : ReduceOp::none;
  spec.root = 0;
  spec.in_place = in_place;
  spec.requested_bytes = bytes;
  spec.nranks = nranks;
  spec.counts = descriptor_of(collective).byte_counts(bytes, size_of(dtype), nranks);
  return spec;
}

Config small_config(int gpus_per_process) {
  Config config;
  config.min_bytes = 1024;
  config.max_bytes = 256 << 10;
  config.gpus_per_process = gpus_per_process;
  config.timeout_seconds = 120;  // a hang fails the test instead of stalling ctest
  return config;
}

// Every collective x dtype x op x placement: verification catches the poison before the run and
// finds nothing wrong after it. Returns how many cases ran.
int check_all_cases(Backend& backend, const std::vector<DataType>& dtypes, std::uint64_t bytes) {
  int ran = 0;
  for (Collective collective : all_collectives()) {
    const bool reduces = descriptor_of(collective).reduces;
    for (DataType dtype : dtypes) {
      for (ReduceOp op : reduces ? all_reduce_ops() : std::vector<ReduceOp>{ReduceOp::none}) {
        for (bool in_place : {false, true}) {
          const CaseSpec spec = make_spec(collective, dtype, op, bytes, in_place, backend.nranks());
          const std::string id = spec.case_id();
          if (const auto reason = backend.unsupported_reason(spec)) {
            const bool expected_skip = is_floating(dtype) && size_of(dtype) == 1;  // fp8 before sm_90
            const bool undefined_in_place = in_place && backend.nranks() > 1 &&
                                            (collective == Collective::alltoall || collective == Collective::sendrecv);
            EXPECT_TRUE(expected_skip || undefined_in_place) << id << ": " << *reason;
            continue;
          }
          const std::uint32_t rep = static_cast<std::uint32_t>(ran % 5 + 1);
          backend.fill(spec, rep);
          // (Reduce leaves non-root receive buffers undefined: nothing to catch there.)
          if (!in_place && (collective != Collective::reduce || backend.nranks() == 1)) {
            // Unwritten receive buffers must be counted wrong, or a no-op collective would pass.
            EXPECT_GT(backend.count_wrong(spec, rep), 0) << id << ": poison not detected";
          }
          backend.run_once(spec);
          EXPECT_EQ(backend.count_wrong(spec, rep), 0) << id << " (" << verification_mode(spec) << ")";
          ++ran;
        }
      }
    }
  }
  return ran;
}

TEST(NcclBackend, OneRankEveryCollectiveDtypeOpAndPlacementIsCorrect) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  auto backend = make_nccl_backend(small_config(1), mpi());
  ASSERT_EQ(backend->nranks(), 1);
  EXPECT_EQ(backend->name(), "nccl");
  EXPECT_FALSE(backend->emulated());
  EXPECT_GE(check_all_cases(*backend, all_data_types(), 12 << 10), 380);  // 456 with fp8 (sm_90+)
  EXPECT_GT(check_all_cases(*backend, {DataType::float32, DataType::bfloat16}, (256 << 10) - 4), 30);
}

TEST(NcclBackend, AllVisibleGpusInOneProcess) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  const int gpus = visible_gpu_count();
  auto backend = make_nccl_backend(small_config(gpus), mpi());
  ASSERT_EQ(backend->nranks(), gpus);
  const std::vector<std::string> bus_ids = local_gpu_bus_ids(*backend);
  ASSERT_EQ(static_cast<int>(bus_ids.size()), gpus);
  for (const std::string& id : bus_ids) EXPECT_FALSE(id.empty());
  EXPECT_GT(check_all_cases(*backend, {DataType::float32, DataType::int8, DataType::float16}, 64 << 10), 40);
}

TEST(NcclBackend, TimingModesGiveOnePositiveSamplePerIteration) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  struct Mode {
    const char* name;
    int blocking, graph_launches, ops_per_launch;
    Registration registration;
    int unalign_elements, cta_policy;
  };
  const Mode modes[] = {
      {"stream", 0, 0, 1, Registration::none, 0, -1},     {"-z 1", 1, 0, 1, Registration::none, 0, -1},
      {"-G 3", 0, 3, 1, Registration::none, 0, -1},       {"-m 3", 0, 0, 3, Registration::none, 0, -1},
      {"-G 2 -m 2", 0, 2, 2, Registration::none, 0, -1},  {"-R 1", 0, 0, 1, Registration::local, 0, -1},
      {"-R 1 -G 2", 0, 2, 1, Registration::local, 0, -1}, {"-R 2", 0, 0, 1, Registration::symmetric, 0, -1},
      {"-u 3", 0, 0, 1, Registration::none, 3, -1},       {"-x 1", 0, 0, 1, Registration::none, 0, 1},
  };
  for (const Mode& mode : modes) {
    Config config = small_config(1);
    config.blocking = mode.blocking;
    config.graph_launches = mode.graph_launches;
    config.ops_per_launch = mode.ops_per_launch;
    config.registration = mode.registration;
    config.unalign_elements = mode.unalign_elements;
    config.cta_policy = mode.cta_policy;
    auto backend = make_nccl_backend(config, mpi());
    const MeasurementMode recorded = backend->measurement_mode();
    EXPECT_EQ(recorded.graph_launches, mode.graph_launches) << mode.name;
    EXPECT_EQ(recorded.ops_per_launch, mode.ops_per_launch) << mode.name;
    EXPECT_EQ(recorded.registration, name_of(mode.registration)) << mode.name;
    EXPECT_EQ(recorded.unalign_elements, mode.unalign_elements) << mode.name;
    EXPECT_EQ(recorded.cta_policy.value_or(-1), mode.cta_policy) << mode.name;
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::mulsum}) {
      const CaseSpec spec = make_spec(Collective::all_reduce, DataType::float32, op, 256 << 10, false, 1);
      if (const auto reason = backend->unsupported_reason(spec)) {
        // Only symmetric registration may be refused by NCCL/the hardware, with NCCL's reason.
        EXPECT_EQ(mode.registration, Registration::symmetric) << mode.name << ": " << *reason;
        EXPECT_NE(reason->find("refused by NCCL"), std::string::npos) << *reason;
        continue;
      }
      backend->fill(spec, 0);
      backend->warm_up(spec, 2);
      const TimedIterations timed = backend->run_timed(spec, 7);
      ASSERT_EQ(timed.iteration_us.size(), 7u) << mode.name;
      for (double us : timed.iteration_us) EXPECT_GT(us, 0.0) << mode.name;
      EXPECT_GT(timed.batch_us, 0.0) << mode.name;
      EXPECT_EQ(timed.samples_from, mode.graph_launches > 0 ? "instrumented_graph_replay" : "per_iteration_events") << mode.name;
      // Gated: the eager loop behind the blocker (not with -z 1), and every graph run (one event
      // pair around the K replays of the collectives-only graph).
      ASSERT_EQ(timed.gated_us.has_value(), mode.blocking == 0) << mode.name;
      if (timed.gated_us) {
        // Nothing recorded between collectives: positive, and not above the slowest instrumented
        // iteration (each of those carries an event pair's GPU time).
        const double slowest = *std::max_element(timed.iteration_us.begin(), timed.iteration_us.end());
        EXPECT_GT(*timed.gated_us, 0.0) << mode.name;
        EXPECT_LE(*timed.gated_us, slowest * 1.05) << mode.name;
      }
      // Rotation (and -m's extra slots) moved the data around: a checked run on fresh data is exact.
      backend->fill(spec, 3);
      EXPECT_GT(backend->count_wrong(spec, 3), 0) << mode.name << ": poison not detected";
      backend->run_once(spec);
      EXPECT_EQ(backend->count_wrong(spec, 3), 0) << mode.name << " " << name_of(op);
    }
  }
}

// The -T watchdog's path: another thread aborts the communicators (ncclCommAbort on each) and
// returns promptly; the backend is then destroyed without waiting on them.
TEST(NcclBackend, AbortFromAnotherThreadReturnsAndTheBackendIsDestroyedCleanly) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  auto backend = make_nccl_backend(small_config(1), mpi());
  const CaseSpec spec = make_spec(Collective::all_reduce, DataType::float32, ReduceOp::sum, 64 << 10, false, 1);
  backend->fill(spec, 1);
  backend->run_once(spec);
  EXPECT_EQ(backend->count_wrong(spec, 1), 0);
  const auto start = std::chrono::steady_clock::now();
  std::thread watchdog([&] { backend->abort_communication(); });
  watchdog.join();
  backend->abort_communication();  // a second abort is a no-op
  backend.reset();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
}

TEST(NcclBackend, SweepBeyondDeviceMemoryIsUnsupportedNotFatal) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  Config config = small_config(1);
  config.max_bytes = 1ull << 50;  // 1 PiB
  auto backend = make_nccl_backend(config, mpi());
  const auto huge = backend->unsupported_reason(make_spec(Collective::all_reduce, DataType::float32, ReduceOp::sum, 1ull << 50, false, 1));
  ASSERT_TRUE(huge.has_value());
  EXPECT_NE(huge->find("MiB"), std::string::npos) << *huge;
  const CaseSpec small = make_spec(Collective::all_reduce, DataType::float32, ReduceOp::sum, 1 << 20, false, 1);
  EXPECT_FALSE(backend->unsupported_reason(small).has_value());
}

TEST(NcclBackend, SharedGpuRanksUnderMpirun) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size < 2) GTEST_SKIP() << "needs mpirun -np 2 or more (ctest -R nccl_share_gpu_mpi)";
  Config config = small_config(1);
  config.share_gpu = true;
  auto backend = make_nccl_backend(config, mpi());
  EXPECT_TRUE(backend->emulated());
  EXPECT_EQ(backend->nranks(), mpi().world_size);
  EXPECT_GT(check_all_cases(*backend, {DataType::float32, DataType::int32, DataType::bfloat16, DataType::fp8_e4m3}, 8 << 10),
            40);
  backend.reset();
  // The checked run from a captured graph (-G) on registered buffers (-R 1), misaligned (-u 1):
  // mulsum's per-rank scalars (1, 2, 1, 2...) must show in every reduced element.
  config.graph_launches = 2;
  config.registration = Registration::local;
  config.unalign_elements = 1;
  auto graph_backend = make_nccl_backend(config, mpi());
  EXPECT_GT(check_all_cases(*graph_backend, {DataType::float32, DataType::int8}, 8 << 10), 20);
}

TEST(NcclBackend, MoreGpusPerProcessThanVisibleIsAUsageError) {
  SKIP_WITHOUT_GPU();
  if (mpi().world_size > 1) GTEST_SKIP() << "single-process test (world size " << mpi().world_size << ")";
  try {
    make_nccl_backend(small_config(visible_gpu_count() + 1), mpi());
    FAIL() << "expected FatalError(usage)";
  } catch (const FatalError& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    EXPECT_NE(std::string(error.what()).find(mpi().hostname), std::string::npos) << error.what();
  }
}

TEST(NcclBackend, TwoRanksOnOneGpuWithoutShareGpuIsAUsageError) {
  SKIP_WITHOUT_GPU();
  if (mpi().local_size <= visible_gpu_count()) {
    GTEST_SKIP() << "needs more ranks on this node than GPUs (ctest -R nccl_share_gpu_mpi on one GPU)";
  }
  try {
    make_nccl_backend(small_config(1), mpi());
    FAIL() << "expected FatalError(usage)";
  } catch (const FatalError& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    EXPECT_NE(std::string(error.what()).find("--share-gpu"), std::string::npos) << error.what();
  }
}

TEST(GpuEnvironment, ReportsVersionsAndEveryVisibleGpu) {
  SKIP_WITHOUT_GPU();
  const nlohmann::json env = gpu_environment_json();
  EXPECT_TRUE(env.at("cuda_driver_version").is_string()) << env.dump();
  EXPECT_TRUE(env.at("cuda_runtime_version").is_string()) << env.dump();
  EXPECT_TRUE(env.at("nccl_version").is_string()) << env.dump();
  ASSERT_EQ(static_cast<int>(env.at("gpus").size()), visible_gpu_count());
  for (const auto& gpu : env.at("gpus")) {
    EXPECT_TRUE(gpu.at("pci_bus_id").is_string());
    EXPECT_GT(gpu.at("memory_bytes").get<std::uint64_t>(), 0u);
  }
}

}  // namespace
}  // namespace cclbench
