#!/bin/sh
# Production scale (issue 11): Doris and StarRocks BEs carry 1-2 GB of DWARF.
# Builds, once, the generated C++ program of tests/bench/sym-gen.py large
# enough for >= 500 MB of DWARF (templates and inlined standard containers
# in every unit; UNITS=384 x FUNCS=128 by default, about 1.35 MB of DWARF a
# unit with g++ 12 -O2), then runs tests/bench/sym-bench.sh on it: cold time
# and peak RSS against llvm-symbolizer on the profile's unique addresses and
# on one CU's functions (peak RSS must follow the CUs touched), jeprof end
# to end, and the warm query. Not run by CI or run-all: the build takes
# hours of CPU (about 30 s of g++ a unit), and WORK_DIR keeps it.
#
#   tests/bench/sym-scale.sh BUILD_DIR [WORK_DIR]      (default /tmp/hf-sym-scale)
set -eu
BUILD=${1:?usage: sym-scale.sh BUILD_DIR [WORK_DIR]}
WORK=${2:-/tmp/hf-sym-scale}
HERE=$(cd "$(dirname "$0")" && pwd)
export UNITS=${UNITS:-384} FUNCS=${FUNCS:-128} SKIP_EU=${SKIP_EU:-1} TIMEOUT=${TIMEOUT:-3600}
mkdir -p "$WORK"
[ -f "$WORK/compile.txt" ] || : > "$WORK/compile.txt"
sh "$HERE/sym-bench.sh" "$BUILD" "$WORK" | tee "$WORK/sym-scale.txt"
mb=$(sed -n 's/^binary: .*DWARF \([0-9.]*\) MB$/\1/p' "$WORK/sym-scale.txt")
awk -v mb="$mb" 'BEGIN { if (mb + 0 < 500) { printf "sym-scale: only %s MB of DWARF; raise UNITS\n", mb; exit 1 } }'
