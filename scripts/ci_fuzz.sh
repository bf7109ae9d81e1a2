#!/usr/bin/env bash
# CI fuzzing: builds the libFuzzer targets with clang (ASan+UBSan, host code only) into a separate
# build folder and runs each one for a bounded time on a scratch copy of its committed seed corpus
# (tests/fuzz/corpus/<target>), after replaying tests/fuzz/regressions/<target>_* once each; then
# the Python mutation fuzzer of compare's results reader.
# Any crash, sanitizer report, leak, timeout or out-of-memory is a failure; the reproducer is kept
# under <build>/fuzz-artifacts/.
#   CCLBENCH_FUZZ_BUILD_DIR  build folder                       [<repo>/build-fuzz]
#   CCLBENCH_FUZZ_SECONDS    seconds per target                 [25; units 5]
#   CCLBENCH_FUZZ_TARGETS    space-separated subset             [all]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
seconds="${CCLBENCH_FUZZ_SECONDS:-25}"
# units (size and count parsing) saturates at once: with seed 1 its last new edge and feature come
# within the first 35,000 executions (0.4 s here), and 2.4 million more in the rest of 25 s found
# nothing new. The other targets still find new edges or features late in their 25 s.
declare -A target_seconds=([units]="${CCLBENCH_FUZZ_SECONDS:-5}")
targets=(${CCLBENCH_FUZZ_TARGETS:-units parse_config nccl_ib_hca nccl_log topology_xml compare_reader})

if ! command -v clang++ >/dev/null 2>&1; then
  echo "ci_fuzz: clang++ not found (scripts/setup.sh installs clang)" >&2
  exit 1
fi
started=$SECONDS
native=()
for target in "${targets[@]}"; do
  [[ $target == compare_reader ]] || native+=("fuzz_$target")
done
if ((${#native[@]} > 0)); then
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    CC=clang CXX=clang++ cmake -S "$repo" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCCLBENCH_ENABLE_FUZZ=ON -DCCLBENCH_ENABLE_CUDA=OFF >/dev/null
  fi
  cmake --build "$build_dir" -j "$(nproc)" --target "${native[@]}"
fi
echo "ci_fuzz: built in $((SECONDS - started)) s" >&2

# Leaks inside third-party libraries (hwloc leaks on some malformed-XML error paths) are not ours.
export LSAN_OPTIONS="suppressions=$repo/tests/reliability/lsan_openmpi.supp:print_suppressions=0"
artifacts="$build_dir/fuzz-artifacts"
mkdir -p "$artifacts"
failures=0
for target in "${targets[@]}"; do
  if [[ $target == compare_reader ]]; then
    if ! python3 "$repo/tests/fuzz/fuzz_compare_reader.py" --source-dir "$repo" --seconds "$seconds" \
         --findings "$artifacts/compare_reader"; then
      echo "ci_fuzz: compare_reader: FINDING (inputs in $artifacts/compare_reader)" >&2
      failures=$((failures + 1))
    fi
    continue
  fi
  binary="$build_dir/tests/fuzz/fuzz_$target"
  scratch="$build_dir/fuzz-scratch/$target"
  rm -rf "$scratch" && mkdir -p "$scratch"
  extra=()
  leaks=1
  case $target in
    parse_config) extra=(-dict="$repo/tests/fuzz/parse_config.dict") ;;
    # nccl_log: the largest seed (~50 log lines) plus a little: every record kind and every cap
    # (50 warnings, 10 notes per kind) fits; longer inputs only repeat lines, at ~30 us of ASan
    # time per line (tests/fuzz/findings/README.md).
    nccl_log) extra=(-dict="$repo/tests/fuzz/nccl_log.dict" -max_len=4608) ;;
    # hwloc leaks on some error paths of malformed XML (third-party, no symbols to suppress by):
    # leak checking is off for this target only; crashes and memory errors still fail it.
    topology_xml) extra=(-dict="$repo/tests/fuzz/topology_xml.dict" -max_len=32768 -detect_leaks=0); leaks=0 ;;
  esac
  # The inputs that once crashed this target run first, once each (libFuzzer runs file arguments).
  regressions=("$repo/tests/fuzz/regressions/${target}_"*)
  if [[ -e ${regressions[0]} ]]; then
    if ! ASAN_OPTIONS="detect_leaks=$leaks" "$binary" -timeout=60 -rss_limit_mb=2048 "${extra[@]}" "${regressions[@]}" \
         >"$build_dir/fuzz-$target-regressions.log" 2>&1; then
      echo "ci_fuzz: $target: a regression input fails again; last lines:" >&2
      tail -n 40 "$build_dir/fuzz-$target-regressions.log" >&2
      failures=$((failures + 1))
      continue
    fi
    echo "ci_fuzz: $target: ${#regressions[@]} regression input(s) pass" >&2
  fi
  log="$build_dir/fuzz-$target.log"
  # New inputs go to the scratch corpus only; the committed seeds are read, never written. A fixed
  # seed makes CI explore the same inputs as the run recorded in tests/fuzz/findings, in order.
  budget="${target_seconds[$target]:-$seconds}"
  if ASAN_OPTIONS="detect_leaks=$leaks" "$binary" -seed=1 -max_total_time="$budget" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$artifacts/$target-" "${extra[@]}" "$scratch" "$repo/tests/fuzz/corpus/$target" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "ci_fuzz: $target: $runs executions in ${budget} s, no finding" >&2
  else
    echo "ci_fuzz: $target: FINDING; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    failures=$((failures + 1))
  fi
done
echo "ci_fuzz: ${#targets[@]} target(s), $failures with findings, $((SECONDS - started)) s in all" >&2
exit $((failures > 0))
