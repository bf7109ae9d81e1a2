"""How a launch is bound to one rail alone, per backend, as plain data (argv lists and environment).

  NCCL over RDMA: NCCL_IB_HCA==<HCA:port> (the "=" is NCCL's exact match: mlx5_1 would also match mlx5_10).
  NCCL over sockets: NCCL_SOCKET_IFNAME==<interface> (exact match too).
  The MPI backend (Open MPI's TCP BTL): --mca btl_tcp_if_include <interface>, with any btl_tcp_if_include or
      btl_tcp_if_exclude of the user's mpirun arguments taken out (Open MPI joins a parameter given twice into one
      list, and refuses include and exclude together); under srun, which has no mpirun arguments, the same
      parameter as OMPI_MCA_btl_tcp_if_include in the ranks' environment.
"""

MPI_TCP_PARAMETERS = ("btl_tcp_if_include", "btl_tcp_if_exclude")
MCA_FLAGS = ("--mca", "-mca", "--gmca", "-gmca")


def nccl_rail_env(rail, rdma):
    """The variables that bind NCCL to this rail alone."""
    return {"NCCL_IB_HCA": "=" + rail} if rdma else {"NCCL_SOCKET_IFNAME": "=" + rail}


def mpirun_args_for_interface(mpirun_args, interface):
    """mpirun arguments that keep Open MPI's TCP BTL on one interface: the user's own TCP BTL interface
    settings (flag, name, value) taken out, ours appended."""
    args = list(mpirun_args or [])
    kept = []
    index = 0
    while index < len(args):
        if args[index] in MCA_FLAGS and index + 2 < len(args) and args[index + 1] in MPI_TCP_PARAMETERS:
            index += 3  # the flag, the parameter and its value
            continue
        kept.append(args[index])
        index += 1
    return kept + ["--mca", "btl_tcp_if_include", interface]


def mpi_rail_env(interface):
    """The same binding where there are no mpirun arguments (srun)."""
    return {"OMPI_MCA_btl_tcp_if_include": interface}
