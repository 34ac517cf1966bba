#!/bin/sh
# What collectors sharing one PostgreSQL do once for all of them (issue 19):
#  - symbols: a build one collector symbolized is read back from the
#    database's symbol cache by another, not symbolized again;
#  - retention: two collectors with retention due both try; one runs it
#    (the advisory lock of store/pg-fleet.c), the other says in its log that
#    it skipped; the old snapshots are gone, deleted once, the rest kept.
#   shared.sh COLLECTOR FAKENODE QUERY
set -eu
C=$(realpath "$1")
F=$(realpath "$2")
Q=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfshared.XXXXXX)
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
pg_start "$T/pg"
cd "$T"
sql() { pg_psql -c "$1"; }
# Wait (at most $2 tenths of a second) until the shell condition $1 holds.
wait_for() {
    i=0
    while ! eval "$1"; do
        [ $i -lt "$2" ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}
# No symbol file caches outside the test, no debuginfod: the collectors have
# the binaries on this host (the maps' paths) and the database.
HOME="$T/home"
DEBUGINFOD_URLS=""
export HOME DEBUGINFOD_URLS
mkdir -p "$HOME"

# Twelve nodes of one build: one fakenode process serving the same dump
# (--cache) on twelve ports, so all name exactly the same addresses.
"$F" --list be.list --dir dumps --cache starrocksx12 >ports.txt 2>fakenode.err &
PIDS="$PIDS $!"
wait_for 'grep -qs ready ports.txt' 200 || fail "fakenode did not start: $(cat fakenode.err)"
grep 'name=starrocks-ok-1 ' be.list >a.list
grep 'name=starrocks-ok-2 ' be.list >b.list

# ---- the symbol cache: one collector symbolizes, another reads ----
# Each polls its one node alone: a collector that stopped cleanly signs off
# (stopped, not alive), so the next one's round does not leave the other's
# node to it.
once() {
    "$C" --nodes "$1.list" --db "$PGURI" --once --collector-id "$2" --listen off \
        --retain 0 --thin-after 0 --no-progress --log-level debug >"$2.log" 2>&1 ||
        fail "collector $2 --once failed"
    "$Q" collectors --db "$PGURI" | grep -q "^$2 .* stopped" ||
        fail "collector $2 not stopped after its clean exit: $("$Q" collectors --db "$PGURI")"
}
# READ and WRITTEN: symcache_read and symcache_written of the collector's
# one poll (collector/sink-store.c logs them per symbolized profile).
symcache() {
    line=$(grep 'msg="symbolized"' "$1.log") || fail "$1: no symbolization line in its log"
    [ "$(echo "$line" | wc -l)" = 1 ] || fail "$1: more than one poll: $line"
    READ=$(echo "$line" | sed -n 's/.* symcache_read=\([0-9]*\) .*/\1/p')
    WRITTEN=$(echo "$line" | sed -n 's/.* symcache_written=\([0-9]*\) .*/\1/p')
    [ -n "$READ" ] && [ -n "$WRITTEN" ] || fail "$1: $line"
}
cache_rows() { sql "SELECT count(*) || ' ' || coalesce(max(created_at), 0) FROM symbol_cache"; }
once a sa
symcache sa
[ "$READ" = 0 ] || fail "sa read $READ addresses from an empty symbol cache"
[ "$WRITTEN" -gt 0 ] || fail "sa wrote nothing to the symbol cache (no DWARF in fakenode?)"
written=$WRITTEN
rows=$(cache_rows)
[ "${rows%% *}" = "$written" ] || fail "symbol_cache has $rows rows, sa wrote $written"
once b sb
symcache sb
[ "$WRITTEN" = 0 ] || fail "sb symbolized the build again: wrote $WRITTEN cache rows"
[ "$READ" = "$written" ] || fail "sb read $READ addresses from the cache, sa wrote $written"
[ "$(cache_rows)" = "$rows" ] || fail "symbol_cache rewritten: $rows -> $(cache_rows)"
# And sb's snapshot is named from it as well as sa's.
"$Q" top starrocks-ok-1 --db "$PGURI" --top 0 --format collapsed >top-a.txt
"$Q" top starrocks-ok-2 --db "$PGURI" --top 0 --format collapsed >top-b.txt
grep -q 'tablet_schema_cache_grow' top-b.txt || fail "sb's snapshot is not named: $(head -3 top-b.txt)"
cmp -s top-a.txt top-b.txt || fail "the same dump is named differently: $(diff top-a.txt top-b.txt | head)"
echo "ok: sa symbolized the build ($written addresses); sb read all $written from the database"

# ---- retention by one collector at a time ----
# Old snapshots (100 and 50 days) and a recent one, beside the two above;
# one per node, since an import skips bytes the node already has stored.
port=$(sed -n 's/^starrocks-ok-1 starrocks ok \([0-9]*\)$/\1/p' ports.txt)
curl -fsS -o d.heap "http://127.0.0.1:$port/pprof/heap" || fail "no dump from fakenode"
now=$(date +%s)
ago() { date -u -d "@$((now - $1 * 86400))" +%Y-%m-%dT%H:%M:%SZ; }
for nd in gone-1:100 gone-2:100 gone-3:50 gone-4:50 kept-1:1; do
    "$Q" import --db "$PGURI" --node ${nd%:*} --time "$(ago ${nd#*:})" d.heap >/dev/null 2>&1 ||
        fail "import $nd"
done
cutoff=$(((now - 30 * 86400) * 1000))
[ "$(sql "SELECT count(*) FROM snapshots WHERE taken_at < $cutoff")" = 4 ] ||
    fail "the old snapshots were not imported"
keep=$(sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM snapshots WHERE taken_at >= $cutoff")

# The retaining collector must still be retaining when the other one tries:
# a transaction of the test's holds the old rows (FOR UPDATE), so the first
# collector's delete waits, advisory lock held, until the holder is
# cancelled. Without it the second would simply come after the first.
"$PG_BIN/psql" -X -q -h "$PG_DIR" -U heapfleet -d heapfleet -v ON_ERROR_STOP=1 \
    -c "SET application_name = 'hf-holder'" \
    -c "BEGIN" -c "SELECT id FROM snapshots WHERE taken_at < $cutoff FOR UPDATE" \
    -c "SELECT pg_sleep(600)" -c "COMMIT" >holder.log 2>&1 &
HOLDER=$!
PIDS="$PIDS $HOLDER"
holder_sleeps() {
    [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hf-holder'
              AND wait_event = 'PgSleep'")" = 1 ]
}
wait_for holder_sleeps 300 || fail "the holder did not lock the old rows: $(cat holder.log)"
# pg-fleet.c's LOCK_RETAIN, 0x4850464c0003, as pg_locks shows a bigint key.
retain_lock="locktype = 'advisory' AND classid = 18512 AND objid = 1179385859 AND objsubid = 1"
# Both with all twelve nodes: rendezvous hashing gives each a share (the
# hash of fixed names and ids: the same shares every run). Rounds sharing a
# fleet start on multiples of the interval: a short one starts soon.
daemon() {
    "$C" --nodes "$1.list" --db "$PGURI" --interval 5s --spread 0 --collector-id "$2" \
        --listen off --retain 30d --thin-after 0 --no-progress >"$2.log" 2>&1 &
    PIDS="$PIDS $!"
}
daemon be c1
# c1 took the lock and waits on the holder's rows.
c1_retaining() {
    [ "$(sql "SELECT count(*) FROM pg_locks WHERE $retain_lock AND granted")" = 1 ] &&
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
                  AND query LIKE 'DELETE%'")" -ge 1 ]
}
wait_for c1_retaining 300 || fail "c1 did not start retaining"
daemon be c2
wait_for 'grep -qs "retention skipped" c2.log' 300 || fail "c2 did not say it skipped retention"
# query retain meanwhile: it says so too, and deletes nothing.
"$Q" retain --retain 30d --db "$PGURI" >qretain.txt 2>&1 || fail "query retain: $(cat qretain.txt)"
grep -q "^retention skipped" qretain.txt || fail "query retain did not skip: $(cat qretain.txt)"
[ "$(sql "SELECT count(*) FROM snapshots WHERE taken_at < $cutoff")" = 4 ] ||
    fail "old snapshots deleted while c1 was held"
sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'hf-holder'" \
    >/dev/null
wait "$HOLDER" 2>/dev/null || true
wait_for 'grep -qs "msg=\"retention\"" c1.log' 300 || fail "c1 did not finish retention"
grep -q 'deleted=4 .*msg="retention"' c1.log || fail "c1: $(grep 'msg="retention' c1.log)"
grep -q 'msg="retention"' c2.log && fail "c2 retained too: $(grep retention c2.log)"
grep -q 'retention failed' c1.log c2.log && fail "retention failed"
[ "$(sql "SELECT count(*) FROM snapshots WHERE taken_at < $cutoff")" = 0 ] ||
    fail "old snapshots left after retention"
[ "$(sql "SELECT count(*) FROM pg_locks WHERE $retain_lock")" = 0 ] ||
    fail "the retention lock is still held"
# Everything newer stays (the two polls above, kept-1's snapshot, and
# whatever c1 and c2 have stored since).
left=$(sql "SELECT count(*) FROM snapshots WHERE id IN ($keep)")
[ "$left" = "$(echo "$keep" | tr ',' '\n' | wc -l)" ] || fail "newer snapshots lost: $keep, $left left"
"$Q" snapshots kept-1 --all --db "$PGURI" >kept.txt 2>&1 || fail "query snapshots kept-1"
grep -q "$(ago 1)" kept.txt || fail "kept-1: $(cat kept.txt)"
"$Q" snapshots gone-1 --all --db "$PGURI" >gone.txt 2>&1 || true
grep -q "$(ago 100)" gone.txt && fail "gone-1 still listed: $(cat gone.txt)"
echo "ok: c1 retained (4 old snapshots deleted once); c2 and query retain skipped"
