"""Which launches of a screen stage may start now: a rolling pool instead of slices.

A stage (the node stage, the pair rounds with their rails alone, one retest pass) is a list of jobs in plan order,
each on one or two hosts. A job starts as soon as every one of its hosts has finished its earlier jobs (each host
runs its own jobs one at a time, in plan order, so a node is never in two launches at once and the rounds keep
their meaning for it) and fewer than `limit` jobs run. A slow or hung job holds its own hosts and one slot, not a
whole round: the other nodes go on to their next rounds. The earlier jobs in plan order start first.

A host can be dropped (a node that failed with two partners, execute/screen.py): its jobs not yet started are
skipped and never start; its partners in them go on without them.

Pure bookkeeping, no clock and no processes: execute/screen.py starts what `startable` returns as real launches or
as the fleet model's (the simulator's clock is the earliest end among the running jobs).
"""

import heapq
from collections import deque


class LaunchPool:
    def __init__(self, jobs, limit=None):
        """jobs: [{"hosts": [...], ...}] in plan order; limit: the most running at once (None or 0: no cap)."""
        self.jobs = list(jobs)
        self.limit = limit or len(self.jobs) or 1
        self.queues = {}  # host -> deque of job indices, plan order; the head is the host's current or next job
        for index, job in enumerate(self.jobs):
            for host in job["hosts"]:
                self.queues.setdefault(host, deque()).append(index)
        self.state = ["waiting"] * len(self.jobs)  # waiting, running, finished, skipped
        self.ready = []  # heap of indices whose hosts all have them at their head
        self.running = 0
        self.left = len(self.jobs)
        self.indices = {id(job): index for index, job in enumerate(self.jobs)}
        for queue in self.queues.values():
            self._consider(queue)

    def _at_head(self, index):
        return all(self.queues[host][0] == index for host in self.jobs[index]["hosts"])

    def _consider(self, queue):
        """The queue's head, skipped jobs popped off it, pushed as ready when it heads all its hosts' queues."""
        while queue and self.state[queue[0]] == "skipped":
            queue.popleft()
        if queue and self.state[queue[0]] == "waiting" and self._at_head(queue[0]):
            self.state[queue[0]] = "ready"
            heapq.heappush(self.ready, queue[0])

    def startable(self):
        """The jobs to start now (marked running), earliest in plan order first."""
        started = []
        while self.ready and self.running < self.limit:
            index = heapq.heappop(self.ready)
            if self.state[index] != "ready":
                continue  # skipped while it waited for a slot
            self.state[index] = "running"
            self.running += 1
            started.append(self.jobs[index])
        return started

    def finish(self, job):
        """A running job ended (whatever its result): its hosts move on to their next jobs."""
        index = self.indices[id(job)]
        if self.state[index] != "running":
            raise ValueError(f"job {job.get('name', index)} is not running")
        self.state[index] = "finished"
        self.running -= 1
        self.left -= 1
        for host in job["hosts"]:
            queue = self.queues[host]
            queue.popleft()
            self._consider(queue)

    def requeue(self, job):
        """A running job goes back to wait for a slot, first among its hosts' jobs (it ran and must run again: a
        launch it shared ended before it did)."""
        index = self.indices[id(job)]
        if self.state[index] != "running":
            raise ValueError(f"job {job.get('name', index)} is not running")
        self.state[index] = "ready"
        self.running -= 1
        heapq.heappush(self.ready, index)

    def drop(self, host):
        """The host's jobs that have not started are skipped; returns them (plan order)."""
        skipped = []
        for index in list(self.queues.get(host, ())):
            if self.state[index] in ("waiting", "ready"):
                self.state[index] = "skipped"
                self.left -= 1
                skipped.append(self.jobs[index])
        for job in skipped:
            for other in job["hosts"]:
                self._consider(self.queues[other])
        return skipped

    def done(self):
        return self.left == 0


class FailingNodes:
    """Which nodes to drop from the pair rounds: a node whose pairs failed (no values: it could not start, crashed
    or hung) with two partners that each measured a pair with somebody else has shown what the rules need
    (rules/screen_rules.py: two known-good partners that fail with it make it bad), and each of its later pairs
    would only cost its partner a launch - a hung node's up to hang_cost_s (plan/bounds.py) each, and a full screen
    of a thousand nodes has a thousand of them.

    record(job, ok) after each pair job of the rounds; returns the nodes to drop now (each once)."""

    PARTNERS = 2

    def __init__(self):
        self.failed_with = {}  # node -> partners of its failed pairs
        self.ok = set()  # nodes with a pair that measured
        self.dropped = {}  # node -> the partners it failed with, in the order they proved good

    # After a failed pair, the paths between its nodes are checked again (execute/screen.py); not in a retest pass.
    check_paths = True

    def vouched(self, partner):
        """Whether a failure with this partner counts toward dropping the node: the partner measured elsewhere."""
        return partner in self.ok

    def drop_now(self, node, partner):
        """A node the path check after its failed pair with `partner` found dead at its own end (execute/screen.py):
        dropped at once, after its first failed job; True when it was not dropped before."""
        if node in self.dropped:
            return False
        self.dropped[node] = [partner]
        return True

    def record(self, job, ok):
        a, b = job["hosts"]
        if ok:
            self.ok.update((a, b))
            touched = self.failed_with.get(a, set()) | self.failed_with.get(b, set())
        else:
            self.failed_with.setdefault(a, set()).add(b)
            self.failed_with.setdefault(b, set()).add(a)
            touched = {a, b}
        drop = []
        for node in sorted(touched):
            if node in self.dropped:
                continue
            good = sorted(partner for partner in self.failed_with.get(node, ()) if self.vouched(partner))
            if len(good) >= self.PARTNERS and node not in self.ok:
                self.dropped[node] = good
                drop.append(node)
        return drop


class DecisiveSuspects(FailingNodes):
    """FailingNodes for one retest pass (execute/screen.Screen.retests): a suspect whose pairs failed (no values)
    with PARTNERS distinct nodes that the rules hold known good, and that measured with nobody, is bad by the rules'
    own test (rules/screen_attribution.py, 4.: MIN_GOOD_FAILS known-good partners failed, more than passed) - its
    further retests of the pass (its later partners, its repeats, its rails alone) are dropped: each would only cost
    its partner a launch, a hung node's up to hang_cost_s. Only the pass's known-good nodes vouch (not any node that
    measured: a partner slow in its own right is no witness), and the pairs measured before the pass count.

    earlier_rows: screen.json pair rows so far ({"a", "b", "rail", "reason"}: a row of a pair - not of a rail alone -
    with a reason failed)."""

    check_paths = False

    def __init__(self, known_good, earlier_rows=()):
        super().__init__()
        self.good = set(known_good)
        for row in earlier_rows:
            if row.get("rail") is None:
                self.record({"hosts": [row["a"], row["b"]]}, row.get("reason") is None)
        self.dropped = {}  # what the rounds already showed drops nothing here: the pass retests its suspects

    def vouched(self, partner):
        return partner in self.good


def pool_span(jobs, limit, job_s):
    """The wall time of these jobs in a LaunchPool when each takes job_s: the dry run's estimate. Jobs that end
    together free their hosts together (plan order among them)."""
    pool = LaunchPool(jobs, limit)
    now, ends, order = 0.0, [], 0
    while not pool.done():
        for job in pool.startable():
            order += 1
            heapq.heappush(ends, (now + job_s, order, job))
        if not ends:
            break
        now = ends[0][0]
        while ends and ends[0][0] == now:
            pool.finish(heapq.heappop(ends)[2])
    return now
