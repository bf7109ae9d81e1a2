#!/usr/bin/env python3
"""A virtual cluster on one machine for tests: N nodes (2 to 16), each a network namespace plus a
persistent UTS namespace with its own hostname, wired to three bridges in a "switch" namespace.

Address plan (198.18.0.0/15, the benchmarking range; nothing in the root namespace):

    mgmt0  198.18.0.N/24    management: host names, mpirun/orted traffic, the ssh-like agent
    eth0   198.18.10.N/24   rail 0 (its own bridge)
    eth3   198.18.13.N/24   rail 1 (its own bridge)

N is the node name's trailing number when those are unique and 1..254 (node5 -> 198.18.0.5), else
the node's position + 1. Names: instance `cclvc-<tag>`, namespaces `cclvc-<tag>-<node>` and
`cclvc-<tag>-sw`, state in /run/cclbench-vc/cclvc-<tag>/ (state.json, the agent wrapper `ssh`, the
UTS namespace files, each node's temporary folder <node>.tmp), host names in /etc/netns/<ns>/hosts
(bind-mounted by `ip netns exec`; the root /etc/hosts is never touched).

Each node has its own temporary folder, as each real host has its own /tmp: every command run on a
node gets TMPDIR=STATE_DIR/<node>.tmp. Open MPI keeps its session folders under
TMPDIR/ompi.<hostname>.<uid> and removes that folder when its last job there ends; nodes of two
clusters up at once with one name (node7) would otherwise share it, and one cluster's cleanup removed
it under the other's orted ("A call to mkdir was unable to create the desired directory").

Per link (node, rail or mgmt0): the node side MTU and the switch port MTU separately (a path MTU
mismatch: hosts 9000, ports 1500), up/down on either side, a `tbf` rate limit, and a throttle of
one pair only (`htb` + a `u32` filter on the destination address).

Teardown always: the context manager, SIGTERM/SIGINT/SIGHUP handlers, and a reaper (its own
session) that tears the instance down when the owning process dies, SIGKILL included;
`vcluster.py down --stale` removes what is left by owners that are gone.

Tools: `ip`, `tc`, `bridge`, `nsenter`, `unshare` from PATH (/usr/sbin, /sbin too), or from
CCLBENCH_VC_IP, CCLBENCH_VC_TC, CCLBENCH_VC_BRIDGE, CCLBENCH_VC_NSENTER, CCLBENCH_VC_UNSHARE;
CCLBENCH_VC_TOOL_LD_LIBRARY_PATH is given to those tools only (a carried Debian iproute2).
The node's login PATH (what the agent gives remote commands) is CCLBENCH_VC_NODE_PATH, default
Debian's; CCLBENCH_VC_NODE_LD_LIBRARY_PATH adds an LD_LIBRARY_PATH there.

CLI:
    vcluster.py up --nodes node5,node7 [--owner PID] [--prefix P]   prints the instance id
    vcluster.py status [ID]
    vcluster.py exec ID NODE [--clean-env] -- CMD...
    vcluster.py link ID NODE LINK [--mtu N] [--port-mtu N] [--up|--down] [--port-up|--port-down]
                                  [--rate R] [--no-rate]
    vcluster.py throttle ID SRC DST LINK RATE
    vcluster.py down ID | --stale | --all
"""
import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time

STATE_ROOT = os.environ.get("CCLBENCH_VC_STATE_ROOT", "/run/cclbench-vc")
NETNS_ETC = "/etc/netns"
DEFAULT_PREFIX = "cclvc"
RAILS = ("eth0", "eth3")
MGMT = "mgmt0"
DEFAULT_NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SKIP = 77
# Nodes an instance holds at most: the screen's one launch a stage is measured at 2-16 nodes (tests/scale/launch_time.py).
MAX_NODES = 16
HERE = os.path.dirname(os.path.abspath(__file__))
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class VClusterError(Exception):
    pass


class Unsupported(VClusterError):
    """This machine cannot hold a virtual cluster (the reason is the message): tests skip (77)."""


def subnet_octet(link):
    """Third octet of a link's /24: mgmt0 -> 0, ethK -> 10 + K."""
    if link == MGMT:
        return 0
    match = re.fullmatch(r"eth(\d)", link)
    if not match:
        raise VClusterError(f"unknown link {link!r} (mgmt0, eth0..eth9)")
    return 10 + int(match.group(1))


def link_address(link, number):
    return f"198.18.{subnet_octet(link)}.{number}"


# ---------------------------------------------------------------------------------------------- tools

def _find(name, env_name):
    configured = os.environ.get(env_name)
    if configured:
        return configured
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


def allocated_cpus(environ=None):
    """The CPUs CTest allocated to this test (a resource group of `cpus`, from --resource-spec-file:
    CTEST_RESOURCE_GROUP_<i>=cpus and CTEST_RESOURCE_GROUP_<i>_CPUS=id:N,slots:1), or None when it allocated none."""
    environ = os.environ if environ is None else environ
    cpus = set()
    for index in range(int(environ.get("CTEST_RESOURCE_GROUP_COUNT", "0") or 0)):
        if environ.get(f"CTEST_RESOURCE_GROUP_{index}") != "cpus":
            continue
        for allocation in environ.get(f"CTEST_RESOURCE_GROUP_{index}_CPUS", "").split(";"):
            fields = dict(item.split(":", 1) for item in allocation.split(",") if ":" in item)
            if fields.get("id", "").isdigit():
                cpus.add(int(fields["id"]))
    return cpus or None


def pin_to_allocated_cpus():
    """Runs this process, and everything it starts from now on, on the CPUs CTest allocated to it (nothing when it
    allocated none): two virtual-cluster tests side by side then never share a CPU, and neither's pairs are slowed
    by the other's work (which on the MPI backend could pass for a slow node or rail). Returns the CPUs or None."""
    cpus = allocated_cpus()
    if cpus:
        os.sched_setaffinity(0, cpus)
    return cpus


def tools_from_environment():
    return {
        "ip": _find("ip", "CCLBENCH_VC_IP"),
        "tc": _find("tc", "CCLBENCH_VC_TC"),
        "bridge": _find("bridge", "CCLBENCH_VC_BRIDGE"),
        "nsenter": _find("nsenter", "CCLBENCH_VC_NSENTER"),
        "unshare": _find("unshare", "CCLBENCH_VC_UNSHARE"),
        "umount": _find("umount", "CCLBENCH_VC_UMOUNT"),
        "tool_ld_library_path": os.environ.get("CCLBENCH_VC_TOOL_LD_LIBRARY_PATH", ""),
        "node_path": os.environ.get("CCLBENCH_VC_NODE_PATH", DEFAULT_NODE_PATH),
        "node_ld_library_path": os.environ.get("CCLBENCH_VC_NODE_LD_LIBRARY_PATH", ""),
        "python": sys.executable,
    }


def check_supported(tools=None):
    """Raises Unsupported with the reason when a cluster cannot be built here."""
    tools = tools or tools_from_environment()
    if os.geteuid() != 0:
        raise Unsupported("the virtual cluster needs root (network and UTS namespaces, bridges)")
    missing = [f"{name} ({tools.get(name)} is not executable)" if tools.get(name) else name
               for name in ("ip", "tc", "nsenter", "unshare")
               if not tools.get(name) or not os.access(tools[name], os.X_OK)]
    if missing:
        raise Unsupported(f"missing {', '.join(missing)} (iproute2, util-linux; or set CCLBENCH_VC_IP etc.)")
    if not os.path.exists("/proc/self/ns/net") or not os.path.exists("/proc/self/ns/uts"):
        raise Unsupported("this kernel has no network/UTS namespaces (/proc/self/ns)")
    probe = f"cclvc-probe{os.getpid()}"
    env = _tool_env(tools)
    result = subprocess.run([tools["ip"], "netns", "add", probe], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise Unsupported(f"`ip netns add` fails here: {(result.stderr or result.stdout).strip()}")
    try:
        result = subprocess.run([tools["ip"], "-n", probe, "link", "add", "vcprobe0", "type", "veth",
                                 "peer", "name", "vcprobe1"], capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise Unsupported(f"no veth in a namespace: {(result.stderr or result.stdout).strip()}")
        result = subprocess.run([tools["ip"], "-n", probe, "link", "add", "vcprobebr", "type", "bridge"],
                                capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise Unsupported(f"no bridge in a namespace: {(result.stderr or result.stdout).strip()}")
        # `ip netns exec` makes a mount namespace and remounts /sys: a restricted container cannot.
        result = subprocess.run([tools["ip"], "netns", "exec", probe, "true"], capture_output=True, text=True,
                                env=env)
        if result.returncode != 0:
            raise Unsupported(f"`ip netns exec` fails here: {(result.stderr or result.stdout).strip()}")
    finally:
        subprocess.run([tools["ip"], "netns", "del", probe], capture_output=True, env=env)


def _tool_env(tools):
    env = dict(os.environ)
    if tools.get("tool_ld_library_path"):
        env["LD_LIBRARY_PATH"] = tools["tool_ld_library_path"]
    return env


# --------------------------------------------------------------------------------------------- owners

def process_start_time(pid):
    """The process's start time in clock ticks (/proc/PID/stat field 22), None when it is gone; a
    pid with another start time is another process (pid reuse)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def owner_alive(owner):
    if not owner:
        return True
    started = process_start_time(owner["pid"])
    return started is not None and started == owner.get("start_time")


# -------------------------------------------------------------------------------------------- cluster

class Cluster:
    """One instance. Cluster(["node5", "node7"]).up() builds it; use it as a context manager."""

    def __init__(self, nodes, prefix=DEFAULT_PREFIX, tag=None, owner_pid=None, tools=None,
                 state_root=STATE_ROOT, reaper=True):
        if not 2 <= len(nodes) <= MAX_NODES:
            raise VClusterError(f"2 to {MAX_NODES} nodes, got {len(nodes)}")
        if len(set(nodes)) != len(nodes):
            raise VClusterError(f"duplicate node names in {','.join(nodes)}")
        for node in nodes:
            if not NAME_RE.match(node) or node == "sw":
                raise VClusterError(f"bad node name {node!r} (a lowercase letter, then letters/digits, <= 12)")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", prefix):
            raise VClusterError(f"bad prefix {prefix!r}")
        self.tools = tools or tools_from_environment()
        self.id = f"{prefix}-{tag or secrets.token_hex(3)}"
        self.state_root = state_root
        self.state_dir = os.path.join(state_root, self.id)
        self.nodes = list(nodes)
        self.numbers = self._numbers(nodes)
        self.owner = None
        if owner_pid is not None:
            self.owner = {"pid": owner_pid, "start_time": process_start_time(owner_pid)}
        self.use_reaper = reaper
        self._old_handlers = {}
        self._live = False
        self._reaper = None
        self.blocked_ports = set()  # (node, link) whose switch port set_port_forwarding stopped

    @staticmethod
    def _numbers(nodes):
        trailing = [re.search(r"(\d+)$", node) for node in nodes]
        numbers = [int(match.group(1)) if match else None for match in trailing]
        if all(n is not None and 1 <= n <= 254 for n in numbers) and len(set(numbers)) == len(numbers):
            return dict(zip(nodes, numbers))
        return {node: index + 1 for index, node in enumerate(nodes)}

    # names -----------------------------------------------------------------------------------------
    def ns(self, node):
        return f"{self.id}-{node}"

    @property
    def switch_ns(self):
        return f"{self.id}-sw"

    def uts_file(self, node):
        return os.path.join(self.state_dir, f"{node}.uts")

    def tmp_dir(self, node):
        """The node's own temporary folder (its TMPDIR; see the module's notes)."""
        return os.path.join(self.state_dir, f"{node}.tmp")

    def port(self, node, link):
        """The switch-side end of a node's link (<= 15 characters)."""
        return f"p{self.nodes.index(node)}-{link}"

    def address(self, node, link=MGMT):
        return link_address(link, self.numbers[node])

    @property
    def agent(self):
        """An ssh-like agent for mpirun --mca plm_rsh_agent (a wrapper fixing this instance)."""
        return os.path.join(self.state_dir, "ssh")

    @property
    def links(self):
        return (MGMT,) + RAILS

    # running tools ---------------------------------------------------------------------------------
    def _run(self, argv, check=True):
        result = subprocess.run(argv, capture_output=True, text=True, env=_tool_env(self.tools))
        if check and result.returncode != 0:
            raise VClusterError(f"{' '.join(argv)}: {(result.stderr or result.stdout).strip()}")
        return result

    def ip(self, *args, check=True):
        return self._run([self.tools["ip"]] + list(args), check=check)

    def tc(self, *args, check=True):
        return self._run([self.tools["tc"]] + list(args), check=check)

    def enter_argv(self, node):
        """argv prefix that runs a command on the node: its UTS namespace (hostname), then `ip netns
        exec` (network namespace, its own /sys, /etc/netns/<ns>/hosts)."""
        # The tools' libraries reach `ip` only (not nsenter): a carried lib folder may hold a libc
        # that the image's own programs must not load.
        libs = self.tools.get("tool_ld_library_path")
        return ([self.tools["nsenter"], f"--uts={self.uts_file(node)}", "--"] +
                (["env", f"LD_LIBRARY_PATH={libs}"] if libs else []) +
                [self.tools["ip"], "netns", "exec", self.ns(node)])

    def exec_argv(self, node, argv, clean_env=False, env=None):
        """argv running `argv` on the node; env: the environment it will be started with."""
        prefix = self.enter_argv(node)
        if clean_env:
            return prefix + ["env", "-i"] + node_login_env(self.tools, self.tmp_dir(node)) + list(argv)
        restore = ["env", f"TMPDIR={self.tmp_dir(node)}"]
        original = (os.environ if env is None else env).get("LD_LIBRARY_PATH")
        if self.tools.get("tool_ld_library_path"):
            restore += [f"LD_LIBRARY_PATH={original}"] if original else ["-u", "LD_LIBRARY_PATH"]
        return prefix + restore + list(argv)

    def exec(self, node, argv, env=None, clean_env=False, **kwargs):
        """subprocess.run of argv on the node; env: the caller's environment (default os.environ)."""
        full_env = dict(os.environ if env is None else env)
        return subprocess.run(self.exec_argv(node, argv, clean_env, full_env), env=full_env, **kwargs)

    def popen(self, node, argv, env=None, **kwargs):
        full_env = dict(os.environ if env is None else env)
        return subprocess.Popen(self.exec_argv(node, argv, False, full_env), env=full_env, **kwargs)

    # up / down -------------------------------------------------------------------------------------
    def up(self):
        check_supported(self.tools)
        os.makedirs(self.state_root, exist_ok=True)
        os.makedirs(self.state_dir)
        self._live = True
        self._write_state()  # first, so that a crash below still leaves something `down` can find
        try:
            if self.use_reaper:
                self._start_reaper()
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self):
        sw = self.switch_ns
        self.ip("netns", "add", sw)
        self.ip("-n", sw, "link", "set", "lo", "up")
        for link in self.links:
            bridge = f"br-{link}"
            self.ip("-n", sw, "link", "add", bridge, "type", "bridge")
            self.ip("-n", sw, "link", "set", bridge, "up")
        hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" + "".join(
            f"{self.address(node)}\t{node}\n" for node in self.nodes)
        for node in self.nodes:
            ns = self.ns(node)
            self.ip("netns", "add", ns)
            etc = os.path.join(NETNS_ETC, ns)
            os.makedirs(etc, exist_ok=True)
            write_file(os.path.join(etc, "hosts"), hosts)
            write_file(os.path.join(etc, "resolv.conf"), "# vcluster: no DNS; names are in /etc/hosts\n")
            self.ip("-n", ns, "link", "set", "lo", "up")
            for link in self.links:
                port = self.port(node, link)
                self.ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", link, "netns", ns)
                self.ip("-n", sw, "link", "set", port, "master", f"br-{link}")
                self.ip("-n", sw, "link", "set", port, "up")
                self.ip("-n", ns, "addr", "add", f"{self.address(node, link)}/24", "dev", link)
                self.ip("-n", ns, "link", "set", link, "up")
            os.makedirs(self.tmp_dir(node), exist_ok=True)
            os.chmod(self.tmp_dir(node), 0o1777)  # as /tmp: any user's processes on the node write there
            uts = self.uts_file(node)
            write_file(uts, "")
            # Python sets the name: a minimal image may have no hostname(1).
            result = subprocess.run([self.tools["unshare"], f"--uts={uts}", self.tools["python"], "-c",
                                     "import socket, sys; socket.sethostname(sys.argv[1])", node],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise Unsupported(f"no persistent UTS namespace (unshare --uts): {result.stderr.strip()}")
        write_file(self.agent, "#!/bin/sh\n# ssh-like agent of virtual cluster %s\nexec %s %s --cluster %s \"$@\"\n"
                   % (self.id, self.tools["python"], os.path.join(HERE, "vc-ssh"), self.state_dir), mode=0o755)

    def _write_state(self):
        state = {"id": self.id, "nodes": self.nodes, "numbers": self.numbers, "owner": self.owner,
                 "tools": self.tools, "switch_ns": self.switch_ns,
                 "namespaces": [self.ns(node) for node in self.nodes] + [self.switch_ns],
                 "created": time.time()}
        write_file(os.path.join(self.state_dir, "state.json"), json.dumps(state, indent=1) + "\n")

    def _start_reaper(self):
        owner = self.owner or {"pid": os.getpid(), "start_time": process_start_time(os.getpid())}
        if not self.owner:
            self.owner = owner
            self._write_state()
        self._reaper = subprocess.Popen([self.tools["python"], os.path.abspath(__file__), "_reap", self.state_dir],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, close_fds=True)

    def down(self):
        teardown(self.state_dir, self.tools)
        self._live = False
        if self._reaper is not None:  # it sees the state folder gone within its poll interval
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._reaper.wait(timeout=5)
            self._reaper = None

    def __enter__(self):
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self._old_handlers[signum] = signal.signal(signum, _exit_on_signal)
            except ValueError:  # not the main thread: the reaper still covers us
                pass
        if not self._live:
            self.up()
        return self

    def __exit__(self, *exc):
        try:
            self.down()
        finally:
            for signum, handler in self._old_handlers.items():
                signal.signal(signum, handler)
            self._old_handlers.clear()
        return False

    # knobs -----------------------------------------------------------------------------------------
    def set_link(self, node, link, mtu=None, port_mtu=None, up=None, port_up=None):
        """mtu: the node's interface; port_mtu: the switch port (bridge side); up/port_up: state."""
        if mtu is not None:
            self.ip("-n", self.ns(node), "link", "set", link, "mtu", str(mtu))
        if port_mtu is not None:
            self.ip("-n", self.switch_ns, "link", "set", self.port(node, link), "mtu", str(port_mtu))
        if up is not None:
            self.ip("-n", self.ns(node), "link", "set", link, "up" if up else "down")
            if up:  # the address's route comes back with the link
                self.ip("-n", self.ns(node), "addr", "replace", f"{self.address(node, link)}/24", "dev", link)
        if port_up is not None:
            self.ip("-n", self.switch_ns, "link", "set", self.port(node, link), "up" if port_up else "down")

    def set_port_forwarding(self, node, link, forwarding):
        """The switch port of a node's link stops forwarding (bridge port state disabled) or forwards again: frames
        to and from the node are dropped at the switch while both ends keep their carrier, as a switch port or cable
        fault that the node's own link state does not show. Needs `bridge` (iproute2)."""
        if not self.tools.get("bridge"):
            raise VClusterError("`bridge` (iproute2) is needed to stop a switch port forwarding")
        self._run([self.tools["bridge"], "-n", self.switch_ns, "link", "set", "dev", self.port(node, link),
                   "state", "3" if forwarding else "0"])
        if forwarding:
            self.blocked_ports.discard((node, link))
        else:
            self.blocked_ports.add((node, link))

    def set_rate(self, node, link, rate, side="both"):
        """A tbf rate limit (e.g. '100mbit') on the node's egress and/or the port toward the node;
        rate None removes it."""
        targets = []
        if side in ("node", "both"):
            targets.append(("-n", self.ns(node), link))
        if side in ("switch", "both"):
            targets.append(("-n", self.switch_ns, self.port(node, link)))
        for flag, ns, dev in targets:
            self.tc(flag, ns, "qdisc", "del", "dev", dev, "root", check=False)
            if rate:
                self.tc(flag, ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                        "burst", "64kb", "latency", "100ms")

    def throttle_pair(self, src, dst, link, rate, both_directions=True):
        """An htb class at `rate` for traffic from src to dst's address on `link` only (u32 on the
        destination); other traffic is not shaped (htb's default class does not exist)."""
        pairs = [(src, dst)] + ([(dst, src)] if both_directions else [])
        for a, b in pairs:
            ns = self.ns(a)
            if self.tc("-n", ns, "qdisc", "show", "dev", link).stdout.find("htb 1:") < 0:
                self.tc("-n", ns, "qdisc", "del", "dev", link, "root", check=False)
                self.tc("-n", ns, "qdisc", "add", "dev", link, "root", "handle", "1:", "htb", "default", "ffff")
            classid = f"1:{self.numbers[b]:x}"
            self.tc("-n", ns, "class", "replace", "dev", link, "parent", "1:", "classid", classid,
                    "htb", "rate", rate, "ceil", rate)
            self.tc("-n", ns, "filter", "add", "dev", link, "parent", "1:", "protocol", "ip", "prio", "1",
                    "u32", "match", "ip", "dst", f"{self.address(b, link)}/32", "flowid", classid)

    def clear_shaping(self, node, link):
        self.tc("-n", self.ns(node), "qdisc", "del", "dev", link, "root", check=False)
        self.tc("-n", self.switch_ns, "qdisc", "del", "dev", self.port(node, link), "root", check=False)

    # observation -----------------------------------------------------------------------------------
    def counters(self, node, link):
        """{'rx_bytes', 'tx_bytes'} of the node's interface, read inside the node (its /sys)."""
        out = self.exec(node, ["cat", f"/sys/class/net/{link}/statistics/rx_bytes",
                               f"/sys/class/net/{link}/statistics/tx_bytes"],
                        capture_output=True, text=True, check=True).stdout.split()
        return {"rx_bytes": int(out[0]), "tx_bytes": int(out[1])}

    def status(self):
        return instance_status(self.state_dir)


def _exit_on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def node_login_env(tools, tmp_dir):
    """The environment sshd would give a root login on the node (env -i NAME=VALUE words), with the
    node's own temporary folder as TMPDIR."""
    import pwd
    entry = pwd.getpwuid(os.getuid())
    env = [f"PATH={tools.get('node_path') or DEFAULT_NODE_PATH}", f"HOME={entry.pw_dir}",
           f"USER={entry.pw_name}", f"LOGNAME={entry.pw_name}", "LANG=C.UTF-8", "SHELL=/bin/sh",
           f"TMPDIR={tmp_dir}"]
    if tools.get("node_ld_library_path"):
        env.append(f"LD_LIBRARY_PATH={tools['node_ld_library_path']}")
    return env


def write_file(path, text, mode=0o644):
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as handle:
        handle.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


# ------------------------------------------------------------------------------------ state, teardown

def load_state(state_dir):
    try:
        with open(os.path.join(state_dir, "state.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def list_netns(tools):
    result = subprocess.run([tools["ip"], "netns", "list"], capture_output=True, text=True, env=_tool_env(tools))
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def teardown(state_dir, tools=None):
    """Removes everything of one instance: processes left in its namespaces, the namespaces (their
    veths and bridges go with them), the UTS files, /etc/netns/<ns>, the state folder."""
    state = load_state(state_dir) or {}
    tools = tools or state.get("tools") or tools_from_environment()
    instance = os.path.basename(state_dir.rstrip("/"))
    names = set(state.get("namespaces") or [])
    names.update(name for name in list_netns(tools) if name.startswith(instance + "-"))
    env = _tool_env(tools)
    for ns in sorted(names):
        pids = subprocess.run([tools["ip"], "netns", "pids", ns], capture_output=True, text=True, env=env).stdout
        for pid in pids.split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    for ns in sorted(names):
        subprocess.run([tools["ip"], "netns", "del", ns], capture_output=True, env=env)
        shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
    if os.path.isdir(state_dir):
        for name in os.listdir(state_dir):
            if name.endswith(".uts"):
                subprocess.run([tools.get("umount") or "umount", "-l", os.path.join(state_dir, name)],
                               capture_output=True)
        shutil.rmtree(state_dir, ignore_errors=True)


def instances(state_root=STATE_ROOT):
    try:
        return sorted(os.path.join(state_root, name) for name in os.listdir(state_root))
    except OSError:
        return []


def instance_status(state_dir):
    state = load_state(state_dir)
    if state is None:
        return {"id": os.path.basename(state_dir), "state": "broken (no state.json)"}
    tools = state.get("tools") or tools_from_environment()
    present = set(list_netns(tools))
    missing = [ns for ns in state["namespaces"] if ns not in present]
    alive = owner_alive(state.get("owner"))
    return {"id": state["id"], "nodes": state["nodes"], "owner": state.get("owner"), "owner_alive": alive,
            "missing_namespaces": missing, "agent": os.path.join(state_dir, "ssh"),
            "state": "up" if not missing and alive else ("stale" if not alive else "incomplete")}


def down_stale(state_root=STATE_ROOT, prefix=DEFAULT_PREFIX):
    """Removes instances whose owner is gone (or whose state is unreadable) and namespaces or
    /etc/netns folders of this prefix that belong to no instance. Returns what was removed."""
    removed = []
    tools = tools_from_environment()
    for state_dir in instances(state_root):
        state = load_state(state_dir)
        if state is None and _age_s(state_dir) < 60:
            continue  # an `up` in progress writes its state.json first thing
        if state is None or not owner_alive(state.get("owner")):
            teardown(state_dir)
            removed.append(os.path.basename(state_dir))
    known = {os.path.basename(path) for path in instances(state_root)}
    pattern = re.compile(rf"^({re.escape(prefix)}-[0-9a-z]+)-[a-z0-9]+$")
    orphans = {}
    for ns in list_netns(tools) + (os.listdir(NETNS_ETC) if os.path.isdir(NETNS_ETC) else []):
        match = pattern.match(ns)
        if match and match.group(1) not in known:
            orphans.setdefault(match.group(1), set()).add(ns)
    for instance in sorted(orphans):
        teardown(os.path.join(state_root, instance), tools)
        removed.append(instance)
    return removed


def _age_s(path):
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0


def reap(state_dir):
    """The reaper: waits for the owner to die (polling, no signals needed), then tears down; ends
    on its own when the instance is gone."""
    state = load_state(state_dir)
    if not state or not state.get("owner"):
        return
    while os.path.isdir(state_dir):
        if not owner_alive(state["owner"]):
            teardown(state_dir, state.get("tools"))
            return
        time.sleep(0.3)


# ------------------------------------------------------------------------------------------------ CLI

def attach(instance_id, state_root=STATE_ROOT):
    """A Cluster object for an existing instance (no reaper, no signal handlers)."""
    state_dir = instance_id if os.path.isabs(instance_id) else os.path.join(state_root, instance_id)
    state = load_state(state_dir)
    if state is None:
        raise VClusterError(f"no virtual cluster {instance_id} (no {state_dir}/state.json)")
    prefix, tag = state["id"].split("-", 1)
    cluster = Cluster(state["nodes"], prefix=prefix, tag=tag, tools=state["tools"],
                      state_root=os.path.dirname(state_dir), reaper=False)
    cluster.owner = state.get("owner")
    cluster._live = True
    return cluster


def parse_nodes(text):
    """'node5,node7' or 'node1..node8'."""
    nodes = []
    for part in text.split(","):
        match = re.fullmatch(r"([a-z]+)(\d+)\.\.([a-z]+)?(\d+)", part)
        if match:
            nodes += [f"{match.group(1)}{n}" for n in range(int(match.group(2)), int(match.group(4)) + 1)]
        elif part:
            nodes.append(part)
    return nodes


def main(argv=None):
    parser = argparse.ArgumentParser(prog="vcluster.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up")
    up.add_argument("--nodes", required=True)
    up.add_argument("--prefix", default=DEFAULT_PREFIX)
    up.add_argument("--owner", type=int, help="tear down when this process ends (default: lives until `down`)")
    st = sub.add_parser("status")
    st.add_argument("id", nargs="?")
    ex = sub.add_parser("exec")
    ex.add_argument("id")
    ex.add_argument("node")
    ex.add_argument("--clean-env", action="store_true", help="the node's login environment, as the agent gives")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    ln = sub.add_parser("link")
    ln.add_argument("id")
    ln.add_argument("node")
    ln.add_argument("link")
    ln.add_argument("--mtu", type=int)
    ln.add_argument("--port-mtu", type=int)
    ln.add_argument("--up", dest="up", action="store_true", default=None)
    ln.add_argument("--down", dest="up", action="store_false")
    ln.add_argument("--port-up", dest="port_up", action="store_true", default=None)
    ln.add_argument("--port-down", dest="port_up", action="store_false")
    ln.add_argument("--rate")
    ln.add_argument("--no-rate", action="store_true")
    th = sub.add_parser("throttle")
    for name in ("id", "src", "dst", "link", "rate"):
        th.add_argument(name)
    dn = sub.add_parser("down")
    dn.add_argument("id", nargs="?")
    dn.add_argument("--stale", action="store_true")
    dn.add_argument("--all", action="store_true")
    rp = sub.add_parser("_reap")
    rp.add_argument("state_dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            cluster = Cluster(parse_nodes(args.nodes), prefix=args.prefix, owner_pid=args.owner,
                              reaper=args.owner is not None)
            cluster.up()
            print(cluster.id)
            print(f"agent: {cluster.agent}", file=sys.stderr)
        elif args.command == "status":
            dirs = [attach(args.id).state_dir] if args.id else instances()
            for state_dir in dirs:
                print(json.dumps(instance_status(state_dir)))
        elif args.command == "exec":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            if not cmd:
                raise VClusterError("exec: no command")
            return attach(args.id).exec(args.node, cmd, clean_env=args.clean_env).returncode
        elif args.command == "link":
            cluster = attach(args.id)
            cluster.set_link(args.node, args.link, mtu=args.mtu, port_mtu=args.port_mtu, up=args.up,
                             port_up=args.port_up)
            if args.rate or args.no_rate:
                cluster.set_rate(args.node, args.link, None if args.no_rate else args.rate)
        elif args.command == "throttle":
            attach(args.id).throttle_pair(args.src, args.dst, args.link, args.rate)
        elif args.command == "down":
            if args.stale:
                for name in down_stale():
                    print(f"removed {name}")
            elif args.all:
                for state_dir in instances():
                    teardown(state_dir)
                    print(f"removed {os.path.basename(state_dir)}")
            elif args.id:
                teardown(attach(args.id).state_dir)
            else:
                raise VClusterError("down: give an instance id, --stale or --all")
        elif args.command == "_reap":
            reap(args.state_dir)
    except Unsupported as error:
        print(f"vcluster: skipped: {error}", file=sys.stderr)
        return SKIP
    except VClusterError as error:
        print(f"vcluster: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
