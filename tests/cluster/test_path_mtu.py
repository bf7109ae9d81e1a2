#!/usr/bin/env python3
"""The path MTU check on the virtual cluster: `doctor --hosts` checks each rail's MTU end to end between the hosts
(a don't-fragment ICMP echo of the interface's MTU, bisected on failure); a baseline with default flags does not
run its launches across the hosts over such a path (exit 1 in under 2 minutes, the finding as the cause).
--run-despite-doctor is tests/scripts/test_baseline.py's DoctorGate; a hang ended by coll_perf's watchdog, named
with its case and the doctor's findings, is tests/cluster/test_faults.py.

CTest `cluster_path_mtu` (label cluster); exits 77 (skip) with the reason where no cluster can be built.
Expected values come from the test's own link settings (vcluster's port MTU), not from the product.
"""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
from cluster_setup import (CCLBENCH, COLL_PERF, SOURCE_DIR, fake_gpu_bin_dir, main, mpi_env,  # noqa: E402
                           mpirun_args, skip_reason)

sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "scripts"))
from helpers import validate  # noqa: E402  (the schema subset the scripts tests use)

NODES = ("node5", "node7")


def launcher_args(cluster, btl=True):
    return "--mpirun-args=" + mpirun_args(cluster, btl)


class PathMtu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        cls.work = tempfile.TemporaryDirectory(prefix="cclbench-pathmtu-")
        cls.cluster = vcluster.Cluster(list(NODES))
        cls.cluster.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        cls.work.cleanup()

    def set_mtus(self, host_mtu, port_mtu):
        """host_mtu on every node's rails; port_mtu {rail: mtu} on the bridge ports of both nodes."""
        for node in NODES:
            for rail in vcluster.RAILS:
                self.cluster.set_link(node, rail, port_mtu=9000)  # raise first: a host MTU above its port's fails
                self.cluster.set_link(node, rail, mtu=host_mtu)
                self.cluster.set_link(node, rail, port_mtu=port_mtu[rail])

    def doctor(self):
        path = os.path.join(self.work.name, "doctor.json")
        env = dict(mpi_env(), NCCL_SOCKET_IFNAME="eth0,eth3")
        started = time.monotonic()
        result = self.cluster.exec("node5", [CCLBENCH, "doctor", "--hosts", ",".join(NODES), launcher_args(self.cluster),
                                             "--json", path], env=env, capture_output=True, text=True, timeout=240)
        elapsed = time.monotonic() - started
        ok, errors = validate("doctor.schema.json", path)
        self.assertTrue(ok, errors)
        with open(path) as handle:
            document = json.load(handle)
        checks = {c["subject"]: c for c in document["checks"] if c["id"] == "path_mtu"}
        print(f"\n  doctor --hosts: exit {result.returncode} in {elapsed:.1f}s", file=sys.stderr)
        for check in checks.values():
            print(f"    {check['status']:4}  {check['subject']}: {check['detail']}", file=sys.stderr)
        return result, checks

    def expected_subjects(self):
        return {f"{a}:{rail} -> {b}:{rail}" for a in NODES for b in NODES if a != b for rail in vcluster.RAILS}

    def test_hosts_9000_ports_1500_fails_with_the_numbers(self):
        self.set_mtus(9000, {"eth0": 1500, "eth3": 9000})
        result, checks = self.doctor()
        self.assertEqual(result.returncode, 1, result.stdout[-2000:] + result.stderr[-2000:])
        self.assertEqual(set(checks), self.expected_subjects())
        for subject, check in checks.items():
            if ":eth0 " in subject:
                self.assertEqual(check["status"], "fail", check)
                src, dst = subject.split(":")[0], subject.split("-> ")[1].split(":")[0]
                self.assertIn("MTU 9000 at both ends", check["detail"])
                self.assertIn(f"largest don't-fragment packet from {src} to {dst} "
                              f"({self.cluster.address(dst, 'eth0')}) is 1500 bytes", check["detail"])
            else:
                self.assertEqual(check["status"], "pass", check)
                self.assertIn("9000-byte don't-fragment packets reach", check["detail"])
        self.assertIn("path_mtu", result.stdout)  # the table the user reads names it too

    def test_all_9000_passes(self):
        self.set_mtus(9000, {"eth0": 9000, "eth3": 9000})
        result, checks = self.doctor()
        self.assertEqual(set(checks), self.expected_subjects())
        self.assertEqual({c["status"] for c in checks.values()}, {"pass"}, checks)
        self.assertTrue(all("9000-byte" in c["detail"] for c in checks.values()))

    def test_all_1500_passes(self):
        self.set_mtus(1500, {"eth0": 1500, "eth3": 1500})
        result, checks = self.doctor()
        self.assertEqual(set(checks), self.expected_subjects())
        self.assertEqual({c["status"] for c in checks.values()}, {"pass"}, checks)
        self.assertTrue(all("1500-byte" in c["detail"] for c in checks.values()))

    def probe_as_nobody(self, *specs):
        # nobody cannot read a checkout in a private (0700) folder such as CI's clone: run a readable copy of scripts/
        copy = tempfile.mkdtemp(prefix="cclbench-nobody-")
        self.addCleanup(shutil.rmtree, copy, True)
        shutil.copytree(os.path.join(os.path.dirname(CCLBENCH)), os.path.join(copy, "scripts"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for folder, _dirs, files in os.walk(copy):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o755)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", os.path.join(copy, "scripts", "cclbench"),
                "doctor"]
        for spec in specs:
            argv += ["--probe-path-mtu", spec]
        result = self.cluster.exec("node5", argv, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        line = next(line for line in result.stdout.splitlines() if line.startswith("CCLBENCH_PATHMTU_JSON "))
        return json.loads(line.split(" ", 1)[1])

    def test_unprivileged_probe_uses_an_icmp_datagram_socket_where_ping_group_range_allows(self):
        self.set_mtus(9000, {"eth0": 1500, "eth3": 9000})
        eth0, eth3 = (f"{rail}:{self.cluster.address('node7', rail)}:9000" for rail in vcluster.RAILS)
        sysctl = ["sysctl", "-q", "-w"]  # per network namespace: node5's only
        self.cluster.exec("node5", sysctl + ["net.ipv4.ping_group_range=0 2147483647"], check=True)
        try:
            narrow, wide = self.probe_as_nobody(eth0, eth3)
        finally:
            self.cluster.exec("node5", sysctl + ["net.ipv4.ping_group_range=1 0"], check=True)
        print(f"\n  as nobody: {narrow}\n             {wide}", file=sys.stderr)
        self.assertTrue(narrow["method"].startswith("ICMP datagram"), narrow)
        self.assertEqual((narrow["ok"], narrow["largest"]), (False, 1500), narrow)
        self.assertEqual((wide["ok"], wide["largest"]), (True, 9000), wide)
        (denied,) = self.probe_as_nobody(eth0)  # ping_group_range "1 0": nobody may not
        self.assertIsNone(denied["ok"], denied)
        self.assertIn("net.ipv4.ping_group_range", denied["reason"])

    def test_baseline_with_default_flags_stops_at_the_doctor_finding(self):
        """Hosts at 9000, one rail's switch ports at 1500, default flags (no --timeout, no --launch-timeout):
        the doctor names the path, and no launch across the hosts spends a bound rediscovering it (with the MPI
        backend, the sanity pass's TCP traffic over the rails black-holes at 9000/1500 as NCCL's does). Exit 1
        in under 2 minutes, the finding as the cause in the error, run.log, the manifest and the verdict; the
        node-local launches still run."""
        if not os.access(COLL_PERF, os.X_OK):
            self.skipTest(f"coll_perf not built ({COLL_PERF})")
        bin_dir = fake_gpu_bin_dir(os.path.join(self.work.name, "bin"))  # one fake GPU per host: the plan needs GPUs
        self.set_mtus(9000, {"eth0": 1500, "eth3": 9000})
        env = dict(mpi_env(), NCCL_SOCKET_IFNAME="eth0,eth3")
        run_dir = os.path.join(self.work.name, "results", "mtu")
        started = time.monotonic()
        result = self.cluster.exec(
            "node5", [CCLBENCH, "baseline", "--hosts", ",".join(NODES), "--gpus-per-node", "1", "--hcas", "mlx5_0:1",
                      "--coll", "all_reduce", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1", "--repeat", "1",
                      "--expect-transport", "none", "--no-tuning-probe", "--bin-dir", bin_dir,
                      "--results", os.path.join(self.work.name, "results"), "--run-id", "mtu",
                      launcher_args(self.cluster)],
            env=env, capture_output=True, text=True, timeout=300, cwd=self.work.name)
        elapsed = time.monotonic() - started
        error = result.stderr.strip().splitlines()[-1]
        print(f"\n  baseline (default flags): exit {result.returncode} in {elapsed:.1f}s\n  {error}", file=sys.stderr)
        self.assertEqual(result.returncode, 1, result.stderr[-3000:])
        self.assertLess(elapsed, 120, "the MTU case ends in under 2 minutes with default flags")
        finding = r"node[57]:eth0 -> node[57]:eth0: MTU 9000 at both ends, .* is 1500 bytes"
        self.assertIn("launch(es) across hosts not run, first sanity", error)
        self.assertRegex(error, "path_mtu " + finding)
        with open(os.path.join(run_dir, "run_manifest.json")) as handle:
            points = json.load(handle)["points"]
        crossing = [name for name in points if name == "sanity" or name.startswith("inter.")]
        self.assertTrue(crossing and all(points[name]["status"] == "skipped" for name in crossing), points)
        for name in crossing:
            self.assertEqual(points[name]["skipped_by"], "doctor")
            self.assertRegex(points[name]["reason"], "^not run: the doctor failed the path.*" + finding)
        local = [name for name in points if name.startswith(("intra.", "topology.", "p2p."))]
        self.assertTrue(local and all(points[name]["status"] == "complete" for name in local), points)
        with open(os.path.join(run_dir, "run.log")) as handle:
            self.assertRegex(handle.read(), r"# \S+ skip sanity: not run: the doctor failed the path")
        with open(os.path.join(run_dir, "verdict.json")) as handle:
            verdict = json.load(handle)
        self.assertEqual(verdict["overall"], "FAILED")
        reasons = verdict["reasons"]
        path_fail = next(i for i, r in enumerate(reasons) if r["code"] == "doctor.fail" and "path_mtu" in r["subject"])
        not_run = [i for i, r in enumerate(reasons) if r["code"] == "launch.not_run"]
        self.assertLess(path_fail, min(not_run), "the doctor's finding comes before what it caused")
        # The sanity pass is no measured point: its reason names it where to look (run.log, launch sanity).
        self.assertEqual({reasons[i]["point"] or reasons[i]["look"].split("launch ")[-1].split(";")[0] for i in not_run},
                         set(crossing))
        for i in not_run:
            self.assertRegex(reasons[i]["text"], "the doctor failed the path.*" + finding)
        with open(os.path.join(run_dir, "report.md")) as handle:
            self.assertIn("launch not run (doctor)", handle.read())

if __name__ == "__main__":
    main()
