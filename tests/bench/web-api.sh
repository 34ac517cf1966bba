#!/bin/sh
# Benchmark of the web API against the `query` CLI doing the same work on the
# same file (one query layer, two front ends: the API's overhead is HTTP,
# JSON and the worker hop), plus the fleet listing over 1,000 nodes.
#
#   tests/bench/web-api.sh BUILDDIR [RUNS]
#
# Prints median wall times (ms) and API/CLI ratios. Data: a 20,000-stack
# profile with ~120k distinct frames (collapsed), and 1,000 nodes each with
# two real jefixture dumps.
set -eu
b=$1
runs=${2:-5}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data/big" "$tmp/fleet"
awk 'BEGIN { srand(7);
    for (s = 0; s < 20000; s++) { line = "clone3;start_thread;worker_main";
        for (d = 0; d < 12; d++) { sh = 8 - d; if (sh < 0) sh = 0; line = line ";fragment_" int(s / (2 ^ sh)) "_" d; }
        print line ";tracked_alloc " (1 + int(rand() * 100000)); } }' > "$tmp/data/big/big.collapsed"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$b/tests/fixtures/jefixture" "$tmp/a.heap" "$tmp/b.heap" >/dev/null
dirs=$(seq -f "$tmp/fleet/n%04g" 0 999)
mkdir $dirs
tee $(for d in $dirs; do echo "$d/a.heap"; done) < "$tmp/a.heap" > /dev/null
tee $(for d in $dirs; do echo "$d/b.heap"; done) < "$tmp/b.heap" > /dev/null
touch -d "-1 hour" $(for d in $dirs; do echo "$d/a.heap"; done)

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
now_ms() { date +%s%3N; }
time_cmd() { # runs a command RUNS times, prints the median ms
    i=0
    while [ $i -lt "$runs" ]; do
        t0=$(now_ms); "$@" > /dev/null; t1=$(now_ms); echo $((t1 - t0)); i=$((i + 1))
    done | median
}
time_url() { # URL -> median ms over RUNS
    i=0
    while [ $i -lt "$runs" ]; do
        curl -s -o /dev/null -w '%{time_total}\n' "$1"; i=$((i + 1))
    done | awk '{ printf "%d\n", $1 * 1000 }' | median
}

"$b/web/hf-web" --dir "$tmp/data" --listen 127.0.0.1:0 --static none > "$tmp/out" 2>/dev/null &
pid=$!
while ! grep -q listening "$tmp/out" 2>/dev/null; do sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$tmp/out")
api="http://127.0.0.1:$port/api/v1"
f="$tmp/data/big/big.collapsed"

echo "profile: $(wc -l < "$f") stacks, $(curl -s "$api/snapshots/big/tree" | grep -o '"nodes":[0-9]*' | head -1) tree frames; $runs runs, median ms"
printf '%-44s %8s %8s %7s\n' "work" "API" "CLI" "API/CLI"
cli=$(time_cmd "$b/query/query" export "$f" --format collapsed)
a=$(time_url "$api/snapshots/big/profile?format=collapsed")
printf '%-44s %8s %8s %7s\n' "collapsed export" "$a" "$cli" "$(awk "BEGIN { printf \"%.2f\", $a / ($cli ? $cli : 1) }")"
cli=$(time_cmd "$b/query/query" top "$f" --format json --top 0)
a=$(time_url "$api/snapshots/big/profile?format=json&top=0")
printf '%-44s %8s %8s %7s\n' "full JSON (functions + stacks)" "$a" "$cli" "$(awk "BEGIN { printf \"%.2f\", $a / ($cli ? $cli : 1) }")"
a=$(time_url "$api/snapshots/big/top?top=0")
printf '%-44s %8s %8s\n' "top table, all functions" "$a" "-"
a=$(time_url "$api/snapshots/big/tree")
printf '%-44s %8s %8s\n' "flame-graph tree (uncompressed)" "$a" "-"
a=$(time_url "$api/snapshots/big/tree?prune=0.0001")
printf '%-44s %8s %8s\n' "flame-graph tree, prune=0.0001" "$a" "-"
kill $pid; wait $pid 2>/dev/null || true

"$b/web/hf-web" --dir "$tmp/fleet" --listen 127.0.0.1:0 --static none > "$tmp/out2" 2>/dev/null &
pid=$!
while ! grep -q listening "$tmp/out2" 2>/dev/null; do sleep 0.05; done
port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$tmp/out2")
api="http://127.0.0.1:$port/api/v1"
cold=$(curl -s -o /dev/null -w '%{time_total}\n' "$api/nodes?spark=24" | awk '{ printf "%d", $1 * 1000 }')
warm=$(time_url "$api/nodes?spark=24")
m=$(time_url "http://127.0.0.1:$port/metrics")
echo "1,000 nodes x 2 dumps: /nodes?spark=24 cold (parses 2,000 dumps) $cold ms, warm $warm ms; /metrics $m ms"
kill $pid; wait $pid 2>/dev/null || true
