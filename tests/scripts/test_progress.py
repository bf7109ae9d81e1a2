"""The runner's watch on a launch's progress (execute/progress.py) and what one hang costs in a plan
(plan/bounds.hang_cost_s): deadlines and times worked out by hand from the documented constants, on a fake clock;
the progress lines are the ones coll_perf writes (bench/core/progress.cpp, pinned in tests/core/watchdog_test.cpp).
"""
import json
import os
import re
import unittest

from helpers import SOURCE_DIR

from cclbench_lib.execute.progress import BETWEEN_PHASES_S, LaunchProgress, start_allowance_s
from cclbench_lib.plan import bounds, estimate


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def line(event, rank, host="node1", **fields):
    return "cclbench-progress " + json.dumps(dict(fields, event=event, rank=rank, host=host)) + "\n"


def enter(rank, phase, deadline, host="node1", case="all_reduce.float.sum.out.64M", collective="all_reduce",
          size=64 << 20):
    return line("enter", rank, host, phase=phase, case=case, collective=collective, bytes=size, deadline_s=deadline)


def leave(rank, phase, elapsed, deadline, host="node1", case="all_reduce.float.sum.out.32M", collective="all_reduce",
          size=32 << 20):
    return line("leave", rank, host, phase=phase, case=case, collective=collective, bytes=size, elapsed_s=elapsed,
                deadline_s=deadline)


class Watch(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        self.watch = LaunchProgress(60.0, grace_s=25.0, clock=self.clock)

    def test_before_any_report_the_start_allowance_counts(self):
        self.assertEqual(self.watch.expires_at(), 1060.0)
        self.clock.now = 1059.9
        self.assertFalse(self.watch.expired())
        self.clock.now = 1060.0
        self.assertTrue(self.watch.expired())
        self.assertIn("no process reported progress within 60 s", self.watch.describe()["text"])

    def test_other_lines_are_not_progress(self):
        self.assertFalse(self.watch.feed("all_reduce.float.sum.out.8K 12.00 us\n"))
        self.assertFalse(self.watch.feed("cclbench-progress {not json}\n"))
        self.assertFalse(self.watch.feed('cclbench-progress {"event": "enter"}\n'), "no rank: not coll_perf's")
        self.assertEqual(self.watch.ranks, {})

    def test_the_latest_deadline_any_rank_announced_plus_the_grace(self):
        self.assertTrue(self.watch.feed(enter(0, "timed iterations", 45.0)))
        self.clock.now = 1010.0
        self.watch.feed(enter(1, "timed iterations", 45.0, host="node2"))
        # Rank 1 heard at 1010 with 45 s: 1055, + 25 s grace.
        self.assertEqual(self.watch.expires_at(), 1080.0)
        self.clock.now = 1079.0
        self.assertFalse(self.watch.expired())
        self.clock.now = 1080.0
        self.assertTrue(self.watch.expired())

    def test_the_work_is_the_first_phase_entered_to_the_last_left(self):
        # coll_perf's 'start' after MPI_Init (1002 s) is start-up; its first case phase at 1005 s, the last left at
        # 1011 s, 'finish' at 1012 s: 7 s of work. The results written and the teardown after it are start-up again.
        self.assertIsNone(self.watch.work_s(), "nothing reported")
        self.clock.now = 1002.0
        self.watch.feed(line("start", 0, phase="start-up", deadline_s=30.0))
        self.watch.feed(line("start", 1, host="node2", phase="start-up", deadline_s=30.0))
        self.assertIsNone(self.watch.work_s(), "started, no case yet")
        self.clock.now = 1005.0
        self.watch.feed(enter(1, "warm-up", 10.0, host="node2"))
        self.clock.now = 1006.0
        self.watch.feed(enter(0, "warm-up", 10.0))
        self.assertIsNone(self.watch.work_s(), "a phase entered, none left")
        self.clock.now = 1011.0
        self.watch.feed(leave(1, "timed iterations", 4.0, 10.0, host="node2"))
        self.assertEqual(self.watch.work_s(), 6.0)
        self.clock.now = 1012.0
        self.watch.feed(line("finish", 0, deadline_s=30.0))
        self.assertEqual(self.watch.work_s(), 7.0)

    def test_a_phase_left_without_a_deadline_allows_the_gap_between_phases(self):
        self.watch.feed(line("leave", 0, phase="case boundary or result exchange", deadline_s=None, elapsed_s=1.0))
        self.assertEqual(self.watch.expires_at(), 1000.0 + BETWEEN_PHASES_S + 25.0)

    def test_the_hang_names_the_case_the_silent_ranks_the_deadline_and_the_smaller_sizes(self):
        self.watch.feed(leave(0, "timed iterations", 0.6, 20.0, size=16 << 20, case="all_reduce.float.sum.out.16M"))
        self.watch.feed(leave(1, "timed iterations", 0.7, 20.0, host="node2", size=16 << 20,
                              case="all_reduce.float.sum.out.16M"))
        self.watch.feed(leave(0, "timed iterations", 1.25, 20.0))
        self.clock.now = 1002.0
        self.watch.feed(enter(0, "timed iterations", 45.0))
        self.clock.now = 1001.0  # rank 1 (node2) froze before it: its last report is older
        self.watch.ranks[1].heard_at = 1001.0
        self.clock.now = 1100.0
        hang = self.watch.describe(expected_ranks=3)
        self.assertEqual(hang["case"], "all_reduce.float.sum.out.64M")
        self.assertEqual(hang["phase"], "timed iterations")
        self.assertEqual(hang["ranks_silent"], [0, 1])
        self.assertEqual(hang["hosts_silent"], ["node1", "node2"])
        text = hang["text"]
        self.assertIn("hung in case all_reduce.float.sum.out.64M (all_reduce, 64M), phase timed iterations: it had run "
                      "98 s against a deadline of 45 s", text)
        self.assertIn("the first to go silent: rank 1 (node2), 99 s ago", text)
        self.assertIn("never reported: rank(s) 2", text)
        # The longest time any rank reported for each smaller size.
        self.assertIn("the same collective's timed iterations at smaller sizes took 16M 0.7 s, 32M 1.25 s", text)


class Constants(unittest.TestCase):
    """The plan's model of coll_perf's learned deadlines (plan/bounds.py) is the one bench/core/deadlines.cpp and
    bench/p2p/engine.cpp apply."""

    def constant(self, path, name):
        with open(os.path.join(SOURCE_DIR, path), encoding="utf-8") as handle:
            found = re.search(rf"constexpr double {name} = ([0-9.e]+);", handle.read())
        self.assertIsNotNone(found, f"{name} in {path}")
        return float(found.group(1))

    def test_the_python_model_matches_the_cpp_rule(self):
        source = "bench/core/deadlines.cpp"
        self.assertEqual(bounds.LEARNED_FLOOR_S, self.constant(source, "kPhaseFloorSeconds"))
        self.assertEqual(bounds.LEARNED_SLACK, self.constant(source, "kSlack"))
        self.assertEqual(bounds.CONNECT_FLOOR_S["nccl"], self.constant(source, "kNcclConnectFloorSeconds"))
        self.assertEqual(bounds.CONNECT_FLOOR_S["mpi"], self.constant(source, "kMpiConnectFloorSeconds"))
        self.assertEqual(bounds.CONNECT_S_PER_RANK, self.constant(source, "kConnectSecondsPerRank"))
        self.assertEqual(bounds.LEARNED_FIRST_RATE_BYTES_PER_S, self.constant(source, "kSlowestRateBytesPerSecond"))
        self.assertEqual(bounds.LEARNED_STEP_S, self.constant(source, "kStepSeconds"))
        self.assertEqual(bounds.TRAFFIC_FACTOR, self.constant(source, "kTrafficFactor"))
        self.assertEqual(bounds.FINISH_ALLOWANCE_S, self.constant("bench/apps/coll_perf.cpp", "kFinishAllowanceSeconds"))
        self.assertEqual(bounds.P2P_MEASUREMENT_DEADLINE_S,
                         self.constant("bench/p2p/engine.cpp", "kMeasurementDeadlineSeconds"))


class HangCost(unittest.TestCase):
    def test_a_sixteen_rank_point_at_the_default_sizes(self):
        argv = ["mpirun", "-np", "16", "coll_perf", "-b", "8K", "-e", "64M", "-f", "2", "-n", "20", "-w", "1",
                "--learn-deadlines", "--progress", "-T", "867"]
        launch = {"name": "inter.x", "kind": "inter", "nranks": 16, "hosts": ["a", "b"], "argv": argv,
                  "collectives": ["all_reduce"], "env": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}}
        # By hand: the largest timed phase, 64M all_reduce at 16 ranks over two 20 GB/s rails: 3 x 20 x (50 us +
        # 67108864 x 1.875 / 40e9) = 0.19174368 s; its deadline 20 + 10 x that = 21.9174368 s. The first collective:
        # 20 + 40 + 16 x 0.02 + (0.02 x 2 x 16 + 2 x 8192 / 1e6) = 60.976384 s; the start-up 20 + 40 + 0.32 =
        # 60.32 s. The largest, 60.976384 s, + 25 s grace + 10 s stop.
        cost = bounds.hang_cost_s(launch, estimate.timed_phase_model(launch))
        self.assertAlmostEqual(cost, 60.976384 + 25 + 10, places=6)
        self.assertLess(cost, 120, "a hang at the user's default sizes ends within two minutes")

    def test_the_mpi_backend_times_one_pass(self):
        launch = {"name": "inter.mpi", "kind": "inter", "nranks": 4, "hosts": ["a", "b"], "collectives": ["all_reduce"],
                  "argv": ["mpirun", "coll_perf", "--backend", "mpi", "-b", "64M", "-e", "64M", "-n", "20"]}
        # By hand: one timed pass of 20 at 100 us + 67108864 x 2 x 3/4 / 0.33e9 (ranks across hosts) = 0.305140291 s
        self.assertAlmostEqual(estimate.timed_phase_model(launch)(64 << 20), 20 * (100e-6 + 67108864 * 1.5 / 0.33e9),
                               places=9)

    def test_the_ceiling_caps_and_tools_without_progress_keep_their_bound(self):
        launch = {"name": "x", "kind": "local", "nranks": 1, "hosts": ["h"], "collectives": ["all_reduce"],
                  "argv": ["coll_perf", "-b", "1G", "-e", "1G", "--learn-deadlines", "--progress", "-T", "50"]}
        self.assertAlmostEqual(bounds.hang_cost_s(launch, lambda size: 1000.0), 50 + 25 + 10)
        self.assertEqual(bounds.hang_cost_s({"kind": "doctor", "argv": ["doctor"], "bound_s": 300}, None), 300.0)
        p2p = {"kind": "p2p", "argv": ["p2p_matrix", "--progress", "--json", "x"], "nranks": 1}
        self.assertEqual(bounds.hang_cost_s(p2p, None), 60 + 25 + 10)

    def test_start_allowance_grows_with_the_hosts(self):
        self.assertEqual(start_allowance_s(["a", "b"]), 60.1)
        self.assertAlmostEqual(start_allowance_s([f"n{i}" for i in range(1000)]), 110.0)


if __name__ == "__main__":
    unittest.main()
