#!/usr/bin/env bash
# Installs what cclbench needs (Debian/Ubuntu packages, when run as root) and builds it into
# ./build. Safe to run again: it only installs what is missing and rebuilds what changed.
#   CCLBENCH_BUILD_DIR   build folder                 [<repo>/build]
#   CCLBENCH_BUILD_TYPE  CMake build type             [Release]
#   CCLBENCH_CMAKE_ARGS  extra CMake arguments (split on spaces)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_BUILD_DIR:-$repo/build}"
build_type="${CCLBENCH_BUILD_TYPE:-Release}"

packages=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libhwloc-dev hwloc
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev python3 python3-jsonschema python3-matplotlib
          clang libclang-rt-14-dev)
# clang + libclang-rt-14-dev: libFuzzer and sanitizer runtimes for scripts/ci_fuzz.sh (Debian 12's clang 14 only
# recommends the runtimes, and recommendations are not installed below).

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
cmake --build "$build_dir" -j "$(nproc)"
echo "cclbench setup: built into $build_dir" >&2
