"""screen.md of `cclbench screen`: the bad nodes, links and rails first, then the per-node table, the
pair matrix (a heatmap PNG when matplotlib is there and the fleet is small enough to read, else a markdown
matrix), the suspects with their evidence and every pair. Text only from screen.json and the rules' codes."""

import os

from ..base.files import write_atomic
from ..render.markdown import fmt_number, md_table
from ..render.plots import heatmap_figure, save
from ..render.report import load_pyplot
from ..rules import screen_rules as rules

REPORT = "screen.md"
HEATMAP = "screen_pairs.png"
# A matrix is read cell by cell: beyond this many nodes it is not drawn (the pair list and the verdicts remain).
MATRIX_MAX_NODES = 32
HEATMAP_MAX_NODES = 32

CODE_TEXT = {
    rules.NODE_DOCTOR_FAIL: "the doctor failed a check",
    rules.NODE_DOCTOR_NO_RESULT: "the doctor left no result",
    rules.NODE_NOT_STARTED: "the launcher could not start it (its words in the detail); dropped from later launches",
    rules.NODE_PATH_MTU: "packets of the rail's MTU do not get through to its peers",
    rules.LINK_PATH_MTU: "packets of the rail's MTU do not cross this path",
    rules.RAIL_DEAD: "no echo at all on this rail to its peers: down or blocked",
    rules.LINK_PATH_DOWN: "no echo at all crosses this path",
    rules.NODE_INTRA_FAILED: "the intra-node point failed",
    rules.NODE_INTRA_SLOW: f"intra-node bus bandwidth below the fleet's band (at most "
                           f"{rules.SINGLE_VALUE_FLOOR_RATIO:g} x its median)",
    rules.NODE_SLOW_WITH_GOOD_PARTNERS: f"slow, against pairs it did not shape, with at least {rules.MIN_GOOD_FAILS} "
                                        "known-good partners",
    rules.NODE_FAILED_WITH_GOOD_PARTNERS: f"failed with at least {rules.MIN_GOOD_FAILS} known-good partners",
    rules.NODE_UNRESOLVED: "failed pairs not yet explained",
    rules.NODE_NO_GOOD_PARTNER: "never passed with a known-good node",
    rules.LINK_SLOW_PAIR: "this pair alone is slow, both nodes pass with others",
    rules.LINK_FAILED_PAIR: "this pair alone fails, both nodes pass with others",
    rules.LINK_NOT_REPRODUCED: "one failure of this pair, not reproduced yet",
    rules.LINK_UNRESOLVED: "failed pair not yet explained",
    rules.RAIL_LOOPBACK_FAILED: "the rail's loopback point failed",
    rules.RAIL_LOOPBACK_SLOW: "the rail's loopback below the fleet's band",
    rules.RAIL_UNBALANCED: f"the rail carried less than {rules.RAIL_LOW_RATIO:g} x its sibling's bytes, with "
                           "known-good partners",
    rules.RAIL_UNBALANCED_UNRESOLVED: f"the rail carried less than {rules.RAIL_LOW_RATIO:g} x its sibling's bytes, "
                                      "not yet attributed",
    rules.RAIL_SLOW: f"the rail alone below {rules.RAIL_SLOW_RATIO:g} x its sibling alone on the same pair, or "
                     "below its fleet's rail noise (ratio and threshold in the evidence; or its small messages slower, "
                     "small_time_ratio), with known-good partners or, at two nodes, reproduced",
    rules.RAIL_SLOW_UNRESOLVED: f"the rail alone below {rules.RAIL_SLOW_RATIO:g} x its sibling alone or its fleet's "
                                "rail noise, not yet attributed (retested with known-good partners)",
}

CHECK_TEXT = {
    rules.CHECK_FAILURES: "launch failures",
    rules.CHECK_NODE_STAGE: "the node stage (doctor, intra-node point, loopback points)",
    rules.CHECK_NODE_SPEED: "node-stage speed against the fleet",
    rules.CHECK_PAIR_SPEED: "pair speed against the pairs its nodes did not shape",
    rules.CHECK_ATTRIBUTION: "which node of a failing pair is at fault",
    rules.CHECK_RAIL_BALANCE: "each rail's share of a pair's bytes",
    rules.CHECK_RAIL_SPEED: "each rail alone against its sibling alone",
    rules.CHECK_PATH_MTU: "packets of each rail's MTU between the nodes (don't fragment)",
}

NOT_JUDGED_TEXT = {
    rules.NOT_JUDGED_FEW_NODES: "{nodes} node(s), {needed} needed",
    rules.NOT_JUDGED_CORRECTNESS_ONLY: "the MPI backend on host memory measures correctness, its speed is the host's "
                                       "load",
    rules.NOT_JUDGED_NO_COUNTERS: "no pair recorded bytes per rail for two rails (--netdevs or --hcas)",
    rules.NOT_JUDGED_NOT_PROBED: "no path probed (fewer than two nodes passed the node stage, a fixture sysfs root, "
                                 "or no interface addresses)",
    rules.NOT_JUDGED_NO_RAIL_POINTS: "no two rails to measure alone (--hcas or --netdevs with two rails or more)",
}


def _not_judged_text(entry):
    detail = entry.get("detail") or {}
    try:
        why = NOT_JUDGED_TEXT.get(entry["reason"], entry["reason"]).format(**detail)
    except (KeyError, IndexError):
        why = entry["reason"]
    return f"{CHECK_TEXT.get(entry['check'], entry['check'])} ({why})"


def rules_text():
    """How the screen judges, from the rules' constants."""
    return [
        f"- A pair is judged against every pair that touches neither of its nodes nor a node found bad (at "
        f"{rules.MIN_NODES_TO_COMPARE} nodes, the stricter of the pairs without either node): from "
        f"{rules.MIN_SPREAD_VALUES} values on, slow below median x min({rules.BW_FLOOR_RATIO:g}, "
        f"exp(-{rules.NOISE_SIGMAS:g} sd)) (sd: {rules.MAD_TO_SD:g} x MAD of the log values, raised by "
        f"{rules.MAD_SE_BOUND:g} standard errors), small-message time above median x "
        f"max({rules.SMALL_TIME_FLOOR_FACTOR:.3g}, exp({rules.NOISE_SIGMAS:g} sd)) (its own scatter at the small size, "
        f"as the bandwidth's); with fewer values below {rules.REFERENCE_FLOOR_RATIO:g} x their median "
        f"(time above {max(rules.TIME_FLOOR_FACTOR, 1 / rules.REFERENCE_FLOOR_RATIO):g} x). With none (2 nodes) pair "
        "speed is not judged. Pairs of GPU-less nodes (the MPI backend on host memory, whose times are the hosts' "
        f"load) are judged with every floor widened {rules.HOST_TIMES_WIDENING:g}x (time: "
        f"{rules.TIME_FLOOR_FACTOR:g} x {rules.HOST_TIMES_WIDENING:g}).",
        f"- A node is bad when it fails with at least {rules.MIN_GOOD_FAILS} known-good partners and with more of "
        "them than it passes with; a link when one pair alone fails, at least twice, and both nodes pass with others.",
        f"- A rail alone below {rules.RAIL_SLOW_RATIO:g} x its sibling alone on the same pair, and below "
        f"exp(-{rules.NOISE_SIGMAS:g} sd) of the fleet's rail ratios (from {rules.RAIL_NOISE_MIN_GROUPS} pairs on), "
        f"is slow there (rail.slow); from {rules.RAIL_NOISE_FLEET_GROUPS} pairs on the rail ratios' own noise alone "
        f"decides, below min({rules.BW_FLOOR_RATIO:g}, exp(-{rules.NOISE_SIGMAS:g} sd)) (sd raised by "
        f"{rules.MAD_SE_BOUND:g} standard errors), so that a rail at half its sibling or 0.7 is named; its "
        "small-message time above its sibling's by the mirror of that limit is slow too. "
        f"A rail carrying less than {rules.RAIL_LOW_RATIO:g} x its sibling's bytes is low "
        f"(rail.unbalanced); both attributed as pairs are. GPU-less nodes: the rail ratio too is widened "
        f"{rules.HOST_TIMES_WIDENING:g}x.",
        f"- Before the pairs, a don't-fragment echo of each rail's MTU goes from every node to every other: a node "
        f"whose paths fail to at least {rules.MIN_GOOD_FAILS} nodes that reach others is bad (node.path_mtu) and not "
        "paired; a failing path no node explains is a bad link (link.path_mtu); no pair crosses a failing path.",
    ]


def _codes(reasons):
    return ", ".join(sorted({reason["code"] for reason in reasons})) or "-"


def _named(rows, verdict, label):
    return [label(row) + f" ({_codes(row['reasons'])})" for row in rows if row["verdict"] == verdict]


def _times(ratio):
    return f"x{ratio:.2f}"


def cause_text(cause):
    """One shared cause (rules/screen_causes.py) in words: the group (and its rail) first, then what it measured."""
    codes = ", ".join(cause["codes"])
    if cause["kind"] == "group":
        flagged = len(cause["nodes"]) + len(cause.get("suspect") or [])
        parts = []
        for rail in cause["rails"]:
            ratio = (cause.get("rail_ratios") or {}).get(rail)
            small = (cause.get("rail_small_time_ratios") or {}).get(rail)
            parts.append(f"{rail}" + (f" at {_times(ratio)} of its sibling" if ratio is not None else "")
                         + (f", small messages {_times(small)} its sibling's" if small is not None else ""))
        if cause.get("busbw_ratio") is not None:
            parts.append(f"pairs at {_times(cause['busbw_ratio'])} of their reference")
        if cause.get("small_time_ratio") is not None:
            parts.append(f"small messages {_times(cause['small_time_ratio'])} their reference's")
        what = "; ".join(parts) or "bad together"
        links = [f"{link['a']}-{link['b']}" for link in cause.get("explained_links") or ()]
        return (f"{cause['group']} {what} ({flagged} of {cause['group_nodes']} nodes: {len(cause['nodes'])} bad, "
                f"{len(cause.get('suspect') or [])} suspect; {codes}): look at what they share (the switch, its "
                "optics and uplinks, the rack) before the nodes one by one"
                + (f"; the group's ratio explains the slow pairs of {', '.join(links)}, not named as "
                   f"link{'s' if len(links) > 1 else ''}" if links else ""))
    return (f"{len(cause['nodes'])} bad nodes have the same rail bad, {cause['rail']} ({codes}): look at that rail's "
            "fabric and configuration before the nodes one by one")


OPEN_TEXT = {
    "budget": "the retest budget ({budget_s:g} s) was spent",
    "no_partner": "no known-good node it has not met was left",
    "passes": "the most retest passes a screen runs were run",
    "node_stage": "a node-stage value against the fleet, which no pair retest settles",
}


def open_text(retests):
    """The suspects left open when the retests ended, grouped by why (screen.json "retests")."""
    by_why = {}
    for entry in retests["open"]:
        by_why.setdefault(entry["why"], []).append(entry["node"])
    parts = []
    for why, nodes in sorted(by_why.items()):
        shown = ", ".join(nodes[:12]) + (f" and {len(nodes) - 12} more" if len(nodes) > 12 else "")
        parts.append(f"{len(nodes)} suspect(s) not named nor cleared ({shown}): "
                     + OPEN_TEXT.get(why, why).format(**retests))
    return "; ".join(parts) + f" (after {retests['passes']} retest pass(es), {retests['spent_s']:.0f} s)"


def dropped_text(entry):
    """Why a node left the pair rounds early (schedule.dropped[], execute/screen.py), and what it cost."""
    node = entry["node"]
    if "not_started" in entry:
        why = f"{node}: its launcher could not start it ({entry['not_started']})"
    elif "dead_paths" in entry:
        why = (f"{node}: its paths were found dead mid-screen ({entry['dead_paths']}: the path check after its pair "
               f"with {entry['failed_with'][0]} failed)")
    else:
        why = f"{node}: failed its pairs with {' and '.join(entry['failed_with'])}, which measured with other nodes"
    return why + f", {entry['skipped']} later pair job(s) not run"


def headline(document):
    """The report's first lines: the result, then the bad (and suspect) nodes, links and rails."""
    result = document["result"]
    not_judged = document.get("not_judged") or []
    pair_speed_open = any(entry["check"] == rules.CHECK_PAIR_SPEED for entry in not_judged)
    measured = [pair for pair in document["pairs"] if pair.get("stage") != rules.RAIL_STAGE]
    rail_points = len(document["pairs"]) - len(measured)
    lines = [f"# Screen: {result.upper()} ({len(document['nodes'])} nodes, {len(measured)} pair measurements"
             + (f", {rail_points} rail-alone point(s)" if rail_points else "") + f", exit {document['exit_code']})"
             + (" - pair speed not judged: no third node to compare with" if pair_speed_open else ""), ""]
    groups = (("nodes", lambda row: row["name"], [r for r in document["nodes"]]),
              ("links", lambda row: f"{row['a']}-{row['b']}", document["links"]),
              ("rails", lambda row: f"{row['node']} {row['rail']}", document["rails"]))
    for verdict in (rules.BAD, rules.SUSPECT):
        for what, label, rows in groups:
            named = _named(rows, verdict, label)
            lines.append(f"- {verdict.capitalize()} {what}: " + ("; ".join(named) if named else "none"))
    accepted = sum(1 for row in document["nodes"] if row["verdict"] == rules.ACCEPT)
    lines.append(f"- Accepted nodes: {accepted} of {len(document['nodes'])}")
    for cause in document.get("shared_causes") or []:
        lines.append(f"- Shared cause: {cause_text(cause)}")
    for entry in document["schedule"].get("dropped") or ():
        lines.append(f"- Dropped from the rounds: {dropped_text(entry)}")
    retests = document.get("retests")
    if retests and retests["open"]:
        lines.append(f"- Still open: {open_text(retests)}")
    for entry in (retests or {}).get("dropped") or ():
        lines.append(f"- Retests cut short: {entry['node']} failed its pairs of retest pass {entry['pass']} with "
                     f"{' and '.join(entry['failed_with'])}, known good: bad by the rules' own test, "
                     f"{entry['skipped']} further retest job(s) of the pass not run")
    if "judged" in document:
        lines.append("- Judged: " + ("; ".join(CHECK_TEXT.get(entry["check"], entry["check"]) + (
            f" ({', '.join(entry['detail']['rails'])})" if entry["detail"].get("rails") else "")
            for entry in document["judged"]) or "nothing"))
        lines.append("- Not judged: " + ("; ".join(_not_judged_text(entry) for entry in not_judged) or "none"))
    return lines


def pair_matrix(document):
    """(names, matrix) of the median large-size busbw per pair (None: never measured or no value)."""
    names = [row["name"] for row in document["nodes"]]
    position = {name: index for index, name in enumerate(names)}
    values = {}
    for pair in document["pairs"]:
        if pair["busbw_gbps"] is not None and pair.get("stage") != rules.RAIL_STAGE:
            values.setdefault(frozenset((pair["a"], pair["b"])), []).append(pair["busbw_gbps"])
    matrix = [[None] * len(names) for _ in names]
    for key, found in values.items():
        a, b = sorted(key, key=position.get)
        found.sort()
        middle = found[len(found) // 2] if len(found) % 2 else (found[len(found) // 2 - 1] + found[len(found) // 2]) / 2
        matrix[position[a]][position[b]] = matrix[position[b]][position[a]] = middle
    return names, matrix


def _stage_cell(stage):
    loop = stage["loopback_busbw_gbps"]
    return "; ".join(f"{rail} {fmt_number(value)}" if value is not None else f"{rail} failed"
                     for rail, value in sorted(loop.items())) or "-"


def node_table(document):
    counts = {}
    for pair in document["pairs"]:
        if pair.get("stage") == rules.RAIL_STAGE:
            continue
        outcome = pair["outcome"]
        for node in (pair["a"], pair["b"]):
            entry = counts.setdefault(node, [0, 0])
            entry[0] += outcome == rules.PAIR_OK
            entry[1] += 1
    rows = []
    for row in document["nodes"]:
        stage = row["node_stage"]
        ok, total = counts.get(row["name"], (0, 0))
        rows.append([row["name"], row["verdict"], stage["doctor"] or "no result",
                     fmt_number(stage["intra_busbw_gbps"], 3), fmt_number(stage["intra_small_time_us"]),
                     _stage_cell(stage), f"{ok}/{total}" if row["paired"] else "not paired",
                     _codes(row["reasons"])])
    return md_table(["node", "verdict", "doctor", "intra busbw GB/s", "intra small us", "loopback busbw GB/s",
                     "pairs ok", "reasons"], rows)


def markdown_matrix(names, matrix):
    rows = [[name] + ["-" if i == j else ("n/a" if value is None else fmt_number(value, 3))
                      for j, value in enumerate(row)] for i, (name, row) in enumerate(zip(names, matrix))]
    return md_table(["busbw GB/s"] + names, rows)


def plot_pairs(pyplot, path, names, matrix):
    figure, axis, _, _ = heatmap_figure(pyplot, "pair bus bandwidth at the large size (median)", matrix, "GB/s")
    axis.set_xticks(range(len(names)), names, rotation=45, fontsize=7)
    axis.set_yticks(range(len(names)), names, fontsize=7)
    axis.set_xlabel("node")
    axis.set_ylabel("node")
    save(pyplot, figure, path)


def _detail(detail):
    parts = []
    for key, value in sorted(detail.items()):
        if value is None:
            value = "-"
        elif isinstance(value, float):
            value = fmt_number(value, 3)
        elif isinstance(value, list):
            value = ",".join(str(item) for item in value)
        parts.append(f"{key}={value}")
    return " ".join(parts) or "-"


def reasons_section(document):
    rows = []
    for row in document["nodes"]:
        for reason in row["reasons"]:
            rows.append([row["name"], reason["code"], CODE_TEXT.get(reason["code"], ""), _detail(reason["detail"]),
                         ",".join(str(i) for i in reason["pairs"]) or "-"])
    for row in document["links"]:
        for reason in row["reasons"]:
            rows.append([f"{row['a']}-{row['b']}", reason["code"], CODE_TEXT.get(reason["code"], ""),
                         _detail(reason["detail"]), ",".join(str(i) for i in reason["pairs"]) or "-"])
    if not rows:
        return "No reasons: every node accepted."
    return md_table(["node / link", "code", "meaning", "evidence", "pairs"], rows)


def _rails_cell(rail_bytes):
    if not rail_bytes:
        return "-"
    return "; ".join(host + " " + " ".join(f"{rail} {value / 1e6:.1f}MB" for rail, value in sorted(counts.items()))
                     for host, counts in sorted(rail_bytes.items()))


def _transport_cell(transport):
    if not isinstance(transport, dict):
        return "-"
    if transport.get("backend") == "mpi":
        return "MPI backend (no NCCL)"
    return ", ".join(f"{key}={value}" for key, value in sorted(transport.items())
                     if isinstance(value, (str, int, float)))[:80] or "-"


def _reference_cell(pair):
    if pair.get("stage") == rules.RAIL_STAGE:
        ratio = pair.get("rail_ratio")
        return f"{pair.get('rail')} alone: " + ("no sibling to compare" if ratio is None and pair["outcome"] == "ok"
                                                 else f"x{fmt_number(ratio, 3)} of its sibling" if ratio is not None
                                                 else "failed while a sibling ran")
    band = (pair.get("reference") or {}).get("busbw_gbps")
    if not band:
        return "none (not judged)"
    return f"limit {fmt_number(band['limit'], 3)} (median {fmt_number(band['median'], 3)} of {band['values']})"


def pairs_section(document):
    rows = [[str(p["index"]), p["stage"], str(p["round"]), p["a"], p["b"], fmt_number(p["busbw_gbps"], 3),
             fmt_number(p["small_time_us"]), p["outcome"], _reference_cell(p), _transport_cell(p["transport"]),
             _rails_cell(p["rail_bytes"]), p["reason"] or ""] for p in document["pairs"]]
    return md_table(["#", "stage", "round", "a", "b", "busbw GB/s", "small us", "outcome", "judged against",
                     "transport", "rail bytes", "reason"], rows)


def render(document, plot_name=None, plot_note=None):
    lines = headline(document) + ["", "How pairs and rails are judged:", ""] + rules_text() + [""]
    bands = document["bands"]
    for key, unit in (("busbw_gbps", "GB/s bus bandwidth"), ("small_time_us", "us small-message time")):
        band = bands.get(key)
        lines.append(f"Whole fleet, {unit} (for the record; each pair has its own reference): "
                     + (f"median {fmt_number(band['median'], 3)} over {band['values']} values" if band else
                        f"fewer than {rules.MIN_FLEET_VALUES} values"))
    schedule = document["schedule"]
    lines += ["", f"Schedule: {schedule['mode']}"
              + (f" (seed {schedule['seed']}, {schedule['repeats']} shuffled round(s))" if schedule["mode"] == "quick"
                 else "") + f", {len(schedule['rounds'])} round(s) of at most {schedule['concurrent_jobs']} concurrent "
              f"pair(s), {schedule['pair_count']} pair(s); {len(schedule['retest_rounds'])} retest round(s).", "",
              "## Nodes", ""]
    lines += [node_table(document), "", "## Pairs", ""]
    names, matrix = pair_matrix(document)
    if plot_name:
        lines += [f"![pair bus bandwidth]({plot_name})", ""]
    elif plot_note:
        lines += [f"(no heatmap: {plot_note})", ""]
    if len(names) <= MATRIX_MAX_NODES:
        lines += [markdown_matrix(names, matrix), ""]
    else:
        lines += [f"({len(names)} nodes: no matrix; the pairs are listed below)", ""]
    if document.get("simulation"):
        lines += simulation_section(document["simulation"])
    lines += ["## Reasons", "", reasons_section(document), "", "## Every pair measured", "", pairs_section(document)]
    return "\n".join(lines) + "\n"


def simulation_section(simulation):
    """A simulated screen (`--simulate`): its verdict against the fleet's truth (screen.json "simulation")."""
    def share(value):
        return "-" if value is None else f"{value:.1%}"

    rows = [[kind, str(block["truth"]), str(block["named"]), str(block["true_positive"]), share(block["recall"]),
             share(block["precision"]), str(block["suspect_bad"]) if kind != "groups" else "-",
             ", ".join("-".join(item) if isinstance(item, list) else item for item in block["missed"]) or "-"]
            for kind, block in simulation["score"].items()]
    noise = simulation["noise"]
    return ["## Simulation", "",
            f"A simulated fleet ({simulation['fleet']}): {simulation['nodes']} nodes, {simulation['faults']} fault(s), "
            f"healthy noise {noise['busbw_log_sd']:.1%} (bus bandwidth), {noise['small_time_log_sd']:.1%} (small "
            f"time), {noise['rail_log_sd']:.1%} (a rail alone) from {noise['source']}; modelled wall time "
            f"{simulation['modelled_wall_s']:.0f} s; the rules' CPU time "
            f"{sum(simulation['rules_cpu_s'].values()):.2f} s.", "",
            md_table(["bad", "in truth", "named bad", "found", "recall", "precision", "left open (a miss)",
                      "missed"], rows), ""]


def write_report(run_dir, document):
    """screen.md (and screen_pairs.png) in run_dir; returns the report's path."""
    plot_name = plot_note = None
    names, matrix = pair_matrix(document)
    if 2 <= len(names) <= HEATMAP_MAX_NODES and any(v is not None for row in matrix for v in row):
        pyplot, plot_note = load_pyplot()
        if pyplot is not None:
            plot_pairs(pyplot, os.path.join(run_dir, HEATMAP), names, matrix)
            plot_name = HEATMAP
    path = os.path.join(run_dir, REPORT)
    write_atomic(path, render(document, plot_name, plot_note))
    return path

