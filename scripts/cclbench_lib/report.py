"""`report RUN_DIR`: report.md with anomalies first, then environment, topology, transport
evidence, tables and plots. Missing numbers render as '-'."""
import glob
import math
import os
import statistics

from . import outliers, plots
from .common import CclbenchError, format_size, make_dirs, read_json, write_atomic
from .records import (CLASS_LABELS, HOST_BOUND_GATE_FACTOR, HOST_BOUND_RATIO, bandwidth_time_us, base_point_of,
                      group_repeats, is_correctness_only, latest_by_case, load_cases, measurement_class,
                      point_completeness, record_is_sound, repeat_verdict, was_skipped)

COLL_KINDS = ("intra", "inter", "local")

# Physical ceilings for busbw (GB/s = 1e9 B/s, per direction). A measured busbw above its ceiling is
# impossible on that hardware, so it points at a unit, timing or byte-count error (or at an
# in-network reduction, which these machines do not have).
#  - inter-node: one 400 Gbit/s rail carries at most 400e9 / 8 = 50 GB/s per direction, so a point
#    bound to R rails is capped at R * 50 GB/s. For ring/tree AllReduce, AllGather, ReduceScatter
#    the busbw of a 2-node run is bounded by the per-node NIC bandwidth; All-to-All is bounded much
#    lower (half of its bytes cross the nodes), so the same cap is a loose but safe bound for it.
#  - intra-node, PCIe only: a GPU's PCIe Gen5 x16 link is 32 GT/s * 16 lanes * 128/130 / 8 = 63.0
#    GB/s per direction; ring busbw cannot exceed the slowest GPU link. We use 64 GB/s so that a
#    rounding of the nominal figure never raises a false alarm.
#  - NVLink machines (the topology shows NVLink), emulated ranks (--share-gpu) and the MPI backend
#    (host memory) are excluded: no PCIe/NIC ceiling applies to them.
RAIL_GBPS = 50.0
PCIE_GEN5_X16_GBPS = 64.0
RAIL_IMBALANCE_RATIO = 1.25
LIMIT_ROWS = [
    ("inter-node, per 400G rail", f"{RAIL_GBPS:g} x rails", "400e9 bit/s / 8; rails = the point's NCCL_IB_HCA list",
     "16-rank (inter) points"),
    ("intra-node, PCIe Gen5 x16", f"{PCIE_GEN5_X16_GBPS:g}", "32 GT/s x 16 lanes x 128/130 / 8 = 63.0, rounded up",
     "8-rank (intra) and local points without NVLink"),
    ("NVLink, emulated ranks, MPI backend", "not checked", "no PCIe/NIC bound applies", "-"),
]  # busiest rail / idlest rail above this, on a multi-rail point


def fmt_number(value, digits=2):
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(header, rows):
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(md_escape("-" if cell is None or cell == "" else cell) for cell in row) + " |")
    return "\n".join(lines)


def _load_optional(path, what, problems):
    try:
        return read_json(path, what)
    except CclbenchError as error:
        problems.append(str(error))
        return None


class RunData:
    """Everything a report needs, loaded once; a missing or corrupt required file is an error."""

    def __init__(self, run_dir):
        if not os.path.isdir(run_dir):
            raise CclbenchError(f"{run_dir} is not a run directory", 2)
        self.run_dir = os.path.abspath(run_dir)
        self.manifest = read_json(os.path.join(run_dir, "run_manifest.json"), "run manifest")
        if not isinstance(self.manifest, dict) or "schema_version" not in self.manifest:
            raise CclbenchError(f"{os.path.join(run_dir, 'run_manifest.json')} is not a cclbench run manifest")
        self.plan = [launch for launch in self.manifest.get("plan") or [] if isinstance(launch, dict)]
        self.points_state = self.manifest.get("points") or {}
        self.problems = []
        cases_path = os.path.join(run_dir, "cases.jsonl")
        self.records, torn = load_cases(cases_path, "case records", strict=True) if os.path.exists(cases_path) else ([], [])
        if torn:
            self.problems.append(f"cases.jsonl line(s) {', '.join(map(str, torn[:10]))} hold torn records "
                                 "(an interrupted append); they are ignored")
        self.latest = latest_by_case(self.records)
        self.raw = {}
        for launch in self.plan:
            if launch.get("kind") in COLL_KINDS + ("sanity",):
                path = os.path.join(run_dir, "raw", launch["name"] + ".json")
                if os.path.exists(path):
                    self.raw[launch["name"]] = _load_optional(path, "coll_perf result", self.problems)
        self.topology = self._load_dir("topology", "topology")
        self.p2p = self._load_dir("p2p", "P2P result")

    def _load_dir(self, sub, what):
        found = {}
        for path in sorted(glob.glob(os.path.join(self.run_dir, sub, "*.json"))):
            document = _load_optional(path, what, self.problems)
            if isinstance(document, dict):
                found[os.path.splitext(os.path.basename(path))[0]] = document
        return found

    def coll_launches(self):
        return [launch for launch in self.plan if launch.get("kind") in COLL_KINDS]

    def base_points(self):
        seen = []
        for launch in self.coll_launches():
            base = launch.get("base_point") or base_point_of(launch["name"])
            if base not in seen:
                seen.append(base)
        for (point, _case) in self.latest:
            base = base_point_of(point)
            if base not in seen:
                seen.append(base)
        return seen

    def has_nvlink(self):
        """Any NV# path class between GPUs in a node's path matrix (topology.schema.json)."""
        for model in self.topology.values():
            for row in model.get("path_matrix") or []:
                if isinstance(row, list) and any(isinstance(cell, str) and cell.startswith("NV") for cell in row):
                    return True
        return False


# --- record selection -----------------------------------------------------------------------------

def pick_record(records):
    """Out-of-place first (the nccl-tests headline), then in-place."""
    records = sorted(records, key=lambda r: (bool(r.get("in_place")), str(r.get("case_id"))))
    return records[0] if records else None


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


def median_of(records, getter):
    values = [getter(r) for r in records]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    return statistics.median(values) if values else None


def busbw_of(record):
    return record.get("busbw_gbps") if record.get("status") == "ok" else None


def time_of(key):
    def getter(record):
        time_us = record.get("time_us")
        return time_us.get(key) if isinstance(time_us, dict) and record.get("status") == "ok" else None
    return getter


# --- anomalies ------------------------------------------------------------------------------------

def point_binding(data, base):
    for launch in data.coll_launches():
        if (launch.get("base_point") or launch["name"]) == base:
            return launch
    return None


def ceiling_for(data, launch, record):
    """(ceiling_gbps, why) or (None, why-excluded)."""
    if record.get("emulated") or record.get("backend") == "mpi":
        return None, "emulated or MPI backend"
    if launch is None:
        return None, "point not in plan"
    if launch.get("kind") == "inter":
        hca = (launch.get("env") or {}).get("NCCL_IB_HCA", "")
        rails = len([h for h in hca.lstrip("=^").split(",") if h]) or len(data.manifest.get("plan_inputs", {}).get("hcas") or []) or 1
        return RAIL_GBPS * rails, f"{rails} x 400G rail(s)"
    if data.has_nvlink():
        return None, "NVLink machine"
    return PCIE_GEN5_X16_GBPS, "PCIe Gen5 x16"


def _count(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def rail_totals(records):
    """({rail: bytes}, {rail: error increments}, [flags]) summed over records, from coll_perf's
    evidence.rails (case_record.schema.json): nodes[].ib_ports[] with total_bytes (xmit + rcv) per rail."""
    totals, errors, flags = {}, {}, []
    for record in records:
        evidence = record.get("evidence") if isinstance(record.get("evidence"), dict) else {}
        rails = evidence.get("rails")
        if not isinstance(rails, dict):
            continue
        for flag in rails.get("flags") or []:
            if isinstance(flag, str) and flag not in flags:
                flags.append(flag)
        for node in rails.get("nodes") or []:
            if not isinstance(node, dict):
                continue
            for port in node.get("ib_ports") or []:
                if not isinstance(port, dict) or not port.get("rail"):
                    continue
                moved = _count(port.get("total_bytes"))
                if moved is None and _count(port.get("xmit_bytes")) is not None and _count(port.get("rcv_bytes")) is not None:
                    moved = port["xmit_bytes"] + port["rcv_bytes"]
                if moved is not None:
                    totals[port["rail"]] = totals.get(port["rail"], 0) + moved
                increments = port.get("error_increments")
                if isinstance(increments, dict):
                    count = sum(v for v in increments.values() if _count(v))
                    if count:
                        errors[port["rail"]] = errors.get(port["rail"], 0) + count
    return totals, errors, flags


def rails_reason(records):
    """Why a point has no rail bytes, from the records' own reasons."""
    for record in records:
        rails = (record.get("evidence") or {}).get("rails") if isinstance(record.get("evidence"), dict) else None
        if isinstance(rails, dict):
            for node in rails.get("nodes") or []:
                if isinstance(node, dict) and (node.get("ib_reason") or node.get("error")):
                    return f"{node.get('host')}: {node.get('ib_reason') or node.get('error')}"
    if not records:
        return "no case records"
    return "the case records carry no rail counters (coll_perf without rail evidence)"


def repeat_anomalies(data, cv_gate):
    """One row per case whose repeats fail the repeat rule (no reproducible median)."""
    rows = []
    for (base, case_id), group in sorted(group_repeats(data.records).items()):
        verdict = repeat_verdict(group, cv_gate)
        if verdict is not None and not verdict["passed"]:
            rows.append(("CV above gate", base, f"{case_id}: CV {verdict['cv_pct']:.2f}% and robust dispersion "
                         f"{verdict['robust_pct']:.2f}% across {verdict['repeats']} repeats (limit {verdict['limit_pct']:g}%"
                         f"{', host-bound' if verdict['host_bound'] else ''})"))
    return rows


def find_anomalies(data, cv_gate):
    anomalies = []
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    # Launches that did not complete (including transport gate failures).
    never_ran = [name for name, state in data.points_state.items() if state.get("status") == "pending"]
    if never_ran:
        anomalies.append(("launches never ran", never_ran[0] + (f" and {len(never_ran) - 1} more" if len(never_ran) > 1 else ""),
                          f"{len(never_ran)} planned launch(es) did not run (the run stopped early; resume it with "
                          "cclbench baseline --resume RUN_ID)"))
    for name, state in data.points_state.items():
        status = state.get("status")
        if status not in ("complete", "pending", "skipped"):
            kind = state.get("kind") or plan_by_name.get(name, {}).get("kind")
            if state.get("exit_code") == 3:
                anomalies.append(("transport mismatch", name, state.get("reason") or "transport expectation failed"))
            else:
                anomalies.append(("launch not complete", name, f"{kind}: {status}" + (f": {state['reason']}" if state.get("reason") else "")))
    # Wrong data and failed cases. Cases the tool skipped with its reason are not anomalies; they
    # are summed up in one row per point and reason, so a real failure is not buried under them.
    skipped = {}
    for (point, case_id), record in sorted(data.latest.items()):
        wrong = record.get("wrong")
        if isinstance(wrong, (int, float)) and wrong:
            anomalies.append(("wrong data", point, f"{case_id}: {int(wrong)} wrong element(s)"))
        elif was_skipped(record):
            skipped.setdefault((point, record.get("reason") or "no reason given"), []).append(case_id)
        elif record.get("status") != "ok":
            anomalies.append(("case not ok", point, f"{case_id}: {record.get('status')}" +
                              (f" ({record.get('reason')})" if record.get("reason") else "")))
    for (point, reason), case_ids in sorted(skipped.items()):
        anomalies.append(("cases skipped (not measured)", point, f"{len(case_ids)} case(s), e.g. {case_ids[0]}: {reason}"))
    # Transport verdicts recorded by coll_perf itself.
    for name, document in data.raw.items():
        transport = document.get("transport") if isinstance(document, dict) else None
        expectation = transport.get("expectation") if isinstance(transport, dict) else None
        if isinstance(expectation, dict) and expectation.get("passed") is False and \
                data.points_state.get(name, {}).get("exit_code") != 3:
            anomalies.append(("transport mismatch", name, "; ".join(str(p) for p in expectation.get("problems") or [])
                              or expectation.get("message") or "expectation not met"))
    # Missing planned cases.
    for launch in data.coll_launches():
        if data.points_state.get(launch["name"], {}).get("status") == "pending":
            continue  # counted under "launches never ran"
        complete, missing, _failed = point_completeness(data.records, launch)
        if missing:
            shown = ", ".join(f"{c} {format_size(s)}" for c, s in missing[:6])
            more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
            anomalies.append(("missing cases", launch["name"], f"{len(missing)} planned case(s) absent: {shown}{more}"))
    # Physical ceilings.
    above = {}
    for (point, case_id), record in sorted(data.latest.items()):
        busbw = record.get("busbw_gbps")
        if not isinstance(busbw, (int, float)) or isinstance(busbw, bool):
            continue
        launch = plan_by_name.get(point)
        ceiling, why = ceiling_for(data, launch, record)
        if ceiling is not None and busbw > ceiling:
            above.setdefault(point, []).append((busbw / ceiling, case_id, busbw, ceiling, why))
    for point, items in above.items():  # one row per point: the worst case and how many
        _ratio, case_id, busbw, ceiling, why = max(items)
        count = f"{len(items)} case(s), worst " if len(items) > 1 else ""
        anomalies.append(("above physical limit", point,
                          f"{count}{case_id}: busbw {busbw:.2f} GB/s > {ceiling:.0f} GB/s ({why})"))
    # Variation across repeats: the repeat rule (records.repeat_verdict). Per-iteration CV is a column
    # of the repeatability table, never an anomaly on its own; emulated and MPI-backend records never gate.
    anomalies += repeat_anomalies(data, cv_gate)
    # Rails: both rails must carry traffic, symmetric, without error increments.
    per_point = {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    for point, records in sorted(per_point.items()):
        launch = plan_by_name.get(point)
        totals, errors, flags = rail_totals(records)
        for rail, count in sorted(errors.items()):
            anomalies.append(("rail errors", point, f"{rail}: {count:g} error counter increment(s)"))
        if launch is not None and launch.get("kind") == "inter":
            for flag in flags[:5]:
                anomalies.append(("rail flag", point, flag))
        if not totals or launch is None or launch.get("kind") != "inter":
            continue
        bound = [h for h in (launch.get("env") or {}).get("NCCL_IB_HCA", "").lstrip("=^").split(",") if h]
        used = {rail: value for rail, value in totals.items() if not bound or rail in bound or rail.split(":")[0] in
                [b.split(":")[0] for b in bound]}
        idle_unbound = [rail for rail, value in totals.items() if rail not in used and value > 0]
        for rail in idle_unbound:
            anomalies.append(("rail imbalance", point, f"traffic on {rail}, which NCCL_IB_HCA did not bind"))
        if len(used) >= 2:
            high, low = max(used.values()), min(used.values())
            if low <= 0 or high / low > RAIL_IMBALANCE_RATIO:
                share = ", ".join(f"{rail} {value / max(sum(used.values()), 1) * 100:.0f}%" for rail, value in sorted(used.items()))
                anomalies.append(("rail imbalance", point, f"rail shares {share} (limit {RAIL_IMBALANCE_RATIO:g}x)"))
    anomalies += outliers.anomaly_rows(data)  # P2P pairs/GPUs, host<->device, straggler rank
    for problem in data.problems:
        anomalies.append(("unreadable result", "-", problem))
    return anomalies


# --- plots ----------------------------------------------------------------------------------------

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
    notes = manifest.get("notes") or []
    for note in notes:
        lines.append(f"\n> Note: {note}")
    return lines


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


def _class_counts(value):
    if not isinstance(value, dict) or not value:
        return None
    return ", ".join(f"{name} x{count}" for name, count in sorted(value.items()))


def transport_observed(document):
    """(inter-node classes, intra-node classes, NET devices, gate verdict) from coll_perf's -J transport
    section (coll_perf.schema.json), or a 'not available: <reason>' text in the first cell."""
    if not isinstance(document, dict):
        return ("not available: no coll_perf result (raw/<point>.json) for this point", None, None, None)
    transport = document.get("transport")
    if transport is None:
        manifest = document.get("manifest") if isinstance(document.get("manifest"), dict) else {}
        reason = document.get("transport_reason") or ("MPI backend (no NCCL, no transport to prove)"
                                                       if manifest.get("backend") == "mpi" else
                                                       "this coll_perf build records no transport section")
        return (f"not available: {reason}", None, None, None)
    if not isinstance(transport, dict):
        return (f"not available: unexpected transport value {str(transport)[:80]}", None, None, None)
    devices = {}
    evidence = transport.get("evidence") if isinstance(transport.get("evidence"), dict) else {}
    for comm in evidence.get("communicators") or []:
        for used in (comm.get("net_devices_used") or []) if isinstance(comm, dict) else []:
            if isinstance(used, dict):
                key = f"{used.get('net')}/{used.get('device') or used.get('net_dev')}"
                devices[key] = devices.get(key, 0) + (used.get("connections") or 0)
    status = transport.get("status")
    verdict = None
    if status == "passed":
        verdict = "pass"
    elif status == "failed":
        verdict = "FAILED" + (f": {transport.get('reason')}" if transport.get("reason") else "")
    inter = _class_counts(transport.get("inter_node"))
    intra = _class_counts(transport.get("intra_node"))
    if inter is None and intra is None:
        inter = "not available: " + (transport.get("summary") or "no connection lines in the NCCL logs")
    return (inter or "none (one node)", intra, _class_counts(devices), verdict)


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
    """Per-rail bytes moved per point, from the rail counters coll_perf records with each case."""
    lines = ["### Rails (HCA counter deltas summed over the point's cases)", "",
             "Counters count all traffic on a port, not only this benchmark's.", ""]
    per_point = {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    rows = []
    for launch in data.coll_launches():
        name = launch["name"]
        records = per_point.get(name, [])
        totals, errors, _flags = rail_totals(records)
        if not totals:
            if launch.get("kind") != "inter":
                continue
            rows.append((name, f"not available: {rails_reason(records)}", None, None))
            continue
        if launch.get("kind") != "inter" and not any(totals.values()):
            continue
        total = sum(totals.values()) or 1
        shares = ", ".join(f"{rail} {value / total * 100:.0f}%" for rail, value in sorted(totals.items()))
        moved = ", ".join(f"{rail} {value / 1e9:.3f} GB" for rail, value in sorted(totals.items()))
        rows.append((name, shares, moved, ", ".join(f"{r}: {c:g}" for r, c in sorted(errors.items())) or "0"))
    if not rows:
        return lines + ["_not available: no multi-node point in this run (rails carry no traffic inside one node)_"]
    return lines + [md_table(["point", "share per rail", "bytes per rail", "error increments"], rows)]


def bindings_section(data):
    """The CPU/memory/GPU/NIC binding each rank ran under (coll_perf's bindings section); identical rows
    of several points are shown once, with the points listed."""
    lines = ["### Rank bindings (GPU - CPU - memory - NIC each rank ran under)", ""]
    grouped = {}
    reasons = set()
    for launch in data.coll_launches():
        base = launch.get("base_point") or launch["name"]
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
    order = {launch.get("base_point") or launch["name"]: index for index, launch in enumerate(data.coll_launches())}
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


def algo_proto(record):
    """'ALGO/PROTO' NCCL chose for a case (from coll_perf's untimed TUNING probe), or None."""
    evidence = record.get("evidence") if isinstance(record.get("evidence"), dict) else {}
    for source in (evidence.get("tuning"), evidence, record):
        entries = source if isinstance(source, list) else [source]
        found = []
        for entry in entries:
            if isinstance(entry, dict) and (entry.get("algorithm") or entry.get("algo")):
                text = f"{entry.get('algorithm') or entry.get('algo')}/{entry.get('protocol') or entry.get('proto') or '?'}"
                if text not in found:
                    found.append(text)
        if found:
            return ", ".join(found)
    return None


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
                       {size for l in data.coll_launches() if collective in (l.get("collectives") or []) for size in l.get("sizes") or []})
        columns = [b for b in bases if b not in correctness_bases and (
                   any(c == collective and b2 == b for (c, b2, _s) in cells) or
                   any((l.get("base_point") or l["name"]) == b and collective in (l.get("collectives") or []) for l in data.coll_launches()))]
        if not sizes or not columns:
            continue
        lines += [f"### {collective}", ""]
        for link in plot_links.get(collective, []):
            lines += [link, ""]
        lines += ["busbw (GB/s):", ""]
        rows = [[format_size(size)] + [fmt_number(median_of(cells.get((collective, b, size), []), busbw_of)) for b in columns]
                for size in sizes]
        lines += [md_table(["size"] + columns, rows), "", "time (us): the headline, the time busbw comes from "
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


def repeats_section(data, cv_gate):
    groups = [(key, group, repeat_verdict(group, cv_gate)) for key, group in group_repeats(data.records).items()]
    groups = [(key, group, verdict) for key, group, verdict in groups if verdict is not None]
    if not groups:
        return []
    rows = []
    order = {"FAIL": 0, "one repeat off": 1, "host-bound": 2, "ok": 3}
    for (base, case_id), group, verdict in sorted(groups, key=lambda item: (order[item[2]["verdict"]], -item[2]["cv_pct"])):
        per_iteration = median_of(group, time_of("cv_pct"))
        rows.append((base, case_id, verdict["repeats"], fmt_number(verdict["headline_us"]), fmt_number(verdict["cv_pct"]),
                     fmt_number(verdict["robust_pct"]), fmt_number(per_iteration), verdict["verdict"]))
    counts = {}
    for _key, _group, verdict in groups:
        counts[verdict["verdict"]] = counts.get(verdict["verdict"], 0) + 1
    summary = ", ".join(f"{counts[name]} {name}" for name in sorted(counts, key=order.get))
    return ["## Repeatability (the bandwidth time across repeats)", "",
            f"Headline: the median over repeats. Gate: CV <= {cv_gate:g}%; a case above it fails only when its "
            f"robust dispersion (1.4826 x MAD / median, which one repeat of three cannot move) is above the gate too, "
            f"or above {HOST_BOUND_GATE_FACTOR:g} x the gate where the case is host-bound (batch_time_us >= "
            f"{HOST_BOUND_RATIO:g} x gated_time_us: the GPU finishes before the host launches the next one). "
            f"Per-iteration CV is shown, never gated. {summary}.", "",
            md_table(["point", "case", "repeats", "headline us", "CV %", "robust %", "per-iteration CV %", "verdict"],
                     rows[:200]), ""]


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


def p2p_matrices(document):
    """[(test name, unit, description, bytes, N x N matrix)] for the pair tests of a p2p_matrix result
    (results_schema/p2p_matrix.schema.json): the median bandwidth (or latency) of each src -> dst at the
    largest size measured; None where a pair was not measured (never 0)."""
    tests = {t.get("name"): t for t in document.get("tests") or [] if isinstance(t, dict)}
    devices = [d.get("index") for d in document.get("devices") or [] if isinstance(d, dict)]
    count = max([i for i in devices if isinstance(i, int)], default=-1) + 1
    by_test = {}
    for result in document.get("results") or []:
        if not isinstance(result, dict):
            continue
        src, dst = result.get("src"), result.get("dst")
        if not isinstance(src, int) or not isinstance(dst, int) or isinstance(src, bool):
            continue
        test = tests.get(result.get("test"), {})
        if test.get("scope", "pair") != "pair":
            continue
        by_test.setdefault(result.get("test"), []).append(result)
        count = max(count, src + 1, dst + 1)
    out = []
    for name in [n for n in tests if n in by_test] + [n for n in by_test if n not in tests]:
        results = by_test[name]
        unit = tests.get(name, {}).get("unit") or ""
        key = "latency_us" if unit == "us" else ("load_latency_ns" if unit == "ns" else "bandwidth_gbps")
        sizes = [r.get("bytes") for r in results if isinstance(r.get("bytes"), int)]
        largest = max(sizes) if sizes else None
        matrix = [[None] * count for _ in range(count)]
        for result in results:
            if largest is not None and result.get("bytes") != largest:
                continue
            stats = result.get(key)
            if result.get("status") == "ok" and isinstance(stats, dict) and isinstance(stats.get("median"), (int, float)):
                matrix[result["src"]][result["dst"]] = stats["median"]
        label = {"gbps": "GB/s", "us": "us", "ns": "ns"}.get(unit, unit)
        out.append((name, label, tests.get(name, {}).get("description"), largest, matrix))
    return out


def p2p_section(data, pyplot, plots_dir):
    lines = ["## P2P matrices (per node, src row -> dst column)", ""]
    if not data.p2p:
        return lines + ["_not available: no p2p/<host>.json in this run (no GPU, or the P2P launch did not finish)_", ""]
    for host, document in sorted(data.p2p.items()):
        lines += [f"### {host}" + (f" (host {document['host']})" if document.get("host") not in (None, host) else ""), ""]
        if document.get("no_device_reason"):
            lines += [f"_not available: {document['no_device_reason']}_", ""]
        matrices = p2p_matrices(document)
        if not matrices and not document.get("no_device_reason"):
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
        lines += outliers.p2p_section_lines(document, data.topology.get(host))
        others = {}
        for result in document.get("results") or []:
            if isinstance(result, dict) and not (isinstance(result.get("src"), int) and isinstance(result.get("dst"), int)):
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


def make_plots(data, pyplot, plots_dir):
    links = {}
    cells = table_cells(data)
    bases = data.base_points()
    for collective in sorted({c for (c, _b, _s) in cells if c}):
        for metric, ylabel, getter, logy in (("busbw", "busbw (GB/s)", busbw_of, False),
                                             ("latency", "p50 latency (us)", time_of("p50"), True)):
            series, ceilings = [], {}
            for base in bases:
                sizes = sorted(s for (c, b, s) in cells if c == collective and b == base and isinstance(s, int))
                if sizes:
                    series.append((base, [(s, median_of(cells[(collective, base, s)], getter)) for s in sizes]))
                    if metric == "busbw":
                        ceiling, why = ceiling_for(data, point_binding(data, base), cells[(collective, base, sizes[0])][0])
                        if ceiling is not None:
                            ceilings.setdefault(ceiling, []).append(why)
            if not series:
                continue
            name = f"{collective}_{metric}.png"
            plots.plot_lines(pyplot, os.path.join(plots_dir, name), f"{collective}: {ylabel} vs size", ylabel, series, logy,
                             [(f"ceiling {value:g} GB/s ({why[0]})", value) for value, why in sorted(ceilings.items())])
            links.setdefault(collective, []).append(f"![{collective} {metric}](plots/{name})")
    return links


def build_report(run_dir, cv_gate=None):
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
    from .doctor import doctor_anomalies, doctor_section
    anomalies = doctor_anomalies(data.run_dir) + find_anomalies(data, cv_gate)
    lines = [f"# cclbench report: {data.manifest.get('run_id')}", ""]
    lines += ["## Anomalies", ""]
    if anomalies:
        lines.append(md_table(["kind", "where", "detail"], anomalies))
    else:
        lines.append("None found: no wrong data, every launch complete, transport gates passed, no busbw above "
                     "its physical ceiling, no missing case, CV within the gate.")
    lines += ["", "Physical ceilings for busbw (per direction; a value above its ceiling is a measurement, unit or "
              "byte-count error):", "", md_table(["path", "ceiling (GB/s)", "derivation", "applies to"], LIMIT_ROWS), ""]
    lines += doctor_section(data.run_dir)
    if pyplot is None:
        lines += [f"> Plots skipped: {why_not}. Tables below are complete.", ""]
    lines += environment_section(data) + [""]
    lines += points_section(data) + [""]
    lines += topology_section(data) + [""]
    lines += transport_section(data) + [""]
    lines += collective_sections(data, plot_links)
    from .decode import ab_section, decode_section
    lines += decode_section(data) + ab_section(data)
    lines += repeats_section(data, cv_gate)
    lines += correctness_only_section(data)
    lines += tuning_section(data)
    lines += p2p_section(data, pyplot, plots_dir)
    sanity_path = os.path.join(data.run_dir, "sanity.jsonl")
    if os.path.exists(sanity_path):
        sanity = load_cases(sanity_path, "sanity records")[0]
        ok = sum(1 for r in latest_by_case(sanity).values() if record_is_sound(r))
        lines += ["## Sanity pass", "", f"{ok} of {len(latest_by_case(sanity))} sanity case(s) ok.", ""]
    path = os.path.join(data.run_dir, "report.md")
    write_atomic(path, "\n".join(lines).rstrip() + "\n")
    return path, anomalies
