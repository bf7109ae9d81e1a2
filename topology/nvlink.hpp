#pragma once
// NVLink counts between GPUs, as `nvidia-smi topo -m` prints them (NV#), read from NVML on the live
// machine. NVML is opened with dlopen at run time, so nothing here needs the driver to build or to
// run: without libnvidia-ml (CI, offline XML) the query answers "unknown" with a reason.
#include <optional>
#include <string>
#include <vector>

namespace cclbench::topology {

struct NvlinkCounts {
  // [i][j] = active NVLinks between GPU i and GPU j (bus ids in the order given); 0 = none.
  std::vector<std::vector<int>> links;
  std::string source;  // e.g. "NVML: 18 active links per GPU to NVSwitch"
};

// Direct GPU-GPU links count per pair. GPUs that reach each other through NVSwitch get the smaller
// of their two switch link counts (nvidia-smi shows NV18 on HGX H100/H200 this way).
// nullopt with `reason` set when NVML is absent, fails, or does not know a bus id.
std::optional<NvlinkCounts> query_nvlink_counts(const std::vector<std::string>& gpu_pci_bus_ids, std::string& reason);

}  // namespace cclbench::topology
