"""Faults that share a cause: many bad nodes under one switch group, or many bad nodes with the same rail bad.

shared_causes(nodes, rails, groups) -> [cause], from screen.json's node and rail rows (verdicts already given) and
{node: group} (--groups FILE, a hostfile's group= column, the simulated fleet's groups; {} when none is known):
  {"kind": "group", "group", "nodes": [bad nodes of the group], "group_nodes": the group's nodes in the fleet,
   "rails": [rails bad on at least half of those nodes], "codes": [the codes of those nodes' reasons]}
      when at least SHARED_CAUSE_MIN_NODES nodes of a group are bad and they are at least SHARED_CAUSE_MIN_SHARE of
      the group: a switch, a leaf's uplink or a rack's power is likelier than that many faults by chance (at 5%
      of a fleet bad at random, three of a 16-node group are bad by chance, eight are not);
  {"kind": "rail", "rail", "nodes": [nodes with that rail bad], "codes": [...]}
      when at least SHARED_CAUSE_MIN_NODES nodes that no group above explains have the same rail bad: "many bad
      nodes share one rail" (the fabric of that rail, its switches or its configuration).
The nodes stay bad one by one; a cause is an explanation offered with them. Pure: plain data in and out.
"""

SHARED_CAUSE_MIN_NODES = 3
SHARED_CAUSE_MIN_SHARE = 0.5


def shared_causes(nodes, rails, groups):
    bad = [row["name"] for row in nodes if row["verdict"] == "bad"]
    codes_of = {row["name"]: {reason["code"] for reason in row["reasons"]} for row in nodes}
    bad_rails = {}
    for row in rails:
        if row["verdict"] == "bad":
            bad_rails.setdefault(row["rail"], []).append(row["node"])
    members = {}
    for row in nodes:
        group = (groups or {}).get(row["name"])
        if group is not None:
            members.setdefault(group, []).append(row["name"])
    causes, explained = [], set()
    for group, names in sorted(members.items()):
        bad_here = sorted(name for name in names if name in set(bad))
        if len(bad_here) < SHARED_CAUSE_MIN_NODES or len(bad_here) < SHARED_CAUSE_MIN_SHARE * len(names):
            continue
        common = sorted(rail for rail, on in bad_rails.items()
                        if len(set(on) & set(bad_here)) * 2 >= len(bad_here))
        causes.append({"kind": "group", "group": group, "nodes": bad_here, "group_nodes": len(names),
                       "rails": common, "codes": sorted(set().union(*(codes_of[name] for name in bad_here)))})
        explained.update(bad_here)
    for rail, on in sorted(bad_rails.items()):
        left = sorted(set(on) - explained)
        if len(left) >= SHARED_CAUSE_MIN_NODES:
            causes.append({"kind": "rail", "rail": rail, "nodes": left,
                           "codes": sorted(set().union(*(codes_of[name] for name in left)))})
    return causes
