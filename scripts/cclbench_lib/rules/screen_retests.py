"""The screen's targeted retests as data: what the next pass needs, from the verdicts so far
(plan.screen_schedule.retest_rounds plans it; execute/screen.Screen.retests runs passes until every suspect is named
or cleared, or the budget is spent), and which suspects are left open at the end and why (open_suspects).

A suspect left open is a verdict not reached: the report says so, and a simulation scores a bad node left open as
a miss (rules/screen_score.py).

Pure: plain data in and out.
"""
from .screen_attribution import MIN_GOOD_FAILS
from .screen_codes import ACCEPT, NODE_FAILED_WITH_GOOD_PARTNERS, SUSPECT
from .screen_findings import worst

# Why the retests stopped (screen.json "retests.stopped"), and why a suspect is still open ("retests.open[].why").
RETEST_SETTLED = "settled"            # no suspect and no pair to repeat is left
RETEST_BUDGET = "budget"              # the retest budget (--retest-budget) was spent
RETEST_NO_PARTNER = "no_partner"      # suspects are left, none with a known-good node it has not met
RETEST_PASSES_SPENT = "passes"        # the most passes a screen runs (execute/screen.RETEST_PASSES_MAX)
OPEN_NODE_STAGE = "node_stage"        # a suspicion of the node stage alone (one value against the fleet): no pair
#                                       retest settles it
RETEST_STOPS = (RETEST_SETTLED, RETEST_BUDGET, RETEST_NO_PARTNER, RETEST_PASSES_SPENT)
OPEN_WHYS = (RETEST_BUDGET, RETEST_NO_PARTNER, RETEST_PASSES_SPENT, OPEN_NODE_STAGE)

# A pair is repeated to reproduce a failure seen once: from this many measurements of it on, a repeat adds nothing
# (it failed each time, or not), and its nodes are settled by known-good partners or left open. Without the bound a
# pair whose failure never resolves was repeated in every pass until RETEST_PASSES_MAX (a virtual-cluster node whose
# rank was killed in every launch: 27 passes, past the fault matrix cell's limit).
REPEAT_MAX_MEASUREMENTS = 2


def step_retests(state, node_rows, pairs, paired, edges, found, rail_found):
    """What the next retest pass needs (plan.screen_schedule.retest_rounds): the suspects from their pairs or their
    rails alone - retested with known-good partners even when another finding already makes the node bad (its rail
    alone slow, its pairs not yet attributed: both verdicts are wanted) - and the nodes whose loopback was slow
    (rail.loopback_slow, one value against the fleet) until that rail was judged alone with MIN_GOOD_FAILS
    known-good partners; the known-good nodes, whom each suspect has met, the pairs to repeat, and the suspects
    whose retests need their rails alone again."""
    known_good = [node for node in paired if node in found["good"] and worst(state.verdicts[node]) == ACCEPT]
    for node, rails in state.loopback_suspects.items():
        if node in paired and not _failing(state, node) and any(
                len(_good_rail_partners(pairs, rail_found, set(known_good), node, rail)) < MIN_GOOD_FAILS
                for rail in rails):
            state.rail_suspects.add(node)  # its loopback alone was slow: its rails alone with known-good partners
    suspects = [row["name"] for row in node_rows if row["name"] in state.from_pairs or
                row["name"] in state.rail_suspects]
    met = {}
    for key in edges:
        met.setdefault(key[0], set()).add(key[1])
        met.setdefault(key[1], set()).add(key[0])
    for node in state.rail_suspects:  # their rails alone were measured with these partners only
        met[node] = {pairs[i]["b"] if pairs[i]["a"] == node else pairs[i]["a"] for i in rail_found
                     if node in (pairs[i]["a"], pairs[i]["b"])}
    unique_repeats = []
    seen = set()
    for pair in state.repeat_pairs:
        measured = (edges.get(tuple(sorted(pair))) or {}).get("count", 0)
        if tuple(pair) not in seen and measured < REPEAT_MAX_MEASUREMENTS:
            seen.add(tuple(pair))
            unique_repeats.append(pair)
    return {"suspects": suspects, "known_good": known_good,
            "met": {node: sorted(met.get(node, ())) for node in suspects},
            "repeat_pairs": unique_repeats, "rail_suspects": sorted(state.rail_suspects & set(suspects))}


def _failing(state, node):
    """The node failed its pairs with known-good partners: nothing it runs measures a rail."""
    return any(reason["code"] == NODE_FAILED_WITH_GOOD_PARTNERS for reason in state.reasons[node])


def _good_rail_partners(pairs, rail_found, good, node, rail):
    """The known-good partners with which this node's rail was judged alone against its sibling."""
    return {pairs[i]["b"] if pairs[i]["a"] == node else pairs[i]["a"] for i, entry in rail_found.items()
            if entry["judged"] and pairs[i].get("rail") == rail and node in (pairs[i]["a"], pairs[i]["b"])} & good


def open_suspects(verdicts, stopped):
    """[{"node", "why"}] of the nodes still suspect when the retests stopped (stopped: RETEST_STOPS): a suspect the
    retests could settle is open for the reason they stopped; one whose suspicion is the node stage's alone
    (NODE_INTRA_SLOW, RAIL_LOOPBACK_SLOW: one value against the fleet) is open as OPEN_NODE_STAGE."""
    retestable = set(verdicts["retest"]["suspects"])
    return [{"node": row["name"], "why": (stopped if stopped != RETEST_SETTLED else RETEST_NO_PARTNER)
             if row["name"] in retestable else OPEN_NODE_STAGE}
            for row in verdicts["nodes"] if row["verdict"] == SUSPECT]
