#!/bin/sh
# A --binary that is not the profiled program is reported and never used,
# even when its segments happen to fit: the mapped file is on this host, so
# its build-id is the identity every candidate must have.
# usage: wrong-binary.sh QUERY JEFIXTURE OTHER_BINARY
set -eu
query=$1 jefixture=$2 other=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" --threads 2 "$dir/a.heap"
"$query" top --binary "$other" "$dir/a.heap" --top 0 > "$dir/out.txt" 2> "$dir/err.txt"
grep -q 'tracked_alloc' "$dir/out.txt" || { echo "FAIL: the right binary was not used"; cat "$dir/out.txt"; exit 1; }
grep -q "not used: $other (--binary): build-id mismatch" "$dir/err.txt" ||
    { echo "FAIL: the wrong --binary was not reported"; cat "$dir/err.txt"; exit 1; }
echo "ok: wrong --binary reported: $(head -c 300 "$dir/err.txt")"
