#include "bench/evidence/manifest.hpp"

#include <hwloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

#include "bench/core/version.hpp"
#include "bench/evidence/ascii_case.hpp"

extern char** environ;  // POSIX: the process environment

namespace cclbench {

namespace {

constexpr std::string_view kExactNames[] = {
    "CUDA_VISIBLE_DEVICES",      "CUDA_DEVICE_ORDER",         "OMPI_COMM_WORLD_RANK",  "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK",
    "SLURM_JOB_ID",              "SLURM_JOBID",               "SLURM_STEP_ID",         "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",       "SLURM_NTASKS",              "SLURM_NPROCS",          "SLURM_NTASKS_PER_NODE",
    "SLURM_PROCID",              "SLURM_LOCALID",             "SLURM_NODEID",          "SLURM_NODELIST",
    "SLURM_JOB_NODELIST",        "SLURM_TASKS_PER_NODE",      "SLURM_CPUS_PER_TASK",   "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_GPUS",                "SLURM_GPUS_PER_NODE",       "SLURM_GPUS_PER_TASK",   "SLURM_CPU_BIND",
    "SLURM_DISTRIBUTION",        "UCX_NET_DEVICES",           "UCX_TLS",
    "CCLBENCH_INJECT_WRONG",  // the test hook that corrupts results on purpose: a run must say so
    "CCLBENCH_INJECT_SLOWDOWN",  // the test knob that slows timed cases on purpose: likewise
};

void null_with_reason(nlohmann::json& object, const std::string& key, const nlohmann::json& value,
                      const std::map<std::string, std::string>& reasons) {
  object[key] = value;
  if (value.is_null()) {
    const auto reason = reasons.find(key);
    object[key + "_reason"] = reason != reasons.end() ? reason->second : "not provided by the caller";
  }
}

}  // namespace

bool is_allowed_environment_name(std::string_view name) {
  if (name.starts_with("NCCL_") && name.size() > 5) return true;
  return std::find(std::begin(kExactNames), std::end(kExactNames), name) != std::end(kExactNames);
}

bool looks_secret(std::string_view name) {
  const std::string text = evidence_detail::upper(name);
  for (std::string_view marker : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}) {
    if (text.find(marker) != std::string::npos) return true;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('_', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view part = std::string_view(text).substr(start, end - start);
    if (part == "KEY" || part == "KEYS") return true;
    start = end + 1;
  }
  return false;
}

nlohmann::json allowed_environment(const std::vector<std::string>& environment) {
  std::map<std::string, std::string> kept;
  for (const std::string& entry : environment) {
    const std::size_t equals = entry.find('=');
    if (equals == std::string::npos || equals == 0) continue;
    const std::string name = entry.substr(0, equals);
    if (!is_allowed_environment_name(name)) continue;
    kept[name] = looks_secret(name) ? std::string("<redacted>") : entry.substr(equals + 1);
  }
  nlohmann::json result = nlohmann::json::object();
  for (const auto& [name, value] : kept) result[name] = value;
  return result;
}

bool is_measurement_environment_name(std::string_view name) {
  return is_allowed_environment_name(name) &&
         (name.starts_with("NCCL_") || name.starts_with("CUDA_") || name.starts_with("UCX_"));
}

nlohmann::json measurement_environment(const std::vector<std::string>& environment) {
  const nlohmann::json allowed = allowed_environment(environment);  // items() would not keep a temporary alive
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [name, value] : allowed.items()) {
    if (is_measurement_environment_name(name)) kept[name] = value;
  }
  return kept;
}

nlohmann::json environment_by_host(std::vector<RankEnvironment> ranks) {
  std::sort(ranks.begin(), ranks.end(), [](const RankEnvironment& a, const RankEnvironment& b) { return a.rank < b.rank; });
  std::set<std::string> names;
  std::map<std::string, std::vector<const RankEnvironment*>> by_host;
  for (const RankEnvironment& rank : ranks) {
    if (rank.environment.is_object()) {
      for (const auto& [name, value] : rank.environment.items()) names.insert(name);
    }
    by_host[rank.host].push_back(&rank);
  }
  const auto value_of = [](const RankEnvironment& rank, const std::string& name) {
    const auto found = rank.environment.is_object() ? rank.environment.find(name) : rank.environment.end();
    return found != rank.environment.end() ? *found : nlohmann::json(nullptr);
  };
  nlohmann::json hosts = nlohmann::json::object();
  nlohmann::json disagreements = nlohmann::json::array();
  for (const auto& [host, members] : by_host) {
    nlohmann::json variables = nlohmann::json::object();
    for (const std::string& name : names) {
      const nlohmann::json first = value_of(*members.front(), name);
      variables[name] = first;
      const bool differ = std::any_of(members.begin(), members.end(),
                                      [&](const RankEnvironment* rank) { return value_of(*rank, name) != first; });
      if (!differ) continue;
      nlohmann::json values = nlohmann::json::array();
      for (const RankEnvironment* rank : members) values.push_back({{"rank", rank->rank}, {"value", value_of(*rank, name)}});
      disagreements.push_back({{"host", host}, {"variable", name}, {"ranks", values}});
    }
    hosts[host] = variables;
  }
  return {{"env_by_host", hosts}, {"env_rank_disagreements", disagreements}};
}

std::vector<std::string> current_environment() {
  std::vector<std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) environment.emplace_back(*entry);
  return environment;
}

std::string utc_timestamp_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> buffer{};
  std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer.data();
}

nlohmann::json build_manifest(const ManifestInput& input) {
  nlohmann::json manifest;
  manifest["schema_version"] = kManifestSchemaVersion;
  manifest["tool"] = {{"name", input.tool_name}, {"version", kToolVersion}, {"git_commit", kGitCommit}};
  manifest["created_utc"] = utc_timestamp_iso8601();
  manifest["argv"] = input.argv;
  manifest["command_line"] = [&] {
    std::string line;
    for (const std::string& arg : input.argv) line += (line.empty() ? "" : " ") + arg;
    return line;
  }();
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) {
    manifest["hostname"] = std::string(host.data());
  } else {
    manifest["hostname"] = nullptr;
    manifest["hostname_reason"] = std::string("gethostname failed: ") + std::strerror(errno);
  }
  manifest["hostnames"] = input.hostnames;
  struct utsname names {};
  if (::uname(&names) == 0) {
    manifest["kernel"] = {{"sysname", names.sysname}, {"release", names.release}, {"version", names.version},
                          {"machine", names.machine}};
  } else {
    manifest["kernel"] = nullptr;
    manifest["kernel_reason"] = std::string("uname failed: ") + std::strerror(errno);
  }
  nlohmann::json versions = nlohmann::json::object();
  null_with_reason(versions, "cuda_driver", input.cuda_driver, input.reasons);
  null_with_reason(versions, "cuda_runtime", input.cuda_runtime, input.reasons);
  null_with_reason(versions, "nccl", input.nccl, input.reasons);
  null_with_reason(versions, "mpi", input.mpi, input.reasons);
  const unsigned api = hwloc_get_api_version();
  versions["hwloc_api"] = std::to_string(api >> 16) + "." + std::to_string((api >> 8) & 0xff) + "." +
                          std::to_string(api & 0xff);
  manifest["versions"] = versions;
  null_with_reason(manifest, "gpus", input.gpus, input.reasons);
  null_with_reason(manifest, "nics", input.nics, input.reasons);
  manifest["environment"] = allowed_environment(input.environment);
  manifest["environment_policy"] =
      "allowlist: NCCL_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, OMPI_COMM_WORLD_* launch geometry, SLURM job "
      "geometry, UCX_NET_DEVICES, UCX_TLS, CCLBENCH_INJECT_WRONG, CCLBENCH_INJECT_SLOWDOWN; secret-looking names are "
      "redacted";
  if (input.extra.is_object()) {
    for (const auto& [key, value] : input.extra.items()) {
      if (!manifest.contains(key)) manifest[key] = value;
    }
  }
  return manifest;
}

}  // namespace cclbench
