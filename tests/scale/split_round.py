#!/usr/bin/env python3
"""A screen round two ways on the virtual cluster (tests/cluster/vcluster.py), issue 36 item 4:

  fanout   one `mpirun -np 2 --host a:1,b:1 coll_perf ... --point pair.r0.a.b -J ...` per pair, all started
           at once from one host (what execute/screen.py does today, uncapped)
  split    one `mpirun -np K --host n1:1,...,nK:1 coll_perf ... --split-ranks 2 --split-points FILE`: the
           ranks split into pair groups, each measured on its own communicator with its own watchdog and -J

Scenarios, for each node count K (8, 6, 4: K/2 pairs):
  healthy      every node up: the round's wall time, each pair's busbw at the large size
  unreachable  the last node's management link down (the launcher's agent cannot reach it, as ssh cannot)
  frozen       the last node's rank SIGSTOPs itself after its first case (CCLBENCH_TEST_STALL=R:0:frozen):
               its partner's learned watchdog (--learn-deadlines, -T ceiling) ends that launch
  frozen_long  the same in a round whose healthy pairs take longer than that deadline (-n 12000: the 1M case
               runs for tens of seconds): what the split's abort takes from the pairs still measuring
Recorded per run: wall time, exit code(s), per pair: document status, cases ok, busbw; and the load average of
the machine (os.getloadavg) before and after.

The pair job's flags are the screen's (plan/screen_jobs.py _coll_argv: all_reduce out of place, --sizes
LARGE,SMALL, -c 1, --quiet, -T, --learn-deadlines --progress), at sizes a shared 2-core machine carries with
eight nodes at once: --sizes 1M,8K -n 5 -w 1 (the screen's 64M would take the 2 cores for minutes per round).
MPI backend (no GPU here), its TCP BTL on the rails, mpirun on node1 through the ssh-like agent.

    split_round.py [--counts 8,6,4] [--out tests/scale/split_round_results.json] [--repeats 2]

Needs root and a build (CCLBENCH_BINARY_DIR or <repo>/build); tears the cluster down on any exit.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cluster"))
import vcluster  # noqa: E402
from cluster_setup import COLL_PERF, MPIRUN, launch_options, mpi_env, skip_reason  # noqa: E402

LARGE, SMALL = "1M", "8K"
LARGE_BYTES = 1 << 20
CEILING_S = 60  # -T: the learned deadlines' ceiling (the screen computes it from plan/bounds.py)
LIMIT_S = 240   # per round: a launch still running then is killed (and counted so)
JOB_FLAGS = ["--backend", "mpi", "--coll", "all_reduce", "--placement", "out", "--sizes", f"{LARGE},{SMALL}", "-n", "5",
             "-w", "1", "-c", "1", "--quiet", "-T", str(CEILING_S), "--learn-deadlines", "--progress"]


def long_flags():
    """The job's flags with -n 12000: each healthy pair's 1M case then outlasts the 20 s deadline floor; -T 400 so that
    its learned deadline (10 x the 8K case scaled by bytes) is not cut to the 60 s ceiling by eight pairs on 2 cores."""
    flags = list(JOB_FLAGS)
    flags[flags.index("-n") + 1] = "12000"
    flags[flags.index("-T") + 1] = "400"
    return flags


def pairs_of(nodes):
    return [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes), 2)]


def point_name(a, b):
    return f"pair.r0.{a}.{b}"


def mpirun(cluster, hosts, np, stall=None):
    argv = [MPIRUN] + launch_options(cluster) + ["--mca", "mpi_yield_when_idle", "1", "--host", hosts, "-np", str(np)]
    if stall is not None:
        argv += ["-x", f"CCLBENCH_TEST_STALL={stall}"]
    return argv


def start(cluster, argv, log_path):
    log = open(log_path, "w")
    return cluster.popen("node1", argv, env=mpi_env(), stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True), log


def wait_all(launches, started):
    """Waits for every (process, log) until LIMIT_S after `started`; returns [(exit code or 'killed', seconds)]."""
    outcomes = []
    for process, log in launches:
        left = max(0.1, LIMIT_S - (time.monotonic() - started))
        try:
            code = process.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = "killed"
        outcomes.append((code, round(time.monotonic() - started, 2)))
        log.close()
    return outcomes


def end_leftovers(launches):
    """Each launch ran in its own session: anything of it still alive (a stopped rank) is ended by its group."""
    for process, _ in launches:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def pair_result(path, started):
    """What a pair's document says: status, cases ok, busbw at the large size, when it was written."""
    if not os.path.exists(path):
        return {"status": None, "cases_ok": 0, "busbw_gbps": None, "written_s": None}
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    cases = document.get("cases") or []
    large = [case for case in cases if case.get("bytes") == LARGE_BYTES and case.get("status") == "ok"]
    return {"status": document.get("status"), "cases_ok": sum(1 for case in cases if case.get("status") == "ok"),
            "busbw_gbps": large[0].get("busbw_gbps") if large else None,
            "written_s": round(os.stat(path).st_mtime - started, 2),
            "split": document.get("manifest", {}).get("split")}


def run_fanout(cluster, nodes, work, flags, stall_pair=None, stall=None):
    pairs = pairs_of(nodes)
    launches, paths = [], []
    wall_started = time.time()
    started = time.monotonic()
    for index, (a, b) in enumerate(pairs):
        path = os.path.join(work, point_name(a, b) + ".json")
        paths.append(path)
        argv = mpirun(cluster, f"{a}:1,{b}:1", 2, stall if index == stall_pair else None) + [COLL_PERF] + flags + \
            ["--point", point_name(a, b), "-J", path]
        launches.append(start(cluster, argv, os.path.join(work, point_name(a, b) + ".log")))
    outcomes = wait_all(launches, started)
    end_leftovers(launches)
    wall = round(time.monotonic() - started, 2)
    return {"mode": "fanout", "wall_s": wall, "launches": len(launches),
            "exit_codes": [code for code, _ in outcomes],
            "pairs": {point_name(a, b): dict(pair_result(path, wall_started), ended_s=seconds, exit=code)
                      for (a, b), path, (code, seconds) in zip(pairs, paths, outcomes)}}


def run_split(cluster, nodes, work, flags, stall=None):
    pairs = pairs_of(nodes)
    entries = [{"point": point_name(a, b), "json": os.path.join(work, point_name(a, b) + ".json")} for a, b in pairs]
    points = os.path.join(work, "points.json")
    with open(points, "w", encoding="utf-8") as handle:
        json.dump(entries, handle)
    hosts = ",".join(f"{node}:1" for node in nodes)
    argv = mpirun(cluster, hosts, len(nodes), stall) + [COLL_PERF] + flags + \
        ["--split-ranks", "2", "--split-points", points]
    wall_started = time.time()
    started = time.monotonic()
    launches = [start(cluster, argv, os.path.join(work, "split.log"))]
    [(code, seconds)] = wait_all(launches, started)
    end_leftovers(launches)
    return {"mode": "split", "wall_s": seconds, "launches": 1, "exit_codes": [code],
            "pairs": {entry["point"]: pair_result(entry["json"], wall_started) for entry in entries}}


def summarize(run):
    """The table's row: pairs measured (complete document with every case ok) and the busbw range."""
    pairs = run["pairs"].values()
    measured = [pair for pair in pairs if pair["status"] == "complete" and pair["cases_ok"] == 2]
    busbw = [pair["busbw_gbps"] for pair in measured if pair["busbw_gbps"] is not None]
    run["pairs_measured"] = len(measured)
    run["pairs_total"] = len(run["pairs"])
    run["busbw_gbps_median"] = round(statistics.median(busbw), 4) if busbw else None
    run["busbw_gbps_min"] = round(min(busbw), 4) if busbw else None
    run["busbw_gbps_max"] = round(max(busbw), 4) if busbw else None
    return run


def scenario(cluster, nodes, root, name, mode, repeat):
    work = os.path.join(root, f"{len(nodes)}n.{name}.{mode}.{repeat}")
    os.makedirs(work)
    last = nodes[-1]
    load_before = os.getloadavg()
    if name == "unreachable":
        cluster.set_link(last, vcluster.MGMT, up=False)
    try:
        flags = long_flags() if name == "frozen_long" else JOB_FLAGS
        if name.startswith("frozen"):
            # The last node is rank 1 of the last pair's launch, job rank K-1 of the split one.
            run = run_fanout(cluster, nodes, work, flags, stall_pair=len(nodes) // 2 - 1, stall="1:0:frozen") \
                if mode == "fanout" else run_split(cluster, nodes, work, flags, stall=f"{len(nodes) - 1}:0:frozen")
        else:
            run = run_fanout(cluster, nodes, work, flags) if mode == "fanout" else run_split(cluster, nodes, work, flags)
    finally:
        if name == "unreachable":
            cluster.set_link(last, vcluster.MGMT, up=True)
    run.update(nodes=len(nodes), scenario=name, repeat=repeat, load_before=[round(x, 2) for x in load_before],
               load_after=[round(x, 2) for x in os.getloadavg()])
    tail = []
    for log in sorted(entry for entry in os.listdir(work) if entry.endswith(".log")):
        with open(os.path.join(work, log), errors="replace") as handle:
            lines = [line.rstrip() for line in handle if line.strip() and not line.startswith("cclbench-progress")]
        tail += [f"{log}: {line[:200]}" for line in lines[-3:]]
    run["log_tail"] = tail[-12:]
    return summarize(run)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="8,6,4")
    parser.add_argument("--scenarios", default="healthy,unreachable,frozen,frozen_long")
    parser.add_argument("--repeats", type=int, default=2, help="healthy rounds per mode (the others once)")
    parser.add_argument("--out", default=os.path.join(HERE, "split_round_results.json"))
    parser.add_argument("--append", action="store_true",
                        help="keep --out's runs, replacing those of the node counts and scenarios run now")
    args = parser.parse_args(argv)
    reason = skip_reason("coll_perf")
    if reason:
        print(f"SKIP: {reason}")
        return 77
    root = tempfile.mkdtemp(prefix="cclbench-split-round-")
    counts = [int(text) for text in args.counts.split(",")]
    scenarios = args.scenarios.split(",")
    runs = []
    if args.append and os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as handle:
            runs = [run for run in json.load(handle)["runs"]
                    if not (run["nodes"] in counts and run["scenario"] in scenarios)]
    try:
        for count in counts:
            nodes = [f"node{i}" for i in range(1, count + 1)]
            with vcluster.Cluster(nodes) as cluster:
                for name in scenarios:
                    for repeat in range(args.repeats if name == "healthy" else 1):
                        for mode in ("fanout", "split") if repeat % 2 == 0 else ("split", "fanout"):
                            run = scenario(cluster, nodes, root, name, mode, repeat)
                            runs.append(run)
                            print(f"{count} nodes {name:<11} {mode:<6} #{repeat}: {run['wall_s']:7.2f} s, "
                                  f"exit {run['exit_codes']}, {run['pairs_measured']}/{run['pairs_total']} pairs, "
                                  f"busbw median {run['busbw_gbps_median']} GB/s, load {run['load_before'][0]}",
                                  flush=True)
                            with open(args.out, "w", encoding="utf-8") as handle:
                                json.dump(results_document(runs), handle, indent=1)
                                handle.write("\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def results_document(runs):
    return {"description": "tests/scale/split_round.py: a screen round as concurrent per-pair mpiruns (fanout) or one "
                           "mpirun split into pair groups (coll_perf --split-ranks 2), on the virtual cluster, MPI "
                           "backend over TCP, one 2-core machine shared with other work (load averages recorded)",
            "job_flags": JOB_FLAGS, "frozen_long_flags": long_flags(), "limit_s": LIMIT_S, "cpus": os.cpu_count(), "runs": runs}


if __name__ == "__main__":
    sys.exit(main())
