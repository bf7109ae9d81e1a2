"""`cclbench screen --simulate FLEET.json`: the screen's launches answered by a fleet model.

SimulatedFleet stands in for the processes execute/screen.Screen starts: each job's launch is
model.screen_fleet.FleetModel.job_result (the exit status, the modelled seconds and the output document coll_perf
or the doctor would write). Screen writes that output where the real job writes it (raw/, doctor/, logs/) and reads
it back with the same parser, so the node stage, the schedule, the retest rounds, the rules and screen.json /
screen.md run unchanged. The jobs run in the screen's own rolling pool (plan/launch_pool.py) on a modelled clock:
each ends its modelled seconds after it started, and the next start when one ends. keep_files False (the scale benchmark): the documents are
parsed in memory and no per-job file or manifest entry is written.

Batched (one launch a stage step, execute/screen_batch.py): launch_batch answers a whole launch as the real one
ends, for plan/screen_batches.settle to read alike. Its time: the launch's start-up and teardown at its node count
(plan/launch_time.py, the launcher kind's fit) + its groups' own time, each the fleet's job_s less the start-up and
teardown of a launch of its own nodes. A node that fails to start ends the launch before any rank runs (the launcher
names every such node: it tries them all at once); otherwise the first group to fail ends it - a crash half-way
(the launcher names the first rank it saw die; a group that crashed at the same moment is not named and runs again),
a hang at what one hang costs (its own watchdog reports it: every hung group of the launch is named at once, their
deadlines being the same); the groups that finished before are kept. A doctor launch with a hung doctor ends at the
doctor's bound (plan/bounds.TOOL_BOUND_S), every unfinished doctor then named.
"""

import math
import os

from ..base.files import make_dirs, write_json_atomic
from ..model.screen_fleet import EXIT_NO_START, truth
from ..plan.bounds import TOOL_BOUND_S, hang_cost_s
from ..plan.launch_time import overhead_s
from ..plan.screen_batches import ranks_per_group
from ..rules.screen_score import score


class SimulatedFleet:
    def __init__(self, model, source, keep_files=True, launch_kind="mpirun-ssh"):
        self.model = model
        self.source = source
        self.keep_files = keep_files
        self.launch_kind = launch_kind  # plan/launch_time.py's fit the batched launches take
        self.batch_launches = 0
        self.modelled_s = 0.0
        self.stages = 0
        self.launches = 0
        self.elapsed = {}  # job name -> modelled seconds of its launches (a node-stage job may start twice)

    def launch(self, job, attempt):
        self.launches += 1
        result = self.model.job_result(job, attempt)
        if result.get("hung"):
            result = dict(result, elapsed_s=self.hang_s(job))
        return result

    def hang_s(self, job):
        """How long a job with a hung node lasts: what one hang costs at most (plan/bounds.hang_cost_s), its
        largest learned deadline - the start-up's, the first collective's connect floor, the large size's timed
        phase at the healthy pair's pace - plus the runner's grace and stop, for a node frozen whole that no
        watchdog of its own ends; capped by the job's -T (coll_perf's ceiling)."""
        ranks = self.model.gpus_of(job)
        bus_factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0
        args = job["argv"]
        iterations = float(args[args.index("-n") + 1]) if "-n" in args[:-1] else 20.0
        pace = self.model.fleet["pair_busbw_gbps"] * 1.0e9

        def phase_seconds(size):
            return iterations * size * bus_factor / pace

        ceiling = float(args[args.index("-T") + 1]) if "-T" in args[:-1] else float("inf")
        return min(hang_cost_s({"argv": args, "nranks": ranks}, phase_seconds), ceiling)

    def launch_batch(self, jobs, attempts, values_of):
        """One launch of these jobs, each a group (the module docstring): {"exit_code", "elapsed_s", "documents":
        {name: {"status", "found"}}, "groups": {index: {"timeout"}}, "launcher": {"unreachable", "ranks", "hosts"},
        "problem", "doctor_bound", "text_lines"}, as execute/screen_batch.py's real launch returns it."""
        self.batch_launches += 1
        kind = self.launch_kind
        nodes = len({host for job in jobs for host in job["hosts"]})
        overhead = overhead_s(kind, nodes)
        answers = [self.launch(job, attempts[job["name"]]) for job in jobs]
        outcome = {"exit_code": 0, "documents": {}, "groups": {}, "problem": None, "doctor_bound": False,
                   "launcher": {"unreachable": {}, "ranks": {}, "hosts": {}}, "text_lines": []}
        unreachable = {answer["host"]: f"ssh: connect to host {answer['host']} port 22: Connection timed out "
                                       "(simulated)" for answer in answers if answer["exit_code"] == EXIT_NO_START}
        if unreachable:
            outcome.update(exit_code=EXIT_NO_START, elapsed_s=round(overhead + max(
                answer["elapsed_s"] for answer in answers if answer["exit_code"] == EXIT_NO_START), 3))
            outcome["launcher"]["unreachable"] = unreachable
            outcome["text_lines"] = list(unreachable.values())
            return outcome
        ends = []  # (the group's own seconds, index, fault or None)
        for index, (job, answer) in enumerate(zip(jobs, answers)):
            own = overhead_s(kind, len(job["hosts"]))
            if answer.get("elapsed_s") is None:  # a doctor that never ends: the doctor launch's bound
                ends.append((math.inf, index, answer.get("fault") or "hang"))
            else:
                ends.append((max(0.0, answer["elapsed_s"] - own), index, answer.get("fault")))
        failures = [entry for entry in ends if entry[2] in ("crash", "hang")]
        end = max(seconds for seconds, _, _ in ends) if not failures else min(seconds for seconds, _, _ in failures)
        if math.isinf(end):
            end = float(TOOL_BOUND_S["doctor"])
            outcome.update(doctor_bound=True, problem=f"launch exceeded its bound of {end:.0f} s")
        size = ranks_per_group(jobs[0])
        for seconds, index, fault in ends:
            job, answer = jobs[index], answers[index]
            if fault == "hang" and seconds <= end:
                outcome["groups"][index] = {"finished": False, "overdue": None,
                                            "timeout": f"(simulated) {job['hosts']}: a hung node, its learned "
                                                       f"deadline passed after {seconds:.0f} s"}
                outcome["exit_code"] = answer["exit_code"] or 4
            elif fault == "crash" and seconds <= end and not outcome["launcher"]["ranks"]:
                words = (f"rank {index * size} on {answer['host']} died: signal 9 (Killed) (simulated: the "
                         f"launcher's words)")
                outcome["launcher"]["ranks"][index * size] = words
                outcome["launcher"]["hosts"][answer["host"]] = words
                outcome["exit_code"] = answer["exit_code"]
            elif fault is None and seconds <= end and answer.get("document") is not None:
                document = answer["document"]
                if self.keep_files:
                    make_dirs(os.path.dirname(job["output"]))
                    write_json_atomic(job["output"], document)
                outcome["documents"][job["name"]] = {"status": document.get("status"),
                                                     "found": values_of(job, document)}
        outcome["elapsed_s"] = round(overhead + end, 3)
        return outcome

    def record(self, name, elapsed_s):
        self.elapsed[name] = self.elapsed.get(name, 0.0) + (elapsed_s or 0.0)

    def take_elapsed(self, name):
        """The modelled seconds of the job just run (execute/screen.py's pool ends it that long after its start)."""
        return self.elapsed.pop(name, 0.0)

    def add_stage(self, seconds):
        """A pool of launches ended: its modelled span (the last job's end) adds to the wall time."""
        self.modelled_s += seconds
        self.stages += 1

    def summary(self, document, rules_cpu_s):
        """screen.json's "simulation" block (results_schema/screen.schema.json)."""
        fleet = self.model.fleet
        expected = truth(fleet)
        return {"fleet": self.source, "nodes": len(fleet["nodes"]), "rails": list(fleet["rails"]),
                "faults": len(fleet["faults"]), "seed": fleet["seed"],
                "noise": {key: fleet["noise"][key] for key in ("busbw_log_sd", "small_time_log_sd", "rail_log_sd",
                                                                "source", "preset")},
                "truth": {"bad_nodes": expected["bad_nodes"], "bad_links": [list(k) for k in expected["bad_links"]],
                          "bad_rails": [list(k) for k in expected["bad_rails"]],
                          "bad_groups": expected["bad_groups"]},
                "score": score(document, expected), "launches": self.launches, "pools": self.stages,
                "batched_launches": self.batch_launches, "launch_model": self.launch_kind,
                "modelled_wall_s": round(self.modelled_s, 3),
                "rules_cpu_s": {step: round(seconds, 4) for step, seconds in sorted(rules_cpu_s.items())}}
