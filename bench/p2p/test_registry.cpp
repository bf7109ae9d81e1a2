#include "bench/p2p/test_registry.hpp"

#include <algorithm>
#include <sstream>

#include "bench/core/errors.hpp"

namespace cclbench::p2p {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

std::vector<TestInfo> make_registry() {
  using enum TestId;
  const auto pair = Scope::pair;
  const auto device = Scope::device;
  const auto bw = Metric::bandwidth_gbps;
  const auto one = BytesCounted::one_direction;
  const auto both = BytesCounted::both_directions;
  return {
      {d2d_ce_write_uni, "d2d_ce_write_uni", pair, bw, one, true, 256 * kMiB,
       "copy engine, cudaMemcpyPeerAsync on the source GPU's stream (push), P2P enabled (diagonal: local copy)"},
      {d2d_ce_read_uni, "d2d_ce_read_uni", pair, bw, one, true, 256 * kMiB,
       "copy engine, cudaMemcpyPeerAsync on the destination GPU's stream (pull), P2P enabled (diagonal: local copy)"},
      {d2d_ce_write_bi, "d2d_ce_write_bi", pair, bw, both, false, 256 * kMiB,
       "copy engine, src->dst and dst->src at once, each issued by its source (push), P2P enabled"},
      {d2d_ce_read_bi, "d2d_ce_read_bi", pair, bw, both, false, 256 * kMiB,
       "copy engine, src->dst and dst->src at once, each issued by its destination (pull), P2P enabled"},
      {d2d_sm_write_uni, "d2d_sm_write_uni", pair, bw, one, true, 256 * kMiB,
       "SM copy kernel on the source GPU storing into peer memory, P2P enabled (diagonal: local copy)"},
      {d2d_sm_read_uni, "d2d_sm_read_uni", pair, bw, one, true, 256 * kMiB,
       "SM copy kernel on the destination GPU loading from peer memory, P2P enabled (diagonal: local copy)"},
      {d2d_sm_write_bi, "d2d_sm_write_bi", pair, bw, both, false, 256 * kMiB,
       "SM copy kernels on both GPUs at once, each storing into the other's memory, P2P enabled"},
      {d2d_sm_read_bi, "d2d_sm_read_bi", pair, bw, both, false, 256 * kMiB,
       "SM copy kernels on both GPUs at once, each loading from the other's memory, P2P enabled"},
      {d2d_staged_uni, "d2d_staged_uni", pair, bw, one, false, 256 * kMiB,
       "cudaMemcpyPeerAsync with peer access disabled (the driver stages through host memory)"},
      {d2d_staged_bi, "d2d_staged_bi", pair, bw, both, false, 256 * kMiB,
       "as d2d_staged_uni, both directions at once"},
      {d2d_ce_latency, "d2d_ce_latency", pair, Metric::latency_us, BytesCounted::not_applicable, true, 4,
       "copy engine, back-to-back 4-byte cudaMemcpyPeerAsync on the source GPU, time per copy (diagonal: local copy)"},
      {d2d_sm_latency, "d2d_sm_latency", pair, Metric::load_latency_ns, BytesCounted::not_applicable, true, 0,
       "single-thread pointer chase on the row GPU over memory of the column GPU (diagonal: local memory)"},
      {h2d_ce_local_numa, "h2d_ce_local_numa", device, bw, one, false, 256 * kMiB,
       "copy engine, pinned host memory on the GPU's NUMA node -> GPU"},
      {d2h_ce_local_numa, "d2h_ce_local_numa", device, bw, one, false, 256 * kMiB,
       "copy engine, GPU -> pinned host memory on the GPU's NUMA node"},
      {bi_h2d_d2h_ce_local_numa, "bi_h2d_d2h_ce_local_numa", device, bw, both, false, 256 * kMiB,
       "copy engine, host->GPU and GPU->host at once, pinned host memory on the GPU's NUMA node"},
      {h2d_ce_remote_numa, "h2d_ce_remote_numa", device, bw, one, false, 256 * kMiB,
       "copy engine, pinned host memory on another NUMA node -> GPU"},
      {d2h_ce_remote_numa, "d2h_ce_remote_numa", device, bw, one, false, 256 * kMiB,
       "copy engine, GPU -> pinned host memory on another NUMA node"},
      {bi_h2d_d2h_ce_remote_numa, "bi_h2d_d2h_ce_remote_numa", device, bw, both, false, 256 * kMiB,
       "copy engine, host->GPU and GPU->host at once, pinned host memory on another NUMA node"},
      {device_local_copy_ce, "device_local_copy_ce", device, bw, one, false, kGiB,
       "copy engine, cudaMemcpyAsync device->device within one GPU (bytes copied; memory traffic is 2x)"},
      {device_local_copy_sm, "device_local_copy_sm", device, bw, one, false, kGiB,
       "SM copy kernel (16-byte vectors) within one GPU (bytes copied; memory traffic is 2x)"},
  };
}

}  // namespace

const std::vector<TestInfo>& all_tests() {
  static const std::vector<TestInfo> registry = make_registry();  // immutable after first use
  return registry;
}

const TestInfo& test_info(TestId id) {
  for (const TestInfo& info : all_tests()) {
    if (info.id == id) return info;
  }
  throw FatalError(ExitCode::runtime_error, "internal error: test id missing from the registry");
}

std::optional<TestId> parse_test_name(std::string_view name) {
  for (const TestInfo& info : all_tests()) {
    if (info.name == name) return info.id;
  }
  return std::nullopt;
}

std::vector<TestId> select_tests(std::string_view list) {
  std::vector<bool> chosen(all_tests().size(), false);
  if (list.empty()) throw UsageError("-t: empty test list (see --list for the test names)");
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string_view name = list.substr(begin, end - begin);
    if (name.empty()) throw UsageError("-t: empty test name in '" + std::string(list) + "' (see --list)");
    if (name == "all") {
      std::fill(chosen.begin(), chosen.end(), true);
    } else {
      const auto id = parse_test_name(name);
      if (!id) {
        std::string shown(name.substr(0, 60));
        for (char& c : shown) {
          if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
        }
        throw UsageError("-t: unknown test '" + shown + "' (see --list for the test names)");
      }
      chosen[static_cast<std::size_t>(*id)] = true;
    }
    begin = end + 1;
  }
  std::vector<TestId> selected;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i]) selected.push_back(all_tests()[i].id);
  }
  return selected;
}

std::string_view name_of(Scope scope) { return scope == Scope::pair ? "pair" : "device"; }

std::string_view name_of(Metric metric) {
  switch (metric) {
    case Metric::bandwidth_gbps: return "gbps";
    case Metric::latency_us: return "us";
    case Metric::load_latency_ns: return "ns";
  }
  return "?";
}

std::string_view unit_label(Metric metric) {
  switch (metric) {
    case Metric::bandwidth_gbps: return "GB/s";
    case Metric::latency_us: return "us per copy";
    case Metric::load_latency_ns: return "ns per load";
  }
  return "?";
}

std::string_view name_of(BytesCounted counted) {
  switch (counted) {
    case BytesCounted::one_direction: return "one_direction";
    case BytesCounted::both_directions: return "both_directions";
    case BytesCounted::read_plus_write: return "read_plus_write";
    case BytesCounted::not_applicable: return "not_applicable";
  }
  return "?";
}

std::string list_text() {
  std::ostringstream out;
  for (const TestInfo& info : all_tests()) {
    out << info.name;
    for (std::size_t pad = info.name.size(); pad < 28; ++pad) out << ' ';
    out << info.description << '\n';
  }
  return out.str();
}

std::vector<std::pair<int, int>> enumerate_pairs(int device_count, bool diagonal,
                                                 const std::optional<std::pair<int, int>>& only) {
  std::vector<std::pair<int, int>> pairs;
  if (only) {
    if (only->first < 0 || only->second < 0 || only->first >= device_count || only->second >= device_count) {
      throw UsageError("--pair " + std::to_string(only->first) + "," + std::to_string(only->second) +
                       ": only " + std::to_string(device_count) + " GPU(s) visible");
    }
    if (only->first != only->second || diagonal) pairs.push_back(*only);
    return pairs;
  }
  for (int src = 0; src < device_count; ++src) {
    for (int dst = 0; dst < device_count; ++dst) {
      if (src != dst || diagonal) pairs.emplace_back(src, dst);
    }
  }
  return pairs;
}

}  // namespace cclbench::p2p
