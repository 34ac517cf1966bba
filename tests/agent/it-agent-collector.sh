#!/bin/sh
# Agent and collector together on loopback (issue 8): a jemalloc fixture
# writes dumps into a folder, the real agent serves them (with a token), and
# the real collector stores them; a Doris-like fake node writes its dump on
# "the node" and answers /jeheap/dump with the path, which the collector then
# fetches through the real agent. Both must end as stored, symbolized
# snapshots. usage: it-agent-collector.sh AGENT COLLECTOR QUERY FAKENODE JEFIXTURE
set -eu
agent=$1 collector=$2 query=$3 fakenode=$4 jefixture=$5
dir=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${HP_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "--- $f"; tail -n 20 "$f"; done; exit 1; }
wait_for() { # file pattern
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 200 ] || fail "timed out waiting for '$2' in $1"
        sleep 0.05
    done
}

mkdir -p "$dir/rw" "$dir/doris"
printf 'secret-%s\n' "$$" > "$dir/token"
# RisingWave-style folder: interval-like dumps named as jemalloc names them.
MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" --threads 2 \
    "$dir/rw/compute-node.4242.0.i0.heap" "$dir/rw/compute-node.4242.1.i1.heap"

# A Doris-like node that writes its dumps into $dir/doris.
"$fakenode" --list "$dir/fake.list" --dir "$dir/doris" doris > "$dir/fake.out" 2> "$dir/fake.log" &
pids="$pids $!"
wait_for "$dir/fake.out" '^ready'

# One real agent serving both folders, token required.
"$agent" --dumps "$dir/rw,$dir/doris" --listen 127.0.0.1:0 --token-file "$dir/token" \
    > "$dir/agent.log" 2>&1 &
pids="$pids $!"
wait_for "$dir/agent.log" 'msg="listening"'
aport=$(sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*listening.*/\1/p' "$dir/agent.log" | head -n 1)
[ -n "$aport" ] || fail "no agent port in the log"

# The node list: the Doris node's agent= becomes the real agent.
doris_line=$(grep '^doris ' "$dir/fake.list" | sed "s/agent=[0-9.:]*/agent=127.0.0.1:$aport/")
cat > "$dir/be.list" <<EOF
agent 127.0.0.1:$aport name=rw-cn-1 prefix=compute-node token_file=$dir/token
$doris_line token_file=$dir/token
EOF

"$collector" --nodes "$dir/be.list" --once --db "$dir/hf.db" --listen off > "$dir/collector.log" 2>&1 ||
    fail "collector --once failed"

"$query" nodes --db "$dir/hf.db" > "$dir/nodes.txt"
grep -q '^rw-cn-1 .* ok$' "$dir/nodes.txt" || fail "agent node not stored ok: $(cat "$dir/nodes.txt")"
doris=$(echo "$doris_line" | sed -n 's/.*name=\([^ ]*\).*/\1/p')
grep -q "^$doris .* ok$" "$dir/nodes.txt" || fail "Doris node not stored ok: $(cat "$dir/nodes.txt")"

# Symbolized, from the newest dump of the prefix: the fixture's own functions.
"$query" top rw-cn-1 --db "$dir/hf.db" --top 0 > "$dir/rw.txt"
grep -q 'tracked_alloc' "$dir/rw.txt" || fail "rw-cn-1 not symbolized: $(head -n 12 "$dir/rw.txt")"
grep -q 'leak_tablet_schema' "$dir/rw.txt" || fail "rw-cn-1 lacks the fixture's call path"
"$query" top "$doris" --db "$dir/hf.db" --top 0 > "$dir/doris.txt"
grep -q 'tablet_schema_cache_grow\|leaf_alloc' "$dir/doris.txt" ||
    fail "Doris node not symbolized: $(head -n 12 "$dir/doris.txt")"

# Retention runs on the collector's schedule: a snapshot imported as 100 days
# old is gone after a round with --retain 90d, the fresh ones stay.
"$query" import --db "$dir/hf.db" --node old-node --time -100d "$dir/rw/compute-node.4242.0.i0.heap" \
    > /dev/null 2>&1 || fail "import of an old dump failed"
"$query" snapshots old-node --db "$dir/hf.db" --all | grep -Eq '^ *[0-9]+ ' ||
    fail "the old snapshot was not imported"
"$collector" --nodes "$dir/be.list" --once --db "$dir/hf.db" --listen off --retain 90d \
    > "$dir/retain.log" 2>&1 || fail "collector --once --retain failed"
"$query" snapshots old-node --db "$dir/hf.db" --all > "$dir/old.txt" 2>&1 || true
if grep -Eq '^ *[0-9]+ ' "$dir/old.txt"; then fail "the 100-day-old snapshot survived --retain 90d"; fi
"$query" snapshots rw-cn-1 --db "$dir/hf.db" > "$dir/kept.txt" 2>&1
[ "$(grep -Ec '^ *[0-9]+ ' "$dir/kept.txt")" -ge 2 ] || fail "fresh snapshots were lost: $(cat "$dir/kept.txt")"

# Without the token the agent refuses, and the collector says so in words.
sed 's/ token_file=[^ ]*//' "$dir/be.list" > "$dir/notoken.list"
if "$collector" --nodes "$dir/notoken.list" --once --db "$dir/hf2.db" --listen off \
    > "$dir/notoken.log" 2>&1; then
    fail "collector succeeded without the agent's token"
fi
grep -q '401' "$dir/notoken.log" || fail "no 401 reported without the token"
# The collector as a daemon: its /metrics (on an ephemeral port) carries its
# own health (rounds, polls by outcome, poll times) beside the nodes' figures.
"$collector" --nodes "$dir/be.list" --interval 1h --spread 0 --db "$dir/hf3.db" \
    --listen 127.0.0.1:0 > "$dir/daemon.log" 2>&1 &
dpid=$!
pids="$pids $dpid"
wait_for "$dir/daemon.log" 'msg="round finished"'
wport=$(sed -n 's/.*url=http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/daemon.log" | head -n 1)
[ -n "$wport" ] || fail "no web port in the collector's log"
curl -sf "http://127.0.0.1:$wport/metrics" > "$dir/metrics.txt" || fail "GET /metrics failed"
grep -q '^heapfleet_collector_rounds_total 1$' "$dir/metrics.txt" || fail "no rounds counter"
grep -q '^heapfleet_collector_polls_total{node="rw-cn-1",result="ok"} 1$' "$dir/metrics.txt" ||
    fail "no ok poll counted for rw-cn-1"
grep -q '^heapfleet_collector_poll_seconds_count 2$' "$dir/metrics.txt" || fail "no poll-time histogram"
grep -q '^heapfleet_node_heap_inuse_bytes{node="rw-cn-1"' "$dir/metrics.txt" ||
    fail "no per-node heap total"
# Every sample line is NAME{LABELS} VALUE with a declared TYPE (text format 0.0.4).
awk '/^# TYPE /{t[$3]=1; next} /^#/ || /^$/ {next}
     { n=$1; sub(/\{.*/, "", n); b=n; sub(/_(bucket|sum|count)$/, "", b);
       if (!(n in t) && !(b in t)) { print "undeclared: " $0; bad=1 }
       if ($NF !~ /^[-+]?([0-9.]+([eE][-+]?[0-9]+)?|Inf|NaN)$/) { print "bad value: " $0; bad=1 } }
     END { exit bad }' "$dir/metrics.txt" || fail "/metrics is not valid exposition text"
kill "$dpid"
wait "$dpid" 2>/dev/null || true

echo "ok: agent + collector stored and symbolized rw-cn-1 and $doris; 401 without token; /metrics"
