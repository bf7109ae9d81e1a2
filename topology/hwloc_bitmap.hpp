#pragma once
// The hwloc bitmap handle and its list form, shared by topology.cpp and binding.cpp. Internal to
// cclbench_topology: hwloc stays out of the library's public headers.
#include <hwloc.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace cclbench::topology {

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

// hwloc's list form ("0-7,16-23"); "" for a null or empty bitmap, or when hwloc cannot print it.
inline std::string list_string(hwloc_const_bitmap_t bitmap) {
  if (bitmap == nullptr || hwloc_bitmap_iszero(bitmap)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bitmap) < 0 || text == nullptr) return "";
  std::string result(text);
  std::free(text);
  return result;
}

}  // namespace cclbench::topology
