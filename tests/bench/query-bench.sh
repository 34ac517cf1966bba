#!/bin/sh
# Benchmarks for the query analyses.
#
#   tests/bench/query-bench.sh [--smoke] [BUILD_DIR]
#
# 1. The cores on synthetic in-memory inputs (query-bench): diff of two
#    20k-stack profiles, leaks over 100 nodes x 30 days hourly, fleet over
#    1,000 nodes. Times are CPU time of the single-threaded core.
# 2. `query leaks --db` over 100 nodes x 720 hourly 1,000-stack snapshots,
#    end to end, CPU time (the database, $QUERY_BENCH_DB or
#    /tmp/hf-query-bench-leaks.db, is written on the first run: ~15 min;
#    its variants another ~25 min).
# 3. End to end, side by side with jeprof on the same two 20k-stack heap_v2
#    files: `query diff A B` (parse, fold, diff, render) against
#    `jeprof --text --base=A BINARY B`, wall time, and the ratio.
#
# --smoke: the same three steps at tiny sizes: query-bench --smoke (the diff
# and `query leaks --db` over 3 nodes x 24 h x 200 stacks in a temporary
# folder), and step 3 on the same files; seconds (CI runs it: suite
# bench-smoke).
set -eu
smoke=
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
build=${1:-build}
bench="$build/tests/query/query-bench"
query="$build/query/query"
jefixture="$build/tests/fixtures/jefixture"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -n "$smoke" ]; then
    echo "== smoke: the diff core and query leaks --db on a tiny database =="
    "$bench" --smoke --query "$query"
else
    echo "== analysis cores (CPU time) =="
    "$bench"

    echo
    echo "== query leaks --db, end to end (CPU time) =="
    "$bench" stored-leaks --query "$query" --db "${QUERY_BENCH_DB:-/tmp/hf-query-bench-leaks.db}"
fi

echo
echo "== end to end: query diff vs jeprof --base on two 20k-stack dumps =="
"$bench" --write-heaps "$tmp" >/dev/null
now() { date +%s.%N; }
# a - b of two such times (awk: bc is not on a fresh Debian)
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a - b }'; }
t0=$(now)
"$query" diff "$tmp/a.heap" "$tmp/b.heap" --format collapsed >"$tmp/q.out"
t1=$(now)
"$query" diff "$tmp/a.heap" "$tmp/b.heap" >"$tmp/q.txt"
t2=$(now)
if command -v jeprof >/dev/null 2>&1; then
    jeprof --text --show_bytes --base="$tmp/a.heap" "$jefixture" "$tmp/b.heap" \
        >"$tmp/j.txt" 2>"$tmp/j.err" || true
    t3=$(now)
    if [ -n "$smoke" ] && ! grep -q '^Total:' "$tmp/j.txt"; then
        echo "query-bench: jeprof printed no total: $(tail -n 3 "$tmp/j.err")" >&2
        exit 1
    fi
    jt=$(sub "$t3" "$t2")
else
    jt=""
fi
qc=$(sub "$t1" "$t0")
qt=$(sub "$t2" "$t1")
printf 'query diff --format collapsed: %.3f s\n' "$qc"
printf 'query diff (text table):       %.3f s\n' "$qt"
if [ -n "$jt" ]; then
    printf 'jeprof --text --base:          %.3f s   (jeprof / query = %.1fx)\n' "$jt" \
        "$(awk -v a="$jt" -v b="$qt" 'BEGIN { print (b > 0 ? a / b : 0) }')"
    printf 'RESULT\tquery diff, two 20k-stack dumps (wall)\t%.3f\ts\t-\tjeprof --text --base\t%.3f\n' "$qt" "$jt"
    "$query" diff "$tmp/a.heap" "$tmp/b.heap" --format json >"$tmp/q.json"
    printf 'B minus A: query %.0f B, jeprof %s\n' \
        "$(sed -n 's/^ "delta": \([0-9.eE+-]*\),$/\1/p' "$tmp/q.json")" \
        "$(sed -n 's/^Total: \(.*\)/\1/p' "$tmp/j.txt")"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
