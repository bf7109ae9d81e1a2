#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/topology/topology_fixtures.hpp"
#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

NodeTopology load(const std::string& name) {
  return build_node_topology(HwlocTopology::load_xml_file(fixture(name)), {});
}

TEST(TopoMatrixText, NvidiaSmiLayout) {
  const std::vector<std::string> lines = lines_of(format_topo_matrix(load("pcie_box_2level.xml"), HcaSpec{}));
  ASSERT_GT(lines.size(), 30u);
  EXPECT_EQ(lines[0], "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tNIC0\tNIC1\tNIC2\tNIC3\tNIC4\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID");
  EXPECT_EQ(lines[1], "GPU0\t X \tPIX\tPXB\tPXB\tSYS\tPIX\tPXB\tPHB\tNODE\tSYS\t0-7\t0\t\tN/A");
  EXPECT_EQ(lines[5], "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tNODE\t8-15\t1\t\tN/A");
  EXPECT_EQ(lines[6], "NIC0\tPIX\tPIX\tPXB\tPXB\tSYS\t X \tPXB\tPHB\tNODE\tSYS");
  EXPECT_EQ(lines[10], "NIC4\tSYS\tSYS\tSYS\tSYS\tNODE\tSYS\tSYS\tSYS\tSYS\t X ");
  EXPECT_EQ(lines[11], "");
  EXPECT_EQ(lines[12], "Legend:");
  EXPECT_EQ(lines[14], "  X    = Self");
  EXPECT_EQ(lines[20], "  NV#  = Connection traversing a bonded set of # NVLinks");
  EXPECT_EQ(lines[22], "NIC Legend:");
  EXPECT_EQ(lines[24], "  NIC0: mlx5_0");
  EXPECT_EQ(lines[26], "  NIC2: mlx5_10");
  EXPECT_EQ(lines[28], "  NIC4: mlx5_3");
  EXPECT_EQ(lines[30], "GPU -> NIC (nearest first; NCCL_IB_HCA=<unset>):");
  EXPECT_EQ(lines[32], "  GPU0 (0000:05:00.0): mlx5_0:1/ib0 PIX, mlx5_1:1/ib1 PXB, mlx5_10:1/ib10 PHB, mlx5_3:1/ib3 SYS");
}

TEST(TopoMatrixText, SpecFilteringAndNoAllowedNic) {
  const NodeTopology model = load("rtxpro_2socket.xml");
  const std::string text = format_topo_matrix(model, parse_nccl_ib_hca("=mlx5_3"));
  EXPECT_NE(text.find("NCCL_IB_HCA==mlx5_3)"), std::string::npos);
  EXPECT_NE(text.find("  GPU0 (0000:03:00.0): mlx5_3:1/eth3 SYS\n"), std::string::npos);
  const std::string none = format_topo_matrix(model, parse_nccl_ib_hca("mlx5_9"));
  EXPECT_NE(none.find("  GPU0 (0000:03:00.0): no allowed NIC\n"), std::string::npos);
}

TEST(TopoMatrixText, PrefixSpecThatAlsoMatchesALongerNameIsPointedOut) {
  const NodeTopology model = load("pcie_box_2level.xml");
  const std::vector<std::string> notes = hca_prefix_notes(model, parse_nccl_ib_hca("mlx5_1:1,mlx5_3"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "NCCL_IB_HCA entry 'mlx5_1' is a prefix, as in NCCL: it also matches mlx5_10 (write '=mlx5_1' for that device alone)");
  EXPECT_EQ(hca_prefix_notes(model, parse_nccl_ib_hca("^mlx5_1"))[0],
            "NCCL_IB_HCA entry 'mlx5_1' is a prefix, as in NCCL: it also excludes mlx5_10 (write '^=mlx5_1' for that device alone)");
  EXPECT_TRUE(hca_prefix_notes(model, parse_nccl_ib_hca("=mlx5_1")).empty());
  EXPECT_TRUE(hca_prefix_notes(model, parse_nccl_ib_hca("mlx5")).empty()) << "a family prefix is meant to match many";
  EXPECT_TRUE(hca_prefix_notes(model, HcaSpec{}).empty());
  const std::string text = format_topo_matrix(model, parse_nccl_ib_hca("mlx5_1"));
  EXPECT_NE(text.find("\n  note: NCCL_IB_HCA entry 'mlx5_1' is a prefix"), std::string::npos) << text;
  EXPECT_EQ(to_json(model, parse_nccl_ib_hca("mlx5_1"))["nccl_ib_hca_notes"].size(), 1u);
}

TEST(TopoMatrixText, NicDetailsWithPortsFromSysfs) {
  MapperOptions options;
  options.sysfs_root = fixture("sysfs");
  const NodeTopology model = build_node_topology(HwlocTopology::load_xml_file(fixture("rtxpro_2socket.xml")), options);
  const std::string text = format_topo_matrix(model, HcaSpec{});
  EXPECT_NE(text.find("\nNICs:\n\n  NIC0: mlx5_0 (0000:07:00.0, netdev eth0, NUMA 0) port 1 ACTIVE RoCE 400 Gb/sec (4X NDR)\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  NIC1: mlx5_1 ("), std::string::npos);
  EXPECT_NE(text.find("port 1 DOWN"), std::string::npos);
}

TEST(TopoMatrixText, GpuLessMachine) {
  const std::string text = format_topo_matrix(load("no_gpu.xml"), HcaSpec{});
  const std::vector<std::string> lines = lines_of(text);
  EXPECT_EQ(lines[0], "\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID");
  EXPECT_EQ(lines[1], "NIC0\t X ");
  EXPECT_NE(text.find("  no GPU\n"), std::string::npos);
  EXPECT_NE(text.find("  NUMA0: CPUs 0-3\n"), std::string::npos);
  EXPECT_NE(text.find("  ens3 (0000:00:03.0, NUMA 0)\n"), std::string::npos);
}

TEST(TopologyJson, ModelFields) {
  const NodeTopology model = load("pcie_box_2level.xml");
  const nlohmann::json doc = to_json(model, parse_nccl_ib_hca("^mlx5_1"));
  EXPECT_EQ(doc["schema_version"], kTopologySchemaVersion);
  EXPECT_EQ(doc["source_kind"], "xml");
  EXPECT_EQ(doc["host"], "pciebox");
  EXPECT_EQ(doc["nccl_ib_hca"], "^mlx5_1");
  EXPECT_EQ(doc["devices"].size(), 10u);
  EXPECT_EQ(doc["path_matrix"][0][8], "NODE");
  EXPECT_EQ(doc["gpus"][0]["numa_nodes"], nlohmann::json::array({0}));
  EXPECT_TRUE(doc["nics"][0]["ports"][0]["link_layer"].is_null());
  EXPECT_TRUE(doc["nics"][0]["ports"][0].contains("link_layer_reason"));
  const nlohmann::json& allowed = doc["gpu_nics"][0]["allowed_nics"];
  ASSERT_EQ(allowed.size(), 2u);
  EXPECT_EQ(allowed[0]["name"], "mlx5_0");
  EXPECT_EQ(allowed[1]["name"], "mlx5_3");
  EXPECT_EQ(doc["gpu_nics"][0]["nic_order"][2]["not_allowed_reason"], "excluded by NCCL_IB_HCA=^mlx5_1");
  EXPECT_TRUE(to_json(model, HcaSpec{})["nccl_ib_hca"].is_null());
}

TEST(TopologyIndexList, HwlocListFormat) {
  EXPECT_EQ(format_index_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_index_list({}), "");
}

}  // namespace
}  // namespace cclbench::topology
