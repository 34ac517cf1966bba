#!/bin/sh
# sym-bench.sh keeps its generated program in WORK_DIR between full runs. A
# run of other sizes must build its own: it reused the old program when
# FUNCS changed, and a larger one when UNITS shrank. Three full-mode runs
# of tiny sizes in one WORK_DIR; each must report the program it was asked
# for ("compile: ... (U units x F functions in all)").
#
#   sh tests/bench/sym-bench-sizes.sh BUILD_DIR
set -eu
BUILD=$(cd "${1:?usage: sym-bench-sizes.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/hf-sym-sizes.XXXXXX")
trap 'rm -rf "$W"' EXIT
for size in "2 8" "2 9" "1 9"; do
    set -- $size
    UNITS=$1 FUNCS=$2 ITERS=300 TIMEOUT=120 sh "$HERE/sym-bench.sh" "$BUILD" "$W/work" \
        >"$W/log" 2>&1 || { tail -n 20 "$W/log" >&2; exit 1; }
    want="($1 units x $2 functions in all)"
    if ! grep -qF "$want" "$W/log"; then
        echo "sym-bench-sizes: UNITS=$1 FUNCS=$2 ran on another program: $(grep '^compile:' "$W/log")" >&2
        exit 1
    fi
    echo "UNITS=$1 FUNCS=$2: $(grep '^compile:' "$W/log" | tail -n 1)"
done
