"""The doctor's checks of a node's network devices: the RDMA ports NCCL would use (state, rate, RoCE GID), the
netdevs' MTU under them and the NCCL_* variables that select devices. Pure functions over model/doctor_node.Node.
"""

from .doctor_node import ROCE_MIN_MTU, parse_int, result


def parse_device_list(value):
    """NCCL's device list syntax ('^' excludes, '=' exact names, else prefixes; name[:port]).
    Returns (exclude, exact, [(name, port|None)])."""
    text = (value or "").strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    items = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, port = part.partition(":")
        items.append((name, int(port) if port.isdigit() else (port or None)))
    return exclude, exact, items


def device_matches(name, wanted, exact):
    return name == wanted if exact else name.startswith(wanted)


def selected_ports(node, env):
    """The RDMA ports NCCL would consider under NCCL_IB_HCA (all of them without it)."""
    spec = env.get("NCCL_IB_HCA")
    ports = node.ports()
    if not spec:
        return ports, None
    exclude, exact, items = parse_device_list(spec)
    chosen = []
    for port in ports:
        hit = any(device_matches(port.hca, name, exact) and (want is None or want == port.number) for name, want in items)
        if hit != exclude:
            chosen.append(port)
    return chosen, spec


def check_rdma_port(node, env):
    if not node.hcas:
        return [result("rdma_port", "skip", "host", "host", "no RDMA device in class/infiniband" + node.root_note)]
    ports, spec = selected_ports(node, env)
    if not ports:
        return [result("rdma_port", "skip", "host", "host",
                       f"NCCL_IB_HCA={spec} selects none of the ports here (nccl_env says more)")]
    scope = f"NCCL_IB_HCA={spec}" if spec else "all ports (NCCL_IB_HCA is not set, so NCCL may use every one)"
    results = []
    best = {}
    for port in ports:
        if port.rate_gbps is not None and port.state[0] == 4:
            best[port.link_layer] = max(best.get(port.link_layer, 0), port.rate_gbps)
    for port in ports:
        state, phys = port.state, port.phys_state
        if state == (None, None) or phys == (None, None):
            results.append(result("rdma_port", "warn", port.name, "rdma_port",
                                  f"cannot read the port state ({'; '.join(port.problems)}): check with ibv_devinfo"))
            continue
        if state[0] != 4 or phys[0] != 5:
            results.append(result("rdma_port", "fail", port.name, "rdma_port",
                                  f"state {state[0]}: {state[1]}, phys_state {phys[0]}: {phys[1]} (want 4: ACTIVE, "
                                  f"5: LinkUp); checked: {scope}. Check the cable/transceiver and switch port "
                                  "(ibv_devinfo, ip link), or leave the port out of NCCL_IB_HCA"))
            continue
        peer_best = best.get(port.link_layer)
        if port.rate_gbps is None:
            results.append(result("rdma_port", "warn", port.name, "rdma_port",
                                  f"ACTIVE/LinkUp but the rate is unreadable ({'; '.join(port.problems)})"))
        elif peer_best and port.rate_gbps < peer_best:
            results.append(result("rdma_port", "fail", port.name, "rdma_port",
                                  f"ACTIVE at {port.rate_gbps:g} Gb/s, below its peers' {peer_best:g} Gb/s; checked: "
                                  f"{scope}. A slow rail holds back every ring through it: fix the link speed "
                                  "(cable, switch port, ethtool) or leave it out of NCCL_IB_HCA"))
        else:
            results.append(result("rdma_port", "pass", port.name, "rdma_port",
                                  f"ACTIVE, LinkUp, {port.rate_gbps:g} Gb/s, {port.link_layer}"))
    return results


def roce_ports(node, env):
    ports, _ = selected_ports(node, env)
    return [port for port in ports if port.link_layer == "Ethernet"]


def check_roce_gid(node, env):
    ports = roce_ports(node, env)
    if not ports:
        return [result("roce_gid", "skip", "host", "host", "no RoCE (Ethernet link layer) RDMA port selected here"
                       + node.root_note)]
    wanted_index = parse_int(env.get("NCCL_IB_GID_INDEX")) if env.get("NCCL_IB_GID_INDEX") else None
    results = []
    for port in ports:
        v2_ipv4 = [g for g in port.gids if (g["type"] or "").lower() == "roce v2" and g["address"].ipv4_mapped]
        v2_any = [g for g in port.gids if (g["type"] or "").lower() == "roce v2"]
        if not port.gids:
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  "no populated GID: the netdev has no IP address. Give it an IPv4 address "
                                  f"(ip addr add ... dev <netdev>){'; ' + '; '.join(port.problems) if port.problems else ''}"))
            continue
        if not v2_ipv4:
            hint = (f"only IPv6 RoCE v2 GIDs (index {v2_any[0]['index']}): set NCCL_IB_GID_INDEX="
                    f"{v2_any[0]['index']} and NCCL_IB_ADDR_FAMILY=AF_INET6, or give the netdev an IPv4 address") \
                if v2_any else "no RoCE v2 GID at all: enable RoCE v2 (cma_roce_mode) and give the netdev an IPv4 address"
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  f"no RoCE v2 GID on an IPv4-mapped address; {hint}"))
            continue
        first = v2_ipv4[0]
        where = f"index {first['index']} ({first['address'].ipv4_mapped}{' on ' + first['ndev'] if first['ndev'] else ''})"
        if wanted_index is not None and wanted_index not in {g["index"] for g in v2_ipv4}:
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  f"NCCL_IB_GID_INDEX={wanted_index} is not a RoCE v2 IPv4 GID here; use "
                                  f"NCCL_IB_GID_INDEX={first['index']} (RoCE v2 IPv4 GID at {where})"))
            continue
        results.append(result("roce_gid", "pass", port.name, "rdma_port",
                              f"RoCE v2 IPv4 GID at {where}; NCCL_IB_GID_INDEX={first['index']} pins it "
                              "(NCCL >= 2.21 picks it by itself)"))
    return results


def port_netdevs(node, port):
    names = sorted({g["ndev"] for g in port.gids if g["ndev"]})
    if names:
        return names
    hca = node.hca(port.hca)
    if hca and hca.bdf:
        found, _ = node.reader.listdir(node.reader.sysfs("bus", "pci", "devices", hca.bdf, "net"))
        return found
    return []


def check_netdev_mtu(node, env):
    ports = roce_ports(node, env)
    if not ports:
        return [result("netdev_mtu", "skip", "host", "host", "no RoCE (Ethernet link layer) RDMA port selected here"
                       + node.root_note)]
    results = []
    for port in ports:
        netdevs = port_netdevs(node, port)
        if not netdevs:
            results.append(result("netdev_mtu", "skip", port.name, "rdma_port",
                                  "no netdev found behind the port (no gid_attrs/ndevs entry, no net/ under its "
                                  "PCI device)"))
            continue
        for netdev in netdevs:
            text, why = node.reader.read(node.reader.sysfs("class", "net", netdev, "mtu"))
            mtu = parse_int(text)
            subject = f"{netdev} ({port.name})"
            if mtu is None:
                results.append(result("netdev_mtu", "warn", subject, "netdev",
                                      f"cannot read the MTU: {why or repr(text[:40])}; check with ip link show {netdev}"))
            elif mtu < ROCE_MIN_MTU:
                results.append(result("netdev_mtu", "warn", subject, "netdev",
                                      f"MTU {mtu} is below {ROCE_MIN_MTU}: RoCE runs with 1024-byte (or smaller) "
                                      f"packets instead of 4096. Set ip link set {netdev} mtu 9000 (and on the switch "
                                      "ports)"))
            else:
                results.append(result("netdev_mtu", "pass", subject, "netdev", f"MTU {mtu} (>= {ROCE_MIN_MTU})"))
    return results



def check_nccl_env(node, env):
    results = []
    active = [port for port in node.ports() if port.state[0] == 4]
    hca_names = [hca.name for hca in node.hcas]
    netdevs, _ = node.reader.listdir(node.reader.sysfs("class", "net"))
    spec = env.get("NCCL_IB_HCA")
    if spec:
        exclude, exact, items = parse_device_list(spec)
        problems = []
        for name, port in items:
            matches = [h for h in node.hcas if device_matches(h.name, name, exact)]
            if not matches:
                problems.append(f"{name} does not exist")
            elif port is not None and not any(p.number == port for h in matches for p in h.ports):
                problems.append(f"{name} has no port {port}")
        if not items:
            problems.append("it names no device")
        if problems and not exclude:
            results.append(result("nccl_env", "fail", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec}: {'; '.join(problems)} (RDMA devices here: "
                                  f"{', '.join(hca_names) or 'none'}). NCCL silently uses what matches, or falls "
                                  "back to sockets: fix the list"))
        elif problems:
            results.append(result("nccl_env", "warn", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec} excludes devices that do not exist ({'; '.join(problems)})"))
        else:
            results.append(result("nccl_env", "pass", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec}: every named device{'/port' if any(p for _, p in items) else ''}"
                                  " exists"))
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname:
        exclude, exact, items = parse_device_list(ifname)
        absent = [name for name, _ in items if not any(device_matches(n, name, exact) for n in netdevs)]
        if (absent or not items) and not exclude:
            results.append(result("nccl_env", "fail", "NCCL_SOCKET_IFNAME", "env",
                                  f"NCCL_SOCKET_IFNAME={ifname}: no interface matches {', '.join(absent) or 'it'} "
                                  f"(interfaces here: {', '.join(netdevs) or 'none'}); NCCL's bootstrap fails or "
                                  "picks another interface: fix the name"))
        else:
            results.append(result("nccl_env", "pass", "NCCL_SOCKET_IFNAME", "env",
                                  f"NCCL_SOCKET_IFNAME={ifname} matches interfaces here"))
    net = env.get("NCCL_NET")
    if net:
        if net.lower() == "socket" and active:
            results.append(result("nccl_env", "fail", "NCCL_NET", "env",
                                  f"NCCL_NET={net} forces TCP sockets although RDMA ports are ACTIVE "
                                  f"({', '.join(p.name for p in active)}): unset it to use NET/IB"))
        elif net.lower() == "ib" and not active:
            results.append(result("nccl_env", "fail", "NCCL_NET", "env",
                                  f"NCCL_NET={net} requires InfiniBand/RoCE but no RDMA port is ACTIVE here: "
                                  "NCCL init will fail"))
        elif net.lower() in ("ib", "socket"):
            results.append(result("nccl_env", "pass", "NCCL_NET", "env", f"NCCL_NET={net} fits the ports here"))
        else:
            results.append(result("nccl_env", "warn", "NCCL_NET", "env",
                                  f"NCCL_NET={net} names a network plugin, not IB or Socket: make sure it is "
                                  "installed on every host"))
    if env.get("NCCL_IB_DISABLE", "").strip() == "1" and active:
        results.append(result("nccl_env", "fail", "NCCL_IB_DISABLE", "env",
                              "NCCL_IB_DISABLE=1 forces TCP sockets although RDMA ports are ACTIVE "
                              f"({', '.join(p.name for p in active)}): unset it"))
    cross = env.get("NCCL_CROSS_NIC")
    if cross is not None:
        if cross.strip() in ("0", "1", "2"):
            results.append(result("nccl_env", "pass", "NCCL_CROSS_NIC", "env", f"NCCL_CROSS_NIC={cross}"))
        else:
            results.append(result("nccl_env", "fail", "NCCL_CROSS_NIC", "env",
                                  f"NCCL_CROSS_NIC={cross[:40]} is not 0, 1 or 2"))
    if not results:
        results.append(result("nccl_env", "pass", "env", "env",
                              "none of NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_NET, NCCL_IB_DISABLE, NCCL_CROSS_NIC "
                              "is set: NCCL chooses devices itself"))
    return results
