#pragma once
// Launch wrappers for the verification kernels (device code in pattern_kernels.cu). Host code
// includes only this header. Every kernel computes its values with the CCLBENCH_HOST_DEVICE
// functions of bench/core/pattern.hpp and bench/core/element_codec.hpp, so the host reference of
// the same functions is bit for bit what the device writes and expects.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "bench/core/pattern.hpp"
#include "bench/core/types.hpp"

namespace cclbench {

// Where a receive buffer's elements come from: pattern_expected() arguments other than the index.
struct RecvLayout {
  Collective collective = Collective::all_reduce;
  int rank = 0;                  // the receiving rank (global rank in the communicator)
  int root = 0;
  std::uint64_t param_count = 0; // nccl-tests' paramcount (per-rank block for gathers/scatters)
};

enum class CompareMode { exact, tolerance };

// data[i] = encode(pattern_value(params, rank, first_index + i)) for i < count. `data` must be
// aligned to the element size (cudaMalloc pointers plus whole-element offsets are).
cudaError_t launch_pattern_fill(void* data, std::uint64_t count, const PatternParams& params, int rank,
                                std::uint64_t first_index, cudaStream_t stream);

// Poisons a receive region so that an element the collective does not write is always counted
// wrong: where an expected value is defined the element gets its bitwise complement (never equal,
// and for floats a negative number or NaN); elsewhere (reduce on non-root ranks) all-ones bytes.
// In CompareMode::tolerance (floats only) every element gets all-ones bytes, a NaN in every float
// format, which no tolerance accepts.
cudaError_t launch_pattern_poison(void* data, std::uint64_t count, const PatternParams& params, const RecvLayout& layout,
                                  CompareMode mode, cudaStream_t stream);

// Adds to *wrong_device (device memory, not cleared here) the number of elements i < count whose
// bits differ from encode(pattern_expected(params, layout, i)) (exact), or whose value is farther
// than relative_tolerance * max(|expected|, 1) from it (tolerance). Undefined elements are skipped.
cudaError_t launch_pattern_verify(const void* data, std::uint64_t count, const PatternParams& params,
                                  const RecvLayout& layout, CompareMode mode, double relative_tolerance,
                                  unsigned long long* wrong_device, cudaStream_t stream);

// An empty kernel (one thread): the launch-overhead reference of the micro benchmarks.
cudaError_t launch_empty_kernel(cudaStream_t stream);

}  // namespace cclbench
