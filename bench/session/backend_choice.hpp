#pragma once
// Which backend a coll_perf run uses and how it is opened. Decided before anything touches NCCL:
// NCCL logging must be planned before its first call.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/evidence/nccl_log_capture.hpp"

namespace cclbench {

struct BackendChoice {
  BackendKind kind = BackendKind::mpi;  // nccl or mpi, never automatic
  std::string note;                     // why automatic selection fell back to MPI; empty otherwise
};

// Why CUDA found no device, in the words a user acts on: "CUDA sees no device: CUDA_VISIBLE_DEVICES is empty",
// "CUDA sees no device: CUDA_VISIBLE_DEVICES=7 (cudaGetDeviceCount: ...)", "CUDA sees no device (cudaGetDeviceCount:
// ...)". cuda_visible_devices: the variable's value, nullptr when unset.
std::string no_visible_gpu_reason(const char* cuda_visible_devices, const std::string& count_error);

// `--backend` resolved: automatic takes NCCL when this build has it and `count_visible_gpus` (called
// only then; it fills its argument with the reason when it finds none) sees a GPU, else MPI with a
// note. --backend nccl in a build without NCCL is a UsageError; --backend nccl where the build has NCCL but
// `count_visible_gpus` finds no GPU is a FatalError (nothing measured, exit 7) with its reason: a run that was
// told NCCL never falls back. --backend mpi never probes.
BackendChoice resolve_backend(BackendKind requested, bool built_with_nccl,
                              const std::function<int(std::string* reason)>& count_visible_gpus);

// resolve_backend for this build, then the flags the chosen backend refuses (UsageError).
BackendChoice choose_backend(const Config& config);

// The NCCL log plan (timed run or --tuning-probe); inactive for the MPI backend.
NcclLogCapture plan_nccl_log_capture(const BackendChoice& choice, const Config& config, const MpiContext& context,
                                     const std::string& program);

// The backend, with the CCLBENCH_INJECT_WRONG test hook checked against this launch and announced.
std::unique_ptr<Backend> open_backend(const BackendChoice& choice, const Config& config, const MpiContext& context,
                                      const std::vector<CaseSpec>& cases, const std::string& program);

// Rank 0's notes on the backend: why MPI was chosen, and that --share-gpu timings are not figures.
void announce_backend(const BackendChoice& choice, const Backend& backend, const MpiContext& context,
                      const std::string& program);

}  // namespace cclbench
