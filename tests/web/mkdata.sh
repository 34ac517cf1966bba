#!/bin/sh
# Fill a folder source for hf-web with real jemalloc dumps made by jefixture
# (MALLOC_CONF=prof:true,lg_prof_sample:0: every allocation recorded).
#
#   mkdata.sh JEFIXTURE OUTDIR
#
# be-1 (doris) and be-2 (starrocks): four dumps each (be-2's latest turned
# into collapsed stacks by `jeprof --collapsed`, a second format); be-2
# works at 3x scale so it stands out in the fleet. be-3 (starrocks): raw heap_v2 dumps, addresses only. be-4: a node
# whose last poll failed. Snapshot times are spread over the last hours with
# touch so charts have a time axis.
set -eu
fx=$1
out=$2
rm -rf "$out"
mkdir -p "$out/be-1" "$out/be-2" "$out/be-3" "$out/be-4"
export MALLOC_CONF=prof:true,lg_prof_sample:0
"$fx" --scale 1 "$out/be-1/d1.heap" "$out/be-1/d2.heap" "$out/be-1/d3.heap" "$out/be-1/d4.heap" &
"$fx" --scale 3 "$out/be-2/d1.heap" "$out/be-2/d2.heap" "$out/be-2/d3.heap" "$out/be-2/d4.heap" &
"$fx" --scale 2 "$out/be-3/d1.heap" "$out/be-3/d2.heap" "$out/be-3/d3.heap" &
wait
unset MALLOC_CONF
echo doris > "$out/be-1/.kind"
echo starrocks > "$out/be-2/.kind"
echo starrocks > "$out/be-3/.kind"
echo doris > "$out/be-4/.kind"
echo "connect to 127.0.0.1:8040 refused" > "$out/be-4/.error"
# be-3's latest snapshot carries StarRocks figures whose query tracker (1 MiB) counts
# far less than the heap's query stacks hold: a tracker disagreement and the
# Doris guide's finding, for /metrics.
cat > "$out/be-3/d3.heap.figures" <<'EOF'
starrocks_be_query_mem_bytes 1048576
starrocks_be_metadata_mem_bytes 0
EOF
if command -v jeprof >/dev/null 2>&1; then
    # The folder source symbolizes raw dumps itself; one dump goes through
    # jeprof so the data also holds a collapsed file (another format).
    for d in "$out/be-2/d4.heap"; do
        jeprof --collapsed "$fx" "$d" > "${d%.heap}.collapsed" 2>/dev/null &
    done
    wait
    for d in "$out/be-2/d4.heap"; do
        if [ -s "${d%.heap}.collapsed" ]; then rm "$d"; else rm -f "${d%.heap}.collapsed"; fi
    done
fi
h=4
for f in d1 d2 d3 d4; do
    for n in be-1 be-2 be-3; do
        for ext in heap collapsed; do
            [ -f "$out/$n/$f.$ext" ] && touch -d "-$h hours" "$out/$n/$f.$ext"
        done
    done
    h=$((h - 1))
done
exit 0
