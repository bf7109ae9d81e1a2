#!/usr/bin/env python3
"""`cclbench report` on a real two-node coll_perf result: the virtual cluster (vcluster.py), MPI
backend over the tcp BTL on both rails, coll_perf --netdevs eth0,eth3 writing its case records into a run
directory whose plan has one inter-node point. The report's rails table has one netdev row per host with both
rails' bytes; with node7's eth3 down, the anomalies name node7 and eth3 as a dead rail and nothing else about the
rails. Expected bytes come from outside coll_perf and cclbench: the kernel's counters of node7's interfaces read
by the harness around the run. Exits 77 (skip) with the reason where the harness cannot run."""
import json
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cluster_setup import CCLBENCH, COLL_PERF, close_cluster, mpi_env, mpirun_argv, open_cluster  # noqa: E402
from test_netdev_rails import SIZE, main  # noqa: E402
POINT = "inter.mpi"


class RailsReportOnTheVirtualCluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        open_cluster(cls, ["node5", "node7"], "cclbench-rails-report-", tools=("coll_perf",))

    @classmethod
    def tearDownClass(cls):
        close_cluster(cls)

    def run_and_report(self, name):
        """(anomalies text, rails text, node7 kernel bytes {rail: rx + tx}) of a one-point run directory."""
        run = os.path.join(self.work, name)
        os.makedirs(run)
        argv = mpirun_argv(self.cluster, "node5:1,node7:1", [
            COLL_PERF, "--backend", "mpi", "--coll", "all_reduce", "--placement", "out",
            "-b", str(SIZE), "-e", str(SIZE), "-n", "10", "-w", "1", "--quiet", "--netdevs", "eth0,eth3",
            "--point", POINT, "--jsonl", os.path.join(run, "cases.jsonl")], 2)
        before = {link: self.cluster.counters("node7", link) for link in ("eth0", "eth3")}
        result = self.cluster.exec("node5", argv, env=mpi_env(), capture_output=True, text=True, timeout=120)
        after = {link: self.cluster.counters("node7", link) for link in ("eth0", "eth3")}
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        kernel = {link: sum(after[link][key] - before[link][key] for key in ("rx_bytes", "tx_bytes")) for link in before}
        plan = [{"name": POINT, "kind": "inter", "nranks": 2, "collectives": ["all_reduce"], "sizes": [SIZE],
                 "argv": argv[argv.index(COLL_PERF):], "hosts": ["node5", "node7"], "env": {}, "outputs": []}]
        manifest = {"schema_version": "1.0.0", "run_id": name, "status": "complete", "plan": plan,
                    "points": {POINT: {"kind": "inter", "status": "complete"}},
                    "gates": {"cv_gate_pct": 3.0, "repeat_cv_failures": []}}
        with open(os.path.join(run, "run_manifest.json"), "w") as handle:
            json.dump(manifest, handle)
        report = subprocess.run([sys.executable, CCLBENCH, "report", run], capture_output=True, text=True,
                                env=dict(os.environ, CCLBENCH_NO_MATPLOTLIB="1"), timeout=120)
        self.assertEqual(report.returncode, 0, report.stderr)
        with open(os.path.join(run, "report.md")) as handle:
            text = handle.read()
        anomalies = text[text.index("## Anomalies"):text.index("## Environment")].split("Physical ceilings")[0]
        rails = text[text.index("### Rails"):text.index("### Rank bindings")]
        print(f"\n  {name}: " + "\n  ".join(line for line in rails.splitlines() if line.startswith(f"| {POINT} |"))
              + f"\n  node7 kernel rx+tx {kernel}", file=sys.stderr)
        return anomalies, rails, kernel

    def node_row(self, rails, host):
        """{rail: (share %, GB)} of the host's netdev row of the rails table."""
        line = [l for l in rails.splitlines() if l.startswith(f"| {POINT} | {host} | netdev (--netdevs) |")]
        self.assertEqual(len(line), 1, rails)
        cells = [cell.strip() for cell in line[0].strip("|").split("|")]
        shares = dict(re.findall(r"(eth\d) (\d+)%", cells[3]))
        moved = dict(re.findall(r"(eth\d) ([\d.]+) GB", cells[4]))
        return {rail: (int(shares[rail]), float(moved[rail])) for rail in ("eth0", "eth3")}

    def test_both_rails_per_host_in_the_table_and_no_rail_anomaly(self):
        anomalies, rails, kernel = self.run_and_report("both")
        for host in ("node5", "node7"):
            row = self.node_row(rails, host)
            for rail, (share, _gb) in row.items():
                self.assertGreaterEqual(share, 30, f"{host} {rail}: {row}")
        for rail, (_share, gb) in self.node_row(rails, "node7").items():
            self.assertLessEqual(gb * 1e9, kernel[rail] + 0.0005e9, "within the harness's window around the run")
            self.assertGreater(gb * 1e9, 10 * SIZE / 2 / 2 - 0.0005e9, "half of the all_reduce's bytes at least")
        self.assertNotIn("| rail", anomalies)

    def test_node7_eth3_down_is_a_dead_rail_named_with_its_share(self):
        self.cluster.set_link("node7", "eth3", up=False)
        try:
            anomalies, rails, kernel = self.run_and_report("eth3_down")
        finally:
            self.cluster.set_link("node7", "eth3", up=True)
        self.assertEqual(kernel["eth3"], 0)
        self.assertEqual(self.node_row(rails, "node7")["eth3"], (0, 0.0))
        # node5's eth3 is up but has no peer on that rail: it carries nothing either, and the counters cannot tell
        # which end is down (the doctor's link state does). Each host whose eth3 carried ~0 is named; nothing else.
        rows = [line for line in anomalies.splitlines() if line.startswith("| rail")]
        self.assertIn(f"| rail dead | {POINT} | node7 eth3 [netdev (--netdevs)] carried 0.0% of the host's rail bytes",
                      "\n".join(rows))
        self.assertTrue(all(line.startswith(f"| rail dead | {POINT} | node") and " eth3 [" in line for line in rows), rows)


if __name__ == "__main__":
    sys.exit(main())
