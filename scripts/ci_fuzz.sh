#!/usr/bin/env bash
# CI fuzzing: builds the libFuzzer targets with clang (ASan+UBSan, host code only) in the sanitizer
# stage's build folder (scripts/ci_sanitizer_build.sh: one build for both) and runs each one for a bounded
# number of executions on a scratch copy of its committed seed corpus (tests/fuzz/corpus/<target>), after
# replaying tests/fuzz/regressions/<target>_* once each; then the Python mutation fuzzer of compare's results
# reader. Each fuzzer is one process on one core: as many run at once as there are cores.
# Bounded by executions, not seconds: with the fixed seed every machine explores the same inputs, and a
# loaded or slow one takes longer instead of fuzzing less (.ci/run runs this beside the tests, on the CPU
# they leave idle). A target's count is the most it reached in 25 s (units: 5 s) in seven fresh-clone CI
# runs on the 2-core VM (2026-12-06/07), when this script ran them for a fixed time.
# Any crash, sanitizer report, leak, timeout or out-of-memory is a failure; the reproducer is kept
# under <build>/fuzz-artifacts/. A target stopped by the time cap before its count says so, and fails.
#   CCLBENCH_FUZZ_BUILD_DIR   build folder                       [<repo>/build-sanitize]
#   CCLBENCH_FUZZ_JOBS        fuzzers run at once                [nproc]
#   CCLBENCH_FUZZ_RUNS        executions per target, every one   [each target's own, below]
#   CCLBENCH_FUZZ_MAX_SECONDS a target's time cap                [900]
#   CCLBENCH_FUZZ_TARGETS     space-separated subset             [all]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${CCLBENCH_FUZZ_BUILD_DIR:-${CCLBENCH_SANITIZE_BUILD_DIR:-$repo/build-sanitize}}"
jobs="${CCLBENCH_FUZZ_JOBS:-$(nproc)}"
max_seconds="${CCLBENCH_FUZZ_MAX_SECONDS:-900}"
# units (size and count parsing) saturates at once: with seed 1 its last new edge and feature come
# within the first 35,000 executions (0.4 s here), and 2.4 million more in 25 s found nothing new. The
# other targets still found new edges or features late in their 25 s. Most in 25 s (units 5 s), seven CI
# runs: units 438,119; parse_config 630,966; nccl_ib_hca 1,008,711; nccl_log 26,101; topology_xml 46,958;
# compare_reader 89,164.
declare -A target_runs=([units]=440000 [parse_config]=640000 [nccl_ib_hca]=1010000 [nccl_log]=27000
                        [topology_xml]=47000 [compare_reader]=90000)
for target in "${!target_runs[@]}"; do
  if [[ -n ${CCLBENCH_FUZZ_RUNS:-} ]]; then target_runs[$target]=$CCLBENCH_FUZZ_RUNS; fi
done
whole_number='^[1-9][0-9]*$'
if ! [[ $max_seconds =~ $whole_number ]] || { [[ -n ${CCLBENCH_FUZZ_RUNS:-} ]] && ! [[ $CCLBENCH_FUZZ_RUNS =~ $whole_number ]]; }; then
  echo "ci_fuzz: error: CCLBENCH_FUZZ_RUNS and CCLBENCH_FUZZ_MAX_SECONDS take a positive whole number" >&2
  exit 2
fi
targets=(${CCLBENCH_FUZZ_TARGETS:-units parse_config nccl_ib_hca nccl_log topology_xml compare_reader})

source "$repo/scripts/ci_sanitizer_build.sh"
started=$SECONDS
native=()
for target in "${targets[@]}"; do
  [[ $target == compare_reader ]] || native+=("fuzz_$target")
done
if ((${#native[@]} > 0)); then
  configure_sanitizer_build "$build_dir"
  cmake --build "$build_dir" -j "$(nproc)" --target "${native[@]}"
fi
echo "ci_fuzz: built in $((SECONDS - started)) s" >&2

# Leaks inside third-party libraries (hwloc leaks on some malformed-XML error paths) are not ours.
export LSAN_OPTIONS="suppressions=$repo/tests/reliability/lsan_openmpi.supp:print_suppressions=0"
artifacts="$build_dir/fuzz-artifacts"
mkdir -p "$artifacts"
# under_cap TARGET RUNS BUDGET: 0 when the target ran its whole count; else says that the time cap ended it.
under_cap() {
  if (($2 < $3)); then
    echo "ci_fuzz: $1: the time cap ($max_seconds s) ended it after $2 of its $3 executions: fuzzed less than CI's" \
         "count (CCLBENCH_FUZZ_MAX_SECONDS)" >&2
    return 1
  fi
}

# fuzz_one TARGET: the target's regression inputs, then its bounded run; exit 0 no finding, 1 a finding.
fuzz_one() {
  local target=$1 binary scratch leaks=1 log budget=${target_runs[$1]} runs started=$SECONDS
  local extra=() regressions=()
  if [[ $target == compare_reader ]]; then
    log="$build_dir/fuzz-$target.log"
    local status=0
    python3 "$repo/tests/fuzz/fuzz_compare_reader.py" --source-dir "$repo" --runs "$budget" \
      --seconds "$max_seconds" --findings "$artifacts/compare_reader" >"$log" 2>&1 || status=$?
    cat "$log" >&2
    if ((status != 0)); then
      echo "ci_fuzz: compare_reader: FINDING (inputs in $artifacts/compare_reader)" >&2
      return 1
    fi
    runs=$(grep -o '^compare_reader: [0-9]* executions' "$log" | grep -o '[0-9]*' || echo 0)
    under_cap "$target" "$runs" "$budget"
    return
  fi
  binary="$build_dir/tests/fuzz/fuzz_$target"
  scratch="$build_dir/fuzz-scratch/$target"
  rm -rf "$scratch" && mkdir -p "$scratch"
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
      return 1
    fi
    echo "ci_fuzz: $target: ${#regressions[@]} regression input(s) pass" >&2
  fi
  log="$build_dir/fuzz-$target.log"
  # New inputs go to the scratch corpus only; the committed seeds are read, never written. A fixed
  # seed makes CI explore the same inputs as the run recorded in tests/fuzz/findings, in order.
  if ASAN_OPTIONS="detect_leaks=$leaks" "$binary" -seed=1 -runs="$budget" -max_total_time="$max_seconds" -timeout=60 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" "${extra[@]}" "$scratch" \
       "$repo/tests/fuzz/corpus/$target" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    echo "ci_fuzz: $target: $runs executions in $((SECONDS - started)) s, no finding" >&2
    under_cap "$target" "$runs" "$budget" || return 1
  else
    echo "ci_fuzz: $target: FINDING; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}

# At most $jobs fuzzers at once, each waited for by its pid.
failures=0
running=()
wait_oldest() {
  if ! wait "${running[0]}"; then failures=$((failures + 1)); fi
  running=("${running[@]:1}")
}
for target in "${targets[@]}"; do
  while ((${#running[@]} >= jobs)); do wait_oldest; done
  fuzz_one "$target" &
  running+=($!)
done
while ((${#running[@]} > 0)); do wait_oldest; done
echo "ci_fuzz: ${#targets[@]} target(s), $failures failed (a finding, or the time cap: above)," \
     "$((SECONDS - started)) s in all" >&2
exit $((failures > 0))
