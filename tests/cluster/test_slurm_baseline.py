#!/usr/bin/env python3
"""Slurm on the virtual cluster: `baseline` inside `salloc -N 2` runs its cross-host plan with srun, and `screen`
inside `salloc -N 4` runs its jobs as srun steps, the pairs of a round at the same time.

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

The screen (GPU-less, the build's coll_perf, one quick round): exit 0, PASS with every node accepted, every job's
command an srun step, the launch cap srun's default, and the round's two pair steps running at the same time - each
of their four ranks waits (at most 15 s) until all four have started before running coll_perf and records how many
it saw.

CTest `cluster_slurm_baseline` (label cluster); exits 77 (skip) with the reason where no cluster or no
Slurm can run.
"""
import json
import os
import shlex
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
import vslurm  # noqa: E402
from cluster_setup import (CCLBENCH, COLL_PERF, RAIL_SUBNETS, fake_gpu_bin_dir, fake_hca_fail_codes,  # noqa: E402
                           close_slurm, main, open_slurm, write_script)

NODES = ("node5", "node7")  # the baselines' allocation (salloc -w)
# The screen's: four nodes, so that a round has two pairs whose srun steps run at the same time (with three, every
# two pairs share a node and run one after the other).
SCREEN_NODES = ("node5", "node6", "node7", "node8")
INTER = "inter.cross0.rail-mlx5_0"
# The screen's first round: two pairs of one rank a node.
PAIR_RANKS = 4


def rendezvous_bin_dir(bin_dir, meet, ranks, wait_s=15):
    """A --bin-dir of the build's tools whose coll_perf, for a point of the first pair round (pair.r0.*, alone or in
    a split launch's --split-points), first
    waits up to wait_s for `ranks` such ranks to have started (a file each in `meet`), writes how many it saw to
    meet/seen.<point>.<rank>, then runs the real coll_perf: proof that the round's steps ran at the same time."""
    os.makedirs(bin_dir, exist_ok=True)
    os.makedirs(os.path.join(meet, "started"), exist_ok=True)
    for name in os.listdir(os.path.dirname(COLL_PERF)):
        path = os.path.join(os.path.dirname(COLL_PERF), name)
        if name != "coll_perf" and os.path.isfile(path) and os.access(path, os.X_OK):
            os.symlink(path, os.path.join(bin_dir, name))
    write_script(os.path.join(bin_dir, "coll_perf"), f"""#!/bin/sh
point=; previous=
for word in "$@"; do
  [ "$previous" = --point ] && point=$word
  # one launch a round: its --split-points file lists the round's points
  [ "$previous" = --split-points ] && grep -q '"pair.r0.' "$word" && point=$(basename "$word")
  previous=$word
done
case "$point" in pair.r0.*|launch.pairs.*)
  started={meet}/started; : > "$started/$point.$SLURM_PROCID"
  tries=0
  while [ "$(ls "$started" | wc -l)" -lt {ranks} ] && [ $tries -lt {wait_s * 10} ]; do sleep 0.1; tries=$((tries + 1)); done
  ls "$started" | wc -l > "{meet}/seen.$point.$SLURM_PROCID" ;;
esac
exec {COLL_PERF} "$@"
""")
    return bin_dir


class SlurmBaseline(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not vslurm.find("salloc"):
            raise unittest.SkipTest("salloc is not installed")
        open_slurm(cls, SCREEN_NODES, tools=("coll_perf",))
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
            "node5", ["salloc", "-N", "2", "-w", ",".join(NODES), "--ntasks-per-node", "1", CCLBENCH, "baseline", "--hosts", ",".join(NODES),
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
            "node5", ["salloc", "-N", "2", "-w", ",".join(NODES), "--ntasks-per-node", "2", CCLBENCH, "baseline", "--hosts", ",".join(NODES),
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

    def test_screen_inside_salloc_runs_its_jobs_as_concurrent_srun_steps(self):
        """`cclbench screen` inside `salloc -N 4` (the allocation is the fleet; GPU-less: the MPI backend, the build's
        coll_perf): every launch an srun step, a round's two pairs one step (issue 46: coll_perf --split-ranks, the
        ranks placed by SLURM_HOSTFILE and --distribution arbitrary), every node accepted."""
        # Ranks that yield while they wait (as cluster_screen's): four busy-polling ranks on a loaded 2-core machine
        # otherwise make one node's small-message time 10 ms instead of 50 us, and the screen names it slow.
        env = self.slurm.env(OMPI_MCA_btl="tcp,self", OMPI_MCA_btl_tcp_if_include=RAIL_SUBNETS,
                             OMPI_MCA_mpi_yield_when_idle="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        results = os.path.join(self.work.name, "results")
        meet = os.path.join(self.work.name, "meet")
        bin_dir = rendezvous_bin_dir(os.path.join(self.work.name, "screen-bin"), meet, PAIR_RANKS)
        result = self.cluster.exec(
            "node5", ["salloc", "-N", str(len(SCREEN_NODES)), "--exclusive", CCLBENCH, "screen", "--quick", "1",
                      "--large", "512K", "--small", "8K", "-n", "8", "-w", "1", "--timeout", "30",
                      "--launch-timeout", "120", "--bin-dir", bin_dir, "--results", results, "--run-id", "screen"],
            env=env, capture_output=True, text=True, timeout=300, cwd=self.work.name)
        print(f"\n  salloc screen: exit {result.returncode}\n  " + "\n  ".join(result.stderr.strip().splitlines()[-6:]),
              file=sys.stderr)
        run_dir = os.path.join(results, "screen")
        self.assertTrue(os.path.exists(os.path.join(run_dir, "screen.json")), result.stderr[-3000:] + self.slurm.logs_tail())
        with open(os.path.join(run_dir, "screen.json")) as handle:
            document = json.load(handle)
        evidence = json.dumps({"nodes": document["nodes"], "links": document["links"], "pairs": document["pairs"]},
                              indent=1)[:6000]
        self.assertEqual({row["name"]: row["verdict"] for row in document["nodes"]},
                         {node: "accept" for node in SCREEN_NODES}, evidence)
        self.assertEqual((result.returncode, document["result"]), (0, "pass"), evidence)
        with open(os.path.join(run_dir, "screen_manifest.json")) as handle:
            manifest = json.load(handle)
        inputs = manifest["inputs"]
        self.assertEqual(inputs["launcher"]["name"], "srun")
        # The cap the dry run names for srun steps, with nothing given on the command line.
        self.assertEqual((inputs["concurrency_choice"]["kind"], inputs["concurrency_choice"]["source"]),
                         ("srun", "default"))
        jobs = manifest["jobs"]
        self.assertTrue(jobs)
        for name, job in jobs.items():
            words = shlex.split(job["command"])
            words = words[1:] if words[0] == "env" else words
            while "=" in words[0]:  # env's NAME=VALUE before the launcher
                words.pop(0)
            self.assertEqual(os.path.basename(words[0]), "srun", (name, job["command"]))
        pairs = {name: job for name, job in jobs.items() if job["kind"] == "pair"}
        self.assertEqual(len(pairs), 2, sorted(jobs))
        # One step for the round: both pairs in the round's first launch, each its own group of 2 ranks, rank i on line
        # i of the launch's hosts file.
        launches = manifest["launches"]
        first = "launch.pairs.0"
        self.assertIn(first, launches, sorted(launches))
        self.assertEqual((launches[first]["jobs"], launches[first]["nodes"]), (2, len(SCREEN_NODES)), launches[first])
        for name, job in pairs.items():
            self.assertRegex(job["command"], r"--split-ranks 2 --split-points \S+\.points\.json")
            if job["launch"] == first:
                self.assertRegex(job["command"], r"SLURM_HOSTFILE=\S+/launch\.pairs\.0\.hosts .*srun .*-n 4 --nodes 4 "
                                                 r"--distribution arbitrary ")
            else:
                # That launch did not finish this pair (Open MPI 4.1.4 under srun once crashed a rank inside MPI_Init,
                # CI of 2026-12-07): the screen ran it again, and says so. The step itself was one.
                print(f"\n  {name} ran again in {job['launch']}: {first} ended {launches[first]}", file=sys.stderr)
                self.assertLess(launches[first]["done"], 2, launches[first])
                self.assertTrue(launches[job["launch"]]["relaunch"], launches[job["launch"]])
        with open(os.path.join(run_dir, "launches", first + ".points.json")) as handle:
            groups = [entry["point"] for entry in json.load(handle)]
        self.assertEqual(sorted(groups), sorted(pairs))
        with open(os.path.join(run_dir, "launches", first + ".hosts")) as handle:
            self.assertEqual(handle.read().split(), [host for name in groups for host in jobs[name]["hosts"]])
        # Every rank of the round's launch found all PAIR_RANKS of them started before it went on: the round's pairs
        # ran at the same time.
        seen = {}
        for name in os.listdir(meet):
            if name.startswith(f"seen.{first}."):
                with open(os.path.join(meet, name)) as handle:
                    seen[name] = int(handle.read().split()[0])
        self.assertEqual(len(seen), PAIR_RANKS, sorted(os.listdir(meet)))
        self.assertEqual(set(seen.values()), {PAIR_RANKS}, seen)
        self.assertEqual(sorted(node for job in pairs.values() for node in job["hosts"]), sorted(SCREEN_NODES))


if __name__ == "__main__":
    main()
