"""How long one launch of N nodes takes beyond its measurements: the time model of the screen's one launch a stage
step (plan/screen_batches.py), used by the dry run's estimate and by `screen --simulate`.

Measured by tests/scale/launch_time.py on the virtual cluster (docs/scale.md, "One launch a stage"): one coll_perf
launch over N nodes (2-32 over OpenSSH, 2-16 as one srun step), each node its own group, timestamped from its
progress lines: its start-up (the launcher reaching every host, the daemons, MPI's wire-up, the job-wide agreements
and the split), its teardown (the writes, MPI_Finalize, the daemons' exit), and the CPU seconds of the launching
host's own processes (mpirun and its ssh clients; the srun client and slurmctld) apart from the nodes' side.

The fit (least squares over the median of each node count, tests/scale/launch_time_results.json):
  on the virtual cluster   overhead(N) = start-up + teardown = a + b x N
      Every node's side (sshd, orted, slurmd, the rank's start and MPI_Init: ~0.5 s of CPU a node there) runs on
      the same 2 CPUs as the launching host, so b is mostly that CPU shared out: the nodes' side one after another.
  on a fleet               overhead(N) = o + h x (N - 2)
      Each node does its own side on its own CPUs, at the same time as the others: the wall time of one node's side
      (o: what the 2-node launch took there, its median). What stays serial is the launching host's own work, h CPU
      seconds a node (its slope, measured apart from the nodes' side), counted as if it ran on one CPU without
      overlap. Extrapolated linearly to 1,024-4,096 nodes: a tree-spawning launcher (Open MPI's rsh, Slurm's
      fan-out) does less, and a network's per-node latency more, neither measured here; the dry run says which.

LAUNCH_TIME holds the fitted constants (tests/scale/test_launch_time.py checks them against the committed results).
"""

# launcher kind (model.launcher.launch_kind): the fit. overhead_vc: (a, b) seconds and seconds a node, start-up
# plus teardown on the virtual cluster; overhead_low_s: o, their median at the fewest nodes measured (2);
# host_s_per_node: h, the launching host's CPU seconds a node; measured_nodes: the node counts measured.
LAUNCH_TIME = {
    "mpirun-ssh": {"overhead_vc": (-0.08, 0.706), "overhead_low_s": 2.72, "host_s_per_node": 0.0058,
                   "measured_nodes": (2, 32), "how": "mpirun over OpenSSH to node namespaces of the virtual cluster"},
    "srun": {"overhead_vc": (4.39, 0.611), "overhead_low_s": 5.87, "host_s_per_node": 0.0048,
             "measured_nodes": (2, 16), "how": "one srun step in a Slurm allocation of the virtual cluster's nodes"},
}
# mpirun on this host alone (every host local): the launching host is the fleet; the ssh launcher's fit stands in.
KIND_OF = {"mpirun-local": "mpirun-ssh", "mpirun-ssh": "mpirun-ssh", "srun": "srun"}
WHERE = ("fleet", "vcluster")


def fit(kind):
    return LAUNCH_TIME[KIND_OF.get(kind, kind)]


def overhead_s(kind, nodes, where="fleet"):
    """One launch's start-up plus teardown over `nodes` nodes, seconds (the module docstring's two models)."""
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, not {where!r}")
    entry = fit(kind)
    a, b = entry["overhead_vc"]
    nodes = max(1, nodes)
    if where == "vcluster":
        return a + b * nodes
    return entry["overhead_low_s"] + entry["host_s_per_node"] * max(0, nodes - entry["measured_nodes"][0])


def group_s(kind, job_s, nodes_per_job):
    """A group's own time in a launch: one job of job_s seconds as a launch of its own nodes, less that launch's
    start-up and teardown (job_s, the time of one pair job, includes its launch)."""
    return max(0.0, job_s - overhead_s(kind, nodes_per_job))


def launch_s(kind, nodes, longest_group_s, where="fleet"):
    """A launch of `nodes` nodes whose longest group takes longest_group_s."""
    return overhead_s(kind, nodes, where) + longest_group_s


def describe(kind):
    """The model in one line, for the dry run."""
    entry = fit(kind)
    low, high = entry["measured_nodes"]
    return (f"one launch of N nodes: start-up and teardown {entry['overhead_low_s']:.1f} s at {low} nodes + "
            f"{entry['host_s_per_node'] * 1000:.1f} ms a node (the launching host's own work; each node's side at "
            f"the same time), from {entry['how']} at {low}-{high} nodes, extrapolated linearly "
            f"(tests/scale/launch_time_results.json, docs/scale.md)")
