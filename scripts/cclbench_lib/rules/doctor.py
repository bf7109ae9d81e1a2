"""The doctor's failures and warnings as anomalies of a run."""

from ..model.run_dir import load_run_doctor


def doctor_anomalies(run_dir):
    """The anomalies of the run's doctor.json (rules/anomalies.py's form): one per failed check."""
    document, problem = load_run_doctor(run_dir)
    if problem:
        return [{"code": "unreadable", "where": "doctor.json", "problem": problem}]
    return [{"code": "doctor", "check": check.get("id"), "where": f"{check.get('host')} {check.get('subject')}",
             "detail": check.get("detail")}
            for check in (document or {}).get("checks") or [] if isinstance(check, dict) and check.get("status") == "fail"]
