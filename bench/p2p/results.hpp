#pragma once
// What p2p_matrix measured, as plain data. The engine fills it; report.hpp renders it (text,
// JSON, CSV). Missing values are nullopt with a reason, never 0.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/p2p/test_registry.hpp"

namespace cclbench::p2p {

enum class Status { ok, failed, skipped, error };
// failed: ran, but the data was wrong (or the start gate timed out): the number is not trusted.
// error: a CUDA/system error (allocation failure included). skipped: not applicable here.
std::string_view name_of(Status status);

// Median, min, max over the samples; CV = sample standard deviation / mean, in %.
struct SampleStats {
  double median = 0, min = 0, max = 0, mean = 0, cv_pct = 0;
};
// `samples` must be non-empty.
SampleStats summarize(std::vector<double> samples);

// A GPU, or host memory (gpu == nullopt).
struct Endpoint {
  std::optional<int> gpu;
  static Endpoint host() { return {}; }
  static Endpoint device(int index) { return {index}; }
};

struct Measurement {
  TestId test{};
  std::optional<Endpoint> src;  // nullopt: no endpoint (e.g. skipped before any GPU was known)
  std::optional<Endpoint> dst;
  std::optional<std::uint64_t> bytes;  // size of one copy (chase buffer for load latency)
  std::optional<int> host_numa_node;   // host tests: the NUMA node the pinned memory is bound to
  Status status = Status::skipped;
  std::string reason;                  // empty when ok
  std::vector<double> samples;         // in the test's unit (GB/s, us per copy, ns per load)
  std::vector<double> sample_time_us;  // time per copy in each sample (a sample may repeat small copies)
  std::optional<SampleStats> value;    // null unless ok
  std::optional<SampleStats> time_us;
  std::optional<std::uint64_t> bytes_counted_per_copy;  // bandwidth tests: GB/s = this / time per copy
  std::optional<std::uint64_t> wrong_words;  // total over all verified samples; null: not verified
  int verified_samples = 0;
  nlohmann::json details = nlohmann::json::object();  // method, chain geometry, page placement...
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  std::optional<int> numa_node;
  std::string numa_node_reason;  // why numa_node is null
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;
  std::uint64_t l2_bytes = 0;
  int cc_major = 0, cc_minor = 0;
};

struct PairCapability {
  int src = 0, dst = 0;
  bool can_access_peer = false;
  std::optional<int> performance_rank;
  std::optional<bool> access_supported;
  std::optional<bool> native_atomic_supported;
  std::optional<std::string> path_class;
  std::string path_class_reason;
};

struct Report {
  std::string host;
  std::vector<std::string> argv;
  std::optional<int> driver_version;
  std::optional<int> runtime_version;
  std::string no_device_reason;  // non-empty when no GPU could be used
  std::optional<int> numa_node_count;
  std::string numa_reason;       // why numa_node_count is null
  std::vector<DeviceInfo> devices;
  std::vector<PairCapability> capability;
  std::string path_class_source;  // where capability[].path_class comes from
  // This process's binding record (topology/binding.hpp), captured against GPU binding_gpu;
  // nullopt with binding_reason when the topology library could not produce it.
  std::optional<nlohmann::json> binding;
  std::optional<int> binding_gpu;
  std::string binding_reason;
  std::vector<TestId> tests;     // selected, in order
  int repetitions = 0;
  int warmup = 0;
  nlohmann::json settings = nlohmann::json::object();
  std::vector<Measurement> results;
};

}  // namespace cclbench::p2p
