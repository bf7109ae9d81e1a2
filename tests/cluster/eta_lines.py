#!/usr/bin/env python3
"""The ETA a run printed, judged against its real end (issue 43: the ETA within 25% of the time really left once
sanity is over). A progress line is "cclbench: [i/N] NAME: STATUS...; elapsed XmYYs, ETA XmYYs"; each is stamped as
it arrives (seconds from the tool's start) by whoever runs the tool: eta_measure.py and every fault matrix cell.

    left_s      the real time left at the line (end - the line's arrival)
    error       (ETA - left_s) / left_s: the ETA against the time really left (the worst over lines with SHORT_S
                or more left; with less, the seconds it is off: whole seconds and the report's writing)
    end_error   (elapsed + ETA - total) / total: the end it predicts against the real end, from the start

Judged are the lines from sanity's own line on (it is printed when sanity ends); where a launch failed, the lines
from its line on (those before it predicted a healthy run: nothing had shown the fault yet).
"""
import json
import re

LINE = re.compile(r"cclbench: \[(\d+)/(\d+)\] (\S+): (.*?); elapsed (\S+), ETA (\S+)")
CLOCK = re.compile(r"(?:(\d+)h)?(\d+)m(\d+)s")
SHORT_S = 10.0


def clock_seconds(text):
    """'1m05s' -> 65, '1h02m03s' -> 3723; '-' (no ETA yet) -> None."""
    found = CLOCK.fullmatch(text)
    if not found:
        return None
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def judge_lines(lines, total_s, after="sanity"):
    """lines: [(arrival s from the start, text)]; the rows of the progress lines with their errors, and the worst
    absolute errors from `after`'s line on (None when there is none)."""
    rows = []
    seen_after = False
    for arrived, text in lines:
        found = LINE.search(text)
        if not found:
            continue
        index, count, name, took, elapsed, eta = found.groups()
        seen_after = seen_after or name == after
        eta_s = clock_seconds(eta)
        left_s = total_s - arrived
        row = {"line": f"[{index}/{count}] {name}", "status": took.split(" in ")[0], "at_s": round(arrived, 1),
               "eta_s": eta_s, "left_s": round(left_s, 1), "after_sanity": seen_after,
               "error": None if eta_s is None or left_s <= 0 else round((eta_s - left_s) / left_s, 3),
               "end_error": None if eta_s is None or total_s <= 0 else round((arrived + eta_s - total_s) / total_s, 3)}
        rows.append(row)
    failed = next((index for index, row in enumerate(rows) if row["status"] == "failed"), None)
    for index, row in enumerate(rows):
        row["after_failure"] = failed is not None and index >= failed
    # With a launch that failed, the lines before it predicted a healthy run (nothing had shown the fault yet):
    # judged are the lines from the failure on.
    judged = [row for row in rows if row["after_sanity"] and (failed is None or row["after_failure"])]
    # Under SHORT_S really left the ETA's whole seconds and the report's own writing are the error: those lines are
    # judged by their seconds, the others by their share of the time left.
    worst = {"error": max((abs(row["error"]) for row in judged if row["error"] is not None
                           and row["left_s"] >= SHORT_S), default=None),
             "end_error": max((abs(row["end_error"]) for row in judged if row["end_error"] is not None), default=None),
             "short_s": max((round(abs(row["eta_s"] - row["left_s"]), 1) for row in judged
                             if row["eta_s"] is not None and row["left_s"] < SHORT_S), default=None)}
    return rows, worst


def read_stamped(path):
    """The lines of a stamped log ("%8.1f TEXT" per line, as eta_measure.py and the fault matrix write them)."""
    lines = []
    with open(path) as handle:
        for text in handle:
            stamp, _, rest = text.strip("\n").lstrip().partition(" ")
            try:
                lines.append((float(stamp), rest))
            except ValueError:
                continue
    return lines


def write_eta(path, exit_code, total_s, fault_at_s, lines):
    """A run's stamped progress lines with its end, as eta.json (what eta_measure.py --cell judges)."""
    with open(path, "w") as handle:
        json.dump({"exit": exit_code, "total_s": total_s, "fault_at_s": fault_at_s,
                   "lines": [[round(at, 2), text] for at, text in lines]}, handle, indent=0)


def write_stamped(path, lines):
    with open(path, "w") as handle:
        handle.write("".join(f"{at:8.1f} {text}\n" for at, text in lines))
