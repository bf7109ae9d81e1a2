#!/usr/bin/env python3
"""Judges a smoke proof's measurements again with the rules of this checkout, without a GPU.

  tests/gpu/rejudge.py PROOF_DIR OUT_DIR

PROOF_DIR is what tests/gpu/smoke_proof.sh wrote with --raw (raw.tar.gz: the capture's run directories and every
judged run's directory; summary.json: which run was clean and which injected, and its wall time). The reference is
merged again from the capture's runs (model/smoke_reference.merge_capture) and every judged run's own
smoke_reference.json judged against it (rules/smoke_bands.judge_smoke), as `smoke --against` would have judged it.
OUT_DIR gets summary.json (smoke_proof.py's shape, with 'rejudged' set), smoke_reference.json and env.txt, so that
tests/gpu/proof_table.py renders it. Nothing is measured: the same samples, another rule.
"""

import json
import os
import re
import shutil
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from cclbench_lib.model.smoke_reference import merge_capture  # noqa: E402
from cclbench_lib.render.smoke import smoke_regression_text  # noqa: E402
from cclbench_lib.rules.smoke_bands import judge_smoke  # noqa: E402

PARTS = ("copy", "collective", "graph")


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def judged_run(run, reference, own):
    """The summary entry of one run judged again: smoke_proof.py's fields."""
    judged = judge_smoke(reference, own, 0.0)
    findings = [smoke_regression_text(item) for item in judged["regressions"]]
    cases = {f"{c['point']}/{c['case_id']}": {"diff_pct": c.get("diff"), "band_pct": c.get("band"),
                                               "verdict": c.get("verdict"), "unstable": bool(c.get("unstable"))}
             for c in judged["cases"]}
    shift = judged["shifts"][0] if judged["shifts"] else None
    entry = {key: run.get(key) for key in ("number", "kind", "part", "pct", "status", "full", "run_id", "wall_s")}
    entry.update(exit=1 if findings else 0, findings=findings, cases=cases, rejudged=True,
                 shift={"diff": shift["diff"], "band": shift["band"], "verdict": shift["verdict"]} if shift else None)
    if run["kind"] == "inject":
        slower = re.compile(rf"^smoke\.{run['part']} \S+: \+[\d.]+% \(A ")
        entry["caught"] = bool(findings) and any(slower.match(f) or f.startswith("whole GPU") for f in findings)
        entry["unstable"] = any(": unstable: " in f for f in findings)
    return entry


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    proof, out = argv
    summary = read_json(os.path.join(proof, "summary.json"))
    original = read_json(os.path.join(proof, "smoke_reference.json"))
    with tempfile.TemporaryDirectory() as work:
        with tarfile.open(os.path.join(proof, "raw.tar.gz")) as tar:
            tar.extractall(work, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(work)
        capture_dir = os.path.join(work, "ref", "capture")
        runs = [read_json(os.path.join(capture_dir, name, "smoke_reference.json"))
                for name in sorted(os.listdir(capture_dir))]
        capture = original["capture"]
        reference = merge_capture(runs, original["created_utc"], original["tool"]["version"], original["run_id"],
                                  capture["host"], capture["max_age_days"], capture["parts"], capture.get("every_s", 0.0))
        rejudged = []
        for run in summary["runs"]:
            if run.get("status") != "ran":
                rejudged.append(dict(run))
                continue
            own = read_json(os.path.join(work, run["run_id"], "smoke_reference.json"))
            rejudged.append(judged_run(run, reference, own))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump({"rejudged_from": os.path.relpath(proof, out), "runs": rejudged}, handle, indent=1)
    with open(os.path.join(out, "smoke_reference.json"), "w", encoding="utf-8") as handle:
        json.dump(reference, handle, indent=1)
    if os.path.exists(os.path.join(proof, "env.txt")):
        shutil.copy(os.path.join(proof, "env.txt"), os.path.join(out, "env.txt"))
    clean = [r for r in rejudged if r["kind"] == "clean" and r.get("status") == "ran"]
    print(f"rejudged: {len(clean)} clean runs, {sum(1 for r in clean if r['exit'])} false alarm(s); " + "; ".join(
        f"{part}@{pct:g}% {sum(1 for r in rejudged if r.get('part') == part and r.get('pct') == pct and r.get('caught'))}"
        f"/{sum(1 for r in rejudged if r.get('part') == part and r.get('pct') == pct and r.get('status') == 'ran')}"
        for pct in (5.0, 10.0) for part in PARTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
