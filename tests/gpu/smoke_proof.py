#!/usr/bin/env python3
"""The smoke's proof on a GPU machine (docs/ci.md, "What the smoke catches, measured"): one command, everything
under OUT, bounded by --budget-s.

  tests/gpu/smoke_proof.py OUT [--capture-runs 10] [--capture-every 0] [--clean-runs 20] [--full-runs 2] [--inject-runs 10]
                               [--inject10-runs 3] [--budget-s 420] [--raw] [--bin-dir DIR]
                               [--loads h2d:5,d2d:20 --load-tool PATH]

1. `smoke --capture N`: the reference, measured here (OUT/smoke_reference.json, OUT/capture.md: the table of the
   smallest change each case can catch).
2. --loads: a smoke beside each duty-cycled copy load (tests/gpu/copy_load.cu).
3. Clean runs against it (the first --full-runs with every part, the rest the timed parts alone) interleaved with
   runs that inject a slowdown into one part (smoke --parts PART --inject-slowdown PART=PCT, the test knob:
   CCLBENCH_TESTING=1 is set for those alone): --inject-runs per part at 5%, --inject10-runs per part at 10%.
   A clean run passes when it exits 0 (a false alarm otherwise); an injected run is caught when it exits 1 with a
   slowdown of a case of the injected part beyond its band or a slower whole GPU (an unstable finding alone does not
   count: it is reported beside).
4. OUT/summary.json and OUT/summary.md (rewritten after every run, so a run cut short still says what it saw):
   false alarms, caught counts, the slowdowns the smoke measured in the injected
   part, the calibration each tool reported, every run's wall time. --raw: OUT/raw.tar.gz, the capture's run
   directories and every judged run (samples included), for offline analysis.
Runs past the budget are recorded as not run. Exit 0 when every run that ran met its expectation, 1 otherwise.
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CCLBENCH = os.path.join(REPO, "scripts", "cclbench")
TIMED_PARTS = ("copy", "collective", "graph")
CALIBRATION_RE = re.compile(r"injected slowdown \(test knob\): (\S+): \+([\d.]+)% asked, \+([-\d.]+)% calibrated "
                            r"\(([\d.]+) cycles of spin after every (\d+) collective\(s\); ([\d.]+) us a collective "
                            r"without it, ([\d.]+) us for a zero-length spin\)")


def log(text):
    print(text, flush=True)


def cclbench(args, results, env_extra=None, timeout=600):
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("CCLBENCH_TESTING", None)
    env.update(env_extra or {})
    started = time.monotonic()
    result = subprocess.run([sys.executable, CCLBENCH, "smoke", "--results", results] + args, capture_output=True,
                            text=True, env=env, timeout=timeout, check=False)
    return result, time.monotonic() - started


def read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def part_seconds(run_dir):
    """{testcase name: seconds} of a run's JUnit file (each launch of each part)."""
    try:
        suite = ElementTree.parse(os.path.join(run_dir, "smoke.junit.xml")).getroot().find("testsuite")
    except (OSError, ElementTree.ParseError):
        return {}
    return {case.get("name"): float(case.get("time") or 0) for case in suite.findall("testcase")}


def calibrations(run_dir):
    """What the tools said of their calibration: coll_perf's lines in run.log, p2p_matrix's details."""
    found = []
    try:
        with open(os.path.join(run_dir, "run.log"), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                match = CALIBRATION_RE.search(line)
                if match:
                    found.append({"case": match.group(1), "asked_pct": float(match.group(2)),
                                  "calibrated_pct": float(match.group(3)), "spin_cycles": float(match.group(4)),
                                  "every": int(match.group(5)), "base_us": float(match.group(6)),
                                  "overhead_us": float(match.group(7))})
    except OSError:
        pass
    for path in sorted(glob.glob(os.path.join(run_dir, "smoke", "smoke.copy.rep*.json"))):
        document = read_json(path) or {}
        for result in document.get("results") or []:
            injected = (result.get("details") or {}).get("injected_slowdown")
            if injected:
                found.append({"case": f"{result['test']}.{os.path.basename(path)}", "asked_pct": injected.get("pct"),
                              "calibrated_pct": injected.get("calibrated_pct"), "spin_cycles": injected.get("spin_cycles"),
                              "every": 1, "base_us": injected.get("base_time_us"),
                              "overhead_us": injected.get("kernel_overhead_us")})
    return found


def judged(run_dir):
    """(findings, {point/case: (diff, band, verdict, unstable)}, whole-GPU shift) of a run's compare.json."""
    document = read_json(os.path.join(run_dir, "compare.json")) or {}
    cases = {f"{c['point']}/{c['case_id']}": {"diff_pct": c.get("diff_pct"), "band_pct": c.get("band_pct"),
                                               "verdict": c.get("verdict"), "unstable": bool(c.get("unstable"))}
             for c in document.get("cases") or []}
    return document.get("regressions") or [], cases, (document.get("smoke") or {}).get("gpu_shift")


def schedule(args):
    """The judged runs in order: clean runs spread evenly among the injected ones."""
    injected = []
    # rounds of every part, a 10% round after each of the first inject10_runs 5% rounds: a proof cut short by its
    # budget has seen both
    for round_number in range(max(args.inject_runs, args.inject10_runs)):
        for pct, count in ((5.0, args.inject_runs), (10.0, args.inject10_runs)):
            if round_number < count:
                injected += [("inject", part, pct) for part in TIMED_PARTS]
    total = len(injected) + args.clean_runs
    jobs, clean_done = [], 0
    for index in range(total):
        # the clean run due by now, if any: clean runs at even spacing over the whole sequence
        if clean_done < args.clean_runs and (not injected or clean_done * total <= index * args.clean_runs):
            jobs.append(("clean", None, None))
            clean_done += 1
        else:
            jobs.append(injected.pop(0))
    return jobs


def run_loads(args, common, results, reference_path, started):
    """--loads KIND:DUTY,...: right after the capture, a smoke of the timed parts against the reference beside a
    duty-cycled copy load of --load-tool (tests/gpu/copy_load.cu), one run a load: interference, not the test knob.
    Caught: exit 1 with any finding (a case slower, unstable, or the whole GPU)."""
    loads = []
    for number, spec in enumerate(args.loads.split(","), 1):
        kind, duty = spec.split(":")
        run = {"number": number, "kind": "load", "load": kind, "duty_pct": float(duty), "status": "not run"}
        loads.append(run)
        if time.monotonic() - started > args.budget_s:
            continue
        run_id = f"load{number:02d}-{kind}-{duty}"
        load = subprocess.Popen([args.load_tool, kind, duty, "30"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        time.sleep(1.0)
        result, seconds = cclbench(common + ["--run-id", run_id, "--against", reference_path,
                                             "--parts", ",".join(TIMED_PARTS)], results)
        load.terminate()
        load_text = load.communicate(timeout=30)[0].strip()
        findings, cases, shift = judged(os.path.join(results, run_id))
        run.update(status="ran", run_id=run_id, exit=result.returncode, wall_s=seconds, findings=findings,
                   cases=cases, shift=shift, caught=result.returncode == 1 and bool(findings), load_output=load_text,
                   unstable=any(": unstable: " in f for f in findings))
        log(f"[{time.monotonic() - started:6.1f}s] {run_id}: exit {result.returncode} in {seconds:.1f}s "
            f"caught={run['caught']} {findings[:3]} (load: {load_text[-200:]})")
    return loads


def summarize(runs, capture, reference, out, quiet=False):
    clean = [r for r in runs if r["kind"] == "clean" and r["status"] == "ran"]
    summary = {"capture": capture, "clean": {"runs": len(clean), "false_alarms": sum(1 for r in clean if r["exit"] != 0),
                                            "exits": [r["exit"] for r in clean],
                                            "wall_s": [round(r["wall_s"], 1) for r in clean],
                                            "full_wall_s": [round(r["wall_s"], 1) for r in clean if r["full"]]},
               "injected": {}, "runs": runs}
    worst = {}
    for run in clean:
        for case, item in run["cases"].items():
            if item["diff_pct"] is not None and item["band_pct"]:
                worst.setdefault(case, []).append(item["diff_pct"] / item["band_pct"])
    summary["clean"]["largest_diff_over_band"] = {case: round(max(values, key=abs), 3) for case, values in worst.items()}
    summary["clean"]["shift_over_band"] = [round(r["shift"]["diff"] / r["shift"]["band"], 3) for r in clean
                                           if r.get("shift")]
    for part in TIMED_PARTS:
        for pct in sorted({r["pct"] for r in runs if r["kind"] == "inject"}):
            chosen = [r for r in runs if r["kind"] == "inject" and r["part"] == part and r["pct"] == pct
                      and r["status"] == "ran"]
            if not chosen:
                continue
            diffs = {}
            for run in chosen:
                for case, item in run["cases"].items():
                    if case.startswith(f"smoke.{part}/") and item["diff_pct"] is not None:
                        diffs.setdefault(case, []).append(item["diff_pct"])
            summary["injected"][f"{part}@{pct:g}"] = {
                "runs": len(chosen), "caught": sum(1 for r in chosen if r["caught"]),
                "unstable_too": sum(1 for r in chosen if r["unstable"]),
                "exits": [r["exit"] for r in chosen], "wall_s": [round(r["wall_s"], 1) for r in chosen],
                "measured_diff_pct": {case: {"median": round(statistics.median(v), 2), "min": round(min(v), 2),
                                             "max": round(max(v), 2)} for case, v in diffs.items()},
                "caught_by": sorted({f.split(":")[0] for r in chosen for f in r["findings"]}),
                "calibrations": [c for r in chosen[:1] for c in r["calibrations"]]}
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=1)
    lines = ["# smoke proof", "", f"capture: {capture}", "",
             f"clean runs: {summary['clean']['runs']}, false alarms: {summary['clean']['false_alarms']}, wall "
             f"{summary['clean']['wall_s']} s (full smokes {summary['clean']['full_wall_s']} s)", "",
             "largest diff / band over the clean runs, per case: " + json.dumps(summary["clean"]["largest_diff_over_band"]),
             "", "whole-GPU index / band per clean run: " + json.dumps(summary["clean"]["shift_over_band"]), "",
             "| injected | runs | caught | wall s | measured diff % (median, min..max) |", "|---|---|---|---|---|"]
    for key, item in summary["injected"].items():
        measured = "; ".join(f"{case.split('/', 1)[1]} {v['median']:+.2f} ({v['min']:+.2f}..{v['max']:+.2f})"
                             for case, v in item["measured_diff_pct"].items())
        lines.append(f"| {key}% | {item['runs']} | {item['caught']} (unstable too: {item['unstable_too']}) | "
                     f"{item['wall_s']} | {measured} |")
    not_run = [f"{r['kind']} {r['part'] or ''} {r['pct'] or ''}".strip() for r in runs if r["status"] != "ran"]
    lines += ["", f"not run (budget): {len(not_run)} {not_run[:12]}"]
    if reference:
        lines += ["", "calibrations (first run of each injected part): "]
        for key, item in summary["injected"].items():
            for c in item["calibrations"]:
                lines.append(f"- {key}: {c}")
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    if not quiet:
        log("\n".join(lines))
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--capture-runs", type=int, default=10)
    parser.add_argument("--capture-every", type=float, default=0.0,
                        help="seconds from one capture run's start to the next (smoke --capture-every; 0: back to back)")
    parser.add_argument("--clean-runs", type=int, default=20)
    parser.add_argument("--full-runs", type=int, default=2)
    parser.add_argument("--inject-runs", type=int, default=10)
    parser.add_argument("--inject10-runs", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=420)
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--loads", default="", help="KIND:DUTY,... (h2d or d2d, percent): after the judged runs, one "
                        "smoke against the reference beside each duty-cycled copy load of --load-tool")
    parser.add_argument("--load-tool", default="/tmp/copy_load", help="tests/gpu/copy_load.cu, built")
    parser.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bench", "apps"))
    parser.add_argument("--reference", help="a measured reference (smoke_reference.json of an earlier capture on this "
                        "machine): judge against it instead of capturing one (a proof split over several sessions)")
    parser.add_argument("--smoke-arg", action="append", default=[],
                        help="one more argument for every smoke (a try-out on the test doubles: --mpirun FAKE)")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    results = os.path.join("/tmp", "smoke-proof", "results")
    shutil.rmtree(os.path.dirname(results), ignore_errors=True)
    os.makedirs(results)
    started = time.monotonic()
    common = ["--bin-dir", args.bin_dir] + args.smoke_arg

    ref_dir = os.path.join(results, "ref")
    if args.reference:
        os.makedirs(ref_dir)
        shutil.copy(args.reference, os.path.join(ref_dir, "smoke_reference.json"))
        reference = read_json(os.path.join(ref_dir, "smoke_reference.json"))
        capture = {"runs": ((reference or {}).get("capture") or {}).get("runs"), "exit": 0, "wall_s": None,
                   "stderr_tail": [f"reference given: {args.reference}"], "given": True}
        result = subprocess.CompletedProcess([], 0)
        log(f"reference given: {args.reference} ({capture['runs']} runs)")
    else:
        log(f"capture: {args.capture_runs} runs")
        spread = ["--capture-every", f"{args.capture_every:g}"] if args.capture_every else []
        result, seconds = cclbench(common + ["--run-id", "ref", "--capture", str(args.capture_runs)] + spread, results)
        capture = {"runs": args.capture_runs, "every_s": args.capture_every, "exit": result.returncode,
                   "wall_s": round(seconds, 1),
                   "stderr_tail": result.stderr.strip().splitlines()[-3:]}
        log(f"capture exit {result.returncode} in {seconds:.1f}s: {capture['stderr_tail']}")
        reference = read_json(os.path.join(ref_dir, "smoke_reference.json"))
    for name in ("smoke_reference.json", "capture.md"):
        if os.path.exists(os.path.join(ref_dir, name)):
            shutil.copy(os.path.join(ref_dir, name), os.path.join(out, name))
    runs, loads = [], []
    if reference and capture["exit"] == 0 and args.loads:
        loads = run_loads(args, common, results, os.path.join(ref_dir, "smoke_reference.json"), started)
    if reference and result.returncode == 0:
        full_left = args.full_runs
        for number, (kind, part, pct) in enumerate(schedule(args), 1):
            run = {"number": number, "kind": kind, "part": part, "pct": pct, "status": "not run", "full": False}
            runs.append(run)
            if time.monotonic() - started > args.budget_s:
                continue
            run_id = f"{kind}{number:03d}" + (f"-{part}-{pct:g}" if part else "")
            extra, env = ["--run-id", run_id, "--against", os.path.join(ref_dir, "smoke_reference.json")], None
            if kind == "clean" and full_left > 0:
                full_left -= 1
                run["full"] = True
            elif kind == "clean":
                extra += ["--parts", ",".join(TIMED_PARTS)]
            else:
                extra += ["--parts", part, "--inject-slowdown", f"{part}={pct:g}"]
                env = {"CCLBENCH_TESTING": "1"}
            result, seconds = cclbench(common + extra, results, env)
            run_dir = os.path.join(results, run_id)
            findings, cases, shift = judged(run_dir)
            run.update(status="ran", run_id=run_id, exit=result.returncode, wall_s=seconds, findings=findings,
                       cases=cases, shift=shift, parts_s=part_seconds(run_dir),
                       last_line=(result.stderr.strip().splitlines() or [""])[-1][:400])
            if kind == "inject":
                slower = re.compile(rf"^smoke\.{part} \S+: \+[\d.]+% \(A ")
                run["caught"] = result.returncode == 1 and any(
                    slower.match(f) or f.startswith("whole GPU") for f in findings)
                run["unstable"] = any(": unstable: " in f for f in findings)
                run["calibrations"] = calibrations(run_dir)
            log(f"[{time.monotonic() - started:6.1f}s] {run_id}: exit {result.returncode} in {seconds:.1f}s"
                + (f" caught={run['caught']}" if kind == "inject" else "") + f" {run['last_line'][:240]}")
            summarize(runs, capture, reference, out, quiet=True)
    summary = summarize(runs, capture, reference, out)
    if loads:
        summary["loads"] = loads
        with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=1)
    if args.raw:
        with tarfile.open(os.path.join(out, "raw.tar.gz"), "w:gz") as tar:
            tar.add(ref_dir, arcname="ref")
            for run in [r for r in runs + loads if r["status"] == "ran"]:
                tar.add(os.path.join(results, run["run_id"]), arcname=run["run_id"])
    clean = summary["clean"]
    ok = result is not None and capture["exit"] == 0 and clean["false_alarms"] == 0 and all(
        item["caught"] == item["runs"] for item in summary["injected"].values())
    log(f"smoke_proof: {'PASS' if ok else 'FAIL'} in {time.monotonic() - started:.0f}s; results under {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
