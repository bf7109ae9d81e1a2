"""A `cclbench screen` job's coll_perf -J document as the values the screen's rules judge.

point_values(document, large, small, rails) -> {"busbw_gbps", "small_time_us", "transport", "rail_bytes", "reason"}:
  busbw_gbps: the large size's bus bandwidth (its record's status ok) at its median iteration: the record's
      busbw_gbps (from time_us.mean) x time_us.mean / time_us.p50, the same bytes over the median time, so that
      one scheduling hiccup on a shared node does not move it (None when p50 is missing; a record whose
      bandwidth comes from another time, bandwidth_from, keeps its own);
  small_time_us: the small size's median time (time_us.p50: one scheduling hiccup on a shared node does not
      move it), else None (small None: a point of the large size alone, no small time and no reason for it);
  transport: the document's transport evidence (NCCL's own log), or {"backend": "mpi", "reason"} where there is
      no NCCL communicator;
  rail_bytes: {host: {rail: tx + rx bytes}} during the large size, from the record's rail evidence: netdev
      rails (schema 1.5 netdev_rails rows; before it, the --all-netdevs list) for rails named as interfaces
      (eth0), HCA port counters for rails named as ports (mlx5_0:1), every netdev rail when none is named;
      a rail with no counter has no entry (missing is not 0);
  reason: why a value is None (the record's reason or status; at one rank the record's busbw_reason), else None.

job_point(kind, ranks, found): those values as the job judges them (a rail point at its large size alone, a one-rank
intra-node point by its small time): the screen calls a job failed where a reason stays.
"""

import math


def _positive(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _cases(document):
    cases = document.get("cases") if isinstance(document, dict) else None
    return [case for case in cases if isinstance(case, dict)] if isinstance(cases, list) else []


def _case_at(document, size):
    for case in _cases(document):
        if case.get("bytes") == size and case.get("in_place") is not True:
            return case
    return None


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def rail_bytes(case, rails):
    """{host: {rail: bytes}} of one case record for the rails named (see the module docstring); rails None: every
    netdev rail the record lists (coll_perf found them in NCCL's NET/Socket line), no HCA port."""
    evidence = ((case or {}).get("evidence") or {}).get("rails") or {}
    found = {}
    for node in evidence.get("nodes") or []:
        if not isinstance(node, dict) or not isinstance(node.get("host"), str):
            continue
        counts = {}
        for row in node.get("netdev_rails") or []:  # schema 1.5: the interfaces that are rails on this host
            if isinstance(row, dict) and isinstance(row.get("rail"), str) and (rails is None or row["rail"] in rails):
                total = _count(row.get("total_bytes"))
                if total is not None:
                    counts[row["rail"]] = total
        for netdev in node.get("netdevs") or []:  # before 1.5 (--all-netdevs): every interface, the rails picked here
            if isinstance(netdev, dict) and rails is not None and netdev.get("name") in rails and \
                    netdev["name"] not in counts:
                tx, rx = _count(netdev.get("tx_bytes")), _count(netdev.get("rx_bytes"))
                if tx is not None and rx is not None:
                    counts[netdev["name"]] = tx + rx
        for port in node.get("ib_ports") or []:
            if not isinstance(port, dict):
                continue
            label = port.get("rail") or f"{port.get('hca')}:{port.get('port')}"
            total = _count(port.get("total_bytes"))
            if rails is not None and label in rails and total is not None:
                counts[label] = total
        if counts:
            found[node["host"]] = counts
    return found or None


def point_values(document, large_bytes, small_bytes, rails=()):
    large, small = _case_at(document, large_bytes), _case_at(document, small_bytes)
    reasons = []
    busbw = large.get("busbw_gbps") if large and large.get("status") == "ok" else None
    times = (large or {}).get("time_us") or {}
    if _positive(busbw) and large.get("bandwidth_from", "time_us.mean") == "time_us.mean":
        if _positive(times.get("mean")) and _positive(times.get("p50")):
            busbw = busbw * times["mean"] / times["p50"]
        else:
            busbw = None  # no median time: not the quantity the fleet's other pairs report
            reasons.append(f"{large_bytes} B: no median time (time_us.p50)")
    elif not _positive(busbw):
        busbw = None
        if large and large.get("status") == "ok" and large.get("busbw_reason"):
            reasons.append(f"{large_bytes} B: no bus bandwidth: {large['busbw_reason']}")  # one rank: none by definition
        else:
            reasons.append(f"{large_bytes} B: " + (f"status {large.get('status')}: {large.get('reason')}" if large
                                                  else "no record"))
    time_us = (small.get("time_us") or {}).get("p50") if small and small.get("status") == "ok" else None
    if small_bytes is None:
        time_us = None
    elif not _positive(time_us):
        time_us = None
        reasons.append(f"{small_bytes} B: " + (f"status {small.get('status')}: {small.get('reason')}" if small
                                              else "no record"))
    transport = document.get("transport") if isinstance(document, dict) else None
    if not isinstance(transport, dict):
        transport = {"backend": (large or small or {}).get("backend"),
                     "reason": document.get("transport_reason") if isinstance(document, dict) else None}
    return {"busbw_gbps": busbw, "small_time_us": time_us, "transport": transport,
            "rail_bytes": rail_bytes(large, set(rails) if rails else None),
            "reason": "; ".join(reasons) if reasons else None}


def job_point(kind, ranks, found):
    """A screen job's point_values as its job judges them: a rail point (judged at the large size) and a one-rank
    intra-node point (no link crossed: no bus bandwidth by definition, its small time is what it measures) are not
    failed for the value they do not have; the reason stays where a value they need is missing."""
    if kind == "rail" and found["busbw_gbps"] is not None and found["small_time_us"] is None:
        # its small size (run first, for the learned watchdog) is judged against its sibling's when it has one
        return dict(found, reason=None)
    if kind == "intra" and ranks == 1 and found["busbw_gbps"] is None and found["small_time_us"] is not None:
        return dict(found, reason=None)
    return found
