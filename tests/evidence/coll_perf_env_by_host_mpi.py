#!/usr/bin/env python3
"""coll_perf records the NCCL environment each host's ranks really ran with (coll_perf.schema.json 1.4:
manifest.env_by_host, manifest.env_rank_disagreements). Real coll_perf, MPI backend, real mpirun, 2 ranks:

1. `mpirun -x NCCL_DEBUG=WARN`: every rank has WARN; the host shows it and no rank disagrees.
2. A launcher wrapper that sets NCCL_DEBUG=INFO and NCCL_SOCKET_IFNAME=eth3 on rank 1 only (by
   OMPI_COMM_WORLD_RANK), as a remote host's shell would: the host keeps rank 0's values (NCCL_SOCKET_IFNAME
   null: unset there) and both variables are listed as disagreements with each rank's value.
3. Where this machine allows it (root, unshare --uts), rank 1 in a UTS namespace of its own named
   cclbench-node7: two hosts, each with its own NCCL_DEBUG, no disagreement within a host.
A secret-looking NCCL_ name set on one rank only keeps its name, never its value. Expected values are the
ones the launch sets, written out here. Every document validates against the schema.

usage: coll_perf_env_by_host_mpi.py MPIEXEC COLL_PERF SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys

# Rank 1 only: what a remote host's ranks get when the launching shell's variables do not travel.
RANK1_ENV = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth3 '
             'NCCL_FAKE_TOKEN=tok-canary-913; fi; exec "$0" "$@"')
# Rank 1 only: its own UTS namespace with another host name (and its own NCCL_DEBUG).
RANK1_HOST = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export NCCL_DEBUG=INFO; '
              'exec unshare --uts -- sh -c \'hostname cclbench-node7 && exec "$0" "$@"\' "$0" "$@"; fi; exec "$0" "$@"')


def check(condition, message, proc=None):
    if not condition:
        if proc is not None:
            sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("FAIL: " + message)


def run(mpiexec, coll_perf, work, name, env, wrapper=None):
    out = os.path.join(work, name + ".json")
    launch = ["sh", "-c", wrapper, coll_perf] if wrapper else [coll_perf]
    argv = [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "2", "-x", "NCCL_DEBUG=WARN"] + launch + \
        ["--backend", "mpi", "--coll", "all_reduce", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1", "--quiet", "-J", out]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return proc, out


def manifest_of(path):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return text, json.loads(text)["manifest"]


def main():
    mpiexec, coll_perf, source, work = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # The expectations are exact: no NCCL_/CUDA_/UCX_ variable of the calling environment takes part.
    env = {name: value for name, value in os.environ.items() if not name.startswith(("NCCL_", "CUDA_", "UCX_"))}
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_mpi_yield_when_idle": "1"})
    host = socket.gethostname()
    written = []

    proc, out = run(mpiexec, coll_perf, work, "same", env)
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode}", proc)
    _text, manifest = manifest_of(out)
    check(manifest["env_by_host"] == {host: {"NCCL_DEBUG": "WARN"}}, f"env_by_host {manifest['env_by_host']}")
    check(manifest["env_rank_disagreements"] == [], f"disagreements {manifest['env_rank_disagreements']}")
    written.append(out)

    proc, out = run(mpiexec, coll_perf, work, "rank1", env, RANK1_ENV)
    check(proc.returncode == 0, f"coll_perf (rank 1 environment) exited {proc.returncode}", proc)
    text, manifest = manifest_of(out)
    check("tok-canary-913" not in text, "a secret-looking NCCL_ variable's value leaked")
    check(manifest["env_by_host"] == {host: {"NCCL_DEBUG": "WARN", "NCCL_FAKE_TOKEN": None, "NCCL_SOCKET_IFNAME": None}},
          f"env_by_host {manifest['env_by_host']}")
    expected = [
        {"host": host, "variable": "NCCL_DEBUG", "ranks": [{"rank": 0, "value": "WARN"}, {"rank": 1, "value": "INFO"}]},
        {"host": host, "variable": "NCCL_FAKE_TOKEN",
         "ranks": [{"rank": 0, "value": None}, {"rank": 1, "value": "<redacted>"}]},
        {"host": host, "variable": "NCCL_SOCKET_IFNAME", "ranks": [{"rank": 0, "value": None}, {"rank": 1, "value": "eth3"}]},
    ]
    check(manifest["env_rank_disagreements"] == expected, f"disagreements {manifest['env_rank_disagreements']}")
    check(manifest["environment"].get("NCCL_DEBUG") == "WARN", "manifest.environment stays rank 0's")
    written.append(out)

    hosts_note = "two hosts: skipped (unshare --uts not permitted here)"
    probe = subprocess.run(["unshare", "--uts", "--", "true"], capture_output=True, text=True)
    if probe.returncode == 0:
        proc, out = run(mpiexec, coll_perf, work, "two_hosts", env, RANK1_HOST)
        check(proc.returncode == 0, f"coll_perf (rank 1 on cclbench-node7) exited {proc.returncode}", proc)
        _text, manifest = manifest_of(out)
        check(manifest["env_by_host"] == {host: {"NCCL_DEBUG": "WARN"}, "cclbench-node7": {"NCCL_DEBUG": "INFO"}},
              f"env_by_host {manifest['env_by_host']}")
        check(manifest["env_rank_disagreements"] == [], "one rank per host cannot disagree within its host")
        check(sorted(manifest["hostnames"]) == sorted([host, "cclbench-node7"]), f"hostnames {manifest['hostnames']}")
        written.append(out)
        hosts_note = "two hosts"

    validator = os.path.join(source, "tests", "tools", "validate_json.py")
    schema = os.path.join(source, "results_schema", "coll_perf.schema.json")
    proc = subprocess.run([sys.executable, validator, schema] + written, capture_output=True, text=True)
    check(proc.returncode == 0, "schema validation failed", proc)
    print(f"ok: env_by_host with -x, a rank-specific environment, {hosts_note}")


if __name__ == "__main__":
    main()
