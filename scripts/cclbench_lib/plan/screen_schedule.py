"""The schedule of `cclbench screen` as plain data: which jobs run, in which round, with whom.

Stages:
  node stage: every node at once, alone: the doctor, one intra-node point (one large and one small size) and,
      where the node has RDMA NICs, one loopback point per rail (NCCL with P2P and SHM disabled and NCCL_IB_HCA
      pinned to that rail, so that all traffic leaves through that one NIC and comes back: Azure NHC's check).
      A node that fails here is not paired.
  pair stage: rounds of disjoint pairs that run at the same time.
      full: the circle (round-robin) method, n - 1 rounds of n / 2 pairs (odd n: n rounds of (n - 1) / 2 pairs,
          one node sitting out each round); every pair exactly once.
      quick: one shuffled round (random.Random(seed): reproducible), repeated `repeats` times.
  rail points: with two rails or more, a pair of a round with a node that has met fewer than RAIL_PARTNERS
      partners on each rail alone also runs one point per rail alone after its round (rail_point_pairs): the
      first two rounds (three at 3 nodes or odd counts), then again in the retests of a node suspect from them.
      Each rail's points of a round run at the same time: rails x such rounds more launch slots.
  retest: each suspect with nodes already known good, partners it has not met; disjoint per round and a good
      node used once per round; pairs to repeat (a failure to reproduce) go first.
Wall time: the node stage (its jobs one after the other on each node, nodes in parallel) + (rounds + rail slots)
x the time of one pair job + retest rounds x the same. The planner's cost is linear in the number of pairs it
writes.

No I/O and no text: the CLI prints and runs what these functions return.
"""
import random

# One pair job's wall time used for the scale table: one two-node launch measuring a large and a small size
# (launch, NCCL init, both sizes). The figure; the CLI takes the measured time where it has one.
PER_PAIR_S = 20.0
SCALE_NODE_COUNTS = (2, 16, 128, 1024)
# With no round flag (--quick K / --full), a screen of N nodes runs the fewest rounds, with retests, that found at
# least 99% of bad nodes at 2% faults and named at most 0.1% of healthy nodes in the simulated scale table
# (docs/scale.md: `tests/scale/screen_scale.py defaults tests/scale/screen_scale_results.json`; the H200's noise).
# fleet size: (quick rounds, None for full; the recall measured there). A fleet between two sizes takes the larger
# of their rounds; fewer nodes than the smallest size: full (the fault matrix proves 2-8 nodes); more than the
# largest: the largest's.
DEFAULT_ROUNDS = {16: (3, 1.0), 64: (3, 1.0), 256: (2, 1.0), 1024: (3, 1.0), 4096: (3, 1.0)}
# Launches at once by default, for each way the screen starts its jobs (model.launcher.launch_kind); --max-concurrent
# overrides. Measured by tests/scale/launch_fanout.py on one 2-core host shared with other work (docs/scale.md,
# "Launching at scale"); the second field is the measurement, one line, that the dry run prints.
LAUNCH_CAPS = {
    # 8-256 concurrent local `mpirun -np 2` of an MPI program all exited 0, started at a steady ~4.5 a second
    # whatever the count: above about 64 at once the start-up alone takes as long as a 20 s pair job.
    "mpirun-local": (64, "one 2-core host started 8-256 local mpiruns at once, all ok, at ~4.5 a second whatever "
                         "the count: above 64 the start-up alone outlasts a 20 s pair job "
                         "(tests/scale/launch_fanout_results.json)"),
    # Over real OpenSSH to 2K node namespaces (their sshds and orteds on the same 2 cores): 8-500 at once all
    # exited 0, at ~2.8 a second; 32 were done in 13 s, 64 in 23 s, longer than a pair job.
    "mpirun-ssh": (32, "one 2-core host started 8-500 mpiruns over ssh at once, all ok, but 64 took 23 s, longer "
                       "than a 20 s pair job (tests/scale/launch_fanout_ssh_results.json)"),
    # srun steps of one allocation over 8 slurmds: 128 at once all exited 0 within 8 s; 256 lost 2, 512 a quarter
    # (the slurmd holding 128 steps at once crashed; slurmctld answered "step creation temporarily disabled").
    "srun": (128, "4-128 srun steps at once in one allocation all ok within 8 s, 256 lost 2 "
                  "(tests/scale/launch_fanout_srun_results.json)"),
}
DEFAULT_MAX_CONCURRENT = LAUNCH_CAPS["mpirun-local"][0]
# Node-stage jobs, each about one launch like a pair job.
NODE_JOB_S = PER_PAIR_S
# Retest: good partners per suspect; two good partners that both fail is what makes a node bad (screen_rules).
RETEST_PARTNERS = 2
# The retests' budget by default (--retest-budget): seconds of retest passes, each a round or two of a suspect
# with two new known-good partners (and its rails alone again where they are in question): ten minutes is ten to
# thirty such passes of 20 s jobs, enough to name or clear a node slow on half of its pairs (issue 45's x0.9) in
# the simulated scale table (docs/scale.md). A suspect still open when it is spent is said in the report.
RETEST_BUDGET_S = 600.0
# Rails alone: distinct partners each node meets on each rail alone in the pair stage (the same two).
RAIL_PARTNERS = 2
# ... and, in a fleet of RAIL_GROUPS_FLEET nodes or more, at least this many pairs with rail points where its rounds
# allow: the rail ratios' noise is read from them (rules/screen_rails.py: from RAIL_NOISE_FLEET_GROUPS = 16 on it
# sets the limit alone, and the bound on its estimate over 32 pairs is 1.63x, over 16 1.89x). Below 16 nodes the
# fleet is too small for that noise either way (rails judged several-fold), and its launches stay as they were.
RAIL_GROUPS_WANTED = 32
RAIL_GROUPS_FLEET = 16
# Loopback: all traffic through the node's NICs (Azure NHC: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), one rail;
# "=" is NCCL_IB_HCA's exact-match prefix (mlx5_1 would otherwise also match mlx5_10).
LOOPBACK_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}


def _check_nodes(nodes):
    nodes = list(nodes)
    if not nodes:
        raise ValueError("screen: no nodes")
    for node in nodes:
        if not isinstance(node, str) or not node:
            raise ValueError(f"screen: a node name must be a non-empty string, not {node!r}")
    seen = set()
    for node in nodes:
        if node in seen:
            raise ValueError(f"screen: node {node} is listed twice")
        seen.add(node)
    return nodes


def node_stage(nodes, rails_by_node=None, large_bytes=64 << 20, small_bytes=8 << 10):
    """The node stage's jobs: {node: [job, ...]} in the order they run on that node (all nodes at once).
    rails_by_node: {node: [HCA port, e.g. "mlx5_0:1", ...]}; a node absent or with [] has no RDMA NIC and gets no
    loopback job. A job: {"kind": "doctor"} | {"kind": "intra", "sizes_bytes": [large, small]} |
    {"kind": "loopback", "rail": port, "sizes_bytes": [large, small], "env": {...}}."""
    nodes = _check_nodes(nodes)
    rails_by_node = rails_by_node or {}
    jobs = {}
    for node in nodes:
        node_jobs = [{"kind": "doctor"}, {"kind": "intra", "sizes_bytes": [large_bytes, small_bytes]}]
        for rail in rails_by_node.get(node) or []:
            env = dict(LOOPBACK_ENV)
            env["NCCL_IB_HCA"] = "=" + rail
            node_jobs.append({"kind": "loopback", "rail": rail, "sizes_bytes": [large_bytes, small_bytes], "env": env})
        jobs[node] = node_jobs
    return jobs


def node_stage_s(jobs, job_s=NODE_JOB_S):
    """Wall time of the node stage: the longest node's jobs one after the other (nodes run in parallel)."""
    return max((len(node_jobs) for node_jobs in jobs.values()), default=0) * job_s


def circle_rounds(nodes):
    """The circle method: a list of rounds {"pairs": [[a, b], ...], "bye": node | None}; every pair of nodes exactly
    once, pairs of a round disjoint. Even n: n - 1 rounds of n / 2 pairs; odd n: n rounds of (n - 1) / 2 pairs and
    one bye each. Node m - 1 (of m = n, or n + 1 with a phantom for the bye) stays fixed; in round r it meets
    node r, and the others pair as (r + k, r - k) mod (m - 1), k = 1 .. m / 2 - 1."""
    nodes = _check_nodes(nodes)
    count = len(nodes)
    if count < 2:
        return []  # one node: nobody to pair with
    slots = count + (count % 2)  # the phantom slot, index count, is the bye
    spin = slots - 1
    rounds = []
    for turn in range(spin):
        pairs = []
        bye = None
        for first, second in [(turn, spin)] + [((turn + k) % spin, (turn - k) % spin) for k in range(1, slots // 2)]:
            if first == count or second == count:
                bye = nodes[second if first == count else first]
                continue
            a, b = (first, second) if first < second else (second, first)
            pairs.append([nodes[a], nodes[b]])
        rounds.append({"pairs": pairs, "bye": bye})
    return rounds


def quick_rounds(nodes, repeats=1, seed=0):
    """`--quick`: `repeats` rounds, each a fresh shuffle of the nodes paired off in order (odd n: the last node of
    the shuffle sits out). random.Random(seed): the same seed gives the same rounds."""
    nodes = _check_nodes(nodes)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"screen: --quick repeats must be a positive integer, not {repeats!r}")
    rng = random.Random(seed)
    position = {node: index for index, node in enumerate(nodes)}
    rounds = []
    for _ in range(repeats):
        order = list(nodes)
        rng.shuffle(order)
        pairs = [sorted(order[i:i + 2], key=position.get) for i in range(0, len(order) - 1, 2)]
        rounds.append({"pairs": pairs, "bye": order[-1] if len(order) % 2 else None})
    return rounds


def pair_schedule(nodes, quick=False, repeats=1, seed=0):
    """The pair stage: {"mode": "full" | "quick", "seed": int | None, "repeats": int, "rounds": [round, ...],
    "pair_count": int, "concurrent_jobs": the most pairs of one round}; round as in circle_rounds plus "round"
    (its 0-based number). seed and repeats only mean something for quick (full: seed None, repeats 1)."""
    rounds = quick_rounds(nodes, repeats, seed) if quick else circle_rounds(nodes)
    for number, entry in enumerate(rounds):
        entry["round"] = number
    return {"mode": "quick" if quick else "full", "seed": seed if quick else None, "repeats": repeats if quick else 1,
            "rounds": rounds, "pair_count": sum(len(entry["pairs"]) for entry in rounds),
            "concurrent_jobs": max((len(entry["pairs"]) for entry in rounds), default=0)}


def retest_rounds(suspects, known_good, met=None, partners=RETEST_PARTNERS, repeat_pairs=(), after_partners=()):
    """Retest rounds: [{"pairs": [[suspect, good], ...], "repeats": [[a, b], ...]}]. Each suspect meets up to
    `partners` nodes of known_good it has not met before (met: {node: iterable of nodes it was paired with; the
    failing partner among them}); in one round every node is in at most one pair and a good node partners one
    suspect. repeat_pairs: pairs to run again (a failure seen once), each in the earliest round where both of its
    nodes are free. after_partners: those of them whose failure left no values (hung, crashed): such a repeat also
    waits until neither of its nodes still waits for a new partner - a suspect meets its known-good partners first,
    so that a node they already show bad (plan.launch_pool.DecisiveSuspects) skips the repeat, which would hold its
    launch to the deadline once more for nothing the rules still need. A repeat no new partner can precede runs as
    soon as its nodes are free. Suspects are never paired with each other. A suspect that runs out of unmet
    good nodes gets fewer partners (its verdict then stays unclear). Cost: O(suspects x good nodes) at worst."""
    suspects = _check_nodes(suspects) if suspects else []
    suspect_set = set(suspects)
    good = [node for node in _check_nodes(known_good) if node not in suspect_set] if known_good else []
    met = {node: set(partners_met) for node, partners_met in (met or {}).items()}
    needed = {node: partners for node in suspects}
    rounds = []
    repeats = [list(pair) for pair in repeat_pairs]
    late = {frozenset(pair) for pair in after_partners}
    cursor = 0  # where the next round starts looking among the good nodes, to spread the load over them
    while repeats or any(needed.values()):
        busy = set()
        entry = {"pairs": [], "repeats": []}
        progressed = False

        def place_repeats(which):  # the repeats `which` admits whose nodes are free, in order
            nonlocal repeats, progressed
            waiting = []
            for pair in repeats:
                if pair[0] in busy or pair[1] in busy or not which(pair):
                    waiting.append(pair)
                else:
                    entry["repeats"].append(pair)
                    busy.update(pair)
                    progressed = True
            repeats = waiting

        place_repeats(lambda pair: frozenset(pair) not in late)  # first, as they always were
        for suspect in suspects:
            if not needed[suspect] or suspect in busy:
                continue
            seen = met.setdefault(suspect, set())
            for step in range(len(good)):
                partner = good[(cursor + step) % len(good)]
                if partner not in busy and partner not in seen and partner != suspect:
                    entry["pairs"].append([suspect, partner])
                    busy.update((suspect, partner))
                    seen.add(partner)
                    needed[suspect] -= 1
                    cursor = (cursor + step + 1) % len(good)
                    progressed = True
                    break
            else:
                if not any(partner not in seen for partner in good):
                    needed[suspect] = 0  # no unmet good node is left for it
        place_repeats(lambda pair: not any(needed.get(node) for node in pair))  # late ones: after the partners
        if not progressed:
            place_repeats(lambda pair: True)  # no partner can come first any more
        if not progressed:
            break
        if entry["pairs"] or entry["repeats"]:
            rounds.append(entry)
    return rounds


def rail_point_pairs(rounds, partners=RAIL_PARTNERS, groups_wanted=RAIL_GROUPS_WANTED):
    """[[pair, ...] per round]: the pairs of each round that also run one point per rail alone - a pair not yet
    measured so with a node that has fewer than `partners` distinct partners on its rails alone (fewer than the
    fleet offers: n - 1). Every node then meets two partners on each rail alone, which is what names the node
    whose rail is slow (two known-good partners, screen_attribution.MIN_GOOD_FAILS) without a retest. In a fleet of
    RAIL_GROUPS_FLEET nodes or more, every pair not yet measured so also runs them while the rounds so far hold fewer
    than groups_wanted pairs with rail points: the rail ratios' own noise, which sets how far below its sibling a
    rail may be (rules/screen_rails.py), is read from them (16-31 nodes: a few rounds more than two)."""
    nodes = {node for entry in rounds for pair in entry["pairs"] for node in pair}
    wanted = min(partners, max(len(nodes) - 1, 0))
    met = {node: set() for node in nodes}
    chosen, groups = [], 0
    for entry in rounds:
        pairs = []
        more = len(nodes) >= RAIL_GROUPS_FLEET and groups < groups_wanted
        for a, b in entry["pairs"]:
            if b not in met[a] and (more or len(met[a]) < wanted or len(met[b]) < wanted):
                pairs.append([a, b])
                met[a].add(b)
                met[b].add(a)
        groups += len(pairs)
        chosen.append(pairs)
    return chosen


def rail_slots(rounds, rail_count):
    """Launch slots the rail points add to these rounds: rail_count for each round with a pair that runs them."""
    if rail_count < 2:
        return 0
    return rail_count * sum(1 for pairs in rail_point_pairs(rounds) if pairs)


def concurrency_cap(kind, requested=None):
    """The most jobs the screen runs at once: {"limit", "kind", "source": "--max-concurrent" | "default", "default":
    the kind's cap, "why": the measurement behind it}. kind: a key of LAUNCH_CAPS (model.launcher's launch_kind);
    requested: --max-concurrent's value, which wins, or None."""
    if kind not in LAUNCH_CAPS:
        raise ValueError(f"screen: no launch cap for {kind!r} (one of {', '.join(LAUNCH_CAPS)})")
    default, why = LAUNCH_CAPS[kind]
    return {"limit": default if requested is None else requested, "kind": kind,
            "source": "default" if requested is None else "--max-concurrent", "default": default, "why": why}


def wall_time_s(pair_rounds, node_stage_wall_s, per_pair_s=PER_PAIR_S, retest_round_count=0, rail_slot_count=0):
    """node stage + (pair rounds + rail slots + retest rounds) x per_pair_s: the pairs of a round run at the same
    time, then each rail's points of that round."""
    return node_stage_wall_s + (pair_rounds + rail_slot_count + retest_round_count) * per_pair_s


def scale_table(node_counts=SCALE_NODE_COUNTS, per_pair_s=PER_PAIR_S, rails=2, quick_repeats=1, seed=0):
    """Rows for docs/bring-up.md's scale table and --dry-run, from schedules really planned (nodes named node0, node1, ...):
    {"nodes", "mode", "rounds", "concurrent_jobs", "pairs", "node_stage_s", "pair_stage_s", "wall_s",
    "retest_round_s"} for each count, full then quick. Node stage: doctor + intra + one loopback per rail, each
    per_pair_s; pair stage: the rounds and each rail alone (rail_slots); wall_s leaves retests out (each retest
    round adds retest_round_s)."""
    rows = []
    for count in node_counts:
        nodes = [f"node{i}" for i in range(count)]
        stage_s = node_stage_s(node_stage(nodes[:1], {nodes[0]: [f"rail{i}" for i in range(rails)]}), per_pair_s)
        for quick in (False, True):
            schedule = pair_schedule(nodes, quick=quick, repeats=quick_repeats, seed=seed)
            rounds = len(schedule["rounds"])
            slots = rail_slots(schedule["rounds"], rails)
            rows.append({"nodes": count, "mode": schedule["mode"], "rounds": rounds,
                         "concurrent_jobs": schedule["concurrent_jobs"], "pairs": schedule["pair_count"],
                         "node_stage_s": stage_s, "pair_stage_s": (rounds + slots) * per_pair_s,
                         "wall_s": wall_time_s(rounds, stage_s, per_pair_s, rail_slot_count=slots),
                         "retest_round_s": per_pair_s})
    return rows


def default_rounds(node_count, table=None):
    """The rounds a screen of node_count nodes runs with no round flag: {"quick": K or None (full),
    "expected_recall": the share of bad nodes found at 2% faults where the table measured it, else None,
    "table_nodes": the fleet size(s) of the table it came from}."""
    table = DEFAULT_ROUNDS if table is None else table
    sizes = sorted(table)
    if node_count < sizes[0]:
        return {"quick": None, "expected_recall": None, "table_nodes": []}
    below = max(size for size in sizes if size <= node_count)
    above = min((size for size in sizes if size >= node_count), default=below)
    chosen = [table[size] for size in sorted({below, above})]
    if any(rounds is None for rounds, _ in chosen):
        return {"quick": None, "expected_recall": None, "table_nodes": sorted({below, above})}
    rounds = max(rounds for rounds, _ in chosen)
    recall = min(recall for r, recall in chosen if r == rounds)
    return {"quick": rounds, "expected_recall": recall, "table_nodes": sorted({below, above})}
