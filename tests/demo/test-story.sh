#!/bin/bash
# The demo's story end to end (issue 17): runs tests/demo/story.sh with the
# real nodes, agent and collector on loopback (the UI on a port the OS picks)
# for STORY_SECONDS, then checks from the command line that each part of the
# story shows: the leak suspect is named, the outlier node is named, the
# tracker disagreement is shown, the restart happened and is stored, the
# failing node's reason is recorded, and the steady nodes are not flagged.
#
#   test-story.sh STORY_SH BUILD_DIR
set -u
story=$1
build=$2
query=$build/query/query
work=$(mktemp -d "${TMPDIR:-/tmp}/hf-demo-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
ok() { echo "ok - $*"; }
not_ok() {
    echo "not ok - $*"
    fails=$((fails + 1))
}
# expect WHAT OUTPUT_FILE REGEX
expect() {
    if grep -Eq -- "$3" "$2"; then ok "$1"; else
        not_ok "$1: no match for /$3/ in:"
        sed 's/^/    /' "$2" | cut -c1-200 | head -40
    fi
}
reject() {
    if grep -Eq -- "$3" "$2"; then
        not_ok "$1: /$3/ matched in:"
        grep -E -- "$3" "$2" | cut -c1-200 | sed 's/^/    /' | head -10
    else ok "$1"; fi
}

# The live part polls every 10 s (POLL_INTERVAL; the demo's 30 s would make
# this test wait minutes for the same polls) and databend-q-1 restarts 10 s
# in. The story runs until a round that started after the restarted node was
# up has finished: every node polled twice at least, databend-q-1 in both its
# lifetimes. STORY_SECONDS bounds it.
POLL_INTERVAL=${POLL_INTERVAL:-10s} RESTART_AFTER=${RESTART_AFTER:-10} HISTORY=${HISTORY:-12} \
    sh "$story" "$build" "$work" 127.0.0.1:0 "${STORY_SECONDS:-240}" >"$work/story.out" 2>&1 &
story_pid=$!
clog=$work/collector.log
rounds_before=""
while kill -0 "$story_pid" 2>/dev/null; do
    if [ -z "$rounds_before" ] && [ -s "$work/databend-q-1.restarted" ]; then
        rounds_before=$(grep -c 'msg="round started"' "$clog")
    fi
    [ -n "$rounds_before" ] &&
        [ "$(grep -c 'msg="round finished"' "$clog")" -gt "$rounds_before" ] && break
    sleep 0.5
done
if kill -0 "$story_pid" 2>/dev/null; then
    # stopped here: its trap stops the nodes and the collector (which
    # closes the database) and exits 130
    kill -TERM "$story_pid"
    wait "$story_pid"
    rc=$?
    [ $rc = 130 ] && ok "story.sh ran until a round after the restart finished" ||
        { not_ok "story.sh exit $rc when stopped"; tail -30 "$work/story.out"; }
else
    wait "$story_pid"
    rc=$?
    not_ok "story.sh ended (exit $rc) before a round after the restart finished"
    tail -30 "$work/story.out"
fi
db=$work/heapfleet.db

expect "the tour names every part" "$work/story.out" \
    "leak .*doris-be-2"
expect "the tour gives the query commands" "$work/story.out" "query leaks --db"

# Leak: doris-be-2's metadata cache, and only it.
"$query" leaks --db "$db" >"$work/leaks.txt" 2>&1
expect "leak suspect named on doris-be-2" <(awk '/^Node doris-be-2/{p=1;next} /^Node /{p=0} p' \
    "$work/leaks.txt") "doris::TabletSchema::init_from_pb"
for n in doris-be-1 sr-be-1 sr-be-2 sr-be-3 rw-cn-1; do
    awk -v n="$n" '$0 ~ "^Node "n":"{p=1;print;next} /^Node /{p=0} p' "$work/leaks.txt" \
        >"$work/leaks-$n.txt"
    expect "steady node $n has no leak suspect" "$work/leaks-$n.txt" "No steadily growing"
done

# Outlier: sr-be-2's hash join, far above the fleet median.
"$query" fleet --db "$db" >"$work/fleet.txt" 2>&1
expect "outlier node named" "$work/fleet.txt" "^sr-be-2 holds .* against a fleet median"
expect "outlier's call path named" "$work/fleet.txt" "sr-be-2 .*starrocks::JoinHashTable::build"
reject "no other node is an outlier" "$work/fleet.txt" \
    "^(doris-be-1|doris-be-2|sr-be-1|sr-be-3|databend-q-1|rw-cn-1) holds .* in its heap"

# Tracker disagreement: sr-be-3's query tracker reads far less than its heap.
"$query" discrepancy sr-be-3 --db "$db" >"$work/disc3.txt" 2>&1
expect "sr-be-3: tracker figures were polled" "$work/disc3.txt" \
    "tracked [0-9.]+ MiB \(starrocks_be_process_mem_bytes\)"
expect "sr-be-3: the query tracker under-counts" "$work/disc3.txt" "^query .*tracker under-counts"
expect "sr-be-3: held in the join build" "$work/disc3.txt" "held in: starrocks::JoinHashTable::build"
"$query" discrepancy sr-be-1 --db "$db" >"$work/disc1.txt" 2>&1
expect "sr-be-1: tracker figures were polled" "$work/disc1.txt" "tracked [0-9.]+ MiB"
reject "sr-be-1: the query category agrees" "$work/disc1.txt" "^query .*under-counts"

# Failure with a reason: sr-be-4 answers with a login page.
"$query" nodes --db "$db" >"$work/nodes.txt" 2>&1
expect "failing node's reason recorded" "$work/nodes.txt" "^sr-be-4 .*HTML page instead of a heap dump"
for n in doris-be-1 doris-be-2 sr-be-1 sr-be-2 sr-be-3 databend-q-1 rw-cn-1; do
    expect "$n polled live" "$work/nodes.txt" "^$n +[a-z]+ +127\.0\.0\.1:[0-9]+ .* ok$"
done

# Restart: databend-q-1 ran as two processes; both are in the store.
expect "databend-q-1 restarted" "$work/databend-q-1.log" "^restart "
"$query" trend databend-q-1 --db "$db" >"$work/trend.txt" 2>&1
expect "databend-q-1 has a trend" "$work/trend.txt" "databend-q-1"
"$query" leaks databend-q-1 --db "$db" >"$work/leaks-restart.txt" 2>&1
expect "databend-q-1's restart is marked" "$work/leaks-restart.txt" "restarts:"

# The collector's UI answered on the port the OS picked.
expect "collector served the UI" "$work/collector.log" "url=http://127.0.0.1:[0-9]+/"

if [ $fails -gt 0 ]; then
    echo "# $fails failed; story output:"
    tail -20 "$work/story.out"
    exit 1
fi
