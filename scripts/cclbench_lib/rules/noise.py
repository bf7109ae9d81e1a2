"""The noise rule of `compare RUN_A RUN_B`: per case, the headline time of A and B and a verdict that knows its noise.

The rule (also printed in the output and stated in docs/bring-up.md, "Compare"):
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
import statistics

from ..base.numbers import median
from ..rules.repeat_rule import MAD_TO_SIGMA
from ..model.records import (GPU_TIMED, bandwidth_time_us, describe_problem, measurement_class, measurement_mode,
                             record_is_sound, was_skipped)


NOISE_SIGMAS = 4.0
MEDIAN_SE_FACTOR = 1.2533
# One repeat a side: run-to-run differences of healthy GPUs reach about 10% (AlltoAll, 2-GPU H200, issue
# 15), so only a difference beyond 15% can be called from a single pair of runs.
ONE_REPEAT_FLOOR_PCT = 15.0
# Below TINY_TIME_US, 20%: two single-repeat single-GPU H200 baselines (2026-12-01, 112 cases of 1-35 us)
# differed by up to 16.9% (2.84 against 2.43 us), 3 cases beyond 10%: the tails of a few-us point are heavy.
ONE_REPEAT_FLOOR_TINY_PCT = 20.0
# One run's drift (a standard deviation, percent). The repeats of one run share its state, so their spread
# cannot show how far a whole run sits from another: two back-to-back single-GPU H200 baselines (times
# 3-40 us) differed by more than 2% on 58 of 112 cases at one repeat, and at three
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
    Also the A/B verdict's rule (rules/ab.py), so that there is one."""
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
    sd = MAD_TO_SIGMA * median([abs(value - centre) for value in log_changes])
    band = max(NOISE_SIGMAS * MEDIAN_SE_FACTOR * sd / math.sqrt(n) * 100, SHIFT_FLOOR_PCT, threshold_pct)
    change = (math.exp(abs(centre)) - 1) * 100  # symmetric, as per case
    verdict = "same within noise" if change <= band else ("slower" if centre > 0 else "faster")
    return verdict, (math.exp(centre) - 1) * 100, band
