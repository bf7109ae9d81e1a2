"""Plots people can read (scripts/cclbench_lib/render/plots.py), rendered by `cclbench report` from fixture records
with matplotlib's Agg backend and read back from the figure objects: tick labels, colour limits, the colour
bar formatter, the hatched missing cell, and that the plotted data equals the input. Skipped, with the reason,
where matplotlib is missing (the GPU machine has none)."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from helpers import FAKE_BIN, main_for_ctest, read_text, run_cli

from cclbench_lib.render import plots, report

PYPLOT, WHY_NOT = report.load_pyplot()
SIZES = [8192 << i for i in range(14)]  # 8K .. 64M
SIZE_LABELS = ["8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M", "4M", "8M", "16M", "32M", "64M"]
BUSBW = {"intra_a": [1.5 + i for i in range(14)], "intra_b": [2.25 + 2 * i for i in range(14)]}
MISSING_SIZE = 1 << 20  # intra_b's 1M case errored: a gap in its line, not a 0


def case_record(point, index, size):
    busbw = BUSBW[point][index]
    ok = not (point == "intra_b" and size == MISSING_SIZE)
    label = SIZE_LABELS[index]
    return {"schema_version": "1.2.0", "point": point, "case_id": f"all_reduce.float.sum.out.{label}",
            "collective": "all_reduce", "backend": "nccl", "nranks": 8, "dtype": "float", "op": "sum", "root": None,
            "in_place": False, "requested_bytes": size, "bytes": size, "count": size // 4, "send_bytes": size,
            "recv_bytes": size, "iterations": 20, "warmup": 5, "check_iterations": 1,
            "time_us": {"mean": 10.0 + index, "min": 9.0 + index, "p50": 10.0 + index, "p95": 11.0 + index,
                        "p99": 12.0 + index, "max": 12.0 + index, "cv_pct": 1.0} if ok else None,
            "batch_time_us": None, "gated_time_us": None, "algbw_gbps": busbw if ok else None,
            "busbw_gbps": busbw if ok else None, "wrong": 0 if ok else None, "status": "ok" if ok else "error",
            "reason": None if ok else "injected for the test", "emulated": False, "samples_us": [], "evidence": {}}


def make_run(run):
    """The fixture run directory: two intra points' all_reduce sweeps (intra_b's 1M case errored), node1's doctor
    links (Gen5 x16 GPUs) and p2p_matrix's double (write and read GB/s, latency; GPU 2 -> 5 skipped)."""
    os.makedirs(os.path.join(run, "p2p"))
    plan = [{"name": p, "kind": "intra", "nranks": 8, "collectives": ["all_reduce"], "sizes": SIZES,
             "hosts": ["node1"]} for p in BUSBW]
    with open(os.path.join(run, "run_manifest.json"), "w") as handle:
        json.dump({"schema_version": "1.0.0", "run_id": "P", "plan": plan,
                   "points": {p: {"status": "complete"} for p in BUSBW}}, handle)
    # The ceiling comes from the GPUs' own PCIe links as the doctor read them: Gen5 x16 on node1.
    gpus = [{"bus_id": f"0000:0{i}:00.0", "max_link_speed_gts": 32.0, "max_link_width": 16} for i in range(8)]
    with open(os.path.join(run, "doctor.json"), "w") as handle:
        json.dump({"schema_version": "1.1.0", "kind": "doctor", "checks": [],
                   "links": {"node1": {"netdevs": {}, "rdma_ports": {}, "gpus": gpus}}}, handle)
    with open(os.path.join(run, "cases.jsonl"), "w") as handle:
        for point in BUSBW:
            for index, size in enumerate(SIZES):
                handle.write(json.dumps(case_record(point, index, size)) + "\n")
    # p2p_matrix's test double (8 GPUs: 52 GB/s inside a half, 38 across); GPU 2 -> 5 skipped; and a second
    # GB/s test at half the numbers, which must share the first one's colour scale.
    p2p = os.path.join(run, "p2p", "node1.json")
    subprocess.run([sys.executable, os.path.join(FAKE_BIN, "p2p_matrix"), "--json", p2p], check=True,
                   env=dict(os.environ, FAKE_GPUS="8"), timeout=60)
    with open(p2p) as handle:
        document = json.load(handle)
    halves = []
    for result in document["results"]:
        if result["test"] == "d2d_ce_write_uni":
            if (result["src"], result["dst"]) == (2, 5):
                result.update(status="skipped", reason="peer access refused", bandwidth_gbps=None, time_us=None)
            half = json.loads(json.dumps(result), parse_float=lambda text: float(text))
            half["test"] = "d2d_ce_read_uni"
            if half["bandwidth_gbps"]:
                half["bandwidth_gbps"] = {key: value / 2 for key, value in half["bandwidth_gbps"].items()}
            halves.append(half)
    document["results"] += halves
    document["tests"].append({"name": "d2d_ce_read_uni", "scope": "pair", "unit": "gbps",
                              "bytes_counted": "one_direction", "description": "copy engine read"})
    with open(p2p, "w") as handle:
        json.dump(document, handle)


@unittest.skipIf(PYPLOT is None, f"matplotlib not available: {WHY_NOT}")
class ReportPlots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cclbench-plots-")
        run = os.path.join(cls.tmp, "P")
        make_run(run)
        cls.figures = {}
        with mock.patch.object(plots, "save", lambda pyplot, figure, path: cls.figures.setdefault(os.path.basename(path), figure)):
            report.build_report(run)
        cls.report_text = read_text(os.path.join(run, "report.md"))

    @classmethod
    def tearDownClass(cls):
        for figure in cls.figures.values():
            PYPLOT.close(figure)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def heatmap(self, name):
        figure = self.figures[f"p2p_node1_{name}.png"]
        axis = figure.axes[0]
        return figure, axis, axis.images[0]

    def test_every_plot_was_rendered(self):
        self.assertEqual(sorted(self.figures), ["all_reduce_busbw.png", "all_reduce_latency.png",
                                                "p2p_node1_d2d_ce_latency.png", "p2p_node1_d2d_ce_read_uni.png",
                                                "p2p_node1_d2d_ce_write_uni.png"])
        self.assertIn("![node1 d2d_ce_write_uni](plots/p2p_node1_d2d_ce_write_uni.png)", self.report_text)
        # The outlier hook of the P2P section: the double is healthy apart from the skipped pair.
        self.assertIn("No P2P or host<->device outlier: every pair within 85% of its path-class median "
                      "(classes compared: PIX, SYS).", self.report_text)

    def test_heatmap_ticks_are_the_integer_gpu_indices(self):
        _figure, axis, _image = self.heatmap("d2d_ce_write_uni")
        labels = [str(i) for i in range(8)]
        self.assertEqual(list(axis.get_xticks()), list(range(8)))
        self.assertEqual(list(axis.get_yticks()), list(range(8)))
        self.assertEqual([t.get_text() for t in axis.get_xticklabels()], labels)
        self.assertEqual([t.get_text() for t in axis.get_yticklabels()], labels)

    def test_heatmap_data_equals_the_input_src_rows_dst_columns(self):
        _figure, axis, image = self.heatmap("d2d_ce_write_uni")
        array = image.get_array()
        for src in range(8):
            for dst in range(8):
                if (src, dst) == (2, 5):
                    self.assertTrue(bool(array.mask[src][dst]), (src, dst))
                elif src == dst:  # p2p_matrix schema 1.1: the diagonal is the local copy within the GPU
                    self.assertEqual(float(array[src][dst]), 1900.0, (src, dst))
                else:
                    self.assertEqual(float(array[src][dst]), 52.0 if (src < 4) == (dst < 4) else 38.0, (src, dst))

    def test_heatmap_writes_every_value_and_hatches_missing_cells(self):
        _figure, axis, _image = self.heatmap("d2d_ce_write_uni")
        texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in axis.texts}
        self.assertEqual(len(texts), 64)
        missing = {(2, 5)}
        for (src, dst), text in texts.items():
            expected = "n/a" if (src, dst) in missing else "1900" if src == dst else \
                ("52.0" if (src < 4) == (dst < 4) else "38.0")
            self.assertEqual(text, expected, (src, dst))
        hatched = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in axis.patches if p.get_hatch()}
        self.assertEqual(hatched, missing)

    def test_colour_scale_starts_at_zero_and_is_shared_by_one_unit(self):
        for name in ("d2d_ce_write_uni", "d2d_ce_read_uni"):
            _figure, _axis, image = self.heatmap(name)
            # From the GPU pairs: the diagonal's local copy (1900 GB/s) would leave every link dark.
            self.assertEqual(image.get_clim(), (0.0, 52.0), name)
        _figure, _axis, image = self.heatmap("d2d_ce_latency")
        self.assertEqual(image.get_clim(), (0.0, 3.4))  # latency (us) has its own scale

    def test_small_values_are_written_plainly(self):
        _figure, axis, _image = self.heatmap("d2d_ce_latency")  # the double: 2.1 us inside a half, 3.4 across
        self.assertEqual({t.get_text() for t in axis.texts}, {"2.10", "3.40", "n/a"})

    def test_colour_bar_has_no_offset_or_scientific_notation(self):
        figure, _axis, image = self.heatmap("d2d_ce_write_uni")
        formatter = image.colorbar.formatter
        self.assertFalse(formatter.get_useOffset())
        figure.canvas.draw()
        self.assertEqual(image.colorbar.ax.yaxis.get_offset_text().get_text(), "")

    def test_line_plot_one_line_per_point_with_the_input_values(self):
        axis = self.figures["all_reduce_busbw.png"].axes[0]
        lines = {line.get_label(): line for line in axis.get_lines() if line.get_linestyle() != "--"}
        self.assertEqual(sorted(lines), ["intra_a", "intra_b"])
        for point, values in BUSBW.items():
            self.assertEqual(list(lines[point].get_xdata()), SIZES)
            ydata = list(lines[point].get_ydata())
            for size, expected, got in zip(SIZES, values, ydata):
                if point == "intra_b" and size == MISSING_SIZE:
                    self.assertTrue(math.isnan(got), "a missing value is a gap, never 0")
                else:
                    self.assertEqual(got, expected, (point, size))

    def test_line_plot_ceiling_is_dashed_and_sizes_are_labelled(self):
        axis = self.figures["all_reduce_busbw.png"].axes[0]
        dashed = [line for line in axis.get_lines() if line.get_linestyle() == "--"]
        self.assertEqual(len(dashed), 1)
        gen5_x16 = 32 * 16 * 128 / 130 / 8  # GT/s x lanes x 128b/130b / 8 bits: 63.0 GB/s per direction
        self.assertEqual(len(dashed[0].get_ydata()), 2)
        for value in dashed[0].get_ydata():
            self.assertAlmostEqual(value, gen5_x16, places=6)
        self.assertIn("63", dashed[0].get_label())
        self.assertEqual(list(axis.get_xticks()), SIZES)
        self.assertEqual([t.get_text() for t in axis.get_xticklabels()], SIZE_LABELS)
        self.assertEqual([t.get_text() for t in axis.get_xticklabels(minor=True)], [])
        self.assertEqual(axis.get_ylim()[0], 0.0)
        latency = self.figures["all_reduce_latency.png"].axes[0]
        self.assertEqual([line for line in latency.get_lines() if line.get_linestyle() == "--"], [])
        self.assertEqual(latency.get_yscale(), "log")


def png_size(path):
    """(width, height) of a whole PNG file, read by the PNG specification (not by matplotlib): the 8-byte signature,
    IHDR first (its width and height, 4 bytes big-endian each), IEND last. None when the file is not one."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR" or data[-12:] != bytes.fromhex("0000000049454e44ae426082"):
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@unittest.skipIf(PYPLOT is None, f"matplotlib not available: {WHY_NOT}")
class ReportCommandWritesPlots(unittest.TestCase):
    """`cclbench report` as a user runs it draws its plots as PNG files under plots/ and links each from report.md;
    CCLBENCH_NO_MATPLOTLIB=1 (the rest of the scripts tests run with it) leaves them out and says so. ReportPlots
    reads the same figures' content in-process."""

    PNGS = ["all_reduce_busbw.png", "all_reduce_latency.png", "p2p_node1_d2d_ce_latency.png",
            "p2p_node1_d2d_ce_read_uni.png", "p2p_node1_d2d_ce_write_uni.png"]

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cclbench-plots-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.run_dir = os.path.join(self.tmp, "P")
        make_run(self.run_dir)

    def test_the_report_command_writes_every_plot_as_a_png_and_links_it(self):
        result = run_cli(["report", self.run_dir], env={"CCLBENCH_NO_MATPLOTLIB": "0"})
        self.assertEqual(result.returncode, 0, result.stderr)
        plots_dir = os.path.join(self.run_dir, "plots")
        self.assertEqual(sorted(os.listdir(plots_dir)), self.PNGS)
        text = read_text(os.path.join(self.run_dir, "report.md"))
        for name in self.PNGS:
            with self.subTest(png=name):
                width, height = png_size(os.path.join(plots_dir, name)) or (0, 0)
                self.assertGreaterEqual(min(width, height), 200, (name, width, height))
                self.assertIn(f"](plots/{name})", text)
        self.assertNotIn("Plots skipped", text)

    def test_no_matplotlib_leaves_the_plots_out_and_says_why(self):
        result = run_cli(["report", self.run_dir], env={"CCLBENCH_NO_MATPLOTLIB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        plots_dir = os.path.join(self.run_dir, "plots")
        self.assertEqual(os.listdir(plots_dir) if os.path.isdir(plots_dir) else [], [])
        text = read_text(os.path.join(self.run_dir, "report.md"))
        self.assertIn("> Plots skipped: CCLBENCH_NO_MATPLOTLIB=1. Tables below are complete.", text)
        self.assertNotIn("](plots/", text)


@unittest.skipIf(PYPLOT is None, f"matplotlib not available: {WHY_NOT}")
class EqualLinksLookEqual(unittest.TestCase):
    """No offset notation: 390.03 and 390.05 GB/s sat at opposite ends of a '+3.903e2' colour bar."""

    def test_near_equal_values_get_a_colour_bar_from_zero_without_offset(self):
        figure, axis, image, bar = plots.heatmap_figure(PYPLOT, "NV18", [[None, 390.03], [390.05, None]], "GB/s")
        try:
            figure.canvas.draw()
            self.assertEqual(image.get_clim(), (0.0, 390.05))
            labels = [t.get_text() for t in bar.ax.get_yticklabels() if t.get_text()]
            self.assertTrue(labels)
            for label in labels:
                self.assertNotIn("e", label.lower())
                self.assertNotIn("+", label)
            self.assertEqual(bar.ax.yaxis.get_offset_text().get_text(), "")
            self.assertEqual(sorted(t.get_text() for t in axis.texts), ["390", "390", "n/a", "n/a"])
            self.assertEqual([t.get_text() for t in axis.get_xticklabels()], ["0", "1"])
        finally:
            PYPLOT.close(figure)

    def test_size_ticks_are_powers_of_two_and_thinned(self):
        self.assertEqual(plots.size_ticks([8192, 65536]), [8192, 16384, 32768, 65536])
        self.assertEqual(plots.size_ticks([12000]), [8192, 16384])
        many = plots.size_ticks([1, 1 << 40])  # 41 powers of two, every third kept
        self.assertEqual(len(many), 14)
        self.assertEqual(many[:3], [1, 8, 64])
        self.assertEqual(plots.size_ticks([]), [])


if __name__ == "__main__":
    main_for_ctest()
