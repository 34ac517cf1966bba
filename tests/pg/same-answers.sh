#!/bin/sh
# Same answers on both engines: the same dumps imported into an SQLite file
# and into PostgreSQL 15 (a throwaway cluster, pg-env.sh); every query
# command, in every format, must print byte-identical output from both, and
# a failed attempt and errors included. Then a collector on each database
# serves the HTTP API, and every endpoint (web/params.c's route table) must
# answer byte-identically too: status, content type and body.
#   same-answers.sh QUERY JEFIXTURE COLLECTOR
set -eu
Q=$(realpath "$1")
J=$(realpath "$2")
C=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfsame.XXXXXX)
CPIDS=""
cleanup() {
    for p in $CPIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pg_stop
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pg_start "$T/pg"
cd "$T"

# Three nodes, four dumps each, growing (jefixture's leak path keeps what it
# allocates): enough for trend, leaks and fleet to say something.
now=$(date +%s)
at() { date -u -d "@$((now - $1 * 3600))" +%Y-%m-%dT%H:%M:%SZ; }
for n in 1 2 3; do
    MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 2 --scale $n \
        be$n-1.heap be$n-2.heap be$n-3.heap be$n-4.heap
done
printf 'not a profile\n' >junk.heap
for db in "$T/s.db" "$PGURI"; do
    for n in 1 2 3; do
        for k in 1 2 3 4; do
            "$Q" import --db "$db" --node be$n --kind doris --time "$(at $((5 - k)))" \
                be$n-$k.heap >/dev/null
        done
    done
    "$Q" import --db "$db" --node be2 --time "$(at 0)" junk.heap >/dev/null 2>&1 &&
        fail "junk imported"
done

# Every command twice; the outputs must match byte for byte and say something.
n=0
same() {
    n=$((n + 1))
    "$Q" "$@" --db "$T/s.db" >a.$n 2>&1 || echo "exit $?" >>a.$n
    "$Q" "$@" --db "$PGURI" >b.$n 2>&1 || echo "exit $?" >>b.$n
    [ -s a.$n ] || fail "query $*: no output"
    sed "s|$PGURI|DB|g" b.$n >b2.$n
    sed "s|$T/s.db|DB|g" a.$n >a2.$n
    cmp -s a2.$n b2.$n || { diff a2.$n b2.$n | head -20 >&2; fail "query $*: SQLite and PostgreSQL differ"; }
}
same nodes
for b in be1 be2 be3; do
    same snapshots $b
    same snapshots $b --all
done
for f in text json collapsed; do
    same top be1 --format $f
    same top "be2@$(at 2)" --format $f
    same top '#5' --format $f
done
for f in collapsed json dot svg pprof; do
    same export be3 --format $f
done
for f in text json; do
    same diff "be1@$(at 3)" be1 --format $f
    same diff be1 be3 --format $f
    same leaks be1 --since 2d --format $f
    same leaks --since 2d --format $f
    same fleet --since 2d --format $f
    same discrepancy be2 --format $f
done
for f in text csv json; do
    same trend be1 --since 2d --format $f
    same trend --fleet --since 2d --format $f
    same trend be2 --since 2d --function 'leak' --format $f
done
same top nosuchnode
same top "be1@$(at 100)"

echo "ok: $n query outputs byte-identical on SQLite and PostgreSQL"

# ---- the HTTP API ----
# A collector on each database, with no node of its own to poll (an empty
# list: the data is what was imported above, and stays so), serving the API
# on a port of its choosing. The web UI's files are left out (API only).
# Nothing is normalised here: unlike the CLI, the API never names the
# database (not its file, not its URI), so even error bodies must match.
# There is no /api/v1/functions: the function page reads /trend?function=.
printf '# no nodes: the collector only serves the API\n' >none.list
start_api() {
    "$C" --nodes none.list --db "$1" --interval 1h --listen 127.0.0.1:0 --static none \
        --no-progress >"$2.log" 2>&1 &
    pid=$!
    CPIDS="$CPIDS $pid"
    i=0
    while [ $i -lt 300 ] && ! grep -qs 'url=http://127.0.0.1:[0-9]*/' "$2.log"; do
        kill -0 $pid 2>/dev/null || fail "collector on $2 exited: $(cat "$2.log")"
        sleep 0.1
        i=$((i + 1))
    done
    port=$(sed -n 's/.*url=http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$2.log" | head -n 1)
    [ -n "$port" ] || fail "no API port in the log of the collector on $2: $(cat "$2.log")"
}
start_api "$T/s.db" sqlite
PA=$port
start_api "$PGURI" pg
PB=$port

m=0
api() {
    m=$((m + 1))
    for e in a:$PA b:$PB; do
        curl -sS -o "${e%:*}.$m.body" -w '%{http_code} %{content_type}\n' \
            "http://127.0.0.1:${e#*:}/api/v1$1" >"${e%:*}.$m.head" ||
            fail "GET $1: curl failed"
    done
    [ -s a.$m.body ] || fail "GET $1: empty body"
    cat a.$m.head a.$m.body >A.$m
    cat b.$m.head b.$m.body >B.$m
    cmp -s A.$m B.$m || { diff A.$m B.$m | head -20 >&2; fail "GET $1: SQLite and PostgreSQL differ"; }
}
api ""
api /nodes
api "/nodes?spark=4"
for b in be1 be2 be3; do
    api /nodes/$b/snapshots
    api "/nodes/$b/snapshots?since=2d&limit=2"
    api "/nodes/$b/snapshots?points=2"
    api /snapshots/$b
done
for sel in be1 "be2@$(at 2)" %235 "be3@%3C%3D$(at 3)"; do
    api "/snapshots/$sel"
    api "/snapshots/$sel/top"
    api "/snapshots/$sel/top?sample=inuse_objects&top=3&focus=leak"
    api "/snapshots/$sel/top?ignore=main&lines=1&keep_allocator=1&no_inline=1"
    api "/snapshots/$sel/tree"
    api "/snapshots/$sel/tree?prune=0.05&sample=inuse_objects"
    for f in json collapsed text pprof svg dot; do
        api "/snapshots/$sel/profile?format=$f"
    done
done
api "/snapshots/be1/profile?format=text&download=1"
for f in json text collapsed svg; do
    api "/diff?a=be1@$(at 3)&b=be1&format=$f"
    api "/diff?a=be1&b=be3&format=$f"
done
api "/diff?a=be1&b=be3&normalize=1&top=4&prune=0.01"
api "/diff?a=%231&b=%2312&sample=inuse_objects&download=1&format=text"
for b in be1 be2 be3; do
    api "/trend?node=$b&since=2d"
    api "/trend?node=$b&since=2d&function=leak&limit=3"
    api "/leaks?node=$b&since=2d"
    api "/leaks?node=$b&since=2d&top=2&sample=inuse_objects&limit=3"
    api "/discrepancy?node=$b"
done
api "/fleet?since=2d"
api "/fleet?since=2d&sample=inuse_objects&top=2"
api /symbolization
# Errors in words, from the store on both: no such node or snapshot, no
# snapshot that old, a node with too few snapshots for leaks.
api /snapshots/nosuchnode
api "/snapshots/be1@$(at 100)"
api /snapshots/%23999
api "/diff?a=be1&b=nosuchnode"
api "/leaks?node=be1&since=90m"
api "/trend?node=nosuchnode"
api /nodes/nosuchnode/snapshots
echo "ok: $m API answers byte-identical on SQLite and PostgreSQL"
