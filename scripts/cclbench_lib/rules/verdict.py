"""The verdict of a run as plain data (verdict.json, results_schema/verdict.schema.json): HEALTHY, WARNINGS or
FAILED, per host and check, per point, and every reason with a stable code. No text, no I/O: render/verdict.py
puts it into words, the report, the console's last line and smoke's JUnit file come from it.

Severities have fixed meanings (docs/bring-up.md "Reading the report"; each code in docs/verdicts.md):
  fail  (exit 1)  a dead path between hosts (named first: the node, rail or link), wrong data, failed or errored
                  cases, a launch that hung or was not run because the doctor or the run's own path check failed
                  a path it needs, a run stopped by a signal before its plan completed, a transport gate missed, a doctor fail, a dead, slow or unbalanced rail, an
                  outlier link, GPU or rank, a point not reproducible as a whole;
  warn  (exit 0, shown first)  more single cases above the CV target or without a stable median than the
                  healthy noise explains, doctor warnings;
  pass; in the host table's rails column, dead: a dead path names the host;
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
from ..rules.dead_paths import PATH_DEAD, dead_hosts, dead_path_findings
from ..rules.doctor import doctor_anomalies
from ..rules.repeat_rule import judge_repeatability

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
# The host table's rails column of a host a dead path names (rules/dead_paths.py): its rails carried nothing.
DEAD = "dead"
SEVERITIES = (FAIL, WARN)
HEALTHY, WARNINGS, FAILED = "HEALTHY", "WARNINGS", "FAILED"
# A run stopped by SIGINT or SIGTERM before its plan completed (run.interrupted among its fails): its verdict judges
# what was measured, but it is no complete judgement of the cluster either way. It exits 1 as FAILED does.
INCOMPLETE = "INCOMPLETE"
INTERRUPTED_CODE = "run.interrupted"
NOT_PASSED = (FAILED, INCOMPLETE)
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
    "run.interrupted": (FAIL, "data", "run_manifest.json (each launch's status; the signal in the last invocation); "
                                      "cclbench baseline --resume RUN_ID runs what is missing"),
    "launch.failed": (FAIL, "data", "run.log, launch {point}"),
    "launch.timeout": (FAIL, "data", "run.log, launch {point}: the case the reason names; doctor.json for its hosts"),
    "launch.not_run": (FAIL, "doctor", "doctor.json (the path the reason quotes) and run.log, launch {point}; "
                                       "cclbench baseline --run-despite-doctor runs it anyway"),
    "launch.not_run_dead_path": (FAIL, "data", "doctor/path_checks.json (the run's path check the reason quotes) "
                                                "and run.log, launch {point}"),
    PATH_DEAD: (FAIL, "rails", "report.md 'Paths checked during the run', doctor/path_checks.json and doctor.json "
                               "(path_mtu); run.log from launch {point}"),
    "run.unreadable": (FAIL, "data", "the file named in the reason"),
    "data.torn_records": (WARN, "data", "cases.jsonl: the torn lines are ignored, their cases were measured again"),
    "transport.gate_missed": (FAIL, "transport", "nccl/{point}/ and report.md 'Transport evidence'"),
    "rail.dead": (FAIL, "rails", "report.md 'Rails'; evidence.rails in cases.jsonl, point {point}"),
    "rail.unbalanced": (FAIL, "rails", "report.md 'Rails'; evidence.rails in cases.jsonl, point {point}"),
    "rail.slow": (FAIL, "rails", "report.md 'Rails' (each rail alone); cases.jsonl, points {point} and its sibling"),
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
    "never_ran": "launch.never_ran", "run_interrupted": "run.interrupted", "transport_exit": "transport.gate_missed",
    "launch_incomplete": "launch.failed", "launch_timeout": "launch.timeout", "launch_not_run": "launch.not_run",
    "launch_not_run_dead_path": "launch.not_run_dead_path", "wrong_data": "data.wrong", "case_not_ok": "case.failed",
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
    if any(r["code"] == INTERRUPTED_CODE for r in reasons):
        overall = INCOMPLETE

    def status_of(selected, applies):
        found = _worst({r["severity"] for r in selected})
        return found if found != SKIP else (PASS if applies else SKIP)

    host_rows = []
    dead = {host for r in reasons if r["code"] == PATH_DEAD for host in dead_hosts(r["finding"])}
    for host in hosts:
        row = {"host": host}
        for check in CHECKS:
            # A reason that names no host (a run-wide one) counts on every host.
            selected = [r for r in reasons if r["check"] == check and (not r["hosts"] or host in r["hosts"])]
            row[check] = status_of(selected, applicable.get((host, check)))
        if host in dead:
            row["rails"] = DEAD  # a dead path names this host: its rails carried nothing, whatever else passed
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
    """1 when the run FAILED or is INCOMPLETE, else 0 (warnings never fail a run)."""
    return 1 if verdict["overall"] in NOT_PASSED else 0


def run_verdict(data, cv_gate_pct):
    """The verdict of a run directory (model/run_dir.RunData): its doctor, every anomaly, the repeatability of
    each GPU-timed point (rules/repeat_rule.judge_repeatability), judged per host and point."""
    judged = judge_repeatability(data.records, cv_gate_pct)
    doctor, _problem = load_run_doctor(data.run_dir)
    # A dead path first: what every launch over it met, from all of the run's evidence (rules/dead_paths.py).
    findings = dead_path_findings(data.plan, data.points_state, doctor, data.path_checks, data.manifest.get("env")) \
        + doctor_anomalies(data.run_dir) + find_anomalies(data, cv_gate_pct, judged)
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


# What each stable code means and what to check on the cluster, next to the codes so that docs/verdicts.md (generated
# by render/docs.py, `cclbench docs`) and the rules share one source: code -> (means, check, constants). constants
# name the rules' thresholds as "module.NAME" in rules/ (docs/verdicts.md prints their values). A code in CODES
# without an entry here fails tests/scripts/test_docs.py.
CODE_MEANINGS = {
    "data.wrong": ("A case computed wrong data: received elements differed from the exact expected pattern in a "
                   "checked run (the record's `wrong` counts them).",
                   "The GPU and its links: rerun the point; a GPU that keeps computing wrong data is faulty (ECC, "
                   "Xid in the kernel log, `cclbench doctor`).", ()),
    "data.above_ceiling": ("A bus bandwidth above the physical ceiling of its path: impossible on that hardware, "
                           "so a unit, timing or byte-count error. The ceilings come from each host's own links "
                           "(doctor.json `links`: RDMA port rate, `class/net/IF/speed`, the GPUs' PCIe max link; "
                           "topo_map's port rates fill in): a cross-node point's bound rails' line rates / 8, "
                           "summed, each the lowest of its hosts' ends; a one-node PCIe point's slowest GPU link "
                           "(GT/s x lanes x encoding / 8). Where a rate is unknown there is no ceiling and the "
                           "report says why; NVLink, emulated ranks and the MPI backend are not checked.",
                           "The topology (NVLink where none was expected?), the point's rails and their rates in "
                           "doctor.json `links`, the build.",
                           ("ceilings.BITS_PER_BYTE", "ceilings.PCIE_128B130B_FROM_GTS",
                            "ceilings.PCIE_FLIT_FROM_GTS")),
    "case.failed": ("A case ended failed or in error (its record's status and reason say why).",
                    "The reason in the record and the point's output in run.log.", ()),
    "case.missing": ("A launch ended without a record for some of its planned cases.",
                     "run.log for the launch: a crash, a timeout or a killed rank.", ()),
    "launch.never_ran": ("A planned launch never ran: the run stopped early (a failed sanity pass stops "
                         "everything after it) or was killed without a word (SIGKILL, a lost machine). A run "
                         "stopped by SIGINT or SIGTERM says so instead (`run.interrupted`).",
                         "Fix what stopped the run (the other fails name it), then continue it with "
                         "`cclbench baseline --resume RUN_ID`.", ()),
    "run.interrupted": ("The run was stopped by a signal (SIGINT: Ctrl-C; SIGTERM: a job's time limit, a "
                        "scheduler) before its plan completed. The launch it stopped was ended as on any stop and "
                        "its cases measured before the signal are kept; the verdict judges what was measured, and "
                        "this reason names the signal, the launch it stopped mid-way and the launches it left unrun "
                        "(missing, never zeros; their cases are nowhere in the tables). An incomplete baseline is "
                        "no clean bill of health: a fail, whatever was measured, and the run reads `INCOMPLETE (n)` "
                        "(exit 1 as FAILED), not FAILED: it judged only what it reached. `baseline` still exits 130 "
                        "(SIGINT) or 143 (SIGTERM); `run_manifest.json` marks the run and the stopped launch "
                        "`interrupted` and the others `pending`.",
                        "Nothing on the cluster, unless the signal was a time limit the plan does not fit (`cclbench "
                        "plan` estimates it): continue with `cclbench baseline --resume RUN_ID`, which reruns the "
                        "stopped launch and the missing ones and writes a new verdict over this one.", ()),
    "launch.failed": ("A launch exited non-zero or was killed (a rank died, a signal) without being a hang "
                      "(`launch.timeout`) or a transport gate missed.",
                      "run.log for the launch's exit status and the launcher's words.", ()),
    "launch.timeout": ("A launch hung and was ended (exit status `TIMEOUT_EXIT`): coll_perf's watchdog (each phase "
                       "of a case and the whole case, its deadline learned from the run's smaller sizes, `-T` the "
                       "ceiling), the runner's watch on the launch's progress (nothing reported past the latest "
                       "deadline plus a grace: a rank, a node or a one-rank launch frozen whole) or, last, the "
                       "runner's bound on the whole launch, whichever acted. The reason names the point, the case "
                       "and phase, the deadline against the time it ran, the ranks that stopped reporting, the same "
                       "collective's smaller sizes, and the doctor's failed checks for its hosts, failed paths first.",
                       "The case and phase the reason names; the rank and host that went silent first; the doctor's "
                       "findings it quotes (a path MTU mismatch or a rail down hangs NCCL and the MPI backend's TCP "
                       "transport); a stopped or stuck rank (`ps`, `gdb -p`) on the host it names. How the "
                       "deadlines are learned: docs/bring-up.md, 'Nothing hangs by default' (plan/bounds.py, "
                       "bench/core/deadlines.cpp).",
                       ("anomalies.TIMEOUT_EXIT",)),
    "launch.not_run": ("A launch across hosts was not run because the doctor failed a path it would cross "
                       "(`path_mtu`: an MTU mismatch, or a rail down or blocked): it would only hang until its "
                       "bound. Every launch over both ends of such a path that may use that rail is left out (the "
                       "sanity pass and the inter-node points): NCCL's bootstrap and socket transport and the MPI "
                       "backend's TCP transport use every interface they are given, so only a point bound to other "
                       "rails alone (`btl_tcp_if_include`, `NCCL_SOCKET_IFNAME` and the netdevs of the ports "
                       "`NCCL_IB_HCA` selects) still runs, and where that binding cannot be told (no list, an "
                       "exclusion list) the launch counts as using every rail. Launches on one host still run. "
                       "`run_manifest.json` marks it `skipped` with `skipped_by: doctor` and the doctor's finding as "
                       "its reason; it follows the `doctor.fail` that caused it.",
                       "Fix the path the reason quotes, then `cclbench baseline --resume RUN_ID` (the doctor runs "
                       "again); or pass `--run-despite-doctor` to run such launches anyway.",
                       ()),
    "launch.not_run_dead_path": ("A launch was not run because the run's own path check found a path it needs "
                                 "dead (or one of its hosts unreachable): after a launch across hosts ended by a "
                                 "deadline, its watchdog or a failure of its launcher (any exit but "
                                 "`NOT_A_PATH_EXITS`), the runner probed the paths between its hosts again before "
                                 "the next launch over them (the doctor's path MTU probe, bounded to seconds), and "
                                 "this launch would only have waited out its own deadline. Which paths a launch "
                                 "needs is told as for `launch.not_run`; launches on one host and points bound to "
                                 "a live rail alone still run. `run_manifest.json` marks it `skipped` with "
                                 "`skipped_by: path_check` and the check's words as its reason; `path.dead` names "
                                 "the fault.",
                                 "The `path.dead` reason first; fix the path, then `cclbench baseline --resume "
                                 "RUN_ID` (the doctor checks the paths again and the launch runs).",
                                 ("dead_paths.NOT_A_PATH_EXITS",)),
    PATH_DEAD: ("A path between hosts is dead: no echo reply on a rail, even at 576 bytes (or a host the launcher "
                "could not reach to check it). Named first in the verdict, from all of the run's evidence together: "
                "the doctor's path check before any launch (dead from the start), the run's own path check after a "
                "launch across hosts failed (died during the run; the reason names the launch that first met it, "
                "after the last check that found it alive), which rails alone completed, hung or were not run on "
                "its hosts, and the hosts every launch that may have failed on a path shared. What it names: a "
                "node's rail (every checked path of that host on it is dead while other hosts reach each other on "
                "it, or the host's own probe could not send on it), a node whose every rail is dead, a link (two "
                "hosts only: which end cannot be told), a rail dead between every pair of three hosts or more (its "
                "switch, or every host's end). Without any path check, a rail alone that hung while its sibling "
                "alone completed names that rail, its end unknown. The host table's rails column reads `dead` for "
                "the hosts it names (both ends of a link). The launches left out for it are "
                "`launch.not_run_dead_path` (or `launch.not_run` when the doctor found it).",
                "The named host's port, cable and switch port on that rail (`ip -s link`, `ethtool`, the switch's "
                "port state: a port that stopped forwarding keeps the host's carrier up); then `cclbench doctor "
                "--hosts ...` until its path_mtu passes, and `cclbench baseline --resume RUN_ID`.",
                ("dead_paths.NOT_A_PATH_EXITS",)),
    "run.unreadable": ("A file of the run directory could not be read or parsed.",
                       "The file named in the reason (disk full, an interrupted copy).", ()),
    "data.torn_records": ("cases.jsonl held lines cut short by an interrupted append; they are ignored and their "
                          "cases were measured again on resume.",
                          "Nothing, unless it repeats: then the disk or the filesystem.", ()),
    "transport.gate_missed": ("NCCL did not use the transport the gate expected (`--expect-transport`), e.g. "
                              "NET/Socket where NET/IB + GDRDMA was expected: a silent fallback.",
                              "The NCCL log of the point (nccl/), `cclbench doctor` (gdr_module, rdma_port, "
                              "nccl_env).", ()),
    "rail.dead": ("A rail of a host carried almost nothing while its busiest sibling carried the point. Only the "
                  "rails a point is bound to count (its `NCCL_IB_HCA`, NCCL's `NET/Socket : Using` interfaces or "
                  "`NCCL_SOCKET_IFNAME`, the MPI backend's `btl_tcp_if_include`): a point over one rail on purpose "
                  "leaves its sibling idle, and that is no dead rail. Under the MPI backend only the cases from "
                  "16x Open MPI's 64 KiB TCP eager limit are judged: the TCP BTL sends up to that limit, and the "
                  "first fragment of a larger message, over one interface.",
                  "The rail's port, cable and switch port; `ip link`, `ibstat`; the doctor's path_mtu.",
                  ("rails.RAIL_DEAD_RATIO", "rails.RAIL_JUDGED_MIN_BYTES",
                   "anomalies.MPI_STRIPED_EVEN_BYTES")),
    "rail.unbalanced": ("A rail's busiest sibling carried more than the balance ratio times its bytes: the rails "
                        "do not share the point evenly (the rails the point is bound to, and under the MPI backend "
                        "the cases it stripes evenly, as for `rail.dead`).",
                        "The rail's link speed and errors, NCCL_IB_HCA, NCCL_CROSS_NIC.",
                        ("rails.RAIL_IMBALANCE_RATIO", "rails.RAIL_JUDGED_MIN_BYTES",
                         "anomalies.MPI_STRIPED_EVEN_BYTES")),
    "rail.slow": ("A rail measured alone (the plan's single-rail point: `NCCL_IB_HCA==<HCA>`, "
                  "`NCCL_SOCKET_IFNAME==<interface>`, or the MPI backend's `btl_tcp_if_include <interface>`) was "
                  "clearly slower than its sibling alone on the same hosts, at the largest sizes above the "
                  "minimum: GPU times at least the imbalance ratio slower (median over the judged cases) with more "
                  "than half of those cases slower by compare's noise rule and none faster; the MPI backend's host "
                  "times at least its own ratio slower with every judged case slower, at any `--repeat`. Byte "
                  "shares cannot show it: a message is striped evenly over the rails whatever their speed. The "
                  "ratio and each rail's busbw are in the reason; the host named is the one whose line rate for "
                  "that rail is lower where doctor.json knows the rates, else every host of the point.",
                  "That rail's link speed, cable, transceiver and switch port on the hosts named (`ethtool`, "
                  "`ibstat`, doctor.json `links`), its error counters, a rate limit or QoS setting.",
                  ("rails.RAIL_SLOW_MIN_BYTES", "rails.RAIL_SLOW_SIZES", "rails.RAIL_SLOW_MIN_RATIO",
                   "rails.RAIL_SLOW_MPI_RATIO")),
    "rail.unbound": ("A rail the point was bound to (NCCL_IB_HCA) carried no traffic reported for it.",
                     "The point's NCCL_IB_HCA list against the host's ports (`cclbench doctor`, rdma_port).", ()),
    "rail.errors": ("An HCA port's error counters rose during the point.",
                    "The port's cable, transceiver and switch port; its error counters in sysfs.", ()),
    "rail.no_counters": ("A rail's byte counters could not be read while a sibling's were, so its share is unknown "
                         "(null with a reason, never 0).",
                         "The row's reason: the interface name, `--netdevs`, `--sysfs-root`.", ()),
    "rail.not_seen": ("A NET/Socket point had no netdev rows: no counter saw its traffic, so its rails are "
                      "unjudged.",
                      "Pass `--netdevs` or use a coll_perf with netdev rails (schema 1.5).", ()),
    "rail.flag": ("coll_perf flagged a rail (an expected rail without counters, or one below its share).",
                  "evidence.rails.flags of the point; the rail's port.", ()),
    "outlier.link": ("A GPU pair of the P2P matrix below the median of its path class.",
                     "That pair's path: the PCIe switch, the NVLink, ACS/IOMMU (`cclbench doctor`).",
                     ("outliers.LOW_RATIO", "outliers.MIN_GROUP")),
    "outlier.gpu": ("A GPU whose copies (to peers or to and from the host) sit below the other GPUs'.",
                    "That GPU's PCIe link (`cclbench doctor` pcie_link), its slot and riser, its clocks.",
                    ("outliers.LOW_RATIO", "outliers.MIN_GROUP")),
    "outlier.rank": ("A rank that was the slowest in far more iterations than chance and whose mean time sits "
                     "above the other ranks': a straggler.",
                     "That rank's GPU, its CPU binding and NUMA node, its host's load.",
                     ("outliers.STRAGGLER_Z", "outliers.STRAGGLER_EXCESS")),
    "doctor.fail": ("A doctor check failed on a host (the subject and detail say which and why).",
                    "The detail's fix; rerun `cclbench doctor --hosts ...` until it passes.", ()),
    "doctor.warn": ("A doctor check warned on a host: it may slow a benchmark without breaking it.",
                    "The detail; fix it or accept it knowingly.", ()),
    "doctor.unreadable": ("The doctor's result could not be read.",
                          "doctor/ in the run directory; rerun `cclbench doctor`.", ()),
    repeatability.REPEAT_SHIFT: ("One repeat of a point sits off the others on most of its cases: the run drifted "
                                 "(clocks, another job, a thermal event).",
                                 "What else ran on the hosts; the GPUs' clocks and temperatures; rerun.",
                                 ("repeatability.SHIFT_LIMIT_PCT", "repeatability.SHIFT_GATE_FACTOR",
                                  "repeatability.SHIFT_CONSISTENT_FRACTION")),
    repeatability.SYSTEMATIC_SPREAD: ("The median CV over a point's cases is above the limit: the point does not "
                                      "reproduce as a whole.",
                                      "Host load, CPU binding, power and clock settings; rerun.",
                                      ("repeatability.SPREAD_LIMIT_PCT",)),
    repeatability.CASES_ABOVE_GATE: ("More cases without a stable median than chance explains.",
                                     "As for systematic spread: the point is noisier than a healthy one.",
                                     ("repeatability.CASE_GATE_RATE", "repeatability.FALSE_ALARM")),
    repeatability.MANY_CASES_ABOVE_GATE: ("More of a point's cases without a stable median than the healthy noise "
                                          "explains, though not yet a failing count.",
                                          "Host load, CPU binding, clocks; rerun and compare the counts.",
                                          ("repeatability.CASE_GATE_RATE", "repeatability.WARN_FALSE_ALARM")),
    repeatability.MANY_CASES_ABOVE_TARGET: ("More of a point's cases that are not host-bound above the CV target "
                                            "than the healthy noise explains.",
                                            "Host load, CPU binding, clocks; rerun and compare the counts.",
                                            ("repeatability.CASE_TARGET_RATE", "repeatability.WARN_FALSE_ALARM")),
    repeatability.CASE_ABOVE_GATE: ("A single case above the CV target with no stable median (its robust dispersion "
                                    "is above the target too), as the healthy noise explains: a note.",
                                    "Nothing; only more such cases than chance explains warn.",
                                    ("repeatability.MAD_TO_SIGMA",)),
    repeatability.CASE_ABOVE_TARGET: ("A single case above the CV target, one repeat off (its robust dispersion is "
                                      "within the target), as the healthy noise explains: a note.",
                                      "Nothing; only more such cases than chance explains warn.",
                                      ("repeatability.MAD_TO_SIGMA",)),
    repeatability.HOST_BOUND_JITTER: ("Cases whose launch cost exceeds the GPU's time (host-bound) scatter more "
                                      "than the target, each median stable: the launching thread's scheduling "
                                      "shows. A note.",
                                      "Nothing for the network; pin the ranks' CPUs to compare small sizes.",
                                      ("repeat_rule.HOST_BOUND_RATIO", "repeatability.HOST_BOUND_GATE_FACTOR")),
    "env.host_differs": ("A host's ranks ran with a measurement variable (NCCL_*, CUDA_*, UCX_*) other than the run "
                         "recorded, or other than the other hosts.",
                         "The host's shell profile or modules; what the launcher forwards (`-x`, srun's env).", ()),
    "env.rank_differs": ("The ranks of one host disagreed on a measurement variable.",
                         "A wrapper script or per-rank profile on that host.", ()),
    "case.skipped": ("Cases the tool skipped with its reason (not possible here): a note, counted nowhere.",
                     "Nothing; the reason is in each record.", ()),
    "ab.variant_not_measured": ("A forced `--ab` variant produced no measurement (NCCL refused it): an A/B finding, "
                                "not a broken baseline.",
                                "NCCL's WARN line quoted in the report's A/B section.", ()),
}
