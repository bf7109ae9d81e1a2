#include <gtest/gtest.h>
#include <hwloc.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "topology/binding.hpp"
#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

// Validates `record` against results_schema/topology.schema.json#/$defs/binding_record with the
// project's validator (a wrapper schema whose root is that definition).
void expect_valid_binding_record(const nlohmann::json& record, const std::string& name) {
  const std::string source = CCLBENCH_SOURCE_DIR;
  const nlohmann::json full = nlohmann::json::parse(read_text_file(source + "/results_schema/topology.schema.json"));
  nlohmann::json wrapper = {{"$schema", full["$schema"]}, {"$ref", "#/$defs/binding_record"}, {"$defs", full["$defs"]}};
  const std::string dir = std::string(CCLBENCH_BINARY_DIR) + "/tests/topology";
  const std::string schema_path = dir + "/binding_record." + name + ".schema.json";
  const std::string record_path = dir + "/binding_record." + name + ".json";
  write_file_atomic(schema_path, wrapper.dump(2));
  write_file_atomic(record_path, record.dump(2));
  const std::string command = std::string(CCLBENCH_PYTHON) + " " + source + "/tests/tools/validate_json.py " + schema_path + " " + record_path;
  EXPECT_EQ(std::system(command.c_str()), 0) << record.dump(2);
}

// The bus id of some PCI device of this machine (stands in for a GPU), or "" when hwloc sees none.
std::string some_live_pci_device() {
  const HwlocTopology handle = HwlocTopology::load_live();
  hwloc_obj_t pci = hwloc_get_next_pcidev(handle.get(), nullptr);
  if (pci == nullptr) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                pci->attr->pcidev.dev, pci->attr->pcidev.func);
  return text;
}

TEST(BindingWarning, CpusOnTheWrongNumaNode) {
  const nlohmann::json record = {{"host", "node7"}, {"rank", 3}, {"cpu_binding", "0-63"}, {"cpu_binding_numa_nodes", "0"},
                                 {"gpu_pci_bus_id", "0000:c1:00.0"}, {"gpu_numa_node", 1}, {"cpus_local_to_gpu", false},
                                 {"allowed_nics", nlohmann::json::array({{{"name", "mlx5_3"}}})}};
  EXPECT_EQ(binding_warning(record), "rank 3 on node7 runs on CPUs 0-63 (NUMA 0) but its GPU 0000:c1:00.0 is on NUMA 1");
}

TEST(BindingWarning, FineOrUnknownGivesNothing) {
  EXPECT_EQ(binding_warning({{"rank", 0}, {"host", "a"}, {"cpus_local_to_gpu", true}, {"allowed_nics", nlohmann::json::array({1})}}), std::nullopt);
  EXPECT_EQ(binding_warning({{"rank", 0}, {"host", "a"}, {"cpus_local_to_gpu", nullptr}, {"allowed_nics", nullptr}}), std::nullopt);
  EXPECT_EQ(binding_warning(nlohmann::json::object()), std::nullopt);
  EXPECT_EQ(binding_warning(nlohmann::json("not an object")), std::nullopt);
}

TEST(BindingWarning, NoUsableNic) {
  const nlohmann::json record = {{"host", "node7"}, {"rank", 5}, {"gpu_pci_bus_id", "0000:83:00.0"}, {"cpus_local_to_gpu", true},
                                 {"nccl_ib_hca", "=mlx5_9"}, {"allowed_nics", nlohmann::json::array()}, {"rdma_nic_count", 3}};
  EXPECT_EQ(binding_warning(record), "rank 5 on node7: no usable NIC for its GPU 0000:83:00.0 under NCCL_IB_HCA==mlx5_9");
  nlohmann::json single_node = record;
  single_node["rdma_nic_count"] = 0;  // no RDMA NIC at all: nothing to warn about
  EXPECT_EQ(binding_warning(single_node), std::nullopt);
}

TEST(BindingRecord, RankWithoutGpu) {
  BindingInput input;
  input.host = "testhost";
  input.rank = 2;
  input.local_rank = 1;
  const nlohmann::json record = capture_binding_record(input);
  EXPECT_EQ(record["host"], "testhost");
  EXPECT_EQ(record["rank"], 2);
  EXPECT_EQ(record["local_rank"], 1);
  EXPECT_TRUE(record["gpu_pci_bus_id"].is_null());
  EXPECT_EQ(record["gpu_pci_bus_id_reason"], "this rank has no GPU");
  EXPECT_TRUE(record["allowed_nics"].is_null());
  EXPECT_TRUE(record["cpus_local_to_gpu"].is_null());
  ASSERT_TRUE(record["cpu_binding"].is_string()) << record.dump();
  EXPECT_FALSE(record["cpu_binding"].get<std::string>().empty());
  EXPECT_EQ(binding_warning(record), std::nullopt);
  EXPECT_TRUE(record.contains("warning") && record["warning"].is_null());
  expect_valid_binding_record(record, "no_gpu");
}

TEST(BindingRecord, SimpleOverloadTakesNcclIbHcaFromTheEnvironment) {
  const char* saved = std::getenv("NCCL_IB_HCA");
  const std::string saved_value = saved ? saved : "";
  ASSERT_EQ(setenv("NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:1", 1), 0);
  nlohmann::json record = capture_binding_record(3, 1, "");
  EXPECT_EQ(record["rank"], 3);
  EXPECT_EQ(record["local_rank"], 1);
  EXPECT_EQ(record["nccl_ib_hca"], "=mlx5_0:1,mlx5_3:1");
  EXPECT_FALSE(record["host"].get<std::string>().empty());
  expect_valid_binding_record(record, "simple_env");
  ASSERT_EQ(unsetenv("NCCL_IB_HCA"), 0);
  record = capture_binding_record(0, 0, "");
  EXPECT_TRUE(record["nccl_ib_hca"].is_null());
  if (saved) setenv("NCCL_IB_HCA", saved_value.c_str(), 1);
}

TEST(BindingRecord, CpuBindingFollowsSchedAffinity) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; ++cpu) {
    if (CPU_ISSET(cpu, &saved)) first = cpu;
  }
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const nlohmann::json record = capture_binding_record(BindingInput{});
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(record["cpu_binding"], std::to_string(first));
  EXPECT_TRUE(record["memory_binding"].is_object() || record.contains("memory_binding_reason"));
  EXPECT_FALSE(record["host"].get<std::string>().empty());
}

TEST(BindingRecord, InvalidBusIdAndSpecBecomeReasonsNotExceptions) {
  BindingInput input;
  input.gpu_pci_bus_id = "not-a-bus-id";
  nlohmann::json record;
  ASSERT_NO_THROW(record = capture_binding_record(input));
  EXPECT_TRUE(record["gpu_pci_bus_id"].is_null());
  EXPECT_NE(record["gpu_pci_bus_id_reason"].get<std::string>().find("invalid PCI bus id"), std::string::npos);
  expect_valid_binding_record(record, "bad_bus_id");

  input.gpu_pci_bus_id = "0000:ff:1f.7";  // valid syntax, not present
  ASSERT_NO_THROW(record = capture_binding_record(input));
  EXPECT_EQ(record["gpu_pci_bus_id"], "0000:ff:1f.7");
  EXPECT_TRUE(record["gpu_numa_node"].is_null());
  EXPECT_NE(record["gpu_numa_node_reason"].get<std::string>().find("not in hwloc's PCI tree"), std::string::npos);
  expect_valid_binding_record(record, "absent_gpu");
}

TEST(BindingRecord, LivePciDeviceAsGpu) {
  const std::string bus_id = some_live_pci_device();
  if (bus_id.empty()) GTEST_SKIP() << "hwloc sees no PCI device on this machine";
  BindingInput input;
  input.gpu_pci_bus_id = bus_id;
  input.nccl_ib_hca = "^";  // invalid: allowed_nics becomes null with the parser's reason
  nlohmann::json record = capture_binding_record(input);
  EXPECT_EQ(record["gpu_pci_bus_id"], bus_id);
  EXPECT_TRUE(record["gpu_cpu_affinity"].is_string() || record.contains("gpu_cpu_affinity_reason"));
  EXPECT_TRUE(record["cpus_local_to_gpu"].is_boolean() || record.contains("cpus_local_to_gpu_reason"));
  EXPECT_TRUE(record["allowed_nics"].is_null());
  EXPECT_NE(record["allowed_nics_reason"].get<std::string>().find("NCCL_IB_HCA"), std::string::npos);
  expect_valid_binding_record(record, "live_bad_spec");
  input.nccl_ib_hca = "";
  record = capture_binding_record(input);
  EXPECT_TRUE(record["allowed_nics"].is_array());
  EXPECT_TRUE(record["rdma_nic_count"].is_number_integer());
  expect_valid_binding_record(record, "live");
}

TEST(LiveTopologyJson, ValidatesAgainstSchema) {
  const nlohmann::json doc = capture_live_topology_json({}, "", "/sys");
  EXPECT_EQ(doc["source_kind"], "live");
  const std::string dir = std::string(CCLBENCH_BINARY_DIR) + "/tests/topology";
  write_file_atomic(dir + "/live_topology.json", doc.dump(2));
  const std::string command = std::string(CCLBENCH_PYTHON) + " " + CCLBENCH_SOURCE_DIR + "/tests/tools/validate_json.py " +
                              CCLBENCH_SOURCE_DIR + "/results_schema/topology.schema.json " + dir + "/live_topology.json";
  EXPECT_EQ(std::system(command.c_str()), 0);
  EXPECT_THROW(capture_live_topology_json({"zz"}, "", "/sys"), UsageError);
  EXPECT_THROW(capture_live_topology_json({}, "^", "/sys"), UsageError);
}

}  // namespace
}  // namespace cclbench::topology
