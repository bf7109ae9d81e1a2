// A duty-cycled copy load beside the smoke (tests/gpu/smoke_proof.py --loads): interference of the kind a shared
// CI runner meets, which the smoke must name (docs/ci.md, "What the smoke catches, measured").
//
//   copy_load h2d|d2d DUTY_PCT SECONDS [BYTES=64MiB] [PERIOD_MS=100]
//
// Every PERIOD_MS it copies BYTES at a time (pinned host memory to GPU 0, or GPU 0 to GPU 0) for DUTY_PCT of the
// period, then sleeps the rest; it ends after SECONDS. Prints the copies made and their mean bandwidth. Exit 2 on bad
// arguments, 1 on a CUDA error.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "copy_load: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s h2d|d2d DUTY_PCT SECONDS [BYTES] [PERIOD_MS]\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[1];
  const double duty = std::atof(argv[2]) / 100.0;
  const double seconds = std::atof(argv[3]);
  const size_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : (size_t{64} << 20);
  const double period_ms = argc > 5 ? std::atof(argv[5]) : 100.0;
  if ((kind != "h2d" && kind != "d2d") || !(duty > 0 && duty <= 1) || !(seconds > 0) || bytes == 0 ||
      !(period_ms > 0)) {
    std::fprintf(stderr, "copy_load: bad arguments\n");
    return 2;
  }
  void* source = nullptr;
  void* target = nullptr;
  if (!ok(cudaSetDevice(0), "cudaSetDevice") || !ok(cudaMalloc(&target, bytes), "cudaMalloc")) return 1;
  if (kind == "h2d" ? !ok(cudaMallocHost(&source, bytes), "cudaMallocHost")
                    : !ok(cudaMalloc(&source, bytes), "cudaMalloc")) {
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  const auto period = std::chrono::duration<double, std::milli>(period_ms);
  long copies = 0;
  double busy_s = 0;
  for (auto period_start = start; Clock::now() < end; period_start += std::chrono::duration_cast<Clock::duration>(period)) {
    const auto busy_until = period_start + std::chrono::duration_cast<Clock::duration>(period * duty);
    while (Clock::now() < busy_until) {
      const auto copy_start = Clock::now();
      if (!ok(cudaMemcpy(target, source, bytes, kind == "h2d" ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice),
              "cudaMemcpy")) {
        return 1;
      }
      busy_s += std::chrono::duration<double>(Clock::now() - copy_start).count();
      ++copies;
    }
    std::this_thread::sleep_until(period_start + std::chrono::duration_cast<Clock::duration>(period));
  }
  std::printf("copy_load %s %.0f%% duty: %ld copies of %zu B in %.1f s, %.1f GB/s while copying\n", kind.c_str(),
              duty * 100, copies, bytes, std::chrono::duration<double>(Clock::now() - start).count(),
              busy_s > 0 ? static_cast<double>(bytes) * copies / busy_s / 1e9 : 0.0);
  return 0;
}
