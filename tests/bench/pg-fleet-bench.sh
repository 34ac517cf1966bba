#!/bin/sh
# pg-fleet-bench: 3 collectors sharing N fake nodes through one PostgreSQL 15
# (issue 19), beside one collector into SQLite on the same fleet.
#
#   sh tests/bench/pg-fleet-bench.sh [--smoke] [BUILD_DIR] [N] [INTERVAL_S]
#                                   (default: build 3000 120; smoke: 6 nodes, 6 s)
#
# One fakenode process serves N nodes on loopback (--cache: one real jemalloc
# dump, about 1 MB with --stacks 2600, made once). Prints:
#   - round time: the slowest of the three collectors' "round finished"
#     seconds in two measured rounds (after a warm-up round), and the SQLite
#     collector's second --once round on the same fleet;
#   - polls per node per round (must be exactly 1: min and max over nodes and
#     rounds, from the snapshot rows);
#   - database bytes per snapshot (PostgreSQL: the heapfleet tables' total
#     relation size; SQLite: the file) after the same number of rounds;
#   - top, diff, trend and leaks latencies on PostgreSQL against SQLite
#     (CPU of each whole process, the two run in turn: medians and the
#     median of the pairwise ratios; timed with python3's getrusage).
# "RESULT<tab>" lines as tests/bench/run-all reads them. The machine's load
# is printed first (uptime). --smoke fails when a figure is missing or a node
# was polled other than once per round.
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; shift; fi
BUILD=$(realpath "${1:-build}")
if [ -n "$SMOKE" ]; then N=${2:-6}; IV=${3:-6}; STACKS=16; else N=${2:-3000}; IV=${3:-120}; STACKS=2600; fi
C=$BUILD/collector/bin/collector
Q=$BUILD/query/query
F=$BUILD/tests/collector/fakenode
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../pg/pg-env.sh"
T=$(mktemp -d /tmp/hfpgbench.XXXXXX)
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pg_stop
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
echo "load: $(uptime)"
pg_start "$T/pg"
cd "$T"
sql() { pg_psql -c "$1"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
IVMS=$((IV * 1000))

"$F" --list be.list --dir dumps --cache --stacks $STACKS starrocksx$N >ports.txt 2>fakenode.err &
PIDS="$PIDS $!"
i=0
while ! grep -q ready ports.txt 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
grep -q ready ports.txt || fail "fakenode did not start: $(cat fakenode.err)"

# ---- PostgreSQL: three collectors ----
for c in c1 c2 c3; do
    "$C" --nodes be.list --db "$PGURI" --interval ${IV}s --lease $((IV / 2 + 2))s \
        --collector-id $c --listen off --retain 0 --thin-after 0 --no-progress \
        --max-inflight 32 >$c.log 2>&1 &
    PIDS="$PIDS $!"
done
# Warm-up: every collector finished one round; then two measured rounds.
i=0
while [ $i -lt $((IV * 40)) ]; do
    n=0
    for c in c1 c2 c3; do grep -q 'msg="round finished"' $c.log && n=$((n + 1)); done
    [ $n = 3 ] && break
    sleep 0.5
    i=$((i + 1))
done
k0=$(( $(now_ms) / IVMS + 1 ))
while [ "$(now_ms)" -lt $(((k0 + 2) * IVMS + IVMS / 2)) ]; do sleep 0.5; done
for p in $PIDS; do :; done
polls=$(sql "SELECT min(c) || ' ' || max(c) || ' ' || count(*) FROM (SELECT node_id, taken_at / $IVMS AS k,
             count(*) AS c FROM snapshots WHERE taken_at / $IVMS BETWEEN $k0 AND $((k0 + 1))
             GROUP BY 1, 2) x")
set -- $polls
pmin=$1 pmax=$2 pairs=$3
[ "$pairs" = $((N * 2)) ] || fail "measured rounds polled $pairs node-rounds, expected $((N * 2))"
[ "$pmin" = 1 ] && [ "$pmax" = 1 ] || fail "polls per node per round: min $pmin max $pmax"
# Round time: the slowest collector's round among the measured rounds.
pg_round=$(grep -h 'msg="round finished"' c1.log c2.log c3.log | tail -n 6 |
    sed 's/.* secs=\([0-9.]*\) .*/\1/' | sort -n | tail -n 1)
pg_snaps=$(sql "SELECT count(*) FROM snapshots")
pg_bytes=$(sql "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n
                ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'")
pg_rounds=$(sql "SELECT count(DISTINCT taken_at / $IVMS) FROM snapshots")
for p in $PIDS; do :; done
kill $(echo "$PIDS" | cut -d' ' -f3-) 2>/dev/null || true

# ---- SQLite: one collector, as many rounds ----
S=$T/s.db
r=0
while [ $r -lt "$pg_rounds" ]; do
    "$C" --nodes be.list --db "$S" --once --listen off --retain 0 --thin-after 0 --no-progress \
        --max-inflight 32 >sq.$r.out 2>sq.$r.log || true
    r=$((r + 1))
done
sq_round=$(sed -n 's/^round .* in \([0-9.]*\) s .*/\1/p' sq.1.out 2>/dev/null || true)
[ -n "$sq_round" ] || sq_round=$(sed -n 's/^round .* in \([0-9.]*\) s .*/\1/p' sq.0.out)
sq_snaps=$("$Q" snapshots starrocks-ok-1 --db "$S" --all | tail -n +2 | wc -l)
sq_snaps=$((sq_snaps * N))
sq_bytes=$(stat -c %s "$S")

echo
echo "3 collectors x $N nodes, interval ${IV}s, PostgreSQL 15 vs 1 collector into SQLite"
printf 'round time:            PostgreSQL (3 collectors) %s s   SQLite (1 collector) %s s\n' \
    "$pg_round" "$sq_round"
printf 'polls per node/round:  min %s max %s over %s node-rounds (must be 1)\n' "$pmin" "$pmax" "$pairs"
printf 'bytes per snapshot:    PostgreSQL %s   SQLite %s\n' \
    "$((pg_bytes / pg_snaps))" "$((sq_bytes / sq_snaps))"
printf 'RESULT\tpg round time (3 collectors, %s nodes)\t%s\ts\t-\tsqlite 1 collector\t%s\n' \
    "$N" "$pg_round" "$sq_round"
printf 'RESULT\tpg polls per node per round\t%s\tpolls\t1\t-\t-\n' "$pmax"
printf 'RESULT\tpg bytes per snapshot\t%s\tB\t-\tsqlite\t%s\n' \
    "$((pg_bytes / pg_snaps))" "$((sq_bytes / sq_snaps))"

# ---- query latencies, PostgreSQL against SQLite ----
# pair_cpu RUNS "A" "B": A and B (commands as words) run in turn after one
# warm-up each, each run's CPU (user + system of the whole process) taken
# from getrusage; prints each one's min / median / max and the median of
# the pairwise A/B ratios. Fails when a run of A fails.
pair_cpu() {
    python3 - "$@" <<'PY'
import resource, shlex, statistics, subprocess, sys
runs, a, b = int(sys.argv[1]), shlex.split(sys.argv[2]), shlex.split(sys.argv[3])
def cpu(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.returncode, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
cpu(a), cpu(b)
ta, tb = [], []
for _ in range(runs):
    rc, t = cpu(a)
    if rc != 0:
        sys.exit(1)
    ta.append(t)
    tb.append(cpu(b)[1])
for name, t in (("A", ta), ("B", tb)):
    print("%s cpu s  %.3f  %.3f  %.3f" % (name, min(t), statistics.median(t), max(t)))
ratios = [x / y for x, y in zip(ta, tb) if y > 0]
if ratios:
    print("A/B cpu  %.4f (median of %d pairs)" % (statistics.median(ratios), len(ratios)))
PY
}
node=starrocks-ok-1
runs=5
[ -n "$SMOKE" ] && runs=2
for q in "top $node" "diff $node@<=-2s $node" "trend $node --since 7d" "leaks $node --since 7d"; do
    name=${q%% *}
    echo "--- query $name: PostgreSQL (A) against SQLite (B), CPU seconds"
    pair_cpu "$runs" "$Q $q --db $PGURI" "$Q $q --db $S" || fail "query $q on PostgreSQL"
    "$Q" $q --db "$PGURI" >pg.$name.txt 2>&1 || true
    "$Q" $q --db "$S" >sq.$name.txt 2>&1 || true
    [ -s pg.$name.txt ] || fail "query $q printed nothing on PostgreSQL"
done
echo "ok"
