#!/bin/sh
# Collectors sharing a fleet through PostgreSQL (issue 19): three collectors
# with the same node list poll each of 12 fake nodes exactly once per round
# between them; one is killed (SIGKILL) and the other two take its nodes
# within one interval plus the lease; PostgreSQL restarts mid-round and
# nothing stored before is lost, and the polls whose snapshots the restart
# cut are made again in the same round once the database is back (the
# round with the restart is complete too). The database is the witness:
# every poll leaves exactly one snapshot row (ok or failed).
#   fleet.sh COLLECTOR FAKENODE QUERY
set -eu
C=$(realpath "$1")
F=$(realpath "$2")
Q=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
. "$HERE/fleet-lib.sh"
fleet_begin hffleet
IV=${IV:-3000} # --interval, ms
LEASE=2000   # --lease, ms
N=12

fleet_fakenodes $N

# A port free a moment ago; another test may take it before c1 listens, so
# c1 is started again on a new one when its listen fails.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
start_collector() {
    tries=0
    while :; do
        listen=off
        if [ "$1" = c1 ]; then
            WEBPORT=$(free_port)
            listen=127.0.0.1:$WEBPORT
        fi
        "$C" --nodes be.list --db "$PGURI" --interval $((IV / 1000))s --lease $((LEASE / 1000))s --collector-id "$1" \
            --listen $listen --retain 0 --thin-after 0 --no-progress >"$1.log" 2>&1 &
        pid=$!
        echo $pid >"$1.pid"
        [ "$1" = c1 ] || break
        i=0
        while [ $i -lt 20 ] && kill -0 $pid 2>/dev/null && ! grep -q "listening\|address already in use" "$1.log"; do
            sleep 0.1; i=$((i + 1))
        done
        grep -q "address already in use" "$1.log" && [ $tries -lt 5 ] || break
        wait $pid 2>/dev/null
        tries=$((tries + 1))
    done
    PIDS="$PIDS $pid"
}

# ---- three collectors ----
start_collector c1
start_collector c2
start_collector c3
# The first round is slow (a cold symbolizer on a loaded machine): count
# from the round after every collector finished one.
i=0
while [ $i -lt 600 ]; do
    done3=0
    for c in c1 c2 c3; do grep -q 'msg="round finished"' $c.log && done3=$((done3 + 1)); done
    [ $done3 = 3 ] && break
    sleep 0.1
    i=$((i + 1))
done
[ $done3 = 3 ] || fail "collectors did not finish a first round"
k0=$(( $(now_ms) / IV + 1 ))
wait_round_end $((k0 + 2))
check_rounds $k0 $((k0 + 2)) "three collectors"
[ "$(claimers $k0 $((k0 + 2)))" = "c1,c2,c3" ] ||
    fail "three collectors: the work is not shared: $(claimers $k0 $((k0 + 2)))"
echo "ok: 3 collectors, rounds $k0..$((k0 + 2)): each of $N nodes once per round"

# ---- one killed: the other two take its nodes ----
kill -9 "$(cat c3.pid)"
killed=$(now_ms)
# Taken over within one interval plus the lease: the first round starting
# after killed + lease, and every one after.
k1=$(( (killed + LEASE) / IV + 1 ))
wait_round_end $((k1 + 1))
check_rounds $k1 $((k1 + 1)) "after c3 was killed"
[ "$(claimers $k1 $((k1 + 1)))" = "c1,c2" ] ||
    fail "after the kill: rounds claimed by $(claimers $k1 $((k1 + 1)))"
"$Q" collectors --db "$PGURI" >collectors.txt
grep -q "^c3 .* dead" collectors.txt || fail "query collectors: c3 not dead: $(cat collectors.txt)"
grep -q "^c1 .* alive" collectors.txt || fail "query collectors: c1 not alive: $(cat collectors.txt)"
# /metrics of c1 shows itself and the whole fleet's health.
curl -fsS "http://127.0.0.1:$WEBPORT/metrics" >metrics.txt || fail "GET /metrics"
grep -q '^heapfleet_collector_info{collector="c1",' metrics.txt || fail "/metrics: no identity"
grep -q '^heapfleet_fleet_collector_up{collector="c3",.*} 0$' metrics.txt ||
    fail "/metrics: c3 not down: $(grep fleet_collector_up metrics.txt)"
grep -q '^heapfleet_fleet_collector_up{collector="c2",.*} 1$' metrics.txt ||
    fail "/metrics: c2 not up: $(grep fleet_collector_up metrics.txt)"
echo "ok: c3 killed; its nodes taken over from round $k1 (killed at $killed ms)"

# ---- PostgreSQL restarts mid-round ----
before=$(sql "SELECT count(*) || ' ' || coalesce(max(id), 0) || ' ' ||
              coalesce(sum(length(coalesce(error, ''))), 0) FROM snapshots")
maxid=${before#* }; maxid=${maxid%% *}
# Mid-round: a little after a round start.
k2=$(( $(now_ms) / IV + 1 ))
while [ "$(now_ms)" -lt $((k2 * IV + 200)) ]; do sleep 0.05; done
pg_restart
# Each collector's writer finds its connection cut at its next record: that
# poll's dump is fetched but not stored, and the node is polled again in
# the round once the database answers. Wait for both to have said so.
cut='err="[^"]*(terminating connection|server closed the connection|connection to server)'
i=0
while [ $i -lt 300 ]; do
    n=0
    for c in c1 c2; do
        grep -Eq "$cut.*msg=\"could not record the snapshot\"" $c.log && n=$((n + 1))
    done
    [ $n = 2 ] && break
    sleep 0.1
    i=$((i + 1))
done
k3=$(( $(now_ms) / IV + 1 ))
wait_round_end $((k3 + 1))
# Every round from the one with the restart on is complete: the restart
# cost no node a round's snapshot.
check_rounds $k2 $((k3 + 1)) "the PostgreSQL restart"
after=$(sql "SELECT count(*) || ' ' || max(id) || ' ' ||
             coalesce(sum(length(coalesce(error, ''))), 0) FROM snapshots WHERE id <= $maxid")
[ "$after" = "$before" ] || fail "rows stored before the restart changed: $before -> $after"
# The errors are recorded in words: in each collector's log (the poll whose
# record failed, with the reason, then the same node polled again and
# stored in the same round, which finishes without a failure), and in the
# collectors table.
for c in c1 c2; do
    line=$(grep -E "$cut.*msg=\"could not record the snapshot\"" $c.log | head -n 1) ||
        fail "$c: no error in words for the restart"
    node=$(echo "$line" | sed -n 's/.* node=\([^ ]*\) .*/\1/p')
    round=$(echo "$line" | sed -n 's/.* round=\([0-9]*\) status=not_stored .*/\1/p')
    [ -n "$node" ] && [ -n "$round" ] || fail "$c: not a not_stored poll: $line"
    grep -q " node=$node round=$round retry=1 msg=\"the store lost" $c.log ||
        fail "$c: $node not polled again in round $round after the restart"
    grep -q " node=$node kind=[a-z]* round=$round status=ok .*msg=\"snapshot\"" $c.log ||
        fail "$c: $node's poll made again in round $round was not stored"
    grep -Eq " round=$round .* failed=0 .*msg=\"round finished\"" $c.log ||
        fail "$c: round $round finished with a failure: $(grep " round=$round .*round finished" $c.log)"
    row=$(sql "SELECT store_errors || ' ' || last_error FROM collectors WHERE id = '$c'")
    [ "${row%% *}" -ge 1 ] || fail "$c: no store error in the collectors table: $row"
    echo "${row#* }" | grep -Eq "terminating connection|server closed the connection|connection to server" ||
        fail "$c: last error not in words: $row"
done
# Nothing a collector logged as stored is missing (its line comes after the
# commit; the logs are read first, then the table).
logged=$(cat c1.log c2.log c3.log | grep -c 'status=ok .*msg="snapshot"')
rows=$(sql "SELECT count(*) FROM snapshots")
[ "$logged" -le "$rows" ] || fail "$logged snapshots logged as stored, $rows in the database"
echo "ok: PostgreSQL restarted in round $k2; errors recorded; polls made again; rounds $k2..$((k3 + 1)) complete"
