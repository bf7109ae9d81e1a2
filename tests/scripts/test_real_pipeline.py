"""`cclbench baseline`, `report`, `compare` and `smoke` end to end with the real tools wherever they can
run on a CPU machine: the real coll_perf --backend mpi under the real mpirun, and the real topo_map
reading the committed XML fixture (tests/data/topology/rtxpro_2socket.xml, through a two-line wrapper that
adds --xml, since the CLI runs topo_map on the live node). Only p2p_matrix stays a double (it needs GPUs).
Assertions are about what the real tools produced, never a double's constants; summary.csv is checked
against cases.jsonl cell by cell. Skips (exit 77) when the tools are not built."""
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

APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map") if not os.access(os.path.join(APPS, tool), os.X_OK)]
if not shutil.which("mpirun"):
    MISSING.append("mpirun")
SKIP_REASON = f"not built or not installed: {', '.join(MISSING)} (looked in {APPS})" if MISSING else None
XML = os.path.join(SOURCE_DIR, "tests", "data", "topology", "rtxpro_2socket.xml")
SYSFS = os.path.join(SOURCE_DIR, "tests", "data", "topology", "sysfs")
SMALL = ["-b", "8K", "-e", "16K", "-n", "3", "-w", "1", "--repeat", "1", "--coll", "all_reduce,alltoall", "--timeout", "300",
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

    def baseline(self, run_id):
        result = run_cli(["baseline"] + SMALL + self.args(run_id), timeout=1200)
        run = os.path.join(self.results, run_id)
        log = os.path.join(run, "run.log")
        self.assertEqual(result.returncode, 0, result.stderr + (read_text(log)[-4000:] if os.path.exists(log) else ""))
        return run

    def test_baseline_report_compare(self):
        run = self.baseline("A")
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
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

    def test_smoke(self):
        result = run_cli(["smoke", "--time-limit", "900"] + self.args("S"), timeout=1200)
        run = os.path.join(self.results, "S")
        log = os.path.join(run, "run.log")
        self.assertEqual(result.returncode, 0, result.stderr + (read_text(log)[-4000:] if os.path.exists(log) else ""))
        suite = ElementTree.parse(os.path.join(run, "smoke.junit.xml")).getroot().find("testsuite")
        cases = {case.get("name"): case for case in suite.findall("testcase")}
        self.assertEqual((suite.get("failures"), suite.get("skipped")), ("0", "3"))
        for name in ("topology", "collectives_1rank_mpi", "collectives_4rank_mpi"):
            self.assertIsNone(cases[name].find("failure"), name)
            self.assertIsNone(cases[name].find("skipped"), name)
        for name in ("p2p_matrix", "collectives_1rank_nccl", "collectives_4rank_share_gpu"):
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
