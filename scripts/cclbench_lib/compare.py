"""`compare RUN_A RUN_B`: per case ratio and a verdict that knows the noise.

The rule (also printed in the output):
  t = median over repeats of each record's p50 time (us), records with status ok only.
  noise of a run's case = CV across its repeats when it has >= 2, else the standard error of the
  median from its per-iteration samples (1.2533 * CV_samples / sqrt(n)).
  combined = sqrt(noise_A^2 + noise_B^2); band = max(2 * combined, --threshold).
  diff = (t_B / t_A - 1) * 100. |diff| <= band: "same within noise"; else "faster" or "slower".
  A regression is "slower" with diff > --fail-above, or a case ok in A that is not ok in B;
  cases measured in different modes (backend, rank count, emulated ranks) are "not comparable";
  any regression makes the exit status 1.
"""
import math
import os

from .common import CclbenchError, write_atomic
from .records import (base_point_of, group_repeats, load_cases, median_time_us, record_is_sound, repeat_cv,
                      sample_noise_pct)
from .report import fmt_number, md_table


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


def summarize(group):
    sound = [r for r in group if record_is_sound(r)]
    if not sound:
        return None, None, group[-1].get("status") if group else None
    times = sorted(median_time_us(r) for r in sound)
    middle = len(times) // 2
    time_us = times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
    noise = repeat_cv(sound) if len(sound) >= 2 else sample_noise_pct(sound[0])
    return time_us, noise, "ok"


def measurement_mode(group):
    """backend/ranks/emulated of a case's records, e.g. 'nccl x16' or 'nccl x4 emulated'."""
    modes = set()
    for record in group:
        if record_is_sound(record):
            mode = f"{record.get('backend') or '?'} x{record.get('nranks') or '?'}"
            modes.add(mode + (" emulated" if record.get("emulated") else ""))
    return ", ".join(sorted(modes)) or None


def compare_runs(path_a, path_b, threshold_pct, fail_above_pct):
    groups_a, groups_b = _load(path_a), _load(path_b)
    rows = []
    regressions = []
    counts = {"faster": 0, "slower": 0, "same within noise": 0, "not comparable": 0}
    for key in sorted(set(groups_a) & set(groups_b)):
        time_a, noise_a, status_a = summarize(groups_a[key])
        time_b, noise_b, status_b = summarize(groups_b[key])
        point, case_id = key
        mode_a, mode_b = measurement_mode(groups_a[key]), measurement_mode(groups_b[key])
        if time_a is not None and time_b is not None and mode_a != mode_b:
            # Never mix measurement modes: emulated ranks vs real GPUs, MPI vs NCCL, other rank counts.
            counts["not comparable"] += 1
            rows.append((point, case_id, fmt_number(time_a), fmt_number(time_b), "-", "-", "-",
                         f"not comparable (mode A {mode_a}, B {mode_b})"))
            continue
        if time_a is None or time_b is None:
            verdict = f"not comparable (A {status_a}, B {status_b})"
            counts["not comparable"] += 1
            if time_a is not None and time_b is None:
                regressions.append(f"{point} {case_id}: ok in A, {status_b} in B")
                verdict = f"REGRESSION: {status_b} in B"
            rows.append((point, case_id, fmt_number(time_a), fmt_number(time_b), "-", "-", "-", verdict))
            continue
        combined = math.sqrt((noise_a or 0) ** 2 + (noise_b or 0) ** 2)
        band = max(2 * combined, threshold_pct)
        diff = (time_b / time_a - 1) * 100
        if abs(diff) <= band:
            verdict = "same within noise"
        else:
            verdict = "slower" if diff > 0 else "faster"
        counts[verdict] += 1
        shown = verdict
        if verdict == "slower" and diff > fail_above_pct:
            regressions.append(f"{point} {case_id}: {diff:+.1f}% (band {band:.1f}%)")
            shown = "slower (REGRESSION)"
        noise_known = "" if noise_a is not None and noise_b is not None else " (noise unknown)"
        rows.append((point, case_id, fmt_number(time_a), fmt_number(time_b), f"{time_b / time_a:.3f}",
                     f"{diff:+.1f}", f"{band:.1f}{noise_known}", shown))
    only_a = sorted(set(groups_a) - set(groups_b))
    only_b = sorted(set(groups_b) - set(groups_a))
    lines = [f"# cclbench compare", "", f"- A: `{path_a}`", f"- B: `{path_b}`", "",
             f"Rule: t = median over repeats of p50 time; band = max(2 x sqrt(noise_A^2 + noise_B^2), "
             f"{threshold_pct:g}%), noise = CV across repeats (>= 2) else standard error of the median from "
             f"per-iteration samples; diff = (t_B/t_A - 1) x 100; |diff| <= band is 'same within noise'. "
             f"Regression: slower by more than {fail_above_pct:g}%, or ok in A and not ok in B. Different "
             f"measurement modes (backend, ranks, emulated) are never compared.", "",
             f"Summary: {counts['faster']} faster, {counts['slower']} slower, {counts['same within noise']} same "
             f"within noise, {counts['not comparable']} not comparable, {len(only_a)} only in A, {len(only_b)} only "
             f"in B; {len(regressions)} regression(s).", ""]
    if rows:
        lines.append(md_table(["point", "case", "A p50 us", "B p50 us", "B/A", "diff %", "band %", "verdict"], rows))
    for label, keys in (("Only in A", only_a), ("Only in B", only_b)):
        if keys:
            lines += ["", f"## {label}", ""] + [f"- {point} {case_id}" for point, case_id in keys]
    return "\n".join(lines) + "\n", regressions


def run_compare(path_a, path_b, threshold_pct, fail_above_pct, out_path=None, stream=None):
    text, regressions = compare_runs(path_a, path_b, threshold_pct, fail_above_pct)
    if out_path:
        write_atomic(out_path, text)
    else:
        stream.write(text)
    return regressions
