"""Where cclbench finds its programs and schemas: relative to this library, never a fixed path.

Two layouts: the source tree (scripts/cclbench_lib; programs in <repo>/build/bench/apps, schemas in
<repo>/results_schema), and an installation (`cmake --install` or the .deb), recognised by the
install_layout.json that CMake installs beside this file with the relative paths of bin/ and the
schemas, so an installed prefix can be moved anywhere.
"""

import json
import os
import shutil

from ..base.errors import CclbenchError


LIB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package (this file is in its base/)
LAYOUT_FILE = os.path.join(LIB_DIR, "install_layout.json")


def _installed():
    try:
        with open(LAYOUT_FILE, encoding="utf-8") as handle:
            layout = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    return layout if isinstance(layout, dict) else None


def installed():
    return _installed() is not None


def bin_dir():
    layout = _installed()
    if layout and isinstance(layout.get("bin_dir"), str):
        return os.path.normpath(os.path.join(LIB_DIR, layout["bin_dir"]))
    return os.path.join(os.path.dirname(os.path.dirname(LIB_DIR)), "build", "bench", "apps")


def schema_dir():
    layout = _installed()
    if layout and isinstance(layout.get("schema_dir"), str):
        return os.path.normpath(os.path.join(LIB_DIR, layout["schema_dir"]))
    return os.path.join(os.path.dirname(os.path.dirname(LIB_DIR)), "results_schema")


def installed_commit():
    """The commit an installation was built from (None in a source tree, or when unknown)."""
    layout = _installed()
    commit = layout.get("git_commit") if layout else None
    return commit if isinstance(commit, str) and commit not in ("", "unknown") else None


def resolve_program(name, what):
    """mpirun must exist: a bare name is looked up on PATH, a path must be executable."""
    if os.sep in name:
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return name
        raise CclbenchError(f"{what} '{name}' is not an executable file", 2)
    found = shutil.which(name)
    if not found:
        raise CclbenchError(f"{what} '{name}' is not on PATH (install Open MPI or pass --mpirun PATH)", 2)
    return name
