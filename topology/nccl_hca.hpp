#pragma once
// NCCL_IB_HCA semantics, as NCCL's own parser applies them (src/misc/utils.cc parseStringList /
// matchIfList and src/transport/net_ib/init.cc), so that a record says which HCAs NCCL may use:
//   leading '^'  exclude the listed devices (may be followed by '=')
//   leading '='  names are exact; otherwise each name is a prefix ("mlx5_1" also matches "mlx5_10")
//   entries are comma-separated, each "name[:port]" (NCCL also accepts ":rail:plane", ignored here).
// Where NCCL silently ignores a mistake (empty list after '^', non-numeric port, whitespace, more
// than 32 entries, names over 63 characters), we reject it: a misspelt spec is the commonest way to
// measure something other than what was intended.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cclbench::topology {

struct HcaSpecEntry {
  std::string name;
  std::optional<int> port;  // nullopt: any port
};

class HcaSpec {
 public:
  HcaSpec() = default;  // unset NCCL_IB_HCA: every device and port allowed
  bool is_set() const { return !text_.empty(); }
  bool exclude() const { return exclude_; }
  bool exact() const { return exact_; }
  const std::vector<HcaSpecEntry>& entries() const { return entries_; }
  const std::string& text() const { return text_; }

  // Would NCCL use this device:port under the spec? `port` nullopt = port unknown (matches any).
  bool allows(std::string_view hca, std::optional<int> port) const;

  friend HcaSpec parse_nccl_ib_hca(std::string_view spec);

 private:
  std::string text_;
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<HcaSpecEntry> entries_;
};

inline constexpr std::size_t kMaxHcaSpecEntries = 32;     // NCCL's MAX_IB_DEVS
inline constexpr std::size_t kMaxHcaNameLength = 63;      // NCCL's netIf prefix[64]
inline constexpr std::size_t kMaxHcaSpecLength = 4096;

// "" -> unset spec. Throws UsageError with a plain message for an invalid spec.
HcaSpec parse_nccl_ib_hca(std::string_view spec);

}  // namespace cclbench::topology
