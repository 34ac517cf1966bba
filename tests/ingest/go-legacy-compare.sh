#!/bin/sh
# Go's text heap profiles (runtime/pprof debug=1) against the real
# `go tool pprof`: for every sample type, the total `query top` reports
# equals the one go pprof prints, within one unit per record (go truncates
# each scaled record to an integer; we keep the fractions).
# Usage: go-legacy-compare.sh QUERY PROFILE. Skips (77) without go.
set -eu
query=$1
profile=$2
command -v go >/dev/null 2>&1 || { echo "go not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME="$tmp" GOCACHE="$tmp/cache" PPROF_TMPDIR="$tmp" GOFLAGS=-mod=mod GOTOOLCHAIN=local
records=$(grep -c '^ *[0-9][0-9]*: *[0-9][0-9]* *\[' "$profile")
fail=0
for s in inuse_space inuse_objects alloc_space alloc_objects; do
    go tool pprof -top -unit=byte -sample_index=$s "$profile" >"$tmp/go.txt" 2>/dev/null
    want=$(sed -n 's/.* of \([0-9][0-9]*\)[a-zA-Z]* total.*/\1/p' "$tmp/go.txt")
    "$query" top "$profile" --no-symbolize --sample $s --format json >"$tmp/q.json"
    got=$(sed -n 's/.*"total": *\([0-9.e+]*\).*/\1/p' "$tmp/q.json" | head -n 1)
    if [ -z "$want" ] || [ -z "$got" ]; then
        echo "FAIL $s: could not read a total (go: '$want', query: '$got')"
        cat "$tmp/go.txt"
        fail=1
        continue
    fi
    if awk -v g="$got" -v w="$want" -v n="$records" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= n) }'; then
        echo "ok $s: query $got, go pprof $want"
    else
        echo "FAIL $s: query $got, go pprof $want (more than $records apart)"
        fail=1
    fi
done
exit $fail
