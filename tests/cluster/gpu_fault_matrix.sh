#!/bin/sh
# The fault matrix with NCCL over sockets on the GPU machine: one command, results under OUT, at most 8 minutes.
#
#   tests/cluster/gpu_fault_matrix.sh OUT [--only ID,ID] [--budget-s S]
#
# Every node of the virtual cluster (vcluster.py) runs its rank on the one GPU: the --bin-dir wrapper gives each
# node's ranks NCCL_HOSTID=<node> (NCCL would otherwise take them for one host) and NCCL_SOCKET_IFNAME=eth0,eth3 is
# the rails. Needs root, the build's coll_perf and topo_map with NCCL (CCLBENCH_BINARY_DIR, default build/) and,
# where the image has no `ip`, the carried iproute2: CCLBENCH_VC_IP, CCLBENCH_VC_TC, CCLBENCH_VC_BRIDGE and
# CCLBENCH_VC_TOOL_LD_LIBRARY_PATH as the README's GPU run sets them. OMPI_MCA_plm=isolated is overridden by the
# cells' --mca plm rsh; --bind-to none keeps every rank off core 0 alone.
#
# Writes OUT/fault_matrix_results.json (after every cell), OUT/table.md (the README's table of these results),
# OUT/fault_matrix.log and OUT/cells/<id>/ (command, output, the run directory). Cells whose limit would end past
# the budget (default 450 s) are recorded as not run; `timeout` ends the whole at 470 s in any case.
# Exit: 0 every cell as expected, 1 not, 77 no virtual cluster here, 124 ended by the time bound.
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT [--only ID,ID] [--budget-s S]" >&2
    exit 2
fi
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
CCLBENCH_SOURCE_DIR=${CCLBENCH_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
CCLBENCH_BINARY_DIR=${CCLBENCH_BINARY_DIR:-$CCLBENCH_SOURCE_DIR/build}
export CCLBENCH_SOURCE_DIR CCLBENCH_BINARY_DIR
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$out"
budget=450
for arg in "$@"; do
    case "$arg" in --budget-s|--budget-s=*) budget= ;; esac
done
python3 "$here/vcluster.py" down --stale >/dev/null 2>&1
timeout --kill-after=15 470 python3 "$here/fault_matrix.py" run --backend nccl \
    --cells "$here/gpu_fault_matrix_cells.json" --out "$out" ${budget:+--budget-s "$budget"} "$@" \
    >"$out/fault_matrix.log" 2>&1
code=$?
cat "$out/fault_matrix.log"
if [ -f "$out/fault_matrix_results.json" ]; then
    python3 "$here/fault_matrix.py" table "$out/fault_matrix_results.json" >"$out/table.md" && cat "$out/table.md"
fi
python3 "$here/vcluster.py" down --stale >/dev/null 2>&1
echo "gpu_fault_matrix: exit $code; results in $out"
exit $code
