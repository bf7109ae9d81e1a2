"""Rails per host: a rail that carries almost nothing while its sibling carries the point is dead, a lesser
imbalance is unbalanced; one rule for the rows of either source (model/run_dir.rail_bytes_per_host: "hca" port
counters or "netdev" interface counters), judged on each host and source apart (the two are never added).

Judged only where the host's busiest rail carried at least RAIL_JUDGED_MIN_BYTES over the point: below that the
point moved too little over the rails for a share to mean anything (a one-node point, background traffic).

Only the rails a point is bound to count (netdev_binding): a point over one rail on purpose (NCCL_SOCKET_IFNAME=eth0,
--mca btl_tcp_if_include eth0) leaves its sibling idle, and that idle rail is neither dead nor unbalanced."""

import math

from ..base.numbers import median
from ..model.doctor_network import parse_device_list
from ..model.records import EMULATED, GPU_TIMED, measurement_class
from ..rules.noise import RUN_DRIFT_PCT, noise_verdict, summarize

# busiest rail / idlest rail above this, on a multi-rail point: unbalanced.
RAIL_IMBALANCE_RATIO = 1.25
# A rail below this fraction of its busiest sibling's bytes is dead: healthy rails split a point about evenly
# (1.44 GB each over eth0 and eth3 on the virtual cluster's two-node baseline), a rail that is down carries ~0.
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


def netdev_binding(launch, document=None, records=(), run_env=None):
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
    """Whether a netdev rail of a host is one the point is bound to (netdev_binding); every rail is without one."""
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


# -- a rail slower than its sibling --------------------------------------------------------------------------------
# Each rail alone (the single-rail points of the sweep) at the same sizes: byte shares cannot show a slow rail, since
# NCCL and Open MPI stripe a message evenly over the rails whatever their speed, so a degraded rail slows the
# both-rails point as a whole and only the rails measured one at a time tell which one it is.

RAIL_SLOW = "rail.slow"
# The sizes judged: above this (Open MPI's TCP BTL sends up to its 64 KiB eager limit over one interface; and a small
# message is latency-bound on any rail), the largest RAIL_SLOW_SIZES of them that both points measured.
RAIL_SLOW_MIN_BYTES = 64 * 1024
RAIL_SLOW_SIZES = 3
# GPU-timed points: a rail is slow when its median time over the judged cases is at least this many times its
# sibling's, and more than half of those cases are 'slower' by the noise rule of compare (rules/noise.py: the
# repeats' spread, one run's drift, the one-repeat floor), none 'faster'. The ratio is the rail rule's own
# imbalance limit: a rail that moves a quarter less than its sibling is what an unbalanced rail is.
RAIL_SLOW_MIN_RATIO = RAIL_IMBALANCE_RATIO
# The MPI backend on host memory (correctness only, no noise model for its times): both rails are measured by the
# same hosts in the same run, so a several-fold gap is still a judgement, at any --repeat; a few percent is not.
# The rail is slow when its median ratio over the judged cases reaches RAIL_SLOW_MPI_RATIO and every one of those
# cases is slower. Measured 2026-12-02 on the virtual cluster (2 nodes x 2 ranks, all_reduce 256K-1M in and out of
# place, -n 3, the 2-core machine at a load of 10-14): eth0 alone against eth3 alone, healthy, six runs: median
# ratios 0.88-3.19, per case 0.06-7.3, and in each run at least one case faster on the "slow" rail; eth3 limited
# to 5 Mbit/s on one node, three runs: 2.8-8.5, every case slower (10 Mbit/s: 2.6-3.6). A median alone would
# call a healthy pair slow once in six runs there; every case slower as well, none of the six.
RAIL_SLOW_MPI_RATIO = 2.5
BINDING_ENV = (NCCL_HCA_VAR, NCCL_SOCKET_VAR, TCP_IF_INCLUDE_ENV)


def single_rail(launch):
    """(rail, source) when a plan launch binds its inter-node traffic to one rail on purpose: NCCL_IB_HCA of one
    port ("hca"), the MPI backend's btl_tcp_if_include of one interface or NCCL_SOCKET_IFNAME of one name
    ("netdev"); else None."""
    env = launch.get("env") or {}
    argv = launch.get("argv") or []
    candidates = [(env.get(NCCL_HCA_VAR), "hca")]
    if _is_mpi(launch, ()):
        candidates = [(mca_value(argv, TCP_IF_INCLUDE) or env.get(TCP_IF_INCLUDE_ENV), "netdev")]
    else:
        candidates.append((env.get(NCCL_SOCKET_VAR), "netdev"))
    for spec, source in candidates:
        if not spec or "/" in spec:
            continue
        exclude, _exact, items = parse_device_list(spec)
        if not exclude and len(items) == 1:
            name, port = items[0]
            return (f"{name}:{port}" if port is not None else name), source
        return None  # bound to several rails (or all but some): not a single-rail point
    return None


def sibling_key(launch):
    """What single-rail points must share to be compared: ranks, hosts, backend and every variable but the rail's
    binding (and NCCL_CROSS_NIC, which one NIC a node makes moot)."""
    env = {name: value for name, value in (launch.get("env") or {}).items()
           if name not in BINDING_ENV and name != "NCCL_CROSS_NIC"}
    return (launch.get("nranks"), tuple(launch.get("hosts") or []), _is_mpi(launch, ()), tuple(sorted(env.items())))


def _judged_cases(records_a, records_b):
    """{case_id: (records of a, records of b)} at the largest RAIL_SLOW_SIZES sizes above RAIL_SLOW_MIN_BYTES that
    both measured."""
    def by_case(records):
        grouped = {}
        for record in records:
            grouped.setdefault(record.get("case_id"), []).append(record)
        return grouped
    cases_a, cases_b = by_case(records_a), by_case(records_b)
    common = [case for case in cases_a if case in cases_b]
    size_of = {case: _size(cases_a[case][0]) for case in common}
    sizes = sorted({size for size in size_of.values() if size is not None and size > RAIL_SLOW_MIN_BYTES})
    chosen = set(sizes[-RAIL_SLOW_SIZES:])
    return {case: (cases_a[case], cases_b[case]) for case in common if size_of[case] in chosen}, sorted(chosen)


def _size(record):
    value = record.get("bytes") if record.get("bytes") is not None else record.get("requested_bytes")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _busbw(records):
    values = [record.get("busbw_gbps") for record in records if record.get("status") == "ok"
              and isinstance(record.get("busbw_gbps"), (int, float)) and not isinstance(record.get("busbw_gbps"), bool)]
    return median(values) if values else None


def compare_rails(rail_records, sibling_records, host_timed):
    """One rail alone against its sibling alone, over _judged_cases: {"ratio": median of the rail's time over the
    sibling's (its sibling's busbw over its own), "cases", "slower", "faster" (cases the noise rule calls so; GPU
    times only), "all_slower" (every judged case slower), "sizes", "busbw_gbps", "sibling_busbw_gbps" (medians at the largest judged size, over its cases
    and repeats)} or None when no case can be compared."""
    pairs, sizes = _judged_cases(rail_records, sibling_records)
    ratios, slower, faster, own, other = [], 0, 0, [], []
    for case_id, (mine, theirs) in sorted(pairs.items()):
        side, sibling = summarize(mine), summarize(theirs)
        if not side["time"] or not sibling["time"]:
            continue
        ratios.append(side["time"] / sibling["time"])
        if sizes and _size(mine[0]) == sizes[-1]:
            own.append(_busbw(mine))
            other.append(_busbw(theirs))
        if not host_timed:
            verdict = noise_verdict(sibling, side, 0.0, drift_pct=RUN_DRIFT_PCT)[0]
            slower += verdict == "slower"
            faster += verdict == "faster"
    if not ratios:
        return None
    known = lambda values: median([v for v in values if v is not None]) if any(v is not None for v in values) else None
    return {"ratio": math.exp(median([math.log(r) for r in ratios])), "cases": len(ratios), "slower": slower,
            "all_slower": all(ratio > 1 for ratio in ratios),
            "faster": faster, "sizes": sizes, "busbw_gbps": known(own), "sibling_busbw_gbps": known(other)}


def is_host_timed(records):
    """Whether single-rail records are the MPI backend's on host memory (no GPU time, no emulation): judged by
    RAIL_SLOW_MPI_RATIO, not by the noise rule."""
    classes = {measurement_class(record) for record in records}
    return bool(classes) and GPU_TIMED not in classes and EMULATED not in classes


def judge_slow_rails(points, rates=None):
    """rail.slow findings over the single-rail points of a run. points: [{"point" (base point), "rail", "source",
    "key" (sibling_key), "hosts", "records" (every repeat's)}]. Each rail is compared with the fastest sibling of its
    group (the same key, another rail): slow when the MPI backend's median ratio reaches RAIL_SLOW_MPI_RATIO with
    every judged case slower, or
    for GPU times when it reaches RAIL_SLOW_MIN_RATIO with more than half of the judged cases 'slower' by the noise
    rule and none 'faster'. rates: {(host, rail): line rate in Gb/s} where known: the host whose rail is slower
    than the same rail elsewhere is the one named; otherwise every host of the point (the byte counters of a
    striped or single-rail point cannot tell which end of a rail is slow). Returns [{"code": RAIL_SLOW, "where",
    "rail", "source", "sibling", "sibling_point", "ratio", "limit", "cases", "slower", "sizes", "busbw_gbps",
    "sibling_busbw_gbps", "host_timed", "hosts", "host_named_by"}]."""
    groups = {}
    for point in points:
        groups.setdefault(point["key"], []).append(point)
    found = []
    for members in groups.values():
        if len({member["rail"] for member in members}) < 2:
            continue
        for member in members:
            host_timed = is_host_timed(member["records"])
            worst = None
            for sibling in members:
                if sibling["rail"] == member["rail"]:
                    continue
                compared = compare_rails(member["records"], sibling["records"], host_timed)
                if compared is not None and (worst is None or compared["ratio"] > worst[0]["ratio"]):
                    worst = (compared, sibling)
            if worst is None:
                continue
            compared, sibling = worst
            limit = RAIL_SLOW_MPI_RATIO if host_timed else RAIL_SLOW_MIN_RATIO
            if host_timed:
                slow = compared["ratio"] >= limit and compared["all_slower"]
            else:
                slow = compared["ratio"] >= limit and compared["slower"] * 2 > compared["cases"] and not compared["faster"]
            if not slow:
                continue
            hosts, named_by = list(member.get("hosts") or []), None
            known = {host: (rates or {}).get((host, member["rail"])) for host in hosts}
            if hosts and all(value is not None for value in known.values()) and len(set(known.values())) > 1:
                lowest = min(known.values())
                hosts, named_by = [host for host in hosts if known[host] == lowest], "line rate"
            found.append(dict(compared, code=RAIL_SLOW, where=member["point"], rail=member["rail"],
                              source=member["source"], sibling=sibling["rail"], sibling_point=sibling["point"],
                              limit=limit, host_timed=host_timed, hosts=hosts, host_named_by=named_by))
    return found
