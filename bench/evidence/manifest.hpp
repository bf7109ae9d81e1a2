#pragma once
// The run manifest: what is needed to reproduce and to trust a result. The environment is recorded
// through an allowlist only (nccl-tests dumps the whole environment, secrets included), and values
// of secret-looking names are replaced by "<redacted>" even inside the allowlist.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace cclbench {

inline constexpr const char* kManifestSchemaVersion = "1.0.0";

// NCCL_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE,
// NODE_RANK}, SLURM job geometry (SLURM_JOB_ID, SLURM_NNODES, SLURM_NTASKS, SLURM_PROCID, ...),
// UCX_NET_DEVICES, UCX_TLS.
bool is_allowed_environment_name(std::string_view name);

// Names containing TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL, or with KEY/KEYS as one of their
// '_'-separated parts (API_KEY, but not NCCL_IB_PKEY or MONKEY). Case-insensitive.
bool looks_secret(std::string_view name);

// {"NAME": "value"} for the allowed "NAME=value" entries of `environment`, sorted by name;
// secret-looking names get "<redacted>". Entries without '=' are ignored.
nlohmann::json allowed_environment(const std::vector<std::string>& environment);

// The allowlisted names that shape a measurement: NCCL_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
// UCX_NET_DEVICES, UCX_TLS (the NCCL_/CUDA_/UCX_ names of the allowlist). Launch geometry
// (OMPI_COMM_WORLD_*, SLURM_*) differs per rank by design and is not one of them.
bool is_measurement_environment_name(std::string_view name);

// allowed_environment() of just those names (secret-looking names still "<redacted>").
nlohmann::json measurement_environment(const std::vector<std::string>& environment);

// One rank's measurement environment as its own process saw it.
struct RankEnvironment {
  int rank = 0;
  std::string host;
  nlohmann::json environment = nlohmann::json::object();  // measurement_environment()
};

// What each host's ranks ran with, from every rank's RankEnvironment:
//   "env_by_host": {host: {NAME: value or null}}, NAME over every name any rank of the run has, the
//     value of the host's lowest rank, null where that rank does not have it set;
//   "env_rank_disagreements": [{"host", "variable", "ranks": [{"rank", "value" (null: unset)}]}],
//     one entry per host and name on which that host's ranks differ, every rank of the host listed
//     in rank order; empty when each host's ranks agree.
nlohmann::json environment_by_host(std::vector<RankEnvironment> ranks);

// This process's environment as "NAME=value" strings (for callers; tests pass their own).
std::vector<std::string> current_environment();

struct ManifestInput {
  std::string tool_name = "cclbench";
  std::vector<std::string> argv;
  std::vector<std::string> hostnames;          // every host of the run (rank 0 gathers them)
  std::vector<std::string> environment;        // "NAME=value", usually current_environment()
  // Filled by the caller; null when unknown, with the reason in `reasons` under the same key.
  nlohmann::json cuda_driver = nullptr;
  nlohmann::json cuda_runtime = nullptr;
  nlohmann::json nccl = nullptr;
  nlohmann::json mpi = nullptr;
  nlohmann::json gpus = nullptr;
  nlohmann::json nics = nullptr;
  std::map<std::string, std::string> reasons;  // "cuda_driver" -> "no CUDA driver: ..."
  nlohmann::json extra = nlohmann::json::object();  // caller's additional top-level fields (topology, sweep point, ...)
};

// Adds what the library can find itself: tool version and git commit (bench/core/version.hpp),
// hwloc API version, kernel (uname), hostname, time (UTC ISO 8601). Never throws for missing
// system information: such fields are null with a "<field>_reason".
nlohmann::json build_manifest(const ManifestInput& input);

// "2026-11-29T08:28:51Z"
std::string utc_timestamp_iso8601();

}  // namespace cclbench
