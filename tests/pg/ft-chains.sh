#!/bin/sh
# Chained function totals (function_totals_rest, issue 18) and raw dumps
# (line deltas) read back the same everywhere: every raw dump byte for byte,
# every function's totals in every snapshot and every function's trend, written on SQLite with chains longer than a keyframe's
# (and a reindex in the middle of one), are the same after query migrate to
# PostgreSQL; after the same retention on both engines (links taken out of
# the chains) each engine still reads exactly the values it read before for
# the snapshots that remain; and a writer on PostgreSQL chains too. Long
# enough that spans close (store/series.c: 128 snapshots): trends read from
# the packed per-function series inside them and from function_totals
# outside, and every value a snapshot's own table gives is the trend's.
#   ft-chains.sh FT_CHAINS QUERY
set -eu
F=$(realpath "$1")
Q=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfftc.XXXXXX)
trap 'pg_stop; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pg_start "$T/pg"
cd "$T"
H=300
S="$T/s.db"

"$F" write "$S" $H || fail "write"
chained=$(sqlite3 "$S" "SELECT count(*) FROM function_totals_rest WHERE base_id IS NOT NULL")
[ "$chained" -gt $((H / 2)) ] || fail "only $chained packed totals chained on SQLite"
# Raw dumps chain as line deltas (store/ldelta.c: they start "HFL").
raw_chained=$(sqlite3 "$S" "SELECT count(*) FROM raw_dumps WHERE base_id IS NOT NULL
                            AND substr(data, 1, 3) = CAST('HFL' AS BLOB)")
[ "$raw_chained" -gt $((H / 2)) ] || fail "only $raw_chained raw dumps are line deltas on SQLite"
# Spans 1-128 and 129-256 closed; the reindex of #150 dissolved the second.
spans=$(sqlite3 "$S" "SELECT group_concat(first_id || '-' || last_id) FROM function_series_spans
                      WHERE closed = 1")
[ "$spans" = "1-128" ] || fail "closed spans on SQLite: '$spans', expected 1-128"
# dump DB OUT: every stored value, sorted (a raw dump that reads back other
# bytes fails it).
dump() {
    "$F" dump "$1" $H >"$2.unsorted" 2>dump.err || fail "dump $1: $(cat dump.err)"
    grep -q '^R ' "$2.unsorted" || fail "dump $1: no raw dump read"
    sort "$2.unsorted" >"$2"
}
# one_pass_same DUMP: the trends read in one pass (M) are the trends read a
# function at a time (S).
one_pass_same() {
    grep '^S ' "$1" | sed 's/^S /M /' >s.only
    grep '^M ' "$1" >m.only
    [ -s m.only ] || fail "$1: no one-pass trend"
    cmp -s s.only m.only || { diff s.only m.only | head >&2; fail "$1: one pass differs"; }
    grep '^J ' "$1" | sed 's/^J /M /' >j.only
    [ -s j.only ] || fail "$1: no joined trend"
    comm -23 j.only m.only >j.extra
    [ ! -s j.extra ] || { head j.extra >&2; fail "$1: five-function trends differ"; }
    # Each function's value in each snapshot's table (T) is its trend's (S).
    grep '^T ' "$1" | sed 's/^T /S /' | sort >t.only
    sort s.only | sed 's/^M /S /' >s.sorted
    comm -23 t.only s.sorted >t.extra
    [ ! -s t.extra ] || { head t.extra >&2; fail "$1: a trend differs from a snapshot's table"; }
}
dump "$S" a.txt
grep -q '^T ' a.txt && grep -q '^S ' a.txt || fail "nothing dumped"
one_pass_same a.txt

"$Q" migrate --from "$S" --to "$PGURI" >mig.txt 2>mig.err || fail "migrate: $(cat mig.err)"
grep -q "^function_totals_rest .*: ok$" mig.txt || fail "rest not copied: $(cat mig.txt)"
pg_chained=$(pg_psql -c "SELECT count(*) FROM function_totals_rest WHERE base_id IS NOT NULL")
[ "$pg_chained" = "$chained" ] ||
    fail "the chains did not arrive in PostgreSQL"
[ "$(pg_psql -c "SELECT count(*) FROM raw_dumps WHERE base_id IS NOT NULL
                 AND substring(data from 1 for 3) = 'HFL'::bytea")" = "$raw_chained" ] ||
    fail "the raw dumps' line deltas did not arrive in PostgreSQL"
[ "$(pg_psql -c "SELECT count(*) FROM function_series")" = \
  "$(sqlite3 "$S" "SELECT count(*) FROM function_series")" ] ||
    fail "the function series did not arrive in PostgreSQL"
dump "$PGURI" b.txt
one_pass_same b.txt
cmp -s a.txt b.txt || { diff a.txt b.txt | head >&2; fail "PostgreSQL reads other totals"; }
echo "ok: $(wc -l <a.txt) values the same after migrate ($chained chained rows)"
# leaks_same DB1 DB2 WHAT [MARK]: `query leaks` answers the same over both
# (the closed spans' stack series, store/sseries.c, and the sample sets),
# an answer with MARK in it (default: suspects, with their rates).
leaks_same() {
    "$Q" leaks --top 0 --format json --db "$1" >l1.json 2>l1.err || fail "$3: leaks: $(cat l1.err)"
    "$Q" leaks --top 0 --format json --db "$2" >l2.json 2>l2.err || fail "$3: leaks: $(cat l2.err)"
    grep -q "${4:-\"rate_per_hour\"}" l1.json || fail "$3: leaks found nothing to compare"
    cmp -s l1.json l2.json || { diff l1.json l2.json | head >&2; fail "$3: leaks differ"; }
}
[ "$(pg_psql -c "SELECT count(*) FROM stack_series")" = \
  "$(sqlite3 "$S" "SELECT count(*) FROM stack_series")" ] ||
    fail "the stack series did not arrive in PostgreSQL"
[ "$(pg_psql -c "SELECT count(*) || '/' || coalesce(sum(size), 0) FROM stack_views")" = \
  "$(sqlite3 "$S" "SELECT count(*) || '/' || coalesce(sum(size), 0) FROM stack_views")" ] ||
    fail "the stack views did not arrive in PostgreSQL"
leaks_same "$S" "$PGURI" "after migrate"

"$F" retain "$S" $H || fail "retain on SQLite"
"$F" retain "$PGURI" $H || fail "retain on PostgreSQL"
dump "$S" a2.txt
dump "$PGURI" b2.txt
one_pass_same a2.txt
one_pass_same b2.txt
cmp -s a2.txt b2.txt || { diff a2.txt b2.txt | head >&2; fail "engines differ after retention"; }
# Per-snapshot totals are unchanged; a trend has fewer points, each as before.
[ "$(grep -c '^T ' a2.txt)" -lt "$(grep -c '^T ' a.txt)" ] || fail "retention deleted nothing"
comm -23 a2.txt a.txt >new.txt
[ ! -s new.txt ] || { head new.txt >&2; fail "values changed after retention"; }
# Retention writes the views the reindex dropped, on either engine
# (store/view.c), and leaks reads through them.
[ "$(sqlite3 "$S" "SELECT count(*) FROM stack_views")" = 1 ] || fail "no stack view on SQLite"
[ "$(pg_psql -c "SELECT count(*) FROM stack_views")" = 1 ] || fail "no stack view on PostgreSQL"
leaks_same "$S" "$PGURI" "after retention" '"total_rate_per_hour"'
echo "ok: $(wc -l <a2.txt) values the same after retention on both engines"

# A writer on PostgreSQL chains its own rows; the chained rows read as
# SQLite reads the same profiles.
S2="$T/s2.db"
pg_as "$PG_BIN/createdb" -h "$PG_DIR" -U heapfleet hf2
U2="postgresql:///hf2?host=$PG_DIR&user=heapfleet"
"$F" write "$U2" $H || fail "write on PostgreSQL"
"$F" write "$S2" $H || fail "write on SQLite"
[ "$("$PG_BIN/psql" -X -q -A -t "$U2" -c "SELECT count(*) FROM function_series_spans
                                          WHERE closed = 1")" = 1 ] ||
    fail "the PostgreSQL writer closed no span"
[ "$("$PG_BIN/psql" -X -q -A -t "$U2" -c "SELECT count(*) FROM function_totals_rest
                                          WHERE base_id IS NOT NULL")" -gt 15 ] ||
    fail "the PostgreSQL writer does not chain"
[ "$("$PG_BIN/psql" -X -q -A -t "$U2" -c "SELECT count(*) FROM raw_dumps WHERE base_id IS NOT NULL
                                          AND substring(data from 1 for 3) = 'HFL'::bytea")" \
  -gt $((H / 2)) ] || fail "the PostgreSQL writer stores no line deltas"
dump "$S2" a3.txt
dump "$U2" b3.txt
one_pass_same a3.txt
one_pass_same b3.txt
cmp -s a3.txt b3.txt ||
    { diff a3.txt b3.txt | head >&2; fail "PostgreSQL's own chains read otherwise"; }
[ "$("$PG_BIN/psql" -X -q -A -t "$U2" -c "SELECT count(*) FROM function_series_spans p
                                          WHERE closed = 1 AND EXISTS (SELECT 1 FROM stack_series s
                                          WHERE s.node_id = p.node_id AND s.first_id = p.first_id
                                          AND s.last_id = p.last_id)")" = 1 ] ||
    fail "the PostgreSQL writer wrote no stack series row for its closed span"
# Spans 1-128 and 129-256 closed, each writing the node's view; the
# reindex of #150 dropped it, on either engine.
[ "$("$PG_BIN/psql" -X -q -A -t "$U2" -c "SELECT count(*) FROM stack_views")" = \
  "$(sqlite3 "$S2" "SELECT count(*) FROM stack_views")" ] ||
    fail "the PostgreSQL writer's stack views are not SQLite's"
leaks_same "$S2" "$U2" "written on each engine"
echo "ok: PostgreSQL's writer chains, $(wc -l <b3.txt) values as on SQLite; leaks agree"
