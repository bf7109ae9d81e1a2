#include "bench/evidence/rails.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace cclbench {
namespace {

namespace fs = std::filesystem;

const std::string kSysfs = std::string(CCLBENCH_SOURCE_DIR) + "/tests/data/evidence/sysfs/";

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cclbench_rails_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One tree per snapshot: root/<name>/class/infiniband/<hca>/ports/1/counters/port_{xmit,rcv}_data
  std::string tree(const std::string& name, const std::vector<std::tuple<std::string, std::string, std::string>>& hcas) {
    const fs::path root = fs::path(dir_) / name;
    for (const auto& [hca, xmit, rcv] : hcas) {
      const fs::path counters = root / "class" / "infiniband" / hca / "ports" / "1" / "counters";
      fs::create_directories(counters);
      std::ofstream(counters / "port_xmit_data") << xmit << "\n";
      std::ofstream(counters / "port_rcv_data") << rcv << "\n";
    }
    return root.string();
  }
  std::string dir_;
};

const nlohmann::json& port(const nlohmann::json& delta, const std::string& rail) {
  for (const auto& entry : delta["ib_ports"]) {
    if (entry["rail"] == rail) return entry;
  }
  throw std::runtime_error("no rail " + rail);
}

TEST(Rails, ReadsTheFixtureTreeWithNetdevsAndErrorCounters) {
  const RailSnapshot snapshot = read_rail_counters(kSysfs + "two_rails_before");
  EXPECT_TRUE(snapshot.ib_missing_reason.empty());
  ASSERT_EQ(snapshot.ib_ports.size(), 2u);
  EXPECT_EQ(snapshot.ib_ports[0].rail(), "mlx5_0:1");
  EXPECT_EQ(snapshot.ib_ports[0].netdev, "eth0");
  EXPECT_EQ(snapshot.ib_ports[0].link_layer, "Ethernet");
  EXPECT_EQ(snapshot.ib_ports[0].xmit_data_words, 1000000u);
  EXPECT_EQ(snapshot.ib_ports[1].netdev, "eth3");
  EXPECT_EQ(snapshot.ib_ports[1].error_counters.at("out_of_sequence"), 5u);
  EXPECT_EQ(snapshot.ib_ports[1].error_counters.count("port_xmit_packets"), 0u);  // not an error counter
  ASSERT_EQ(snapshot.netdevs.size(), 3u);
}

TEST(Rails, DeltasAreBytesWithSharesAndNoImbalanceForEvenRails) {
  const RailSnapshot before = read_rail_counters(kSysfs + "two_rails_before");
  const RailSnapshot after = read_rail_counters(kSysfs + "two_rails_after");
  RailOptions options;
  options.expected_rails = rails_from_nccl_ib_hca("=mlx5_0:1,mlx5_3:1");
  const nlohmann::json delta = rail_delta_json(before, after, options);
  const nlohmann::json rail0 = port(delta, "mlx5_0:1");
  EXPECT_EQ(rail0["xmit_bytes"], 10000000u);  // 2.5M words x 4
  EXPECT_EQ(rail0["rcv_bytes"], 10000000u);
  EXPECT_DOUBLE_EQ(rail0["share"].get<double>(), 0.5);
  const nlohmann::json rail3 = port(delta, "mlx5_3:1");
  EXPECT_EQ(rail3["xmit_bytes"], 9600000u);
  EXPECT_EQ(rail3["rcv_bytes"], 10400000u);
  EXPECT_EQ(rail3["error_increments"]["out_of_sequence"], 2u);
  EXPECT_EQ(delta["error_increments_total"], 2u);
  EXPECT_EQ(delta["imbalanced"], false);
  EXPECT_EQ(delta["rails_total_bytes"], 40000000u);
  EXPECT_FALSE(delta.contains("note")) << "constant text is written once per document (kRailCounterNote)";
  // netdevs: lo is left out by default, eth0 moved 10 MB out; eth3 moved nothing (5000/6000 before and
  // after in the fixture) and is counted, not listed.
  ASSERT_EQ(delta["netdevs"].size(), 1u) << delta["netdevs"];
  EXPECT_EQ(delta["netdevs_zero_omitted"], 1u);
  bool saw_eth0 = false;
  for (const auto& netdev : delta["netdevs"]) {
    EXPECT_NE(netdev["name"], "lo");
    if (netdev["name"] == "eth0") {
      saw_eth0 = true;
      EXPECT_EQ(netdev["tx_bytes"], 10000000u);
      EXPECT_EQ(netdev["rx_bytes"], 16000000u);
    }
  }
  EXPECT_TRUE(saw_eth0);
}

TEST(Rails, ZeroDeltaNetdevsAreListedWhenAskedFor) {
  const RailSnapshot before = read_rail_counters(kSysfs + "two_rails_before");
  const RailSnapshot after = read_rail_counters(kSysfs + "two_rails_after");
  RailOptions options;
  options.keep_zero_netdevs = true;
  nlohmann::json delta = rail_delta_json(before, after, options);
  ASSERT_EQ(delta["netdevs"].size(), 2u) << delta["netdevs"];  // eth0, eth3 (lo never by default)
  EXPECT_EQ(delta["netdevs"][1]["name"], "eth3");
  EXPECT_EQ(delta["netdevs"][1]["tx_bytes"], 0u);
  EXPECT_EQ(delta["netdevs_zero_omitted"], 0u);
  // Naming an interface asks for it too.
  options = RailOptions{};
  options.netdevs = {"eth3"};
  delta = rail_delta_json(before, after, options);
  ASSERT_EQ(delta["netdevs"].size(), 1u) << delta["netdevs"];
  EXPECT_EQ(delta["netdevs"][0]["rx_bytes"], 0u);
}

TEST_F(FakeSysfs, RailBelowAQuarterIsFlaggedWhenTwoAreExpected) {
  const auto before = read_rail_counters(tree("before", {{"mlx5_0", "0", "0"}, {"mlx5_3", "0", "0"}}));
  const auto after = read_rail_counters(tree("after", {{"mlx5_0", "900", "0"}, {"mlx5_3", "100", "0"}}));
  RailOptions options;
  options.expected_rails = {"mlx5_0", "mlx5_3"};
  const nlohmann::json delta = rail_delta_json(before, after, options);
  EXPECT_EQ(delta["imbalanced"], true);
  EXPECT_DOUBLE_EQ(port(delta, "mlx5_3:1")["share"].get<double>(), 0.1);
  ASSERT_FALSE(delta["flags"].empty());
  EXPECT_NE(delta["flags"][0].get<std::string>().find("rail mlx5_3:1 carried 10%"), std::string::npos) << delta["flags"];
  // A single expected rail is never "imbalanced".
  options.expected_rails = {"mlx5_0"};
  const nlohmann::json single = rail_delta_json(before, after, options);
  EXPECT_TRUE(single["imbalanced"].is_null());
  EXPECT_FALSE(port(single, "mlx5_3:1")["expected_rail"].get<bool>());
}

TEST_F(FakeSysfs, CounterThatDecreasedIsNullWithReason) {
  const auto before = read_rail_counters(tree("before", {{"mlx5_0", "5000", "10"}, {"mlx5_3", "10", "10"}}));
  const auto after = read_rail_counters(tree("after", {{"mlx5_0", "20", "20"}, {"mlx5_3", "30", "30"}}));
  const nlohmann::json delta = rail_delta_json(before, after, RailOptions{});
  const nlohmann::json rail = port(delta, "mlx5_0:1");
  EXPECT_TRUE(rail["xmit_bytes"].is_null());
  EXPECT_TRUE(rail["total_bytes"].is_null());
  EXPECT_NE(rail["reason"].get<std::string>().find("decreased"), std::string::npos);
  EXPECT_TRUE(delta["imbalanced"].is_null());
  EXPECT_TRUE(delta["rails_total_bytes"].is_null());
}

TEST_F(FakeSysfs, GarbageCounterIsNullWithReason) {
  const auto before = read_rail_counters(tree("before", {{"mlx5_0", "abc", "1"}}));
  ASSERT_EQ(before.ib_ports.size(), 1u);
  EXPECT_FALSE(before.ib_ports[0].xmit_data_words.has_value());
  EXPECT_NE(before.ib_ports[0].reason.find("unexpected content"), std::string::npos);
}

TEST_F(FakeSysfs, MissingTreeIsNullWithReasonNeverZero) {
  const RailSnapshot empty = read_rail_counters(dir_ + "/nothing_here");
  EXPECT_TRUE(empty.ib_ports.empty());
  EXPECT_NE(empty.ib_missing_reason.find("class/infiniband"), std::string::npos);
  EXPECT_NE(empty.net_missing_reason.find("class/net"), std::string::npos);
  RailOptions options;
  options.expected_rails = {"mlx5_0", "mlx5_3"};
  options.netdevs = {"eth0"};
  const nlohmann::json delta = rail_delta_json(empty, empty, options);
  EXPECT_TRUE(delta["ib_ports"].empty());
  EXPECT_NE(delta["ib_reason"].get<std::string>().find("no "), std::string::npos);
  EXPECT_TRUE(delta["imbalanced"].is_null());
  EXPECT_TRUE(delta["rails_total_bytes"].is_null());
  ASSERT_EQ(delta["netdevs"].size(), 1u);
  EXPECT_TRUE(delta["netdevs"][0]["tx_bytes"].is_null());
  EXPECT_FALSE(delta["netdevs"][0]["reason"].is_null());
  EXPECT_EQ(delta["flags"].size(), 2u);  // both expected rails are absent
}

// Schema 1.5: netdev rails. One tree per snapshot: root/<name>/class/net/<if>/statistics/{tx,rx}_bytes.
std::string net_tree(const std::string& dir, const std::string& name,
                     const std::vector<std::tuple<std::string, std::string, std::string>>& interfaces) {
  const fs::path root = fs::path(dir) / name;
  fs::create_directories(root / "class" / "net");
  for (const auto& [interface, tx, rx] : interfaces) {
    const fs::path statistics = root / "class" / "net" / interface / "statistics";
    fs::create_directories(statistics);
    std::ofstream(statistics / "tx_bytes") << tx << "\n";
    std::ofstream(statistics / "rx_bytes") << rx << "\n";
  }
  return root.string();
}

TEST_F(FakeSysfs, NetdevRailsCarryByteDeltasAndSharesPerHost) {
  const auto before = read_rail_counters(net_tree(dir_, "b", {{"eth0", "1000", "2000"}, {"eth3", "500", "500"}, {"lo", "7", "7"}}));
  const auto after = read_rail_counters(net_tree(dir_, "a", {{"eth0", "4000", "5000"}, {"eth3", "3500", "3500"}, {"lo", "9", "9"}}));
  RailOptions options;
  options.netdev_rails = {"eth0", "eth3"};
  options.netdev_rails_from = "--netdevs";
  const nlohmann::json delta = rail_delta_json(before, after, options);
  ASSERT_EQ(delta["netdev_rails"].size(), 2u);
  const auto& eth0 = delta["netdev_rails"][0];
  const auto& eth3 = delta["netdev_rails"][1];
  EXPECT_EQ(eth0["source"], "netdev");
  EXPECT_EQ(eth0["rail"], "eth0");
  EXPECT_EQ(eth0["netdev"], "eth0");
  EXPECT_EQ(eth0["tx_bytes"], 3000);
  EXPECT_EQ(eth0["rx_bytes"], 3000);
  EXPECT_EQ(eth0["total_bytes"], 6000);
  EXPECT_EQ(eth3["total_bytes"], 6000);
  EXPECT_DOUBLE_EQ(eth0["share"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(eth3["share"].get<double>(), 0.5);
  EXPECT_TRUE(eth0["reason"].is_null());
  EXPECT_EQ(delta["netdev_rails_total_bytes"], 12000);
  EXPECT_EQ(delta["netdev_rails_from"], "--netdevs");
  EXPECT_EQ(delta["flags"], nlohmann::json::array());
}

TEST_F(FakeSysfs, DeadNetdevRailIsFlaggedAndCountsZeroNotNull) {
  const auto before = read_rail_counters(net_tree(dir_, "b", {{"eth0", "0", "0"}, {"eth3", "100", "100"}}));
  const auto after = read_rail_counters(net_tree(dir_, "a", {{"eth0", "8000", "8000"}, {"eth3", "100", "100"}}));
  RailOptions options;
  options.netdev_rails = {"eth0", "eth3"};
  const nlohmann::json delta = rail_delta_json(before, after, options);
  const auto& eth3 = delta["netdev_rails"][1];
  EXPECT_EQ(eth3["total_bytes"], 0);  // readable and unchanged: a measured 0
  EXPECT_DOUBLE_EQ(eth3["share"].get<double>(), 0.0);
  ASSERT_EQ(delta["flags"].size(), 1u);
  EXPECT_NE(delta["flags"][0].get<std::string>().find("rail eth3 (netdev) carried 0%"), std::string::npos) << delta["flags"];
}

TEST_F(FakeSysfs, MissingOrBrokenNetdevRailIsNullWithReason) {
  const auto before = read_rail_counters(net_tree(dir_, "b", {{"eth0", "10", "10"}, {"eth3", "900", "900"}}));
  const auto after = read_rail_counters(net_tree(dir_, "a", {{"eth0", "20", "20"}, {"eth3", "5", "5"}}));
  RailOptions options;
  options.netdev_rails = {"eth0", "eth3", "eth9"};
  const nlohmann::json delta = rail_delta_json(before, after, options);
  ASSERT_EQ(delta["netdev_rails"].size(), 3u);
  EXPECT_EQ(delta["netdev_rails"][0]["total_bytes"], 20);
  EXPECT_TRUE(delta["netdev_rails"][1]["total_bytes"].is_null());
  EXPECT_NE(delta["netdev_rails"][1]["reason"].get<std::string>().find("decreased"), std::string::npos);
  EXPECT_TRUE(delta["netdev_rails"][2]["tx_bytes"].is_null());
  EXPECT_NE(delta["netdev_rails"][2]["reason"].get<std::string>().find("no such interface"), std::string::npos);
  EXPECT_TRUE(delta["netdev_rails_total_bytes"].is_null());
  EXPECT_EQ(delta["flags"], nlohmann::json::array());  // no share verdict on incomplete counters
  // Without netdev rails, no row and no total: the HCA rows alone, marked "hca".
  const nlohmann::json plain = rail_delta_json(before, after, RailOptions{});
  EXPECT_EQ(plain["netdev_rails"], nlohmann::json::array());
  EXPECT_FALSE(plain.contains("netdev_rails_total_bytes"));
}

TEST(Rails, HcaRowsSaySource) {
  const nlohmann::json delta = rail_delta_json(read_rail_counters(kSysfs + "two_rails_before"),
                                               read_rail_counters(kSysfs + "two_rails_after"), RailOptions{});
  ASSERT_EQ(delta["ib_ports"].size(), 2u);
  for (const auto& row : delta["ib_ports"]) EXPECT_EQ(row["source"], "hca");
}

TEST(Rails, SocketInterfacesFromNcclLog) {
  const std::string log =
      "node5:1234:1234 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
      "node5:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:198.18.10.5<0> [1]eth3:198.18.13.5<0>\n"
      "node5:1234:1240 [0] NCCL INFO Using network Socket\n";
  EXPECT_EQ(socket_interfaces_from_nccl_log(log), (std::vector<std::string>{"eth0", "eth3"}));
  EXPECT_TRUE(socket_interfaces_from_nccl_log("node5:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE\n").empty());
  EXPECT_TRUE(socket_interfaces_from_nccl_log("").empty());
}

TEST(Rails, NcclIbHcaValues) {
  EXPECT_EQ(rails_from_nccl_ib_hca("mlx5_0:1,mlx5_3:1"), (std::vector<std::string>{"mlx5_0:1", "mlx5_3:1"}));
  EXPECT_EQ(rails_from_nccl_ib_hca("=mlx5_0, mlx5_3"), (std::vector<std::string>{"mlx5_0", "mlx5_3"}));
  EXPECT_TRUE(rails_from_nccl_ib_hca("^mlx5_1").empty());
  EXPECT_TRUE(rails_from_nccl_ib_hca("").empty());
}

}  // namespace
}  // namespace cclbench
