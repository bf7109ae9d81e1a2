#!/bin/sh
# usage: expect_exit.sh CODE REGEX COMMAND [ARG...]
# Runs COMMAND, fails unless it exits with CODE and its stdout+stderr match the extended REGEX
# (an empty REGEX matches anything).
code="$1"; regex="$2"; shift 2
output=$("$@" 2>&1); status=$?
if [ "$status" -ne "$code" ]; then
  printf 'expected exit %s, got %s from: %s\n%s\n' "$code" "$status" "$*" "$output" >&2
  exit 1
fi
if [ -n "$regex" ] && ! printf '%s\n' "$output" | grep -Eq -- "$regex"; then
  printf 'output does not match /%s/:\n%s\n' "$regex" "$output" >&2
  exit 1
fi
exit 0
