"""How long a baseline plan will take, launch by launch, before anything runs (`plan` and `baseline --dry-run` print
it, as `screen --dry-run` prints its schedule's).

The model reads each launch as the planner wrote it - kind, ranks, hosts, sizes, collectives, coll_perf's -n/-w/-c/-G,
--placement, -d, -o, --backend, --share-gpu and the NCCL_IB_HCA binding - so it follows any plan (new point kinds,
per-rail points) without knowing how the plan was made:

  launch = start-up of its kind (mpirun, MPI_Init, CUDA context, NCCL communicators, teardown)
         + per case: CASE_OVERHEAD_S + operations x (latency + bytes x bus factor / bus bandwidth)
  operations per case = warm-up + 3 x iterations (the timed pass, the batch pass and the gated pass over the same
      -n iterations) + checked runs; in CUDA-graph mode (-G K) the batch and gated passes replay the graph K times
      each: warm-up + iterations + 2 x K x iterations + checks. The MPI backend runs one pass (its batch time is read
      from the timed loop: bench/mpi/mpi_backend.cpp run_timed), fills its buffers on the host (MPI_FILL_OPS) and
      compares each checked run element by element on the host (MPI_CHECK_OPS): warm-up + iterations + fill + checks
      x MPI_CHECK_OPS.
  cases = sizes x collectives x placements x data types x reduction ops (an in-place case coll_perf skips is
      counted: it costs its overhead only, and the estimate errs long).
  bus factor: nccl-tests' (AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll (n-1)/n; others 1); at one
      rank a collective is a device copy: factor 1.

The constants are deliberately on the slow side of what the hardware does (an estimate that errs long is a plan
that finishes early): bus bandwidths well below the ceilings of rules/ceilings.py, latencies of a loaded launch.
They are a model, not a measurement: run_manifest.json records each launch's real `elapsed_s` to calibrate them
against.
Pure: plain data in and out."""

import math

from ..base.values import parse_size, sweep_sizes
from .bounds import hang_cost_s

# Start-up and teardown of one launch, by kind (seconds). p2p_matrix starts as a coll_perf launch does (a CUDA
# context a GPU, the peer access its pairs enable): on the H100 it took 1.3-1.6 s against a one-GPU coll_perf's 1.3-1.4 s
# of start-up. Modelled at 10 s, the run's start-up ratio at sanity's line (doctor, topo_map, sanity) put it and the
# smoke's p2p_matrix copies at 1.5x their time, and one of ten one-GPU baselines read +26.5% there (2026-12-07).
LAUNCH_S = {"doctor": 5.0, "topology": 3.0, "p2p": 4.0, "local": 3.0, "intra": 4.0, "inter": 6.0}
DEFAULT_LAUNCH_S = 4.0  # any other kind (sanity and TUNING probes take their ranks' kind)
# p2p_matrix: every ordered GPU pair of a host is measured by several tests (copy engine and SM, read and write,
# uni- and bidirectional, P2P on and staged, latency).
P2P_S_PER_GPU_PAIR = 1.0
# p2p_matrix -t with a few single-GPU tests (the smoke's copies, plan/smoke_cases.py): p2p_matrix's start-up and a
# second of copies. (Modelled as 3 s of start-up alone, the smoke's copies were predicted from the p2p point's start-up
# ratio at 0.4-0.6 s; on the H100 they took 1.4 s, as long as the one-GPU p2p point itself: the start-up is the tool's.)
P2P_CHOSEN_TESTS_WORK_S = 1.0
# Per case: buffers, events, synchronisation, the rail counters read before and after, the record written.
CASE_OVERHEAD_S = 0.05
# Bus bandwidth (GB/s = 1e9 B/s) and latency of one collective by where it runs.
INTER_BUSBW_PER_RAIL_GBPS = 20.0  # a 400G rail carries 50 GB/s (rules/ceilings.RAIL_GBPS); busbw here is 40% of it
INTER_LATENCY_US = 50.0
INTRA_BUSBW_GBPS = 20.0           # PCIe Gen5 x16 ring: the ceiling is 64 GB/s
INTRA_LATENCY_US = 25.0
ONE_RANK_COPY_GBPS = 500.0        # one rank: a device-memory copy
ONE_RANK_LATENCY_US = 10.0
EMULATED_BUSBW_GBPS = 0.5         # several ranks on one GPU over loopback sockets (--share-gpu)
EMULATED_LATENCY_US = 200.0
# The MPI backend on host memory: one host's ranks (shared memory or loopback) move their bytes faster than ranks
# across hosts (each byte through the network stack). The two differ 2.3x: on the 2-core VM's virtual cluster (2
# nodes, 2 ranks each) the intra points took 0.3-0.6 and the inter points 1.0-1.7 of one shared figure (0.5 GB/s), in
# every one of 7 runs (docs/data/eta_2026-12-06). With one figure the ETA predicted the intra points, which run after
# sanity (across hosts) and before any of their own, at 2-3x their time.
MPI_HOST_BUSBW_GBPS = 0.75        # one host's ranks
MPI_NET_BUSBW_GBPS = 0.33         # ranks across hosts
MPI_HOST_LATENCY_US = 100.0
# Measured per case on the 2-core VM (coll_perf --progress, the phases' own times, 1M-64M at 2 and 4 ranks): the
# host-side fill took 0.5-1.1 and a checked run (the collective, then every element compared) 3.9-4.6 collectives'
# time at 16M-64M.
MPI_FILL_OPS = 1.0
MPI_CHECK_OPS = 4.0
# coll_perf's own defaults (`coll_perf --help`) where a launch does not pass the flag.
COLL_PERF_DEFAULTS = {"-n": 20, "-w": 1, "-c": 1}
# A TUNING probe (coll_perf --tuning-probe) calls each case's collective once, untimed, whatever -n/-w/-c say. Modelled
# at coll_perf's defaults (62 calls a case), each probe over NCCL's sockets on the H100's virtual cluster was predicted
# at 15-18 s for its 2 s (0.3 s of work), and the ETA at sanity's line read +98% (docs/data/eta_gpu_2026-12-06).
TUNING_PROBE_OPS = 1
ALL_DATATYPES = 12
ALL_OPS = 6
TWO_PASS_KINDS = ("sanity", "local", "intra", "inter", "tuning")  # launches of coll_perf


def _value(argv, flag):
    """The word after `flag` in argv (the last one), or None."""
    found = None
    for index, word in enumerate(argv[:-1]):
        if word == flag:
            found = argv[index + 1]
    return found


def _count(argv, flag, all_count):
    text = _value(argv, flag)
    if not text:
        return 1
    return all_count if text == "all" else len(text.split(","))


def bus_factor(collective, nranks):
    if nranks <= 1:
        return 1.0
    if collective == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (nranks - 1) / nranks
    return 1.0


def _sizes(launch, argv):
    if launch.get("sizes"):
        return list(launch["sizes"])
    listed = _value(argv, "--sizes")
    if listed:
        return [parse_size(word, "--sizes") for word in listed.split(",")]
    low, high, factor = _value(argv, "-b"), _value(argv, "-e"), _value(argv, "-f")
    if low and high and factor:
        return sweep_sizes(parse_size(low, "-b"), parse_size(high, "-e"), int(factor))
    return []


def _path(launch, argv, all_hcas):
    """(bus bandwidth in bytes/s, latency in s) of the launch's collectives."""
    if _value(argv, "--backend") == "mpi":
        busbw = MPI_NET_BUSBW_GBPS if len(launch.get("hosts") or []) > 1 else MPI_HOST_BUSBW_GBPS
        return busbw * 1e9, MPI_HOST_LATENCY_US * 1e-6
    if "--share-gpu" in argv:
        return EMULATED_BUSBW_GBPS * 1e9, EMULATED_LATENCY_US * 1e-6
    if (launch.get("nranks") or 1) <= 1:
        return ONE_RANK_COPY_GBPS * 1e9, ONE_RANK_LATENCY_US * 1e-6
    if len(launch.get("hosts") or []) > 1:
        binding = (launch.get("env") or {}).get("NCCL_IB_HCA", "").lstrip("=^")
        rails = len([rail for rail in binding.split(",") if rail]) or len(all_hcas or []) or 1
        return rails * INTER_BUSBW_PER_RAIL_GBPS * 1e9, INTER_LATENCY_US * 1e-6
    return INTRA_BUSBW_GBPS * 1e9, INTRA_LATENCY_US * 1e-6


def launch_kind(launch):
    """The start-up class of a launch: its own kind, or for a sanity pass and a TUNING probe its ranks' kind."""
    kind = launch.get("kind")
    if kind in LAUNCH_S:
        return kind
    if len(launch.get("hosts") or []) > 1:
        return "inter"
    return "local" if (launch.get("nranks") or 1) <= 1 else "intra"


def launch_parts(launch, gpus_per_node=0, all_hcas=None):
    """(start-up s, work s) of one launch of a plan (plan/baseline.Planner's launch dicts): the start-up of its kind,
    and what grows with its sizes (its cases; p2p_matrix's GPU pairs). A tool without either (doctor, topo_map) is
    start-up only. The two are calibrated apart (calibrated_eta): a machine can start a launch 10x faster than the
    model and move its bytes slower than it."""
    kind = launch_kind(launch)
    seconds = LAUNCH_S.get(kind, DEFAULT_LAUNCH_S)
    if launch.get("kind") == "p2p" and "-t" in (launch.get("argv") or []):
        return seconds, P2P_CHOSEN_TESTS_WORK_S
    if launch.get("kind") == "p2p":
        return seconds, P2P_S_PER_GPU_PAIR * gpus_per_node * max(0, gpus_per_node - 1)
    if launch.get("kind") not in TWO_PASS_KINDS:
        return seconds, 0.0
    return seconds, modelled_work(work_shape(launch, all_hcas))


def _operations(argv):
    """The collectives one case of a coll_perf launch runs (the module's note: its passes, warm-up and checks); a
    TUNING probe (--tuning-probe) runs each case once, untimed (bench/evidence/tuning_run.cpp run_tuning_probe)."""
    if "--tuning-probe" in argv:
        return TUNING_PROBE_OPS
    iterations, warmup, checks = (int(_value(argv, flag) or COLL_PERF_DEFAULTS[flag]) for flag in ("-n", "-w", "-c"))
    graph = int(_value(argv, "-G") or 0)
    if graph:
        return warmup + iterations + 2 * graph * iterations + checks
    if _value(argv, "--backend") == "mpi":
        return warmup + iterations + MPI_FILL_OPS + checks * MPI_CHECK_OPS
    return warmup + 3 * iterations + checks


def work_shape(launch, all_hcas=None):
    """The modelled work of a coll_perf launch in its two parts: {"overhead_s": every case's CASE_OVERHEAD_S,
    "by_size": {size: the seconds its collectives move bytes at that size}} (launch_parts' work is their sum). The ETA
    calibrates them apart, the second size by size, from what the run's records measured (measured_shape): over
    sockets on the GPU machine's virtual cluster an 8K AllReduce took 90x its modelled time and 32M 26x, while a
    case's overhead was a thirtieth of the model's."""
    argv = [str(word) for word in launch.get("argv") or []]
    operations = _operations(argv)
    collectives = launch.get("collectives") or (_value(argv, "--coll") or "all_reduce").split(",")
    placements = 1 if _value(argv, "--placement") in ("in", "out") else 2
    variants = placements * _count(argv, "-d", ALL_DATATYPES) * _count(argv, "-o", ALL_OPS)
    busbw, latency = _path(launch, argv, all_hcas)
    nranks = launch.get("nranks") or 1
    overhead, by_size = 0.0, {}
    for size in _sizes(launch, argv):
        for collective in collectives:
            overhead += variants * CASE_OVERHEAD_S
            by_size[size] = by_size.get(size, 0.0) + variants * operations * (
                latency + size * bus_factor(collective, nranks) / busbw)
    return {"overhead_s": overhead, "by_size": by_size, "family": path_family(launch, argv)}


def modelled_work(shape):
    """A work_shape's modelled seconds: its cases' overhead and its collectives at every size."""
    return shape["overhead_s"] + sum(shape["by_size"].values())


def path_family(launch, argv):
    """The kind of path a coll_perf launch's bytes take, whose measured/modelled ratios carry from one launch to
    another: "mpi" (host memory, the MPI backend), "emulated" (--share-gpu: ranks time-sliced on one GPU over
    loopback sockets), "device" (one rank: a device copy), "nccl" (NCCL between GPUs, in a host or across hosts)."""
    if _value(argv, "--backend") == "mpi":
        return "mpi"
    if "--share-gpu" in argv:
        return "emulated"
    return "device" if (launch.get("nranks") or 1) <= 1 else "nccl"


def measured_shape(launch, records, work_s, all_hcas=None):
    """What a completed coll_perf launch's records say of its work, against work_shape's model: {"overhead":
    (modelled, measured) s, "by_size": {size: (modelled, measured) s}}. A case's measured seconds are its collectives
    (the model's count of them) at the mean time of its timed iterations (time_us.mean); the rest of the work its
    ranks reported (work_s) was the cases' overhead. None without work_s, or without a timed record of a modelled
    size."""
    if work_s is None:
        return None
    model = work_shape(launch, all_hcas)
    operations = _operations([str(word) for word in launch.get("argv") or []])
    moved = {}
    for record in records or []:
        size = record.get("bytes")
        mean_us = (record.get("time_us") or {}).get("mean") if isinstance(record.get("time_us"), dict) else None
        if size in model["by_size"] and isinstance(mean_us, (int, float)) and mean_us >= 0:
            moved[size] = moved.get(size, 0.0) + operations * mean_us * 1e-6
    if not moved:
        return None
    total = sum(moved.values())
    if total > work_s > 0:
        # The collectives cannot have taken longer than the work they ran in: the timed pass's mean overstates the
        # others (three ranks time-sliced on one GPU: 12.6-13.3 ms per timed 8K all_reduce, 9.0 ms in the batch
        # pass), so each size keeps its share of the work, and the cases' overhead is none.
        moved = {size: seconds * work_s / total for size, seconds in moved.items()}
    return {"overhead": (model["overhead_s"], max(0.0, work_s - sum(moved.values()))),
            "by_size": {size: (model["by_size"][size], seconds) for size, seconds in moved.items()},
            "family": model["family"]}


def launch_seconds(launch, gpus_per_node=0, all_hcas=None):
    """The modelled wall time of one launch of a plan, in seconds: its start-up and its work (launch_parts)."""
    return sum(launch_parts(launch, gpus_per_node, all_hcas))


def timed_phase_model(launch, all_hcas=None):
    """size -> the modelled seconds of one case's timed phase at that size (the slowest collective of the launch):
    what coll_perf's learned deadline would predict there in a healthy run."""
    argv = [str(word) for word in launch.get("argv") or []]
    iterations = int(_value(argv, "-n") or COLL_PERF_DEFAULTS["-n"])
    graph = int(_value(argv, "-G") or 0)
    # The MPI backend times one pass (its batch time is read from the same loop: bench/mpi/mpi_backend.cpp
    # run_timed), NCCL three (timed, batch, gated), a CUDA graph 1 + 2 K.
    passes = (1 + 2 * graph) if graph else (1 if _value(argv, "--backend") == "mpi" else 3)
    collectives = launch.get("collectives") or (_value(argv, "--coll") or "all_reduce").split(",")
    busbw, latency = _path(launch, argv, all_hcas)
    nranks = launch.get("nranks") or 1
    factor = max(bus_factor(collective, nranks) for collective in collectives)
    return lambda size: passes * iterations * (latency + size * factor / busbw)


def hang_cost(launches, all_hcas=None):
    """What one hang costs at most in this plan: (seconds, launch name) over the launches that report progress
    (coll_perf, p2p_matrix), and the largest fixed bound of the others (the doctor, topo_map), or None."""
    worst = (0.0, None)
    fixed = None
    for launch in launches:
        if "--progress" not in [str(word) for word in launch.get("argv") or []]:
            bound = hang_cost_s(launch, None)
            fixed = bound if fixed is None else max(fixed, bound)
            continue
        cost = hang_cost_s(launch, timed_phase_model(launch, all_hcas))
        if cost > worst[0]:
            worst = (cost, launch.get("name"))
    return worst[0], worst[1], fixed


def plan_estimate(launches, gpus_per_node=0, all_hcas=None):
    """{"launches": count, "seconds": total, "by_kind": {kind: [count, seconds]}}: the launches run one after the
    other, so the plan's wall time is their sum."""
    by_kind = {}
    total = 0.0
    for launch in launches:
        seconds = launch_seconds(launch, gpus_per_node, all_hcas)
        entry = by_kind.setdefault(launch.get("kind") or "other", [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
        total += seconds
    return {"launches": len(launches), "seconds": total, "by_kind": by_kind}


# The run's own path check after a launch across hosts failed as a dead path fails (execute/doctor.recheck_paths):
# what it takes, not its bound - each host's probe, a dead path 2 s of echoes (4.8 s for 2 hosts x 2 rails dead on
# the 2-core VM). The ETA adds it while a check is pending.
PATH_CHECK_S = 5.0


# The run's end after its last launch (render/report.build_report): report.md, verdict.json and, with matplotlib, the
# plots. On the H100 the default runs ended 1.4-3.4 s after their last launch's line (3 to 8 size-sweep plots; the
# one-GPU baseline 2.2-3.4 s, docs/data/eta_gpu_2026-12-06); on the 2-core VM without matplotlib 0.0-0.2 s.
REPORT_S = 0.2
REPORT_PLOTS_S = 2.0


def report_seconds(plots):
    """What the ETA adds for the report at the run's end: with plots (matplotlib present) or without."""
    return REPORT_S + (REPORT_PLOTS_S if plots else 0.0)


def _ratio(pairs):
    """sum(measured) / sum(modelled) over (modelled, measured) pairs, None when nothing was modelled."""
    modelled = sum(model for model, _ in pairs)
    return sum(seconds for _, seconds in pairs) / modelled if modelled > 0 else None


def calibrated_eta(measured, remaining):
    """The time left of a running plan, the model calibrated by the run's own launches: measured [(class, modelled
    start-up s, modelled work s, measured s[, measured work s[, measured_shape]])] of the launches that completed (a
    launch that hung or failed took its deadline, not its work, and says nothing of this machine's speed), remaining
    [(class, start-up s, work s[, work_shape])] of those still to run (one left out by the doctor or a path check costs
    nothing and is not among them). Where a class's launches measured their collectives size by size (records), a
    remaining launch of it with a work_shape has its work predicted size by size (_shaped_work): one ratio for a
    launch's whole work misread sanity (8K-32M, 3 sizes, its model mostly per-case overhead) for the points after it
    (14 sizes) 3x over NCCL's sockets. Once any launch measured its sizes, a launch of a class without records of its
    own takes the pooled records of its path family (path_family: the intra points of a GPU-less run take sanity's
    across hosts, both host memory), else its modelled work as it stands: one GPU's device copies (the one-GPU
    baseline's sanity and local points, 0.04-0.05 of their model on the H100) said the emulated ranks' check would take
    a third of its time, and the run's whole work ratio (sanity's over sockets, 3.1x its model) put the one-rank intra
    points of the H100's virtual cluster at 3x theirs. What follows holds for the rest.
    Classes are launch_kind's (doctor, topology, p2p, local, intra, inter). The measured work is what the launch's
    ranks reported (execute/progress.LaunchProgress.work_s: the first case phase entered to the last left), None
    where it reported nothing; the rest of its wall time was its start-up and teardown.

    Start-up and work are scaled apart (launch_parts), each class by its own launches, else by every launch's:
      start-up ratio  measured start-up / modelled start-up, over the launches whose start-up is known: those that are
                      start-up only (doctor, topo_map) and those that reported their work (wall - work);
      work ratio      measured work / modelled work, over the launches with work; a launch that reported none: its
                      wall less its class's scaled start-up.
    A launch's start-up is its own to measure, not the doctor's to predict: on the 2-core VM the doctor starts in
    0.3-0.5 s, sanity (4 ranks over 2 hosts, MPI_Init's wire-up) in 0.3-2.6 s, and sanity's work (3.6 s modelled)
    read from its wall less a start-up scaled from the doctor's was 1.7x its later launches' in one run (ETA +89% on
    its line). A single ratio per launch misread the first launches too (the doctor starts 16x faster than modelled
    while the MPI backend moves its bytes 1.2x slower). Without any start-up known (a resumed run, nothing reported):
    one ratio per launch, its class's else the run's (the earlier model). A fixed model errs 2.4x between machines
    (2.6x high on the H200's host, 0.8x on a slow 2-core box); the machine's own launches do not. None before any
    launch completed."""
    if not measured:
        return None
    tables = _size_tables(measured)
    if tables:
        # Once the run's records measured collectives size by size, a launch with a work_shape has its work
        # predicted from its class's table, else its path family's (_shaped_work), else it is its model; its start-up
        # and the launches without a work_shape as below.
        shaped_work, unshaped = 0.0, []
        by_family = {}
        for (_kind, family), table in tables.items():
            by_family.setdefault(family, []).append(table)
        family_tables = {family: _pooled_table(items) for family, items in by_family.items()}
        for item in remaining:
            shape = item[3] if len(item) > 3 else None
            if shape:
                family = shape.get("family")
                table = tables.get((item[0], family)) or family_tables.get(family)
                shaped_work += _shaped_work(shape, table) if table else modelled_work(shape)
                unshaped.append((item[0], item[1], 0.0))  # its start-up is still calibrated as below
            else:
                unshaped.append(tuple(item[:3]))
        left = calibrated_eta([tuple(item[:5]) for item in measured], unshaped)
        return None if left is None else left + shaped_work
    rows = [tuple(item[:5]) + (None,) * (5 - len(item[:5])) for item in measured]
    remaining = [tuple(item[:3]) for item in remaining]
    overall = _ratio([(start + work, seconds) for _, start, work, seconds, _ in rows])
    if overall is None:
        return None
    by_class = {}
    for row in rows:
        by_class.setdefault(row[0], []).append(row)
    whole = {kind: _ratio([(start + work, seconds) for _, start, work, seconds, _ in items])
             for kind, items in by_class.items()}

    def start_up(row):
        """(modelled, measured) start-up of a launch where it is known, else None."""
        _, start, work, seconds, work_s = row
        if work <= 0:
            return start, seconds
        if work_s is not None:
            return start, max(0.0, seconds - work_s)
        return None

    def start_ratio(items):
        return _ratio([pair for pair in map(start_up, items) if pair is not None])

    run_start = start_ratio(rows)
    class_start = {kind: start_ratio(items) for kind, items in by_class.items()}

    if run_start is None:
        return sum((start + work) * _own_or(whole, kind, overall) for kind, start, work in remaining)

    def work_ratio(items):
        pairs = []
        for kind, start, work, seconds, work_s in items:
            if work <= 0:
                continue
            if work_s is None:
                work_s = max(0.0, seconds - _own_or(class_start, kind, run_start) * start)
            pairs.append((work, work_s))
        return _ratio(pairs)

    run_work = work_ratio(rows)
    class_work = {kind: work_ratio(items) for kind, items in by_class.items()}
    total = 0.0
    for kind, start, work in remaining:
        ratio = _own_or(class_work, kind, run_work)
        total += start * _own_or(class_start, kind, run_start) + work * (
            _own_or(whole, kind, overall) if ratio is None else ratio)
    return total


def _size_tables(measured):
    """{class: {"overhead": (modelled, measured), "by_size": {size: (modelled, measured)}}} summed over the class's
    completed launches whose records measured their work (measured_shape: a measured row's sixth item)."""
    tables = {}
    for item in measured:
        shape = item[5] if len(item) > 5 else None
        if shape:
            _add_measured(tables.setdefault((item[0], shape.get("family")), _empty_table()), shape)
    return tables


def _pooled_table(tables):
    """Tables summed: a path family's, for a class that has measured nothing of its own."""
    pooled = _empty_table()
    for table in tables:
        _add_measured(pooled, table)
    return pooled


def _empty_table():
    return {"overhead": (0.0, 0.0), "by_size": {}}


def _add_measured(table, measured):
    """Adds a measured_shape's (or a table's) (modelled, measured) pairs into table."""
    table["overhead"] = tuple(a + b for a, b in zip(table["overhead"], measured["overhead"]))
    for size, pair in measured["by_size"].items():
        table["by_size"][size] = tuple(a + b for a, b in zip(table["by_size"].get(size, (0.0, 0.0)), pair))


def _shaped_work(model, table):
    """A launch's work (work_shape's model) predicted from its class's measured table: its cases' overhead scaled by
    the class's measured overhead over its modelled one, its collectives size by size by the measured/modelled ratio
    the class measured there (_size_ratio: between two measured sizes, interpolated)."""
    modelled_overhead, measured_overhead = table["overhead"]
    work = model["overhead_s"] * (measured_overhead / modelled_overhead if modelled_overhead > 0 else 1.0)
    ratios = {size: measured / modelled for size, (modelled, measured) in table["by_size"].items()
              if modelled > 0 and size > 0}
    for size, seconds in model["by_size"].items():
        if ratios and size > 0:
            seconds *= _size_ratio(ratios, size)
        work += seconds
    return work


def _size_ratio(ratios, size):
    """The measured/modelled ratio at `size` from those measured at other sizes ({size: ratio}): the measured size's
    own; between two measured sizes, geometric in log2(size) (a ratio that falls 7x from 512K to 32M falls 1.9x by
    2M); outside them, the nearest one's. Sanity measures 3 sizes (8K, 512K, 32M) and an inter point 14: with the
    nearest measured size's ratio, three ranks time-sliced on one GPU (a flat 13 ms per all_reduce from 8K to 8M over
    NCCL's sockets on the H100, while the model grows with the bytes) had 1M-4M predicted at 512K's ratio, up to 2.8x
    their time, and the three-node ETA read +36% at sanity's line (docs/bring-up.md)."""
    if size in ratios:
        return ratios[size]
    below = [known for known in ratios if known < size]
    above = [known for known in ratios if known > size]
    if not below:
        return ratios[min(above)]
    if not above:
        return ratios[max(below)]
    low, high = max(below), min(above)
    if ratios[low] <= 0 or ratios[high] <= 0:
        return ratios[low if math.log2(size / low) <= math.log2(high / size) else high]
    weight = math.log2(size / low) / math.log2(high / low)
    return math.exp((1.0 - weight) * math.log(ratios[low]) + weight * math.log(ratios[high]))


def _own_or(ratios, kind, fallback):
    """A class's own ratio, else the fallback (the run's) where the class has none (no launch, or nothing modelled)."""
    ratio = ratios.get(kind)
    return fallback if ratio is None else ratio


def format_duration(seconds):
    return f"{seconds:.0f} s" + (f" ({seconds / 60:.1f} min)" if seconds >= 60 else "")


def estimate_line(launches, inputs):
    """The plan's one line: the launch count, the expected wall time and where it goes."""
    found = plan_estimate(launches, inputs.get("gpus_per_node") or 0, inputs.get("hcas"))
    parts = ", ".join(f"{count} {kind} {seconds:.0f} s" for kind, (count, seconds) in
                      sorted(found["by_kind"].items(), key=lambda item: -item[1][1]))
    line = (f"{found['launches']} launches, expected wall time {format_duration(found['seconds'])} ({parts}; "
            "modelled from sizes, iterations, ranks and backend: plan/estimate.py)")
    cost, where, fixed = hang_cost(launches, inputs.get("hcas"))
    if where:
        line += (f"; one hang costs at most {format_duration(cost)} (at {where}: its largest deadline learned from "
                 "the run, + the runner's grace and stop: plan/bounds.py)")
    if fixed:
        line += f"; the doctor and topology launches have fixed bounds up to {fixed:.0f} s"
    return line
