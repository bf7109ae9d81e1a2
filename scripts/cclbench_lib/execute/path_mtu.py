"""The doctor's path MTU probe: don't-fragment ICMP echoes of a rail's MTU to a peer's address on that
rail, from inside the host (`cclbench doctor --probe-path-mtu NETDEV:ADDRESS:SIZE`, launched on each host
as the per-host doctor is), and the cluster step that launches it after the hosts' documents are in.

The socket: a raw ICMP socket as root, else an unprivileged ICMP datagram socket (where
net.ipv4.ping_group_range allows it); IP_MTU_DISCOVER=IP_PMTUDISC_DO (the kernel never fragments and
refuses a datagram above the route's MTU); SO_BINDTODEVICE to the rail (root), so the echo leaves by
that interface. A size that gets no reply within the timeout is retried once; on failure the largest
size that gets through is found by bisection between 576 bytes and the MTU. The verdict is
model/doctor_paths.check_path_mtu.
"""

import errno
import fcntl
import ipaddress
import itertools
import json
import os
import re
import select
import socket
import struct
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from ..base.errors import UsageError
from ..model.doctor_paths import PATH_MTU_MIN, check_path_mtu, path_mtu_targets
from ..model.launcher import command, launcher_of
from .launch_tmpdir import own_tmpdir

JSON_LINE_PREFIX = "CCLBENCH_PATHMTU_JSON "
IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2
SO_BINDTODEVICE = 25
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891b
ICMP_ECHO, ICMP_ECHO_REPLY = 8, 0
IP_HEADER, ICMP_HEADER = 20, 8
REPLY_TIMEOUT_S = 0.5
# A probe rank's probes at once, each on a socket of its own: a path that fails costs its bisection (4-5 s: the
# sizes above its MTU wait out their replies), so one after the other a node whose port is at 1500 took 33.7 s to
# probe its 7 peers on the 8-node virtual cluster, and would wait out the probe launch's bound at a fleet's size.
PROBES_AT_ONCE = 16
_IDENTS = itertools.count()
# Probe launches at once (one per host; each is an ssh or mpirun child that mostly waits on echo replies).
MAX_CONCURRENT_PROBES = 32
NETDEV_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


# --- this host's interface addresses (live only) -------------------------------------------------

def interface_addresses(sysfs_root="/sys"):
    """{netdev: (IPv4 address, prefix length)} of every non-loopback interface with an IPv4 address."""
    found = {}
    try:
        names = sorted(os.listdir(os.path.join(sysfs_root, "class", "net")))
    except OSError:
        return found
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for name in names:
            if name == "lo" or len(name) > 15:
                continue
            request = struct.pack("256s", name.encode())
            try:
                address = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, request)[20:24])
            except OSError:
                continue  # no IPv4 address
            found[name] = (address, ipaddress.ip_network(f"0.0.0.0/{mask}").prefixlen)
    return found


# --- the probe ------------------------------------------------------------------------------------

def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


def echo_request(ident, sequence, size):
    """An ICMP echo request whose IP datagram is `size` bytes."""
    payload = bytes(size - IP_HEADER - ICMP_HEADER)
    header = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, sequence)
    return struct.pack("!BBHHH", ICMP_ECHO, 0, _checksum(header + payload), ident, sequence) + payload


class EchoSocket:
    """One rail's don't-fragment ICMP echo socket: raw (root) or datagram (ping_group_range)."""

    def __init__(self, netdev):
        self.netdev = netdev
        # Each socket an identifier of its own: a raw socket sees every echo reply to the host, and the probes of
        # one rank run at once (run_probes).
        self.ident = (os.getpid() + next(_IDENTS)) & 0xffff
        self.sequence = 0
        try:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            self.method = "raw ICMP"
        except PermissionError:
            # Raises PermissionError in turn where ping_group_range leaves this group out.
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
            self.method = "ICMP datagram"
        self.sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, netdev.encode())
            self.method += f", bound to {netdev}"
        except OSError:
            self.method += f", routed (cannot bind to {netdev} without root)"

    def close(self):
        self.sock.close()

    def echo(self, address, size, timeout=REPLY_TIMEOUT_S):
        """True: a reply came; False: none within the timeout; 'emsgsize': the kernel refused the size."""
        self.sequence = (self.sequence + 1) & 0xffff
        try:
            self.sock.sendto(echo_request(self.ident, self.sequence, size), (address, 0))
        except OSError as error:
            if error.errno == errno.EMSGSIZE:
                return "emsgsize"
            if error.errno == errno.ENOBUFS:
                # The datagram socket reports a drop on the way out (a veth whose bridge port has a smaller
                # MTU drops it there; a raw socket hides that): not through, like a missing reply.
                return False
            raise
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return False
            data, source = self.sock.recvfrom(65535)
            if source[0] != address:
                continue
            if self.method.startswith("raw"):
                data = data[(data[0] & 0x0f) * 4:]
            if len(data) < ICMP_HEADER:
                continue
            kind, _, _, ident, sequence = struct.unpack("!BBHHH", data[:ICMP_HEADER])
            # The datagram socket's kernel rewrites the identifier: match the sequence only there.
            if kind == ICMP_ECHO_REPLY and sequence == self.sequence and \
                    (ident == self.ident or not self.method.startswith("raw")):
                return True


def _gets_through(sock, address, size, tries=2):
    for _ in range(tries):
        answer = sock.echo(address, size)
        if answer is True:
            return True
        if answer == "emsgsize":
            return False
    return False


def probe_one(netdev, address, size):
    """{"netdev", "address", "size", "ok", "largest", "method", "reason"}; ok None: could not probe."""
    found = {"netdev": netdev, "address": address, "size": size, "ok": None, "largest": None, "method": None,
             "reason": None}
    try:
        sock = EchoSocket(netdev)
    except OSError as error:
        found["reason"] = (f"no ICMP socket ({error.strerror}): run as root, or allow this group in "
                           "net.ipv4.ping_group_range")
        return found
    found["method"] = sock.method
    try:
        if _gets_through(sock, address, size):
            found.update(ok=True, largest=size)
            return found
        found["ok"] = False
        if not _gets_through(sock, address, PATH_MTU_MIN):
            found["reason"] = f"no reply at {size} nor at {PATH_MTU_MIN} bytes"
            return found
        low, high = PATH_MTU_MIN, size  # low gets through, high does not
        while high - low > 1:
            middle = (low + high) // 2
            if _gets_through(sock, address, middle, tries=1):
                low = middle
            else:
                high = middle
        found["largest"] = low
        return found
    except OSError as error:
        found.update(ok=None, reason=f"probe failed: {error.strerror or error}")
        return found
    finally:
        sock.close()


def parse_probe_spec(text):
    """'NETDEV:ADDRESS:SIZE' -> (netdev, address, size); UsageError on anything else."""
    parts = text.split(":")
    if len(parts) != 3 or not NETDEV_RE.match(parts[0]) or not parts[2].isdigit():
        raise UsageError(f"--probe-path-mtu: '{text[:80]}' is not NETDEV:IPV4:SIZE")
    try:
        address = str(ipaddress.IPv4Address(parts[1]))
    except ValueError:
        raise UsageError(f"--probe-path-mtu: '{parts[1][:40]}' is not an IPv4 address") from None
    size = int(parts[2])
    if not PATH_MTU_MIN <= size <= 65535:
        raise UsageError(f"--probe-path-mtu: size {size} is not within {PATH_MTU_MIN}..65535")
    return parts[0], address, size


def run_probes(specs):
    """The probe rank's work: one JSON line with every probe's result, in the specs' order (PROBES_AT_ONCE at a
    time)."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(specs), PROBES_AT_ONCE))) as pool:
        found = list(pool.map(lambda spec: probe_one(*spec), specs))
    return JSON_LINE_PREFIX + json.dumps(found, separators=(",", ":"))


# --- the cluster step -----------------------------------------------------------------------------

def host_rails(document, host):
    """A host document's "rails" entry for `host` (None when it has none: made before the path check)."""
    rails = document.get("rails") if isinstance(document, dict) else None
    return rails.get(host) if isinstance(rails, dict) else None


def probe_argv(script, targets):
    argv = [script, "doctor", "--emit-json-line"]
    for target in targets:
        argv += ["--probe-path-mtu", f"{target['netdev']}:{target['address']}:{target['mtu']}"]
    return argv


def _probe_one_host(argv, timeout, launcher_name="mpirun"):
    """(probe results or a reason string, the launch's output for the log). The probes of the hosts run at once:
    each mpirun gets a TMPDIR of its own (execute/launch_tmpdir.py)."""
    try:
        with own_tmpdir(None, launcher_name) as env:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                                 stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        return f"the probe launch did not end within {timeout}s", ""
    except OSError as error:
        return f"cannot start {argv[0]}: {error.strerror}", ""
    found = None
    for line in out.stdout.splitlines():
        if line.startswith(JSON_LINE_PREFIX):
            try:
                found = json.loads(line[len(JSON_LINE_PREFIX):])
            except ValueError:
                pass
    if not isinstance(found, list):
        tail = (out.stderr or out.stdout or "").strip().splitlines()[:2] or ["no output"]
        found = f"exit {out.returncode}: {' / '.join(line[:160] for line in tail)}"
    return found, out.stdout + out.stderr


def probed_targets(targets, peers=None):
    """path_mtu_targets' targets, each host's kept to its peers in `peers` ({host: [peer]}; a host not in it probes
    nobody); peers None: every target. The run's own path checks probe each host's partner and a reference, not
    every pair: a failed launch of many pairs costs its hosts' number of probes, not its square."""
    if peers is None:
        return targets
    return {host: [target for target in wanted if target["peer"] in peers.get(host, ())]
            for host, wanted in targets.items()}


def probe_hosts(inputs, documents, script, timeout=120, log=None, peers=None):
    """The second step of a multi-host doctor: from each host's "rails" entry, one probe launch per host
    (that host's launcher rank probes every peer on every rail), and the path_mtu results. The hosts probe at
    the same time (a failing path costs its bisection, some seconds, on each host that probes it). peers: {host:
    the peers it probes} where not every peer (probed_targets)."""
    rails = {host: host_rails(document, host) for host, document in documents.items()}
    targets, checks = path_mtu_targets(rails)
    targets = probed_targets(targets, peers)
    launches = {}
    for host, wanted in targets.items():
        wanted = [target for target in wanted if isinstance(target.get("mtu"), int) and target["mtu"] >= PATH_MTU_MIN]
        targets[host] = wanted
        if wanted:
            launches[host] = command(inputs, 1, host) + probe_argv(script, wanted)
    probes = {}
    if launches:
        with ThreadPoolExecutor(max_workers=min(len(launches), MAX_CONCURRENT_PROBES)) as pool:
            name = launcher_of(inputs)["name"]
            running = {host: pool.submit(_probe_one_host, argv, timeout, name) for host, argv in launches.items()}
            for host, argv in launches.items():
                probes[host], output = running[host].result()
                if log:
                    log("$ " + " ".join(argv))
                    log(output)
    return checks + check_path_mtu(targets, probes)
