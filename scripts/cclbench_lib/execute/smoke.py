"""`smoke`: the single-GPU CI smoke test, under a minute, with a JUnit XML file for CI systems.

With a GPU: topology; the smoke's comparable cases (plan/smoke_cases.py: the GPU's local copies by copy engine and
SM, host-to-device and device-to-host, a one-rank AllReduce at 16M-64M and one in a CUDA graph, each three times);
the baseline's multi-rank correctness check on 4 emulated ranks (--share-gpu). Every coll_perf part is told
--backend nccl: a part planned for the GPU that cannot run there fails with the tool's reason, never passing on
host memory. Without a GPU: topology and the MPI-backend collectives (1 and 4 ranks); the GPU parts are reported as
skipped. Exit 0 only when every part that ran passed.

The run's smoke cases and the hardware and software they ran on are written to smoke_reference.json
(model/smoke_reference.py). With --against REFERENCE they are judged against a reference's (a baseline's or an
earlier smoke's) with compare's noise rule: exit 1 on a regression beyond noise, NOT_COMPARABLE_EXIT (3) when
nothing is comparable or the reference is of other hardware and refused.
"""

import os
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

from ..base.errors import CclbenchError
from ..base.files import make_dirs, write_atomic, write_json_atomic
from ..base.values import sweep_sizes, utc_now
from ..base.version import TOOL_VERSION
from ..execute.runner import Baseline, Progress
from ..model.records import cases_path, describe_problem, latest_by_case, load_cases, record_is_sound, was_skipped
from ..model.smoke_reference import (REFERENCE_FILE, identity_differences, merge_capture, read_nvidia_driver,
                                     reference_age_days, reference_from_run)
from ..plan.baseline import EMULATED_RANKS, Planner
from ..plan.smoke_cases import PARTS, SMOKE_POINTS, TIMED_PARTS, smoke_reference_launches
from ..render.compare import comparable_text
from ..render.report import write_verdict
from ..render.smoke import (sensitivity_table, smoke_case_text, smoke_compare_document, smoke_markdown,
                            smoke_regression_text)
from ..render.verdict import reason_text
from ..rules.compare import NOT_COMPARABLE_EXIT, REGRESSION_EXIT, comparability, compare_exit
from ..rules.smoke_bands import GPU_SHIFT_POINT, judge_smoke
from ..rules.verdict import FAIL


# GPU-less: the MPI backend's collectives, correctness only.
SMOKE_SIZES = (8 << 10, 1 << 20, 8)  # 8K, 64K, 512K
SMOKE_ITERATIONS = 5
EMULATED_POINT = f"local.share-gpu{EMULATED_RANKS}"
NO_GPU_REASON = "no GPU visible (nvidia-smi -L found none)"
# A tool's own one-line error ("coll_perf: error: --backend nccl: CUDA sees no device: ..."), carried into the JUnit.
TOOL_ERROR_RE = re.compile(r"^[\w.-]+: error: .+")
AGAINST_MARKDOWN = "against.md"
CAPTURE_MARKDOWN = "capture.md"
EXPIRED_CODE = "smoke.reference_expired"


def smoke_launches(inputs, run_dir, have_gpu, parts=PARTS, inject=None):
    """(launches, skipped parts) of a smoke: with a GPU the chosen parts (PARTS) in run order, the slowdown test knob
    in the environment of the injected part's launches alone; without one the MPI-backend collectives."""
    planner = Planner(inputs, run_dir)
    host = inputs["local_host"]
    launches = []
    skipped = []
    if "topology" in parts:
        topo_out = planner.path("topology", f"{host}.json")
        launches.append(planner.launch("topology", "topology", [planner.tool("topo_map"), "--json", topo_out],
                                       hosts=[host], outputs=[topo_out]))
    cpus = inputs.get("cpu_count") or 1
    if have_gpu:
        launches += smoke_reference_launches(planner, host, tuple(part for part in parts if part in TIMED_PARTS),
                                             inject)
        if "emulated" in parts:
            launches.append(planner.emulated_check(host, oversubscribe=EMULATED_RANKS > cpus))
        return launches, skipped
    sizes = list(SMOKE_SIZES)
    size_list = sweep_sizes(*sizes)

    def coll(name, nranks, extra):
        argv = planner.coll_args(name, sizes=sizes, iterations=SMOKE_ITERATIONS) + extra
        if nranks > 1:
            argv = planner.mpirun(nranks, oversubscribe=True) + argv
        return planner.launch(name, "local", argv, nranks, [host], sizes=size_list)

    skipped = [(name, NO_GPU_REASON) for name in SMOKE_POINTS + (EMULATED_POINT,)]
    launches.append(coll("collectives_1rank_mpi", 1, ["--backend", "mpi"]))
    launches.append(coll("collectives_4rank_mpi", 4, ["--backend", "mpi"]))
    return launches, skipped


def tool_error(lines):
    """The last one-line error a launch's tool printed (its reason), or None."""
    found = [line.strip() for line in lines or [] if TOOL_ERROR_RE.match(line.strip())]
    return found[-1] if found else None


def strict_problems(run_dir, launch):
    """Smoke demands checked data: every record ok with wrong == 0 (null means unchecked: fail)."""
    path = cases_path(run_dir)
    if not os.path.exists(path):
        return "no case records"
    records = [r for (point, _), r in latest_by_case(load_cases(path, "case records")[0]).items() if point == launch["name"]]
    # Skipped cases carry no data; every case that ran must have been checked, and something must
    # have run.
    ran = [r for r in records if not was_skipped(r)]
    if not ran:
        return "every case was skipped"
    unchecked = [r.get("case_id") for r in ran if r.get("wrong") is None]
    if unchecked:
        return f"{len(unchecked)} case(s) were not checked (wrong is null), e.g. {unchecked[0]}"
    return None


def failed_cases(run_dir, launch):
    """'case_id: problem' for every case of the launch that ran and is not sound, so the JUnit
    failure names each one (the message names the first)."""
    path = cases_path(run_dir)
    if not os.path.exists(path):
        return []
    try:
        records = latest_by_case(load_cases(path, "case records")[0])
    except CclbenchError:
        return []
    return [f"{record.get('case_id')}: {describe_problem(record)}" for (point, _), record in sorted(records.items())
            if point == launch["name"] and not was_skipped(record) and not record_is_sound(record)]


def write_junit(path, results, total_seconds):
    suite = ElementTree.Element("testsuite", name="cclbench.smoke", tests=str(len(results)),
                                failures=str(sum(1 for r in results if r["outcome"] == "failed")),
                                skipped=str(sum(1 for r in results if r["outcome"] == "skipped")),
                                errors="0", time=f"{total_seconds:.3f}")
    for result in results:
        case = ElementTree.SubElement(suite, "testcase", classname="cclbench.smoke", name=result["name"],
                                      time=f"{result['seconds']:.3f}")
        if result["outcome"] == "failed":
            failure = ElementTree.SubElement(case, "failure", message=result["message"])
            failure.text = "\n".join([result["message"]] + result.get("cases", []))
        elif result["outcome"] == "skipped":
            ElementTree.SubElement(case, "skipped", message=result["message"])
    root = ElementTree.Element("testsuites", name="cclbench")
    root.append(suite)
    ElementTree.indent(root)
    write_atomic(path, '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n")


def verdict_results(results, verdict):
    """The JUnit test cases from verdict.json's data: the non-collective launches as they ran, one per point
    (failed on its fail codes, or on smoke's own demands: checked data, the time limit), one per judged check
    ('check.<name>', failed on its fail codes), and the skipped GPU parts."""
    if verdict is None:
        return results
    by_name = {r["name"]: r for r in results}
    points = {p["point"] for p in verdict["points"]}
    cases = [r for r in results if r["name"] not in points]
    fails = [r for r in verdict["reasons"] if r["severity"] == FAIL]
    for row in verdict["points"]:
        own = by_name.get(row["point"], {"name": row["point"], "outcome": "passed", "seconds": 0.0, "message": ""})
        reasons = [r for r in fails if r["point"] == row["point"]]
        codes = sorted({r["code"] for r in reasons})
        if codes or own["outcome"] == "failed":
            message = "; ".join(part for part in (", ".join(codes), own["message"] if own["outcome"] == "failed"
                                                  else "") if part)
            cases.append(dict(own, outcome="failed", message=message,
                              cases=[reason_text(r) for r in reasons] + list(own.get("cases") or [])))
        else:
            cases.append(own)
    for row in verdict["checks"]:
        if row["status"] == "skip":
            continue
        reasons = [r for r in fails if r["check"] == row["check"]]
        codes = sorted({r["code"] for r in reasons})
        cases.append({"name": f"check.{row['check']}", "seconds": 0.0, "outcome": "failed" if codes else "passed",
                      "message": ", ".join(codes), "cases": [reason_text(r) for r in reasons]})
    return cases


def write_smoke_reference(run_dir, inject=None):
    """RUN_DIR/smoke_reference.json of a finished run (a baseline's too: its smoke.* points), the NVIDIA driver read
    here where the run was measured; a run made with the slowdown test knob says so (and is never a reference).
    Returns the reference."""
    reference = reference_from_run(run_dir, utc_now(), TOOL_VERSION, read_nvidia_driver())
    if inject:
        reference["injected_slowdown"] = {"part": inject[0], "pct": inject[1]}
    write_json_atomic(os.path.join(run_dir, REFERENCE_FILE), reference)
    return reference


def against_results(judged, comparable):
    """JUnit test cases of the comparison with the reference: one per case both have ('against:POINT/CASE', failed on a
    regression or an unstable run, with both values and the band), one for the whole GPU ('against:gpu'), and
    'against' itself (failed when nothing is comparable)."""
    results = []
    found = {}
    for item in judged["regressions"]:
        if "case_id" in item:
            found.setdefault((item["point"], item["case_id"]), []).append(smoke_regression_text(item))
    for case in judged["cases"]:
        key = (case["point"], case["case_id"])
        name = f"against:{case['point']}/{case['case_id']}"
        if key in found:
            results.append({"name": name, "outcome": "failed", "seconds": 0.0, "message": found[key][0],
                            "cases": found[key][1:]})
        else:
            results.append({"name": name, "outcome": "passed", "seconds": 0.0, "message": smoke_case_text(case)})
    for shift in judged["shifts"]:
        text = (f"{shift['sizes']} timed cases {shift['diff']:+.2f}% together (band {shift['band']:.2f}%, "
                f"{shift['agree']:.0%} that way): {shift['verdict']}")
        failing = [item for item in judged["regressions"] if item.get("point") == GPU_SHIFT_POINT]
        results.append({"name": f"against:{GPU_SHIFT_POINT}", "outcome": "failed" if failing else "passed",
                        "seconds": 0.0, "message": smoke_regression_text(failing[0]) if failing else text})
    said = comparable_text(comparable)
    failed = not comparable["comparable"] or comparable["refused"]
    results.append({"name": "against", "outcome": "failed" if failed else "passed", "seconds": 0.0,
                    "message": said or f"{comparable['matched']} case(s) compared"})
    return results


def judge_against(run_dir, reference, source, own, options, inject=None):
    """Judges the smoke's own reference against a measured one (rules/smoke_bands.py): writes compare.json and
    against.md into the run directory; returns (JUnit results, finding lines, comparability, exit status). A
    reference older than its capture's max_age_days is not comparable (exit 3): docs/ci.md says why."""
    judged = judge_smoke(reference, own, options["fail_above_pct"])
    sizes = [{(case["point"], case["case_id"]): case.get("bytes") for case in side["cases"]} for side in (reference, own)]
    differences = identity_differences(reference["identity"], own["identity"])
    comparable = comparability(judged, sizes[0], sizes[1], differences, options["other_hardware"])
    age = reference_age_days(reference, utc_now())
    limit = reference["capture"].get("max_age_days")
    if limit and age is not None and age > limit:
        comparable.update(comparable=False, refused=True, code=EXPIRED_CODE,
                          reasons=comparable["reasons"] + [
                              f"the reference was captured {age:.0f} days ago, past its max_age_days {limit}: capture "
                              "again on the idle runner and judge the new capture against this one before it replaces "
                              "it (docs/ci.md)"])
    mine = os.path.join(run_dir, REFERENCE_FILE)
    write_json_atomic(os.path.join(run_dir, "compare.json"),
                      smoke_compare_document(judged, comparable, source, mine, options["fail_above_pct"], utc_now(),
                                             reference, inject, age))
    write_atomic(os.path.join(run_dir, AGAINST_MARKDOWN),
                 smoke_markdown(judged, comparable, source, mine, options["fail_above_pct"], reference, inject, age))
    return (against_results(judged, comparable), [smoke_regression_text(item) for item in judged["regressions"]],
            comparable, compare_exit(judged, comparable))


def run_parts(inputs, run_dir, have_gpu, argv, verbose, parts, inject):
    """Runs one smoke's launches into run_dir: (JUnit results of its parts and checks, the skipped parts, the runner,
    the run's own smoke reference). Raises what the runner raises, after recording the run as interrupted."""
    started = time.monotonic()
    launches, skipped = smoke_launches(inputs, run_dir, have_gpu, parts, inject)
    runner = Baseline(inputs, run_dir, resume=False, verbose=verbose, argv=argv, launches=launches, mode="smoke")
    runner.prepare()
    if inject:
        runner.manifest["notes"].append(f"test run: the slowdown test knob injected {inject[1]:g}% into smoke."
                                        f"{inject[0]} (CCLBENCH_INJECT_SLOWDOWN in its launches' env): these numbers "
                                        "are not the GPU's")
    for name, reason in skipped:
        runner.manifest["points"][name] = {"kind": "skipped", "status": "skipped", "exit_code": None, "reason": reason,
                                           "attempts": 0, "started_utc": None, "finished_utc": None, "elapsed_s": None}
    progress = Progress(launches, inputs=inputs)
    results = []
    deadline = started + inputs["time_limit_s"]
    try:
        for launch in launches:
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                results.append({"name": launch["name"], "outcome": "failed", "seconds": 0.0,
                                "message": f"not run: the {inputs['time_limit_s']:g}s time limit was used up"})
                runner.manifest["points"][launch["name"]].update(status="failed", reason="time limit used up")
                continue
            runner.inputs = dict(inputs, launch_timeout_s=min(remaining, inputs["launch_timeout_s"] or remaining))
            step_start = time.monotonic()
            ok = runner.run_launch(launch, progress)
            message = runner.manifest["points"][launch["name"]].get("reason") or ""
            said = tool_error(getattr(runner, "first_lines", []))
            if not ok and said and said not in message:
                message = f"{said}; {message}" if message else said  # the tool's own reason first
                runner.manifest["points"][launch["name"]].update(reason=message)
            if ok and launch["kind"] == "local":
                problem = strict_problems(runner.run_dir, launch)
                if problem:
                    ok, message = False, problem
                    runner.manifest["points"][launch["name"]].update(status="failed", reason=problem)
            results.append({"name": launch["name"], "outcome": "passed" if ok else "failed",
                            "seconds": time.monotonic() - step_start, "message": message,
                            "cases": [] if ok or launch["kind"] != "local" else failed_cases(runner.run_dir, launch)})
    except Exception:
        runner.finish("interrupted")
        raise
    results += [{"name": name, "outcome": "skipped", "seconds": 0.0, "message": reason} for name, reason in skipped]
    runner.write_summary()
    try:
        verdict = write_verdict(run_dir, inputs["cv_gate_pct"])
    except CclbenchError as error:  # the JUnit file still says what ran
        print(f"cclbench: verdict.json not written: {error}", file=sys.stderr)
        verdict = None
    results = verdict_results(results, verdict)
    own = write_smoke_reference(run_dir, inject)
    return results, skipped, runner, own


def capture_reference(inputs, run_dir, junit_path, have_gpu, argv, verbose, capture):
    """smoke --capture N: N smoke runs of the timed parts (one every capture['every_s'] seconds, or back to back) into
    RUN_DIR/capture/runNN, merged into RUN_DIR's
    smoke_reference.json (model/smoke_reference.merge_capture) with capture.md, the table of the smallest change each
    case can catch. Exit 0 once the reference is written; a failed run stops the capture (exit 1)."""
    started = time.monotonic()
    if not have_gpu:
        raise CclbenchError("smoke --capture needs a GPU: the smoke's reference cases are GPU measurements", 2)
    make_dirs(os.path.join(run_dir, "capture"))
    parts = tuple(TIMED_PARTS)
    references, results = [], []
    for number in range(1, capture["runs"] + 1):
        sub = os.path.join(run_dir, "capture", f"run{number:02d}")
        # --capture-every: run k starts (k - 1) x every_s after the first, or at once when the last run took longer
        wait = started + (number - 1) * capture["every_s"] - time.monotonic()
        if wait > 0:
            print(f"cclbench: capture run {number} of {capture['runs']} starts in {wait:.0f}s (--capture-every "
                  f"{capture['every_s']:g})", file=sys.stderr)
            time.sleep(wait)
        step = time.monotonic()
        own_results, _skipped, runner, own = run_parts(inputs, sub, have_gpu, argv, verbose, parts, None)
        failed = [r for r in own_results if r["outcome"] == "failed"]
        runner.finish("failed" if failed else "complete")
        results.append({"name": f"capture.run{number:02d}", "outcome": "failed" if failed else "passed",
                        "seconds": time.monotonic() - step,
                        "message": f"{failed[0]['name']}: {failed[0]['message']}" if failed else
                        f"{len(own['cases'])} case(s)", "cases": [f"{r['name']}: {r['message']}" for r in failed[1:]]})
        print(f"cclbench: capture run {number} of {capture['runs']}: {'FAILED' if failed else 'ok'} "
              f"({time.monotonic() - step:.1f}s)", file=sys.stderr)
        if failed:
            write_junit(junit_path, results, time.monotonic() - started)
            raise CclbenchError(f"smoke --capture: run {number} failed ({failed[0]['name']}: {failed[0]['message']}); "
                                f"a reference is made of healthy runs only (see {os.path.join(sub, 'run.log')})")
        references.append(own)
    reference = merge_capture(references, utc_now(), TOOL_VERSION, os.path.basename(run_dir), inputs["local_host"],
                              capture["max_age_days"], parts, capture["every_s"])
    write_json_atomic(os.path.join(run_dir, REFERENCE_FILE), reference)
    write_atomic(os.path.join(run_dir, CAPTURE_MARKDOWN),
                 "# cclbench smoke reference\n\n" + sensitivity_table(reference) + "\n")
    results.append({"name": "capture", "outcome": "passed", "seconds": 0.0,
                    "message": f"{len(reference['cases'])} case(s) from {capture['runs']} runs"})
    write_junit(junit_path, results, time.monotonic() - started)
    print(f"cclbench: smoke reference of {capture['runs']} runs written in {time.monotonic() - started:.1f}s: "
          f"{os.path.join(run_dir, REFERENCE_FILE)} (the smallest change each case can catch: "
          f"{os.path.join(run_dir, CAPTURE_MARKDOWN)}); JUnit: {junit_path}", file=sys.stderr)
    return 0


def run_smoke(inputs, run_dir, junit_path, have_gpu, argv, verbose=False, against=None, parts=PARTS, inject=None):
    """against: None, or {'reference', 'source', 'fail_above_pct', 'other_hardware'} (a measured reference, already
    read and checked by the caller, so a bad one is refused before anything is measured). parts: the parts to run
    (PARTS); inject: (part, pct) of the slowdown test knob (tests only; the caller checked it is allowed)."""
    started = time.monotonic()
    if not have_gpu:
        print("cclbench: no GPU visible: running the MPI-backend smoke only; GPU parts are marked skipped",
              file=sys.stderr)
    results, skipped, runner, own = run_parts(inputs, run_dir, have_gpu, argv, verbose, parts, inject)
    compared, regressions, comparable, compare_status = [], [], None, 0
    if against:
        compared, regressions, comparable, compare_status = judge_against(run_dir, against["reference"],
                                                                          against["source"], own, against, inject)
    total = time.monotonic() - started
    failed = [r for r in results if r["outcome"] == "failed"]
    runner.finish("failed" if failed or compare_status else "complete")
    write_junit(junit_path, results + compared, total)
    where = f"see {os.path.join(run_dir, 'run.log')}"
    if failed:
        raise CclbenchError(f"smoke failed: {len(failed)} of {len(results)} part(s) failed, first "
                            f"{failed[0]['name']}: {failed[0]['message']} ({where})")
    if compare_status == NOT_COMPARABLE_EXIT:
        raise CclbenchError(f"smoke against {against['source']}: {comparable_text(comparable)} "
                            f"({os.path.join(run_dir, AGAINST_MARKDOWN)})", NOT_COMPARABLE_EXIT)
    test_run = f" (test run: {inject[1]:g}% injected into smoke.{inject[0]})" if inject else ""
    if compare_status == REGRESSION_EXIT:
        more = f" (and {len(regressions) - 1} more)" if len(regressions) > 1 else ""
        raise CclbenchError(f"smoke against {against['source']}{test_run}: {len(regressions)} finding(s) beyond the "
                            f"reference's measured noise, first {regressions[0]}{more} "
                            f"({os.path.join(run_dir, AGAINST_MARKDOWN)})", REGRESSION_EXIT)
    if comparable and comparable["identity"]:
        print(f"cclbench: {comparable_text(comparable)}", file=sys.stderr)
    judged_text = (f"; against {against['source']}{test_run}: {comparable['matched']} case(s), no regression, none "
                   "unstable" if against else "")
    print(f"cclbench: smoke passed in {total:.1f}s ({len(results) - len(skipped)} part(s) run, {len(skipped)} "
          f"skipped{judged_text}); JUnit: {junit_path}", file=sys.stderr)
    return 0
