#!/usr/bin/env python3
"""Mutation fuzzer for the results reader behind `cclbench compare` (Python, stdlib only).

The reader is Python (scripts/cclbench_lib: base.files.read_jsonl -> model.records.load_cases ->
render.compare.compare_runs), so libFuzzer cannot drive it and a C++ copy of its rules would test the copy,
not the code users run. This driver does what libFuzzer does, in process: it mutates a committed
seed corpus (byte flips, inserts, deletions, splices between seeds, plus JSON-aware mutations that
swap a field's value for a hostile one: NaN, Infinity, 1e400-sized integers, wrong types, deep
nesting, invalid UTF-8), writes run A and run B, and calls compare_runs(). Accepted outcomes are a
report or a CclbenchError (the one-line error the CLI prints). Anything else is a finding: the input
is saved under --findings and the traceback printed.

Usage: fuzz_compare_reader.py --source-dir S [--runs N] [--seconds T] [--seed K] [--findings DIR]
Exit 0 without findings, 1 with.
"""

import argparse
import io
import json
import os
import random
import sys
import shutil
import tempfile
import time
import traceback

HOSTILE_VALUES = [None, True, False, 0, -1, 1, 2 ** 63, -(2 ** 63), 10 ** 400, -(10 ** 400), 1e308, -1e308, 5e-324,
                  float("nan"), float("inf"), float("-inf"), "", "ok", "0", "NaN", [], [1, 2], {}, {"p50": 1},
                  {"mean": 10 ** 400, "p50": 10 ** 400}, {"mean": 1e-320, "p50": 1e-320},
                  {"mean": 1.0, "p50": float("nan")}, "\udcff", "a" * 1000, [[[[[[[]]]]]]]]
FIELDS = ["point", "case_id", "status", "time_us", "wrong", "samples_us", "iterations", "collective",
          "requested_bytes", "reason", "busbw_gbps"]


def mutate_bytes(data, rng, seeds):
    data = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        choice = rng.random()
        if choice < 0.25 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif choice < 0.45:
            token = rng.choice([b"{", b"}", b"\n", b"\"", b",", b":", b"NaN", b"Infinity", b"-Infinity", b"1e999",
                                b"9" * 400, b"null", b"\xff", b"\xc3", b"[", b"]", b"\\u0000", b"\\ud800"])
            at = rng.randint(0, len(data))
            data[at:at] = token
        elif choice < 0.65 and data:
            start = rng.randrange(len(data))
            del data[start:start + rng.randint(1, 64)]
        elif choice < 0.8:
            other = rng.choice(seeds)
            if other:
                start = rng.randrange(len(other))
                piece = other[start:start + rng.randint(1, 400)]
                at = rng.randint(0, len(data))
                data[at:at] = piece
        else:
            lines = bytes(data).split(b"\n")
            rng.shuffle(lines)
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def mutate_json(data, rng):
    lines = data.split(b"\n")
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict) and rng.random() < 0.7:
            for _ in range(rng.randint(1, 3)):
                field = rng.choice(FIELDS)
                target = record
                if field == "time_us" and isinstance(record.get("time_us"), dict) and rng.random() < 0.6:
                    target = record["time_us"]
                    field = rng.choice(["mean", "p50", "p95", "cv_pct", "min"])
                if rng.random() < 0.15:
                    target.pop(field, None)
                else:
                    target[field] = rng.choice(HOSTILE_VALUES)
        try:
            out.append(json.dumps(record, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass"))
        except (ValueError, TypeError):
            out.append(line)
    if rng.random() < 0.3 and out:
        out.append(rng.choice(out))  # repeats of the same case
    return b"\n".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--corpus", default=None)
    parser.add_argument("--runs", type=int, default=1000000)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this many seconds (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--findings", default=None)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.source_dir, "scripts"))
    from cclbench_lib.base.errors import CclbenchError  # noqa: E402
    from cclbench_lib.render.compare import run_compare  # noqa: E402

    corpus = args.corpus or os.path.join(args.source_dir, "tests", "fuzz", "corpus", "compare_reader")
    seeds = []
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), "rb") as handle:
            seeds.append(handle.read())
    if not seeds:
        print(f"no seeds in {corpus}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    scratch = tempfile.mkdtemp(prefix="fuzz-compare-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path_a, path_b = os.path.join(scratch, "a.jsonl"), os.path.join(scratch, "b.jsonl")
    findings = 0
    signatures = set()
    started = time.monotonic()
    executions = 0
    outcomes = {"report": 0, "error": 0}
    try:
        for executions in range(1, args.runs + 1):
            inputs = []
            for _ in range(2):
                data = rng.choice(seeds)
                if rng.random() < 0.5:
                    data = mutate_json(data, rng)
                if rng.random() < 0.6:
                    data = mutate_bytes(data, rng, seeds)
                inputs.append(data)
            for path, data in zip((path_a, path_b), inputs):
                with open(path, "wb") as handle:
                    handle.write(data)
            threshold = rng.choice([0.0, 2.0, 5.0, 1e308])
            fail_above = rng.choice([0.0, 10.0, 1e308])
            try:
                run_compare(path_a, path_b, threshold, fail_above, stream=io.StringIO())
                outcomes["report"] += 1
            except CclbenchError:
                outcomes["error"] += 1
            except Exception:  # noqa: BLE001 - any other exception is what we are looking for
                trace = traceback.format_exc()
                last = trace.strip().splitlines()[-1]
                where = [line for line in trace.splitlines() if line.strip().startswith("File ")][-1].strip()
                signature = (where, last.split(":")[0])
                if signature not in signatures:
                    signatures.add(signature)
                    findings += 1
                    print(f"FINDING {findings} at execution {executions}: {last}\n{trace}", flush=True)
                    if args.findings:
                        os.makedirs(args.findings, exist_ok=True)
                        for label, data in zip("ab", inputs):
                            with open(os.path.join(args.findings, f"finding{findings}_{label}.jsonl"), "wb") as handle:
                                handle.write(data)
            if args.seconds and time.monotonic() - started > args.seconds:
                break
    finally:
        # The inputs and what compare writes beside run B (compare.json in its directory).
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"compare_reader: {executions} executions in {elapsed:.1f} s ({executions / max(elapsed, 1e-9):.0f}/s), "
          f"{outcomes['report']} reports, {outcomes['error']} clean errors, {findings} distinct finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
