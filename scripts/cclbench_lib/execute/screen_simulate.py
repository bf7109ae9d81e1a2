"""`cclbench screen --simulate FLEET.json`: the screen's launches answered by a fleet model.

SimulatedFleet stands in for the processes execute/screen.Screen starts: each job's launch is
model.screen_fleet.FleetModel.job_result (the exit status, the modelled seconds and the output document coll_perf
or the doctor would write). Screen writes that output where the real job writes it (raw/, doctor/, logs/) and reads
it back with the same parser, so the node stage, the schedule, the retest rounds, the rules and screen.json /
screen.md run unchanged. The jobs run in the screen's own rolling pool (plan/launch_pool.py) on a modelled clock:
each ends its modelled seconds after it started, and the next start when one ends. keep_files False (the scale benchmark): the documents are
parsed in memory and no per-job file or manifest entry is written.
"""

from ..model.screen_fleet import truth
from ..plan.bounds import hang_cost_s
from ..rules.screen_score import score


class SimulatedFleet:
    def __init__(self, model, source, keep_files=True):
        self.model = model
        self.source = source
        self.keep_files = keep_files
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
                "modelled_wall_s": round(self.modelled_s, 3),
                "rules_cpu_s": {step: round(seconds, 4) for step, seconds in sorted(rules_cpu_s.items())}}
