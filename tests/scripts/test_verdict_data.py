"""The verdict as data: the severities of the stable codes (rules/verdict.py), verdict.json and
compare.json against their schemas on synthetic runs and on real baselines with the doubles, the exit codes
(healthy 0, warnings only 0, fail 1), the report's first line, and the ten measured one-H200 runs
(tests/scripts/data/h200_repeat_noise.json) rebuilt as run directories: none FAILED, run 3 names reduce_scatter 1M.
Expected severities come from the issue's list, not from the module's table."""
import json
import math
import os
import unittest

import test_baseline
from case_records import case_record, write_run_dir
from helpers import TempDirTest, read_text, run_cli, validate

from cclbench_lib.rules import verdict as rules_verdict

HERE = os.path.dirname(os.path.abspath(__file__))
NOISE = os.path.join(HERE, "data", "h200_repeat_noise.json")
NO_PLOTS = {"CCLBENCH_NO_MATPLOTLIB": "1"}

# Three severities with fixed meanings (docs/verdicts.md).
ISSUE_SEVERITIES = {
    "data.wrong": "fail", "case.failed": "fail", "transport.gate_missed": "fail", "doctor.fail": "fail",
    "rail.dead": "fail", "rail.unbalanced": "fail", "outlier.link": "fail", "outlier.gpu": "fail",
    "outlier.rank": "fail", "repeat.systematic_spread": "fail", "repeat.repeat_shift": "fail",
    "repeat.cases_above_gate": "fail",
    "repeat.case_above_target": "warn", "repeat.case_above_gate": "warn", "repeat.host_bound_jitter": "warn",
    "doctor.warn": "warn",
}


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class Severities(unittest.TestCase):
    def test_the_issue_severities(self):
        for code, severity in ISSUE_SEVERITIES.items():
            self.assertEqual(rules_verdict.CODES[code][0], severity, code)

    def test_every_code_has_a_severity_a_check_and_a_place_to_look(self):
        for code, (severity, check, look) in rules_verdict.CODES.items():
            self.assertIn(severity, ("fail", "warn", "note"), code)
            self.assertIn(check, rules_verdict.CHECKS, code)
            self.assertTrue(look, code)
        for finding_code, code in rules_verdict.FINDING_CODES.items():
            self.assertIn(code, rules_verdict.CODES, finding_code)
        for kind, code in rules_verdict.OUTLIER_CODES.items():
            self.assertEqual(rules_verdict.CODES[code][0], "fail", kind)

    def test_findings_are_classified(self):
        classify = rules_verdict.classify
        self.assertEqual(classify({"code": "wrong_data"}), ("data.wrong", "fail", "data"))
        self.assertEqual(classify({"code": "transport_exit"}), ("transport.gate_missed", "fail", "transport"))
        self.assertEqual(classify({"code": "rail_imbalance", "shares": [("mlx5_0:1", 1.0), ("mlx5_3:1", 0.0)]}),
                         ("rail.dead", "fail", "rails"), "a rail that carried nothing is dead, not unbalanced")
        self.assertEqual(classify({"code": "rail_imbalance", "shares": [("mlx5_0:1", 0.9), ("mlx5_3:1", 0.1)]})[0],
                         "rail.unbalanced")
        self.assertEqual(classify({"code": "outlier", "kind": "straggler rank"})[:2], ("outlier.rank", "fail"))
        self.assertEqual(classify({"code": "cases_skipped"})[1], "note", "not measured by design: counted nowhere")
        # Another rule's finding slots in with its own code and severity; without a severity it never passes.
        self.assertEqual(classify({"code": "env.differs", "severity": "warn", "check": "doctor"}),
                         ("env.differs", "warn", "doctor"))
        self.assertEqual(classify({"code": "env.differs"}), ("env.differs", "fail", "data"))

    def test_overall_and_per_host(self):
        points = [{"point": "p", "hosts": ["a"], "repeatability": None}]
        healthy = rules_verdict.build_verdict("r", ["a", "b"], points, [], {("a", "data"): True})
        self.assertEqual((healthy["overall"], healthy["counts"]), ("HEALTHY", {"fail": 0, "warn": 0}))
        self.assertEqual(healthy["hosts"][0]["data"], "pass")
        self.assertEqual(healthy["hosts"][1]["data"], "skip", "nothing measured on b")
        findings = [{"code": "doctor.warn", "host": "b", "check": "gpu_state", "subject": "GPU0"},
                    {"code": "wrong_data", "where": "p.rep2", "case_id": "c", "wrong": 3}]
        failed = rules_verdict.build_verdict("r", ["a", "b"], points, findings, {})
        self.assertEqual((failed["overall"], failed["counts"]), ("FAILED", {"fail": 1, "warn": 1}))
        self.assertEqual([r["code"] for r in failed["reasons"]], ["data.wrong", "doctor.warn"], "fails first")
        first = failed["reasons"][0]
        self.assertEqual((first["point"], first["host"], first["subject"], first["numbers"]), ("p", "a", "c", {"wrong": 3}))
        self.assertEqual([(row["host"], row["doctor"], row["data"]) for row in failed["hosts"]],
                         [("a", "skip", "fail"), ("b", "warn", "skip")])
        self.assertEqual(rules_verdict.exit_code(failed), 1)
        # The doctor's cross-host comparison (host '*') concerns the run as a whole: every host's row.
        versions = rules_verdict.build_verdict("r", ["a", "b"], points, [
            {"code": "doctor.fail", "host": "*", "check": "versions", "subject": "nccl"}], {})
        self.assertEqual([row["doctor"] for row in versions["hosts"]], ["fail", "fail"])
        warned = rules_verdict.build_verdict("r", ["a", "b"], points, findings[:1], {})
        self.assertEqual((warned["overall"], rules_verdict.exit_code(warned)), ("WARNINGS", 0))


def timed_record(point, case_id, gated, host_bound=False, wrong=0):
    stats = {"mean": gated, "min": gated, "p50": gated, "p95": gated, "p99": gated, "max": gated, "cv_pct": 0.5}
    return case_record(point, case_id, int(case_id.rsplit(".", 1)[1].rstrip("KM")) << 10, stats, gated, wrong=wrong,
                       schema_version="1.1.0", iterations=20, batch_time_us=gated * (2.0 if host_bound else 1.0))


def run_of(tmp, name, times_by_case, host_bound=None, wrong=None):
    """A finished run directory: one local point of three repeats, times_by_case {case_id: [t1, t2, t3]}."""
    host_bound, wrong = host_bound or {}, wrong or {}
    repeats = len(next(iter(times_by_case.values())))
    plan = [{"name": f"local.gpus2.rep{k}", "kind": "local", "nranks": 2, "base_point": "local.gpus2", "repeat": k,
             "argv": ["coll_perf"], "hosts": ["h"], "env": {}, "outputs": []} for k in range(1, repeats + 1)]
    records = [timed_record(f"local.gpus2.rep{k + 1}", case_id, times[k], host_bound.get(case_id, False),
                            wrong.get((case_id, k), 0))
               for case_id, times in sorted(times_by_case.items()) for k in range(repeats) if times[k] is not None]
    return write_run_dir(os.path.join(tmp, name), plan, records)


QUIET = {f"all_reduce.float.sum.out.{size}K": [100.0 + size, 100.5 + size, 99.8 + size] for size in (8, 16, 32, 64)}


class VerdictFiles(TempDirTest):
    def report(self, run):
        result = run_cli(["report", run], env=NO_PLOTS)
        self.assertEqual(result.returncode, 0, result.stderr)
        ok, errors = validate("verdict.schema.json", os.path.join(run, "verdict.json"))
        self.assertTrue(ok, errors)
        return result, load_json(os.path.join(run, "verdict.json")), read_text(os.path.join(run, "report.md"))

    def test_healthy_warnings_failed_runs(self):
        result, verdict, text = self.report(run_of(self.tmp, "H", QUIET))
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("HEALTHY", "HEALTHY", 0))
        self.assertEqual(text.splitlines()[0], "# HEALTHY")
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: HEALTHY; verdict: "))
        self.assertEqual(verdict["hosts"], [{"host": "h", "doctor": "skip", "transport": "skip", "rails": "skip",
                                             "outliers": "skip", "data": "pass", "repeatability": "pass"}])
        # One case of four off by 15% in one repeat: CV 8.1%, a warning; the point is reproducible.
        spread = dict(QUIET, **{"all_reduce.float.sum.out.8K": [100.0, 100.5, 115.0]})
        result, verdict, text = self.report(run_of(self.tmp, "W", spread))
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("WARNINGS", "WARNINGS (1)", 0))
        self.assertEqual(text.splitlines()[0], "# WARNINGS (1)")
        reason = verdict["reasons"][0]
        self.assertEqual((reason["code"], reason["severity"], reason["point"], reason["subject"]),
                         ("repeat.case_above_target", "warn", "local.gpus2", "all_reduce.float.sum.out.8K"))
        self.assertAlmostEqual(reason["numbers"]["worst_cv_pct"], 8.10, places=2)  # sd 8.52 around 105.17
        self.assertIn("cclbench: WARNINGS (1): repeat.case_above_target", result.stderr.strip().splitlines()[-1])
        self.assertEqual(verdict["points"][0]["repeatability"]["status"], "warn")
        # Wrong data in one repeat: a fail.
        result, verdict, text = self.report(run_of(self.tmp, "F", QUIET, wrong={("all_reduce.float.sum.out.16K", 1): 7}))
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("FAILED", "FAILED (1)", 1))
        self.assertEqual(text.splitlines()[0], "# FAILED (1)")
        self.assertEqual([(r["code"], r["subject"], r["numbers"]) for r in verdict["reasons"]],
                         [("data.wrong", "all_reduce.float.sum.out.16K", {"wrong": 7})])
        self.assertIn("cases.jsonl", verdict["reasons"][0]["look"])

    def test_compare_json(self):
        run_a = run_of(self.tmp, "A", QUIET)
        slower = {case_id: [t * 1.3 for t in times] for case_id, times in QUIET.items()}
        run_b = run_of(self.tmp, "B", slower)
        same = run_cli(["compare", run_a, run_a, "--out", os.path.join(self.tmp, "aa.md")])
        self.assertEqual(same.returncode, 0, same.stderr)
        path = os.path.join(self.tmp, "aa.json")
        ok, errors = validate("compare.schema.json", path)
        self.assertTrue(ok, errors)
        document = load_json(path)
        self.assertEqual((document["overall"], document["exit_code"]), ("same", 0))
        self.assertEqual({c["code"] for c in document["cases"]}, {"compare.same"})
        self.assertEqual([(b["band"], b["verdict"], b["cases"]) for b in document["bands"]], [("medium", "same", 1),
                                                                                               ("small", "same", 3)])
        regressed = run_cli(["compare", run_a, run_b])
        self.assertEqual(regressed.returncode, 1, regressed.stderr)
        document = load_json(os.path.join(run_b, "compare.json"))
        ok, errors = validate("compare.schema.json", os.path.join(run_b, "compare.json"))
        self.assertTrue(ok, errors)
        self.assertEqual((document["overall"], document["exit_code"]), ("regression", 1))
        self.assertEqual({c["code"] for c in document["cases"]}, {"compare.regression"})
        self.assertTrue(all(abs(c["diff_pct"] - 30.0) < 1e-6 for c in document["cases"]))
        self.assertIn("Verdict: **REGRESSION**", regressed.stdout)
        explicit = os.path.join(self.tmp, "x", "c.json")
        os.makedirs(os.path.dirname(explicit))
        self.assertEqual(run_cli(["compare", run_a, run_b, "--json", explicit]).returncode, 1)
        self.assertEqual(load_json(explicit)["overall"], "regression")


class MeasuredH200Runs(TempDirTest):
    def test_ten_healthy_runs_never_fail(self):
        with open(NOISE, encoding="utf-8") as handle:
            runs = json.load(handle)["runs"]
        self.assertEqual(len(runs), 10)
        for run in runs:
            point = run["points"]["local.gpu1"]
            plan = [{"name": name, "kind": "local", "nranks": 1, "base_point": "local.gpu1", "argv": ["coll_perf"],
                     "hosts": ["vm"], "env": {}, "outputs": []} for name in point["repeats"]]
            records = []
            for case_id, (times, host_bound) in sorted(point["cases"].items()):
                for name, time_us in zip(point["repeats"], times):
                    if time_us is not None:
                        records.append(case_record(name, case_id, 1024, {"mean": time_us, "p50": time_us, "cv_pct": 1.0},
                                                   time_us, nranks=1, schema_version="1.1.0", iterations=20,
                                                   batch_time_us=time_us * (2.0 if host_bound else 1.0)))
            directory = write_run_dir(os.path.join(self.tmp, run["name"]), plan, records)
            result = run_cli(["report", directory], env=NO_PLOTS)
            self.assertEqual(result.returncode, 0, result.stderr)
            verdict = load_json(os.path.join(directory, "verdict.json"))
            self.assertNotEqual(verdict["overall"], "FAILED", (run["name"], verdict["reasons"]))
            self.assertEqual(verdict["points"][0]["repeatability"]["judged_cases"], 112)
            if run["name"] == "h200_main_3":
                first = verdict["reasons"][0]
                self.assertEqual((first["code"], first["subject"]),
                                 ("repeat.case_above_gate", "reduce_scatter.float.sum.out.1M"))
                self.assertTrue(read_text(os.path.join(directory, "report.md")).startswith("# WARNINGS ("))


class ExitCodes(test_baseline.BaselineRuns):
    """Real baselines with the doubles: two GPUs, --repeat 2, repeats 10% x N slower (FAKE_COLL_JITTER)."""

    def run_baseline(self, run_id, env):
        result = self.baseline(run_id, "--repeat", "2", env=dict(env, CCLBENCH_FAKE_GPU_COUNT="2"))
        directory = os.path.join(self.results, run_id)
        for schema, name in (("verdict.schema.json", "verdict.json"), ("run_manifest.schema.json", "run_manifest.json")):
            ok, errors = validate(schema, os.path.join(directory, name))
            self.assertTrue(ok, errors)
        self.assertTrue(read_text(os.path.join(directory, "report.md")).startswith("# "))
        return result, load_json(os.path.join(directory, "verdict.json"))

    def test_healthy_is_0(self):
        result, verdict = self.run_baseline("OK", {})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(verdict["overall"], "HEALTHY", verdict["reasons"])
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: HEALTHY"))

    def test_warnings_only_is_0(self):
        # Only all_reduce jitters (6 of the point's 24 cases), host-bound (batch 2x the GPU time): each is
        # host-bound jitter (CV 6.15%, robust 6.45% < 9%), the point's median CV stays ~0.1%: warnings only.
        result, verdict = self.run_baseline("W", {"FAKE_COLL_JITTER": "1", "FAKE_COLL_JITTER_CASES": "all_reduce",
                                                  "FAKE_COLL_HOST_FACTOR": "2"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((verdict["overall"], verdict["headline"]), ("WARNINGS", "WARNINGS (1)"))
        self.assertEqual(verdict["reasons"][0]["numbers"]["count"], 6)
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: WARNINGS (1): "
                                                                         "repeat.host_bound_jitter"))

    def test_more_unstable_cases_than_chance_is_1(self):
        # Not host-bound: the 6 all_reduce cases have no stable median (robust 6.45% > 3%). At a rate of 0.005
        # per case, P(X >= 4 of 24) = 6.5e-6 < 1e-4 (P(X >= 3) = 2.4e-4 is not): 4 or more fail the point.
        tail = lambda k: sum(math.comb(24, j) * 0.005 ** j * 0.995 ** (24 - j) for j in range(k, 25))
        self.assertLess(tail(4), 1e-4)
        self.assertGreater(tail(3), 1e-4)
        result, verdict = self.run_baseline("F", {"FAKE_COLL_JITTER": "1", "FAKE_COLL_JITTER_CASES": "all_reduce"})
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(verdict["overall"], "FAILED")
        fail = [r for r in verdict["reasons"] if r["severity"] == "fail"]
        self.assertEqual([(r["code"], r["numbers"]["count"], r["numbers"]["limit"]) for r in fail],
                         [("repeat.cases_above_gate", 6, 4)])
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: error: FAILED (1): "
                                                                         "repeat.cases_above_gate"))


if __name__ == "__main__":
    unittest.main()
