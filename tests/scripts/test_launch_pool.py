"""plan/launch_pool.py: the screen's rolling pool of launches and the nodes it drops.

Expected orders and spans are worked out by hand from the jobs each test lists, never from the pool's own output."""
import unittest

import helpers  # noqa: F401 (scripts/ on the path)
from cclbench_lib.plan.launch_pool import DecisiveSuspects, FailingNodes, LaunchPool, pool_span


def jobs_of(*pairs):
    return [{"name": f"j{index}", "hosts": list(hosts), "kind": "pair"} for index, hosts in enumerate(pairs)]


def names(jobs):
    return [job["name"] for job in jobs]


class Pool(unittest.TestCase):
    def test_each_host_runs_its_jobs_in_plan_order_one_at_a_time(self):
        # round 1: a-b c-d; round 2: a-c b-d. a-c waits for both a-b and c-d; b-d likewise.
        jobs = jobs_of("ab", "cd", "ac", "bd")
        pool = LaunchPool(jobs)
        self.assertEqual(names(pool.startable()), ["j0", "j1"])
        self.assertEqual(pool.startable(), [])
        pool.finish(jobs[0])  # a and b are free, but a-c still waits for c, b-d for d
        self.assertEqual(pool.startable(), [])
        pool.finish(jobs[1])
        self.assertEqual(names(pool.startable()), ["j2", "j3"])
        pool.finish(jobs[3])
        pool.finish(jobs[2])
        self.assertTrue(pool.done())

    def test_a_slow_job_holds_its_own_hosts_not_the_round(self):
        # round 1: a-b (slow) c-d e-f; round 2: c-e d-f a-b. The second round's c-e and d-f go on while a-b runs.
        jobs = jobs_of("ab", "cd", "ef", "ce", "df", "ab")
        pool = LaunchPool(jobs)
        self.assertEqual(names(pool.startable()), ["j0", "j1", "j2"])
        pool.finish(jobs[1])
        pool.finish(jobs[2])
        self.assertEqual(names(pool.startable()), ["j3", "j4"])
        with self.assertRaises(ValueError):
            pool.finish(jobs[5])  # not started: a-b of round 1 still holds a and b

    def test_the_cap_and_plan_order_among_the_ready(self):
        jobs = jobs_of("ab", "cd", "ef", "gh")
        pool = LaunchPool(jobs, limit=3)
        self.assertEqual(names(pool.startable()), ["j0", "j1", "j2"])
        pool.finish(jobs[1])
        self.assertEqual(names(pool.startable()), ["j3"])

    def test_a_dropped_host_skips_what_it_has_not_started_and_frees_its_partners(self):
        # a in every round: a-b, a-c, a-d; then b-c. Dropping a while a-b runs skips a-c and a-d; b-c then waits
        # only for b.
        jobs = jobs_of("ab", "ac", "ad", "bc")
        pool = LaunchPool(jobs)
        self.assertEqual(names(pool.startable()), ["j0"])
        self.assertEqual(names(pool.drop("a")), ["j1", "j2"])
        pool.finish(jobs[0])
        self.assertEqual(names(pool.startable()), ["j3"])
        pool.finish(jobs[3])
        self.assertTrue(pool.done())

    def test_span_by_hand(self):
        # 10 s a job. Unlimited: round 1 (ab, cd) at 0-10, round 2 (ac, bd) at 10-20: 20 s. Two at a time: the
        # same. One at a time: 40 s.
        jobs = jobs_of("ab", "cd", "ac", "bd")
        self.assertEqual(pool_span(jobs, None, 10.0), 20.0)
        self.assertEqual(pool_span(jobs, 2, 10.0), 20.0)
        self.assertEqual(pool_span(jobs, 1, 10.0), 40.0)
        # Three rounds of one node's chain a-b, a-c, a-d beside e-f, g-h: a's three in a row, 30 s; a cap of 2
        # keeps the others in the gaps: still 30 s.
        chain = jobs_of("ab", "ef", "ac", "gh", "ad")
        self.assertEqual(pool_span(chain, 2, 10.0), 30.0)


class Failing(unittest.TestCase):
    def test_two_failures_with_partners_that_measured_elsewhere(self):
        watch = FailingNodes()
        ab, cd, ac, bd, ae = jobs_of("ab", "cd", "ac", "bd", "ae")
        self.assertEqual(watch.record(ab, False), [])  # a or b: unknown yet
        self.assertEqual(watch.record(cd, True), [])
        self.assertEqual(watch.record(ac, False), [])  # a failed with b and c; only c measured elsewhere
        self.assertEqual(watch.record(bd, True), ["a"])  # now b has too: two good partners
        self.assertEqual(watch.dropped, {"a": ["b", "c"]})
        self.assertEqual(watch.record(ae, False), [])  # once

    def test_a_node_that_measured_is_never_dropped(self):
        # b measured with c, then failed with d and e, which both measured elsewhere: two good partners, but b
        # itself works with c (its links to d and e are the suspects), so it stays in the rounds.
        watch = FailingNodes()
        for job, ok in zip(jobs_of("bc", "df", "eg", "bd", "be"), (True, True, True, False, False)):
            self.assertEqual(watch.record(job, ok), [])
        self.assertEqual(watch.dropped, {})
        # a and x fail with everybody (b and c measured with each other): both dropped, b and c not.
        for job in jobs_of("ab", "xb", "ac", "xc"):
            watch.record(job, False)
        self.assertEqual(sorted(watch.dropped), ["a", "x"])

class Decisive(unittest.TestCase):
    def test_a_suspect_failing_with_two_known_good_nodes_is_dropped_from_the_pass(self):
        # Before the pass: h failed with g1 (known good) and with s (measured elsewhere, but no known-good node:
        # a partner slow in its own right is no witness); g1 measured with g2. One known-good failure: not yet.
        rows = [{"a": "h", "b": "g1", "rail": None, "reason": "timeout in its group"},
                {"a": "h", "b": "s", "rail": None, "reason": "timeout in its group"},
                {"a": "s", "b": "g2", "rail": None, "reason": None},
                {"a": "g1", "b": "g2", "rail": None, "reason": None},
                {"a": "h", "b": "g3", "rail": "mlx5_0:1", "reason": "no values"}]  # a rail alone: not a pair
        watch = DecisiveSuspects(["g1", "g2", "g3", "g4"], rows)
        self.assertEqual(watch.dropped, {})
        self.assertFalse(watch.check_paths)
        retest_g3, retest_g4, repeat = jobs_of("hx", "hy", "hz")
        for job, hosts in ((retest_g3, ["h", "g3"]), (retest_g4, ["h", "g4"]), (repeat, ["h", "g1"])):
            job["hosts"] = hosts
        # The first retest fails too: g1 and g3, two known-good partners, and h measured with nobody.
        self.assertEqual(watch.record(retest_g3, False), ["h"])
        self.assertEqual(watch.dropped, {"h": ["g1", "g3"]})
        self.assertEqual(watch.record(retest_g4, False), [])  # once

    def test_a_suspect_that_measured_or_failed_with_suspects_only_stays(self):
        watch = DecisiveSuspects(["g1", "g2"], [{"a": "h", "b": "g1", "rail": None, "reason": None}])
        ha, hb = jobs_of("ha", "hb")
        ha["hosts"], hb["hosts"] = ["h", "g2"], ["h", "s"]
        self.assertEqual(watch.record(ha, False), [])  # failed with g2, but measured with g1 before
        self.assertEqual(watch.record(hb, False), [])
        other = DecisiveSuspects(["g1"], [])
        xs, xt = jobs_of("xs", "xt")
        self.assertEqual(other.record(xs, False) + other.record(xt, False), [])  # s and t are no known-good nodes
        self.assertEqual(other.dropped, {})


if __name__ == "__main__":
    unittest.main()
