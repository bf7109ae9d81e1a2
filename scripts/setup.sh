#!/usr/bin/env bash
# Installs what cclbench needs (Debian/Ubuntu packages, when run as root) and builds it into
# ./build. Safe to run again: it only installs what is missing and rebuilds what changed.
# By default it builds what the main job runs first (cclbench_tools: coll_perf and its aliases,
# p2p_matrix, topo_map, nccl_evidence); scripts/run_tests.sh then builds the rest (the tests).
#   CCLBENCH_BUILD_DIR     build folder                 [<repo>/build]
#   CCLBENCH_BUILD_TYPE    CMake build type             [Release]
#   CCLBENCH_CMAKE_ARGS    extra CMake arguments (split on spaces)
#   CCLBENCH_BUILD_TARGET  what to build: a target name, or "all"   [cclbench_tools]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_BUILD_DIR:-$repo/build}"
build_type="${CCLBENCH_BUILD_TYPE:-Release}"

packages=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libhwloc-dev hwloc
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev python3 python3-jsonschema python3-matplotlib)
# clang and its sanitizer/libFuzzer runtimes are CI's (scripts/ci_sanitize.sh, ci_fuzz.sh): .ci/run installs them.

# --packages: print the Debian packages this script installs (CI installs them in one apt-get with its own).
if [[ "${1:-}" == --packages ]]; then
  echo "${packages[*]}"
  exit 0
fi

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$package")
    fi
  done
fi

if ((${#missing[@]} > 0)); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "cclbench setup: installing ${missing[*]}" >&2
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
      # Machines without a package registry may still have the libraries from elsewhere.
      echo "cclbench setup: warning: could not install ${missing[*]}; continuing, CMake will name anything missing" >&2
    fi
  else
    echo "cclbench setup: missing Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# CUDA lives outside PATH on most machines.
if [[ -z "${CUDACXX:-}" && -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
extra=()
if [[ -n "${CCLBENCH_CMAKE_ARGS:-}" ]]; then read -r -a extra <<<"$CCLBENCH_CMAKE_ARGS"; fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" "${extra[@]}"
fi
target="${CCLBENCH_BUILD_TARGET:-cclbench_tools}"
cmake --build "$build_dir" -j "$(nproc)" --target "$target"
echo "cclbench setup: built $target into $build_dir" >&2
