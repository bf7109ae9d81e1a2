"""`cclbench doctor`: the bring-up preflight. Reads sysfs/procfs (and, live, NVML and the kernel
log) on each host and says, check by check, what would make a benchmark slow or wrong.

A host run produces one document (doctor.schema.json, "scope": "host"); several hosts' documents
merge into one ("scope": "cluster") with the cross-host `versions` comparison added. The checks
themselves are pure functions in model/doctor_checks.py (the node model and the checks by what they check).
"""

import ctypes
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time

from ..base.environment import exported_env
from ..base.errors import CclbenchError, UsageError
from ..base.files import read_json, write_json_atomic
from ..base.locations import resolve_program
from ..base.values import split_mpirun_args, utc_now
from ..base.version import TOOL_VERSION
from ..model.doctor_checks import (DOCTOR_SCHEMA_VERSION, JSON_LINE_PREFIX, Node, Reader, STATUSES, check_acs_iommu,
                                   check_gdr_module, check_gpu_state, check_nccl_env, check_netdev_mtu,
                                   check_numa_affinity, check_pcie_link, check_rdma_port, check_roce_gid,
                                   check_versions_local, compare_versions, host_versions, link_rates,
                                   path_mtu_targets, rail_selection, result)
from ..model.run_dir import PATH_CHECKS_FILE
from ..execute.path_mtu import (host_rails, interface_addresses, parse_probe_spec, probe_hosts, probed_targets,
                                 run_probes)
from ..model.launcher import choose_launcher, command, launch_error_lines, launch_rank, mpirun_version
from ..model.hosts import check_resolvable, local_hostname, parse_host_list, parse_hostfile, validate_host
from ..plan.doctor_point import cclbench_script, doctor_argv
from ..render.doctor import render_table


KMSG_MAX_BYTES = 16 << 20
NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE = 0, 7


# --- live probes (never used for a fixture root) --------------------------------------------------

class _PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


def nvml_snapshot(library="libnvidia-ml.so.1"):
    """{"gpus": [...], "driver", "cuda_driver"} from NVML loaded with dlopen, or {"gpus": None, "reason"}.
    A value NVML does not support on this GPU is None."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError as error:
        return {"gpus": None, "reason": f"{library} cannot be loaded ({error}): no NVIDIA driver here"}
    code = nvml.nvmlInit_v2()
    if code != NVML_SUCCESS:
        return {"gpus": None, "reason": f"nvmlInit_v2 returned {code} (driver not loaded or no GPU)"}
    try:
        snapshot = {"gpus": [], "driver": None, "cuda_driver": None}
        text = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(text, 96) == NVML_SUCCESS:
            snapshot["driver"] = text.value.decode("ascii", "replace")
        cuda = ctypes.c_int()
        if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == NVML_SUCCESS:
            snapshot["cuda_driver"] = f"{cuda.value // 1000}.{cuda.value % 1000 // 10}"
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != NVML_SUCCESS:
            return {"gpus": None, "reason": "nvmlDeviceGetCount_v2 failed"}
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != NVML_SUCCESS:
                continue
            snapshot["gpus"].append(_nvml_gpu(nvml, index, handle))
        return snapshot
    finally:
        nvml.nvmlShutdown()


def _nvml_value(function, handle, *args, ctype=ctypes.c_uint, accept=(NVML_SUCCESS,)):
    value = ctype()
    try:
        code = function(handle, *args, ctypes.byref(value))
    except (AttributeError, ctypes.ArgumentError):
        return None
    return value.value if code in accept else None


def _nvml_gpu(nvml, index, handle):
    info = _PciInfo()
    bus_id = None
    if nvml.nvmlDeviceGetPciInfo_v3(handle, ctypes.byref(info)) == NVML_SUCCESS:
        bus_id = info.busId.decode("ascii", "replace")
    gpu = {"index": index, "bus_id": bus_id,
           "persistence_mode": _nvml_value(nvml.nvmlDeviceGetPersistenceMode, handle, ctype=ctypes.c_int),
           # error type 1 = uncorrected; counter 0 = volatile (since boot), 1 = aggregate (lifetime)
           "ecc_uncorrected_volatile": _nvml_value(nvml.nvmlDeviceGetTotalEccErrors, handle, 1, 0,
                                                   ctype=ctypes.c_ulonglong),
           "ecc_uncorrected_aggregate": _nvml_value(nvml.nvmlDeviceGetTotalEccErrors, handle, 1, 1,
                                                    ctype=ctypes.c_ulonglong),
           "retired_pages_pending": _nvml_value(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle,
                                                ctype=ctypes.c_int),
           "throttle_reasons": _nvml_value(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle,
                                           ctype=ctypes.c_ulonglong)}
    pages = ctypes.c_uint(0)
    try:
        code = nvml.nvmlDeviceGetRetiredPages(handle, 1, ctypes.byref(pages), None)  # cause 1: double-bit ECC
        gpu["retired_pages_dbe"] = pages.value if code in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE) else None
    except AttributeError:
        gpu["retired_pages_dbe"] = None
    corrected, uncorrected, pending, failure = (ctypes.c_uint() for _ in range(4))
    try:
        code = nvml.nvmlDeviceGetRemappedRows(handle, ctypes.byref(corrected), ctypes.byref(uncorrected),
                                              ctypes.byref(pending), ctypes.byref(failure))
    except AttributeError:
        code = -1
    gpu["remap_pending"] = pending.value if code == NVML_SUCCESS else None
    gpu["remap_failure"] = failure.value if code == NVML_SUCCESS else None
    return gpu


def read_kmsg(path="/dev/kmsg"):
    """{"text"} of the kernel ring buffer, or {"text": None, "reason"}. /dev/kmsg hands out one record
    per read and would block at the end, so it is read non-blocking until EAGAIN."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        return {"text": None, "reason": f"cannot open {path}: {error.strerror} (run as root to see XIDs)"}
    chunks, total = [], 0
    try:
        while total < KMSG_MAX_BYTES:
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EPIPE:  # records overwritten while reading: skip ahead
                    continue
                return {"text": None, "reason": f"cannot read {path}: {error.strerror}"}
            if not data:
                break
            chunks.append(data)
            total += len(data)
    finally:
        os.close(fd)
    return {"text": b"".join(chunks).decode("utf-8", "replace"), "reason": None}


def library_version(name, symbol, decode):
    try:
        library = ctypes.CDLL(name)
        function = getattr(library, symbol)
    except (OSError, AttributeError) as error:
        return None, f"{name}: {error}"
    value = ctypes.c_int()
    if function(ctypes.byref(value)) != 0:
        return None, f"{symbol} failed"
    return decode(value.value), None


def nccl_version_text(code):
    """ncclGetVersion's code: major*10000 + minor*100 + patch since 2.9 (major*1000 + minor*100 + patch before)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def mpi_version():
    tool = shutil.which("mpirun")
    if not tool:
        return None, "mpirun is not on PATH"
    text, problem = mpirun_version(tool)
    if text is None:
        return None, f"mpirun --version failed: {problem}"
    lines = text.strip().splitlines()
    if not lines:
        return None, "mpirun --version printed nothing"
    match = re.search(r"\(Open MPI\) (\S+)", lines[0])
    return (match.group(1) if match else lines[0].strip()[:80]), None


class LiveProbes:
    """What only the running host can tell: NVML, the kernel log, NCCL's and Open MPI's versions."""

    live = True

    def gather(self):
        snapshot = nvml_snapshot()
        nccl, nccl_why = library_version("libnccl.so.2", "ncclGetVersion", nccl_version_text)
        mpi, mpi_why = mpi_version()
        versions = {"nvidia_driver": snapshot.get("driver"), "cuda_driver": snapshot.get("cuda_driver"),
                    "nccl": nccl, "open_mpi": mpi}
        reasons = {"cuda_driver": snapshot.get("reason"), "nvidia_driver": snapshot.get("reason"),
                   "nccl": nccl_why, "open_mpi": mpi_why}
        return snapshot, read_kmsg(), versions, reasons

    @staticmethod
    def addresses():
        return interface_addresses()


class FixtureProbes:
    """For a fixture root: nothing live is consulted (it would describe this machine, not the fixture)."""

    live = False

    def __init__(self, nvml=None, kmsg=None, versions=None):
        self.nvml, self.kmsg, self.versions = nvml, kmsg, versions or {}

    def gather(self):
        why = "fixture root: live-only (NVML) not consulted"
        reasons = {key: "fixture root: live-only, not read" for key in ("cuda_driver", "nccl", "open_mpi",
                                                                         "nvidia_driver")}
        return (self.nvml or {"gpus": None, "reason": why},
                self.kmsg or {"text": None, "reason": "fixture root: the live kernel log is not read"},
                dict(self.versions), reasons)

    @staticmethod
    def addresses():
        return None


# --- one host -------------------------------------------------------------------------------------

def status_counts(checks):
    counts = {status: sum(1 for check in checks if check["status"] == status) for status in STATUSES}
    overall = "fail" if counts["fail"] else ("warn" if counts["warn"] else "pass")
    return counts, overall


def run_host(sysfs_root, procfs_root, env, probes, host):
    """The host document: every check's results, with the host filled in, plus the versions found."""
    node = Node(Reader(sysfs_root, procfs_root))
    snapshot, kmsg, live_versions, reasons = probes.gather()
    versions = host_versions(node, live_versions)
    groups = [check_pcie_link(node), check_gdr_module(node), check_rdma_port(node, env), check_roce_gid(node, env),
              check_netdev_mtu(node, env), check_numa_affinity(node), check_acs_iommu(node),
              check_versions_local(node, versions, reasons), check_nccl_env(node, env),
              check_gpu_state(node, snapshot, kmsg)]
    checks = []
    for group in groups:
        for item in group:
            checks.append(dict(item, host=host))
    counts, overall = status_counts(checks)
    rails = rail_selection(node, env, probes.addresses())
    return {"schema_version": DOCTOR_SCHEMA_VERSION, "kind": "doctor", "scope": "host",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": utc_now(), "hosts": [host],
            "roots": {"sysfs": os.path.abspath(sysfs_root), "procfs": os.path.abspath(procfs_root),
                      "live": probes.live},
            "status": overall, "summary": counts, "versions": {host: versions}, "rails": {host: rails},
            "links": {host: link_rates(node)}, "checks": checks}


def merge(host_documents, planned_hosts=None, launch_failures=None, cluster_checks=()):
    """One cluster document from {host: host document or None}; a planned host without a document is a
    `host_report` fail, in the launcher's own words where launch_failures ({host: detail}) has them;
    versions are compared across the hosts that reported; cluster_checks (the path MTU step's results)
    are added as they are."""
    hosts = list(planned_hosts or sorted(host_documents))
    checks, versions, roots, rails, links = [], {}, None, {}, {}
    for host in hosts:
        document = host_documents.get(host)
        if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
            detail = (launch_failures or {}).get(host) or (f"no doctor result from {host}: see run.log; is "
                                                           "scripts/cclbench at the same path there?")
            checks.append(dict(result("host_report", "fail", host, "host", detail), host=host))
            versions[host] = None
            continue
        roots = roots or document.get("roots")
        for check in document["checks"]:
            if isinstance(check, dict):
                checks.append(dict(check, host=host))
        found = document.get("versions") or {}
        versions[host] = next(iter(found.values()), None) if found else None
        found = document.get("rails") or {}
        rails[host] = next(iter(found.values()), None) if isinstance(found, dict) and found else None
        found = document.get("links") or {}
        links[host] = next(iter(found.values()), None) if isinstance(found, dict) and found else None
    reported = {host: value for host, value in versions.items() if isinstance(value, dict)}
    for item in compare_versions(reported):
        checks.append(dict(item, host="*"))
    checks += [dict(item) for item in cluster_checks]
    counts, overall = status_counts(checks)
    return {"schema_version": DOCTOR_SCHEMA_VERSION, "kind": "doctor", "scope": "cluster",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": utc_now(), "hosts": hosts,
            "roots": roots or {"sysfs": None, "procfs": None, "live": None},
            "status": overall, "summary": counts, "versions": versions, "rails": rails, "links": links,
            "checks": checks}


# --- the command ----------------------------------------------------------------------------------

def probes_for(sysfs_root, procfs_root):
    live = os.path.realpath(sysfs_root) == "/sys" and os.path.realpath(procfs_root) == "/proc"
    return LiveProbes() if live else FixtureProbes()


def host_name(explicit=None):
    return explicit or local_hostname()


def cmd_doctor(args, hosts):
    """hosts: [] for this host only. Returns the exit status: 0 nothing failed, 1 something failed."""
    sysfs_root = args.sysfs_root or "/sys"
    procfs_root = args.procfs_root or "/proc"
    if args.probe_path_mtu:
        specs = [parse_probe_spec(text) for text in args.probe_path_mtu]
        sys.stdout.write(run_probes(specs) + "\n")
        sys.stdout.flush()
        return 0
    if args.split_points:
        return run_split_point(args, sysfs_root, procfs_root)
    if args.host_only or not hosts:
        document = run_host(sysfs_root, procfs_root, dict(os.environ), probes_for(sysfs_root, procfs_root),
                            host_name(args.as_host))
        if not args.host_only:
            document = merge({document["hosts"][0]: document})
    else:
        document = gather_hosts(args, hosts)
    if args.json:
        write_json_atomic(args.json, document)
    if args.emit_json_line:
        sys.stdout.write(JSON_LINE_PREFIX + json.dumps(document, separators=(",", ":")) + "\n")
    else:
        sys.stdout.write(render_table(document))
    sys.stdout.flush()
    return 1 if document["status"] == "fail" else 0


def split_point(path, environ):
    """(host, json path) of this rank's entry in a --split-points file; UsageError naming what is wrong."""
    rank = launch_rank(environ)
    if rank is None:
        raise UsageError("--split-points: no launch rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, "
                         "SLURM_PROCID or PMI_RANK): start it with mpirun or srun")
    entries = read_json(path, "--split-points")
    if not isinstance(entries, list) or rank >= len(entries) or not isinstance(entries[rank], dict) or \
            not isinstance(entries[rank].get("point"), str) or not isinstance(entries[rank].get("json"), str):
        raise UsageError(f"--split-points {path}: no {{\"point\": HOST, \"json\": PATH}} entry for rank {rank}")
    validate_host(entries[rank]["point"], "--split-points point")
    return entries[rank]["point"], entries[rank]["json"]


def run_split_point(args, sysfs_root, procfs_root):
    """One rank of a doctor launch over many hosts: its host's checks into its entry's JSON. Exit 0 once written
    (its status is in the document): a rank that exits non-zero ends every other rank of the launch."""
    host, path = split_point(args.split_points, os.environ)
    document = run_host(sysfs_root, procfs_root, dict(os.environ), probes_for(sysfs_root, procfs_root), host)
    write_json_atomic(path, document)
    return 0


def gather_hosts(args, hosts):
    """One rank per host, started as baseline starts its ranks (`mpirun -np 1 --host H`, or `srun -n 1
    --nodelist H` inside a Slurm allocation: model/launcher), each printing its document as one stdout line
    (no shared filesystem needed), merged here."""
    mpirun = resolve_program(args.mpirun, "mpirun")
    exported, exported_names = exported_env()
    inputs = {"mpirun": mpirun, "mpirun_args": split_mpirun_args(args.mpirun_args), "as_root": os.geteuid() == 0,
              "exported_env": exported, "exported_env_names": exported_names,
              "launcher": choose_launcher(args.launcher, mpirun,
                                          srun_args=split_mpirun_args(args.srun_args, "--srun-args"))}
    script = cclbench_script()
    documents, failures = {}, {}
    name = inputs["launcher"]["name"]
    for host in hosts:
        argv = command(inputs, 1, host) + doctor_argv(script, args.sysfs_root, args.procfs_root, host, emit_line=True)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as error:
            print(f"cclbench: doctor: {host}: {error}", file=sys.stderr)
            failures[host] = f"no doctor result from {host}: {name} did not finish ({error})"
            continue
        for line in out.stdout.splitlines():
            if line.startswith(JSON_LINE_PREFIX):
                try:
                    documents[host] = json.loads(line[len(JSON_LINE_PREFIX):])
                except ValueError:
                    pass
        if host not in documents:
            words = " / ".join(line[:200] for line in launch_error_lines((out.stderr or "") + "\n" + (out.stdout or "")))
            failures[host] = (f"no doctor result from {host}: {name} exited {out.returncode}: "
                              + (words or "it printed nothing"))
            print(f"cclbench: doctor: {failures[host]}", file=sys.stderr)
    return merge(documents, hosts, failures, path_mtu_step(inputs, documents, script, sysfs_root=args.sysfs_root))


def path_mtu_step(inputs, documents, script, sysfs_root=None, log=None):
    """The path MTU check between the hosts that reported (execute/path_mtu.py); nothing for one host or a
    fixture root (no live addresses)."""
    if len(documents) < 2 or sysfs_root:
        return []
    return probe_hosts(inputs, documents, script, log=log)


def run_doctor_command(args):
    if args.hosts and args.hostfile:
        raise UsageError("give either --hosts or --hostfile, not both")
    if args.as_host:
        validate_host(args.as_host, "--as-host")
    hosts = parse_host_list(args.hosts) if args.hosts else \
        ([host for host, _ in parse_hostfile(args.hostfile)] if args.hostfile else [])
    for option, value in (("--sysfs-root", args.sysfs_root), ("--procfs-root", args.procfs_root)):
        if value is not None and not value.strip():
            raise UsageError(f"{option}: empty path")
    if hosts and not args.host_only:
        check_resolvable(hosts)  # as baseline does: an unknown name is the user's typo, not a host to launch on
    return cmd_doctor(args, hosts)


# --- run directory (baseline and report) ----------------------------------------------------------

PATH_MTU_FILE = "path_mtu.json"


def path_mtu_run_directory(run_dir, hosts, inputs, log=None):
    """The baseline's second doctor step, once every host's doctor/<host>.json is in: the path MTU probes
    (one launch per host, as the doctor point's launcher starts ranks) into doctor/path_mtu.json, which
    merge_run_directory adds to doctor.json. Returns the path_mtu results."""
    documents = {}
    for host in hosts:
        try:
            documents[host] = read_json(os.path.join(run_dir, "doctor", f"{host}.json"), "doctor result")
        except CclbenchError:
            documents[host] = None
    checks = path_mtu_step(inputs, documents, cclbench_script(), sysfs_root=inputs.get("sysfs_root"), log=log)
    write_json_atomic(os.path.join(run_dir, "doctor", PATH_MTU_FILE), {"kind": "doctor_path_mtu", "checks": checks})
    return checks


# The run's own path check (recheck_paths): each host's probe launch is stopped past RECHECK_START_S (the launcher
# reaching the host) plus RECHECK_PER_TARGET_S for each path it probes (a dead path costs 2 s: two echoes at the MTU
# and two at 576 bytes, 0.5 s each; a narrow one its bisection, about 7 s). A host whose launch does not end by then
# returned no probe result: the launcher cannot reach it.
RECHECK_START_S = 30
RECHECK_PER_TARGET_S = 7
PATH_CHECKS_SCHEMA_VERSION = "1.0.0"


def recheck_paths(run_dir, hosts, inputs, after, why=None, invocation=1, log=None, peers=None):
    """The doctor's path check again in the middle of a run, after the launch `after` across `hosts` failed as a
    dead path fails (rules/dead_paths.may_be_a_path): the probes between those hosts (execute/path_mtu.probe_hosts,
    from their doctor/<host>.json rails), bounded to seconds, appended to doctor/path_checks.json. Returns the entry
    ({"after", "why", "invocation", "started_utc", "elapsed_s", "bound_s", "hosts", "checks"}), or None when nothing
    can be probed (fewer than two hosts with a doctor document, a fixture sysfs root, no address to probe). peers:
    {host: the peers it probes} where not every pair of hosts (execute/path_mtu.probed_targets)."""
    documents = {}
    for host in hosts:
        try:
            documents[host] = read_json(os.path.join(run_dir, "doctor", f"{host}.json"), "doctor result")
        except CclbenchError:
            continue
    if len(documents) < 2 or inputs.get("sysfs_root"):
        return None
    targets, _ = path_mtu_targets({host: host_rails(document, host) for host, document in documents.items()})
    most = max((len(wanted) for wanted in probed_targets(targets, peers).values()), default=0)
    if not most:
        return None
    bound = RECHECK_START_S + RECHECK_PER_TARGET_S * most
    started, started_utc = time.monotonic(), utc_now()
    checks = probe_hosts(inputs, documents, cclbench_script(), timeout=bound, log=log, peers=peers)
    entry = {"after": after, "why": why, "invocation": invocation, "started_utc": started_utc,
             "elapsed_s": round(time.monotonic() - started, 3), "bound_s": bound, "hosts": list(documents),
             "checks": [check for check in checks if check.get("subject_kind") in ("path", "cluster")]}
    path = os.path.join(run_dir, PATH_CHECKS_FILE)
    document = None
    if os.path.exists(path):
        try:
            document = read_json(path, "path checks")
        except CclbenchError:
            document = None  # unreadable: rewritten with this check (run.log keeps every probe's output)
    if not isinstance(document, dict) or not isinstance(document.get("checks_after"), list):
        document = {"schema_version": PATH_CHECKS_SCHEMA_VERSION, "kind": "path_checks", "checks_after": []}
    document["checks_after"].append(entry)
    write_json_atomic(path, document)
    return entry


def merge_run_directory(run_dir, hosts, launch_failures=None):
    """doctor/<host>.json of a run (and doctor/path_mtu.json when the path step ran) -> doctor.json (the
    merged document); returns it, or None when no host has reported yet. launch_failures: {host: detail}
    of doctor launches that failed (merge)."""
    found = {}
    for host in hosts:
        path = os.path.join(run_dir, "doctor", f"{host}.json")
        if os.path.exists(path):
            try:
                found[host] = read_json(path, "doctor result")
            except CclbenchError:
                found[host] = None
    if not found:
        return None
    extra = []
    path = os.path.join(run_dir, "doctor", PATH_MTU_FILE)
    if os.path.exists(path):
        try:
            stored = read_json(path, "path MTU result")
            extra = [c for c in stored.get("checks") or [] if isinstance(c, dict)] if isinstance(stored, dict) else []
        except CclbenchError:
            extra = []
    document = merge(found, hosts, launch_failures, extra)
    write_json_atomic(os.path.join(run_dir, "doctor.json"), document)
    return document
