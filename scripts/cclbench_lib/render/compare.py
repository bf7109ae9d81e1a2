"""`compare RUN_A RUN_B`: the per-case table and its verdicts, with the noise rule of rules/noise.py."""

import math

from ..base.files import write_atomic
from ..model.records import CLASS_LABELS, GPU_TIMED, MPI_HOST
from ..model.run_dir import _load, chosen_bindings
from ..render.markdown import fmt_number, md_table
from ..rules.noise import MEDIAN_SE_FACTOR, NOISE_SIGMAS, ONE_REPEAT_FLOOR_PCT, ONE_REPEAT_FLOOR_TINY_PCT, OWN_SPREAD_FACTOR, RERUN, RUN_DRIFT_PCT, RUN_DRIFT_TINY_PCT, SHIFT_FLOOR_PCT, SHIFT_MIN_CASES, TINY_TIME_US, correctness_verdict, neighbour_floors, noise_verdict, point_shift, run_drift_pct, summarize


def compare_runs(path_a, path_b, threshold_pct, fail_above_pct, host_times=False):
    groups_a, groups_b = _load(path_a), _load(path_b)
    rows = []
    regressions = []
    counts = {"faster": 0, "slower": 0, "same within noise": 0, "inconclusive": 0, "correctness only": 0,
              "not comparable": 0}
    pairs = {}
    for key in sorted(set(groups_a) & set(groups_b)):
        records = groups_a[key] + groups_b[key]
        pairs[key] = (summarize(groups_a[key]), summarize(groups_b[key]), records[0].get("collective"))
    floors = neighbour_floors(pairs)
    log_changes = {}
    for (point, case_id), (side_a, side_b, collective) in pairs.items():
        time_a, time_b = side_a["time"], side_b["time"]
        cells = [point, case_id, fmt_number(time_a), fmt_number(time_b)]
        if side_a["modes"] and side_b["modes"] and side_a["modes"] != side_b["modes"]:
            # Never mix measurement modes: emulated vs real GPUs, MPI vs NCCL, other rank counts, graph vs eager.
            counts["not comparable"] += 1
            rows.append(cells + ["-", "-", "-", f"not comparable (mode A {side_a['modes']}, B {side_b['modes']})"])
            continue
        verdict, regressed = correctness_verdict(side_a, side_b)
        if side_a["all_skipped"] and side_b["all_skipped"]:
            verdict, regressed = "skipped in both", False
        correctness_only = side_a["cls"] != GPU_TIMED or side_b["cls"] != GPU_TIMED
        if correctness_only and host_times and {side_a["cls"], side_b["cls"]} == {MPI_HOST}:
            correctness_only = False
        if regressed or correctness_only or time_a is None or time_b is None:
            if regressed:
                regressions.append(f"{point} {case_id}: ok in A, {side_b['problem']} in B")
            if correctness_only and not regressed:
                label = CLASS_LABELS.get(side_b["cls"] if side_b["cls"] != GPU_TIMED else side_a["cls"], "")
                verdict = f"{verdict} ({label})"
                counts["correctness only"] += 1
            else:
                counts["not comparable"] += 1
            rows.append(cells + ["-", "-", "-", verdict])
            continue
        verdict, diff, band, band_text = noise_verdict(side_a, side_b, threshold_pct, floors.get((point, collective)),
                                                       run_drift_pct(time_a, time_b))
        log_changes.setdefault((point, collective), []).append(math.log(time_b / time_a))
        shown = RERUN if verdict == "inconclusive" else None
        counts[verdict] += 1
        shown = shown or verdict
        if verdict == "slower" and diff > fail_above_pct:
            regressions.append(f"{point} {case_id}: {diff:+.1f}% (band {band:.1f}%)")
            shown = "slower (REGRESSION)"
        rows.append(cells + [f"{time_b / time_a:.3f}", f"{diff:+.1f}", band_text, shown])
    shift_rows = []
    shifts = {"faster": 0, "slower": 0}
    for (point, collective), values in sorted(log_changes.items()):
        judged = point_shift(values, threshold_pct)
        if judged is None:
            continue
        verdict, diff, band = judged
        shown = verdict
        if verdict in shifts:
            shifts[verdict] += 1
        if verdict == "slower" and diff > fail_above_pct:
            regressions.append(f"{point} {collective}: every size {diff:+.1f}% (median of {len(values)}, band "
                               f"{band:.1f}%)")
            shown = "slower (REGRESSION)"
        shift_rows.append([point, collective, str(len(values)), f"{diff:+.1f}", f"{band:.1f}", shown])
    only_a = sorted(set(groups_a) - set(groups_b))
    only_b = sorted(set(groups_b) - set(groups_a))
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
                  f"{MEDIAN_SE_FACTOR} x sd / sqrt(n), {SHIFT_FLOOR_PCT:g}%), sd = 1.4826 x MAD of the per-size log "
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
