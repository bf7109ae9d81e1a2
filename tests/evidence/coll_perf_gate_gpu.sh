#!/bin/sh
# usage: coll_perf_gate_gpu.sh MPIEXEC COLL_PERF WORK_DIR CODE REGEX SPEC
# 4 emulated ranks on one GPU (--share-gpu: each rank its own NCCL_HOSTID, NET/Socket on lo) with
# --expect-transport SPEC: checks the exit CODE, that stdout+stderr match REGEX, and that -J has the
# transport section with the verdict. Exit 77 (skip) without a GPU.
mpiexec="$1"; coll_perf="$2"; work="$3"; code="$4"; regex="$5"; spec="$6"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIPPED: no GPU visible (nvidia-smi -L lists none)"; exit 77
fi
rm -rf "$work"; mkdir -p "$work"
output=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpiexec" --oversubscribe --allow-run-as-root -np 4 \
  "$coll_perf" --backend nccl --share-gpu --coll all_reduce,all_gather -b 8K -e 64K -f 8 -n 2 -w 1 -T 120 \
  -J "$work/out.json" --expect-transport "$spec" 2>&1); status=$?
printf '%s\n' "$output"
if [ "$status" -ne "$code" ]; then echo "expected exit $code, got $status" >&2; exit 1; fi
if ! printf '%s\n' "$output" | grep -Eq -- "$regex"; then echo "output does not match /$regex/" >&2; exit 1; fi
[ -f "$work/out.json" ] || { echo "no $work/out.json" >&2; exit 1; }
ls "$work/nccl" | grep -q '\.log$' || { echo "no NCCL logs in $work/nccl" >&2; exit 1; }
exec python3 - "$work/out.json" "$code" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
t = doc["transport"]
want = "passed" if sys.argv[2] == "0" else "failed"
assert t["status"] == want, (t["status"], t["reason"])
assert t["inter_node"].get("NET/Socket", 0) > 0, t["inter_node"]
assert doc["status"] == "complete" and all(c["status"] == "ok" for c in doc["cases"])
print("ok:", t["summary"])
PY
