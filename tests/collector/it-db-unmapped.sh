#!/bin/sh
# The collector's memory must not grow with its database. Its background
# re-symbolization reads every snapshot of the last 7 days when it starts;
# through a memory-mapped reader those pages stayed in the process's RSS
# (+10 MB at 2,000 snapshots, up to the 256 MB map at fleet scale). A
# collector on a database with snapshots: once its first round finished
# (the walk runs at start), the database file must not be mapped into it
# (the -shm WAL index is mapped by design).
#
#   sh tests/collector/it-db-unmapped.sh COLLECTOR FAKENODE
set -eu
C=$1
F=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/hf-unmapped.XXXXXX")
FN= CP=
cleanup() {
    for p in $CP $FN; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$F" --cache --vary --stacks 100 --list "$T/be.list" --dir "$T/dumps" starrocksx4 \
    >"$T/ports.txt" 2>"$T/fakenode.err" &
FN=$!
i=0
until grep -q ready "$T/ports.txt" 2>/dev/null; do
    [ $i -lt 300 ] || fail "fakenode did not start: $(cat "$T/fakenode.err")"
    sleep 0.1
    i=$((i + 1))
done
for r in 1 2 3; do
    "$C" --nodes "$T/be.list" --once --no-progress --listen off --db "$T/hf.db" >/dev/null 2>"$T/once.log" ||
        fail "round $r: $(tail -n 3 "$T/once.log")"
done
"$C" --nodes "$T/be.list" --interval 1h --spread 0 --no-progress --listen off --db "$T/hf.db" \
    >/dev/null 2>"$T/c.log" &
CP=$!
i=0
until grep -q 'msg="round finished"' "$T/c.log" 2>/dev/null; do
    kill -0 "$CP" 2>/dev/null || fail "the collector exited: $(tail -n 3 "$T/c.log")"
    [ $i -lt 300 ] || fail "no round finished in 30 s: $(tail -n 3 "$T/c.log")"
    sleep 0.1
    i=$((i + 1))
done
# Watched for 2 s more: a map appears with the first page the walk reads.
i=0
while [ $i -lt 20 ]; do
    if grep -q "$T/hf.db\$" "/proc/$CP/maps"; then
        fail "the database is mapped into the collector (RssFile $(awk '/RssFile/ { print $2, $3 }' "/proc/$CP/status")): $(grep "$T/hf.db\$" "/proc/$CP/maps" | head -n 1)"
    fi
    sleep 0.1
    i=$((i + 1))
done
echo "ok: 12 snapshots, the database not mapped (RssFile $(awk '/RssFile/ { print $2, $3 }' "/proc/$CP/status"))"
