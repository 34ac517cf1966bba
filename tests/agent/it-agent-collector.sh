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

# delete_after_fetch=yes: Doris writes a new dump on every /jeheap/dump and
# never deletes one; the agent deletes each once the collector stored it.
ndumps() { find "$dir/doris" -maxdepth 1 -name '*.heap' | wc -l; }
before=$(ndumps)
"$collector" --nodes "$dir/be.list" --once --db "$dir/hf.db" --listen off > "$dir/keep.log" 2>&1 ||
    fail "collector --once (without delete) failed"
[ "$(ndumps)" -eq $((before + 1)) ] || fail "without delete_after_fetch the new dump should stay ($before -> $(ndumps))"
sed "s|^\(doris .*\)\$| \1 delete_after_fetch=yes|; s|^ doris|doris|" "$dir/be.list" > "$dir/delete.list"
grep -q 'delete_after_fetch=yes' "$dir/delete.list" || fail "delete.list not written"
before=$(ndumps)
"$collector" --nodes "$dir/delete.list" --once --db "$dir/hf.db" --listen off --log-level info \
    > "$dir/delete.log" 2>&1 || fail "collector --once with delete_after_fetch failed"
grep -q 'msg="agent deleted the stored dump"' "$dir/delete.log" || fail "no deletion logged"
[ "$(ndumps)" -eq "$before" ] || fail "the stored dump was not deleted ($before -> $(ndumps))"
"$query" snapshots "$doris" --db "$dir/hf.db" > "$dir/doris-snaps.txt" 2>&1
[ "$(grep -Ec '^ *[0-9]+ ' "$dir/doris-snaps.txt")" -ge 3 ] || fail "the deleted dump was not stored first"
# Only files the agent serves, only with the token, only by POST.
tok=$(cat "$dir/token")
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" \
    "http://127.0.0.1:$aport/dumps/delete?path=/etc/passwd")
[ "$code" = 403 ] || fail "deleting /etc/passwd answered $code, not 403"
victim=$(find "$dir/rw" -maxdepth 1 -name '*.heap' | head -n 1)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$aport/dumps/delete?path=$victim")
[ "$code" = 401 ] || fail "deleting without the token answered $code, not 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" \
    "http://127.0.0.1:$aport/dumps/delete?path=$victim")
[ "$code" = 405 ] || fail "deleting with GET answered $code, not 405"
[ -f "$victim" ] || fail "a refused delete removed $victim"

# The agent serves TLS (--tls-cert/--tls-key) with a certificate from a
# private CA; the collector trusts it through ca_file=.
if command -v openssl >/dev/null; then
    (
        cd "$dir" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca
        openssl req -newkey rsa:2048 -nodes -keyout agent.key -out agent.csr -subj /CN=127.0.0.1
        printf 'subjectAltName=IP:127.0.0.1\n' > agent.ext
        openssl x509 -req -in agent.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out agent.pem \
            -days 1 -extfile agent.ext
    ) > "$dir/openssl.log" 2>&1 || fail "openssl could not make the certificates"
    "$agent" --dumps "$dir/rw" --listen 127.0.0.1:0 --token-file "$dir/token" \
        --tls-cert "$dir/agent.pem" --tls-key "$dir/agent.key" > "$dir/agent-tls.log" 2>&1 &
    pids="$pids $!"
    wait_for "$dir/agent-tls.log" 'msg="listening"'
    grep -q 'tls=yes' "$dir/agent-tls.log" || fail "the agent does not say it serves TLS"
    tport=$(sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*listening.*/\1/p' "$dir/agent-tls.log" | head -n 1)
    curl -sf --cacert "$dir/ca.pem" "https://127.0.0.1:$tport/health" | grep -q ok ||
        fail "GET https://.../health with the CA failed"
    cat > "$dir/tls.list" <<EOF2
agent 127.0.0.1:$tport name=rw-tls prefix=compute-node token_file=$dir/token ca_file=$dir/ca.pem
agent 127.0.0.1:$tport name=rw-plain prefix=compute-node token_file=$dir/token
EOF2
    "$collector" --nodes "$dir/tls.list" --once --db "$dir/hf4.db" --listen off --retries 0 \
        > "$dir/tls.log" 2>&1 || true
    "$query" nodes --db "$dir/hf4.db" > "$dir/tls-nodes.txt"
    grep -q '^rw-tls .* ok$' "$dir/tls-nodes.txt" || fail "rw-tls not stored ok over TLS: $(cat "$dir/tls-nodes.txt")"
    grep -q '^rw-plain .* ok$' "$dir/tls-nodes.txt" && fail "plain HTTP to the TLS agent succeeded"
    tls_note="; agent TLS with a private CA"
else
    tls_note="; agent TLS skipped (no openssl)"
fi

echo "ok: agent + collector stored and symbolized rw-cn-1 and $doris; 401 without token; /metrics; delete_after_fetch$tls_note"
