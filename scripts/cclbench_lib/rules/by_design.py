"""Cases that cannot be verified by design, as data: coll_perf skips them itself, with its reason, whenever a
launch asks for them (one --placement covers every collective of a launch), so they are neither an anomaly nor
a warning; the report lists them once. Everything else coll_perf skips stays a finding (rules/anomalies.py).

By design (bench/nccl/nccl_case_support.cpp, bench/mpi/mpi_backend.cpp):
  NCCL backend, more than one rank, results checked: in-place alltoall and sendrecv overwrite data they still
      have to send (NCCL defines no in-place result), so no result can be checked;
  MPI backend: sendrecv has no in-place form, MPI_Bcast no out-of-place one.
"""

from ..model.records import base_point_of, was_skipped


# (backend, collective, in_place, needs more than one rank)
BY_DESIGN = (("nccl", "alltoall", True, True), ("nccl", "sendrecv", True, True),
             ("mpi", "sendrecv", True, False), ("mpi", "broadcast", False, False))


def unverifiable_by_design(record):
    """True for a record coll_perf skipped because the case cannot exist or cannot be checked, whatever the
    machine (BY_DESIGN). Judged from the record's own fields, so runs of any schema version are read alike."""
    if not was_skipped(record):
        return False
    nranks = record.get("nranks")
    many = isinstance(nranks, int) and not isinstance(nranks, bool) and nranks > 1
    for backend, collective, in_place, needs_many in BY_DESIGN:
        if (record.get("backend") or "nccl") == backend and record.get("collective") == collective and \
                bool(record.get("in_place")) == in_place and (many or not needs_many):
            return True
    return False


def by_design_groups(latest):
    """One entry per (collective, placement, reason) over a run's latest records {(point, case_id): record}:
    {'collective', 'placement', 'reason', 'points': [base point, ...], 'cases': n, 'sizes': [bytes, ...]}, in
    collective order; a point's repeats are one point, a case skipped in every repeat one case."""
    groups, seen = {}, set()
    for (name, case_id), record in sorted(latest.items()):
        point = base_point_of(name)
        if (point, case_id) in seen:
            continue
        if not unverifiable_by_design(record):
            continue
        seen.add((point, case_id))
        key = (record.get("collective"), "in-place" if record.get("in_place") else "out-of-place",
               record.get("reason") or "no reason given")
        group = groups.setdefault(key, {"collective": key[0], "placement": key[1], "reason": key[2], "points": [],
                                        "cases": 0, "sizes": []})
        group["cases"] += 1
        if point not in group["points"]:
            group["points"].append(point)
        size = record.get("requested_bytes")
        if isinstance(size, int) and size not in group["sizes"]:
            group["sizes"].append(size)
    return [dict(group, sizes=sorted(group["sizes"])) for _key, group in sorted(groups.items())]
