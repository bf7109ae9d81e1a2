"""The doctor's checks, one import for the doctor and its callers: the model of a node (model/doctor_node.py) and
the checks by what they check - GPUs and PCIe (doctor_gpu.py), network devices (doctor_network.py), rails and
the path MTU between hosts (doctor_paths.py), versions across hosts (doctor_versions.py) - and the doctor
document's constants. Rules that need one part import it from its own module."""

from .doctor_node import (BDF_RE, CHECK_IDS, FATAL_XIDS, Hca, IDLE_LINK_SPEED, MAX_ATTR_BYTES, NVIDIA_VENDOR, Node,  # noqa: F401
    PciDevice, RATE_RE, ROCE_MIN_MTU, RdmaPort, Reader, SPEED_RE, STATE_RE, THROTTLE_BITS, parse_hex, parse_int,
    parse_rate, parse_speed, parse_state, result)
from .doctor_gpu import (XID_RE, acs_redirect_bits, check_acs_iommu, check_gdr_module, check_gpu_state,  # noqa: F401
    check_numa_affinity, check_pcie_link, normalize_bus_id, parse_xids)
from .doctor_network import (check_nccl_env, check_netdev_mtu, check_rdma_port, check_roce_gid, parse_device_list,  # noqa: F401
    selected_ports)
from .doctor_paths import (PATH_DOWN_WORDS, PATH_MTU_MIN, VIRTUAL_NETDEV_DIR, check_path_mtu, link_rates,  # noqa: F401
    path_mtu_down, path_mtu_ends, path_mtu_findings, path_mtu_targets, rail_selection)
from .doctor_versions import (check_versions_local, compare_versions, host_versions)  # noqa: F401

DOCTOR_SCHEMA_VERSION = "1.1.0"  # 1.1: "links", each host's link rates
STATUSES = ("pass", "warn", "fail", "skip")
JSON_LINE_PREFIX = "CCLBENCH_DOCTOR_JSON "
