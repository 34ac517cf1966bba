#!/bin/sh
# libdwarf's allocation tracking is off (collector/sym/dwarf.c,
# tracking_init): everything libdwarf hands the symbolizer must be given back
# by the symbolizer, or it is lost for good. Valgrind checks that nothing is
# lost, on well-formed DWARF (symtool's own many CUs, worker threads on) and
# on the malformed files of the fuzz-elf corpus (where libdwarf makes errors).
# Skips (77) without valgrind.
# usage: dwarf-leaks.sh SYMTOOL FUZZ_ELF CORPUS_DIR JEFIXTURE
set -eu
symtool=$1 fuzz_elf=$2 corpus=$3 jefixture=$4
command -v valgrind >/dev/null 2>&1 || { echo "skip: valgrind not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
vg() { # vg NAME CMD...: valgrind's verdict on lost blocks
    name=$1
    shift
    valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=9 --num-callers=16 "$@" > "$dir/$name.out" 2> "$dir/$name.vg" ||
        { echo "FAIL: $name: valgrind reports errors or lost memory:"; grep -A18 'lost in loss\|Invalid' "$dir/$name.vg" | head -80; exit 1; }
    echo "ok: $name: $(grep -E 'no leaks are possible|definitely lost' "$dir/$name.vg" | head -1 | sed 's/^==[0-9]*== *//')"
}
vg fuzz-elf-corpus "$fuzz_elf" "$corpus"
# Every function of symtool (many CUs, so the prepare workers run) and of
# jefixture, at their entry and a few bytes in.
for bin in "$symtool" "$jefixture"; do
    nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ { print $1 }' |
        python3 -c 'import sys
for l in sys.stdin:
    a = int(l, 16)
    print(hex(a)); print(hex(a + 9))' > "$dir/addrs"
    vg "$(basename "$bin") ($(wc -l < "$dir/addrs") addresses)" "$symtool" addr --threads 2 "$bin" - < "$dir/addrs"
done
