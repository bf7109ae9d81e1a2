#!/usr/bin/env python3
"""coll_perf on GPUs through the whole app (runner, sinks, watchdog), label gpu.

Each check runs real coll_perf processes and asserts what a user sees: exit status, the -J/CSV
records, the console. Without a GPU every check exits 77 (CTest SKIP_RETURN_CODE) with the reason.

  one_rank      1 rank, every collective x dtype x op, both placements: all ok, 0 wrong; fp8 runs
                on sm_90+ and is skipped with a reason below it
  timing_modes  -G 3 (graph replay) and -z 1 (blocking): one sample per iteration, batch time > 0;
                -G: gated time from the collectives-only graph, samples from the instrumented replay
  nccl_flags    -G 2 -m 2 -R 1 -u 3 -x 1 -N 2 -o mulsum,sum on 1 rank, and -G 2 -R 1 -o mulsum on 4
                emulated ranks: 0 wrong, every record says graph_launches/ops_per_launch/registration/
                unalign_elements/cta_policy/cycle; -R 2 either runs or every case is skipped with NCCL's reason
  share_gpu4    mpirun -np 4 --share-gpu on ONE GPU: the four collectives 0 wrong, records marked
                emulated in JSON, CSV and console
  g_path        one process driving every visible GPU (-g N); -g N+1 is a usage error (exit 2)
  rank_per_gpu  mpirun -np N, one rank per GPU (needs 2+ GPUs, else skipped)
  stall         CCLBENCH_TEST_STALL=1:3 -T 10 under mpirun --share-gpu: exit 4, the timeout names
                case/size/rank/host, every rank gone, the 3 finished cases on disk
  memory        -e beyond device memory: buffers reduced with a printed note, the too-large size
                skipped with its reason, the others run

Usage: coll_perf_gpu.py --bin-dir B --mpiexec M --work-dir W --only NAME
Environment: NCCL_NVLS_ENABLE=0 is set when unset (never NVLink multicast); mpirun runs with
--oversubscribe and, for root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM).
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts"))
from cclbench_lib.model.records import with_defaults  # noqa: E402
from coll_perf_runner import (CRASH, SKIP, Failure, alive, base_env, check, coll_perf, descendants, main,  # noqa: E402
                              mpirun_prefix, run_process, work_dir)
from coll_perf_runner import describe as describe_tails  # noqa: E402


def run(cmd, env, timeout):
    # Every -J run also writes its per-iteration samples (records name the side file; load() reads it).
    if "-J" in cmd and "--samples" not in cmd:
        cmd = list(cmd) + ["--samples", cmd[cmd.index("-J") + 1] + ".samples.jsonl"]
    return run_process(cmd, env, timeout)


def mpirun(args, nranks, argv, env):
    """mpirun on this host; the variables that matter are exported explicitly (when set)."""
    return mpirun_prefix(args.mpiexec, nranks, env, ("NCCL_NVLS_ENABLE", "CUDA_VISIBLE_DEVICES",
                                                     "CCLBENCH_TEST_STALL")) + argv


def load(json_path, csv_path=None):
    with open(json_path) as handle:
        document = json.load(handle)
    # Schema 1.3 leaves fields at their default out of records: read them as every reader does.
    document["cases"] = [with_defaults(case) for case in document["cases"]]
    # Per-iteration samples live in the --samples side file that each record names (schema 1.2).
    side_files = {}
    for case in document["cases"]:
        name = case.get("samples_file")
        check(name, f"{case['case_id']}: no samples_file")
        path = os.path.join(os.path.dirname(json_path), name)
        if path not in side_files:
            with open(path) as handle:
                side_files[path] = [json.loads(line) for line in handle if line.strip()]
        lines = [line for line in side_files[path] if line["case_id"] == case["case_id"] and line["point"] == case["point"]]
        check(lines, f"{case['case_id']}: not in {path}")
        case["samples_us"] = lines[-1]["samples_us"]
    rows = None
    if csv_path:
        with open(csv_path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        check(len(rows) == len(document["cases"]), f"CSV has {len(rows)} rows, -J {len(document['cases'])} cases")
    return document, rows


def describe(out, err):
    return describe_tails(out, err, stderr_chars=4000)


# NCCL 2.28 returns ncclInvalidArgument for ncclAvg and PreMulSum on fp8: coll_perf skips those with this reason.
FP8_AVG = r"NCCL rejects (ncclAvg|PreMulSum) on fp8"


def assert_all_ok(document, out, err, allowed_skips=()):
    """Every case ok with 0 wrong, except skips whose reason matches one of allowed_skips."""
    cases = document["cases"]
    check(cases, "no cases recorded\n" + describe(out, err))
    for case in cases:
        if case["status"] == "skipped":
            check(any(re.search(pattern, case["reason"] or "") for pattern in allowed_skips),
                  f"{case['case_id']} skipped: {case['reason']}")
            continue
        check(case["status"] == "ok" and case["wrong"] == 0,
              f"{case['case_id']}: status {case['status']}, wrong {case['wrong']}, reason {case['reason']}")
        check(len(case["samples_us"]) == case["iterations"], f"{case['case_id']}: {len(case['samples_us'])} samples")
        check(case["batch_time_us"] is not None and case["batch_time_us"] > 0, f"{case['case_id']}: batch time")
    check(not CRASH.search(out + err), "crash signs in the output\n" + describe(out, err))


def visible_gpus():
    """How many GPUs CUDA will show (CUDA_VISIBLE_DEVICES honoured), from nvidia-smi."""
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 1
    total = len([line for line in listing.splitlines() if line.startswith("GPU ")])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([item for item in visible.split(",") if item.strip()])
    return max(total, 1)


def first_visible_device():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return visible.split(",")[0].strip()
    return "0"


def one_rank(args):
    work = work_dir(args, "one_rank")
    json_path = os.path.join(work, "out.json")
    code, out, err, elapsed = run([coll_perf(args), "--backend", "nccl", "--coll", "all", "-d", "all", "-o", "all",
                                   "-b", "1K", "-e", "64K", "-f", "64", "-n", "3", "-w", "1", "-c", "1",
                                   "-J", json_path, "--quiet"], base_env(), 900)
    check(code == 0, f"exit {code}\n" + describe(out, err))
    document, _ = load(json_path)
    assert_all_ok(document, out, err, allowed_skips=[r"needs compute capability 9\.0", FP8_AVG])
    cases = document["cases"]
    fp8_skipped = [c for c in cases if c["dtype"].startswith("f8") and c["status"] == "skipped"
                   and not re.search(FP8_AVG, c["reason"] or "")]
    fp8_ran = [c for c in cases if c["dtype"].startswith("f8") and c["status"] == "ok"]
    check(bool(fp8_skipped) != bool(fp8_ran), "fp8 must either run everywhere (sm_90+) or be skipped everywhere")
    collectives = {c["collective"] for c in cases if c["status"] == "ok"}
    check(len(collectives) == 7, f"collectives that ran: {sorted(collectives)}")
    ops = {c["op"] for c in cases if c["status"] == "ok" and c["collective"] == "all_reduce"}
    check(ops == {"sum", "prod", "max", "min", "avg", "mulsum"}, f"all_reduce ops that ran: {sorted(ops)}")
    dtypes = {c["dtype"] for c in cases if c["status"] == "ok"}
    check(len(dtypes) == (12 if fp8_ran else 10), f"dtypes that ran: {sorted(dtypes)}")
    check(all(c["emulated"] is False for c in cases), "a one-rank run is not emulated")
    # Schema 1.4: one rank crosses no link, so busbw is null with its reason (never nccl-tests' 0.00); algbw stays.
    ran = [c for c in cases if c["status"] == "ok"]
    check(all(c["busbw_gbps"] is None and c.get("busbw_reason") == "1 rank: no link is crossed" for c in cases),
          "a one-rank case has a busbw or no busbw_reason")
    check(all(isinstance(c["algbw_gbps"], float) and c["algbw_gbps"] > 0 for c in ran), "a one-rank case lost its algbw")
    return (f"{len(cases)} cases in {elapsed:.0f} s, 0 wrong, fp8 {'ran' if fp8_ran else 'skipped (below sm_90)'}")


def timing_modes(args):
    results = []
    for name, flags in (("graph", ["-G", "3"]), ("blocking", ["-z", "1"]), ("stream", [])):
        work = work_dir(args, "timing_" + name)
        json_path = os.path.join(work, "out.json")
        code, out, err, elapsed = run([coll_perf(args), "--backend", "nccl", "-b", "8K", "-e", "4M", "-f", "8", "-n", "7",
                                       "-w", "2", "-J", json_path] + flags, base_env(), 600)
        check(code == 0, f"{name}: exit {code}\n" + describe(out, err))
        document, _ = load(json_path)
        assert_all_ok(document, out, err)
        for case in document["cases"]:
            check(all(sample > 0 for sample in case["samples_us"]), f"{name} {case['case_id']}: non-positive sample")
            # Bandwidth comes from the gated, uninstrumented time where there is one: the eager loop
            # behind the blocker, or the K replays of the collectives-only graph.
            gated = name in ("stream", "graph")
            check((case["gated_time_us"] is not None) == gated and
                  case["bandwidth_from"] == ("gated_time_us" if gated else "time_us.mean"),
                  f"{name} {case['case_id']}: gated_time_us {case['gated_time_us']}, bandwidth_from {case['bandwidth_from']}")
            check(case["graph_launches"] == (3 if name == "graph" else 0), f"{name} {case['case_id']}: graph_launches")
            check(case["samples_from"] == ("instrumented_graph_replay" if name == "graph" else "per_iteration_events"),
                  f"{name} {case['case_id']}: samples_from {case['samples_from']}")
            source = case["gated_time_us"] if gated else case["time_us"]["mean"]
            check(abs(case["algbw_gbps"] - case["bytes"] / source / 1e3) <= 1e-6 * case["algbw_gbps"] + 1e-9,
                  f"{name} {case['case_id']}: algbw {case['algbw_gbps']} is not bytes / {case['bandwidth_from']}")
        means = [c["time_us"]["mean"] for c in document["cases"] if c["requested_bytes"] == 4 << 20]
        results.append(f"{name}: {len(document['cases'])} cases, 4M mean {min(means):.1f} us")
    return "; ".join(results)


def share_gpu4(args):
    work = work_dir(args, "share_gpu4")
    json_path, csv_path = os.path.join(work, "out.json"), os.path.join(work, "out.csv")
    # One GPU for all four ranks, even on a multi-GPU machine.
    env = base_env(CUDA_VISIBLE_DEVICES=first_visible_device())
    code, out, err, elapsed = run(mpirun(args, 4, [coll_perf(args), "--share-gpu", "-b", "8K", "-e", "512K", "-f", "8",
                                                   "-d", "float,int32,bfloat16,f8e4m3", "-o", "all", "-n", "3", "-w", "1",
                                                   "-T", "120", "-J", json_path, "--csv", csv_path], env), env, 900)
    check(code == 0, f"exit {code}\n" + describe(out, err))
    document, rows = load(json_path, csv_path)
    # In-place alltoall over send/recv cannot be verified (skipped with its reason); fp8 below sm_90.
    assert_all_ok(document, out, err, allowed_skips=[r"in-place AlltoAll", r"needs compute capability 9\.0", FP8_AVG])
    cases = document["cases"]
    check(document["manifest"]["emulated"] is True and document["manifest"]["nranks"] == 4, "manifest not emulated/4 ranks")
    check(all(c["emulated"] is True and c["nranks"] == 4 for c in cases), "a record is not marked emulated")
    check(all(row["emulated"] == "true" for row in rows), "a CSV row is not marked emulated")
    check("EMULATED" in out, "the console table does not say EMULATED\n" + describe(out, err))
    checked = {c["collective"] for c in cases if c["status"] == "ok" and c["wrong"] == 0}
    check(checked == {"all_reduce", "all_gather", "reduce_scatter", "alltoall"}, f"checked collectives: {sorted(checked)}")
    wrong = sum(c["wrong"] or 0 for c in cases)
    return f"{len(cases)} cases on 4 emulated ranks in {elapsed:.0f} s, {wrong} wrong"


def g_path(args):
    gpus = visible_gpus()
    work = work_dir(args, "g_path")
    json_path = os.path.join(work, "out.json")
    code, out, err, _ = run([coll_perf(args), "-g", str(gpus), "-b", "8K", "-e", "8M", "-f", "4", "-n", "5",
                             "-d", "float,half,int8", "-J", json_path], base_env(), 600)
    check(code == 0, f"-g {gpus}: exit {code}\n" + describe(out, err))
    document, _ = load(json_path)
    assert_all_ok(document, out, err, allowed_skips=[r"in-place AlltoAll"] if gpus > 1 else [])
    check(document["manifest"]["nranks"] == gpus, f"nranks {document['manifest']['nranks']}, expected {gpus}")
    # One process, -g N: N communicator ranks cross links, so busbw exists for N > 1 (null with a reason at N = 1).
    for case in (c for c in document["cases"] if c["status"] == "ok"):
        if gpus > 1:
            check(case["busbw_gbps"] is not None and "busbw_reason" not in case, f"-g {gpus}: {case['case_id']} lost busbw")
        else:
            check(case["busbw_gbps"] is None and case.get("busbw_reason"), f"-g 1: {case['case_id']} has a busbw")
    check(("# busbw: - (1 rank" in out) == (gpus == 1), f"-g {gpus}: the busbw reason line\n" + describe(out, err))
    code, out, err, _ = run([coll_perf(args), "-g", str(gpus + 1), "-b", "8K", "-e", "8K"], base_env(), 300)
    check(code == 2, f"-g {gpus + 1}: exit {code}, expected 2\n" + describe(out, err))
    check("only" in err and "visible" in err and re.search(r"host \S+", err), f"-g {gpus + 1}: unclear message\n{err}")
    # It once said "start at most 0 ranks per node"; it must say what to run instead.
    check(f"use -g {gpus} or fewer" in err and "at most 0" not in err, f"-g {gpus + 1}: no remedy in\n{err}")
    return f"-g {gpus}: {len(document['cases'])} cases ok; -g {gpus + 1}: usage error"


def rank_per_gpu(args):
    gpus = visible_gpus()
    if gpus < 2:
        print(f"SKIP: one rank per GPU needs 2 or more visible GPUs (found {gpus})")
        sys.exit(SKIP)
    work = work_dir(args, "rank_per_gpu")
    json_path = os.path.join(work, "out.json")
    env = base_env()
    code, out, err, _ = run(mpirun(args, gpus, [coll_perf(args), "-b", "8K", "-e", "8M", "-f", "4", "-n", "5", "-T", "120",
                                                "-J", json_path], env), env, 600)
    check(code == 0, f"exit {code}\n" + describe(out, err))
    document, _ = load(json_path)
    assert_all_ok(document, out, err, allowed_skips=[r"in-place AlltoAll"])
    check(document["manifest"]["nranks"] == gpus and document["manifest"]["emulated"] is False, "manifest")
    # More ranks than GPUs without --share-gpu: a clear usage error naming the sharing.
    code, out, err, _ = run(mpirun(args, gpus + 1, [coll_perf(args), "-b", "8K", "-e", "8K"], env), env, 300)
    check(code == 2, f"{gpus + 1} ranks on {gpus} GPUs: exit {code}, expected 2\n" + describe(out, err))
    check("--share-gpu" in err, f"the usage error does not mention --share-gpu\n{err}")
    check(f"start at most {gpus} rank(s) per node" in err, f"{gpus + 1} ranks: the message does not say how many fit\n{err}")
    return f"{gpus} ranks: {len(document['cases'])} cases ok; {gpus + 1} ranks refused"


def stall(args):
    work = work_dir(args, "stall")
    json_path, jsonl_path = os.path.join(work, "out.json"), os.path.join(work, "out.jsonl")
    timeout_s, stall_case, margin_s = 10, 3, 60
    env = base_env(CUDA_VISIBLE_DEVICES=first_visible_device(), CCLBENCH_TEST_STALL=f"1:{stall_case}")
    cmd = mpirun(args, 4, [coll_perf(args), "--share-gpu", "-b", "8K", "-e", "1M", "-f", "2", "-n", "5", "-T", str(timeout_s),
                           "-J", json_path, "--jsonl", jsonl_path], env)
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    ranks = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < 120 and len(ranks) < 4 and process.poll() is None:
            ranks = descendants(process.pid, "coll_perf")
            time.sleep(0.2)
        out, err = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise Failure("the stalled run did not end within 300 s\n" + describe(out, err))
    elapsed = time.monotonic() - started
    check(process.returncode == 4, f"exit {process.returncode}, expected 4 (timeout)\n" + describe(out, err))
    check(len(ranks) == 4, f"saw {len(ranks)} coll_perf ranks under mpirun")
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not any(alive(pid) for pid in ranks), f"ranks {[p for p in ranks if alive(p)]} alive 10 s after mpirun exited")
    # The phase may itself contain parentheses ("test stall (CCLBENCH_TEST_STALL)").
    message = re.search(r"error: timeout: case (\S+) \(size (\d+) B, .*?\) on rank (\d+) \(([^)]+)\) did not finish within "
                        rf"{timeout_s} s", err)
    check(message, "no timeout message naming case, size, rank and host\n" + describe(out, err))
    check(not CRASH.search(out + err), "crash signs\n" + describe(out, err))
    with open(jsonl_path) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    check(len(records) == stall_case, f"{len(records)} records on disk, expected the {stall_case} finished before the stall")
    check(all(r["status"] == "ok" and r["wrong"] == 0 for r in records), "a finished record is not ok")
    with open(json_path) as handle:
        status = json.load(handle)["status"]
    # The stalled rank 1 waits min(T, 10 s) before MPI_Abort (bench/core/watchdog.hpp), so rank 0's own
    # watchdog fires and writes the final status: "running" would mean a stall left no verdict on disk.
    check(status == "timeout", f"-J status {status!r}, expected 'timeout'")
    check(elapsed < 120 + timeout_s + margin_s, f"took {elapsed:.0f} s")
    return f"exit 4 in {elapsed:.0f} s, message: {message.group(0)[:120]}..., {len(records)} records kept, -J {status}"


def memory(args):
    work = work_dir(args, "memory")
    json_path = os.path.join(work, "out.json")
    code, out, err, _ = run([coll_perf(args), "--coll", "all_reduce", "-b", "1G", "-e", "1T", "-f", "1024", "-n", "2",
                             "-w", "1", "-J", json_path], base_env(), 600)
    check(code == 0, f"exit {code}\n" + describe(out, err))
    check("buffers reduced" in err, "no note about reduced buffers\n" + describe(out, err))
    document, _ = load(json_path)
    by_size = {c["requested_bytes"]: c for c in document["cases"]}
    big = by_size[1 << 40]
    check(big["status"] == "skipped" and "MiB" in (big["reason"] or ""), f"1T case: {big['status']} {big['reason']}")
    small = by_size[1 << 30]
    check(small["status"] == "ok" and small["wrong"] == 0, f"1G case: {small['status']} {small['reason']}")
    return f"1T skipped ({big['reason'][:90]}...), 1G ok"


def nccl_flags(args):
    results = []
    work = work_dir(args, "nccl_flags")
    json_path, csv_path = os.path.join(work, "one.json"), os.path.join(work, "one.csv")
    code, out, err, _ = run([coll_perf(args), "--backend", "nccl", "--coll", "all_reduce,reduce_scatter,all_gather",
                             "-o", "mulsum,sum", "-d", "float,int32,bfloat16", "-b", "8K", "-e", "1M", "-f", "16",
                             "-n", "5", "-w", "2", "-G", "2", "-m", "2", "-R", "1", "-u", "3", "-x", "1", "-N", "2",
                             "-I", "1", "-C", "0", "-S", "1", "-M", "1", "-J", json_path, "--csv", csv_path, "--quiet"],
                            base_env(), 600)
    check(code == 0, f"1 rank: exit {code}\n" + describe(out, err))
    document, rows = load(json_path, csv_path)
    assert_all_ok(document, out, err)
    cases = document["cases"]
    for case in cases:
        check((case["graph_launches"], case["ops_per_launch"], case["registration"], case["unalign_elements"],
               case["cta_policy"]) == (2, 2, "local", 3, 1), f"{case['case_id']}: measurement fields {case}")
        check(case["samples_from"] == "instrumented_graph_replay", f"{case['case_id']}: samples_from")
    check(sorted({c["cycle"] for c in cases}) == [0, 1], "two cycles (-N 2)")
    check(len(cases) == 2 * len({(c["case_id"]) for c in cases}), "every case once per cycle")
    check(all(row["graph_launches"] == "2" and row["registration"] == "local" for row in rows), "CSV measurement columns")
    check({c["op"] for c in cases if c["collective"] == "all_reduce"} == {"mulsum", "sum"}, "ops")
    results.append(f"1 rank: {len(cases)} records ok")

    # Symmetric registration: runs where NCCL can, else every case skipped with NCCL's reason.
    json_path = os.path.join(work, "symmetric.json")
    code, out, err, _ = run([coll_perf(args), "--backend", "nccl", "--coll", "all_reduce", "-o", "sum,mulsum",
                             "-b", "8K", "-e", "1M", "-f", "16", "-n", "5", "-R", "2", "-G", "2",
                             "-J", json_path, "--quiet"], base_env(), 600)
    check(code == 0, f"-R 2: exit {code}\n" + describe(out, err))
    document, _ = load(json_path)
    assert_all_ok(document, out, err, allowed_skips=[r"-R 2 \(symmetric registration\) refused by NCCL"])
    check(all(c["registration"] == "symmetric" for c in document["cases"]), "-R 2 records say symmetric")
    skipped = sum(c["status"] == "skipped" for c in document["cases"])
    results.append(f"-R 2: {len(document['cases']) - skipped} ok, {skipped} skipped")

    # Four emulated ranks on one GPU: PreMulSum scalars differ between ranks (1, 2, 1, 2).
    json_path = os.path.join(work, "emulated.json")
    env = base_env(CUDA_VISIBLE_DEVICES=first_visible_device())
    code, out, err, _ = run(mpirun(args, 4, [coll_perf(args), "--share-gpu", "--coll", "all_reduce,reduce_scatter,reduce",
                                             "-o", "mulsum", "-d", "all", "-b", "8K", "-e", "256K", "-f", "32", "-n", "3",
                                             "-G", "2", "-R", "1", "-T", "120", "-J", json_path, "--quiet"], env), env, 900)
    check(code == 0, f"4 emulated ranks: exit {code}\n" + describe(out, err))
    document, _ = load(json_path)
    assert_all_ok(document, out, err, allowed_skips=[r"needs compute capability 9\.0", FP8_AVG])
    ran = [c for c in document["cases"] if c["status"] == "ok"]
    check(len(ran) >= 3 * 10 * 2 * 2, f"only {len(ran)} mulsum cases ran on 4 emulated ranks")
    results.append(f"4 emulated ranks: {len(ran)} mulsum cases, 0 wrong")
    return "; ".join(results)


CHECKS = {"nccl_flags": nccl_flags, "one_rank": one_rank, "timing_modes": timing_modes, "share_gpu4": share_gpu4, "g_path": g_path,
          "rank_per_gpu": rank_per_gpu, "stall": stall, "memory": memory}


if __name__ == "__main__":
    sys.exit(main(CHECKS, lambda name: True, base_env()))
