#include "bench/core/types.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "bench/core/element_codec.hpp"

namespace cclbench {
namespace {

std::string normalized(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '-' || c == '_') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

template <typename Enum, std::size_t N>
std::optional<Enum> lookup(std::string_view text, const std::array<std::pair<const char*, Enum>, N>& table) {
  const std::string key = normalized(text);
  for (const auto& [alias, value] : table) {
    if (key == alias) return value;
  }
  return std::nullopt;
}

}  // namespace

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> values = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                                                 Collective::alltoall,   Collective::broadcast,  Collective::reduce,
                                                 Collective::sendrecv};
  return values;
}

const std::vector<DataType>& all_data_types() {
  static const std::vector<DataType> values = {DataType::int8,    DataType::uint8,    DataType::int32,    DataType::uint32,
                                               DataType::int64,   DataType::uint64,   DataType::float16,  DataType::float32,
                                               DataType::float64, DataType::bfloat16, DataType::fp8_e4m3, DataType::fp8_e5m2};
  return values;
}

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> values = {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg,
                                               ReduceOp::mulsum};
  return values;
}

std::string_view name_of(Collective collective) {
  switch (collective) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::alltoall: return "alltoall";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::sendrecv: return "sendrecv";
  }
  return "unknown";
}

std::string_view name_of(DataType dtype) {
  switch (dtype) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "half";
    case DataType::float32: return "float";
    case DataType::float64: return "double";
    case DataType::bfloat16: return "bfloat16";
    case DataType::fp8_e4m3: return "f8e4m3";
    case DataType::fp8_e5m2: return "f8e5m2";
  }
  return "unknown";
}

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::avg: return "avg";
    case ReduceOp::mulsum: return "mulsum";
    case ReduceOp::none: return "none";
  }
  return "unknown";
}

std::optional<Collective> parse_collective(std::string_view text) {
  static const std::array<std::pair<const char*, Collective>, 7> table = {{
      {"allreduce", Collective::all_reduce},
      {"allgather", Collective::all_gather},
      {"reducescatter", Collective::reduce_scatter},
      {"alltoall", Collective::alltoall},
      {"broadcast", Collective::broadcast},
      {"reduce", Collective::reduce},
      {"sendrecv", Collective::sendrecv},
  }};
  return lookup(text, table);
}

std::optional<DataType> parse_data_type(std::string_view text) {
  static const std::array<std::pair<const char*, DataType>, 28> table = {{
      {"int8", DataType::int8},          {"char", DataType::int8},          {"uint8", DataType::uint8},
      {"int32", DataType::int32},        {"int", DataType::int32},          {"uint32", DataType::uint32},
      {"int64", DataType::int64},        {"uint64", DataType::uint64},      {"half", DataType::float16},
      {"float16", DataType::float16},    {"fp16", DataType::float16},       {"f16", DataType::float16},
      {"float", DataType::float32},      {"float32", DataType::float32},    {"fp32", DataType::float32},
      {"f32", DataType::float32},        {"double", DataType::float64},     {"float64", DataType::float64},
      {"fp64", DataType::float64},       {"f64", DataType::float64},        {"bfloat16", DataType::bfloat16},
      {"bf16", DataType::bfloat16},      {"f8e4m3", DataType::fp8_e4m3},    {"fp8e4m3", DataType::fp8_e4m3},
      {"float8e4m3", DataType::fp8_e4m3}, {"f8e5m2", DataType::fp8_e5m2},   {"fp8e5m2", DataType::fp8_e5m2},
      {"float8e5m2", DataType::fp8_e5m2},
  }};
  return lookup(text, table);
}

std::optional<ReduceOp> parse_reduce_op(std::string_view text) {
  static const std::array<std::pair<const char*, ReduceOp>, 7> table = {{
      {"sum", ReduceOp::sum}, {"prod", ReduceOp::prod}, {"max", ReduceOp::max}, {"min", ReduceOp::min}, {"avg", ReduceOp::avg},
      {"mulsum", ReduceOp::mulsum}, {"premulsum", ReduceOp::mulsum},
  }};
  return lookup(text, table);
}

// One table for host and device: element_codec.hpp's element_bytes() (kernels need it too).
std::size_t size_of(DataType dtype) { return element_bytes(dtype); }

bool is_floating(DataType dtype) {
  switch (dtype) {
    case DataType::float16:
    case DataType::float32:
    case DataType::float64:
    case DataType::bfloat16:
    case DataType::fp8_e4m3:
    case DataType::fp8_e5m2: return true;
    default: return false;
  }
}

std::uint64_t max_exact_integer(DataType dtype) {
  switch (dtype) {
    case DataType::int8: return 127;
    case DataType::uint8: return 255;
    case DataType::int32: return 2147483647ull;
    case DataType::uint32: return 4294967295ull;
    case DataType::int64: return 9223372036854775807ull;
    case DataType::uint64: return 18446744073709551615ull;
    case DataType::float16: return 2048;           // 11 significant bits
    case DataType::float32: return 16777216;       // 24
    case DataType::float64: return 9007199254740992ull;  // 53
    case DataType::bfloat16: return 256;           // 8
    case DataType::fp8_e4m3: return 16;            // 4
    case DataType::fp8_e5m2: return 8;             // 3
  }
  return 0;
}

}  // namespace cclbench
