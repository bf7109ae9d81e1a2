"""Wrong data must surface in every scripts layer. With the real coll_perf under the real mpirun
(MPI backend, no GPU), CCLBENCH_INJECT_WRONG corrupts one case on purpose; then:
  - `baseline` fails, marks the point failed, keeps the case's record (wrong = the count flipped,
    status failed), records the variable in run_manifest.json, and report.md's first screen names
    the case as wrong data;
  - `compare` against a clean run calls that case a regression (exit 1);
  - `smoke` fails, and its JUnit XML names the case in the failure of the part that ran it.
Skips (exit 77 for CTest) when coll_perf, topo_map or mpirun is missing."""
import json
import os
import shutil
import unittest
import xml.etree.ElementTree as ElementTree

from helpers import BINARY_DIR, TempDirTest, main_for_ctest, read_jsonl, read_text, run_cli

APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map") if not os.access(os.path.join(APPS, tool), os.X_OK)]
if not shutil.which("mpirun"):
    MISSING.append("mpirun")
SKIP_REASON = f"not built or not installed: {', '.join(MISSING)} (looked in {APPS})" if MISSING else None
EXTRA_MPIRUN = os.environ.get("CCLBENCH_TEST_MPIRUN_ARGS", "")
VARIABLE = "CCLBENCH_INJECT_WRONG"
FIRST_SCREEN_LINES = 40


def clean_env():
    """Runs never inherit an injection from the test's own environment."""
    return {VARIABLE: ""}


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class InjectedWrong(TempDirTest):
    def common(self, run_id):
        return self.real_args(run_id)

    def baseline(self, run_id, env):
        return run_cli(["baseline", "-b", "8K", "-e", "16K", "-n", "3", "-w", "1", "--coll", "all_gather,alltoall", "--repeat", "1",
                        "--timeout", "60", "--launch-timeout", "240"] + self.common(run_id), env=env, timeout=600)

    def test_baseline_report_and_compare_name_the_case(self):
        target = "alltoall.float.none.out.16K"
        injection = f"count=5,rank=2,case={target}"
        clean = self.baseline("CLEAN", clean_env())
        self.assertEqual(clean.returncode, 0, clean.stderr)
        bad = self.baseline("BAD", {VARIABLE: injection})
        run = os.path.join(self.results, "BAD")
        self.assertNotEqual(bad.returncode, 0, bad.stderr)
        self.assertIn(target, bad.stderr)  # the run's own error line names the case

        manifest = json.loads(read_text(os.path.join(run, "run_manifest.json")))
        point = manifest["points"]["local.mpi4"]
        self.assertEqual(point["status"], "failed", point)
        self.assertEqual(point["exit_code"], 1, point)
        self.assertIn(target, point["reason"])
        self.assertEqual(manifest["points"]["sanity"]["status"], "complete")  # all_reduce only: untouched
        self.assertEqual(manifest["env"].get(VARIABLE), injection)

        records = {r["case_id"]: r for r in read_jsonl(os.path.join(run, "cases.jsonl"))}
        self.assertEqual(records[target]["wrong"], 5)
        self.assertEqual(records[target]["status"], "failed")
        self.assertEqual(records[target]["reason"], "5 wrong elements over 1 checked runs")
        others = [r for case_id, r in records.items() if case_id != target and r["status"] != "skipped"]
        self.assertTrue(others)
        self.assertTrue(all(r["status"] == "ok" and r["wrong"] == 0 for r in others),
                        [r["case_id"] for r in others if r["status"] != "ok"])

        report = read_text(os.path.join(run, "report.md"))
        first_screen = "\n".join(report.splitlines()[:FIRST_SCREEN_LINES])
        self.assertIn(f"| wrong data | local.mpi4 | {target}: 5 wrong element(s) |", first_screen)

        comparison = run_cli(["compare", os.path.join(self.results, "CLEAN"), run])
        self.assertEqual(comparison.returncode, 1, comparison.stdout + comparison.stderr)
        rows = [line for line in comparison.stdout.splitlines() if f"| {target} |" in line]
        self.assertEqual(len(rows), 1, comparison.stdout)
        self.assertIn("REGRESSION: failed (5 wrong elements over 1 checked runs) in B", rows[0])

    def test_smoke_fails_and_the_junit_names_the_case(self):
        # Every AllGather case fails (3 sizes x 2 placements); the JUnit failure of each MPI part
        # names all six, its message the first.
        result = run_cli(["smoke", "--time-limit", "300"] + self.common("SM"),
                         env={VARIABLE: "count=2,rank=0,collective=all_gather"}, timeout=600)
        run = os.path.join(self.results, "SM")
        self.assertNotEqual(result.returncode, 0, result.stderr)
        self.assertIn("all_gather.float.none.out.8K", result.stderr)
        junit = read_text(os.path.join(run, "smoke.junit.xml"))
        suite = ElementTree.fromstring(junit).find("testsuite")
        failed = {case.get("name"): case.find("failure") for case in suite.iter("testcase")
                  if case.find("failure") is not None}
        # Both MPI parts run the cases (1 and 4 ranks; rank 0 exists in both); the verdict's data check fails too.
        self.assertEqual(set(failed), {"collectives_1rank_mpi", "collectives_4rank_mpi", "check.data"}, junit)
        self.assertEqual(suite.get("failures"), "3")
        self.assertIn("data.wrong", failed.pop("check.data").get("message"))
        targets = [f"all_gather.float.none.{placement}.{size}" for size in ("8K", "64K", "512K")
                   for placement in ("out", "in")]
        for name, failure in failed.items():
            self.assertIn(targets[0], failure.get("message"), name)
            for target in targets:
                self.assertIn(f"{target}: failed (2 wrong elements over 1 checked runs)", failure.text, name)
            self.assertNotIn("all_reduce.", failure.text, name)  # only the cases that failed

if __name__ == "__main__":
    main_for_ctest()
