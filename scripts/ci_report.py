#!/usr/bin/env python3
"""CI's time against its budget: each stage's seconds, the whole run against the budget, and the slowest tests
of every CTest run, read from the JUnit files CTest wrote (ctest --output-junit).

    ci_report.py --stages STAGES.tsv [--junit FILE]... [--budget-s 1800] [--top 20]

STAGES.tsv: one line per stage, `name<TAB>seconds<TAB>exit status[<TAB>beside STAGE]`, in the order the stages ran;
a stage with the fourth field ran beside another (.ci/run: the sanitizer build and the fuzzers beside the tests): it
is shown with it and left out of the total, which is then the run's wall time. A JUnit file's
name (without .xml) says which stage's tests it holds. Prints the report on stdout; exit 0 when every stage
passed and the run fit its budget, 1 when a stage failed, 3 when the stages passed but the run went over the
budget (the landing's own CI limit is 90 minutes; the budget is the target that keeps it far from it).
"""
import argparse
import os
import sys
import xml.etree.ElementTree as ElementTree

OVER_BUDGET = 3


def read_stages(path):
    """[(name, seconds, status, beside)] of a stages file (beside: the fourth field, "beside STAGE", or None); a line
    that does not parse is an error naming it."""
    stages = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            try:
                name, seconds, status = fields[0], float(fields[1]), int(fields[2])
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{number}: expected name<TAB>seconds<TAB>status, got {line.strip()!r}")
            beside = fields[3] if len(fields) > 3 else None
            if len(fields) > 4 or (beside is not None and not beside.startswith("beside ")):
                raise ValueError(f"{path}:{number}: a fourth field must read 'beside STAGE', got {line.strip()!r}")
            stages.append((name, seconds, status, beside))
    return stages


def read_junit(path):
    """[(seconds, test name, status)] of one CTest JUnit file; status is CTest's (run, fail, notrun, disabled),
    "skipped" for a test that skipped itself (CTest: notrun with a <skipped> element)."""
    tests = []
    root = ElementTree.parse(path).getroot()
    for case in root.iter("testcase"):
        status = case.get("status") or "run"
        if case.find("skipped") is not None:
            status = "skipped"
        tests.append((float(case.get("time") or 0.0), case.get("name") or "?", status))
    return tests


def render(stages, tests_by_stage, budget_s, top):
    total = sum(seconds for _, seconds, _, beside in stages if beside is None)
    lines = [f"ci: time against the budget of {budget_s:.0f} s ({budget_s / 60:.0f} min):"]
    for name, seconds, status, beside in stages:
        failed = "" if status == 0 else f"  FAILED (exit {status})"
        if beside is not None:
            lines.append(f"  ({name}, {beside}: {seconds:.0f} s, not in the total){failed}")
            continue
        share = 100.0 * seconds / budget_s if budget_s else 0.0
        lines.append(f"  {name:<24} {seconds:7.0f} s  {share:5.1f}% of the budget{failed}")
    verdict = "within" if total <= budget_s else "OVER"
    lines.append(f"  {'total':<24} {total:7.0f} s  {verdict} the budget ({total / 60:.1f} of {budget_s / 60:.0f} min)")
    every = [(seconds, name, stage, status) for stage, tests in tests_by_stage.items()
             for seconds, name, status in tests]
    every.sort(key=lambda row: (-row[0], row[2], row[1]))
    if every:
        lines.append(f"ci: the {min(top, len(every))} slowest of {len(every)} tests:")
        for seconds, name, stage, status in every[:top]:
            lines.append(f"  {seconds:8.1f} s  {name}  [{stage}]" + ("" if status in ("run", "passed") else f"  {status}"))
    return "\n".join(lines) + "\n", total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", required=True)
    parser.add_argument("--junit", action="append", default=[])
    parser.add_argument("--budget-s", type=float, default=1800.0)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        stages = read_stages(args.stages)
        tests_by_stage = {}
        for path in args.junit:
            if os.path.exists(path):
                stage = os.path.splitext(os.path.basename(path))[0]
                tests_by_stage.setdefault(stage, []).extend(read_junit(path))
    except (OSError, ValueError, ElementTree.ParseError) as error:
        print(f"ci_report: error: {error}", file=sys.stderr)
        return 2
    text, total = render(stages, tests_by_stage, args.budget_s, args.top)
    sys.stdout.write(text)
    if any(status != 0 for _, _, status, _ in stages):
        return 1
    return OVER_BUDGET if total > args.budget_s else 0


if __name__ == "__main__":
    sys.exit(main())
