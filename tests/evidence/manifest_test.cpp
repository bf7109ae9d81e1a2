#include "bench/evidence/manifest.hpp"

#include <cstdlib>

#include <gtest/gtest.h>

#include "bench/core/file_io.hpp"
#include "bench/core/version.hpp"

namespace cclbench {
namespace {

const std::vector<std::string> kEnvironment = {
    "NCCL_IB_HCA=mlx5_0:1,mlx5_3:1",
    "NCCL_CROSS_NIC=1",
    "NCCL_SOCKET_IFNAME=eth0",
    "NCCL_IB_PKEY=0x8001",             // partition key: not a secret
    "NCCL_API_TOKEN=hunter2",          // allowlisted prefix, secret-looking name
    "NCCL_PLUGIN_KEY=abc",             // KEY as a word part
    "NCCL_RAS_PASSWORD=pw",
    "CUDA_VISIBLE_DEVICES=0,1",
    "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    "OMPI_COMM_WORLD_RANK=3",
    "OMPI_COMM_WORLD_LOCAL_RANK=3",
    "OMPI_MCA_orte_hnp_uri=1234;tcp://10.0.0.1",  // not launch geometry
    "SLURM_JOB_ID=777",
    "SLURM_NNODES=2",
    "SLURM_JOB_PASSWORD=x",            // not allowlisted anyway
    "UCX_TLS=rc,sm",
    "UCX_NET_DEVICES=mlx5_0:1",
    "UCX_IB_SECRET=x",
    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
    "GITHUB_TOKEN=ghp_abc",
    "HOME=/root",
    "PATH=/usr/bin",
    "LD_PRELOAD=/tmp/evil.so",
    "MALFORMED_WITHOUT_EQUALS",
    "=no_name",
};

TEST(Manifest, SecretLookingNamesAreDetectedAsWordParts) {
  EXPECT_TRUE(looks_secret("NCCL_API_TOKEN"));
  EXPECT_TRUE(looks_secret("NCCL_PLUGIN_KEY"));
  EXPECT_TRUE(looks_secret("ssh_keys"));
  EXPECT_TRUE(looks_secret("MY_PASSWD"));
  EXPECT_TRUE(looks_secret("CLIENT_CREDENTIALS"));
  EXPECT_FALSE(looks_secret("NCCL_IB_PKEY"));
  EXPECT_FALSE(looks_secret("MONKEY"));
  EXPECT_FALSE(looks_secret("NCCL_IB_HCA"));
}

TEST(Manifest, EnvironmentKeepsOnlyTheAllowlistAndRedactsSecrets) {
  const nlohmann::json env = allowed_environment(kEnvironment);
  EXPECT_EQ(env["NCCL_IB_HCA"], "mlx5_0:1,mlx5_3:1");
  EXPECT_EQ(env["NCCL_CROSS_NIC"], "1");
  EXPECT_EQ(env["NCCL_IB_PKEY"], "0x8001");
  EXPECT_EQ(env["NCCL_API_TOKEN"], "<redacted>");
  EXPECT_EQ(env["NCCL_PLUGIN_KEY"], "<redacted>");
  EXPECT_EQ(env["NCCL_RAS_PASSWORD"], "<redacted>");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(env["OMPI_COMM_WORLD_RANK"], "3");
  EXPECT_EQ(env["SLURM_JOB_ID"], "777");
  EXPECT_EQ(env["UCX_TLS"], "rc,sm");
  for (const char* absent : {"OMPI_MCA_orte_hnp_uri", "SLURM_JOB_PASSWORD", "UCX_IB_SECRET", "AWS_SECRET_ACCESS_KEY",
                             "GITHUB_TOKEN", "HOME", "PATH", "LD_PRELOAD", "MALFORMED_WITHOUT_EQUALS", ""}) {
    EXPECT_FALSE(env.contains(absent)) << absent;
  }
  const std::string dumped = env.dump();
  for (const char* secret : {"hunter2", "wJalrXUtnFEMI", "ghp_abc", "evil", "\"pw\"", "\"abc\""}) {
    EXPECT_EQ(dumped.find(secret), std::string::npos) << secret;
  }
}

TEST(Manifest, MeasurementEnvironmentIsTheNcclCudaUcxPartOfTheAllowlist) {
  const nlohmann::json kept = measurement_environment(kEnvironment);
  const nlohmann::json expected = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"CUDA_VISIBLE_DEVICES", "0,1"},
                                   {"NCCL_API_TOKEN", "<redacted>"}, {"NCCL_CROSS_NIC", "1"},
                                   {"NCCL_IB_HCA", "mlx5_0:1,mlx5_3:1"}, {"NCCL_IB_PKEY", "0x8001"},
                                   {"NCCL_PLUGIN_KEY", "<redacted>"}, {"NCCL_RAS_PASSWORD", "<redacted>"},
                                   {"NCCL_SOCKET_IFNAME", "eth0"}, {"UCX_NET_DEVICES", "mlx5_0:1"}, {"UCX_TLS", "rc,sm"}};
  EXPECT_EQ(kept, expected);  // no OMPI_COMM_WORLD_*/SLURM_* geometry, no CCLBENCH_INJECT_WRONG, no UCX_IB_SECRET
  EXPECT_FALSE(is_measurement_environment_name("OMPI_COMM_WORLD_RANK"));
  EXPECT_FALSE(is_measurement_environment_name("CUDA_LAUNCH_BLOCKING"));  // CUDA_ but not allowlisted
  EXPECT_TRUE(is_measurement_environment_name("NCCL_DEBUG"));
}

TEST(Manifest, EnvironmentByHostTakesTheLowestRankAndNotesRanksThatDiffer) {
  // node7's ranks 2 and 3 disagree on NCCL_DEBUG, and rank 3 alone sets NCCL_SOCKET_IFNAME; node5's
  // ranks agree; NCCL_IB_HCA is set on node5 only, so node7 holds it as null.
  std::vector<RankEnvironment> ranks = {
      {3, "node7", {{"NCCL_DEBUG", "INFO"}, {"NCCL_SOCKET_IFNAME", "eth3"}}},
      {0, "node5", {{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", "mlx5_0"}}},
      {2, "node7", {{"NCCL_DEBUG", "WARN"}}},
      {1, "node5", {{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", "mlx5_0"}}},
  };
  const nlohmann::json result = environment_by_host(ranks);
  const nlohmann::json by_host = {
      {"node5", {{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", "mlx5_0"}, {"NCCL_SOCKET_IFNAME", nullptr}}},
      {"node7", {{"NCCL_DEBUG", "WARN"}, {"NCCL_IB_HCA", nullptr}, {"NCCL_SOCKET_IFNAME", nullptr}}}};
  EXPECT_EQ(result.at("env_by_host"), by_host) << result.dump(2);
  const nlohmann::json disagreements = nlohmann::json::parse(R"([
    {"host": "node7", "variable": "NCCL_DEBUG", "ranks": [{"rank": 2, "value": "WARN"}, {"rank": 3, "value": "INFO"}]},
    {"host": "node7", "variable": "NCCL_SOCKET_IFNAME", "ranks": [{"rank": 2, "value": null}, {"rank": 3, "value": "eth3"}]}
  ])");
  EXPECT_EQ(result.at("env_rank_disagreements"), disagreements) << result.dump(2);

  const nlohmann::json alone = environment_by_host({{0, "node5", nlohmann::json::object()}});
  EXPECT_EQ(alone.at("env_by_host"), (nlohmann::json{{"node5", nlohmann::json::object()}}));
  EXPECT_EQ(alone.at("env_rank_disagreements"), nlohmann::json::array());
}

TEST(Manifest, BuildFillsToolSystemAndNullsWithReasons) {
  ManifestInput input;
  input.argv = {"coll_perf", "-b", "8K"};
  input.hostnames = {"node5", "node7"};
  input.environment = kEnvironment;
  input.nccl = "2.28.3";
  input.reasons["cuda_driver"] = "no CUDA driver: CUDA_ERROR_NO_DEVICE";
  const nlohmann::json manifest = build_manifest(input);
  EXPECT_EQ(manifest["schema_version"], kManifestSchemaVersion);
  EXPECT_EQ(manifest["tool"]["version"], kToolVersion);
  EXPECT_EQ(manifest["tool"]["git_commit"], kGitCommit);
  EXPECT_EQ(manifest["command_line"], "coll_perf -b 8K");
  EXPECT_EQ(manifest["versions"]["nccl"], "2.28.3");
  EXPECT_TRUE(manifest["versions"]["cuda_driver"].is_null());
  EXPECT_EQ(manifest["versions"]["cuda_driver_reason"], "no CUDA driver: CUDA_ERROR_NO_DEVICE");
  EXPECT_EQ(manifest["versions"]["mpi_reason"], "not provided by the caller");
  EXPECT_FALSE(manifest["versions"]["hwloc_api"].get<std::string>().empty());
  EXPECT_TRUE(manifest["kernel"].is_object());
  EXPECT_EQ(manifest["created_utc"].get<std::string>().size(), 20u);
  EXPECT_EQ(manifest["environment"]["NCCL_API_TOKEN"], "<redacted>");
  EXPECT_EQ(manifest.dump().find("hunter2"), std::string::npos);
  EXPECT_EQ(manifest.dump().find("/root"), std::string::npos);
}

TEST(Manifest, CurrentEnvironmentIsNeverDumpedWhole) {
  const nlohmann::json env = allowed_environment(current_environment());
  for (const auto& [name, value] : env.items()) EXPECT_TRUE(is_allowed_environment_name(name)) << name;
  EXPECT_FALSE(env.contains("PATH"));
}

}  // namespace
}  // namespace cclbench

namespace cclbench {
namespace {

TEST(Manifest, DocumentValidatesAgainstItsSchema) {
  ManifestInput input;
  input.argv = {"coll_perf", "-b", "8K", "-e", "64M"};
  input.hostnames = {"node5"};
  input.environment = kEnvironment;
  input.cuda_runtime = "13.0";
  input.gpus = nlohmann::json::array({{{"index", 0}, {"name", "H200"}}});
  const std::string path = std::string(CCLBENCH_BINARY_DIR) + "/tests/evidence/manifest_sample.json";
  write_file_atomic(path, build_manifest(input).dump(2));
  const std::string command = "/usr/bin/python3 " + std::string(CCLBENCH_SOURCE_DIR) + "/tests/tools/validate_json.py " +
                              std::string(CCLBENCH_SOURCE_DIR) + "/results_schema/manifest.schema.json " + path;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  // And the schema rejects a whole-environment dump.
  nlohmann::json bad = build_manifest(input);
  bad["environment"]["HOME"] = "/root";
  const std::string bad_path = std::string(CCLBENCH_BINARY_DIR) + "/tests/evidence/manifest_bad.json";
  write_file_atomic(bad_path, bad.dump());
  const std::string bad_command = "/usr/bin/python3 " + std::string(CCLBENCH_SOURCE_DIR) + "/tests/tools/validate_json.py " +
                                  std::string(CCLBENCH_SOURCE_DIR) + "/results_schema/manifest.schema.json " + bad_path +
                                  " 2>/dev/null";
  EXPECT_NE(std::system(bad_command.c_str()), 0);
}

}  // namespace
}  // namespace cclbench
