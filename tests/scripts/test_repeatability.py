"""The repeatability rule (scripts/cclbench_lib/rules/repeatability.py) against the measured H200 noise.

Data: tests/scripts/data/h200_repeat_noise.json, the per-case repeat times of ten default one-H200
baselines (main 855266e, --repeat 3, nothing changed between them; run 3 exited 1 on the old per-case gate,
reduce_scatter 1M). Derived from the run directories by tests/scripts/tools/extract_repeat_noise.py.

Noise model (H200Noise), fitted to those ten runs, sampled with a fixed seed:
  - no-op cases (median below NOOP_US: the in-place collectives at one rank, 0.064 us, timer-quantised):
    a measured run's triple of that case, repeats in random order;
  - timed cases: t_k = m_c x exp(d_k + s x e), with m_c the case's median over the ten runs; d_k a whole
    repeat's shift, shared by every case of it (process-level clock state; in the data it is the
    median over the timed cases of log(t / the case's median in its run), centred per run: sd 1.6%, up to
    2.3%), drawn from the 30 measured shifts, scaled by sqrt(3/2) to undo the centring; s the run's
    residual scale (median |residual| of one measured run, 0.25-1.07%: runs differ, exceedances cluster by
    run); e drawn from that case's own 30 residuals (log(t / run median) - d_k) over the ten runs, each divided
    by its run's scale.
Expected values come from the definitions (CV = stdev/mean, robust = 1.4826 MAD/median, a binomial tail
computed by hand here), not from the module's expressions.
"""
import json
import math
import os
import random
import statistics
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(HERE, "..", "..")), "scripts"))

from cclbench_lib.rules import repeatability as rule  # noqa: E402

DATA = os.path.join(HERE, "data", "h200_repeat_noise.json")
POINT = "local.gpu1"
GATE = 3.0
NOOP_US = 0.5
HEALTHY_RUNS = int(os.environ.get("CCLBENCH_REPEAT_RUNS", "5000"))  # 0 of 5,000: rate < 6e-4 (95%)
FAULT_RUNS = 500
PERMUTATIONS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


def load_runs():
    with open(DATA, encoding="utf-8") as handle:
        return json.load(handle)["runs"]


class H200Noise:
    """Synthetic one-H200 baseline points drawn from the ten measured runs (see the module docstring)."""

    def __init__(self, runs, seed):
        self.random = random.Random(seed)
        points = [run["points"][POINT] for run in runs]
        self.case_ids = sorted(points[0]["cases"])
        self.host_bound = {c: [p["cases"][c][1] for p in points] for c in self.case_ids}
        triples = {c: [p["cases"][c][0] for p in points] for c in self.case_ids}
        self.median = {c: statistics.median(statistics.median(t) for t in triples[c]) for c in self.case_ids}
        self.noop = [c for c in self.case_ids if self.median[c] < NOOP_US]
        self.timed = [c for c in self.case_ids if self.median[c] >= NOOP_US]
        self.noop_triples = {c: triples[c] for c in self.noop}
        run_shifts, logs = [], []
        for j in range(len(points)):
            run_logs = {c: [math.log(t) for t in triples[c][j]] for c in self.timed}
            centred = {c: [v - statistics.median(run_logs[c]) for v in run_logs[c]] for c in self.timed}
            shift = [statistics.median(centred[c][k] for c in self.timed) for k in range(3)]
            mean_shift = sum(shift) / 3
            run_shifts.append([d - mean_shift for d in shift])
            logs.append({c: [v - sum(vs) / 3 for v in vs] for c, vs in run_logs.items()})
        shifts = [d for shift in run_shifts for d in shift]
        # How far each case follows its repeat's shift (least squares over the ten runs): about 1 for the
        # host-bound cases of a few us, about 0 for the large GPU-bound ones (CV 0.2-0.5% at 32-64M).
        denominator = sum(d * d for d in shifts)
        self.coupling = {c: sum(logs[j][c][k] * run_shifts[j][k] for j in range(len(points)) for k in range(3))
                         / denominator for c in self.timed}
        scales, residuals = [], []
        for j in range(len(points)):
            # The case's own triple once its share of the repeats' shifts is taken out, centred on its median.
            own = {}
            for c in self.timed:
                corrected = [logs[j][c][k] - self.coupling[c] * run_shifts[j][k] for k in range(3)]
                middle = statistics.median(corrected)
                own[c] = [v - middle for v in corrected]
            scales.append(statistics.median(abs(v) for c in self.timed for v in own[c]))
            residuals.append(own)
        # The repeats' shifts look like process-level clock states: in 7 of the 10 runs two repeats sit
        # together and one 2.3-3.5% off, in 2 all three together, in 1 (run 2) three levels over 3.8%. Model:
        # each repeat independently in the low or high state (p 1/2), the gap between the states that of a
        # random split run (its largest minus smallest shift), plus a jitter of the measured within-state sd.
        self.gaps, pairs = [], []
        for shift in run_shifts:
            low, middle, high = sorted(shift)
            if high - low > 0.01:
                self.gaps.append(high - low)
                pairs.append(min(middle - low, high - middle))
        self.jitter = math.sqrt(sum(p * p for p in pairs) / (2 * len(pairs)))
        self.shifts = [d * math.sqrt(1.5) for d in shifts]  # for iid draws (independent_shifts)
        self.scales = scales
        # factors[J][c]: each measured run's triple of case c as multiplicative factors, rescaled to run J's
        # residual scale; a synthetic run takes J's scale and, per case, the triple of a random run.
        runs = range(len(points))
        self.factors = [{c: [[math.exp(v * scales[J] / scales[j]) for v in residuals[j][c]] for j in runs]
                         for c in self.timed} for J in runs]

    def point(self, independent_shifts=False):
        """{case_id: ([t1, t2, t3], host_bound)}. independent_shifts: each repeat's shift drawn on its own from
        the 30 measured ones (no states: wider spreads than the data show), for the sensitivity figure."""
        rnd = self.random
        j = rnd.randrange(len(self.scales))
        if independent_shifts:
            d0, d1, d2 = [rnd.choice(self.shifts) for _ in range(3)]
        else:
            gap = rnd.choice(self.gaps)
            d0, d1, d2 = [gap * rnd.randrange(2) + rnd.gauss(0.0, self.jitter) for _ in range(3)]
        exp = math.exp
        factors = self.factors[j]
        cases = {}
        for c in self.timed:
            m, g = self.median[c], self.coupling[c]
            f = rnd.choice(factors[c])
            a, b, e = PERMUTATIONS[rnd.randrange(6)]
            cases[c] = ([m * exp(g * d0) * f[a], m * exp(g * d1) * f[b], m * exp(g * d2) * f[e]],
                        self.host_bound[c][j])
        for c in self.noop:
            f = rnd.choice(self.noop_triples[c])
            a, b, e = PERMUTATIONS[rnd.randrange(6)]
            cases[c] = ([f[a], f[b], f[e]], self.host_bound[c][j])
        return cases


def scatter(cases, rnd, fraction):
    """Every repeat of every case times exp(N(0, fraction)): a point whose every case scatters."""
    return {c: ([t * math.exp(rnd.gauss(0.0, fraction)) for t in times], hb) for c, (times, hb) in cases.items()}


def slow_repeat(cases, index, factor):
    """One repeat `factor` slower at every size."""
    return {c: ([t * factor if k == index else t for k, t in enumerate(times)], hb) for c, (times, hb) in cases.items()}


def judge(cases):
    return rule.judge_point(cases, GATE, repeats=["rep1", "rep2", "rep3"])


class Definitions(unittest.TestCase):
    def test_case_statistics_by_definition(self):
        # times 10, 11, 13: mean 11.333, stdev sqrt(((-4/3)^2 + (-1/3)^2 + (5/3)^2) / 2) = sqrt(7/3),
        # CV = 13.48%; median 11, |deviations| 1, 0, 2 -> MAD 1, robust = 1.4826 / 11 = 13.478%.
        verdict = rule.judge_case([10.0, 11.0, 13.0], False, GATE)
        self.assertAlmostEqual(verdict["cv_pct"], math.sqrt(7 / 3) / (34 / 3) * 100, places=9)
        self.assertAlmostEqual(verdict["robust_pct"], 1.4826 / 11 * 100, places=9)
        self.assertTrue(verdict["above_gate"])
        self.assertEqual(verdict["code"], rule.CASE_ABOVE_GATE)
        # One repeat off: 10, 10, 11: CV 5.59% above the target, MAD 0: not above the gate.
        verdict = rule.judge_case([10.0, 10.0, 11.0], True, GATE)
        self.assertTrue(verdict["above_target"] and not verdict["above_gate"])
        self.assertEqual(verdict["code"], rule.HOST_BOUND_JITTER)
        self.assertEqual(rule.judge_case([10.0, 10.0, 11.0], False, GATE)["code"], rule.CASE_ABOVE_TARGET)
        self.assertIsNone(rule.judge_case([10.0, None], False, GATE))

    def test_binomial_limit_by_hand(self):
        # 112 cases at p = 0.005: P(X >= k) = 1 - sum_{j<k} C(112, j) p^j (1-p)^(112-j), summed here term by term.
        p, n = rule.CASE_GATE_RATE, 112
        pmf = [(1 - p) ** n]
        for j in range(1, 12):
            pmf.append(pmf[-1] * (n - j + 1) / j * p / (1 - p))
        tails = [1 - sum(pmf[:k]) for k in range(12)]
        expected = next(k for k in range(12) if tails[k] < rule.FALSE_ALARM)
        limit, tail = rule.cases_above_gate_limit(n)
        self.assertEqual(limit, expected)
        self.assertAlmostEqual(tail, tails[expected], delta=1e-9)

    def test_repeat_shift_by_definition(self):
        # Third repeat 10% slower at every size, the others equal: log(1.1) off the others' median on every case.
        cases = {f"c{i}": ([1.0 + i, 1.0 + i, (1.0 + i) * 1.1], False) for i in range(8)}
        verdict = judge(cases)
        third = verdict["shifts"][2]
        self.assertEqual(third["repeat"], "rep3")
        self.assertAlmostEqual(third["shift_pct"], 10.0, places=9)
        self.assertEqual(third["consistent_fraction"], 1.0)
        self.assertEqual(verdict["status"], "fail")
        self.assertEqual(verdict["code"], rule.REPEAT_SHIFT)
        # A 10% gate allows it: one repeat of three 10% off gives a CV of 0.1 / sqrt(3) / (1 + 0.1 / 3) = 5.6%
        # at every case, within the gate, and 10% is within sqrt(3) x 10%.
        loose = rule.judge_point(cases, 10.0)
        self.assertAlmostEqual(loose["cases"]["c0"]["cv_pct"], 0.1 / math.sqrt(3) / (1 + 0.1 / 3) * 100, places=9)
        self.assertEqual((loose["status"], loose["code"]), ("pass", None))


class MeasuredRuns(unittest.TestCase):
    def test_the_ten_h200_runs_pass_run_3_warns_on_reduce_scatter_1m(self):
        runs = load_runs()
        self.assertEqual(len(runs), 10)
        for run in runs:
            point = run["points"][POINT]
            verdict = rule.judge_point({c: (t, hb) for c, (t, hb) in point["cases"].items()}, GATE, point["repeats"])
            with self.subTest(run=run["name"]):
                self.assertEqual(verdict["judged_cases"], 112)
                self.assertNotEqual(verdict["status"], "fail", verdict["reasons"][:2])
                # The old per-case gate failed exactly the cases the rule now names as warnings above the gate.
                old = sorted(f["case_id"] for f in run["repeat_cv_failures"])
                named = [r for r in verdict["reasons"] if r["code"] == rule.CASE_ABOVE_GATE]
                self.assertEqual(named[0]["case_ids"] if named else [], old)
        third = runs[2]
        self.assertEqual(third["status"], "failed")
        self.assertEqual([f["case_id"] for f in third["repeat_cv_failures"]], ["reduce_scatter.float.sum.out.1M"])
        point = third["points"][POINT]
        verdict = rule.judge_point({c: (t, hb) for c, (t, hb) in point["cases"].items()}, GATE, point["repeats"])
        self.assertEqual((verdict["status"], verdict["code"]), ("warn", rule.CASE_ABOVE_GATE))
        self.assertEqual(verdict["reasons"][0]["case_ids"], ["reduce_scatter.float.sum.out.1M"])


class Synthetic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.noise = H200Noise(load_runs(), seed=27)

    def rate(self, runs, make):
        fails, codes = 0, {}
        for _ in range(runs):
            verdict = judge(make())
            if verdict["status"] == "fail":
                fails += 1
                codes[verdict["code"]] = codes.get(verdict["code"], 0) + 1
        return fails / runs, codes

    def test_healthy_runs_fail_at_most_1_in_1000(self):
        start = time.monotonic()
        rate, codes = self.rate(HEALTHY_RUNS, self.noise.point)
        print(f"\nhealthy synthetic H200 runs: {rate * HEALTHY_RUNS:.0f} of {HEALTHY_RUNS} fail "
              f"(rate {rate:.5f}) {codes} [{time.monotonic() - start:.1f} s]", file=sys.stderr)
        self.assertLessEqual(rate, 1e-3)

    def test_the_model_reproduces_the_measured_exceedances(self):
        # Measured over the 1120 cases of the ten runs: 16.4% above the 3% target, 0.09% above the gate.
        above_target = above_gate = total = 0
        for _ in range(400):
            for verdict in judge(self.noise.point())["cases"].values():
                total += 1
                above_target += verdict["above_target"]
                above_gate += verdict["above_gate"]
        print(f"\nmodel: {above_target / total:.4f} of cases above the target (measured 0.1643), "
              f"{above_gate / total:.5f} above the gate (measured 0.00089)", file=sys.stderr)
        self.assertLess(abs(above_target / total - 184 / 1120), 0.05)
        self.assertLess(above_gate / total, rule.CASE_GATE_RATE)

    def test_every_case_scattering_by_10_percent_fails(self):
        rnd = random.Random(10)
        rate, codes = self.rate(FAULT_RUNS, lambda: scatter(self.noise.point(), rnd, 0.10))
        five, _ = self.rate(FAULT_RUNS, lambda: scatter(self.noise.point(), rnd, 0.05))
        print(f"\nevery case scattering by 10%: {rate:.3f} of {FAULT_RUNS} points fail {codes}; by 5%: {five:.3f}",
              file=sys.stderr)
        self.assertGreaterEqual(rate, 0.99)
        self.assertIn(rule.SYSTEMATIC_SPREAD, codes)

    def test_third_repeat_10_percent_slower_fails(self):
        rate, codes = self.rate(FAULT_RUNS, lambda: slow_repeat(self.noise.point(), 2, 1.10))
        five, _ = self.rate(FAULT_RUNS, lambda: slow_repeat(self.noise.point(), 2, 1.05))
        print(f"\nthird repeat 10% slower: {rate:.3f} of {FAULT_RUNS} points fail {codes}; 5% slower: {five:.3f}",
              file=sys.stderr)
        self.assertGreaterEqual(rate, 0.99)
        self.assertEqual(max(codes, key=codes.get), rule.REPEAT_SHIFT)


if __name__ == "__main__":
    unittest.main()
