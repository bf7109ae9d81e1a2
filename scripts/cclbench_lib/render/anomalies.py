"""The anomaly table's rows, (kind, where, detail), from the findings of rules/anomalies.py and rules/doctor.py."""

from ..base.values import format_size
from ..rules import repeatability


def _never_ran(item):
    names = item["names"]
    return ("launches never ran", names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else ""),
            f"{len(names)} planned launch(es) did not run (the run stopped early; resume it with "
            "cclbench baseline --resume RUN_ID)")


def _names(names, limit=12):
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _interrupted(item):
    stopped, names = item.get("stopped") or [], item.get("names") or []
    who = f"{item['signal']} stopped the run" if item.get("signal") else "the run was interrupted"  # no signal recorded
    detail = (f"{who} before its plan completed: {item.get('launches_complete', 0)} of "
              f"{item.get('launches_planned', 0)} planned launch(es) complete")
    if stopped:
        detail += f"; stopped mid-way (its cases measured before the signal are kept): {_names(stopped)}"
    if names:
        detail += f"; not run: {_names(names)}"
    return ("run interrupted", "-", detail + "; resume it with cclbench baseline --resume RUN_ID")


def _missing(item):
    missing = item["missing"]
    shown = ", ".join(f"{c} {format_size(s)}" for c, s in missing[:6])
    more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
    return f"{len(missing)} planned case(s) absent: {shown}{more}"


def _above(item):
    count = f"{item['cases']} case(s), worst " if item["cases"] > 1 else ""
    return (f"{count}{item['case_id']}: busbw {item['busbw']:.2f} GB/s > {item['ceiling']:.0f} GB/s "
            f"({item['why']})")


def _shift(item):
    return (f"repeat {item['repeat']} off the others' median by {item['shift_pct']:+.1f}% (limit "
            f"{item['limit_pct']:.1f}%), in that direction on {item['consistent_fraction'] * 100:.0f}% of "
            f"{item['cases']} cases (at least {item['consistent_limit'] * 100:.0f}%)")


def _spread(item):
    return f"median CV {item['median_cv_pct']:.2f}% over its {item['cases']} cases (limit {item['limit_pct']:g}%)"


def _count_above(item):
    return (f"{item['count']} of {item['cases']} cases above the gate with no stable median; chance explains fewer "
            f"than {item['limit']} (P < {item['false_alarm']:g} at a rate of {item['rate']:g} per case)")


def _worst_case(item):
    more = f" (worst of {item['count']})" if item["count"] > 1 else ""
    return (f"{item['worst']}{more}: CV {item['worst_cv_pct']:.2f}%, robust dispersion {item['worst_robust_pct']:.2f}% "
            "across repeats")


def _chance(item, what):
    """A count of single cases against the binomial tail of their healthy rate (rules/repeatability.py)."""
    return (f"{item['count']} of {item['cases']} {what}; the healthy noise explains up to {item['limit'] - 1} "
            f"(a rate of {item['rate']:g} a case; {item['limit']} or more happen with P < {item['false_alarm']:g})")


def _many(what):
    return lambda item: f"{_chance(item, what)}; {_worst_case(item)}"


def _within_chance(what):
    return lambda item: f"{_worst_case(item)}; {_chance(item, what)}"


def _jitter(item):
    return (f"{_worst_case(item)}; {item['count']} of {item['cases']} host-bound cases (the host's launch pace shows "
            "in their times), each with a stable median")


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


def _gbps(value):
    return "-" if value is None else f"{value:.3g} GB/s"


def _rail_slow(item):
    """A rail alone clearly slower than its sibling alone (rules/rails.judge_slow_rails), in words from its own
    numbers and the rule's constants."""
    sizes = [format_size(size) for size in item["sizes"]]
    span = sizes[0] if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    if item["host_timed"]:
        rule = (f"limit {item['limit']:g}x with every case slower: MPI backend, both rails measured by the same "
                "hosts in the same run")
    else:
        rule = (f"limit {item['limit']:g}x and {item['slower']} of {item['cases']} case(s) slower beyond the noise "
                f"band of compare")
    if item.get("host_named_by"):
        where = f"on {', '.join(item['hosts'])} (its {item['host_named_by']} is below the other hosts')"
    else:
        where = "on one of " + ", ".join(item["hosts"]) + " (the counters cannot tell which end)"
    return (f"{item['rail']} alone ({item['where']}): {item['ratio']:.1f}x slower than {item['sibling']} alone "
            f"({item['sibling_point']}), median over {item['cases']} case(s) at {span} (busbw at {sizes[-1]} "
            f"{_gbps(item['busbw_gbps'])} vs {_gbps(item['sibling_busbw_gbps'])}); {rule}; the slow rail is "
            f"{item['rail']} {where}")


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


def rail_errors_text(rail, count, counters):
    """One rail's error counter increments in words, each counter named: 'mlx5_3:1: 7 error counter increment(s)
    (port_rcv_errors +7)'."""
    named = ", ".join(f"{name} +{value:g}" for name, value in sorted((counters or {}).items()))
    return f"{rail}: {count:g} error counter increment(s)" + (f" ({named})" if named else "")


def _dead_path(item):
    """A dead path (rules/dead_paths.dead_path_findings) in words: what it names, since when, the evidence."""
    rails = ", ".join(item.get("rails") or [])
    hosts = item.get("hosts") or []
    kind = item.get("kind")
    if kind == "node":
        what = f"{hosts[0]} {rails}: no echo reply on {'it' if len(item['rails']) == 1 else 'them'} from any host"
        if item.get("alive_rails"):
            what += f" ({', '.join(item['alive_rails'])} alive)"
    elif kind == "link":
        what = (f"{' - '.join(hosts)} {rails}: no echo reply between them; which end is dead cannot be told (no "
                "third host reaches either on it)")
    elif kind == "rail":
        what = f"{rails}: dead between every pair of {', '.join(hosts)} (the rail's switch, or every host's end)"
        if item.get("basis") == "rails_alone":
            what = (f"{rails} between {', '.join(hosts)}: it hung alone while its sibling alone completed; no path "
                    "check ran, so which host's end is not known")
    else:
        what = f"{hosts[0] if hosts else '?'}: the launcher could not reach it to check its paths"
    if item.get("source") == "doctor":
        when = "dead from the start: the doctor's path check found it before any launch"
    elif item.get("found_after"):
        alive = "the doctor found it alive, " if item.get("was_alive") and not item.get("alive_after") else \
            (f"a check after {item['alive_after']} found it alive, " if item.get("alive_after") else "")
        when = f"died during the run: {alive}the path check after {item['found_after']} found it dead"
    else:
        when = "met during the run"
    if item.get("first_met"):
        when += f"; {item['first_met']} first met it"
    parts = [what, when]
    if item.get("details"):
        quoted = "; ".join(item["details"][:2])
        parts.append(f"the check: {quoted}" + (f" (and {len(item['paths']) - 2} more path(s))"
                                               if len(item.get("paths") or []) > 2 else ""))
    alone = item.get("rails_alone") or {}
    if alone:
        parts.append("each rail alone: " + ", ".join(f"{rail} {outcome}" for rail, outcome in sorted(alone.items())))
    if item.get("shared_by_failed") and item.get("first_met"):
        parts.append(f"every launch that failed as a dead path fails ran on {', '.join(item['shared_by_failed'])}")
    if item.get("not_run"):
        parts.append(f"{len(item['not_run'])} launch(es) not run for it: {_names(item['not_run'], 6)}")
    return "; ".join(parts)


# code: (kind, detail text)
DETAILS = {
    "path.dead": ("dead path", _dead_path),
    "launch_not_run_dead_path": ("launch not run (dead path)", lambda i: f"{i['kind']}: {i['reason']}"),
    "transport_exit": ("transport mismatch", lambda i: i["reason"] or "transport expectation failed"),
    "launch_incomplete": ("launch not complete",
                          lambda i: f"{i['kind']}: {i['status']}" + (f": {i['reason']}" if i["reason"] else "")),
    "launch_timeout": ("launch hung (watchdog or bound)",
                       lambda i: f"{i['kind']}: {i['status']}" + (f": {i['reason']}" if i["reason"] else "")),
    "launch_not_run": ("launch not run (doctor)", lambda i: f"{i['kind']}: {i['reason']}"),
    "wrong_data": ("wrong data", lambda i: f"{i['case_id']}: {i['wrong']} wrong element(s)"),
    "case_not_ok": ("case not ok", lambda i: f"{i['case_id']}: {i['status']}" + (f" ({i['reason']})" if i["reason"] else "")),
    "cases_skipped": ("cases skipped (not measured)",
                      lambda i: f"{len(i['case_ids'])} case(s), e.g. {i['case_ids'][0]}: {i['reason']}"),
    "transport_record": ("transport mismatch", lambda i: "; ".join(str(p) for p in i["problems"]) or i["message"]
                         or "expectation not met"),
    "missing_cases": ("missing cases", _missing),
    "above_limit": ("above physical limit", _above),
    repeatability.REPEAT_SHIFT: ("repeat shifted (point not reproducible)", _shift),
    repeatability.SYSTEMATIC_SPREAD: ("systematic spread (point not reproducible)", _spread),
    repeatability.CASES_ABOVE_GATE: ("cases above gate (point not reproducible)", _count_above),
    repeatability.MANY_CASES_ABOVE_GATE: ("more cases without a stable median than chance explains",
                                          _many("cases without a stable median")),
    repeatability.MANY_CASES_ABOVE_TARGET: ("more cases above CV target than chance explains",
                                            _many("cases not host-bound above the CV target")),
    repeatability.CASE_ABOVE_GATE: ("case above CV gate, no stable median, within chance",
                                    _within_chance("cases without a stable median")),
    repeatability.CASE_ABOVE_TARGET: ("case above CV target, within chance",
                                      _within_chance("cases not host-bound above the CV target")),
    repeatability.HOST_BOUND_JITTER: ("host-bound jitter", _jitter),
    "rail_errors": ("rail errors", lambda i: rail_errors_text(i["rail"], i["count"], i.get("counters"))),
    "rail_flag": ("rail flag", lambda i: i["flag"]),
    "rail_unbound": ("rail imbalance", lambda i: f"traffic on {i['rail']}, which NCCL_IB_HCA did not bind"),
    "rail_imbalance": ("rail imbalance", _imbalance),
    "rail.dead": ("rail dead", _rail_dead),
    "rail.slow": ("rail slow", _rail_slow),
    "rail.unbalanced": ("rail imbalance", _rail_unbalanced),
    "rail.no_counters": ("rail counters missing", lambda i: f"{i['host']} {i['rail']} [{_rail_source(i)}]: no counter "
                         f"read in any case ({'; '.join(i['reasons']) or 'no reason given'})"),
    "rail.not_seen": ("rails not seen", _not_seen),
    "unreadable": ("unreadable result", lambda i: i["problem"]),
    "env.host_differs": ("host environment differs", _env_host),
    "env.rank_differs": ("rank environment differs", _env_rank),
    "ab.variant_not_measured": ("--ab variant not measured",
                                lambda i: _missing(i) if "missing" in i else f"{i.get('status')}: {i.get('reason')}"),
}


def anomaly_row(item):
    """(kind, where, detail) of one finding."""
    code = item["code"]
    if code == "never_ran":
        return _never_ran(item)
    if code == "run_interrupted":
        return _interrupted(item)
    if code == "outlier":
        return (item["kind"], item["where"], item["detail"])
    if code in ("doctor.fail", "doctor.warn"):
        return (f"doctor {item['check']}" + (" (warning)" if code == "doctor.warn" else ""), item["where"],
                str(item["detail"]))
    if code == "doctor.unreadable":
        return ("unreadable result", item["where"], item["problem"])
    if code not in DETAILS:  # a finding this module has no words for: its code and what it says of itself
        text = item.get("detail") or item.get("message") or item.get("reason") or ""
        return (code, str(item.get("where") or "-"), str(text))
    kind, detail = DETAILS[code]
    return (kind, item["where"], detail(item))


def anomaly_rows(items):
    return [anomaly_row(item) for item in items]
