// Host-side behaviour of the NCCL backend library that needs no GPU (label unit): verification
// modes, and the GPU environment report when CUDA has nothing to offer.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/nccl/nccl_backend.hpp"
#include "tests/tools/gpu_presence.hpp"

namespace cclbench {
namespace {

CaseSpec spec_of(Collective collective, DataType dtype, ReduceOp op) {
  CaseSpec spec;
  spec.collective = collective;
  spec.descriptor = &descriptor_of(collective);
  spec.dtype = dtype;
  spec.op = op;
  spec.requested_bytes = 1024;
  spec.counts = descriptor_of(collective).byte_counts(1024, size_of(dtype), 1);
  return spec;
}

TEST(NcclVerificationMode, OnlyAvgOnFloatsIsCheckedWithATolerance) {
  // Written out, not is_floating(): NCCL's avg is a premultiplied sum only on these six types.
  const std::set<std::string_view> floating_types = {"half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  std::set<std::string_view> seen;
  for (DataType dtype : all_data_types()) seen.insert(name_of(dtype));
  for (std::string_view name : floating_types) EXPECT_TRUE(seen.count(name)) << "unknown dtype name " << name;
  EXPECT_EQ(seen.size(), 12u);
  for (DataType dtype : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      const bool tolerance = op == ReduceOp::avg && floating_types.count(name_of(dtype)) == 1;
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
  // Decided independently (/dev/nvidia<N>, nvidia-smi -L): a GPU here must be seen by the product.
  const std::string evidence = cclbench_test::independent_gpu_evidence();
  if (!evidence.empty()) {
    EXPECT_GT(count, 0) << "a GPU is present (" << evidence << ") but visible_gpu_count says 0: " << error;
  }
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

// A usage error that once read wrong: -g 3 on a 2-GPU node said "start at most 0 ranks per node". Expected texts written out.
TEST(NcclTooFewGpus, OneProcessAskingForMoreGpusThanTheNodeHasIsToldToLowerG) {
  const std::string message = too_few_gpus_message("2 visible (CUDA_VISIBLE_DEVICES=<unset>)", 2, 3, 0, 1);
  EXPECT_EQ(message, "needs GPUs 0..2 but only 2 visible (CUDA_VISIBLE_DEVICES=<unset>): -g 3 asks for more GPUs than "
                     "this node has; use -g 2 or fewer, or pass --share-gpu for a correctness-only run");
  EXPECT_EQ(message.find("at most 0"), std::string::npos);
  const std::string several = too_few_gpus_message("2 visible (CUDA_VISIBLE_DEVICES=0,1)", 2, 3, 1, 2);
  EXPECT_NE(several.find("needs GPUs 3..5"), std::string::npos) << several;
  EXPECT_NE(several.find("use -g 2 or fewer with one rank per node"), std::string::npos) << several;
}

TEST(NcclTooFewGpus, TooManyRanksPerNodeAreToldHowManyFit) {
  // 3 ranks x -g 1 on 2 GPUs: rank 2 needs GPU 2.
  EXPECT_EQ(too_few_gpus_message("2 visible (CUDA_VISIBLE_DEVICES=<unset>)", 2, 1, 2, 3),
            "needs GPUs 2..2 but only 2 visible (CUDA_VISIBLE_DEVICES=<unset>): start at most 2 rank(s) per node with "
            "-g 1 (this node started 3), or pass --share-gpu for a correctness-only run");
  // 2 ranks x -g 2 on 3 GPUs: one fits.
  const std::string message = too_few_gpus_message("3 visible (CUDA_VISIBLE_DEVICES=<unset>)", 3, 2, 1, 2);
  EXPECT_NE(message.find("start at most 1 rank(s) per node with -g 2 (this node started 2)"), std::string::npos) << message;
}

}  // namespace
}  // namespace cclbench
