"""Shared helpers for the reliability drivers (Python 3 stdlib only).

The drivers run real cclbench binaries under real failures (killed ranks, stalls, signals, full or
read-only filesystems, bad input) and assert what a user sees: exit status, one plain error line,
what is left on disk. They are written to stay correct on a loaded 2-core CI machine: waits poll
with generous deadlines, but every bound the issue asks for is asserted.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import coll_perf_runner as runner  # noqa: E402

# mpirun refuses to run as root unless told; CI containers run as root.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           # One host, oversubscribed: keep Open MPI from spinning on shared memory when a rank
           # is descheduled (makes timings irrelevant but runs finish on 2 cores).
           "OMPI_MCA_mpi_yield_when_idle": "1"}

# What must never reach a user's terminal from a cclbench tool.
CRASH_PATTERNS = [
    (re.compile(r"Traceback \(most recent call last\)"), "Python traceback"),
    (re.compile(r"terminate called"), "uncaught C++ exception"),
    (re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error: "), "sanitizer report"),
    (re.compile(r"Segmentation fault|Aborted \(core dumped\)|core dumped"), "crash"),
    (re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in ", re.M), "stack trace"),
    (re.compile(r"what\(\):"), "uncaught C++ exception"),
]


class Failure(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def parse_args(extra=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--bin-dir", required=True, help="directory holding the built apps")
    parser.add_argument("--mpiexec", default="mpirun")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--work-dir", required=True)
    if extra:
        extra(parser)
    args = parser.parse_args()
    # The drivers change directory for the tools they run: every path they hand on is absolute.
    for name in ("source_dir", "bin_dir", "work_dir"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def fresh_dir(path):
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                full = os.path.join(root, name)
                if os.path.islink(full):
                    os.unlink(full)
                else:
                    os.chmod(full, 0o755)
                    os.rmdir(full)
        os.chmod(path, 0o755)
        os.rmdir(path)
    os.makedirs(path)
    return path


def base_env(**extra):
    env = dict(os.environ)
    env.update(MPI_ENV)
    # A sanitizer build must report to stderr where the assertions can see it.
    env.update(extra)
    return env


def mpirun_cmd(mpiexec, nranks, program_args, env_names=()):
    cmd = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", str(nranks)]
    for name in env_names:
        cmd += ["-x", name]
    return cmd + list(program_args)


def children_of(pid):
    """Direct children of pid, from /proc (no psutil)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def rank_of(pid):
    """OMPI_COMM_WORLD_RANK of a launched process, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            for item in environ.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except OSError:
        return None
    return None


def ranks_of(mpirun_pid, program_name, expected, deadline_s=60):
    """{rank: pid} of the launched program processes once all `expected` are visible."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ranks = {}
        for child in children_of(mpirun_pid):
            try:
                with open(f"/proc/{child}/comm") as comm:
                    if comm.read().strip() != program_name[:15]:
                        continue
            except OSError:
                continue
            rank = rank_of(child)
            if rank is not None:
                ranks[rank] = child
        if len(ranks) == expected:
            return ranks
        time.sleep(0.05)
    raise Failure(f"did not see {expected} {program_name} ranks under mpirun pid {mpirun_pid} within {deadline_s} s")


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(ranks, deadline_s):
    """Waits until no process of {rank: pid} is alive; returns the ranks still alive at the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        left = sorted(rank for rank, pid in ranks.items() if alive(pid))
        if not left:
            return []
        time.sleep(0.05)
    return sorted(rank for rank, pid in ranks.items() if alive(pid))


def wait_for_lines(path, count, process, deadline_s):
    """Waits until `path` has at least `count` complete lines; fails if the process ends first."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, "rb") as handle:
                if handle.read().count(b"\n") >= count:
                    return
        if process.poll() is not None:
            raise Failure(f"process ended (exit {process.returncode}) before {count} records appeared in {path}")
        time.sleep(0.05)
    raise Failure(f"{count} records did not appear in {path} within {deadline_s} s")


def finish(process, deadline_s):
    """communicate() with a deadline; kills the whole process group on expiry and fails."""
    try:
        out, err = process.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        raise Failure(f"did not exit within {deadline_s} s\nstdout:\n{out.decode(errors='replace')[-3000:]}\n"
                      f"stderr:\n{err.decode(errors='replace')[-3000:]}")
    return out.decode(errors="replace"), err.decode(errors="replace")


def finish_launch(process, ranks, deadline_s):
    """finish() for a launch whose ranks may all end before their launcher does: (stdout, stderr, status, ended_at,
    stuck). Open MPI 4.1's mpirun can stay in its own teardown after its ranks ended on their own timeout, two of them
    aborting at once ("PMIX ERROR: UNREACHABLE", every coll_perf gone, mpirun never exiting: CI of 2026-12-07,
    frozen_start; docs/testing.md names the family). ranks: {rank: pid} of those that end by themselves (not one
    the test stopped: the launcher ends that one). Where the launcher is still there LAUNCHER_TEARDOWN_S after the
    last of them is gone (tests/tools/coll_perf_runner.wait_for_launcher), its group is ended (stuck), status is the one it
    printed for its ranks (coll_perf_runner.printed_status) and ended_at the moment the last rank was gone; else
    status is its own exit status and ended_at its exit. Fails as finish() does past deadline_s."""
    out, err, state, gone_at = runner.wait_for_launcher(
        process, lambda: any(alive(pid) for pid in ranks.values()), deadline_s, runner.LAUNCHER_TEARDOWN_S, seen=True,
        end=lambda: kill_group(process))
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    if state == "timeout":
        raise Failure(f"did not exit within {deadline_s} s\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    if state == "stuck":
        return out, err, runner.printed_status(err), gone_at, True
    return out, err, process.returncode, time.monotonic(), False


def descendants(pid):
    found = []
    for child in children_of(pid):
        found += [child] + descendants(child)
    return found


def kill_group(process):
    # Ranks sit in process groups of their own (Open MPI sets that up), so kill them by pid first.
    for pid in descendants(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        process.kill()
    except OSError:
        pass


def popen(cmd, env, cwd=None):
    # Own process group: a failed test can kill mpirun and its ranks without touching anyone else.
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def crash_signs(text):
    return [what for pattern, what in CRASH_PATTERNS if pattern.search(text)]


def validate(source_dir, python, schema_name, path):
    """Runs the project's schema validator; returns (ok, output)."""
    result = subprocess.run([python, os.path.join(source_dir, "tests", "tools", "validate_json.py"),
                             os.path.join(source_dir, "results_schema", schema_name), path],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return result.returncode == 0, result.stdout.decode(errors="replace")


def jsonl_records(path):
    """Parses every line; a torn or garbled line is a failure."""
    records = []
    with open(path, "rb") as handle:
        data = handle.read()
    check(data == b"" or data.endswith(b"\n"), f"{path}: last record is torn (no final newline)")
    for number, line in enumerate(data.splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError as error:
            raise Failure(f"{path}:{number}: not JSON ({error}): {line[:200]!r}")
    return records


def temp_leftovers(directory):
    found = []
    for root, _dirs, files in os.walk(directory):
        found += [os.path.join(root, name) for name in files if ".tmp." in name]
    return found


class Skipped(Exception):
    """A case that cannot run here (raise with the reason): reported SKIP, never PASS."""


SKIP_EXIT = 77  # CTest SKIP_RETURN_CODE of the reliability tests


def run_cases(cases):
    """Runs named test functions; prints PASS/FAIL/SKIP per case; returns the process exit status:
    1 on any failure, 77 when every case skipped, else 0."""
    failures = 0
    skipped = 0
    for name, function in cases:
        started = time.monotonic()
        try:
            note = function()
            print(f"PASS {name} ({time.monotonic() - started:.1f} s){': ' + note if note else ''}", flush=True)
        except Skipped as reason:
            skipped += 1
            print(f"SKIP {name}: {reason}", flush=True)
        except Failure as error:
            failures += 1
            print(f"FAIL {name} ({time.monotonic() - started:.1f} s): {error}", flush=True)
    print(f"{len(cases) - failures - skipped}/{len(cases)} passed, {skipped} skipped")
    if failures:
        return 1
    return SKIP_EXIT if cases and skipped == len(cases) else 0
