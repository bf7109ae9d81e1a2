"""`smoke`: the single-GPU CI smoke test, under a minute, with a JUnit XML file for CI systems.

With a GPU: topology, p2p_matrix, 1-rank and 4-emulated-rank (--share-gpu) collectives with data
checking. Without one: topology and the MPI-backend collectives (1 and 4 ranks); the GPU parts are
reported as skipped. Exit 0 only when every part that ran passed.
"""

import os
import sys
import time
import xml.etree.ElementTree as ElementTree

from ..base.errors import CclbenchError
from ..base.files import write_atomic
from ..base.values import sweep_sizes
from ..execute.runner import Baseline, Progress
from ..model.records import cases_path, describe_problem, latest_by_case, load_cases, record_is_sound, was_skipped
from ..plan.baseline import Planner
from ..render.report import write_verdict
from ..render.verdict import reason_text
from ..rules.verdict import FAIL


SMOKE_SIZES = (8 << 10, 1 << 20, 8)  # 8K, 64K, 512K
SMOKE_ITERATIONS = 5
SMOKE_P2P_TESTS = "device_local_copy_ce,device_local_copy_sm,h2d_ce_local_numa,d2h_ce_local_numa"


def smoke_launches(inputs, run_dir, have_gpu):
    planner = Planner(inputs, run_dir)
    host = inputs["local_host"]
    launches = []
    skipped = []
    topo_out = planner.path("topology", f"{host}.json")
    launches.append(planner.launch("topology", "topology", [planner.tool("topo_map"), "--json", topo_out],
                                   hosts=[host], outputs=[topo_out]))
    sizes = list(SMOKE_SIZES)
    size_list = sweep_sizes(*sizes)
    timeout = ["-T", str(max(5, int(inputs["launch_timeout_s"] or 45) - 5))]
    cpus = inputs.get("cpu_count") or 1

    def coll(name, nranks, extra):
        argv = planner.coll_args(name, sizes=sizes, iterations=SMOKE_ITERATIONS) + timeout + extra
        if nranks > 1:
            argv = planner.mpirun(nranks, oversubscribe=nranks > cpus or "--backend" in extra) + argv
        return planner.launch(name, "local", argv, nranks, [host], sizes=size_list)

    if have_gpu:
        p2p_out = planner.path("p2p", f"{host}.json")
        # The single-GPU tests at a modest size: a few seconds, not the full 256M/1G defaults.
        launches.append(planner.launch("p2p_matrix", "p2p", [planner.tool("p2p_matrix"), "-t", SMOKE_P2P_TESTS,
                                                             "-b", "32M", "-n", "3", "-w", "1", "-q", "--json", p2p_out],
                                       hosts=[host], outputs=[p2p_out]))
        launches.append(coll("collectives_1rank_nccl", 1, []))
        launches.append(coll("collectives_4rank_share_gpu", 4, ["--share-gpu"]))
    else:
        reason = "no GPU visible (nvidia-smi -L found none)"
        skipped = [("p2p_matrix", reason), ("collectives_1rank_nccl", reason), ("collectives_4rank_share_gpu", reason)]
        launches.append(coll("collectives_1rank_mpi", 1, ["--backend", "mpi"]))
        launches.append(coll("collectives_4rank_mpi", 4, ["--backend", "mpi"]))
    return launches, skipped


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


def run_smoke(inputs, run_dir, junit_path, have_gpu, argv, verbose=False):
    started = time.monotonic()
    launches, skipped = smoke_launches(inputs, run_dir, have_gpu)
    if not have_gpu:
        print("cclbench: no GPU visible: running the MPI-backend smoke only; GPU parts are marked skipped",
              file=sys.stderr)
    runner = Baseline(inputs, run_dir, resume=False, verbose=verbose, argv=argv, launches=launches, mode="smoke")
    runner.prepare()
    for name, reason in skipped:
        runner.manifest["points"][name] = {"kind": "skipped", "status": "skipped", "exit_code": None, "reason": reason,
                                           "attempts": 0, "started_utc": None, "finished_utc": None, "elapsed_s": None}
    progress = Progress(launches)
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
    total = time.monotonic() - started
    try:
        verdict = write_verdict(run_dir, inputs["cv_gate_pct"])
    except CclbenchError as error:  # the JUnit file still says what ran
        print(f"cclbench: verdict.json not written: {error}", file=sys.stderr)
        verdict = None
    results = verdict_results(results, verdict)
    failed = [r for r in results if r["outcome"] == "failed"]
    runner.finish("failed" if failed else "complete")
    write_junit(junit_path, results, total)
    if failed:
        raise CclbenchError(f"smoke failed: {len(failed)} of {len(results)} part(s) failed, first "
                            f"{failed[0]['name']}: {failed[0]['message']} (see {os.path.join(run_dir, 'run.log')})")
    print(f"cclbench: smoke passed in {total:.1f}s ({len(results) - len(skipped)} part(s) run, {len(skipped)} "
          f"skipped); JUnit: {junit_path}", file=sys.stderr)
    return 0
