"""What the launch benchmarks (launch_fanout.py, launch_time.py) share: the ssh fleet (network namespaces on one
bridge, an sshd each, a launcher namespace), the Slurm allocation across the virtual cluster, the inner process
that measures in there and hands its rows back one JSON line each, and the command line's common steps (the inner
modes, teardown on signals, the results file written atomically).

An outer process builds the fleet or the allocation and starts the same script again inside it with
`--mode ssh-inner` (in the launcher namespace, with `--agent`) or `--mode srun-inner` (inside `salloc`); the inner
process prints a row a line (emit_row) and the outer one collects them (inner_rows).
"""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "cclfan"  # namespaces: cclfan<owner pid>-sw (the bridge), -l (the launcher), -n<i> (node i)
SSH_NET = "198.19"  # node i: 198.19.<i // 250>.<i % 250 + 1>/16; the launcher 198.19.255.1
LAUNCHER_ADDRESS = f"{SSH_NET}.255.1"
MAX_SSH_NODES = 1000  # a Linux bridge holds 1024 ports


def root_flag():
    return ["--allow-run-as-root"] if os.geteuid() == 0 else []



def node_address(index):
    return f"{SSH_NET}.{index // 250}.{index % 250 + 1}"


def tool(name):
    found = shutil.which(name) or next((os.path.join(d, name) for d in ("/usr/sbin", "/sbin")
                                        if os.access(os.path.join(d, name), os.X_OK)), None)
    if not found:
        raise SystemExit(f"launch_fanout: {name} not found (ssh mode needs iproute2 and OpenSSH: "
                         "apt-get install -y iproute2 openssh-server openssh-client)")
    return found


def list_netns(ip):
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_netns_processes(ip, names):
    """SIGKILL to every process still inside these namespaces (sshd sessions, orteds, ranks the benchmark started)."""
    for name in names:
        listed = subprocess.run([ip, "netns", "pids", name], capture_output=True, text=True, check=False).stdout
        for word in listed.split():
            try:
                os.kill(int(word), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def delete_netns(ip, names):
    if names:
        kill_netns_processes(ip, names)
        subprocess.run([ip, "-force", "-batch", "-"], input="".join(f"netns del {name}\n" for name in names),
                       text=True, capture_output=True, check=False)


def cleanup_stale(ip):
    """Namespaces of benchmarks whose owner process is gone."""
    stale = [name for name in list_netns(ip) if name.startswith(PREFIX) and "-" in name
             and name[len(PREFIX):name.index("-")].isdigit() and not pid_alive(int(name[len(PREFIX):name.index("-")]))]
    delete_netns(ip, stale)
    return stale


class SshFleet:
    """node_count namespaces on one bridge, each with an sshd on its mgmt0, and a launcher namespace; keys and
    configuration in a private temporary folder. A context manager: the exit tears everything down."""

    def __init__(self, node_count):
        if not 2 <= node_count <= MAX_SSH_NODES:
            raise SystemExit(f"launch_fanout: ssh mode holds 2 to {MAX_SSH_NODES} nodes, not {node_count}")
        self.ip, self.sshd, self.keygen = tool("ip"), tool("sshd"), tool("ssh-keygen")
        self.node_count = node_count
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch, self.launcher = f"{self.tag}-sw", f"{self.tag}-l"
        self.nodes = [f"{self.tag}-n{i}" for i in range(node_count)]
        self.folder = None
        self.daemons = []
        self.made_privsep = False

    def ip_batch(self, namespace, lines):
        argv = [self.ip] + (["-n", namespace] if namespace else []) + ["-batch", "-"]
        result = subprocess.run(argv, input="".join(line + "\n" for line in lines), text=True, capture_output=True,
                                check=False)
        if result.returncode != 0:
            raise SystemExit(f"launch_fanout: ip {' '.join(argv[1:-2])} -batch failed: {result.stderr.strip()[:300]}")

    def __enter__(self):
        try:
            self._build()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self):
        # Not under /tmp: every node sees a /tmp of its own, and all of them the keys here.
        self.folder = tempfile.mkdtemp(prefix="cclbench-fanout-ssh-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
        self.ip_batch(None, [f"netns add {name}" for name in [self.switch, self.launcher] + self.nodes])
        ports = [(f"p{i}", name) for i, name in enumerate(self.nodes)] + [("pl", self.launcher)]
        self.ip_batch(self.switch, ["link add br0 type bridge", "link set br0 up"] +
                      [f"link add {port} type veth peer name mgmt0 netns {name}" for port, name in ports] +
                      [f"link set {port} master br0" for port, _ in ports] + [f"link set {port} up" for port, _ in ports])
        for index, name in enumerate(self.nodes + [self.launcher]):
            address = node_address(index) if index < self.node_count else LAUNCHER_ADDRESS
            self.ip_batch(name, ["link set lo up", f"addr add {address}/16 dev mgmt0", "link set mgmt0 up"])
        for key in ("host_key", "user_key"):
            subprocess.run([self.keygen, "-q", "-t", "ed25519", "-N", "", "-f", self.path(key)], check=True,
                           stdin=subprocess.DEVNULL)
        shutil.copyfile(self.path("user_key.pub"), self.path("authorized_keys"))
        with open(self.path("sshd_config"), "w", encoding="utf-8") as handle:
            handle.write("\n".join([
                "Port 22", f"HostKey {self.path('host_key')}", f"AuthorizedKeysFile {self.path('authorized_keys')}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "PidFile none", "UseDNS no", "PrintMotd no", "LogLevel ERROR", ""]))
        if not os.path.isdir("/run/sshd"):  # sshd's privilege separation folder; removed again at the end
            os.makedirs("/run/sshd", mode=0o755)
            self.made_privsep = True
        # Each sshd runs in its own mount namespace (ip netns exec makes one), where a node gets what a real one has
        # of its own: a /tmp (Open MPI's session folders are named by host name, which all namespaces share, and
        # collide in one /tmp: "A call to mkdir was unable to create the desired directory"), and a ~/.bashrc of
        # its own (the login shell reads it under sshd; this machine's sets up pyenv, a cost of this machine's root
        # account, not of a launch): an empty one.
        rc = os.path.join(pwd.getpwuid(os.geteuid()).pw_dir, ".bashrc")
        binds_rc = [self.path("empty_bashrc"), rc] if os.path.isfile(rc) else []
        open(self.path("empty_bashrc"), "w").close()
        log = open(self.path("sshd.log"), "ab")
        for index, name in enumerate(self.nodes):
            node_tmp = self.path(f"tmp-n{index}")
            os.makedirs(node_tmp)
            os.chmod(node_tmp, 0o1777)
            binds = ["sh", "-c", 'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; '
                     'exec "$@"', "sh", node_tmp, "/tmp"] + binds_rc + ["--"]
            self.daemons.append(subprocess.Popen(
                [self.ip, "netns", "exec", name] + binds + [self.sshd, "-D", "-e", "-f", self.path("sshd_config"),
                                                            "-o", f"ListenAddress={node_address(index)}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        log.close()

    def path(self, *parts):
        return os.path.join(self.folder, *parts)

    def agent(self):
        """plm_rsh_agent: Open MPI splits it at spaces (the temporary folder has none)."""
        return (f"ssh -i {self.path('user_key')} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                "-o BatchMode=yes -o LogLevel=ERROR")

    def __exit__(self, *exc):
        for daemon in self.daemons:
            if daemon.poll() is None:
                daemon.kill()
        for daemon in self.daemons:
            daemon.wait()
        self.daemons = []
        delete_netns(self.ip, [name for name in list_netns(self.ip) if name.startswith(self.tag + "-")])
        if self.made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)
            self.made_privsep = False
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        return False


def wait_for_sshd(addresses, deadline_s=120.0):
    """Inside the launcher namespace: until every node accepts TCP on port 22."""
    deadline = time.monotonic() + deadline_s
    waiting = list(addresses)
    while waiting and time.monotonic() < deadline:
        still = []
        for address in waiting:
            try:
                with socket.create_connection((address, 22), timeout=2):
                    pass
            except OSError:
                still.append(address)
        waiting = still
        if waiting:
            time.sleep(0.5)
    if waiting:
        raise SystemExit(f"launch_fanout: {len(waiting)} sshd(s) did not listen within {deadline_s:.0f} s "
                         f"(first {waiting[0]})")



def inner_rows(argv, env=None):
    rows = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as inner:
        try:
            for line in inner.stdout:
                if line.startswith("{"):
                    rows.append(json.loads(line))
                    print(line.strip(), file=sys.stderr, flush=True)
        except BaseException:
            inner.kill()  # its launches are ended with the namespaces (ssh) or the cluster (srun)
            raise
        if inner.wait() != 0:
            raise SystemExit(f"launch_fanout: the measurement exited {inner.returncode} after {len(rows)} row(s)")
    return rows



def parse_counts(text):
    try:
        counts = [int(word) for word in text.split(",")]
    except ValueError:
        raise SystemExit(f"launch_fanout: --counts takes comma-separated integers, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"launch_fanout: --counts must be positive, not {text!r}")
    return counts



def end_on_signal(signum, _frame):
    raise SystemExit(f"launch_fanout: signal {signum}: tearing down")



# --- shared by the two benchmarks' modes ------------------------------------------------------------------------------

def ssh_mpirun_options(agent, extra=()):
    """mpirun's options in the launcher namespace: plm rsh through `agent` (SshFleet.agent), the daemons' wire-up
    and the TCP BTL on mgmt0, no binding; `extra` (more options) before the root flag."""
    return ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", "mgmt0",
            "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "mgmt0", "--bind-to", "none"] + \
        list(extra) + root_flag()


def emit_row(row, settle_s):
    """The inner process's row, one JSON line on stdout for inner_rows; then settle_s of pause (the remote
    processes of a launch end after its launcher)."""
    print(json.dumps(row), flush=True)
    time.sleep(settle_s)


def fleet_rows(script, node_count, inner_args, on_stale=None):
    """Removes the namespaces of benchmarks that are gone (on_stale(names) is told of them), builds an SshFleet of
    node_count nodes and runs `script --mode ssh-inner --agent AGENT` + inner_args(fleet) in its launcher namespace;
    the rows it printed. The fleet is torn down on any exit."""
    ip = tool("ip")
    stale = cleanup_stale(ip)
    if stale and on_stale:
        on_stale(stale)
    with SshFleet(node_count) as fleet:
        argv = [ip, "netns", "exec", fleet.launcher, sys.executable, os.path.abspath(script), "--mode", "ssh-inner",
                "--agent", fleet.agent()] + inner_args(fleet)
        return inner_rows(argv)


def allocation_rows(script, name, nodes, inner_args, **env):
    """The virtual cluster of `nodes` (tests/cluster/vcluster.py) with Slurm across it (vslurm.py), and from its
    first node `salloc -N <all> --exclusive script --mode srun-inner` + inner_args(slurm), with Slurm's environment,
    Open MPI's TCP BTL on the management network, root allowed and `env` on top; the rows it printed. A Slurm that
    cannot start ends the benchmark with its reason (prefixed by name); everything is torn down on any exit."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cluster"))
    import unittest  # noqa: E402 (vslurm says why Slurm cannot start with unittest.SkipTest)
    import vcluster  # noqa: E402
    import vslurm  # noqa: E402
    with vcluster.Cluster(list(nodes)) as cluster:
        try:
            slurm = vslurm.VirtualSlurm(cluster).start()
        except unittest.SkipTest as reason:
            raise SystemExit(f"{name}: {reason}")
        try:
            env = slurm.env(OMPI_MCA_btl="tcp,self", OMPI_MCA_btl_tcp_if_include="198.18.0.0/24",
                            OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **env)
            argv = cluster.exec_argv(nodes[0], ["salloc", "-N", str(len(nodes)), "--exclusive", sys.executable,
                                                os.path.abspath(script), "--mode", "srun-inner"] + inner_args(slurm),
                                     env=env)
            return inner_rows(argv, env=env)
        finally:
            slurm.stop()


def inner_mode(args, ssh_inner, srun_inner):
    """The command line's inner modes: ssh_inner(args) for ssh-inner, srun_inner(args) for srun-inner, their exit
    status; None for any other mode."""
    if args.mode == "ssh-inner":
        return ssh_inner(args)
    if args.mode == "srun-inner":
        return srun_inner(args)
    return None


def tear_down_on_signals():
    """SIGINT, SIGTERM and SIGHUP end the benchmark through SystemExit, so every fleet and cluster is torn down."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, end_on_signal)


def write_results(path, document):
    """The results file, written whole or not at all (a temporary file renamed over it)."""
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    os.replace(path + ".tmp", path)
