"""Decode communication as the model sees it (--decode) and the NCCL algorithm/protocol A/B (--ab).

--decode hidden=H,dtype=bfloat16,batches=1,2,...[,collectives=all_reduce,alltoall][,per_step=N][,topk=K]
  adds points at exactly the model's message sizes: H x batch x element size for the tensor-parallel
  collectives; for alltoall (expert dispatch) H x batch x topk x element size, the send buffer of one
  rank when each token goes to topk experts. They run in CUDA-graph mode (coll_perf -G), as decode runs
  inside CUDA graphs, except on the MPI backend (no CUDA graphs there).

--ab NCCL_X=a,b [--ab NCCL_Y=c,d ...] runs every combination (the cross product, at most
  AB_MAX_VARIANTS) as points beside the automatic one, and the report says per collective and size band
  whether automatic is within noise of the best variant or how much slower it is, with compare's noise
  rule (rules/noise.noise_verdict); its verdict is rules/ab.py's, its table render/decode.py's.
"""

import itertools
import re

from ..base.errors import UsageError
from ..base.values import parse_collectives, variant_label, variant_text


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


def _positive_field(key, text, high):
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
    batches = [_positive_field("batches", value, MAX_BATCH) for value in fields["batches"]]
    if len(set(batches)) != len(batches):
        raise UsageError(f"--decode: batches lists a batch twice ({','.join(map(str, batches))})")
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
    topk = _positive_field("topk", fields["topk"][0], 1024) if "topk" in fields else None
    if "alltoall" in collectives and topk is None:
        raise UsageError("--decode: collectives has alltoall: give topk=K (experts per token; the dispatch size is "
                         "hidden x batch x topk x element size)")
    if topk is not None and "alltoall" not in collectives:
        raise UsageError("--decode: topk only sizes alltoall (expert dispatch): add alltoall to collectives")
    element, coll_perf_dtype = DTYPES[dtype]
    return {"hidden": _positive_field("hidden", fields["hidden"][0], MAX_HIDDEN), "dtype": dtype,
            "coll_perf_dtype": coll_perf_dtype, "element_bytes": element, "batches": sorted(batches),
            "collectives": collectives, "topk": topk,
            "per_step": _positive_field("per_step", fields["per_step"][0], 1 << 20) if "per_step" in fields else None}


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


# --- planning (called by plan/baseline.Planner) --------------------------------------------------------------

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
