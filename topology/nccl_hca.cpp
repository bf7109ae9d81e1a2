#include "topology/nccl_hca.hpp"

#include <cctype>

#include "bench/core/errors.hpp"

namespace cclbench::topology {
namespace {

[[noreturn]] void reject(std::string_view spec, const std::string& why) {
  std::string shown(spec.substr(0, 64));
  if (spec.size() > 64) shown += "...";
  throw UsageError("invalid NCCL_IB_HCA '" + shown + "': " + why);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

bool all_digits(std::string_view text) {
  if (text.empty() || text.size() > 6) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

HcaSpec parse_nccl_ib_hca(std::string_view spec) {
  HcaSpec result;
  if (spec.empty()) return result;
  if (spec.size() > kMaxHcaSpecLength) {
    reject(spec, "it is " + std::to_string(spec.size()) + " characters long, at most " +
                     std::to_string(kMaxHcaSpecLength) + " are accepted");
  }
  for (unsigned char c : spec) {
    if (std::isspace(c)) reject(spec, "it contains white space, which NCCL would take as part of a name");
    if (!std::isprint(c)) reject(spec, "it contains a non-printable character");
  }
  result.text_ = std::string(spec);
  std::string_view rest = spec;
  if (rest.front() == '^') {
    result.exclude_ = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    result.exact_ = true;
    rest.remove_prefix(1);
  }
  for (std::string_view entry : split(rest, ',')) {
    if (entry.empty()) continue;  // NCCL skips empty entries between commas
    const std::vector<std::string_view> fields = split(entry, ':');
    if (fields[0].empty()) reject(spec, "entry '" + std::string(entry) + "' has no device name");
    if (fields[0].size() > kMaxHcaNameLength) {
      reject(spec, "device name '" + std::string(fields[0].substr(0, 16)) + "...' is longer than " +
                       std::to_string(kMaxHcaNameLength) + " characters");
    }
    if (fields[0].find_first_of("^=") != std::string_view::npos) {
      reject(spec, "'^' and '=' are only allowed at the start (as '^', '=' or '^=')");
    }
    if (fields.size() > 4) reject(spec, "entry '" + std::string(entry) + "' has more than name:port:rail:plane");
    HcaSpecEntry parsed{std::string(fields[0]), std::nullopt};
    for (std::size_t i = 1; i < fields.size(); ++i) {
      if (fields[i].empty()) continue;  // NCCL: an empty field means "any"
      if (!all_digits(fields[i])) {
        reject(spec, "'" + std::string(fields[i]) + "' in entry '" + std::string(entry) + "' is not a " +
                         (i == 1 ? "port number" : "number"));
      }
      if (i == 1) {
        const int port = std::stoi(std::string(fields[i]));
        if (port < 1 || port > 255) reject(spec, "port " + std::string(fields[i]) + " is outside 1..255");
        parsed.port = port;
      }
    }
    result.entries_.push_back(std::move(parsed));
  }
  if (result.entries_.empty()) reject(spec, "it lists no device");
  if (result.entries_.size() > kMaxHcaSpecEntries) {
    reject(spec, "it lists " + std::to_string(result.entries_.size()) + " devices; NCCL reads at most " +
                     std::to_string(kMaxHcaSpecEntries));
  }
  return result;
}

bool HcaSpec::allows(std::string_view hca, std::optional<int> port) const {
  if (!is_set()) return true;
  bool listed = false;
  for (const HcaSpecEntry& entry : entries_) {
    const bool name_matches = exact_ ? hca == entry.name : hca.starts_with(entry.name);
    const bool port_matches = !entry.port || !port || *entry.port == *port;
    if (name_matches && port_matches) {
      listed = true;
      break;
    }
  }
  return exclude_ ? !listed : listed;
}

}  // namespace cclbench::topology
