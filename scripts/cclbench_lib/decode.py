"""Decode communication as the model sees it (--decode) and the NCCL algorithm/protocol A/B (--ab).

--decode hidden=H,dtype=bfloat16,batches=1,2,...[,collectives=all_reduce,alltoall][,per_step=N][,topk=K]
  adds points at exactly the model's message sizes: H x batch x element size for the tensor-parallel
  collectives; for alltoall (expert dispatch) H x batch x topk x element size, the send buffer of one
  rank when each token goes to topk experts. They run in CUDA-graph mode (coll_perf -G), as decode runs
  inside CUDA graphs, except on the MPI backend (no CUDA graphs there).

--ab NCCL_X=a,b [--ab NCCL_Y=c,d ...] runs every combination (the cross product, at most
  AB_MAX_VARIANTS) as points beside the automatic one, and the report says per collective and size band
  whether automatic is within noise of the best variant or how much slower it is, with compare's noise
  rule (compare.noise_verdict).
"""
import itertools
import math
import os
import re
import statistics

from .common import UsageError, format_size

# Element sizes of the dtypes a model's activations use, and coll_perf's -d spelling of each.
DTYPES = {"bfloat16": (2, "bfloat16"), "bf16": (2, "bfloat16"), "float16": (2, "half"), "half": (2, "half"),
          "fp16": (2, "half"), "float32": (4, "float"), "float": (4, "float"), "fp32": (4, "float"),
          "f8e4m3": (1, "f8e4m3"), "fp8": (1, "f8e4m3"), "f8e5m2": (1, "f8e5m2")}
DECODE_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
DECODE_KEYS = ("hidden", "dtype", "batches", "collectives", "per_step", "topk")
MAX_BATCH = 1 << 16
MAX_HIDDEN = 1 << 20
# CUDA-graph replays per case for decode points (coll_perf -G K), nccl-tests' usual -G 10.
DECODE_GRAPH_LAUNCHES = 10
# Decode points are out-of-place only: inside CUDA graphs the serving stacks call NCCL out of place (vLLM's and
# SGLang's pynccl all_reduce allocates its output; all_to_all_single and all_gather_into_tensor have one).
DECODE_PLACEMENT = "out"
# Emulated decode points without --ab: a correctness check (iterations, warmup), like the emulated sweep check.
EMULATED_DECODE_ITERATIONS = 2
EMULATED_DECODE_WARMUP = 1
AB_MAX_VARIANTS = 12
AB_VAR_RE = re.compile(r"^NCCL_[A-Z0-9_]+$")
AB_VALUE_RE = re.compile(r"^[A-Za-z0-9_.:^~-]+$")
# compare's default --threshold: the smallest difference ever called a change.
AB_THRESHOLD_PCT = 2.0
# A noise band wider than this cannot support "within noise": such sizes are inconclusive (emulated ranks on
# one H200 scattered 2x between repeats, and a 4x difference fell inside their band).
AB_NOISY_BAND_PCT = 25.0
PRODUCTION_NOTE = ("decode over the rails: the binding (NCCL_CROSS_NIC x NCCL_IB_HCA) the sweep found best at these "
                   "sizes, chosen at run time from the sweep's records measured before it: the production binding "
                   "(NCCL_IB_HCA = all --hcas rails with NCCL_CROSS_NIC=1, as SGLang runs; the command shown) unless "
                   "another binding is faster beyond noise at most of these sizes")
MPI_DECODE_NOTE = ("decode on the MPI backend (no GPU visible): eager (CUDA graphs need NCCL), host memory, and int8 "
                   "elements at the same byte sizes (MPI has no bfloat16 or half type); correctness of the decode sizes "
                   "only, not GPU or NCCL figures")
# The MPI backend's stand-in element type: byte sizes stay exact, any size is a whole number of them.
MPI_DTYPE = "int8"
AB_MPI_NOTE = "--ab ignored: the MPI backend runs no NCCL, so NCCL_* variables change nothing it measures"


def _positive(key, text, high):
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"--decode: {key}={text} is not a whole number") from None
    if not 1 <= value <= high:
        raise UsageError(f"--decode: {key}={value} is out of range (1..{high})")
    return value


def parse_decode(text):
    """'hidden=7168,dtype=bfloat16,batches=1,2,4' -> a plain dict (stored in the plan inputs)."""
    if text is None:
        return None
    fields = {}
    key = None
    for item in str(text).split(","):
        item = item.strip()
        if "=" in item:
            key, value = (part.strip() for part in item.split("=", 1))
            if key not in DECODE_KEYS:
                raise UsageError(f"--decode: unknown key '{key}' (known: {', '.join(DECODE_KEYS)})")
            if key in fields:
                raise UsageError(f"--decode: {key} given twice")
            fields[key] = [value] if value else []
        elif key in ("batches", "collectives") and item:
            fields[key].append(item)  # a list value continues after its comma: batches=1,2,4
        else:
            raise UsageError(f"--decode: '{item}' is not key=value (example: hidden=7168,dtype=bfloat16,batches=1,2,4)")
    for key, values in fields.items():
        if not values:
            raise UsageError(f"--decode: {key}= has no value")
        if key not in ("batches", "collectives") and len(values) > 1:
            raise UsageError(f"--decode: {key} takes one value, got {','.join(values)}")
    if "hidden" not in fields or "batches" not in fields:
        raise UsageError("--decode: needs hidden=H and batches=B[,B...] (example: hidden=7168,dtype=bfloat16,batches=1,2,4)")
    dtype = fields.get("dtype", ["bfloat16"])[0].lower()
    if dtype not in DTYPES:
        raise UsageError(f"--decode: dtype={dtype} is unknown (known: {', '.join(sorted(DTYPES))})")
    batches = [_positive("batches", value, MAX_BATCH) for value in fields["batches"]]
    if len(set(batches)) != len(batches):
        raise UsageError(f"--decode: batches lists a batch twice ({','.join(map(str, batches))})")
    from .plan import parse_collectives
    try:
        collectives = parse_collectives(",".join(fields.get("collectives", ["all_reduce"])))
    except UsageError as error:
        raise UsageError(f"--decode: {str(error).replace('--coll: ', '')}") from None
    for collective in collectives:
        if collective not in DECODE_COLLECTIVES:
            raise UsageError(f"--decode: collectives={collective} is not a decode collective "
                             f"(known: {', '.join(DECODE_COLLECTIVES)})")
    if len(set(collectives)) != len(collectives):
        raise UsageError("--decode: collectives lists one twice")
    topk = _positive("topk", fields["topk"][0], 1024) if "topk" in fields else None
    if "alltoall" in collectives and topk is None:
        raise UsageError("--decode: collectives has alltoall: give topk=K (experts per token; the dispatch size is "
                         "hidden x batch x topk x element size)")
    if topk is not None and "alltoall" not in collectives:
        raise UsageError("--decode: topk only sizes alltoall (expert dispatch): add alltoall to collectives")
    element, coll_perf_dtype = DTYPES[dtype]
    return {"hidden": _positive("hidden", fields["hidden"][0], MAX_HIDDEN), "dtype": dtype,
            "coll_perf_dtype": coll_perf_dtype, "element_bytes": element, "batches": sorted(batches),
            "collectives": collectives, "topk": topk,
            "per_step": _positive("per_step", fields["per_step"][0], 1 << 20) if "per_step" in fields else None}


def message_bytes(spec, collective, batch):
    """hidden x batch x element size; alltoall (expert dispatch) also x topk."""
    size = spec["hidden"] * batch * spec["element_bytes"]
    return size * spec["topk"] if collective == "alltoall" else size


def decode_sizes(spec, collective, nranks):
    """[(batch, bytes)] for one collective; a size the collective cannot split evenly over the ranks is
    refused (coll_perf would round it, and the point would no longer be the model's size)."""
    rows = []
    for batch in spec["batches"]:
        size = message_bytes(spec, collective, batch)
        if collective != "all_reduce" and size % (nranks * spec["element_bytes"]):
            raise UsageError(f"--decode: {collective} at batch {batch} is {size} bytes, not a whole number of "
                             f"{spec['dtype']} elements per rank over {nranks} ranks")
        rows.append((batch, size))
    return rows


def parse_ab(values):
    """['NCCL_ALGO=Ring,Tree', 'NCCL_PROTO=Simple,LL'] -> [[variable, [values]], ...] (plan inputs)."""
    if not values:
        return None
    axes = []
    for text in values:
        if "=" not in text:
            raise UsageError(f"--ab: '{text}' is not NCCL_VAR=value[,value] (example: --ab NCCL_ALGO=Ring,Tree)")
        name, rest = (part.strip() for part in text.split("=", 1))
        if not AB_VAR_RE.match(name):
            raise UsageError(f"--ab: '{name}' is not an NCCL_* variable (example: --ab NCCL_PROTO=Simple,LL,LL128)")
        if any(name == axis[0] for axis in axes):
            raise UsageError(f"--ab: {name} given twice (list its values in one --ab)")
        items = [item.strip() for item in rest.split(",")]
        for item in items:
            if not AB_VALUE_RE.match(item):
                raise UsageError(f"--ab: {name} value '{item}' is empty or has characters other than letters, digits, "
                                 "_ . : ^ ~ -")
        if len(set(items)) != len(items):
            raise UsageError(f"--ab: {name} lists a value twice")
        axes.append([name, items])
    count = 1
    for _, items in axes:
        count *= len(items)
    if count > AB_MAX_VARIANTS:
        raise UsageError(f"--ab: {count} combinations exceed the limit of {AB_MAX_VARIANTS} (each is a point with all "
                         "its repeats); give fewer values")
    return axes


def ab_variants(axes):
    """The cross product: [{variable: value}, ...] in the order given."""
    if not axes:
        return []
    names = [name for name, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*[items for _, items in axes])]


def variant_text(env):
    return " ".join(f"{name}={value}" for name, value in env.items())


def variant_label(env):
    """Point-name fragment: {'NCCL_ALGO': 'Ring', 'NCCL_PROTO': 'LL128'} -> 'ab.ALGO-Ring.PROTO-LL128'."""
    parts = []
    for name, value in env.items():
        parts.append(re.sub(r"[^A-Za-z0-9_-]", "_", f"{name[len('NCCL_'):]}-{value}"))
    return "ab." + ".".join(parts)


# --- planning (called by plan.Planner) --------------------------------------------------------------

def decode_points(planner, scopes):
    """Decode points for each scope {'base', 'kind', 'nranks', 'hosts', 'env', 'mpirun', 'expect', 'extra',
    'note', 'mpi'}: one point per decode collective at exactly its sizes."""
    spec = planner.inputs.get("decode")
    if not spec:
        return []
    points = []
    for scope in scopes:
        for collective in spec["collectives"]:
            rows = decode_sizes(spec, collective, scope["nranks"])
            sizes = [size for _, size in rows]
            if scope.get("mpi"):
                extra = list(scope.get("extra", [])) + ["-d", MPI_DTYPE]
                notes = [MPI_DECODE_NOTE]
            else:
                # Emulated ranks (--share-gpu) check correctness of the graph path only, over loopback sockets:
                # one replay, not 10 (-G 10 took 164 s for one 7-size point on an H200).
                launches = 1 if "--share-gpu" in scope.get("extra", []) else DECODE_GRAPH_LAUNCHES
                extra = list(scope.get("extra", [])) + ["-d", spec["coll_perf_dtype"], "-G", str(launches)]
                notes = [note for note in (scope.get("note"),) if note]
            check = {}
            if "--share-gpu" in scope.get("extra", []) and not planner.inputs.get("ab"):
                # Without --ab nothing judges emulated times: a short correctness check, run once (three timed
                # repeats of it took 100 of 116 s of a one-GPU decode baseline on an H200).
                check = {"once": True, "iterations": EMULATED_DECODE_ITERATIONS, "warmup": EMULATED_DECODE_WARMUP}
            extra += ["--placement", DECODE_PLACEMENT]
            points.append(dict(scope, **check, base=f"decode.{collective}.{scope['base']}", extra=extra,
                               collectives=[collective],
                               sizes=sizes, size_args=["--sizes", ",".join(str(size) for size in sizes)],
                               note="; ".join(notes) or None,
                               decode={"collective": collective, "hidden": spec["hidden"], "dtype": spec["dtype"],
                                       "element_bytes": spec["element_bytes"], "topk": spec["topk"],
                                       "per_step": spec["per_step"], "batches": [batch for batch, _ in rows],
                                       "sizes": sizes}))
    return points


def ab_points(planner, points):
    """Every variant of --ab beside each given (automatic) point: same ranks, sizes and flags, the variant's
    NCCL_* variables added to its environment."""
    variants = ab_variants(planner.inputs.get("ab"))
    found = []
    for point in points:
        if point.get("mpi"):
            continue
        for env in variants:
            merged = dict(point["env"], **env)
            found.append(dict(point, base=f"{point['base']}.{variant_label(env)}", env=merged,
                              mpirun=planner.mpirun(point["nranks"], point.get("host_spec"), merged,
                                                    point.get("oversubscribe", False)),
                              ab={"of": point["base"], "variant": dict(env)}))
    return found


def plan_notes(inputs, launches):
    """One-line notes `plan` prints to stderr: what --decode and --ab add."""
    notes = []
    spec = inputs.get("decode")
    if spec:
        for collective in spec["collectives"]:
            sizes = [message_bytes(spec, collective, batch) for batch in spec["batches"]]
            formula = "hidden x batch x topk x element" if collective == "alltoall" else "hidden x batch x element"
            notes.append(f"decode {collective}: {formula} = " + ", ".join(
                f"b{batch}:{size}" for batch, size in zip(spec["batches"], sizes)) + " bytes")
    if inputs.get("ab"):
        variants = ab_variants(inputs["ab"])
        beside = sorted({launch["ab"]["of"] for launch in launches if launch.get("ab")})
        if beside:
            notes.append(f"--ab: {len(variants)} variant(s) ({'; '.join(variant_text(v) for v in variants)}) beside "
                         f"{len(beside)} automatic point(s): {', '.join(beside)}")
    for launch in launches:
        note = launch.get("note")
        if note and note not in notes and (launch.get("decode") or AB_MPI_NOTE in note):
            notes.append(note)
    return notes


# --- report ------------------------------------------------------------------------------------------

def _bands_text(sizes):
    return format_size(sizes[0]) if len(sizes) == 1 else f"{format_size(sizes[0])}-{format_size(sizes[-1])}"


def decode_section(data):
    """'Decode communication': per decode point, batch, bytes, p50/p99, busbw, NCCL's choice, per step."""
    from .records import bandwidth_time_us, base_point_of, is_correctness_only
    from .report import algo_proto, busbw_of, fmt_number, md_table, median_of, time_of
    launches = {}
    for launch in data.plan:
        if launch.get("decode") and not launch.get("ab"):
            launches.setdefault(launch.get("base_point") or launch["name"], launch)
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


def sweep_bindings(launches):
    """{base point: env} of the eager sweep over the rails (inter.* points, one per NCCL_CROSS_NIC x NCCL_IB_HCA)."""
    bindings = {}
    for launch in launches:
        if launch.get("kind") == "inter" and not launch.get("decode") and not launch.get("ab"):
            bindings.setdefault(launch.get("base_point") or launch["name"], launch.get("env") or {})
    return bindings


def binding_comparison(records, bindings, collective, sizes):
    """(band, per_binding): the sweep sizes spanning `sizes` (the nearest at or below the smallest to the nearest at
    or above the largest) that every measured binding has, and per binding its summarized side at each size."""
    from .compare import summarize
    from .records import group_repeats
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


def _fastest(per_binding, band):
    return min(per_binding, key=lambda base: _geomean(per_binding, base, band))


def _beyond_noise(per_binding, fast, slow, band):
    """At how many of the band's sizes `slow` is slower than `fast` beyond noise (the A/B rule)."""
    from .compare import noise_verdict
    return sum(noise_verdict(per_binding[fast][size], per_binding[slow][size], AB_THRESHOLD_PCT)[0] == "slower"
               for size in band)


def _slower(per_binding, fast, slow, band):
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
    best = _fastest(per_binding, band)
    where = f"{format_size(band[0])}-{format_size(band[-1])}, {len(per_binding)} binding(s)"
    if production not in per_binding:
        return best, dict(bindings[best]), f"the sweep's fastest ({where}); the production binding was not measured"
    if best == production:
        return production, dict(production_env), f"the production binding is the sweep's fastest ({where})"
    slower, beyond = _slower(per_binding, best, production, band)
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
        slower, beyond = _slower(per_binding, chosen, production, band)
        what = (f"the sweep's fastest ({where})" if chosen == best else
                f"within noise of the sweep's fastest, {best}, and the closest to the production binding "
                f"({changed(chosen)} variable(s) changed; {where})")
        return chosen, dict(bindings[chosen]), (f"{what}: the production binding is {slower:.0f}% slower, beyond "
                                                f"noise at {beyond} of {len(band)} size(s)")
    return production, dict(production_env), (f"the production binding: the sweep's fastest, {best}, is {slower:.0f}% "
                                               f"faster but beyond noise at only {beyond} of {len(band)} size(s) "
                                               f"({where})")


def binding_sentence(data, launch, spec):
    """Over the rails: which binding of the eager sweep was fastest at the sweep sizes spanning this decode
    point's sizes, the binding this point ran with (chosen at run time, choose_binding) and how it compares."""
    bindings = sweep_bindings(data.plan)
    band, per_binding = binding_comparison(data.records, bindings, spec["collective"], spec["sizes"])
    prefix = f"Binding over the rails at the decode sizes ({spec['collective']})"
    if len(per_binding) < 2 or not band:
        return f"_{prefix}: no comparison (the sweep measured fewer than two bindings at these sizes)._"
    best = _fastest(per_binding, band)
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
            slower, beyond = _slower(per_binding, best, production, band)
            text += (f"; the production binding, {production}, is {slower:.0f}% slower there (geometric mean), "
                     f"beyond noise at {beyond} of {len(band)} size(s)")
        return text + "._"
    slower, beyond = _slower(per_binding, best, this, band)
    return (f"_{prefix} ({where}): the sweep's fastest is {best_text}; this point's binding, {this}, is "
            f"{slower:.0f}% slower there (geometric mean), beyond noise at {beyond} of {len(band)} size(s)._")


def nccl_rejection(run_dir, point_names):
    """NCCL's own words when it refused a forced algorithm/protocol: its WARN lines in the point's NCCL logs."""
    import glob
    for name in point_names:
        for path in sorted(glob.glob(os.path.join(run_dir, "nccl", name, "*")))[:64]:
            try:
                with open(path, errors="replace") as handle:
                    for line in handle:
                        if "WARN" in line and ("algorithm" in line.lower() or "protocol" in line.lower()
                                               or "NCCL_ALGO" in line or "NCCL_PROTO" in line):
                            return line.split("WARN", 1)[1].strip()[:300]
            except OSError:
                continue
    return None


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
    from .compare import neighbour_floors, noise_verdict, summarize
    from .records import EMULATED, GPU_TIMED, group_repeats
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
    from .report import md_table
    if not any(launch.get("ab") for launch in data.plan):
        return []
    bands, unmeasured = ab_verdicts(data.records, data.plan)
    lines = ["## Algorithm / protocol A/B (--ab)", "",
             "Per automatic point, collective and size band: the automatic choice against the fastest variant at each "
             "size, with compare's noise rule (median over repeats of the bandwidth time; change = larger / smaller - 1; "
             f"band = max(4 x 1.2533 x s x sqrt(1/r_a + 1/r_b), {AB_THRESHOLD_PCT:g}%), s the median pooled repeat "
             "spread of the point's sizes, a size's own where over twice that; no run-drift term: the variants run "
             "interleaved in one run; one repeat a side: only a difference beyond 15% (20% below 20 us) is called; a band over "
             f"{AB_NOISY_BAND_PCT:g}% supports no 'within noise').", ""]
    if bands:
        rows = [[band["point"], band["collective"], _bands_text(band["sizes"]), band_sentence(band)] for band in bands]
        lines += [md_table(["automatic point", "collective", "sizes", "verdict"], rows), ""]
    else:
        lines += ["_No size has both an automatic and a variant measurement._", ""]
    lines += ab_detail(data)
    for item in unmeasured:
        names = [l["name"] for l in data.plan if (l.get("base_point") or l["name"]) == item["variant_point"]]
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
    from .compare import summarize
    from .records import group_repeats
    from .report import fmt_number, md_table
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
