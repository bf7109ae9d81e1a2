"""Value parsers and their spellings: sizes, percentages, run ids, collectives, HCA lists, NCCL_CROSS_NIC
values, --mpirun-args splitting, the point kinds, and the text of an NCCL environment variant."""

import datetime
import re
import shlex

from ..base.errors import UsageError


# --- sizes (nccl-tests convention: K/M/G are powers of 1024) ---------------------------------

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kKmMgGtT]?)[bB]?\s*$")
_SIZE_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def parse_size(text, what):
    match = _SIZE_RE.match(str(text))
    if not match:
        raise UsageError(f"{what}: '{text}' is not a size (examples: 8K, 64M, 1G, 4096)")
    value = int(match.group(1)) << _SIZE_SHIFT[match.group(2).lower()]
    if value <= 0:
        raise UsageError(f"{what}: size must be positive, got '{text}'")
    return value


def format_size(value):
    """8192 -> '8K'; the spelling coll_perf uses in case ids."""
    if value is None:
        return "-"
    for suffix, shift in (("G", 30), ("M", 20), ("K", 10)):
        if value >= (1 << shift) and value % (1 << shift) == 0:
            return f"{value >> shift}{suffix}"
    return str(value)


def sweep_sizes(min_bytes, max_bytes, factor):
    """The sizes coll_perf visits for -b/-e/-f (multiplicative only)."""
    if factor < 2:
        raise UsageError("-f: the step factor must be an integer >= 2")
    if min_bytes > max_bytes:
        raise UsageError(f"-b {format_size(min_bytes)} is larger than -e {format_size(max_bytes)}")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def parse_percent(text, what):
    """'5%', '5' or '0.05'? -> always percent: '5%' and '5' both mean 5 percent."""
    raw = str(text).strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{what}: '{text}' is not a percentage (example: 5%)") from None
    if not (0 <= value < 1000) or value != value:
        raise UsageError(f"{what}: '{text}' is out of range (0% .. 1000%)")
    return value


# --- run ids ----------------------------------------------------------------------------------

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_run_id(run_id):
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id) or ".." in run_id:
        raise UsageError(f"run id {run_id!r} is not allowed: use 1-128 characters [A-Za-z0-9._-], "
                         "starting with a letter or digit, without '..' or '/'")
    return run_id


def default_run_id(prefix=""):
    return prefix + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

COLL_KINDS = ("intra", "inter", "local")


def variant_text(env):
    return " ".join(f"{name}={value}" for name, value in env.items())


def variant_label(env):
    """Point-name fragment: {'NCCL_ALGO': 'Ring', 'NCCL_PROTO': 'LL128'} -> 'ab.ALGO-Ring.PROTO-LL128'."""
    parts = []
    for name, value in env.items():
        parts.append(re.sub(r"[^A-Za-z0-9_-]", "_", f"{name[len('NCCL_'):]}-{value}"))
    return "ab." + ".".join(parts)

DEFAULT_COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
KNOWN_COLLECTIVES = DEFAULT_COLLECTIVES + ["broadcast", "reduce", "sendrecv"]
DEFAULT_CROSS_NIC = [0, 1, 2]
HCA_RE = re.compile(r"^[A-Za-z0-9_.-]+:[0-9]+$")


def parse_hcas(text):
    items = [item.strip() for item in str(text).split(",")]
    for item in items:
        if not HCA_RE.match(item):
            raise UsageError(f"--hcas: '{item}' is not an HCA:port (example: mlx5_0:1,mlx5_3:1)")
    if len(set(items)) != len(items):
        raise UsageError(f"--hcas: '{text}' lists an HCA twice")
    return items


NETDEV_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")


def parse_netdevs(text):
    """--netdevs IF[,IF]: rail interface names (Linux allows 15 characters), each once; [] when not given."""
    if not text:
        return []
    names = [part.strip() for part in text.split(",")]
    if not all(names) or any(set(name) - NETDEV_CHARS or len(name) > 15 for name in names):
        raise UsageError(f"--netdevs: '{text}' is not a comma-separated list of interface names (example: eth0,eth3)")
    if len(set(names)) != len(names):
        raise UsageError(f"--netdevs: '{text}' names an interface twice")
    return names


def parse_collectives(text):
    items = [item.strip().replace("-", "_") for item in str(text).split(",") if item.strip()]
    aliases = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "all_to_all": "alltoall", "all2all": "alltoall"}
    items = [aliases.get(item, item) for item in items]
    if not items:
        raise UsageError("--coll: no collective given")
    for item in items:
        if item not in KNOWN_COLLECTIVES:
            raise UsageError(f"--coll: unknown collective '{item}' (known: {', '.join(KNOWN_COLLECTIVES)})")
    return items


def parse_cross_nic(text):
    values = []
    for item in str(text).split(","):
        item = item.strip()
        if item not in ("0", "1", "2"):
            raise UsageError(f"--cross-nic: '{item}' is not 0, 1 or 2")
        values.append(int(item))
    return values


def split_mpirun_args(values, flag="--mpirun-args"):
    args = []
    for value in values:
        try:
            args += shlex.split(value)
        except ValueError as error:
            raise UsageError(f"{flag}: cannot split '{value}': {error}") from None
    return args
