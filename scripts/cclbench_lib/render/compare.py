"""`compare RUN_A RUN_B`: the per-case table and its verdicts, with the noise rule of rules/noise.py."""

import os

from ..base.files import write_atomic, write_json_atomic
from ..base.values import utc_now
from ..base.version import TOOL_VERSION
from ..model.run_dir import case_groups, chosen_bindings
from ..model.smoke_reference import (REFERENCE_FILE, identity_differences, read_reference, reference_from_run,
                                     reference_groups)
from ..render.markdown import fmt_number, md_table
from ..rules.repeat_rule import MAD_TO_SIGMA
from ..rules.compare import (MIN_MATCHED_SHARE, NOT_COMPARABLE_EXIT, case_code, comparability, compare_exit,
                             compare_verdict, judge_runs)
from ..rules.noise import (MEDIAN_SE_FACTOR, NOISE_SIGMAS, ONE_REPEAT_FLOOR_PCT, ONE_REPEAT_FLOOR_TINY_PCT, OWN_SPREAD_FACTOR, RERUN,
                           RUN_DRIFT_PCT, RUN_DRIFT_TINY_PCT, SHIFT_FLOOR_PCT, SHIFT_MIN_CASES, TINY_TIME_US)


def regression_text(item):
    """One regression of rules/compare.judge_runs as the line the CLI prints."""
    if "collective" in item:
        return (f"{item['point']} {item['collective']}: every size {item['diff']:+.1f}% (median of {item['sizes']}, "
                f"band {item['band']:.1f}%)")
    if "problem" in item:
        return f"{item['point']} {item['case_id']}: ok in A, {item['problem']} in B"
    return (f"{item['point']} {item['case_id']}: {item['diff']:+.1f}% (A {fmt_number(item['time_a'])} us, B "
            f"{fmt_number(item['time_b'])} us; band {item['band']:.1f}%)")


def case_row(case):
    cells = [case["point"], case["case_id"], fmt_number(case["time_a"]), fmt_number(case["time_b"])]
    if case["timed"]:
        shown = "slower (REGRESSION)" if case["regression"] else (RERUN if case["verdict"] == "inconclusive"
                                                                   else case["verdict"])
        return cells + [f"{case['ratio']:.3f}", f"{case['diff']:+.1f}", case["band_text"], shown]
    if "modes" in case:
        mode_a, mode_b = case["modes"]
        return cells + ["-", "-", "-", f"not comparable (mode A {mode_a}, B {mode_b})"]
    return cells + ["-", "-", "-", f"{case['verdict']} ({case['label']})" if "label" in case else case["verdict"]]


def shift_row(shift):
    return [shift["point"], shift["collective"], str(shift["sizes"]), f"{shift['diff']:+.1f}", f"{shift['band']:.1f}",
            "slower (REGRESSION)" if shift["regression"] else shift["verdict"]]


COMPARE_SCHEMA_VERSION = "1.1.0"  # 1.1: comparable, exit code 3 (nothing comparable, other hardware)


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def comparable_text(comparable):
    """The one line that says why two runs are not comparable, or what differs in their hardware (a warning)."""
    if comparable["comparable"]:
        if comparable["identity"]:
            return "warning: measured on other hardware or software, compared anyway (--other-hardware warn): " + \
                "; ".join(f"{item['field']} A {item['a']}, B {item['b']}" for item in comparable["identity"])
        return None
    return "NOT COMPARABLE: " + "; ".join(comparable["reasons"])


def compare_document(judged, path_a, path_b, threshold_pct, fail_above_pct, host_times, created_utc, comparable,
                     describe=regression_text):
    """compare.json (results_schema/compare.schema.json) from rules/compare.judge_runs' data, as it is. describe: one
    regression as its line (the smoke's findings have shapes of their own: render/smoke.smoke_regression_text)."""
    verdict = compare_verdict(judged)
    cases = []
    for case in judged["cases"]:
        item = {"point": case["point"], "case_id": case["case_id"], "collective": case["collective"],
                "size": case["size"] if isinstance(case["size"], int) else None, "verdict": case["verdict"],
                "code": case_code(case), "regression": case["regression"], "timed": case["timed"],
                "time_a_us": _number(case["time_a"]), "time_b_us": _number(case["time_b"]),
                "ratio": _number(case.get("ratio")), "diff_pct": _number(case.get("diff")),
                "band_pct": _number(case.get("band"))}
        if "modes" in case:
            item["modes"] = list(case["modes"])
        cases.append(item)
    shifts = [{"point": shift["point"], "collective": shift["collective"], "sizes": shift["sizes"],
               "diff_pct": shift["diff"], "band_pct": shift["band"], "verdict": shift["verdict"],
               "regression": shift["regression"]} for shift in judged["shifts"]]
    regressions = [describe(item) for item in judged["regressions"]]
    return {"schema_version": COMPARE_SCHEMA_VERSION, "kind": "compare",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": created_utc,
            "run_a": os.path.abspath(path_a), "run_b": os.path.abspath(path_b), "threshold_pct": threshold_pct,
            "fail_above_pct": fail_above_pct, "host_times": bool(host_times),
            "overall": verdict["overall"] if compare_exit(judged, comparable) != NOT_COMPARABLE_EXIT else "not comparable",
            "exit_code": compare_exit(judged, comparable), "comparable": comparable, "counts": judged["counts"],
            "shift_counts": judged["shift_counts"], "regressions": regressions, "bands": verdict["bands"],
            "shifts": shifts, "cases": cases,
            "only_a": [list(key) for key in judged["only_a"]], "only_b": [list(key) for key in judged["only_b"]]}


def compare_runs(path_a, path_b, threshold_pct, fail_above_pct, host_times=False):
    """(the compare report as markdown, the regressions as lines) of two run directories."""
    text, regressions, _judged, _comparable = render_compare(path_a, path_b, threshold_pct, fail_above_pct, host_times)
    return text, regressions


def compared_side(path):
    """(case groups, identity) of one side of a comparison: a run directory (its cases.jsonl, plus the smoke's copy
    cases of its reference) or a smoke reference file (its cases)."""
    if os.path.isfile(path) and not path.endswith(".jsonl"):
        reference, _ = read_reference(path)
        return reference_groups(reference), reference["identity"]
    groups = case_groups(path)
    if not os.path.isdir(path):
        return groups, {}
    stored = os.path.join(path, REFERENCE_FILE)
    reference = read_reference(stored)[0] if os.path.exists(stored) else reference_from_run(path, None, None)
    for key, records in reference_groups(reference).items():
        groups.setdefault(key, records)  # the copies (p2p_matrix's); the collectives are cases.jsonl's own records
    return groups, reference["identity"]


def judge_sides(groups_a, identity_a, groups_b, identity_b, threshold_pct, fail_above_pct, host_times=False,
                other_hardware="warn"):
    """(judge_runs' data, rules/compare.comparability's) of two sides' case groups and identities."""
    judged = judge_runs(groups_a, groups_b, threshold_pct, fail_above_pct, host_times)
    sizes = [{key: records[0].get("requested_bytes") for key, records in groups.items()} for groups in (groups_a, groups_b)]
    differences = identity_differences(identity_a, identity_b) if identity_a and identity_b else []
    return judged, comparability(judged, sizes[0], sizes[1], differences, other_hardware)


def render_compare(path_a, path_b, threshold_pct, fail_above_pct, host_times=False, other_hardware="warn"):
    """(markdown, regression lines, judge_runs' data, comparability) of two run directories or smoke references."""
    groups_a, identity_a = compared_side(path_a)
    groups_b, identity_b = compared_side(path_b)
    judged, comparable = judge_sides(groups_a, identity_a, groups_b, identity_b, threshold_pct, fail_above_pct,
                                     host_times, other_hardware)
    return compare_markdown(judged, comparable, path_a, path_b, threshold_pct, fail_above_pct, host_times), \
        [regression_text(item) for item in judged["regressions"]], judged, comparable


def compare_markdown(judged, comparable, path_a, path_b, threshold_pct, fail_above_pct, host_times):
    """The compare report as markdown."""
    verdict = compare_verdict(judged)
    counts, shifts = judged["counts"], judged["shift_counts"]
    rows = [case_row(case) for case in judged["cases"]]
    shift_rows = [shift_row(shift) for shift in judged["shifts"]]
    regressions = [regression_text(item) for item in judged["regressions"]]
    only_a, only_b = judged["only_a"], judged["only_b"]
    overall = verdict["overall"] if compare_exit(judged, comparable) != NOT_COMPARABLE_EXIT else "not comparable"
    lines = ["# cclbench compare", "", f"Verdict: **{overall.upper()}**"
             + (f" ({len(judged['regressions'])})" if judged["regressions"] else ""), "",
             f"- A: `{path_a}`", f"- B: `{path_b}`", ""]
    said = comparable_text(comparable)
    if said:
        lines += [said, ""]
    lines += [
             f"Rule: t = median over repeats of the bandwidth time (gated_time_us, else time_us.mean); with >= 2 "
             f"repeats a side, band = max({NOISE_SIGMAS:g} x sqrt(({MEDIAN_SE_FACTOR} s)^2 (1/r_A + 1/r_B) + 2 d^2), "
             f"{threshold_pct:g}%), s = the median pooled relative spread of the point's sizes of that collective (the "
             f"case's own where above {OWN_SPREAD_FACTOR:g}x that), d = one run's drift, {RUN_DRIFT_TINY_PCT:g}% when "
             f"the faster time is below {TINY_TIME_US:g} us, else {RUN_DRIFT_PCT:g}%; with one repeat a side the noise "
             f"is unknown and a change within {ONE_REPEAT_FLOOR_PCT:g}% ({ONE_REPEAT_FLOOR_TINY_PCT:g}% below "
             f"{TINY_TIME_US:g} us) is '{RERUN}'. change = larger t / smaller t - "
             f"1 (symmetric); diff = (t_B/t_A - 1) x 100; change <= band "
             f"is 'same within noise'. Regression: slower beyond the band with diff above {fail_above_pct:g}%, or ok in A "
             f"and failed, skipped or wrong in B. Emulated ranks" +
             (" are" if host_times else " and the MPI backend (host memory) are") +
             " judged on correctness only; different measurement modes (backend, ranks, emulation, CUDA graph) are "
             "never compared.", "",
             f"Summary: {counts['faster']} faster, {counts['slower']} slower, {counts['same within noise']} same "
             f"within noise, {counts['inconclusive']} inconclusive (rerun with --repeat 3), "
             f"{counts['correctness only']} correctness only, {counts['not comparable']} not comparable, "
             f"{len(only_a)} only in A, {len(only_b)} only in B; point-wide: {shifts['faster']} faster, "
             f"{shifts['slower']} slower; {len(regressions)} regression(s); {comparable['matched']} of "
             f"{min(comparable['cases_a'], comparable['cases_b'])} case(s) of the smaller run matched (comparable from "
             f"{MIN_MATCHED_SHARE:.0%}).", ""]
    if shift_rows:
        lines += ["## Point-wide shifts", "",
                  f"Per point and collective with >= {SHIFT_MIN_CASES} timed sizes: the median of the per-size changes "
                  f"(a change every size shares, which per-size drift cannot hide); band = max({NOISE_SIGMAS:g} x "
                  f"{MEDIAN_SE_FACTOR} x sd / sqrt(n), {SHIFT_FLOOR_PCT:g}%), sd = {MAD_TO_SIGMA:g} x MAD of the per-size log "
                  "changes.", "", md_table(["point", "collective", "sizes", "median diff %", "band %", "verdict"],
                                           shift_rows), "", "## Cases", ""]
    if rows:
        lines.append(md_table(["point", "case", "A time us", "B time us", "B/A", "diff %", "band %", "verdict"], rows))
    bindings_a, bindings_b = chosen_bindings(path_a), chosen_bindings(path_b)
    differ = sorted(point for point in set(bindings_a) & set(bindings_b) if bindings_a[point] != bindings_b[point])
    if differ:
        lines += ["", "## Bindings that differ", "",
                  "These decode points over the rails ran with the binding each run's own sweep found best; the runs "
                  "chose differently, so a time change there may be the binding's:", ""]
        lines += [f"- {point}: A {bindings_a[point]}; B {bindings_b[point]}" for point in differ]
    for label, keys in (("Only in A", only_a), ("Only in B", only_b)):
        if keys:
            lines += ["", f"## {label}", ""] + [f"- {point} {case_id}" for point, case_id in keys]
    return "\n".join(lines) + "\n"


def compare_json_path(path_b, out_path=None, json_path=None):
    """Where compare.json goes: --json FILE; else next to --out (its name with .json); else run B's directory (the
    folder of B's file when B is a smoke reference or a cases.jsonl)."""
    if json_path:
        return os.path.abspath(json_path)
    if out_path:
        stem, extension = os.path.splitext(os.path.abspath(out_path))
        return (stem if extension.lower() == ".md" else os.path.abspath(out_path)) + ".json"
    if os.path.isfile(path_b):  # a smoke reference or a cases.jsonl: next to it
        return os.path.join(os.path.dirname(os.path.abspath(path_b)), "compare.json")
    return os.path.join(os.path.abspath(path_b), "compare.json")


def run_compare(path_a, path_b, threshold_pct, fail_above_pct, out_path=None, stream=None, host_times=False,
                json_path=None, other_hardware="warn"):
    """Writes the markdown (--out, else the stream) and compare.json; returns (regression lines, json path,
    comparability, exit status)."""
    text, regressions, judged, comparable = render_compare(path_a, path_b, threshold_pct, fail_above_pct, host_times,
                                                           other_hardware)
    destination = compare_json_path(path_b, out_path, json_path)
    write_json_atomic(destination, compare_document(judged, path_a, path_b, threshold_pct, fail_above_pct,
                                                    host_times, utc_now(), comparable))
    if out_path:
        write_atomic(out_path, text)
    else:
        stream.write(text)
    return regressions, destination, comparable, compare_exit(judged, comparable)
