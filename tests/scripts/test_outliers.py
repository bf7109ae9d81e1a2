"""Outliers (scripts/cclbench_lib/rules/outliers.py): P2P pairs and GPUs against their path class, host<->device
per GPU, and the straggler rank. Synthetic matrices are shaped like the target node: 8 GPUs, GPU0-3 under
one PCIe switch, GPU4-7 under another (PIX inside a sub-switch, PXB across it), NODE between the groups.
Expected medians and names are written out by hand from the fixture numbers, not computed by the code."""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

from helpers import FAKE_BIN, HERE, validate

from cclbench_lib.model import run_dir
from cclbench_lib.rules import outliers

# Target-node bandwidths (GB/s) per class: PIX inside a sub-switch, PXB across it, NODE across switches.
CLASS_GBPS = {"PIX": 52.0, "PXB": 50.0, "NODE": 38.0}


def target_class(src, dst):
    if (src < 4) != (dst < 4):
        return "NODE"
    return "PIX" if src // 2 == dst // 2 else "PXB"


def target_matrix(jitter=0.0, seed=0, slow=None, slow_gpu=None):
    """8 x 8 bandwidth matrix, None on the diagonal; jitter = +-fraction (uniform); slow = {(src, dst): factor};
    slow_gpu = (gpu, factor) scales every pair touching that GPU."""
    rng = random.Random(seed)
    matrix = [[None] * 8 for _ in range(8)]
    for src in range(8):
        for dst in range(8):
            if src == dst:
                continue
            value = CLASS_GBPS[target_class(src, dst)] * (1 + rng.uniform(-jitter, jitter))
            value *= (slow or {}).get((src, dst), 1.0)
            if slow_gpu and slow_gpu[0] in (src, dst):
                value *= slow_gpu[1]
            matrix[src][dst] = value
    return matrix


TARGET_CLASSES = {(s, d): target_class(s, d) for s in range(8) for d in range(8) if s != d}


def stats(value):
    return {"median": value, "min": value * 0.99, "max": value * 1.01, "mean": value, "cv_pct": 0.5}


def p2p_document(matrix, classes=TARGET_CLASSES, host_device=None, tests=("d2d_ce_write_uni",)):
    """A p2p_matrix result (results_schema/p2p_matrix.schema.json) holding `matrix` for each of `tests`
    (rows src, columns dst) at 256M, plus host_device {gpu: GB/s} as h2d_ce_local_numa results."""
    size = 256 << 20
    count = len(matrix)

    def result(test, src, dst, value):
        base = {"test": test, "src": src, "dst": dst, "bytes": size, "host_numa_node": 0 if src == "host" else None,
                "bytes_counted": "one_direction", "bytes_counted_per_copy": size, "latency_us": None,
                "load_latency_ns": None, "samples": [], "sample_time_us": [], "details": {}}
        if value is None:
            return dict(base, status="skipped", reason="peer access refused", bandwidth_gbps=None, time_us=None,
                        verification=None)
        return dict(base, status="ok", reason=None, bandwidth_gbps=stats(value), time_us=stats(size / value / 1e3),
                    verification={"verified_samples": 5, "wrong_words": 0})

    results = [result(test, s, d, matrix[s][d]) for test in tests for s in range(count) for d in range(count) if s != d]
    results += [result("h2d_ce_local_numa", "host", gpu, value) for gpu, value in sorted((host_device or {}).items())]
    test_rows = [{"name": test, "scope": "pair", "unit": "gbps", "bytes_counted": "one_direction", "description": test}
                 for test in tests]
    test_rows.append({"name": "h2d_ce_local_numa", "scope": "device", "unit": "gbps", "bytes_counted": "one_direction",
                      "description": "host to device, NUMA-local pinned memory"})
    return {
        "schema_version": "1.0.0", "tool": {"name": "p2p_matrix", "version": "0.1.0", "git_commit": "test"},
        "host": "node1", "argv": ["p2p_matrix"], "cuda": {"driver_version": 13000, "runtime_version": 13000},
        "no_device_reason": None, "numa_node_count": 2, "numa_reason": None,
        "settings": {"repetitions": 5, "warmup": 2, "sweep": None, "pair": None}, "gb": "1e9 bytes",
        "devices": [{"index": i, "name": "RTX PRO 6000", "pci_bus_id": f"0000:{0x03 + i if i < 4 else 0x83 + i - 4:02x}:00.0",
                     "numa_node": 0 if i < 4 else 1, "numa_node_reason": None, "sm_count": 188,
                     "memory_bytes": 96 << 30, "l2_bytes": 128 << 20, "compute_capability": "12.0"} for i in range(count)],
        "capability": [{"src": s, "dst": d, "can_access_peer": True, "performance_rank": 0, "access_supported": True,
                        "native_atomic_supported": False, "path_class": classes.get((s, d)),
                        "path_class_reason": None if classes.get((s, d)) else "not in the topology"}
                       for s in range(count) for d in range(count) if s != d],
        "path_class_source": "test", "binding": None, "binding_gpu": None, "binding_reason": "test",
        "tests": test_rows, "results": results,
    }


class PairRule(unittest.TestCase):
    def test_one_slow_link_under_a_switch_is_caught_and_named(self):
        found = outliers.pair_outliers(target_matrix(slow={(1, 2): 0.6}), TARGET_CLASSES)
        # 1 -> 2 is PXB (GPU1 and GPU2 sit under different sub-switches of switch 0): 30 GB/s against 50.
        self.assertEqual(found["pairs"], [(1, 2, "PXB", 30.0, 50.0)])
        self.assertEqual(found["gpus"], [])
        self.assertEqual(found["medians"], {"PIX": (52.0, 8), "PXB": (50.0, 16), "NODE": (38.0, 32)})

    def test_healthy_matrices_with_two_percent_jitter_raise_nothing(self):
        for seed in range(300):
            found = outliers.pair_outliers(target_matrix(jitter=0.02, seed=seed), TARGET_CLASSES)
            self.assertEqual((found["pairs"], found["gpus"]), ([], []), f"seed {seed}")

    def test_a_slow_link_is_caught_through_the_jitter(self):
        for seed in range(100):
            found = outliers.pair_outliers(target_matrix(jitter=0.02, seed=seed, slow={(6, 7): 0.8}), TARGET_CLASSES)
            self.assertEqual([(s, d, c) for s, d, c, _v, _m in found["pairs"]], [(6, 7, "PIX")], f"seed {seed}")

    def test_a_slow_gpu_is_named_by_its_row_and_column(self):
        found = outliers.pair_outliers(target_matrix(slow_gpu=(5, 0.6)), TARGET_CLASSES)
        self.assertEqual([(g, side) for g, side, _r, _n in found["gpus"]], [(5, "source"), (5, "destination")])
        self.assertEqual({n for _g, _s, _r, n in found["gpus"]}, {7})
        self.assertEqual({round(r, 6) for _g, _s, r, _n in found["gpus"]}, {0.6})

    def test_a_class_of_two_pairs_is_not_judged(self):
        classes = {(0, 1): "NV18", (1, 0): "NV18"}
        found = outliers.pair_outliers([[None, 390.0], [200.0, None]], classes)
        self.assertEqual(found, {"medians": {}, "pairs": [], "gpus": []})

    def test_pairs_without_a_class_are_not_compared(self):
        classes = {pair: cls for pair, cls in TARGET_CLASSES.items() if cls != "NODE"}
        found = outliers.pair_outliers(target_matrix(slow={(0, 5): 0.3}), classes)
        self.assertEqual(found["pairs"], [])
        self.assertNotIn("NODE", found["medians"])


class DocumentRule(unittest.TestCase):
    def test_synthetic_document_is_a_valid_p2p_matrix_result(self):
        document = p2p_document(target_matrix(), host_device={g: 55.0 for g in range(8)})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "node1.json")
            with open(path, "w") as handle:
                json.dump(document, handle)
            ok, errors = validate("p2p_matrix.schema.json", path)
        self.assertTrue(ok, errors)

    def test_slow_link_in_two_tests_is_one_row_naming_the_pair_and_the_class_median(self):
        document = p2p_document(target_matrix(slow={(1, 2): 0.6}), tests=("d2d_ce_write_uni", "d2d_ce_read_uni"))
        rows = outliers.host_outliers(document)
        self.assertEqual(len(rows), 1, rows)
        kind, detail = rows[0]
        self.assertEqual(kind, "P2P link below class median")
        self.assertIn("GPU 1 -> GPU 2 (PXB): 30.0 GB/s = 60% of the PXB median 50.0 GB/s in d2d_ce_write_uni (256M)", detail)
        self.assertIn("also low in d2d_ce_read_uni", detail)

    def test_slow_gpu_is_one_row_per_side_with_its_pairs_folded_in(self):
        rows = outliers.host_outliers(p2p_document(target_matrix(slow_gpu=(5, 0.6))))
        self.assertEqual([kind for kind, _ in rows], ["P2P GPU below its class medians"] * 2)
        self.assertIn("GPU 5 as source: its 7 pairs at a median 60%", rows[0][1])
        self.assertIn("GPU 5 as destination", rows[1][1])
        self.assertIn("7 low pair(s) folded in", rows[0][1])

    def test_healthy_document_reports_the_classes_it_compared(self):
        document = p2p_document(target_matrix(jitter=0.02, seed=7), host_device={g: 55.0 for g in range(8)})
        self.assertEqual(outliers.host_outliers(document), [])
        lines = outliers.p2p_section_lines(document)
        self.assertIn("No P2P or host<->device outlier", lines[0])
        self.assertIn("classes compared: NODE, PIX, PXB", lines[0])

    def test_host_to_device_low_gpu_is_named_with_the_median(self):
        document = p2p_document(target_matrix(), host_device={0: 55.0, 1: 54.0, 2: 56.0, 3: 55.0, 4: 55.0, 5: 55.0,
                                                              6: 33.0, 7: 55.0})
        rows = outliers.host_outliers(document)
        self.assertEqual(rows, [("host<->device below the GPUs' median",
                                 "GPU 6: 33.0 GB/s = 60% of the median 55.0 GB/s over 8 GPUs in h2d_ce_local_numa (256M)")])

    def test_path_classes_fall_back_to_the_topology_by_pci_bus_id(self):
        with open(os.path.join(HERE, "data", "topology_rtxpro.json")) as handle:
            topology = json.load(handle)
        document = p2p_document(target_matrix(), classes={})
        # CUDA order differs from the topology's: swap the bus ids of CUDA devices 0 and 4.
        devices = document["devices"]
        devices[0]["pci_bus_id"], devices[4]["pci_bus_id"] = devices[4]["pci_bus_id"], devices[0]["pci_bus_id"]
        classes = outliers.path_classes(document, topology)
        # topology_rtxpro.json: GPU0-3 (0000:03-06) PIX among themselves, SYS to GPU4-7 (0000:83-86).
        self.assertEqual(classes[(1, 2)], "PIX")
        self.assertEqual(classes[(0, 5)], "PIX")  # CUDA 0 is bus 0000:83 (topology GPU4), CUDA 5 is 0000:84
        self.assertEqual(classes[(0, 1)], "SYS")
        self.assertEqual(len(classes), 56)
        self.assertEqual(outliers.path_classes(document), {})
        self.assertIn("not compared: no path class", outliers.p2p_section_lines(document)[0])

    def test_real_p2p_matrix_shape_keeps_src_to_dst(self):
        """The test double of p2p_matrix writes what the real tool writes; slow only GPU 1 -> GPU 2 (not 2 -> 1)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "host.json")
            subprocess.run([sys.executable, os.path.join(FAKE_BIN, "p2p_matrix"), "--json", path], check=True,
                           env=dict(os.environ, FAKE_GPUS="8"), timeout=60)
            with open(path) as handle:
                document = json.load(handle)
        healthy = copy.deepcopy(document)
        for result in document["results"]:
            if result["test"] == "d2d_ce_write_uni" and (result["src"], result["dst"]) == (1, 2):
                result["bandwidth_gbps"] = stats(26.0)
        matrices = {name: matrix for name, _u, _d, _s, matrix in run_dir.p2p_matrices(document)}
        self.assertEqual((matrices["d2d_ce_write_uni"][1][2], matrices["d2d_ce_write_uni"][2][1]), (26.0, 52.0))
        rows = outliers.host_outliers(document)
        # The double: 52 GB/s inside a half (PIX, 24 pairs), 38 across (SYS).
        self.assertEqual(rows, [("P2P link below class median",
                                 "GPU 1 -> GPU 2 (PIX): 26.0 GB/s = 50% of the PIX median 52.0 GB/s in d2d_ce_write_uni (256M)")])
        self.assertEqual(outliers.host_outliers(healthy), [])

    def test_anomaly_rows_name_the_host(self):
        run = FakeRun([], p2p={"node1": p2p_document(target_matrix(slow={(1, 2): 0.6}))})
        rows = outliers.anomaly_rows(run)
        self.assertEqual([(kind, where) for kind, where, _d in rows], [("P2P link below class median", "node1")])

    def test_no_device_result_has_no_outliers(self):
        self.assertEqual(outliers.host_outliers({"no_device_reason": "no GPU", "results": []}), [])


def per_rank_records(nranks=8, cases=20, iterations=20, seed=0, straggler=None, share=0.9, excess=0.10):
    """Case records with per_rank: slowest rank drawn at random per iteration (or `straggler` with
    probability `share`), mean times 100 us +-2% (the straggler's `excess` above)."""
    rng = random.Random(seed)
    records = []
    for case in range(cases):
        counts = [0] * nranks
        for _ in range(iterations):
            if straggler is not None and rng.random() < share:
                counts[straggler] += 1
            else:
                counts[rng.randrange(nranks)] += 1
        means = [100.0 * (1 + rng.uniform(-0.02, 0.02)) for _ in range(nranks)]
        if straggler is not None:
            means[straggler] *= 1 + excess
        records.append({"point": "intra", "case_id": f"all_reduce.float.sum.out.{8 << case}K", "status": "ok", "backend": "nccl",
                        "emulated": False, "iterations": iterations,
                        "per_rank": {"mean_us": means, "slowest_iterations": counts}})
    return records


class FakeRun:
    """The parts of run_dir.RunData that outliers.anomaly_rows reads."""

    def __init__(self, records, bindings=None, p2p=None, topology=None):
        self.latest = {(r["point"], r["case_id"]): r for r in records}
        self.p2p = p2p or {}
        self.topology = topology or {}
        self.raw = {"intra": {"bindings": bindings or []}}

    def coll_launches(self):
        return [{"name": "intra", "kind": "intra"}]


class Straggler(unittest.TestCase):
    def test_a_rank_slowest_nine_times_in_ten_and_ten_percent_slower_is_named(self):
        bindings = [{"rank": r, "host": "node1"} for r in range(8)]
        rows = outliers.anomaly_rows(FakeRun(per_rank_records(straggler=3), bindings=bindings))
        self.assertEqual(len(rows), 1, rows)
        kind, where, detail = rows[0]
        self.assertEqual((kind, where), ("straggler rank", "intra"))
        self.assertTrue(detail.startswith("rank 3 (node1) was the slowest in "), detail)
        self.assertIn("of 400 iterations", detail)
        self.assertIn("chance 12%", detail)
        self.assertIn("over 20 case(s)", detail)

    def test_healthy_ranks_raise_nothing(self):
        for seed in range(100):
            self.assertIsNone(outliers.straggler(per_rank_records(seed=seed)), f"seed {seed}")
        self.assertIsNone(outliers.straggler(per_rank_records(nranks=2, seed=1)))

    def test_always_slowest_by_a_hair_is_a_tie_break_not_a_straggler(self):
        self.assertIsNone(outliers.straggler(per_rank_records(straggler=0, share=1.0, excess=0.005)))

    def test_slowest_often_but_less_than_half_way_from_chance_to_always_is_not_named(self):
        # 8 ranks: chance 12.5%, half-way 56%; this rank is the slowest in about 39% (significant, but shared).
        self.assertIsNone(outliers.straggler(per_rank_records(straggler=4, share=0.3, cases=50)))
        found = outliers.straggler(per_rank_records(straggler=4, share=0.6, cases=50))
        self.assertEqual(found[0], 4)

    def test_two_ranks(self):
        self.assertEqual(outliers.straggler(per_rank_records(nranks=2, straggler=1, share=0.8))[0], 1)
        self.assertIsNone(outliers.straggler(per_rank_records(nranks=2, straggler=1, share=0.3)))

    def test_materially_slower_but_not_more_often_than_chance_is_not_named(self):
        self.assertIsNone(outliers.straggler(per_rank_records(straggler=2, share=0.0, excess=0.10)))

    def test_records_without_per_rank_or_emulated_are_left_out(self):
        records = per_rank_records(straggler=3)
        self.assertIsNone(outliers.straggler([dict(r, per_rank=None) for r in records]))
        self.assertIsNone(outliers.straggler([dict(r, emulated=True) for r in records]))
        self.assertIsNone(outliers.straggler([dict(r, backend="mpi") for r in records]))
        self.assertIsNone(outliers.straggler([dict(r, per_rank={"mean_us": "x", "slowest_iterations": [1]}) for r in records]))
        self.assertEqual(outliers.straggler_rows(FakeRun([])), [])


if __name__ == "__main__":
    unittest.main()
