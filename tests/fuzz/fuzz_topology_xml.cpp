// libFuzzer target: hwloc XML topology loading (HwlocTopology::load_xml_text), then the mapper and
// the renderers topo_map runs on it. Accepted outcomes: a model, or a UsageError/FatalError naming
// the input. A finding is another exception, a sanitizer report or a hang (-timeout).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <hwloc.h>

#include "bench/core/errors.hpp"
#include "topology/nccl_hca.hpp"
#include "topology/topology.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // hwloc's XML backends complain on stderr about malformed files; that is expected here, and
  // libFuzzer's own reports must stay visible on stderr.
  setenv("HWLOC_HIDE_ERRORS", "2", 1);
  // hwloc reference-counts its component registry per topology: the first hwloc_topology_init
  // dlopens every plugin (libhwloc-plugins: pci, libxml, ...) and the last destroy dlcloses them.
  // Without a topology that outlives the inputs, each input paid a full plugin load and unload
  // (half of all CPU time, mostly dlopen relocations and munmap TLB shootdowns). This one is never
  // loaded or used; it only keeps the registry, and so the same plugins, alive for the process.
  static hwloc_topology_t keep_components_loaded = nullptr;
  if (hwloc_topology_init(&keep_components_loaded) != 0) {
    std::fputs("fuzz_topology_xml: hwloc_topology_init failed\n", stderr);
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 256 * 1024) return 0;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  try {
    const auto topology = cclbench::topology::HwlocTopology::load_xml_text(xml, "fuzz.xml");
    cclbench::topology::MapperOptions options;  // no sysfs: offline XML, as topo_map --xml
    const auto model = cclbench::topology::build_node_topology(topology, options);
    const auto spec = cclbench::topology::parse_nccl_ib_hca("=mlx5_0:1,mlx5_3:1");
    (void)cclbench::topology::to_json(model, spec).dump();
    (void)cclbench::topology::format_topo_matrix(model, spec);
    for (std::size_t gpu = 0; gpu < model.gpus.size(); ++gpu) (void)model.nic_choices(static_cast<int>(gpu), spec);
  } catch (const cclbench::UsageError&) {
  } catch (const cclbench::FatalError&) {
  }
  return 0;
}
