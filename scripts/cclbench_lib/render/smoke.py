"""The smoke's verdict against a measured reference (rules/smoke_bands.py) as text: the rule, the lines the CLI and
JUnit print, against.md, compare.json's smoke section, and the table of the smallest change each case can catch
(docs/ci.md and a capture's capture.md are generated from it)."""

import math

from ..render.compare import compare_document, comparable_text, regression_text
from ..render.markdown import fmt_number, md_table
from ..rules.compare import compare_exit, NOT_COMPARABLE_EXIT
from ..rules.smoke_bands import (CASE_ALPHA, GPU_SHIFT_POINT, SHIFT_AGREEMENT, SHIFT_ALPHA, SHIFT_MIN_CASES,
                                 UNSTABLE_ALPHA, band_factor, slower_band_pct, smallest_caught_pct)

SMOKE_RULE = (
    f"Per case: the run's value is the geometric mean of its launches' values (each launch by the case's estimator); "
    f"diff = value / the reference's centre (the geometric mean of its N runs) - 1; band = exp(t x s x sqrt(1 + 1/N)) - "
    f"1, s = the reference's measured run-to-run spread (floored by what its runs cannot scatter less than: its "
    f"launches' spread within a run and their samples' standard error, each over sqrt(repeats)), t = Student's t at {CASE_ALPHA:g} one-sided with N - 1 degrees of freedom. Slower beyond the "
    f"band (and above --fail-above) is a regression. Unstable (a failure): the run's launches scatter beyond the "
    f"reference's (F test at {UNSTABLE_ALPHA:g}), or more of its samples lie above their launch's median than the "
    f"reference's largest such excursion allows (P < {UNSTABLE_ALPHA:g}); the run's own scatter never widens a band. "
    f"Whole GPU: the 1/s^2-weighted mean change of the timed cases against the same index's spread over the "
    f"reference's runs (t at {SHIFT_ALPHA:g}), with at least {SHIFT_MIN_CASES} cases and {SHIFT_AGREEMENT:.0%} of them "
    f"moving its way; slower is a regression.")


def unstable_text(tests):
    """The unstable finding's tests (rules/smoke_bands.judge_case 'unstable') as one phrase."""
    parts = []
    launches = tests.get("launches")
    if launches:
        parts.append(f"its launches spread {launches['spread_pct']:.2f}% (the reference's within a run "
                     f"{launches['reference_pct']:.2f}%; F {launches['f']:.1f} > {launches['critical']:.1f})")
    samples = tests.get("samples")
    if samples:
        floor = samples["threshold_pct"] > samples["largest_pct"]
        parts.append(f"{samples['beyond']} of its {samples['samples']} samples lie more than "
                     f"+{samples['threshold_pct']:.2f}% above their launch's median ("
                     + (f"the floor; the reference's largest excursion +{samples['largest_pct']:.2f}%"
                        if floor else "the reference's largest excursion")
                     + f" in {samples['reference_samples']} samples; P {samples['probability']:.1e})")
    return "; ".join(parts)


def smoke_regression_text(item):
    """One finding of judge_smoke as the line the CLI and JUnit print."""
    if "unstable" in item:
        return f"{item['point']} {item['case_id']}: unstable: {unstable_text(item['unstable'])}"
    if item.get("point") == GPU_SHIFT_POINT and "agree" in item:
        return (f"whole GPU: {item['sizes']} timed cases {item['diff']:+.2f}% together (1/s^2-weighted mean, "
                f"{item['agree']:.0%} of them that way; band {item['band']:.2f}%)")
    return regression_text(item)


def smoke_case_text(case):
    """One judged case's JUnit message when it is no regression."""
    if not case["timed"]:
        return case["verdict"]
    return f"{case['diff']:+.2f}% (band {case['band']:.2f}%, spread {case['spread']:.2f}%): {case['verdict']}"


def sensitivity_rows(reference):
    """Per case of a measured reference: point, case, estimator, centre, run spread, the two floors (launches within a
    run, samples' standard error, each over sqrt(r)), the spread used, the band, the smallest slowdown caught in 99%
    of runs."""
    runs = reference["capture"]["runs"]
    rows = []
    for case in reference["cases"]:
        measured = case["measured"]
        root = math.sqrt(measured["repeats"])
        floors = [measured.get(key) / root if measured.get(key) is not None else None
                  for key in ("launch_spread_pct", "sample_se_pct")]
        rows.append([case["point"], case["case_id"], measured["estimator"], fmt_number(measured["center_us"]),
                     f"{measured['run_spread_pct']:.3f}"] + [f"{value:.3f}" if value is not None else "-" for value in floors]
                    + [f"{measured['spread_pct']:.3f}", f"{slower_band_pct(measured['spread_pct'], runs):.2f}",
                       f"{smallest_caught_pct(measured['spread_pct'], runs):.2f}"])
    return rows


SENSITIVITY_HEADER = ["point", "case", "estimator", "centre us", "run spread %", "launches floor %", "samples floor %",
                      "spread used %", "band %", "smallest slowdown caught (99% of runs) %"]


def sensitivity_table(reference):
    """The markdown table of the smallest change each case can catch, and the line that says what it is from."""
    capture = reference["capture"]
    runs = capture["runs"]
    line = (f"From a reference of {runs} runs of {capture['repeats']} launch(es) a part ({capture.get('first_utc')} to "
            f"{capture.get('last_utc')}, {reference['identity'].get('gpu_model')}, driver "
            f"{reference['identity'].get('nvidia_driver')}, NCCL {reference['identity'].get('nccl')}); band = "
            f"exp({band_factor(CASE_ALPHA, runs):.2f} x spread) - 1; smallest caught = exp(({band_factor(CASE_ALPHA, runs):.2f}"
            f" + 2.33) x spread) - 1.")
    return line + "\n\n" + md_table(SENSITIVITY_HEADER, sensitivity_rows(reference))


def smoke_compare_document(judged, comparable, source, mine, fail_above_pct, created_utc, reference, inject, age_days):
    """compare.json of a smoke judged against a measured reference: compare's document, each case's unstable tests,
    and the smoke section (the rule, the capture, the whole-GPU index, the test knob when it was on)."""
    document = compare_document(judged, source, mine, 0.0, fail_above_pct, False, created_utc, comparable,
                                smoke_regression_text)
    for item, case in zip(document["cases"], judged["cases"]):
        item["unstable"] = case.get("unstable")
    document["smoke"] = {"rule": SMOKE_RULE, "case_alpha": CASE_ALPHA, "unstable_alpha": UNSTABLE_ALPHA,
                         "shift_alpha": SHIFT_ALPHA, "capture": reference["capture"], "reference_age_days": age_days,
                         "gpu_shift": judged["shifts"][0] if judged["shifts"] else None,
                         "injected_slowdown": {"part": inject[0], "pct": inject[1]} if inject else None}
    return document


def smoke_markdown(judged, comparable, source, mine, fail_above_pct, reference, inject, age_days):
    """against.md: the verdict, what was compared, the rule, a row per case, the whole GPU, the findings."""
    exit_code = compare_exit(judged, comparable)
    overall = ("NOT COMPARABLE" if exit_code == NOT_COMPARABLE_EXIT else
               f"REGRESSION ({len(judged['regressions'])})" if judged["regressions"] else "PASS")
    capture = reference["capture"]
    lines = ["# cclbench smoke against its reference", "", f"Verdict: **{overall}**", "",
             f"- reference: `{source}` ({capture['runs']} runs of {capture['repeats']} launch(es) a part, "
             f"{capture.get('first_utc')} to {capture.get('last_utc')}"
             + (f", {age_days:.1f} days old" if age_days is not None else "") + ")",
             f"- this run: `{mine}`", ""]
    if inject:
        lines += [f"TEST RUN: a slowdown of {inject[1]:g}% was injected into smoke.{inject[0]} (test knob); these "
                  "numbers are not the GPU's.", ""]
    said = comparable_text(comparable)
    if said:
        lines += [said, ""]
    lines += [f"Rule: {SMOKE_RULE}", ""]
    rows = []
    for case in judged["cases"]:
        shown = case["verdict"] + (" (REGRESSION)" if case["regression"] and case["timed"] and not case.get("unstable")
                                   else "")
        if case.get("unstable"):
            shown += "; UNSTABLE: " + unstable_text(case["unstable"])
        rows.append([case["point"], case["case_id"], case.get("estimator", "-"), fmt_number(case["time_a"]),
                     fmt_number(case["time_b"]), f"{case['diff']:+.2f}" if case["timed"] else "-",
                     f"{case['band']:.2f}" if case["timed"] else "-", f"{case['spread']:.2f}", shown])
    lines += [md_table(["point", "case", "estimator", "reference us", "run us", "diff %", "band %", "spread %",
                        "verdict"], rows), ""]
    for shift in judged["shifts"]:
        lines += [f"Whole GPU: {shift['sizes']} timed cases, weighted mean {shift['diff']:+.2f}% (band "
                  f"{shift['band']:.2f}%, {shift['agree']:.0%} of the cases that way): {shift['verdict']}"
                  + (" (REGRESSION)" if shift["regression"] else ""), ""]
    if judged["regressions"]:
        lines += ["## Findings", ""] + [f"- {smoke_regression_text(item)}" for item in judged["regressions"]] + [""]
    return "\n".join(lines)
