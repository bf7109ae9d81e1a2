"""The verdict of rules/verdict.py in words: the report's first lines, the per-host table, the console's last
line and the JSON document (verdict.json). Nothing is judged here."""

from ..base.version import TOOL_VERSION
from ..render.anomalies import anomaly_row
from ..render.markdown import md_table
from ..rules.verdict import CHECKS, FAIL, HEALTHY, NOT_PASSED, SEVERITIES, WARN

# 1.1.0: repeatability notes (severity note, under 'notes': single cases the healthy noise explains, host-bound
# jitter) and the warnings repeat.many_cases_above_target / repeat.many_cases_above_gate.
# 1.2.0: path.dead (a dead path between hosts, first) and launch.not_run_dead_path; the host table's rails column
# reads 'dead' for a host a dead path names.
# 1.3.0: overall INCOMPLETE (headline 'INCOMPLETE (n)', exit 1): a run stopped by SIGINT or SIGTERM (run.interrupted).
VERDICT_SCHEMA_VERSION = "1.3.0"
FIRST_REASONS = 3  # reasons named in the headline lines


def headline(verdict):
    """'HEALTHY', 'WARNINGS (n)', 'FAILED (n)' or 'INCOMPLETE (n)' (n: the fails; of a run stopped by a signal)."""
    overall = verdict["overall"]
    if overall == HEALTHY:
        return HEALTHY
    return f"{overall} ({verdict['counts'][FAIL if overall in NOT_PASSED else WARN]})"


def reason_text(reason):
    """One reason in words: its code, where and what the rule found."""
    kind, where, detail = anomaly_row(reason["finding"])
    place = reason["point"] or (where if where not in (None, "", "-") else None)
    return f"{reason['code']} ({kind}){' at ' + str(place) if place else ''}: {detail}"


def console_line(verdict, run_dir, prefix="cclbench: "):
    """The console's last line of baseline and report."""
    line = f"{prefix}{headline(verdict)}"
    if verdict["reasons"]:
        first = verdict["reasons"][0]
        more = len(verdict["reasons"]) - 1
        line += f": {reason_text(first)}; look at {first['look']}" + (f" (and {more} more)" if more else "")
    return line + f"; verdict: {run_dir}/verdict.json"


def verdict_lines(verdict):
    """The report's first lines: the verdict, its first reasons with where to look, the per-host table."""
    lines = [f"# {headline(verdict)}", ""]
    for reason in verdict["reasons"][:FIRST_REASONS]:
        lines.append(f"- {reason['severity']}: {reason_text(reason)}. Look at: {reason['look']}. "
                     f"Explained: docs/verdicts.md#{reason['code']}")
    more = len(verdict["reasons"]) - FIRST_REASONS
    if more > 0:
        lines.append(f"- and {more} more under Anomalies")
    repeat_notes = sum(1 for note in verdict["notes"] if note["check"] == "repeatability")
    if repeat_notes:
        lines.append(f"- {repeat_notes} note(s) under Repeatability: spread the healthy noise explains, counted nowhere")
    if verdict["reasons"] or repeat_notes:
        lines.append("")
    rows = [[row["host"]] + [row[check] for check in CHECKS] for row in verdict["hosts"]]
    lines += [md_table(["host"] + list(CHECKS), rows) if rows else "_no host in this run's plan_", ""]
    lines.append("Severities: fail (exit 1) a dead path between hosts (rails column: dead), wrong data, failed cases, a transport gate missed, a doctor fail, a "
                 "dead, slow or unbalanced rail, an outlier link, GPU or rank, a point not reproducible as a whole, a run "
                 "interrupted before its plan completed; "
                 "warn (exit 0) more single cases above the CV target or without a stable median than the healthy "
                 "noise explains, doctor warnings; skip: nothing to judge on that host; note (counted nowhere) what "
                 "was not measured by design, single cases whose spread the healthy noise explains and host-bound "
                 "jitter. verdict.json holds the same, with every reason's code and numbers. Every code, what it "
                 "means and what to check: docs/verdicts.md in the cclbench source.")
    return lines + [""]


def verdict_document(verdict, created_utc):
    """verdict.json (results_schema/verdict.schema.json): the rules' data as it is, with each reason's words."""
    reasons = []
    for reason in verdict["reasons"] + verdict["notes"]:
        item = {key: reason[key] for key in ("code", "severity", "check", "host", "hosts", "point", "subject",
                                             "numbers", "look")}
        item["text"] = reason_text(reason)
        reasons.append(item)
    severe = [r for r in reasons if r["severity"] in SEVERITIES]
    return {"schema_version": VERDICT_SCHEMA_VERSION, "kind": "verdict",
            "tool": {"name": "cclbench", "version": TOOL_VERSION}, "created_utc": created_utc,
            "run_id": verdict["run_id"], "overall": verdict["overall"], "headline": headline(verdict),
            "exit_code": 1 if verdict["overall"] in NOT_PASSED else 0, "counts": verdict["counts"],
            "cv_gate_pct": verdict.get("cv_gate_pct"), "hosts": verdict["hosts"], "checks": verdict["checks"],
            "points": verdict["points"], "reasons": severe,
            "notes": [r for r in reasons if r["severity"] not in SEVERITIES]}
