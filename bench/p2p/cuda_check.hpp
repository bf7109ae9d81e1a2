#pragma once
// CUDA error checking for p2p_matrix's host code: every runtime call goes through CUDA_CHECK, every
// kernel launch wrapper's result (cudaGetLastError right after the launch) too.
#include <cuda_runtime.h>

namespace cclbench::p2p {

// Throws FatalError(runtime_error): "<call> failed at file:line on GPU n: cudaErrorX: text".
void cuda_check(cudaError_t result, const char* call, const char* file, int line);

}  // namespace cclbench::p2p

#define CUDA_CHECK(call) ::cclbench::p2p::cuda_check((call), #call, __FILE__, __LINE__)
