// The NCCL backend's data checks: fill (pattern and poison), the checked run, the fault-injection
// test hook and the device-side count of wrong elements against the host reference's pattern.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/element_codec.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/pattern.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/nccl_backend_internal.hpp"
#include "kernels/pattern_kernels.hpp"

namespace cclbench::nccl_detail {
namespace {

// The op the pattern is built for: data-movement collectives carry no op.
ReduceOp pattern_op(const CaseSpec& spec) {
  return descriptor_of(spec.collective).reduces ? spec.op : ReduceOp::none;
}

CompareMode compare_mode(const CaseSpec& spec) {
  return verification_mode(spec) == "tolerance" ? CompareMode::tolerance : CompareMode::exact;
}

}  // namespace

void NcclBackend::fill(const CaseSpec& spec, std::uint32_t rep) {
  const PatternParams params = make_pattern(spec.dtype, pattern_op(spec), nranks_, rep);
  const CompareMode mode = compare_mode(spec);
  for (const LocalGpu& gpu : gpus_) {
    DeviceScope scope(gpu.device);
    const Pointers p = pointers(spec, gpu, 0);
    const RecvLayout layout{spec.collective, gpu.rank, spec.root, spec.counts.param_count};
    cuda_or_fail(launch_pattern_poison(p.recv, spec.counts.recv_count, params, layout, mode, gpu.stream.get()),
                 "poison kernel", spec, "fill");
    // In place, the send region lies inside the receive buffer: written after the poison.
    cuda_or_fail(launch_pattern_fill(const_cast<void*>(p.send), spec.counts.send_count, params, gpu.rank, 0, gpu.stream.get()),
                 "fill kernel", spec, "fill");
  }
  wait_for_completion(spec, "fill");
}

void NcclBackend::run_once(const CaseSpec& spec) {
  // Iteration 0, one collective: no rotation, the data fill() wrote. With -G the checked
  // collective runs from a captured graph too, as in nccl-tests.
  if (config_.graph_launches > 0) {
    const std::vector<Graph> graphs = capture(spec, 1, 1, false);
    replay(graphs, 1, spec, "checked run");
  } else {
    launch(spec, 0, 1);
  }
  wait_for_completion(spec, "checked run");
}

// Test hook (CCLBENCH_INJECT_WRONG): flips the chosen elements of the chosen GPU's receive region,
// the one count_wrong() compares next. Each element is read back, flipped on the host and written
// again in the GPU's stream, so the verify kernel queued after it sees the flip.
void NcclBackend::inject_faults(const CaseSpec& spec) {
  if (!injection_) return;
  const std::size_t element = spec.counts.element_size;
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const LocalGpu& gpu = gpus_[i];
    if (!fault_applies(*injection_, spec, mpi_.job_rank, static_cast<int>(i))) continue;
    const std::vector<std::uint64_t> indices = fault_indices(*injection_, spec, gpu.rank);
    if (indices.empty()) continue;
    DeviceScope scope(gpu.device);
    auto* recv = static_cast<unsigned char*>(pointers(spec, gpu, 0).recv);
    std::vector<unsigned char> bytes(indices.size() * element);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      cuda_or_fail(cudaMemcpyAsync(bytes.data() + k * element, recv + indices[k] * element, element, cudaMemcpyDeviceToHost,
                                   gpu.stream.get()),
                   "cudaMemcpyAsync(fault injection read)", spec, "verify");
    }
    cuda_or_fail(cudaStreamSynchronize(gpu.stream.get()), "cudaStreamSynchronize(fault injection)", spec, "verify");
    for (std::size_t k = 0; k < indices.size(); ++k) {
      flip_element(bytes.data() + k * element, element);
      cuda_or_fail(cudaMemcpyAsync(recv + indices[k] * element, bytes.data() + k * element, element, cudaMemcpyHostToDevice,
                                   gpu.stream.get()),
                   "cudaMemcpyAsync(fault injection write)", spec, "verify");
    }
    // `bytes` is pageable and goes out of scope here: wait until the writes have left it.
    cuda_or_fail(cudaStreamSynchronize(gpu.stream.get()), "cudaStreamSynchronize(fault injection)", spec, "verify");
  }
}

std::int64_t NcclBackend::count_wrong(const CaseSpec& spec, std::uint32_t rep) {
  inject_faults(spec);
  const PatternParams params = make_pattern(spec.dtype, pattern_op(spec), nranks_, rep);
  const CompareMode mode = compare_mode(spec);
  const double tolerance = mode == CompareMode::tolerance ? avg_relative_tolerance(spec.dtype, nranks_) : 0.0;
  auto* host_counts = static_cast<unsigned long long*>(wrong_host_.get());
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const LocalGpu& gpu = gpus_[i];
    DeviceScope scope(gpu.device);
    const Pointers p = pointers(spec, gpu, 0);
    const RecvLayout layout{spec.collective, gpu.rank, spec.root, spec.counts.param_count};
    auto* counter = static_cast<unsigned long long*>(gpu.scratch.get());
    cuda_or_fail(cudaMemsetAsync(counter, 0, sizeof *counter, gpu.stream.get()), "cudaMemsetAsync", spec, "verify");
    cuda_or_fail(launch_pattern_verify(p.recv, spec.counts.recv_count, params, layout, mode, tolerance, counter, gpu.stream.get()),
                 "verify kernel", spec, "verify");
    cuda_or_fail(cudaMemcpyAsync(&host_counts[i], counter, sizeof *counter, cudaMemcpyDeviceToHost, gpu.stream.get()),
                 "cudaMemcpyAsync", spec, "verify");
  }
  wait_for_completion(spec, "verify");
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < gpus_.size(); ++i) wrong += static_cast<std::int64_t>(host_counts[i]);
  return wrong;
}


}  // namespace cclbench::nccl_detail

namespace cclbench {

std::string_view verification_mode(const CaseSpec& spec) {
  const bool reduces = descriptor_of(spec.collective).reduces;
  return reduces && spec.op == ReduceOp::avg && is_floating(spec.dtype) ? "tolerance" : "exact";
}

}  // namespace cclbench
