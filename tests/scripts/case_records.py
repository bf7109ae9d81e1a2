"""Synthetic coll_perf case records for the scripts tests (compare, verdicts, decode): one builder of a
record and one of its repeats, so that the tests agree on what a record holds."""


def case_record(point, case_id, size, time_us, gated_time_us, status="ok", reason=None, backend="nccl", nranks=4,
                emulated=False, wrong=0, **extra):
    """A case record with the keys the scripts read. time_us: the per-iteration statistics object (None for a
    record without a measurement); gated_time_us: the GPU time that busbw and the headline come from.
    extra: further keys (schema_version, iterations, batch_time_us, graph_launches, ...)."""
    record = {"point": point, "case_id": case_id, "collective": case_id.split(".")[0], "requested_bytes": size,
              "status": status, "reason": reason, "backend": backend, "nranks": nranks, "emulated": emulated,
              "in_place": ".in." in case_id, "wrong": wrong, "time_us": time_us, "gated_time_us": gated_time_us,
              "busbw_gbps": 1.0}
    record.update(extra)
    return record


def repeat_records(point, values, build, suffix_single=True):
    """One record per repeat, named as the baseline names them: POINT.rep1, POINT.rep2, ... ; build(name, value)
    makes each. suffix_single=False: a single repeat keeps the bare point name (a --repeat 1 run)."""
    if len(values) == 1 and not suffix_single:
        return [build(point, values[0])]
    return [build(f"{point}.rep{k}", value) for k, value in enumerate(values, 1)]
