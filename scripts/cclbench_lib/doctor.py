"""`cclbench doctor`: the bring-up preflight. Reads sysfs/procfs (and, live, NVML and the kernel
log) on each host and says, check by check, what would make a benchmark slow or wrong.

A host run produces one document (doctor.schema.json, "scope": "host"); several hosts' documents
merge into one ("scope": "cluster") with the cross-host `versions` comparison added. The checks
themselves are pure functions in doctor_checks.py.
"""
import ctypes
import errno
import json
import os
import shutil
import subprocess
import sys

from . import TOOL_VERSION
from .common import CclbenchError, UsageError, read_json, utc_now, write_json_atomic
from .doctor_checks import (Node, Reader, check_acs_iommu, check_gdr_module, check_gpu_state, check_netdev_mtu,
                            check_nccl_env, check_numa_affinity, check_pcie_link, check_rdma_port, check_roce_gid,
                            check_versions_local, compare_versions, host_versions, result)

DOCTOR_SCHEMA_VERSION = "1.0.0"
STATUSES = ("pass", "warn", "fail", "skip")
JSON_LINE_PREFIX = "CCLBENCH_DOCTOR_JSON "
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
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"mpirun --version failed: {error}"
    lines = (out.stdout or "").strip().splitlines()
    if out.returncode != 0 or not lines:
        return None, "mpirun --version printed nothing"
    import re
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


# --- one host -------------------------------------------------------------------------------------

def summarize(checks):
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
    counts, overall = summarize(checks)
    return {"schema_version": DOCTOR_SCHEMA_VERSION, "kind": "doctor", "scope": "host",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": utc_now(), "hosts": [host],
            "roots": {"sysfs": os.path.abspath(sysfs_root), "procfs": os.path.abspath(procfs_root),
                      "live": probes.live},
            "status": overall, "summary": counts, "versions": {host: versions}, "checks": checks}


def merge(host_documents, planned_hosts=None):
    """One cluster document from {host: host document or None}; a planned host without a document is a
    `host_report` fail; versions are compared across the hosts that reported."""
    hosts = list(planned_hosts or sorted(host_documents))
    checks, versions, roots = [], {}, None
    for host in hosts:
        document = host_documents.get(host)
        if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
            checks.append(dict(result("host_report", "fail", host, "host",
                                      f"no doctor result from {host}: see run.log; is scripts/cclbench at the same "
                                      "path there?"), host=host))
            versions[host] = None
            continue
        roots = roots or document.get("roots")
        for check in document["checks"]:
            if isinstance(check, dict):
                checks.append(dict(check, host=host))
        found = document.get("versions") or {}
        versions[host] = next(iter(found.values()), None) if found else None
    reported = {host: value for host, value in versions.items() if isinstance(value, dict)}
    for item in compare_versions(reported):
        checks.append(dict(item, host="*"))
    counts, overall = summarize(checks)
    return {"schema_version": DOCTOR_SCHEMA_VERSION, "kind": "doctor", "scope": "cluster",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": utc_now(), "hosts": hosts,
            "roots": roots or {"sysfs": None, "procfs": None, "live": None},
            "status": overall, "summary": counts, "versions": versions, "checks": checks}


# --- output ---------------------------------------------------------------------------------------

def render_table(document):
    rows = [("host", "check", "status", "subject", "detail")]
    for check in document["checks"]:
        rows.append((check["host"], check["id"], check["status"], check["subject"], check["detail"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    counts = document["summary"]
    lines.append(f"doctor: {document['status']} ({counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, "
                 f"{counts['skip']} skip) on {', '.join(document['hosts'])}")
    return "\n".join(lines) + "\n"


# --- the command ----------------------------------------------------------------------------------

def probes_for(sysfs_root, procfs_root):
    live = os.path.realpath(sysfs_root) == "/sys" and os.path.realpath(procfs_root) == "/proc"
    return LiveProbes() if live else FixtureProbes()


def host_name(explicit=None):
    from .hosts import local_hostname
    return explicit or local_hostname()


def cclbench_script():
    """This cclbench's entry point, for launching it on other hosts: bin/cclbench of an installation,
    scripts/cclbench in a checkout."""
    from . import locations
    if locations.installed():
        return os.path.join(locations.bin_dir(), "cclbench")
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cclbench")


def doctor_argv(script, sysfs_root, procfs_root, host, json_path=None, emit_line=False):
    argv = [script, "doctor", "--host-only", "--as-host", host]
    if sysfs_root:
        argv += ["--sysfs-root", sysfs_root]
    if procfs_root:
        argv += ["--procfs-root", procfs_root]
    if json_path:
        argv += ["--json", json_path]
    if emit_line:
        argv.append("--emit-json-line")
    return argv


def cmd_doctor(args, hosts):
    """hosts: [] for this host only. Returns the exit status: 0 nothing failed, 1 something failed."""
    sysfs_root = args.sysfs_root or "/sys"
    procfs_root = args.procfs_root or "/proc"
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


def gather_hosts(args, hosts):
    """One `mpirun -np 1 --host H` per host, each printing its document as one stdout line (no shared
    filesystem needed), merged here."""
    from .cli import split_mpirun_args
    from .runner import resolve_program
    mpirun = resolve_program(args.mpirun, "mpirun")
    extra = split_mpirun_args(args.mpirun_args)
    if os.geteuid() == 0 and "--allow-run-as-root" not in extra:
        extra = ["--allow-run-as-root"] + extra
    script = cclbench_script()
    documents = {}
    for host in hosts:
        argv = [mpirun] + extra + ["-np", "1", "--host", host] + doctor_argv(
            script, args.sysfs_root, args.procfs_root, host, emit_line=True)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as error:
            print(f"cclbench: doctor: {host}: {error}", file=sys.stderr)
            continue
        for line in out.stdout.splitlines():
            if line.startswith(JSON_LINE_PREFIX):
                try:
                    documents[host] = json.loads(line[len(JSON_LINE_PREFIX):])
                except ValueError:
                    pass
        if host not in documents:
            tail = (out.stderr or out.stdout or "").strip().splitlines()[-1:] or ["no output"]
            print(f"cclbench: doctor: {host}: no result (exit {out.returncode}: {tail[0][:200]})", file=sys.stderr)
    return merge(documents, hosts)


def add_doctor_parser(sub):
    doctor = sub.add_parser("doctor", help="preflight: PCIe links, GPUDirect RDMA, rails, GIDs, MTU, NUMA, ACS/IOMMU, "
                            "versions, NCCL env, GPU health (exit 1 when a check fails)")
    doctor.add_argument("--hosts", help="comma-separated hosts: one mpirun -np 1 per host, versions compared")
    doctor.add_argument("--hostfile", help="Open MPI hostfile (host names only are used)")
    doctor.add_argument("--sysfs-root", help="read this directory instead of /sys (fixtures)")
    doctor.add_argument("--procfs-root", help="read this directory instead of /proc (fixtures)")
    doctor.add_argument("--json", help="also write the result as JSON (doctor.schema.json)")
    doctor.add_argument("--as-host", metavar="NAME", help="the name to report for this host (default: its hostname)")
    doctor.add_argument("--mpirun", default="mpirun", help="launcher for --hosts (default: mpirun on PATH)")
    doctor.add_argument("--mpirun-args", action="append", default=[], metavar="ARGS",
                        help="extra launcher arguments for --hosts (= form, repeatable)")
    # Internal: the per-host run that --hosts and baseline launch.
    doctor.add_argument("--host-only", action="store_true", help=argparse_suppress())

    doctor.add_argument("--emit-json-line", action="store_true", help=argparse_suppress())
    return doctor


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


def run_doctor_command(args):
    from .hosts import parse_host_list, parse_hostfile, validate_host
    if args.hosts and args.hostfile:
        raise UsageError("give either --hosts or --hostfile, not both")
    if args.as_host:
        validate_host(args.as_host, "--as-host")
    hosts = parse_host_list(args.hosts) if args.hosts else \
        ([host for host, _ in parse_hostfile(args.hostfile)] if args.hostfile else [])
    for option, value in (("--sysfs-root", args.sysfs_root), ("--procfs-root", args.procfs_root)):
        if value is not None and not value.strip():
            raise UsageError(f"{option}: empty path")
    return cmd_doctor(args, hosts)


# --- run directory (baseline and report) ----------------------------------------------------------

def merge_run_directory(run_dir, hosts):
    """doctor/<host>.json of a run -> doctor.json (the merged document); returns it, or None when no
    host has reported yet."""
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
    document = merge(found, hosts)
    write_json_atomic(os.path.join(run_dir, "doctor.json"), document)
    return document


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


def doctor_anomalies(run_dir):
    """(kind, where, detail) rows for the report's anomaly table: one per failed check."""
    document, problem = load_run_doctor(run_dir)
    if problem:
        return [("unreadable result", "doctor.json", problem)]
    rows = []
    for check in (document or {}).get("checks") or []:
        if isinstance(check, dict) and check.get("status") == "fail":
            rows.append((f"doctor {check.get('id')}", f"{check.get('host')} {check.get('subject')}",
                         str(check.get("detail"))))
    return rows


def doctor_section(run_dir):
    """The report's doctor table (markdown lines): warn/fail first, then pass/skip."""
    document, problem = load_run_doctor(run_dir)
    lines = ["## Doctor (preflight)", ""]
    if document is None:
        lines += [problem or "No doctor.json in this run (run before the doctor existed, or it did not run).", ""]
        return lines
    counts = document.get("summary") or {}
    lines += [f"Overall **{document.get('status')}**: {counts.get('pass', 0)} pass, {counts.get('warn', 0)} warn, "
              f"{counts.get('fail', 0)} fail, {counts.get('skip', 0)} skip on {', '.join(document.get('hosts') or [])}. "
              "Re-run with `scripts/cclbench doctor`.", ""]
    order = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}
    checks = sorted((c for c in document["checks"] if isinstance(c, dict)),
                    key=lambda c: order.get(c.get("status"), 4))
    lines.append("| host | check | status | subject | detail |")
    lines.append("|---|---|---|---|---|")
    for check in checks:
        cells = [check.get("host"), check.get("id"), check.get("status"), check.get("subject"), check.get("detail")]
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells) + " |")
    return lines + [""]
