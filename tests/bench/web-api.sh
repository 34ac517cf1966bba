#!/bin/sh
# Benchmark of the web API against the `query` CLI doing the same work on the
# same file (one query layer, two front ends: the API's overhead is HTTP,
# JSON and the worker hop), plus the fleet listing over 1,000 nodes.
#
#   tests/bench/web-api.sh [--smoke] BUILDDIR [RUNS]
#
# Prints median wall times (ms) and API/CLI ratios. Data: a 20,000-stack
# profile with ~120k distinct frames (collapsed), and 1,000 nodes each with
# two real jefixture dumps. Lines starting "RESULT<tab>" are read by
# tests/bench/run-all.
#
# --smoke: the same steps, binaries and requests on a 300-stack profile and
# 5 nodes, one run each (a few seconds); fails when a step fails (an HTTP
# status other than 200 fails every mode) or a figure is missing (CI runs
# it: suite bench-smoke).
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then
    SMOKE=1
    shift
fi
b=${1:?usage: web-api.sh [--smoke] BUILDDIR [RUNS]}
if [ -n "$SMOKE" ]; then
    runs=${2:-1} STACKS=300 NODES=5
else
    runs=${2:-5} STACKS=20000 NODES=1000
fi
for x in "$b/web/hf-web" "$b/query/query" "$b/tests/fixtures/jefixture"; do
    [ -x "$x" ] || { echo "web-api: $x not built (ninja -C $b)" >&2; exit 2; }
done
pid=
tmp=$(mktemp -d)
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data/big" "$tmp/fleet"
awk -v n="$STACKS" 'BEGIN { srand(7);
    for (s = 0; s < n; s++) { line = "clone3;start_thread;worker_main";
        for (d = 0; d < 12; d++) { sh = 8 - d; if (sh < 0) sh = 0; line = line ";fragment_" int(s / (2 ^ sh)) "_" d; }
        print line ";tracked_alloc " (1 + int(rand() * 100000)); } }' > "$tmp/data/big/big.collapsed"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$b/tests/fixtures/jefixture" "$tmp/a.heap" "$tmp/b.heap" >/dev/null
dirs=$(seq -f "$tmp/fleet/n%04g" 0 $((NODES - 1)))
mkdir $dirs
tee $(for d in $dirs; do echo "$d/a.heap"; done) < "$tmp/a.heap" > /dev/null
tee $(for d in $dirs; do echo "$d/b.heap"; done) < "$tmp/b.heap" > /dev/null
touch -d "-1 hour" $(for d in $dirs; do echo "$d/a.heap"; done)

fail() { echo "web-api: $*" >&2; exit 1; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
now_ms() { date +%s%3N; }
time_cmd() { # runs a command RUNS times, prints the median ms
    i=0
    : > "$tmp/times"
    while [ $i -lt "$runs" ]; do
        t0=$(now_ms); "$@" > /dev/null || fail "failed: $*"; t1=$(now_ms)
        echo $((t1 - t0)) >> "$tmp/times"; i=$((i + 1))
    done
    median < "$tmp/times"
}
get() { # URL -> "ms", fails on anything but HTTP 200
    r=$(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$1") || fail "curl failed: $1"
    [ "${r%% *}" = 200 ] || fail "HTTP ${r%% *}: $1"
    echo "${r#* }" | awk '{ printf "%d\n", $1 * 1000 }'
}
time_url() { # URL -> median ms over RUNS
    i=0
    : > "$tmp/times"
    while [ $i -lt "$runs" ]; do
        get "$1" >> "$tmp/times"; i=$((i + 1))
    done
    median < "$tmp/times"
}
start_web() { # DIR OUT: starts hf-web, sets pid and api
    "$b/web/hf-web" --dir "$1" --listen 127.0.0.1:0 --static none > "$2" 2>"$2.err" &
    pid=$!
    n=0
    while ! grep -q listening "$2" 2>/dev/null; do
        kill -0 $pid 2>/dev/null || fail "hf-web exited: $(tail -3 "$2.err")"
        n=$((n + 1))
        [ $n -lt 600 ] || fail "hf-web did not start in 30 s"
        sleep 0.05
    done
    port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$2")
    [ -n "$port" ] || fail "no port in hf-web's output: $(cat "$2")"
    base="http://127.0.0.1:$port"
    api="$base/api/v1"
}
stop_web() { kill $pid; wait $pid 2>/dev/null || true; pid=; }
ratio() { awk "BEGIN { printf \"%.2f\", $1 / ($2 ? $2 : 1) }"; }
r() { printf 'RESULT\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$tmp/results"; }
: > "$tmp/results"

start_web "$tmp/data" "$tmp/out"
f="$tmp/data/big/big.collapsed"

echo "profile: $(wc -l < "$f") stacks, $(curl -s "$api/snapshots/big/tree" | grep -o '"nodes":[0-9]*' | head -1) tree frames; $runs runs, median ms"
printf '%-44s %8s %8s %7s\n' "work" "API" "CLI" "API/CLI"
cli=$(time_cmd "$b/query/query" export "$f" --format collapsed)
a=$(time_url "$api/snapshots/big/profile?format=collapsed")
printf '%-44s %8s %8s %7s\n' "collapsed export" "$a" "$cli" "$(ratio "$a" "$cli")"
r "web API collapsed export, $STACKS stacks" "$a" ms - "query export (CLI)" "$cli"
cli=$(time_cmd "$b/query/query" top "$f" --format json --top 0)
a=$(time_url "$api/snapshots/big/profile?format=json&top=0")
printf '%-44s %8s %8s %7s\n' "full JSON (functions + stacks)" "$a" "$cli" "$(ratio "$a" "$cli")"
r "web API full JSON, $STACKS stacks" "$a" ms - "query top --format json" "$cli"
a=$(time_url "$api/snapshots/big/top?top=0")
printf '%-44s %8s %8s\n' "top table, all functions" "$a" "-"
r "web API top table, all functions" "$a" ms - - -
a=$(time_url "$api/snapshots/big/tree")
printf '%-44s %8s %8s\n' "flame-graph tree (uncompressed)" "$a" "-"
r "web API flame-graph tree" "$a" ms - - -
a=$(time_url "$api/snapshots/big/tree?prune=0.0001")
printf '%-44s %8s %8s\n' "flame-graph tree, prune=0.0001" "$a" "-"
r "web API flame-graph tree, prune=0.0001" "$a" ms - - -
stop_web

start_web "$tmp/fleet" "$tmp/out2"
cold=$(get "$api/nodes?spark=24")
warm=$(time_url "$api/nodes?spark=24")
m=$(time_url "$base/metrics")
echo "$NODES nodes x 2 dumps: /nodes?spark=24 cold (parses $((NODES * 2)) dumps) $cold ms, warm $warm ms; /metrics $m ms"
r "web /nodes?spark=24 cold, $NODES nodes" "$cold" ms - - -
r "web /nodes?spark=24 warm, $NODES nodes" "$warm" ms - - -
r "web /metrics, $NODES nodes" "$m" ms - - -
stop_web
cat "$tmp/results"
# every figure a number (8 of them)
awk -F '\t' '$3 ~ /^[0-9]+$/ { n++ } END { exit n != 8 }' "$tmp/results" ||
    fail "a figure is missing or not a number"
