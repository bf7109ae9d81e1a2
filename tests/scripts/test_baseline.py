"""`baseline` and `report` end to end with test doubles of coll_perf/topo_map/p2p_matrix/mpirun:
run directory contents, schema validity, resume after a failure and after SIGKILL, gates, anomalies."""
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from helpers import CCLBENCH, FAKE_BIN, SCHEMA_DIR, TempDirTest, read_jsonl, read_text, run_cli, validate

TWO_NODES = ["--hosts", "localhost,127.0.0.1", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1"]
SMALL = ["-b", "8K", "-e", "32K", "-n", "3", "-w", "1"]
ONCE = ["--repeat", "1"]


def case_schema():
    """The schema of coll_perf case records: it must exist (a missing schema fails, never skips)."""
    path = os.path.join(SCHEMA_DIR, "case_record.schema.json")
    if not os.path.exists(path):
        raise AssertionError(f"{path} is missing: case records cannot be validated")
    return os.path.basename(path)


class BaselineRuns(TempDirTest):
    """Helpers only (no tests here): LocalRuns and TwoNodeRuns are separate CTest tests."""

    def baseline(self, run_id, *extra, env=None):
        """One repeat unless the test says otherwise (the default, 3, has its own tests)."""
        return run_cli(["baseline"] + SMALL + ONCE + self.fake_args(run_id) + list(extra), env=env)

    def manifest(self, run_id):
        with open(os.path.join(self.results, run_id, "run_manifest.json")) as handle:
            return json.load(handle)

    def invocations(self, log, probes=False):
        """Points coll_perf measured (or, with probes=True, the points whose TUNING probe ran), in order."""
        if not os.path.exists(log):
            return []
        with open(log) as handle:
            lines = [line.strip() for line in handle if line.strip()]
        if probes:
            return [line.split(" ", 1)[1] for line in lines if line.startswith("tuning-probe ")]
        return [line for line in lines if not line.startswith("tuning-probe ")]


class LocalRuns(BaselineRuns):
    """One machine, no hosts: the MPI-backend plan."""

    def test_local_run_directory_and_report(self):
        result = self.baseline("L", env={"NCCL_DEBUG": "WARN", "NCCL_API_KEY": "hunter2", "HOME_SECRET": "x"})
        self.assertEqual(result.returncode, 0, result.stderr)
        run = os.path.join(self.results, "L")
        for name in ("run_manifest.json", "cases.jsonl", "summary.csv", "run.log", "sanity.jsonl",
                     "topology", "raw/local.mpi4.json", "report.md"):
            self.assertTrue(os.path.exists(os.path.join(run, name)), name)
        self.assertIn("[4/4] local.mpi4: complete", result.stderr, "one progress line per launch")
        manifest = self.manifest("L")
        self.assertEqual(manifest["status"], "complete")
        self.assertEqual(manifest["mode"], "local_mpi")
        self.assertEqual(manifest["env"].get("NCCL_DEBUG"), "WARN")
        self.assertNotIn("NCCL_API_KEY", manifest["env"])
        self.assertIn("NCCL_API_KEY", manifest["env_redacted"])
        self.assertNotIn("hunter2", read_text(os.path.join(run, "run_manifest.json")))
        self.assertTrue(any("MPI backend" in note for note in manifest["notes"]))
        ok, errors = validate("run_manifest.schema.json", os.path.join(run, "run_manifest.json"))
        self.assertTrue(ok, errors)
        ok, errors = validate(case_schema(), os.path.join(run, "cases.jsonl"))
        self.assertTrue(ok, errors)
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        self.assertEqual(len(records), 4 * 3 * 2)
        with open(os.path.join(run, "summary.csv")) as handle:
            rows = list(csv.DictReader(handle))
        self.assertEqual(len(rows), len(records))
        self.assertTrue(all(row["status"] == "ok" and row["busbw_gbps"] for row in rows))
        with open(os.path.join(run, "run.log")) as handle:
            log = handle.read()
        self.assertIn("$ " + os.path.join(FAKE_BIN, "mpirun"), log, "every command is logged")
        self.assertIn("all_reduce.float.sum.out.8K", log, "and its output")
        for stat in (os.stat(os.path.join(run, name)) for name in ("run_manifest.json", "summary.csv")):
            self.assertEqual(stat.st_mode & 0o777, 0o644)

        self.assertIn(f"cclbench: report: {os.path.join(run, 'report.md')} (0 anomalies)", result.stderr,
                      "baseline writes the report itself")
        report = run_cli(["report", run])
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        self.assertLess(text.index("## Anomalies"), text.index("## Environment"), "anomalies come first")
        self.assertIn("None found", text)
        # The MPI backend on a GPU-less machine measures host memory: correctness only, no headline.
        self.assertIn("| local.mpi4 | MPI backend on host memory: correctness only | 1 | 24 | 24 | 0 | 0 | 0 |", text)
        self.assertNotIn("### all_reduce", text)
        self.assertIn("No GPU-timed point in this run", text)
        self.assertNotIn("](plots/", text, "no plot of host-memory times")

    def test_sanity_failure_stops_the_run(self):
        log = os.path.join(self.tmp, "coll.log")
        result = self.baseline("S", env={"FAKE_COLL_WRONG": "1", "FAKE_COLL_LOG": log})
        self.assertRunError(result, 1, "sanity pass failed")
        self.assertEqual(self.invocations(log), ["sanity"])
        text = read_text(os.path.join(self.results, "S", "report.md"))
        self.assertIn("| launch not complete | sanity |", text, "a failed run still gets its report, anomalies first")
        self.assertIn("| launches never ran | local.mpi4 | 1 planned launch(es) did not run", text)
        self.assertNotIn("| missing cases |", text, "never-run points are not listed case by case")
        self.assertEqual(self.manifest("S")["status"], "failed")

    def test_resume_reruns_a_point_whose_records_do_not_parse(self):
        log = os.path.join(self.tmp, "coll.log")
        self.assertEqual(self.baseline("P", "--repeat", "2").returncode, 0)
        cases = os.path.join(self.results, "P", "cases.jsonl")
        records = read_jsonl(cases)
        # Corrupt the last record of rep2 (its status says ok but the time does not parse).
        index = max(i for i, r in enumerate(records) if r["point"] == "local.mpi4.rep2")
        records[index]["time_us"] = None
        with open(cases, "w") as handle:
            handle.write("".join(json.dumps(r) + "\n" for r in records))
        resumed = run_cli(["baseline", "--resume", "P", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(self.invocations(log), ["sanity", "local.mpi4.rep2"])

    def test_resume_after_sigkill(self):
        log = os.path.join(self.tmp, "coll.log")
        env = dict(os.environ, FAKE_COLL_HANG_POINT="local.mpi4.rep2", FAKE_COLL_LOG=log, CCLBENCH_FAKE_GPU_COUNT="0")
        process = subprocess.Popen([sys.executable, CCLBENCH, "baseline", "--repeat", "3"] + SMALL + self.fake_args("K"),
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # generous: a hang detector, not a speed check (loaded CI)
            while time.monotonic() < deadline:
                try:
                    if self.manifest("K")["points"]["local.mpi4.rep2"]["status"] == "running" and \
                            "local.mpi4.rep2" in self.invocations(log):
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.1)
            else:
                self.fail("the baseline never reached the second point")
            time.sleep(0.3)
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # the baseline and the hung coll_perf it started
            process.wait()
        self.assertEqual(self.manifest("K")["points"]["local.mpi4.rep1"]["status"], "complete")
        # A crash in the middle of an append leaves a record's prefix without a newline.
        with open(os.path.join(self.results, "K", "cases.jsonl"), "a") as handle:
            handle.write('{"point": "local.mpi4.rep2", "case_id": "all_red')
        os.remove(log)
        resumed = run_cli(["baseline", "--resume", "K", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(self.invocations(log), ["sanity", "local.mpi4.rep2", "local.mpi4.rep3"])
        report = run_cli(["report", os.path.join(self.results, "K")], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(self.results, "K", "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("hold torn records", anomalies)
        self.assertNotIn("missing cases", anomalies, "the killed attempt's records are superseded")
        self.assertNotIn("launch not complete", anomalies)

    def test_sigint_stops_cleanly_and_resumes(self):
        env = dict(os.environ, FAKE_COLL_HANG_POINT="local.mpi4", CCLBENCH_FAKE_GPU_COUNT="0")
        process = subprocess.Popen([sys.executable, CCLBENCH, "baseline"] + SMALL + ONCE + self.fake_args("I"), env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # generous: a hang detector, not a speed check (loaded CI)
            while time.monotonic() < deadline:
                try:
                    if self.manifest("I")["points"]["local.mpi4"]["status"] == "running":
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.1)
            else:
                self.fail("the baseline never reached local.mpi4")
            time.sleep(0.5)
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=300)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.assertEqual(process.returncode, 130, err)
        self.assertIn("resume with: cclbench baseline --resume I", err.strip().splitlines()[-1])
        self.assertNotIn("Traceback", err)
        manifest = self.manifest("I")
        self.assertEqual(manifest["status"], "interrupted")
        self.assertEqual(manifest["points"]["local.mpi4"]["status"], "interrupted")
        resumed = run_cli(["baseline", "--resume", "I", "--results", self.results])
        self.assertEqual(resumed.returncode, 0, resumed.stderr)

    def test_default_repeats_on_one_gpu(self):
        """One GPU: a real one-rank point three times (the default), the emulated check once."""
        log = os.path.join(self.tmp, "coll.log")
        result = run_cli(["baseline"] + SMALL + self.fake_args("G1"), env={"CCLBENCH_FAKE_GPU_COUNT": "1",
                                                                          "FAKE_COLL_LOG": log})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.invocations(log), ["sanity", "local.gpu1.rep1", "local.gpu1.rep2", "local.gpu1.rep3",
                                                 "local.share-gpu4"])
        self.assertEqual(self.manifest("G1")["mode"], "local_share_gpu")
        text = read_text(os.path.join(self.results, "G1", "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("None found", anomalies)
        self.assertIn("### all_reduce", text, "the one-rank point has the tables of a multi-GPU point")
        self.assertIn("| size | local.gpu1 |", text)
        self.assertNotIn("| size | local.gpu1 | local.share-gpu4 |", text, "the emulated point feeds no table")
        # 7 collectives x 3 sizes x 2 placements; coll_perf's double writes every one.
        self.assertIn("| local.share-gpu4 | emulated: correctness only | 1 | 42 | 42 | 0 | 0 | 0 |", text)
        self.assertIn("24 ok.", text, "24 cases of the one-rank point pass the repeat gate")

    def test_repeat_cv_gate(self):
        gpus = {"CCLBENCH_FAKE_GPU_COUNT": "2"}
        result = self.baseline("C", "--repeat", "2", env=dict(gpus, FAKE_COLL_JITTER="1"))
        self.assertRunError(result, 1, "CV gate of 3.0%")
        failures = self.manifest("C")["gates"]["repeat_cv_failures"]
        self.assertEqual(len(failures), 4 * 3 * 2)
        # Repeats at 1.1 and 1.2 x: CV = 0.05 x sqrt(2) / 1.15 = 6.15%; robust = 1.4826 x 0.05 / 1.15 = 6.45%.
        self.assertTrue(all(6.1 < item["cv_pct"] < 6.2 and 6.4 < item["robust_pct"] < 6.5 for item in failures))
        ok, errors = validate("run_manifest.schema.json", os.path.join(self.results, "C", "run_manifest.json"))
        self.assertTrue(ok, errors)
        relaxed = self.baseline("C2", "--repeat", "2", "--cv-gate", "10%", env=dict(gpus, FAKE_COLL_JITTER="1"))
        self.assertEqual(relaxed.returncode, 0, relaxed.stderr)
        report = run_cli(["report", os.path.join(self.results, "C")], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(self.results, "C", "report.md"))
        self.assertIn("| CV above gate | local.gpus2 |", text)
        self.assertNotIn("per-iteration CV above gate", text)

    def test_host_bound_cases_get_a_wider_gate_not_a_pass(self):
        # The host needs 2x the GPU time per launch: host-bound, so 3 x the gate (9%) applies to the
        # robust dispersion (6.45%, as above): the baseline passes and the report says why.
        env = {"CCLBENCH_FAKE_GPU_COUNT": "2", "FAKE_COLL_JITTER": "1", "FAKE_COLL_HOST_FACTOR": "2"}
        result = self.baseline("H", "--repeat", "2", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(self.results, "H", "report.md"))
        self.assertIn("24 host-bound.", text)
        self.assertRegex(text, r"\| local\.gpus2 \| all_reduce\.float\.sum\.out\.8K \| 2 \| [0-9.]+ \| 6\.15 \| 6\.45 \| "
                               r"0\.10 \| host-bound \|")
        # Not a blanket exemption: 10% x N jitter over three repeats is 8.3% CV, 12.4% robust > 9%.
        result = self.baseline("H3", "--repeat", "3", env=env)
        self.assertRunError(result, 1, "CV gate of 3.0%")

    def test_mpi_backend_never_gates(self):
        result = self.baseline("M", "--repeat", "2", env={"FAKE_COLL_JITTER": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.manifest("M")["gates"]["repeat_cv_failures"], [])
        text = read_text(os.path.join(self.results, "M", "report.md"))
        self.assertNotIn("CV above gate", text)
        self.assertNotIn("## Repeatability", text)


class TwoNodeRuns(BaselineRuns):
    """Two hosts through the fake launcher: the sweep, probes, gates, rails, resume."""

    def test_gpu_less_hosts_run_the_mpi_backend_and_name_a_host_with_gpus(self):
        """No GPU where cclbench runs, none given: the MPI backend on both hosts (issue 26.2). A host whose
        topo_map finds GPUs anyway is named, with the flag that gives the NCCL plan."""
        hosts = ["--hosts", "localhost,127.0.0.1"]
        result = self.baseline("M", *hosts, env={"CCLBENCH_FAKE_GPU_COUNT": "0", "FAKE_GPUS": "0"})
        self.assertEqual(result.returncode, 0, result.stderr)
        manifest = self.manifest("M")
        self.assertEqual([launch["name"] for launch in manifest["plan"] if launch["kind"] in ("sanity", "intra", "inter")],
                         ["sanity", "intra.localhost", "intra.127.0.0.1", "inter.mpi"])
        self.assertTrue(all(state["status"] == "complete" for state in manifest["points"].values()), manifest["points"])
        self.assertNotIn("has 8 GPU(s)", result.stderr)
        found = self.baseline("G", *hosts, env={"CCLBENCH_FAKE_GPU_COUNT": "0", "FAKE_GPUS": "8"})
        self.assertEqual(found.returncode, 0, found.stderr)
        self.assertIn("cclbench: note: host localhost has 8 GPU(s), but no GPU was found where cclbench runs: this run "
                      "is the MPI backend, correctness only; pass --gpus-per-node 8 for the NCCL plan", found.stderr)
        self.assertIn("# note: host 127.0.0.1 has 8 GPU(s)", read_text(os.path.join(self.results, "G", "run.log")))

    def test_two_node_run_with_fake_launcher(self):
        log = os.path.join(self.tmp, "mpirun.log")
        result = self.baseline("T", *TWO_NODES, env={"FAKE_MPIRUN_LOG": log})
        self.assertEqual(result.returncode, 0, result.stderr)
        manifest = self.manifest("T")
        self.assertEqual(manifest["mode"], "multi_node")
        self.assertEqual(len(manifest["plan"]), 2 + 16 + 11, "the doctor per host, 16 launches, one TUNING probe per point")
        self.assertTrue(all(state["status"] == "complete" for state in manifest["points"].values()))
        self.assertEqual(len(self.invocations(log)), 2 + 16 + 11, "every launch goes through mpirun, the doctor too")
        run = os.path.join(self.results, "T")
        self.assertEqual(sorted(os.listdir(os.path.join(run, "topology"))), ["127.0.0.1.json", "localhost.json"])
        self.assertEqual(sorted(os.listdir(os.path.join(run, "p2p"))), ["127.0.0.1.json", "localhost.json"])
        points = {r["point"] for r in read_jsonl(os.path.join(run, "cases.jsonl"))}
        self.assertEqual(len(points), 2 + 9)
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("inter.cross2.rail-mlx5_3", text)
        self.assertIn("NCCL_IB_HCA==mlx5_0:1,mlx5_3:1", text)
        self.assertIn("**d2d_ce_write_uni** (GB/s, 256M)", text, "P2P matrices are reported")
        self.assertIn("| 0 | 1,900 | 52.00 | 38.00 | 38.00 |", text,
                      "from the real p2p_matrix layout, src row -> dst column; the diagonal is the local copy")
        self.assertIn("| mlx5_3 | eth3 |", text, "the GPU-NIC-NUMA table")
        self.assertIn("mlx5_0:1/eth0 PIX", text, "nearest NIC per GPU")
        self.assertIn("| GPU0 | X | PIX |", text, "path classes")
        self.assertIn("NET/IB/GDRDMA x32", text, "transport evidence per point")
        self.assertIn("IB/mlx5_0 x16, IB/mlx5_3 x16", text, "NET devices used")
        self.assertIn("| inter=NET/IB | pass | NET/IB/GDRDMA x32 | P2P/CUMEM x64 |", text)
        self.assertIn("## NCCL algorithm / protocol per size", text)
        self.assertIn("| 8K | TREE/LL | TREE/LL | - | TREE/LL |", text, "alltoall: NCCL logs no choice")
        self.assertEqual(sorted(os.listdir(os.path.join(run, "tuning"))), sorted(
            f"{launch['base_point']}.json" for launch in manifest["plan"] if launch["kind"] in ("intra", "inter")))
        self.assertIn("| inter.cross0.rails-both and 8 more | 15 |", text, "rank bindings, grouped over points")
        self.assertIn("not available: the case records carry no rail counters", text)
        for launch in manifest["plan"]:
            if launch["kind"] == "inter":
                argv = launch["argv"]
                self.assertEqual(argv[argv.index("--expect-transport") + 1], "inter=NET/IB")
                self.assertTrue(os.path.isdir(os.path.join(run, "nccl", launch["name"])), "NCCL logs per point")
        for host in ("localhost", "127.0.0.1"):
            for schema, sub in (("topology.schema.json", "topology"), ("p2p_matrix.schema.json", "p2p")):
                ok, errors = validate(schema, os.path.join(run, sub, host + ".json"))
                self.assertTrue(ok, errors)
        ok, errors = validate("coll_perf.schema.json", *sorted(glob.glob(os.path.join(run, "raw", "*.json"))))
        self.assertTrue(ok, errors)  # the double's -J follows the schema the real one is held to

    def test_transport_fallback_fails_the_point(self):
        result = self.baseline("S", *TWO_NODES, "--coll", "all_reduce", "--cross-nic", "0",
                               env={"FAKE_COLL_TRANSPORT": "socket"})
        self.assertRunError(result, 1)
        self.assertIn("exit 3 (transport expectation failed)", result.stderr.splitlines()[-1])
        run = os.path.join(self.results, "S")
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("| transport mismatch | sanity |", anomalies)
        self.assertIn("NET/Socket x32", text)

    def test_failed_probe_does_not_stop_the_measurement(self):
        point = "inter.cross0.rails-both"
        result = self.baseline("TP", *TWO_NODES, "--coll", "all_reduce", "--cross-nic", "0",
                               env={"FAKE_COLL_PROBE_FAIL": point})
        self.assertRunError(result, 1, f"tuning.{point}: exit 5")
        manifest = self.manifest("TP")
        self.assertEqual(manifest["points"][point]["status"], "complete", "measured without --tuning-from")
        log = read_text(os.path.join(self.results, "TP", "run.log"))
        self.assertIn("(its probe failed): measuring without --tuning-from", log)
        self.assertEqual(run_cli(["report", os.path.join(self.results, "TP")],
                                 env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(self.results, "TP", "report.md"))
        self.assertIn(f"| launch not complete | tuning.{point} |", text)

    def test_gpus_per_node_mismatch(self):
        result = self.baseline("G", *TWO_NODES, env={"FAKE_GPUS": "4"})
        self.assertRunError(result, 2, "has 4 GPU(s) but --gpus-per-node is 8")

    def test_resume_after_failure_skips_finished_points(self):
        log = os.path.join(self.tmp, "coll.log")
        failing = "inter.cross1.rail-mlx5_0"
        first = self.baseline("R", *TWO_NODES, env={"FAKE_COLL_FAIL_POINT": failing, "FAKE_COLL_LOG": log})
        self.assertRunError(first, 1, failing)
        self.assertEqual(self.manifest("R")["points"][failing]["status"], "failed")
        self.assertEqual(self.manifest("R")["points"][failing]["exit_code"], 5)
        before = self.invocations(log)
        self.assertEqual(len(before), 1 + 2 + 9, "the failure does not stop the other points")
        os.remove(log)
        second = run_cli(["baseline", "--resume", "R", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(self.invocations(log), ["sanity", failing], "only the failed point runs again")
        self.assertEqual(self.invocations(log, probes=True), [], "its probe had completed: not run again")
        self.assertIn("skipped (already complete)", second.stderr)
        manifest = self.manifest("R")
        self.assertEqual(manifest["status"], "complete")
        self.assertEqual(manifest["points"][failing]["attempts"], 2)
        self.assertEqual(len(manifest["invocations"]), 2)
        ok, errors = validate("run_manifest.schema.json", os.path.join(self.results, "R", "run_manifest.json"))
        self.assertTrue(ok, errors)

    def test_rails_in_report(self):
        result = self.baseline("RL", *TWO_NODES, "--no-tuning-probe", env={"FAKE_COLL_RAILS": "mlx5_0:1=100,mlx5_3:1=10"})
        self.assertEqual(result.returncode, 0, result.stderr)
        run = os.path.join(self.results, "RL")
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("| rail imbalance | inter.cross0.rails-both | rail shares mlx5_0:1 91%, mlx5_3:1 9%", anomalies)
        self.assertIn("| rail imbalance | inter.cross2.rail-mlx5_0 | traffic on mlx5_3:1, which NCCL_IB_HCA did not bind",
                      anomalies)
        self.assertNotIn("| rail imbalance | intra.", anomalies, "rails matter for inter-node points only")

    def test_report_anomalies(self):
        # A transport gate failure at one inter-node point, and impossible bandwidth everywhere.
        result = self.baseline("A", *TWO_NODES, "--no-tuning-probe", env={"FAKE_COLL_EXIT": "3", "FAKE_COLL_EXIT_POINT": "inter.cross0.rail-mlx5_3",
                                                     "FAKE_COLL_TIME_SCALE": "0.00001"})
        self.assertRunError(result, 1, "transport expectation failed")
        run = os.path.join(self.results, "A")
        with open(os.path.join(run, "cases.jsonl"), "a") as handle:
            handle.write(json.dumps({"point": "intra.localhost", "case_id": "all_reduce.float.sum.out.8K",
                                     "collective": "all_reduce", "requested_bytes": 8192, "status": "ok", "wrong": 3,
                                     "time_us": {"mean": 1.0, "p50": 1.0}, "busbw_gbps": None}) + "\n")
        os.remove(os.path.join(run, "topology", "127.0.0.1.json"))
        report = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("| transport mismatch | inter.cross0.rail-mlx5_3 |", anomalies)
        self.assertIn("| wrong data | intra.localhost | all_reduce.float.sum.out.8K: 3 wrong element(s) |", anomalies)
        self.assertRegex(anomalies, r"above physical limit \| inter\.cross0\.rails-both \| .* > 100 GB/s \(2 x 400G")
        self.assertRegex(anomalies, r"above physical limit \| inter\.cross1\.rail-mlx5_0 \| .* > 50 GB/s \(1 x 400G")
        self.assertRegex(anomalies, r"above physical limit \| intra\.localhost \| .* > 64 GB/s \(PCIe Gen5 x16\)")
        self.assertIn("| FAILED (coll_perf exit 3) |", text, "the transport table marks the failed gate")
        self.assertEqual(anomalies.count("above physical limit | inter.cross0.rails-both"), 1, "one row per point")


if __name__ == "__main__":
    unittest.main()
