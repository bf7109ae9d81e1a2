"""The screen's verdicts before the pairs: the path MTU between the nodes and each node alone.

  Path MTU (between the nodes the node stage passed; the doctor's path_mtu probes, model/doctor_paths): a path
      fails when a don't-fragment echo of its rail's MTU gets no reply - NCCL hangs on such a path. The node with
      the most failing peers is bad (node.path_mtu) when at least MIN_GOOD_FAILS of them reach some other node and
      it fails with more peers than it reaches, again without the nodes taken; a failing path left over (2 nodes,
      one path alone, a fabric where every path fails) is a bad link (link.path_mtu). No pair is launched across a
      failing path, and a node found bad here is not paired.
  Node stage (each node alone): a doctor "fail" or no doctor result, an intra-node point that failed (no value) or a
      loopback point of a rail that failed make the node bad, and it is not paired. Intra-node bus bandwidth and a
      rail's loopback bandwidth below the fleet's band (rules/screen_bands.fleet_band) make the node / rail
      suspect: one value against the fleet, no second opinion.

Pure: plain data in and out.
"""
from ..model.doctor_paths import path_mtu_down, path_mtu_ends
from .screen_attribution import MIN_GOOD_FAILS
from .screen_bands import SINGLE_VALUE_FLOOR_RATIO, fleet_band, outside, positive_number
from .screen_codes import (BAD, LINK_PATH_DOWN, LINK_PATH_MTU, NODE_DOCTOR_FAIL, NODE_DOCTOR_NO_RESULT,
                           NODE_NOT_STARTED,
                           NODE_INTRA_FAILED, NODE_INTRA_SLOW, NODE_PATH_MTU, RAIL_DEAD, RAIL_LOOPBACK_FAILED,
                           RAIL_LOOPBACK_SLOW, SUSPECT)
from .screen_findings import make_reason


def intra_untimed(stage):
    """An intra-node point whose speed judges nothing: one rank (no bus bandwidth) or the MPI backend on host
    memory (correctness only: its times are the host's load, 0.2-1.5 GB/s on one loaded 2-core machine)."""
    return stage.get("intra_ranks") == 1 or bool(stage.get("intra_correctness_only"))


def path_mtu_verdicts(nodes, path_checks):
    """The path MTU step's verdicts over the doctor's path_mtu checks between these nodes (rules above):
    ({node: [(BAD, NODE_PATH_MTU, detail, rail or None)]}, [link rows], blocked: {frozenset((a, b))} of the
    failing paths, which no pair may cross). Checks of other hosts and skips are left out."""
    fleet = set(nodes)
    findings = {node: [] for node in nodes}
    failed, passed = {}, set()
    for check in path_checks or ():
        ends = path_mtu_ends(check)
        if ends is None or check.get("status") not in ("pass", "fail") or ends[0] not in fleet:
            continue
        host, netdev, peer, peer_netdev = ends
        if peer is None:  # no interface on a rail subnet: that host's own fault
            if check["status"] == "fail":
                findings[host].append((BAD, NODE_PATH_MTU, {"peers": [], "rails": [], "words": check.get("detail")},
                                       None))
            continue
        if peer not in fleet:
            continue
        key = frozenset((host, peer))
        if check["status"] == "fail":
            failed.setdefault(key, []).append({"rails": {host: netdev, peer: peer_netdev},
                                               "words": check.get("detail"), "down": path_mtu_down(check)})
        else:
            passed.add(key)
    # Indexed by node once (the probes are every ordered pair of nodes on every rail: 33 million at 4,096 nodes),
    # so that each step below costs the node's own paths, never the fleet's.
    reaches = {node: set() for node in nodes}
    for key in passed - set(failed):
        a, b = tuple(key)
        reaches[a].add(b)
        reaches[b].add(a)
    failing_peers = {}
    for key in failed:
        a, b = tuple(key)
        failing_peers.setdefault(a, set()).add(b)
        failing_peers.setdefault(b, set()).add(a)
    failed_with = {node: set(peers) for node, peers in failing_peers.items()}
    unexplained, taken = dict(failed), set()
    while True:
        candidates = []
        for node in sorted(failing_peers):
            if node in taken:
                continue
            peers = failing_peers[node]
            good = [peer for peer in peers if len(reaches[peer]) > (node in reaches[peer])]  # reaches another
            if len(good) >= MIN_GOOD_FAILS and len(peers) > len(reaches[node]):
                candidates.append((-len(peers), node))
        if not candidates:
            break
        _, node = min(candidates)
        taken.add(node)
        paths = []
        for other in sorted(failing_peers.pop(node)):
            paths += unexplained.pop(frozenset((node, other)))
            failing_peers[other].discard(node)
            if not failing_peers[other]:
                del failing_peers[other]
        for rail in sorted({path["rails"][node] for path in paths}):
            on_rail = [path for path in paths if path["rails"][node] == rail]
            # No echo at any size on every path of that rail: the rail is dead there, not too small.
            code = RAIL_DEAD if all(path["down"] for path in on_rail) else NODE_PATH_MTU
            peers_on_rail = sorted(other for other in failed_with[node]
                                   if any(path["rails"].get(node) == rail for path in failed[frozenset((node, other))]))
            findings[node].append((BAD, code, {"peers": peers_on_rail, "rails": [rail],
                                               "words": on_rail[0]["words"]}, rail))
    links = []
    for key, paths in sorted(unexplained.items(), key=lambda item: sorted(item[0])):
        code = LINK_PATH_DOWN if all(path["down"] for path in paths) else LINK_PATH_MTU
        links.append({"a": min(key), "b": max(key), "verdict": BAD, "reasons": [make_reason(code, {
            "rails": sorted({f"{host}:{rail}" for path in paths for host, rail in path["rails"].items()}),
            "words": paths[0]["words"]}, [])]})
    return findings, links, set(failed)


def on_failing_paths(nodes, path_checks):
    """The nodes that path_mtu_verdicts puts on a failing path, in the nodes' order: each node it finds bad there
    (node.path_mtu, rail.dead) and both ends of each failing link it leaves over. [] without checks."""
    findings, links, _ = path_mtu_verdicts(nodes, path_checks)
    ends = {node for node, found in findings.items() if found}
    for link in links:
        ends.update((link["a"], link["b"]))
    return [node for node in nodes if node in ends]


def node_stage_verdicts(nodes, node_stage, path_checks=None, path_mtu=None):
    """The node stage's verdicts: {node: [(verdict, code, detail, rail or None)]} and the nodes that go on to the
    pair stage. node_stage: {node: {"doctor": "pass"|"warn"|"fail"|None, "intra_busbw_gbps": x|None,
    "intra_small_time_us": y|None, "loopback_busbw_gbps": {rail: x|None}, optional "intra_reason": text and
    "loopback_reason": {rail: text} (why a value is missing: carried into the reason's detail), optional
    "intra_ranks": n}} (a node absent: no doctor result and no intra-node values). At one rank (one GPU a node) the
    intra-node point crosses no link: it has no bus bandwidth by definition (coll_perf writes null with
    busbw_reason), so only its small-message time must exist, and the node is never compared on busbw.
    path_checks: the path MTU step's checks (path_mtu_verdicts), None when it did not run; path_mtu: their
    path_mtu_verdicts where the caller has them (a screen computes them once), else computed from path_checks."""
    if path_mtu is None:
        path_mtu = path_mtu_verdicts(nodes, path_checks)
    findings = {node: list(path_mtu[0].get(node, ())) for node in nodes}
    intra_band = fleet_band([(node_stage.get(n) or {}).get("intra_busbw_gbps") for n in nodes
                             if not intra_untimed(node_stage.get(n) or {})], True,
                            bw_floor_ratio=SINGLE_VALUE_FLOOR_RATIO)
    rails = sorted({rail for n in nodes for rail in ((node_stage.get(n) or {}).get("loopback_busbw_gbps") or {})})
    loop_bands = {rail: fleet_band([((node_stage.get(n) or {}).get("loopback_busbw_gbps") or {}).get(rail)
                                    for n in nodes], True, bw_floor_ratio=SINGLE_VALUE_FLOOR_RATIO)
                  for rail in rails}
    for node in nodes:
        stage = node_stage.get(node) or {}
        doctor = stage.get("doctor")
        if stage.get("not_started"):  # the launcher's own words: it could not start the node (execute/screen.py)
            findings[node].append((BAD, NODE_NOT_STARTED, {"launcher": stage["not_started"]}, None))
        if doctor == "fail":
            findings[node].append((BAD, NODE_DOCTOR_FAIL, {"doctor": doctor}, None))
        elif doctor not in ("pass", "warn"):
            findings[node].append((BAD, NODE_DOCTOR_NO_RESULT, {"doctor": doctor}, None))
        busbw, small = stage.get("intra_busbw_gbps"), stage.get("intra_small_time_us")
        if intra_untimed(stage) and positive_number(small):
            pass  # one rank (no link crossed) or the MPI backend on host memory (correctness only): it ran
        elif not positive_number(busbw) or not positive_number(small):
            findings[node].append((BAD, NODE_INTRA_FAILED, {"intra_busbw_gbps": busbw if positive_number(busbw) else None,
                                                           "intra_small_time_us": small if positive_number(small) else None,
                                                           "reason": stage.get("intra_reason")}, None))
        elif outside(busbw, intra_band, True):
            findings[node].append((SUSPECT, NODE_INTRA_SLOW, {"intra_busbw_gbps": busbw,
                                                             "fleet_median": intra_band["median"],
                                                             "limit": intra_band["limit"]}, None))
        loopbacks = stage.get("loopback_busbw_gbps") or {}
        # A loopback failure is the rail's only when something else on the node ran (its intra-node point or a
        # sibling rail's loopback): a node that started nothing (unreachable, crashed) is bad as a node, its rails
        # unjudged.
        node_ran = positive_number(small) or positive_number(busbw) or any(positive_number(value) for value in loopbacks.values())
        for rail, value in sorted(loopbacks.items()):
            if not positive_number(value) and not node_ran:
                continue
            if not positive_number(value):
                findings[node].append((BAD, RAIL_LOOPBACK_FAILED, {"loopback_busbw_gbps": None,
                                                                  "reason": (stage.get("loopback_reason") or {})
                                                                  .get(rail)}, rail))
            elif outside(value, loop_bands[rail], True):
                findings[node].append((SUSPECT, RAIL_LOOPBACK_SLOW, {"loopback_busbw_gbps": value,
                                                                    "fleet_median": loop_bands[rail]["median"],
                                                                    "limit": loop_bands[rail]["limit"]}, rail))
    paired = [node for node in nodes if not any(verdict == BAD for verdict, *_ in findings[node])]
    return findings, paired
