"""The verdict of `smoke --against` a measured reference (model/smoke_reference.py merge_capture): bands from the
run-to-run spread measured on the machine itself, an unstable finding for a run that scatters more than its
reference, and a shift of the whole GPU. The same data shapes as rules/compare.judge_runs, so compare.json, the JUnit
file and against.md render it as they render any comparison. docs/ci.md ("How the smoke judges") states this rule.

Per case, with the reference's N runs (each the geometric mean of r launches) and the run's r launches:
  value     = geometric mean of the run's launch values (the case's estimator per launch: model ESTIMATORS).
  diff      = value / centre - 1, centre = the geometric mean of the reference's N run values.
  s         = the reference's measured spread (ln units): the standard deviation of its N run values, floored by the
              within-run spread of its launches over sqrt(r). Never the run's own scatter.
  band      = exp(t x s x sqrt(1 + 1/N)) - 1, t = Student's t quantile at CASE_ALPHA with N - 1 degrees of freedom:
              a prediction bound for one new run, with the uncertainty of a spread measured from N runs in it.
  slower    = diff > band; a regression when slower and diff > --fail-above (0 by default: the band decides).
  faster    = diff < -(1 - exp(-t x s x sqrt(1 + 1/N))): reported, never a failure.
Unstable (a failure, whatever the value did), either of:
  launches  = the run's launches scatter more than the reference's launches within a run: F = var(ln launch values) /
              launch_spread^2 above Fisher's F quantile at UNSTABLE_ALPHA with (r - 1, N (r - 1)) degrees of freedom;
  samples   = k of the run's m samples lie further above their launch's median than the largest such excursion among
              the reference's M samples and than EXCURSION_FLOOR_PCT: under a healthy GPU each sample is as likely as
              any of the M + m to be the largest, so P(k or more) <= m (m-1)...(m-k+1) / ((M+m)(M+m-1)...(M+m-k+1));
              unstable below UNSTABLE_ALPHA. The floor: how far one sample of a healthy host link strays differs
              from minute to minute, more than a reference of minutes sees (below).
Whole GPU (cases moving together by less than their own bands):
  index     = the mean of the cases' ln(value / centre), weighted by 1 / s^2.
  s_index   = the standard deviation of the same index over the reference's N runs (which holds whatever the cases
              share: clocks, temperature), floored by 1 / sqrt(sum of weights) (independent cases).
  shift     = |index| beyond exp(t_shift x s_index x sqrt(1 + 1/N)) - 1 at SHIFT_ALPHA, with at least SHIFT_MIN_CASES
              cases and SHIFT_AGREEMENT of them moved the same way; slower is a regression (above --fail-above).
"""

import math
import statistics

from ..base.distributions import f_quantile_upper, t_quantile_upper
from ..model.smoke_reference import excursions_pct

CASE_ALPHA = 1e-4       # one-sided, per case: about 1 false alarm in 10,000 healthy runs per case
UNSTABLE_ALPHA = 1e-4   # each of the two scatter tests, per case
SHIFT_ALPHA = 1e-4      # the whole-GPU index, per run
SHIFT_AGREEMENT = 0.75  # the share of cases that must move the index's way
SHIFT_MIN_CASES = 3
# A sample is a hit of the sample test only when it is this much slower than its launch's median (and beyond every
# excursion of the reference): single samples of a healthy host link stray from run to run by more than the reference
# sees. Measured on an H100 (2026-12-06, docs/ci.md): a reference of 10 runs over 95 s never strayed 1% (400 samples a
# case), yet 3 of 20 clean runs in the 4 minutes after had 9-13 host-link samples 0.8-3.5% slow (unstable, false
# alarms); none of the 800 samples of those 20 runs strayed 5% on the device-to-host copy, one on the
# host-to-device copy. Interference worth failing a job slows the samples it hits by more: a copy that shares its
# link with another copy takes up to twice as long. 5% is also the slowdown the smoke is built to catch (issue 44).
EXCURSION_FLOOR_PCT = 5.0
GPU_SHIFT_POINT = "gpu"
GPU_SHIFT_LABEL = "all timed cases"
VERDICTS = ("faster", "slower", "same within noise", "correctness only", "not comparable")


def band_factor(alpha, runs):
    """t x sqrt(1 + 1/N): the band in units of the measured spread, for a reference of N runs."""
    return t_quantile_upper(alpha, runs - 1) * math.sqrt(1 + 1 / runs)


def slower_band_pct(spread_pct, runs, alpha=CASE_ALPHA):
    """The largest slowdown (percent) a healthy run reaches with probability 1 - alpha."""
    return (math.exp(band_factor(alpha, runs) * spread_pct / 100) - 1) * 100


def faster_band_pct(spread_pct, runs, alpha=CASE_ALPHA):
    """The largest speedup (percent, positive) a healthy run reaches with probability 1 - alpha."""
    return (1 - math.exp(-band_factor(alpha, runs) * spread_pct / 100)) * 100


def smallest_caught_pct(spread_pct, runs, alpha=CASE_ALPHA, power_z=2.326):
    """The smallest slowdown (percent) caught in 99% of runs (power_z: the normal quantile of the power): beyond
    the band by power_z of one run's own spread."""
    return (math.exp(band_factor(alpha, runs) * spread_pct / 100 + power_z * spread_pct / 100) - 1) * 100


def exceedance_probability(count, drawn, reference_count):
    """P(at least `count` of `drawn` new samples exceed the largest of `reference_count` old ones), all exchangeable:
    the top `count` of the pooled samples are all new."""
    probability = 1.0
    for j in range(count):
        probability *= (drawn - j) / (reference_count + drawn - j)
    return probability


def launch_scatter(logs, measured, alpha=UNSTABLE_ALPHA):
    """The launch test of the unstable finding, or None when it cannot be made: {'f', 'critical', 'spread_pct',
    'reference_pct', 'unstable'} from the run's ln launch values."""
    reference = measured.get("launch_spread_pct")
    dof = measured.get("launch_dof") or 0
    if len(logs) < 2 or not reference or dof < 1:
        return None
    spread = statistics.stdev(logs) * 100
    f_value = (spread / reference) ** 2
    critical = f_quantile_upper(alpha, len(logs) - 1, dof)
    return {"f": f_value, "critical": critical, "spread_pct": spread, "reference_pct": reference,
            "unstable": f_value > critical}


def sample_scatter(excursions, measured, alpha=UNSTABLE_ALPHA):
    """The sample test of the unstable finding, or None when it cannot be made: {'beyond', 'samples', 'largest_pct',
    'threshold_pct', 'reference_samples', 'probability', 'unstable'} from the run's sample excursions (percent above
    their launch's median); a sample counts beyond threshold_pct = max(the reference's largest, EXCURSION_FLOOR_PCT)."""
    largest = measured.get("excursion_max_pct")
    reference_count = measured.get("samples") or 0
    if largest is None or not reference_count or not excursions:
        return None
    threshold = max(largest, EXCURSION_FLOOR_PCT)
    beyond = sum(1 for value in excursions if value > threshold)
    probability = exceedance_probability(beyond, len(excursions), reference_count)
    return {"beyond": beyond, "samples": len(excursions), "largest_pct": largest, "threshold_pct": threshold,
            "reference_samples": reference_count, "probability": probability, "unstable": probability < alpha}


def _problem(entries):
    bad = [entry for entry in entries if entry.get("status") != "ok" or entry.get("wrong")]
    if not bad:
        return None
    entry = bad[0]
    return entry.get("reason") or (f"{entry['wrong']} wrong" if entry.get("wrong") else entry.get("status"))


def _mode_text(mode, repeats):
    return (f"{mode['backend']}, {mode['nranks']} rank(s){', emulated' if mode['emulated'] else ''}"
            f"{', graph x' + str(mode['graph_launches']) if mode['graph_launches'] else ''}, {repeats} launch(es) a run")


def run_excursions(entries):
    """Every sample excursion (percent above its launch's median) of one case's launches in a run."""
    return [value for entry in entries for value in excursions_pct(entry.get("samples_us"))]


def judge_case(ref_case, run_case, fail_above_pct):
    """One case: the compare-shaped dict (rules/compare.judge_runs' cases) plus 'spread', 'estimator', 'unstable';
    and the regressions it adds."""
    measured = ref_case["measured"]
    case = {"point": ref_case["point"], "case_id": ref_case["case_id"], "collective": ref_case.get("collective"),
            "size": ref_case.get("bytes"), "time_a": measured["center_us"], "time_b": None, "timed": False,
            "regression": False, "estimator": measured["estimator"], "spread": measured["spread_pct"], "unstable": None}
    regressions = []
    entries = run_case["repeats"]
    if ref_case["mode"] != run_case["mode"] or len(entries) != measured["repeats"]:
        case.update(verdict="not comparable", modes=(_mode_text(ref_case["mode"], measured["repeats"]),
                                                     _mode_text(run_case["mode"], len(entries))))
        return case, regressions
    problem = _problem(entries)
    if problem:
        case["verdict"] = f"REGRESSION: {problem} in B"
        case["regression"] = True
        regressions.append({"point": case["point"], "case_id": case["case_id"], "problem": problem})
        return case, regressions
    logs = [math.log(entry["time_us"]) for entry in entries]
    value = math.exp(statistics.fmean(logs))
    runs = measured["runs"]
    diff = (value / measured["center_us"] - 1) * 100
    band = slower_band_pct(measured["spread_pct"], runs)
    faster = faster_band_pct(measured["spread_pct"], runs)
    verdict = "slower" if diff > band else ("faster" if diff < -faster else "same within noise")
    case.update(time_b=value, timed=True, ratio=value / measured["center_us"], diff=diff, band=band,
                band_text=f"{band:.2f}", verdict=verdict)
    if verdict == "slower" and diff > fail_above_pct:
        case["regression"] = True
        regressions.append({"point": case["point"], "case_id": case["case_id"], "diff": diff, "band": band,
                            "time_a": measured["center_us"], "time_b": value})
    tests = {"launches": launch_scatter(logs, measured),
             "samples": sample_scatter(run_excursions(entries), measured)}
    failed = {name: test for name, test in tests.items() if test and test["unstable"]}
    if failed:
        case["unstable"] = failed
        case["regression"] = True
        regressions.append({"point": case["point"], "case_id": case["case_id"], "unstable": failed})
    return case, regressions


def gpu_shift(pairs, runs, fail_above_pct):
    """The whole-GPU shift of the timed cases (pairs: [(reference case, judged case)]), or None with fewer than
    SHIFT_MIN_CASES: {'point', 'collective', 'sizes', 'diff', 'band', 'spread', 'agree', 'verdict', 'regression'}."""
    timed = [(ref, case) for ref, case in pairs if case["timed"]]
    if len(timed) < SHIFT_MIN_CASES:
        return None
    weights = [1.0 / (ref["measured"]["spread_pct"] / 100) ** 2 if ref["measured"]["spread_pct"] > 0 else 0.0
               for ref, _ in timed]
    if not sum(weights):
        return None
    total = sum(weights)
    index = sum(w * math.log(case["ratio"]) for w, (_, case) in zip(weights, timed)) / total
    per_run = []
    for k in range(runs):
        per_run.append(sum(w * math.log(ref["measured"]["run_values_us"][k] / ref["measured"]["center_us"])
                           for w, (ref, _) in zip(weights, timed)) / total)
    spread = max(statistics.stdev(per_run) * 100, 100 / math.sqrt(total))
    band = (math.exp(band_factor(SHIFT_ALPHA, runs) * spread / 100) - 1) * 100
    faster_band = (1 - math.exp(-band_factor(SHIFT_ALPHA, runs) * spread / 100)) * 100
    diff = (math.exp(index) - 1) * 100
    agree = sum(1 for _, case in timed if (case["diff"] > 0) == (index > 0)) / len(timed)
    verdict = "same within noise"
    if agree >= SHIFT_AGREEMENT and diff > band:
        verdict = "slower"
    elif agree >= SHIFT_AGREEMENT and diff < -faster_band:
        verdict = "faster"
    return {"point": GPU_SHIFT_POINT, "collective": GPU_SHIFT_LABEL, "sizes": len(timed), "diff": diff, "band": band,
            "spread": spread, "agree": agree, "verdict": verdict,
            "regression": verdict == "slower" and diff > fail_above_pct}


def judge_smoke(reference, own, fail_above_pct):
    """The smoke's cases (own: its single-run reference) against a measured reference, in judge_runs' shape:
    {'cases', 'shifts', 'counts', 'shift_counts', 'regressions', 'only_a', 'only_b'}."""
    ref_cases = {(case["point"], case["case_id"]): case for case in reference["cases"]}
    run_cases = {(case["point"], case["case_id"]): case for case in own["cases"]}
    counts = {verdict: 0 for verdict in VERDICTS}
    cases, regressions, pairs = [], [], []
    for key in sorted(set(ref_cases) & set(run_cases)):
        case, found = judge_case(ref_cases[key], run_cases[key], fail_above_pct)
        cases.append(case)
        regressions += found
        counts[case["verdict"] if case["verdict"] in counts else "not comparable"] += 1
        pairs.append((ref_cases[key], case))
    shifts, shift_counts = [], {"faster": 0, "slower": 0}
    shift = gpu_shift(pairs, reference["capture"]["runs"], fail_above_pct)
    if shift:
        shifts.append(shift)
        if shift["verdict"] in shift_counts:
            shift_counts[shift["verdict"]] += 1
        if shift["regression"]:
            regressions.append({"point": GPU_SHIFT_POINT, "collective": GPU_SHIFT_LABEL, "sizes": shift["sizes"],
                                "diff": shift["diff"], "band": shift["band"], "agree": shift["agree"]})
    return {"cases": cases, "shifts": shifts, "counts": counts, "shift_counts": shift_counts,
            "regressions": regressions, "only_a": sorted(set(ref_cases) - set(run_cases)),
            "only_b": sorted(set(run_cases) - set(ref_cases))}
