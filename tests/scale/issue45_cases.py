#!/usr/bin/env python3
"""Issue 45's own cases (docs/scale.md, "What the table says"): fleet files of other sizes, seeds, groups and factors
than the scale table's, each screened as a user would, `cclbench screen --simulate FLEET.json` at the default
rounds (`noise: h200`, four rails, leaves of 32 or 64 nodes), scored by screen.json's simulation block.

The earlier session's files of this table (9f4956e) were not kept; these are their recipes as docs/scale.md words
them, drawn with a fixed seed per case, and kept (`fleets FOLDER` writes them):
  adjacent_512     512 nodes in leaves of 32, 2% faults: three runs of three adjacent bad nodes and two alone (11
                   bad nodes), dealt in turn: a node at x0.80-0.85, a rail at x0.5, a hang, a crash, a failed start;
  leaf64_1024      1,024 nodes in leaves of 64: one leaf's second rail (mlx5_1:1) at x0.5, and four node faults
                   inside that leaf (a crash, a node at x0.5, a hang, a failed start);
  leaf32_512       the same on 512 nodes in leaves of 32;
  latency_1024     1,024 nodes: 20 slow by latency alone (small messages x1.5-2, bandwidth intact), 2 links at x0.5;
  pairs_only_256   256 nodes: 5 nodes at x0.7 in their pairs only, a node with one rail at x0.7, a node with two
                   rails at x0.7 and x0.6;
  pairs_only_512   the same with 10 nodes at x0.7 on 512 nodes;
  healthy_512      512 healthy nodes.

    issue45_cases.py run --out RESULTS [--cases a,b] [--machine WORDS]
                                                        each case (in this process), RESULTS written after each
    issue45_cases.py table RESULTS                      the markdown rows docs/scale.md carries
    issue45_cases.py fleets FOLDER                      the fleet files, one a case

Expected values (the truth) come from the fleet built here, never from the screen's output.
"""
import argparse
import json
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from cclbench_lib.cli.main import build_parser  # noqa: E402
from cclbench_lib.cli.screen import simulate_inputs  # noqa: E402
from cclbench_lib.execute.screen import Screen  # noqa: E402
from cclbench_lib.execute.screen_simulate import SimulatedFleet  # noqa: E402
from screen_scale import _commit, _write  # noqa: E402  (tests/scale/screen_scale.py: the scale table's own)
from cclbench_lib.model.screen_fleet import FleetModel, check_fleet  # noqa: E402
from cclbench_lib.render.screen import cause_text  # noqa: E402

RAILS = ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]
FORMAT = "issue45_cases/1"


def _fleet(size, leaf, faults, seed):
    nodes = [{"name": f"gpu{index:05d}", "group": f"sw{index // leaf:03d}"} for index in range(size)]
    return {"format": "screen_fleet/1", "nodes": nodes, "rails": RAILS, "gpus_per_node": 8, "noise": "h200",
            "seed": seed, "faults": faults}


def adjacent(size=512, seed=1):
    """Three runs of three adjacent nodes and two alone, their faults dealt in turn from KINDS."""
    rng = random.Random(f"issue45/adjacent/{size}/{seed}")
    kinds = ({"kind": "slow_node", "factor": [0.80, 0.85]}, {"kind": "slow_rail", "factor": 0.5},
             {"kind": "hang"}, {"kind": "crash"}, {"kind": "fail_start"})
    taken, chosen = set(), []
    while len(chosen) < 9:  # three runs of three, apart from each other
        start = rng.randrange(size - 3)
        if any(index in taken for index in range(start - 1, start + 4)):
            continue
        taken.update(range(start - 1, start + 4))
        chosen += [start, start + 1, start + 2]
    while len(chosen) < 11:
        index = rng.randrange(size)
        if index in taken:
            continue
        taken.update((index - 1, index, index + 1))
        chosen.append(index)
    faults = []
    for number, index in enumerate(chosen):
        kind = dict(kinds[number % len(kinds)], node=f"gpu{index:05d}")
        if isinstance(kind.get("factor"), list):
            kind["factor"] = round(rng.uniform(*kind["factor"]), 3)
        if kind["kind"] == "slow_rail":
            kind["rail"] = rng.choice(RAILS)
        faults.append(kind)
    return _fleet(size, 32, faults, seed)


def leaf(size, leaf_size, seed=1):
    """One leaf's second rail at x0.5 and four node faults inside that leaf."""
    rng = random.Random(f"issue45/leaf/{size}/{leaf_size}/{seed}")
    which = rng.randrange(size // leaf_size)
    members = list(range(which * leaf_size, (which + 1) * leaf_size))
    inside = rng.sample(members, 4)
    faults = [{"kind": "slow_rail", "group": f"sw{which:03d}", "rail": RAILS[1], "factor": 0.5}]
    for index, kind in zip(inside, ({"kind": "crash"}, {"kind": "slow_node", "factor": 0.5}, {"kind": "hang"},
                                    {"kind": "fail_start"})):
        faults.append(dict(kind, node=f"gpu{index:05d}"))
    return _fleet(size, leaf_size, faults, seed)


def latency(size=1024, seed=1):
    """20 nodes slow by latency alone (small messages x1.5-2), 2 links at x0.5."""
    rng = random.Random(f"issue45/latency/{size}/{seed}")
    picked = rng.sample(range(size), 24)
    faults = [{"kind": "slow_node", "node": f"gpu{index:05d}", "small_factor": round(rng.uniform(1.5, 2.0), 3)}
              for index in picked[:20]]
    faults += [{"kind": "slow_link", "a": f"gpu{a:05d}", "b": f"gpu{b:05d}", "factor": 0.5}
               for a, b in (picked[20:22], picked[22:24])]
    return _fleet(size, 32, faults, seed)


def pairs_only(size, slow, seed=1):
    """slow nodes at x0.7 in their pairs only, a node with one rail at x0.7, one with two rails at x0.7 and x0.6."""
    rng = random.Random(f"issue45/pairs_only/{size}/{slow}/{seed}")
    picked = rng.sample(range(size), slow + 2)
    faults = [{"kind": "slow_node", "node": f"gpu{index:05d}", "factor": 0.7} for index in picked[:slow]]
    one, two = (f"gpu{index:05d}" for index in picked[slow:])
    faults += [{"kind": "slow_rail", "node": one, "rail": RAILS[2], "factor": 0.7},
               {"kind": "slow_rail", "node": two, "rail": RAILS[0], "factor": 0.7},
               {"kind": "slow_rail", "node": two, "rail": RAILS[3], "factor": 0.6}]
    return _fleet(size, 32, faults, seed)


CASES = {
    "adjacent_512": ("512 nodes, 2% faults: three runs of three adjacent bad nodes and two alone; nodes at "
                     "x0.80-0.85, rails at x0.5, hangs, crashes, failed starts", lambda: adjacent()),
    "leaf64_1024": ("1,024 nodes in leaves of 64: one leaf's second rail at x0.5, four node faults inside it (crash, "
                    "x0.5 node, hang, failed start)", lambda: leaf(1024, 64)),
    "leaf32_512": ("512 nodes in leaves of 32: the same, a leaf of 32", lambda: leaf(512, 32)),
    "latency_1024": ("1,024 nodes: 20 slow by latency alone (small messages x1.5-2, bandwidth intact), 2 slow links "
                     "at x0.5", lambda: latency()),
    "pairs_only_256": ("256 nodes: 5 slow at x0.7 in their pairs only, one rail at x0.7, a node with two rails at "
                       "x0.7 and x0.6", lambda: pairs_only(256, 5)),
    "pairs_only_512": ("512 nodes: the same at 10 nodes", lambda: pairs_only(512, 10)),
    "healthy_512": ("512 healthy nodes", lambda: _fleet(512, 32, [], 1)),
}


def run_case(name):
    """One case at the default rounds: its fleet, score, shared causes and modelled wall."""
    document = CASES[name][1]()
    fleet = check_fleet(document, name)
    args = build_parser().parse_args(["screen", "--simulate", name, "--seed", "1"])
    inputs = simulate_inputs(args, fleet, os.path.join(ROOT, "build"))
    began, cpu = time.monotonic(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="issue45-case-") as run_dir, open(os.devnull, "w") as quiet:
        screen = Screen(inputs, run_dir, stream=quiet, simulator=SimulatedFleet(FleetModel(fleet), name,
                                                                                 keep_files=False),
                        write_outputs=False)
        out = screen.run()
    simulation = out["simulation"]
    return {"case": name, "fleet": CASES[name][0], "nodes": len(document["nodes"]), "faults": len(document["faults"]),
            "quick": inputs["quick"], "rounds": len(out["schedule"]["rounds"]),
            "retest_rounds": len(out["schedule"]["retest_rounds"]), "score": simulation["score"],
            "truth_groups": simulation["truth"].get("bad_groups") or [],
            "causes": [cause_text(cause) for cause in out["shared_causes"]],
            "groups_named": [{"group": cause["group"], "group_nodes": cause["group_nodes"], "bad": len(cause["nodes"]),
                              "suspect": len(cause["suspect"]), "rail_ratios": cause["rail_ratios"],
                              "busbw_ratio": cause["busbw_ratio"], "small_time_ratio": cause["small_time_ratio"]}
                             for cause in out["shared_causes"] if cause["kind"] == "group"],
            "cause_groups": [cause.get("group") or cause.get("rail") for cause in out["shared_causes"]],
            "explained_links": [link for cause in out["shared_causes"] for link in cause.get("explained_links") or ()],
            "open": out["retests"]["open"], "result": out["result"], "modelled_wall_s": simulation["modelled_wall_s"],
            "rules_cpu_s": round(sum(simulation["rules_cpu_s"].values()), 3),
            "elapsed_s": round(time.monotonic() - began, 2), "cpu_s": round(time.process_time() - cpu, 2)}


def _found(block):
    return f"{block['true_positive']} of {block['truth']}"


def _group_text(group):
    """A group named as a shared cause, short: its rails' ratios to their siblings, its pairs' ratio to their
    reference, how many of its nodes are bad and suspect."""
    parts = [f"{rail} at x{ratio:.2f} of its sibling" for rail, ratio in sorted(group["rail_ratios"].items())
             if ratio is not None]
    if group["busbw_ratio"] is not None:
        parts.append(f"pairs at x{group['busbw_ratio']:.2f} of their reference")
    if group["small_time_ratio"] is not None:
        parts.append(f"small messages x{group['small_time_ratio']:.2f} their reference's")
    return (f"`{group['group']}` {'; '.join(parts) or 'bad together'} ({group['bad']} bad and {group['suspect']} "
            f"suspect of {group['group_nodes']} nodes)")


def table(results):
    lines = ["| fleet | rounds (default) | bad nodes found | left open | healthy named | group named | modelled wall |",
             "|---|---|---|---|---|---|---|"]
    for row in results["cases"]:
        score = row["score"]
        nodes, links, rails = score["nodes"], score["links"], score["rails"]
        found = "-" if not nodes["truth"] else _found(nodes)
        if rails["truth"]:
            found += f", rails {_found(rails)}"
        if links["truth"]:
            found += f", links {_found(links)}"
        healthy = f"{nodes['false_positive']} ({rails['false_positive']} rails, {links['false_positive']} links)"
        groups = "; ".join(_group_text(group) for group in row["groups_named"]) or "-"
        wall = row["modelled_wall_s"]
        rounds = "full" if row["quick"] is None else f"--quick {row['quick']}"
        lines.append(f"| {row['fleet']} | {rounds}: {row['rounds']} + {row['retest_rounds']} | {found} | "
                     f"{nodes['suspect_bad']} | {healthy} | {groups} | {wall / 60:.1f} min |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="issue45_cases.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--out", required=True)
    run.add_argument("--cases", default=",".join(CASES))
    run.add_argument("--machine", default="", help="words on the machine, after its CPU count")
    show = sub.add_parser("table")
    show.add_argument("results")
    fleets = sub.add_parser("fleets")
    fleets.add_argument("folder")
    args = parser.parse_args(argv)
    if args.command == "fleets":
        os.makedirs(args.folder, exist_ok=True)
        for name, (_, build) in CASES.items():
            _write(os.path.join(args.folder, f"{name}.json"), build())
        return 0
    if args.command == "table":
        with open(args.results, encoding="utf-8") as handle:
            sys.stdout.write(table(json.load(handle)))
        return 0
    results = {"format": FORMAT, "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "commit": _commit(), "machine": f"{os.cpu_count()} CPUs" + (f" ({args.machine})" if args.machine else ""), "cases": []}
    for name in args.cases.split(","):
        if name not in CASES:
            parser.error(f"--cases: one of {','.join(CASES)}")
        row = run_case(name)
        results["cases"].append(row)
        _write(args.out, results)
        print(f"{name}: nodes {_found(row['score']['nodes'])}, healthy named {row['score']['nodes']['false_positive']}"
              f", {row['elapsed_s']} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
