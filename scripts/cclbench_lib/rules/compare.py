"""The verdicts of `compare RUN_A RUN_B` as data: per case (noise band, correctness), per point and collective
(point-wide shift), the counts and the regressions. The rule is rules/noise.py's; render/compare.py writes it."""

import math

from ..model.records import CLASS_LABELS, GPU_TIMED, MPI_HOST
from ..rules.noise import correctness_verdict, neighbour_floors, noise_verdict, point_shift, run_drift_pct, summarize

VERDICTS = ("faster", "slower", "same within noise", "inconclusive", "correctness only", "not comparable")


def judge_runs(groups_a, groups_b, threshold_pct, fail_above_pct, host_times=False):
    """groups: {(point, case_id): [records of each repeat]} of run A and run B. Returns
    {'cases': [{'point', 'case_id', 'time_a', 'time_b', 'verdict', 'timed', 'regression', ...}],
     'shifts': [{'point', 'collective', 'sizes', 'diff', 'band', 'verdict', 'regression'}],
     'counts': {verdict: n}, 'shift_counts': {'faster': n, 'slower': n},
     'regressions': [{'point', 'case_id' or 'collective', 'diff', 'band' or 'problem', ...}] in the order found,
     'only_a': [(point, case_id)], 'only_b': [...]}.
    A timed case has 'ratio' (t_B / t_A), 'diff' (%), 'band' and 'band_text'; one judged on correctness only has
    'label' (its measurement class); one whose modes differ has 'modes' (A's, B's)."""
    counts = {verdict: 0 for verdict in VERDICTS}
    pairs = {}
    for key in sorted(set(groups_a) & set(groups_b)):
        records = groups_a[key] + groups_b[key]
        pairs[key] = (summarize(groups_a[key]), summarize(groups_b[key]), records[0].get("collective"))
    floors = neighbour_floors(pairs)
    cases, regressions, log_changes = [], [], {}
    for (point, case_id), (side_a, side_b, collective) in pairs.items():
        time_a, time_b = side_a["time"], side_b["time"]
        case = {"point": point, "case_id": case_id, "time_a": time_a, "time_b": time_b, "timed": False,
                "regression": False}
        cases.append(case)
        if side_a["modes"] and side_b["modes"] and side_a["modes"] != side_b["modes"]:
            # Never mix measurement modes: emulated vs real GPUs, MPI vs NCCL, other rank counts, graph vs eager.
            counts["not comparable"] += 1
            case.update(verdict="not comparable", modes=(side_a["modes"], side_b["modes"]))
            continue
        verdict, regressed = correctness_verdict(side_a, side_b)
        if side_a["all_skipped"] and side_b["all_skipped"]:
            verdict, regressed = "skipped in both", False
        correctness_only = side_a["cls"] != GPU_TIMED or side_b["cls"] != GPU_TIMED
        if correctness_only and host_times and {side_a["cls"], side_b["cls"]} == {MPI_HOST}:
            correctness_only = False
        if regressed or correctness_only or time_a is None or time_b is None:
            case["verdict"] = verdict
            if regressed:
                case["regression"] = True
                regressions.append({"point": point, "case_id": case_id, "problem": side_b["problem"]})
            if correctness_only and not regressed:
                case["label"] = CLASS_LABELS.get(side_b["cls"] if side_b["cls"] != GPU_TIMED else side_a["cls"], "")
                counts["correctness only"] += 1
            else:
                counts["not comparable"] += 1
            continue
        verdict, diff, band, band_text = noise_verdict(side_a, side_b, threshold_pct, floors.get((point, collective)),
                                                       run_drift_pct(time_a, time_b))
        log_changes.setdefault((point, collective), []).append(math.log(time_b / time_a))
        counts[verdict] += 1
        case.update(verdict=verdict, timed=True, ratio=time_b / time_a, diff=diff, band=band, band_text=band_text)
        if verdict == "slower" and diff > fail_above_pct:
            case["regression"] = True
            regressions.append({"point": point, "case_id": case_id, "diff": diff, "band": band})
    shifts, shift_counts = [], {"faster": 0, "slower": 0}
    for (point, collective), values in sorted(log_changes.items()):
        judged = point_shift(values, threshold_pct)
        if judged is None:
            continue
        verdict, diff, band = judged
        if verdict in shift_counts:
            shift_counts[verdict] += 1
        shift = {"point": point, "collective": collective, "sizes": len(values), "diff": diff, "band": band,
                 "verdict": verdict, "regression": verdict == "slower" and diff > fail_above_pct}
        if shift["regression"]:
            regressions.append({"point": point, "collective": collective, "sizes": len(values), "diff": diff,
                                "band": band})
        shifts.append(shift)
    return {"cases": cases, "shifts": shifts, "counts": counts, "shift_counts": shift_counts,
            "regressions": regressions, "only_a": sorted(set(groups_a) - set(groups_b)),
            "only_b": sorted(set(groups_b) - set(groups_a))}
