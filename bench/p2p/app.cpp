#include "bench/p2p/app.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>

#include <cuda_runtime.h>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/p2p/engine.hpp"
#include "bench/p2p/numa.hpp"
#include "bench/p2p/options.hpp"
#include "bench/p2p/report.hpp"
#include "topology/binding.hpp"
#include "topology/nvlink.hpp"
#include "topology/topology.hpp"

namespace cclbench::p2p {
namespace {

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown-host";
  std::string name = buffer;
  return name.empty() ? "unknown-host" : name;
}

nlohmann::json settings_json(const Options& options) {
  nlohmann::json sizes = nullptr;
  if (options.min_bytes || options.max_bytes) {
    sizes = {{"min_bytes", options.min_bytes ? nlohmann::json(*options.min_bytes) : nlohmann::json(nullptr)},
             {"max_bytes", options.max_bytes ? nlohmann::json(*options.max_bytes) : nlohmann::json(nullptr)},
             {"step_factor", options.step_factor}};
  }
  return {{"sweep", sizes},
          {"pair", options.pair ? nlohmann::json({options.pair->first, options.pair->second}) : nlohmann::json(nullptr)},
          {"chase_bytes", options.chase_bytes},
          {"chase_stride_bytes", options.chase_stride},
          {"chase_loads_per_sample", options.chase_loads},
          {"latency_copies_per_sample", options.latency_copies},
          {"sm_copy_blocks", options.sm_blocks == 0 ? nlohmann::json("auto") : nlohmann::json(options.sm_blocks)},
          {"blocker_timeout_s", options.blocker_timeout_s},
          {"timing", "CUDA events recorded after a host-released start gate around a batch of back-to-back copies "
                     "(1 per sample from 32 MiB, up to 256 below); concurrent copies: longest stream; staged copies "
                     "(P2P disabled): host clock, see each result's details.timing"},
          {"inject_corruption", options.inject_corruption},
          {"inject_slowdown", options.slowdown ? nlohmann::json(options.slowdown->text) : nlohmann::json(nullptr)},
          {"verification", "every sample (warm-up included), outside the timed region: pattern of (source, sample) "
                           "checked on the destination after the sample's last copy"}};
}

int env_int(const char* name, int fallback);

// This process's rank on its host under Open MPI, MPICH/Hydra or Slurm; 0 when not launched so.
int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const int value = env_int(name, -1);
    if (value >= 0) return value;
  }
  return 0;
}

// Launched with more than one process (each host writes its own matrix).
bool several_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    if (env_int(name, 1) > 1) return true;
  }
  return false;
}

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return (*end == '\0' && value >= 0 && value < (1 << 30)) ? static_cast<int>(value) : fallback;
}

// Path class of every GPU pair from the topology library: the hwloc PCIe path, or NV# where NVML
// (opened at run time) reports NVLinks between the two GPUs.
void fill_path_classes(Report& report) {
  std::string why;
  try {
    const auto hwloc = topology::HwlocTopology::load_live();
    topology::MapperOptions mapper;
    for (const DeviceInfo& d : report.devices) {
      mapper.gpu_pci_bus_ids.push_back(d.pci_bus_id);
      mapper.gpu_names.push_back(d.name);
    }
    std::string nvlink_reason;
    if (const auto links = topology::query_nvlink_counts(mapper.gpu_pci_bus_ids, nvlink_reason)) {
      mapper.nvlink_counts = links->links;
      report.path_class_source = "topology library: hwloc PCIe path (X/PIX/PXB/PHB/NODE/SYS), NV# from " + links->source;
    } else {
      report.path_class_source = "topology library: hwloc PCIe path (X/PIX/PXB/PHB/NODE/SYS); NVLink unknown (" +
                                 nvlink_reason + "), so an NVLink pair shows its PCIe path";
    }
    mapper.sysfs_root = "/sys";
    const topology::NodeTopology model = topology::build_node_topology(hwloc, mapper);
    for (PairCapability& c : report.capability) {
      const auto path = model.gpu_gpu(c.src, c.dst);
      if (path) {
        c.path_class = topology::to_string(*path);
        c.path_class_reason.clear();
      } else {
        c.path_class_reason = "GPU " + std::to_string(c.src) + " or " + std::to_string(c.dst) +
                              " not found in the hwloc topology (containers often hide PCI devices)";
      }
    }
    return;
  } catch (const std::exception& e) {
    why = std::string("topology library failed: ") + e.what();
  }
  report.path_class_source = "none: " + why;
  for (PairCapability& c : report.capability) c.path_class_reason = why;
}

// The binding record of this process (CPU/memory binding, against the first GPU it measures).
void fill_binding(Report& report, const Options& options) {
  try {
    topology::BindingInput input;
    input.host = report.host;
    input.rank = std::max({env_int("OMPI_COMM_WORLD_RANK", 0), env_int("PMI_RANK", 0), env_int("SLURM_PROCID", 0)});
    input.local_rank = local_rank();
    const int gpu = options.pair ? options.pair->first : 0;
    if (gpu < static_cast<int>(report.devices.size())) {
      input.gpu_pci_bus_id = report.devices[static_cast<std::size_t>(gpu)].pci_bus_id;
      report.binding_gpu = gpu;
    }
    report.binding = topology::capture_binding_record(input);
  } catch (const std::exception& e) {
    report.binding.reset();
    report.binding_gpu.reset();
    report.binding_reason = std::string("binding record not available: ") + e.what();
  }
}

void write_outputs(const Report& report, const std::string& json_path, const std::string& csv_path) {
  if (!json_path.empty()) write_file_atomic(json_path, to_json(report).dump(2) + "\n");
  if (!csv_path.empty()) write_file_atomic(csv_path, to_csv(report));
}

}  // namespace

int run_p2p_matrix(int argc, const char* const argv[]) {
  const Options options = parse_options(argc, argv);
  if (options.help) {
    std::cout << help_text();
    return 0;
  }
  if (options.list) {
    std::cout << list_text();
    return 0;
  }
  // Under mpirun (or srun) one process per host measures; the others have nothing to do.
  if (local_rank() > 0) return 0;

  Report report;
  report.host = host_name();
  report.argv = options.argv;
  report.tests = options.tests;
  report.repetitions = options.repetitions;
  report.warmup = options.warmup;
  report.settings = settings_json(options);
  if (options.slowdown) std::cerr << slowdown_injection_warning(*options.slowdown, "p2p_matrix") << std::endl;

  std::string json_path = expand_host(options.json_path, report.host);
  std::string csv_path = expand_host(options.csv_path, report.host);
  if (!options.out_dir.empty()) {
    make_directories(options.out_dir);
    json_path = options.out_dir + "/" + report.host + ".json";
    csv_path = options.out_dir + "/" + report.host + ".csv";
  }
  if (several_processes() && options.out_dir.empty() &&
      ((!options.json_path.empty() && options.json_path.find("%h") == std::string::npos) ||
       (!options.csv_path.empty() && options.csv_path.find("%h") == std::string::npos))) {
    std::cerr << "p2p_matrix: warning: several processes and a file name without %h: on a shared file system the "
                 "hosts overwrite each other's matrix (use --out DIR or %h)" << std::endl;
  }
  if (!json_path.empty()) check_writable_output(json_path, "--json");
  if (!csv_path.empty()) check_writable_output(csv_path, "--csv");

  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) report.driver_version = driver;  // 0: no driver
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) report.runtime_version = runtime;
  int device_count = 0;
  const cudaError_t count_result = cudaGetDeviceCount(&device_count);
  if (count_result != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    report.no_device_reason = std::string("no CUDA device: ") +
                              (count_result != cudaSuccess ? cudaGetErrorString(count_result) : "cudaGetDeviceCount returned 0");
    for (TestId id : options.tests) {
      Measurement m;
      m.test = id;
      m.status = Status::skipped;
      m.reason = report.no_device_reason;
      report.results.push_back(std::move(m));
    }
    fill_binding(report, options);
    write_outputs(report, json_path, csv_path);
    throw FatalError(ExitCode::nothing_measured, "nothing measured: " + report.no_device_reason);
  }
  if (options.pair && (options.pair->first >= device_count || options.pair->second >= device_count)) {
    throw UsageError("--pair " + std::to_string(options.pair->first) + "," + std::to_string(options.pair->second) +
                     ": only " + std::to_string(device_count) + " GPU(s) visible");
  }

  std::unique_ptr<HostTopology> topology;
  std::string topology_reason;
  try {
    topology = std::make_unique<HostTopology>();
    report.numa_node_count = static_cast<int>(topology->numa_nodes().size());
  } catch (const FatalError& e) {
    topology_reason = e.what();
    report.numa_reason = topology_reason;
  }
  report.devices = query_devices(device_count, topology.get());
  report.capability = query_capability(device_count);
  fill_path_classes(report);
  fill_binding(report, options);
  if (report.binding) {
    if (auto warning = topology::binding_warning(*report.binding)) std::cerr << "p2p_matrix: warning: " << *warning << std::endl;
  }
  if (!options.quiet) std::cout << render_capability_text(report) << std::endl;

  Engine engine(options, report.devices, topology.get(), topology_reason);
  for (TestId id : options.tests) {
    auto results = engine.run(test_info(id));
    for (auto& m : results) report.results.push_back(std::move(m));
    if (!options.quiet) std::cout << render_test_text(report, id) << std::endl;  // flushed: long runs show progress
  }
  write_outputs(report, json_path, csv_path);

  int ok = 0, bad = 0;
  for (const Measurement& m : report.results) {
    ok += m.status == Status::ok;
    bad += m.status == Status::failed || m.status == Status::error;
  }
  if (bad > 0) {
    throw FatalError(ExitCode::cases_failed, std::to_string(bad) + " measurement(s) failed or errored (status and reason in the notes" +
                                                 std::string(json_path.empty() ? "" : " and in " + json_path) + ")");
  }
  if (ok == 0) throw FatalError(ExitCode::nothing_measured, "nothing measured: every selected measurement was skipped");
  return 0;
}

}  // namespace cclbench::p2p
