#!/bin/sh
# query symbols add / list, then re-symbolization of stored snapshots from
# their raw dumps (issue 15). The program runs from a folder that query
# cannot see (an empty tmpfs over it in a mount namespace), so a stored
# snapshot first has addresses only; a wrong file uploaded under the same
# name is refused by the mapping check; the right one (from a CI folder,
# elsewhere) names the frames after `query symbols add --reindex`.
# usage: symbols-add.sh QUERY JEFIXTURE
set -eu
query=$1 jefixture=$2
if ! unshare -m true 2>/dev/null; then
    echo "SKIP: unshare -m not permitted here"
    exit 77
fi
dir=$(mktemp -d)
trap '[ -n "${HP_KEEP:-}" ] || rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
hidden() { unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$dir/node/bin" "$@"; }
export HOME="$dir" DEBUGINFOD_URLS=""

mkdir -p "$dir/node/bin" "$dir/ci" "$dir/wrong"
cp "$jefixture" "$dir/node/bin/be_main"
cp "$jefixture" "$dir/ci/be_main"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$dir/node/bin/be_main" "$dir/be.heap"
db="$dir/hf.db"
hidden "$query" import --db "$db" --node be-1 "$dir/be.heap" > /dev/null 2>&1 || fail "import failed"
hidden "$query" top be-1 --db "$db" --top 0 > "$dir/before.txt" 2>&1
grep -q tracked_alloc "$dir/before.txt" && fail "named before any symbols were added"

# A different program under the same name: added (it has a build-id), but
# never used for this dump (its segments do not match the mapping).
cp /usr/bin/true "$dir/wrong/be_main"
hidden "$query" symbols add --db "$db" --reindex "$dir/wrong/be_main" > "$dir/wrong.txt" 2>&1 || true
hidden "$query" top be-1 --db "$db" --top 0 > "$dir/wrong-top.txt" 2>&1
grep -q tracked_alloc "$dir/wrong-top.txt" && fail "a wrong binary named the frames"
grep -q "does not match\|mismatch" "$dir/wrong.txt" ||
    fail "the wrong binary's refusal is not reported: $(cat "$dir/wrong.txt")"

# A file without a build-id is refused outright.
printf '\177ELF' > "$dir/ci/garbage"
if hidden "$query" symbols add --db "$db" "$dir/ci/garbage" > "$dir/garbage.txt" 2>&1; then
    fail "a non-ELF file was accepted"
fi

# The right build: named after the reindex, and listed.
hidden "$query" symbols add --db "$db" --reindex "$dir/ci/be_main" > "$dir/add.txt" 2>&1 ||
    fail "symbols add --reindex failed: $(cat "$dir/add.txt")"
bid=$(readelf -n "$jefixture" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
grep -q "^added $bid " "$dir/add.txt" || fail "add did not report the build-id: $(cat "$dir/add.txt")"
hidden "$query" top be-1 --db "$db" --top 0 > "$dir/after.txt" 2>&1
grep -q tracked_alloc "$dir/after.txt" || fail "not named after add --reindex: $(head -n 12 "$dir/after.txt")"
"$query" symbols list --db "$db" > "$dir/list.txt" 2>/dev/null
grep -q "^$bid .* yes  *be_main  *be-1 1/1 named$" "$dir/list.txt" || fail "list does not show the build: $(cat "$dir/list.txt")"
echo "ok: add refused a wrong file and a non-ELF, named be-1 after add --reindex, list shows $bid"
