#!/bin/bash
# The demo's metadata caches are sized so that sampling sees every entry
# (dbnode.cc's header): on a real dump of each C++ kind and role that keeps
# one, the cache's stack must hold objects of at least 8 sample periods, so
# jemalloc samples each with probability 1 - e^-8 and a steady cache that
# turns over does not walk into a leak verdict (query/INTERNALS.md §4).
#
#   test-sampling.sh BUILD_DIR
set -u
build=$1
dbnode=$build/tests/demo/dbnode
query=$build/query/query
work=$(mktemp -d "${TMPDIR:-/tmp}/hf-demo-sampling.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fails=0

# dump KIND ROLE OUT: start a node (caches warm), take one dump, stop it.
dump() {
    local kind=$1 role=$2 out=$3 port="" path
    MALLOC_CONF="prof:true,prof_active:true,lg_prof_sample:16" \
        "$dbnode" --kind "$kind" --role "$role" --dir "$work" --tick 0 >"$work/node.out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/^ready http=\([0-9]*\).*/\1/p' "$work/node.out")
        [ -n "$port" ] && break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "dbnode $kind $role did not say ready:"
        cat "$work/node.out"
        return 1
    fi
    if [ "$kind" = doris ]; then
        path=$(curl -fsS "http://127.0.0.1:$port/jeheap/dump" | sed -n 's/.*dump file path: //p')
        cp "$path" "$out"
    else
        curl -fsS -o "$out" "http://127.0.0.1:$port/pprof/heap"
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null
    pid=""
}

for kr in "doris steady" "doris leak" "starrocks steady" "starrocks leak"; do
    set -- $kr
    heap=$work/$1-$2.heap
    if ! dump "$1" "$2" "$heap"; then
        echo "not ok - $1 $2: no dump"
        fails=$((fails + 1))
        continue
    fi
    period=$("$query" top "$heap" --format json --no-symbolize | sed -n 's/^ *"period": \([0-9]*\).*/\1/p')
    # Per stack (allocator frames kept: the cache's malloc of its block is a
    # stack of its own, apart from the small objects around it), bytes and
    # objects; the cache's stack is the one of its function holding most.
    for s in inuse_space inuse_objects; do
        "$query" top "$heap" --binary "$dbnode" --no-cache --format collapsed --keep-allocator \
            --sample $s >"$work/$s.txt"
    done
    verdict=$(awk -v period="$period" '
        NR == FNR { if ($0 ~ /TabletSchema::(init_from_pb|_init_columns)/) {
                        v = $NF; $NF = ""; bytes[$0] = v } next }
        ($NF != "") { v = $NF; $NF = ""; if ($0 in bytes) objs[$0] = v }
        END {
            best = ""
            for (k in bytes) if (best == "" || bytes[k] > bytes[best]) best = k
            if (best == "" || objs[best] == 0) { print "no cache stack"; exit }
            avg = bytes[best] / objs[best]
            # 1% under: the dump holds unbiased counts, rounded
            printf "%s: %.0f objects of %.0f KiB on average, %.1f sample periods of %d\n",
                   (avg >= 0.99 * 8 * period ? "ok" : "small"), objs[best], avg / 1024, avg / period, period
        }' "$work/inuse_space.txt" "$work/inuse_objects.txt")
    case $verdict in
    ok:*) echo "ok - $1 $2 metadata cache: ${verdict#ok: }" ;;
    *)
        echo "not ok - $1 $2 metadata cache: objects under 8 sample periods ($verdict)"
        fails=$((fails + 1))
        ;;
    esac
done
exit $((fails > 0))
