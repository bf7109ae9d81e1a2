#include "bench/nccl/group_launch.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "bench/core/element_codec.hpp"
#include "bench/core/pattern.hpp"

namespace cclbench {

ncclDataType_t nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::int8: return ncclInt8;
    case DataType::uint8: return ncclUint8;
    case DataType::int32: return ncclInt32;
    case DataType::uint32: return ncclUint32;
    case DataType::int64: return ncclInt64;
    case DataType::uint64: return ncclUint64;
    case DataType::float16: return ncclFloat16;
    case DataType::float32: return ncclFloat32;
    case DataType::float64: return ncclFloat64;
    case DataType::bfloat16: return ncclBfloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case DataType::fp8_e4m3: return ncclFloat8e4m3;
    case DataType::fp8_e5m2: return ncclFloat8e5m2;
#else
    case DataType::fp8_e4m3:
    case DataType::fp8_e5m2: break;  // refused by the backend's unsupported_reason
#endif
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::mulsum:  // created per launch by PremulSumOp
    case ReduceOp::none: break;
  }
  return ncclSum;
}

NcclCalls real_nccl_calls(bool native_alltoall) {
  NcclCalls calls{};
  calls.group_start = ncclGroupStart;
  calls.group_end = ncclGroupEnd;
  calls.all_reduce = ncclAllReduce;
  calls.all_gather = ncclAllGather;
  calls.reduce_scatter = ncclReduceScatter;
  calls.broadcast = ncclBroadcast;
  calls.reduce = ncclReduce;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (native_alltoall) calls.alltoall = ncclAlltoAll;
#else
  (void)native_alltoall;
#endif
  calls.send = ncclSend;
  calls.recv = ncclRecv;
  calls.red_op_create_premulsum = ncclRedOpCreatePreMulSum;
  calls.red_op_destroy = ncclRedOpDestroy;
  return calls;
}

PremulSumOp::PremulSumOp(const NcclCalls& calls, DataType dtype, int rank, ncclComm_t comm) : calls_(calls), comm_(comm) {
  std::uint64_t scalar = 0;  // large enough for any element type, little-endian start
  encode_small_integer(dtype, premul_scalar(rank), &scalar);
  result_ = calls_.red_op_create_premulsum(&op_, &scalar, nccl_type(dtype), ncclScalarHostImmediate, comm);
  created_ = result_ == ncclSuccess;
}

PremulSumOp::~PremulSumOp() {
  if (created_) calls_.red_op_destroy(op_, comm_);
}

CasePointers case_pointers(const CaseSpec& spec, const void* send_base, void* recv_base, int rank, std::uint64_t shift_bytes,
                           int unalign_elements) {
  const std::uint64_t element = spec.counts.element_size;
  // -u: nccl-tests shifts both buffers by unalign elements of the case's type.
  shift_bytes += static_cast<std::uint64_t>(unalign_elements) * element;
  if (spec.in_place) {
    auto* base = static_cast<char*>(recv_base) + shift_bytes;
    const auto r = static_cast<std::uint64_t>(rank);
    return {base + spec.counts.send_inplace_offset * r * element, base + spec.counts.recv_inplace_offset * r * element};
  }
  return {static_cast<const char*>(send_base) + shift_bytes, static_cast<char*>(recv_base) + shift_bytes};
}

GroupLauncher::GroupLauncher(const NcclCalls& calls, std::vector<LaunchTarget> targets, int nranks, std::uint64_t buffer_bytes,
                             int unalign_elements)
    : calls_(calls), targets_(std::move(targets)), nranks_(nranks), buffer_bytes_(buffer_bytes), unalign_elements_(unalign_elements) {}

bool GroupLauncher::prepared_for(const CaseSpec& spec) const {
  if (!prepared_) return false;
  const CaseSpec& known = prepared_->spec;
  const ByteCounts& a = known.counts;
  const ByteCounts& b = spec.counts;
  return known.collective == spec.collective && known.dtype == spec.dtype && known.op == spec.op && known.root == spec.root &&
         known.in_place == spec.in_place && a.send_count == b.send_count && a.recv_count == b.recv_count &&
         a.param_count == b.param_count && a.send_inplace_offset == b.send_inplace_offset &&
         a.recv_inplace_offset == b.recv_inplace_offset && a.element_size == b.element_size;
}

void GroupLauncher::prepare(const CaseSpec& spec) {
  Prepared prepared;
  prepared.spec = spec;
  prepared.type = nccl_type(spec.dtype);
  prepared.op = nccl_op(spec.op);
  prepared.premul = spec.op == ReduceOp::mulsum && descriptor_of(spec.collective).reduces;
  prepared.slot_bytes = spec.counts.size_bytes();
  prepared.slots = prepared.slot_bytes == 0 ? 1 : std::max<std::uint64_t>(1, buffer_bytes_ / prepared.slot_bytes);
  for (const LaunchTarget& target : targets_) {
    prepared.base.push_back(case_pointers(spec, target.send_base, target.recv_base, target.rank, 0, unalign_elements_));
  }
  prepared_ = std::move(prepared);
}

LaunchResult GroupLauncher::launch_one(std::size_t index, std::uint64_t shift) {
  const Prepared& prepared = *prepared_;
  const CaseSpec& spec = prepared.spec;
  const LaunchTarget& target = targets_[index];
  const ncclComm_t comm = target.comm;
  const cudaStream_t stream = target.stream;
  const void* send = static_cast<const char*>(prepared.base[index].send) + shift;
  void* recv = static_cast<char*>(prepared.base[index].recv) + shift;
  const ncclDataType_t type = prepared.type;
  const std::uint64_t count = spec.counts.param_count;
  // mulsum: created for this call and destroyed after it is enqueued, as nccl-tests does.
  std::optional<PremulSumOp> premul;
  ncclRedOp_t op = prepared.op;
  if (prepared.premul) {
    premul.emplace(calls_, spec.dtype, target.rank, comm);
    if (premul->result() != ncclSuccess) return {premul->result(), "ncclRedOpCreatePreMulSum", index};
    op = premul->op();
  }
  switch (spec.collective) {
    case Collective::all_reduce:
      return {calls_.all_reduce(send, recv, count, type, op, comm, stream), "ncclAllReduce", index};
    case Collective::all_gather:
      return {calls_.all_gather(send, recv, count, type, comm, stream), "ncclAllGather", index};
    case Collective::reduce_scatter:
      return {calls_.reduce_scatter(send, recv, count, type, op, comm, stream), "ncclReduceScatter", index};
    case Collective::broadcast:
      return {calls_.broadcast(send, recv, count, type, spec.root, comm, stream), "ncclBroadcast", index};
    case Collective::reduce:
      return {calls_.reduce(send, recv, count, type, op, spec.root, comm, stream), "ncclReduce", index};
    case Collective::alltoall: {
      // NCCL 2.28 has a native AlltoAll (what nccl-tests 2.19 calls there); older libraries, and
      // this build run against one, get the grouped ncclSend/ncclRecv form.
      if (calls_.alltoall != nullptr) return {calls_.alltoall(send, recv, count, type, comm, stream), "ncclAlltoAll", index};
      const std::uint64_t block_bytes = count * spec.counts.element_size;
      ncclResult_t result = calls_.group_start();
      for (int peer = 0; peer < nranks_ && result == ncclSuccess; ++peer) {
        const std::uint64_t offset = static_cast<std::uint64_t>(peer) * block_bytes;
        result = calls_.send(static_cast<const char*>(send) + offset, count, type, peer, comm, stream);
        if (result == ncclSuccess) result = calls_.recv(static_cast<char*>(recv) + offset, count, type, peer, comm, stream);
      }
      const ncclResult_t end = calls_.group_end();
      return {result != ncclSuccess ? result : end, "ncclSend/ncclRecv (alltoall)", index};
    }
    case Collective::sendrecv: {
      ncclResult_t result = calls_.group_start();
      if (result == ncclSuccess) result = calls_.send(send, count, type, (target.rank + 1) % nranks_, comm, stream);
      if (result == ncclSuccess) result = calls_.recv(recv, count, type, (target.rank - 1 + nranks_) % nranks_, comm, stream);
      const ncclResult_t end = calls_.group_end();
      return {result != ncclSuccess ? result : end, "ncclSend/ncclRecv (sendrecv)", index};
    }
  }
  return {ncclInvalidArgument, "unknown collective", index};
}

LaunchResult GroupLauncher::launch(const CaseSpec& spec, int iteration, int ops) {
  if (!prepared_for(spec)) prepare(spec);
  const Prepared& prepared = *prepared_;
  const bool grouped = targets_.size() > 1 || ops > 1;
  LaunchResult result;
  if (grouped) {
    result.result = calls_.group_start();
    result.call = "ncclGroupStart";
  }
  for (int op_index = 0; op_index < ops && result.result == ncclSuccess; ++op_index) {
    const auto slot = static_cast<std::uint64_t>(iteration * ops + op_index);
    const std::uint64_t shift = prepared.slot_bytes * (slot % prepared.slots);
    for (std::size_t i = 0; i < targets_.size() && result.result == ncclSuccess; ++i) result = launch_one(i, shift);
  }
  if (grouped) {
    const ncclResult_t end = calls_.group_end();
    if (result.result == ncclSuccess && end != ncclSuccess) result = {end, "ncclGroupEnd", 0};
  }
  return result;
}

}  // namespace cclbench
