#!/bin/sh
# Symbols through the node's agent (issue 15): the program exists only on the
# node's side. A jemalloc fixture runs from $dir/node/bin and writes dumps;
# the real agent serves the dumps (token required). The collector and query
# then run in a mount namespace where $dir/node/bin is an empty tmpfs, so the
# maps path does not exist for them and names can only come from the agent
# (/identity?path= for the build-id, /buildid/<id>/debuginfo|executable for
# the file), streamed into --symbol-cache. Two nodes share the build: one
# download. A node without agent= stays unnamed and says why.
# usage: it-agent-symbols.sh AGENT COLLECTOR QUERY JEFIXTURE
set -eu
agent=$1 collector=$2 query=$3 jefixture=$4
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: unshare -m not permitted here"
    exit 77
fi
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
# Run a command where the node's program folder is empty (the collector's view).
hidden() {
    unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$dir/node/bin" "$@"
}
# The same in the background: the subshell becomes the program, so $! is its
# pid and kill stops it (not a shell that would leave it running).
hidden_bg() {
    exec unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$dir/node/bin" "$@"
}

mkdir -p "$dir/node/bin" "$dir/rw" "$dir/cache" "$dir/home"
cp "$jefixture" "$dir/node/bin/jefixture"
printf 'secret-%s\n' "$$" > "$dir/token"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$dir/node/bin/jefixture" --threads 2 \
    "$dir/rw/compute-node.4242.0.i0.heap"
grep -q "$dir/node/bin/jefixture" "$dir/rw/compute-node.4242.0.i0.heap" ||
    fail "the dump does not map the node's copy of the program"
hidden sh -c 'test ! -e "$0"' "$dir/node/bin/jefixture" ||
    fail "the program is still visible inside the namespace"

# The fixture has exited: its program is served because --binaries names
# its folder (the agent serves only what a watched running process maps,
# or what --binaries names).
"$agent" --dumps "$dir/rw" --listen 127.0.0.1:0 --token-file "$dir/token" \
    --binaries "$dir/node/bin" > "$dir/agent.log" 2>&1 &
pids="$pids $!"
wait_for "$dir/agent.log" 'msg="listening"'
aport=$(sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*listening.*/\1/p' "$dir/agent.log" | head -n 1)
[ -n "$aport" ] || fail "no agent port in the log"

# A second agent, no token, read as a plain url node: no agent= for symbols.
"$agent" --dumps "$dir/rw" --listen 127.0.0.1:0 > "$dir/agent2.log" 2>&1 &
pids="$pids $!"
wait_for "$dir/agent2.log" 'msg="listening"'
aport2=$(sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*listening.*/\1/p' "$dir/agent2.log" | head -n 1)

cat > "$dir/be.list" <<EOF
agent 127.0.0.1:$aport name=cn-1 prefix=compute-node token_file=$dir/token
agent 127.0.0.1:$aport name=cn-2 prefix=compute-node token_file=$dir/token
url http://127.0.0.1:$aport2/dumps/newest?prefix=compute-node name=cn-plain
EOF

export HOME="$dir/home" DEBUGINFOD_URLS=""
hidden "$collector" --nodes "$dir/be.list" --once --db "$dir/hf.db" --listen off \
    --symbol-cache "$dir/cache" --log-level debug > "$dir/collector.log" 2>&1 ||
    fail "collector --once failed"

for n in cn-1 cn-2; do
    hidden "$query" top "$n" --db "$dir/hf.db" --top 0 > "$dir/$n.txt" 2>&1 || fail "query top $n failed"
    grep -q 'tracked_alloc' "$dir/$n.txt" || fail "$n not named through the agent: $(head -n 12 "$dir/$n.txt")"
    grep -q 'leak_tablet_schema' "$dir/$n.txt" || fail "$n lacks the fixture's call path"
done

# One download per build-id: the cache holds it once, the agent sent it once.
n=$(find "$dir/cache" -type f \( -name debuginfo -o -name executable \) | wc -l)
[ "$n" -eq 1 ] || fail "expected one cached file for the shared build, found $n: $(find "$dir/cache" -type f)"
bid=$(basename "$(dirname "$(find "$dir/cache" -type f -name 'debuginfo' -o -type f -name executable | head -n 1)")")
want=$(readelf -n "$jefixture" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
[ "$bid" = "$want" ] || fail "cached build-id $bid is not the program's ($want)"

# Without an agent the same dump stays unnamed, with the reason.
hidden "$query" top cn-plain --db "$dir/hf.db" --top 0 > "$dir/plain.txt" 2>&1 || true
if grep -q 'tracked_alloc' "$dir/plain.txt"; then
    fail "cn-plain was named although nothing could supply its program"
fi

# Coverage: query nodes shows the named share of each node's latest profile,
# the unnamed node's profile says which object stayed unnamed and why.
hidden "$query" nodes --db "$dir/hf.db" > "$dir/nodes.txt" 2>&1 || fail "query nodes failed"
grep -q '^NODE .* NAMED  *STATUS$' "$dir/nodes.txt" || fail "no NAMED column: $(head -n 1 "$dir/nodes.txt")"
pct() { awk -v n="$1" '$1 == n { for (i = 1; i <= NF; i++) if ($i ~ /%$/) { sub(/%/, "", $i); print $i } }' "$dir/nodes.txt"; }
c1=$(pct cn-1) cp=$(pct cn-plain)
[ -n "$c1" ] && [ -n "$cp" ] || fail "no coverage figures: $(cat "$dir/nodes.txt")"
awk -v a="$c1" -v b="$cp" 'BEGIN { exit !(a >= 90 && b < a) }' ||
    fail "coverage cn-1 $c1% (want >= 90) vs cn-plain $cp% (want lower)"
grep -q "unnamed $dir/node/bin/jefixture.*no file found" "$dir/plain.txt" ||
    fail "cn-plain's profile does not say what stayed unnamed: $(grep -i note "$dir/plain.txt")"

# /metrics of the collector as a daemon carries heapfleet_node_symbolized_ratio.
hidden_bg "$collector" --nodes "$dir/be.list" --interval 1h --spread 0 --db "$dir/hf3.db" \
    --symbol-cache "$dir/cache" --listen 127.0.0.1:0 --log-level debug > "$dir/daemon.log" 2>&1 &
dpid=$!
pids="$pids $dpid"
wait_for "$dir/daemon.log" 'msg="round finished"'
wport=$(sed -n 's/.*url=http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$dir/daemon.log" | head -n 1)
[ -n "$wport" ] || fail "no web port in the collector's log"
curl -sf "http://127.0.0.1:$wport/metrics" > "$dir/metrics.txt" || fail "GET /metrics failed"
grep -q '^# TYPE heapfleet_node_symbolized_ratio gauge$' "$dir/metrics.txt" || fail "no ratio family"
awk '/^heapfleet_node_symbolized_ratio\{node="cn-1"\}/ { found = 1; if ($2 < 0.9) exit 1 } END { exit !found }' \
    "$dir/metrics.txt" || fail "cn-1 ratio missing or low: $(grep symbolized "$dir/metrics.txt")"

# Symbols arriving later: cn-plain's snapshot was stored with addresses only;
# an upload into the store's symbol folder makes the running collector
# re-derive it from its raw dump in the background, log it and note it.
hidden "$query" top cn-plain --db "$dir/hf3.db" --top 0 > "$dir/plain3.txt" 2>&1 || true
grep -q 'tracked_alloc' "$dir/plain3.txt" && fail "cn-plain named before the upload"
hidden "$query" symbols add --db "$dir/hf3.db" "$jefixture" > "$dir/add.txt" 2>&1 ||
    fail "symbols add failed: $(cat "$dir/add.txt")"
wait_for "$dir/daemon.log" 're-symbolized 1 snapshot of build jefixture: now [0-9]*% named'
hidden "$query" top cn-plain --db "$dir/hf3.db" --top 0 > "$dir/plain4.txt" 2>&1 ||
    fail "query top cn-plain failed"
grep -q 'tracked_alloc' "$dir/plain4.txt" ||
    fail "cn-plain not named after the upload: $(head -n 12 "$dir/plain4.txt")"
grep -q '^Note: .*re-symbolized\|^re-symbolized .*now [0-9]*% named (was [0-9]*%)' "$dir/plain4.txt" ||
    fail "the snapshot's note does not say it was re-symbolized: $(grep -A3 Note "$dir/plain4.txt")"
curl -sf "http://127.0.0.1:$wport/metrics" > "$dir/metrics2.txt" || fail "GET /metrics failed"
awk '/^heapfleet_node_symbolized_ratio\{node="cn-plain"\}/ { found = 1; if ($2 < 0.9) exit 1 } END { exit !found }' \
    "$dir/metrics2.txt" || fail "cn-plain ratio not updated: $(grep symbolized "$dir/metrics2.txt")"
# The symbol list names the nodes whose snapshots use the build.
hidden "$query" symbols list --db "$dir/hf3.db" > "$dir/list.txt" 2>&1 || fail "symbols list failed"
grep -q "^$want .*cn-plain 1/1 named" "$dir/list.txt" ||
    fail "symbols list does not show cn-plain: $(cat "$dir/list.txt")"
kill "$dpid"
wait "$dpid" 2>/dev/null || true

echo "ok: names through the agent for cn-1 and cn-2 (one download, build-id $bid); none without it; coverage $c1% vs $cp% in query nodes and /metrics; cn-plain re-symbolized after an upload"
