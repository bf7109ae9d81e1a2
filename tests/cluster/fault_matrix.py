#!/usr/bin/env python3
"""The fault matrix: every fault class cclbench claims to name, injected on the virtual cluster (vcluster.py) at
any fleet size, node and rail, with the verdict and codes a correct cclbench must give, checked against what it
says.

A cell is data: fleet size x tool (baseline or screen) x fault spec x expectation. The cells file:

    {"defaults": {"screen": [ARGS...], "baseline": [ARGS...]},    per tool, before the cell's own "args"
     "cells": [{"id": "screen.n4.slow_node", "nodes": 4, "tool": "screen",
                "fault": {"fault": "slow_node", "node": "node3", "rate": "2mbit"},
                "args": [...], "limit_s": 240, "expected_s": 35,
                "expect": {...}}]}

"backend": "nccl_shaped" (a cell's own, else the run's --backend): the NCCL plan of a one-GPU host without an RDMA
port (a socket-only cluster, the rails by --netdevs) on hosts without a GPU: topo_map and p2p_matrix the scripts tests'
doubles (FAKE_GPUS=1 FAKE_RDMA=0), coll_perf the real one on the MPI backend under the NCCL plan's arguments (its MPI
traffic where --mpirun-args sends it, as coll_perf's own bootstrap and result exchange go under NCCL).

"defaults": false: the tool's defaults are left out, the cell's args are all its arguments (e.g. a baseline at the
tool's own default sizes). Every baseline cell's progress lines are stamped as they come (CELL/eta.json) and the row
carries the ETA they printed against the real end (eta_after_sanity, eta_lines.py).

expected_s: what the cell took measured alone, for a cell newer than the committed results (the CTest parts are
dealt by expected times: a new cell counted at its limit_s would unbalance them).

Faults (FAULTS below; any node of the fleet, any rail, any rate):

    none                                               a healthy control
    dead_rail           node, rail                     the node's interface down
    slow_rail           node, rail, rate               tbf at `rate` on that rail of that node (both directions)
    slow_node           node, rate                     tbf at `rate` on every rail of that node
    slow_link           a, b, rate                     htb at `rate` between a and b only, on every rail
    env_differs         node, var, value (null: unset) the node's ranks start with another environment
                                                       (a --bin-dir wrapper in front of coll_perf)
    path_mtu            node ("all": every node), rail, host_mtu (9000), port_mtu (1500)
                                                       every node's rail at host_mtu, the node's switch port
                                                       at port_mtu: large frames to/from it are dropped
    transport_fallback  node                           the node's ranks start with NCCL_IB_DISABLE=1 and the run
                                                       expects inter=NET/IB (NCCL only; the MPI backend has no
                                                       NCCL transport: a note cell)
    killed_rank         node, after_s (0.1), from      the node's coll_perf gets SIGKILL after_s after its start,
    hung_rank           node, after_s (0.1), from      or SIGSTOP, in every launch that spans hosts (the wrapper
                                                       execs coll_perf and a detached timer signals that pid;
                                                       a 2-rank MPI point here measures in ~0.3 s: 0.1 lands in
                                                       start-up or the first cases). from "rail": after_s counts
                                                       from the node's first TCP connection over a rail (the
                                                       ranks measuring), so that the fault lands in the
                                                       measurement however loaded the machine is
    hung_case           node, case                     the node's rank sleeps in that case (a case_id, e.g. the
                                                       largest size's all_reduce.float.sum.out.64M) in every launch
                                                       that spans hosts (CCLBENCH_TEST_STALL; coll_perf says when it
                                                       fires, in run.log)
    frozen_launch       node, after_s (0.1)            every coll_perf of a launch confined to the node gets SIGSTOP
                                                       after_s after its start: no process of the launch is left to
                                                       watch it (on the GPU machine: a one-rank launch)
    frozen_node         node, after_s (1.0)            after_s after the node's first coll_perf of a launch that spans
                                                       hosts started, every process in the node's namespace (its
                                                       launcher daemon, its ranks) gets SIGSTOP; SIGCONT once the tool
                                                       has ended (the node comes back), then its leftovers must exit
    paths_die           node, at, rails (all)          when the launch whose point is `at` starts (a coll_perf with
                                                       --point AT in the fleet), the node's switch ports on those
                                                       rails stop forwarding (bridge port state disabled; the node's
                                                       carrier stays up), for the rest of the cell: a path that dies
                                                       mid-run. The row's fault_to_end_s: from the fault to the tool's
                                                       end
    connect_hang        node, at, rails (all)          paths_die at another moment: not as the launch `at` starts but
                                                       once every rank of it has started (the launch's world of
                                                       coll_perf --point AT processes, mpirun's daemons having reached
                                                       every host over mgmt0: the bootstrap is done, MPI's wire-up
                                                       over mgmt0 still works) and while none of them has a TCP
                                                       connection over a rail (Open MPI's TCP transport connects on
                                                       first use): a path that dies between the bootstrap and its
                                                       connect, the launch hangs connecting. A rank already
                                                       connected over a rail when they had all started: not fired
                                                       (the cell is "not injected", with why)

Expectation keys (all optional; every one given must hold):

    exit         the tool's exit code (int or list)       result   screen.json result / verdict.json overall
    not_result   a result it must not be (never a bare PASS on a fault)
    codes        every one must be among the observed codes (fail, warn and note reasons alike)
    codes_any    at least one of them
    absent_codes none of them may be observed (a slow but working rail is measured: no launch.timeout)
    find         [{"code": C, "node": N, "rail": R, "link": "a-b", "about": REGEX}]: a reason with that code about
                 that subject (about: a regex over the reason's subject and words)
    bad_nodes / bad_links / bad_rails   the exact set of bad nodes ("node3"), links ("node2-node6"), rails
                 ("node3:eth3") in screen.json
    within_s     the tool ended within this many seconds   says   regexes the tool's own words must match
                 (stdout, stderr, report.md / screen.md)
    fault_to_end_within_s   paths_die, connect_hang: the tool ended (its verdict written) within this many seconds of the fault
    eta_within   the ETA of every progress line from sanity on (from a failed launch's line on, where one failed),
                 against the time really left, within this share of it (lines with eta_lines.SHORT_S or more left;
                 where every judged line had less, none is judged by it)
    note         the cell's note: what cannot be judged at this size or backend (the cell still checks
                 `says` etc. where the tool prints such a note; with nothing else to check it is not run)

Always checked: every coll_perf rank is gone when the tool has ended (`ranks_left` 0), and an injector fault
really fired (else the cell is `not injected`, never a pass). A tool still running at the cell's limit_s fails the
cell; it is stopped as a CI job's time limit would stop it (stop_at_limit: SIGTERM, so that it writes its
INCOMPLETE verdict and the row's observed fields are read from it; SIGKILL to its session LIMIT_STOP_GRACE_S
later), and the row's stopped_by says which signal ended it.

    fault_matrix.py run --cells FILE --out DIR [--only ID[,ID]] [--backend mpi|nccl] [--budget-s S]
                        [--lanes K] [--part I/N] [--expected RESULTS]
        DIR/fault_matrix_results.json (written after every cell), DIR/cells/ID/ (command, output, run directory);
        exit 0 every cell as expected, 1 not, 77 no virtual cluster here. --lanes K: K cells at a time, each lane
        on virtual clusters of its own (no link, bridge or namespace shared), longest cells first by RESULTS' times.
        --part I/N: only the I-th of N parts of about equal expected time (CTest runs the parts side by side)
    fault_matrix.py table RESULTS                    the markdown table (what the README carries)
    fault_matrix.py check-readme RESULTS README      exit 1 when the README's block differs from `table`

Expected values come from the injected fault (the spec), never from cclbench's own output.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eta_lines  # noqa: E402
import vcluster  # noqa: E402

SOURCE_DIR = os.environ.get("CCLBENCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR") or os.path.join(SOURCE_DIR, "build")
APPS = os.path.join(BINARY_DIR, "bench", "apps")
CCLBENCH = os.path.join(SOURCE_DIR, "scripts", "cclbench")
FAKE_BIN = os.path.join(SOURCE_DIR, "tests", "scripts", "fake_bin")
MPIRUN = os.environ.get("CCLBENCH_VC_MPIRUN", "mpirun")
# The rails by subnet: a name list with one interface down makes Open MPI ignore the whole list on that node.
RAIL_SUBNETS = "198.18.10.0/24,198.18.13.0/24"
README_BEGIN = "<!-- fault-matrix table: generated by tests/cluster/fault_matrix.py table; do not edit -->"
README_END = "<!-- fault-matrix table end -->"
DEFAULT_LIMIT_S = 180
RESULTS_FORMAT = "cclbench-fault-matrix/1"
FAULT_ORDER = ("none", "dead_rail", "slow_rail", "slow_node", "slow_link", "env_differs", "path_mtu",
               "transport_fallback", "killed_rank", "hung_rank", "hung_case", "frozen_launch", "frozen_node",
               "paths_die", "connect_hang")
FAULT_TITLES = {
    "none": "healthy (control)", "dead_rail": "dead rail", "slow_rail": "slow rail", "slow_node": "slow node",
    "slow_link": "slow link (one pair)", "env_differs": "environment differs across hosts",
    "path_mtu": "path MTU mismatch", "transport_fallback": "transport fallback", "killed_rank": "killed rank",
    "hung_rank": "hung rank",
    "hung_case": "hang at the largest size",
    "frozen_launch": "frozen launch (every rank of it)",
    "frozen_node": "frozen node",
    "paths_die": "paths die mid-run (switch ports stop forwarding)",
    "connect_hang": "a path dies between the bootstrap and its connect (connect hang)",
}


class MatrixError(Exception):
    pass


# ------------------------------------------------------------------------------------------------ faults

def _nodes_of(cluster, value):
    return list(cluster.nodes) if value == "all" else [value]


def _need(fault, *keys):
    missing = [key for key in keys if key not in fault]
    if missing:
        raise MatrixError(f"fault {fault.get('fault')!r} needs {', '.join(missing)} ({json.dumps(fault)})")


def _check_nodes(cluster, fault, *keys):
    for key in keys:
        for node in _nodes_of(cluster, fault[key]):
            if node not in cluster.nodes:
                raise MatrixError(f"fault names {node}, not in the fleet {','.join(cluster.nodes)}")


def apply_fault(cluster, fault):
    """Sets the kernel side of a fault (links, rates, MTUs). Wrapper-side faults are in wrapper_script."""
    kind = fault["fault"]
    if kind not in FAULT_ORDER:
        raise MatrixError(f"unknown fault {kind!r} (one of {', '.join(FAULT_ORDER)})")
    if kind == "dead_rail":
        _need(fault, "node", "rail")
        _check_nodes(cluster, fault, "node")
        for node in _nodes_of(cluster, fault["node"]):
            cluster.set_link(node, fault["rail"], up=False)
    elif kind == "slow_rail":
        _need(fault, "node", "rail", "rate")
        _check_nodes(cluster, fault, "node")
        for node in _nodes_of(cluster, fault["node"]):
            cluster.set_rate(node, fault["rail"], fault["rate"])
    elif kind == "slow_node":
        _need(fault, "node", "rate")
        _check_nodes(cluster, fault, "node")
        for rail in fault.get("rails") or vcluster.RAILS:
            cluster.set_rate(fault["node"], rail, fault["rate"])
    elif kind == "slow_link":
        _need(fault, "a", "b", "rate")
        _check_nodes(cluster, fault, "a", "b")
        for rail in fault.get("rails") or vcluster.RAILS:
            cluster.throttle_pair(fault["a"], fault["b"], rail, fault["rate"])
    elif kind == "path_mtu":
        _need(fault, "node", "rail")
        _check_nodes(cluster, fault, "node")
        host_mtu, port_mtu = int(fault.get("host_mtu", 9000)), int(fault.get("port_mtu", 1500))
        for node in cluster.nodes:  # raise the ports first: a host MTU above its port's is refused
            cluster.set_link(node, fault["rail"], port_mtu=max(host_mtu, port_mtu))
            cluster.set_link(node, fault["rail"], mtu=host_mtu)
        for node in _nodes_of(cluster, fault["node"]):
            cluster.set_link(node, fault["rail"], port_mtu=port_mtu)
    elif kind in ("env_differs", "transport_fallback", "killed_rank", "hung_rank", "frozen_launch", "frozen_node"):
        _need(fault, "node")
        _check_nodes(cluster, fault, "node")
    elif kind == "hung_case":
        _need(fault, "node", "case")
        _check_nodes(cluster, fault, "node")
    elif kind in PATH_FAULTS:
        _need(fault, "node", "at")
        _check_nodes(cluster, fault, "node")
        unknown = [rail for rail in fault.get("rails") or () if rail not in vcluster.RAILS]
        if unknown:
            raise MatrixError(f"{kind}: no rail {', '.join(unknown)} (the rails are {', '.join(vcluster.RAILS)})")


def clear_faults(cluster):
    """Every node back to the cluster's healthy state: links up, switch ports forwarding, no shaping, MTU 1500 end
    to end."""
    for node, link in sorted(cluster.blocked_ports):
        cluster.set_port_forwarding(node, link, True)
    for node in cluster.nodes:
        for rail in vcluster.RAILS:
            cluster.clear_shaping(node, rail)
            cluster.set_link(node, rail, up=True, port_up=True)
            cluster.set_link(node, rail, mtu=1500)
            cluster.set_link(node, rail, port_mtu=1500)


INJECTOR_SIGNALS = {"killed_rank": "KILL", "hung_rank": "STOP"}
# Faults whose injection is recorded (marks, or coll_perf's own words in run.log): a cell where none fired is
# "not injected", never a pass.
INJECTED_FAULTS = ("killed_rank", "hung_rank", "hung_case", "frozen_launch", "frozen_node", "paths_die",
                   "connect_hang")
PATH_FAULTS = ("paths_die", "connect_hang")  # the switch ports stop forwarding mid-run (PathKiller)
STALL_WORDS = "test stall (CCLBENCH_TEST_STALL)"


def cross_host_coll_perf(pid):
    """Whether a coll_perf process belongs to a launch that spans hosts (its Open MPI world is larger than its
    node's share)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            variables = dict(item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
        return int(variables.get(b"OMPI_COMM_WORLD_SIZE", b"1")) > int(variables.get(b"OMPI_COMM_WORLD_LOCAL_SIZE", b"1"))
    except (OSError, ValueError):
        return False


class NodeFreezer(threading.Thread):
    """frozen_node: once a coll_perf of a launch that spans hosts runs on the node, after_s later every process in
    the node's namespace is stopped (SIGSTOP), as a node whose kernel locked up; thaw() continues them."""

    def __init__(self, cluster, node, after_s, marks):
        super().__init__(daemon=True)
        self.cluster, self.node, self.after_s, self.marks = cluster, node, after_s, marks
        self.inode = os.stat(f"/run/netns/{cluster.ns(node)}").st_ino
        self.done = threading.Event()
        self.frozen = []

    def run(self):
        while not self.done.is_set():
            if any(cross_host_coll_perf(pid) for pid in coll_perf_pids({self.inode})):
                break
            time.sleep(0.05)
        if self.done.wait(self.after_s):
            return
        pids = [int(pid) for pid in self.cluster.ip("netns", "pids", self.cluster.ns(self.node),
                                                     check=False).stdout.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
                self.frozen.append(pid)
            except ProcessLookupError:
                pass
        with open(self.marks, "a") as handle:
            handle.write(f"{self.node} SIGSTOP to {len(self.frozen)} process(es) of the node at "
                         f"{time.monotonic():.1f}\n")

    def thaw(self):
        self.done.set()
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _argv_and_environment(pid):
    """(argv, environment) of a process as bytes ([] and {} when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environment = dict(item.split(b"=", 1) for item in handle.read().split(b"\0") if b"=" in item)
    except OSError:
        return [], {}
    return argv, environment


def _flag(argv, name):
    return argv[argv.index(name) + 1].decode(errors="replace") if name in argv[:-1] else None


def rank_group(pid):
    """(point, group size) of a coll_perf rank: its --point and Open MPI's world, or in a launch of several groups
    (--split-ranks K --split-points FILE, the screen's batched launches) its group's point (FILE's entry number
    world rank // K, as coll_perf splits) and K; (None, None) when it has none or is gone."""
    argv, environment = _argv_and_environment(pid)
    try:
        world = int(environment[b"OMPI_COMM_WORLD_SIZE"])
    except (KeyError, ValueError):
        world = None
    point = _flag(argv, b"--point")
    if point is not None:
        return point, world
    split_ranks, split_points = _flag(argv, b"--split-ranks"), _flag(argv, b"--split-points")
    if split_ranks is None or split_points is None:
        return None, None
    try:
        group_size = int(split_ranks)
        entries = json.loads(_read_text(split_points))
        return entries[int(environment[b"OMPI_COMM_WORLD_RANK"]) // group_size]["point"], group_size
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError):
        return None, None


def coll_perf_point(pid):
    """The point a coll_perf rank measures (None when it has none or is gone): rank_group's."""
    return rank_group(pid)[0]


def world_size(pid):
    """The size of a rank's own communicator (None when it is gone or has none): rank_group's."""
    return rank_group(pid)[1]


def rail_connections(tcp_table, rail_patterns=None):
    """The established TCP connections (state 01) from an address on a rail in a /proc/net/tcp table's text."""
    rail_patterns = RAIL_TCP_PATTERNS if rail_patterns is None else rail_patterns
    found = 0
    for line in tcp_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "01" and fields[1][2:8] in rail_patterns:
            found += 1
    return found


def connect_moment(points, sizes, tables, at, rail_patterns=None):
    """connect_hang: whether every rank of the launch `at` has started, and how many rail connections are open.
    points/sizes: pid -> --point / OMPI_COMM_WORLD_SIZE of the fleet's coll_perf processes; tables: the
    /proc/net/tcp texts of the namespaces they run in. (started, world, rail connections): started is None while
    the launch's world has not all started."""
    ranks = [pid for pid, point in points.items() if point == at]
    world = max((sizes.get(pid) or 0 for pid in ranks), default=0)
    if not ranks or len(ranks) < world or world == 0:
        return None, world, None
    return len(ranks), world, sum(rail_connections(table, rail_patterns) for table in tables)


class PathKiller(threading.Thread):
    """paths_die: once a coll_perf of the launch whose point is `at` runs anywhere in the fleet (connect_hang: once
    all its ranks run and none has a rail connection yet), the node's switch ports on the fault's rails stop
    forwarding (vcluster set_port_forwarding); fired_at is when (time.monotonic); missed says why it did not fire."""

    def __init__(self, cluster, fault, netns_inodes, marks):
        super().__init__(daemon=True)
        self.cluster, self.fault, self.inodes, self.marks = cluster, fault, netns_inodes, marks
        self.done = threading.Event()
        self.fired_at = None
        self.error = None
        self.missed = None
        self.when = "connect" if fault["fault"] == "connect_hang" else "start"

    def _tcp_tables(self, pids):
        tables = {}
        for pid in pids:
            try:
                inode = os.stat(f"/proc/{pid}/ns/net").st_ino
                if inode not in tables:
                    tables[inode] = _read_text(f"/proc/{pid}/net/tcp")
            except OSError:
                continue
        return list(tables.values())

    def _ready(self):
        groups = {pid: rank_group(pid) for pid in coll_perf_pids(self.inodes)}  # each rank's /proc read once a poll
        points = {pid: point for pid, (point, _size) in groups.items()}
        if self.when == "start":
            return any(point == self.fault["at"] for point in points.values())
        ranks = [pid for pid, point in points.items() if point == self.fault["at"]]
        started, world, connected = connect_moment(points, {pid: groups[pid][1] for pid in ranks},
                                                   self._tcp_tables(ranks), self.fault["at"])
        if started is None:
            return False
        if connected:
            self.missed = (f"{self.fault['at']}: {connected} rail connection(s) already open when its {world} "
                           "ranks had all started: too late for a connect hang, not fired")
            self.done.set()
            return False
        self.started_ranks = started
        return True

    def run(self):
        while not self.done.is_set():
            if self._ready():
                break
            time.sleep(0.05 if self.when == "start" else 0.01)
        else:
            return
        rails = list(self.fault.get("rails") or vcluster.RAILS)
        try:
            for rail in rails:
                self.cluster.set_port_forwarding(self.fault["node"], rail, False)
        except vcluster.VClusterError as error:
            self.error = str(error)
            return
        self.fired_at = time.monotonic()
        moment = (f"once {self.started_ranks} rank(s) of {self.fault['at']} had started, before any rail connection"
                  if self.when == "connect" else f"as {self.fault['at']} started")
        with open(self.marks, "a") as handle:
            handle.write(f"{self.fault['node']} {','.join(rails)}: switch ports stopped forwarding (carrier up) "
                         f"{moment}, at {self.fired_at:.1f}\n")

    def stop(self):
        self.done.set()
        self.join(5)


# The wrapper's tests of the launch it is in: Open MPI's world larger than this node's share, or not.
CROSS_HOST = '[ "${OMPI_COMM_WORLD_SIZE:-1}" -gt "${OMPI_COMM_WORLD_LOCAL_SIZE:-1}" ]'
CONFINED = '[ "${OMPI_COMM_WORLD_SIZE:-1}" -le "${OMPI_COMM_WORLD_LOCAL_SIZE:-1}" ]'


def _hex_prefix(subnet):
    """/proc/net/tcp's spelling of a /24's first three octets (little-endian hex: 198.18.10.0/24 -> '0A12C6')."""
    octets = [int(part) for part in subnet.split("/")[0].split(".")[:3]]
    return "".join(f"{octet:02X}" for octet in reversed(octets))


# A TCP connection established (state 01) to an address on a rail: the rank is past MPI's start-up and measuring
# (Open MPI's TCP transport connects on first use; start-up itself talks over mgmt0). /proc/net/tcp is the node's
# own network namespace's.
RAIL_TCP_PATTERNS = tuple(_hex_prefix(subnet) for subnet in RAIL_SUBNETS.split(","))
RAIL_WAIT_S = 120


def _delayed_signal(target, launch_test, signame, fault, marks_path, note, rail_patterns=RAIL_TCP_PATTERNS):
    """Wrapper lines: on the target node, in a launch passing launch_test, a detached timer sends SIG<signame> to
    this process after after_s and writes the mark. $$ is this shell, then coll_perf itself after exec; the timer
    checks it still is coll_perf. With "from": "rail" the after_s counts from the first TCP connection over a rail
    in the node (the ranks measuring), not from the start: a kill meant for the measurement never lands in MPI's
    start-up, where a loaded machine would otherwise put it (a rank killed there leaves Open MPI waiting, a hang
    instead of a failure)."""
    after_s = float(fault.get("after_s", 0.1))
    marks = shlex.quote(marks_path)
    wait = ""
    if fault.get("from", "start") == "rail":
        alternatives = "|".join(rail_patterns)
        wait = (f'waited=0; until awk \'$4 == "01" && $3 ~ /^[0-9A-F][0-9A-F]({alternatives}):/ {{ found = 1 }} '
                f'END {{ exit !found }}\' /proc/net/tcp; do sleep 0.02; waited=$((waited + 1)); '
                f'[ "$waited" -lt {RAIL_WAIT_S * 50} ] || exit 0; done; ')
    elif fault.get("from", "start") != "start":
        raise MatrixError(f"{fault['fault']}: 'from' is start or rail, not {fault['from']!r}")
    return [f'if [ "$node" = {target} ] && {launch_test}; then',
            f'  ( {wait}sleep {after_s}; if [ "$(cat /proc/$$/comm 2>/dev/null)" = coll_perf ]; then',
            f'      kill -{signame} $$ && echo "$node SIG{signame} $$ rank ${{OMPI_COMM_WORLD_RANK:-?}}{note}" >> {marks}; fi'
            ' ) </dev/null >/dev/null 2>&1 &',
            "fi"]


def wrapper_script(fault, real_coll_perf, marks_path, backend, rail_patterns=RAIL_TCP_PATTERNS):
    """The --bin-dir coll_perf for a fault: sh, the target node chosen by its hostname (uname -n)."""
    lines = ["#!/bin/sh", "node=$(uname -n)"]
    if backend == "nccl":
        # Every node's rank runs on the one GPU: NCCL would take them for one host without a host id each.
        lines.append('NCCL_HOSTID="$node"; export NCCL_HOSTID')
    kind = fault["fault"]
    target = shlex.quote(fault.get("node", ""))
    if kind == "env_differs":
        var = fault["var"]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            raise MatrixError(f"env_differs: bad variable name {var!r}")
        change = (f"unset {var}" if fault.get("value") is None
                  else f"{var}={shlex.quote(str(fault['value']))}; export {var}")
        lines.append(f'if [ "$node" = {target} ]; then {change}; fi')
    elif kind == "transport_fallback" and backend == "nccl":  # the MPI backend has no NCCL transport
        lines.append(f'if [ "$node" = {target} ]; then NCCL_IB_DISABLE=1; export NCCL_IB_DISABLE; fi')
    elif kind in INJECTOR_SIGNALS:
        # Only launches that span hosts (Open MPI's world larger than this node's share): the cross-host points.
        lines += _delayed_signal(target, CROSS_HOST, INJECTOR_SIGNALS[kind], fault, marks_path, "", rail_patterns)
    elif kind == "hung_case":
        case = fault["case"]
        if not re.fullmatch(r"[A-Za-z0-9_.]+", case):
            raise MatrixError(f"hung_case: bad case id {case!r}")
        lines += [f'if [ "$node" = {target} ] && {CROSS_HOST}; then',
                  f'  CCLBENCH_TEST_STALL="${{OMPI_COMM_WORLD_RANK:-0}}:{case}"; export CCLBENCH_TEST_STALL',
                  "fi"]
    elif kind == "frozen_launch":
        # Only launches confined to this node (Open MPI's world no larger than this node's share).
        lines += _delayed_signal(target, CONFINED, "STOP", fault, marks_path, " of a launch on $node alone",
                                 rail_patterns)
    # nccl_shaped: the NCCL plan of a GPU host on hosts without one, its coll_perf the real one on the MPI backend.
    lines.append(f'exec {shlex.quote(real_coll_perf)} "$@"' + (" --backend mpi" if backend == "nccl_shaped" else ""))
    return "\n".join(lines) + "\n"


def make_bin_dir(path, fault, marks_path, backend, apps=APPS):
    """The tools of the build (symlinks) with the fault's coll_perf wrapper in front of the real one."""
    os.makedirs(path, exist_ok=True)
    for tool in os.listdir(apps):
        source = os.path.join(apps, tool)
        if tool != "coll_perf" and os.path.isfile(source) and os.access(source, os.X_OK):
            target = os.path.join(path, tool)
            if not os.path.lexists(target):
                os.symlink(source, target)
    if backend == "nccl_shaped":
        # One GPU per host and no RDMA port (a socket-only cluster, the rails by --netdevs): the scripts tests' doubles.
        for tool in ("topo_map", "p2p_matrix"):
            target = os.path.join(path, tool)
            if os.path.lexists(target):
                os.unlink(target)
            with open(target, "w") as handle:
                handle.write(f"#!/bin/sh\nFAKE_GPUS=1 FAKE_RDMA=0 exec {shlex.quote(os.path.join(FAKE_BIN, tool))} "
                             '"$@"\n')
            os.chmod(target, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    wrapper = os.path.join(path, "coll_perf")
    with open(wrapper, "w") as handle:
        handle.write(wrapper_script(fault, os.path.join(apps, "coll_perf"), marks_path, backend))
    os.chmod(wrapper, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


# ----------------------------------------------------------------------------------------------- cells

def load_cells(path):
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    cells = document.get("cells")
    if not isinstance(cells, list):
        raise MatrixError(f"{path}: no 'cells' list")
    seen = set()
    for cell in cells:
        for key in ("id", "nodes", "tool", "fault", "expect"):
            if key not in cell:
                raise MatrixError(f"{path}: cell {cell.get('id', '?')} has no {key!r}")
        if cell["id"] in seen:
            raise MatrixError(f"{path}: duplicate cell id {cell['id']}")
        seen.add(cell["id"])
        if cell["tool"] not in ("baseline", "screen"):
            raise MatrixError(f"{path}: cell {cell['id']}: tool must be baseline or screen")
        if not 2 <= int(cell["nodes"]) <= 8:
            raise MatrixError(f"{path}: cell {cell['id']}: 2 to 8 nodes")
        if cell["fault"].get("fault") not in FAULT_ORDER:
            raise MatrixError(f"{path}: cell {cell['id']}: unknown fault {cell['fault'].get('fault')!r}")
    return document.get("defaults") or {}, cells


def fleet(size):
    return [f"node{i}" for i in range(1, int(size) + 1)]


def runnable(cell):
    """A pure note cell (nothing the tool says is checked) is not run: the note is the result."""
    expect = cell["expect"]
    return not (expect.get("note") and set(expect) <= {"note"})


# ----------------------------------------------------------------------------------------- observation

def coll_perf_pids(netns_inodes):
    """coll_perf processes (not zombies) inside the fleet's network namespaces."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                comm = handle.read().strip()
            if comm != "coll_perf":
                continue
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
            inode = os.stat(f"/proc/{entry}/ns/net").st_ino
        except OSError:
            continue
        if state != "Z" and inode in netns_inodes:
            found.append(int(entry))
    return found


def end_everything_in(cluster):
    """SIGKILL to every process inside the fleet's node namespaces: only this matrix's runs live there (launchers,
    orted, ranks a killed tool left behind)."""
    for node in cluster.nodes:
        pids = cluster.ip("netns", "pids", cluster.ns(node), check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _link_name(a, b):
    return "-".join(sorted([a, b]))


def findings_of_screen(document):
    """(findings, bad nodes, bad links, bad rails) of a screen.json. A finding: code, severity, node, rail, link."""
    findings = []
    for row in document.get("nodes") or []:
        for reason in row.get("reasons") or []:
            findings.append({"code": reason.get("code"), "severity": row.get("verdict"), "node": row.get("name"),
                             "text": json.dumps(reason.get("detail"), sort_keys=True)})
    for row in document.get("links") or []:
        for reason in row.get("reasons") or []:
            findings.append({"code": reason.get("code"), "severity": row.get("verdict"),
                             "link": _link_name(row.get("a", ""), row.get("b", "")),
                             "text": json.dumps(reason.get("detail"), sort_keys=True)})
    for row in document.get("rails") or []:
        for reason in row.get("reasons") or []:
            findings.append({"code": reason.get("code"), "severity": row.get("verdict"), "node": row.get("node"),
                             "rail": row.get("rail"), "text": json.dumps(reason.get("detail"), sort_keys=True)})
    known = {id(reason) for key in ("nodes", "links", "rails") for row in document.get(key) or []
             for reason in row.get("reasons") or []}
    findings += [dict(finding, severity=finding.get("severity") or "note") for finding in _other_codes(document, known)]
    bad_nodes = sorted(row["name"] for row in document.get("nodes") or [] if row.get("verdict") == "bad")
    bad_links = sorted(_link_name(row["a"], row["b"]) for row in document.get("links") or []
                       if row.get("verdict") == "bad")
    bad_rails = sorted(f"{row['node']}:{row['rail']}" for row in document.get("rails") or []
                       if row.get("verdict") == "bad")
    return findings, bad_nodes, bad_links, bad_rails


def _other_codes(document, known_ids):
    """Any other object with a 'code' (a note a newer screen.json may carry): its code and its words."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            if isinstance(value.get("code"), str) and id(value) not in known_ids and "." in value["code"]:
                found.append({"code": value["code"], "severity": value.get("severity"),
                              "node": value.get("node") or value.get("host"), "rail": value.get("rail"),
                              "text": json.dumps(value, sort_keys=True)})
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    for key, value in document.items():
        if key not in ("pairs",):
            walk(value)
    return found


def findings_of_verdict(document):
    findings = []
    for key in ("reasons", "notes"):
        for reason in document.get(key) or []:
            subject = reason.get("subject") or ""
            rail = next((word for word in re.split(r"[\s,:()]+", subject) if re.fullmatch(r"eth\d|mlx5_\d+", word)),
                        None)
            findings.append({"code": reason.get("code"), "severity": reason.get("severity"),
                             "node": reason.get("host"), "hosts": reason.get("hosts") or [], "rail": rail,
                             "point": reason.get("point"), "subject": subject, "text": reason.get("text") or ""})
    return findings


def observe(tool, run_dir, stdout, stderr):
    observed = {"result": None, "codes": [], "findings": [], "bad_nodes": None, "bad_links": None, "bad_rails": None}
    if tool == "screen":
        document = _read_json(os.path.join(run_dir, "screen.json"))
        report = _read_text(os.path.join(run_dir, "screen.md"))
        if document is not None:
            findings, nodes, links, rails = findings_of_screen(document)
            observed.update(result=document.get("result"), findings=findings, bad_nodes=nodes, bad_links=links,
                            bad_rails=rails)
    else:
        document = _read_json(os.path.join(run_dir, "verdict.json"))
        report = _read_text(os.path.join(run_dir, "report.md"))
        if document is not None:
            observed.update(result=document.get("overall"), findings=findings_of_verdict(document))
    observed["document"] = "screen.json" if tool == "screen" else "verdict.json"
    observed["document_found"] = document is not None
    observed["codes"] = sorted({f["code"] for f in observed["findings"] if f.get("code")})
    observed["words"] = "\n".join((stdout or "", stderr or "", report))
    last = [line for line in (stderr or "").strip().splitlines() if line.strip()]
    observed["last_line"] = last[-1][:400] if last else ""
    return observed


# ------------------------------------------------------------------------------------------- judgement

def _as_list(value):
    return value if isinstance(value, list) else [value]


def _finding_matches(finding, wanted):
    if finding.get("code") != wanted["code"]:
        return False
    about = wanted.get("about")
    if about and not re.search(about, " ".join(str(finding.get(k) or "") for k in ("subject", "text", "point")),
                               re.IGNORECASE):
        return False
    for key in ("node", "rail", "link"):
        if key not in wanted:
            continue
        value = wanted[key]
        if finding.get(key) == value:
            continue
        if key == "node" and value in (finding.get("hosts") or []):
            continue
        # A subject the tool names in its words only (a rail in a subject, a host in the detail).
        if not finding.get(key) and re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])",
                                              (finding.get("subject") or "") + " " + (finding.get("text") or "")):
            continue
        return False
    return True


def judge(expect, observed):
    """The list of expectations that do not hold (empty: the cell passes)."""
    problems = []
    if "exit" in expect and observed["exit"] not in _as_list(expect["exit"]):
        problems.append(f"exit {observed['exit']}, expected {expect['exit']}")
    if "within_s" in expect and (observed["elapsed_s"] is None or observed["elapsed_s"] > expect["within_s"]):
        problems.append(f"took {observed['elapsed_s']} s, expected within {expect['within_s']} s")
    if "fault_to_end_within_s" in expect and (observed.get("fault_to_end_s") is None or
                                              observed["fault_to_end_s"] > expect["fault_to_end_within_s"]):
        problems.append(f"ended {observed.get('fault_to_end_s')} s after the fault, expected within "
                        f"{expect['fault_to_end_within_s']} s")
    if "result" in expect and observed["result"] not in _as_list(expect["result"]):
        problems.append(f"{observed['document']} result {observed['result']!r}, expected {expect['result']!r}"
                        + ("" if observed["document_found"] else f" (no {observed['document']})"))
    if "not_result" in expect and observed["result"] in _as_list(expect["not_result"]):
        problems.append(f"result {observed['result']!r}: must not be {expect['not_result']!r}")
    missing = [code for code in expect.get("codes", []) if code not in observed["codes"]]
    if missing:
        problems.append(f"no {', '.join(missing)} (codes seen: {', '.join(observed['codes']) or 'none'})")
    present = [code for code in expect.get("absent_codes", []) if code in observed["codes"]]
    if present:
        problems.append(f"{', '.join(present)} must not be there (a healthy launch stopped)")
    if expect.get("codes_any") and not set(expect["codes_any"]) & set(observed["codes"]):
        problems.append(f"none of {', '.join(expect['codes_any'])} "
                        f"(codes seen: {', '.join(observed['codes']) or 'none'})")
    for wanted in expect.get("find", []):
        if not any(_finding_matches(finding, wanted) for finding in observed["findings"]):
            problems.append("no reason " + " ".join(f"{k}={v}" for k, v in wanted.items()))
    for key in ("bad_nodes", "bad_links", "bad_rails"):
        if key in expect and observed[key] != sorted(expect[key]):
            problems.append(f"{key} {observed[key]}, expected {sorted(expect[key])}")
    for pattern in expect.get("says", []):
        if not re.search(pattern, observed["words"], re.IGNORECASE):
            problems.append(f"the tool's words do not say /{pattern}/")
    if "eta_within" in expect:
        judged = observed.get("eta_after_sanity") or {}
        worst = judged.get("error")
        if worst is None and judged.get("short_s") is None:
            problems.append("no ETA judged: no progress line from sanity on")
        elif worst is not None and worst > expect["eta_within"]:
            problems.append(f"an ETA from sanity on was off by {worst:.0%} of the time really left, expected within "
                            f"{expect['eta_within']:.0%}")
    if observed.get("ranks_left") and not observed.get("killed_by_matrix"):  # the matrix's kill left them, not the tool
        problems.append(f"{observed['ranks_left']} coll_perf rank(s) still there after the tool ended")
    if observed.get("killed_by_matrix"):
        how = {"SIGTERM": "stopped by the matrix's SIGTERM", "SIGKILL": "killed by the matrix (SIGTERM, then SIGKILL)"}
        problems.append(f"still running at the cell's limit {observed['limit_s']} s: "
                        f"{how.get(observed.get('stopped_by'), 'killed by the matrix')}")
    return problems


# ---------------------------------------------------------------------------------------------- runner

def lane_order(cells, expected_s):
    """The order the lanes take cells in: longest expected first (cell_cost), so that the last cells to start are short ones and the lanes end together; ties by fleet size, then
    id, so the same cells give the same order."""
    return sorted(cells, key=lambda cell: (-cell_cost(cell, expected_s), int(cell["nodes"]), cell["id"]))


def cell_cost(cell, expected_s):
    """A cell's expected seconds: the committed run's elapsed_s, else (a cell newer than that run) its own
    expected_s, measured alone, else its limit_s."""
    return float(expected_s.get(cell["id"], cell.get("expected_s", cell.get("limit_s", DEFAULT_LIMIT_S))))


def part_of(cells, part, parts, expected_s):
    """The cells of part `part` (1-based) of `parts`: the runnable cells dealt longest first (lane_order's order) to the
    part with the fewest expected seconds so far, so the parts take about as long as each other; the note cells go
    with part 1. The same cells and times give the same parts."""
    loads = [0.0] * parts
    chosen = set()
    for cell in lane_order([cell for cell in cells if runnable(cell)], expected_s):
        least = min(range(parts), key=lambda index: (loads[index], index))
        loads[least] += cell_cost(cell, expected_s)
        if least == part - 1:
            chosen.add(cell["id"])
    return [cell for cell in cells if cell["id"] in chosen or (part == 1 and not runnable(cell))]


def expected_seconds(results_path):
    """id -> elapsed_s of a results file's cells ({} when it cannot be read): the lanes' cost estimate."""
    results = _read_json(results_path) if results_path else None
    if not results or results.get("format") != RESULTS_FORMAT:
        return {}
    return {row["id"]: row["observed"]["elapsed_s"] for row in results.get("cells", [])
            if (row.get("observed") or {}).get("elapsed_s") is not None}


class StampedReader:
    """Reads a process's stdout and stderr to their ends (as communicate() does), each stderr line stamped with its
    arrival: seconds from `started` (time.monotonic())."""

    def __init__(self, process, started):
        self.process, self.started = process, started
        self.out, self.stamped = [], []
        self.readers = [threading.Thread(target=self._read_out, daemon=True),
                        threading.Thread(target=self._read_err, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read_out(self):
        self.out.append(self.process.stdout.read())

    def _read_err(self):
        for text in self.process.stderr:
            self.stamped.append((time.monotonic() - self.started, text.rstrip("\n")))

    def finish(self, until=None):
        """Both pipes at their end and the process waited for, by time.monotonic() `until` (None: no limit): True,
        else False (the caller kills, then finishes again)."""
        for reader in self.readers:
            reader.join(None if until is None else max(0.0, until - time.monotonic()))
        if any(reader.is_alive() for reader in self.readers):
            return False
        self.process.wait()
        return True

    def stdout(self):
        return "".join(self.out)

    def stderr(self):
        return "".join(text + "\n" for _, text in self.stamped)


# A tool still running at its cell's limit is stopped as a user or a CI job's time limit would stop it: SIGTERM to the
# tool, which stops its launch (SIGKILL to the launch STOP_GRACE_S = 10 s later, plan/bounds.py) and writes report.md
# and verdict.json for what it measured; SIGKILL to everything in its session this long after the SIGTERM.
LIMIT_STOP_GRACE_S = 40


def stop_at_limit(process, reader, grace_s=LIMIT_STOP_GRACE_S):
    """Stops a tool past its cell's limit (process: started with start_new_session; reader: its StampedReader):
    SIGTERM to the tool alone, then, once it ended or grace_s passed, SIGKILL to its session, so that nothing it
    started outlives the cell. Returns "SIGTERM" when the tool ended on the SIGTERM, else "SIGKILL"."""
    try:
        os.kill(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=grace_s)
        ended_on_term = True
    except subprocess.TimeoutExpired:
        ended_on_term = False
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    reader.finish()
    return "SIGTERM" if ended_on_term else "SIGKILL"


class Runner:
    def __init__(self, out_dir, backend, defaults, log=sys.stderr):
        self.out_dir = os.path.abspath(out_dir)
        self.backend = backend
        self.defaults = defaults
        self.log = log
        os.makedirs(self.out_dir, exist_ok=True)

    def say(self, text):
        print(text, file=self.log, flush=True)

    def mpirun_args(self, cluster):
        return (f"--mca plm rsh --mca plm_rsh_agent {cluster.agent} --mca oob_tcp_if_include mgmt0 "
                f"--mca btl tcp,self --mca btl_tcp_if_include {RAIL_SUBNETS} --bind-to none "
                "--mca mpi_yield_when_idle 1")

    def environment(self, backend=None):
        # No NCCL_/CUDA_/UCX_/SLURM_ of the caller: a cell's environment is what the cell sets.
        backend = backend or self.backend
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("NCCL_", "CUDA_VISIBLE", "UCX_", "SLURM_")) or name == "NCCL_NVLS_ENABLE"}
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONDONTWRITEBYTECODE="1")
        if backend in ("nccl", "nccl_shaped"):
            env["NCCL_SOCKET_IFNAME"] = "eth0,eth3"
            # NVLink multicast stays off on the shared GPU machines (it can take a host's GPUs out of service).
            env["NCCL_NVLS_ENABLE"] = "0"
        return env

    def argv(self, cluster, cell, bin_dir, results):
        tool = cell["tool"]
        run_id = cell["id"]
        argv = [sys.executable, CCLBENCH, tool, "--hosts", ",".join(cluster.nodes), "--bin-dir", bin_dir,
                "--mpirun", MPIRUN, "--results", results, "--run-id", run_id,
                f"--mpirun-args={self.mpirun_args(cluster)}"]
        if cell.get("defaults", True):
            argv += [str(arg) for arg in self.defaults.get(tool, [])]
        if cell["fault"]["fault"] == "transport_fallback" and self.backend == "nccl" and tool == "baseline":
            argv += ["--expect-transport", "inter=NET/IB"]  # the transport the user's cluster is built for
        argv += [str(arg) for arg in cell.get("args", [])]
        return argv

    def run_cell(self, cluster, cell, netns_inodes):
        cell_dir = os.path.join(self.out_dir, "cells", cell["id"])
        shutil.rmtree(cell_dir, ignore_errors=True)
        os.makedirs(cell_dir)
        marks = os.path.join(cell_dir, "injected.txt")
        bin_dir = os.path.join(cell_dir, "bin")
        backend = cell.get("backend", self.backend)
        make_bin_dir(bin_dir, cell["fault"], marks, backend)
        results = os.path.join(cell_dir, "results")
        limit_s = float(cell.get("limit_s", DEFAULT_LIMIT_S))
        observed = {"exit": None, "elapsed_s": None, "limit_s": limit_s, "killed_by_matrix": False}
        clear_faults(cluster)
        apply_fault(cluster, cell["fault"])
        argv = self.argv(cluster, cell, bin_dir, results)
        with open(os.path.join(cell_dir, "command.txt"), "w") as handle:
            handle.write(shlex.join(argv) + "\n")
        freezer = killer = None
        if cell["fault"]["fault"] == "frozen_node":
            freezer = NodeFreezer(cluster, cell["fault"]["node"], float(cell["fault"].get("after_s", 1.0)), marks)
            freezer.start()
        if cell["fault"]["fault"] in PATH_FAULTS:
            killer = PathKiller(cluster, cell["fault"], netns_inodes, marks)
            killer.start()
        started = time.monotonic()
        try:
            process = cluster.popen(cluster.nodes[0], argv, env=self.environment(backend), cwd=cell_dir,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
            reader = StampedReader(process, started)
            if not reader.finish(until=started + limit_s):
                observed["killed_by_matrix"] = True
                observed["stopped_by"] = stop_at_limit(process, reader)
            stdout, stderr, stamped = reader.stdout(), reader.stderr(), reader.stamped
            observed["exit"] = process.returncode
            ended = time.monotonic()
            observed["elapsed_s"] = round(ended - started, 1)
            if killer is not None:
                killer.stop()
                if killer.error:
                    raise MatrixError(f"{cell['fault']['fault']}: {killer.error}")
                observed["fault_to_end_s"] = round(ended - killer.fired_at, 1) if killer.fired_at else None
                observed["injector_missed"] = killer.missed
            time.sleep(1.0)  # mpirun's last kills land
            if freezer is not None:
                # The node comes back: its launcher daemon finds its launcher gone and ends its ranks.
                freezer.thaw()
                for _ in range(150):
                    if not coll_perf_pids(netns_inodes):
                        break
                    time.sleep(0.1)
            observed["ranks_left"] = len(coll_perf_pids(netns_inodes))
            if observed["ranks_left"] or observed["killed_by_matrix"]:
                end_everything_in(cluster)  # the next cell starts on a quiet fleet
        finally:
            if killer is not None:
                killer.stop()
            clear_faults(cluster)
        for name, text in (("stdout.txt", stdout), ("stderr.txt", stderr)):
            with open(os.path.join(cell_dir, name), "w") as handle:
                handle.write(text or "")
        if cell["tool"] == "baseline" and observed["elapsed_s"] is not None:
            # Every progress line stamped as it came: the ETA it printed against the real end (eta_lines.py).
            fault_at_s = None if killer is None or killer.fired_at is None else round(killer.fired_at - started, 1)
            eta_lines.write_eta(os.path.join(cell_dir, "eta.json"), observed["exit"], observed["elapsed_s"], fault_at_s,
                                stamped)
            observed["eta_after_sanity"] = eta_lines.judge_lines(stamped, observed["elapsed_s"])[1]
        observed.update(observe(cell["tool"], os.path.join(results, cell["id"]), stdout, stderr))
        injected = _read_text(marks).split("\n")
        observed["injected"] = [line for line in injected if line.strip()]
        if cell["fault"]["fault"] == "hung_case":  # coll_perf's own words, in the run's log
            log = _read_text(os.path.join(results, cell["id"], "run.log"))
            observed["injected"] = [line.strip() for line in log.splitlines() if STALL_WORDS in line][:4]
        return observed

    def run(self, cells, budget_s=None, on_progress=None, lanes=1, expected_s=None):
        """Runs the cells in `lanes` lanes side by side, each lane with its own virtual cluster per fleet size (its
        own namespaces, bridges and links, so no two cells share a rate-limited link), faults applied and cleared in
        turn. The cells are taken longest first (expected_s: id -> seconds, e.g. a committed results file; else the
        cell's limit_s) by whichever lane is free: the matrix ends when its longest lane does. budget_s: a cell that
        could not end within it (its limit_s) is recorded as not run; on_progress(results) after every cell."""
        rows = []
        started = time.monotonic()
        fleets = {}
        order = {cell["id"]: index for index, cell in enumerate(cells)}
        lock = threading.Lock()
        bring_up = threading.Lock()  # one fleet comes up at a time: vcluster's probe namespace is per process

        def results():
            return {"format": RESULTS_FORMAT, "backend": self.backend,
                    "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "commit": _commit(), "total_s": round(time.monotonic() - started, 1), "fleet_s": dict(fleets),
                    "lanes": lanes, "cells": sorted(rows, key=lambda row: order[row["id"]])}

        for cell in cells:
            if not runnable(cell):
                rows.append(self.row(cell, None, "note", []))
        queue = lane_order([cell for cell in cells if runnable(cell)], expected_s or {})

        def take():
            with lock:
                return queue.pop(0) if queue else None

        def finish(row, lane, size, fleet_started):
            with lock:
                rows.append(row)
                fleets[f"{lane}:{size}" if lanes > 1 else str(size)] = round(time.monotonic() - fleet_started, 1)
                if on_progress:
                    on_progress(results())

        # With a CPU for every lane, each lane and everything it starts (the tool, mpirun, the ranks: children inherit
        # the starting thread's affinity) runs on a CPU of its own: a cell's pairs are never slowed by another lane's
        # work, which on the MPI backend (host memory, TCP) could pass for a slow node or rail.
        cpus = sorted(os.sched_getaffinity(0))
        pin = lanes > 1 and len(cpus) >= lanes

        def lane_main(lane):
            clusters = {}  # size -> (cluster, its namespaces' inodes, when it came up)
            if pin:
                os.sched_setaffinity(0, {cpus[lane - 1]})  # 0: this thread, and what it starts from now on
            try:
                while (cell := take()) is not None:
                    limit_s = float(cell.get("limit_s", DEFAULT_LIMIT_S))
                    size = int(cell["nodes"])
                    if budget_s is not None and time.monotonic() - started + limit_s > budget_s:
                        finish(self.row(cell, None, "not run", [f"--budget-s {budget_s:g}: its limit "
                                                                 f"{limit_s:g} s would not fit"]), lane, size, started)
                        self.say(f"  {cell['id']}: not run (budget)")
                        continue
                    if size not in clusters:
                        fleet_started = time.monotonic()
                        with bring_up:
                            cluster = vcluster.Cluster(fleet(size)).up()
                        clusters[size] = (cluster, {os.stat(f"/run/netns/{cluster.ns(node)}").st_ino
                                                    for node in cluster.nodes}, fleet_started)
                        self.say(f"lane {lane}: fleet of {size} up in {time.monotonic() - fleet_started:.1f} s")
                    cluster, netns_inodes, fleet_started = clusters[size]
                    finish(self.run_and_judge(cluster, cell, netns_inodes), lane, size, fleet_started)
            except BaseException as error:  # a fleet that cannot come up: the lane's cells are errors, not lost
                with lock:
                    left = [queue.pop(0) for _ in range(len(queue))] if isinstance(error, Exception) else []
                for cell in left:
                    finish(self.row(cell, None, "error", [f"lane {lane}: {error}"]), lane, int(cell["nodes"]), started)
                if not isinstance(error, Exception):
                    raise
                self.say(f"lane {lane}: error: {error}")
            finally:
                for cluster, _, _ in clusters.values():
                    cluster.down()

        # SIGTERM/SIGINT/SIGHUP end the matrix through SystemExit in this thread (the lanes are daemons); each
        # cluster's reaper then tears down what its lane left, as it does after a kill -9.
        old_handlers = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                old_handlers[signum] = signal.signal(signum, vcluster._exit_on_signal)
        try:
            if lanes <= 1:
                lane_main(1)
            else:
                threads = [threading.Thread(target=lane_main, args=(lane,), name=f"lane{lane}", daemon=True)
                           for lane in range(1, lanes + 1)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
        finally:
            for signum, handler in old_handlers.items():
                signal.signal(signum, handler)
        return results()

    def run_and_judge(self, cluster, cell, netns_inodes):
        try:
            observed = self.run_cell(cluster, cell, netns_inodes)
        except (MatrixError, vcluster.VClusterError, OSError) as error:
            self.say(f"  {cell['id']}: error: {error}")
            return self.row(cell, None, "error", [str(error)])
        problems = judge(cell["expect"], observed)
        if cell["fault"]["fault"] in INJECTED_FAULTS and not observed["injected"]:
            status = "not injected"
            problems.insert(0, f"the injector never fired: {observed['injector_missed']}" if observed.get("injector_missed")
                            else "the injector never fired (coll_perf ended or never started on "
                                 f"{cell['fault']['node']} in a cross-host launch)")
        else:
            status = "fail" if problems else "pass"
        self.say(f"  {cell['id']}: {status.upper()} exit {observed['exit']} in {observed['elapsed_s']} s; "
                 f"{observed['result']}; codes {','.join(observed['codes']) or '-'}"
                 + "".join(f"\n      - {problem}" for problem in problems))
        return self.row(cell, observed, status, problems)

    @staticmethod
    def row(cell, observed, status, problems):
        row = {"id": cell["id"], "nodes": int(cell["nodes"]), "tool": cell["tool"], "fault": cell["fault"],
               "expect": cell["expect"], "status": status, "problems": problems}
        if observed is not None:
            row["observed"] = {key: observed.get(key) for key in
                               ("exit", "elapsed_s", "result", "codes", "bad_nodes", "bad_links", "bad_rails",
                                "ranks_left", "injected", "killed_by_matrix", "last_line")}
            for key in ("fault_to_end_s", "eta_after_sanity", "stopped_by"):
                if observed.get(key) is not None:
                    row["observed"][key] = observed[key]
        return row


def _commit():
    result = subprocess.run(["git", "-C", SOURCE_DIR, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or None


# ---------------------------------------------------------------------------------------------- render

def _expected_words(expect):
    if expect.get("note"):
        return "note: " + expect["note"]
    parts = []
    codes = list(expect.get("codes", []))
    codes += [wanted["code"] for wanted in expect.get("find", []) if wanted["code"] not in codes]
    if expect.get("codes_any"):
        codes.append(" or ".join(f"{code}" for code in expect["codes_any"]))
    subjects = []
    for key in ("bad_nodes", "bad_links", "bad_rails"):
        subjects += expect.get(key, [])
    for wanted in expect.get("find", []):
        subject = wanted.get("link") or ":".join(v for v in (wanted.get("node"), wanted.get("rail")) if v)
        if subject and subject not in subjects:
            subjects.append(subject)
    if codes:
        parts.append(", ".join(" or ".join(f"`{c}`" for c in code.split(" or ")) for code in codes))
    elif "result" in expect:  # no code: the verdict itself (a healthy control)
        parts.append("/".join(map(str, _as_list(expect["result"]))))
    if subjects:
        parts[-1:] = [" ".join(parts[-1:] + ["(" + ", ".join(subjects) + ")"])]
    if "exit" in expect:
        parts.append(f"exit {'/'.join(map(str, _as_list(expect['exit'])))}")
    if "within_s" in expect:
        parts.append(f"< {expect['within_s']} s")
    return ", ".join(parts) or "-"


STATUS_WORDS = {"pass": "yes", "fail": "**not yet**", "not injected": "not injected", "error": "error", "note": "",
                "not run": "not run"}


def render_table(results):
    """Markdown: one row per fault class, one column per tool and fleet size; each cell the expected verdict and
    codes and whether this cclbench gave them, with the seconds the tool took to its verdict (the whole command:
    for a hang, the hang and the healthy work before it); the last column the longest of them."""
    rows = results["cells"]
    columns = sorted({(row["tool"], row["nodes"]) for row in rows}, key=lambda c: (c[0] != "baseline", c[1]))
    faults = [kind for kind in FAULT_ORDER if any(row["fault"]["fault"] == kind for row in rows)]
    head = "| fault | " + " | ".join(f"{tool}, {size} nodes" for tool, size in columns) + " | time to the verdict |"
    lines = [head, "|---|" + "---|" * len(columns) + "---|"]
    for kind in faults:
        cells = []
        times = []
        for tool, size in columns:
            found = [row for row in rows
                     if row["fault"]["fault"] == kind and row["tool"] == tool and row["nodes"] == size]
            texts = []
            for row in found:
                text = _expected_words(row["expect"])
                status = STATUS_WORDS.get(row["status"], row["status"])
                elapsed = (row.get("observed") or {}).get("elapsed_s")
                if status and isinstance(elapsed, (int, float)):
                    status += f" ({elapsed:.0f} s)"
                    times.append(elapsed)
                texts.append(f"{text}: {status}" if status else text)
            cells.append("<br>".join(texts).replace("|", "\\|") or "-")
        longest = f"up to {max(times):.0f} s" if times else "-"
        lines.append(f"| {FAULT_TITLES[kind]} | " + " | ".join(cells) + f" | {longest} |")
    passed = sum(row["status"] == "pass" for row in rows)
    judged = sum(row["status"] != "note" for row in rows)
    lines.append("")
    lines.append(f"{passed} of {judged} cells as expected ({results['backend']} backend, commit "
                 f"{results.get('commit') or '?'}, {results.get('total_s')} s); \"not yet\": cclbench does not "
                 "give that verdict today.")
    return "\n".join(lines) + "\n"


def readme_block(readme_text):
    try:
        start = readme_text.index(README_BEGIN) + len(README_BEGIN)
        end = readme_text.index(README_END, start)
    except ValueError:
        return None
    return readme_text[start:end].strip("\n") + "\n"


# ------------------------------------------------------------------------------------------------- CLI

def main(argv=None):
    parser = argparse.ArgumentParser(prog="fault_matrix.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the cells on the virtual cluster; write DIR/fault_matrix_results.json")
    run.add_argument("--cells", required=True)
    run.add_argument("--out", required=True)
    run.add_argument("--only", help="comma-separated cell ids")
    run.add_argument("--budget-s", type=float, help="record a cell as not run when its limit_s would end past this")
    run.add_argument("--lanes", type=int, default=1,
                     help="cells run side by side in this many lanes, each on its own virtual clusters [1]")
    run.add_argument("--expected", help="a results file whose cells' seconds order the lanes (longest first)")
    run.add_argument("--part", help="I/N: only part I of N, the cells dealt by --expected's times so that the N parts "
                                    "take about as long (CTest runs the parts side by side, a CPU each)")
    run.add_argument("--backend", choices=("mpi", "nccl"), default="mpi",
                     help="mpi: GPU-less hosts (CI); nccl: NCCL over sockets, every node's rank on the one GPU")
    table = sub.add_parser("table", help="print the markdown table of a results file")
    table.add_argument("results")
    check = sub.add_parser("check-readme", help="exit 1 when the README's table differs from `table RESULTS`")
    check.add_argument("results")
    check.add_argument("readme")
    args = parser.parse_args(argv)
    try:
        if args.command == "table":
            sys.stdout.write(render_table(_read_results(args.results)))
            return 0
        if args.command == "check-readme":
            expected = render_table(_read_results(args.results))
            with open(args.readme, encoding="utf-8") as handle:
                found = readme_block(handle.read())
            if found is None:
                print(f"{args.readme}: no block between '{README_BEGIN}' and '{README_END}'", file=sys.stderr)
                return 1
            if found != expected:
                print(f"{args.readme}'s fault matrix table differs from `fault_matrix.py table {args.results}`; "
                      "paste this between the markers:\n" + expected, file=sys.stderr)
                return 1
            print(f"{args.readme}: the fault matrix table matches {args.results}")
            return 0
        defaults, cells = load_cells(args.cells)
        if args.only:
            wanted = set(args.only.split(","))
            unknown = wanted - {cell["id"] for cell in cells}
            if unknown:
                raise MatrixError(f"--only: no cell {', '.join(sorted(unknown))} in {args.cells}")
            cells = [cell for cell in cells if cell["id"] in wanted]
        if args.part:
            match = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", args.part)
            if not match or int(match.group(1)) > int(match.group(2)):
                raise MatrixError(f"--part {args.part!r}: I/N with 1 <= I <= N")
            cells = part_of(cells, int(match.group(1)), int(match.group(2)), expected_seconds(args.expected))
        try:
            vcluster.check_supported()
        except vcluster.Unsupported as error:
            print(f"fault_matrix: skipped: {error}", file=sys.stderr)
            return vcluster.SKIP
        if not os.access(os.path.join(APPS, "coll_perf"), os.X_OK):
            print(f"fault_matrix: skipped: coll_perf not built ({APPS})", file=sys.stderr)
            return vcluster.SKIP
        path = os.path.join(os.path.abspath(args.out), "fault_matrix_results.json")

        def write(results):  # after every cell: a run ended from outside keeps what it measured
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as handle:
                json.dump(results, handle, indent=1)
                handle.write("\n")
            os.replace(path + ".tmp", path)
        if not 1 <= args.lanes <= 8:
            raise MatrixError(f"--lanes {args.lanes}: 1 to 8")
        vcluster.pin_to_allocated_cpus()  # under CTest's resource allocation: the CPU it gave this part
        results = Runner(args.out, args.backend, defaults).run(cells, budget_s=args.budget_s, on_progress=write,
                                                               lanes=args.lanes,
                                                               expected_s=expected_seconds(args.expected))
        write(results)
        print_summary(results)
        print(f"results: {path}")
        return 0 if all(row["status"] in ("pass", "note") for row in results["cells"]) else 1
    except MatrixError as error:
        print(f"fault_matrix: error: {error}", file=sys.stderr)
        return 2


def _read_results(path):
    results = _read_json(path)
    if not results or results.get("format") != RESULTS_FORMAT:
        raise MatrixError(f"{path}: not a fault matrix results file ({RESULTS_FORMAT})")
    return results


def print_summary(results):
    print("| cell | status | exit | s | result | codes seen |")
    print("|---|---|---|---|---|---|")
    for row in results["cells"]:
        seen = row.get("observed") or {}
        print(f"| {row['id']} | {row['status']} | {seen.get('exit', '-')} | {seen.get('elapsed_s', '-')} | "
              f"{seen.get('result', '-')} | {','.join(seen.get('codes') or []) or '-'} |")
        for problem in row["problems"]:
            print(f"|   | - {problem} | | | | |")
    print(f"total {results['total_s']} s; fleets {results['fleet_s']}")


if __name__ == "__main__":
    sys.exit(main())
