"""The verdict as data: the severities of the stable codes (rules/verdict.py), verdict.json and
compare.json against their schemas on synthetic runs and on real baselines with the doubles, the exit codes
(healthy 0, warnings only 0, fail 1), the report's first line, and the ten measured one-H200 runs
(tests/scripts/data/h200_repeat_noise.json) rebuilt as run directories: every one HEALTHY, its single cases notes
under Repeatability (run 3's reduce_scatter 1M among them), and FAILED with one wrong element in any of them.
Expected severities come from the issues' lists, not from the module's table."""
import json
import math
import os
import random
import unittest

import test_baseline
from case_records import case_record, write_run_dir
from helpers import TempDirTest, read_text, run_cli, validate

from cclbench_lib.model.run_dir import RunData
from cclbench_lib.render.report import build_report
from cclbench_lib.render.verdict import verdict_document
from cclbench_lib.rules import verdict as rules_verdict

HERE = os.path.dirname(os.path.abspath(__file__))
NOISE = os.path.join(HERE, "data", "h200_repeat_noise.json")
NO_PLOTS = {"CCLBENCH_NO_MATPLOTLIB": "1"}

# "Three severities with fixed meanings" (docs/verdicts.md), and "a healthy machine reads HEALTHY": a single case
# whose spread chance explains, host-bound jitter included, is a note; more of them than chance explains is a warning.
ISSUE_SEVERITIES = {
    "data.wrong": "fail", "case.failed": "fail", "transport.gate_missed": "fail", "doctor.fail": "fail",
    "rail.dead": "fail", "rail.unbalanced": "fail", "outlier.link": "fail", "outlier.gpu": "fail",
    "outlier.rank": "fail", "repeat.systematic_spread": "fail", "repeat.repeat_shift": "fail",
    "repeat.cases_above_gate": "fail",
    "repeat.many_cases_above_target": "warn", "repeat.many_cases_above_gate": "warn", "doctor.warn": "warn",
    "repeat.case_above_target": "note", "repeat.case_above_gate": "note", "repeat.host_bound_jitter": "note",
}


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class Severities(TempDirTest):
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

    def test_a_run_stopped_by_a_signal_is_incomplete_not_failed(self):
        """SIGINT or SIGTERM before the plan completed (rules/anomalies.interruption's finding): INCOMPLETE, its
        fails counted in the headline, exit 1 as FAILED; verdict.json valid against its schema."""
        points = [{"point": "p", "hosts": ["a"], "repeatability": None}]
        stopped = {"code": "run_interrupted", "signal": "SIGTERM", "stopped": ["p"], "names": ["q", "r"],
                   "launches_planned": 4, "launches_complete": 1, "launches_stopped": 1, "launches_not_run": 2}
        findings = [stopped, {"code": "wrong_data", "where": "p", "case_id": "c", "wrong": 1}]
        verdict = dict(rules_verdict.build_verdict("r", ["a"], points, findings, {("a", "data"): True}), cv_gate_pct=5.0)
        self.assertEqual((verdict["overall"], verdict["counts"]["fail"], rules_verdict.exit_code(verdict)),
                         ("INCOMPLETE", 2, 1))
        document = verdict_document(verdict, "2026-12-06T03:00:00Z")
        self.assertEqual((document["headline"], document["exit_code"]), ("INCOMPLETE (2)", 1))
        self.assertIn("not run: q, r", document["reasons"][0]["text"], "it names what it did not reach")
        path = os.path.join(self.tmp, "verdict.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        ok, errors = validate("verdict.schema.json", path)
        self.assertTrue(ok, errors)
        # The same fails without the signal: FAILED.
        failed = rules_verdict.build_verdict("r", ["a"], points, findings[1:], {})
        self.assertEqual(failed["overall"], "FAILED")


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
# 16 quiet cases, none host-bound, for the count of cases above the target.
QUIET16 = {f"{collective}.float.sum.out.{size}K": [100.0 + size, 100.5 + size, 99.8 + size]
           for collective in ("all_reduce", "all_gather") for size in (8, 16, 32, 64, 128, 256, 512, 1024)}


def binomial_tail(n, p, k):
    """P(X >= k), X ~ Binomial(n, p), from its terms."""
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k, n + 1))


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
        self.assertEqual((verdict["reasons"], verdict["notes"]), ([], []))
        # One case of four off by 15% in one repeat: CV 8.1%, its median stable. 1 of 4 cases at a healthy rate
        # of 0.02 a case: P(X >= 1) = 1 - 0.98^4 = 7.8%, chance explains it: a note, the run is HEALTHY.
        spread = dict(QUIET, **{"all_reduce.float.sum.out.8K": [100.0, 100.5, 115.0]})
        result, verdict, text = self.report(run_of(self.tmp, "N", spread))
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("HEALTHY", "HEALTHY", 0))
        self.assertEqual((text.splitlines()[0], verdict["reasons"], verdict["counts"]),
                         ("# HEALTHY", [], {"fail": 0, "warn": 0}))
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: HEALTHY; verdict: "))
        note = verdict["notes"][0]
        self.assertEqual((note["code"], note["severity"], note["check"], note["point"], note["subject"]),
                         ("repeat.case_above_target", "note", "repeatability", "local.gpus2",
                          "all_reduce.float.sum.out.8K"))
        self.assertAlmostEqual(note["numbers"]["worst_cv_pct"], 8.10, places=2)  # sd 8.52 around 105.17
        self.assertEqual((note["numbers"]["count"], note["numbers"]["cases"]), (1, 4))
        self.assertEqual(verdict["points"][0]["repeatability"]["status"], "pass")
        self.assertEqual(verdict["hosts"][0]["repeatability"], "pass")
        self.assertIn("- 1 note(s) under Repeatability", text.split("# cclbench report")[0])
        anomalies = text[text.index("## Anomalies"):text.index("## Doctor")]
        self.assertNotIn("repeat.", anomalies)
        self.assertNotIn("all_reduce.float.sum.out.8K", anomalies)
        repeat = text[text.index("## Repeatability"):]
        self.assertIn("- note: repeat.case_above_target (case above CV target, within chance) at local.gpus2: "
                      "all_reduce.float.sum.out.8K: CV 8.10%, robust dispersion 0.74% across repeats; 1 of 4 cases "
                      "not host-bound above the CV target; the healthy noise explains up to 2 (a rate of 0.02 a case; "
                      "3 or more happen with P < 0.001)", repeat)
        # 16 cases: P(X >= 4) = 2.4e-4 < 1e-3 <= P(X >= 3) = 3.7e-3 at 0.02 a case: 3 cases one repeat off are
        # notes, 4 a warning.
        self.assertLess(binomial_tail(16, 0.02, 4), 1e-3)
        self.assertGreater(binomial_tail(16, 0.02, 3), 1e-3)
        off = [f"all_reduce.float.sum.out.{size}K" for size in (8, 16, 32, 64)]
        three = dict(QUIET16, **{case_id: [100.0, 100.5, 115.0] for case_id in off[:3]})
        result, verdict, text = self.report(run_of(self.tmp, "N3", three))
        self.assertEqual((verdict["overall"], [(n["code"], n["numbers"]["count"]) for n in verdict["notes"]]),
                         ("HEALTHY", [("repeat.case_above_target", 3)]))
        four = dict(QUIET16, **{case_id: [100.0, 100.5, 115.0] for case_id in off})
        result, verdict, text = self.report(run_of(self.tmp, "W", four))
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("WARNINGS", "WARNINGS (1)", 0))
        self.assertEqual(text.splitlines()[0], "# WARNINGS (1)")
        reason = verdict["reasons"][0]
        self.assertEqual((reason["code"], reason["severity"], reason["point"], reason["numbers"]["count"],
                          reason["numbers"]["cases"], reason["numbers"]["limit"]),
                         ("repeat.many_cases_above_target", "warn", "local.gpus2", 4, 16, 4))
        self.assertEqual(verdict["notes"], [])
        self.assertIn("cclbench: WARNINGS (1): repeat.many_cases_above_target", result.stderr.strip().splitlines()[-1])
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
    def run_dir(self, run, name, wrong_at=None):
        """The measured run as a run directory; wrong_at: (case_id, repeat index) with one wrong element."""
        point = run["points"]["local.gpu1"]
        plan = [{"name": name, "kind": "local", "nranks": 1, "base_point": "local.gpu1", "argv": ["coll_perf"],
                 "hosts": ["vm"], "env": {}, "outputs": []} for name in point["repeats"]]
        records = []
        for case_id, (times, host_bound) in sorted(point["cases"].items()):
            for k, (repeat, time_us) in enumerate(zip(point["repeats"], times)):
                if time_us is not None:
                    records.append(case_record(repeat, case_id, 1024, {"mean": time_us, "p50": time_us, "cv_pct": 1.0},
                                               time_us, nranks=1, schema_version="1.1.0", iterations=20,
                                               batch_time_us=time_us * (2.0 if host_bound else 1.0),
                                               wrong=1 if wrong_at == (case_id, k) else 0))
        return write_run_dir(os.path.join(self.tmp, name), plan, records)

    def test_ten_healthy_runs_read_healthy_and_fail_on_wrong_data(self):
        with open(NOISE, encoding="utf-8") as handle:
            runs = json.load(handle)["runs"]
        self.assertEqual(len(runs), 10)
        rnd = random.Random(12)
        for run in runs:
            directory = self.run_dir(run, run["name"])
            if run["name"] == "h200_main_3":  # the command itself once; the others through the same function
                result = run_cli(["report", directory], env=NO_PLOTS)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stderr.strip().splitlines()[-1],
                                 f"cclbench: HEALTHY; verdict: {directory}/verdict.json")
                ok, errors = validate("verdict.schema.json", os.path.join(directory, "verdict.json"))
                self.assertTrue(ok, errors)
            else:
                build_report(directory, 3.0)
            verdict = load_json(os.path.join(directory, "verdict.json"))
            self.assertEqual((verdict["overall"], verdict["reasons"]), ("HEALTHY", []), run["name"])
            self.assertEqual(verdict["points"][0]["repeatability"]["judged_cases"], 112)
            self.assertTrue(verdict["notes"], "4-28 cases above the target in each run, named as notes")
            self.assertEqual({(n["severity"], n["check"]) for n in verdict["notes"]}, {("note", "repeatability")})
            text = read_text(os.path.join(directory, "report.md"))
            self.assertTrue(text.startswith("# HEALTHY\n"), text[:200])
            if run["name"] == "h200_main_3":
                first = verdict["notes"][0]
                self.assertEqual((first["code"], first["subject"]),
                                 ("repeat.case_above_gate", "reduce_scatter.float.sum.out.1M"))
                self.assertIn("- note: repeat.case_above_gate (case above CV gate, no stable median, within chance) "
                              "at local.gpu1: reduce_scatter.float.sum.out.1M: CV 6.45%, robust dispersion 9.52%",
                              text[text.index("## Repeatability"):])
            # One wrong element in a case and repeat drawn at random: FAILED, whatever the noise.
            case_id = rnd.choice(sorted(run["points"]["local.gpu1"]["cases"]))
            wrong = self.run_dir(run, run["name"] + "-wrong", (case_id, rnd.randrange(3)))
            verdict = rules_verdict.run_verdict(RunData(wrong), 3.0)
            self.assertEqual((verdict["overall"], [(r["code"], r["subject"]) for r in verdict["reasons"]]),
                             ("FAILED", [("data.wrong", case_id)]), run["name"])


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

    def test_host_bound_jitter_is_a_note_and_0(self):
        # Only all_reduce jitters (6 of the point's 24 cases), host-bound (batch 2x the GPU time): each is
        # host-bound jitter (CV 6.15%, robust 6.45% < 9%: a stable median), the point's median CV stays ~0.1%:
        # notes, and the run is HEALTHY.
        result, verdict = self.run_baseline("W", {"FAKE_COLL_JITTER": "1", "FAKE_COLL_JITTER_CASES": "all_reduce",
                                                  "FAKE_COLL_HOST_FACTOR": "2"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["reasons"]), ("HEALTHY", "HEALTHY", []))
        self.assertEqual([(n["code"], n["severity"], n["numbers"]["count"]) for n in verdict["notes"]],
                         [("repeat.host_bound_jitter", "note", 6)])
        self.assertTrue(result.stderr.strip().splitlines()[-1].startswith("cclbench: HEALTHY; verdict: "))

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
