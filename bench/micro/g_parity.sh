#!/usr/bin/env bash
# The -g N shape side by side with nccl-tests, to run from the repo root on a
# machine with N GPUs after scripts/setup.sh and nccl-tests' make. Per repetition: nccl-tests' four
# binaries, then coll_perf as it runs by default, with NCCL_DEBUG=WARN (no NCCL log capture), and
# also without UCX in Open MPI (no UCX memory hooks in the process); then the launch-loop micro
# benchmark (no MPI, no NCCL_DEBUG; cudaMalloc and ncclMemAlloc buffers). Prints the median table.
#   bench/micro/g_parity.sh OUT_DIR [GPUS=2] [REPS=3] [NCCL_TESTS_BIN=.ref/nccl-tests/build]
# CCLBENCH_PIN (default "taskset -c 8-15") prefixes every run.
set -uo pipefail
out=${1:?usage: g_parity.sh OUT_DIR [GPUS] [REPS] [NCCL_TESTS_BIN]}
gpus=${2:-2}
reps=${3:-3}
nccl_tests=${4:-.ref/nccl-tests/build}
read -r -a pin <<< "${CCLBENCH_PIN-taskset -c 8-15}"
args=(-b 8K -e 64M -f 2 -n 20 -w 5 -c 1 -g "$gpus")
mkdir -p "$out"
for rep in $(seq 1 "$reps"); do
  for coll in all_reduce all_gather reduce_scatter alltoall; do
    "${pin[@]}" "$nccl_tests/${coll}_perf" "${args[@]}" > "$out/nccl_tests.$coll.$rep.txt" 2>&1 || echo "nccl-tests $coll exit $?"
  done
  "${pin[@]}" build/bench/apps/coll_perf --backend nccl "${args[@]}" --placement out --csv "$out/coll_perf.default.$rep.csv" \
    > "$out/coll_perf.default.$rep.log" 2>&1 || echo "coll_perf default exit $?"
  NCCL_DEBUG=WARN "${pin[@]}" build/bench/apps/coll_perf --backend nccl "${args[@]}" --placement out --csv "$out/coll_perf.nolog.$rep.csv" \
    > "$out/coll_perf.nolog.$rep.log" 2>&1 || echo "coll_perf nolog exit $?"
  NCCL_DEBUG=WARN UCX_MEM_EVENTS=no OMPI_MCA_pml=^ucx OMPI_MCA_osc=^ucx "${pin[@]}" build/bench/apps/coll_perf --backend nccl "${args[@]}" \
    --placement out --csv "$out/coll_perf.nolog_noucx.$rep.csv" > "$out/coll_perf.nolog_noucx.$rep.log" 2>&1 ||
    echo "coll_perf nolog_noucx exit $?"
done
"${pin[@]}" build/bench/micro/cclbench_micro --benchmark_filter="LaunchPathNccl/./$gpus/" --benchmark_format=csv \
  > "$out/micro.csv" 2> "$out/micro.log" || echo "cclbench_micro exit $?"
python3 bench/micro/g_parity_table.py "$out"
