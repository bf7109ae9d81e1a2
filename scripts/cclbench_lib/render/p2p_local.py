"""The P2P section of a one-GPU host: what one GPU measures is the local device copy (and the host<->device
copies), never a 1 x 1 matrix. p2p_matrix measures the copy within the GPU twice: as its own tests
device_local_copy_{ce,sm} (nvbandwidth's device_local_copy) and, from p2p schema 1.1, as the diagonal of the
one-way matrices (details.local_copy). Bandwidth is bytes copied / time, nvbandwidth's convention; schema 1.0
counted read + write (bytes_counted read_plus_write, 2 x size), so such a value is halved here to say the same."""

from ..base.numbers import is_finite
from ..base.values import format_size
from ..render.markdown import fmt_number, md_table


# Per engine, the tests whose value the sentence gives, first found first: the named test, else the diagonal.
LOCAL_COPY_SOURCES = (("CE", ("device_local_copy_ce", "d2d_ce_write_uni", "d2d_ce_read_uni")),
                      ("SM", ("device_local_copy_sm", "d2d_sm_write_uni", "d2d_sm_read_uni")))
UNITS = (("bandwidth_gbps", "GB/s"), ("latency_us", "us"), ("load_latency_ns", "ns"))


def device_count(document):
    """GPUs of a p2p_matrix result: its devices list, else the largest GPU index in its results plus one."""
    devices = [d for d in document.get("devices") or [] if isinstance(d, dict)]
    if devices:
        return len(devices)
    indices = [e for r in document.get("results") or [] if isinstance(r, dict) for e in (r.get("src"), r.get("dst"))
               if isinstance(e, int) and not isinstance(e, bool)]
    return max(indices) + 1 if indices else 0


def _local(result):
    src, dst = result.get("src"), result.get("dst")
    return isinstance(src, int) and not isinstance(src, bool) and src == dst


def local_value(result):
    """(value, unit, note) of a within-GPU result that is ok, else None; bandwidth as bytes copied / time."""
    if result.get("status") != "ok":
        return None
    for key, unit in UNITS:
        stats = result.get(key)
        if isinstance(stats, dict) and is_finite(stats.get("median")):
            value, note = stats["median"], None
            if key == "bandwidth_gbps" and result.get("bytes_counted") == "read_plus_write":
                value, note = value / 2, "schema 1.0 counted read + write: halved to bytes copied"
            return value, unit, note
    return None


def local_copy_sentence(document):
    """'local device copy (nvbandwidth's device_local_copy): CE x GB/s, SM y GB/s' with the tests named."""
    results = [r for r in document.get("results") or [] if isinstance(r, dict) and _local(r)]
    parts = []
    for engine, tests in LOCAL_COPY_SOURCES:
        found = None
        for test in tests:
            for result in results:
                value = local_value(result) if result.get("test") == test else None
                if value is not None and value[1] == "GB/s":
                    found = (value[0], test)
                    break
            if found:
                break
        if found:
            parts.append(f"{engine} {fmt_number(found[0])} GB/s ({found[1]})")
        else:
            why = next((r.get("reason") for r in results if r.get("test") in tests and r.get("reason")), None)
            parts.append(f"{engine} - ({why or 'not measured'})")
    return ("Local device copy (nvbandwidth's device_local_copy; bytes copied / time, the GPU memory moves twice "
            "that): " + ", ".join(parts) + ".")


def one_gpu_lines(document):
    """The section's lines for a one-GPU host: the sentence, then every within-GPU measurement."""
    lines = ["One GPU: no GPU pair to measure, so no P2P matrix. " + local_copy_sentence(document), ""]
    rows = []
    for result in document.get("results") or []:
        if not isinstance(result, dict) or not _local(result):
            continue
        value = local_value(result)
        size = result.get("bytes")
        rows.append((result.get("test"), format_size(size) if isinstance(size, int) else None,
                     f"{fmt_number(value[0])} {value[1]}" if value else f"- ({result.get('status')}"
                     + (f": {result['reason']}" if result.get("reason") else "") + ")",
                     value[2] if value and value[2] else None))
    if rows:
        lines += ["Every measurement within the GPU (the diagonal of the one-way matrices is the same local copy; "
                  "latency: a local 4-byte copy, loads from the GPU's own memory):", "",
                  md_table(["test", "size", "median", "note"], rows), ""]
    return lines
