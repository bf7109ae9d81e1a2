"""The path MTU check's pure parts (model/doctor_checks: path_mtu_targets, check_path_mtu): which host
probes which address at which size, and what a probe's answer means. The probing itself runs on the
virtual cluster (tests/cluster/test_path_mtu.py)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "scripts"))
from cclbench_lib.model.doctor_checks import check_path_mtu, path_mtu_findings, path_mtu_targets  # noqa: E402
from cclbench_lib.rules.doctor_gate import failed_paths, host_findings, not_run_reason, paths_crossed  # noqa: E402


def iface(name, address, mtu, rail):
    return {"name": name, "address": address, "prefixlen": 24, "mtu": mtu, "rail": rail}


def rails(*interfaces, source="NCCL_SOCKET_IFNAME"):
    return {"source": source, "interfaces": list(interfaces), "reason": None}


# node5 has NCCL_SOCKET_IFNAME (its rails flagged); node7's rank did not get it: its rails are found
# by subnet. mgmt0 is on no rail's subnet and is never probed.
CLUSTER = {
    "node5": rails(iface("eth0", "198.18.10.5", 9000, True), iface("eth3", "198.18.13.5", 9000, True),
                   iface("mgmt0", "198.18.0.5", 1500, False)),
    "node7": rails(iface("eth0", "198.18.10.7", 9000, False), iface("eth3", "198.18.13.7", 9000, False),
                   iface("mgmt0", "198.18.0.7", 1500, False), source=None),
}


class Targets(unittest.TestCase):
    def test_each_host_probes_each_peer_on_each_rail_subnet(self):
        targets, problems = path_mtu_targets(CLUSTER)
        self.assertEqual(problems, [])
        self.assertEqual({(h, t["netdev"], t["address"], t["mtu"]) for h in targets for t in targets[h]},
                         {("node5", "eth0", "198.18.10.7", 9000), ("node5", "eth3", "198.18.13.7", 9000),
                          ("node7", "eth0", "198.18.10.5", 9000), ("node7", "eth3", "198.18.13.5", 9000)})

    def test_a_host_without_an_interface_on_a_rail_subnet_fails(self):
        cluster = dict(CLUSTER, node7=rails(iface("eth0", "198.18.10.7", 9000, False), source=None))
        _, problems = path_mtu_targets(cluster)
        self.assertEqual([(p["host"], p["status"], p["subject"]) for p in problems],
                         [("node7", "fail", "node7 198.18.13.0/24")])

    def test_no_rail_anywhere_checks_every_shared_subnet(self):
        # No RoCE, no NCCL_SOCKET_IFNAME on any host: NCCL may use any interface.
        cluster = {host: rails(*[dict(i, rail=False) for i in r["interfaces"]], source=None) for host, r in CLUSTER.items()}
        cluster["node7"]["interfaces"].append(iface("eth9", "198.18.99.7", 1500, False))  # node7's alone
        targets, problems = path_mtu_targets(cluster)
        self.assertEqual(problems, [])
        self.assertEqual(sorted(t["address"] for t in targets["node5"]), ["198.18.0.7", "198.18.10.7", "198.18.13.7"])

    def test_one_host_under_two_names_is_not_probed(self):
        targets, problems = path_mtu_targets({"localhost": CLUSTER["node5"], "127.0.0.1": CLUSTER["node5"]})
        self.assertEqual(targets, {})
        self.assertEqual({p["status"] for p in problems}, {"skip"})
        self.assertIn("one host under two names", problems[0]["reason"])

    def test_no_addresses_is_a_skip_with_the_reason(self):
        targets, problems = path_mtu_targets({"node5": {"source": None, "interfaces": [], "reason": "fixture"},
                                              "node7": None})
        self.assertEqual(targets, {})
        self.assertEqual(problems[0]["status"], "skip")
        self.assertIn("no interface addresses from node5, node7", problems[0]["reason"])


def probe_results(targets, eth0_largest):
    """Every probe's answer: eth0 gets through up to eth0_largest bytes (None: nothing), the other rails all."""
    found = {}
    for host, wanted in targets.items():
        found[host] = [{"netdev": t["netdev"], "address": t["address"], "size": t["mtu"],
                        "ok": t["netdev"] != "eth0" or eth0_largest == t["mtu"],
                        "largest": t["mtu"] if t["netdev"] != "eth0" else eth0_largest,
                        "method": "raw ICMP", "reason": None} for t in wanted]
    return found


class Verdict(unittest.TestCase):
    def setUp(self):
        self.targets, _ = path_mtu_targets(CLUSTER)

    def probes(self, eth0_largest):
        return probe_results(self.targets, eth0_largest)

    def test_mismatch_fails_naming_hosts_interface_and_largest_size(self):
        results = check_path_mtu(self.targets, self.probes(1500))
        failed = [r for r in results if r["status"] == "fail"]
        self.assertEqual(sorted(r["subject"] for r in failed), ["node5:eth0 -> node7:eth0", "node7:eth0 -> node5:eth0"])
        self.assertIn("largest don't-fragment packet from node5 to node7 (198.18.10.7) is 1500 bytes",
                      next(r["detail"] for r in failed if r["host"] == "node5"))
        self.assertEqual(len(path_mtu_findings(results)), 2)
        self.assertEqual({r["status"] for r in results if "eth3" in r["subject"]}, {"pass"})

    def test_no_reply_at_all_is_a_dead_rail(self):
        probes = self.probes(None)
        results = check_path_mtu(self.targets, probes)
        detail = next(r["detail"] for r in results if r["subject"] == "node5:eth0 -> node7:eth0")
        self.assertIn("no echo reply from 198.18.10.7 even at 576 bytes", detail)

    def test_a_host_without_probe_results_is_a_skip_not_a_pass(self):
        results = check_path_mtu(self.targets, {"node5": "exit 1: mpirun: no such host"})
        self.assertEqual({r["status"] for r in results}, {"skip"})
        self.assertTrue(all("no probe result from" in r["reason"] for r in results))


class DoctorGate(unittest.TestCase):
    """Which launches the doctor's failed paths leave out (rules/doctor_gate.py), from check_path_mtu's results."""

    def setUp(self):
        targets, _ = path_mtu_targets(CLUSTER)
        self.checks = check_path_mtu(targets, probe_results(targets, 1500)) + [  # eth0 black-holes above 1500
            {"id": "nccl_env", "status": "fail", "host": "node9", "subject": "NCCL_IB_HCA", "detail": "no such HCA"},
            {"id": "rdma_port", "status": "warn", "host": "node5", "subject": "mlx5_0:1", "detail": "rate 200"}]

    def test_a_launch_across_both_ends_of_a_failed_path_is_left_out_with_the_finding(self):
        paths = failed_paths(self.checks)
        self.assertEqual(sorted(path["hosts"] for path in paths), [("node5", "node7"), ("node7", "node5")])
        crossed = paths_crossed(["node5", "node7"], paths)
        self.assertEqual(len(crossed), 2)
        reason = not_run_reason(crossed)
        self.assertTrue(reason.startswith("not run: the doctor failed the path(s)"), reason)
        self.assertIn("path_mtu node5:eth0 -> node7:eth0: MTU 9000 at both ends, but the largest don't-fragment "
                      "packet from node5 to node7 (198.18.10.7) is 1500 bytes", reason)
        self.assertIn("--run-despite-doctor", reason)

    def test_launches_on_one_host_or_elsewhere_still_run(self):
        paths = failed_paths(self.checks)
        self.assertEqual(paths_crossed(["node5"], paths), [], "one host crosses no path")
        self.assertEqual(paths_crossed(["node5", "node9"], paths), [], "node7 is not in this launch")
        self.assertEqual(failed_paths([c for c in self.checks if c.get("id") != "path_mtu"]), [],
                         "only a failed path between hosts leaves launches out, not other doctor fails")

    def test_a_hung_launch_gets_the_fail_findings_of_its_hosts_only(self):
        lines = host_findings(self.checks, ["node5", "node7"])
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(all(line.startswith("path_mtu node") for line in lines), lines)
        self.assertEqual(host_findings(self.checks, ["node9"]), ["nccl_env NCCL_IB_HCA: no such HCA"])


if __name__ == "__main__":
    unittest.main()
