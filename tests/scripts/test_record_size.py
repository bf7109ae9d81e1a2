"""Lean records: coll_perf -J stays <= 1 KB per case at 1 rank, a 16-rank run <= 1 MB per
100 cases, per-iteration samples go to the --samples side file that records name, constant text is
once per document, fields at their default are left out (schema 1.3) and read back as that default.
Real coll_perf, MPI backend, under mpirun --oversubscribe; skips (77) when coll_perf or mpirun is
missing (the reader tests at the end run without them)."""
import csv
import json
import os
import shutil
import subprocess
import unittest

from helpers import BINARY_DIR, SCHEMA_DIR, TempDirTest, main_for_ctest, read_jsonl, validate

from cclbench_lib.model import records

COLL_PERF = os.path.join(BINARY_DIR, "bench", "apps", "coll_perf")
MPIRUN = shutil.which("mpirun")
SKIP_REASON = None
if not os.access(COLL_PERF, os.X_OK):
    SKIP_REASON = f"coll_perf is not built ({COLL_PERF})"
elif not MPIRUN:
    SKIP_REASON = "mpirun is not installed"

# The record-size budgets set when records were made lean, not derived from today's output.
BYTES_PER_CASE_ONE_RANK = 1024
BYTES_PER_100_CASES_16_RANKS = 1_000_000


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class LeanRecords(TempDirTest):
    def coll_perf(self, ranks, *args):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        command = [MPIRUN, "--oversubscribe", "-np", str(ranks), COLL_PERF, "--backend", "mpi", "--quiet"] + list(args)
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])

    def test_one_rank_json_per_case_and_samples_side_file(self):
        out = os.path.join(self.tmp, "one.json")
        samples = os.path.join(self.tmp, "one.samples.jsonl")
        # -n 200: samples must not grow the records.
        self.coll_perf(1, "--coll", "all", "-b", "1K", "-e", "1M", "-f", "4", "-n", "200", "-w", "1",
                       "-J", out, "--jsonl", out + "l", "--samples", samples)
        with open(out, encoding="utf-8") as handle:
            document = json.load(handle)
        cases = document["cases"]
        self.assertGreaterEqual(len(cases), 60)
        per_case = os.path.getsize(out) / len(cases)
        self.assertLessEqual(per_case, BYTES_PER_CASE_ONE_RANK, f"{per_case:.0f} bytes per case in -J")
        # Constant text once: the rails note is in the document, in no record.
        self.assertIn("all traffic on the port", document["notes"]["rails"])
        self.assertEqual(open(out, encoding="utf-8").read().count("all traffic on the port"), 1)
        for case in cases:
            self.assertNotIn("samples_us", case)
            self.assertEqual(case["samples_file"], "one.samples.jsonl", "named relative to the record, next to it")
            for node in records.with_defaults(case)["evidence"]["rails"]["nodes"]:
                for netdev in node["netdevs"]:
                    self.assertNotEqual((netdev["tx_bytes"], netdev["rx_bytes"]), (0, 0), "zero-delta netdev listed")
        lines = read_jsonl(samples)
        self.assertEqual([line["case_id"] for line in lines], [case["case_id"] for case in cases])
        measured = [line for line, case in zip(lines, cases) if case["status"] == "ok"]
        self.assertTrue(measured)
        for line, case in zip(lines, cases):
            if case["status"] == "ok":
                self.assertEqual(len(line["samples_us"]), 200)
                self.assertAlmostEqual(max(line["samples_us"]), case["time_us"]["max"], delta=1e-6 * case["time_us"]["max"] + 1e-9)
        for schema, path in (("coll_perf.schema.json", out), ("case_record.schema.json", out + "l")):
            ok, errors = validate(schema, path)
            self.assertTrue(ok, f"{schema}: {errors}")

    def test_defaults_are_left_out_of_records_and_filled_in_the_csv(self):
        out = os.path.join(self.tmp, "d.json")
        self.coll_perf(1, "--coll", "all_reduce,broadcast", "-b", "1K", "-e", "4K", "-f", "4", "-n", "3", "-w", "1",
                       "-J", out, "--csv", os.path.join(self.tmp, "d.csv"))
        with open(out, encoding="utf-8") as handle:
            cases = json.load(handle)["cases"]
        with open(os.path.join(self.tmp, "d.csv"), newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        self.assertEqual(len(rows), len(cases))
        # The defaults as the schema states them (its "default" annotations), and how --csv writes them.
        def cell(value):
            return "" if value is None else ("true" if value else "false") if isinstance(value, bool) else str(value)

        for case, row in zip(cases, rows):
            for key, default in SCHEMA_DEFAULTS.items():
                if key == "root" and case["collective"] == "broadcast":
                    self.assertEqual(case[key], 0, "a rooted collective writes its root")
                    continue
                self.assertNotIn(key, case, f"{case['case_id']}: {key} holds its default {default!r} and is written")
                if key != "check_iterations":  # never a CSV column
                    self.assertEqual(row[key], cell(default), f"{case['case_id']}: CSV {key}")
            self.assertNotIn("per_rank", case, "one rank: per_rank repeats time_us.mean and iterations")
            for node in case["evidence"]["rails"]["nodes"]:
                self.assertFalse(set(records.RAIL_NODE_ARRAYS) & {k for k, v in node.items() if v == []}, node)

    def test_sixteen_ranks_per_hundred_cases(self):
        out = os.path.join(self.tmp, "sixteen.json")
        self.coll_perf(16, "-b", "1K", "-e", "16K", "-f", "2", "-n", "2", "-w", "1", "-J", out)
        with open(out, encoding="utf-8") as handle:
            cases = json.load(handle)["cases"]
        self.assertGreaterEqual(len(cases), 40)
        self.assertTrue(all(case["nranks"] == 16 for case in cases))
        per_hundred = os.path.getsize(out) / len(cases) * 100
        self.assertLessEqual(per_hundred, BYTES_PER_100_CASES_16_RANKS, f"{per_hundred:.0f} bytes per 100 cases")
        ok, errors = validate("coll_perf.schema.json", out)
        self.assertTrue(ok, errors)


def schema_defaults():
    with open(os.path.join(SCHEMA_DIR, "case_record.schema.json"), encoding="utf-8") as handle:
        schema = json.load(handle)
    return {key: spec["default"] for key, spec in schema["properties"].items() if "default" in spec}


SCHEMA_DEFAULTS = schema_defaults()

# A one-rank 1.2-style record with every field explicit; its lean 1.3 form is built by hand below.
EXPLICIT = {
    "schema_version": "1.2.0", "case_id": "all_reduce.float.sum.out.1K", "point": "p", "collective": "all_reduce",
    "backend": "mpi", "nranks": 1, "dtype": "float", "op": "sum", "root": None, "in_place": False,
    "requested_bytes": 1024, "bytes": 1024, "count": 256, "send_bytes": 1024, "recv_bytes": 1024, "iterations": 20,
    "warmup": 1, "check_iterations": 1,
    "time_us": {"mean": 0.28, "min": 0.17, "p50": 0.22, "p95": 0.59, "p99": 0.81, "max": 0.81, "cv_pct": 55.1},
    "batch_time_us": 0.36, "gated_time_us": None, "bandwidth_from": "time_us.mean", "algbw_gbps": 3.66,
    "busbw_gbps": 0.0, "wrong": 0, "status": "ok", "reason": None, "emulated": False,
    "per_rank": {"mean_us": [0.28], "slowest_iterations": [20]}, "samples_from": "host_clock",
    "graph_launches": 0, "ops_per_launch": 1, "registration": "none", "unalign_elements": 0, "cta_policy": None,
    "cycle": 0,
    "evidence": {"rails": {"flags": [], "nodes": [
        {"host": "vm", "flags": [], "ib_ports": [], "netdevs": [], "netdevs_zero_omitted": 3,
         "ib_reason": "no /sys/class/infiniband", "rails_total_bytes": None}]}}}
LEAN = {
    "schema_version": "1.3.0", "case_id": "all_reduce.float.sum.out.1K", "point": "p", "collective": "all_reduce",
    "backend": "mpi", "nranks": 1, "dtype": "float", "op": "sum", "in_place": False,
    "requested_bytes": 1024, "bytes": 1024, "count": 256, "send_bytes": 1024, "recv_bytes": 1024, "iterations": 20,
    "warmup": 1,
    "time_us": {"mean": 0.28, "min": 0.17, "p50": 0.22, "p95": 0.59, "p99": 0.81, "max": 0.81, "cv_pct": 55.1},
    "batch_time_us": 0.36, "gated_time_us": None, "bandwidth_from": "time_us.mean", "algbw_gbps": 3.66,
    "busbw_gbps": 0.0, "wrong": 0, "status": "ok", "reason": None, "samples_from": "host_clock",
    "evidence": {"rails": {"nodes": [
        {"host": "vm", "netdevs_zero_omitted": 3, "ib_reason": "no /sys/class/infiniband", "rails_total_bytes": None}]}}}


class ReadersTreatAbsentAsDefault(TempDirTest):
    """No coll_perf needed: model/records.py, the one place readers get their defaults from."""

    def test_reader_defaults_are_the_schema_defaults(self):
        self.assertEqual(records.RECORD_DEFAULTS, SCHEMA_DEFAULTS)

    def test_lean_and_explicit_records_read_the_same(self):
        for name, record in (("explicit", EXPLICIT), ("lean", LEAN)):
            with open(os.path.join(self.tmp, name + ".jsonl"), "w", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        explicit, bad_explicit = records.load_cases(os.path.join(self.tmp, "explicit.jsonl"), strict=True)
        lean, bad_lean = records.load_cases(os.path.join(self.tmp, "lean.jsonl"), strict=True)
        self.assertEqual((bad_explicit, bad_lean), ([], []))
        explicit[0].pop("schema_version")
        lean[0].pop("schema_version")
        self.assertEqual(lean, explicit)
        self.assertEqual(records.measurement_mode(lean[0]), "mpi x1 eager")
        for name in ("explicit", "lean"):
            ok, errors = validate("case_record.schema.json", os.path.join(self.tmp, name + ".jsonl"))
            self.assertTrue(ok, f"{name}: {errors}")

    def test_a_written_field_wins_over_its_default(self):
        graph = dict(LEAN, graph_launches=3, emulated=True, nranks=2,
                     per_rank={"mean_us": [0.28, 0.2], "slowest_iterations": [20, 0]})
        full = records.with_defaults(graph)
        self.assertEqual((full["graph_launches"], full["emulated"], full["ops_per_launch"]), (3, True, 1))
        self.assertEqual(full["per_rank"]["slowest_iterations"], [20, 0])
        self.assertEqual(records.measurement_mode(full), "mpi x2 cuda-graph emulated")
        self.assertNotIn("graph_launches", LEAN, "with_defaults must not change its input")
        untimed = records.with_defaults(dict(LEAN, time_us=None, status="skipped", reason="MPI has no bfloat16"))
        self.assertIsNone(untimed["per_rank"], "an untimed one-rank case has no per_rank")


if __name__ == "__main__":
    main_for_ctest()
