"""The test doubles in fake_bin/ against the real tools: every output of each fake validates against
the current schema, and has the keys (and, for CSV, the header) of the real tool's output for the same
command. The real coll_perf --backend mpi runs under the real mpirun; the real topo_map reads the XML
fixture the fake's model was captured from; the real nccl_evidence parses a committed NCCL log. The
fake p2p_matrix has no real counterpart here (it needs GPUs): it is held to the schema's required keys.
Skips (exit 77) when the real tools are not built."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import unittest

from helpers import BINARY_DIR, FAKE_BIN, SCHEMA_DIR, SOURCE_DIR, TempDirTest, main_for_ctest, read_jsonl, validate

from cclbench_lib.model.records import with_defaults
from rail_counters import ERROR_COUNTER, GrowingErrorCounter, build_tree

APPS = os.path.join(BINARY_DIR, "bench", "apps")
MISSING = [tool for tool in ("coll_perf", "topo_map", "nccl_evidence") if not os.access(os.path.join(APPS, tool), os.X_OK)]
MPIRUN = shutil.which("mpirun")
if not MPIRUN:
    MISSING.append("mpirun")
SKIP_REASON = f"not built or not installed: {', '.join(MISSING)} (looked in {APPS})" if MISSING else None
TOPOLOGY_XML = os.path.join(SOURCE_DIR, "tests", "data", "topology", "rtxpro_2socket.xml")
SYSFS = os.path.join(SOURCE_DIR, "tests", "data", "topology", "sysfs")
EVIDENCE_LOGS = os.path.join(SOURCE_DIR, "tests", "data", "evidence", "logs", "ib_gdr_two_rails")
COLL_ARGS = ["--backend", "mpi", "-b", "8K", "-e", "16K", "-n", "3", "-w", "1", "--coll", "all_reduce,alltoall",
             "--quiet"]


# coll_perf --csv's columns in order, written out from the README ("What the numbers mean": the record's fields,
# time_us.<stat> flattened to time_us_<stat>) rather than taken from bench/core/reporters.cpp.
CSV_COLUMNS = ["point", "case_id", "collective", "backend", "nranks", "dtype", "op", "root", "in_place", "bytes", "count",
               "requested_bytes", "iterations", "warmup", "time_us_mean", "time_us_min", "time_us_p50", "time_us_p95",
               "time_us_p99", "time_us_max", "time_us_cv_pct", "batch_time_us", "algbw_gbps", "busbw_gbps", "wrong",
               "status", "reason", "emulated", "gated_time_us", "bandwidth_from", "samples_from", "graph_launches",
               "ops_per_launch", "registration", "unalign_elements", "cta_policy", "cycle", "busbw_reason"]


def nearest_rank(sorted_samples, percent):
    """The README's percentile: sorted[ceil(p/100 x n) - 1] (nearest rank, as nccl-tests' -I), in integers."""
    rank = -(-percent * len(sorted_samples) // 100)
    return sorted_samples[max(rank, 1) - 1]


def statistics_of(samples):
    """time_us's fields computed here from the per-iteration samples, by the README's definitions."""
    ordered = sorted(samples)
    n = len(ordered)
    mean = sum(ordered) / n
    spread = math.sqrt(sum((x - mean) ** 2 for x in ordered) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "min": ordered[0], "max": ordered[-1], "p50": nearest_rank(ordered, 50),
            "p95": nearest_rank(ordered, 95), "p99": nearest_rank(ordered, 99), "cv_pct": spread / mean * 100.0}


def reasonless(keys):
    """Keys without the *_reason/*_note companions: which of value-or-reason a document carries is data."""
    return {key for key in keys if not key.endswith(("_reason", "_note"))}


def mpirun_env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_mpi_yield_when_idle="1")


@unittest.skipIf(SKIP_REASON, SKIP_REASON)
class FakesMatchTheRealTools(TempDirTest):
    @classmethod
    def setUpClass(cls):
        """One real coll_perf run (2 ranks, MPI backend) shared by the coll_perf checks."""
        import tempfile
        cls.real_dir = tempfile.mkdtemp(prefix="cclbench-real-")
        outputs = cls.outputs(cls.real_dir)
        result = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none",
                                 os.path.join(APPS, "coll_perf")] + COLL_ARGS + outputs,
                                capture_output=True, text=True, env=mpirun_env(), timeout=600)
        if result.returncode != 0:
            raise AssertionError(f"real coll_perf exit {result.returncode}: {result.stderr[-3000:]}")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.real_dir, ignore_errors=True)

    @staticmethod
    def outputs(folder):
        return ["-J", os.path.join(folder, "r.json"), "--jsonl", os.path.join(folder, "r.jsonl"),
                "--csv", os.path.join(folder, "r.csv")]

    def run_fake(self, name, args, env=None):
        full_env = dict(os.environ, OMPI_COMM_WORLD_SIZE="2")
        full_env.update(env or {})
        result = subprocess.run([sys.executable, os.path.join(FAKE_BIN, name)] + args, capture_output=True, text=True,
                                env=full_env, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def load(self, folder):
        with open(os.path.join(folder, "r.json")) as handle:
            document = json.load(handle)
        with open(os.path.join(folder, "r.csv"), newline="") as handle:
            rows = list(csv.reader(handle))
        return document, read_jsonl(os.path.join(folder, "r.jsonl")), rows

    def test_fake_coll_perf_mpi_backend_has_the_real_keys_and_validates(self):
        self.run_fake("coll_perf", COLL_ARGS + self.outputs(self.tmp))
        real, real_lines, real_csv = self.load(self.real_dir)
        fake, fake_lines, fake_csv = self.load(self.tmp)
        for folder in (self.real_dir, self.tmp):
            for schema, name in (("coll_perf.schema.json", "r.json"), ("case_record.schema.json", "r.jsonl")):
                ok, errors = validate(schema, os.path.join(folder, name))
                self.assertTrue(ok, f"{folder}/{name}: {errors}")
        self.assertEqual(set(fake), set(real), "-J top-level keys")
        self.assertEqual(fake["schema_version"], real["schema_version"])
        self.assertEqual(reasonless(fake["manifest"]), reasonless(real["manifest"]), "manifest keys")
        self.assertEqual(reasonless(fake["manifest"]["versions"]), reasonless(real["manifest"]["versions"]))
        self.assertEqual(reasonless(fake["bindings"][0]), reasonless(real["bindings"][0]), "binding record keys")
        self.assertEqual(len(fake["cases"]), len(real["cases"]))
        for fake_case, real_case in zip(fake["cases"], real["cases"]):
            self.assertEqual(set(fake_case), set(real_case), real_case["case_id"])
            self.assertEqual(set(fake_case["time_us"]), set(real_case["time_us"]))
            for key in ("case_id", "schema_version", "point", "bytes", "count", "send_bytes", "recv_bytes",
                        "requested_bytes", "gated_time_us", "bandwidth_from", "nranks", "backend"):
                self.assertEqual(fake_case[key], real_case[key], f"{real_case['case_id']}: {key}")
        self.assertEqual([set(line) for line in fake_lines], [set(line) for line in real_lines], "JSONL keys")
        self.assertEqual(fake_csv[0], real_csv[0], "CSV header")
        self.assertEqual([row[1] for row in fake_csv[1:]], [row[1] for row in real_csv[1:]], "CSV case ids")

    def test_fake_netdev_rails_have_the_real_shape_and_validate(self):
        """Schema 1.5: --netdevs rows (source "netdev") as the real coll_perf writes them over loopback; a named
        interface without counters is null with a reason in both."""
        args = ["--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1", "--coll", "all_reduce", "--quiet",
                "--netdevs", "lo,nosuch9"]
        real_dir = os.path.join(self.tmp, "real")
        fake_dir = os.path.join(self.tmp, "fake")
        os.makedirs(real_dir)
        os.makedirs(fake_dir)
        result = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,tcp",
                                 "--mca", "btl_tcp_if_include", "lo", os.path.join(APPS, "coll_perf")] + args +
                                self.outputs(real_dir), capture_output=True, text=True, env=mpirun_env(), timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.run_fake("coll_perf", args + self.outputs(fake_dir), env={"FAKE_COLL_NETDEV_RAILS": "lo=1000"})
        documents = []
        for folder in (real_dir, fake_dir):
            for schema, name in (("coll_perf.schema.json", "r.json"), ("case_record.schema.json", "r.jsonl")):
                ok, errors = validate(schema, os.path.join(folder, name))
                self.assertTrue(ok, f"{folder}/{name}: {errors}")
            documents.append(self.load(folder)[0])
        real, fake = documents
        self.assertEqual(fake["rails_options"], real["rails_options"])
        real_node = with_defaults(real["cases"][0])["evidence"]["rails"]["nodes"][0]
        fake_node = with_defaults(fake["cases"][0])["evidence"]["rails"]["nodes"][0]
        for key in ("netdev_rails_from", "netdev_rails_total_bytes"):
            self.assertEqual(fake_node[key], real_node[key], key)
        self.assertEqual([row["rail"] for row in fake_node["netdev_rails"]], ["lo", "nosuch9"])
        for fake_row, real_row in zip(fake_node["netdev_rails"], real_node["netdev_rails"]):
            self.assertEqual(set(fake_row), set(real_row))
            for key in ("source", "rail", "netdev", "share"):
                self.assertEqual(fake_row[key], real_row[key], key)
        self.assertIsNone(real_node["netdev_rails"][1]["total_bytes"])
        self.assertEqual(fake_node["netdev_rails"][1]["reason"], real_node["netdev_rails"][1]["reason"])

    def test_fake_rail_error_increments_have_the_real_shape(self):
        """FAKE_COLL_RAIL_ERRORS against the real coll_perf reading a fake sysfs root whose error counter grows by 7
        inside the first case (tests/scripts/rail_counters.py): the same evidence.rails keys at every level, the
        same error_increments, totals and flags."""
        args = ["--backend", "mpi", "-b", "8K", "-e", "8K", "-n", "2", "-w", "0", "--coll", "all_reduce", "--quiet"]
        real_dir, fake_dir = os.path.join(self.tmp, "real"), os.path.join(self.tmp, "fake")
        os.makedirs(real_dir)
        os.makedirs(fake_dir)
        sysfs = build_tree(os.path.join(self.tmp, "sys"))
        with GrowingErrorCounter(sysfs, "mlx5_3", 7) as counter:
            result = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none", os.path.join(APPS, "coll_perf")]
                                    + args + ["--sysfs-root", sysfs] + self.outputs(real_dir),
                                    capture_output=True, text=True, env=mpirun_env(), timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(counter.errors, [])
        # The bytes the fake sysfs counters hold still (4096 words x 4 bytes each way, 0 moved).
        self.run_fake("coll_perf", args + ["--sysfs-root", sysfs] + self.outputs(fake_dir),
                      env={"FAKE_COLL_RAILS": "mlx5_0:1=0,mlx5_3:1=0", "FAKE_COLL_RAIL_ERRORS": f"mlx5_3:1:{ERROR_COUNTER}=7"})
        for folder in (real_dir, fake_dir):
            ok, errors = validate("case_record.schema.json", os.path.join(folder, "r.jsonl"))
            self.assertTrue(ok, f"{folder}: {errors}")
        real = [with_defaults(line)["evidence"]["rails"] for line in read_jsonl(os.path.join(real_dir, "r.jsonl"))][0]
        fake = [with_defaults(line)["evidence"]["rails"] for line in read_jsonl(os.path.join(fake_dir, "r.jsonl"))][0]
        self.assertEqual(set(fake), set(real), "evidence.rails keys")
        self.assertEqual(fake["flags"], real["flags"])
        self.assertEqual(len(fake["nodes"]), len(real["nodes"]))
        real_node, fake_node = real["nodes"][0], fake["nodes"][0]
        self.assertEqual(set(fake_node), set(real_node), "node keys")
        for key in ("host", "error_increments_total", "flags"):
            self.assertEqual(fake_node[key], real_node[key], key)
        self.assertEqual(real_node["error_increments_total"], 7)
        self.assertEqual([port["rail"] for port in fake_node["ib_ports"]], [port["rail"] for port in real_node["ib_ports"]])
        for fake_port, real_port in zip(fake_node["ib_ports"], real_node["ib_ports"]):
            self.assertEqual(set(fake_port), set(real_port), real_port["rail"])
            for key in ("source", "hca", "port", "error_increments", "total_bytes"):
                self.assertEqual(fake_port[key], real_port[key], f"{real_port['rail']} {key}")
        self.assertEqual(real_node["ib_ports"][1]["error_increments"], {ERROR_COUNTER: 7})

    def test_real_coll_perf_time_columns_are_the_statistics_of_its_samples(self):
        """Every time column of coll_perf --csv and --jsonl means what its name says: computed here from the
        per-iteration times that --samples writes (mean, min, max, nearest-rank p50/p95/p99, CV with n - 1), and
        compared by column name; the CSV header is the documented column list, in order. 200 iterations make
        p50 < p95 < p99 < max distinct ranks (190th, 198th of 200), so a swapped pair of columns cannot agree."""
        folder = os.path.join(self.tmp, "samples")
        os.makedirs(folder)
        args = ["--backend", "mpi", "-b", "8K", "-e", "16K", "-f", "2", "-n", "200", "-w", "1", "--coll",
                "all_reduce,alltoall", "--quiet", "--samples", os.path.join(folder, "r.samples.jsonl")]
        result = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", "--bind-to", "none", os.path.join(APPS, "coll_perf")]
                                + args + self.outputs(folder), capture_output=True, text=True, env=mpirun_env(), timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        samples = {line["case_id"]: line["samples_us"] for line in read_jsonl(os.path.join(folder, "r.samples.jsonl"))}
        records = read_jsonl(os.path.join(folder, "r.jsonl"))
        _document, _lines, rows = self.load(folder)
        self.assertEqual(rows[0], CSV_COLUMNS, "CSV header: the documented columns in order")
        with open(os.path.join(SCHEMA_DIR, "case_record.schema.json")) as handle:
            time_fields = json.load(handle)["properties"]["time_us"]["oneOf"][1]["properties"]
        self.assertEqual({c[len("time_us_"):] for c in CSV_COLUMNS if c.startswith("time_us_")}, set(time_fields))
        cells = [dict(zip(rows[0], row)) for row in rows[1:]]
        self.assertEqual([row["case_id"] for row in cells], [record["case_id"] for record in records])
        self.assertEqual(len(records), 8)
        # Records carry 7 significant digits (bench/core/case.cpp), the samples file every digit.
        close = 1e-6
        distinct = 0
        for record, row in zip(records, cells):
            case = record["case_id"]
            self.assertEqual(len(samples[case]), 200, case)
            self.assertEqual(record["iterations"], 200, case)
            expected = statistics_of(samples[case])
            order = [expected[stat] for stat in ("min", "p50", "p95", "p99", "max")]
            distinct += all(high > low * (1 + 4 * close) for low, high in zip(order, order[1:]))
            for stat, value in expected.items():
                for source, got in (("jsonl", record["time_us"][stat]), ("csv", float(row[f"time_us_{stat}"]))):
                    self.assertAlmostEqual(got, value, delta=abs(value) * close, msg=f"{case} {source} {stat}")
        self.assertGreater(distinct, 0, "no case with distinct min < p50 < p95 < p99 < max: the test could not tell "
                                        "the columns apart")

    def test_real_coll_perf_csv_equals_its_json_cell_by_cell(self):
        """coll_perf --csv against -J, every cell: same rows, same order, numbers equal after parsing, empty cell
        for null (never 0), true/false for booleans."""
        real, _lines, rows = self.load(self.real_dir)
        header, body = rows[0], rows[1:]
        self.assertEqual(len(body), len(real["cases"]))
        for row, lean_case in zip(body, real["cases"]):
            case = with_defaults(lean_case)  # schema 1.3: a field left out holds its default, the CSV writes it
            for column, cell in zip(header, row):
                # busbw_reason (schema 1.4) is in a record only where busbw has no meaning; elsewhere its cell is empty.
                value = case["time_us"][column[len("time_us_"):]] if column.startswith("time_us_") else \
                    (case.get(column) if column == "busbw_reason" else case[column])
                where = f"{case['case_id']} {column}"
                if value is None:
                    self.assertEqual(cell, "", where)
                elif isinstance(value, bool):
                    self.assertEqual(cell, "true" if value else "false", where)
                elif isinstance(value, (int, float)):
                    self.assertAlmostEqual(float(cell), float(value), delta=abs(value) * 1e-12, msg=where)
                else:
                    self.assertEqual(cell, str(value), where)

    def test_one_rank_busbw_is_null_with_its_reason_in_the_real_coll_perf_and_the_fake(self):
        """Schema 1.4: at one rank busbw has no meaning (no link is crossed): null with busbw_reason in the
        records, an empty busbw_gbps cell and the reason in the CSV, '-' and the reason once on the console;
        algbw and the times stay. The fake writes the same keys and CSV header."""
        real_dir = os.path.join(self.tmp, "real1")
        os.makedirs(real_dir)
        real = subprocess.run([MPIRUN, "-np", "1", "--bind-to", "none", os.path.join(APPS, "coll_perf")] +
                              [arg for arg in COLL_ARGS if arg != "--quiet"] + self.outputs(real_dir),
                              capture_output=True, text=True, env=mpirun_env(), timeout=600)
        self.assertEqual(real.returncode, 0, real.stderr)
        self.assertEqual(real.stdout.count("# busbw: - (1 rank: no link is crossed)"), 1, real.stdout)
        self.assertNotIn("Avg bus bandwidth", real.stdout)
        fake_dir = os.path.join(self.tmp, "fake1")
        os.makedirs(fake_dir)
        self.run_fake("coll_perf", COLL_ARGS + self.outputs(fake_dir), env={"OMPI_COMM_WORLD_SIZE": "1"})
        for folder in (real_dir, fake_dir):
            for schema, name in (("coll_perf.schema.json", "r.json"), ("case_record.schema.json", "r.jsonl")):
                ok, errors = validate(schema, os.path.join(folder, name))
                self.assertTrue(ok, f"{folder}/{name}: {errors}")
            document, lines, rows = self.load(folder)
            self.assertTrue(document["cases"] and len(lines) == len(document["cases"]), folder)
            for case in document["cases"] + lines:
                self.assertEqual(case["nranks"], 1)
                self.assertIsNone(case["busbw_gbps"], case["case_id"])
                self.assertEqual(case["busbw_reason"], "1 rank: no link is crossed", case["case_id"])
                self.assertGreater(case["algbw_gbps"], 0, case["case_id"])
                self.assertGreater(case["time_us"]["mean"], 0, case["case_id"])
            header = rows[0]
            for row in rows[1:]:
                self.assertEqual(row[header.index("busbw_gbps")], "", "null is an empty cell, never 0")
                self.assertEqual(row[header.index("busbw_reason")], "1 rank: no link is crossed")
                self.assertGreater(float(row[header.index("algbw_gbps")]), 0)
        real_doc, _lines, real_rows = self.load(real_dir)
        fake_doc, _lines, fake_rows = self.load(fake_dir)
        self.assertEqual([set(c) for c in fake_doc["cases"]], [set(c) for c in real_doc["cases"]], "one-rank record keys")
        self.assertEqual(fake_rows[0], real_rows[0], "CSV header")

    def test_fake_coll_perf_nccl_backend_validates(self):
        """No NCCL run here: the NCCL-only sections are held to the schema (and the transport evidence to
        the real nccl_evidence's keys in the next test)."""
        self.run_fake("coll_perf", ["--backend", "nccl", "-b", "8K", "-e", "8K", "--expect-transport", "intra=P2P",
                                    "--nccl-log-dir", os.path.join(self.tmp, "nccl")] + self.outputs(self.tmp),
                      env={"OMPI_COMM_WORLD_SIZE": "16"})
        for schema, name in (("coll_perf.schema.json", "r.json"), ("case_record.schema.json", "r.jsonl")):
            ok, errors = validate(schema, os.path.join(self.tmp, name))
            self.assertTrue(ok, f"{name}: {errors}")
        document, lines, rows = self.load(self.tmp)
        measured = [case for case in document["cases"] if case["status"] == "ok"]
        self.assertTrue(measured and all(case["bandwidth_from"] == "gated_time_us" and case["gated_time_us"] > 0
                                         for case in measured))
        # As the real NCCL backend at more than one rank with checking: in-place alltoall skipped, nothing measured.
        skipped = [case for case in document["cases"] if case["status"] == "skipped"]
        self.assertEqual([case["case_id"] for case in skipped], ["alltoall.float.none.in.8K"])
        self.assertTrue(skipped[0]["reason"].startswith("in-place AlltoAll overwrites data it still has to send"))
        self.assertIn("gated_time_us", rows[0])
        self.assertIn("bandwidth_from", rows[0])

    def test_fake_transport_evidence_has_the_real_nccl_evidence_keys(self):
        out = os.path.join(self.tmp, "evidence.json")
        real = subprocess.run([os.path.join(APPS, "nccl_evidence"), "--json", out, EVIDENCE_LOGS],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(real.returncode, 0, real.stderr)
        ok, errors = validate("nccl_evidence.schema.json", out)
        self.assertTrue(ok, errors)
        with open(out) as handle:
            evidence = json.load(handle)
        self.run_fake("coll_perf", ["--backend", "nccl", "-b", "8K", "-e", "8K", "-J", os.path.join(self.tmp, "f.json")],
                      env={"OMPI_COMM_WORLD_SIZE": "16"})
        with open(os.path.join(self.tmp, "f.json")) as handle:
            fake = json.load(handle)["transport"]["evidence"]
        self.assertLessEqual(set(fake), set(evidence), "the fake's evidence keys exist in the real output")
        real_comm = evidence["communicators"][0]
        for communicator in fake["communicators"]:
            self.assertLessEqual(set(communicator), set(real_comm))
            for device in communicator["net_devices_used"]:
                self.assertLessEqual(set(device), set(real_comm["net_devices_used"][0]))

    def test_fake_topo_map_matches_the_real_topo_map_on_the_same_xml(self):
        real_out, fake_out = os.path.join(self.tmp, "real.json"), os.path.join(self.tmp, "fake.json")
        real = subprocess.run([os.path.join(APPS, "topo_map"), "--xml", TOPOLOGY_XML, "--sysfs-root", SYSFS,
                               "--json", real_out], capture_output=True, text=True, timeout=120)
        self.assertEqual(real.returncode, 0, real.stderr)
        self.run_fake("topo_map", ["--json", fake_out])
        for path in (real_out, fake_out):
            ok, errors = validate("topology.schema.json", path)
            self.assertTrue(ok, f"{path}: {errors}")
        with open(real_out) as handle:
            real_model = json.load(handle)
        with open(fake_out) as handle:
            fake_model = json.load(handle)
        self.assertEqual(set(fake_model), set(real_model), "top-level keys")
        for key in sorted(set(real_model) - {"host", "source", "tool"}):  # host: the fake uses this one's name
            self.assertEqual(fake_model[key], real_model[key], f"{key}: the fake's model drifted from topo_map --xml")

    def test_fake_p2p_matrix_validates_and_carries_every_required_key(self):
        out = os.path.join(self.tmp, "p2p.json")
        self.run_fake("p2p_matrix", ["--json", out])
        ok, errors = validate("p2p_matrix.schema.json", out)
        self.assertTrue(ok, errors)
        with open(os.path.join(SCHEMA_DIR, "p2p_matrix.schema.json")) as handle:
            schema = json.load(handle)
        with open(out) as handle:
            document = json.load(handle)
        self.assertLessEqual(set(schema.get("required", [])), set(document))
        self.assertEqual(set(schema["properties"]), set(document), "every documented top-level key, no other")


if __name__ == "__main__":
    main_for_ctest()
