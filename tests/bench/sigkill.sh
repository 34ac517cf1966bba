#!/bin/bash
# sigkill: KILLS times, start the real collector on one database with NODES
# fake nodes (real jemalloc dumps, a new one per request) and the web API
# being queried, SIGKILL it at a random point of its round, then check the
# database: PRAGMA integrity_check is ok, and every snapshot the collector
# logged as stored (status=ok ... msg="snapshot", logged after the store
# committed) is in it: per node, the stored ok snapshots are at least the
# logged ones. In `meson test`: sigkill-short (4 kills, 10 nodes) by default,
# sigkill-100 with `--setup long --suite long`; or by hand:
#
#   tests/bench/sigkill.sh [--smoke] [BUILD_DIR] [KILLS] [NODES]
#                                            (default: build 100 50)
#
# --smoke: 3 kills of an 8-node collector, each 0.3 to 2 s after its web
# server came up: the same steps and checks in seconds (CI runs it: suite
# bench-smoke).
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then
    SMOKE=1
    shift
fi
BUILD=${1:-build}
KILLS=${2:-100}
NODES=${3:-50}
# The kill lands 0.3 s to KILL_WINDOW s after the web server came up.
KILL_WINDOW=6
# Stacks per dump (fakenode --stacks): ~1 MB dumps, as collector-bench's, so
# that a round of 50 lasts seconds and most kills land inside one (with the
# small default dumps a round took ~0.2 s: 1 kill of 100 was mid-round).
STACKS_DEFAULT=2600
if [ -n "$SMOKE" ]; then
    KILLS=${2:-3}
    NODES=${3:-8}
    STACKS_DEFAULT=16
    KILL_WINDOW=2
fi
COLLECTOR=$BUILD/collector/bin/collector
FAKENODE=$BUILD/tests/collector/fakenode
for b in "$COLLECTOR" "$FAKENODE"; do
    [ -x "$b" ] || { echo "sigkill: $b not built (ninja -C $BUILD)" >&2; exit 2; }
done
command -v sqlite3 >/dev/null || { echo "sigkill: needs sqlite3" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hp-sigkill.XXXXXX")
FN= C= Q=
cleanup() {
    for p in $C $Q $FN; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${HP_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
"$FAKENODE" --list "$WORK/be.list" --dir "$WORK/dumps" --stacks "${STACKS:-$STACKS_DEFAULT}" "starrocksx$NODES" \
    >"$WORK/ports.txt" 2>"$WORK/fakenode.err" &
FN=$!
end=$((SECONDS + 60))
until grep -q ready "$WORK/ports.txt" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { echo "sigkill: fakenode did not start" >&2; exit 1; }
    sleep 0.1
done
DB=$WORK/hf.db
bad=0 mid_round=0 t_start=$SECONDS
for i in $(seq 1 "$KILLS"); do
    log=$WORK/log.$i
    "$COLLECTOR" --nodes "$WORK/be.list" --interval 2s --spread 0 --db "$DB" \
        --listen 127.0.0.1:0 --static none --no-progress >/dev/null 2>"$log" &
    C=$!
    end=$((SECONDS + 30))
    until grep -q 'msg="serving the API and UI"' "$log" 2>/dev/null; do
        [ $SECONDS -ge $end ] && { echo "sigkill: collector $i did not start: $(tail -n 3 "$log")" >&2; exit 1; }
        sleep 0.02
    done
    port=$(sed -n 's/.*url=http:\/\/[^:]*:\([0-9]*\)\/.*/\1/p' "$log" | head -n 1)
    (while :; do curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$port/api/v1/nodes" || true; done) &
    Q=$!
    # a random point: 0.3 to 6 s after the web server came up (a round of
    # 50 real dumps takes seconds on a loaded machine)
    sleep "$(awk -v s="$RANDOM" -v w="$KILL_WINDOW" 'BEGIN { srand(s); printf "%.3f", 0.3 + rand() * (w - 0.3) }')"
    kill -9 "$C"
    wait "$C" 2>/dev/null || true
    kill "$Q" 2>/dev/null || true
    wait "$Q" 2>/dev/null || true
    C= Q=
    # mid-round: the last round the log tells of had started, not finished
    [ "$(grep -o 'msg="round [a-z]*"' "$log" | tail -n 1)" = 'msg="round started"' ] &&
        mid_round=$((mid_round + 1))
    ic=$(sqlite3 "$DB" 'PRAGMA integrity_check' 2>&1)
    if [ "$ic" != ok ]; then
        echo "kill $i: integrity_check: $ic"
        bad=$((bad + 1))
    fi
    # logged as stored, per node, over every run so far
    cat "$WORK"/log.* | sed -n 's/.* node=\([^ ]*\) .* status=ok .*msg="snapshot".*/\1/p' | sort | uniq -c |
        awk '{ print $2, $1 }' | sort >"$WORK/logged"
    sqlite3 -separator ' ' "$DB" "SELECT n.name, count(*) FROM snapshots s JOIN nodes n ON n.id = s.node_id WHERE s.status = 'ok' GROUP BY n.name" |
        sort >"$WORK/stored"
    missing=$(join -a 1 -e 0 -o 0,1.2,2.2 "$WORK/logged" "$WORK/stored" | awk '$3 < $2 { print }')
    if [ -n "$missing" ]; then
        echo "kill $i: logged as stored but missing (node logged stored): $missing"
        bad=$((bad + 1))
    fi
done
logged=$(awk '{ s += $2 } END { print s + 0 }' "$WORK/logged")
stored=$(sqlite3 "$DB" "SELECT count(*) FROM snapshots WHERE status = 'ok'")
echo "kills=$KILLS nodes=$NODES mid_round=$mid_round logged_stored=$logged in_db_ok=$stored failures=$bad secs=$((SECONDS - t_start))"
printf 'RESULT\tsigkill: kills with a damaged or short db (of %d)\t%d\tkills\t0\t-\t-\n' "$KILLS" "$bad"
[ "$bad" -eq 0 ]
