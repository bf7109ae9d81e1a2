"""A simulated fleet for `cclbench screen --simulate FLEET.json` (results_schema/screen_fleet.schema.json).

The fleet file describes what a real fleet would measure; the screen's planner, scheduler and rules run unchanged
on the job results this model writes in place of coll_perf and the doctor (execute/screen_simulate.py).

read_fleet(path) -> the fleet as checked plain data; a bad file is a UsageError (exit 2) naming the field.
truth(fleet) -> {"bad_nodes", "bad_links", "bad_rails", "bad_groups"}: what a correct screen names. A node is bad
    when it has a node fault (slow_node, fail_start, crash, hang) or a rail fault (slow_rail, dead_rail: the node
    must be fixed as well as its rail); a link is bad when it has a slow_link fault; a rail when it has a rail fault;
    a group when a fault was given for the group (every node under one switch group).
job_result(fleet, job, attempt) -> {"exit_code", "elapsed_s", "document" or None}: one launch of one screen job
    (plan/screen_jobs.py: its kind, hosts, rail, argv), deterministic in (fleet seed, job name, attempt).

The model (pure, no I/O):
  pair (kinds pair, retest, repeat; every rail striped evenly, as NCCL stripes its channels):
      busbw = pair_busbw_gbps x min(node factors) x link factor x min(1, rails x the slowest rail factor of
      either end) x noise; a dead rail carries nothing and the pair runs on the others at (rails - 1) / rails;
      small time = pair_small_time_us x max(node small factors) x link small factor x the largest rail small
      factor of either end (a small message striped over the rails waits for the slowest) x noise; each rail's
      bytes: an even share.
  rail alone (kind rail): pair_busbw_gbps / rails x min(node factors) x link factor x min(rail factor of both
      ends) x rail noise; its small time pair_small_time_us x the node, link and that rail's small factors x
      noise; a dead rail at either end fails.
  intra (kind intra): intra_busbw_gbps x the node's intra factor x noise (a slow_node of stage "all"); loopback:
      loopback_busbw_gbps x that rail's factor x noise (a slow or dead rail of stage "all": a dead one fails);
      doctor: pass (fail with a doctor_fail fault).
  Factors: a slow fault's factor (DEFAULT_FACTORS when absent; 1.0 when it gives a small_factor alone: slow by
      latency alone, bandwidth intact) and small_factor (default 1.0); two faults on one part multiply.
  fail_start: every job with the node leaves no output, exit 255, 1 s (ssh could not reach it). crash: its
      jobs die (exit 137, no output) half-way. hang: its jobs leave no output ("hung": True, exit 4; how long is
      the simulator's: what one hang costs, plan/bounds.hang_cost_s), the doctor at the launch timeout. A fault's
      "stage" is "all" (every job: the node stage sees it) or "pairs" (pair, retest, repeat and rail jobs only: a
      node that passes alone); default STAGE_ALL_BY_DEFAULT's kinds "all", the others "pairs".
  noise: lognormal, ln(value) ~ N(0, sd), sd from the fleet's "noise" (a preset name or the numbers), per size:
      busbw_log_sd the large size, small_time_log_sd the small one.
"""

import math
import random

from ..base.errors import CclbenchError, UsageError
from ..base.files import read_json

FORMAT = "screen_fleet/1"
# Healthy noise presets: the spread measured, where it was measured. A fleet file may give its own numbers.
NOISE_PRESETS = {
    # Per size, measured. Bus bandwidth at the large size: docs/bring-up.md ("Noise from repeats" and "Drift"),
    # three back-to-back single-GPU H200 baselines, 112 cases, three repeats: 1.5% spread of the repeats and 1.3%
    # run-to-run drift: sqrt(1.5^2 + 1.3^2) = 2.0% a measurement (the 64M all_reduce alone scattered 0.26% over the
    # ten baselines of tests/scripts/data/h200_repeat_noise.json: the wider composite is kept). The small size
    # scatters more: the 8K all_reduce (out of place) over the same ten baselines' 30 measurements, sd of ln(time)
    # 5.1% (tests/scripts/test_screen_simulate.py, Model, recomputes it). The rails alone of one pair: the same
    # instrument, two measurements: sqrt(2) x 2.0% = 2.8%.
    "h200": {"busbw_log_sd": 0.020, "small_time_log_sd": 0.051, "rail_log_sd": 0.028,
             "source": "bus bandwidth: docs/bring-up.md, three single-GPU H200 baselines, 1.5% repeat spread and "
                       "1.3% drift; small time: the 8K all_reduce of ten H200 baselines "
                       "(tests/scripts/data/h200_repeat_noise.json), 5.1%"},
    # rules/screen_bands.py (MIN_SPREAD_VALUES): the loaded 2-core virtual cluster's healthy pairs scatter 10-20%
    # lognormal (its upper end here); tests/scripts/test_screen_rules.py's fleets use the same.
    "vcluster": {"busbw_log_sd": 0.20, "small_time_log_sd": 0.20, "rail_log_sd": 0.20,
                 "source": "rules/screen_bands.py MIN_SPREAD_VALUES: the loaded 2-core virtual cluster, 10-20% "
                           "lognormal scatter of healthy pairs"},
}
DEFAULTS = {"pair_busbw_gbps": 40.0, "pair_small_time_us": 30.0, "intra_busbw_gbps": 300.0,
            "intra_small_time_us": 15.0, "loopback_busbw_gbps": 45.0, "job_s": 20.0, "seed": 0, "noise": "h200"}
NODE_FAULTS = ("slow_node", "fail_start", "crash", "hang", "doctor_fail")
RAIL_FAULTS = ("slow_rail", "dead_rail")
LINK_FAULTS = ("slow_link",)
FAULT_KINDS = NODE_FAULTS + RAIL_FAULTS + LINK_FAULTS
PAIR_KINDS = ("pair", "retest", "repeat", "rail")
# A fault's stage when the file gives none: "all" (the node stage sees it too: a node that cannot start, a failing
# doctor, a rail slow or dead in its loopback) or "pairs" (a node that passes alone: crash and hang in their pairs, a
# slow node whose intra-node point is fine).
STAGE_ALL_BY_DEFAULT = ("fail_start", "doctor_fail", "slow_rail", "dead_rail")
# A slow node or rail given a small_factor alone is slow by latency alone: its bandwidth is intact. Otherwise the
# factor's default: a node at 0.3, a rail at 0.1 (several-fold degraded), a link at 0.3.
DEFAULT_FACTORS = {"slow_node": 0.3, "slow_rail": 0.1, "slow_link": 0.3}
# A launch that could not reach its node (ssh) ends at once; a crash half-way through the job.
FAIL_START_S = 1.0
EXIT_NO_START, EXIT_KILLED, EXIT_TIMEOUT = 255, 137, 4


def _fail(path, message):
    raise UsageError(f"--simulate {path}: {message}")


def _positive_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_noise(path, noise):
    if isinstance(noise, str):
        if noise not in NOISE_PRESETS:
            _fail(path, f"noise {noise!r} is not a preset ({', '.join(sorted(NOISE_PRESETS))}) nor an object")
        return dict(NOISE_PRESETS[noise], preset=noise)
    if not isinstance(noise, dict):
        _fail(path, "noise must be a preset name or an object")
    checked = {}
    for key in ("busbw_log_sd", "small_time_log_sd", "rail_log_sd"):
        value = noise.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 2:
            _fail(path, f"noise.{key} must be a number from 0 to 2 (a log-space standard deviation)")
        checked[key] = float(value)
    if not isinstance(noise.get("source"), str) or not noise["source"].strip():
        _fail(path, "noise.source must say where the spread was measured")
    return dict(checked, source=noise["source"], preset=None)


def check_fleet(document, path="FLEET"):
    """The fleet file's content checked and completed with DEFAULTS; UsageError naming the first problem."""
    if not isinstance(document, dict):
        _fail(path, "not a JSON object")
    if document.get("format") != FORMAT:
        _fail(path, f"format must be {FORMAT!r}")
    unknown = set(document) - {"format", "description", "nodes", "rails", "gpus_per_node", "faults", "noise",
                               "seed"} - set(DEFAULTS)
    if unknown:
        _fail(path, f"unknown field(s): {', '.join(sorted(unknown))}")
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, list) or len(raw_nodes) < 2:
        _fail(path, "nodes must be a list of at least two nodes")
    nodes, groups = [], {}
    for index, entry in enumerate(raw_nodes):
        entry = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"] or \
                set(entry) - {"name", "group"}:
            _fail(path, f"nodes[{index}] must be a name or {{\"name\", \"group\"}}")
        name = entry["name"]
        if not all(char.isalnum() or char in "-_." for char in name):
            _fail(path, f"nodes[{index}]: {name!r} is not a host name")
        if name in groups:
            _fail(path, f"node {name} is listed twice")
        group = entry.get("group")
        if group is not None and (not isinstance(group, str) or not group):
            _fail(path, f"nodes[{index}].group must be a non-empty string")
        nodes.append(name)
        groups[name] = group
    rails = document.get("rails", [])
    if not isinstance(rails, list) or not all(isinstance(rail, str) and rail for rail in rails) or \
            len(set(rails)) != len(rails):
        _fail(path, "rails must be a list of distinct rail names (HCA ports such as mlx5_0:1, or interfaces)")
    for rail in rails:
        if ":" in rail and not (rail.count(":") == 1 and rail.split(":")[0] and rail.split(":")[1].isdigit()):
            _fail(path, f"rail {rail!r}: an HCA port is HCA:port (mlx5_0:1)")
    gpus = document.get("gpus_per_node", 8)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= 1024:
        _fail(path, "gpus_per_node must be an integer from 0 (GPU-less: the MPI backend) to 1024")
    fleet = {"nodes": nodes, "groups": groups, "rails": rails, "gpus_per_node": gpus,
             "description": document.get("description")}
    for key, default in DEFAULTS.items():
        value = document.get(key, default)
        if key == "noise":
            value = _check_noise(path, value)
        elif key == "seed":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                _fail(path, "seed must be a non-negative integer")
        elif not _positive_number(value):
            _fail(path, f"{key} must be a positive number")
        fleet[key] = value
    faults, fleet["group_faults"] = _by_node(path, document.get("faults", []), groups)
    fleet["faults"] = _check_faults(path, faults, set(nodes), rails)
    return fleet


def _by_node(path, faults, groups):
    """A node or rail fault given for a "group" (every node under one switch group) as one fault per node, each
    marked with its group ("shared_by"); (faults, [{"group", "kind", "rail", "nodes"}] of the group faults)."""
    if not isinstance(faults, list):
        _fail(path, "faults must be a list")
    expanded, shared = [], []
    for index, fault in enumerate(faults):
        if isinstance(fault, dict) and "group" in fault:
            if fault.get("kind") not in NODE_FAULTS + RAIL_FAULTS or "node" in fault:
                _fail(path, f"faults[{index}]: a group fault is a node or rail fault without a node")
            members = [node for node, group in groups.items() if group == fault["group"]]
            if not members:
                _fail(path, f"faults[{index}]: no node is in group {fault['group']!r}")
            rest = {key: value for key, value in fault.items() if key != "group"}
            expanded += [dict(rest, node=node) for node in members]
            shared.append({"group": fault["group"], "kind": fault["kind"], "rail": fault.get("rail"),
                           "nodes": members})
        else:
            expanded.append(fault)
    return expanded, shared


def _check_faults(path, faults, nodes, rails):
    if not isinstance(faults, list):
        _fail(path, "faults must be a list")
    checked = []
    for index, fault in enumerate(faults):
        where = f"faults[{index}]"
        if not isinstance(fault, dict) or fault.get("kind") not in FAULT_KINDS:
            _fail(path, f"{where}.kind must be one of {', '.join(FAULT_KINDS)}")
        kind = fault["kind"]
        allowed = {"kind", "factor", "small_factor", "stage", "note"} | \
            ({"a", "b"} if kind in LINK_FAULTS else {"node"}) | ({"rail"} if kind in RAIL_FAULTS else set())
        if set(fault) - allowed:
            _fail(path, f"{where}: unknown field(s) {', '.join(sorted(set(fault) - allowed))} for {kind}")
        ends = [fault.get("a"), fault.get("b")] if kind in LINK_FAULTS else [fault.get("node")]
        for end in ends:
            if end not in nodes:
                _fail(path, f"{where}: {end!r} is not a node of the fleet")
        if kind in LINK_FAULTS and ends[0] == ends[1]:
            _fail(path, f"{where}: a link needs two different nodes")
        if kind in RAIL_FAULTS and fault.get("rail") not in rails:
            _fail(path, f"{where}: rail {fault.get('rail')!r} is not one of the fleet's rails {rails}")
        for key in ("factor", "small_factor"):
            if key in fault and not _positive_number(fault[key]):
                _fail(path, f"{where}.{key} must be a positive number")
        stage = fault.get("stage", "all" if kind in STAGE_ALL_BY_DEFAULT else "pairs")
        if stage not in ("all", "pairs"):
            _fail(path, f"{where}.stage must be all or pairs")
        checked.append(dict(fault, stage=stage))
    return checked


def read_fleet(path):
    try:
        document = read_json(path, "fleet file")
    except UsageError:
        raise
    except CclbenchError as error:  # read_json's (exit 1): a fleet file is the user's input, so exit 2
        raise UsageError(f"--simulate {path}: {error}") from None
    return check_fleet(document, path)


def truth(fleet):
    """{"bad_nodes", "bad_links", "bad_rails", "bad_groups"}: bad_groups the groups a fault was given for (a fault
    shared by every node of a switch group: a correct screen names the group)."""
    bad_nodes, bad_links, bad_rails = set(), set(), set()
    for fault in fleet["faults"]:
        if fault["kind"] in NODE_FAULTS:
            bad_nodes.add(fault["node"])
        elif fault["kind"] in RAIL_FAULTS:
            bad_nodes.add(fault["node"])
            bad_rails.add((fault["node"], fault["rail"]))
        else:
            bad_links.add(tuple(sorted((fault["a"], fault["b"]))))
    return {"bad_nodes": sorted(bad_nodes), "bad_links": sorted(bad_links), "bad_rails": sorted(bad_rails),
            "bad_groups": sorted({shared["group"] for shared in fleet.get("group_faults") or ()})}


def fault_factor(fault):
    """A slow fault's bandwidth factor: its own, 1.0 when it gives a small_factor alone (latency alone), else
    DEFAULT_FACTORS."""
    if "factor" in fault:
        return fault["factor"]
    return 1.0 if "small_factor" in fault else DEFAULT_FACTORS[fault["kind"]]


class FleetModel:
    """The fleet's faults indexed for job_result; one per fleet."""

    def __init__(self, fleet):
        self.fleet = fleet
        # Bandwidth factors multiply (two faults on one part: both slow it), small-message factors too.
        self.node_factor, self.small_factor, self.intra_factor, self.intra_small = {}, {}, {}, {}
        self.rail_factor, self.rail_small, self.dead_rails, self.link_factor, self.link_small = {}, {}, {}, {}, {}
        self.loopback_factor, self.loopback_small, self.loopback_dead = {}, {}, {}
        self.failing = {}  # node -> [(kind, stage)]

        def times(table, key, value):
            table[key] = table.get(key, 1.0) * value

        for fault in fleet["faults"]:
            kind = fault["kind"]
            node, rail, alone = fault.get("node"), fault.get("rail"), fault["stage"] == "all"
            small = fault.get("small_factor", 1.0)
            if kind == "slow_node":
                times(self.node_factor, node, fault_factor(fault))
                times(self.small_factor, node, small)
                if alone:  # the intra-node point too
                    times(self.intra_factor, node, fault_factor(fault))
                    times(self.intra_small, node, small)
            elif kind == "slow_rail":
                times(self.rail_factor, (node, rail), fault_factor(fault))
                times(self.rail_small, (node, rail), small)
                if alone:  # its loopback too
                    times(self.loopback_factor, (node, rail), fault_factor(fault))
                    times(self.loopback_small, (node, rail), small)
            elif kind == "dead_rail":
                self.dead_rails.setdefault(node, set()).add(rail)
                if alone:
                    self.loopback_dead.setdefault(node, set()).add(rail)
            elif kind == "slow_link":
                key = frozenset((fault["a"], fault["b"]))
                times(self.link_factor, key, fault_factor(fault))
                times(self.link_small, key, small)
            else:
                self.failing.setdefault(node, []).append((kind, fault["stage"]))

    def _noise(self, rng, key):
        sd = self.fleet["noise"][key]
        return math.exp(rng.gauss(0.0, sd)) if sd else 1.0

    def job_result(self, job, attempt=1):
        fleet = self.fleet
        rng = random.Random(f"{fleet['seed']}/{job['name']}/{attempt}")
        for host in job["hosts"]:
            for kind, stage in self.failing.get(host, ()):
                if stage == "pairs" and job["kind"] not in PAIR_KINDS:
                    continue
                if kind == "fail_start":
                    return {"exit_code": EXIT_NO_START, "elapsed_s": FAIL_START_S, "document": None, "host": host,
                            "fault": kind}
                if kind == "crash" and job["kind"] != "doctor":
                    return {"exit_code": EXIT_KILLED, "elapsed_s": fleet["job_s"] / 2, "document": None, "host": host,
                            "fault": kind}
                if kind == "hang":
                    if job["kind"] == "doctor":  # the launch timeout
                        return {"exit_code": None, "elapsed_s": None, "document": None, "host": host, "fault": kind}
                    # How long: what one hang costs (the learned deadlines: execute/screen_simulate.py fills it in)
                    return {"exit_code": EXIT_TIMEOUT, "elapsed_s": None, "hung": True, "document": None,
                            "host": host, "fault": kind}
                if kind == "doctor_fail" and job["kind"] == "doctor":
                    return {"exit_code": 1, "elapsed_s": fleet["job_s"], "document": {"status": "fail"}}
        if job["kind"] == "doctor":
            return {"exit_code": 0, "elapsed_s": fleet["job_s"], "document": {"status": "pass"}}
        measured = self._measure(job, rng)
        document = coll_perf_document(job, measured, self.gpus_of(job))
        return {"exit_code": 0 if measured["busbw"] is not None else 1, "elapsed_s": fleet["job_s"],
                "document": document}

    def gpus_of(self, job):
        """The job's ranks: per node gpus_per_node (one a node on the MPI backend; its intra point two)."""
        per_node = self.fleet["gpus_per_node"]
        if job["kind"] in ("intra", "loopback"):
            return per_node or 2
        return 2 * (per_node or 1)

    def _measure(self, job, rng):
        """The values a healthy or degraded job measures: (busbw or None, small time or None, rail bytes)."""
        fleet, kind, hosts = self.fleet, job["kind"], job["hosts"]
        rails = fleet["rails"]
        if kind == "intra":
            node = hosts[0]
            busbw = fleet["intra_busbw_gbps"] * self.intra_factor.get(node, 1.0) * self._noise(rng, "busbw_log_sd")
            small = fleet["intra_small_time_us"] * self.intra_small.get(node, 1.0) * \
                self._noise(rng, "small_time_log_sd")
            return {"busbw": busbw, "small": small, "rail_bytes": None}
        if kind == "loopback":
            node, rail = hosts[0], job["rail"]
            if rail in self.loopback_dead.get(node, ()):
                return {"busbw": None, "small": None, "rail_bytes": None}
            return {"busbw": fleet["loopback_busbw_gbps"] * self.loopback_factor.get((node, rail), 1.0)
                    * self._noise(rng, "busbw_log_sd"),
                    "small": fleet["intra_small_time_us"] * self.loopback_small.get((node, rail), 1.0)
                    * self._noise(rng, "small_time_log_sd"), "rail_bytes": None}
        a, b = hosts
        key = frozenset((a, b))
        factor = min(self.node_factor.get(a, 1.0), self.node_factor.get(b, 1.0)) * self.link_factor.get(key, 1.0)
        small_factor = max(self.small_factor.get(a, 1.0), self.small_factor.get(b, 1.0)) * \
            self.link_small.get(key, 1.0)
        if kind == "rail":
            rail = job["rail"]
            if any(rail in self.dead_rails.get(node, ()) for node in hosts):
                return {"busbw": None, "small": None, "rail_bytes": None}
            factor *= min(self.rail_factor.get((node, rail), 1.0) for node in hosts)
            small_factor *= max(self.rail_small.get((node, rail), 1.0) for node in hosts)
            share = fleet["pair_busbw_gbps"] / max(len(rails), 1)
            return {"busbw": share * factor * self._noise(rng, "rail_log_sd"),
                    "small": fleet["pair_small_time_us"] * small_factor * self._noise(rng, "small_time_log_sd"),
                    "rail_bytes": {host: {name: (1.0e9 if name == rail else 1.0e4) for name in rails}
                                   for host in hosts} if rails else None}
        dead = {rail for node in hosts for rail in self.dead_rails.get(node, ())}
        live = [rail for rail in rails if rail not in dead]
        if rails and not live:
            return {"busbw": None, "small": None, "rail_bytes": None}
        if rails:
            slowest = min([1.0] + [self.rail_factor.get((node, rail), 1.0) for node in hosts for rail in live])
            factor *= min(1.0, len(live) * slowest) * len(live) / len(rails)
            # A small message striped over the rails waits for the slowest of them.
            small_factor *= max([1.0] + [self.rail_small.get((node, rail), 1.0) for node in hosts for rail in live])
        rail_bytes = None
        if len(rails) >= 2:
            rail_bytes = {}
            for host in hosts:
                total = 2.0e9
                shares = {rail: (0.0 if rail in dead else 1.0 + rng.gauss(0, 0.02)) for rail in rails}
                scale = sum(shares.values())
                rail_bytes[host] = {rail: int(total * share / scale) for rail, share in shares.items()}
        return {"busbw": fleet["pair_busbw_gbps"] * factor * self._noise(rng, "busbw_log_sd"),
                "small": fleet["pair_small_time_us"] * small_factor * self._noise(rng, "small_time_log_sd"),
                "rail_bytes": rail_bytes}


def _sizes(argv):
    """The --sizes of a coll_perf argv as ints (the large size first)."""
    for index, item in enumerate(argv[:-1]):
        if item == "--sizes":
            return [int(size) for size in argv[index + 1].split(",")]
    raise ValueError("a coll_perf job without --sizes")


def coll_perf_document(job, measured, ranks):
    """The -J document coll_perf writes for this job (the fields model/screen_records.py reads, in
    case_record.schema.json's shape): one out-of-place all_reduce record per size of the job's --sizes, the large
    size at measured["busbw"] (None: status failed), the small at measured["small"]; rail counters per host."""
    sizes = _sizes(job["argv"])
    bus_factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0
    backend = job["argv"][job["argv"].index("--backend") + 1] if "--backend" in job["argv"] else "nccl"
    records = []
    for position, size in enumerate(sizes):
        value = measured["busbw"] if position == 0 else measured["small"]
        record = {"case_id": f"{job['name']}.{size}", "point": job["name"], "collective": "all_reduce",
                  "backend": backend, "nranks": ranks, "dtype": "float", "op": "sum", "in_place": False,
                  "requested_bytes": size, "bytes": size, "count": size // 4, "send_bytes": size,
                  "recv_bytes": size, "wrong": 0}
        if value is None:
            records.append(dict(record, status="failed", reason="simulated: the point failed", time_us=None,
                                busbw_gbps=None, algbw_gbps=None))
            continue
        if position == 0:
            time_us = size * bus_factor / (value * 1.0e3)
            busbw = value
        else:
            time_us = value
            busbw = size * bus_factor / (time_us * 1.0e3)
        record.update(status="ok", reason=None, busbw_gbps=busbw, algbw_gbps=busbw / bus_factor,
                      bandwidth_from="time_us.mean", time_us={"mean": time_us, "p50": time_us, "min": time_us,
                                                              "max": time_us})
        if position == 0 and measured.get("rail_bytes"):
            nodes = []
            for host, counts in measured["rail_bytes"].items():
                hca = [{"rail": rail, "hca": rail.split(":")[0], "port": int(rail.split(":")[1]),
                        "total_bytes": count, "source": "hca"} for rail, count in counts.items() if ":" in rail]
                netdev = [{"rail": rail, "total_bytes": count, "source": "netdev"} for rail, count in counts.items()
                          if ":" not in rail]
                nodes.append(dict({"host": host}, **({"ib_ports": hca} if hca else {}),
                                  **({"netdev_rails": netdev} if netdev else {})))
            record["evidence"] = {"rails": {"nodes": nodes}}
        records.append(record)
    return {"schema_version": "1.5.0", "program": "coll_perf", "status": "complete",
            "manifest": {"tool": "cclbench", "tool_version": "simulated", "git_commit": "simulated",
                         "argv": list(job["argv"]), "world_size": ranks, "backend": backend},
            "transport": {"simulated": True} if backend == "nccl" else None,
            "transport_reason": None if backend == "nccl" else "MPI backend: no NCCL communicator",
            "cases": records}
