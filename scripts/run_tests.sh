#!/usr/bin/env bash
# Builds cclbench (scripts/setup.sh) and runs the whole test suite with CTest. Tests that need a
# GPU skip with a visible reason on machines without one.
#   CCLBENCH_TEST_LABELS  a CTest label regex to run a subset (unit|mpi|gpu|scripts|fuzz|cluster)
#   CCLBENCH_TEST_JOBS    tests run at once, except the cluster tests           [2 x CPUs]
#   CCLBENCH_JUNIT_DIR    write each CTest run's JUnit file here (CI's slowest-tests report)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_BUILD_DIR:-$repo/build}"
jobs="${CCLBENCH_TEST_JOBS:-$((2 * $(nproc)))}"
bash "$repo/scripts/setup.sh"
cmake --build "$build_dir" -j "$(nproc)"  # the tests too (setup.sh builds the main job's tools first)
# mpirun refuses root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
labels=()
if [[ -n "${CCLBENCH_TEST_LABELS:-}" ]]; then labels=(-L "$CCLBENCH_TEST_LABELS"); fi
cd "$build_dir"
# Twice as many at a time as CPUs: most tests are one process at a time (a gtest case, the CLI on the test
# doubles) and many wait (deadlines, a stopped process, a subprocess's start): at two at a time on CI's 2 cores
# the CPUs were busy 38% of the stage (user+sys 267 s of 704), at four 66%, and the stage went from 352 s to 210 s
# (2-core VM, 2026-12-06), every test passing. Tests that must have the machine to themselves
# say so (RUN_SERIAL: the MPI fault drivers; RESOURCE_LOCK: the GPU). The virtual-cluster tests (label
# cluster) time traffic over rate-limited links, where a neighbour's load could pass for a slow link:
# they run afterwards, as many at once as there are CPUs, each on a CPU of its own (a resource spec of one `cpus`
# slot per CPU; the tests pin themselves to the CPU CTest gives them: tests/cluster/vcluster.py).
junit_tests=() junit_cluster=()
if [[ -n "${CCLBENCH_JUNIT_DIR:-}" ]]; then
  junit_tests=(--output-junit "$CCLBENCH_JUNIT_DIR/tests.xml")
  junit_cluster=(--output-junit "$CCLBENCH_JUNIT_DIR/cluster.xml")
fi
status=0
ctest --output-on-failure --timeout 900 -j "$jobs" "${labels[@]}" -LE cluster "${junit_tests[@]}" || status=$?
cpus_spec="$build_dir/cluster_cpus.json"
python3 -c 'import json, os, sys
cpus = [{"id": str(cpu), "slots": 1} for cpu in sorted(os.sched_getaffinity(0))]
json.dump({"version": {"major": 1, "minor": 0}, "local": [{"cpus": cpus}]}, sys.stdout)' >"$cpus_spec"
# A test that must run alone takes two CPUs (cluster_crosshost): with fewer, the cluster tests run one at a time.
side_by_side=()
if (($(nproc) >= 2)); then side_by_side=(-j "$(nproc)" --resource-spec-file "$cpus_spec"); fi
ctest --output-on-failure --timeout 900 "${side_by_side[@]}" "${labels[@]}" -L cluster "${junit_cluster[@]}" || status=$?
exit "$status"
