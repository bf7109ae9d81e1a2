"""The versions that must agree across the hosts of a run (driver, CUDA, NCCL, the HCAs' firmware): read per
host here, compared across hosts by compare_versions.
"""

from .doctor_node import result


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
