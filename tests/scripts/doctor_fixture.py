"""Builds fake /sys and /proc trees of the target inference node for `cclbench doctor` tests.

The layout is the kernel's, not a convenience copy of it:
- every PCI function is a directory under sys/devices/pci<domain>:<bus>/<root port>/.../<bdf>, nested
  the way the bridges nest, and sys/bus/pci/devices/<bdf> is a relative symlink into it;
- an RDMA device is sys/devices/.../<nic bdf>/infiniband/<hca> with sys/class/infiniband/<hca>
  linking there and its `device` link pointing back at the PCI function; ports/<n>/{state,phys_state,
  link_layer,rate,gids/<i>,gid_attrs/{types,ndevs}/<i>} as mlx5 fills them (unpopulated GID entries
  read as all zeros; their types/ndevs entries do not read);
- the netdev is sys/devices/.../<nic bdf>/net/<ifname> with sys/class/net/<ifname> linking there;
- IOMMU groups are sys/kernel/iommu_groups/<n>/{type,devices/<bdf>} with each device's `iommu_group`
  linking back; NUMA nodes are sys/devices/system/node/node<n>;
- a PCIe switch downstream port has a 4 KiB config space with an ACS extended capability.

The node (as tests/data/topology/rtxpro_2socket.xml): two sockets. Socket 0: root port 0000:00:01.1 ->
switch 0000:01:00.0 -> downstream ports 0000:02:0{0-4}.0 -> GPU0-3 (0000:03-06:00.0) and ConnectX-7
mlx5_0/eth0 (0000:07:00.0). Socket 1: the same under 0000:80:01.1 with GPU4-7 (0000:83-86:00.0) and
mlx5_3/eth3 (0000:87:00.0). RTX PRO 6000 Blackwell Server Edition: 10de:2bb5, class 0x030200,
PCIe Gen5 x16. Both rails: 400 Gb/s RoCE, MTU 9000, RoCE v2 GIDs on 10.0.<rail>.7.

`build(root, **faults)` writes root/sys and root/proc and returns (sysfs_root, procfs_root). Each fault
keyword changes what a real faulty node would show, and nothing else.
"""
import os

GPU_VENDOR, GPU_DEVICE, GPU_CLASS = "0x10de", "0x2bb5", "0x030200"
NIC_VENDOR, NIC_DEVICE, NIC_CLASS = "0x15b3", "0x1021", "0x020000"
SWITCH_VENDOR, SWITCH_DEVICE, BRIDGE_CLASS = "0x1000", "0xc030", "0x060400"
ROOT_VENDOR, ROOT_DEVICE = "0x1022", "0x14ab"
GEN5, GEN4 = "32.0 GT/s PCIe", "16.0 GT/s PCIe"

SOCKETS = [
    # (NUMA node, host bridge, root port, switch up, downstream ports, GPU bdfs, NIC bdf, hca, netdev, rail octet)
    (0, "pci0000:00", "0000:00:01.1", "0000:01:00.0", [f"0000:02:0{i}.0" for i in range(5)],
     [f"0000:0{b}:00.0" for b in range(3, 7)], "0000:07:00.0", "mlx5_0", "eth0", 0),
    (1, "pci0000:80", "0000:80:01.1", "0000:81:00.0", [f"0000:82:0{i}.0" for i in range(5)],
     [f"0000:8{b}:00.0" for b in range(3, 7)], "0000:87:00.0", "mlx5_3", "eth3", 3),
]
GPU_BDFS = SOCKETS[0][5] + SOCKETS[1][5]
NIC_BDFS = {"mlx5_0": "0000:07:00.0", "mlx5_3": "0000:87:00.0"}
NIC_NETDEV = {"mlx5_0": "eth0", "mlx5_3": "eth3"}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text if text.endswith("\n") or text == "" else text + "\n")


def link(path, target):
    """A relative symlink at `path` to the absolute `target`, as sysfs makes them."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(path)), path)


def acs_config(request_redirect=False):
    """4 KiB config space of a switch downstream port: an ACS extended capability at 0x100 (ID 0x000d,
    version 1, last in the list); ACS control at 0x106 has SV, plus RR|CR when redirecting."""
    data = bytearray(4096)
    data[0:4] = bytes.fromhex("0010") + bytes.fromhex("30c0")  # vendor 0x1000, device 0xc030 (little endian)
    header = 0x000d | (1 << 16) | (0 << 20)
    data[0x100:0x104] = header.to_bytes(4, "little")
    data[0x104:0x106] = (0x5f).to_bytes(2, "little")           # capability register
    control = 0x1 | (0xc if request_redirect else 0)
    data[0x106:0x108] = control.to_bytes(2, "little")
    return bytes(data)


def gid_text(address16):
    hexes = address16.hex()
    return ":".join(hexes[i:i + 4] for i in range(0, 32, 4))


def mac_gid(octet):
    return bytes.fromhex("fe80000000000000") + bytes.fromhex(f"ba3fd2fffe00{octet:02x}07")


def ipv4_gid(octet):
    return bytes(10) + b"\xff\xff" + bytes([10, 0, octet, 7])


def build(root, *, gpu_width=None, upstream_port_speed=None, nic_speed=None, peermem=True, open_module=True,
          kernel="6.8.0-85-generic", port_state=None, port_rate=None, gids="both", mtu=None, nic_numa=None,
          gpu_numa=None, iommu_type="identity", cmdline_pt=True, split_iommu_groups=False, acs_redirect=None,
          fw=None, garbage=None, huge=None, unreadable=None, as_directory=None):
    """Writes root/sys and root/proc. Fault keywords (all default healthy):
    gpu_width={bdf: "8"}            current_link_width (and speed 16 GT/s) of a GPU
    upstream_port_speed={bdf: s}    max_link_speed of a downstream port (a slot limited to Gen4)
    nic_speed={hca: s}              current_link_speed of a NIC
    peermem / open_module / kernel  GPUDirect RDMA paths
    port_state={hca: (state, phys)} port 1 state and phys_state text
    port_rate={hca: text}           port 1 rate text
    gids="both"|"ipv6_only"|"none"  GID table of every port
    mtu={netdev: n}; nic_numa={hca: n}; gpu_numa={bdf: n}
    iommu_type / cmdline_pt / split_iommu_groups / acs_redirect={downstream bdf}
    fw={hca: version}
    garbage / huge / unreadable / as_directory: {relative path under sys: ...} applied last
    """
    sys_root = os.path.join(root, "sys")
    proc_root = os.path.join(root, "proc")
    devices = os.path.join(sys_root, "devices")
    group_of = {}
    next_group = [10]

    def new_group():
        next_group[0] += 1
        return str(next_group[0])

    def pci_function(path, bdf, vendor, device, klass, numa, speed, width, max_speed=GEN5, max_width="16",
                     config=None):
        write(os.path.join(path, "vendor"), vendor)
        write(os.path.join(path, "device"), device)
        write(os.path.join(path, "class"), klass)
        write(os.path.join(path, "numa_node"), str(numa))
        write(os.path.join(path, "current_link_speed"), speed)
        write(os.path.join(path, "current_link_width"), width)
        write(os.path.join(path, "max_link_speed"), max_speed)
        write(os.path.join(path, "max_link_width"), max_width)
        if config is not None:
            with open(os.path.join(path, "config"), "wb") as handle:
                handle.write(config)
        link(os.path.join(sys_root, "bus", "pci", "devices", bdf), path)

    for (numa, bridge, root_port, switch_up, downs, gpus, nic, hca, netdev, octet) in SOCKETS:
        root_path = os.path.join(devices, bridge, root_port)
        pci_function(root_path, root_port, ROOT_VENDOR, ROOT_DEVICE, BRIDGE_CLASS, numa, GEN5, "16")
        group_of[root_port] = new_group()
        up_path = os.path.join(root_path, switch_up)
        pci_function(up_path, switch_up, SWITCH_VENDOR, SWITCH_DEVICE, BRIDGE_CLASS, numa, GEN5, "16")
        shared = new_group()
        group_of[switch_up] = shared
        for down, endpoint in zip(downs, gpus + [nic]):
            down_path = os.path.join(up_path, down)
            max_speed = (upstream_port_speed or {}).get(down, GEN5)
            pci_function(down_path, down, SWITCH_VENDOR, SWITCH_DEVICE, BRIDGE_CLASS, numa, max_speed, "16",
                         max_speed=max_speed, config=acs_config(down in (acs_redirect or ())))
            group_of[down] = shared
            end_path = os.path.join(down_path, endpoint)
            group_of[endpoint] = new_group() if split_iommu_groups else shared
            if endpoint == nic:
                speed = (nic_speed or {}).get(hca, GEN5)
                pci_function(end_path, nic, NIC_VENDOR, NIC_DEVICE, NIC_CLASS, (nic_numa or {}).get(hca, numa),
                             speed, "16")
                write_hca(sys_root, end_path, hca, netdev, octet, port_state, port_rate, gids, mtu, fw)
            else:
                width = (gpu_width or {}).get(endpoint)
                # a link trains at the lower of both ends' maximum speed
                speed = GEN4 if width or max_speed == GEN4 else GEN5
                pci_function(end_path, endpoint, GPU_VENDOR, GPU_DEVICE, GPU_CLASS,
                             (gpu_numa or {}).get(endpoint, numa), speed, width or "16")
    # IOMMU groups: kernel/iommu_groups/<n>/devices/<bdf> and <device>/iommu_group, both relative links.
    for bdf, group in group_of.items():
        device_path = os.path.realpath(os.path.join(sys_root, "bus", "pci", "devices", bdf))
        group_path = os.path.join(sys_root, "kernel", "iommu_groups", group)
        write(os.path.join(group_path, "type"), iommu_type)
        link(os.path.join(group_path, "devices", bdf), device_path)
        link(os.path.join(device_path, "iommu_group"), group_path)
    # NUMA nodes, modules, the loopback netdev.
    for node, cpus in ((0, "0-15"), (1, "16-31")):
        write(os.path.join(devices, "system", "node", f"node{node}", "cpulist"), cpus)
    write(os.path.join(devices, "system", "node", "online"), "0-1")
    write(os.path.join(sys_root, "module", "nvidia", "version"), "580.95.05")
    write(os.path.join(sys_root, "module", "mlx5_core", "version"), "24.10-1.1.4")
    if peermem:
        write(os.path.join(sys_root, "module", "nvidia_peermem", "initstate"), "live")
    lo = os.path.join(devices, "virtual", "net", "lo")
    write(os.path.join(lo, "mtu"), "65536")
    link(os.path.join(sys_root, "class", "net", "lo"), lo)
    # procfs
    module = "NVIDIA UNIX Open Kernel Module for x86_64" if open_module else "NVIDIA UNIX x86_64 Kernel Module"
    write(os.path.join(proc_root, "driver", "nvidia", "version"),
          f"NVRM version: {module}  580.95.05  Release Build  (dvs-builder@U22)  Tue Sep 23 09:00:00 UTC 2025\n"
          "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)")
    write(os.path.join(proc_root, "sys", "kernel", "osrelease"), kernel)
    write(os.path.join(proc_root, "cmdline"), "BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=/dev/mapper/vg-root ro "
          + ("amd_iommu=on iommu=pt" if cmdline_pt else "amd_iommu=on") + " quiet")
    for table, action in ((garbage, "garbage"), (huge, "huge"), (unreadable, "unreadable"),
                          (as_directory, "directory")):
        for relative, value in (table or {}).items():
            path = os.path.join(sys_root, relative)
            real = os.path.realpath(path)
            if action == "garbage":
                write(real, value)
            elif action == "huge":
                write(real, "9" * value)
            elif action == "unreadable":
                os.chmod(real, 0)
            else:
                os.unlink(real)
                os.makedirs(real)
    return sys_root, proc_root


def write_hca(sys_root, nic_path, hca, netdev, octet, port_state, port_rate, gids, mtu, fw):
    ib_path = os.path.join(nic_path, "infiniband", hca)
    write(os.path.join(ib_path, "fw_ver"), (fw or {}).get(hca, "28.43.1014"))
    write(os.path.join(ib_path, "node_type"), "1: CA")
    link(os.path.join(ib_path, "device"), nic_path)
    link(os.path.join(sys_root, "class", "infiniband", hca), ib_path)
    port = os.path.join(ib_path, "ports", "1")
    state, phys = (port_state or {}).get(hca, ("4: ACTIVE", "5: LinkUp"))
    write(os.path.join(port, "state"), state)
    write(os.path.join(port, "phys_state"), phys)
    write(os.path.join(port, "link_layer"), "Ethernet")
    write(os.path.join(port, "rate"), (port_rate or {}).get(hca, "400 Gb/sec (4X NDR)"))
    entries = []
    if gids in ("both", "ipv6_only"):
        entries += [(mac_gid(octet), "IB/RoCE v1"), (mac_gid(octet), "RoCE v2")]
    if gids == "both":
        entries += [(ipv4_gid(octet), "IB/RoCE v1"), (ipv4_gid(octet), "RoCE v2")]
    for index in range(8):
        if index < len(entries):
            address, kind = entries[index]
            write(os.path.join(port, "gids", str(index)), gid_text(address))
            write(os.path.join(port, "gid_attrs", "types", str(index)), kind)
            write(os.path.join(port, "gid_attrs", "ndevs", str(index)), netdev)
        else:
            write(os.path.join(port, "gids", str(index)), gid_text(bytes(16)))
    net_path = os.path.join(nic_path, "net", netdev)
    write(os.path.join(net_path, "mtu"), str((mtu or {}).get(netdev, 9000)))
    write(os.path.join(net_path, "address"), f"b8:3f:d2:00:{octet:02x}:07")
    link(os.path.join(net_path, "device"), nic_path)
    link(os.path.join(sys_root, "class", "net", netdev), net_path)
