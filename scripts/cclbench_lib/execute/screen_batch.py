"""The screen's one launch a stage step (plan/screen_batches.py), for execute/screen.Screen: the launches, real or
the fleet model's, and what each launch's end means for each of its groups.

The stage's jobs stand in a LaunchPool (plan/launch_pool.py: each host's jobs in plan order, one at a time): the
jobs ready at a moment are launched together, one launch for each shape (plan/screen_batches.shape) - on a healthy
fleet exactly the stage's batches, one after the other. When a launch ends, each of its groups is settled
(plan/screen_batches.settle): kept, failed with its own reason (its host moves on), a host the launcher could not
start named and dropped from every later launch, or lost to another group's failure and ready again. Lost groups run
again in parts of at most RELAUNCH_PART_NODES nodes, and the hosts of the groups that finished go on to their next
jobs meanwhile: a hung node holds its own part until its deadline, not the fleet. A node-stage job whose host could
not be started is started once more alone (the second opinion the pool gives the node stage, LAUNCH_ATTEMPTS). A
launch that settles nothing (a launcher error naming no host) leaves its jobs to be started one at a time; a job
that settles nothing alone fails with the launcher's words.

A failing node costs the launches it is in once: a hang holds its whole launch to its deadline (the others' groups
finish and are kept, but their hosts' next jobs wait for the launch's end), a crash ends it and its unfinished
groups run again. So the hosts of a pair-stage group that failed (hung, crashed, timed out; not a host that was not
started: it is dropped) are quarantined for the rest of the screen: each later job on them runs in a launch of its
own, in the rounds and in the retests alike, where a second hang holds only that job's two hosts. Both hosts of the
group are quarantined (the timeout words name both the hung rank and the one that waited on it); a healthy partner
costs nothing by it but launches of its own beside the others'. A node that the node stage's path check (after its
doctors) puts on a failing path is quarantined before its intra-node step: a launch of several nodes crosses their
paths (execute/screen.Screen.node_stage).

Files of a launch: launches/<name>.hosts (rank i on line i), launches/<name>.points.json (its --split-points),
logs/<name>.log (the launcher's output); the manifest's "launches" holds its command, exit and what it settled.
"""

import heapq
import os
import queue
import shlex
import subprocess
import threading
import time

from ..base.errors import CclbenchError
from ..base.files import make_dirs, read_json, write_json_atomic
from ..base.values import utc_now
from ..model.launcher import launch_failure, launcher_of
from ..plan.bounds import TOOL_BOUND_S
from ..plan.launch_pool import LaunchPool
from ..plan.screen_batches import batch_argv, parts, rank_hosts, settle, shape, split_points
from .launch_tmpdir import own_tmpdir
from .progress import LaunchProgress, start_allowance_s, wait_watching

NODE_STAGE_KINDS = ("doctor", "intra", "loopback")
PAIR_KINDS = ("pair", "retest", "repeat")
# Real launches: after one ends, the others that end within this long are settled with it, so that the jobs they
# free start together (one launch), not one launch each.
COALESCE_S = 0.5


class BatchedStage:
    """One stage's jobs batched (Screen.run_batch when the jobs can share launches)."""

    def __init__(self, screen, title, stage):
        self.screen = screen
        self.title = title
        self.stage = stage  # the launches' names: launch.<stage>.<n>
        self.span_s = 0.0  # modelled seconds (simulated)
        self.launches = 0
        self.failed_pairs = {}  # (frozenset of a pair's hosts, round) -> why its pair job failed there
        self.lost = set()  # names of jobs a launch lost: they run again in parts
        self.alone = set()  # names of jobs that run again alone (their host was not started; a launch settled none)
        self.alone_done = set()

    # -- the stage ---------------------------------------------------------------------------------
    def run(self, jobs, results, failing):
        """Runs the jobs (module docstring) into results ({name: {"values", "reason"}}); a job of a node dropped
        from the rounds (failing) or not started earlier is not run (no entry) in the pair stage, failed in the
        node stage."""
        pool = LaunchPool(jobs)
        limit = max(1, self.screen.inputs.get("max_concurrent") or 64)
        running = {}  # launch name -> its jobs
        if self.screen.simulator is not None:
            now, ends = 0.0, []
        else:
            finished = queue.Queue()
        while not pool.done() or running:
            if not self.screen.interrupted:
                for name, part in self._next_launches(pool, results, failing, limit - len(running)):
                    running[name] = part
                    if self.screen.simulator is not None:
                        outcome = self._simulated(name, part)
                        heapq.heappush(ends, (now + outcome["elapsed_s"], name, outcome))
                    else:
                        threading.Thread(target=self._launch_into, args=(name, part, finished), daemon=True).start()
            if not running:
                break
            if self.screen.simulator is not None:
                now, name, outcome = heapq.heappop(ends)
                ended = [(name, outcome)]
                while ends and ends[0][0] <= now + 1e-9:
                    ended.append(heapq.heappop(ends)[1:])
            else:
                try:
                    ended = [finished.get(timeout=0.2)]
                except queue.Empty:
                    continue
                time.sleep(COALESCE_S)
                while not finished.empty():
                    ended.append(finished.get())
            for name, outcome in ended:
                self._ended(name, running.pop(name), outcome, pool, results, failing)
        if self.screen.simulator is not None:
            self.span_s = now
        return []

    def _next_launches(self, pool, results, failing, room):
        """The launches to start now: the ready jobs, one launch for each shape (lost jobs in parts, jobs to run
        alone alone); jobs that are not to run are settled here."""
        if room <= 0:
            return []
        fresh, lost, alone, apart = {}, {}, [], []
        settled = True
        while settled:  # a job settled here frees its hosts' next jobs (the next round's): they may start now too
            settled = False
            for job in pool.startable():
                if self._excluded(job, results, failing):
                    pool.finish(job)
                    settled = True
                    continue
                if job["name"] in self.alone:
                    alone.append([job])
                elif job["name"] not in self.lost and self.screen.quarantined.intersection(job["hosts"]):
                    apart.append([job])
                else:
                    (lost if job["name"] in self.lost else fresh).setdefault(shape(job), []).append(job)
        launches = [members for members in fresh.values()] + apart + \
            [part for members in lost.values() for part in parts(members)] + alone
        started = []
        for index, part in enumerate(launches):
            if index >= room:  # no room: back to wait, first among their hosts' jobs
                for job in part:
                    pool.requeue(job)
                continue
            number = self.screen.launch_numbers.get(self.stage, 0)
            self.screen.launch_numbers[self.stage] = number + 1
            name = f"launch.{self.stage}.{number}"
            self.launches += 1
            started.append((name, part))
        return started

    def _ended(self, name, part, outcome, pool, results, failing):
        """A launch ended: each of its groups settled (module docstring)."""
        settled = settle(part, outcome)
        if len(part) == 1 and part[0]["name"] in self.alone and not settled["resolved"]:
            job = part[0]  # alone, and still nothing said: the launcher's own words are its reason
            settled = dict(settled, failed={job["name"]: outcome.get("problem") or
                                            f"the launch settled nothing (exit {outcome['exit_code']})"},
                           rerun=[], resolved=True)
        by_name = {job["name"]: job for job in part}
        settled, dead = self._paths_checked(name, by_name, settled, failing)
        self.screen.note_launch(name, part, outcome, settled,
                                relaunch=any(job["name"] in self.lost or job["name"] in self.alone for job in part))
        named = []  # hosts named as not started now: their later jobs are not run
        for job_name in settled["done"]:
            self._finished(by_name[job_name], results, outcome["documents"][job_name]["found"], None, name, pool,
                           failing)
        for job_name, reason in settled["failed"].items():
            job = by_name[job_name]
            lost = [host for host in job["hosts"] if host in settled["unreachable"]]
            hung = reason.startswith(("timeout in its group", "hung in its group")) or outcome.get("doctor_bound")
            if job["kind"] in NODE_STAGE_KINDS and job_name not in self.alone_done and not hung and \
                    job_name not in outcome["documents"]:
                # A node-stage job that left no output (its host not started, its rank died) is started once more,
                # alone, beside the others' relaunch: a node that fails the node stage is not paired, and nothing
                # else gives it a second opinion (the pool's LAUNCH_ATTEMPTS). A hang is a finding: not repeated.
                self.alone.add(job_name)
                self.alone_done.add(job_name)
                self.screen.retrying(job, reason)
                pool.requeue(job)
                continue
            for host in lost:
                if host not in self.screen.not_started:
                    named.append(host)
                self.screen.name_not_started(host, settled["unreachable"][host])
            if job["kind"] in PAIR_KINDS:
                self.failed_pairs[(frozenset(job["hosts"]), job.get("round"))] = reason
                if not lost:  # hung, crashed or timed out in its group: later jobs on its hosts run apart
                    self.screen.quarantined.update(job["hosts"])
            self._finished(job, results, None, reason, name, pool, failing)
        if not settled["resolved"]:
            self.screen.log_line(f"# {utc_now()} {name}: settled no group (exit {outcome['exit_code']}"
                                 f"{', ' + outcome['problem'] if outcome.get('problem') else ''}): its "
                                 f"{len(settled['rerun'])} job(s) run alone")
        for job_name in settled["rerun"]:
            if settled["resolved"]:
                self.lost.add(job_name)
            else:
                self.alone.add(job_name)
            pool.requeue(by_name[job_name])
        for host in named:
            for skipped in pool.drop(host):  # its later jobs: not started (node stage: failed with the words)
                self._excluded(skipped, results, failing)
        for node in dead:
            for skipped in pool.drop(node):
                self.screen.skipped(skipped)

    def _paths_checked(self, name, by_name, settled, failing):
        """A pair-stage launch that failed a group as a dead path fails (hung, crashed, timed out in its group, or
        the launch's start-up; not a host the launcher could not start): one path check over every pair group it
        did not settle as done (Screen.check_paths_after). A node found dead is dropped now and its group fails by
        it, also a group that was to run again; a failed group without a dead node, in a launch where another
        group's node is dead, was lost to it (a dead node hangs the whole launch's start-up, and the launcher names
        a rank of any group first) and runs again. Returns (settled, the nodes dropped)."""
        if failing is None or not failing.check_paths or not settled["resolved"]:
            return settled, []
        failed = [by_name[job_name] for job_name in settled["failed"] if by_name[job_name]["kind"] in PAIR_KINDS
                  and not settled["unreachable"].keys() & set(by_name[job_name]["hosts"])]
        if not failed:
            return settled, []
        rerun = [by_name[job_name] for job_name in settled["rerun"] if by_name[job_name]["kind"] in PAIR_KINDS]
        after = failed[0]["name"] if len(failed) + len(rerun) == 1 else name
        drops = self.screen.check_paths_after(after, failed + rerun, failing)
        if not drops:
            return settled, []
        dead_jobs = {job_name: subject for _node, _partner, job_name, subject in drops}
        failed_now, rerun_now = dict(settled["failed"]), list(settled["rerun"])
        for job in failed:
            if job["name"] not in dead_jobs:
                del failed_now[job["name"]]
                rerun_now.append(job["name"])
        for job in rerun:
            if job["name"] in dead_jobs:
                rerun_now.remove(job["name"])
                failed_now[job["name"]] = f"{dead_jobs[job['name']]}: found dead by the path check after {name}"
        for node, partner, job_name, subject in drops:
            self.screen.dropped_dead(node, partner, job_name, subject, after)
        return dict(settled, failed=failed_now, rerun=rerun_now), [node for node, _, _, _ in drops]

    def _finished(self, job, results, found, reason, launch, pool, failing):
        if found is None and reason is None:
            reason = f"no readable output {job['output']}"
        elif reason is None and job["kind"] != "doctor" and found.get("reason"):
            reason = found["reason"]
        self.screen.record(job, results, found, reason, launch=launch)
        pool.finish(job)
        if failing is not None and job["kind"] in PAIR_KINDS:
            for node in self.screen.after_pair(job, results, failing):
                for skipped in pool.drop(node):
                    self.screen.skipped(skipped)

    def _excluded(self, job, results, failing):
        """Whether the job is not run: a host of it could not be started earlier (a node-stage job then fails with
        that reason; a pair-stage job is skipped, its node dropped from the rounds), its node was dropped from the
        rounds (failing), or it is a rail alone of a pair that failed in the same round. Records it so."""
        lost = [host for host in job["hosts"] if host in self.screen.not_started]
        failed = self.failed_pairs.get((frozenset(job["hosts"]), job.get("round"))) if job["kind"] == "rail" else None
        if lost and job["kind"] in NODE_STAGE_KINDS:
            self.screen.record(job, results, None, "; ".join(
                f"not started: {host} could not be started earlier ({self.screen.not_started[host]})"
                for host in lost), launch=None)
            return True
        if lost or (failing is not None and any(host in failing.dropped for host in job["hosts"])):
            self.screen.skipped(job)
            return True
        if failed:
            # Its pair failed in this round (hung, crashed, not started): each rail alone would hold its whole launch
            # to the same failure, which is the finding already; the retests measure its rails again.
            self.screen.log_line(f"# {utc_now()} {job['name']}: not run: its pair failed in this round ({failed})")
            return True
        return False

    # -- launches ----------------------------------------------------------------------------------
    def _simulated(self, name, part):
        outcome = self.screen.simulator.launch_batch(part, self.screen.attempt_of(part), self.screen.values_of)
        if self.screen.simulator.keep_files:
            with open(os.path.join(self.screen.run_dir, "logs", name + ".log"), "w", encoding="utf-8") as log:
                log.write(f"(simulated launch of {len(part)} group(s): exit {outcome['exit_code']}, "
                          f"{outcome['elapsed_s']:g} s)\n" + "".join(line + "\n" for line in outcome["text_lines"]))
        return outcome

    def _launch_into(self, name, part, finished):
        try:
            outcome = self._launch(name, part)
        except Exception as error:  # noqa: BLE001 - a launch that could not be made settles nothing
            outcome = {"exit_code": None, "problem": f"could not launch: {error}", "documents": {}, "groups": {},
                       "launcher": {}, "elapsed_s": 0.0}
        finished.put((name, outcome))

    def _launch(self, name, jobs):
        """One real launch of these jobs; its outcome for settle()."""
        screen = self.screen
        folder = os.path.join(screen.run_dir, "launches")
        make_dirs(folder)
        hosts_path = os.path.join(folder, name + ".hosts")
        points_path = os.path.join(folder, name + ".points.json")
        with open(hosts_path, "w", encoding="utf-8") as handle:
            handle.write("".join(f"{host}\n" for host in rank_hosts(jobs)))
        write_json_atomic(points_path, split_points(jobs))
        argv = batch_argv(screen.inputs, jobs, points_path, hosts_path,
                          log_dir=os.path.join(screen.run_dir, "nccl", name))
        command = shlex.join(argv)
        for job in jobs:
            screen.starting(job, name, command)
            if os.path.exists(job["output"]):
                os.unlink(job["output"])  # a stale output of an earlier attempt is never read as this one's
        log_path = os.path.join(screen.run_dir, "logs", name + ".log")
        env = dict(os.environ)
        env.update(jobs[0].get("env") or {})
        hosts = sorted({host for job in jobs for host in job["hosts"]})
        watch = LaunchProgress(start_allowance_s(hosts)) if "--progress" in argv else None
        limit = screen.inputs.get("launch_timeout_s")
        doctor = jobs[0]["kind"] == "doctor"
        if doctor:  # doctors report no progress: bounded by their own bound after the start-up
            bound = start_allowance_s(hosts) + TOOL_BOUND_S["doctor"]
            limit = min(limit, bound) if limit else bound
        began = time.monotonic()
        code, problem = None, None
        with open(log_path, "wb") as log, own_tmpdir(env, launcher_of(screen.inputs)["name"]) as env:
            log.write(("$ " + command + "\n").encode())
            log.flush()
            try:
                child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
            except OSError as error:
                child = None
                problem = f"cannot start {argv[0]}: {error.strerror}"
            if child is not None:
                with screen.lock:
                    screen.children[name] = child
                try:
                    code, problem = self._wait(child, log_path, watch, limit, began)
                finally:
                    with screen.lock:
                        screen.children.pop(name, None)
        with open(log_path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        documents = {}
        for job in jobs:
            if not os.path.exists(job["output"]):
                continue
            try:
                document = read_json(job["output"], job["name"])
            except CclbenchError:
                continue
            status = document.get("status") if isinstance(document, dict) else None
            documents[job["name"]] = {"status": status, "found": screen.values_of(job, document)}
        return {"exit_code": code, "problem": problem, "documents": documents,
                "groups": watch.groups() if watch is not None else {}, "launcher": launch_failure(text),
                "doctor_bound": doctor and bool(problem), "elapsed_s": round(time.monotonic() - began, 3)}

    def _wait(self, child, log_path, watch, limit, began):
        """(exit code, problem) of a launch: its progress read once a second (a launch whose every rank reports
        nothing past its latest deadline plus the grace is stopped), and its bound."""
        return wait_watching(child, log_path, watch, limit, began, self.screen.stop,
                             f"launch exceeded its bound of {limit:.0f} s" if limit else None)
