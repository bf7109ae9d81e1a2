"""`report RUN_DIR`: report.md with anomalies first, then environment, topology, transport
evidence, tables and plots. Missing numbers render as '-'.
"""

import importlib.util
import os

from ..base.errors import CclbenchError
from ..base.numbers import median
from ..base.files import make_dirs, write_atomic, write_json_atomic
from ..base.values import COLL_KINDS, format_size, utc_now
from ..model.records import (CLASS_LABELS, bandwidth_time_us, base_point_of, group_repeats, is_correctness_only,
                             latest_by_case, launch_base_point, load_cases, measurement_class, record_is_sound,
                             was_skipped)
from ..model.run_dir import (RunData, algo_proto, busbw_of, median_of, p2p_matrices, pick_record, point_binding,
                             rail_bytes_per_host, rail_error_counters, rail_totals, time_of,
                             transport_observed)
from ..render import plots
from ..render.anomalies import anomaly_rows, hca_not_applicable_note, netdev_source, rail_errors_text
from ..render.by_design import by_design_section
from ..render.p2p_local import device_count, one_gpu_lines
from ..render.decode import ab_section, decode_section
from ..render.doctor import doctor_section
from ..render.markdown import fmt_number, md_table
from ..render.verdict import reason_text, verdict_document, verdict_lines
from ..rules import outliers, repeatability
from ..rules.anomalies import single_rail_points, socket_hca_points
from ..rules.ceilings import LIMIT_ROWS, ceiling_for, line_rate, rails_reason, run_link_rates
from ..rules.rails import RAIL_SLOW_MIN_BYTES, RAIL_SLOW_MIN_RATIO, RAIL_SLOW_MPI_RATIO, compare_rails, is_host_timed
from ..rules.repeat_rule import HOST_BOUND_GATE_FACTOR, HOST_BOUND_RATIO, MAD_TO_SIGMA
from ..rules.verdict import SEVERITIES, run_verdict


def table_cells(data):
    """{(collective, base_point, size): [records across repeats]} using the headline placement. Emulated
    and MPI-backend records are correctness checks: they feed no headline table or plot."""
    by_point_size = {}
    for (point, _case), record in data.latest.items():
        if is_correctness_only(record):
            continue
        key = (record.get("collective"), base_point_of(point), record.get("requested_bytes"), point)
        by_point_size.setdefault(key, []).append(record)
    cells = {}
    for (collective, base, size, _point), records in by_point_size.items():
        chosen = pick_record(records)
        if chosen is not None:
            cells.setdefault((collective, base, size), []).append(chosen)
    return cells


# --- plots ----------------------------------------------------------------------------------------

def plots_expected():
    """Whether the report will draw its plots (load_pyplot's conditions), without importing matplotlib."""
    if os.environ.get("CCLBENCH_NO_MATPLOTLIB") == "1":
        return False
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        return False


def load_pyplot():
    """matplotlib, imported only when plotting; None when absent or disabled (CCLBENCH_NO_MATPLOTLIB=1)."""
    if os.environ.get("CCLBENCH_NO_MATPLOTLIB") == "1":
        return None, "CCLBENCH_NO_MATPLOTLIB=1"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except Exception as error:  # any import-time failure only costs the plots
        return None, f"matplotlib unavailable ({type(error).__name__}: {error})"
    return pyplot, None


# --- the report -----------------------------------------------------------------------------------

def flatten(document, prefix="", depth=0, out=None):
    out = {} if out is None else out
    if isinstance(document, dict) and depth < 3:
        for key, value in document.items():
            flatten(value, f"{prefix}{key}.", depth + 1, out)
    elif not isinstance(document, (dict, list)):
        out[prefix.rstrip(".")] = document
    elif isinstance(document, list) and all(not isinstance(v, (dict, list)) for v in document) and len(document) <= 16:
        out[prefix.rstrip(".")] = ", ".join(str(v) for v in document)
    return out


VERSION_WORDS = ("version", "driver", "commit", "gpu_name", "device_name", "hostname", "nccl", "cuda", "mpi", "hwloc")


def environment_section(data):
    manifest = data.manifest
    lines = ["## Environment and versions", ""]
    tool = manifest.get("tool") or {}
    rows = [("run id", manifest.get("run_id")), ("mode", manifest.get("mode")), ("status", manifest.get("status")),
            ("hosts", ", ".join(manifest.get("hosts") or []) or None),
            ("created (UTC)", manifest.get("created_utc")), ("updated (UTC)", manifest.get("updated_utc")),
            ("cclbench", f"{tool.get('version')} ({tool.get('git_commit') or 'commit unknown'})")]
    for key, value in sorted((manifest.get("versions") or {}).items()):
        rows.append((key, ", ".join(value) if isinstance(value, list) else value))
    lines.append(md_table(["item", "value"], rows))
    seen = {}
    for name, document in data.raw.items():
        if isinstance(document, dict) and isinstance(document.get("manifest"), dict):
            for key, value in flatten(document["manifest"]).items():
                if any(word in key.lower() for word in VERSION_WORDS) and key not in seen:
                    seen[key] = value
    if seen:
        lines += ["", "From coll_perf's manifests:", "",
                  md_table(["field", "value"], sorted(seen.items())[:60])]
    env = manifest.get("env") or {}
    lines += ["", "Allowlisted environment at launch (secret-looking names are never recorded):", ""]
    lines.append(md_table(["variable", "value"], sorted(env.items())) if env else "_none set_")
    if manifest.get("env_redacted"):
        lines.append(f"\nRedacted (names only): {', '.join(manifest['env_redacted'])}")
    lines += host_env_lines(data)
    notes = manifest.get("notes") or []
    for note in notes:
        lines.append(f"\n> Note: {note}")
    return lines


def host_env_lines(data):
    """What each host's ranks ran with (coll_perf manifest.env_by_host, schema 1.4), over every point: one row
    per variable, one column per host; a host that ran several values across the points lists them all."""
    hosts, values = list(data.manifest.get("hosts") or []), {}
    for launch in data.plan:
        document = data.raw.get(launch["name"])
        manifest = document.get("manifest") if isinstance(document, dict) else None
        by_host = manifest.get("env_by_host") if isinstance(manifest, dict) else None
        if not isinstance(by_host, dict):
            continue
        for host, env in by_host.items():
            if host not in hosts:
                hosts.append(host)
            for name, value in (env or {}).items() if isinstance(env, dict) else ():
                seen = values.setdefault(name, {}).setdefault(host, [])
                if value not in seen:
                    seen.append(value)
    if not values:
        return ["", "Environment each host's ranks ran with: _not recorded (coll_perf before schema 1.4, or no "
                "point ran)_"]
    rows = [[name] + [" / ".join("unset" if v is None else str(v) for v in values[name].get(host, [None]))
                      for host in hosts] for name in sorted(values)]
    return ["", "Environment each host's ranks ran with (coll_perf env_by_host, every point; `unset`: not set "
            "on that host's ranks):", "", md_table(["variable"] + hosts, rows)]


def _join(value):
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value) if value else None
    return value


def topology_section(data):
    """GPU - NIC - NUMA per node from topology/<host>.json (results_schema/topology.schema.json)."""
    lines = ["## Topology (GPU - NIC - NUMA)", ""]
    if not data.topology:
        return lines + ["_not available: no topology/<host>.json in this run_"]
    for host, model in sorted(data.topology.items()):
        lines += [f"### {host}" + (f" (host {model['host']})" if model.get("host") not in (None, host) else ""), ""]
        nearest = {}
        for entry in model.get("gpu_nics") or []:
            if isinstance(entry, dict):
                allowed = [nic for nic in entry.get("allowed_nics") or entry.get("nic_order") or [] if isinstance(nic, dict)]
                nearest[entry.get("gpu_index")] = ", ".join(
                    f"{nic.get('name')}:{nic.get('port')}" + (f"/{nic['netdev']}" if nic.get("netdev") else "") +
                    f" {nic.get('path_class') or '?'}" for nic in allowed[:2]) or None
        gpu_rows = []
        for gpu in model.get("gpus") or []:
            if isinstance(gpu, dict):
                gpu_rows.append((gpu.get("index"), gpu.get("name"), gpu.get("pci_bus_id"),
                                 _join(gpu.get("numa_nodes")) if "numa_nodes" in gpu else gpu.get("numa_node"),
                                 gpu.get("cpu_affinity") or gpu.get("cpu_affinity_reason"), nearest.get(gpu.get("index"))))
        lines.append(md_table(["GPU", "name", "PCI bus id", "NUMA", "CPUs", "NICs, nearest first (path)"], gpu_rows)
                     if gpu_rows else "_no GPUs found_")
        nic_rows = []
        for nic in model.get("nics") or []:
            if not isinstance(nic, dict):
                continue
            ports = "; ".join(f"{p.get('port')}: {p.get('state') or '-'} {p.get('protocol') or p.get('link_layer') or ''} "
                              f"{p.get('rate') or ''}".strip() for p in nic.get("ports") or [] if isinstance(p, dict))
            nic_rows.append((nic.get("name"), nic.get("netdev"), nic.get("pci_bus_id"),
                             _join(nic.get("numa_nodes")) if "numa_nodes" in nic else nic.get("numa_node"),
                             ports or nic.get("ports_reason")))
        lines += ["", md_table(["HCA", "netdev", "PCI bus id", "NUMA", "ports (state, protocol, rate)"], nic_rows)
                  if nic_rows else "_no RDMA NICs_", ""]
        devices, matrix = model.get("devices"), model.get("path_matrix")
        if isinstance(devices, list) and isinstance(matrix, list) and len(matrix) == len(devices) and devices:
            rows = [[name] + [("X" if i == j else (cell or "-")) for j, cell in enumerate(row if isinstance(row, list) else [])]
                    for i, (name, row) in enumerate(zip(devices, matrix))]
            lines += ["Path classes (nvidia-smi topo -m legend):", "", md_table([""] + list(devices), rows), ""]
        numa = [(n.get("os_index"), n.get("cpuset")) for n in model.get("numa_nodes") or [] if isinstance(n, dict)]
        if numa:
            lines += [md_table(["NUMA node", "CPUs"], numa), ""]
    return lines


def transport_section(data):
    lines = ["## Transport evidence per sweep point", "",
             "What NCCL actually used, parsed by coll_perf from NCCL's own INFO logs (nccl/<point>/); "
             "the gate is coll_perf --expect-transport (exit 3 on a mismatch).", ""]
    rows = []
    for launch in [l for l in data.plan if l.get("kind") in COLL_KINDS + ("sanity",)]:
        name = launch["name"]
        state = data.points_state.get(name, {})
        argv = launch.get("argv") or []
        expect = argv[argv.index("--expect-transport") + 1] if "--expect-transport" in argv[:-1] else None
        inter, intra, devices, verdict = transport_observed(data.raw.get(name))
        if not expect:
            gate = "not gated"
        elif state.get("exit_code") == 3:
            gate = verdict if verdict and verdict.startswith("FAILED") else "FAILED (coll_perf exit 3)"
        elif verdict:
            gate = verdict
        elif state.get("status") == "complete":
            gate = "pass"
        else:
            gate = state.get("status") or "-"
        env = ", ".join(f"{k}={v}" for k, v in (launch.get("env") or {}).items())
        rows.append((name, env or None, expect, gate, inter, intra, devices))
    lines.append(md_table(["point", "environment", "expectation", "gate", "inter-node (class x connections)",
                           "intra-node", "NET devices used"], rows)
                 if rows else "_no collective launches planned_")
    lines += [""] + rails_section(data) + [""] + bindings_section(data)
    return lines


def rails_section(data):
    """Per-rail bytes moved per point, from the rail counters coll_perf records with each case: the HCA port
    counters summed over the hosts (one row), and each host's netdev rails (the interfaces NCCL's NET/Socket or
    MPI's TCP used: one row per host). The source column says which counters a row comes from."""
    lines = ["### Rails (counter deltas summed over the point's cases)", "",
             "Counters count all traffic on a port or interface, not only this benchmark's. Source: `hca` is the "
             "RDMA port counters (NET/IB, RoCE), summed over the hosts; `netdev (--netdevs)` / `netdev (NCCL log)` "
             "is each host's own interface counters (NET/Socket, MPI over TCP), the interfaces named by coll_perf "
             "--netdevs or by NCCL's `NET/Socket : Using` line. The two sources are never added together.", ""]
    per_point = {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    rows = []
    for launch in data.coll_launches():
        name = launch["name"]
        records = per_point.get(name, [])
        totals, errors, _flags = rail_totals(records)
        netdev = [entry for entry in rail_bytes_per_host(records) if entry["source"] == "netdev"]
        inter = launch.get("kind") == "inter" or len({entry["host"] for entry in netdev}) >= 2
        if not totals:
            if launch.get("kind") == "inter" and not netdev:
                rows.append((name, "all hosts", "hca", f"not available: {rails_reason(records)}", None, None))
        elif launch.get("kind") == "inter" or any(totals.values()) or errors:  # error increments show even at 0 bytes
            total = sum(totals.values()) or 1
            shares = ", ".join(f"{rail} {value / total * 100:.0f}%" for rail, value in sorted(totals.items()))
            moved = ", ".join(f"{rail} {value / 1e9:.3f} GB" for rail, value in sorted(totals.items()))
            counters = rail_error_counters(records)
            rows.append((name, "all hosts", "hca", shares, moved,
                         ", ".join(rail_errors_text(r, c, counters.get(r)) for r, c in sorted(errors.items())) or "0"))
        if inter:
            rows += [(name,) + netdev_row(entry) for entry in netdev]
    if not rows:
        return lines + ["_not available: no multi-node point in this run (rails carry no traffic inside one node)_"]
    sockets = socket_hca_points(data)
    context = line_rate_section(data) + rails_alone_section(data)
    return lines + [md_table(["point", "host", "source", "share per rail", "bytes per rail", "error increments"], rows)] \
        + (["", hca_not_applicable_note(sockets)] if sockets else []) + ([""] + context if context else [])


def netdev_row(entry):
    """(host, source, shares, bytes, error increments) of one host's netdev rails (rail_bytes_per_host entry): a
    rail without a known count shows '-' with its reason; cases left out of the sums are counted with the reasons."""
    shares = ", ".join(f"{rail['rail']} " + ("-" if rail["share"] is None else f"{rail['share'] * 100:.0f}%")
                       for rail in entry["rails"])
    moved = ", ".join(f"{rail['rail']} " + ("-" if rail["bytes"] is None else f"{rail['bytes'] / 1e9:.3f} GB")
                      for rail in entry["rails"])
    reasons = [f"{rail['rail']}: {reason}" for rail in entry["rails"] for reason in rail["reasons"]]
    if entry["left_out"]:
        moved += (f" ({entry['left_out']} of {entry['cases']} case(s) left out, a counter null: "
                  f"{'; '.join(reasons)})")
    return (entry["host"], netdev_source(entry["from"]), shares, moved, "not counted (netdev)")


def bindings_section(data):
    """The CPU/memory/GPU/NIC binding each rank ran under (coll_perf's bindings section); identical rows
    of several points are shown once, with the points listed."""
    lines = ["### Rank bindings (GPU - CPU - memory - NIC each rank ran under)", ""]
    grouped = {}
    reasons = set()
    for launch in data.coll_launches():
        base = launch_base_point(launch)
        document = data.raw.get(launch["name"])
        bindings = document.get("bindings") if isinstance(document, dict) else None
        if not isinstance(bindings, list) or not bindings:
            reasons.add(f"{base}: " + ("no coll_perf result" if document is None else "no bindings section"))
            continue
        for binding in bindings:
            if not isinstance(binding, dict):
                continue
            nics = binding.get("allowed_nics")
            if isinstance(nics, list):
                nics = ",".join(f"{n.get('name')}:{n.get('port')}" + (f" {n['path_class']}" if n.get("path_class") else "")
                                if isinstance(n, dict) else str(n) for n in nics)
            memory = binding.get("memory_binding")
            if isinstance(memory, dict):
                memory = f"{memory.get('policy')}:{memory.get('nodeset')}"
            key = (binding.get("rank"), binding.get("host"), binding.get("gpu_pci_bus_id"),
                   binding.get("cpu_binding") or binding.get("cpu_binding_reason"),
                   memory or binding.get("memory_binding_reason"),
                   binding.get("gpu_numa_node") if binding.get("gpu_numa_node") is not None else binding.get("gpu_numa_node_reason"),
                   nics)
            points = grouped.setdefault(key, [])
            if base not in points:
                points.append(base)
    rows = []
    order = {launch_base_point(launch): index for index, launch in enumerate(data.coll_launches())}
    for key, points in sorted(grouped.items(), key=lambda item: (order.get(item[1][0], 0), str(item[0][1]),
                                                                 item[0][0] if isinstance(item[0][0], int) else -1)):
        shown = ", ".join(points) if len(points) <= 3 else f"{points[0]} and {len(points) - 1} more"
        rows.append((shown,) + tuple("-" if value is None else str(value) for value in key))
    if rows:
        lines.append(md_table(["points", "rank", "host", "GPU bus id", "CPU binding", "memory binding", "GPU NUMA",
                               "NICs allowed"], rows[:400]))
    if reasons:
        lines += ["", "Not available: " + "; ".join(sorted(reasons)[:12]) + (" ..." if len(reasons) > 12 else "")]
    return lines


def tuning_section(data):
    lines = ["## NCCL algorithm / protocol per size (untimed TUNING probe)", ""]
    table = {}
    for (point, _case), record in data.latest.items():
        if record.get("in_place"):
            continue
        choice = algo_proto(record)
        cells = table.setdefault(base_point_of(point), {})
        key = (record.get("collective"), record.get("requested_bytes"))
        if choice or key not in cells:
            cells[key] = choice
    table = {base: cells for base, cells in table.items() if any(cells.values())}
    if not table:
        launches = data.coll_launches()
        if launches and all("--backend" in (l.get("argv") or []) for l in launches):
            why = "MPI backend (no NCCL)"
        elif launches and not any("--tuning-from" in (l.get("argv") or []) for l in launches):
            why = "no tuning probe was planned (this coll_perf build lacks --tuning-probe, or --no-tuning-probe)"
        elif any(data.points_state.get(l["name"], {}).get("status") != "complete"
                 for l in data.plan if l.get("kind") == "tuning"):
            why = "the tuning probe launch did not complete (see Launches)"
        else:
            why = "the case records carry no algorithm/protocol"
        return lines + [f"_not available: {why}_", ""]
    for base, cells in table.items():
        collectives = sorted({c for c, _ in cells})
        sizes = sorted({s for _, s in cells if isinstance(s, int)})
        rows = [[format_size(size)] + [cells.get((c, size)) for c in collectives] for size in sizes]
        lines += [f"### {base}", "", md_table(["size"] + collectives, rows), ""]
    return lines + ["'-': no choice recorded (NCCL logs none for collectives it runs as grouped send/recv, "
                    "e.g. alltoall; the records' evidence.tuning_reason says why).", ""]


def points_section(data):
    rows = []
    for launch in data.plan:
        state = data.points_state.get(launch["name"], {})
        rows.append((launch["name"], launch.get("kind"), launch.get("nranks"), state.get("status"),
                     state.get("exit_code"), state.get("attempts"), fmt_number(state.get("elapsed_s"), 1),
                     state.get("reason")))
    return ["## Launches", "", md_table(["launch", "kind", "ranks", "status", "exit", "attempts", "seconds", "reason"], rows)]


ONE_RANK_BUSBW = "- (1 rank)"


def busbw_cell(records):
    """A busbw table cell: '- (1 rank)' where the records are one-rank ones (coll_perf's busbw_reason: no link is
    crossed; old records said 0.0), else the median over repeats."""
    if one_rank(records):
        return ONE_RANK_BUSBW
    return fmt_number(median_of(records, busbw_of))


def collective_sections(data, plot_links):
    cells = table_cells(data)
    bases = data.base_points()
    collectives = []
    for launch in data.coll_launches():
        for collective in launch.get("collectives") or []:
            if collective not in collectives:
                collectives.append(collective)
    for (collective, _base, _size) in cells:
        if collective not in collectives:
            collectives.append(collective)
    correctness_bases = {base_point_of(point) for (point, _case), record in data.latest.items()
                         if is_correctness_only(record)}
    lines = ["## Results per collective", "",
             "Out-of-place records (in-place where only those exist); the median over repeats. "
             "busbw in GB/s (1e9 B/s), nccl-tests formulas, from each record's `bandwidth_from` time (the gated GPU "
             "time where coll_perf has one); latency in microseconds (per-iteration times, max over ranks per iteration).", ""]
    for collective in collectives:
        sizes = sorted({size for (c, _b, size) in cells if c == collective and isinstance(size, int)} |
                       {size for l in data.coll_launches() if collective in (l.get("collectives") or [])
                        and launch_base_point(l) not in correctness_bases for size in l.get("sizes") or []})
        columns = [b for b in bases if b not in correctness_bases and (
                   any(c == collective and b2 == b for (c, b2, _s) in cells) or
                   any(launch_base_point(l) == b and collective in (l.get("collectives") or []) for l in data.coll_launches()))]
        if not sizes or not columns:
            continue
        lines += [f"### {collective}", ""]
        for link in plot_links.get(collective, []):
            lines += [link, ""]
        lonely = [b for b in columns if any(one_rank(cells.get((collective, b, size), [])) for size in sizes)]
        if lonely == columns:
            reasons = sorted({r.get("busbw_reason") for size in sizes for b in columns
                              for r in cells.get((collective, b, size), []) if r.get("busbw_reason")})
            lines += [f"busbw (GB/s): {ONE_RANK_BUSBW} at every size: one rank crosses no link"
                      + (f" (coll_perf: {'; '.join(reasons)})" if reasons else "") + ", so busbw has no meaning.", ""]
        else:
            lines += ["busbw (GB/s):", ""]
            rows = [[format_size(size)] + [busbw_cell(cells.get((collective, b, size), [])) for b in columns]
                    for size in sizes]
            lines += [md_table(["size"] + columns, rows), ""]
        if lonely:
            lines += [f"algbw (GB/s), bytes / time: what {', '.join(lonely)} measure{'s' if len(lonely) == 1 else ''} "
                      "at one rank:", ""]
            rows = [[format_size(size)] + [fmt_number(median_of(cells.get((collective, b, size), []), algbw_of))
                                           for b in lonely] for size in sizes]
            lines += [md_table(["size"] + lonely, rows), ""]
        lines += ["time (us): the headline, the time busbw comes from "
                  "(gated_time_us, else time_us.mean), median over repeats:", ""]
        rows = [[format_size(size)] + [fmt_number(median_of(cells.get((collective, b, size), []), bandwidth_time_us))
                                       for b in columns] for size in sizes]
        lines += [md_table(["size"] + columns, rows), "", "latency p50 / p99 (us):", ""]
        rows = []
        for size in sizes:
            row = [format_size(size)]
            for b in columns:
                group = cells.get((collective, b, size), [])
                p50, p99 = median_of(group, time_of("p50")), median_of(group, time_of("p99"))
                row.append("-" if p50 is None and p99 is None else f"{fmt_number(p50)} / {fmt_number(p99)}")
            rows.append(row)
        lines += [md_table(["size"] + columns, rows), ""]
    if correctness_bases and not any(line.startswith("### ") for line in lines):
        lines += ["_No GPU-timed point in this run: see Correctness-only points._", ""]
    return lines


# The verdict column of the repeatability table, per judge_case code.
CASE_WORDS = {None: "ok", repeatability.CASE_ABOVE_TARGET: "above target (one repeat off)",
              repeatability.HOST_BOUND_JITTER: "above target (host-bound)",
              repeatability.CASE_ABOVE_GATE: "above target, no stable median"}


def repeat_rule_text(cv_gate):
    """The repeatability rule in words, from the constants of rules/repeatability.py and rules/repeat_rule.py."""
    rule = repeatability
    return (f"Headline: the median over repeats. Target: CV <= {cv_gate:g}% per case. A case above it has one repeat "
            f"off when its robust dispersion ({MAD_TO_SIGMA:g} x MAD / median, which one repeat of three cannot move) "
            f"is within the target, or {HOST_BOUND_GATE_FACTOR:g} x the target where the case is host-bound "
            f"(batch_time_us >= {HOST_BOUND_RATIO:g} x gated_time_us); else it has no stable median. Single cases "
            f"are notes (counted nowhere) where chance explains them, by the noise of ten healthy one-H200 baselines: "
            f"host-bound jitter, each median stable; cases not host-bound above the target, and cases without a "
            f"stable median, while their count stays within the binomial tail of a healthy rate of "
            f"{rule.CASE_TARGET_RATE:g} and {rule.CASE_GATE_RATE:g} a case. A count that healthy noise reaches with "
            f"P < {rule.WARN_FALSE_ALARM:g} is a warning. A point fails only when its spread is systematic: its "
            f"median CV above max(target, {rule.SPREAD_LIMIT_PCT:g}%), one repeat off the others by more than "
            f"max({rule.SHIFT_LIMIT_PCT:g}%, {rule.SHIFT_GATE_FACTOR:.2f} x target) on "
            f"{rule.SHIFT_CONSISTENT_FRACTION * 100:.0f}% of its cases, or more cases without a stable median than "
            f"chance explains with P < {rule.FALSE_ALARM:g}. Per-iteration CV is shown, never judged.")


def repeats_section(data, cv_gate, verdict):
    """Per judged point (verdict['points'][]['repeatability']): its status, its reasons (fails, warnings and the
    notes of single cases chance explains), then per case the CV and robust dispersion and the case's word;
    cases above the target first."""
    judged = [(p["point"], p["repeatability"]) for p in verdict["points"] if p.get("repeatability")]
    if not judged:
        return []
    groups = group_repeats(data.records)
    rows, counts, point_rows = [], {}, []
    rank = {repeatability.CASE_ABOVE_GATE: 0, repeatability.CASE_ABOVE_TARGET: 1, repeatability.HOST_BOUND_JITTER: 2,
            None: 3}
    for base, point in judged:
        point_rows.append((base, point["status"], point["code"] or "-", point["judged_cases"],
                           fmt_number(point["median_cv_pct"]), f"{point['cases_above_target']}",
                           f"{point['cases_above_gate']} (fails at {point['cases_above_gate_limit']})"))
        for case_id, case in point["cases"].items():
            group = groups.get((base, case_id), [])
            times = [t for t in (bandwidth_time_us(r) for r in group if record_is_sound(r)) if t is not None]
            word = CASE_WORDS[case["code"]]
            counts[word] = counts.get(word, 0) + 1
            rows.append((rank[case["code"]], -case["cv_pct"],
                         (base, case_id, case["repeats"], fmt_number(median(times)), fmt_number(case["cv_pct"]),
                          fmt_number(case["robust_pct"]), fmt_number(median_of(group, time_of("cv_pct"))), word)))
    rows.sort(key=lambda item: item[:2])
    summary = ", ".join(f"{counts[word]} {word}" for word in CASE_WORDS.values() if word in counts)
    reasons = [f"- {r['severity']}: {reason_text(r)}" for r in verdict["reasons"] + verdict["notes"]
               if r["check"] == "repeatability"]
    return ["## Repeatability (the bandwidth time across repeats)", "", f"{repeat_rule_text(cv_gate)} {summary}.", "",
            md_table(["point", "status", "code", "cases", "median CV %", "cases above target",
                      "cases without a stable median"], point_rows), ""] + (reasons + [""] if reasons else []) + [
            md_table(["point", "case", "repeats", "headline us", "CV %", "robust %", "per-iteration CV %", "verdict"],
                     [row for _o, _c, row in rows[:200]]), ""]


def correctness_only_section(data):
    """Emulated and MPI-backend points: what they prove (correctness), with their wrong counts. A case
    counts as ok when every repeat of it is, as failed when any repeat failed or computed wrong data."""
    per_point = {}
    for (point, case_id), record in sorted(data.latest.items()):
        if is_correctness_only(record):
            cases = per_point.setdefault((base_point_of(point), measurement_class(record)), {"points": set(), "cases": {}})
            cases["points"].add(point)
            cases["cases"].setdefault(case_id, []).append(record)
    if not per_point:
        return []
    rows = []
    for (base, cls), found in per_point.items():
        groups = list(found["cases"].values())
        skipped = [g for g in groups if all(was_skipped(r) for r in g)]
        failed = [g for g in groups if g not in skipped and any(not record_is_sound(r) and not was_skipped(r) for r in g)]
        wrong = sum(int(r["wrong"]) for g in groups for r in g
                    if isinstance(r.get("wrong"), int) and not isinstance(r["wrong"], bool))
        rows.append((base, CLASS_LABELS[cls], len(found["points"]), len(groups), len(groups) - len(skipped) - len(failed),
                     len(skipped), len(failed), wrong))
    return ["## Correctness-only points", "",
            "Emulated ranks (several ranks time-slicing one GPU over sockets) and the MPI backend (host memory) "
            "prove the code paths and the data; their times are not GPU figures, so they feed no anomaly but wrong "
            "data and failures, no gate, headline table, plot or compare time verdict. A case is ok when every "
            "repeat of it is.", "",
            md_table(["point", "what", "repeats", "cases", "ok", "skipped", "failed or wrong", "wrong elements"], rows), ""]


def p2p_section(data, pyplot, plots_dir):
    lines = ["## P2P matrices (per node, src row -> dst column)", ""]
    if not data.p2p:
        return lines + ["_not available: no p2p/<host>.json in this run (no GPU, or the P2P launch did not finish)_", ""]
    for host, document in sorted(data.p2p.items()):
        lines += [f"### {host}" + (f" (host {document['host']})" if document.get("host") not in (None, host) else ""), ""]
        if document.get("no_device_reason"):
            lines += [f"_not available: {document['no_device_reason']}_", ""]
        matrices = p2p_matrices(document)
        if device_count(document) == 1:
            lines += one_gpu_lines(document)  # what one GPU measures: the local copy, not a 1 x 1 matrix
            matrices = []
        elif not matrices and not document.get("no_device_reason"):
            lines += ["_no GPU pair measured (one GPU, or every pair skipped)_", ""]
        # One colour scale, from 0, for all the tests of one unit on this host; from the GPU pairs where
        # there are any: a diagonal (the local copy within a GPU, p2p_matrix schema 1.1) is ~30x a link.
        scale = {}
        for _name, unit, _description, _size, matrix in matrices:
            pairs = [v for i, row in enumerate(matrix) for j, v in enumerate(row) if v is not None and i != j]
            scale[unit] = max([scale.get(unit) or 0] + (pairs or [v for row in matrix for v in row if v is not None]))
        for name, unit, description, size, matrix in matrices:
            lines += [f"**{name}** ({unit}{', ' + format_size(size) if size else ''})" +
                      (f": {description}" if description else ""), ""]
            if pyplot is not None:
                safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in f"p2p_{host}_{name}")
                plots.plot_heatmap(pyplot, os.path.join(plots_dir, safe + ".png"), f"{host}: {name}" +
                                   (f" ({format_size(size)})" if size else ""), matrix, unit,
                                   vmax=scale.get(unit) or None, higher_is_better=unit == "GB/s")
                lines += [f"![{host} {name}](plots/{safe}.png)", ""]
            header = ["src \\ dst"] + [str(j) for j in range(len(matrix))]
            rows = [[str(i)] + ["X" if i == j and v is None else fmt_number(v) for j, v in enumerate(row)]
                    for i, row in enumerate(matrix)]
            lines += [md_table(header, rows), ""]
        if device_count(document) != 1:  # one GPU has no pair to compare
            lines += outliers.p2p_section_lines(document, data.topology.get(host))
        others = {}
        # Device-scope tests (host<->device, the local copies device_local_copy_*) name the GPU as src and dst.
        device_tests = {t.get("name") for t in document.get("tests") or [] if isinstance(t, dict) and t.get("scope") == "device"}
        for result in document.get("results") or []:
            if isinstance(result, dict) and not (isinstance(result.get("src"), int) and isinstance(result.get("dst"), int)
                                                 and (device_count(document) == 1 or result.get("test") not in device_tests)):
                stats = result.get("bandwidth_gbps")
                if result.get("status") == "ok" and isinstance(stats, dict):
                    others.setdefault(result.get("test"), []).append(
                        (result.get("src"), result.get("dst"), result.get("bytes"), stats.get("median")))
        if others:
            rows = [(test, src, dst, format_size(size) if isinstance(size, int) else None, fmt_number(value))
                    for test, items in sorted(others.items()) for src, dst, size, value in items]
            lines += ["Host <-> device and single-GPU tests (GB/s, median):", "",
                      md_table(["test", "src", "dst", "size", "GB/s"], rows[:200]), ""]
    return lines


def one_rank(records):
    """True when the records of a cell are all one-rank records: busbw there is no figure (no link is crossed),
    whatever an old record (schema <= 1.3: 0.0) says."""
    return bool(records) and all(record.get("nranks") == 1 for record in records)


def algbw_of(record):
    return record.get("algbw_gbps") if record.get("status") == "ok" else None


def plot_specs(data):
    """The size-sweep plots of a report as data, [(file name, title, ylabel, series, logy, ceilings)], per
    collective: busbw of the points whose ranks cross links, with the physical ceilings that apply to them; algbw,
    without a ceiling, of one-rank points (they cross no link, so busbw and every link ceiling mean nothing there);
    p50 latency of every point."""
    specs = []
    cells = table_cells(data)
    bases = data.base_points()
    rates = run_link_rates(data)
    for collective in sorted({c for (c, _b, _s) in cells if c}):
        for metric, ylabel, getter, logy in (("busbw", "busbw (GB/s)", busbw_of, False),
                                             ("algbw", "algbw (GB/s), one rank", algbw_of, False),
                                             ("latency", "p50 latency (us)", time_of("p50"), True)):
            series, ceilings = [], {}
            for base in bases:
                sizes = sorted(s for (c, b, s) in cells if c == collective and b == base and isinstance(s, int))
                if not sizes:
                    continue
                alone = all(one_rank(cells[(collective, base, s)]) for s in sizes)
                if (metric == "busbw" and alone) or (metric == "algbw" and not alone):
                    continue
                series.append((base, [(s, median_of(cells[(collective, base, s)], getter)) for s in sizes]))
                if metric == "busbw":
                    ceiling, why = ceiling_for(data, point_binding(data, base), cells[(collective, base, sizes[0])][0],
                                               rates)
                    if ceiling is not None:
                        ceilings.setdefault(ceiling, []).append(why)
            if not series:
                continue
            specs.append((f"{collective}_{metric}.png", f"{collective}: {ylabel} vs size", ylabel, series, logy,
                          [(f"ceiling {value:g} GB/s ({why[0]})", value) for value, why in sorted(ceilings.items())]))
    return specs


def ceilings_section(data):
    """Each point's ceiling in this run, from the links' own rates (rules/ceilings.py), or why it has none: a
    plot draws a dashed line only where a ceiling is known."""
    rates = run_link_rates(data)
    rows = []
    for base in data.base_points():
        launch = point_binding(data, base)
        records = [record for (point, _case), record in sorted(data.latest.items()) if base_point_of(point) == base]
        if launch is None or not records:
            continue
        ceiling, why = ceiling_for(data, launch, records[0], rates)
        rows.append((base, "none" if ceiling is None else f"{ceiling:.3g}", why))
    if not rows:
        return []
    return ["Ceilings of this run's points (none: no dashed line on its plots):", "",
            md_table(["point", "ceiling (GB/s)", "from"], rows), ""]


def line_rate_section(data):
    """Each cross-node point's best busbw against its rails' line rate: context, never a judgement (a line rate
    is a ceiling, not a promise; the MPI backend's figures are host-memory ones, correctness only)."""
    rates = run_link_rates(data)
    rows = []
    for base in data.base_points():
        launch = point_binding(data, base)
        if launch is None or launch.get("kind") != "inter":
            continue
        records = [record for (point, _case), record in data.latest.items() if base_point_of(point) == base
                   and isinstance(record.get("busbw_gbps"), (int, float)) and record.get("status") == "ok"]
        gbit, _rails, text = line_rate(data, launch, rates, records)
        if not records:
            continue
        best = max(records, key=lambda record: record["busbw_gbps"])
        busbw = best["busbw_gbps"]
        share = "-" if gbit is None else f"{busbw / (gbit / 8) * 100:.3g}% of {text}"
        rows.append((base, f"{busbw:.3g} GB/s ({best.get('case_id')})", share if gbit is not None else f"- ({text})"))
    if not rows:
        return []
    return ["Bus bandwidth against the rails' line rate (context, never a fail: a line rate is a ceiling, not a "
            "promise; line rate / 8 = GB/s per direction):", "",
            md_table(["point", "best busbw (case)", "of the line rate"], rows)]


def rails_alone_section(data):
    """Each rail alone against its siblings alone (rules/rails.judge_slow_rails' comparison, as a table): the
    single-rail points of the sweep, their busbw at the largest size judged and their time over the fastest
    sibling's."""
    points = single_rail_points(data)
    rows = []
    for member in points:
        worst = None
        for sibling in points:
            if sibling["key"] != member["key"] or sibling["rail"] == member["rail"]:
                continue
            compared = compare_rails(member["records"], sibling["records"], is_host_timed(member["records"]))
            if compared is not None and (worst is None or compared["ratio"] > worst[0]["ratio"]):
                worst = (compared, sibling)
        if worst is None:
            continue
        compared, sibling = worst
        sizes = [format_size(size) for size in compared["sizes"]]
        rows.append((member["point"], member["rail"], sibling["rail"], f"{compared['ratio']:.2f}x",
                     "-" if compared["busbw_gbps"] is None else f"{compared['busbw_gbps']:.3g}",
                     "-" if compared["sibling_busbw_gbps"] is None else f"{compared['sibling_busbw_gbps']:.3g}",
                     f"{sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else sizes[0]))
    if not rows:
        return []
    return ["", f"Each rail alone (sizes above {format_size(RAIL_SLOW_MIN_BYTES)}, the largest three both measured): "
            f"a rail whose time is at least {RAIL_SLOW_MIN_RATIO:g}x its sibling's, beyond the noise band, is "
            f"rail.slow (MPI backend: {RAIL_SLOW_MPI_RATIO:g}x with every case slower).", "",
            md_table(["point", "rail", "sibling", "time vs sibling (median)", "busbw GB/s (largest size)",
                      "sibling busbw GB/s", "sizes"], rows)]


def make_plots(data, pyplot, plots_dir):
    links = {}
    for name, title, ylabel, series, logy, ceilings in plot_specs(data):
        plots.plot_lines(pyplot, os.path.join(plots_dir, name), title, ylabel, series, logy, ceilings)
        collective, metric = name[:-len(".png")].rsplit("_", 1)
        links.setdefault(collective, []).append(f"![{collective} {metric}](plots/{name})")
    return links


VERDICT_FILE = "verdict.json"


def write_verdict(run_dir, cv_gate):
    """verdict.json alone (smoke: no report); returns the verdict."""
    data = RunData(run_dir)
    verdict = run_verdict(data, cv_gate)
    write_json_atomic(os.path.join(data.run_dir, VERDICT_FILE), verdict_document(verdict, utc_now()))
    return verdict


def path_checks_section(data):
    """The run's own path checks after failed launches (doctor/path_checks.json): each check's failed and skipped
    paths with the probe's words, and how many answered; nothing when the run made none."""
    if not data.path_checks:
        return []
    lines = ["## Paths checked during the run", "",
             "After a launch across hosts failed as a dead path fails (its deadline, its watchdog, its launcher), the "
             "runner probed the paths between its hosts again (the doctor's path MTU probe, bounded to seconds) "
             "before the next launch over them; a launch that needs a path found dead was not run (the verdict's "
             "`path.dead` names the fault).", ""]
    rows = []
    for entry in data.path_checks:
        checks = [check for check in entry.get("checks") or [] if isinstance(check, dict)]
        alive = sum(1 for check in checks if check.get("status") == "pass")
        took = f"{entry['elapsed_s']:.1f} s" if isinstance(entry.get("elapsed_s"), (int, float)) else "-"
        rows.append([entry.get("after") or "-", took, f"{alive} of {len(checks)} path(s)", "pass", "-"])
        for check in checks:
            if check.get("status") != "pass":
                rows.append(["", "", check.get("subject") or "-", check.get("status") or "-",
                             str(check.get("detail") or "")])
    return lines + [md_table(["after", "took", "path", "status", "detail"], rows), ""]


def build_report(run_dir, cv_gate=None):
    """report.md, its plots and verdict.json of a run directory: (report path, anomaly rows, the verdict)."""
    data = RunData(run_dir)
    if cv_gate is None:
        cv_gate = (data.manifest.get("gates") or {}).get("cv_gate_pct", 3.0)
    plots_dir = os.path.join(data.run_dir, "plots")
    report_path = os.path.join(data.run_dir, "report.md")
    if os.path.islink(report_path) or os.path.islink(plots_dir):
        raise CclbenchError(f"refusing to write through the symbolic link {report_path if os.path.islink(report_path) else plots_dir}")
    pyplot, why_not = load_pyplot()
    if pyplot is not None:
        make_dirs(plots_dir)
    plot_links = {}
    if pyplot is not None:
        plot_links = make_plots(data, pyplot, plots_dir)
    verdict = run_verdict(data, cv_gate)
    # The repeatability notes (spread chance explains) are the Repeatability section's, not anomalies.
    findings = [reason["finding"] for reason in verdict["reasons"] + verdict["notes"]
                if reason["severity"] in SEVERITIES or reason["check"] != "repeatability"]
    anomalies = anomaly_rows(findings)
    lines = verdict_lines(verdict) + [f"# cclbench report: {data.manifest.get('run_id')}", ""]
    lines += ["## Anomalies", ""]
    if anomalies:
        lines.append(md_table(["kind", "where", "detail"], anomalies))
    else:
        lines.append("None found: no wrong data, every launch complete, transport gates passed, no busbw above "
                     "its physical ceiling, no missing case, no spread across repeats beyond what chance explains.")
    lines += ["", "Physical ceilings for busbw (per direction; a value above its ceiling is a measurement, unit or "
              "byte-count error):", "", md_table(["path", "ceiling (GB/s)", "derivation", "applies to"], LIMIT_ROWS), ""]
    lines += ceilings_section(data)
    lines += doctor_section(data.run_dir)
    lines += path_checks_section(data)
    if pyplot is None:
        lines += [f"> Plots skipped: {why_not}. Tables below are complete.", ""]
    lines += environment_section(data) + [""]
    lines += points_section(data) + [""]
    lines += topology_section(data) + [""]
    lines += transport_section(data) + [""]
    lines += collective_sections(data, plot_links)
    lines += decode_section(data) + ab_section(data)
    lines += repeats_section(data, cv_gate, verdict)
    lines += correctness_only_section(data)
    lines += by_design_section(data)
    lines += tuning_section(data)
    lines += p2p_section(data, pyplot, plots_dir)
    sanity_path = os.path.join(data.run_dir, "sanity.jsonl")
    if os.path.exists(sanity_path):
        sanity = load_cases(sanity_path, "sanity records")[0]
        ok = sum(1 for r in latest_by_case(sanity).values() if record_is_sound(r))
        lines += ["## Sanity pass", "", f"{ok} of {len(latest_by_case(sanity))} sanity case(s) ok.", ""]
    write_json_atomic(os.path.join(data.run_dir, VERDICT_FILE), verdict_document(verdict, utc_now()))
    path = os.path.join(data.run_dir, "report.md")
    write_atomic(path, "\n".join(lines).rstrip() + "\n")
    return path, anomalies, verdict
