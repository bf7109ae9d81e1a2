#pragma once
// One iteration of the NCCL backend's launch loop: the collectives of every local GPU inside one
// ncclGroupStart/End (nccl-tests' startColl). It lives apart from the backend, behind a table of
// NCCL entry points, so that bench/micro drives this very loop with a no-op NCCL layer on a
// machine without a GPU and watches its host cost per GPU; the backend gives it NCCL's own calls.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "bench/collectives/collective.hpp"
#include "bench/core/case.hpp"
#include "bench/core/types.hpp"

namespace cclbench {

ncclDataType_t nccl_type(DataType dtype);
// The built-in op; mulsum (created per launch, see PremulSumOp) and none give ncclSum.
ncclRedOp_t nccl_op(ReduceOp op);

// The NCCL calls the launch loop makes, as plain function pointers (NCCL's own signatures).
struct NcclCalls {
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  // nullptr where there is no native AlltoAll (NCCL < 2.28 at build or at run time): the loop
  // then issues nranks ncclSend/ncclRecv pairs in a nested group, as nccl-tests does there.
  ncclResult_t (*alltoall)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*red_op_create_premulsum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*red_op_destroy)(ncclRedOp_t, ncclComm_t);
};

// NCCL's own entry points; `native_alltoall` = ncclAlltoAll exists in the loaded library.
NcclCalls real_nccl_calls(bool native_alltoall);

// nccl-tests' PreMulSum: an op created for one communicator with this rank's scalar
// (premul_scalar, as the host reference uses), encoded in the data type, passed by value
// (ncclScalarHostImmediate, so it is baked into the launch and may be destroyed right after it,
// also under graph capture, as nccl-tests does).
class PremulSumOp {
 public:
  PremulSumOp(const NcclCalls& calls, DataType dtype, int rank, ncclComm_t comm);
  ~PremulSumOp();
  PremulSumOp(const PremulSumOp&) = delete;
  PremulSumOp& operator=(const PremulSumOp&) = delete;
  ncclResult_t result() const { return result_; }
  ncclRedOp_t op() const { return op_; }

 private:
  const NcclCalls& calls_;
  ncclComm_t comm_;
  ncclRedOp_t op_ = ncclSum;
  ncclResult_t result_ = ncclSuccess;
  bool created_ = false;
};

// The send and receive pointers of a case on one GPU: in place, the send block lies inside the
// receive buffer at nccl-tests' offset * rank; -u shifts both by `unalign_elements` elements.
struct CasePointers {
  const void* send;
  void* recv;
};
CasePointers case_pointers(const CaseSpec& spec, const void* send_base, void* recv_base, int rank, std::uint64_t shift_bytes,
                           int unalign_elements);

// What one local GPU launches on.
struct LaunchTarget {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  const void* send_base = nullptr;
  void* recv_base = nullptr;
  int rank = 0;  // global rank in the communicator
};

// The first failing call of an iteration (result == ncclSuccess when none failed).
struct LaunchResult {
  ncclResult_t result = ncclSuccess;
  const char* call = "";
  std::size_t target = 0;  // index of the GPU whose call failed
};

class GroupLauncher {
 public:
  GroupLauncher() = default;
  // `buffer_bytes`: usable bytes per send and receive buffer (the rotation wraps within them).
  GroupLauncher(const NcclCalls& calls, std::vector<LaunchTarget> targets, int nranks, std::uint64_t buffer_bytes,
                int unalign_elements);

  // One iteration: `ops` collectives (-m) on every target, all inside one group (required when
  // one thread drives several communicators, or NCCL would wait for the first before launching
  // the next); each op on its own rotation slot, nccl-tests' iter * agg_iters + aiter. The first
  // launch of a case works out what does not change between its launches (see Prepared).
  LaunchResult launch(const CaseSpec& spec, int iteration, int ops);

  const std::vector<LaunchTarget>& targets() const { return targets_; }

 private:
  // The parts of a launch that depend only on the case, computed once per case instead of once
  // per GPU and call: NCCL type and op, rotation slots, each GPU's slot-0 pointers.
  struct Prepared {
    CaseSpec spec;  // the case these were computed for (compared field by field, no strings)
    ncclDataType_t type = ncclFloat32;
    ncclRedOp_t op = ncclSum;
    bool premul = false;  // mulsum: an op per GPU and call (PremulSumOp)
    // nccl-tests' rotation: consecutive iterations use successive message-sized slots of the
    // buffers, so no iteration finds its data in cache from the previous one.
    std::uint64_t slot_bytes = 0;
    std::uint64_t slots = 1;
    std::vector<CasePointers> base;  // per target
  };
  bool prepared_for(const CaseSpec& spec) const;
  void prepare(const CaseSpec& spec);
  LaunchResult launch_one(std::size_t index, std::uint64_t shift);

  NcclCalls calls_{};
  std::optional<Prepared> prepared_;
  std::vector<LaunchTarget> targets_;
  int nranks_ = 0;
  std::uint64_t buffer_bytes_ = 0;
  int unalign_elements_ = 0;
};

}  // namespace cclbench
