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
offered with them.

explain_links(causes, links, pairs, groups) -> (links, causes): a link named bad for its slow pairs
(link.slow_pair) with an end in a group named slow (its busbw_ratio or small_time_ratio above) is that group's
when every one of its pairs is within its reference once the group's ratio is taken out (the pair's bus bandwidth
over the slower end's group ratio, and its small-message time over the larger small-time ratio, each between its
reference's limit and that limit mirrored about the median: a pair far faster than its group is not the group's). Such a link is not named: it leaves the links and is listed with its group
("explained_links": [{"a", "b", "pairs"}]). A node of a leaf slowed to x0.895 whose own retests came out just
inside the band (a leaf at x0.895 is about one noise sd below the band's limit) is accepted, and the pair it
was slow in twice read as a bad link although its partner is healthy (docs/scale.md: 4,096 nodes, 2%, --quick 1,
seed 3). A link slower than its group explains (a link at x0.85 to a leaf at x0.89: x0.85 with the leaf taken
out) stays named. Pure: plain data in and out.
"""
import statistics

from .screen_codes import BAD, LINK_SLOW_PAIR

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


def _inside(value, band):
    """Whether value is inside band on both sides: between its limit and the limit mirrored about its median in
    log space (a value the ratio taken out made as much faster than the median as the limit is slower is no
    longer the group's slowness, but a part faster than its group)."""
    low, high = sorted((band["limit"], band["median"] ** 2 / band["limit"]))
    return low <= value <= high


def _within(pair, busbw_ratio, small_ratio):
    """Whether a pair row (screen.json's, with its reference) is within its reference once the ratios are taken
    out: bus bandwidth / busbw_ratio and small time / small_ratio each inside their band (_inside). False when a
    value or a reference is missing (a failed pair is no slowness to explain)."""
    reference = pair.get("reference") or {}
    busbw, small = pair.get("busbw_gbps"), pair.get("small_time_us")
    bands = [(busbw, busbw_ratio, reference.get("busbw_gbps")), (small, small_ratio, reference.get("small_time_us"))]
    if not busbw or not small or not (bands[0][2] or {}).get("limit") or not (bands[0][2] or {}).get("median"):
        return False
    return all(_inside(value / ratio, band) for value, ratio, band in bands
               if band and band.get("limit") and band.get("median"))


def explain_links(causes, links, pairs, groups):
    """(links, causes): the links without those a slow group explains, and the causes with them listed (module
    docstring). pairs: screen.json's pair rows (their references); groups: {node: group}."""
    busbw_of, small_of = {}, {}
    slow_groups = {cause["group"]: cause for cause in causes if cause["kind"] == "group"
                   and ((cause.get("busbw_ratio") or 1.0) < 1.0 or (cause.get("small_time_ratio") or 1.0) > 1.0)}
    for node, group in (groups or {}).items():
        cause = slow_groups.get(group)
        if cause is not None:
            busbw_of[node] = min(1.0, cause.get("busbw_ratio") or 1.0)
            small_of[node] = max(1.0, cause.get("small_time_ratio") or 1.0)
    kept, explained = [], {}
    for link in links:
        ends = (link["a"], link["b"])
        codes = [reason["code"] for reason in link["reasons"]]
        if link["verdict"] != BAD or codes != [LINK_SLOW_PAIR] or not any(end in busbw_of for end in ends):
            kept.append(link)
            continue
        busbw_ratio = min(busbw_of.get(end, 1.0) for end in ends)
        small_ratio = max(small_of.get(end, 1.0) for end in ends)
        indices = link["reasons"][0].get("pairs") or []
        if not indices or not all(index < len(pairs) and _within(pairs[index], busbw_ratio, small_ratio)
                                  for index in indices):
            kept.append(link)
            continue
        # The group whose ratio explains it: the slower end's (either, when both ends share one group).
        end = min(ends, key=lambda name: (busbw_of.get(name, 1.0), -small_of.get(name, 1.0), name))
        explained.setdefault(groups[end], []).append({"a": link["a"], "b": link["b"], "pairs": list(indices)})
    causes = [dict(cause, explained_links=explained[cause["group"]])
              if cause["kind"] == "group" and cause["group"] in explained else cause for cause in causes]
    return kept, causes
