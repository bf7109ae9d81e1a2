"""The doctor's checks: pure functions over a sysfs root, a procfs root, an environment and (for
the live-only parts) a snapshot of NVML and the kernel log.

Nothing here raises on bad input: an unreadable, oversized or garbled file becomes a `skip` or
`warn` result that names the file and says why. Every result is a plain dict:

    {"id", "status": pass|warn|fail|skip, "subject", "subject_kind", "detail", "reason"}

`reason` is the why of a skip (null otherwise); `detail` says what was seen and, for warn/fail,
what to do about it.
"""

import ipaddress
import os
import re


# A sysfs attribute is at most one page; anything larger is not what the kernel wrote there.
MAX_ATTR_BYTES = 4096
NVIDIA_VENDOR = 0x10de
BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
SPEED_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) GT/s")
RATE_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) Gb/sec")
STATE_RE = re.compile(r"^([0-9]+): *([A-Za-z_]+)")
ROCE_MIN_MTU = 4200  # 4096-byte RoCE payload + headers: the smallest netdev MTU that gives active_mtu 4096
IDLE_LINK_SPEED = 2.5  # GT/s: NVIDIA GPUs drop to Gen1 speed when idle (the width stays)
# Kernel-log XIDs that mean the GPU or its memory is broken, not that an application misbehaved.
FATAL_XIDS = {48, 62, 64, 74, 79, 94, 95, 119, 120}
# Clock event reasons worth a warning before a benchmark (NVML nvmlClocksEventReason* bits).
THROTTLE_BITS = {0x4: "software power cap", 0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                 0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}
CHECK_IDS = ("pcie_link", "gdr_module", "rdma_port", "roce_gid", "netdev_mtu", "numa_affinity", "acs_iommu",
             "versions", "nccl_env", "gpu_state")


def result(check_id, status, subject, subject_kind, detail, reason=None):
    if status == "skip" and not reason:
        reason = detail
    return {"id": check_id, "status": status, "subject": subject, "subject_kind": subject_kind,
            "detail": detail, "reason": reason if status == "skip" else None}


# --- reading --------------------------------------------------------------------------------------

class Reader:
    """Reads files under a sysfs and a procfs root; every failure is a one-line reason."""

    def __init__(self, sysfs_root, procfs_root):
        self.sys = sysfs_root
        self.proc = procfs_root

    @staticmethod
    def read(path):
        """(text, None) or (None, reason). Strips the trailing newline; refuses > MAX_ATTR_BYTES."""
        try:
            # O_NONBLOCK: a FIFO planted in a fixture must not hang the doctor (sysfs has none).
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            try:
                data = os.read(fd, MAX_ATTR_BYTES + 1)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None, f"{path} does not exist"
        except IsADirectoryError:
            return None, f"{path} is a directory"
        except BlockingIOError:
            return None, f"{path} has nothing to read"
        except OSError as error:
            return None, f"cannot read {path}: {error.strerror or error}"
        if len(data) > MAX_ATTR_BYTES:
            return None, f"{path} is larger than {MAX_ATTR_BYTES} bytes: not a sysfs/procfs attribute, ignored"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None, f"{path} is not text"
        if "\x00" in text:
            return None, f"{path} holds binary data"
        return text.strip(), None

    def sysfs(self, *parts):
        return os.path.join(self.sys, *parts)

    def procfs(self, *parts):
        return os.path.join(self.proc, *parts)

    @staticmethod
    def listdir(path):
        """(sorted names, None) or ([], reason)."""
        try:
            return sorted(os.listdir(path)), None
        except FileNotFoundError:
            return [], f"{path} does not exist"
        except OSError as error:
            return [], f"cannot list {path}: {error.strerror or error}"


def parse_hex(text):
    try:
        return int(text, 16) if text and text.lower().startswith("0x") else None
    except ValueError:
        return None


def parse_int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def parse_speed(text):
    match = SPEED_RE.match(text or "")
    return float(match.group(1)) if match else None


def parse_state(text):
    """'4: ACTIVE' -> (4, 'ACTIVE'); garbage -> (None, None)."""
    match = STATE_RE.match(text or "")
    return (int(match.group(1)), match.group(2).upper()) if match else (None, None)


def parse_rate(text):
    match = RATE_RE.match(text or "")
    return float(match.group(1)) if match else None


# --- the model of a node: what sysfs says ---------------------------------------------------------

class PciDevice:
    def __init__(self, bdf):
        self.bdf = bdf
        self.chain = []        # ancestors from the host bridge ("pci0000:00") down to the parent
        self.vendor = None
        self.klass = None
        self.numa_node = None
        self.link = {}         # current_link_speed, ... -> parsed value (None when unparsable)
        self.link_raw = {}     # ... -> raw text, or None when absent
        self.iommu_group = None
        self.problems = []     # unreadable attributes, with reasons
        self.link_problems = []  # link attributes present but unreadable
        self.path = None

    @property
    def is_nvidia_gpu(self):
        return self.vendor == NVIDIA_VENDOR and self.klass is not None and self.klass >> 16 == 0x03

    @property
    def parent(self):
        return self.chain[-1] if self.chain and BDF_RE.match(self.chain[-1]) else None

    @property
    def switch(self):
        """The upstream port of the PCIe switch above the device (chain: host bridge, root port, switch
        upstream port, downstream port, ...), or None when it hangs directly off a root port."""
        return self.chain[2] if len(self.chain) >= 4 else None


class RdmaPort:
    def __init__(self, hca, number):
        self.hca = hca
        self.number = number
        self.state = (None, None)
        self.phys_state = (None, None)
        self.link_layer = None
        self.rate_gbps = None
        self.gids = []          # [{"index", "gid", "type", "ndev"}], populated entries only
        self.problems = []

    @property
    def name(self):
        return f"{self.hca}:{self.number}"


class Hca:
    def __init__(self, name):
        self.name = name
        self.bdf = None
        self.fw_ver = None
        self.ports = []
        self.problems = []


class Node:
    """Everything the checks need from /sys and /proc, read once. Missing pieces carry reasons."""

    def __init__(self, reader):
        self.reader = reader
        self.root_problems = []
        self.pci = {}
        self.hcas = []
        self.numa_nodes = None
        self.numa_reason = None
        self.modules = set()
        self.module_reason = None
        self.iommu_groups = {}      # group -> type ("DMA", "identity", ...) or None
        self.iommu_reason = None
        self.cmdline = None
        self.cmdline_reason = None
        for root, what in ((reader.sys, "sysfs root"), (reader.proc, "procfs root")):
            if not os.path.isdir(root):
                self.root_problems.append(f"{what} {root} is not a directory")
        self.root_note = f" ({'; '.join(self.root_problems)})" if self.root_problems else ""
        self._read_pci()
        self._read_rdma()
        self._read_misc()

    # -- pci
    def _read_pci(self):
        base = self.reader.sysfs("bus", "pci", "devices")
        names, _ = self.reader.listdir(base)
        for name in names:
            if not BDF_RE.match(name):
                continue
            device = PciDevice(name)
            path = os.path.join(base, name)
            device.path = path
            real = os.path.realpath(path)
            parts = real.split(os.sep)
            for index, part in enumerate(parts):
                if part.startswith("pci") and ":" in part:
                    device.chain = [p for p in parts[index:-1]]
                    break
            read = self.reader.read
            vendor, why = read(os.path.join(path, "vendor"))
            device.vendor = parse_hex(vendor)
            if vendor is None:
                device.problems.append(why)
            klass, why = read(os.path.join(path, "class"))
            device.klass = parse_hex(klass)
            if klass is None:
                device.problems.append(why)
            numa, why = read(os.path.join(path, "numa_node"))
            device.numa_node = parse_int(numa)
            if numa is None:
                device.problems.append(why)
            elif device.numa_node is None:
                device.problems.append(f"{os.path.join(path, 'numa_node')} holds '{numa[:40]}', not a number")
            for attr in ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"):
                text, why = read(os.path.join(path, attr))
                device.link_raw[attr] = text
                if text is None:
                    device.link[attr] = None
                    if not why.endswith("does not exist"):
                        device.link_problems.append(why)
                else:
                    device.link[attr] = parse_speed(text) if attr.endswith("speed") else parse_int(text)
            group = os.path.join(path, "iommu_group")
            if os.path.islink(group):
                device.iommu_group = os.path.basename(os.readlink(group))
            self.pci[name] = device

    def gpus(self):
        """NVIDIA display/3D controllers in bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's)."""
        return [self.pci[bdf] for bdf in sorted(self.pci) if self.pci[bdf].is_nvidia_gpu]

    def gpu_label(self, device):
        for index, gpu in enumerate(self.gpus()):
            if gpu.bdf == device.bdf:
                return f"GPU{index} {device.bdf}"
        return device.bdf

    # -- rdma
    def _read_rdma(self):
        read = self.reader.read
        base = self.reader.sysfs("class", "infiniband")
        names, _ = self.reader.listdir(base)
        for name in names:
            hca = Hca(name)
            path = os.path.join(base, name)
            device_link = os.path.join(path, "device")
            bdf = os.path.basename(os.path.realpath(device_link)) if os.path.exists(device_link) else None
            hca.bdf = bdf if bdf and BDF_RE.match(bdf) else None
            fw, why = read(os.path.join(path, "fw_ver"))
            hca.fw_ver = fw if fw else None
            if fw is None:
                hca.problems.append(why)
            ports, why = self.reader.listdir(os.path.join(path, "ports"))
            if why:
                hca.problems.append(why)
            for number in ports:
                if not number.isdigit():
                    continue
                port = RdmaPort(name, int(number))
                port_path = os.path.join(path, "ports", number)
                for attr in ("state", "phys_state"):
                    text, why = read(os.path.join(port_path, attr))
                    if text is None:
                        port.problems.append(why)
                    setattr(port, attr, parse_state(text))
                    if text is not None and getattr(port, attr) == (None, None):
                        port.problems.append(f"{os.path.join(port_path, attr)} holds '{text[:40]}', not 'N: NAME'")
                text, why = read(os.path.join(port_path, "link_layer"))
                port.link_layer = text if text in ("Ethernet", "InfiniBand") else None
                if port.link_layer is None:
                    port.problems.append(why or f"{os.path.join(port_path, 'link_layer')} holds '{text[:40]}'")
                text, why = read(os.path.join(port_path, "rate"))
                port.rate_gbps = parse_rate(text)
                if port.rate_gbps is None:
                    port.problems.append(why or f"{os.path.join(port_path, 'rate')} holds '{text[:40]}', not 'N Gb/sec'")
                self._read_gids(port, port_path)
                hca.ports.append(port)
            self.hcas.append(hca)

    def _read_gids(self, port, port_path):
        read = self.reader.read
        indexes, why = self.reader.listdir(os.path.join(port_path, "gids"))
        for index in sorted((i for i in indexes if i.isdigit()), key=int):
            text, _ = read(os.path.join(port_path, "gids", index))
            if not text:
                continue
            try:
                address = ipaddress.IPv6Address(text)
            except ValueError:
                port.problems.append(f"{os.path.join(port_path, 'gids', index)} holds '{text[:48]}', not a GID")
                continue
            if address.packed == bytes(16):
                continue  # unpopulated table entry
            # An unpopulated entry's type/ndev read fails with EINVAL: that entry is simply not in use.
            gid_type, _ = read(os.path.join(port_path, "gid_attrs", "types", index))
            ndev, _ = read(os.path.join(port_path, "gid_attrs", "ndevs", index))
            port.gids.append({"index": int(index), "gid": text, "address": address, "type": gid_type, "ndev": ndev})

    def ports(self):
        return [port for hca in self.hcas for port in hca.ports]

    def hca(self, name):
        return next((hca for hca in self.hcas if hca.name == name), None)

    # -- the rest
    def _read_misc(self):
        read = self.reader.read
        nodes, why = self.reader.listdir(self.reader.sysfs("devices", "system", "node"))
        numbered = [n for n in nodes if re.match(r"^node[0-9]+$", n)]
        if numbered:
            self.numa_nodes = len(numbered)
        else:
            self.numa_reason = why or "no node* entries in devices/system/node"
        self.modules_present, self.module_reason = self.reader.listdir(self.reader.sysfs("module"))
        self.modules = set(self.modules_present)
        groups, why = self.reader.listdir(self.reader.sysfs("kernel", "iommu_groups"))
        if why:
            self.iommu_reason = why
        for group in groups:
            text, _ = read(self.reader.sysfs("kernel", "iommu_groups", group, "type"))
            self.iommu_groups[group] = text
        self.cmdline, self.cmdline_reason = read(self.reader.procfs("cmdline"))


# --- the checks -----------------------------------------------------------------------------------

def _link_text(device):
    raw = device.link_raw
    return (f"{raw['current_link_speed']} x{raw['current_link_width']} "
            f"(max {raw['max_link_speed']} x{raw['max_link_width']})")


def check_pcie_link(node):
    results = []
    nic_bdfs = {hca.bdf: hca.name for hca in node.hcas if hca.bdf}
    subjects = [(gpu, node.gpu_label(gpu), "gpu") for gpu in node.gpus()]
    subjects += [(node.pci[bdf], f"{name} {bdf}", "nic") for bdf, name in sorted(nic_bdfs.items(), key=lambda x: x[1])
                 if bdf in node.pci]
    if not subjects:
        why = "; ".join(node.root_problems) or "no NVIDIA GPU (vendor 0x10de, class 0x03xxxx) and no RDMA NIC in bus/pci/devices"
        return [result("pcie_link", "skip", "host", "host", why)]
    for device, label, kind in subjects:
        link = device.link
        missing = [attr for attr, value in link.items() if value is None]
        if missing:
            raw = device.link_raw
            if device.link_problems:
                results.append(result("pcie_link", "warn", label, kind,
                                      f"cannot read the link: {'; '.join(device.link_problems)}; check it with lspci -vv"))
            elif all(raw[attr] is None for attr in missing):
                results.append(result("pcie_link", "skip", label, kind,
                                      f"no {', '.join(missing)} in {device.path} (a virtual function or a "
                                      "hypervisor without PCIe link registers)"))
            else:
                bad = ", ".join(f"{attr}='{(raw[attr] or '')[:32]}'" for attr in missing if raw[attr] is not None)
                absent = ", ".join(attr for attr in missing if raw[attr] is None)
                results.append(result("pcie_link", "warn", label, kind,
                                      (f"cannot parse {bad}" if bad else f"{absent} missing") + f" in {device.path}: "
                                      "check the link with lspci -vv"))
            continue
        cur_s, cur_w = link["current_link_speed"], link["current_link_width"]
        max_s, max_w = link["max_link_speed"], link["max_link_width"]
        upstream = node.pci.get(device.parent) if device.parent else None
        port_max = upstream.link.get("max_link_speed") if upstream else None
        if cur_w < max_w:
            results.append(result("pcie_link", "fail", label, kind,
                                  f"link trained at x{cur_w} of x{max_w}: {_link_text(device)}. Half the lanes or "
                                  "fewer: reseat the card or its riser/cable, check the slot's bifurcation setting "
                                  "in the BIOS"))
        elif cur_s < max_s:
            if port_max is not None and port_max < max_s:
                results.append(result("pcie_link", "fail", label, kind,
                                      f"the upstream port {upstream.bdf} supports only {port_max:g} GT/s, the device "
                                      f"{max_s:g} GT/s: {_link_text(device)}. Move it to a faster slot or set the "
                                      "slot's PCIe generation to Auto/max in the BIOS"))
            elif kind == "gpu" and cur_s <= IDLE_LINK_SPEED:
                results.append(result("pcie_link", "pass", label, kind,
                                      f"x{cur_w} of x{max_w}; {cur_s:g} GT/s now: an idle GPU lowers its link speed "
                                      f"(max {max_s:g} GT/s, upstream port allows it). Re-check under load with "
                                      "nvidia-smi -q -d PCI if bandwidth is low"))
            else:
                results.append(result("pcie_link", "fail", label, kind,
                                      f"link trained at {cur_s:g} GT/s of {max_s:g} GT/s: {_link_text(device)}. "
                                      "Reseat the card or its riser/cable, check the slot's PCIe generation in the "
                                      "BIOS; look for AER errors in dmesg"))
        else:
            speed_text = (device.link_raw["current_link_speed"] or "").replace(" PCIe", "")
            results.append(result("pcie_link", "pass", label, kind, f"{speed_text} x{cur_w}, its maximum"))
    return results


def check_gdr_module(node):
    subject = "host"
    if not node.hcas:
        return [result("gdr_module", "skip", subject, "host",
                       "no RDMA device in class/infiniband: GPUDirect RDMA is not needed here" + node.root_note)]
    if not node.gpus():
        return [result("gdr_module", "skip", subject, "host", "no NVIDIA GPU in bus/pci/devices" + node.root_note)]
    for module in ("nvidia_peermem", "nv_peer_mem"):
        if module in node.modules:
            return [result("gdr_module", "pass", module, "module",
                           f"{module} is loaded: NCCL can use GPUDirect RDMA (GDRDMA) through it")]
    version, why = node.reader.read(node.reader.procfs("driver", "nvidia", "version"))
    release, release_why = node.reader.read(node.reader.procfs("sys", "kernel", "osrelease"))
    kernel = None
    if release:
        match = re.match(r"^([0-9]+)\.([0-9]+)", release)
        kernel = (int(match.group(1)), int(match.group(2))) if match else None
    fix = ("modprobe nvidia-peermem (and add it to /etc/modules-load.d), or use the open GPU kernel module "
           "on Linux >= 5.12 for dma-buf")
    if version is None or kernel is None:
        unknown = why if version is None else (release_why or f"cannot parse kernel release '{release[:40]}'")
        return [result("gdr_module", "warn", subject, "host",
                       f"nvidia_peermem/nv_peer_mem not loaded and dma-buf support unknown ({unknown}): {fix}")]
    open_module = "Open Kernel Module" in version
    if open_module and kernel >= (5, 12):
        return [result("gdr_module", "pass", "dma-buf", "module",
                       f"open GPU kernel module on Linux {release}: NCCL uses dma-buf for GPUDirect RDMA "
                       "(nvidia_peermem not needed)")]
    why_not = "the proprietary GPU kernel module (no dma-buf export)" if not open_module else \
        f"Linux {release} (dma-buf for RDMA needs >= 5.12)"
    return [result("gdr_module", "fail", subject, "host",
                   f"RDMA NICs present but no path to GPUDirect RDMA: nvidia_peermem/nv_peer_mem not loaded and "
                   f"{why_not}; NCCL would stage through host memory. Fix: {fix}")]


def parse_device_list(value):
    """NCCL's device list syntax ('^' excludes, '=' exact names, else prefixes; name[:port]).
    Returns (exclude, exact, [(name, port|None)])."""
    text = (value or "").strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    items = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, port = part.partition(":")
        items.append((name, int(port) if port.isdigit() else (port or None)))
    return exclude, exact, items


def _matches(name, wanted, exact):
    return name == wanted if exact else name.startswith(wanted)


def selected_ports(node, env):
    """The RDMA ports NCCL would consider under NCCL_IB_HCA (all of them without it)."""
    spec = env.get("NCCL_IB_HCA")
    ports = node.ports()
    if not spec:
        return ports, None
    exclude, exact, items = parse_device_list(spec)
    chosen = []
    for port in ports:
        hit = any(_matches(port.hca, name, exact) and (want is None or want == port.number) for name, want in items)
        if hit != exclude:
            chosen.append(port)
    return chosen, spec


def check_rdma_port(node, env):
    if not node.hcas:
        return [result("rdma_port", "skip", "host", "host", "no RDMA device in class/infiniband" + node.root_note)]
    ports, spec = selected_ports(node, env)
    if not ports:
        return [result("rdma_port", "skip", "host", "host",
                       f"NCCL_IB_HCA={spec} selects none of the ports here (nccl_env says more)")]
    scope = f"NCCL_IB_HCA={spec}" if spec else "all ports (NCCL_IB_HCA is not set, so NCCL may use every one)"
    results = []
    best = {}
    for port in ports:
        if port.rate_gbps is not None and port.state[0] == 4:
            best[port.link_layer] = max(best.get(port.link_layer, 0), port.rate_gbps)
    for port in ports:
        state, phys = port.state, port.phys_state
        if state == (None, None) or phys == (None, None):
            results.append(result("rdma_port", "warn", port.name, "rdma_port",
                                  f"cannot read the port state ({'; '.join(port.problems)}): check with ibv_devinfo"))
            continue
        if state[0] != 4 or phys[0] != 5:
            results.append(result("rdma_port", "fail", port.name, "rdma_port",
                                  f"state {state[0]}: {state[1]}, phys_state {phys[0]}: {phys[1]} (want 4: ACTIVE, "
                                  f"5: LinkUp); checked: {scope}. Check the cable/transceiver and switch port "
                                  "(ibv_devinfo, ip link), or leave the port out of NCCL_IB_HCA"))
            continue
        peer_best = best.get(port.link_layer)
        if port.rate_gbps is None:
            results.append(result("rdma_port", "warn", port.name, "rdma_port",
                                  f"ACTIVE/LinkUp but the rate is unreadable ({'; '.join(port.problems)})"))
        elif peer_best and port.rate_gbps < peer_best:
            results.append(result("rdma_port", "fail", port.name, "rdma_port",
                                  f"ACTIVE at {port.rate_gbps:g} Gb/s, below its peers' {peer_best:g} Gb/s; checked: "
                                  f"{scope}. A slow rail holds back every ring through it: fix the link speed "
                                  "(cable, switch port, ethtool) or leave it out of NCCL_IB_HCA"))
        else:
            results.append(result("rdma_port", "pass", port.name, "rdma_port",
                                  f"ACTIVE, LinkUp, {port.rate_gbps:g} Gb/s, {port.link_layer}"))
    return results


def _roce_ports(node, env):
    ports, _ = selected_ports(node, env)
    return [port for port in ports if port.link_layer == "Ethernet"]


def check_roce_gid(node, env):
    ports = _roce_ports(node, env)
    if not ports:
        return [result("roce_gid", "skip", "host", "host", "no RoCE (Ethernet link layer) RDMA port selected here"
                       + node.root_note)]
    wanted_index = parse_int(env.get("NCCL_IB_GID_INDEX")) if env.get("NCCL_IB_GID_INDEX") else None
    results = []
    for port in ports:
        v2_ipv4 = [g for g in port.gids if (g["type"] or "").lower() == "roce v2" and g["address"].ipv4_mapped]
        v2_any = [g for g in port.gids if (g["type"] or "").lower() == "roce v2"]
        if not port.gids:
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  "no populated GID: the netdev has no IP address. Give it an IPv4 address "
                                  f"(ip addr add ... dev <netdev>){'; ' + '; '.join(port.problems) if port.problems else ''}"))
            continue
        if not v2_ipv4:
            hint = (f"only IPv6 RoCE v2 GIDs (index {v2_any[0]['index']}): set NCCL_IB_GID_INDEX="
                    f"{v2_any[0]['index']} and NCCL_IB_ADDR_FAMILY=AF_INET6, or give the netdev an IPv4 address") \
                if v2_any else "no RoCE v2 GID at all: enable RoCE v2 (cma_roce_mode) and give the netdev an IPv4 address"
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  f"no RoCE v2 GID on an IPv4-mapped address; {hint}"))
            continue
        first = v2_ipv4[0]
        where = f"index {first['index']} ({first['address'].ipv4_mapped}{' on ' + first['ndev'] if first['ndev'] else ''})"
        if wanted_index is not None and wanted_index not in {g["index"] for g in v2_ipv4}:
            results.append(result("roce_gid", "warn", port.name, "rdma_port",
                                  f"NCCL_IB_GID_INDEX={wanted_index} is not a RoCE v2 IPv4 GID here; use "
                                  f"NCCL_IB_GID_INDEX={first['index']} (RoCE v2 IPv4 GID at {where})"))
            continue
        results.append(result("roce_gid", "pass", port.name, "rdma_port",
                              f"RoCE v2 IPv4 GID at {where}; NCCL_IB_GID_INDEX={first['index']} pins it "
                              "(NCCL >= 2.21 picks it by itself)"))
    return results


def _port_netdevs(node, port):
    names = sorted({g["ndev"] for g in port.gids if g["ndev"]})
    if names:
        return names
    hca = node.hca(port.hca)
    if hca and hca.bdf:
        found, _ = node.reader.listdir(node.reader.sysfs("bus", "pci", "devices", hca.bdf, "net"))
        return found
    return []


def check_netdev_mtu(node, env):
    ports = _roce_ports(node, env)
    if not ports:
        return [result("netdev_mtu", "skip", "host", "host", "no RoCE (Ethernet link layer) RDMA port selected here"
                       + node.root_note)]
    results = []
    for port in ports:
        netdevs = _port_netdevs(node, port)
        if not netdevs:
            results.append(result("netdev_mtu", "skip", port.name, "rdma_port",
                                  "no netdev found behind the port (no gid_attrs/ndevs entry, no net/ under its "
                                  "PCI device)"))
            continue
        for netdev in netdevs:
            text, why = node.reader.read(node.reader.sysfs("class", "net", netdev, "mtu"))
            mtu = parse_int(text)
            subject = f"{netdev} ({port.name})"
            if mtu is None:
                results.append(result("netdev_mtu", "warn", subject, "netdev",
                                      f"cannot read the MTU: {why or repr(text[:40])}; check with ip link show {netdev}"))
            elif mtu < ROCE_MIN_MTU:
                results.append(result("netdev_mtu", "warn", subject, "netdev",
                                      f"MTU {mtu} is below {ROCE_MIN_MTU}: RoCE runs with 1024-byte (or smaller) "
                                      f"packets instead of 4096. Set ip link set {netdev} mtu 9000 (and on the switch "
                                      "ports)"))
            else:
                results.append(result("netdev_mtu", "pass", subject, "netdev", f"MTU {mtu} (>= {ROCE_MIN_MTU})"))
    return results


# --- rails and the path MTU between hosts (doctor --hosts; the probing is execute/path_mtu.py) ---------

PATH_MTU_MIN = 576  # every IPv4 path carries this much (RFC 791): below it a rail is unreachable, not narrow


def rail_selection(node, env, addresses):
    """This host's interfaces for the path MTU check, as the document's "rails" entry.

    addresses: {netdev: (IPv4 address text, prefix length)} of the live host (None for a fixture root).
    The rails are the netdevs behind the RoCE ports NCCL would use (NCCL_IB_HCA); without any, the
    interfaces NCCL_SOCKET_IFNAME names (a list, not ^exclusions); without that either, none: every
    IPv4 interface is still listed, and the cluster step takes the ones on another host's rail subnets
    (a host whose ranks did not get the variable still has its rails found)."""
    if addresses is None:
        return {"source": None, "interfaces": [], "reason": "fixture root: interface addresses are live-only"}
    rails, source = [], None
    ports = _roce_ports(node, env)
    if ports:
        rails = sorted({netdev for port in ports for netdev in _port_netdevs(node, port)})
        source = "roce"
    else:
        ifname = env.get("NCCL_SOCKET_IFNAME")
        if ifname:
            exclude, exact, items = parse_device_list(ifname)
            if not exclude:
                rails = sorted(name for name in addresses if any(_matches(name, want, exact) for want, _ in items))
                source = "NCCL_SOCKET_IFNAME"
    interfaces = []
    for name in sorted(addresses):
        address, prefix = addresses[name]
        text, _ = node.reader.read(node.reader.sysfs("class", "net", name, "mtu"))
        interfaces.append({"name": name, "address": address, "prefixlen": prefix, "mtu": parse_int(text),
                           "rail": name in rails})
    reason = None if source else ("no RoCE port and no NCCL_SOCKET_IFNAME here: the rails are the interfaces on "
                                  "another host's rail subnets")
    return {"source": source, "interfaces": interfaces, "reason": reason}


# Where sysfs keeps network interfaces that no device backs (veth, bridge, bond, VLAN, tun).
VIRTUAL_NETDEV_DIR = "/devices/virtual/net/"


def link_rates(node):
    """This host's link rates, as the document's "links" entry: what the baseline's ceilings and line-rate context
    come from (rules/ceilings.py), never a constant of one cluster. netdevs: every interface but lo with its
    class/net/<if>/speed (Mb/s; -1, 0 or unreadable is unknown: null with the reason; a virtual or down link has
    none); rdma_ports: every RDMA port's rate (Gb/s) and its netdevs; gpus: every NVIDIA GPU's PCIe link, its
    max_link_speed (GT/s) and max_link_width (what the link can carry; the pcie_link check says when it runs
    below)."""
    netdevs = {}
    names, _why = node.reader.listdir(node.reader.sysfs("class", "net"))
    for name in names:
        if name == "lo":
            continue
        path = node.reader.sysfs("class", "net", name, "speed")
        text, why = node.reader.read(path)
        speed = parse_int(text)
        if VIRTUAL_NETDEV_DIR in os.path.realpath(node.reader.sysfs("class", "net", name)):
            # veth, bridges, bonds, VLANs: the kernel reports a nominal speed (veth says 10000 Mb/s), not what the
            # wire carries (two namespaces' veth pair moved 1.6 GB/s of bus bandwidth over a "10 Gb/s" link).
            netdevs[name] = {"speed_mbps": None, "reason": f"{name} is a virtual interface (sysfs "
                             f"{VIRTUAL_NETDEV_DIR}): its speed ({(text or '?').strip()[:20]} Mb/s) is nominal, "
                             "not a line rate"}
        elif speed is None or speed <= 0:
            reason = why or f"{path} reads '{(text or '')[:20]}': no known speed (a virtual or down link)"
            netdevs[name] = {"speed_mbps": None, "reason": reason}
        else:
            netdevs[name] = {"speed_mbps": speed, "reason": None}
    ports = {}
    for port in node.ports():
        ports[port.name] = {"rate_gbps": port.rate_gbps, "netdevs": _port_netdevs(node, port),
                            "reason": None if port.rate_gbps is not None else "; ".join(port.problems) or "rate unknown"}
    gpus = [{"bus_id": gpu.bdf, "max_link_speed_gts": gpu.link.get("max_link_speed"),
             "max_link_width": gpu.link.get("max_link_width")} for gpu in node.gpus()]
    return {"netdevs": netdevs, "rdma_ports": ports, "gpus": gpus}


def _subnet(interface):
    try:
        return ipaddress.ip_network(f"{interface['address']}/{interface['prefixlen']}", strict=False)
    except (KeyError, TypeError, ValueError):
        return None


def path_mtu_targets(rails_by_host):
    """{host: "rails" entry or None} -> (targets, problems).

    targets: {host: [{"netdev", "mtu", "peer", "peer_netdev", "peer_mtu", "address", "subnet"}]}: every host
    probes every other host on every rail subnet (a subnet where some host has a rail interface; where no
    host has one, every subnet two hosts share), at its own interface's MTU, to the peer's address there.
    problems: check results for what cannot be probed."""
    subnets = {}
    for host, rails in rails_by_host.items():
        for interface in (rails or {}).get("interfaces") or []:
            net = _subnet(interface)
            if interface.get("rail") and net is not None:
                subnets.setdefault(net, (host, interface["name"]))
    if not subnets:
        # No RoCE port and no NCCL_SOCKET_IFNAME anywhere: NCCL may use any interface, so every subnet that
        # two hosts share is checked (the management network included).
        seen = {}
        for host, rails in rails_by_host.items():
            for interface in (rails or {}).get("interfaces") or []:
                net = _subnet(interface)
                if net is not None:
                    seen.setdefault(net, []).append((host, interface["name"]))
        subnets = {net: owners[0] for net, owners in seen.items() if len({h for h, _ in owners}) > 1}
    members = {net: {} for net in subnets}
    for host, rails in rails_by_host.items():
        for interface in (rails or {}).get("interfaces") or []:
            net = _subnet(interface)
            if net in members:
                members[net].setdefault(host, interface)
    targets, problems = {}, []
    hosts = list(rails_by_host)
    for net in sorted(subnets, key=str):
        owner, name = subnets[net]
        for host in hosts:
            if host not in members[net]:
                if rails_by_host.get(host) is not None and (rails_by_host[host].get("interfaces")):
                    problems.append(dict(result("path_mtu", "fail", f"{host} {net}", "path",
                                                f"{host} has no interface on rail subnet {net} ({name} of {owner}): "
                                                f"this rail cannot reach {host}; give its interface an address "
                                                f"there or leave the rail out"), host=host))
                continue
            local = members[net][host]
            for peer in hosts:
                if peer == host or peer not in members[net]:
                    continue
                remote = members[net][peer]
                if remote["address"] == local["address"]:
                    problems.append(dict(result("path_mtu", "skip", f"{host}:{local['name']} -> {peer}:{remote['name']}",
                                                "path", f"{host} and {peer} both have {local['address']} on {net}: one "
                                                "host under two names (or an address conflict); nothing to probe"),
                                         host=host))
                    continue
                targets.setdefault(host, []).append(
                    {"netdev": local["name"], "mtu": local.get("mtu"), "peer": peer, "peer_netdev": remote["name"],
                     "peer_mtu": remote.get("mtu"), "address": remote["address"], "subnet": str(net)})
    if not subnets:
        sources = [host for host, rails in rails_by_host.items() if rails is None or not rails.get("interfaces")]
        why = (f"no interface addresses from {', '.join(sources)}" if sources else
               "no rail on any host (no RoCE port, no NCCL_SOCKET_IFNAME) and no subnet the hosts share")
        problems.append(dict(result("path_mtu", "skip", "cluster", "cluster", why), host="*"))
    return targets, problems


def check_path_mtu(targets, probes):
    """targets: path_mtu_targets' first value; probes: {host: [probe result] or a reason string (no probe
    result from that host)}. A probe result: {"netdev", "address", "size", "ok", "largest", "method",
    "reason"}; largest: the largest don't-fragment datagram (IP bytes) that got an echo reply, None when
    none did. One result per host, rail and peer."""
    results = []
    for host in targets:
        found = probes.get(host)
        for target in targets[host]:
            subject = f"{host}:{target['netdev']} -> {target['peer']}:{target['peer_netdev']}"
            ends = (f"MTU {target['mtu']} on {host}, {target['peer_mtu']} on {target['peer']}"
                    if target["mtu"] != target["peer_mtu"] else f"MTU {target['mtu']} at both ends")
            if not isinstance(found, list):
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"no probe result from {host}: {found or 'not probed'}"), host=host))
                continue
            probe = next((p for p in found if isinstance(p, dict) and p.get("netdev") == target["netdev"]
                          and p.get("address") == target["address"]), None)
            if probe is None:
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"{host} returned no probe of {target['address']}"), host=host))
            elif probe.get("ok") is None:
                results.append(dict(result("path_mtu", "skip", subject, "path",
                                           f"cannot probe from {host}: {probe.get('reason')}"), host=host))
            elif probe["ok"]:
                results.append(dict(result("path_mtu", "pass", subject, "path",
                                           f"{probe['size']}-byte don't-fragment packets reach {target['address']} "
                                           f"and back ({ends})"), host=host))
            elif probe.get("largest") is None:
                results.append(dict(result("path_mtu", "fail", subject, "path",
                                           f"{PATH_DOWN_WORDS} {target['address']} even at {PATH_MTU_MIN} bytes "
                                           f"({ends}): the rail is down or blocked between {host} and "
                                           f"{target['peer']} ({probe.get('reason') or 'no reply'})"), host=host))
            else:
                results.append(dict(result("path_mtu", "fail", subject, "path",
                                           f"{ends}, but the largest don't-fragment packet from {host} to "
                                           f"{target['peer']} ({target['address']}) is {probe['largest']} bytes: "
                                           f"a switch port or bridge on the path is at {probe['largest']}. NCCL "
                                           f"hangs and RoCE stalls on it: set the path to {probe['size']} (or "
                                           f"both hosts' {target['netdev']} to {probe['largest']})"), host=host))
    return results


# How a path_mtu failure with no reply at any size begins (check_path_mtu): the path is down, not too small.
PATH_DOWN_WORDS = "no echo reply from"


def path_mtu_down(check):
    """True for a failed path_mtu check whose path answered no echo at all, even at PATH_MTU_MIN bytes (a rail
    down or blocked), False for one whose largest packet that got through is smaller than the MTU."""
    return check.get("status") == "fail" and str(check.get("detail") or "").startswith(PATH_DOWN_WORDS)


def path_mtu_ends(check):
    """A path_mtu check's ends as check_path_mtu names them: (host, netdev, peer, peer_netdev) for a probe
    between two hosts ("host:netdev -> peer:peer_netdev"), (host, None, None, None) for a host with no interface on
    a rail subnet ("host subnet"), None for anything else (the cluster-wide skip)."""
    if not isinstance(check, dict) or check.get("id") != "path_mtu" or check.get("subject_kind") != "path":
        return None
    subject = check.get("subject") or ""
    if " -> " in subject:
        local, remote = subject.split(" -> ", 1)
        host, _, netdev = local.partition(":")
        peer, _, peer_netdev = remote.partition(":")
        return (host, netdev, peer, peer_netdev) if host and netdev and peer and peer_netdev else None
    host = check.get("host")
    return (host, None, None, None) if host and host != "*" else None


def path_mtu_findings(checks):
    """The path_mtu failures of a doctor document's checks, one line each (a hung sanity pass names them)."""
    return [f"{check['subject']}: {check['detail']}" for check in checks
            if isinstance(check, dict) and check.get("id") == "path_mtu" and check.get("status") == "fail"]


def _common_prefix(a, b):
    count = 0
    for left, right in zip(a, b):
        if left != right:
            break
        count += 1
    return count


def check_numa_affinity(node):
    gpus = node.gpus()
    multi = node.numa_nodes is not None and node.numa_nodes > 1
    results = []
    if not gpus and not node.hcas:
        return [result("numa_affinity", "skip", "host", "host", "no NVIDIA GPU and no RDMA NIC" + node.root_note)]
    if node.numa_nodes is None:
        results.append(result("numa_affinity", "skip", "host", "host",
                              f"cannot count NUMA nodes ({node.numa_reason})"))
    unknown = [dev for dev in gpus + [node.pci[h.bdf] for h in node.hcas if h.bdf in node.pci]
               if dev.numa_node is None or dev.numa_node < 0]
    for dev in unknown:
        label = node.gpu_label(dev) if dev.is_nvidia_gpu else next(f"{h.name} {h.bdf}" for h in node.hcas if h.bdf == dev.bdf)
        if dev.numa_node is None:
            results.append(result("numa_affinity", "warn", label, "gpu" if dev.is_nvidia_gpu else "nic",
                                  f"numa_node unreadable ({'; '.join(dev.problems)})"))
        elif multi:
            results.append(result("numa_affinity", "fail", label, "gpu" if dev.is_nvidia_gpu else "nic",
                                  f"numa_node is -1 on a host with {node.numa_nodes} NUMA nodes: NCCL and hwloc "
                                  "cannot tell which socket it hangs off, so CPU/memory binding can land on the far "
                                  "socket. Enable ACPI SRAT/NUMA in the BIOS (not 'NPS0'/interleave) or update it"))
    if not multi:
        if node.numa_nodes == 1:
            results.append(result("numa_affinity", "pass", "host", "host", "one NUMA node: nothing can be far"))
        return results
    for hca in node.hcas:
        nic = node.pci.get(hca.bdf) if hca.bdf else None
        if nic is None:
            results.append(result("numa_affinity", "skip", hca.name, "nic",
                                  f"{hca.name}: its PCI device is not under bus/pci/devices"))
            continue
        if nic.numa_node is None or nic.numa_node < 0 or not gpus:
            continue
        nic_path = nic.chain + [nic.bdf]
        scored = [(_common_prefix(nic_path, gpu.chain + [gpu.bdf]), gpu) for gpu in gpus]
        best = max(score for score, _ in scored)
        if best == 0:
            results.append(result("numa_affinity", "skip", f"{hca.name} {hca.bdf}", "nic",
                                  "no GPU shares a PCI host bridge with it: no nearest GPUs to compare"))
            continue
        nearest = [gpu for score, gpu in scored if score == best]
        labels = ", ".join(node.gpu_label(gpu).split()[0] for gpu in nearest)
        far = [gpu for gpu in nearest if gpu.numa_node is not None and gpu.numa_node >= 0
               and gpu.numa_node != nic.numa_node]
        if far:
            results.append(result("numa_affinity", "warn", f"{hca.name} {hca.bdf}", "nic",
                                  f"{hca.name} is on NUMA {nic.numa_node} but its nearest GPUs ({labels}) report NUMA "
                                  f"{', '.join(sorted({str(g.numa_node) for g in far}))}: traffic between them crosses "
                                  "the socket interconnect. Check the BIOS NUMA/SRAT settings and the slot placement"))
        else:
            results.append(result("numa_affinity", "pass", f"{hca.name} {hca.bdf}", "nic",
                                  f"{hca.name} and its nearest GPUs ({labels}) are on NUMA {nic.numa_node}"))
    return results


def acs_redirect_bits(config_path):
    """(RR, CR) of the ACS control register in a PCI config space file, or None when there is no ACS
    capability or the extended config space is not readable (a non-root reader sees 64 bytes)."""
    try:
        with open(config_path, "rb") as handle:
            data = handle.read(4097)
    except OSError:
        return None
    if len(data) < 0x104 or len(data) > 4096:
        return None
    offset = 0x100
    for _ in range(64):  # a capability list longer than this is a loop
        if offset < 0x100 or offset + 8 > len(data):
            return None
        header = int.from_bytes(data[offset:offset + 4], "little")
        if header in (0, 0xffffffff):
            return None
        if header & 0xffff == 0x000d:
            control = int.from_bytes(data[offset + 6:offset + 8], "little")
            return bool(control & 0x4), bool(control & 0x8)
        offset = header >> 20
        if offset == 0:
            return None
    return None


def check_acs_iommu(node):
    results = []
    cmdline = node.cmdline or ""
    words = cmdline.split()
    passthrough = "iommu=pt" in words or "iommu.passthrough=1" in words
    off = any(word in words for word in ("iommu=off", "intel_iommu=off", "amd_iommu=off"))
    types = {t for t in node.iommu_groups.values() if t}
    translated = any(t.startswith("DMA") for t in types)
    if node.iommu_reason and not node.iommu_groups:
        results.append(result("acs_iommu", "pass" if not node.root_problems else "skip", "iommu", "host",
                              "IOMMU off (no kernel/iommu_groups): DMA is not translated"
                              if not node.root_problems else f"cannot read IOMMU groups ({node.iommu_reason})"))
    elif not node.iommu_groups:
        results.append(result("acs_iommu", "pass", "iommu", "host",
                              "IOMMU off (kernel/iommu_groups is empty): DMA is not translated"))
    elif translated or (not types and not passthrough and not off):
        seen = f"group type {', '.join(sorted(types))}" if types else \
            f"groups present and /proc/cmdline has no iommu=pt ({node.cmdline_reason or 'cmdline read'})"
        results.append(result("acs_iommu", "warn", "iommu", "host",
                              f"IOMMU translates device DMA ({seen}): GPU peer and GPUDirect RDMA traffic pays for "
                              "address translation. Boot with iommu=pt (plus intel_iommu=on or amd_iommu=on)"))
    else:
        results.append(result("acs_iommu", "pass", "iommu", "host",
                              f"IOMMU in passthrough ({', '.join(sorted(types)) or 'iommu=pt'})"))
    # Devices under one switch: split IOMMU groups mean ACS isolates them, so peer traffic is redirected
    # up to the root complex; the ACS control register says so directly where config space is readable.
    nic_bdfs = {hca.bdf: hca.name for hca in node.hcas if hca.bdf}
    members = {}
    for device in node.gpus() + [node.pci[b] for b in nic_bdfs if b in node.pci]:
        if device.switch:
            members.setdefault(device.switch, []).append(device)
    for switch, devices in sorted(members.items()):
        if len(devices) < 2:
            continue
        labels = ", ".join(node.gpu_label(d).split()[0] if d.is_nvidia_gpu else nic_bdfs[d.bdf] for d in devices)
        subject = f"switch {switch}"
        redirecting = []
        for device in devices:
            bits = acs_redirect_bits(os.path.join(node.reader.sysfs("bus", "pci", "devices", device.parent or ""),
                                                  "config")) if device.parent else None
            if bits and any(bits):
                redirecting.append(device.parent)
        groups = {d.iommu_group for d in devices if d.iommu_group is not None}
        if redirecting:
            results.append(result("acs_iommu", "warn", subject, "switch",
                                  f"ACS request/completion redirect is on at {', '.join(sorted(set(redirecting)))} "
                                  f"(above {labels}): peer-to-peer traffic goes up to the root complex instead of "
                                  "across the switch. Disable ACS on the switch ports (BIOS, or setpci ECAP_ACS+6.w=0)"))
        elif len(groups) > 1:
            results.append(result("acs_iommu", "warn", subject, "switch",
                                  f"{labels} sit under one switch but in {len(groups)} IOMMU groups "
                                  f"({', '.join(sorted(groups, key=lambda g: (len(g), g)))}): ACS separates them, "
                                  "so peer traffic is redirected through the root complex. Disable ACS on the "
                                  "switch's downstream ports (BIOS, or setpci), or boot with iommu=pt"))
        else:
            results.append(result("acs_iommu", "pass", subject, "switch",
                                  f"{labels} share the switch" + (f" and IOMMU group {groups.pop()}" if groups else "")
                                  + "; no ACS redirect seen"))
    return results


def host_versions(node, live):
    """Versions that must agree across hosts: sysfs/procfs ones here, live ones from `live` (a dict with
    reasons for what could not be read)."""
    read = node.reader.read
    driver, _ = read(node.reader.sysfs("module", "nvidia", "version"))
    kernel, _ = read(node.reader.procfs("sys", "kernel", "osrelease"))
    versions = {"nvidia_driver": driver or live.get("nvidia_driver"), "kernel": kernel,
                "cuda_driver": live.get("cuda_driver"), "nccl": live.get("nccl"), "open_mpi": live.get("open_mpi"),
                "hca_fw": {hca.name: hca.fw_ver for hca in node.hcas}}
    return versions


def check_versions_local(node, versions, reasons):
    firmware = {name: fw for name, fw in versions["hca_fw"].items() if fw}
    missing = [key for key in ("nvidia_driver", "cuda_driver", "nccl", "open_mpi") if not versions.get(key)]
    by_reason = {}
    for key in missing:
        by_reason.setdefault(reasons.get(key) or "not found", []).append(key)
    unread = "; ".join(f"{', '.join(keys)}: {why}" for why, keys in by_reason.items())
    results = []
    if len(set(firmware.values())) > 1:
        listing = ", ".join(f"{name} {fw}" for name, fw in sorted(firmware.items()))
        results.append(result("versions", "warn", "hca_fw", "host",
                              f"HCAs of this host run different firmware ({listing}): update them to one version "
                              "(mlxfwmanager)"))
    shown = ", ".join(f"{key} {value}" for key, value in versions.items() if value and key != "hca_fw")
    shown += (", HCA firmware " + ", ".join(f"{n} {f}" for n, f in sorted(firmware.items()))) if firmware else ""
    if not shown:
        return results + [result("versions", "skip", "host", "host", f"no version readable ({unread})")]
    results.append(result("versions", "pass", "host", "host",
                          shown + (f" (not read: {unread})" if unread else "")
                          + "; compared across hosts when run with --hosts or by baseline"))
    return results


def compare_versions(per_host):
    """Cross-host `versions` results from {host: versions}. One result per component that differs."""
    hosts = sorted(per_host)
    if len(hosts) < 2:
        return []
    results = []
    keys = ["nvidia_driver", "cuda_driver", "nccl", "open_mpi", "kernel"]
    for key in keys:
        values = {host: (per_host[host] or {}).get(key) for host in hosts}
        known = {value for value in values.values() if value}
        listing = ", ".join(f"{host} {values[host] or 'unknown'}" for host in hosts)
        if len(known) > 1:
            results.append(result("versions", "fail", key, "cluster",
                                  f"hosts differ: {listing}. Install one {key.replace('_', ' ')} version on every "
                                  "host: mixed versions change algorithms and can hang or slow collectives"))
        elif known:
            results.append(result("versions", "pass", key, "cluster", f"all hosts: {known.pop()}"
                                  + ("" if all(values.values()) else f" ({listing})")))
    firmware = {}
    for host in hosts:
        for hca, fw in ((per_host[host] or {}).get("hca_fw") or {}).items():
            if fw:
                firmware.setdefault(hca, {})[host] = fw
    for hca, by_host in sorted(firmware.items()):
        if len(set(by_host.values())) > 1:
            listing = ", ".join(f"{host} {fw}" for host, fw in sorted(by_host.items()))
            results.append(result("versions", "fail", f"{hca} fw_ver", "cluster",
                                  f"firmware differs across hosts: {listing}; update with mlxfwmanager"))
    return results


def check_nccl_env(node, env):
    results = []
    active = [port for port in node.ports() if port.state[0] == 4]
    hca_names = [hca.name for hca in node.hcas]
    netdevs, _ = node.reader.listdir(node.reader.sysfs("class", "net"))
    spec = env.get("NCCL_IB_HCA")
    if spec:
        exclude, exact, items = parse_device_list(spec)
        problems = []
        for name, port in items:
            matches = [h for h in node.hcas if _matches(h.name, name, exact)]
            if not matches:
                problems.append(f"{name} does not exist")
            elif port is not None and not any(p.number == port for h in matches for p in h.ports):
                problems.append(f"{name} has no port {port}")
        if not items:
            problems.append("it names no device")
        if problems and not exclude:
            results.append(result("nccl_env", "fail", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec}: {'; '.join(problems)} (RDMA devices here: "
                                  f"{', '.join(hca_names) or 'none'}). NCCL silently uses what matches, or falls "
                                  "back to sockets: fix the list"))
        elif problems:
            results.append(result("nccl_env", "warn", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec} excludes devices that do not exist ({'; '.join(problems)})"))
        else:
            results.append(result("nccl_env", "pass", "NCCL_IB_HCA", "env",
                                  f"NCCL_IB_HCA={spec}: every named device{'/port' if any(p for _, p in items) else ''}"
                                  " exists"))
    ifname = env.get("NCCL_SOCKET_IFNAME")
    if ifname:
        exclude, exact, items = parse_device_list(ifname)
        absent = [name for name, _ in items if not any(_matches(n, name, exact) for n in netdevs)]
        if (absent or not items) and not exclude:
            results.append(result("nccl_env", "fail", "NCCL_SOCKET_IFNAME", "env",
                                  f"NCCL_SOCKET_IFNAME={ifname}: no interface matches {', '.join(absent) or 'it'} "
                                  f"(interfaces here: {', '.join(netdevs) or 'none'}); NCCL's bootstrap fails or "
                                  "picks another interface: fix the name"))
        else:
            results.append(result("nccl_env", "pass", "NCCL_SOCKET_IFNAME", "env",
                                  f"NCCL_SOCKET_IFNAME={ifname} matches interfaces here"))
    net = env.get("NCCL_NET")
    if net:
        if net.lower() == "socket" and active:
            results.append(result("nccl_env", "fail", "NCCL_NET", "env",
                                  f"NCCL_NET={net} forces TCP sockets although RDMA ports are ACTIVE "
                                  f"({', '.join(p.name for p in active)}): unset it to use NET/IB"))
        elif net.lower() == "ib" and not active:
            results.append(result("nccl_env", "fail", "NCCL_NET", "env",
                                  f"NCCL_NET={net} requires InfiniBand/RoCE but no RDMA port is ACTIVE here: "
                                  "NCCL init will fail"))
        elif net.lower() in ("ib", "socket"):
            results.append(result("nccl_env", "pass", "NCCL_NET", "env", f"NCCL_NET={net} fits the ports here"))
        else:
            results.append(result("nccl_env", "warn", "NCCL_NET", "env",
                                  f"NCCL_NET={net} names a network plugin, not IB or Socket: make sure it is "
                                  "installed on every host"))
    if env.get("NCCL_IB_DISABLE", "").strip() == "1" and active:
        results.append(result("nccl_env", "fail", "NCCL_IB_DISABLE", "env",
                              "NCCL_IB_DISABLE=1 forces TCP sockets although RDMA ports are ACTIVE "
                              f"({', '.join(p.name for p in active)}): unset it"))
    cross = env.get("NCCL_CROSS_NIC")
    if cross is not None:
        if cross.strip() in ("0", "1", "2"):
            results.append(result("nccl_env", "pass", "NCCL_CROSS_NIC", "env", f"NCCL_CROSS_NIC={cross}"))
        else:
            results.append(result("nccl_env", "fail", "NCCL_CROSS_NIC", "env",
                                  f"NCCL_CROSS_NIC={cross[:40]} is not 0, 1 or 2"))
    if not results:
        results.append(result("nccl_env", "pass", "env", "env",
                              "none of NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_NET, NCCL_IB_DISABLE, NCCL_CROSS_NIC "
                              "is set: NCCL chooses devices itself"))
    return results


XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): ([0-9]+)")


def parse_xids(text):
    """[(bus id 'dddd:bb:dd', xid)] from kernel log text (dmesg or /dev/kmsg records)."""
    found = []
    for match in XID_RE.finditer(text or ""):
        domain, bus, dev = match.group(1).lower().split(":")
        found.append((f"{domain[-4:]}:{bus}:{dev}", int(match.group(2))))
    return found


def normalize_bus_id(bus_id):
    """'00000000:03:00.0' or '0000:03:00.0' -> '0000:03:00.0'."""
    parts = (bus_id or "").lower().split(":")
    if len(parts) != 3:
        return (bus_id or "").lower()
    return f"{parts[0][-4:]}:{parts[1]}:{parts[2]}"


def check_gpu_state(node, snapshot, kmsg):
    """snapshot: {"gpus": [per-GPU NVML values], "reason": why missing}; kmsg: {"text", "reason"}."""
    results = []
    labels = {gpu.bdf: node.gpu_label(gpu) for gpu in node.gpus()}
    gpus = (snapshot or {}).get("gpus")
    if gpus is None:
        results.append(result("gpu_state", "skip", "nvml", "host",
                              (snapshot or {}).get("reason") or "NVML not consulted"))
    for gpu in gpus or []:
        bus = normalize_bus_id(gpu.get("bus_id"))
        label = labels.get(bus, f"GPU{gpu.get('index')} {bus}")
        fails, warns = [], []
        if gpu.get("ecc_uncorrected_volatile"):
            fails.append(f"{gpu['ecc_uncorrected_volatile']} uncorrectable ECC errors since boot")
        if gpu.get("retired_pages_pending"):
            fails.append("page retirement pending (reset the GPU)")
        if gpu.get("remap_pending"):
            fails.append("row remapping pending (reset the GPU)")
        if gpu.get("remap_failure"):
            fails.append("row remapping failed (the GPU needs service)")
        if gpu.get("ecc_uncorrected_aggregate") and not gpu.get("ecc_uncorrected_volatile"):
            warns.append(f"{gpu['ecc_uncorrected_aggregate']} uncorrectable ECC errors in its lifetime")
        if gpu.get("retired_pages_dbe"):
            warns.append(f"{gpu['retired_pages_dbe']} page(s) retired for double-bit errors")
        reasons = gpu.get("throttle_reasons")
        if reasons:
            names = [name for bit, name in THROTTLE_BITS.items() if reasons & bit]
            if names:
                warns.append(f"clocks throttled: {', '.join(names)} (reasons 0x{reasons:x})")
        if gpu.get("persistence_mode") == 0:
            warns.append("persistence mode off (nvidia-smi -pm 1, or run nvidia-persistenced): the driver "
                         "re-initialises the GPU for every process")
        if fails:
            results.append(result("gpu_state", "fail", label, "gpu", "; ".join(fails + warns)
                                  + ". Drain the node and reset or service the GPU (nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER)"))
        elif warns:
            results.append(result("gpu_state", "warn", label, "gpu", "; ".join(warns)))
        else:
            unsupported = [k for k in ("ecc_uncorrected_volatile", "throttle_reasons", "persistence_mode")
                           if gpu.get(k) is None]
            results.append(result("gpu_state", "pass", label, "gpu",
                                  "no uncorrectable error, no pending retirement/remap, no throttling"
                                  + ("" if gpu.get("persistence_mode") is None else ", persistence mode on")
                                  + (f" (not reported by NVML: {', '.join(unsupported)})" if unsupported else "")))
    kmsg = kmsg or {}
    if kmsg.get("text") is None:
        results.append(result("gpu_state", "skip", "kernel log", "host",
                              f"XIDs not checked: {kmsg.get('reason') or 'kernel log not read'}"))
        return results
    xids = {}
    for bus, xid in parse_xids(kmsg["text"]):
        xids.setdefault(bus, []).append(xid)
    if not xids:
        results.append(result("gpu_state", "pass", "kernel log", "host", "no NVRM Xid in the kernel log"))
    for bus, values in sorted(xids.items()):
        label = next((lab for bdf, lab in labels.items() if bdf.startswith(bus)), f"PCI {bus}")
        fatal = sorted({x for x in values if x in FATAL_XIDS})
        listing = ", ".join(str(x) for x in sorted(set(values)))
        if fatal:
            results.append(result("gpu_state", "fail", label, "gpu",
                                  f"kernel log has Xid {listing} for it ({', '.join(map(str, fatal))} mean a "
                                  "hardware/ECC/bus fault): drain the node, reset or service the GPU"))
        else:
            results.append(result("gpu_state", "warn", label, "gpu",
                                  f"kernel log has Xid {listing} for it (usually an application fault): look them "
                                  "up in NVIDIA's XID catalogue before benchmarking"))
    return results

DOCTOR_SCHEMA_VERSION = "1.1.0"  # 1.1: "links", each host's link rates
STATUSES = ("pass", "warn", "fail", "skip")
JSON_LINE_PREFIX = "CCLBENCH_DOCTOR_JSON "
