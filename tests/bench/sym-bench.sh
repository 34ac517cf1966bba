#!/bin/sh
# Symbolization benchmark (issue 3). Full size by hand or run-all; --smoke
# in `meson test --suite bench-smoke`.
#
#   tests/bench/sym-bench.sh [--smoke] BUILD_DIR [WORK_DIR]
#
# Generates a C++ program whose DWARF is >= 50 MB (tests/bench/sym-gen.py;
# UNITS, FUNCS, ITERS override its size), builds it with -g -O2 on two
# cores, runs it under jemalloc with every allocation profiled to get a heap
# profile with >= 10k distinct stacks, then times, side by side on the same
# unique addresses of that binary:
#   heapfleet cold  symtool addr (the batch API) in a fresh process
#   addr2line -i, eu-addr2line -i, llvm-symbolizer
# and end to end on the whole profile (every object, parse to output):
#   heapfleet cold  symtool heap;   jeprof --text
#   heapfleet warm  the second symbolization of the profile in one process
#                   (memory cache; sym_profile time only)
# and across processes (issue 11): `query top --binary` with --no-cache
# (cold), then twice on an empty $XDG_CACHE_HOME (the second run reads the
# on-disk cache); the three outputs must be byte-identical. Also the cold
# batch with libdwarf's allocation tracking back on
# (HEAPFLEET_LIBDWARF_TRACKING=1), the before/after of turning it off.
# Wall time, CPU time and peak RSS come from /usr/bin/time -v; RESULT lines
# feed tests/bench/run-all's table. The built program is kept in WORK_DIR
# and reused by later runs.
#
# --smoke: the same steps, binaries, flags and peers on a tiny program
# (UNITS=2 x FUNCS=8, ITERS=300: compiles in seconds) built in a fresh
# WORK_DIR (a temporary one by default, removed at the end); fails when a
# step fails or a RESULT figure is missing (CI runs it: suite bench-smoke).
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then
    SMOKE=1
    shift
fi
BUILD=$(cd "${1:?usage: sym-bench.sh [--smoke] BUILD_DIR [WORK_DIR]}" && pwd)
if [ -n "$SMOKE" ]; then
    UNITS=${UNITS:-2}
    FUNCS=${FUNCS:-8}
    ITERS=${ITERS:-300}
    TIMEOUT=${TIMEOUT:-120}
    if [ -n "${2:-}" ]; then
        WORK=$2
    else
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/hf-sym-smoke.XXXXXX")
        trap 'rm -rf "$WORK"' EXIT
    fi
    # A program of other sizes left in WORK_DIR would be reused: start clean.
    rm -rf "$WORK/src" "$WORK/bigprog" "$WORK"/big.*.heap "$WORK/compile.txt"
else
    WORK=${2:-/tmp/hf-sym-bench}
fi
UNITS=${UNITS:-40}
FUNCS=${FUNCS:-128}
ITERS=${ITERS:-15000}
# BASE=N (sym-scale.sh): only units 0..N-1 are compiled; unit U is unit
# U % N's code under its own names, its object file unit U % N's with the
# names rewritten in place (sym-gen.py --clone; the ids are 3 digits wide so
# every offset stays valid). 0: every unit compiled.
BASE=${BASE:-0}
# JOBS: g++ processes at once (2); BUILD_ONLY=1: stop once the program
# and its profile are made (to build the scale program ahead of timing).
JOBS=${JOBS:-2}
# A program of other sizes left in WORK_DIR (params.txt says which) is not
# this one: with other FUNCS or ITERS every unit differs and all is dropped;
# with other UNITS the compiled units of the same FUNCS and ITERS are kept
# (the generator is deterministic), those past UNITS removed, and the
# program is linked and profiled again.
PARAMS="funcs=$FUNCS iters=$ITERS"
GENFLAGS=
if [ "$BASE" != 0 ]; then
    PARAMS="$PARAMS base=$BASE"
    GENFLAGS="--width 3 --base $BASE"
fi
if [ -d "$WORK" ] && [ "$(sed -n 1p "$WORK/params.txt" 2>/dev/null)" != "$PARAMS" ]; then
    rm -rf "$WORK/src" "$WORK/bigprog" "$WORK"/big.*.heap "$WORK/compile.txt"
elif [ -d "$WORK" ] && [ "$(sed -n 2p "$WORK/params.txt" 2>/dev/null)" != "units=$UNITS" ]; then
    rm -f "$WORK/bigprog" "$WORK"/big.*.heap
    for f in "$WORK"/src/unit*.cc; do
        [ -f "$f" ] || continue
        u=${f##*/unit}
        u=${u%.cc}
        [ "$u" -lt "$UNITS" ] || rm -f "$f" "$f.o" # test(1) reads 007 as 7
    done
fi
HERE=$(cd "$(dirname "$0")" && pwd)
SYMTOOL=$BUILD/tests/sym/symtool
QUERY=$BUILD/query/query
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TIMEOUT=${TIMEOUT:-900}
mkdir -p "$WORK"
cd "$WORK"
printf '%s\nunits=%s\n' "$PARAMS" "$UNITS" >params.txt
for b in "$SYMTOOL" "$QUERY"; do
    [ -x "$b" ] || { echo "sym-bench: $b not built (ninja -C $BUILD)" >&2; exit 2; }
done

if [ ! -x bigprog ] || [ ! -f src/unit$(printf %03d $((UNITS - 1))).cc.o ]; then
    # Incremental: the generator is deterministic, so units compiled by an
    # earlier run are reused (main.cc always changes with UNITS).
    python3 "$HERE/sym-gen.py" --out src --units "$UNITS" --funcs "$FUNCS" --iters "$ITERS" $GENFLAGS
    rm -f src/main.cc.o
    t0=$(date +%s)
    for f in src/*.cc; do
        [ -f "$f.o" ] && continue
        u=${f##*/unit}
        u=${u%.cc}
        case $u in *[!0-9]*) echo "$f"; continue ;; esac
        [ "$BASE" = 0 ] || [ "$u" -lt "$BASE" ] && echo "$f" # test(1) reads 007 as 7
    done | xargs -r -P"$JOBS" -I{} g++ -g -O2 -c {} -o {}.o
    t1=$(date +%s)
    clones=0
    if [ "$BASE" != 0 ]; then
        u=$BASE
        while [ "$u" -lt "$UNITS" ]; do
            o=src/unit$(printf %03d "$u").cc.o
            [ -f "$o" ] || python3 "$HERE/sym-gen.py" --width 3 \
                --clone "src/unit$(printf %03d $((u % BASE))).cc.o" "$o" $((u % BASE)) "$u"
            u=$((u + 1))
            clones=$((clones + 1))
        done
    fi
    g++ -o bigprog src/*.cc.o
    t2=$(date +%s)
    echo "compile: $((t1 - t0)) s of g++ on $JOBS cores for what was missing, then $((t2 - t1)) s to clone $clones units and link ($UNITS units x $FUNCS functions in all) BASE=$BASE" | tee -a compile.txt
    rm -f big.*.heap
fi
cat compile.txt
dwarf=$(readelf -SW bigprog | python3 -c 'import sys
s = 0
for l in sys.stdin:
    f = l.replace("[ ", "[").split()
    if len(f) > 5 and f[1].startswith(".debug_"):
        s += int(f[5], 16)
print("%.1f" % (s / 1048576))')
echo "binary: $(du -m bigprog | cut -f1) MB, DWARF $dwarf MB"

if ! ls big.*.heap >/dev/null 2>&1; then
    LD_PRELOAD=$JEMALLOC MALLOC_CONF="prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$WORK/big" ./bigprog
fi
heap=$(ls big.*.heap | tail -1)
[ -n "$heap" ] || { echo "sym-bench: bigprog wrote no heap profile (jemalloc: $JEMALLOC)" >&2; exit 1; }
if [ "${BUILD_ONLY:-0}" = 1 ]; then
    echo "sym-bench: BUILD_ONLY=1: program and profile made, nothing timed"
    exit 0
fi
python3 "$HERE/sym-addrs.py" "$heap" bigprog > addrs.txt
echo "profile: $(grep -c '^@' "$heap") distinct stacks, $(wc -l < addrs.txt) unique addresses in bigprog"
cat bigprog > /dev/null # page cache warm for everyone

# measure NAME CMD...: wall seconds, CPU seconds (user + sys) and peak RSS
# (MB) into $NAME.time. The machine may be shared: CPU time is the steadier
# figure under load, wall time the one a user waits for. With --smoke a
# command that fails (or times out) fails the bench.
measure() {
    name=$1
    shift
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "$name: skipped ($1 not installed)"
        echo "- - -" > "$name.time"
        return
    fi
    rc=0
    /usr/bin/time -v timeout "$TIMEOUT" "$@" > "$name.out" 2> "$name.err" || rc=$?
    if [ -n "$SMOKE" ] && [ "$rc" != 0 ]; then
        echo "sym-bench: $name failed (exit $rc): $*" >&2
        grep -v '^	' "$name.err" | tail -5 >&2
        exit 1
    fi
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$name.err")
    cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$name.err")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$name.err")
    echo "$wall $cpu $rss" > "$name.time"
    printf '%-22s %8.3f s wall %8.3f s cpu %6s MB\n' "$name" "$wall" "$cpu" "$rss"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "--- same unique addresses of bigprog"
measure heapfleet-cold "$SYMTOOL" addr bigprog - < addrs.txt
measure heapfleet-tracking env HEAPFLEET_LIBDWARF_TRACKING=1 "$SYMTOOL" addr bigprog - < addrs.txt
measure llvm-symbolizer llvm-symbolizer --inlining --demangle --obj=bigprog < addrs.txt
measure addr2line addr2line -i -f -C -e bigprog < addrs.txt
if [ "${SKIP_EU:-0}" = 1 ]; then echo "- - -" > eu-addr2line.time; echo "eu-addr2line: skipped (SKIP_EU=1)"; else
    measure eu-addr2line eu-addr2line -i -f -C -e bigprog < addrs.txt
fi
echo "--- the same addresses, debug sections compressed (zlib, as Debian's -dbgsym files have them)"
objcopy --compress-debug-sections=zlib bigprog bigprog-zlib
measure heapfleet-zlib "$SYMTOOL" addr bigprog-zlib - < addrs.txt
measure llvm-zlib llvm-symbolizer --inlining --demangle --obj=bigprog-zlib < addrs.txt
if ! cmp -s heapfleet-cold.out heapfleet-zlib.out; then
    echo "sym-bench: compressed debug sections give other answers" >&2
    diff heapfleet-cold.out heapfleet-zlib.out | head -5 >&2
    exit 1
fi
echo "--- one CU's functions only (peak RSS must follow the CUs touched, not the binary)"
# unit 0's functions: _ZN8bench_u05f_0_1Ejj, or with BASE _ZN10bench_u0007f_000_1Ejj
nm bigprog | awk '$2 ~ /^[tT]$/ && $3 ~ /bench_u0+[0-9]f_0+_[0-9]+E/ { print "0x" $1 }' | head -400 > one-cu.txt
measure heapfleet-one-cu "$SYMTOOL" addr bigprog - < one-cu.txt
measure llvm-one-cu llvm-symbolizer --inlining --demangle --obj=bigprog < one-cu.txt
echo "--- whole profile, end to end"
measure heapfleet-profile "$SYMTOOL" heap --stats --binary bigprog "$heap"
measure jeprof-text jeprof --text bigprog "$heap"
"$SYMTOOL" heap --stats --repeat 2 --binary bigprog "$heap" 2> warm.err > /dev/null
grep '^symtool: locations' warm.err | tail -1 > warm.txt
warm=$(sed 's/.*time_ms=//' warm.txt)
[ -n "$warm" ] || [ -z "$SMOKE" ] || { echo "sym-bench: no warm timing from symtool heap --repeat 2" >&2; exit 1; }
echo "heapfleet warm (cached) sym_profile: $warm ms  [$(cat warm.txt | cut -d' ' -f2-8)]"

echo "--- query top --binary, across processes (on-disk symbol cache)"
rm -rf xdg
measure query-nocache "$QUERY" top --no-cache --binary bigprog "$heap" --top 0 --lines
cp query-nocache.out query-nocache.txt
measure query-first env XDG_CACHE_HOME="$WORK/xdg" "$QUERY" top --binary bigprog "$heap" --top 0 --lines
cp query-first.out query-first.txt
measure query-warm env XDG_CACHE_HOME="$WORK/xdg" "$QUERY" top --binary bigprog "$heap" --top 0 --lines
if cmp -s query-nocache.txt query-first.txt && cmp -s query-first.txt query-warm.out; then
    echo "outputs: --no-cache, first and warm run byte-identical"
else
    echo "outputs DIFFER between --no-cache, first and warm runs" >&2
    exit 1
fi

echo "--- ratios (peer / heapfleet): wall, cpu, peak RSS"
set -- $(cat heapfleet-cold.time)
hw=$1 hc=$2 hm=$3
for t in llvm-symbolizer addr2line eu-addr2line; do
    set -- $(cat $t.time)
    [ "$1" = "-" ] && continue
    awk -v n=$t -v w="$1" -v c="$2" -v m="$3" -v hw="$hw" -v hc="$hc" -v hm="$hm" \
        'BEGIN { printf "%-16s wall %6.1fx  cpu %6.1fx  rss %5.2fx\n", n, w / hw, c / hc, m / hm }'
done
set -- $(cat heapfleet-profile.time)
pw=$1 pc=$2 pm=$3
set -- $(cat jeprof-text.time)
awk -v w="$1" -v c="$2" -v m="$3" -v hw="$pw" -v hc="$pc" -v hm="$pm" \
    'BEGIN { printf "jeprof --text    wall %6.1fx  cpu %6.1fx  rss %5.2fx  (end to end)\n", w / hw, c / hc, m / hm }'
awk -v w="$warm" 'BEGIN { printf "warm cache: %s ms for the whole profile (target < 50 ms)\n", w }'
set -- $(cat query-warm.time)
qw=$1 qc=$2 qm=$3
set -- $(cat query-nocache.time)
awk -v w="$1" -v c="$2" -v m="$3" -v hw="$qw" -v hc="$qc" -v hm="$qm" \
    'BEGIN { printf "query warm/cold  wall %6.1fx  cpu %6.1fx  rss %5.2fx  (second run: %s s wall, %s s cpu)\n", w / hw, c / hc, m / hm, hw, hc }'
set -- $(cat heapfleet-tracking.time)
awk -v c="$2" -v hc="$hc" 'BEGIN { printf "libdwarf tracking off saves %.0f%% cpu (on: %s s, off: %s s)\n", 100 * (1 - hc / c), c, hc }'

# RESULT lines for run-all: figure, value, unit, goal, peer, peer value.
# Kept in results.txt too for the --smoke check below.
: > results.txt
r() { printf 'RESULT\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" | tee -a results.txt; }
set -- $(cat heapfleet-cold.time); hcold_c=$2 hcold_m=$3
set -- $(cat llvm-symbolizer.time)
[ "$1" != "-" ] && r "sym cold cpu (same addresses)" "$hcold_c" s "<= 1/1.5 of peer" llvm-symbolizer "$2"
[ "$1" != "-" ] && r "sym cold peak RSS" "$hcold_m" MB "< peer" llvm-symbolizer "$3"
set -- $(cat addr2line.time)
[ "$1" != "-" ] && r "sym cold cpu vs addr2line" "$hcold_c" s "-" "addr2line -i" "$2"
set -- $(cat heapfleet-zlib.time); zc=$2
set -- $(cat llvm-zlib.time)
[ "$1" != "-" ] && r "sym cold cpu, compressed debug sections" "$zc" s "< peer" llvm-symbolizer "$2"
set -- $(cat heapfleet-profile.time); pc=$2
set -- $(cat jeprof-text.time)
r "sym end to end cpu" "$pc" s "<= 1/15 of peer" "jeprof --text" "$2"
set -- $(cat query-nocache.time); qnc=$2 qnw=$1
set -- $(cat query-warm.time)
r "query top warm wall" "$1" s "<= 0.25 s, <= 1/5 of peer" "same, --no-cache" "$qnw"
r "query top warm cpu" "$2" s "<= 1/5 of peer" "same, --no-cache" "$qnc"
set -- $(cat heapfleet-one-cu.time); oc=$3
set -- $(cat llvm-one-cu.time)
[ "$1" != "-" ] && r "sym peak RSS, one CU's addresses" "$oc" MB "< peer" llvm-symbolizer "$3"
set -- $(cat heapfleet-tracking.time)
r "sym cold cpu, libdwarf tracking off" "$hcold_c" s "< peer" "tracking on" "$2"
r "sym warm, whole profile (memory cache)" "$warm" ms "< 50 ms" - -

# --smoke: every figure is there and a number, and so is each peer's when
# the peer is installed (the peers' figures above are printed only then).
if [ -n "$SMOKE" ]; then
    want="sym end to end cpu|query top warm wall|query top warm cpu|sym cold cpu, libdwarf tracking off|sym warm, whole profile (memory cache)"
    if command -v llvm-symbolizer >/dev/null 2>&1; then
        want="$want|sym cold cpu (same addresses)|sym cold peak RSS|sym peak RSS, one CU's addresses"
        want="$want|sym cold cpu, compressed debug sections"
    fi
    command -v addr2line >/dev/null 2>&1 && want="$want|sym cold cpu vs addr2line"
    awk -F '\t' -v want="$want" -v jeprof="$(command -v jeprof || true)" '
        function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
        BEGIN { n = split(want, w, "|"); for (i = 1; i <= n; i++) need[w[i]] = 1 }
        { seen[$2] = 1
          if (!num($3)) { print "sym-bench: figure \"" $2 "\" is not a number: " $3; bad = 1 }
          if ($6 != "-" && !num($7) && ($6 != "jeprof --text" || jeprof != "")) {
              print "sym-bench: peer figure of \"" $2 "\" is not a number: " $7; bad = 1 } }
        END { for (f in need) if (!(f in seen)) { print "sym-bench: figure missing: " f; bad = 1 }
              exit bad }' results.txt >&2
    echo "sym-bench: smoke ok ($UNITS units x $FUNCS functions, DWARF $dwarf MB)"
fi
