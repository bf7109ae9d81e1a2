#!/usr/bin/env python3
"""Issue 46 item 5: a split round with a hang, a crash and a node that fails to start, on the virtual cluster at 8
nodes (vcluster.py), the real coll_perf and mpirun, the MPI backend. CTest `cluster_screen_split_faults`; exits 77
(skip) where a cluster cannot be built or coll_perf is not built.

The screen runs one launch a stage step (plan/screen_batches.py): the node stage (doctor, intra) as two launches
over the eight nodes, then the round's four pairs as one `coll_perf --split-ranks 2` launch. The faults start with
the pair stage, so the node stage passes and every node is paired:

  failed start  the launcher's agent cannot reach HOST_DOWN once a pair launch exists (a wrapper of vc-ssh that
                prints what vc-ssh prints for a management link that is down, and exits 255 as ssh does): mpirun
                cannot start its daemon there, and no rank of the launch runs.
  crash         HOST_CRASH's rank is killed (SIGKILL) CRASH_AFTER_S seconds after it starts (a wrapper of coll_perf,
                in the bin dir given to the screen): mpirun ends the launch.
  hang          HOST_HANG's rank hangs in its first case (coll_perf's CCLBENCH_TEST_STALL=R:0, set by the same
                wrapper to its own rank): its own watchdog ends the launch. (Not :frozen - a SIGSTOPped rank is woken
                by the SIGCONT Open MPI sends before it kills a job, as the crash's abort does, and then finishes.)

Each is named (the launcher's words for the failed start and the crash, the watchdog's for the hang), the healthy
pair's record is kept from the launch in which the crash ended the others, and each launch takes no longer than the
time model of plan/launch_time.py on the virtual cluster (its start-up and teardown at its node count) plus its
groups' allowance. The figures (each launch's nodes, seconds and what it settled) are printed.
"""
import json
import os
import stat
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster_setup import APPS, SOURCE_DIR, close_cluster_keeping_work, main, open_cluster, run_screen  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
from cclbench_lib.plan.bounds import PROGRESS_GRACE_S, STOP_GRACE_S  # noqa: E402
from cclbench_lib.plan.launch_time import overhead_s  # noqa: E402

NODES = [f"node{i}" for i in range(1, 9)]
HOST_DOWN, HOST_CRASH, HOST_HANG = "node7", "node3", "node5"
CRASH_AFTER_S = 1  # after the groups without the faulty hosts have written their records
CEILING_S = 20  # --timeout: the watchdog's ceiling (-T), the learned deadlines' floor: a hang costs its launch 20 s
SCREEN_ARGS = ["--quick", "1", "--large", "256K", "--small", "8K", "-n", "4", "-w", "1", "--launch-timeout", "120",
               "--timeout", str(CEILING_S)]
# A launch's own time beyond its start-up and teardown (plan/launch_time.py, the virtual cluster's fit): a healthy
# round's groups (under a second each at these sizes; a loaded 2-core machine's scatter), the crash's delay, and a
# hang's stop: the watchdog's ceiling, the runner's progress grace and its stop.
HEALTHY_GROUPS_S = 15
LOAD = 2.0  # the fit's start-up and teardown on a machine shared with builds: up to twice the measured


def write_executable(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class SplitRoundFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # cls.work: kept when the test fails, for its logs
        open_cluster(cls, NODES, work_prefix="cclbench-split-faults-", tools=("coll_perf",))

    @classmethod
    def tearDownClass(cls):
        close_cluster_keeping_work(cls, not cls.passed, "screen run")

    passed = False

    def tools(self, run_dir):
        """The bin dir (APPS with coll_perf wrapped) and the agent (vc-ssh wrapped), as the module docstring says."""
        bin_dir = os.path.join(self.work, "bin")
        os.makedirs(bin_dir)
        for name in os.listdir(APPS):
            if os.access(os.path.join(APPS, name), os.X_OK) and name != "coll_perf":
                os.symlink(os.path.join(APPS, name), os.path.join(bin_dir, name))
        write_executable(os.path.join(bin_dir, "coll_perf"), f"""#!{sys.executable}
# cluster_screen_split_faults: the faults of the first round's pair launches (module docstring)
import json, os, subprocess, sys, time
args = sys.argv[1:]
points = args[args.index("--split-points") + 1] if "--split-points" in args else ""
host = open("/proc/sys/kernel/hostname").read().strip()
rank = os.environ.get("OMPI_COMM_WORLD_RANK", "")
entries = json.load(open(points)) if "/launch.pairs." in points else []
if any(entry["point"].startswith("pair.r0.") for entry in entries):
    if host == {HOST_HANG!r}:
        os.environ["CCLBENCH_TEST_STALL"] = rank + ":0"  # hangs in its first case: its own watchdog ends it
    elif host == {HOST_CRASH!r}:
        os.environ["CCLBENCH_TEST_STALL"] = rank + ":0"  # held in its first case until it is killed
        others = [entry["json"] for entry in entries
                  if not any("." + name + "." in os.path.basename(entry["json"]) for name in ({HOST_HANG!r}, host))]
        # This process stays the launcher's rank (the program it started): coll_perf runs under it, and once every
        # group without the faulty hosts has written its records both die by SIGKILL, as a crashed rank does.
        print("cclbench-test: " + host + " rank " + rank + " crashes after the others' records", file=sys.stderr,
              flush=True)
        child = subprocess.Popen([{os.path.join(APPS, "coll_perf")!r}] + args)
        deadline = time.monotonic() + 60
        while child.poll() is None:
            if time.monotonic() > deadline or all(os.path.exists(path) for path in others):
                time.sleep({CRASH_AFTER_S})
                child.kill()
                child.wait()
                os.kill(os.getpid(), 9)
            time.sleep(0.1)
        sys.exit(child.returncode)
    print("cclbench-test: " + host + " rank " + rank + " CCLBENCH_TEST_STALL=" +
          os.environ.get("CCLBENCH_TEST_STALL", ""), file=sys.stderr, flush=True)
os.execv({os.path.join(APPS, "coll_perf")!r}, [{os.path.join(APPS, "coll_perf")!r}] + args)
""")
        agent = os.path.join(self.work, "agent")
        write_executable(agent, f"""#!{sys.executable}
import glob, os, sys
host = next((word for word in sys.argv[1:] if not word.startswith("-")), None)
if host == {HOST_DOWN!r} and glob.glob({os.path.join(run_dir, "launches", "launch.pairs.*.hosts")!r}):
    print("ssh: connect to host " + host + " port 22: Connection timed out", file=sys.stderr)  # vc-ssh's words
    sys.exit(255)
os.execv({self.cluster.agent!r}, [{self.cluster.agent!r}] + sys.argv[1:])
""")
        return bin_dir, agent

    def test_hang_crash_and_failed_start_in_one_round(self):
        results = os.path.join(self.work, "results")
        run_dir = os.path.join(results, "split-faults")
        bin_dir, agent = self.tools(run_dir)
        started = time.monotonic()
        result = run_screen(self.cluster, NODES, results, "split-faults", SCREEN_ARGS, bin_dir=bin_dir, agent=agent,
                            timeout=400)
        wall = time.monotonic() - started
        self.assertIn(result.returncode, (0, 1, 3), result.stdout[-2000:] + result.stderr[-3000:])
        with open(os.path.join(run_dir, "screen.json"), encoding="utf-8") as handle:
            document = json.load(handle)
        with open(os.path.join(run_dir, "screen_manifest.json"), encoding="utf-8") as handle:
            manifest = json.load(handle)
        launches = manifest["launches"]
        print(f"\n  screen of {len(NODES)} nodes: exit {result.returncode} in {wall:.1f} s", file=sys.stderr)
        for name, entry in sorted(launches.items(), key=lambda item: item[1]["finished_utc"]):
            print(f"  {name}: {entry['jobs']} group(s) on {entry['nodes']} node(s), exit {entry['exit_code']} in "
                  f"{entry['elapsed_s']} s: {entry['done']} done, failed {sorted(entry['failed'])}, not started "
                  f"{sorted(entry['not_started'])}, {entry['rerun']} to run again", file=sys.stderr)
        pairs = [name for name in launches if name.startswith("launch.pairs.")]
        by_order = sorted(pairs, key=lambda name: launches[name]["finished_utc"])
        first_round = [dict(job, name=name) for name, job in manifest["jobs"].items() if name.startswith("pair.r0.")]
        self.assertTrue(first_round, json.dumps(manifest, indent=1)[:3000])
        # The node stage passed on every node: every node was paired in the round.
        self.assertEqual(sorted(host for job in first_round for host in job["hosts"]), NODES)

        # The failed start: the first pair launch named HOST_DOWN from the launcher's words and ran nothing.
        first = launches[by_order[0]]
        self.assertEqual((first["nodes"], first["done"]), (8, 0), first)
        self.assertEqual(list(first["not_started"]), [HOST_DOWN], first)
        self.assertIn(HOST_DOWN, first["not_started"][HOST_DOWN])
        # ... dropped: no later launch has it.
        for name in by_order[1:]:
            hosts_file = os.path.join(run_dir, "launches", name + ".hosts")
            with open(hosts_file, encoding="utf-8") as handle:
                self.assertNotIn(HOST_DOWN, handle.read().split(), name)

        def job_of(host):
            return next(job for job in first_round if host in job["hosts"])
        crashed, hung = job_of(HOST_CRASH), job_of(HOST_HANG)
        healthy = [job for job in first_round if not {HOST_DOWN, HOST_CRASH, HOST_HANG} & set(job["hosts"])]
        self.assertEqual(len(healthy), 1, first_round)
        # The crash: named from the launcher's words (the signal and the host), its own group failed.
        self.assertEqual(crashed["status"], "failed", crashed)
        self.assertRegex(crashed["reason"], rf"{HOST_CRASH}.*signal 9|signal 9.*{HOST_CRASH}")
        # The hang: named by the watchdog (a timeout naming the frozen rank's host) or the runner's stop.
        self.assertEqual(hung["status"], "failed", hung)
        self.assertRegex(hung["reason"], r"timeout|no progress|hung", hung)
        self.assertIn(HOST_HANG, hung["reason"])
        # The healthy pair kept: measured, once the failed start's launch was relaunched without HOST_DOWN.
        self.assertEqual(healthy[0]["status"], "complete", healthy[0])
        self.assertEqual(healthy[0]["attempts"], 2, healthy[0])
        record = next(pair for pair in document["pairs"] if pair["stage"] == "pair" and
                      sorted((pair["a"], pair["b"])) == sorted(healthy[0]["hosts"]))
        self.assertIsNotNone(record["busbw_gbps"], record)
        not_started = {row["name"]: row for row in document["nodes"]}[HOST_DOWN]
        self.assertNotEqual(not_started["verdict"], "accept", not_started)

        # Time: each pair launch within the model (its start-up and teardown on the virtual cluster, with LOAD for a
        # shared machine) plus its groups' allowance: a hang's stop, the crash's delay, or a healthy round's groups.
        for name in pairs:
            entry = launches[name]
            failed = " ".join(entry["failed"].values())
            if HOST_HANG in failed and ("timeout" in failed or "no progress" in failed):
                allowance = CEILING_S + PROGRESS_GRACE_S + STOP_GRACE_S
            elif HOST_CRASH in failed:
                allowance = CRASH_AFTER_S + HEALTHY_GROUPS_S
            else:
                allowance = HEALTHY_GROUPS_S
            bound = LOAD * max(1.0, overhead_s("mpirun-ssh", entry["nodes"], "vcluster")) + allowance
            self.assertLessEqual(entry["elapsed_s"], bound, (name, entry))
        type(self).passed = True


if __name__ == "__main__":
    main()
