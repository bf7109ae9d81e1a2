"""What the virtual-cluster tests share: where the build and the tools are, why a test must skip, the launch through
the ssh-like agent (mpirun's arguments and environment), bin-dir wrappers over the real tools, the fail codes a fake
node's RDMA ports leave, opening and closing a cluster around a test class (with a scratch folder kept when a test
fails), `cclbench screen` run on the cluster, and the exit status CTest reads (77 when everything skipped)."""
import json
import os
import shutil
import stat
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import vcluster  # noqa: E402
    import vslurm  # noqa: E402
    HARNESS_MISSING = None
except ImportError as error:
    vcluster = None
    HARNESS_MISSING = f"no virtual cluster harness (tests/cluster/vcluster.py): {error}"

# Under CTest's resource allocation (scripts/run_tests.sh: a CPU a test), every virtual-cluster test runs on its CPU.
if vcluster is not None:
    vcluster.pin_to_allocated_cpus()

SOURCE_DIR = os.environ.get("CCLBENCH_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BINARY_DIR = os.environ.get("CCLBENCH_BINARY_DIR") or os.path.join(SOURCE_DIR, "build")
APPS = os.path.join(BINARY_DIR, "bench", "apps")
COLL_PERF = os.path.join(APPS, "coll_perf")
CCLBENCH = os.path.join(SOURCE_DIR, "scripts", "cclbench")
FAKE_BIN = os.path.join(SOURCE_DIR, "tests", "scripts", "fake_bin")
MPIRUN = os.environ.get("CCLBENCH_VC_MPIRUN", "mpirun")
# The rails by subnet, not by name: a name that is down on one node makes Open MPI ignore the
# whole list there ("Unknown interface name") and the ranks cannot reach each other.
RAIL_SUBNETS = "198.18.10.0/24,198.18.13.0/24"


def skip_reason(*tools):
    """Why no test of the virtual cluster can run here (not root, no namespaces, no ip, a tool of `tools` not built
    in APPS), or None."""
    if HARNESS_MISSING:
        return HARNESS_MISSING
    try:
        vcluster.check_supported()
    except vcluster.Unsupported as error:
        return str(error)
    for tool in tools:
        if not os.access(os.path.join(APPS, tool), os.X_OK):
            return f"{tool} not built ({os.path.join(APPS, tool)})"
    return None


def launch_options(cluster, btl=True):
    """mpirun's options on the virtual cluster: plm rsh (overrides OMPI_MCA_plm=isolated), the agent, orted on
    mgmt0, no binding (one core per node otherwise) and, with btl, the tcp BTL on the two rails."""
    options = ["--mca", "plm", "rsh", "--mca", "plm_rsh_agent", cluster.agent, "--mca", "oob_tcp_if_include",
               "mgmt0"]
    if btl:
        options += ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", RAIL_SUBNETS]
    return options + ["--bind-to", "none"]


def mpirun_args(cluster, btl=True):
    """cclbench's --mpirun-args value for the virtual cluster."""
    return " ".join(launch_options(cluster, btl))


def mpirun_argv(cluster, hosts, command, np):
    """The launch the harness documents, with its hosts and rank count."""
    return [MPIRUN] + launch_options(cluster) + ["--host", hosts, "-np", str(np)] + command


def mpi_env(**extra):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra)
    return env


def write_script(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def fake_gpu_bin_dir(bin_dir):
    """A --bin-dir whose coll_perf is the real one on the MPI backend and whose topo_map and p2p_matrix are the
    scripts tests' doubles with one GPU: the NCCL-shaped plan of a GPU host, run on hosts without one."""
    os.makedirs(bin_dir, exist_ok=True)
    write_script(os.path.join(bin_dir, "coll_perf"), f"#!/bin/sh\nexec {COLL_PERF} \"$@\" --backend mpi\n")
    for tool in ("topo_map", "p2p_matrix"):
        write_script(os.path.join(bin_dir, tool), f"#!/bin/sh\nFAKE_GPUS=1 exec {FAKE_BIN}/{tool} \"$@\"\n")
    return bin_dir


def fake_hca_fail_codes(run_dir):
    """The fail codes of a run's verdict.json. The fake topo_map's node has RDMA ports mlx5_0/mlx5_3 that this
    machine lacks, so the doctor's nccl_env check fails on NCCL_IB_HCA and the expected rails have no counters
    (rail.flag): with every point measured, those are the only fails (rules/verdict.py)."""
    with open(os.path.join(run_dir, "verdict.json")) as handle:
        verdict = json.load(handle)
    return sorted({reason["code"] for reason in verdict["reasons"] if reason["severity"] == "fail"})


def open_cluster(test_class, nodes, work_prefix=None, tools=()):
    """setUpClass's common part: skip with the reason, else test_class.cluster (entered) and, with work_prefix, a
    scratch folder test_class.work."""
    reason = skip_reason(*tools)
    if reason:
        raise unittest.SkipTest(reason)
    test_class.cluster = vcluster.Cluster(list(nodes))
    test_class.cluster.__enter__()
    if work_prefix:
        test_class.work = tempfile.mkdtemp(prefix=work_prefix)


def close_cluster(test_class):
    """tearDownClass's common part: the cluster down, none of its namespaces left behind, and its scratch folder
    (open_cluster's work_prefix) removed."""
    test_class.cluster.__exit__(None, None, None)
    if getattr(test_class, "work", None):
        shutil.rmtree(test_class.work, ignore_errors=True)
    leftovers = [ns for ns in vcluster.list_netns(test_class.cluster.tools) if ns.startswith(test_class.cluster.id)]
    assert not leftovers, leftovers


def close_cluster_keeping_work(test_class, keep, what):
    """tearDownClass of a class whose scratch folder test_class.work holds its runs: the cluster down, and the
    folder removed, or kept and named ("<what> kept in <folder>") when `keep` (a test failed: its logs)."""
    test_class.cluster.__exit__(None, None, None)
    if keep:
        print(f"\n  {what} kept in {test_class.work}", file=sys.stderr)
    else:
        shutil.rmtree(test_class.work, ignore_errors=True)


def run_screen(cluster, hosts, results, run_id, screen_args, bin_dir=APPS, agent=None, timeout=600):
    """`cclbench screen` over `hosts` from node1, its results under `results/run_id`, launched through the cluster's
    agent (or `agent`, a wrapper of it) with mpi_yield_when_idle (more ranks than cores here); the CompletedProcess
    (stdout and stderr captured as text)."""
    launch_args = mpirun_args(cluster)
    if agent:
        launch_args = launch_args.replace(cluster.agent, agent)
    launch_args += " --mca mpi_yield_when_idle 1"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONDONTWRITEBYTECODE="1")
    return cluster.exec("node1", [sys.executable, CCLBENCH, "screen", "--hosts", ",".join(hosts),
                                  "--bin-dir", bin_dir, "--mpirun", MPIRUN, "--results", results,
                                  "--run-id", run_id, f"--mpirun-args={launch_args}"] + list(screen_args),
                        env=env, capture_output=True, text=True, timeout=timeout)


def main():
    outcome = unittest.main(exit=False, verbosity=2).result
    # A skip in setUpClass is recorded as a skip but not as a test run.
    skipped_tests = sum(isinstance(test, unittest.TestCase) for test, _ in outcome.skipped)
    if outcome.wasSuccessful() and outcome.skipped and outcome.testsRun == skipped_tests:
        sys.exit(77)
    sys.exit(0 if outcome.wasSuccessful() else 1)


def open_slurm(test_class, nodes, tools=()):
    """open_cluster, then Slurm across its nodes on test_class.slurm (vslurm.py); the cluster goes down again when
    Slurm cannot start."""
    open_cluster(test_class, nodes, tools=tools)
    try:
        test_class.slurm = vslurm.VirtualSlurm(test_class.cluster).start()
    except BaseException:
        test_class.cluster.__exit__(None, None, None)
        raise


def close_slurm(test_class):
    try:
        test_class.slurm.stop()
    finally:
        test_class.cluster.__exit__(None, None, None)
