"""Watching a launch's progress from outside it: coll_perf and p2p_matrix, started with --progress, report every
phase they enter and leave with its deadline ('cclbench-progress {json}' lines on stderr, forwarded by the
launcher). A launch whose processes report nothing past the latest deadline any of them announced, plus a grace,
is hung: the runner stops it. That covers what no watchdog inside the launch can: a one-rank launch whose only
process is frozen, a whole node frozen (every rank on it stopped, its launcher daemon too), a launcher that
cannot finish an abort.

The grace lets coll_perf's own watchdog act first: it names the case from inside and aborts every rank (the
ranks other than 0 wait the writer's 10 s grace, then MPI_Abort, then the launcher's teardown).
"""

import json
import re
import subprocess
import threading
import time

from ..base.values import format_size
from ..plan.bounds import PROGRESS_GRACE_S

PROGRESS_LINE = re.compile(r"cclbench-progress (\{.*\})\s*$")
# Before the first line: the launcher reaching every host and MPI's wire-up (coll_perf reports 'start' right
# after MPI_Init), per launch and per host on top.
START_ALLOWANCE_S = 60
START_ALLOWANCE_PER_HOST_S = 0.05
# A rank between two phases (after it left a case, before it enters the next) announced no deadline: this long.
BETWEEN_PHASES_S = 20


def start_allowance_s(hosts):
    return START_ALLOWANCE_S + START_ALLOWANCE_PER_HOST_S * max(1, len(hosts or []))


def watches_progress(argv):
    """Whether a launch's tool reports progress (it was planned with --progress)."""
    return "--progress" in (argv or [])


class RankState:
    def __init__(self, rank, host, group=None):
        self.rank = rank
        self.host = host
        self.group = group     # its coll_perf --split-ranks group, when the launch is split
        self.event = None      # the last event
        self.heard_at = None   # when it arrived (runner's clock)
        self.deadline_s = None
        self.open = []         # the phases entered and not left, innermost last: (phase, case, entered_at, event)


class LaunchProgress:
    """What a launch's processes reported, and whether it has gone silent past its deadline."""

    def __init__(self, start_allowance, grace_s=PROGRESS_GRACE_S, clock=time.monotonic):
        self.clock = clock
        self.started_at = clock()
        self.start_allowance = start_allowance
        self.grace_s = grace_s
        self.ranks = {}
        self.history = {}  # (collective, phase) -> {bytes: the longest elapsed_s any rank reported}
        self.lines = 0
        self.timeouts = {}  # group (None unsplit) -> {rank: the first watchdog timeout that rank reported}
        # The launch's work as its ranks reported it: from the first case phase any rank entered to the last phase
        # left (or coll_perf's 'finish' after its cases). What came before (the launcher, MPI_Init, the backend's
        # communicators) and after (the results written, the teardown) is its start-up (work_s).
        self.work_began = None
        self.work_ended = None
        self.lock = threading.Lock()  # fed by the output reader's thread, read by the waiting one

    def feed(self, line):
        """Takes one output line; True when it was a progress line (the caller keeps it out of run.log)."""
        found = PROGRESS_LINE.search(line)
        if not found:
            return False
        try:
            event = json.loads(found.group(1))
        except ValueError:
            return False
        if not isinstance(event, dict) or not isinstance(event.get("rank"), int):
            return False
        with self.lock:
            self._take(event, self.clock())
        return True

    def _take(self, event, now):
        self.lines += 1
        state = self.ranks.get(event["rank"])
        if state is None:
            group = event.get("group") if isinstance(event.get("group"), int) else None
            state = self.ranks[event["rank"]] = RankState(event["rank"], str(event.get("host") or "?"), group)
        if isinstance(event.get("group"), int):
            state.group = event["group"]  # coll_perf's "start" comes before the split: a rank's group comes later
        state.event, state.heard_at = event, now
        deadline = event.get("deadline_s")
        state.deadline_s = float(deadline) if isinstance(deadline, (int, float)) else BETWEEN_PHASES_S
        kind = event.get("event")
        if kind == "enter" and self.work_began is None:
            self.work_began = now
        if kind in ("leave", "finish") and self.work_began is not None:
            self.work_ended = now
        if kind == "enter":
            state.open.append((event.get("phase"), event.get("case"), now, event))
        elif kind == "leave":
            if state.open:
                state.open.pop()
            elapsed = event.get("elapsed_s")
            if event.get("collective") and isinstance(event.get("bytes"), int) and isinstance(elapsed, (int, float)):
                series = self.history.setdefault((event["collective"], event.get("phase")), {})
                series[event["bytes"]] = max(series.get(event["bytes"], 0.0), float(elapsed))
        elif kind in ("start", "finish"):
            state.open = []
        if kind == "timeout":
            self.timeouts.setdefault(state.group, {}).setdefault(event["rank"], event)

    def work_s(self):
        """Seconds from the first case phase entered to the last one left (or 'finish'): the launch's work, measured;
        its wall time less this is its start-up and teardown (plan/estimate.calibrated_eta). None when no phase was
        both entered and left."""
        with self.lock:
            if self.work_began is None or self.work_ended is None:
                return None
            return self.work_ended - self.work_began

    def expires_at(self):
        """When the launch counts as hung: the latest deadline any rank announced, plus the grace."""
        with self.lock:
            return self._expires_at()

    def _expires_at(self):
        if not self.ranks:
            return self.started_at + self.start_allowance
        return max(state.heard_at + state.deadline_s for state in self.ranks.values()) + self.grace_s

    def expired(self, now=None):
        return (self.clock() if now is None else now) >= self.expires_at()

    def largest_deadline_s(self):
        with self.lock:
            return max([state.deadline_s for state in self.ranks.values()] or [self.start_allowance])

    # -- the hang, in words --------------------------------------------------------------------
    def smaller_sizes(self, collective, phase, below_bytes, limit=4):
        series = self.history.get((collective, phase)) or {}
        sizes = sorted(size for size in series if size < below_bytes)[-limit:]
        return ", ".join(f"{format_size(size)} {series[size]:.3g} s" for size in sizes)

    def describe(self, now=None, expected_ranks=None):
        """The hang as data: where each rank was, which stopped reporting first, the deadline against the time the
        phase had run, and the same collective's smaller sizes."""
        now = self.clock() if now is None else now
        with self.lock:
            return self._describe(now, expected_ranks)

    def _describe(self, now, expected_ranks):
        if not self.ranks:
            return {"text": f"no process reported progress within {self.start_allowance:.0f} s of the start (the "
                            f"launcher reaching the hosts, MPI wire-up): it hung starting up",
                    "who": "", "ranks_silent": [], "case": None}
        states = sorted(self.ranks.values(), key=lambda state: state.rank)
        first_silent = min(states, key=lambda state: state.heard_at)
        innermost = next((state.open[-1] for state in sorted(states, key=lambda s: s.heard_at) if state.open), None)
        case = phase = collective = None
        size = None
        parts = []
        if innermost:
            phase, case, entered_at, event = innermost
            collective, size = event.get("collective"), event.get("bytes")
            where = f"case {case}" if case else phase
            if collective and isinstance(size, int):
                where += f" ({collective}, {format_size(size)})"
            parts.append(f"hung in {where}, phase {phase}: it had run {now - entered_at:.0f} s against a deadline of "
                         f"{float(event.get('deadline_s') or 0):.0f} s")
        silent = [state for state in states if now - state.heard_at >= state.deadline_s]
        silent_text = ", ".join(f"{state.rank} ({state.host})" for state in silent)
        who = []  # which ranks went silent: for a hang the runner stopped and for one a watchdog named alike
        if silent:
            last = first_silent.event
            who.append(f"ranks that stopped reporting: {silent_text}; the first to go silent: rank {first_silent.rank} "
                       f"({first_silent.host}), {now - first_silent.heard_at:.0f} s ago, after "
                       f"{last.get('event')} {last.get('phase') or ''}".rstrip())
        if expected_ranks:
            never = [rank for rank in range(expected_ranks) if rank not in self.ranks]
            if never:
                who.append(f"never reported: rank(s) {', '.join(str(rank) for rank in never[:16])}")
        parts += who
        if collective and isinstance(size, int):
            smaller = self.smaller_sizes(collective, phase, size)
            if smaller:
                parts.append(f"the same collective's {phase} at smaller sizes took {smaller}")
        return {"text": "; ".join(parts), "who": "; ".join(who), "case": case, "phase": phase, "collective": collective,
                "bytes": size,
                "ranks_silent": [state.rank for state in silent],
                "hosts_silent": sorted({state.host for state in silent})}

    # -- a split launch's groups ---------------------------------------------------------------------
    def groups(self, now=None):
        """{group: {"finished": every rank it reported ended with 'finish', "timeout": words of its own watchdog's
        timeout or None, "overdue": words of a phase one of its ranks had run past its announced deadline when the
        launch ended, or None}} for the groups of a coll_perf --split-ranks launch (execute/screen.py settles each
        group from this and its output)."""
        now = self.clock() if now is None else now
        with self.lock:
            found = {}
            for state in self.ranks.values():
                if state.group is None:
                    continue
                entry = found.setdefault(state.group, {"finished": True, "timeout": None, "overdue": None})
                kind = (state.event or {}).get("event")
                entry["finished"] = entry["finished"] and kind == "finish"
                if kind in ("enter", "start") and now - state.heard_at >= state.deadline_s and not entry["overdue"]:
                    phase, case = (state.open[-1][0], state.open[-1][1]) if state.open else ("start-up", None)
                    entry["overdue"] = (f"rank {state.rank} ({state.host}) reported nothing for "
                                        f"{now - state.heard_at:.0f} s in " + (f"case {case}, " if case else "") +
                                        f"phase {phase}, past its deadline of {state.deadline_s:.0f} s")
            for group, events in self.timeouts.items():
                if group is None:
                    continue
                entry = found.setdefault(group, {"finished": False, "timeout": None, "overdue": None})
                # Every rank of the group whose watchdog fired, in rank order: the hung rank and the partner that
                # waited on it both time out, and which is which is the retests' to say, so both are named.
                entry["timeout"] = "; ".join(
                    f"rank {event.get('rank')} ({event.get('host')}): case {event.get('case')}, phase "
                    f"{event.get('phase')} did not finish within its deadline of {event.get('deadline_s')} s"
                    for _, event in sorted(events.items()))
            return found


def wait_watching(child, log_path, watch, limit_s, began, stop, over_limit):
    """(exit code, problem) of a started launch: once a second its log's new whole lines of progress (coll_perf
    --progress) feed watch (a LaunchProgress; None: not watched); a launch whose every rank reports nothing past its
    latest deadline plus the grace is stopped (stop(child)), and so is one still running limit_s after began (its
    problem: over_limit)."""
    offset = 0
    while True:
        try:
            return child.wait(timeout=1.0), None
        except subprocess.TimeoutExpired:
            pass
        if watch is not None:
            try:
                with open(log_path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
                complete = chunk.rfind(b"\n") + 1  # whole lines only; the rest is read next time
                offset += complete
                for line in chunk[:complete].decode("utf-8", "replace").splitlines():
                    watch.feed(line)
            except OSError:
                pass
            if watch.expired():
                hang = watch.describe()
                stop(child)
                return child.wait(), (f"stopped: no progress past its deadline ({watch.largest_deadline_s():.0f} s, "
                                      f"learned from the run, + {PROGRESS_GRACE_S} s grace): {hang['text']}")
        if limit_s and time.monotonic() - began >= limit_s:
            stop(child)
            return child.wait(), over_limit
