"""The path MTU check's pure parts (model/doctor_checks: path_mtu_targets, check_path_mtu): which host
probes which address at which size, and what a probe's answer means; the doctor's gate (rules/doctor_gate.py);
dead paths (rules/dead_paths.py: which launches need a path, which node, rail or link the checks name, the
verdict's path.dead) and the runner's path check after a failed launch (execute/runner.Baseline: which launches
it leaves out). The probing itself runs on the virtual cluster (tests/cluster/test_path_mtu.py, and the fault
matrix's paths_die cell)."""
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.environ.get("CCLBENCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "scripts"))
from cclbench_lib.model.doctor_checks import check_path_mtu, path_mtu_findings, path_mtu_targets  # noqa: E402
from cclbench_lib.rules.doctor_gate import failed_paths, host_findings, not_run_reason, paths_crossed  # noqa: E402
from cclbench_lib.rules import dead_paths  # noqa: E402
from cclbench_lib.rules.verdict import build_verdict  # noqa: E402
from cclbench_lib.render.anomalies import anomaly_row  # noqa: E402
from cclbench_lib.execute import doctor as doctor_step  # noqa: E402
from cclbench_lib.execute.runner import Baseline  # noqa: E402


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


class ProbesAtOnce(unittest.TestCase):
    """A probe rank's probes run at once (execute/path_mtu.run_probes): each answer still its own probe's, in the
    order asked, though every socket sees every reply. Live, on this host's loopback (a raw ICMP socket: root)."""

    def test_more_probes_than_run_at_once_each_get_their_own_answer_in_order(self):
        import socket
        from cclbench_lib.execute import path_mtu
        try:
            socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
        except PermissionError:
            self.skipTest("no raw ICMP socket here (not root)")
        # Twice PROBES_AT_ONCE + 3 probes, two of them to each address at different sizes: a reply matched to the
        # wrong socket would give a probe another's size (or none).
        count = 2 * path_mtu.PROBES_AT_ONCE + 3
        specs = [("lo", f"127.0.0.{1 + index // 2}", 600 + 100 * index) for index in range(count)]
        line = path_mtu.run_probes(specs)
        self.assertTrue(line.startswith(path_mtu.JSON_LINE_PREFIX))
        found = json.loads(line[len(path_mtu.JSON_LINE_PREFIX):])
        self.assertEqual([(item["netdev"], item["address"], item["size"]) for item in found], specs)
        self.assertEqual([(item["ok"], item["largest"], item["reason"]) for item in found],
                         [(True, size, None) for _, _, size in specs])
        self.assertEqual(path_mtu.run_probes([]), path_mtu.JSON_LINE_PREFIX + "[]")
        # A raw socket matches its reply by identifier and sequence: two sockets of one process never share one.
        sockets = [path_mtu.EchoSocket("lo") for _ in range(3)]
        self.addCleanup(lambda: [sock.close() for sock in sockets])
        self.assertEqual(len({sock.ident for sock in sockets}), 3)


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



# -- dead paths ---------------------------------------------------------------------------------------------------

NODES3 = ("node1", "node2", "node3")
SUBNETS = "198.18.10.0/24,198.18.13.0/24"  # the rails by subnet, as the virtual cluster's --mpirun-args give them


def fleet(nodes, flagged=True):
    """Every node with eth0 and eth3 on the rail subnets (flagged rails; flagged False: no interface is, as on the
    GPU-less virtual cluster, and every subnet is probed) and mgmt0 (not a rail)."""
    return {node: rails(iface("eth0", f"198.18.10.{n}", 1500, flagged), iface("eth3", f"198.18.13.{n}", 1500, flagged),
                        iface("mgmt0", f"198.18.0.{n}", 1500, False))
            for n, node in enumerate(nodes, start=1)}


def path_checks(nodes, dead=(), down_here=(), unreached=(), peers=None, flagged=True):
    """check_path_mtu's results between `nodes`: a probe over a (node, rail) end in `dead` (either end) gets no reply
    even at 576 bytes (a switch port that stopped forwarding); a host in `down_here` cannot even send on that rail
    (its interface down); a host in `unreached` returned no probe result (the launcher could not reach it). peers:
    {host: the peers it probes} (None: every other node); flagged: fleet's."""
    targets, _ = path_mtu_targets(fleet(nodes, flagged))
    if peers is not None:
        targets = {host: [t for t in wanted if t["peer"] in peers.get(host, ())] for host, wanted in targets.items()}
    probes = {}
    for host, wanted in targets.items():
        if host in unreached:
            probes[host] = "the probe launch did not end within 44s"
            continue
        probes[host] = []
        for t in wanted:
            if (host, t["netdev"]) in down_here:
                probes[host].append({"netdev": t["netdev"], "address": t["address"], "size": t["mtu"], "ok": None,
                                     "largest": None, "method": "raw ICMP", "reason": "probe failed: Network is unreachable"})
                continue
            through = (host, t["netdev"]) not in dead and (t["peer"], t["peer_netdev"]) not in dead and \
                (t["peer"], t["peer_netdev"]) not in down_here
            probes[host].append({"netdev": t["netdev"], "address": t["address"], "size": t["mtu"], "ok": through,
                                 "largest": t["mtu"] if through else None, "method": "raw ICMP",
                                 "reason": None if through else "no reply at 1500 nor at 576 bytes"})
    return check_path_mtu(targets, probes)


def mpi_launch(name, hosts, netdev=None, kind="inter"):
    """A launch of the GPU-less cluster plan: its TCP traffic over the rail subnets, or over one interface alone."""
    argv = ["mpirun", "--mca", "btl_tcp_if_include", SUBNETS, "-np", "4"]
    if netdev:
        argv = ["mpirun", "--mca", "btl_tcp_if_include", netdev, "-np", "4"]
    return {"name": name, "kind": kind, "hosts": list(hosts), "env": {}, "nranks": 2 * len(hosts),
            "argv": argv + ["coll_perf", "--backend", "mpi", "--point", name]}


def mpi_plan(nodes):
    return ([{"name": f"doctor.{n}", "kind": "doctor", "hosts": [n], "argv": []} for n in nodes]
            + [mpi_launch("sanity", nodes, kind="sanity")]
            + [mpi_launch(f"intra.{n}", [n], kind="intra") for n in nodes]
            + [mpi_launch("inter.mpi", nodes), mpi_launch("inter.mpi.rail-eth0", nodes, "eth0"),
               mpi_launch("inter.mpi.rail-eth3", nodes, "eth3")])


def doctor_doc(nodes, checks=()):
    return {"kind": "doctor", "rails": fleet(nodes), "links": {n: {"rdma_ports": {}} for n in nodes},
            "checks": list(checks)}


class DeadPathAttribution(unittest.TestCase):
    """Which fault the path checks name (rules/dead_paths.attribute): expected values from the injected fault."""

    def faults(self, doctor_checks, *run_checks):
        observations = dead_paths.observe(doctor_checks, "doctor")
        for after, checks in run_checks:
            observations += dead_paths.observe(checks, "run", after)
        return dead_paths.attribute(observations)

    def test_healthy_paths_name_nothing(self):
        self.assertEqual(self.faults(path_checks(NODES3), ("inter.mpi", path_checks(NODES3))), [])

    def test_one_rail_of_one_node_of_three_names_that_node_and_rail(self):
        dead = {("node3", "eth3")}
        faults = self.faults(path_checks(NODES3), ("inter.mpi", path_checks(NODES3, dead=dead)))
        self.assertEqual([(f["kind"], f["hosts"], f["rails"]) for f in faults], [("node", ["node3"], ["eth3"])])
        fault = faults[0]
        self.assertEqual(fault["alive_rails"], ["eth0"])
        self.assertEqual((fault["source"], fault["found_after"], fault["was_alive"]), ("run", "inter.mpi", True))
        self.assertEqual(sorted(fault["paths"]), ["node1:eth3 -> node3:eth3", "node2:eth3 -> node3:eth3",
                                                  "node3:eth3 -> node1:eth3", "node3:eth3 -> node2:eth3"])
        self.assertEqual(dead_paths.fault_subject(fault), "node3 eth3")

    def test_two_hosts_name_the_link_not_an_end(self):
        dead = {("node2", "eth0"), ("node2", "eth3")}
        faults = self.faults(path_checks(NODES3[:2]), ("inter.mpi", path_checks(NODES3[:2], dead=dead)))
        self.assertEqual([(f["kind"], f["hosts"], f["rails"]) for f in faults],
                         [("link", ["node1", "node2"], ["eth0", "eth3"])])

    def test_a_host_that_cannot_send_on_its_rail_is_named_even_with_two_hosts(self):
        faults = self.faults(path_checks(NODES3[:2], down_here={("node2", "eth3")}))
        self.assertEqual([(f["kind"], f["hosts"], f["rails"], f["source"]) for f in faults],
                         [("node", ["node2"], ["eth3"], "doctor")])

    def test_both_rails_of_a_node_of_three(self):
        dead = {("node2", "eth0"), ("node2", "eth3")}
        faults = self.faults(path_checks(NODES3), ("tuning.inter.cross0", path_checks(NODES3, dead=dead)))
        self.assertEqual([(f["kind"], f["hosts"], f["rails"], f["alive_rails"]) for f in faults],
                         [("node", ["node2"], ["eth0", "eth3"], [])])

    def test_every_path_of_a_rail_between_three_hosts_is_the_rail(self):
        dead = {(n, "eth3") for n in NODES3}
        faults = self.faults(path_checks(NODES3), ("inter.mpi", path_checks(NODES3, dead=dead)))
        self.assertEqual([(f["kind"], f["hosts"], f["rails"]) for f in faults], [("rail", list(NODES3), ["eth3"])])

    def test_two_dead_nodes_of_four_are_both_named(self):
        nodes = NODES3 + ("node4",)
        dead = {("node3", "eth3"), ("node4", "eth3")}
        faults = self.faults(path_checks(nodes), ("inter.mpi", path_checks(nodes, dead=dead)))
        self.assertEqual(sorted((f["kind"], tuple(f["hosts"]), tuple(f["rails"])) for f in faults),
                         [("node", ("node3",), ("eth3",)), ("node", ("node4",), ("eth3",))])

    def test_dead_at_the_doctor_is_dead_from_the_start(self):
        faults = self.faults(path_checks(NODES3, dead={("node3", "eth3")}))
        self.assertEqual([(f["hosts"], f["source"], f["found_after"], f["was_alive"]) for f in faults],
                         [(["node3"], "doctor", None, False)])

    def test_a_path_alive_again_at_the_last_check_names_nothing(self):
        faults = self.faults(path_checks(NODES3), ("inter.mpi", path_checks(NODES3, dead={("node3", "eth3")})),
                             ("inter.mpi.rail-eth0", path_checks(NODES3)))
        self.assertEqual(faults, [])

    def test_a_host_the_launcher_cannot_reach_is_unreachable(self):
        faults = self.faults(path_checks(NODES3), ("inter.mpi", path_checks(NODES3, unreached={"node2"})))
        self.assertEqual([(f["kind"], f["hosts"], f["found_after"]) for f in faults],
                         [("unreachable", ["node2"], "inter.mpi")])


class NeededRails(unittest.TestCase):
    """Which rails a launch sends over (rules/dead_paths.needed_rails), from how the plan binds it."""

    def needs(self, launch, run_env=None, doctor=None):
        return dead_paths.needed_rails(launch, run_env, doctor or doctor_doc(NODES3))

    def uses(self, specs):
        return [rail for rail in ("eth0", "eth3", "mgmt0") if dead_paths.rail_needed(specs, rail)]

    def test_the_mpi_backend_over_one_interface_needs_that_one(self):
        self.assertEqual(self.uses(self.needs(mpi_launch("inter.mpi.rail-eth0", NODES3, "eth0"))), ["eth0"])

    def test_the_mpi_backend_over_subnets_needs_their_interfaces(self):
        self.assertEqual(self.uses(self.needs(mpi_launch("inter.mpi", NODES3))), ["eth0", "eth3"])
        self.assertIsNone(self.needs(mpi_launch("inter.mpi", NODES3), doctor={"rails": {}}),
                          "a subnet no known interface is on: any rail")

    def test_nccl_over_sockets_needs_its_socket_interfaces(self):
        launch = {"name": "inter.rail-eth3", "kind": "inter", "hosts": list(NODES3), "argv": ["coll_perf"],
                  "env": {"NCCL_SOCKET_IFNAME": "=eth3"}}
        self.assertEqual(self.uses(self.needs(launch)), ["eth3"])
        launch["env"] = {"NCCL_CROSS_NIC": "0"}
        self.assertEqual(self.uses(self.needs(launch, run_env={"NCCL_SOCKET_IFNAME": "eth0,eth3"})), ["eth0", "eth3"])
        self.assertIsNone(self.needs(launch), "NCCL picks its interfaces itself: any rail")
        self.assertIsNone(self.needs(launch, run_env={"NCCL_SOCKET_IFNAME": "^docker"}), "an exclusion list: any rail")

    def test_nccl_over_one_hca_needs_its_netdev_and_the_bootstrap_interface(self):
        doctor = dict(doctor_doc(NODES3), links={n: {"rdma_ports": {"mlx5_0:1": {"netdevs": ["eth0"]},
                                                                      "mlx5_3:1": {"netdevs": ["eth3"]}}}
                                                 for n in NODES3})
        launch = {"name": "inter.rail-mlx5_0", "kind": "inter", "hosts": list(NODES3), "argv": ["coll_perf"],
                  "env": {"NCCL_IB_HCA": "=mlx5_0:1"}}
        self.assertEqual(self.uses(self.needs(launch, {"NCCL_SOCKET_IFNAME": "=mgmt0"}, doctor)), ["eth0", "mgmt0"])
        launch["env"] = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}
        self.assertEqual(self.uses(self.needs(launch, {"NCCL_SOCKET_IFNAME": "=mgmt0"}, doctor)),
                         ["eth0", "eth3", "mgmt0"])
        unknown = dict(doctor, links={n: {"rdma_ports": {"mlx5_0:1": {"netdevs": []}}} for n in NODES3})
        self.assertIsNone(self.needs(launch, {"NCCL_SOCKET_IFNAME": "=mgmt0"}, unknown), "a port with no netdev known")

    def test_a_dead_rail_leaves_out_what_needs_it_only(self):
        observations = dead_paths.observe(path_checks(NODES3, dead={("node3", "eth3")}), "run", "inter.mpi")
        dead = dead_paths.failed_paths(observations)
        left_out = [launch["name"] for launch in mpi_plan(NODES3) if launch["kind"] != "doctor" and
                    dead_paths.paths_needed(launch["hosts"], self.needs(launch), dead)]
        self.assertEqual(left_out, ["sanity", "inter.mpi", "inter.mpi.rail-eth3"])
        two = [launch for launch in mpi_plan(["node1", "node2"]) if launch["kind"] != "doctor"]
        self.assertEqual([launch["name"] for launch in two
                          if dead_paths.paths_needed(launch["hosts"], self.needs(launch), dead)], [],
                         "node1 and node2 reach each other on eth3: nothing between them is left out")


class DeadPathVerdict(unittest.TestCase):
    """The verdict's path.dead (rules/dead_paths.dead_path_findings through rules/verdict.build_verdict): first, the
    fault named from all the evidence, the host table's rails column 'dead' for the hosts it names."""

    def verdict(self, nodes, states, doctor_checks, run_checks):
        plan = mpi_plan(nodes)
        findings = dead_paths.dead_path_findings(plan, states, doctor_doc(nodes, doctor_checks), run_checks)
        # What else the run's rules say of it: the hung launch, the launches left out (rules/anomalies.py's form).
        findings += [{"code": "launch_timeout", "where": name, "status": "failed", "reason": "exit 4 (timeout)",
                      "kind": "inter"} for name, state in states.items() if state.get("exit_code") == 4]
        findings += [{"code": "launch_not_run_dead_path", "where": name, "reason": state["reason"], "kind": "inter"}
                     for name, state in states.items() if state.get("skipped_by") == "path_check"]
        applicable = {(host, check): True for host in nodes for check in ("doctor", "rails", "data")}
        points = [{"point": launch["name"], "hosts": launch["hosts"]} for launch in plan
                  if launch["kind"] in ("intra", "inter")]
        return build_verdict("R", list(nodes), points, findings, applicable)

    def test_one_rail_of_one_node_of_three_died_after_sanity(self):
        states = {"sanity": {"status": "complete"}, "intra.node1": {"status": "complete"},
                  "inter.mpi": {"status": "failed", "exit_code": 4},
                  "inter.mpi.rail-eth0": {"status": "complete"},
                  "inter.mpi.rail-eth3": {"status": "skipped", "skipped_by": "path_check", "reason": "not run: ..."}}
        verdict = self.verdict(NODES3, states, path_checks(NODES3),
                               [{"after": "inter.mpi", "checks": path_checks(NODES3, dead={("node3", "eth3")})}])
        first = verdict["reasons"][0]
        self.assertEqual((first["code"], first["check"], first["hosts"], first["subject"], first["point"]),
                         ("path.dead", "rails", ["node3"], "node3 eth3", "inter.mpi"))
        finding = first["finding"]
        self.assertEqual(finding["first_met"], "inter.mpi")
        self.assertEqual(finding["not_run"], ["inter.mpi.rail-eth3"])
        self.assertEqual(finding["rails_alone"], {"eth0": "complete", "eth3": "not run"})
        self.assertEqual({row["host"]: row["rails"] for row in verdict["hosts"]},
                         {"node1": "pass", "node2": "pass", "node3": "dead"})
        kind, where, words = anomaly_row(finding)
        self.assertEqual((kind, where), ("dead path", "inter.mpi"))
        for part in ("node3 eth3: no echo reply on it from any host (eth0 alive)",
                     "died during the run: the doctor found it alive, the path check after inter.mpi found it dead; "
                     "inter.mpi first met it", "each rail alone: eth0 complete, eth3 not run",
                     "1 launch(es) not run for it: inter.mpi.rail-eth3"):
            self.assertIn(part, words)
        self.assertEqual([r["code"] for r in verdict["reasons"]],
                         ["path.dead", "launch.timeout", "launch.not_run_dead_path"])

    def test_both_rails_between_two_nodes_died_after_sanity(self):
        states = {"sanity": {"status": "complete"}, "inter.mpi": {"status": "failed", "exit_code": 4},
                  "inter.mpi.rail-eth0": {"status": "skipped", "skipped_by": "path_check", "reason": "not run: ..."},
                  "inter.mpi.rail-eth3": {"status": "skipped", "skipped_by": "path_check", "reason": "not run: ..."}}
        nodes = NODES3[:2]
        dead = {("node2", "eth0"), ("node2", "eth3")}
        verdict = self.verdict(nodes, states, path_checks(nodes), [{"after": "inter.mpi",
                                                                    "checks": path_checks(nodes, dead=dead)}])
        first = verdict["reasons"][0]
        self.assertEqual((first["code"], first["hosts"], first["subject"]),
                         ("path.dead", ["node1", "node2"], "node1-node2 eth0, eth3"))
        self.assertEqual({row["host"]: row["rails"] for row in verdict["hosts"]}, {"node1": "dead", "node2": "dead"})
        self.assertIn("which end is dead cannot be told", anomaly_row(first["finding"])[2])
        self.assertEqual(first["finding"]["not_run"], ["inter.mpi.rail-eth0", "inter.mpi.rail-eth3"])

    def test_dead_from_the_start_is_said_so(self):
        states = {"sanity": {"status": "skipped", "skipped_by": "doctor", "reason": "not run: the doctor ..."}}
        verdict = self.verdict(NODES3, states, path_checks(NODES3, dead={("node3", "eth3")}), [])
        finding = verdict["reasons"][0]["finding"]
        self.assertEqual((finding["source"], finding["first_met"], finding["not_run"]), ("doctor", None, ["sanity"]))
        self.assertIn("dead from the start: the doctor's path check found it before any launch",
                      anomaly_row(finding)[2])

    def test_a_hang_on_live_paths_is_no_dead_path(self):
        """A frozen rank hangs a launch too: the check after it found every path alive, so nothing is named."""
        states = {"inter.mpi": {"status": "failed", "exit_code": 4}, "inter.mpi.rail-eth0": {"status": "complete"},
                  "inter.mpi.rail-eth3": {"status": "failed", "exit_code": 4}}
        verdict = self.verdict(NODES3, states, path_checks(NODES3), [{"after": "inter.mpi", "checks": path_checks(NODES3)}])
        self.assertNotIn("path.dead", [r["code"] for r in verdict["reasons"]])
        self.assertEqual({row["rails"] for row in verdict["hosts"]}, {"pass"})

    def test_without_any_path_check_a_rail_alone_that_hung_names_the_rail(self):
        states = {"inter.mpi": {"status": "failed", "exit_code": 4}, "inter.mpi.rail-eth0": {"status": "complete"},
                  "inter.mpi.rail-eth3": {"status": "failed", "exit_code": 4}}
        verdict = self.verdict(NODES3, states, [], [])
        first = verdict["reasons"][0]
        self.assertEqual((first["code"], first["finding"]["kind"], first["finding"]["rails"], first["point"]),
                         ("path.dead", "rail", ["eth3"], "inter.mpi.rail-eth3"))
        self.assertIn("no path check ran, so which host's end is not known", anomaly_row(first["finding"])[2])
        healthy = {"inter.mpi": {"status": "complete"}, "inter.mpi.rail-eth0": {"status": "complete"},
                   "inter.mpi.rail-eth3": {"status": "complete"}}
        self.assertEqual(self.verdict(NODES3, healthy, [], [])["reasons"], [], "a healthy run names nothing")


def nccl_launch(name, hosts, socket_ifname, mpirun_args=("--mca", "btl_tcp_if_include", SUBNETS)):
    """An NCCL point over sockets: its NCCL traffic over socket_ifname, its own MPI messages (coll_perf's bootstrap
    and result exchange) wherever the user's mpirun arguments send Open MPI's TCP BTL."""
    return {"name": name, "kind": "inter", "hosts": list(hosts), "nranks": len(hosts),
            "env": {"NCCL_SOCKET_IFNAME": socket_ifname},
            "argv": ["mpirun", *mpirun_args, "-np", str(len(hosts)), "-x", "NCCL_SOCKET_IFNAME", "coll_perf",
                     "--point", name]}


class SteerMpiTraffic(unittest.TestCase):
    """An NCCL launch's own MPI traffic kept off a dead rail (rules/dead_paths.steer_mpi_traffic): on the GPU machine's
    virtual cluster (NCCL over sockets, 2026-12-06) node3's eth3 died and the point over eth0 alone hung twice, 68 s
    each, on coll_perf's MPI messages over eth3 (its Open MPI TCP BTL on both rail subnets)."""

    def test_the_dead_interfaces_are_those_between_the_launch_hosts(self):
        dead = dead_paths.failed_paths(dead_paths.observe(path_checks(NODES3, dead={("node3", "eth3")}), "run", "x"))
        self.assertEqual(dead_paths.dead_netdevs(NODES3, dead), ["eth3"])
        self.assertEqual(dead_paths.dead_netdevs(["node1", "node2"], dead), [], "node1-node2 on eth3 is alive")
        gate = [{"hosts": ("node1", "node2"), "netdevs": ("eth0", "eth0"), "subject": "x", "detail": "y"}]
        self.assertEqual(dead_paths.dead_netdevs(["node1", "node2"], gate), ["eth0"])

    def test_an_include_list_loses_the_dead_rail_by_subnet_or_name(self):
        doctor = doctor_doc(NODES3)
        argv, env, words = dead_paths.steer_mpi_traffic(["mpirun", "--mca", "btl_tcp_if_include", SUBNETS, "x"], {},
                                                        ["eth3"], doctor)
        self.assertEqual(argv, ["mpirun", "--mca", "btl_tcp_if_include", "198.18.10.0/24", "x"])
        self.assertEqual(env, {})
        self.assertEqual(words, "Open MPI's TCP traffic kept off eth3: btl_tcp_if_include "
                                "198.18.10.0/24,198.18.13.0/24 -> 198.18.10.0/24")
        argv, env, _ = dead_paths.steer_mpi_traffic(["mpirun", "-mca", "btl_tcp_if_include", "eth0,eth3", "x"], {},
                                                    ["eth3"], doctor)
        self.assertEqual(argv, ["mpirun", "-mca", "btl_tcp_if_include", "eth0", "x"])
        argv, env, _ = dead_paths.steer_mpi_traffic(["srun", "x"], {"OMPI_MCA_btl_tcp_if_include": "eth3,eth0"},
                                                    ["eth3"], doctor)
        self.assertEqual((argv, env), (["srun", "x"], {"OMPI_MCA_btl_tcp_if_include": "eth0"}))

    def test_an_include_list_of_dead_rails_only_cannot_be_steered(self):
        self.assertIsNone(dead_paths.steer_mpi_traffic(["mpirun", "--mca", "btl_tcp_if_include", "198.18.13.0/24",
                                                        "x"], {}, ["eth3"], doctor_doc(NODES3)))

    def test_an_unknown_subnet_is_kept(self):
        argv, env, words = dead_paths.steer_mpi_traffic(["mpirun", "--mca", "btl_tcp_if_include", "10.9.0.0/16",
                                                         "x"], {}, ["eth3"], doctor_doc(NODES3))
        self.assertEqual((argv[3], env, words), ("10.9.0.0/16", {}, None))

    def test_an_exclude_list_or_none_gains_the_dead_rail(self):
        argv, env, _ = dead_paths.steer_mpi_traffic(["mpirun", "--mca", "btl_tcp_if_exclude", "lo,docker0", "x"],
                                                    {}, ["eth3"])
        self.assertEqual(argv[3], "lo,docker0,eth3")
        argv, env, words = dead_paths.steer_mpi_traffic(["mpirun", "x"], {}, ["eth0", "eth3"])
        self.assertEqual((argv, env), (["mpirun", "x"], {"OMPI_MCA_btl_tcp_if_exclude": "127.0.0.1/8,sppp,eth0,eth3"}))
        self.assertIn("kept off eth0, eth3", words)
        self.assertEqual(dead_paths.steer_mpi_traffic(["mpirun", "x"], {}, []), (["mpirun", "x"], {}, None))


class RunnerPathCheck(unittest.TestCase):
    """The runner's part (execute/runner.Baseline): a launch across hosts that failed as a dead path fails is
    followed by one path check before the next launch over its hosts; what needs a dead path is not run, the rest
    runs. The probing is a stand-in here (Baseline.path_checker); the real one runs in the fault matrix."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="cclbench-paths-")
        self.plan = mpi_plan(NODES3)
        self.calls = []

    def tearDown(self):
        self.tmp.cleanup()

    def runner(self, checks_after, inputs=None):
        def checker(run_dir, hosts, inputs, after, why=None, invocation=1, log=None):
            self.calls.append((after, list(hosts)))
            return {"after": after, "checks": checks_after}
        runner = Baseline(dict({"hosts": list(NODES3)}, **(inputs or {})), self.tmp.name, resume=False,
                          launches=self.plan)
        runner.manifest = {"points": {launch["name"]: {"status": "pending"} for launch in self.plan},
                           "invocations": [{}], "env": {}}
        runner.doctor_paths = []
        runner.doctor_document = doctor_doc(NODES3, path_checks(NODES3))
        runner.path_checker = checker
        return runner

    def launch(self, name):
        return next(launch for launch in self.plan if launch["name"] == name)

    def failed(self, runner, name, code):
        runner.manifest["points"][name].update(status="failed", exit_code=code, reason=f"exit {code}")
        runner.note_failure(self.launch(name))

    def test_one_check_after_the_hang_then_only_what_needs_the_dead_rail_is_left_out(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        self.failed(runner, "inter.mpi", 4)
        self.assertIsNone(runner.blocked(self.launch("intra.node1")), "one host: no path needed, and no check yet")
        self.assertEqual(self.calls, [])
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth0")), "the live rail alone runs")
        self.assertEqual(self.calls, [("inter.mpi", list(NODES3))])
        why, by = runner.blocked(self.launch("inter.mpi.rail-eth3"))
        self.assertEqual(by, "path_check")
        self.assertTrue(why.startswith("not run: node3 eth3: no echo reply since inter.mpi (the run's path check "
                                       "after that launch failed: node"), why)
        self.assertIn("it would only wait out its deadline", why)
        self.assertEqual(len(self.calls), 1, "the dead path cost one check, not one per launch")

    def test_after_the_check_an_nccl_point_over_the_live_rail_keeps_its_mpi_traffic_off_the_dead_one(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        eth0 = nccl_launch("inter.rail-eth0", NODES3, "=eth0")
        self.plan.append(eth0)
        runner.manifest["points"][eth0["name"]] = {"status": "running"}
        self.assertEqual(runner.steer_off_dead_rails(eth0, eth0["argv"], {}), (eth0["argv"], {}), "nothing dead yet")
        self.failed(runner, "inter.mpi", 4)
        self.assertIsNone(runner.blocked(eth0), "NCCL over eth0 alone needs no dead path")
        argv, env = runner.steer_off_dead_rails(eth0, eth0["argv"], {})
        self.assertEqual(argv[:4], ["mpirun", "--mca", "btl_tcp_if_include", "198.18.10.0/24"])
        self.assertEqual(argv[4:], eth0["argv"][4:])
        self.assertEqual(env, {})
        self.assertIn("kept off eth3", runner.manifest["points"]["inter.rail-eth0"]["mpi_steered"])
        mpi = self.launch("intra.node1")  # on the rail subnets, like every launch of the MPI plan
        mpi = dict(mpi, hosts=list(NODES3), name="inter.mpi")
        self.assertEqual(runner.steer_off_dead_rails(mpi, mpi["argv"], {}), (mpi["argv"], {}),
                         "the MPI backend's traffic is its measurement: never steered")

    def test_no_check_after_a_failure_that_is_no_path(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        self.failed(runner, "inter.mpi", 1)  # wrong data
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth3")))
        self.assertEqual(self.calls, [])

    def test_all_alive_leaves_nothing_out(self):
        runner = self.runner(path_checks(NODES3))
        self.failed(runner, "inter.mpi", 137)  # a rank died of SIGKILL
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth3")))
        self.assertEqual(len(self.calls), 1)

    def test_an_unreachable_host_leaves_out_every_launch_on_it(self):
        runner = self.runner(path_checks(NODES3, unreached={"node2"}))
        self.failed(runner, "inter.mpi", 4)
        self.assertEqual(runner.blocked(self.launch("inter.mpi.rail-eth0"))[1], "path_check")
        self.assertIn("node2 (unreachable)", runner.blocked(self.launch("intra.node2"))[0])
        self.assertIsNone(runner.blocked(self.launch("intra.node1")))

    def test_the_last_failure_is_checked_at_the_end_for_the_verdict(self):
        runner = self.runner(path_checks(NODES3))
        self.failed(runner, "inter.mpi.rail-eth3", 4)
        runner.settle_paths()
        self.assertEqual(self.calls, [("inter.mpi.rail-eth3", list(NODES3))])

    def test_the_eta_leaves_out_what_a_pending_check_may_leave_out_then_only_what_it_found_dead(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        names = ["intra.node3", "inter.mpi.rail-eth0", "inter.mpi.rail-eth3"]
        self.assertEqual(runner.eta_outlook(names), (set(), 0.0), "nothing failed: everything runs")
        self.failed(runner, "inter.mpi", 4)  # hung: a check is pending, every launch across its hosts may be left out
        self.assertEqual(runner.eta_outlook(names), ({"inter.mpi.rail-eth0", "inter.mpi.rail-eth3"}, 5.0))
        runner.settle_paths()  # node3 eth3 dead: only the launch over eth3 is left out, no check pending
        self.assertEqual(runner.eta_outlook(names), ({"inter.mpi.rail-eth3"}, 0.0))

    def test_the_check_the_next_launch_needs_is_made_before_the_failed_line(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        names = ["inter.mpi.rail-eth0", "inter.mpi.rail-eth3"]
        self.failed(runner, "inter.mpi", 4)
        runner.settle_before_line(self.launch("inter.mpi"))  # rail-eth0 is next: it needs node3, checked now
        self.assertEqual(self.calls, [("inter.mpi", list(NODES3))])
        # The failed line's ETA: one rail of two dead, the other rail alone still runs; nothing pending.
        self.assertEqual(runner.eta_outlook(names), ({"inter.mpi.rail-eth3"}, 0.0))
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth0")))
        self.assertEqual(len(self.calls), 1, "the same one check")

    def test_a_launch_on_one_host_next_still_runs_before_the_check(self):
        # intra.node3 moved after inter.mpi: it needs no path, so it runs before the check, as without the line.
        intra = self.launch("intra.node3")
        self.plan.remove(intra)
        self.plan.insert(self.plan.index(self.launch("inter.mpi")) + 1, intra)
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        self.failed(runner, "inter.mpi", 4)
        runner.settle_before_line(self.launch("inter.mpi"))
        self.assertEqual(self.calls, [], "intra.node3 needs no path: it runs first")
        self.assertIsNone(runner.blocked(intra))
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth0")))
        self.assertEqual(len(self.calls), 1, "checked before the next launch across its hosts")
        runner = self.runner(path_checks(NODES3))
        self.failed(runner, "sanity", 4)
        runner.settle_before_line(self.launch("sanity"))
        self.assertEqual(len(self.calls), 1, "a failed sanity pass makes its own check (sanity_failed)")

    def test_after_a_failed_sanity_pass_the_eta_is_its_path_check_only(self):
        names = ["intra.node1", "intra.node3", "inter.mpi", "inter.mpi.rail-eth0"]
        runner = self.runner(path_checks(NODES3))
        self.failed(runner, "sanity", 4)  # hung: the check is pending, and nothing else will run
        self.assertEqual(runner.eta_outlook(names), (set(names), 5.0))
        runner = self.runner(path_checks(NODES3))
        self.failed(runner, "sanity", 1)  # wrong data: no path check, nothing else runs
        self.assertEqual(runner.eta_outlook(names), (set(names), 0.0))

    def sanity_failed(self, runner, code, dead):
        """A sanity pass across hosts failed with `code`; the report's verdict from the path checks the runner made
        (rules/verdict through DeadPathVerdict's helper, on the stand-in's results)."""
        runner.manifest["points"]["sanity"].update(status="failed", exit_code=code, reason=f"exit {code}")

        def report():
            states = {name: state for name, state in runner.manifest["points"].items() if state["status"] != "pending"}
            checks = [{"after": after, "checks": path_checks(NODES3, dead=dead)} for after, _ in self.calls]
            return DeadPathVerdict.verdict(self, NODES3, states, path_checks(NODES3), checks)
        runner.write_report = report
        return str(runner.sanity_failed(self.launch("sanity"), f"exit {code}"))

    def test_a_sanity_pass_that_hung_connecting_is_checked_and_its_error_names_the_dead_path_first(self):
        dead = {("node3", "eth3")}
        runner = self.runner(path_checks(NODES3, dead=dead))
        error = self.sanity_failed(runner, 4, dead)
        self.assertEqual(self.calls, [("sanity", list(NODES3))], "one path check, before the verdict")
        self.assertTrue(error.startswith("path.dead (dead path) at sanity: node3 eth3: no echo reply"), error)
        self.assertIn("died during the run: the doctor found it alive, the path check after sanity found it dead; "
                      "sanity first met it", error)
        self.assertIn("; sanity pass failed, nothing else was run: exit 4", error)
        self.assertEqual(runner.manifest["status"], "failed")

    def test_a_sanity_pass_with_wrong_data_is_no_path(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}))
        error = self.sanity_failed(runner, 1, set())
        self.assertEqual(self.calls, [])
        self.assertTrue(error.startswith("sanity pass failed, nothing else was run: exit 1"), error)

    def test_run_despite_doctor_runs_everything(self):
        runner = self.runner(path_checks(NODES3, dead={("node3", "eth3")}), {"run_despite_doctor": True})
        self.failed(runner, "inter.mpi", 4)
        self.assertIsNone(runner.blocked(self.launch("inter.mpi.rail-eth3")))

    def test_the_doctor_gate_leaves_the_live_rail_alone_running(self):
        runner = self.runner([])
        runner.doctor_paths = failed_paths(path_checks(NODES3, dead={("node3", "eth3")}))
        blocked = {launch["name"]: runner.blocked(launch) for launch in self.plan if launch["kind"] != "doctor"}
        self.assertEqual([name for name, why in blocked.items() if why],
                         ["sanity", "inter.mpi", "inter.mpi.rail-eth3"])
        self.assertEqual({why[1] for why in blocked.values() if why}, {"doctor"})


class PathChecksFile(unittest.TestCase):
    """execute/doctor.recheck_paths writes doctor/path_checks.json (its schema), one entry per check."""

    def test_entries_are_appended_and_follow_the_schema(self):
        from helpers import validate
        with tempfile.TemporaryDirectory(prefix="cclbench-paths-") as run_dir:
            os.makedirs(os.path.join(run_dir, "doctor"))
            for n, node in enumerate(NODES3):
                with open(os.path.join(run_dir, "doctor", f"{node}.json"), "w") as handle:
                    json.dump({"kind": "doctor", "rails": {node: fleet(NODES3)[node]}}, handle)
            dead = path_checks(NODES3, dead={("node3", "eth3")})
            with mock.patch.object(doctor_step, "probe_hosts", return_value=dead) as probe:
                first = doctor_step.recheck_paths(run_dir, list(NODES3), {}, "inter.mpi", "exit 4 (timeout)")
                doctor_step.recheck_paths(run_dir, list(NODES3), {}, "inter.mpi.rail-eth0", None, invocation=2)
            self.assertEqual(probe.call_args.kwargs["timeout"], doctor_step.RECHECK_START_S +
                             doctor_step.RECHECK_PER_TARGET_S * 4, "each host probes 2 peers on 2 rails")
            self.assertEqual((first["after"], first["hosts"]), ("inter.mpi", list(NODES3)))
            path = os.path.join(run_dir, "doctor", "path_checks.json")
            with open(path) as handle:
                self.assertEqual([e["after"] for e in json.load(handle)["checks_after"]],
                                 ["inter.mpi", "inter.mpi.rail-eth0"])
            ok, errors = validate("path_checks.schema.json", path)
            self.assertTrue(ok, errors)
            self.assertIsNone(doctor_step.recheck_paths(run_dir, list(NODES3), {"sysfs_root": "/fixture"}, "x"),
                              "a fixture root has no live addresses to probe")
            # Kept to each host's peers: node3 probes node1 alone, on its 2 rails; node1 and node2 each other.
            peers = {"node1": ["node2"], "node2": ["node1"], "node3": ["node1"]}
            with mock.patch.object(doctor_step, "probe_hosts", return_value=dead) as probe:
                doctor_step.recheck_paths(run_dir, list(NODES3), {}, "pair.r1.node1.node3", None, peers=peers)
            self.assertEqual(probe.call_args.kwargs["timeout"], doctor_step.RECHECK_START_S +
                             doctor_step.RECHECK_PER_TARGET_S * 2)
            self.assertEqual(probe.call_args.kwargs["peers"], peers)

    def test_the_probes_are_kept_to_each_hosts_peers(self):
        from cclbench_lib.execute.path_mtu import probed_targets
        targets, _ = path_mtu_targets(fleet(NODES3))
        self.assertIs(probed_targets(targets, None), targets)
        kept = probed_targets(targets, {"node1": ["node3"], "node3": ["node1", "node2"]})
        self.assertEqual({host: sorted((t["peer"], t["netdev"]) for t in wanted) for host, wanted in kept.items()},
                         {"node1": [("node3", "eth0"), ("node3", "eth3")], "node2": [],
                          "node3": [("node1", "eth0"), ("node1", "eth3"), ("node2", "eth0"), ("node2", "eth3")]})


class ScreenPathCheck(unittest.TestCase):
    """The screen's part (issue 43, item 4): a pair job that failed as a dead path fails is followed by a path check
    between its nodes and a node that measured (execute/screen.Screen.path_checker; a stand-in here, on
    check_path_mtu's results as the probes would give them), and a node whose own end is dead is dropped after
    that first failed job: its later pairs are not run. A check that names no node's end drops nobody."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="cclbench-screen-paths-")
        self.calls, self.peers = [], []
        self.DEAD3 = {("node3", "eth0"), ("node3", "eth3")}
        # Round 1: node1-node2 measures; round 2: node1-node3 fails (node3's rails died); round 3: node2-node3.
        self.jobs = [{"name": f"pair.r{n}.{a}-{b}", "kind": "pair", "hosts": [a, b]}
                     for n, (a, b) in enumerate((("node1", "node2"), ("node1", "node3"), ("node2", "node3")), 1)]

    def tearDown(self):
        self.tmp.cleanup()

    def screen(self, checks_of):
        from cclbench_lib.execute.screen import Screen
        from cclbench_lib.plan.launch_pool import FailingNodes, LaunchPool

        def checker(run_dir, hosts, inputs, after, why=None, invocation=1, log=None, peers=None):
            self.calls.append((after, list(hosts)))
            self.peers.append(peers)
            return {"after": after, "checks": checks_of(hosts, peers)}
        screen = Screen({"hosts": list(NODES3)}, self.tmp.name, stream=open(os.devnull, "w"))
        self.addCleanup(screen.stream.close)
        screen.manifest = {"jobs": {}}
        screen.path_checker = checker
        return screen, LaunchPool(self.jobs), FailingNodes()

    def run_rounds(self, screen, pool, failing, fails, exit_code=4):
        results = {}
        while not pool.done():
            for job in pool.startable():
                failed = job["name"] in fails
                screen.manifest["jobs"][job["name"]] = {"exit_code": exit_code if failed else 0}
                results[job["name"]] = {"values": {}, "reason": f"exit {exit_code}" if failed else None}
                screen._after(pool, job, results, failing)
        return results

    def test_a_node_whose_paths_died_is_dropped_after_its_first_failed_pair(self):
        dead = {("node3", "eth0"), ("node3", "eth3")}
        screen, pool, failing = self.screen(lambda hosts, peers: path_checks(hosts, dead=dead, peers=peers))
        ran = self.run_rounds(screen, pool, failing, {"pair.r2.node1-node3", "pair.r3.node2-node3"})
        self.assertEqual(self.calls, [("pair.r2.node1-node3", ["node1", "node3", "node2"])],
                         "one check, with node2 (it measured) as the reference")
        self.assertEqual(self.peers, [{"node1": ["node2", "node3"], "node3": ["node1", "node2"]}],
                         "each node probes its partner and the reference; the reference probes nobody")
        self.assertEqual(sorted(ran), ["pair.r1.node1-node2", "pair.r2.node1-node3"], "node2-node3 not run")
        self.assertEqual(screen.dropped, [{"node": "node3", "failed_with": ["node1"], "skipped": 1,
                                           "dead_paths": "node3 eth0, eth3"}])
        # The screen's rules then judge these checks with the path MTU step's (alive at the start): node3 is bad,
        # each of its rails dead, and no retest may cross them.
        from cclbench_lib.rules.screen_rules import BAD, RAIL_DEAD, path_mtu_verdicts
        findings, _links, blocked = path_mtu_verdicts(list(NODES3), path_checks(NODES3) + screen.run_path_checks)
        self.assertEqual({node: sorted((f[0], f[1], f[3]) for f in found) for node, found in findings.items() if found},
                         {"node3": [(BAD, RAIL_DEAD, "eth0"), (BAD, RAIL_DEAD, "eth3")]})
        self.assertEqual(blocked, {frozenset(("node1", "node3")), frozenset(("node2", "node3"))})

    def test_the_start_passes_of_a_node_found_dead_since_are_stale(self):
        # Eight nodes, all alive at the path MTU step; node3's rails die; the check after its failed pair probes
        # node1, node3 and the reference node2. node3 still "reaches" node4-node8 by the step's passes alone. (On
        # the virtual cluster the management subnet is probed too, and node3 still reaches the others over it.)
        from cclbench_lib.rules.dead_paths import without_stale_passes
        from cclbench_lib.rules.screen_rules import BAD, RAIL_DEAD, path_mtu_verdicts
        nodes = [f"node{n}" for n in range(1, 9)]
        start = path_checks(nodes)
        peers = {"node1": ["node2", "node3"], "node3": ["node1", "node2"]}
        run = [check for check in path_checks(nodes, dead=self.DEAD3, peers=peers)]
        kept = without_stale_passes(start, run)
        self.assertEqual(len(start) - len(kept), 7 * 2 * 2, "node3's paths to 7 nodes on 2 rails, both ways")
        findings, links, blocked = path_mtu_verdicts(nodes, kept + run)
        self.assertEqual({node: sorted((f[0], f[1], f[3]) for f in found) for node, found in findings.items() if found},
                         {"node3": [(BAD, RAIL_DEAD, "eth0"), (BAD, RAIL_DEAD, "eth3")]})
        self.assertEqual(links, [])
        # Without it, the stale passes outweigh the two failing partners: no node is named.
        findings, links, _ = path_mtu_verdicts(nodes, start + run)
        self.assertEqual([node for node, found in findings.items() if found], [])
        # A dead end on one rail: node3 was probed again on both, so its earlier passes go on both.
        run = path_checks(nodes, dead={("node3", "eth3")}, peers=peers)
        self.assertEqual(len(start) - len(without_stale_passes(start, run)), 7 * 2 * 2)
        # Every subnet probed (no interface flagged a rail): node3 still reaches all over mgmt0, now as before.
        start = path_checks(nodes, flagged=False)
        run = path_checks(nodes, dead=self.DEAD3, peers=peers, flagged=False)
        findings, links, _ = path_mtu_verdicts(nodes, without_stale_passes(start, run) + run)
        self.assertEqual({node: sorted((f[0], f[1], f[3]) for f in found) for node, found in findings.items() if found},
                         {"node3": [(BAD, RAIL_DEAD, "eth0"), (BAD, RAIL_DEAD, "eth3")]})
        self.assertEqual(links, [])
        start = path_checks(nodes)
        # Checks that name no dead end (every path alive, or an end not told) leave every pass.
        self.assertEqual(without_stale_passes(start, path_checks(nodes, peers=peers)), start)
        self.assertEqual(without_stale_passes(start, path_checks(["node1", "node3"], dead=self.DEAD3)), start)

    def test_live_paths_or_an_end_not_told_drop_nobody(self):
        for checks_of in (lambda hosts, peers: path_checks(hosts, peers=peers),  # a frozen rank: every path alive
                          lambda hosts, peers: path_checks(hosts[:2], dead={("node3", "eth0"), ("node3", "eth3")})):
            screen, pool, failing = self.screen(checks_of)
            ran = self.run_rounds(screen, pool, failing, {"pair.r2.node1-node3"})
            self.assertEqual(len(ran), 3)
            self.assertEqual(screen.dropped, [])
        screen, pool, failing = self.screen(lambda hosts, peers: path_checks(hosts, dead={("node3", "eth0")}))
        self.calls.clear()
        self.run_rounds(screen, pool, failing, {"pair.r2.node1-node3"}, exit_code=1)
        self.assertEqual((self.calls, screen.dropped), ([], []), "exit 1 (a case failed) says nothing of the paths")


class BatchedLaunchPathCheck(unittest.TestCase):
    """A batched round (execute/screen_batch.BatchedStage) whose launch node3's dead paths hung as a whole: every
    rank timed out in start-up, and the launcher named a rank of the healthy pair node2-node4 first (as the fault
    matrix's screen.n4.paths_die saw it). One path check covers both groups; node3 is dropped now and its pair fails
    by it; node2-node4, failed only by the launch's end, runs again. A stand-in checker on the probes' results."""

    NODES = ("node1", "node2", "node3", "node4")
    DEAD = {("node3", "eth0"), ("node3", "eth3")}

    def setUp(self):
        from cclbench_lib.execute.screen import Screen
        from cclbench_lib.execute.screen_batch import BatchedStage
        from cclbench_lib.plan.launch_pool import FailingNodes
        tmp = tempfile.TemporaryDirectory(prefix="cclbench-batched-paths-")
        self.addCleanup(tmp.cleanup)
        self.calls = []
        self.screen = Screen({"hosts": list(self.NODES)}, tmp.name, stream=open(os.devnull, "w"))
        self.addCleanup(self.screen.stream.close)
        self.screen.path_checker = self.checker
        self.stage = BatchedStage(self.screen, "pair rounds", "pairs")
        self.failing = FailingNodes()
        self.jobs = {name: {"name": name, "kind": "pair", "hosts": hosts, "round": 1}
                     for name, hosts in (("pair.r1.node2.node4", ["node2", "node4"]),
                                         ("pair.r1.node1.node3", ["node1", "node3"]))}
        self.dead = self.DEAD

    def checker(self, run_dir, hosts, inputs, after, why=None, invocation=1, log=None, peers=None):
        self.calls.append((after, list(hosts), peers))
        return {"after": after, "checks": path_checks(list(self.NODES), dead=self.dead, peers=peers)}

    def settled(self):
        return {"done": [], "failed": {"pair.r1.node2.node4": "rank 1 exited 4 before the others"},
                "rerun": ["pair.r1.node1.node3"], "unreachable": {}, "resolved": True}

    def test_the_dead_node_of_another_group_is_found_and_the_blamed_pair_runs_again(self):
        settled, dead = self.stage._paths_checked("launch.pairs.3", self.jobs, self.settled(), self.failing)
        self.assertEqual(dead, ["node3"])
        # One check of the launch's four nodes; each probes its partner and the next pair's first node.
        self.assertEqual(self.calls, [("launch.pairs.3", ["node2", "node4", "node1", "node3"],
                                       {"node2": ["node1", "node4"], "node4": ["node1", "node2"],
                                        "node1": ["node2", "node3"], "node3": ["node1", "node2"]})])
        self.assertEqual(settled["failed"], {"pair.r1.node1.node3": "node3 eth0, eth3: found dead by the path check "
                                                                    "after launch.pairs.3"})
        self.assertEqual(settled["rerun"], ["pair.r1.node2.node4"])
        self.assertEqual(self.failing.dropped, {"node3": ["node1"]})
        self.assertEqual(self.screen.dropped, [{"node": "node3", "failed_with": ["node1"], "skipped": 0,
                                                "dead_paths": "node3 eth0, eth3"}])

    def test_a_node_that_measured_is_the_reference(self):
        self.failing.ok.update({"node5"})
        self.stage._paths_checked("launch.pairs.3", self.jobs, self.settled(), self.failing)
        self.assertEqual(self.calls[0][1], ["node2", "node4", "node1", "node3", "node5"])
        self.assertEqual(self.calls[0][2], {"node2": ["node4", "node5"], "node4": ["node2", "node5"],
                                            "node1": ["node3", "node5"], "node3": ["node1", "node5"]})

    def test_live_paths_leave_the_launch_as_it_settled(self):
        self.dead = ()
        settled, dead = self.stage._paths_checked("launch.pairs.3", self.jobs, self.settled(), self.failing)
        self.assertEqual((settled, dead, self.failing.dropped), (self.settled(), [], {}))
        self.assertEqual(len(self.calls), 1)
        # Nothing failed (a relaunch settles its groups as done or to run again), or the launcher could not start a
        # host (dropped for that): no check.
        self.calls.clear()
        for settled in ({"done": ["pair.r1.node2.node4"], "failed": {}, "rerun": ["pair.r1.node1.node3"],
                         "unreachable": {}, "resolved": True},
                        {"done": [], "failed": {"pair.r1.node2.node4": "not started: node4"},
                         "rerun": ["pair.r1.node1.node3"], "unreachable": {"node4": "ssh: no route"}, "resolved": True}):
            self.assertEqual(self.stage._paths_checked("launch.pairs.3", self.jobs, settled, self.failing),
                             (settled, []))
        self.assertEqual(self.calls, [])


if __name__ == "__main__":
    unittest.main()
