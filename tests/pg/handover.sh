#!/bin/sh
# Collectors joining and leaving a fleet shared through PostgreSQL (issue 19):
#  - a collector's first round starts soon after it starts, in the round
#    already under way (not at the next multiple of the interval: with
#    --interval 1h that was up to an hour of blindness), and a collector
#    joining mid-round polls no node another one claimed in that round;
#    one started in the last quarter of a round waits for the next;
#  - a collector stopped cleanly (SIGTERM) gives its nodes up: the other
#    takes them at its next round, long before the stopped one's lease
#    (60 s here) would have run out, and `query collectors` says "stopped".
# The database is the witness: every poll leaves one snapshot row.
#   handover.sh COLLECTOR FAKENODE QUERY
set -eu
C=$(realpath "$1")
F=$(realpath "$2")
Q=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
. "$HERE/fleet-lib.sh"
fleet_begin hfhandover
IV=${IV:-3000} # --interval, ms (the offsets below scale with it)
N=8

fleet_fakenodes $N

start_collector() {
    "$C" --nodes be.list --db "$PGURI" --interval $((IV / 1000))s --lease 60s --collector-id "$1" \
        --listen off --retain 0 --thin-after 0 --no-progress >"$1.log" 2>&1 &
    echo $! >"$1.pid"
    PIDS="$PIDS $!"
}
# Sleep until $1 ms into a round (the next round if that moment has passed).
wait_into_round() {
    k=$(( $(now_ms) / IV ))
    [ "$(now_ms)" -lt $((k * IV + $1)) ] || k=$((k + 1))
    while [ "$(now_ms)" -lt $((k * IV + $1)) ]; do sleep 0.05; done
}

# ---- a collector's first round: soon after it starts, not at the boundary ----
wait_into_round $((IV / 12))
started=$(now_ms)
k0=$((started / IV))
start_collector c1
wait_round_end $k0
first=$(sql "SELECT coalesce(min(taken_at), 0) FROM snapshots")
[ "$first" -gt 0 ] && [ "$first" -lt $(((k0 + 1) * IV)) ] ||
    fail "c1 started at $started ms (round $k0) but polled first at $first ms, not in that round"
check_rounds $k0 $k0 "c1's first round"
echo "ok: c1 started $((started - k0 * IV)) ms into round $k0, first poll $((first - started)) ms later"

# ---- a second collector joins mid-round: nothing polled twice ----
wait_into_round $((IV / 4))
k1=$(( $(now_ms) / IV ))
start_collector c2
# Its first round claims in round k1, where c1 has claimed every node.
i=0
while ! grep -q 'msg="claimed"' c2.log && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "round_key=$k1 nodes=$N mine=0 msg=\"claimed\"" c2.log ||
    fail "c2 joined in round $k1: its first claim was not for that round with nothing granted: $(grep 'msg="claimed"' c2.log)"
wait_round_end $((k1 + 2))
check_rounds $k1 $((k1 + 2)) "c2 joined"
[ "$(claimers $((k1 + 1)) $((k1 + 2)))" = "c1,c2" ] ||
    fail "c2 joined: rounds $((k1 + 1))..$((k1 + 2)) claimed by $(claimers $((k1 + 1)) $((k1 + 2)))"
echo "ok: c2 joined in round $k1; rounds $k1..$((k1 + 2)) each node once, shared from $((k1 + 1))"

# ---- c2 stops cleanly: c1 takes its nodes at its next round ----
wait_into_round $((IV / 2))
kill -TERM "$(cat c2.pid)"
i=0
while kill -0 "$(cat c2.pid)" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$(cat c2.pid)" 2>/dev/null && fail "c2 did not exit within 30 s of SIGTERM"
stopped=$(now_ms)
# The first round that starts after the stop is c1's alone and complete:
# within one interval of the stop, where the lease would have kept c2's
# nodes unpolled for 60 s.
k2=$((stopped / IV + 1))
wait_round_end $((k2 + 1))
check_rounds $k2 $((k2 + 1)) "after c2 stopped"
[ "$(claimers $k2 $((k2 + 1)))" = "c1" ] ||
    fail "after c2 stopped: rounds $k2..$((k2 + 1)) claimed by $(claimers $k2 $((k2 + 1)))"
"$Q" collectors --db "$PGURI" >collectors.txt
grep -q "^c2 .* stopped " collectors.txt || fail "query collectors: c2 not stopped: $(cat collectors.txt)"
grep -q "^c1 .* alive " collectors.txt || fail "query collectors: c1 not alive: $(cat collectors.txt)"
took=$((k2 * IV - stopped))
echo "ok: c2 stopped at $stopped ms; c1 polled all $N nodes from round $k2 ($took ms later; lease 60000 ms)"

# ---- started in the last quarter of a round: its first round is the next ----
# (its polls would run into the next round otherwise; it waits at most a
# quarter interval)
wait_into_round $((IV * 5 / 6))
k3=$(( $(now_ms) / IV ))
start_collector c3
i=0
while ! grep -q 'msg="claimed"' c3.log && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "round_key=$((k3 + 1)) nodes=$N mine=[0-9]* msg=\"claimed\"" c3.log ||
    fail "c3 started $((IV * 5 / 6)) ms into round $k3 (of $IV): its first claim was not for round $((k3 + 1)): $(grep 'msg="claimed"' c3.log)"
wait_round_end $((k3 + 1))
check_rounds $k3 $((k3 + 1)) "c3 joined late in a round"
echo "ok: c3 started in the last quarter of round $k3; its first round was $((k3 + 1))"
