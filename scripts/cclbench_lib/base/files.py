"""Crash-safe files: directories that refuse symlinks, atomic writes, appends, JSON and JSONL readers."""

import json
import os
import tempfile

from ..base.errors import CclbenchError


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
    except BaseException as error:  # also an exception a signal handler raised mid-write: no temp file is left
        try:
            os.unlink(temp_path)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise CclbenchError(f"cannot write {path}: {error.strerror}") from None
        raise
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
