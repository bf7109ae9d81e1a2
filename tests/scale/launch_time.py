#!/usr/bin/env python3
"""One N-node launch's start-up and teardown, measured on the virtual cluster: the time model of the screen's one
launch a stage (plan/launch_time.py, docs/scale.md "One launch a stage").

A launch is what the screen starts for one step of a stage: coll_perf (MPI backend) on N nodes, one rank a node,
split into N groups of one (--split-ranks 1 --split-points FILE: each node its own run, as the node stage), ranks
placed exactly (a hosts file, rank i on line i), one small case (all_reduce 8K, -n 1 -w 1) with --progress. Every
output line is timestamped as it arrives; per launch:
  start-up  from starting the launcher to the last rank entering its first case (the launcher reaching every host,
            the daemons, MPI's wire-up, coll_perf's job-wide agreements and the split)
  measure   from there to the last rank's 'finish' (the case itself: short on purpose)
  teardown  from the last 'finish' to the launcher's exit (the groups' writes, MPI_Finalize, the daemons' exit)
  host CPU  the CPU seconds of the launching host's own processes: mpirun and its ssh clients (ssh mode), the srun
            client and slurmctld (srun mode)
  node CPU  the CPU seconds of the nodes' side: the sshds' sessions, orteds and ranks (ssh mode; srun mode: null,
            slurmd's step daemons are not its children to account)
  load      the machine's 1-minute load average before and after (other work shares it)

Modes:
  ssh   mpirun --mca plm rsh over real OpenSSH from a launcher namespace to N node namespaces, one sshd each
        (tests/scale/launch_harness.py's SshFleet: 198.19.0.0/16), --hostfile FILE --map-by seq
  srun  srun --mpi=pmix -m arbitrary (SLURM_HOSTFILE) inside `salloc -N 16 --exclusive` on Slurm across the virtual
        cluster (tests/cluster/vslurm.py: slurmctld and one slurmd a node namespace)

Everything here runs on this one machine: the nodes' side (sshd, orted, slurmd and the ranks of all N nodes) shares
its CPUs with the launching host, so the start-up grows with N as the node side's CPU does; on a fleet each node
does its own side at the same time. plan/launch_time.py fits both and says how it extrapolates.

    launch_time.py --mode ssh|srun --counts 2,4,6,8,12,16 --repeats 3 --out RESULTS.json [--append]
    launch_time.py --table RESULTS.json      the rows docs/scale.md shows
    launch_time.py --fit RESULTS.json        the constants of plan/launch_time.LAUNCH_TIME (least squares)

Needs root and a build (CCLBENCH_BINARY_DIR or <repo>/build); tears everything down on any exit.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from launch_harness import (allocation_rows, emit_row, fleet_rows, inner_mode, node_address, parse_counts,  # noqa: E402
                            ssh_mpirun_options, tear_down_on_signals, wait_for_sshd, write_results)

SOURCE_DIR = os.environ.get("CCLBENCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR") or os.path.join(SOURCE_DIR, "build")
COLL_PERF = os.path.join(BINARY_DIR, "bench", "apps", "coll_perf")
LIMIT_S = 180.0
SRUN_NODES = 16
JOB_FLAGS = ["--backend", "mpi", "--coll", "all_reduce", "--placement", "out", "--sizes", "8K", "-n", "1", "-w", "1",
             "-c", "1", "--quiet", "-T", "60", "--learn-deadlines", "--progress"]


def proc_cpu(pid, children=False):
    """utime + stime (or cutime + cstime: its waited-for children's) of a process, seconds; None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    first = 13 if children else 11  # fields 14-15 (utime, stime) / 16-17 (cutime, cstime), counted after ')'
    return (int(fields[first]) + int(fields[first + 1])) / ticks


def measure(argv, work, count, env=None, host_pids=(), node_pids=()):
    """One launch; its row (the module docstring)."""
    os.makedirs(work, exist_ok=True)
    load_before = os.getloadavg()[0]
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    host_before = [proc_cpu(pid) for pid in host_pids]
    node_before = [proc_cpu(pid, children=True) for pid in node_pids]
    events = []  # (seconds since start, event dict)
    lines = []
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env)

    def read():
        for raw in child.stdout:
            now = time.monotonic() - started
            text = raw.decode(errors="replace").rstrip()
            if "cclbench-progress " in text:
                try:
                    events.append((now, json.loads(text.split("cclbench-progress ", 1)[1])))
                except ValueError:
                    pass
            else:
                lines.append(text)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = child.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        code = "killed"
        child.wait()
    ended = time.monotonic() - started
    reader.join(timeout=10)
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    host_cpu = (usage_after.ru_utime + usage_after.ru_stime) - (usage_before.ru_utime + usage_before.ru_stime)
    host_cpu += sum(after - before for before, after in zip(host_before, [proc_cpu(pid) for pid in host_pids])
                    if before is not None and after is not None)
    if node_pids:
        time.sleep(2.0)  # the sshds reap their sessions (whose CPU includes the orted and the rank) as they end
    node_after = [proc_cpu(pid, children=True) for pid in node_pids]
    node_cpu = sum(after - before for before, after in zip(node_before, node_after)
                   if before is not None and after is not None) if node_pids else None
    first_enter, finish = {}, {}
    for seconds, event in events:
        rank = event.get("rank")
        if event.get("event") == "enter":
            first_enter.setdefault(rank, seconds)
        elif event.get("event") == "finish":
            finish[rank] = seconds
    written = sum(1 for name in os.listdir(work) if name.endswith(".json") and name.startswith("t."))
    complete = len(first_enter) == count and len(finish) == count
    startup = max(first_enter.values()) if complete else None
    last_finish = max(finish.values()) if complete else None
    return {"nodes": count, "exit_code": code, "wall_s": round(ended, 3), "groups_written": written,
            "startup_s": round(startup, 3) if complete else None,
            "measure_s": round(last_finish - startup, 3) if complete else None,
            "teardown_s": round(ended - last_finish, 3) if complete else None,
            "host_cpu_s": round(host_cpu, 3), "node_cpu_s": None if node_cpu is None else round(node_cpu, 3),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "output_tail": [line[:200] for line in lines if line.strip()][-4:] if code != 0 or not complete else []}


def job_files(work, hosts):
    """The hosts file (rank i on line i) and the --split-points file of one launch over these hosts."""
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    hosts_path = os.path.join(work, "hosts")
    with open(hosts_path, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{host}\n" for host in hosts))
    points = os.path.join(work, "points.json")
    with open(points, "w", encoding="utf-8") as handle:
        json.dump([{"point": f"t.{index}", "json": os.path.join(work, f"t.{index}.json")}
                   for index in range(len(hosts))], handle)
    return hosts_path, points


def order(counts, repeats):
    """Each count `repeats` times, interleaved (a load that drifts touches every count alike)."""
    return [count for repeat in range(repeats) for count in (counts if repeat % 2 == 0 else list(reversed(counts)))]


# --- ssh ------------------------------------------------------------------------------------------------------------

def ssh_inner(args):
    counts = parse_counts(args.counts)
    wait_for_sshd([node_address(i) for i in range(max(counts))])
    node_pids = [int(pid) for pid in args.node_pids.split(",")] if args.node_pids else []
    options = ssh_mpirun_options(args.agent, ["--mca", "mpi_yield_when_idle", "1"])
    for number, count in enumerate(order(counts, args.repeats)):
        work = os.path.join(args.work, f"ssh.{number}")
        hosts_path, points = job_files(work, [node_address(i) for i in range(count)])
        argv = ["mpirun"] + options + ["-np", str(count), "--hostfile", hosts_path, "--map-by", "seq", COLL_PERF] + \
            JOB_FLAGS + ["--split-ranks", "1", "--split-points", points]
        row = measure(argv, work, count, node_pids=node_pids)
        emit_row(dict(row, launcher="mpirun-ssh"), args.settle_s)
    return 0


def ssh_rows(args):
    counts = parse_counts(args.counts)
    return fleet_rows(__file__, max(counts), lambda fleet: [
        "--counts", args.counts, "--repeats", str(args.repeats), "--settle-s", str(args.settle_s), "--work", args.work,
        "--node-pids", ",".join(str(daemon.pid) for daemon in fleet.daemons)])


# --- srun -----------------------------------------------------------------------------------------------------------

def srun_inner(args):
    nodes = os.environ["CCLBENCH_LAUNCH_NODES"].split(",")
    host_pids = [int(pid) for pid in args.node_pids.split(",")] if args.node_pids else []  # slurmctld
    env = dict(os.environ)
    for number, count in enumerate(order(parse_counts(args.counts), args.repeats)):
        work = os.path.join(args.work, f"srun.{number}")
        hosts_path, points = job_files(work, nodes[:count])
        argv = ["env", f"SLURM_HOSTFILE={hosts_path}", "srun", "--mpi=pmix", "--kill-on-bad-exit=1", "-n", str(count),
                "--nodes", str(count), "--distribution", "arbitrary", COLL_PERF] + JOB_FLAGS + \
            ["--split-ranks", "1", "--split-points", points]
        row = measure(argv, work, count, env=env, host_pids=host_pids)
        emit_row(dict(row, launcher="srun", node_cpu_reason="slurmd's step daemons are not its children"),
                 args.settle_s)
    return 0


def srun_rows(args):
    nodes = [f"node{i}" for i in range(1, SRUN_NODES + 1)]

    def inner_args(slurm):
        controller = next(process.pid for process in slurm.processes
                          if "slurmctld" in " ".join(process.args if isinstance(process.args, list) else []))
        # The process that is slurmctld itself: the last of the chain ip netns exec ... exec's into it.
        return ["--counts", args.counts, "--repeats", str(args.repeats), "--settle-s", str(args.settle_s),
                "--work", args.work, "--node-pids", str(controller)]
    return allocation_rows(__file__, "launch_time", nodes, inner_args, CCLBENCH_LAUNCH_NODES=",".join(nodes),
                           OMPI_MCA_mpi_yield_when_idle="1")


# --- the table ------------------------------------------------------------------------------------------------------

def summary(rows):
    """Per launcher and node count: the median of each measure over the repeats that completed."""
    grouped = {}
    for row in rows:
        if row["startup_s"] is None:
            continue
        grouped.setdefault((row["launcher"], row["nodes"]), []).append(row)
    out = []
    for (kind, count), entries in sorted(grouped.items()):
        def median(key):
            values = [entry[key] for entry in entries if entry.get(key) is not None]
            return round(statistics.median(values), 3) if values else None
        out.append({"launcher": kind, "nodes": count, "repeats": len(entries), "startup_s": median("startup_s"),
                    "teardown_s": median("teardown_s"), "measure_s": median("measure_s"), "wall_s": median("wall_s"),
                    "host_cpu_s": median("host_cpu_s"), "node_cpu_s": median("node_cpu_s"),
                    "load": [min(entry["load_before"] for entry in entries),
                             max(entry["load_after"] for entry in entries)]})
    return out


def line(points):
    """(intercept, slope) of the least-squares line through [(x, y)]."""
    count = len(points)
    mean_x = sum(x for x, _ in points) / count
    mean_y = sum(y for _, y in points) / count
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    return mean_y - slope * mean_x, slope


def fit(document):
    """{launcher: {"overhead_vc": (a, b), "overhead_low_s": o, "host_s_per_node": h, "measured_nodes": (low,
    high)}} over the medians of each node count: start-up + teardown = a + b x N on the virtual cluster; o their
    median at the fewest nodes measured; h the slope of the launching host's CPU seconds (plan/launch_time.py says
    how each is used)."""
    found = {}
    rows = summary(document["rows"])
    for kind in sorted({row["launcher"] for row in rows}):
        mine = [row for row in rows if row["launcher"] == kind]
        a, b = line([(row["nodes"], row["startup_s"] + row["teardown_s"]) for row in mine])
        _, h = line([(row["nodes"], row["host_cpu_s"]) for row in mine])
        low = min(mine, key=lambda row: row["nodes"])
        found[kind] = {"overhead_vc": (round(a, 2), round(b, 3)),
                       "overhead_low_s": round(low["startup_s"] + low["teardown_s"], 2),
                       "host_s_per_node": round(max(h, 0.0), 4),
                       "measured_nodes": (min(row["nodes"] for row in mine), max(row["nodes"] for row in mine))}
    return found


def table(document):
    lines = []
    for row in summary(document["rows"]):
        def seconds(value):
            return "-" if value is None else f"{value:.2f} s"
        lines.append(f"| {row['launcher']} | {row['nodes']} | {row['repeats']} | {seconds(row['startup_s'])} | "
                     f"{seconds(row['teardown_s'])} | {seconds(row['wall_s'])} | {seconds(row['host_cpu_s'])} | "
                     f"{seconds(row['node_cpu_s'])} | {row['load'][0]:.1f}-{row['load'][1]:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("ssh", "srun", "ssh-inner", "srun-inner"), default="ssh")
    parser.add_argument("--counts", default="2,4,6,8,12,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    parser.add_argument("--append", action="store_true", help="keep --out's rows of the other launcher")
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    parser.add_argument("--node-pids", help=argparse.SUPPRESS)
    parser.add_argument("--table", metavar="RESULTS.json")
    parser.add_argument("--fit", metavar="RESULTS.json")
    args = parser.parse_args(argv)
    if args.fit:
        with open(args.fit, encoding="utf-8") as handle:
            print(json.dumps(fit(json.load(handle))))
        return 0
    if args.table:
        with open(args.table, encoding="utf-8") as handle:
            print(table(json.load(handle)))
        return 0
    inner = inner_mode(args, ssh_inner, srun_inner)
    if inner is not None:
        return inner
    if not args.out:
        parser.error("--out is required")
    if os.geteuid() != 0:
        raise SystemExit("launch_time: needs root (network namespaces)")
    if not os.access(COLL_PERF, os.X_OK):
        raise SystemExit(f"launch_time: {COLL_PERF} is not built")
    tear_down_on_signals()
    # Under /var/tmp: every node of the ssh fleet sees a /tmp of its own, and all of them this folder.
    args.work = tempfile.mkdtemp(prefix="cclbench-launch-time-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    try:
        rows = ssh_rows(args) if args.mode == "ssh" else srun_rows(args)
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    kind = "mpirun-ssh" if args.mode == "ssh" else "srun"
    if args.append and os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as handle:
            rows = [row for row in json.load(handle)["rows"] if row["launcher"] != kind] + rows
    document = {"format": "launch_time/1", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(), "job_flags": JOB_FLAGS,
                "mpirun": subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                         check=False).stdout.splitlines()[:1],
                "srun": subprocess.run(["srun", "--version"], capture_output=True, text=True,
                                       check=False).stdout.strip() if shutil.which("srun") else None,
                "rows": rows, "summary": summary(rows)}
    write_results(args.out, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
