#include "topology/topology.hpp"

#include <cstring>
#include <hwloc.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "topology/hwloc_bitmap.hpp"

namespace cclbench::topology {
namespace {

Bitmap make_bitmap() {
  Bitmap bitmap(hwloc_bitmap_alloc());
  if (!bitmap) throw FatalError(ExitCode::runtime_error, "out of memory allocating an hwloc bitmap");
  return bitmap;
}

std::vector<unsigned> indices(hwloc_const_bitmap_t bitmap) {
  std::vector<unsigned> result;
  if (bitmap == nullptr || hwloc_bitmap_iszero(bitmap) || hwloc_bitmap_weight(bitmap) < 0) return result;
  int index = -1;
  while ((index = hwloc_bitmap_next(bitmap, index)) != -1) result.push_back(static_cast<unsigned>(index));
  return result;
}

std::string format_bus_id(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return text;
}

std::string bus_id_of(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return format_bus_id(a.domain, a.bus, a.dev, a.func);
}

const char* info_value(hwloc_obj_t obj, const char* name) {
  return obj == nullptr ? nullptr : hwloc_obj_get_info_by_name(obj, name);
}

// hwloc's XML import stores whatever number a file gives into its enum fields; loading an
// enumerator outside the enum's range is undefined behaviour, so read them as plain integers.
template <typename Enum>
int enum_bits(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value = 0;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

bool is_host_bridge(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_BRIDGE && enum_bits(obj->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
}

bool is_pci_bridge(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_BRIDGE && enum_bits(obj->attr->bridge.upstream_type) == HWLOC_OBJ_BRIDGE_PCI;
}

// Depth of a PCI-PCI bridge below its host bridge: a root port is 1, a switch's upstream port 2,
// its downstream ports 3, a second-level switch 4/5, ...
int pci_bridge_depth(hwloc_obj_t bridge) {
  int depth = 0;
  for (hwloc_obj_t obj = bridge; obj != nullptr && is_pci_bridge(obj); obj = obj->parent) ++depth;
  return depth;
}

// A PCIe switch appears in hwloc as an upstream-port bridge whose children are downstream-port
// bridges. nvidia-smi and NCCL count a switch as ONE bridge, so every bridge is mapped to the
// switch it belongs to (its upstream port, at even depth); a root port stands alone.
hwloc_obj_t switch_of(hwloc_obj_t bridge) {
  const int depth = pci_bridge_depth(bridge);
  if (depth <= 1) return bridge;
  hwloc_obj_t obj = bridge;
  for (int d = depth; d > 2 * (depth / 2); --d) obj = obj->parent;
  return obj;
}

// Where a device meets the CPU side: the nodeset of its first non-I/O ancestor.
hwloc_const_nodeset_t local_nodeset(hwloc_topology_t topology, hwloc_obj_t obj) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topology, obj);
  return anchor == nullptr ? nullptr : anchor->nodeset;
}

hwloc_const_cpuset_t local_cpuset(hwloc_topology_t topology, hwloc_obj_t obj) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topology, obj);
  return anchor == nullptr ? nullptr : anchor->cpuset;
}

// hwloc_get_common_ancestor_obj() compares depths, which I/O objects do not have; walk parents.
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  std::set<hwloc_obj_t> above_a;
  for (hwloc_obj_t o = a; o != nullptr; o = o->parent) above_a.insert(o);
  for (hwloc_obj_t o = b; o != nullptr; o = o->parent) {
    if (above_a.count(o) != 0) return o;
  }
  return nullptr;
}

Path pci_path(hwloc_topology_t topology, hwloc_obj_t a, hwloc_obj_t b) {
  if (a == b) return Path{PathClass::pix, 0};  // two functions of one device (e.g. dual-port NIC)
  hwloc_obj_t common = common_ancestor(a, b);
  if (common != nullptr && hwloc_obj_type_is_io(common->type)) {
    if (is_host_bridge(common)) return Path{PathClass::phb, 0};
    if (!is_pci_bridge(common)) return Path{PathClass::pix, 0};
    std::set<hwloc_obj_t> switches;
    for (hwloc_obj_t side : {a, b}) {
      for (hwloc_obj_t o = side->parent; o != nullptr && o != common; o = o->parent) {
        if (is_pci_bridge(o)) switches.insert(switch_of(o));
      }
    }
    switches.insert(switch_of(common));
    return Path{switches.size() <= 1 ? PathClass::pix : PathClass::pxb, 0};
  }
  // Different host bridges: within one NUMA node or across the SMP interconnect.
  hwloc_const_nodeset_t na = local_nodeset(topology, a);
  hwloc_const_nodeset_t nb = local_nodeset(topology, b);
  const bool same_single_node = na != nullptr && nb != nullptr && hwloc_bitmap_isequal(na, nb) &&
                                hwloc_bitmap_weight(na) == 1;
  return Path{same_single_node ? PathClass::node : PathClass::sys, 0};
}

// The value of attribute `key` (`cpuset`, not `complete_cpuset`) in an element's tag, if present.
std::optional<std::string_view> attribute_value(std::string_view tag, std::string_view key) {
  const std::string needle = std::string(key) + "=\"";
  for (std::size_t at = tag.find(needle); at != std::string_view::npos; at = tag.find(needle, at + 1)) {
    if (at == 0 || !std::isspace(static_cast<unsigned char>(tag[at - 1]))) continue;
    const std::size_t begin = at + needle.size();
    const std::size_t end = tag.find('"', begin);
    return tag.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
  }
  return std::nullopt;
}

// Whether bitmap `part` lies within bitmap `whole`, both in hwloc's format (already screened), read
// with hwloc's own parser.
bool bitmap_within(std::string_view part, std::string_view whole) {
  const std::unique_ptr<hwloc_bitmap_s, void (*)(hwloc_bitmap_t)> a(hwloc_bitmap_alloc(), hwloc_bitmap_free);
  const std::unique_ptr<hwloc_bitmap_s, void (*)(hwloc_bitmap_t)> b(hwloc_bitmap_alloc(), hwloc_bitmap_free);
  if (!a || !b) throw FatalError(ExitCode::runtime_error, "hwloc_bitmap_alloc failed");
  if (hwloc_bitmap_sscanf(a.get(), std::string(part).c_str()) != 0 ||
      hwloc_bitmap_sscanf(b.get(), std::string(whole).c_str()) != 0) {
    return false;
  }
  return hwloc_bitmap_isincluded(a.get(), b.get()) != 0;
}

// hwloc 2.9 uses the bitmaps of CPU-side objects without checking that the file gave them (a
// NUMANode without complete_nodeset crashes hwloc_topology_load with SIGSEGV), and gives a PU or
// NUMANode without os_index the index 0xFFFFFFFF (a 512 MiB bitmap): refuse such objects first.
// Found by tests/fuzz/fuzz_topology_xml (regression inputs in tests/fuzz/regressions/).
void screen_object(std::string_view tag, const std::string& what) {
  const auto has_attribute = [&](std::string_view key) { return attribute_value(tag, key).has_value(); };
  const std::size_t type_at = tag.find(" type=\"");
  if (type_at == std::string_view::npos) throw UsageError(what + ": malformed hwloc XML (<object> without a type)");
  const std::string_view type = tag.substr(type_at + 7, tag.find('"', type_at + 7) - (type_at + 7));
  if (type == "Bridge" || type == "PCIDev" || type == "OSDev" || type == "Misc") return;  // I/O objects: no sets
  for (const std::string_view key : {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"}) {
    if (!has_attribute(key)) {
      throw UsageError(what + ": malformed hwloc XML (object " + std::string(type.substr(0, 32)) + " has no " +
                       std::string(key) + ")");
    }
  }
  // Every bitmap attribute ("cpuset", "allowed_nodeset", ...) must be hwloc's own format,
  // "0x1234abcd[,0x...]" or "0xf...f[,0x...]": hwloc_bitmap_sscanf asserts (abort) on ",0x1".
  for (std::size_t at = tag.find("set=\""); at != std::string_view::npos; at = tag.find("set=\"", at + 1)) {
    const std::size_t begin = at + 5;
    const std::size_t end = tag.find('"', begin);
    const std::string_view value = tag.substr(begin, end == std::string_view::npos ? 0 : end - begin);
    std::size_t word_start = 0;
    bool ok = !value.empty();
    while (ok && word_start <= value.size()) {
      const std::size_t comma = value.find(',', word_start);
      const std::string_view word = value.substr(word_start, comma == std::string_view::npos ? std::string_view::npos : comma - word_start);
      ok = word.size() > 2 && word.substr(0, 2) == "0x" &&
           (word == "0xf...f" || word.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string_view::npos);
      if (comma == std::string_view::npos) break;
      word_start = comma + 1;
    }
    if (!ok) throw UsageError(what + ": malformed hwloc XML (bad bitmap '" + std::string(value.substr(0, 40)) + "')");
  }
  // hwloc's exports keep cpuset within complete_cpuset and nodeset within complete_nodeset. hwloc
  // 2.9 dereferences NULL loading a cpuset outside (found by fuzz_topology_xml); no export has either.
  for (const auto& [part, whole] : {std::pair<std::string_view, std::string_view>{"cpuset", "complete_cpuset"},
                                    std::pair<std::string_view, std::string_view>{"nodeset", "complete_nodeset"}}) {
    const auto part_value = attribute_value(tag, part);
    const auto whole_value = attribute_value(tag, whole);
    if (part_value && whole_value && !bitmap_within(*part_value, *whole_value)) {
      throw UsageError(what + ": malformed hwloc XML (object " + std::string(type.substr(0, 32)) + ": " +
                       std::string(part) + " is not within " + std::string(whole) + ")");
    }
  }
  if ((type == "PU" || type == "NUMANode") && !has_attribute("os_index")) {
    throw UsageError(what + ": malformed hwloc XML (object " + std::string(type) + " has no os_index)");
  }
}

// Each attribute name once per tag: XML forbids a repeated one, and hwloc's own (non-libxml) parser
// reads them in order, so `type="Machine" type="PCIDev"` would make the screening and hwloc see
// two different objects.
void screen_attribute_names(std::string_view tag, std::size_t name_end, const std::string& what) {
  std::set<std::string_view> seen;
  std::size_t at = name_end;
  while (at < tag.size()) {
    at = tag.find_first_not_of(" \t\r\n/", at);
    if (at == std::string_view::npos) break;
    const std::size_t equals = tag.find('=', at);
    if (equals == std::string_view::npos) break;
    std::string_view attribute = tag.substr(at, equals - at);
    while (!attribute.empty() && std::isspace(static_cast<unsigned char>(attribute.back()))) attribute.remove_suffix(1);
    if (!seen.insert(attribute).second) {
      throw UsageError(what + ": malformed XML (attribute " + std::string(attribute.substr(0, 32)) + " given twice in one tag)");
    }
    const std::size_t open_quote = tag.find_first_of("\"'", equals + 1);
    if (open_quote == std::string_view::npos) break;
    const std::size_t close_quote = tag.find(tag[open_quote], open_quote + 1);
    if (close_quote == std::string_view::npos) break;
    at = close_quote + 1;
  }
}

// ---- XML screening: hwloc's parsers print to stderr and accept some garbage, so refuse obvious
// bad input ourselves with one clear message.
void screen_xml(std::string_view xml, const std::string& what) {
  if (xml.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw UsageError(what + ": the file is empty, not an hwloc XML topology");
  }
  for (unsigned char c : xml) {
    if (c == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
      throw UsageError(what + ": binary data, not an hwloc XML topology");
    }
  }
  // hwloc's exports carry at most `<!DOCTYPE topology SYSTEM "hwloc2.dtd">`, never entity
  // declarations; a file that declares entities is not one of them, and expanding nested entities
  // ("billion laughs") exhausts the XML parser's memory and stack.
  if (xml.find("<!ENTITY") != std::string_view::npos) {
    throw UsageError(what + ": declares XML entities (<!ENTITY), which no hwloc topology export does; refused");
  }
  // Element balance: catches truncated files.
  std::vector<std::string_view> open;
  bool saw_topology = false;
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string_view::npos) {
    if (xml.substr(pos, 4) == "<!--") {
      const std::size_t end = xml.find("-->", pos + 4);
      if (end == std::string_view::npos) throw UsageError(what + ": truncated XML (unterminated comment)");
      pos = end + 3;
      continue;
    }
    // The tag ends at the first '>' outside quotes (attribute values may contain '>').
    std::size_t end = pos + 1;
    char quote = 0;
    for (; end < xml.size(); ++end) {
      const char c = xml[end];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    if (end >= xml.size()) throw UsageError(what + ": truncated XML (unterminated tag)");
    std::string_view tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty()) throw UsageError(what + ": malformed XML (empty tag)");
    if (tag.front() == '?' || tag.front() == '!') continue;
    if (tag.front() == '/') {
      std::string_view name = tag.substr(1);
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
      if (open.empty() || open.back() != name) {
        throw UsageError(what + ": malformed XML (unexpected </" + std::string(name.substr(0, 32)) + ">)");
      }
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::size_t name_end = tag.find_first_of(" \t\r\n/");
    std::string_view name = tag.substr(0, name_end);
    if (open.empty()) {
      if (name != "topology" || saw_topology) {
        throw UsageError(what + ": not an hwloc XML topology (root element <" + std::string(name.substr(0, 32)) + ">)");
      }
      saw_topology = true;
      const std::size_t version_at = tag.find("version=\"");
      if (version_at != std::string_view::npos) {
        const std::string_view version = tag.substr(version_at + 9, tag.find('"', version_at + 9) - version_at - 9);
        const int major = std::atoi(std::string(version).c_str());
        if (major > HWLOC_API_VERSION >> 16) {
          throw UsageError(what + ": hwloc XML version " + std::string(version.substr(0, 16)) +
                           " is newer than this hwloc (" + hwloc_version() + ") can read");
        }
      }
    }
    screen_attribute_names(tag, name_end, what);
    if (name == "object") {
      screen_object(tag, what);
      // The root object: hwloc asserts (abort) when it drops the root, which it does for an I/O
      // object whose pci_busid it cannot read and for types it does not know (found by
      // fuzz_topology_xml in CI). Every export, 1.x or 2.x, has a Machine (1.x: System) root.
      const auto type = attribute_value(tag, "type");
      if (open.size() == 1 && type != "Machine" && type != "System") {
        throw UsageError(what + ": not an hwloc XML topology (root object of type " +
                         std::string(type.value_or("none").substr(0, 32)) + ", not Machine)");
      }
    }
    if (!self_closing) open.push_back(name);
  }
  if (!saw_topology) throw UsageError(what + ": not an hwloc XML topology (no <topology> element)");
  if (!open.empty()) throw UsageError(what + ": truncated XML (<" + std::string(open.back().substr(0, 32)) + "> not closed)");
}


// hwloc takes a length that includes the terminating NUL. 0 when hwloc loads the XML, -1 when it
// refuses it.
int load_into(hwloc_topology_t topology, const std::string& buffer) {
  if (hwloc_topology_set_xmlbuffer(topology, buffer.c_str(), static_cast<int>(buffer.size() + 1)) != 0) return -1;
  return hwloc_topology_load(topology);
}

hwloc_topology_t init_topology() {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) throw FatalError(ExitCode::runtime_error, "hwloc_topology_init failed");
  // Must happen before loading, also for XML: otherwise hwloc drops bridges and OS devices.
  if (hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
    hwloc_topology_destroy(topology);
    throw FatalError(ExitCode::runtime_error, "hwloc_topology_set_io_types_filter failed");
  }
  return topology;
}

// ---- sysfs (live machine, or a fake tree in tests)
std::optional<std::string> read_sysfs_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty()) return std::nullopt;
  return line;
}

std::string ib_state_name(int state) {
  switch (state) {
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
    default: return "STATE_" + std::to_string(state);
  }
}

// "4: ACTIVE" -> "ACTIVE"
std::string sysfs_state(const std::string& raw) {
  const std::size_t colon = raw.find(':');
  std::string name = colon == std::string::npos ? raw : raw.substr(colon + 1);
  name.erase(0, name.find_first_not_of(' '));
  return name;
}

bool safe_component(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

std::vector<NicPort> read_sysfs_ports(const std::string& sysfs_root, const std::string& hca) {
  std::vector<NicPort> ports;
  if (!safe_component(hca)) return ports;
  const std::filesystem::path dir = std::filesystem::path(sysfs_root) / "class" / "infiniband" / hca / "ports";
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) return ports;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 3 || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    NicPort port;
    port.number = std::stoi(name);
    if (auto state = read_sysfs_line(entry.path() / "state")) port.state = sysfs_state(*state);
    port.link_layer = read_sysfs_line(entry.path() / "link_layer");
    port.rate = read_sysfs_line(entry.path() / "rate");
    if (port.rate) {
      char* end = nullptr;
      const double gbps = std::strtod(port.rate->c_str(), &end);
      if (end != port.rate->c_str() && gbps >= 0) port.rate_gbps = gbps;
    }
    ports.push_back(std::move(port));
  }
  std::sort(ports.begin(), ports.end(), [](const NicPort& x, const NicPort& y) { return x.number < y.number; });
  return ports;
}

// hwloc's Linux backend records "Port<N>State" (the numeric IB state) on OpenFabrics devices.
std::vector<NicPort> hwloc_ports(hwloc_obj_t osdev) {
  std::vector<NicPort> ports;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    const std::string name = osdev->infos[i].name ? osdev->infos[i].name : "";
    if (name.size() <= 9 || name.rfind("Port", 0) != 0 || name.substr(name.size() - 5) != "State") continue;
    const std::string number = name.substr(4, name.size() - 9);
    if (number.empty() || number.size() > 3 || !std::all_of(number.begin(), number.end(), ::isdigit)) continue;
    NicPort port;
    port.number = std::stoi(number);
    const char* value = osdev->infos[i].value;
    if (value != nullptr && *value != '\0') {
      char* end = nullptr;
      const long state = std::strtol(value, &end, 10);
      port.state = (end != value && *end == '\0') ? ib_state_name(static_cast<int>(state)) : sysfs_state(value);
    }
    ports.push_back(std::move(port));
  }
  std::sort(ports.begin(), ports.end(), [](const NicPort& x, const NicPort& y) { return x.number < y.number; });
  return ports;
}

std::string gpu_name(hwloc_obj_t pci) {
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (const char* model = info_value(child, "GPUModel")) return model;
  }
  if (const char* device = info_value(pci, "PCIDevice")) return device;
  char text[64];
  std::snprintf(text, sizeof text, "NVIDIA GPU [%04x:%04x]", pci->attr->pcidev.vendor_id, pci->attr->pcidev.device_id);
  return text;
}

std::string pci_id_of(hwloc_obj_t pci) {
  char text[16];
  std::snprintf(text, sizeof text, "%04x:%04x", pci->attr->pcidev.vendor_id, pci->attr->pcidev.device_id);
  return text;
}

constexpr unsigned kNvidiaVendorId = 0x10de;
constexpr std::uintmax_t kMaxXmlBytes = 64ull << 20;

}  // namespace

// ---------------------------------------------------------------------------------------------
std::string to_string(const Path& path) {
  switch (path.kind) {
    case PathClass::self: return "X";
    case PathClass::nvlink: return "NV" + std::to_string(path.nvlinks);
    case PathClass::pix: return "PIX";
    case PathClass::pxb: return "PXB";
    case PathClass::phb: return "PHB";
    case PathClass::node: return "NODE";
    case PathClass::sys: return "SYS";
  }
  return "SYS";
}

bool nearer(const Path& a, const Path& b) {
  if (a.kind != b.kind) return a.kind < b.kind;
  return a.kind == PathClass::nvlink && a.nvlinks > b.nvlinks;
}

std::string hwloc_version() { return HWLOC_VERSION; }

std::string format_index_list(const std::vector<unsigned>& list) {
  Bitmap bitmap = make_bitmap();
  for (unsigned index : list) hwloc_bitmap_set(bitmap.get(), index);
  return list_string(bitmap.get());
}

std::string normalize_pci_bus_id(std::string_view bus_id) {
  const std::string text(bus_id);
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  char tail = 0;
  int consumed = 0;
  const bool full = std::sscanf(text.c_str(), "%x:%x:%x.%x%n%c", &domain, &bus, &dev, &func, &consumed, &tail) == 4 &&
                    static_cast<std::size_t>(consumed) == text.size();
  bool short_form = false;
  if (!full) {
    domain = 0;
    short_form = std::sscanf(text.c_str(), "%x:%x.%x%n%c", &bus, &dev, &func, &consumed, &tail) == 3 &&
                 static_cast<std::size_t>(consumed) == text.size();
  }
  const bool hex_only = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
  });
  if ((!full && !short_form) || !hex_only || domain > 0xffff || bus > 0xff || dev > 0x1f || func > 7) {
    throw UsageError("invalid PCI bus id '" + text.substr(0, 64) + "' (expected DDDD:BB:DD.F)");
  }
  return format_bus_id(domain, bus, dev, func);
}

// ---------------------------------------------------------------------------------------------
HwlocTopology HwlocTopology::load_live() {
  hwloc_topology_t topology = init_topology();
  // Keep CPUs and NUMA nodes outside this process's cgroup: a device's local CPU set is a property
  // of the machine (nvidia-smi's CPU Affinity shows all of it), not of the container we run in.
  if (hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0) {
    hwloc_topology_destroy(topology);
    throw FatalError(ExitCode::runtime_error, "hwloc_topology_set_flags failed");
  }
  // GPU plugins would initialise CUDA/NVML inside every rank just to name devices we already know.
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "cuda");
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "nvml");
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "rsmi");
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "levelzero");
  if (hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    throw FatalError(ExitCode::runtime_error, "hwloc could not load this machine's topology");
  }
  return HwlocTopology(topology, true, "live");
}

// hwloc 2.9 asserts (abort) or dereferences NULL on some malformed XML; fuzzing found five such
// inputs, and the screening above refuses each after the fact. So that no file the screening did
// not foresee can kill topo_map with a core dump, hwloc first loads the XML in a child process: a
// child that dies by a signal means hwloc would crash, and the user gets one line and exit 2.
void trial_load_in_child(const std::string& buffer, const std::string& what) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) throw FatalError(ExitCode::runtime_error, std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // Default dispositions (no sanitizer or fuzzer crash handler reporting hwloc's abort as ours),
    // and no core file.
    for (const int signal_number : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(signal_number, SIG_DFL);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const int devnull = open("/dev/null", O_WRONLY);  // hwloc's assertion text: the parent says it in one line
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    try {
      _exit(load_into(init_topology(), buffer) == 0 ? 0 : 1);
    } catch (const FatalError&) {
      _exit(3);
    }
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw FatalError(ExitCode::runtime_error, std::string("waitpid failed: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) {
    throw UsageError(what + ": hwloc crashes loading this XML (" + strsignal(WTERMSIG(status)) +
                     " in a trial load); it is not a topology hwloc exported");
  }
}


HwlocTopology HwlocTopology::load_xml_file(const std::string& path) {
  // hwloc exports are kilobytes to a few megabytes; refuse anything huge before reading it.
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > kMaxXmlBytes) {
    throw UsageError(path + ": " + std::to_string(size) + " bytes, larger than any hwloc XML topology (limit " +
                     std::to_string(kMaxXmlBytes) + ")");
  }
  const std::string text = read_text_file(path);
  return load_xml_text(text, path);
}

HwlocTopology HwlocTopology::load_xml_text(std::string_view xml, const std::string& what) {
  screen_xml(xml, what);
  const std::string buffer(xml);
  trial_load_in_child(buffer, what);
  hwloc_topology_t topology = init_topology();
  if (load_into(topology, buffer) != 0) {
    hwloc_topology_destroy(topology);
    throw UsageError(what + ": hwloc could not load this XML topology");
  }
  return HwlocTopology(topology, false, what);
}

HwlocTopology::HwlocTopology(HwlocTopology&& other) noexcept
    : topology_(std::exchange(other.topology_, nullptr)), live_(other.live_), source_(std::move(other.source_)) {}

HwlocTopology& HwlocTopology::operator=(HwlocTopology&& other) noexcept {
  if (this != &other) {
    if (topology_ != nullptr) hwloc_topology_destroy(topology_);
    topology_ = std::exchange(other.topology_, nullptr);
    live_ = other.live_;
    source_ = std::move(other.source_);
  }
  return *this;
}

HwlocTopology::~HwlocTopology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

// ---------------------------------------------------------------------------------------------
NodeTopology build_node_topology(const HwlocTopology& handle, const MapperOptions& options) {
  hwloc_topology_t topology = handle.get();
  NodeTopology model;
  model.source = handle.source();
  model.live = handle.is_live();
  model.hwloc_version = hwloc_version();
  if (const char* host = info_value(hwloc_get_root_obj(topology), "HostName")) {
    model.host = host;
  } else if (handle.is_live()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') model.host = name;
  }

  for (hwloc_obj_t node = nullptr; (node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) != nullptr;) {
    NumaNode numa;
    numa.os_index = node->os_index;
    numa.cpuset = list_string(node->cpuset);
    if (node->attr != nullptr && node->attr->numanode.local_memory > 0) numa.local_memory_bytes = node->attr->numanode.local_memory;
    model.numa_nodes.push_back(std::move(numa));
  }

  std::vector<hwloc_obj_t> pcidevs;
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topology, pci)) != nullptr;) pcidevs.push_back(pci);
  model.has_pci = !pcidevs.empty();
  std::sort(pcidevs.begin(), pcidevs.end(), [](hwloc_obj_t x, hwloc_obj_t y) { return bus_id_of(x) < bus_id_of(y); });

  // GPUs
  std::vector<hwloc_obj_t> gpu_objs;
  if (!options.gpu_pci_bus_ids.empty()) {
    model.gpu_discovery = "caller_bus_ids";
    for (std::size_t i = 0; i < options.gpu_pci_bus_ids.size(); ++i) {
      Gpu gpu;
      gpu.index = static_cast<int>(i);
      gpu.pci_bus_id = normalize_pci_bus_id(options.gpu_pci_bus_ids[i]);
      hwloc_obj_t found = nullptr;
      for (hwloc_obj_t pci : pcidevs) {
        if (bus_id_of(pci) == gpu.pci_bus_id) found = pci;
      }
      gpu.found = found != nullptr;
      gpu.name = i < options.gpu_names.size() && !options.gpu_names[i].empty() ? options.gpu_names[i]
                 : found != nullptr                                           ? gpu_name(found)
                                                                              : "unknown";
      model.gpus.push_back(std::move(gpu));
      gpu_objs.push_back(found);
    }
  } else {
    model.gpu_discovery = "pci_class_scan";
    for (hwloc_obj_t pci : pcidevs) {
      if (pci->attr->pcidev.vendor_id != kNvidiaVendorId || (pci->attr->pcidev.class_id >> 8) != 0x03) continue;
      Gpu gpu;
      gpu.index = static_cast<int>(model.gpus.size());
      gpu.pci_bus_id = bus_id_of(pci);
      gpu.found = true;
      gpu.name = gpu_name(pci);
      model.gpus.push_back(std::move(gpu));
      gpu_objs.push_back(pci);
    }
  }
  for (std::size_t i = 0; i < model.gpus.size(); ++i) {
    if (gpu_objs[i] == nullptr) continue;
    model.gpus[i].pci_id = pci_id_of(gpu_objs[i]);
    model.gpus[i].numa_nodes = indices(local_nodeset(topology, gpu_objs[i]));
    model.gpus[i].cpuset = list_string(local_cpuset(topology, gpu_objs[i]));
  }

  // NICs: OpenFabrics OS devices under a PCI function.
  struct NicObj {
    hwloc_obj_t osdev;
    hwloc_obj_t pci;
  };
  std::vector<NicObj> nic_objs;
  for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topology, os)) != nullptr;) {
    if (enum_bits(os->attr->osdev.type) != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    hwloc_obj_t pci = os->parent;
    while (pci != nullptr && pci->type != HWLOC_OBJ_PCI_DEVICE && hwloc_obj_type_is_io(pci->type)) pci = pci->parent;
    if (pci == nullptr || pci->type != HWLOC_OBJ_PCI_DEVICE) continue;
    nic_objs.push_back({os, pci});
  }
  std::sort(nic_objs.begin(), nic_objs.end(), [](const NicObj& x, const NicObj& y) {
    const std::string bx = bus_id_of(x.pci), by = bus_id_of(y.pci);
    return bx != by ? bx < by : std::string(x.osdev->name) < std::string(y.osdev->name);
  });
  for (const NicObj& obj : nic_objs) {
    Nic nic;
    nic.index = static_cast<int>(model.nics.size());
    nic.name = obj.osdev->name;
    nic.pci_bus_id = bus_id_of(obj.pci);
    for (hwloc_obj_t child = obj.pci->io_first_child; child != nullptr; child = child->next_sibling) {
      if (child->type == HWLOC_OBJ_OS_DEVICE && enum_bits(child->attr->osdev.type) == HWLOC_OBJ_OSDEV_NETWORK && child->name) {
        nic.netdev = child->name;
        break;
      }
    }
    nic.numa_nodes = indices(local_nodeset(topology, obj.pci));
    nic.cpuset = list_string(local_cpuset(topology, obj.pci));
    if (!options.sysfs_root.empty()) nic.ports = read_sysfs_ports(options.sysfs_root, nic.name);
    nic.ports_source = "sysfs";
    if (nic.ports.empty()) {
      nic.ports = hwloc_ports(obj.osdev);
      nic.ports_source = nic.ports.empty() ? "none" : "hwloc";
    }
    model.nics.push_back(std::move(nic));
  }

  // Network interfaces without RDMA (candidates for NCCL_SOCKET_IFNAME, management ports).
  for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topology, os)) != nullptr;) {
    if (enum_bits(os->attr->osdev.type) != HWLOC_OBJ_OSDEV_NETWORK || os->name == nullptr) continue;
    hwloc_obj_t pci = os->parent;
    if (pci == nullptr || pci->type != HWLOC_OBJ_PCI_DEVICE) continue;
    const bool rdma = std::any_of(nic_objs.begin(), nic_objs.end(), [&](const NicObj& nic) { return nic.pci == pci; });
    if (rdma) continue;
    model.other_netdevs.push_back({os->name, bus_id_of(pci), indices(local_nodeset(topology, pci))});
  }
  std::sort(model.other_netdevs.begin(), model.other_netdevs.end(),
            [](const NetInterface& x, const NetInterface& y) { return x.pci_bus_id < y.pci_bus_id; });

  // Paths, GPUs first then NICs.
  std::vector<hwloc_obj_t> objs = gpu_objs;
  for (const NicObj& obj : nic_objs) objs.push_back(obj.pci);
  const std::size_t n = objs.size();
  model.paths.assign(n, std::vector<std::optional<Path>>(n));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) {
        model.paths[i][j] = Path{PathClass::self, 0};
      } else if (objs[i] != nullptr && objs[j] != nullptr) {
        model.paths[i][j] = pci_path(topology, objs[i], objs[j]);
      }
    }
  }
  for (std::size_t i = 0; i < model.gpus.size() && i < options.nvlink_counts.size(); ++i) {
    for (std::size_t j = 0; j < model.gpus.size() && j < options.nvlink_counts[i].size(); ++j) {
      if (i != j && options.nvlink_counts[i][j] > 0) model.paths[i][j] = Path{PathClass::nvlink, options.nvlink_counts[i][j]};
    }
  }
  return model;
}

std::vector<NicChoice> NodeTopology::nic_choices(int gpu, const HcaSpec& spec) const {
  std::vector<NicChoice> choices;
  for (const Nic& nic : nics) {
    std::vector<std::optional<int>> port_numbers;
    for (const NicPort& port : nic.ports) port_numbers.emplace_back(port.number);
    if (port_numbers.empty()) port_numbers.emplace_back(std::nullopt);
    for (std::size_t p = 0; p < port_numbers.size(); ++p) {
      NicChoice choice;
      choice.nic = nic.index;
      choice.name = nic.name;
      choice.port = port_numbers[p];
      choice.netdev = nic.netdev;
      choice.path = gpu_nic(gpu, nic.index);
      const bool spec_ok = spec.allows(nic.name, choice.port);
      const std::optional<std::string> state = nic.ports.empty() ? std::nullopt : nic.ports[p].state;
      const bool port_down = state && *state != "ACTIVE";
      choice.allowed = spec_ok && !port_down;
      if (!spec_ok) {
        choice.reason = "excluded by NCCL_IB_HCA=" + spec.text();
      } else if (port_down) {
        choice.reason = "port state " + *state + " (NCCL uses ACTIVE ports only)";
      }
      choices.push_back(std::move(choice));
    }
  }
  std::stable_sort(choices.begin(), choices.end(), [](const NicChoice& x, const NicChoice& y) {
    if (x.path.has_value() != y.path.has_value()) return x.path.has_value();
    if (x.path && y.path && *x.path != *y.path) return nearer(*x.path, *y.path);
    return false;  // stable: NIC index, then port
  });
  return choices;
}

}  // namespace cclbench::topology
