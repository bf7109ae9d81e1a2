// Versions and visible GPUs for the manifest, and the visible-device count used to pick a backend.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "bench/nccl/nccl_backend.hpp"

namespace cclbench {
namespace {

// CUDA encodes versions as 1000*major + 10*minor.
std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// NCCL >= 2.9 encodes versions as major*10000 + minor*100 + patch.
std::string nccl_version_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string((code % 10000) / 100) + "." + std::to_string(code % 100);
}

}  // namespace

int visible_gpu_count(std::string* error) {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    cudaGetLastError();  // clear, so later calls start clean
    if (error) *error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(result);
    return 0;
  }
  if (error) error->clear();
  return count;
}

nlohmann::json gpu_environment_json() {
  nlohmann::json env = nlohmann::json::object();
  int driver = 0;
  if (const cudaError_t result = cudaDriverGetVersion(&driver); result == cudaSuccess && driver > 0) {
    env["cuda_driver_version"] = cuda_version_string(driver);
  } else {
    env["cuda_driver_version"] = nullptr;
    env["cuda_driver_version_reason"] =
        result == cudaSuccess ? "no CUDA driver installed" : std::string("cudaDriverGetVersion: ") + cudaGetErrorString(result);
  }
  int runtime = 0;
  if (const cudaError_t result = cudaRuntimeGetVersion(&runtime); result == cudaSuccess) {
    env["cuda_runtime_version"] = cuda_version_string(runtime);
  } else {
    env["cuda_runtime_version"] = nullptr;
    env["cuda_runtime_version_reason"] = std::string("cudaRuntimeGetVersion: ") + cudaGetErrorString(result);
  }
  int nccl = 0;
  if (const ncclResult_t result = ncclGetVersion(&nccl); result == ncclSuccess) {
    env["nccl_version"] = nccl_version_string(nccl);
    env["nccl_version_code"] = nccl;
  } else {
    env["nccl_version"] = nullptr;
    env["nccl_version_code"] = nullptr;
    env["nccl_version_reason"] = std::string("ncclGetVersion: ") + ncclGetErrorString(result);
  }
  env["nccl_header_version"] = nccl_version_string(NCCL_VERSION_CODE);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  env["cuda_visible_devices"] = visible ? nlohmann::json(visible) : nlohmann::json(nullptr);

  std::string error;
  const int count = visible_gpu_count(&error);
  env["visible_gpu_count"] = count;
  env["gpus"] = nlohmann::json::array();
  if (count == 0) env["gpus_reason"] = error.empty() ? "no CUDA device visible" : error;
  for (int device = 0; device < count; ++device) {
    nlohmann::json gpu = {{"index", device}};
    cudaDeviceProp prop{};
    if (const cudaError_t result = cudaGetDeviceProperties(&prop, device); result != cudaSuccess) {
      gpu["name"] = nullptr;
      gpu["pci_bus_id"] = nullptr;
      gpu["compute_capability"] = nullptr;
      gpu["memory_bytes"] = nullptr;
      gpu["reason"] = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(result);
    } else {
      char bus_id[32] = {};
      gpu["name"] = prop.name;
      if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess) {
        gpu["pci_bus_id"] = bus_id;
      } else {
        gpu["pci_bus_id"] = nullptr;
      }
      gpu["compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
      gpu["memory_bytes"] = static_cast<std::uint64_t>(prop.totalGlobalMem);
    }
    env["gpus"].push_back(gpu);
  }
  return env;
}

}  // namespace cclbench
