#include "bench/p2p/cuda_check.hpp"

#include <string>

#include "bench/core/errors.hpp"

namespace cclbench::p2p {

void cuda_check(cudaError_t result, const char* call, const char* file, int line) {
  if (result == cudaSuccess) return;
  int device = -1;
  const bool known = cudaGetDevice(&device) == cudaSuccess;
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) + " on GPU " +
                        (known ? std::to_string(device) : std::string("?")) + ": " + cudaGetErrorName(result) + ": " +
                        cudaGetErrorString(result);
  throw FatalError(ExitCode::runtime_error, message);
}

}  // namespace cclbench::p2p
