#pragma once
// The run manifest and the per-rank binding records of a coll_perf document. Collective over the
// world: every rank calls these in the same order.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"

namespace cclbench {

// Every rank's host name, gathered; each name once, in rank order.
std::vector<std::string> gather_hostnames(const MpiContext& context);

// Every rank's measurement environment (NCCL_*, CUDA_*, UCX_* names of the allowlist, read from its
// own process environment), gathered to rank 0: environment_by_host() there ({"env_by_host",
// "env_rank_disagreements"}), null on the other ranks. mpirun does not forward the launching
// shell's variables to other hosts unless told (-x), so rank 0's environment is not the run's.
nlohmann::json gather_environment_by_host(const MpiContext& context);

// The full manifest (bench/evidence/manifest.hpp) plus coll_perf's flat fields kept for readers of
// schema 1.0 (tool_version, git_commit, world_size, backend, nranks, emulated) and, from 1.4,
// env_by_host and env_rank_disagreements (`environment_by_host`, from gather_environment_by_host).
nlohmann::json run_manifest(const Config& config, const MpiContext& context, const std::vector<std::string>& hostnames,
                            const Backend& backend, const nlohmann::json& environment_by_host);

// Every rank's record(s), gathered to rank 0 in rank order; rank 0 prints a warning for each rank
// whose CPUs are not local to its GPU. One record per GPU this process drives (-g N gives N), or
// one without GPU for the MPI backend.
nlohmann::json gather_bindings(const Config& config, const MpiContext& context, const Backend& backend,
                               const std::string& program);

}  // namespace cclbench
