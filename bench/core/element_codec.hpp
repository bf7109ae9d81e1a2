#pragma once
// Bit-exact encoding of the verification pattern's small non-negative integers into every data
// type, shared by the GPU fill/verify kernels and the host reference (one source, so device ==
// host bit for bit). Float formats are built from their bit layout with integer arithmetic only:
// no half/bfloat16/fp8 intrinsics, whose availability and rounding differ between host and device.
//
// Formats: IEEE binary16 (half), bfloat16, binary32, binary64, and the OCP fp8 formats NCCL uses:
// E4M3 "fn" (bias 7, no infinities, NaN = S.1111.111, max 448) and E5M2 (bias 15, IEEE-like).
#include <cstdint>
#include <cstring>

#include "bench/core/types.hpp"

#if !defined(CCLBENCH_HOST_DEVICE)
#if defined(__CUDACC__)
#define CCLBENCH_HOST_DEVICE __host__ __device__
#else
#define CCLBENCH_HOST_DEVICE
#endif
#endif

namespace cclbench {

// Bytes per element; the one table behind size_of() (types.hpp) on the host, usable on the device.
CCLBENCH_HOST_DEVICE inline unsigned element_bytes(DataType dtype) {
  switch (dtype) {
    case DataType::int8:
    case DataType::uint8:
    case DataType::fp8_e4m3:
    case DataType::fp8_e5m2: return 1;
    case DataType::float16:
    case DataType::bfloat16: return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32: return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64: return 8;
  }
  return 0;
}

struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;  // stored fraction bits (without the implicit leading 1)
  int bias;
  bool finite_only;   // E4M3fn: the all-ones exponent holds normal numbers; only S.1111.111 is NaN
};

// The float layout of `dtype`; false for integer types.
CCLBENCH_HOST_DEVICE inline bool float_format_of(DataType dtype, FloatFormat* format) {
  switch (dtype) {
    case DataType::float16: *format = {5, 10, 15, false}; return true;
    case DataType::bfloat16: *format = {8, 7, 127, false}; return true;
    case DataType::float32: *format = {8, 23, 127, false}; return true;
    case DataType::float64: *format = {11, 52, 1023, false}; return true;
    case DataType::fp8_e4m3: *format = {4, 3, 7, true}; return true;
    case DataType::fp8_e5m2: *format = {5, 2, 15, false}; return true;
    default: return false;
  }
}

// Index of the highest set bit (value > 0), portable to host and device.
CCLBENCH_HOST_DEVICE inline int highest_bit(std::uint64_t value) {
  int bit = 0;
  for (int step = 32; step > 0; step >>= 1) {
    if (value >> (bit + step)) bit += step;
  }
  return bit;
}

// `value` rounded to nearest (ties to even) in `format`, as its bit pattern. Exact for every value
// up to max_exact_integer(dtype), which is all the pattern ever produces. Values above the largest
// finite number become infinity (E4M3fn, which has none, saturates to its largest finite 448).
CCLBENCH_HOST_DEVICE inline std::uint64_t encode_float_bits(const FloatFormat& format, std::uint64_t value) {
  if (value == 0) return 0;
  const int m = format.mantissa_bits;
  int msb = highest_bit(value);
  std::uint64_t significand;  // m+1 bits, leading 1 included
  if (msb <= m) {
    significand = value << (m - msb);
  } else {
    const int shift = msb - m;
    significand = value >> shift;
    const std::uint64_t remainder = value & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half = std::uint64_t{1} << (shift - 1);
    if (remainder > half || (remainder == half && (significand & 1))) ++significand;
    if (significand >> (m + 1)) {  // rounding carried into a new leading bit
      significand >>= 1;
      ++msb;
    }
  }
  const std::uint64_t mantissa_mask = (std::uint64_t{1} << m) - 1;
  const std::uint64_t max_exponent = (std::uint64_t{1} << format.exponent_bits) - 1;
  const std::uint64_t exponent = static_cast<std::uint64_t>(msb + format.bias);
  if (format.finite_only) {
    if (exponent > max_exponent || (exponent == max_exponent && (significand & mantissa_mask) == mantissa_mask)) {
      return (max_exponent << m) | (mantissa_mask - 1);  // largest finite
    }
  } else if (exponent >= max_exponent) {
    return max_exponent << m;  // infinity
  }
  return (exponent << m) | (significand & mantissa_mask);
}

// The bit pattern (in the low element_bytes(dtype) bytes) of the small non-negative integer
// `value` in `dtype`. Integers are stored two's complement, truncated to the width.
CCLBENCH_HOST_DEVICE inline std::uint64_t encode_small_integer_bits(DataType dtype, std::uint64_t value) {
  FloatFormat format{};
  if (float_format_of(dtype, &format)) return encode_float_bits(format, value);
  const unsigned bytes = element_bytes(dtype);
  return bytes >= 8 ? value : value & ((std::uint64_t{1} << (8 * bytes)) - 1);
}

// Writes the element_bytes(dtype) little-endian bytes of `value` to `out` (any alignment).
CCLBENCH_HOST_DEVICE inline void encode_small_integer(DataType dtype, std::uint64_t value, void* out) {
  const std::uint64_t bits = encode_small_integer_bits(dtype, value);
  auto* bytes = static_cast<unsigned char*>(out);
  for (unsigned i = 0; i < element_bytes(dtype); ++i) bytes[i] = static_cast<unsigned char>(bits >> (8 * i));
}

// Reads element_bytes(dtype) little-endian bytes as a bit pattern.
CCLBENCH_HOST_DEVICE inline std::uint64_t load_element_bits(DataType dtype, const void* in) {
  const auto* bytes = static_cast<const unsigned char*>(in);
  std::uint64_t bits = 0;
  for (unsigned i = 0; i < element_bytes(dtype); ++i) bits |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  return bits;
}

CCLBENCH_HOST_DEVICE inline double double_from_bits(std::uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

CCLBENCH_HOST_DEVICE inline double quiet_nan() { return double_from_bits(0x7FF8000000000000ull); }

// 2^k for -1022 <= k <= 1023 (every exponent the narrow formats can need).
CCLBENCH_HOST_DEVICE inline double power_of_two(int k) {
  return double_from_bits(static_cast<std::uint64_t>(k + 1023) << 52);
}

// The value of a bit pattern of `dtype` as a double (NaN and infinities preserved). Used by the
// tolerance comparison and by tests; exact for every format except 64-bit integers above 2^53.
CCLBENCH_HOST_DEVICE inline double decode_to_double(DataType dtype, std::uint64_t bits) {
  switch (dtype) {
    case DataType::int8: return static_cast<double>(static_cast<std::int8_t>(bits & 0xFF));
    case DataType::uint8: return static_cast<double>(bits & 0xFF);
    case DataType::int32: return static_cast<double>(static_cast<std::int32_t>(bits & 0xFFFFFFFFu));
    case DataType::uint32: return static_cast<double>(bits & 0xFFFFFFFFu);
    case DataType::int64: return static_cast<double>(static_cast<std::int64_t>(bits));
    case DataType::uint64: return static_cast<double>(bits);
    case DataType::float64: return double_from_bits(bits);
    default: break;
  }
  FloatFormat format{};
  float_format_of(dtype, &format);
  const int m = format.mantissa_bits;
  const int e = format.exponent_bits;
  const bool negative = (bits >> (m + e)) & 1;
  const std::uint64_t mantissa = bits & ((std::uint64_t{1} << m) - 1);
  const std::uint64_t exponent = (bits >> m) & ((std::uint64_t{1} << e) - 1);
  const std::uint64_t max_exponent = (std::uint64_t{1} << e) - 1;
  double magnitude;
  if (format.finite_only && exponent == max_exponent && mantissa == (std::uint64_t{1} << m) - 1) {
    return quiet_nan();
  } else if (!format.finite_only && exponent == max_exponent) {
    if (mantissa != 0) return quiet_nan();
    magnitude = double_from_bits(0x7FF0000000000000ull);
  } else if (exponent == 0) {
    magnitude = static_cast<double>(mantissa) * power_of_two(1 - format.bias - m);
  } else {
    magnitude = static_cast<double>((std::uint64_t{1} << m) | mantissa) *
                power_of_two(static_cast<int>(exponent) - format.bias - m);
  }
  return negative ? -magnitude : magnitude;
}

// Tolerance for ReduceOp::avg on floating types, relative to max(|expected|, 1).
//
// NCCL computes a floating-point average as a premultiplied sum: each contribution is multiplied
// by 1/n (itself rounded in the data type) and the products are summed in an order that depends on
// the algorithm. That is not bit-exact, so avg on floats is verified with a tolerance: an element
// counts as wrong only when |got - expected| > tolerance * max(|expected|, 1), or when it is NaN.
// With unit roundoff u = 2^-(mantissa_bits+1) and n+1 rounding steps on the path of each element
// (the scalar 1/n, the products, n-1 additions), the classical bound is (1+u)^(n+1) - 1.
CCLBENCH_HOST_DEVICE inline double avg_relative_tolerance(DataType dtype, int nranks) {
  FloatFormat format{};
  if (!float_format_of(dtype, &format)) return 0;
  // (1 + u)^k - 1 with k = nranks + 1 rounding steps, bounded above by k*u*(1 + k*u) for k*u < 1.
  // Not computed as a product of (1 + u): for double, 1 + 2^-53 rounds to 1 and the bound would be 0.
  const double u = power_of_two(-(format.mantissa_bits + 1));
  const double k = static_cast<double>(nranks) + 1;
  return k * u * (1 + k * u);
}

// True when `got` is within the avg tolerance of `expected` (NaN is never within).
CCLBENCH_HOST_DEVICE inline bool within_tolerance(double got, double expected, double relative_tolerance) {
  const double scale = expected < 0 ? (-expected > 1 ? -expected : 1) : (expected > 1 ? expected : 1);
  const double difference = got > expected ? got - expected : expected - got;
  return difference <= relative_tolerance * scale;  // false for NaN
}

}  // namespace cclbench
