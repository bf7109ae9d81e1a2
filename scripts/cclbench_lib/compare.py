"""`compare RUN_A RUN_B`: per case, the headline time of A and B and a verdict that knows its noise.

The rule (also printed in the output and stated in the README, "Compare"):
  t = median over repeats of the bandwidth time (gated_time_us, else time_us.mean: the time busbw and the
      report's plots come from), sound records only.
  Two noise sources: the repeats' scatter inside a run, and the run's own drift, which all its repeats share
      (clocks, temperature, placement, host load) and so cannot show. Identical runs must differ by drift.
  With >= 2 sound repeats on both sides: s = the median pooled relative standard deviation of the same point
      and collective over its sizes (three repeats estimate a spread poorly, by chance too low or too high);
      the case's own pooled s only where it is above OWN_SPREAD_FACTOR x that (a case really noisier than its
      neighbours). d = one run's drift: RUN_DRIFT_TINY_PCT when the faster median is below TINY_TIME_US, else
      RUN_DRIFT_PCT. band = max(NOISE_SIGMAS x sqrt((1.2533 s)^2 (1/r_A + 1/r_B) + 2 d^2), --threshold)
      (1.2533: the median's standard error; 2 d^2: one drift per run). NOISE_SIGMAS is 4, not 3: a compare
      judges hundreds of cases, and 3 sigmas would call about 3 in 1000 of them in an A/A compare.
  With one repeat on a side the noise is unknown: a change within ONE_REPEAT_FLOOR_PCT (above the drift band
      of either tier; ONE_REPEAT_FLOOR_TINY_PCT when the faster time is below TINY_TIME_US) is
      "inconclusive - rerun with --repeat 3", never a regression.
  Symmetric: the change judged is the larger time over the smaller, minus 1 (a 10% slowdown, t_B = 1.1 t_A, and
      a 10% speedup, t_A = 1.1 t_B, meet the same band); swapping A and B swaps "slower" and "faster".
      change <= band: "same within noise"; else "faster" or "slower". diff = (t_B / t_A - 1) x 100 is shown.
  A regression is "slower" with diff above --fail-above, or a case whose repeats were all ok in A and that
  failed, was skipped or computed wrong data in B. Emulated ranks and the MPI backend (host memory) are
  judged on correctness only (--host-times opts the MPI backend into time verdicts); records measured in
  different modes (backend, ranks, emulation, CUDA graph or eager) are never compared.
"""
import math
import os
import statistics

from .common import CclbenchError, read_json, write_atomic
from .records import (CLASS_LABELS, GPU_TIMED, MPI_HOST, bandwidth_time_us, describe_problem, group_repeats,
                      load_cases, measurement_class, measurement_mode, median, record_is_sound, was_skipped)
from .report import fmt_number, md_table

NOISE_SIGMAS = 4.0
MEDIAN_SE_FACTOR = 1.2533
# One repeat a side: run-to-run differences of healthy GPUs reach about 10% (AlltoAll, 2-GPU H200, issue
# 15), so only a difference beyond 15% can be called from a single pair of runs.
ONE_REPEAT_FLOOR_PCT = 15.0
# Below TINY_TIME_US, 20%: two single-repeat single-GPU H200 baselines (2026-12-01, 112 cases of 1-35 us)
# differed by up to 16.9% (2.84 against 2.43 us), 3 cases beyond 10%: the tails of a few-us point are heavy.
ONE_REPEAT_FLOOR_TINY_PCT = 20.0
# One run's drift (a standard deviation, percent). The repeats of one run share its state, so their spread
# cannot show how far a whole run sits from another: two back-to-back single-GPU H200 baselines (issue 15's
# closing note, times 3-40 us) differed by more than 2% on 58 of 112 cases at one repeat, and at three
# repeats 30 cases were all "faster" behind bands of 2-3% drawn from the repeats alone. Measured on
# 2026-12-01: three back-to-back single-GPU H200 baselines at three repeats (112 cases each, 1-35 us) differ
# pairwise by a standard deviation of 1.2-2.3% (no common shift), with a median repeat spread of 1.5%:
# 1.3% drift a run once the repeats' share is taken out; 1.5% keeps a margin (band >= 8.5%; the largest of
# 324 pairwise differences was 7.6%). Above TINY_TIME_US, 1%: enough to keep a 10% change at 1% noise
# callable (band ~7%).
RUN_DRIFT_PCT = 1.0
RUN_DRIFT_TINY_PCT = 1.5
TINY_TIME_US = 20.0
# A case's own repeats set its spread only when clearly noisier than its neighbours' median: pooled over two
# sides of three repeats (4 degrees of freedom), the same noise exceeds 2x by chance about 3 times in 1000.
OWN_SPREAD_FACTOR = 2.0
RERUN = "inconclusive - rerun with --repeat 3"
# Point-wide shift: per-case bands must allow each case its own drift, so a change that moves every size of a
# point alike (a slower driver, clocks, a throttled GPU) can hide under them: +10% on every case of a one-GPU
# H200 baseline was called on 7 of 112 cases. The median of a point's per-size changes averages that drift
# away. Judged where a point has at least SHIFT_MIN_CASES sizes of one collective; band = max(NOISE_SIGMAS x
# 1.2533 x sd / sqrt(n), SHIFT_FLOOR_PCT), sd = 1.4826 x MAD of the per-size log changes. The floor allows for
# a whole run's state (clocks, temperature): three back-to-back H200 baselines at three repeats shifted by
# 0.00-0.07% against each other (median over 112 cases), two at one repeat by 3.5% (2.6-4.4% per collective).
SHIFT_MIN_CASES = 4
SHIFT_FLOOR_PCT = 6.0


def _load(path):
    if os.path.isdir(path):
        cases = os.path.join(path, "cases.jsonl")
        if not os.path.exists(cases):
            raise CclbenchError(f"{path} has no cases.jsonl (not a run directory?)")
        path = cases
    elif not os.path.exists(path):
        raise CclbenchError(f"{path} does not exist")
    records, _ = load_cases(path, "case records", strict=True)
    if not records:
        raise CclbenchError(f"{path} holds no case records")
    return group_repeats(records)


def chosen_bindings(path):
    """{point: binding text} of a run directory's points whose binding was chosen at run time (decode over the
    rails, manifest plan binding.chosen); empty for a records file or a run without such points."""
    from .decode import variant_text
    manifest_path = os.path.join(path, "run_manifest.json") if os.path.isdir(path) else None
    if not manifest_path or not os.path.exists(manifest_path):
        return {}
    try:
        manifest = read_json(manifest_path, "run manifest")
    except CclbenchError:
        return {}  # compare judges the records; a manifest it cannot read only loses this note
    found = {}
    for launch in (manifest.get("plan") if isinstance(manifest, dict) else None) or []:
        chosen = (launch.get("binding") or {}).get("chosen") if isinstance(launch, dict) else None
        if isinstance(chosen, dict) and isinstance(chosen.get("env"), dict) and not launch.get("ab"):
            found[launch.get("base_point") or launch.get("name")] = \
                f"{chosen.get('from') or '-'} ({variant_text(chosen['env'])})"
    return found


def summarize(group):
    """One side of a case: its sound repeats' median bandwidth time and relative spread, its modes,
    its class and the first problem among its records."""
    sound = [r for r in group if record_is_sound(r)]
    times = [t for t in (bandwidth_time_us(r) for r in sound) if t is not None]
    bad = [r for r in group if not record_is_sound(r)]
    rel_sd = statistics.stdev(times) / statistics.fmean(times) if len(times) >= 2 else None
    classes = {measurement_class(r) for r in (sound or group)}
    return {"time": median(times), "repeats": len(times), "rel_sd": rel_sd,
            "modes": ", ".join(sorted({measurement_mode(r) for r in sound})) or None,
            "cls": GPU_TIMED if classes == {GPU_TIMED} else sorted(classes - {GPU_TIMED})[0],
            "all_ok": bool(group) and not bad, "all_skipped": bool(group) and all(was_skipped(r) for r in group),
            "problem": describe_problem(bad[0]) if bad else None}


def pooled_rel_sd(side_a, side_b):
    """Pooled relative standard deviation of both sides' repeats (None unless both have >= 2)."""
    if side_a["rel_sd"] is None or side_b["rel_sd"] is None:
        return None
    dof_a, dof_b = side_a["repeats"] - 1, side_b["repeats"] - 1
    return math.sqrt((dof_a * side_a["rel_sd"] ** 2 + dof_b * side_b["rel_sd"] ** 2) / (dof_a + dof_b))


def neighbour_floors(pairs):
    """{(point, collective): median pooled s over that point's sizes of one collective}: the spread a case is
    judged with unless its own is above OWN_SPREAD_FACTOR x this."""
    spreads = {}
    for (point, _case_id), (side_a, side_b, collective) in pairs.items():
        value = pooled_rel_sd(side_a, side_b)
        if value is not None:
            spreads.setdefault((point, collective), []).append(value)
    return {key: median(values) for key, values in spreads.items()}


def run_drift_pct(time_a, time_b):
    """The run-to-run drift allowed for a case (percent, one run's standard deviation): RUN_DRIFT_TINY_PCT when
    the faster of the two medians is below TINY_TIME_US, else RUN_DRIFT_PCT."""
    return RUN_DRIFT_TINY_PCT if min(time_a, time_b) < TINY_TIME_US else RUN_DRIFT_PCT


def noise_verdict(side_a, side_b, threshold_pct, floor_rel_sd=None, drift_pct=0.0):
    """The noise rule (module docstring) for two summarized sides with times: (verdict, diff %, band %,
    band text); verdict is 'same within noise', 'slower', 'faster' (B against A) or 'inconclusive'.
    drift_pct: the run-to-run drift of one run (compare: run_drift_pct; 0 for sides measured in one run).
    Symmetric: swapping A and B swaps 'slower' and 'faster' and leaves the band alone.
    Also the A/B verdict's rule (decode.py), so that there is one."""
    time_a, time_b = side_a["time"], side_b["time"]
    diff = (time_b / time_a - 1) * 100
    # The change judged: the larger time over the smaller, so that a 10% speedup (t_A = 1.1 x t_B) and a 10%
    # slowdown (t_B = 1.1 x t_A) meet the same band.
    change = (max(time_a, time_b) / min(time_a, time_b) - 1) * 100
    pooled = pooled_rel_sd(side_a, side_b)
    if pooled is None:
        floor = ONE_REPEAT_FLOOR_TINY_PCT if min(time_a, time_b) < TINY_TIME_US else ONE_REPEAT_FLOOR_PCT
        band = max(floor, threshold_pct)
        band_text = f"{band:.1f} (one repeat: floor)"
        if change <= threshold_pct:
            verdict = "same within noise"
        elif change <= band:
            verdict = "inconclusive"
        else:
            verdict = "slower" if diff > 0 else "faster"
    else:
        spread = pooled if not floor_rel_sd or pooled > OWN_SPREAD_FACTOR * floor_rel_sd else floor_rel_sd
        drift_var = 2 * (drift_pct / 100) ** 2  # one drift per run, two runs
        repeat_var = (MEDIAN_SE_FACTOR * spread) ** 2 * (1 / side_a["repeats"] + 1 / side_b["repeats"])
        band = max(NOISE_SIGMAS * math.sqrt(repeat_var + drift_var) * 100, threshold_pct)
        band_text = f"{band:.1f}"
        verdict = "same within noise" if change <= band else ("slower" if diff > 0 else "faster")
    return verdict, diff, band, band_text


def correctness_verdict(side_a, side_b):
    """(verdict, regression?) from correctness alone."""
    if side_a["all_ok"] and not side_b["all_ok"]:
        return f"REGRESSION: {side_b['problem']} in B", True
    if side_a["all_ok"] and side_b["all_ok"]:
        return "ok in both", False
    if side_b["all_ok"]:
        return f"ok in B ({side_a['problem']} in A)", False
    return f"not ok in either (A {side_a['problem']}, B {side_b['problem']})", False


def point_shift(log_changes, threshold_pct):
    """(verdict, median change %, band %) of one point and collective from its per-size ln(t_B / t_A), or None
    with fewer than SHIFT_MIN_CASES sizes. verdict: 'same within noise', 'slower' or 'faster' (B against A)."""
    n = len(log_changes)
    if n < SHIFT_MIN_CASES:
        return None
    centre = median(log_changes)
    sd = 1.4826 * median([abs(value - centre) for value in log_changes])
    band = max(NOISE_SIGMAS * MEDIAN_SE_FACTOR * sd / math.sqrt(n) * 100, SHIFT_FLOOR_PCT, threshold_pct)
    change = (math.exp(abs(centre)) - 1) * 100  # symmetric, as per case
    verdict = "same within noise" if change <= band else ("slower" if centre > 0 else "faster")
    return verdict, (math.exp(centre) - 1) * 100, band


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
