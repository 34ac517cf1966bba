#!/bin/sh
# Round trips of the PostgreSQL writer (issue 19): a snapshot's stacks
# (thousands per profile) must cost a bounded number of statements, not one
# or two per stack, since each is a round trip to the server while the
# fleet-wide write lock is held. Counted by the server (pg_stat_statements)
# over two collector rounds of fake nodes with 2,600 stacks each: new
# stacks are inserted in one statement and not looked up when they name a
# location inserted with them; stored ones are found with one. Then the
# stacks table must hold the same rows, ids included, as SQLite's after the
# same rounds (bulk inserts keep profile order).
#   round-trips.sh COLLECTOR FAKENODE
set -eu
C=$(realpath "$1")
F=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfroundtrips.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${KEEP:-}" ] || pg_stop
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
    exit 1
}
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 shell" >&2; exit 77; }
PG_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
pg_start "$T/pg"
cd "$T"
sql() { pg_psql -c "$1"; }
sql "CREATE EXTENSION pg_stat_statements" >/dev/null

"$F" --list be.list --dir dumps --cache --stacks 2600 starrocksx4 >ports.txt 2>fakenode.err &
PIDS="$PIDS $!"
i=0
while ! grep -qs ready ports.txt; do
    [ $i -lt 600 ] || fail "fakenode did not start: $(cat fakenode.err)"
    sleep 0.1
    i=$((i + 1))
done

# One node at a time, so both engines store the profiles in the same order;
# two rounds, each by a new collector process (its caches empty), the
# second in the next round of the 2 s interval (claims are per round).
stacks_sql() {
    sql "SELECT coalesce(sum(calls) FILTER (WHERE query ~* '^\s*SELECT .* FROM stacks'), 0) || ' ' ||
                coalesce(sum(calls) FILTER (WHERE query ~* '^\s*INSERT INTO stacks'), 0)
         FROM pg_stat_statements"
}
for db in "$PGURI" "$T/s.db"; do
    for round in 1 2; do
        [ "$db" = "$PGURI" ] && sql "SELECT pg_stat_statements_reset()" >/dev/null
        "$C" --nodes be.list --db "$db" --once --interval 2s --listen off --retain 0 \
            --thin-after 0 --no-progress --max-inflight 1 >round.out 2>collector.log ||
            fail "collector round $round on $db: $(cat round.out)"
        grep -q '4 ok' round.out || fail "round $round on $db: $(cat round.out)"
        [ "$db" = "$PGURI" ] && eval "stmts$round=\"$(stacks_sql)\""
        sleep 2.1
    done
done
stacks=$(sql "SELECT count(*) FROM stacks")
[ "$stacks" -ge 4000 ] || fail "only $stacks stacks: the fake nodes' profiles are too small"
echo "statements on stacks (lookups inserts): first round $stmts1, second round $stmts2"
# First round: every stack names a location just inserted (each fake node
# has objects of its own), so it cannot be stored yet: one insert per
# snapshot and no lookup. Second round: all stored, one lookup each.
[ "$stmts1" = "0 4" ] ||
    fail "first round: $stmts1 lookups and inserts of stacks for 4 new snapshots, expected 0 4"
[ "$stmts2" = "4 0" ] ||
    fail "second round: $stmts2 lookups and inserts of stacks for 4 snapshots, expected 4 0"

sql "SELECT id, hash, depth, encode(locs_packed, 'hex') FROM stacks ORDER BY id" >pg.stacks
sqlite3 -separator '|' s.db \
    "SELECT id, hash, depth, lower(hex(locs_packed)) FROM stacks ORDER BY id" >sq.stacks
[ "$(wc -l <sq.stacks)" = "$stacks" ] || fail "SQLite has $(wc -l <sq.stacks) stacks, PostgreSQL $stacks"
cmp -s pg.stacks sq.stacks || fail "stacks differ: $(diff pg.stacks sq.stacks | head -n 4)"
echo ok
