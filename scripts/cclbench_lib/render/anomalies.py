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


def netdev_source(origin):
    """The rails table's source text of a row: 'hca', or 'netdev (--netdevs)' / 'netdev (NCCL log)' after the
    host's netdev_rails_from values."""
    if origin is None:
        return "hca"
    names = {"--netdevs": "--netdevs", "nccl_log": "NCCL log"}
    return "netdev (" + (", ".join(names.get(item, item) for item in origin) or "?") + ")"


def _rail_source(item):
    return "hca" if item["source"] == "hca" else netdev_source(item["from"])


def _rail_share(item):
    share = "-" if item["share"] is None else f"{item['share'] * 100:.1f}%"
    left = f"; {item['left_out']} of {item['cases']} case(s) with a null counter left out" if item.get("left_out") else ""
    return (f"{item['host']} {item['rail']} [{_rail_source(item)}] carried {share} of the host's rail bytes "
            f"({item['bytes'] / 1e9:.3f} GB vs {item['busiest']} {item['busiest_bytes'] / 1e9:.3f} GB{left})")


def _rail_dead(item):
    return _rail_share(item) + f": below {item['limit'] * 100:g}% of its busiest sibling, the rail is dead"


def _rail_unbalanced(item):
    return _rail_share(item) + f": {item['busiest']} carried over {item['limit']:g}x as much"


def _points(points):
    return f"{len(points)} point(s) ({points[0]}" + (f" and {len(points) - 1} more" if len(points) > 1 else "") + ")"


def hca_not_applicable_note(points):
    """The rails section's one line for the NET/Socket points with HCA counters or flags (rules/anomalies
    socket_hca_points: [(point, has netdev rows)])."""
    names = [point for point, _ in points]
    return (f"NCCL used NET/Socket between the nodes at {_points(names)}: the HCA counters of the expected rails "
            "do not apply there (no byte of these points went through them), so their flags and balance are not "
            "judged; the netdev rows are judged instead.")


def _not_seen(item):
    return (f"NCCL used NET/Socket between the nodes at {_points(item['points'])} and no netdev rail rows were "
            "recorded: no counter saw these points' traffic, a dead rail would go unseen (coll_perf before schema "
            "1.5, or NCCL's 'NET/Socket : Using' line not found; name the interfaces with coll_perf --netdevs)")


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
    "rail.dead": ("rail dead", _rail_dead),
    "rail.unbalanced": ("rail imbalance", _rail_unbalanced),
    "rail.no_counters": ("rail counters missing", lambda i: f"{i['host']} {i['rail']} [{_rail_source(i)}]: no counter "
                         f"read in any case ({'; '.join(i['reasons']) or 'no reason given'})"),
    "rail.not_seen": ("rails not seen", _not_seen),
    "unreadable": ("unreadable result", lambda i: i["problem"]),
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
