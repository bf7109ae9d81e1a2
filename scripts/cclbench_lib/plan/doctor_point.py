"""The command line of `cclbench doctor` on one host, as the baseline's doctor point and `doctor --hosts` run it."""

import os

from ..base import locations


def cclbench_script():
    """This cclbench's entry point, for launching it on other hosts: bin/cclbench of an installation,
    scripts/cclbench in a checkout."""
    if locations.installed():
        return os.path.join(locations.bin_dir(), "cclbench")
    return os.path.join(os.path.dirname(locations.LIB_DIR), "cclbench")


def doctor_argv(script, sysfs_root, procfs_root, host, json_path=None, emit_line=False):
    """host None: no --as-host (the screen adds its own words per host, or --split-points for many)."""
    argv = [script, "doctor", "--host-only"] + (["--as-host", host] if host else [])
    if sysfs_root:
        argv += ["--sysfs-root", sysfs_root]
    if procfs_root:
        argv += ["--procfs-root", procfs_root]
    if json_path:
        argv += ["--json", json_path]
    if emit_line:
        argv.append("--emit-json-line")
    return argv
