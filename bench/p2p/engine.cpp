#include "bench/p2p/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "bench/core/errors.hpp"
#include "bench/core/progress.hpp"
#include "bench/core/slowdown_injection.hpp"
#include "bench/core/units.hpp"
#include "bench/p2p/cuda_check.hpp"
#include "bench/cuda/cuda_handles.hpp"
#include "bench/p2p/numa.hpp"
#include "kernels/p2p_kernels.hpp"

namespace cclbench::p2p {

std::vector<DeviceInfo> query_devices(int device_count, const HostTopology* topology) {
  std::vector<DeviceInfo> devices;
  for (int d = 0; d < device_count; ++d) {
    DeviceScope scope(d);
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    char bus_id[64] = {};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, d));
    DeviceInfo info;
    info.index = d;
    info.name = prop.name;
    info.pci_bus_id = bus_id;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = prop.totalGlobalMem;
    info.l2_bytes = static_cast<std::uint64_t>(prop.l2CacheSize);
    info.cc_major = prop.major;
    info.cc_minor = prop.minor;
    if (topology) {
      info.numa_node = topology->numa_node_of_pci(info.pci_bus_id, &info.numa_node_reason);
    } else {
      info.numa_node_reason = "hwloc topology not available";
    }
    devices.push_back(std::move(info));
  }
  return devices;
}

std::vector<PairCapability> query_capability(int device_count) {
  std::vector<PairCapability> pairs;
  for (int src = 0; src < device_count; ++src) {
    for (int dst = 0; dst < device_count; ++dst) {
      if (src == dst) continue;
      PairCapability c;
      c.src = src;
      c.dst = dst;
      int value = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&value, src, dst));
      c.can_access_peer = value != 0;
      if (cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrPerformanceRank, src, dst) == cudaSuccess) c.performance_rank = value;
      if (cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, src, dst) == cudaSuccess) c.access_supported = value != 0;
      if (cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrNativeAtomicSupported, src, dst) == cudaSuccess) {
        c.native_atomic_supported = value != 0;
      }
      (void)cudaGetLastError();  // an unsupported attribute is recorded as null, not an error
      c.path_class_reason = "path class not looked up yet";
      pairs.push_back(std::move(c));
    }
  }
  return pairs;
}

namespace {

constexpr int kHostPatternBase = 1000;  // pattern owner id of host memory filled for GPU d: 1000 + d

enum class Op { ce_peer, ce_local, ce_h2d, ce_d2h, sm_copy };

// One copy of a sample. Host memory is addressed by its mapped device pointer in kernels.
struct Transfer {
  Op op;
  int issuer;  // the GPU whose stream carries the copy (and the blocker in front of it)
  int lane;    // which of the issuer's two streams
  void* dst;
  int dst_gpu;  // -1: host
  const void* src;
  int src_gpu;  // -1: host
  std::uint64_t bytes;
  std::uint32_t pattern_owner;
  int fill_gpu;    // writes the source pattern: the source GPU, or the issuer for host memory
  void* fill_ptr;  // src as seen by fill_gpu
  int verify_gpu;  // checks the destination: the destination GPU, or the issuer for host memory
  const void* verify_ptr;
};

// gated_events: every stream waits on the host-released gate, timed by CUDA events after it.
// host_clock: copies the driver stages through host memory may need the calling thread to make
// progress, so they cannot sit behind a gate the same thread opens later; they are timed on the
// host around issue + synchronize instead (launch overhead included, negligible at MiB sizes).
enum class Timing { gated_events, host_clock };

struct SampleOutcome {
  double time_us = 0;
  std::uint64_t wrong_words = 0;
  bool gate_timed_out = false;
};

void* mapped_pointer(int device, void* host) {
  DeviceScope scope(device);
  void* device_pointer = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&device_pointer, host, 0));
  return device_pointer;
}

double gbps(std::uint64_t bytes, double time_us) { return static_cast<double>(bytes) / time_us / 1e3; }

}  // namespace

struct Engine::State {
  // One GPU's streams, events and scratch buffers. A member type, not in the anonymous namespace above: a class
  // with external linkage (Engine::State) must not hold a field of an anonymous-namespace type (-Wsubobject-linkage
  // in unity builds, where this file is not the main file).
  struct PerDevice {
    int device;
    Stream lanes[2];
    Event starts[2];
    Event stops[2];
    Event joint_stop;  // concurrent copies: recorded once every copy of the sample has finished
    DeviceBuffer counter;
    DeviceBuffer chase_position;
    int fill_blocks;
    int copy_blocks;

    PerDevice(int d, int sm_count, int sm_blocks_override)
        : device(d),
          lanes{Stream(d), Stream(d)},
          starts{Event(d), Event(d)},
          stops{Event(d), Event(d)},
          joint_stop(d),
          counter(d, sizeof(unsigned long long)),
          chase_position(d, sizeof(std::uint64_t)),
          fill_blocks(sm_count * 4),
          copy_blocks(sm_blocks_override) {
      if (copy_blocks == 0) {
        DeviceScope scope(d);
        int per_sm = 0;
        CUDA_CHECK(kernels::sm_copy_blocks_per_sm(&per_sm));
        copy_blocks = sm_count * std::max(per_sm, 1);
      }
    }
  };

  const Options& options;
  std::vector<DeviceInfo> devices;
  const HostTopology* topology;
  std::string topology_reason;
  std::vector<PerDevice> per_device;
  MappedHostWords gate{2};  // [0]: release flag, [1]: timed-out flag
  std::vector<std::vector<bool>> peer_enabled;
  std::vector<std::vector<bool>> can_access;
  std::uint32_t next_seed = 1;  // every sample of the run gets a fresh pattern
  std::optional<ProgressWriter> progress;  // --progress
  // The slowdown test knob: every copy of the measurement being sampled moves this many bytes beyond the ones it
  // reports (buffers carry the slack: buffer_bytes), calibrated so that its time grows by the percentage asked for.
  std::uint64_t extra_bytes = 0;

  // The bytes to allocate for a buffer of `bytes` copied: with the slowdown knob, room for the extra bytes a
  // calibration may ask for (three times the percentage: a copy's fixed cost means a little more than pct of the
  // bytes gives pct of the time), rounded up to 4 KiB.
  std::uint64_t buffer_bytes(std::uint64_t bytes) const {
    if (!options.slowdown) return bytes;
    return bytes + max_extra_bytes(bytes) + 4096;
  }
  std::uint64_t max_extra_bytes(std::uint64_t bytes) const {
    const double slack = std::min(1.0, 3.0 * options.slowdown->pct / 100.0);
    return (static_cast<std::uint64_t>(static_cast<double>(bytes) * slack) + 4095) / 4096 * 4096;
  }

  // --progress: one measurement (a pair or GPU at one size) begins. None takes a minute on a healthy
  // GPU (the largest default copies, 1 GiB staged through the host, take well under a second each).
  void report_progress(const TestInfo& test, int src, int dst, std::uint64_t bytes) const {
    if (!progress) return;
    progress->emit({{"event", "enter"}, {"phase", "p2p " + std::string(test.name) + " " + std::to_string(src) + "->" +
                                                       std::to_string(dst) + " " + std::to_string(bytes) + " B"},
                    {"deadline_s", kMeasurementDeadlineSeconds}});
  }
  static constexpr double kMeasurementDeadlineSeconds = 60;

  State(const Options& opts, std::vector<DeviceInfo> devs, const HostTopology* topo, std::string topo_reason)
      : options(opts), devices(std::move(devs)), topology(topo), topology_reason(std::move(topo_reason)) {
    if (options.progress) {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      progress.emplace(2, 0, host);
    }
    const auto n = devices.size();
    per_device.reserve(n);
    for (const DeviceInfo& d : devices) per_device.emplace_back(d.index, d.sm_count, options.sm_blocks);
    peer_enabled.assign(n, std::vector<bool>(n, false));
    can_access.assign(n, std::vector<bool>(n, false));
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b) {
        if (a == b) continue;
        int value = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&value, static_cast<int>(a), static_cast<int>(b)));
        can_access[a][b] = value != 0;
      }
    }
  }

  ~State() {
    for (std::size_t a = 0; a < peer_enabled.size(); ++a) {
      for (std::size_t b = 0; b < peer_enabled.size(); ++b) {
        if (peer_enabled[a][b] && cudaSetDevice(static_cast<int>(a)) == cudaSuccess) {
          (void)cudaDeviceDisablePeerAccess(static_cast<int>(b));
        }
      }
    }
  }

  // Enables peer access both ways; returns why not when it cannot be.
  std::optional<std::string> enable_peer(int a, int b) {
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      if (x == y || peer_enabled[x][y]) continue;
      if (!can_access[x][y]) {
        return "peer access not supported (cudaDeviceCanAccessPeer(" + std::to_string(x) + ", " + std::to_string(y) + ") = 0)";
      }
      DeviceScope scope(x);
      const cudaError_t result = cudaDeviceEnablePeerAccess(y, 0);
      if (result != cudaSuccess && result != cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        return "peer access refused: cudaDeviceEnablePeerAccess(" + std::to_string(y) + ") on GPU " + std::to_string(x) +
               ": " + cudaGetErrorString(result);
      }
      (void)cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled
      peer_enabled[x][y] = true;
    }
    return std::nullopt;
  }

  void disable_peer(int a, int b) {
    for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      if (x == y || !peer_enabled[x][y]) continue;
      DeviceScope scope(x);
      const cudaError_t result = cudaDeviceDisablePeerAccess(y);
      if (result == cudaErrorPeerAccessNotEnabled) {
        (void)cudaGetLastError();
      } else {
        CUDA_CHECK(result);
      }
      peer_enabled[x][y] = false;
    }
  }

  PerDevice& dev(int d) { return per_device[static_cast<std::size_t>(d)]; }

  // Small copies are repeated back to back within one sample (at least 32 MiB per sample, at most
  // 256 copies), so the event resolution (~0.5 us) does not dominate; results are per copy.
  static int copies_for(std::uint64_t bytes) {
    constexpr std::uint64_t kBytesPerSample = 32ull << 20;
    if (bytes >= kBytesPerSample) return 1;
    return static_cast<int>(std::min<std::uint64_t>(256, (kBytesPerSample + bytes - 1) / bytes));
  }

  unsigned long long count_wrong(int gpu, const void* data, std::uint64_t bytes, std::uint32_t owner, std::uint32_t seed) {
    DeviceScope scope(gpu);
    PerDevice& pd = dev(gpu);
    cudaStream_t stream = pd.lanes[0].get();
    auto* counter = static_cast<unsigned long long*>(pd.counter.get());
    unsigned long long wrong = 0;
    CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof wrong, stream));
    CUDA_CHECK(kernels::launch_count_mismatches(data, bytes, owner, seed, counter, pd.fill_blocks, stream));
    CUDA_CHECK(cudaMemcpyAsync(&wrong, counter, sizeof wrong, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return wrong;
  }

  void issue(const Transfer& t, cudaStream_t stream) {
    const std::uint64_t bytes = t.bytes + extra_bytes;  // extra_bytes: the slowdown test knob, else 0
    switch (t.op) {
      case Op::ce_peer:
        CUDA_CHECK(cudaMemcpyPeerAsync(t.dst, t.dst_gpu, t.src, t.src_gpu, bytes, stream));
        break;
      case Op::ce_local:
        CUDA_CHECK(cudaMemcpyAsync(t.dst, t.src, bytes, cudaMemcpyDeviceToDevice, stream));
        break;
      case Op::ce_h2d:
        CUDA_CHECK(cudaMemcpyAsync(t.dst, t.src, bytes, cudaMemcpyHostToDevice, stream));
        break;
      case Op::ce_d2h:
        CUDA_CHECK(cudaMemcpyAsync(t.dst, t.src, bytes, cudaMemcpyDeviceToHost, stream));
        break;
      case Op::sm_copy:
        CUDA_CHECK(kernels::launch_sm_copy(t.dst, t.src, bytes, dev(t.issuer).copy_blocks, stream));
        break;
    }
  }

  // --inject-corruption: flip one bit in the middle of every destination after the copies and
  // before verification, as a silent corruption on the path would, so the verifier is exercised.
  void inject_corruption(const std::vector<Transfer>& transfers) {
    if (!options.inject_corruption) return;
    for (const Transfer& t : transfers) {
      DeviceScope scope(t.verify_gpu);
      cudaStream_t stream = dev(t.verify_gpu).lanes[0].get();
      CUDA_CHECK(kernels::launch_flip_bit(const_cast<void*>(t.verify_ptr), t.bytes / 2, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  }

  // Fill sources, start every transfer together behind the gate, time each on its own stream
  // (the sample's time is the longest), then verify every destination outside the timed region.
  SampleOutcome run_sample(const std::vector<Transfer>& transfers, int copies_per_sample, Timing timing) {
    const std::uint32_t seed = next_seed++;
    for (const Transfer& t : transfers) {
      DeviceScope scope(t.fill_gpu);
      CUDA_CHECK(kernels::launch_fill_pattern(t.fill_ptr, t.bytes, t.pattern_owner, seed, dev(t.fill_gpu).fill_blocks,
                                              dev(t.fill_gpu).lanes[0].get()));
    }
    for (const Transfer& t : transfers) {
      DeviceScope scope(t.fill_gpu);
      CUDA_CHECK(cudaStreamSynchronize(dev(t.fill_gpu).lanes[0].get()));
    }
    SampleOutcome outcome;
    if (timing == Timing::host_clock) {
      const auto begin = std::chrono::steady_clock::now();
      for (const Transfer& t : transfers) {
        DeviceScope scope(t.issuer);
        for (int c = 0; c < copies_per_sample; ++c) issue(t, dev(t.issuer).lanes[t.lane].get());
      }
      for (const Transfer& t : transfers) {
        DeviceScope scope(t.issuer);
        CUDA_CHECK(cudaStreamSynchronize(dev(t.issuer).lanes[t.lane].get()));
      }
      outcome.time_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count();
      inject_corruption(transfers);
      for (const Transfer& t : transfers) {
        outcome.wrong_words += count_wrong(t.verify_gpu, t.verify_ptr, t.bytes, t.pattern_owner, seed);
      }
      return outcome;
    }
    *gate.word(0) = 0;
    *gate.word(1) = 0;
    const auto timeout_ns = static_cast<std::uint64_t>(options.blocker_timeout_s * 1e9);
    {
      kernels::BlockerRelease release(gate.word(0));
      for (const Transfer& t : transfers) {
        DeviceScope scope(t.issuer);
        PerDevice& pd = dev(t.issuer);
        cudaStream_t stream = pd.lanes[t.lane].get();
        CUDA_CHECK(kernels::launch_blocker(gate.word(0), const_cast<int*>(gate.word(1)), timeout_ns, stream));
        CUDA_CHECK(cudaEventRecord(pd.starts[t.lane].get(), stream));
        for (int c = 0; c < copies_per_sample; ++c) issue(t, stream);
        CUDA_CHECK(cudaEventRecord(pd.stops[t.lane].get(), stream));
      }
      if (transfers.size() > 1) {
        // The first transfer's stream waits for every other one to finish and then records the
        // joint stop, so the sample spans from its start to the end of the last copy (one late
        // starter cannot make two short intervals look concurrent).
        const Transfer& first = transfers.front();
        DeviceScope scope(first.issuer);
        PerDevice& pd = dev(first.issuer);
        cudaStream_t stream = pd.lanes[first.lane].get();
        for (std::size_t i = 1; i < transfers.size(); ++i) {
          const Transfer& t = transfers[i];
          CUDA_CHECK(cudaStreamWaitEvent(stream, dev(t.issuer).stops[t.lane].get(), 0));
        }
        CUDA_CHECK(cudaEventRecord(pd.joint_stop.get(), stream));
      }
    }
    for (const Transfer& t : transfers) {
      DeviceScope scope(t.issuer);
      PerDevice& pd = dev(t.issuer);
      CUDA_CHECK(cudaStreamSynchronize(pd.lanes[t.lane].get()));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, pd.starts[t.lane].get(), pd.stops[t.lane].get()));
      outcome.time_us = std::max(outcome.time_us, static_cast<double>(ms) * 1e3);
    }
    if (transfers.size() > 1) {
      // From every start on the first transfer's GPU to the joint stop (events of one GPU only).
      const int joint_gpu = transfers.front().issuer;
      DeviceScope scope(joint_gpu);
      for (const Transfer& t : transfers) {
        if (t.issuer != joint_gpu) continue;
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, dev(joint_gpu).starts[t.lane].get(), dev(joint_gpu).joint_stop.get()));
        outcome.time_us = std::max(outcome.time_us, static_cast<double>(ms) * 1e3);
      }
    }
    outcome.gate_timed_out = *gate.word(1) != 0;
    inject_corruption(transfers);
    for (const Transfer& t : transfers) {
      outcome.wrong_words += count_wrong(t.verify_gpu, t.verify_ptr, t.bytes, t.pattern_owner, seed);
    }
    return outcome;
  }

  // The slowdown test knob (bench/core/slowdown_injection.hpp) for copies: each copy moves extra_bytes more than it
  // reports, calibrated on this measurement's own time per copy (the fastest of seven samples, as the smoke's best-of-N
  // estimator reads a copy: a median of three scattered the local copies' calibration from +1% to +11% for 5% asked on
  // an H100; three corrections from measurement), then left on for its warm-up and timed samples;
  // details.injected_slowdown records it. No kernel
  // is added (a spin kernel after a 40 us copy costs 2-4 us of its own, more than 5% of it: measured on an H100).
  // Calibration samples are verified like any other and never timed into the result.
  void calibrate_slowdown(Measurement& m, const std::vector<Transfer>& transfers, int copies_per_sample, Timing timing) {
    const auto probe = [&](std::uint64_t extra) {
      extra_bytes = extra;
      std::vector<double> times;
      for (int k = 0; k < 7; ++k) times.push_back(run_sample(transfers, copies_per_sample, timing).time_us / copies_per_sample);
      return *std::min_element(times.begin(), times.end());
    };
    const std::uint64_t bytes = transfers.front().bytes;
    const std::uint64_t limit = max_extra_bytes(bytes);
    const double base_us = probe(0);
    const double wanted_us = base_us * (1.0 + options.slowdown->pct / 100.0);
    const double bytes_per_us = static_cast<double>(bytes) / base_us;
    double extra = static_cast<double>(bytes) * options.slowdown->pct / 100.0;
    for (int round = 0; round < 3; ++round) {
      const double measured = probe(std::min<std::uint64_t>(limit, static_cast<std::uint64_t>(extra) / 16 * 16));
      extra = corrected_delay(extra, 1, bytes_per_us, wanted_us, measured);
    }
    const std::uint64_t chosen = std::min<std::uint64_t>(limit, static_cast<std::uint64_t>(extra) / 16 * 16);
    const double achieved = (probe(chosen) / base_us - 1.0) * 100.0;
    m.details["injected_slowdown"] = {{"pct", options.slowdown->pct}, {"extra_bytes_per_copy", chosen},
                                      {"base_time_us", base_us}, {"calibrated_pct", achieved},
                                      {"method", "test knob CCLBENCH_INJECT_SLOWDOWN: each copy moves extra bytes "
                                                 "beyond the ones counted, calibrated to the percentage asked for"}};
  }

  // Warm-up then timed samples of one measurement; fills m's samples, stats and status.
  void sample_loop(Measurement& m, const std::vector<Transfer>& transfers, int copies_per_sample, Metric metric,
                   std::uint64_t bytes_counted, Timing timing = Timing::gated_events) {
    m.details["copies_per_sample"] = copies_per_sample;
    m.details["timing"] = timing == Timing::gated_events
                              ? "CUDA events after a host-released start gate; concurrent copies: from the first "
                                "stream's start until all copies have finished (and at least the longest stream)"
                              : "host clock around issue + synchronize (driver-staged copies need the host thread)";
    struct ExtraOff {
      std::uint64_t& extra;
      ~ExtraOff() { extra = 0; }
    } extra_off{extra_bytes};
    if (options.slowdown) calibrate_slowdown(m, transfers, copies_per_sample, timing);
    std::uint64_t wrong_total = 0;
    const int total = options.warmup + options.repetitions;
    for (int i = 0; i < total; ++i) {
      const SampleOutcome outcome = run_sample(transfers, copies_per_sample, timing);
      ++m.verified_samples;
      wrong_total += outcome.wrong_words;
      m.wrong_words = wrong_total;
      if (outcome.wrong_words != 0) {
        m.status = Status::failed;
        m.reason = "verification failed: " + std::to_string(outcome.wrong_words) + " wrong words after sample " +
                   std::to_string(i + 1) + " of " + std::to_string(total) + " (data corrupted or copy incomplete)";
        m.samples.clear();
        m.sample_time_us.clear();
        return;
      }
      if (outcome.gate_timed_out) {
        m.status = Status::failed;
        m.reason = "start gate timed out before the host released it (--blocker-timeout " +
                   std::to_string(options.blocker_timeout_s) + " s): copies did not start together";
        m.samples.clear();
        m.sample_time_us.clear();
        return;
      }
      if (i < options.warmup) continue;
      if (!(outcome.time_us > 0)) {
        m.status = Status::error;
        m.reason = "event time of a sample is not positive";
        m.samples.clear();
        m.sample_time_us.clear();
        return;
      }
      const double per_copy_us = outcome.time_us / copies_per_sample;
      m.sample_time_us.push_back(per_copy_us);
      m.samples.push_back(metric == Metric::bandwidth_gbps ? gbps(bytes_counted, per_copy_us) : per_copy_us);
    }
    m.status = Status::ok;
    m.value = summarize(m.samples);
    m.time_us = summarize(m.sample_time_us);
    if (metric == Metric::bandwidth_gbps) m.bytes_counted_per_copy = bytes_counted;
  }

  Transfer device_transfer(Op op, int issuer, int lane, DeviceBuffer& dst, const DeviceBuffer& src, std::uint64_t bytes) {
    return Transfer{op,     issuer,     lane, dst.get(), dst.device(), src.get(), src.device(), bytes,
                    static_cast<std::uint32_t>(src.device()), src.device(), src.get(), dst.device(), dst.get()};
  }

  void measure_pair(const TestInfo& test, int src, int dst, std::uint64_t bytes, Measurement& m) {
    using enum TestId;
    const bool staged = test.id == d2d_staged_uni || test.id == d2d_staged_bi;
    if (src != dst) {
      if (staged) {
        disable_peer(src, dst);
        m.details["peer_access"] = "disabled";
      } else {
        if (auto why = enable_peer(src, dst)) {
          m.status = Status::skipped;
          m.reason = *why;
          return;
        }
        m.details["peer_access"] = "enabled";
      }
    }
    if (test.id == d2d_sm_latency) return measure_chase(src, dst, m);

    const bool bi = test.id == d2d_ce_write_bi || test.id == d2d_ce_read_bi || test.id == d2d_sm_write_bi ||
                    test.id == d2d_sm_read_bi || test.id == d2d_staged_bi;
    const bool read = test.id == d2d_ce_read_uni || test.id == d2d_ce_read_bi || test.id == d2d_sm_read_uni ||
                      test.id == d2d_sm_read_bi;
    const bool sm = test.id == d2d_sm_write_uni || test.id == d2d_sm_read_uni || test.id == d2d_sm_write_bi ||
                    test.id == d2d_sm_read_bi;
    const Op op = sm ? Op::sm_copy : (src == dst ? Op::ce_local : Op::ce_peer);

    DeviceBuffer forward_src(src, buffer_bytes(bytes));
    DeviceBuffer forward_dst(dst, buffer_bytes(bytes));
    std::vector<Transfer> transfers{device_transfer(op, read ? dst : src, 0, forward_dst, forward_src, bytes)};
    std::optional<DeviceBuffer> backward_src, backward_dst;
    if (bi) {
      backward_src.emplace(dst, buffer_bytes(bytes));
      backward_dst.emplace(src, buffer_bytes(bytes));
      transfers.push_back(device_transfer(op, read ? src : dst, 0, *backward_dst, *backward_src, bytes));
    }
    m.details["issued_by"] = read ? "destination" : "source";
    // The diagonal: a copy within one GPU (bytes copied / time, as nvbandwidth's device_local_copy).
    if (src == dst) m.details["local_copy"] = true;
    if (sm) m.details["sm_copy_blocks"] = dev(transfers.front().issuer).copy_blocks;
    if (test.metric == Metric::latency_us) return sample_loop(m, transfers, options.latency_copies, test.metric, 0);
    sample_loop(m, transfers, copies_for(bytes), test.metric, bi ? 2 * bytes : bytes, staged ? Timing::host_clock : Timing::gated_events);
  }

  // A random single-cycle chain over `holder`'s memory, built once per holder and test.
  struct Chain {
    int holder = -1;
    std::vector<std::uint64_t> next;  // node index -> next node index
    std::optional<DeviceBuffer> memory;
  };
  Chain chain;

  Chain& chain_for(int holder) {
    if (chain.holder == holder) return chain;
    chain.memory.reset();
    chain.holder = -1;
    const std::uint64_t stride = options.chase_stride;
    const std::uint64_t nodes = options.chase_bytes / stride;
    // Sattolo's shuffle: one cycle through every node, so the chain never closes early.
    chain.next.resize(nodes);
    for (std::uint64_t i = 0; i < nodes; ++i) chain.next[i] = i;
    std::mt19937_64 random(0x5eed0000u + static_cast<unsigned>(holder));
    for (std::uint64_t i = nodes - 1; i > 0; --i) {
      std::uniform_int_distribution<std::uint64_t> pick(0, i - 1);
      std::swap(chain.next[i], chain.next[pick(random)]);
    }
    std::vector<std::uint64_t> image(options.chase_bytes / sizeof(std::uint64_t), 0);
    for (std::uint64_t i = 0; i < nodes; ++i) image[i * stride / sizeof(std::uint64_t)] = chain.next[i] * stride;
    chain.memory.emplace(holder, options.chase_bytes);
    DeviceScope scope(holder);
    CUDA_CHECK(cudaMemcpy(chain.memory->get(), image.data(), options.chase_bytes, cudaMemcpyHostToDevice));
    // The upload leaves the chain's tail in the holder's L2; overwrite L2 with other data so the
    // first runner's loads go to DRAM like everyone else's.
    const std::size_t flush_bytes = std::max<std::size_t>(2 * devices[static_cast<std::size_t>(holder)].l2_bytes, 1u << 20);
    DeviceBuffer flush(holder, flush_bytes);
    CUDA_CHECK(cudaMemset(flush.get(), 0x5a, flush_bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    chain.holder = holder;
    return chain;
  }

  // Single-thread dependent loads by `runner` over the chain in `holder`'s memory. Each runner
  // walks its own stretch of the cycle (runner index x samples x loads nodes in), so no runner
  // re-reads lines an earlier one left in a cache.
  void measure_chase(int runner, int holder, Measurement& m) {
    Chain& c = chain_for(holder);
    const std::uint64_t stride = options.chase_stride;
    const std::uint64_t nodes = c.next.size();
    const std::uint64_t loads = options.chase_loads;
    const int total = options.warmup + options.repetitions;
    const std::uint64_t skip = static_cast<std::uint64_t>(runner) * static_cast<std::uint64_t>(total) * loads;
    std::uint64_t host_position = 0;  // byte offset of the current node
    for (std::uint64_t step = 0; step < skip % nodes; ++step) host_position = c.next[host_position / stride] * stride;

    DeviceScope scope(runner);
    PerDevice& pd = dev(runner);
    cudaStream_t stream = pd.lanes[0].get();
    auto* position = static_cast<std::uint64_t*>(pd.chase_position.get());
    CUDA_CHECK(cudaMemcpyAsync(position, &host_position, sizeof host_position, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    m.details["chase_stride_bytes"] = stride;
    m.details["chase_nodes"] = nodes;
    m.details["loads_per_sample"] = loads;
    m.details["nodes_revisited"] = skip + static_cast<std::uint64_t>(total) * loads > nodes;
    m.details["l2_bytes_of_holder"] = devices[static_cast<std::size_t>(holder)].l2_bytes;
    m.details["timing"] = "CUDA events around one single-thread kernel of loads_per_sample dependent loads";
    for (int i = 0; i < total; ++i) {
      std::uint64_t expected = host_position;
      for (std::uint64_t step = 0; step < loads; ++step) expected = c.next[expected / stride] * stride;
      CUDA_CHECK(cudaEventRecord(pd.starts[0].get(), stream));
      CUDA_CHECK(kernels::launch_pointer_chase(c.memory->get(), position, loads, stream));
      CUDA_CHECK(cudaEventRecord(pd.stops[0].get(), stream));
      CUDA_CHECK(cudaMemcpyAsync(&host_position, position, sizeof host_position, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, pd.starts[0].get(), pd.stops[0].get()));
      ++m.verified_samples;
      m.wrong_words = m.wrong_words.value_or(0) + (host_position == expected ? 0 : 1);
      if (host_position != expected) {
        m.status = Status::failed;
        m.reason = "verification failed: the pointer chase ended at offset " + std::to_string(host_position) +
                   ", expected " + std::to_string(expected) + " (sample " + std::to_string(i + 1) + ")";
        m.samples.clear();
        m.sample_time_us.clear();
        return;
      }
      if (i < options.warmup) continue;
      const double time_us = static_cast<double>(ms) * 1e3;
      m.sample_time_us.push_back(time_us);
      m.samples.push_back(time_us * 1e3 / static_cast<double>(loads));
    }
    m.status = Status::ok;
    m.value = summarize(m.samples);
    m.time_us = summarize(m.sample_time_us);
  }

  void measure_device(const TestInfo& test, int d, std::uint64_t bytes, Measurement& m) {
    using enum TestId;
    if (test.id == device_local_copy_ce || test.id == device_local_copy_sm) {
      DeviceBuffer src(d, buffer_bytes(bytes));
      DeviceBuffer dst(d, buffer_bytes(bytes));
      const Op op = test.id == device_local_copy_sm ? Op::sm_copy : Op::ce_local;
      if (op == Op::sm_copy) m.details["sm_copy_blocks"] = dev(d).copy_blocks;
      // Bytes copied / time, as nvbandwidth's device_local_copy (and the pair tests' diagonal).
      return sample_loop(m, {device_transfer(op, d, 0, dst, src, bytes)}, copies_for(bytes), test.metric, bytes);
    }
    const bool remote = test.id == h2d_ce_remote_numa || test.id == d2h_ce_remote_numa || test.id == bi_h2d_d2h_ce_remote_numa;
    const bool to_device = test.id == h2d_ce_local_numa || test.id == h2d_ce_remote_numa;
    const bool bi = test.id == bi_h2d_d2h_ce_local_numa || test.id == bi_h2d_d2h_ce_remote_numa;
    if (!topology) {
      m.status = Status::skipped;
      m.reason = topology_reason;
      return;
    }
    const DeviceInfo& info = devices[static_cast<std::size_t>(d)];
    if (!info.numa_node) {
      m.status = Status::skipped;
      m.reason = "the GPU's NUMA node is unknown: " + info.numa_node_reason;
      return;
    }
    int node = *info.numa_node;
    if (remote) {
      const auto nodes = topology->numa_nodes();
      if (nodes.size() < 2) {
        m.status = Status::skipped;
        m.reason = "one NUMA node on this host: no remote node to bind pinned memory to";
        return;
      }
      node = nodes.front() == *info.numa_node ? nodes[1] : nodes.front();
      m.details["gpu_numa_node"] = *info.numa_node;
    }
    m.host_numa_node = node;
    PinnedNumaBuffer host_a(*topology, node, buffer_bytes(bytes));
    DeviceBuffer device_a(d, buffer_bytes(bytes));
    std::optional<PinnedNumaBuffer> host_b;
    std::optional<DeviceBuffer> device_b;
    std::vector<Transfer> transfers;
    const auto host_owner = static_cast<std::uint32_t>(kHostPatternBase + d);
    auto h2d = [&](PinnedNumaBuffer& host, DeviceBuffer& device, int lane) {
      void* mapped = mapped_pointer(d, host.get());
      return Transfer{Op::ce_h2d, d,      lane,   device.get(), d, host.get(), -1, bytes, host_owner,
                      d,          mapped, d,      device.get()};
    };
    auto d2h = [&](PinnedNumaBuffer& host, DeviceBuffer& device, int lane) {
      void* mapped = mapped_pointer(d, host.get());
      return Transfer{Op::ce_d2h, d,            lane, host.get(), -1, device.get(), d, bytes, static_cast<std::uint32_t>(d),
                      d,          device.get(), d,    mapped};
    };
    if (bi) {
      host_b.emplace(*topology, node, buffer_bytes(bytes));
      device_b.emplace(d, buffer_bytes(bytes));
      transfers.push_back(h2d(host_a, device_a, 0));
      transfers.push_back(d2h(*host_b, *device_b, 1));
    } else {
      transfers.push_back(to_device ? h2d(host_a, device_a, 0) : d2h(host_a, device_a, 0));
    }
    m.details["host_memory"] = host_a.binding_error().empty()
                                   ? "hwloc_alloc_membind BIND strict + cudaHostRegister"
                                   : "hwloc_alloc_membind BIND best effort (strict failed: " + host_a.binding_error() +
                                         ") + cudaHostRegister";
    const auto pages = topology->memory_location(host_a.get(), bytes);
    m.details["host_pages_numa_nodes"] = pages;  // empty: the OS would not say
    sample_loop(m, transfers, copies_for(bytes), test.metric, bi ? 2 * bytes : bytes);
  }
};

Engine::Engine(const Options& options, std::vector<DeviceInfo> devices, const HostTopology* topology,
               std::string topology_reason)
    : state_(std::make_unique<State>(options, std::move(devices), topology, std::move(topology_reason))) {}

Engine::~Engine() = default;

std::vector<Measurement> Engine::run(const TestInfo& test) {
  State& s = *state_;
  const int n = static_cast<int>(s.devices.size());
  std::vector<Measurement> results;
  const auto sizes = sizes_for(s.options, test);
  auto attempt = [&](Measurement& m, auto&& body) {
    try {
      body();
    } catch (const AllocationFailure& e) {  // this size does not fit here; other sizes/tests still run
      m.status = Status::skipped;
      m.reason = std::string("does not fit: ") + e.what();
      m.samples.clear();
      m.sample_time_us.clear();
      m.value.reset();
      m.time_us.reset();
      m.bytes_counted_per_copy.reset();
      (void)cudaGetLastError();
    } catch (const std::bad_alloc&) {
      m.status = Status::skipped;
      m.reason = "does not fit: host memory allocation failed (std::bad_alloc)";
      m.samples.clear();
      m.sample_time_us.clear();
      m.value.reset();
      m.time_us.reset();
      m.bytes_counted_per_copy.reset();
    } catch (const std::exception& e) {  // CUDA errors (FatalError)
      m.status = Status::error;
      m.reason = e.what();
      m.samples.clear();
      m.sample_time_us.clear();
      m.value.reset();
      m.time_us.reset();
      (void)cudaGetLastError();
    }
  };
  if (test.scope == Scope::pair) {
    auto pairs = enumerate_pairs(n, test.diagonal, s.options.pair);
    if (test.id == TestId::d2d_sm_latency) {
      // Holder-major, so each holder's chain is built once.
      std::stable_sort(pairs.begin(), pairs.end(), [](auto a, auto b) { return a.second < b.second; });
    }
    if (pairs.empty()) {
      Measurement m;
      m.test = test.id;
      m.status = Status::skipped;
      m.reason = n < 2 ? "needs 2 GPUs (" + std::to_string(n) + " visible)" : "--pair names one GPU twice";
      results.push_back(std::move(m));
      return results;
    }
    for (std::uint64_t bytes : sizes) {
      for (auto [src, dst] : pairs) {
        Measurement m;
        m.test = test.id;
        m.src = Endpoint::device(src);
        m.dst = Endpoint::device(dst);
        m.bytes = bytes;
        s.report_progress(test, src, dst, bytes);
        attempt(m, [&] { s.measure_pair(test, src, dst, bytes, m); });
        results.push_back(std::move(m));
      }
    }
    // Give the chain's memory back before the next test.
    s.chain.memory.reset();
    s.chain.holder = -1;
    s.chain.next = {};
    return results;
  }
  std::vector<int> gpus;
  if (s.options.pair) {
    gpus.push_back(s.options.pair->first);
    if (s.options.pair->second != s.options.pair->first) gpus.push_back(s.options.pair->second);
    for (int g : gpus) {
      if (g >= n) throw UsageError("--pair: GPU " + std::to_string(g) + " does not exist (" + std::to_string(n) + " visible)");
    }
  } else {
    for (int d = 0; d < n; ++d) gpus.push_back(d);
  }
  const bool host_test = test.id != TestId::device_local_copy_ce && test.id != TestId::device_local_copy_sm;
  const bool to_host = test.id == TestId::d2h_ce_local_numa || test.id == TestId::d2h_ce_remote_numa;
  for (std::uint64_t bytes : sizes) {
    for (int d : gpus) {
      Measurement m;
      m.test = test.id;
      m.src = host_test && !to_host ? Endpoint::host() : Endpoint::device(d);
      m.dst = to_host ? Endpoint::host() : Endpoint::device(d);
      m.bytes = bytes;
      s.report_progress(test, d, d, bytes);
      attempt(m, [&] { s.measure_device(test, d, bytes, m); });
      results.push_back(std::move(m));
    }
  }
  return results;
}

}  // namespace cclbench::p2p
