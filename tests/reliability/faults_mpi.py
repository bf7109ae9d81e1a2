#!/usr/bin/env python3
"""Fault tests on the MPI backend under mpirun (label mpi).

  kill_rank<R>      SIGKILL one rank mid-sweep: every other rank is gone within 30 s, mpirun names
                    the lost rank, and the records finished before are on disk, schema-valid, ok.
  stall             CCLBENCH_TEST_STALL=1:<case>, -T 12: the watchdog aborts every rank with the
                    timeout message and exit 4 within T + margin; -J says "timeout".
  frozen_peer       CCLBENCH_TEST_STALL=1:<case>:frozen, -T 12: rank 1 stops itself (SIGSTOP, its own watchdog
                    frozen with it) right after a case, before the result exchange; the other ranks wait on it
                    between two phases, and their watchdogs must still end every rank (exit 4, the message
                    names the case and "case boundary or result exchange"), the stopped rank included.
  frozen_start      rank 1 stops itself (SIGSTOP) before coll_perf starts, -T 3: the other ranks wait in MPI's
                    wire-up or the start-up agreement, which no case's watchdog watches; coll_perf's start-up
                    guard (the same -T) must end every rank (exit 4, "start-up ... did not finish within 3 s"),
                    the stopped rank included, long before any launcher bound.
  ranks_sigint/term SIGINT/SIGTERM to every rank: they stop at one case boundary, -J "interrupted",
                    JSONL intact, mpirun exits 130/143.
  kill_resume       the same inside `scripts/cclbench baseline` (real coll_perf under mpirun): the
                    point with the killed rank is recorded failed, the run exits non-zero, and
                    `baseline --resume RUN_ID` re-runs it and completes with every record ok and valid.
  mpirun_sigterm/int the signal goes to mpirun instead: Open MPI 4.1 forwards SIGTERM (for both
                    SIGINT and SIGTERM) to the ranks, which stop cleanly; mpirun itself then exits 1
                    (its own convention), so the test asserts non-zero, not 130/143.
Usage: faults_mpi.py --source-dir S --bin-dir B --mpiexec M --work-dir W [--only NAME]
"""

import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rel_common as rc  # noqa: E402

NRANKS = 4
# A sweep long enough that a signal always lands mid-sweep on a fast machine, short enough that a
# slow one finishes the prefix quickly: 8K..64M x2, 4 collectives, both placements = 112 cases.
# CCLBENCH_FAULTS_BACKEND_ARGS="--backend nccl --share-gpu" runs the same faults on one GPU with
# emulated ranks (the H200 run); CI has no GPU and uses the MPI backend.
BACKEND = os.environ.get("CCLBENCH_FAULTS_BACKEND_ARGS", "--backend mpi").split()
SWEEP = BACKEND + ["-b", "8K", "-e", "64M", "-f", "2", "-n", "20", "-w", "1", "--quiet"]
# Bounds are generous on purpose: CI shares 2 cores with other jobs (load average 20+ seen), where
# starting or tearing down 4 oversubscribed ranks under mpirun takes many times longer than on an idle
# machine. The product's figure (every other rank gone within 30 s of a kill on an idle machine) is
# printed with each PASS line; the assertion only catches a hang, which is what these tests are for.
EXIT_DEADLINE_S = 120     # 4x the idle-machine bound of 30 s
START_DEADLINE_S = 300    # first records on a loaded 2-core machine
# -T also bounds coll_perf's start-up (its start-up guard takes the same -T). On CI's loaded 2 cores under the
# sanitizer, 4 ranks' start-up once took over 4 s (coll_perf_split_stalled, 2026-12-06), so the tests whose subject
# is a case's watchdog give start-up room; frozen_start's subject is the start-up guard itself.
CASE_WATCHDOG_T = 12
START_WATCHDOG_T = 3
WATCHDOG_MARGIN_S = 120   # abort (rank 0's writer grace <= T) + mpirun teardown on a loaded machine


def coll_perf(args):
    return os.path.join(args.bin_dir, "coll_perf")


def outputs(work):
    return os.path.join(work, "out.json"), os.path.join(work, "out.jsonl"), os.path.join(work, "out.csv")


def check_prefix(args, json_path, jsonl_path, expect_status, min_records=1):
    """The JSONL prefix parses, validates and is all ok; -J (if written) agrees with it."""
    records = rc.jsonl_records(jsonl_path)
    rc.check(len(records) >= min_records, f"expected >= {min_records} records in {jsonl_path}, found {len(records)}")
    bad = [r.get("case_id") for r in records if r.get("status") != "ok"]
    rc.check(not bad, f"records finished before the fault are not ok: {bad[:5]}")
    ok, output = rc.validate(args.source_dir, args.python, "case_record.schema.json", jsonl_path)
    rc.check(ok, f"{jsonl_path} does not validate:\n{output}")
    if expect_status is not None:
        with open(json_path) as handle:
            document = json.load(handle)
        rc.check(document.get("status") == expect_status,
                 f"-J status is {document.get('status')!r}, expected {expect_status!r}")
        ok, output = rc.validate(args.source_dir, args.python, "coll_perf.schema.json", json_path)
        rc.check(ok, f"{json_path} does not validate:\n{output}")
        ids = [c["case_id"] for c in document["cases"]]
        rc.check(ids == [r["case_id"] for r in records][:len(ids)] and len(records) - len(ids) <= 1,
                 f"-J cases {len(ids)} and JSONL records {len(records)} disagree")
    return records


def kill_rank(args, victim):
    def test():
        work = rc.fresh_dir(os.path.join(args.work_dir, f"kill_rank{victim}"))
        json_path, jsonl_path, csv_path = outputs(work)
        cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, [coll_perf(args)] + SWEEP +
                            ["-J", json_path, "--jsonl", jsonl_path, "--csv", csv_path])
        process = rc.popen(cmd, rc.base_env())
        try:
            ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS, START_DEADLINE_S)
            rc.wait_for_lines(jsonl_path, 2, process, START_DEADLINE_S)
            os.kill(ranks[victim], signal.SIGKILL)
            killed_at = time.monotonic()
            survivors = [pid for rank, pid in ranks.items() if rank != victim]
            while any(rc.alive(pid) for pid in survivors) and time.monotonic() - killed_at < EXIT_DEADLINE_S + 5:
                time.sleep(0.05)
            elapsed = time.monotonic() - killed_at
            rc.check(not any(rc.alive(pid) for pid in survivors),
                     f"ranks still alive {EXIT_DEADLINE_S} s after rank {victim} was killed: "
                     f"{[r for r, p in ranks.items() if r != victim and rc.alive(p)]}")
            rc.check(elapsed <= EXIT_DEADLINE_S, f"other ranks took {elapsed:.1f} s to exit (bound {EXIT_DEADLINE_S} s)")
            out, err = rc.finish(process, EXIT_DEADLINE_S)
        finally:
            rc.kill_group(process)
        combined = out + err
        rc.check(process.returncode != 0, "mpirun exited 0 although a rank was killed")
        named = re.search(rf"rank {victim}\b", combined) or str(ranks[victim]) in combined
        rc.check(named, f"the output does not name the killed rank {victim} (pid {ranks[victim]}):\n{combined[-2000:]}")
        records = check_prefix(args, json_path, jsonl_path, None, min_records=2)
        # -J is rewritten atomically after every case: whatever is there must be whole JSON.
        with open(json_path) as handle:
            document = json.load(handle)
        # "running": mpirun killed rank 0 before it could finish; "failed": rank 0 saw the MPI error first.
        rc.check(document["status"] in ("running", "failed"), f"-J status {document['status']!r} after a lost rank")
        ok, output = rc.validate(args.source_dir, args.python, "coll_perf.schema.json", json_path)
        rc.check(ok, f"{json_path} does not validate:\n{output}")
        # The killed rank's own temporary file (<file>.tmp.<host>.<its pid>) may stay: SIGKILL can land between its
        # write and its rename (CI of 2026-12-07, kill_rank0), and nothing can remove it then. Any other is a leak.
        leftovers = [path for path in rc.temp_leftovers(work) if not path.endswith(f".{ranks[victim]}")]
        rc.check(not leftovers, f"temporary files left: {leftovers}")
        return f"rank {victim} killed, others gone in {elapsed:.1f} s, mpirun exit {process.returncode}, {len(records)} records intact"
    return test


def kill_resume(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "kill_resume"))
    results = os.path.join(work, "results")
    run_dir = os.path.join(results, "KR")
    cli = [args.python, os.path.join(args.source_dir, "scripts", "cclbench")]
    common = ["--results", results, "--bin-dir", args.bin_dir]
    first = cli + ["baseline", "--run-id", "KR", "-b", "8K", "-e", "8M", "-n", "20", "-w", "1", "--timeout", "120",
                   "--launch-timeout", "400"] + common
    env = rc.base_env(CCLBENCH_FAKE_GPU_COUNT="0")
    process = rc.popen(first, env)
    cases = os.path.join(run_dir, "cases.jsonl")
    try:
        rc.wait_for_lines(cases, 2, process, 300)
        ranks = {}
        deadline = time.monotonic() + 60
        while len(ranks) < 2 and time.monotonic() < deadline:
            ranks = {}
            for pid in rc.descendants(process.pid):
                try:
                    with open(f"/proc/{pid}/comm") as comm:
                        if comm.read().strip() != "coll_perf":
                            continue
                except OSError:
                    continue
                rank = rc.rank_of(pid)
                if rank is not None:
                    ranks[rank] = pid
            time.sleep(0.05)
        rc.check(1 in ranks, f"no coll_perf rank 1 found under the baseline (found {ranks})")
        os.kill(ranks[1], signal.SIGKILL)
        killed_at = time.monotonic()
        gone = rc.wait_gone({r: p for r, p in ranks.items() if r != 1}, EXIT_DEADLINE_S)
        elapsed = time.monotonic() - killed_at
        rc.check(not gone, f"ranks {gone} still alive {EXIT_DEADLINE_S} s after rank 1 was killed")
        out, err = rc.finish(process, 600)
    finally:
        rc.kill_group(process)
    rc.check(process.returncode not in (0, None) and process.returncode > 0,
             f"baseline exit {process.returncode} after a rank was killed\n{err[-2000:]}")
    rc.check(not rc.crash_signs(out + err), f"crash signs: {rc.crash_signs(out + err)}")
    with open(os.path.join(run_dir, "run.log"), errors="replace") as handle:
        log = handle.read()
    rc.check(re.search(r"rank 1\b", log), "run.log does not name the killed rank 1")
    with open(os.path.join(run_dir, "run_manifest.json")) as handle:
        manifest = json.load(handle)
    failed = [name for name, point in manifest["points"].items() if point["status"] == "failed"]
    rc.check(failed, f"no point recorded failed after the kill: {manifest['points']}")
    before = rc.jsonl_records(cases)
    resume = cli + ["baseline", "--resume", "KR"] + common
    process = rc.popen(resume, env)
    try:
        out, err = rc.finish(process, 600)
    finally:
        rc.kill_group(process)
    rc.check(process.returncode == 0, f"baseline --resume exit {process.returncode}\n{err[-3000:]}")
    with open(os.path.join(run_dir, "run_manifest.json")) as handle:
        manifest = json.load(handle)
    rc.check(manifest["status"] == "complete", f"manifest status {manifest['status']!r} after --resume")
    rc.check(all(p["status"] == "complete" for p in manifest["points"].values()), "a point is not complete after --resume")
    after = rc.jsonl_records(cases)
    rc.check(after[:len(before)] == before, "--resume rewrote records written before the kill")
    ok, output = rc.validate(args.source_dir, args.python, "case_record.schema.json", cases)
    rc.check(ok, f"{cases} does not validate:\n{output}")
    ok, output = rc.validate(args.source_dir, args.python, "run_manifest.schema.json", os.path.join(run_dir, "run_manifest.json"))
    rc.check(ok, f"run_manifest.json does not validate:\n{output}")
    return (f"others gone {elapsed:.1f} s after the kill; failed points {failed}; resume completed "
            f"({len(before)} records kept, {len(after) - len(before)} added)")


def stall(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "stall"))
    json_path, jsonl_path, _ = outputs(work)
    stall_case = 3
    env = rc.base_env(CCLBENCH_TEST_STALL=f"1:{stall_case}")
    cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, [coll_perf(args)] + SWEEP +
                        ["-T", str(CASE_WATCHDOG_T), "-J", json_path, "--jsonl", jsonl_path], env_names=["CCLBENCH_TEST_STALL"])
    process = rc.popen(cmd, env)
    try:
        ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS, START_DEADLINE_S)
        rc.wait_for_lines(jsonl_path, stall_case, process, START_DEADLINE_S)
        stalled_at = time.monotonic()  # the stall begins at the next case: at or after this moment
        out, err, status, ended_at, stuck = rc.finish_launch(process, ranks, CASE_WATCHDOG_T + WATCHDOG_MARGIN_S + 30)
        elapsed = ended_at - stalled_at
    finally:
        rc.kill_group(process)
    check_ended_by_watchdog(status, stuck, err, elapsed, CASE_WATCHDOG_T, "after the stall")
    left = rc.wait_gone(ranks, 10)
    rc.check(not left, f"ranks {left} still alive 10 s after mpirun exited (watchdog abort)")
    message = re.search(r"coll_perf: error: timeout: case (\S+) \(size (\d+) B[^)]*\) on rank (\d+) \(([^)]+)\) "
                        rf"did not finish within {CASE_WATCHDOG_T} s", err)
    rc.check(message, f"no timeout message naming case/size/rank/host:\n{err[-2000:]}")
    stalled = re.search(rf"on rank 1 \([^)]+\) did not finish", err)
    rc.check(stalled, "the timeout messages do not name the stalled rank 1")
    rc.check(not rc.crash_signs(out + err), f"crash signs: {rc.crash_signs(out + err)}")
    records = check_prefix(args, json_path, jsonl_path, "timeout", min_records=stall_case)
    rc.check(len(records) == stall_case, f"{len(records)} records, expected exactly the {stall_case} before the stall")
    return f"exit 4 after {elapsed:.1f} s (T={CASE_WATCHDOG_T}), {len(records)} records kept, status timeout"


def check_ended_by_watchdog(status, stuck, err, elapsed, watchdog_t, since):
    """The launch ended with 4 (coll_perf's timeout) within the watchdog's bound plus the loaded machine's margin:
    mpirun's exit status, or where mpirun stayed in its own teardown after every rank had ended (stuck:
    rc.finish_launch) the status it printed for them."""
    rc.check(status == 4, f"{'status mpirun printed' if stuck else 'exit'} {status}, expected 4 (timeout)"
                          f"{' (mpirun stuck in its teardown after its ranks ended, and ended by the test)' if stuck else ''}"
                          f"\n{err[-2000:]}")
    rc.check(elapsed <= watchdog_t + WATCHDOG_MARGIN_S,
             f"took {elapsed:.1f} s {since}, bound {watchdog_t}+{WATCHDOG_MARGIN_S} s")


def frozen_peer(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "frozen_peer"))
    json_path, jsonl_path, _ = outputs(work)
    frozen_after = 2  # case index: rank 1 stops after it; the records of the cases before it are on disk
    env = rc.base_env(CCLBENCH_TEST_STALL=f"1:{frozen_after}:frozen")
    cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, [coll_perf(args)] + SWEEP +
                        ["-T", str(CASE_WATCHDOG_T), "-J", json_path, "--jsonl", jsonl_path], env_names=["CCLBENCH_TEST_STALL"])
    process = rc.popen(cmd, env)
    try:
        ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS, START_DEADLINE_S)
        rc.wait_for_lines(jsonl_path, frozen_after, process, START_DEADLINE_S)
        frozen_at = time.monotonic()  # rank 1 stops at the end of the next case: at or after this moment
        running = {rank: pid for rank, pid in ranks.items() if rank != 1}  # the launcher ends the stopped one
        out, err, status, ended_at, stuck = rc.finish_launch(process, running,
                                                             CASE_WATCHDOG_T + WATCHDOG_MARGIN_S + 30)
        elapsed = ended_at - frozen_at
    finally:
        for pid in ranks.values():  # a stopped rank left behind by a failure must not outlive the test
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc.kill_group(process)
    check_ended_by_watchdog(status, stuck, err, elapsed, CASE_WATCHDOG_T, "after the freeze")
    left = rc.wait_gone(ranks, 10)
    rc.check(not left, f"ranks {left} still alive 10 s after mpirun exited (the stopped rank included)")
    message = re.search(r"timeout: case (\S+) \(size \d+ B, case boundary or result exchange\) on rank [023] "
                        rf"\([^)]+\) did not finish within {CASE_WATCHDOG_T} s", err)
    rc.check(message, f"no timeout message naming the case and the exchange it waited in:\n{err[-2000:]}")
    records = check_prefix(args, json_path, jsonl_path, None, min_records=frozen_after)
    return f"exit 4 after {elapsed:.1f} s (T={CASE_WATCHDOG_T}) with rank 1 stopped between phases, {len(records)} records kept"


def frozen_start(args):
    work = rc.fresh_dir(os.path.join(args.work_dir, "frozen_start"))
    json_path, jsonl_path, _ = outputs(work)
    # Rank 1 is a shell that stops itself before it execs coll_perf: it never reaches MPI_Init.
    stopper = ["sh", "-c", 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -STOP $$; fi; exec "$@"', "frozen_start"]
    cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, stopper + [coll_perf(args)] + SWEEP +
                        ["-T", str(START_WATCHDOG_T), "-J", json_path, "--jsonl", jsonl_path])
    started = time.monotonic()
    process = rc.popen(cmd, rc.base_env())
    try:
        ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS - 1, START_DEADLINE_S)
        out, err, status, ended_at, stuck = rc.finish_launch(process, ranks, START_WATCHDOG_T + WATCHDOG_MARGIN_S + 30)
        elapsed = ended_at - started
        left = rc.wait_gone(ranks, 10)
    finally:
        rc.kill_group(process)
    check_ended_by_watchdog(status, stuck, err, elapsed, START_WATCHDOG_T, "from the start")
    rc.check(not left, f"ranks {left} still alive 10 s after mpirun exited")
    rc.check(re.search(rf"timeout: start-up \(MPI wire-up, backend initialisation, case agreement\) did not finish "
                       rf"within {START_WATCHDOG_T} s \(-T\)", err), f"no start-up timeout message:\n{err[-2000:]}")
    rc.check(not rc.jsonl_records(jsonl_path) if os.path.exists(jsonl_path) else True, "records from a run that never started")
    return f"exit 4 after {elapsed:.1f} s (T={START_WATCHDOG_T}) with rank 1 stopped before start-up"


def signal_ranks(args, signal_number, expected_exit):
    def test():
        work = rc.fresh_dir(os.path.join(args.work_dir, f"ranks_sig{signal_number}"))
        json_path, jsonl_path, csv_path = outputs(work)
        cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, [coll_perf(args)] + SWEEP +
                            ["-J", json_path, "--jsonl", jsonl_path, "--csv", csv_path])
        process = rc.popen(cmd, rc.base_env())
        try:
            ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS, START_DEADLINE_S)
            rc.wait_for_lines(jsonl_path, 1, process, START_DEADLINE_S)
            for pid in ranks.values():
                os.kill(pid, signal_number)
            sent_at = time.monotonic()
            out, err = rc.finish(process, 120)
            elapsed = time.monotonic() - sent_at
        finally:
            rc.kill_group(process)
        rc.check(process.returncode == expected_exit, f"mpirun exit {process.returncode}, expected {expected_exit}\n{err[-2000:]}")
        rc.check(re.search(rf"coll_perf: interrupted by signal {signal_number} after \d+ cases; records are on disk", err),
                 f"no interruption message:\n{err[-2000:]}")
        rc.check(not rc.crash_signs(out + err), f"crash signs: {rc.crash_signs(out + err)}")
        records = check_prefix(args, json_path, jsonl_path, "interrupted")
        with open(json_path) as handle:
            rc.check(len(json.load(handle)["cases"]) == len(records), "-J and JSONL record counts differ after a clean stop")
        with open(csv_path) as handle:
            rc.check(len(handle.read().splitlines()) == len(records) + 1, "CSV rows differ from the records")
        rc.check(len(records) < 112, "the sweep finished before the signal: the test proved nothing")
        rc.check(not rc.temp_leftovers(work), f"temporary files left: {rc.temp_leftovers(work)}")
        return f"exit {expected_exit} {elapsed:.1f} s after the signal, {len(records)} records, status interrupted"
    return test


def signal_mpirun(args, signal_number):
    def test():
        work = rc.fresh_dir(os.path.join(args.work_dir, f"mpirun_sig{signal_number}"))
        json_path, jsonl_path, _ = outputs(work)
        cmd = rc.mpirun_cmd(args.mpiexec, NRANKS, [coll_perf(args)] + SWEEP + ["-J", json_path, "--jsonl", jsonl_path])
        process = rc.popen(cmd, rc.base_env())
        try:
            ranks = rc.ranks_of(process.pid, "coll_perf", NRANKS, START_DEADLINE_S)
            rc.wait_for_lines(jsonl_path, 1, process, START_DEADLINE_S)
            process.send_signal(signal_number)
            sent_at = time.monotonic()
            out, err = rc.finish(process, 120)
            elapsed = time.monotonic() - sent_at
        finally:
            rc.kill_group(process)
        rc.check(process.returncode > 0, f"mpirun exit {process.returncode}: expected a non-zero, non-signal status")
        # Ranks finish exiting just after mpirun returns (a sanitizer build checks leaks at exit).
        left = rc.wait_gone(ranks, 10)
        rc.check(not left, f"ranks {left} outlived mpirun by more than 10 s")
        rc.check(elapsed <= EXIT_DEADLINE_S, f"took {elapsed:.1f} s to stop (bound {EXIT_DEADLINE_S} s)")
        # Open MPI 4.1 forwards SIGTERM to the ranks, whatever mpirun received.
        rc.check(re.search(r"coll_perf: interrupted by signal \d+ after \d+ cases; records are on disk", err),
                 f"the ranks did not stop cleanly:\n{err[-2000:]}")
        rc.check(not rc.crash_signs(out + err), f"crash signs: {rc.crash_signs(out + err)}")
        records = check_prefix(args, json_path, jsonl_path, "interrupted")
        rc.check(not rc.temp_leftovers(work), f"temporary files left: {rc.temp_leftovers(work)}")
        return f"mpirun exit {process.returncode} {elapsed:.1f} s after the signal, {len(records)} records, status interrupted"
    return test


def main():
    args = rc.parse_args(lambda p: p.add_argument("--only", default=None))
    cases = [("kill_rank2", kill_rank(args, 2)), ("kill_rank0", kill_rank(args, 0)),
             ("kill_resume", lambda: kill_resume(args)), ("stall", lambda: stall(args)),
             ("frozen_peer", lambda: frozen_peer(args)),
             ("frozen_start", lambda: frozen_start(args)),
             ("ranks_sigint", signal_ranks(args, signal.SIGINT, 130)),
             ("ranks_sigterm", signal_ranks(args, signal.SIGTERM, 143)),
             ("mpirun_sigint", signal_mpirun(args, signal.SIGINT)),
             ("mpirun_sigterm", signal_mpirun(args, signal.SIGTERM))]
    if args.only:
        cases = [case for case in cases if re.fullmatch(args.only, case[0])]
    if not os.path.exists(coll_perf(args)):
        print(f"SKIP: coll_perf not built in {args.bin_dir}")
        return 1
    return rc.run_cases(cases)


if __name__ == "__main__":
    sys.exit(main())
