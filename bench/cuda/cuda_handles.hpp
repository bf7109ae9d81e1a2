#pragma once
// Move-only RAII owners of CUDA runtime handles, each remembering its device so it can be released
// from any current device; shared by the NCCL backend, p2p_matrix and bench/micro. Constructors
// check every call and throw FatalError naming the call and `where` (the caller's context, such as
// a case or a rank; may be empty). Destructors never throw; release errors after a fatal error are
// ignored because the process is already on its way out.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "bench/core/errors.hpp"

namespace cclbench {

// Throws FatalError(runtime_error) "<what>: <cuda error string> (<where>)" unless result is success.
void cuda_check(cudaError_t result, const char* what, const std::string& where);

// Memory of the requested size could not be had (device memory, or pinned host memory). Callers
// that sweep sizes record that size as skipped and go on (p2p_matrix); others let it end the run.
class AllocationFailure : public FatalError {
 public:
  explicit AllocationFailure(const std::string& message) : FatalError(ExitCode::runtime_error, message) {}
};

// Makes `device` current for the lifetime of the scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// cudaMalloc'ed memory of one GPU. Out of memory throws AllocationFailure naming the size and GPU
// (and clears the error, which is not sticky, so the context stays usable).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t bytes, const std::string& where = "");
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void release() noexcept;
  int device_ = -1;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory, so device-to-host copies are asynchronous and can be polled.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(std::size_t bytes, const std::string& where = "");
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  void* get() const { return data_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
};

// Mapped, portable pinned host words (cudaHostAlloc), zeroed: flags that kernels on any GPU read
// and write at the same address (UVA), such as a blocker kernel's release flag and timeout word.
class MappedHostWords {
 public:
  explicit MappedHostWords(std::size_t count, const std::string& where = "");
  ~MappedHostWords();
  MappedHostWords(const MappedHostWords&) = delete;
  MappedHostWords& operator=(const MappedHostWords&) = delete;
  volatile int* word(std::size_t i) const { return words_ + i; }

 private:
  volatile int* words_ = nullptr;
};

// A non-blocking stream: the legacy default stream never serializes with it.
class Stream {
 public:
  Stream() = default;
  explicit Stream(int device, const std::string& where = "");
  ~Stream();
  Stream(Stream&& other) noexcept { *this = std::move(other); }
  Stream& operator=(Stream&& other) noexcept;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  void release() noexcept;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  explicit Event(int device, const std::string& where = "");  // timing event (cudaEventDefault)
  ~Event();
  Event(Event&& other) noexcept { *this = std::move(other); }
  Event& operator=(Event&& other) noexcept;
  cudaEvent_t get() const { return event_; }

 private:
  void release() noexcept;
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

// A captured graph and its executable instance.
class Graph {
 public:
  Graph() = default;
  Graph(cudaGraph_t graph, int device, const std::string& where);  // takes ownership, instantiates
  ~Graph();
  Graph(Graph&& other) noexcept { *this = std::move(other); }
  Graph& operator=(Graph&& other) noexcept;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  void release() noexcept;
  int device_ = -1;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace cclbench
