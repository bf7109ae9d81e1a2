"""Verdicts of `cclbench screen`: which node, link or rail of a fleet is bad, relative to the fleet.

The rules, as data (reason codes below; the report renders them):
  Node stage (each node alone): a doctor "fail" or no doctor result, an intra-node point that failed (no value) or a
      loopback point of a rail that failed make the node bad, and it is not paired. Intra-node bus bandwidth and a
      rail's loopback bandwidth below the fleet's band (below) make the node / rail suspect: one value against the
      fleet, no second opinion.
  The band (fleet_band): over the fleet's values of one metric, centre = the median, sd = 1.4826 x MAD of
      ln(value / median) (the robust standard deviation compare.point_shift uses), band = NOISE_SIGMAS x sd
      (compare's NOISE_SIGMAS), in log space so that "half" and "double" are as far from the centre. Floors
      (NVIDIA ClusterKit's convention): bandwidth is low only below BW_FLOOR_RATIO x median, time is high only above
      TIME_FLOOR_FACTOR x median, so a tight fleet does not flag 1% differences. Fewer than MIN_FLEET_VALUES values:
      no band (nothing is low against two values; only failures count).
  A pair fails when its large-size bus bandwidth or its small-message time is missing (the point failed) or out of
      the band. A pair measured more than once fails only when every measurement failed (a failure must
      reproduce). The node stage's values, one a node, use SINGLE_VALUE_FLOOR_RATIO as their floor.
  Attribution (_attribute), over the pairs' pass/fail:
      1. peel: repeatedly take the node with the most failures among those with >= MIN_GOOD_FAILS failures and more
         failures than passes, counting only pairs between nodes not yet taken (SuperBench drops nodes
         iteratively too); its failures are then explained;
      2. known good: a node not taken, with no unexplained failure and at least one pass;
      3. link: an unexplained failure that is the only one of both its nodes, both of which pass with a known-good
         node other than each other, is a bad link once it was measured failing at least twice (else suspect and
         repeated on retest: link.not_reproduced, its two nodes suspect for that reason alone); both nodes of a
         bad link are then known good;
      4. a taken node is bad when it failed with >= MIN_GOOD_FAILS distinct known-good nodes and with more of them
         than it passed with; otherwise it stays suspect;
      5. every other node with an unexplained failure, or with no pass against a known-good node, is suspect.
  Rails: per pair and host, a rail carrying less than RAIL_LOW_RATIO of its busiest sibling's bytes is low there;
      low on either host fails the pair for that rail, and the same attribution names the node whose rail it is.
  Unclear cases are suspect, with the pairs behind them. Result: "fail" when anything is bad, else "suspect" when
  anything is suspect, else "pass"; EXIT_CODES.

Pure: plain data in and out, no I/O, no text beyond the stable codes.
"""
import math
import statistics

# The project's noise rule (scripts/cclbench_lib/compare.py): NOISE_SIGMAS and the MAD-to-sd factor of
# compare.point_shift. Restated here until rules/noise.py's constants are shared by both rules.
NOISE_SIGMAS = 4.0
MAD_TO_SD = 1.4826
# NVIDIA ClusterKit: a pair is suspect below 93% of the best bandwidth or above 2.1x the best latency. Used as
# floors of the band around the fleet's median (not its best: one lucky pair should not move the bar).
BW_FLOOR_RATIO = 0.93
TIME_FLOOR_FACTOR = 2.1
MIN_FLEET_VALUES = 3
# The node stage's values (intra-node, loopback) are one measurement per node with no second opinion behind a
# verdict, and the MAD of a few nodes' values often says far less than their real scatter: below 93% flagged 4%
# of healthy nodes at a 4% point-to-point scatter. compare's ONE_REPEAT_FLOOR_PCT (15%: one repeat a side)
# is the floor there.
SINGLE_VALUE_FLOOR_RATIO = 0.85
# Two distinct known-good partners: one failure with a good node can be that link.
MIN_GOOD_FAILS = 2
# A rail below a quarter of its busiest sibling's bytes is "far below" it (healthy rails split a point about
# evenly: 1.44 GB each over eth0 and eth3 on the virtual cluster's two-node baseline; a dead rail carries ~0).
RAIL_LOW_RATIO = 0.25

ACCEPT, SUSPECT, BAD = "accept", "suspect", "bad"
EXIT_CODES = {"pass": 0, "fail": 1, "suspect": 3}

# Reason codes (stable; REASON_MEANINGS below explains them in docs/verdicts.md).
NODE_DOCTOR_FAIL = "node.doctor_fail"
NODE_DOCTOR_NO_RESULT = "node.doctor_no_result"
NODE_INTRA_FAILED = "node.intra_failed"
NODE_INTRA_SLOW = "node.intra_slow"
NODE_SLOW_WITH_GOOD_PARTNERS = "node.slow_with_good_partners"
NODE_FAILED_WITH_GOOD_PARTNERS = "node.failed_with_good_partners"
NODE_UNRESOLVED = "node.failed_pairs_unresolved"
NODE_NO_GOOD_PARTNER = "node.no_good_partner"
LINK_SLOW_PAIR = "link.slow_pair"
LINK_FAILED_PAIR = "link.failed_pair"
LINK_NOT_REPRODUCED = "link.not_reproduced"
LINK_UNRESOLVED = "link.unresolved"
RAIL_LOOPBACK_FAILED = "rail.loopback_failed"
RAIL_LOOPBACK_SLOW = "rail.loopback_slow"
RAIL_UNBALANCED = "rail.unbalanced"
RAIL_UNBALANCED_UNRESOLVED = "rail.unbalanced_unresolved"
REASON_CODES = (NODE_DOCTOR_FAIL, NODE_DOCTOR_NO_RESULT, NODE_INTRA_FAILED, NODE_INTRA_SLOW,
                NODE_SLOW_WITH_GOOD_PARTNERS, NODE_FAILED_WITH_GOOD_PARTNERS, NODE_UNRESOLVED, NODE_NO_GOOD_PARTNER,
                LINK_SLOW_PAIR, LINK_FAILED_PAIR, LINK_NOT_REPRODUCED, LINK_UNRESOLVED, RAIL_LOOPBACK_FAILED,
                RAIL_LOOPBACK_SLOW, RAIL_UNBALANCED, RAIL_UNBALANCED_UNRESOLVED)

# Pair outcomes.
PAIR_OK, PAIR_FAILED, PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL = "ok", "failed", "slow_busbw", "slow_small"

SCHEMA_VERSION = "1.0.0"


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def fleet_band(values, higher_is_better, sigmas=NOISE_SIGMAS, mad_to_sd=MAD_TO_SD, bw_floor_ratio=BW_FLOOR_RATIO,
               time_floor_factor=TIME_FLOOR_FACTOR, min_values=MIN_FLEET_VALUES):
    """The fleet's band for one metric: {"median", "robust_sd_log", "limit", "values"}, limit the lowest good value
    (higher_is_better: bandwidth) or the highest (a time); None with fewer than min_values positive values."""
    usable = [value for value in values if _number(value)]
    if len(usable) < min_values:
        return None
    centre = statistics.median(usable)
    logs = [math.log(value / centre) for value in usable]
    sd = mad_to_sd * statistics.median([abs(value) for value in logs])
    if higher_is_better:
        limit = centre * min(bw_floor_ratio, math.exp(-sigmas * sd))
    else:
        limit = centre * max(time_floor_factor, math.exp(sigmas * sd))
    return {"median": centre, "robust_sd_log": sd, "limit": limit, "values": len(usable)}


def _outside(value, band, higher_is_better):
    return band is not None and (value < band["limit"] if higher_is_better else value > band["limit"])


def _check_pairs(pairs):
    for index, pair in enumerate(pairs):
        if not isinstance(pair, dict) or not isinstance(pair.get("a"), str) or not isinstance(pair.get("b"), str) \
                or pair["a"] == pair["b"]:
            raise ValueError(f"screen: pair {index} needs two different node names a and b")


def judge_pairs(pairs, bands=None):
    """Each pair's outcome against the fleet: (outcomes, bands). outcomes[i] is PAIR_OK, PAIR_FAILED (a value is
    missing), PAIR_SLOW_BUSBW or PAIR_SLOW_SMALL; bands {"busbw_gbps": band, "small_time_us": band} from every
    pair's values unless given."""
    _check_pairs(pairs)
    if bands is None:
        bands = {"busbw_gbps": fleet_band([p.get("busbw_gbps") for p in pairs], True),
                 "small_time_us": fleet_band([p.get("small_time_us") for p in pairs], False)}
    outcomes = []
    for pair in pairs:
        busbw, small = pair.get("busbw_gbps"), pair.get("small_time_us")
        if not _number(busbw) or not _number(small):
            outcomes.append(PAIR_FAILED)
        elif _outside(busbw, bands["busbw_gbps"], True):
            outcomes.append(PAIR_SLOW_BUSBW)
        elif _outside(small, bands["small_time_us"], False):
            outcomes.append(PAIR_SLOW_SMALL)
        else:
            outcomes.append(PAIR_OK)
    return outcomes, bands


def _edges(pairs, failed, excluded):
    """{(a, b) sorted: {"failed": every measurement failed, "count": measurements, "pairs": indices}} over pairs
    whose nodes are both outside excluded."""
    edges = {}
    for index, pair in enumerate(pairs):
        if pair["a"] in excluded or pair["b"] in excluded:
            continue
        key = tuple(sorted((pair["a"], pair["b"])))
        edge = edges.setdefault(key, {"failed": True, "count": 0, "pairs": []})
        edge["failed"] = edge["failed"] and failed[index]
        edge["count"] += 1
        edge["pairs"].append(index)
    return edges


def _attribute(nodes, edges):
    """The attribution of the module docstring over edges (from _edges). Returns {"bad": {node: [edge keys failed
    with known-good nodes]}, "suspect": {node: [edge keys]}, "no_good_partner": [node], "good": set,
    "links_bad": [key], "links_suspect": [key], "link_not_reproduced": [key]}."""
    adjacency = {node: [] for node in nodes}
    for key in edges:
        for node in key:
            adjacency.setdefault(node, []).append(key)
    fails = {node: sum(1 for key in keys if edges[key]["failed"]) for node, keys in adjacency.items()}
    passes = {node: len(keys) - fails[node] for node, keys in adjacency.items()}
    taken = set()
    while True:  # 1. peel, updating the neighbours' counts as each node is taken
        eligible = [node for node in adjacency if node not in taken and fails[node] >= MIN_GOOD_FAILS
                    and fails[node] > passes[node]]
        if not eligible:
            break
        node = max(eligible, key=lambda name: (fails[name], -passes[name], name))
        taken.add(node)
        for key in adjacency[node]:
            other = key[0] if key[1] == node else key[1]
            if other not in taken:
                if edges[key]["failed"]:
                    fails[other] -= 1
                else:
                    passes[other] -= 1
    unexplained = {node: [key for key in adjacency[node] if edges[key]["failed"] and not (set(key) & taken)]
                   for node in adjacency if node not in taken}
    good = {node for node, keys in unexplained.items() if not keys and passes[node] > 0}
    links_bad, links_suspect, not_reproduced = [], [], []
    decided = set()

    def vouched(mine, theirs):  # passes with a known-good node other than theirs
        for k in adjacency[mine]:
            other = k[0] if k[1] == mine else k[1]
            if not edges[k]["failed"] and other != theirs and other in good:
                return True
        return False

    changed = True
    while changed:  # 3. links; a node cleared by its link can vouch for another link
        changed = False
        for node, keys in unexplained.items():
            if len(keys) != 1 or keys[0] in decided:
                continue
            key = keys[0]
            a, b = key
            if len(unexplained.get(a, ())) != 1 or len(unexplained.get(b, ())) != 1:
                continue
            if vouched(a, b) and vouched(b, a):
                decided.add(key)
                changed = True
                if edges[key]["count"] >= 2:
                    links_bad.append(key)
                    good.update(key)
                else:
                    not_reproduced.append(key)
    bad, suspect, no_good = {}, {}, []
    for node in sorted(taken):  # 4.
        with_good = [key for key in adjacency[node] if (key[0] if key[1] == node else key[1]) in good]
        failed_good = [key for key in with_good if edges[key]["failed"]]
        if len(failed_good) >= MIN_GOOD_FAILS and len(failed_good) > len(with_good) - len(failed_good):
            bad[node] = failed_good
        else:
            suspect[node] = [key for key in adjacency[node] if edges[key]["failed"]]
    listed = set()
    for node in sorted(unexplained):  # 5. (a link failing once: its nodes are judged with the link, not here)
        keys = unexplained[node]
        if node in good or (keys and all(key in decided for key in keys)):
            continue
        if keys:
            suspect[node] = keys
            for key in keys:
                if key not in decided and key not in listed:
                    links_suspect.append(key)
                    listed.add(key)
        elif adjacency[node]:
            no_good.append(node)
    links_suspect += not_reproduced
    return {"bad": bad, "suspect": suspect, "no_good_partner": no_good, "good": good, "links_bad": links_bad,
            "links_suspect": links_suspect, "link_not_reproduced": not_reproduced}


def rail_lows(pair, ratio=RAIL_LOW_RATIO):
    """{rail: [host, ...]} of the rails that carried less than ratio x their busiest sibling on a host of this pair
    (rail_bytes {host: {rail: bytes}}; a host with one rail or nothing counted has no sibling to compare)."""
    lows = {}
    for host, counts in (pair.get("rail_bytes") or {}).items():
        if not isinstance(counts, dict) or len(counts) < 2:
            continue
        values = [(rail, value) for rail, value in counts.items()
                  if type(value) in (int, float) and value >= 0]  # bool is not a byte count
        busiest = max((value for _, value in values), default=0)
        for rail, value in values:
            if busiest > 0 and value < ratio * busiest:
                lows.setdefault(rail, []).append(host)
    for hosts in lows.values():
        hosts.sort()
    return lows


def _intra_untimed(stage):
    """An intra-node point whose speed judges nothing: one rank (no bus bandwidth) or the MPI backend on host
    memory (correctness only: its times are the host's load, 0.2-1.5 GB/s on one loaded 2-core machine)."""
    return stage.get("intra_ranks") == 1 or bool(stage.get("intra_correctness_only"))


def node_stage_verdicts(nodes, node_stage):
    """The node stage's verdicts: {node: [(verdict, code, detail, rail or None)]} and the nodes that go on to the
    pair stage. node_stage: {node: {"doctor": "pass"|"warn"|"fail"|None, "intra_busbw_gbps": x|None,
    "intra_small_time_us": y|None, "loopback_busbw_gbps": {rail: x|None}, optional "intra_reason": text and
    "loopback_reason": {rail: text} (why a value is missing: carried into the reason's detail), optional
    "intra_ranks": n}} (a node absent: no doctor result and no intra-node values). At one rank (one GPU a node) the
    intra-node point crosses no link: it has no bus bandwidth by definition (coll_perf writes null with
    busbw_reason), so only its small-message time must exist, and the node is never compared on busbw."""
    findings = {node: [] for node in nodes}
    intra_band = fleet_band([(node_stage.get(n) or {}).get("intra_busbw_gbps") for n in nodes
                             if not _intra_untimed(node_stage.get(n) or {})], True,
                            bw_floor_ratio=SINGLE_VALUE_FLOOR_RATIO)
    rails = sorted({rail for n in nodes for rail in ((node_stage.get(n) or {}).get("loopback_busbw_gbps") or {})})
    loop_bands = {rail: fleet_band([((node_stage.get(n) or {}).get("loopback_busbw_gbps") or {}).get(rail)
                                    for n in nodes], True, bw_floor_ratio=SINGLE_VALUE_FLOOR_RATIO)
                  for rail in rails}
    for node in nodes:
        stage = node_stage.get(node) or {}
        doctor = stage.get("doctor")
        if doctor == "fail":
            findings[node].append((BAD, NODE_DOCTOR_FAIL, {"doctor": doctor}, None))
        elif doctor not in ("pass", "warn"):
            findings[node].append((BAD, NODE_DOCTOR_NO_RESULT, {"doctor": doctor}, None))
        busbw, small = stage.get("intra_busbw_gbps"), stage.get("intra_small_time_us")
        if _intra_untimed(stage) and _number(small):
            pass  # one rank (no link crossed) or the MPI backend on host memory (correctness only): it ran
        elif not _number(busbw) or not _number(small):
            findings[node].append((BAD, NODE_INTRA_FAILED, {"intra_busbw_gbps": busbw if _number(busbw) else None,
                                                           "intra_small_time_us": small if _number(small) else None,
                                                           "reason": stage.get("intra_reason")}, None))
        elif _outside(busbw, intra_band, True):
            findings[node].append((SUSPECT, NODE_INTRA_SLOW, {"intra_busbw_gbps": busbw,
                                                             "fleet_median": intra_band["median"],
                                                             "limit": intra_band["limit"]}, None))
        for rail, value in sorted((stage.get("loopback_busbw_gbps") or {}).items()):
            if not _number(value):
                findings[node].append((BAD, RAIL_LOOPBACK_FAILED, {"loopback_busbw_gbps": None,
                                                                  "reason": (stage.get("loopback_reason") or {})
                                                                  .get(rail)}, rail))
            elif _outside(value, loop_bands[rail], True):
                findings[node].append((SUSPECT, RAIL_LOOPBACK_SLOW, {"loopback_busbw_gbps": value,
                                                                    "fleet_median": loop_bands[rail]["median"],
                                                                    "limit": loop_bands[rail]["limit"]}, rail))
    paired = [node for node in nodes if not any(verdict == BAD for verdict, *_ in findings[node])]
    return findings, paired


def _reason(code, detail, pair_indices):
    return {"code": code, "detail": detail, "pairs": sorted(pair_indices)}


def _worst(verdicts):
    return BAD if BAD in verdicts else (SUSPECT if SUSPECT in verdicts else ACCEPT)


def classify(nodes, node_stage, pairs, bands=None):
    """The screen's verdicts. nodes: the fleet's names; node_stage: as node_stage_verdicts; pairs: [{"a", "b",
    "busbw_gbps": x|None, "small_time_us": y|None, "rail_bytes": {host: {rail: bytes}}|None, ...}] of the pair
    stage and retests (the same pair may appear more than once). Returns
    {"nodes": [{"name", "verdict", "paired", "reasons": [{"code", "detail", "pairs": [index]}]}],
     "links": [{"a", "b", "verdict", "reasons"}], "rails": [{"node", "rail", "verdict", "reasons"}],
     "pair_outcomes": [outcome per pair], "bands": {...}, "result": "pass"|"suspect"|"fail", "exit_code",
     "retest": {"suspects", "known_good", "met", "repeat_pairs"}} - retest feeds plan.screen_schedule.retest_rounds
    (suspects: the nodes suspect from their pairs, which a retest can settle; a node-stage suspicion is not).
    Indices in "pairs" point into the pairs given; a link's a and b are in name order."""
    nodes = list(nodes)
    _check_pairs(pairs)
    fleet = set(nodes)
    for index, pair in enumerate(pairs):
        for node in (pair["a"], pair["b"]):
            if node not in fleet:
                raise ValueError(f"screen: pair {index} names {node}, which is not in the fleet")
    findings, paired = node_stage_verdicts(nodes, node_stage)
    outcomes, bands = judge_pairs(pairs, bands)
    excluded = set(nodes) - set(paired)
    edges = _edges(pairs, [outcome != PAIR_OK for outcome in outcomes], excluded)
    found = _attribute(paired, edges)
    reasons = {node: [] for node in nodes}
    verdicts = {node: [] for node in nodes}
    from_pairs = set()  # suspect from the pairs: what a retest against known-good nodes can settle
    rails = {}
    for node in nodes:
        for verdict, code, detail, rail in findings[node]:
            reasons[node].append(_reason(code, dict(detail, rail=rail) if rail else detail, []))
            verdicts[node].append(verdict)
            if rail:
                rails.setdefault((node, rail), []).append((verdict, _reason(code, detail, [])))

    def indices(keys):
        return [index for key in keys for index in edges[key]["pairs"]]

    for node, keys in found["bad"].items():
        slow = [i for i in indices(keys) if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        code = NODE_SLOW_WITH_GOOD_PARTNERS if slow else NODE_FAILED_WITH_GOOD_PARTNERS
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        reasons[node].append(_reason(code, {"good_partners_failed": partners}, indices(keys)))
        verdicts[node].append(BAD)
    for node, keys in found["suspect"].items():
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        reasons[node].append(_reason(NODE_UNRESOLVED, {"partners_failed": partners}, indices(keys)))
        verdicts[node].append(SUSPECT)
        from_pairs.add(node)
    in_edges = {node for key in edges for node in key}
    untested = [node for node in paired if len(nodes) >= 2 and node not in in_edges]  # never met anyone
    for node in found["no_good_partner"] + untested:
        reasons[node].append(_reason(NODE_NO_GOOD_PARTNER, {}, indices(k for k in edges if node in k)))
        verdicts[node].append(SUSPECT)
        from_pairs.add(node)
    links = []
    for key in found["links_bad"]:
        slow = [i for i in edges[key]["pairs"] if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        links.append({"a": key[0], "b": key[1], "verdict": BAD,
                      "reasons": [_reason(LINK_SLOW_PAIR if slow else LINK_FAILED_PAIR,
                                          {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
    for key in found["links_suspect"]:
        code = LINK_NOT_REPRODUCED if key in found["link_not_reproduced"] else LINK_UNRESOLVED
        links.append({"a": key[0], "b": key[1], "verdict": SUSPECT,
                      "reasons": [_reason(code, {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
        if code == LINK_NOT_REPRODUCED:  # both nodes pass with good partners; only the link is in question
            for node in key:
                reasons[node].append(_reason(LINK_NOT_REPRODUCED, {"partner": key[1] if node == key[0] else key[0]},
                                             edges[key]["pairs"]))
                verdicts[node].append(SUSPECT)
                from_pairs.add(node)
    # Rails from the pairs' counters: the same attribution per rail name.
    rail_failed = {}
    for index, pair in enumerate(pairs):
        for rail, hosts in rail_lows(pair).items():
            rail_failed.setdefault(rail, {})[index] = hosts
    for rail, failed_at in sorted(rail_failed.items()):
        rail_edges = _edges(pairs, [index in failed_at for index in range(len(pairs))], excluded)
        rail_found = _attribute(paired, rail_edges)
        for node, keys in rail_found["bad"].items():
            behind = [i for key in keys for i in rail_edges[key]["pairs"]]
            reason = _reason(RAIL_UNBALANCED, {"rail": rail, "low_on_hosts": sorted(
                {host for i in behind for host in failed_at.get(i, [])})}, behind)
            reasons[node].append(reason)
            verdicts[node].append(BAD)
            rails.setdefault((node, rail), []).append((BAD, _reason(RAIL_UNBALANCED, reason["detail"], behind)))
        for node, keys in rail_found["suspect"].items():
            behind = [i for key in keys for i in rail_edges[key]["pairs"]]
            detail = {"rail": rail, "low_on_hosts": sorted({host for i in behind for host in failed_at.get(i, [])})}
            reasons[node].append(_reason(RAIL_UNBALANCED_UNRESOLVED, detail, behind))
            verdicts[node].append(SUSPECT)
            from_pairs.add(node)
            rails.setdefault((node, rail), []).append((SUSPECT, _reason(RAIL_UNBALANCED_UNRESOLVED, detail, behind)))
        for key in rail_found["links_bad"] + rail_found["links_suspect"]:
            for node in key:  # a rail low on one pair only: that pair's rail, both nodes in question
                behind = rail_edges[key]["pairs"]
                detail = {"rail": rail, "partner": key[1] if node == key[0] else key[0]}
                reasons[node].append(_reason(RAIL_UNBALANCED_UNRESOLVED, detail, behind))
                verdicts[node].append(SUSPECT)
                from_pairs.add(node)
                rails.setdefault((node, rail), []).append((SUSPECT, _reason(RAIL_UNBALANCED_UNRESOLVED, detail,
                                                                            behind)))
    node_rows = [{"name": node, "verdict": _worst(verdicts[node]), "paired": node in paired,
                  "reasons": reasons[node]} for node in nodes]
    rail_rows = [{"node": node, "rail": rail, "verdict": _worst([v for v, _ in entries]),
                  "reasons": [reason for _, reason in entries]} for (node, rail), entries in sorted(rails.items())]
    every = [row["verdict"] for row in node_rows] + [row["verdict"] for row in links] + \
        [row["verdict"] for row in rail_rows]
    result = "fail" if BAD in every else ("suspect" if SUSPECT in every else "pass")
    suspects = [row["name"] for row in node_rows if row["verdict"] == SUSPECT and row["name"] in from_pairs]
    met = {}
    for key in edges:
        met.setdefault(key[0], set()).add(key[1])
        met.setdefault(key[1], set()).add(key[0])
    known_good = [node for node in paired if node in found["good"] and _worst(verdicts[node]) == ACCEPT]
    retest = {"suspects": suspects, "known_good": known_good,
              "met": {node: sorted(met.get(node, ())) for node in suspects},
              "repeat_pairs": [list(key) for key in found["links_suspect"]]}
    return {"nodes": node_rows, "links": links, "rails": rail_rows, "pair_outcomes": outcomes, "bands": bands,
            "result": result, "exit_code": EXIT_CODES[result], "retest": retest}


def to_document(schedule, node_stage, pairs, verdicts, tool_version, created_utc):
    """screen.json (results_schema/screen.schema.json) from the schedule (plan.screen_schedule.pair_schedule, plus
    "retest_rounds"), the node stage's data, the pairs as measured and classify()'s verdicts."""
    outcome_of = verdicts["pair_outcomes"]
    pair_rows = []
    for index, pair in enumerate(pairs):
        pair_rows.append({"index": index, "a": pair["a"], "b": pair["b"], "round": pair.get("round"),
                          "stage": pair.get("stage", "pair"),
                          "busbw_gbps": pair["busbw_gbps"] if _number(pair.get("busbw_gbps")) else None,
                          "small_time_us": pair["small_time_us"] if _number(pair.get("small_time_us")) else None,
                          "reason": pair.get("reason"), "outcome": outcome_of[index],
                          "transport": pair.get("transport"), "rail_bytes": pair.get("rail_bytes")})
    rows = []
    for row in verdicts["nodes"]:
        stage = node_stage.get(row["name"]) or {}
        rows.append(dict(row, node_stage={
            "doctor": stage.get("doctor"),
            "intra_busbw_gbps": stage.get("intra_busbw_gbps") if _number(stage.get("intra_busbw_gbps")) else None,
            "intra_small_time_us": stage.get("intra_small_time_us")
            if _number(stage.get("intra_small_time_us")) else None,
            "intra_ranks": stage.get("intra_ranks") if isinstance(stage.get("intra_ranks"), int) else None,
            "loopback_busbw_gbps": {rail: value if _number(value) else None
                                    for rail, value in (stage.get("loopback_busbw_gbps") or {}).items()}}))
    return {"schema_version": SCHEMA_VERSION, "kind": "screen", "tool": {"name": "cclbench", "version": tool_version},
            "created_utc": created_utc,
            "schedule": {"mode": schedule["mode"], "seed": schedule["seed"], "repeats": schedule["repeats"],
                         "pair_count": schedule["pair_count"], "concurrent_jobs": schedule["concurrent_jobs"],
                         "rounds": [{"round": entry["round"], "pairs": entry["pairs"], "bye": entry.get("bye")}
                                    for entry in schedule["rounds"]],
                         "retest_rounds": schedule.get("retest_rounds") or []},
            "bands": verdicts["bands"], "nodes": rows, "pairs": pair_rows, "links": verdicts["links"],
            "rails": verdicts["rails"], "result": verdicts["result"], "exit_code": verdicts["exit_code"]}


# What each reason code means and what to check, next to the codes so that docs/verdicts.md (render/docs.py,
# `cclbench docs`) and the rules share one source: code -> (verdict it gives, means, check, constants as
# "module.NAME" in rules/). A code of REASON_CODES without an entry fails tests/scripts/test_docs.py.
REASON_MEANINGS = {
    NODE_DOCTOR_FAIL: (BAD, "The node's doctor failed a check; the node is not paired.",
                       "The doctor's detail for the node (screen.json, logs/); fix and rerun.", ()),
    NODE_DOCTOR_NO_RESULT: (BAD, "The node's doctor left no result (it could not be started or reached).",
                            "The node's job output in logs/: ssh, the launcher, the node itself.", ()),
    NODE_INTRA_FAILED: (BAD, "The node's intra-node point failed (no value); the node is not paired.",
                        "The intra job's output in logs/: GPUs, NCCL, the driver.", ()),
    NODE_INTRA_SLOW: (SUSPECT, "The node's intra-node bus bandwidth is below the fleet's band: one value against "
                      "the fleet, no second opinion.",
                      "The node's GPUs and PCIe/NVLink (`cclbench doctor`, `cclbench baseline` on it alone).",
                      ("screen_rules.NOISE_SIGMAS", "screen_rules.SINGLE_VALUE_FLOOR_RATIO",
                       "screen_rules.MIN_FLEET_VALUES")),
    NODE_SLOW_WITH_GOOD_PARTNERS: (BAD, "The node's pairs were slow (bandwidth below, or small-message time above, "
                                   "the fleet's band) with at least two distinct known-good partners.",
                                   "The node's NICs, cables and switch ports; its doctor; then its GPUs.",
                                   ("screen_rules.MIN_GOOD_FAILS", "screen_rules.BW_FLOOR_RATIO",
                                    "screen_rules.TIME_FLOOR_FACTOR", "screen_rules.NOISE_SIGMAS")),
    NODE_FAILED_WITH_GOOD_PARTNERS: (BAD, "The node's pairs failed (no value) with at least two distinct "
                                     "known-good partners.",
                                     "The pair jobs' output in logs/: NCCL's errors, timeouts.",
                                     ("screen_rules.MIN_GOOD_FAILS",)),
    NODE_UNRESOLVED: (SUSPECT, "The node failed pairs, but not with enough known-good partners to call it bad.",
                      "The pairs behind the reason; a retest against good nodes, or a full screen.",
                      ("screen_rules.MIN_GOOD_FAILS",)),
    NODE_NO_GOOD_PARTNER: (SUSPECT, "The node never passed with a known-good node (or never met one): nothing "
                           "vouches for it.",
                           "Run a full screen, or `--quick` with more rounds.", ()),
    LINK_SLOW_PAIR: (BAD, "One pair was slow, reproducibly, while both its nodes pass with others: the path "
                     "between them.",
                     "The switch ports and cables between the two nodes; the fabric's routing.",
                     ("screen_rules.BW_FLOOR_RATIO", "screen_rules.TIME_FLOOR_FACTOR")),
    LINK_FAILED_PAIR: (BAD, "One pair failed, reproducibly, while both its nodes pass with others.",
                       "The pair's job output in logs/; the path between the two nodes.", ()),
    LINK_NOT_REPRODUCED: (SUSPECT, "One pair failed once and the failure was not (yet) reproduced.",
                          "Nothing unless it repeats; a `--resume` or another screen retests it.", ()),
    LINK_UNRESOLVED: (SUSPECT, "A pair failed and the fleet's other pairs cannot tell the link from its nodes.",
                      "The pairs behind the reason; more rounds.", ()),
    RAIL_LOOPBACK_FAILED: (BAD, "A rail's loopback point (all traffic through that one NIC) failed.",
                           "The rail's port state, cable and GID (`cclbench doctor`).", ()),
    RAIL_LOOPBACK_SLOW: (SUSPECT, "A rail's loopback bandwidth is below the fleet's band.",
                         "The rail's link speed and PCIe link; its error counters.",
                         ("screen_rules.SINGLE_VALUE_FLOOR_RATIO", "screen_rules.NOISE_SIGMAS")),
    RAIL_UNBALANCED: (BAD, "A rail of the node carried far less than its busiest sibling in its pairs, with "
                      "known-good partners.",
                      "That rail's port, cable and switch port (`ip link`, the doctor's path_mtu).",
                      ("screen_rules.RAIL_LOW_RATIO", "screen_rules.MIN_GOOD_FAILS")),
    RAIL_UNBALANCED_UNRESOLVED: (SUSPECT, "A rail was low in some pairs, but not enough to name whose rail it is.",
                                 "The pairs behind the reason; the rail on both nodes.",
                                 ("screen_rules.RAIL_LOW_RATIO",)),
}
