"""The anomalies a report lists first, as data: {'code', 'where', ...fields} per finding, in the report's order
(launches, cases, transport, missing cases, ceilings, repeats, rails, hosts' environment, outliers, unreadable
files). The codes and
the fields are render/anomalies.py's to put into words."""

from ..model.records import base_point_of, launch_base_point, point_completeness, was_skipped
from ..model.run_dir import rail_bytes_per_host, rail_error_counters, rail_totals, used_sockets
from ..rules import outliers
from ..rules.by_design import unverifiable_by_design
from ..rules.ceilings import ceiling_for, run_link_rates
from ..rules.env_hosts import env_anomalies
from ..rules.rails import RAIL_IMBALANCE_RATIO, bound_entries, judge_host_rails, judge_slow_rails, netdev_binding, sibling_key, single_rail
from ..rules.repeat_rule import judge_repeatability


# The exit status of a launch that hung and was ended: coll_perf's watchdog (-T) or the runner's bound.
TIMEOUT_EXIT = 4


def interruption(data):
    """The run stopped by SIGINT or SIGTERM before its plan completed (the manifest's status 'interrupted', the
    signal in its last invocation): one finding naming the signal, the launches it stopped mid-way and those it
    left unrun (missing, never zeros), or None."""
    if data.manifest.get("status") != "interrupted":
        return None
    invocations = [item for item in data.manifest.get("invocations") or [] if isinstance(item, dict)]
    stopped = [name for name, state in data.points_state.items() if state.get("status") in ("interrupted", "running")]
    not_run = [name for name, state in data.points_state.items() if state.get("status") == "pending"]
    return {"code": "run_interrupted", "signal": invocations[-1].get("signal") if invocations else None,
            "stopped": stopped, "names": not_run, "launches_planned": len(data.points_state),
            "launches_complete": sum(1 for state in data.points_state.values() if state.get("status") == "complete"),
            "launches_stopped": len(stopped), "launches_not_run": len(not_run)}


def launch_anomalies(data):
    """Launches that never ran, did not complete, or failed their transport gate (exit 3). A run stopped by a
    signal says so in one finding (interruption) that names the launches it stopped and left unrun."""
    found = []
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    interrupted = interruption(data)
    never_ran = [name for name, state in data.points_state.items() if state.get("status") == "pending"]
    if interrupted:
        found.append(interrupted)
    elif never_ran:
        found.append({"code": "never_ran", "names": never_ran})
    for name, state in data.points_state.items():
        status = state.get("status")
        if interrupted and name in interrupted["stopped"]:
            continue  # stopped by the signal, not failed: named by the interruption
        if status == "skipped" and state.get("skipped_by") in ("doctor", "path_check"):
            # Left out because the doctor (or the run's own path check after a failed launch) found a path it needs
            # dead: the reason quotes the check's finding.
            found.append({"code": "launch_not_run" if state["skipped_by"] == "doctor" else "launch_not_run_dead_path",
                          "where": name, "reason": state.get("reason"),
                          "kind": state.get("kind") or plan_by_name.get(name, {}).get("kind")})
        elif status not in ("complete", "pending", "skipped"):
            if state.get("exit_code") == 3:
                found.append({"code": "transport_exit", "where": name, "reason": state.get("reason")})
            else:
                # Exit 4: coll_perf's watchdog or the runner's bound ended a hang; the reason names the case.
                found.append({"code": "launch_timeout" if state.get("exit_code") == TIMEOUT_EXIT else "launch_incomplete",
                              "where": name, "status": status, "reason": state.get("reason"),
                              "kind": state.get("kind") or plan_by_name.get(name, {}).get("kind")})
    return found


def case_anomalies(data):
    """Wrong data and failed cases. Cases the tool skipped with its reason are summed up in one finding per point
    and reason, so a real failure is not buried under them; cases no run can verify (rules/by_design.py) are no
    finding at all."""
    found, skipped = [], {}
    for (point, case_id), record in sorted(data.latest.items()):
        wrong = record.get("wrong")
        if isinstance(wrong, (int, float)) and wrong:
            found.append({"code": "wrong_data", "where": point, "case_id": case_id, "wrong": int(wrong)})
        elif was_skipped(record):
            if not unverifiable_by_design(record):  # those are listed once in the report, never a finding
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
        if data.points_state.get(launch["name"], {}).get("status") in ("pending", "skipped"):
            continue  # counted under never_ran, or not run with its reason
        _complete, missing, _failed = point_completeness(data.records, launch)
        if missing:
            found.append({"code": "missing_cases", "where": launch["name"], "missing": missing})
    return found


def ceiling_anomalies(data):
    """busbw above its physical ceiling (rules/ceilings.py): one finding per point, the worst case and how many."""
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    rates = run_link_rates(data)
    above = {}
    for (point, case_id), record in sorted(data.latest.items()):
        busbw = record.get("busbw_gbps")
        if not isinstance(busbw, (int, float)) or isinstance(busbw, bool):
            continue
        ceiling, why = ceiling_for(data, plan_by_name.get(point), record, rates)
        if ceiling is not None and busbw > ceiling:
            above.setdefault(point, []).append((busbw / ceiling, case_id, busbw, ceiling, why))
    found = []
    for point, items in above.items():
        _ratio, case_id, busbw, ceiling, why = max(items)
        found.append({"code": "above_limit", "where": point, "cases": len(items), "case_id": case_id, "busbw": busbw,
                      "ceiling": ceiling, "why": why})
    return found


def repeat_anomalies(data, cv_gate, judged=None):
    """Variation across repeats (rules/repeatability.py through rules/repeat_rule.judge_repeatability): per
    GPU-timed point, its fail reasons (the spread is systematic) and its warnings (single cases), each a finding
    with the rule's own code and severity. Per-iteration CV is a column of the repeatability table, never an
    anomaly; emulated and MPI-backend records are never judged."""
    judged = judge_repeatability(data.records, cv_gate) if judged is None else judged
    return [dict(reason, where=base) for base, verdict in judged.items() for reason in verdict["reasons"]]


def _rail_points(data):
    """(point, launch, records, totals, errors, flags, NCCL used sockets, netdev entries to judge) per point."""
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    per_point = {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    for point, records in sorted(per_point.items()):
        launch = plan_by_name.get(point)
        totals, errors, flags = rail_totals(records)
        sockets, netdev = _netdev_judged(data, point, launch, records)
        yield point, launch, records, totals, errors, flags, sockets, netdev


def socket_hca_points(data):
    """The NET/Socket points whose records carry HCA counters or coll_perf's HCA flags: those counters saw none of
    the point's traffic, so their flags and balance are not judged (said once, in the rails section) and the
    netdev rows are judged instead. [(point, has netdev rows)]."""
    return [(point, bool(netdev)) for point, _launch, _records, totals, _errors, flags, sockets, netdev
            in _rail_points(data) if sockets and (totals or any(_hca_flag(flag) for flag in flags))]


def rail_anomalies(data):
    """Rails: both rails must carry traffic, symmetric, without error increments; per host over the netdev rails
    (rules/rails.py); a NET/Socket point whose traffic no counter saw (no netdev rows) is one finding for the run."""
    found, unseen = [], []
    for point, launch, records, totals, errors, flags, sockets, netdev in _rail_points(data):
        counters = rail_error_counters(records)
        for rail, count in sorted(errors.items()):
            found.append({"code": "rail_errors", "where": point, "rail": rail, "count": count,
                          "counters": counters.get(rail, {})})
        if sockets and not netdev:
            unseen.append(point)
        if launch is not None and launch.get("kind") == "inter":
            for flag in [flag for flag in flags if not (sockets and _hca_flag(flag)) and not (netdev and _netdev_flag(flag))][:5]:
                found.append({"code": "rail_flag", "where": point, "flag": flag})
        # Only the rails this point is bound to: a point over one rail on purpose leaves its sibling idle.
        binding = netdev_binding(launch, data.raw.get(point), records, data.manifest.get("env"))
        found += [dict(finding, where=point) for finding in judge_host_rails(bound_entries(_striped(records, netdev),
                                                                                          binding))]
        if sockets or not totals or launch is None or launch.get("kind") != "inter":
            continue  # over sockets the HCA ports carry none of the point: their balance says nothing
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
    if unseen:
        # Once for the run: no counter saw these points' traffic, so a dead rail there would go unseen.
        found.append({"code": "rail.not_seen", "where": unseen[0], "points": unseen})
    return found


def single_rail_points(data):
    """The inter-node points bound to one rail on purpose (rules/rails.single_rail), as judge_slow_rails takes
    them: one entry per base point with every repeat's records. A point whose binding is chosen at run time (the
    decode points' sweep_fastest) is left out."""
    records_of = {}
    for (point, _case), record in data.latest.items():
        records_of.setdefault(base_point_of(point), []).append(record)
    points, seen = [], set()
    for launch in data.coll_launches():
        base = launch_base_point(launch)
        if launch.get("kind") != "inter" or base in seen or launch.get("binding") or launch.get("decode"):
            continue
        rail = single_rail(launch)
        if rail is None:
            continue
        seen.add(base)
        points.append({"point": base, "rail": rail[0], "source": rail[1], "key": sibling_key(launch),
                       "hosts": list(launch.get("hosts") or []), "records": records_of.get(base, [])})
    return points


def slow_rail_anomalies(data):
    """Each rail alone against its sibling alone (rules/rails.judge_slow_rails): a rail clearly slower fails."""
    return judge_slow_rails(single_rail_points(data), run_link_rates(data)["rails"])


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


def _hca_flag(flag):
    """coll_perf's flags about the HCA counters of the expected rails (rails.cpp): missing counters, a low share."""
    return ("expected rail " in flag and "has no counters" in flag) or "of the bytes on the expected rails" in flag


def _netdev_flag(flag):
    """coll_perf's per-case flag of a low netdev rail: rules/rails.py judges the sum over the point instead."""
    return "(netdev) carried" in flag


# Open MPI's TCP BTL sends a message up to its eager limit (btl_tcp_eager_limit, 64 KiB by default) over one
# interface and stripes only larger ones over all of them: under the MPI backend only those cases can show a rail.
# Even above it the first fragment (up to the eager limit) takes one interface and only the rest is striped, so a
# rail's share is even only from MPI_STRIPED_EVEN_BYTES: at 16x the eager limit that fragment moves a share by at
# most 1/32 (ratio 1.13, under the 1.25 of an unbalanced rail); a healthy pair read 42% / 58% over 128K-512K on
# the virtual cluster.
MPI_TCP_EAGER_LIMIT_BYTES = 64 * 1024
MPI_STRIPED_EVEN_BYTES = 16 * MPI_TCP_EAGER_LIMIT_BYTES


def _striped(records, netdev):
    """The netdev entries to judge: all of them, or under the MPI backend those of the cases from
    MPI_STRIPED_EVEN_BYTES (none: nothing to judge; the table still shows every row)."""
    if not (records and all(record.get("backend") == "mpi" for record in records)):
        return netdev
    large = [record for record in records if (record.get("bytes") or 0) >= MPI_STRIPED_EVEN_BYTES]
    return [entry for entry in rail_bytes_per_host(large) if entry["source"] == "netdev"] if netdev else []


def _netdev_judged(data, point, launch, records):
    """(NCCL used sockets at this point, the netdev entries of rail_bytes_per_host to judge): those of an
    inter-node point, or of a point whose records hold netdev rails of two hosts or more."""
    entries = [entry for entry in rail_bytes_per_host(records) if entry["source"] == "netdev"]
    inter = launch is not None and launch.get("kind") == "inter"
    if not inter and len({entry["host"] for entry in entries}) < 2:
        entries = []
    return inter and used_sockets(data.raw.get(point), records), entries


def find_anomalies(data, cv_gate, judged=None):
    """Every anomaly of a run directory (model/run_dir.RunData), in the report's order. judged: the run's
    judge_repeatability result where the caller has it already."""
    found = (launch_anomalies(data) + case_anomalies(data) + transport_anomalies(data) + missing_case_anomalies(data)
             + ceiling_anomalies(data) + repeat_anomalies(data, cv_gate, judged) + rail_anomalies(data)
             + slow_rail_anomalies(data)
             + host_env_anomalies(data))
    # P2P pairs/GPUs, host<->device, straggler rank: rules/outliers.py gives them as rows already.
    found += [{"code": "outlier", "kind": kind, "where": where, "detail": detail}
              for kind, where, detail in outliers.anomaly_rows(data)]
    found += [{"code": "unreadable", "where": "-", "problem": problem} for problem in data.problems]
    return found
