"""The smoke reference: the smoke's comparable cases of one run and the hardware and software they were measured on,
as one small file a CI can keep in its repository (results_schema/smoke_reference.schema.json).

`baseline` and `smoke` write RUN_DIR/smoke_reference.json; `smoke --against` and `compare` read a reference from
that file, from a file kept anywhere, or build it from a run directory's own files (cases.jsonl's smoke.* points,
smoke/smoke.copy.repN.json, the tools' manifests). A case of the reference is one measurement, a list of repeats;
the rules see each repeat as a case record (reference_groups), so the noise rule of rules/noise.py judges it as any
other case.
"""

import glob
import os
import re

from ..base.errors import CclbenchError
from ..base.files import read_json
from ..base.numbers import is_finite, positive
from ..model.records import base_point_of, bandwidth_time_us, cases_path, latest_by_case, load_cases, was_skipped

REFERENCE_FILE = "smoke_reference.json"
REFERENCE_KIND = "smoke_reference"
REFERENCE_SCHEMA_VERSION = "1.0.0"
# The smoke's points (plan/smoke_cases.py launches them): their records are the reference's cases.
SMOKE_POINT_PREFIX = "smoke."
SMOKE_COPY_POINT = "smoke.copy"
SMOKE_COPY_DIR = "smoke"
# The hardware and software a reference was measured on; a reference whose values differ from the run judged
# against it is refused, or compared with a warning (--other-hardware).
IDENTITY_FIELDS = (("gpu_model", "GPU model"), ("gpu_count", "GPU count"), ("nvidia_driver", "NVIDIA driver"),
                   ("cuda_driver", "CUDA driver"), ("cuda_runtime", "CUDA runtime"), ("nccl", "NCCL version"))
_REPEAT_FILE_RE = re.compile(r"^smoke\.copy\.rep(\d+)\.json$")


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
        time_us = positive(stats.get("median")) if ok else None
        found[case_id] = {"status": result.get("status") if isinstance(result.get("status"), str) else "error",
                          "reason": None if ok else (result.get("reason") or "no reason given"),
                          "time_us": time_us, "bandwidth_gbps": positive(bandwidth.get("median")) if ok else None,
                          "wrong": verification.get("wrong_words") if is_finite(verification.get("wrong_words")) else None,
                          "bytes": result.get("bytes") if isinstance(result.get("bytes"), int) else None}
        if ok and time_us is None:
            found[case_id].update(status="error", reason="time_us.median is missing")
    return found


def _coll_repeat(record):
    """A repeat entry of one coll_perf case record: its bandwidth time (gated_time_us where there is one)."""
    ok = record.get("status") == "ok"
    time_us = bandwidth_time_us(record) if ok else None
    return {"status": record.get("status") or "error", "reason": None if ok else (record.get("reason") or None),
            "time_us": time_us, "bandwidth_gbps": positive(record.get("algbw_gbps")) if ok else None,
            "wrong": record.get("wrong") if isinstance(record.get("wrong"), int) else None,
            "bytes": record.get("requested_bytes")}


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
            case["repeats"].append(dict(_coll_repeat(record), repeat=repeat))
    for case in cases.values():
        case["repeats"].sort(key=lambda entry: entry["repeat"])
    return {"schema_version": REFERENCE_SCHEMA_VERSION, "kind": REFERENCE_KIND, "created_utc": created_utc,
            "tool": {"name": "cclbench", "version": tool_version}, "run_id": os.path.basename(os.path.abspath(run_dir)),
            "identity": run_identity(run_dir, copies, nvidia_driver), "cases": [cases[key] for key in sorted(cases)]}


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
