#!/bin/sh
# The API's /leaks over a store answers what `query leaks NODE` prints from
# it, byte for byte: both read the node's stored snapshots by stack ids
# (query/stored.h), all of them since `since` (the API used to load and
# fold the newest 50 profiles, and so saw another window than the CLI).
# 56 hourly dumps of one growing jefixture process, imported into SQLite; a
# collector serving the API from that file. The raw dumps come back byte for
# byte.
#   leaks-store-same-as-cli.sh QUERY JEFIXTURE COLLECTOR
set -eu
Q=$(realpath "$1")
J=$(realpath "$2")
C=$(realpath "$3")
T=$(mktemp -d /tmp/hfleaksapi.XXXXXX)
CPID=""
cleanup() {
    [ -z "$CPID" ] || kill "$CPID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T"

N=56
now=$(date +%s)
names=""
k=1
while [ $k -le $N ]; do
    names="$names d$k.heap"
    k=$((k + 1))
done
# shellcheck disable=SC2086
MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 2 $names >/dev/null
k=1
while [ $k -le $N ]; do
    at=$(date -u -d "@$((now - (N + 1 - k) * 3600))" +%Y-%m-%dT%H:%M:%SZ)
    "$Q" import --db s.db --node be1 --kind doris --time "$at" d$k.heap >/dev/null
    k=$((k + 1))
done

printf '# no nodes: the collector only serves the API\n' >none.list
"$C" --nodes none.list --db s.db --interval 1h --listen 127.0.0.1:0 --static none \
    --no-progress >c.log 2>&1 &
CPID=$!
i=0
while [ $i -lt 300 ] && ! grep -qs 'url=http://127.0.0.1:[0-9]*/' c.log; do
    kill -0 $CPID 2>/dev/null || fail "collector exited: $(cat c.log)"
    sleep 0.1
    i=$((i + 1))
done
port=$(sed -n 's/.*url=http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' c.log | head -n 1)
[ -n "$port" ] || fail "no API port in the collector's log: $(cat c.log)"

# /snapshots/SEL/raw: the dumps as imported, byte for byte (#1 the oldest; in
# the store each is a line delta of the one before), as `query export --raw`
# gives them.
curl -sS -o raw.first "http://127.0.0.1:$port/api/v1/snapshots/%231/raw" || fail "raw: curl failed"
cmp raw.first d1.heap || fail "GET /api/v1/snapshots/%231/raw is not d1.heap"
curl -sS -D raw.hdr -o raw.last "http://127.0.0.1:$port/api/v1/snapshots/be1/raw?download=1" ||
    fail "raw: curl failed"
cmp raw.last d$N.heap || fail "GET /api/v1/snapshots/be1/raw is not the latest dump"
"$Q" export --raw be1 --db s.db | cmp - raw.last || fail "query export --raw differs from the API"
tr -d '\r' <raw.hdr | grep -qi "^content-disposition: attachment; filename=\"be1-$N.heap\"$" ||
    fail "raw download: $(cat raw.hdr)"
code=$(curl -sS -o raw.404 -w '%{http_code}' "http://127.0.0.1:$port/api/v1/snapshots/nosuch/raw")
[ "$code" = 404 ] && grep -q nosuch raw.404 || fail "raw of an unknown node: HTTP $code $(cat raw.404)"

# check NAME QUERY_STRING CLI_OPTIONS...: the API's body equals the CLI's output.
check() {
    name=$1
    qs=$2
    shift 2
    curl -sS -o "api.$name" "http://127.0.0.1:$port/api/v1/leaks?node=be1$qs" ||
        fail "$name: curl failed"
    "$Q" leaks be1 --db s.db --format json "$@" >"cli.$name" || fail "$name: query leaks failed"
    cmp -s "api.$name" "cli.$name" || {
        diff "api.$name" "cli.$name" | head -20 >&2
        fail "$name: /api/v1/leaks and query leaks differ"
    }
}
check all "" --top 0
grep -q "\"snapshots\": $N," api.all || fail "all: not every one of the $N snapshots read"
grep -q '"rate_per_hour"' api.all || fail "all: no suspect named (nothing to compare)"
check window "&since=1830m&top=3&sample=inuse_objects" --since 1830m --top 3 \
    --sample inuse_objects
grep -q '"snapshots": 30,' api.window || fail "window: not the 30 snapshots of the last 30 h"
check limit "&limit=10" --top 0 --since 630m
grep -q '"snapshots": 10,' api.limit || fail "limit: not the newest 10 snapshots"

# /trend: the API's body equals `query trend`'s; both take the function
# columns from the stored function totals and load no profile (a year of
# hourly snapshots took the profile path 40 s and 19 GB). With every
# sample set unreadable, both still chart the node: the last check.
trend() {
    name=$1
    qs=$2
    shift 2
    code=$(curl -sS -o "api.$name" -w '%{http_code}' "http://127.0.0.1:$port/api/v1/trend?node=be1$qs") ||
        fail "trend $name: curl failed"
    [ "$code" = 200 ] || fail "trend $name: HTTP $code: $(cat "api.$name")"
    "$Q" trend be1 --db s.db --format json "$@" >"cli.$name" 2>&1 ||
        fail "trend $name: query trend failed: $(cat "cli.$name")"
}
trend top ""
cmp -s api.top cli.top || { diff api.top cli.top | head -20 >&2; fail "/api/v1/trend and query trend differ"; }
grep -q '"fn:' api.top || fail "trend: no function column (nothing to compare)"
[ "$(grep -c '"time_unix"' api.top)" = $N ] || fail "trend: not every one of the $N snapshots"
sqlite3 s.db "UPDATE sample_sets SET data = x'ff'"
trend unreadable "&function=leak" --function leak
cmp -s api.unreadable cli.unreadable || {
    diff api.unreadable cli.unreadable | head -20 >&2
    fail "/api/v1/trend and query trend differ without profiles"
}
grep -q '"fn:' api.unreadable || fail "trend --function leak: no function column"
echo "ok: /api/v1/leaks and query leaks, /api/v1/trend and query trend agree on $N stored snapshots"
