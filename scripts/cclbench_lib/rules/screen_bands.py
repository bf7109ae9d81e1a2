"""The screen's bands: which value of one metric is out of what the fleet measured (rules/screen_rules.py runs them).

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
      the real scatter by chance, and each pair draws its own reference. Its time limit's floor is the bandwidth
      floor mirrored (SMALL_TIME_FLOOR_FACTOR, time_floor_factor), not ClusterKit's TIME_FLOOR_FACTOR: the
      small-message time is judged by its own scatter, as the bandwidth is. With fewer values there is no spread estimate
      (the MAD of two or four values says little) and its limit is the fixed REFERENCE_FLOOR_RATIO x its median
      (bandwidth) or max(TIME_FLOOR_FACTOR, 1 / REFERENCE_FLOOR_RATIO) x its median (time): at 3 nodes the one pair
      without a bad node is the whole reference. Either way the spread is at least the fleet's own scatter
      (good_half_spread: the values on the good side of the fleet's median, which slow pairs do not reach while
      they are at most half), so a loaded host's scatter widens every limit: exp(-NOISE_SIGMAS x that sd). A
      reference with no value (2 nodes) judges nothing: the pairs' speed is then "not judged" (document
      "not_judged"), and only failures count.
  A pair fails (judge_pairs) when its large-size bus bandwidth or its small-message time is missing (the point
      failed) or out of its references.

Pure: plain data in and out.
"""
import math
import statistics

from .screen_codes import PAIR_FAILED, PAIR_OK, PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL, RAIL_STAGE

# The project's noise rule (scripts/cclbench_lib/compare.py): NOISE_SIGMAS and the MAD-to-sd factor of
# compare.point_shift. Restated here until rules/noise.py's constants are shared by both rules.
NOISE_SIGMAS = 4.0
MAD_TO_SD = 1.4826
# NVIDIA ClusterKit: a pair is suspect below 93% of the best bandwidth or above 2.1x the best latency. Used as
# floors of the band around the fleet's median (not its best: one lucky pair should not move the bar).
BW_FLOOR_RATIO = 0.93
TIME_FLOOR_FACTOR = 2.1
# A pair's small-message time is judged as its bandwidth is: against its reference's own spread at the small size
# (healthy noise at 8K is wider than at 64M: 5.1% against 0.26% on ten H200 baselines,
# tests/scripts/data/h200_repeat_noise.json), with the bandwidth floor mirrored as its floor (a tight fleet does not
# flag a 7% slower small message). ClusterKit's 2.1x above is a guess at every fleet's latency noise: it hid a node
# whose small messages took 1.5-2x its peers' (issue 45). It stays the floor of the few-value references, of the
# node stage's band and, widened, of host-memory times (the host's scheduling doubles an 8K time with nothing
# wrong, below).
SMALL_TIME_FLOOR_FACTOR = 1.0 / BW_FLOOR_RATIO
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


def positive_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def fleet_band(values, higher_is_better, sigmas=NOISE_SIGMAS, mad_to_sd=MAD_TO_SD, bw_floor_ratio=BW_FLOOR_RATIO,
               time_floor_factor=TIME_FLOOR_FACTOR, min_values=MIN_FLEET_VALUES):
    """The fleet's band for one metric: {"median", "robust_sd_log", "limit", "values"}, limit the lowest good value
    (higher_is_better: bandwidth) or the highest (a time); None with fewer than min_values positive values."""
    usable = [value for value in values if positive_number(value)]
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


def outside(value, band, higher_is_better):
    return band is not None and (value < band["limit"] if higher_is_better else value > band["limit"])


def check_pairs(pairs):
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
    return _reference_of_logs([math.log(value) for value in values if positive_number(value)], higher_is_better,
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
                          else max(time_floor_factor(widening), math.exp(NOISE_SIGMAS * sd)))
        return {"median": centre, "robust_sd_log": sd, "limit": limit, "values": len(logs)}
    spread = math.exp(NOISE_SIGMAS * fleet_sd) if fleet_sd else 1.0
    limit = centre * min(REFERENCE_FLOOR_RATIO / widening, 1.0 / spread) if higher_is_better else \
        centre * max(TIME_FLOOR_FACTOR * widening, widening / REFERENCE_FLOOR_RATIO, spread)
    return {"median": centre, "robust_sd_log": fleet_sd, "limit": limit, "values": len(logs)}


def time_floor_factor(widening=1.0):
    """The floor of a spread reference's time limit (x its median): SMALL_TIME_FLOOR_FACTOR on GPU times, ClusterKit's
    TIME_FLOOR_FACTOR widened on host-memory times (widening HOST_TIMES_WIDENING)."""
    return SMALL_TIME_FLOOR_FACTOR if widening == 1.0 else TIME_FLOOR_FACTOR * widening


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


def is_rail_point(pair):
    return pair.get("stage") == RAIL_STAGE


METRICS = (("busbw_gbps", True), ("small_time_us", False))


def _references(pairs, without, widening=1.0):
    """A function (a, b) -> {"busbw_gbps": band|None, "small_time_us": band|None} giving pair (a, b)'s reference
    (module docstring): the pairs that touch neither a, b nor a node of without; where no such pair has a value
    (3 nodes), the stricter of the pairs without a and the pairs without b. Past EXACT_REFERENCE_WORK, one reference
    without the nodes of `without` serves every pair."""
    clean = [pair for pair in pairs if not is_rail_point(pair) and pair["a"] not in without
             and pair["b"] not in without]
    keys = {frozenset((pair["a"], pair["b"])) for pair in pairs if not is_rail_point(pair)}
    if len(keys) * len(clean) > EXACT_REFERENCE_WORK:
        shared = {key: reference_band([pair.get(key) for pair in clean], higher, widening)
                  for key, higher in METRICS}
        shared = {key: None if band is None else dict(band, without=sorted(without)) for key, band in shared.items()}
        return lambda a, b: shared
    usable = {key: [(pair["a"], pair["b"], math.log(pair[key])) for pair in clean if positive_number(pair.get(key))]
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
    check_pairs(pairs)
    reference_of = _references(pairs, set(without), HOST_TIMES_WIDENING if host_times else 1.0)
    outcomes, references = [], []
    for pair in pairs:
        if is_rail_point(pair):
            outcomes.append(None)
            references.append(None)
            continue
        chosen = reference_of(pair["a"], pair["b"])
        references.append(chosen)
        busbw, small = pair.get("busbw_gbps"), pair.get("small_time_us")
        if not positive_number(busbw) or not positive_number(small):
            outcomes.append(PAIR_FAILED)
        elif outside(busbw, chosen["busbw_gbps"], True):
            outcomes.append(PAIR_SLOW_BUSBW)
        elif outside(small, chosen["small_time_us"], False):
            outcomes.append(PAIR_SLOW_SMALL)
        else:
            outcomes.append(PAIR_OK)
    return outcomes, references
