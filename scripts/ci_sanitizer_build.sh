#!/usr/bin/env bash
# The one instrumented build CI's sanitizer and fuzzing stages share (sourced by scripts/ci_sanitize.sh
# and scripts/ci_fuzz.sh): clang, host code only (CUDA off), every target under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the libFuzzer targets (CCLBENCH_ENABLE_FUZZ: the parsing libraries also
# carry the fuzzer's coverage instrumentation, which changes nothing they compute). One configure and one
# compile of the libraries serve both stages.
#   configure_sanitizer_build DIR   configures DIR unless it already is
configure_sanitizer_build() {
  local build_dir=$1
  if ! command -v clang++ >/dev/null 2>&1; then
    echo "ci: clang++ not found (.ci/run installs clang and libclang-rt-14-dev)" >&2
    return 1
  fi
  local generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCCLBENCH_SANITIZE=address,undefined -DCCLBENCH_ENABLE_FUZZ=ON -DCCLBENCH_ENABLE_CUDA=OFF >/dev/null
  fi
}
