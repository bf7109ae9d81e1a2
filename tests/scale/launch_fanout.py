#!/usr/bin/env python3
"""How many launches one host sustains at once: the screen's pair stage starts one launcher process per pair of a
round (execute/screen.py), so a round of a 1,024-node fleet is 512 launches from one host.

For each count K: K launches of a two-rank PROGRAM started at the same time (each its own process group; PROGRAM by
default /bin/true, which needs only the launch; --program-arg adds its arguments), each given LIMIT_S seconds.
Recorded per K: how many exited 0, how many failed (their first meaningful line, counted), how many ran out of time,
the wall time of the batch, its slowest and median launch, the CPU seconds the launching processes and their
waited-for children spent on the launching host, the load average before and after (other work shares the machine),
and the first stderr lines of launches that succeeded anyway (a launcher that waited, retried or warned).

Modes:
  local  K `mpirun -np 2 --oversubscribe PROGRAM` on this host: what the launching host itself costs.
  ssh    K `mpirun --mca plm rsh -H a,b -np 2 PROGRAM` over real OpenSSH from a launcher namespace to 2K node
         namespaces (one bridge, one sshd each, 198.19.0.0/16 inside the benchmark range 198.18.0.0/15), pair j on
         nodes 2j and 2j+1: as in a round, every node is in one launch at a time. The sshds, the orteds and the ranks
         of all nodes run on this same machine, so the batch times are an upper bound for a real fleet; the
         launcher CPU column is the launching host's own share (mpirun and its ssh clients).
  srun   K `srun -N 2 -n 2 --nodelist a,b PROGRAM` steps inside one `salloc -N 8 --exclusive` on Slurm across the
         virtual cluster (tests/cluster/vslurm.py: slurmctld and 8 slurmds, each in its node's namespace). Eight
         nodes hold 4 disjoint pairs: above K=4 steps share nodes round-robin (K/4 steps per pair of nodes), with
         --overlap (--srun-share overlap: steps share CPUs freely), --exact (one CPU of each node a step, 4 a node
         here) or neither (whole: Slurm's default, a step takes every CPU of its nodes, as the screen's steps do);
         Slurm holds a step that does not fit until one ends ("Requested nodes are busy").

Everything the ssh and srun modes create (namespaces, bridges, sshds, keys in a private temporary folder, Slurm's
daemons) is torn down at the end, on error and on SIGINT/SIGTERM/SIGHUP; `--cleanup-stale` removes namespaces
left by a benchmark whose process is gone (SIGKILL). Root only for ssh and srun.

    launch_fanout.py --counts 8,16,32,64,128 --out RESULTS.json [--mode local|ssh|srun] [--program /bin/true]
                     [--program-arg ARG ...] [--limit-s 120] [--srun-share overlap|exact]
    launch_fanout.py --table RESULTS.json     the markdown rows docs/scale.md shows
"""
import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from launch_harness import (allocation_rows, cleanup_stale, emit_row, fleet_rows, inner_mode,  # noqa: E402
                            node_address, parse_counts, root_flag, ssh_mpirun_options, tear_down_on_signals, tool,
                            wait_for_sshd, write_results)

LIMIT_S = 120.0
SRUN_NODES = ("node1", "node2", "node3", "node4", "node5", "node6", "node7", "node8")


# What differs between launches that failed for one reason: Slurm's step ids, Open MPI's [host:pid] and pids.
VARYING = ((re.compile(r"StepId=\d+\.\d+"), "StepId=J.S"), (re.compile(r"^\[[^\]\s:]+:\d+\]"), "[host:pid]"),
           (re.compile(r"setpgid\(\d+,\d+\)"), "setpgid(pid,pid)"))


def first_meaningful_line(text):
    """The first line that is not a separator, with what varies between launches (VARYING) made alike: the key
    under which the failures and notices of a batch are counted."""
    words = [line.strip() for line in text.splitlines() if line.strip("-=* \t")]
    if not words:
        return None
    line = words[0][:200]
    for pattern, replacement in VARYING:
        line = pattern.sub(replacement, line)
    return line


def batch(argvs, limit_s, env=None):
    """Starts every argv at once, waits up to limit_s for all of them; the row described in the module's docstring."""
    load_before = [round(value, 2) for value in os.getloadavg()]
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    children = [(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  start_new_session=True, env=env), time.monotonic()) for argv in argvs]
    ok, failed, timed_out, durations, failures, notices = 0, 0, 0, [], {}, {}
    for child, began in children:
        left = max(0.1, limit_s - (time.monotonic() - started))
        try:
            _, err = child.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            timed_out += 1
            continue
        durations.append(time.monotonic() - began)
        line = first_meaningful_line(err.decode(errors="replace"))
        if child.returncode == 0:
            ok += 1
            if line:
                notices[line] = notices.get(line, 0) + 1
        else:
            failed += 1
            line = line or f"exit {child.returncode}"
            failures[line] = failures.get(line, 0) + 1
    wall = time.monotonic() - started
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage_after.ru_utime + usage_after.ru_stime) - (usage_before.ru_utime + usage_before.ru_stime)
    return {"count": len(argvs), "ok": ok, "failed": failed, "timed_out": timed_out, "wall_s": round(wall, 2),
            "slowest_s": round(max(durations), 2) if durations else None,
            "median_s": round(statistics.median(durations), 2) if durations else None,
            "launcher_cpu_s": round(cpu, 2), "load_before": load_before,
            "load_after": [round(value, 2) for value in os.getloadavg()], "failures": failures, "notices": notices}


# --- local ---------------------------------------------------------------------------------------------------------

def local_rows(counts, program, limit_s):
    argv = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"] + root_flag() + program
    rows = []
    for count in counts:
        rows.append(batch([argv] * count, limit_s))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


# --- ssh -----------------------------------------------------------------------------------------------------------

def ssh_inner(args):
    """Runs in the launcher namespace: the batches, one JSON row a line on stdout."""
    counts = parse_counts(args.counts)
    wait_for_sshd([node_address(i) for i in range(2 * max(counts))])
    options = ssh_mpirun_options(args.agent)
    for count in counts:
        argvs = [["mpirun"] + options + ["-H", f"{node_address(2 * j)},{node_address(2 * j + 1)}", "-np", "2"]
                 + program_argv(args) for j in range(count)]
        emit_row(batch(argvs, args.limit_s), args.settle_s)  # the remote orteds of the batch end after their mpirun
    return 0


def ssh_rows(args):
    counts = parse_counts(args.counts)

    def note_stale(stale):
        print(f"launch_fanout: removed {len(stale)} stale namespace(s) of benchmarks that are gone", file=sys.stderr)
    return fleet_rows(__file__, 2 * max(counts), lambda fleet: [
        "--counts", args.counts, "--limit-s", str(args.limit_s), "--settle-s", str(args.settle_s),
        "--program", args.program] + [f"--program-arg={word}" for word in args.program_arg], on_stale=note_stale)


# --- srun ----------------------------------------------------------------------------------------------------------

def srun_inner(args):
    """Runs inside `salloc`: the batches of srun steps, one JSON row a line on stdout."""
    nodes = os.environ.get("CCLBENCH_FANOUT_NODES", "").split(",")
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    share = {"overlap": ["--overlap"], "exact": ["--exact"], "whole": []}[args.srun_share]
    for count in parse_counts(args.counts):
        argvs = [["srun", f"--mpi={args.srun_mpi}", "--kill-on-bad-exit=1", "-N", "2", "-n", "2",
                  "--ntasks-per-node", "1", "--nodelist", ",".join(pairs[j % len(pairs)])] + share + program_argv(args)
                 for j in range(count)]
        emit_row(batch(argvs, args.limit_s), args.settle_s)
    return 0


def srun_rows(args):
    return allocation_rows(__file__, "launch_fanout", SRUN_NODES, lambda slurm: [
        "--counts", args.counts, "--limit-s", str(args.limit_s), "--srun-share", args.srun_share,
        "--srun-mpi", args.srun_mpi, "--settle-s", str(args.settle_s), "--program", args.program]
        + [f"--program-arg={word}" for word in args.program_arg], CCLBENCH_FANOUT_NODES=",".join(SRUN_NODES))


# --- the caps --------------------------------------------------------------------------------------------------------

# The committed measurements, one per way of launching (plan.screen_schedule.LAUNCH_CAPS's keys).
RESULTS = {"mpirun-local": "launch_fanout_results.json", "mpirun-ssh": "launch_fanout_ssh_results.json",
           "srun": "launch_fanout_srun_results.json"}
# A pair job's wall time (plan.screen_schedule.PER_PAIR_S): start-up longer than that doubles a round.
JOB_S = 20.0


def cap_from_rows(rows, job_s=JOB_S):
    """The screen's default launches at once for one launcher: the largest measured count at which every launch
    exited 0 and the whole batch was done within one pair job's time (job_s); None when no count was."""
    fit = [row["count"] for row in rows if row["failed"] == 0 and row["timed_out"] == 0 and row["wall_s"] <= job_s]
    return max(fit) if fit else None


def caps(folder=HERE, job_s=JOB_S):
    """{kind: cap} from the committed results files."""
    found = {}
    for kind, name in RESULTS.items():
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            found[kind] = cap_from_rows(json.load(handle)["rows"], job_s)
    return found


# --- the table and main --------------------------------------------------------------------------------------------

def table(document):
    """Markdown rows: launches at once | exited 0 | failed | timed out | all done | median | slowest | launcher CPU |
    load before -> after (1 min)."""
    lines = []
    for row in document["rows"]:
        def seconds(value):
            return "-" if value is None else f"{value:.1f} s"
        cpu = row.get("launcher_cpu_s")
        load = f"{row['load_before'][0]:.1f} -> {row['load_after'][0]:.1f}" if row.get("load_before") else "-"
        lines.append(f"| {row['count']} | {row['ok']} | {row['failed']} | {row['timed_out']} | {seconds(row['wall_s'])} "
                     f"| {seconds(row['median_s'])} | {seconds(row['slowest_s'])} | "
                     f"{'-' if cpu is None else f'{cpu:.1f} s'} | {load} |")
    return "\n".join(lines)


def program_argv(args):
    return [args.program] + list(args.program_arg)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("local", "ssh", "srun", "ssh-inner", "srun-inner"), default="local")
    parser.add_argument("--counts", default="8,16,32,64,128")
    parser.add_argument("--out")
    parser.add_argument("--program", default="/bin/true")
    parser.add_argument("--program-arg", action="append", default=[], help="an argument of PROGRAM (repeat)")
    parser.add_argument("--limit-s", type=float, default=LIMIT_S)
    parser.add_argument("--settle-s", type=float, default=5.0, help="pause between batches (ssh, srun)")
    parser.add_argument("--srun-share", choices=("overlap", "exact", "whole"), default="overlap",
                        help="steps on shared nodes: --overlap, --exact (one CPU of each node), or neither (Slurm's "
                        "default since 21.08: a step takes every CPU of its nodes)")
    parser.add_argument("--srun-mpi", default="none", help="srun --mpi= (pmix for an MPI program)")
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    parser.add_argument("--cleanup-stale", action="store_true", help="remove namespaces of dead benchmarks and stop")
    parser.add_argument("--table", metavar="RESULTS.json", help="print the markdown rows of a results file and stop")
    parser.add_argument("--caps", action="store_true", help="print the caps the committed results give and stop")
    args = parser.parse_args(argv)
    if args.caps:
        print(json.dumps(caps()))
        return 0
    if args.table:
        with open(args.table, encoding="utf-8") as handle:
            print(table(json.load(handle)))
        return 0
    inner = inner_mode(args, ssh_inner, srun_inner)
    if inner is not None:
        return inner
    if args.cleanup_stale:
        print(f"launch_fanout: removed {len(cleanup_stale(tool('ip')))} stale namespace(s)", file=sys.stderr)
        return 0
    if not args.out:
        parser.error("--out is required")
    if args.mode in ("ssh", "srun") and os.geteuid() != 0:
        raise SystemExit(f"launch_fanout: --mode {args.mode} needs root (network namespaces)")
    tear_down_on_signals()
    program = program_argv(args)
    if args.mode == "local":
        rows = local_rows(parse_counts(args.counts), program, args.limit_s)
    elif args.mode == "ssh":
        rows = ssh_rows(args)
    else:
        rows = srun_rows(args)
    document = {"format": "launch_fanout/1", "mode": args.mode,
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(), "program": program[0] if len(program) == 1 else program,
                "limit_s": args.limit_s,
                "mpirun": subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                         check=False).stdout.splitlines()[:1], "rows": rows}
    if args.mode == "ssh":
        document["ssh"] = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    if args.mode == "srun":
        document["srun"] = subprocess.run(["srun", "--version"], capture_output=True, text=True,
                                          check=False).stdout.strip()
        document["srun_share"] = args.srun_share
    write_results(args.out, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
