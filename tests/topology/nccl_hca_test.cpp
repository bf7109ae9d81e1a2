#include <gtest/gtest.h>

#include <string>

#include "bench/core/errors.hpp"
#include "topology/nccl_hca.hpp"

namespace cclbench::topology {
namespace {

TEST(NcclIbHca, UnsetAllowsEverything) {
  const HcaSpec spec = parse_nccl_ib_hca("");
  EXPECT_FALSE(spec.is_set());
  EXPECT_TRUE(spec.allows("mlx5_0", 1));
  EXPECT_TRUE(spec.allows("anything", std::nullopt));
}

TEST(NcclIbHca, ExactListWithPorts) {
  const HcaSpec spec = parse_nccl_ib_hca("=mlx5_0:1,mlx5_3:1");
  EXPECT_TRUE(spec.exact());
  EXPECT_FALSE(spec.exclude());
  ASSERT_EQ(spec.entries().size(), 2u);
  EXPECT_EQ(spec.entries()[1].name, "mlx5_3");
  EXPECT_EQ(spec.entries()[1].port, 1);
  EXPECT_TRUE(spec.allows("mlx5_0", 1));
  EXPECT_TRUE(spec.allows("mlx5_3", 1));
  EXPECT_FALSE(spec.allows("mlx5_0", 2));
  EXPECT_FALSE(spec.allows("mlx5_1", 1));
  EXPECT_FALSE(spec.allows("mlx5_30", 1));      // exact: no prefix match
  EXPECT_TRUE(spec.allows("mlx5_0", std::nullopt));  // unknown port matches, as NCCL's port -1
}

TEST(NcclIbHca, PrefixMatchesLongerNamesLikeNccl) {
  const HcaSpec prefix = parse_nccl_ib_hca("mlx5_1");
  EXPECT_TRUE(prefix.allows("mlx5_1", 1));
  EXPECT_TRUE(prefix.allows("mlx5_10", 1));
  EXPECT_FALSE(prefix.allows("mlx5_0", 1));
  const HcaSpec exact = parse_nccl_ib_hca("=mlx5_1");
  EXPECT_TRUE(exact.allows("mlx5_1", 1));
  EXPECT_FALSE(exact.allows("mlx5_10", 1));
  EXPECT_TRUE(parse_nccl_ib_hca("mlx5").allows("mlx5_7", 2));
}

TEST(NcclIbHca, ExcludeList) {
  const HcaSpec spec = parse_nccl_ib_hca("^mlx5_1");
  EXPECT_TRUE(spec.exclude());
  EXPECT_FALSE(spec.allows("mlx5_1", 1));
  EXPECT_FALSE(spec.allows("mlx5_10", 1));  // prefix, as NCCL
  EXPECT_TRUE(spec.allows("mlx5_0", 1));
  EXPECT_TRUE(spec.allows("mlx5_3", 1));
  const HcaSpec exact = parse_nccl_ib_hca("^=mlx5_1");
  EXPECT_TRUE(exact.exclude());
  EXPECT_TRUE(exact.exact());
  EXPECT_FALSE(exact.allows("mlx5_1", 1));
  EXPECT_TRUE(exact.allows("mlx5_10", 1));
  const HcaSpec port = parse_nccl_ib_hca("^mlx5_0:2");
  EXPECT_TRUE(port.allows("mlx5_0", 1));
  EXPECT_FALSE(port.allows("mlx5_0", 2));
}

TEST(NcclIbHca, EmptyEntriesAndRailFieldsAreAcceptedAsNcclDoes) {
  const HcaSpec spec = parse_nccl_ib_hca("mlx5_0,,mlx5_3:1:0:0,");
  ASSERT_EQ(spec.entries().size(), 2u);
  EXPECT_EQ(spec.entries()[0].port, std::nullopt);
  EXPECT_EQ(spec.entries()[1].port, 1);
  EXPECT_EQ(spec.text(), "mlx5_0,,mlx5_3:1:0:0,");
  EXPECT_FALSE(spec.allows("mlx5_3", 2));
}

TEST(NcclIbHca, InvalidSpecsAreUsageErrorsOnOneLine) {
  const std::string huge(100 * 1024, 'a');
  std::string many;
  for (int i = 0; i < 33; ++i) many += "mlx5_" + std::to_string(i) + ",";
  const std::string long_name(64, 'm');
  for (const std::string& bad : {std::string("^"), std::string("="), std::string("^="), std::string("=,"), std::string(","),
                                 std::string("mlx5_0:x"), std::string("mlx5_0:0"), std::string("mlx5_0:-1"),
                                 std::string("mlx5_0:256"), std::string(":1"), std::string("mlx5_0, mlx5_3"), huge, many,
                                 long_name, std::string("mlx5_0="), std::string("mlx5_0,^mlx5_1"),
                                 std::string("mlx5_0:1:2:3:4"), std::string("mlx5_0:1:z"), std::string("mlx5\x01")}) {
    try {
      parse_nccl_ib_hca(bad);
      ADD_FAILURE() << "accepted '" << bad.substr(0, 40) << "'";
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find("NCCL_IB_HCA"), std::string::npos) << message;
      EXPECT_LT(message.size(), 300u) << "the message must not echo a huge spec";
    }
  }
}

}  // namespace
}  // namespace cclbench::topology
