#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "bench/core/file_io.hpp"
#include "bench/p2p/report.hpp"
#include "topology/binding.hpp"

namespace cclbench::p2p {
namespace {

Measurement ok_measurement(TestId test, std::optional<Endpoint> src, std::optional<Endpoint> dst, std::uint64_t bytes,
                           std::vector<double> samples) {
  Measurement m;
  m.test = test;
  m.src = src;
  m.dst = dst;
  m.bytes = bytes;
  m.status = Status::ok;
  m.samples = samples;
  for (double s : samples) m.sample_time_us.push_back(static_cast<double>(bytes) / s / 1e3);
  m.value = summarize(m.samples);
  m.time_us = summarize(m.sample_time_us);
  m.bytes_counted_per_copy = bytes;
  m.wrong_words = 0;
  m.verified_samples = static_cast<int>(samples.size()) + 2;
  return m;
}

Measurement not_ok(TestId test, std::optional<Endpoint> src, std::optional<Endpoint> dst, Status status, std::string reason) {
  Measurement m;
  m.test = test;
  m.src = src;
  m.dst = dst;
  m.bytes = 256ull << 20;
  m.status = status;
  m.reason = std::move(reason);
  return m;
}

// Two GPUs, one pair with peer access refused, one corrupted local copy, one GPU without NUMA info.
Report synthetic_report() {
  Report r;
  r.host = "node1";
  r.argv = {"p2p_matrix", "-n", "3"};
  r.driver_version = 13000;
  r.runtime_version = 13000;
  r.numa_node_count = 2;
  r.repetitions = 3;
  r.warmup = 2;
  r.settings = {{"sweep", nullptr}, {"pair", nullptr}};
  for (int d = 0; d < 2; ++d) {
    DeviceInfo info;
    info.index = d;
    info.name = "NVIDIA H200";
    info.pci_bus_id = d == 0 ? "00000000:18:00.0" : "00000000:9A:00.0";
    if (d == 0) info.numa_node = 0; else info.numa_node_reason = "PCI device not found in the hwloc topology";
    info.sm_count = 132;
    info.memory_bytes = 150ull << 30;
    info.l2_bytes = 60ull << 20;
    info.cc_major = 9;
    r.devices.push_back(info);
  }
  for (auto [s, d] : {std::pair{0, 1}, std::pair{1, 0}}) {
    PairCapability c;
    c.src = s;
    c.dst = d;
    c.can_access_peer = s == 0;
    c.performance_rank = 0;
    c.access_supported = s == 0;
    c.native_atomic_supported = false;
    c.path_class_reason = "topology library not linked";
    r.capability.push_back(c);
  }
  r.tests = {TestId::d2d_ce_write_uni, TestId::h2d_ce_local_numa, TestId::device_local_copy_sm, TestId::d2d_sm_latency};
  const auto gpu = Endpoint::device;
  r.results.push_back(ok_measurement(TestId::d2d_ce_write_uni, gpu(0), gpu(1), 256ull << 20, {30, 10, 20}));
  r.results.push_back(not_ok(TestId::d2d_ce_write_uni, gpu(1), gpu(0), Status::skipped,
                             "peer access not supported (cudaDeviceCanAccessPeer(1, 0) = 0)"));
  auto h2d = ok_measurement(TestId::h2d_ce_local_numa, Endpoint::host(), gpu(0), 256ull << 20, {54.5, 54.25, 54.0});
  h2d.host_numa_node = 0;
  r.results.push_back(h2d);
  r.results.push_back(not_ok(TestId::h2d_ce_local_numa, Endpoint::host(), gpu(1), Status::skipped,
                             "the GPU's NUMA node is unknown"));
  r.results.push_back(ok_measurement(TestId::device_local_copy_sm, gpu(0), gpu(0), 1ull << 30, {3900, 3950, 3925}));
  auto corrupted = not_ok(TestId::device_local_copy_sm, gpu(1), gpu(1), Status::failed,
                          "verification failed: 17 wrong words after sample 1 of 5, \"quoted\"");
  corrupted.bytes = 1ull << 30;
  corrupted.wrong_words = 17;
  corrupted.verified_samples = 1;
  r.results.push_back(corrupted);
  auto chase = ok_measurement(TestId::d2d_sm_latency, gpu(0), gpu(1), 256ull << 20, {812.5, 800, 790});
  chase.bytes_counted_per_copy.reset();
  r.results.push_back(chase);
  return r;
}

TEST(P2pStats, MedianMinMaxCv) {
  const SampleStats odd = summarize({30, 10, 20});
  EXPECT_DOUBLE_EQ(odd.median, 20);
  EXPECT_DOUBLE_EQ(odd.min, 10);
  EXPECT_DOUBLE_EQ(odd.max, 30);
  EXPECT_DOUBLE_EQ(odd.mean, 20);
  EXPECT_NEAR(odd.cv_pct, 50.0, 1e-9);  // sample stddev 10 / mean 20
  const SampleStats even = summarize({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(even.median, 2.5);
  EXPECT_NEAR(even.cv_pct, std::sqrt(5.0 / 3.0) / 2.5 * 100, 1e-9);
  EXPECT_DOUBLE_EQ(summarize({7}).cv_pct, 0);
  EXPECT_DOUBLE_EQ(summarize({7}).median, 7);
}

TEST(P2pText, PairMatrixHasTitleUnitDashesAndNotes) {
  const std::string text = render_test_text(synthetic_report(), TestId::d2d_ce_write_uni);
  EXPECT_EQ(text.rfind("d2d_ce_write_uni: copy engine", 0), 0u) << text;
  EXPECT_NE(text.find("unit: GB/s; bytes counted: one direction; size 256M; median of 3 samples"), std::string::npos) << text;
  // Row 0: diagonal '-', then the median 20.00; row 1: skipped pair '-', diagonal '-'.
  EXPECT_NE(text.find("\n0                -     20.00\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n1                -         -\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  skipped (1->0): peer access not supported"), std::string::npos) << text;
}

TEST(P2pText, PairMatrixShowsAMeasuredDiagonalAndSaysWhatItIs) {
  Report r = synthetic_report();
  auto local = ok_measurement(TestId::d2d_ce_write_uni, Endpoint::device(0), Endpoint::device(0), 256ull << 20,
                              {1900, 1950, 1925});
  local.details["local_copy"] = true;
  r.results.push_back(local);
  const std::string text = render_test_text(r, TestId::d2d_ce_write_uni);
  EXPECT_NE(text.find("\n0          1925.00     20.00\n"), std::string::npos) << text;
  EXPECT_NE(text.find("diagonal = copy within the GPU (bytes copied / time, as nvbandwidth's device_local_copy)"),
            std::string::npos) << text;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["schema_version"], "1.1.0");
  bool found = false;
  for (const auto& result : j["results"]) {
    if (result["test"] != "d2d_ce_write_uni" || result["src"] != 0 || result["dst"] != 0) continue;
    found = true;
    EXPECT_EQ(result["bandwidth_gbps"]["median"], 1925.0);
    EXPECT_EQ(result["bytes_counted"], "one_direction");
    EXPECT_EQ(result["details"]["local_copy"], true);
  }
  EXPECT_TRUE(found) << j.dump();
}

TEST(P2pText, DeviceRowShowsFailAndNumaNode) {
  const Report r = synthetic_report();
  const std::string local = render_test_text(r, TestId::device_local_copy_sm);
  EXPECT_NE(local.find("bytes counted: one direction"), std::string::npos) << local;  // schema 1.1: bytes copied
  EXPECT_NE(local.find("   3925.00      FAIL\n"), std::string::npos) << local;
  EXPECT_NE(local.find("  failed (GPU1): verification failed: 17 wrong words"), std::string::npos) << local;
  EXPECT_EQ(local.find("numa"), std::string::npos) << local;
  const std::string h2d = render_test_text(r, TestId::h2d_ce_local_numa);
  EXPECT_NE(h2d.find("     54.25         -\n"), std::string::npos) << h2d;
  EXPECT_NE(h2d.find("\nnuma             0         -\n"), std::string::npos) << h2d;
}

TEST(P2pText, LatencyMatrixNamesItsAxesAndUnit) {
  const std::string text = render_test_text(synthetic_report(), TestId::d2d_sm_latency);
  EXPECT_NE(text.find("unit: ns per load; latency"), std::string::npos) << text;
  EXPECT_NE(text.find("rows = GPU issuing the loads, columns = GPU holding the memory"), std::string::npos) << text;
  EXPECT_NE(text.find("    800.00\n"), std::string::npos) << text;
}

TEST(P2pText, SweepGivesSizeRowsAndPairColumns) {
  Report r = synthetic_report();
  r.results.clear();
  const auto gpu = Endpoint::device;
  r.results.push_back(ok_measurement(TestId::d2d_ce_write_uni, gpu(0), gpu(1), 8192, {1.5}));
  r.results.push_back(ok_measurement(TestId::d2d_ce_write_uni, gpu(0), gpu(1), 16384, {2.5}));
  const std::string text = render_test_text(r, TestId::d2d_ce_write_uni);
  EXPECT_NE(text.find("rows = size"), std::string::npos) << text;
  EXPECT_NE(text.find("size          0->1\n8K            1.50\n16K           2.50\n"), std::string::npos) << text;
}

TEST(P2pText, CapabilityMatrix) {
  const std::string text = render_capability_text(synthetic_report());
  EXPECT_NE(text.find("0: NVIDIA H200, 00000000:18:00.0, NUMA node 0"), std::string::npos) << text;
  EXPECT_NE(text.find("NUMA node unknown (PCI device not found"), std::string::npos) << text;
  EXPECT_NE(text.find("\n0                -       1/0\n1              0/0         -\n"), std::string::npos) << text;
  Report known = synthetic_report();
  known.capability[0].path_class = "PXB";
  known.path_class_source = "topology library";
  const std::string with_path = render_capability_text(known);
  EXPECT_NE(with_path.find("\n0                -   1/0 PXB\n"), std::string::npos) << with_path;
  EXPECT_NE(with_path.find("path class: topology library\n"), std::string::npos) << with_path;
}

TEST(P2pJson, NullsCarryReasonsAndOkCarriesStats) {
  const nlohmann::json j = to_json(synthetic_report());
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  EXPECT_EQ(j["devices"][1]["numa_node"], nullptr);
  EXPECT_EQ(j["devices"][1]["numa_node_reason"], "PCI device not found in the hwloc topology");
  EXPECT_EQ(j["capability"][0]["path_class"], nullptr);
  EXPECT_EQ(j["capability"][0]["path_class_reason"], "topology library not linked");
  const auto& ok = j["results"][0];
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_EQ(ok["reason"], nullptr);
  EXPECT_DOUBLE_EQ(ok["bandwidth_gbps"]["median"].get<double>(), 20.0);
  EXPECT_EQ(ok["latency_us"], nullptr);
  EXPECT_EQ(ok["bytes_counted"], "one_direction");
  const auto& skipped = j["results"][1];
  EXPECT_EQ(skipped["bandwidth_gbps"], nullptr);
  EXPECT_EQ(skipped["status"], "skipped");
  EXPECT_NE(skipped["reason"].get<std::string>().find("peer access"), std::string::npos);
  EXPECT_EQ(j["results"][2]["src"], "host");
  EXPECT_EQ(j["results"][2]["host_numa_node"], 0);
  EXPECT_EQ(j["results"][5]["verification"]["wrong_words"], 17);
  EXPECT_EQ(j["results"][5]["bandwidth_gbps"], nullptr);
  EXPECT_DOUBLE_EQ(j["results"][6]["load_latency_ns"]["median"].get<double>(), 800.0);
}

class P2pSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cclbench_p2p_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  int validate(const nlohmann::json& document) {
    const std::string path = dir_ + "/result.json";
    write_file_atomic(path, document.dump(2));
    const std::string command = std::string("/usr/bin/python3 ") + CCLBENCH_SOURCE_DIR + "/tests/tools/validate_json.py " +
                                CCLBENCH_SOURCE_DIR + "/results_schema/p2p_matrix.schema.json " + path;
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string dir_;
};

TEST_F(P2pSchemaTest, SyntheticReportValidates) { EXPECT_EQ(validate(to_json(synthetic_report())), 0); }

// The JSON this writer produces, through `cclbench report`'s P2P section: src row -> dst column.
TEST_F(P2pSchemaTest, WrittenJsonThroughTheCclbenchReportKeepsSrcRowsAndDstColumns) {
  const std::string path = dir_ + "/p2p.json";
  write_file_atomic(path, to_json(synthetic_report()).dump(2));
  const std::string command = std::string("/usr/bin/python3 ") + CCLBENCH_SOURCE_DIR + "/tests/p2p/p2p_report_orientation.py " +
                              CCLBENCH_SOURCE_DIR + " " + path;
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
}

TEST_F(P2pSchemaTest, NoDeviceReportValidates) {
  Report r;
  r.host = "ci";
  r.argv = {"p2p_matrix"};
  r.no_device_reason = "no CUDA device: no CUDA-capable device is detected";
  r.repetitions = 5;
  r.settings = {{"sweep", nullptr}, {"pair", nullptr}};
  r.tests = {TestId::device_local_copy_ce};
  Measurement m;
  m.test = TestId::device_local_copy_ce;
  m.reason = r.no_device_reason;
  r.results.push_back(m);
  EXPECT_EQ(validate(to_json(r)), 0);
}

TEST_F(P2pSchemaTest, BindingRecordOfThisProcessIsEmbeddedAndValidates) {
  Report r = synthetic_report();
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["binding"], nullptr);
  EXPECT_EQ(j["binding_reason"], "binding record not captured");
  topology::BindingInput input;
  input.host = "ci";
  r.binding = topology::capture_binding_record(input);  // live machine, no GPU: nulls with reasons
  r.binding_gpu = 0;
  j = to_json(r);
  EXPECT_EQ(j["binding"]["host"], "ci");
  EXPECT_EQ(j["binding_reason"], nullptr);
  EXPECT_EQ(validate(j), 0);
  j["binding"].erase("cpu_binding");  // the topology schema's binding_record is enforced
  EXPECT_NE(validate(j), 0);
}

TEST_F(P2pSchemaTest, SchemaRejectsZeroForMissingAndOkWithoutNumbers) {
  nlohmann::json j = to_json(synthetic_report());
  j["results"][1]["bandwidth_gbps"] = {{"median", 0}, {"min", 0}, {"max", 0}, {"mean", 0}, {"cv_pct", 0}};
  EXPECT_NE(validate(j), 0);
  j = to_json(synthetic_report());
  j["results"][0]["bandwidth_gbps"] = nullptr;
  EXPECT_NE(validate(j), 0);
  j = to_json(synthetic_report());
  j["results"][1]["reason"] = nullptr;  // not ok needs a reason
  EXPECT_NE(validate(j), 0);
  j = to_json(synthetic_report());
  j.erase("schema_version");
  EXPECT_NE(validate(j), 0);
}

TEST(P2pCsv, HeaderRowsAndQuoting) {
  const std::string csv = to_csv(synthetic_report());
  EXPECT_EQ(csv.rfind("test,src,dst,bytes,bytes_counted,host_numa_node,median_gbps,min_gbps,max_gbps,cv_pct,status,"
                      "reason,median_latency_us,min_latency_us,max_latency_us\n", 0), 0u);
  EXPECT_NE(csv.find("\nd2d_ce_write_uni,0,1,268435456,one_direction,,20.000,10.000,30.000,50.000,ok,,,,\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\nd2d_ce_write_uni,1,0,268435456,one_direction,,,,,,skipped,\"peer access not supported (cudaDeviceCanAccessPeer(1, 0) = 0)\",,,\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\nh2d_ce_local_numa,host,0,268435456,one_direction,0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",failed,\"verification failed: 17 wrong words after sample 1 of 5, \"\"quoted\"\"\",,,\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\nd2d_sm_latency,0,1,268435456,not_applicable,,,,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",ok,,0.8000,0.7900,0.8125\n"), std::string::npos) << csv;
  std::size_t lines = 0;
  for (char c : csv) lines += c == '\n';
  EXPECT_EQ(lines, 1 + synthetic_report().results.size());
}

}  // namespace
}  // namespace cclbench::p2p
