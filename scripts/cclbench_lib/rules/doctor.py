"""The doctor's failures and warnings as findings of a run."""

from ..model.run_dir import load_run_doctor

# doctor.json check status -> finding code (rules/verdict.py gives each its severity).
DOCTOR_CODES = {"fail": "doctor.fail", "warn": "doctor.warn"}


def doctor_anomalies(run_dir):
    """The findings of the run's doctor.json (rules/anomalies.py's form): one per failed or warning check."""
    document, problem = load_run_doctor(run_dir)
    if problem:
        return [{"code": "doctor.unreadable", "where": "doctor.json", "problem": problem}]
    return [{"code": DOCTOR_CODES[check.get("status")], "check": check.get("id"), "host": check.get("host"),
             "subject": check.get("subject"), "where": f"{check.get('host')} {check.get('subject')}",
             "detail": check.get("detail")}
            for check in (document or {}).get("checks") or []
            if isinstance(check, dict) and check.get("status") in DOCTOR_CODES]
