#!/usr/bin/env python3
"""The scale benchmark's smallest rows and its products (CTest `scale_smallest_rows`, label scripts).

- The smallest rows run here as in the benchmark (16 nodes, each cell's fleets): a healthy fleet names no node,
  and with 5% of nodes bad (every kind of fault, dealt in turn) a full screen finds every one and names no healthy
  one. The truth is each generated fleet's own faults (screen_scale.fleet_document), never the screen's output.
- docs/scale.md is the table rendered from the committed results (tests/scale/screen_scale_results.json).
- The screen's default rounds (plan.screen_schedule.DEFAULT_ROUNDS) are what the committed results choose by the
  issue's rule (screen_scale.choose_defaults).
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import screen_scale  # noqa: E402

from cclbench_lib.plan.screen_schedule import DEFAULT_ROUNDS  # noqa: E402  (screen_scale put scripts/ on the path)

RESULTS = os.path.join(HERE, "screen_scale_results.json")
DOC = os.path.join(screen_scale.ROOT, "docs", "scale.md")


class Fleets(unittest.TestCase):
    def test_the_fleets_carry_what_the_cell_says(self):
        document = screen_scale.fleet_document(64, 0.05, 3)
        # round(0.05 x 64) = 3 faults, dealt from FAULT_MIX starting at the seed's place (3: crash, hang, fail_start)
        self.assertEqual([fault["kind"] for fault in document["faults"]], ["crash", "hang", "fail_start"])
        self.assertEqual(len({fault["node"] for fault in document["faults"]}), 3)
        self.assertEqual(screen_scale.fleet_document(16, 0.0, 0)["faults"], [])
        self.assertEqual(len(screen_scale.fleet_document(16, 0.005, 0)["faults"]), 1)  # at least one

    def test_the_mix_holds_what_real_fleets_break(self):
        # 256 nodes at 2%: round(5.12) = 5 faults dealt from FAULT_MIX at the seed's place. Seed 7: a rail at
        # x0.5-0.7, a node slow by latency alone (small messages x1.5-2, no bandwidth factor), a rail slow by
        # latency alone, then a run of three adjacent nodes (RUN_KINDS from the seed's place).
        faults = screen_scale.fleet_document(256, 0.02, 7)["faults"]
        self.assertTrue(0.5 <= faults[0]["factor"] <= 0.7 and faults[0]["kind"] == "slow_rail")
        self.assertEqual((faults[1]["kind"], "factor" in faults[1]), ("slow_node", False))
        self.assertTrue(1.5 <= faults[1]["small_factor"] <= 2.0)
        self.assertEqual((faults[2]["kind"], "factor" in faults[2]), ("slow_rail", False))
        run = [int(fault["node"][1:]) for fault in faults[3:]]
        self.assertEqual(run, list(range(run[0], run[0] + 3)))  # adjacent in the host list
        # Seed 11 starts at the group fault: one fault for a whole leaf of GROUP_SIZE nodes (16 leaves here).
        group = screen_scale.fleet_document(256, 0.02, 11)["faults"][0]
        self.assertEqual(set(group) - {"kind", "factor", "small_factor", "rail"}, {"group"})
        # A fleet of fewer than GROUP_FAULT_MIN_GROUPS leaves gets none: its leaf would be the fleet's reference.
        self.assertNotIn("group", screen_scale.fleet_document(16, 0.05, 11)["faults"][0])


class SmallestRows(unittest.TestCase):
    def test_a_healthy_fleet_of_16_names_nobody(self):
        cell = screen_scale.run_cell(16, 0.0, "3")
        self.assertEqual(cell["score"]["nodes"]["truth"], 0)
        self.assertEqual(cell["score"]["nodes"]["false_positive"], 0)
        self.assertEqual(cell["score"]["links"]["false_positive"], 0)
        self.assertEqual(cell["score"]["rails"]["false_positive"], 0)
        self.assertEqual(cell["rounds"], 3)

    def test_five_percent_bad_of_16_all_found_by_the_full_screen(self):
        cell = screen_scale.run_cell(16, 0.05, "full")
        expected = sum(len({fault.get("node") for fault in screen_scale.fleet_document(16, 0.05, seed)["faults"]
                            if fault["kind"] != "slow_link"}) for seed in range(cell["fleets"]))
        self.assertEqual(cell["score"]["nodes"]["truth"], expected)
        self.assertEqual(cell["score"]["nodes"]["true_positive"], expected)
        self.assertEqual(cell["score"]["nodes"]["false_positive"], 0)
        self.assertEqual(cell["rounds"], 15)  # the circle method: n - 1 rounds


class Products(unittest.TestCase):
    def setUp(self):
        with open(RESULTS, encoding="utf-8") as handle:
            self.results = json.load(handle)

    def test_docs_scale_md_is_the_committed_table(self):
        with open(DOC, encoding="utf-8") as handle:
            block = screen_scale.doc_block(handle.read())
        self.assertEqual(block, screen_scale.render_table(self.results),
                         "docs/scale.md is stale: tests/scale/screen_scale.py table "
                         "tests/scale/screen_scale_results.json")

    def test_the_default_rounds_are_the_tables_choice(self):
        chosen = screen_scale.choose_defaults(self.results)
        expected = {size: (None if best is None or best["mode"] == "full" else int(best["mode"]),
                           None if best is None else round(best["recall"], 4)) for size, best in chosen.items()}
        self.assertEqual({size: (rounds, None if recall is None else round(recall, 4))
                          for size, (rounds, recall) in DEFAULT_ROUNDS.items()}, expected)

    def test_the_dry_run_runs_and_says_the_default(self):
        chosen = screen_scale.choose_defaults(self.results)

        def rounds_of(best):
            return None if best is None or best["mode"] == "full" else int(best["mode"])

        fake = os.path.join(screen_scale.ROOT, "tests", "scripts", "fake_bin")
        sizes = sorted(chosen)
        # below the table: full; between two sizes of the table: the larger of their rounds; above it: the largest's
        below, between, above = sizes[0] // 2, (sizes[0] + sizes[1]) // 2, sizes[-1] + 100
        wanted = {below: None, between: max(rounds_of(chosen[sizes[0]]) or 0, rounds_of(chosen[sizes[1]]) or 0) or None,
                  above: rounds_of(chosen[sizes[-1]])}
        if rounds_of(chosen[sizes[0]]) is None or rounds_of(chosen[sizes[1]]) is None:
            wanted[between] = None
        for count, rounds in wanted.items():
            hosts = ",".join(f"h{index}" for index in range(count))
            result = subprocess.run([sys.executable, os.path.join(screen_scale.ROOT, "scripts", "cclbench"), "screen",
                                     "--dry-run", "--hosts", hosts, "--bin-dir", fake, "--mpirun",
                                     os.path.join(fake, "mpirun")], capture_output=True, text=True, timeout=300,
                                    env=dict(os.environ, CCLBENCH_FAKE_GPU_COUNT="0"))
            self.assertEqual(result.returncode, 0, result.stderr)
            line = next(line for line in result.stdout.splitlines() if line.startswith("rounds: "))
            self.assertTrue(line.startswith(f"rounds: --quick {rounds}, the default" if rounds else
                                            "rounds: full, the default"), (count, line))
            schedule = next(line for line in result.stdout.splitlines() if line.startswith("pair stage: "))
            self.assertIn(f"{rounds} round(s)" if rounds else f"{count - 1 + count % 2} round(s)", schedule)


if __name__ == "__main__":
    unittest.main(verbosity=2)
