"""Faults that share a cause: a switch group whose nodes are bad or suspect together, or many bad nodes with the
same rail bad.

shared_causes(nodes, rails, groups, pairs) -> [cause], from screen.json's node, rail and pair rows (verdicts already
given) and {node: group} (--groups FILE, a hostfile's group= column, Slurm's topology, the simulated fleet's groups;
{} when none is known):
  {"kind": "group", "group", "group_nodes": the group's nodes in the fleet, "nodes": its bad nodes, "suspect": its
   suspect nodes, "rails": [rails bad or suspect on at least half of those nodes], "rail_ratios": {rail: the median
   ratio of that rail alone to its sibling over those nodes' evidence}, "rail_small_time_ratios": {rail: the same
   for its small-message time, where it was slow on it}, "busbw_ratio" / "small_time_ratio": the median, over
   those nodes' slow pairs, of the pair's value over its reference's median (None: no such pair), "codes": the
   codes of those nodes' reasons}
      when at least SHARED_CAUSE_MIN_NODES nodes of a group are bad or suspect and they are at least
      SHARED_CAUSE_MIN_SHARE of the group: a leaf switch, its optics or uplinks, or a rack is likelier than that
      many faults by chance (at 5% of a fleet bad at random, three of a 16-node group are bad by chance, eight
      are not). Suspects count: a leaf whose rail runs at half speed leaves every node of it in question at once,
      and the group says what the nodes one by one do not ("leaf005 mlx5_3:1 at x0.50 (64 nodes)");
  {"kind": "rail", "rail", "nodes": [bad nodes with that rail bad], "codes": [...]}
      when at least SHARED_CAUSE_MIN_NODES bad nodes that no group above explains have the same rail bad: "many bad
      nodes share one rail" (the fabric of that rail, its switches or its configuration).
The nodes keep their own verdicts (a fleet without groups finds them one by one); a cause is the explanation
offered with them. Pure: plain data in and out.
"""
import statistics

SHARED_CAUSE_MIN_NODES = 3
SHARED_CAUSE_MIN_SHARE = 0.5
# The codes a rail row's evidence carries its ratios under (rules/screen_rails.py).
RAIL_RATIO_CODES = ("rail.slow", "rail.slow_unresolved")
SLOW_OUTCOMES = {"slow_busbw": "busbw_gbps", "slow_small": "small_time_us"}


def _median(values):
    values = [value for value in values if isinstance(value, (int, float))]
    return statistics.median(values) if values else None


def _pair_ratios(names, rows_of, pairs):
    """The median, over these nodes' slow pairs (the pairs behind their reasons), of value / reference median, per
    metric: {"busbw_ratio", "small_time_ratio"} (None: no such pair)."""
    found = {"busbw_gbps": [], "small_time_us": []}
    seen = set()
    for name in names:
        for reason in rows_of[name]["reasons"]:
            for index in reason.get("pairs") or ():
                if index in seen or index >= len(pairs):
                    continue
                seen.add(index)
                pair = pairs[index]
                key = SLOW_OUTCOMES.get(pair.get("outcome"))
                band = ((pair.get("reference") or {}).get(key) or {}) if key else {}
                if key and pair.get(key) and band.get("median"):
                    found[key].append(pair[key] / band["median"])
    return {"busbw_ratio": _median(found["busbw_gbps"]), "small_time_ratio": _median(found["small_time_us"])}


def shared_causes(nodes, rails, groups, pairs=()):
    verdict_of = {row["name"]: row["verdict"] for row in nodes}
    rows_of = {row["name"]: row for row in nodes}
    codes_of = {row["name"]: {reason["code"] for reason in row["reasons"]} for row in nodes}
    bad_rails, flagged_rails = {}, {}
    for row in rails:
        if row["verdict"] == "bad":
            bad_rails.setdefault(row["rail"], []).append(row["node"])
        if row["verdict"] in ("bad", "suspect"):
            flagged_rails.setdefault(row["rail"], {})[row["node"]] = row
    members = {}
    for row in nodes:
        group = (groups or {}).get(row["name"])
        if group is not None:
            members.setdefault(group, []).append(row["name"])
    causes, explained = [], set()
    for group, names in sorted(members.items()):
        bad_here = sorted(name for name in names if verdict_of[name] == "bad")
        suspect_here = sorted(name for name in names if verdict_of[name] == "suspect")
        flagged = bad_here + suspect_here
        if len(flagged) < SHARED_CAUSE_MIN_NODES or len(flagged) < SHARED_CAUSE_MIN_SHARE * len(names):
            continue
        common = sorted(rail for rail, on in flagged_rails.items() if len(set(on) & set(flagged)) * 2 >= len(flagged))
        rail_ratios, rail_small = {}, {}
        for rail in common:
            details = [reason["detail"] for node, row in flagged_rails[rail].items() if node in set(flagged)
                       for reason in row["reasons"] if reason["code"] in RAIL_RATIO_CODES]
            rail_ratios[rail] = _median([detail.get("ratio") for detail in details
                                         if "busbw_gbps" in (detail.get("slow_on") or ["busbw_gbps"])])
            small = _median([detail.get("small_time_ratio") for detail in details])
            if small is not None:
                rail_small[rail] = small
        causes.append(dict({"kind": "group", "group": group, "nodes": bad_here, "suspect": suspect_here,
                            "group_nodes": len(names), "rails": common, "rail_ratios": rail_ratios,
                            "rail_small_time_ratios": rail_small,
                            "codes": sorted(set().union(*(codes_of[name] for name in flagged)))},
                           **_pair_ratios(flagged, rows_of, pairs)))
        explained.update(flagged)
    for rail, on in sorted(bad_rails.items()):
        left = sorted(set(on) - explained)
        if len(left) >= SHARED_CAUSE_MIN_NODES:
            causes.append({"kind": "rail", "rail": rail, "nodes": left,
                           "codes": sorted(set().union(*(codes_of[name] for name in left)))})
    return causes
