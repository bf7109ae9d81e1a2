"""`cclbench screen --simulate FLEET.json`: the screen's launches answered by a fleet model.

SimulatedFleet stands in for the processes execute/screen.Screen starts: each job's launch is
model.screen_fleet.FleetModel.job_result (the exit status, the modelled seconds and the output document coll_perf
or the doctor would write). Screen writes that output where the real job writes it (raw/, doctor/, logs/) and reads
it back with the same parser, so the node stage, the schedule, the retest rounds, the rules and screen.json /
screen.md run unchanged. The jobs of a batch run one after the other; the modelled clock of a batch slice is its
slowest job (a real slice's jobs run at the same time). keep_files False (the scale benchmark): the documents are
parsed in memory and no per-job file or manifest entry is written.
"""

from ..model.screen_fleet import truth
from ..rules.screen_score import score


class SimulatedFleet:
    def __init__(self, model, source, keep_files=True):
        self.model = model
        self.source = source
        self.keep_files = keep_files
        self.modelled_s = 0.0
        self.slice_s = 0.0
        self.slices = 0
        self.launches = 0

    def launch(self, job, attempt):
        self.launches += 1
        return self.model.job_result(job, attempt)

    def record(self, elapsed_s):
        self.slice_s = max(self.slice_s, elapsed_s or 0.0)

    def end_slice(self):
        self.modelled_s += self.slice_s
        self.slice_s = 0.0
        self.slices += 1

    def summary(self, document, rules_cpu_s):
        """screen.json's "simulation" block (results_schema/screen.schema.json)."""
        fleet = self.model.fleet
        expected = truth(fleet)
        return {"fleet": self.source, "nodes": len(fleet["nodes"]), "rails": list(fleet["rails"]),
                "faults": len(fleet["faults"]), "seed": fleet["seed"],
                "noise": {key: fleet["noise"][key] for key in ("busbw_log_sd", "small_time_log_sd", "rail_log_sd",
                                                                "source", "preset")},
                "truth": {"bad_nodes": expected["bad_nodes"], "bad_links": [list(k) for k in expected["bad_links"]],
                          "bad_rails": [list(k) for k in expected["bad_rails"]]},
                "score": score(document, expected), "launches": self.launches, "batch_slices": self.slices,
                "modelled_wall_s": round(self.modelled_s, 3),
                "rules_cpu_s": {step: round(seconds, 4) for step, seconds in sorted(rules_cpu_s.items())}}
