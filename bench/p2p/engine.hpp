#pragma once
// Runs p2p_matrix's measurements on the visible GPUs. One Engine per process; it owns the streams,
// events, start gate and peer-access state, and returns plain Measurements (no printing here).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/p2p/options.hpp"
#include "bench/p2p/results.hpp"

namespace cclbench::p2p {

class HostTopology;

// Device list and peer capability from CUDA attributes (+ NUMA nodes from hwloc when available).
// Throws FatalError on CUDA errors.
std::vector<DeviceInfo> query_devices(int device_count, const HostTopology* topology);
std::vector<PairCapability> query_capability(int device_count);

class Engine {
 public:
  // `topology` may be null (hwloc failed): host tests are then skipped with `topology_reason`.
  Engine(const Options& options, std::vector<DeviceInfo> devices, const HostTopology* topology,
         std::string topology_reason);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Every pair/GPU and size of one test. Never throws for a failing measurement: errors become
  // Measurement status error with the reason; the other measurements continue.
  std::vector<Measurement> run(const TestInfo& test);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cclbench::p2p
