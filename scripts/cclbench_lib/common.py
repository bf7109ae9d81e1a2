"""Errors, sizes, run ids, the environment allowlist and crash-safe file writes."""
import datetime
import json
import os
import re
import tempfile


class CclbenchError(Exception):
    """A problem the user can fix; printed as one line `cclbench: error: ...`."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(CclbenchError):
    def __init__(self, message):
        super().__init__(message, 2)


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


# --- environment allowlist --------------------------------------------------------------------

_SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL")
_EXACT_ALLOWED = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "UCX_NET_DEVICES", "UCX_TLS",
                  "CCLBENCH_INJECT_WRONG"}  # the test hook that corrupts results on purpose: a run must say so
_OMPI_GEOMETRY = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK"}
_SLURM_GEOMETRY = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NUM_NODES",
                   "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                   "SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_CPUS_ON_NODE",
                   "SLURM_JOB_PARTITION", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"}


def looks_secret(name):
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def allowlisted_env(environ=None):
    """The variables that shape a measurement; a secret-looking name keeps its name, never its value.

    Returns (env, redacted_names)."""
    environ = os.environ if environ is None else environ
    selected = {}
    redacted = []
    for name in sorted(environ):
        allowed = (name.startswith("NCCL_") or name in _EXACT_ALLOWED or name in _OMPI_GEOMETRY
                   or name in _SLURM_GEOMETRY)
        if not allowed:
            continue
        if looks_secret(name):
            redacted.append(name)
            continue
        selected[name] = environ[name]
    return selected, redacted


# --- files ------------------------------------------------------------------------------------

def _refuse_symlink(path):
    if os.path.islink(path):
        raise CclbenchError(f"refusing to write through the symbolic link {path}")


def make_dirs(path):
    """mkdir -p that refuses a symbolic link or a non-directory at any created level."""
    path = os.path.abspath(path)
    parts = []
    head = path
    while head and not os.path.isdir(head):
        parts.append(head)
        head = os.path.dirname(head)
        if head == os.path.dirname(head):
            break
    for directory in reversed(parts):
        if os.path.islink(directory):
            raise CclbenchError(f"refusing to use the symbolic link {directory} as a directory")
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            if not os.path.isdir(directory) or os.path.islink(directory):
                raise CclbenchError(f"{directory} exists and is not a directory") from None
        except OSError as error:
            raise CclbenchError(f"cannot create directory {directory}: {error.strerror}") from None
    if os.path.islink(path):
        raise CclbenchError(f"refusing to use the symbolic link {path} as a directory")


def write_atomic(path, data):
    """Temp file beside `path`, fsync, rename over it, fsync the directory; 0644; never via a symlink."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    make_dirs(directory)
    _refuse_symlink(path)
    fd, temp_path = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_path, 0o644)
        os.replace(temp_path, path)
    except OSError as error:
        try:
            os.unlink(temp_path)
        except OSError:
            pass
        raise CclbenchError(f"cannot write {path}: {error.strerror}") from None
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def write_json_atomic(path, document):
    write_atomic(path, json.dumps(document, indent=2, sort_keys=False, allow_nan=False) + "\n")


def open_append(path):
    """An append-only text handle that refuses to follow a symbolic link (run.log)."""
    make_dirs(os.path.dirname(os.path.abspath(path)))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise CclbenchError(f"cannot open {path} for appending: {error.strerror}") from None
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)


def append_line(path, line):
    """One record per write() on an O_APPEND descriptor, fsynced (same contract as coll_perf's)."""
    make_dirs(os.path.dirname(os.path.abspath(path)))
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise CclbenchError(f"cannot open {path} for appending: {error.strerror}") from None
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path, what):
    """Loads a JSON file or raises a one-line error naming what it was supposed to be."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise CclbenchError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CclbenchError(f"cannot read {what} {path}: {getattr(error, 'strerror', None) or error}") from None
    except json.JSONDecodeError as error:
        raise CclbenchError(f"{what} {path} is not valid JSON (line {error.lineno}: {error.msg})") from None


def read_jsonl(path, what, strict=True):
    """Records of a JSON Lines file. A torn record (a crash mid-append leaves an object's prefix: it
    starts with '{' and does not end with '}') is skipped and reported; any other bad line is an
    error when strict, skipped otherwise. Returns (records, bad_line_numbers)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except FileNotFoundError:
        raise CclbenchError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise CclbenchError(f"cannot read {what} {path}: {getattr(error, 'strerror', None) or error}") from None
    records = []
    bad = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            records.append(record)
        except ValueError:
            stripped = line.strip()
            if stripped.startswith("{") and not stripped.endswith("}"):
                bad.append(index + 1)  # torn record: tolerated, reported by the caller
                continue
            if strict:
                raise CclbenchError(f"{what} {path} line {index + 1} is not a JSON object") from None
            bad.append(index + 1)
    return records, bad


def terminate_last_line(path):
    """Ends a file whose last line was torn by a crash with a newline, so that the next append
    starts a fresh line instead of gluing a good record onto the fragment. Never changes a record."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
    except FileNotFoundError:
        return
    except OSError as error:
        raise CclbenchError(f"cannot read {path}: {error.strerror}") from None
    append_line(path, "")
