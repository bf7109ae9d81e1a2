"""What the screen's next retest pass needs, from the verdicts so far (plan.screen_schedule.retest_rounds plans it).
Pure: plain data in and out.
"""
from .screen_codes import ACCEPT
from .screen_findings import worst


def step_retests(state, node_rows, pairs, paired, edges, found, rail_found):
    """What the next retest pass needs (plan.screen_schedule.retest_rounds): the suspects from their pairs or their
    rails alone - retested with known-good partners even when another finding already makes the node bad (its rail
    alone slow, its pairs not yet attributed: both verdicts are wanted) - the known-good nodes, whom each suspect
    has met, the pairs to repeat, and the suspects whose retests need their rails alone again."""
    suspects = [row["name"] for row in node_rows if row["name"] in state.from_pairs or
                row["name"] in state.rail_suspects]
    met = {}
    for key in edges:
        met.setdefault(key[0], set()).add(key[1])
        met.setdefault(key[1], set()).add(key[0])
    for node in state.rail_suspects:  # their rails alone were measured with these partners only
        met[node] = {pairs[i]["b"] if pairs[i]["a"] == node else pairs[i]["a"] for i in rail_found
                     if node in (pairs[i]["a"], pairs[i]["b"])}
    known_good = [node for node in paired if node in found["good"] and worst(state.verdicts[node]) == ACCEPT]
    unique_repeats = []
    seen = set()
    for pair in state.repeat_pairs:
        if tuple(pair) not in seen:
            seen.add(tuple(pair))
            unique_repeats.append(pair)
    return {"suspects": suspects, "known_good": known_good,
            "met": {node: sorted(met.get(node, ())) for node in suspects},
            "repeat_pairs": unique_repeats, "rail_suspects": sorted(state.rail_suspects & set(suspects))}
