#!/usr/bin/env python3
"""How many `mpirun` launches one host sustains at once: the screen's pair stage starts one launcher process per
pair of a round (execute/screen.py), so a round of a 1,024-node fleet is 512 mpiruns from one host.

For each count K: K `mpirun -np 2 --oversubscribe PROGRAM` started at the same time on this host (each one its
own process group; PROGRAM a short MPI program, by default `true`, which needs only the launch), each given
LIMIT_S seconds. Recorded per K: how many exited 0, how many failed (their last line), how many ran out of time,
the wall time of the whole batch and its slowest and median launch. Local launches measure what the launching host
itself costs (orted, its sockets and processes); an ssh launch adds an ssh connection per remote node on top.

    launch_fanout.py --counts 8,16,32,64,128 --out RESULTS.json [--program /bin/true] [--limit-s 120]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

LIMIT_S = 120.0


def batch(count, program, limit_s, mpirun="mpirun"):
    argv = [mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none"] + \
        (["--allow-run-as-root"] if os.geteuid() == 0 else []) + [program]
    started = time.monotonic()
    children = [(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  start_new_session=True), time.monotonic()) for _ in range(count)]
    ok, failed, timed_out, durations, messages = 0, 0, 0, [], {}
    for child, began in children:
        left = max(0.1, limit_s - (time.monotonic() - started))
        try:
            _, err = child.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            timed_out += 1
            continue
        durations.append(time.monotonic() - began)
        if child.returncode == 0:
            ok += 1
        else:
            failed += 1
            words = [line for line in err.decode(errors="replace").splitlines() if line.strip("- ")]
            last = (words or [f"exit {child.returncode}"])[0][:200]
            messages[last] = messages.get(last, 0) + 1
    return {"count": count, "ok": ok, "failed": failed, "timed_out": timed_out,
            "wall_s": round(time.monotonic() - started, 2),
            "slowest_s": round(max(durations), 2) if durations else None,
            "median_s": round(statistics.median(durations), 2) if durations else None,
            "failures": messages}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="8,16,32,64,128")
    parser.add_argument("--out", required=True)
    parser.add_argument("--program", default="/bin/true")
    parser.add_argument("--limit-s", type=float, default=LIMIT_S)
    args = parser.parse_args(argv)
    rows = []
    for count in [int(text) for text in args.counts.split(",")]:
        rows.append(batch(count, args.program, args.limit_s))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    document = {"format": "launch_fanout/1", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(), "program": args.program, "limit_s": args.limit_s,
                "mpirun": subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                         check=False).stdout.splitlines()[:1], "rows": rows}
    with open(args.out + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
