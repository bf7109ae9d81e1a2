"""`compare RUN_A RUN_B`: the per-case table and its verdicts, with the noise rule of rules/noise.py."""

from ..base.files import write_atomic
from ..model.run_dir import case_groups, chosen_bindings
from ..render.markdown import fmt_number, md_table
from ..rules.repeat_rule import MAD_TO_SIGMA
from ..rules.compare import judge_runs
from ..rules.noise import (MEDIAN_SE_FACTOR, NOISE_SIGMAS, ONE_REPEAT_FLOOR_PCT, ONE_REPEAT_FLOOR_TINY_PCT, OWN_SPREAD_FACTOR, RERUN,
                           RUN_DRIFT_PCT, RUN_DRIFT_TINY_PCT, SHIFT_FLOOR_PCT, SHIFT_MIN_CASES, TINY_TIME_US)


def regression_text(item):
    """One regression of rules/compare.judge_runs as the line the CLI prints."""
    if "collective" in item:
        return (f"{item['point']} {item['collective']}: every size {item['diff']:+.1f}% (median of {item['sizes']}, "
                f"band {item['band']:.1f}%)")
    if "problem" in item:
        return f"{item['point']} {item['case_id']}: ok in A, {item['problem']} in B"
    return f"{item['point']} {item['case_id']}: {item['diff']:+.1f}% (band {item['band']:.1f}%)"


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


def compare_runs(path_a, path_b, threshold_pct, fail_above_pct, host_times=False):
    """(the compare report as markdown, the regressions as lines) of two run directories."""
    judged = judge_runs(case_groups(path_a), case_groups(path_b), threshold_pct, fail_above_pct, host_times)
    counts, shifts = judged["counts"], judged["shift_counts"]
    rows = [case_row(case) for case in judged["cases"]]
    shift_rows = [shift_row(shift) for shift in judged["shifts"]]
    regressions = [regression_text(item) for item in judged["regressions"]]
    only_a, only_b = judged["only_a"], judged["only_b"]
    lines = ["# cclbench compare", "", f"- A: `{path_a}`", f"- B: `{path_b}`", "",
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
             f"{shifts['slower']} slower; {len(regressions)} regression(s).", ""]
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
    return "\n".join(lines) + "\n", regressions


def run_compare(path_a, path_b, threshold_pct, fail_above_pct, out_path=None, stream=None, host_times=False):
    text, regressions = compare_runs(path_a, path_b, threshold_pct, fail_above_pct, host_times)
    if out_path:
        write_atomic(out_path, text)
    else:
        stream.write(text)
    return regressions
