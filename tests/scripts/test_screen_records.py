"""A screen job's coll_perf -J document as the values the screen's rules judge (model/screen_records.py).

Documents are written out here in the shape case_record.schema.json gives (evidence.rails.nodes[] with netdevs
and ib_ports), with numbers chosen so the expected values are worked out by hand."""
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

import helpers  # noqa: F401  (puts scripts/ on sys.path)
from cclbench_lib.model.screen_records import job_point, point_values

LARGE, SMALL = 1 << 20, 8192


def case(size, busbw=2.0, mean=100.0, p50=80.0, status="ok", reason=None, rails=None, in_place=False):
    record = {"bytes": size, "in_place": in_place, "status": status, "reason": reason, "busbw_gbps": busbw,
              "bandwidth_from": "time_us.mean", "time_us": {"mean": mean, "p50": p50, "min": 50.0}}
    if rails is not None:
        record["evidence"] = {"rails": {"nodes": rails}}
    return record


class PointValues(unittest.TestCase):
    def test_values_at_the_median_iteration(self):
        document = {"transport": None, "transport_reason": "MPI backend: no NCCL communicator",
                    "cases": [case(LARGE, busbw=0.0, in_place=True), case(LARGE), case(SMALL, mean=40.0, p50=30.0)]}
        values = point_values(document, LARGE, SMALL)
        # 2.0 GB/s over the mean of 100 us is 2.5 GB/s over the median of 80 us (the out-of-place record is used)
        self.assertAlmostEqual(values["busbw_gbps"], 2.5)
        self.assertEqual(values["small_time_us"], 30.0)
        self.assertEqual(values["transport"], {"backend": None, "reason": "MPI backend: no NCCL communicator"})
        self.assertIsNone(values["reason"])
        self.assertIsNone(values["rail_bytes"])

    def test_missing_values_are_none_with_a_reason(self):
        document = {"cases": [case(LARGE, busbw=None, status="failed", reason="timeout")]}
        values = point_values(document, LARGE, SMALL)
        self.assertIsNone(values["busbw_gbps"])
        self.assertIsNone(values["small_time_us"])
        self.assertIn("1048576 B: status failed: timeout", values["reason"])
        self.assertIn("8192 B: no record", values["reason"])
        no_median = point_values({"cases": [case(LARGE, p50=None), case(SMALL)]}, LARGE, SMALL)
        self.assertIsNone(no_median["busbw_gbps"])  # never the mean's figure passed off as the median's
        self.assertIn("no median time", no_median["reason"])

    def test_a_rail_point_measures_the_large_size_alone(self):
        # A rail point runs --sizes LARGE only: no small time, and its absence is no reason to call it failed.
        values = point_values({"cases": [case(LARGE)]}, LARGE, None)
        self.assertAlmostEqual(values["busbw_gbps"], 2.5)
        self.assertIsNone(values["small_time_us"])
        self.assertIsNone(values["reason"])
        failed = point_values({"cases": [case(LARGE, busbw=None, status="failed", reason="timeout")]}, LARGE, None)
        self.assertEqual(failed["reason"], "1048576 B: status failed: timeout")

    def test_a_one_rank_intra_point_is_its_small_time_and_no_failure(self):
        # coll_perf's own document at one rank (the MPI backend, one process: what a one-GPU node's intra-node
        # point writes), not one written out here: busbw null with busbw_reason.
        coll_perf = os.path.join(helpers.REAL_APPS, "coll_perf")
        if not os.access(coll_perf, os.X_OK) or not shutil.which("mpirun"):
            self.skipTest(f"no built coll_perf ({coll_perf}) or no mpirun")
        with tempfile.TemporaryDirectory() as work:
            output = os.path.join(work, "intra.json")
            subprocess.run(["mpirun", "-np", "1", *shlex.split(helpers.EXTRA_MPIRUN), coll_perf, "--backend", "mpi",
                            "-b", "8K", "-e", "1M", "-f", "128", "-n", "2", "-w", "1", "--coll", "all_reduce",
                            "-J", output], check=True, capture_output=True, timeout=120,
                           env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
            with open(output) as handle:
                document = json.load(handle)
        found = point_values(document, LARGE, SMALL)
        self.assertIsNone(found["busbw_gbps"])
        self.assertGreater(found["small_time_us"], 0)
        self.assertEqual(found["reason"], "1048576 B: no bus bandwidth: 1 rank: no link is crossed")
        judged = job_point("intra", 1, found)
        self.assertIsNone(judged["reason"])
        self.assertEqual(judged["small_time_us"], found["small_time_us"])
        # two ranks or more: a missing bus bandwidth is a failure and keeps its reason; so is one rank's missing
        # small time
        self.assertEqual(job_point("intra", 2, found)["reason"], found["reason"])
        no_small = dict(found, small_time_us=None, reason="8192 B: no record")
        self.assertEqual(job_point("intra", 1, no_small)["reason"], "8192 B: no record")
        # a pair is never one rank's
        self.assertEqual(job_point("pair", 1, found)["reason"], found["reason"])

    def test_a_rail_job_is_judged_at_its_large_size_alone(self):
        found = point_values({"cases": [case(LARGE)]}, LARGE, SMALL)  # its small size did not run
        self.assertEqual(found["reason"], "8192 B: no record")
        self.assertIsNone(job_point("rail", None, found)["reason"])
        self.assertEqual(job_point("pair", None, found)["reason"], "8192 B: no record")

    def test_rail_bytes_per_host_from_netdevs_and_hca_ports(self):
        rails = [{"host": "node1", "netdevs": [{"name": "eth0", "tx_bytes": 600, "rx_bytes": 400},
                                               {"name": "eth3", "tx_bytes": 0, "rx_bytes": 0},
                                               {"name": "mgmt0", "tx_bytes": 9, "rx_bytes": 9}]},
                 {"host": "node2", "netdevs": [{"name": "eth0", "tx_bytes": 400, "rx_bytes": 600},
                                               {"name": "eth3", "tx_bytes": None, "rx_bytes": None,
                                                "reason": "no such interface"}]},
                 {"host": "gpu1", "ib_ports": [{"rail": "mlx5_0:1", "hca": "mlx5_0", "port": 1, "total_bytes": 7},
                                               {"rail": "mlx5_3:1", "hca": "mlx5_3", "port": 1, "total_bytes": 0}]}]
        document = {"cases": [case(LARGE, rails=rails), case(SMALL)]}
        values = point_values(document, LARGE, SMALL, ["eth0", "eth3", "mlx5_0:1", "mlx5_3:1"])
        # a rail that moved nothing is 0; one with no counter is absent (missing is not 0)
        self.assertEqual(values["rail_bytes"], {"node1": {"eth0": 1000, "eth3": 0}, "node2": {"eth0": 1000},
                                                "gpu1": {"mlx5_0:1": 7, "mlx5_3:1": 0}})

    def test_netdev_rails_of_schema_1_5(self):
        rails = [{"host": "node1", "netdev_rails": [
                    {"source": "netdev", "rail": "eth0", "netdev": "eth0", "tx_bytes": 5, "rx_bytes": 5, "total_bytes": 10},
                    {"source": "netdev", "rail": "eth3", "netdev": "eth3", "tx_bytes": 0, "rx_bytes": 0, "total_bytes": 0}]},
                 {"host": "node2", "netdev_rails": [
                    {"source": "netdev", "rail": "eth0", "netdev": "eth0", "tx_bytes": 6, "rx_bytes": 6, "total_bytes": 12},
                    {"source": "netdev", "rail": "eth3", "netdev": "eth3", "tx_bytes": None, "rx_bytes": None,
                     "total_bytes": None, "reason": "no such interface"}]}]
        document = {"cases": [case(LARGE, rails=rails), case(SMALL)]}
        expected = {"node1": {"eth0": 10, "eth3": 0}, "node2": {"eth0": 12}}
        self.assertEqual(point_values(document, LARGE, SMALL, ["eth0", "eth3"])["rail_bytes"], expected)
        # no rail named (NCCL over sockets found its interfaces itself): every netdev rail the record lists
        self.assertEqual(point_values(document, LARGE, SMALL)["rail_bytes"], expected)
        self.assertEqual(point_values(document, LARGE, SMALL, ["eth0"])["rail_bytes"],
                         {"node1": {"eth0": 10}, "node2": {"eth0": 12}})


if __name__ == "__main__":
    unittest.main()
