"""A simulated screen's verdict scored against the fleet's truth (model/screen_fleet.truth): screen.json's
"simulation.score" block.

For each of nodes, links, rails and groups: named = what the screen called bad (a group: named as a shared cause,
rules/screen_causes.py); truth = what the fleet file made bad (a group: a fault given for the group).
  true_positive = |named & truth|, false_positive = |named - truth|, false_negative = |truth - named|;
  recall = true_positive / |truth| (None when the fleet has none of that kind: nothing to find);
  precision = true_positive / |named| (None when nothing was named: no claim to be wrong about);
  healthy_named_share (nodes): false positives / the fleet's healthy nodes (None when none is healthy);
  suspect: how many of the kind were left suspect (neither named bad nor accepted: open when the retests ended,
      screen.json "retests.open"), and of them how many are bad - each a miss, in false_negative and recall.
A link is (a, b) in name order; a rail (node, rail). Pure: plain data in and out.
"""


def _score(named, truth, suspect):
    named, truth, suspect = set(named), set(truth), set(suspect)
    hits = named & truth
    return {"truth": len(truth), "named": len(named), "true_positive": len(hits),
            "false_positive": len(named - truth), "false_negative": len(truth - named),
            "recall": len(hits) / len(truth) if truth else None,
            "precision": len(hits) / len(named) if named else None,
            "suspect": len(suspect), "suspect_bad": len(suspect & truth),
            "missed": sorted(truth - named)[:20], "wrongly_named": sorted(named - truth)[:20]}


def score(document, truth):
    """{"nodes", "links", "rails", "groups"} scores of a screen.json document against truth {"bad_nodes",
    "bad_links", "bad_rails", "bad_groups" (optional)} (lists; a link [a, b], a rail [node, rail], a group its
    name)."""
    def by(rows, verdict, key):
        return [key(row) for row in rows if row["verdict"] == verdict]

    node_key, link_key = (lambda row: row["name"]), (lambda row: tuple(sorted((row["a"], row["b"]))))
    rail_key = (lambda row: (row["node"], row["rail"]))
    nodes = _score(by(document["nodes"], "bad", node_key), truth["bad_nodes"],
                   by(document["nodes"], "suspect", node_key))
    healthy = len(document["nodes"]) - nodes["truth"]
    nodes["healthy_named_share"] = nodes["false_positive"] / healthy if healthy else None
    links = _score(by(document["links"], "bad", link_key), [tuple(link) for link in truth["bad_links"]],
                   by(document["links"], "suspect", link_key))
    rails = _score(by(document["rails"], "bad", rail_key), [tuple(rail) for rail in truth["bad_rails"]],
                   by(document["rails"], "suspect", rail_key))
    for block in (links, rails):
        block["missed"] = [list(item) for item in block["missed"]]
        block["wrongly_named"] = [list(item) for item in block["wrongly_named"]]
    groups = _score([cause["group"] for cause in document.get("shared_causes") or () if cause["kind"] == "group"],
                    truth.get("bad_groups") or (), ())
    return {"nodes": nodes, "links": links, "rails": rails, "groups": groups}
