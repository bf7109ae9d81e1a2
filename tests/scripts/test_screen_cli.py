"""`cclbench screen` without a cluster: the --dry-run schedule and estimate, and bad input (one line, exit 2).

Expected pairs come from itertools.combinations, rounds and wall times from the closed forms of the issue (even n:
n - 1 rounds of n / 2 pairs, odd n: n rounds of (n - 1) / 2; wall = node-stage jobs x 20 s + rounds x 20 s + with
two rails or more, each rail alone on the pairs that give a node its first two partners, x 20 s a round),
written out here, not from the planner. The run itself is tested on the virtual cluster (tests/cluster/test_screen.py).
"""
import itertools
import json
import os
import re
import socket
import unittest

from helpers import FAKE_BIN, FAKE_MPIRUN, SOURCE_DIR, TempDirTest, run_cli

from cclbench_lib.plan.launch_time import LAUNCH_TIME
from cclbench_lib.plan.screen_schedule import LAUNCH_CAPS, scale_table


def dry_run(*args, gpus="0", **env):
    return run_cli(["screen", "--dry-run", "--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN] + list(args),
                   env=dict(env, CCLBENCH_FAKE_GPU_COUNT=gpus))


def rounds_of(stdout):
    rounds = []
    for line in stdout.splitlines():
        match = re.match(r"  round (\d+): (.*?)( \(bye: (\S+)\))?$", line)
        if match:
            rounds.append(([tuple(pair.split("-")) for pair in match.group(2).split()], match.group(4)))
    return rounds


class DryRun(TempDirTest):
    def test_full_five_nodes_every_pair_once(self):
        hosts = [f"n{i}" for i in range(1, 6)]
        result = dry_run("--hosts", ",".join(hosts), "--results", self.results, "--netdevs", "eth0,eth3", "--pool")
        self.assertEqual(result.returncode, 0, result.stderr)
        rounds = rounds_of(result.stdout)
        self.assertEqual(len(rounds), 5)  # odd n: n rounds
        pairs = [frozenset(pair) for round_pairs, _ in rounds for pair in round_pairs]
        self.assertEqual(sorted(map(sorted, pairs)), sorted(map(sorted, map(frozenset, itertools.combinations(hosts, 2)))))
        for round_pairs, bye in rounds:
            nodes = [node for pair in round_pairs for node in pair]
            self.assertEqual(len(round_pairs), 2)
            self.assertEqual(sorted(nodes + [bye]), hosts)  # disjoint, one node sits out
        self.assertEqual(sorted(bye for _, bye in rounds), hosts)
        self.assertIn("5 round(s), 10 pair(s), 2 concurrent job(s) a round", result.stdout)
        # doctor + intra (no GPU: no loopback) at 20 s, then 5 rounds at 20 s, then each of the 2 rails alone in the
        # first three rounds (odd n: a node sits out each round, so two partners each take three): 6 x 20 s
        self.assertIn("expected wall time: 260 s", result.stdout)
        # Each rail alone on the MPI backend: the TCP BTL kept on that interface.
        self.assertRegex(result.stdout, r"example rail job: \S*mpirun .*--mca btl_tcp_if_include eth0 -np 2 "
                                        r"--host n\d:1,n\d:1 \S*coll_perf .*--sizes 67108864,8192 -n")
        self.assertIn("no GPU: the intra-node point is the MPI backend", result.stdout)
        self.assertRegex(result.stdout, r"example pair job: \S*mpirun .*-np 2 --host n\d:1,n\d:1 \S*coll_perf "
                                        r"--backend mpi .*--sizes 67108864,8192")
        self.assertFalse(os.path.exists(self.results), "a dry run writes nothing")

    def test_mpi_rail_points_replace_the_users_tcp_interfaces(self):
        # Open MPI joins a parameter given twice into one list: the user's btl_tcp_if_include must go, not stay
        # beside ours, or the "eth3 alone" point would still stripe over both rails.
        for mode in ("--pool", "--quick"):  # one launch a job, and (the default) one launch a stage step
            result = dry_run("--hosts", "n1,n2", "--netdevs", "eth0,eth3", "--results", self.results, mode,
                             "--mpirun-args=--mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24 --bind-to none")
            self.assertEqual(result.returncode, 0, result.stderr)
            what = "job" if mode == "--pool" else "launch (1 groups)"
            pair = next(line for line in result.stdout.splitlines() if line.startswith(f"example pair {what}"))
            rail = next(line for line in result.stdout.splitlines() if line.startswith(f"example rail {what}"))
            self.assertIn("--mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24 --bind-to none -np 2", pair)
            self.assertIn(" --bind-to none --mca btl_tcp_if_include eth0 -np 2 ", rail)
            self.assertNotIn("198.18.", rail)
            self.assertEqual(rail.count("btl_tcp_if_include"), 1)

    def test_gpu_nodes_get_a_loopback_point_per_rail(self):
        result = dry_run("--hosts", "a1,a2,a3,a4", "--hcas", "mlx5_0:1,mlx5_3:1", "--gpus-per-node", "8",
                         "--results", self.results, "--pool", gpus="8", NCCL_SOCKET_IFNAME="eth0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("doctor, intra, loopback mlx5_0:1, loopback mlx5_3:1", result.stdout)
        loopbacks = [line for line in result.stdout.splitlines() if line.startswith("example loopback job")]
        self.assertEqual(len(loopbacks), 2)
        for line, rail in zip(loopbacks, ("mlx5_0:1", "mlx5_3:1")):
            for word in ("-x NCCL_P2P_DISABLE=1", "-x NCCL_SHM_DISABLE=1", f"-x NCCL_IB_HCA=={rail} ", "-np 8 --host a1:8"):
                self.assertIn(word, line)
        self.assertRegex(result.stdout, r"example pair job: .*-np 16 --host a\d:8,a\d:8 -x NCCL_SOCKET_IFNAME=eth0 "
                                        r"-x NCCL_IB_HCA==mlx5_0:1,mlx5_3:1 ")  # the environment reaches every rank
        self.assertEqual(len(rounds_of(result.stdout)), 3)  # even n: n - 1 rounds
        # 4 node-stage jobs + 3 rounds + each of the 2 rails alone on the first two rounds, 20 s each
        self.assertIn("expected wall time: 220 s", result.stdout)
        self.assertRegex(result.stdout, r"example rail job: .*-np 16 --host a\d:8,a\d:8 -x NCCL_SOCKET_IFNAME=eth0 "
                                        r"-x NCCL_IB_HCA==mlx5_0:1 \S*coll_perf .*--sizes 67108864,8192 -n")

    def test_quick_rounds_and_max_concurrent(self):
        hosts = [f"h{i}" for i in range(8)]
        result = dry_run("--hosts", ",".join(hosts), "--quick", "2", "--seed", "7", "--max-concurrent", "3",
                         "--per-pair-s", "10", "--results", self.results, "--pool")
        self.assertEqual(result.returncode, 0, result.stderr)
        rounds = rounds_of(result.stdout)
        self.assertEqual(len(rounds), 2)
        for round_pairs, bye in rounds:
            self.assertIsNone(bye)
            self.assertEqual(sorted(node for pair in round_pairs for node in pair), hosts)
        self.assertIn("quick: 2 shuffled round(s), seed 7", result.stdout)
        # 8 nodes, 3 at once in a rolling pool, 10 s a job: the node stage's 16 jobs take 6 turns of 3 (60 s), the
        # two rounds' 8 pairs 3 turns (30 s); each node's own 2 + 2 jobs in a row are fewer than that
        self.assertIn("expected wall time: 90 s", result.stdout)
        again = dry_run("--hosts", ",".join(hosts), "--quick", "2", "--seed", "7", "--results", self.results)
        self.assertEqual(rounds_of(again.stdout), rounds, "the same seed gives the same rounds")

    def test_the_launch_cap_is_the_launchers_and_the_dry_run_says_why(self):
        hosts = ",".join(f"h{i}" for i in range(300))
        cap, _ = LAUNCH_CAPS["mpirun-ssh"]
        result = dry_run("--hosts", hosts, "--quick", "1", "--results", self.results, "--pool")
        self.assertEqual(result.returncode, 0, result.stderr)
        line = next(line for line in result.stdout.splitlines() if line.startswith("launches:"))
        # 150 pairs a round, `cap` at once in the rolling pool; the reason cites the measurement.
        self.assertTrue(line.startswith(f"launches: one launch a job (--pool: one launch a job), at most {cap} at "
                                        "once (the default for mpirun-ssh: "), line)
        self.assertIn("launch_fanout_ssh_results.json", line)
        self.assertTrue(line.endswith("in a rolling pool: each node's jobs in round order, a job starting when its "
                                      "nodes are free"), line)
        given = dry_run("--hosts", hosts, "--quick", "1", "--max-concurrent", "100", "--results", self.results, "--pool")
        self.assertIn(f"at most 100 at once (--max-concurrent; the default for mpirun-ssh is {cap}), "
                      "in a rolling pool", given.stdout)
        local = dry_run("--hosts", f"localhost,{socket.gethostname().split('.')[0]}", "--results", self.results,
                        "--pool")
        self.assertIn(f"at most {LAUNCH_CAPS['mpirun-local'][0]} at once (the default for mpirun-local: ",
                      local.stdout)

    def test_a_thousand_nodes_read_as_a_summary_and_the_plan_goes_to_a_file(self):
        """1,024 GPU-less nodes, --quick 3: one launch a stage step. The summary names no more than the first two and
        the last node, every line is short; the launches and the time are worked out here from the node stage
        (doctor, intra: 2 launches over 1,024 nodes) and 3 rounds of 512 pairs (no rail alone without two rails),
        each launch the time model's start-up and teardown at its node count plus one group's 20 s less the
        start-up and teardown of a launch of its own nodes (plan/launch_time.py's docstring; its fitted constants)."""
        hosts = [f"n{index:04d}" for index in range(1, 1025)]
        plan = os.path.join(self.tmp, "plan.json")
        result = dry_run("--hosts", ",".join(hosts), "--quick", "3", "--results", self.results, "--plan", plan)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertLess(len(lines), 20, result.stdout)
        self.assertLess(max(len(line) for line in lines), 1500)
        self.assertEqual(lines[0], "screen of 1,024 nodes: n0001, n0002, ... n1024")
        self.assertNotIn("n0500", result.stdout)
        self.assertIn("node stage: 2 launch(es) over 1,024 nodes, one group a node: doctor, intra", result.stdout)
        self.assertIn("3 round(s) of 512 pair(s), 1,536 pair(s) in all: 3 launch(es), a round's pairs in one",
                      result.stdout)
        fit = LAUNCH_TIME["mpirun-ssh"]

        def overhead(nodes):  # a fleet: one node's side at 2 nodes, the launching host's per node beyond
            return fit["overhead_low_s"] + fit["host_s_per_node"] * max(0, nodes - 2)
        wall = 2 * (overhead(1024) + 20 - overhead(1)) + 3 * (overhead(1024) + 20 - overhead(2))
        self.assertIn(f"expected wall time: {wall:.0f} s ({wall / 60:.1f} min) on a healthy fleet: 5 launch(es)",
                      result.stdout)
        self.assertRegex(result.stdout, r"example pair launch \(512 groups\): \S*mpirun .*-np 1024 --hostfile ")
        self.assertIn(f"plan: {plan} (every node, every pair of every round, every launch)", result.stdout)
        with open(plan, encoding="utf-8") as handle:
            document = json.load(handle)
        self.assertEqual(document["nodes"], hosts)
        self.assertEqual([len(entry["pairs"]) for entry in document["rounds"]], [512, 512, 512])
        for entry in document["rounds"]:
            self.assertEqual(sorted(node for pair in entry["pairs"] for node in pair), hosts)
        self.assertEqual([(launch["what"], launch["nodes"], len(launch["groups"])) for launch in document["launches"]],
                         [("doctor", 1024, 1024), ("intra", 1024, 1024)] + [("pairs", 1024, 512)] * 3)
        self.assertEqual(document["launches"][2]["groups"], document["rounds"][0]["pairs"])
        self.assertAlmostEqual(document["expected_wall_s"], wall, delta=0.1)
        self.assertFalse(os.path.exists(self.results), "a dry run writes nothing but the plan asked for")
        self.assertOneLineError(run_cli(["screen", "--hosts", "n1,n2", "--plan", plan, "--results", self.results,
                                         "--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN]), 2, "--plan")
        # Without --plan the summary says where the rest is.
        self.assertIn("--dry-run --plan FILE", dry_run("--hosts", ",".join(hosts), "--quick", "1",
                                                        "--results", self.results).stdout)

    def test_inside_a_slurm_allocation_the_allocation_is_the_fleet(self):
        result = run_cli(["screen", "--dry-run", "--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN, "--hcas", "mlx5_0:1",
                          "--results", self.results],
                         env={"SLURM_JOB_NODELIST": "gpu[01-03],gpu07", "SLURM_JOB_ID": "42", "SLURM_GPUS_PER_NODE": "8"})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("screen of 4 nodes: gpu01,gpu02,gpu03,gpu07", result.stdout)
        self.assertIn("backend: nccl, 8 GPU(s) a node", result.stdout)
        # srun cannot serve here (no slurmctld, or no srun): mpirun inside the allocation, and the reason printed
        self.assertRegex(result.stdout, r"launcher: mpirun \(Slurm job 42 but .+: mpirun inside the allocation\)")
        # One launch a round: both pairs, every rank placed by its hosts file.
        self.assertRegex(result.stdout, r"example pair launch \(2 groups\): \S*mpirun .*-np 32 --hostfile \S+\.hosts "
                                        r"--map-by seq .*--split-ranks 16 --split-points \S+\.points\.json")


class BadInput(TempDirTest):
    def test_one_line_errors(self):
        hostfile = os.path.join(self.tmp, "hosts")
        with open(hostfile, "w") as handle:
            handle.write("n1 slots=8\nn2 slots=4\n")
        cases = [
            (["--hosts", "n1"], "at least two hosts"),
            ([], "screen needs hosts"),
            (["--hosts", "n1,n2", "--hostfile", hostfile], "not both"),
            (["--hostfile", hostfile], "different slot counts"),
            (["--hosts", "n1,n1"], "listed twice"),
            (["--hosts", "n1,n2;reboot"], "host name"),
            (["--hosts", "n1,n2", "--small", "64M", "--large", "8K"], "smaller than"),
            (["--hosts", "n1,n2", "--large", "lots"], "--large"),
            (["--hosts", "n1,n2", "--netdevs", "eth0,$(reboot)"], "--netdevs"),
            (["--hosts", "n1,n2", "--quick", "0"], "--quick"),
            (["--hosts", "n1,n2", "--hcas", "mlx5_0"], "HCA"),
            (["--hosts", "n1,n2", "--max-concurrent", "none"], "--max-concurrent"),
        ]
        for args, text in cases:
            with self.subTest(args=args):
                self.assertOneLineError(dry_run(*args, "--results", self.results), 2, text)
        runs = [
            (["--hosts", "no-such-host.invalid,other.invalid"], "unknown host"),
            (["--resume", "nothere"], "does not exist"),
            (["--hosts", "n1,n2", "--bin-dir", os.path.join(self.tmp, "nobin")], "not built"),
        ]
        for args, text in runs:
            with self.subTest(args=args):
                result = run_cli(["screen", "--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN, "--results", self.results]
                                 + args)
                self.assertOneLineError(result, 2, text)
        self.assertFalse(os.path.exists(self.results), "bad input creates no run directory")


class Resume(TempDirTest):
    """A whole screen through the test doubles (fake mpirun runs the fake coll_perf once as rank 0; the doctor is
    the real one on this machine), four names of this machine as the fleet."""
    HOSTS = ["localhost", "127.0.0.1", "vm", "runsc"]

    def run_screen(self, *args, **env):
        log = os.path.join(self.tmp, "points.log")
        if os.path.exists(log):
            os.unlink(log)
        result = run_cli(["screen", "--bin-dir", FAKE_BIN, "--mpirun", FAKE_MPIRUN, "--results", self.results,
                          "-n", "2", "-w", "0"] + list(args), env=dict(env, FAKE_COLL_LOG=log))
        with open(log, encoding="utf-8") as handle:
            points = [line.split()[0] for line in handle if line.strip()]
        return result, points

    def test_resume_reruns_only_what_failed(self):
        import socket
        for host in self.HOSTS:
            try:
                socket.getaddrinfo(host, None)
            except OSError:
                self.skipTest(f"{host} does not resolve here")
        failing = "pair.r0.localhost.runsc"
        first, points = self.run_screen("--hosts", ",".join(self.HOSTS), "--run-id", "s1",
                                        FAKE_COLL_FAIL_POINT=failing)
        pairs = sorted(point for point in points if point.startswith("pair."))
        self.assertEqual(len(pairs), 6, points)  # 4 nodes: every pair once
        self.assertIn(failing, pairs)
        run_dir = os.path.join(self.results, "s1")
        with open(os.path.join(run_dir, "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        failed = [pair for pair in document["pairs"] if pair["outcome"] == "failed"]
        self.assertEqual([(pair["a"], pair["b"], pair["stage"]) for pair in failed], [("localhost", "runsc", "pair")])
        self.assertIn("exit 5", failed[0]["reason"])
        # A failure must reproduce: the pair was repeated in the retest round after the 3 pair rounds, passed
        # there, and nothing is bad.
        others = [point for point in points if not point.startswith("pair.")]
        self.assertEqual(sorted(others[:4]), sorted("intra." + host for host in self.HOSTS))  # all at once
        self.assertEqual(others[4:], ["repeat.r3.localhost.runsc"])
        self.assertEqual([(pair["a"], pair["b"], pair["stage"], pair["outcome"]) for pair in document["pairs"][6:]],
                         [("localhost", "runsc", "retest", "ok")])
        self.assertEqual((first.returncode, document["result"]), (0, "pass"), first.stderr)
        # --resume: the failed pair runs again, nothing that completed with its values does.
        second, points = self.run_screen("--resume", "s1")
        self.assertEqual(points, [failing], second.stderr)
        with open(os.path.join(run_dir, "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        self.assertEqual((second.returncode, document["result"]), (0, "pass"), second.stderr)
        with open(os.path.join(run_dir, "screen.md"), encoding="utf-8") as handle:
            self.assertTrue(handle.read().startswith("# Screen: PASS"))

    def test_rail_points_run_and_resume(self):
        # With two rails each node meets two partners on each rail alone; a rail point that failed once is
        # retested (a failure must reproduce), and --resume reruns that point alone.
        for host in self.HOSTS:
            try:
                socket.getaddrinfo(host, None)
            except OSError:
                self.skipTest(f"{host} does not resolve here")
        failing = "rail.r0.localhost.runsc.eth3"
        first, points = self.run_screen("--hosts", ",".join(self.HOSTS), "--netdevs", "eth0,eth3", "--run-id", "s3",
                                        FAKE_COLL_FAIL_POINT=failing)
        rails = [point for point in points if point.startswith("rail.r0.") or point.startswith("rail.r1.")]
        self.assertEqual(len(rails), 8, points)  # the first two rounds' 4 pairs x 2 rails
        self.assertIn(failing, rails)
        with open(os.path.join(self.results, "s3", "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        failed = [pair for pair in document["pairs"] if pair["stage"] == "rail" and pair["busbw_gbps"] is None]
        self.assertEqual([(pair["a"], pair["b"], pair["rail"], pair["outcome"]) for pair in failed],
                         [("localhost", "runsc", "eth3", "slow_rail")])
        self.assertTrue(failed[0]["reason"])
        self.assertEqual((first.returncode, document["result"]), (0, "pass"), first.stderr)  # not reproduced
        second, points = self.run_screen("--resume", "s3")
        self.assertEqual(points, [failing], second.stderr)

    def test_node_failing_the_node_stage_is_started_twice_then_not_paired(self):
        result, points = self.run_screen("--hosts", ",".join(self.HOSTS), "--run-id", "s2",
                                         FAKE_COLL_FAIL_POINT="intra.vm")
        self.assertEqual(points.count("intra.vm"), 2, points)  # one more start for a node-stage job, no more
        self.assertFalse([point for point in points if point.startswith("pair.") and ".vm" in point], points)
        run_dir = os.path.join(self.results, "s2")
        with open(os.path.join(run_dir, "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        node = [row for row in document["nodes"] if row["name"] == "vm"][0]
        self.assertEqual((node["verdict"], node["paired"]), ("bad", False))
        self.assertEqual([reason["code"] for reason in node["reasons"]], ["node.intra_failed"])
        self.assertIn("exit 5", node["reasons"][0]["detail"]["reason"])
        self.assertEqual(result.returncode, 1, result.stderr)
        with open(os.path.join(run_dir, "screen_manifest.json"), encoding="utf-8") as handle:
            state = json.load(handle)["jobs"]["intra.vm"]
        self.assertEqual((state["attempts"], state["status"]), (2, "failed"))
        with open(os.path.join(run_dir, "screen.md"), encoding="utf-8") as handle:
            self.assertEqual(handle.read().splitlines()[2], "- Bad nodes: vm (node.intra_failed)")


class ReadmeScale(unittest.TestCase):
    def test_readme_scale_table_is_the_planners(self):
        """docs/bring-up.md's scale table holds what scale_table() plans (rounds, jobs, pairs, seconds)."""
        with open(os.path.join(SOURCE_DIR, "docs", "bring-up.md"), encoding="utf-8") as handle:
            text = handle.read()
        table = text[text.index("**Scale**"):].split("\n\n")[1]
        rows = []
        for line in table.splitlines()[2:]:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            number = lambda cell: int(cell.split(" s")[0].replace(",", ""))  # noqa: E731
            rows.append((number(cells[0]), cells[1], number(cells[2]), number(cells[3]), number(cells[4]),
                         number(cells[5]), number(cells[6]), number(cells[7])))
        expected = [(row["nodes"], row["mode"], row["rounds"], row["concurrent_jobs"], row["pairs"],
                     row["node_stage_s"], row["pair_stage_s"], row["wall_s"]) for row in scale_table()]
        self.assertEqual(rows, expected)


if __name__ == "__main__":
    unittest.main()
