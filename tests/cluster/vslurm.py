"""Slurm across the virtual cluster's nodes: munged and slurmctld in the first node, one slurmd per
node namespace (its NodeAddr the node's mgmt0 address), all from a private folder, so that
`srun -N 2` / `salloc -N 2` started inside a node place ranks on both.

    with vcluster.Cluster(["node5", "node7"]) as cluster:
        slurm = VirtualSlurm(cluster).start()   # raises unittest.SkipTest with the reason
        cluster.exec("node5", ["srun", "-N", "2", "uname", "-n"], env=slurm.env())
        slurm.stop()

What a slurmd needs inside a namespace, found here (Slurm 22.05, a cgroup v1 host):
- `ip netns exec` mounts a fresh /sys, so /sys/fs/cgroup is empty and slurmd stops with "No
  filesystem mounted on /sys/fs/cgroup". Mounting cgroup2 there is refused ("Hybrid mode is not
  supported") on a v1 host; the node gets the host's own v1 hierarchies mounted again, in its
  private mount namespace (mounting an existing hierarchy shares it).
- Both slurmstepds create PMIx's client folder under the same /tmp ("File exists"): TmpFS is per
  node (%n).
Every daemon runs inside a node namespace, so the cluster's teardown (it kills what is left in its
namespaces) ends them even after a SIGKILL of the test.
"""
import os
import subprocess
import sys
import unittest

# The private Slurm the scripts tests start on one node: its munge, configuration, waiting and teardown.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from slurm_cluster import DAEMONS, PrivateSlurm, find, tail  # noqa: E402,F401 (find: the tests' own lookups)

CLIENTS = ("srun", "sinfo")
NODE_CPUS = 4
GENERIC_OPTIONS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec"}


def cgroup_mount_script():
    """sh words that mount, in the node's own mount namespace, what the host has on /sys/fs/cgroup."""
    lines = []
    try:
        with open("/proc/self/mounts") as handle:
            mounts = [line.split() for line in handle]
    except OSError:
        mounts = []
    for device, target, kind, options, *_ in mounts:
        if target == "/sys/fs/cgroup" and kind == "cgroup2":
            return "mount -t cgroup2 cgroup2 /sys/fs/cgroup"
        if target == "/sys/fs/cgroup" and kind == "tmpfs":
            lines.append("mount -t tmpfs cgroup /sys/fs/cgroup")
    for device, target, kind, options, *_ in mounts:
        if kind == "cgroup" and target.startswith("/sys/fs/cgroup/"):
            wanted = [o for o in options.split(",") if o not in GENERIC_OPTIONS]
            if all(o.startswith("name=") for o in wanted):  # a named hierarchy with no controller
                wanted = ["none"] + wanted
            lines.append(f"mkdir -p {target} && mount -t cgroup -o {','.join(wanted)} cgroup {target}")
        elif kind == "cgroup2" and target.startswith("/sys/fs/cgroup/"):
            lines.append(f"mkdir -p {target} && mount -t cgroup2 cgroup2 {target}")
    return " && ".join(lines) or "true"


class VirtualSlurm(PrivateSlurm):
    WHAT = "Slurm on the virtual cluster"

    def __init__(self, cluster):
        super().__init__("cclbench-vslurm-")
        self.cluster = cluster

    def start(self):
        if os.geteuid() != 0:
            raise unittest.SkipTest("Slurm on the virtual cluster needs root")
        missing = [name for name in DAEMONS + CLIENTS if not find(name)]
        if missing:
            raise unittest.SkipTest(f"Slurm/munge not installed (missing {', '.join(missing)})")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, node, argv, log):
        handle = open(self.path("log", log), "ab")
        process = self.cluster.popen(node, argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=handle,
                                     stderr=subprocess.STDOUT)
        handle.close()
        self.processes.append(process)
        return process

    def _start(self):
        nodes = self.cluster.nodes
        for sub in ["log", "run", "state"] + [f"spool-{n}" for n in nodes] + [f"tmp-{n}" for n in nodes]:
            os.makedirs(self.path(sub))
        key = self.munge_key()
        socket_path = self.path("run", "munge.socket")
        head = nodes[0]
        self._spawn(head, self.munged_argv(key, socket_path), "munged.out")
        self.wait(lambda: os.path.exists(socket_path), 30, "munged did not create its socket", self.logs_tail)
        with open(self.path("plugstack.conf"), "w"):
            pass
        with open(self.conf, "w") as conf:
            conf.write(self._config(socket_path, head))
        self._spawn(head, [find("slurmctld"), "-D", "-i", "-f", self.conf], "slurmctld.out")
        mounts = cgroup_mount_script()
        for node in nodes:
            self._spawn(node, ["sh", "-c", f'{mounts} && exec "$@"', "sh", find("slurmd"), "-D", "-N", node,
                               "-f", self.conf], f"slurmd-{node}.out")

        def idle():
            result = self.cluster.exec(head, [find("sinfo"), "-h", "-N", "-o", "%T"], env=self.env(),
                                       capture_output=True, text=True, timeout=30)
            states = [s.rstrip("*") for s in result.stdout.split()]
            return result.returncode == 0 and states == ["idle"] * len(nodes)
        self.wait(idle, 90, "the nodes did not become idle", self.logs_tail)

    def _config(self, munge_socket, head):
        return "\n".join([
            "ClusterName=cclbenchvc",
            f"SlurmctldHost={head}({self.cluster.address(head)})",
            "SlurmctldPort=6817", "SlurmdPort=6818"] +  # each daemon in its own network namespace
            self.common_config(munge_socket, per_node=True) +  # TmpFS per node: PMIx's client folder
            [f"NodeName={node} NodeAddr={self.cluster.address(node)} CPUs={NODE_CPUS} State=UNKNOWN"
             for node in self.cluster.nodes] +
            ["PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES", ""])

    def logs_tail(self, lines=6):
        names = sorted(os.listdir(self.path("log")))
        return "; ".join(f"{name}: {tail(self.path('log', name), lines)}" for name in names)
