"""The smoke reference: the smoke's comparable cases of one run and the hardware and software they were measured on,
as one small file a CI can keep in its repository (results_schema/smoke_reference.schema.json).

`baseline` and `smoke` write RUN_DIR/smoke_reference.json; `smoke --against` and `compare` read a reference from
that file, from a file kept anywhere, or build it from a run directory's own files (cases.jsonl's smoke.* points,
smoke/smoke.copy.repN.json, the tools' manifests). A case of the reference is one measurement, a list of repeats;
the rules see each repeat as a case record (reference_groups), so the noise rule of rules/noise.py judges it as any
other case.

A measured reference (`smoke --capture N`, schema 1.1) is N such runs merged (merge_capture): every launch of every
run, and per case what rules/smoke_bands.py judges a smoke with: each run's value, their centre, the run-to-run spread
and the within-run spread of launches (its floor), and the largest excursion of one sample from its launch's median.
A launch's value comes from its samples by the case's estimator (ESTIMATORS: why each one).
"""

import datetime
import glob
import json
import math
import os
import re
import statistics

from ..base.errors import CclbenchError
from ..base.files import read_json
from ..base.numbers import is_finite, median, positive
from ..model.records import base_point_of, bandwidth_time_us, cases_path, latest_by_case, load_cases, was_skipped

REFERENCE_FILE = "smoke_reference.json"
REFERENCE_KIND = "smoke_reference"
REFERENCE_SCHEMA_VERSION = "1.2.0"  # 1.1: capture (several runs) and each case's measured spread; 1.2: capture.every_s
# The smoke's points (plan/smoke_cases.py launches them): their records are the reference's cases.
SMOKE_POINT_PREFIX = "smoke."
SMOKE_COPY_POINT = "smoke.copy"
SMOKE_COPY_DIR = "smoke"
# The hardware and software a reference was measured on; a reference whose values differ from the run judged
# against it is refused, or compared with a warning (--other-hardware).
IDENTITY_FIELDS = (("gpu_model", "GPU model"), ("gpu_count", "GPU count"), ("nvidia_driver", "NVIDIA driver"),
                   ("cuda_driver", "CUDA driver"), ("cuda_runtime", "CUDA runtime"), ("nccl", "NCCL version"))
_REPEAT_FILE_RE = re.compile(r"^smoke\.copy\.rep(\d+)\.json$")
SAMPLES_SUFFIX = ".samples.jsonl"  # coll_perf --samples beside each smoke collective launch: smoke/<launch>.samples.jsonl

# How one launch of a case becomes one number (its repeat's time_us), per smoke point. Chosen for the measurement,
# by the launch-to-launch spread measured on an H100 (5 runs x 3 launches, 2026-12-05; docs/ci.md):
#   smoke.copy        "best": the fastest of the launch's per-copy times (best of N). A copy has a floor, the link's
#                     or HBM's speed, and anything else only adds time, so the fastest sample is the steadiest:
#                     launch-to-launch 0.09% host-to-device, 0.06% device-to-host, 0.17% local CE, 0.41% local SM,
#                     against 0.26%, 0.13%, 0.21%, 0.43% for a 20% trimmed mean and 0.28-0.50% for the median.
#                     Interference that spares some samples cannot move it: that is the unstable finding's to see.
#   smoke.collective  "gated": coll_perf's gated time, one event pair around the launch's back-to-back collectives
#                     behind a blocker: the mean of them all with no per-iteration timer cost (0.2-0.6%, against
#                     0.3-0.5% for the median of per-iteration times, which carry their events' cost).
#   smoke.graph       "gated": the same around 10 replays of a 50-collective graph (500 collectives): 0.08%, against
#                     1.5-1.8% for any statistic of the per-iteration times of an 8K AllReduce (~1 us each).
# Samples kept for the unstable finding: the per-copy times (p2p_matrix sample_time_us) and the per-iteration times
# of the instrumented pass (coll_perf --samples).
TRIM_FRACTION = 0.2
ESTIMATORS = {SMOKE_COPY_POINT: "best", "smoke.collective": "gated", "smoke.graph": "gated"}
ESTIMATOR_NAMES = ("trimmed_mean", "median", "best", "mean", "gated")


def estimate(estimator, samples):
    """One launch's value from its samples (microseconds): trimmed_mean, median, best (the smallest) or mean. None
    without samples."""
    values = sorted(v for v in samples or [] if is_finite(v) and v > 0)
    if not values:
        return None
    if estimator == "best":
        return values[0]
    if estimator == "median":
        return median(values)
    cut = int(len(values) * TRIM_FRACTION) if estimator == "trimmed_mean" else 0
    kept = values[cut:len(values) - cut] or values
    return sum(kept) / len(kept)


# A gated launch's per-iteration samples (the instrumented pass, an event pair per iteration) stand for its gated
# value only where the timer's own cost is small against the operation: their mean within this fraction of the gated
# value. Beyond it they time the timer (an 8K AllReduce in a graph on an H100: samples 3.56 us, gated 1.00 us, their
# scatter 9.9%, against 0.08% run to run for the gated value: docs/data/smoke_proof/h100-2026-12-06), and give no floor.
GATED_SAMPLES_AGREEMENT = 0.25


def sample_se_pct(estimator, samples, value=None):
    """How precisely one launch's samples fix its value, percent: the standard error of their mean (gated: the mean
    of the back-to-back iterations the per-iteration samples stand for; mean, trimmed_mean, median), or for best
    the gap between the two fastest samples (the best of N can be no finer than the spacing at the bottom). None
    with fewer than two samples, and for a gated launch (value: its gated time) whose samples' mean lies more than
    GATED_SAMPLES_AGREEMENT above its value: they time something else (the per-iteration timer)."""
    values = sorted(v for v in samples or [] if is_finite(v) and v > 0)
    if len(values) < 2:
        return None
    if estimator == "gated" and value and statistics.fmean(values) > value * (1 + GATED_SAMPLES_AGREEMENT):
        return None
    if estimator == "best":
        return (values[1] / values[0] - 1) * 100
    cut = int(len(values) * TRIM_FRACTION) if estimator == "trimmed_mean" else 0
    kept = values[cut:len(values) - cut] if len(values) - 2 * cut >= 2 else values
    return statistics.stdev(kept) / math.sqrt(len(kept)) / statistics.fmean(kept) * 100


def excursions_pct(samples):
    """Each sample's excursion above its launch's median, percent (x / median - 1) x 100: what an unstable launch
    shows, whatever its value."""
    values = [v for v in samples or [] if is_finite(v) and v > 0]
    centre = median(values)
    return [(v / centre - 1) * 100 for v in values] if centre else []


def _endpoint(value):
    return "host" if value == "host" else f"gpu{value}"


def copy_repeats(document):
    """{case_id: repeat entry} of one p2p_matrix result of the smoke's copies: case_id is TEST.SRC-DST
    (device_local_copy_ce.gpu0-gpu0, h2d_ce_local_numa.host-gpu0); the time per copy is p2p_matrix's median."""
    found = {}
    for result in document.get("results") or [] if isinstance(document, dict) else []:
        if not isinstance(result, dict) or not isinstance(result.get("test"), str):
            continue
        case_id = f"{result['test']}.{_endpoint(result.get('src'))}-{_endpoint(result.get('dst'))}"
        stats = result.get("time_us") if isinstance(result.get("time_us"), dict) else {}
        bandwidth = result.get("bandwidth_gbps") if isinstance(result.get("bandwidth_gbps"), dict) else {}
        verification = result.get("verification") if isinstance(result.get("verification"), dict) else {}
        ok = result.get("status") == "ok"
        samples = [v for v in result.get("sample_time_us") or [] if is_finite(v) and v > 0]
        time_us = (estimate(ESTIMATORS[SMOKE_COPY_POINT], samples) or positive(stats.get("median"))) if ok else None
        found[case_id] = {"status": result.get("status") if isinstance(result.get("status"), str) else "error",
                          "reason": None if ok else (result.get("reason") or "no reason given"),
                          "time_us": time_us, "bandwidth_gbps": positive(bandwidth.get("median")) if ok else None,
                          "wrong": verification.get("wrong_words") if is_finite(verification.get("wrong_words")) else None,
                          "bytes": result.get("bytes") if isinstance(result.get("bytes"), int) else None}
        if ok and samples:
            found[case_id]["samples_us"] = samples
        if ok and time_us is None:
            found[case_id].update(status="error", reason="time_us.median is missing")
    return found


def _coll_repeat(record, samples=None):
    """A repeat entry of one coll_perf case record: its bandwidth time (gated_time_us where there is one), and its
    per-iteration samples where coll_perf --samples wrote them."""
    ok = record.get("status") == "ok"
    time_us = bandwidth_time_us(record) if ok else None
    entry = {"status": record.get("status") or "error", "reason": None if ok else (record.get("reason") or None),
             "time_us": time_us, "bandwidth_gbps": positive(record.get("algbw_gbps")) if ok else None,
             "wrong": record.get("wrong") if isinstance(record.get("wrong"), int) else None,
             "bytes": record.get("requested_bytes")}
    kept = [v for v in samples or [] if is_finite(v) and v > 0]
    if ok and kept:
        entry["samples_us"] = kept
    return entry


def _coll_samples(run_dir):
    """{(launch point, case_id): per-iteration times} of the smoke's coll_perf --samples files."""
    found = {}
    for path in sorted(glob.glob(os.path.join(run_dir, SMOKE_COPY_DIR, SMOKE_POINT_PREFIX + "*" + SAMPLES_SUFFIX))):
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a torn last line of a launch that was stopped
            if isinstance(item, dict) and isinstance(item.get("case_id"), str) and isinstance(item.get("samples_us"), list):
                found[(item.get("point"), item["case_id"])] = item["samples_us"]
    return found


def _smoke_manifests(run_dir):
    """coll_perf's -J manifests of the smoke's points (raw/smoke.*.json), in name order: the versions and GPUs as
    coll_perf saw them."""
    manifests = []
    for path in sorted(glob.glob(os.path.join(run_dir, "raw", SMOKE_POINT_PREFIX + "*.json"))):
        try:
            document = read_json(path, "coll_perf result")
        except CclbenchError:
            continue
        manifest = document.get("manifest") if isinstance(document, dict) else None
        if isinstance(manifest, dict):
            manifests.append(manifest)
    return manifests


def _cuda_version(code):
    """'13.0' of CUDA's integer version 13000."""
    return f"{code // 1000}.{code % 1000 // 10}" if isinstance(code, int) and code > 0 else None


def _doctor_nvidia_driver(run_dir):
    for path in sorted(glob.glob(os.path.join(run_dir, "doctor", "*.json"))):
        try:
            document = read_json(path, "doctor result")
        except CclbenchError:
            continue
        versions = document.get("versions") if isinstance(document, dict) else None
        if isinstance(versions, dict) and isinstance(versions.get("nvidia_driver"), str):
            return versions["nvidia_driver"]
    return None


def run_identity(run_dir, copies, nvidia_driver=None):
    """The hardware and software of a run's smoke cases: GPU model and count (p2p_matrix's devices, else coll_perf's
    manifest), NVIDIA driver (given: read on the host by the caller, else the run's doctor result), CUDA driver and
    runtime and NCCL (coll_perf's manifest, else p2p_matrix's); None where the run does not say."""
    identity = {key: None for key, _ in IDENTITY_FIELDS}
    copy = copies[0] if copies else {}
    names = [d.get("name") for d in copy.get("devices") or [] if isinstance(d, dict) and d.get("name")]
    if names:
        identity.update(gpu_model=", ".join(sorted(set(names))), gpu_count=len(names))
    cuda = copy.get("cuda") if isinstance(copy.get("cuda"), dict) else {}
    identity.update(cuda_driver=_cuda_version(cuda.get("driver_version")),
                    cuda_runtime=_cuda_version(cuda.get("runtime_version")))
    manifests = _smoke_manifests(run_dir)
    manifest = manifests[0] if manifests else {}
    versions = manifest.get("versions") if isinstance(manifest.get("versions"), dict) else {}
    gpus = [g.get("name") for g in manifest.get("gpus") or [] if isinstance(g, dict) and g.get("name")]
    if identity["gpu_model"] is None and gpus:
        identity["gpu_model"] = ", ".join(sorted(set(gpus)))
    for key in ("cuda_driver", "cuda_runtime", "nccl"):
        if isinstance(versions.get(key), str) and versions[key]:
            identity[key] = versions[key]
    identity["nvidia_driver"] = nvidia_driver if nvidia_driver is not None else _doctor_nvidia_driver(run_dir)
    return identity


def reference_from_run(run_dir, created_utc, tool_version, nvidia_driver=None):
    """The smoke reference of a run directory (smoke_reference.schema.json): every case of its smoke.* points, each
    with one entry per repeat, and the identity they were measured under. A run without them (no GPU) gives a
    reference with no case, which nothing can be compared with."""
    cases = {}
    copies = []
    for path in sorted(glob.glob(os.path.join(run_dir, SMOKE_COPY_DIR, SMOKE_COPY_POINT + ".rep*.json"))):
        match = _REPEAT_FILE_RE.match(os.path.basename(path))
        if not match:
            continue
        try:
            document = read_json(path, "p2p_matrix result")
        except CclbenchError:
            continue  # a repeat that wrote nothing readable: the launch failed and says so in the manifest
        copies.append(document)
        for case_id, entry in copy_repeats(document).items():
            case = cases.setdefault((SMOKE_COPY_POINT, case_id), {
                "point": SMOKE_COPY_POINT, "case_id": case_id, "collective": case_id.split(".")[0], "bytes": entry["bytes"],
                "mode": {"backend": "cuda", "nranks": 1, "emulated": False, "graph_launches": 0}, "repeats": []})
            case["repeats"].append(dict(entry, repeat=int(match.group(1))))
    records_file = cases_path(run_dir)
    samples = _coll_samples(run_dir)
    if os.path.exists(records_file):
        records, _ = load_cases(records_file, "case records")
        for (point, case_id), record in sorted(latest_by_case(records).items()):
            base = base_point_of(point)
            if not base.startswith(SMOKE_POINT_PREFIX) or was_skipped(record):
                continue
            repeat = int(point.rsplit(".rep", 1)[1]) if ".rep" in point and point.rsplit(".rep", 1)[1].isdigit() else 1
            case = cases.setdefault((base, case_id), {
                "point": base, "case_id": case_id, "collective": record.get("collective"),
                "bytes": record.get("requested_bytes"),
                "mode": {"backend": record.get("backend") or "?", "nranks": record.get("nranks") or 1,
                         "emulated": bool(record.get("emulated")), "graph_launches": record.get("graph_launches") or 0},
                "repeats": []})
            case["repeats"].append(dict(_coll_repeat(record, samples.get((point, case_id))), repeat=repeat))
    for case in cases.values():
        case["repeats"].sort(key=lambda entry: entry["repeat"])
    return {"schema_version": REFERENCE_SCHEMA_VERSION, "kind": REFERENCE_KIND, "created_utc": created_utc,
            "tool": {"name": "cclbench", "version": tool_version}, "run_id": os.path.basename(os.path.abspath(run_dir)),
            "identity": run_identity(run_dir, copies, nvidia_driver), "cases": [cases[key] for key in sorted(cases)]}


# A measured reference: at least this many runs (a spread from fewer has too few degrees of freedom: at 4 runs the
# t quantile of the band is 13, at 10 runs 6); `smoke --capture` defaults to CAPTURE_RUNS_DEFAULT.
MIN_CAPTURE_RUNS = 5
CAPTURE_RUNS_DEFAULT = 10
# How long a measured reference is trusted (days; 0: no limit). Its spread was measured over minutes, the smoke has
# no measurement of how a machine drifts over months: after a quarter it is captured again on purpose, and the new
# capture judged against the old before it replaces it (docs/ci.md), so a slow regression is seen, not absorbed.
MAX_AGE_DAYS_DEFAULT = 90
CAPTURE_METHOD = ("smoke --capture: N smoke runs on the idle runner (back to back, or one every capture.every_s seconds so "
                  "that the spread sees the machine's drift over minutes), each with the plan's launches of "
                  "every timed part; a run's value of a case is the geometric mean of its launches' values (each by "
                  "the case's estimator), the case's spread the standard deviation of the runs' ln values, floored by "
                  "the launches' spread within a run and by their samples' own standard error, each over "
                  "sqrt(repeats)")


def _run_key(reference):
    return {(case["point"], case["case_id"]): case for case in reference["cases"]}


def merge_capture(references, created_utc, tool_version, run_id, host, max_age_days, parts, every_s=0.0):
    """The measured reference of N single-run references of one capture (smoke_reference.schema.json 1.2): every
    launch of every run (without its samples), and per case `measured`. Raises CclbenchError when the runs cannot
    make one (a failed launch, other hardware between runs, different cases or repeats)."""
    if len(references) < MIN_CAPTURE_RUNS:
        raise CclbenchError(f"a measured reference needs at least {MIN_CAPTURE_RUNS} runs, got {len(references)}", 2)
    first = references[0]
    keys = sorted(_run_key(first))
    if not keys:
        raise CclbenchError("the capture measured no smoke case (no GPU?): nothing to make a reference of")
    for number, reference in enumerate(references, 1):
        if reference["identity"] != first["identity"]:
            raise CclbenchError(f"capture run {number} was measured on other hardware or software than run 1")
        if sorted(_run_key(reference)) != keys:
            raise CclbenchError(f"capture run {number} measured other cases than run 1")
    cases = []
    repeats_per_run = None
    for key in keys:
        base = _run_key(first)[key]
        merged = {name: base[name] for name in ("point", "case_id", "collective", "bytes", "mode")}
        merged["repeats"] = []
        run_logs, launch_logs, excursions, errors = [], [], [], []
        for number, reference in enumerate(references, 1):
            case = _run_key(reference)[key]
            if case["mode"] != base["mode"]:
                raise CclbenchError(f"capture run {number}: {key[0]} {key[1]} was measured in another mode")
            bad = [entry for entry in case["repeats"] if entry["status"] != "ok" or entry.get("wrong")]
            if bad:
                raise CclbenchError(f"capture run {number}: {key[0]} {key[1]} repeat {bad[0]['repeat']} is not ok "
                                    f"({bad[0].get('reason') or 'wrong data'}): a reference is made of healthy runs only")
            if repeats_per_run is None:
                repeats_per_run = len(case["repeats"])
            if len(case["repeats"]) != repeats_per_run:
                raise CclbenchError(f"capture run {number}: {key[0]} {key[1]} has {len(case['repeats'])} repeats, "
                                    f"run 1 {repeats_per_run}")
            logs = [math.log(entry["time_us"]) for entry in case["repeats"]]
            launch_logs.append(logs)
            run_logs.append(statistics.fmean(logs))
            for entry in case["repeats"]:
                error = sample_se_pct(ESTIMATORS.get(key[0], "gated"), entry.get("samples_us"), entry.get("time_us"))
                if error is not None:
                    errors.append(error)
                launch_excursions = excursions_pct(entry.get("samples_us"))
                excursions += launch_excursions
                kept = {name: value for name, value in entry.items() if name != "samples_us"}
                kept.update(run=number, excursion_pct=max(launch_excursions) if launch_excursions else None)
                merged["repeats"].append(kept)
        merged["measured"] = measured_spread(run_logs, launch_logs, excursions, errors, ESTIMATORS.get(key[0], "gated"))
        cases.append(merged)
    created = [reference.get("created_utc") for reference in references if reference.get("created_utc")]
    return {"schema_version": REFERENCE_SCHEMA_VERSION, "kind": REFERENCE_KIND, "created_utc": created_utc,
            "tool": {"name": "cclbench", "version": tool_version}, "run_id": run_id, "identity": first["identity"],
            "capture": {"runs": len(references), "repeats": repeats_per_run, "first_utc": min(created) if created else None,
                        "last_utc": max(created) if created else None, "host": host, "parts": list(parts),
                        "max_age_days": max_age_days, "every_s": every_s, "method": CAPTURE_METHOD},
            "cases": cases}


def measured_spread(run_logs, launch_logs, excursions, errors, estimator):
    """A case's `measured` from its runs: run_logs[k] = mean ln of run k's launch values, launch_logs[k] = those ln
    values, errors = each launch's sample_se_pct. The spread used (spread_pct) is the run-to-run standard deviation of
    ln values (N - 1 degrees of freedom), floored by what no run can scatter less than, measured inside the runs: the
    spread of launches within a run over sqrt(repeats) (N x (repeats - 1) degrees of freedom), and the launches' own
    sampling error (the root mean square of sample_se_pct) over sqrt(repeats)."""
    runs = len(run_logs)
    repeats = len(launch_logs[0])
    run_spread = statistics.stdev(run_logs) * 100
    dof = runs * (repeats - 1)
    within = sum((value - statistics.fmean(logs)) ** 2 for logs in launch_logs for value in logs)
    launch_spread = math.sqrt(within / dof) * 100 if dof else None
    sample_se = math.sqrt(statistics.fmean([e * e for e in errors])) if errors else None
    floors = {"launches": launch_spread / math.sqrt(repeats) if launch_spread is not None else 0.0,
              "samples": sample_se / math.sqrt(repeats) if sample_se is not None else 0.0}
    floor_from = max(floors, key=floors.get)
    spread_from = "runs" if run_spread >= floors[floor_from] else floor_from
    return {"estimator": estimator, "runs": runs, "repeats": repeats,
            "run_values_us": [math.exp(value) for value in run_logs], "center_us": math.exp(statistics.fmean(run_logs)),
            "run_spread_pct": run_spread, "launch_spread_pct": launch_spread, "launch_dof": dof,
            "sample_se_pct": sample_se, "spread_pct": max(run_spread, floors[floor_from]), "spread_from": spread_from,
            "excursion_max_pct": max(excursions) if excursions else None, "samples": len(excursions)}


def measured_problem(reference):
    """Why a reference cannot judge a smoke with measured bands, or None: it must hold a capture of at least
    MIN_CAPTURE_RUNS runs and every case its measured spread."""
    capture = reference.get("capture")
    if not isinstance(capture, dict):
        return ("it holds one run: its repeats' spread is not a run-to-run spread. Capture a reference on the idle "
                "runner: cclbench smoke --capture 10 --run-id ref (docs/ci.md)")
    runs = capture.get("runs")
    if not isinstance(runs, int) or runs < MIN_CAPTURE_RUNS:
        return f"its capture holds {runs} run(s), fewer than {MIN_CAPTURE_RUNS}"
    for case in reference["cases"]:
        measured = case.get("measured")
        if not isinstance(measured, dict) or not is_finite(measured.get("spread_pct")) or \
                not is_finite(measured.get("center_us")) or measured["center_us"] <= 0 or \
                not isinstance(measured.get("run_values_us"), list) or len(measured["run_values_us"]) != runs:
            return f"case {case.get('point')} {case.get('case_id')} has no measured spread of {runs} runs"
    return None


def reference_age_days(reference, now_utc):
    """Days since the reference's capture ended (its created_utc when it has no capture), or None."""
    stamp = (reference.get("capture") or {}).get("last_utc") or reference.get("created_utc")
    try:
        then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
        now = datetime.datetime.strptime(now_utc, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        return None
    return (now - then).total_seconds() / 86400.0


def reference_problem(document):
    """Why a parsed document is not a smoke reference this cclbench reads (the schema's structure, checked here with
    the standard library so that a bad file is refused with its reason before anything is measured), or None."""
    if not isinstance(document, dict):
        return "it is not a JSON object"
    if document.get("kind") != REFERENCE_KIND:
        return f"its kind is {document.get('kind')!r}, not '{REFERENCE_KIND}'"
    version = document.get("schema_version")
    if not isinstance(version, str) or version.split(".")[0] != REFERENCE_SCHEMA_VERSION.split(".")[0]:
        return f"its schema_version {version!r} is not {REFERENCE_SCHEMA_VERSION.split('.')[0]}.x"
    identity = document.get("identity")
    if not isinstance(identity, dict):
        return "identity is missing or not an object"
    for key, _label in IDENTITY_FIELDS:
        value = identity.get(key, "absent")
        if value == "absent" or not (value is None or isinstance(value, str) or
                                     (key == "gpu_count" and isinstance(value, int) and not isinstance(value, bool))):
            return f"identity.{key} is missing or not a {'count' if key == 'gpu_count' else 'string'} or null"
    cases = document.get("cases")
    if not isinstance(cases, list):
        return "cases is missing or not a list"
    for number, case in enumerate(cases, 1):
        if not isinstance(case, dict):
            return f"case {number} is not an object"
        for key in ("point", "case_id"):
            if not isinstance(case.get(key), str) or not case[key]:
                return f"case {number}: {key} is missing or not a string"
        mode = case.get("mode")
        if not isinstance(mode, dict) or not isinstance(mode.get("backend"), str) or \
                not isinstance(mode.get("nranks"), int) or not isinstance(mode.get("emulated"), bool) or \
                not isinstance(mode.get("graph_launches"), int):
            return f"case {number} ({case['case_id']}): mode needs backend, nranks, emulated and graph_launches"
        repeats = case.get("repeats")
        if not isinstance(repeats, list) or not repeats:
            return f"case {number} ({case['case_id']}): repeats is missing or empty"
        for entry in repeats:
            if not isinstance(entry, dict) or not isinstance(entry.get("status"), str) or \
                    not (entry.get("time_us") is None or (is_finite(entry["time_us"]) and entry["time_us"] > 0)) or \
                    not isinstance(entry.get("repeat"), int):
                return f"case {number} ({case['case_id']}): a repeat needs repeat, status and time_us (> 0 or null)"
            if entry["status"] == "ok" and entry.get("time_us") is None:
                return f"case {number} ({case['case_id']}): an ok repeat without time_us"
    return None


def read_reference(path):
    """(reference, where it came from) of a reference file, or of a run directory: its smoke_reference.json, else
    one built from its files. A file that is not a reference is an error (exit 2) naming what is wrong."""
    if os.path.isdir(path):
        stored = os.path.join(path, REFERENCE_FILE)
        if not os.path.exists(stored):
            if not os.path.exists(os.path.join(path, "run_manifest.json")):
                raise CclbenchError(f"{path} is neither a run directory nor holds {REFERENCE_FILE}", 2)
            return reference_from_run(path, None, None), f"{path} (built from its files)"
        path = stored
    elif not os.path.exists(path):
        raise CclbenchError(f"smoke reference {path} does not exist", 2)
    try:
        document = read_json(path, "smoke reference")
    except CclbenchError as error:
        raise CclbenchError(str(error), 2) from None
    problem = reference_problem(document)
    if problem:
        raise CclbenchError(f"{path} is not a smoke reference (results_schema/smoke_reference.schema.json): {problem}", 2)
    if document.get("injected_slowdown"):
        raise CclbenchError(f"{path} was measured with the slowdown test knob (injected_slowdown): never a reference", 2)
    return document, path


def reference_groups(reference):
    """{(point, case_id): [one case record per repeat]} of a reference, in the shape rules/compare.judge_runs reads
    (model/records.py): the repeat's time as time_us.mean/p50 and as gated_time_us, so that its bandwidth time is it."""
    groups = {}
    for case in reference["cases"]:
        mode = case["mode"]
        records = []
        for entry in case["repeats"]:
            time_us = entry.get("time_us")
            record = {"point": f"{case['point']}.rep{entry['repeat']}", "case_id": case["case_id"],
                      "collective": case.get("collective"), "requested_bytes": case.get("bytes"),
                      "backend": mode["backend"], "nranks": mode["nranks"], "emulated": mode["emulated"],
                      "graph_launches": mode["graph_launches"], "status": entry["status"], "reason": entry.get("reason"),
                      "wrong": entry.get("wrong"),
                      "time_us": {"mean": time_us, "p50": time_us} if time_us is not None else None,
                      "gated_time_us": time_us}
            records.append(record)
        groups[(case["point"], case["case_id"])] = records
    return groups


def identity_differences(identity_a, identity_b):
    """[(label, A's value, B's value)] of the identity fields both sides know and that differ. A value one side does
    not know (null: no GPU, a run from before the reference existed, a driver version the container hides) is no
    evidence of other hardware; a run without a GPU has no smoke case to compare anyway."""
    return [(label, identity_a.get(key), identity_b.get(key)) for key, label in IDENTITY_FIELDS
            if identity_a.get(key) is not None and identity_b.get(key) is not None
            and identity_a.get(key) != identity_b.get(key)]


def read_nvidia_driver(sysfs_root="/sys"):
    """The loaded NVIDIA kernel driver's version (/sys/module/nvidia/version), or None where there is none."""
    try:
        with open(os.path.join(sysfs_root, "module", "nvidia", "version"), encoding="ascii", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None
