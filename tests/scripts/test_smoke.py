"""`smoke`: JUnit XML, GPU parts skipped without a GPU, failure on wrong data, the time limit; `smoke --against` a
reference (issue 37): a pass against a fresh baseline, an injected slowdown named with both values and the band,
nothing comparable (exit 3), a reference of other hardware (refused, or compared with a warning), a reference with a
bad schema (refused before anything is measured), and the GPU hidden (every GPU part fails with the reason).
The test doubles (fake_bin) stand for the tools: FAKE_COLL_TIME_SCALE / FAKE_P2P_TIME_SCALE slow them by a known
factor, the independent source of the expected changes."""
import datetime
import json
import os
import unittest
import xml.etree.ElementTree as ElementTree

from helpers import TempDirTest, run_cli, validate

# One launch of each timed part a run (plan/smoke_cases.py SMOKE_REPEATS): the samples are inside the launch.
GPU_SMOKE_PARTS = (["topology"] + [f"smoke.{name}.rep1" for name in ("copy", "collective", "graph")]
                   + ["local.share-gpu4"])
# The smoke's cases on the doubles (plan/smoke_cases.py): AllReduce 16M, 32M, 64M and 8K in a graph; the copies of
# fake_bin/p2p_matrix's FAKE_GPUS GPUs (1 here): by copy engine and SM, host to device and device to host.
SMOKE_CASES = sorted([("smoke.collective", f"all_reduce.float.sum.out.{size}") for size in ("16M", "32M", "64M")]
                     + [("smoke.graph", "all_reduce.float.sum.out.8K")]
                     + [("smoke.copy", case) for case in ("device_local_copy_ce.gpu0-gpu0", "device_local_copy_sm.gpu0-gpu0",
                                                          "h2d_ce_local_numa.host-gpu0", "d2h_ce_local_numa.gpu0-host")])
ONE_FAKE_GPU = {"CCLBENCH_FAKE_GPU_COUNT": "1", "FAKE_GPUS": "1"}


class Smoke(TempDirTest):
    def smoke(self, run_id, *extra, env=None):
        # A generous budget (the default is 60 s): on a loaded shared CI machine the doubles alone can take
        # longer, and only test_time_limit is about the budget (its own --time-limit comes later and wins).
        return run_cli(["smoke", "--time-limit", "600"] + self.fake_args(run_id) + list(extra), env=env, timeout=900)

    def junit(self, path):
        suite = ElementTree.parse(path).getroot().find("testsuite")
        return suite, {case.get("name"): case for case in suite.findall("testcase")}

    def test_without_gpu_runs_mpi_backend_and_skips_gpu_parts(self):
        result = self.smoke("S0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("no GPU visible", result.stderr)
        run = os.path.join(self.results, "S0")
        suite, cases = self.junit(os.path.join(run, "smoke.junit.xml"))
        self.assertEqual(suite.get("failures"), "0")
        self.assertEqual(suite.get("skipped"), "4")
        for name in ("smoke.copy", "smoke.collective", "smoke.graph", "local.share-gpu4"):
            self.assertIn("no GPU visible", cases[name].find("skipped").get("message"), name)
        for name in ("topology", "collectives_1rank_mpi", "collectives_4rank_mpi"):
            self.assertIsNone(cases[name].find("skipped"), name)
            self.assertIsNone(cases[name].find("failure"), name)
        ok, errors = validate("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
        self.assertTrue(ok, errors)

    def test_with_gpu_runs_p2p_and_emulated_ranks(self):
        junit = os.path.join(self.tmp, "ci", "smoke.xml")
        result = self.smoke("S1", "--junit", junit, env={"CCLBENCH_FAKE_GPU_COUNT": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        suite, cases = self.junit(junit)
        # The launches, the verdict's points (their repeats judged together) and its judged checks (verdict.json).
        self.assertEqual((suite.get("failures"), suite.get("skipped")), ("0", "0"))
        self.assertEqual(sorted(cases), sorted(GPU_SMOKE_PARTS + ["smoke.collective", "smoke.graph", "check.data",
                                                                  "check.outliers"]))
        ok, errors = validate("verdict.schema.json", os.path.join(self.results, "S1", "verdict.json"))
        self.assertTrue(ok, errors)
        with open(os.path.join(self.results, "S1", "run.log")) as handle:
            log = handle.read()
        self.assertIn("--share-gpu", log)
        # Every coll_perf launch of a GPU smoke is told its backend: none may fall back to host memory.
        launches = [line for line in log.splitlines() if line.startswith("$ ") and "/coll_perf " in line]
        self.assertEqual(len(launches), 3)
        self.assertTrue(all(" --backend nccl " in line for line in launches), launches)
        reference = os.path.join(self.results, "S1", "smoke_reference.json")
        ok, errors = validate("smoke_reference.schema.json", reference)
        self.assertTrue(ok, errors)

    def test_wrong_data_fails(self):
        result = self.smoke("SW", env={"FAKE_COLL_WRONG": "1"})
        self.assertRunError(result, 1, "smoke failed")
        _suite, cases = self.junit(os.path.join(self.results, "SW", "smoke.junit.xml"))
        failure = cases["collectives_1rank_mpi"].find("failure")
        self.assertIn("wrong element", failure.get("message"))
        self.assertIn("data.wrong", failure.get("message"), "the failure carries the verdict's code")
        self.assertIn("data.wrong", cases["check.data"].find("failure").get("message"))
        self.assertIsNone(cases["topology"].find("failure"))

    def test_time_limit(self):
        result = self.smoke("ST", "--time-limit", "3", env={"FAKE_COLL_HANG_POINT": "collectives_1rank_mpi"})
        self.assertRunError(result, 1, "smoke failed")
        _suite, cases = self.junit(os.path.join(self.results, "ST", "smoke.junit.xml"))
        self.assertIsNotNone(cases["collectives_1rank_mpi"].find("failure"))


class Against(TempDirTest):
    """smoke --against REFERENCE, and compare of a smoke with a baseline, on the test doubles."""

    def baseline(self, run_id, env):
        result = run_cli(["baseline"] + self.fake_args(run_id), env=env, timeout=900)
        self.assertEqual(result.returncode, 0, result.stderr)
        return os.path.join(self.results, run_id)

    def smoke(self, run_id, *extra, env=None):
        return run_cli(["smoke", "--time-limit", "600"] + self.fake_args(run_id) + list(extra), env=env, timeout=900)

    def capture(self, run_id, env, *extra):
        """A measured reference of the doubles: smoke --capture 5 (the fewest it takes)."""
        result = self.smoke(run_id, "--capture", "5", *extra, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return os.path.join(self.results, run_id, "smoke_reference.json")

    def test_a_capture_spread_over_time_starts_its_runs_that_far_apart(self):
        # --capture-every 2.5: run k starts 2.5 (k - 1) s after the first; each double's run takes ~0.3 s, so back to
        # back all five would start within about 1.5 s. The start times are the runs' own manifests' (whole seconds),
        # stamped after each run's own start-up: on a loaded 2-core box the first run's came late enough that 1.2 s
        # apart read [0, 2, 1, 1] (fresh-clone CI, 2026-12-06). 2.5 s keeps every gap over a second with up to 1.5 s
        # of such lateness.
        reference = self.load(self.capture("SPREAD", ONE_FAKE_GPU, "--capture-every", "2.5"))
        self.assertEqual((reference["capture"]["runs"], reference["capture"]["every_s"]), (5, 2.5))
        starts = []
        for number in range(1, 6):
            manifest = self.load(self.results, "SPREAD", "capture", f"run{number:02d}", "run_manifest.json")
            stamp = manifest["invocations"][0]["started_utc"]
            starts.append(datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").timestamp())
        gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
        self.assertTrue(all(gap >= 1 for gap in gaps), gaps)
        self.assertGreaterEqual(starts[-1] - starts[0], 8, starts)
        self.assertOneLineError(self.smoke("NOCAP", "--capture-every", "5", env=ONE_FAKE_GPU), 2,
                                "--capture-every spaces the runs of --capture N")

    def junit(self, run_id):
        suite = ElementTree.parse(os.path.join(self.results, run_id, "smoke.junit.xml")).getroot().find("testsuite")
        return {case.get("name"): case for case in suite.findall("testcase")}

    def load(self, *parts):
        with open(os.path.join(*parts), encoding="utf-8") as handle:
            return json.load(handle)

    def test_a_fresh_baseline_passes_and_a_slowed_gpu_is_named(self):
        base = self.baseline("B", ONE_FAKE_GPU)
        reference = os.path.join(base, "smoke_reference.json")
        ok, errors = validate("smoke_reference.schema.json", reference)
        self.assertTrue(ok, errors)
        document = self.load(reference)
        # The baseline recorded the smoke's cases under the smoke's ids, one launch each: a run's own reference,
        # which compare reads and smoke --against refuses (one run shows no run-to-run spread).
        self.assertEqual(sorted((c["point"], c["case_id"]) for c in document["cases"]), SMOKE_CASES)
        self.assertEqual({len(c["repeats"]) for c in document["cases"]}, {1})
        self.assertEqual((document["identity"]["gpu_model"], document["identity"]["gpu_count"],
                          document["identity"]["nccl"]), ("Fake GPU", 1, "2.28.9"))
        self.assertOneLineError(self.smoke("S1", "--against", base, env=ONE_FAKE_GPU), 2, "it holds one run")

        reference = self.capture("REF", ONE_FAKE_GPU)
        same = self.smoke("S", "--against", reference, env=ONE_FAKE_GPU)
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertIn(f"against {reference}: {len(SMOKE_CASES)} case(s), no regression", same.stderr)
        cases = self.junit("S")
        judged = sorted(name for name in cases if name.startswith("against:"))
        # One JUnit case per case, and one for the whole GPU (the shift of every timed case together).
        self.assertEqual(judged, sorted([f"against:{point}/{case}" for point, case in SMOKE_CASES] + ["against:gpu"]))
        self.assertTrue(all(cases[name].find("failure") is None for name in judged + ["against"]))
        compared = os.path.join(self.results, "S", "compare.json")
        ok, errors = validate("compare.schema.json", compared)
        self.assertTrue(ok, errors)
        self.assertEqual((self.load(compared)["exit_code"], self.load(compared)["comparable"]["matched"]),
                         (0, len(SMOKE_CASES)))

        # compare of the two run directories agrees (the issue's `compare base sm`, NOT COMPARABLE with exit 0 before).
        both = run_cli(["compare", base, os.path.join(self.results, "S")])
        self.assertEqual(both.returncode, 0, both.stderr)
        self.assertIn(f"{len(SMOKE_CASES)} same within noise", both.stdout)

        # The GPU 30% slower for collectives, copies 25% slower: every case is a regression, named with both values.
        slowed = self.smoke("SLOW", "--against", reference,
                            env=dict(ONE_FAKE_GPU, FAKE_COLL_TIME_SCALE="1.3", FAKE_P2P_TIME_SCALE="1.25"))
        self.assertRunError(slowed, 1, "finding(s) beyond the reference's measured noise")
        cases = self.junit("SLOW")
        for point, case in SMOKE_CASES:
            failure = cases[f"against:{point}/{case}"].find("failure")
            self.assertIsNotNone(failure, case)
            diff, a_us, b_us, band = self.regression_numbers(failure.get("message"), f"{point} {case}: ")
            expected = 30.0 if point != "smoke.copy" else 25.0
            self.assertAlmostEqual(diff, expected, delta=0.05, msg=failure.get("message"))
            self.assertAlmostEqual(b_us / a_us, 1 + expected / 100, delta=0.002, msg=failure.get("message"))
            self.assertLess(band, expected)
        self.assertEqual(self.load(self.results, "SLOW", "compare.json")["exit_code"], 1)

    def regression_numbers(self, message, prefix):
        """(diff %, A us, B us, band %) of a regression line: 'POINT CASE: +30.0% (A 1,689 us, B 2,196 us; band 5.7%)'."""
        self.assertTrue(message.startswith(prefix), message)
        diff, rest = message[len(prefix):].split("% (A ", 1)
        a_us, rest = rest.split(" us, B ", 1)
        b_us, band = rest.split(" us; band ", 1)
        return float(diff), float(a_us.replace(",", "")), float(b_us.replace(",", "")), float(band.rstrip("%)"))

    def test_gpu_less_smoke_against_a_gpu_less_reference_is_not_comparable(self):
        base = self.baseline("B0", {"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertEqual(self.load(base, "smoke_reference.json")["cases"], [])
        # smoke --against refuses it before measuring: one run, no measured spread (and no case).
        self.assertOneLineError(self.smoke("S0", "--against", base), 2, "not a measured smoke reference")
        self.assertFalse(os.path.exists(os.path.join(self.results, "S0")), "nothing measured")
        self.assertEqual(run_cli(["smoke"] + self.fake_args("S0")).returncode, 0)
        # compare of the two run directories: nothing matched, exit 3, and the reason names what did not match.
        both = run_cli(["compare", base, os.path.join(self.results, "S0")])
        self.assertRunError(both, 3, "0 of the smaller run's 48 case(s) matched")
        self.assertIn("points only in A: local.mpi4; points only in B: collectives_1rank_mpi, collectives_4rank_mpi",
                      both.stderr)
        document = self.load(self.results, "S0", "compare.json")
        ok, errors = validate("compare.schema.json", os.path.join(self.results, "S0", "compare.json"))
        self.assertTrue(ok, errors)
        self.assertEqual((document["exit_code"], document["overall"], document["comparable"]["code"]),
                         (3, "not comparable", "compare.nothing_comparable"))

    def test_a_reference_of_other_hardware_is_refused_or_compared_with_a_warning(self):
        document = self.load(self.capture("R", ONE_FAKE_GPU))
        # A field one side does not know (cuda_runtime null here) is no evidence of other hardware: not listed.
        document["identity"].update(gpu_model="NVIDIA A100-SXM4-80GB", nccl="2.21.5", cuda_runtime=None)
        other = os.path.join(self.tmp, "a100.json")
        with open(other, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        refused = self.smoke("S1", "--against", other, env=ONE_FAKE_GPU)
        self.assertRunError(refused, 3, "measured on other hardware or software: GPU model A NVIDIA A100-SXM4-80GB, "
                                        "B Fake GPU; NCCL version A 2.21.5, B 2.28.9")
        self.assertIsNotNone(self.junit("S1")["against"].find("failure"))
        warned = self.smoke("S2", "--against", other, "--other-hardware", "warn", env=ONE_FAKE_GPU)
        self.assertEqual(warned.returncode, 0, warned.stderr)
        self.assertIn("cclbench: warning: measured on other hardware or software, compared anyway", warned.stderr)
        self.assertEqual(self.load(self.results, "S2", "compare.json")["comparable"]["identity"],
                         [{"field": "GPU model", "a": "NVIDIA A100-SXM4-80GB", "b": "Fake GPU"},
                          {"field": "NCCL version", "a": "2.21.5", "b": "2.28.9"}])
        # compare warns by default (a before/after of an upgrade) and refuses when asked.
        mine = os.path.join(self.results, "S2", "smoke_reference.json")
        self.assertEqual(run_cli(["compare", other, mine]).returncode, 0)
        self.assertRunError(run_cli(["compare", other, mine, "--other-hardware", "refuse"]), 3, "GPU model")

    def test_a_reference_with_a_bad_schema_is_refused_before_anything_is_measured(self):
        self.assertEqual(self.smoke("R", env=ONE_FAKE_GPU).returncode, 0)
        good = self.load(self.results, "R", "smoke_reference.json")
        ok_repeat = good["cases"][0]["repeats"][0]
        bad = {"not_json": "{\"kind\": ", "wrong_kind": dict(good, kind="compare"),
               "newer_major": dict(good, schema_version="2.0.0"), "no_identity": {k: v for k, v in good.items() if k != "identity"},
               "ok_without_time": dict(good, cases=[dict(good["cases"][0], repeats=[dict(ok_repeat, time_us=None)])]),
               "zero_time": dict(good, cases=[dict(good["cases"][0], repeats=[dict(ok_repeat, time_us=0)])])}
        expected = {"not_json": "is not valid JSON", "wrong_kind": "its kind is 'compare'",
                    "newer_major": "schema_version '2.0.0' is not 1.x", "no_identity": "identity is missing",
                    "ok_without_time": "an ok repeat without time_us",
                    "zero_time": "a repeat needs repeat, status and time_us"}
        for name, document in bad.items():
            path = os.path.join(self.tmp, f"{name}.json")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(document if isinstance(document, str) else json.dumps(document))
            if not isinstance(document, str):
                self.assertFalse(validate("smoke_reference.schema.json", path)[0], f"{name}: the schema refuses it too")
            result = self.smoke(f"BAD-{name}", "--against", path, env=ONE_FAKE_GPU)
            self.assertOneLineError(result, 2, expected[name])
            self.assertFalse(os.path.exists(os.path.join(self.results, f"BAD-{name}")), "nothing measured")
        self.assertOneLineError(self.smoke("BAD-missing", "--against", os.path.join(self.tmp, "nope.json")), 2,
                                "does not exist")

    def test_gpu_hidden_every_gpu_part_fails_with_the_reason(self):
        result = self.smoke("H", env=dict(ONE_FAKE_GPU, CUDA_VISIBLE_DEVICES=""))
        self.assertRunError(result, 1, "smoke failed")
        cases = self.junit("H")
        self.assertIsNone(cases["topology"].find("failure"))
        for name in GPU_SMOKE_PARTS[1:]:
            failure = cases[name].find("failure")
            self.assertIsNotNone(failure, f"{name} passed with the GPU hidden")
            reason = ("no CUDA device" if name.startswith("smoke.copy") else
                      "--backend nccl: CUDA sees no device: CUDA_VISIBLE_DEVICES is empty")
            self.assertIn(reason, failure.get("message"), name)
        records = os.path.join(self.results, "H", "cases.jsonl")
        self.assertFalse(os.path.exists(records) and os.path.getsize(records), "nothing ran on host memory")


if __name__ == "__main__":
    unittest.main()
