#include "kernels/p2p_kernels.hpp"

#include "bench/core/pattern.hpp"

namespace cclbench::kernels {
namespace {

__host__ __device__ inline std::uint32_t word_value(std::uint32_t device, std::uint32_t sample, std::uint64_t word_index) {
  return pattern_mix(word_index, device, sample);
}

__global__ void fill_pattern_kernel(unsigned char* dst, std::uint64_t bytes, std::uint32_t device, std::uint32_t sample) {
  const std::uint64_t words = bytes / 4;
  auto* dst_words = reinterpret_cast<std::uint32_t*>(dst);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    dst_words[i] = word_value(device, sample, i);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const std::uint32_t last = word_value(device, sample, words);
    for (std::uint64_t b = words * 4; b < bytes; ++b) dst[b] = static_cast<unsigned char>(last >> (8 * (b % 4)));
  }
}

__global__ void count_mismatches_kernel(const unsigned char* src, std::uint64_t bytes, std::uint32_t device,
                                        std::uint32_t sample, unsigned long long* wrong_words) {
  const std::uint64_t words = bytes / 4;
  const auto* src_words = reinterpret_cast<const std::uint32_t*>(src);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long wrong = 0;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    // Volatile: host memory written by a copy engine must be read now, not from a stale cache line.
    const std::uint32_t value = *reinterpret_cast<const volatile std::uint32_t*>(src_words + i);
    wrong += value != word_value(device, sample, i) ? 1u : 0u;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const std::uint32_t last = word_value(device, sample, words);
    for (std::uint64_t b = words * 4; b < bytes; ++b) {
      const unsigned char value = *reinterpret_cast<const volatile unsigned char*>(src + b);
      wrong += value != static_cast<unsigned char>(last >> (8 * (b % 4))) ? 1u : 0u;
    }
  }
  // Correct data costs no atomics at all; only a corrupted buffer pays for them.
  if (wrong != 0) atomicAdd(wrong_words, wrong);
}

// Four independent 16-byte loads in flight per thread before the first store: enough memory-level
// parallelism to saturate HBM and links with one resident grid.
constexpr int kUnroll = 4;

__global__ void __launch_bounds__(kSmCopyThreads) sm_copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                                                 std::uint64_t vectors, unsigned char* __restrict__ dst_tail,
                                                                 const unsigned char* __restrict__ src_tail, unsigned tail_bytes) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < vectors; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = __ldcs(src + i + k * stride);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) __stcs(dst + i + k * stride, v[k]);
  }
  for (; i < vectors; i += stride) __stcs(dst + i, __ldcs(src + i));
  if (blockIdx.x == 0 && threadIdx.x < tail_bytes) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

__device__ inline std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void blocker_kernel(const volatile int* flag, int* timed_out, std::uint64_t timeout_ns) {
  const std::uint64_t start = global_timer_ns();
  while (*flag == 0) {
    if (global_timer_ns() - start > timeout_ns) {
      *reinterpret_cast<volatile int*>(timed_out) = 1;
      return;
    }
  }
}

// The slowdown test knob's spin (bench/core/slowdown_injection.hpp): one thread, *cycles SM clock
// cycles read at run time, so a captured graph follows a new calibration without a new capture.
__global__ void delay_kernel(const unsigned long long* cycles) {
  const unsigned long long wait = *cycles;
  if (wait == 0) return;
  const long long start = clock64();
  while (static_cast<unsigned long long>(clock64() - start) < wait) {
  }
}

__global__ void pointer_chase_kernel(const unsigned char* base, std::uint64_t* position, std::uint64_t loads) {
  std::uint64_t offset = *position;
  for (std::uint64_t i = 0; i < loads; ++i) {
    // .cg: skip L1 so every step is a real trip to the memory that holds the chain.
    offset = __ldcg(reinterpret_cast<const unsigned long long*>(base + offset));
  }
  *position = offset;
}

__global__ void flip_bit_kernel(unsigned char* byte) {
  volatile unsigned char* target = byte;
  const unsigned char value = *target;
  *target = static_cast<unsigned char>(value ^ 1u);
}

}  // namespace

std::uint32_t p2p_pattern_word(std::uint32_t device, std::uint32_t sample, std::uint64_t word_index) {
  return word_value(device, sample, word_index);
}

cudaError_t launch_fill_pattern(void* dst, std::uint64_t bytes, std::uint32_t device, std::uint32_t sample, int blocks,
                                cudaStream_t stream) {
  fill_pattern_kernel<<<blocks, 512, 0, stream>>>(static_cast<unsigned char*>(dst), bytes, device, sample);
  return cudaGetLastError();
}

cudaError_t launch_count_mismatches(const void* src, std::uint64_t bytes, std::uint32_t device, std::uint32_t sample,
                                    unsigned long long* wrong_words, int blocks, cudaStream_t stream) {
  count_mismatches_kernel<<<blocks, 512, 0, stream>>>(static_cast<const unsigned char*>(src), bytes, device, sample,
                                                      wrong_words);
  return cudaGetLastError();
}

cudaError_t launch_sm_copy(void* dst, const void* src, std::uint64_t bytes, int blocks, cudaStream_t stream) {
  const std::uint64_t vectors = bytes / sizeof(uint4);
  const std::uint64_t vector_bytes = vectors * sizeof(uint4);
  sm_copy_kernel<<<blocks, kSmCopyThreads, 0, stream>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), vectors, static_cast<unsigned char*>(dst) + vector_bytes,
      static_cast<const unsigned char*>(src) + vector_bytes, static_cast<unsigned>(bytes - vector_bytes));
  return cudaGetLastError();
}

cudaError_t sm_copy_blocks_per_sm(int* blocks_per_sm) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, sm_copy_kernel, kSmCopyThreads, 0);
}

cudaError_t launch_blocker(const volatile int* flag, int* timed_out, std::uint64_t timeout_ns, cudaStream_t stream) {
  blocker_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  return cudaGetLastError();
}

cudaError_t launch_delay(const unsigned long long* cycles, cudaStream_t stream) {
  delay_kernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

cudaError_t launch_flip_bit(void* data, std::uint64_t offset, cudaStream_t stream) {
  flip_bit_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned char*>(data) + offset);
  return cudaGetLastError();
}

cudaError_t launch_pointer_chase(const void* base, std::uint64_t* position, std::uint64_t loads, cudaStream_t stream) {
  pointer_chase_kernel<<<1, 1, 0, stream>>>(static_cast<const unsigned char*>(base), position, loads);
  return cudaGetLastError();
}

}  // namespace cclbench::kernels
