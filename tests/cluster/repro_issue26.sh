#!/usr/bin/env bash
# Issue 26's four findings, reproduced on a virtual cluster (tests/cluster/vcluster.py) with the
# product as it is: cclbench runs inside node5, mpirun reaches node7 through the ssh-like agent.
# Prints each command ($ ...) and its output; the exit status is 0 when every finding showed.
#   bash tests/cluster/repro_issue26.sh [BIN_DIR]     (root; BIN_DIR default /work/main/build/bench/apps)
# Prints "REPRODUCED" or "NOT REPRODUCED" per finding; the cluster goes away with this script.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin_dir="${1:-/work/main/build/bench/apps}"
vc="python3 $here/vcluster.py"
id="$($vc up --nodes node5,node7 --owner $$ 2>/dev/null)" || { echo "no virtual cluster here"; exit 77; }
agent="/run/cclbench-vc/$id/ssh"
work="$(mktemp -d)"
trap '$vc down "$id"; rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mca="--mca plm rsh --mca plm_rsh_agent $agent --mca oob_tcp_if_include mgmt0 --mca btl tcp,self --mca btl_tcp_if_include 198.18.10.0/24,198.18.13.0/24 --bind-to none"
failures=0
on5() { echo "\$ [node5] $*"; $vc exec "$id" node5 -- "$@" 2>&1; local rc=$?; echo "(exit $rc)"; return $rc; }
verdict() { if [[ $1 == 0 ]]; then echo "=> REPRODUCED: $2"; else echo "=> NOT REPRODUCED: $2"; failures=$((failures + 1)); fi; echo; }

echo "### cluster $id: node5 198.18.0.5 / node7 198.18.0.7 (mgmt0), rails eth0 198.18.10.x, eth3 198.18.13.x"
echo "### (a) doctor --hosts: healthy, an unknown host, a host whose management link is down"
on5 "$repo/scripts/cclbench" doctor --hosts node5,node7 "--mpirun-args=$mca" | tail -2
out="$(on5 "$repo/scripts/cclbench" doctor --hosts node5,node9 "--mpirun-args=$mca")"; echo "$out"
echo "\$ [node5] $agent node9 true   # what the launcher itself says"; $vc exec "$id" node5 -- "$agent" node9 true; echo "(exit $?)"
grep -q "is scripts/cclbench at the same path there" <<<"$out"
verdict $? "node9 (unknown host) is blamed on the path of cclbench, not on name resolution"
echo "\$ vcluster.py link $id node7 mgmt0 --down"; $vc link "$id" node7 mgmt0 --down
start=$SECONDS
out="$(on5 "$repo/scripts/cclbench" doctor --hosts node5,node7 "--mpirun-args=$mca")"; echo "$out"
echo "(took $((SECONDS - start)) s)"
$vc link "$id" node7 mgmt0 --up
grep -q "is scripts/cclbench at the same path there" <<<"$out"
verdict $? "node7 with mgmt0 down is blamed on the path of cclbench, not on the connection"

echo "### (b) NCCL_SOCKET_IFNAME=eth0 set where cclbench runs: recorded, not passed to remote ranks"
export NCCL_SOCKET_IFNAME=eth0
plan="$(on5 "$repo/scripts/cclbench" plan --hosts node5,node7 --gpus-per-node 2 --hcas mlx5_0:1 --coll all_reduce --bin-dir "$bin_dir" "--mpirun-args=$mca")"
grep -m1 -- "--point inter" <<<"$plan"
grep -q -- "-x NCCL_SOCKET_IFNAME" <<<"$plan"; [[ $? != 0 ]]; plan_ok=$?
echo "\$ [node5] mpirun $mca -np 4 --host node5:2,node7:2 -x NCCL_CROSS_NIC=0 sh -c 'echo \$(hostname) NCCL_SOCKET_IFNAME=\${NCCL_SOCKET_IFNAME-unset}'"
ranks="$($vc exec "$id" node5 -- mpirun $mca -np 4 --host node5:2,node7:2 -x NCCL_CROSS_NIC=0 \
  sh -c 'echo $(hostname) NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME-unset}' 2>&1 | sort)"; echo "$ranks"
grep -q "node5 NCCL_SOCKET_IFNAME=eth0" <<<"$ranks" && grep -q "node7 NCCL_SOCKET_IFNAME=unset" <<<"$ranks"; env_ok=$?
on5 "$repo/scripts/cclbench" baseline --hosts node5,node7 --gpus-per-node 2 --hcas mlx5_0:1 --coll all_reduce \
  -b 8K -e 8K -n 2 -w 1 --repeat 1 --cross-nic 0 --expect-transport none --no-tuning-probe --run-id envcase \
  --bin-dir "$bin_dir" "--mpirun-args=$mca" | tail -4
echo "\$ the baseline doctor's failing and nccl_env checks (results/envcase/doctor.json)"
python3 -c 'import json, sys
for c in json.load(open(sys.argv[1])).get("checks", []):
    if c.get("status") == "fail" or c.get("id") == "nccl_env":
        print(" ", c.get("host"), c.get("id"), c.get("status"), c.get("subject"), "-", c.get("detail"))' results/envcase/doctor.json
echo "\$ grep NCCL_SOCKET_IFNAME results/envcase/run_manifest.json; grep -c -- '-x NCCL_SOCKET_IFNAME' results/envcase/run.log"
grep -o '"NCCL_SOCKET_IFNAME": *"[^"]*"' results/envcase/run_manifest.json; manifest_ok=$?
echo "-x NCCL_SOCKET_IFNAME in run.log: $(grep -c -- '-x NCCL_SOCKET_IFNAME' results/envcase/run.log)"
unset NCCL_SOCKET_IFNAME
[[ $plan_ok == 0 && $env_ok == 0 && $manifest_ok == 0 ]]
verdict $? "the manifest records NCCL_SOCKET_IFNAME=eth0; no -x passes it; node7's ranks run without it"

echo "### (c) plan --hosts on GPU-less hosts without RDMA ports"
on5 "$repo/scripts/cclbench" plan --hosts node5,node7 --bin-dir "$bin_dir" "--mpirun-args=$mca"
a=$?
out="$(on5 "$repo/scripts/cclbench" plan --hosts node5,node7 --gpus-per-node 2 --bin-dir "$bin_dir" "--mpirun-args=$mca")"; echo "$out"
grep -q "no active RDMA port found by topo_map" <<<"$out"; b=$?
out="$(on5 "$repo/scripts/cclbench" plan --hosts node5,node7 --gpus-per-node 2 --hcas mlx5_0:1 --bin-dir "$bin_dir" "--mpirun-args=$mca")"
echo "with --hcas mlx5_0:1: $(grep -c -- '--point inter' <<<"$out") inter-node launches, $(grep -c -- 'expect-transport inter=NET/IB' <<<"$out") gated on inter=NET/IB, $(grep -c -- '--backend mpi' <<<"$out") with --backend mpi"
[[ $a != 0 && $b == 0 ]]
verdict $? "no cross-host plan without --gpus-per-node and --hcas; with them, NCCL points gated on NET/IB"

echo "### (d) path MTU: hosts 9000, switch ports 1500"
for node in node5 node7; do $vc link "$id" $node eth0 --mtu 9000 --port-mtu 1500; done
echo "\$ vcluster.py link $id node5|node7 eth0 --mtu 9000 --port-mtu 1500"
out="$(on5 "$repo/scripts/cclbench" doctor --hosts node5,node7 "--mpirun-args=$mca")"
grep -i "mtu\|doctor:" <<<"$out"
grep -qi "fail" <<<"$(grep -i mtu <<<"$out")"; [[ $? != 0 ]]; doctor_silent=$?
$vc exec "$id" node7 -- python3 "$here/netprobe.py" udp-recv 198.18.10.7 9999 1.5 >"$work/recv" &
sleep 0.5
echo "\$ [node5] netprobe.py udp-send 198.18.10.7 9999 1500 9000   # don't fragment"
$vc exec "$id" node5 -- python3 "$here/netprobe.py" udp-send 198.18.10.7 9999 1500 9000
wait
echo "received at node7: $(grep got "$work/recv" | tr '\n' ' ')"
grep -q "got 1500" "$work/recv" && ! grep -q "got 9000" "$work/recv"; dropped=$?
[[ $doctor_silent == 0 && $dropped == 0 ]]
verdict $? "doctor reports no MTU problem while a 9000-byte DF datagram is dropped on the path (1500 gets through)"

echo "### $((4 - failures)) of 4 findings reproduced"
exit $((failures > 0))
