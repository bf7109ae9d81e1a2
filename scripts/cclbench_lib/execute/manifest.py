"""The run manifest (run_manifest.json) as the runner writes it: a new one, a point's pending state, the plan
with each launch's command line, the versions and commit it records, and its atomic save."""

import os
import platform
import shutil
import subprocess

from ..base import locations
from ..base.environment import allowlisted_env
from ..base.files import write_json_atomic
from ..base.values import utc_now
from ..base.version import SCHEMA_VERSION, TOOL_VERSION
from ..model.launcher import mpirun_version
from ..plan.baseline import format_launch, plan_mode

MANIFEST_FILE = "run_manifest.json"


def tool_commit():
    if locations.installed():  # never the commit of whatever repository an installation sits in
        return locations.installed_commit()
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        result = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=False)
        if result.returncode == 0:
            commit = result.stdout.strip()
            dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10, check=False)
            return commit + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def _first_line(argv):
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (result.stdout or result.stderr or "").strip()
    return text.splitlines()[0].strip() if result.returncode == 0 and text else None


def local_versions(mpirun):
    versions = {"python": platform.python_version(), "os": platform.platform(), "mpirun": None,
                "nvidia_driver": None, "gpu_names": None}
    if shutil.which(mpirun) or os.path.isfile(mpirun):
        text, _problem = mpirun_version(mpirun)
        lines = (text or "").strip().splitlines()
        versions["mpirun"] = lines[0].strip() if lines else None
    smi = shutil.which("nvidia-smi")
    if smi:
        line = _first_line([smi, "--query-gpu=driver_version", "--format=csv,noheader"])
        versions["nvidia_driver"] = line
        try:
            names = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                   text=True, timeout=20, check=False)
            if names.returncode == 0:
                versions["gpu_names"] = [n.strip() for n in names.stdout.splitlines() if n.strip()] or None
        except (OSError, subprocess.SubprocessError):
            pass
    return versions


def manifest_path(run_dir):
    return os.path.join(run_dir, MANIFEST_FILE)


def pending_point(kind):
    """A point's state before it ran."""
    return {"kind": kind, "status": "pending", "exit_code": None, "reason": None, "attempts": 0, "started_utc": None,
            "finished_utc": None, "elapsed_s": None}


def public_launch(launch):
    entry = dict(launch)
    entry["command"] = format_launch(launch)
    return entry


def new_manifest(inputs, launches, run_dir, mode=None):
    env, redacted = allowlisted_env()
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": os.path.basename(run_dir),
        "status": "running",
        "created_utc": utc_now(),
        "updated_utc": utc_now(),
        "tool": {"name": "cclbench", "version": TOOL_VERSION, "git_commit": tool_commit()},
        "invocations": [],
        "mode": mode or plan_mode(inputs),
        "hosts": inputs["hosts"] or [inputs["local_host"]],
        "plan_inputs": inputs,
        "plan": [public_launch(launch) for launch in launches],
        "env": env,
        "env_redacted": redacted,
        "versions": local_versions(inputs["mpirun"]),
        "notes": sorted({launch["note"] for launch in launches if launch.get("note")}),
        "points": {launch["name"]: pending_point(launch["kind"]) for launch in launches},
        "gates": {"cv_gate_pct": inputs["cv_gate_pct"], "repeatability": []},
    }


def save_manifest(run_dir, manifest, launches):
    """The manifest with the plan as it stands (a binding chosen at run time rebuilds commands), written atomically."""
    manifest["plan"] = [public_launch(launch) for launch in launches]
    manifest["updated_utc"] = utc_now()
    write_json_atomic(manifest_path(run_dir), manifest)
