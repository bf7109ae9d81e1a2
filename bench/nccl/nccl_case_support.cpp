// Which cases the NCCL backend can run here, and with which reason it skips the others; the
// measurement mode its records carry.
#include <nccl.h>

#include <algorithm>
#include <optional>
#include <string>

#include "bench/collectives/collective.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/nccl/group_launch.hpp"
#include "bench/nccl/nccl_backend_internal.hpp"

namespace cclbench::nccl_detail {
namespace {

bool is_fp8(DataType dtype) { return dtype == DataType::fp8_e4m3 || dtype == DataType::fp8_e5m2; }

}  // namespace

MeasurementMode NcclBackend::measurement_mode() const {
  MeasurementMode mode;
  mode.graph_launches = config_.graph_launches;
  mode.ops_per_launch = config_.ops_per_launch;
  mode.registration = std::string(name_of(config_.registration));
  mode.unalign_elements = config_.unalign_elements;
  if (config_.cta_policy >= 0) mode.cta_policy = config_.cta_policy;
  return mode;
}

std::optional<std::string> NcclBackend::unsupported_reason(const CaseSpec& spec) const {
  const CollectiveDescriptor& descriptor = descriptor_of(spec.collective);
  if (spec.nranks != nranks_) {
    return "case is for " + std::to_string(spec.nranks) + " ranks, the NCCL communicator has " + std::to_string(nranks_);
  }
  if (is_fp8(spec.dtype) && (NCCL_VERSION_CODE < NCCL_VERSION(2, 24, 0) || nccl_runtime_version_ < NCCL_VERSION(2, 24, 0))) {
    return std::string(name_of(spec.dtype)) + " needs NCCL 2.24 or newer (built with " + std::to_string(NCCL_VERSION_CODE) +
           ", running " + std::to_string(nccl_runtime_version_) + ")";
  }
  if (is_fp8(spec.dtype) && min_compute_capability_ < 90) {
    return std::string(name_of(spec.dtype)) + " needs compute capability 9.0 or newer on every GPU (lowest here: " +
           std::to_string(min_compute_capability_ / 10) + "." + std::to_string(min_compute_capability_ % 10) + ")";
  }
  if (is_fp8(spec.dtype) && spec.op == ReduceOp::avg) {
    // Seen on NCCL 2.28.3 / H200: ncclAllReduce(..., ncclFloat8e4m3, ncclAvg) returns ncclInvalidArgument.
    return std::string(name_of(spec.dtype)) + " with avg: NCCL rejects ncclAvg on fp8 types (ncclInvalidArgument)";
  }
  if (is_fp8(spec.dtype) && spec.op == ReduceOp::mulsum) {
    // Seen on NCCL 2.28.3 / H200: ncclRedOpCreatePreMulSum succeeds for fp8, but the launch with that
    // op returns ncclInvalidArgument (as for ncclAvg, which NCCL runs as a premultiplied sum).
    return std::string(name_of(spec.dtype)) + " with mulsum: NCCL rejects PreMulSum on fp8 types at launch (ncclInvalidArgument)";
  }
  if (descriptor.reduces && spec.op == ReduceOp::none) return std::string(descriptor.display_name) + " needs a reduction op";
  if (registration_failure_) return *registration_failure_;
  if (descriptor.reduces && spec.op == ReduceOp::mulsum) {
    // Asked of NCCL once per data type (a local call: every rank gets the same answer from the
    // same library), so a type NCCL cannot premultiply is a skip with its reason, not a failed launch.
    auto known = std::find_if(premulsum_support_.begin(), premulsum_support_.end(),
                              [&](const auto& entry) { return entry.first == spec.dtype; });
    if (known == premulsum_support_.end()) {
      std::optional<std::string> reason;
      auto& self = const_cast<NcclBackend&>(*this);  // the cache is mutable; the call needs a live communicator
      Communicators::Use use(self.comms_);
      if (!use.live() || gpus_.empty()) return std::nullopt;  // aborted: the launch reports it, nothing cached
      {
        DeviceScope scope(gpus_.front().device);
        const NcclCalls calls = real_nccl_calls(native_alltoall_);
        const PremulSumOp probe(calls, spec.dtype, gpus_.front().rank, self.comms_.handles().front());
        if (probe.result() != ncclSuccess) {
          const char* last = ncclGetLastError(self.comms_.handles().front());
          reason = std::string("mulsum on ") + std::string(name_of(spec.dtype)) + ": ncclRedOpCreatePreMulSum: " +
                   ncclGetErrorString(probe.result()) + (last && *last ? std::string(": ") + last : "");
        }
      }
      known = premulsum_support_.insert(premulsum_support_.end(), {spec.dtype, reason});
    }
    if (known->second) return known->second;
  }
  if (descriptor.rooted && (spec.root < 0 || spec.root >= nranks_)) {
    return "root " + std::to_string(spec.root) + " is not a rank of " + std::to_string(nranks_);
  }
  if (spec.in_place && nranks_ > 1 && config_.check_iterations > 0 &&
      (spec.collective == Collective::alltoall || spec.collective == Collective::sendrecv)) {
    // On one buffer, blocks are overwritten while they may still be sent (NCCL promises nothing
    // in place for ncclAlltoAll or grouped send/recv): nccl-tests runs it but cannot check it.
    return "in-place " + std::string(descriptor.display_name) +
           " overwrites data it still has to send (NCCL defines no in-place result), so it cannot be verified; run with -c 0 to time it";
  }
  if (spec.counts.size_bytes() > buffer_bytes_) {
    return "needs 2 x " + mib(spec.counts.size_bytes()) + " of device buffers per rank but only 2 x " + mib(buffer_bytes_) +
           " fit (smallest free device memory per rank after NCCL init: " + mib(min_free_bytes_) + ", " +
           mib(kNcclReserveBytes) + " kept for NCCL connections)";
  }
  return std::nullopt;
}

}  // namespace cclbench::nccl_detail
