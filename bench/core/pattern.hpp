#pragma once
// The verifiable data pattern: small integers, so every reduction is exact in any order and in
// every data type (fp8 included), and the host reference below is bit-for-bit what the GPU kernels
// compute: the kernels include this header and call the same functions.
//
// A value is a function of (rank, element index, repetition). Reductions use ranges chosen so that
// the reduced value of n ranks stays an exactly representable integer:
//   sum     per-rank values 0..A with n*A < max exact integer of the dtype
//   avg     every rank contributes the same value c(index); avg = c (ints exact; floats: see
//           verification tolerance in the backend)
//   prod    values 1 or 2, with exactly min(n, T) ranks contributing 2 per element
//   max/min values 0..M
//   mulsum  per-rank values 0..A with A * sum of the ranks' scalars < max exact integer; rank r
//           contributes premul_scalar(r) * value (nccl-tests' scalar: 1 on even ranks, 2 on odd)
//   none    (data movement) values 0..M, distinct streams per rank
#include <cstdint>

#include "bench/core/types.hpp"

#if defined(__CUDACC__)
#define CCLBENCH_HOST_DEVICE __host__ __device__
#else
#define CCLBENCH_HOST_DEVICE
#endif

namespace cclbench {

struct PatternParams {
  DataType dtype;
  ReduceOp op;        // ReduceOp::none for data-movement collectives
  int nranks;
  std::uint32_t rep;  // repetition: each check iteration uses fresh values
  std::uint32_t max_value;  // M: data-movement and max/min range (<= max exact integer)
  std::uint32_t sum_range;  // A: per-rank range for sum
  std::uint32_t prod_twos;  // T: ranks contributing 2 to each product
};

// Fills the ranges for a dtype/op/rank count. Host-only (uses the type tables).
PatternParams make_pattern(DataType dtype, ReduceOp op, int nranks, std::uint32_t rep);

// The PreMulSum scalar of `rank`, nccl-tests' ncclVerifiablePremulScalar: 1 on even ranks, 2 on odd
// ones. Small integers, so the premultiplied values stay exact in every data type.
CCLBENCH_HOST_DEVICE inline std::uint32_t premul_scalar(int rank) { return rank % 2 == 0 ? 1u : 2u; }

CCLBENCH_HOST_DEVICE inline std::uint32_t pattern_mix(std::uint64_t index, std::uint32_t rank, std::uint32_t rep) {
  std::uint32_t x = static_cast<std::uint32_t>(index) * 0x9E3779B1u ^ static_cast<std::uint32_t>(index >> 32) * 0x7FEB352Du;
  x += rank * 0x85EBCA77u + rep * 0xC2B2AE3Du + 0x165667B1u;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  return x;
}

// The value rank `rank` contributes at element `index` of its (logical, whole) send buffer.
CCLBENCH_HOST_DEVICE inline std::uint32_t pattern_value(const PatternParams& p, int rank, std::uint64_t index) {
  const auto r = static_cast<std::uint32_t>(rank);
  switch (p.op) {
    case ReduceOp::sum:
    case ReduceOp::mulsum:
      if (p.sum_range == 0) {  // fewer exact integers than ranks: a fixed subset of ranks contributes 1
        return ((index + r + p.rep) % static_cast<std::uint64_t>(p.nranks)) < p.max_value ? 1u : 0u;
      }
      return pattern_mix(index, r, p.rep) % (p.sum_range + 1);
    case ReduceOp::avg: return pattern_mix(index, 0, p.rep) % (p.max_value + 1);
    case ReduceOp::prod:
      return ((index + r + p.rep) % static_cast<std::uint64_t>(p.nranks)) < p.prod_twos ? 2u : 1u;
    case ReduceOp::max:
    case ReduceOp::min:
    case ReduceOp::none: return pattern_mix(index, r, p.rep) % (p.max_value + 1);
  }
  return 0;
}

// The reduction over all ranks of pattern_value at `index` (exact integer arithmetic).
CCLBENCH_HOST_DEVICE inline std::uint64_t pattern_reduced(const PatternParams& p, std::uint64_t index) {
  std::uint64_t acc = pattern_value(p, 0, index) * (p.op == ReduceOp::mulsum ? premul_scalar(0) : 1u);
  for (int rank = 1; rank < p.nranks; ++rank) {
    const std::uint64_t v = pattern_value(p, rank, index);
    switch (p.op) {
      case ReduceOp::sum: acc += v; break;
      case ReduceOp::mulsum: acc += premul_scalar(rank) * v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::max: acc = v > acc ? v : acc; break;
      case ReduceOp::min: acc = v < acc ? v : acc; break;
      case ReduceOp::avg:
      case ReduceOp::none: break;  // avg: every rank holds the same value, which is the average
    }
  }
  return acc;
}

// Which logical element of which rank's send buffer lands at element `recv_index` of rank `rank`'s
// receive buffer, for each collective. `count` is the per-rank parameter count (nccl-tests'
// paramcount). Returns false when that element is not defined by the collective (reduce, non-root).
struct Source {
  bool reduced;        // true: the reduction over all ranks at `index`
  int rank;            // otherwise: this rank's value at `index`
  std::uint64_t index;
};

CCLBENCH_HOST_DEVICE inline bool pattern_source(Collective collective, int rank, int nranks, int root, std::uint64_t count,
                                                std::uint64_t recv_index, Source* out) {
  switch (collective) {
    case Collective::all_reduce: *out = {true, 0, recv_index}; return true;
    case Collective::all_gather: *out = {false, static_cast<int>(recv_index / count), recv_index % count}; return true;
    case Collective::reduce_scatter: *out = {true, 0, static_cast<std::uint64_t>(rank) * count + recv_index}; return true;
    case Collective::alltoall:
      *out = {false, static_cast<int>(recv_index / count), static_cast<std::uint64_t>(rank) * count + recv_index % count};
      return true;
    case Collective::broadcast: *out = {false, root, recv_index}; return true;
    case Collective::reduce:
      if (rank != root) return false;
      *out = {true, 0, recv_index};
      return true;
    case Collective::sendrecv: *out = {false, (rank - 1 + nranks) % nranks, recv_index}; return true;
  }
  return false;
}

// The exact integer expected at `recv_index` of `rank`'s receive buffer (when defined).
CCLBENCH_HOST_DEVICE inline bool pattern_expected(const PatternParams& p, Collective collective, int rank, int root,
                                                  std::uint64_t count, std::uint64_t recv_index, std::uint64_t* value) {
  Source source{};
  if (!pattern_source(collective, rank, p.nranks, root, count, recv_index, &source)) return false;
  *value = source.reduced ? pattern_reduced(p, source.index) : pattern_value(p, source.rank, source.index);
  return true;
}

}  // namespace cclbench
