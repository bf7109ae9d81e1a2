#!/usr/bin/env python3
"""Proof that coll_perf's verification fails when results are wrong: CCLBENCH_INJECT_WRONG flips
chosen received elements after each checked run, and every layer must say so.

One checker for both backends (the NCCL ones are GPU tests and exit 77 without a GPU):

  mpi_all       mpirun -np 4 --backend mpi, every collective, int32 and float, both placements,
                root 1, rank 1 flips 3: every case that ran has wrong == 3, status failed with its
                reason; exit 1; the console #wrong column, the CSV, the JSONL and the -J cases agree
                case by case; one warning line on stderr; the manifest records the variable
  mpi_filters   -c 2 and case=...: exactly that case fails with wrong == 2 x 2, the others stay ok
  mpi_control   the mpi_all run without the variable: exit 0, every case ok with 0 wrong
  mpi_usage     a malformed value or a rank the launch lacks: exit 2 with one error line; --help
                names the variable only while it is set
  nccl_one_rank 1 GPU, 1 rank, every collective, int32/float/half/bfloat16, sum and avg (the
                tolerance path), both placements: every case that ran has wrong == 3
  nccl_share4   mpirun -np 4 --share-gpu on one GPU (emulated ranks), same matrix, rank 1, root 1

Usage: coll_perf_inject_wrong.py --bin-dir B --mpiexec M --work-dir W --only NAME
"""

import csv
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from coll_perf_runner import (base_env, check, coll_perf, crash_signs, describe, main, mpirun_prefix,  # noqa: E402
                              run_launch, work_dir)

VARIABLE = "CCLBENCH_INJECT_WRONG"
# Console table geometry (bench/core/reporters.cpp): a 52-character prefix, then two halves of 53.
PREFIX_WIDTH = 52
HALF_WIDTH = 53
DISPLAY_NAMES = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
                 "AlltoAll": "alltoall", "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "sendrecv"}
ALL_COLLECTIVES = sorted(DISPLAY_NAMES.values())


def environment(inject=None):
    env = base_env()
    env.pop(VARIABLE, None)
    if inject is not None:
        env[VARIABLE] = inject
    return env


def run(cmd, env, timeout=600):
    code, out, err, _, launcher = run_launch(cmd, env, timeout)
    crashes = crash_signs(out, err, launcher)
    check(not crashes, "crash signs in the output: " + " | ".join(crashes[:3]) + "\n" + describe(out, err))
    return code, out, err


def mpirun(args, nranks, env):
    return mpirun_prefix(args.mpiexec, nranks, env, ("NCCL_NVLS_ENABLE", "CUDA_VISIBLE_DEVICES", VARIABLE))


def outputs(work):
    return {"json": os.path.join(work, "out.json"), "jsonl": os.path.join(work, "out.jsonl"),
            "csv": os.path.join(work, "out.csv")}


def output_flags(paths):
    return ["-J", paths["json"], "--jsonl", paths["jsonl"], "--csv", paths["csv"]]


def console_rows(stdout):
    """{(collective, dtype, op, bytes, in_place): #wrong text} from the console table."""
    rows = {}
    collective = None
    for line in stdout.splitlines():
        header = re.match(r"# (\w+), \d+ ranks, backend", line)
        if header:
            collective = DISPLAY_NAMES[header.group(1)]
            continue
        if line.startswith("#") or not line.strip() or collective is None:
            continue
        prefix = line[:PREFIX_WIDTH].split()
        if len(prefix) != 5 or not prefix[0].isdigit():
            continue
        size, _count, dtype, op, _root = prefix
        rest = line[PREFIX_WIDTH:]
        halves = ((False, rest[:HALF_WIDTH]), (True, rest[HALF_WIDTH:]))
        if rest[:HALF_WIDTH].strip():
            # A long #wrong value widens the first half: split by fields, six per half.
            fields = rest.split()
            halves = ((False, " ".join(fields[:6])), (True, " ".join(fields[6:])))
        for in_place, text in halves:
            fields = text.split()
            if fields:
                check(len(fields) == 6, f"console half with {len(fields)} fields: {line!r}")
                rows[(collective, dtype, op, int(size), in_place)] = fields[3]
    return rows


def load_all(paths):
    with open(paths["json"]) as handle:
        document = json.load(handle)
    with open(paths["jsonl"]) as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    with open(paths["csv"], newline="") as handle:
        rows = list(csv.DictReader(handle))
    return document, lines, rows


def assert_layers_agree(paths, stdout):
    """-J cases, JSONL records, CSV rows and console lines say the same wrong/status per case."""
    document, lines, rows = load_all(paths)
    cases = document["cases"]
    check(cases, "no cases recorded")
    check([c["case_id"] for c in lines] == [c["case_id"] for c in cases], "JSONL and -J list different cases")
    check([r["case_id"] for r in rows] == [c["case_id"] for c in cases], "CSV and -J list different cases")
    console = console_rows(stdout)
    for case, line, row in zip(cases, lines, rows):
        name = case["case_id"]
        check(line["wrong"] == case["wrong"] and line["status"] == case["status"] and line["reason"] == case["reason"],
              f"{name}: JSONL {line['wrong']}/{line['status']} vs -J {case['wrong']}/{case['status']}")
        expected_cell = "" if case["wrong"] is None else str(case["wrong"])
        check(row["wrong"] == expected_cell and row["status"] == case["status"] and row["reason"] == (case["reason"] or ""),
              f"{name}: CSV wrong={row['wrong']!r} status={row['status']} vs -J {case['wrong']}/{case['status']}")
        key = (case["collective"], case["dtype"], case["op"], case["bytes"], case["in_place"])
        check(key in console, f"{name}: no console line for {key}\n{stdout[-3000:]}")
        shown = {"skipped": "skip", "error": "err"}.get(case["status"], "-" if case["wrong"] is None else str(case["wrong"]))
        check(console[key] == shown, f"{name}: console #wrong {console[key]!r}, record says {shown!r}")
    return document


def assert_injected(document, count, checks=1, what=None):
    """Every case that ran (selected by `what`) reports exactly count x checks wrong, failed, with its reason."""
    ran = [c for c in document["cases"] if c["status"] != "skipped" and (what is None or what(c))]
    check(ran, "no case ran")
    wrong = count * checks
    for case in ran:
        check(case["wrong"] == wrong and case["status"] == "failed",
              f"{case['case_id']}: wrong {case['wrong']} status {case['status']} (expected {wrong}, failed)")
        check(case["reason"] == f"{wrong} wrong elements over {checks} checked runs",
              f"{case['case_id']}: reason {case['reason']!r}")
    return ran


def assert_one_warning(err, inject):
    lines = [line for line in err.splitlines() if VARIABLE in line]
    check(len(lines) == 1, f"expected one {VARIABLE} line on stderr, got {len(lines)}:\n{err[-2000:]}")
    check("warning:" in lines[0] and inject in lines[0], f"warning line: {lines[0]!r}")


def assert_manifest(document, inject):
    recorded = (document.get("manifest") or {}).get("environment") or {}
    check(recorded.get(VARIABLE) == inject, f"manifest environment: {recorded}")


MPI_MATRIX = ["--backend", "mpi", "--coll", "all", "-d", "int32,float", "-r", "1", "-b", "8K", "-e", "16K", "-f", "2",
              "-n", "2", "-w", "1", "-c", "1"]


def mpi_all(args):
    work = work_dir(args, "mpi_all")
    paths = outputs(work)
    inject = "count=3,rank=1"
    env = environment(inject)
    code, out, err = run(mpirun(args, 4, env) + [coll_perf(args)] + MPI_MATRIX + output_flags(paths), env)
    check(code == 1, f"exit {code}, expected 1 (cases failed)\n" + describe(out, err))
    document = assert_layers_agree(paths, out)
    ran = assert_injected(document, 3)
    seen = {(c["collective"], c["in_place"]) for c in ran}
    # MPI_Bcast has one buffer (in place only); sendrecv is out-of-place only.
    expected = {(c, p) for c in ALL_COLLECTIVES for p in (False, True)} - {("broadcast", False), ("sendrecv", True)}
    check(seen == expected, f"collective/placement pairs that ran: {sorted(seen)}")
    check({c["dtype"] for c in ran} == {"int32", "float"}, "both dtypes ran")
    assert_one_warning(err, inject)
    assert_manifest(document, inject)
    return f"{len(ran)} cases, each wrong == 3 and failed; console, CSV, JSONL and -J agree"


def mpi_filters(args):
    work = work_dir(args, "mpi_filters")
    paths = outputs(work)
    target = "all_gather.int32.none.in.8K"
    inject = f"count=2,rank=3,case={target}"
    env = environment(inject)
    code, out, err = run(mpirun(args, 4, env) + [coll_perf(args), "--backend", "mpi", "--coll", "all_gather,alltoall",
                                                 "-d", "int32", "-b", "8K", "-e", "16K", "-f", "2", "-n", "2", "-w", "1", "-c", "2"]
                         + output_flags(paths), env)
    check(code == 1, f"exit {code}, expected 1\n" + describe(out, err))
    document = assert_layers_agree(paths, out)
    assert_injected(document, 2, checks=2, what=lambda c: c["case_id"] == target)
    others = [c for c in document["cases"] if c["case_id"] != target]
    check(len(others) == 7, f"{len(others)} other cases")
    for case in others:
        check(case["status"] == "ok" and case["wrong"] == 0, f"{case['case_id']}: {case['status']} wrong {case['wrong']}")
    return f"only {target} failed, wrong == 4 over 2 checked runs"


def mpi_control(args):
    work = work_dir(args, "mpi_control")
    paths = outputs(work)
    env = environment()
    code, out, err = run(mpirun(args, 4, env) + [coll_perf(args)] + MPI_MATRIX + output_flags(paths), env)
    check(code == 0, f"exit {code}\n" + describe(out, err))
    document = assert_layers_agree(paths, out)
    ran = [c for c in document["cases"] if c["status"] != "skipped"]
    check(len(ran) == 48 and all(c["status"] == "ok" and c["wrong"] == 0 for c in ran),
          f"{len(ran)} ran; not ok: {[c['case_id'] for c in ran if c['status'] != 'ok'][:3]}")
    check(VARIABLE not in err and VARIABLE not in ((document.get("manifest") or {}).get("environment") or {}),
          "the variable is mentioned although unset")
    return f"{len(ran)} cases ok with 0 wrong"


def mpi_usage(args):
    work = work_dir(args, "mpi_usage")
    base = [coll_perf(args), "--backend", "mpi", "--coll", "all_reduce", "-b", "8K", "-e", "8K", "-n", "1", "-w", "0",
            "--quiet", "-J", os.path.join(work, "out.json")]
    for inject, nranks, needle in (("count=3,rnak=1", 1, "unknown key 'rnak'"), ("rank=1", 1, "count is required"),
                                   ("count=1,rank=2", 2, "rank 2 is not an MPI rank"),
                                   ("count=1,gpu=1", 1, "gpu 1 is not a GPU index")):
        env = environment(inject)
        code, out, err = run(mpirun(args, nranks, env) + base, env, 300)
        lines = [line for line in err.splitlines() if line.strip()]
        check(code == 2, f"{inject}: exit {code}, expected 2\n" + describe(out, err))
        errors = [line for line in lines if "error:" in line]
        check(len(errors) == 1 and VARIABLE in errors[0] and needle in errors[0], f"{inject}: stderr {lines}")
    for inject in ("count=2,rank=0", None):
        env = environment(inject)
        code, out, err = run([coll_perf(args), "--help"], env, 120)
        check(code == 0, f"--help exit {code}\n" + describe(out, err))
        check((VARIABLE in out) == (inject is not None), f"--help with {VARIABLE}={inject}: mention is wrong\n{out[-800:]}")
        if inject:
            check(inject in out, "--help does not show the value that is set")
    return "malformed values and absent targets exit 2 with one line; --help names the variable when set"


NCCL_MATRIX = ["--backend", "nccl", "--coll", "all", "-d", "int32,float,half,bfloat16", "-o", "sum,avg", "-b", "8K",
               "-e", "16K", "-f", "2", "-n", "2", "-w", "1", "-c", "1"]


def assert_nccl_matrix(document, ran, nranks):
    collectives = {c["collective"] for c in ran}
    check(collectives == set(ALL_COLLECTIVES), f"collectives that ran: {sorted(collectives)}")
    check({c["in_place"] for c in ran} == {False, True}, "both placements ran")
    tolerance = [c for c in ran if c["op"] == "avg" and c["dtype"] in ("float", "half", "bfloat16")]
    check({c["dtype"] for c in tolerance} == {"float", "half", "bfloat16"}, "avg (tolerance path) on every float type")
    check(all(c["nranks"] == nranks for c in document["cases"]), "rank count")


def nccl_one_rank(args):
    work = work_dir(args, "nccl_one_rank")
    paths = outputs(work)
    inject = "count=3,rank=0,gpu=0"
    env = environment(inject)
    code, out, err = run([coll_perf(args)] + NCCL_MATRIX + output_flags(paths), env, 900)
    check(code == 1, f"exit {code}, expected 1\n" + describe(out, err))
    document = assert_layers_agree(paths, out)
    ran = assert_injected(document, 3)
    assert_nccl_matrix(document, ran, 1)
    assert_one_warning(err, inject)
    assert_manifest(document, inject)
    return f"{len(ran)} cases on 1 GPU, each wrong == 3 and failed"


def nccl_share4(args):
    work = work_dir(args, "nccl_share4")
    paths = outputs(work)
    inject = "count=3,rank=1"
    env = environment(inject)
    code, out, err = run(mpirun(args, 4, env) + [coll_perf(args), "--share-gpu", "-r", "1"] + NCCL_MATRIX
                         + output_flags(paths), env, 900)
    check(code == 1, f"exit {code}, expected 1\n" + describe(out, err))
    document = assert_layers_agree(paths, out)
    ran = assert_injected(document, 3)
    assert_nccl_matrix(document, ran, 4)
    check(all(c["emulated"] for c in document["cases"]), "records say emulated")
    assert_one_warning(err, inject)
    return f"{len(ran)} cases on 4 emulated ranks, each wrong == 3 and failed"


CHECKS = {"mpi_all": mpi_all, "mpi_filters": mpi_filters, "mpi_control": mpi_control, "mpi_usage": mpi_usage,
          "nccl_one_rank": nccl_one_rank, "nccl_share4": nccl_share4}


if __name__ == "__main__":
    sys.exit(main(CHECKS, lambda name: name.startswith("nccl"), environment()))
