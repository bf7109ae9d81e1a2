#!/usr/bin/env bash
# Builds cclbench (scripts/setup.sh) and runs the whole test suite with CTest. Tests that need a
# GPU skip with a visible reason on machines without one.
#   CCLBENCH_TEST_LABELS  a CTest label regex to run a subset (unit|mpi|gpu|scripts|fuzz)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_BUILD_DIR:-$repo/build}"
bash "$repo/scripts/setup.sh"
# mpirun refuses root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
labels=()
if [[ -n "${CCLBENCH_TEST_LABELS:-}" ]]; then labels=(-L "$CCLBENCH_TEST_LABELS"); fi
cd "$build_dir"
ctest --output-on-failure --timeout 900 "${labels[@]}"
