"""Which node of a failing pair is at fault: the screen's attribution over pass/fail edges (rules/screen_rules.py
runs it over the pairs' outcomes, rules/screen_rails.py over each rail's).

  A pair measured more than once fails only when every measurement failed (a failure must reproduce).
  attribute, over the pairs' pass/fail:
      1. peel: repeatedly take the node with the most failures among those with >= MIN_GOOD_FAILS failures and more
         failures than passes, counting only pairs between nodes not yet taken (SuperBench drops nodes
         iteratively too); its failures are then explained;
      2. known good: a node not taken, with no unexplained failure and at least one pass;
      3. link: an unexplained failure that is the only one of both its nodes, both of which pass with a known-good
         node other than each other, is a bad link once it was measured failing at least twice (else suspect and
         repeated on retest: link.not_reproduced, its two nodes suspect for that reason alone) and neither node
         failed any other measurement, even one a repeat then passed (a node whose rail runs at its limit fails
         now here, now there: that is the node, still in question, not a link; a failure with a node taken in 1.
         is that node's); both nodes of a bad link are then
         known good. At 2 nodes the one pair, failed (no value) every time, at least twice, is a bad link too, and
         both nodes stay suspect;
      4. a taken node is bad when it failed with >= MIN_GOOD_FAILS distinct known-good nodes and with more of them
         than it passed with; otherwise it stays suspect;
      5. every other node with an unexplained failure, or with no pass against a known-good node, is suspect.

Pure: plain data in and out.
"""

# Two distinct known-good partners: one failure with a good node can be that link.
MIN_GOOD_FAILS = 2


def edges_of(pairs, failed, excluded, rows=None):
    """{(a, b) sorted: {"failed": every measurement failed, "count": measurements, "failures": measurements that
    failed, "pairs": indices}} over pairs whose nodes are both outside excluded (and whose index is in rows, when
    given)."""
    edges = {}
    for index, pair in enumerate(pairs):
        if rows is not None and index not in rows:
            continue
        if pair["a"] in excluded or pair["b"] in excluded:
            continue
        key = tuple(sorted((pair["a"], pair["b"])))
        edge = edges.setdefault(key, {"failed": True, "count": 0, "failures": 0, "pairs": []})
        edge["failed"] = edge["failed"] and failed[index]
        edge["count"] += 1
        edge["failures"] += bool(failed[index])
        edge["pairs"].append(index)
    return edges


def attribute(nodes, edges):
    """The attribution of the module docstring over edges (from _edges). Returns {"bad": {node: [edge keys failed
    with known-good nodes]}, "suspect": {node: [edge keys]}, "no_good_partner": [node], "good": set,
    "links_bad": [key], "links_suspect": [key], "link_not_reproduced": [key]}."""
    adjacency = {node: [] for node in nodes}
    for key in edges:
        for node in key:
            adjacency.setdefault(node, []).append(key)
    fails = {node: sum(1 for key in keys if edges[key]["failed"]) for node, keys in adjacency.items()}
    passes = {node: len(keys) - fails[node] for node, keys in adjacency.items()}
    taken = set()
    while True:  # 1. peel, updating the neighbours' counts as each node is taken
        eligible = [node for node in adjacency if node not in taken and fails[node] >= MIN_GOOD_FAILS
                    and fails[node] > passes[node]]
        if not eligible:
            break
        node = max(eligible, key=lambda name: (fails[name], -passes[name], name))
        taken.add(node)
        for key in adjacency[node]:
            other = key[0] if key[1] == node else key[1]
            if other not in taken:
                if edges[key]["failed"]:
                    fails[other] -= 1
                else:
                    passes[other] -= 1
    unexplained = {node: [key for key in adjacency[node] if edges[key]["failed"] and not (set(key) & taken)]
                   for node in adjacency if node not in taken}
    good = {node for node, keys in unexplained.items() if not keys and passes[node] > 0}
    links_bad, links_suspect, not_reproduced = [], [], []
    decided = set()

    def vouched(mine, theirs):  # passes with a known-good node other than theirs
        for k in adjacency[mine]:
            other = k[0] if k[1] == mine else k[1]
            if not edges[k]["failed"] and other != theirs and other in good:
                return True
        return False

    def steady(mine, key):  # no measurement of its other edges failed, not even one a repeat then passed, but
        # with a node taken as bad (that failure is the bad node's)
        return all(edges[k].get("failures", 0) == 0 for k in adjacency[mine] if k != key and not (set(k) & taken))

    changed = True
    while changed:  # 3. links; a node cleared by its link can vouch for another link
        changed = False
        for node, keys in unexplained.items():
            if len(keys) != 1 or keys[0] in decided:
                continue
            key = keys[0]
            a, b = key
            if len(unexplained.get(a, ())) != 1 or len(unexplained.get(b, ())) != 1:
                continue
            if vouched(a, b) and vouched(b, a):
                if edges[key]["count"] >= 2 and not (steady(a, key) and steady(b, key)):
                    continue  # a node that fails now and then elsewhere too: the node, not yet the link
                decided.add(key)
                changed = True
                if edges[key]["count"] >= 2:
                    links_bad.append(key)
                    good.update(key)
                else:
                    not_reproduced.append(key)
    bad, suspect, no_good = {}, {}, []
    for node in sorted(taken):  # 4.
        with_good = [key for key in adjacency[node] if (key[0] if key[1] == node else key[1]) in good]
        failed_good = [key for key in with_good if edges[key]["failed"]]
        if len(failed_good) >= MIN_GOOD_FAILS and len(failed_good) > len(with_good) - len(failed_good):
            bad[node] = failed_good
        else:
            suspect[node] = [key for key in adjacency[node] if edges[key]["failed"]]
    listed = set()
    for node in sorted(unexplained):  # 5. (a link failing once: its nodes are judged with the link, not here)
        keys = unexplained[node]
        if node in good or (keys and all(key in decided for key in keys)):
            continue
        if keys:
            suspect[node] = keys
            for key in keys:
                if key not in decided and key not in listed:
                    links_suspect.append(key)
                    listed.add(key)
        elif adjacency[node]:
            no_good.append(node)
    links_suspect += not_reproduced
    return {"bad": bad, "suspect": suspect, "no_good_partner": no_good, "good": good, "links_bad": links_bad,
            "links_suspect": links_suspect, "link_not_reproduced": not_reproduced}
