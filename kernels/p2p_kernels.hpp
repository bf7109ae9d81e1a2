#pragma once
// Device code of the P2P / host-device matrix, behind plain launch wrappers so host code compiles
// with the host compiler. Every wrapper launches on the given stream of the *current* device and
// returns the cudaError_t of cudaGetLastError() right after the launch; callers check it.
#include <cuda_runtime.h>

#include <cstdint>

namespace cclbench::kernels {

// The value of 32-bit word `word_index` of a buffer filled for (device, sample). Host and device
// agree on it (it is bench/core/pattern.hpp's mix), so a wrong word can be told from a right one.
std::uint32_t p2p_pattern_word(std::uint32_t device, std::uint32_t sample, std::uint64_t word_index);

// Writes the (device, sample) pattern into `bytes` bytes at `dst` (device memory, peer memory or
// mapped host memory). A trailing partial word gets the low bytes of its word's value.
cudaError_t launch_fill_pattern(void* dst, std::uint64_t bytes, std::uint32_t device, std::uint32_t sample,
                                int blocks, cudaStream_t stream);

// Adds to *wrong_words (device memory, zeroed by the caller) the number of words (and trailing
// bytes) of `src` that differ from the (device, sample) pattern.
cudaError_t launch_count_mismatches(const void* src, std::uint64_t bytes, std::uint32_t device, std::uint32_t sample,
                                    unsigned long long* wrong_words, int blocks, cudaStream_t stream);

// Copies `bytes` from src to dst with 16-byte vector loads/stores, grid-stride, several loads in
// flight per thread. Pointers must be 16-byte aligned (cudaMalloc / page-aligned host memory);
// a tail shorter than 16 bytes is copied bytewise.
cudaError_t launch_sm_copy(void* dst, const void* src, std::uint64_t bytes, int blocks, cudaStream_t stream);
inline constexpr int kSmCopyThreads = 512;
// Blocks per SM for launch_sm_copy at kSmCopyThreads threads (occupancy query).
cudaError_t sm_copy_blocks_per_sm(int* blocks_per_sm);

// One thread spins until *flag (mapped pinned host memory) becomes non-zero, so work queued
// behind it on the stream starts together when the host releases the flag. Gives up after
// timeout_ns (GPU global timer) and then sets *timed_out (mapped host memory) to 1, so a host that
// never released the flag cannot hang the run, and the sample is known to be invalid.
cudaError_t launch_blocker(const volatile int* flag, int* timed_out, std::uint64_t timeout_ns, cudaStream_t stream);

// Opens the blocker's flag when it goes out of scope, also when queueing work behind the blocker
// threw halfway, so no blocker spins until its timeout in front of a stream about to be abandoned.
class BlockerRelease {
 public:
  explicit BlockerRelease(volatile int* flag) : flag_(flag) {}
  ~BlockerRelease() { *flag_ = 1; }
  BlockerRelease(const BlockerRelease&) = delete;
  BlockerRelease& operator=(const BlockerRelease&) = delete;

 private:
  volatile int* flag_;
};

// One thread spins for *cycles (device memory) SM clock cycles: the slowdown test knob's delay
// (bench/core/slowdown_injection.hpp), put on a timed stream. Zero returns at once (its launch cost
// alone). The count is read when the kernel runs, so a captured graph node follows later values.
cudaError_t launch_delay(const unsigned long long* cycles, cudaStream_t stream);

// Flips the lowest bit of the byte at data + offset (one thread): a deliberate corruption, used by
// p2p_matrix --inject-corruption to prove that verification catches a wrong copy.
cudaError_t launch_flip_bit(void* data, std::uint64_t offset, cudaStream_t stream);

// Single thread, `loads` dependent 8-byte loads: each node at base + offset holds the byte offset of
// the next node. Starts at *position (device memory) and stores the final offset back there, so
// consecutive launches continue the chain instead of re-touching warm lines.
cudaError_t launch_pointer_chase(const void* base, std::uint64_t* position, std::uint64_t loads, cudaStream_t stream);

}  // namespace cclbench::kernels
