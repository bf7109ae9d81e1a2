#!/usr/bin/env python3
"""Writes the synthetic NCCL INFO logs under tests/data/evidence/logs/.

The line formats are those of NCCL's own sources (src/init.cc, src/transport/{p2p,shm,net,net_ib,
net_socket}.cc, src/transport/generic.cc, src/enqueue.cc at tags v2.18.3-1, v2.22.3-1 and
v2.28.3-1), for cluster shapes one GPU cannot produce: 2 nodes x 8 GPUs over two RoCE rails with
and without GPUDirect RDMA, a silent fallback to sockets, P2P vs SHM inside a node, PXN.
Run it again after editing; the files are committed so tests do not depend on it.
"""
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "logs")
COMM_ID = "0x9f3c2a1e5d7b4c11"


class Proc:
    def __init__(self, host, pid, dev):
        self.host, self.pid, self.tid, self.dev = host, pid, pid, dev
        self.lines = []

    def info(self, msg, tid=None):
        self.lines.append(f"{self.host}:{self.pid}:{tid or self.tid} [{self.dev}] NCCL INFO {msg}")

    def raw(self, text):
        self.lines.append(text)

    def write(self, directory):
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"{self.host}.{self.pid}.log"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def comm_ptr(rank):
    return f"0x55d0c0a{rank:05x}0"


def bus_id(dev):
    return ["1b000", "1c000", "3d000", "3e000", "9c000", "9d000", "bb000", "bc000"][dev % 8]


def preamble(p, version, network, ib_line=None, socket_line=None, ib_missing=False):
    p.info(f"NCCL version {version}")
    p.info("cudaDriverVersion 13000")
    p.info("Bootstrap: Using eth0:10.0.5.1<0>")
    p.info("NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.")
    if ib_missing:
        p.info("NET/IB : No device found.")
    if ib_line:
        p.info(ib_line)
    if socket_line:
        p.info(socket_line)
    p.info(f"Using network {network}")


def init_228(p, rank, nranks, nnodes, local_ranks, local_rank):
    p.info(f"ncclCommInitRankConfig comm {comm_ptr(rank)} rank {rank} nranks {nranks} cudaDev {p.dev} nvmlDev {p.dev} "
           f"busId {bus_id(p.dev)} commId {COMM_ID} - Init START")
    p.info("Bootstrap timings total 0.004120 (create 0.000021, send 0.000094, recv 0.003210, ring 0.000330, delay 0.000000)")
    p.info(f"comm {comm_ptr(rank)} rank {rank} nRanks {nranks} nNodes {nnodes} localRanks {local_ranks} localRank {local_rank} MNNVL 0")
    p.info("Channel 00/04 : " + " ".join(str(r) for r in range(nranks)))
    p.info(f"Ring 00 : {(rank - 1) % nranks} -> {rank} -> {(rank + 1) % nranks}")
    p.info("P2P Chunksize set to 131072")
    p.info(f"ncclCommInitRankConfig comm {comm_ptr(rank)} rank {rank} nranks {nranks} cudaDev {p.dev} nvmlDev {p.dev} "
           f"busId {bus_id(p.dev)} commId {COMM_ID} - Init COMPLETE")
    p.info(f"Init timings - ncclCommInitRankConfig: rank {rank} nranks {nranks} total 0.52 (kernels 0.21, alloc 0.02, "
           "bootstrap 0.00, allgathers 0.01, topo 0.15, graphs 0.01, connections 0.09, rest 0.03)")


def ring_lines(p, rank, nranks, devs, hosts, channels, intra, inter, gdr=True, pxn=False):
    """Ring 0->1->..->n-1->0. `intra(c)` gives the P2P/SHM text, `inter(c)` the NET text."""
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    for c in range(channels):
        if hosts[nxt] == hosts[rank]:
            if inter is not None and intra is None:
                p.info(f"Channel {c:02d}/0 : {rank}[{devs[rank]}] -> {nxt}[{devs[nxt]}] [send] via {inter(c)}")
            elif intra(c).startswith("SHM"):
                p.info(f"Channel {c:02d} : {rank}[{devs[rank]}] -> {nxt}[{devs[nxt]}] via {intra(c)}")
            else:
                p.info(f"Channel {c:02d}/0 : {rank}[{devs[rank]}] -> {nxt}[{devs[nxt]}] via {intra(c)}")
        else:
            text = inter(c)
            if pxn and "(" not in text:
                text = text.replace(f"/{c % 2}", f"/{c % 2}({(rank // 8) * 8 + (c % 2) * 4})", 1)
            p.info(f"Channel {c:02d}/0 : {rank}[{devs[rank]}] -> {nxt}[{devs[nxt]}] [send] via {text}")
        if hosts[prv] != hosts[rank]:
            p.info(f"Channel {c:02d}/0 : {prv}[{devs[prv]}] -> {rank}[{devs[rank]}] [receive] via {inter(c)}")
    if any(hosts[r] != hosts[rank] for r in range(nranks)) or intra is None:
        p.info(f"Connected all rings, use ring PXN {1 if pxn else 0} GDR {1 if gdr else 0}")
    else:
        p.info("Connected all rings, use ring PXN 0 GDR 1")


def two_nodes(name, network, inter, ib=True, socket=False, gdr=True, intra=lambda c: "P2P/CUMEM/read", pxn=False,
              ib_missing=False):
    nranks = 16
    hosts = ["node5"] * 8 + ["node7"] * 8
    devs = [r % 8 for r in range(nranks)]
    for rank in range(nranks):
        p = Proc(hosts[rank], 41000 + rank * 7, devs[rank])
        oob = "eth0:10.0.5.1<0>" if rank < 8 else "eth0:10.0.7.1<0>"
        preamble(p, "2.28.3+cuda13.0", network,
                 ib_line=f"NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE [RO]; OOB {oob}" if ib else None,
                 socket_line="NET/Socket : Using [0]eth0:10.0.5.1<0> [1]eth3:10.0.6.1<0>" if socket else None,
                 ib_missing=ib_missing)
        init_228(p, rank, nranks, 2, 8, rank % 8)
        ring_lines(p, rank, nranks, devs, hosts, 4, intra, inter, gdr=gdr, pxn=pxn)
        p.write(os.path.join(ROOT, name))


def one_node(name, intra, nranks=8, version="2.28.3+cuda13.0"):
    hosts = ["node5"] * nranks
    devs = list(range(nranks))
    for rank in range(nranks):
        p = Proc("node5", 52000 + rank, rank)
        preamble(p, version, "IB", ib_line="NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_3:1/RoCE ; OOB eth0:10.0.5.1<0>")
        init_228(p, rank, nranks, 1, nranks, rank)
        ring_lines(p, rank, nranks, devs, hosts, 2, intra, None)
        p.write(os.path.join(ROOT, name))


def single_rank():
    p = Proc("h200box", 7001, 0)
    preamble(p, "2.28.3+cuda13.0", "Socket", socket_line="NET/Socket : Using [0]lo:127.0.0.1<0>", ib_missing=True)
    init_228(p, 0, 1, 1, 1, 0)
    p.info("Connected all rings, use ring PXN 0 GDR 1")
    p.write(os.path.join(ROOT, "single_rank"))


def sockets_one_host():
    """Several ranks on one GPU host, each with its own NCCL_HOSTID: NCCL sees 2 nodes over loopback."""
    nranks = 2
    for rank in range(nranks):
        p = Proc("h200box", 7100 + rank, 0)
        preamble(p, "2.28.3+cuda13.0", "Socket", socket_line="NET/Socket : Using [0]lo:127.0.0.1<0>", ib_missing=True)
        init_228(p, rank, nranks, 2, 1, 0)
        nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
        for c in range(2):
            p.info(f"Channel {c:02d}/0 : {rank}[0] -> {nxt}[0] [send] via NET/Socket/0")
            p.info(f"Channel {c:02d}/0 : {prv}[0] -> {rank}[0] [receive] via NET/Socket/0")
        p.info("Connected all rings, use ring PXN 0 GDR 0")
        p.write(os.path.join(ROOT, "sockets_one_host"))


def old_218():
    """NCCL 2.18: no funcName before 'comm', no nNodes line, P2P/IPC."""
    nranks = 4
    hosts = ["gpu-a", "gpu-a", "gpu-b", "gpu-b"]
    for rank in range(nranks):
        p = Proc(hosts[rank], 9000 + rank, rank % 2)
        p.info("NCCL version 2.18.3+cuda12.2")
        p.info(f"NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.1.{rank // 2 + 1}<0>")
        p.info("Using network IB")
        p.info(f"comm {comm_ptr(rank)} rank {rank} nranks {nranks} cudaDev {rank % 2} nvmlDev {rank % 2} busId "
               f"{bus_id(rank % 2)} commId 0x1122334455667788 - Init START")
        nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
        for c in range(2):
            if hosts[nxt] == hosts[rank]:
                p.info(f"Channel {c:02d}/0 : {rank}[{rank % 2}] -> {nxt}[{nxt % 2}] via P2P/IPC/read")
            else:
                p.info(f"Channel {c:02d}/0 : {rank}[{rank % 2}] -> {nxt}[{nxt % 2}] [send] via NET/IB/0/GDRDMA")
            if hosts[prv] != hosts[rank]:
                p.info(f"Channel {c:02d}/0 : {prv}[{prv % 2}] -> {rank}[{rank % 2}] [receive] via NET/IB/0/GDRDMA")
        p.info("Connected all rings")
        p.info(f"comm {comm_ptr(rank)} rank {rank} nranks {nranks} cudaDev {rank % 2} nvmlDev {rank % 2} busId "
               f"{bus_id(rank % 2)} commId 0x1122334455667788 - Init COMPLETE")
        p.write(os.path.join(ROOT, "nccl_2_18_two_nodes"))


def tuning_logs():
    d = os.path.join(ROOT, "..", "tuning")
    os.makedirs(d, exist_ok=True)
    # 2.28: COLL line at the call, TUNING line when the plan is built (rank 0 only).
    p = Proc("node5", 41000, 0)
    p.info("NCCL version 2.28.3+cuda13.0")
    p.info(f"ncclCommInitRankConfig comm {comm_ptr(0)} rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId {COMM_ID} - Init START")
    for coll, count, dtype, size_bytes, algo, proto, hi in [("AllReduce", 2048, 7, 8192, "RING", "LL", 1),
                                                            ("AllReduce", 16777216, 7, 67108864, "RING", "SIMPLE", 15),
                                                            ("AllGather", 2048, 7, 8192, "RING", "LL", 0),
                                                            ("ReduceScatter", 4096, 9, 8192, "PAT", "SIMPLE", 3)]:
        p.info(f"{coll}: opCount 0 sendbuff 0x7f2a40000000 recvbuff 0x7f2a48000000 count {count} datatype {dtype} op 0 "
               f"root 0 comm {comm_ptr(0)} [nranks=16] stream 0x55d0c1000000")
        p.info(f"{coll}: {size_bytes} Bytes -> Algo {algo} proto {proto} channel{{Lo..Hi}}={{0..{hi}}}")
    with open(os.path.join(d, "nccl_2_28.log"), "w") as f:
        f.write("\n".join(p.lines) + "\n")
    # 2.22: numeric algo/proto, no collective name on the TUNING line.
    p = Proc("node5", 41001, 0)
    p.info("NCCL version 2.22.3+cuda12.6")
    p.info("AllReduce: opCount 1 sendbuff 0x7f2a40000000 recvbuff 0x7f2a48000000 count 2048 datatype 7 op 0 root 0 "
           "comm 0x55d0c0a000000 [nranks=8] stream 0x55d0c1000000")
    p.info("8192 Bytes -> Algo 1 proto 0 time 11.250000")
    p.info("AllGather: opCount 2 sendbuff 0x7f2a40000000 recvbuff 0x7f2a48000000 count 1048576 datatype 0 op 0 root 0 "
           "comm 0x55d0c0a000000 [nranks=8] stream 0x55d0c1000000")
    p.info("1048576 Bytes -> Algo 0 proto 2 time 95.500000")
    with open(os.path.join(d, "nccl_2_22.log"), "w") as f:
        f.write("\n".join(p.lines) + "\n")


def bad_inputs():
    d = os.path.join(ROOT, "..", "bad")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "empty.log"), "w").close()
    with open(os.path.join(d, "binary.log"), "wb") as f:
        f.write(bytes(range(256)) * 4)
    src = os.path.join(ROOT, "ib_gdr_two_rails", "node5.41049.log")
    text = open(src).read()
    with open(os.path.join(d, "truncated.log"), "w") as f:
        f.write(text[: len(text) * 2 // 3])  # cut in the middle of a line
    # Two processes writing one file without line discipline: records glued together.
    a = Proc("node5", 61000, 0)
    b = Proc("node5", 61001, 1)
    preamble(a, "2.28.3+cuda13.0", "IB", ib_line="NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.5.1<0>")
    preamble(b, "2.28.3+cuda13.0", "IB", ib_line="NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.5.1<0>")
    lines = []
    for x, y in zip(a.lines, b.lines):
        lines.append(x + y)  # glued
    lines.append("node5:61000:61000 [0] NCCL INFO Channel 00/0 : 0[0] -> ")  # cut mid-record
    lines.append("node5:61000:61000 [0] NCCL INFO Channel xx/0 : a[0] -> 1[1] via P2P/CUMEM/read")  # malformed
    lines.append("node5:61000:61000 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via WARP/drive")  # unknown transport
    with open(os.path.join(d, "interleaved.log"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # A future NCCL with a version this parser has never seen.
    p = Proc("node9", 1234, 0)
    preamble(p, "2.35.1+cuda14.0", "IB", ib_line="NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.9.1<0>")
    init_228(p, 0, 2, 1, 2, 0)
    p.info("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
    p.info("Channel 00/0 : 0[0] => 1[1] using QUANTUM/entangled")
    with open(os.path.join(d, "future_version.log"), "w") as f:
        f.write("\n".join(p.lines) + "\n")
    with open(os.path.join(d, "not_nccl.log"), "w") as f:
        f.write("hello\nthis is application output\n")


def main():
    shutil.rmtree(ROOT, ignore_errors=True)
    for extra in ("tuning", "bad"):
        shutil.rmtree(os.path.join(ROOT, "..", extra), ignore_errors=True)
    ib_gdr = lambda c: f"NET/IB/{c % 2}/GDRDMA"
    two_nodes("ib_gdr_two_rails", "IB", ib_gdr)
    two_nodes("socket_fallback", "Socket", lambda c: f"NET/Socket/{c % 2}", ib=False, socket=True, gdr=False,
              ib_missing=True)
    two_nodes("ib_no_gdr", "IB", lambda c: f"NET/IB/{c % 2}", gdr=False)
    two_nodes("ib_gdr_pxn", "IB", ib_gdr, pxn=True)
    two_nodes("ib_gdr_shm_intra", "IB", ib_gdr, intra=lambda c: "SHM/direct/direct")
    one_node("one_node_p2p", lambda c: "P2P/CUMEM/read")
    one_node("one_node_shm", lambda c: "SHM/direct/direct")
    single_rank()
    sockets_one_host()
    old_218()
    tuning_logs()
    bad_inputs()


if __name__ == "__main__":
    main()
