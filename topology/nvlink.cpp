#include "topology/nvlink.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <memory>

#include "topology/topology.hpp"

namespace cclbench::topology {
namespace {

// The few NVML declarations needed, from NVML's public ABI (nvml.h is not installed everywhere).
using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;          // nvmlEnableState_t NVML_FEATURE_ENABLED
constexpr int kNvlinkRemoteGpu = 0;             // nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU
constexpr int kNvlinkRemoteSwitch = 2;          // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr unsigned kMaxNvlinks = 18;            // NVML_NVLINK_MAX_LINKS (Hopper, Blackwell)

struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
  char headroom[64];  // NVML writes sizeof(nvmlPciInfo_t) only; room in case a release grows it
};

struct LibraryCloser {
  void operator()(void* handle) const { dlclose(handle); }
};

template <typename Function>
Function symbol(void* library, const char* name) {
  return reinterpret_cast<Function>(dlsym(library, name));
}

}  // namespace

std::optional<NvlinkCounts> query_nvlink_counts(const std::vector<std::string>& gpu_pci_bus_ids, std::string& reason) {
  if (gpu_pci_bus_ids.empty()) {
    reason = "NVLink unknown: no GPU bus ids from CUDA to ask NVML about";
    return std::nullopt;
  }
  std::unique_ptr<void, LibraryCloser> library(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!library) {
    reason = "NVLink unknown: libnvidia-ml.so.1 (NVML) is not available";
    return std::nullopt;
  }
  const auto init = symbol<NvmlReturn (*)()>(library.get(), "nvmlInit_v2");
  const auto shutdown = symbol<NvmlReturn (*)()>(library.get(), "nvmlShutdown");
  const auto by_bus_id = symbol<NvmlReturn (*)(const char*, NvmlDevice*)>(library.get(), "nvmlDeviceGetHandleByPciBusId_v2");
  const auto link_state = symbol<NvmlReturn (*)(NvmlDevice, unsigned, int*)>(library.get(), "nvmlDeviceGetNvLinkState");
  const auto remote_pci = symbol<NvmlReturn (*)(NvmlDevice, unsigned, NvmlPciInfo*)>(library.get(), "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  const auto remote_type = symbol<NvmlReturn (*)(NvmlDevice, unsigned, int*)>(library.get(), "nvmlDeviceGetNvLinkRemoteDeviceType");
  if (init == nullptr || shutdown == nullptr || by_bus_id == nullptr || link_state == nullptr || remote_pci == nullptr) {
    reason = "NVLink unknown: this NVML lacks the NVLink queries";
    return std::nullopt;
  }
  if (init() != kNvmlSuccess) {
    reason = "NVLink unknown: nvmlInit failed";
    return std::nullopt;
  }
  const std::size_t n = gpu_pci_bus_ids.size();
  std::vector<NvmlDevice> devices(n, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    if (by_bus_id(gpu_pci_bus_ids[i].c_str(), &devices[i]) != kNvmlSuccess) {
      shutdown();
      reason = "NVLink unknown: NVML does not know GPU " + gpu_pci_bus_ids[i];
      return std::nullopt;
    }
  }
  NvlinkCounts counts;
  counts.links.assign(n, std::vector<int>(n, 0));
  std::vector<int> switch_links(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (unsigned link = 0; link < kMaxNvlinks; ++link) {
      int active = 0;
      if (link_state(devices[i], link, &active) != kNvmlSuccess || active != kNvmlFeatureEnabled) continue;
      int type = -1;
      if (remote_type != nullptr && remote_type(devices[i], link, &type) != kNvmlSuccess) type = -1;
      if (type == kNvlinkRemoteSwitch) {
        ++switch_links[i];
        continue;
      }
      NvmlPciInfo pci{};
      if (remote_pci(devices[i], link, &pci) != kNvmlSuccess) continue;
      pci.bus_id[sizeof pci.bus_id - 1] = '\0';
      std::string peer;
      try {
        peer = normalize_pci_bus_id(pci.bus_id);
      } catch (const std::exception&) {
        continue;
      }
      const auto it = std::find(gpu_pci_bus_ids.begin(), gpu_pci_bus_ids.end(), peer);
      if (it != gpu_pci_bus_ids.end()) {
        ++counts.links[i][static_cast<std::size_t>(it - gpu_pci_bus_ids.begin())];
      } else if (type != kNvlinkRemoteGpu) {
        ++switch_links[i];  // not one of our GPUs and not typed as a GPU: an NVSwitch port
      }
    }
  }
  shutdown();
  bool any_switch = false;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j && counts.links[i][j] == 0 && switch_links[i] > 0 && switch_links[j] > 0) {
        counts.links[i][j] = std::min(switch_links[i], switch_links[j]);
        any_switch = true;
      }
    }
  }
  counts.source = any_switch ? "NVML (GPU pairs through NVSwitch: the smaller of their switch link counts)" : "NVML";
  return counts;
}

}  // namespace cclbench::topology
