#include "bench/evidence/transport_gate.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "bench/core/errors.hpp"
#include "bench/evidence/ascii_case.hpp"
#include "bench/evidence/log_text.hpp"

namespace cclbench {

namespace {

constexpr std::size_t kProblemsInMessage = 3;

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

[[noreturn]] void bad_spec(const std::string& why, std::string_view spec) {
  throw UsageError("--expect: " + why + " in '" + std::string(spec) +
                   "' (expected e.g. inter=NET/IB+GDRDMA,intra=P2P; kinds NET, P2P, SHM, COLLNET)");
}

TransportPattern parse_pattern(std::string_view text, std::string_view spec) {
  TransportPattern pattern;
  pattern.text = std::string(evidence_detail::trim(text));
  std::string_view body = pattern.text;
  const std::size_t plus = body.find('+');
  if (plus != std::string_view::npos) {
    for (std::string_view flag : split(body.substr(plus + 1), '+')) {
      if (evidence_detail::upper(flag) != "GDRDMA") bad_spec("unknown flag '+" + std::string(flag) + "' (only +GDRDMA)", spec);
      pattern.require_gdr = true;
    }
    body = body.substr(0, plus);
  }
  for (std::string_view part : split(body, '/')) {
    if (part.empty()) bad_spec("empty transport part in '" + pattern.text + "'", spec);
    pattern.parts.emplace_back(part);
  }
  const std::string kind = evidence_detail::upper(pattern.parts.front());
  if (kind != "NET" && kind != "P2P" && kind != "SHM" && kind != "COLLNET") {
    bad_spec("unknown transport '" + std::string(pattern.parts.front()) + "'", spec);
  }
  if (pattern.require_gdr && kind != "NET" && kind != "COLLNET") {
    bad_spec("+GDRDMA applies to NET or COLLNET, not " + kind, spec);
  }
  return pattern;
}

bool part_matches(std::size_t index, const std::string& wanted, std::string_view actual, TransportKind kind) {
  const std::string want = evidence_detail::upper(wanted);
  const std::string have = evidence_detail::upper(actual);
  if (want == have) return true;
  // NVIDIA's external IB plugin (nccl-rdma-sharp-plugins / HPC-X) names itself IBext or IBext_vN.
  return index == 1 && kind == TransportKind::net && want == "IB" && have.starts_with("IBEXT");
}

std::string rank_label(const CommunicatorEvidence& comm, int rank) {
  return std::to_string(rank) + "[" + node_label(comm, rank) + "]";
}

}  // namespace

ExpectSpec parse_expect_spec(std::string_view text) {
  ExpectSpec spec;
  spec.text = std::string(evidence_detail::trim(text));
  if (spec.text.empty()) throw UsageError("--expect: empty specification (expected e.g. inter=NET/IB+GDRDMA,intra=P2P)");
  for (std::string_view item : split(spec.text, ',')) {
    item = evidence_detail::trim(item);
    const std::size_t equals = item.find('=');
    if (item.empty()) bad_spec("empty item", spec.text);
    if (equals == std::string_view::npos) bad_spec("item '" + std::string(item) + "' has no '='", spec.text);
    const std::string key(evidence_detail::trim(item.substr(0, equals)));
    const std::string_view value = evidence_detail::trim(item.substr(equals + 1));
    if (value.empty()) bad_spec("no transport for '" + key + "'", spec.text);
    TransportRequirement requirement;
    requirement.text = std::string(value);
    for (std::string_view alternative : split(value, '|')) {
      if (evidence_detail::trim(alternative).empty()) bad_spec("empty alternative in '" + std::string(value) + "'", spec.text);
      requirement.alternatives.push_back(parse_pattern(alternative, spec.text));
    }
    std::optional<TransportRequirement>* slot = nullptr;
    if (key == "inter") slot = &spec.inter;
    else if (key == "intra") slot = &spec.intra;
    else bad_spec("unknown key '" + key + "' (use inter= or intra=)", spec.text);
    if (slot->has_value()) bad_spec("'" + key + "' given twice", spec.text);
    *slot = std::move(requirement);
  }
  return spec;
}

bool matches(const TransportPattern& pattern, const ChannelConnection& connection) {
  const auto parts = split(connection.transport, '/');
  if (pattern.parts.size() > parts.size()) return false;
  for (std::size_t i = 0; i < pattern.parts.size(); ++i) {
    if (!part_matches(i, pattern.parts[i], parts[i], connection.kind)) return false;
  }
  return !pattern.require_gdr || connection.gdr;
}

bool matches(const TransportRequirement& requirement, const ChannelConnection& connection) {
  return std::any_of(requirement.alternatives.begin(), requirement.alternatives.end(),
                     [&](const TransportPattern& pattern) { return matches(pattern, connection); });
}

GateResult check_expectation(const EvidenceSummary& summary, const ExpectSpec& spec) {
  GateResult result;
  std::vector<std::string> problems;
  std::vector<std::string> problem_groups;  // problems of one edge (all channels) share a group
  std::set<std::string> seen;
  auto add = [&](std::string problem, std::string group = "") {
    if (!seen.insert(problem).second) return;
    problem_groups.push_back(group.empty() ? problem : std::move(group));
    problems.push_back(std::move(problem));
  };

  const bool any_input = std::any_of(summary.inputs.begin(), summary.inputs.end(),
                                     [](const LogInput& input) { return input.status == "ok"; });
  if (!any_input) add("no usable NCCL log among the inputs (empty, binary or without 'NCCL INFO' lines)");

  for (const CommunicatorEvidence& comm : summary.communicators) {
    if (comm.nranks && comm.ranks.size() < static_cast<std::size_t>(*comm.nranks) && !comm.connections.empty()) {
      std::string missing;
      int listed = 0;
      for (int rank = 0; rank < *comm.nranks && listed < 8; ++rank) {
        if (!comm.ranks.count(rank)) {
          missing += (listed ? "," : "") + std::to_string(rank);
          ++listed;
        }
      }
      if (static_cast<std::size_t>(*comm.nranks) - comm.ranks.size() > 8) missing += ",...";
      add("logs cover " + std::to_string(comm.ranks.size()) + " of " + std::to_string(*comm.nranks) + " ranks of " +
          comm.id + " (missing ranks " + missing + "): connections of the missing ranks are unproven");
    }
    for (const ChannelConnection& connection : comm.connections) {
      const EdgeScope scope = edge_scope(comm, connection);
      const std::string klass = transport_class(connection);
      const std::string edge = rank_label(comm, connection.from_rank) + " -> " + rank_label(comm, connection.to_rank) +
                               " channel " + std::to_string(connection.channel);
      if (scope == EdgeScope::unknown) {
        if (spec.inter || spec.intra) {
          add("edge " + edge + " (" + connection.transport + "): cannot tell whether it is inter- or intra-node: no log " +
              "places both ranks on a host; pass every rank's log",
              "unknown " + edge.substr(0, edge.rfind(" channel ")));
        }
        continue;
      }
      const bool inter = scope == EdgeScope::inter_node;
      if (inter) {
        ++result.inter_node_connections;
        ++result.inter_node_classes[klass];
      } else {
        ++result.intra_node_connections;
        ++result.intra_node_classes[klass];
      }
      const auto& requirement = inter ? spec.inter : spec.intra;
      if (requirement && !matches(*requirement, connection)) {
        const std::string what = connection.kind == TransportKind::collnet
                                     ? "CollNet connection of rank " + rank_label(comm, connection.from_rank) +
                                           " channel " + std::to_string(connection.channel)
                                     : std::string(inter ? "inter-node" : "intra-node") + " edge " + edge;
        add(what + " used " + connection.transport + ", expected " + requirement->text,
            what.substr(0, what.rfind(" channel ")));
      }
    }
  }

  // A process that picked another network than the one required is a fallback even before any edge.
  if (spec.inter) {
    // Only when every alternative names a network (NET/<name>): "inter=NET|COLLNET" accepts any.
    std::vector<std::string> wanted_nets;
    bool every_alternative_names_a_net = true;
    for (const TransportPattern& pattern : spec.inter->alternatives) {
      if (evidence_detail::upper(pattern.parts.front()) == "NET" && pattern.parts.size() >= 2) {
        wanted_nets.push_back(pattern.parts[1]);
      } else {
        every_alternative_names_a_net = false;
      }
    }
    if (every_alternative_names_a_net) {
      // One problem per host and network, not per process.
      std::map<std::pair<std::string, std::string>, std::set<int>> offenders;
      for (const ProcessEvidence& process : summary.processes) {
        bool multi_node = false;
        for (const CommunicatorEvidence& comm : summary.communicators) {
          for (const auto& [rank, entry] : comm.ranks) {
            if (entry.host == process.host && entry.pid == process.pid && comm.nnodes && *comm.nnodes > 1) multi_node = true;
          }
        }
        if (!multi_node) continue;
        for (const std::string& network : process.networks) {
          const bool ok = std::any_of(wanted_nets.begin(), wanted_nets.end(), [&](const std::string& wanted) {
            return part_matches(1, wanted, network, TransportKind::net);
          });
          if (!ok) offenders[{process.host, network}].insert(process.pid);
        }
      }
      for (const auto& [where, pids] : offenders) {
        add("host " + where.first + " (" + std::to_string(pids.size()) + " process" + (pids.size() > 1 ? "es" : "") +
                ") used network " + where.second + " ('Using network " + where.second + "'), expected " + spec.inter->text,
            "network " + where.first);
      }
    }
  }

  const bool any_connection = std::any_of(summary.communicators.begin(), summary.communicators.end(),
                                          [](const CommunicatorEvidence& comm) { return !comm.connections.empty(); });
  if (!any_connection) {
    add("no connection lines ('Channel .. via ..') in the logs: no transport evidence (NCCL_DEBUG=INFO with "
        "NCCL_DEBUG_SUBSYS including INIT, and at least one collective, are needed)");
  } else {
    if (spec.inter && result.inter_node_connections == 0) {
      add("no inter-node connection in the logs, expected " + spec.inter->text +
          ": no evidence (single-node run, or the logs of one node only?)");
    }
    if (spec.intra && result.intra_node_connections == 0) {
      add("no intra-node connection in the logs, expected " + spec.intra->text + ": no evidence");
    }
  }
  if (!spec.inter && !spec.intra) add("empty expectation");

  result.problems = std::move(problems);
  result.passed = result.problems.empty();
  auto describe = [](const std::map<std::string, std::uint64_t>& classes) {
    std::string text;
    for (const auto& [klass, count] : classes) text += (text.empty() ? "" : ", ") + klass + " x" + std::to_string(count);
    return text.empty() ? std::string("none") : text;
  };
  if (result.passed) {
    result.message = "transport expectation '" + spec.text + "' met: inter-node " +
                     describe(result.inter_node_classes) + "; intra-node " + describe(result.intra_node_classes);
  } else {
    result.message = "transport expectation '" + spec.text + "' failed: ";
    // The first problem of each distinct edge or host, so one edge's channels do not crowd out others.
    std::set<std::string> shown_groups;
    std::size_t shown = 0;
    for (std::size_t i = 0; i < result.problems.size() && shown < kProblemsInMessage; ++i) {
      if (!shown_groups.insert(problem_groups[i]).second) continue;
      result.message += (shown++ ? "; " : "") + result.problems[i];
    }
    if (result.problems.size() > shown) {
      result.message += " (and " + std::to_string(result.problems.size() - shown) + " more problems)";
    }
  }
  return result;
}

nlohmann::json to_json(const GateResult& result, const ExpectSpec& spec) {
  return {{"spec", spec.text},
          {"passed", result.passed},
          {"problems", result.problems},
          {"message", result.message},
          {"inter_node_connections", result.inter_node_connections},
          {"intra_node_connections", result.intra_node_connections},
          {"inter_node_classes", result.inter_node_classes},
          {"intra_node_classes", result.intra_node_classes}};
}

}  // namespace cclbench
