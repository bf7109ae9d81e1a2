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


class SlurmCluster:
    def __init__(self, root):
        self.root = root
        self.node = socket.gethostname().split(".")[0]
        self.processes = []
        self.conf = os.path.join(root, "slurm.conf")

    @classmethod
    def start(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("a private Slurm needs root (slurmd and munged are started by the test)")
        missing = [name for name in DAEMONS + CLIENTS if not find(name)]
        if missing:
            raise unittest.SkipTest(f"Slurm/munge not installed (missing {', '.join(missing)}; "
                                    "apt-get install slurmctld slurmd slurm-client munge)")
        cluster = cls(tempfile.mkdtemp(prefix="cclbench-slurm-"))
        try:
            cluster._start()
        except unittest.SkipTest:
            cluster.stop()
            raise
        return cluster

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def env(self, **extra):
        """Environment for Slurm clients (and cclbench) talking to this cluster."""
        env = dict(os.environ)
        for name in list(env):
            if name.startswith("SLURM_"):
                env.pop(name)
        env["SLURM_CONF"] = self.conf
        env.update(extra)
        return env

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
        key = self.path("munge.key")
        created = subprocess.run([find("mungekey"), "--create", f"--keyfile={key}", "--force"], capture_output=True,
                                 text=True)
        if created.returncode != 0:
            raise unittest.SkipTest(f"mungekey failed: {created.stderr.strip()[-200:]}")
        os.chmod(key, 0o600)
        socket_path = self.path("run", "munge.socket")
        self._spawn([find("munged"), "--foreground", "--force", f"--key-file={key}", f"--socket={socket_path}",
                     f"--pid-file={self.path('run', 'munged.pid')}", f"--seed-file={self.path('run', 'munged.seed')}",
                     f"--log-file={self.path('log', 'munged.log')}"], "munged.out")
        self._wait(lambda: os.path.exists(socket_path), 30, "munged did not create its socket",
                   self.path("log", "munged.log"))
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
        self._wait(idle, 90, "the node did not become idle", self.path("log", "slurmctld.log"),
                   self.path("log", "slurmd.log"))

    def _config(self, munge_socket):
        run, log = self.path("run"), self.path("log")
        return "\n".join([
            "ClusterName=cclbenchtest",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={self.path('state')}",
            f"SlurmdSpoolDir={self.path('spool')}",
            f"SlurmctldPidFile={run}/slurmctld.pid",
            f"SlurmdPidFile={run}/slurmd.pid",
            f"SlurmctldLogFile={log}/slurmctld.log",
            f"SlurmdLogFile={log}/slurmd.log",
            f"PlugStackConfig={self.path('plugstack.conf')}",
            # Containers have no cgroup delegation: track tasks by process tree, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SchedulerType=sched/builtin",
            "KillWait=5",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} State=UNKNOWN",
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
            ""])

    def _wait(self, ready, deadline_s, what, *logs):
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            dead = [p.args[0] for p in self.processes if p.poll() is not None]
            if dead:
                break
            time.sleep(0.5)
        dead = [os.path.basename(p.args[0]) for p in self.processes if p.poll() is not None]
        details = "; ".join(f"{os.path.basename(log)}: {tail(log)}" for log in logs)
        raise unittest.SkipTest(f"cannot start a private Slurm: {what}" +
                                (f" ({', '.join(dead)} exited)" if dead else "") + f"; {details}")

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
