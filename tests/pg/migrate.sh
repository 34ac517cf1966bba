#!/bin/sh
# query migrate: an SQLite store (profiles, failed attempts, figures) into
# PostgreSQL 15; every table's count checked; the same answers after;
# resumable after an interrupted copy; ids continue after it; a target that
# is not a copy of the source is refused.
#   migrate.sh QUERY JEFIXTURE
set -eu
Q=$(realpath "$1")
J=$(realpath "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/pg-env.sh"
T=$(mktemp -d /tmp/hfmig.XXXXXX)
trap 'pg_stop; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pg_start "$T/pg"
cd "$T"
sql() { pg_psql -c "$1"; }

now=$(date +%s)
at() { date -u -d "@$((now - $1 * 3600))" +%Y-%m-%dT%H:%M:%SZ; }
MALLOC_CONF=prof:true,lg_prof_sample:0 "$J" --threads 2 a1.heap a2.heap a3.heap a4.heap
S="$T/s.db"
for k in 1 2 3; do
    "$Q" import --db "$S" --node be1 --kind doris --time "$(at $((5 - k)))" a$k.heap 2>/dev/null
    "$Q" import --db "$S" --node be2 --kind starrocks --time "$(at $((5 - k)))" a$((k + 1)).heap \
        2>/dev/null
done
# An uploaded symbol file (query symbols add) goes along too.
HOME="$T/home" "$Q" symbols add --db "$S" "$J" >add.txt 2>&1 || fail "symbols add: $(cat add.txt)"
printf 'junk\n' >junk.heap
"$Q" import --db "$S" --node be2 --time "$(at 1)" junk.heap 2>/dev/null && fail "junk imported"

"$Q" migrate --from "$S" --to "$PGURI" >mig.txt 2>mig.err || fail "migrate: $(cat mig.err)"
grep -q "^snapshots .* 7 rows in the source, *7 copied now, *7 in the target: ok" mig.txt ||
    fail "snapshots not all copied: $(cat mig.txt)"
grep -q "MISMATCH" mig.txt && fail "mismatch: $(cat mig.txt)"
[ "$(grep -c ': ok$' mig.txt)" = 21 ] || fail "not every table checked: $(cat mig.txt)"
grep -q "^symbol_files .* 1 rows in the source, *1 copied now, *1 in the target: ok" mig.txt ||
    fail "the uploaded symbol file was not copied: $(cat mig.txt)"

same() {
    "$Q" "$@" --db "$S" >a.txt 2>&1 || echo "exit $?" >>a.txt
    "$Q" "$@" --db "$PGURI" >b.txt 2>&1 || echo "exit $?" >>b.txt
    cmp -s a.txt b.txt || { diff a.txt b.txt | head >&2; fail "query $*: differs after migrate"; }
}
check_same() {
    same nodes
    same snapshots be2 --all
    same top be1 --format json
    same diff "be2@$(at 3)" be2
    same trend be1 --since 2d --format csv
    same leaks --since 2d
    same symbols list
}
check_same
echo "ok: migrated, counts checked, same answers"

# An interrupted copy: the target lost its last rows (as if the run had
# died mid-table); a second run fills them in.
sql "DELETE FROM function_totals WHERE snapshot_id > 3; DELETE FROM node_stats WHERE snapshot_id > 3;
     DELETE FROM snapshots WHERE id > 3; DELETE FROM sample_sets WHERE id > 2;
     DELETE FROM symbol_cache" >/dev/null
"$Q" migrate --from "$S" --to "$PGURI" >mig2.txt 2>mig2.err || fail "resume: $(cat mig2.err)"
grep -q "^snapshots .* 7 rows in the source, *4 copied now, *7 in the target: ok" mig2.txt ||
    fail "resume did not continue after row 3: $(cat mig2.txt)"
check_same
echo "ok: resumed"

# New rows after the migration get new ids (the sequences follow).
"$Q" import --db "$PGURI" --node be1 --time "$(at 0)" a4.heap >imp.txt 2>&1 ||
    fail "import after migrate: $(cat imp.txt)"
grep -q "#8 be1" imp.txt || fail "the new snapshot is not #8: $(cat imp.txt)"
# The target now has a row the source does not: refused, naming the table.
if "$Q" migrate --from "$S" --to "$PGURI" >mig3.txt 2>mig3.err; then
    fail "a diverged target was accepted"
fi
grep -q "table sample_sets has 7 rows, the source .* 6: not the same store" mig3.err || fail "unclear: $(cat mig3.err)"
echo "ok: ids continue; a diverged target is refused"

# The uploaded file read back from PostgreSQL is the one uploaded, byte for byte.
HOME="$T/home" "$Q" reindex --db "$PGURI" '#1' >reindex.txt 2>&1 || fail "reindex: $(cat reindex.txt)"
f=$(find "$T/home/.cache/heapfleet/symbols" -name "$(basename "$J")" | head -n 1)
[ -n "$f" ] && cmp -s "$f" "$J" || fail "the uploaded file does not read back from PostgreSQL"
echo "ok: the uploaded symbol file reads back from PostgreSQL"
