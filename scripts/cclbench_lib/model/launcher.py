"""How a point's ranks are started: `mpirun`, or `srun` inside a Slurm allocation.

The choice is made once, before planning, and stored in the plan inputs as plain data
({"name", "program", "mpi", "reason"}), so `plan` prints what `baseline` runs, the manifest records
which launcher was used and why, and `--resume` replays the same choice. Each launch's argv (the
exact command) comes from `command()`.

srun is chosen by `--launcher auto` only inside an allocation (SLURM_JOB_ID) where srun offers a
process-management interface the MPI library can use: PMIx (preferred) or PMI2 in `srun
--mpi=list`, and an Open MPI with its PMI client (`ompi_info` lists "MCA ess: pmi" in Open MPI 4;
Open MPI 5 always speaks PMIx). Otherwise mpirun runs inside the allocation, where Open MPI reads
the allocation itself.
"""

import os
import re
import shutil
import subprocess

from ..base.errors import UsageError


LAUNCHER_CHOICES = ("auto", "mpirun", "srun")


def _output(argv, environ):
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=dict(environ))
    except (OSError, subprocess.SubprocessError) as error:
        return None, str(error)
    if result.returncode != 0:
        last = (result.stderr or result.stdout or "").strip().splitlines()
        return None, f"exit {result.returncode}" + (f": {last[-1][:160]}" if last else "")
    return result.stdout + result.stderr, None


def mpirun_version(mpirun, environ=None):
    """(the output of `mpirun --version`, None) or (None, why not): the one place it is run (the launcher
    choice, the manifest's versions, the doctor's version check)."""
    return _output([mpirun, "--version"], os.environ if environ is None else environ)


def srun_mpi_plugin(srun, environ):
    """('pmix'|'pmi2', None) from `srun --mpi=list`, or (None, why not)."""
    text, problem = _output([srun, "--mpi=list"], environ)
    if text is None:
        return None, f"`srun --mpi=list` failed ({problem})"
    words = set(re.findall(r"[A-Za-z0-9_]+", text))
    for plugin in ("pmix", "pmi2"):
        if plugin in words:
            return plugin, None
    return None, "`srun --mpi=list` offers neither pmix nor pmi2"


def mpi_supports_direct_launch(mpirun, environ):
    """(True, None) when the MPI behind `mpirun` can be started by srun, else (False, why not)."""
    version, problem = mpirun_version(mpirun, environ)
    if version is None:
        return False, f"`{mpirun} --version` failed ({problem})"
    match = re.search(r"Open MPI\)?\s+v?(\d+)", version) or re.search(r"\(OpenRTE\)\s+(\d+)", version)
    if not match:
        return True, None  # MPICH, Intel MPI and MVAPICH accept PMI2 from srun
    if int(match.group(1)) >= 5:
        return True, None
    resolved = shutil.which(mpirun, path=environ.get("PATH"))
    beside = os.path.join(os.path.dirname(resolved), "ompi_info") if resolved else None
    info = beside if beside and os.access(beside, os.X_OK) else shutil.which("ompi_info", path=environ.get("PATH"))
    if not info:
        return False, "Open MPI's ompi_info is not on PATH: cannot tell whether it can be started by srun"
    text, problem = _output([info], environ)
    if text is None:
        return False, f"ompi_info failed ({problem})"
    if re.search(r"MCA ess:\s*pmi\b", text):
        return True, None
    return False, "this Open MPI has no PMI client (ompi_info lists no 'MCA ess: pmi')"


def choose_launcher(requested, mpirun, srun="srun", srun_args=(), environ=None):
    """The launcher decision for the plan inputs. `requested` is auto, mpirun or srun."""
    environ = os.environ if environ is None else environ
    if requested not in LAUNCHER_CHOICES:
        raise UsageError(f"--launcher: '{requested}' is not one of {', '.join(LAUNCHER_CHOICES)}")
    decision = _choose(requested, mpirun, srun, environ)
    decision["args"] = list(srun_args) if decision["name"] == "srun" else []
    return decision


def _choose(requested, mpirun, srun, environ):
    if requested == "mpirun":
        return {"name": "mpirun", "program": mpirun, "mpi": None, "reason": "--launcher mpirun"}
    job = environ.get("SLURM_JOB_ID")
    found = shutil.which(srun, path=environ.get("PATH"))
    if requested == "srun":
        if not job:
            raise UsageError("--launcher srun: not inside a Slurm allocation (no SLURM_JOB_ID); use salloc or sbatch")
        if not found:
            raise UsageError(f"--launcher srun: '{srun}' is not on PATH")
        plugin, problem = srun_mpi_plugin(found, environ)
        if not plugin:
            raise UsageError(f"--launcher srun: {problem}")
        return {"name": "srun", "program": srun, "mpi": plugin, "reason": f"--launcher srun (srun --mpi={plugin})"}
    if not job:
        return {"name": "mpirun", "program": mpirun, "mpi": None, "reason": "not inside a Slurm allocation"}
    if not found:
        return {"name": "mpirun", "program": mpirun, "mpi": None,
                "reason": f"Slurm job {job} but srun is not on PATH: mpirun inside the allocation"}
    plugin, problem = srun_mpi_plugin(found, environ)
    if plugin:
        supported, problem = mpi_supports_direct_launch(mpirun, environ)
        if supported:
            return {"name": "srun", "program": srun, "mpi": plugin,
                    "reason": f"Slurm job {job}: srun --mpi={plugin}, which the MPI library supports"}
    return {"name": "mpirun", "program": mpirun, "mpi": None,
            "reason": f"Slurm job {job} but {problem}: mpirun inside the allocation"}


def launcher_of(inputs):
    """The stored decision; plans made before launchers existed used mpirun."""
    return inputs.get("launcher") or {"name": "mpirun", "program": inputs["mpirun"], "mpi": None, "reason": None,
                                      "args": []}


# The names this machine answers to: a host list of only these is launched locally, without ssh.
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def launch_kind(decision, hosts, local_names=()):
    """How the jobs reach their hosts, which is what bounds the launches one host sustains at once
    (plan.screen_schedule.LAUNCH_CAPS): "srun" (steps of the allocation), "mpirun-local" (every host is this one:
    `local_names` or LOCAL_NAMES), else "mpirun-ssh" (Open MPI's rsh launcher, an ssh connection per remote host;
    mpirun inside an allocation, whose daemons Open MPI starts through Slurm, is counted here too)."""
    if decision.get("name") == "srun":
        return "srun"
    local = set(LOCAL_NAMES) | set(local_names)
    return "mpirun-local" if hosts and all(host in local for host in hosts) else "mpirun-ssh"


def rank_env(inputs, env=None):
    """What every rank gets: the measurement environment set where cclbench ran (inputs
    "exported_env", recorded when the plan was made), then the point's own variables, which win (a
    binding's NCCL_IB_HCA, an A/B variant)."""
    merged = dict(inputs.get("exported_env") or {})
    merged.update(env or {})
    return merged


def command(inputs, nranks, host_spec=None, env=None, oversubscribe=False, rank_hosts_file=None, node_count=None):
    """argv prefix that starts `nranks` ranks (on `host_spec`, 'host[:slots],...', when given) with
    `env` and the exported measurement environment (rank_env) passed to them on every host; the
    program and its arguments follow. rank_hosts_file: a file of one host a line, line i the host of
    rank i, instead of host_spec: the ranks are placed exactly so (mpirun --hostfile FILE --map-by seq,
    srun -m arbitrary with SLURM_HOSTFILE), as coll_perf --split-ranks needs (its groups are consecutive
    ranks); node_count: the distinct hosts in it (srun --nodes)."""
    launcher = launcher_of(inputs)
    env = rank_env(inputs, env)
    if launcher["name"] == "srun":
        return _srun(launcher, inputs, nranks, host_spec, env, oversubscribe, rank_hosts_file, node_count)
    return _mpirun(inputs, nranks, host_spec, env, oversubscribe, rank_hosts_file)


def _mpirun(inputs, nranks, host_spec, env, oversubscribe, rank_hosts_file=None):
    argv = [inputs["mpirun"]]
    extra = list(inputs.get("mpirun_args") or [])
    if inputs.get("as_root") and "--allow-run-as-root" not in extra:
        argv.append("--allow-run-as-root")
    if oversubscribe and "--oversubscribe" not in extra:
        argv.append("--oversubscribe")
    argv += extra
    argv += ["-np", str(nranks)]
    if rank_hosts_file:
        # Open MPI's own mapping puts the ranks of the host it runs on first, whatever order a --host list gives;
        # the sequential mapper places rank i on line i.
        argv += ["--hostfile", rank_hosts_file, "--map-by", "seq"]
    elif host_spec:
        argv += ["--host", host_spec]
    for name, value in (env or {}).items():
        argv += ["-x", f"{name}={value}"]
    for name in inputs.get("exported_env_names") or []:
        argv += ["-x", name]  # secret-looking: mpirun reads the value here, the command never holds it
    return argv


def _srun(launcher, inputs, nranks, host_spec, env, oversubscribe, rank_hosts_file=None, node_count=None):
    # srun hands its own environment to the ranks; `env NAME=VALUE` keeps the exported variables in
    # the recorded command (srun's --export splits values at commas, and NCCL_IB_HCA has them). The
    # secret-looking names of exported_env_names reach the ranks through srun's default --export=ALL.
    if rank_hosts_file:
        env = dict(env or {}, SLURM_HOSTFILE=rank_hosts_file)
    argv = ["env"] + [f"{name}={value}" for name, value in env.items()] if env else []
    argv += [launcher["program"], f"--mpi={launcher['mpi']}", "--kill-on-bad-exit=1", "-n", str(nranks)]
    if rank_hosts_file:
        # Task i on line i of SLURM_HOSTFILE: one step over the nodes of the file.
        if node_count:
            argv += ["--nodes", str(node_count)]
        argv += ["--distribution", "arbitrary"]
    elif host_spec:
        entries = [part.split(":") for part in host_spec.split(",")]
        argv += ["--nodes", str(len(entries)), "--nodelist", ",".join(entry[0] for entry in entries)]
        slots = {entry[1] for entry in entries if len(entry) > 1}
        if len(slots) == 1:
            argv += ["--ntasks-per-node", slots.pop()]
    else:
        argv += ["--nodes", "1"]
    if oversubscribe:
        argv.append("--overcommit")
    return argv + list(launcher.get("args") or [])


# Launcher arguments that place ranks themselves: a launch whose groups must be exact hosts cannot take them.
_MPIRUN_PLACEMENT = ("--map-by", "-map-by", "--rankfile", "-rf", "--npernode", "-npernode", "--ppr", "--hostfile",
                     "-hostfile", "--machinefile", "-machinefile", "--host", "-H", "--bynode", "--byslot")
_SRUN_PLACEMENT = ("-m", "--distribution", "-w", "--nodelist", "--ntasks-per-node", "-x", "--exclude")


def placement_conflict(inputs):
    """The user's launcher argument that places ranks itself (which a launch whose every rank's host is given
    exactly cannot take), or None."""
    decision = launcher_of(inputs)
    words = list(decision.get("args") or []) if decision["name"] == "srun" else list(inputs.get("mpirun_args") or [])
    flags = _SRUN_PLACEMENT if decision["name"] == "srun" else _MPIRUN_PLACEMENT
    for word in words:
        if word.split("=", 1)[0] in flags:
            return word
    return None


# The rank of this process in its launch, as each launcher tells it: Open MPI, PMIx, Slurm, PMI.
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK")


def launch_rank(environ):
    """This process's rank in its launch from the launcher's environment, or None outside a launch."""
    for name in RANK_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


# Lines of a launcher's output that name why a host could not be reached or a rank not started: ssh's
# and srun's own errors, and the shell's "not found". Open MPI's help text around them only explains.
_CAUSE_LINE = re.compile(r"^(ssh|srun|slurmstepd|sh|bash|env|orted)\b[^:]*:|Could not resolve|Permission denied|"
                         r"No route to host|Connection (timed out|refused)|Network is unreachable|"
                         r"^(Executable|Node|Host|Local host|Remote host):")
_SEPARATOR = re.compile(r"^[-=*\s]*$")


def launch_error_lines(text, limit=3):
    """The first lines of a failed launch's output (mpirun or srun) that say what went wrong, in the launcher's
    own words: its cause lines (ssh: Could not resolve hostname ..., srun: error: ...) when it printed any,
    else its first non-blank lines; Open MPI's per-process warnings ("[host:pid] ... Warning: ...") last."""
    lines = [line.strip() for line in (text or "").splitlines() if not _SEPARATOR.match(line)]
    causes = [line for line in lines if _CAUSE_LINE.search(line)]
    if causes:
        return causes[:limit]
    plain = [line for line in lines if not re.match(r"^\[[^\]]+:\d+\] .*Warning", line)]
    return (plain or lines)[:limit]


# What a launcher says when it could not start a host: ssh's own errors (through Open MPI's rsh launcher), Open MPI's
# own when the program could not be started on a node, srun's task launch failure.
_UNREACHABLE = (re.compile(r"ssh: connect to host (\S+?) port \d+: (.+)$"),
                re.compile(r"ssh: Could not resolve hostname (\S+?): (.+)$"),
                re.compile(r"srun: error: Task launch for \S+ failed on node (\S+?): (.+)$"))
_NOT_EXECUTED = re.compile(r"unable to launch the specified application|could not access or execute an executable")
_NODE_FIELD = re.compile(r"^\s*Node:\s*(\S+)\s*$")
# What a launcher says when a rank died: Open MPI's notice of the first process it saw end, and of a process that
# called MPI_Abort (a group's own watchdog or error); srun's per-task error lines.
_RANK_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?")
_RANK_EXIT = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_ABORT = re.compile(r"MPI_ABORT was invoked on rank (\d+) in communicator MPI_COMM_WORLD")
_ERRORCODE = re.compile(r"with errorcode (-?\d+)")
_SRUN_TASK = re.compile(r"srun: error: (\S+?): tasks? ([0-9][0-9,-]*): (.+)$")


def _ranks(text):
    ranks = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        ranks += list(range(int(low), int(high or low) + 1))
    return ranks


def launch_failure(text):
    """What a launch's own output says went wrong, in its words: {"unreachable": {host: words} (hosts it could not
    start), "ranks": {rank: words} (ranks it saw die first, or that aborted), "hosts": {host: words} (hosts whose
    ranks it saw die)}. Only the first rank a launcher reports counts for a death (srun reports the ranks it killed
    afterwards too); every host it could not start counts (it tries them all at once)."""
    unreachable, ranks, hosts = {}, {}, {}
    lines = (text or "").splitlines()
    for index, line in enumerate(lines):
        line = line.strip()
        for pattern in _UNREACHABLE:
            found = pattern.search(line)
            if found:
                unreachable.setdefault(found.group(1), line)
        if _NOT_EXECUTED.search(line):
            for later in lines[index + 1:index + 12]:
                node = _NODE_FIELD.match(later)
                if node:
                    unreachable.setdefault(node.group(1), "the program could not be started there (" +
                                           " ".join(part.strip() for part in lines[index:index + 2]) + ")")
                    break
        if ranks:
            continue
        found = _RANK_SIGNAL.search(line)
        if found:
            rank, host = int(found.group(1)), found.group(2)
            words = f"rank {rank} on {host} died: signal {found.group(3)}" + \
                (f" ({found.group(4)})" if found.group(4) else "") + " (the launcher's words: " + line + ")"
            ranks[rank] = words
            hosts[host] = words
            continue
        found = _ABORT.search(line)
        if found:  # Open MPI breaks it: "... MPI_COMM_WORLD" / "with errorcode N."
            code = next((_ERRORCODE.search(later) for later in lines[index:index + 2] if _ERRORCODE.search(later)),
                        None)
            ranks[int(found.group(1))] = f"rank {found.group(1)} ended the launch (MPI_Abort" + \
                (f", exit {code.group(1)})" if code else ")")
            continue
        found = _RANK_EXIT.search(line)
        if found:
            code = next((_EXIT_CODE.search(later) for later in lines[index + 1:index + 3]
                         if _EXIT_CODE.search(later)), None)
            ranks[int(found.group(1))] = f"rank {found.group(1)} exited " + \
                (f"{code.group(1)}" if code else "early") + " before the others (the launcher's words)"
            continue
        found = _SRUN_TASK.search(line)
        if found:
            words = f"task(s) {found.group(2)} on {found.group(1)}: {found.group(3)} (srun's words: {line})"
            for rank in _ranks(found.group(2)):
                ranks[rank] = words
            hosts[found.group(1)] = words
    return {"unreachable": unreachable, "ranks": ranks, "hosts": hosts}
