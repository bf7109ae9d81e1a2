// Fill, poison and verify kernels for the verification pattern. Each element is handled as a
// machine word of the element's width, so loads and stores stay aligned and coalesced; its bits
// come from the shared host/device functions of pattern.hpp and element_codec.hpp.
#include "kernels/pattern_kernels.hpp"

#include <algorithm>

#include "bench/core/element_codec.hpp"
#include "bench/core/pattern.hpp"

namespace cclbench {
namespace {

constexpr int kThreadsPerBlock = 256;
// Grid-stride loops: enough blocks to fill any current GPU, few enough to keep launch cheap.
constexpr std::uint64_t kMaxBlocks = 4096;

unsigned blocks_for(std::uint64_t count) {
  const std::uint64_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min(blocks, kMaxBlocks)));
}

__device__ std::uint64_t grid_thread() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ std::uint64_t grid_stride() { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }

template <typename Word>
__global__ void fill_kernel(Word* data, std::uint64_t count, PatternParams params, int rank, std::uint64_t first_index) {
  for (std::uint64_t i = grid_thread(); i < count; i += grid_stride()) {
    const std::uint32_t value = pattern_value(params, rank, first_index + i);
    data[i] = static_cast<Word>(encode_small_integer_bits(params.dtype, value));
  }
}

template <typename Word>
__global__ void poison_kernel(Word* data, std::uint64_t count, PatternParams params, RecvLayout layout, bool all_ones) {
  for (std::uint64_t i = grid_thread(); i < count; i += grid_stride()) {
    std::uint64_t expected = 0;
    const bool defined =
        !all_ones && pattern_expected(params, layout.collective, layout.rank, layout.root, layout.param_count, i, &expected);
    data[i] = defined ? static_cast<Word>(~encode_small_integer_bits(params.dtype, expected)) : static_cast<Word>(~Word{0});
  }
}

template <typename Word>
__global__ void verify_kernel(const Word* data, std::uint64_t count, PatternParams params, RecvLayout layout,
                              bool tolerance, double relative_tolerance, unsigned long long* wrong) {
  unsigned long long local_wrong = 0;
  for (std::uint64_t i = grid_thread(); i < count; i += grid_stride()) {
    std::uint64_t expected = 0;
    if (!pattern_expected(params, layout.collective, layout.rank, layout.root, layout.param_count, i, &expected)) continue;
    const std::uint64_t got_bits = static_cast<std::uint64_t>(data[i]);
    if (tolerance) {
      const double got = decode_to_double(params.dtype, got_bits);
      if (!within_tolerance(got, static_cast<double>(expected), relative_tolerance)) ++local_wrong;
    } else if (got_bits != static_cast<std::uint64_t>(static_cast<Word>(encode_small_integer_bits(params.dtype, expected)))) {
      ++local_wrong;
    }
  }
  // One global atomic per block: warp shuffle, then shared-memory accumulation.
  for (int offset = 16; offset > 0; offset >>= 1) local_wrong += __shfl_down_sync(0xFFFFFFFFu, local_wrong, offset);
  __shared__ unsigned long long block_wrong;
  if (threadIdx.x == 0) block_wrong = 0;
  __syncthreads();
  if ((threadIdx.x & 31) == 0 && local_wrong != 0) atomicAdd(&block_wrong, local_wrong);
  __syncthreads();
  if (threadIdx.x == 0 && block_wrong != 0) atomicAdd(wrong, block_wrong);
}

__global__ void empty_kernel() {}

// Calls `launch.template operator()<Word>()` with the unsigned word type of the element width.
template <typename Launch>
cudaError_t dispatch_width(DataType dtype, Launch&& launch) {
  switch (element_bytes(dtype)) {
    case 1: launch.template operator()<std::uint8_t>(); break;
    case 2: launch.template operator()<std::uint16_t>(); break;
    case 4: launch.template operator()<std::uint32_t>(); break;
    case 8: launch.template operator()<std::uint64_t>(); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_pattern_fill(void* data, std::uint64_t count, const PatternParams& params, int rank,
                                std::uint64_t first_index, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_width(params.dtype, [&]<typename Word>() {
    fill_kernel<Word><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(static_cast<Word*>(data), count, params, rank,
                                                                          first_index);
  });
}

cudaError_t launch_pattern_poison(void* data, std::uint64_t count, const PatternParams& params, const RecvLayout& layout,
                                  CompareMode mode, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_width(params.dtype, [&]<typename Word>() {
    poison_kernel<Word><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(static_cast<Word*>(data), count, params, layout,
                                                                            mode == CompareMode::tolerance);
  });
}

cudaError_t launch_pattern_verify(const void* data, std::uint64_t count, const PatternParams& params,
                                  const RecvLayout& layout, CompareMode mode, double relative_tolerance,
                                  unsigned long long* wrong_device, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return dispatch_width(params.dtype, [&]<typename Word>() {
    verify_kernel<Word><<<blocks_for(count), kThreadsPerBlock, 0, stream>>>(
        static_cast<const Word*>(data), count, params, layout, mode == CompareMode::tolerance, relative_tolerance, wrong_device);
  });
}

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace cclbench
