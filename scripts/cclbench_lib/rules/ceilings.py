"""Physical busbw ceilings (per 400G rail, PCIe Gen5 x16) and rail balance: which bound applies to a record."""


# Physical ceilings for busbw (GB/s = 1e9 B/s, per direction). A measured busbw above its ceiling is
# impossible on that hardware, so it points at a unit, timing or byte-count error (or at an
# in-network reduction, which these machines do not have).
#  - inter-node: one 400 Gbit/s rail carries at most 400e9 / 8 = 50 GB/s per direction, so a point
#    bound to R rails is capped at R * 50 GB/s. For ring/tree AllReduce, AllGather, ReduceScatter
#    the busbw of a 2-node run is bounded by the per-node NIC bandwidth; All-to-All is bounded much
#    lower (half of its bytes cross the nodes), so the same cap is a loose but safe bound for it.
#  - intra-node, PCIe only: a GPU's PCIe Gen5 x16 link is 32 GT/s * 16 lanes * 128/130 / 8 = 63.0
#    GB/s per direction; ring busbw cannot exceed the slowest GPU link. We use 64 GB/s so that a
#    rounding of the nominal figure never raises a false alarm.
#  - NVLink machines (the topology shows NVLink), emulated ranks (--share-gpu) and the MPI backend
#    (host memory) are excluded: no PCIe/NIC ceiling applies to them.
RAIL_GBPS = 50.0
PCIE_GEN5_X16_GBPS = 64.0
RAIL_IMBALANCE_RATIO = 1.25
LIMIT_ROWS = [
    ("inter-node, per 400G rail", f"{RAIL_GBPS:g} x rails", "400e9 bit/s / 8; rails = the point's NCCL_IB_HCA list",
     "16-rank (inter) points"),
    ("intra-node, PCIe Gen5 x16", f"{PCIE_GEN5_X16_GBPS:g}", "32 GT/s x 16 lanes x 128/130 / 8 = 63.0, rounded up",
     "8-rank (intra) and local points without NVLink"),
    ("NVLink, emulated ranks, MPI backend", "not checked", "no PCIe/NIC bound applies", "-"),
]  # busiest rail / idlest rail above this, on a multi-rail point


def ceiling_for(data, launch, record):
    """(ceiling_gbps, why) or (None, why-excluded)."""
    if record.get("emulated") or record.get("backend") == "mpi":
        return None, "emulated or MPI backend"
    if launch is None:
        return None, "point not in plan"
    if launch.get("kind") == "inter":
        hca = (launch.get("env") or {}).get("NCCL_IB_HCA", "")
        rails = len([h for h in hca.lstrip("=^").split(",") if h]) or len(data.manifest.get("plan_inputs", {}).get("hcas") or []) or 1
        return RAIL_GBPS * rails, f"{rails} x 400G rail(s)"
    if data.has_nvlink():
        return None, "NVLink machine"
    return PCIE_GEN5_X16_GBPS, "PCIe Gen5 x16"


def rails_reason(records):
    """Why a point has no rail bytes, from the records' own reasons."""
    for record in records:
        rails = (record.get("evidence") or {}).get("rails") if isinstance(record.get("evidence"), dict) else None
        if isinstance(rails, dict):
            for node in rails.get("nodes") or []:
                if isinstance(node, dict) and (node.get("ib_reason") or node.get("error")):
                    return f"{node.get('host')}: {node.get('ib_reason') or node.get('error')}"
    if not records:
        return "no case records"
    return "the case records carry no rail counters (coll_perf without rail evidence)"
