"""The codes of `cclbench screen`'s verdicts, as data: verdict words, exit codes, reason codes, pair outcomes, the
checks a screen judged or could not, and what each reason code means (REASON_MEANINGS: docs/verdicts.md is
generated from it by render/docs.py, so the prose and the rules share one source). No logic.
"""

ACCEPT, SUSPECT, BAD = "accept", "suspect", "bad"
EXIT_CODES = {"pass": 0, "fail": 1, "suspect": 3}

# Reason codes (stable; REASON_MEANINGS below explains them in docs/verdicts.md).
NODE_DOCTOR_FAIL = "node.doctor_fail"
NODE_DOCTOR_NO_RESULT = "node.doctor_no_result"
NODE_NOT_STARTED = "node.not_started"
NODE_PATH_MTU = "node.path_mtu"
LINK_PATH_MTU = "link.path_mtu"
RAIL_DEAD = "rail.dead"
LINK_PATH_DOWN = "link.path_down"
NODE_INTRA_FAILED = "node.intra_failed"
NODE_INTRA_SLOW = "node.intra_slow"
NODE_SLOW_WITH_GOOD_PARTNERS = "node.slow_with_good_partners"
NODE_FAILED_WITH_GOOD_PARTNERS = "node.failed_with_good_partners"
NODE_UNRESOLVED = "node.failed_pairs_unresolved"
NODE_NO_GOOD_PARTNER = "node.no_good_partner"
LINK_SLOW_PAIR = "link.slow_pair"
LINK_FAILED_PAIR = "link.failed_pair"
LINK_NOT_REPRODUCED = "link.not_reproduced"
LINK_UNRESOLVED = "link.unresolved"
RAIL_LOOPBACK_FAILED = "rail.loopback_failed"
RAIL_LOOPBACK_SLOW = "rail.loopback_slow"
RAIL_UNBALANCED = "rail.unbalanced"
RAIL_UNBALANCED_UNRESOLVED = "rail.unbalanced_unresolved"
RAIL_SLOW = "rail.slow"
RAIL_SLOW_UNRESOLVED = "rail.slow_unresolved"
REASON_CODES = (NODE_DOCTOR_FAIL, NODE_DOCTOR_NO_RESULT, NODE_INTRA_FAILED, NODE_INTRA_SLOW,
                NODE_SLOW_WITH_GOOD_PARTNERS, NODE_FAILED_WITH_GOOD_PARTNERS, NODE_UNRESOLVED, NODE_NO_GOOD_PARTNER,
                LINK_SLOW_PAIR, LINK_FAILED_PAIR, LINK_NOT_REPRODUCED, LINK_UNRESOLVED, RAIL_LOOPBACK_FAILED,
                RAIL_LOOPBACK_SLOW, RAIL_UNBALANCED, RAIL_UNBALANCED_UNRESOLVED, RAIL_SLOW, RAIL_SLOW_UNRESOLVED,
                NODE_PATH_MTU, LINK_PATH_MTU, RAIL_DEAD, LINK_PATH_DOWN, NODE_NOT_STARTED)

# Pair outcomes.
PAIR_OK, PAIR_FAILED, PAIR_SLOW_BUSBW, PAIR_SLOW_SMALL = "ok", "failed", "slow_busbw", "slow_small"
PAIR_SLOW_RAIL = "slow_rail"
# A rail point: one pair, one rail alone (its row's "rail" names it); judged against its siblings, not the fleet.
RAIL_STAGE = "rail"

# What a screen judged and what it could not (document "judged" / "not_judged"), as codes.
CHECK_FAILURES = "failures"                  # every launch that failed: always judged
CHECK_NODE_STAGE = "node_stage"              # the doctor, the intra-node point, the loopback points ran
CHECK_NODE_SPEED = "node_stage_speed"        # intra-node and loopback speed against the fleet
CHECK_PAIR_SPEED = "pair_speed"              # each pair against the pairs that leave its nodes out
CHECK_ATTRIBUTION = "node_attribution"       # which node of a failing pair is at fault
CHECK_RAIL_BALANCE = "rail_balance"          # each rail's share of a pair's bytes (counters)
CHECK_RAIL_SPEED = "rail_speed"              # each rail alone against its sibling alone
CHECK_PATH_MTU = "path_mtu"                  # a don't-fragment echo of each rail's MTU between the nodes
CHECKS = (CHECK_FAILURES, CHECK_NODE_STAGE, CHECK_NODE_SPEED, CHECK_PAIR_SPEED, CHECK_ATTRIBUTION,
          CHECK_RAIL_BALANCE, CHECK_RAIL_SPEED, CHECK_PATH_MTU)
# Why a check was not judged.
NOT_JUDGED_FEW_NODES = "few_nodes"           # fewer nodes than the check needs (detail: nodes, needed)
NOT_JUDGED_CORRECTNESS_ONLY = "correctness_only"  # the MPI backend on host memory: its speed is the host's load
NOT_JUDGED_NO_COUNTERS = "no_rail_counters"  # no pair recorded bytes per rail for two rails or more
NOT_JUDGED_NO_RAIL_POINTS = "no_rail_points"  # fewer than two rails given (--hcas / --netdevs): nothing alone
NOT_JUDGED_NOT_PROBED = "not_probed"  # no path MTU probe ran (fewer than two nodes paired, a fixture sysfs root)
NOT_JUDGED_REASONS = (NOT_JUDGED_FEW_NODES, NOT_JUDGED_CORRECTNESS_ONLY, NOT_JUDGED_NO_COUNTERS,
                      NOT_JUDGED_NO_RAIL_POINTS, NOT_JUDGED_NOT_PROBED)
# Pair speed and attribution need a third node: a pair's reference leaves both of its nodes out in turn.
MIN_NODES_TO_COMPARE = 3


# What each reason code means and what to check, next to the codes so that docs/verdicts.md (render/docs.py,
# `cclbench docs`) and the rules share one source: code -> (verdict it gives, means, check, constants as
# "module.NAME" in rules/). A code of REASON_CODES without an entry fails tests/scripts/test_docs.py.
REASON_MEANINGS = {
    NODE_DOCTOR_FAIL: (BAD, "The node's doctor failed a check; the node is not paired.",
                       "The doctor's detail for the node (screen.json, logs/); fix and rerun.", ()),
    NODE_DOCTOR_NO_RESULT: (BAD, "The node's doctor left no result (it could not be started or reached).",
                            "The node's job output in logs/: ssh, the launcher, the node itself.", ()),
    NODE_NOT_STARTED: (BAD, "The launcher could not start the node (its own words in the detail: ssh could not "
                       "connect, srun could not launch a task there); it was dropped from every later launch, and "
                       "its pairs are not held against its partners.",
                       "ssh or slurmd on the node, its management network, its name (logs/launch.*.log).", ()),
    NODE_PATH_MTU: (BAD, "Don't-fragment packets of the rail's MTU do not get from this node to at least two "
                    "nodes that reach others (or it has no interface on a rail's subnet): NCCL would hang on those "
                    "paths. The node is not paired.",
                    "The detail's words: the largest packet that gets through names the hop; the switch port or "
                    "bridge MTU against the host's (`ip link`, `cclbench doctor --hosts`).",
                    ("screen_attribution.MIN_GOOD_FAILS",)),
    RAIL_DEAD: (BAD, "No echo at all, even at the smallest size, on every path of this rail from the node to at least "
                "two nodes that reach others: the rail is down or blocked at this node. The node is not paired.",
                "The rail's link state, cable and switch port (`ip link`, `cclbench doctor`).",
                ("screen_attribution.MIN_GOOD_FAILS",)),
    LINK_PATH_DOWN: (BAD, "No echo at all crosses this path and no node explains it (two nodes, or one path "
                     "alone). No pair crosses it.",
                     "Both ends' link state and the switch between them (`ip link`, `cclbench doctor --hosts`).", ()),
    LINK_PATH_MTU: (BAD, "Don't-fragment packets of the rail's MTU do not cross this path and no node explains "
                    "it (two nodes, one path alone, or every path of the fabric). No pair crosses it.",
                    "The switch ports and MTUs at both ends (`ip link`); the largest size in the detail.", ()),
    NODE_INTRA_FAILED: (BAD, "The node's intra-node point failed (no value); the node is not paired.",
                        "The intra job's output in logs/: GPUs, NCCL, the driver.", ()),
    NODE_INTRA_SLOW: (SUSPECT, "The node's intra-node bus bandwidth is below the fleet's band: one value against "
                      "the fleet, no second opinion.",
                      "The node's GPUs and PCIe/NVLink (`cclbench doctor`, `cclbench baseline` on it alone).",
                      ("screen_bands.NOISE_SIGMAS", "screen_bands.SINGLE_VALUE_FLOOR_RATIO",
                       "screen_bands.MIN_FLEET_VALUES")),
    NODE_SLOW_WITH_GOOD_PARTNERS: (BAD, "The node's pairs were slow (bandwidth below, or small-message time above, "
                                   "the band of the pairs that touch neither of a pair's nodes: never a median its "
                                   "own node pulls down; from MIN_SPREAD_VALUES values the band, else a fixed "
                                   "fraction of the median; the small-message time judged by its own scatter, as "
                                   "the bandwidth is) with at least two distinct known-good partners. At 2 "
                                   "nodes there is no other pair: pair speed is not judged (screen.json "
                                   "`not_judged`).",
                                   "The node's NICs, cables and switch ports; its doctor; then its GPUs. Slow small "
                                   "messages alone (bandwidth intact): its NIC and PCIe settings, interrupt and "
                                   "CPU binding, firmware.",
                                   ("screen_bands.HOST_TIMES_WIDENING", "screen_attribution.MIN_GOOD_FAILS", "screen_bands.BW_FLOOR_RATIO",
                                    "screen_bands.SMALL_TIME_FLOOR_FACTOR", "screen_bands.TIME_FLOOR_FACTOR",
                                    "screen_bands.NOISE_SIGMAS",
                                    "screen_bands.MIN_SPREAD_VALUES", "screen_bands.REFERENCE_FLOOR_RATIO")),
    NODE_FAILED_WITH_GOOD_PARTNERS: (BAD, "The node's pairs failed (no value) with at least two distinct "
                                     "known-good partners.",
                                     "The pair jobs' output in logs/: NCCL's errors, timeouts.",
                                     ("screen_attribution.MIN_GOOD_FAILS",)),
    NODE_UNRESOLVED: (SUSPECT, "The node failed pairs, but not with enough known-good partners to call it bad.",
                      "The pairs behind the reason; a retest against good nodes, or a full screen.",
                      ("screen_attribution.MIN_GOOD_FAILS",)),
    NODE_NO_GOOD_PARTNER: (SUSPECT, "The node never passed with a known-good node (or never met one): nothing "
                           "vouches for it.",
                           "Run a full screen, or `--quick` with more rounds.", ()),
    LINK_SLOW_PAIR: (BAD, "One pair was slow against the pairs that touch neither of its nodes, reproducibly, "
                     "while both its nodes pass with others: the path between them.",
                     "The switch ports and cables between the two nodes; the fabric's routing.",
                     ("screen_bands.HOST_TIMES_WIDENING", "screen_bands.BW_FLOOR_RATIO", "screen_bands.TIME_FLOOR_FACTOR",
                      "screen_bands.REFERENCE_FLOOR_RATIO")),
    LINK_FAILED_PAIR: (BAD, "One pair failed, reproducibly, while both its nodes pass with others; at 2 nodes, the "
                            "one pair failed every time it ran, at least twice (which end cannot be told: both "
                            "nodes stay suspect).",
                       "The pair's job output in logs/; the path between the two nodes.", ()),
    LINK_NOT_REPRODUCED: (SUSPECT, "One pair failed once and the failure was not (yet) reproduced.",
                          "Nothing unless it repeats; a `--resume` or another screen retests it.", ()),
    LINK_UNRESOLVED: (SUSPECT, "A pair failed and the fleet's other pairs cannot tell the link from its nodes.",
                      "The pairs behind the reason; more rounds.", ()),
    RAIL_LOOPBACK_FAILED: (BAD, "A rail's loopback point (all traffic through that one NIC) failed while something "
                           "else on the node ran (its intra-node point or a sibling rail's loopback); a node that "
                           "ran nothing is bad as a node and its rails are not judged.",
                           "The rail's port state, cable and GID (`cclbench doctor`).", ()),
    RAIL_LOOPBACK_SLOW: (SUSPECT, "A rail's loopback bandwidth is below the fleet's band.",
                         "The rail's link speed and PCIe link; its error counters.",
                         ("screen_bands.SINGLE_VALUE_FLOOR_RATIO", "screen_bands.NOISE_SIGMAS")),
    RAIL_UNBALANCED: (BAD, "A rail of the node carried far less than its busiest sibling in its pairs, with "
                      "known-good partners.",
                      "That rail's port, cable and switch port (`ip link`, the doctor's path_mtu).",
                      ("screen_rails.RAIL_LOW_RATIO", "screen_attribution.MIN_GOOD_FAILS")),
    RAIL_UNBALANCED_UNRESOLVED: (SUSPECT, "A rail was low in some pairs, but not enough to name whose rail it is.",
                                 "The pairs behind the reason; the rail on both nodes.",
                                 ("screen_rails.RAIL_LOW_RATIO",)),
    RAIL_SLOW: (BAD, "A rail alone was below its sibling alone on the same pairs (the ratio is in the reason): "
                "below RAIL_SLOW_RATIO and the rail ratios' own noise, or, from RAIL_NOISE_FLEET_GROUPS pairs of "
                "rail points on, below that noise alone (a rail at half or 0.7 of its sibling on a quiet fleet); or "
                "its small-message time above its sibling's by the mirror of that limit (small_time_ratio); with "
                "known-good partners; at two nodes, on the only pair, twice: the link's rail. GPU-less nodes "
                "(host-memory times) need the ratio widened HOST_TIMES_WIDENING-fold.",
                "That rail's link speed (a 400G link trained at 200G), cable, optics, switch port and rate limits on "
                "both ends (`ethtool`, `ibstat`, the doctor's links); its error counters.",
                ("screen_rails.RAIL_SLOW_RATIO", "screen_rails.RAIL_NOISE_MIN_GROUPS",
                 "screen_rails.RAIL_NOISE_FLEET_GROUPS", "screen_bands.BW_FLOOR_RATIO",
                 "screen_attribution.MIN_GOOD_FAILS", "screen_bands.HOST_TIMES_WIDENING")),
    RAIL_SLOW_UNRESOLVED: (SUSPECT, "A rail alone was slow against its sibling in some pairs, but not enough to "
                           "name whose rail it is (or, at two nodes, which end).",
                           "The rail on both nodes of the pairs behind the reason; a screen with more nodes.",
                           ("screen_rails.RAIL_SLOW_RATIO",)),
}
