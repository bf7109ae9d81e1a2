#pragma once
// The p2p_matrix tests: stable names (JSON/CSV keys, -t values), what each measures and how its
// bytes are counted. The registry is an explicit list in one place; nothing registers itself.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cclbench::p2p {

enum class TestId {
  d2d_ce_write_uni, d2d_ce_read_uni, d2d_ce_write_bi, d2d_ce_read_bi,
  d2d_sm_write_uni, d2d_sm_read_uni, d2d_sm_write_bi, d2d_sm_read_bi,
  d2d_staged_uni, d2d_staged_bi,
  d2d_ce_latency, d2d_sm_latency,
  h2d_ce_local_numa, d2h_ce_local_numa, bi_h2d_d2h_ce_local_numa,
  h2d_ce_remote_numa, d2h_ce_remote_numa, bi_h2d_d2h_ce_remote_numa,
  device_local_copy_ce, device_local_copy_sm,
};

// pair: one result per ordered GPU pair (rows = source, columns = destination);
// device: one result per GPU (host<->device, or within one GPU).
enum class Scope { pair, device };
// bandwidth in GB/s (1e9 bytes/s); copy latency in microseconds per copy; load latency in
// nanoseconds per dependent load.
enum class Metric { bandwidth_gbps, latency_us, load_latency_ns };
// read_plus_write (2 x size for a copy within one GPU) is what device_local_copy_* counted in
// p2p_matrix schema 1.0; from 1.1 a local copy counts the bytes copied (one_direction), as
// nvbandwidth does. The value stays so that readers of old files know it.
enum class BytesCounted { one_direction, both_directions, read_plus_write, not_applicable };

struct TestInfo {
  TestId id;
  std::string_view name;
  Scope scope;
  Metric metric;
  BytesCounted bytes_counted;
  // Pair tests: the GPU with itself is measured too. Latency: a local copy / local loads; one-way
  // bandwidth (d2d_{ce,sm}_{write,read}_uni): the local device copy, bytes copied / time as
  // nvbandwidth's device_local_copy (each byte is read and written, so memory traffic is twice
  // the figure). Not for bi (two copies on one GPU) or staged (no peer access to disable).
  bool diagonal;
  std::uint64_t default_bytes;    // size per copy when no -b/-e sweep is given
  std::string_view description;   // one line: engine, who issues the copy, direction
};

const std::vector<TestInfo>& all_tests();
const TestInfo& test_info(TestId id);
std::optional<TestId> parse_test_name(std::string_view name);

// "-t a,b" -> tests in registry order, duplicates removed; "all" selects every test.
// Throws UsageError (naming -t and pointing at --list) for an unknown or empty name.
std::vector<TestId> select_tests(std::string_view list);

std::string_view name_of(Scope scope);
std::string_view name_of(Metric metric);         // "gbps", "us", "ns"
std::string_view unit_label(Metric metric);      // "GB/s", "us per copy", "ns per load"
std::string_view name_of(BytesCounted counted);  // "one_direction"...

// The `--list` text: one line per test, name then description.
std::string list_text();

// Ordered (src, dst) pairs of `device_count` GPUs: every src != dst, plus src == dst when
// `diagonal`; only `only` (when given) in which case it must name existing GPUs.
std::vector<std::pair<int, int>> enumerate_pairs(int device_count, bool diagonal,
                                                 const std::optional<std::pair<int, int>>& only);

}  // namespace cclbench::p2p
