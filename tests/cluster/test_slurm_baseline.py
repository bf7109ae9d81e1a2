#!/usr/bin/env python3
"""Slurm on the virtual cluster: `baseline` inside `salloc -N 2` runs its cross-host plan with srun.

Slurm across the nodes is tests/cluster/vslurm.py (munged + slurmctld in node5, one slurmd per node).
cclbench runs in node5 inside `salloc -N 2`; with `--launcher auto` it picks srun (srun --mpi=pmix, which
this Open MPI speaks), and every launch - the doctor per host, the path MTU probes, topology, the sanity
pass and the inter-node point - starts its ranks on node5 and node7 through the two slurmds. The ranks
run the real coll_perf on the MPI backend (TCP over the rails, srun hands them the caller's OMPI_MCA_*
environment); until the GPU-less cross-host plan lands the plan needs a GPU per host, so topo_map and
p2p_matrix are the test fakes with one GPU.

Asserted: exit 0; the manifest's launcher is srun; run.log's launches start with srun --mpi=pmix and
name both nodes; the inter point's records were measured by 2 ranks; the doctor has both hosts' results
and the path MTU check passed over both rails; node7's rails carried the inter point's bytes (its own
netdev counters: an independent source).

CTest `cluster_slurm_baseline` (label cluster); exits 77 (skip) with the reason where no cluster or no
Slurm can run.
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
import vslurm  # noqa: E402
from cluster_setup import (CCLBENCH, COLL_PERF, RAIL_SUBNETS, fake_gpu_bin_dir, fake_hca_fail_codes,  # noqa: E402
                           close_slurm, main, open_slurm)

NODES = ("node5", "node7")
INTER = "inter.cross0.rail-mlx5_0"


class SlurmBaseline(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not vslurm.find("salloc"):
            raise unittest.SkipTest("salloc is not installed")
        open_slurm(cls, NODES, tools=("coll_perf",))
        cls.work = tempfile.TemporaryDirectory(prefix="cclbench-vslurm-baseline-")
        cls.bin_dir = fake_gpu_bin_dir(os.path.join(cls.work.name, "bin"))
        probe = cls.cluster.exec("node5", ["srun", "--mpi=list"], env=cls.slurm.env(), capture_output=True, text=True,
                                 timeout=60)
        if "pmix" not in probe.stdout + probe.stderr:
            cls.tearDownClass()
            raise unittest.SkipTest(f"srun offers no PMIx ({(probe.stdout + probe.stderr).strip()[:200]})")

    @classmethod
    def tearDownClass(cls):
        try:
            close_slurm(cls)
        finally:
            cls.work.cleanup()

    def test_baseline_inside_salloc_runs_its_cross_host_plan_with_srun(self):
        before = {link: self.cluster.counters("node7", link)["rx_bytes"] for link in vcluster.RAILS}
        env = self.slurm.env(OMPI_MCA_btl="tcp,self", OMPI_MCA_btl_tcp_if_include=RAIL_SUBNETS,
                             NCCL_SOCKET_IFNAME="eth0,eth3", OMPI_ALLOW_RUN_AS_ROOT="1",
                             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        results = os.path.join(self.work.name, "results")
        result = self.cluster.exec(
            "node5", ["salloc", "-N", "2", "--ntasks-per-node", "1", CCLBENCH, "baseline", "--hosts", ",".join(NODES),
                      "--gpus-per-node", "1", "--hcas", "mlx5_0:1", "--coll", "all_reduce", "-b", "1M", "-e", "4M",
                      "-n", "10", "-w", "1", "--repeat", "1", "--cross-nic", "0", "--expect-transport", "none",
                      "--no-tuning-probe", "--timeout", "30", "--launch-timeout", "120", "--bin-dir", self.bin_dir,
                      "--results", results, "--run-id", "slurm"],
            env=env, capture_output=True, text=True, timeout=400, cwd=self.work.name)
        print(f"\n  salloc baseline: exit {result.returncode}\n  " + "\n  ".join(result.stderr.strip().splitlines()[-14:]),
              file=sys.stderr)
        run_dir = os.path.join(results, "slurm")
        self.assertEqual(result.returncode, 1, result.stderr[-3000:] + self.slurm.logs_tail())
        self.assertEqual(fake_hca_fail_codes(run_dir), ["doctor.fail", "rail.flag"], result.stderr[-3000:])
        with open(os.path.join(run_dir, "run_manifest.json")) as handle:
            manifest = json.load(handle)
        launcher = manifest["plan_inputs"]["launcher"]
        self.assertEqual((launcher["name"], launcher["mpi"]), ("srun", "pmix"), launcher)
        with open(os.path.join(run_dir, "run.log")) as handle:
            commands = [line[2:] for line in handle if line.startswith("$ ")]
        inter = next(line for line in commands if f"--point {INTER}" in line)
        self.assertIn("srun --mpi=pmix", inter)
        self.assertIn("--nodelist node5,node7", inter)
        self.assertTrue(all(" srun --mpi=pmix" in f" {line}" or line.startswith("env ") for line in commands
                            if "mpirun" not in line), commands)
        self.assertFalse([line for line in commands if line.split()[0].endswith("mpirun")], "no launch used mpirun")
        with open(os.path.join(run_dir, "cases.jsonl")) as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        inter_records = [r for r in records if r.get("point") == INTER]
        self.assertEqual(sorted({r["bytes"] for r in inter_records}), [1 << 20, 2 << 20, 4 << 20])
        self.assertEqual({r["nranks"] for r in inter_records}, {2})
        with open(os.path.join(run_dir, "doctor.json")) as handle:
            doctor = json.load(handle)
        self.assertEqual(doctor["hosts"], list(NODES))
        self.assertNotIn("host_report", {c["id"] for c in doctor["checks"]})
        path = [c for c in doctor["checks"] if c["id"] == "path_mtu"]
        self.assertEqual(len(path), 4, path)
        self.assertEqual({c["status"] for c in path}, {"pass"}, path)
        received = {link: self.cluster.counters("node7", link)["rx_bytes"] - before[link] for link in vcluster.RAILS}
        print(f"  node7 rx bytes per rail over the run: {received}", file=sys.stderr)
        # 2-rank all_reduce of 1+2+4 MiB, 11 operations each: node7 receives at least half of each.
        self.assertGreater(sum(received.values()), 11 * 7 * (1 << 20) // 2, received)

    def test_gpu_less_baseline_inside_salloc_runs_the_mpi_plan_with_srun(self):
        """The GPU-less cross-host plan (no --gpus-per-node, no --hcas; the build's real tools): every point on
        the MPI backend, correctness-only, each launch through srun on both nodes."""
        env = self.slurm.env(OMPI_MCA_btl="tcp,self", OMPI_MCA_btl_tcp_if_include=RAIL_SUBNETS,
                             NCCL_SOCKET_IFNAME="eth0,eth3", OMPI_ALLOW_RUN_AS_ROOT="1",
                             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        results = os.path.join(self.work.name, "results")
        result = self.cluster.exec(
            "node5", ["salloc", "-N", "2", "--ntasks-per-node", "2", CCLBENCH, "baseline", "--hosts", ",".join(NODES),
                      "--coll", "all_reduce", "-b", "8K", "-e", "64K", "-n", "3", "-w", "1", "--repeat", "1",
                      "--timeout", "30", "--launch-timeout", "120", "--bin-dir", os.path.dirname(COLL_PERF),
                      "--results", results, "--run-id", "gpuless"],
            env=env, capture_output=True, text=True, timeout=400, cwd=self.work.name)
        print(f"\n  salloc GPU-less baseline: exit {result.returncode}\n  "
              + "\n  ".join(result.stderr.strip().splitlines()[-6:]), file=sys.stderr)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:] + self.slurm.logs_tail())
        run_dir = os.path.join(results, "gpuless")
        with open(os.path.join(run_dir, "run_manifest.json")) as handle:
            manifest = json.load(handle)
        self.assertEqual(manifest["plan_inputs"]["launcher"]["name"], "srun")
        with open(os.path.join(run_dir, "run.log")) as handle:
            commands = [line[2:] for line in handle if line.startswith("$ ")]
        inter = next(line for line in commands if "--point inter.mpi" in line)
        self.assertIn("srun --mpi=pmix", inter)
        self.assertIn("--nodelist node5,node7", inter)
        self.assertIn("--backend mpi", inter)
        self.assertFalse([line for line in commands if line.split()[0].endswith("mpirun")], "no launch used mpirun")
        with open(os.path.join(run_dir, "cases.jsonl")) as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        inter_records = [r for r in records if r.get("point") == "inter.mpi"]
        self.assertEqual(sorted({r["bytes"] for r in inter_records}), [8 << 10, 16 << 10, 32 << 10, 64 << 10])
        self.assertEqual({r["nranks"] for r in inter_records}, {4})
        with open(os.path.join(run_dir, "doctor.json")) as handle:
            path = [c for c in json.load(handle)["checks"] if c["id"] == "path_mtu"]
        self.assertEqual(len(path), 4, path)
        self.assertEqual({c["status"] for c in path}, {"pass"}, path)


if __name__ == "__main__":
    main()
