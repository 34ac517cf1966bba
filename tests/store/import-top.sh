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

# Outputs name their snapshot (text: the first line; JSON: "snapshot"), so
# that part differs between a file and its stored copy; the rest must not.
unname() {
    case $1 in
    text) tail -n +2 ;;
    json) jq -S 'del(.snapshot)' ;;
    *) cat ;;
    esac
}
for fmt in text collapsed json; do
    "$Q" top --format $fmt a.heap | unname $fmt >file-a.$fmt
    "$Q" top --format $fmt b.heap | unname $fmt >file-b.$fmt
    "$Q" top --format $fmt fx@2025-11-22T08:30:00Z | unname $fmt >db-a.$fmt
    "$Q" top --format $fmt '#2' | unname $fmt >db-b.$fmt
    "$Q" top --format $fmt fx | unname $fmt >db-latest.$fmt
    "$Q" top --format $fmt fx@-1h | unname $fmt >db-rel.$fmt
    cmp file-a.$fmt db-a.$fmt || fail "top --format $fmt: stored a differs from the file"
    cmp file-b.$fmt db-b.$fmt || fail "top --format $fmt: #2 differs from the file"
    cmp file-b.$fmt db-latest.$fmt || fail "top --format $fmt: NODE is not the latest"
    cmp file-b.$fmt db-rel.$fmt || fail "top --format $fmt: NODE@-1h"
done
cmp file-a.text file-b.text >/dev/null && fail "the two dumps should differ"
"$Q" top fx | head -n 1 | grep -q "^#2 fx at 2025-11-22T09:00:00Z$" ||
    fail "top does not name its snapshot: $("$Q" top fx | head -n 1)"
"$Q" top --format json fx | jq -e '.snapshot == {"id":2,"node":"fx","time":"2025-11-22T09:00:00Z"}' \
    >/dev/null || fail "JSON snapshot: $("$Q" top --format json fx | jq -c .snapshot)"
"$Q" diff fx@2025-11-22T08:30:00Z fx >diff.txt
grep -q "fx@2025-11-22T08:30:00Z = #1 fx at 2025-11-22T08:00:00Z" diff.txt ||
    fail "diff does not name side A: $(head -n 5 diff.txt)"
grep -q "fx = #2 fx at 2025-11-22T09:00:00Z" diff.txt || fail "diff does not name side B"
"$Q" top --format svg fx | grep -q "#2 fx at 2025-11-22T09:00:00Z" || fail "SVG title"

"$Q" diff --format json fx@2025-11-22T08:30:00Z fx >diff.json
jq -e '.a.snapshot == {"id":1,"node":"fx","time":"2025-11-22T08:00:00Z"} and
       .b.snapshot == {"id":2,"node":"fx","time":"2025-11-22T09:00:00Z"}' diff.json >/dev/null ||
    fail "diff JSON does not name both snapshots: $(jq -c '[.a.snapshot, .b.snapshot]' diff.json)"
"$Q" discrepancy --format json fx@2025-11-22T08:30:00Z 2>/dev/null >disc.json
jq -e '.snapshot == {"id":1,"node":"fx","time":"2025-11-22T08:00:00Z"}' disc.json >/dev/null ||
    fail "discrepancy JSON snapshot: $(jq -c .snapshot disc.json)"
"$Q" discrepancy --format json '#2' 2>/dev/null | jq -e '.snapshot.id == 2' >/dev/null ||
    fail "discrepancy of #2"
"$Q" export --format pprof fx >fx.pb.gz
if command -v go >/dev/null; then
    go tool pprof -raw fx.pb.gz 2>/dev/null | grep -q "^Comment: #2 fx at 2025-11-22T09:00:00Z$" ||
        fail "pprof export does not name its snapshot in a comment (go tool pprof -raw)"
fi

# export --raw gives the dumps back as imported, byte for byte (in the store
# the second is a line delta of the first, store/ldelta.c); a file is its
# own raw dump.
"$Q" export --raw fx@2025-11-22T08:30:00Z >raw-a.heap
"$Q" export --raw '#2' >raw-b.heap
cmp a.heap raw-a.heap || fail "export --raw of #1 is not a.heap"
cmp b.heap raw-b.heap || fail "export --raw of #2 is not b.heap"
"$Q" export --raw a.heap | cmp - a.heap || fail "export --raw of a file"

# The same dump again is the same snapshot: skipped, and said so.
"$Q" import --node fx --time 2025-11-22T10:00:00Z a.heap 2>dup.txt
grep -q "already stored as #1 fx@2025-11-22T08:00:00Z (same content)" dup.txt ||
    fail "duplicate import: $(cat dup.txt)"
[ "$("$Q" snapshots fx | grep -c ' ok ')" = 2 ] || fail "duplicate made a snapshot"

# A time after now matches no snapshot: an error, unless asked "at or before".
if "$Q" top fx@2030-01-01 2>err.txt; then fail "future selector accepted"; fi
grep -q "is in the future" err.txt || fail "future selector: $(cat err.txt)"
grep -q "the newest snapshot is older than asked" err.txt || fail "future selector: $(cat err.txt)"
"$Q" top --format text 'fx@<=2030-01-01' | unname text >db-le.text
cmp file-b.text db-le.text || fail "fx@<=2030-01-01 is not the latest"

# discrepancy takes the node's stored kind for its rules, --kind overrides it,
# an unknown kind is refused.
"$Q" discrepancy fx 2>/dev/null | grep -q "^Rules: doris$" || fail "stored kind not used"
"$Q" discrepancy fx --kind databend 2>/dev/null | grep -q "^Rules: databend$" ||
    fail "--kind not used"
if "$Q" discrepancy fx --kind dorris 2>err.txt; then fail "unknown --kind accepted"; fi
grep -q 'expected doris, starrocks, databend or risingwave' err.txt || fail "kind: $(cat err.txt)"

# An unreadable time names the selector once.
if "$Q" top fx@teatime 2>err.txt; then fail "unreadable time accepted"; fi
[ "$(grep -o '"fx@teatime"' err.txt | wc -l)" = 1 ] || fail "selector named twice: $(cat err.txt)"

# Not found anywhere: a clear message, non-zero exit.
if "$Q" top nosuchnode 2>err.txt; then fail "unknown selector accepted"; fi
grep -q "no such file" err.txt || fail "unclear message: $(cat err.txt)"
if "$Q" top fx@2020-01-01 2>err.txt; then fail "time before any snapshot accepted"; fi
grep -q 'the oldest snapshot of node "fx" (#1 at 2025-11-22T08:00:00Z) is newer than asked (2020-01-01T00:00:00Z)' err.txt ||
    fail "unclear message: $(cat err.txt)"

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
# What the node sent can be read back to see what went wrong.
junk_id=$(awk '/parse_failed/ { print $1 }' snaps.txt)
"$Q" export --raw "#$junk_id" | cmp - junk.heap || fail "export --raw of the failed attempt"

# Reindex re-derives the two profiles (the junk still fails), top unchanged.
if "$Q" reindex 2>err.txt; then fail "reindex of junk succeeded"; fi
grep -q "2 reindexed, 1 failed" err.txt || fail "reindex: $(cat err.txt)"
"$Q" top fx | unname text >after.text
cmp file-b.text after.text || fail "top changed after reindex"

# A folder imports every file in it, with progress.
mkdir dumps
cp a.heap dumps/1.heap
cp b.heap dumps/2.heap
touch -d 2025-11-22T08:00:00Z dumps/1.heap dumps/2.heap
"$Q" import --node fy dumps 2>imp.txt
grep -q "2 imported, 0 failed" imp.txt || fail "folder import: $(cat imp.txt)"
grep -q "2 files got the same time 2025-11-22T08:00:00Z" imp.txt ||
    fail "same-time import not noted: $(cat imp.txt)"

# Doris names its dumps jeheap_dump.<unix time>.<pid>.<rand>.heap: with no
# --time and no time in the content, the name dates each dump (a copy has
# reset every mtime to one value) and its pid marks the process lifetime.
mkdir doris
for i in 0 1 2 3 4 5; do
    pid=4100
    [ $i -ge 3 ] && pid=4200
    MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 1 --scale $((i % 3 + 1)) \
        "doris/jeheap_dump.$((1764000000 + i * 3600)).$pid.$((i * 7)).heap" >/dev/null
done
echo "not a dump" >doris/be.INFO
touch -d 2025-11-22T08:00:00Z doris/*
"$Q" import --node fd doris 2>imp-doris.txt
grep -q "6 imported" imp-doris.txt || fail "doris folder import: $(cat imp-doris.txt)"
grep -q "same time" imp-doris.txt && fail "names' times not used: $(cat imp-doris.txt)"
"$Q" snapshots fd >snaps-doris.txt
grep -q "2025-11-24T16:00:00Z" snaps-doris.txt ||
    fail "first dump not dated from its name: $(cat snaps-doris.txt)"
grep -q "2025-11-24T21:00:00Z" snaps-doris.txt ||
    fail "last dump not dated from its name: $(cat snaps-doris.txt)"
"$Q" leaks fd --format json >leaks-doris.json
[ "$(jq '.nodes[0].lifetimes | length' leaks-doris.json)" = 2 ] ||
    fail "the pid in the names splits no lifetimes: $(jq -c '.nodes[0].lifetimes' leaks-doris.json)"
jq -e '.nodes[0].lifetimes[1].restart == "pid 4100 -> 4200"' leaks-doris.json >/dev/null ||
    fail "restart reason: $(jq -c '.nodes[0].lifetimes[1]' leaks-doris.json)"

# Retention keeps recent data and reclaims nothing it should not.
"$Q" retain --retain 100000d --thin-after 0 >ret.txt
grep -q "^0 snapshots deleted" ret.txt || fail "retain: $(cat ret.txt)"

# A --db that is not a database is refused clearly.
printf 'garbage garbage garbage garbage garbage garbage garbage garbage\n' >bad.db
if "$Q" nodes --db bad.db 2>err.txt; then fail "garbage --db accepted"; fi
grep -q "not an SQLite database" err.txt || fail "bad --db: $(cat err.txt)"
echo "import-top: ok"
