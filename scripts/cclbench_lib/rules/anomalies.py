"""The anomalies a report lists first: repeat gate, ceilings, rail balance, outliers, doctor, failed points."""

from ..base.values import format_size
from ..model.records import point_completeness, was_skipped
from ..model.run_dir import rail_totals
from ..rules import outliers
from ..rules.ceilings import RAIL_IMBALANCE_RATIO, ceiling_for
from ..rules.repeat_rule import repeat_failures


def repeat_anomalies(data, cv_gate):
    """One row per case whose repeats fail the repeat rule (no reproducible median)."""
    rows = []
    for base, case_id, verdict in repeat_failures(data.records, cv_gate):
        rows.append(("CV above gate", base, f"{case_id}: CV {verdict['cv_pct']:.2f}% and robust dispersion "
                         f"{verdict['robust_pct']:.2f}% across {verdict['repeats']} repeats (limit {verdict['limit_pct']:g}%"
                         f"{', host-bound' if verdict['host_bound'] else ''})"))
    return rows


def find_anomalies(data, cv_gate):
    anomalies = []
    plan_by_name = {launch["name"]: launch for launch in data.plan}
    # Launches that did not complete (including transport gate failures).
    never_ran = [name for name, state in data.points_state.items() if state.get("status") == "pending"]
    if never_ran:
        anomalies.append(("launches never ran", never_ran[0] + (f" and {len(never_ran) - 1} more" if len(never_ran) > 1 else ""),
                          f"{len(never_ran)} planned launch(es) did not run (the run stopped early; resume it with "
                          "cclbench baseline --resume RUN_ID)"))
    for name, state in data.points_state.items():
        status = state.get("status")
        if status not in ("complete", "pending", "skipped"):
            kind = state.get("kind") or plan_by_name.get(name, {}).get("kind")
            if state.get("exit_code") == 3:
                anomalies.append(("transport mismatch", name, state.get("reason") or "transport expectation failed"))
            else:
                anomalies.append(("launch not complete", name, f"{kind}: {status}" + (f": {state['reason']}" if state.get("reason") else "")))
    # Wrong data and failed cases. Cases the tool skipped with its reason are not anomalies; they
    # are summed up in one row per point and reason, so a real failure is not buried under them.
    skipped = {}
    for (point, case_id), record in sorted(data.latest.items()):
        wrong = record.get("wrong")
        if isinstance(wrong, (int, float)) and wrong:
            anomalies.append(("wrong data", point, f"{case_id}: {int(wrong)} wrong element(s)"))
        elif was_skipped(record):
            skipped.setdefault((point, record.get("reason") or "no reason given"), []).append(case_id)
        elif record.get("status") != "ok":
            anomalies.append(("case not ok", point, f"{case_id}: {record.get('status')}" +
                              (f" ({record.get('reason')})" if record.get("reason") else "")))
    for (point, reason), case_ids in sorted(skipped.items()):
        anomalies.append(("cases skipped (not measured)", point, f"{len(case_ids)} case(s), e.g. {case_ids[0]}: {reason}"))
    # Transport verdicts recorded by coll_perf itself.
    for name, document in data.raw.items():
        transport = document.get("transport") if isinstance(document, dict) else None
        expectation = transport.get("expectation") if isinstance(transport, dict) else None
        if isinstance(expectation, dict) and expectation.get("passed") is False and \
                data.points_state.get(name, {}).get("exit_code") != 3:
            anomalies.append(("transport mismatch", name, "; ".join(str(p) for p in expectation.get("problems") or [])
                              or expectation.get("message") or "expectation not met"))
    # Missing planned cases.
    for launch in data.coll_launches():
        if data.points_state.get(launch["name"], {}).get("status") == "pending":
            continue  # counted under "launches never ran"
        complete, missing, _failed = point_completeness(data.records, launch)
        if missing:
            shown = ", ".join(f"{c} {format_size(s)}" for c, s in missing[:6])
            more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
            anomalies.append(("missing cases", launch["name"], f"{len(missing)} planned case(s) absent: {shown}{more}"))
    # Physical ceilings.
    above = {}
    for (point, case_id), record in sorted(data.latest.items()):
        busbw = record.get("busbw_gbps")
        if not isinstance(busbw, (int, float)) or isinstance(busbw, bool):
            continue
        launch = plan_by_name.get(point)
        ceiling, why = ceiling_for(data, launch, record)
        if ceiling is not None and busbw > ceiling:
            above.setdefault(point, []).append((busbw / ceiling, case_id, busbw, ceiling, why))
    for point, items in above.items():  # one row per point: the worst case and how many
        _ratio, case_id, busbw, ceiling, why = max(items)
        count = f"{len(items)} case(s), worst " if len(items) > 1 else ""
        anomalies.append(("above physical limit", point,
                          f"{count}{case_id}: busbw {busbw:.2f} GB/s > {ceiling:.0f} GB/s ({why})"))
    # Variation across repeats: the repeat rule (records.repeat_verdict). Per-iteration CV is a column
    # of the repeatability table, never an anomaly on its own; emulated and MPI-backend records never gate.
    anomalies += repeat_anomalies(data, cv_gate)
    # Rails: both rails must carry traffic, symmetric, without error increments.
    per_point = {}
    for (point, _case), record in data.latest.items():
        per_point.setdefault(point, []).append(record)
    for point, records in sorted(per_point.items()):
        launch = plan_by_name.get(point)
        totals, errors, flags = rail_totals(records)
        for rail, count in sorted(errors.items()):
            anomalies.append(("rail errors", point, f"{rail}: {count:g} error counter increment(s)"))
        if launch is not None and launch.get("kind") == "inter":
            for flag in flags[:5]:
                anomalies.append(("rail flag", point, flag))
        if not totals or launch is None or launch.get("kind") != "inter":
            continue
        bound = [h for h in (launch.get("env") or {}).get("NCCL_IB_HCA", "").lstrip("=^").split(",") if h]
        used = {rail: value for rail, value in totals.items() if not bound or rail in bound or rail.split(":")[0] in
                [b.split(":")[0] for b in bound]}
        idle_unbound = [rail for rail, value in totals.items() if rail not in used and value > 0]
        for rail in idle_unbound:
            anomalies.append(("rail imbalance", point, f"traffic on {rail}, which NCCL_IB_HCA did not bind"))
        if len(used) >= 2:
            high, low = max(used.values()), min(used.values())
            if low <= 0 or high / low > RAIL_IMBALANCE_RATIO:
                share = ", ".join(f"{rail} {value / max(sum(used.values()), 1) * 100:.0f}%" for rail, value in sorted(used.items()))
                anomalies.append(("rail imbalance", point, f"rail shares {share} (limit {RAIL_IMBALANCE_RATIO:g}x)"))
    anomalies += outliers.anomaly_rows(data)  # P2P pairs/GPUs, host<->device, straggler rank
    for problem in data.problems:
        anomalies.append(("unreadable result", "-", problem))
    return anomalies
