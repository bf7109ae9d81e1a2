"""The schedule of `cclbench screen` (scripts/cclbench_lib/plan/screen_schedule.py): node stage, circle-method
rounds, --quick shuffles, retest rounds, the wall-time estimate and the scale table. Expected counts come from
closed forms written out here (n(n-1)/2 pairs, n-1 rounds for even n, n for odd, floor(n/2) pairs a round),
not from the planner."""
import itertools
import os
import sys
import time
import unittest

import helpers  # noqa: F401  (puts scripts/ on sys.path)
from cclbench_lib.model.launcher import launch_kind
from cclbench_lib.plan import screen_schedule as schedule

sys.path.insert(0, os.path.join(helpers.SOURCE_DIR, "tests", "scale"))
import launch_fanout  # noqa: E402  (the launch benchmark: its committed results and the rule that reads them)


def names(count):
    return [f"node{i}" for i in range(count)]


def expected_rounds(count):
    return count - 1 if count % 2 == 0 else count


class NodeStage(unittest.TestCase):
    def test_jobs_per_node(self):
        jobs = schedule.node_stage(["node5", "node7", "cpu1"], {"node5": ["mlx5_0:1", "mlx5_3:1"],
                                                               "node7": ["mlx5_0:1", "mlx5_3:1"]},
                                   large_bytes=64 << 20, small_bytes=8192)
        self.assertEqual(sorted(jobs), ["cpu1", "node5", "node7"])
        self.assertEqual([job["kind"] for job in jobs["node5"]], ["doctor", "intra", "loopback", "loopback"])
        self.assertEqual([job["kind"] for job in jobs["cpu1"]], ["doctor", "intra"])  # no RDMA NIC: no loopback
        self.assertEqual(jobs["node5"][1]["sizes_bytes"], [67108864, 8192])
        loop = jobs["node7"][3]
        self.assertEqual(loop["rail"], "mlx5_3:1")
        # Azure NHC's loopback: no P2P, no SHM, one rail by NCCL's exact-match prefix.
        self.assertEqual(loop["env"], {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_HCA": "=mlx5_3:1"})
        # Nodes in parallel, jobs in turn: the longest node (4 jobs) sets the stage's time.
        self.assertEqual(schedule.node_stage_s(jobs, 20.0), 80.0)

    def test_bad_names(self):
        for bad in ([], ["a", "a"], ["a", ""], ["a", None]):
            with self.assertRaises(ValueError):
                schedule.node_stage(bad)


class FullSchedule(unittest.TestCase):
    def check(self, count):
        plan = schedule.pair_schedule(names(count))
        rounds = plan["rounds"]
        self.assertEqual(plan["mode"], "full")
        self.assertEqual(len(rounds), expected_rounds(count) if count >= 2 else 0)
        seen = []
        for number, entry in enumerate(rounds):
            self.assertEqual(entry["round"], number)
            in_round = [node for pair in entry["pairs"] for node in pair]
            self.assertEqual(len(in_round), len(set(in_round)), f"round {number} is not disjoint")
            self.assertEqual(len(entry["pairs"]), count // 2)
            if count % 2:
                self.assertIsNotNone(entry["bye"])
                self.assertEqual(set(in_round) | {entry["bye"]}, set(names(count)))
            else:
                self.assertIsNone(entry["bye"])
                self.assertEqual(set(in_round), set(names(count)))
            seen += [frozenset(pair) for pair in entry["pairs"]]
        every = {frozenset(pair) for pair in itertools.combinations(names(count), 2)}
        self.assertEqual(len(seen), count * (count - 1) // 2)
        self.assertEqual(set(seen), every)  # every pair, and (with the count) exactly once
        self.assertEqual(plan["pair_count"], count * (count - 1) // 2)
        self.assertEqual(plan["concurrent_jobs"], count // 2)
        if count % 2 and count > 1:
            self.assertEqual(sorted(entry["bye"] for entry in rounds), sorted(names(count)))  # each sits out once

    def test_even_and_odd(self):
        for count in (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 30, 33):
            with self.subTest(nodes=count):
                self.check(count)

    def test_1024_nodes_plan_fast(self):
        start = time.monotonic()
        plan = schedule.pair_schedule(names(1024))
        elapsed = time.monotonic() - start
        self.assertEqual(plan["pair_count"], 523776)
        self.assertEqual(len(plan["rounds"]), 1023)
        self.assertTrue(all(len(entry["pairs"]) == 512 for entry in plan["rounds"]))
        self.assertEqual(len({frozenset(p) for entry in plan["rounds"] for p in entry["pairs"]}), 523776)
        # A hang detector for a shared machine, not a benchmark: linear planning takes about 1 s here, an O(n^3)
        # planner (1e9 steps) minutes.
        self.assertLess(elapsed, 15.0)


class QuickSchedule(unittest.TestCase):
    def test_seeded_and_covering(self):
        for count in (2, 7, 8, 16):
            with self.subTest(nodes=count):
                first = schedule.pair_schedule(names(count), quick=True, repeats=3, seed=42)
                again = schedule.pair_schedule(names(count), quick=True, repeats=3, seed=42)
                self.assertEqual(first, again)
                self.assertEqual(first["mode"], "quick")
                self.assertEqual(first["seed"], 42)
                self.assertEqual(len(first["rounds"]), 3)
                for entry in first["rounds"]:
                    in_round = [node for pair in entry["pairs"] for node in pair]
                    self.assertEqual(len(entry["pairs"]), count // 2)
                    covered = in_round + ([entry["bye"]] if entry["bye"] else [])
                    self.assertEqual(sorted(covered), sorted(names(count)))  # each node once a round
                self.assertEqual(first["pair_count"], 3 * (count // 2))

    def test_seed_changes_the_shuffle(self):
        plans = {str(schedule.pair_schedule(names(16), quick=True, seed=seed)["rounds"]) for seed in range(5)}
        self.assertGreater(len(plans), 1)
        rounds = schedule.pair_schedule(names(16), quick=True, repeats=2, seed=1)["rounds"]
        self.assertNotEqual(rounds[0]["pairs"], rounds[1]["pairs"])  # a fresh shuffle each repeat

    def test_bad_repeats(self):
        for bad in (0, -1, 1.5, True):
            with self.assertRaises(ValueError):
                schedule.pair_schedule(names(4), quick=True, repeats=bad)


class Retest(unittest.TestCase):
    def test_partners_known_good_distinct_and_disjoint(self):
        good = [f"g{i}" for i in range(5)]
        suspects = ["x", "y", "z"]
        met = {"x": ["y", "g0"], "y": ["x"], "z": ["g1"]}
        rounds = schedule.retest_rounds(suspects, good, met, partners=2)
        partners = {node: [] for node in suspects}
        for entry in rounds:
            in_round = [node for pair in entry["pairs"] + entry["repeats"] for node in pair]
            self.assertEqual(len(in_round), len(set(in_round)), "a node twice in one round")
            for suspect, partner in entry["pairs"]:
                self.assertIn(suspect, suspects)
                self.assertIn(partner, good)  # never suspect with suspect
                partners[suspect].append(partner)
        for suspect in suspects:
            self.assertEqual(len(partners[suspect]), 2)
            self.assertEqual(len(set(partners[suspect])), 2)
            self.assertFalse(set(partners[suspect]) & set(met.get(suspect, [])), "met before")
        # 3 suspects x 2 partners over 5 good nodes: 2 rounds suffice and are used.
        self.assertEqual(len(rounds), 2)

    def test_more_suspects_than_good_nodes(self):
        rounds = schedule.retest_rounds(["s1", "s2", "s3", "s4"], ["g1", "g2"], partners=2)
        per_round_goods = [[pair[1] for pair in entry["pairs"]] for entry in rounds]
        for goods in per_round_goods:
            self.assertEqual(len(goods), len(set(goods)))  # a good node partners one suspect a round
        self.assertEqual(sum(len(goods) for goods in per_round_goods), 8)
        self.assertEqual(len(rounds), 4)

    def test_runs_out_of_unmet_good_nodes(self):
        rounds = schedule.retest_rounds(["x"], ["g1", "g2"], {"x": ["g1"]}, partners=2)
        self.assertEqual([entry["pairs"] for entry in rounds], [[["x", "g2"]]])
        self.assertEqual(schedule.retest_rounds(["x"], [], {}, partners=2), [])

    def test_repeat_pairs_first_and_disjoint(self):
        rounds = schedule.retest_rounds(["a", "b"], ["g1", "g2", "g3"], {"a": ["b"], "b": ["a"]},
                                        partners=1, repeat_pairs=[["a", "b"]])
        self.assertEqual(rounds[0]["repeats"], [["a", "b"]])
        self.assertEqual(rounds[0]["pairs"], [])  # a and b are busy with their repeat
        self.assertEqual(sorted(pair[0] for entry in rounds[1:] for pair in entry["pairs"]), ["a", "b"])

    def test_a_repeat_that_left_no_values_waits_for_its_suspects_new_partners(self):
        # a and b hung together once: each meets a known-good partner first (g1, g2: the good nodes in turn), then
        # their repeat runs - by then a node its partners show bad has its repeat dropped (DecisiveSuspects).
        rounds = schedule.retest_rounds(["a", "b"], ["g1", "g2", "g3"], {"a": ["b"], "b": ["a"]},
                                        partners=1, repeat_pairs=[["a", "b"]], after_partners=[["b", "a"]])
        self.assertEqual(rounds, [{"pairs": [["a", "g1"], ["b", "g2"]], "repeats": []},
                                  {"pairs": [], "repeats": [["a", "b"]]}])
        # A repeat whose nodes wait for no partner (c and d are no suspects) runs in the first round, beside them.
        rounds = schedule.retest_rounds(["a"], ["g1", "g2"], {}, partners=2, repeat_pairs=[["c", "d"]],
                                        after_partners=[["c", "d"]])
        self.assertEqual(rounds, [{"pairs": [["a", "g1"]], "repeats": [["c", "d"]]},
                                  {"pairs": [["a", "g2"]], "repeats": []}])
        # b is free in the first round but its partner is taken (one good node, g1, partners a first): its repeat
        # waits until b has met g1, although b and y are both free at once.
        rounds = schedule.retest_rounds(["a", "b"], ["g1"], {}, partners=1, repeat_pairs=[["b", "y"]],
                                        after_partners=[["b", "y"]])
        self.assertEqual(rounds, [{"pairs": [["a", "g1"]], "repeats": []}, {"pairs": [["b", "g1"]], "repeats": []},
                                  {"pairs": [], "repeats": [["b", "y"]]}])
        # A repeat of a suspect whose partners cannot all be placed (one good node, two wanted) still runs.
        rounds = schedule.retest_rounds(["a"], ["g1"], {}, partners=2, repeat_pairs=[["a", "x"]],
                                        after_partners=[["a", "x"]])
        self.assertEqual(rounds, [{"pairs": [["a", "g1"]], "repeats": []}, {"pairs": [], "repeats": [["a", "x"]]}])


class ScaleTable(unittest.TestCase):
    def test_figures(self):
        per_pair = 20.0
        node_stage = 4 * per_pair  # doctor + intra + two loopbacks, one after the other
        rows = {(row["nodes"], row["mode"]): row for row in schedule.scale_table((2, 16, 128, 1024), per_pair)}
        for count in (2, 16, 128, 1024):
            full = rows[(count, "full")]
            # two nodes: one pair, one round of rails alone; 16-31 nodes: rounds with rails alone until 32 pairs have
            # them (RAIL_GROUPS_WANTED, the rail noise's sample: 4 rounds of 8 at 16); else the first two rounds
            rails_alone = (2 if count == 2 else 8 if count == 16 else 4) * per_pair
            self.assertEqual(full["rounds"], count - 1)
            self.assertEqual(full["concurrent_jobs"], count // 2)
            self.assertEqual(full["pairs"], count * (count - 1) // 2)
            self.assertEqual(full["node_stage_s"], node_stage)
            self.assertEqual(full["wall_s"], node_stage + (count - 1) * per_pair + rails_alone)
            quick = rows[(count, "quick")]
            self.assertEqual((quick["rounds"], quick["concurrent_jobs"], quick["pairs"]), (1, count // 2, count // 2))
            self.assertEqual(quick["wall_s"], node_stage + per_pair + 2 * per_pair)  # one round: its rails alone
        # Written out: 1,024 nodes, full: 523,776 pairs in 1,023 rounds of 512, 80 + 20,460 + 80 s = 20,620 s.
        self.assertEqual((rows[(1024, "full")]["pairs"], rows[(1024, "full")]["wall_s"]), (523776, 20620.0))
        self.assertEqual((rows[(128, "full")]["pairs"], rows[(128, "full")]["wall_s"]), (8128, 2700.0))
        self.assertEqual((rows[(16, "full")]["pairs"], rows[(16, "full")]["wall_s"]), (120, 540.0))
        self.assertEqual((rows[(2, "full")]["pairs"], rows[(2, "full")]["wall_s"]), (1, 140.0))  # one pair, once

    def test_rail_points_meet_two_partners_per_node(self):
        for count in (3, 4, 5, 8):
            rounds = schedule.pair_schedule(names(count))["rounds"]
            chosen = schedule.rail_point_pairs(rounds)
            partners = {node: set() for node in names(count)}
            for entry, pairs in zip(rounds, chosen):
                for pair in pairs:
                    self.assertIn(pair, entry["pairs"])  # a pair of that round
                    partners[pair[0]].add(pair[1])
                    partners[pair[1]].add(pair[0])
            with self.subTest(count=count):
                self.assertTrue(all(len(found) >= 2 for found in partners.values()), partners)
                # Even n: the first two rounds, all of their pairs; 3 nodes: every pair; 5: a few pairs more.
                if count % 2 == 0:
                    self.assertEqual(chosen[:2], [rounds[0]["pairs"], rounds[1]["pairs"]])
                    self.assertEqual(chosen[2:], [[]] * (len(rounds) - 2))
                if count == 3:
                    self.assertEqual(chosen, [entry["pairs"] for entry in rounds])
        two = schedule.pair_schedule(names(2), quick=True, repeats=3)["rounds"]
        self.assertEqual(schedule.rail_point_pairs(two), [two[0]["pairs"], [], []])  # the only pair, once
        self.assertEqual(schedule.rail_slots(schedule.pair_schedule(names(8))["rounds"], 2), 4)  # 2 rounds x 2 rails
        self.assertEqual(schedule.rail_slots(schedule.pair_schedule(names(8))["rounds"], 1), 0)  # nothing to compare

    def test_wall_time_with_retests(self):
        self.assertEqual(schedule.wall_time_s(15, 80.0, 20.0, retest_round_count=2), 80.0 + 17 * 20.0)
        odd = schedule.pair_schedule(names(17))
        self.assertEqual(len(odd["rounds"]), 17)
        self.assertEqual(schedule.wall_time_s(len(odd["rounds"]), 80.0, 20.0), 80.0 + 17 * 20.0)


class LaunchCaps(unittest.TestCase):
    """The screen's launches at once by default, per launcher: from the committed launch benchmarks
    (tests/scale/launch_fanout*_results.json), by one rule (launch_fanout.cap_from_rows)."""

    def test_each_default_is_what_its_committed_measurement_gives(self):
        measured = launch_fanout.caps()
        self.assertEqual(sorted(measured), sorted(schedule.LAUNCH_CAPS))
        for kind, cap in measured.items():
            self.assertIsNotNone(cap, kind)
            self.assertEqual(schedule.LAUNCH_CAPS[kind][0], cap, kind)
            self.assertIn(launch_fanout.RESULTS[kind], schedule.LAUNCH_CAPS[kind][1])  # the dry run cites it

    def test_the_rule_takes_the_largest_count_all_ok_within_a_pair_jobs_time(self):
        def row(count, wall_s, failed=0, timed_out=0):
            return {"count": count, "wall_s": wall_s, "failed": failed, "timed_out": timed_out}
        rows = [row(8, 2.0), row(16, 4.0), row(32, 9.0, failed=1), row(64, 19.0), row(128, 25.0)]
        self.assertEqual(launch_fanout.cap_from_rows(rows, 20.0), 64)
        self.assertEqual(launch_fanout.cap_from_rows(rows, 10.0), 16)  # 32 had a failure
        self.assertIsNone(launch_fanout.cap_from_rows([row(8, 30.0)], 20.0))
        self.assertEqual(launch_fanout.JOB_S, schedule.PER_PAIR_S)

    def test_max_concurrent_wins_over_every_default(self):
        for kind in schedule.LAUNCH_CAPS:
            given = schedule.concurrency_cap(kind, 3)
            self.assertEqual((given["limit"], given["kind"], given["source"], given["default"]),
                             (3, kind, "--max-concurrent", schedule.LAUNCH_CAPS[kind][0]))
            chosen = schedule.concurrency_cap(kind)
            self.assertEqual((chosen["limit"], chosen["source"]), (schedule.LAUNCH_CAPS[kind][0], "default"))
        with self.assertRaises(ValueError):
            schedule.concurrency_cap("pdsh")

    def test_launch_kind_from_the_launcher_and_the_hosts(self):
        srun = {"name": "srun"}
        mpirun = {"name": "mpirun"}
        self.assertEqual(launch_kind(srun, ["localhost", "n1"]), "srun")
        self.assertEqual(launch_kind(mpirun, ["n1", "n2"]), "mpirun-ssh")
        self.assertEqual(launch_kind(mpirun, ["localhost", "127.0.0.1"]), "mpirun-local")
        self.assertEqual(launch_kind(mpirun, ["vm", "localhost"], local_names=("vm",)), "mpirun-local")
        self.assertEqual(launch_kind(mpirun, ["vm", "n2"], local_names=("vm",)), "mpirun-ssh")  # one remote host


if __name__ == "__main__":
    unittest.main()
