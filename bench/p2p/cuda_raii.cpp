#include "bench/p2p/cuda_raii.hpp"

#include <string>

#include "bench/core/errors.hpp"
#include "bench/p2p/cuda_check.hpp"

namespace cclbench::p2p {

DeviceScope::DeviceScope(int device) {
  CUDA_CHECK(cudaGetDevice(&previous_));
  CUDA_CHECK(cudaSetDevice(device));
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

Stream::Stream(int device) : device_(device) {
  DeviceScope scope(device);
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  if (!stream_) return;
  if (cudaSetDevice(device_) == cudaSuccess) (void)cudaStreamDestroy(stream_);
}

Event::Event(int device) : device_(device) {
  DeviceScope scope(device);
  CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  if (!event_) return;
  if (cudaSetDevice(device_) == cudaSuccess) (void)cudaEventDestroy(event_);
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  DeviceScope scope(device);
  const cudaError_t result = cudaMalloc(&data_, bytes);
  if (result != cudaSuccess) {
    data_ = nullptr;
    (void)cudaGetLastError();  // an allocation failure is not sticky: keep the context usable
    const std::string message = "cannot allocate " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device) +
                                ": " + cudaGetErrorString(result);
    if (result == cudaErrorMemoryAllocation) throw AllocationFailure(message);
    throw FatalError(ExitCode::runtime_error, message);
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  if (cudaSetDevice(device_) == cudaSuccess) (void)cudaFree(data_);
}

MappedHostWords::MappedHostWords(std::size_t count) {
  void* memory = nullptr;
  CUDA_CHECK(cudaHostAlloc(&memory, count * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  words_ = static_cast<volatile int*>(memory);
  for (std::size_t i = 0; i < count; ++i) words_[i] = 0;
}

MappedHostWords::~MappedHostWords() {
  if (words_) (void)cudaFreeHost(const_cast<int*>(words_));
}

}  // namespace cclbench::p2p
