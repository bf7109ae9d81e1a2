#!/usr/bin/env python3
"""The ETA promise, measured (issue 43 item 6): on a virtual cluster of two nodes (vcluster.py, the MPI backend,
default sizes, `--coll all_reduce --repeat 1 --netdevs eth0,eth3`), a baseline runs healthy, then again with node2's
rails dying as intra.node1 starts (the fault matrix's rails_die set-up: switch ports stop forwarding, carrier up);
rail_dies (not run by default): node2's eth3 alone dies then, so rail-eth0 alone still runs after the failed line.
Every progress line's ETA ("cclbench: [i/N] NAME: ...; elapsed XmYYs, ETA XmYYs") is stamped as it arrives and set
against the real end (the tool's exit):

    left_s      the real time left at the line (end - the line's arrival)
    error       (ETA - left_s) / left_s: the ETA against the time really left (the worst over lines with 10 s or
                more left; with less, the seconds it is off: whole seconds and the report's writing)
    end_error   (elapsed + ETA - total) / total: the end it predicts against the real end, from the start

"After sanity": the lines from sanity's own line on (it is printed when sanity ends); where a launch failed, the
lines from its line on (those before it predicted a healthy run: nothing had shown the fault yet). Not a CI test (minutes of
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
             "rails_die": {"fault": "paths_die", "node": "node2", "at": "intra.node1"},
             "rail_dies": {"fault": "paths_die", "node": "node2", "at": "intra.node1", "rails": ["eth3"]}}
LINE = re.compile(r"cclbench: \[(\d+)/(\d+)\] (\S+): (.*?); elapsed (\S+), ETA (\S+)")
CLOCK = re.compile(r"(?:(\d+)h)?(\d+)m(\d+)s")
SHORT_S = 10.0


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
    failed = next((index for index, row in enumerate(rows) if row["status"] == "failed"), None)
    for index, row in enumerate(rows):
        row["after_failure"] = failed is not None and index >= failed
    # With a launch that failed, the lines before it predicted a healthy run (nothing had shown the fault yet):
    # judged are the lines from the failure on.
    judged = [row for row in rows if row["after_sanity"] and (failed is None or row["after_failure"])]
    # Under SHORT_S really left the ETA's whole seconds and the report's own writing are the error: those lines are
    # judged by their seconds, the others by their share of the time left.
    worst = {"error": max((abs(row["error"]) for row in judged if row["error"] is not None
                           and row["left_s"] >= SHORT_S), default=None),
             "end_error": max((abs(row["end_error"]) for row in judged if row["end_error"] is not None), default=None),
             "short_s": max((round(abs(row["eta_s"] - row["left_s"]), 1) for row in judged
                             if row["eta_s"] is not None and row["left_s"] < SHORT_S), default=None)}
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
           + f"; worst after sanity: ETA vs time left {result['worst_after_sanity']['error']} (lines with "
             f"{SHORT_S:g} s or more left), predicted end vs real end {result['worst_after_sanity']['end_error']}, "
             f"seconds off with less left {result['worst_after_sanity'].get('short_s')}", "",
           "| line | status | at (s) | ETA (s) | really left (s) | error | end error |", "|---|---|--:|--:|--:|--:|--:|"]
    for row in result["lines"]:
        out.append(f"| {row['line']} | {row['status']} | {row['at_s']} | {row['eta_s'] if row['eta_s'] is not None else '-'} "
                   f"| {row['left_s']} | {'-' if row['error'] is None else format(row['error'], '+.0%')} "
                   f"| {'-' if row['end_error'] is None else format(row['end_error'], '+.0%')} |")
    return "\n".join(out)


def replay(results_path, manifest_path, scenario="healthy", source=None):
    """The ETA this cclbench's estimate gives at each line of a healthy run measured with another (its launches'
    elapsed_s, and work_s where the run recorded it, through plan/estimate.calibrated_eta), against the time that run
    really had left."""
    # source: another checkout's estimate (e.g. `git archive` of an older commit), to replay a run through it
    sys.path.insert(0, os.path.join(source or fault_matrix.SOURCE_DIR, "scripts"))
    from cclbench_lib.plan.estimate import calibrated_eta, launch_kind, launch_parts
    with open(results_path) as handle:
        result = next(item for item in json.load(handle)["scenarios"] if item["scenario"] == scenario)
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    remaining = {launch["name"]: (launch_kind(launch),) + tuple(launch_parts(launch)) for launch in manifest["plan"]}
    measured, lines = [], []
    for launch, row in zip(manifest["plan"], result["lines"]):
        point = manifest["points"][launch["name"]]
        measured.append(remaining.pop(launch["name"]) + (point["elapsed_s"], point.get("work_s")))
        try:
            eta = round(calibrated_eta(measured, list(remaining.values())))
        except ValueError:  # an estimate from before work_s: (class, start-up, work, wall) only
            eta = round(calibrated_eta([row[:4] for row in measured], list(remaining.values())))
        lines.append((row["at_s"], f"cclbench: {row['line']}: {row['status']}; elapsed 0m00s, ETA {eta // 60}m{eta % 60:02d}s"))
    result = dict(result, scenario=f"{scenario} (replayed)")
    result["lines"], result["worst_after_sanity"] = judge_lines(lines, result["total_s"])
    print(markdown(result) + "\n")
    print(work_ratios(manifest, launch_parts) + "\n")
    return 0


def work_ratios(manifest, launch_parts):
    """Each launch's work against its modelled work (work_s / launch_parts' work; '~' where the run recorded no
    work_s: its wall less 1 s): how far apart identical launches of one run are - the machine's noise, which no
    estimate removes."""
    words = []
    for launch in manifest["plan"]:
        _start, work = launch_parts(launch)
        point = manifest["points"][launch["name"]]
        if work <= 0 or point.get("elapsed_s") is None:
            continue
        measured = point.get("work_s")
        approximate = measured is None
        if approximate:
            measured = max(0.0, point["elapsed_s"] - 1.0)
        words.append(f"{launch['name']} {measured / work:.2f}{'~' if approximate else ''}")
    return "work / modelled work: " + ", ".join(words)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--rejudge", metavar="JSON", help="judge an eta_measure.json's lines again, print its tables")
    parser.add_argument("--replay", nargs=2, metavar=("JSON", "MANIFEST"),
                        help="this cclbench's ETA at each line of a healthy run measured before (its eta_measure.json "
                             "and its run_manifest.json: the plan and each launch's elapsed_s)")
    parser.add_argument("--source", metavar="DIR", help="with --replay: the estimate of this checkout (its "
                        "scripts/cclbench_lib), not this one's")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(*args.replay, source=args.source)
    if args.rejudge:
        with open(args.rejudge) as handle:
            document = json.load(handle)
        for result in document["scenarios"]:
            lines = [(row["at_s"], f"cclbench: {row['line']}: {row['status']}; elapsed 0m00s, ETA "
                                   + ("-" if row["eta_s"] is None else f"{row['eta_s'] // 60}m{row['eta_s'] % 60:02d}s"))
                     for row in result["lines"]]
            result["lines"], result["worst_after_sanity"] = judge_lines(lines, result["total_s"])
            print(markdown(result) + "\n")
        return 0
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
