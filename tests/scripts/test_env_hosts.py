"""The measurement environment on every host: what cclbench passes to every rank
(base/environment.exported_env, model/launcher.command) and the judgement over what each host's ranks
really ran with (rules/env_hosts.py over coll_perf's manifest.env_by_host). Plain data in, plain data out;
the expected values are written out by hand from the inputs."""
import unittest

import helpers  # noqa: F401  (scripts/ on sys.path)
from cclbench_lib.base.environment import exported_env  # noqa: E402
from cclbench_lib.model import launcher  # noqa: E402
from cclbench_lib.rules.env_hosts import ENV_HOST_DIFFERS, ENV_RANK_DIFFERS, env_anomalies  # noqa: E402


class Exported(unittest.TestCase):
    ENVIRON = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
               "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_HOSTID": "h1", "UCX_TLS": "rc", "UCX_NET_DEVICES": "mlx5_0:1",
               "OMPI_COMM_WORLD_RANK": "3", "SLURM_JOB_ID": "7", "HOME": "/root", "NCCL_IB_SECRET_TOKEN": "s3"}

    def test_measurement_variables_travel_geometry_stays(self):
        values, secret = exported_env(self.ENVIRON)
        self.assertEqual(values, {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1",
                                  "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "UCX_TLS": "rc", "UCX_NET_DEVICES": "mlx5_0:1"})
        self.assertEqual(secret, ["NCCL_IB_SECRET_TOKEN"])

    def test_mpirun_passes_each_with_x_and_the_point_wins(self):
        inputs = {"mpirun": "mpirun", "mpirun_args": [], "exported_env": {"NCCL_SOCKET_IFNAME": "eth0",
                                                                          "NCCL_CROSS_NIC": "1"},
                  "exported_env_names": ["NCCL_IB_SECRET_TOKEN"]}
        argv = launcher.command(inputs, 4, "node5:2,node7:2", {"NCCL_CROSS_NIC": "0"})
        self.assertEqual(argv, ["mpirun", "-np", "4", "--host", "node5:2,node7:2", "-x", "NCCL_SOCKET_IFNAME=eth0",
                                "-x", "NCCL_CROSS_NIC=0", "-x", "NCCL_IB_SECRET_TOKEN"])

    def test_srun_gets_the_env_prefix(self):
        inputs = {"mpirun": "mpirun", "exported_env": {"NCCL_SOCKET_IFNAME": "eth0"},
                  "launcher": {"name": "srun", "program": "srun", "mpi": "pmix", "args": []}}
        argv = launcher.command(inputs, 2, "node5:1,node7:1", {"NCCL_IB_HCA": "=mlx5_0:1"})
        self.assertEqual(argv[:3], ["env", "NCCL_SOCKET_IFNAME=eth0", "NCCL_IB_HCA==mlx5_0:1"])
        self.assertEqual(argv[3], "srun")

    def test_a_plan_made_before_exporting_is_unchanged(self):
        self.assertEqual(launcher.command({"mpirun": "mpirun"}, 2, "a:1,b:1", {"NCCL_CROSS_NIC": "1"}),
                         ["mpirun", "-np", "2", "--host", "a:1,b:1", "-x", "NCCL_CROSS_NIC=1"])


class HostsAgree(unittest.TestCase):
    HEAD = {"NCCL_SOCKET_IFNAME": "eth0", "CUDA_VISIBLE_DEVICES": "0", "OMPI_COMM_WORLD_RANK": "0"}

    def test_agreeing_hosts_are_no_finding(self):
        by_host = {"node5": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0", "CUDA_VISIBLE_DEVICES": "0"},
                   "node7": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_CROSS_NIC": "0", "CUDA_VISIBLE_DEVICES": "1"}}
        self.assertEqual(env_anomalies([("inter", {"NCCL_CROSS_NIC": "0"}, by_host, [])], self.HEAD,
                                       ["node5", "node7"]), [])

    def test_remote_host_without_the_head_variable_is_named(self):
        # The case found on the virtual cluster: the head's NCCL_SOCKET_IFNAME never reached node7's ranks.
        by_host = {"node5": {"NCCL_SOCKET_IFNAME": "eth0"}, "node7": {"NCCL_SOCKET_IFNAME": None}}
        found = env_anomalies([("sanity", {}, by_host, []), ("inter", {}, by_host, [])], self.HEAD, ["node5", "node7"])
        self.assertEqual(found, [{"code": ENV_HOST_DIFFERS, "where": "sanity", "points": ["sanity", "inter"],
                                  "host": "node7", "variable": "NCCL_SOCKET_IFNAME", "value": None,
                                  "expected": "eth0", "against": "manifest"}])

    def test_variable_set_on_one_host_only_is_named_against_the_others(self):
        by_host = {"node5": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": None},
                   "node6": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": None},
                   "node7": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}}
        found = env_anomalies([("inter", {}, by_host, [])], self.HEAD, ["node5", "node6", "node7"])
        self.assertEqual([(f["host"], f["variable"], f["value"], f["expected"], f["against"]) for f in found],
                         [("node7", "NCCL_IB_DISABLE", "1", None, "hosts")])

    def test_a_tie_names_the_host_that_differs_from_the_head(self):
        by_host = {"node5": {"NCCL_ALGO": None}, "node7": {"NCCL_ALGO": "Ring"}}
        found = env_anomalies([("inter", {}, by_host, [])], {}, ["node5", "node7"])
        self.assertEqual([(f["host"], f["value"]) for f in found], [("node7", "Ring")])

    def test_rank_disagreement_is_a_finding_but_not_for_geometry(self):
        disagreements = [{"host": "node7", "variable": "NCCL_SOCKET_IFNAME",
                          "ranks": [{"rank": 2, "value": "eth0"}, {"rank": 3, "value": None}]},
                         {"host": "node7", "variable": "CUDA_VISIBLE_DEVICES",
                          "ranks": [{"rank": 2, "value": "0"}, {"rank": 3, "value": "1"}]}]
        by_host = {"node5": {"NCCL_SOCKET_IFNAME": "eth0"}, "node7": {"NCCL_SOCKET_IFNAME": "eth0"}}
        found = env_anomalies([("inter", {}, by_host, disagreements)], self.HEAD, ["node5", "node7"])
        self.assertEqual(found, [{"code": ENV_RANK_DIFFERS, "where": "inter", "host": "node7",
                                  "variable": "NCCL_SOCKET_IFNAME", "ranks": [(2, "eth0"), (3, None)]}])

    def test_results_without_env_by_host_judge_nothing(self):
        self.assertEqual(env_anomalies([("inter", {}, None, None)], self.HEAD, ["node5"]), [])


if __name__ == "__main__":
    unittest.main()
