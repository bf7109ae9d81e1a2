#!/usr/bin/env python3
"""plan/launch_time.py's constants are the fit of the committed measurement (tests/scale/launch_time_results.json,
refitted by tests/scale/launch_time.py's own fit()), and the model the dry run and the simulator use is that fit:
a launch's start-up and teardown at 2 nodes is the measured median there; beyond, the launching host's CPU seconds
a node (on a fleet) or the virtual cluster's line. No cluster: the committed results only (well under a second)."""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
import launch_time  # noqa: E402
from cclbench_lib.plan.launch_time import LAUNCH_TIME, group_s, launch_s, overhead_s  # noqa: E402


class LaunchTimeModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(HERE, "launch_time_results.json"), encoding="utf-8") as handle:
            cls.fitted = launch_time.fit(json.load(handle))

    def test_the_constants_are_the_committed_measurements_fit(self):
        for kind, entry in LAUNCH_TIME.items():
            fitted = self.fitted[kind]
            self.assertEqual(tuple(fitted["overhead_vc"]), tuple(entry["overhead_vc"]), kind)
            for key in ("overhead_low_s", "host_s_per_node"):
                self.assertEqual(fitted[key], entry[key], (kind, key))
            self.assertEqual(tuple(fitted["measured_nodes"]), tuple(entry["measured_nodes"]), kind)

    def test_the_model_worked_by_hand(self):
        # mpirun over ssh: 2.72 s at 2 nodes, 5.8 ms a node beyond on a fleet; -0.08 + 0.706 s a node on the
        # virtual cluster. A 1,024-node pair round of 20 s pair jobs: 2.72 + 0.0058 x 1,022 + (20 - 2.72) s.
        self.assertAlmostEqual(overhead_s("mpirun-ssh", 2), 2.72)
        self.assertAlmostEqual(overhead_s("mpirun-ssh", 1024), 2.72 + 0.0058 * 1022)
        self.assertAlmostEqual(overhead_s("mpirun-ssh", 8, "vcluster"), -0.08 + 0.706 * 8)
        self.assertAlmostEqual(launch_s("mpirun-ssh", 1024, group_s("mpirun-ssh", 20, 2)), 20 + 0.0058 * 1022)
        self.assertAlmostEqual(overhead_s("mpirun-local", 64), overhead_s("mpirun-ssh", 64))  # the ssh fit stands in
        self.assertAlmostEqual(overhead_s("srun", 4096), 5.87 + 0.0048 * 4094)


if __name__ == "__main__":
    unittest.main()
