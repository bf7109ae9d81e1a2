#!/usr/bin/env python3
"""A fleet file of the recipe docs/scale.md's "One launch a stage" times the screen with: N nodes in leaves of 32,
round(2% x N) + 3 faults dealt in turn - a node at x0.5, a leaf's mlx5_3:1 at x0.25 (its 32 nodes), a link at x0.5,
a node that crashes in its pairs, one that hangs in them, one that fails to start - on nodes drawn at random (a
fixed seed), two rails, H200 noise. The earlier session's fleet files of that table were not kept; this is the same
recipe, not the same draw.

    issue46_fleet.py N [SEED] > fleet.json        then: cclbench screen --simulate fleet.json
"""
import json
import random
import sys

LEAF = 32
KINDS = ("slow_node", "slow_rail", "slow_link", "crash", "hang", "fail_start")


def fleet(size, seed="doc"):
    rng = random.Random(seed)
    nodes = [{"name": f"gpu{index:05d}", "group": f"leaf{index // LEAF}"} for index in range(size)]
    free = list(range(size))
    rng.shuffle(free)
    faults, leaves = [], set()
    for number in range(round(0.02 * size) + 3):
        kind = KINDS[number % len(KINDS)]
        if kind == "slow_rail":
            leaf = rng.choice([leaf for leaf in range(size // LEAF) if leaf not in leaves])
            leaves.add(leaf)
            faults.append({"kind": kind, "group": f"leaf{leaf}", "rail": "mlx5_3:1", "factor": 0.25})
            free = [index for index in free if index // LEAF != leaf]
            continue
        index = free.pop()
        if kind == "slow_link":
            other = free.pop()
            faults.append({"kind": kind, "a": nodes[index]["name"], "b": nodes[other]["name"], "factor": 0.5})
        elif kind == "slow_node":
            faults.append({"kind": kind, "node": nodes[index]["name"], "factor": 0.5})
        else:
            faults.append({"kind": kind, "node": nodes[index]["name"]})
    return {"format": "screen_fleet/1", "nodes": nodes, "rails": ["mlx5_0:1", "mlx5_3:1"], "gpus_per_node": 8,
            "noise": "h200", "seed": 1, "faults": faults}


if __name__ == "__main__":
    json.dump(fleet(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "doc"), sys.stdout)
    sys.stdout.write("\n")
