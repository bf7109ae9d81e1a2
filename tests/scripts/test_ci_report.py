"""scripts/ci_report.py: CI's stage times against its budget and the slowest tests from CTest's JUnit files.
The JUnit input is what CTest 3.25 writes with --output-junit (testcase name, status and time attributes; a failed
test's <failure>); the expected lines are worked out by hand from the inputs."""
import os
import subprocess
import sys
import tempfile
import unittest

from helpers import SOURCE_DIR

REPORT = os.path.join(SOURCE_DIR, "scripts", "ci_report.py")

# The shape CTest 3.25 writes (cmCTestTestHandler::WriteJUnitXML): one testsuite, a testcase per test.
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="Linux-c++" tests="4" failures="1" disabled="0" skipped="1" hostname="" time="900" timestamp="2026-12-05T15:00:00">
  <testcase name="{a}" classname="{a}" time="{a_s}" status="run"><system-out>ok</system-out></testcase>
  <testcase name="{b}" classname="{b}" time="{b_s}" status="fail"><failure message="Failed"/><system-out>x</system-out></testcase>
  <testcase name="{c}" classname="{c}" time="{c_s}" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/></testcase>
  <testcase name="{d}" classname="{d}" time="{d_s}" status="run"><system-out>ok</system-out></testcase>
</testsuite>
"""


class CiReport(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="ci-report-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.work], check=False))

    def write(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path

    def report(self, *args):
        return subprocess.run([sys.executable, REPORT] + list(args), capture_output=True, text=True, timeout=60)

    def test_stages_against_the_budget_and_the_slowest_tests_across_stages(self):
        stages = self.write("stages.tsv", "packages\t60\t0\ntests\t1200\t0\nsanitize\t300\t0\n")
        tests = self.write("tests.xml", JUNIT.format(a="scripts_smoke", a_s="88.35", b="scripts_plan", b_s="15.1",
                                                     c="scripts_gpu_smoke", c_s="0.2", d="unit_a", d_s="0.01"))
        sanitize = self.write("sanitize.xml", JUNIT.format(a="reliability_faults_mpi", a_s="81.7", b="x", b_s="3",
                                                           c="y", c_s="2", d="z", d_s="1"))
        result = self.report("--stages", stages, "--junit", tests, "--junit", sanitize, "--budget-s", "1800",
                             "--top", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        # 60 + 1200 + 300 = 1560 s of 1800: 26.0 of 30 min; 1200 s is 66.7% of the budget.
        self.assertIn("  tests                       1200 s   66.7% of the budget", lines)
        self.assertIn("  total                       1560 s  within the budget (26.0 of 30 min)", lines)
        self.assertEqual(lines[-4:], ["ci: the 3 slowest of 8 tests:",
                                      "      88.3 s  scripts_smoke  [tests]",
                                      "      81.7 s  reliability_faults_mpi  [sanitize]",
                                      "      15.1 s  scripts_plan  [tests]  fail"])

    def test_a_file_ctest_wrote_reads_as_its_tests(self):
        """data/ctest_3_25_junit.xml: what CTest 3.25 wrote for one passing gtest case and one skipped test."""
        stages = self.write("stages.tsv", "tests\t10\t0\n")
        result = self.report("--stages", stages, "--junit", os.path.join(os.path.dirname(__file__), "data",
                                                                         "ctest_3_25_junit.xml"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[-3:], [
            "ci: the 2 slowest of 2 tests:",
            "       0.2 s  scripts_gpu_smoke  [ctest_3_25_junit]  skipped",
            "       0.0 s  FileIoTest.AtomicWriteIntoMissingDirectoryFailsCleanly  [ctest_3_25_junit]"])

    def test_over_the_budget_is_said_and_exits_3_and_a_failed_stage_exits_1(self):
        over = self.write("over.tsv", "tests\t1700\t0\nfuzz\t160\t0\n")
        result = self.report("--stages", over, "--budget-s", "1800")
        self.assertEqual(result.returncode, 3, result.stdout)
        self.assertIn("  total                       1860 s  OVER the budget (31.0 of 30 min)", result.stdout)
        failed = self.write("failed.tsv", "tests\t100\t1\n")
        result = self.report("--stages", failed)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED (exit 1)", result.stdout)

    def test_a_stage_beside_another_is_shown_and_left_out_of_the_total(self):
        """.ci/run's sanitizer build and fuzzers run beside the tests: the total is the wall time (tests, the wait
        for them, sanitize), and a failure beside still fails the report."""
        stages = self.write("stages.tsv", "tests\t1200\t0\nwaiting for the fuzzers\t12\t0\n"
                                          "sanitize build\t880\t0\tbeside tests\nfuzz\t330\t1\tbeside tests\n"
                                          "sanitize\t300\t0\n")
        result = self.report("--stages", stages, "--budget-s", "1800")
        self.assertEqual(result.returncode, 1, result.stdout)
        lines = result.stdout.splitlines()
        # 1200 + 12 + 300 = 1512 s: 25.2 of 30 min; 12 s is 0.7% of the budget.
        self.assertIn("  waiting for the fuzzers       12 s    0.7% of the budget", lines)
        self.assertIn("  (sanitize build, beside tests: 880 s, not in the total)", lines)
        self.assertIn("  (fuzz, beside tests: 330 s, not in the total)  FAILED (exit 1)", lines)
        self.assertIn("  total                       1512 s  within the budget (25.2 of 30 min)", lines)
        bad = self.write("bad4.tsv", "fuzz\t30\t0\tnext to tests\n")
        result = self.report("--stages", bad)
        self.assertEqual(result.returncode, 2)
        self.assertIn("bad4.tsv:1: a fourth field must read 'beside STAGE'", result.stderr)

    def test_a_stages_file_that_does_not_parse_is_an_error(self):
        bad = self.write("bad.tsv", "tests 100 0\n")
        result = self.report("--stages", bad)
        self.assertEqual(result.returncode, 2)
        self.assertIn("bad.tsv:1: expected name<TAB>seconds<TAB>status", result.stderr)


if __name__ == "__main__":
    unittest.main()
