"""The `screen` sub-parser and command: find the bad node, rail and link of a fleet."""

import os
import shlex
import sys

from ..base.environment import exported_env
from ..base.errors import CclbenchError, UsageError
from ..base.files import read_json
from ..base.locations import resolve_program
from ..base.values import (default_run_id, format_size, parse_hcas, parse_netdevs, parse_size, split_mpirun_args,
                           validate_run_id)
from ..base.files import write_json_atomic
from ..base.version import TOOL_VERSION
from ..execute.screen import MANIFEST, Screen, plan_stages
from ..execute.screen_simulate import SimulatedFleet
from ..model.screen_fleet import FleetModel, read_fleet
from ..model.hosts import (check_resolvable, hostfile_groups, hosts_and_slots, local_gpu_count, local_hostname,
                           read_groups, slurm_topology_groups)
from ..model.launcher import launch_kind, launcher_of
from ..plan.launch_pool import pool_span
from ..plan.launch_time import describe as describe_launch_time, group_s, launch_s
from ..plan.screen_batches import RELAUNCH_PART_NODES, batch_argv, planned_launches, why_not_batched
from ..plan.screen_jobs import backend, node_jobs, pair_job, rail_job, rails_alone, stage_env_note
from ..plan.screen_schedule import (DEFAULT_MAX_CONCURRENT, DEFAULT_ROUNDS, LAUNCH_CAPS, PER_PAIR_S, RETEST_BUDGET_S,
                                   RETEST_PARTNERS, concurrency_cap, default_rounds, rail_point_pairs)
from ..render.screen import headline



def add_screen_parser(sub, add_launcher_options, positive_int, seconds):
    screen = sub.add_parser("screen", help="screen a fleet: each node alone, then disjoint pairs at the same time; "
                            "names the bad nodes, links and rails (exit 1 when anything is bad, 3 when only suspect)")
    where = screen.add_argument_group("where")
    where.add_argument("--hosts", help="comma-separated hosts (default: the Slurm allocation's nodes)")
    where.add_argument("--hostfile", help="Open MPI hostfile ('node5 slots=8' lines)")
    where.add_argument("--gpus-per-node", type=positive_int("--gpus-per-node", 1, 1024),
                       help="GPUs (ranks) per node (default: hostfile slots, the allocation's, else nvidia-smi -L "
                            "here; none: the MPI backend in host memory)")
    where.add_argument("--hcas", help="RDMA rails as HCA:port list: one loopback point each, and NCCL_IB_HCA of the "
                       "pairs (GPU nodes only)")
    where.add_argument("--groups", metavar="FILE",
                       help="each node's switch group, 'NODE GROUP' a line (default: a hostfile's group= column): many "
                       "bad nodes of one group are named together as a shared cause; inside a Slurm allocation Slurm's "
                       "topology (scontrol show topology)")
    where.add_argument("--netdevs", help="rail interfaces whose byte counters give each rail's share of a pair "
                       "(example: eth0,eth3)")
    what = screen.add_argument_group("what")
    rounds = what.add_mutually_exclusive_group()
    rounds.add_argument("--quick", nargs="?", const=1, type=positive_int("--quick", 1, 1000), metavar="K",
                        help="K shuffled rounds of disjoint pairs (default 1) instead of every pair (n-1 rounds)")
    rounds.add_argument("--full", action="store_true",
                        help="every pair once (n-1 rounds). Without --quick or --full: full below "
                        f"{min(DEFAULT_ROUNDS)} nodes, else the fewest rounds the simulated scale table "
                        "(docs/scale.md) found enough for its fleet size (the dry run says which)")
    what.add_argument("--seed", type=positive_int("--seed", 0, 1 << 31), default=0, help="--quick's shuffle seed")
    what.add_argument("--large", default="64M", help="the large size: bus bandwidth (default 64M)")
    what.add_argument("--small", default="8K", help="the small size: small-message time (default 8K)")
    what.add_argument("-n", "--iters", type=positive_int("-n", 1, 1 << 24), default=20, help="timed iterations")
    what.add_argument("-w", "--warmup_iters", type=positive_int("-w", 0, 1 << 20), default=5, help="warm-up iterations")
    what.add_argument("--timeout", type=positive_int("--timeout", 1, 1 << 24), help="coll_perf -T per case, seconds")
    what.add_argument("--launch-timeout", type=seconds("--launch-timeout"), default=600.0,
                      help="kill a job after this many seconds (default 600); it then counts as failed")
    what.add_argument("--max-concurrent", type=positive_int("--max-concurrent", 1, 1 << 20),
                      help="at most this many jobs at once (default: what one host was measured to sustain with the "
                      "launcher used, " + ", ".join(f"{kind} {cap}" for kind, (cap, _) in LAUNCH_CAPS.items()) +
                      "; docs/scale.md)")
    what.add_argument("--pool", action="store_true",
                      help="one launch a job, in a rolling pool of at most --max-concurrent, instead of one launch a "
                      "stage step (each node's or pair's job a group of coll_perf --split-ranks)")
    what.add_argument("--retest-budget", type=seconds("--retest-budget"), default=RETEST_BUDGET_S, metavar="S",
                      help="seconds of targeted retests at most: each suspect meets known-good partners until it is "
                      f"named or cleared (default {RETEST_BUDGET_S:g}); a suspect still open then is said in the report")
    what.add_argument("--per-pair-s", type=seconds("--per-pair-s"), default=PER_PAIR_S,
                      help=f"one job's wall time for the estimate (default {PER_PAIR_S:g} s)")
    what.add_argument("--sysfs-root", help="coll_perf --sysfs-root for rail counters")
    screen.add_argument("--simulate", metavar="FLEET.json",
                        help="run the screen on a simulated fleet (results_schema/screen_fleet.schema.json): its model "
                        "answers every launch; the schedule, retests, rules and outputs run unchanged, and screen.json "
                        "gains a 'simulation' block scoring the verdict against the fleet's truth")
    screen.add_argument("--dry-run", action="store_true",
                        help="print a summary of the plan (stages, launches, groups, the expected wall time) and stop")
    screen.add_argument("--plan", metavar="FILE",
                        help="with --dry-run: also write the whole plan as JSON to FILE (every node, every pair of "
                        "every round, every launch with its command and hosts)")
    screen.add_argument("--resume", metavar="RUN_ID", help="continue RUN_ID: jobs complete with their values are not "
                        "rerun")
    add_launcher_options(screen)
    return screen


def screen_inputs(args, launcher_choice, coll_perf_flags, default_bin_dir):
    hosts, slots, granted = hosts_and_slots(args.hosts, args.hostfile)
    if not hosts:
        raise UsageError("screen needs hosts: pass --hosts or --hostfile, or run inside a Slurm allocation")
    if len(hosts) < 2:
        raise UsageError(f"screen needs at least two hosts to pair, got {len(hosts)} ({','.join(hosts)})")
    gpus = args.gpus_per_node or slots or granted or local_gpu_count()
    large, small = parse_size(args.large, "--large"), parse_size(args.small, "--small")
    if small >= large:
        raise UsageError(f"--small {args.small} must be smaller than --large {args.large}")
    hcas = parse_hcas(args.hcas) if args.hcas else []
    bin_dir = os.path.abspath(args.bin_dir or default_bin_dir)
    exported, exported_names = exported_env()  # the measurement environment reaches every rank, as in baseline
    groups = read_groups(args.groups) if args.groups else \
        ((hostfile_groups(args.hostfile) if args.hostfile else {}) or slurm_topology_groups())
    # A site-wide groups file (or Slurm's topology) lists other nodes too: only the screen's own are kept.
    screened = set(hosts)
    groups = {host: group for host, group in groups.items() if host in screened}
    decision = launcher_choice(args)
    return {"exported_env": exported, "exported_env_names": exported_names, "hosts": hosts, "gpus_per_node": gpus or 0, "hcas": hcas if gpus else [],
            "netdevs": parse_netdevs(args.netdevs), **rounds_inputs(args, len(hosts)), "seed": args.seed,
            "large_bytes": large, "small_bytes": small, "iterations": args.iters, "warmup": args.warmup_iters,
            "timeout_s": args.timeout, "launch_timeout_s": args.launch_timeout, "retest_budget_s": args.retest_budget,
            **concurrency_inputs(args, decision, hosts),
            "per_pair_s": args.per_pair_s, "launch_mode": "pool" if args.pool else "batched",
            "bin_dir": bin_dir, "mpirun": args.mpirun,
            "mpirun_args": split_mpirun_args(args.mpirun_args), "launcher": decision,
            "as_root": os.geteuid() == 0, "coll_perf_flags": coll_perf_flags(bin_dir),
            "sysfs_root": os.path.abspath(args.sysfs_root) if args.sysfs_root else None, "groups": groups}


def rounds_inputs(args, node_count):
    """{"quick": K or None, "rounds_choice": why}: --quick K, --full, or with neither the default for the fleet's
    size (plan.screen_schedule.default_rounds)."""
    if args.quick:
        return {"quick": args.quick, "rounds_choice": {"source": "--quick"}}
    if args.full:
        return {"quick": None, "rounds_choice": {"source": "--full"}}
    chosen = default_rounds(node_count)
    return {"quick": chosen["quick"], "rounds_choice": dict(chosen, source="default")}


def concurrency_inputs(args, decision, hosts):
    """{"max_concurrent": N, "concurrency_choice": plan.screen_schedule.concurrency_cap's answer}: --max-concurrent,
    else the cap measured for the way these hosts are launched (model.launcher.launch_kind)."""
    choice = concurrency_cap(launch_kind(decision, hosts, (local_hostname(),)), args.max_concurrent)
    return {"max_concurrent": choice["limit"], "concurrency_choice": choice}


# A simulated fleet's jobs at once: each slice of them is one modelled launch time, so the modelled wall time of the
# committed scale table depends on it; it was made with mpirun's first default.
SIMULATED_MAX_CONCURRENT = DEFAULT_MAX_CONCURRENT


def simulate_inputs(args, fleet, default_bin_dir):
    """The screen's inputs for a simulated fleet: its nodes, GPUs and rails (HCA ports under NCCL, else the
    interfaces), the sizes and rounds from the command line; nothing is looked up on this machine."""
    if args.hosts or args.hostfile or args.resume or args.groups:
        raise UsageError("--simulate takes the fleet's nodes and groups from FLEET.json: leave out --hosts, "
                         "--hostfile, --groups and --resume")
    large, small = parse_size(args.large, "--large"), parse_size(args.small, "--small")
    if small >= large:
        raise UsageError(f"--small {args.small} must be smaller than --large {args.large}")
    gpus = fleet["gpus_per_node"]
    hcas = [rail for rail in fleet["rails"] if ":" in rail] if gpus else []
    netdevs = [rail for rail in fleet["rails"] if ":" not in rail]
    return {"exported_env": {}, "exported_env_names": [], "hosts": list(fleet["nodes"]), "gpus_per_node": gpus,
            "hcas": hcas, "netdevs": netdevs, **rounds_inputs(args, len(fleet["nodes"])), "seed": args.seed,
            "large_bytes": large,
            "small_bytes": small, "iterations": args.iters, "warmup": args.warmup_iters, "timeout_s": args.timeout,
            "launch_timeout_s": args.launch_timeout, "retest_budget_s": args.retest_budget,
            "max_concurrent": args.max_concurrent or SIMULATED_MAX_CONCURRENT,
            "concurrency_choice": {"limit": args.max_concurrent or SIMULATED_MAX_CONCURRENT, "kind": "a simulated fleet",
                                   "source": "--max-concurrent" if args.max_concurrent else "default",
                                   "default": SIMULATED_MAX_CONCURRENT,
                                   "why": "the cap the committed scale table (docs/scale.md) was modelled with"},
            "per_pair_s": fleet["job_s"], "launch_mode": "pool" if args.pool else "batched",
            "bin_dir": os.path.abspath(args.bin_dir or default_bin_dir),
            "mpirun": args.mpirun, "mpirun_args": split_mpirun_args(args.mpirun_args),
            "launcher": simulated_launcher(args),
            "as_root": False, "coll_perf_flags": None, "sysfs_root": None, "simulated_fleet": args.simulate,
            "groups": {node: group for node, group in fleet["groups"].items() if group is not None}}


def simulated_launcher(args):
    """A simulated fleet's launcher: srun steps with --launcher srun, else mpirun over ssh (the slower fit of
    plan/launch_time.py); nothing is looked up on this machine."""
    if args.launcher == "srun":
        return {"name": "srun", "program": "srun", "mpi": "pmix", "reason": "simulated fleet: --launcher srun",
                "args": []}
    return {"name": "mpirun", "program": args.mpirun, "mpi": None, "reason": "simulated fleet", "args": []}


def estimate(inputs, stage, schedule):
    """{"node_jobs", "pair_jobs", "chain", "wall_s"}: the node stage's and the pair rounds' launches (with each rail
    alone) in the screen's rolling pool of at most --max-concurrent (plan/launch_pool.py), each per_pair_s; chain:
    the most pair-stage jobs one node runs (one after the other)."""
    limit = inputs.get("max_concurrent")
    per_job = inputs["per_pair_s"]
    node_jobs_list = [{"hosts": [node]} for step in range(max((len(jobs) for jobs in stage.values()), default=0))
                      for node, jobs in stage.items() if step < len(jobs)]
    rails = rails_alone(inputs)
    pair_jobs_list = []
    for entry, rail_pairs in zip(schedule["rounds"], rail_point_pairs(schedule["rounds"]) if rails else
                                 [[] for _ in schedule["rounds"]]):
        pair_jobs_list += [{"hosts": list(pair)} for pair in entry["pairs"]]
        pair_jobs_list += [{"hosts": list(pair)} for pair in rail_pairs for _ in rails]
    per_node = {}
    for job in pair_jobs_list:
        for node in job["hosts"]:
            per_node[node] = per_node.get(node, 0) + 1
    return {"node_jobs": len(node_jobs_list), "pair_jobs": len(pair_jobs_list),
            "chain": max(per_node.values(), default=0),
            "wall_s": pool_span(node_jobs_list, limit, per_job) + pool_span(pair_jobs_list, limit, per_job)}


# Fleets up to this many nodes have their names and rounds printed inline; a larger one's are in the --plan file.
INLINE_NODES = 32


def batched_estimate(inputs, stage, schedule):
    """The batched screen's launches on a healthy fleet (plan.screen_batches.planned_launches) and their time by
    plan/launch_time.py: {"launches": [... with "seconds"], "node_s", "pairs_s", "wall_s", "retest_round_s"}."""
    kind = launch_kind(launcher_of(inputs), inputs["hosts"], (local_hostname(),))
    rails = rails_alone(inputs)
    rail_pairs = rail_point_pairs(schedule["rounds"]) if rails else [[] for _ in schedule["rounds"]]
    launches = planned_launches(stage, schedule["rounds"], rail_pairs, rails)
    per_job = inputs["per_pair_s"]
    for launch in launches:
        nodes = sum(len(group) for group in launch["groups"])
        launch["seconds"] = launch_s(kind, nodes, group_s(kind, per_job, len(launch["groups"][0])))
    retest_round = launch_s(kind, 2 * RETEST_PARTNERS, group_s(kind, per_job, 2)) * (1 + len(rails))
    node_s = sum(launch["seconds"] for launch in launches if launch["stage"] == "node")
    pairs_s = sum(launch["seconds"] for launch in launches if launch["stage"] == "pairs")
    return {"kind": kind, "launches": launches, "node_s": node_s, "pairs_s": pairs_s, "wall_s": node_s + pairs_s,
            "retest_round_s": retest_round}


def dry_run(inputs, run_dir, out, plan_path=None):
    """What the screen would do: a summary a person can read at any fleet size (stages, launches, groups, time), the
    names and rounds inline up to INLINE_NODES nodes, and with plan_path the whole plan as JSON there."""
    stage, schedule = plan_stages(inputs)
    hosts = inputs["hosts"]
    inline = len(hosts) <= INLINE_NODES
    kinds = [job["kind"] + (f" {job['rail']}" if job.get("rail") else "") for job in stage[hosts[0]]]
    names = ",".join(hosts) if inline else f"{hosts[0]}, {hosts[1]}, ... {hosts[-1]}"
    out.write(f"screen of {len(hosts):,} nodes: {names}\n")
    out.write(f"backend: {backend(inputs)}" + (f", {inputs['gpus_per_node']} GPU(s) a node" if inputs["gpus_per_node"]
                                               else "") + f"; sizes {format_size(inputs['large_bytes'])} (bus "
              f"bandwidth) and {format_size(inputs['small_bytes'])} (small-message time)\n")
    chosen = launcher_of(inputs)
    out.write(f"launcher: {chosen['name']}" + (f" ({chosen['reason']})" if chosen.get("reason") else "") + "\n")
    note = stage_env_note(inputs)
    if note:
        out.write(f"note: {note}\n")
    mode = (f"quick: {schedule['repeats']} shuffled round(s), seed {schedule['seed']}" if schedule["mode"] == "quick"
            else "full: the circle method, every pair once")
    rails = rails_alone(inputs)
    why = why_not_batched(inputs)
    per_job = inputs["per_pair_s"]
    out.write(f"rounds: {rounds_text(inputs.get('rounds_choice') or {}, len(hosts), inputs['quick'])}\n")
    if why is None:
        expected = batched_estimate(inputs, stage, schedule)
        launches = expected["launches"]
        node_launches = [launch for launch in launches if launch["stage"] == "node"]
        pair_launches = [launch for launch in launches if launch["stage"] == "pairs"]
        out.write("launches: one launch a stage step, each node's or pair's job its own group and communicator "
                  "(coll_perf --split-ranks; the doctor by --split-points), every rank placed by a hosts file; a "
                  "group that hangs or crashes ends its launch, the groups that finished are kept and the others run "
                  f"again in parts of at most {RELAUNCH_PART_NODES} nodes (--pool: one launch a job)\n")
        out.write(f"node stage: {len(node_launches)} launch(es) over {len(hosts):,} nodes, one group a node: "
                  f"{', '.join(kinds)} ({expected['node_s']:.0f} s)\n")
        rail_rounds = sorted({launch["round"] for launch in pair_launches if launch["what"].startswith("rail")})
        out.write(f"pair stage: {mode}; {len(schedule['rounds']):,} round(s) of {schedule['concurrent_jobs']:,} "
                  f"pair(s), {schedule['pair_count']:,} pair(s) in all: {len(pair_launches):,} launch(es), a round's "
                  "pairs in one" + (f", then each of {len(rails)} rails alone in {len(rail_rounds)} round(s) "
                                    f"({sum(len(launch['groups']) for launch in pair_launches if launch['what'].startswith('rail')) // max(1, len(rails)):,} "
                                    "pair(s) on each)" if rail_rounds else "") + f" ({expected['pairs_s']:.0f} s)\n")
        out.write(f"time model: {describe_launch_time(expected['kind'])}\n")
        out.write(f"expected wall time: {expected['wall_s']:.0f} s ({expected['wall_s'] / 60:.1f} min) on a healthy "
                  f"fleet: {len(launches):,} launch(es), each group {per_job:g} s less its own launch's start-up; each "
                  f"retest round adds about {expected['retest_round_s']:.0f} s; a hung node holds each launch it is "
                  "in until its learned deadline (docs/scale.md)\n")
    else:
        limit = inputs.get("max_concurrent")
        out.write(f"launches: one launch a job ({why}), at most {limit} at once ({concurrency_text(inputs)}), in a "
                  "rolling pool: each node's jobs in round order, a job starting when its nodes are free\n")
        cap = inputs.get("max_concurrent")
        out.write(f"node stage: every node at once" + (f" (at most {cap} jobs at once)" if cap and len(stage) > cap
                                                        else "") + f", {len(kinds)} job(s) each: {', '.join(kinds)}\n")
        out.write(f"pair stage: {mode}; {len(schedule['rounds'])} round(s), {schedule['pair_count']} pair(s), "
                  f"{schedule['concurrent_jobs']} concurrent job(s) a round\n")
        expected = estimate(inputs, stage, schedule)
        out.write(f"expected wall time: {expected['wall_s']:.0f} s ({expected['node_jobs']} node-stage and "
                  f"{expected['pair_jobs']} pair-stage job(s) of {per_job:g} s in a rolling pool of at most "
                  f"{inputs.get('max_concurrent') or 'all'} at once, each node's own one after the other: at most "
                  f"{expected['chain']} in the pair stage; each retest round adds {per_job:g} s)\n")
    if inline:
        for entry in schedule["rounds"]:
            bye = f" (bye: {entry['bye']})" if entry["bye"] else ""
            out.write(f"  round {entry['round'] + 1}: " + " ".join(f"{a}-{b}" for a, b in entry["pairs"]) + bye + "\n")
    if rails:
        out.write(f"rails alone: {', '.join(rails)}, one point each at {format_size(inputs['large_bytes'])} on the "
                  "pairs that give each node its first two partners (judged against the sibling rail on the same "
                  "pair)\n")
    else:
        out.write("rails alone: none (give two rails or more with --hcas or --netdevs to judge each rail alone)\n")
    if why is None:
        # The first launch of each kind, as it would start: every group of it (its hosts and points in files).
        folder = os.path.join(run_dir, "launches")
        for number, launch in enumerate(expected["launches"]):
            what = launch["what"].split()[0]
            if what == "doctor" or any(earlier["what"].split()[0] == what for earlier in expected["launches"][:number]):
                continue
            if launch["stage"] == "node":
                step = next(index for index, spec in enumerate(stage[hosts[0]])
                            if spec["kind"] + (f" {spec['rail']}" if spec.get("rail") else "") == launch["what"])
                jobs = [node_jobs(inputs, run_dir, node, stage[node][step:step + 1])[0]
                        for [node] in launch["groups"]]
            elif what == "pairs":
                jobs = [pair_job(inputs, run_dir, a, b, launch["round"]) for a, b in launch["groups"]]
            else:
                jobs = [rail_job(inputs, run_dir, a, b, launch["round"], launch["what"].split()[1])
                        for a, b in launch["groups"]]
            name = f"launch.{launch['stage']}.{number}"
            argv = batch_argv(inputs, jobs, os.path.join(folder, name + ".points.json"),
                              os.path.join(folder, name + ".hosts"), log_dir=os.path.join(run_dir, "nccl", name))
            out.write(f"example {jobs[0]['kind']} launch ({len(jobs):,} groups): {shlex.join(argv)}\n")
    else:
        first = node_jobs(inputs, run_dir, hosts[0], stage[hosts[0]])
        examples = first[1:] + ([pair_job(inputs, run_dir, *schedule["rounds"][0]["pairs"][0], 0)]
                                if schedule["rounds"] else [])
        if rails and schedule["rounds"]:
            examples.append(rail_job(inputs, run_dir, *schedule["rounds"][0]["pairs"][0], 0, rails[0]))
        for job in examples:
            out.write(f"example {job['kind']} job: {shlex.join(job['argv'])}\n")
    if plan_path:
        write_json_atomic(plan_path, plan_document(inputs, stage, schedule, why))
        out.write(f"plan: {plan_path} (every node, every pair of every round, every launch)\n")
    elif not inline:
        out.write("plan: the names, every round's pairs and every launch with --dry-run --plan FILE\n")
    return 0


def plan_document(inputs, stage, schedule, why):
    """The whole plan as data (--plan FILE): the inputs that shape it, the node stage, every round, every launch."""
    document = {"kind": "screen_plan", "tool_version": TOOL_VERSION, "nodes": list(inputs["hosts"]),
                "backend": backend(inputs), "gpus_per_node": inputs["gpus_per_node"],
                "sizes_bytes": [inputs["large_bytes"], inputs["small_bytes"]],
                "launcher": launcher_of(inputs), "rounds_choice": inputs.get("rounds_choice"),
                "node_stage": [job["kind"] + (f" {job['rail']}" if job.get("rail") else "")
                               for job in stage[inputs["hosts"][0]]],
                "schedule": {key: schedule[key] for key in ("mode", "seed", "repeats", "pair_count",
                                                            "concurrent_jobs")},
                "rounds": [{"round": entry["round"], "pairs": entry["pairs"], "bye": entry["bye"]}
                           for entry in schedule["rounds"]],
                "rails_alone": rails_alone(inputs)}
    if why is None:
        expected = batched_estimate(inputs, stage, schedule)
        document.update(launch_mode="batched", time_model=describe_launch_time(expected["kind"]),
                        launches=[{"stage": launch["stage"], "what": launch["what"], "round": launch["round"],
                                   "nodes": sum(len(group) for group in launch["groups"]),
                                   "seconds": round(launch["seconds"], 1), "groups": launch["groups"]}
                                  for launch in expected["launches"]],
                        expected_wall_s=round(expected["wall_s"], 1),
                        retest_round_s=round(expected["retest_round_s"], 1))
    else:
        expected = estimate(inputs, stage, schedule)
        document.update(launch_mode="pool", pool_reason=why, max_concurrent=inputs.get("max_concurrent"),
                        expected_wall_s=round(expected["wall_s"], 1))
    return document


def concurrency_text(inputs):
    """Why the screen runs at most max_concurrent jobs at once: --max-concurrent, or the default for its launcher and
    the measurement behind it. A manifest from before the caps per launcher has no choice: mpirun's old default."""
    choice = inputs.get("concurrency_choice")
    if not choice:
        return ("--max-concurrent" if inputs.get("max_concurrent") != DEFAULT_MAX_CONCURRENT else
                "the default before caps per launcher, docs/scale.md")
    if choice["source"] != "default":
        return f"{choice['source']}; the default for {choice['kind']} is {choice['default']}"
    return f"the default for {choice['kind']}: {choice['why']}; --max-concurrent N to change"


def rounds_text(choice, node_count, quick):
    mode = f"--quick {quick}" if quick else "full"
    if choice.get("source") != "default":
        return f"{mode} ({choice.get('source', 'given')})"
    if not choice.get("table_nodes"):
        return (f"{mode}, the default below {min(DEFAULT_ROUNDS)} nodes (the fault matrix's fleets of 2-8; --quick K "
                "for fewer rounds)")
    recall = choice.get("expected_recall")
    sizes = " and ".join(f"{size:,}" for size in choice["table_nodes"])
    return (f"{mode}, the default for {node_count:,} nodes: the fewest rounds the simulated screen of {sizes} nodes "
            f"needed to find " + ("-" if recall is None else f"{recall:.1%}") + " of bad nodes at 2% faults, "
            "naming at most 0.1% of healthy ones (docs/scale.md; --full or --quick K to choose)")


def check_tools(inputs):
    chosen = launcher_of(inputs)
    resolve_program(chosen["program"], chosen["name"])
    tool = os.path.join(inputs["bin_dir"], "coll_perf")
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        raise CclbenchError(f"coll_perf is not built in {inputs['bin_dir']} (build it, or pass --bin-dir)", 2)


def cmd_screen(args, argv, launcher_choice, coll_perf_flags, default_bin_dir):
    if args.plan and not args.dry_run:
        raise UsageError("--plan FILE goes with --dry-run (the plan of a run is in its screen_manifest.json)")
    results = os.path.abspath(args.results)
    if args.simulate:
        fleet = read_fleet(args.simulate)
        inputs = simulate_inputs(args, fleet, default_bin_dir)
        run_dir = os.path.join(results, validate_run_id(args.run_id or default_run_id("simulate-")))
        if args.dry_run:
            return dry_run(inputs, run_dir, sys.stdout, args.plan)
        if os.path.lexists(run_dir):
            raise UsageError(f"{run_dir} already exists: choose another --run-id")
        os.makedirs(run_dir, exist_ok=True)
        simulator = SimulatedFleet(FleetModel(fleet), os.path.abspath(args.simulate),
                                   launch_kind=launch_kind(inputs["launcher"], inputs["hosts"]))
        screen = Screen(inputs, run_dir, argv=argv, simulator=simulator)
        document = screen.run()
        return report_screen(document, run_dir, screen.report_path, simulated=document.get("simulation"))
    if args.resume:
        if args.run_id and args.run_id != args.resume:
            raise UsageError(f"--run-id {args.run_id} and --resume {args.resume} disagree")
        run_dir = os.path.join(results, validate_run_id(args.resume))
        if not os.path.isdir(run_dir):
            raise UsageError(f"--resume {args.resume}: {run_dir} does not exist")
        manifest = read_json(os.path.join(run_dir, MANIFEST), "screen manifest")
        inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
        if not isinstance(inputs, dict):
            raise CclbenchError(f"{os.path.join(run_dir, MANIFEST)} has no inputs: cannot resume", 2)
        inputs = dict(inputs, as_root=os.geteuid() == 0)
        if args.dry_run:
            return dry_run(inputs, run_dir, sys.stdout, args.plan)
    else:
        inputs = screen_inputs(args, launcher_choice, coll_perf_flags, default_bin_dir)
        run_dir = os.path.join(results, validate_run_id(args.run_id or default_run_id("screen-")))
        if args.dry_run:
            return dry_run(inputs, run_dir, sys.stdout, args.plan)
        if os.path.lexists(run_dir):
            raise UsageError(f"{run_dir} already exists: pass --resume {os.path.basename(run_dir)} to continue it, "
                             "or choose another --run-id")
    check_tools(inputs)
    check_resolvable(inputs["hosts"])
    note = stage_env_note(inputs)
    if note:
        print(f"cclbench: note: {note}", file=sys.stderr)
    os.makedirs(run_dir, exist_ok=True)
    screen = Screen(inputs, run_dir, resume=bool(args.resume), argv=argv)
    document = screen.run()
    return report_screen(document, run_dir, screen.report_path)


def report_screen(document, run_dir, path, simulated=None):
    for line in headline(document):
        if line and not line.endswith(": none"):
            print(f"cclbench: screen: {line.lstrip('# -')}", file=sys.stderr)
    if simulated:
        for kind in ("nodes", "links", "rails", "groups"):
            block = simulated["score"][kind]
            left = f", {block['suspect_bad']} left open (a miss)" if block["suspect_bad"] else ""
            print(f"cclbench: simulation: bad {kind}: {block['true_positive']} of {block['truth']} found, "
                  f"{block['false_positive']} named wrongly{left} (recall {_share(block['recall'])}, precision "
                  f"{_share(block['precision'])})", file=sys.stderr)
        print(f"cclbench: simulation: modelled wall time {simulated['modelled_wall_s']:.0f} s, rules "
              f"{sum(simulated['rules_cpu_s'].values()):.2f} s CPU", file=sys.stderr)
    print(f"cclbench: screen: {os.path.join(run_dir, 'screen.json')}, report {path}", file=sys.stderr)
    return document["exit_code"]


def _share(value):
    return "-" if value is None else f"{value:.1%}"
