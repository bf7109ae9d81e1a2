"""The A/B verdict (automatic against the best --ab variant, per collective and band of sizes) and the
decode binding choice (of the sweep's bindings within noise of the fastest, the one that changes the
fewest of production's variables), both with compare's noise rule (rules/noise.py). Plain data, no text."""

import math
import statistics

from ..base.values import format_size
from ..model.records import EMULATED, GPU_TIMED, group_repeats, launch_base_point
from ..rules.noise import neighbour_floors, noise_verdict, summarize


# compare's default --threshold: the smallest difference ever called a change.
AB_THRESHOLD_PCT = 2.0
# A noise band wider than this cannot support "within noise": such sizes are inconclusive (emulated ranks on
# one H200 scattered 2x between repeats, and a 4x difference fell inside their band).
AB_NOISY_BAND_PCT = 25.0


def sweep_bindings(launches):
    """{base point: env} of the eager sweep over the rails (inter.* points, one per NCCL_CROSS_NIC x NCCL_IB_HCA)."""
    bindings = {}
    for launch in launches:
        if launch.get("kind") == "inter" and not launch.get("decode") and not launch.get("ab"):
            bindings.setdefault(launch_base_point(launch), launch.get("env") or {})
    return bindings


def binding_comparison(records, bindings, collective, sizes):
    """(band, per_binding): the sweep sizes spanning `sizes` (the nearest at or below the smallest to the nearest at
    or above the largest) that every measured binding has, and per binding its summarized side at each size."""
    per_binding = {}
    for (base, _case_id), group in group_repeats(records).items():
        record = group[0]
        if base in bindings and record.get("collective") == collective and not record.get("in_place"):
            side = summarize(group)
            if side["time"] is not None:
                per_binding.setdefault(base, {})[record.get("requested_bytes")] = side
    low, high = min(sizes), max(sizes)
    common = set.intersection(*(set(found) for found in per_binding.values())) if per_binding else set()
    below = [size for size in common if size <= low]
    above = [size for size in common if size >= high]
    band = sorted(size for size in common if (max(below) if below else min(common or [0])) <= size <=
                  (min(above) if above else max(common or [0])))
    return band, per_binding


def _geomean(per_binding, base, band):
    """Each size counts alike: the geometric mean of a binding's per-size median times over the band."""
    return math.exp(statistics.fmean(math.log(per_binding[base][size]["time"]) for size in band))


def fastest_binding(per_binding, band):
    return min(per_binding, key=lambda base: _geomean(per_binding, base, band))


def _beyond_noise(per_binding, fast, slow, band):
    """At how many of the band's sizes `slow` is slower than `fast` beyond noise (the A/B rule)."""
    return sum(noise_verdict(per_binding[fast][size], per_binding[slow][size], AB_THRESHOLD_PCT)[0] == "slower"
               for size in band)


def slower_than(per_binding, fast, slow, band):
    """(how much slower `slow` is than `fast` over the band in %, geometric mean; at how many sizes beyond noise)."""
    return ((_geomean(per_binding, slow, band) / _geomean(per_binding, fast, band) - 1) * 100,
            _beyond_noise(per_binding, fast, slow, band))


def choose_binding(records, bindings, collective, sizes, production_env):
    """The binding a decode point over the rails runs with: (base or None, env, reason). The sweep's fastest at the
    sizes spanning the decode sizes when it beats the production binding beyond noise at most of them (or, of the
    bindings within noise of the fastest, the one closest to production); else the production binding (a
    difference the repeats cannot tell from noise is no reason to leave what the model runs with). With no sweep
    records at these sizes yet, the production binding."""
    band, per_binding = binding_comparison(records, bindings, collective, sizes)
    production = next((base for base, env in bindings.items() if env == production_env), None)
    if not band or not per_binding:
        return production, dict(production_env), "the sweep has no records at these sizes: the production binding"
    best = fastest_binding(per_binding, band)
    where = f"{format_size(band[0])}-{format_size(band[-1])}, {len(per_binding)} binding(s)"
    if production not in per_binding:
        return best, dict(bindings[best]), f"the sweep's fastest ({where}); the production binding was not measured"
    if best == production:
        return production, dict(production_env), f"the production binding is the sweep's fastest ({where})"
    slower, beyond = slower_than(per_binding, best, production, band)
    if 2 * beyond > len(band):
        # Among the bindings the repeats cannot tell from the fastest, and that beat the production binding as
        # clearly, the one that changes the fewest of its variables: the smallest change that gets the speed (a
        # dead rail leaves every binding without it about equally fast; keep NCCL_CROSS_NIC then).
        def changed(base):
            env = bindings[base]
            return sum(env.get(name) != production_env.get(name) for name in set(env) | set(production_env))
        peers = [base for base in per_binding
                 if 2 * _beyond_noise(per_binding, best, base, band) <= len(band)
                 and 2 * _beyond_noise(per_binding, base, production, band) > len(band)]
        chosen = min(peers, key=lambda base: (changed(base), _geomean(per_binding, base, band)))
        slower, beyond = slower_than(per_binding, chosen, production, band)
        what = (f"the sweep's fastest ({where})" if chosen == best else
                f"within noise of the sweep's fastest, {best}, and the closest to the production binding "
                f"({changed(chosen)} variable(s) changed; {where})")
        return chosen, dict(bindings[chosen]), (f"{what}: the production binding is {slower:.0f}% slower, beyond "
                                                f"noise at {beyond} of {len(band)} size(s)")
    return production, dict(production_env), (f"the production binding: the sweep's fastest, {best}, is {slower:.0f}% "
                                               f"faster but beyond noise at only {beyond} of {len(band)} size(s) "
                                               f"({where})")


def ab_variants_of(launches):
    """{automatic point: {variant point: variant env}} from the plan's timed launches. A variant's untimed TUNING
    probe also carries 'ab' (NCCL refusing the variant fails it too) but is no point: it has no base_point."""
    variants_of = {}
    for launch in launches:
        if launch.get("ab") and launch.get("base_point"):
            variants_of.setdefault(launch["ab"]["of"], {})[launch["base_point"]] = launch["ab"]["variant"]
    return variants_of


def ab_verdicts(records, launches):
    """Per automatic point and collective, bands of consecutive sizes with one verdict:
    [{'point', 'collective', 'sizes', 'verdict', 'variant', 'slower_pct': [..]}], plus the variants that
    produced no measurement: [{'point', 'variant', 'reason'}]."""
    groups = group_repeats(records)
    variants_of = ab_variants_of(launches)
    bands, unmeasured = [], []
    for auto, variants in variants_of.items():
        cases = {}
        for (base, case_id), group in groups.items():
            if base == auto and group and not group[0].get("in_place"):
                cases[case_id] = (group[0].get("collective"), group[0].get("requested_bytes"), summarize(group))
        pairs = {}
        measured = set()
        for case_id, (collective, size, side_auto) in cases.items():
            # Emulated ranks against emulated ranks is like for like (the same sockets on one GPU): judged, and
            # labelled so; the MPI backend has no NCCL to vary.
            if side_auto["time"] is None or side_auto["cls"] not in (GPU_TIMED, EMULATED):
                continue
            best = None
            for variant_base, env in variants.items():
                group = groups.get((variant_base, case_id))
                if not group:
                    continue
                side = summarize(group)
                if side["time"] is None or side["cls"] != side_auto["cls"]:
                    continue
                measured.add(variant_base)
                if best is None or side["time"] < best[1]["time"]:
                    best = (env, side)
            if best is not None:
                pairs[(auto, case_id)] = (side_auto, best[1], collective, size, best[0])
        floors = neighbour_floors({key: (a, b, coll) for key, (a, b, coll, _s, _e) in pairs.items()})
        for variant_base, env in variants.items():
            if variant_base not in measured:
                problems = [summarize(group)["problem"] for (base, _c), group in groups.items() if base == variant_base]
                reason = next((p for p in problems if p), None)
                unmeasured.append({"point": auto, "variant": env, "variant_point": variant_base,
                                   "reason": reason or "no records (see Launches)"})
        by_collective = {}
        for (_auto, _case), (side_auto, side_best, collective, size, env) in pairs.items():
            verdict, diff, band, _text = noise_verdict(side_auto, side_best, AB_THRESHOLD_PCT,
                                                       floors.get((auto, collective)))
            # diff is best against automatic: 'faster' means the best variant beats automatic.
            state = {"faster": "slower", "slower": "faster"}.get(verdict, verdict)
            if state == "same within noise" and band > AB_NOISY_BAND_PCT:
                # Repeats that scatter this much cannot show two settings to be alike: no verdict either way.
                state = "inconclusive"
            slower_pct = (side_auto["time"] / side_best["time"] - 1) * 100
            by_collective.setdefault(collective, []).append((size, state, env, slower_pct, band,
                                                             side_auto["cls"] == EMULATED))
        for collective, items in by_collective.items():
            items.sort(key=lambda item: item[0])
            for size, state, env, slower_pct, band, emulated in items:
                last = bands[-1] if bands else None
                key_env = env if state == "slower" else None
                if (last and last["point"] == auto and last["collective"] == collective and last["verdict"] == state
                        and last["variant"] == key_env):
                    last["sizes"].append(size)
                    last["slower_pct"].append(slower_pct)
                    last["band_pct"].append(band)
                else:
                    bands.append({"point": auto, "collective": collective, "sizes": [size], "verdict": state,
                                  "variant": key_env, "best": env, "slower_pct": [slower_pct], "band_pct": [band],
                                  "emulated": emulated})
    return bands, unmeasured
