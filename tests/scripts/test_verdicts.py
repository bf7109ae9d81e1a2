"""The repeat rule per case (rules/repeat_rule.judge_repeatability over records) and the report's rules for emulated and MPI-backend points, on
synthetic records. Expected figures are worked out by hand from the README's rule."""
import os
import unittest
from unittest import mock

from case_records import case_record, repeat_records, write_run_dir
from helpers import TempDirTest, read_text, run_cli

from cclbench_lib.model.records import bandwidth_time_us
from cclbench_lib.rules import repeatability
from cclbench_lib.rules.repeat_rule import judge_repeatability
from cclbench_lib.model.run_dir import RunData
from cclbench_lib.render.p2p_local import local_copy_sentence
from cclbench_lib.render.report import repeat_rule_text, table_cells
from cclbench_lib.rules.by_design import unverifiable_by_design


def record(point, case_id, gated, batch=None, mean=None, backend="nccl", emulated=False, wrong=0, cv=1.0,
           status="ok", size=8192):
    """A record whose GPU (gated) time is `gated`; per-iteration mean deliberately different."""
    mean = mean if mean is not None else (gated * 1.3 if gated else 50.0)
    return case_record(point, case_id, size,
                       {"mean": mean, "min": mean, "p50": mean, "p95": mean, "p99": mean, "max": mean, "cv_pct": cv},
                       gated, status=status, backend=backend, emulated=emulated, wrong=wrong,
                       schema_version="1.1.0", iterations=20,
                       batch_time_us=batch if batch is not None else (gated or mean))


def repeat_verdict(records, gate):
    """The one case of these records as the run's repeatability rule judged it; None when it was not judged."""
    point = judge_repeatability(records, gate).get("p")
    return None if point is None else point["cases"]["all_reduce.float.sum.out.8K"]


def case(times, **kwargs):
    return repeat_records("p", times, lambda name, time_us: record(name, "all_reduce.float.sum.out.8K", time_us, **kwargs))


class RepeatRule(unittest.TestCase):
    def test_bandwidth_time_is_gated_else_mean(self):
        self.assertEqual(bandwidth_time_us(record("p", "c", 10.0, mean=13.0)), 10.0)
        self.assertEqual(bandwidth_time_us(record("p", "c", None, mean=13.0)), 13.0)
        # A -G record without a gated time (schema 1.2): coll_perf took bandwidth from the batch time.
        graph = dict(record("p", "c", None, batch=4.0, mean=13.0), graph_launches=10, bandwidth_from="batch_time_us")
        self.assertEqual(bandwidth_time_us(graph), 4.0)

    def test_quiet_repeats_pass(self):
        verdict = repeat_verdict(case([100.0, 101.0, 99.0]), 3.0)
        self.assertIsNone(verdict["code"])
        self.assertAlmostEqual(verdict["cv_pct"], 1.0)       # sd 1 around 100

    def test_one_repeat_off_leaves_the_median_alone(self):
        # CV 8.1% (sd 8.52 around 105.17), but two repeats agree: MAD 0.5 -> robust 1.4826 x 0.5 / 100.5 = 0.74%.
        verdict = repeat_verdict(case([100.0, 100.5, 115.0]), 3.0)
        self.assertEqual(verdict["code"], repeatability.CASE_ABOVE_TARGET)
        self.assertAlmostEqual(verdict["cv_pct"], 8.10, places=2)
        self.assertAlmostEqual(verdict["robust_pct"], 0.74, places=2)

    def test_spread_repeats_have_no_stable_median(self):
        # 100, 106, 112: CV 5.66%, MAD 6 -> robust 1.4826 x 6 / 106 = 8.39%: no stable median (a warning alone).
        verdict = repeat_verdict(case([100.0, 106.0, 112.0]), 3.0)
        self.assertEqual(verdict["code"], repeatability.CASE_ABOVE_GATE)
        self.assertAlmostEqual(verdict["robust_pct"], 8.39, places=2)
        self.assertEqual(repeat_verdict(case([100.0, 105.0]), 3.0)["code"], repeatability.CASE_ABOVE_GATE,
                         "two repeats: no outlier to set aside")

    def test_host_bound_rule(self):
        # The host takes >= 1.25 x the GPU time per launch: 3 x the gate (9%) for the robust dispersion.
        # Median GPU time 106 us: 1.25 x 106 = 132.5 us of host time per launch is the boundary.
        self.assertEqual(repeat_verdict(case([100.0, 106.0, 112.0], batch=132.5), 3.0)["code"],
                         repeatability.HOST_BOUND_JITTER)
        self.assertEqual(repeat_verdict(case([100.0, 106.0, 112.0], batch=200.0), 3.0)["limit_pct"], 9.0)
        self.assertEqual(repeat_verdict(case([100.0, 106.0, 112.0], batch=132.0), 3.0)["code"],
                         repeatability.CASE_ABOVE_GATE, "batch 132 on a 106 us median GPU time is below 1.25x")
        # Not a blanket exemption: 100, 110, 120 is 13.5% robust (1.4826 x 10 / 110) > 9%.
        self.assertEqual(repeat_verdict(case([100.0, 110.0, 120.0], batch=300.0), 3.0)["code"],
                         repeatability.CASE_ABOVE_GATE)
        # No gated GPU time (no blocker loop): nothing says the GPU outran the host.
        ungated = case([None, None, None], batch=500.0)
        for item, mean in zip(ungated, (100.0, 106.0, 112.0)):
            item["time_us"]["mean"] = mean
        self.assertEqual(repeat_verdict(ungated, 3.0)["code"], repeatability.CASE_ABOVE_GATE)

    def test_correctness_only_records_never_gate(self):
        self.assertIsNone(repeat_verdict(case([100.0, 150.0, 300.0], emulated=True), 3.0))
        self.assertIsNone(repeat_verdict(case([None, None, None], backend="mpi"), 3.0))
        self.assertIsNone(repeat_verdict(case([100.0]), 3.0), "one repeat: nothing to gate")


class ReportRules(TempDirTest):
    def write_run(self, records, launches):
        plan = [dict(launch, argv=["coll_perf"], hosts=["h"], env={}, outputs=[]) for launch in launches]
        run = write_run_dir(os.path.join(self.tmp, "R"), plan, records)
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(run, "report.md"))
        self.run_dir = run
        return text, text[text.index("## Anomalies"):text.index("## Environment")]

    def test_emulated_and_mpi_points_are_correctness_only(self):
        ids = ["all_reduce.float.sum.out.8K", "all_reduce.float.sum.in.8K"]
        records = []
        for k in (1, 2, 3):
            # The GPU point: quiet across repeats, 20% per-iteration CV (a column, not an anomaly).
            records += [record(f"local.gpu1.rep{k}", c, 10.0 + 0.01 * k, cv=20.0) for c in ids]
            # Emulated and MPI points: times all over the place, far above any ceiling, 40% CV.
            records += [record(f"local.share-gpu4.rep{k}", c, None, mean=100.0 * k, emulated=True, cv=40.0) for c in ids]
            records += [record(f"local.mpi4.rep{k}", c, None, mean=50.0 * k, backend="mpi", cv=40.0) for c in ids]
        records[-1]["wrong"] = 6  # an MPI-backend case computed wrong data: that is still an anomaly
        for item in records:
            if item["point"].startswith("local.share") or item["point"].startswith("local.mpi"):
                item["busbw_gbps"] = 5000.0
        launches = [{"name": f"{base}.rep{k}", "kind": "local", "nranks": 4, "base_point": base, "repeat": k,
                     "collectives": ["all_reduce"], "sizes": [8192]}
                    for base in ("local.gpu1", "local.share-gpu4", "local.mpi4") for k in (1, 2, 3)]
        text, anomalies = self.write_run(records, launches)
        self.assertIn("| wrong data | local.mpi4.rep3 | all_reduce.float.sum.in.8K: 6 wrong element(s) |", anomalies)
        table = anomalies.split("Physical ceilings")[0]
        self.assertEqual(table.count("\n| "), 2, "header and the wrong-data row only:\n" + table)
        self.assertNotIn("CV", anomalies)
        self.assertNotIn("above physical limit", anomalies)
        self.assertIn("| local.share-gpu4 | emulated: correctness only | 3 | 2 | 2 | 0 | 0 | 0 |", text)
        self.assertIn("| local.mpi4 | MPI backend on host memory: correctness only | 3 | 2 | 1 | 0 | 1 | 6 |", text)
        # Headline tables: the GPU point only; its median bandwidth time over repeats (10.02 us).
        results = text.split("## Results per collective")[1].split("## Repeatability")[0]
        self.assertIn("| size | local.gpu1 |\n|---|---|\n| 8K | 10.02 |", results.split("time (us)")[1])
        self.assertNotIn("share-gpu", results)
        self.assertNotIn("mpi4", results)
        # The cells behind every headline table and plot hold the GPU point only.
        self.assertEqual({base for (_coll, base, _size) in table_cells(RunData(self.run_dir))}, {"local.gpu1"})
        repeat_table = text.split("## Repeatability")[1].split("##")[0]
        self.assertIn("| local.gpu1 | all_reduce.float.sum.out.8K | 3 | 10.02 |", repeat_table)
        self.assertIn("| 20.00 | ok |", repeat_table, "per-iteration CV stays a column")
        self.assertNotIn("local.mpi4", repeat_table)
        self.assertNotIn("share-gpu", repeat_table)

    def test_single_cases_are_notes_and_a_point_of_spread_cases_fails(self):
        records = []
        for k, time_us in enumerate((100.0, 106.0, 112.0), 1):
            records.append(record(f"local.gpus2.rep{k}", "alltoall.float.none.out.8M", time_us, size=8 << 20))
            records.append(record(f"local.gpus2.rep{k}", "alltoall.float.none.out.16M", (100.0, 100.5, 115.0)[k - 1],
                                  size=16 << 20))
        launches = [{"name": f"local.gpus2.rep{k}", "kind": "local", "nranks": 2, "base_point": "local.gpus2",
                     "repeat": k, "collectives": ["alltoall"], "sizes": [8 << 20, 16 << 20]} for k in (1, 2, 3)]
        text, anomalies = self.write_run(records, launches)
        # Both of the point's two cases spread: their median CV (5.66 + 8.10) / 2 = 6.88% is above max(3%, 5%),
        # the point as a whole is not reproducible. Each case alone is one of two, which chance explains
        # (P(X >= 1 of 2) = 1 - 0.98^2 = 4.0% at the target's rate of 0.02, 1 - 0.995^2 = 1.0% at the gate's
        # 0.005, both above 1e-3): notes under Repeatability, not anomalies.
        self.assertIn("| systematic spread (point not reproducible) | local.gpus2 | median CV 6.88% over its 2 cases "
                      "(limit 5%) |", anomalies)
        self.assertNotIn("alltoall.float.none.out.8M", anomalies)
        self.assertNotIn("alltoall.float.none.out.16M", anomalies)
        repeat = text[text.index("## Repeatability"):]
        self.assertIn("- fail: repeat.systematic_spread (systematic spread (point not reproducible)) at local.gpus2: "
                      "median CV 6.88% over its 2 cases (limit 5%)", repeat)
        self.assertIn("- note: repeat.case_above_gate (case above CV gate, no stable median, within chance) at "
                      "local.gpus2: alltoall.float.none.out.8M: CV 5.66%, robust dispersion 8.39% across repeats; 1 of "
                      "2 cases without a stable median; the healthy noise explains up to 1", repeat)
        self.assertIn("- note: repeat.case_above_target (case above CV target, within chance) at local.gpus2: "
                      "alltoall.float.none.out.16M: CV 8.10%, robust dispersion 0.74% across repeats; 1 of 2 cases "
                      "not host-bound above the CV target", repeat)
        self.assertIn("1 above target (one repeat off), 1 above target, no stable median.", text)
        self.assertTrue(text.startswith("# FAILED (1)\n"), text[:100])
        self.assertIn(repeat_rule_text(3.0), repeat)

    def test_the_rule_text_comes_from_its_constants(self):
        # Each constant set to a value typed nowhere else: the words follow it.
        for name, value, words in (("CASE_TARGET_RATE", 0.0123, "healthy rate of 0.0123 and 0.005 a case"),
                                   ("CASE_GATE_RATE", 0.0071, "healthy rate of 0.02 and 0.0071 a case"),
                                   ("WARN_FALSE_ALARM", 0.0037, "P < 0.0037 is a warning"),
                                   ("FALSE_ALARM", 3.3e-5, "chance explains with P < 3.3e-05"),
                                   ("SPREAD_LIMIT_PCT", 4.4, "max(target, 4.4%)"),
                                   ("SHIFT_LIMIT_PCT", 7.7, "max(7.7%, 1.73 x target)")):
            with mock.patch.object(repeatability, name, value):
                self.assertIn(words, repeat_rule_text(3.0), name)


def p2p_result(test, src, dst, median, counted="one_direction", status="ok", reason=None):
    stats = {"median": median} if median is not None else None
    return {"test": test, "src": src, "dst": dst, "bytes": 1 << 28, "status": status, "reason": reason,
            "bytes_counted": counted, "bandwidth_gbps": stats, "details": {"local_copy": True} if src == dst else {}}


class OneGpuP2P(unittest.TestCase):
    """The one-GPU P2P sentence (render/p2p_local.py): the named test first, else the one-way matrix's diagonal;
    schema 1.0's read + write count halved to bytes copied (H200, 2026-12-02: 4248.7 -> 2124 GB/s)."""

    def test_the_diagonal_when_the_named_tests_are_absent(self):
        document = {"results": [p2p_result("d2d_ce_write_uni", 0, 0, 1900.0), p2p_result("d2d_sm_write_uni", 0, 0, 2100.0),
                                p2p_result("h2d_ce_local_numa", "host", 0, 55.0)]}
        self.assertIn("CE 1,900 GB/s (d2d_ce_write_uni), SM 2,100 GB/s (d2d_sm_write_uni).", local_copy_sentence(document))

    def test_schema_1_0_read_plus_write_is_halved(self):
        document = {"results": [p2p_result("device_local_copy_ce", 0, 0, 4248.7, counted="read_plus_write"),
                                p2p_result("device_local_copy_sm", 0, 0, None, status="error", reason="out of memory")]}
        self.assertIn("CE 2,124 GB/s (device_local_copy_ce), SM - (out of memory).", local_copy_sentence(document))


class ByDesign(unittest.TestCase):
    """rules/by_design.py: only what no run can verify; any other skip stays a finding."""

    def skipped(self, collective, in_place, nranks=4, backend="nccl"):
        return {"status": "skipped", "collective": collective, "in_place": in_place, "nranks": nranks, "backend": backend,
                "reason": "..."}

    def test_cases(self):
        self.assertTrue(unverifiable_by_design(self.skipped("alltoall", True)))
        self.assertTrue(unverifiable_by_design(self.skipped("sendrecv", True)))
        self.assertFalse(unverifiable_by_design(self.skipped("alltoall", False)), "out of place is verifiable")
        self.assertFalse(unverifiable_by_design(self.skipped("alltoall", True, nranks=1)), "one rank: checkable")
        self.assertFalse(unverifiable_by_design(self.skipped("all_reduce", True)), "e.g. a dtype NCCL lacks")
        self.assertFalse(unverifiable_by_design(dict(self.skipped("alltoall", True), status="ok")))
        self.assertTrue(unverifiable_by_design(self.skipped("sendrecv", True, backend="mpi")))
        self.assertTrue(unverifiable_by_design(self.skipped("broadcast", False, backend="mpi")))
        self.assertFalse(unverifiable_by_design(self.skipped("alltoall", True, backend="mpi")), "MPI_IN_PLACE exists")


if __name__ == "__main__":
    unittest.main()
