"""How long a launch may take before it counts as hung: coll_perf's per-case watchdog (-T) and the runner's
bound on the whole launch, both derived from the exact command the plan runs (sizes, iterations, collectives,
ranks, backend), so that nothing hangs by default and `--timeout` / `--launch-timeout` are only overrides.

Both are upper bounds for a healthy run, deliberately generous: a slow but working rail must be measured, not
killed (the slowest rail seen carrying a run moved 0.025-0.05 GB/s, a rate-limited socket rail). The formula:

  one collective of S bytes  op_s(S) = STEP_S[backend] x 2 x ranks + TRAFFIC_FACTOR x S / SLOWEST_RATE
      (a ring's 2(ranks-1) steps, each at most STEP_S; every rank sends and receives at most 2 x S)
  the watchdog (-T)          PHASE_FLOOR_S[backend] + max(TIMED_PASSES x n x graph replays x agg, w) x op_s(largest S)
      (-T bounds each phase of a case, and the timed phase of the largest size is the longest one)
  the launch bound           LAUNCH_STARTUP_S + sum over cases of (TIMED_PASSES x n x replays x agg + w + c) x op_s(S)
                             + the watchdog + ABORT_GRACE_S
      (every case at the slowest rate, plus one full watchdog period and the abort, so the watchdog, which
      names the case, always acts before the launch bound does)

The tools that are not coll_perf have fixed bounds (TOOL_BOUND_S): their work does not scale with the plan.

Both are now ceilings, not what ends a hang. coll_perf runs with --learn-deadlines (bench/core/deadlines.cpp): each
phase's deadline comes from the run's own smaller sizes, LEARNED_FLOOR_S + LEARNED_SLACK x the prediction (+ the
connect floor until the communicator's first collective), capped by -T. With --progress, coll_perf and p2p_matrix
report every phase and its deadline to the runner (execute/progress.py), which stops a launch that reports
nothing past the latest deadline plus a grace: a process frozen whole is watched from outside it. `hang_cost_s`
is what one hang costs at most, for the plan to print beside its healthy estimate.
"""

from ..base.errors import UsageError
from ..base.values import parse_size, sweep_sizes

# Transfer rate below which a run counts as hung: 10 MB/s, several times below the slowest rail seen carrying a
# measurement (a rate-limited socket rail at 0.025-0.05 GB/s).
SLOWEST_RATE_BYTES_PER_S = 10e6
# Bytes one rank moves for an S-byte collective, at most: all_reduce's 2(n-1)/n x S, the others' (n-1)/n x S.
TRAFFIC_FACTOR = 2
# One ring step's allowance, seconds: NCCL's a few microseconds on GPUs, but socket transports and emulated ranks
# are slower; the MPI backend on host memory runs oversubscribed, busy-polling ranks on a loaded host, where one
# step can wait several scheduler time slices.
STEP_S = {"nccl": 0.002, "mpi": 0.02}
# The timed phase runs the iterations up to three times: per-iteration timing, the batch and the gated pass.
TIMED_PASSES = 3
# Every phase may also set up connections, and coll_perf's start-up (MPI wire-up, the backend's initialisation) is
# bounded by the same -T: NCCL connects lazily at a case's first warm-up and initialises communicators of up to
# thousands of ranks; the MPI backend's TCP transport connects a few host-memory ranks on first use (under 2 s on
# the loaded 2-core virtual cluster), so its floor is lower: a hung pair there ends in about half a minute, not
# one and a half.
PHASE_FLOOR_S = {"nccl": 60, "mpi": 20}
# Before the first case: the launcher reaching every host, MPI wire-up, NCCL's communicator initialisation,
# coll_perf's startup agreement; after the last one: the evidence gathering and the writes.
LAUNCH_STARTUP_S = 120
# After the watchdog fires: the writer's grace (coll_perf waits up to 10 s on ranks other than 0 so rank 0 can
# write -J), MPI_Abort reaching every host and the launcher's teardown on a loaded machine.
ABORT_GRACE_S = 60
# Launches of tools whose work is fixed, not planned: the doctor (sysfs, NVML, the kernel log, and on several
# hosts its path MTU probes), topo_map, the P2P matrix (every GPU pair, several sizes and methods).
TOOL_BOUND_S = {"doctor": 100, "topology": 100, "p2p": 1800}
# The runner's own SIGTERM -> SIGKILL grace is added to whatever bound ends a launch (execute/runner.py).

# coll_perf's learned deadlines (bench/core/deadlines.cpp, kept equal by tests/scripts/test_progress.py): every phase
# at least the floor (a loaded host's scheduler), slack x the prediction from the run's smaller sizes, and until the
# communicator's first collective completes the connect floor at the launch's rank count.
LEARNED_FLOOR_S = 20
LEARNED_SLACK = 10
CONNECT_FLOOR_S = {"nccl": 40, "mpi": 20}
CONNECT_S_PER_RANK = 0.02
# Its worst case for the first case of a launch (nothing measured before it): every byte at 1 MB/s (8 Mbit/s, below
# the slow rails a bring-up must still measure), each ring step at most this long, whatever the backend.
LEARNED_FIRST_RATE_BYTES_PER_S = 1e6
LEARNED_STEP_S = 0.02
# coll_perf's start-up with --learn-deadlines: the floor plus NCCL's connect floor at the rank count.
# The runner's watch (execute/progress.py): after the latest deadline a launch announced, this grace (coll_perf's own
# watchdog fires at that deadline; its ranks other than 0 wait 10 s before MPI_Abort; the launcher tears down), then
# SIGTERM to the launch's process group and SIGKILL STOP_GRACE_S later.
PROGRESS_GRACE_S = 25
STOP_GRACE_S = 10
# coll_perf --progress after its last case (evidence gathering and writes: kFinishAllowanceSeconds in coll_perf.cpp).
FINISH_ALLOWANCE_S = 45
# p2p_matrix --progress: one measurement (a pair or GPU at one size) at most this long (bench/p2p/engine.cpp).
P2P_MEASUREMENT_DEADLINE_S = 60

# coll_perf's defaults for flags a command leaves out (coll_perf --help).
COLL_PERF_DEFAULTS = {"-n": "20", "-w": "1", "-c": "1", "-b": "32M", "-e": "32M", "-G": "0", "-m": "1"}
# coll_perf's default collectives and placements when --coll / --placement are left out.
DEFAULT_COLLECTIVE_COUNT = 4
PLACEMENTS = {"both": 2, "in": 1, "out": 1}


def coll_perf_index(argv):
    """Where coll_perf's own arguments start in a launch's argv (after the launcher prefix), or None."""
    for index, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == "coll_perf":
            return index
    return None


def _flag(args, *names, default=None):
    for index, word in enumerate(args[:-1]):
        if word in names:
            return args[index + 1]
    return default


def _count(text):
    return len([part for part in str(text).split(",") if part.strip()])


def case_sizes(args):
    """The sizes (bytes) a coll_perf command sweeps: --sizes, else -b/-e with -f (or -i)."""
    listed = _flag(args, "--sizes")
    if listed:
        return [parse_size(part, "--sizes") for part in listed.split(",") if part.strip()]
    low = parse_size(_flag(args, "-b", "--minbytes", default=COLL_PERF_DEFAULTS["-b"]), "-b")
    high = parse_size(_flag(args, "-e", "--maxbytes", default=COLL_PERF_DEFAULTS["-e"]), "-e")
    factor = _flag(args, "-f", "--stepfactor")
    if factor:
        return sweep_sizes(low, high, int(factor))
    step = parse_size(_flag(args, "-i", "--stepbytes", default="1M"), "-i")
    return list(range(low, high + 1, max(1, step)))


def bounded_sizes(args):
    """The sizes a bound is computed for: the command's own, else coll_perf's default -e where they do not parse
    (coll_perf reports that itself)."""
    try:
        return case_sizes(args) or [1]
    except (UsageError, ValueError):
        return [parse_size(COLL_PERF_DEFAULTS["-e"], "-e")]


def op_seconds(size, nranks, backend):
    return STEP_S[backend] * 2 * max(1, nranks) + TRAFFIC_FACTOR * size / SLOWEST_RATE_BYTES_PER_S


def coll_perf_bounds(args, nranks):
    """(watchdog_s, launch_bound_s) of one coll_perf command (its own arguments, without the launcher's), whole
    seconds. A -T already in the command (--timeout) is its watchdog."""
    backend = "mpi" if _flag(args, "--backend") == "mpi" else "nccl"
    sizes = bounded_sizes(args)
    iterations = int(_flag(args, "-n", "--iters", default=COLL_PERF_DEFAULTS["-n"]))
    warmup = int(_flag(args, "-w", "--warmup_iters", default=COLL_PERF_DEFAULTS["-w"]))
    checks = int(_flag(args, "-c", "--check", default=COLL_PERF_DEFAULTS["-c"]))
    replays = max(1, int(_flag(args, "-G", "--cudagraph", default=COLL_PERF_DEFAULTS["-G"])))
    aggregated = max(1, int(_flag(args, "-m", "--agg_iters", default=COLL_PERF_DEFAULTS["-m"])))
    collectives = _flag(args, "--coll")
    cases_per_size = (_count(collectives) if collectives else DEFAULT_COLLECTIVE_COUNT) * \
        PLACEMENTS.get(_flag(args, "--placement", default="both"), 2) * \
        _count(_flag(args, "-d", "--datatype", default="float")) * _count(_flag(args, "-o", "--op", default="sum"))
    timed_ops = TIMED_PASSES * iterations * replays * aggregated
    given = _flag(args, "-T", "--timeout")
    watchdog = float(given) if given else PHASE_FLOOR_S[backend] + max(timed_ops, warmup, 1) * op_seconds(max(sizes), nranks,
                                                                                                   backend)
    work = sum((timed_ops + warmup + checks) * op_seconds(size, nranks, backend) for size in sizes) * cases_per_size
    return int(round(watchdog)), int(round(LAUNCH_STARTUP_S + work + watchdog + ABORT_GRACE_S))


def launch_bounds(kind, argv, nranks):
    """{"watchdog_s", "bound_s"} of one planned launch: coll_perf's derived from its command (coll_perf_bounds),
    the other tools' fixed (TOOL_BOUND_S); watchdog_s is None where there is no coll_perf."""
    index = coll_perf_index(argv)
    if index is not None:
        watchdog, bound = coll_perf_bounds(argv[index + 1:], nranks)
        return {"watchdog_s": watchdog, "bound_s": bound}
    return {"watchdog_s": None, "bound_s": TOOL_BOUND_S.get(kind, max(TOOL_BOUND_S.values()))}


def with_watchdog(argv, watchdog_s):
    """argv with coll_perf's -T set to watchdog_s (with --learn-deadlines: the ceiling of the learned deadlines),
    unless the command already has one (--timeout given)."""
    index = coll_perf_index(argv)
    if index is None or watchdog_s is None or "-T" in argv[index + 1:] or "--timeout" in argv[index + 1:]:
        return list(argv)
    return argv[:index + 1] + ["-T", str(watchdog_s)] + argv[index + 1:]


def startup_allowance_s(nranks):
    return LEARNED_FLOOR_S + CONNECT_FLOOR_S["nccl"] + CONNECT_S_PER_RANK * max(1, nranks)


def largest_learned_deadline_s(args, nranks, phase_seconds):
    """The largest deadline coll_perf's learned watchdog sets in a healthy run of one command: the start-up's, the
    first collective's (the connect floor) and the largest size's timed phase, whose prediction is
    `phase_seconds(size)` (the estimate's model of that phase), times the slack. -T caps each one."""
    backend = "mpi" if _flag(args, "--backend") == "mpi" else "nccl"
    sizes = bounded_sizes(args)
    warmup = max(1, int(_flag(args, "-w", "--warmup_iters", default=COLL_PERF_DEFAULTS["-w"])))
    first_call = LEARNED_STEP_S * 2 * max(1, nranks) + TRAFFIC_FACTOR * min(sizes) / LEARNED_FIRST_RATE_BYTES_PER_S
    candidates = [startup_allowance_s(nranks), FINISH_ALLOWANCE_S,
                  LEARNED_FLOOR_S + CONNECT_FLOOR_S[backend] + CONNECT_S_PER_RANK * max(1, nranks)
                  + warmup * first_call,
                  LEARNED_FLOOR_S + LEARNED_SLACK * phase_seconds(max(sizes))]
    ceiling = _flag(args, "-T", "--timeout")
    if ceiling:
        candidates = [min(float(ceiling), value) for value in candidates]
    return max(candidates)


def hang_cost_s(launch, phase_seconds):
    """What one hang of this launch costs at most: its largest deadline, the runner's grace after it and the stop
    (SIGTERM, then SIGKILL after STOP_GRACE_S). Without progress reports (the doctor, topo_map): its bound."""
    argv = [str(word) for word in launch.get("argv") or []]
    if "--progress" not in argv:
        return float(launch.get("bound_s") or TOOL_BOUND_S.get(launch.get("kind"), max(TOOL_BOUND_S.values())))
    index = coll_perf_index(argv)
    if index is None:
        deadline = P2P_MEASUREMENT_DEADLINE_S
    else:
        deadline = largest_learned_deadline_s(argv[index + 1:], launch.get("nranks") or 1, phase_seconds)
    return deadline + PROGRESS_GRACE_S + STOP_GRACE_S
