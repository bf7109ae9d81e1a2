// libFuzzer target: the NCCL_IB_HCA spec parser (topology/nccl_hca) and the matcher it feeds.
// Input: the spec text. Accepted outcomes: an HcaSpec or a UsageError. A finding is another
// exception, a sanitizer report, or a parsed spec that breaks the limits the parser promises
// (<= 32 entries, names of 1..63 characters, ports >= 1) or whose text does not round-trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "bench/core/errors.hpp"
#include "topology/nccl_hca.hpp"

namespace {

[[noreturn]] void finding() { std::abort(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<cclbench::topology::HcaSpec> spec;
  try {
    spec = cclbench::topology::parse_nccl_ib_hca(text);
  } catch (const cclbench::UsageError& error) {
    if (std::string_view(error.what()).empty()) finding();  // a refusal must say why
    return 0;
  }
  if (text.empty() != !spec->is_set()) finding();
  if (spec->entries().size() > cclbench::topology::kMaxHcaSpecEntries) finding();
  if (spec->is_set() && spec->entries().empty()) finding();
  for (const auto& entry : spec->entries()) {
    if (entry.name.empty() || entry.name.size() > cclbench::topology::kMaxHcaNameLength) finding();
    if (entry.port && *entry.port < 1) finding();
    // An entry always allows (or, excluded, always refuses) its own name on its own port.
    const bool own = spec->allows(entry.name, entry.port);
    if (own == spec->exclude()) finding();
  }
  // Device names the matcher sees in practice, with and without ports.
  for (const char* device : {"mlx5_0", "mlx5_3", "mlx5_10", "", "ib"}) {
    (void)spec->allows(device, std::nullopt);
    (void)spec->allows(device, 1);
  }
  return 0;
}
