#!/usr/bin/env python3
"""The cross-host flow on the virtual cluster (vcluster.py), with real mpirun through the ssh-like agent and
the real tools of the build under test (CCLBENCH_BINARY_DIR): cclbench runs inside node5 as a user would run
it on the first node. CTest `cluster_crosshost`; exits 77 (skip) with the reason where no cluster can be
built (not root, no namespaces, no ip) or the tools are not built.

What is asserted is what a user reads: exit codes, the doctor table, the report's per-host sections, its
transport and rails tables and its environment record, compare's output, run.log. Expected values come from
outside cclbench: host names from the cluster's definition, the environment from what the test itself set
(and, for the forced difference, from the wrapper the test wrote), the launcher's words from ssh's own
message format (the agent behaves like ssh: tests/cluster/vc-ssh).

GPU-less hosts: the MPI backend on every host, every point correctness-only. The MPI backend's TCP traffic
goes over the rails by subnet (--mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24: a name list with one
interface down makes Open MPI ignore the whole list on that node), mpirun's own traffic over mgmt0.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vcluster  # noqa: E402
from cluster_setup import APPS, CCLBENCH, main, mpirun_args, skip_reason  # noqa: E402
HOSTS = "node5,node7"
# Small and few: this flow runs on a loaded 2-core CI machine.
SMALL = ["-b", "8K", "-e", "64K", "--coll", "all_reduce", "-n", "3", "-w", "1", "--repeat", "1"]
RAILS = ["--netdevs", "eth0,eth3"]
# Each rail alone: sizes above Open MPI's 64 KiB TCP eager limit (below it a message takes one interface whatever
# the list), three of them so that rail.slow has six cases to judge; the 1M cases are where the rail shares of the
# MPI backend are judged (rules/anomalies.MPI_STRIPED_EVEN_BYTES), so a false rail.dead would show there.
RAIL_SIZES = ["-b", "256K", "-e", "1M", "--coll", "all_reduce", "-n", "3", "-w", "1", "--repeat", "1"] + RAILS
# A rail degraded, not down: tbf on node7's eth3, both directions. 5 Mbit/s makes eth3 alone several times slower
# than eth0 alone on a loaded 2-core machine (measured 2.8-8.5x at 256K-1M, rules/rails.RAIL_SLOW_MPI_RATIO); the
# slow run stops at 512K, half the bytes through the limited rail (rail.slow judges every size above 64 KiB).
SLOW_SIZES = ["-b", "128K", "-e", "512K", "--coll", "all_reduce", "-n", "3", "-w", "1", "--repeat", "1"] + RAILS
SLOW_RATE = "5mbit"


def coll_perf_schema(document):
    version = str(document.get("schema_version") or "0")
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2])


class CrossHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason("coll_perf", "topo_map")
        if reason:
            raise unittest.SkipTest(reason)
        cls.work = tempfile.mkdtemp(prefix="cclbench-crosshost-")
        cls.cluster = vcluster.Cluster(["node5", "node7"])
        cls.cluster.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)
        shutil.rmtree(cls.work, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------------
    def mpirun_args(self):
        return mpirun_args(self.cluster)

    def env(self, **extra):
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("NCCL_", "CUDA_", "UCX_", "SLURM_"))}
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONDONTWRITEBYTECODE="1")
        env.update(extra)
        return env

    def argv(self, *args, bin_dir=APPS):
        argv = [CCLBENCH] + list(args)
        if args[0] in ("baseline", "plan"):
            argv += ["--bin-dir", bin_dir, "--results", os.path.join(self.work, "results")]
        if args[0] in ("baseline", "plan", "doctor"):
            argv.append(f"--mpirun-args={self.mpirun_args()}")
        return argv

    def cclbench(self, *args, env=None, bin_dir=APPS, timeout=240):
        result = self.cluster.exec("node5", self.argv(*args, bin_dir=bin_dir), env=env or self.env(),
                                   capture_output=True, text=True, timeout=timeout, cwd=self.work)
        sys.stderr.write(f"\n  $ cclbench {' '.join(args[:1])}: exit {result.returncode}; "
                         f"{(result.stderr.strip().splitlines() or [''])[-1][:160]}\n")
        return result

    def run_dir(self, run_id):
        return os.path.join(self.work, "results", run_id)

    def read(self, run_id, *parts):
        with open(os.path.join(self.run_dir(run_id), *parts)) as handle:
            return handle.read()

    def baseline(self, run_id, env=None, bin_dir=APPS, expect_exit=0, sizes=SMALL):
        result = self.cclbench("baseline", "--hosts", HOSTS, "--run-id", run_id, *sizes, env=env, bin_dir=bin_dir)
        self.assertEqual(result.returncode, expect_exit, result.stdout[-3000:] + result.stderr[-3000:])
        return result

    # -- doctor ----------------------------------------------------------------------------------
    def test_doctor_across_both_hosts(self):
        result = self.cclbench("doctor", "--hosts", HOSTS)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertRegex(result.stdout, r"doctor: pass \(\d+ pass, 0 warn, 0 fail, \d+ skip\) on node5, node7")
        table_hosts = {line.split()[0] for line in result.stdout.splitlines()[1:] if line and not line.startswith("doctor:")}
        self.assertEqual(table_hosts, {"node5", "node7", "*"})

    def test_doctor_unknown_host_is_a_usage_error(self):
        result = self.cclbench("doctor", "--hosts", "node5,node9")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertEqual(result.stderr.strip(),
                         "cclbench: error: unknown host 'node9': it does not resolve (check --hosts/--hostfile)")

    def test_doctor_unreachable_host_gets_the_launchers_words(self):
        self.cluster.set_link("node7", "mgmt0", up=False)
        try:
            result = self.cclbench("doctor", "--hosts", HOSTS)
        finally:
            self.cluster.set_link("node7", "mgmt0", up=True)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        line = next(line for line in result.stdout.splitlines() if line.startswith("node7") and "host_report" in line)
        self.assertRegex(line, r"no doctor result from node7: mpirun exited 255: ssh: connect to host node7 port 22: "
                               r"(Connection timed out|No route to host)")
        self.assertNotIn("same path there", result.stdout)

    # -- baseline, report, compare, resume -------------------------------------------------------
    def test_baseline_on_the_mpi_backend_records_the_environment_every_host_ran_with(self):
        # Each rail alone too (--netdevs eth0,eth3), at sizes where the MPI backend's rails are judged: a healthy
        # pair is HEALTHY, the rail a single-rail point leaves out no dead rail.
        self.baseline("envcase", env=self.env(NCCL_SOCKET_IFNAME="eth0"), sizes=RAIL_SIZES)
        verdict = json.loads(self.read("envcase", "verdict.json"))
        self.assertEqual(verdict["overall"], "HEALTHY", [(r["code"], r["point"], r["subject"]) for r in verdict["reasons"]])
        log = self.read("envcase", "run.log")
        self.assertIn("# note: no GPU on the hosts: the MPI backend", log)
        coll = [line for line in log.splitlines() if line.startswith("$ ") and "coll_perf" in line]
        self.assertEqual(len(coll), 6, "sanity, intra.node5, intra.node7, inter.mpi, inter.mpi.rail-eth0, "
                                       "inter.mpi.rail-eth3")
        for line in coll:
            self.assertIn("-x NCCL_SOCKET_IFNAME=eth0", line)
            self.assertIn("--backend mpi", line)
        report = self.read("envcase", "report.md")
        for text in ("### node5", "### node7", "## Transport evidence per sweep point", "### Rails",
                     "## Correctness-only points", "| inter.mpi | MPI backend on host memory: correctness only",
                     "> Note: no GPU on the hosts: the MPI backend"):
            self.assertIn(text, report)
        self.assertRegex(report, r"\| inter\.mpi \| - \| - \| not gated \| not available: MPI backend")
        # The rails per host from the interfaces' own counters (--netdevs): MPI's TCP traffic over both rails.
        for host in ("node5", "node7"):
            self.assertRegex(report, rf"\| inter\.mpi \| {host} \| netdev \(--netdevs\) \| eth0 \d+%, eth3 \d+% \|")
            self.assertRegex(report, rf"\| inter\.mpi\.rail-eth0 \| {host} \| netdev \(--netdevs\) \| eth0 \d+%, eth3 \d+% \|")
        self.assertNotIn("rail dead", report)
        # The line rate is each host's own interface's: the harness reads, on each node, where sysfs keeps the
        # rails (not through cclbench). The virtual cluster's rails are veth pairs under devices/virtual/net, whose
        # speed (10000) is nominal: no line rate, said so, and the busbw shown without a percentage. A
        # device-backed interface with a speed would be shown as a fraction of it.
        paths = [self.cluster.exec(host, ["readlink", "-f", f"/sys/class/net/{rail}"], capture_output=True,
                                   text=True).stdout.strip() for host in ("node5", "node7") for rail in ("eth0", "eth3")]
        self.assertTrue(all("/devices/virtual/net/" in path for path in paths), paths)
        self.assertRegex(report, r"\| inter\.mpi \| [0-9.e+-]+ GB/s \(all_reduce\.[^)]*\) \| - \(line rate of ")
        self.assertNotRegex(report, r"% of \d+ x [0-9.]+ Gb/s")
        doctor = json.loads(self.read("envcase", "doctor.json"))
        for host in ("node5", "node7"):
            eth0 = doctor["links"][host]["netdevs"]["eth0"]
            self.assertIsNone(eth0["speed_mbps"], eth0)
            self.assertIn("virtual interface", eth0["reason"])
        self.assertNotIn("host environment differs", report)
        manifest = json.loads(self.read("envcase", "run_manifest.json"))
        self.assertEqual(manifest["env"].get("NCCL_SOCKET_IFNAME"), "eth0")
        self.assertEqual(manifest["plan_inputs"]["exported_env"], {"NCCL_SOCKET_IFNAME": "eth0"})
        raw = json.loads(self.read("envcase", "raw", "inter.mpi.json"))
        if coll_perf_schema(raw) < (1, 4):
            self.skipTest(f"coll_perf schema {raw.get('schema_version')} records no env_by_host (1.4)")
        by_host = raw["manifest"]["env_by_host"]
        self.assertEqual({host: env.get("NCCL_SOCKET_IFNAME") for host, env in by_host.items()},
                         {"node5": "eth0", "node7": "eth0"})
        self.assertEqual(raw["manifest"]["env_rank_disagreements"], [])
        self.assertRegex(report, r"\| NCCL_SOCKET_IFNAME \| eth0 \| eth0 \|")
        again = self.cclbench("report", self.run_dir("envcase"))
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("(0 anomalies)", again.stderr)

    def test_a_slow_rail_alone_is_named_with_the_ratio(self):
        """node7's eth3 limited (slow, not down): rail.slow names eth3 with the ratio, the only fail; byte shares of
        the both-rails point stay even (striping), so no other rail rule can tell. (The healthy pair, HEALTHY, is
        the envcase baseline.) Expected from outside cclbench: the rail the harness limited, and the coll_perf
        times of the two single-rail points in raw/ (the median of their per-case ratios)."""
        self.cluster.set_rate("node7", "eth3", SLOW_RATE)
        try:
            self.baseline("rails-slow", sizes=SLOW_SIZES, expect_exit=1)
        finally:
            self.cluster.set_rate("node7", "eth3", None)
        verdict = json.loads(self.read("rails-slow", "verdict.json"))
        fails = [reason for reason in verdict["reasons"] if reason["severity"] == "fail"]
        self.assertEqual([(r["code"], r["subject"], r["point"]) for r in fails],
                         [("rail.slow", "eth3", "inter.mpi.rail-eth3")])
        ratio = fails[0]["numbers"]["ratio"]

        def times(point):
            document = json.loads(self.read("rails-slow", "raw", point + ".json"))
            return {case["case_id"]: case["time_us"]["mean"] for case in document["cases"]}
        eth0, eth3 = times("inter.mpi.rail-eth0"), times("inter.mpi.rail-eth3")
        ratios = sorted(eth3[case] / eth0[case] for case in eth0)
        sys.stderr.write(f"\n  eth3 alone / eth0 alone per case: {[round(r, 2) for r in ratios]}; rail.slow ratio {ratio:.2f}\n")
        middle = len(ratios) // 2
        self.assertGreaterEqual(ratio, ratios[middle - 1] * 0.999)
        self.assertLessEqual(ratio, ratios[middle] * 1.001)
        self.assertGreaterEqual(ratio, 2.5)
        report = self.read("rails-slow", "report.md")
        self.assertIn(f"| rail slow | inter.mpi.rail-eth3 | eth3 alone (inter.mpi.rail-eth3): {ratio:.1f}x slower than eth0 "
                      "alone (inter.mpi.rail-eth0)", report)

    def test_a_host_whose_ranks_run_another_environment_is_an_anomaly(self):
        # A wrapper in front of coll_perf changes node7's environment only: one variable gone, one added.
        wrapped = os.path.join(self.work, "wrapped-bin")
        os.makedirs(wrapped, exist_ok=True)
        for tool in os.listdir(APPS):
            if tool != "coll_perf" and os.access(os.path.join(APPS, tool), os.X_OK):
                target = os.path.join(wrapped, tool)
                if not os.path.lexists(target):
                    os.symlink(os.path.join(APPS, tool), target)
        with open(os.path.join(wrapped, "coll_perf"), "w") as handle:
            handle.write("#!/bin/sh\nif [ \"$(uname -n)\" = node7 ]; then unset NCCL_SOCKET_IFNAME; "
                         f"export NCCL_IB_DISABLE=1; fi\nexec {os.path.join(APPS, 'coll_perf')} \"$@\"\n")
        os.chmod(os.path.join(wrapped, "coll_perf"), 0o755)
        # A measurement that ran other settings than its record says fails the run (rules/verdict.py).
        self.baseline("wrapped", env=self.env(NCCL_SOCKET_IFNAME="eth0"), bin_dir=wrapped, expect_exit=1)
        verdict = json.loads(self.read("wrapped", "verdict.json"))
        self.assertEqual(verdict["overall"], "FAILED")
        self.assertIn("env.host_differs", {reason["code"] for reason in verdict["reasons"]})
        raw = json.loads(self.read("wrapped", "raw", "inter.mpi.json"))
        if coll_perf_schema(raw) < (1, 4):
            self.skipTest(f"coll_perf schema {raw.get('schema_version')} records no env_by_host (1.4)")
        report = self.read("wrapped", "report.md")
        anomalies = report.split("## Doctor")[0]
        # Every point with ranks on node7: sanity, intra.node7, inter.mpi.
        self.assertIn("| host environment differs | sanity | node7's ranks ran with NCCL_SOCKET_IFNAME=unset "
                      "(3 points); the run's record (run_manifest.json env, set where cclbench ran, and the point's "
                      "own) says 'eth0' |", anomalies)
        # Compared across hosts where both ran: sanity and inter.mpi (intra.node7 has no other host).
        self.assertIn("| host environment differs | sanity | node7's ranks ran with NCCL_IB_DISABLE='1' (2 points); "
                      "the other hosts' ranks ran with unset |", anomalies)
        self.assertNotIn("node5's ranks ran", anomalies)
        self.assertRegex(report, r"\| NCCL_IB_DISABLE \| unset \| 1 \|")

    def test_interrupted_baseline_resumes_and_compares(self):
        argv = self.argv("baseline", "--hosts", HOSTS, "--run-id", "resumed", *SMALL)
        child = self.cluster.popen("node5", argv, env=self.env(), cwd=self.work, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        manifest_path = os.path.join(self.run_dir("resumed"), "run_manifest.json")
        deadline = time.monotonic() + 120
        state = {}
        while time.monotonic() < deadline and child.poll() is None:
            try:
                with open(manifest_path) as handle:
                    state = json.load(handle)["points"]
            except (OSError, ValueError, KeyError):
                state = {}
            if state.get("intra.node5", {}).get("status") == "running":
                break
            time.sleep(0.2)
        if child.poll() is not None:
            self.fail(f"the baseline ended before intra.node5 ran (exit {child.returncode}): {child.stderr.read()[-2000:]}")
        os.killpg(child.pid, signal.SIGINT)  # Ctrl-C in the user's terminal: the whole foreground group
        out, err = child.communicate(timeout=60)
        self.assertEqual(child.returncode, 130, out[-2000:] + err[-2000:])
        # The last line: the signal, where the verdict on what was measured is, how to resume.
        last = err.strip().splitlines()[-1]
        self.assertIn("interrupted by SIGINT before the plan completed", last)
        self.assertIn(f"verdict: {os.path.join(self.work, 'results', 'resumed', 'verdict.json')}", last)
        self.assertTrue(last.endswith("resume with: cclbench baseline --resume resumed"), last)
        interrupted = json.loads(self.read("resumed", "verdict.json"))
        self.assertEqual(interrupted["overall"], "INCOMPLETE")
        self.assertIn("run.interrupted", [reason["code"] for reason in interrupted["reasons"]])
        with open(manifest_path) as handle:
            done = json.load(handle)["points"]
        self.assertEqual(done["sanity"]["status"], "complete")
        self.assertNotEqual(done["inter.mpi"]["status"], "complete")
        resumed = self.cclbench("baseline", "--resume", "resumed", "--results", os.path.join(self.work, "results"))
        self.assertEqual(resumed.returncode, 0, resumed.stdout[-2000:] + resumed.stderr[-2000:])
        self.assertRegex(resumed.stderr.strip().splitlines()[-1], r"^cclbench: HEALTHY; verdict: .*/resumed/verdict\.json$")
        log = self.read("resumed", "run.log")
        resumed_log = log[log.index("cclbench resume: cclbench baseline --resume resumed"):]
        self.assertIn("skip topology.node5: complete and its records parse", resumed_log)
        self.assertIn("launch intra.node5", resumed_log)  # the interrupted point runs again
        final = json.loads(self.read("resumed", "run_manifest.json"))
        self.assertEqual({name: point["status"] for name, point in final["points"].items()},
                         {name: "complete" for name in final["points"]})
        # compare: the resumed run against a fresh one of the same plan.
        self.baseline("fresh")
        compared = self.cclbench("compare", self.run_dir("fresh"), self.run_dir("resumed"))
        sys.stderr.write(compared.stdout[-1500:])
        self.assertEqual(compared.returncode, 0, compared.stdout[-2000:] + compared.stderr[-2000:])
        rows = [line for line in compared.stdout.splitlines() if line.startswith(("| inter.mpi |", "| intra.node"))]
        self.assertEqual(len(rows), 3 * 2 * 4, "three points x in/out-of-place x four sizes")
        for row in rows:  # correctness-only records: compared for their data, never judged on time
            self.assertTrue(row.endswith("| ok in both (MPI backend on host memory: correctness only) |"), row)


if __name__ == "__main__":
    main()
