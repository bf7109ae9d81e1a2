"""The verdicts of `compare RUN_A RUN_B` as data: per case (noise band, correctness), per point and collective
(point-wide shift), the counts and the regressions, and whether the two runs are comparable at all. The rule is
rules/noise.py's; render/compare.py writes it."""

import math

from ..base.values import format_size
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
    pairs, sizes = {}, {}
    for key in sorted(set(groups_a) & set(groups_b)):
        records = groups_a[key] + groups_b[key]
        pairs[key] = (summarize(groups_a[key]), summarize(groups_b[key]), records[0].get("collective"))
        sizes[key] = records[0].get("requested_bytes")
    floors = neighbour_floors(pairs)
    cases, regressions, log_changes = [], [], {}
    for (point, case_id), (side_a, side_b, collective) in pairs.items():
        time_a, time_b = side_a["time"], side_b["time"]
        case = {"point": point, "case_id": case_id, "collective": collective, "size": sizes[(point, case_id)],
                "time_a": time_a, "time_b": time_b, "timed": False, "regression": False}
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
            regressions.append({"point": point, "case_id": case_id, "diff": diff, "band": band, "time_a": time_a,
                                "time_b": time_b})
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


# compare.json's words for the verdicts (results_schema/compare.schema.json): the stable code of each case verdict.
CASE_CODES = {"faster": "compare.faster", "slower": "compare.slower", "same within noise": "compare.same",
              "inconclusive": "compare.inconclusive", "correctness only": "compare.correctness_only",
              "not comparable": "compare.not_comparable", "skipped in both": "compare.skipped_in_both"}
REGRESSION_CODE = "compare.regression"
# Verdict of a group (a size band, a point, the comparison), from its cases' and shifts' verdicts, first match.
REGRESSION, SLOWER, FASTER, INCONCLUSIVE, SAME, NOT_COMPARABLE = (
    "regression", "slower", "faster", "inconclusive", "same", "not comparable")
# Size bands: latency-bound below 64K per rank, bandwidth-bound from 16M; the middle is where the algorithm changes.
SIZE_BANDS = (("small", 0, 64 << 10), ("medium", 64 << 10, 16 << 20), ("large", 16 << 20, None))


def case_code(case):
    """The stable code of one case of judge_runs: compare.regression, else its verdict's."""
    return REGRESSION_CODE if case["regression"] else CASE_CODES.get(case["verdict"], "compare.not_comparable")


def size_band(size):
    for name, low, high in SIZE_BANDS:
        if isinstance(size, int) and size >= low and (high is None or size < high):
            return name
    return None


def group_verdict(items):
    """regression, slower, faster, inconclusive, same or not comparable of cases/shifts together."""
    verdicts = {item["verdict"] for item in items}
    if any(item["regression"] for item in items):
        return REGRESSION
    for verdict, name in (("slower", SLOWER), ("faster", FASTER), ("inconclusive", INCONCLUSIVE),
                          ("same within noise", SAME), ("same", SAME)):
        if verdict in verdicts:
            return name
    return NOT_COMPARABLE


def compare_verdict(judged):
    """{overall, bands: [{point, collective, band, verdict, cases, counts}]} of judge_runs' result."""
    bands = {}
    for case in judged["cases"]:
        key = (case["point"], case["collective"], size_band(case["size"]))
        bands.setdefault(key, []).append(case)
    rows = []
    for (point, collective, band), cases in sorted(bands.items(), key=lambda item: tuple(str(v) for v in item[0])):
        counts = {}
        for case in cases:
            counts[case_code(case)] = counts.get(case_code(case), 0) + 1
        rows.append({"point": point, "collective": collective, "band": band, "verdict": group_verdict(cases),
                     "cases": len(cases), "codes": counts})
    overall = group_verdict(judged["cases"] + judged["shifts"])
    return {"overall": overall, "bands": rows}


# Nothing comparable is not a pass. Two runs are comparable when at least MIN_MATCHED_SHARE of the cases of the
# smaller one have a counterpart in the other measured in the same mode (same point, case, backend, ranks, emulation,
# graph or eager), and, unless the user accepts it, both were measured on the same GPU model and count, NVIDIA
# driver, CUDA and NCCL (model/smoke_reference.py IDENTITY_FIELDS). Half: a smoke judged against a baseline matches
# all of its own cases; two runs of one plan match all; a run whose sizes or points were changed, or a baseline of
# other GPUs, matches little or nothing. Otherwise `compare` and `smoke --against` exit NOT_COMPARABLE_EXIT.
MIN_MATCHED_SHARE = 0.5
NOT_COMPARABLE_EXIT = 3
REGRESSION_EXIT = 1
NOT_COMPARABLE_CODE = "compare.nothing_comparable"
OTHER_HARDWARE_CODE = "compare.other_hardware"
OTHER_HARDWARE_CHOICES = ("refuse", "warn")


def _sizes_text(sizes):
    shown = [format_size(size) if isinstance(size, int) else str(size) for size in sorted(sizes, key=str)[:6]]
    return ", ".join(shown) + (f" and {len(sizes) - 6} more" if len(sizes) > 6 else "")


def _points_text(points):
    names = sorted(points)
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def unmatched_parts(judged, sizes_a, sizes_b):
    """What did not match, as lines: points only in one run, the sizes only in one run of a point both have, the
    points measured in other modes. sizes_x: {(point, case_id): requested bytes} of each run."""
    points_a = {point for point, _ in sizes_a}
    points_b = {point for point, _ in sizes_b}
    lines = []
    if points_a - points_b:
        lines.append(f"points only in A: {_points_text(points_a - points_b)}")
    if points_b - points_a:
        lines.append(f"points only in B: {_points_text(points_b - points_a)}")
    for point in sorted(points_a & points_b):
        only_a = {sizes_a[key] for key in judged["only_a"] if key[0] == point} - \
            {size for key, size in sizes_b.items() if key[0] == point}
        only_b = {sizes_b[key] for key in judged["only_b"] if key[0] == point} - \
            {size for key, size in sizes_a.items() if key[0] == point}
        if only_a or only_b:
            lines.append(f"{point}: sizes only in A: {_sizes_text(only_a) or 'none'}; only in B: "
                         f"{_sizes_text(only_b) or 'none'}")
    modes = {}
    for case in judged["cases"]:
        if "modes" in case:
            modes.setdefault(case["point"], case["modes"])
    for point, (mode_a, mode_b) in sorted(modes.items()):
        lines.append(f"{point}: measured as {mode_a} in A, {mode_b} in B")
    return lines


def comparability(judged, sizes_a, sizes_b, identity_diffs, other_hardware="refuse"):
    """Whether two runs are comparable (the rule above) as data: {'comparable', 'matched', 'cases_a', 'cases_b',
    'share' (matched over the smaller run's cases; None when a run has none), 'min_share', 'code' (None when
    comparable), 'refused' (other hardware, refused), 'reasons' (what did not match, lines), 'identity' ([{'field', 'a', 'b'}]), 'other_hardware'}.
    identity_diffs: model/smoke_reference.identity_differences of the two runs; with other_hardware 'warn' they are
    reported and the runs still compared."""
    matched = sum(1 for case in judged["cases"] if "modes" not in case)
    smaller = min(len(sizes_a), len(sizes_b))
    share = matched / smaller if smaller else None
    reasons = []
    code = None
    if not smaller:
        empty = [name for name, sizes in (("A", sizes_a), ("B", sizes_b)) if not sizes]
        reasons.append(f"{' and '.join(empty)} hold{'s' if len(empty) == 1 else ''} no case to compare (a smoke "
                       "reference measured without a GPU has none: the smoke's cases are GPU measurements)")
    elif share < MIN_MATCHED_SHARE:
        reasons.append(f"{matched} of the smaller run's {smaller} case(s) matched ({share:.0%}; at least "
                       f"{MIN_MATCHED_SHARE:.0%} must)")
    if reasons:
        code = NOT_COMPARABLE_CODE
        reasons += unmatched_parts(judged, sizes_a, sizes_b)
    identity = [{"field": label, "a": value_a, "b": value_b} for label, value_a, value_b in identity_diffs]
    refused = bool(identity) and other_hardware == "refuse"
    if refused:
        code = code or OTHER_HARDWARE_CODE
        reasons.append("measured on other hardware or software: " + "; ".join(
            f"{item['field']} A {item['a']}, B {item['b']}" for item in identity)
            + " (--other-hardware warn compares them anyway)")
    return {"comparable": code is None, "refused": refused, "matched": matched, "cases_a": len(sizes_a), "cases_b": len(sizes_b),
            "share": share, "min_share": MIN_MATCHED_SHARE, "code": code, "reasons": reasons, "identity": identity,
            "other_hardware": other_hardware}


def compare_exit(judged, comparable):
    """compare's exit status: NOT_COMPARABLE_EXIT when the runs were refused as other hardware; else REGRESSION_EXIT
    on a regression; else NOT_COMPARABLE_EXIT when too little matched; else 0."""
    if comparable["refused"]:
        return NOT_COMPARABLE_EXIT
    if judged["regressions"]:
        return REGRESSION_EXIT
    return 0 if comparable["comparable"] else NOT_COMPARABLE_EXIT
