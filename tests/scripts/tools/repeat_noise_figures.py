#!/usr/bin/env python3
"""The figures behind the repeatability rule's constants, from the committed extract of ten H200 baselines
(tests/scripts/data/h200_repeat_noise.json) and the noise model of test_repeatability.py:

    python3 tests/scripts/tools/repeat_noise_figures.py [SYNTHETIC_RUNS]   (default 20000; 0: measured only)

Measured: per time band the across-repeat CV and robust dispersion and the share of cases above the 3%
target and the gate; per run the counts and the repeats' shared shifts (how the exceedances cluster).
Synthetic: false-fail and HEALTHY rates of healthy runs (the states model, and independent repeat shifts as a
heavier alternative), detection of a 10% / 5% scatter at every case and of a third repeat 10% / 5% slower.
"""
import collections
import math
import os
import random
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import test_repeatability as model  # noqa: E402
from cclbench_lib.rules import repeatability as rule  # noqa: E402  (test_repeatability put scripts/ on the path)


def band(time_us):
    if time_us < model.NOOP_US:
        return "a: no-op <0.5us"
    return "b: 0.5-5us" if time_us < 5 else "c: 5-20us" if time_us < 20 else "d: >=20us"


def measured(runs):
    rows = collections.defaultdict(list)
    print("run  cases>target  >gate  median-CV%  repeat shifts (timed cases, %)")
    for run in runs:
        point = run["points"][model.POINT]
        verdict = rule.judge_point({c: (t, hb) for c, (t, hb) in point["cases"].items()}, model.GATE)
        for case_id, case in verdict["cases"].items():
            times, host_bound = point["cases"][case_id]
            rows[band(statistics.median(times))].append((case, host_bound))
        timed = [t for t, _ in point["cases"].values() if statistics.median(t) >= model.NOOP_US]
        shifts = [statistics.median(math.log(t[k] / statistics.median(t)) for t in timed) * 100 for k in range(3)]
        print(f"{run['name']:>12} {verdict['cases_above_target']:4d} {verdict['cases_above_gate']:6d} "
              f"{verdict['median_cv_pct']:8.2f}   " + " ".join(f"{s:+.2f}" for s in shifts))
    print("\nband              cases  host-bound  median-CV  p90-CV  max-CV  median-robust  P(>target)  P(>gate)")
    for name, items in sorted(rows.items()):
        cvs = sorted(c["cv_pct"] for c, _ in items)
        robust = statistics.median(c["robust_pct"] for c, _ in items)
        target = sum(c["above_target"] for c, _ in items) / len(items)
        gate = sum(c["above_gate"] for c, _ in items) / len(items)
        print(f"{name:<17} {len(items):5d} {sum(hb for _, hb in items):8d} {statistics.median(cvs):10.2f} "
              f"{cvs[int(0.9 * len(cvs))]:7.2f} {cvs[-1]:7.2f} {robust:11.2f} {target:11.4f} {gate:9.5f}")


def synthetic(runs, count):
    noise = model.H200Noise(runs, seed=2027)
    rnd = random.Random(5)
    print(f"\nmodel: state gaps {[round(g * 100, 2) for g in noise.gaps]} %, jitter {noise.jitter * 100:.2f} %, "
          f"run scales {[round(s * 100, 2) for s in noise.scales]} %")
    cases = [
        ("healthy (states model)", count, lambda: noise.point()),
        ("healthy, independent repeat shifts", count, lambda: noise.point(independent_shifts=True)),
        ("every case scatters 10%", 2000, lambda: model.scatter(noise.point(), rnd, 0.10)),
        ("every case scatters 5%", 2000, lambda: model.scatter(noise.point(), rnd, 0.05)),
        ("every case scatters 3%", 2000, lambda: model.scatter(noise.point(), rnd, 0.03)),
        ("third repeat 10% slower", 2000, lambda: model.slow_repeat(noise.point(), 2, 1.10)),
        ("third repeat 5% slower", 2000, lambda: model.slow_repeat(noise.point(), 2, 1.05)),
        ("first repeat 10% faster", 2000, lambda: model.slow_repeat(noise.point(), 0, 1 / 1.10)),
    ]
    for name, number, make in cases:
        codes, warnings = collections.Counter(), 0
        for _ in range(number):
            verdict = model.judge(make())
            if verdict["status"] == "fail":
                codes[verdict["code"]] += 1
            warnings += verdict["status"] == "warn"
        fails = sum(codes.values())
        print(f"{name:<36} {fails:6d} of {number:6d} fail ({fails / number:.5f}) {dict(codes)}; {warnings} warn, "
              f"{number - fails - warnings} HEALTHY")


def main(argv):
    runs = model.load_runs()
    measured(runs)
    count = int(argv[1]) if len(argv) > 1 else 20000
    if count:
        synthetic(runs, count)


if __name__ == "__main__":
    main(sys.argv)
