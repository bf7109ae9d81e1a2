"""Physical busbw ceilings from the links' own rates, and which bound applies to a record.

A measured busbw above its ceiling is impossible on that hardware, so it points at a unit, timing or byte-count
error (or at an in-network reduction, which these machines do not have). The rates are the run's own, read on
each host (doctor.json "links": class/infiniband/*/ports/*/rate, class/net/IF/speed, each GPU's PCIe
max_link_speed and max_link_width; topology/<host>.json's RDMA port rates where the doctor has none), never a
constant of one cluster: where a rate is unknown there is no ceiling, and the reason says so.
  - inter-node: a rail carries at most its line rate / 8 GB/s per direction (400 Gb/s: 50 GB/s), so a point bound
    to rails R is capped at the sum of their rates, each the lowest of the hosts' ends. For ring/tree AllReduce,
    AllGather, ReduceScatter the busbw of a 2-node run is bounded by the per-node NIC bandwidth; All-to-All is
    bounded much lower (half of its bytes cross the nodes), so the same cap is a loose but safe bound for it.
  - intra-node, PCIe only: a GPU's link carries at most GT/s x lanes x encoding / 8 GB/s per direction (Gen5 x16:
    32 x 16 x 128/130 / 8 = 63.0); ring busbw cannot exceed the slowest GPU link of the point's hosts.
  - NVLink machines (the topology shows NVLink), emulated ranks (--share-gpu) and the MPI backend (host memory)
    are excluded: no PCIe/NIC ceiling applies to them.
"""

from ..model.run_dir import load_run_doctor, used_sockets
from ..rules.rails import is_bound, nccl_socket_interfaces, netdev_binding

BITS_PER_BYTE = 8
# PCIe line encoding: 8b/10b up to 5 GT/s (Gen1, Gen2), 128b/130b at 8-32 GT/s (Gen3-Gen5), FLIT mode at 64 GT/s
# (Gen6: 242 payload bytes of 256).
PCIE_128B130B_FROM_GTS = 8.0
PCIE_FLIT_FROM_GTS = 64.0
LIMIT_ROWS = [
    ("inter-node, per rail", "line rate / 8, summed over the point's rails",
     "each rail's rate on its hosts (RDMA port rate, netdev speed; the lowest end), from doctor.json 'links'",
     "cross-node points; none where a rate is unknown"),
    ("intra-node, PCIe", "GT/s x lanes x encoding / 8",
     "the slowest GPU's max_link_speed and max_link_width (Gen5 x16: 32 x 16 x 128/130 / 8 = 63.0)",
     "one-node points without NVLink; none where a link is unknown"),
    ("NVLink, emulated ranks, MPI backend", "not checked", "no PCIe/NIC bound applies", "-"),
]


def pcie_gbps(speed_gts, width):
    """Per-direction GB/s of a PCIe link: GT/s x lanes x encoding / 8; None when either is unknown."""
    if not speed_gts or not width:
        return None
    if speed_gts >= PCIE_FLIT_FROM_GTS:
        encoding = 242 / 256
    elif speed_gts >= PCIE_128B130B_FROM_GTS:
        encoding = 128 / 130
    else:
        encoding = 8 / 10
    return speed_gts * width * encoding / BITS_PER_BYTE


def link_rates(doctor, topology):
    """The run's link rates as data: {"rails": {(host, rail): Gb/s}, "gpus": {host: [GB/s or None per GPU]}}, rail
    an RDMA port ('mlx5_0:1') or an interface ('eth0'). doctor: the run's doctor.json (its "links", schema 1.1);
    topology: {host: topology/<host>.json}, whose RDMA port rates fill what the doctor did not record."""
    rails, gpus = {}, {}
    links = (doctor or {}).get("links") if isinstance(doctor, dict) else None
    for host, entry in (links or {}).items() if isinstance(links, dict) else []:
        if not isinstance(entry, dict):
            continue
        for name, port in (entry.get("rdma_ports") or {}).items():
            if isinstance(port, dict) and isinstance(port.get("rate_gbps"), (int, float)) and port["rate_gbps"] > 0:
                rails[(host, name)] = float(port["rate_gbps"])
        for name, netdev in (entry.get("netdevs") or {}).items():
            if isinstance(netdev, dict) and isinstance(netdev.get("speed_mbps"), int) and netdev["speed_mbps"] > 0:
                rails[(host, name)] = netdev["speed_mbps"] / 1000.0
        gpus[host] = [pcie_gbps(gpu.get("max_link_speed_gts"), gpu.get("max_link_width"))
                      for gpu in entry.get("gpus") or [] if isinstance(gpu, dict)]
    for host, document in (topology or {}).items():
        for nic in (document.get("nics") or []) if isinstance(document, dict) else []:
            for port in (nic.get("ports") or []) if isinstance(nic, dict) else []:
                rate = port.get("rate_gbps") if isinstance(port, dict) else None
                if isinstance(rate, (int, float)) and rate > 0:
                    rails.setdefault((host, f"{nic.get('name')}:{port.get('port')}"), float(rate))
    return {"rails": rails, "gpus": gpus}


def run_link_rates(data):
    """link_rates of a run directory (model/run_dir.RunData)."""
    return link_rates(load_run_doctor(data.run_dir)[0], data.topology)


def point_rails(data, launch, records=()):
    """(rails, None) the inter-node traffic of a point goes over, or (None, why unknown). Over NET/IB: the point's
    NCCL_IB_HCA, else the run's HCAs. Over sockets or TCP (NCCL NET/Socket, the MPI backend): the interfaces of
    --netdevs that the point is bound to (rules/rails.netdev_binding), else those of NCCL's 'NET/Socket : Using'
    line."""
    inputs = data.manifest.get("plan_inputs") or {}
    env = launch.get("env") or {}
    document = data.raw.get(launch.get("name"))
    mpi = "--backend" in (launch.get("argv") or [])[:-1] and \
        launch["argv"][launch["argv"].index("--backend") + 1] == "mpi"
    if not mpi and not used_sockets(document, records):
        hcas = [hca for hca in env.get("NCCL_IB_HCA", "").lstrip("=^").split(",") if hca] or list(inputs.get("hcas") or [])
        if hcas:
            return hcas, None
    netdevs = list(inputs.get("netdevs") or [])
    if not netdevs:
        used = nccl_socket_interfaces(document)
        netdevs = sorted({name for names in used.values() for name in names})
    if not netdevs:
        return None, "which interfaces carried it is unknown (no --netdevs, no NCCL 'NET/Socket : Using' line)"
    binding = netdev_binding(launch, document, records, data.manifest.get("env"))
    hosts = launch.get("hosts") or [None]
    bound = [name for name in netdevs if all(is_bound(binding, host, name) for host in hosts)]
    return (bound, None) if bound else (None, "no interface of --netdevs is one the point is bound to")


def line_rate(data, launch, rates, records=()):
    """(Gb/s, rails, text) of a cross-node point's rails: each rail's rate is the lowest of its hosts' ends, the
    point's the sum; (None, rails or None, why unknown) when a rail's rate or the rails are unknown."""
    rails, why = point_rails(data, launch, records)
    if rails is None:
        return None, None, why
    per_rail = []
    for rail in rails:
        values = [rates["rails"].get((host, rail)) for host in launch.get("hosts") or []]
        missing = [host for host, value in zip(launch.get("hosts") or [], values) if value is None]
        if missing or not values:
            return None, rails, f"line rate of {rail} unknown on {', '.join(missing) or 'its hosts'}"
        per_rail.append(min(values))
    same = len(set(per_rail)) == 1
    text = (f"{len(rails)} x {per_rail[0]:g} Gb/s" if same else " + ".join(f"{value:g}" for value in per_rail) + " Gb/s")
    return sum(per_rail), rails, text


def ceiling_for(data, launch, record, rates=None):
    """(ceiling_gbps, why) or (None, why-excluded or why unknown). rates: run_link_rates(data) where the caller
    has it already."""
    if record.get("emulated") or record.get("backend") == "mpi":
        return None, "emulated or MPI backend"
    if launch is None:
        return None, "point not in plan"
    rates = run_link_rates(data) if rates is None else rates
    if launch.get("kind") == "inter":
        gbit, _rails, text = line_rate(data, launch, rates, [record])
        if gbit is None:
            return None, f"no ceiling: {text}"
        return gbit / BITS_PER_BYTE, f"{text} rail(s)"
    if data.has_nvlink():
        return None, "NVLink machine"
    links = [value for host in launch.get("hosts") or [] for value in rates["gpus"].get(host) or [None]]
    if not links or None in links:
        return None, "no ceiling: a GPU's PCIe link is unknown (no doctor 'links' for its host)"
    return min(links), "PCIe link (slowest GPU)"


def rails_reason(records):
    """Why a point has no rail bytes, from the records' own reasons."""
    for record in records:
        rails = (record.get("evidence") or {}).get("rails") if isinstance(record.get("evidence"), dict) else None
        if isinstance(rails, dict):
            for node in rails.get("nodes") or []:
                if isinstance(node, dict) and (node.get("ib_reason") or node.get("error")):
                    return f"{node.get('host')}: {node.get('ib_reason') or node.get('error')}"
    if not records:
        return "no case records"
    return "the case records carry no rail counters (coll_perf without rail evidence)"
