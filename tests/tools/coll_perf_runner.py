"""What the end-to-end checkers of coll_perf share (tests/nccl/coll_perf_gpu.py,
tests/core/coll_perf_inject_wrong.py): running coll_perf and mpirun with a hard timeout, the
environment they run under, the GPU probe that decides a skip, and the `--only NAME` driver that
prints PASS/FAIL/SKIP and exits 0/1/77 (CTest's SKIP_RETURN_CODE).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import time

from gpu_presence import skip_or_fail_reason

SKIP = 77
CRASH = re.compile(r"terminate called|what\(\):|Segmentation fault|core dumped|Traceback \(most recent")
# Open MPI's words when a rank calls MPI_Abort: the rank and the errorcode it ended the job with.
MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+)")


class Failure(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def describe(out, err, stderr_chars=3000):
    return f"stdout:\n{out[-3000:]}\nstderr:\n{err[-stderr_chars:]}"


def base_env(**extra):
    """This environment, never NVLink multicast unless asked (NCCL_NVLS_ENABLE=0 when unset), mpirun allowed
    as root and yielding when idle (the CI machine is shared); extra on top."""
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_mpi_yield_when_idle": "1"})
    env.update(extra)
    return env


def descendants(root_pid, name):
    """PIDs of processes called `name` below root_pid (from /proc)."""
    parents = {}
    names = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        close = stat.rfind(")")
        names[int(entry)] = stat[stat.find("(") + 1:close]
        parents[int(entry)] = int(stat[close + 2:].split()[1])
    found = []
    for pid in parents:
        walk = pid
        while walk in parents and walk not in (0, 1):
            walk = parents[walk]
            if walk == root_pid:
                if names.get(pid) == name:
                    found.append(pid)
                break
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# Once every coll_perf of a launch has exited, mpirun has this long for its own teardown.
LAUNCHER_TEARDOWN_S = 15.0


class Launch(tuple):
    """run_launch's result: (code, out, err, seconds, pid) with .launcher_stuck: the launcher was still there
    LAUNCHER_TEARDOWN_S after its last rank had exited, and was ended by the checker."""
    launcher_stuck = False


def run_launch(cmd, env, timeout, program="coll_perf", teardown_s=LAUNCHER_TEARDOWN_S):
    """(exit code, stdout, stderr, seconds, pid of the launched process). On timeout the whole process group
    (mpirun and its ranks) is killed and the run is a Failure that names the command. A launcher still running
    LAUNCHER_TEARDOWN_S after every `program` below it has exited is stuck in its own teardown (Open MPI's mpirun
    after an MPI_Abort, seen in CI: every rank gone, mpirun never exiting): its group is ended then, and the
    result says so (launcher_stuck), for launch_exit to take the status from the abort the ranks printed.
    teardown_s: that allowance (a test of this function shortens it)."""
    started = time.monotonic()
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    out, err, state, _gone_at = wait_for_launcher(
        process, lambda: bool([pid for pid in descendants(process.pid, program) if alive(pid)]), timeout, teardown_s)
    if state == "timeout":
        raise Failure(f"timed out after {timeout} s: {' '.join(cmd)}\n{describe(out, err)}")
    result = Launch((process.returncode, out, err, time.monotonic() - started, process.pid))
    result.launcher_stuck = state == "stuck"
    return result


def wait_for_launcher(process, ranks_running, timeout, teardown_s=LAUNCHER_TEARDOWN_S, seen=False, end=None):
    """communicate() with a launcher (started in a session of its own) that may stay in its own teardown after its
    ranks: (stdout, stderr, state, gone_at). ranks_running() says whether any rank it watches still runs; once one
    has run (seen: the caller saw them already) and none runs for teardown_s while the launcher is there, its group
    is ended: state "stuck", gone_at the moment the last was gone. Past timeout the group is ended: "timeout". Else
    "exited". end(): how to end it (default SIGKILL to the launcher's process group; ranks in groups of their own
    need theirs killed first, while they are still the launcher's children)."""
    started = time.monotonic()
    gone_at = None
    end = end or (lambda: os.killpg(process.pid, signal.SIGKILL))
    while True:
        try:
            out, err = process.communicate(timeout=0.5)
            return out, err, "exited", gone_at
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now - started > timeout:
            end()
            out, err = process.communicate()
            return out, err, "timeout", gone_at
        if ranks_running():
            seen, gone_at = True, None
        elif seen and gone_at is None:
            gone_at = now
        elif gone_at is not None and now - gone_at > teardown_s:
            end()
            out, err = process.communicate()
            return out, err, "stuck", gone_at


def run_process(cmd, env, timeout):
    """(exit code, stdout, stderr, seconds): run_launch without the pid."""
    return run_launch(cmd, env, timeout)[:4]


def _launcher_line(launcher_pid):
    """Open MPI's signal handler prefixes its lines with "[host:PID]" (PID as printed, possibly zero-padded)."""
    return re.compile(rf"^\[[^\]\s:]*:0*{int(launcher_pid)}\]")


def crash_signs(out, err, launcher_pid=None):
    """The crash signs (CRASH) in a launch's output that belong to the program under test: lines that Open MPI's
    signal handler prefixes with the launcher's own pid ("[host:PID] Signal: Segmentation fault") are the
    launcher's teardown, not the program's, and are left out. Returns the matching lines."""
    own = _launcher_line(launcher_pid) if launcher_pid is not None else None
    return [line for line in (out + "\n" + err).splitlines()
            if CRASH.search(line) and not (own and own.match(line.strip()))]


def _launcher_died(code, err, launcher_pid):
    """The launcher itself died of a signal: its status says so and Open MPI's handler printed it under its pid."""
    launcher = _launcher_line(launcher_pid)
    return code is not None and (code < 0 or code > 128) and any(
        launcher.match(line.strip()) and "Process received signal" in line for line in err.splitlines())


# mpirun's report of ranks that exited non-zero on their own: "... Exit code:    4".
RANK_EXIT = re.compile(r"mpirun detected that one or more processes exited with non-zero status.*?Exit code:\s+(\d+)",
                       re.S)


def abort_errorcode(err):
    """The errorcode of the first MPI_Abort the launcher printed (MPI_ABORT), else None."""
    aborts = MPI_ABORT.findall(err)
    return int(aborts[0][1]) if aborts else None


def printed_status(err):
    """The status the launcher printed for its ranks: a rank's MPI_Abort errorcode, else the non-zero exit it
    detected (RANK_EXIT), else None."""
    errorcode = abort_errorcode(err)
    if errorcode is not None:
        return errorcode
    exited = RANK_EXIT.search(err)
    return int(exited.group(1)) if exited else None


def launch_exit(code, err, launcher_pid, launcher_stuck=False):
    """The exit status the program ended its launch with. mpirun passes on the errorcode of a rank's MPI_Abort;
    when mpirun itself then dies of a signal in its own teardown (a segfault in PMIx_server_finalize after the
    abort, seen in CI), or is stuck there and was ended (launcher_stuck: run_launch), its status is not the
    program's, and the errorcode of the abort it printed is. Any other status is returned as it is: a rank's own
    crash, or a launcher that died or stuck with no abort."""
    errorcode = abort_errorcode(err)
    if errorcode is not None and (_launcher_died(code, err, launcher_pid) or launcher_stuck):
        return errorcode
    return code


def launcher_died_unheard(code, err, launcher_pid, launcher_stuck=False):
    """The launcher died of a signal in its own teardown, or was stuck there and ended (launcher_stuck:
    run_launch), before it printed any rank's MPI_Abort (Open MPI 4.1's mpirun as two ranks abort at once:
    "ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/util/show_help.c", then a
    segfault in PMIx_server_finalize (CI of 2026-12-06), or no exit at all (CI of 2026-12-07)): the status the
    program asked for is lost, neither its pass nor its failure. A checker runs such a launch again."""
    return (_launcher_died(code, err, launcher_pid) or launcher_stuck) and abort_errorcode(err) is None


def mpirun_prefix(mpiexec, nranks, env, exported):
    """mpirun on this host, oversubscribed and unbound; each name in exported is passed on with -x when set."""
    cmd = [mpiexec, "-np", str(nranks), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"]
    for name in exported:
        if name in env:
            cmd += ["-x", name]
    return cmd


def coll_perf(args):
    return os.path.join(args.bin_dir, "coll_perf")


def work_dir(args, name):
    # coll_perf may write subdirectories next to -J (NCCL log capture): start from nothing.
    path = os.path.join(args.work_dir, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def probe_nccl(args, env):
    """One 1K AllReduce on the NCCL backend: None when coll_perf sees a GPU, else why not (exit 7: no CUDA
    device; exit 2: built without CUDA/NCCL). Any other outcome is a Failure."""
    work = work_dir(args, "probe_" + args.only)  # per check: CTest may run two checks side by side
    code, out, err, _ = run_process([coll_perf(args), "--backend", "nccl", "--coll", "all_reduce", "-b", "1K", "-e",
                                     "1K", "-n", "1", "-w", "0", "--quiet", "-J", os.path.join(work, "probe.json")],
                                    env, 300)
    # coll_perf told --backend nccl says "CUDA sees no device ..." (bench/session/backend_choice.cpp).
    if code == 7 and ("CUDA sees no device" in err or "no CUDA device" in err):
        return err.strip().splitlines()[-1]
    if code == 2 and "no CUDA/NCCL support" in err:
        return "coll_perf was built without CUDA/NCCL"
    check(code == 0, f"probe run failed (exit {code})\n" + describe(out, err))
    return None


def main(checks, needs_gpu, env):
    """The checker's command line: --bin-dir B --mpiexec M --work-dir W --only NAME. needs_gpu(name): whether
    that check runs on the NCCL backend; then, when coll_perf finds no GPU, it is skipped (77) only when no GPU
    is here by an independent check (tests/tools/gpu_presence.py) or coll_perf was built without CUDA, and
    fails otherwise. Returns the exit status."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--mpiexec", default="mpirun")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--only", required=True, choices=sorted(checks))
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    try:
        if needs_gpu(args.only):
            reason = probe_nccl(args, env)
            if reason is not None:
                verdict, why = ("skip", reason) if "without CUDA" in reason else skip_or_fail_reason(reason)
                if verdict == "fail":
                    print(f"FAIL {args.only}: {why}")
                    return 1
                print(f"SKIP: no GPU for the NCCL backend: {why}")
                return SKIP
        summary = checks[args.only](args)
    except Failure as failure:
        print(f"FAIL {args.only}: {failure}")
        return 1
    print(f"PASS {args.only}: {summary}")
    return 0
