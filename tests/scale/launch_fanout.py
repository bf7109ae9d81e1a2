#!/usr/bin/env python3
"""How many launches one host sustains at once: the screen's pair stage starts one launcher process per pair of a
round (execute/screen.py), so a round of a 1,024-node fleet is 512 launches from one host.

For each count K: K launches of a two-rank PROGRAM started at the same time (each its own process group; PROGRAM by
default /bin/true, which needs only the launch; --program-arg adds its arguments), each given LIMIT_S seconds.
Recorded per K: how many exited 0, how many failed (their first meaningful line, counted), how many ran out of time,
the wall time of the batch, its slowest and median launch, the CPU seconds the launching processes and their
waited-for children spent on the launching host, the load average before and after (other work shares the machine),
and the first stderr lines of launches that succeeded anyway (a launcher that waited, retried or warned).

Modes:
  local  K `mpirun -np 2 --oversubscribe PROGRAM` on this host: what the launching host itself costs.
  ssh    K `mpirun --mca plm rsh -H a,b -np 2 PROGRAM` over real OpenSSH from a launcher namespace to 2K node
         namespaces (one bridge, one sshd each, 198.19.0.0/16 inside the benchmark range 198.18.0.0/15), pair j on
         nodes 2j and 2j+1: as in a round, every node is in one launch at a time. The sshds, the orteds and the ranks
         of all nodes run on this same machine, so the batch times are an upper bound for a real fleet; the
         launcher CPU column is the launching host's own share (mpirun and its ssh clients).
  srun   K `srun -N 2 -n 2 --nodelist a,b PROGRAM` steps inside one `salloc -N 8 --exclusive` on Slurm across the
         virtual cluster (tests/cluster/vslurm.py: slurmctld and 8 slurmds, each in its node's namespace). Eight
         nodes hold 4 disjoint pairs: above K=4 steps share nodes round-robin (K/4 steps per pair of nodes), with
         --overlap (--srun-share overlap: steps share CPUs freely), --exact (one CPU of each node a step, 4 a node
         here) or neither (whole: Slurm's default, a step takes every CPU of its nodes, as the screen's steps do);
         Slurm holds a step that does not fit until one ends ("Requested nodes are busy").

Everything the ssh and srun modes create (namespaces, bridges, sshds, keys in a private temporary folder, Slurm's
daemons) is torn down at the end, on error and on SIGINT/SIGTERM/SIGHUP; `--cleanup-stale` removes namespaces
left by a benchmark whose process is gone (SIGKILL). Root only for ssh and srun.

    launch_fanout.py --counts 8,16,32,64,128 --out RESULTS.json [--mode local|ssh|srun] [--program /bin/true]
                     [--program-arg ARG ...] [--limit-s 120] [--srun-share overlap|exact]
    launch_fanout.py --table RESULTS.json     the markdown rows docs/scale.md shows
"""
import argparse
import json
import os
import pwd
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

LIMIT_S = 120.0
HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "cclfan"  # namespaces: cclfan<owner pid>-sw (the bridge), -l (the launcher), -n<i> (node i)
SSH_NET = "198.19"  # node i: 198.19.<i // 250>.<i % 250 + 1>/16; the launcher 198.19.255.1
LAUNCHER_ADDRESS = f"{SSH_NET}.255.1"
MAX_SSH_NODES = 1000  # a Linux bridge holds 1024 ports
SRUN_NODES = ("node1", "node2", "node3", "node4", "node5", "node6", "node7", "node8")


# What differs between launches that failed for one reason: Slurm's step ids, Open MPI's [host:pid] and pids.
VARYING = ((re.compile(r"StepId=\d+\.\d+"), "StepId=J.S"), (re.compile(r"^\[[^\]\s:]+:\d+\]"), "[host:pid]"),
           (re.compile(r"setpgid\(\d+,\d+\)"), "setpgid(pid,pid)"))


def first_meaningful_line(text):
    """The first line that is not a separator, with what varies between launches (VARYING) made alike: the key
    under which the failures and notices of a batch are counted."""
    words = [line.strip() for line in text.splitlines() if line.strip("-=* \t")]
    if not words:
        return None
    line = words[0][:200]
    for pattern, replacement in VARYING:
        line = pattern.sub(replacement, line)
    return line


def batch(argvs, limit_s, env=None):
    """Starts every argv at once, waits up to limit_s for all of them; the row described in the module's docstring."""
    load_before = [round(value, 2) for value in os.getloadavg()]
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    children = [(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  start_new_session=True, env=env), time.monotonic()) for argv in argvs]
    ok, failed, timed_out, durations, failures, notices = 0, 0, 0, [], {}, {}
    for child, began in children:
        left = max(0.1, limit_s - (time.monotonic() - started))
        try:
            _, err = child.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            timed_out += 1
            continue
        durations.append(time.monotonic() - began)
        line = first_meaningful_line(err.decode(errors="replace"))
        if child.returncode == 0:
            ok += 1
            if line:
                notices[line] = notices.get(line, 0) + 1
        else:
            failed += 1
            line = line or f"exit {child.returncode}"
            failures[line] = failures.get(line, 0) + 1
    wall = time.monotonic() - started
    usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage_after.ru_utime + usage_after.ru_stime) - (usage_before.ru_utime + usage_before.ru_stime)
    return {"count": len(argvs), "ok": ok, "failed": failed, "timed_out": timed_out, "wall_s": round(wall, 2),
            "slowest_s": round(max(durations), 2) if durations else None,
            "median_s": round(statistics.median(durations), 2) if durations else None,
            "launcher_cpu_s": round(cpu, 2), "load_before": load_before,
            "load_after": [round(value, 2) for value in os.getloadavg()], "failures": failures, "notices": notices}


def root_flag():
    return ["--allow-run-as-root"] if os.geteuid() == 0 else []


# --- local ---------------------------------------------------------------------------------------------------------

def local_rows(counts, program, limit_s):
    argv = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"] + root_flag() + program
    rows = []
    for count in counts:
        rows.append(batch([argv] * count, limit_s))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


# --- ssh -----------------------------------------------------------------------------------------------------------

def node_address(index):
    return f"{SSH_NET}.{index // 250}.{index % 250 + 1}"


def tool(name):
    found = shutil.which(name) or next((os.path.join(d, name) for d in ("/usr/sbin", "/sbin")
                                        if os.access(os.path.join(d, name), os.X_OK)), None)
    if not found:
        raise SystemExit(f"launch_fanout: {name} not found (ssh mode needs iproute2 and OpenSSH: "
                         "apt-get install -y iproute2 openssh-server openssh-client)")
    return found


def list_netns(ip):
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_netns_processes(ip, names):
    """SIGKILL to every process still inside these namespaces (sshd sessions, orteds, ranks the benchmark started)."""
    for name in names:
        listed = subprocess.run([ip, "netns", "pids", name], capture_output=True, text=True, check=False).stdout
        for word in listed.split():
            try:
                os.kill(int(word), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def delete_netns(ip, names):
    if names:
        kill_netns_processes(ip, names)
        subprocess.run([ip, "-force", "-batch", "-"], input="".join(f"netns del {name}\n" for name in names),
                       text=True, capture_output=True, check=False)


def cleanup_stale(ip):
    """Namespaces of benchmarks whose owner process is gone."""
    stale = [name for name in list_netns(ip) if name.startswith(PREFIX) and "-" in name
             and name[len(PREFIX):name.index("-")].isdigit() and not pid_alive(int(name[len(PREFIX):name.index("-")]))]
    delete_netns(ip, stale)
    return stale


class SshFleet:
    """node_count namespaces on one bridge, each with an sshd on its mgmt0, and a launcher namespace; keys and
    configuration in a private temporary folder. A context manager: the exit tears everything down."""

    def __init__(self, node_count):
        if not 2 <= node_count <= MAX_SSH_NODES:
            raise SystemExit(f"launch_fanout: ssh mode holds 2 to {MAX_SSH_NODES} nodes, not {node_count}")
        self.ip, self.sshd, self.keygen = tool("ip"), tool("sshd"), tool("ssh-keygen")
        self.node_count = node_count
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch, self.launcher = f"{self.tag}-sw", f"{self.tag}-l"
        self.nodes = [f"{self.tag}-n{i}" for i in range(node_count)]
        self.folder = None
        self.daemons = []
        self.made_privsep = False

    def ip_batch(self, namespace, lines):
        argv = [self.ip] + (["-n", namespace] if namespace else []) + ["-batch", "-"]
        result = subprocess.run(argv, input="".join(line + "\n" for line in lines), text=True, capture_output=True,
                                check=False)
        if result.returncode != 0:
            raise SystemExit(f"launch_fanout: ip {' '.join(argv[1:-2])} -batch failed: {result.stderr.strip()[:300]}")

    def __enter__(self):
        try:
            self._build()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self):
        # Not under /tmp: every node sees a /tmp of its own, and all of them the keys here.
        self.folder = tempfile.mkdtemp(prefix="cclbench-fanout-ssh-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
        self.ip_batch(None, [f"netns add {name}" for name in [self.switch, self.launcher] + self.nodes])
        ports = [(f"p{i}", name) for i, name in enumerate(self.nodes)] + [("pl", self.launcher)]
        self.ip_batch(self.switch, ["link add br0 type bridge", "link set br0 up"] +
                      [f"link add {port} type veth peer name mgmt0 netns {name}" for port, name in ports] +
                      [f"link set {port} master br0" for port, _ in ports] + [f"link set {port} up" for port, _ in ports])
        for index, name in enumerate(self.nodes + [self.launcher]):
            address = node_address(index) if index < self.node_count else LAUNCHER_ADDRESS
            self.ip_batch(name, ["link set lo up", f"addr add {address}/16 dev mgmt0", "link set mgmt0 up"])
        for key in ("host_key", "user_key"):
            subprocess.run([self.keygen, "-q", "-t", "ed25519", "-N", "", "-f", self.path(key)], check=True,
                           stdin=subprocess.DEVNULL)
        shutil.copyfile(self.path("user_key.pub"), self.path("authorized_keys"))
        with open(self.path("sshd_config"), "w", encoding="utf-8") as handle:
            handle.write("\n".join([
                "Port 22", f"HostKey {self.path('host_key')}", f"AuthorizedKeysFile {self.path('authorized_keys')}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "PidFile none", "UseDNS no", "PrintMotd no", "LogLevel ERROR", ""]))
        if not os.path.isdir("/run/sshd"):  # sshd's privilege separation folder; removed again at the end
            os.makedirs("/run/sshd", mode=0o755)
            self.made_privsep = True
        # Each sshd runs in its own mount namespace (ip netns exec makes one), where a node gets what a real one has
        # of its own: a /tmp (Open MPI's session folders are named by host name, which all namespaces share, and
        # collide in one /tmp: "A call to mkdir was unable to create the desired directory"), and a ~/.bashrc of
        # its own (the login shell reads it under sshd; this machine's sets up pyenv, a cost of this machine's root
        # account, not of a launch): an empty one.
        rc = os.path.join(pwd.getpwuid(os.geteuid()).pw_dir, ".bashrc")
        binds_rc = [self.path("empty_bashrc"), rc] if os.path.isfile(rc) else []
        open(self.path("empty_bashrc"), "w").close()
        log = open(self.path("sshd.log"), "ab")
        for index, name in enumerate(self.nodes):
            node_tmp = self.path(f"tmp-n{index}")
            os.makedirs(node_tmp)
            os.chmod(node_tmp, 0o1777)
            binds = ["sh", "-c", 'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; '
                     'exec "$@"', "sh", node_tmp, "/tmp"] + binds_rc + ["--"]
            self.daemons.append(subprocess.Popen(
                [self.ip, "netns", "exec", name] + binds + [self.sshd, "-D", "-e", "-f", self.path("sshd_config"),
                                                            "-o", f"ListenAddress={node_address(index)}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log))
        log.close()

    def path(self, *parts):
        return os.path.join(self.folder, *parts)

    def agent(self):
        """plm_rsh_agent: Open MPI splits it at spaces (the temporary folder has none)."""
        return (f"ssh -i {self.path('user_key')} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                "-o BatchMode=yes -o LogLevel=ERROR")

    def __exit__(self, *exc):
        for daemon in self.daemons:
            if daemon.poll() is None:
                daemon.kill()
        for daemon in self.daemons:
            daemon.wait()
        self.daemons = []
        delete_netns(self.ip, [name for name in list_netns(self.ip) if name.startswith(self.tag + "-")])
        if self.made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)
            self.made_privsep = False
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        return False


def wait_for_sshd(addresses, deadline_s=120.0):
    """Inside the launcher namespace: until every node accepts TCP on port 22."""
    deadline = time.monotonic() + deadline_s
    waiting = list(addresses)
    while waiting and time.monotonic() < deadline:
        still = []
        for address in waiting:
            try:
                with socket.create_connection((address, 22), timeout=2):
                    pass
            except OSError:
                still.append(address)
        waiting = still
        if waiting:
            time.sleep(0.5)
    if waiting:
        raise SystemExit(f"launch_fanout: {len(waiting)} sshd(s) did not listen within {deadline_s:.0f} s "
                         f"(first {waiting[0]})")


def ssh_inner(args):
    """Runs in the launcher namespace: the batches, one JSON row a line on stdout."""
    counts = parse_counts(args.counts)
    wait_for_sshd([node_address(i) for i in range(2 * max(counts))])
    options = ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", args.agent, "--mca", "oob_tcp_if_include", "mgmt0",
               "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "mgmt0", "--bind-to", "none"] + root_flag()
    for count in counts:
        argvs = [["mpirun"] + options + ["-H", f"{node_address(2 * j)},{node_address(2 * j + 1)}", "-np", "2"]
                 + program_argv(args) for j in range(count)]
        print(json.dumps(batch(argvs, args.limit_s)), flush=True)
        time.sleep(args.settle_s)  # the remote orteds of the batch end after their mpirun
    return 0


def ssh_rows(args):
    counts = parse_counts(args.counts)
    ip = tool("ip")
    stale = cleanup_stale(ip)
    if stale:
        print(f"launch_fanout: removed {len(stale)} stale namespace(s) of benchmarks that are gone", file=sys.stderr)
    with SshFleet(2 * max(counts)) as fleet:
        argv = [ip, "netns", "exec", fleet.launcher, sys.executable, os.path.abspath(__file__), "--mode", "ssh-inner",
                "--counts", args.counts, "--limit-s", str(args.limit_s), "--agent", fleet.agent(),
                "--settle-s", str(args.settle_s), "--program", args.program] + \
            [f"--program-arg={word}" for word in args.program_arg]
        return inner_rows(argv)


def inner_rows(argv, env=None):
    rows = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as inner:
        try:
            for line in inner.stdout:
                if line.startswith("{"):
                    rows.append(json.loads(line))
                    print(line.strip(), file=sys.stderr, flush=True)
        except BaseException:
            inner.kill()  # its launches are ended with the namespaces (ssh) or the cluster (srun)
            raise
        if inner.wait() != 0:
            raise SystemExit(f"launch_fanout: the measurement exited {inner.returncode} after {len(rows)} row(s)")
    return rows


# --- srun ----------------------------------------------------------------------------------------------------------

def srun_inner(args):
    """Runs inside `salloc`: the batches of srun steps, one JSON row a line on stdout."""
    nodes = os.environ.get("CCLBENCH_FANOUT_NODES", "").split(",")
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    share = {"overlap": ["--overlap"], "exact": ["--exact"], "whole": []}[args.srun_share]
    for count in parse_counts(args.counts):
        argvs = [["srun", f"--mpi={args.srun_mpi}", "--kill-on-bad-exit=1", "-N", "2", "-n", "2",
                  "--ntasks-per-node", "1", "--nodelist", ",".join(pairs[j % len(pairs)])] + share + program_argv(args)
                 for j in range(count)]
        print(json.dumps(batch(argvs, args.limit_s)), flush=True)
        time.sleep(args.settle_s)
    return 0


def srun_rows(args):
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cluster"))
    import unittest  # noqa: E402 (vslurm says why Slurm cannot start with unittest.SkipTest)
    import vcluster  # noqa: E402
    import vslurm  # noqa: E402
    with vcluster.Cluster(list(SRUN_NODES)) as cluster:
        try:
            slurm = vslurm.VirtualSlurm(cluster).start()
        except unittest.SkipTest as reason:
            raise SystemExit(f"launch_fanout: {reason}")
        try:
            env = slurm.env(CCLBENCH_FANOUT_NODES=",".join(SRUN_NODES), OMPI_MCA_btl="tcp,self",
                            OMPI_MCA_btl_tcp_if_include="198.18.0.0/24", OMPI_ALLOW_RUN_AS_ROOT="1",
                            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
            argv = cluster.exec_argv(SRUN_NODES[0], [
                "salloc", "-N", str(len(SRUN_NODES)), "--exclusive", sys.executable, os.path.abspath(__file__),
                "--mode", "srun-inner", "--counts", args.counts, "--limit-s", str(args.limit_s),
                "--srun-share", args.srun_share, "--srun-mpi", args.srun_mpi, "--settle-s", str(args.settle_s),
                "--program", args.program] + [f"--program-arg={word}" for word in args.program_arg], env=env)
            return inner_rows(argv, env=env)
        finally:
            slurm.stop()


# --- the caps --------------------------------------------------------------------------------------------------------

# The committed measurements, one per way of launching (plan.screen_schedule.LAUNCH_CAPS's keys).
RESULTS = {"mpirun-local": "launch_fanout_results.json", "mpirun-ssh": "launch_fanout_ssh_results.json",
           "srun": "launch_fanout_srun_results.json"}
# A pair job's wall time (plan.screen_schedule.PER_PAIR_S): start-up longer than that doubles a round.
JOB_S = 20.0


def cap_from_rows(rows, job_s=JOB_S):
    """The screen's default launches at once for one launcher: the largest measured count at which every launch
    exited 0 and the whole batch was done within one pair job's time (job_s); None when no count was."""
    fit = [row["count"] for row in rows if row["failed"] == 0 and row["timed_out"] == 0 and row["wall_s"] <= job_s]
    return max(fit) if fit else None


def caps(folder=HERE, job_s=JOB_S):
    """{kind: cap} from the committed results files."""
    found = {}
    for kind, name in RESULTS.items():
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            found[kind] = cap_from_rows(json.load(handle)["rows"], job_s)
    return found


# --- the table and main --------------------------------------------------------------------------------------------

def table(document):
    """Markdown rows: launches at once | exited 0 | failed | timed out | all done | median | slowest | launcher CPU |
    load before -> after (1 min)."""
    lines = []
    for row in document["rows"]:
        def seconds(value):
            return "-" if value is None else f"{value:.1f} s"
        cpu = row.get("launcher_cpu_s")
        load = f"{row['load_before'][0]:.1f} -> {row['load_after'][0]:.1f}" if row.get("load_before") else "-"
        lines.append(f"| {row['count']} | {row['ok']} | {row['failed']} | {row['timed_out']} | {seconds(row['wall_s'])} "
                     f"| {seconds(row['median_s'])} | {seconds(row['slowest_s'])} | "
                     f"{'-' if cpu is None else f'{cpu:.1f} s'} | {load} |")
    return "\n".join(lines)


def parse_counts(text):
    try:
        counts = [int(word) for word in text.split(",")]
    except ValueError:
        raise SystemExit(f"launch_fanout: --counts takes comma-separated integers, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"launch_fanout: --counts must be positive, not {text!r}")
    return counts


def program_argv(args):
    return [args.program] + list(args.program_arg)


def end_on_signal(signum, _frame):
    raise SystemExit(f"launch_fanout: signal {signum}: tearing down")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("local", "ssh", "srun", "ssh-inner", "srun-inner"), default="local")
    parser.add_argument("--counts", default="8,16,32,64,128")
    parser.add_argument("--out")
    parser.add_argument("--program", default="/bin/true")
    parser.add_argument("--program-arg", action="append", default=[], help="an argument of PROGRAM (repeat)")
    parser.add_argument("--limit-s", type=float, default=LIMIT_S)
    parser.add_argument("--settle-s", type=float, default=5.0, help="pause between batches (ssh, srun)")
    parser.add_argument("--srun-share", choices=("overlap", "exact", "whole"), default="overlap",
                        help="steps on shared nodes: --overlap, --exact (one CPU of each node), or neither (Slurm's "
                        "default since 21.08: a step takes every CPU of its nodes)")
    parser.add_argument("--srun-mpi", default="none", help="srun --mpi= (pmix for an MPI program)")
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    parser.add_argument("--cleanup-stale", action="store_true", help="remove namespaces of dead benchmarks and stop")
    parser.add_argument("--table", metavar="RESULTS.json", help="print the markdown rows of a results file and stop")
    parser.add_argument("--caps", action="store_true", help="print the caps the committed results give and stop")
    args = parser.parse_args(argv)
    if args.caps:
        print(json.dumps(caps()))
        return 0
    if args.table:
        with open(args.table, encoding="utf-8") as handle:
            print(table(json.load(handle)))
        return 0
    if args.mode == "ssh-inner":
        return ssh_inner(args)
    if args.mode == "srun-inner":
        return srun_inner(args)
    if args.cleanup_stale:
        print(f"launch_fanout: removed {len(cleanup_stale(tool('ip')))} stale namespace(s)", file=sys.stderr)
        return 0
    if not args.out:
        parser.error("--out is required")
    if args.mode in ("ssh", "srun") and os.geteuid() != 0:
        raise SystemExit(f"launch_fanout: --mode {args.mode} needs root (network namespaces)")
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, end_on_signal)
    program = program_argv(args)
    if args.mode == "local":
        rows = local_rows(parse_counts(args.counts), program, args.limit_s)
    elif args.mode == "ssh":
        rows = ssh_rows(args)
    else:
        rows = srun_rows(args)
    document = {"format": "launch_fanout/1", "mode": args.mode,
                "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(), "program": program[0] if len(program) == 1 else program,
                "limit_s": args.limit_s,
                "mpirun": subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                                         check=False).stdout.splitlines()[:1], "rows": rows}
    if args.mode == "ssh":
        document["ssh"] = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    if args.mode == "srun":
        document["srun"] = subprocess.run(["srun", "--version"], capture_output=True, text=True,
                                          check=False).stdout.strip()
        document["srun_share"] = args.srun_share
    with open(args.out + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
