#include "bench/mpi/mpi_backend.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "bench/collectives/collective.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/pattern.hpp"

namespace cclbench {
namespace {

std::optional<MPI_Datatype> mpi_type_of(DataType dtype) {
  switch (dtype) {
    case DataType::int8: return MPI_INT8_T;
    case DataType::uint8: return MPI_UINT8_T;
    case DataType::int32: return MPI_INT32_T;
    case DataType::uint32: return MPI_UINT32_T;
    case DataType::int64: return MPI_INT64_T;
    case DataType::uint64: return MPI_UINT64_T;
    case DataType::float32: return MPI_FLOAT;
    case DataType::float64: return MPI_DOUBLE;
    default: return std::nullopt;  // MPI has no half, bfloat16 or fp8 types
  }
}

std::optional<MPI_Op> mpi_op_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::prod: return MPI_PROD;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    default: return std::nullopt;  // MPI has no average
  }
}

// Host encoding of the pattern's small non-negative integers (exact in every MPI type we use).
void store(DataType dtype, std::uint64_t value, void* out) {
  switch (dtype) {
    case DataType::int8: *static_cast<std::int8_t*>(out) = static_cast<std::int8_t>(value); break;
    case DataType::uint8: *static_cast<std::uint8_t*>(out) = static_cast<std::uint8_t>(value); break;
    case DataType::int32: *static_cast<std::int32_t*>(out) = static_cast<std::int32_t>(value); break;
    case DataType::uint32: *static_cast<std::uint32_t*>(out) = static_cast<std::uint32_t>(value); break;
    case DataType::int64: *static_cast<std::int64_t*>(out) = static_cast<std::int64_t>(value); break;
    case DataType::uint64: *static_cast<std::uint64_t*>(out) = value; break;
    case DataType::float32: *static_cast<float*>(out) = static_cast<float>(value); break;
    case DataType::float64: *static_cast<double*>(out) = static_cast<double>(value); break;
    default: break;
  }
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(const MpiContext& context, std::uint64_t capacity_bytes, std::optional<FaultInjection> injection)
      : context_(context),
        capacity_(std::max<std::uint64_t>(capacity_bytes, 64)),
        send_(capacity_),
        recv_(capacity_),
        injection_(std::move(injection)) {}

  std::string name() const override { return "mpi"; }
  int nranks() const override { return context_.world_size; }

  std::optional<std::string> unsupported_reason(const CaseSpec& spec) const override {
    if (!mpi_type_of(spec.dtype)) return "MPI has no " + std::string(name_of(spec.dtype)) + " type";
    if (descriptor_of(spec.collective).reduces && !mpi_op_of(spec.op)) {
      return "MPI has no " + std::string(name_of(spec.op)) + " reduction";
    }
    if (spec.collective == Collective::broadcast && !spec.in_place) return "MPI_Bcast has one buffer: in-place only";
    if (spec.collective == Collective::sendrecv && spec.in_place) return "sendrecv is out-of-place only";
    if (spec.root >= spec.nranks && descriptor_of(spec.collective).rooted) {
      return "root " + std::to_string(spec.root) + " is not a rank of " + std::to_string(spec.nranks);
    }
    if (spec.counts.size_bytes() > capacity_) return "buffers were sized for smaller cases";
    if (spec.counts.param_count > static_cast<std::uint64_t>(INT32_MAX) ||
        spec.counts.send_count > static_cast<std::uint64_t>(INT32_MAX)) {
      return "count exceeds MPI's int range";
    }
    return std::nullopt;
  }

  void fill(const CaseSpec& spec, std::uint32_t rep) override {
    const PatternParams pattern = make_pattern(spec.dtype, spec.op, spec.nranks, rep);
    const std::size_t element = spec.counts.element_size;
    std::fill(recv_.begin(), recv_.begin() + static_cast<std::ptrdiff_t>(spec.counts.size_bytes()), std::uint8_t{0xFF});
    std::uint8_t* input = send_pointer(spec, 0);
    for (std::uint64_t i = 0; i < spec.counts.send_count; ++i) {
      store(spec.dtype, pattern_value(pattern, context_.world_rank, send_index(spec, i)), input + i * element);
    }
  }

  void warm_up(const CaseSpec& spec, int iterations) override {
    for (int iteration = 0; iteration < iterations; ++iteration) launch(spec, rotation(spec, iteration));
  }

  TimedIterations run_timed(const CaseSpec& spec, int iterations) override {
    TimedIterations timed;
    timed.iteration_us.resize(iterations);
    const double batch_start = MPI_Wtime();
    for (int iteration = 0; iteration < iterations; ++iteration) {
      const std::uint64_t shift = rotation(spec, iteration);
      const double start = MPI_Wtime();
      launch(spec, shift);
      timed.iteration_us[iteration] = (MPI_Wtime() - start) * 1e6;
    }
    timed.batch_us = (MPI_Wtime() - batch_start) * 1e6 / iterations;
    timed.samples_from = "host_clock";
    return timed;
  }

  void run_once(const CaseSpec& spec) override { launch(spec, 0); }

  std::int64_t count_wrong(const CaseSpec& spec, std::uint32_t rep) override {
    const PatternParams pattern = make_pattern(spec.dtype, spec.op, spec.nranks, rep);
    const std::size_t element = spec.counts.element_size;
    inject_faults(spec);
    const std::uint8_t* output = result_pointer(spec);
    std::int64_t wrong = 0;
    std::uint8_t expected_bytes[8];
    for (std::uint64_t i = 0; i < spec.counts.recv_count; ++i) {
      std::uint64_t expected = 0;
      if (!pattern_expected(pattern, spec.collective, context_.world_rank, spec.root, spec.counts.param_count, i, &expected)) {
        continue;
      }
      store(spec.dtype, expected, expected_bytes);
      if (std::memcmp(expected_bytes, output + i * element, element) != 0) ++wrong;
    }
    return wrong;
  }

 private:
  // nccl-tests rotates buffer offsets between iterations to avoid measuring a warm cache.
  std::uint64_t rotation(const CaseSpec& spec, int iteration) const {
    const std::uint64_t size = spec.counts.size_bytes();
    const std::uint64_t steps = size ? std::max<std::uint64_t>(capacity_ / size, 1) : 1;
    return size * (static_cast<std::uint64_t>(iteration) % steps);
  }

  // The logical send index of local element i (the whole-buffer index the pattern is defined on).
  static std::uint64_t send_index(const CaseSpec&, std::uint64_t i) { return i; }

  std::uint8_t* send_pointer(const CaseSpec& spec, std::uint64_t shift) {
    if (!spec.in_place) return send_.data() + shift;
    return recv_.data() + shift + spec.counts.send_inplace_offset * spec.counts.element_size * context_.world_rank;
  }

  // Where the result lands. MPI_Reduce_scatter_block with MPI_IN_PLACE leaves it at the start of
  // the receive buffer (NCCL's in-place reduce-scatter writes it at rank * count).
  const std::uint8_t* result_pointer(const CaseSpec&) const { return recv_.data(); }
  std::uint8_t* result_pointer(const CaseSpec&) { return recv_.data(); }

  // Test hook (CCLBENCH_INJECT_WRONG): corrupts the received elements the comparison reads next.
  void inject_faults(const CaseSpec& spec) {
    if (!injection_ || !fault_applies(*injection_, spec, context_.job_rank, 0)) return;
    const std::size_t element = spec.counts.element_size;
    for (const std::uint64_t index : fault_indices(*injection_, spec, context_.world_rank)) {
      flip_element(result_pointer(spec) + index * element, element);
    }
  }

  void launch(const CaseSpec& spec, std::uint64_t shift) {
    const MPI_Datatype type = *mpi_type_of(spec.dtype);
    const int count = static_cast<int>(spec.counts.param_count);
    std::uint8_t* recv = recv_.data() + shift;
    const bool in_place = spec.in_place;
    switch (spec.collective) {
      case Collective::all_reduce:
        check(MPI_Allreduce(in_place ? MPI_IN_PLACE : send_.data() + shift, recv, count, type, *mpi_op_of(spec.op), context_.world),
              "MPI_Allreduce");
        break;
      case Collective::all_gather:
        check(MPI_Allgather(in_place ? MPI_IN_PLACE : send_.data() + shift, count, type, recv, count, type, context_.world),
              "MPI_Allgather");
        break;
      case Collective::reduce_scatter:
        check(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send_.data() + shift, recv, count, type, *mpi_op_of(spec.op),
                                       context_.world),
              "MPI_Reduce_scatter_block");
        break;
      case Collective::alltoall:
        check(MPI_Alltoall(in_place ? MPI_IN_PLACE : send_.data() + shift, count, type, recv, count, type, context_.world),
              "MPI_Alltoall");
        break;
      case Collective::broadcast:
        check(MPI_Bcast(recv, count, type, spec.root, context_.world), "MPI_Bcast");
        break;
      case Collective::reduce: {
        const void* input = in_place && context_.world_rank == spec.root ? MPI_IN_PLACE
                            : in_place                                  ? static_cast<const void*>(recv)
                                                                        : send_.data() + shift;
        check(MPI_Reduce(input, recv, count, type, *mpi_op_of(spec.op), spec.root, context_.world), "MPI_Reduce");
        break;
      }
      case Collective::sendrecv: {
        const int next = (context_.world_rank + 1) % context_.world_size;
        const int previous = (context_.world_rank - 1 + context_.world_size) % context_.world_size;
        check(MPI_Sendrecv(send_.data() + shift, count, type, next, 0, recv, count, type, previous, 0, context_.world,
                           MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
        break;
      }
    }
  }

  void check(int result, const char* call) const { mpi_check(result, call, context_); }

  const MpiContext& context_;
  std::uint64_t capacity_;
  std::vector<std::uint8_t> send_;
  std::vector<std::uint8_t> recv_;
  std::optional<FaultInjection> injection_;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const MpiContext& context, const std::vector<CaseSpec>& cases,
                                          std::optional<FaultInjection> injection) {
  std::uint64_t capacity = 0;
  for (const CaseSpec& spec : cases) capacity = std::max(capacity, spec.counts.size_bytes());
  return std::make_unique<MpiBackend>(context, capacity, std::move(injection));
}

}  // namespace cclbench
