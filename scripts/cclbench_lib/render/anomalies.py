"""The anomaly table's rows, (kind, where, detail), from the findings of rules/anomalies.py and rules/doctor.py."""

from ..base.values import format_size


def _never_ran(item):
    names = item["names"]
    return ("launches never ran", names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else ""),
            f"{len(names)} planned launch(es) did not run (the run stopped early; resume it with "
            "cclbench baseline --resume RUN_ID)")


def _missing(item):
    missing = item["missing"]
    shown = ", ".join(f"{c} {format_size(s)}" for c, s in missing[:6])
    more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
    return f"{len(missing)} planned case(s) absent: {shown}{more}"


def _above(item):
    count = f"{item['cases']} case(s), worst " if item["cases"] > 1 else ""
    return (f"{count}{item['case_id']}: busbw {item['busbw']:.2f} GB/s > {item['ceiling']:.0f} GB/s "
            f"({item['why']})")


def _repeat(item):
    verdict = item["verdict"]
    return (f"{item['case_id']}: CV {verdict['cv_pct']:.2f}% and robust dispersion "
            f"{verdict['robust_pct']:.2f}% across {verdict['repeats']} repeats (limit {verdict['limit_pct']:g}%"
            f"{', host-bound' if verdict['host_bound'] else ''})")


def _imbalance(item):
    share = ", ".join(f"{rail} {fraction * 100:.0f}%" for rail, fraction in item["shares"])
    return f"rail shares {share} (limit {item['limit']:g}x)"


def _value(value):
    return "unset" if value is None else f"'{value}'"


def _env_host(item):
    points = item["points"]
    where = f" ({len(points)} points)" if len(points) > 1 else ""
    if item["against"] == "manifest":
        said = f"the run's record (run_manifest.json env, set where cclbench ran, and the point's own) says {_value(item['expected'])}"
    else:
        said = f"the other hosts' ranks ran with {_value(item['expected'])}"
    return f"{item['host']}'s ranks ran with {item['variable']}={_value(item['value'])}{where}; {said}"


def _env_rank(item):
    ranks = ", ".join(f"rank {rank} {_value(value)}" for rank, value in item["ranks"])
    return f"{item['host']}: the ranks disagree on {item['variable']}: {ranks}"


# code: (kind, detail text)
DETAILS = {
    "transport_exit": ("transport mismatch", lambda i: i["reason"] or "transport expectation failed"),
    "launch_incomplete": ("launch not complete",
                          lambda i: f"{i['kind']}: {i['status']}" + (f": {i['reason']}" if i["reason"] else "")),
    "wrong_data": ("wrong data", lambda i: f"{i['case_id']}: {i['wrong']} wrong element(s)"),
    "case_not_ok": ("case not ok", lambda i: f"{i['case_id']}: {i['status']}" + (f" ({i['reason']})" if i["reason"] else "")),
    "cases_skipped": ("cases skipped (not measured)",
                      lambda i: f"{len(i['case_ids'])} case(s), e.g. {i['case_ids'][0]}: {i['reason']}"),
    "transport_record": ("transport mismatch", lambda i: "; ".join(str(p) for p in i["problems"]) or i["message"]
                         or "expectation not met"),
    "missing_cases": ("missing cases", _missing),
    "above_limit": ("above physical limit", _above),
    "repeat_cv": ("CV above gate", _repeat),
    "rail_errors": ("rail errors", lambda i: f"{i['rail']}: {i['count']:g} error counter increment(s)"),
    "rail_flag": ("rail flag", lambda i: i["flag"]),
    "rail_unbound": ("rail imbalance", lambda i: f"traffic on {i['rail']}, which NCCL_IB_HCA did not bind"),
    "rail_imbalance": ("rail imbalance", _imbalance),
    "unreadable": ("unreadable result", lambda i: i["problem"]),
    "env.host_differs": ("host environment differs", _env_host),
    "env.rank_differs": ("rank environment differs", _env_rank),
}


def anomaly_row(item):
    """(kind, where, detail) of one finding."""
    code = item["code"]
    if code == "never_ran":
        return _never_ran(item)
    if code == "outlier":
        return (item["kind"], item["where"], item["detail"])
    if code == "doctor":
        return (f"doctor {item['check']}", item["where"], str(item["detail"]))
    kind, detail = DETAILS[code]
    return (kind, item["where"], detail(item))


def anomaly_rows(items):
    return [anomaly_row(item) for item in items]
