#!/bin/sh
# The demo fleet's story, for `sh deploy/run.sh demo` and the demo test.
#
#   story.sh BUILD_DIR WORK_DIR LISTEN [SECONDS] [--history-only]
#
# Starts eight demo nodes on loopback (dbnode: Doris and StarRocks BEs in C++;
# rsnode: a Databend query node and a RisingWave compute node in Rust; one
# agent serving the Doris and RisingWave dump folders), all linked with
# Debian's jemalloc with profiling on:
#
#   doris-be-1    steady
#   doris-be-2    leaks: its tablet-schema metadata cache never evicts
#   sr-be-1       steady
#   sr-be-2       holds far more than the fleet: one big hash join
#   sr-be-3       its query tracker under-counts (the join build is untracked)
#   sr-be-4       fails: an HTML login page answers instead of the BE
#   databend-q-1  restarts mid-demo (after RESTART_AFTER seconds, default 75)
#   rw-cn-1       steady, dumps written to a folder and served by the agent
#
# Then it writes a backdated history: HISTORY dumps per node (default 12),
# one every 15 minutes of the past, taken from the live processes as their
# workload advances, imported with `query import`, so trends and leaks have
# hours of data at once. Then the collector polls the live nodes every 30 s
# (POLL_INTERVAL, a collector --interval; the tests poll more often) (SQLite
# + web UI on LISTEN) while the workload keeps ticking, and the tour is
# printed. SECONDS bounds the run; without it Ctrl-C stops. WORK_DIR holds
# the database (heapfleet.db), be.list, the nodes' logs and tour.txt.
set -eu
build=$1
work=$2
listen=$3
seconds=${4:-}
history_only=${5:-}
history=${HISTORY:-12}
restart_after=${RESTART_AFTER:-75}
poll_interval=${POLL_INTERVAL:-30s}
scale=${DEMO_SCALE:-1048576}
db=$work/heapfleet.db
query=$build/query/query
mkdir -p "$work/doris" "$work/rw" "$work/tmp"
pids=""
cleanup() {
    # the restarted node is a child of the ticker subshell: its pid file
    # names it
    [ -f "$work/databend-q-1.pid" ] && pids="$pids $(cat "$work/databend-q-1.pid")"
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s\n' "demo: $*" >&2; }

# wait_ready FILE: the "ready ..." line a node prints once it listens.
wait_ready() {
    i=0
    while ! grep -q '^ready' "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -ge 300 ]; then
            say "a node did not start: $(cat "$1" "${1%.out}.log" 2>/dev/null)"
            exit 1
        fi
        sleep 0.1
    done
}
field() { sed -n "s/^ready.* $2=\([0-9]*\).*/\1/p" "$1"; }

# start NAME COMMAND...: runs a node, remembers its pid in WORK/NAME.pid
# (nodes warm up in parallel; wait_ready waits for each).
start() {
    name=$1
    shift
    : >"$work/$name.out"
    "$@" >"$work/$name.out" 2>>"$work/$name.log" &
    echo $! >"$work/$name.pid"
    pids="$pids $!"
}

je="prof:true,prof_active:true,lg_prof_sample:16"
db_node() { # NAME KIND ROLE
    start "$1" "$build/tests/demo/dbnode" --kind "$2" --role "$3" --dir "$work/doris" \
        --tick 0 --scale "$scale"
}
db_node doris-be-1 doris steady
db_node doris-be-2 doris leak
db_node sr-be-1 starrocks steady
db_node sr-be-2 starrocks bigjoin
db_node sr-be-3 starrocks undercount
db_node sr-be-4 starrocks login
start_databend() { # [PORT METRICS_PORT]
    start databend-q-1 env MALLOC_CONF="$je" "$build/tests/demo/rsnode" --kind databend \
        --dir "$work/tmp" --tick 0 --scale "$scale" ${1:+--port "$1" --metrics-port "$2"}
}
start_databend
start rw-cn-1 env MALLOC_CONF="$je,prof_prefix:$work/rw/compute-node" \
    "$build/tests/demo/rsnode" --kind risingwave --dir "$work/rw" --tick 0 --scale "$scale"

for n in doris-be-1 doris-be-2 sr-be-1 sr-be-2 sr-be-3 sr-be-4 databend-q-1 rw-cn-1; do
    wait_ready "$work/$n.out"
done

# One agent for both dump folders (a real fleet runs one per host).
"$build/agent/agent" --dumps "$work/doris,$work/rw" --listen 127.0.0.1:0 \
    >"$work/agent.out" 2>"$work/agent.log" &
pids="$pids $!"
i=0
while ! agent_port=$(sed -n 's/.*addr=[0-9.]*:\([0-9][0-9]*\) .*listening.*/\1/p' "$work/agent.log") ||
    [ -z "$agent_port" ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { say "the agent did not start: $(cat "$work/agent.log")"; exit 1; }
    sleep 0.1
done

port() { field "$work/$1.out" http; }
agent=127.0.0.1:$agent_port
cat >"$work/be.list" <<EOF
# The demo fleet (tests/demo/story.sh): real processes on loopback.
doris 127.0.0.1:$(port doris-be-1) name=doris-be-1 agent=$agent activate=yes brpc=127.0.0.1:$(field "$work/doris-be-1.out" brpc) cluster=doris
doris 127.0.0.1:$(port doris-be-2) name=doris-be-2 agent=$agent activate=yes brpc=127.0.0.1:$(field "$work/doris-be-2.out" brpc) cluster=doris
starrocks 127.0.0.1:$(port sr-be-1) name=sr-be-1 cluster=starrocks
starrocks 127.0.0.1:$(port sr-be-2) name=sr-be-2 cluster=starrocks
starrocks 127.0.0.1:$(port sr-be-3) name=sr-be-3 cluster=starrocks
starrocks 127.0.0.1:$(port sr-be-4) name=sr-be-4 cluster=starrocks
databend 127.0.0.1:$(port databend-q-1) name=databend-q-1 metrics=127.0.0.1:$(field "$work/databend-q-1.out" metrics) cluster=databend
agent $agent name=rw-cn-1 prefix=compute-node metrics=127.0.0.1:$(field "$work/rw-cn-1.out" metrics) cluster=risingwave
EOF

# tick_all [MINUTES]: one tick of every node's workload, standing for
# MINUTES of its life (default 15: one backdated step), so the leak grows
# along the clock in the past and live alike.
tick_all() {
    for n in doris-be-1 doris-be-2 sr-be-1 sr-be-2 sr-be-3 databend-q-1 rw-cn-1; do
        curl -fsS -o /dev/null "http://127.0.0.1:$(port $n)/demo/tick?minutes=${1:-15}" || true
    done
}
# RisingWave dumps into its folder when asked (the dashboard's "dump heap
# profile"); the agent serves the newest.
rw_dump() { curl -fsS -o /dev/null "http://127.0.0.1:$(port rw-cn-1)/demo/dump"; }

# ---- the backdated past: real dumps of the live processes, stored with
# times 15 minutes apart ending 15 minutes ago.
say "writing $history backdated dumps per node (the last $((history * 15)) minutes)"
now=$(date +%s)
k=$history
while [ "$k" -ge 1 ]; do
    tick_all
    t=$((now - k * 900))
    for n in doris-be-1 doris-be-2; do
        mkdir -p "$work/hist/$n"
        path=$(curl -fsS "http://127.0.0.1:$(port $n)/jeheap/dump" | sed -n 's/.*dump file path: //p')
        [ -n "$path" ] && mv "$path" "$work/hist/$n/$k.heap"
    done
    for n in sr-be-1 sr-be-2 sr-be-3; do
        mkdir -p "$work/hist/$n"
        curl -fsS -o "$work/hist/$n/$k.heap" "http://127.0.0.1:$(port $n)/pprof/heap"
    done
    mkdir -p "$work/hist/databend-q-1" "$work/hist/rw-cn-1"
    curl -fsS -o "$work/hist/databend-q-1/$k.heap" \
        "http://127.0.0.1:$(port databend-q-1)/debug/mem/pprof/profile"
    rw_dump
    newest=$(ls -t "$work/rw"/compute-node.*.heap | head -1)
    mv "$newest" "$work/hist/rw-cn-1/$k.heap"
    for f in "$work"/hist/*/"$k.heap"; do touch -d "@$t" "$f"; done
    k=$((k - 1))
done
for n in doris-be-1:doris doris-be-2:doris sr-be-1:starrocks sr-be-2:starrocks \
    sr-be-3:starrocks databend-q-1:databend rw-cn-1:agent; do
    "$query" import --db "$db" --node "${n%%:*}" --kind "${n#*:}" "$work/hist/${n%%:*}" \
        >>"$work/import.log" 2>&1 || { say "import failed: $(tail -5 "$work/import.log")"; exit 1; }
done
rw_dump
[ "$history_only" = "--history-only" ] && exit 0

# ---- live: the workload ticks every 10 s; one node restarts.
(
    started=$(date +%s)
    restarted=no
    while :; do
        sleep 10
        tick_all 0.1667
        rw_dump || true
        # keep the folders small: the newest few dumps of each kind
        for f in $(ls -t "$work"/rw/*.heap 2>/dev/null | tail -n +6) \
            $(ls -t "$work"/doris/*.heap 2>/dev/null | tail -n +11); do rm -f "$f"; done
        if [ $restarted = no ] && [ $(($(date +%s) - started)) -ge "$restart_after" ]; then
            p=$(port databend-q-1)
            m=$(field "$work/databend-q-1.out" metrics)
            kill "$(cat "$work/databend-q-1.pid")" 2>/dev/null || true
            sleep 1
            echo "restart $(date -u +%FT%TZ)" >>"$work/databend-q-1.log"
            # a restarted process starts cold: its heap falls, then refills
            MALLOC_CONF="$je" "$build/tests/demo/rsnode" --kind databend --dir "$work/tmp" \
                --tick 0 --scale "$scale" --port "$p" --metrics-port "$m" --warm 0 \
                >"$work/databend-q-1.new" 2>>"$work/databend-q-1.log" &
            echo $! >"$work/databend-q-1.pid"
            wait_ready "$work/databend-q-1.new"
            mv "$work/databend-q-1.new" "$work/databend-q-1.out"
            # when the new process was up (the tests wait for it)
            date +%s >"$work/databend-q-1.restarted"
            restarted=yes
        fi
    done
) &
ticker=$!
pids="$pids $ticker"

# The collector in the background, its log in WORK/collector.log; the tour
# names the address it really listens on (LISTEN may ask for port 0).
"$build/collector/bin/collector" --nodes "$work/be.list" --interval "$poll_interval" --spread 2s \
    --db "$db" --listen "$listen" --no-progress 2>"$work/collector.log" &
collector=$!
pids="$pids $collector"
i=0
while ! url=$(sed -n 's/.*url=\(http[^ ]*\) .*serving.*/\1/p' "$work/collector.log") || [ -z "$url" ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || { say "the collector did not start: $(cat "$work/collector.log")"; exit 1; }
    sleep 0.1
done
echo "$url" >"$work/url"
cat >"$work/tour.txt" <<EOF
The demo fleet: 8 nodes (Doris and StarRocks BEs in C++, Databend and RisingWave
in Rust), real jemalloc dumps, $((history * 15)) minutes of backdated history,
polled every $(echo "$poll_interval" | sed 's/^\([0-9]*\)s$/\1 s/'). UI: $url
  leak         doris-be-2: TabletSchemaCache never evicts; the leak suspects
               list names doris::TabletSchema::init_from_pb
               UI: /  (fleet leaks), node page doris-be-2
               CLI: $query leaks --db $db
  outlier      sr-be-2 holds far more than the fleet (a big hash join)
               UI: fleet page   CLI: $query fleet --db $db
  tracker      sr-be-3's query tracker under-counts its heap (untracked join build)
               UI: discrepancy page of sr-be-3   CLI: $query discrepancy sr-be-3 --db $db
  restart      databend-q-1 restarts after ${restart_after}s (cold: its heap falls,
               the leak analysis splits its lifetimes)
               CLI: $query trend databend-q-1 --db $db; $query leaks databend-q-1 --db $db
  failure      sr-be-4 answers with an HTML login page; the reason is recorded
               CLI: $query nodes --db $db
  compare      $query diff doris-be-2@-3h doris-be-2 --db $db
EOF
cat "$work/tour.txt" >&2
if [ -n "$seconds" ]; then
    sleep "$seconds" &
    pids="$pids $!"
    wait $! || true
else
    wait "$collector" || true
fi
kill "$collector" 2>/dev/null || true
wait "$collector" 2>/dev/null || true
kill "$ticker" 2>/dev/null || true
# the restarted node is a child of the ticker subshell
kill "$(cat "$work/databend-q-1.pid")" 2>/dev/null || true
