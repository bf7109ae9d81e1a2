"""Rails seen where the traffic is: the report's rails table per host and source from coll_perf's
netdev rails (schema 1.5), the per-host rail rule (rules/rails.py: rail.dead, rail.unbalanced) and the HCA flags of a
NET/Socket run said once, on synthetic run directories. Expected figures are worked out by hand from the byte
counts written (4 cases per point; docs/bring-up.md "Rails")."""
import json
import os
import socket
import unittest

from case_records import case_record, netdev_node, rails_evidence, write_run_dir
from helpers import verdict_fail_codes, TempDirTest, read_text, run_cli, validate

CASES = ["all_reduce.float.sum.out.64M", "all_reduce.float.sum.in.64M", "all_gather.float.none.out.64M",
         "all_gather.float.none.in.64M"]
SIZE = 64 << 20
HCA_FLAGS = ["expected rail mlx5_0:1 has no counters under /sys", "expected rail mlx5_3:1 has no counters under /sys"]


def launch(point, env=None):
    return {"name": point, "kind": "inter", "nranks": 2, "collectives": ["all_reduce", "all_gather"], "sizes": [SIZE],
            "argv": ["coll_perf"], "hosts": ["node5", "node7"], "env": env or {}, "outputs": []}


def point_records(point, nodes_of_case):
    """One record per case of CASES; nodes_of_case(index) gives that case's node rows."""
    time_us = {"mean": 100.0, "min": 100.0, "p50": 100.0, "p95": 100.0, "p99": 100.0, "max": 100.0, "cv_pct": 1.0}
    return [case_record(point, case_id, SIZE, time_us, 100.0, nranks=2, schema_version="1.5.0", iterations=20,
                        evidence=rails_evidence(nodes_of_case(index)))
            for index, case_id in enumerate(CASES)]


def two_hosts(node7_eth3, origin="--netdevs", flags7=(), flags=()):
    """node5 moves 400 MB on each rail per case; node7 400 MB on eth0 and node7_eth3(case index) on eth3."""
    return lambda index: [netdev_node("node5", {"eth0": 400_000_000, "eth3": 400_000_000}, origin, flags),
                          netdev_node("node7", {"eth0": 400_000_000, "eth3": node7_eth3(index)}, origin,
                                      list(flags) + list(flags7))]


class NetdevRailsReport(TempDirTest):
    def report(self, launches, records, raw=None):
        run = write_run_dir(os.path.join(self.tmp, "R"), launches, records)
        for name, document in (raw or {}).items():
            os.makedirs(os.path.join(run, "raw"), exist_ok=True)
            with open(os.path.join(run, "raw", name + ".json"), "w") as handle:
                json.dump(document, handle)
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")].split("Physical ceilings")[0]
        rails = text[text.index("### Rails"):text.index("### Rank bindings")]
        return anomalies, rails

    def test_balanced_rails_are_in_the_table_per_host_without_an_anomaly(self):
        # node7 eth3: 399 MB per case -> 1.596 GB, 399 / 799 of node7's bytes (50%).
        anomalies, rails = self.report([launch("inter.sock")],
                                       point_records("inter.sock", two_hosts(lambda i: 399_000_000)))
        self.assertIn("| point | host | source | share per rail | bytes per rail | error increments |", rails)
        self.assertIn("| inter.sock | node5 | netdev (--netdevs) | eth0 50%, eth3 50% | eth0 1.600 GB, eth3 1.600 GB "
                      "| not counted (netdev) |", rails)
        self.assertIn("| inter.sock | node7 | netdev (--netdevs) | eth0 50%, eth3 50% | eth0 1.600 GB, eth3 1.596 GB "
                      "| not counted (netdev) |", rails)
        self.assertNotIn("| hca |", rails, "no HCA counters in these records: no HCA row beside the netdev rows")
        self.assertNotIn("rail", anomalies.lower())

    def test_a_dead_rail_names_the_host_and_interface_with_its_share(self):
        # node7 eth3: 1 MB per case -> 4 MB of node7's 1.604 GB: 0.249%. coll_perf's own per-case flag is left to
        # the rule (judged over the whole point), not repeated.
        flag = "rail eth3 (netdev) carried 0.249% of the bytes on the netdev rails (< 25%)"
        anomalies, rails = self.report([launch("inter.sock")],
                                       point_records("inter.sock", two_hosts(lambda i: 1_000_000, flags7=[flag])))
        self.assertIn("| rail dead | inter.sock | node7 eth3 [netdev (--netdevs)] carried 0.2% of the host's rail bytes "
                      "(0.004 GB vs eth0 1.600 GB): below 5% of its busiest sibling, the rail is dead |", anomalies)
        self.assertEqual(anomalies.count("| rail"), 1, anomalies)
        self.assertNotIn("node5", anomalies)
        self.assertNotIn("(netdev) carried", anomalies)
        self.assertIn("| inter.sock | node7 | netdev (--netdevs) | eth0 100%, eth3 0% | eth0 1.600 GB, eth3 0.004 GB |",
                      rails)

    def test_a_lesser_imbalance_is_unbalanced(self):
        # node7 eth3: 250 MB per case -> 1.000 GB, 250 / 650 = 38.5% of node7's bytes; eth0 1.6x as much (> 1.25x).
        anomalies, _rails = self.report([launch("inter.sock")],
                                        point_records("inter.sock", two_hosts(lambda i: 250_000_000)))
        self.assertIn("| rail imbalance | inter.sock | node7 eth3 [netdev (--netdevs)] carried 38.5% of the host's rail "
                      "bytes (1.000 GB vs eth0 1.600 GB): eth0 carried over 1.25x as much |", anomalies)
        self.assertEqual(anomalies.count("| rail"), 1, anomalies)

    def test_a_null_counter_leaves_its_case_out_with_the_reason(self):
        # Case 0 has no eth3 counter on node7: node7 is summed over cases 1-3 (1.200 GB each rail, 50%), not
        # over 4 cases of eth0 against 3 of eth3 (which would read 57% / 43%, an imbalance that is not there).
        anomalies, rails = self.report([launch("inter.sock")],
                                       point_records("inter.sock", two_hosts(lambda i: None if i == 0 else 400_000_000)))
        self.assertIn("| inter.sock | node7 | netdev (--netdevs) | eth0 50%, eth3 50% | eth0 1.200 GB, eth3 1.200 GB "
                      "(1 of 4 case(s) left out, a counter null: eth3: no such interface under /sys/class/net) |", rails)
        self.assertIn("| inter.sock | node5 | netdev (--netdevs) | eth0 50%, eth3 50% | eth0 1.600 GB, eth3 1.600 GB |",
                      rails)
        self.assertNotIn("| rail", anomalies)

    def test_a_rail_never_read_is_named_not_zero(self):
        # node7's eth3 is null in every case: no share for node7 (no comparable whole), eth0's own sum shown.
        anomalies, rails = self.report([launch("inter.sock")], point_records("inter.sock", two_hosts(lambda i: None)))
        self.assertIn("| inter.sock | node7 | netdev (--netdevs) | eth0 -, eth3 - | eth0 1.600 GB, eth3 - (4 of 4 case(s) "
                      "left out, a counter null: eth3: no such interface under /sys/class/net) |", rails)
        self.assertIn("| rail counters missing | inter.sock | node7 eth3 [netdev (--netdevs)]: no counter read in any "
                      "case (no such interface under /sys/class/net) |", anomalies)
        self.assertEqual(anomalies.count("| rail"), 1, anomalies)

    def test_a_point_that_moved_little_over_the_rails_is_not_judged(self):
        # node7 eth0 200 KB per case: 0.8 MB in all, below the 1 MiB the busiest rail must carry to be judged.
        def nodes(index):
            return [netdev_node("node7", {"eth0": 200_000, "eth3": 0})]
        anomalies, rails = self.report([launch("inter.sock")], point_records("inter.sock", nodes))
        self.assertIn("| inter.sock | node7 | netdev (--netdevs) | eth0 100%, eth3 0% | eth0 0.001 GB, eth3 0.000 GB |",
                      rails)
        self.assertNotIn("| rail", anomalies)

    def test_socket_run_says_once_that_hca_counters_do_not_apply(self):
        # Eight inter-node points bound to both HCAs by NCCL_IB_HCA; NCCL used sockets (seven points: the netdev
        # rails come from its NET/Socket line; one: --netdevs, with coll_perf's transport section saying
        # NET/Socket). Every record carries coll_perf's "expected rail ... has no counters" flags of both hosts.
        env = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}
        points = [f"inter.p{k}" for k in range(8)]
        records = []
        for k, point in enumerate(points):
            origin = "--netdevs" if k == 7 else "nccl_log"
            records += point_records(point, two_hosts(lambda i: 400_000_000, origin=origin, flags=HCA_FLAGS))
        raw = {"inter.p7": {"schema_version": "1.5.0", "transport": {"inter_node": {"NET/Socket": 4}}}}
        anomalies, rails = self.report([launch(point, env) for point in points], records, raw)
        # Healthy rails over sockets: no anomaly at all (the HCA flags judged ports no byte went through); the rails
        # section says once why the HCA counters are not judged.
        self.assertNotIn("| rail", anomalies)
        self.assertIn("None found", anomalies)
        self.assertEqual(rails.count("do not apply"), 1, rails)
        self.assertIn("NCCL used NET/Socket between the nodes at 8 point(s) (inter.p0 and 7 more): the HCA counters of "
                      "the expected rails do not apply there", rails)
        self.assertIn("| inter.p0 | node7 | netdev (NCCL log) | eth0 50%, eth3 50% | eth0 1.600 GB, eth3 1.600 GB |",
                      rails)
        self.assertIn("| inter.p7 | node5 | netdev (--netdevs) | eth0 50%, eth3 50% |", rails)

    def test_idle_hca_ports_of_a_socket_run_are_not_judged(self):
        # RoCE ports present and read, but NCCL used sockets (the netdev rails come from its NET/Socket line): the
        # HCA ports moved 0 bytes, which is no imbalance of the point; said once, with the netdev rows judged.
        def nodes(index):
            rows = two_hosts(lambda i: 400_000_000, origin="nccl_log")(index)
            for node in rows:
                node["ib_ports"] = [{"source": "hca", "rail": rail, "hca": rail.split(":")[0], "port": 1,
                                     "xmit_bytes": 0, "rcv_bytes": 0, "total_bytes": 0, "share": None, "reason": None,
                                     "expected_rail": True, "error_increments": {}} for rail in ("mlx5_0:1", "mlx5_3:1")]
            return rows
        points = ["inter.p0", "inter.p1"]
        records = [record for point in points for record in point_records(point, nodes)]
        anomalies, rails = self.report([launch(point, {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}) for point in points],
                                       records)
        self.assertNotIn("| rail", anomalies)
        self.assertIn("NCCL used NET/Socket between the nodes at 2 point(s) (inter.p0 and 1 more)", rails)
        self.assertIn("| inter.p1 | all hosts | hca | mlx5_0:1 0%, mlx5_3:1 0% | mlx5_0:1 0.000 GB, mlx5_3:1 0.000 GB "
                      "| 0 |", rails)
        self.assertIn("| inter.p1 | node7 | netdev (NCCL log) | eth0 50%, eth3 50% |", rails)

    def test_socket_points_without_netdev_rows_are_rails_not_seen(self):
        # coll_perf before schema 1.5 on a socket run: HCA flags only, no netdev rows. One finding for the run.
        nodes = lambda index: [{"host": host, "flags": HCA_FLAGS} for host in ("node5", "node7")]
        points = ["inter.p0", "inter.p1", "inter.p2"]
        raw = {point: {"schema_version": "1.4.0", "transport": {"inter_node": {"NET/Socket": 4}}} for point in points}
        records = [record for point in points for record in point_records(point, nodes)]
        anomalies, _rails = self.report([launch(point, {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}) for point in points],
                                        records, raw)
        self.assertNotIn("has no counters", anomalies)
        self.assertEqual(anomalies.count("| rail"), 1, anomalies)
        self.assertIn("| rails not seen | inter.p0 | NCCL used NET/Socket between the nodes at 3 point(s) (inter.p0 and "
                      "2 more) and no netdev rail rows were recorded", anomalies)

    def test_hca_rows_keep_their_shape_on_net_ib(self):
        # A NET/IB point: HCA counters summed over the hosts, as before, with source hca.
        def nodes(index):
            return [{"host": host, "ib_ports": [
                {"source": "hca", "rail": rail, "hca": rail.split(":")[0], "port": 1, "xmit_bytes": moved // 2,
                 "rcv_bytes": moved - moved // 2, "total_bytes": moved, "share": None, "reason": None,
                 "expected_rail": True, "error_increments": {}}
                for rail, moved in (("mlx5_0:1", 300_000_000), ("mlx5_3:1", 100_000_000))]}
                for host in ("node5", "node7")]
        anomalies, rails = self.report([launch("inter.ib")], point_records("inter.ib", nodes))
        # 2 hosts x 4 cases: mlx5_0:1 2.4 GB (75%), mlx5_3:1 0.8 GB (25%).
        self.assertIn("| inter.ib | all hosts | hca | mlx5_0:1 75%, mlx5_3:1 25% | mlx5_0:1 2.400 GB, mlx5_3:1 0.800 GB "
                      "| 0 |", rails)
        self.assertIn("| rail imbalance | inter.ib | rail shares mlx5_0:1 75%, mlx5_3:1 25% (limit 1.25x) |", anomalies)
        self.assertNotIn("rail dead", anomalies, "HCA rows are judged by the point-wide rule only")


class RailsTheirPointIsBoundTo(TempDirTest):
    """rail.dead and rail.unbalanced count only the rails a point is bound to: a point over one rail on purpose leaves
    its sibling idle (eth3 carries 1 MB of 401 MB a case on node7 below: 0.25%, far under the 5% of a dead rail)."""

    report = NetdevRailsReport.report

    def idle_eth3(self):
        return two_hosts(lambda i: 1_000_000)

    def rail_rows(self, anomalies):
        return [line for line in anomalies.splitlines() if line.startswith("| rail")]

    def test_nccl_socket_ifname_of_the_point_leaves_the_other_rail_out(self):
        anomalies, _rails = self.report([launch("inter.rail-eth0", {"NCCL_SOCKET_IFNAME": "=eth0"})],
                                        point_records("inter.rail-eth0", self.idle_eth3()))
        self.assertEqual(self.rail_rows(anomalies), [], anomalies)

    def test_a_point_bound_to_both_rails_still_has_a_dead_one(self):
        anomalies, _rails = self.report([launch("inter.both", {"NCCL_SOCKET_IFNAME": "=eth0,eth3"})],
                                        point_records("inter.both", self.idle_eth3()))
        self.assertEqual(len(self.rail_rows(anomalies)), 1, anomalies)
        self.assertIn("| rail dead | inter.both | node7 eth3 [netdev (--netdevs)]", anomalies)

    def test_nccls_using_line_tells_the_interfaces_used(self):
        # NCCL logged 'NET/Socket : Using [0]eth0' on both hosts (coll_perf -J transport evidence): eth3 is out.
        processes = [{"host": host, "socket_devices": [{"index": 0, "name": "eth0", "address": None}]}
                     for host in ("node5", "node7")]
        raw = {"inter.sock": {"transport": {"inter_node": {"NET/Socket": 4}, "evidence": {"processes": processes}}}}
        anomalies, _rails = self.report([launch("inter.sock")], point_records("inter.sock", self.idle_eth3()), raw)
        self.assertEqual(self.rail_rows(anomalies), [], anomalies)

    def test_the_mpi_backends_tcp_interface_list_binds_it(self):
        def mpi_launch(point, include):
            entry = launch(point)
            entry["argv"] = ["mpirun", "--mca", "btl_tcp_if_include", include, "-np", "2", "coll_perf", "--backend", "mpi"]
            return entry

        def mpi_records(point):
            return [dict(record, backend="mpi", bytes=SIZE) for record in point_records(point, self.idle_eth3())]
        anomalies, _rails = self.report([mpi_launch("inter.mpi.rail-eth0", "eth0")], mpi_records("inter.mpi.rail-eth0"))
        self.assertEqual(self.rail_rows(anomalies), [], anomalies)
        # A list of subnets names no interface: every rail counts, and the idle eth3 is dead.
        anomalies, _rails = self.report([mpi_launch("inter.mpi", "198.18.10.0/24,198.18.13.0/24")],
                                        mpi_records("inter.mpi"))
        self.assertIn("| rail dead | inter.mpi | node7 eth3 [netdev (--netdevs)]", anomalies)


SLOW_SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20]  # 64K is at the TCP eager limit: never judged


def single_rail_launch(point, rail, mpi=False):
    entry = dict(launch(point, {} if mpi else {"NCCL_SOCKET_IFNAME": "=" + rail}), sizes=SLOW_SIZES,
                 collectives=["all_reduce"])
    if mpi:
        entry["argv"] = ["mpirun", "--mca", "btl_tcp_if_include", rail, "-np", "2", "coll_perf", "--backend", "mpi"]
    return entry


def rail_records(point, time_us_at, repeats, mpi=False):
    """all_reduce out of place at SLOW_SIZES; time_us_at(size, repeat) the time of each repeat; busbw from it as
    a 2-rank all_reduce's (bytes / time)."""
    records = []
    for repeat in range(1, repeats + 1):
        name = point if repeats == 1 else f"{point}.rep{repeat}"
        for size in SLOW_SIZES:
            time = time_us_at(size, repeat)
            stats = {"mean": time, "min": time, "p50": time, "p95": time, "p99": time, "max": time, "cv_pct": 0.5}
            record = case_record(name, f"all_reduce.float.sum.out.{size}", size, stats, None if mpi else time,
                                 backend="mpi" if mpi else "nccl", nranks=2, bytes=size)
            record["busbw_gbps"] = size / time / 1e3
            records.append(record)
    return records


class SlowRail(TempDirTest):
    """rail.slow: each rail alone against its sibling alone at the largest sizes above 64 KiB (256K, 1M, 4M here).
    Times are chosen here; the expected ratio is the rail's time over its sibling's."""

    report = NetdevRailsReport.report

    def run_pair(self, eth3_factor, repeats, mpi=False, doctor=None):
        jitter = [1.0, 1.01, 0.99]
        fast = lambda size, k: (10.0 + size / 1000) * jitter[(k - 1) % 3]  # about 1 GB/s at 4M
        slow = lambda size, k: fast(size, k) * (eth3_factor(size) if callable(eth3_factor) else eth3_factor)
        launches = [dict(single_rail_launch(point if repeats == 1 else f"{point}.rep{k}", rail, mpi), base_point=point,
                         repeat=k) for k in range(1, repeats + 1)
                    for point, rail in (("inter.rail-eth0", "eth0"), ("inter.rail-eth3", "eth3"))]
        records = rail_records("inter.rail-eth0", fast, repeats, mpi) + rail_records("inter.rail-eth3", slow, repeats, mpi)
        if doctor:
            os.makedirs(os.path.join(self.tmp, "R"), exist_ok=True)
            with open(os.path.join(self.tmp, "R", "doctor.json"), "w") as handle:
                json.dump(doctor, handle)
        anomalies, rails = self.report(launches, records)
        self.rails_text = rails
        with open(os.path.join(self.tmp, "R", "verdict.json")) as handle:
            verdict = json.load(handle)
        return anomalies, [reason for reason in verdict["reasons"] if reason["code"] == "rail.slow"]

    def test_a_rail_three_times_slower_is_named_with_the_ratio(self):
        anomalies, slow = self.run_pair(3.0, repeats=3)
        self.assertEqual(len(slow), 1, anomalies)
        self.assertEqual((slow[0]["subject"], slow[0]["point"], slow[0]["severity"], slow[0]["check"]),
                         ("eth3", "inter.rail-eth3", "fail", "rails"))
        self.assertAlmostEqual(slow[0]["numbers"]["ratio"], 3.0, places=6)
        self.assertEqual(slow[0]["hosts"], ["node5", "node7"], "no line rate recorded: either end may be slow")
        # 4M: 10 + 4194.304 us -> 0.998 GB/s alone on eth0, three times the time on eth3: 0.333 GB/s.
        self.assertIn("| rail slow | inter.rail-eth3 | eth3 alone (inter.rail-eth3): 3.0x slower than eth0 alone "
                      "(inter.rail-eth0), median over 3 case(s) at 256K-4M (busbw at 4M 0.333 GB/s vs 0.998 GB/s);",
                      anomalies)
        self.assertNotIn("rail dead", anomalies, "the rail each point leaves out is not dead")
        self.assertIn("| inter.rail-eth3 | eth3 | eth0 | 3.00x | 0.333 | 0.998 | 256K-4M |", self.rails_text)
        self.assertIn("| inter.rail-eth0 | eth0 | eth3 | 0.33x | 0.998 | 0.333 | 256K-4M |", self.rails_text)
        self.assertEqual(verdict_fail_codes(os.path.join(self.tmp, "R")), ["rail.slow"])
        ok, errors = validate("verdict.schema.json", os.path.join(self.tmp, "R", "verdict.json"))
        self.assertTrue(ok, errors)

    def test_the_host_whose_end_of_the_rail_is_slower_is_named(self):
        # node7's eth3 negotiated 1 Gb/s, every other end 10 Gb/s (doctor.json links): node7 is named.
        links = doctor_links({"node5": {"eth0": 10000, "eth3": 10000}, "node7": {"eth0": 10000, "eth3": 1000}})
        anomalies, slow = self.run_pair(3.0, repeats=3, doctor=links)
        self.assertEqual([reason["hosts"] for reason in slow], [["node7"]])
        self.assertIn("the slow rail is eth3 on node7 (its line rate is below the other hosts')", anomalies)

    def test_a_tenth_slower_is_within_the_rule(self):
        # 1.10x: beyond the noise band of three 1%-scattered repeats, but below the 1.25x of an unbalanced rail.
        _anomalies, slow = self.run_pair(1.10, repeats=3)
        self.assertEqual(slow, [])

    def test_one_repeat_uses_the_one_repeat_floor(self):
        self.assertEqual(self.run_pair(1.12, repeats=1)[1], [], "below the 15% floor of a single repeat")
        self.assertEqual(len(self.run_pair(1.5, repeats=1)[1]), 1, "1.5x: beyond the floor and the 1.25x")

    def test_the_mpi_backend_judges_a_several_fold_gap_at_one_repeat(self):
        self.assertEqual(self.run_pair(1.5, repeats=1, mpi=True)[1], [], "host-memory times: 1.5x is no judgement")
        anomalies, slow = self.run_pair(4.0, repeats=1, mpi=True)
        self.assertEqual(len(slow), 1, anomalies)
        self.assertAlmostEqual(slow[0]["numbers"]["ratio"], 4.0, places=6)
        self.assertEqual(slow[0]["numbers"]["limit"], 2.5)
        self.assertIn("limit 2.5x with every case slower: MPI backend, both rails measured by the same hosts in the "
                      "same run", anomalies)

    def test_the_mpi_backend_needs_every_case_slower(self):
        # 4x at 256K and 1M, but 4M faster on the 'slow' rail (0.9x): the median of 4, 4, 0.9 is 4, yet a rail
        # that is faster at the largest size is host noise, not a slow rail.
        def factor(size):
            return 0.9 if size == SLOW_SIZES[-1] else 4.0
        self.assertEqual(self.run_pair(factor, repeats=1, mpi=True)[1], [])

    def test_the_faster_rail_is_never_named(self):
        _anomalies, slow = self.run_pair(1 / 3.0, repeats=3)
        self.assertEqual([reason["subject"] for reason in slow], ["eth0"])


def doctor_links(speeds_by_host, gpus=()):
    """doctor.json (schema 1.1) with only what the ceilings read: each host's netdev speeds (Mb/s, None: unknown)
    and GPU links [(GT/s, width)]."""
    links = {host: {"netdevs": {name: {"speed_mbps": speed, "reason": None if speed else "speed reads '-1'"}
                                for name, speed in speeds.items()},
                    "rdma_ports": {}, "gpus": [{"bus_id": f"0000:0{i}:00.0", "max_link_speed_gts": speed,
                                                "max_link_width": width} for i, (speed, width) in enumerate(gpus)]}
             for host, speeds in speeds_by_host.items()}
    return {"schema_version": "1.1.0", "kind": "doctor", "scope": "cluster", "checks": [], "links": links}


class LineRates(TempDirTest):
    """Ceilings and line rates from the links' own rates (doctor.json 'links'), never a constant of one cluster."""

    def run_with(self, links, busbw=0.23):
        run = os.path.join(self.tmp, "R")
        records = point_records("inter.sock", two_hosts(lambda i: 400_000_000))
        for record in records:
            record["busbw_gbps"] = busbw
        write_run_dir(run, [launch("inter.sock")], records)
        with open(os.path.join(run, "run_manifest.json")) as handle:
            manifest = json.load(handle)
        manifest["plan_inputs"] = {"netdevs": ["eth0", "eth3"], "hcas": []}
        with open(os.path.join(run, "run_manifest.json"), "w") as handle:
            json.dump(manifest, handle)
        with open(os.path.join(run, "doctor.json"), "w") as handle:
            json.dump(links, handle)
        result = run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        return read_text(os.path.join(run, "report.md"))

    def test_pcie_links_per_direction(self):
        from cclbench_lib.rules.ceilings import pcie_gbps
        self.assertAlmostEqual(pcie_gbps(32.0, 16), 32 * 16 * 128 / 130 / 8)  # Gen5 x16: 63.0 GB/s
        self.assertAlmostEqual(pcie_gbps(16.0, 16), 31.5077, places=3)        # Gen4 x16
        self.assertAlmostEqual(pcie_gbps(5.0, 16), 8.0)                        # Gen2 x16: 8b/10b
        self.assertIsNone(pcie_gbps(None, 16))

    def test_two_10g_rails_give_a_2_5_gbs_ceiling_and_the_busbw_its_share(self):
        text = self.run_with(doctor_links({"node5": {"eth0": 10000, "eth3": 10000},
                                           "node7": {"eth0": 10000, "eth3": 10000}}))
        # 2 x 10 Gb/s = 20 Gb/s = 2.5 GB/s per direction; busbw 0.23 GB/s is 9.2% of it.
        self.assertIn("| inter.sock | 2.5 | 2 x 10 Gb/s rail(s) |", text)
        self.assertIn("| inter.sock | 0.23 GB/s (all_reduce.float.sum.out.64M) | 9.2% of 2 x 10 Gb/s |", text)
        self.assertNotIn("above physical limit", text, "context, never a fail")
        from cclbench_lib.model.run_dir import RunData
        from cclbench_lib.render.report import plot_specs
        self.assertEqual([ceilings for (name, _title, _ylabel, _series, _logy, ceilings) in
                          plot_specs(RunData(os.path.join(self.tmp, "R"))) if name.endswith("busbw.png")],
                         [[("ceiling 2.5 GB/s (2 x 10 Gb/s rail(s))", 2.5)]] * 2)
        above = self.run_with(doctor_links({"node5": {"eth0": 10000, "eth3": 10000},
                                            "node7": {"eth0": 10000, "eth3": 10000}}), busbw=3.0)
        self.assertIn("| above physical limit | inter.sock |", above)

    def test_the_slower_end_of_a_rail_sets_its_rate(self):
        # node7's eth3 negotiated 1 Gb/s: that rail carries at most 1 Gb/s whatever node5's end says.
        text = self.run_with(doctor_links({"node5": {"eth0": 10000, "eth3": 10000},
                                           "node7": {"eth0": 10000, "eth3": 1000}}))
        self.assertIn("| inter.sock | 1.38 | 10 + 1 Gb/s rail(s) |", text)  # 11 Gb/s / 8

    def test_an_unknown_speed_gives_no_ceiling_and_says_why(self):
        text = self.run_with(doctor_links({"node5": {"eth0": 10000, "eth3": 10000},
                                           "node7": {"eth0": 10000, "eth3": None}}), busbw=300.0)
        self.assertIn("| inter.sock | none | no ceiling: line rate of eth3 unknown on node7 |", text)
        self.assertIn("| inter.sock | 300 GB/s (all_reduce.float.sum.out.64M) | - (line rate of eth3 unknown on node7) |",
                      text)
        self.assertNotIn("above physical limit", text)
        from cclbench_lib.model.run_dir import RunData
        from cclbench_lib.render.report import plot_specs
        specs = plot_specs(RunData(os.path.join(self.tmp, "R")))
        self.assertTrue(specs)
        self.assertEqual([ceilings for (name, _title, _ylabel, _series, _logy, ceilings) in specs
                          if name.endswith("busbw.png")], [[], []], "no dashed line where the rate is unknown")


class FakeCollPerfRun(TempDirTest):
    """The whole path through the test double of coll_perf (fake_bin/coll_perf, which writes netdev rails as the real
    one does: from NCCL's NET/Socket line when no --netdevs is given): baseline, then report."""

    def test_a_dead_netdev_rail_from_a_baseline_is_named(self):
        run_id = "S"
        args = ["baseline", "-b", "8K", "-e", "32K", "-n", "3", "-w", "1", "--repeat", "1", "--no-tuning-probe",
                "--hosts", "localhost,127.0.0.1", "--gpus-per-node", "8", "--hcas", "mlx5_0:1,mlx5_3:1"]
        result = run_cli(args + self.fake_args(run_id), env={"FAKE_COLL_NETDEV_RAILS": "eth0=200000000,eth3=0"})
        # A dead rail fails the run (rail.dead is a fail); the doctor fails too: this machine has no mlx5_0/mlx5_3.
        self.assertEqual(result.returncode, 1, result.stderr)
        run = os.path.join(self.results, run_id)
        self.assertEqual(verdict_fail_codes(run), ["doctor.fail", "rail.dead"])
        self.assertEqual(run_cli(["report", run], env={"CCLBENCH_NO_MATPLOTLIB": "1"}).returncode, 0)
        text = read_text(os.path.join(run, "report.md"))
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")]
        rails = text[text.index("### Rails"):text.index("### Rank bindings")]
        host = socket.gethostname()
        # Every case: eth0 200 MB, eth3 0 on the one host the double reports; eth3 carried 0.0% at each inter point.
        dead = [line for line in anomalies.splitlines() if line.startswith("| rail dead |")]
        self.assertTrue(dead, anomalies)
        self.assertTrue(all(f"| {host} eth3 [netdev (NCCL log)] carried 0.0% of the host's rail bytes" in line
                            for line in dead), dead)
        self.assertTrue(all(line.split(" | ")[1].startswith("inter.") for line in dead), dead)
        self.assertIn(f"| {host} | netdev (NCCL log) | eth0 100%, eth3 0% |", rails)
        self.assertNotIn("do not apply", rails, "the double writes no HCA flag or counter: nothing to explain")
        self.assertNotIn("| rail flag |", anomalies, "coll_perf's per-case netdev flag is left to the rule")


if __name__ == "__main__":
    unittest.main()
