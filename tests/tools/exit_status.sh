#!/bin/sh
# Runs a command and passes its exit status on; a non-zero status is also printed as a line that
# CTest's FAIL_REGULAR_EXPRESSION catches. PASS_REGULAR_EXPRESSION alone ignores the exit code (CMake
# documents this), so an output test would pass when the tool prints the right text and then fails.
"$@"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "cclbench-test: exit status $rc, expected 0: $*"
fi
exit "$rc"
