"""`compare`: verdicts on synthetic runs, the noise rule, one-sided cases and the CI exit status."""
import json
import os
import unittest

from helpers import TempDirTest, read_text, run_cli


def record(point, case_id, p50, cv=0.5, n=20, status="ok", wrong=0, emulated=False):
    # Samples alternate around p50 so that their CV is about `cv` percent.
    samples = [p50 * (1 + (cv / 100) * (1 if i % 2 else -1)) for i in range(n)]
    return {"schema_version": "1.0.0", "point": point, "case_id": case_id, "collective": case_id.split(".")[0],
            "requested_bytes": 8192, "status": status, "backend": "nccl", "nranks": 4, "emulated": emulated, "wrong": wrong, "iterations": n, "reason": None,
            "time_us": {"mean": p50, "min": min(samples), "p50": p50, "p95": max(samples), "p99": max(samples),
                        "max": max(samples), "cv_pct": cv} if status == "ok" else None,
            "samples_us": samples if status == "ok" else []}


class Compare(TempDirTest):
    def write_run(self, name, records):
        run = os.path.join(self.tmp, name)
        os.makedirs(run)
        with open(os.path.join(run, "cases.jsonl"), "w") as handle:
            handle.write("".join(json.dumps(r) + "\n" for r in records))
        return run

    def row(self, text, case_id):
        for line in text.splitlines():
            if f"| {case_id} |" in line:
                return line
        self.fail(f"no row for {case_id} in:\n{text}")

    def test_verdicts(self):
        run_a = self.write_run("A", [
            record("p", "same", 100), record("p", "faster", 100), record("p", "slower_small", 100),
            record("p", "noisy", 100, cv=20), record("p", "regress", 100), record("p", "broken", 100),
            record("p", "only_a", 100), record("p", "mode", 100),
            # Repeats: the CV across them is the noise (here ~7%), not the per-iteration samples.
            record("q.rep1", "repeats", 100, cv=0.1), record("q.rep2", "repeats", 110, cv=0.1)])
        run_b = self.write_run("B", [
            record("p", "same", 101), record("p", "faster", 80), record("p", "slower_small", 104),
            record("p", "noisy", 110, cv=20), record("p", "regress", 120), record("p", "broken", 0, status="failed"),
            record("p", "only_b", 100), record("q", "repeats", 115, cv=0.1), record("p", "mode", 300, emulated=True)])
        result = run_cli(["compare", run_a, run_b])
        self.assertEqual(result.returncode, 1, "a regression fails the comparison")
        self.assertIn("2 regression(s)", result.stderr)
        text = result.stdout
        self.assertIn("same within noise", self.row(text, "same"))
        self.assertIn("| faster |", self.row(text, "faster"))
        self.assertIn("-20.0", self.row(text, "faster"))
        self.assertIn("| slower |", self.row(text, "slower_small"), "beyond the 2% threshold, below --fail-above")
        self.assertIn("same within noise", self.row(text, "noisy"), "20% per-iteration CV hides a 10% change")
        self.assertIn("slower (REGRESSION)", self.row(text, "regress"))
        self.assertIn("REGRESSION: failed in B", self.row(text, "broken"))
        self.assertIn("same within noise", self.row(text, "repeats"), "repeat CV widens the band")
        self.assertIn("not comparable (mode A nccl x4, B nccl x4 emulated)", self.row(text, "mode"),
                      "emulated ranks are never compared with real ones")
        self.assertIn("## Only in A\n\n- p only_a", text)
        self.assertIn("## Only in B\n\n- p only_b", text)
        self.assertIn("Rule:", text)

    def test_thresholds_and_out_file(self):
        run_a = self.write_run("A", [record("p", "c1", 100), record("p", "c2", 100)])
        run_b = self.write_run("B", [record("p", "c1", 103), record("p", "c2", 99)])
        out = os.path.join(self.tmp, "cmp.md")
        result = run_cli(["compare", run_a, run_b, "--out", out])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "")
        text = read_text(out)
        self.assertIn("| slower |", self.row(text, "c1"))
        self.assertIn("same within noise", self.row(text, "c2"))
        strict = run_cli(["compare", run_a, run_b, "--fail-above", "2%"])
        self.assertEqual(strict.returncode, 1)
        loose = run_cli(["compare", run_a, run_b, "--threshold", "5%"])
        self.assertEqual(loose.returncode, 0)
        self.assertIn("same within noise", self.row(loose.stdout, "c1"))

    def test_jsonl_files_and_identical_runs(self):
        run_a = self.write_run("A", [record("p", "c1", 100, cv=3), record("p", "c2", 50, cv=3)])
        result = run_cli(["compare", os.path.join(run_a, "cases.jsonl"), run_a])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("0 faster, 0 slower, 2 same within noise", result.stdout)


if __name__ == "__main__":
    unittest.main()
