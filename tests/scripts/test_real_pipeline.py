"""`cclbench baseline`, `report`, `compare` and `smoke` end to end with the real tools wherever they can
run on a CPU machine: the real coll_perf --backend mpi under the real mpirun, and the real topo_map
reading the committed XML fixture (tests/data/topology/rtxpro_2socket.xml, through a two-line wrapper that
adds --xml, since the CLI runs topo_map on the live node). Only p2p_matrix stays a double (it needs GPUs).
Assertions are about what the real tools produced, never a double's constants; summary.csv is checked
against cases.jsonl cell by cell. Rail counters come from a fake sysfs root (coll_perf --sysfs-root) whose
error counter the test grows during the run (rail_counters.py). Skips (exit 77) when the tools are not built."""
import csv
import json
import os
import shutil
import stat
import unittest
import xml.etree.ElementTree as ElementTree

from helpers import (BINARY_DIR, FAKE_BIN, SOURCE_DIR, TempDirTest, main_for_ctest, read_jsonl, read_text, run_cli,
                     validate)

from cclbench_lib.model.records import with_defaults
from rail_counters import BASE, ERROR_COUNTER, GrowingErrorCounter, build_tree

APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map") if not os.access(os.path.join(APPS, tool), os.X_OK)]
if not shutil.which("mpirun"):
    MISSING.append("mpirun")
SKIP_REASON = f"not built or not installed: {', '.join(MISSING)} (looked in {APPS})" if MISSING else None
XML = os.path.join(SOURCE_DIR, "tests", "data", "topology", "rtxpro_2socket.xml")
SYSFS = os.path.join(SOURCE_DIR, "tests", "data", "topology", "sysfs")
SMALL = ["-b", "8K", "-e", "16K", "-n", "3", "-w", "1", "--repeat", "1", "--coll", "all_reduce,alltoall", "--timeout", "300",
         "--launch-timeout", "600"]
ONE_SIZE = ["-b", "8K", "-e", "8K", "-n", "3", "-w", "1", "--repeat", "1", "--coll", "all_reduce", "--timeout", "300",
            "--launch-timeout", "600"]


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class RealPipeline(TempDirTest):
    def setUp(self):
        super().setUp()
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)
        os.symlink(os.path.join(APPS, "coll_perf"), os.path.join(self.bin, "coll_perf"))
        os.symlink(os.path.join(FAKE_BIN, "p2p_matrix"), os.path.join(self.bin, "p2p_matrix"))
        wrapper = os.path.join(self.bin, "topo_map")
        with open(wrapper, "w") as handle:
            handle.write(f"#!/bin/sh\nexec '{os.path.join(APPS, 'topo_map')}' --xml '{XML}' --sysfs-root '{SYSFS}' \"$@\"\n")
        os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)

    def args(self, run_id):
        return ["--bin-dir", self.bin, "--results", self.results, "--run-id", run_id]

    def baseline(self, run_id, extra=(), expect=0, what=SMALL):
        result = run_cli(["baseline"] + what + list(extra) + self.args(run_id), timeout=1200)
        run = os.path.join(self.results, run_id)
        log = os.path.join(run, "run.log")
        self.assertEqual(result.returncode, expect, result.stderr + (read_text(log)[-4000:] if os.path.exists(log) else ""))
        return run

    def rail_ports(self, record):
        return {port["rail"]: port for node in record["evidence"]["rails"]["nodes"] for port in node.get("ib_ports", [])}

    def test_baseline_report_compare(self):
        # Rail counters from a fake sysfs root whose error counter never grows: no rail.errors (the control of
        # test_rail_error_increments_fail_the_run, through the same FIFO).
        sysfs = build_tree(os.path.join(self.tmp, "sys"))
        with GrowingErrorCounter(sysfs, "mlx5_3", 0, point="local.mpi4") as counter:
            run = self.baseline("A", ["--sysfs-root", sysfs])
        self.assertEqual(counter.errors, [])
        self.assertIn(("local.mpi4", BASE), counter.served, "coll_perf read the counter")
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        for record in records:
            ports = self.rail_ports(record)
            self.assertEqual(sorted(ports), ["mlx5_0:1", "mlx5_3:1"], record["case_id"])
            self.assertEqual([port["error_increments"] for port in ports.values()], [{}, {}], record["case_id"])
        with open(os.path.join(run, "verdict.json")) as handle:
            verdict = json.load(handle)
        self.assertNotIn("rail.errors", [reason["code"] for reason in verdict["reasons"]])
        measured = [r for r in records if r["point"] == "local.mpi4"]
        self.assertEqual(len(measured), 2 * 2 * 2, "all_reduce, alltoall x 8K, 16K x in/out")
        self.assertTrue(all(r["status"] == "ok" and r["wrong"] == 0 and r["backend"] == "mpi" and r["nranks"] == 4
                            for r in measured))
        self.assertTrue(all(r["bandwidth_from"] == "time_us.mean" and r["gated_time_us"] is None for r in measured),
                        "the MPI backend has no gated pass")
        ok, errors = validate("case_record.schema.json", os.path.join(run, "cases.jsonl"))
        self.assertTrue(ok, errors)
        ok, errors = validate("coll_perf.schema.json", os.path.join(run, "raw", "local.mpi4.json"))
        self.assertTrue(ok, errors)
        with open(os.path.join(run, "raw", "local.mpi4.json")) as handle:
            raw = json.load(handle)
        self.assertEqual([c["case_id"] for c in raw["cases"]], [r["case_id"] for r in measured])

        # summary.csv against cases.jsonl, cell by cell; time columns named as in coll_perf's --csv.
        with open(os.path.join(run, "summary.csv"), newline="") as handle:
            rows = list(csv.DictReader(handle))
        self.assertIn("time_us_mean", rows[0])
        # Read as every reader does: a field a lean record leaves out (schema 1.3) is its default.
        by_key = {(r["point"], r["case_id"]): with_defaults(r) for r in records}
        self.assertEqual(len(rows), len(by_key))
        for row in rows:
            record = by_key[(row["point"], row["case_id"])]
            for column, cell in row.items():
                value = record["time_us"].get(column[len("time_us_"):]) if column.startswith("time_us_") else record.get(column)
                where = f"{row['point']} {row['case_id']} {column}"
                if value is None:
                    self.assertEqual(cell, "", where)
                elif isinstance(value, bool):
                    self.assertEqual(cell, str(value).lower(), where)
                elif isinstance(value, (int, float)):
                    self.assertAlmostEqual(float(cell), float(value), delta=abs(value) * 1e-12, msg=where)
                else:
                    self.assertEqual(cell, str(value), where)

        # The topology the real topo_map read from the fixture, validated, in the report.
        topology = [name for name in os.listdir(os.path.join(run, "topology")) if name.endswith(".json")]
        self.assertEqual(len(topology), 1)
        ok, errors = validate("topology.schema.json", os.path.join(run, "topology", topology[0]))
        self.assertTrue(ok, errors)
        report = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        # rtxpro_2socket.xml: GPU0-3 under one PCIe switch (PIX), GPU4-7 on the other socket (SYS).
        self.assertIn("| GPU0 | X | PIX | PIX | PIX | SYS | SYS | SYS | SYS |", text)
        # Host-memory times are correctness only (no headline table): 1 repeat, 8 cases, all ok, 0 wrong.
        self.assertIn("| local.mpi4 | MPI backend on host memory: correctness only | 1 | 8 | 8 | 0 | 0 | 0 |", text)
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        for kind in ("launch not complete", "wrong data", "case not ok", "missing cases", "unreadable result"):
            self.assertNotIn(f"| {kind} |", anomalies)

        same = run_cli(["compare", run, run])
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertIn("0 regression(s)", same.stdout)
        self.assertIn("8 correctness only", same.stdout)

    def test_rail_error_increments_fail_the_run(self):
        """The user's bring-up rule, zero error increments on both rails, end to end: an HCA error counter grows by 7
        inside the first case of the measured point while the real coll_perf runs; the growth is in that record's
        evidence, in report.md's rails section and in verdict.json as rail.errors naming the rail and the counter,
        and the run exits 1."""
        sysfs = build_tree(os.path.join(self.tmp, "sys"))
        with GrowingErrorCounter(sysfs, "mlx5_3", 7, point="local.mpi4") as counter:
            run = self.baseline("E", ["--sysfs-root", sysfs], expect=1, what=ONE_SIZE)
        self.assertEqual(counter.errors, [])
        served = [value for point, value in counter.served if point == "local.mpi4"]
        self.assertEqual(served, [BASE] + [BASE + 7] * (len(served) - 1), counter.served)
        self.assertTrue(all(value == BASE for point, value in counter.served if point == "sanity"), counter.served)

        records = [r for r in read_jsonl(os.path.join(run, "cases.jsonl")) if r["point"] == "local.mpi4"]
        self.assertEqual([r["case_id"] for r in records], ["all_reduce.float.sum.out.8K", "all_reduce.float.sum.in.8K"])
        first, second = (self.rail_ports(record) for record in records)
        self.assertEqual(first["mlx5_3:1"]["error_increments"], {ERROR_COUNTER: 7}, "grown inside the first case")
        self.assertEqual(first["mlx5_0:1"]["error_increments"], {})
        self.assertEqual([port["error_increments"] for port in second.values()], [{}, {}], "and in no other")

        text = read_text(os.path.join(run, "report.md"))  # written by baseline
        rails = text[text.index("### Rails"):text.index("### Rank bindings")]
        row = [line for line in rails.splitlines() if line.startswith("| local.mpi4 |")]
        self.assertEqual(len(row), 1, rails)
        self.assertTrue(row[0].endswith(f"| mlx5_3:1: 7 error counter increment(s) ({ERROR_COUNTER} +7) |"), row[0])

        with open(os.path.join(run, "verdict.json")) as handle:
            verdict = json.load(handle)
        self.assertEqual(verdict["overall"], "FAILED")
        failing = [reason for reason in verdict["reasons"] if reason["severity"] == "fail"]
        self.assertEqual([reason["code"] for reason in failing], ["rail.errors"], failing)
        reason = failing[0]
        self.assertEqual((reason["point"], reason["subject"], reason["check"]), ("local.mpi4", "mlx5_3:1", "rails"))
        self.assertEqual(reason["numbers"], {"count": 7})
        self.assertIn(f"mlx5_3:1: 7 error counter increment(s) ({ERROR_COUNTER} +7)", reason["text"])

    def test_smoke(self):
        result = run_cli(["smoke", "--time-limit", "900"] + self.args("S"), timeout=1200)
        run = os.path.join(self.results, "S")
        log = os.path.join(run, "run.log")
        self.assertEqual(result.returncode, 0, result.stderr + (read_text(log)[-4000:] if os.path.exists(log) else ""))
        suite = ElementTree.parse(os.path.join(run, "smoke.junit.xml")).getroot().find("testsuite")
        cases = {case.get("name"): case for case in suite.findall("testcase")}
        self.assertEqual((suite.get("failures"), suite.get("skipped")), ("0", "4"))
        for name in ("topology", "collectives_1rank_mpi", "collectives_4rank_mpi"):
            self.assertIsNone(cases[name].find("failure"), name)
            self.assertIsNone(cases[name].find("skipped"), name)
        for name in ("smoke.copy", "smoke.collective", "smoke.graph", "local.share-gpu4"):
            self.assertIn("GPU", cases[name].find("skipped").get("message"), name)
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        self.assertEqual({r["nranks"] for r in records}, {1, 4})
        self.assertTrue(records and all(r["status"] == "ok" and r["wrong"] == 0 for r in records))
        ok, errors = validate("case_record.schema.json", os.path.join(run, "cases.jsonl"))
        self.assertTrue(ok, errors)
        ok, errors = validate("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
        self.assertTrue(ok, errors)


if __name__ == "__main__":
    main_for_ctest()
