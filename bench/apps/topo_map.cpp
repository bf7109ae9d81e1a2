// topo_map: the GPU-NIC-NUMA matrix of this machine (or of an hwloc XML file) in the layout of
// `nvidia-smi topo -m`, the NICs NCCL would pick per GPU under NCCL_IB_HCA, and --json for the
// full model (results_schema/topology.schema.json).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/version.hpp"
#include "topology/nccl_hca.hpp"
#include "topology/nvlink.hpp"
#include "topology/topology.hpp"

#ifdef CCLBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr const char* kProgram = "topo_map";

constexpr const char* kHelp =
    "usage: topo_map [--xml FILE] [--hca SPEC] [--json FILE] [--sysfs-root DIR] [--gpu-bus-ids LIST]\n"
    "\n"
    "Prints the GPU/NIC path matrix in the layout of `nvidia-smi topo -m` (X, PIX, PXB, PHB, NODE, SYS),\n"
    "then the NICs NCCL may use for each GPU, nearest first.\n"
    "\n"
    "  --xml FILE          read an hwloc 2.x XML topology (lstopo --of xml) instead of this machine;\n"
    "                      nothing of the live machine is queried (no sysfs, no CUDA)\n"
    "  --hca SPEC          NCCL_IB_HCA syntax: '^' excludes, '=' exact names, else prefixes; name[:port],\n"
    "                      comma-separated. Default: the NCCL_IB_HCA environment variable\n"
    "  --json FILE         also write the full model as JSON (written atomically)\n"
    "  --sysfs-root DIR    where to read /sys/class/infiniband port state, link layer and rate\n"
    "                      (default /sys for this machine; with --xml, only when given)\n"
    "  --gpu-bus-ids LIST  comma-separated GPU PCI bus ids in CUDA order (default: from CUDA on this\n"
    "                      machine, else NVIDIA display/3D PCI devices in bus-id order)\n"
    "  --help              this text\n"
    "\n"
    "Exit status: 0 ok, 2 bad input (flag, XML file, NCCL_IB_HCA spec), 5 system error.\n";

struct Options {
  std::optional<std::string> xml;
  std::optional<std::string> hca;
  std::optional<std::string> json;
  std::optional<std::string> sysfs_root;
  std::vector<std::string> gpu_bus_ids;
  bool help = false;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find(',', start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty()) throw cclbench::UsageError("--gpu-bus-ids: empty entry in '" + text.substr(0, 64) + "'");
    items.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

Options parse_args(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw cclbench::UsageError(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--xml") {
      options.xml = value();
      if (options.xml->empty()) throw cclbench::UsageError("--xml needs a file name");
    } else if (arg == "--hca") {
      options.hca = value();
    } else if (arg == "--json") {
      options.json = value();
      if (options.json->empty()) throw cclbench::UsageError("--json needs a file name");
    } else if (arg == "--sysfs-root") {
      options.sysfs_root = value();
      if (options.sysfs_root->empty()) throw cclbench::UsageError("--sysfs-root needs a directory");
    } else if (arg == "--gpu-bus-ids") {
      for (const std::string& id : split_list(value())) {
        options.gpu_bus_ids.push_back(cclbench::topology::normalize_pci_bus_id(id));
      }
    } else {
      throw cclbench::UsageError("unknown argument '" + std::string(arg.substr(0, 64)) + "' (see --help)");
    }
  }
  return options;
}

// GPU bus ids in CUDA order; empty (with a note) when CUDA has none, so the PCI class scan is used.
std::vector<std::string> cuda_bus_ids(std::string& note, std::vector<std::string>& names) {
#ifdef CCLBENCH_HAVE_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    note = std::string("CUDA reports no device (") + (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
           "): GPUs found by PCI class scan";
    return {};
  }
  std::vector<std::string> ids;
  for (int device = 0; device < count; ++device) {
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
      note = "cudaDeviceGetPCIBusId failed: GPUs found by PCI class scan";
      return {};
    }
    ids.push_back(cclbench::topology::normalize_pci_bus_id(bus_id));
    cudaDeviceProp properties{};
    names.push_back(cudaGetDeviceProperties(&properties, device) == cudaSuccess ? std::string(properties.name) : std::string());
  }
  note = "GPU bus ids from CUDA (CUDA device order)";
  return ids;
#else
  (void)names;
  note = "built without CUDA: GPUs found by PCI class scan";
  return {};
#endif
}

int run(int argc, char** argv) {
  using namespace cclbench::topology;
  const Options options = parse_args(argc, argv);
  if (options.help) {
    std::cout << kHelp;
    return 0;
  }
  std::string hca_text;
  if (options.hca) {
    hca_text = *options.hca;
  } else if (const char* env = std::getenv("NCCL_IB_HCA")) {
    hca_text = env;
  }
  const HcaSpec spec = parse_nccl_ib_hca(hca_text);
  if (options.json) cclbench::check_writable_output(*options.json, "--json");

  MapperOptions mapper;
  std::string note;
  std::string nvlink_note = "NVLink unknown (an hwloc XML records no NVLink counts)";
  std::optional<HwlocTopology> topology;
  if (options.xml) {
    topology.emplace(HwlocTopology::load_xml_file(*options.xml));
    mapper.sysfs_root = options.sysfs_root.value_or("");  // an offline file never reads this machine's sysfs
    mapper.gpu_pci_bus_ids = options.gpu_bus_ids;
    note = options.gpu_bus_ids.empty() ? "offline XML: GPUs found by PCI class scan" : "GPU bus ids from --gpu-bus-ids";
  } else {
    topology.emplace(HwlocTopology::load_live());
    mapper.sysfs_root = options.sysfs_root.value_or("/sys");
    if (!options.gpu_bus_ids.empty()) {
      mapper.gpu_pci_bus_ids = options.gpu_bus_ids;
      note = "GPU bus ids from --gpu-bus-ids";
    } else {
      mapper.gpu_pci_bus_ids = cuda_bus_ids(note, mapper.gpu_names);
    }
    // NV# as nvidia-smi shows it; PCIe-only machines simply have no active links.
    if (const auto links = query_nvlink_counts(mapper.gpu_pci_bus_ids, nvlink_note)) {
      mapper.nvlink_counts = links->links;
      nvlink_note = "NVLink counts from " + links->source;
    }
  }
  const NodeTopology model = build_node_topology(*topology, mapper);
  if (!model.has_pci) {
    const std::string message = "no PCI information in the topology of " +
                                (options.xml ? *options.xml : std::string("this machine")) +
                                " (hwloc found no PCI device; an XML must be exported with I/O devices)";
    if (options.xml) throw cclbench::UsageError(message);
    throw cclbench::FatalError(cclbench::ExitCode::runtime_error, message);
  }
  nlohmann::json doc = to_json(model, spec);
  doc["tool"] = {{"name", kProgram}, {"version", cclbench::kToolVersion}, {"git_commit", cclbench::kGitCommit}};
  doc["gpu_discovery_note"] = note;
  doc["nvlink_note"] = nvlink_note;
  if (options.json) cclbench::write_file_atomic(*options.json, doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::cout << format_topo_matrix(model, spec) << "\nSource: " << model.source << " (hwloc " << model.hwloc_version
            << "); " << note << "; " << nvlink_note << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cclbench::UsageError& error) {
    std::cerr << kProgram << ": error: " << error.what() << '\n';
    return cclbench::to_int(cclbench::ExitCode::usage);
  } catch (const cclbench::FatalError& error) {
    std::cerr << kProgram << ": error: " << error.what() << '\n';
    return cclbench::to_int(error.code());
  } catch (const std::exception& error) {
    std::cerr << kProgram << ": error: " << error.what() << '\n';
    return cclbench::to_int(cclbench::ExitCode::runtime_error);
  }
}
