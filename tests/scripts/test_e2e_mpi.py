"""End to end with the real tools: `baseline` on the MPI backend (real coll_perf under the real
mpirun --oversubscribe, small sizes), `report`, `compare`, `smoke`; every file validated against
results_schema/. Skips (exit 77 for CTest) when coll_perf or topo_map is not built."""
import glob
import os
import shutil
import unittest

from helpers import BINARY_DIR, SCHEMA_DIR, TempDirTest, main_for_ctest, read_jsonl, read_text, run_cli, validate

APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map") if not os.access(os.path.join(APPS, tool), os.X_OK)]
if not shutil.which("mpirun"):
    MISSING.append("mpirun")
SKIP_REASON = f"not built or not installed: {', '.join(MISSING)} (looked in {APPS})" if MISSING else None
EXTRA_MPIRUN = os.environ.get("CCLBENCH_TEST_MPIRUN_ARGS", "")


def schema_for(*stems):
    """The first existing results_schema/<stem>.schema.json; a missing schema fails the test, never skips it."""
    for stem in stems:
        path = os.path.join(SCHEMA_DIR, f"{stem}.schema.json")
        if os.path.exists(path):
            return os.path.basename(path)
    raise AssertionError(f"no schema in {SCHEMA_DIR} for {', '.join(stems)}")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class RealTools(TempDirTest):
    def common(self, run_id):
        return self.real_args(run_id)

    def assertValid(self, schema, *paths):
        self.assertTrue(schema, "no schema to validate against")
        self.assertTrue(paths, f"no file to validate against {schema}")
        ok, errors = validate(schema, *paths)
        self.assertTrue(ok, f"{schema}: {errors}")

    def test_baseline_report_compare_on_mpi_backend(self):
        result = run_cli(["baseline", "-b", "8K", "-e", "32K", "-n", "3", "-w", "1", "--timeout", "60",
                          "--launch-timeout", "240"] + self.common("E"), timeout=600)
        run = os.path.join(self.results, "E")
        log = read_text(os.path.join(run, "run.log")) if os.path.exists(os.path.join(run, "run.log")) else ""
        self.assertEqual(result.returncode, 0, result.stderr + log[-4000:])
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        self.assertTrue(records)
        self.assertTrue(all(r["status"] == "ok" and r["wrong"] == 0 and r["backend"] == "mpi" for r in records))
        self.assertEqual({r["collective"] for r in records}, {"all_reduce", "all_gather", "reduce_scatter", "alltoall"})
        self.assertEqual({r["requested_bytes"] for r in records}, {8192, 16384, 32768})
        self.assertValid("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
        self.assertValid(schema_for("case", "case_record", "coll_case"), os.path.join(run, "cases.jsonl"))
        self.assertValid(schema_for("coll_perf", "coll_perf_result", "result"), *glob.glob(os.path.join(run, "raw", "*.json")))
        self.assertValid(schema_for("topology", "topo_map"), *glob.glob(os.path.join(run, "topology", "*.json")))
        report = run_cli(["report", run])
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        # Host-memory times are correctness only: run once whatever --repeat says (3 by default), no headline
        # table, no gate.
        self.assertIn("| local.mpi4 | MPI backend on host memory: correctness only | 1 | 24 | 24 | 0 | 0 | 0 |", text)
        self.assertNotIn("### alltoall", text)
        self.assertIn("not available: MPI backend", text)  # coll_perf's transport_reason, or ours
        self.assertIn("_not available: MPI backend (no NCCL)_", text)
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        for kind in ("launch not complete", "wrong data", "case not ok", "missing cases", "unreadable result"):
            self.assertNotIn(f"| {kind} |", anomalies)
        self.assertIn("None found", anomalies, "CI oversubscribes 2 cores, but host-memory times never gate")
        for name in ("summary.csv", "run.log", "sanity.jsonl", "raw/local.mpi4.json", "report.md"):
            self.assertTrue(os.path.exists(os.path.join(run, name)), name)
        same = run_cli(["compare", run, run])
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertIn("0 regression(s)", same.stdout)
        self.assertIn("24 correctness only", same.stdout)

    def test_smoke_without_gpu(self):
        result = run_cli(["smoke", "--time-limit", "300"] + self.common("SM"), timeout=600)
        run = os.path.join(self.results, "SM")
        log = read_text(os.path.join(run, "run.log")) if os.path.exists(os.path.join(run, "run.log")) else ""
        self.assertEqual(result.returncode, 0, result.stderr + log[-4000:])
        # smoke.copy, smoke.collective, smoke.graph and local.share-gpu4 need the GPU.
        self.assertIn('skipped="4"', read_text(os.path.join(run, "smoke.junit.xml")))
        # A run's own reference is one run: refused as a reference (its repeats' spread is no run-to-run spread).
        against = run_cli(["smoke", "--time-limit", "300", "--against", run] + self.common("SM2"), timeout=600)
        self.assertEqual(against.returncode, 2, against.stderr)
        self.assertIn("not a measured smoke reference: it holds one run", against.stderr)
        # Nothing on host memory is a smoke reference: a capture needs a GPU, and says so.
        capture = run_cli(["smoke", "--time-limit", "300", "--capture", "5"] + self.common("CAP"), timeout=600)
        self.assertEqual(capture.returncode, 2, capture.stderr)
        self.assertIn("smoke --capture needs a GPU", capture.stderr)


if __name__ == "__main__":
    main_for_ctest()
