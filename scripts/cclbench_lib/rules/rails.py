"""Rails per host: a rail that carries almost nothing while its sibling carries the point is dead, a lesser
imbalance is unbalanced; one rule for the rows of either source (model/run_dir.rail_bytes_per_host: "hca" port
counters or "netdev" interface counters), judged on each host and source apart (the two are never added).

Judged only where the host's busiest rail carried at least RAIL_JUDGED_MIN_BYTES over the point: below that the
point moved too little over the rails for a share to mean anything (a one-node point, background traffic).

Only the rails a point is bound to count (point_binding): a point over one rail on purpose (NCCL_SOCKET_IFNAME=eth0,
--mca btl_tcp_if_include eth0) leaves its sibling idle, and that idle rail is neither dead nor unbalanced."""

from ..model.doctor_checks import parse_device_list
from ..rules.ceilings import RAIL_IMBALANCE_RATIO

# A rail below this fraction of its busiest sibling's bytes is dead: healthy rails split a point about evenly
# (1.44 GB each over eth0 and eth3 on the virtual cluster, issue 26), a rail that is down carries ~0.
RAIL_DEAD_RATIO = 0.05
# The busiest rail of a host must have moved this much before its siblings are judged against it.
RAIL_JUDGED_MIN_BYTES = 1 << 20

RAIL_DEAD = "rail.dead"
RAIL_UNBALANCED = "rail.unbalanced"
RAIL_NO_COUNTERS = "rail.no_counters"


def judge_host_rails(entries):
    """Findings over rail_bytes_per_host() entries: [{"code", "host", "source", "from", "rail", "bytes", "share",
    "busiest", "busiest_bytes", "limit", "left_out", "cases"}] per rail that is dead (code RAIL_DEAD, limit RAIL_DEAD_RATIO) or
    unbalanced (busiest / this rail above RAIL_IMBALANCE_RATIO: code RAIL_UNBALANCED, limit that ratio), and
    {"code": RAIL_NO_COUNTERS, "host", "source", "from", "rail", "reasons"} per rail of a host whose every row
    was null while a sibling's counters were read. A host with one rail has no sibling to compare."""
    found = []
    for entry in entries:
        rails = entry.get("rails") or []
        known = [rail for rail in rails if rail.get("bytes") is not None]
        if len(rails) < 2 or not known:
            continue
        base = {"host": entry.get("host"), "source": entry.get("source"), "from": entry.get("from") or []}
        for rail in rails:
            if rail.get("bytes") is None:
                found.append(dict(base, code=RAIL_NO_COUNTERS, rail=rail["rail"], reasons=rail.get("reasons") or []))
        busiest = max(known, key=lambda rail: rail["bytes"])
        if entry.get("total_bytes") is None or busiest["bytes"] < RAIL_JUDGED_MIN_BYTES:
            continue  # no case with every rail known (no comparable whole), or too little moved to judge
        for rail in known:
            if rail is busiest:
                continue
            if rail["bytes"] < RAIL_DEAD_RATIO * busiest["bytes"]:
                code, limit = RAIL_DEAD, RAIL_DEAD_RATIO
            elif rail["bytes"] * RAIL_IMBALANCE_RATIO < busiest["bytes"]:
                code, limit = RAIL_UNBALANCED, RAIL_IMBALANCE_RATIO
            else:
                continue
            found.append(dict(base, code=code, rail=rail["rail"], bytes=rail["bytes"], share=rail.get("share"),
                              busiest=busiest["rail"], busiest_bytes=busiest["bytes"], limit=limit,
                              left_out=entry.get("left_out", 0), cases=entry.get("cases", 0)))
    return found


# -- which rails a point is bound to ------------------------------------------------------------------------------

# The variables and MCA parameter that bind a point's inter-node traffic to rails.
NCCL_HCA_VAR = "NCCL_IB_HCA"
NCCL_SOCKET_VAR = "NCCL_SOCKET_IFNAME"
TCP_IF_INCLUDE = "btl_tcp_if_include"
TCP_IF_INCLUDE_ENV = "OMPI_MCA_btl_tcp_if_include"


def mca_value(argv, name):
    """The value of `--mca NAME VALUE` (or -mca) in a launcher argv, the last one when repeated; None without."""
    value = None
    for index, item in enumerate(argv[:-2]):
        if item in ("--mca", "-mca") and argv[index + 1] == name:
            value = argv[index + 2]
    return value


def nccl_socket_interfaces(document):
    """{host: [interface names]} of NCCL's 'NET/Socket : Using' lines in a coll_perf -J document's transport
    evidence (processes[].socket_devices); {} when none was logged."""
    transport = document.get("transport") if isinstance(document, dict) else None
    evidence = transport.get("evidence") if isinstance(transport, dict) else None
    found = {}
    for process in (evidence.get("processes") or []) if isinstance(evidence, dict) else []:
        if not isinstance(process, dict) or not process.get("host"):
            continue
        for device in process.get("socket_devices") or []:
            name = device.get("name") if isinstance(device, dict) else None
            if name and name not in found.setdefault(process["host"], []):
                found[process["host"]].append(name)
    return {host: names for host, names in found.items() if names}


def _is_mpi(launch, records):
    argv = launch.get("argv") or []
    if "--backend" in argv[:-1] and argv[argv.index("--backend") + 1] == "mpi":
        return True
    return bool(records) and all(record.get("backend") == "mpi" for record in records)


def point_binding(launch, document=None, records=(), run_env=None):
    """The netdev rails a point's inter-node traffic is bound to, as data: {"source": what says so, "spec": an
    NCCL_SOCKET_IFNAME-style list (NCCL's device list syntax) or None, "by_host": {host: [names]} or None}; None
    when nothing binds it (every rail counts). In order: the MPI backend's btl_tcp_if_include of the launch
    (interface names; a list of subnets names no interface, so every rail counts); NCCL's 'NET/Socket : Using'
    line of the point (the interfaces NCCL really used, per host); NCCL_SOCKET_IFNAME of the point, else of the
    run (run_env)."""
    if launch is None:
        return None
    env = launch.get("env") or {}
    if _is_mpi(launch, records):
        value = mca_value(launch.get("argv") or [], TCP_IF_INCLUDE) or env.get(TCP_IF_INCLUDE_ENV)
        if not value or "/" in value:
            return None  # no list, or subnets: which interface carries them is each host's routing
        return {"source": TCP_IF_INCLUDE, "spec": "=" + value, "by_host": None}
    used = nccl_socket_interfaces(document)
    if used:
        return {"source": "NCCL NET/Socket : Using", "spec": None, "by_host": used}
    spec = env.get(NCCL_SOCKET_VAR) or (run_env or {}).get(NCCL_SOCKET_VAR)
    if spec:
        return {"source": NCCL_SOCKET_VAR, "spec": spec, "by_host": None}
    return None


def is_bound(binding, host, rail):
    """Whether a netdev rail of a host is one the point is bound to (point_binding); every rail is without one."""
    if binding is None:
        return True
    if binding.get("by_host") is not None:
        names = binding["by_host"].get(host)
        return names is None or rail in names  # a host whose NCCL log was not read: unknown, so it counts
    exclude, exact, items = parse_device_list(binding.get("spec"))
    hit = any((rail == name) if exact else rail.startswith(name) for name, _port in items)
    return hit != exclude


def bound_entries(entries, binding):
    """rail_bytes_per_host() entries with only the rails the point is bound to; each entry names the rails it
    left out ("unbound") and the binding's source ("bound_by"). The shares are left as the counters gave them."""
    kept = []
    for entry in entries:
        rails = [rail for rail in entry.get("rails") or [] if is_bound(binding, entry.get("host"), rail["rail"])]
        left = [rail["rail"] for rail in entry.get("rails") or [] if rail not in rails]
        kept.append(dict(entry, rails=rails, unbound=left, bound_by=binding.get("source") if binding else None))
    return kept
