#!/usr/bin/env python3
"""The ETA promise, measured (issue 43 item 6): on a virtual cluster of two nodes (vcluster.py, the MPI backend,
default sizes, `--coll all_reduce --repeat 1 --netdevs eth0,eth3`), a baseline runs healthy, then again with node2's
rails dying as intra.node1 starts (the fault matrix's rails_die set-up: switch ports stop forwarding, carrier up).
Every progress line's ETA ("cclbench: [i/N] NAME: ...; elapsed XmYYs, ETA XmYYs") is stamped as it arrives and set
against the real end (the tool's exit):

    left_s      the real time left at the line (end - the line's arrival)
    error       (ETA - left_s) / left_s: the ETA against the time really left
    end_error   (elapsed + ETA - total) / total: the end it predicts against the real end, from the start

"After sanity": the lines from sanity's own line on (it is printed when sanity ends). Not a CI test (minutes of
CPU): run by hand, root, a build in CCLBENCH_BINARY_DIR (default ./build):

    eta_measure.py --out DIR [--scenario healthy|rails_die ...]

writes DIR/eta_measure.json and prints a markdown table per scenario.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fault_matrix  # noqa: E402
import vcluster  # noqa: E402

ARGS = ["--coll", "all_reduce", "--repeat", "1", "--netdevs", "eth0,eth3"]
SCENARIOS = {"healthy": {"fault": "none"},
             "rails_die": {"fault": "paths_die", "node": "node2", "at": "intra.node1"}}
LINE = re.compile(r"cclbench: \[(\d+)/(\d+)\] (\S+): (.*?); elapsed (\S+), ETA (\S+)")
CLOCK = re.compile(r"(?:(\d+)h)?(\d+)m(\d+)s")


def clock_seconds(text):
    """'1m05s' -> 65, '1h02m03s' -> 3723; '-' (no ETA yet) -> None."""
    found = CLOCK.fullmatch(text)
    if not found:
        return None
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def judge_lines(lines, total_s, after="sanity"):
    """lines: [(arrival s from the start, text)]; the rows of the progress lines with their errors, and the worst
    absolute errors from `after`'s line on (None when there is none)."""
    rows = []
    seen_after = False
    for arrived, text in lines:
        found = LINE.search(text)
        if not found:
            continue
        index, count, name, took, elapsed, eta = found.groups()
        seen_after = seen_after or name == after
        eta_s = clock_seconds(eta)
        left_s = total_s - arrived
        row = {"line": f"[{index}/{count}] {name}", "status": took.split(" in ")[0], "at_s": round(arrived, 1),
               "eta_s": eta_s, "left_s": round(left_s, 1), "after_sanity": seen_after,
               "error": None if eta_s is None or left_s <= 0 else round((eta_s - left_s) / left_s, 3),
               "end_error": None if eta_s is None else round((arrived + eta_s - total_s) / total_s, 3)}
        rows.append(row)
    judged = [row for row in rows if row["after_sanity"]]
    worst = {key: max((abs(row[key]) for row in judged if row[key] is not None), default=None)
             for key in ("error", "end_error")}
    return rows, worst


def run_scenario(cluster, name, out_dir):
    fault = SCENARIOS[name]
    runner = fault_matrix.Runner(out_dir, "mpi", {"baseline": ARGS})
    cell = {"id": f"eta.{name}", "nodes": 2, "tool": "baseline", "fault": fault}
    cell_dir = os.path.join(out_dir, name)
    os.makedirs(cell_dir, exist_ok=True)
    marks = os.path.join(cell_dir, "injected.txt")
    bin_dir = os.path.join(cell_dir, "bin")
    fault_matrix.make_bin_dir(bin_dir, fault, marks, "mpi")
    argv = runner.argv(cluster, cell, bin_dir, os.path.join(cell_dir, "results"))
    inodes = {os.stat(f"/run/netns/{cluster.ns(node)}").st_ino for node in cluster.nodes}
    fault_matrix.clear_faults(cluster)
    killer = None
    if fault["fault"] == "paths_die":
        killer = fault_matrix.PathKiller(cluster, fault, inodes, marks)
        killer.start()
    lines = []
    started = time.monotonic()
    process = cluster.popen(cluster.nodes[0], argv, env=runner.environment(), cwd=cell_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def read():
        for text in process.stderr:
            lines.append((time.monotonic() - started, text.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stdout = process.stdout.read()
    process.wait()
    total_s = time.monotonic() - started
    reader.join(10)
    if killer is not None:
        killer.stop()
    fault_matrix.clear_faults(cluster)
    with open(os.path.join(cell_dir, "stderr.txt"), "w") as handle:
        handle.write("".join(f"{at:8.1f} {text}\n" for at, text in lines))
    with open(os.path.join(cell_dir, "stdout.txt"), "w") as handle:
        handle.write(stdout)
    rows, worst = judge_lines(lines, total_s)
    return {"scenario": name, "exit": process.returncode, "total_s": round(total_s, 1),
            "fault_at_s": None if killer is None or killer.fired_at is None else round(killer.fired_at - started, 1),
            "worst_after_sanity": worst, "lines": rows}


def markdown(result):
    out = [f"{result['scenario']}: exit {result['exit']}, {result['total_s']} s"
           + (f", fault at {result['fault_at_s']} s" if result.get("fault_at_s") is not None else "")
           + f"; worst after sanity: ETA vs time left {result['worst_after_sanity']['error']}, "
             f"predicted end vs real end {result['worst_after_sanity']['end_error']}", "",
           "| line | status | at (s) | ETA (s) | really left (s) | error | end error |", "|---|---|--:|--:|--:|--:|--:|"]
    for row in result["lines"]:
        out.append(f"| {row['line']} | {row['status']} | {row['at_s']} | {row['eta_s'] if row['eta_s'] is not None else '-'} "
                   f"| {row['left_s']} | {'-' if row['error'] is None else format(row['error'], '+.0%')} "
                   f"| {'-' if row['end_error'] is None else format(row['end_error'], '+.0%')} |")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = parser.parse_args(argv)
    try:
        vcluster.check_supported()
    except vcluster.Unsupported as error:
        print(f"eta_measure: {error}", file=sys.stderr)
        return 77
    os.makedirs(args.out, exist_ok=True)
    results = []
    with vcluster.Cluster(fault_matrix.fleet(2)) as cluster:
        for name in args.scenario or ["healthy", "rails_die"]:
            results.append(run_scenario(cluster, name, os.path.abspath(args.out)))
            print(markdown(results[-1]) + "\n", flush=True)
            with open(os.path.join(args.out, "eta_measure.json"), "w") as handle:
                json.dump({"created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "commit": fault_matrix._commit(), "args": ARGS, "scenarios": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
