"""What one launch's end means for each of its groups (plan/screen_batches.settle) and what a split launch's
progress says of its groups (execute/progress.LaunchProgress.groups), on hand-worked launches: a bad group costs its
own group, the groups that finished are kept, only the ones lost run again, a host that could not be started is
named from the launcher's words. The launcher text is Open MPI's, as cluster_screen_split_faults saw it on the
virtual cluster (tests/cluster/test_screen_split_faults.py)."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))

from cclbench_lib.execute.progress import LaunchProgress  # noqa: E402
from cclbench_lib.model.launcher import launch_failure  # noqa: E402
from cclbench_lib.plan.screen_batches import settle  # noqa: E402

# A round of four pairs, one launch, one group a pair (group i: ranks 2i and 2i+1).
JOBS = [{"name": f"pair.r0.{a}.{b}", "kind": "pair", "hosts": [a, b], "launch": {"ranks_per_host": 1}}
        for a, b in (("node2", "node5"), ("node3", "node6"), ("node1", "node4"), ("node7", "node8"))]
KEPT = {"status": "complete", "found": {"busbw_gbps": 0.6}}

SIGNAL_9 = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 13049 on node node3 exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""
ABORT_4 = """MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode 4.
"""


def progress_line(**event):
    return "cclbench-progress " + json.dumps(event)


class Settle(unittest.TestCase):
    def test_a_crash_costs_its_own_group_the_finished_are_kept_the_lost_run_again(self):
        # Group 1 (node3's rank 2) died by signal 9 while group 2 had written its records and groups 0 and 3 had not.
        outcome = {"exit_code": 137, "documents": {"pair.r0.node1.node4": KEPT}, "groups": {},
                   "launcher": launch_failure(SIGNAL_9)}
        settled = settle(JOBS, outcome)
        self.assertEqual(settled["done"], ["pair.r0.node1.node4"])
        self.assertEqual(list(settled["failed"]), ["pair.r0.node3.node6"])
        self.assertTrue(settled["failed"]["pair.r0.node3.node6"].startswith("rank 2 on node3 died: signal 9 (Killed)"))
        self.assertEqual(settled["rerun"], ["pair.r0.node2.node5", "pair.r0.node7.node8"])
        self.assertEqual((settled["unreachable"], settled["resolved"]), ({}, True))

    def test_a_hang_is_named_by_its_watchdog_even_with_its_document_written(self):
        # coll_perf writes a group's document when its watchdog ends it (status "timeout", no records): that group
        # failed with the watchdog's words naming every rank that timed out, not "done" and then "no record".
        watch = LaunchProgress(60)
        for line in (progress_line(event="start", rank=0, host="node2", phase="start-up", deadline_s=29.6),
                     progress_line(event="start", rank=1, host="node5", phase="start-up", deadline_s=29.7),
                     progress_line(event="timeout", rank=0, host="node2", group=0, phase="warm-up",
                                   case="all_reduce.float.sum.out.8K", deadline_s=30.0),
                     progress_line(event="timeout", rank=1, host="node5", group=0,
                                   phase="test stall, CCLBENCH_TEST_STALL", case="all_reduce.float.sum.out.8K",
                                   deadline_s=30.0)):
            self.assertTrue(watch.feed(line))
        outcome = {"exit_code": 4, "documents": {JOBS[0]["name"]: {"status": "timeout", "found": None}},
                   "groups": watch.groups(), "launcher": launch_failure(ABORT_4)}
        settled = settle(JOBS[:1], outcome)
        self.assertEqual((settled["done"], settled["rerun"]), ([], []))
        self.assertEqual(settled["failed"], {JOBS[0]["name"]: (
            "timeout in its group: rank 0 (node2): case all_reduce.float.sum.out.8K, phase warm-up did not finish "
            "within its deadline of 30.0 s; rank 1 (node5): case all_reduce.float.sum.out.8K, phase test stall, "
            "CCLBENCH_TEST_STALL did not finish within its deadline of 30.0 s")})

    def test_a_host_not_started_is_named_from_the_launchers_words_the_rest_run_again(self):
        text = "ssh: connect to host node7 port 22: Connection timed out\n" \
               "ORTE was unable to reliably start one or more daemons.\n"
        said = launch_failure(text)
        self.assertIn("node7", said["unreachable"], said)
        settled = settle(JOBS, {"exit_code": 255, "documents": {}, "groups": {}, "launcher": said})
        self.assertEqual(settled["unreachable"], {"node7": said["unreachable"]["node7"]})
        self.assertEqual(list(settled["failed"]), ["pair.r0.node7.node8"])
        self.assertTrue(settled["failed"]["pair.r0.node7.node8"].startswith(
            "not started: the launcher could not start node7: "))
        self.assertEqual(settled["rerun"], [job["name"] for job in JOBS[:3]])
        self.assertEqual(settled["done"], [])


class GroupsOfASplitLaunch(unittest.TestCase):
    def test_a_ranks_group_comes_after_its_start_line(self):
        # coll_perf says "start" before the split (no group), then every later line carries its group.
        watch = LaunchProgress(60)
        watch.feed(progress_line(event="start", rank=3, host="node6", phase="start-up", deadline_s=30))
        watch.feed(progress_line(event="enter", rank=3, host="node6", group=1, phase="fill", deadline_s=20,
                                 case="c"))
        watch.feed(progress_line(event="finish", rank=3, host="node6", group=1, deadline_s=45))
        self.assertEqual(watch.groups(), {1: {"finished": True, "timeout": None, "overdue": None}})


if __name__ == "__main__":
    unittest.main()
