// Host unit tests of the element codec against bit patterns known from the format definitions.
#include "bench/core/element_codec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "bench/core/pattern.hpp"

namespace cclbench {
namespace {

TEST(ElementCodec, KnownBitPatterns) {
  EXPECT_EQ(encode_small_integer_bits(DataType::float16, 3), 0x4200u);
  EXPECT_EQ(encode_small_integer_bits(DataType::float16, 1), 0x3C00u);
  EXPECT_EQ(encode_small_integer_bits(DataType::float16, 2048), 0x6800u);
  EXPECT_EQ(encode_small_integer_bits(DataType::bfloat16, 3), 0x4040u);
  EXPECT_EQ(encode_small_integer_bits(DataType::bfloat16, 256), 0x4380u);
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 3), 0x44u);
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 16), 0x58u);
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 1), 0x38u);
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e5m2, 3), 0x42u);
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e5m2, 8), 0x48u);
  EXPECT_EQ(encode_small_integer_bits(DataType::float32, 3), 0x40400000u);
  EXPECT_EQ(encode_small_integer_bits(DataType::float64, 3), 0x4008000000000000ull);
  EXPECT_EQ(encode_small_integer_bits(DataType::int8, 3), 0x03u);
  EXPECT_EQ(encode_small_integer_bits(DataType::int64, 1000), 1000u);
  for (DataType dtype : all_data_types()) EXPECT_EQ(encode_small_integer_bits(dtype, 0), 0u) << name_of(dtype);
}

// The layout table against what the language knows (float, double) and against each type's size:
// a wrong row would shift every decoded value of that type.
TEST(ElementCodec, FloatLayoutsMatchTheHostTypesAndTheElementSizes) {
  FloatFormat format{};
  ASSERT_TRUE(float_format_of(DataType::float32, &format));
  EXPECT_EQ(format.mantissa_bits, std::numeric_limits<float>::digits - 1);
  EXPECT_EQ(format.bias, std::numeric_limits<float>::max_exponent - 1);
  ASSERT_TRUE(float_format_of(DataType::float64, &format));
  EXPECT_EQ(format.mantissa_bits, std::numeric_limits<double>::digits - 1);
  EXPECT_EQ(format.bias, std::numeric_limits<double>::max_exponent - 1);
  for (DataType dtype : all_data_types()) {
    if (!float_format_of(dtype, &format)) continue;
    EXPECT_EQ(1 + format.exponent_bits + format.mantissa_bits, static_cast<int>(8 * size_of(dtype))) << name_of(dtype);
    EXPECT_EQ(format.bias, (1 << (format.exponent_bits - 1)) - 1) << name_of(dtype);  // IEEE-style bias
  }
}

TEST(ElementCodec, FloatAndDoubleMatchTheHostConversionOverTheExactRange) {
  for (std::uint64_t v = 0; v <= 70000; ++v) {
    const float f = static_cast<float>(v);
    std::uint32_t fbits;
    std::memcpy(&fbits, &f, sizeof fbits);
    ASSERT_EQ(encode_small_integer_bits(DataType::float32, v), fbits) << v;
    const double d = static_cast<double>(v);
    std::uint64_t dbits;
    std::memcpy(&dbits, &d, sizeof dbits);
    ASSERT_EQ(encode_small_integer_bits(DataType::float64, v), dbits) << v;
  }
  // Above 2^24 float rounds to nearest even, as the host conversion does.
  for (std::uint64_t v : {16777217ull, 16777219ull, 33554435ull, 4294967295ull}) {
    const float f = static_cast<float>(v);
    std::uint32_t fbits;
    std::memcpy(&fbits, &f, sizeof fbits);
    EXPECT_EQ(encode_small_integer_bits(DataType::float32, v), fbits) << v;
  }
}

TEST(ElementCodec, EveryExactIntegerDecodesBackToItself) {
  for (DataType dtype : all_data_types()) {
    const std::uint64_t limit = std::min<std::uint64_t>(max_exact_integer(dtype), 5000);
    for (std::uint64_t v = 0; v <= limit; ++v) {
      ASSERT_EQ(decode_to_double(dtype, encode_small_integer_bits(dtype, v)), static_cast<double>(v))
          << name_of(dtype) << " " << v;
    }
  }
}

TEST(ElementCodec, RoundingAndSpecialValuesOfNarrowFormats) {
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 17), 0x58u);   // tie to even: 16
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 19), 0x5Au);   // 20
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 448), 0x7Eu);  // largest finite
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e4m3, 100000), 0x7Eu);  // saturates, no infinity
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e5m2, 9), 0x48u);    // tie to even: 8
  EXPECT_EQ(encode_small_integer_bits(DataType::fp8_e5m2, 100000), 0x7Cu);  // infinity
  EXPECT_EQ(encode_small_integer_bits(DataType::float16, 2049), 0x6800u);
  EXPECT_EQ(encode_small_integer_bits(DataType::float16, 2051), 0x6802u);
  EXPECT_TRUE(std::isnan(decode_to_double(DataType::fp8_e4m3, 0xFF)));
  EXPECT_EQ(decode_to_double(DataType::fp8_e4m3, 0x7E), 448.0);
  EXPECT_EQ(decode_to_double(DataType::fp8_e4m3, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_TRUE(std::isinf(decode_to_double(DataType::fp8_e5m2, 0x7C)));
  EXPECT_TRUE(std::isnan(decode_to_double(DataType::fp8_e5m2, 0xFF)));
  EXPECT_TRUE(std::isnan(decode_to_double(DataType::float16, 0xFFFF)));
  EXPECT_TRUE(std::isnan(decode_to_double(DataType::bfloat16, 0xFFFF)));
  EXPECT_EQ(decode_to_double(DataType::float16, 0xBC00), -1.0);
  EXPECT_EQ(decode_to_double(DataType::int8, 0xFF), -1.0);
  EXPECT_EQ(decode_to_double(DataType::uint8, 0xFF), 255.0);
}

TEST(ElementCodec, ByteEncodingIsLittleEndianOfTheBits) {
  unsigned char bytes[8] = {};
  encode_small_integer(DataType::float16, 3, bytes);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x42);
  EXPECT_EQ(load_element_bits(DataType::float16, bytes), 0x4200u);
  encode_small_integer(DataType::uint32, 0x01020304, bytes);
  EXPECT_EQ(bytes[0], 0x04);
  EXPECT_EQ(bytes[3], 0x01);
  for (DataType dtype : all_data_types()) EXPECT_EQ(element_bytes(dtype), size_of(dtype)) << name_of(dtype);
}

TEST(ElementCodec, AvgToleranceAcceptsRoundingButNotPoison) {
  const double tol = avg_relative_tolerance(DataType::float16, 3);
  EXPECT_GT(tol, 0.0);
  EXPECT_LT(tol, 0.01);
  EXPECT_EQ(avg_relative_tolerance(DataType::int32, 8), 0.0);
  EXPECT_TRUE(within_tolerance(1000.5, 1000, tol));
  EXPECT_FALSE(within_tolerance(1010, 1000, tol));
  EXPECT_FALSE(within_tolerance(decode_to_double(DataType::float16, 0xFFFF), 3, tol));  // NaN poison
  // fp8 e5m2, three ranks: 7/3 rounds to 2.5, and 2.5*3 sums to 8 (7.5 ties to even).
  EXPECT_TRUE(within_tolerance(8, 7, avg_relative_tolerance(DataType::fp8_e5m2, 3)));
}

TEST(ElementCodec, AvgToleranceOfEveryFloatTypeAcceptsOneUlpAboveTheExactValue) {
  // For double, 1 + 2^-53 rounds to 1: a bound computed as a product of (1 + u) came out 0 and
  // rejected NCCL's legitimate last-bit rounding (seen on the H200).
  for (DataType dtype : {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64, DataType::fp8_e4m3,
                         DataType::fp8_e5m2}) {
    const double tol = avg_relative_tolerance(dtype, 3);
    EXPECT_GT(tol, 0.0) << name_of(dtype);
    for (std::uint64_t value : {1ull, 7ull, 12ull}) {
      const std::uint64_t above = encode_small_integer_bits(dtype, value) + 1;
      EXPECT_TRUE(within_tolerance(decode_to_double(dtype, above), static_cast<double>(value), tol))
          << name_of(dtype) << " " << value;
    }
  }
}

}  // namespace
}  // namespace cclbench
