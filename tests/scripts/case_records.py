"""Synthetic coll_perf case records for the scripts tests (compare, verdicts, decode): one builder of a
record and one of its repeats, so that the tests agree on what a record holds; and one writer of a finished
run directory from them (manifest and cases.jsonl), for the tests that run `cclbench report` on it."""
import json
import os


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


def write_run_dir(run, plan, records, point_kind=None):
    """A finished baseline's run directory at `run`: run_manifest.json with this plan (every launch complete,
    of kind point_kind or its own) and cases.jsonl with these records. Returns `run`."""
    os.makedirs(run, exist_ok=True)
    manifest = {"schema_version": "1.0.0", "run_id": os.path.basename(run), "status": "complete", "plan": plan,
                "points": {launch["name"]: {"kind": point_kind or launch["kind"], "status": "complete"}
                           for launch in plan},
                "gates": {"cv_gate_pct": 3.0, "repeatability": []}}
    with open(os.path.join(run, "run_manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    with open(os.path.join(run, "cases.jsonl"), "w") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
    return run


def netdev_node(host, bytes_by_rail, origin="--netdevs", flags=()):
    """A node row of evidence.rails (schema 1.5) with netdev rails only, as coll_perf's rail_delta_json writes it:
    bytes_by_rail {interface: total bytes or None (a counter that could not be read)}, tx/rx split in halves; a
    share only when every rail is known and the host moved bytes."""
    rows = []
    for rail, moved in bytes_by_rail.items():
        rows.append({"source": "netdev", "rail": rail, "netdev": rail,
                     "tx_bytes": None if moved is None else moved // 2,
                     "rx_bytes": None if moved is None else moved - moved // 2, "total_bytes": moved, "share": None,
                     "reason": "no such interface under /sys/class/net" if moved is None else None})
    known = [row["total_bytes"] for row in rows]
    total = sum(known) if None not in known else None
    for row in rows:
        if total:
            row["share"] = row["total_bytes"] / total
    return {"host": host, "ib_ports": [], "ib_reason": "no /sys/class/infiniband", "netdev_rails": rows,
            "netdev_rails_from": origin, "netdev_rails_total_bytes": total, "flags": list(flags)}


def rails_evidence(nodes):
    """evidence of a record with these node rows; the record-wide flags are each node's, prefixed with its host
    (as coll_perf's rail observer gathers them)."""
    return {"rails": {"nodes": nodes, "flags": [f"{node['host']}: {flag}" for node in nodes for flag in node.get("flags") or []]}}
