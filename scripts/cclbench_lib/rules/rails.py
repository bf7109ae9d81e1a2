"""Rails per host: a rail that carries almost nothing while its sibling carries the point is dead, a lesser
imbalance is unbalanced; one rule for the rows of either source (model/run_dir.rail_bytes_per_host: "hca" port
counters or "netdev" interface counters), judged on each host and source apart (the two are never added).

Judged only where the host's busiest rail carried at least RAIL_JUDGED_MIN_BYTES over the point: below that the
point moved too little over the rails for a share to mean anything (a one-node point, background traffic)."""

from ..rules.ceilings import RAIL_IMBALANCE_RATIO

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
