"""The anomalies a report lists first, as data: {'code', 'where', ...fields} per finding, in the report's order
(launches, cases, transport, missing cases, ceilings, repeats, rails, hosts' environment, outliers, unreadable
files). The codes and
the fields are render/anomalies.py's to put into words."""

from ..model.records import point_completeness, was_skipped
from ..model.run_dir import rail_totals
from ..rules import outliers
from ..rules.ceilings import RAIL_IMBALANCE_RATIO, ceiling_for
from ..rules.env_hosts import env_anomalies
from ..rules.repeat_rule import repeat_failures


def launch_anomalies(data):
    """Launches that never ran, did not complete, or failed their transport gate (exit 3)."""
    found = []
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    never_ran = [name for name, state in data.points_state.items() if state.get("status") == "pending"]
    if never_ran:
        found.append({"code": "never_ran", "names": never_ran})
    for name, state in data.points_state.items():
        status = state.get("status")
        if status not in ("complete", "pending", "skipped"):
            if state.get("exit_code") == 3:
                found.append({"code": "transport_exit", "where": name, "reason": state.get("reason")})
            else:
                found.append({"code": "launch_incomplete", "where": name, "status": status, "reason": state.get("reason"),
                              "kind": state.get("kind") or plan_by_name.get(name, {}).get("kind")})
    return found


def case_anomalies(data):
    """Wrong data and failed cases. Cases the tool skipped with its reason are not anomalies; they are summed up
    in one finding per point and reason, so a real failure is not buried under them."""
    found, skipped = [], {}
    for (point, case_id), record in sorted(data.latest.items()):
        wrong = record.get("wrong")
        if isinstance(wrong, (int, float)) and wrong:
            found.append({"code": "wrong_data", "where": point, "case_id": case_id, "wrong": int(wrong)})
        elif was_skipped(record):
            skipped.setdefault((point, record.get("reason") or "no reason given"), []).append(case_id)
        elif record.get("status") != "ok":
            found.append({"code": "case_not_ok", "where": point, "case_id": case_id, "status": record.get("status"),
                          "reason": record.get("reason")})
    for (point, reason), case_ids in sorted(skipped.items()):
        found.append({"code": "cases_skipped", "where": point, "case_ids": case_ids, "reason": reason})
    return found


def transport_anomalies(data):
    """Transport verdicts recorded by coll_perf itself (not already counted as an exit-3 launch)."""
    found = []
    for name, document in data.raw.items():
        transport = document.get("transport") if isinstance(document, dict) else None
        expectation = transport.get("expectation") if isinstance(transport, dict) else None
        if isinstance(expectation, dict) and expectation.get("passed") is False and \
                data.points_state.get(name, {}).get("exit_code") != 3:
            found.append({"code": "transport_record", "where": name, "problems": expectation.get("problems") or [],
                          "message": expectation.get("message")})
    return found


def missing_case_anomalies(data):
    """Planned cases absent from a launch that ran."""
    found = []
    for launch in data.coll_launches():
        if data.points_state.get(launch["name"], {}).get("status") == "pending":
            continue  # counted under never_ran
        _complete, missing, _failed = point_completeness(data.records, launch)
        if missing:
            found.append({"code": "missing_cases", "where": launch["name"], "missing": missing})
    return found


def ceiling_anomalies(data):
    """busbw above its physical ceiling (rules/ceilings.py): one finding per point, the worst case and how many."""
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    above = {}
    for (point, case_id), record in sorted(data.latest.items()):
        busbw = record.get("busbw_gbps")
        if not isinstance(busbw, (int, float)) or isinstance(busbw, bool):
            continue
        ceiling, why = ceiling_for(data, plan_by_name.get(point), record)
        if ceiling is not None and busbw > ceiling:
            above.setdefault(point, []).append((busbw / ceiling, case_id, busbw, ceiling, why))
    found = []
    for point, items in above.items():
        _ratio, case_id, busbw, ceiling, why = max(items)
        found.append({"code": "above_limit", "where": point, "cases": len(items), "case_id": case_id, "busbw": busbw,
                      "ceiling": ceiling, "why": why})
    return found


def repeat_anomalies(data, cv_gate):
    """Variation across repeats: the repeat rule (rules/repeat_rule.py). Per-iteration CV is a column of the
    repeatability table, never an anomaly on its own; emulated and MPI-backend records never gate."""
    return [{"code": "repeat_cv", "where": base, "case_id": case_id, "verdict": verdict}
            for base, case_id, verdict in repeat_failures(data.records, cv_gate)]


def rail_anomalies(data):
    """Rails: both rails must carry traffic, symmetric, without error increments."""
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    found, per_point = [], {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    for point, records in sorted(per_point.items()):
        launch = plan_by_name.get(point)
        totals, errors, flags = rail_totals(records)
        for rail, count in sorted(errors.items()):
            found.append({"code": "rail_errors", "where": point, "rail": rail, "count": count})
        if launch is not None and launch.get("kind") == "inter":
            for flag in flags[:5]:
                found.append({"code": "rail_flag", "where": point, "flag": flag})
        if not totals or launch is None or launch.get("kind") != "inter":
            continue
        bound = [h for h in (launch.get("env") or {}).get("NCCL_IB_HCA", "").lstrip("=^").split(",") if h]
        used = {rail: value for rail, value in totals.items() if not bound or rail in bound or rail.split(":")[0] in
                [b.split(":")[0] for b in bound]}
        for rail in [rail for rail, value in totals.items() if rail not in used and value > 0]:
            found.append({"code": "rail_unbound", "where": point, "rail": rail})
        if len(used) >= 2:
            high, low = max(used.values()), min(used.values())
            if low <= 0 or high / low > RAIL_IMBALANCE_RATIO:
                total = max(sum(used.values()), 1)
                found.append({"code": "rail_imbalance", "where": point, "limit": RAIL_IMBALANCE_RATIO,
                              "shares": [(rail, value / total) for rail, value in sorted(used.items())]})
    return found


def host_env_anomalies(data):
    """Hosts whose ranks ran with another measurement environment than the run recorded, or than the other
    hosts (rules/env_hosts.py), from coll_perf's manifest.env_by_host (schema 1.4; older results hold none)."""
    points = []
    for launch in data.plan:
        document = data.raw.get(launch["name"])
        manifest = document.get("manifest") if isinstance(document, dict) else None
        if isinstance(manifest, dict) and isinstance(manifest.get("env_by_host"), dict):
            points.append((launch["name"], launch.get("env") or {}, manifest["env_by_host"],
                           manifest.get("env_rank_disagreements")))
    return env_anomalies(points, data.manifest.get("env") or {}, data.manifest.get("hosts") or [])


def find_anomalies(data, cv_gate):
    """Every anomaly of a run directory (model/run_dir.RunData), in the report's order."""
    found = (launch_anomalies(data) + case_anomalies(data) + transport_anomalies(data) + missing_case_anomalies(data)
             + ceiling_anomalies(data) + repeat_anomalies(data, cv_gate) + rail_anomalies(data)
             + host_env_anomalies(data))
    # P2P pairs/GPUs, host<->device, straggler rank: rules/outliers.py gives them as rows already.
    found += [{"code": "outlier", "kind": kind, "where": where, "detail": detail}
              for kind, where, detail in outliers.anomaly_rows(data)]
    found += [{"code": "unreadable", "where": "-", "problem": problem} for problem in data.problems]
    return found
