"""Reading case records (coll_perf's JSONL) and judging them: latest per case, completeness of a
point against its plan, statistics across repeats.
"""

import os
import re

from ..base.errors import CclbenchError
from ..base.files import read_jsonl
from ..base.numbers import is_finite, positive


_REPEAT_RE = re.compile(r"^(.*)\.rep(\d+)$")


CASES_FILE = "cases.jsonl"    # every timed case record of a run
SANITY_FILE = "sanity.jsonl"  # the sanity pass's records


def cases_path(run_dir):
    return os.path.join(run_dir, CASES_FILE)


def launch_base_point(launch):
    """The base point of a plan launch: its base_point, else its name without .repN (as its records are grouped)."""
    return launch.get("base_point") or base_point_of(launch.get("name") or "")


def base_point_of(point):
    match = _REPEAT_RE.match(point or "")
    return match.group(1) if match else (point or "")


def record_problem(record):
    """Why a parsed JSON object cannot be a case record for the readers here (types only; the
    schema says the rest), or None. Keeps hostile or corrupted files from crashing compare/report."""
    for key in ("point", "case_id", "status", "collective", "reason"):
        if record.get(key) is not None and not isinstance(record.get(key), str):
            return f"{key} is not a string"
    for key in ("requested_bytes", "iterations", "wrong"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 63):
            return f"{key} is not a count"
    time_us = record.get("time_us")
    if time_us is not None:
        if not isinstance(time_us, dict):
            return "time_us is not an object"
        if any(value is not None and not is_finite(value) for value in time_us.values()):
            return "time_us holds a value that is not a finite number"
    samples = record.get("samples_us")
    if samples is not None and (not isinstance(samples, list) or not all(is_finite(v) for v in samples)):
        return "samples_us is not a list of finite numbers"
    return None


# Schema 1.3 (lean records): coll_perf leaves out a field that holds its default. The defaults,
# stated once for every reader (the "default" annotations of results_schema/case_record.schema.json,
# held equal by tests/scripts/test_record_size.py). Records before 1.3 carry them explicitly; before
# 1.2 the mode fields were absent and meant these same values (graph_launches absent: eager or the
# older -G method).
RECORD_DEFAULTS = {"root": None, "emulated": False, "check_iterations": 1, "graph_launches": 0, "ops_per_launch": 1,
                   "registration": "none", "unalign_elements": 0, "cta_policy": None, "cycle": 0}
# evidence.rails.flags and evidence.rails.nodes[].flags/ib_ports/netdevs/netdev_rails (schema 1.5): absent means empty.
RAIL_NODE_ARRAYS = ("flags", "ib_ports", "netdevs", "netdev_rails")


def _one_rank_per_rank(record):
    """per_rank of a one-rank record that leaves it out: its one rank's mean is time_us.mean and it is
    the slowest in every iteration; null when the case was not timed."""
    time_us = record.get("time_us")
    if not isinstance(time_us, dict) or "iterations" not in record:
        return None
    return {"mean_us": [time_us.get("mean")], "slowest_iterations": [record["iterations"]]}


def with_defaults(record):
    """The record with every field that a lean (schema 1.3) record leaves out filled back with its
    documented default: what every reader sees. The input is not changed; a field present is kept."""
    full = dict(record)
    for key, value in RECORD_DEFAULTS.items():
        full.setdefault(key, value)
    if full.get("nranks") == 1 and "per_rank" not in full:
        full["per_rank"] = _one_rank_per_rank(full)
    evidence = full.get("evidence")
    rails = evidence.get("rails") if isinstance(evidence, dict) else None
    if isinstance(rails, dict):
        rails = dict(rails)
        rails.setdefault("flags", [])
        if isinstance(rails.get("nodes"), list):
            rails["nodes"] = [dict({key: [] for key in RAIL_NODE_ARRAYS}, **node) if isinstance(node, dict) else node
                              for node in rails["nodes"]]
        full["evidence"] = dict(evidence, rails=rails)
    return full


def load_cases(run_dir_or_file, what="case records", strict=False):
    """Records from RUN_DIR/cases.jsonl (or a .jsonl file), defaults filled in (with_defaults). Returns
    (records, bad_line_numbers); objects that cannot be case records count as bad lines (an error when
    strict)."""
    path = run_dir_or_file
    if os.path.isdir(path):
        path = cases_path(path)
    records, bad = read_jsonl(path, what, strict=strict)
    kept = []
    for number, record in enumerate(records, 1):
        problem = record_problem(record)
        if problem is None:
            kept.append(with_defaults(record))
        elif strict:
            raise CclbenchError(f"{what} {path}: record {number} is not a case record ({problem})")
        else:
            bad.append(f"record {number}")
    return kept, bad


def latest_by_case(records):
    """The last record per (point, case_id): a re-run point's records supersede earlier attempts."""
    latest = {}
    for record in records:
        key = (record.get("point") or "", record.get("case_id") or "")
        latest[key] = record
    return latest


def was_skipped(record):
    """A case the tool skipped with its reason (in-place AlltoAll under checking, a dtype this NCCL
    lacks): an answer, not a failure, and carrying no measurement. Every consumer (baseline
    completeness, smoke, report) treats it so through this one test."""
    return record.get("status") == "skipped"


def record_is_sound(record):
    """status ok, the numbers parse, data checked and correct when checking was on."""
    if record.get("status") != "ok":
        return False
    time_us = record.get("time_us")
    if not isinstance(time_us, dict):
        return False
    for key in ("mean", "p50"):
        value = time_us.get(key)
        if not is_finite(value) or value <= 0:
            return False
    wrong = record.get("wrong")
    if wrong not in (None, 0):
        return False
    return True


def describe_problem(record):
    """Why record_is_sound() said no, in a few words."""
    if record.get("status") != "ok":
        return f"{record.get('status')}" + (f" ({record.get('reason')})" if record.get("reason") else "")
    wrong = record.get("wrong")
    if wrong not in (None, 0):
        return f"{wrong} wrong element(s)"
    return "its time_us does not parse"


def point_completeness(records, launch):
    """(complete, missing, failed): every planned (collective, size) has records, all sound."""
    mine = [r for (point, _), r in latest_by_case(records).items() if point == launch["name"]]
    by_key = {}
    for record in mine:
        key = (record.get("collective"), record.get("requested_bytes"))
        by_key.setdefault(key, []).append(record)
    missing = []
    failed = []
    for collective in launch.get("collectives", []):
        for size in launch.get("sizes", []):
            found = by_key.get((collective, size))
            if not found:
                missing.append((collective, size))
            else:
                # Wrong data, errors and unparsable numbers are failures; a skipped case is not.
                failed.extend(r for r in found if not was_skipped(r) and not record_is_sound(r))
    return (not missing and not failed), missing, failed




def group_repeats(records):
    """{(base_point, case_id): [latest record of each repeat]}, repeats in name order."""
    groups = {}
    for (point, case_id), record in sorted(latest_by_case(records).items()):
        groups.setdefault((base_point_of(point), case_id), []).append(record)
    return groups


def bandwidth_time_us(record):
    """The time a record's busbw comes from, the headline the report plots and compare judges:
    gated_time_us (GPU time, no launch gaps) where coll_perf has one, else batch_time_us where the record
    says so (a -G run without a gated time: its per-iteration samples carry event nodes), else time_us.mean."""
    gated = positive(record.get("gated_time_us"))
    if gated is not None:
        return gated
    if record.get("bandwidth_from") == "batch_time_us":
        return positive(record.get("batch_time_us"))
    time_us = record.get("time_us")
    return positive(time_us.get("mean")) if isinstance(time_us, dict) else None


# What a record measures. Emulated ranks (--share-gpu: several ranks time-slice one GPU over sockets)
# and the MPI backend (host memory) are correctness checks of the code paths, not GPU figures: their
# times never feed gates, anomalies, headlines, plots or compare's time verdicts.
GPU_TIMED = "gpu"
EMULATED = "emulated"
MPI_HOST = "mpi_host"
CLASS_LABELS = {EMULATED: "emulated: correctness only", MPI_HOST: "MPI backend on host memory: correctness only"}


def measurement_class(record):
    if record.get("emulated"):
        return EMULATED
    if record.get("backend") == "mpi":
        return MPI_HOST
    return GPU_TIMED


def is_correctness_only(record):
    return measurement_class(record) != GPU_TIMED


def measurement_mode(record):
    """backend, ranks, emulation and launch mode: records of different modes are never compared.
    CUDA-graph records (graph_launches > 0) are never set against eager ones."""
    graph = record.get("graph_launches")
    launch = "cuda-graph" if is_finite(graph) and graph > 0 else "eager"
    mode = f"{record.get('backend') or '?'} x{record.get('nranks') or '?'} {launch}"
    return mode + (" emulated" if record.get("emulated") else "")
