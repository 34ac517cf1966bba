#!/bin/sh
# Production scale (issue 11): Doris and StarRocks BEs carry 1-2 GB of DWARF.
# Builds, once, the generated C++ program of tests/bench/sym-gen.py large
# enough for >= 500 MB of DWARF (templates and inlined standard containers
# in every unit; UNITS=384 x FUNCS=128 by default, about 1.35 MB of DWARF a
# unit with g++ 12 -O2), then runs tests/bench/sym-bench.sh on it: cold time
# and peak RSS against llvm-symbolizer on the profile's unique addresses and
# on one CU's functions (peak RSS must follow the CUs touched), jeprof end
# to end, and the warm query. The full size is not run by CI or run-all:
# compiling every unit was estimated at hours of CPU on a loaded box, so
# only BASE=16 units are compiled and the others are clones of them with
# their own names (sym-bench.sh BASE, sym-gen.py --clone): 67 s of g++ and
# 88 s to clone and link on one core here, 514.7 MB of DWARF. WORK_DIR
# keeps the program.
#
#   tests/bench/sym-scale.sh [--smoke] BUILD_DIR [WORK_DIR]   (default /tmp/hf-sym-scale)
#
# --smoke: the same wrapper and steps on a tiny generated program (UNITS=3 x
# FUNCS=4, BASE=2: unit 2 is a clone; sym-bench.sh --smoke in a temporary
# WORK_DIR), with the DWARF size only required to be read, not >= 500 MB;
# fails when a step fails, a figure is missing, or the clone differs from
# what g++ makes of its source (DWARF with string offsets left out, since
# g++ orders .debug_str by its own hash; code, relocations, symbols and
# section headers as they are). CI runs it: suite bench-smoke. Prints sym-bench's
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
    export UNITS=${UNITS:-3} FUNCS=${FUNCS:-4} ITERS=${ITERS:-300} BASE=${BASE:-2} SKIP_EU=${SKIP_EU:-1} TIMEOUT=${TIMEOUT:-120}
    if [ -n "${2:-}" ]; then
        WORK=$2
    else
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/hf-sym-scale-smoke.XXXXXX")
        trap 'rm -rf "$WORK"' EXIT
    fi
    MIN_MB=0
else
    WORK=${2:-/tmp/hf-sym-scale}
    export UNITS=${UNITS:-384} FUNCS=${FUNCS:-128} BASE=${BASE:-16} SKIP_EU=${SKIP_EU:-1} TIMEOUT=${TIMEOUT:-3600}
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

# A clone is what g++ makes of its unit's source. The last unit is one
# whenever BASE < UNITS.
last=$(printf %03d $((UNITS - 1)))
if [ -n "$SMOKE" ] && [ "$BASE" != 0 ] && [ $((UNITS - 1)) -ge "$BASE" ]; then
    # from WORK_DIR, as sym-bench.sh compiles (the paths are in the DWARF)
    (cd "$WORK" && g++ -g -O2 -c "src/unit$last.cc" -o real.o)
    dump() {
        objdump --dwarf=info,abbrev,line,aranges,ranges "$1" | sed -E 's/offset: (0x[0-9a-f]+|0)\b/offset: X/g' | tail -n +3
        objdump -d -r "$1" | tail -n +3
        nm "$1"
        readelf -SW "$1"
    }
    dump "$WORK/src/unit$last.cc.o" > "$WORK/clone.dump"
    dump "$WORK/real.o" > "$WORK/real.dump"
    if ! cmp -s "$WORK/clone.dump" "$WORK/real.dump"; then
        echo "sym-scale: unit $last cloned differs from unit $last compiled:" >&2
        diff "$WORK/clone.dump" "$WORK/real.dump" | head -20 >&2
        exit 1
    fi
    echo "sym-scale: unit $last cloned = compiled ($(wc -l < "$WORK/real.dump") lines of dumps)"
fi
