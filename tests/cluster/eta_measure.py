#!/usr/bin/env python3
"""The ETA promise, measured (issue 43 item 6): on a virtual cluster of two nodes (vcluster.py, the MPI backend,
default sizes, `--coll all_reduce --repeat 1 --netdevs eth0,eth3`), a baseline runs healthy, then again with node2's
rails dying as intra.node1 starts (the fault matrix's rails_die set-up: switch ports stop forwarding, carrier up);
rail_dies (not run by default): node2's eth3 alone dies then, so rail-eth0 alone still runs after the failed line.
Every progress line's ETA is stamped as it arrives and judged against the real end (the tool's exit) by eta_lines.py
(its error columns and what is judged). Not a CI test (minutes of CPU): run by hand, root, a build in
CCLBENCH_BINARY_DIR (default ./build):

    eta_measure.py --out DIR [--scenario healthy|rails_die ...]
    eta_measure.py --out DIR --command CMD [ARG ...]        any cclbench run as given (e.g. a one-GPU baseline):
                                                             its lines stamped into DIR/eta.json, its table
    eta_measure.py --out DIR --cell CELL_DIR [--cell ...]    a fault matrix cell's lines (its eta.json; the GPU
                                                             machine's cells, NCCL over sockets)
    eta_measure.py --out DIR --keep ETA_JSON RUN_DIR         a replayable copy of such a run (for --replay)
    eta_measure.py --out X --replay DIR/eta_measure.json DIR/run_manifest.json [--source CHECKOUT]

writes DIR/eta_measure.json and prints a markdown table per scenario.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fault_matrix  # noqa: E402
from eta_lines import SHORT_S, judge_lines, write_eta, write_stamped  # noqa: E402
import vcluster  # noqa: E402

ARGS = ["--coll", "all_reduce", "--repeat", "1", "--netdevs", "eth0,eth3"]
SCENARIOS = {"healthy": {"fault": "none"},
             "rails_die": {"fault": "paths_die", "node": "node2", "at": "intra.node1"},
             "rail_dies": {"fault": "paths_die", "node": "node2", "at": "intra.node1", "rails": ["eth3"]}}
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
    write_stamped(os.path.join(cell_dir, "stderr.txt"), lines)
    with open(os.path.join(cell_dir, "stdout.txt"), "w") as handle:
        handle.write(stdout)
    rows, worst = judge_lines(lines, total_s)
    return {"scenario": name, "exit": process.returncode, "total_s": round(total_s, 1),
            "fault_at_s": None if killer is None or killer.fired_at is None else round(killer.fired_at - started, 1),
            "worst_after_sanity": worst, "lines": rows}


def run_command(argv, out_dir):
    """Runs argv (its stdout passed through), its stderr lines stamped as they arrive and kept in
    out_dir/stderr.txt; out_dir/eta.json as a fault matrix cell writes it; prints the ETA table. Returns its exit."""
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = fault_matrix.StampedReader(process, started)
    reader.finish()
    total_s = round(time.monotonic() - started, 1)
    sys.stdout.write(reader.stdout())
    write_stamped(os.path.join(out_dir, "stderr.txt"), reader.stamped)
    write_eta(os.path.join(out_dir, "eta.json"), process.returncode, total_s, None, reader.stamped)
    rows, worst = judge_lines(reader.stamped, total_s)
    print(markdown({"scenario": os.path.basename(argv[0]), "exit": process.returncode, "total_s": total_s,
                    "worst_after_sanity": worst, "lines": rows}) + "\n")
    return process.returncode


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
    """Prints replayed()'s table and each launch's work against its model."""
    result, manifest, launch_parts = replayed(results_path, manifest_path, scenario, source)
    print(markdown(result) + "\n")
    print(work_ratios(manifest, launch_parts) + "\n")
    return 0


def replayed(results_path, manifest_path, scenario="healthy", source=None):
    """The ETA this cclbench's estimate gives at each line of a healthy run measured with another (its launches'
    elapsed_s, and work_s where the run recorded it, through plan/estimate.calibrated_eta), against the time that run
    really had left: (the judged result, the run's manifest, the estimate's launch_parts)."""
    # source: another checkout's estimate (e.g. `git archive` of an older commit), to replay a run through it
    sys.path.insert(0, os.path.join(source or fault_matrix.SOURCE_DIR, "scripts"))
    from cclbench_lib.plan import estimate
    calibrated_eta, launch_kind, launch_parts = estimate.calibrated_eta, estimate.launch_kind, estimate.launch_parts
    # An estimate that predicts size by size (work_shape, measured_shape) gets the run's records where they are kept
    # beside its manifest (sanity.jsonl, cases.jsonl), as the run gave them to it.
    shaped = hasattr(estimate, "measured_shape")
    records = {}
    for name in ("sanity.jsonl", "cases.jsonl"):
        path = os.path.join(os.path.dirname(manifest_path), name)
        if shaped and os.path.isfile(path):
            with open(path) as handle:
                for text in handle:
                    record = json.loads(text)
                    records.setdefault(record.get("point"), []).append(record)
    with open(results_path) as handle:
        result = next(item for item in json.load(handle)["scenarios"] if item["scenario"] == scenario)
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    remaining = {launch["name"]: (launch_kind(launch),) + tuple(launch_parts(launch)) +
                 ((estimate.work_shape(launch) if launch.get("kind") in estimate.TWO_PASS_KINDS else None,)
                  if shaped else ()) for launch in manifest["plan"]}
    measured, lines = [], []
    for launch, row in zip(manifest["plan"], result["lines"]):
        point = manifest["points"][launch["name"]]
        shape = (estimate.measured_shape(launch, records.get(launch["name"]), point.get("work_s"))
                 if shaped and records.get(launch["name"]) else None)
        measured.append(remaining.pop(launch["name"])[:3] + (point["elapsed_s"], point.get("work_s"))
                        + ((shape,) if shaped else ()))
        try:
            left = calibrated_eta(measured, list(remaining.values()))
        except ValueError:  # an estimate from before work_s: (class, start-up, work, wall) only
            left = calibrated_eta([row[:4] for row in measured], list(remaining.values()))
        # the run's end, as the runner adds it (an estimate from before report_seconds adds nothing)
        eta = round(left + (estimate.report_seconds(result.get("plots", False))
                            if hasattr(estimate, "report_seconds") else 0.0))
        lines.append((row["at_s"], f"cclbench: {row['line']}: {row['status']}; elapsed 0m00s, ETA {eta // 60}m{eta % 60:02d}s"))
    result = dict(result, scenario=f"{scenario} (replayed)")
    result["lines"], result["worst_after_sanity"] = judge_lines(lines, result["total_s"])
    return result, manifest, launch_parts


def judged_stamped(stamped, scenario, **extra):
    """A stamped run's result (a fault matrix cell's or --command's eta.json): its lines judged against its end, with
    extra keys (--keep's plots) before the judgement."""
    rows, worst = judge_lines([tuple(line) for line in stamped["lines"]], stamped["total_s"])
    return {"scenario": scenario, "exit": stamped["exit"], "total_s": stamped["total_s"],
            "fault_at_s": stamped.get("fault_at_s"), **extra, "worst_after_sanity": worst, "lines": rows}


# What the estimate reads of a case record (plan/estimate.measured_shape), all that --keep copies of them.
KEPT_RECORD_KEYS = ("point", "bytes", "collective")


def drew_plots(run_dir):
    """Whether the run's report drew plots: a PNG under plots/, or report.md showing one (render/report.py links each
    plot it drew as `](plots/NAME.png)`; a copy of a run without its images still says so)."""
    plots_dir = os.path.join(run_dir, "plots")
    if os.path.isdir(plots_dir) and any(name.endswith(".png") for name in os.listdir(plots_dir)):
        return True
    report = os.path.join(run_dir, "report.md")
    if not os.path.isfile(report):
        return False
    with open(report) as handle:
        return "](plots/" in handle.read()


def keep(eta_path, run_dir, out_dir):
    """A replayable copy of a run whose lines were stamped (a fault matrix cell's or --command's eta.json): out_dir/
    eta_measure.json (its lines judged; scenario "healthy" where the run exited 0, else "failed"; "plots": whether
    its report drew plots, which the ETA's report term replays), the run's
    run_manifest.json, and its records trimmed to what the estimate reads (KEPT_RECORD_KEYS and time_us.mean) as
    sanity.jsonl and cases.jsonl."""
    with open(eta_path) as handle:
        stamped = json.load(handle)
    plots = drew_plots(run_dir)
    result = judged_stamped(stamped, "healthy" if stamped["exit"] == 0 else "failed", plots=plots)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "eta_measure.json"), "w") as handle:
        json.dump({"scenarios": [result]}, handle, indent=1)
    with open(os.path.join(run_dir, "run_manifest.json")) as handle:
        manifest = json.load(handle)
    with open(os.path.join(out_dir, "run_manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    for name in ("sanity.jsonl", "cases.jsonl"):
        source = os.path.join(run_dir, name)
        if not os.path.isfile(source):
            continue
        with open(source) as handle, open(os.path.join(out_dir, name), "w") as kept:
            for text in handle:
                record = json.loads(text)
                trimmed = {key: record.get(key) for key in KEPT_RECORD_KEYS}
                mean = (record.get("time_us") or {}).get("mean") if isinstance(record.get("time_us"), dict) else None
                trimmed["time_us"] = {"mean": mean}
                kept.write(json.dumps(trimmed) + "\n")
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
    parser.add_argument("--command", nargs=argparse.REMAINDER, metavar="CMD",
                        help="run this command (no shell), stamp its progress lines into OUT/eta.json, print its table")
    parser.add_argument("--cell", action="append", metavar="CELL_DIR",
                        help="judge the lines of a fault matrix cell (CELL_DIR/eta.json), print its table")
    parser.add_argument("--rejudge", metavar="JSON", help="judge an eta_measure.json's lines again, print its tables")
    parser.add_argument("--replay", nargs=2, metavar=("JSON", "MANIFEST"),
                        help="this cclbench's ETA at each line of a healthy run measured before (its eta_measure.json "
                             "and its run_manifest.json: the plan and each launch's elapsed_s)")
    parser.add_argument("--keep", nargs=2, metavar=("ETA_JSON", "RUN_DIR"),
                        help="write a replayable copy of a run to OUT: its stamped lines (a cell's or --command's "
                             "eta.json) judged, its manifest, its records trimmed to what the estimate reads")
    parser.add_argument("--source", metavar="DIR", help="with --replay: the estimate of this checkout (its "
                        "scripts/cclbench_lib), not this one's")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(*args.replay, source=args.source)
    if args.keep:
        return keep(args.keep[0], args.keep[1], args.out)
    if args.command:
        os.makedirs(args.out, exist_ok=True)
        return run_command(args.command, args.out)
    if args.cell:
        for cell_dir in args.cell:
            with open(os.path.join(cell_dir, "eta.json")) as handle:
                stamped = json.load(handle)
            print(markdown(judged_stamped(stamped, os.path.basename(os.path.normpath(cell_dir)))) + "\n")
        return 0
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
