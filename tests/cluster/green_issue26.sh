#!/usr/bin/env bash
# Issue 26's findings 1 (environment) and 4 (no cross-host plan without GPUs), and the doctor's wrong guess
# for unreachable hosts, after the change: the same virtual cluster and launch options as
# repro_issue26.sh (whose red log, repro_issue26_red.log, shows them on the old product), cclbench inside node5.
#   bash tests/cluster/green_issue26.sh [BIN_DIR]     (root; BIN_DIR default /work/main/build/bench/apps)
# Prints each command ($ ...) and its output, "FIXED" or "NOT FIXED" per finding; exit 0 when all are fixed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin_dir="${1:-/work/main/build/bench/apps}"
vc="python3 $here/vcluster.py"
id="$($vc up --nodes node5,node7 --owner $$ 2>/dev/null)" || { echo "no virtual cluster here"; exit 77; }
id="${id%%agent:*}"; id="${id%%[[:space:]]*}"
agent="/run/cclbench-vc/$id/ssh"
work="$(mktemp -d)"
trap '$vc down "$id" >/dev/null; rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mca="--mca plm rsh --mca plm_rsh_agent $agent --mca oob_tcp_if_include mgmt0 --mca btl tcp,self --mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24 --bind-to none"
failures=0
on5() { echo "\$ [node5] $*"; $vc exec "$id" node5 -- "$@" 2>&1; local rc=$?; echo "(exit $rc)"; return $rc; }
verdict() { if [[ $1 == 0 ]]; then echo "=> FIXED: $2"; else echo "=> NOT FIXED: $2"; failures=$((failures + 1)); fi; echo; }

echo "### cluster $id: node5 / node7, rails eth0 198.18.10.x, eth3 198.18.13.x, mpirun over mgmt0"
echo "### (a) doctor --hosts: an unknown host, a host whose management link is down"
out="$(on5 "$repo/scripts/cclbench" doctor --hosts node5,node9 "--mpirun-args=$mca")"; echo "$out"
grep -q "unknown host 'node9': it does not resolve" <<<"$out"; a1=$?
$vc link "$id" node7 mgmt0 --down
out="$(on5 "$repo/scripts/cclbench" doctor --hosts node5,node7 "--mpirun-args=$mca")"; grep -v " skip " <<<"$out"
$vc link "$id" node7 mgmt0 --up
grep -q "no doctor result from node7: mpirun exited 255: ssh: connect to host node7" <<<"$out" && \
  ! grep -q "same path there" <<<"$out"; a2=$?
[[ $a1 == 0 && $a2 == 0 ]]
verdict $? "node9 is an unknown name (usage error); node7 with mgmt0 down is quoted in ssh's words"

echo "### (c) plan --hosts on GPU-less hosts without RDMA ports (no --gpus-per-node, no --hcas)"
out="$(on5 "$repo/scripts/cclbench" plan --hosts node5,node7 --bin-dir "$bin_dir" "--mpirun-args=$mca" -b 8K -e 64K --coll all_reduce --repeat 1)"
grep -- "--point\|note\|exit" <<<"$out" | sed -E 's/ --jsonl .*( --backend mpi)$/ ...\1/'
grep -q "(exit 0)" <<<"$out" && [[ $(grep -c -- "--backend mpi" <<<"$out") == 4 ]] && grep -q "correctness only" <<<"$out"
verdict $? "a cross-host plan on GPU-less hosts: the MPI backend at every point, correctness only, said so"

echo "### (b) NCCL_SOCKET_IFNAME=eth0 set where cclbench runs: passed to every rank, recorded per host"
export NCCL_SOCKET_IFNAME=eth0
on5 "$repo/scripts/cclbench" baseline --hosts node5,node7 -b 8K -e 64K --coll all_reduce -n 3 -w 1 --repeat 1 \
  --run-id envcase --bin-dir "$bin_dir" "--mpirun-args=$mca" | tail -3
unset NCCL_SOCKET_IFNAME
echo "\$ grep -c -- '-x NCCL_SOCKET_IFNAME=eth0' results/envcase/run.log (launches: $(grep -c "^\$ " results/envcase/run.log))"
grep -c -- "-x NCCL_SOCKET_IFNAME=eth0" results/envcase/run.log
echo "\$ env_by_host of raw/inter.mpi.json; the report's environment table and anomalies"
python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["manifest"]
print(" schema", json.load(open(sys.argv[1]))["schema_version"], "env_by_host", m.get("env_by_host"), "disagreements", m.get("env_rank_disagreements"))' \
  results/envcase/raw/inter.mpi.json
grep -A4 "Environment each host" results/envcase/report.md
sed -n '/## Anomalies/,/^Physical/p' results/envcase/report.md | head -4
python3 -c 'import json, sys
by = json.load(open(sys.argv[1]))["manifest"].get("env_by_host") or {}
sys.exit(0 if {h: e.get("NCCL_SOCKET_IFNAME") for h, e in by.items()} == {"node5": "eth0", "node7": "eth0"} else 1)' \
  results/envcase/raw/inter.mpi.json && ! grep -q "host environment differs" results/envcase/report.md
verdict $? "every host's ranks ran with NCCL_SOCKET_IFNAME=eth0, the record says so, no anomaly"

echo "### (b') a difference forced on node7 (a wrapper in front of coll_perf) is an anomaly naming the host"
mkdir -p wrapped
for tool in "$bin_dir"/*; do [[ -x $tool && $(basename "$tool") != coll_perf ]] && ln -sf "$tool" wrapped/; done
printf '#!/bin/sh\nif [ "$(uname -n)" = node7 ]; then unset NCCL_SOCKET_IFNAME; export NCCL_IB_DISABLE=1; fi\nexec %s "$@"\n' \
  "$bin_dir/coll_perf" >wrapped/coll_perf; chmod +x wrapped/coll_perf
export NCCL_SOCKET_IFNAME=eth0
on5 "$repo/scripts/cclbench" baseline --hosts node5,node7 -b 8K -e 64K --coll all_reduce -n 3 -w 1 --repeat 1 \
  --run-id wrapped --bin-dir "$work/wrapped" "--mpirun-args=$mca" | tail -2
unset NCCL_SOCKET_IFNAME
sed -n '/## Anomalies/,/^Physical/p' results/wrapped/report.md | grep "environment differs"
[[ $(grep -c "| host environment differs | sanity | node7's ranks" results/wrapped/report.md) == 2 ]]
verdict $? "node7's unset NCCL_SOCKET_IFNAME and its extra NCCL_IB_DISABLE are env.host_differs anomalies"

echo "### $((4 - failures)) of 4 fixed"
exit $((failures > 0))
