// nccl_evidence: what NCCL actually used, from its own INFO logs, and an optional gate on it.
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/core/version.hpp"
#include "bench/evidence/nccl_evidence.hpp"
#include "bench/evidence/transport_gate.hpp"

namespace cclbench {
namespace {

constexpr const char* kProgram = "nccl_evidence";
constexpr std::size_t kProblemsListed = 20;

constexpr const char* kUsage =
    "usage: nccl_evidence [--expect SPEC] [--json FILE] LOG_OR_DIR...\n"
    "\n"
    "Reads NCCL INFO logs (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS including INIT; one file per process,\n"
    "e.g. NCCL_DEBUG_FILE=<dir>/%h.%p.log) and reports, per communicator, the NCCL version, network,\n"
    "devices, the host of each rank and the transport of every connection (P2P, SHM, NET/IB[+GDRDMA],\n"
    "NET/Socket, COLLNET), split into inter-node and intra-node edges. Directories are read file by file.\n"
    "\n"
    "  --expect SPEC  fail (exit 3) unless every edge matches, e.g. inter=NET/IB+GDRDMA,intra=P2P\n"
    "                 (kinds NET, P2P, SHM, COLLNET; alternatives with '|'; missing evidence fails)\n"
    "  --json FILE    write the full evidence (schema results_schema/nccl_evidence.schema.json)\n"
    "  -h, --help     this text\n"
    "\n"
    "exit status: 0 ok, 2 bad usage or input path, 3 expectation failed or not provable\n";

struct Options {
  std::string expect;
  bool has_expect = false;
  std::string json_path;
  std::vector<std::string> inputs;
  bool help = false;
};

Options parse_args(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (i + 1 >= argc) throw UsageError(flag + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (arg == "--expect") {
      if (options.has_expect) throw UsageError("--expect given twice");
      options.expect = value(arg);
      options.has_expect = true;
    } else if (arg.rfind("--expect=", 0) == 0) {
      if (options.has_expect) throw UsageError("--expect given twice");
      options.expect = arg.substr(9);
      options.has_expect = true;
    } else if (arg == "--json") {
      options.json_path = value(arg);
    } else if (arg.rfind("--json=", 0) == 0) {
      options.json_path = arg.substr(7);
    } else if (arg == "--") {
      for (++i; i < argc; ++i) options.inputs.emplace_back(argv[i]);
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option '" + arg + "' (see --help)");
    } else {
      options.inputs.push_back(arg);
    }
  }
  if (!options.help && options.inputs.empty()) throw UsageError("no NCCL log file or directory given (see --help)");
  if (options.json_path == "-") {
    throw UsageError("--json: '-' is not supported; give a file path");
  }
  return options;
}

// "0-7,9" from a sorted set of ranks.
std::string rank_ranges(const std::set<int>& ranks) {
  std::string text;
  auto it = ranks.begin();
  while (it != ranks.end()) {
    const int first = *it;
    int last = first;
    auto next = std::next(it);
    while (next != ranks.end() && *next == last + 1) {
      last = *next;
      ++next;
    }
    text += (text.empty() ? "" : ",") + std::to_string(first) + (last != first ? "-" + std::to_string(last) : "");
    it = next;
  }
  return text;
}

void print_summary(const EvidenceSummary& summary, std::ostream& out) {
  std::size_t ok_inputs = 0;
  for (const LogInput& input : summary.inputs) ok_inputs += input.status == "ok" ? 1 : 0;
  out << "inputs: " << summary.inputs.size() << " file(s), " << ok_inputs << " with NCCL lines; NCCL ";
  if (summary.nccl_versions.empty()) out << "version unknown";
  for (std::size_t i = 0; i < summary.nccl_versions.size(); ++i) out << (i ? ", " : "") << summary.nccl_versions[i];
  out << "\n";
  // Processes of one host usually say the same: print each distinct description once per host.
  std::map<std::pair<std::string, std::string>, std::size_t> descriptions;
  std::vector<std::pair<std::string, std::string>> order;
  for (const ProcessEvidence& process : summary.processes) {
    if (process.networks.empty() && process.ib_devices.empty() && process.socket_devices.empty()) continue;
    std::ostringstream text;
    text << "network ";
    for (std::size_t i = 0; i < process.networks.size(); ++i) text << (i ? "," : "") << process.networks[i];
    if (process.networks.empty()) text << "?";
    if (!process.ib_devices.empty()) {
      text << "; IB devices";
      for (const NetDevice& device : process.ib_devices) {
        text << " [" << device.index << "]" << device.name << (device.port ? ":" + std::to_string(*device.port) : "")
             << (device.link_layer.empty() ? "" : "/" + device.link_layer);
      }
    }
    if (process.ib_no_device) text << "; NET/IB: no device found";
    if (!process.socket_devices.empty()) {
      text << "; socket devices";
      for (const NetDevice& device : process.socket_devices) text << " [" << device.index << "]" << device.name;
    }
    const auto key = std::make_pair(process.host.empty() ? std::string("?") : process.host, text.str());
    if (descriptions[key]++ == 0) order.push_back(key);
  }
  for (const auto& key : order) {
    out << "host " << key.first << " (" << descriptions[key] << " process" << (descriptions[key] > 1 ? "es" : "")
        << "): " << key.second << "\n";
  }
  for (const CommunicatorEvidence& comm : summary.communicators) {
    out << "communicator " << comm.id << ": " << (comm.nranks ? std::to_string(*comm.nranks) : "?") << " ranks ("
        << comm.ranks.size() << " in logs), " << (comm.nnodes ? std::to_string(*comm.nnodes) : "?") << " node(s)\n";
    std::map<std::string, std::set<int>> ranks_by_node;
    for (const auto& [rank, entry] : comm.ranks) ranks_by_node[entry.node].insert(rank);
    for (const auto& [node, ranks] : ranks_by_node) out << "  " << (node.empty() ? "?" : node) << ": ranks " << rank_ranges(ranks) << "\n";
    std::map<std::string, std::map<std::string, std::size_t>> classes;
    for (const ChannelConnection& connection : comm.connections) {
      ++classes[std::string(to_string(edge_scope(comm, connection)))][transport_class(connection)];
    }
    for (const auto& [scope, counts] : classes) {
      out << "  " << scope << ":";
      for (const auto& [klass, count] : counts) out << " " << klass << " x" << count;
      out << "\n";
    }
    if (comm.ring_gdr || comm.ring_pxn) {
      out << "  rings: PXN " << (comm.ring_pxn ? std::to_string(*comm.ring_pxn) : "?") << ", GDR "
          << (comm.ring_gdr ? std::to_string(*comm.ring_gdr) : "?") << "\n";
    }
    for (const TuningChoice& choice : comm.tuning) {
      out << "  tuning: " << choice.collective << " " << (choice.bytes ? std::to_string(*choice.bytes) : "?") << " bytes -> "
          << choice.algorithm << "/" << choice.protocol;
      if (choice.channel_lo && choice.channel_hi) out << " channels " << *choice.channel_lo << ".." << *choice.channel_hi;
      out << "\n";
    }
  }
  for (const std::string& warning : summary.warnings) out << "NCCL WARN: " << warning << "\n";
  for (const std::string& note : summary.notes) out << "note: " << note << "\n";
}

int run(int argc, char** argv) {
  const Options options = parse_args(argc, argv);
  if (options.help) {
    std::cout << kUsage;
    return 0;
  }
  std::optional<ExpectSpec> spec;
  if (options.has_expect) spec = parse_expect_spec(options.expect);
  if (!options.json_path.empty()) check_writable_output(options.json_path, "--json");

  const EvidenceSummary summary = parse_nccl_logs(options.inputs);
  print_summary(summary, std::cout);

  std::optional<GateResult> gate;
  if (spec) gate = check_expectation(summary, *spec);

  if (!options.json_path.empty()) {
    nlohmann::json document;
    document["schema_version"] = kNcclEvidenceSchemaVersion;
    document["tool"] = {{"name", kProgram}, {"version", kToolVersion}, {"git_commit", kGitCommit}};
    std::vector<std::string> args(argv, argv + argc);
    document["argv"] = args;
    document["expectation"] = gate ? to_json(*gate, *spec) : nlohmann::json(nullptr);
    const nlohmann::json evidence = to_json(summary);
    for (const auto& [key, value] : evidence.items()) document[key] = value;
    write_file_atomic(options.json_path, document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }

  if (!gate) return 0;
  if (gate->passed) {
    std::cout << gate->message << "\n";
    return 0;
  }
  std::cout << "problems (" << gate->problems.size() << "):\n";
  for (std::size_t i = 0; i < gate->problems.size() && i < kProblemsListed; ++i) std::cout << "  " << gate->problems[i] << "\n";
  if (gate->problems.size() > kProblemsListed) {
    std::cout << "  ... " << gate->problems.size() - kProblemsListed << " more (see --json)\n";
  }
  std::cout.flush();
  std::cerr << kProgram << ": error: " << gate->message << "\n";
  return to_int(ExitCode::transport_mismatch);
}

}  // namespace
}  // namespace cclbench

int main(int argc, char** argv) {
  try {
    return cclbench::run(argc, argv);
  } catch (const cclbench::UsageError& error) {
    std::cerr << cclbench::kProgram << ": error: " << error.what() << "\n";
    return cclbench::to_int(cclbench::ExitCode::usage);
  } catch (const cclbench::FatalError& error) {
    std::cerr << cclbench::kProgram << ": error: " << error.what() << "\n";
    return cclbench::to_int(error.code());
  } catch (const std::exception& error) {
    std::cerr << cclbench::kProgram << ": error: " << error.what() << "\n";
    return cclbench::to_int(cclbench::ExitCode::runtime_error);
  }
}
