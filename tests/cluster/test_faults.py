#!/usr/bin/env python3
"""Faults on the virtual cluster: faults across hosts in the middle of a baseline's cross-host point.

The baseline runs inside node5 under real mpirun (through the vc-ssh agent) with one rank per node on the
MPI backend (coll_perf over TCP on the two rails; the plan still needs a GPU per host today, so topo_map
and p2p_matrix are the test fakes with one GPU). While its inter-node point is measuring (its first
records are in cases.jsonl), node7's rank gets:

  kill -9        the rank dies: mpirun sees it and ends the job
  eth0 down      node7's rail eth0 goes down (a partition of the rail, the management link and with it
                 mpirun's own channel stay up): the TCP traffic on eth0 stalls and coll_perf's watchdog
                 (-T, from baseline --timeout) aborts every rank
  SIGSTOP        the rank freezes: node5's rank waits on it until its watchdog aborts the job

Each time: every coll_perf rank on both nodes is gone within the watchdog time (plus slack for the
abort), the records measured before the fault are still in cases.jsonl, baseline exits 1 naming the
point and the launch's exit, and `baseline --resume` (fault cleared) completes the run with exit 0.
The fault table (fault, seconds until every rank was out, records kept, resume result) is printed.

CTest `cluster_faults` (label cluster); exits 77 (skip) with the reason where no cluster can be built.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
from cluster_setup import (CCLBENCH, fake_gpu_bin_dir, fake_hca_fail_codes, main, mpi_env,  # noqa: E402
                           mpirun_args, open_cluster)

NODES = ("node5", "node7")
WATCHDOG_S = 8          # coll_perf -T (baseline --timeout): per case
LAUNCH_TIMEOUT_S = 120  # the runner's outer limit: must not be what ends these faults
INTER = "inter.cross0.rail-mlx5_0"
TABLE = []


def read_records(path, point=None):
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if point is None or record.get("point") == point:
                records.append(record)
    return records


class Faults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        open_cluster(cls, NODES, tools=("coll_perf",))
        cls.work = tempfile.TemporaryDirectory(prefix="cclbench-faults-")
        cls.bin_dir = fake_gpu_bin_dir(os.path.join(cls.work.name, "bin"))
        cls.netns_inode = {node: os.stat(f"/run/netns/{cls.cluster.ns(node)}").st_ino for node in NODES}

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.work.cleanup()
        if TABLE:
            print("\n  | fault | every rank out after | records kept | resume |\n  |---|---|---|---|", file=sys.stderr)
            for row in TABLE:
                print("  | " + " | ".join(row) + " |", file=sys.stderr)

    # -- processes -------------------------------------------------------------------------------
    def ranks(self, node=None):
        """PIDs of this test's coll_perf processes, on `node` (by network namespace) or on either node."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
                inode = os.stat(f"/proc/{entry}/ns/net").st_ino
                with open(f"/proc/{entry}/stat") as handle:
                    state = handle.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "Z" or not argv or os.path.basename(argv[0].decode(errors="replace")) != "coll_perf":
                continue
            if self.work.name.encode() not in b" ".join(argv):
                continue
            wanted = [self.netns_inode[node]] if node else list(self.netns_inode.values())
            if inode in wanted:
                found.append(int(entry))
        return found

    # -- the baseline ----------------------------------------------------------------------------
    def baseline(self, run_id, resume=False):
        argv = [CCLBENCH, "baseline", "--results", os.path.join(self.work.name, "results")]
        if resume:
            argv += ["--resume", run_id]
        else:
            argv += ["--run-id", run_id, "--hosts", ",".join(NODES), "--gpus-per-node", "1", "--hcas", "mlx5_0:1",
                     "--coll", "all_reduce", "-b", "64K", "-e", "2M", "-f", "2", "-n", "20", "-w", "2", "--repeat", "1",
                     "--cross-nic", "0", "--expect-transport", "none", "--no-tuning-probe",
                     "--timeout", str(WATCHDOG_S), "--launch-timeout", str(LAUNCH_TIMEOUT_S),
                     "--bin-dir", self.bin_dir,
                     f"--mpirun-args={mpirun_args(self.cluster)}"]
        with open(os.path.join(self.work.name, f"{run_id}.{'resume' if resume else 'run'}.err"), "w") as err:
            return self.cluster.popen("node5", argv, env=mpi_env(), stdout=subprocess.DEVNULL, stderr=err,
                                      cwd=self.work.name)

    def run_dir(self, run_id):
        return os.path.join(self.work.name, "results", run_id)

    def stderr_of(self, run_id, resume=False):
        with open(os.path.join(self.work.name, f"{run_id}.{'resume' if resume else 'run'}.err")) as handle:
            return handle.read()

    def wait_mid_point(self, process, run_id, deadline_s=150):
        """Until the inter-node point has its first records and ranks on node7."""
        cases = os.path.join(self.run_dir(run_id), "cases.jsonl")
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.fail(f"baseline ended before the inter point ({process.returncode}): {self.stderr_of(run_id)[-1500:]}")
            if len(read_records(cases, INTER)) >= 2 and self.ranks("node7"):
                return len(read_records(cases, INTER))
            time.sleep(0.05)
        self.fail("the inter point did not start in time")

    def fault_run(self, fault, inject, clear=lambda: None, exit_says=""):
        run_id = fault.split()[0].replace("-", "")
        process = self.baseline(run_id)
        try:
            before = self.wait_mid_point(process, run_id)
            injected = time.monotonic()
            inject(self.ranks("node7"))
            while self.ranks() and time.monotonic() - injected < LAUNCH_TIMEOUT_S + 30:
                time.sleep(0.05)
            out_after = time.monotonic() - injected
            clear()
            code = process.wait(timeout=240)
        finally:
            clear()
            if process.poll() is None:
                process.kill()
                process.wait()
        error = self.stderr_of(run_id).strip().splitlines()[-1]
        kept = read_records(os.path.join(self.run_dir(run_id), "cases.jsonl"), INTER)
        with open(os.path.join(self.run_dir(run_id), "run_manifest.json")) as handle:
            point = json.load(handle)["points"][INTER]
        resumed = self.baseline(run_id, resume=True)
        resume_code = resumed.wait(timeout=240)
        with open(os.path.join(self.run_dir(run_id), "run_manifest.json")) as handle:
            manifest = json.load(handle)
        final = read_records(os.path.join(self.run_dir(run_id), "cases.jsonl"), INTER)
        print(f"\n  {fault}: ranks out {out_after:.1f}s after it; baseline exit {code}: {error}\n"
              f"  point: {point['status']} {point['reason']}; records {before} seen, {len(kept)} kept; "
              f"resume exit {resume_code}, run {manifest['status']}", file=sys.stderr)
        TABLE.append((fault, f"{out_after:.1f} s", f"{len(kept)} (>= {before} seen before)",
                      f"exit {resume_code}, run {manifest['status']}, {len({r['bytes'] for r in final if r.get('status') == 'ok'})} of 6 sizes"))
        self.assertLess(out_after, WATCHDOG_S + 12, f"{fault}: ranks still there {out_after:.1f}s later")
        self.assertEqual(code, 1, error)
        self.assertIn(f"{INTER}: exit {exit_says}", error)
        self.assertEqual(point["status"], "failed")
        if point["exit_code"] == 4:
            # The watchdog ended it: the reason names the point and the case that hung (coll_perf's own message).
            # --timeout 8 is the ceiling of the deadlines coll_perf learns from the run, and says so.
            self.assertRegex(point["reason"], rf"point {INTER}: coll_perf's watchdog: case all_reduce\.\S+ \(size \d+ B, "
                                              rf"[^)]+\) on rank \d \([^)]+\) did not finish within {WATCHDOG_S} s "
                                              rf"\(learned deadline: .*capped at the -T ceiling {WATCHDOG_S} s")
            # and the doctor's fail findings for its hosts (here the fake HCA names this machine lacks)
            self.assertRegex(point["reason"], r"; the doctor found on node5, node7: nccl_env NCCL_IB_HCA: ")
        self.assertGreaterEqual(len(kept), before, "records measured before the fault are kept")
        self.assertEqual(resume_code, 1, self.stderr_of(run_id, resume=True)[-2000:])
        self.assertEqual(fake_hca_fail_codes(self.run_dir(run_id)), ["doctor.fail", "rail.flag"],
                         self.stderr_of(run_id, resume=True)[-2000:])
        self.assertEqual(manifest["status"], "complete")
        sizes = {r["bytes"] for r in final if r.get("status") == "ok"}
        self.assertEqual(len(sizes), 6, f"64K..2M: every size measured after the resume ({sorted(sizes)})")
        return point

    def test_kill_9_of_a_rank_on_node7(self):
        self.fault_run("kill -9 of node7's rank", lambda pids: [os.kill(pid, signal.SIGKILL) for pid in pids],
                       exit_says="137 (a rank or the launcher died of SIGKILL)")

    def test_node7_eth0_down_mid_run(self):
        self.fault_run("eth0 down on node7 (rail partition)",
                       lambda pids: self.cluster.set_link("node7", "eth0", up=False),
                       clear=lambda: self.cluster.set_link("node7", "eth0", up=True), exit_says="4 (timeout)")

    def test_sigstop_of_a_rank_on_node7(self):
        stopped = []

        def stop(pids):
            stopped.extend(pids)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)

        def resume():
            for pid in stopped:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        self.fault_run("SIGSTOP of node7's rank", stop, clear=resume, exit_says="4 (timeout)")


if __name__ == "__main__":
    main()
