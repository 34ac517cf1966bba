# fleet-lib.sh: what the tests of collectors sharing a fleet (fleet.sh,
# handover.sh) have in common, sourced after pg-env.sh with C, F and Q set
# (collector, fakenode, query).
#
# fleet_begin NAME: a temp folder (T, the current directory from then on)
# with a PostgreSQL in it, stopped and removed at exit (KEEP=1 keeps them),
# the processes in PIDS killed; fail says why and shows the collectors'
# logs. fleet_fakenodes N: one fakenode serving N StarRocks nodes (be.list).
# The round helpers read IV (the --interval in ms) and N.
fleet_begin() {
    T=$(mktemp -d "/tmp/$1.XXXXXX")
    PIDS=""
    trap fleet_cleanup EXIT
    pg_start "$T/pg"
    cd "$T"
}
fleet_cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${KEEP:-}" ] || pg_stop
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/c*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
    exit 1
}
fleet_fakenodes() {
    "$F" --list be.list --dir dumps --cache --stacks 8 "starrocksx$1" >ports.txt 2>fakenode.err &
    PIDS="$PIDS $!"
    i=0
    while ! grep -q ready ports.txt 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    grep -q ready ports.txt || fail "fakenode did not start: $(cat fakenode.err)"
}
sql() { pg_psql -c "$1"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Wait until round key $1 is over (its start + interval + a margin).
wait_round_end() {
    end=$((($1 + 1) * IV + 1500))
    while [ "$(now_ms)" -lt "$end" ]; do sleep 0.2; done
}
# Rounds in [$1, $2] (keys): every node polled exactly once in each; $3
# names the check in the failure. A snapshot belongs to the round the
# collector names as it does (collector/daemon.c, round_key_now): a
# quarter interval early still is the round that starts at the next
# multiple. A round timer set from the loop's clock fires a few ms before
# the wall clock's multiple on a loaded machine, and the round's first
# poll is taken then: counted by the plain multiple, that node showed
# twice in the round before (seen under ASan with the suites beside it).
check_rounds() {
    rk="((s.taken_at + $IV / 4) / $IV)"
    bad=$(sql "SELECT n.name || ' round ' || $rk || ': ' || count(*)
               FROM snapshots s JOIN nodes n ON n.id = s.node_id
               WHERE $rk BETWEEN $1 AND $2
               GROUP BY n.name, $rk HAVING count(*) <> 1")
    [ -z "$bad" ] || fail "$3: polled more than once in a round: $bad"
    for k in $(seq "$1" "$2"); do
        got=$(sql "SELECT count(DISTINCT node_id) FROM snapshots s WHERE $rk = $k")
        [ "$got" = "$N" ] || fail "$3: round $k polled $got of $N nodes"
    done
}
# The collectors that claimed nodes in rounds [$1, $2], comma-separated.
claimers() {
    sql "SELECT string_agg(DISTINCT collector, ',' ORDER BY collector) FROM poll_claims
         WHERE round_key BETWEEN $1 AND $2"
}
