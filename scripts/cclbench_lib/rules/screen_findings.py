"""The screen's verdicts as they are found, step by step (Findings), and the steps that turn the node stage's and
the pairs' attribution into node and link reasons. Pure: plain data in and out.
"""
from .screen_codes import (ACCEPT, BAD, LINK_FAILED_PAIR, LINK_NOT_REPRODUCED, LINK_SLOW_PAIR, LINK_UNRESOLVED,
                           NODE_FAILED_WITH_GOOD_PARTNERS, NODE_NO_GOOD_PARTNER, NODE_SLOW_WITH_GOOD_PARTNERS,
                           NODE_UNRESOLVED, PAIR_FAILED, PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL, RAIL_LOOPBACK_SLOW,
                           SUSPECT)


def make_reason(code, detail, pair_indices):
    return {"code": code, "detail": detail, "pairs": sorted(pair_indices)}


def worst(verdicts):
    return BAD if BAD in verdicts else (SUSPECT if SUSPECT in verdicts else ACCEPT)


class Findings:
    """The verdicts as they are found, step by step: per node its reasons and verdicts, per (node, rail) its
    entries, the links, and what the retests need (the nodes suspect from their pairs or their rails alone, the
    pairs to repeat)."""

    def __init__(self, nodes):
        self.reasons = {node: [] for node in nodes}
        self.verdicts = {node: [] for node in nodes}
        self.rails = {}
        self.links = []
        self.from_pairs = set()  # suspect from the pairs: what a retest against known-good nodes can settle
        self.rail_suspects = set()  # suspect from the rail points: their retests measure each rail alone again
        self.loopback_suspects = {}  # node -> rails whose loopback was slow: their rails alone settle it
        self.repeat_pairs = []

    def add_node(self, node, verdict, reason, from_pairs=False):
        self.reasons[node].append(reason)
        self.verdicts[node].append(verdict)
        if from_pairs:
            self.from_pairs.add(node)

    def add_rail(self, node, rail, verdict, code, detail, behind):
        self.add_node(node, verdict, make_reason(code, detail, behind), from_pairs=verdict == SUSPECT)
        self.rails.setdefault((node, rail), []).append((verdict, make_reason(code, detail, behind)))


def step_node_stage(state, findings):
    """The node stage's and the path MTU step's findings, as reasons (a rail's also under that rail)."""
    for node, entries in findings.items():
        for verdict, code, detail, rail in entries:
            if code == RAIL_LOOPBACK_SLOW:
                state.loopback_suspects.setdefault(node, set()).add(rail)
            state.add_node(node, verdict, make_reason(code, dict(detail, rail=rail) if rail else detail, []))
            if rail:
                state.rails.setdefault((node, rail), []).append((verdict, make_reason(code, detail, [])))


def step_attribution(state, nodes, paired, outcomes, edges, found):
    """The pairs' attribution (_attribute's result) as node and link reasons."""
    def indices(keys):
        return [index for key in keys for index in edges[key]["pairs"]]

    state.repeat_pairs += [list(key) for key in found["links_suspect"]]
    for node, keys in found["bad"].items():
        slow = [i for i in indices(keys) if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        code = NODE_SLOW_WITH_GOOD_PARTNERS if slow else NODE_FAILED_WITH_GOOD_PARTNERS
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        state.add_node(node, BAD, make_reason(code, {"good_partners_failed": partners}, indices(keys)))
    for node, keys in found["suspect"].items():
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        state.add_node(node, SUSPECT, make_reason(NODE_UNRESOLVED, {"partners_failed": partners}, indices(keys)), True)
    in_edges = {node for key in edges for node in key}
    untested = [node for node in paired if len(nodes) >= 2 and node not in in_edges]  # never met anyone
    if found["no_good_partner"]:
        keys_of = {}
        for key in edges:
            for node in key:
                keys_of.setdefault(node, []).append(key)
    for node in found["no_good_partner"] + untested:
        behind = indices(keys_of.get(node, ())) if found["no_good_partner"] else []
        state.add_node(node, SUSPECT, make_reason(NODE_NO_GOOD_PARTNER, {}, behind), True)
    for key in found["links_bad"]:
        slow = [i for i in edges[key]["pairs"] if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        state.links.append({"a": key[0], "b": key[1], "verdict": BAD,
                            "reasons": [make_reason(LINK_SLOW_PAIR if slow else LINK_FAILED_PAIR,
                                                {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
    for key in list(found["links_suspect"]):
        failed_each_time = all(outcomes[i] == PAIR_FAILED for i in edges[key]["pairs"])
        if len(paired) == 2 and edges[key]["count"] >= 2 and failed_each_time:
            # Two nodes: no third to tell the link from its ends, but a pair that failed every time it ran, twice
            # or more, is a failure of the fleet's one link, never a suspicion (its nodes stay suspect).
            state.links.append({"a": key[0], "b": key[1], "verdict": BAD, "reasons": [
                make_reason(LINK_FAILED_PAIR, {"measurements": edges[key]["count"], "nodes": 2}, edges[key]["pairs"])]})
            state.repeat_pairs.remove(list(key))
            continue
        code = LINK_NOT_REPRODUCED if key in found["link_not_reproduced"] else LINK_UNRESOLVED
        state.links.append({"a": key[0], "b": key[1], "verdict": SUSPECT,
                            "reasons": [make_reason(code, {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
        if code == LINK_NOT_REPRODUCED:  # both nodes pass with good partners; only the link is in question
            for node in key:
                state.add_node(node, SUSPECT, make_reason(LINK_NOT_REPRODUCED,
                                                      {"partner": key[1] if node == key[0] else key[0]},
                                                      edges[key]["pairs"]), True)
