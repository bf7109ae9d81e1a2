#!/usr/bin/env python3
"""coll_perf --netdevs on the virtual cluster (vcluster.py): 2 nodes, MPI backend over the tcp BTL on
both rails, all_reduce 4M. Each host's node row in evidence.rails carries netdev_rails rows for eth0
and eth3 (source "netdev"); both carry a fair share on each host; with node7's eth3 down, eth3 carries
~0 on node7 and is flagged. Expected values come from outside coll_perf: the kernel's counters of the
nodes' interfaces read by the harness (vcluster.Cluster.counters) around the same run.
Exits 77 (skip) with the reason where the harness cannot run (not root, no namespaces, no harness)."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster_setup import COLL_PERF, close_cluster, mpi_env, mpirun_argv, open_cluster, skip_reason  # noqa: E402

SIZE = 4 << 20


class NetdevRailsOnTheVirtualCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        open_cluster(cls, ["node5", "node7"], "cclbench-netdev-rails-", tools=("coll_perf",))

    @classmethod
    def tearDownClass(cls):
        close_cluster(cls)

    def run_coll_perf(self, name):
        out = os.path.join(self.work, name + ".json")
        argv = mpirun_argv(self.cluster, "node5:1,node7:1", [
            COLL_PERF, "--backend", "mpi", "--coll", "all_reduce", "--placement", "out",
            "-b", str(SIZE), "-e", str(SIZE), "-n", "10", "-w", "1", "--quiet", "--netdevs", "eth0,eth3", "-J", out], 2)
        before = {link: self.cluster.counters("node7", link) for link in ("eth0", "eth3")}
        result = self.cluster.exec("node5", argv, env=mpi_env(), capture_output=True, text=True, timeout=120)
        after = {link: self.cluster.counters("node7", link) for link in ("eth0", "eth3")}
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        with open(out) as handle:
            document = json.load(handle)
        kernel = {link: after[link]["rx_bytes"] - before[link]["rx_bytes"] for link in before}
        cases = document["cases"]
        self.assertEqual(len(cases), 1)
        nodes = {node["host"]: node for node in cases[0]["evidence"]["rails"]["nodes"]}
        self.assertEqual(sorted(nodes), ["node5", "node7"], "one node row per host")
        rows = {host: {row["rail"]: row for row in node["netdev_rails"]} for host, node in nodes.items()}
        print(f"\n  {name}: shares {{host: {{rail: share}}}} "
              f"{ {h: {r: v['share'] for r, v in rs.items()} for h, rs in rows.items()} }; node7 kernel rx {kernel}",
              file=sys.stderr)
        return nodes, rows, kernel, cases[0]["evidence"]["rails"].get("flags", [])

    def test_both_rails_carry_about_half_on_each_host(self):
        nodes, rows, kernel, flags = self.run_coll_perf("both")
        for host, by_rail in rows.items():
            self.assertEqual(sorted(by_rail), ["eth0", "eth3"])
            for rail, row in by_rail.items():
                self.assertEqual(row["source"], "netdev")
                self.assertIsNone(row["reason"], row)
                self.assertGreater(row["share"], 0.3, f"{host} {rail}: {row}")
        # The case's rx on node7 is within the harness's window around the whole run.
        for rail in ("eth0", "eth3"):
            self.assertLessEqual(rows["node7"][rail]["rx_bytes"], kernel[rail])
        self.assertGreater(sum(rows["node7"][r]["rx_bytes"] for r in ("eth0", "eth3")), 10 * SIZE // 2)
        self.assertEqual(flags, [])

    def test_node7_eth3_down_carries_nothing_there_and_is_flagged(self):
        self.cluster.set_link("node7", "eth3", up=False)
        try:
            nodes, rows, kernel, flags = self.run_coll_perf("eth3_down")
        finally:
            self.cluster.set_link("node7", "eth3", up=True)
        eth3 = rows["node7"]["eth3"]
        self.assertIsNotNone(eth3["total_bytes"], eth3)  # down but readable: a measured ~0, not null
        self.assertLess(eth3["total_bytes"], 64 * 1024, eth3)
        self.assertLess(eth3["share"], 0.01)
        self.assertEqual(kernel["eth3"], 0)
        self.assertTrue(any(flag.startswith("node7: rail eth3 (netdev) carried") for flag in flags), flags)


def main():
    reason = skip_reason("coll_perf")
    if reason:
        print(f"SKIP: {reason}")
        return 77
    result = unittest.main(exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
