"""The launches of `cclbench screen`: each job of plan.screen_schedule as an exact argument list.

A job is plain data: {"name", "kind": doctor|intra|loopback|pair|retest|repeat|rail, "hosts", "argv", "env",
"output" (the -J document or the doctor's JSON), "round", "rail"}. Names are stable functions of the job
(stage, round, hosts, rail), so `screen --resume` finds the same job under the same name.

A job also keeps the parts its argv is made of, for plan/screen_batches.py, which starts many jobs of one shape as
one launch (each job a group of it): "launch" ({"ranks_per_host", "oversubscribe", "mpirun_args": the job's own
launcher arguments or None}), "tool" (the program and the arguments every job of its shape shares) and "own" (the
words that are the job's alone: coll_perf's --point, -J and --nccl-log-dir, the doctor's --as-host and --json).
argv = the launcher's prefix for the job's hosts + tool + own.

Backends: NCCL where the nodes have GPUs (gpus_per_node ranks a node); the MPI backend (host memory, two
ranks on the node for the intra-node point, one a node for a pair) on GPU-less hosts, where there is no
loopback point: the MPI backend has no NCCL_IB_HCA to pin a rail with.

Rail points (kind rail): one pair, one rail alone, judged at the large size (model.rail_binding: NCCL_IB_HCA for RDMA
rails, NCCL_SOCKET_IFNAME for a socket cluster's interfaces, the TCP BTL's interface for the MPI backend), so that
a rail at a fraction of its sibling shows (rules.screen_rails.judge_rail_points).
"""

import os

from ..model import launcher
from ..model.rail_binding import mpi_rail_env, mpirun_args_for_interface, nccl_rail_env
from ..plan.bounds import coll_perf_bounds
from ..plan.doctor_point import cclbench_script, doctor_argv

# The MPI backend's intra-node point: two ranks on the node, through its shared memory.
MPI_INTRA_RANKS = 2
COLLECTIVE = "all_reduce"


def backend(inputs):
    return "nccl" if inputs["gpus_per_node"] else "mpi"


def _rail_label(rail):
    return rail.replace(":", "p")


def _tool(inputs):
    return os.path.join(inputs["bin_dir"], "coll_perf")


def _coll_argv(inputs, run_dir, name):
    """(the arguments every coll_perf job of a shape shares, the job's own: --point, -J, --nccl-log-dir)."""
    flags = inputs.get("coll_perf_flags")
    # Both sizes in every job, the rail points too (whose small size is not judged): coll_perf runs the small one
    # first, and its learned watchdog predicts the large one from it. A launch whose first case is the large size
    # has only the worst case to go by (every byte at 1 MB/s: 64M's warm-ups alone 11 minutes), so a hung rail
    # point would cost its -T, not a minute and a half (plan/bounds.hang_cost_s).
    sizes = f"{inputs['large_bytes']},{inputs['small_bytes']}"
    argv = [_tool(inputs), "--backend", backend(inputs), "--coll", COLLECTIVE, "--placement", "out",
            "--sizes", sizes, "-n", str(inputs["iterations"]),
            "-w", str(inputs["warmup"]), "-c", "1", "--quiet"]
    # Nothing hangs by default: without --timeout, coll_perf's watchdog comes from the job's own sizes,
    # iterations and backend (plan/bounds.py), for a pair's ranks, the most a screen job has.
    argv += ["-T", str(inputs.get("timeout_s") or coll_perf_bounds(argv[1:], 2 * (inputs["gpus_per_node"] or 1))[0])]
    # Learned deadlines under that ceiling (bench/core/deadlines.cpp): the connect floor, then each size from the
    # ones measured before it.
    # With their progress reported, a job whose partner froze whole (no watchdog left there) is stopped past its
    # deadline (execute/screen.py), not at --launch-timeout.
    argv += [flag for flag in ("--learn-deadlines", "--progress") if flags is None or flag in flags]
    netdevs = inputs.get("netdevs") or []
    if netdevs:
        # The rail counters per host: coll_perf --netdevs where it has it, else every interface (--all-netdevs,
        # so that a rail that moved nothing is listed with 0 rather than left out) and the rails picked here.
        if flags is None or "--netdevs" in flags:
            argv += ["--netdevs", ",".join(netdevs)]
        elif "--all-netdevs" in flags:
            argv.append("--all-netdevs")
    if inputs.get("sysfs_root"):
        argv += ["--sysfs-root", inputs["sysfs_root"]]
    own = ["--point", name, "-J", os.path.join(run_dir, "raw", name + ".json")]
    if backend(inputs) == "nccl":
        own += ["--nccl-log-dir", os.path.join(run_dir, "nccl", name)]
    return argv, own


def _launched(inputs, name, kind, hosts, ranks_per_host, env, tool, own, output, round_number=None, rail=None,
              oversubscribe=False, mpirun_args=None):
    """A job: its launch on its hosts (ranks_per_host each) with env, then tool + own."""
    bound = inputs if mpirun_args is None else dict(inputs, mpirun_args=mpirun_args)
    spec = ",".join(f"{host}:{ranks_per_host}" for host in hosts)
    argv = launcher.command(bound, ranks_per_host * len(hosts), spec, env, oversubscribe=oversubscribe) + tool + own
    job = _job(name, kind, hosts, argv, env, output, round_number, rail)
    job.update(launch={"ranks_per_host": ranks_per_host, "oversubscribe": oversubscribe, "mpirun_args": mpirun_args},
               tool=list(tool), own=list(own))
    return job


def _job(name, kind, hosts, argv, env, output, round_number=None, rail=None):
    return {"name": name, "kind": kind, "hosts": list(hosts), "argv": argv, "env": dict(env or {}),
            "output": output, "round": round_number, "rail": rail}


def node_jobs(inputs, run_dir, node, stage_jobs):
    """The node stage's launches of one node, from plan.screen_schedule.node_stage's jobs for it."""
    jobs = []
    for spec in stage_jobs:
        if spec["kind"] == "doctor":
            out = os.path.join(run_dir, "doctor", f"{node}.json")
            tool = doctor_argv(cclbench_script(), inputs.get("sysfs_root"), None, None)
            jobs.append(_launched(inputs, f"doctor.{node}", "doctor", [node], 1, {}, tool,
                                  ["--as-host", node, "--json", out], out))
        elif spec["kind"] == "intra":
            name = f"intra.{node}"
            ranks = inputs["gpus_per_node"] if backend(inputs) == "nccl" else MPI_INTRA_RANKS
            tool, own = _coll_argv(inputs, run_dir, name)
            jobs.append(dict(_launched(inputs, name, "intra", [node], ranks, {}, tool, own,
                                       os.path.join(run_dir, "raw", name + ".json"),
                                       oversubscribe=backend(inputs) == "mpi"),
                             ranks=ranks, correctness_only=backend(inputs) == "mpi"))
        elif spec["kind"] == "loopback":
            name = f"loopback.{node}.{_rail_label(spec['rail'])}"
            tool, own = _coll_argv(inputs, run_dir, name)
            jobs.append(_launched(inputs, name, "loopback", [node], inputs["gpus_per_node"], dict(spec["env"]), tool,
                                  own, os.path.join(run_dir, "raw", name + ".json"), rail=spec["rail"]))
    return jobs


def pair_job(inputs, run_dir, a, b, round_number, kind="pair"):
    """One two-node point (kind pair, retest or repeat) over the rails: NCCL_IB_HCA pinned to every rail."""
    name = f"{kind}.r{round_number}.{a}.{b}"
    env = {}
    if backend(inputs) == "nccl" and inputs.get("hcas"):
        env["NCCL_IB_HCA"] = "=" + ",".join(inputs["hcas"])
    tool, own = _coll_argv(inputs, run_dir, name)
    return _launched(inputs, name, kind, [a, b], inputs["gpus_per_node"] or 1, env, tool, own,
                     os.path.join(run_dir, "raw", name + ".json"), round_number)


def rails_alone(inputs):
    """The rails measured one at a time on a pair: the RDMA rails (--hcas) under NCCL, else the interfaces
    (--netdevs); fewer than two: none (a rail alone is judged against its sibling)."""
    rails = inputs.get("hcas") if backend(inputs) == "nccl" and inputs.get("hcas") else inputs.get("netdevs")
    return list(rails) if rails and len(rails) >= 2 else []


def rail_job(inputs, run_dir, a, b, round_number, rail):
    """One two-node point over one rail alone, judged at the large size (kind rail; the small size runs first, for the learned watchdog)."""
    name = f"rail.r{round_number}.{a}.{b}.{_rail_label(rail)}"
    mpirun_args = None
    if backend(inputs) == "nccl":
        env = nccl_rail_env(rail, rdma=bool(inputs.get("hcas")))
    elif launcher.launcher_of(inputs)["name"] == "srun":
        env = mpi_rail_env(rail)
    else:
        env = {}
        mpirun_args = mpirun_args_for_interface(inputs.get("mpirun_args"), rail)
    tool, own = _coll_argv(inputs, run_dir, name)
    return _launched(inputs, name, "rail", [a, b], inputs["gpus_per_node"] or 1, env, tool, own,
                     os.path.join(run_dir, "raw", name + ".json"), round_number, rail, mpirun_args=mpirun_args)


def stage_env_note(inputs):
    """Why a node has no loopback point, or None."""
    if backend(inputs) == "mpi":
        return "no GPU: the intra-node point is the MPI backend (host memory) and there is no loopback point"
    if not inputs.get("hcas"):
        return "no RDMA rail given or found: no loopback point"
    return None

