"""Verdicts of `cclbench screen`: which node, link or rail of a fleet is bad, relative to the fleet.

The rules, as data (reason codes in rules/screen_codes.py; the report renders them), each in its own module:
  rules/screen_node_stage.py: the path MTU between the nodes and each node alone (doctor, intra-node, loopback);
  rules/screen_bands.py: the fleet's band of a metric and each pair's reference (the pairs its nodes did not shape);
  rules/screen_attribution.py: which node of a failing pair is at fault (peel, known good, links);
  rules/screen_rails.py: each rail's share of a pair's bytes and each rail alone against its sibling;
  rules/screen_findings.py: the verdicts as they are found, and the attribution as node and link reasons;
  rules/screen_retests.py: what the next retest pass needs.
  Iterative: once nodes are found bad, the references are built again without their pairs, and again until no
      new node is found, so that two bad nodes of a small fleet do not hide each other from the second pass.
  Unclear cases are suspect, with the pairs behind them. Result: "fail" when anything is bad, else "suspect" when
  anything is suspect, else "pass"; EXIT_CODES.

classify runs these as steps, each a function that reads on its own (STEPS: path MTU, node stage, pairs,
attribution, rail balance, rails alone, retests); classify(timings=dict) adds each step's CPU seconds (the
simulator's scale table reports them). The path MTU step's verdicts are computed once a screen and passed down.
to_document writes screen.json from them. The names other layers and the tests use are re-exported here.

Pure: plain data in and out, no I/O, no text beyond the stable codes (the step timings read the process clock).
"""
import time

from ..model.doctor_paths import path_mtu_ends
# Re-exported below: this module is the screen's rules to the other layers and the tests (rules.NAME), wherever a
# name lives.
from .screen_attribution import MIN_GOOD_FAILS, attribute, edges_of
from .screen_bands import (BW_FLOOR_RATIO, EXACT_REFERENCE_WORK, HOST_TIMES_WIDENING, MAD_RELATIVE_SE, MAD_SE_BOUND,
                           MAD_TO_SD, METRICS, MIN_FLEET_VALUES, MIN_SPREAD_VALUES, NOISE_SIGMAS, REFERENCE_FLOOR_RATIO,
                           SINGLE_VALUE_FLOOR_RATIO, SMALL_TIME_FLOOR_FACTOR, TIME_FLOOR_FACTOR, check_pairs,
                           fleet_band, good_half_spread, is_rail_point, judge_pairs, positive_number, reference_band)
from .screen_codes import (ACCEPT, BAD, CHECK_ATTRIBUTION, CHECK_FAILURES, CHECK_NODE_SPEED, CHECK_NODE_STAGE,
                           CHECK_PAIR_SPEED, CHECK_PATH_MTU, CHECK_RAIL_BALANCE, CHECK_RAIL_SPEED, CHECKS, EXIT_CODES,
                           LINK_FAILED_PAIR, LINK_NOT_REPRODUCED, LINK_PATH_DOWN, LINK_PATH_MTU, LINK_SLOW_PAIR,
                           LINK_UNRESOLVED, MIN_NODES_TO_COMPARE, NODE_DOCTOR_FAIL, NODE_DOCTOR_NO_RESULT,
                           NODE_FAILED_WITH_GOOD_PARTNERS, NODE_INTRA_FAILED, NODE_NOT_STARTED, NODE_INTRA_SLOW, NODE_NO_GOOD_PARTNER,
                           NODE_PATH_MTU, NODE_SLOW_WITH_GOOD_PARTNERS, NODE_UNRESOLVED, NOT_JUDGED_CORRECTNESS_ONLY,
                           NOT_JUDGED_FEW_NODES, NOT_JUDGED_NO_COUNTERS, NOT_JUDGED_NO_RAIL_POINTS,
                           NOT_JUDGED_NOT_PROBED, NOT_JUDGED_REASONS, PAIR_FAILED, PAIR_OK, PAIR_SLOW_BUSBW,
                           PAIR_SLOW_RAIL, PAIR_SLOW_SMALL, RAIL_DEAD, RAIL_LOOPBACK_FAILED, RAIL_LOOPBACK_SLOW,
                           RAIL_SLOW, RAIL_SLOW_UNRESOLVED, RAIL_STAGE, RAIL_UNBALANCED, RAIL_UNBALANCED_UNRESOLVED,
                           REASON_CODES, REASON_MEANINGS, SUSPECT)
from .screen_findings import Findings, step_attribution, step_node_stage, worst
from .screen_node_stage import intra_untimed, node_stage_verdicts, path_mtu_verdicts
from .screen_rails import (RAIL_LOW_RATIO, RAIL_NOISE_FLEET_GROUPS, RAIL_NOISE_MIN_GROUPS, RAIL_QUARTILE_TO_SD,
                           RAIL_SLOW_RATIO, judge_rail_points, median_range, rail_lows, rail_slow_ratio,
                           rail_small_time_ratio, step_rail_balance, step_rails_alone)
from .screen_retests import step_retests

SCHEMA_VERSION = "1.6.0"  # 1.6: shared_causes[].explained_links; 1.5: schedule.dropped[].dead_paths and .not_started, bad_groups, retests.open


def _judge_and_attribute(pairs, paired, excluded, host_times=False):
    """The pair stage's outcomes, references, edges and attribution, rebuilt without the nodes found bad until no
    new one is found (module docstring)."""
    pair_rows = {index for index, pair in enumerate(pairs) if not is_rail_point(pair)}
    without = set()
    while True:
        outcomes, references = judge_pairs(pairs, without, host_times)
        edges = edges_of(pairs, [outcome != PAIR_OK for outcome in outcomes], excluded, pair_rows)
        found = attribute(paired, edges)
        new = set(found["bad"]) - without
        if not new:
            return outcomes, references, edges, found
        without |= new


def _judged(nodes, paired, node_stage, pairs, intra_band, rail_found, path_checks):
    """(judged, not_judged): [{"check", "detail"}] and [{"check", "reason", "detail"}] (codes above)."""
    judged = [{"check": CHECK_FAILURES, "detail": {}}, {"check": CHECK_NODE_STAGE, "detail": {"nodes": len(nodes)}}]
    not_judged = []
    probed = [check for check in path_checks or () if path_mtu_ends(check) and check.get("status") in ("pass", "fail")]
    if probed:
        judged.append({"check": CHECK_PATH_MTU, "detail": {"paths": len(probed)}})
    else:
        not_judged.append({"check": CHECK_PATH_MTU, "reason": NOT_JUDGED_NOT_PROBED,
                           "detail": {"skipped": [check.get("reason") or check.get("detail")
                                                  for check in path_checks or ()][:4]}})
    timed = [n for n in nodes if not intra_untimed(node_stage.get(n) or {})]
    if not timed and nodes:
        not_judged.append({"check": CHECK_NODE_SPEED, "reason": NOT_JUDGED_CORRECTNESS_ONLY, "detail": {}})
    elif intra_band is None:
        not_judged.append({"check": CHECK_NODE_SPEED, "reason": NOT_JUDGED_FEW_NODES,
                           "detail": {"nodes": len(timed), "needed": MIN_FLEET_VALUES}})
    else:
        judged.append({"check": CHECK_NODE_SPEED, "detail": {"nodes": len(timed)}})
    for check in (CHECK_PAIR_SPEED, CHECK_ATTRIBUTION):
        if len(paired) >= MIN_NODES_TO_COMPARE:
            judged.append({"check": check, "detail": {"nodes": len(paired)}})
        else:
            not_judged.append({"check": check, "reason": NOT_JUDGED_FEW_NODES,
                               "detail": {"nodes": len(paired), "needed": MIN_NODES_TO_COMPARE}})
    counted = sorted({rail for pair in pairs if not is_rail_point(pair)
                      for counts in (pair.get("rail_bytes") or {}).values() if isinstance(counts, dict)
                      and len(counts) >= 2 for rail in counts})
    if counted:
        judged.append({"check": CHECK_RAIL_BALANCE, "detail": {"rails": counted}})
    else:
        not_judged.append({"check": CHECK_RAIL_BALANCE, "reason": NOT_JUDGED_NO_COUNTERS, "detail": {}})
    alone = sorted({pairs[index].get("rail") for index, entry in rail_found.items() if entry["judged"]})
    if alone:
        judged.append({"check": CHECK_RAIL_SPEED, "detail": {"rails": alone}})
    else:
        not_judged.append({"check": CHECK_RAIL_SPEED, "reason": NOT_JUDGED_NO_RAIL_POINTS,
                           "detail": {"rails": sorted({pair.get("rail") for pair in pairs
                                                       if is_rail_point(pair) and pair.get("rail")})}})
    return judged, not_judged



def overall_result(nodes, links, rails):
    """The screen's result from its node, link and rail rows: "fail" when any is bad, else "suspect" when any is
    suspect, else "pass"."""
    every = [row["verdict"] for rows in (nodes, links, rails) for row in rows]
    return "fail" if BAD in every else ("suspect" if SUSPECT in every else "pass")


# The steps of classify, in order; classify(timings=...) records each one's CPU seconds under these names.
STEPS = ("path_mtu", "node_stage", "pairs", "attribution", "rail_balance", "rails_alone", "retests")


class _StepClock:
    """Adds each step's CPU time (time.process_time) to timings[step] when timings is a dict."""

    def __init__(self, timings):
        self.timings = timings
        self.step = None
        self.started = None

    def __call__(self, step):
        self.step = step
        return self

    def __enter__(self):
        self.started = time.process_time()

    def __exit__(self, *_):
        if self.timings is not None:
            self.timings[self.step] = self.timings.get(self.step, 0.0) + time.process_time() - self.started


def classify(nodes, node_stage, pairs, path_checks=None, path_mtu=None, timings=None):
    """The screen's verdicts. nodes: the fleet's names; node_stage: as node_stage_verdicts; pairs: [{"a", "b",
    "busbw_gbps": x|None, "small_time_us": y|None, "rail_bytes": {host: {rail: bytes}}|None, "stage", "round",
    "rail" (rail points)...}] of the pair stage, the rail points and the retests (the same pair may appear more
    than once). Returns
    {"nodes": [{"name", "verdict", "paired", "reasons": [{"code", "detail", "pairs": [index]}]}],
     "links": [{"a", "b", "verdict", "reasons"}], "rails": [{"node", "rail", "verdict", "reasons"}],
     "pair_outcomes": [outcome per pair], "references": [per pair, judge_pairs], "rail_ratios": {index: ratio},
     "bands": {...} (the whole fleet's, for the record), "judged", "not_judged", "result": "pass"|"suspect"|"fail",
     "exit_code", "retest": {"suspects", "known_good", "met", "repeat_pairs", "rail_suspects"}} - retest feeds
    plan.screen_schedule.retest_rounds (suspects: the nodes suspect from their pairs, which a retest can settle; a
    node-stage suspicion is not; rail_suspects: those whose retests need their rail points again).
    Indices in "pairs" point into the pairs given; a link's a and b are in name order. path_checks: the path MTU
    step's doctor checks (None: not run), also returned as "path_mtu" for the document; path_mtu: their
    path_mtu_verdicts when the caller has them already (computed once a screen). timings: a dict that gets each
    step's CPU seconds (STEPS) added.
    The steps, each a function above: path MTU, node stage (_step_node_stage), pairs (_judge_and_attribute),
    attribution (_step_attribution), rail balance (_step_rail_balance), rails alone (_step_rails_alone), retests
    (_step_retests)."""
    nodes = list(nodes)
    check_pairs(pairs)
    fleet = set(nodes)
    for index, pair in enumerate(pairs):
        for node in (pair["a"], pair["b"]):
            if node not in fleet:
                raise ValueError(f"screen: pair {index} names {node}, which is not in the fleet")
    clock = _StepClock(timings)
    with clock("path_mtu"):
        if path_mtu is None:
            path_mtu = path_mtu_verdicts(nodes, path_checks)
    state = Findings(nodes)
    with clock("node_stage"):
        findings, paired = node_stage_verdicts(nodes, node_stage, path_mtu=path_mtu)
        step_node_stage(state, findings)
        state.links += [dict(link) for link in path_mtu[1]]
    excluded = set(nodes) - set(paired)
    # GPU-less nodes: the pairs ran on the MPI backend too, whose times are the hosts' (HOST_TIMES_WIDENING).
    host_times = bool(paired) and all((node_stage.get(node) or {}).get("intra_correctness_only") for node in paired)
    with clock("pairs"):
        outcomes, references, edges, found = _judge_and_attribute(pairs, paired, excluded, host_times)
    with clock("attribution"):
        step_attribution(state, nodes, paired, outcomes, edges, found)
    with clock("rail_balance"):
        step_rail_balance(state, pairs, paired, excluded)
    with clock("rails_alone"):
        rail_found = judge_rail_points(pairs, host_times)
        for index, entry in rail_found.items():
            outcomes[index] = entry["outcome"]
        step_rails_alone(state, pairs, paired, excluded, rail_found)
    node_rows = [{"name": node, "verdict": worst(state.verdicts[node]), "paired": node in paired,
                  "reasons": state.reasons[node]} for node in nodes]
    rail_rows = [{"node": node, "rail": rail, "verdict": worst([v for v, _ in entries]),
                  "reasons": [reason for _, reason in entries]}
                 for (node, rail), entries in sorted(state.rails.items())]
    result = overall_result(node_rows, state.links, rail_rows)
    with clock("retests"):
        retest = step_retests(state, node_rows, pairs, paired, edges, found, rail_found)
    combined = [pair for pair in pairs if not is_rail_point(pair)]
    bands = {key: fleet_band([p.get(key) for p in combined], higher) for key, higher in METRICS}
    intra_band = fleet_band([(node_stage.get(n) or {}).get("intra_busbw_gbps") for n in nodes
                             if not intra_untimed(node_stage.get(n) or {})], True)
    judged, not_judged = _judged(nodes, paired, node_stage, pairs, intra_band, rail_found, path_checks)
    return {"nodes": node_rows, "links": state.links, "rails": rail_rows, "pair_outcomes": outcomes,
            "references": references, "rail_ratios": {index: entry["ratio"] for index, entry in rail_found.items()},
            "rail_small_ratios": {index: entry["small_ratio"] for index, entry in rail_found.items()},
            "bands": bands, "judged": judged, "not_judged": not_judged, "result": result,
            "exit_code": EXIT_CODES[result], "retest": retest,
            "path_mtu": None if path_checks is None else list(path_checks)}


def to_document(schedule, node_stage, pairs, verdicts, tool_version, created_utc):
    """screen.json (results_schema/screen.schema.json) from the schedule (plan.screen_schedule.pair_schedule, plus
    "retest_rounds"), the node stage's data, the pairs as measured and classify()'s verdicts."""
    outcome_of = verdicts["pair_outcomes"]
    pair_rows = []
    for index, pair in enumerate(pairs):
        rail_point = is_rail_point(pair)
        ratio = verdicts["rail_ratios"].get(index) if rail_point else None
        small_ratio = (verdicts.get("rail_small_ratios") or {}).get(index) if rail_point else None
        reference = (verdicts["references"][index] or None) if not rail_point else None
        pair_rows.append({"index": index, "a": pair["a"], "b": pair["b"], "round": pair.get("round"),
                          "stage": pair.get("stage", "pair"), "rail": pair.get("rail") if rail_point else None,
                          "busbw_gbps": pair["busbw_gbps"] if positive_number(pair.get("busbw_gbps")) else None,
                          "small_time_us": pair["small_time_us"] if positive_number(pair.get("small_time_us")) else None,
                          "reason": pair.get("reason"), "outcome": outcome_of[index],
                          "rail_ratio": ratio, "rail_small_ratio": small_ratio,
                          "reference": None if reference is None else
                          {key: None if band is None else {"without": band["without"], "median": band["median"],
                                                           "limit": band["limit"], "values": band["values"]}
                           for key, band in reference.items()},
                          "transport": pair.get("transport"), "rail_bytes": pair.get("rail_bytes")})
    rows = []
    for row in verdicts["nodes"]:
        stage = node_stage.get(row["name"]) or {}
        rows.append(dict(row, node_stage={
            "doctor": stage.get("doctor"),
            "intra_busbw_gbps": stage.get("intra_busbw_gbps") if positive_number(stage.get("intra_busbw_gbps")) else None,
            "intra_small_time_us": stage.get("intra_small_time_us")
            if positive_number(stage.get("intra_small_time_us")) else None,
            "intra_ranks": stage.get("intra_ranks") if isinstance(stage.get("intra_ranks"), int) else None,
            "loopback_busbw_gbps": {rail: value if positive_number(value) else None
                                    for rail, value in (stage.get("loopback_busbw_gbps") or {}).items()}}))
    return {"schema_version": SCHEMA_VERSION, "kind": "screen", "tool": {"name": "cclbench", "version": tool_version},
            "created_utc": created_utc,
            "schedule": {"mode": schedule["mode"], "seed": schedule["seed"], "repeats": schedule["repeats"],
                         "pair_count": schedule["pair_count"], "concurrent_jobs": schedule["concurrent_jobs"],
                         "rounds": [{"round": entry["round"], "pairs": entry["pairs"], "bye": entry.get("bye")}
                                    for entry in schedule["rounds"]],
                         "retest_rounds": schedule.get("retest_rounds") or [],
                         "dropped": schedule.get("dropped") or []},
            "bands": verdicts["bands"], "nodes": rows, "pairs": pair_rows, "links": verdicts["links"],
            "rails": verdicts["rails"], "judged": verdicts["judged"], "not_judged": verdicts["not_judged"],
            "path_mtu": verdicts.get("path_mtu"), "result": verdicts["result"], "exit_code": verdicts["exit_code"]}

