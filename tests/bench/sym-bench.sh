#!/bin/sh
# Symbolization benchmark (issue 3). Not part of `meson test`.
#
#   tests/bench/sym-bench.sh BUILD_DIR [WORK_DIR]
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
# Wall time and peak RSS come from /usr/bin/time -v. The built program is
# kept in WORK_DIR and reused by later runs.
set -eu
BUILD=$(cd "${1:?usage: sym-bench.sh BUILD_DIR [WORK_DIR]}" && pwd)
WORK=${2:-/tmp/hf-sym-bench}
UNITS=${UNITS:-32}
FUNCS=${FUNCS:-128}
ITERS=${ITERS:-15000}
HERE=$(cd "$(dirname "$0")" && pwd)
SYMTOOL=$BUILD/tests/sym/symtool
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TIMEOUT=${TIMEOUT:-900}
mkdir -p "$WORK"
cd "$WORK"

if [ ! -x bigprog ]; then
    python3 "$HERE/sym-gen.py" --out src --units "$UNITS" --funcs "$FUNCS" --iters "$ITERS"
    t0=$(date +%s)
    ls src/*.cc | xargs -P2 -I{} g++ -g -O2 -c {} -o {}.o
    g++ -o bigprog src/*.o
    t1=$(date +%s)
    echo "compile: $((t1 - t0)) s for $UNITS units x $FUNCS functions on 2 cores" | tee compile.txt
    rm -f big.*.heap
fi
cat compile.txt
dwarf=$(readelf -SW bigprog | awk '$2 ~ /^\.debug_/ { s += strtonum("0x" $6) } END { printf "%.1f", s / 1048576 }')
echo "binary: $(du -m bigprog | cut -f1) MB, DWARF $dwarf MB"

if ! ls big.*.heap >/dev/null 2>&1; then
    LD_PRELOAD=$JEMALLOC MALLOC_CONF="prof:true,lg_prof_sample:0,prof_final:true,prof_prefix:$WORK/big" ./bigprog
fi
heap=$(ls big.*.heap | tail -1)
python3 "$HERE/sym-addrs.py" "$heap" bigprog > addrs.txt
echo "profile: $(grep -c '^@' "$heap") distinct stacks, $(wc -l < addrs.txt) unique addresses in bigprog"
cat bigprog > /dev/null # page cache warm for everyone

# measure NAME CMD...: wall seconds and peak RSS (MB) into $NAME.time
measure() {
    name=$1
    shift
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "$name: skipped ($1 not installed)"
        echo "- -" > "$name.time"
        return
    fi
    /usr/bin/time -v timeout "$TIMEOUT" "$@" > "$name.out" 2> "$name.err" || true
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$name.err")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$name.err")
    echo "$wall $rss" > "$name.time"
    printf '%-22s %8.3f s %6s MB\n' "$name" "$wall" "$rss"
}

echo "--- same unique addresses of bigprog"
measure heapfleet-cold "$SYMTOOL" addr bigprog - < addrs.txt
measure llvm-symbolizer llvm-symbolizer --obj=bigprog < addrs.txt
measure addr2line addr2line -i -f -C -e bigprog < addrs.txt
measure eu-addr2line eu-addr2line -i -f -C -e bigprog < addrs.txt
echo "--- whole profile, end to end"
measure heapfleet-profile "$SYMTOOL" heap --stats --binary bigprog "$heap"
measure jeprof-text jeprof --text bigprog "$heap"
"$SYMTOOL" heap --stats --repeat 2 --binary bigprog "$heap" 2> warm.err > /dev/null
grep '^symtool: locations' warm.err | tail -1 > warm.txt
warm=$(sed 's/.*time_ms=//' warm.txt)
echo "heapfleet warm (cached) sym_profile: $warm ms  [$(cat warm.txt | cut -d' ' -f2-8)]"

echo "--- ratios (peer / heapfleet)"
hc=$(cut -d' ' -f1 heapfleet-cold.time)
hm=$(cut -d' ' -f2 heapfleet-cold.time)
for t in llvm-symbolizer addr2line eu-addr2line; do
    set -- $(cat $t.time)
    [ "$1" = "-" ] && continue
    awk -v n=$t -v a="$1" -v b="$hc" -v m="$2" -v hm="$hm" \
        'BEGIN { printf "%-16s time %7.1fx   peak RSS %5.1fx\n", n, a / b, m / hm }'
done
set -- $(cat jeprof-text.time)
hp=$(cut -d' ' -f1 heapfleet-profile.time)
hpm=$(cut -d' ' -f2 heapfleet-profile.time)
awk -v a="$1" -v b="$hp" -v m="$2" -v hm="$hpm" \
    'BEGIN { printf "jeprof --text    time %7.1fx   peak RSS %5.1fx   (end to end)\n", a / b, m / hm }'
awk -v w="$warm" 'BEGIN { printf "warm cache: %s ms for the whole profile (target < 50 ms)\n", w }'
