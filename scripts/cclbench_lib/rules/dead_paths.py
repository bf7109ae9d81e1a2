"""Dead paths between hosts, as data: what the doctor's path check and the run's own path checks found, which
launches need a path, and which node, rail or link the evidence names.

A launch across hosts that ends by a deadline, its watchdog or a failure of its launcher may have met a path that
died (a rail whose switch port stopped forwarding, carrier still up). Before the next launch over those hosts the
runner checks the paths again (the doctor's path MTU probe, execute/doctor.recheck_paths, bounded to seconds), and
a launch that needs a path found dead is not run: it would only wait out its own deadline and say nothing new.
Everything that needs no dead path still runs: launches on one host, and a point bound to a live rail alone.

What a launch needs (needed_rails): the MPI backend's TCP traffic goes over btl_tcp_if_include (names, or subnets
matched to the hosts' interfaces); NCCL's over NCCL_SOCKET_IFNAME (its bootstrap, and its socket transport) plus,
where the hosts have RDMA ports, the netdevs of the ports NCCL_IB_HCA selects. Where that cannot be told (no list,
an exclusion list, a subnet or port whose interface is unknown) the launch may use any path between its hosts.

Which fault the evidence names (attribute): per rail, a host whose every checked path on it is dead while another
host reaches a third on it is that rail's dead end (node3 eth3 when node1-node2 on eth3 is alive and node1-node3,
node2-node3 are not); a host whose own probe could not even send on the rail (network down or unreachable there)
is named by that alone; with no reference (two hosts), the path between them is named and which end is not told;
every path on a rail dead between three hosts or more is the rail itself (its switch, or every host's end).
A host the launcher could not reach for the check at all is unreachable.
"""

import ipaddress
import re

from ..model.doctor_network import parse_device_list
from ..model.doctor_paths import path_mtu_down, path_mtu_ends
from ..rules.rails import (NCCL_HCA_VAR, NCCL_SOCKET_VAR, TCP_IF_INCLUDE, TCP_IF_INCLUDE_ENV, _is_mpi, mca_value,
                           sibling_key, single_rail)

# A path's state in one check (observe).
ALIVE, DEAD, NARROW, DOWN_HERE, UNREACHED, UNKNOWN = "alive", "dead", "narrow", "down_here", "unreached", "unknown"
FAILED_STATES = (DEAD, NARROW, DOWN_HERE)
# check_path_mtu's skip of a probe that could not even leave its host on that rail (probe_one: the socket's error).
DOWN_HERE_RE = re.compile(r"probe failed: .*(Network is unreachable|Network is down|No such device|"
                          r"Cannot assign requested address)")
# check_path_mtu's skip of a host that returned no probe result at all (the launcher could not run it there).
UNREACHED_WORDS = "no probe result from "
# Launcher exit statuses that say nothing about the paths: some case failed or data was wrong, bad usage, the
# transport gate, nothing measured (execute/runner.EXIT_MEANINGS). Any other failure of a launch across hosts
# (its deadline, its watchdog, a peer lost, a runtime error, the launcher's own status, a signal) may be a path.
NOT_A_PATH_EXITS = (0, 1, 2, 3, 7)
TIMEOUT_EXIT = 4
QUOTED = 2

# The verdict's code (rules/verdict.py CODES) and its finding kinds.
PATH_DEAD = "path.dead"
NODE, LINK, RAIL, UNREACHABLE = "node", "link", "rail", "unreachable"


# --- a failed launch ---------------------------------------------------------------------------------------------

def crosses_hosts(launch):
    return len(set(launch.get("hosts") or [])) >= 2


def may_be_a_path(launch, exit_code):
    """Whether a failed launch's exit may come from a dead path: a launch across hosts that did not end by one of
    NOT_A_PATH_EXITS (nor failed to start here). A forced --ab variant counts only when it hung (NCCL refusing the
    variant fails it at once)."""
    if not crosses_hosts(launch) or exit_code is None or exit_code in NOT_A_PATH_EXITS:
        return False
    return exit_code == TIMEOUT_EXIT or not launch.get("ab")


# --- what the checks saw -----------------------------------------------------------------------------------------

def observe(checks, source, after=None):
    """The path_mtu results between two hosts (model/doctor_paths.check_path_mtu) as observations: [{"host",
    "netdev", "peer", "peer_netdev", "state", "subject", "detail", "source" ('doctor': the doctor before any launch;
    'run': the run's check after a failed launch), "after" (that launch)}]."""
    found = []
    for check in checks or []:
        ends = path_mtu_ends(check)
        if not ends or ends[1] is None:
            continue
        status, detail = check.get("status"), str(check.get("detail") or "")
        if status == "pass":
            state = ALIVE
        elif status == "fail":
            state = DEAD if path_mtu_down(check) else NARROW
        elif DOWN_HERE_RE.search(detail):
            state = DOWN_HERE
        elif detail.startswith(UNREACHED_WORDS):
            state = UNREACHED
        else:
            state = UNKNOWN
        found.append({"host": ends[0], "netdev": ends[1], "peer": ends[2], "peer_netdev": ends[3], "state": state,
                      "subject": check.get("subject"), "detail": detail, "source": source, "after": after})
    return found


def _key(item):
    return item["host"], item["netdev"], item["peer"], item["peer_netdev"]


def latest(observations):
    """The last observation of each directed path (observations in the order they were made)."""
    found = {}
    for item in observations:
        found[_key(item)] = item
    return list(found.values())


def failed_paths(observations):
    """The directed paths whose last check failed (dead, narrower than the MTU, or down at the probing host)."""
    return [item for item in latest(observations) if item["state"] in FAILED_STATES]


def unreached_hosts(observations):
    """{host: the check's words} of hosts whose last check returned no probe result at all."""
    last = {}
    for item in observations:
        if item["state"] in (ALIVE, DEAD, NARROW, DOWN_HERE, UNREACHED):
            last[item["host"]] = item
    return {host: item["detail"] for host, item in last.items() if item["state"] == UNREACHED}


# --- what a launch needs -----------------------------------------------------------------------------------------

def _subnet_interfaces(subnet, doctor):
    """The interface names, over every host of doctor.json's "rails", whose address is in `subnet`."""
    try:
        network = ipaddress.ip_network(subnet, strict=False)
    except ValueError:
        return []
    names = set()
    for entry in ((doctor or {}).get("rails") or {}).values():
        for interface in (entry or {}).get("interfaces") or []:
            try:
                if ipaddress.ip_address(interface.get("address")) in network:
                    names.add(interface["name"])
            except (TypeError, ValueError, KeyError):
                continue
    return sorted(names)


def _port_netdevs(doctor, spec):
    """The netdevs of the RDMA ports an NCCL_IB_HCA spec selects (every port without one), over every host of
    doctor.json's "links"; None when a selected port's netdev is unknown; [] when the hosts have no RDMA port."""
    exclude, exact, items = parse_device_list(spec)
    names, any_port = set(), False
    for entry in ((doctor or {}).get("links") or {}).values():
        for port, value in ((entry or {}).get("rdma_ports") or {}).items():
            any_port = True
            hca, _, number = port.partition(":")
            hit = not items or any((hca == name if exact else hca.startswith(name)) and
                                   (wanted is None or str(wanted) == number) for name, wanted in items)
            if hit == exclude and items:
                continue
            netdevs = (value or {}).get("netdevs") or []
            if not netdevs:
                return None
            names.update(netdevs)
    return sorted(names) if any_port else []


def needed_rails(launch, run_env=None, doctor=None):
    """The interfaces a launch across hosts sends over, as NCCL-style device lists ('=eth0', 'eth'); None when
    that cannot be told (it may use any path between its hosts)."""
    env = launch.get("env") or {}
    if _is_mpi(launch, ()):
        value = mca_value(launch.get("argv") or [], TCP_IF_INCLUDE) or env.get(TCP_IF_INCLUDE_ENV)
        if not value or value.startswith("^"):
            return None
        names = []
        for item in value.split(","):
            item = item.strip()
            if "/" in item:
                found = _subnet_interfaces(item, doctor)
                if not found:
                    return None
                names += found
            elif item:
                names.append(item)
        return ["=" + ",".join(sorted(set(names)))] if names else None
    socket = env.get(NCCL_SOCKET_VAR) or (run_env or {}).get(NCCL_SOCKET_VAR)
    if not socket or socket.strip().startswith("^"):
        return None  # NCCL picks its bootstrap and socket interfaces itself
    specs = [socket.strip()]
    ports = _port_netdevs(doctor, env.get(NCCL_HCA_VAR) or (run_env or {}).get(NCCL_HCA_VAR))
    if ports is None:
        return None
    if ports:
        specs.append("=" + ",".join(ports))
    return specs


def rail_needed(specs, netdev):
    """Whether an interface is one of needed_rails' lists (every interface when specs is None)."""
    if specs is None:
        return True
    for spec in specs:
        exclude, exact, items = parse_device_list(spec)
        hit = any((netdev == name) if exact else netdev.startswith(name) for name, _port in items)
        if hit != exclude:
            return True
    return False


def paths_needed(hosts, specs, paths):
    """The paths (observations or rules/doctor_gate paths with "netdevs") a launch over `hosts` needing `specs`
    would cross: both ends among its hosts and a rail it needs at either end."""
    hosts = set(hosts or [])
    if len(hosts) < 2:
        return []
    found = []
    for path in paths:
        ends = {path["host"], path["peer"]} if "peer" in path else set(path["hosts"])
        netdevs = (path["netdev"], path["peer_netdev"]) if "netdev" in path else tuple(path.get("netdevs") or ())
        if ends <= hosts and (not netdevs or any(rail_needed(specs, name) for name in netdevs if name)):
            found.append(path)
    return found


# --- which fault it is -------------------------------------------------------------------------------------------

def _rail_label(item):
    return item["netdev"] if item["netdev"] == item["peer_netdev"] else \
        "/".join(sorted((item["netdev"], item["peer_netdev"])))


def attribute(observations):
    """The faults the last state of each path names (module docstring): [{"kind": node|link|rail|unreachable,
    "hosts", "rails", "alive_rails" (node: its rails still alive), "paths" (the dead directed paths' subjects),
    "details" (their check words), "source": 'doctor' when every dead path of it was dead at the doctor's check,
    else 'run', "found_after" (the launch after which a check of the run first found it dead), "was_alive" (a
    check found one of its paths alive before)}]."""
    history = {}  # undirected path on a rail -> its observations in order
    for item in observations:
        if item["state"] in (ALIVE, DEAD, DOWN_HERE):
            pair = frozenset(((item["host"], item["netdev"]), (item["peer"], item["peer_netdev"])))
            history.setdefault((_rail_label(item), pair), []).append(item)
    state, streak = {}, {}
    for key, items in history.items():
        last_round = items[-1]["source"], items[-1]["after"]
        now = [item for item in items if (item["source"], item["after"]) == last_round]
        dead = any(item["state"] in (DEAD, DOWN_HERE) for item in now)
        state[key] = DEAD if dead else ALIVE
        if dead:
            alive_before = [i for i, item in enumerate(items) if item["state"] == ALIVE and
                            (item["source"], item["after"]) != last_round]
            first = alive_before[-1] + 1 if alive_before else 0
            streak[key] = {"items": [item for item in items[first:] if item["state"] in (DEAD, DOWN_HERE)],
                           "was_alive": bool(alive_before),
                           "alive_after": items[alive_before[-1]]["after"] if alive_before else None}
    down_here = {(item["host"], _rail_label(item)) for item in latest(observations) if item["state"] == DOWN_HERE}
    by_rail = {}
    for (label, pair), value in state.items():
        by_rail.setdefault(label, {})[pair] = value
    named, links, rails = {}, {}, []  # host -> {rail: pairs}; (a, b) -> {rail: pairs}
    for label, pairs in sorted(by_rail.items()):
        dead = [pair for pair, value in pairs.items() if value == DEAD]
        if not dead:
            continue
        hosts = sorted({host for pair in pairs for host, _ in pair})

        def ends(pair):
            return sorted(host for host, _ in pair)
        suspects = {host for host in hosts if any(host in ends(pair) for pair in dead) and
                    all(pairs[pair] == DEAD for pair in pairs if host in ends(pair))}
        blamed = {host for host in suspects if any(host in ends(pair) and set(ends(pair)) - suspects for pair in dead)}
        blamed |= {host for host, rail in down_here if rail == label}
        if not blamed and len(hosts) >= 3 and suspects == set(hosts):
            rails.append({"rail": label, "hosts": hosts, "pairs": dead})
            continue
        for pair in dead:
            a, b = ends(pair)
            hit = [host for host in (a, b) if host in blamed]
            for host in hit:
                named.setdefault(host, {}).setdefault(label, []).append(pair)
            if not hit:
                links.setdefault((a, b), {}).setdefault(label, []).append(pair)
    faults = []

    def described(kind, hosts, rail_pairs, **extra):
        items = [item for label, pairs in rail_pairs.items() for pair in pairs for item in streak[(label, pair)]["items"]]
        run = [item for item in items if item["source"] == "run"]
        streaks = [streak[(label, pair)] for label, pairs in rail_pairs.items() for pair in pairs]
        fault = {"kind": kind, "hosts": hosts, "rails": sorted(rail_pairs), "paths": sorted({i["subject"] for i in items}),
                 "details": [i["detail"] for i in items][:QUOTED], "source": "run" if run else "doctor",
                 "found_after": run[0]["after"] if run else None,
                 "was_alive": any(entry["was_alive"] for entry in streaks),
                 "alive_after": next((entry["alive_after"] for entry in streaks if entry["alive_after"]), None)}
        fault.update(extra)
        faults.append(fault)
    for host, rail_pairs in sorted(named.items()):
        alive = sorted({label for (label, pair), value in state.items() if value == ALIVE and
                        any(h == host for h, _ in pair)} - set(rail_pairs))
        described(NODE, [host], rail_pairs, alive_rails=alive)
    for (a, b), rail_pairs in sorted(links.items()):
        described(LINK, [a, b], rail_pairs)
    for entry in rails:
        described(RAIL, entry["hosts"], {entry["rail"]: entry["pairs"]})
    for host, words in sorted(unreached_hosts(observations).items()):
        faults.append({"kind": UNREACHABLE, "hosts": [host], "rails": [], "paths": [], "details": [words],
                       "source": "run" if any(item["source"] == "run" and item["host"] == host and
                                              item["state"] == UNREACHED for item in observations) else "doctor",
                       "found_after": next((item["after"] for item in observations if item["host"] == host and
                                            item["state"] == UNREACHED and item["source"] == "run"), None),
                       "was_alive": False, "alive_after": None})
    return faults


def dead_ends(checks, hosts, after=None):
    """The hosts among `hosts` whose own end of a path the checks (check_path_mtu's results, one check) name dead:
    attribute()'s node faults, [(host, its subject 'node3 eth0, eth3')]. A link whose end cannot be told (two hosts
    and no reference) names nobody: both ends stay."""
    return [(fault["hosts"][0], fault_subject(fault)) for fault in attribute(observe(checks, "run", after))
            if fault["kind"] == NODE and fault["hosts"][0] in hosts]


def without_stale_passes(earlier, later):
    """The path checks `earlier` (the screen's path MTU step) without those of a node that the checks `later` (the
    screen's own checks after failed pairs) name dead at its own end (attribute()'s node faults): those checks probed
    it again, on every subnet, to its partner and a reference, and what it reached before no longer holds. Its
    earlier passes to nodes no later check probed would else outweigh the nodes that fail with it now (the screen's
    rules weigh the nodes a node reaches against those it fails with), and its dead paths would read as links."""
    dead = {fault["hosts"][0] for fault in attribute(observe(later, "run")) if fault["kind"] == NODE}
    kept = []
    for check in earlier or []:
        ends = path_mtu_ends(check)
        if ends and (ends[0] in dead or ends[2] in dead):
            continue
        kept.append(check)
    return kept


def fault_subject(fault):
    """'node3 eth3', 'node1-node2 eth0, eth3', 'eth3 (node1, node2, node3)', 'node2 (unreachable)'."""
    rails = ", ".join(fault["rails"])
    if fault["kind"] == NODE:
        return f"{fault['hosts'][0]} {rails}"
    if fault["kind"] == LINK:
        return f"{'-'.join(fault['hosts'])} {rails}"
    if fault["kind"] == RAIL:
        return f"{rails} ({', '.join(fault['hosts'])})"
    return f"{fault['hosts'][0]} (unreachable)"


def run_not_run_reason(crossed, unreached, observations):
    """Why a launch is left out after a check of the run found a path it needs dead (or one of its hosts
    unreachable), in the check's words: 'not run: node3 eth3: no echo reply since inter.mpi (...)'."""
    keys = {_key(path) for path in crossed}
    faults = [fault for fault in attribute(observations)
              if fault["kind"] == UNREACHABLE and fault["hosts"][0] in unreached or
              any(_key(item) in keys for item in observations if item["subject"] in fault["paths"])]
    named = "; ".join(fault_subject(fault) for fault in faults) or \
        ", ".join(sorted({f"{path['host']}:{path['netdev']}" for path in crossed}))
    after = next((fault["found_after"] for fault in faults if fault.get("found_after")), None) or \
        next((path.get("after") for path in crossed if path.get("after")), None)
    words = [f"{path['subject']}: {path['detail']}" for path in crossed] + \
        [f"{host}: {detail}" for host, detail in sorted(unreached.items())]
    more = f" (and {len(words) - QUOTED} more)" if len(words) > QUOTED else ""
    return (f"not run: {named}: no echo reply since {after} (the run's path check after that launch failed: "
            + "; ".join(words[:QUOTED]) + more + "); it would only wait out its deadline. Fix the path, then resume")


# --- the verdict's finding ---------------------------------------------------------------------------------------

def _outcome(state):
    status = (state or {}).get("status")
    if status == "failed":
        return "hung" if state.get("exit_code") == TIMEOUT_EXIT else "failed"
    return {"complete": "complete", "skipped": "not run", "interrupted": "interrupted"}.get(status, "not reached")


def dead_path_findings(plan, points_state, doctor, run_checks, run_env=None):
    """The path.dead findings of a run, first of its verdict: every fault attribute() names from doctor.json's path
    checks (dead from the start) and the run's own (doctor/path_checks.json: died during the run), with the rest
    of the run's evidence: the launch that first met it (the first failed launch across its hosts that needs one
    of its paths), the launches left out for it, each rail alone on its hosts (complete, hung, not run) and the
    hosts every launch that may have failed on a path shared. Without any path check between the hosts, a rail
    alone that hung while its sibling alone completed on the same hosts is named as the rail (its end unknown)."""
    observations = observe((doctor or {}).get("checks"), "doctor")
    for entry in run_checks or []:
        if isinstance(entry, dict):
            observations += observe(entry.get("checks"), "run", entry.get("after"))
    order = {launch.get("name"): index for index, launch in enumerate(plan)}
    suspect = [launch for launch in plan if (points_state.get(launch.get("name")) or {}).get("status") == "failed"
               and may_be_a_path(launch, (points_state.get(launch["name"]) or {}).get("exit_code"))]
    shared = sorted(set.intersection(*[set(launch["hosts"]) for launch in suspect])) if suspect else []
    skipped = [launch for launch in plan if (points_state.get(launch.get("name")) or {}).get("status") == "skipped"]
    alone = [(launch, single_rail(launch)) for launch in plan if launch.get("kind") == "inter" and
             not launch.get("binding") and not launch.get("ab") and single_rail(launch)]
    findings = []
    for fault in attribute(observations):
        paths = [item for item in latest(observations) if item["subject"] in fault["paths"]]
        hosts = set(fault["hosts"])

        def meets(launch):
            if fault["kind"] == UNREACHABLE:
                return fault["hosts"][0] in (launch.get("hosts") or [])
            return bool(paths_needed(launch.get("hosts"), needed_rails(launch, run_env, doctor), paths))
        # The launch that first met it: the first that failed as a path fails and needs it, after the last check
        # that found it alive and no later than the check that found it dead.
        since = order.get(fault.get("alive_after"), -1)
        until = order.get(fault.get("found_after"), len(plan))
        first = next((launch["name"] for launch in suspect if since < order[launch["name"]] <= until and meets(launch)),
                     None) if fault["source"] == "run" else None
        rails_alone = {}
        for launch, (rail, _source) in alone:
            if hosts <= set(launch.get("hosts") or []):
                rails_alone.setdefault(rail, _outcome(points_state.get(launch["name"])))
        findings.append(dict(fault, code=PATH_DEAD, where=first or "doctor.json", first_met=first,
                             subject=fault_subject(fault), not_run=[l["name"] for l in skipped if meets(l)],
                             rails_alone=rails_alone, shared_by_failed=shared, basis="path_check"))
    if not findings and suspect and not any(item["state"] in (ALIVE, DEAD, DOWN_HERE) for item in observations):
        findings += _rails_alone_findings(alone, points_state, order, shared)
    return findings


def _rails_alone_findings(alone, points_state, order, shared):
    """No path check between the hosts: a rail alone that hung, where a sibling alone (same ranks, hosts, backend
    and variables but the rail) completed, is that rail; which host's end is not known."""
    found = []
    for launch, (rail, _source) in alone:
        state = points_state.get(launch["name"]) or {}
        if state.get("status") != "failed" or not may_be_a_path(launch, state.get("exit_code")):
            continue
        siblings = {other_rail: _outcome(points_state.get(other["name"])) for other, (other_rail, _) in alone
                    if sibling_key(other) == sibling_key(launch) and other_rail != rail}
        if "complete" in siblings.values() and not any(f["rails"] == [rail] for f in found):
            found.append({"code": PATH_DEAD, "kind": RAIL, "hosts": list(launch["hosts"]), "rails": [rail],
                          "paths": [], "details": [], "source": "run", "found_after": None, "was_alive": False,
                          "where": launch["name"], "first_met": launch["name"],
                          "subject": f"{rail} ({', '.join(launch['hosts'])})", "not_run": [],
                          "rails_alone": dict(siblings, **{rail: _outcome(state)}), "shared_by_failed": shared,
                          "basis": "rails_alone"})
    return sorted(found, key=lambda finding: order.get(finding["where"], 0))


def dead_hosts(finding):
    """The hosts whose rails column reads 'dead' for a path.dead finding: the named node, both ends of a link
    (which one is not known), every host of a dead rail, the unreachable host."""
    return list(finding.get("hosts") or [])


# --- MPI's own traffic off a dead rail ---------------------------------------------------------------------------

# Open MPI's own btl_tcp_if_exclude when nothing sets it (4.x and 5.x): loopback and PPP links. A list given replaces
# it, so ours repeats it.
OPEN_MPI_TCP_EXCLUDE = ("127.0.0.1/8", "sppp")
TCP_IF_EXCLUDE = "btl_tcp_if_exclude"
TCP_IF_EXCLUDE_ENV = "OMPI_MCA_btl_tcp_if_exclude"
MCA_FLAGS = ("--mca", "-mca", "--gmca", "-gmca")


def dead_netdevs(hosts, paths):
    """The interface names of the failed paths (observations, or the doctor gate's paths with "netdevs") with both
    ends among `hosts`, sorted."""
    names = set()
    for path in paths_needed(hosts, None, paths):
        ends = (path["netdev"], path["peer_netdev"]) if "netdev" in path else tuple(path.get("netdevs") or ())
        names.update(name for name in ends if name)
    return sorted(names)


def _without_dead(value, dead, doctor):
    """A btl_tcp_if_include list less the items that reach only dead interfaces (names; subnets by the interfaces
    doctor.json puts in them: a subnet whose interfaces are unknown is kept)."""
    kept = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        reaches = _subnet_interfaces(item, doctor) if "/" in item else [item]
        if reaches and set(reaches) <= set(dead):
            continue
        kept.append(item)
    return ",".join(kept)


def steer_mpi_traffic(argv, env, dead, doctor=None):
    """An NCCL launch's own MPI traffic (coll_perf's bootstrap broadcast, its result exchange: Open MPI's TCP BTL)
    kept off the interfaces of dead paths, so that a point bound to a live rail alone does not hang on MPI's messages
    over the dead one: (argv, env changes, words), or None where MPI's interfaces cannot be steered (its include list
    would be left empty: it needs nothing but dead rails). Unchanged (argv, {}, None) when there is nothing to do.
    The launcher's --mca settings are changed where it has them (Open MPI reads the last of a repeated parameter's
    values joined: the value is replaced in place), else the ranks' environment (OMPI_MCA_*, which mpirun forwards
    and srun passes): an include list less the dead interfaces, an exclude list plus them, or with neither an
    exclude list of Open MPI's own defaults plus them."""
    if not dead:
        return list(argv), {}, None
    argv = list(argv)
    for parameter, variable in ((TCP_IF_INCLUDE, TCP_IF_INCLUDE_ENV), (TCP_IF_EXCLUDE, TCP_IF_EXCLUDE_ENV)):
        places = [index + 2 for index in range(len(argv) - 2)
                  if argv[index] in MCA_FLAGS and argv[index + 1] == parameter]
        old = argv[places[-1]] if places else (env or {}).get(variable)
        if old is None:
            continue
        if parameter == TCP_IF_INCLUDE:
            new = _without_dead(old, dead, doctor)
            if not new:
                return None
        else:
            items = [item for item in old.split(",") if item]
            new = ",".join(items + [name for name in dead if name not in items])
        if new == old:
            return argv, {}, None
        words = f"Open MPI's TCP traffic kept off {', '.join(dead)}: {parameter} {old} -> {new}"
        if places:
            for index in places:
                argv[index] = new
            return argv, {}, words
        return argv, {variable: new}, words
    new = ",".join(list(OPEN_MPI_TCP_EXCLUDE) + list(dead))
    return argv, {TCP_IF_EXCLUDE_ENV: new}, f"Open MPI's TCP traffic kept off {', '.join(dead)}: {TCP_IF_EXCLUDE_ENV}={new}"
