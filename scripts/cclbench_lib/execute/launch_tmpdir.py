"""A temporary folder of its own for each mpirun that cclbench starts beside others.

Open MPI 4 (ORTE) keeps every mpirun's session folder in one folder per host and user, TMPDIR/ompi.<host>.<uid>,
and the last job there to end removes that folder. mpiruns started beside each other from one host (the doctor's
path probes, the screen's launches) race on it: one's clean-up removes the folder between another's creating it and
creating its own session folder inside, and that mpirun fails at once with "A call to mkdir was unable to create the
desired directory" (open-mpi/ompi#8510). CI met it twice on the virtual cluster (2026-12-06), each time in the
doctor's path probes, read as a host whose paths could not be checked. So each such mpirun gets TMPDIR set to a
folder of its own, made in the caller's TMPDIR and removed when the launch has ended.

Only mpirun's own host is concerned: the hosts it reaches start their daemons with their own login environment, and
a screen never has one host in two launches at once. srun launches are left alone: srun hands its environment to
tasks on other hosts, where that folder does not exist.
"""

import contextlib
import os
import shutil
import tempfile

PREFIX = "cclbench-mpirun-"


@contextlib.contextmanager
def own_tmpdir(env, launcher_name):
    """The environment to start one launch with: `env` (None: this process's) with TMPDIR set to a new folder of
    its own when the launcher is mpirun, unchanged otherwise. The folder and whatever is left in it are removed when
    the block ends. A folder that cannot be made leaves the environment as it was: the launch is still run."""
    env = dict(os.environ if env is None else env)
    if launcher_name != "mpirun":
        yield env
        return
    base = env.get("TMPDIR") or tempfile.gettempdir()
    try:
        path = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    except OSError:
        yield env
        return
    try:
        yield dict(env, TMPDIR=path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
