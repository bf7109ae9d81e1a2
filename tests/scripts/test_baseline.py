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
from unittest import mock

from helpers import (CCLBENCH, FAKE_BIN, SCHEMA_DIR, TempDirTest, end_process_group, read_jsonl, read_text, run_cli,
                     validate)

from cclbench_lib.execute.runner import Baseline, Interrupted
from cclbench_lib.rules.doctor_gate import failed_paths

TWO_NODES = ["--hosts", "localhost,127.0.0.1", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1"]
SMALL = ["-b", "8K", "-e", "32K", "-n", "3", "-w", "1"]
ONCE = ["--repeat", "1"]


def case_schema():
    """The schema of coll_perf case records: it must exist (a missing schema fails, never skips)."""
    path = os.path.join(SCHEMA_DIR, "case_record.schema.json")
    if not os.path.exists(path):
        raise AssertionError(f"{path} is missing: case records cannot be validated")
    return os.path.basename(path)


# The smoke's one-rank points every GPU baseline runs last (plan/smoke_cases.py), once each: the samples are taken
# inside one launch, and the run-to-run spread comes from the runs a reference captures (smoke --capture), not from
# repeats inside a run.
SMOKE_COLL_LAUNCHES = [f"smoke.{name}.rep1" for name in ("collective", "graph")]

class BaselineRuns(TempDirTest):
    """Helpers only (no tests here): LocalRuns and TwoNodeRuns are separate CTest tests."""

    def baseline(self, run_id, *extra, env=None):
        """One repeat unless the test says otherwise (the default, 3, has its own tests)."""
        return run_cli(["baseline"] + SMALL + ONCE + self.fake_args(run_id) + list(extra), env=env)

    def assertFailsOn(self, result, run_id, codes):
        """The run FAILED (exit 1) on exactly these fail codes of its verdict.json, nothing else. The fake two-node
        runs fail on this machine's doctor: NCCL_IB_HCA names mlx5_0 and mlx5_3, which do not exist here."""
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cclbench: error: FAILED (", result.stderr.strip().splitlines()[-1])
        with open(os.path.join(self.results, run_id, "verdict.json"), encoding="utf-8") as handle:
            verdict = json.load(handle)
        self.assertEqual(sorted({r["code"] for r in verdict["reasons"] if r["severity"] == "fail"}), sorted(codes))
        return verdict

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
        # The part of each coll_perf launch its ranks reported as work (first case phase entered to the last left):
        # within its wall time; the tools that report no progress have none.
        for name, point in manifest["points"].items():
            if point["kind"] in ("sanity", "local"):
                self.assertTrue(0 <= point["work_s"] <= point["elapsed_s"], (name, point))
            else:
                self.assertIsNone(point.get("work_s"), name)
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

    def test_a_launcher_that_fails_at_once_is_quoted_on_the_console(self):
        """mpirun on a host without ssh or rsh (OMPI_MCA_plm unset) exits 243 before any rank starts, its reason in
        its own words: the console says them, not only run.log. The stand-in prints Open MPI 4.1's words."""
        launcher = os.path.join(self.tmp, "mpirun")
        with open(launcher, "w") as handle:
            handle.write("#!/bin/sh\ncat >&2 <<'EOF'\n" + "-" * 74 + "\nThe value of the MCA parameter "
                         "\"plm_rsh_agent\" was set to a path\nthat could not be found:\n\n  plm_rsh_agent: ssh : rsh\n\n"
                         "Please either unset the parameter, or check that the path is correct\n" + "-" * 74 +
                         "\nEOF\nexit 243\n")
        os.chmod(launcher, 0o755)
        result = run_cli(["baseline"] + SMALL + ONCE + ["--bin-dir", FAKE_BIN, "--mpirun", launcher, "--results",
                                                        self.results, "--run-id", "L"])
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("exit 243 (unexpected exit status)", result.stderr)
        self.assertIn("the launcher said: The value of the MCA parameter \"plm_rsh_agent\" was set to a path / that "
                      "could not be found: / plm_rsh_agent: ssh : rsh", result.stderr)

    def test_default_repeats_on_one_gpu(self):
        """One GPU: a real one-rank point three times (the default), the emulated check once."""
        log = os.path.join(self.tmp, "coll.log")
        result = run_cli(["baseline"] + SMALL + self.fake_args("G1"), env={"CCLBENCH_FAKE_GPU_COUNT": "1",
                                                                          "FAKE_COLL_LOG": log})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.invocations(log), ["sanity", "local.gpu1.rep1", "local.gpu1.rep2", "local.gpu1.rep3",
                                                 "local.share-gpu4"] + SMOKE_COLL_LAUNCHES)
        self.assertEqual(self.manifest("G1")["mode"], "local_share_gpu")
        text = read_text(os.path.join(self.results, "G1", "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("None found", anomalies)
        self.assertIn("### all_reduce", text, "the one-rank point has the tables of a multi-GPU point")
        self.assertIn("| size | local.gpu1 |", text)
        self.assertNotIn("| size | local.gpu1 | local.share-gpu4 |", text, "the emulated point feeds no table")
        # 7 collectives x 3 sizes x 2 placements; coll_perf (and its double) skips in-place alltoall and sendrecv
        # at 4 ranks: no in-place result to check.
        self.assertIn("| local.share-gpu4 | emulated: correctness only | 1 | 42 | 36 | 6 | 0 | 0 |", text)
        # The 24 cases of the one-rank point pass the repeat gate; the smoke's points run once (nothing to gate).
        self.assertIn("24 ok.", text)

    def test_one_gpu_report_shows_what_one_gpu_measures(self):
        """One GPU: no self-inflicted anomaly, busbw '- (1 rank)' (never 0.00), algbw instead, no ceiling where
        no link is crossed, the local device copy instead of 1 x 1 matrices, summary.csv's busbw_reason."""
        result = run_cli(["baseline"] + SMALL + self.fake_args("G1"), env={"CCLBENCH_FAKE_GPU_COUNT": "1", "FAKE_GPUS": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        run = os.path.join(self.results, "G1")
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("None found", anomalies)
        self.assertNotIn("cases skipped", text)
        # Listed once, with coll_perf's reason, for the two collectives NCCL defines no in-place result for.
        self.assertEqual(text.count("## Not verifiable by design"), 1)
        self.assertIn("| alltoall in-place | local.share-gpu4 | 3 | 8K, 128K, 2M | in-place AlltoAll overwrites data it "
                      "still has to send (NCCL defines no in-place result), so it cannot be verified", text)
        self.assertIn("| sendrecv in-place | local.share-gpu4 | 3 |", text)
        start = text.index("## Results per collective")
        results = text[start:text.index("\n## ", start)]  # to the next section (one run a point: no repeatability)
        self.assertNotIn("0.00", results, "busbw at one rank is no number")
        self.assertEqual(results.count("busbw (GB/s): - (1 rank) at every size"), 4, results)
        self.assertIn("(coll_perf: 1 rank: no link is crossed)", results)
        self.assertNotIn("| 128K |", results, "the emulated check's sizes are not rows of the one-rank tables")
        # algbw = bytes / time: the double's 8K time is 10 + 8192 / 1e4 us (x 1.000, 1.001, 1.002 over -n 3).
        self.assertIn("algbw (GB/s), bytes / time: what local.gpu1 measures at one rank:", results)
        self.assertIn(f"| 8K | {8192 / (10.8192 * 1.001) / 1e3:.2f} |", results)
        # The P2P section of one GPU: the local copy (the double: 1950 CE, 1700 SM; diagonal 1900), no matrix.
        p2p = text[text.index("## P2P"):]
        self.assertIn("Local device copy (nvbandwidth's device_local_copy; bytes copied / time, the GPU memory moves "
                      "twice that): CE 1,950 GB/s (device_local_copy_ce), SM 1,700 GB/s (device_local_copy_sm).", p2p)
        self.assertIn("| d2d_ce_write_uni | 256M | 1,900 GB/s |", p2p)
        self.assertNotIn("src \\ dst", p2p, "no 1 x 1 matrix")
        # summary.csv: busbw empty with coll_perf's reason at one rank, as in coll_perf's --csv.
        with open(os.path.join(run, "summary.csv")) as handle:
            rows = list(csv.DictReader(handle))
        alone = [row for row in rows if row["nranks"] == "1" and row["status"] == "ok"]
        self.assertTrue(alone)
        self.assertTrue(all(row["busbw_gbps"] == "" and row["busbw_reason"] == "1 rank: no link is crossed" for row in alone))
        self.assertTrue(all(row["busbw_reason"] == "" for row in rows if row["nranks"] == "4"))
        # The plots as data (matplotlib is not needed to know what would be drawn): algbw for the one-rank point with
        # no ceiling line, no busbw plot at all (every timed point has one rank).
        sys.path.insert(0, os.path.join(os.path.dirname(CCLBENCH)))
        from cclbench_lib.model.run_dir import RunData
        from cclbench_lib.render.report import plot_specs
        specs = {name: (series, ceilings) for name, _title, _ylabel, series, _logy, ceilings in plot_specs(RunData(run))}
        self.assertEqual(sorted(specs), sorted(f"{c}_{m}.png" for c in ("all_gather", "all_reduce", "alltoall",
                                                                         "reduce_scatter") for m in ("algbw", "latency")))
        series, ceilings = specs["all_reduce_algbw.png"]
        self.assertEqual(ceilings, [])
        self.assertEqual([label for label, _points in series], ["local.gpu1", "smoke.collective", "smoke.graph"])
        self.assertAlmostEqual(dict(series[0][1])[8192], 8192 / (10.8192 * 1.001) / 1e3, places=6)

    def test_old_one_rank_records_render_no_busbw(self):
        """Records before schema 1.4 said busbw 0.0 at one rank (the ten H200 runs): '- (1 rank)' too, judged by nranks."""
        result = run_cli(["baseline"] + SMALL + ONCE + self.fake_args("O1"), env={"CCLBENCH_FAKE_GPU_COUNT": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        run = os.path.join(self.results, "O1")
        records = read_jsonl(os.path.join(run, "cases.jsonl"))
        with open(os.path.join(run, "cases.jsonl"), "w") as handle:
            for record in records:
                if record["nranks"] == 1:
                    record.pop("busbw_reason", None)
                    record.update(schema_version="1.3.0", busbw_gbps=0.0)
                handle.write(json.dumps(record) + "\n")
        report = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        start = text.index("## Results per collective")
        results = text[start:text.index("\n## ", start)]  # to the next section (one run a point: no repeatability)
        self.assertNotIn("0.00", results)
        self.assertEqual(results.count("busbw (GB/s): - (1 rank) at every size: one rank crosses no link, so busbw "
                                       "has no meaning."), 4)

    def test_repeat_cv_gate(self):
        gpus = {"CCLBENCH_FAKE_GPU_COUNT": "2"}
        result = self.baseline("C", "--repeat", "2", env=dict(gpus, FAKE_COLL_JITTER="1"))
        # 4 collectives x 3 sizes x 2 placements, less in-place alltoall (3): not verifiable by design at 2 ranks.
        # Repeats at 1.1 and 1.2 x at every case: CV = 0.05 x sqrt(2) / 1.15 = 6.15% each, so the point's median
        # CV is 6.15% > max(3%, 5%): the spread is systematic, the point is not reproducible.
        self.assertRunError(result, 1, "FAILED (")
        self.assertIn("repeat.systematic_spread", result.stderr)
        gates = self.manifest("C")["gates"]["repeatability"]
        # The smoke's own points run once a run (no repeats to gate: their spread is the captured reference's).
        self.assertEqual([(g["point"], g["status"], g["code"], g["judged_cases"]) for g in gates],
                         [("local.gpus2", "fail", "repeat.systematic_spread", 4 * 3 * 2 - 3)])
        self.assertTrue(6.1 < gates[0]["median_cv_pct"] < 6.2)
        ok, errors = validate("run_manifest.schema.json", os.path.join(self.results, "C", "run_manifest.json"))
        self.assertTrue(ok, errors)
        ok, errors = validate("verdict.schema.json", os.path.join(self.results, "C", "verdict.json"))
        self.assertTrue(ok, errors)
        # A gate of 10% takes the spread limit to 10%: every case is within its target, the run is healthy.
        relaxed = self.baseline("C2", "--repeat", "2", "--cv-gate", "10%", env=dict(gpus, FAKE_COLL_JITTER="1"))
        self.assertEqual(relaxed.returncode, 0, relaxed.stderr)
        self.assertIn("cclbench: HEALTHY", relaxed.stderr.strip().splitlines()[-1])
        report = run_cli(["report", os.path.join(self.results, "C")], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn("cclbench: FAILED (", report.stderr.strip().splitlines()[-1])
        text = read_text(os.path.join(self.results, "C", "report.md"))
        self.assertTrue(text.startswith("# FAILED ("), text[:200])
        self.assertIn("| systematic spread (point not reproducible) | local.gpus2 |", text)
        self.assertNotIn("per-iteration CV above gate", text)

    def test_host_bound_cases_get_a_wider_gate_not_a_pass(self):
        # The host needs 2x the GPU time per launch: host-bound, so 3 x the gate (9%) applies to each case's
        # robust dispersion (6.45%, as above): each case is host-bound jitter, a note. But the spread is
        # systematic (median CV 6.15% > 5%): the point fails; host-bound is no exemption for a whole point.
        env = {"CCLBENCH_FAKE_GPU_COUNT": "2", "FAKE_COLL_JITTER": "1", "FAKE_COLL_HOST_FACTOR": "2"}
        result = self.baseline("H", "--repeat", "2", env=env)
        self.assertRunError(result, 1, "repeat.systematic_spread")
        text = read_text(os.path.join(self.results, "H", "report.md"))
        self.assertIn("21 above target (host-bound).", text)  # 24 cases less in-place alltoall, not verifiable by design
        # Listed once for the point (its two repeats are one point, each case once).
        self.assertIn("| alltoall in-place | local.gpus2 | 3 | 8K, 16K, 32K | in-place AlltoAll overwrites", text)
        self.assertRegex(text, r"\| local\.gpus2 \| all_reduce\.float\.sum\.out\.8K \| 2 \| [0-9.]+ \| 6\.15 \| 6\.45 \| "
                               r"0\.10 \| above target \(host-bound\) \|")

    def test_mpi_backend_never_gates(self):
        result = self.baseline("M", "--repeat", "2", env={"FAKE_COLL_JITTER": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.manifest("M")["gates"]["repeatability"], [])
        text = read_text(os.path.join(self.results, "M", "report.md"))
        self.assertNotIn("repeat.", text)
        self.assertNotIn("## Repeatability", text)


class LocalStops(BaselineRuns):
    """One machine: a launch that hangs or freezes, a stop from outside (SIGINT, SIGTERM, SIGKILL), the resume."""

    def test_hung_launch_ends_at_its_bound_naming_the_point_and_the_case(self):
        """A launch that hangs, its process stopped (SIGSTOP) on top: the runner's bound ends it with SIGCONT then
        SIGTERM to its process group (a stopped process holds a SIGTERM until it runs again: without SIGCONT only
        the SIGKILL 10 s later would end it); the reason names the point and the last case finished."""
        marker = os.path.join(self.results, "H")
        process, err = self.freeze_hung_point("H", {"FAKE_COLL_HANG_POINT": "local.mpi4"}, "--launch-timeout", "4")
        self.assertEqual(process.returncode, 1, err)
        point = self.manifest("H")["points"]["local.mpi4"]
        self.assertEqual(point["status"], "failed")
        self.assertEqual(point["exit_code"], 4)
        first = next(r for r in self.records(marker) if r.get("point") == "local.mpi4")["case_id"]
        self.assertIn(f"launch exceeded --launch-timeout 4s; point local.mpi4: 1 case(s) finished before it, the last "
                      f"{first}: the hang is in the case after it", point["reason"])
        self.assertLess(point["elapsed_s"], 4 + 8, "SIGCONT + SIGTERM end a stopped launch at once, not the SIGKILL")
        self.assertEqual(self.processes_with(marker, "local.mpi4"), [], "nothing of the launch outlives it")
        log = read_text(os.path.join(marker, "run.log"))
        self.assertIn("passed its bound of 4s: stopping it", log)
        self.assertIn(f"local.mpi4 timed out: launch exceeded --launch-timeout 4s; point local.mpi4: 1 case(s)", log)
        with open(os.path.join(marker, "verdict.json"), encoding="utf-8") as handle:
            reasons = [r for r in json.load(handle)["reasons"] if r["code"] == "launch.timeout"]
        self.assertEqual([(r["point"], r["severity"]) for r in reasons], [("local.mpi4", "fail")])
        self.assertIn(f"the last {first}", reasons[0]["text"])

    def test_a_launch_frozen_whole_is_stopped_past_its_announced_deadline_not_its_bound(self):
        """No --launch-timeout: the double announces a 1 s deadline for the case it hangs in (as coll_perf
        --progress does), then its only process is frozen (SIGSTOP: no watchdog of its own left). The runner stops
        it 1 s + the 25 s grace later, long before the plan's bound, and names the case and the silent rank."""
        marker = os.path.join(self.results, "F")
        process, err = self.freeze_hung_point("F", {"FAKE_COLL_HANG_POINT": "local.mpi4",
                                                    "FAKE_COLL_PROGRESS_DEADLINE_S": "1"})
        self.assertEqual(process.returncode, 1, err)
        manifest = self.manifest("F")
        point = manifest["points"]["local.mpi4"]
        bound = next(launch for launch in manifest["plan"] if launch["name"] == "local.mpi4")["bound_s"]
        self.assertEqual((point["status"], point["exit_code"]), ("failed", 4))
        self.assertIn("launch stopped: no progress past its deadline (1 s, learned from the run, + 25 s grace)",
                      point["reason"])
        self.assertIn("hung in case the case after", point["reason"])
        self.assertRegex(point["reason"], r"ranks that stopped reporting: 0 \([^)]+\)")
        self.assertGreater(bound, 200, "the plan's bound is far beyond the announced deadline")
        self.assertLess(point["elapsed_s"], bound / 2, "ended by its progress, not by its bound")
        self.assertGreaterEqual(point["elapsed_s"], 1 + 25, "never before the deadline and the grace")
        self.assertEqual(self.processes_with(marker, "local.mpi4"), [], "nothing of the launch outlives it")
        self.assertNotIn("cclbench-progress", read_text(os.path.join(marker, "run.log")), "progress is not logged")

    def freeze_hung_point(self, run_id, knobs, *extra, point="local.mpi4"):
        """Runs a GPU-less baseline whose double hangs at `point` (knobs: FAKE_COLL_* settings), stops that launch's
        processes (SIGSTOP) once its first record is on disk, and waits for the baseline: (process, stderr). The
        launch runs in its own session, so whatever of it is left is ended too, however the test goes."""
        env = dict(os.environ, CCLBENCH_FAKE_GPU_COUNT="0", **knobs)
        marker = os.path.join(self.results, run_id)
        process = subprocess.Popen([sys.executable, CCLBENCH, "baseline"] + list(extra) + SMALL + ONCE +
                                   self.fake_args(run_id), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # generous: a hang detector, not a speed check (loaded CI)
            hung = []
            while time.monotonic() < deadline and not hung:
                hung = [pid for pid in self.processes_with(marker, point)
                        if any(r.get("point") == point for r in self.records(marker))]
                time.sleep(0.05)
            self.assertTrue(hung, "the hanging point never started")
            for pid in hung:
                os.kill(pid, signal.SIGSTOP)
            _out, err = process.communicate(timeout=300)
        finally:
            self.end_run(process, marker)
        return process, err

    def end_run(self, process, marker):
        """The baseline's process group, then every process of its launches (each in a session of its own):
        nothing a test started outlives it."""
        end_process_group(process)
        for pid in self.processes_with(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def records(self, run_dir):
        path = os.path.join(run_dir, "cases.jsonl")
        return read_jsonl(path) if os.path.exists(path) else []

    @staticmethod
    def processes_with(*words):
        """PIDs of live processes (not zombies) whose command line holds every word."""
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    argv = handle.read().decode(errors="replace")
                with open(f"/proc/{entry}/stat") as handle:
                    state = handle.read().rsplit(")", 1)[1].split()[0]
            except (OSError, ValueError, IndexError):
                continue
            if state != "Z" and all(word in argv for word in words) and "unittest" not in argv:
                found.append(int(entry))
        return found

    def test_resume_reruns_a_point_whose_records_do_not_parse(self):
        log = os.path.join(self.tmp, "coll.log")
        # Two GPUs: a timed point with repeats (the MPI backend's correctness point runs once).
        self.assertEqual(self.baseline("P", "--repeat", "2", env={"CCLBENCH_FAKE_GPU_COUNT": "2"}).returncode, 0)
        cases = os.path.join(self.results, "P", "cases.jsonl")
        records = read_jsonl(cases)
        # Corrupt the last measured record of rep2 (its status says ok but the time does not parse).
        index = max(i for i, r in enumerate(records) if r["point"] == "local.gpus2.rep2" and r["status"] == "ok")
        records[index]["time_us"] = None
        with open(cases, "w") as handle:
            handle.write("".join(json.dumps(r) + "\n" for r in records))
        resumed = run_cli(["baseline", "--resume", "P", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(self.invocations(log), ["sanity", "local.gpus2.rep2"])

    def test_resume_after_sigkill(self):
        log = os.path.join(self.tmp, "coll.log")
        env = dict(os.environ, FAKE_COLL_HANG_POINT="local.gpus2.rep2", FAKE_COLL_LOG=log, CCLBENCH_FAKE_GPU_COUNT="2")
        process = subprocess.Popen([sys.executable, CCLBENCH, "baseline", "--repeat", "3"] + SMALL + self.fake_args("K"),
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # generous: a hang detector, not a speed check (loaded CI)
            while time.monotonic() < deadline:
                try:
                    if self.manifest("K")["points"]["local.gpus2.rep2"]["status"] == "running" and \
                            "local.gpus2.rep2" in self.invocations(log):
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.1)
            else:
                self.fail("the baseline never reached the second point")
            time.sleep(0.3)
        finally:
            # The baseline (SIGKILL: it cannot stop its launch) and then the hung coll_perf it started, which runs in
            # a session of its own.
            self.end_run(process, os.path.join(self.results, "K"))
        self.assertEqual(self.manifest("K")["points"]["local.gpus2.rep1"]["status"], "complete")
        # A crash in the middle of an append leaves a record's prefix without a newline.
        with open(os.path.join(self.results, "K", "cases.jsonl"), "a") as handle:
            handle.write('{"point": "local.gpus2.rep2", "case_id": "all_red')
        os.remove(log)
        resumed = run_cli(["baseline", "--resume", "K", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        # Then the smoke's own points (plan/smoke_cases.py), which had not run before the kill.
        self.assertEqual(self.invocations(log), ["sanity", "local.gpus2.rep2", "local.gpus2.rep3"] + SMOKE_COLL_LAUNCHES)
        report = run_cli(["report", os.path.join(self.results, "K")], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(self.results, "K", "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("hold torn records", anomalies)
        self.assertNotIn("missing cases", anomalies, "the killed attempt's records are superseded")
        self.assertNotIn("launch not complete", anomalies)

    def interrupt_at(self, run_id, point, signum, extra_env=None):
        """A baseline (one repeat) stopped by signum while `point` runs (the double hangs there after writing one
        record): (exit status, stderr)."""
        env = dict(os.environ, FAKE_COLL_HANG_POINT=point, CCLBENCH_FAKE_GPU_COUNT="0")
        env.update(extra_env or {})
        process = subprocess.Popen([sys.executable, CCLBENCH, "baseline"] + SMALL + ONCE + self.fake_args(run_id),
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + 300  # generous: a hang detector, not a speed check (loaded CI)
            while time.monotonic() < deadline:
                try:
                    if self.manifest(run_id)["points"][point]["status"] == "running":
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.1)
            else:
                self.fail(f"the baseline never reached {point}")
            # The signal lands once the double has written the point's one record (it hangs after it): a fixed wait
            # was too short on a loaded machine, and the record the verdict must keep was not there yet.
            cases = os.path.join(self.results, run_id, "cases.jsonl")
            while time.monotonic() < deadline:
                try:
                    if any(record.get("point") == point for record in read_jsonl(cases)):
                        break
                except (OSError, ValueError):
                    pass
                time.sleep(0.1)
            else:
                self.fail(f"{point} never wrote its record")
            process.send_signal(signum)
            _out, err = process.communicate(timeout=300)
        finally:
            end_process_group(process)
        return process.returncode, err

    def assertInterruptedVerdict(self, run_id, err, signal_name, plan, stopped):
        """After a signal: the manifest as before (the run and the stopped launch 'interrupted', the launches after
        it 'pending'), and report.md and verdict.json, valid, on what was measured: INCOMPLETE on run.interrupted
        (naming the signal, the stopped launch and every launch not run) and the stopped launch's missing cases,
        its one record measured before the signal kept. The last line: the signal, the verdict, how to resume.
        Returns the verdict."""
        run = os.path.join(self.results, run_id)
        not_run = plan[plan.index(stopped) + 1:]
        last = err.strip().splitlines()[-1]
        self.assertNotIn("Traceback", err)
        self.assertIn(f"interrupted by {signal_name}", last)
        self.assertIn(f"verdict: {os.path.join(run, 'verdict.json')}", last)
        self.assertTrue(last.endswith(f"resume with: cclbench baseline --resume {run_id}"), last)
        manifest = self.manifest(run_id)
        self.assertEqual((manifest["status"], manifest["invocations"][-1]["signal"]), ("interrupted", signal_name))
        self.assertEqual(manifest["points"][stopped]["status"], "interrupted")
        self.assertEqual([name for name in plan if manifest["points"][name]["status"] == "pending"], not_run)
        for schema, name in (("verdict.schema.json", "verdict.json"), ("run_manifest.schema.json", "run_manifest.json")):
            ok, errors = validate(schema, os.path.join(run, name))
            self.assertTrue(ok, errors)
        self.assertEqual([name for name in os.listdir(run) if name.endswith(".tmp")], [], "no half-written file")
        with open(os.path.join(run, "verdict.json"), encoding="utf-8") as handle:
            verdict = json.load(handle)
        self.assertEqual((verdict["overall"], verdict["headline"], verdict["exit_code"]), ("INCOMPLETE", "INCOMPLETE (2)", 1),
                         "an incomplete baseline is no clean bill of health, nor a FAILED one")
        fails = [r for r in verdict["reasons"] if r["severity"] == "fail"]
        self.assertEqual(sorted(r["code"] for r in fails), ["case.missing", "run.interrupted"])
        interrupted = next(r for r in fails if r["code"] == "run.interrupted")
        self.assertIs(verdict["reasons"][0], interrupted, "the interruption comes first")
        self.assertEqual(interrupted["numbers"], {"launches_planned": len(plan), "launches_complete": plan.index(stopped),
                                                  "launches_stopped": 1, "launches_not_run": len(not_run)})
        self.assertIn(f"{signal_name} stopped the run before its plan completed", interrupted["text"])
        self.assertIn(f"stopped mid-way (its cases measured before the signal are kept): {stopped}", interrupted["text"])
        if not_run:
            self.assertIn("not run: " + ", ".join(not_run) + ";", interrupted["text"])
        else:
            self.assertNotIn("not run:", interrupted["text"])
        self.assertEqual(next(r for r in fails if r["code"] == "case.missing")["point"], stopped)
        report = read_text(os.path.join(run, "report.md"))
        self.assertTrue(report.startswith("# INCOMPLETE (2)\n"), report[:200])
        self.assertIn(f"| run interrupted | - | {signal_name} stopped the run", report)
        with open(os.path.join(run, "summary.csv")) as handle:
            rows = [row for row in csv.DictReader(handle) if row["point"] == stopped]
        self.assertEqual(len(rows), 1, "the one record the double wrote before the signal")
        self.assertEqual(rows[0]["status"], "ok")
        self.assertTrue(rows[0]["time_us_p50"])
        return verdict

    def assertResumedToTheEnd(self, run_id, plan):
        """--resume completes the run and its verdict replaces the interrupted one."""
        resumed = run_cli(["baseline", "--resume", run_id, "--results", self.results])
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        run = os.path.join(self.results, run_id)
        manifest = self.manifest(run_id)
        self.assertEqual(manifest["status"], "complete")
        self.assertEqual({manifest["points"][name]["status"] for name in plan}, {"complete"})
        self.assertNotIn("signal", manifest["invocations"][-1])
        ok, errors = validate("verdict.schema.json", os.path.join(run, "verdict.json"))
        self.assertTrue(ok, errors)
        with open(os.path.join(run, "verdict.json"), encoding="utf-8") as handle:
            verdict = json.load(handle)
        self.assertEqual((verdict["overall"], verdict["reasons"]), ("HEALTHY", []))
        self.assertTrue(read_text(os.path.join(run, "report.md")).startswith("# HEALTHY\n"))
        self.assertIn(f"cclbench: HEALTHY; verdict: {os.path.join(run, 'verdict.json')}", resumed.stderr.strip().splitlines()[-1])

    def test_sigint_stops_cleanly_writes_the_verdict_and_resumes(self):
        """Ctrl-C in the last launch: exit 130, the verdict on the three launches complete and the one record of
        the stopped one; --resume completes the run with a normal verdict."""
        plan = ["doctor.vm", "topology.vm", "sanity", "local.mpi4"]
        code, err = self.interrupt_at("I", "local.mpi4", signal.SIGINT)
        self.assertEqual(code, 130, err)
        self.assertInterruptedVerdict("I", err, "SIGINT", plan, "local.mpi4")
        self.assertEqual(self.manifest("I")["points"]["local.mpi4"]["reason"], "interrupted by SIGINT")
        self.assertResumedToTheEnd("I", plan)

    def test_sigterm_mid_plan_writes_the_verdict_naming_what_did_not_run(self):
        """SIGTERM (a CI job's time limit) in the middle of the one-GPU plan: exit 143; the verdict judges the
        one-rank point measured before it (its tables and a data check that passes) and names the stopped point
        and the three smoke launches not run (missing: no data, never zeros); --resume runs them."""
        smoke = [f"smoke.{name}.rep1" for name in ("copy", "collective", "graph")]
        plan = ["doctor.vm", "topology.vm", "sanity", "p2p.vm", "local.gpu1", "local.share-gpu4"] + smoke
        code, err = self.interrupt_at("T", "local.share-gpu4", signal.SIGTERM, {"CCLBENCH_FAKE_GPU_COUNT": "1"})
        self.assertEqual(code, 143, err)
        verdict = self.assertInterruptedVerdict("T", err, "SIGTERM", plan, "local.share-gpu4")
        checks = {row["point"]: row["checks"]["data"] for row in verdict["points"]}
        self.assertEqual(checks["local.gpu1"], "pass", "measured before the signal and judged")
        self.assertEqual(checks["local.share-gpu4"], "fail")
        self.assertEqual({checks[point] for point in ("smoke.collective", "smoke.graph")}, {"skip"},
                         "not run: nothing judged, no zeros")
        run = os.path.join(self.results, "T")
        measured = [r for r in read_jsonl(os.path.join(run, "cases.jsonl")) if r["point"] == "local.gpu1"]
        with open(os.path.join(run, "summary.csv")) as handle:
            rows = [row for row in csv.DictReader(handle) if row["point"] == "local.gpu1"]
        self.assertTrue(measured)
        self.assertEqual(sorted(row["case_id"] for row in rows), sorted(r["case_id"] for r in measured))
        self.assertIn("| size | local.gpu1 |", read_text(os.path.join(run, "report.md")), "its tables are in the report")
        self.assertFalse(any(r["point"].startswith("smoke.") for r in read_jsonl(os.path.join(run, "cases.jsonl"))))
        self.assertResumedToTheEnd("T", plan)

    def test_a_second_signal_while_the_verdict_is_written_leaves_no_half_file(self):
        """A SIGTERM that lands while the verdict of a SIGINT is being written (here: inside verdict.json's write,
        before its rename): the write stops, verdict.json is still the earlier one whole, no temporary file is
        left, the manifest says interrupted by the first signal, and the line says so and how to resume."""
        code, err = self.interrupt_at("D", "local.mpi4", signal.SIGINT)
        self.assertEqual(code, 130, err)
        run = os.path.join(self.results, "D")
        before = read_text(os.path.join(run, "verdict.json"))
        runner = Baseline(self.manifest("D")["plan_inputs"], run, resume=True, argv=["cclbench"])
        runner.prepare()
        runner.manifest["points"]["local.mpi4"]["status"] = "running"  # the launch the first signal stopped
        real_fsync = os.fsync

        def fsync(fd):
            if os.readlink(f"/proc/self/fd/{fd}").startswith(os.path.join(run, ".verdict.json.")):
                raise Interrupted(signal.SIGTERM)  # what Baseline.on_signal raises between two launches
            return real_fsync(fd)
        with mock.patch("os.fsync", side_effect=fsync):
            error = runner.stopped(signal.SIGINT)
        self.assertEqual(error.exit_code, 130)
        self.assertIn("interrupted by SIGINT; verdict not written: a second signal (SIGTERM)", str(error))
        self.assertTrue(str(error).endswith("resume with: cclbench baseline --resume D"), str(error))
        self.assertEqual(read_text(os.path.join(run, "verdict.json")), before, "the earlier verdict, whole")
        self.assertEqual([name for name in os.listdir(run) if name.endswith(".tmp")], [], "no half-written file")
        manifest = self.manifest("D")
        self.assertEqual((manifest["status"], manifest["invocations"][-1]["signal"]), ("interrupted", "SIGINT"))
        self.assertEqual(manifest["points"]["local.mpi4"]["status"], "interrupted")


class TwoNodeRuns(BaselineRuns):
    """Two hosts through the fake launcher: the sweep, probes, gates, rails, resume."""

    def test_gpu_less_hosts_run_the_mpi_backend_and_name_a_host_with_gpus(self):
        """No GPU where cclbench runs, none given: the MPI backend on both hosts. A host whose
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
        self.assertFailsOn(result, "T", ["doctor.fail"])
        manifest = self.manifest("T")
        self.assertEqual(manifest["mode"], "multi_node")
        self.assertEqual(len(manifest["plan"]), 2 + 12 + 7, "the doctor per host, 12 launches (topology, sanity, P2P, 7 points), one TUNING probe per point")
        self.assertTrue(all(state["status"] == "complete" for state in manifest["points"].values()))
        self.assertEqual(len(self.invocations(log)), 2 + 12 + 7, "every launch goes through mpirun, the doctor too")
        run = os.path.join(self.results, "T")
        self.assertEqual(sorted(os.listdir(os.path.join(run, "topology"))), ["127.0.0.1.json", "localhost.json"])
        self.assertEqual(sorted(os.listdir(os.path.join(run, "p2p"))), ["127.0.0.1.json", "localhost.json"])
        points = {r["point"] for r in read_jsonl(os.path.join(run, "cases.jsonl"))}
        self.assertEqual(len(points), 2 + 5)
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        self.assertIn("inter.rail-mlx5_3", text)
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
        self.assertIn("| inter.cross0.rails-both and 4 more | 15 |", text, "rank bindings, grouped over points")
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

    def test_a_failed_path_leaves_out_the_launches_across_it_unless_run_despite_doctor(self):
        """The runner's gate (end to end on the virtual cluster: tests/cluster/test_path_mtu.py): once the doctor
        failed the path node5 <-> node7, the launches over both hosts are left out; those on one host, the doctor's
        own, and everything with --run-despite-doctor run."""
        checks = [{"id": "path_mtu", "status": "fail", "host": "node5", "subject": "node5:eth0 -> node7:eth0",
                   "detail": "MTU 9000 at both ends, but the largest don't-fragment packet ... is 1500 bytes"}]
        launches = [{"name": "doctor.node5", "kind": "doctor", "hosts": ["node5"]},
                    {"name": "sanity", "kind": "sanity", "hosts": ["node5", "node7"]},
                    {"name": "intra.node5", "kind": "intra", "hosts": ["node5"]},
                    {"name": "inter.cross0.rail-mlx5_3", "kind": "inter", "hosts": ["node5", "node7"]},
                    {"name": "inter.three", "kind": "inter", "hosts": ["node5", "node9"]}]
        for despite, left_out in ((False, ["sanity", "inter.cross0.rail-mlx5_3"]), (True, [])):
            runner = Baseline({"run_despite_doctor": despite}, self.tmp, resume=False, launches=launches)
            self.assertEqual([l["name"] for l in launches if runner.blocked_by_doctor(l)], [], "before the doctor ran")
            runner.doctor_paths = failed_paths(checks)
            reasons = {l["name"]: runner.blocked_by_doctor(l) for l in launches}
            self.assertEqual([name for name, reason in reasons.items() if reason], left_out, f"despite={despite}")
            for name in left_out:
                self.assertIn("path_mtu node5:eth0 -> node7:eth0: MTU 9000 at both ends", reasons[name])

    def test_gpus_per_node_mismatch(self):
        result = self.baseline("G", *TWO_NODES, env={"FAKE_GPUS": "4"})
        self.assertRunError(result, 2, "has 4 GPU(s) but --gpus-per-node is 8")

    def test_resume_after_failure_skips_finished_points(self):
        log = os.path.join(self.tmp, "coll.log")
        failing = "inter.rail-mlx5_0"
        first = self.baseline("R", *TWO_NODES, env={"FAKE_COLL_FAIL_POINT": failing, "FAKE_COLL_LOG": log})
        self.assertRunError(first, 1, failing)
        self.assertEqual(self.manifest("R")["points"][failing]["status"], "failed")
        self.assertEqual(self.manifest("R")["points"][failing]["exit_code"], 5)
        before = self.invocations(log)
        self.assertEqual(len(before), 1 + 2 + 5, "the failure does not stop the other points")
        os.remove(log)
        second = run_cli(["baseline", "--resume", "R", "--results", self.results], env={"FAKE_COLL_LOG": log})
        self.assertFailsOn(second, "R", ["doctor.fail"])
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
        verdict = self.assertFailsOn(result, "RL", ["doctor.fail", "rail.unbalanced", "rail.unbound"])
        self.assertEqual({row["host"]: row["rails"] for row in verdict["hosts"]}, {"localhost": "fail", "127.0.0.1": "fail"})
        run = os.path.join(self.results, "RL")
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("| rail imbalance | inter.cross0.rails-both | rail shares mlx5_0:1 91%, mlx5_3:1 9%", anomalies)
        self.assertIn("| rail imbalance | inter.rail-mlx5_0 | traffic on mlx5_3:1, which NCCL_IB_HCA did not bind",
                      anomalies)
        self.assertNotIn("| rail imbalance | intra.", anomalies, "rails matter for inter-node points only")

    def test_report_anomalies(self):
        # A transport gate failure at one inter-node point, and impossible bandwidth everywhere.
        result = self.baseline("A", *TWO_NODES, "--no-tuning-probe", env={"FAKE_COLL_EXIT": "3", "FAKE_COLL_EXIT_POINT": "inter.rail-mlx5_3",
                                                     "FAKE_COLL_TIME_SCALE": "0.00001"})
        self.assertRunError(result, 1, "transport expectation failed")
        run = os.path.join(self.results, "A")
        with open(os.path.join(run, "cases.jsonl"), "a") as handle:
            handle.write(json.dumps({"point": "intra.localhost", "case_id": "all_reduce.float.sum.out.8K",
                                     "collective": "all_reduce", "requested_bytes": 8192, "status": "ok", "wrong": 3,
                                     "time_us": {"mean": 1.0, "p50": 1.0}, "busbw_gbps": None}) + "\n")
        report = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        self.assertIn("| transport mismatch | inter.rail-mlx5_3 |", anomalies)
        self.assertIn("| wrong data | intra.localhost | all_reduce.float.sum.out.8K: 3 wrong element(s) |", anomalies)
        # The rails' rate is each host's topo_map port rate (the double's: 400 Gb/sec): 400 / 8 = 50 GB/s a rail.
        self.assertRegex(anomalies, r"above physical limit \| inter\.cross0\.rails-both \| .* > 100 GB/s \(2 x 400 Gb/s")
        self.assertRegex(anomalies, r"above physical limit \| inter\.rail-mlx5_0 \| .* > 50 GB/s \(1 x 400 Gb/s")
        # No GPU on this machine: the doctor read no PCIe link, so no intra-node ceiling, and the report says why.
        self.assertNotIn("above physical limit | intra.", anomalies)
        self.assertIn("| intra.localhost | none | no ceiling: a GPU's PCIe link is unknown", text)
        self.assertIn("| FAILED (coll_perf exit 3) |", text, "the transport table marks the failed gate")
        self.assertEqual(anomalies.count("above physical limit | inter.cross0.rails-both"), 1, "one row per point")
        # A host whose rates are unknown: no ceiling for the points over it, said so, never a guessed one.
        os.remove(os.path.join(run, "topology", "127.0.0.1.json"))
        report = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(report.returncode, 0, report.stderr)
        text = read_text(os.path.join(run, "report.md"))
        self.assertNotIn("above physical limit", text)
        self.assertIn("| inter.rail-mlx5_0 | none | no ceiling: line rate of mlx5_0:1 unknown on 127.0.0.1 |", text)


if __name__ == "__main__":
    unittest.main()
