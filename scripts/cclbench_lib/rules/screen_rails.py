"""The screen's rail rules: each rail's share of a pair's bytes, and each rail alone against its sibling alone.

  Rail balance (step_rail_balance): per pair and host, a rail carrying less than RAIL_LOW_RATIO of its busiest
      sibling's bytes is low there; low on either host fails the pair for that rail, and the same attribution
      (rules/screen_attribution.py) names the node whose rail it is.
  Each rail alone (rail points: stage "rail", one point per rail on the same pair, run back to back): a rail whose
      bus bandwidth alone is below RAIL_SLOW_RATIO x its best sibling's alone on that pair - and below the ratios'
      own noise, exp(-NOISE_SIGMAS x their sd) read from the fleet's rail points (rail_slow_ratio) - or that
      failed while a sibling ran, is slow on that pair (rail_ratio in the pair's row); the attribution, per
      rail name, names the node (rail.slow) or the link. At 2 nodes there is no third node to tell which end is
      slow: a rail slow in every measurement of the pair, at least twice, makes the link bad (rail.slow) and both
      nodes' rails suspect.

Pure: plain data in and out.
"""
import functools
import math
import statistics

from .screen_attribution import attribute, edges_of
from .screen_bands import (BW_FLOOR_RATIO, HOST_TIMES_WIDENING, MAD_SE_BOUND, NOISE_SIGMAS,
                           SMALL_TIME_FLOOR_FACTOR, is_rail_point, positive_number)
from .screen_codes import (BAD, PAIR_FAILED, PAIR_OK, PAIR_SLOW_RAIL, RAIL_SLOW, RAIL_SLOW_UNRESOLVED, RAIL_UNBALANCED,
                           RAIL_UNBALANCED_UNRESOLVED, SUSPECT)
from .screen_findings import make_reason

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
# From this many groups on the rail ratios' noise alone sets the limit, above RAIL_SLOW_RATIO too (a rail at half or
# 0.7 of its sibling is named on a quiet fleet: a 400G link trained at 200G, issue 45), up to BW_FLOOR_RATIO. The
# noise is then read from the groups' median d (median of |N(0, sd)| = RAIL_MEDIAN_TO_SD sd), which scatters less
# than the lower quartile: relative standard error RAIL_MEDIAN_RELATIVE_SE / sqrt(n) against the quartile's 1.77
# (numerically, 4,000 draws each of 16-128 half-normal groups: 1.09-1.17 and 1.73-1.82); the quartile let one
# 16-node fleet in 128 read its rail noise 1.5x too wide and miss a rail at x0.69 (tests/scale, issue 45's mix).
# The estimate is raised by MAD_SE_BOUND standard errors into an upper bound; the median stands while fewer than
# half the groups touch a slow rail. Below RAIL_NOISE_FLEET_GROUPS (8 nodes and fewer: 8 groups in their first
# two rounds) the quartile of so few groups can fall to a fifth of the real scatter by chance (1 fleet in 100 at 8
# groups), and only RAIL_SLOW_RATIO and below is slow.
RAIL_NOISE_FLEET_GROUPS = 16
RAIL_MEDIAN_TO_SD = 0.6745
RAIL_MEDIAN_RELATIVE_SE = 1.15


@functools.lru_cache(maxsize=None)
def median_range(k):
    """The median of the range (largest - smallest) of k independent N(0, 1) draws: 0.9539 for 2 (sqrt(2) x
    0.6745), 1.5878 for 3, 1.9783 for 4, 2.7908 for 8 (by quadrature of the range's distribution,
    F(w) = k x integral of phi(x) (Phi(x + w) - Phi(x))^(k - 1) dx, and bisection; 40,000 draws each agree to 0.5%)."""
    def cdf(width, steps=400):
        low, high = -8.0, 8.0
        step = (high - low) / steps
        total = 0.0
        for index in range(steps + 1):
            x = low + index * step
            inner = 0.5 * (math.erf((x + width) / math.sqrt(2)) - math.erf(x / math.sqrt(2)))
            total += math.exp(-x * x / 2) / math.sqrt(2 * math.pi) * inner ** (k - 1) * \
                (0.5 if index in (0, steps) else 1.0)
        return k * total * step
    low, high = 0.0, 10.0
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < 0.5 else (low, middle)
    return (low + high) / 2


def _group_spreads(pairs, key, higher_is_better):
    """Per group of rail points of the pair rounds with two rails or more measured: ln(best / worst) of key, scaled
    to what two rails would spread (x median_range(2) / median_range(k) for k rails measured: the range of four
    healthy rails is about twice that of two, and read as two rails' it would double the noise and hide a rail at
    x0.7 on a four-rail fleet). The retests' groups are left out: they are chosen around the suspects (a node whose
    rail is slow meets a new partner in each pass), and a noise read from them would grow with every pass."""
    retest_rounds = {pair.get("round") for pair in pairs if pair.get("stage") == "retest"}
    spreads = []
    for (_, number), indices in _rail_groups(pairs).items():
        if number in retest_rounds:
            continue
        values = [pairs[i][key] for i in indices if positive_number(pairs[i].get(key))]
        if len(values) >= 2:
            spreads.append(math.log(max(values) / min(values)) * median_range(2) / median_range(len(values)))
    return spreads


def _ratio_limit(spreads, higher_is_better, host_times):
    """(limit, sd) of one metric's ratio to the best sibling (module docstring, rail_slow_ratio)."""
    widening = HOST_TIMES_WIDENING if host_times else 1.0
    fixed = RAIL_SLOW_RATIO / widening
    if len(spreads) < RAIL_NOISE_MIN_GROUPS:
        return (fixed if higher_is_better else 1.0 / fixed), None
    if host_times or len(spreads) < RAIL_NOISE_FLEET_GROUPS:
        sd = statistics.quantiles(spreads, n=4, method="inclusive")[0] / RAIL_QUARTILE_TO_SD
        return (min(fixed, math.exp(-NOISE_SIGMAS * sd)) if higher_is_better
                else max(1.0 / fixed, math.exp(NOISE_SIGMAS * sd))), sd
    sd = statistics.median(spreads) / RAIL_MEDIAN_TO_SD
    bound = sd * (1 + MAD_SE_BOUND * RAIL_MEDIAN_RELATIVE_SE / math.sqrt(len(spreads)))
    return (min(BW_FLOOR_RATIO, math.exp(-NOISE_SIGMAS * bound)) if higher_is_better
            else max(SMALL_TIME_FLOOR_FACTOR, math.exp(NOISE_SIGMAS * bound))), sd


def rail_slow_ratio(pairs, host_times=False):
    """(threshold, sd): a rail alone is slow below threshold x its best sibling alone. sd is the scatter of
    ln(rail / sibling) on healthy pairs, read from each group of rail points (one pair, one round) with two rails or
    more measured as d = ln(fastest / slowest): sd = the groups' lower quartile of d / RAIL_QUARTILE_TO_SD (d of two
    healthy rails is |N(0, sd)|, whose lower quartile is 0.3186 sd; from RAIL_NOISE_FLEET_GROUPS groups on, their
    median d / RAIL_MEDIAN_TO_SD). A slow rail's groups are the large d (the retests' groups are left out): the lower
    quartile stands while they are fewer than three in four, the median while fewer than half. threshold:
    with fewer than RAIL_NOISE_MIN_GROUPS groups RAIL_SLOW_RATIO (sd None); below RAIL_NOISE_FLEET_GROUPS groups
    min(RAIL_SLOW_RATIO, exp(-NOISE_SIGMAS x sd)) (on the loaded 2-core virtual cluster one rail alone measured
    0.05-20x its sibling on healthy pairs); from RAIL_NOISE_FLEET_GROUPS on min(BW_FLOOR_RATIO, exp(-NOISE_SIGMAS x
    sd raised by MAD_SE_BOUND standard errors)): the fleet's own rail noise decides, so that a rail at 0.5-0.7 of its
    sibling is named where healthy rails agree within a few percent. host_times (GPU-less nodes, the MPI backend on
    host memory): RAIL_SLOW_RATIO widened HOST_TIMES_WIDENING-fold, as every pair floor is, and never raised (a
    4-node fleet with one node left out by the path step kept 2 groups, and a healthy eth0 alone read 0.39 of its
    sibling twice: a false rail.slow)."""
    return _ratio_limit(_group_spreads(pairs, "busbw_gbps", True), True, host_times)


def rail_small_time_ratio(pairs, host_times=False):
    """(threshold, sd) of a rail alone's small-message time against its best (lowest) sibling's: slow above
    threshold x it. The same rule as rail_slow_ratio, mirrored: 1 / RAIL_SLOW_RATIO with few groups, the groups'
    own scatter of ln(slowest / fastest) from RAIL_NOISE_FLEET_GROUPS on (floor SMALL_TIME_FLOOR_FACTOR). A rail
    whose small messages take 1.5x its sibling's (a misconfigured NIC or port) is named with the ratio."""
    return _ratio_limit(_group_spreads(pairs, "small_time_us", False), False, host_times)


def _rail_groups(pairs):
    groups = {}
    for index, pair in enumerate(pairs):
        if is_rail_point(pair):
            groups.setdefault((frozenset((pair["a"], pair["b"])), pair.get("round")), []).append(index)
    return groups


def judge_rail_points(pairs, host_times=False):
    """The rail points (stage "rail") against their siblings: {index: {"outcome", "ratio", "sibling",
    "sibling_busbw_gbps", "judged", "threshold", "small_ratio", "small_threshold", "slow"}}. Siblings are the rail
    points of the same two nodes in the same round; a rail is slow below rail_slow_ratio x its best sibling's bus
    bandwidth, or when it failed and a sibling ran (ratio None), or when its small-message time is above
    rail_small_time_ratio x its best sibling's (small_ratio; None where either has no small time: not judged on
    it). slow: the metrics it was slow on ("busbw_gbps", "small_time_us"). judged False: no sibling with a value
    (one rail, or every rail of that pair failed): not a rail finding."""
    threshold, _ = rail_slow_ratio(pairs, host_times)
    small_threshold, _ = rail_small_time_ratio(pairs, host_times)
    found = {}
    for indices in _rail_groups(pairs).values():
        for index in indices:
            value, small = pairs[index].get("busbw_gbps"), pairs[index].get("small_time_us")
            others = [other for other in indices if other != index
                      and pairs[other].get("rail") != pairs[index].get("rail")]
            siblings = [(pairs[other]["busbw_gbps"], pairs[other].get("rail")) for other in others
                        if positive_number(pairs[other].get("busbw_gbps"))]
            if not siblings:
                found[index] = {"outcome": PAIR_OK if positive_number(value) else PAIR_FAILED, "ratio": None,
                                "sibling": None, "sibling_busbw_gbps": None, "judged": False, "threshold": threshold,
                                "small_ratio": None, "small_threshold": small_threshold, "slow": []}
                continue
            best, sibling = max(siblings, key=lambda item: item[0])
            ratio = value / best if positive_number(value) else None
            sibling_small = [pairs[other]["small_time_us"] for other in others
                             if positive_number(pairs[other].get("small_time_us"))]
            small_ratio = small / min(sibling_small) if positive_number(small) and sibling_small and \
                positive_number(value) else None
            slow = (["busbw_gbps"] if ratio is None or ratio < threshold else []) + \
                (["small_time_us"] if small_ratio is not None and small_ratio > small_threshold else [])
            found[index] = {"outcome": PAIR_SLOW_RAIL if slow else PAIR_OK, "ratio": ratio, "sibling": sibling,
                            "sibling_busbw_gbps": best, "judged": True, "threshold": threshold,
                            "small_ratio": small_ratio, "small_threshold": small_threshold, "slow": slow}
    return found


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



def step_rail_balance(state, pairs, paired, excluded):
    """Rails from the pairs' counters (RAIL_LOW_RATIO): the same attribution per rail name."""
    rail_failed = {}
    for index, pair in enumerate(pairs):
        if is_rail_point(pair):
            continue
        for rail, hosts in rail_lows(pair).items():
            rail_failed.setdefault(rail, {})[index] = hosts
    pair_rows = {index for index, pair in enumerate(pairs) if not is_rail_point(pair)}
    for rail, failed_at in sorted(rail_failed.items()):
        rail_edges = edges_of(pairs, [index in failed_at for index in range(len(pairs))], excluded, pair_rows)
        found = attribute(paired, rail_edges)

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


def step_rails_alone(state, pairs, paired, excluded, rail_found):
    """Each rail alone against its siblings (judge_rail_points' rail_found): the same attribution per rail name
    over the rail points; at two nodes the link's rail once the slowness reproduces."""
    for rail in sorted({pairs[index].get("rail") for index, entry in rail_found.items() if entry["judged"]}):
        rows = {index for index, entry in rail_found.items() if entry["judged"] and pairs[index].get("rail") == rail}
        slow_edges = edges_of(pairs, [index in rows and rail_found[index]["outcome"] == PAIR_SLOW_RAIL
                                    for index in range(len(pairs))], excluded, rows)

        def evidence(behind, extra):
            slow = [i for i in behind if rail_found[i]["outcome"] == PAIR_SLOW_RAIL]
            ratios = [rail_found[i]["ratio"] for i in slow]
            known = [ratio for ratio in ratios if ratio is not None]
            small = [rail_found[i]["small_ratio"] for i in slow if "small_time_us" in rail_found[i]["slow"]]
            return dict({"rail": rail, "ratio": statistics.median(known) if known else None,
                         "ratios": [None if ratio is None else round(ratio, 4) for ratio in ratios],
                         "sibling": next((rail_found[i]["sibling"] for i in behind if rail_found[i]["sibling"]), None),
                         "threshold_ratio": rail_found[behind[0]]["threshold"] if behind else RAIL_SLOW_RATIO,
                         "slow_on": sorted({metric for i in slow for metric in rail_found[i]["slow"]}),
                         "small_time_ratio": statistics.median(small) if small else None,
                         "small_time_threshold": rail_found[behind[0]]["small_threshold"] if behind else None},
                        **extra)

        if len(paired) == 2:  # no third node: the link between the two, once the slowness reproduces
            for key, edge in slow_edges.items():
                if not edge["failed"]:
                    continue
                detail = evidence(edge["pairs"], {"measurements": edge["count"]})
                if edge["count"] >= 2:
                    state.links.append({"a": key[0], "b": key[1], "verdict": BAD,
                                        "reasons": [make_reason(RAIL_SLOW, detail, edge["pairs"])]})
                else:
                    state.repeat_pairs.append(list(key))
                for node in key:
                    state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED,
                                   dict(detail, partner=key[1] if node == key[0] else key[0]), edge["pairs"])
                    state.rail_suspects.add(node)
            continue
        found = attribute(paired, slow_edges)
        for node, keys in found["bad"].items():
            behind = [i for key in keys for i in slow_edges[key]["pairs"]]
            state.add_rail(node, rail, BAD, RAIL_SLOW, evidence(behind, {"good_partners_slow": sorted(
                {k[0] if k[1] == node else k[1] for k in keys})}), behind)
        for node, keys in found["suspect"].items():
            behind = [i for key in keys for i in slow_edges[key]["pairs"]]
            state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED, evidence(behind, {}), behind)
            state.rail_suspects.add(node)
        for node in found["no_good_partner"]:
            # Slow alone only with partners whose own rail is slow (two neighbours of one leaf, a leaf's rail): its
            # failures were explained by theirs, and nothing vouches for its rail. Retested with known-good nodes.
            behind = [i for key, edge in slow_edges.items() if node in key and edge["failed"] for i in edge["pairs"]]
            if behind:
                state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED, evidence(behind, {"partners_bad": sorted(
                    {other for i in behind for other in (pairs[i]["a"], pairs[i]["b"]) if other != node})}),
                    behind)
                state.rail_suspects.add(node)
        for key in found["links_bad"]:
            state.links.append({"a": key[0], "b": key[1], "verdict": BAD, "reasons": [make_reason(
                RAIL_SLOW, evidence(slow_edges[key]["pairs"], {"measurements": slow_edges[key]["count"]}),
                slow_edges[key]["pairs"])]})
        for key in found["links_suspect"]:
            state.repeat_pairs.append(list(key))
            for node in key:
                state.add_rail(node, rail, SUSPECT, RAIL_SLOW_UNRESOLVED,
                               evidence(slow_edges[key]["pairs"], {"partner": key[1] if node == key[0] else key[0]}),
                               slow_edges[key]["pairs"])
                state.rail_suspects.add(node)
