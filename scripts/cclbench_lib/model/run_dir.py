"""A run directory as data, read in one place: the manifest and its plan, the case records (latest per
case, grouped by point and repeat), topology, P2P matrices, doctor, transport and rails, the chosen
bindings and NCCL's own rejection lines. Used by report, compare and the decode tables."""

import glob
import os

from ..base.errors import CclbenchError
from ..base.files import read_json
from ..base.numbers import is_finite, median
from ..base.values import COLL_KINDS, format_size, variant_text
from ..model.records import (CASES_FILE, SANITY_FILE, base_point_of, cases_path, describe_problem, group_repeats,
                             latest_by_case, launch_base_point, load_cases, point_completeness)


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
        cases_file = cases_path(run_dir)
        self.records, torn = load_cases(cases_file, "case records", strict=True) if os.path.exists(cases_file) else ([], [])
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
        self.path_checks = load_path_checks(self.run_dir, self.manifest, self.problems)

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
            base = launch_base_point(launch)
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


def median_of(records, getter):
    values = [getter(r) for r in records]
    return median([v for v in values if is_finite(v)])


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
        if launch_base_point(launch) == base:
            return launch
    return None


def _count(value):
    return value if is_finite(value) else None


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


def rail_error_counters(records):
    """{rail: {counter: increments}} summed over records, from the error_increments of coll_perf's
    evidence.rails.nodes[].ib_ports[] (the HCA's error counters that grew during a case); rails and counters that
    did not grow are absent."""
    counters = {}
    for record in records:
        evidence = record.get("evidence") if isinstance(record.get("evidence"), dict) else {}
        rails = evidence.get("rails") if isinstance(evidence.get("rails"), dict) else {}
        for node in rails.get("nodes") or []:
            for port in (node.get("ib_ports") or []) if isinstance(node, dict) else []:
                if not isinstance(port, dict) or not port.get("rail") or not isinstance(port.get("error_increments"), dict):
                    continue
                for name, value in port["error_increments"].items():
                    if _count(value):
                        per_rail = counters.setdefault(port["rail"], {})
                        per_rail[name] = per_rail.get(name, 0) + value
    return counters


def _moved(row, sent, received):
    """total_bytes of a rail row, else sent + received when both are counts; None when unknown."""
    moved = _count(row.get("total_bytes"))
    if moved is None and _count(row.get(sent)) is not None and _count(row.get(received)) is not None:
        moved = row[sent] + row[received]
    return moved


# Per source: the node array its rows are in and the names of their byte counters.
RAIL_SOURCES = (("hca", "ib_ports", "xmit_bytes", "rcv_bytes"), ("netdev", "netdev_rails", "tx_bytes", "rx_bytes"))


def rail_bytes_per_host(records):
    """Bytes per rail, per host and per source, summed over records, from coll_perf's evidence.rails.nodes[]
    (case_record.schema.json): "hca" rows from ib_ports[] (RDMA port counters: NET/IB, RoCE), "netdev" rows from
    netdev_rails[] (schema 1.5: the interfaces' own counters, where NET/Socket and MPI's TCP traffic shows). The two
    sources are never added: with RoCE they may count the same wire twice.
    A record in which one of a host's rails is null (a missing, unreadable or reset counter) is left out of that
    host's sums, so that its rails are compared over the same cases; the null rows are counted per rail with their
    reasons. When no record of a host has every rail known, each rail's bytes are its known rows' sum and no share
    is given (no comparable whole).
    Returns [{"host", "source", "from": sorted netdev_rails_from values (netdev; [] for hca), "cases": records with
    rows, "left_out": records left out, "total_bytes", "rails": [{"rail", "bytes": int|None, "share": float|None,
    "nulls": n, "reasons": [...]}]}], hosts and sources in order of appearance, rails in the records' order.
    share: the rail's bytes over the host's total of that source, None when that total is 0 or unknown."""
    hosts = {}
    for record in records:
        evidence = record.get("evidence") if isinstance(record.get("evidence"), dict) else {}
        rails = evidence.get("rails")
        if not isinstance(rails, dict):
            continue
        for node in rails.get("nodes") or []:
            if not isinstance(node, dict):
                continue
            host = str(node.get("host") or "?")
            for source, array, sent, received in RAIL_SOURCES:
                rows = [row for row in node.get(array) or [] if isinstance(row, dict) and row.get("rail")]
                if not rows:
                    continue
                entry = hosts.setdefault((host, source), {"host": host, "source": source, "from": [], "rails": {},
                                                          "cases": []})
                origin = node.get("netdev_rails_from")
                if source == "netdev" and isinstance(origin, str) and origin not in entry["from"]:
                    entry["from"].append(origin)
                case = {}
                for row in rows:
                    rail = entry["rails"].setdefault(str(row["rail"]), {"rail": str(row["rail"]), "bytes": None,
                                                                         "share": None, "nulls": 0, "reasons": []})
                    moved = _moved(row, sent, received)
                    case[rail["rail"]] = moved
                    if moved is None:
                        rail["nulls"] += 1
                        reason = row.get("reason") if isinstance(row.get("reason"), str) else "counter not readable"
                        if reason not in rail["reasons"]:
                            rail["reasons"].append(reason)
                entry["cases"].append(case)
    found = []
    for entry in hosts.values():
        rails = list(entry["rails"].values())
        complete = [case for case in entry["cases"]
                    if all(case.get(rail["rail"]) is not None for rail in rails)]
        for rail in rails:
            counted = [case[rail["rail"]] for case in (complete or entry["cases"]) if case.get(rail["rail"]) is not None]
            rail["bytes"] = sum(counted) if counted else None
        total = sum(rail["bytes"] for rail in rails) if complete else None
        for rail in rails:
            if total:
                rail["share"] = rail["bytes"] / total
        found.append({"host": entry["host"], "source": entry["source"], "from": sorted(entry["from"]),
                      "cases": len(entry["cases"]), "left_out": len(entry["cases"]) - len(complete),
                      "total_bytes": total, "rails": rails})
    return found


def used_sockets(document, records):
    """Whether NCCL moved this point's inter-node traffic over NET/Socket: coll_perf's -J transport section says
    NET/Socket and no NET/IB between nodes, or a host's netdev rails came from NCCL's 'NET/Socket : Using' line
    (netdev_rails_from "nccl_log"). Then no HCA counter sees that traffic."""
    transport = document.get("transport") if isinstance(document, dict) else None
    inter = transport.get("inter_node") if isinstance(transport, dict) else None
    if isinstance(inter, dict) and inter:
        classes = [str(name) for name in inter]
        if any(name.startswith("NET/Socket") for name in classes) and not any(name.startswith("NET/IB") for name in classes):
            return True
    return any(entry["source"] == "netdev" and "nccl_log" in entry["from"] for entry in rail_bytes_per_host(records))


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


def case_groups(path):
    """{(base point, case_id): [records of each repeat]} of a run directory or a cases.jsonl, for compare."""
    if os.path.isdir(path):
        cases = cases_path(path)
        if not os.path.exists(cases):
            raise CclbenchError(f"{path} has no cases.jsonl (not a run directory?)")
        path = cases
    elif not os.path.exists(path):
        raise CclbenchError(f"{path} does not exist")
    records, _ = load_cases(path, "case records", strict=True)
    if not records:
        raise CclbenchError(f"{path} holds no case records")
    return group_repeats(records)


def chosen_bindings(path):
    """{point: binding text} of a run directory's points whose binding was chosen at run time (decode over the
    rails, manifest plan binding.chosen); empty for a records file or a run without such points."""
    manifest_path = os.path.join(path, "run_manifest.json") if os.path.isdir(path) else None
    if not manifest_path or not os.path.exists(manifest_path):
        return {}
    try:
        manifest = read_json(manifest_path, "run manifest")
    except CclbenchError:
        return {}  # compare judges the records; a manifest it cannot read only loses this note
    found = {}
    for launch in (manifest.get("plan") if isinstance(manifest, dict) else None) or []:
        chosen = (launch.get("binding") or {}).get("chosen") if isinstance(launch, dict) else None
        if isinstance(chosen, dict) and isinstance(chosen.get("env"), dict) and not launch.get("ab"):
            found[launch_base_point(launch)] = \
                f"{chosen.get('from') or '-'} ({variant_text(chosen['env'])})"
    return found


def nccl_rejection(run_dir, point_names):
    """NCCL's own words when it refused a forced algorithm/protocol: its WARN lines in the point's NCCL logs."""
    for name in point_names:
        for path in sorted(glob.glob(os.path.join(run_dir, "nccl", name, "*")))[:64]:
            try:
                with open(path, errors="replace") as handle:
                    for line in handle:
                        if "WARN" in line and ("algorithm" in line.lower() or "protocol" in line.lower()
                                               or "NCCL_ALGO" in line or "NCCL_PROTO" in line):
                            return line.split("WARN", 1)[1].strip()[:300]
            except OSError:
                continue
    return None


# The run's own path checks after failed launches (execute/doctor.recheck_paths; path_checks.schema.json).
PATH_CHECKS_FILE = os.path.join("doctor", "path_checks.json")


def load_path_checks(run_dir, manifest=None, problems=None):
    """The entries of doctor/path_checks.json made by the manifest's last invocation (a resumed run's doctor checks
    every path again: an earlier invocation's findings are superseded), in the order they were made; [] when
    there is none. An unreadable file is one of `problems`."""
    path = os.path.join(run_dir, PATH_CHECKS_FILE)
    if not os.path.exists(path):
        return []
    document = _load_optional(path, "path checks", problems if problems is not None else [])
    entries = document.get("checks_after") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        if problems is not None and document is not None:
            problems.append(f"{path} is not a cclbench path checks file")
        return []
    invocation = len((manifest or {}).get("invocations") or []) or None
    return [entry for entry in entries if isinstance(entry, dict) and
            (invocation is None or entry.get("invocation") in (None, invocation))]


def load_run_doctor(run_dir):
    path = os.path.join(run_dir, "doctor.json")
    if not os.path.exists(path):
        return None, None
    try:
        document = read_json(path, "doctor result")
    except CclbenchError as error:
        return None, str(error)
    if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
        return None, f"{path} is not a doctor result"
    return document, None


def launch_outputs(run_dir, launch):
    """(ok, reason) for a launch's results, judged from the files, never from the exit code alone."""
    if launch["kind"] in ("topology", "p2p", "tuning", "doctor"):
        for path in launch["outputs"]:
            try:
                document = read_json(path, f"{launch['kind']} result")
            except CclbenchError as error:
                return False, str(error)
            if not isinstance(document, dict) or "schema_version" not in document:
                return False, f"{path} has no schema_version"
            if launch["kind"] == "tuning" and document.get("kind") != "tuning_probe":
                return False, f"{path} is not a coll_perf --tuning-probe file"
            if launch["kind"] == "doctor" and document.get("kind") != "doctor":
                return False, f"{path} is not a cclbench doctor result"
        return True, None
    jsonl = os.path.join(run_dir, SANITY_FILE if launch["kind"] == "sanity" else CASES_FILE)
    if not os.path.exists(jsonl):
        return False, f"no case records ({os.path.basename(jsonl)} is missing)"
    records, _ = load_cases(jsonl, "case records")
    complete, missing, failed = point_completeness(records, launch)
    if complete:
        return True, None
    parts = []
    if failed:
        first = failed[0]
        parts.append(f"{len(failed)} case(s) not ok, e.g. {first.get('case_id')}: {describe_problem(first)}")
    if missing:
        collective, size = missing[0]
        parts.append(f"{len(missing)} planned case(s) missing, e.g. {collective} {format_size(size)}")
    return False, "; ".join(parts)
