#!/bin/sh
# usage: json_check.sh OUT_JSON CODE VALIDATOR SCHEMA COMMAND [ARG...]
# Runs COMMAND (which writes OUT_JSON), checks its exit CODE, then validates OUT_JSON against SCHEMA.
out="$1"; code="$2"; validator="$3"; schema="$4"; shift 4
rm -f "$out"
"$@" >/dev/null 2>&1; status=$?
if [ "$status" -ne "$code" ]; then echo "expected exit $code, got $status: $*" >&2; exit 1; fi
[ -f "$out" ] || { echo "no $out written" >&2; exit 1; }
exec /usr/bin/python3 "$validator" "$schema" "$out"
