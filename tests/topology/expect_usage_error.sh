#!/bin/sh
# usage: expect_usage_error.sh JSON_PATH PROGRAM ARGS...
# Runs PROGRAM --json JSON_PATH ARGS and checks the bad-input contract:
# exit status 2, exactly one stderr line "<program>: error: ...", no output file left behind.
# The argument HUGE_SPEC is replaced by a 100 KB NCCL_IB_HCA value.
json=$1; shift
program=$1; shift
rm -f "$json"
huge=$(head -c 102400 /dev/zero | tr '\0' a)
n=0
for arg in "$@"; do
  n=$((n + 1))
  if [ "$arg" = HUGE_SPEC ]; then arg=$huge; fi
  set -- "$@" "$arg"
done
shift "$n"
set -- --json "$json" "$@"
err=$(mktemp)
"$program" "$@" >/dev/null 2>"$err"
status=$?
lines=$(wc -l <"$err")
first=$(head -c 300 "$err")
rm -f "$err"
if [ "$status" -ne 2 ]; then echo "expected exit 2, got $status: $first"; exit 1; fi
if [ "$lines" -ne 1 ]; then echo "expected one stderr line, got $lines: $first"; exit 1; fi
case "$first" in
  "$(basename "$program"): error: "*) ;;
  *) echo "stderr does not start with '<program>: error: ': $first"; exit 1 ;;
esac
if [ -e "$json" ]; then echo "an output file was left behind: $json"; exit 1; fi
echo "ok: $first"
