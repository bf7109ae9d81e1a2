#!/usr/bin/env python3
"""Filesystem faults: the run directory is read-only, or fills up mid-run (label mpi).

  readonly_dir      the output folder is not writable (mode 0555; when the test runs as root, which
                    ignores modes, the tools run as uid 65534 from copies in a world-traversable
                    temporary folder, so a checkout under a private 0700 directory works): every tool
                    refuses before measuring, exit 2, one plain line, nothing created.
  readonly_mount    the same on a real read-only bind mount (EROFS), where a private mount
                    namespace is available (unshare -m); SKIP with the reason otherwise (its
                    own CTest test, reliability_faults_fs_readonly_mount, exit 77).
  full_midrun       the filesystem fills while coll_perf runs under mpirun (RLIMIT_FSIZE with
                    SIGXFSZ ignored: writes past the limit fail with EFBIG exactly like ENOSPC, and
                    the limit works for root and in containers): every rank exits non-zero within
                    30 s with a plain "cannot ... File too large" message; the JSONL holds only whole
                    records, -J is the last whole version (valid JSON, schema-valid), no temporary
                    file is left.
  dev_full          --jsonl to a /dev/full node, -J/--csv to a /dev/null node (private copies made
                    with mknod in the test folder, FIFOs where mknod is not allowed): refused up front
                    (a device is not a results file) and the node is still a device afterwards. Found:
                    before the file_io fix, `coll_perf -J /dev/null` run as root replaced /dev/null
                    with a regular file (atomic rename over it).
Usage: faults_fs.py --source-dir S --bin-dir B --mpiexec M --work-dir W [--only NAME]
"""

import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rel_common as rc  # noqa: E402

NOBODY = 65534
SWEEP = ["--backend", "mpi", "-b", "8K", "-e", "64M", "-f", "2", "-n", "5", "-w", "1", "--quiet"]


def tool(args, name):
    return os.path.join(args.bin_dir, name)


def sample_xml(args):
    return os.path.join(args.source_dir, "tests", "data", "topology", "rtxpro_2socket.xml")


def one_plain_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    return len(lines) == 1 and not rc.crash_signs(err)


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def run(argv, env=None, preexec=None, timeout=120, cwd=None):
    return subprocess.run(argv, env=env or rc.base_env(), preexec_fn=preexec, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, cwd=cwd)


def run_quietly(argv, preexec, env=None):
    try:
        return run(argv, env=env, preexec=preexec, cwd="/").returncode == 0
    except OSError:
        return False


def refusal_rows(args, folder):
    """(name, argv) of every tool asked to write into `folder`."""
    out = lambda name: os.path.join(folder, name)  # noqa: E731
    return [
        ("coll_perf -J", [tool(args, "coll_perf"), "--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "1", "-J", out("r.json")]),
        ("coll_perf --jsonl", [tool(args, "coll_perf"), "--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "1",
                               "--jsonl", out("r.jsonl")]),
        ("coll_perf --csv", [tool(args, "coll_perf"), "--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "1", "--csv", out("r.csv")]),
        ("topo_map --json", [tool(args, "topo_map"), "--xml", sample_xml(args), "--json", out("t.json")]),
        ("nccl_evidence --json", [tool(args, "nccl_evidence"), os.path.join(args.source_dir, "tests", "data", "evidence",
                                                                            "logs", "single_rank"), "--json", out("e.json")]),
        ("cclbench plan", [args.python, os.path.join(args.source_dir, "scripts", "cclbench"), "plan",
                           "--results", out("results"), "--run-id", "RO"]),
        ("cclbench baseline", [args.python, os.path.join(args.source_dir, "scripts", "cclbench"), "baseline",
                               "--results", out("results"), "--run-id", "RO", "--bin-dir", args.bin_dir,
                               "-b", "8K", "-e", "8K", "-n", "1"]),
    ]


def check_refusals(args, folder, preexec, label):
    notes = []
    for name, argv in refusal_rows(args, folder):
        result = run(argv, env=getattr(args, "env", None), preexec=preexec, cwd="/")
        err = result.stderr.decode(errors="replace")
        if name == "cclbench plan" and result.returncode == 0:
            # plan only prints unless asked to write; it must not have created anything either.
            rc.check(not os.listdir(folder), f"{label}: {name} created {os.listdir(folder)}")
            continue
        rc.check(result.returncode > 0 and result.returncode < 128,
                 f"{label}: {name}: exit {result.returncode}, expected a non-zero status\n{err[-1500:]}")
        rc.check(one_plain_line(err), f"{label}: {name}: expected one plain stderr line, got:\n{err[-1500:]}")
        rc.check(re.search(r"read-only|permission denied|not writable|cannot (write|create)", err, re.I),
                 f"{label}: {name}: the message does not say why: {err.strip()!r}")
        rc.check(not os.listdir(folder), f"{label}: {name} left {os.listdir(folder)}")
        notes.append(f"{name}: exit {result.returncode}")
    return notes


# What readonly_dir runs, relative to the source and bin dirs: copied for uid 65534 (see nobody_stage).
STAGED_TOOLS = ("coll_perf", "topo_map", "nccl_evidence")
STAGED_SOURCES = (("scripts", "cclbench"), ("scripts", "cclbench_lib"), ("tests", "data", "topology", "rtxpro_2socket.xml"),
                  ("tests", "data", "evidence", "logs", "single_rank"))


def staged_sanitizer_env(stage):
    """rc.base_env() with every sanitizer `suppressions=FILE` copied into the stage and pointed there.

    Under ci_sanitize.sh LSAN_OPTIONS names a suppressions file inside the checkout; uid 65534 cannot
    read it from a private checkout, and the sanitizer runtime aborts every tool it starts."""
    env = rc.base_env()
    for name in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
        if not env.get(name):
            continue
        options = []
        for option in env[name].split(":"):
            key, _, value = option.partition("=")
            if key == "suppressions" and value:
                copy = os.path.join(stage, "sanitizer", f"{name.lower()}.{os.path.basename(value)}")
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                shutil.copy2(value, copy)
                option = f"suppressions={copy}"
            options.append(option)
        env[name] = ":".join(options)
    return env


def nobody_stage(args):
    """(staged args, stage folder) for running readonly_dir as uid 65534, or (None, reason).

    A checkout under a private directory (/root, a mktemp -d: mode 0700) cannot be entered by that
    user, so the tools, cclbench and the input data are copied into a fresh world-traversable folder
    under a system temporary directory, and the test works there. Nothing depends on the modes of
    the directories above the checkout."""
    import argparse
    import tempfile
    reasons = []
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        if not os.path.isdir(base):
            continue
        try:
            stage = tempfile.mkdtemp(prefix="cclbench-faults-fs-", dir=base)
        except OSError as error:
            reasons.append(f"{base}: {error.strerror}")
            continue
        try:
            os.makedirs(os.path.join(stage, "bin"))
            env = staged_sanitizer_env(stage)
            for name in STAGED_TOOLS:
                shutil.copy2(tool(args, name), os.path.join(stage, "bin", name))
            for parts in STAGED_SOURCES:
                source, target = os.path.join(args.source_dir, *parts), os.path.join(stage, *parts)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if os.path.isdir(source):
                    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(source, target)
            for root, dirs, files in os.walk(stage):
                for name in dirs:
                    os.chmod(os.path.join(root, name), 0o755)
                for name in files:
                    path = os.path.join(root, name)
                    os.chmod(path, 0o755 if os.access(path, os.X_OK) else 0o644)
            os.chmod(stage, 0o755)
            probe = run([os.path.join(stage, "bin", "topo_map"), "--help"], env=env, preexec=as_nobody, cwd="/")
            # cclbench runs under an interpreter that user can reach too (not one under /root).
            python = next((candidate for candidate in (args.python, "/usr/bin/python3")
                           if os.path.exists(candidate) and run_quietly([candidate, "-c", "pass"], as_nobody, env)), None)
            if probe.returncode == 0 and python:
                staged = argparse.Namespace(**vars(args))
                staged.source_dir, staged.bin_dir, staged.python = stage, os.path.join(stage, "bin"), python
                staged.env = env
                return staged, stage
            if not python:
                reasons.append(f"no python3 that uid {NOBODY} can run ({args.python}, /usr/bin/python3)")
            reasons.append(f"{base}: topo_map --help as uid {NOBODY} exited {probe.returncode}: "
                           f"{probe.stderr.decode(errors='replace').strip()[-200:]!r}")
        except OSError as error:
            reasons.append(f"{base}: cannot stage the tools: {error}")
        shutil.rmtree(stage, ignore_errors=True)
    return None, "; ".join(reasons) or "no system temporary directory"


def readonly_dir(args):
    stage = None
    preexec = None
    if os.geteuid() == 0:
        # Root ignores directory modes: the tools run as nobody, from copies that user can reach.
        args, stage = nobody_stage(args)
        if args is None:
            return f"not run: no folder where uid {NOBODY} can run the tools ({stage})"
        preexec = as_nobody
        work = os.path.join(stage, "readonly_dir")
        os.makedirs(work, mode=0o755)
    else:
        work = rc.fresh_dir(os.path.join(args.work_dir, "readonly_dir"))
    folder = os.path.join(work, "ro")
    os.makedirs(folder)
    os.chmod(folder, 0o555)
    try:
        notes = check_refusals(args, folder, preexec, "read-only folder")
    finally:
        os.chmod(folder, 0o755)
        if stage:
            shutil.rmtree(stage, ignore_errors=True)
    return f"{len(notes)} refusals" + (f" (as uid {NOBODY}, tools copied to a folder it can reach)" if stage else "")


MOUNT_HELPER = r"""
import os, subprocess, sys
folder = sys.argv[1]
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "--bind", folder, folder], check=True)
subprocess.run(["mount", "-o", "remount,bind,ro", folder, folder], check=True)
os.execv(sys.argv[2], sys.argv[2:])
"""


def readonly_mount(args):
    if os.geteuid() != 0 or not shutil.which("unshare") or \
            subprocess.run(["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        raise rc.Skipped("no private mount namespace here (needs root and unshare -m)")
    work = rc.fresh_dir(os.path.join(args.work_dir, "readonly_mount"))
    folder = os.path.join(work, "ro")
    os.makedirs(folder)
    notes = []
    for name, argv in refusal_rows(args, folder):
        wrapped = ["unshare", "-m", sys.executable, "-c", MOUNT_HELPER, folder] + argv
        result = run(wrapped, cwd="/")
        err = result.stderr.decode(errors="replace")
        if name == "cclbench plan" and result.returncode == 0:
            continue
        rc.check(0 < result.returncode < 128, f"read-only mount: {name}: exit {result.returncode}\n{err[-1500:]}")
        rc.check(one_plain_line(err), f"read-only mount: {name}: expected one plain stderr line, got:\n{err[-1500:]}")
        rc.check(re.search(r"read-only", err, re.I), f"read-only mount: {name}: the message does not say read-only: {err.strip()!r}")
        rc.check(not os.listdir(folder), f"read-only mount: {name} left {os.listdir(folder)}")
        notes.append(name)
    return f"{len(notes)} refusals with EROFS"


def limit_file_size(limit_bytes):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # inherited across exec: writes fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return apply


RANK_LIMIT_HELPER = r"""
import os, resource, signal, sys
limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.argv[2], sys.argv[2:])
"""


def full_midrun(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "full_midrun"))
    json_path, jsonl_path, csv_path = (os.path.join(work, name) for name in ("out.json", "out.jsonl", "out.csv"))
    # Room for a few records and -J rewrites, not for the whole 14-size x 4-collective sweep.
    limit = 24 * 1024
    # The limit goes on the ranks only (mpirun's PMIx server grows shared-memory files), and Open
    # MPI's shared-memory transport is left out because its backing files would hit it too.
    cmd = rc.mpirun_cmd(args.mpiexec, 2, [sys.executable, "-c", RANK_LIMIT_HELPER, str(limit), tool(args, "coll_perf")] +
                        SWEEP + ["-J", json_path, "--jsonl", jsonl_path, "--csv", csv_path])
    cmd[1:1] = ["--mca", "btl", "self,tcp"]
    process = subprocess.Popen(cmd, env=rc.base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        out, err = rc.finish(process, 180)
    finally:
        rc.kill_group(process)
    rc.check(process.returncode not in (0, None), f"coll_perf exited {process.returncode} although the disk filled up")
    messages = [line for line in err.splitlines() if "coll_perf: error:" in line]
    rc.check(messages, f"no coll_perf error line:\n{err[-2000:]}")
    rc.check(any(re.search(r"cannot .*File too large", line) for line in messages),
             f"the error does not say what failed and why:\n{err[-2000:]}")
    rc.check(not rc.crash_signs(out + err), f"crash signs: {rc.crash_signs(out + err)}\n{err[-2000:]}")
    records = rc.jsonl_records(jsonl_path)  # fails on a torn last line
    rc.check(records, "no record was written before the disk filled up (limit too small to prove anything)")
    rc.check(all(r.get("status") == "ok" for r in records), "a record written before the fault is not ok")
    ok, output = rc.validate(args.source_dir, args.python, "case_record.schema.json", jsonl_path)
    rc.check(ok, f"{jsonl_path}: {output}")
    if os.path.exists(json_path):
        with open(json_path) as handle:
            json.load(handle)  # whole JSON or this raises
        ok, output = rc.validate(args.source_dir, args.python, "coll_perf.schema.json", json_path)
        rc.check(ok, f"{json_path}: {output}")
    rc.check(not rc.temp_leftovers(work), f"temporary files left: {rc.temp_leftovers(work)}")
    for path in (json_path, jsonl_path, csv_path):
        if os.path.exists(path):
            rc.check(os.path.getsize(path) <= limit, f"{path} is larger than the limit?")
    return f"exit {process.returncode}, {len(records)} whole records kept, message: {messages[0].strip()[:120]!r}"


def device_copy(folder, name, major, minor):
    """A private device node like /dev/null (1,3) or /dev/full (1,7) inside the test folder, so that
    a tool that wrongly replaces it harms only the copy; a FIFO where mknod is not permitted."""
    path = os.path.join(folder, name)
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(major, minor))
        return path, stat.S_ISCHR
    except OSError:
        os.mkfifo(path)
        return path, stat.S_ISFIFO


def dev_full(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "dev_full"))
    devices = os.path.join(work, "dev")
    os.makedirs(devices)
    out = os.path.join(work, "out")
    os.makedirs(out)
    base = [tool(args, "coll_perf"), "--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "1"]
    notes = []
    for flag, name, major, minor in (("--jsonl", "full", 1, 7), ("-J", "null", 1, 3), ("--csv", "null", 1, 3)):
        target, kind = device_copy(devices, f"{name}{len(notes)}", major, minor)
        result = run(base + [flag, target], cwd=out)
        err = result.stderr.decode(errors="replace")
        rc.check(kind(os.lstat(target).st_mode), f"{flag} {target}: the device node was replaced by a file")
        rc.check(0 < result.returncode < 128, f"{flag} {target}: exit {result.returncode}\n{err[-1000:]}")
        rc.check(one_plain_line(err), f"{flag} {target}: expected one plain line:\n{err[-1000:]}")
        notes.append(f"{flag} {name}: exit {result.returncode}")
    rc.check(not os.listdir(out), f"left {os.listdir(out)}")
    return "; ".join(notes)


def main():
    args = rc.parse_args(lambda p: p.add_argument("--only", default=None))
    cases = [("readonly_dir", lambda: readonly_dir(args)), ("readonly_mount", lambda: readonly_mount(args)),
             ("full_midrun", lambda: full_midrun(args)), ("dev_full", lambda: dev_full(args))]
    if args.only:
        cases = [case for case in cases if re.fullmatch(args.only, case[0])]
    return rc.run_cases(cases)


if __name__ == "__main__":
    sys.exit(main())
