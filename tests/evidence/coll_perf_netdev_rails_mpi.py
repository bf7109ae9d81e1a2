#!/usr/bin/env python3
"""coll_perf --backend mpi --netdevs (schema 1.5): the real program over MPI's TCP BTL on loopback
records per case and host a netdev rail row (source "netdev") with the interface's byte deltas read
around the case; a named interface that does not exist is null with a reason, never 0; a bad name is
a usage error (exit 2); without --netdevs (and no NCCL log) there is no netdev rail row.

Expected bytes come from the collective, not from the program: an all_reduce of S bytes on 2 ranks
makes each rank send at least S bytes (each ends with a sum over the other's S bytes), so loopback's
tx_bytes over a case (warmup + timed + checked iterations) is at least 2 * S * timed iterations; on
lo every byte sent is also received (rx == tx up to other users of lo on this machine).

usage: coll_perf_netdev_rails_mpi.py MPIEXEC COLL_PERF WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

SIZE = 4 << 20
ITERS = 5


def run(mpiexec, coll_perf, work, name, extra):
    out = os.path.join(work, name + ".json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    argv = [mpiexec, "--oversubscribe", "-np", "2", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
            coll_perf, "--backend", "mpi", "--coll", "all_reduce", "-b", str(SIZE), "-e", str(SIZE),
            "-n", str(ITERS), "-w", "1", "--quiet", "-J", out] + extra
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return proc, out


def check(condition, message, proc=None):
    if not condition:
        if proc is not None:
            sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("FAIL: " + message)


def check_case(case):
    nodes = case["evidence"]["rails"]["nodes"]
    check(len(nodes) == 1, f"one reader per host: {len(nodes)} node rows for 2 ranks on one host")
    node = nodes[0]
    check(node.get("netdev_rails_from") == "--netdevs", "netdev_rails_from: " + str(node.get("netdev_rails_from")))
    rows = node["netdev_rails"]
    check([r["rail"] for r in rows] == ["lo", "nosuch9"], "rows in --netdevs order: " + json.dumps(rows))
    lo, missing = rows
    check(lo["source"] == "netdev" and lo["netdev"] == "lo", "source/netdev: " + json.dumps(lo))
    floor = 2 * SIZE * ITERS
    check(isinstance(lo["tx_bytes"], int) and lo["tx_bytes"] >= floor,
          f"lo tx_bytes {lo['tx_bytes']} below the all_reduce's floor {floor}")
    check(isinstance(lo["rx_bytes"], int) and abs(lo["rx_bytes"] - lo["tx_bytes"]) <= lo["tx_bytes"] * 0.05,
          f"lo rx {lo['rx_bytes']} != tx {lo['tx_bytes']}")
    check(lo["total_bytes"] == lo["tx_bytes"] + lo["rx_bytes"], "total_bytes is not tx + rx")
    check(lo["reason"] is None, "lo has a reason: " + str(lo["reason"]))
    check(missing["tx_bytes"] is None and missing["rx_bytes"] is None and missing["total_bytes"] is None,
          "a missing interface must be null, never 0: " + json.dumps(missing))
    check("no such interface" in (missing["reason"] or ""), "missing interface without its reason: " + json.dumps(missing))
    check(lo["share"] is None and node["netdev_rails_total_bytes"] is None, "a share of an unknown whole")
    check(all(r.get("source") == "hca" for r in node.get("ib_ports", [])), "ib_ports rows without source hca")


def main():
    mpiexec, coll_perf, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if not os.path.exists("/sys/class/net/lo/statistics/tx_bytes"):
        print("SKIP: no /sys/class/net/lo/statistics (needed for the loopback rail)")
        sys.exit(77)

    proc, out = run(mpiexec, coll_perf, work, "lo", ["--netdevs", "lo,nosuch9"])
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode}", proc)
    doc = json.load(open(out, encoding="utf-8"))
    major, minor = (int(part) for part in doc["schema_version"].split(".")[:2])
    check(major == 1 and minor >= 5, "schema_version " + doc["schema_version"] + " (netdev rails need 1.5 or later)")
    check(doc["rails_options"]["netdevs"] == ["lo", "nosuch9"], "rails_options.netdevs: " + str(doc["rails_options"]))
    check(len(doc["cases"]) == 2, "two cases (out-of-place, in-place) expected")
    for case in doc["cases"]:
        check_case(case)

    proc, out = run(mpiexec, coll_perf, work, "only_lo", ["--netdevs", "lo"])
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode}", proc)
    node = json.load(open(out, encoding="utf-8"))["cases"][0]["evidence"]["rails"]["nodes"][0]
    check(node["netdev_rails"][0]["share"] == 1.0 and node["netdev_rails_total_bytes"] == node["netdev_rails"][0]["total_bytes"],
          "one complete rail has share 1: " + json.dumps(node))

    proc, out = run(mpiexec, coll_perf, work, "none", [])
    check(proc.returncode == 0, f"coll_perf exited {proc.returncode}", proc)
    node = json.load(open(out, encoding="utf-8"))["cases"][0]["evidence"]["rails"]["nodes"][0]
    check("netdev_rails" not in node and "netdev_rails_from" not in node, "netdev rails without --netdevs: " + json.dumps(node))

    proc = subprocess.run([coll_perf, "--backend", "mpi", "--netdevs", "eth0,a/b"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    check(proc.returncode == 2 and "error: --netdevs: 'a/b'" in proc.stderr, f"bad name: exit {proc.returncode}", proc)
    print("PASS")


if __name__ == "__main__":
    main()
