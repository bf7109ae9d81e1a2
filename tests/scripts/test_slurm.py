"""Slurm: the launcher choice (fake srun/ompi_info, any machine) and real runs on a private one-node
Slurm (munged, slurmctld, slurmd started by the test as root; skipped with the reason elsewhere):
a 4-task `coll_perf --backend mpi` through srun, `baseline` end to end inside an allocation, `smoke`
with mpirun inside the allocation, and a launch timeout, Ctrl-C and a killed rank under srun."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from helpers import (BINARY_DIR, CCLBENCH, FAKE_BIN, FAKE_MPIRUN, REAL_APPS, TempDirTest, end_process_group,
                     main_for_ctest, read_jsonl, run_cli, validate)

COLL_PERF = os.path.join(BINARY_DIR, "bench", "apps", "coll_perf")
# Four ranks on a 2-core machine: let waiting ranks yield instead of spinning.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}


def write_script(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + text + "\n")
    os.chmod(path, 0o755)
    return path


class LauncherChoice(TempDirTest):
    """`--launcher auto` from what srun and the MPI library say, with stand-ins for both."""

    def setUp(self):
        super().setUp()
        self.bin = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin)

    def fake_srun(self, plugins):
        listing = "MPI plugin types are...\\n" + "".join(f"\\t{p}\\n" for p in plugins)
        write_script(self.bin, "srun", f'[ "$1" = "--mpi=list" ] && printf "{listing}" && exit 0\nexit 1')

    def plan(self, extra=(), allocation=True, mpirun=FAKE_MPIRUN, **env):
        base = {"PATH": self.bin + ":/usr/bin:/bin"}
        if allocation:
            base.update(SLURM_JOB_ID="42", SLURM_JOB_NODELIST="node[5,7]")
        base.update(env)
        plan_json = os.path.join(self.tmp, "plan.json")
        result = run_cli(["plan", "--hcas", "mlx5_0:1,mlx5_3:1", "--mpirun", mpirun, "--results", self.results,
                          "--json", plan_json] + list(extra), env=base)
        document = None
        if result.returncode == 0:
            with open(plan_json) as handle:
                document = json.load(handle)
            ok, errors = validate("plan.schema.json", plan_json)
            self.assertTrue(ok, errors)
        return result, document

    def test_srun_with_pmix_inside_an_allocation(self):
        self.fake_srun(["none", "pmi2", "pmix"])
        result, document = self.plan(SLURM_GPUS_PER_NODE="gpu:4")
        self.assertEqual(result.returncode, 0, result.stderr)
        launcher = document["plan_inputs"]["launcher"]
        self.assertEqual((launcher["name"], launcher["mpi"]), ("srun", "pmix"))
        self.assertIn("Slurm job 42", launcher["reason"])
        lines = result.stdout.splitlines()
        self.assertTrue(lines and not any(line.startswith(FAKE_MPIRUN) for line in lines), result.stdout)
        # 2 nodes x 4 GPUs (SLURM_GPUS_PER_NODE), every rank started by srun on the allocation's nodes.
        self.assertIn("srun --mpi=pmix --kill-on-bad-exit=1 -n 8 --nodes 2 --nodelist node5,node7 "
                      "--ntasks-per-node 4 ", result.stdout)
        self.assertIn("srun --mpi=pmix --kill-on-bad-exit=1 -n 1 --nodes 1 --nodelist node7 ", result.stdout)
        # Exported variables stay in the exact command (srun's --export would split NCCL_IB_HCA at its comma).
        self.assertIn("env NCCL_CROSS_NIC=1 NCCL_IB_HCA==mlx5_0:1,mlx5_3:1 srun --mpi=pmix", result.stdout)
        for launch in document["launches"]:
            if launch["kind"] in ("inter", "intra", "sanity"):
                self.assertEqual(launch["argv"][launch["argv"].index("-n") + 1], str(launch["nranks"]))

    def test_pmi2_when_srun_has_no_pmix(self):
        self.fake_srun(["none", "pmi2"])
        result, document = self.plan(["--gpus-per-node", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(document["plan_inputs"]["launcher"]["mpi"], "pmi2")
        self.assertIn("srun --mpi=pmi2 ", result.stdout)

    def test_mpirun_when_srun_offers_no_pmi(self):
        self.fake_srun(["none", "cray_shasta"])
        result, document = self.plan(["--gpus-per-node", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        launcher = document["plan_inputs"]["launcher"]
        self.assertEqual(launcher["name"], "mpirun")
        self.assertIn("neither pmix nor pmi2", launcher["reason"])
        self.assertIn(f"{FAKE_MPIRUN} ", result.stdout)
        self.assertNotIn("srun", result.stdout)

    def test_mpirun_when_open_mpi_has_no_pmi_client(self):
        self.fake_srun(["pmix"])
        mpirun = write_script(self.bin, "mpirun", 'echo "mpirun (Open MPI) 4.1.4"')
        write_script(self.bin, "ompi_info", 'echo "                 MCA ess: env (MCA v2.1.0, API v3.0.0)"')
        result, document = self.plan(["--gpus-per-node", "2"], mpirun=mpirun)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(document["plan_inputs"]["launcher"]["name"], "mpirun")
        self.assertIn("no PMI client", document["plan_inputs"]["launcher"]["reason"])
        write_script(self.bin, "ompi_info", 'echo "                 MCA ess: pmi (MCA v2.1.0, API v3.0.0)"')
        result, document = self.plan(["--gpus-per-node", "2"], mpirun=mpirun)
        self.assertEqual(document["plan_inputs"]["launcher"]["name"], "srun", result.stderr)

    def test_forced_launchers(self):
        self.fake_srun(["pmix"])
        result, document = self.plan(["--gpus-per-node", "2", "--launcher", "mpirun"])
        self.assertEqual(document["plan_inputs"]["launcher"]["name"], "mpirun", result.stderr)
        self.assertIn("--host node5:2,node7:2", result.stdout)
        result, document = self.plan(["--gpus-per-node", "2", "--launcher", "srun", "--srun-args=--cpu-bind=none"],
                                     allocation=False, SLURM_JOB_NODELIST="node[5,7]")
        self.assertOneLineError(result, 2, "not inside a Slurm allocation")
        result, document = self.plan(["--gpus-per-node", "2", "--launcher", "srun", "--srun-args=--cpu-bind=none -l"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(document["plan_inputs"]["launcher"]["args"], ["--cpu-bind=none", "-l"])
        self.assertIn("--ntasks-per-node 2 --cpu-bind=none -l ", result.stdout)

    def test_outside_an_allocation_mpirun(self):
        self.fake_srun(["pmix"])
        result, document = self.plan(["--hosts", "node5,node7", "--gpus-per-node", "2"], allocation=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(document["plan_inputs"]["launcher"]["name"], "mpirun")
        self.assertNotIn("srun", result.stdout)


def cclbench_cmd(*args):
    return [sys.executable, CCLBENCH] + list(args)


def processes_mentioning(marker):
    """pids of the ranks of the run whose unique results folder is `marker`: the fake coll_perf's own
    processes, not srun (two processes whose command lines name the same program and folder: counting
    them once let a test kill rank 1 of 4 while slurmstepd was still starting ranks 2 and 3, which
    proctrack/linuxproc then missed, and the step never ended)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().decode(errors="replace").split("\0")
            with open(f"/proc/{entry}/stat") as handle:
                zombie = handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        program = argv[1] if argv and os.path.basename(argv[0]).startswith("python") and len(argv) > 1 else argv[0]
        if not zombie and program.endswith("fake_bin/coll_perf") and any(marker in arg for arg in argv):
            found.append(int(entry))
    return found


def wait_for(condition, deadline_s, interval=0.2):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    return condition()


class RealSlurm(unittest.TestCase):
    """Against slurmctld/slurmd/munged started here (root only; skipped with the reason otherwise)."""

    @classmethod
    def setUpClass(cls):
        from slurm_cluster import SlurmCluster
        cls.cluster = SlurmCluster.start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cclbench-slurm-test-")
        os.chmod(self.tmp, 0o755)
        self.results = os.path.join(self.tmp, "results")
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            subprocess.run(["scancel", job], env=self.cluster.env(), capture_output=True)
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        return self.cluster.env(**MPI_ENV, CCLBENCH_FAKE_GPU_COUNT="0", **extra)

    def need_coll_perf(self):
        if not os.access(COLL_PERF, os.X_OK):
            self.skipTest(f"{COLL_PERF} is not built")

    def in_allocation(self, argv, tasks=4):
        """argv run by salloc inside a fresh allocation of `tasks` tasks on the one node."""
        return subprocess.run(["salloc", "-n", str(tasks), "-N", "1", "-J", "cclbench-test"] + argv,
                              capture_output=True, text=True, env=self.env(), timeout=600)

    def allocation(self, tasks=4):
        """A held allocation (salloc --no-shell) and the environment a shell inside it would have."""
        result = subprocess.run(["salloc", "--no-shell", "-n", str(tasks), "-N", "1", "-J", "cclbench-test"],
                                capture_output=True, text=True, env=self.env(), timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        job = [word for word in result.stderr.split() if word.isdigit()][0]
        self.jobs.append(job)
        return self.env(SLURM_JOB_ID=job, SLURM_JOBID=job, SLURM_JOB_NODELIST=self.cluster.node,
                        SLURM_NNODES="1", SLURM_NTASKS=str(tasks))

    def manifest(self, run_id):
        with open(os.path.join(self.results, run_id, "run_manifest.json")) as handle:
            return json.load(handle)

    def test_coll_perf_four_tasks_through_srun(self):
        self.need_coll_perf()
        jsonl = os.path.join(self.tmp, "cases.jsonl")
        result = subprocess.run(["srun", "--mpi=pmix", "-n", "4", COLL_PERF, "--backend", "mpi", "-b", "8K", "-e", "64K",
                                 "-f", "8", "-n", "2", "-w", "1", "--coll", "all_reduce,alltoall", "--jsonl", jsonl],
                                capture_output=True, text=True, env=self.env(), timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        records = read_jsonl(jsonl)
        # Rank 0 writes one record per collective, size and placement, each over the four srun tasks.
        self.assertEqual(sorted((r["collective"], r["bytes"], r["in_place"]) for r in records),
                         [(collective, size, in_place) for collective in ("all_reduce", "alltoall")
                          for size in (8192, 65536) for in_place in (False, True)])
        for record in records:
            self.assertEqual((record["nranks"], record["status"], record["wrong"]), (4, "ok", 0), record)

    def test_baseline_inside_an_allocation_uses_srun(self):
        self.need_coll_perf()
        # --bin-dir: the programs of the build under test (CCLBENCH_BINARY_DIR), not <repo>/build, the default
        result = self.in_allocation(cclbench_cmd("baseline", "--bin-dir", REAL_APPS, "--results", self.results, "--run-id", "S", "-b", "8K",
                                                 "-e", "16K", "-n", "2", "-w", "1", "--coll", "all_reduce", "--repeat", "1"))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        manifest = self.manifest("S")
        self.assertEqual(manifest["status"], "complete")
        launcher = manifest["plan_inputs"]["launcher"]
        self.assertEqual((launcher["name"], launcher["mpi"]), ("srun", "pmix"), launcher)
        ranked = [launch for launch in manifest["plan"] if launch["nranks"] > 1]
        self.assertEqual([launch["name"] for launch in ranked], ["sanity", "local.mpi4"])
        for launch in ranked:
            self.assertTrue(launch["command"].startswith("srun --mpi=pmix --kill-on-bad-exit=1 -n 4 --nodes 1 "),
                            launch["command"])
        records = read_jsonl(os.path.join(self.results, "S", "cases.jsonl"))
        self.assertEqual(sorted((r["bytes"], r["in_place"]) for r in records),
                         [(8192, False), (8192, True), (16384, False), (16384, True)])
        self.assertTrue(all(r["nranks"] == 4 and r["status"] == "ok" for r in records), records)
        with open(os.path.join(self.results, "S", "run.log")) as handle:
            self.assertIn("$ srun --mpi=pmix", handle.read())
        ok, errors = validate("run_manifest.schema.json", os.path.join(self.results, "S", "run_manifest.json"))
        self.assertTrue(ok, errors)

    def test_smoke_with_mpirun_inside_the_allocation(self):
        self.need_coll_perf()
        result = self.in_allocation(cclbench_cmd("smoke", "--launcher", "mpirun", "--bin-dir", REAL_APPS, "--results", self.results,
                                                 "--run-id", "M"))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        manifest = self.manifest("M")
        self.assertEqual(manifest["plan_inputs"]["launcher"]["name"], "mpirun")
        four = [launch for launch in manifest["plan"] if launch["nranks"] == 4]
        self.assertEqual(len(four), 1)
        self.assertTrue(four[0]["command"].startswith("mpirun "), four[0]["command"])
        records = read_jsonl(os.path.join(self.results, "M", "cases.jsonl"))
        self.assertTrue(any(r["nranks"] == 4 and r["status"] == "ok" for r in records))

    def hanging_baseline(self, run_id, extra=(), **env_extra):
        env = self.allocation(4)
        env.update(FAKE_COLL_HANG_POINT="sanity", **env_extra)
        argv = cclbench_cmd("baseline", "--bin-dir", FAKE_BIN, "--results", self.results, "--run-id", run_id,
                            "-b", "8K", "-e", "16K", *extra)
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)

    def assert_ranks_gone(self, marker):
        left = wait_for(lambda: not processes_mentioning(marker), 60)
        self.assertTrue(left, f"ranks still running: {processes_mentioning(marker)}")

    def test_launch_timeout_stops_every_rank(self):
        process = self.hanging_baseline("T", ["--launch-timeout", "10"])
        _, err = process.communicate(timeout=300)
        self.assertNotEqual(process.returncode, 0, err)
        point = self.manifest("T")["points"]["sanity"]
        self.assertEqual(point["status"], "failed")
        self.assertIn("--launch-timeout", point["reason"])
        self.assert_ranks_gone(os.path.join(self.results, "T"))

    def test_ctrl_c_stops_every_rank_and_keeps_records(self):
        process = self.hanging_baseline("C")
        marker = os.path.join(self.results, "C")
        try:
            started = wait_for(lambda: len(processes_mentioning(marker)) == 4 and
                               os.path.exists(os.path.join(marker, "sanity.jsonl")), 120)
            self.assertTrue(started, "the four ranks did not start and write")
            os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
            _, err = process.communicate(timeout=120)
        finally:
            end_process_group(process)
        self.assertEqual(process.returncode, 130, err)
        self.assertIn("resume with: cclbench baseline --resume C", err)
        manifest = self.manifest("C")
        self.assertEqual((manifest["status"], manifest["points"]["sanity"]["status"]), ("interrupted", "interrupted"))
        self.assertTrue(read_jsonl(os.path.join(marker, "sanity.jsonl")), "the record written before Ctrl-C is kept")
        self.assert_ranks_gone(marker)

    def test_killed_rank_takes_the_others_down(self):
        process = self.hanging_baseline("K")
        marker = os.path.join(self.results, "K")
        try:
            ranks = wait_for(lambda: processes_mentioning(marker) if len(processes_mentioning(marker)) == 4 else None,
                             120)
            self.assertTrue(ranks, "the four ranks did not start")
            os.kill(ranks[-1], signal.SIGKILL)
            _, err = process.communicate(timeout=180)
        finally:
            end_process_group(process)
        self.assertNotEqual(process.returncode, 0, err)
        point = self.manifest("K")["points"]["sanity"]
        self.assertEqual(point["status"], "failed")
        self.assertIsNotNone(point["exit_code"])
        self.assert_ranks_gone(marker)


if __name__ == "__main__":
    main_for_ctest()
