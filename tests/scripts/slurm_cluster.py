"""A private one-node Slurm cluster for tests: munged, slurmctld and slurmd (Debian's slurm-wlm and
munge packages) started in the foreground from a temporary folder, with their own key, sockets,
ports, state and logs, so nothing of the machine's own configuration is used or changed.

    cluster = SlurmCluster.start()    # raises unittest.SkipTest with the reason when it cannot
    subprocess.run(["srun", "-n", "4", "hostname"], env=cluster.env())
    cluster.stop()

Needs root (slurmd launches tasks as the submitting user, and the daemons' users are root here).
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "sinfo", "scontrol", "scancel")
# Tasks a point may start on one node; the node claims this many CPUs (config_overrides), so a
# 4-rank launch fits on a 2-core CI machine.
NODE_CPUS = 8


def find(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(path, lines=8):
    try:
        with open(path, errors="replace") as handle:
            return " | ".join(handle.read().strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


class PrivateSlurm:
    """What every private Slurm of the tests shares, one node here or one per virtual node
    (tests/cluster/vslurm.py): its folder, the clients' environment, munge's key and daemon, the
    configuration's common lines, waiting until it is ready, and the teardown."""

    def __init__(self, prefix):
        self.root = tempfile.mkdtemp(prefix=prefix)
        self.conf = os.path.join(self.root, "slurm.conf")
        self.processes = []

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def env(self, **extra):
        """Environment for Slurm clients (and cclbench) talking to this cluster."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        env.update(extra)
        return env

    def munge_key(self):
        key = self.path("munge.key")
        created = subprocess.run([find("mungekey"), "--create", f"--keyfile={key}", "--force"], capture_output=True,
                                 text=True)
        if created.returncode != 0:
            raise unittest.SkipTest(f"mungekey failed: {created.stderr.strip()[-200:]}")
        os.chmod(key, 0o600)
        return key

    def munged_argv(self, key, socket_path):
        return [find("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
                f"--pid-file={self.path('run', 'munged.pid')}", f"--seed-file={self.path('run', 'munged.seed')}",
                f"--log-file={self.path('log', 'munged.log')}"]

    def common_config(self, munge_socket, per_node):
        """The slurm.conf lines every private cluster has; per_node: one spool, pid, log and TmpFS per node (%n)."""
        suffix = "-%n" if per_node else ""
        root = self.root
        return [
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool{suffix}"] + ([f"TmpFS={root}/tmp-%n"] if per_node else []) + [
            f"SlurmctldPidFile={root}/run/slurmctld.pid",
            f"SlurmdPidFile={root}/run/slurmd{suffix}.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            f"SlurmdLogFile={root}/log/slurmd{suffix}.log",
            f"PlugStackConfig={root}/plugstack.conf",
            # Containers have no cgroup delegation: track tasks by process tree, bind nothing.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SwitchType=switch/none",
            "MpiDefault=none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
            "SchedulerType=sched/builtin", "KillWait=5"]

    def wait(self, ready, deadline_s, what, details):
        """Until ready() or a daemon exits; then unittest.SkipTest naming what did not happen and details()."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.5)
        dead = [os.path.basename(p.args[0]) for p in self.processes if p.poll() is not None]
        raise unittest.SkipTest(f"cannot start {self.WHAT}: {what}" + (f" ({', '.join(dead)} exited)" if dead else "")
                                + f"; {details()}")

    def stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []
        shutil.rmtree(self.root, ignore_errors=True)


class SlurmCluster(PrivateSlurm):
    WHAT = "a private Slurm"

    def __init__(self):
        super().__init__("cclbench-slurm-")
        self.node = socket.gethostname().split(".")[0]

    @classmethod
    def start(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("a private Slurm needs root (slurmd and munged are started by the test)")
        missing = [name for name in DAEMONS + CLIENTS if not find(name)]
        if missing:
            raise unittest.SkipTest(f"Slurm/munge not installed (missing {', '.join(missing)}; "
                                    "apt-get install slurmctld slurmd slurm-client munge)")
        cluster = cls()
        try:
            cluster._start()
        except unittest.SkipTest:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, argv, log):
        handle = open(self.path("log", log), "ab")
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        handle.close()
        self.processes.append(process)
        return process

    def _start(self):
        for sub in ("log", "run", "state", "spool"):
            os.makedirs(self.path(sub))
        key = self.munge_key()
        socket_path = self.path("run", "munge.socket")
        self._spawn(self.munged_argv(key, socket_path), "munged.out")
        self.wait(lambda: os.path.exists(socket_path), 30, "munged did not create its socket",
                  lambda: f"munged.log: {tail(self.path('log', 'munged.log'))}")
        with open(self.conf, "w") as conf:
            conf.write(self._config(socket_path))
        with open(self.path("plugstack.conf"), "w"):
            pass
        self._spawn([find("slurmctld"), "-D", "-i", "-f", self.conf], "slurmctld.out")
        self._spawn([find("slurmd"), "-D", "-N", self.node, "-f", self.conf], "slurmd.out")

        def idle():
            result = subprocess.run([find("sinfo"), "-h", "-N", "-o", "%T"], capture_output=True, text=True,
                                    env=self.env(), timeout=30)
            return result.returncode == 0 and result.stdout.strip().rstrip("*") == "idle"
        self.wait(idle, 90, "the node did not become idle",
                  lambda: "; ".join(f"{name}: {tail(self.path('log', name))}" for name in ("slurmctld.log",
                                                                                         "slurmd.log")))

    def _config(self, munge_socket):
        return "\n".join([
            "ClusterName=cclbenchtest",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}"] + self.common_config(munge_socket, per_node=False) + [
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} State=UNKNOWN",
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
            ""])
