#pragma once
// Whether this machine has an NVIDIA GPU, decided without cclbench's own detection (see
// tests/tools/gpu_presence.py for why): /dev/nvidia<N> device nodes, else `nvidia-smi -L`.
// CUDA_VISIBLE_DEVICES set to "" or "-1" hides every GPU on purpose: then none is expected.
// GPU tests use SKIP_OR_FAIL_WITHOUT_GPU(reason): skip when none is here, fail when a GPU is
// present but the product sees none (a broken detection must not turn every GPU test into a skip).
#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

namespace cclbench_test {

inline std::string independent_gpu_evidence() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string value = visible;
    if (value.empty() || value == "-1") return "";
  }
  std::string nodes;
  if (DIR* dev = ::opendir("/dev")) {
    static const std::regex numbered("nvidia[0-9]+");
    while (const dirent* entry = ::readdir(dev)) {
      if (std::regex_match(entry->d_name, numbered)) nodes += std::string(nodes.empty() ? "" : ", ") + "/dev/" + entry->d_name;
    }
    ::closedir(dev);
  }
  if (!nodes.empty()) return "device nodes " + nodes;
  int gpus = 0;
  if (FILE* pipe = ::popen("nvidia-smi -L 2>/dev/null", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, pipe)) gpus += std::string(line).rfind("GPU ", 0) == 0 ? 1 : 0;
    ::pclose(pipe);
  }
  return gpus > 0 ? "nvidia-smi -L lists " + std::to_string(gpus) + " GPU(s)" : "";
}

}  // namespace cclbench_test

#define SKIP_OR_FAIL_WITHOUT_GPU(product_reason)                                                                 \
  do {                                                                                                           \
    const std::string gpu_evidence_ = ::cclbench_test::independent_gpu_evidence();                               \
    if (!gpu_evidence_.empty()) {                                                                                \
      GTEST_FAIL() << "a GPU is present (" << gpu_evidence_ << ") but cclbench sees none: " << (product_reason); \
    }                                                                                                            \
    GTEST_SKIP() << "no CUDA device: " << (product_reason);                                                      \
  } while (0)
