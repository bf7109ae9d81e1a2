#!/usr/bin/env python3
"""coll_perf on the MPI backend (no GPU): the -J document carries the run manifest (allowlisted
environment only), every rank's binding record, a null transport section with its reason, and
per-case rail counters read from a fake two-rail sysfs tree (--sysfs-root) - or null with a reason
when the tree is missing.

usage: coll_perf_evidence_mpi.py MPIEXEC COLL_PERF SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys


def run(mpiexec, coll_perf, work, name, extra, env):
    out = os.path.join(work, name + ".json")
    argv = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "2", coll_perf, "--backend", "mpi",
            "--coll", "all_reduce", "-b", "8K", "-e", "16K", "-f", "2", "-n", "2", "-w", "1", "--quiet",
            "-J", out] + extra
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return proc, out


def check(condition, message, proc=None):
    if not condition:
        if proc is not None:
            sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("FAIL: " + message)


def main():
    mpiexec, coll_perf, source, work = sys.argv[1:5]
    sys.path.insert(0, os.path.join(source, "scripts"))
    from cclbench_lib.model.records import with_defaults  # schema 1.3 leaves empty rail arrays out
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sysfs = os.path.join(source, "tests", "data", "evidence", "sysfs", "two_rails_after")
    env = dict(os.environ)
    env.update({"CCLBENCH_CANARY_SECRET": "xyz-canary-771", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1",
                "NCCL_FAKE_TOKEN": "tok-canary-552", "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})

    proc, out = run(mpiexec, coll_perf, work, "rails", ["--sysfs-root", sysfs], env)
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode}", proc)
    check("transport: not applicable (MPI backend" in proc.stdout, "no transport line on stdout", proc)
    text = open(out, encoding="utf-8").read()
    check("xyz-canary-771" not in text and "CCLBENCH_CANARY_SECRET" not in text, "a non-allowlisted variable leaked")
    check("tok-canary-552" not in text, "a secret-looking NCCL_ variable's value leaked")
    doc = json.loads(text)
    manifest = doc["manifest"]
    check(manifest["environment"].get("NCCL_FAKE_TOKEN") == "<redacted>", "NCCL_FAKE_TOKEN not redacted")
    check(manifest["environment"].get("NCCL_IB_HCA") == "=mlx5_0:1,mlx5_3:1", "NCCL_IB_HCA missing from the manifest")
    check(isinstance(manifest["versions"]["mpi"], str) and manifest["versions"]["mpi"], "no MPI library version")
    check(manifest["versions"]["hwloc_api"], "no hwloc version")
    check(len(manifest["hostnames"]) >= 1 and manifest["world_size"] == 2, "hostnames/world_size")
    check(manifest["argv"][-2:] == ["--sysfs-root", sysfs], "argv not recorded")
    check(doc["transport"] is None and "MPI backend" in doc["transport_reason"], "transport not null with a reason")
    check(sorted(b["rank"] for b in doc["bindings"]) == [0, 1], "bindings: one record per rank expected")
    check(all("cpu_binding" in b for b in doc["bindings"]), "binding records lack cpu_binding")
    check(len(doc["cases"]) == 4, "4 cases expected")
    check("all traffic" in doc["notes"]["rails"], "rails note missing from the document's notes")
    check(doc["rails_options"]["expected_rails"] == ["mlx5_0:1", "mlx5_3:1"], "expected rails from NCCL_IB_HCA")
    for case in map(with_defaults, doc["cases"]):
        rails = case["evidence"]["rails"]
        check("note" not in rails, "constant rails note repeated per case")
        check(len(rails["nodes"]) == len(manifest["hostnames"]), "one rail entry per node expected")
        node = rails["nodes"][0]
        ports = {p["rail"]: p for p in node["ib_ports"]}
        check(set(ports) >= {"mlx5_0:1", "mlx5_3:1"}, f"rails {sorted(ports)}")
        for rail in ("mlx5_0:1", "mlx5_3:1"):
            # A static tree: the counters did not move, a real 0 (not missing).
            check(ports[rail]["xmit_bytes"] == 0 and ports[rail]["rcv_bytes"] == 0, f"{rail} delta not 0")
        check(node["imbalanced"] is None and "no bytes moved" in node["imbalance_reason"], "imbalance reason")
        # A static tree: every interface moved 0 bytes, so none is listed, each is counted.
        check(node["netdevs"] == [] and node["netdevs_zero_omitted"] >= 2, "zero-delta netdevs listed by default")

    # Missing sysfs: counters are null with a reason, the run still succeeds.
    proc, out = run(mpiexec, coll_perf, work, "no_sysfs", ["--sysfs-root", os.path.join(work, "no_such_sysfs")], env)
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode} without sysfs", proc)
    doc = json.load(open(out, encoding="utf-8"))
    node = doc["cases"][0]["evidence"]["rails"]["nodes"][0]
    check(node["ib_reason"] and node["rails_total_bytes"] is None, "missing sysfs: ib_reason expected")
    check(node["imbalanced"] is None and node["imbalance_reason"], "missing sysfs: imbalance null with a reason")

    # An expectation with the MPI backend has no evidence: the gate fails (exit 3) after writing.
    proc, out = run(mpiexec, coll_perf, work, "gate", ["--expect-transport", "inter=NET/Socket"], env)
    check(proc.returncode == 3, f"expected exit 3 with --expect-transport on MPI, got {proc.returncode}", proc)
    check("no NCCL evidence" in proc.stderr, "gate message missing", proc)
    check(json.load(open(out, encoding="utf-8"))["status"] == "complete", "results not written before the gate")

    # A bad spec is a usage error before anything runs.
    proc, out = run(mpiexec, coll_perf, work, "bad_spec", ["--expect-transport", "inter=RDMA"], env)
    check(proc.returncode == 2 and "unknown transport 'RDMA'" in proc.stderr, "bad spec not a usage error", proc)
    # --tuning-from attaches a probe's choice per case id; a case the probe lacks is null with a reason.
    probe = os.path.join(work, "probe.json")
    with open(probe, "w", encoding="utf-8") as handle:
        json.dump({"schema_version": "1.0.0", "kind": "tuning_probe", "nccl_version": "2.28.9", "cases": [
            {"case_id": "all_reduce.float.sum.out.8K", "tuning": {"collective": "AllReduce", "bytes": 8192,
             "algorithm": "RING", "protocol": "LL", "matched_by": "size", "source": "h.1.log:9"}},
            {"case_id": "all_reduce.float.sum.in.8K", "tuning": None, "reason": "no TUNING line"}]}, handle)
    proc, out = run(mpiexec, coll_perf, work, "tuning_from", ["--tuning-from", probe], env)
    check(proc.returncode == 0, f"--tuning-from exited {proc.returncode}", proc)
    cases = {c["case_id"]: c["evidence"] for c in json.load(open(out, encoding="utf-8"))["cases"]}
    check(cases["all_reduce.float.sum.out.8K"]["tuning"]["algorithm"] == "RING", "tuning not attached")
    check(cases["all_reduce.float.sum.in.8K"]["tuning"] is None and
          cases["all_reduce.float.sum.in.8K"]["tuning_reason"] == "no TUNING line", "probe's reason not kept")
    check(cases["all_reduce.float.sum.out.16K"]["tuning"] is None and
          "not in the probe file" in cases["all_reduce.float.sum.out.16K"]["tuning_reason"], "missing case reason")
    proc, _ = run(mpiexec, coll_perf, work, "tuning_bad", ["--tuning-from", out], env)
    check(proc.returncode == 2 and "is not a coll_perf --tuning-probe file" in proc.stderr, "bad probe file accepted", proc)
    proc, _ = run(mpiexec, coll_perf, work, "probe_with_j", ["--tuning-probe", probe], env)
    check(proc.returncode == 2 and "--tuning-probe writes no performance records" in proc.stderr,
          "--tuning-probe with -J accepted", proc)
    # No --backend and no GPU visible (CUDA_VISIBLE_DEVICES empty; or a build without CUDA): coll_perf falls back to
    # the MPI backend by itself, and says so in the console, the document and every record (issue 37).
    fallback = os.path.join(work, "fallback.json")
    proc = subprocess.run([coll_perf, "--coll", "all_reduce", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1", "--quiet",
                           "-J", fallback], env=dict(env, CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True,
                          timeout=300)
    check(proc.returncode == 0, f"the automatic fallback exited {proc.returncode}", proc)
    doc = json.load(open(fallback, encoding="utf-8"))
    note = doc.get("backend_note") or ""
    check(note.endswith(": running the MPI backend on host memory"), f"no backend_note in -J: {note!r}", proc)
    check(note.startswith("built without CUDA/NCCL") or "CUDA sees no device: CUDA_VISIBLE_DEVICES is empty" in note,
          f"the note does not say why: {note!r}", proc)
    check(f"coll_perf: note: {note}" in proc.stderr, "the console does not say which backend ran", proc)
    check(doc["cases"] and all(case["backend"] == "mpi" for case in doc["cases"]), "records do not say mpi", proc)
    proc, _ = run(mpiexec, coll_perf, work, "told", [], dict(env, CUDA_VISIBLE_DEVICES=""))
    check("backend_note" not in json.load(open(os.path.join(work, "told.json"), encoding="utf-8")),
          "--backend mpi chose nothing: no note", proc)
    # Every document written above validates against the schema.
    validator = os.path.join(source, "tests", "tools", "validate_json.py")
    schema = os.path.join(source, "results_schema", "coll_perf.schema.json")
    documents = [os.path.join(work, n + ".json") for n in ("rails", "no_sysfs", "gate", "tuning_from", "fallback")]
    proc = subprocess.run([sys.executable, validator, schema] + documents, capture_output=True, text=True)
    check(proc.returncode == 0, "schema validation failed", proc)
    print("ok: manifest (allowlist), bindings, transport null, rails, gate without evidence")


if __name__ == "__main__":
    main()
