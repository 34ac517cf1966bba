#!/bin/sh
# Folders as a database leaves them: a Doris log folder holds be.INFO, .dot
# and .svg files beside the dumps. `query import DIR` and `query leaks --dir`
# skip what is not a profile (with a count) instead of failing or storing it
# as a failed attempt; `--files` in the current folder get the folder's name
# as their node, not ".".   usage: folder-inputs.sh QUERY JEFIXTURE
set -eu
query=$1 jefixture=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$dir/log"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" "$dir/log/jeheap_dump.1.heap" \
    "$dir/log/jeheap_dump.2.heap" "$dir/log/jeheap_dump.3.heap"
printf 'Log file created at: 2026/11/23 10:00:00\nRunning on machine: be-1\n' >"$dir/log/be.INFO"
printf 'digraph "heap" {\n  N1 [label="main"];\n}\n' >"$dir/log/jeheap_dump.1.heap.dot"
printf '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"></svg>\n' >"$dir/log/jeheap_dump.1.heap.svg"

"$query" import --db "$dir/hf.db" --node be-1 "$dir/log" >"$dir/import.out" 2>"$dir/import.err" ||
    fail "import of a log folder failed: $(cat "$dir/import.err")"
grep -q "skipped 3 files that are not profiles (be.INFO, ...)" "$dir/import.err" ||
    fail "no skip count: $(cat "$dir/import.err")"
grep -q "3 imported, 0 failed" "$dir/import.err" || fail "not 3 imported: $(cat "$dir/import.err")"

"$query" leaks --dir "$dir/log" --step 1h --format json --no-symbolize >"$dir/leaks.json" 2>"$dir/leaks.err" ||
    fail "leaks --dir over a log folder failed: $(cat "$dir/leaks.err")"
grep -q "skipped 3 files that are not profiles" "$dir/leaks.err" || fail "leaks --dir: no skip count"
grep -q '"snapshots": *3' "$dir/leaks.json" || fail "leaks --dir: not 3 snapshots: $(head -c 300 "$dir/leaks.json")"

(cd "$dir/log" && "$query" leaks --files jeheap_dump.1.heap jeheap_dump.2.heap jeheap_dump.3.heap \
    --step 1h --format json --no-symbolize) >"$dir/files.json" 2>"$dir/files.err" ||
    fail "leaks --files failed: $(cat "$dir/files.err")"
grep -q '"node": *"log"' "$dir/files.json" || fail "--files node is not the folder's name: $(grep -o '"node": *"[^"]*"' "$dir/files.json" | head -n 1)"
echo "ok: import and leaks --dir skip 3 non-profiles; --files node named log"
