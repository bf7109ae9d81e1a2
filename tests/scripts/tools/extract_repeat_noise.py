#!/usr/bin/env python3
"""Extract the per-case repeat times of real baseline runs into a compact JSON file, the measured noise
that tests/scripts/test_repeatability.py checks the repeatability rule against. Not needed at test time.

    python3 tests/scripts/tools/extract_repeat_noise.py OUT.json RUN_DIR [RUN_DIR ...]

Per run: its name, the manifest's status and repeat failures (what the old per-case gate said), and per
timed point its repeats and, for every GPU-timed case with two or more sound repeats, [times, host_bound]:
the bandwidth times (gated_time_us, the figure the report and compare use) in the order of the point's
repeats, null where a repeat has no sound record, and whether the case is host-bound. Cases come from the
package's own record model (load_cases, group_repeats, is_host_bound), so the extract holds exactly what
the report judged.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts"))

from cclbench_lib.base.files import write_atomic  # noqa: E402
from cclbench_lib.model.records import (bandwidth_time_us, group_repeats, is_correctness_only, load_cases,  # noqa: E402
                                        record_is_sound)
from cclbench_lib.rules.repeat_rule import is_host_bound  # noqa: E402


def extract_run(run_dir):
    records, bad = load_cases(run_dir)
    if bad:
        raise SystemExit(f"extract_repeat_noise: error: {run_dir}: unreadable case records {bad[:3]}")
    with open(os.path.join(run_dir, "run_manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    cases = {}
    for (base, case_id), group in sorted(group_repeats(records).items()):
        sound = [r for r in group if record_is_sound(r) and not is_correctness_only(r)]
        times = {r["point"]: bandwidth_time_us(r) for r in sound}
        if sum(1 for t in times.values() if t is not None) < 2:  # emulated or MPI-backend points, one repeat
            continue
        cases.setdefault(base, {})[case_id] = (times, is_host_bound(sound))
    points = {}
    for base, by_case in cases.items():
        # Times aligned to the point's repeats, null where a repeat has no sound time.
        repeats = sorted({name for times, _ in by_case.values() for name in times})
        points[base] = {"repeats": repeats, "cases": {
            case_id: [[times.get(name) for name in repeats], host_bound]
            for case_id, (times, host_bound) in sorted(by_case.items())}}
    return {"name": os.path.basename(os.path.normpath(run_dir)), "status": manifest["status"],
            "cv_gate_pct": manifest["gates"]["cv_gate_pct"],
            "repeat_cv_failures": manifest["gates"].get("repeat_cv_failures", []), "points": points}


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    runs = [extract_run(run_dir) for run_dir in argv[2:]]
    document = {"about": "per-case repeat times (us) of real cclbench baseline runs, from "
                         "tests/scripts/tools/extract_repeat_noise.py", "runs": runs}
    # One case per line: small, and a diff shows which case moved.
    lines = ["{", f'  "about": {json.dumps(document["about"])},', '  "runs": [']
    for number, run in enumerate(runs):
        head = {key: value for key, value in run.items() if key != "points"}
        lines.append("    " + json.dumps(head)[:-1] + ', "points": {')
        for p_number, (point, data) in enumerate(sorted(run["points"].items())):
            lines.append(f'      {json.dumps(point)}: {{"repeats": {json.dumps(data["repeats"])}, "cases": {{')
            items = sorted(data["cases"].items())
            for c_number, (case_id, case) in enumerate(items):
                comma = "," if c_number < len(items) - 1 else ""
                lines.append(f"        {json.dumps(case_id)}: {json.dumps(case, separators=(',', ':'))}{comma}")
            lines.append("      }}" + ("," if p_number < len(run["points"]) - 1 else ""))
        lines.append("    }}" + ("," if number < len(runs) - 1 else ""))
    lines += ["  ]", "}"]
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == document
    write_atomic(argv[1], text)


if __name__ == "__main__":
    main(sys.argv)
