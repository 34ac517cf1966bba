#!/bin/bash
# soak: the real collector polling N fake nodes (one fakenode process,
# --cache) every INTERVAL for MINUTES, with the web API queried throughout
# (nodes, fleet, a snapshot's top and tree). A few nodes misbehave on
# purpose (hang, HTTP 500). Samples the collector's RSS every 10 s and prints
# the mean of the first and last 5 minutes (a third of the run each under 15
# minutes), the rounds done, and every error that is not one of the injected
# ones (the hanging nodes time out twice, 10 s each: --retries 1 keeps them
# within a 30 s round). In `meson test --setup long --suite long` as soak-300x5.
#
#   tests/bench/soak.sh [BUILD_DIR] [NODES] [MINUTES] [INTERVAL]
#                       (default: build 1000 30 30s; short: build 300 5 30s)
set -eu
BUILD=${1:-build}
NODES=${2:-1000}
MINUTES=${3:-30}
INTERVAL=${4:-30s}
COLLECTOR=$BUILD/collector/bin/collector
FAKENODE=$BUILD/tests/collector/fakenode
for b in "$COLLECTOR" "$FAKENODE"; do
    [ -x "$b" ] || { echo "soak: $b not built (ninja -C $BUILD)" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hp-soak.XXXXXX")
FN= C=
cleanup() {
    [ -n "$C" ] && kill "$C" 2>/dev/null
    [ -n "$FN" ] && kill "$FN" 2>/dev/null
    wait 2>/dev/null || true
    [ -n "${HP_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
BAD=10
"$FAKENODE" --cache --list "$WORK/be.list" --dir "$WORK/dumps" "starrocksx$((NODES - BAD))" \
    "starrocks:hangx$((BAD / 2))" "starrocks:500x$((BAD / 2))" >"$WORK/ports.txt" 2>"$WORK/fakenode.err" &
FN=$!
end=$((SECONDS + 120))
until grep -q ready "$WORK/ports.txt" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { echo "soak: fakenode did not start" >&2; exit 1; }
    sleep 0.2
done
"$COLLECTOR" --nodes "$WORK/be.list" --interval "$INTERVAL" --spread 5s --timeout 10s --retries 1 \
    --db "$WORK/hf.db" --listen 127.0.0.1:0 --static none --no-progress >"$WORK/stdout" 2>"$WORK/stderr" &
C=$!
end=$((SECONDS + 30))
until grep -q 'msg="serving the API and UI"' "$WORK/stderr" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { echo "soak: collector did not start" >&2; exit 1; }
    sleep 0.2
done
PORT=$(sed -n 's/.*url=http:\/\/[^:]*:\([0-9]*\)\/.*/\1/p' "$WORK/stderr" | head -n 1)
U=http://127.0.0.1:$PORT
t0=$SECONDS
stop=$((t0 + MINUTES * 60))
next_sample=$t0
queries=0 qfail=0
: >"$WORK/rss"
while [ $SECONDS -lt $stop ]; do
    kill -0 "$C" 2>/dev/null || { echo "soak: the collector died" >&2; exit 1; }
    if [ $SECONDS -ge $next_sample ]; then
        echo "$((SECONDS - t0)) $(awk '/VmRSS/ { print $2 }' /proc/$C/status)" >>"$WORK/rss"
        next_sample=$((next_sample + 10))
    fi
    for p in /api/v1/nodes "/api/v1/fleet" /api/v1/snapshots/starrocks-ok-1/top \
        "/api/v1/snapshots/starrocks-ok-1/tree" /metrics; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$U$p" || true)
        queries=$((queries + 1))
        case $code in 200 | 404) ;; *) qfail=$((qfail + 1)); echo "query $p -> $code" >>"$WORK/qfail" ;; esac
    done
    sleep 1
done
rounds=$(grep -c 'msg="round finished"' "$WORK/stderr" || true)
# Errors other than the injected nodes' (hang, 500).
other=$(grep 'level=\(warn\|error\)' "$WORK/stderr" | grep -v 'node=starrocks-hang\|node=starrocks-500' |
    grep -v 'abandoned at shutdown' | wc -l)
# The first and last 5 minutes (a third of the run each when shorter than
# 15 minutes), as means of the 10 s samples.
awk -v m="$MINUTES" '
    { t[NR] = $1; r[NR] = $2 }
    END {
        w = m >= 15 ? 300 : m * 20
        for (i = 1; i <= NR; i++) {
            if (t[i] < w) { fs += r[i]; fn++; if (r[i] > fm) fm = r[i] }
            if (t[i] >= m * 60 - w) { ls += r[i]; ln++; if (r[i] > lm) lm = r[i] }
            if (r[i] > mx) mx = r[i]
        }
        # The collector trims its heap after each round: RSS is a saw, so the
        # peak of each window says more than its mean.
        printf "window_s=%d rss_first_mean_kb=%d rss_last_mean_kb=%d rss_first_max_kb=%d rss_last_max_kb=%d rss_max_kb=%d samples=%d\n", w, fs / fn, ls / ln, fm, lm, mx, NR
    }' "$WORK/rss"
echo "nodes=$NODES minutes=$MINUTES interval=$INTERVAL rounds=$rounds queries=$queries query_failures=$qfail other_errors=$other"
grep 'msg="round finished"' "$WORK/stderr" | tail -n 2
[ "$other" -eq 0 ] && [ "$qfail" -eq 0 ]
