#include "bench/session/run_manifest.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "bench/core/version.hpp"
#include "bench/evidence/manifest.hpp"
#include "topology/binding.hpp"
#if defined(CCLBENCH_WITH_NCCL)
#include "bench/nccl/nccl_backend.hpp"
#endif

namespace cclbench {
namespace {

std::string mpi_library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
  int length = 0;
  if (MPI_Get_library_version(text.data(), &length) != MPI_SUCCESS) return "";
  std::string version(text.data(), static_cast<std::size_t>(std::max(0, length)));
  while (!version.empty() && (version.back() == '\n' || version.back() == ' ' || version.back() == '\0')) version.pop_back();
  const auto newline = version.find('\n');  // Open MPI: "Open MPI v4.1.4, package: ..., repo rev: ..., ..."
  return newline == std::string::npos ? version : version.substr(0, newline);
}

}  // namespace

std::vector<std::string> gather_hostnames(const MpiContext& context) {
  const std::vector<std::string> all = gather_strings(context, context.world, context.hostname);
  std::vector<std::string> unique;
  for (const std::string& host : all) {
    if (std::find(unique.begin(), unique.end(), host) == unique.end()) unique.push_back(host);
  }
  return unique;
}

nlohmann::json gather_environment_by_host(const MpiContext& context) {
  const nlohmann::json own = {{"host", context.hostname}, {"environment", measurement_environment(current_environment())}};
  const std::vector<std::string> gathered = gather_strings(context, context.world, own.dump());
  if (context.world_rank != 0) return nullptr;
  std::vector<RankEnvironment> ranks;
  for (std::size_t rank = 0; rank < gathered.size(); ++rank) {
    const nlohmann::json entry = nlohmann::json::parse(gathered[rank], nullptr, false);
    if (!entry.is_object()) continue;  // our own dump: cannot happen short of memory corruption
    ranks.push_back({static_cast<int>(rank), entry.value("host", std::string()),
                     entry.value("environment", nlohmann::json::object())});
  }
  return environment_by_host(std::move(ranks));
}

nlohmann::json run_manifest(const Config& config, const MpiContext& context, const std::vector<std::string>& hostnames,
                            const Backend& backend, const nlohmann::json& environment_by_host) {
  ManifestInput input;
  input.argv = config.argv;
  input.hostnames = hostnames;
  input.environment = current_environment();
  const std::string mpi = mpi_library_version();
  if (!mpi.empty()) input.mpi = mpi;
  else input.reasons["mpi"] = "MPI_Get_library_version failed";
#if defined(CCLBENCH_WITH_NCCL)
  const nlohmann::json gpu = gpu_environment_json();
  const auto take = [&](const char* key, const char* field) {
    nlohmann::json value = gpu.value(field, nlohmann::json(nullptr));
    const std::string reason = gpu.value(std::string(field) + "_reason", std::string("unknown"));
    if (std::string(key) == "cuda_driver") input.cuda_driver = value;
    else if (std::string(key) == "cuda_runtime") input.cuda_runtime = value;
    else input.nccl = value;
    if (value.is_null()) input.reasons[key] = reason;
  };
  take("cuda_driver", "cuda_driver_version");
  take("cuda_runtime", "cuda_runtime_version");
  take("nccl", "nccl_version");
  input.gpus = gpu.value("gpus", nlohmann::json::array());
  if (gpu.contains("gpus_reason")) input.extra["gpus_note"] = gpu["gpus_reason"];
#else
  input.reasons["cuda_driver"] = "built without CUDA";
  input.reasons["cuda_runtime"] = "built without CUDA";
  input.reasons["nccl"] = "built without NCCL";
  input.reasons["gpus"] = "built without CUDA";
#endif
  input.reasons["nics"] = "per rank in bindings[].allowed_nics (RDMA NICs NCCL may use for the rank's GPU)";
  nlohmann::json manifest = build_manifest(input);
  manifest["tool_version"] = kToolVersion;
  manifest["git_commit"] = kGitCommit;
  manifest["world_size"] = context.world_size;
  if (context.split) {
    // --split-ranks: this run was one group of a larger launch; world_size above is the group's.
    manifest["split"] = {{"group_index", context.group_index},
                         {"groups", context.group_count},
                         {"job_world_size", context.job_size},
                         {"job_first_rank", context.job_rank - context.world_rank}};
  }
  manifest["backend"] = backend.name();
  manifest["nranks"] = backend.nranks();
  manifest["emulated"] = backend.emulated();
  const bool gathered = environment_by_host.is_object();
  manifest["env_by_host"] = gathered ? environment_by_host.value("env_by_host", nlohmann::json::object())
                                     : nlohmann::json::object();
  manifest["env_rank_disagreements"] =
      gathered ? environment_by_host.value("env_rank_disagreements", nlohmann::json::array()) : nlohmann::json::array();
  return manifest;
}

nlohmann::json gather_bindings(const Config& config, const MpiContext& context, const Backend& backend,
                               const std::string& program) {
  nlohmann::json local = nlohmann::json::array();
  const char* hca = std::getenv("NCCL_IB_HCA");
  const auto capture = [&](int rank, const std::string& bus_id) {
    topology::BindingInput input;
    input.host = context.hostname;
    input.rank = rank;
    input.local_rank = context.local_rank;
    input.gpu_pci_bus_id = bus_id;
    input.nccl_ib_hca = hca ? hca : "";
    input.sysfs_root = config.sysfs_root;
    try {
      local.push_back(topology::capture_binding_record(input));
    } catch (const std::exception& error) {
      // The API promises not to throw for missing information; a bad bus id or spec still may.
      local.push_back({{"host", context.hostname}, {"rank", rank},
                       {"error", std::string("binding record not captured: ") + error.what()}});
    }
  };
#if defined(CCLBENCH_WITH_NCCL)
  const std::vector<LocalGpuBinding> gpus = local_gpu_bindings(backend);
  for (const LocalGpuBinding& gpu : gpus) capture(gpu.rank, gpu.pci_bus_id);
  if (gpus.empty()) capture(context.world_rank, "");
#else
  (void)backend;
  capture(context.world_rank, "");
#endif
  const std::vector<std::string> gathered = gather_strings(context, context.world, local.dump());
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& text : gathered) {
    const nlohmann::json records = nlohmann::json::parse(text, nullptr, false);
    if (!records.is_array()) continue;
    for (const auto& record : records) {
      all.push_back(record);
      if (record.contains("error")) {
        std::cerr << program << ": warning: rank " << record.value("rank", -1) << ": " << record["error"].get<std::string>() << "\n";
      } else if (record.contains("warning") && record["warning"].is_string()) {
        std::cerr << program << ": warning: " << record["warning"].get<std::string>() << "\n";
      } else if (!record.contains("warning")) {
        if (const auto warning = topology::binding_warning(record)) std::cerr << program << ": warning: " << *warning << "\n";
      }
    }
  }
  return all;
}

}  // namespace cclbench
