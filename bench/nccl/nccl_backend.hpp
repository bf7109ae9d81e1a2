#pragma once
// The NCCL backend: GPU buffers, one communicator per local GPU, CUDA-event timing, device-side
// verification. Launch shapes (all the same code):
//   -g N in one process: N communicators created in one ncclGroup, global rank world_rank*N + i;
//   one MPI rank per GPU: device local_rank*N + i among the visible devices, or 0..N-1 when the
//     launcher left exactly N devices visible to each rank;
//   several nodes: the same, with the unique id broadcast from world rank 0.
// --share-gpu runs several ranks on one GPU (correctness only): each rank becomes its own NCCL
// "host" (NCCL_HOSTID) and ranks connect over NET/Socket on loopback. Ranks that share a GPU (by
// UUID, across the whole world, --share-gpu or not) create their CUDA contexts in turns, in
// world-rank order (bench/nccl/context_turns.hpp); world rank 0 notes the turns on stderr.
// Thread safety: abort_communication() may be called from the -T watchdog thread while the main
// thread is inside any other method (see Communicators, nccl_communicators.hpp).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/backend.hpp"
#include "bench/core/config.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/core/mpi_context.hpp"

namespace cclbench {

// Collective over `mpi.world`. Throws FatalError(usage) for rank/GPU mismatches (more ranks*N
// than visible GPUs, two ranks on one GPU without --share-gpu) naming host, rank and device;
// FatalError(nothing_measured) when no GPU is visible; FatalError(runtime_error) for CUDA/NCCL
// failures. Every rank throws the same message (the lowest failing rank's), so none is left
// waiting in a collective. With `injection` (tests only), count_wrong() first flips the chosen
// received elements on the chosen rank and GPU.
// With `slowdown` (the CCLBENCH_INJECT_SLOWDOWN test knob, bench/core/slowdown_injection.hpp) every
// timed case is slowed by a calibrated spin kernel after every k-th collective.
std::unique_ptr<Backend> make_nccl_backend(const Config& config, const MpiContext& mpi,
                                           std::optional<FaultInjection> injection = std::nullopt,
                                           std::optional<SlowdownInjection> slowdown = std::nullopt);

// For --share-gpu: sets NCCL_HOSTID=<hostname>-cclbench-rank<world_rank> (overwriting), and
// NCCL_SOCKET_IFNAME=lo and NCCL_NET=Socket unless the user set them. Must run before the first NCCL call of the
// process (NCCL reads its environment once); make_nccl_backend calls it, call it earlier if
// anything else (gpu_environment_json's ncclGetVersion is harmless) touches NCCL first.
void prepare_nccl_environment(const Config& config, const MpiContext& mpi);

// "exact": the received bits must equal the host reference's. "tolerance": avg on a floating type,
// which NCCL computes as a premultiplied sum (x * (1/n) summed) and is therefore not bit-exact;
// an element is wrong only when |got - expected| > avg_relative_tolerance(dtype, n) *
// max(|expected|, 1) or it is NaN (see bench/core/element_codec.hpp).
std::string_view verification_mode(const CaseSpec& spec);

// The GPU each local rank of this process drives, for the run manifest (empty if `backend` is not
// the NCCL backend).
struct LocalGpuBinding {
  int rank = 0;           // global rank in the communicator
  int device = 0;         // CUDA device ordinal (among the visible devices)
  std::string pci_bus_id; // "0000:19:00.0"
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};
std::vector<LocalGpuBinding> local_gpu_bindings(const Backend& backend);
std::vector<std::string> local_gpu_bus_ids(const Backend& backend);
nlohmann::json to_json(const LocalGpuBinding& binding);

// The usage error when a rank needs more GPUs than its node shows (`visible_text` names the count
// and CUDA_VISIBLE_DEVICES): what to start instead - fewer ranks per node, or a smaller -g when
// one process alone asks for more GPUs than there are.
std::string too_few_gpus_message(const std::string& visible_text, int visible, int per_process, int local_rank,
                                 int local_size);

// Visible CUDA devices; 0 on any CUDA error (no driver, no device), with the CUDA error string in
// *error when given (empty when the count is valid).
int visible_gpu_count(std::string* error = nullptr);

// Versions and visible GPUs for the manifest: cuda_driver_version, cuda_runtime_version,
// nccl_version (strings like "13.0", "2.28.3"; null plus a *_reason when unavailable), and gpus:
// [{index, name, pci_bus_id, compute_capability, memory_bytes}] (plus gpus_reason when empty).
nlohmann::json gpu_environment_json();

}  // namespace cclbench
