#!/bin/sh
# End to end through the `query` executable on real jemalloc dumps:
# import, then `query top` of stored snapshots (NODE, NODE@TIME, #ID) must
# print exactly what `query top FILE` prints for the same dump, in every
# format; bad input is recorded, reindex re-derives, a bad --db is refused.
#   import-top.sh QUERY JEFIXTURE
set -eu
Q=$1
J=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }

MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 2 a.heap b.heap
export HEAPFLEET_DB="$T/h.db"
"$Q" import --node fx --kind doris --time 2025-11-22T08:00:00Z a.heap
"$Q" import --node fx --time 2025-11-22T09:00:00Z b.heap

for fmt in text collapsed json; do
    "$Q" top --format $fmt a.heap >file-a.$fmt
    "$Q" top --format $fmt b.heap >file-b.$fmt
    "$Q" top --format $fmt fx@2025-11-22T08:30:00Z >db-a.$fmt
    "$Q" top --format $fmt '#2' >db-b.$fmt
    "$Q" top --format $fmt fx >db-latest.$fmt
    "$Q" top --format $fmt fx@-1h >db-rel.$fmt
    cmp file-a.$fmt db-a.$fmt || fail "top --format $fmt: stored a differs from the file"
    cmp file-b.$fmt db-b.$fmt || fail "top --format $fmt: #2 differs from the file"
    cmp file-b.$fmt db-latest.$fmt || fail "top --format $fmt: NODE is not the latest"
    cmp file-b.$fmt db-rel.$fmt || fail "top --format $fmt: NODE@-1h"
done
cmp file-a.text file-b.text >/dev/null && fail "the two dumps should differ"

# Not found anywhere: a clear message, non-zero exit.
if "$Q" top nosuchnode 2>err.txt; then fail "unknown selector accepted"; fi
grep -q "no such file" err.txt || fail "unclear message: $(cat err.txt)"
if "$Q" top fx@2020-01-01 2>err.txt; then fail "time before any snapshot accepted"; fi
grep -q "no stored profile at or before" err.txt || fail "unclear message: $(cat err.txt)"

# Garbage is kept as a failed attempt with its bytes, and listed.
printf 'this is not a heap profile\n' >junk.heap
if "$Q" import --node fx --time 2025-11-22T10:00:00Z junk.heap 2>err.txt; then
    fail "garbage import succeeded"
fi
grep -q "raw bytes kept" err.txt || fail "import error: $(cat err.txt)"
"$Q" snapshots fx --all >snaps.txt
grep -q "parse_failed" snaps.txt || fail "failed attempt not listed: $(cat snaps.txt)"
[ "$(grep -c ' ok ' snaps.txt)" = 2 ] || fail "expected 2 ok snapshots: $(cat snaps.txt)"
"$Q" nodes >nodes.txt
grep -q "^fx .*doris .*parse_failed" nodes.txt || fail "nodes: $(cat nodes.txt)"

# Reindex re-derives the two profiles (the junk still fails), top unchanged.
if "$Q" reindex 2>err.txt; then fail "reindex of junk succeeded"; fi
grep -q "2 reindexed, 1 failed" err.txt || fail "reindex: $(cat err.txt)"
"$Q" top fx >after.text
cmp file-b.text after.text || fail "top changed after reindex"

# A folder imports every file in it, with progress.
mkdir dumps
cp a.heap dumps/1.heap
cp b.heap dumps/2.heap
"$Q" import --node fy dumps 2>imp.txt
grep -q "2 imported, 0 failed" imp.txt || fail "folder import: $(cat imp.txt)"

# Retention keeps recent data and reclaims nothing it should not.
"$Q" retain --retain 100000d --thin-after 0 >ret.txt
grep -q "^0 snapshots deleted" ret.txt || fail "retain: $(cat ret.txt)"

# A --db that is not a database is refused clearly.
printf 'garbage garbage garbage garbage garbage garbage garbage garbage\n' >bad.db
if "$Q" nodes --db bad.db 2>err.txt; then fail "garbage --db accepted"; fi
grep -q "not an SQLite database" err.txt || fail "bad --db: $(cat err.txt)"
echo "import-top: ok"
