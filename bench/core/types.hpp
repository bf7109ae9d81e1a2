#pragma once
// The vocabulary of a benchmark case: collective, data type, reduction op. Names follow nccl-tests
// (dtype "float", "half", "bfloat16"...; ops "sum", "prod", "max", "min", "avg", "mulsum") so users' flags and
// column values carry over unchanged.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cclbench {

enum class Collective { all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv };
enum class DataType { int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16, fp8_e4m3, fp8_e5m2 };
// mulsum: nccl-tests' PreMulSum (ncclRedOpCreatePreMulSum): each rank multiplies its input by its
// own scalar, premul_scalar(rank), then the products are summed.
enum class ReduceOp { sum, prod, max, min, avg, mulsum, none };

// Every value, in a fixed order (used for "all" and for help text).
const std::vector<Collective>& all_collectives();
const std::vector<DataType>& all_data_types();
const std::vector<ReduceOp>& all_reduce_ops();  // excludes none

std::string_view name_of(Collective collective);  // "all_reduce"
std::string_view name_of(DataType dtype);         // "float" (nccl-tests spelling)
std::string_view name_of(ReduceOp op);            // "sum"; none -> "none"

// Parsers accept the canonical names and common aliases (allreduce, all-reduce, fp32, float32, f32,
// fp16, bf16, fp8e4m3...). They return nullopt for anything else.
std::optional<Collective> parse_collective(std::string_view text);
std::optional<DataType> parse_data_type(std::string_view text);
std::optional<ReduceOp> parse_reduce_op(std::string_view text);

std::size_t size_of(DataType dtype);
bool is_floating(DataType dtype);
// Largest integer N such that every integer 0..N is exactly representable in dtype.
std::uint64_t max_exact_integer(DataType dtype);

}  // namespace cclbench
