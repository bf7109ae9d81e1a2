#!/usr/bin/env python3
"""The virtual cluster (vcluster.py, vc-ssh) against real mpirun, the real coll_perf and the
kernel's own counters: every knob observable, teardown after SIGKILL. CTest `cluster_harness`;
exits 77 (skip) with the reason where a cluster cannot be built (not root, no namespaces, no ip).

Expected values come from outside the harness: host names from `hostname` in each node, bytes from
the interfaces' netdev counters read in the nodes' own /sys, DF datagram delivery from a receiving
socket, throughput from a receiving socket's byte count and clock.
"""
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
from cluster_setup import (COLL_PERF, RAIL_SUBNETS, close_cluster, close_slurm, main, mpi_env,  # noqa: E402
                           mpirun_argv, open_cluster, open_slurm, skip_reason)

NETPROBE = os.path.join(HERE, "netprobe.py")


class VirtualCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        open_cluster(cls, ["node5", "node6", "node7"])

    @classmethod
    def tearDownClass(cls):
        close_cluster(cls)

    def run_on(self, node, argv, timeout=120, **kwargs):
        return self.cluster.exec(node, argv, env=mpi_env(), capture_output=True, text=True, timeout=timeout,
                                 **kwargs)

    def agent(self, *args, node="node5"):
        return self.run_on(node, [self.cluster.agent] + list(args), timeout=30)

    # --- mpirun and the agent -------------------------------------------------------------------
    def test_mpirun_runs_hostname_on_both_nodes(self):
        result = self.run_on("node5", mpirun_argv(self.cluster, "node5:2,node7:2", ["uname", "-n"], 4))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(result.stdout.split()), ["node5", "node5", "node7", "node7"])

    def test_agent_gives_a_login_environment_the_hostname_and_the_nodes_sys(self):
        # Run from node5 with the caller's whole environment (mpi_env): none of it may arrive.
        result = self.agent("-x", "-o", "BatchMode=yes", "node7", "uname", "-n;", "env;", "ls", "/sys/class/net")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.split()
        self.assertEqual(lines[0], "node7")
        names = {line.split("=", 1)[0] for line in lines if "=" in line}
        login = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "SHELL", "PWD", "TMPDIR"}
        if os.environ.get("CCLBENCH_VC_NODE_LD_LIBRARY_PATH"):  # a machine whose MPI/CUDA live off the default path
            login.add("LD_LIBRARY_PATH")
        self.assertEqual(names, login)
        self.assertEqual([line for line in lines if "=" not in line][1:], ["eth0", "eth3", "lo", "mgmt0"])
        self.assertIn("198.18.0.7", self.agent("node7", "cat", "/etc/hosts").stdout)

    def test_each_node_keeps_its_open_mpi_session_folders_in_its_own_temporary_folder(self):
        # As each real host has its own /tmp: two clusters up at once with a node of one name must not share Open MPI's
        # TMPDIR/ompi.<host>.<uid>, which the last job there removes (an orted of the other then fails its mkdir).
        # Where Open MPI put them comes from the ranks' own environment, which mpirun and the orted set.
        result = self.run_on("node5", mpirun_argv(self.cluster, "node5:1,node7:1",
                                                  ["sh", "-c", "echo $(uname -n) $OMPI_MCA_orte_top_session_dir"], 2))
        self.assertEqual(result.returncode, 0, result.stderr)
        folders = dict(line.split() for line in result.stdout.splitlines() if line.startswith("node"))
        self.assertEqual(set(folders), {"node5", "node7"}, result.stdout)
        for node, folder in folders.items():
            self.assertEqual(os.path.dirname(folder), self.cluster.tmp_dir(node), folders)
            self.assertTrue(os.path.basename(folder).startswith(f"ompi.{node}."), folders)

    def test_agent_unknown_host_fails_like_ssh(self):
        result = self.agent("node9", "uname", "-n")
        self.assertEqual(result.returncode, 255)
        self.assertIn("ssh: Could not resolve hostname node9: Name or service not known", result.stderr)

    def test_agent_mgmt_down_fails_like_ssh(self):
        self.cluster.set_link("node7", "mgmt0", up=False)
        try:
            started = time.monotonic()
            result = self.agent("-o", "ConnectTimeout=2", "node7", "uname", "-n")
            self.assertEqual(result.returncode, 255)
            self.assertRegex(result.stderr, r"ssh: connect to host node7 port 22: (Connection timed out|No route to host)")
            self.assertLess(time.monotonic() - started, 20)
        finally:
            self.cluster.set_link("node7", "mgmt0", up=True)
        self.assertEqual(self.agent("node7", "uname", "-n").stdout.strip(), "node7")

    # --- rails ----------------------------------------------------------------------------------
    def rail_bytes(self, node):
        return {link: self.cluster.counters(node, link)["rx_bytes"] for link in vcluster.RAILS}

    def coll_perf_across(self, size="4M", iters="10"):
        if not os.access(COLL_PERF, os.X_OK):
            self.skipTest(f"coll_perf not built ({COLL_PERF})")
        before = self.rail_bytes("node7")
        result = self.run_on("node5", mpirun_argv(self.cluster, "node5:1,node7:1",
                                                  [COLL_PERF, "--backend", "mpi", "--coll", "all_reduce",
                                                   "-b", size, "-e", size, "-n", iters, "-w", "1"], 2),
                             timeout=180)
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        after = self.rail_bytes("node7")
        return {link: after[link] - before[link] for link in vcluster.RAILS}

    def test_coll_perf_moves_traffic_on_both_rails(self):
        received = self.coll_perf_across()
        total = sum(received.values())
        print(f"\n  node7 rx bytes per rail: {received}", file=sys.stderr)
        # 2-rank all_reduce of 4 MiB: each rank receives at least 4 MiB / 2 per operation, >= 11 ops.
        self.assertGreater(total, 11 * 2 * 1024 * 1024, received)
        for link, count in received.items():
            self.assertGreater(count / total, 0.3, f"{link} carried {count} of {total} bytes")

    def test_rail_down_carries_nothing(self):
        self.cluster.set_link("node7", "eth3", up=False)
        try:
            received = self.coll_perf_across()
        finally:
            self.cluster.set_link("node7", "eth3", up=True)
        print(f"\n  node7 eth3 down, rx bytes per rail: {received}", file=sys.stderr)
        self.assertEqual(received["eth3"], 0, received)
        self.assertGreater(received["eth0"], 11 * 2 * 1024 * 1024, received)

    # --- MTU ------------------------------------------------------------------------------------
    def df_delivered(self, sizes, src="node5", dst="node7", link="eth0"):
        """Sizes (whole IP datagrams, don't-fragment) that arrived at dst's socket."""
        address = self.cluster.address(dst, link)
        receiver = self.cluster.popen(dst, [sys.executable, NETPROBE, "udp-recv", address, "9999", "1.5"],
                                      stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(receiver.stdout.readline().strip(), "ready")
            sent = self.run_on(src, [sys.executable, NETPROBE, "udp-send", address, "9999"] + [str(s) for s in sizes])
            self.assertEqual(sent.returncode, 0, sent.stderr)
            out, _ = receiver.communicate(timeout=30)
        finally:
            if receiver.poll() is None:
                receiver.kill()
        return sent.stdout, sorted(int(line.split()[1]) for line in out.splitlines() if line.startswith("got"))

    def set_path(self, host_mtu, port_mtu):
        for node in ("node5", "node7"):
            self.cluster.set_link(node, "eth0", port_mtu=port_mtu if port_mtu > 1500 else None)
            self.cluster.set_link(node, "eth0", mtu=host_mtu)
            self.cluster.set_link(node, "eth0", port_mtu=port_mtu)

    def test_path_mtu_mismatch_drops_large_df_datagrams(self):
        try:
            self.set_path(9000, 9000)
            _, delivered = self.df_delivered([1500, 9000])
            self.assertEqual(delivered, [1500, 9000], "equal MTUs along the path carry 9000")
            self.set_path(9000, 1500)
            sent, delivered = self.df_delivered([1500, 9000])
            self.assertIn("sent 9000", sent)  # the host's own MTU allows it ...
            self.assertEqual(delivered, [1500], "... the 1500 port drops it")
        finally:
            self.set_path(1500, 1500)

    # --- shaping --------------------------------------------------------------------------------
    def throughput_mbit(self, src, dst, link="eth0", seconds=1.0):
        address = self.cluster.address(dst, link)
        receiver = self.cluster.popen(dst, [sys.executable, NETPROBE, "tcp-recv", address, "9998"],
                                      stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(receiver.stdout.readline().strip(), "ready")
            sent = self.run_on(src, [sys.executable, NETPROBE, "tcp-send", address, "9998", str(seconds)])
            self.assertEqual(sent.returncode, 0, sent.stderr)
            out, _ = receiver.communicate(timeout=30)
        finally:
            if receiver.poll() is None:
                receiver.kill()
        count, elapsed = out.split()
        return int(count) * 8 / float(elapsed) / 1e6

    def test_tbf_rate_limit_lowers_throughput(self):
        free = self.throughput_mbit("node5", "node7")
        self.cluster.set_rate("node5", "eth0", "50mbit")
        try:
            limited = self.throughput_mbit("node5", "node7")
        finally:
            self.cluster.set_rate("node5", "eth0", None)
        print(f"\n  node5->node7 eth0: {free:.0f} Mbit/s free, {limited:.0f} Mbit/s under tbf 50mbit", file=sys.stderr)
        self.assertGreater(free, 400, "an unshaped veth path carries far more than 50 Mbit/s")
        self.assertLess(limited, 75, f"tbf 50mbit: measured {limited:.0f} Mbit/s")

    def test_htb_throttles_only_that_pair(self):
        self.cluster.throttle_pair("node5", "node7", "eth0", "50mbit")
        try:
            to_node7 = self.throughput_mbit("node5", "node7")
            to_node6 = self.throughput_mbit("node5", "node6")
        finally:
            for node in ("node5", "node7"):
                self.cluster.clear_shaping(node, "eth0")
        print(f"\n  htb node5<->node7 50mbit: node5->node7 {to_node7:.0f}, node5->node6 {to_node6:.0f} Mbit/s",
              file=sys.stderr)
        self.assertLess(to_node7, 75, f"node5->node7 throttled to 50mbit: {to_node7:.0f} Mbit/s")
        self.assertGreater(to_node6, 400, f"node5->node6 not throttled: {to_node6:.0f} Mbit/s")


class SlurmAcrossNodes(unittest.TestCase):
    """One slurmd per node namespace (vslurm.py): srun from node5 starts ranks on both nodes."""

    @classmethod
    def setUpClass(cls):
        open_slurm(cls, ["node5", "node7"])

    @classmethod
    def tearDownClass(cls):
        close_slurm(cls)

    def srun(self, *args):
        return self.cluster.exec("node5", ["srun"] + list(args), env=self.slurm.env(), capture_output=True,
                                 text=True, timeout=120)

    def test_srun_places_tasks_on_both_nodes(self):
        result = self.srun("-N", "2", "--ntasks-per-node", "2", "uname", "-n")
        self.assertEqual(result.returncode, 0, result.stderr + self.slurm.logs_tail())
        self.assertEqual(sorted(result.stdout.split()), ["node5", "node5", "node7", "node7"])

    def test_srun_pmix_coll_perf_across_nodes_uses_both_rails(self):
        if not os.access(COLL_PERF, os.X_OK):
            self.skipTest(f"coll_perf not built ({COLL_PERF})")
        mpi = self.srun("--mpi=list").stdout + self.srun("--mpi=list").stderr
        if "pmix" not in mpi:
            self.skipTest(f"srun offers no PMIx ({mpi.strip()})")
        before = {link: self.cluster.counters("node7", link)["rx_bytes"] for link in vcluster.RAILS}
        result = self.cluster.exec("node5", ["srun", "-N", "2", "--ntasks-per-node", "1", "--mpi=pmix", COLL_PERF,
                                             "--backend", "mpi", "--coll", "all_reduce", "-b", "4M", "-e", "4M",
                                             "-n", "10", "-w", "1"],
                                   env=self.slurm.env(OMPI_MCA_btl="tcp,self", OMPI_MCA_btl_tcp_if_include=RAIL_SUBNETS),
                                   capture_output=True, text=True, timeout=180)
        self.assertEqual(result.returncode, 0, result.stdout[-1500:] + result.stderr[-1500:])
        received = {link: self.cluster.counters("node7", link)["rx_bytes"] - before[link] for link in vcluster.RAILS}
        print(f"\n  srun: node7 rx bytes per rail: {received}", file=sys.stderr)
        total = sum(received.values())
        self.assertGreater(total, 11 * 2 * 1024 * 1024, received)
        for link, count in received.items():
            self.assertGreater(count / total, 0.3, f"{link} carried {count} of {total} bytes")


class Teardown(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)

    def leftovers(self, instance):
        tools = vcluster.tools_from_environment()  # the bridges live in the switch namespace
        return ([ns for ns in vcluster.list_netns(tools) if ns.startswith(instance)] +
                [path for path in (os.path.join(vcluster.STATE_ROOT, instance),) if os.path.exists(path)] +
                [name for name in os.listdir(vcluster.NETNS_ETC) if name.startswith(instance)])

    def test_sigkill_of_the_owner_tears_down(self):
        owner = subprocess.Popen([sys.executable, "-c",
                                  "import sys, time; sys.path.insert(0, sys.argv[1]); import vcluster\n"
                                  "c = vcluster.Cluster(['node1', 'node2']).up(); print(c.id, flush=True)\n"
                                  "c.exec('node1', ['sleep', '300'])", HERE], stdout=subprocess.PIPE, text=True)
        instance = owner.stdout.readline().strip()
        self.assertTrue(instance.startswith("cclvc-"), instance)
        self.assertTrue(self.leftovers(instance), "the cluster was up")
        time.sleep(0.5)  # its `sleep 300` is running inside node1
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()
        deadline = time.monotonic() + 15
        while self.leftovers(instance) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.leftovers(instance), [])

    def test_down_stale_removes_instances_of_dead_owners(self):
        owner = subprocess.Popen(["sleep", "60"])
        cluster = vcluster.Cluster(["node1", "node2"], owner_pid=owner.pid, reaper=False).up()
        try:
            self.assertEqual(vcluster.instance_status(cluster.state_dir)["state"], "up")
            result = subprocess.run([sys.executable, os.path.join(HERE, "vcluster.py"), "down", "--stale"],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertNotIn(cluster.id, result.stdout, "a live owner's cluster is not stale")
            owner.kill()
            owner.wait()
            result = subprocess.run([sys.executable, os.path.join(HERE, "vcluster.py"), "down", "--stale"],
                                    capture_output=True, text=True, timeout=60)
            self.assertIn(f"removed {cluster.id}", result.stdout)
            self.assertEqual(self.leftovers(cluster.id), [])
        finally:
            cluster.down()


if __name__ == "__main__":
    main()
