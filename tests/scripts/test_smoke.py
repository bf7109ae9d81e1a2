"""`smoke`: JUnit XML, GPU parts skipped without a GPU, failure on wrong data, the time limit."""
import os
import unittest
import xml.etree.ElementTree as ElementTree

from helpers import TempDirTest, run_cli, validate


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
        self.assertEqual(suite.get("skipped"), "3")
        for name in ("p2p_matrix", "collectives_1rank_nccl", "collectives_4rank_share_gpu"):
            self.assertIsNotNone(cases[name].find("skipped"), name)
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
        # The launches, and the verdict's judged checks (verdict.json): its points' data, the P2P outliers.
        self.assertEqual((suite.get("tests"), suite.get("failures"), suite.get("skipped")), ("6", "0", "0"))
        self.assertEqual(sorted(cases), ["check.data", "check.outliers", "collectives_1rank_nccl",
                                         "collectives_4rank_share_gpu", "p2p_matrix", "topology"])
        ok, errors = validate("verdict.schema.json", os.path.join(self.results, "S1", "verdict.json"))
        self.assertTrue(ok, errors)
        with open(os.path.join(self.results, "S1", "run.log")) as handle:
            self.assertIn("--share-gpu", handle.read())

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


if __name__ == "__main__":
    unittest.main()
