#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <string>

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/gpu_presence.hpp"

namespace {

class P2pMatrixGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t result = cudaGetDeviceCount(&count);
    if (result != cudaSuccess || count == 0) {
      SKIP_OR_FAIL_WITHOUT_GPU(std::string(result != cudaSuccess ? cudaGetErrorString(result) : "device count 0"));
    }
    device_count_ = count;
    char pattern[] = "/tmp/cclbench_p2p_gpu_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Runs p2p_matrix with `args`; returns its exit status.
  int run(const std::string& args) {
    const std::string command = std::string(P2P_MATRIX_BIN) + " " + args + " > " + dir_ + "/stdout.txt 2> " + dir_ + "/stderr.txt";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  int validate(const std::string& name) {
    const std::string command = std::string("/usr/bin/python3 ") + CCLBENCH_SOURCE_DIR + "/tests/tools/validate_json.py " +
                                CCLBENCH_SOURCE_DIR + "/results_schema/p2p_matrix.schema.json " + dir_ + "/" + name;
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int device_count_ = 0;
  std::string dir_;
};

TEST_F(P2pMatrixGpuTest, SingleGpuTestsMeasureVerifiedNonZeroBandwidth) {
  const int rc = run("-t device_local_copy_ce,device_local_copy_sm,d2d_ce_latency,d2d_sm_latency -b 64M -n 3 -w 1 "
                     "--chase-bytes 64M --chase-loads 2000 --pair 0,0 --json " + dir_ + "/r.json --csv " + dir_ + "/r.csv");
  ASSERT_EQ(rc, 0) << read("stderr.txt") << read("stdout.txt");
  EXPECT_EQ(validate("r.json"), 0);
  const auto j = nlohmann::json::parse(read("r.json"));
  ASSERT_EQ(j["results"].size(), 4u) << j.dump();
  int checked = 0;
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["verification"]["wrong_words"], 0) << r.dump();
    const std::string test = r["test"];
    if (test.rfind("device_local_copy", 0) == 0) {
      EXPECT_GT(r["bandwidth_gbps"]["median"].get<double>(), 1.0) << r.dump();
      EXPECT_EQ(r["bytes_counted_per_copy"], 64ull << 20);  // schema 1.1: bytes copied, as nvbandwidth
    } else if (test == "d2d_ce_latency") {
      EXPECT_GT(r["latency_us"]["median"].get<double>(), 0.0);
    } else {
      EXPECT_GT(r["load_latency_ns"]["median"].get<double>(), 10.0);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  EXPECT_NE(read("stdout.txt").find("device_local_copy_sm: "), std::string::npos);
  EXPECT_NE(read("r.csv").find("device_local_copy_ce,0,0,67108864,"), std::string::npos);
}

TEST_F(P2pMatrixGpuTest, HostTestsAreOkOrSkippedWithReason) {
  const int rc = run("-t h2d_ce_local_numa,d2h_ce_local_numa,bi_h2d_d2h_ce_local_numa,h2d_ce_remote_numa -b 32M -n 3 -w 1 "
                     "--pair 0,0 --json " + dir_ + "/h.json");
  ASSERT_TRUE(rc == 0 || rc == 7) << read("stderr.txt");
  EXPECT_EQ(validate("h.json"), 0);
  const auto j = nlohmann::json::parse(read("h.json"));
  ASSERT_EQ(j["results"].size(), 4u) << j.dump();  // one per selected test: an empty list must not pass
  int ok = 0;
  for (const auto& r : j["results"]) {
    if (r["status"] == "ok") {
      EXPECT_GT(r["bandwidth_gbps"]["median"].get<double>(), 0.5) << r.dump();
      EXPECT_TRUE(r["host_numa_node"].is_number_integer()) << r.dump();
      ++ok;
    } else {
      EXPECT_EQ(r["status"], "skipped") << r.dump();
      ASSERT_TRUE(r["reason"].is_string()) << r.dump();
      // Only the NUMA placement may be unknowable (containers, one-node VMs); never the copy itself.
      EXPECT_NE(r["reason"].get<std::string>().find("NUMA"), std::string::npos) << r.dump();
    }
  }
  EXPECT_EQ(rc, ok > 0 ? 0 : 7) << "exit status must say whether anything was measured";
}

TEST_F(P2pMatrixGpuTest, InjectedCorruptionComesOutFailedNotAsANumber) {
  const int rc = run("-t device_local_copy_ce,device_local_copy_sm,h2d_ce_local_numa,d2h_ce_local_numa -b 4M -n 2 -w 0 "
                     "--pair 0,0 --inject-corruption --json " + dir_ + "/c.json --csv " + dir_ + "/c.csv");
  EXPECT_EQ(rc, 1) << read("stderr.txt");
  EXPECT_EQ(validate("c.json"), 0);
  const auto j = nlohmann::json::parse(read("c.json"));
  int failed = 0;
  for (const auto& r : j["results"]) {
    if (r["status"] == "skipped") continue;  // host tests without a known NUMA node
    EXPECT_EQ(r["status"], "failed") << r.dump();
    EXPECT_EQ(r["bandwidth_gbps"], nullptr) << r.dump();
    EXPECT_EQ(r["verification"]["wrong_words"], 1) << r.dump();  // one flipped bit, found after the first sample
    EXPECT_NE(r["reason"].get<std::string>().find("verification failed"), std::string::npos) << r.dump();
    ++failed;
  }
  EXPECT_GE(failed, 2);
  EXPECT_NE(read("stdout.txt").find("FAIL"), std::string::npos) << read("stdout.txt");
}

TEST_F(P2pMatrixGpuTest, SizeThatDoesNotFitIsSkippedAndTheOthersStillCount) {
  // 1M and 1G fit on any GPU this suite targets; 1T does not.
  const int rc = run("-t device_local_copy_ce -b 1M -e 1T -f 1024 -n 2 -w 0 --pair 0,0 --json " + dir_ + "/a.json");
  EXPECT_EQ(rc, 0) << read("stderr.txt");
  EXPECT_EQ(validate("a.json"), 0);
  const auto j = nlohmann::json::parse(read("a.json"));
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["status"], "ok");
  EXPECT_EQ(j["results"][1]["status"], "ok");
  EXPECT_EQ(j["results"][2]["status"], "skipped");
  EXPECT_NE(j["results"][2]["reason"].get<std::string>().find("does not fit: cannot allocate"), std::string::npos)
      << j["results"][2].dump();
}

TEST_F(P2pMatrixGpuTest, PairTestsSkipWithOneGpuOrRunWithTwo) {
  const int rc = run("-t d2d_ce_write_uni,d2d_sm_write_bi -b 16M -n 2 -w 1 --json " + dir_ + "/p.json");
  EXPECT_EQ(validate("p.json"), 0);
  const auto j = nlohmann::json::parse(read("p.json"));
  ASSERT_FALSE(j["results"].empty()) << j.dump();  // a loop over no results proves nothing
  if (device_count_ == 1) {
    // One GPU: the one-way matrix still measures its diagonal (the local copy, p2p schema 1.1); every pair of
    // two GPUs and the bidirectional matrix skip with the reason. The local copy is measured: exit 0.
    EXPECT_EQ(rc, 0) << read("stderr.txt");
    int diagonal = 0;
    for (const auto& r : j["results"]) {
      if (r["test"] == "d2d_ce_write_uni" && r["src"] == r["dst"]) {
        ++diagonal;
        EXPECT_EQ(r["status"], "ok") << r.dump();
        EXPECT_TRUE(r["details"].value("local_copy", false)) << r.dump();
      } else {
        EXPECT_EQ(r["status"], "skipped") << r.dump();
        EXPECT_EQ(r["reason"], "needs 2 GPUs (1 visible)") << r.dump();
      }
    }
    EXPECT_EQ(diagonal, 1) << j.dump();
  } else {
    // With 2+ GPUs every pair is measurable: each must be ok (a run where all skipped exits 7).
    EXPECT_EQ(rc, 0) << read("stderr.txt");
    for (const auto& r : j["results"]) EXPECT_EQ(r["status"], "ok") << r.dump();
  }
}

}  // namespace

namespace {

TEST_F(P2pMatrixGpuTest, OneGpuStillMeasuresItsOwnTestsAndExitsZero) {
  if (device_count_ != 1) GTEST_SKIP() << "checks the one-GPU case; " << device_count_ << " GPUs visible";
  const int rc = run("-t d2d_ce_write_uni,d2d_ce_latency,device_local_copy_ce -b 16M -n 2 -w 1 --json " + dir_ + "/o.json");
  EXPECT_EQ(rc, 0) << read("stderr.txt");
  EXPECT_EQ(validate("o.json"), 0);
  const auto j = nlohmann::json::parse(read("o.json"));
  ASSERT_EQ(j["results"].size(), 3u) << j.dump();
  for (const auto& r : j["results"]) {
    // Schema 1.1: the one-way bandwidth matrix of one GPU is 1 x 1 and holds the local copy.
    EXPECT_EQ(r["status"], "ok") << r.dump();  // the diagonals and the local copy run on one GPU
    EXPECT_EQ(r["src"], 0) << r.dump();
    EXPECT_EQ(r["dst"], 0) << r.dump();
  }
  EXPECT_TRUE(j["binding"].is_object()) << j["binding_reason"];
  EXPECT_EQ(j["binding_gpu"], 0);
}

}  // namespace

namespace {

// The GPU's memory bandwidth from its properties (2 transfers per memory clock x bus width), GB/s;
// nullopt where the device does not report them.
std::optional<double> hbm_ceiling_gbps(int device) {
  int clock_khz = 0;
  int bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess || clock_khz <= 0 ||
      bus_bits <= 0) {
    return std::nullopt;
  }
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

TEST_F(P2pMatrixGpuTest, OneWayMatricesMeasureTheLocalCopyOnTheDiagonal) {
  // 256 MiB per copy: several times any L2, so the copy streams through HBM.
  const int rc = run("-t d2d_ce_write_uni,d2d_ce_read_uni,d2d_sm_write_uni,d2d_sm_read_uni -b 256M -n 3 -w 1 --json " +
                     dir_ + "/d.json");
  ASSERT_TRUE(rc == 0 || rc == 7) << read("stderr.txt") << read("stdout.txt");
  EXPECT_EQ(validate("d.json"), 0);
  const auto j = nlohmann::json::parse(read("d.json"));
  EXPECT_EQ(j["schema_version"], "1.1.0");
  int diagonals = 0;
  for (const auto& r : j["results"]) {
    if (!r["src"].is_number_integer() || r["src"] != r["dst"]) continue;
    ++diagonals;
    const int gpu = r["src"].get<int>();
    ASSERT_EQ(r["status"], "ok") << r.dump();
    EXPECT_EQ(r["details"]["local_copy"], true) << r.dump();
    EXPECT_EQ(r["bytes_counted"], "one_direction") << r.dump();
    EXPECT_EQ(r["bytes_counted_per_copy"], 256ull << 20) << "bytes copied, as nvbandwidth: " << r.dump();
    EXPECT_EQ(r["verification"]["wrong_words"], 0) << r.dump();
    const double median = r["bandwidth_gbps"]["median"].get<double>();
    EXPECT_TRUE(std::isfinite(median)) << r.dump();
    EXPECT_GT(median, 1.0) << r.dump();
    // A local copy reads and writes each byte: HBM carries twice the figure, which cannot exceed the
    // memory's peak. Where the device reports no memory clock, a bound above every GPU made so far.
    const std::optional<double> ceiling = hbm_ceiling_gbps(gpu);
    const double bound = ceiling ? *ceiling : 20000.0;
    EXPECT_LT(median, bound) << "GPU " << gpu << " HBM ceiling " << bound << " GB/s: " << r.dump();
    if (ceiling) {
      EXPECT_LT(2.0 * median, 1.05 * *ceiling) << "read + write over HBM peak " << *ceiling << ": " << r.dump();
    }
  }
  EXPECT_EQ(diagonals, 4 * device_count_) << "one diagonal per GPU and test: " << j["results"].dump();
  EXPECT_NE(read("stdout.txt").find("diagonal = copy within the GPU"), std::string::npos) << read("stdout.txt");
}

}  // namespace
