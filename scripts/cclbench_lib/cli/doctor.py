"""The `doctor` sub-parser."""

import argparse

from ..model.launcher import LAUNCHER_CHOICES


def add_doctor_parser(sub):
    doctor = sub.add_parser("doctor", help="preflight: PCIe links, GPUDirect RDMA, rails, GIDs, MTU, NUMA, ACS/IOMMU, "
                            "versions, NCCL env, GPU health (exit 1 when a check fails)")
    doctor.add_argument("--hosts", help="comma-separated hosts: one rank per host (mpirun -np 1, or srun -n 1 inside "
                        "a Slurm allocation, as baseline chooses), versions compared")
    doctor.add_argument("--hostfile", help="Open MPI hostfile (host names only are used)")
    doctor.add_argument("--sysfs-root", help="read this directory instead of /sys (fixtures)")
    doctor.add_argument("--procfs-root", help="read this directory instead of /proc (fixtures)")
    doctor.add_argument("--json", help="also write the result as JSON (doctor.schema.json)")
    doctor.add_argument("--as-host", metavar="NAME", help="the name to report for this host (default: its hostname)")
    doctor.add_argument("--mpirun", default="mpirun", help="launcher for --hosts (default: mpirun on PATH)")
    doctor.add_argument("--mpirun-args", action="append", default=[], metavar="ARGS",
                        help="extra launcher arguments for --hosts (= form, repeatable)")
    doctor.add_argument("--launcher", choices=LAUNCHER_CHOICES, default="auto",
                        help="how --hosts starts its ranks, as for baseline: srun inside a Slurm allocation when srun "
                             "and the MPI support PMIx or PMI2, else mpirun (auto, the default)")
    doctor.add_argument("--srun-args", action="append", default=[], metavar="ARGS",
                        help="extra srun arguments when srun launches (= form, repeatable)")
    # Internal: the per-host run that --hosts and baseline launch.
    doctor.add_argument("--host-only", action="store_true", help=argparse_suppress())
    # Internal: the screen's doctor stage as one launch over every node: FILE lists one {"point": HOST, "json":
    # PATH} per rank, and each rank takes its own by its launch rank (model/launcher.launch_rank).
    doctor.add_argument("--split-points", help=argparse_suppress())

    doctor.add_argument("--emit-json-line", action="store_true", help=argparse_suppress())
    # Internal: the path MTU probe rank of --hosts and baseline (NETDEV:IPV4:SIZE, repeatable).
    doctor.add_argument("--probe-path-mtu", action="append", default=[], help=argparse_suppress())
    return doctor


def argparse_suppress():
    return argparse.SUPPRESS
