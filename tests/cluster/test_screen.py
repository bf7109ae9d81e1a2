#!/usr/bin/env python3
"""`cclbench screen` on the virtual cluster grown to 8 nodes (vcluster.py), the MPI backend (no GPU here), the
real coll_perf and mpirun: the four fleet cases (healthy, a slow node, a dead rail, a slow link). CTest `cluster_screen`; exits 77 (skip) with the
reason where a cluster cannot be built (not root, no namespaces, no ip) or coll_perf is not built.

Faults come from the kernel, not from the product: a tbf rate limit on one node's eth0, one node's eth3 down,
an htb class with a u32 filter on the destination address between one pair on both rails. Expected verdicts are
written from the injected fault. Sizes are small and iterations few (a 2-core machine shared with builds):
512K for bus bandwidth, 8K for the small-message time, 8 timed iterations (the launch, not they, takes the
time; their median outlasts a loaded host's hiccups), at most 2 jobs at once (more ranks than cores make the
times measure the scheduler), 1 for the rate-limited node (see there, at 256K: its slow points take 8 Mbit/s'
time). One shuffled round for the healthy fleet, two for a node's fault (two partners name it without a retest),
every pair for the throttled one (a link is named when both of its nodes pass with others: quick rounds leave
that to retests, which one loaded-host hiccup on another pair leaves unresolved). The pairs that give a node its
first two partners also run each rail alone (the TCP BTL kept on eth0, then on eth3). The rate limits are far below
what a healthy pair moves here (~100 MB/s): 8 Mbit/s.
"""
import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
from cluster_setup import SOURCE_DIR, close_cluster_keeping_work, main, open_cluster, run_screen  # noqa: E402

VALIDATOR = os.path.join(SOURCE_DIR, "tests", "tools", "validate_json.py")
SCHEMA = os.path.join(SOURCE_DIR, "results_schema", "screen.schema.json")
NODES = [f"node{i}" for i in range(1, 9)]
RATE = "8mbit"
SCREEN_ARGS = ["--large", "512K", "--small", "8K", "-n", "8", "-w", "1", "--max-concurrent", "2",
               "--netdevs", "eth0,eth3", "--launch-timeout", "120", "--timeout", "60"]


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # cls.work: the screens' results, kept when a test fails, for its logs
        open_cluster(cls, NODES, work_prefix="cclbench-screen-", tools=("coll_perf",))
        cls.failed = False

    @classmethod
    def tearDownClass(cls):
        close_cluster_keeping_work(cls, cls.failed, "screen runs")

    def run(self, result=None):
        outcome = super().run(result)
        if result is not None and (result.failures or result.errors):
            type(self).failed = True
        return outcome

    def tearDown(self):
        for node in NODES:
            for link in vcluster.RAILS:
                self.cluster.clear_shaping(node, link)
                self.cluster.set_link(node, link, up=True)

    def screen(self, run_id, *extra):
        """Runs cclbench screen from node1 over the agent; (exit code, screen.json, screen.md, stderr)."""
        started = time.monotonic()
        result = run_screen(self.cluster, NODES, self.work, run_id, SCREEN_ARGS + list(extra))
        run_dir = os.path.join(self.work, run_id)
        print(f"\n  {run_id}: exit {result.returncode} in {time.monotonic() - started:.0f}s", file=sys.stderr)
        self.assertIn(result.returncode, (0, 1, 3), result.stdout[-2000:] + result.stderr[-3000:])
        checked = subprocess.run(["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                                  VALIDATOR, SCHEMA, os.path.join(run_dir, "screen.json")],
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        with open(os.path.join(run_dir, "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        with open(os.path.join(run_dir, "screen.md"), encoding="utf-8") as handle:
            report = handle.read()
        for line in report.splitlines()[:11]:
            print("  | " + line, file=sys.stderr)
        return result.returncode, document, report, result.stderr

    @staticmethod
    def verdicts(document):
        return {row["name"]: row["verdict"] for row in document["nodes"]}

    def bad_nodes(self, document):
        return sorted(name for name, verdict in self.verdicts(document).items() if verdict == "bad")

    def rail_points(self, document, node=None, rail=None):
        return [pair for pair in document["pairs"] if pair["stage"] == "rail" and (node is None or node in
                (pair["a"], pair["b"])) and (rail is None or pair["rail"] == rail)]

    def test_healthy_fleet_every_node_accepted(self):
        code, document, report, _ = self.screen("healthy", "--quick", "1")
        self.assertEqual(self.verdicts(document), {node: "accept" for node in NODES},
                         json.dumps(document["pairs"], indent=1)[:4000])
        self.assertEqual((code, document["result"], document["links"], document["rails"]), (0, "pass", [], []))
        self.assertTrue(report.startswith("# Screen: PASS"))
        # Every pair kept its evidence: the MPI backend says there is no NCCL transport, and both rails moved bytes
        # on both hosts (the TCP BTL stripes over eth0 and eth3).
        judged = [entry["check"] for entry in document["judged"]]
        self.assertIn("pair_speed", judged)
        self.assertIn("rail_speed", judged)
        self.assertIn("- Judged: ", report)
        # Each rail alone: the TCP BTL kept on that interface, so the bound rail carried (nearly) every byte.
        self.assertGreaterEqual(len(self.rail_points(document)), 8, json.dumps(document["pairs"], indent=1)[:3000])
        for pair in self.rail_points(document):
            other = "eth3" if pair["rail"] == "eth0" else "eth0"
            for counts in (pair["rail_bytes"] or {}).values():
                self.assertGreater(counts[pair["rail"]], 10 * counts[other], pair)
        for pair in document["pairs"]:
            if pair["stage"] == "rail":
                continue
            if pair["busbw_gbps"] is None:  # a launch that failed (Open MPI's session directory, once, under load)
                self.assertTrue(pair["reason"], pair)  # says why; the pair was retested and the verdicts stand
                continue
            self.assertEqual(pair["transport"]["backend"], "mpi")
            self.assertIsInstance(pair["rail_bytes"], dict, pair)
            self.assertEqual(sorted(pair["rail_bytes"]), sorted([pair["a"], pair["b"]]))
            for counts in pair["rail_bytes"].values():
                self.assertGreater(min(counts["eth0"], counts["eth3"]) / max(counts.values()), 0.5, counts)

    def test_rate_limited_eth0_makes_that_node_and_only_it_bad(self):
        # A node's fault touches a quarter of the pairs; each pair is judged against the pairs without its nodes.
        # One job at a time here (two at once scattered healthy pairs 10x on 2 shared cores), and a fault far
        # outside even a loaded machine's scatter: 8 Mbit/s on eth0, ~100x below a healthy pair. The TCP BTL
        # stripes over both rails, so node3's pairs are that slow; node3's eth0 alone is too, eth3 alone is not.
        self.cluster.set_rate("node3", "eth0", RATE)
        code, document, report, _ = self.screen("tbf-node3", "--quick", "2", "--max-concurrent", "1", "--large", "256K")
        self.assertEqual(self.bad_nodes(document), ["node3"], json.dumps(document["nodes"], indent=1)[:4000])
        self.assertEqual([row for row in document["links"] if row["verdict"] == "bad"], [])
        # node3 is slow with partners known good: by its pairs (node.slow_with_good_partners) or, where the healthy
        # pairs scattered too widely for a pair to be judged (CI, 2026-12-06: healthy pairs 0.19-0.91 GB/s under
        # load, a pair's limit 730x below their median), by its eth0 alone, slow with at least two good partners.
        reasons = [reason for row in document["nodes"] if row["name"] == "node3" for reason in row["reasons"]]
        self.assertTrue(any(reason["code"] == "node.slow_with_good_partners" or (
            reason["code"] == "rail.slow" and len(reason["detail"].get("good_partners_slow") or []) >= 2)
            for reason in reasons), json.dumps(reasons, indent=1)[:3000])
        # node3's eth0 alone measured a tenth of its eth3 alone or less in every rail-alone point, and no other rail
        # is named. Whether that rail is named too depends on the healthy rails' scatter: on this machine eth3 alone
        # ran 0.4-2.3x eth0 alone in healthy pairs, so the band reached below 0.004 in one run (node3's eth0 at
        # 0.0037-0.0044 of eth3 not named, the node named by its pairs) and 0.0067 in another (named).
        points = self.rail_points(document, "node3", "eth0")
        self.assertTrue(points and all(pair["rail_ratio"] < 0.1 for pair in points), json.dumps(points)[:3000])
        bad_rails = [(row["node"], row["rail"]) for row in document["rails"] if row["verdict"] == "bad"]
        self.assertIn(bad_rails, ([], [("node3", "eth0")]), json.dumps(self.rail_points(document), indent=1)[:4000])
        for reason in (reason for row in document["rails"] for reason in row["reasons"] if reason["code"] == "rail.slow"):
            self.assertLess(reason["detail"]["ratio"], 0.1, reason)  # eth0 alone a tenth of eth3 alone, or less
        self.assertEqual(code, 1)
        self.assertIn("- Bad nodes: node3 (", report.splitlines()[2])

    def test_eth3_down_names_that_nodes_rail(self):
        self.cluster.set_link("node5", "eth3", up=False)
        code, document, report, _ = self.screen("eth3-down-node5", "--quick", "2")
        bad_rails = [(row["node"], row["rail"]) for row in document["rails"] if row["verdict"] == "bad"]
        self.assertEqual(bad_rails, [("node5", "eth3")], json.dumps(document["pairs"], indent=1)[:4000])
        self.assertEqual([name for name in self.bad_nodes(document) if name != "node5"], [])
        # The path step found it before any pair: no echo at all on node5's eth3 to any peer (rail.dead), so
        # node5 is not paired and nothing waits on its dead rail.
        node5 = next(row for row in document["nodes"] if row["name"] == "node5")
        self.assertEqual((node5["verdict"], node5["paired"]), ("bad", False))
        dead = [reason for reason in node5["reasons"] if reason["code"] == "rail.dead"]
        self.assertEqual(len(dead), 1, node5["reasons"])
        self.assertEqual(dead[0]["detail"]["rails"], ["eth3"])
        self.assertEqual(dead[0]["detail"]["peers"], [name for name in NODES if name != "node5"])
        self.assertIn("no echo reply", dead[0]["detail"]["words"])
        self.assertFalse([pair for pair in document["pairs"] if "node5" in (pair["a"], pair["b"])])
        self.assertEqual(code, 1)
        self.assertIn("- Bad rails: node5 eth3 (rail.dead)", report)
    # A throttled pair (htb between node2 and node6) is the fault matrix's screen.n8.slow_link cell: the link bad,
    # no node bad (tests/cluster/fault_matrix_cells.json).


if __name__ == "__main__":
    main()
