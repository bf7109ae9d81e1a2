#include "bench/p2p/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "bench/core/units.hpp"
#include "bench/core/version.hpp"

namespace cclbench::p2p {

std::string_view name_of(Status status) {
  switch (status) {
    case Status::ok: return "ok";
    case Status::failed: return "failed";
    case Status::skipped: return "skipped";
    case Status::error: return "error";
  }
  return "?";
}

SampleStats summarize(std::vector<double> samples) {
  SampleStats stats;
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  stats.min = samples.front();
  stats.max = samples.back();
  stats.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  stats.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  if (n > 1 && stats.mean != 0) {
    double squares = 0;
    for (double s : samples) squares += (s - stats.mean) * (s - stats.mean);
    stats.cv_pct = std::sqrt(squares / static_cast<double>(n - 1)) / std::fabs(stats.mean) * 100.0;
  }
  return stats;
}

std::string endpoint_label(const std::optional<Endpoint>& endpoint) {
  if (!endpoint) return "";
  return endpoint->gpu ? std::to_string(*endpoint->gpu) : "host";
}

namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}
std::string pad_right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

constexpr std::size_t kCell = 10;
constexpr std::size_t kRowLabel = 8;

std::string cell_text(const Measurement* m) {
  if (!m) return "-";
  switch (m->status) {
    case Status::ok: return m->value ? fixed(m->value->median, 2) : "-";
    case Status::failed: return "FAIL";
    case Status::error: return "ERROR";
    case Status::skipped: return "-";
  }
  return "-";
}

std::string place_label(const Measurement& m, const TestInfo& info) {
  if (info.scope == Scope::device) {
    const auto& gpu_end = (m.dst && m.dst->gpu) ? m.dst : m.src;
    return gpu_end && gpu_end->gpu ? "GPU" + std::to_string(*gpu_end->gpu) : "all";
  }
  if (!m.src && !m.dst) return "all";
  return endpoint_label(m.src) + "->" + endpoint_label(m.dst);
}

// The GPU a device-scope measurement belongs to (the non-host end).
std::optional<int> device_of(const Measurement& m) {
  if (m.dst && m.dst->gpu) return m.dst->gpu;
  if (m.src && m.src->gpu) return m.src->gpu;
  return std::nullopt;
}

std::string bytes_counted_text(BytesCounted counted) {
  switch (counted) {
    case BytesCounted::one_direction: return "bytes counted: one direction";
    case BytesCounted::both_directions: return "bytes counted: both directions (sum), over the time until both copies finished";
    case BytesCounted::read_plus_write: return "bytes counted: read + write (2 x size)";
    case BytesCounted::not_applicable: return "latency";
  }
  return "";
}

std::string axes_text(const TestInfo& info) {
  if (info.scope == Scope::device) return "columns = GPU";
  if (info.metric == Metric::load_latency_ns) return "rows = GPU issuing the loads, columns = GPU holding the memory";
  if (info.diagonal && info.metric == Metric::bandwidth_gbps) {
    return "rows = source GPU, columns = destination GPU; diagonal = copy within the GPU (bytes copied / time, as "
           "nvbandwidth's device_local_copy)";
  }
  return "rows = source GPU, columns = destination GPU";
}

void append_notes(std::ostringstream& out, const std::vector<const Measurement*>& measurements, const TestInfo& info,
                  bool with_size) {
  // One line per distinct (status, reason), listing where it happened, so 56 identical skips stay one line.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> groups;
  std::vector<std::pair<std::string, std::string>> order;
  for (const Measurement* m : measurements) {
    if (m->status == Status::ok) continue;
    const std::pair<std::string, std::string> key{std::string(name_of(m->status)), m->reason};
    if (!groups.count(key)) order.push_back(key);
    std::string where = place_label(*m, info);
    if (with_size && m->bytes) where += "@" + format_size(*m->bytes);
    groups[key].push_back(where);
  }
  for (const auto& key : order) {
    const auto& places = groups[key];
    out << "  " << key.first << " (";
    for (std::size_t i = 0; i < places.size() && i < 8; ++i) out << (i ? ", " : "") << places[i];
    if (places.size() > 8) out << ", +" << places.size() - 8 << " more";
    out << "): " << key.second << '\n';
  }
}

}  // namespace

std::string render_test_text(const Report& report, TestId test) {
  const TestInfo& info = test_info(test);
  std::vector<const Measurement*> mine;
  std::set<std::uint64_t> sizes;
  for (const Measurement& m : report.results) {
    if (m.test != test) continue;
    mine.push_back(&m);
    if (m.bytes) sizes.insert(*m.bytes);
  }
  std::ostringstream out;
  out << info.name << ": " << info.description << '\n';
  out << "  unit: " << unit_label(info.metric) << "; " << bytes_counted_text(info.bytes_counted);
  if (sizes.size() == 1) out << "; size " << format_size(*sizes.begin());
  out << "; median of " << report.repetitions << " samples; " << (sizes.size() > 1 ? "rows = size" : axes_text(info))
      << '\n';

  const int n = static_cast<int>(report.devices.size());
  if (sizes.size() > 1) {
    // Sweep: columns are the places measured (pairs or GPUs), rows the sizes.
    std::vector<std::string> places;
    for (const Measurement* m : mine) {
      const std::string place = place_label(*m, info);
      if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(place);
    }
    out << pad_right("size", kRowLabel);
    for (const auto& place : places) out << pad_left(place, kCell);
    out << '\n';
    for (std::uint64_t size : sizes) {
      out << pad_right(format_size(size), kRowLabel);
      for (const auto& place : places) {
        const Measurement* found = nullptr;
        for (const Measurement* m : mine) {
          if (m->bytes == size && place_label(*m, info) == place) found = m;
        }
        out << pad_left(cell_text(found), kCell);
      }
      out << '\n';
    }
  } else if (info.scope == Scope::pair && n > 0) {
    out << pad_right("src\\dst", kRowLabel);
    for (int dst = 0; dst < n; ++dst) out << pad_left(std::to_string(dst), kCell);
    out << '\n';
    for (int src = 0; src < n; ++src) {
      out << pad_right(std::to_string(src), kRowLabel);
      for (int dst = 0; dst < n; ++dst) {
        const Measurement* found = nullptr;
        for (const Measurement* m : mine) {
          if (m->src && m->dst && m->src->gpu == src && m->dst->gpu == dst) found = m;
        }
        out << pad_left(cell_text(found), kCell);
      }
      out << '\n';
    }
  } else if (info.scope == Scope::device && n > 0) {
    const bool has_host = std::any_of(mine.begin(), mine.end(), [](const Measurement* m) {
      return (m->src && !m->src->gpu) || (m->dst && !m->dst->gpu);
    });
    out << pad_right("GPU", kRowLabel);
    for (int d = 0; d < n; ++d) out << pad_left(std::to_string(d), kCell);
    out << '\n' << pad_right(std::string(unit_label(info.metric)), kRowLabel);
    for (int d = 0; d < n; ++d) {
      const Measurement* found = nullptr;
      for (const Measurement* m : mine) {
        if (device_of(*m) == d) found = m;
      }
      out << pad_left(cell_text(found), kCell);
    }
    out << '\n';
    if (has_host) {
      out << pad_right("numa", kRowLabel);
      for (int d = 0; d < n; ++d) {
        std::string node = "-";
        for (const Measurement* m : mine) {
          if (device_of(*m) == d && m->host_numa_node) node = std::to_string(*m->host_numa_node);
        }
        out << pad_left(node, kCell);
      }
      out << '\n';
    }
  }
  append_notes(out, mine, info, sizes.size() > 1);
  return out.str();
}

std::string render_capability_text(const Report& report) {
  std::ostringstream out;
  const int n = static_cast<int>(report.devices.size());
  out << "GPUs:\n";
  for (const DeviceInfo& d : report.devices) {
    out << "  " << d.index << ": " << d.name << ", " << d.pci_bus_id << ", NUMA node "
        << (d.numa_node ? std::to_string(*d.numa_node) : "unknown (" + d.numa_node_reason + ")") << '\n';
  }
  if (n < 2) return out.str();
  out << "cudaDeviceCanAccessPeer (rows = accessing GPU, columns = peer; 1 = yes) / P2P performance rank"
      << " [path class]\n";
  out << pad_right("src\\dst", kRowLabel);
  for (int dst = 0; dst < n; ++dst) out << pad_left(std::to_string(dst), kCell);
  out << '\n';
  for (int src = 0; src < n; ++src) {
    out << pad_right(std::to_string(src), kRowLabel);
    for (int dst = 0; dst < n; ++dst) {
      std::string text = "-";
      for (const PairCapability& c : report.capability) {
        if (c.src == src && c.dst == dst) {
          text = std::string(c.can_access_peer ? "1" : "0") + "/" +
                 (c.performance_rank ? std::to_string(*c.performance_rank) : "-") +
                 (c.path_class ? " " + *c.path_class : std::string());
        }
      }
      out << pad_left(text, kCell);
    }
    out << '\n';
  }
  if (!report.path_class_source.empty()) out << "path class: " << report.path_class_source << '\n';
  return out.str();
}

namespace {

nlohmann::json endpoint_json(const std::optional<Endpoint>& endpoint) {
  if (!endpoint) return nullptr;
  if (endpoint->gpu) return *endpoint->gpu;
  return "host";
}

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json stats_json(const std::optional<SampleStats>& stats) {
  if (!stats) return nullptr;
  return {{"median", stats->median}, {"min", stats->min}, {"max", stats->max}, {"mean", stats->mean},
          {"cv_pct", stats->cv_pct}};
}

nlohmann::json measurement_json(const Measurement& m) {
  const TestInfo& info = test_info(m.test);
  nlohmann::json j;
  j["test"] = std::string(info.name);
  j["src"] = endpoint_json(m.src);
  j["dst"] = endpoint_json(m.dst);
  j["bytes"] = optional_json(m.bytes);
  j["host_numa_node"] = optional_json(m.host_numa_node);
  j["status"] = std::string(name_of(m.status));
  j["reason"] = m.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.reason);
  j["bytes_counted"] = std::string(name_of(info.bytes_counted));
  j["bytes_counted_per_copy"] = optional_json(m.bytes_counted_per_copy);
  const bool ok = m.status == Status::ok;
  j["bandwidth_gbps"] = info.metric == Metric::bandwidth_gbps && ok ? stats_json(m.value) : nullptr;
  j["latency_us"] = info.metric == Metric::latency_us && ok ? stats_json(m.value) : nullptr;
  j["load_latency_ns"] = info.metric == Metric::load_latency_ns && ok ? stats_json(m.value) : nullptr;
  j["time_us"] = ok ? stats_json(m.time_us) : nullptr;
  j["samples"] = m.samples;
  j["sample_time_us"] = m.sample_time_us;
  if (m.wrong_words) {
    j["verification"] = {{"verified_samples", m.verified_samples}, {"wrong_words", *m.wrong_words}};
  } else {
    j["verification"] = nullptr;
  }
  j["details"] = m.details;
  return j;
}

}  // namespace

nlohmann::json to_json(const Report& report) {
  nlohmann::json j;
  j["schema_version"] = kSchemaVersion;
  j["tool"] = {{"name", "p2p_matrix"}, {"version", kToolVersion}, {"git_commit", kGitCommit}};
  j["host"] = report.host;
  j["argv"] = report.argv;
  j["cuda"] = {{"driver_version", optional_json(report.driver_version)},
               {"runtime_version", optional_json(report.runtime_version)}};
  j["no_device_reason"] = report.no_device_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.no_device_reason);
  j["numa_node_count"] = optional_json(report.numa_node_count);
  j["numa_reason"] = report.numa_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.numa_reason);
  j["settings"] = report.settings;
  j["settings"]["repetitions"] = report.repetitions;
  j["settings"]["warmup"] = report.warmup;
  j["gb"] = "1e9 bytes";
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceInfo& d : report.devices) {
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"pci_bus_id", d.pci_bus_id},
                       {"numa_node", optional_json(d.numa_node)},
                       {"numa_node_reason", d.numa_node ? nlohmann::json(nullptr) : nlohmann::json(d.numa_node_reason)},
                       {"sm_count", d.sm_count},
                       {"memory_bytes", d.memory_bytes},
                       {"l2_bytes", d.l2_bytes},
                       {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)}});
  }
  j["devices"] = devices;
  nlohmann::json capability = nlohmann::json::array();
  for (const PairCapability& c : report.capability) {
    capability.push_back({{"src", c.src},
                          {"dst", c.dst},
                          {"can_access_peer", c.can_access_peer},
                          {"performance_rank", optional_json(c.performance_rank)},
                          {"access_supported", optional_json(c.access_supported)},
                          {"native_atomic_supported", optional_json(c.native_atomic_supported)},
                          {"path_class", optional_json(c.path_class)},
                          {"path_class_reason", c.path_class ? nlohmann::json(nullptr) : nlohmann::json(c.path_class_reason)}});
  }
  j["capability"] = capability;
  j["path_class_source"] = report.path_class_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.path_class_source);
  j["binding"] = report.binding ? *report.binding : nlohmann::json(nullptr);
  j["binding_gpu"] = optional_json(report.binding_gpu);
  j["binding_reason"] = report.binding ? nlohmann::json(nullptr)
                                       : nlohmann::json(report.binding_reason.empty() ? std::string("binding record not captured")
                                                                                      : report.binding_reason);
  nlohmann::json tests = nlohmann::json::array();
  for (TestId id : report.tests) {
    const TestInfo& info = test_info(id);
    tests.push_back({{"name", std::string(info.name)},
                     {"scope", std::string(name_of(info.scope))},
                     {"unit", std::string(name_of(info.metric))},
                     {"bytes_counted", std::string(name_of(info.bytes_counted))},
                     {"description", std::string(info.description)}});
  }
  j["tests"] = tests;
  nlohmann::json results = nlohmann::json::array();
  for (const Measurement& m : report.results) results.push_back(measurement_json(m));
  j["results"] = results;
  return j;
}

namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return quoted + "\"";
}

}  // namespace

std::string to_csv(const Report& report) {
  std::ostringstream out;
  out << "test,src,dst,bytes,bytes_counted,host_numa_node,median_gbps,min_gbps,max_gbps,cv_pct,status,reason,"
         "median_latency_us,min_latency_us,max_latency_us\n";
  for (const Measurement& m : report.results) {
    const TestInfo& info = test_info(m.test);
    const bool ok = m.status == Status::ok && m.value;
    out << info.name << ',' << endpoint_label(m.src) << ',' << endpoint_label(m.dst) << ','
        << (m.bytes ? std::to_string(*m.bytes) : "") << ',' << name_of(info.bytes_counted) << ','
        << (m.host_numa_node ? std::to_string(*m.host_numa_node) : "") << ',';
    if (ok && info.metric == Metric::bandwidth_gbps) {
      out << fixed(m.value->median, 3) << ',' << fixed(m.value->min, 3) << ',' << fixed(m.value->max, 3) << ',';
    } else {
      out << ",,,";
    }
    out << (ok ? fixed(m.value->cv_pct, 3) : "") << ',' << name_of(m.status) << ',' << csv_field(m.reason) << ',';
    if (ok && info.metric != Metric::bandwidth_gbps) {
      const double scale = info.metric == Metric::load_latency_ns ? 1e-3 : 1.0;
      out << fixed(m.value->median * scale, 4) << ',' << fixed(m.value->min * scale, 4) << ','
          << fixed(m.value->max * scale, 4);
    } else {
      out << ",,";
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace cclbench::p2p
