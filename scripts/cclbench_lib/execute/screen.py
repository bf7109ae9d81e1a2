"""`cclbench screen`: runs the node stage, the pair rounds and the retests into RESULTS/RUN_ID.

The jobs of a stage (the node stage, the pair rounds with their rails alone, one retest pass) run one launch a
step (plan/screen_batches.py, execute/screen_batch.py: every node's or pair's job of a step a group of one launch,
its output in logs/<launch>.log), or, where they cannot share a launch or --pool asks for it, in a rolling pool
(plan/launch_pool.py: each node's jobs in plan order, one at a time, at most max_concurrent at once), each its own
launcher process, its output in logs/<job>.log; in the pair rounds a node that failed with two partners which
measured elsewhere is dropped from its later pairs, and a node its launcher could not start from all later launches. screen_manifest.json holds the inputs and every job's state and
is rewritten atomically after each stage and every PROGRESS_NOTE_S while one runs; `--resume RUN_ID` skips jobs whose state is complete
and whose output still parses with its values (pair records complete and ok are not rerun). Verdicts come from
rules.screen_rules.classify, screen.json from its to_document, screen.md from render.screen.
"""

import heapq
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time

from ..base.errors import CclbenchError
from ..base.files import make_dirs, open_append, read_json, write_json_atomic
from ..base.values import utc_now
from ..base.version import TOOL_VERSION
from ..model.doctor_paths import path_checks_between
from ..model.launcher import launcher_of
from ..model.screen_records import job_point, point_values
from ..plan.launch_pool import DecisiveSuspects, FailingNodes, LaunchPool
from ..plan.screen_batches import why_not_batched
from ..plan.screen_jobs import backend, node_jobs, pair_job, rail_job, rails_alone
from ..plan.screen_schedule import RETEST_BUDGET_S, node_stage, pair_schedule, rail_point_pairs, retest_rounds
from ..render.screen import write_report
from ..execute.doctor import path_mtu_run_directory, recheck_paths
from ..execute.launch_tmpdir import own_tmpdir
from ..execute.screen_batch import PAIR_KINDS, BatchedStage
from ..execute.progress import LaunchProgress, start_allowance_s, wait_watching, watches_progress
from ..rules.screen_causes import explain_links, shared_causes
from ..rules.dead_paths import NOT_A_PATH_EXITS, dead_ends, without_stale_passes
from ..rules.screen_retests import (RETEST_BUDGET, RETEST_NO_PARTNER, RETEST_PASSES_SPENT, RETEST_SETTLED,
                                    open_suspects)
from ..rules.screen_node_stage import on_failing_paths
from ..rules.screen_rules import (EXIT_CODES, classify, node_stage_verdicts, overall_result, path_mtu_verdicts,
                                  to_document)

MANIFEST = "screen_manifest.json"
RESULT = "screen.json"
# Retest passes: each plans rounds of suspects with unmet known-good nodes from the verdicts so far, until none is
# left (Screen.retests); a screen spends at most --retest-budget seconds on them (RETEST_BUDGET_S by default), and
# RETEST_PASSES_MAX passes at most whatever the budget.
RETEST_PASSES_MAX = 30
# A node-stage launch that left no output at all is started once more (Screen._run_one).
LAUNCH_ATTEMPTS = 2
# While a stage runs, a line on the console (and the manifest saved) this often.
PROGRESS_NOTE_S = 60
NODE_STAGE_KINDS = ("doctor", "intra", "loopback")
EXIT_MEANINGS = {1: "a case failed or data was wrong", 2: "bad usage", 3: "transport expectation failed",
                 4: "timeout", 5: "runtime error", 6: "peer lost", 7: "nothing measured"}


class Interrupted(Exception):
    pass


def unblocked(pairs, blocked):
    """The pairs that cross no failing path (blocked: path_mtu_verdicts' {frozenset((a, b))})."""
    return [pair for pair in pairs if frozenset(pair) not in blocked] if blocked else list(pairs)


def plan_stages(inputs):
    """(node-stage jobs {node: [job]}, pair schedule) for the dry run and the run."""
    hosts = inputs["hosts"]
    rails = {host: list(inputs["hcas"]) for host in hosts} if backend(inputs) == "nccl" else {}
    stage = node_stage(hosts, rails, inputs["large_bytes"], inputs["small_bytes"])
    return stage, pair_schedule(hosts, quick=bool(inputs["quick"]), repeats=inputs["quick"] or 1,
                                seed=inputs["seed"])


class Screen:
    def __init__(self, inputs, run_dir, resume=False, argv=None, verbose=False, stream=sys.stderr, simulator=None,
                 write_outputs=True):
        """simulator (execute/screen_simulate.SimulatedFleet): every launch is the fleet model's instead of a
        process; write_outputs False: screen.json and screen.md are not written (the scale benchmark keeps the
        document in memory)."""
        self.inputs = inputs
        self.simulator = simulator
        self.write_outputs = write_outputs
        self.rules_cpu_s = {}
        self.run_dir = os.path.abspath(run_dir)
        self.resume = resume
        self.argv = argv or []
        self.verbose = verbose
        self.stream = stream
        self.manifest = None
        self.log = None
        self.children = {}
        self.lock = threading.Lock()
        self.interrupted = None
        self.started = time.monotonic()
        self.report_path = None
        self.dropped = []  # nodes dropped from the pair rounds (run_batch's drop_failing) or not started
        # After a failed pair job, the doctor's path check between its nodes and one that measured (execute/doctor.
        # recheck_paths, bounded to seconds): a node whose own end it finds dead is dropped after that first failure.
        self.path_checker = recheck_paths
        self.run_path_checks = []  # what those checks found: joined to the path MTU step's for the retests and rules
        self.not_started = {}  # host -> the launcher's words: it could not be started (execute/screen_batch.py)
        # hosts of a pair group that failed in a batched launch (hung, crashed, timed out), and nodes the node
        # stage's path check put on a failing path: their later jobs run in launches apart (execute/screen_batch.py),
        # so that a second failure holds only them
        self.quarantined = set()
        self.attempts = {}  # job name -> its starts so far (the fleet model's answers depend on it)
        self.launch_count = {"batched": 0, "pool": 0, "relaunches": 0}
        self.pool_reasons = []
        self.stages = {}
        self.launch_numbers = {}  # stage name -> the launches named in it so far (launch.<stage>.<n>)

    # -- state -------------------------------------------------------------------------------------
    def say(self, text):
        print(f"cclbench: {text}", file=self.stream, flush=True)

    def log_line(self, text):
        if self.log:
            self.log.write(text.rstrip("\n") + "\n")
            self.log.flush()

    def save(self, final=False):
        if self.simulator is not None and not final:
            return  # a simulated batch takes microseconds: the manifest is written when the screen starts and ends
        write_json_atomic(os.path.join(self.run_dir, MANIFEST), self.manifest)

    def prepare(self):
        if self.resume:
            self.manifest = read_json(os.path.join(self.run_dir, MANIFEST), "screen manifest")
            if not isinstance(self.manifest, dict) or not isinstance(self.manifest.get("jobs"), dict):
                raise CclbenchError(f"{os.path.join(self.run_dir, MANIFEST)} is not a cclbench screen manifest", 2)
        else:
            self.manifest = {"kind": "screen_manifest", "tool_version": TOOL_VERSION, "created_utc": utc_now(),
                             "inputs": self.inputs, "jobs": {}, "invocations": [], "status": "running"}
        self.manifest["invocations"].append({"argv": self.argv, "started_utc": utc_now(), "resume": self.resume})
        self.manifest["status"] = "running"
        for sub in ("raw", "doctor", "logs", "nccl", "launches"):
            make_dirs(os.path.join(self.run_dir, sub))
        self.save(final=True)
        self.log = open_append(os.path.join(self.run_dir, "screen.log"))

    # -- jobs --------------------------------------------------------------------------------------
    def values(self, job):
        """The job's values from its output (None when it has none to read)."""
        path = job["output"]
        if not os.path.exists(path):
            return None
        try:
            document = read_json(path, job["name"])
        except CclbenchError:
            return None
        return self.values_of(job, document)

    def values_of(self, job, document):
        """The values of a job's output document (a doctor's status, or point_values of coll_perf's -J)."""
        if job["kind"] == "doctor":
            status = document.get("status") if isinstance(document, dict) else None
            return {"doctor": status if status in ("pass", "warn", "fail") else None}
        rails = [] if job["kind"] == "loopback" else list(self.inputs.get("netdevs") or []) + \
            (list(self.inputs["hcas"]) if backend(self.inputs) == "nccl" else [])
        found = point_values(document, self.inputs["large_bytes"], self.inputs["small_bytes"], rails)
        return job_point(job["kind"], job.get("ranks"), found)

    def reusable(self, job):
        state = self.manifest["jobs"].get(job["name"]) or {}
        if not self.resume or state.get("status") != "complete":
            return None
        found = self.values(job)
        if found is None or (job["kind"] != "doctor" and (found["busbw_gbps"] is None or
                                                           (found["small_time_us"] is None and job["kind"] != "rail"))):
            return None
        return found

    def run_batch(self, jobs, title, drop_failing=False, stage=None):
        """Runs the jobs in a rolling pool (plan/launch_pool.py: each host's jobs in plan order, one at a time, at
        most max_concurrent at once); {name: {"values", "reason"}}. drop_failing: the pair rounds - a node whose
        pairs failed with two partners that measured elsewhere is dropped from its later pairs (FailingNodes),
        which are not run and have no entry. stage: the launches' stage name where the title's would not do (the
        node stage's second part goes on from launch.node.N)."""
        results = {}
        todo = []
        for job in jobs:
            found = self.reusable(job)
            if found is not None:
                results[job["name"]] = {"values": found, "reason": None}
                self.log_line(f"# {utc_now()} skip {job['name']}: complete and its output parses")
            else:
                todo.append(job)
        if len(todo) < len(jobs):
            self.say(f"{title}: {len(jobs) - len(todo)} of {len(jobs)} job(s) already complete")
        if not todo:
            return results
        failing = (FailingNodes() if drop_failing is True else drop_failing) or None
        if failing is not None:
            for job in jobs:
                if job["name"] in results and job["kind"] in PAIR_KINDS:
                    failing.record(job, True)
        began = time.monotonic()
        span = 0.0
        why = why_not_batched(self.inputs, todo)
        pooled = todo
        batched = None
        if why is None:
            batched = BatchedStage(self, title, stage or self.stage_label(title))
            pooled = batched.run(todo, results, failing)
            span += batched.span_s
            self.launch_count["batched"] += batched.launches
        elif why not in self.pool_reasons:
            self.pool_reasons.append(why)
            self.log_line(f"# {utc_now()} {title}: {why}")
        pool = LaunchPool([job for job in pooled if job["name"] not in results], self.inputs.get("max_concurrent"))
        if not pool.done() and not self.interrupted:
            span += self._pool_simulated(pool, results, failing) if self.simulator is not None else \
                (self._pool_launched(pool, results, failing, title) or 0.0)
            self.launch_count["pool"] += len(pool.jobs)
        if self.simulator is not None:
            self.simulator.add_stage(span)
        if self.interrupted:
            self.save()
            raise Interrupted()
        self.save()
        failed = sum(1 for job in todo if job["name"] in results and results[job["name"]]["reason"])
        how = (f"{batched.launches} launch(es)" + (f" and {len(pool.jobs)} alone" if pool.jobs else "")) \
            if batched is not None else f"at most {pool.limit} at once"
        self.say(f"{title}: {len(todo)} job(s), {how}, in "
                 + (f"{span:.0f} s modelled" if self.simulator is not None else f"{time.monotonic() - began:.1f}s")
                 + (f", {failed} without values" if failed else "") + f"; elapsed {self.elapsed()}")
        return results

    def stage_label(self, title):
        """The launches' names of a stage: node, pairs, retest1, retest2, ... (the title's first word)."""
        word = {"node": "node", "pair": "pairs"}.get(title.split()[0], title.split()[0])
        self.stages[word] = self.stages.get(word, 0) + 1
        return word if word in ("node", "pairs") and self.stages[word] == 1 else f"{word}{self.stages[word]}"

    def _after(self, pool, job, results, failing):
        """A finished job's bookkeeping: the pool moves on; in the pair rounds, a node that failed with two good
        partners is dropped (its later pairs skipped, said in screen.log and in the schedule)."""
        pool.finish(job)
        if failing is None or job["kind"] not in PAIR_KINDS:
            return
        ok = results[job["name"]]["reason"] is None
        for node in failing.record(job, ok):
            self._dropped(node, failing.dropped[node], len(pool.drop(node)), text=self._drop_text(node, failing))
        if not ok and failing.check_paths:
            code = ((self.manifest or {}).get("jobs", {}).get(job["name"]) or {}).get("exit_code")
            for node, partner, job_name, subject in self.check_paths_after(job["name"], [job], failing, code):
                self.dropped_dead(node, partner, job_name, subject, job["name"], len(pool.drop(node)))

    @staticmethod
    def _drop_text(node, failing):
        """Why a node is dropped: from the rounds, or from the rest of a retest pass (plan.launch_pool)."""
        if isinstance(failing, DecisiveSuspects):
            return (f"{node} failed its pairs with {' and '.join(failing.dropped[node])}, known good: bad by the "
                    f"rules' own test, its further retests of this pass not run")
        return None

    def _dropped(self, node, partners, skipped=0, dead_paths=None, text=None):
        entry = {"node": node, "failed_with": partners, "skipped": skipped}
        if dead_paths is not None:
            entry["dead_paths"] = dead_paths
        self.dropped.append(entry)
        if text is None:
            text = (f"{node} failed its pairs with {' and '.join(partners)}, which measured with other nodes: "
                    f"dropped from the rounds")
        text += f", {skipped} later pair job(s) not run" if skipped else ""
        self.log_line(f"# {utc_now()} {text}")
        if self.simulator is None:
            self.say(text)
        return entry

    def check_paths_after(self, after, jobs, failing, code=None):
        """Pair jobs that failed as a dead path fails (no values, and an exit that may be a path: its deadline, a
        lost peer, the launcher's own status; rules/dead_paths.NOT_A_PATH_EXITS say nothing of the paths; a batched
        launch has no exit of each group's own, None): the paths of their nodes are checked again, and a node whose
        own end is dead (a switch port that stopped forwarding mid-screen) is to be dropped now, after its first
        failed job, like a node that fails to start; its later pairs would each wait out their deadline.

        after: the failed job or launch the check is after; jobs: the pair jobs it failed (a batched launch: every
        group it did not settle as done - a dead node hangs the start-up of the whole launch, its groups sharing one
        world, and which group the launcher names first is chance). Each node probes its partner and a reference: a
        node that measured outside these jobs, or else the first node of the next job. Not every pair of nodes: a
        failed launch of many pairs costs its nodes' number of probes, not its square. Not under the simulator (it
        models no path). Returns [(node, partner, job name, subject)] of the nodes to drop (failing.drop_now has
        taken them)."""
        if self.simulator is not None or code in NOT_A_PATH_EXITS:
            return []
        jobs = [job for job in jobs if not any(host in failing.dropped for host in job["hosts"])]
        hosts = [host for job in jobs for host in job["hosts"]]
        if len(hosts) < 2:
            return []
        outside = sorted(node for node in failing.ok if node not in hosts and node not in failing.dropped)[:1]
        peers, partners, job_of = {}, {}, {}
        for index, job in enumerate(jobs):
            reference = outside or ([jobs[(index + 1) % len(jobs)]["hosts"][0]] if len(jobs) > 1 else [])
            for host in job["hosts"]:
                partner = next(other for other in job["hosts"] if other != host)
                partners[host], job_of[host] = partner, job["name"]
                peers[host] = sorted({partner, *reference} - {host})
        checked = hosts + outside
        started = time.monotonic()
        try:
            entry = self.path_checker(self.run_dir, checked, self.inputs, after,
                                      f"exit {code}" if code is not None else "its group failed", log=self.log_line,
                                      peers=peers)
        except (CclbenchError, OSError) as error:
            self.log_line(f"# {utc_now()} path check after {after} not made: {error}")
            return []
        if entry is None:
            return []
        self.run_path_checks += entry["checks"]
        dead = dead_ends(entry["checks"], hosts, after)
        self.log_line(f"# {utc_now()} path check after {after} failed: {', '.join(checked)} in "
                      f"{time.monotonic() - started:.1f}s: " + ("; ".join(subject for _, subject in dead) or
                                                               "no node's own end dead"))
        drops = []
        for node, subject in dead:
            if failing.drop_now(node, partners[node]):
                drops.append((node, partners[node], job_of[node], subject))
        return drops

    def dropped_dead(self, node, partner, job_name, subject, after, skipped=0):
        """A node check_paths_after found dead, said and recorded as dropped."""
        text = (f"{node}: its paths died ({subject}: the path check after {after} failed"
                + ("" if after == job_name else f", in its pair {job_name}") + "): dropped from the rounds")
        return self._dropped(node, [partner], skipped, dead_paths=subject, text=text)

    # -- the batched stage's bookkeeping (execute/screen_batch.py) ----------------------------------
    def after_pair(self, job, results, failing):
        """A settled pair job of a batched round: a node that failed with two good partners is dropped from the
        later launches (their jobs counted as skipped there). Returns the nodes dropped now. (Its launch's path
        check, when it failed, is BatchedStage's: check_paths_after over the launch's unsettled groups.)"""
        ok = results[job["name"]]["reason"] is None
        dropped = failing.record(job, ok)
        for node in dropped:
            self._dropped(node, failing.dropped[node], text=self._drop_text(node, failing))
        return dropped

    def skipped(self, job):
        """A job not run: one of its nodes was dropped from the rounds or could not be started."""
        for entry in self.dropped:
            if entry["node"] in job["hosts"]:
                entry["skipped"] += 1
                break
        self.log_line(f"# {utc_now()} {job['name']}: not run (its node was dropped)")

    def name_not_started(self, host, words):
        """The launcher could not start this host: it is dropped from every later launch of the screen."""
        if host in self.not_started:
            return
        self.not_started[host] = words
        self.dropped.append({"node": host, "not_started": words, "skipped": 0})
        text = f"{host} could not be started ({words}): dropped from the later launches"
        self.log_line(f"# {utc_now()} {text}")
        if self.simulator is None:
            self.say(text)

    def attempt_of(self, jobs):
        """{name: this start's number} of jobs about to start (the fleet model answers each start anew)."""
        for job in jobs:
            self.attempts[job["name"]] = self.attempts.get(job["name"], 0) + 1
        return {job["name"]: self.attempts[job["name"]] for job in jobs}

    def _state(self, job):
        jobs = self.manifest["jobs"] if self.simulator is None or self.simulator.keep_files else {}
        return jobs.setdefault(job["name"], {"attempts": 0})

    def starting(self, job, launch, command):
        """A job starting as a group of a launch (the manifest says which and its command)."""
        state = self._state(job)
        state.update(kind=job["kind"], hosts=job["hosts"], status="running", started_utc=utc_now(), launch=launch,
                     command=command, attempts=state.get("attempts", 0) + 1)

    def record(self, job, results, found, reason, launch):
        """A batched job's end: its values (or none) and its reason, in the results, the manifest and the log."""
        state = self._state(job)
        if self.simulator is not None:
            state.update(kind=job["kind"], hosts=job["hosts"], launch=launch,
                         attempts=state.get("attempts", 0) + 1)
        state.update(status="failed" if reason else "complete", reason=reason, finished_utc=utc_now(),
                     launch=launch)
        if found is None:
            found = {"doctor": None} if job["kind"] == "doctor" else \
                {"busbw_gbps": None, "small_time_us": None, "transport": None, "rail_bytes": None}
        if reason and launch:
            reason = f"{reason} (see logs/{launch}.log)"
        results[job["name"]] = {"values": found, "reason": reason}
        self.log_line(f"# {utc_now()} {job['name']}: {'failed: ' + reason if reason else 'complete'}")

    def note_launch(self, name, jobs, outcome, settled, relaunch=False):
        """A launch's end in the manifest ("launches") and the log: its exit and what it settled."""
        self.launch_count["relaunches"] += 1 if relaunch else 0
        entry = {"relaunch": relaunch, "jobs": len(jobs), "nodes": len({host for job in jobs for host in job["hosts"]}),
                 "exit_code": outcome["exit_code"], "problem": outcome.get("problem"),
                 "elapsed_s": outcome.get("elapsed_s"), "done": len(settled["done"]),
                 "failed": settled["failed"], "not_started": settled["unreachable"], "rerun": len(settled["rerun"]),
                 "finished_utc": utc_now()}
        if self.simulator is None or self.simulator.keep_files:
            self.manifest.setdefault("launches", {})[name] = dict(self.manifest.get("launches", {}).get(name) or {},
                                                                  **entry)
        words = [f"{entry['done']} done"] + ([f"{len(settled['failed'])} failed"] if settled["failed"] else []) + \
            ([f"{len(settled['unreachable'])} host(s) not started"] if settled["unreachable"] else []) + \
            ([f"{entry['rerun']} to run again"] if settled["rerun"] else [])
        self.log_line(f"# {utc_now()} {name}: {len(jobs)} group(s) on {entry['nodes']} node(s), exit "
                      f"{outcome['exit_code']} in {outcome.get('elapsed_s') or 0:.1f} s: {', '.join(words)}")
        if self.simulator is None and (settled["failed"] or settled["unreachable"]):
            for job_name, reason in settled["failed"].items():
                self.say(f"  {job_name}: {reason}")

    def retrying(self, job, reason):
        """A node-stage job started once more, alone (execute/screen_batch.py): the manifest and the log say why."""
        self._state(job)["retried_reason"] = reason
        self.log_line(f"# {utc_now()} {job['name']}: no output ({reason}): starting it again, alone")

    def stop(self, child):
        self._stop(child)

    def _pool_launched(self, pool, results, failing, title):
        """Real launches: a thread each; the finished ones come back through a queue."""
        finished = queue.Queue()
        running = 0
        last_note = time.monotonic()

        def one(job):
            try:
                self._run_one(job, results)
            finally:
                finished.put(job)

        while not pool.done() or running:
            if not self.interrupted:
                for job in pool.startable():
                    threading.Thread(target=one, args=(job,), daemon=True).start()
                    running += 1
            if not running:
                break
            try:
                job = finished.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() - last_note >= PROGRESS_NOTE_S:
                    last_note = time.monotonic()
                    self.save()
                    self.say(f"{title}: {pool.left} job(s) to go, {running} running; elapsed {self.elapsed()}")
                continue
            running -= 1
            self._after(pool, job, results, failing)
        return None

    def _pool_simulated(self, pool, results, failing):
        """The fleet model's launches on a modelled clock: each job ends at its start + its modelled seconds, and
        the pool starts the next ones at the earliest end. Returns the stage's modelled seconds."""
        now, ends, order = 0.0, [], 0
        while not pool.done():
            for job in pool.startable():
                self._run_one(job, results)
                order += 1
                heapq.heappush(ends, (now + self.simulator.take_elapsed(job["name"]), order, job))
            if not ends:
                break
            now, _, job = heapq.heappop(ends)
            self._after(pool, job, results, failing)
        return now

    def elapsed(self):
        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def _run_one(self, job, results):
        """One job. A node-stage job that left no readable output at all (the launcher or the program failed: an
        agent or orted that did not start on a loaded node) is started once more, and the manifest and the log
        say so: a node that fails the node stage is not paired, and nothing else gives it a second opinion. A
        pair is never retried here (the rules repeat a failed pair, and a failure must reproduce), nor a job
        that measured low or ran out of time: those are findings."""
        jobs = self.manifest["jobs"] if self.simulator is None or self.simulator.keep_files else {}
        state = jobs.setdefault(job["name"], {"attempts": 0})
        state.update(kind=job["kind"], hosts=job["hosts"], status="running", started_utc=utc_now(),
                     command=shlex.join(job["argv"]) if jobs is self.manifest["jobs"] else None, retried_reason=None)
        began = time.monotonic()
        for attempt in range(1, LAUNCH_ATTEMPTS + 1):
            state["attempts"] = state.get("attempts", 0) + 1
            code, problem, found = self._launch(job, attempt)
            if found is not None or self.interrupted or \
                    (problem and ("--launch-timeout" in problem or "no progress past" in problem)) or \
                    job["kind"] not in NODE_STAGE_KINDS or attempt == LAUNCH_ATTEMPTS:
                break
            state["retried_reason"] = problem or f"exit {code} and no readable output"
            self.log_line(f"# {utc_now()} {job['name']}: no output ({state['retried_reason']}): starting it again")
        reason = problem
        if reason is None and code != 0 and not (job["kind"] == "doctor" and code == 1 and found):
            reason = f"exit {code} ({EXIT_MEANINGS.get(code, 'unexpected exit status')})"
        if reason is None and found is None:
            reason = f"no readable output {job['output']}"
        if reason is None and job["kind"] != "doctor" and found["reason"]:
            reason = found["reason"]
        if found is None:
            found = {"doctor": None} if job["kind"] == "doctor" else \
                {"busbw_gbps": None, "small_time_us": None, "transport": None, "rail_bytes": None}
        elapsed = time.monotonic() - began
        state.update(status="failed" if reason else "complete", exit_code=code, reason=reason,
                     finished_utc=utc_now(), elapsed_s=round(elapsed, 3))
        if reason:
            reason = f"{reason} (see logs/{job['name']}.log)"
        results[job["name"]] = {"values": found, "reason": reason}
        self.log_line(f"# {utc_now()} {job['name']}: {'failed: ' + reason if reason else 'complete'} "
                      f"in {elapsed:.1f}s")

    def _launch(self, job, attempt):
        """(exit code, problem or None, values or None) of one start of the job."""
        if self.simulator is not None:
            return self._simulated_launch(job, attempt)
        append = attempt > 1
        log_path = os.path.join(self.run_dir, "logs", job["name"] + ".log")
        env = dict(os.environ)
        env.update(job["env"])
        if os.path.exists(job["output"]):
            os.unlink(job["output"])  # a stale output of an earlier attempt is never read as this one's
        code, problem = None, None
        try:
            with open(log_path, "ab" if append else "wb") as log, \
                    own_tmpdir(env, launcher_of(self.inputs)["name"]) as env:  # launches run side by side
                log.write(("$ " + shlex.join(job["argv"]) + "\n").encode())
                log.flush()
                try:
                    child = subprocess.Popen(job["argv"], stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
                except OSError as error:
                    problem = f"cannot start {job['argv'][0]}: {error.strerror}"
                    child = None
                if child:
                    with self.lock:
                        self.children[job["name"]] = child
                    try:
                        code, problem = self._wait_watching(job, child, log_path)
                    finally:
                        with self.lock:
                            self.children.pop(job["name"], None)
        except OSError as error:
            problem = f"cannot write {log_path}: {error.strerror}"
        return code, problem, (self.values(job) if not problem else None)

    def _wait_watching(self, job, child, log_path):
        """(exit code, problem) of a started job: once a second its log's new progress lines are read (coll_perf
        --progress, execute/progress.py); a job that reports nothing past its latest deadline plus the grace is
        stopped (a partner frozen whole, a node that locked up), and so is one past --launch-timeout."""
        limit = self.inputs.get("launch_timeout_s")
        watch = LaunchProgress(start_allowance_s(job["hosts"])) if watches_progress(job["argv"]) else None
        return wait_watching(child, log_path, watch, limit, time.monotonic(), self._stop,
                             f"launch exceeded --launch-timeout {limit}s")

    def _simulated_launch(self, job, attempt):
        """The fleet model's launch: its output written where coll_perf or the doctor writes it (keep_files) and
        read back as a real job's, or parsed in memory; the launch timeout applies to the modelled time."""
        result = self.simulator.launch(job, attempt)
        limit = self.inputs.get("launch_timeout_s")
        code, elapsed, document, problem = result["exit_code"], result["elapsed_s"], result["document"], None
        if elapsed is None or (limit and elapsed > limit):
            code, elapsed, document = -15, limit, None
            problem = f"launch exceeded --launch-timeout {limit}s"
        self.simulator.record(job["name"], elapsed)
        if not self.simulator.keep_files:
            return code, problem, (self.values_of(job, document) if document is not None and not problem else None)
        if os.path.exists(job["output"]):
            os.unlink(job["output"])
        with open(os.path.join(self.run_dir, "logs", job["name"] + ".log"), "ab" if attempt > 1 else "wb") as log:
            log.write(("$ " + shlex.join(job["argv"]) + f"\n(simulated: exit {code}, {elapsed:g} s)\n").encode())
        if document is not None:
            make_dirs(os.path.dirname(job["output"]))
            write_json_atomic(job["output"], document)
        return code, problem, (self.values(job) if not problem else None)

    @staticmethod
    def _stop(child):
        """SIGCONT and SIGTERM to the launcher's process group (a stopped process holds a SIGTERM until it runs
        again), SIGKILL 10 s later."""
        try:
            os.killpg(child.pid, signal.SIGCONT)
            os.killpg(child.pid, signal.SIGTERM)
        except OSError:
            return
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass

    def on_signal(self, signum, _frame):
        self.interrupted = signum
        with self.lock:
            children = list(self.children.values())
        for child in children:
            threading.Thread(target=self._stop, args=(child,), daemon=True).start()

    # -- stages ------------------------------------------------------------------------------------
    def node_stage(self, stage):
        """(every node's node-stage values, the path MTU probes between the nodes whose doctor passed: path_mtu_step)."""
        jobs = {node: node_jobs(self.inputs, self.run_dir, node, specs) for node, specs in stage.items()}
        steps = max((len(node_list) for node_list in jobs.values()), default=0)
        data = {node: {"doctor": None, "intra_busbw_gbps": None, "intra_small_time_us": None,
                       "loopback_busbw_gbps": {}, "loopback_reason": {}} for node in self.inputs["hosts"]}
        # Every node's steps in step-major plan order (the first steps of all nodes are started first); each node
        # runs its own in order, none waits for the others'.
        batch = [node_list[step] for step in range(steps) for node_list in jobs.values() if step < len(node_list)]
        # The doctors first, then the path MTU between the nodes they passed, then the rest: one launch of the
        # nodes' intra-node points is one MPI job across them (its split and wire-up cross the nodes' paths), so a
        # node on a path that fails would hold every node's launch to its deadline, and the others' relaunches
        # too (4 virtual nodes, node4's eth0 dead: 3 launches of 24-26 s, 83 s for the stage). Nodes the check
        # finds on a failing path run their jobs in launches apart (Screen.quarantined).
        doctors = [job for job in batch if job["kind"] == "doctor"]
        rest = [job for job in batch if job["kind"] != "doctor"]
        results = self.run_batch(doctors, "node stage (doctor)", stage="node") if doctors else {}
        doctor_status = {job["hosts"][0]: ((results.get(job["name"]) or {}).get("values") or {}).get("doctor")
                         for job in doctors}
        passed = [node for node in self.inputs["hosts"] if doctor_status.get(node) in ("pass", "warn")]
        path_checks = self.path_mtu_step(passed)
        apart = on_failing_paths(self.inputs["hosts"], path_checks)
        if apart and rest:
            self.quarantined.update(apart)
            self.log_line(f"# {utc_now()} node stage: {', '.join(apart)} on a failing path: "
                          f"{'its' if len(apart) == 1 else 'their'} jobs run in launches apart")
        if rest:
            kinds = ", ".join(dict.fromkeys(job["kind"] for job in rest))
            results.update(self.run_batch(rest, f"node stage ({kinds})", stage="node"))
        for job in batch:
            node, found, reason = job["hosts"][0], results[job["name"]]["values"], results[job["name"]]["reason"]
            if job["kind"] == "doctor":
                data[node]["doctor"] = found["doctor"]
            elif job["kind"] == "intra":
                data[node].update(intra_busbw_gbps=found["busbw_gbps"], intra_small_time_us=found["small_time_us"],
                                  intra_reason=reason, intra_ranks=job.get("ranks"),
                                  intra_correctness_only=bool(job.get("correctness_only")))
            else:
                data[node]["loopback_busbw_gbps"][job["rail"]] = found["busbw_gbps"]
                data[node]["loopback_reason"][job["rail"]] = reason
        return data, path_checks

    @staticmethod
    def row(job, result, number):
        found, reason = result["values"], result["reason"]
        stage = {"pair": "pair", "rail": "rail"}.get(job["kind"], "retest")
        return {"a": job["hosts"][0], "b": job["hosts"][1], "round": number, "stage": stage, "rail": job.get("rail"),
                "job": job["name"],
                "busbw_gbps": found["busbw_gbps"], "small_time_us": found["small_time_us"],
                "reason": reason, "transport": found["transport"], "rail_bytes": found["rail_bytes"]}

    def rows(self, jobs, results):
        """The pair rows of these jobs in plan order; a job not run (its node dropped) has none."""
        return [self.row(job, results[job["name"]], job["round"]) for job in jobs if job["name"] in results]

    def run(self):
        self.prepare()
        old = {sig: signal.signal(sig, self.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            document = self._run()
        except Interrupted:
            self.finish("interrupted")
            code = 130 if self.interrupted == signal.SIGINT else 143
            raise CclbenchError(f"interrupted; resume with: cclbench screen --resume {os.path.basename(self.run_dir)}",
                                code) from None
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        self.finish("complete")
        return document

    def _run(self):
        inputs = self.inputs
        hosts = inputs["hosts"]
        stage, _ = plan_stages(inputs)
        data, node_stage_path_checks = self.node_stage(stage)
        _, paired = node_stage_verdicts(hosts, data)
        # The path MTU between the nodes that passed alone (the node stage's probes, made after its doctors,
        # between those nodes): a node whose paths fail is not paired, and no pair
        # crosses a failing path (either would wait out its watchdog: NCCL hangs on such a path). Its verdicts are
        # computed once here and passed down to the node stage's verdicts and to classify.
        path_checks = path_checks_between(node_stage_path_checks, paired)
        path_mtu = path_mtu_verdicts(hosts, path_checks)
        _, paired = node_stage_verdicts(hosts, data, path_mtu=path_mtu)
        blocked = path_mtu[2]
        left_out = [node for node in hosts if node not in paired]
        if left_out:
            self.say(f"node stage: {', '.join(left_out)} failed and {'is' if len(left_out) == 1 else 'are'} not paired")
        if len(paired) >= 2:
            schedule = pair_schedule(paired, quick=bool(inputs["quick"]), repeats=inputs["quick"] or 1,
                                     seed=inputs["seed"])
        else:
            schedule = {"mode": "quick" if inputs["quick"] else "full", "seed": inputs["seed"] if inputs["quick"]
                        else None, "repeats": inputs["quick"] or 1, "rounds": [], "pair_count": 0,
                        "concurrent_jobs": 0}
        rails = rails_alone(inputs)
        with_rails = rail_point_pairs(schedule["rounds"]) if rails else [[] for _ in schedule["rounds"]]
        jobs = []
        for entry, rail_pairs in zip(schedule["rounds"], with_rails):
            entry["pairs"] = unblocked(entry["pairs"], blocked)
            jobs += self.pair_jobs([("pair", pair) for pair in entry["pairs"]], entry["round"])
            jobs += self.rail_jobs(unblocked(rail_pairs, blocked), rails, entry["round"])
        # The rounds and their rails alone in one rolling pool; a node that failed with two good partners is
        # dropped from its later pairs.
        pairs = self.rows(jobs, self.run_batch(jobs, f"pair rounds ({len(schedule['rounds'])})", drop_failing=True))
        schedule["dropped"] = list(self.dropped)
        if self.run_path_checks:
            # Paths found dead after a failed pair (a node's switch ports stopped forwarding mid-screen) are judged
            # as the path MTU step's (a path failed in any check is failed): the rules name the node's dead rails
            # (rail.dead), and no retest crosses them (each would wait out its deadline). The step's passes of a
            # node end found dead since are stale: else node3, reaching at the start the nodes no later check
            # probed, would outweigh the two that fail with it now (its dead paths read as links).
            path_checks = without_stale_passes(path_checks, self.run_path_checks) + self.run_path_checks
            path_mtu = path_mtu_verdicts(hosts, path_checks)
            blocked = path_mtu[2]
        verdicts = self.judge(hosts, data, pairs, path_checks, path_mtu)
        pairs, verdicts, retests = self.retests(schedule, hosts, data, pairs, verdicts, (path_checks, path_mtu),
                                                blocked, rails)
        document = to_document(schedule, data, pairs, verdicts, TOOL_VERSION, utc_now())
        document["retests"] = retests
        for row, pair in zip(document["pairs"], pairs):
            missing = row["busbw_gbps"] is None or (row["small_time_us"] is None and row["stage"] != "rail")
            row["reason"] = pair["reason"] if missing else None
        groups = inputs.get("groups") or {}
        causes = shared_causes(document["nodes"], document["rails"], groups, document["pairs"])
        # A link slow only by its end's slow group is that group's (rules/screen_causes.explain_links).
        document["links"], document["shared_causes"] = explain_links(causes, document["links"], document["pairs"],
                                                                     groups)
        document["result"] = overall_result(document["nodes"], document["links"], document["rails"])
        document["exit_code"] = EXIT_CODES[document["result"]]
        document["launches"] = {"mode": "pool" if inputs.get("launch_mode") == "pool" else "batched",
                                "batched": self.launch_count["batched"], "pool": self.launch_count["pool"],
                                "relaunches": self.launch_count["relaunches"], "pool_reasons": list(self.pool_reasons),
                                "not_started": dict(self.not_started)}
        if self.simulator is not None:
            document["simulation"] = self.simulator.summary(document, self.rules_cpu_s)
        if self.write_outputs:
            write_json_atomic(os.path.join(self.run_dir, RESULT), document)
            self.report_path = write_report(self.run_dir, document)
        return document

    def retests(self, schedule, hosts, data, pairs, verdicts, path, blocked, rails):
        """Targeted retests until every suspect is named or cleared: each pass gives each suspect (from its pairs or
        its rails alone) up to RETEST_PARTNERS known-good partners it has not met, repeats the pairs whose failure
        is not yet reproduced, and measures a rail suspect's rails alone again with each partner; the verdicts are
        then judged again. The passes go on while the retest budget (--retest-budget, seconds of retests: modelled
        ones in a simulation) is not spent; a pass that starts within it runs to its end. Returns (pairs, verdicts,
        screen.json's "retests": passes, budget, seconds spent, why they stopped, the suspects left open and why, the
        suspects a pass dropped once its retests proved them bad)."""
        budget = self.inputs.get("retest_budget_s")
        budget = RETEST_BUDGET_S if budget is None else budget
        schedule["retest_rounds"] = []
        began = self.clock_s()
        passes, stopped, dropped = 0, RETEST_SETTLED, []
        while True:
            retest = verdicts["retest"]
            if not retest["suspects"] and not retest["repeat_pairs"]:
                stopped = RETEST_SETTLED
                break
            if self.clock_s() - began >= budget:
                stopped = RETEST_BUDGET
                break
            if passes >= RETEST_PASSES_MAX:
                stopped = RETEST_PASSES_SPENT
                break
            no_values = {frozenset((row["a"], row["b"])) for row in pairs if row.get("rail") is None and row["reason"]}
            rounds = retest_rounds(retest["suspects"], retest["known_good"], retest["met"],
                                   repeat_pairs=retest["repeat_pairs"],
                                   after_partners=[pair for pair in retest["repeat_pairs"] if frozenset(pair) in no_values])
            jobs = []
            for entry in rounds:
                entry = {key: unblocked(entry[key], blocked) for key in ("pairs", "repeats")}
                if not entry["pairs"] and not entry["repeats"]:
                    continue
                number = len(schedule["rounds"]) + len(schedule["retest_rounds"])
                schedule["retest_rounds"].append({"round": number, "pairs": entry["pairs"],
                                                  "repeats": entry["repeats"]})
                both = [("repeat", pair) for pair in entry["repeats"]] + [("retest", pair) for pair in entry["pairs"]]
                jobs += self.pair_jobs(both, number)
                if rails:  # a node suspect from its rails alone is measured on them again with each partner
                    again = [pair for _, pair in both if set(pair) & set(retest["rail_suspects"])]
                    jobs += self.rail_jobs(again, rails, number)
            if not jobs:
                stopped = RETEST_NO_PARTNER
                break
            passes += 1
            named = retest["suspects"]
            title = f"retest {passes} ({', '.join(named) if len(named) <= 8 else f'{len(named)} suspects'}" + \
                (f", {len(retest['repeat_pairs'])} repeat(s)" if retest["repeat_pairs"] else "") + ")"
            decisive = DecisiveSuspects(retest["known_good"], pairs)
            mark = len(self.dropped)
            pairs += self.rows(jobs, self.run_batch(jobs, title, drop_failing=decisive))
            # The suspects the pass showed bad by the rules' own test, their further retests not run (screen.json
            # retests.dropped, as screen.log says it)
            dropped += [{"pass": passes, "node": entry["node"], "failed_with": list(entry["failed_with"]),
                         "skipped": entry["skipped"]} for entry in self.dropped[mark:]]
            verdicts = self.judge(hosts, data, pairs, *path)
        spent = self.clock_s() - began
        found = {"passes": passes, "budget_s": budget, "spent_s": round(spent, 3), "stopped": stopped,
                 "open": open_suspects(verdicts, stopped), "dropped": dropped}
        if found["open"]:
            self.say(f"retests: {len(found['open'])} suspect(s) still open after {passes} pass(es), {spent:.0f} s "
                     f"({stopped})")
        return pairs, verdicts, found

    def clock_s(self):
        """Seconds on the screen's clock: the modelled one in a simulation, else the wall."""
        return self.simulator.modelled_s if self.simulator is not None else time.monotonic()

    def judge(self, hosts, data, pairs, path_checks, path_mtu):
        """classify, with each of its steps' CPU seconds added to self.rules_cpu_s (the simulator reports them); a
        node its launcher could not start is judged with the launcher's words (rules: node.not_started)."""
        for host, words in self.not_started.items():
            data.setdefault(host, {})["not_started"] = words
        return classify(hosts, data, pairs, path_checks, path_mtu=path_mtu, timings=self.rules_cpu_s)

    def path_mtu_step(self, nodes):
        """The doctor's path MTU probes between these nodes (doctor/path_mtu.json); None when not run: fewer
        than two nodes, or a fixture sysfs root (no live addresses)."""
        if len(nodes) < 2 or self.inputs.get("sysfs_root") or self.simulator is not None:
            return None  # the simulator models no path MTU (docs/scale.md)
        started = time.monotonic()
        checks = path_mtu_run_directory(self.run_dir, nodes, self.inputs, log=self.log_line)
        failed = [check for check in checks if check.get("status") == "fail"]
        self.say(f"path MTU: {len(checks)} check(s) between {len(nodes)} nodes, {len(failed)} failed "
                 f"({time.monotonic() - started:.1f} s)")
        for check in failed:
            self.say(f"  path MTU FAIL {check.get('subject')}: {check.get('detail')}")
        return checks

    def rail_jobs(self, rail_pairs, rails, number):
        """Each rail alone on these pairs, one rail after the other on each pair."""
        return [rail_job(self.inputs, self.run_dir, a, b, number, rail) for a, b in rail_pairs for rail in rails]

    def pair_jobs(self, kinds_and_pairs, number):
        """The pair jobs (kind pair, repeat or retest) of one round."""
        return [pair_job(self.inputs, self.run_dir, a, b, number, kind) for kind, (a, b) in kinds_and_pairs]

    def finish(self, status):
        self.manifest["status"] = status
        self.manifest["invocations"][-1].update(finished_utc=utc_now(), status=status)
        self.save(final=True)
        if self.log:
            self.log.close()
            self.log = None
