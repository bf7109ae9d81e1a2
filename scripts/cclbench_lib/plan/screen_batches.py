"""One launch a stage step: the screen's jobs started many at a time, each job a group of one launch.

coll_perf --split-ranks R --split-points FILE runs one launch as many runs: MPI_COMM_WORLD splits into consecutive
groups of R ranks, each group measured on its own communicator with its own watchdog, --point and -J, written when
the group finishes (docs/scale.md, "One job a round"). The doctor takes --split-points too (each rank its entry by
its launch rank). A batch here is such a launch: jobs of one shape on disjoint hosts.

Shape: the same program and arguments but for each job's own words (plan/screen_jobs.py "own"), the same
environment, ranks on each host, hosts per job, and launcher arguments. Batching: each job, in plan order, joins the
earliest batch of its shape that comes after every batch already holding one of its hosts, else opens a new one.
Each host's jobs therefore keep their plan order, every batch's jobs are on disjoint hosts, and the batches run one
after the other in the order they were opened: the node stage of doctor, intra and one loopback per rail is 2 +
rails launches over every node; a pair round is one launch of its pairs, then one launch per rail alone.

Rank placement: a batch places its ranks exactly, rank i on line i of a hosts file (mpirun --hostfile FILE --map-by
seq, srun -m arbitrary with SLURM_HOSTFILE: model/launcher.py), so that group g is job g's hosts. A launch left to
the launcher's own mapping is not: Open MPI puts the ranks of the host it runs on first, whatever the list says.

What a launch's end means for each group (settle): a group whose output is there is done (its own result, a failure
included: coll_perf writes its -J with status failed before it ends the launch), except one its watchdog ended
(status timeout): that group failed, named by the timeout words of its ranks' progress; a group the launch names
(its ranks reported a timeout or went past a deadline, or the launcher's own words name its rank or host as the one
that died) failed, with those words as its reason; hosts the launcher could not start are named and every job on
them failed; every other group lost nothing of its own and runs again (the groups that finished are kept). A launch
that named no group and finished none (a launcher error without a host) resolves nothing: its groups go to the
rolling pool, one launch each (plan/launch_pool.py), where a failure costs its own job.

Pure data, no I/O: execute/screen.py writes the files, starts the launches and reads their outputs.
"""

from ..model import launcher

# The jobs whose program takes --split-points: coll_perf's kinds and the doctor.
BATCHABLE_KINDS = ("doctor", "intra", "loopback", "pair", "retest", "repeat", "rail")
# A relaunch of the groups a launch lost runs in parts of at most this many nodes at once (all parts at the same
# time): one more crash costs at most that many nodes' groups once more, not the fleet's. 64 nodes: the size below
# which docs/scale.md measured a split round cheaper than its launches one by one.
RELAUNCH_PART_NODES = 64
# Statuses of a group's own document that say the group itself failed (kept, with its reason), against the one a
# signal from outside leaves (interrupted: the launch ended around it; it runs again).
OWN_FAILURE_STATUSES = ("timeout", "failed")
LOST_STATUSES = ("interrupted",)


def shape(job):
    """The key of the jobs that can share a launch."""
    launch = job.get("launch") or {}
    return (job["kind"] == "doctor", tuple(job.get("tool") or ()), tuple(sorted((job.get("env") or {}).items())),
            launch.get("ranks_per_host"), bool(launch.get("oversubscribe")), tuple(launch.get("mpirun_args") or ()),
            len(job["hosts"]))


def why_not_batched(inputs, jobs=()):
    """Why these jobs run in the rolling pool, one launch each, or None when they can be batched: --pool asked
    for, a coll_perf without --split-ranks, launcher arguments that place ranks themselves, a job of another kind."""
    if inputs.get("launch_mode") == "pool":
        return "--pool: one launch a job"
    flags = inputs.get("coll_perf_flags")
    if flags is not None and "--split-ranks" not in flags:
        return "this coll_perf has no --split-ranks (an older build): one launch a job"
    conflict = launcher.placement_conflict(inputs)
    if conflict:
        return f"the launcher arguments place ranks themselves ({conflict}): one launch a job"
    for job in jobs:
        if job["kind"] not in BATCHABLE_KINDS or "tool" not in job:
            return f"{job['name']}: a {job['kind']} job cannot share a launch"
    return None


def batches(jobs):
    """The jobs in batches: [[job, ...], ...] in launch order (module docstring)."""
    opened = []  # [(shape, [jobs], {hosts})]
    last = {}  # host -> index of the last batch holding it
    for job in jobs:
        key = shape(job)
        after = max((last[host] for host in job["hosts"] if host in last), default=-1)
        index = next((i for i in range(after + 1, len(opened)) if opened[i][0] == key and
                      not opened[i][2].intersection(job["hosts"])), None)
        if index is None:
            opened.append((key, [], set()))
            index = len(opened) - 1
        opened[index][1].append(job)
        opened[index][2].update(job["hosts"])
        for host in job["hosts"]:
            last[host] = index
    return [members for _, members, _ in opened]


def ranks_per_group(job):
    return job["launch"]["ranks_per_host"] * len(job["hosts"])


def rank_hosts(jobs):
    """Line i of the hosts file: the host of rank i (each job's hosts, ranks_per_host lines each, in job order)."""
    return [host for job in jobs for host in job["hosts"] for _ in range(job["launch"]["ranks_per_host"])]


def split_points(jobs):
    """The --split-points document: one {"point", "json"} per group, in rank order (the doctor's point: its host)."""
    return [{"point": job["hosts"][0] if job["kind"] == "doctor" else job["name"], "json": job["output"]}
            for job in jobs]


def launch_name(stage, number, attempt=0, part=0):
    """A launch's name (its log and files): the stage, the batch's number in it, then its relaunches."""
    return f"launch.{stage}.{number}" + (f".a{attempt}" if attempt else "") + (f".p{part}" if part else "")


def batch_argv(inputs, jobs, points_path, hosts_path, log_dir=None):
    """The launch of these jobs (one shape): the launcher's prefix for every rank in hosts_path's order, then the
    shared program and arguments, then --split-ranks (coll_perf) and --split-points; log_dir: the NCCL logs of
    the launch's every group (coll_perf --nccl-log-dir; each rank's file is its own)."""
    first = jobs[0]
    launch = first["launch"]
    bound = inputs if launch.get("mpirun_args") is None else dict(inputs, mpirun_args=launch["mpirun_args"])
    nranks = sum(ranks_per_group(job) for job in jobs)
    argv = launcher.command(bound, nranks, None, first.get("env"), oversubscribe=launch.get("oversubscribe", False),
                            rank_hosts_file=hosts_path, node_count=len({h for job in jobs for h in job["hosts"]}))
    argv += list(first["tool"])
    if first["kind"] == "doctor":
        return argv + ["--split-points", points_path]
    argv += ["--split-ranks", str(ranks_per_group(first)), "--split-points", points_path]
    if log_dir and "--nccl-log-dir" in first["own"]:
        argv += ["--nccl-log-dir", log_dir]
    return argv


def parts(jobs, part_nodes=RELAUNCH_PART_NODES):
    """The jobs of a relaunch in consecutive parts of at most part_nodes nodes (a job is never cut)."""
    out, current, nodes = [], [], 0
    for job in jobs:
        if current and nodes + len(job["hosts"]) > part_nodes:
            out.append(current)
            current, nodes = [], 0
        current.append(job)
        nodes += len(job["hosts"])
    if current:
        out.append(current)
    return out


def settle(jobs, outcome):
    """What a launch's end means for each of its jobs (the module docstring). jobs: the launch's jobs in group
    order. outcome: {"documents": {name: {"status", "found"}} for the groups whose output is there (found: the
    job's values, or None when they do not parse), "groups": {index: {"timeout": words or None, "overdue": words or
    None, "finished": bool}} from the launch's progress, "launcher": model.launcher.launch_failure of its output,
    "exit_code", "problem": the runner's words when it stopped the launch or None, "doctor_bound": True when a
    doctor launch was ended at its bound}.
    Returns {"done": [name], "failed": {name: reason}, "unreachable": {host: words}, "rerun": [name],
    "resolved": bool (anything settled: when not, the caller runs these jobs one launch each)}."""
    documents = outcome.get("documents") or {}
    groups = outcome.get("groups") or {}
    said = outcome.get("launcher") or {}
    by_host = {host: index for index, job in enumerate(jobs) for host in job["hosts"]}
    size = ranks_per_group(jobs[0]) if jobs else 1
    done, failed, rerun = [], {}, []
    unreachable = {host: words for host, words in (said.get("unreachable") or {}).items() if host in by_host}
    if unreachable:
        # Nothing ran: the launcher stopped before any rank. The jobs on those hosts failed, the rest run again.
        for job in jobs:
            lost = [host for host in job["hosts"] if host in unreachable]
            if lost:
                failed[job["name"]] = "; ".join(f"not started: the launcher could not start {host}: "
                                                f"{unreachable[host]}" for host in lost)
            elif job["name"] in documents and documents[job["name"]]["status"] not in LOST_STATUSES:
                done.append(job["name"])
            else:
                rerun.append(job["name"])
        return {"done": done, "failed": failed, "unreachable": unreachable, "rerun": rerun, "resolved": True}
    named = {}  # group index -> the launcher's words about it
    for rank, words in (said.get("ranks") or {}).items():
        named.setdefault(int(rank) // size, words)
    for host, words in (said.get("hosts") or {}).items():
        if host in by_host:
            named.setdefault(by_host[host], words)
    for index, job in enumerate(jobs):
        document = documents.get(job["name"])
        state = groups.get(index) or {}
        if document is not None and document["status"] == "timeout":
            # Its own watchdog ended it (its document is written with what it measured before): a failure of its
            # own, named by the watchdog's words - the group and its hung rank's host - not "no record".
            failed[job["name"]] = f"timeout in its group: {state['timeout']}" if state.get("timeout") else \
                (named.get(index) or "timeout in its group: its own watchdog ended it (status timeout)")
        elif document is not None and document["status"] not in LOST_STATUSES:
            done.append(job["name"])
        elif state.get("timeout"):
            failed[job["name"]] = f"timeout in its group: {state['timeout']}"
        elif state.get("overdue"):
            failed[job["name"]] = f"hung in its group: {state['overdue']}"
        elif index in named:
            failed[job["name"]] = named[index]
        elif outcome.get("doctor_bound"):
            failed[job["name"]] = outcome.get("problem") or "no doctor result within its bound"
        else:
            rerun.append(job["name"])
    return {"done": done, "failed": failed, "unreachable": {}, "rerun": rerun,
            "resolved": bool(done or failed) or not rerun}


def planned_launches(stage, rounds, rail_pairs, rails):
    """The launches of a screen on a healthy fleet, from the plan's shape (what batches() gives its jobs, without
    building them): [{"stage": "node" | "pairs", "what": "doctor" | "intra" | "loopback RAIL" | "pairs" | "rail
    RAIL", "round": n or None, "groups": [[host, ...], ...]}]. stage: plan.screen_schedule.node_stage's jobs per
    node; rounds: the pair schedule's rounds; rail_pairs: [[pair, ...] per round] (plan.screen_schedule.
    rail_point_pairs); rails: the rails measured alone."""
    launches = []
    steps = max((len(jobs) for jobs in stage.values()), default=0)
    for step in range(steps):
        nodes = [node for node, jobs in stage.items() if step < len(jobs)]
        kinds = {stage[node][step]["kind"] + (f" {stage[node][step]['rail']}" if stage[node][step].get("rail")
                                              else "") for node in nodes}
        for what in sorted(kinds):
            groups = [[node] for node in nodes if stage[node][step]["kind"] + (
                f" {stage[node][step]['rail']}" if stage[node][step].get("rail") else "") == what]
            launches.append({"stage": "node", "what": what, "round": None, "groups": groups})
    for entry, chosen in zip(rounds, rail_pairs):
        if entry["pairs"]:
            launches.append({"stage": "pairs", "what": "pairs", "round": entry["round"],
                             "groups": [list(pair) for pair in entry["pairs"]]})
        if chosen:
            for rail in rails:
                launches.append({"stage": "pairs", "what": f"rail {rail}", "round": entry["round"],
                                 "groups": [list(pair) for pair in chosen]})
    return launches
