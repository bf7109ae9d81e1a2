#!/bin/sh
# The smoke's proof on a GPU machine, built from scratch: one command, results under OUT (docs/ci.md).
#
#   tests/gpu/smoke_proof.sh OUT [smoke_proof.py options]
#
# Builds the tools (scripts/setup.sh; Hopper only unless CCLBENCH_CMAKE_ARGS says otherwise), records the GPU and
# driver, then runs tests/gpu/smoke_proof.py OUT with the options given. Exit: smoke_proof.py's (0: every run as
# expected), or 1 when the build failed.
set -u
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT [smoke_proof.py options]" >&2
    exit 2
fi
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$out"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CCLBENCH_CMAKE_ARGS="${CCLBENCH_CMAKE_ARGS:--DCMAKE_CUDA_ARCHITECTURES=90-real}"
started=$(date +%s)
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv; cat /sys/module/nvidia/version; nproc; } >"$out/env.txt" 2>&1
if ! (cd "$repo" && bash scripts/setup.sh) >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    echo "smoke_proof: build failed after $(( $(date +%s) - started ))s" >&2
    exit 1
fi
echo "smoke_proof: built in $(( $(date +%s) - started ))s"
# The duty-cycled copy load of --loads (tests/gpu/copy_load.cu), if nvcc is here.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] && "$nvcc" -O2 -std=c++17 -o /tmp/copy_load "$here/copy_load.cu" >>"$out/build.log" 2>&1
python3 "$here/smoke_proof.py" "$out" "$@" 2>&1 | tee "$out/log.txt"
code=$?
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >>"$out/env.txt" 2>&1
exit $code
