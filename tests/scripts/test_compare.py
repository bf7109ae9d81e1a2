"""`compare`: verdicts on synthetic runs, the noise rule, one-sided cases, correctness-only records and the
CI exit status. Expected bands are worked out by hand from the README's rule, not from the code."""
import json
import os
import unittest

from helpers import TempDirTest, read_text, run_cli


def record(point, case_id, time_us, status="ok", wrong=0, emulated=False, backend="nccl", gated=True, **extra):
    """A case record whose bandwidth time is `time_us` (gated_time_us, or time_us.mean when not gated).
    The per-iteration p50 is deliberately different (the event-timed loop): compare must not use it."""
    ok = status == "ok"
    result = {"schema_version": "1.1.0", "point": point, "case_id": case_id, "collective": case_id.split(".")[0],
              "requested_bytes": 8192, "status": status, "backend": backend, "nranks": 4, "emulated": emulated,
              "wrong": wrong, "iterations": 20, "reason": None if ok else "fake failure",
              "time_us": {"mean": time_us, "min": time_us, "p50": time_us * 1.5, "p95": time_us * 2,
                          "p99": time_us * 2, "max": time_us * 2, "cv_pct": 1.0} if ok else None,
              "gated_time_us": time_us if ok and gated and backend == "nccl" and not emulated else None,
              "batch_time_us": time_us if ok else None}
    result.update(extra)
    return result


def repeats(point, case_id, times, **kwargs):
    """One record per repeat, named as the baseline names them (.repN when there is more than one)."""
    if len(times) == 1:
        return [record(point, case_id, times[0], **kwargs)]
    return [record(f"{point}.rep{k}", case_id, t, **kwargs) for k, t in enumerate(times, 1)]


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

    def test_verdicts_with_repeats(self):
        base = [99.0, 100.0, 101.0]
        a, b = [], []
        for case_id, times_b, kwargs_b in (
                ("same", [99.5, 100.5, 101.5], {}),
                ("faster", [79.0, 80.0, 81.0], {}),
                ("slower_small", [103.96, 104.0, 104.04], {}),
                ("injected", [t * 1.10 for t in base], {}),  # a 10% slowdown injected into B
                ("broken", [100.0, 100.0, 100.0], {"status": "failed"}),
                ("mode", [300.0, 300.0, 300.0], {"emulated": True}),
                ("graph", [99.0, 100.0, 101.0], {"graph_launches": 10})):
            a += repeats("p", case_id, [100.0, 100.1, 99.9] if case_id == "slower_small" else base)
            b += repeats("p", case_id, times_b, **kwargs_b)
        # One repeat of three computed wrong data in B: a correctness regression, whatever the times.
        a += repeats("p", "wrong", base)
        b += repeats("p", "wrong", base[:2]) + [record("p.rep3", "wrong", 101.0, wrong=3)]
        # Failed in A, ok in B: fixed, never a regression.
        a += repeats("p", "fixed", base, status="failed")
        b += repeats("p", "fixed", base)
        # A noisy case: its repeats spread 10%, so a 10% difference is noise.
        a += repeats("q", "noisy", [90.0, 100.0, 110.0])
        b += repeats("q", "noisy", [99.0, 110.0, 121.0])
        a += repeats("p", "only_a", base)
        b += repeats("p", "only_b", base)
        run_a, run_b = self.write_run("A", a), self.write_run("B", b)
        result = run_cli(["compare", run_a, run_b])
        self.assertEqual(result.returncode, 1, "a regression fails the comparison")
        self.assertIn("3 regression(s)", result.stderr)
        text = result.stdout
        self.assertIn("same within noise", self.row(text, "same"))
        self.assertIn("| faster |", self.row(text, "faster"))
        self.assertIn("-20.0", self.row(text, "faster"))
        # The bandwidth time is compared (the records' p50 is 1.5x it): A's median 100 us.
        self.assertIn("| 100.00 | 110.00 | 1.100 | +10.0 |", self.row(text, "injected"))
        self.assertIn("slower (REGRESSION)", self.row(text, "injected"))
        self.assertIn("| slower |", self.row(text, "slower_small"), "beyond the 2% threshold, below --fail-above")
        self.assertIn("same within noise", self.row(text, "noisy"), "10% spread across repeats hides a 10% change")
        self.assertIn("REGRESSION: failed (fake failure) in B", self.row(text, "broken"))
        self.assertIn("REGRESSION: 3 wrong element(s) in B", self.row(text, "wrong"))
        self.assertIn("ok in B (failed (fake failure) in A)", self.row(text, "fixed"))
        self.assertNotIn("REGRESSION", self.row(text, "fixed"))
        self.assertIn("not comparable (mode A nccl x4 eager, B nccl x4 eager emulated)", self.row(text, "mode"),
                      "emulated ranks are never compared with real ones")
        self.assertIn("not comparable (mode A nccl x4 eager, B nccl x4 cuda-graph)", self.row(text, "graph"),
                      "a CUDA-graph run is never set against an eager one")
        self.assertIn("## Only in A\n\n- p only_a", text)
        self.assertIn("## Only in B\n\n- p only_b", text)
        self.assertIn("Rule:", text)

    def test_injected_slowdown_fails_and_is_named(self):
        cases = [f"all_reduce.float.sum.out.{size}" for size in ("8K", "1M", "64M")]
        a = [r for case_id in cases for r in repeats("p", case_id, [99.0, 100.0, 101.0])]
        b = [r for case_id in cases for r in repeats("p", case_id, [99.2, 100.1, 100.8])]
        b = [dict(r, gated_time_us=r["gated_time_us"] * 1.10) if r["case_id"].endswith(".1M") else r for r in b]
        result = run_cli(["compare", self.write_run("A", a), self.write_run("B", b)])
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("1 regression(s), first: p all_reduce.float.sum.out.1M: +10.1%", result.stderr)  # 110.11 / 100
        self.assertIn("same within noise", self.row(result.stdout, "all_reduce.float.sum.out.64M"))

    def test_band_from_repeats_and_its_boundary(self):
        # Both sides: relative standard deviation exactly 1% (sd 1 around 100, sd 1.1 around 110), 3 repeats.
        # band = 3 x 1.2533 x 1% x sqrt(1/3 + 1/3) = 3.070%, by hand.
        a = repeats("p", "banded", [99.0, 100.0, 101.0])
        b = repeats("p", "banded", [108.9, 110.0, 111.1])
        # Identical repeats: no spread, so the band is the threshold; 25 us on 100 is exactly 25%.
        a += repeats("p", "edge", [100.0, 100.0, 100.0]) + repeats("p", "over", [100.0, 100.0, 100.0])
        b += repeats("p", "edge", [125.0, 125.0, 125.0]) + repeats("p", "over", [125.5, 125.5, 125.5])
        run_a, run_b = self.write_run("A", a), self.write_run("B", b)
        result = run_cli(["compare", run_a, run_b, "--threshold", "25%", "--fail-above", "50%"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("| +25.0 | 25.0 | same within noise |", self.row(result.stdout, "edge"), "|diff| == band is same")
        self.assertIn("| +25.5 | 25.0 | slower |", self.row(result.stdout, "over"))
        result = run_cli(["compare", run_a, run_b, "--threshold", "1%"])
        self.assertIn("| +10.0 | 3.1 | slower (REGRESSION) |", self.row(result.stdout, "banded"))

    def test_neighbours_set_a_floor_under_a_lucky_case(self):
        # Same point and collective: two sizes whose repeats spread ~5%, one whose three repeats agreed by
        # chance. Its 8% difference is inside the band of its neighbours' spread, so it is noise.
        a = repeats("p", "all_gather.float.none.out.8K", [95.0, 100.0, 105.0])
        a += repeats("p", "all_gather.float.none.out.16K", [95.0, 100.0, 105.0])
        a += repeats("p", "all_gather.float.none.out.32K", [100.0, 100.0, 100.0])
        b = repeats("p", "all_gather.float.none.out.8K", [95.0, 100.0, 105.0])
        b += repeats("p", "all_gather.float.none.out.16K", [95.0, 100.0, 105.0])
        b += repeats("p", "all_gather.float.none.out.32K", [108.0, 108.0, 108.0])
        result = run_cli(["compare", self.write_run("A", a), self.write_run("B", b)])
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("same within noise", self.row(result.stdout, "all_gather.float.none.out.32K"))

    def test_one_repeat_a_side(self):
        a = [record("p", c, 100.0) for c in ("same", "within_floor", "beyond_floor", "mixed")]
        b = [record("p", "same", 101.0), record("p", "within_floor", 110.0), record("p", "beyond_floor", 120.0)]
        b += repeats("p", "mixed", [110.0, 110.0, 110.0])  # three repeats in B, one in A: noise still unknown
        result = run_cli(["compare", self.write_run("A", a), self.write_run("B", b)])
        text = result.stdout
        self.assertIn("same within noise", self.row(text, "same"))
        self.assertIn("| 15.0 (one repeat: floor) | inconclusive - rerun with --repeat 3 |", self.row(text, "within_floor"))
        self.assertIn("inconclusive - rerun with --repeat 3", self.row(text, "mixed"))
        self.assertIn("slower (REGRESSION)", self.row(text, "beyond_floor"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("1 regression(s)", result.stderr, "only the difference beyond the floor")
        self.assertIn("2 inconclusive (rerun with --repeat 3)", text)

    def test_emulated_and_mpi_backend_are_correctness_only(self):
        a, b = [], []
        for backend, emulated, tag in (("nccl", True, "emu"), ("mpi", False, "mpi")):
            kwargs = {"backend": backend, "emulated": emulated}
            a += repeats("e", f"{tag}_slow", [100.0, 100.0, 100.0], **kwargs)
            b += repeats("e", f"{tag}_slow", [200.0, 210.0, 220.0], **kwargs)  # twice the time: not a verdict
            a += repeats("e", f"{tag}_wrong", [100.0, 100.0, 100.0], **kwargs)
            b += repeats("e", f"{tag}_wrong", [100.0, 100.0], **kwargs) + [record("e.rep3", f"{tag}_wrong", 100.0,
                                                                                  wrong=5, **kwargs)]
            a += repeats("e", f"{tag}_failed", [100.0], **kwargs)
            b += repeats("e", f"{tag}_failed", [100.0], status="failed", **kwargs)
        run_a, run_b = self.write_run("A", a), self.write_run("B", b)
        result = run_cli(["compare", run_a, run_b])
        text = result.stdout
        self.assertIn("| e | emu_slow | 100.00 | 210.00 | - | - | - | ok in both (emulated: correctness only) |", text)
        self.assertIn("ok in both (MPI backend on host memory: correctness only)", self.row(text, "mpi_slow"))
        for tag in ("emu", "mpi"):
            self.assertIn("REGRESSION: 5 wrong element(s) in B", self.row(text, f"{tag}_wrong"))
            self.assertIn("REGRESSION: failed (fake failure) in B", self.row(text, f"{tag}_failed"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("4 regression(s)", result.stderr, "wrong or failed in B only, never a time")
        self.assertIn("2 correctness only", text)
        # --host-times: the MPI backend's times get verdicts (MPI studies); emulated ranks never do.
        judged = run_cli(["compare", run_a, run_b, "--host-times"])
        self.assertIn("slower (REGRESSION)", self.row(judged.stdout, "mpi_slow"))
        self.assertIn("emulated: correctness only", self.row(judged.stdout, "emu_slow"))
        self.assertIn("5 regression(s)", judged.stderr)

    def test_thresholds_and_out_file(self):
        run_a = self.write_run("A", repeats("p", "c1", [100.0, 100.0, 100.0]) + repeats("p", "c2", [100.0, 100.0, 100.0]))
        run_b = self.write_run("B", repeats("p", "c1", [103.0, 103.0, 103.0]) + repeats("p", "c2", [99.0, 99.0, 99.0]))
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
        run_a = self.write_run("A", repeats("p", "c1", [100.0, 103.0, 97.0]) + repeats("p", "c2", [50.0, 51.0, 49.0]))
        result = run_cli(["compare", os.path.join(run_a, "cases.jsonl"), run_a])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("0 faster, 0 slower, 2 same within noise", result.stdout)


if __name__ == "__main__":
    unittest.main()
