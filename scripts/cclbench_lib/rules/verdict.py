"""The verdict of a run as plain data (verdict.json, results_schema/verdict.schema.json): HEALTHY, WARNINGS or
FAILED, per host and check, per point, and every reason with a stable code. No text, no I/O: render/verdict.py
puts it into words, the report, the console's last line and smoke's JUnit file come from it.

Severities have fixed meanings (README "Verdicts"):
  fail  (exit 1)  wrong data, failed or errored cases, a transport gate missed, a doctor fail, a dead or
                  unbalanced rail, an outlier link, GPU or rank, a point not reproducible as a whole;
  warn  (exit 0, shown first)  more single cases above the CV target or without a stable median than the
                  healthy noise explains, doctor warnings;
  pass;
  note  (counted nowhere)  what the run did not measure by design, and single cases whose spread the
                  repeatability rule's noise model explains (rules/repeatability.py), host-bound jitter included.
Any finding of the rules layer slots in: one whose code CODES names gets its severity and check from there;
one of another code keeps its own 'severity' (and 'check', one of CHECKS), and without a severity it is a fail
(an unjudged finding never passes silently).
"""

from ..model.records import base_point_of, launch_base_point
from ..model.run_dir import load_run_doctor
from ..rules import repeatability
from ..rules.anomalies import find_anomalies
from ..rules.doctor import doctor_anomalies
from ..rules.repeat_rule import judge_repeatability

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
SEVERITIES = (FAIL, WARN)
HEALTHY, WARNINGS, FAILED = "HEALTHY", "WARNINGS", "FAILED"
# The per-host table's columns, in the report's order.
CHECKS = ("doctor", "transport", "rails", "outliers", "data", "repeatability")
NOTE = "note"  # counted nowhere: what the run did not measure by design, or spread the healthy noise explains

# Stable code: (severity, check, where to look; {point}, {host} and {subject} are filled in).
CODES = {
    "data.wrong": (FAIL, "data", "cases.jsonl, point {point}, case {subject}"),
    "data.above_ceiling": (FAIL, "data", "cases.jsonl, point {point}: busbw above its physical ceiling"),
    "case.failed": (FAIL, "data", "cases.jsonl and run.log, point {point}, case {subject}"),
    "case.missing": (FAIL, "data", "run.log, launch {point}"),
    "launch.never_ran": (FAIL, "data", "run_manifest.json (resume with cclbench baseline --resume)"),
    "launch.failed": (FAIL, "data", "run.log, launch {point}"),
    "launch.timeout": (FAIL, "data", "run.log, launch {point}: the case the reason names; doctor.json for its hosts"),
    "launch.not_run": (FAIL, "doctor", "doctor.json (the path the reason quotes) and run.log, launch {point}; "
                                       "cclbench baseline --run-despite-doctor runs it anyway"),
    "run.unreadable": (FAIL, "data", "the file named in the reason"),
    "data.torn_records": (WARN, "data", "cases.jsonl: the torn lines are ignored, their cases were measured again"),
    "transport.gate_missed": (FAIL, "transport", "nccl/{point}/ and report.md 'Transport evidence'"),
    "rail.dead": (FAIL, "rails", "report.md 'Rails'; evidence.rails in cases.jsonl, point {point}"),
    "rail.unbalanced": (FAIL, "rails", "report.md 'Rails'; evidence.rails in cases.jsonl, point {point}"),
    "rail.unbound": (FAIL, "rails", "report.md 'Rails'; NCCL_IB_HCA of point {point}"),
    "rail.errors": (FAIL, "rails", "the HCA's error counters; evidence.rails in cases.jsonl, point {point}"),
    "rail.no_counters": (WARN, "rails", "report.md 'Rails' (the row's reason); evidence.rails in cases.jsonl, point {point}"),
    "rail.not_seen": (WARN, "rails", "report.md 'Rails': no netdev rows for a NET/Socket point (coll_perf --netdevs), "
                                     "point {point}"),
    "rail.flag": (FAIL, "rails", "evidence.rails.flags in cases.jsonl, point {point}"),
    "outlier.link": (FAIL, "outliers", "p2p/{host}.json and report.md 'P2P matrices'"),
    "outlier.gpu": (FAIL, "outliers", "p2p/{host}.json and report.md 'P2P matrices'"),
    "outlier.rank": (FAIL, "outliers", "per_rank in cases.jsonl, point {point}"),
    "doctor.fail": (FAIL, "doctor", "doctor.json ({host} {subject}); rerun cclbench doctor"),
    "doctor.warn": (WARN, "doctor", "doctor.json ({host} {subject}); rerun cclbench doctor"),
    "doctor.unreadable": (FAIL, "doctor", "doctor.json"),
    repeatability.REPEAT_SHIFT: (FAIL, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.SYSTEMATIC_SPREAD: (FAIL, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.CASES_ABOVE_GATE: (FAIL, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.MANY_CASES_ABOVE_GATE: (WARN, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.MANY_CASES_ABOVE_TARGET: (WARN, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.CASE_ABOVE_GATE: (NOTE, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.CASE_ABOVE_TARGET: (NOTE, "repeatability", "report.md 'Repeatability', point {point}"),
    repeatability.HOST_BOUND_JITTER: (NOTE, "repeatability", "report.md 'Repeatability', point {point}"),
    "env.host_differs": (FAIL, "data", "report.md 'Environment' (each host's ranks); manifest.env_by_host in raw/, "
                                        "point {point}"),
    "env.rank_differs": (FAIL, "data", "manifest.env_rank_disagreements in raw/, point {point}"),
    "case.skipped": (NOTE, "data", "cases.jsonl, point {point} (reason in each record)"),
    "ab.variant_not_measured": (NOTE, "data", "report.md 'Algorithm / protocol A/B' (NCCL's words); run.log, "
                                               "launch {point}"),
}
UNKNOWN_LOOK = "report.md 'Anomalies'"

# The finding codes of rules/anomalies.py and rules/doctor.py -> stable codes. Findings of other codes keep theirs.
FINDING_CODES = {
    "never_ran": "launch.never_ran", "transport_exit": "transport.gate_missed",
    "launch_incomplete": "launch.failed", "launch_timeout": "launch.timeout", "launch_not_run": "launch.not_run", "wrong_data": "data.wrong", "case_not_ok": "case.failed",
    "cases_skipped": "case.skipped", "transport_record": "transport.gate_missed", "missing_cases": "case.missing",
    "above_limit": "data.above_ceiling", "rail_errors": "rail.errors", "rail_flag": "rail.flag",
    "rail_unbound": "rail.unbound", "unreadable": "run.unreadable",
}
# rules/outliers.py's row kinds -> stable codes.
OUTLIER_CODES = {
    "P2P link below class median": "outlier.link",
    "P2P GPU below its class medians": "outlier.gpu",
    "host<->device below the GPUs' median": "outlier.gpu",
    "straggler rank": "outlier.rank",
}
TORN_PREFIX = "cases.jsonl line(s) "  # model/run_dir.RunData's problem for torn records
_NOT_NUMBERS = ("code", "severity", "check", "where", "host", "hosts", "look")
_SUBJECT_KEYS = ("case_id", "rail", "subject", "worst", "repeat", "kind", "collective")


def stable_code(finding):
    """The stable code of one finding of the rules layer."""
    code = finding.get("code")
    if code == "outlier":
        return OUTLIER_CODES.get(finding.get("kind"), "outlier.link")
    if code == "unreadable" and str(finding.get("problem", "")).startswith(TORN_PREFIX):
        return "data.torn_records"  # an interrupted append, resumed: the case was measured again
    if code == "rail_imbalance":
        shares = [share for _rail, share in finding.get("shares") or []]
        return "rail.dead" if shares and min(shares) <= 0 else "rail.unbalanced"
    return FINDING_CODES.get(code, code)


def classify(finding):
    """(code, severity, check) of one finding: CODES' entry, else the finding's own severity and check, else
    a fail under 'data'."""
    code = stable_code(finding)
    if code in CODES:
        return (code,) + CODES[code][:2]
    severity = finding.get("severity") if finding.get("severity") in SEVERITIES + (NOTE,) else FAIL
    return code, severity, finding.get("check") if finding.get("check") in CHECKS else "data"


def _numbers(finding):
    return {key: value for key, value in finding.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in _NOT_NUMBERS}


def _subject(finding):
    if isinstance(finding.get("check"), str) and finding.get("subject"):
        return f"{finding['check']} {finding['subject']}"  # a doctor check and what it looked at
    for key in _SUBJECT_KEYS:
        if finding.get(key) not in (None, ""):
            return str(finding[key])
    return None


def _point_hosts(plan, base_of):
    hosts = {}
    for launch in plan:
        for name in (launch.get("name"), base_of(launch.get("name") or "")):
            for host in launch.get("hosts") or []:
                if host not in hosts.setdefault(name, []):
                    hosts[name].append(host)
    return hosts


def make_reason(finding, point_hosts, base_of, known_points):
    """One finding as a verdict reason: {code, severity, check, host, hosts, point, subject, numbers, look,
    finding} ('finding': the rule's own fields, for the render layer's words)."""
    code, severity, check = classify(finding)
    where = finding.get("where")
    point = base_of(where) if isinstance(where, str) and (where in known_points or base_of(where) in known_points) \
        else None
    hosts = list(finding.get("hosts") or ([finding["host"]] if finding.get("host") else [])) or \
        list(point_hosts.get(where) or point_hosts.get(point) or [])
    hosts = [host for host in hosts if host != "*"]  # the doctor's cross-host comparison: the run as a whole
    if not hosts and code.startswith("outlier.") and isinstance(where, str) and point is None:
        hosts = [where]  # P2P outliers are per host: their 'where' is the host
    subject = _subject(finding)
    template = finding.get("look") or CODES.get(code, (None, None, UNKNOWN_LOOK))[2]
    look = template.format(point=point or where or "-", host=hosts[0] if hosts else "-", subject=subject or "-")
    return {"code": code, "severity": severity, "check": check, "host": hosts[0] if len(hosts) == 1 else None,
            "hosts": hosts, "point": point, "subject": subject, "numbers": _numbers(finding), "look": look,
            "finding": finding}


def _worst(statuses):
    for status in (FAIL, WARN, PASS):
        if status in statuses:
            return status
    return SKIP


def build_verdict(run_id, hosts, points, findings, applicable):
    """The verdict of a run. hosts: the run's hosts in order; points: [{'point' (base point), 'hosts',
    'repeatability' (judge_point's result or None)}]; findings: every finding of the rules layer (doctor first);
    applicable: {(host, check): True} for each check that had something to judge on that host (else 'skip'),
    and {(point, check): True} likewise per point.
    Returns {overall, counts, reasons (fails first, then warnings, each in the rules' order), notes, hosts,
    checks, points}."""
    base_names = {p["point"] for p in points}
    point_hosts = {p["point"]: list(p.get("hosts") or []) for p in points}

    def base_of(name):
        return name if name in base_names else base_point_of(name)

    made = [make_reason(f, point_hosts, base_of, base_names) for f in findings]
    reasons = [r for r in made if r["severity"] == FAIL] + [r for r in made if r["severity"] == WARN]
    notes = [r for r in made if r["severity"] not in SEVERITIES]
    counts = {FAIL: sum(1 for r in reasons if r["severity"] == FAIL),
              WARN: sum(1 for r in reasons if r["severity"] == WARN)}
    overall = FAILED if counts[FAIL] else WARNINGS if counts[WARN] else HEALTHY

    def status_of(selected, applies):
        found = _worst({r["severity"] for r in selected})
        return found if found != SKIP else (PASS if applies else SKIP)

    host_rows = []
    for host in hosts:
        row = {"host": host}
        for check in CHECKS:
            # A reason that names no host (a run-wide one) counts on every host.
            selected = [r for r in reasons if r["check"] == check and (not r["hosts"] or host in r["hosts"])]
            row[check] = status_of(selected, applicable.get((host, check)))
        host_rows.append(row)
    check_rows = []
    for check in CHECKS:
        selected = [r for r in reasons if r["check"] == check]
        check_rows.append({"check": check, "status": status_of(selected, any(applicable.get((h, check)) for h in hosts)),
                           "fail": sum(1 for r in selected if r["severity"] == FAIL),
                           "warn": sum(1 for r in selected if r["severity"] == WARN)})
    point_rows = []
    for entry in points:
        name = entry["point"]
        row = {"point": name, "hosts": list(entry.get("hosts") or []), "checks": {}}
        for check in CHECKS[1:]:
            selected = [r for r in reasons if r["check"] == check and r["point"] == name]
            row["checks"][check] = status_of(selected, applicable.get((name, check)))
        judged = entry.get("repeatability")
        row["repeatability"] = None if judged is None else {
            key: judged[key] for key in ("status", "code", "judged_cases", "median_cv_pct", "spread_limit_pct",
                                         "shift_limit_pct", "cases_above_target", "cases_above_gate",
                                         "cases_above_gate_limit")}
        if judged is not None:
            row["repeatability"]["cases"] = {
                case_id: {key: case[key] for key in ("repeats", "cv_pct", "robust_pct", "host_bound", "limit_pct", "code")}
                for case_id, case in sorted(judged["cases"].items())}
        point_rows.append(row)
    return {"run_id": run_id, "overall": overall, "counts": counts, "reasons": reasons, "notes": notes,
            "hosts": host_rows, "checks": check_rows, "points": point_rows}


def exit_code(verdict):
    """1 when the run FAILED, else 0 (warnings never fail a run)."""
    return 1 if verdict["overall"] == FAILED else 0


def run_verdict(data, cv_gate_pct):
    """The verdict of a run directory (model/run_dir.RunData): its doctor, every anomaly, the repeatability of
    each GPU-timed point (rules/repeat_rule.judge_repeatability), judged per host and point."""
    judged = judge_repeatability(data.records, cv_gate_pct)
    findings = doctor_anomalies(data.run_dir) + find_anomalies(data, cv_gate_pct, judged)
    # A forced --ab variant that NCCL refused is an A/B finding (the report's A/B section names it with NCCL's
    # words), not a broken baseline: the runner does not fail the run on it, nor does the verdict.
    variants = {launch["name"] for launch in data.plan if launch.get("ab")}
    findings = [dict(f, code="ab.variant_not_measured") if f.get("code") in ("launch_incomplete", "launch_timeout",
                                                                              "missing_cases")
                and f.get("where") in variants else f for f in findings]
    launches = data.coll_launches()
    hosts = list(data.manifest.get("hosts") or [])
    for launch in data.plan:
        hosts += [host for host in launch.get("hosts") or [] if host not in hosts]
    points, by_base = [], {}
    for launch in launches:
        base = launch_base_point(launch)
        if base not in by_base:
            by_base[base] = {"point": base, "hosts": [], "launches": []}
            points.append(by_base[base])
        by_base[base]["launches"].append(launch)
        by_base[base]["hosts"] += [h for h in launch.get("hosts") or [] if h not in by_base[base]["hosts"]]
    records_of = {}
    for (point, _case), record in data.latest.items():
        records_of.setdefault(base_point_of(point), []).append(record)
    applicable = {}
    doctor, _problem = load_run_doctor(data.run_dir)
    for check in (doctor or {}).get("checks") or []:
        if isinstance(check, dict):
            applicable[(check.get("host"), "doctor")] = True
    for host, document in data.p2p.items():
        if isinstance(document, dict) and not document.get("no_device_reason"):
            applicable[(host, "outliers")] = True
    for entry in points:
        records = records_of.get(entry["point"], [])
        checks = {"transport": any("--expect-transport" in (l.get("argv") or []) for l in entry["launches"]),
                  "rails": any(l.get("kind") == "inter" for l in entry["launches"]),
                  "outliers": any(isinstance(r.get("per_rank"), (dict, list)) for r in records),
                  "data": bool(records), "repeatability": entry["point"] in judged}
        for check, applies in checks.items():
            if applies:
                applicable[(entry["point"], check)] = True
                for host in entry["hosts"]:
                    applicable[(host, check)] = True
        entry["repeatability"] = judged.get(entry["point"])
        del entry["launches"]
    verdict = build_verdict(data.manifest.get("run_id"), hosts, points, findings, applicable)
    verdict["cv_gate_pct"] = cv_gate_pct
    return verdict
