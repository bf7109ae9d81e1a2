"""The doctor's failures and warnings as anomalies of a run."""

from ..model.run_dir import load_run_doctor


def doctor_anomalies(run_dir):
    """(kind, where, detail) rows for the report's anomaly table: one per failed check."""
    document, problem = load_run_doctor(run_dir)
    if problem:
        return [("unreadable result", "doctor.json", problem)]
    rows = []
    for check in (document or {}).get("checks") or []:
        if isinstance(check, dict) and check.get("status") == "fail":
            rows.append((f"doctor {check.get('id')}", f"{check.get('host')} {check.get('subject')}",
                         str(check.get("detail"))))
    return rows
