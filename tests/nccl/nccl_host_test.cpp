// Host-side behaviour of the NCCL backend library that needs no GPU (label unit): verification
// modes, and the GPU environment report when CUDA has nothing to offer.
#include <gtest/gtest.h>

#include <string>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/nccl/nccl_backend.hpp"

namespace cclbench {
namespace {

CaseSpec spec_of(Collective collective, DataType dtype, ReduceOp op) {
  CaseSpec spec;
  spec.collective = collective;
  spec.dtype = dtype;
  spec.op = op;
  spec.requested_bytes = 1024;
  spec.counts = descriptor_of(collective).byte_counts(1024, size_of(dtype), 1);
  return spec;
}

TEST(NcclVerificationMode, OnlyAvgOnFloatsIsCheckedWithATolerance) {
  for (DataType dtype : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      const bool tolerance = op == ReduceOp::avg && is_floating(dtype);
      for (Collective collective : {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce}) {
        EXPECT_EQ(verification_mode(spec_of(collective, dtype, op)), tolerance ? "tolerance" : "exact")
            << name_of(collective) << " " << name_of(dtype) << " " << name_of(op);
      }
    }
    EXPECT_EQ(verification_mode(spec_of(Collective::all_gather, dtype, ReduceOp::none)), "exact");
  }
}

TEST(GpuEnvironmentHost, CountAndReportAgreeAndExplainMissingGpus) {
  std::string error;
  const int count = visible_gpu_count(&error);
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_FALSE(error.empty()) << "zero GPUs must come with the CUDA error";
  }
  const nlohmann::json env = gpu_environment_json();
  ASSERT_TRUE(env.contains("gpus"));
  EXPECT_EQ(static_cast<int>(env.at("gpus").size()), count);
  if (count == 0) {
    EXPECT_TRUE(env.contains("gpus_reason")) << env.dump();
  }
  EXPECT_TRUE(env.at("nccl_version").is_string()) << env.dump();  // the library answers without a GPU
  for (const char* key : {"cuda_driver_version", "cuda_runtime_version"}) {
    ASSERT_TRUE(env.contains(key)) << key;
    if (env.at(key).is_null()) {
      EXPECT_TRUE(env.contains(std::string(key) + "_reason")) << env.dump();
    }
  }
}

TEST(NcclBackendHost, WithoutAGpuTheBackendRefusesWithNothingMeasured) {
  if (visible_gpu_count() > 0) GTEST_SKIP() << "a GPU is visible: covered by the gpu tests";
  MpiSession session(nullptr, nullptr);
  try {
    make_nccl_backend(Config{}, session.context());
    FAIL() << "expected FatalError";
  } catch (const FatalError& error) {
    EXPECT_EQ(error.code(), ExitCode::nothing_measured);
    EXPECT_NE(std::string(error.what()).find("no CUDA device"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace cclbench
