"""`cclbench plan`: the launches of a two-node baseline and of the local fallbacks, exactly."""
import json
import os
import shlex
import unittest

from helpers import TempDirTest, run_cli, validate

from cclbench_lib.base.errors import UsageError
from cclbench_lib.model.hosts import expand_nodelist, parse_hostfile


class TwoNodePlan(TempDirTest):
    def plan(self, *extra, env=None):
        hostfile = os.path.join(self.tmp, "hosts")
        with open(hostfile, "w") as handle:
            handle.write("# two nodes\nnode5 slots=8\nnode7 slots=8  # comment\n")
        result = run_cli(["plan", "--hostfile", hostfile, "--hcas", "mlx5_0:1,mlx5_3:1", "--run-id", "R1",
                          "--results", self.results, "--bin-dir", "/opt/cclbench/bin", "--mpirun", "mpirun"] + list(extra),
                         env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return [shlex.split(line) for line in result.stdout.splitlines()]

    def test_counts_and_shapes(self):
        every = self.plan("--repeat", "1")
        # Each point's untimed TUNING probe: a launch of its own, right before the point, same ranks and
        # environment, no records; the point then reads it with --tuning-from.
        probes = [argv for argv in every if "--tuning-probe" in argv]
        self.assertEqual(len(probes), 2 + 5)
        for argv in probes:
            following = every[every.index(argv) + 1]
            self.assertEqual(argv[:argv.index("/opt/cclbench/bin/coll_perf")],
                             following[:following.index("/opt/cclbench/bin/coll_perf")], "same mpirun, -np, hosts, -x")
            self.assertEqual(following[following.index("--tuning-from") + 1], argv[argv.index("--tuning-probe") + 1])
            for flag in ("-J", "--jsonl", "--csv"):
                self.assertNotIn(flag, argv, "a probe writes no performance records")
        def without_tuning_from(argv):
            return [w for i, w in enumerate(argv) if w != "--tuning-from" and (i == 0 or argv[i - 1] != "--tuning-from")]
        self.assertEqual(self.plan("--repeat", "1", "--no-tuning-probe"), [without_tuning_from(argv) for argv in every if argv not in probes])
        launches = [argv for argv in every if argv not in probes]
        doctors = [argv for argv in launches if "doctor" in argv]
        self.assertEqual(launches[:2], doctors, "the doctor runs first, one process per host")
        self.assertEqual([argv[argv.index("--host") + 1] for argv in doctors], ["node5", "node7"])
        launches = launches[2:]
        # Inter-node points: both rails once per NCCL_CROSS_NIC (0, 1, 2: 3 points) and each of the 2 rails alone once
        # (NCCL_CROSS_NIC picks between a node's NICs; with one NIC bound it changes nothing): 3 + 2 = 5, where a
        # sweep of 3 bindings x 3 values had 9.
        self.assertEqual(len(launches), 2 + 1 + 2 + 2 + 5)
        programs = [os.path.basename(next(w for w in argv if w.startswith("/opt/cclbench/bin/"))) for argv in launches]
        self.assertEqual(programs.count("topo_map"), 2)
        self.assertEqual(programs.count("p2p_matrix"), 2)
        self.assertEqual(programs.count("coll_perf"), 1 + 2 + 5)

        def np_of(argv):
            return int(argv[argv.index("-np") + 1])

        def host_of(argv):
            return argv[argv.index("--host") + 1]

        coll = [argv for argv, program in zip(launches, programs) if program == "coll_perf"]
        points = [argv[argv.index("--point") + 1] for argv in coll]
        self.assertEqual(points[0], "sanity", "the sanity pass runs before every other collective")
        sanity = coll[0]
        self.assertEqual(sanity[sanity.index("--coll") + 1], "all_reduce")
        self.assertEqual(sanity[sanity.index("-n") + 1], "5")
        intra = [argv for argv in coll[1:] if np_of(argv) == 8]
        self.assertEqual(sorted(host_of(argv) for argv in intra), ["node5:8", "node7:8"])
        inter = [argv for argv in coll[1:] if np_of(argv) == 16]
        self.assertEqual(len(inter), 5)
        combos = set()
        for argv in inter:
            self.assertEqual(host_of(argv), "node5:8,node7:8")
            env = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "-x")
            combos.add((env.get("NCCL_CROSS_NIC"), env["NCCL_IB_HCA"]))
            self.assertEqual(argv[argv.index("--expect-transport") + 1], "inter=NET/IB")
            point = argv[argv.index("--point") + 1]
            self.assertEqual(argv[argv.index("--jsonl") + 1], os.path.join(self.results, "R1", "cases.jsonl"))
            # coll_perf is not built under /opt/cclbench/bin: the newest flags are assumed.
            self.assertEqual(argv[argv.index("--nccl-log-dir") + 1], os.path.join(self.results, "R1", "nccl", point))
            self.assertEqual(argv[argv.index("--tuning-from") + 1], os.path.join(self.results, "R1", "tuning", point + ".json"))
            self.assertEqual(argv[argv.index("-x") - 2:argv.index("-x")], ["--host", "node5:8,node7:8"])
        for argv in intra:
            self.assertNotIn("--expect-transport", argv, "no inter-node edges: the default gate is inter-node only")
            self.assertNotIn("NCCL_IB_HCA", " ".join(argv))
        self.assertNotIn("--tuning-from", sanity, "the sanity pass stays quick")
        self.assertEqual(combos, {(c, "=mlx5_0:1,mlx5_3:1") for c in "012"} | {(None, "=mlx5_0:1"), (None, "=mlx5_3:1")})
        self.assertEqual(len(set(points)), len(points), "point names are unique")
        for argv, program in zip(launches, programs):
            if program in ("topo_map", "p2p_matrix"):
                self.assertEqual(np_of(argv), 1)
                self.assertIn(host_of(argv), ("node5", "node7"))
        # Sizes: the default sweep is the mission's 8K..64M by 2.
        self.assertEqual([inter[0][inter[0].index(f) + 1] for f in ("-b", "-e", "-f")], ["8K", "64M", "2"])

    def test_repeat_and_mpirun_args(self):
        launches = self.plan("--mpirun-args=--mca btl ^openib", "--coll", "all_reduce")  # --repeat 3 by default
        inter = [argv for argv in launches if "-np" in argv and argv[argv.index("-np") + 1] == "16"]
        self.assertEqual(len(inter), 1 + 15 + 5, "sanity + 5 points x 3 repeats + one probe per point")
        self.assertIn("inter.rail-mlx5_3.rep2", [argv[argv.index("--point") + 1] for argv in inter])
        # Interleaved: rep1 of every point (intra and inter), then rep2 of every point, then rep3.
        timed = [argv[argv.index("--point") + 1] for argv in launches
                 if "--point" in argv and "--tuning-probe" not in argv and "sanity" not in argv]
        self.assertEqual(len(timed), 3 * (2 + 5))
        bases = [name.rsplit(".rep", 1)[0] for name in timed[:7]]
        self.assertEqual(len(set(bases)), 7, "the first 7 timed launches are 7 different points")
        self.assertEqual(timed, [f"{base}.rep{k}" for k in (1, 2, 3) for base in bases])
        self.assertEqual(bases[:2], ["intra.node5", "intra.node7"])
        once = self.plan("--repeat", "1", "--coll", "all_reduce")
        self.assertIn("inter.rail-mlx5_3", [argv[argv.index("--point") + 1] for argv in once if "--point" in argv],
                      "one repeat: no .repN suffix")
        first = launches[0]
        self.assertEqual(first[first.index("--mca"):first.index("--mca") + 3], ["--mca", "btl", "^openib"])
        if os.geteuid() == 0:
            self.assertIn("--allow-run-as-root", first)

    def test_plan_json_validates(self):
        path = os.path.join(self.tmp, "plan.json")
        self.plan("--repeat", "1", "--json", path)
        ok, errors = validate("plan.schema.json", path)
        self.assertTrue(ok, errors)
        with open(path) as handle:
            document = json.load(handle)
        self.assertEqual(document["mode"], "multi_node")
        # doctor, topology and P2P per host (6) and the sanity pass, then 7 points (2 intra, 5 inter), each with its
        # TUNING probe.
        self.assertEqual(len(document["launches"]), 6 + 1 + 7 * 2)
        self.assertFalse(os.path.exists(os.path.join(self.results, "R1")), "plan never creates the run directory")

    def test_slurm_allocation(self):
        result = run_cli(["plan", "--hcas", "mlx5_0:1", "--gpus-per-node", "8", "--results", self.results],
                         env={"SLURM_JOB_NODELIST": "node[5,7]", "PATH": "/usr/bin:/bin"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--host node5:8,node7:8", result.stdout)


class HcaDiscovery(TempDirTest):
    def test_hcas_come_from_topo_map(self):
        from helpers import FAKE_BIN
        result = run_cli(["plan", "--hosts", "node5,node7", "--gpus-per-node", "8", "--bin-dir", FAKE_BIN,
                          "--results", self.results])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("NCCL_IB_HCA==mlx5_0:1,mlx5_3:1", result.stdout)
        self.assertIn("NCCL_IB_HCA==mlx5_3:1", result.stdout)


    def test_gpu_hosts_without_rdma_plan_one_unbound_binding(self):
        """GPU hosts whose topo_map finds no active RDMA port (a socket-only cluster, the GPU machine's virtual
        nodes): the inter-node points run once per NCCL_CROSS_NIC without an NCCL_IB_HCA binding, and the plan says
        why, instead of stopping with 'no active RDMA port found'. The real topo_map of this build reads this
        machine, which has no RDMA device."""
        from helpers import REAL_APPS
        if not os.access(os.path.join(REAL_APPS, "topo_map"), os.X_OK):
            self.skipTest(f"topo_map is not built in {REAL_APPS}")
        if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
            self.skipTest("this machine has RDMA devices")
        result = run_cli(["plan", "--hosts", "node5,node7", "--gpus-per-node", "1", "--bin-dir", REAL_APPS,
                          "--results", self.results, "--json", os.path.join(self.tmp, "plan.json")])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("no active RDMA port found by topo_map: the inter-node points run without an NCCL_IB_HCA",
                      result.stderr)
        self.assertNotIn("NCCL_IB_HCA", result.stdout)
        with open(os.path.join(self.tmp, "plan.json"), encoding="utf-8") as handle:
            launches = json.load(handle)["launches"]
        inter = sorted({launch["base_point"] for launch in launches if str(launch.get("base_point", "")).startswith("inter.")})
        self.assertEqual(inter, ["inter.cross0", "inter.cross1", "inter.cross2"])
        ok, errors = validate("plan.schema.json", os.path.join(self.tmp, "plan.json"))
        self.assertTrue(ok, errors)

    def test_netdevs_reach_every_coll_perf_launch(self):
        """--netdevs names the rail interfaces coll_perf counts bytes on (rails seen on the MPI backend over TCP);
        every coll_perf launch gets it, the plan records it, and a bad name is a one-line usage error."""
        args = ["plan", "--hosts", "node5,node7", "--bin-dir", "/nonexistent-bin", "--results", self.results,
                "--repeat", "1", "--netdevs", "eth0,eth3", "--json", os.path.join(self.tmp, "plan.json")]
        result = run_cli(args, env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertEqual(result.returncode, 0, result.stderr)
        coll = [shlex.split(line) for line in result.stdout.splitlines() if "/nonexistent-bin/coll_perf" in line]
        self.assertTrue(coll)
        for argv in coll:
            self.assertEqual(argv[argv.index("--netdevs") + 1], "eth0,eth3", argv)
        with open(os.path.join(self.tmp, "plan.json"), encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["plan_inputs"]["netdevs"], ["eth0", "eth3"])
        ok, errors = validate("plan.schema.json", os.path.join(self.tmp, "plan.json"))
        self.assertTrue(ok, errors)
        for bad in ("eth0,eth0", "a/b", "eth0,,eth3", "x" * 16):
            self.assertOneLineError(run_cli(["plan", "--netdevs", bad, "--results", self.results]), 2, "--netdevs")

    def test_netdevs_plan_each_rail_alone(self):
        """--netdevs of two interfaces: one inter-node point per rail alone beside the both-rails point(s). NCCL over
        sockets gets NCCL_SOCKET_IFNAME==IF (exact name), once, without NCCL_CROSS_NIC; the MPI backend gets its TCP
        BTL over that interface only, in place of the user's own list (Open MPI takes one include list)."""
        from helpers import REAL_APPS

        def inter_points(args, env, bin_dir="/nonexistent-bin"):
            result = run_cli(["plan", "--hosts", "node5,node7", "--bin-dir", bin_dir, "--results",
                              self.results, "--repeat", "1", "--no-tuning-probe", "--netdevs", "eth0,eth3"] + args, env=env)
            self.assertEqual(result.returncode, 0, result.stderr)
            coll = [shlex.split(line) for line in result.stdout.splitlines() if f"{bin_dir}/coll_perf" in line]
            return {argv[argv.index("--point") + 1]: argv for argv in coll
                    if argv[argv.index("--point") + 1].startswith("inter.")}

        def exported(argv):
            return dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv) if word == "-x")

        mpi = inter_points(["--mpirun-args=--mca btl tcp,self --mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24"],
                           {"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertEqual(sorted(mpi), ["inter.mpi", "inter.mpi.rail-eth0", "inter.mpi.rail-eth3"])

        def tcp_lists(argv):
            return [argv[i + 2] for i, word in enumerate(argv[:-2]) if word == "--mca" and argv[i + 1] == "btl_tcp_if_include"]
        self.assertEqual(tcp_lists(mpi["inter.mpi"]), ["198.18.10.0/24,198.18.13.0/24"])
        for rail in ("eth0", "eth3"):
            argv = mpi[f"inter.mpi.rail-{rail}"]
            self.assertEqual(tcp_lists(argv), [rail])
            self.assertEqual(argv[argv.index("btl") + 1], "tcp,self", "the user's other arguments stay")
            self.assertEqual(argv[argv.index("--backend") + 1], "mpi")

        # GPU hosts without RDMA (topo_map of this build finds no RDMA port here): NCCL over sockets.
        if not os.access(os.path.join(REAL_APPS, "topo_map"), os.X_OK):
            self.skipTest(f"topo_map is not built in {REAL_APPS}")
        if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
            self.skipTest("this machine has RDMA devices")
        sockets = inter_points(["--gpus-per-node", "1"], {}, REAL_APPS)
        self.assertEqual(sorted(sockets), ["inter.cross0", "inter.cross1", "inter.cross2", "inter.rail-eth0",
                                           "inter.rail-eth3"])
        self.assertEqual(exported(sockets["inter.rail-eth0"]), {"NCCL_SOCKET_IFNAME": "=eth0"})
        self.assertEqual(exported(sockets["inter.rail-eth3"]), {"NCCL_SOCKET_IFNAME": "=eth3"})
        self.assertEqual(exported(sockets["inter.cross1"]), {"NCCL_CROSS_NIC": "1"})

    def test_gpu_less_hosts_plan_the_mpi_backend(self):
        """No GPU here and no --gpus-per-node: --hosts plans the MPI backend on every host, with no
        --hcas and no topo_map discovery; every point says it is correctness only. With GPUs the plan is the
        NCCL one, unchanged."""
        args = ["plan", "--hosts", "node5,node7", "--bin-dir", "/nonexistent-bin", "--results", self.results,
                "--repeat", "1", "--mpirun-args=--mca btl_tcp_if_include 198.18.10.0/24"]
        result = run_cli(args, env={"CCLBENCH_FAKE_GPU_COUNT": "0", "NCCL_SOCKET_IFNAME": "eth0"})
        self.assertEqual(result.returncode, 0, result.stderr)
        launches = [shlex.split(line) for line in result.stdout.splitlines()]
        coll = [argv for argv in launches if "/nonexistent-bin/coll_perf" in argv]
        self.assertEqual([argv[argv.index("--point") + 1] for argv in coll],
                         ["sanity", "intra.node5", "intra.node7", "inter.mpi"])
        for argv in coll:
            self.assertEqual(argv[argv.index("--backend") + 1], "mpi")
            self.assertNotIn("--expect-transport", argv)
            self.assertNotIn("--tuning-probe", argv)
            self.assertFalse([word for word in argv if word.startswith("NCCL_IB_HCA")], argv)
        self.assertEqual([argv[argv.index("--host") + 1] for argv in coll],
                         ["node5:2,node7:2", "node5:2", "node7:2", "node5:2,node7:2"])
        self.assertFalse(any("/nonexistent-bin/p2p_matrix" in argv for argv in launches), "no P2P matrix without a GPU")
        # Every launch, the doctor and topology ones included, passes the user's NCCL variable to every rank.
        self.assertTrue(all(argv[argv.index("-x") + 1] == "NCCL_SOCKET_IFNAME=eth0" for argv in launches), launches)
        self.assertIn("correctness only", result.stderr)
        self.assertIn("passed to every rank on every host (set here): NCCL_SOCKET_IFNAME", result.stderr)
        with_gpus = run_cli(args + ["--gpus-per-node", "8", "--hcas", "mlx5_0:1"], env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertEqual(with_gpus.returncode, 0, with_gpus.stderr)
        # The GPU plan tells every coll_perf its backend: where CUDA sees no device it fails with the reason instead of
        # falling back to host memory under a point planned for NCCL (issue 37).
        gpu_coll = [shlex.split(line) for line in with_gpus.stdout.splitlines() if "/nonexistent-bin/coll_perf" in line]
        self.assertTrue(gpu_coll)
        self.assertEqual({argv[argv.index("--backend") + 1] for argv in gpu_coll}, {"nccl"})
        self.assertEqual([argv.count("--backend") for argv in gpu_coll], [1] * len(gpu_coll))
        self.assertIn("--expect-transport inter=NET/IB", with_gpus.stdout)


class LocalPlan(TempDirTest):
    def plan(self, gpus):
        result = run_cli(["plan", "--results", self.results, "--run-id", "L", "--bin-dir", "/b"],
                         env={"CCLBENCH_FAKE_GPU_COUNT": str(gpus)})
        self.assertEqual(result.returncode, 0, result.stderr)
        return [shlex.split(line) for line in result.stdout.splitlines()]

    def test_no_gpu_uses_mpi_backend(self):
        launches = self.plan(0)
        coll = [argv for argv in launches if "/b/coll_perf" in argv]
        self.assertEqual(len(coll), 1 + 1, "sanity and the MPI-backend point once (correctness only)")
        for argv in coll:
            self.assertIn("--oversubscribe", argv)
            self.assertEqual(argv[argv.index("-np") + 1], "4")
            self.assertEqual(argv[argv.index("--backend") + 1], "mpi")
        self.assertFalse(any("/b/p2p_matrix" in argv for argv in launches), "no P2P matrix without a GPU")

    def test_correctness_only_points_run_once_whatever_repeat_says(self):
        """Correctness-only points: the MPI backend on host memory (and its decode points) run once, and the plan says so."""
        for repeat in ("3", "5"):
            result = run_cli(["plan", "--results", self.results, "--run-id", "L", "--bin-dir", "/b", "--repeat", repeat,
                              "--decode", "hidden=1024,batches=1,2"], env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
            self.assertEqual(result.returncode, 0, result.stderr)
            points = [argv[argv.index("--point") + 1] for argv in map(shlex.split, result.stdout.splitlines())
                      if "--point" in argv]
            self.assertEqual(points, ["sanity", "local.mpi4", "decode.all_reduce.local.mpi4"])
            for argv in [argv for argv in map(shlex.split, result.stdout.splitlines()) if "--point" in argv]:
                # Every case still checked (-c 1); 2 timed iterations and 1 warm-up, whatever -n/-w (20, 5) say.
                self.assertEqual([argv[argv.index(f) + 1] for f in ("-n", "-w", "-c")], ["2", "1", "1"], argv)
            self.assertIn(f"cclbench: note: correctness-only points run once whatever --repeat {repeat} says (their times "
                          "judge nothing, more repeats prove nothing about correctness): local.mpi4 (MPI backend on host "
                          "memory), decode.all_reduce.local.mpi4 (MPI backend on host memory)", result.stderr)
        one = run_cli(["plan", "--results", self.results, "--bin-dir", "/b"], env={"CCLBENCH_FAKE_GPU_COUNT": "1"})
        self.assertIn("correctness-only points run once whatever --repeat 3 says", one.stderr)
        self.assertIn(": local.share-gpu4 (emulated ranks)", one.stderr)
        # What coll_perf will skip by design is said once in the plan, with the points.
        self.assertIn("cclbench: note: not verifiable by design: in-place alltoall and sendrecv at more than one rank "
                      "(NCCL defines no in-place result, so coll_perf skips them with its reason; the report lists them "
                      "once, never as an anomaly): local.share-gpu4\n", one.stderr)
        two = run_cli(["plan", "--results", self.results, "--bin-dir", "/b"], env={"CCLBENCH_FAKE_GPU_COUNT": "2"})
        self.assertIn("not verifiable by design: in-place alltoall at more than one rank", two.stderr)

        single = run_cli(["plan", "--results", self.results, "--bin-dir", "/b", "--repeat", "1"],
                         env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertNotIn("run once", single.stderr, "nothing to say at --repeat 1")
        self.assertNotIn("not verifiable by design", single.stderr, "MPI backend: in-place alltoall is MPI_IN_PLACE")

    def test_one_gpu_measures_one_real_rank_and_checks_emulated_ranks(self):
        launches = self.plan(1)
        coll = [argv for argv in launches if "/b/coll_perf" in argv]
        points = [argv[argv.index("--point") + 1] for argv in coll]
        # Then the smoke's own cases, once each (plan/smoke_cases.py: the samples inside one launch; the run-to-run
        # spread comes from the runs a reference captures, smoke --capture).
        self.assertEqual(points, ["sanity", "local.gpu1.rep1", "local.gpu1.rep2", "local.gpu1.rep3", "local.share-gpu4"]
                         + [f"smoke.{name}.rep1" for name in ("collective", "graph")])
        self.assertTrue(any("/b/p2p_matrix" in argv and "--json" in argv and "-t" not in argv for argv in launches),
                        "the copy/host matrix stays")
        copies = [argv for argv in launches if "/b/p2p_matrix" in argv and "-t" in argv]
        self.assertEqual([argv[argv.index("--json") + 1].rsplit("/", 2)[1:] for argv in copies],
                         [["smoke", "smoke.copy.rep1.json"]])
        self.assertEqual(copies[0][copies[0].index("-t") + 1],
                         "device_local_copy_ce,device_local_copy_sm,h2d_ce_local_numa,d2h_ce_local_numa")
        for argv in coll:
            self.assertEqual(argv.count("--backend"), 1, argv)
            self.assertEqual(argv[argv.index("--backend") + 1], "nccl", "a GPU plan names its backend")
        graph = coll[-1]
        self.assertEqual([graph[graph.index(f) + 1] for f in ("-b", "-e", "-G", "--coll", "--placement", "-np")
                          if f in graph], ["8K", "8K", "10", "all_reduce", "out"], "one rank: no mpirun")
        collective = coll[-2]
        self.assertEqual([collective[collective.index(f) + 1] for f in ("-b", "-e", "-f", "-n", "--coll")],
                         ["16M", "64M", "2", "200", "all_reduce"])  # 200: a gated time of 3-10 ms on an H100
        self.assertNotIn("-G", collective)
        for argv in coll[:4]:
            # The sanity pass and the timed point: one real rank on the GPU, never emulated.
            self.assertEqual(argv[argv.index("-np") + 1], "1")
            self.assertNotIn("--share-gpu", argv)
            self.assertNotIn("--tuning-probe", argv)
            self.assertNotIn("--tuning-from", argv, "one rank: NCCL chooses no algorithm, no probe")
        timed = coll[1]
        self.assertEqual([timed[timed.index(f) + 1] for f in ("-b", "-e", "-f", "-n", "-w", "-c")],
                         ["8K", "64M", "2", "20", "5", "1"])
        self.assertEqual(timed[timed.index("--coll") + 1], "all_reduce,all_gather,reduce_scatter,alltoall")
        self.assertNotIn("-G", timed, "eager")
        check = coll[4]
        self.assertEqual(check[check.index("-np") + 1], "4")
        self.assertIn("--share-gpu", check)
        # Every collective, both placements (coll_perf's default), sizes across the protocol changes,
        # few iterations, every result checked.
        self.assertEqual(check[check.index("--coll") + 1], "all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce,sendrecv")
        self.assertNotIn("--placement", check)
        self.assertEqual([check[check.index(f) + 1] for f in ("-b", "-e", "-f", "-n", "-w", "-c")],
                         ["8K", "2M", "16", "2", "1", "1"])
        self.assertEqual(len([argv for argv in launches if "--share-gpu" in argv]), 1, "run once, whatever --repeat")

    def test_many_gpus_one_rank_each(self):
        launches = self.plan(4)
        coll = [argv for argv in launches if "/b/coll_perf" in argv]
        measured = [argv for argv in coll if not argv[argv.index("--point") + 1].startswith("smoke.")]
        self.assertTrue(all(argv[argv.index("-np") + 1] == "4" and "--share-gpu" not in argv and
                            argv[argv.index("--backend") + 1] == "nccl" for argv in measured))
        self.assertNotIn("--expect-transport", measured[-1])
        result = run_cli(["plan", "--results", self.results, "--bin-dir", "/b", "--expect-transport",
                          "inter=NET/IB+GDRDMA,intra=P2P"], env={"CCLBENCH_FAKE_GPU_COUNT": "4"})
        last = [shlex.split(line) for line in result.stdout.splitlines() if "--point local.gpus4" in line][-1]
        self.assertEqual(last[last.index("--expect-transport") + 1], "intra=P2P", "one node: only the intra part applies")

    def test_flags_follow_the_built_coll_perf(self):
        from helpers import FAKE_BIN
        args = ["plan", "--results", self.results, "--bin-dir", FAKE_BIN]
        newest = run_cli(args, env={"CCLBENCH_FAKE_GPU_COUNT": "2"})
        self.assertIn("--nccl-log-dir", newest.stdout)
        self.assertIn("--tuning-probe", newest.stdout)
        self.assertNotIn("--tuning-probe", run_cli(args + ["--no-tuning-probe"], env={"CCLBENCH_FAKE_GPU_COUNT": "2"}).stdout)
        older = run_cli(args, env={"CCLBENCH_FAKE_GPU_COUNT": "2", "FAKE_COLL_OLD_FLAGS": "1"})
        self.assertEqual(older.returncode, 0, older.stderr)
        self.assertNotIn("--nccl-log-dir", older.stdout)
        self.assertNotIn("--tuning-probe", older.stdout)
        self.assertIn("--log-dir", older.stdout)
        mpi = run_cli(args, env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertNotIn("--tuning-probe", mpi.stdout, "the MPI backend has no NCCL to probe")


class DefaultBounds(TempDirTest):
    """Nothing hangs by default: every launch of a plan carries a bound, every coll_perf launch a watchdog -T."""

    def plan_json(self, *extra):
        path = os.path.join(self.tmp, "plan.json")
        result = run_cli(["plan", "--results", self.results, "--run-id", "B", "--bin-dir", "/b", "-b", "8K", "-e", "32K",
                          "-n", "3", "-w", "1", "--repeat", "1", "--json", path] + list(extra),
                         env={"CCLBENCH_FAKE_GPU_COUNT": "0"})
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(path) as handle:
            return {launch["name"]: launch for launch in json.load(handle)["launches"]}

    def test_every_launch_is_bounded_without_a_flag(self):
        launches = self.plan_json()
        for name, launch in launches.items():
            self.assertGreater(launch["bound_s"], 0, name)
            argv = launch["argv"]
            if "/b/coll_perf" in argv:
                self.assertEqual(argv.count("-T"), 1, name)
                self.assertEqual(argv[argv.index("-T") + 1], str(launch["watchdog_s"]), name)
                self.assertLess(launch["watchdog_s"], launch["bound_s"], f"{name}: the watchdog acts first")
                # -T is the ceiling of deadlines learned from the run, and the runner watches the progress.
                self.assertIn("--learn-deadlines", argv, name)
                self.assertIn("--progress", argv, name)
        # The README's formula by hand for the GPU-less sanity pass: 4 MPI ranks, all_reduce at 8K, 16K and 32K,
        # 2 timed iterations (the MPI backend's correctness setting), 1 warm-up, 1 check, both placements.
        op = lambda size: 0.02 * 2 * 4 + 2 * size / 10e6  # noqa: E731
        watchdog = 20 + 3 * 2 * op(32 << 10)  # the MPI backend's phase floor: 20 s
        self.assertEqual(launches["sanity"]["watchdog_s"], round(watchdog))  # 20.999 s
        work = sum((3 * 2 + 1 + 1) * op(size) for size in (8 << 10, 16 << 10, 32 << 10)) * 2
        self.assertEqual(launches["sanity"]["bound_s"], round(120 + work + watchdog + 60))  # 209 s
        doctor, topology = (next(launch for n, launch in launches.items() if n.startswith(kind + "."))
                            for kind in ("doctor", "topology"))
        self.assertEqual(doctor["bound_s"], 100)  # fixed: the doctor's work does not scale with the plan
        self.assertNotIn("watchdog_s", topology)

    def test_timeout_flags_override(self):
        launches = self.plan_json("--timeout", "7", "--launch-timeout", "30")
        for name, launch in launches.items():
            self.assertEqual(launch["bound_s"], 30, name)
            if "/b/coll_perf" in launch["argv"]:
                self.assertEqual(launch["argv"].count("-T"), 1, name)
                self.assertEqual(launch["argv"][launch["argv"].index("-T") + 1], "7", name)
                self.assertEqual(launch["watchdog_s"], 7, name)


class HostParsing(TempDirTest):
    def test_nodelist_expansion(self):
        self.assertEqual(expand_nodelist("node[5,7]"), ["node5", "node7"])
        self.assertEqual(expand_nodelist("gpu[01-03],login"), ["gpu01", "gpu02", "gpu03", "login"])
        self.assertEqual(expand_nodelist("r[1-2]n[1,3]"), ["r1n1", "r1n3", "r2n1", "r2n3"])
        for bad in ("node[5", "node]5[", "node[a-b]", "node[3-1]", "a,,b"):
            with self.assertRaises(UsageError, msg=bad):
                expand_nodelist(bad)

    def test_hostfile(self):
        path = os.path.join(self.tmp, "h")
        with open(path, "w") as handle:
            handle.write("node5 slots=8 max_slots=8\n\n# x\nnode7\n")
        self.assertEqual(parse_hostfile(path), [("node5", 8), ("node7", None)])
        for text in ("node5 slots=x\n", "node5 cores=8\n", "-rf slots=8\n", "# empty\n", "a\na\n"):
            with open(path, "w") as handle:
                handle.write(text)
            with self.assertRaises(UsageError, msg=text):
                parse_hostfile(path)


if __name__ == "__main__":
    unittest.main()
