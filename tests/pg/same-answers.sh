#!/bin/sh
# Same answers on both engines: the same dumps imported into an SQLite file
# and into PostgreSQL 15 (a throwaway cluster, pg-env.sh); every query
# command, in every format, must print byte-identical output from both, and
# a failed attempt and errors included.
#   same-answers.sh QUERY JEFIXTURE
set -eu
Q=$(realpath "$1")
J=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfsame.XXXXXX)
trap 'pg_stop; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pg_start "$T/pg"
cd "$T"

# Three nodes, four dumps each, growing (jefixture's leak path keeps what it
# allocates): enough for trend, leaks and fleet to say something.
now=$(date +%s)
at() { date -u -d "@$((now - $1 * 3600))" +%Y-%m-%dT%H:%M:%SZ; }
for n in 1 2 3; do
    MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 2 --scale $n \
        be$n-1.heap be$n-2.heap be$n-3.heap be$n-4.heap
done
printf 'not a profile\n' >junk.heap
for db in "$T/s.db" "$PGURI"; do
    for n in 1 2 3; do
        for k in 1 2 3 4; do
            "$Q" import --db "$db" --node be$n --kind doris --time "$(at $((5 - k)))" \
                be$n-$k.heap >/dev/null
        done
    done
    "$Q" import --db "$db" --node be2 --time "$(at 0)" junk.heap >/dev/null 2>&1 &&
        fail "junk imported"
done

# Every command twice; the outputs must match byte for byte and say something.
n=0
same() {
    n=$((n + 1))
    "$Q" "$@" --db "$T/s.db" >a.$n 2>&1 || echo "exit $?" >>a.$n
    "$Q" "$@" --db "$PGURI" >b.$n 2>&1 || echo "exit $?" >>b.$n
    [ -s a.$n ] || fail "query $*: no output"
    sed "s|$PGURI|DB|g" b.$n >b2.$n
    sed "s|$T/s.db|DB|g" a.$n >a2.$n
    cmp -s a2.$n b2.$n || { diff a2.$n b2.$n | head -20 >&2; fail "query $*: SQLite and PostgreSQL differ"; }
}
same nodes
for b in be1 be2 be3; do
    same snapshots $b
    same snapshots $b --all
done
for f in text json collapsed; do
    same top be1 --format $f
    same top "be2@$(at 2)" --format $f
    same top '#5' --format $f
done
for f in collapsed json dot svg pprof; do
    same export be3 --format $f
done
for f in text json; do
    same diff "be1@$(at 3)" be1 --format $f
    same diff be1 be3 --format $f
    same leaks be1 --since 2d --format $f
    same leaks --since 2d --format $f
    same fleet --since 2d --format $f
    same discrepancy be2 --format $f
done
for f in text csv json; do
    same trend be1 --since 2d --format $f
    same trend --fleet --since 2d --format $f
    same trend be2 --since 2d --function 'leak' --format $f
done
same top nosuchnode
same top "be1@$(at 100)"

echo "ok: $n outputs byte-identical on SQLite and PostgreSQL"
