"""Outliers that name what is slow: a P2P pair or GPU against the pairs of its path class, a GPU's
host<->device bandwidth against the other GPUs, and the straggler rank of a collective.

The rules (docs/bring-up.md, "Outliers and plots"):
  - P2P: in each pair bandwidth test of a p2p_matrix result (the largest size measured), pairs are
    grouped by path class (NV#, PIX, PXB, PHB, NODE, SYS: from the result's capability[].path_class,
    else from the host's topology JSON by PCI bus id). A pair below LOW_RATIO of its class median is
    an outlier; so is a GPU whose row (as source) or column (as destination) sits, as a median of
    its pairs' ratios to their class medians, below LOW_RATIO. Pairs of an unknown class are not
    compared (unlike classes differ by design), nor is a class with fewer than MIN_GROUP pairs
    (with two values nobody can tell which one is low).
  - host<->device: per device-scope bandwidth test, each GPU against the median over the GPUs
    (at least MIN_GROUP GPUs).
  - straggler: per sweep point, from the records' per_rank (schema 1.2): a rank that was the
    slowest in at least half-way between chance (1/n) and always, STRAGGLER_Z standard deviations
    above chance (binomial), and whose mean time is at least STRAGGLER_EXCESS above the ranks'
    median (median over the cases). All three: a rank that is "slowest" by a few nanoseconds every
    time is a tie-break, not a fault.
Latency matrices are shown but not judged here: microsecond latencies jitter by more than 15%.
"""

import math

from ..base.values import format_size
from ..base.numbers import is_finite, median
from ..model.records import base_point_of, is_correctness_only, launch_base_point
from ..model.run_dir import p2p_matrices


LOW_RATIO = 0.85
MIN_GROUP = 3
STRAGGLER_Z = 5.0
STRAGGLER_EXCESS = 0.05


# --- P2P pairs ------------------------------------------------------------------------------------

def path_classes(document, topology=None):
    """{(src, dst): class} for GPU pairs: capability[].path_class of the p2p result, else the topology
    JSON's path_matrix (devices 'GPU<i>' of the topology, matched to the p2p devices by PCI bus id)."""
    classes = {}
    for entry in document.get("capability") or []:
        if isinstance(entry, dict) and isinstance(entry.get("src"), int) and isinstance(entry.get("dst"), int) \
                and isinstance(entry.get("path_class"), str) and entry["path_class"]:
            classes[(entry["src"], entry["dst"])] = entry["path_class"]
    if not isinstance(topology, dict):
        return classes
    names = topology.get("devices") or []
    matrix = topology.get("path_matrix") or []
    by_bus = {}
    for gpu in topology.get("gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("pci_bus_id"), str) and f"GPU{gpu.get('index')}" in names:
            by_bus[gpu["pci_bus_id"].lower()] = names.index(f"GPU{gpu.get('index')}")
    position = {}
    for device in document.get("devices") or []:
        if isinstance(device, dict) and isinstance(device.get("pci_bus_id"), str):
            where = by_bus.get(device["pci_bus_id"].lower())
            if where is not None and isinstance(device.get("index"), int):
                position[device["index"]] = where
    for src, row_at in position.items():
        for dst, column_at in position.items():
            if src == dst or (src, dst) in classes:
                continue
            row = matrix[row_at] if row_at < len(matrix) and isinstance(matrix[row_at], list) else []
            cell = row[column_at] if column_at < len(row) else None
            if isinstance(cell, str) and cell and cell != "X":
                classes[(src, dst)] = cell
    return classes


def pair_outliers(matrix, classes):
    """One bandwidth matrix (rows src, columns dst; None = not measured) against its path classes:
    {"medians": {class: (median, pairs)}, "pairs": [(src, dst, class, value, median)],
     "gpus": [(gpu, "source" | "destination", median ratio, pairs)]}."""
    values = {}
    for src, row in enumerate(matrix):
        for dst, value in enumerate(row):
            cls = classes.get((src, dst))
            if src != dst and is_finite(value) and cls and cls != "X":
                values.setdefault(cls, []).append((src, dst, value))
    medians = {cls: (median(v for _s, _d, v in items), len(items))
               for cls, items in values.items() if len(items) >= MIN_GROUP}
    ratios = {}
    for cls, items in values.items():
        if cls in medians and medians[cls][0] > 0:
            for src, dst, value in items:
                ratios[(src, dst)] = (value / medians[cls][0], cls, value)
    pairs = [(src, dst, cls, value, medians[cls][0]) for (src, dst), (ratio, cls, value) in sorted(ratios.items())
             if ratio < LOW_RATIO]
    gpus = []
    for gpu in sorted({g for pair in ratios for g in pair}):
        for side, index in (("source", 0), ("destination", 1)):
            own = [ratio for pair, (ratio, _c, _v) in ratios.items() if pair[index] == gpu]
            if len(own) >= 2 and median(own) < LOW_RATIO:
                gpus.append((gpu, side, median(own), len(own)))
    return {"medians": medians, "pairs": pairs, "gpus": gpus}


def _bandwidth_matrices(document):
    return [(name, size, matrix) for name, unit, _description, size, matrix in p2p_matrices(document) if unit == "GB/s"]


def p2p_outliers(document, topology=None):
    """[(kind, detail)] for one host's p2p result: one row per low GPU side (its pairs folded in) and
    one per remaining low pair, its worst test named and the other tests where it is low counted."""
    classes = path_classes(document, topology)
    low_gpus, low_pairs = {}, {}
    for name, size, matrix in _bandwidth_matrices(document):
        found = pair_outliers(matrix, classes)
        for gpu, side, ratio, count in found["gpus"]:
            low_gpus.setdefault((gpu, side), []).append((ratio, name, size, count, found["medians"]))
        for src, dst, cls, value, middle in found["pairs"]:
            low_pairs.setdefault((src, dst), []).append((value / middle, name, size, cls, value, middle))
    rows = []
    for (gpu, side), items in sorted(low_gpus.items(), key=lambda item: (item[0][0], item[0][1] != "source")):
        ratio, name, size, count, medians = min(items, key=lambda item: item[0])  # ties: the first test
        folded = sum(1 for (src, dst) in low_pairs if (src if side == "source" else dst) == gpu)
        shown = ", ".join(f"{cls} {middle:.1f}" for cls, (middle, _n) in sorted(medians.items()))
        rows.append(("P2P GPU below its class medians",
                     f"GPU {gpu} as {side}: its {count} pairs at a median {ratio * 100:.0f}% of their class medians in "
                     f"{name} ({format_size(size)}; class medians GB/s: {shown}); {folded} low pair(s) folded in"
                     + (f"; also low in {len(items) - 1} other test(s)" if len(items) > 1 else "")))
    flagged = {key for key in low_gpus}
    for (src, dst), items in sorted(low_pairs.items()):
        if (src, "source") in flagged or (dst, "destination") in flagged:
            continue
        ratio, name, size, cls, value, median = min(items, key=lambda item: item[0])
        others = sorted({item[1] for item in items} - {name})
        rows.append(("P2P link below class median",
                     f"GPU {src} -> GPU {dst} ({cls}): {value:.1f} GB/s = {ratio * 100:.0f}% of the {cls} median "
                     f"{median:.1f} GB/s in {name} ({format_size(size)})" +
                     (f"; also low in {', '.join(others)}" if others else "")))
    return rows


def host_device_outliers(document):
    """[(kind, detail)]: per device-scope bandwidth test (host<->device, device-local copies) at its
    largest size, each GPU below LOW_RATIO of the median over the GPUs."""
    scopes = {t.get("name"): t for t in document.get("tests") or [] if isinstance(t, dict)}
    per_test = {}
    for result in document.get("results") or []:
        if not isinstance(result, dict) or result.get("status") != "ok":
            continue
        test = scopes.get(result.get("test"), {})
        if test.get("unit") != "gbps" or (test and test.get("scope") != "device"):
            continue
        gpus = [e for e in (result.get("src"), result.get("dst")) if isinstance(e, int) and not isinstance(e, bool)]
        stats = result.get("bandwidth_gbps")
        if not gpus or not isinstance(stats, dict) or not is_finite(stats.get("median")) or not isinstance(result.get("bytes"), int):
            continue
        per_test.setdefault(result.get("test"), []).append((result["bytes"], gpus[0], stats["median"]))
    low = {}
    for name, items in sorted(per_test.items()):
        largest = max(size for size, _g, _v in items)
        values = {gpu: value for size, gpu, value in items if size == largest}
        if len(values) < MIN_GROUP:
            continue
        middle = median(values.values())
        for gpu, value in values.items():
            if middle > 0 and value / middle < LOW_RATIO:
                low.setdefault(gpu, []).append((value / middle, name, largest, value, middle, len(values)))
    rows = []
    for gpu, items in sorted(low.items()):
        ratio, name, size, value, middle, count = min(items, key=lambda item: item[0])
        others = sorted({item[1] for item in items} - {name})
        rows.append(("host<->device below the GPUs' median",
                     f"GPU {gpu}: {value:.1f} GB/s = {ratio * 100:.0f}% of the median {middle:.1f} GB/s over {count} GPUs in "
                     f"{name} ({format_size(size)})" + (f"; also low in {', '.join(others)}" if others else "")))
    return rows


def host_outliers(document, topology=None):
    """All outlier rows of one host's p2p result: [(kind, detail)]."""
    if not isinstance(document, dict) or document.get("no_device_reason"):
        return []
    return p2p_outliers(document, topology) + host_device_outliers(document)


def p2p_section_lines(document, topology=None):
    """Markdown lines for the P2P section of one host: the outliers, or what was compared and found fine."""
    rows = host_outliers(document, topology)
    if rows:
        return [f"Outliers (below {LOW_RATIO:.0%} of the class / GPU median):", ""] + \
               [f"- **{kind}**: {detail}" for kind, detail in rows] + [""]
    classes = path_classes(document, topology)
    if not classes:
        return ["_P2P pairs not compared: no path class for any pair (no capability[].path_class, no topology)_", ""]
    compared = sorted({cls for _name, _size, matrix in _bandwidth_matrices(document)
                       for cls in pair_outliers(matrix, classes)["medians"]})
    if not compared:
        return [f"_P2P pairs not compared: no path class has {MIN_GROUP} or more measured pairs_", ""]
    return [f"No P2P or host<->device outlier: every pair within {LOW_RATIO:.0%} of its path-class median "
            f"(classes compared: {', '.join(compared)}).", ""]


# --- straggler rank -------------------------------------------------------------------------------

def straggler(records):
    """(rank, slowest iterations, iterations, chance share, median excess, cases) for a group of records
    of one sweep point, or None. Records without per_rank, not ok, or correctness-only (emulated ranks,
    MPI backend on host memory: their times are not performance figures) are left out."""
    counts, excess, total, cases, nranks = None, None, 0, 0, None
    for record in records:
        share = record.get("per_rank")
        if record.get("status") != "ok" or is_correctness_only(record) or not isinstance(share, dict):
            continue
        means, slowest = share.get("mean_us"), share.get("slowest_iterations")
        iterations = record.get("iterations")
        if not isinstance(means, list) or not isinstance(slowest, list) or len(means) != len(slowest) or len(means) < 2 \
                or not all(is_finite(v) for v in means + slowest) or not isinstance(iterations, int) or iterations < 1:
            continue
        if nranks is None:
            nranks, counts, excess = len(means), [0] * len(means), [[] for _ in means]
        if len(means) != nranks:
            continue
        middle = median(means)
        if middle <= 0:
            continue
        for rank in range(nranks):
            counts[rank] += slowest[rank]
            excess[rank].append(means[rank] / middle - 1)
        total += iterations
        cases += 1
    if not cases:
        return None
    chance = 1 / nranks
    spread = math.sqrt(total * chance * (1 - chance))
    found = None
    for rank in range(nranks):
        share = counts[rank] / total
        above = median(excess[rank])
        if share >= chance + (1 - chance) / 2 and (counts[rank] - total * chance) >= STRAGGLER_Z * spread \
                and above >= STRAGGLER_EXCESS:
            if found is None or counts[rank] > found[1]:
                found = (rank, counts[rank], total, chance, above, cases)
    return found


def rank_hosts(data, base):
    """{rank: host} from the coll_perf bindings of the point's launches."""
    hosts = {}
    for launch in data.coll_launches():
        if launch_base_point(launch) != base:
            continue
        document = data.raw.get(launch["name"])
        for binding in (document.get("bindings") if isinstance(document, dict) else None) or []:
            if isinstance(binding, dict) and isinstance(binding.get("rank"), int) and binding.get("host"):
                hosts.setdefault(binding["rank"], binding["host"])
    return hosts


def straggler_rows(data):
    """[(kind, where, detail)], one per sweep point (repeats pooled) with a straggler rank."""
    groups = {}
    for (point, _case), record in data.latest.items():
        groups.setdefault(base_point_of(point), []).append(record)
    rows = []
    for base, records in sorted(groups.items()):
        found = straggler(records)
        if found is None:
            continue
        rank, slowest, total, chance, above, cases = found
        host = rank_hosts(data, base).get(rank)
        rows.append(("straggler rank", base,
                     f"rank {rank}{f' ({host})' if host else ''} was the slowest in {slowest} of {total} iterations "
                     f"({slowest / total * 100:.0f}%; chance {chance * 100:.0f}%) over {cases} case(s); its mean time is a "
                     f"median {above * 100:.1f}% above the ranks' median"))
    return rows


def anomaly_rows(data):
    """Every outlier of a run as report anomaly rows (kind, where, detail)."""
    rows = []
    for host, document in sorted(data.p2p.items()):
        rows += [(kind, host, detail) for kind, detail in host_outliers(document, data.topology.get(host))]
    return rows + straggler_rows(data)
