"""The report's decode and A/B sections: tables and sentences over the rules' verdicts (rules/ab.py)."""

from ..base.values import format_size, variant_text
from ..model.records import bandwidth_time_us, base_point_of, group_repeats, is_correctness_only, launch_base_point
from ..model.run_dir import algo_proto, busbw_of, median_of, nccl_rejection, time_of
from ..render.markdown import fmt_number, md_table
from ..rules.ab import (AB_NOISY_BAND_PCT, AB_THRESHOLD_PCT, ab_variants_of, ab_verdicts, fastest_binding, slower_than,
                        binding_comparison, sweep_bindings)
from ..rules.noise import (MEDIAN_SE_FACTOR, NOISE_SIGMAS, ONE_REPEAT_FLOOR_PCT, ONE_REPEAT_FLOOR_TINY_PCT, TINY_TIME_US,
                           summarize)


# --- report ------------------------------------------------------------------------------------------

def _bands_text(sizes):
    return format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}-{format_size(sizes[-1])}"


def decode_section(data):
    """'Decode communication': per decode point, batch, bytes, p50/p99, busbw, NCCL's choice, per step."""
    launches = {}
    for launch in data.plan:
        if launch.get("decode") and not launch.get("ab"):
            launches.setdefault(launch_base_point(launch), launch)
    if not launches:
        return []
    lines = ["## Decode communication", "",
             "The model's own message sizes (--decode): hidden x batch x element size (alltoall: x topk, the expert "
             "dispatch). Out-of-place, as the serving stacks call NCCL inside CUDA graphs; median over repeats; "
             "time = the headline time busbw comes from (with -G: one event pair around all replays of a graph of "
             "the collectives alone); p50 / p99 = per-iteration times, from a separate instrumented replay whose "
             "per-iteration event pairs add their own GPU time (2-6 us on H200s), so they read above time; with "
             "per_step, per step = per_step x time, the communication one decode step spends in that collective.", ""]
    for base, launch in launches.items():
        spec = launch["decode"]
        records = {}
        for (point, _case), record in data.latest.items():
            if base_point_of(point) == base and not record.get("in_place"):
                records.setdefault(record.get("requested_bytes"), []).append(record)
        header = ["batch", "bytes", "time us", "p50 / p99 us (instrumented)", "busbw GB/s", "NCCL algo/proto"]
        if spec.get("per_step"):
            header.append(f"per step us (x{spec['per_step']})")
        rows = []
        correctness_only = False
        no_choice = False
        for batch, size in zip(spec["batches"], spec["sizes"]):
            group = records.get(size, [])
            correctness_only = correctness_only or any(is_correctness_only(r) for r in group)
            timed = [r for r in group if not is_correctness_only(r)]
            headline = median_of(timed, bandwidth_time_us)
            p50, p99 = median_of(timed, time_of("p50")), median_of(timed, time_of("p99"))
            choices = sorted({c for c in (algo_proto(r) for r in group) if c})
            no_choice = no_choice or (bool(group) and not choices)
            # One rank moves nothing over a bus: nccl-tests' factor (n-1)/n makes busbw 0, which is no figure.
            busbw = "- (1 rank)" if launch.get("nranks") == 1 and timed else fmt_number(median_of(timed, busbw_of))
            row = [batch, size, fmt_number(headline), "-" if p50 is None and p99 is None else
                   f"{fmt_number(p50)} / {fmt_number(p99)}", busbw, ", ".join(choices) or "-"]
            if spec.get("per_step"):
                row.append(fmt_number(None if headline is None else headline * spec["per_step"]))
            rows.append(row)
        mode = "CUDA graph (-G)" if "-G" in (launch.get("argv") or []) else "eager"
        lines += [f"### {base} ({spec['collective']}, hidden {spec['hidden']}, {spec['dtype']}, {launch.get('nranks')} "
                  f"rank(s), {mode})", ""]
        chosen = (launch.get("binding") or {}).get("chosen")
        if chosen:
            lines += [f"_Binding: {chosen['from'] or '-'} ({variant_text(chosen['env'])}), chosen at run time: "
                      f"{chosen['reason']}._", ""]
        elif launch.get("note"):
            lines += [f"_{launch['note']}_", ""]
        if correctness_only:
            lines += ["_Correctness only (emulated ranks or MPI backend): no times are shown._", ""]
        lines += [md_table(header, rows), ""]
        if no_choice:
            lines += [f"_NCCL algo/proto '-': {no_choice_reason(launch, records)}_", ""]
        if launch.get("kind") == "inter":
            lines += [binding_sentence(data, launch, spec), ""]
    return lines


def no_choice_reason(launch, records):
    """Why a decode table shows no algorithm/protocol: one rank (NCCL chooses none and no probe runs), or
    the records' own evidence.tuning_reason (e.g. alltoall is grouped send/recv), or no probe planned."""
    if launch.get("nranks") == 1:
        return "one rank: NCCL runs no algorithm across ranks, so no tuning probe is run"
    reasons = sorted({(r.get("evidence") or {}).get("tuning_reason") for group in records.values() for r in group}
                     - {None})
    if reasons:
        return "; ".join(reasons)
    if not any(arg == "--tuning-from" for arg in launch.get("argv") or []):
        return "no tuning probe was planned for this point (MPI backend, --no-tuning-probe, or an older coll_perf)"
    return "the records carry no algorithm/protocol"


def binding_sentence(data, launch, spec):
    """Over the rails: which binding of the eager sweep was fastest at the sweep sizes spanning this decode
    point's sizes, the binding this point ran with (chosen at run time, choose_binding) and how it compares."""
    bindings = sweep_bindings(data.plan)
    band, per_binding = binding_comparison(data.records, bindings, spec["collective"], spec["sizes"])
    prefix = f"Binding over the rails at the decode sizes ({spec['collective']})"
    if len(per_binding) < 2 or not band:
        return f"_{prefix}: no comparison (the sweep measured fewer than two bindings at these sizes)._"
    best = fastest_binding(per_binding, band)
    this = next((base for base, env in bindings.items() if env == (launch.get("env") or {}) and base in per_binding),
                None)
    where = (f"eager sweep, {format_size(band[0])}-{format_size(band[-1])}, {len(band)} size(s), "
             f"{len(per_binding)} bindings")
    best_text = f"{best} ({variant_text(bindings[best])})"
    if this is None:
        return f"_{prefix} ({where}): the sweep's fastest is {best_text}; it has no point with this binding._"
    production_env = (launch.get("binding") or {}).get("production_env")
    production = next((base for base, env in bindings.items() if env == production_env and base in per_binding), None)
    if this == best:
        text = f"_{prefix} ({where}): this point's binding, {best_text}, is the sweep's fastest"
        if production and production != this:
            slower, beyond = slower_than(per_binding, best, production, band)
            text += (f"; the production binding, {production}, is {slower:.0f}% slower there (geometric mean), "
                     f"beyond noise at {beyond} of {len(band)} size(s)")
        return text + "._"
    slower, beyond = slower_than(per_binding, best, this, band)
    return (f"_{prefix} ({where}): the sweep's fastest is {best_text}; this point's binding, {this}, is "
            f"{slower:.0f}% slower there (geometric mean), beyond noise at {beyond} of {len(band)} size(s)._")


def band_sentence(band):
    text = _band_sentence(band)
    return text + (" (emulated ranks: about this emulation over sockets on one GPU, not a fabric)"
                   if band.get("emulated") else "")


def _band_sentence(band):
    sizes = _bands_text(band["sizes"])
    if band["verdict"] == "slower":
        values = sorted(band["slower_pct"])
        middle = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        spread = f" ({values[0]:.0f}-{values[-1]:.0f}% by size)" if len(values) > 1 and round(values[0]) != round(values[-1]) else ""
        return f"automatic is {middle:.0f}% slower than {variant_text(band['variant'])} at {sizes}{spread}"
    if band["verdict"] == "same within noise":
        return f"automatic is within noise of the best variant at {sizes}"
    if band["verdict"] == "faster":
        return f"automatic is faster than every variant at {sizes}"
    widest = max(band["band_pct"])
    if widest > AB_NOISY_BAND_PCT:
        return (f"inconclusive at {sizes}: the repeats scatter too much (noise band up to {widest:.0f}%, above "
                f"{AB_NOISY_BAND_PCT:g}%) to call the difference (automatic {_pct_range(band['slower_pct'])} against "
                f"the best variant)")
    return f"inconclusive at {sizes} (one repeat: rerun with --repeat 3)"


def _pct_range(values):
    """Automatic against the best variant, signed: '+299%' or '-3% to +299%'."""
    low, high = min(values), max(values)
    return f"{high:+.0f}%" if round(low) == round(high) else f"{low:+.0f}% to {high:+.0f}%"


def ab_section(data):
    if not any(launch.get("ab") for launch in data.plan):
        return []
    bands, unmeasured = ab_verdicts(data.records, data.plan)
    lines = ["## Algorithm / protocol A/B (--ab)", "",
             "Per automatic point, collective and size band: the automatic choice against the fastest variant at each "
             "size, with compare's noise rule (median over repeats of the bandwidth time; change = larger / smaller - 1; "
             f"band = max({NOISE_SIGMAS:g} x {MEDIAN_SE_FACTOR:g} x s x sqrt(1/r_a + 1/r_b), {AB_THRESHOLD_PCT:g}%), s the median pooled repeat "
             "spread of the point's sizes, a size's own where over twice that; no run-drift term: the variants run "
             f"interleaved in one run; one repeat a side: only a difference beyond {ONE_REPEAT_FLOOR_PCT:g}% ({ONE_REPEAT_FLOOR_TINY_PCT:g}% "
             f"below {TINY_TIME_US:g} us) is called; a band over "
             f"{AB_NOISY_BAND_PCT:g}% supports no 'within noise').", ""]
    if bands:
        rows = [[band["point"], band["collective"], _bands_text(band["sizes"]), band_sentence(band)] for band in bands]
        lines += [md_table(["automatic point", "collective", "sizes", "verdict"], rows), ""]
    else:
        lines += ["_No size has both an automatic and a variant measurement._", ""]
    lines += ab_detail(data)
    for item in unmeasured:
        names = [l["name"] for l in data.plan if launch_base_point(l) == item["variant_point"]]
        reason = nccl_rejection(data.run_dir, names)
        launch_reasons = [(data.points_state.get(name) or {}).get("reason") for name in names]
        fallback = next((r for r in launch_reasons if r), None) if item["reason"].startswith("no records") else None
        lines.append(f"- {variant_text(item['variant'])} beside {item['point']}: not measured: "
                     f"{reason or fallback or item['reason']}" + (" (NCCL's log)" if reason else ""))
    if unmeasured:
        lines.append("")
    return lines


def ab_detail(data):
    """Every variant's time beside the automatic one per size (median over repeats, out-of-place)."""
    groups = group_repeats(data.records)
    variants_of = ab_variants_of(data.plan)
    lines = []
    for auto, variants in variants_of.items():
        rows = []
        for (base, case_id), group in sorted(groups.items(), key=lambda item: (str(item[1][0].get("collective")),
                                                                             item[1][0].get("requested_bytes") or 0)):
            if base != auto or group[0].get("in_place"):
                continue
            time_auto = summarize(group)["time"]
            row = [group[0].get("collective"), format_size(group[0].get("requested_bytes")), fmt_number(time_auto)]
            for variant_base in variants:
                other = groups.get((variant_base, case_id))
                time_v = summarize(other)["time"] if other else None
                row.append("-" if time_v is None else fmt_number(time_v) + (
                    f" ({(time_v / time_auto - 1) * 100:+.0f}%)" if time_auto else ""))
            rows.append(row)
        if rows:
            lines += [f"Times (us) beside {auto}, median over repeats (variant against automatic):", "",
                      md_table(["collective", "size", "automatic"] + [variant_text(env) for env in variants.values()], rows), ""]
    return lines
