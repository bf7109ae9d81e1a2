"""Verdicts of `cclbench screen`: which node, link or rail of a fleet is bad, relative to the fleet.

The rules, as data (reason codes below; the report renders them):
  Path MTU (between the nodes the node stage passed; the doctor's path_mtu probes, model/doctor_paths): a path
      fails when a don't-fragment echo of its rail's MTU gets no reply - NCCL hangs on such a path. The node with
      the most failing peers is bad (node.path_mtu) when at least MIN_GOOD_FAILS of them reach some other node and
      it fails with more peers than it reaches, again without the nodes taken; a failing path left over (2 nodes,
      one path alone, a fabric where every path fails) is a bad link (link.path_mtu). No pair is launched across a
      failing path, and a node found bad here is not paired.
  Node stage (each node alone): a doctor "fail" or no doctor result, an intra-node point that failed (no value) or a
      loopback point of a rail that failed make the node bad, and it is not paired. Intra-node bus bandwidth and a
      rail's loopback bandwidth below the fleet's band (below) make the node / rail suspect: one value against the
      fleet, no second opinion.
  The band (fleet_band): over a set of values of one metric, centre = the median, sd = 1.4826 x MAD of
      ln(value / median) (the robust standard deviation compare.point_shift uses), band = NOISE_SIGMAS x sd
      (compare's NOISE_SIGMAS), in log space so that "half" and "double" are as far from the centre. Floors
      (NVIDIA ClusterKit's convention): bandwidth is low only below BW_FLOOR_RATIO x median, time is high only above
      TIME_FLOOR_FACTOR x median, so a tight fleet does not flag 1% differences. The node stage's values, one a
      node, use it over the fleet (fewer than MIN_FLEET_VALUES values: no band) with SINGLE_VALUE_FLOOR_RATIO.
  A pair's reference (reference_band): a pair is never judged against values its own nodes shaped. Pair (a, b) is
      judged against every pair that touches neither a nor b (nor a node already found bad): when a is bad, those
      are healthy. At 3 nodes no pair avoids both: the pair is judged against the pairs without a and the pairs
      without b and is slow below either (the higher bandwidth limit, the lower time limit).
      A reference of MIN_SPREAD_VALUES values or more is the band above, its robust sd raised by MAD_SE_BOUND
      standard errors of a MAD (MAD_RELATIVE_SE / sqrt(values) of itself): the MAD of 10-20 values falls to half
      the real scatter by chance, and each pair draws its own reference; with fewer there is no spread estimate
      (the MAD of two or four values says little) and its limit is the fixed REFERENCE_FLOOR_RATIO x its median
      (bandwidth) or max(TIME_FLOOR_FACTOR, 1 / REFERENCE_FLOOR_RATIO) x its median (time): at 3 nodes the one pair
      without a bad node is the whole reference. Either way the spread is at least the fleet's own scatter
      (good_half_spread: the values on the good side of the fleet's median, which slow pairs do not reach while
      they are at most half), so a loaded host's scatter widens every limit: exp(-NOISE_SIGMAS x that sd). A
      reference with no value (2 nodes) judges nothing: the pairs' speed is then "not judged" (document
      "not_judged"), and only failures count.
      Iterative: once nodes are found bad, the references are built again without their pairs, and again until no
      new node is found, so that two bad nodes of a small fleet do not hide each other from the second pass.
  A pair fails when its large-size bus bandwidth or its small-message time is missing (the point failed) or out of
      its references. A pair measured more than once fails only when every measurement failed (a failure must
      reproduce).
  Attribution (_attribute), over the pairs' pass/fail:
      1. peel: repeatedly take the node with the most failures among those with >= MIN_GOOD_FAILS failures and more
         failures than passes, counting only pairs between nodes not yet taken (SuperBench drops nodes
         iteratively too); its failures are then explained;
      2. known good: a node not taken, with no unexplained failure and at least one pass;
      3. link: an unexplained failure that is the only one of both its nodes, both of which pass with a known-good
         node other than each other, is a bad link once it was measured failing at least twice (else suspect and
         repeated on retest: link.not_reproduced, its two nodes suspect for that reason alone); both nodes of a
         bad link are then known good. At 2 nodes the one pair, failed (no value) every time, at least twice, is a
         bad link too, and both nodes stay suspect;
      4. a taken node is bad when it failed with >= MIN_GOOD_FAILS distinct known-good nodes and with more of them
         than it passed with; otherwise it stays suspect;
      5. every other node with an unexplained failure, or with no pass against a known-good node, is suspect.
  Rails: per pair and host, a rail carrying less than RAIL_LOW_RATIO of its busiest sibling's bytes is low there;
      low on either host fails the pair for that rail, and the same attribution names the node whose rail it is.
  Each rail alone (rail points: stage "rail", one point per rail on the same pair, run back to back): a rail whose
      bus bandwidth alone is below RAIL_SLOW_RATIO x its best sibling's alone on that pair - and below the ratios'
      own noise, exp(-NOISE_SIGMAS x their sd) read from the fleet's rail points (rail_slow_ratio) - or that
      failed while a sibling ran, is slow on that pair (rail_ratio in the pair's row); the attribution above, per
      rail name, names the node (rail.slow) or the link. At 2 nodes there is no third node to tell which end is
      slow: a rail slow in every measurement of the pair, at least twice, makes the link bad (rail.slow) and both
      nodes' rails suspect.
  Unclear cases are suspect, with the pairs behind them. Result: "fail" when anything is bad, else "suspect" when
  anything is suspect, else "pass"; EXIT_CODES.

classify runs these as steps, each a function that reads on its own (STEPS: path MTU, node stage, pairs,
attribution, rail balance, rails alone, retests); classify(timings=dict) adds each step's CPU seconds (the
simulator's scale table reports them). The path MTU step's verdicts are computed once a screen and passed down.

Pure: plain data in and out, no I/O, no text beyond the stable codes (the step timings read the process clock).
"""
import math
import statistics
import time

from ..model.doctor_paths import path_mtu_down, path_mtu_ends

# The project's noise rule (scripts/cclbench_lib/compare.py): NOISE_SIGMAS and the MAD-to-sd factor of
# compare.point_shift. Restated here until rules/noise.py's constants are shared by both rules.
NOISE_SIGMAS = 4.0
MAD_TO_SD = 1.4826
# NVIDIA ClusterKit: a pair is suspect below 93% of the best bandwidth or above 2.1x the best latency. Used as
# floors of the band around the fleet's median (not its best: one lucky pair should not move the bar).
BW_FLOOR_RATIO = 0.93
TIME_FLOOR_FACTOR = 2.1
MIN_FLEET_VALUES = 3
# A pair's reference (the pairs that leave its nodes out) estimates its spread from this many values on; below,
# its limit is REFERENCE_FLOOR_RATIO x its median. Measured on synthetic fleets of 3-8 nodes with 10% and 20%
# lognormal scatter (the loaded 2-core virtual cluster's order), 600 seeds each, full and --quick 3: a MAD over 5-6
# values made 1% of healthy 6-node fleets fail at 10% scatter, over 10 and more none did; a floor of 0.6 failed
# 1.5-3% of healthy 3-4 node fleets at 20%, 0.5 0.3-1.5% (0 at 10%). A node 14x slow is named at every size.
MIN_SPREAD_VALUES = 10
REFERENCE_FLOOR_RATIO = 0.5
# Pairs measured by the MPI backend on host memory (GPU-less nodes): their times are correctness-only in absolute
# terms, the host's scheduling and load. On the loaded 2-core virtual cluster a healthy fleet's 8K time doubled on
# two pairs of one node (33-35 us against 13.5-14.6 us) with nothing wrong. There every floor above is widened by
# this factor (bandwidth floors divided, time floors multiplied): a several-fold gap is still a judgement (a
# rate-limited rail or node is 100x and more below), a scheduler's doubling is not.
HOST_TIMES_WIDENING = 4.0
# The relative standard error of a MAD over n normal values is about 1.165 / sqrt(n); a reference's spread is
# raised by MAD_SE_BOUND of them (an upper bound of the real spread, not its estimate).
MAD_RELATIVE_SE = 1.165
MAD_SE_BOUND = 2.0
# Every reference's spread is at least the fleet's own scatter, read from its good half (the values above the
# median for bandwidth): on the loaded 2-core virtual cluster healthy pairs scattered 9x (0.18 against 1.6 GB/s)
# while a reference of three values has no spread of its own. The MAD of the upper half of a normal sample about
# its own median is 0.399 sd (numerically, 400,001 draws): sd = 2.506 x that MAD.
GOOD_HALF_MAD_TO_SD = 2.506
GOOD_HALF_MIN_VALUES = 3
# Beyond this many values x nodes the references are one shared reference without the bad nodes: each node's
# pairs are then at most a small share of the fleet's (full screen of 256 nodes and more: under 1%), too few to
# move its median; the exact per-pair references would cost minutes.
EXACT_REFERENCE_WORK = 4_000_000
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
# A rail alone below half its sibling alone, on the same pair, measured back to back, is slow there: healthy rails
# of one pair differ by a few percent on GPU clusters (compare's single-measurement floor is 15%), by up to ~1.5x on
# the loaded 2-core virtual cluster; a degraded rail is several-fold below (9x: eth3 rate-limited, issue's
# measurement). One such pair is a suspicion; the attribution and the retests with known-good partners decide.
RAIL_SLOW_RATIO = 0.5
# The rail ratios' own noise (rail_slow_ratio): from this many groups of rail points on (one round of 8 nodes: a
# healthy fleet with fewer would be retested for its rails' scatter alone); the lower quartile of a
# half-normal |N(0, sd)| is 0.3186 sd.
RAIL_NOISE_MIN_GROUPS = 4
RAIL_QUARTILE_TO_SD = 0.3186

ACCEPT, SUSPECT, BAD = "accept", "suspect", "bad"
EXIT_CODES = {"pass": 0, "fail": 1, "suspect": 3}

# Reason codes (stable; REASON_MEANINGS below explains them in docs/verdicts.md).
NODE_DOCTOR_FAIL = "node.doctor_fail"
NODE_DOCTOR_NO_RESULT = "node.doctor_no_result"
NODE_NOT_STARTED = "node.not_started"
NODE_PATH_MTU = "node.path_mtu"
LINK_PATH_MTU = "link.path_mtu"
RAIL_DEAD = "rail.dead"
LINK_PATH_DOWN = "link.path_down"
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
RAIL_SLOW = "rail.slow"
RAIL_SLOW_UNRESOLVED = "rail.slow_unresolved"
REASON_CODES = (NODE_DOCTOR_FAIL, NODE_DOCTOR_NO_RESULT, NODE_INTRA_FAILED, NODE_INTRA_SLOW,
                NODE_SLOW_WITH_GOOD_PARTNERS, NODE_FAILED_WITH_GOOD_PARTNERS, NODE_UNRESOLVED, NODE_NO_GOOD_PARTNER,
                LINK_SLOW_PAIR, LINK_FAILED_PAIR, LINK_NOT_REPRODUCED, LINK_UNRESOLVED, RAIL_LOOPBACK_FAILED,
                RAIL_LOOPBACK_SLOW, RAIL_UNBALANCED, RAIL_UNBALANCED_UNRESOLVED, RAIL_SLOW, RAIL_SLOW_UNRESOLVED,
                NODE_PATH_MTU, LINK_PATH_MTU, RAIL_DEAD, LINK_PATH_DOWN, NODE_NOT_STARTED)

# Pair outcomes.
PAIR_OK, PAIR_FAILED, PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL = "ok", "failed", "slow_busbw", "slow_small"
PAIR_SLOW_RAIL = "slow_rail"
# A rail point: one pair, one rail alone (its row's "rail" names it); judged against its siblings, not the fleet.
RAIL_STAGE = "rail"

# What a screen judged and what it could not (document "judged" / "not_judged"), as codes.
CHECK_FAILURES = "failures"                  # every launch that failed: always judged
CHECK_NODE_STAGE = "node_stage"              # the doctor, the intra-node point, the loopback points ran
CHECK_NODE_SPEED = "node_stage_speed"        # intra-node and loopback speed against the fleet
CHECK_PAIR_SPEED = "pair_speed"              # each pair against the pairs that leave its nodes out
CHECK_ATTRIBUTION = "node_attribution"       # which node of a failing pair is at fault
CHECK_RAIL_BALANCE = "rail_balance"          # each rail's share of a pair's bytes (counters)
CHECK_RAIL_SPEED = "rail_speed"              # each rail alone against its sibling alone
CHECK_PATH_MTU = "path_mtu"                  # a don't-fragment echo of each rail's MTU between the nodes
CHECKS = (CHECK_FAILURES, CHECK_NODE_STAGE, CHECK_NODE_SPEED, CHECK_PAIR_SPEED, CHECK_ATTRIBUTION,
          CHECK_RAIL_BALANCE, CHECK_RAIL_SPEED, CHECK_PATH_MTU)
# Why a check was not judged.
NOT_JUDGED_FEW_NODES = "few_nodes"           # fewer nodes than the check needs (detail: nodes, needed)
NOT_JUDGED_CORRECTNESS_ONLY = "correctness_only"  # the MPI backend on host memory: its speed is the host's load
NOT_JUDGED_NO_COUNTERS = "no_rail_counters"  # no pair recorded bytes per rail for two rails or more
NOT_JUDGED_NO_RAIL_POINTS = "no_rail_points"  # fewer than two rails given (--hcas / --netdevs): nothing alone
NOT_JUDGED_NOT_PROBED = "not_probed"  # no path MTU probe ran (fewer than two nodes paired, a fixture sysfs root)
NOT_JUDGED_REASONS = (NOT_JUDGED_FEW_NODES, NOT_JUDGED_CORRECTNESS_ONLY, NOT_JUDGED_NO_COUNTERS,
                      NOT_JUDGED_NO_RAIL_POINTS, NOT_JUDGED_NOT_PROBED)
# Pair speed and attribution need a third node: a pair's reference leaves both of its nodes out in turn.
MIN_NODES_TO_COMPARE = 3

SCHEMA_VERSION = "1.5.0"  # 1.5: schedule.dropped[].dead_paths (a node dropped after its first failed pair), .not_started (a node its launcher could not start)


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


def reference_band(values, higher_is_better, widening=1.0):
    """One reference's band: from MIN_SPREAD_VALUES values on, fleet_band's with its robust sd raised to an upper
    bound of the real spread (x (1 + MAD_SE_BOUND x MAD_RELATIVE_SE / sqrt(n)): the MAD of a reference of 10-20
    values falls to half the real scatter by chance, and a pair is judged against one reference among many);
    with fewer values (at least one) no spread estimate: {"median", "robust_sd_log": None, "limit": the fixed floor,
    "values"}; None without a value."""
    return _reference_of_logs([math.log(value) for value in values if _number(value)], higher_is_better,
                              widening=widening)


def _reference_of_logs(logs, higher_is_better, fleet_sd=None, widening=1.0):
    """reference_band over the values' natural logs (the centre is the median in log space: for an even count the
    geometric mean of the two middle values). fleet_sd (good_half_spread): the fleet's own scatter, a lower bound
    of every reference's spread, small ones included. widening (HOST_TIMES_WIDENING for host-memory times, else 1)
    widens the fixed floors."""
    if not logs:
        return None
    centre_log = statistics.median(logs)
    centre = math.exp(centre_log)
    if len(logs) >= MIN_SPREAD_VALUES:
        raw_sd = MAD_TO_SD * statistics.median([abs(value - centre_log) for value in logs])
        sd = max(raw_sd * (1 + MAD_SE_BOUND * MAD_RELATIVE_SE / math.sqrt(len(logs))), fleet_sd or 0.0)
        limit = centre * (min(BW_FLOOR_RATIO / widening, math.exp(-NOISE_SIGMAS * sd)) if higher_is_better
                          else max(TIME_FLOOR_FACTOR * widening, math.exp(NOISE_SIGMAS * sd)))
        return {"median": centre, "robust_sd_log": sd, "limit": limit, "values": len(logs)}
    spread = math.exp(NOISE_SIGMAS * fleet_sd) if fleet_sd else 1.0
    limit = centre * min(REFERENCE_FLOOR_RATIO / widening, 1.0 / spread) if higher_is_better else \
        centre * max(TIME_FLOOR_FACTOR * widening, widening / REFERENCE_FLOOR_RATIO, spread)
    return {"median": centre, "robust_sd_log": fleet_sd, "limit": limit, "values": len(logs)}


def good_half_spread(logs, higher_is_better):
    """The fleet's scatter from its good half alone (log values above the median for bandwidth, below for time):
    GOOD_HALF_MAD_TO_SD x the MAD of that half about its own median. Slow pairs sit in the other half, so a bad node
    whose pairs are up to half of the fleet's (4 nodes) does not widen it; None below GOOD_HALF_MIN_VALUES values in
    the half."""
    if not logs:
        return None
    centre = statistics.median(logs)
    half = [value for value in logs if (value > centre if higher_is_better else value < centre)]
    if len(half) < GOOD_HALF_MIN_VALUES:
        return None
    middle = statistics.median(half)
    return GOOD_HALF_MAD_TO_SD * statistics.median([abs(value - middle) for value in half])


def _is_rail_point(pair):
    return pair.get("stage") == RAIL_STAGE


METRICS = (("busbw_gbps", True), ("small_time_us", False))


def _references(pairs, without, widening=1.0):
    """A function (a, b) -> {"busbw_gbps": band|None, "small_time_us": band|None} giving pair (a, b)'s reference
    (module docstring): the pairs that touch neither a, b nor a node of without; where no such pair has a value
    (3 nodes), the stricter of the pairs without a and the pairs without b. Past EXACT_REFERENCE_WORK, one reference
    without the nodes of `without` serves every pair."""
    clean = [pair for pair in pairs if not _is_rail_point(pair) and pair["a"] not in without
             and pair["b"] not in without]
    keys = {frozenset((pair["a"], pair["b"])) for pair in pairs if not _is_rail_point(pair)}
    if len(keys) * len(clean) > EXACT_REFERENCE_WORK:
        shared = {key: reference_band([pair.get(key) for pair in clean], higher, widening)
                  for key, higher in METRICS}
        shared = {key: None if band is None else dict(band, without=sorted(without)) for key, band in shared.items()}
        return lambda a, b: shared
    usable = {key: [(pair["a"], pair["b"], math.log(pair[key])) for pair in clean if _number(pair.get(key))]
              for key, _ in METRICS}
    fleet_sd = {key: good_half_spread([value for _, _, value in usable[key]], higher) for key, higher in METRICS}
    cache = {}

    def band_without(left_out, key, higher):
        found = cache.get((left_out, key))
        if found is None:
            band = _reference_of_logs([value for a, b, value in usable[key] if a not in left_out
                                       and b not in left_out], higher, fleet_sd[key], widening)
            found = cache[(left_out, key)] = ("none", None) if band is None else \
                ("band", dict(band, without=sorted(set(left_out) | set(without))))
        return found[1]

    def reference(a, b):
        chosen = {}
        for key, higher in METRICS:
            band = band_without(frozenset((a, b)), key, higher)
            if band is None:
                band = _tighter(band_without(frozenset((a,)), key, higher), band_without(frozenset((b,)), key, higher),
                                higher)
            chosen[key] = band
        return chosen
    return reference


def _tighter(first, second, higher_is_better):
    """Of two references (either may be None), the one whose limit is stricter: the higher bandwidth limit, the
    lower time limit."""
    if first is None or second is None:
        return first or second
    if higher_is_better:
        return first if first["limit"] >= second["limit"] else second
    return first if first["limit"] <= second["limit"] else second


def judge_pairs(pairs, without=(), host_times=False):
    """Each pair's outcome against its reference: (outcomes, references). outcomes[i] is PAIR_OK, PAIR_FAILED (a
    value is missing), PAIR_SLOW_BUSBW or PAIR_SLOW_SMALL (None for a rail point: judge_rail_points judges it);
    references[i] {"busbw_gbps": {"without": [nodes left out], "median", "limit", "values", "robust_sd_log"}|None,
    "small_time_us": ...|None}: the reference each value was judged against (None: no reference, not judged).
    host_times: the pairs ran on the MPI backend on host memory (HOST_TIMES_WIDENING widens the floors)."""
    _check_pairs(pairs)
    reference_of = _references(pairs, set(without), HOST_TIMES_WIDENING if host_times else 1.0)
    outcomes, references = [], []
    for pair in pairs:
        if _is_rail_point(pair):
            outcomes.append(None)
            references.append(None)
            continue
        chosen = reference_of(pair["a"], pair["b"])
        references.append(chosen)
        busbw, small = pair.get("busbw_gbps"), pair.get("small_time_us")
        if not _number(busbw) or not _number(small):
            outcomes.append(PAIR_FAILED)
        elif _outside(busbw, chosen["busbw_gbps"], True):
            outcomes.append(PAIR_SLOW_BUSBW)
        elif _outside(small, chosen["small_time_us"], False):
            outcomes.append(PAIR_SLOW_SMALL)
        else:
            outcomes.append(PAIR_OK)
    return outcomes, references


def rail_slow_ratio(pairs, host_times=False):
    """(threshold, sd): a rail alone is slow below threshold x its best sibling alone. threshold =
    min(RAIL_SLOW_RATIO, exp(-NOISE_SIGMAS x sd)): sd is the scatter of ln(rail / sibling) on healthy pairs, read
    from each group of rail points (one pair, one round) with two rails or more measured as d = ln(fastest /
    slowest): sd = the groups' lower quartile of d / RAIL_QUARTILE_TO_SD (d of two healthy rails is |N(0, sd)|,
    whose lower quartile is 0.3186 sd). A slow rail's groups are the large d, and its node's retests may repeat
    them: the lower quartile stands while they are fewer than three in four. On the loaded 2-core virtual cluster
    one rail alone measured 0.05-20x its sibling on healthy pairs. With fewer than RAIL_NOISE_MIN_GROUPS groups:
    RAIL_SLOW_RATIO and sd None. host_times (GPU-less nodes, the MPI backend on host memory): RAIL_SLOW_RATIO is
    widened HOST_TIMES_WIDENING-fold, as every pair floor is (a 4-node fleet with one node left out by the path
    step kept 2 groups, and a healthy eth0 alone read 0.39 of its sibling twice: a false rail.slow)."""
    ratio = RAIL_SLOW_RATIO / (HOST_TIMES_WIDENING if host_times else 1.0)
    spreads = []
    for indices in _rail_groups(pairs).values():
        values = [pairs[i]["busbw_gbps"] for i in indices if _number(pairs[i].get("busbw_gbps"))]
        if len(values) >= 2:
            spreads.append(math.log(max(values) / min(values)))
    if len(spreads) < RAIL_NOISE_MIN_GROUPS:
        return ratio, None
    sd = statistics.quantiles(spreads, n=4, method="inclusive")[0] / RAIL_QUARTILE_TO_SD
    return min(ratio, math.exp(-NOISE_SIGMAS * sd)), sd


def _rail_groups(pairs):
    groups = {}
    for index, pair in enumerate(pairs):
        if _is_rail_point(pair):
            groups.setdefault((frozenset((pair["a"], pair["b"])), pair.get("round")), []).append(index)
    return groups


def judge_rail_points(pairs, host_times=False):
    """The rail points (stage "rail") against their siblings: {index: {"outcome", "ratio", "sibling",
    "sibling_busbw_gbps", "judged", "threshold"}}. Siblings are the rail points of the same two nodes in the same
    round; a rail is slow below rail_slow_ratio x its best sibling's bus bandwidth, or when it failed and a sibling
    ran (ratio None). judged False: no sibling with a value (one rail, or every rail of that pair failed): not a
    rail finding."""
    threshold, _ = rail_slow_ratio(pairs, host_times)
    found = {}
    for indices in _rail_groups(pairs).values():
        for index in indices:
            value = pairs[index].get("busbw_gbps")
            siblings = [(pairs[other]["busbw_gbps"], pairs[other].get("rail")) for other in indices
                        if other != index and pairs[other].get("rail") != pairs[index].get("rail")
                        and _number(pairs[other].get("busbw_gbps"))]
            if not siblings:
                found[index] = {"outcome": PAIR_OK if _number(value) else PAIR_FAILED, "ratio": None,
                                "sibling": None, "sibling_busbw_gbps": None, "judged": False, "threshold": threshold}
                continue
            best, sibling = max(siblings, key=lambda item: item[0])
            ratio = value / best if _number(value) else None
            slow = ratio is None or ratio < threshold
            found[index] = {"outcome": PAIR_SLOW_RAIL if slow else PAIR_OK, "ratio": ratio, "sibling": sibling,
                            "sibling_busbw_gbps": best, "judged": True, "threshold": threshold}
    return found


def _edges(pairs, failed, excluded, rows=None):
    """{(a, b) sorted: {"failed": every measurement failed, "count": measurements, "pairs": indices}} over pairs
    whose nodes are both outside excluded (and whose index is in rows, when given)."""
    edges = {}
    for index, pair in enumerate(pairs):
        if rows is not None and index not in rows:
            continue
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


def path_mtu_verdicts(nodes, path_checks):
    """The path MTU step's verdicts over the doctor's path_mtu checks between these nodes (rules above):
    ({node: [(BAD, NODE_PATH_MTU, detail, rail or None)]}, [link rows], blocked: {frozenset((a, b))} of the
    failing paths, which no pair may cross). Checks of other hosts and skips are left out."""
    fleet = set(nodes)
    findings = {node: [] for node in nodes}
    failed, passed = {}, set()
    for check in path_checks or ():
        ends = path_mtu_ends(check)
        if ends is None or check.get("status") not in ("pass", "fail") or ends[0] not in fleet:
            continue
        host, netdev, peer, peer_netdev = ends
        if peer is None:  # no interface on a rail subnet: that host's own fault
            if check["status"] == "fail":
                findings[host].append((BAD, NODE_PATH_MTU, {"peers": [], "rails": [], "words": check.get("detail")},
                                       None))
            continue
        if peer not in fleet:
            continue
        key = frozenset((host, peer))
        if check["status"] == "fail":
            failed.setdefault(key, []).append({"rails": {host: netdev, peer: peer_netdev},
                                               "words": check.get("detail"), "down": path_mtu_down(check)})
        else:
            passed.add(key)
    # Indexed by node once (the probes are every ordered pair of nodes on every rail: 33 million at 4,096 nodes),
    # so that each step below costs the node's own paths, never the fleet's.
    reaches = {node: set() for node in nodes}
    for key in passed - set(failed):
        a, b = tuple(key)
        reaches[a].add(b)
        reaches[b].add(a)
    failing_peers = {}
    for key in failed:
        a, b = tuple(key)
        failing_peers.setdefault(a, set()).add(b)
        failing_peers.setdefault(b, set()).add(a)
    failed_with = {node: set(peers) for node, peers in failing_peers.items()}
    unexplained, taken = dict(failed), set()
    while True:
        candidates = []
        for node in sorted(failing_peers):
            if node in taken:
                continue
            peers = failing_peers[node]
            good = [peer for peer in peers if len(reaches[peer]) > (node in reaches[peer])]  # reaches another
            if len(good) >= MIN_GOOD_FAILS and len(peers) > len(reaches[node]):
                candidates.append((-len(peers), node))
        if not candidates:
            break
        _, node = min(candidates)
        taken.add(node)
        paths = []
        for other in sorted(failing_peers.pop(node)):
            paths += unexplained.pop(frozenset((node, other)))
            failing_peers[other].discard(node)
            if not failing_peers[other]:
                del failing_peers[other]
        for rail in sorted({path["rails"][node] for path in paths}):
            on_rail = [path for path in paths if path["rails"][node] == rail]
            # No echo at any size on every path of that rail: the rail is dead there, not too small.
            code = RAIL_DEAD if all(path["down"] for path in on_rail) else NODE_PATH_MTU
            peers_on_rail = sorted(other for other in failed_with[node]
                                   if any(path["rails"].get(node) == rail for path in failed[frozenset((node, other))]))
            findings[node].append((BAD, code, {"peers": peers_on_rail, "rails": [rail],
                                               "words": on_rail[0]["words"]}, rail))
    links = []
    for key, paths in sorted(unexplained.items(), key=lambda item: sorted(item[0])):
        code = LINK_PATH_DOWN if all(path["down"] for path in paths) else LINK_PATH_MTU
        links.append({"a": min(key), "b": max(key), "verdict": BAD, "reasons": [_reason(code, {
            "rails": sorted({f"{host}:{rail}" for path in paths for host, rail in path["rails"].items()}),
            "words": paths[0]["words"]}, [])]})
    return findings, links, set(failed)


def node_stage_verdicts(nodes, node_stage, path_checks=None, path_mtu=None):
    """The node stage's verdicts: {node: [(verdict, code, detail, rail or None)]} and the nodes that go on to the
    pair stage. node_stage: {node: {"doctor": "pass"|"warn"|"fail"|None, "intra_busbw_gbps": x|None,
    "intra_small_time_us": y|None, "loopback_busbw_gbps": {rail: x|None}, optional "intra_reason": text and
    "loopback_reason": {rail: text} (why a value is missing: carried into the reason's detail), optional
    "intra_ranks": n}} (a node absent: no doctor result and no intra-node values). At one rank (one GPU a node) the
    intra-node point crosses no link: it has no bus bandwidth by definition (coll_perf writes null with
    busbw_reason), so only its small-message time must exist, and the node is never compared on busbw.
    path_checks: the path MTU step's checks (path_mtu_verdicts), None when it did not run; path_mtu: their
    path_mtu_verdicts where the caller has them (a screen computes them once), else computed from path_checks."""
    if path_mtu is None:
        path_mtu = path_mtu_verdicts(nodes, path_checks)
    findings = {node: list(path_mtu[0].get(node, ())) for node in nodes}
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
        if stage.get("not_started"):  # the launcher's own words: it could not start the node (execute/screen.py)
            findings[node].append((BAD, NODE_NOT_STARTED, {"launcher": stage["not_started"]}, None))
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
        loopbacks = stage.get("loopback_busbw_gbps") or {}
        # A loopback failure is the rail's only when something else on the node ran (its intra-node point or a
        # sibling rail's loopback): a node that started nothing (unreachable, crashed) is bad as a node, its rails
        # unjudged.
        node_ran = _number(small) or _number(busbw) or any(_number(value) for value in loopbacks.values())
        for rail, value in sorted(loopbacks.items()):
            if not _number(value) and not node_ran:
                continue
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


def _judge_and_attribute(pairs, paired, excluded, host_times=False):
    """The pair stage's outcomes, references, edges and attribution, rebuilt without the nodes found bad until no
    new one is found (module docstring)."""
    pair_rows = {index for index, pair in enumerate(pairs) if not _is_rail_point(pair)}
    without = set()
    while True:
        outcomes, references = judge_pairs(pairs, without, host_times)
        edges = _edges(pairs, [outcome != PAIR_OK for outcome in outcomes], excluded, pair_rows)
        found = _attribute(paired, edges)
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
    timed = [n for n in nodes if not _intra_untimed(node_stage.get(n) or {})]
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
    counted = sorted({rail for pair in pairs if not _is_rail_point(pair)
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
                                                       if _is_rail_point(pair) and pair.get("rail")})}})
    return judged, not_judged


class _Findings:
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
        self.repeat_pairs = []

    def add_node(self, node, verdict, reason, from_pairs=False):
        self.reasons[node].append(reason)
        self.verdicts[node].append(verdict)
        if from_pairs:
            self.from_pairs.add(node)

    def add_rail(self, node, rail, verdict, code, detail, behind):
        self.add_node(node, verdict, _reason(code, detail, behind), from_pairs=verdict == SUSPECT)
        self.rails.setdefault((node, rail), []).append((verdict, _reason(code, detail, behind)))


def _step_node_stage(state, findings):
    """The node stage's and the path MTU step's findings, as reasons (a rail's also under that rail)."""
    for node, entries in findings.items():
        for verdict, code, detail, rail in entries:
            state.add_node(node, verdict, _reason(code, dict(detail, rail=rail) if rail else detail, []))
            if rail:
                state.rails.setdefault((node, rail), []).append((verdict, _reason(code, detail, [])))


def _step_attribution(state, nodes, paired, outcomes, edges, found):
    """The pairs' attribution (_attribute's result) as node and link reasons."""
    def indices(keys):
        return [index for key in keys for index in edges[key]["pairs"]]

    state.repeat_pairs += [list(key) for key in found["links_suspect"]]
    for node, keys in found["bad"].items():
        slow = [i for i in indices(keys) if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        code = NODE_SLOW_WITH_GOOD_PARTNERS if slow else NODE_FAILED_WITH_GOOD_PARTNERS
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        state.add_node(node, BAD, _reason(code, {"good_partners_failed": partners}, indices(keys)))
    for node, keys in found["suspect"].items():
        partners = sorted({key[0] if key[1] == node else key[1] for key in keys})
        state.add_node(node, SUSPECT, _reason(NODE_UNRESOLVED, {"partners_failed": partners}, indices(keys)), True)
    in_edges = {node for key in edges for node in key}
    untested = [node for node in paired if len(nodes) >= 2 and node not in in_edges]  # never met anyone
    if found["no_good_partner"]:
        keys_of = {}
        for key in edges:
            for node in key:
                keys_of.setdefault(node, []).append(key)
    for node in found["no_good_partner"] + untested:
        behind = indices(keys_of.get(node, ())) if found["no_good_partner"] else []
        state.add_node(node, SUSPECT, _reason(NODE_NO_GOOD_PARTNER, {}, behind), True)
    for key in found["links_bad"]:
        slow = [i for i in edges[key]["pairs"] if outcomes[i] in (PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL)]
        state.links.append({"a": key[0], "b": key[1], "verdict": BAD,
                            "reasons": [_reason(LINK_SLOW_PAIR if slow else LINK_FAILED_PAIR,
                                                {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
    for key in list(found["links_suspect"]):
        failed_each_time = all(outcomes[i] == PAIR_FAILED for i in edges[key]["pairs"])
        if len(paired) == 2 and edges[key]["count"] >= 2 and failed_each_time:
            # Two nodes: no third to tell the link from its ends, but a pair that failed every time it ran, twice
            # or more, is a failure of the fleet's one link, never a suspicion (its nodes stay suspect).
            state.links.append({"a": key[0], "b": key[1], "verdict": BAD, "reasons": [
                _reason(LINK_FAILED_PAIR, {"measurements": edges[key]["count"], "nodes": 2}, edges[key]["pairs"])]})
            state.repeat_pairs.remove(list(key))
            continue
        code = LINK_NOT_REPRODUCED if key in found["link_not_reproduced"] else LINK_UNRESOLVED
        state.links.append({"a": key[0], "b": key[1], "verdict": SUSPECT,
                            "reasons": [_reason(code, {"measurements": edges[key]["count"]}, edges[key]["pairs"])]})
        if code == LINK_NOT_REPRODUCED:  # both nodes pass with good partners; only the link is in question
            for node in key:
                state.add_node(node, SUSPECT, _reason(LINK_NOT_REPRODUCED,
                                                      {"partner": key[1] if node == key[0] else key[0]},
                                                      edges[key]["pairs"]), True)


def _step_rail_balance(state, pairs, paired, excluded):
    """Rails from the pairs' counters (RAIL_LOW_RATIO): the same attribution per rail name."""
    rail_failed = {}
    for index, pair in enumerate(pairs):
        if _is_rail_point(pair):
            continue
        for rail, hosts in rail_lows(pair).items():
            rail_failed.setdefault(rail, {})[index] = hosts
    pair_rows = {index for index, pair in enumerate(pairs) if not _is_rail_point(pair)}
    for rail, failed_at in sorted(rail_failed.items()):
        rail_edges = _edges(pairs, [index in failed_at for index in range(len(pairs))], excluded, pair_rows)
        found = _attribute(paired, rail_edges)

        def low_hosts(keys):
            behind = [i for key in keys for i in rail_edges[key]["pairs"]]
            return behind, sorted({host for i in behind for host in failed_at.get(i, [])})

        for node, keys in found["bad"].items():
            behind, hosts = low_hosts(keys)
            state.add_rail(node, rail, BAD, RAIL_UNBALANCED, {"rail": rail, "low_on_hosts": hosts}, behind)
        for node, keys in found["suspect"].items():
            behind, hosts = low_hosts(keys)
            state.add_rail(node, rail, SUSPECT, RAIL_UNBALANCED_UNRESOLVED, {"rail": rail, "low_on_hosts": hosts},
                           behind)
        for key in found["links_bad"] + found["links_suspect"]:
            for node in key:  # a rail low on one pair only: that pair's rail, both nodes in question
                state.add_rail(node, rail, SUSPECT, RAIL_UNBALANCED_UNRESOLVED,
                               {"rail": rail, "partner": key[1] if node == key[0] else key[0]},
                               rail_edges[key]["pairs"])


def _step_rails_alone(state, pairs, paired, excluded, rail_found):
    """Each rail alone against its siblings (judge_rail_points' rail_found): the same attribution per rail name
    over the rail points; at two nodes the link's rail once the slowness reproduces."""
    for rail in sorted({pairs[index].get("rail") for index, entry in rail_found.items() if entry["judged"]}):
        rows = {index for index, entry in rail_found.items() if entry["judged"] and pairs[index].get("rail") == rail}
        slow_edges = _edges(pairs, [index in rows and rail_found[index]["outcome"] == PAIR_SLOW_RAIL
                                    for index in range(len(pairs))], excluded, rows)

        def evidence(behind, extra):
            ratios = [rail_found[i]["ratio"] for i in behind if rail_found[i]["outcome"] == PAIR_SLOW_RAIL]
            known = [ratio for ratio in ratios if ratio is not None]
            return dict({"rail": rail, "ratio": statistics.median(known) if known else None,
                         "ratios": [None if ratio is None else round(ratio, 4) for ratio in ratios],
                         "sibling": next((rail_found[i]["sibling"] for i in behind if rail_found[i]["sibling"]), None),
                         "threshold_ratio": rail_found[behind[0]]["threshold"] if behind else RAIL_SLOW_RATIO},
                        **extra)

        if len(paired) == 2:  # no third node: the link between the two, once the slowness reproduces
            for key, edge in slow_edges.items():
                if not edge["failed"]:
                    continue
                detail = evidence(edge["pairs"], {"measurements": edge["count"]})
                if edge["count"] >= 2:
                    state.links.append({"a": key[0], "b": key[1], "verdict": BAD,
                                        "reasons": [_reason(RAIL_SLOW, detail, edge["pairs"])]})
                else:
                    state.repeat_pairs.append(list(key))
                for node in key:
                    state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED,
                                   dict(detail, partner=key[1] if node == key[0] else key[0]), edge["pairs"])
                    state.rail_suspects.add(node)
            continue
        found = _attribute(paired, slow_edges)
        for node, keys in found["bad"].items():
            behind = [i for key in keys for i in slow_edges[key]["pairs"]]
            state.add_rail(node, rail, BAD, RAIL_SLOW, evidence(behind, {"good_partners_slow": sorted(
                {k[0] if k[1] == node else k[1] for k in keys})}), behind)
        for node, keys in found["suspect"].items():
            behind = [i for key in keys for i in slow_edges[key]["pairs"]]
            state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED, evidence(behind, {}), behind)
            state.rail_suspects.add(node)
        for key in found["links_bad"]:
            state.links.append({"a": key[0], "b": key[1], "verdict": BAD, "reasons": [_reason(
                RAIL_SLOW, evidence(slow_edges[key]["pairs"], {"measurements": slow_edges[key]["count"]}),
                slow_edges[key]["pairs"])]})
        for key in found["links_suspect"]:
            state.repeat_pairs.append(list(key))
            for node in key:
                state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED,
                               evidence(slow_edges[key]["pairs"], {"partner": key[1] if node == key[0] else key[0]}),
                               slow_edges[key]["pairs"])
                state.rail_suspects.add(node)


def _step_retests(state, node_rows, pairs, paired, edges, found, rail_found):
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
    known_good = [node for node in paired if node in found["good"] and _worst(state.verdicts[node]) == ACCEPT]
    unique_repeats = []
    seen = set()
    for pair in state.repeat_pairs:
        if tuple(pair) not in seen:
            seen.add(tuple(pair))
            unique_repeats.append(pair)
    return {"suspects": suspects, "known_good": known_good,
            "met": {node: sorted(met.get(node, ())) for node in suspects},
            "repeat_pairs": unique_repeats, "rail_suspects": sorted(state.rail_suspects & set(suspects))}


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
    _check_pairs(pairs)
    fleet = set(nodes)
    for index, pair in enumerate(pairs):
        for node in (pair["a"], pair["b"]):
            if node not in fleet:
                raise ValueError(f"screen: pair {index} names {node}, which is not in the fleet")
    clock = _StepClock(timings)
    with clock("path_mtu"):
        if path_mtu is None:
            path_mtu = path_mtu_verdicts(nodes, path_checks)
    state = _Findings(nodes)
    with clock("node_stage"):
        findings, paired = node_stage_verdicts(nodes, node_stage, path_mtu=path_mtu)
        _step_node_stage(state, findings)
        state.links += [dict(link) for link in path_mtu[1]]
    excluded = set(nodes) - set(paired)
    # GPU-less nodes: the pairs ran on the MPI backend too, whose times are the hosts' (HOST_TIMES_WIDENING).
    host_times = bool(paired) and all((node_stage.get(node) or {}).get("intra_correctness_only") for node in paired)
    with clock("pairs"):
        outcomes, references, edges, found = _judge_and_attribute(pairs, paired, excluded, host_times)
    with clock("attribution"):
        _step_attribution(state, nodes, paired, outcomes, edges, found)
    with clock("rail_balance"):
        _step_rail_balance(state, pairs, paired, excluded)
    with clock("rails_alone"):
        rail_found = judge_rail_points(pairs, host_times)
        for index, entry in rail_found.items():
            outcomes[index] = entry["outcome"]
        _step_rails_alone(state, pairs, paired, excluded, rail_found)
    node_rows = [{"name": node, "verdict": _worst(state.verdicts[node]), "paired": node in paired,
                  "reasons": state.reasons[node]} for node in nodes]
    rail_rows = [{"node": node, "rail": rail, "verdict": _worst([v for v, _ in entries]),
                  "reasons": [reason for _, reason in entries]}
                 for (node, rail), entries in sorted(state.rails.items())]
    every = [row["verdict"] for row in node_rows] + [row["verdict"] for row in state.links] + \
        [row["verdict"] for row in rail_rows]
    result = "fail" if BAD in every else ("suspect" if SUSPECT in every else "pass")
    with clock("retests"):
        retest = _step_retests(state, node_rows, pairs, paired, edges, found, rail_found)
    combined = [pair for pair in pairs if not _is_rail_point(pair)]
    bands = {key: fleet_band([p.get(key) for p in combined], higher) for key, higher in METRICS}
    intra_band = fleet_band([(node_stage.get(n) or {}).get("intra_busbw_gbps") for n in nodes
                             if not _intra_untimed(node_stage.get(n) or {})], True)
    judged, not_judged = _judged(nodes, paired, node_stage, pairs, intra_band, rail_found, path_checks)
    return {"nodes": node_rows, "links": state.links, "rails": rail_rows, "pair_outcomes": outcomes,
            "references": references, "rail_ratios": {index: entry["ratio"] for index, entry in rail_found.items()},
            "bands": bands, "judged": judged, "not_judged": not_judged, "result": result,
            "exit_code": EXIT_CODES[result], "retest": retest,
            "path_mtu": None if path_checks is None else list(path_checks)}


def to_document(schedule, node_stage, pairs, verdicts, tool_version, created_utc):
    """screen.json (results_schema/screen.schema.json) from the schedule (plan.screen_schedule.pair_schedule, plus
    "retest_rounds"), the node stage's data, the pairs as measured and classify()'s verdicts."""
    outcome_of = verdicts["pair_outcomes"]
    pair_rows = []
    for index, pair in enumerate(pairs):
        rail_point = _is_rail_point(pair)
        ratio = verdicts["rail_ratios"].get(index) if rail_point else None
        reference = (verdicts["references"][index] or None) if not rail_point else None
        pair_rows.append({"index": index, "a": pair["a"], "b": pair["b"], "round": pair.get("round"),
                          "stage": pair.get("stage", "pair"), "rail": pair.get("rail") if rail_point else None,
                          "busbw_gbps": pair["busbw_gbps"] if _number(pair.get("busbw_gbps")) else None,
                          "small_time_us": pair["small_time_us"] if _number(pair.get("small_time_us")) else None,
                          "reason": pair.get("reason"), "outcome": outcome_of[index],
                          "rail_ratio": ratio,
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
                         "retest_rounds": schedule.get("retest_rounds") or [],
                         "dropped": schedule.get("dropped") or []},
            "bands": verdicts["bands"], "nodes": rows, "pairs": pair_rows, "links": verdicts["links"],
            "rails": verdicts["rails"], "judged": verdicts["judged"], "not_judged": verdicts["not_judged"],
            "path_mtu": verdicts.get("path_mtu"), "result": verdicts["result"], "exit_code": verdicts["exit_code"]}


# What each reason code means and what to check, next to the codes so that docs/verdicts.md (render/docs.py,
# `cclbench docs`) and the rules share one source: code -> (verdict it gives, means, check, constants as
# "module.NAME" in rules/). A code of REASON_CODES without an entry fails tests/scripts/test_docs.py.
REASON_MEANINGS = {
    NODE_DOCTOR_FAIL: (BAD, "The node's doctor failed a check; the node is not paired.",
                       "The doctor's detail for the node (screen.json, logs/); fix and rerun.", ()),
    NODE_DOCTOR_NO_RESULT: (BAD, "The node's doctor left no result (it could not be started or reached).",
                            "The node's job output in logs/: ssh, the launcher, the node itself.", ()),
    NODE_NOT_STARTED: (BAD, "The launcher could not start the node (its own words in the detail: ssh could not "
                       "connect, srun could not launch a task there); it was dropped from every later launch, and "
                       "its pairs are not held against its partners.",
                       "ssh or slurmd on the node, its management network, its name (logs/launch.*.log).", ()),
    NODE_PATH_MTU: (BAD, "Don't-fragment packets of the rail's MTU do not get from this node to at least two "
                    "nodes that reach others (or it has no interface on a rail's subnet): NCCL would hang on those "
                    "paths. The node is not paired.",
                    "The detail's words: the largest packet that gets through names the hop; the switch port or "
                    "bridge MTU against the host's (`ip link`, `cclbench doctor --hosts`).",
                    ("screen_rules.MIN_GOOD_FAILS",)),
    RAIL_DEAD: (BAD, "No echo at all, even at the smallest size, on every path of this rail from the node to at least "
                "two nodes that reach others: the rail is down or blocked at this node. The node is not paired.",
                "The rail's link state, cable and switch port (`ip link`, `cclbench doctor`).",
                ("screen_rules.MIN_GOOD_FAILS",)),
    LINK_PATH_DOWN: (BAD, "No echo at all crosses this path and no node explains it (two nodes, or one path "
                     "alone). No pair crosses it.",
                     "Both ends' link state and the switch between them (`ip link`, `cclbench doctor --hosts`).", ()),
    LINK_PATH_MTU: (BAD, "Don't-fragment packets of the rail's MTU do not cross this path and no node explains "
                    "it (two nodes, one path alone, or every path of the fabric). No pair crosses it.",
                    "The switch ports and MTUs at both ends (`ip link`); the largest size in the detail.", ()),
    NODE_INTRA_FAILED: (BAD, "The node's intra-node point failed (no value); the node is not paired.",
                        "The intra job's output in logs/: GPUs, NCCL, the driver.", ()),
    NODE_INTRA_SLOW: (SUSPECT, "The node's intra-node bus bandwidth is below the fleet's band: one value against "
                      "the fleet, no second opinion.",
                      "The node's GPUs and PCIe/NVLink (`cclbench doctor`, `cclbench baseline` on it alone).",
                      ("screen_rules.NOISE_SIGMAS", "screen_rules.SINGLE_VALUE_FLOOR_RATIO",
                       "screen_rules.MIN_FLEET_VALUES")),
    NODE_SLOW_WITH_GOOD_PARTNERS: (BAD, "The node's pairs were slow (bandwidth below, or small-message time above, "
                                   "the band of the pairs that touch neither of a pair's nodes: never a median its "
                                   "own node pulls down; from MIN_SPREAD_VALUES values the band, else a fixed "
                                   "fraction of the median) with at least two distinct known-good partners. At 2 "
                                   "nodes there is no other pair: pair speed is not judged (screen.json "
                                   "`not_judged`).",
                                   "The node's NICs, cables and switch ports; its doctor; then its GPUs.",
                                   ("screen_rules.HOST_TIMES_WIDENING", "screen_rules.MIN_GOOD_FAILS", "screen_rules.BW_FLOOR_RATIO",
                                    "screen_rules.TIME_FLOOR_FACTOR", "screen_rules.NOISE_SIGMAS",
                                    "screen_rules.MIN_SPREAD_VALUES", "screen_rules.REFERENCE_FLOOR_RATIO")),
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
    LINK_SLOW_PAIR: (BAD, "One pair was slow against the pairs that touch neither of its nodes, reproducibly, "
                     "while both its nodes pass with others: the path between them.",
                     "The switch ports and cables between the two nodes; the fabric's routing.",
                     ("screen_rules.HOST_TIMES_WIDENING", "screen_rules.BW_FLOOR_RATIO", "screen_rules.TIME_FLOOR_FACTOR",
                      "screen_rules.REFERENCE_FLOOR_RATIO")),
    LINK_FAILED_PAIR: (BAD, "One pair failed, reproducibly, while both its nodes pass with others; at 2 nodes, the "
                            "one pair failed every time it ran, at least twice (which end cannot be told: both "
                            "nodes stay suspect).",
                       "The pair's job output in logs/; the path between the two nodes.", ()),
    LINK_NOT_REPRODUCED: (SUSPECT, "One pair failed once and the failure was not (yet) reproduced.",
                          "Nothing unless it repeats; a `--resume` or another screen retests it.", ()),
    LINK_UNRESOLVED: (SUSPECT, "A pair failed and the fleet's other pairs cannot tell the link from its nodes.",
                      "The pairs behind the reason; more rounds.", ()),
    RAIL_LOOPBACK_FAILED: (BAD, "A rail's loopback point (all traffic through that one NIC) failed while something "
                           "else on the node ran (its intra-node point or a sibling rail's loopback); a node that "
                           "ran nothing is bad as a node and its rails are not judged.",
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
    RAIL_SLOW: (BAD, "A rail alone was several-fold below its sibling alone on the same pairs (the ratio is in the "
                "reason), beyond the rail ratios' own noise, with known-good partners; at two nodes, on the only "
                "pair, twice: the link's rail. GPU-less nodes (host-memory times) need the ratio widened "
                "HOST_TIMES_WIDENING-fold.",
                "That rail's link speed, cable, switch port and rate limits on both ends (`ethtool`, `ibstat`, "
                "the doctor's links); its error counters.",
                ("screen_rules.RAIL_SLOW_RATIO", "screen_rules.RAIL_NOISE_MIN_GROUPS",
                 "screen_rules.MIN_GOOD_FAILS", "screen_rules.HOST_TIMES_WIDENING")),
    RAIL_SLOW_UNRESOLVED: (SUSPECT, "A rail alone was slow against its sibling in some pairs, but not enough to "
                           "name whose rail it is (or, at two nodes, which end).",
                           "The rail on both nodes of the pairs behind the reason; a screen with more nodes.",
                           ("screen_rules.RAIL_SLOW_RATIO",)),
}
