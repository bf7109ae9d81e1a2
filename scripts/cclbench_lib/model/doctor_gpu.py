"""The doctor's checks of a node's GPUs and their PCIe paths: each GPU's link (width and speed), the GPUDirect
RDMA module, the GPU-NIC NUMA affinity, ACS redirects and IOMMU groups between them, and the GPUs' live state (NVML
snapshot, fatal XIDs in the kernel log). Pure functions over model/doctor_node.Node; results as doctor_node.result.
"""

import os
import re

from .doctor_node import FATAL_XIDS, IDLE_LINK_SPEED, THROTTLE_BITS, result


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
