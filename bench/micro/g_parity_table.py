#!/usr/bin/env python3
"""The median table of bench/micro/g_parity.sh: per collective and size, nccl-tests' out-of-place
`time` against coll_perf's batch_time_us for each coll_perf variant (ratio = coll_perf / nccl-tests),
coll_perf's gated_time_us (the GPU time of the iterations back to back: where it is close to the
batch time the run is GPU-bound, where it is far below, host launch time decides), and the
launch-loop micro benchmark. Usage: g_parity_table.py OUT_DIR"""
import csv
import glob
import os
import statistics
import sys

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
VARIANTS = ["default", "nolog", "nolog_noucx"]


def nccl_tests_times(path):
    """{size_bytes: out-of-place time in us} of one nccl-tests output."""
    times = {}
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            fields = line.split()
            # size count type redop root time algbw busbw #wrong  time algbw busbw #wrong
            if len(fields) >= 9 and fields[0].isdigit() and fields[1].isdigit():
                try:
                    times[int(fields[0])] = float(fields[5])
                except ValueError:
                    continue
    return times


def coll_perf_times(path):
    """{(collective, size_bytes): (batch_time_us, gated_time_us or None)} of out-of-place ok rows."""
    rows = {}
    with open(path, encoding="utf-8", newline="") as stream:
        for row in csv.DictReader(stream):
            if row.get("in_place") != "false" or row.get("status") != "ok":
                continue
            gated = row.get("gated_time_us") or ""
            rows[(row["collective"], int(row["bytes"]))] = (float(row["batch_time_us"]),
                                                            float(gated) if gated not in ("", "null") else None)
    return rows


def micro_rows(path):
    """[(label, batch_us, launch_us)] of the BM_LaunchPathNccl lines of a --benchmark_format=csv file."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", newline="") as stream:
        lines = stream.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("name,")), None)
    if start is None:
        return []
    result = []
    for row in csv.DictReader(lines[start:]):
        if not row["name"].startswith("BM_LaunchPathNccl") or row.get("error_occurred") == "true":
            continue
        result.append((row["label"], float(row["batch_us"]), float(row["launch_us"])))
    return result


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def table(out_dir):
    """The lines of the table."""
    reference = {}
    for collective in COLLECTIVES:
        for path in sorted(glob.glob(os.path.join(out_dir, f"nccl_tests.{collective}.*.txt"))):
            for size, time_us in nccl_tests_times(path).items():
                reference.setdefault((collective, size), []).append(time_us)
    ours = {variant: {} for variant in VARIANTS}
    for variant in VARIANTS:
        for path in sorted(glob.glob(os.path.join(out_dir, f"coll_perf.{variant}.*.csv"))):
            for key, (batch, gated) in coll_perf_times(path).items():
                ours[variant].setdefault(key, []).append((batch, gated))

    def cell(value, fmt):
        return format(value, fmt) if value is not None else "-"

    lines = ["collective      bytes      nccl_tests  " + "  ".join(f"{v:>11} ratio" for v in VARIANTS) + "  gated_us"]
    for collective in COLLECTIVES:
        sizes = sorted({size for (c, size) in reference if c == collective} |
                       {size for variant in VARIANTS for (c, size) in ours[variant] if c == collective})
        for size in sizes:
            nt = median_or_none(reference.get((collective, size), []))
            line = f"{collective:<15} {size:>10} {cell(nt, '11.2f')}"
            for variant in VARIANTS:
                batch = median_or_none([b for b, _ in ours[variant].get((collective, size), [])])
                ratio = batch / nt if batch is not None and nt else None
                line += f"  {cell(batch, '11.2f')} {cell(ratio, '5.2f')}"
            gated = median_or_none([g for _, g in ours["default"].get((collective, size), [])])
            line += f"  {cell(gated, '8.2f')}"
            lines.append(line)
    micro = micro_rows(os.path.join(out_dir, "micro.csv"))
    if micro:
        lines.append("")
        lines.append("launch loop alone (BM_LaunchPathNccl, 8 KiB float, no MPI, no NCCL_DEBUG): batch_us launch_us")
        for label, batch, launch in micro:
            lines.append(f"  {label:<40} {batch:9.2f} {launch:9.2f}")
    return lines


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: g_parity_table.py OUT_DIR (the directory bench/micro/g_parity.sh wrote)", file=sys.stderr)
        return 2
    print("\n".join(table(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
