#include "bench/session/backend_choice.hpp"

#include <cstdlib>
#include <iostream>
#include <optional>

#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/mpi/mpi_backend.hpp"
#if defined(CCLBENCH_WITH_NCCL)
#include "bench/nccl/nccl_backend.hpp"
#endif

namespace cclbench {
namespace {

constexpr bool kBuiltWithNccl =
#if defined(CCLBENCH_WITH_NCCL)
    true;
#else
    false;
#endif

int count_visible_gpus(std::string* reason) {
#if defined(CCLBENCH_WITH_NCCL)
  const int count = visible_gpu_count(reason);
  if (count == 0 && reason) *reason = no_visible_gpu_reason(std::getenv("CUDA_VISIBLE_DEVICES"), *reason);
  return count;
#else
  (void)reason;
  return 0;
#endif
}

void refuse_unfit_backend(const Config& config, const BackendChoice& choice) {
  if (choice.kind == BackendKind::mpi) {
    if (const auto refusal = mpi_backend_refusal(config)) {
      throw UsageError(*refusal + " (" + (choice.note.empty() ? "--backend mpi" : choice.note) + ")");
    }
  }
  if (!config.tuning_probe_path.empty() && choice.kind != BackendKind::nccl) {
    throw UsageError("--tuning-probe needs the NCCL backend (" +
                     (choice.note.empty() ? std::string("--backend mpi") : choice.note) + ")");
  }
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const Config& config, const MpiContext& context,
                                      const std::vector<CaseSpec>& cases, const std::optional<FaultInjection>& injection,
                                      const std::optional<SlowdownInjection>& slowdown) {
#if defined(CCLBENCH_WITH_NCCL)
  if (kind == BackendKind::nccl) return make_nccl_backend(config, context, injection, slowdown);
#else
  (void)config;
  (void)kind;
  (void)slowdown;
#endif
  return make_mpi_backend(context, cases, injection);
}

}  // namespace

std::string no_visible_gpu_reason(const char* cuda_visible_devices, const std::string& count_error) {
  std::string reason = "CUDA sees no device";
  if (cuda_visible_devices != nullptr && *cuda_visible_devices == '\0') return reason + ": CUDA_VISIBLE_DEVICES is empty";
  if (cuda_visible_devices != nullptr) reason += ": CUDA_VISIBLE_DEVICES=" + std::string(cuda_visible_devices);
  return count_error.empty() ? reason : reason + " (" + count_error + ")";
}

BackendChoice resolve_backend(BackendKind requested, bool built_with_nccl,
                              const std::function<int(std::string* reason)>& count_visible_gpus) {
  if (requested == BackendKind::nccl && !built_with_nccl) {
    throw UsageError("--backend nccl: this build has no CUDA/NCCL support (rebuild with the CUDA toolkit and NCCL)");
  }
  if (requested == BackendKind::mpi) return {requested, ""};
  if (!built_with_nccl) return {BackendKind::mpi, "built without CUDA/NCCL: running the MPI backend on host memory"};
  std::string reason;
  if (count_visible_gpus(&reason) > 0) return {BackendKind::nccl, ""};
  if (requested == BackendKind::nccl) {
    // Asked for by name (a plan that expects a GPU): never a quiet fallback, and nothing is measured.
    throw FatalError(ExitCode::nothing_measured, "--backend nccl: " + reason);
  }
  return {BackendKind::mpi, "no GPU visible (" + reason + "): running the MPI backend on host memory"};
}

BackendChoice choose_backend(const Config& config) {
  const BackendChoice choice = resolve_backend(config.backend, kBuiltWithNccl, count_visible_gpus);
  refuse_unfit_backend(config, choice);
  return choice;
}

NcclLogCapture plan_nccl_log_capture(const BackendChoice& choice, const Config& config, const MpiContext& context,
                                     const std::string& program) {
  if (choice.kind != BackendKind::nccl) return {};
  const NcclLogPurpose purpose = config.tuning_probe_path.empty() ? NcclLogPurpose::timed : NcclLogPurpose::probe;
  return setup_log_capture(config, context, purpose, program);
}

std::unique_ptr<Backend> open_backend(const BackendChoice& choice, const Config& config, const MpiContext& context,
                                      const std::vector<CaseSpec>& cases, const std::string& program) {
  // Test hook: read once, checked against this launch, announced in one line.
  const std::optional<FaultInjection> injection = fault_injection_from_environment();
  if (injection) {
    check_fault_injection_target(*injection, context.job_size, choice.kind == BackendKind::nccl ? config.gpus_per_process : 1);
    if (context.world_rank == 0) std::cerr << program << ": " << fault_injection_warning(*injection) << "\n";
  }
  // The slowdown test knob: refused outside tests (slowdown_injection_from_environment throws), and
  // only where there is GPU work to slow.
  const std::optional<SlowdownInjection> slowdown = slowdown_injection_from_environment();
  if (slowdown) {
    if (choice.kind != BackendKind::nccl) {
      throw UsageError(std::string(kSlowdownVariable) + " slows GPU work: it needs the NCCL backend (" +
                       (choice.note.empty() ? std::string("--backend mpi") : choice.note) + ")");
    }
    if (context.world_rank == 0) std::cerr << slowdown_injection_warning(*slowdown, program) << "\n";
  }
  return make_backend(choice.kind, config, context, cases, injection, slowdown);
}

void announce_backend(const BackendChoice& choice, const Backend& backend, const MpiContext& context,
                      const std::string& program) {
  if (context.world_rank != 0) return;
  if (!choice.note.empty()) std::cerr << program << ": note: " << choice.note << "\n";
  if (backend.emulated()) {
    std::cerr << program << ": note: " << backend.nranks()
              << " ranks share GPUs (--share-gpu): results check correctness only, timings are not performance figures\n";
  }
}

}  // namespace cclbench
