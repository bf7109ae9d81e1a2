// --backend resolution. Expected: coll_perf --help ("--backend nccl|mpi  nccl when a GPU is visible
// [auto]") and the notes and error coll_perf prints (tests/core and tests/scripts pin them end to end).
#include <gtest/gtest.h>

#include <string>

#include "bench/core/errors.hpp"
#include "bench/session/backend_choice.hpp"

namespace cclbench {
namespace {

struct GpuCounter {
  int visible = 0;
  std::string reason;
  int calls = 0;
  std::function<int(std::string*)> probe() {
    return [this](std::string* out) {
      ++calls;
      if (visible == 0) *out = reason;
      return visible;
    };
  }
};

TEST(BackendChoice, AutomaticTakesNcclWhenAGpuIsVisible) {
  GpuCounter gpus{2, "", 0};
  const BackendChoice choice = resolve_backend(BackendKind::automatic, true, gpus.probe());
  EXPECT_EQ(choice.kind, BackendKind::nccl);
  EXPECT_EQ(choice.note, "");
  EXPECT_EQ(gpus.calls, 1);
}

TEST(BackendChoice, AutomaticFallsBackToMpiWithTheReasonWhenNoGpu) {
  GpuCounter gpus{0, "no CUDA-capable device is detected", 0};
  const BackendChoice choice = resolve_backend(BackendKind::automatic, true, gpus.probe());
  EXPECT_EQ(choice.kind, BackendKind::mpi);
  EXPECT_EQ(choice.note, "no GPU visible (no CUDA-capable device is detected): running the MPI backend on host memory");
}

TEST(BackendChoice, AutomaticWithoutNcclBuildIsMpiAndNeverProbes) {
  GpuCounter gpus{4, "", 0};
  const BackendChoice choice = resolve_backend(BackendKind::automatic, false, gpus.probe());
  EXPECT_EQ(choice.kind, BackendKind::mpi);
  EXPECT_EQ(choice.note, "built without CUDA/NCCL: running the MPI backend on host memory");
  EXPECT_EQ(gpus.calls, 0);
}

TEST(BackendChoice, ExplicitMpiIsKeptWithoutProbing) {
  GpuCounter gpus{0, "none", 0};
  EXPECT_EQ(resolve_backend(BackendKind::mpi, true, gpus.probe()).kind, BackendKind::mpi);
  EXPECT_EQ(resolve_backend(BackendKind::mpi, false, gpus.probe()).kind, BackendKind::mpi);
  EXPECT_EQ(gpus.calls, 0);
}

TEST(BackendChoice, ExplicitNcclWithAGpuIsNccl) {
  GpuCounter gpus{1, "", 0};
  const BackendChoice nccl = resolve_backend(BackendKind::nccl, true, gpus.probe());
  EXPECT_EQ(nccl.kind, BackendKind::nccl);
  EXPECT_EQ(nccl.note, "");
  EXPECT_EQ(gpus.calls, 1);
}

// A plan that expects a GPU says --backend nccl: without one the run fails with the reason (exit 7), never
// falling back to host memory under a part named NCCL (issue 37).
TEST(BackendChoice, ExplicitNcclWithoutAGpuFailsWithTheReason) {
  GpuCounter gpus{0, "CUDA sees no device: CUDA_VISIBLE_DEVICES is empty", 0};
  try {
    resolve_backend(BackendKind::nccl, true, gpus.probe());
    FAIL() << "expected a FatalError";
  } catch (const FatalError& error) {
    EXPECT_EQ(error.code(), ExitCode::nothing_measured);
    EXPECT_STREQ(error.what(), "--backend nccl: CUDA sees no device: CUDA_VISIBLE_DEVICES is empty");
  }
}

TEST(BackendChoice, NoVisibleGpuReasonNamesTheVariable) {
  EXPECT_EQ(no_visible_gpu_reason("", "cudaGetDeviceCount: no CUDA-capable device is detected"),
            "CUDA sees no device: CUDA_VISIBLE_DEVICES is empty");
  EXPECT_EQ(no_visible_gpu_reason("7", "cudaGetDeviceCount: no CUDA-capable device is detected"),
            "CUDA sees no device: CUDA_VISIBLE_DEVICES=7 (cudaGetDeviceCount: no CUDA-capable device is detected)");
  EXPECT_EQ(no_visible_gpu_reason(nullptr, "cudaGetDeviceCount: CUDA driver version is insufficient"),
            "CUDA sees no device (cudaGetDeviceCount: CUDA driver version is insufficient)");
  EXPECT_EQ(no_visible_gpu_reason(nullptr, ""), "CUDA sees no device");
}

TEST(BackendChoice, NcclInABuildWithoutNcclIsAUsageError) {
  GpuCounter gpus{1, "", 0};
  try {
    resolve_backend(BackendKind::nccl, false, gpus.probe());
    FAIL() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(), "--backend nccl: this build has no CUDA/NCCL support (rebuild with the CUDA toolkit and NCCL)");
  }
}

}  // namespace
}  // namespace cclbench
