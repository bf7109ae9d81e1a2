"""The environment recorded with a run: an allowlist of variable names, never a value that looks secret."""

import os


# The slowdown test knob and the flag that allows it (bench/core/slowdown_injection.hpp): never inherited by a launch;
# only `smoke --inject-slowdown` (tests only) puts them into the environment of the part it slows.
TEST_KNOB_VARIABLES = ("CCLBENCH_INJECT_SLOWDOWN", "CCLBENCH_TESTING")


# --- environment allowlist --------------------------------------------------------------------

_SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL")
_EXACT_ALLOWED = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "UCX_NET_DEVICES", "UCX_TLS",
                  "CCLBENCH_INJECT_WRONG",  # the test hook that corrupts results on purpose: a run must say so
                  "CCLBENCH_INJECT_SLOWDOWN"}  # the test knob that slows the timed cases on purpose: likewise
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


# --- the environment every rank gets ----------------------------------------------------------

# Prefixes of the variables that shape a measurement and must be the same on every host's ranks.
EXPORT_PREFIXES = ("NCCL_", "CUDA_", "UCX_")
# Per-process or per-node geometry: set for each node by its launcher or allocation (Slurm's GRES,
# a site's prolog), never copied from the head node. CUDA_VISIBLE_DEVICES names the head's devices;
# forcing it onto other nodes would hide or renumber theirs, and the plan already places one rank
# per GPU with --host H:N. NCCL_HOSTID is set per host by coll_perf's --share-gpu emulation.
PER_NODE_NAMES = frozenset({"CUDA_VISIBLE_DEVICES", "NCCL_HOSTID"})


def exported_env(environ=None):
    """The allowlisted NCCL_*/CUDA_*/UCX_* variables set where cclbench runs, to pass to every rank
    on every host (mpirun -x, srun's env prefix). Returns (values, secret_names): a secret-looking
    name travels by name only (`-x NAME`), so its value is never written into a command."""
    environ = os.environ if environ is None else environ
    values, _ = allowlisted_env(environ)
    chosen = {name: value for name, value in values.items()
              if name.startswith(EXPORT_PREFIXES) and name not in PER_NODE_NAMES}
    secret = sorted(name for name in environ if name.startswith(EXPORT_PREFIXES) and looks_secret(name)
                    and name not in PER_NODE_NAMES)
    return chosen, secret
