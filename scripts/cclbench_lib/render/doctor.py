"""The doctor's table, on the terminal and in report.md."""

from ..model.run_dir import load_run_doctor


# --- output ---------------------------------------------------------------------------------------

def render_table(document):
    rows = [("host", "check", "status", "subject", "detail")]
    for check in document["checks"]:
        rows.append((check["host"], check["id"], check["status"], check["subject"], check["detail"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        lines.append("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    counts = document["summary"]
    lines.append(f"doctor: {document['status']} ({counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, "
                 f"{counts['skip']} skip) on {', '.join(document['hosts'])}")
    return "\n".join(lines) + "\n"


def doctor_section(run_dir):
    """The report's doctor table (markdown lines): warn/fail first, then pass/skip."""
    document, problem = load_run_doctor(run_dir)
    lines = ["## Doctor (preflight)", ""]
    if document is None:
        lines += [problem or "No doctor.json in this run (run before the doctor existed, or it did not run).", ""]
        return lines
    counts = document.get("summary") or {}
    lines += [f"Overall **{document.get('status')}**: {counts.get('pass', 0)} pass, {counts.get('warn', 0)} warn, "
              f"{counts.get('fail', 0)} fail, {counts.get('skip', 0)} skip on {', '.join(document.get('hosts') or [])}. "
              "Re-run with `scripts/cclbench doctor`.", ""]
    order = {"fail": 0, "warn": 1, "pass": 2, "skip": 3}
    checks = sorted((c for c in document["checks"] if isinstance(c, dict)),
                    key=lambda c: order.get(c.get("status"), 4))
    lines.append("| host | check | status | subject | detail |")
    lines.append("|---|---|---|---|---|")
    for check in checks:
        cells = [check.get("host"), check.get("id"), check.get("status"), check.get("subject"), check.get("detail")]
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells) + " |")
    return lines + [""]
