"""The smoke's comparable measurements, defined once: `smoke` runs them, and the GPU `baseline` runs the very
same launches under the same point names, so that every GPU baseline is a smoke reference with no extra step
(model/smoke_reference.py reads them back; `smoke --against` and `compare` judge them with the noise rule).

What CI needs to see move, in about half a minute on one GPU:
  smoke.copy        p2p_matrix: the GPU's local copy bandwidth (copy engine and SM kernel), host-to-device and
                    device-to-host (pinned, NUMA-local), at SMOKE_COPY_BYTES; every GPU of the node.
  smoke.collective  coll_perf, one rank on GPU 0, --backend nccl (Planner.told_backend): AllReduce at SMOKE_COLLECTIVE_SIZES, where the
                    GPU's own time (copies and kernels), not the host's launch rate, dominates.
  smoke.graph       coll_perf, one rank, --backend nccl, CUDA-graph mode (-G SMOKE_GRAPH_LAUNCHES): AllReduce of
                    SMOKE_GRAPH_BYTES, the GPU time per collective in a replayed graph: graph-mode launch latency.
Each runs SMOKE_REPEATS times as separate launches, interleaved (rep1 of each, then rep2, ...): a run's value of a
case is the geometric mean of its launches; with more than one, their scatter is judged against the reference's
(rules/smoke_bands.py: unstable). The coll_perf launches also write their per-iteration times (--samples): the
unstable finding's samples.

One part can run alone (smoke --parts): PARTS names them. The slowdown test knob (smoke --inject-slowdown, tests only)
is put into the environment of the chosen part's launches alone (injection_env).
"""

from ..base.environment import TEST_KNOB_VARIABLES
from ..base.values import format_size, sweep_sizes
from ..model.smoke_reference import SAMPLES_SUFFIX, SMOKE_COPY_DIR, SMOKE_COPY_POINT


# One launch of each part a run. A launch costs 1-2 s of process start (CUDA, NCCL) and milliseconds of measuring
# (H100, 2026-12-05), so the time goes into samples inside a launch, where they are cheap, and the run-to-run spread
# is measured by the reference's runs (smoke --capture), not by repeats inside a run.
SMOKE_REPEATS = 1
SMOKE_COLLECTIVE_POINT = "smoke.collective"
SMOKE_GRAPH_POINT = "smoke.graph"
SMOKE_POINTS = (SMOKE_COPY_POINT, SMOKE_COLLECTIVE_POINT, SMOKE_GRAPH_POINT)
SMOKE_COPY_TESTS = ("device_local_copy_ce", "device_local_copy_sm", "h2d_ce_local_numa", "d2h_ce_local_numa")
# 64 MiB: tens of microseconds per copy within an H200 (well above the launch cost), a few milliseconds over PCIe.
SMOKE_COPY_BYTES = 64 << 20
# 160 samples a copy launch, best of them judged: a host-to-device copy of 64 MiB takes ~1.2 ms, so they cost ~0.4 s
# of the host-link copies of a GPU, those of the ~45 us local copies nothing. The samples are the unstable finding's
# evidence of interference that spares most copies: beside a load that copied host-to-device for 5% of every 100 ms,
# 3 of 40 samples were hit (up to +97%; H100, 2026-12-06), too few to tell from chance (P 7e-4); 160 samples give
# such a load about four times the hits.
SMOKE_COPY_ITERATIONS = 160
SMOKE_COPY_WARMUP = 2
# 16M, 32M, 64M: a one-rank collective below about 16 MB is bound by the host's launch rate on an H200
# (docs/results.md); the gated GPU time judged here is the GPU's at every size, and these sizes keep it so.
SMOKE_COLLECTIVE_SIZES = (16 << 20, 64 << 20, 2)
SMOKE_GRAPH_SIZES = (8 << 10, 8 << 10, 2)  # 8K alone
SMOKE_GRAPH_LAUNCHES = 10
# 200 iterations for the eager sizes: their gated time spans 3-10 ms instead of 0.7-2.4 ms (a 16M AllReduce takes
# ~14 us on an H100), for ~50 ms more of a 2 s launch; 200 is the most the blocker holds (kMaxGatedIterations). The
# graph's 50 iterations, replayed 10 times, already time 500 collectives.
SMOKE_COLL_ITERATIONS = 200
SMOKE_GRAPH_ITERATIONS = 50
SMOKE_COLL_WARMUP = 5
# The one-rank points: (point, (-b, -e, -f), iterations, extra coll_perf flags).
SMOKE_COLL_POINTS = ((SMOKE_COLLECTIVE_POINT, SMOKE_COLLECTIVE_SIZES, SMOKE_COLL_ITERATIONS, []),
                     (SMOKE_GRAPH_POINT, SMOKE_GRAPH_SIZES, SMOKE_GRAPH_ITERATIONS, ["-G", str(SMOKE_GRAPH_LAUNCHES)]))
# The parts `smoke --parts` names: the timed ones (their points) and the rest of a full smoke.
TIMED_PARTS = {"copy": SMOKE_COPY_POINT, "collective": SMOKE_COLLECTIVE_POINT, "graph": SMOKE_GRAPH_POINT}
PARTS = ("topology", "copy", "collective", "graph", "emulated")
# The slowdown test knob (bench/core/slowdown_injection.hpp): the tools honour it only with the testing flag beside it.
INJECT_VARIABLE, TESTING_VARIABLE = TEST_KNOB_VARIABLES


def injection_env(inject, point):
    """The environment of one launch of `point`: the knob for the injected part (inject: (part, pct) or None),
    nothing otherwise."""
    if inject and TIMED_PARTS[inject[0]] == point:
        return {INJECT_VARIABLE: f"{inject[1]:g}", TESTING_VARIABLE: "1"}
    return {}


def copy_launch(planner, host, repeat, env=None):
    out = planner.path(SMOKE_COPY_DIR, f"{SMOKE_COPY_POINT}.rep{repeat}.json")
    argv = [planner.tool("p2p_matrix"), "-t", ",".join(SMOKE_COPY_TESTS), "-b", format_size(SMOKE_COPY_BYTES),
            "-n", str(SMOKE_COPY_ITERATIONS), "-w", str(SMOKE_COPY_WARMUP), "-q", "--json", out]
    return planner.launch(f"{SMOKE_COPY_POINT}.rep{repeat}", "p2p", argv, hosts=[host], outputs=[out], env=env)


def collective_launch(planner, host, point, sizes, iterations, extra, repeat, env=None):
    name = f"{point}.rep{repeat}"
    argv = planner.coll_args(name, sizes=sizes, collectives=["all_reduce"], iterations=iterations,
                             warmup=SMOKE_COLL_WARMUP) + ["--placement", "out"] + extra
    if planner.has_flag("--samples"):
        argv += ["--samples", planner.path(SMOKE_COPY_DIR, name + SAMPLES_SUFFIX)]
    return planner.launch(name, "local", argv, 1, [host], base_point=point, repeat=repeat, sizes=sweep_sizes(*sizes),
                          collectives=["all_reduce"], env=env)


def smoke_reference_launches(planner, host, parts=tuple(TIMED_PARTS), inject=None):
    """The smoke's comparable launches for one GPU node, in run order: repeat 1 of every point, then repeat 2, ...
    (kind p2p for the copies; kind local for the collectives, whose records go to cases.jsonl as the points
    smoke.collective.repN and smoke.graph.repN). parts: the timed parts to run (TIMED_PARTS' names); inject:
    (part, pct) of the slowdown test knob, or None."""
    launches = []
    for repeat in range(1, SMOKE_REPEATS + 1):
        if "copy" in parts:
            launches.append(copy_launch(planner, host, repeat, injection_env(inject, SMOKE_COPY_POINT)))
        launches += [collective_launch(planner, host, point, sizes, iterations, extra, repeat,
                                       injection_env(inject, point))
                     for point, sizes, iterations, extra in SMOKE_COLL_POINTS if point.split(".", 1)[1] in parts]
    return launches
