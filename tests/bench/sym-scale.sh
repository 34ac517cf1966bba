#!/bin/sh
# Production scale (issue 11): Doris and StarRocks BEs carry 1-2 GB of DWARF.
# Builds, once, the generated C++ program of tests/bench/sym-gen.py large
# enough for >= 500 MB of DWARF (templates and inlined standard containers
# in every unit; UNITS=384 x FUNCS=128 by default, about 1.35 MB of DWARF a
# unit with g++ 12 -O2), then runs tests/bench/sym-bench.sh on it: cold time
# and peak RSS against llvm-symbolizer on the profile's unique addresses and
# on one CU's functions (peak RSS must follow the CUs touched), jeprof end
# to end, and the warm query. The full size is not run by CI or run-all:
# the build takes hours of CPU (about 30 s of g++ a unit), and WORK_DIR
# keeps it.
#
#   tests/bench/sym-scale.sh [--smoke] BUILD_DIR [WORK_DIR]   (default /tmp/hf-sym-scale)
#
# --smoke: the same wrapper and steps on a tiny generated program (UNITS=3 x
# FUNCS=4, sym-bench.sh --smoke in a temporary WORK_DIR), with the DWARF
# size only required to be read, not >= 500 MB; fails when a step fails or
# a figure is missing (CI runs it: suite bench-smoke). Prints sym-bench's
# RESULT lines, their figures prefixed "scale: " (run-all's table holds
# both benches), and one for the DWARF size.
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then
    SMOKE=--smoke
    shift
fi
BUILD=${1:?usage: sym-scale.sh [--smoke] BUILD_DIR [WORK_DIR]}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -n "$SMOKE" ]; then
    export UNITS=${UNITS:-3} FUNCS=${FUNCS:-4} ITERS=${ITERS:-300} SKIP_EU=${SKIP_EU:-1} TIMEOUT=${TIMEOUT:-120}
    if [ -n "${2:-}" ]; then
        WORK=$2
    else
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/hf-sym-scale-smoke.XXXXXX")
        trap 'rm -rf "$WORK"' EXIT
    fi
    MIN_MB=0
else
    WORK=${2:-/tmp/hf-sym-scale}
    export UNITS=${UNITS:-384} FUNCS=${FUNCS:-128} SKIP_EU=${SKIP_EU:-1} TIMEOUT=${TIMEOUT:-3600}
    MIN_MB=500
fi
mkdir -p "$WORK"
[ -f "$WORK/compile.txt" ] || : > "$WORK/compile.txt"
# sym-bench's own exit status, which the pipe into tee would hide
rm -f "$WORK/sym-bench.rc"
tab=$(printf '\t')
{ sh "$HERE/sym-bench.sh" $SMOKE "$BUILD" "$WORK" || echo $? > "$WORK/sym-bench.rc"; } |
    sed "s/^RESULT$tab/RESULT${tab}scale: /" | tee "$WORK/sym-scale.txt"
if [ -f "$WORK/sym-bench.rc" ]; then
    echo "sym-scale: sym-bench.sh failed (exit $(cat "$WORK/sym-bench.rc"))" >&2
    exit 1
fi
mb=$(sed -n 's/^binary: .*DWARF \([0-9.]*\) MB$/\1/p' "$WORK/sym-scale.txt")
[ -n "$mb" ] || { echo "sym-scale: no DWARF size in sym-bench.sh's output" >&2; exit 1; }
printf 'RESULT\tscale: DWARF of the generated program\t%s\tMB\t>= 500 MB\t-\t-\n' "$mb"
awk -v mb="$mb" -v min="$MIN_MB" 'BEGIN { if (mb + 0 < min) { printf "sym-scale: only %s MB of DWARF; raise UNITS\n", mb; exit 1 } }'
