#!/bin/sh
# Uploaded symbols live in the store itself, on SQLite and on PostgreSQL
# (issue 15): `query symbols add` run from another folder and another home
# (another host, as far as the files go) reaches a running collector only
# through the database. The program runs from a folder the collectors
# cannot see (an empty tmpfs over it in a mount namespace) and its node has
# no agent for symbols, so:
#  1. collector A (a round every 2 s) stores snapshots with addresses only;
#  2. `query symbols add` (cwd and HOME of its own) puts the program into
#     the store; A re-derives the stored snapshots in the background, logs
#     it, and the first snapshot's note says so;
#  3. with A's local copy of the uploads removed, collector B (new HOME, new
#     folder) stores the next dump named at once, from the store's files.
# usage: symbols-store.sh sqlite|pg AGENT COLLECTOR QUERY JEFIXTURE
set -eu
engine=$1
agent=$(realpath "$2") collector=$(realpath "$3") query=$(realpath "$4") jefixture=$(realpath "$5")
HERE=$(cd "$(dirname "$0")" && pwd)
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: unshare -m not permitted here"
    exit 77
fi
dir=$(mktemp -d /tmp/hfsymstore.XXXXXX)
chmod 755 "$dir"
. "$HERE/hidden-env.sh"
[ "$engine" = pg ] && cleanup_extra=pg_stop

case $engine in
sqlite) db="$dir/hf.db" ;;
pg)
    . "$HERE/../pg/pg-env.sh"
    pg_start "$dir/pg"
    db=$PGURI
    ;;
*) fail "engine $engine (expected sqlite or pg)" ;;
esac
export DEBUGINFOD_URLS=""
mkdir -p "$dir/node/bin" "$dir/rw" "$dir/a" "$dir/b" "$dir/q" "$dir/home-a" "$dir/home-b" \
    "$dir/home-q" "$dir/ci"
cp "$jefixture" "$dir/node/bin/jefixture"
cp "$jefixture" "$dir/ci/jefixture"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$dir/node/bin/jefixture" "$dir/rw/compute-node.4242.0.i0.heap"

"$agent" --dumps "$dir/rw" --listen 127.0.0.1:0 > "$dir/agent.log" 2>&1 &
pids="$pids $!"
wait_for "$dir/agent.log" 'msg="listening"'
aport=$(port_of "$dir/agent.log")
# A url node: no agent to ask for the program.
echo "url http://127.0.0.1:$aport/dumps/newest?prefix=compute-node name=cn-1" > "$dir/be.list"

(cd "$dir/a" && HOME="$dir/home-a" hidden_bg "$collector" --nodes "$dir/be.list" --interval 2s \
    --spread 0 --db "$db" --listen off --lease 1s --collector-id a --log-level debug) \
    > "$dir/a.log" 2>&1 &
apid=$!
pids="$pids $apid"
wait_for "$dir/a.log" 'msg="round finished"' 600
(cd "$dir/q" && HOME="$dir/home-q" hidden "$query" top cn-1 --db "$db" --top 0) > "$dir/before.txt" 2>&1 ||
    fail "query top failed: $(cat "$dir/before.txt")"
grep -q tracked_alloc "$dir/before.txt" && fail "named before any upload"

(cd "$dir/q" && HOME="$dir/home-q" "$query" symbols add --db "$db" "$dir/ci/jefixture") \
    > "$dir/add.txt" 2>&1 || fail "symbols add failed: $(cat "$dir/add.txt")"
bid=$(readelf -n "$jefixture" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
grep -q "^added $bid " "$dir/add.txt" || fail "add did not report the build: $(cat "$dir/add.txt")"
# The upload went into the database, not into a folder beside query.
[ -z "$(find "$dir/q" "$dir/home-q" -type f)" ] ||
    fail "symbols add left files outside the store: $(find "$dir/q" "$dir/home-q" -type f)"

wait_for "$dir/a.log" 're-symbolized [0-9]* snapshots\{0,1\} of build jefixture: now [0-9]*% named'
# The first snapshot (#1), stored before the upload.
(cd "$dir/q" && HOME="$dir/home-q" hidden "$query" top '#1' --db "$db" --top 0) > "$dir/after.txt" 2>&1 ||
    fail "query top failed"
grep -q tracked_alloc "$dir/after.txt" || fail "not named after the upload: $(head -n 12 "$dir/after.txt")"
grep -q 're-symbolized .*now [0-9]*% named (was [0-9]*%)' "$dir/after.txt" ||
    fail "the snapshot does not say it was re-symbolized: $(grep -A3 Note "$dir/after.txt")"
(cd "$dir/q" && HOME="$dir/home-q" "$query" symbols list --db "$db") > "$dir/list.txt" 2>&1 ||
    fail "symbols list failed: $(cat "$dir/list.txt")"
grep -q "^$bid .* yes  *jefixture  *cn-1 \([0-9]*\)/\1 named$" "$dir/list.txt" ||
    fail "symbols list does not show the build: $(cat "$dir/list.txt")"
kill "$apid"
wait "$apid" 2>/dev/null || true

# Collector B: nothing local, A's copy of the uploads gone (on SQLite it sits
# beside the database); its next dump is named when stored.
if [ "$engine" = sqlite ]; then
    [ -d "$db.symbols" ] || fail "collector A mirrored nothing into $db.symbols"
    rm -rf "$db.symbols"
else
    [ -n "$(find "$dir/home-a" -name jefixture)" ] || fail "collector A mirrored nothing into its home"
    # A was stopped with a signal: it signs off (stopped), or, past its
    # shutdown grace, counts as alive until its lease ends (dead).
    i=0
    until "$query" collectors --db "$db" 2>/dev/null | grep -q '^a .* \(dead\|stopped\)'; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "collector a neither stopped nor dead after its lease"
        sleep 0.1
    done
fi
MALLOC_CONF=prof:true,lg_prof_sample:0 "$dir/node/bin/jefixture" "$dir/rw/compute-node.4242.1.i1.heap"
(cd "$dir/b" && HOME="$dir/home-b" hidden "$collector" --nodes "$dir/be.list" --once --db "$db" \
    --listen off --lease 1s --collector-id b --log-level debug) > "$dir/b.log" 2>&1 ||
    fail "collector b --once failed"
(cd "$dir/q" && HOME="$dir/home-q" hidden "$query" top cn-1 --db "$db" --top 0) > "$dir/b.txt" 2>&1 ||
    fail "query top failed"
grep -q tracked_alloc "$dir/b.txt" || fail "collector b stored its snapshot unnamed: $(head -n 12 "$dir/b.txt")"
grep -q 're-symbolized' "$dir/b.txt" && fail "b's snapshot was re-symbolized, not named when stored"
# Its frames may come from the locations A named (shared by all snapshots):
# that B had the program itself shows in its own copy of the uploads.
if [ "$engine" = sqlite ]; then
    cmp -s "$db.symbols/jefixture" "$jefixture" || fail "collector b did not copy the upload from the store"
else
    f=$(find "$dir/home-b" -name jefixture | head -n 1)
    [ -n "$f" ] && cmp -s "$f" "$jefixture" || fail "collector b did not copy the upload from the store"
fi
echo "ok ($engine): upload reached collector a through the store only (re-symbolized in the background); collector b named its snapshot from the store's files"
