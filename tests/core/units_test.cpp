#include "bench/core/units.hpp"

#include <gtest/gtest.h>

#include "bench/core/errors.hpp"

namespace cclbench {
namespace {

TEST(ParseSize, SuffixesArePowersOf1024) {
  EXPECT_EQ(parse_size("8K", "-b"), 8192u);
  EXPECT_EQ(parse_size("8k", "-b"), 8192u);
  EXPECT_EQ(parse_size("64M", "-e"), 64ull << 20);
  EXPECT_EQ(parse_size("1G", "-e"), 1ull << 30);
  EXPECT_EQ(parse_size("4096", "-b"), 4096u);
  EXPECT_EQ(parse_size("4096B", "-b"), 4096u);
  EXPECT_EQ(parse_size("0", "-b"), 0u);
}

TEST(ParseSize, RejectsJunkWithTheFlagName) {
  for (const char* bad : {"", "foo", "K", "-8K", "8KK", "8.5M", " 8K", "8K ", "0x10", "M8"}) {
    try {
      parse_size(bad, "-b");
      FAIL() << "accepted '" << bad << "'";
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("-b"), std::string::npos) << error.what();
    }
  }
}

TEST(ParseSize, RejectsOverflow) {
  EXPECT_THROW(parse_size("99999999999999999999", "-e"), UsageError);
  EXPECT_THROW(parse_size("17179869184G", "-e"), UsageError);
}

TEST(ParseInteger, EnforcesRange) {
  EXPECT_EQ(parse_integer("20", "-n", 1, 100), 20);
  EXPECT_THROW(parse_integer("0", "-n", 1, 100), UsageError);
  EXPECT_THROW(parse_integer("1e3", "-n", 1, 100000), UsageError);
  EXPECT_THROW(parse_integer("", "-n", 1, 100), UsageError);
}

TEST(ParseNumber, RejectsNonFinite) {
  EXPECT_DOUBLE_EQ(parse_number("2.5", "-f", 1, 10), 2.5);
  EXPECT_THROW(parse_number("nan", "-f", 1, 10), UsageError);
  EXPECT_THROW(parse_number("inf", "-f", 1, 1e300), UsageError);
}

TEST(FormatSize, ExactPowersOnly) {
  EXPECT_EQ(format_size(8192), "8K");
  EXPECT_EQ(format_size(64ull << 20), "64M");
  EXPECT_EQ(format_size(1ull << 30), "1G");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(0), "0");
}

}  // namespace
}  // namespace cclbench
