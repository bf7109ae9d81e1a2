"""Where to run: host lists, Open MPI hostfiles, Slurm node lists, local GPU discovery."""

import os
import re
import shutil
import socket
import subprocess

from ..base.errors import CclbenchError, UsageError


HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
# A switch group's name (a leaf switch, a rack): --groups FILE, a hostfile's group= column, Slurm's topology.
GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")


def validate_host(name, where):
    if not HOST_RE.match(name):
        raise UsageError(f"{where}: '{name}' is not a host name")
    return name


def parse_host_list(text):
    hosts = [part.strip() for part in str(text).split(",")]
    if not any(hosts) or any(not host for host in hosts):
        raise UsageError(f"--hosts: '{text}' is not a comma-separated host list (example: node5,node7)")
    for host in hosts:
        validate_host(host, "--hosts")
    return _unique(hosts, "--hosts")


def _unique(hosts, where):
    seen = set()
    for host in hosts:
        if host in seen:
            raise UsageError(f"{where}: host '{host}' is listed twice")
        seen.add(host)
    return hosts


def parse_hostfile(path):
    """Open MPI hostfile: `node5 slots=8 [max_slots=N] [group=leaf7]`, '#' comments. Returns [(host, slots|None)]
    (the group column: hostfile_groups)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"--hostfile: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--hostfile: cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    entries = []
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        host = tokens[0]
        if not HOST_RE.match(host):
            raise UsageError(f"--hostfile: {path} line {number}: '{host}' is not a host name")
        slots = None
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if key == "group" and sep and GROUP_RE.match(value):
                continue  # the node's switch group, for `screen` (hostfile_groups); Open MPI never reads this file
            if not sep or key not in ("slots", "max_slots", "max-slots") or not value.isdigit() or int(value) < 1:
                raise UsageError(f"--hostfile: {path} line {number}: cannot parse '{token}' "
                                 "(expected slots=N or max_slots=N)")
            if key == "slots":
                slots = int(value)
        entries.append((host, slots))
    if not entries:
        raise UsageError(f"--hostfile: {path} names no hosts")
    _unique([host for host, _ in entries], "--hostfile")
    return entries


def expand_nodelist(text):
    """Slurm's compressed node list: 'node[5,7-8],gpu01' -> ['node5','node7','node8','gpu01']."""
    parts = []
    depth = 0
    current = ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"SLURM_JOB_NODELIST: unbalanced brackets in '{text}'")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise UsageError(f"SLURM_JOB_NODELIST: unbalanced brackets in '{text}'")
    parts.append(current)
    hosts = []
    for part in parts:
        part = part.strip()
        if not part:
            raise UsageError(f"SLURM_JOB_NODELIST: empty entry in '{text}'")
        hosts.extend(_expand_one(part, text))
    for host in hosts:
        validate_host(host, "SLURM_JOB_NODELIST")
    return hosts


def _expand_one(pattern, whole):
    match = re.search(r"\[([^\[\]]*)\]", pattern)
    if not match:
        return [pattern]
    prefix, suffix = pattern[:match.start()], pattern[match.end():]
    results = []
    for item in match.group(1).split(","):
        item = item.strip()
        bounds = item.split("-")
        if len(bounds) == 1 and bounds[0].isdigit():
            values = [bounds[0]]
        elif len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit() and int(bounds[0]) <= int(bounds[1]):
            width = len(bounds[0])
            if int(bounds[1]) - int(bounds[0]) > 100000:
                raise UsageError(f"SLURM_JOB_NODELIST: range '{item}' is too large")
            values = [str(v).zfill(width) for v in range(int(bounds[0]), int(bounds[1]) + 1)]
        else:
            raise UsageError(f"SLURM_JOB_NODELIST: cannot parse '{item}' in '{whole}'")
        for value in values:
            results.extend(_expand_one(prefix + value + suffix, whole))
    return results


def slurm_hosts(environ=None):
    """Hosts of the Slurm allocation, or None outside one."""
    environ = os.environ if environ is None else environ
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        return None
    scontrol = shutil.which("scontrol")
    if scontrol:
        try:
            result = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True,
                                    text=True, timeout=30, check=False)
            hosts = result.stdout.split()
            if result.returncode == 0 and hosts:
                for host in hosts:
                    validate_host(host, "scontrol show hostnames")
                return hosts
        except (OSError, subprocess.SubprocessError):
            pass
    return expand_nodelist(nodelist)


def slurm_topology_groups(environ=None):
    """{host: leaf switch} from Slurm's topology (`scontrol show topology`: the Level=0 switches' Nodes=) inside an
    allocation; {} outside one, without scontrol or a topology plugin, or on output it cannot read."""
    environ = os.environ if environ is None else environ
    scontrol = shutil.which("scontrol", path=environ.get("PATH"))
    if not (environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")) or not scontrol:
        return {}
    try:
        result = subprocess.run([scontrol, "show", "topology"], capture_output=True, text=True, timeout=30,
                                check=False, env=dict(environ))
    except (OSError, subprocess.SubprocessError):
        return {}
    if result.returncode != 0:
        return {}
    groups = {}
    for line in result.stdout.splitlines():
        fields = dict(token.partition("=")[::2] for token in line.split() if "=" in token)
        if fields.get("Level") != "0" or not GROUP_RE.match(fields.get("SwitchName", "")) or not fields.get("Nodes"):
            continue
        try:
            hosts = expand_nodelist(fields["Nodes"])
        except UsageError:
            return {}
        for host in hosts:
            groups[host] = fields["SwitchName"]
    return groups


def slurm_gpus_per_node(environ=None):
    """GPUs per node the Slurm allocation grants (--gpus-per-node, or what this node got), or None."""
    environ = os.environ if environ is None else environ
    per_node = environ.get("SLURM_GPUS_PER_NODE", "")
    match = re.fullmatch(r"(?:[A-Za-z0-9_.-]+:)?([0-9]+)", per_node.strip())
    if match and int(match.group(1)) > 0:
        return int(match.group(1))
    on_node = environ.get("SLURM_GPUS_ON_NODE", "").strip()
    if on_node.isdigit() and int(on_node) > 0:
        return int(on_node)
    job_gpus = [item for item in environ.get("SLURM_JOB_GPUS", "").split(",") if item.strip()]
    return len(job_gpus) or None


def local_gpu_count():
    """`nvidia-smi -L` lines starting with 'GPU '; 0 without nvidia-smi or a working driver."""
    if os.environ.get("CCLBENCH_FAKE_GPU_COUNT", "").isdigit():  # tests only: simulate a GPU node
        return int(os.environ["CCLBENCH_FAKE_GPU_COUNT"])
    tool = shutil.which("nvidia-smi")
    if not tool:
        return 0
    try:
        result = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return 0
    if result.returncode != 0:
        return 0
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))


def local_hostname():
    return socket.gethostname().split(".")[0] or "localhost"


def check_resolvable(hosts):
    for host in hosts:
        try:
            socket.getaddrinfo(host, None)
        except (socket.gaierror, UnicodeError):
            raise CclbenchError(f"unknown host '{host}': it does not resolve (check --hosts/--hostfile)", 2) from None


def hostfile_groups(path):
    """{host: group} of a hostfile's `group=NAME` column (parse_hostfile checks the file); {} when none has one."""
    parse_hostfile(path)
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    groups = {}
    for raw in lines:
        tokens = raw.split("#", 1)[0].split()
        for token in tokens[1:]:
            if token.startswith("group="):
                groups[tokens[0]] = token[len("group="):]
    return groups


def read_groups(path):
    """--groups FILE: `node group` a line, '#' comments: {node: group}; a bad line is a UsageError (exit 2)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--groups: cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    groups = {}
    for number, raw in enumerate(lines, 1):
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) != 2 or not HOST_RE.match(tokens[0]) or not GROUP_RE.match(tokens[1]):
            raise UsageError(f"--groups: {path} line {number}: expected 'NODE GROUP' (a host name and a group name), "
                             f"got {raw.strip()[:80]!r}")
        if tokens[0] in groups and groups[tokens[0]] != tokens[1]:
            raise UsageError(f"--groups: {path} line {number}: {tokens[0]} is already in group {groups[tokens[0]]}")
        groups[tokens[0]] = tokens[1]
    if not groups:
        raise UsageError(f"--groups: {path} names no node")
    return groups


def hosts_and_slots(hosts_text, hostfile):
    """The hosts a command runs on and what they say about GPUs per node: (hosts, hostfile slots or None, the
    Slurm allocation's GPUs per node or None). From --hosts, else --hostfile (one slot count for all), else the
    allocation's nodes ([] outside one)."""
    if hosts_text and hostfile:
        raise UsageError("give either --hosts or --hostfile, not both")
    if hosts_text:
        return parse_host_list(hosts_text), None, None
    if hostfile:
        entries = parse_hostfile(hostfile)
        slot_values = {slots for _host, slots in entries if slots is not None}
        if len(slot_values) > 1:
            raise UsageError(f"--hostfile: hosts have different slot counts {sorted(slot_values)}; pass --gpus-per-node")
        return [host for host, _slots in entries], (slot_values.pop() if slot_values else None), None
    return slurm_hosts() or [], None, slurm_gpus_per_node()
