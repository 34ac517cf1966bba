#!/bin/sh
# A "snapshot" log line means the snapshot is in the store (the reliability
# suite's SIGKILLs check it). The first record of a run broke it: retention,
# which runs first, committed "the open batch" (none yet) and marked every
# record so far settled, this one included, before it was written. With a
# second node still in flight the write batch stays open, so the line went
# out seconds before its commit, and a kill in between lost a snapshot that
# was logged as stored (1 kill in ~10 of tests/bench/sigkill.sh).
# A collector with one answering node and one that hangs: kill -9 it as soon
# as the first "snapshot" line appears; that snapshot must be in the database.
# And it must appear soon: the batch was committed only when no poll was in
# flight, so the hanging node (30 s timeout) held the other's snapshot back,
# unlogged and unseen by readers, for 30 s; now it is committed after 1 s.
#
#   sh tests/collector/it-first-logged.sh COLLECTOR FAKENODE
set -eu
C=$1
F=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/hf-first-logged.XXXXXX")
FN= CP=
cleanup() {
    for p in $CP $FN; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "SKIP: needs sqlite3"; exit 77; }
"$F" --list "$T/be.list" --dir "$T/dumps" starrocks starrocks:hang >"$T/ports.txt" 2>"$T/fakenode.err" &
FN=$!
i=0
until grep -q ready "$T/ports.txt" 2>/dev/null; do
    [ $i -lt 300 ] || fail "fakenode did not start: $(cat "$T/fakenode.err")"
    sleep 0.1
    i=$((i + 1))
done
"$C" --nodes "$T/be.list" --interval 1h --spread 0 --timeout 30s --retries 0 --no-progress \
    --listen off --db "$T/hf.db" >/dev/null 2>"$T/c.log" &
CP=$!
i=0
until grep -q 'status=ok .*msg="snapshot"' "$T/c.log" 2>/dev/null; do
    kill -0 "$CP" 2>/dev/null || fail "the collector exited: $(tail -n 3 "$T/c.log")"
    [ $i -lt 200 ] || fail "no snapshot logged in 10 s (a node hangs 30 s): $(tail -n 3 "$T/c.log")"
    sleep 0.05
    i=$((i + 1))
done
kill -9 "$CP"
wait "$CP" 2>/dev/null || true
CP=
stored=$(sqlite3 "$T/hf.db" "SELECT count(*) FROM snapshots WHERE status = 'ok'")
[ "$stored" -ge 1 ] ||
    fail "the collector logged a snapshot as stored, was killed, and the database holds $stored: $(grep 'msg="snapshot"' "$T/c.log" | head -n 1)"
echo "ok: logged, killed, and in the database ($stored)"
