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
UNITS=${UNITS:-40}
FUNCS=${FUNCS:-128}
ITERS=${ITERS:-15000}
HERE=$(cd "$(dirname "$0")" && pwd)
SYMTOOL=$BUILD/tests/sym/symtool
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
TIMEOUT=${TIMEOUT:-900}
mkdir -p "$WORK"
cd "$WORK"

if [ ! -x bigprog ] || [ ! -f src/unit$(printf %03d $((UNITS - 1))).cc.o ]; then
    # Incremental: the generator is deterministic, so units compiled by an
    # earlier run are reused (main.cc always changes with UNITS).
    python3 "$HERE/sym-gen.py" --out src --units "$UNITS" --funcs "$FUNCS" --iters "$ITERS"
    rm -f src/main.cc.o
    t0=$(date +%s)
    for f in src/*.cc; do [ -f "$f.o" ] || echo "$f"; done | xargs -r -P2 -I{} g++ -g -O2 -c {} -o {}.o
    g++ -o bigprog src/*.cc.o
    t1=$(date +%s)
    echo "compile: $((t1 - t0)) s on 2 cores for what was missing ($UNITS units x $FUNCS functions in all)" | tee -a compile.txt
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
python3 "$HERE/sym-addrs.py" "$heap" bigprog > addrs.txt
echo "profile: $(grep -c '^@' "$heap") distinct stacks, $(wc -l < addrs.txt) unique addresses in bigprog"
cat bigprog > /dev/null # page cache warm for everyone

# measure NAME CMD...: wall seconds, CPU seconds (user + sys) and peak RSS
# (MB) into $NAME.time. The machine may be shared: CPU time is the steadier
# figure under load, wall time the one a user waits for.
measure() {
    name=$1
    shift
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "$name: skipped ($1 not installed)"
        echo "- - -" > "$name.time"
        return
    fi
    /usr/bin/time -v timeout "$TIMEOUT" "$@" > "$name.out" 2> "$name.err" || true
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$name.err")
    cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { print s }' "$name.err")
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$name.err")
    echo "$wall $cpu $rss" > "$name.time"
    printf '%-22s %8.3f s wall %8.3f s cpu %6s MB\n' "$name" "$wall" "$cpu" "$rss"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
echo "--- same unique addresses of bigprog"
measure heapfleet-cold "$SYMTOOL" addr bigprog - < addrs.txt
measure llvm-symbolizer llvm-symbolizer --obj=bigprog < addrs.txt
measure addr2line addr2line -i -f -C -e bigprog < addrs.txt
if [ "${SKIP_EU:-0}" = 1 ]; then echo "- - -" > eu-addr2line.time; echo "eu-addr2line: skipped (SKIP_EU=1)"; else
    measure eu-addr2line eu-addr2line -i -f -C -e bigprog < addrs.txt
fi
echo "--- whole profile, end to end"
measure heapfleet-profile "$SYMTOOL" heap --stats --binary bigprog "$heap"
measure jeprof-text jeprof --text bigprog "$heap"
"$SYMTOOL" heap --stats --repeat 2 --binary bigprog "$heap" 2> warm.err > /dev/null
grep '^symtool: locations' warm.err | tail -1 > warm.txt
warm=$(sed 's/.*time_ms=//' warm.txt)
echo "heapfleet warm (cached) sym_profile: $warm ms  [$(cat warm.txt | cut -d' ' -f2-8)]"

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
