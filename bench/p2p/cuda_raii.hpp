#pragma once
// Move-only owners of CUDA handles. Constructors check every call (FatalError on failure);
// destructors release with the owning device current and never throw.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "bench/core/errors.hpp"

namespace cclbench::p2p {

// Memory of the requested size could not be had (device memory, or pinned host memory). The
// engine records the measurement as skipped with this message: that size does not fit here, the
// other sizes and tests still run.
class AllocationFailure : public FatalError {
 public:
  explicit AllocationFailure(const std::string& message) : FatalError(ExitCode::runtime_error, message) {}
};

// Makes `device` current for the scope and restores the previous device afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(Stream&& other) noexcept : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(Event&& other) noexcept : device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
};

// cudaMalloc'ed memory of one GPU. Out of memory throws AllocationFailure naming the size and GPU.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : device_(other.device_), bytes_(other.bytes_), data_(std::exchange(other.data_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  int device_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

// Mapped, portable pinned host memory (cudaHostAlloc): the start gate's flag and timeout word,
// visible to every GPU at the same address (UVA).
class MappedHostWords {
 public:
  explicit MappedHostWords(std::size_t count);
  ~MappedHostWords();
  MappedHostWords(const MappedHostWords&) = delete;
  MappedHostWords& operator=(const MappedHostWords&) = delete;
  volatile int* word(std::size_t i) const { return words_ + i; }

 private:
  volatile int* words_ = nullptr;
};

}  // namespace cclbench::p2p
