#!/usr/bin/env python3
"""coll_perf_runner's judgement of a launch: crash signs are the program's, never the launcher's own teardown,
and the exit status is the program's. The fixtures in data/ are real Open MPI 4.1 output captured on this kind
of machine: ompi_launcher_segv.txt is mpirun itself (pid 18692) killed by SIGSEGV while it waited, with Open MPI's
signal handler's lines; ompi_rank_segv.txt a coll_perf rank (pid 19203) killed by SIGSEGV inside MPI_Allreduce;
ompi_abort_errorcode4.txt coll_perf's watchdog ending a stalled launch with MPI_Abort(errorcode 4);
ompi_rank_exit4_stuck.txt coll_perf's start-up guard ending two ranks at once (exit 4), after which mpirun printed
the exit it detected and never exited (reliability_faults_mpi's frozen_start in CI, 2026-12-07). CTest
`tools_coll_perf_runner` (label scripts).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from coll_perf_runner import (crash_signs, launch_exit, launcher_died_unheard, printed_status, run_launch,  # noqa: E402
                              wait_for_launcher)

LAUNCHER_PID = 18692
RANK_PID = 19203


def fixture(name):
    with open(os.path.join(HERE, "data", name), encoding="utf-8") as handle:
        return handle.read()


class CrashSigns(unittest.TestCase):
    def test_the_launchers_own_segfault_is_not_the_programs(self):
        self.assertEqual(crash_signs("", fixture("ompi_launcher_segv.txt"), LAUNCHER_PID), [])

    def test_without_the_launchers_pid_every_sign_counts(self):
        self.assertEqual(crash_signs("", fixture("ompi_launcher_segv.txt")),
                         [f"[vm:{LAUNCHER_PID}] Signal: Segmentation fault (11)"])

    def test_a_rank_that_crashes_is_a_crash(self):
        self.assertEqual(crash_signs("", fixture("ompi_rank_segv.txt"), LAUNCHER_PID),
                         [f"[vm:{RANK_PID}] Signal: Segmentation fault (11)"])

    def test_a_zero_padded_pid_is_the_same_process(self):
        err = fixture("ompi_launcher_segv.txt").replace(f"vm:{LAUNCHER_PID}]", "vm:00412]")
        self.assertEqual(crash_signs("", err, 412), [])
        self.assertEqual(len(crash_signs("", err, 41)), 1, "pid 41 is not pid 412")

    def test_program_words_on_stdout_count_whoever_launched(self):
        self.assertEqual(crash_signs("terminate called after throwing an instance of 'x'", "", LAUNCHER_PID),
                         ["terminate called after throwing an instance of 'x'"])


class LaunchExit(unittest.TestCase):
    def test_an_abort_passes_its_errorcode_through_mpirun(self):
        self.assertEqual(launch_exit(4, fixture("ompi_abort_errorcode4.txt"), LAUNCHER_PID), 4)

    def test_the_abort_is_the_status_when_mpirun_then_dies_of_a_signal(self):
        err = fixture("ompi_abort_errorcode4.txt") + fixture("ompi_launcher_segv.txt")
        self.assertEqual(launch_exit(-11, err, LAUNCHER_PID), 4)
        self.assertEqual(launch_exit(139, err, LAUNCHER_PID), 4, "a shell's 128 + signal")

    def test_a_launcher_that_dies_with_no_abort_keeps_its_status(self):
        self.assertEqual(launch_exit(-11, fixture("ompi_launcher_segv.txt"), LAUNCHER_PID), -11)

    def test_a_launcher_that_dies_before_printing_the_abort_is_unheard(self):
        self.assertTrue(launcher_died_unheard(-11, fixture("ompi_launcher_segv.txt"), LAUNCHER_PID))
        err = fixture("ompi_abort_errorcode4.txt") + fixture("ompi_launcher_segv.txt")
        self.assertFalse(launcher_died_unheard(-11, err, LAUNCHER_PID), "the abort was heard: its errorcode stands")
        self.assertFalse(launcher_died_unheard(-11, fixture("ompi_launcher_segv.txt"), LAUNCHER_PID + 1),
                         "another process's crash is the program's")
        self.assertFalse(launcher_died_unheard(4, "", LAUNCHER_PID))

    def test_a_rank_crash_after_an_abort_is_not_excused(self):
        err = fixture("ompi_abort_errorcode4.txt") + fixture("ompi_rank_segv.txt")
        self.assertEqual(launch_exit(-11, err, LAUNCHER_PID), -11)


class PrintedStatus(unittest.TestCase):
    def test_the_status_mpirun_printed_for_its_ranks(self):
        self.assertEqual(printed_status(fixture("ompi_abort_errorcode4.txt")), 4)
        self.assertEqual(printed_status(fixture("ompi_rank_exit4_stuck.txt")), 4, "ranks that exited 4 themselves")
        self.assertIsNone(printed_status(fixture("ompi_launcher_segv.txt")))
        self.assertIsNone(printed_status("coll_perf: timeout: start-up ... aborting every rank\n"))


class StuckLauncher(unittest.TestCase):
    """run_launch against a stand-in launcher (sh) whose rank is a copy of sleep named coll_perf: the rank prints
    the real abort text and exits 4, then the launcher either exits with it or never exits (mpirun stuck in its
    teardown after an abort, as in CI)."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="stuck-launcher-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.rank = os.path.join(self.work, "coll_perf")
        shutil.copy(shutil.which("sleep"), self.rank)  # /proc/PID/comm reads coll_perf
        self.abort = os.path.join(HERE, "data", "ompi_abort_errorcode4.txt")

    def launcher(self, rank_seconds, then, stderr_file=None):
        """The stand-in: its rank runs rank_seconds, then stderr_file (the real abort text unless given) goes to
        stderr, then `then`."""
        return ["sh", "-c", f'"{self.rank}" {rank_seconds}; cat "{stderr_file or self.abort}" >&2; {then}']

    def test_a_launcher_stuck_after_its_ranks_are_gone_is_ended_and_the_abort_is_the_status(self):
        started = time.monotonic()
        launch = run_launch(self.launcher(1, "exec sleep 3600"), dict(os.environ), timeout=20, teardown_s=1.0)
        code, _out, err, _seconds, pid = launch
        self.assertTrue(launch.launcher_stuck)
        self.assertEqual(code, -9, "ended by the checker")
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(launch_exit(code, err, pid, launch.launcher_stuck), 4)

    def test_a_launcher_that_exits_is_not_stuck_and_keeps_its_status(self):
        launch = run_launch(self.launcher(1, "exit 4"), dict(os.environ), timeout=60, teardown_s=1.0)
        self.assertFalse(launch.launcher_stuck)
        self.assertEqual(launch[0], 4)

    def test_a_launcher_stuck_before_printing_any_abort_is_unheard(self):
        """mpirun's show_help failed as two ranks aborted at once (CI of 2026-12-07): the ranks' own words are
        there, no MPI_ABORT line, and mpirun never exits. Ended by the checker, its status is lost, not 4."""
        unheard = os.path.join(self.work, "unheard.txt")
        with open(unheard, "w", encoding="utf-8") as handle:
            handle.write("coll_perf: error: timeout: case all_reduce.float.sum.out.64K (size 65536 B, warm-up) on rank"
                         " 1 (vm) did not finish within 12 s (-T); aborting every rank\n[vm:18889] [[9527,0],0] "
                         "ORTE_ERROR_LOG: Data unpack would read past end of buffer in file "
                         "../../../orte/util/show_help.c at line 501\n")
        launch = run_launch(self.launcher(1, "exec sleep 3600", unheard), dict(os.environ), timeout=20, teardown_s=1.0)
        code, _out, err, _seconds, pid = launch
        self.assertTrue(launch.launcher_stuck)
        self.assertEqual(launch_exit(code, err, pid, launch.launcher_stuck), -9, "no abort heard: the status is lost")
        self.assertTrue(launcher_died_unheard(code, err, pid, launch.launcher_stuck))
        self.assertFalse(launcher_died_unheard(code, err, pid), "not stuck, not dead of a signal it printed")

    def test_a_launcher_stuck_after_printing_the_abort_is_heard(self):
        launch = run_launch(self.launcher(1, "exec sleep 3600"), dict(os.environ), timeout=20, teardown_s=1.0)
        self.assertTrue(launch.launcher_stuck)
        self.assertFalse(launcher_died_unheard(launch[0], launch[2], launch[4], launch.launcher_stuck))

    def test_ranks_the_caller_saw_gone_before_the_first_look_still_count(self):
        """The reliability drivers find the ranks first (rel_common.ranks_of), then wait: ranks that ended before
        the first look still leave a stuck launcher to be ended, with the moment they were last seen gone."""
        process = subprocess.Popen(["sh", "-c", f'cat "{self.abort}" >&2; exec sleep 3600'], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        started = time.monotonic()
        out, err, state, gone_at = wait_for_launcher(process, lambda: False, timeout=20, teardown_s=1.0, seen=True)
        self.assertEqual(state, "stuck")
        self.assertLess(gone_at - started, 1.0)
        self.assertEqual(printed_status(err), 4)
        never = subprocess.Popen(["sleep", "3600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        self.assertEqual(wait_for_launcher(never, lambda: False, timeout=3, teardown_s=1.0)[2], "timeout",
                         "ranks never seen: not stuck, the timeout ends it")

    def test_a_rank_still_running_is_waited_for(self):
        """Its rank runs 3 s, three times the teardown allowance: the launcher is not ended while it runs."""
        launch = run_launch(self.launcher(3, "exit 0"), dict(os.environ), timeout=60, teardown_s=1.0)
        self.assertFalse(launch.launcher_stuck)
        self.assertEqual(launch[0], 0)
        self.assertGreaterEqual(launch[3], 3.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
