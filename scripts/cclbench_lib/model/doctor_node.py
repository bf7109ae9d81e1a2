"""The doctor's model of one node, read from a sysfs root and a procfs root (class Node), and the result of
one check (result). The checks themselves are by what they check: model/doctor_gpu.py (GPUs, PCIe), doctor_network.py
(RDMA ports, netdevs, NCCL_* variables), doctor_paths.py (rails, the path MTU between hosts), doctor_versions.py.

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
