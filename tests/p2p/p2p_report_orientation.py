#!/usr/bin/env python3
"""Feeds a p2p_matrix JSON written by the real writer (bench/p2p/report.cpp to_json, from
report_test.cpp's synthetic 2-GPU report) through `cclbench report`'s P2P section and checks the
matrix orientation: src is the row, dst the column. The report's markdown is parsed back into numbers.
Expected values are the synthetic report's: d2d_ce_write_uni 0 -> 1 median of {30, 10, 20} = 20 GB/s,
1 -> 0 skipped (peer access refused) so missing, never 0; host -> GPU0 median of {54.5, 54.25, 54.0}.
usage: p2p_report_orientation.py SOURCE_DIR P2P_JSON"""
import json
import sys
import tempfile
import types


def table_after(lines, marker):
    start = next(i for i, line in enumerate(lines) if line.startswith(marker))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[0], [row for row in rows[1:] if not set("".join(row)) <= set("-: ")]


def main(argv):
    sys.path.insert(0, f"{argv[1]}/scripts")
    from cclbench_lib.render import report  # noqa: E402
    with open(argv[2]) as handle:
        document = json.load(handle)
    with tempfile.TemporaryDirectory() as plots:
        lines = report.p2p_section(types.SimpleNamespace(p2p={"node1": document}, topology={}), None, plots)
    text = "\n".join(lines)
    try:
        return check(text.splitlines(), text)
    except (KeyError, IndexError, StopIteration, ValueError) as error:
        print(f"FAIL: the P2P section does not have the expected shape ({error!r}):\n{text}", file=sys.stderr)
        return 1


def check(lines, text):
    header, rows = table_after(lines, "**d2d_ce_write_uni**")
    failures = []
    if header != ["src \\ dst", "0", "1"]:
        failures.append(f"header {header}")
    cells = {row[0]: row[1:] for row in rows}
    if float(cells["0"][1]) != 20.0:
        failures.append(f"row 0 (src GPU0) column 1 (dst GPU1) is {cells['0'][1]}, expected 20 (0 -> 1)")
    if cells["1"][0] not in ("-", "", "n/a", "None") or cells["1"][0] == "0":
        failures.append(f"row 1 column 0 (1 -> 0, skipped) is {cells['1'][0]!r}, expected a missing mark")
    if cells["0"][0] != "X" or cells["1"][1] != "X":
        failures.append("the diagonal is not X")
    _header, host_rows = table_after(lines, "Host <-> device")
    h2d = [row for row in host_rows if row[0] == "h2d_ce_local_numa"]
    if len(h2d) != 1 or h2d[0][1] != "host" or h2d[0][2] != "0" or float(h2d[0][4]) != 54.25:
        failures.append(f"host -> GPU0 row {h2d}")
    for failure in failures:
        print(f"FAIL: {failure}\n{text}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
