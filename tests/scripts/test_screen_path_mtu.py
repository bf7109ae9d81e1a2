"""The screen's path MTU step (rules/screen_rules.path_mtu_verdicts, through classify): which node or link a
failing don't-fragment path names, which pairs are then never launched, and what the document says. The checks
are made by the doctor's own check_path_mtu from probe answers, as `cclbench screen` gets them; the expected
verdicts are written out from the fault (which node's port is at 1500), not from the rule's code. The probing
itself runs on the virtual cluster (tests/cluster/fault_matrix.py, cell screen.n4.path_mtu)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "scripts"))
from cclbench_lib.model.doctor_checks import check_path_mtu, path_mtu_targets  # noqa: E402
from cclbench_lib.rules import screen_rules as rules  # noqa: E402

RAILS = ("eth0", "eth3")


def fleet_rails(count, missing=None):
    """{node: doctor "rails" entry}: nodeN has 198.18.10.N on eth0 and 198.18.13.N on eth3, MTU 9000."""
    found = {}
    for n in range(1, count + 1):
        interfaces = [{"name": rail, "address": f"198.18.{10 + int(rail[-1])}.{n}", "prefixlen": 24, "mtu": 9000,
                       "rail": True} for rail in RAILS if (f"node{n}", rail) != missing]
        found[f"node{n}"] = {"source": "NCCL_SOCKET_IFNAME", "interfaces": interfaces, "reason": None}
    return found


def checks_for(count, blocked=(), missing=None, down=False):
    """The doctor's path_mtu checks when the don't-fragment echo fails exactly on the (node, rail) ends in
    `blocked` (a switch port at 1500 there: every path through it, in both directions), largest 1500; down: no
    echo at any size there (the interface down), largest None."""
    targets, problems = path_mtu_targets(fleet_rails(count, missing))
    probes = {}
    for host, wanted in targets.items():
        probes[host] = []
        for target in wanted:
            through = (host, target["netdev"]) not in blocked and (target["peer"], target["peer_netdev"]) not in blocked
            probes[host].append({"netdev": target["netdev"], "address": target["address"], "size": 9000,
                                 "ok": through, "largest": 9000 if through else (None if down else 1500),
                                 "method": "raw ICMP",
                                 "reason": None})
    return problems + check_path_mtu(targets, probes)


def stage(count):
    return {f"node{n}": {"doctor": "pass", "intra_busbw_gbps": 20.0, "intra_small_time_us": 30.0,
                         "loopback_busbw_gbps": {}} for n in range(1, count + 1)}


def classify(count, checks):
    nodes = [f"node{n}" for n in range(1, count + 1)]
    return rules.classify(nodes, stage(count), [], checks)


def bad_nodes(verdicts):
    return sorted(row["name"] for row in verdicts["nodes"] if row["verdict"] == rules.BAD)


def codes(row):
    return sorted(reason["code"] for reason in row["reasons"])


class PathMtu(unittest.TestCase):
    def test_one_port_at_1500_names_its_node_and_rail_at_three_to_eight_nodes(self):
        for count in (3, 4, 8):
            with self.subTest(nodes=count):
                verdicts = classify(count, checks_for(count, blocked={("node2", "eth3")}))
                self.assertEqual(bad_nodes(verdicts), ["node2"])
                node2 = next(row for row in verdicts["nodes"] if row["name"] == "node2")
                self.assertEqual(node2["paired"], False)  # never launched: it would wait out the watchdog
                self.assertIn(rules.NODE_PATH_MTU, codes(node2))
                detail = next(r["detail"] for r in node2["reasons"] if r["code"] == rules.NODE_PATH_MTU)
                self.assertEqual(detail["peers"], [f"node{n}" for n in range(1, count + 1) if n != 2])
                self.assertEqual(detail["rails"], ["eth3"])
                self.assertIn("1500", detail["words"])
                self.assertEqual([(r["node"], r["rail"], r["verdict"]) for r in verdicts["rails"]],
                                 [("node2", "eth3", rules.BAD)])
                self.assertEqual(verdicts["links"], [])
                self.assertEqual((verdicts["result"], verdicts["exit_code"]), ("fail", 1))
                others = [row for row in verdicts["nodes"] if row["name"] != "node2"]
                self.assertFalse([r for row in others for r in row["reasons"] if "path_mtu" in r["code"]])

    def test_the_failing_paths_are_blocked_for_the_pairs(self):
        _, _, blocked = rules.path_mtu_verdicts(["node1", "node2", "node3", "node4"],
                                                checks_for(4, blocked={("node4", "eth0")}))
        self.assertEqual(blocked, {frozenset(("node4", peer)) for peer in ("node1", "node2", "node3")})

    def test_two_nodes_cannot_tell_which_end_the_link_is_bad(self):
        verdicts = classify(2, checks_for(2, blocked={("node1", "eth3")}))
        self.assertEqual(bad_nodes(verdicts), [])
        self.assertEqual([(link["a"], link["b"], link["verdict"], codes(link)) for link in verdicts["links"]],
                         [("node1", "node2", rules.BAD, [rules.LINK_PATH_MTU])])
        self.assertEqual(verdicts["links"][0]["reasons"][0]["detail"]["rails"], ["node1:eth3", "node2:eth3"])
        self.assertEqual(verdicts["result"], "fail")

    def test_one_path_alone_is_a_link_not_a_node(self):
        # node1 and node2 reach node3 and node4 on both rails; only node1 <-> node2 on eth0 fails.
        checks = [c for c in checks_for(4) if c["status"] == "pass"]
        broken = checks_for(2, blocked={("node1", "eth0")})
        checks += [c for c in broken if c["status"] == "fail"]
        checks = [c for c in checks if not (c["status"] == "pass" and "eth0" in c["subject"]
                                            and {"node1", "node2"} <= set(c["subject"].replace(":", " ").split()))]
        verdicts = classify(4, checks)
        self.assertEqual(bad_nodes(verdicts), [])
        self.assertEqual([(link["a"], link["b"]) for link in verdicts["links"]], [("node1", "node2")])

    def test_every_path_failing_blames_the_fabric_not_a_node(self):
        verdicts = classify(4, checks_for(4, blocked={(f"node{n}", "eth3") for n in range(1, 5)}))
        self.assertEqual(bad_nodes(verdicts), [])
        self.assertEqual(len(verdicts["links"]), 6)  # every pair of four nodes
        self.assertEqual(verdicts["result"], "fail")

    def test_a_node_with_no_interface_on_a_rail_subnet_is_bad(self):
        verdicts = classify(3, checks_for(3, missing=("node3", "eth3")))
        self.assertEqual(bad_nodes(verdicts), ["node3"])

    def test_a_rail_with_no_echo_at_all_is_dead_not_small(self):
        verdicts = classify(4, checks_for(4, blocked={("node3", "eth0")}, down=True))
        self.assertEqual(bad_nodes(verdicts), ["node3"])
        node3 = next(row for row in verdicts["nodes"] if row["name"] == "node3")
        self.assertEqual(codes(node3), [rules.RAIL_DEAD])
        self.assertEqual([(r["node"], r["rail"], codes(r)) for r in verdicts["rails"]],
                         [("node3", "eth0", [rules.RAIL_DEAD])])
        two = classify(2, checks_for(2, blocked={("node2", "eth0")}, down=True))
        self.assertEqual([codes(link) for link in two["links"]], [[rules.LINK_PATH_DOWN]])

    def test_healthy_paths_are_judged_and_pass(self):
        verdicts = classify(4, checks_for(4))
        # (No pair given: every node is suspect for never meeting one; nothing about paths.)
        self.assertEqual(bad_nodes(verdicts), [])
        self.assertEqual(verdicts["links"], [])
        self.assertFalse([r for row in verdicts["nodes"] for r in row["reasons"] if "path_mtu" in r["code"]])
        judged = {entry["check"]: entry["detail"] for entry in verdicts["judged"]}
        self.assertEqual(judged[rules.CHECK_PATH_MTU], {"paths": 4 * 3 * 2})  # each node each peer each rail
        self.assertEqual(verdicts["path_mtu"], checks_for(4))

    def test_not_run_is_said(self):
        verdicts = classify(4, None)
        entry = next(e for e in verdicts["not_judged"] if e["check"] == rules.CHECK_PATH_MTU)
        self.assertEqual(entry["reason"], rules.NOT_JUDGED_NOT_PROBED)
        self.assertIsNone(verdicts["path_mtu"])



class NodeStageApart(unittest.TestCase):
    """Which nodes the node stage runs apart (rules/screen_node_stage.on_failing_paths: its launches of several nodes
    are one MPI job across them, which a failing path holds to its deadline), and the checks kept for the nodes that
    passed alone (model/doctor_paths.path_checks_between)."""

    NODES = ["node1", "node2", "node3", "node4"]

    def test_a_node_on_a_failing_rail_runs_apart_and_the_others_together(self):
        from cclbench_lib.rules.screen_node_stage import on_failing_paths
        self.assertEqual(on_failing_paths(self.NODES, checks_for(4, blocked={("node4", "eth0")}, down=True)),
                         ["node4"])
        self.assertEqual(on_failing_paths(self.NODES, checks_for(4, blocked={("node2", "eth3")})), ["node2"])

    def test_both_ends_of_a_failing_link_run_apart(self):
        from cclbench_lib.rules.screen_node_stage import on_failing_paths
        self.assertEqual(on_failing_paths(["node1", "node2"], checks_for(2, blocked={("node1", "eth3")})),
                         ["node1", "node2"])
        # only node1 <-> node2 on eth0 fails among four nodes: those two, not node3 and node4
        checks = [c for c in checks_for(4) if not ("eth0" in c["subject"] and
                                                   {"node1", "node2"} <= set(c["subject"].replace(":", " ").split()))]
        checks += [c for c in checks_for(2, blocked={("node1", "eth0")}) if c["status"] == "fail"]
        self.assertEqual(on_failing_paths(self.NODES, checks), ["node1", "node2"])

    def test_healthy_paths_or_none_probed_put_no_node_apart(self):
        from cclbench_lib.rules.screen_node_stage import on_failing_paths
        self.assertEqual(on_failing_paths(self.NODES, checks_for(4)), [])
        self.assertEqual(on_failing_paths(self.NODES, None), [])

    def test_the_checks_between_the_nodes_that_passed_alone_are_theirs_alone(self):
        from cclbench_lib.model.doctor_paths import path_checks_between
        everyone = checks_for(4, blocked={("node4", "eth0")})
        kept = path_checks_between(everyone, ["node1", "node2", "node3"])
        # 3 nodes x 2 peers x 2 rails, each passing: what probing those three alone gives
        self.assertEqual(len(kept), 12)
        self.assertEqual(sorted(c["subject"] for c in kept), sorted(c["subject"] for c in checks_for(3)))
        self.assertTrue(all(c["status"] == "pass" for c in kept))
        self.assertEqual(path_checks_between(everyone, self.NODES), everyone)
        self.assertIsNone(path_checks_between(everyone, ["node1"]), "one node: no path")
        self.assertIsNone(path_checks_between(None, self.NODES), "not probed")
        # a host's own check (no interface on a rail subnet) stays with its host
        missing = checks_for(3, missing=("node3", "eth3"))
        own = [c for c in missing if c.get("subject_kind") == "path" and " -> " not in c["subject"]]
        self.assertTrue(own)
        self.assertEqual([c for c in path_checks_between(missing, ["node1", "node3"]) if c in own], own)
        self.assertFalse([c for c in path_checks_between(missing, ["node1", "node2"]) if c in own])


if __name__ == "__main__":
    unittest.main()
