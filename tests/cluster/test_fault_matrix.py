#!/usr/bin/env python3
"""The fault matrix's own mechanism, without a cluster: the injector wrapper really signals the process it execs
(a copy of sleep(1) named coll_perf, the host name from a stand-in uname), only on the target node and only in a
launch that spans hosts; the judgement of observations against expectations; the table renderer and the README
check. Expected values come from the test's own inputs (the signal it asked for, the process state the kernel
reports in /proc). CTest `fault_matrix_mechanism` (label scripts).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eta_lines  # noqa: E402
import fault_matrix  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def process_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def stopped_state(pid, within_s=4):
    """The process's state once it reads T (stopped), or what it reads after within_s."""
    deadline = time.monotonic() + within_s
    while process_state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.05)
    return process_state(pid)


class Injector(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="fault-matrix-")
        self.addCleanup(shutil.rmtree, self.work, True)
        self.real = os.path.join(self.work, "real", "coll_perf")
        os.makedirs(os.path.dirname(self.real))
        shutil.copy(shutil.which("sleep"), self.real)  # its /proc/PID/comm reads coll_perf, as the real one's
        self.fake_path = os.path.join(self.work, "path")
        os.makedirs(self.fake_path)
        self.marks = os.path.join(self.work, "injected.txt")

    def wrapper(self, fault, node, world=2, local=1, rail_patterns=fault_matrix.RAIL_TCP_PATTERNS):
        """Starts the wrapper for `fault` as if on `node` in a launch of `world` ranks, `local` on this node."""
        with open(os.path.join(self.fake_path, "uname"), "w") as handle:
            handle.write(f"#!/bin/sh\necho {node}\n")
        os.chmod(os.path.join(self.fake_path, "uname"), 0o755)
        script = os.path.join(self.work, "coll_perf")
        with open(script, "w") as handle:
            handle.write(fault_matrix.wrapper_script(fault, self.real, self.marks, "mpi", rail_patterns))
        os.chmod(script, 0o755)
        env = dict(os.environ, PATH=self.fake_path + os.pathsep + os.environ["PATH"],
                   OMPI_COMM_WORLD_SIZE=str(world), OMPI_COMM_WORLD_LOCAL_SIZE=str(local), OMPI_COMM_WORLD_RANK="1")
        process = subprocess.Popen([script, "5"], env=env)
        self.addCleanup(lambda: (process.poll() is None and process.kill(), process.wait()))
        return process

    def marks_text(self):
        if not os.path.exists(self.marks):
            return ""
        with open(self.marks) as handle:
            return handle.read()

    def marks_once(self, expected, within_s=4):
        """The marks once they hold `expected`, or as they read after within_s: the injector writes its mark just
        after its signal, so a test that saw the signal land may read the file before the line is there (CI, loaded
        2-core box, 2026-12-07: a SIGKILL seen, its mark not yet written)."""
        deadline = time.monotonic() + within_s
        while expected not in self.marks_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.marks_text()

    def assert_marked(self, mark):
        self.assertIn(mark, self.marks_once(mark))

    def test_killed_rank_gets_sigkill_on_the_target_node(self):
        process = self.wrapper({"fault": "killed_rank", "node": "node3", "after_s": 0.2}, "node3")
        self.assertEqual(process.wait(timeout=4), -9)
        self.assert_marked(f"node3 SIGKILL {process.pid} rank 1")

    def test_from_rail_waits_for_a_connection_over_a_rail_then_kills(self):
        """"from": "rail": nothing while no TCP connection is established on a rail subnet; after_s after one is,
        SIGKILL. The rail here is 127.77.1.0/24 on loopback (nothing else on this machine uses it)."""
        self.assertEqual(fault_matrix._hex_prefix("198.18.13.0/24"), "0D12C6", "/proc/net/tcp's byte order")
        process = self.wrapper({"fault": "killed_rank", "node": "node3", "after_s": 0.1, "from": "rail"}, "node3",
                               rail_patterns=(fault_matrix._hex_prefix("127.77.1.0/24"),))
        time.sleep(1.0)
        self.assertIsNone(process.poll(), "killed before any rail connection")
        listener = socket.create_server(("127.77.1.1", 0))
        self.addCleanup(listener.close)
        client = socket.create_connection(listener.getsockname(), timeout=5)
        self.addCleanup(client.close)
        server_side, _ = listener.accept()
        self.addCleanup(server_side.close)
        self.assertEqual(process.wait(timeout=4), -9)
        self.assert_marked(f"node3 SIGKILL {process.pid} rank 1")

    def test_from_is_start_or_rail(self):
        with self.assertRaises(fault_matrix.MatrixError):
            fault_matrix.wrapper_script({"fault": "killed_rank", "node": "n", "from": "later"}, "/bin/true", "m", "mpi")

    def test_hung_rank_is_stopped_not_ended(self):
        process = self.wrapper({"fault": "hung_rank", "node": "node3", "after_s": 0.2}, "node3")
        self.assertEqual(stopped_state(process.pid), "T")
        self.assert_marked(f"node3 SIGSTOP {process.pid}")

    def test_other_nodes_and_one_host_launches_are_left_alone(self):
        other = self.wrapper({"fault": "killed_rank", "node": "node3", "after_s": 0.1}, "node2")
        time.sleep(0.6)
        self.assertIsNone(other.poll())
        other.kill()
        local = self.wrapper({"fault": "killed_rank", "node": "node3", "after_s": 0.1}, "node3", world=2, local=2)
        time.sleep(0.6)
        self.assertIsNone(local.poll(), "an intra-node launch is not the cross-host fault")
        self.assertEqual(self.marks_text(), "")

    def test_frozen_launch_stops_only_a_launch_confined_to_the_node(self):
        cross = self.wrapper({"fault": "frozen_launch", "node": "node3", "after_s": 0.1}, "node3", world=2, local=1)
        time.sleep(0.6)
        self.assertNotEqual(process_state(cross.pid), "T", "a cross-host launch is not this fault")
        cross.kill()
        confined = self.wrapper({"fault": "frozen_launch", "node": "node3", "after_s": 0.1}, "node3", world=2, local=2)
        self.assertEqual(stopped_state(confined.pid), "T")
        self.assert_marked(f"node3 SIGSTOP {confined.pid} rank 1 of a launch on node3 alone")

    def test_hung_case_sets_the_stall_for_that_nodes_rank_in_cross_host_launches(self):
        fault = {"fault": "hung_case", "node": "node2", "case": "all_reduce.float.sum.out.64M"}
        script = fault_matrix.wrapper_script(fault, "/usr/bin/env", self.marks, "mpi")
        path = os.path.join(self.work, "stall_wrapper")
        with open(path, "w") as handle:
            handle.write(script)
        os.chmod(path, 0o755)
        for node, local, expected in (("node2", 1, "1:all_reduce.float.sum.out.64M"), ("node1", 1, None),
                                      ("node2", 2, None)):
            with open(os.path.join(self.fake_path, "uname"), "w") as handle:
                handle.write(f"#!/bin/sh\necho {node}\n")
            os.chmod(os.path.join(self.fake_path, "uname"), 0o755)
            env = {k: v for k, v in os.environ.items() if k != "CCLBENCH_TEST_STALL"}
            env.update(PATH=self.fake_path + os.pathsep + env["PATH"], OMPI_COMM_WORLD_SIZE="2",
                       OMPI_COMM_WORLD_LOCAL_SIZE=str(local), OMPI_COMM_WORLD_RANK="1")
            out = subprocess.run([path], env=env, capture_output=True, text=True, check=True).stdout
            values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
            self.assertEqual(values.get("CCLBENCH_TEST_STALL"), expected, (node, local))
        with self.assertRaises(fault_matrix.MatrixError):
            fault_matrix.wrapper_script(dict(fault, case="x; rm -rf /"), "/usr/bin/env", self.marks, "mpi")

    def test_env_differs_changes_only_that_nodes_environment(self):
        script = fault_matrix.wrapper_script({"fault": "env_differs", "node": "node2", "var": "NCCL_IB_DISABLE",
                                              "value": "1"}, "/usr/bin/env", self.marks, "nccl")
        path = os.path.join(self.work, "env_wrapper")
        with open(path, "w") as handle:
            handle.write(script)
        os.chmod(path, 0o755)
        for node, expected in (("node2", "1"), ("node1", None)):
            with open(os.path.join(self.fake_path, "uname"), "w") as handle:
                handle.write(f"#!/bin/sh\necho {node}\n")
            os.chmod(os.path.join(self.fake_path, "uname"), 0o755)
            env = {k: v for k, v in os.environ.items() if k != "NCCL_IB_DISABLE"}
            env["PATH"] = self.fake_path + os.pathsep + env["PATH"]
            out = subprocess.run([path], env=env, capture_output=True, text=True, check=True).stdout
            values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
            self.assertEqual(values.get("NCCL_IB_DISABLE"), expected, node)
            self.assertEqual(values.get("NCCL_HOSTID"), node)  # the NCCL backend's one host id per node


class FleetOfTwo:
    nodes = ["node1", "node2"]


class ConnectMoment(unittest.TestCase):
    """connect_hang: fire once every rank of the launch has started and none is connected over a rail.
    /proc/net/tcp lines written by hand: 198.18.10.10 is 0A0A12C6 (the address's bytes, little-endian), the rail
    eth0's /24 is its last six digits 0A12C6; eth3 (198.18.13.x) 0D12C6; mgmt0 10.99.0.x is xx00630A."""
    HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

    def table(self, *entries):
        return self.HEADER + "".join(f"   {index}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000"
                                     f"     0        0 {1000 + index}\n"
                                     for index, (local, remote, state) in enumerate(entries))

    def test_rail_connections_count_established_ones_on_a_rail_only(self):
        table = self.table(("00000000:9C40", "00000000:0000", "0A"),   # the transport listening: not a connection
                           ("0100630A:D431", "0200630A:0401", "01"),   # mgmt0, established: the bootstrap's
                           ("0A0A12C6:B000", "0B0A12C6:9C41", "02"),   # eth0, SYN sent: still connecting
                           ("0A0D12C6:B001", "0B0D12C6:9C42", "01"))   # eth3, established
        self.assertEqual(fault_matrix.rail_connections(table), 1)
        self.assertEqual(fault_matrix.rail_connections(self.table(("0100630A:D431", "0200630A:0401", "01"))), 0)

    def test_it_waits_for_the_whole_world_of_the_launch(self):
        quiet = self.table(("00000000:9C40", "00000000:0000", "0A"), ("0100630A:D431", "0200630A:0401", "01"))
        points = {11: "inter.mpi", 12: "inter.mpi", 13: "inter.mpi", 21: "intra.node1", 22: "intra.node1"}
        sizes = {11: 4, 12: 4, 13: 4, 21: 2, 22: 2}
        # 3 of inter.mpi's 4 ranks: not yet (intra.node1's two complete ranks are another launch)
        self.assertEqual(fault_matrix.connect_moment(points, sizes, [quiet], "inter.mpi"), (None, 4, None))
        points[14], sizes[14] = "inter.mpi", 4
        self.assertEqual(fault_matrix.connect_moment(points, sizes, [quiet, quiet], "inter.mpi"), (4, 4, 0))
        connected = self.table(("0A0D12C6:B001", "0B0D12C6:9C42", "01"))
        self.assertEqual(fault_matrix.connect_moment(points, sizes, [quiet, connected], "inter.mpi"), (4, 4, 1))
        self.assertEqual(fault_matrix.connect_moment(points, sizes, [quiet], "sanity"), (None, 0, None))

    def test_a_connect_hang_needs_its_launch_and_known_rails(self):
        with self.assertRaisesRegex(fault_matrix.MatrixError, "'connect_hang' needs at"):
            fault_matrix.apply_fault(FleetOfTwo, {"fault": "connect_hang", "node": "node2"})
        with self.assertRaisesRegex(fault_matrix.MatrixError, "connect_hang: no rail eth9"):
            fault_matrix.apply_fault(FleetOfTwo, {"fault": "connect_hang", "node": "node2", "at": "sanity",
                                                  "rails": ["eth9"]})


class RankGroup(unittest.TestCase):
    """Which point a running coll_perf measures, read from its /proc as the injectors read it: real processes (a
    sleeping Python, its arguments after -c's) started with the arguments and the Open MPI environment a launch
    gives them."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="rank-group-")
        self.addCleanup(shutil.rmtree, self.work, True)

    def start(self, arguments, world_rank, world_size):
        environment = dict(os.environ, OMPI_COMM_WORLD_RANK=str(world_rank), OMPI_COMM_WORLD_SIZE=str(world_size))
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"] + arguments, env=environment)
        self.addCleanup(process.wait)
        self.addCleanup(process.kill)
        deadline = time.monotonic() + 10
        while b"time.sleep" not in read_bytes(f"/proc/{process.pid}/cmdline"):  # exec'd: its own argv
            self.assertLess(time.monotonic(), deadline, "the process did not start")
            time.sleep(0.01)
        return process.pid

    def test_a_launch_of_one_point_names_it_with_the_whole_world(self):
        pid = self.start(["--point", "inter.mpi", "-J", "x.json"], 3, 4)
        self.assertEqual(fault_matrix.rank_group(pid), ("inter.mpi", 4))
        self.assertEqual(fault_matrix.coll_perf_point(pid), "inter.mpi")
        self.assertEqual(fault_matrix.world_size(pid), 4)

    def test_a_batched_launch_names_each_ranks_own_group(self):
        # The screen's round: two pairs of 2 ranks in one launch of 4 (ranks 0-1 the first pair, 2-3 the second).
        points = os.path.join(self.work, "launch.pairs.2.points.json")
        with open(points, "w") as handle:
            json.dump([{"point": "pair.r2.node2.node4", "json": "a.json"},
                       {"point": "pair.r2.node1.node3", "json": "b.json"}], handle)
        arguments = ["--split-ranks", "2", "--split-points", points]
        found = [fault_matrix.rank_group(self.start(arguments, rank, 4)) for rank in range(4)]
        self.assertEqual(found, [("pair.r2.node2.node4", 2), ("pair.r2.node2.node4", 2),
                                 ("pair.r2.node1.node3", 2), ("pair.r2.node1.node3", 2)])

    def test_a_rank_without_a_point_or_gone_has_none(self):
        self.assertEqual(fault_matrix.rank_group(self.start(["-J", "x.json"], 0, 2)), (None, None))
        self.assertEqual(fault_matrix.rank_group(self.start(["--split-ranks", "2", "--split-points",
                                                             os.path.join(self.work, "absent.json")], 0, 2)),
                         (None, None))
        gone = subprocess.Popen(["true"])
        gone.wait()
        self.assertEqual(fault_matrix.rank_group(gone.pid), (None, None))


class Judgement(unittest.TestCase):
    def observed(self, **changes):
        observed = {"exit": 1, "elapsed_s": 30.0, "result": "fail", "document": "screen.json", "document_found": True,
                    "codes": ["node.slow_with_good_partners"], "bad_nodes": ["node3"], "bad_links": [], "bad_rails": [],
                    "findings": [{"code": "node.slow_with_good_partners", "severity": "bad", "node": "node3",
                                  "text": "{\"partners\": [\"node1\"]}"}],
                    "words": "# Screen: FAIL\n- Bad nodes: node3", "ranks_left": 0, "killed_by_matrix": False,
                    "limit_s": 240}
        observed.update(changes)
        return observed

    def test_the_expected_verdict_passes(self):
        expect = {"exit": 1, "result": "fail", "bad_nodes": ["node3"],
                  "find": [{"code": "node.slow_with_good_partners", "node": "node3"}], "within_s": 60}
        self.assertEqual(fault_matrix.judge(expect, self.observed()), [])

    def test_each_expectation_can_fail(self):
        base = {"exit": 1, "result": "fail", "bad_nodes": ["node3"],
                "find": [{"code": "node.slow_with_good_partners", "node": "node3"}], "within_s": 60,
                "says": ["Bad nodes: node3"], "codes": ["node.slow_with_good_partners"]}
        cases = [
            ({"exit": 0}, "exit 0"),
            ({"result": "pass"}, "result 'pass'"),
            ({"bad_nodes": ["node1", "node3"]}, "bad_nodes"),
            ({"findings": [dict(self.observed()["findings"][0], node="node1")]}, "no reason"),
            ({"elapsed_s": 61.0}, "within 60"),
            ({"words": "# Screen: PASS"}, "do not say"),
            ({"codes": []}, "no node.slow_with_good_partners"),
            ({"ranks_left": 2}, "still there"),
            ({"killed_by_matrix": True}, "killed by the matrix"),
        ]
        for change, words in cases:
            problems = fault_matrix.judge(base, self.observed(**change))
            self.assertTrue(any(words in problem for problem in problems), (change, problems))

    def test_the_time_from_a_dying_path_to_the_verdict_is_bounded(self):
        expect = {"fault_to_end_within_s": 180}
        self.assertEqual(fault_matrix.judge(expect, self.observed(fault_to_end_s=150.2)), [])
        for late in (180.5, None):  # past the bound, or the fault never fired
            problems = fault_matrix.judge(expect, self.observed(fault_to_end_s=late))
            self.assertTrue(any("after the fault, expected within 180 s" in p for p in problems), problems)

    def test_the_eta_promise_is_checked_when_asked(self):
        expect = {"eta_within": 0.25}
        self.assertEqual(fault_matrix.judge(expect, self.observed(eta_after_sanity={"error": 0.24})), [])
        self.assertEqual(fault_matrix.judge(expect, self.observed(eta_after_sanity={"error": 0.31})),
                         ["an ETA from sanity on was off by 31% of the time really left, expected within 25%"])
        problems = fault_matrix.judge(expect, self.observed(eta_after_sanity={"error": None, "short_s": None}))
        self.assertTrue(any("no ETA judged" in problem for problem in problems), problems)
        # a failed launch's line with under 10 s left, then nothing longer: its seconds are no share to judge
        self.assertEqual(fault_matrix.judge(expect, self.observed(eta_after_sanity={"error": None, "short_s": 3.1})),
                         [])
        self.assertEqual(fault_matrix.judge({}, self.observed(eta_after_sanity={"error": 0.9})), [])

    def test_an_absent_code_that_is_there_fails(self):
        expect = {"absent_codes": ["launch.timeout"]}
        self.assertEqual(fault_matrix.judge(expect, self.observed()), [])
        problems = fault_matrix.judge(expect, self.observed(codes=["rail.slow", "launch.timeout"]))
        self.assertEqual(problems, ["launch.timeout must not be there (a healthy launch stopped)"])

    def test_a_partner_named_in_the_detail_is_not_the_subject(self):
        # node1's reason mentions node3 as a partner: it is about node1, not node3.
        finding = {"code": "node.slow_with_good_partners", "node": "node1", "text": "{\"partners\": [\"node3\"]}"}
        self.assertFalse(fault_matrix._finding_matches(finding, {"code": "node.slow_with_good_partners",
                                                                 "node": "node3"}))
        rail_in_subject = {"code": "rail.slow", "node": None, "subject": "inter.mpi eth3 vs eth0", "text": ""}
        self.assertTrue(fault_matrix._finding_matches(rail_in_subject, {"code": "rail.slow", "rail": "eth3"}))
        self.assertFalse(fault_matrix._finding_matches(rail_in_subject, {"code": "rail.slow", "rail": "eth0x"}))


class EtaLines(unittest.TestCase):
    """The ETA a run printed against its real end (eta_lines.judge_lines), on lines worked by hand, and the stamping
    of a real process's lines as they arrive (StampedReader)."""

    @staticmethod
    def line(index, name, status, eta):
        return f"cclbench: [{index}/4] {name}: {status} in 3.0s; elapsed 0m10s, ETA {eta}"

    def test_errors_from_sanity_on(self):
        lines = [(2.0, self.line(1, "doctor.node1", "complete", "0m10s")),  # before sanity: not judged
                 (10.0, "NCCL INFO noise"),
                 (10.0, self.line(2, "sanity", "complete", "1m00s")),  # 70 s left: (60 - 70) / 70 = -0.143
                 (40.0, self.line(3, "intra.node1", "complete", "0m36s")),  # 40 s left: -4 / 40 = -0.1
                 (79.9, self.line(4, "inter.cross0", "complete", "0m00s"))]  # 0.1 s left: 0.1 s off
        rows, worst = eta_lines.judge_lines(lines, 80.0)
        self.assertEqual([row["line"] for row in rows], ["[1/4] doctor.node1", "[2/4] sanity", "[3/4] intra.node1",
                                                        "[4/4] inter.cross0"])
        self.assertEqual([row["error"] for row in rows[1:3]], [-0.143, -0.1])
        self.assertEqual(worst, {"error": 0.143, "end_error": 0.125, "short_s": 0.1})  # end: (10 + 60 - 80) / 80

    def test_after_a_failed_launch_only_its_line_on_is_judged(self):
        lines = [(10.0, self.line(1, "sanity", "complete", "0m20s")),  # 90 s left: -0.778, a healthy run's outlook
                 (70.0, self.line(2, "inter.cross0", "failed", "0m27s")),  # 30 s left: -0.1
                 (99.0, self.line(3, "inter.cross1", "complete", "0m00s"))]
        _rows, worst = eta_lines.judge_lines(lines, 100.0)
        self.assertEqual(worst["error"], 0.1)

    def test_a_run_that_took_no_measurable_time_has_no_errors(self):
        # The run's end rounded to 0.0 s: no time left to be wrong about, no share of it (no division by zero).
        rows, worst = eta_lines.judge_lines([(0.0, self.line(1, "sanity", "complete", "0m00s"))], 0.0)
        self.assertEqual((rows[0]["error"], rows[0]["end_error"]), (None, None))
        self.assertEqual(worst, {"error": None, "end_error": None, "short_s": 0.0})

    def test_a_process_lines_are_stamped_as_they_arrive(self):
        script = ("import sys, time\nprint('out')\nprint('first', file=sys.stderr, flush=True)\ntime.sleep(0.5)\n"
                  "print('second', file=sys.stderr, flush=True)\n")
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        reader = fault_matrix.StampedReader(process, started)
        self.assertTrue(reader.finish(until=started + 30))
        self.assertEqual(process.returncode, 0)
        self.assertEqual(reader.stdout(), "out\n")
        self.assertEqual([text for _, text in reader.stamped], ["first", "second"])
        self.assertGreaterEqual(reader.stamped[1][0] - reader.stamped[0][0], 0.45)

    def test_a_process_past_its_limit_is_left_to_the_caller(self):
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        reader = fault_matrix.StampedReader(process, started)
        self.assertFalse(reader.finish(until=started + 0.3))
        self.assertIsNone(process.returncode)
        process.kill()
        self.assertTrue(reader.finish())
        self.assertEqual(process.returncode, -9)


class StopAtLimit(unittest.TestCase):
    """A tool past its cell's limit gets SIGTERM alone first (to write its verdict), then its session SIGKILL: real
    processes, one that writes on SIGTERM and leaves a child behind, one that ignores SIGTERM."""

    def start(self, script, folder):
        process = subprocess.Popen([sys.executable, "-c", script, folder], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        reader = fault_matrix.StampedReader(process, time.monotonic())
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(folder, "ready")) and time.monotonic() < deadline:
            time.sleep(0.05)
        return process, reader

    @staticmethod
    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # a zombie child of the reaped tool is reparented and reaped by init: dead for our purpose
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"

    def test_a_tool_that_stops_on_sigterm_writes_and_its_session_is_ended(self):
        script = ("import os, signal, subprocess, sys, time\n"
                  "folder = sys.argv[1]\n"
                  "child = subprocess.Popen(['sleep', '300'])\n"  # a launch that would outlive the tool
                  "def stop(signum, frame):\n"
                  "    open(os.path.join(folder, 'verdict.json'), 'w').write(str(signum))\n"
                  "    os._exit(143)\n"
                  "signal.signal(signal.SIGTERM, stop)\n"
                  "open(os.path.join(folder, 'child'), 'w').write(str(child.pid))\n"
                  "open(os.path.join(folder, 'ready'), 'w').close()\n"
                  "time.sleep(300)\n")
        with tempfile.TemporaryDirectory() as folder:
            process, reader = self.start(script, folder)
            with open(os.path.join(folder, "child")) as handle:
                child = int(handle.read())
            self.assertEqual(fault_matrix.stop_at_limit(process, reader, grace_s=20), "SIGTERM")
            self.assertEqual(process.returncode, 143)
            with open(os.path.join(folder, "verdict.json")) as handle:
                self.assertEqual(handle.read(), str(int(signal.SIGTERM)))
            deadline = time.monotonic() + 10
            while self.alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertFalse(self.alive(child), "the tool's child outlived the stop")

    def test_a_tool_that_ignores_sigterm_is_killed_after_the_grace(self):
        script = ("import os, signal, sys, time\n"
                  "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                  "open(os.path.join(sys.argv[1], 'ready'), 'w').close()\n"
                  "time.sleep(300)\n")
        with tempfile.TemporaryDirectory() as folder:
            process, reader = self.start(script, folder)
            started = time.monotonic()
            self.assertEqual(fault_matrix.stop_at_limit(process, reader, grace_s=1.0), "SIGKILL")
            self.assertGreaterEqual(time.monotonic() - started, 1.0)
            self.assertEqual(process.returncode, -signal.SIGKILL)


class Parts(unittest.TestCase):
    """--part I/N (CTest runs the parts side by side) and --lanes: the order and the dealing, from hand-made times."""

    CELLS = [{"id": name, "nodes": 2, "tool": "screen", "fault": {"fault": "none"}, "expect": {"exit": 0}}
             for name in ("a", "b", "c", "d", "e")] + [
        {"id": "note", "nodes": 2, "tool": "baseline", "fault": {"fault": "slow_node"}, "expect": {"note": "x"}}]
    TIMES = {"a": 100.0, "b": 60.0, "c": 50.0, "d": 40.0, "e": 10.0}

    def test_the_lanes_take_the_longest_cells_first(self):
        ordered = fault_matrix.lane_order(self.CELLS[:5], self.TIMES)
        self.assertEqual([cell["id"] for cell in ordered], ["a", "b", "c", "d", "e"])
        self.assertEqual([cell["id"] for cell in fault_matrix.lane_order(self.CELLS[:5], {})], ["a", "b", "c", "d", "e"],
                         "without times every cell costs its limit: ties by size, then id")

    def test_the_parts_deal_every_cell_once_to_the_least_loaded_part(self):
        # Dealt longest first to the least loaded: a -> 1 (100); b -> 2 (60); c -> 2 (110); d -> 1 (140); e -> 2 (120).
        first = fault_matrix.part_of(self.CELLS, 1, 2, self.TIMES)
        second = fault_matrix.part_of(self.CELLS, 2, 2, self.TIMES)
        self.assertEqual([cell["id"] for cell in first], ["a", "d", "note"], "the note cell goes with part 1")
        self.assertEqual([cell["id"] for cell in second], ["b", "c", "e"])

    def test_a_cell_newer_than_the_results_costs_its_own_expected_s(self):
        cells = [dict(self.CELLS[0]), dict(self.CELLS[1], limit_s=100, expected_s=30), dict(self.CELLS[2], limit_s=50)]
        # a 100 (the results), c 50 (no time: its limit), b 30 (its own): a -> 1 (100); c -> 2 (50); b -> 2 (80).
        # Counted at its limit (100), b would have part 2 to itself: a -> 1, b -> 2, c -> 1 (ties to part 1).
        self.assertEqual([cell["id"] for cell in fault_matrix.lane_order(cells, {"a": 100.0})], ["a", "c", "b"])
        self.assertEqual([cell["id"] for cell in fault_matrix.part_of(cells, 2, 2, {"a": 100.0})], ["b", "c"])

    def test_a_ctest_cpu_allocation_is_read_and_nothing_else(self):
        environ = {"CTEST_RESOURCE_GROUP_COUNT": "1", "CTEST_RESOURCE_GROUP_0": "cpus",
                   "CTEST_RESOURCE_GROUP_0_CPUS": "id:1,slots:1"}
        self.assertEqual(fault_matrix.vcluster.allocated_cpus(environ), {1})
        self.assertIsNone(fault_matrix.vcluster.allocated_cpus({}))
        self.assertIsNone(fault_matrix.vcluster.allocated_cpus(dict(environ, CTEST_RESOURCE_GROUP_0="gpus")))


class Table(unittest.TestCase):
    def test_each_cell_says_its_time_and_the_row_its_longest(self):
        cells = [{"id": f"c{i}", "nodes": nodes, "tool": "baseline", "fault": {"fault": "frozen_node"},
                  "expect": {"codes": ["launch.timeout"]}, "status": "pass", "problems": [],
                  "observed": {"elapsed_s": elapsed}} for i, (nodes, elapsed) in enumerate(((2, 61.6), (3, 97.2)))]
        table = fault_matrix.render_table({"backend": "mpi", "commit": "x", "total_s": 1.0, "cells": cells})
        self.assertIn("| baseline, 2 nodes | baseline, 3 nodes | time to the verdict |", table)
        self.assertIn("| frozen node | `launch.timeout`: yes (62 s) | `launch.timeout`: yes (97 s) | up to 97 s |", table)


    def test_committed_results_render_and_the_readme_carries_them(self):
        path = os.path.join(HERE, "fault_matrix_results.json")
        with open(path) as handle:
            results = json.load(handle)
        table = fault_matrix.render_table(results)
        for row in results["cells"]:
            self.assertIn(fault_matrix.FAULT_TITLES[row["fault"]["fault"]], table)
        readme = os.path.join(os.path.dirname(os.path.dirname(HERE)), "README.md")
        self.assertEqual(fault_matrix.main(["check-readme", path, readme]), 0)

    def test_a_changed_readme_block_is_caught(self):
        results = {"format": fault_matrix.RESULTS_FORMAT, "backend": "mpi", "commit": "x", "total_s": 1.0,
                   "cells": [{"id": "a", "nodes": 2, "tool": "screen", "fault": {"fault": "dead_rail"},
                              "expect": {"codes": ["rail.unbalanced"]}, "status": "pass", "problems": []}]}
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work, True)
        with open(os.path.join(work, "r.json"), "w") as handle:
            json.dump(results, handle)
        table = fault_matrix.render_table(results)
        self.assertIn("| dead rail | `rail.unbalanced`: yes | - |", table)
        for block, code in ((table, 0), (table.replace("yes", "no"), 1)):
            with open(os.path.join(work, "README.md"), "w") as handle:
                handle.write(f"x\n{fault_matrix.README_BEGIN}\n{block}{fault_matrix.README_END}\n")
            self.assertEqual(fault_matrix.main(["check-readme", os.path.join(work, "r.json"),
                                                os.path.join(work, "README.md")]), code)


if __name__ == "__main__":
    unittest.main(verbosity=2)
