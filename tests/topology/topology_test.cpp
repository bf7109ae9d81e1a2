#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "tests/topology/topology_fixtures.hpp"
#include "topology/nvlink.hpp"
#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

NodeTopology load_checked_offline(const std::string& name, MapperOptions options = {}) {
  const HwlocTopology handle = HwlocTopology::load_xml_file(fixture(name));
  EXPECT_FALSE(handle.is_live());
  return build_node_topology(handle, options);
}

// Rows of path classes as strings, for whole-matrix comparison.
std::vector<std::vector<std::string>> matrix(const NodeTopology& model) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : model.paths) {
    std::vector<std::string> cells;
    for (const auto& cell : row) cells.push_back(cell ? to_string(*cell) : "null");
    rows.push_back(cells);
  }
  return rows;
}

std::vector<std::string> allowed_names(const NodeTopology& model, int gpu, const std::string& spec) {
  std::vector<std::string> names;
  for (const NicChoice& choice : model.nic_choices(gpu, parse_nccl_ib_hca(spec))) {
    if (choice.allowed) names.push_back(choice.name + ":" + (choice.port ? std::to_string(*choice.port) : "?") + " " + to_string(*choice.path));
  }
  return names;
}

TEST(TopologyRtxPro, GpusInBusIdOrderWithNumaAndCpus) {
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml");
  EXPECT_EQ(model.gpu_discovery, "pci_class_scan");
  EXPECT_EQ(model.host, "node7");
  ASSERT_EQ(model.gpus.size(), 8u) << "the ASPEED VGA (vendor 1a03) must not count as a GPU";
  const std::vector<std::string> bus = {"0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0",
                                        "0000:83:00.0", "0000:84:00.0", "0000:85:00.0", "0000:86:00.0"};
  for (std::size_t i = 0; i < bus.size(); ++i) {
    const Gpu& gpu = model.gpus[i];
    EXPECT_EQ(gpu.index, static_cast<int>(i));
    EXPECT_EQ(gpu.pci_bus_id, bus[i]);
    EXPECT_TRUE(gpu.found);
    EXPECT_EQ(gpu.name, "NVIDIA RTX PRO 6000 Blackwell Server Edition");
    EXPECT_EQ(gpu.pci_id, "10de:2bb5");
    EXPECT_EQ(gpu.numa_nodes, std::vector<unsigned>{i < 4 ? 0u : 1u});
    EXPECT_EQ(gpu.cpuset, i < 4 ? "0-15" : "16-31");
  }
  ASSERT_EQ(model.numa_nodes.size(), 2u);
  EXPECT_EQ(model.numa_nodes[1].cpuset, "16-31");
  EXPECT_EQ(model.numa_nodes[1].local_memory_bytes, 270582939648ull);
}

TEST(TopologyRtxPro, NicsWithNetdevsAndNuma) {
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml");
  ASSERT_EQ(model.nics.size(), 3u);
  EXPECT_EQ(model.nics[0].name, "mlx5_0");
  EXPECT_EQ(model.nics[0].netdev, "eth0");
  EXPECT_EQ(model.nics[0].pci_bus_id, "0000:07:00.0");
  EXPECT_EQ(model.nics[0].numa_nodes, std::vector<unsigned>{0});
  EXPECT_EQ(model.nics[1].name, "mlx5_1");
  EXPECT_EQ(model.nics[1].netdev, "eth1");
  EXPECT_EQ(model.nics[2].name, "mlx5_3");
  EXPECT_EQ(model.nics[2].netdev, "eth3");
  EXPECT_EQ(model.nics[2].pci_bus_id, "0000:87:00.0");
  EXPECT_EQ(model.nics[2].numa_nodes, std::vector<unsigned>{1});
  EXPECT_EQ(model.nics[2].cpuset, "16-31");
  // Offline: ports from hwloc's Port<N>State only; link layer and rate unknown (no sysfs read).
  EXPECT_EQ(model.nics[0].ports_source, "hwloc");
  ASSERT_EQ(model.nics[0].ports.size(), 1u);
  EXPECT_EQ(model.nics[0].ports[0].number, 1);
  EXPECT_EQ(model.nics[0].ports[0].state, "ACTIVE");
  EXPECT_EQ(model.nics[0].ports[0].link_layer, std::nullopt);
  EXPECT_EQ(model.nics[0].ports[0].rate_gbps, std::nullopt);
  EXPECT_TRUE(model.other_netdevs.empty());
}

TEST(TopologyRtxPro, EveryPathClass) {
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml");
  // GPU0-7, NIC0 mlx5_0, NIC1 mlx5_1, NIC2 mlx5_3
  const std::vector<std::vector<std::string>> expected = {
      {"X", "PIX", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS", "PIX", "PHB", "SYS"},
      {"PIX", "X", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS", "PIX", "PHB", "SYS"},
      {"PIX", "PIX", "X", "PIX", "SYS", "SYS", "SYS", "SYS", "PIX", "PHB", "SYS"},
      {"PIX", "PIX", "PIX", "X", "SYS", "SYS", "SYS", "SYS", "PIX", "PHB", "SYS"},
      {"SYS", "SYS", "SYS", "SYS", "X", "PIX", "PIX", "PIX", "SYS", "SYS", "PIX"},
      {"SYS", "SYS", "SYS", "SYS", "PIX", "X", "PIX", "PIX", "SYS", "SYS", "PIX"},
      {"SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "X", "PIX", "SYS", "SYS", "PIX"},
      {"SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "PIX", "X", "SYS", "SYS", "PIX"},
      {"PIX", "PIX", "PIX", "PIX", "SYS", "SYS", "SYS", "SYS", "X", "PHB", "SYS"},
      {"PHB", "PHB", "PHB", "PHB", "SYS", "SYS", "SYS", "SYS", "PHB", "X", "SYS"},
      {"SYS", "SYS", "SYS", "SYS", "PIX", "PIX", "PIX", "PIX", "SYS", "SYS", "X"},
  };
  EXPECT_EQ(matrix(model), expected);
}

TEST(TopologyRtxPro, NicOrderAndHcaFiltering) {
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml");
  EXPECT_EQ(allowed_names(model, 0, ""), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_1:1 PHB", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 5, ""), (std::vector<std::string>{"mlx5_3:1 PIX", "mlx5_0:1 SYS", "mlx5_1:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 0, "=mlx5_0:1,mlx5_3:1"), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 7, "=mlx5_0:1,mlx5_3:1"), (std::vector<std::string>{"mlx5_3:1 PIX", "mlx5_0:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 0, "^mlx5_1"), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 0, "mlx5_3"), (std::vector<std::string>{"mlx5_3:1 SYS"}));
  EXPECT_TRUE(allowed_names(model, 0, "=mlx5_0:2").empty());
  const auto choices = model.nic_choices(0, parse_nccl_ib_hca("^mlx5_1"));
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices[1].name, "mlx5_1");
  EXPECT_FALSE(choices[1].allowed);
  EXPECT_NE(choices[1].reason.find("NCCL_IB_HCA"), std::string::npos);
}

TEST(TopologyRtxPro, SysfsTreeGivesPortStateLinkLayerRate) {
  MapperOptions options;
  options.sysfs_root = fixture("sysfs");
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml", options);
  const Nic& rail0 = model.nics[0];
  EXPECT_EQ(rail0.ports_source, "sysfs");
  ASSERT_EQ(rail0.ports.size(), 1u);
  EXPECT_EQ(rail0.ports[0].state, "ACTIVE");
  EXPECT_EQ(rail0.ports[0].link_layer, "Ethernet");
  EXPECT_EQ(rail0.ports[0].rate, "400 Gb/sec (4X NDR)");
  EXPECT_EQ(rail0.ports[0].rate_gbps, 400.0);
  EXPECT_EQ(model.nics[1].ports[0].state, "DOWN");
  // mlx5_1's port is down in sysfs: NCCL would not use it, whatever the spec says.
  EXPECT_EQ(allowed_names(model, 0, ""), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_3:1 SYS"}));
  const auto choices = model.nic_choices(0, HcaSpec{});
  EXPECT_NE(choices[1].reason.find("DOWN"), std::string::npos);
  // A sysfs root without the device falls back to hwloc's records.
  options.sysfs_root = fixture("no_such_dir");
  EXPECT_EQ(load_checked_offline("rtxpro_2socket.xml", options).nics[0].ports_source, "hwloc");
}

TEST(TopologyBox, EveryPathClassIncludingPxbNodePhb) {
  const NodeTopology model = load_checked_offline("pcie_box_2level.xml");
  ASSERT_EQ(model.gpus.size(), 5u);
  ASSERT_EQ(model.nics.size(), 5u);
  const std::vector<std::string> nic_names = {"mlx5_0", "mlx5_1", "mlx5_10", "mlx5_2", "mlx5_3"};
  for (std::size_t i = 0; i < nic_names.size(); ++i) EXPECT_EQ(model.nics[i].name, nic_names[i]);
  EXPECT_EQ(model.nics[0].netdev, "ib0");
  const std::vector<std::vector<std::string>> expected = {
      // GPU0   GPU1   GPU2   GPU3   GPU4   mlx5_0 mlx5_1 mlx5_10 mlx5_2 mlx5_3
      {"X", "PIX", "PXB", "PXB", "SYS", "PIX", "PXB", "PHB", "NODE", "SYS"},
      {"PIX", "X", "PXB", "PXB", "SYS", "PIX", "PXB", "PHB", "NODE", "SYS"},
      {"PXB", "PXB", "X", "PIX", "SYS", "PXB", "PIX", "PHB", "NODE", "SYS"},
      {"PXB", "PXB", "PIX", "X", "SYS", "PXB", "PIX", "PHB", "NODE", "SYS"},
      {"SYS", "SYS", "SYS", "SYS", "X", "SYS", "SYS", "SYS", "SYS", "NODE"},
      {"PIX", "PIX", "PXB", "PXB", "SYS", "X", "PXB", "PHB", "NODE", "SYS"},
      {"PXB", "PXB", "PIX", "PIX", "SYS", "PXB", "X", "PHB", "NODE", "SYS"},
      {"PHB", "PHB", "PHB", "PHB", "SYS", "PHB", "PHB", "X", "NODE", "SYS"},
      {"NODE", "NODE", "NODE", "NODE", "SYS", "NODE", "NODE", "NODE", "X", "SYS"},
      {"SYS", "SYS", "SYS", "SYS", "NODE", "SYS", "SYS", "SYS", "SYS", "X"},
  };
  EXPECT_EQ(matrix(model), expected);
  EXPECT_EQ(model.gpus[4].numa_nodes, std::vector<unsigned>{1});
  EXPECT_EQ(model.gpus[4].cpuset, "8-15");
}

TEST(TopologyBox, NicOrderNearestFirstAndPrefixSemantics) {
  const NodeTopology model = load_checked_offline("pcie_box_2level.xml");
  std::vector<std::string> order;
  for (const NicChoice& choice : model.nic_choices(0, HcaSpec{})) order.push_back(choice.name + " " + to_string(*choice.path));
  EXPECT_EQ(order, (std::vector<std::string>{"mlx5_0 PIX", "mlx5_1 PXB", "mlx5_10 PHB", "mlx5_2 NODE", "mlx5_3 SYS"}));
  // mlx5_2's port is DOWN in the XML (Port1State=1): listed, never allowed.
  EXPECT_EQ(allowed_names(model, 0, ""), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_1:1 PXB", "mlx5_10:1 PHB", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 2, "mlx5_1"), (std::vector<std::string>{"mlx5_1:1 PIX", "mlx5_10:1 PHB"}));
  EXPECT_EQ(allowed_names(model, 2, "=mlx5_1"), (std::vector<std::string>{"mlx5_1:1 PIX"}));
  EXPECT_EQ(allowed_names(model, 0, "^mlx5_1"), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 0, "^=mlx5_1"), (std::vector<std::string>{"mlx5_0:1 PIX", "mlx5_10:1 PHB", "mlx5_3:1 SYS"}));
  EXPECT_EQ(allowed_names(model, 4, ""), (std::vector<std::string>{"mlx5_3:1 NODE", "mlx5_0:1 SYS", "mlx5_1:1 SYS", "mlx5_10:1 SYS"}));
}

TEST(TopologyNoGpu, NicsAndOtherNetdevsOnly) {
  const NodeTopology model = load_checked_offline("no_gpu.xml");
  EXPECT_TRUE(model.has_pci);
  EXPECT_TRUE(model.gpus.empty());
  ASSERT_EQ(model.nics.size(), 1u);
  EXPECT_EQ(model.nics[0].netdev, "ens4np0");
  ASSERT_EQ(model.other_netdevs.size(), 1u);
  EXPECT_EQ(model.other_netdevs[0].name, "ens3");
  EXPECT_EQ(model.other_netdevs[0].pci_bus_id, "0000:00:03.0");
  EXPECT_EQ(matrix(model), (std::vector<std::vector<std::string>>{{"X"}}));
}

TEST(TopologyNoPci, HasNoPci) {
  const NodeTopology model = load_checked_offline("no_pci.xml");
  EXPECT_FALSE(model.has_pci);
  EXPECT_TRUE(model.gpus.empty());
  EXPECT_TRUE(model.nics.empty());
}

TEST(TopologyCallerBusIds, CudaOrderIsKeptAndUnknownIdsAreNull) {
  MapperOptions options;
  options.gpu_pci_bus_ids = {"0000:86:00.0", "03:00.0", "00000000:99:00.0"};
  options.gpu_names = {"", "GPU from CUDA"};
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml", options);
  EXPECT_EQ(model.gpu_discovery, "caller_bus_ids");
  ASSERT_EQ(model.gpus.size(), 3u);
  EXPECT_EQ(model.gpus[0].pci_bus_id, "0000:86:00.0");
  EXPECT_EQ(model.gpus[0].numa_nodes, std::vector<unsigned>{1});
  EXPECT_EQ(model.gpus[1].name, "GPU from CUDA");
  EXPECT_EQ(model.gpus[1].pci_bus_id, "0000:03:00.0");
  EXPECT_FALSE(model.gpus[2].found);
  EXPECT_TRUE(model.gpus[2].numa_nodes.empty());
  EXPECT_EQ(model.gpu_gpu(0, 1), (Path{PathClass::sys, 0}));
  EXPECT_EQ(model.gpu_gpu(0, 2), std::nullopt);
  EXPECT_EQ(model.gpu_gpu(2, 2), (Path{PathClass::self, 0}));
  EXPECT_EQ(model.gpu_nic(2, 0), std::nullopt);
  const nlohmann::json doc = to_json(model, HcaSpec{});
  EXPECT_TRUE(doc["path_matrix"][0][2].is_null());
  EXPECT_TRUE(doc["gpus"][2]["numa_nodes"].is_null());
  EXPECT_EQ(doc["gpus"][2]["numa_nodes_reason"], "bus id not in the hwloc topology");
  EXPECT_TRUE(doc["gpu_nics"][2]["nic_order"][0]["path_class"].is_null());
}

TEST(TopologyNvlink, CallerCountsGiveNvHashAndAreNearest) {
  MapperOptions options;
  options.nvlink_counts = {{0, 4, 0}, {4, 0, 0}};
  const NodeTopology model = load_checked_offline("rtxpro_2socket.xml", options);
  EXPECT_EQ(to_string(*model.gpu_gpu(0, 1)), "NV4");
  EXPECT_EQ(to_string(*model.gpu_gpu(1, 0)), "NV4");
  EXPECT_EQ(to_string(*model.gpu_gpu(0, 2)), "PIX");
  EXPECT_TRUE(nearer(Path{PathClass::nvlink, 18}, Path{PathClass::nvlink, 4}));
  EXPECT_TRUE(nearer(Path{PathClass::nvlink, 1}, Path{PathClass::pix, 0}));
  EXPECT_TRUE(nearer(Path{PathClass::node, 0}, Path{PathClass::sys, 0}));
  EXPECT_FALSE(nearer(Path{PathClass::phb, 0}, Path{PathClass::phb, 0}));
}

TEST(TopologyBusId, Normalisation) {
  EXPECT_EQ(normalize_pci_bus_id("0000:C1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(normalize_pci_bus_id("00000000:c1:00.0"), "0000:c1:00.0");
  EXPECT_EQ(normalize_pci_bus_id("c1:00.1"), "0000:c1:00.1");
  for (const char* bad : {"", "zz", "0000:c1:00", "0000:c1:00.8", "0000:c1:20.0", "0000:c1:00.0 ", "1:2:3:4.0", "0000:100:00.0"}) {
    EXPECT_THROW(normalize_pci_bus_id(bad), UsageError) << bad;
  }
}

TEST(TopologyXml, BadInputIsAUsageErrorOnOneLine) {
  const std::string good = read_text_file(fixture("no_gpu.xml"));
  std::string newer = good;
  newer.replace(newer.find("version=\"2.0\""), 13, "version=\"3.0\"");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"blank", " \n\t\n"},
      {"binary", std::string("\x7f" "ELF\0\0<topology>", 15)},
      {"truncated", good.substr(0, good.size() / 2)},
      {"truncated_tag", good.substr(0, good.find("cpuset=") + 3)},
      {"newer", newer},
      {"not_hwloc", "<?xml version=\"1.0\"?>\n<html></html>\n"},
      {"two_roots", "<topology version=\"2.0\"></topology><topology></topology>"},
      {"mismatched", "<topology version=\"2.0\"><object></topology>"},
      {"not_xml", "hello world"},
      {"quoted_truncated", "<topology version=\"2.0\"><object type=\"Machine\" name=\"a>b"},
      {"hwloc_rejects", "<topology version=\"2.0\">\n  <object type=\"Bogus\"/>\n</topology>\n"},
      // A set beyond its complete set, which no hwloc export has: hwloc 2.9 dereferences NULL on the first (found by
      // fuzz_topology_xml in CI).
      {"cpuset_outside", "<topology><object type=\"Machine\" cpuset=\"0x0f\" complete_cpuset=\"0x0\" "
                         "nodeset=\"0x1\" complete_nodeset=\"0x1\"></object></topology>"},
      {"nodeset_outside", "<topology><object type=\"Machine\" cpuset=\"0x0f\" complete_cpuset=\"0x0f\" "
                          "nodeset=\"0x3\" complete_nodeset=\"0x1\"></object></topology>"},
      // The root object must be a Machine: hwloc drops an I/O root whose pci_busid it cannot read, then
      // asserts (abort) that it dropped none (found by fuzz_topology_xml in CI, 2026-12-02).
      {"root_not_machine", "<topology version=\"2.0\">\n  <object type=\"PCIDev\" pci_busid=\"zz\"/>\n</topology>\n"},
      // One attribute twice: the screening would read the first type and hwloc the last.
      {"attribute_twice", "<topology version=\"2.0\"><object type=\"Machine\" type=\"PCIDev\" pci_busid=\"zz\"/></topology>"},
      {"entities", "<?xml version=\"1.0\"?>\n<!DOCTYPE t [<!ENTITY a \"x\"><!ENTITY b \"&a;&a;&a;\">]>\n"
                   "<topology version=\"2.0\" x=\"&b;\"></topology>\n"},
  };
  for (const auto& [name, text] : cases) {
    try {
      HwlocTopology::load_xml_text(text, name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind(name + ": ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  EXPECT_THROW(HwlocTopology::load_xml_file(fixture("does_not_exist.xml")), UsageError);
}

// The guard behind the screening: an XML hwloc 2.9 aborts on (the root I/O object above, which the
// screening refuses, fed to the trial load directly) is a one-line UsageError, and this process lives.
TEST(TopologyXml, TrialLoadTurnsAnHwlocCrashIntoAUsageError) {
  const std::string crashes_hwloc = "<topology version=\"2.0\">\n  <object type=\"PCIDev\" pci_busid=\"zz\"/>\n</topology>\n";
  try {
    trial_load_in_child(crashes_hwloc, "root_pci.xml");
    ADD_FAILURE() << "hwloc's abort went unnoticed";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("root_pci.xml: hwloc crashes loading this XML (", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // A file hwloc merely refuses is not a crash: the trial passes it on to the real load's error.
  EXPECT_NO_THROW(trial_load_in_child("<topology version=\"2.0\">\n  <object type=\"Bogus\"/>\n</topology>\n", "bogus"));
  EXPECT_NO_THROW(trial_load_in_child(read_text_file(fixture("no_gpu.xml")), "no_gpu"));
}

TEST(TopologyXml, QuotedGreaterThanInAttributesIsNotTheEndOfATag) {
  std::string text = read_text_file(fixture("no_gpu.xml"));
  text.replace(text.find("value=\"ci-runner\""), 17, "value=\"ci>runner\"");
  const NodeTopology model = build_node_topology(HwlocTopology::load_xml_text(text, "quoted"), {});
  EXPECT_EQ(model.host, "ci>runner");
}

TEST(TopologyXml, HugeFileIsRefusedBeforeReading) {
  const std::string path = std::string(CCLBENCH_BINARY_DIR) + "/tests/topology/huge_sparse.xml";
  { std::ofstream create(path, std::ios::trunc); }
  std::filesystem::resize_file(path, (64ull << 20) + 1);  // sparse: no disk used
  try {
    HwlocTopology::load_xml_file(path);
    ADD_FAILURE() << "a 64 MiB + 1 file was accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("larger than any hwloc XML topology"), std::string::npos) << error.what();
  }
  std::filesystem::remove(path);
}

TEST(TopologyXml, HandleIsMoveOnly) {
  HwlocTopology a = HwlocTopology::load_xml_file(fixture("no_gpu.xml"));
  HwlocTopology b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);
  ASSERT_NE(b.get(), nullptr);
  EXPECT_EQ(build_node_topology(b, {}).nics.size(), 1u);
  static_assert(!std::is_copy_constructible_v<HwlocTopology>);
}

TEST(TopologyLive, ThisMachineLoadsWithPciDevices) {
  const HwlocTopology handle = HwlocTopology::load_live();
  EXPECT_TRUE(handle.is_live());
  const NodeTopology model = build_node_topology(handle, {});
  EXPECT_FALSE(model.numa_nodes.empty());
  EXPECT_TRUE(model.host.has_value());
  EXPECT_EQ(model.paths.size(), model.gpus.size() + model.nics.size());
}

TEST(Nvlink, NoBusIdsOrNoNvmlIsUnknownWithAReason) {
  std::string reason;
  EXPECT_EQ(query_nvlink_counts({}, reason), std::nullopt);
  EXPECT_NE(reason.find("NVLink unknown"), std::string::npos);
  // A bus id no GPU has: NVML (where present) does not know it; without NVML the library is missing.
  reason.clear();
  EXPECT_EQ(query_nvlink_counts({"0000:ff:1f.7"}, reason), std::nullopt);
  EXPECT_NE(reason.find("NVLink unknown"), std::string::npos) << reason;
}

}  // namespace
}  // namespace cclbench::topology
