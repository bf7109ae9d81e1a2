#include "bench/cuda/cuda_handles.hpp"

namespace cclbench {
namespace {

std::string context_of(const std::string& where) { return where.empty() ? "" : " (" + where + ")"; }

// Runs `destroy` with `device` current and makes the previous device current again. For the
// release paths of destructors: ignores every error and never throws.
template <typename Destroy>
void on_device(int device, Destroy destroy) noexcept {
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  destroy();
  if (previous >= 0) cudaSetDevice(previous);
}

}  // namespace

void cuda_check(cudaError_t result, const char* what, const std::string& where) {
  if (result == cudaSuccess) return;
  throw FatalError(ExitCode::runtime_error, std::string(what) + ": " + cudaGetErrorString(result) + context_of(where));
}

DeviceScope::DeviceScope(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice", "device " + std::to_string(device));
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes, const std::string& where) : device_(device), bytes_(bytes) {
  DeviceScope scope(device);
  const cudaError_t result = cudaMalloc(&data_, bytes);
  if (result == cudaSuccess) return;
  data_ = nullptr;
  (void)cudaGetLastError();  // an allocation failure is not sticky: keep the context usable
  const std::string message = "cannot allocate " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device) + ": " +
                              cudaGetErrorString(result) + context_of(where);
  if (result == cudaErrorMemoryAllocation) throw AllocationFailure(message);
  throw FatalError(ExitCode::runtime_error, message);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  on_device(device_, [this] { cudaFree(data_); });
  data_ = nullptr;
  bytes_ = 0;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes, const std::string& where) {
  cuda_check(cudaMallocHost(&data_, bytes), "cudaMallocHost", where);
}

PinnedBuffer::~PinnedBuffer() { release(); }

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(data_, other.data_);
  }
  return *this;
}

void PinnedBuffer::release() noexcept {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
}

MappedHostWords::MappedHostWords(std::size_t count, const std::string& where) {
  void* memory = nullptr;
  cuda_check(cudaHostAlloc(&memory, count * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc", where);
  words_ = static_cast<volatile int*>(memory);
  for (std::size_t i = 0; i < count; ++i) words_[i] = 0;
}

MappedHostWords::~MappedHostWords() {
  if (words_ != nullptr) cudaFreeHost(const_cast<int*>(words_));
}

Stream::Stream(int device, const std::string& where) : device_(device) {
  DeviceScope scope(device);
  // Non-blocking: the legacy default stream must never serialize with our collectives.
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", where);
}

Stream::~Stream() { release(); }

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(device_, other.device_);
    std::swap(stream_, other.stream_);
  }
  return *this;
}

void Stream::release() noexcept {
  if (stream_ == nullptr) return;
  on_device(device_, [this] { cudaStreamDestroy(stream_); });
  stream_ = nullptr;
}

Event::Event(int device, const std::string& where) : device_(device) {
  DeviceScope scope(device);
  cuda_check(cudaEventCreate(&event_), "cudaEventCreate", where);
}

Event::~Event() { release(); }

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(device_, other.device_);
    std::swap(event_, other.event_);
  }
  return *this;
}

void Event::release() noexcept {
  if (event_ == nullptr) return;
  on_device(device_, [this] { cudaEventDestroy(event_); });
  event_ = nullptr;
}

Graph::Graph(cudaGraph_t graph, int device, const std::string& where) : device_(device), graph_(graph) {
  DeviceScope scope(device);
  const cudaError_t result = cudaGraphInstantiate(&exec_, graph_, 0);
  if (result != cudaSuccess) {  // the destructor of a half-built object does not run
    cudaGraphDestroy(graph_);
    graph_ = nullptr;
    exec_ = nullptr;
  }
  cuda_check(result, "cudaGraphInstantiate", where);
}

Graph::~Graph() { release(); }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(device_, other.device_);
    std::swap(graph_, other.graph_);
    std::swap(exec_, other.exec_);
  }
  return *this;
}

void Graph::release() noexcept {
  if (graph_ == nullptr && exec_ == nullptr) return;
  on_device(device_, [this] {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  });
  exec_ = nullptr;
  graph_ = nullptr;
}

}  // namespace cclbench
