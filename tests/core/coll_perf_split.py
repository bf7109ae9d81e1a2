#!/usr/bin/env python3
"""coll_perf --split-ranks N --split-points FILE: one launch whose ranks split into groups of N, each
group measured as a launch of its ranks alone would be (issue 36 item 4: a screen round as one job).

  healthy    mpirun -np 4 --backend mpi, 2 groups of 2: exit 0; two -J documents, each complete with
             world_size 2 and nranks 2 (its group's), manifest.split naming the group, the point of its
             --split-points entry on every case, every case ok with 0 wrong (the exact check ran), both
             valid against results_schema/coll_perf.schema.json
  stalled    the same with job rank 2 (group 1) sleeping in its second case (CCLBENCH_TEST_STALL) and
             -T 12: group 1's watchdog ends the launch (exit 4), and group 0's document is on disk,
             complete, with every case ok - written when group 0 finished, not at the end of the job
  usage      N not dividing the ranks, a points file with the wrong count, a bad point name, a path in
             a folder that does not exist, --split-ranks alone, -J with --split-ranks: exit 2, one
             error line naming the problem, no MPI abort, nothing written

Usage: coll_perf_split.py --bin-dir B --mpiexec M --work-dir W --only NAME
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from coll_perf_runner import (base_env, check, coll_perf, crash_signs, describe, launch_exit,  # noqa: E402
                              launcher_died_unheard, main, mpirun_prefix, run_launch, work_dir)

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(os.path.dirname(TESTS), "results_schema", "coll_perf.schema.json")
JOB_FLAGS = ["--backend", "mpi", "--coll", "all_reduce,alltoall", "--placement", "out", "--sizes", "8K,64K", "-n", "3",
             "-w", "1", "-c", "1", "--quiet"]
CASES_PER_GROUP = 4  # two collectives x two sizes, out of place
# The stalled check's -T. It also bounds start-up (coll_perf's start-up guard), which on CI's loaded 2 cores under the
# sanitizer took over 4 s once (2026-12-06): the stall, not start-up, is the check's subject.
STALL_WATCHDOG_T = 12


def environment(stall=None):
    env = base_env()
    env.pop("CCLBENCH_TEST_STALL", None)
    if stall is not None:
        env["CCLBENCH_TEST_STALL"] = stall
    return env


def write_points(work, groups):
    entries = [{"point": f"pair.r0.n{2 * g}.n{2 * g + 1}", "json": os.path.join(work, f"group{g}.json")}
               for g in range(groups)]
    path = os.path.join(work, "points.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(entries, handle)
    return path, entries


def split_run(args, work, extra, env, nranks=4, timeout=120):
    cmd = mpirun_prefix(args.mpiexec, nranks, env, ("CCLBENCH_TEST_STALL",)) + [coll_perf(args)] + JOB_FLAGS + extra
    started = time.time()
    launch = run_launch(cmd, env, timeout)
    if launcher_died_unheard(launch[0], launch[2], launch[4], launch.launcher_stuck):
        # mpirun died or stuck in its own teardown before it printed the abort: the status coll_perf asked for is
        # lost (coll_perf_runner.launcher_died_unheard). Once more, judged as it comes.
        print("mpirun died or stuck before printing the ranks' abort (exit "
              f"{launch[0]}); running the launch once more", file=sys.stderr)
        started = time.time()
        launch = run_launch(cmd, env, timeout)
    code, out, err, seconds, launcher = launch
    # coll_perf's own crash signs and status: not mpirun's teardown after the abort a stalled group asks for.
    crashes = crash_signs(out, err, launcher)
    check(not crashes, "crash signs in the output: " + " | ".join(crashes[:3]) + "\n" + describe(out, err))
    return launch_exit(code, err, launcher, launch.launcher_stuck), out, err, seconds, started


def schema_errors(path):
    """tests/tools/validate_json.py's complaints about `path` against the coll_perf schema (empty: valid)."""
    result = subprocess.run([sys.executable, os.path.join(TESTS, "tools", "validate_json.py"), SCHEMA, path],
                            capture_output=True, text=True, timeout=120)
    return "" if result.returncode == 0 else result.stdout + result.stderr


def read_document(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def check_group_document(entry, group, groups, job_size, out, err):
    """The group's -J document: its own world, its split, its point; every case measured and checked."""
    check(os.path.exists(entry["json"]), f"group {group}: no document at {entry['json']}\n" + describe(out, err))
    document = read_document(entry["json"])
    errors = schema_errors(entry["json"])
    check(not errors, f"group {group}: {entry['json']} does not validate:\n{errors[-2000:]}")
    check(document["status"] == "complete", f"group {group}: status {document['status']!r}, expected 'complete'")
    manifest = document["manifest"]
    check(manifest["world_size"] == 2 and manifest["nranks"] == 2,
          f"group {group}: world_size {manifest['world_size']} nranks {manifest['nranks']}, expected the group's 2")
    expected_split = {"group_index": group, "groups": groups, "job_world_size": job_size, "job_first_rank": 2 * group}
    check(manifest.get("split") == expected_split, f"group {group}: manifest.split {manifest.get('split')} != {expected_split}")
    cases = document["cases"]
    check(len(cases) == CASES_PER_GROUP, f"group {group}: {len(cases)} cases, expected {CASES_PER_GROUP}")
    for case in cases:
        check(case.get("point") == entry["point"], f"group {group}: case point {case.get('point')!r} != {entry['point']!r}")
        check(case["status"] == "ok" and case.get("wrong", 0) == 0 and case["nranks"] == 2,
              f"group {group}: case {case['case_id']} status {case['status']} wrong {case.get('wrong')} nranks {case['nranks']}")
    return document


def check_healthy(args):
    work = work_dir(args, "healthy")
    points, entries = write_points(work, 2)
    code, out, err, seconds, _ = split_run(args, work, ["--split-ranks", "2", "--split-points", points], environment())
    check(code == 0, f"exit {code}, expected 0\n" + describe(out, err))
    for group, entry in enumerate(entries):
        check_group_document(entry, group, 2, 4, out, err)
    return f"2 groups of 2 in {seconds:.1f} s: two complete documents, {2 * CASES_PER_GROUP} cases ok"


def check_stalled(args):
    work = work_dir(args, "stalled")
    points, entries = write_points(work, 2)
    code, out, err, seconds, started = split_run(args, work, ["--split-ranks", "2", "--split-points", points, "-T",
                                                              str(STALL_WATCHDOG_T)], environment(stall="2:1"))
    check(code == 4, f"exit {code}, expected 4 (timeout)\n" + describe(out, err))
    check("test stall (CCLBENCH_TEST_STALL): rank 2" in err, "the stall hook did not fire on job rank 2\n" + describe(out, err))
    finished = check_group_document(entries[0], 0, 2, 4, out, err)
    # Group 0 wrote when it finished: seconds before the launch ended at group 1's -T.
    written = os.stat(entries[0]["json"]).st_mtime
    check(written < started + seconds - 2, f"group 0's document written {written - started:.1f} s into a {seconds:.1f} s "
                                           "launch: not before the stalled group ended it")
    stalled = read_document(entries[1]["json"]) if os.path.exists(entries[1]["json"]) else None
    check(stalled is not None and stalled["status"] == "timeout" and len(stalled["cases"]) == 1,
          f"group 1's document: {None if stalled is None else (stalled['status'], len(stalled['cases']))}, "
          "expected status timeout with its first case")
    return (f"group 1 stalled, launch ended in {seconds:.1f} s (exit 4); group 0 complete on disk at "
            f"{written - started:.1f} s with {len(finished['cases'])} cases")


def check_usage(args):
    work = work_dir(args, "usage")
    points, _ = write_points(work, 2)
    os.makedirs(os.path.join(work, "one"))
    one_entry, _ = write_points(os.path.join(work, "one"), 1)
    bad_name = os.path.join(work, "bad_name.json")
    with open(bad_name, "w", encoding="utf-8") as handle:
        json.dump([{"point": "a b", "json": os.path.join(work, "x0.json")}, {"point": "ok", "json": os.path.join(work, "x1.json")}],
                  handle)
    bad_path = os.path.join(work, "bad_path.json")
    with open(bad_path, "w", encoding="utf-8") as handle:
        json.dump([{"point": "p0", "json": os.path.join(work, "y0.json")},
                   {"point": "p1", "json": os.path.join(work, "no_such_folder", "y1.json")}], handle)
    cases = [
        (["--split-ranks", "3", "--split-points", points], "--split-ranks 3 does not divide the job's 4 rank(s)"),
        (["--split-ranks", "2", "--split-points", one_entry], "1 entries for 2 group(s)"),
        (["--split-ranks", "2", "--split-points", bad_name], "entry 0 point: 'a b' has characters outside"),
        (["--split-ranks", "2", "--split-points", bad_path], "no_such_folder"),
        (["--split-ranks", "2", "--split-points", os.path.join(work, "missing.json")], "missing.json"),
        (["--split-ranks", "2"], "--split-ranks N and --split-points FILE go together"),
        (["--split-ranks", "2", "--split-points", points, "-J", os.path.join(work, "z.json")], "drop -J and --point"),
    ]
    for extra, expected in cases:
        code, out, err, _, _ = split_run(args, work, extra, environment(), timeout=60)
        check(code == 2, f"{' '.join(extra)}: exit {code}, expected 2\n" + describe(out, err))
        errors = [line for line in err.splitlines() if ": error: " in line]
        check(len(errors) == 1 and expected in errors[0],
              f"{' '.join(extra)}: expected one error line with {expected!r}\n" + describe(out, err))
        check("MPI_ABORT" not in err and "MPI_Abort" not in err, f"{' '.join(extra)}: aborted, not exit 2 on every rank\n"
              + describe(out, err))
    written = sorted(name for name in os.listdir(work) if name.endswith(".json") and name not in
                     ("points.json", "bad_name.json", "bad_path.json"))
    check(not written, f"documents written by refused launches: {written}")
    return f"{len(cases)} bad inputs: exit 2 with one line each, nothing measured"


if __name__ == "__main__":
    sys.exit(main({"healthy": check_healthy, "stalled": check_stalled, "usage": check_usage},
                  lambda name: False, environment()))
