"""The rails of each host and the path MTU between hosts (doctor --hosts; the probing is execute/path_mtu.py, the
run's own path check after a failed launch execute/doctor.recheck_paths): which interfaces are rails, their link
rates, which peer each host probes on each rail, and the probes' results judged (a dead path, a narrow one).
"""

import ipaddress
import os

from .doctor_network import device_matches, parse_device_list, port_netdevs, roce_ports
from .doctor_node import parse_int, result


# --- rails and the path MTU between hosts (doctor --hosts; the probing is execute/path_mtu.py) ---------

PATH_MTU_MIN = 576  # every IPv4 path carries this much (RFC 791): below it a rail is unreachable, not narrow


def rail_selection(node, env, addresses):
    """This host's interfaces for the path MTU check, as the document's "rails" entry.

    addresses: {netdev: (IPv4 address text, prefix length)} of the live host (None for a fixture root).
    The rails are the netdevs behind the RoCE ports NCCL would use (NCCL_IB_HCA); without any, the
    interfaces NCCL_SOCKET_IFNAME names (a list, not ^exclusions); without that either, none: every
    IPv4 interface is still listed, and the cluster step takes the ones on another host's rail subnets
    (a host whose ranks did not get the variable still has its rails found)."""
    if addresses is None:
        return {"source": None, "interfaces": [], "reason": "fixture root: interface addresses are live-only"}
    rails, source = [], None
    ports = roce_ports(node, env)
    if ports:
        rails = sorted({netdev for port in ports for netdev in port_netdevs(node, port)})
        source = "roce"
    else:
        ifname = env.get("NCCL_SOCKET_IFNAME")
        if ifname:
            exclude, exact, items = parse_device_list(ifname)
            if not exclude:
                rails = sorted(name for name in addresses if any(device_matches(name, want, exact) for want, _ in items))
                source = "NCCL_SOCKET_IFNAME"
    interfaces = []
    for name in sorted(addresses):
        address, prefix = addresses[name]
        text, _ = node.reader.read(node.reader.sysfs("class", "net", name, "mtu"))
        interfaces.append({"name": name, "address": address, "prefixlen": prefix, "mtu": parse_int(text),
                           "rail": name in rails})
    reason = None if source else ("no RoCE port and no NCCL_SOCKET_IFNAME here: the rails are the interfaces on "
                                  "another host's rail subnets")
    return {"source": source, "interfaces": interfaces, "reason": reason}


# Where sysfs keeps network interfaces that no device backs (veth, bridge, bond, VLAN, tun).
VIRTUAL_NETDEV_DIR = "/devices/virtual/net/"


def link_rates(node):
    """This host's link rates, as the document's "links" entry: what the baseline's ceilings and line-rate context
    come from (rules/ceilings.py), never a constant of one cluster. netdevs: every interface but lo with its
    class/net/<if>/speed (Mb/s; -1, 0 or unreadable is unknown: null with the reason; a virtual or down link has
    none); rdma_ports: every RDMA port's rate (Gb/s) and its netdevs; gpus: every NVIDIA GPU's PCIe link, its
    max_link_speed (GT/s) and max_link_width (what the link can carry; the pcie_link check says when it runs
    below)."""
    netdevs = {}
    names, _why = node.reader.listdir(node.reader.sysfs("class", "net"))
    for name in names:
        if name == "lo":
            continue
        path = node.reader.sysfs("class", "net", name, "speed")
        text, why = node.reader.read(path)
        speed = parse_int(text)
        if VIRTUAL_NETDEV_DIR in os.path.realpath(node.reader.sysfs("class", "net", name)):
            # veth, bridges, bonds, VLANs: the kernel reports a nominal speed (veth says 10000 Mb/s), not what the
            # wire carries (two namespaces' veth pair moved 1.6 GB/s of bus bandwidth over a "10 Gb/s" link).
            netdevs[name] = {"speed_mbps": None, "reason": f"{name} is a virtual interface (sysfs "
                             f"{VIRTUAL_NETDEV_DIR}): its speed ({(text or '?').strip()[:20]} Mb/s) is nominal, "
                             "not a line rate"}
        elif speed is None or speed <= 0:
            reason = why or f"{path} reads '{(text or '')[:20]}': no known speed (a virtual or down link)"
            netdevs[name] = {"speed_mbps": None, "reason": reason}
        else:
            netdevs[name] = {"speed_mbps": speed, "reason": None}
    ports = {}
    for port in node.ports():
        ports[port.name] = {"rate_gbps": port.rate_gbps, "netdevs": port_netdevs(node, port),
                            "reason": None if port.rate_gbps is not None else "; ".join(port.problems) or "rate unknown"}
    gpus = [{"bus_id": gpu.bdf, "max_link_speed_gts": gpu.link.get("max_link_speed"),
             "max_link_width": gpu.link.get("max_link_width")} for gpu in node.gpus()]
    return {"netdevs": netdevs, "rdma_ports": ports, "gpus": gpus}


def _subnet(interface):
    try:
        return ipaddress.ip_network(f"{interface['address']}/{interface['prefixlen']}", strict=False)
    except (KeyError, TypeError, ValueError):
        return None


def path_mtu_targets(rails_by_host):
    """{host: "rails" entry or None} -> (targets, problems).

    targets: {host: [{"netdev", "mtu", "peer", "peer_netdev", "peer_mtu", "address", "subnet"}]}: every host
    probes every other host on every rail subnet (a subnet where some host has a rail interface; where no
    host has one, every subnet two hosts share), at its own interface's MTU, to the peer's address there.
    problems: check results for what cannot be probed."""
    subnets = {}
    for host, rails in rails_by_host.items():
        for interface in (rails or {}).get("interfaces") or []:
            net = _subnet(interface)
            if interface.get("rail") and net is not None:
                subnets.setdefault(net, (host, interface["name"]))
    if not subnets:
        # No RoCE port and no NCCL_SOCKET_IFNAME anywhere: NCCL may use any interface, so every subnet that
        # two hosts share is checked (the management network included).
        seen = {}
        for host, rails in rails_by_host.items():
            for interface in (rails or {}).get("interfaces") or []:
                net = _subnet(interface)
                if net is not None:
                    seen.setdefault(net, []).append((host, interface["name"]))
        subnets = {net: owners[0] for net, owners in seen.items() if len({h for h, _ in owners}) > 1}
    members = {net: {} for net in subnets}
    for host, rails in rails_by_host.items():
        for interface in (rails or {}).get("interfaces") or []:
            net = _subnet(interface)
            if net in members:
                members[net].setdefault(host, interface)
    targets, problems = {}, []
    hosts = list(rails_by_host)
    for net in sorted(subnets, key=str):
        owner, name = subnets[net]
        for host in hosts:
            if host not in members[net]:
                if rails_by_host.get(host) is not None and (rails_by_host[host].get("interfaces")):
                    problems.append(dict(result("path_mtu", "fail", f"{host} {net}", "path",
                                                f"{host} has no interface on rail subnet {net} ({name} of {owner}): "
                                                f"this rail cannot reach {host}; give its interface an address "
                                                f"there or leave the rail out"), host=host))
                continue
            local = members[net][host]
            for peer in hosts:
                if peer == host or peer not in members[net]:
                    continue
                remote = members[net][peer]
                if remote["address"] == local["address"]:
                    problems.append(dict(result("path_mtu", "skip", f"{host}:{local['name']} -> {peer}:{remote['name']}",
                                                "path", f"{host} and {peer} both have {local['address']} on {net}: one "
                                                "host under two names (or an address conflict); nothing to probe"),
                                         host=host))
                    continue
                targets.setdefault(host, []).append(
                    {"netdev": local["name"], "mtu": local.get("mtu"), "peer": peer, "peer_netdev": remote["name"],
                     "peer_mtu": remote.get("mtu"), "address": remote["address"], "subnet": str(net)})
    if not subnets:
        sources = [host for host, rails in rails_by_host.items() if rails is None or not rails.get("interfaces")]
        why = (f"no interface addresses from {', '.join(sources)}" if sources else
               "no rail on any host (no RoCE port, no NCCL_SOCKET_IFNAME) and no subnet the hosts share")
        problems.append(dict(result("path_mtu", "skip", "cluster", "cluster", why), host="*"))
    return targets, problems


def check_path_mtu(targets, probes):
    """targets: path_mtu_targets' first value; probes: {host: [probe result] or a reason string (no probe
    result from that host)}. A probe result: {"netdev", "address", "size", "ok", "largest", "method",
    "reason"}; largest: the largest don't-fragment datagram (IP bytes) that got an echo reply, None when
    none did. One result per host, rail and peer."""
    results = []
    for host in targets:
        found = probes.get(host)
        for target in targets[host]:
            subject = f"{host}:{target['netdev']} -> {target['peer']}:{target['peer_netdev']}"
            ends = (f"MTU {target['mtu']} on {host}, {target['peer_mtu']} on {target['peer']}"
                    if target["mtu"] != target["peer_mtu"] else f"MTU {target['mtu']} at both ends")
            if not isinstance(found, list):
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"no probe result from {host}: {found or 'not probed'}"), host=host))
                continue
            probe = next((p for p in found if isinstance(p, dict) and p.get("netdev") == target["netdev"]
                          and p.get("address") == target["address"]), None)
            if probe is None:
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"{host} returned no probe of {target['address']}"), host=host))
            elif probe.get("ok") is None:
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"cannot probe from {host}: {probe.get('reason')}"), host=host))
            elif probe["ok"]:
                results.append(dict(result("path_mtu", "pass", subject, "path",
                                           f"{probe['size']}-byte don't-fragment packets reach {target['address']} "
                                           f"and back ({ends})"), host=host))
            elif probe.get("largest") is None:
                results.append(dict(result("path_mtu", "fail", subject, "path",
                                           f"{PATH_DOWN_WORDS} {target['address']} even at {PATH_MTU_MIN} bytes "
                                           f"({ends}): the rail is down or blocked between {host} and "
                                           f"{target['peer']} ({probe.get('reason') or 'no reply'})"), host=host))
            else:
                results.append(dict(result("path_mtu", "fail", subject, "path",
                                           f"{ends}, but the largest don't-fragment packet from {host} to "
                                           f"{target['peer']} ({target['address']}) is {probe['largest']} bytes: "
                                           f"a switch port or bridge on the path is at {probe['largest']}. NCCL "
                                           f"hangs and RoCE stalls on it: set the path to {probe['size']} (or "
                                           f"both hosts' {target['netdev']} to {probe['largest']})"), host=host))
    return results


# How a path_mtu failure with no reply at any size begins (check_path_mtu): the path is down, not too small.
PATH_DOWN_WORDS = "no echo reply from"


def path_mtu_down(check):
    """True for a failed path_mtu check whose path answered no echo at all, even at PATH_MTU_MIN bytes (a rail
    down or blocked), False for one whose largest packet that got through is smaller than the MTU."""
    return check.get("status") == "fail" and str(check.get("detail") or "").startswith(PATH_DOWN_WORDS)


def path_mtu_ends(check):
    """A path_mtu check's ends as check_path_mtu names them: (host, netdev, peer, peer_netdev) for a probe
    between two hosts ("host:netdev -> peer:peer_netdev"), (host, None, None, None) for a host with no interface on
    a rail subnet ("host subnet"), None for anything else (the cluster-wide skip)."""
    if not isinstance(check, dict) or check.get("id") != "path_mtu" or check.get("subject_kind") != "path":
        return None
    subject = check.get("subject") or ""
    if " -> " in subject:
        local, remote = subject.split(" -> ", 1)
        host, _, netdev = local.partition(":")
        peer, _, peer_netdev = remote.partition(":")
        return (host, netdev, peer, peer_netdev) if host and netdev and peer and peer_netdev else None
    host = check.get("host")
    return (host, None, None, None) if host and host != "*" else None


def path_checks_between(checks, hosts):
    """The path_mtu checks of a probe between these hosts only (both ends among them; a host's own "subnet" check
    where it is one of them), and the checks that name no path (the cluster-wide skip): what the probes between
    these hosts alone would have given. None where there are none to give: no checks, or fewer than two hosts."""
    if checks is None or len(hosts) < 2:
        return None
    wanted = set(hosts)
    kept = []
    for check in checks:
        ends = path_mtu_ends(check)
        if ends is None or (ends[0] in wanted and (ends[2] is None or ends[2] in wanted)):
            kept.append(check)
    return kept


def path_mtu_findings(checks):
    """The path_mtu failures of a doctor document's checks, one line each (a hung sanity pass names them)."""
    return [f"{check['subject']}: {check['detail']}" for check in checks
            if isinstance(check, dict) and check.get("id") == "path_mtu" and check.get("status") == "fail"]
