#!/bin/bash
# soak: the real collector polling N fake nodes (one fakenode process,
# --cache) every INTERVAL for MINUTES, with the web API queried throughout
# (nodes, fleet, a snapshot's top and tree). A few nodes misbehave on
# purpose (hang, HTTP 500). Samples the collector's RSS (and its heap, RssAnon,
# apart from file pages such as the database's) every 10 s and prints
# the mean of the first and last 5 minutes (a third of the run each under 15
# minutes), the rounds done, and every error that is not one of the injected
# ones (the hanging nodes time out twice, 10 s each: --retries 1 keeps them
# within a 30 s round). In `meson test --setup long --suite long` as soak-300x5.
#
#   tests/bench/soak.sh [--smoke] [BUILD_DIR] [NODES] [MINUTES] [INTERVAL]
#                       (default: build 1000 30 30s; short: build 300 5 30s)
#
# --smoke: 12 nodes (2 of them misbehaving, 1 s timeouts) for 24 seconds,
# rounds every 6 s: the same steps and checks in seconds (CI runs it: suite
# bench-smoke).
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then
    SMOKE=1
    shift
fi
BUILD=${1:-build}
NODES=${2:-1000}
MINUTES=${3:-30}
INTERVAL=${4:-30s}
SECS=$((MINUTES * 60))
# Misbehaving nodes (half hang, half answer 500) and the request timeout:
# a hanging node costs two timeouts (--retries 1), within a round.
BAD=10 TIMEOUT=10s SPREAD=5s SAMPLE=10
if [ -n "$SMOKE" ]; then
    NODES=${2:-12}
    SECS=24
    INTERVAL=${4:-6s}
    BAD=2 TIMEOUT=1s SPREAD=1s SAMPLE=2
fi
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
"$FAKENODE" --cache --list "$WORK/be.list" --dir "$WORK/dumps" "starrocksx$((NODES - BAD))" \
    "starrocks:hangx$((BAD / 2))" "starrocks:500x$((BAD / 2))" >"$WORK/ports.txt" 2>"$WORK/fakenode.err" &
FN=$!
end=$((SECONDS + 120))
until grep -q ready "$WORK/ports.txt" 2>/dev/null; do
    [ $SECONDS -ge $end ] && { echo "soak: fakenode did not start" >&2; exit 1; }
    sleep 0.2
done
"$COLLECTOR" --nodes "$WORK/be.list" --interval "$INTERVAL" --spread "$SPREAD" --timeout "$TIMEOUT" --retries 1 \
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
stop=$((t0 + SECS))
next_sample=$t0
queries=0 qfail=0
query_failed() { # path code
    qfail=$((qfail + 1))
    echo "query $1 at $((SECONDS - t0)) s -> $2: $(head -c 300 "$WORK/body")" >>"$WORK/qfail"
}
: >"$WORK/rss"
while [ $SECONDS -lt $stop ]; do
    kill -0 "$C" 2>/dev/null || { echo "soak: the collector died" >&2; exit 1; }
    if [ $SECONDS -ge $next_sample ]; then
        # VmRSS, and of it the heap (RssAnon) apart from pages of files
        # such as the database's (RssFile)
        awk -v t=$((SECONDS - t0)) '/VmRSS/ { r = $2 } /RssAnon/ { a = $2 } /RssFile/ { f = $2 }
            END { print t, r, a, f }' /proc/$C/status >>"$WORK/rss"
        next_sample=$((next_sample + SAMPLE))
    fi
    for p in /api/v1/nodes "/api/v1/fleet" /api/v1/snapshots/starrocks-ok-1/top \
        "/api/v1/snapshots/starrocks-ok-1/tree" /metrics; do
        # snapshots logged as stored before the request (logged after their
        # commit: the server sees at least these)
        logged=$(grep -c 'status=ok .*msg="snapshot"' "$WORK/stderr" || true)
        code=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 30 "$U$p" || true)
        queries=$((queries + 1))
        case $code in
        200 | 404) ;;
        400)
            # /fleet compares at least 3 nodes: a 400 is the right answer
            # when fewer were logged as stored before the request (counted
            # after it, the third could have arrived meanwhile: seen on a
            # fresh bookworm under ASan).
            [ "$p" = /api/v1/fleet ] && [ "$logged" -lt 3 ] ||
                query_failed "$p" "$code"
            ;;
        *) query_failed "$p" "$code" ;;
        esac
    done
    sleep 1
done
rounds=$(grep -c 'msg="round finished"' "$WORK/stderr" || true)
# Errors other than the injected nodes' (hang, 500).
others() {
    grep 'level=\(warn\|error\)' "$WORK/stderr" | grep -v 'node=starrocks-hang\|node=starrocks-500' |
        grep -v 'abandoned at shutdown' || true
}
other=$(others | wc -l)
# The first and last 5 minutes (a third of the run each when shorter than
# 15 minutes), as means of the samples (every 10 s; 2 s with --smoke).
awk -v secs="$SECS" '
    { t[NR] = $1; r[NR] = $2; a[NR] = $3 }
    END {
        w = secs >= 900 ? 300 : int(secs / 3)
        for (i = 1; i <= NR; i++) {
            if (t[i] < w) { fs += r[i]; fa += a[i]; fn++; if (r[i] > fm) fm = r[i] }
            if (t[i] >= secs - w) { ls += r[i]; la += a[i]; ln++; if (r[i] > lm) lm = r[i] }
            if (r[i] > mx) mx = r[i]
        }
        # The collector trims its heap after each round: RSS is a saw, so the
        # peak of each window says more than its mean.
        if (!fn || !ln) { print "soak: no RSS sample in the first or last window" > "/dev/stderr"; exit 1 }
        printf "window_s=%d rss_first_mean_kb=%d rss_last_mean_kb=%d rss_first_max_kb=%d rss_last_max_kb=%d rss_max_kb=%d anon_first_mean_kb=%d anon_last_mean_kb=%d samples=%d\n", w, fs / fn, ls / ln, fm, lm, mx, fa / fn, la / ln, NR
    }' "$WORK/rss" >"$WORK/windows"
cat "$WORK/windows"
echo "nodes=$NODES secs=$SECS interval=$INTERVAL rounds=$rounds queries=$queries query_failures=$qfail other_errors=$other"
grep 'msg="round finished"' "$WORK/stderr" | tail -n 2
sed -n 's/.*rss_first_max_kb=\([0-9]*\) rss_last_max_kb=\([0-9]*\).*/\1 \2/p' "$WORK/windows" |
    awk -v n="$NODES" '{ printf "RESULT\tsoak collector peak RSS, last window, %d nodes\t%.1f\tMB\t-\tfirst window\t%.1f\n", n, $2 / 1024, $1 / 1024 }'
[ ! -s "$WORK/qfail" ] || cat "$WORK/qfail"
others | head -n 5
if [ "$rounds" -lt 2 ]; then
    echo "soak: only $rounds rounds finished in $SECS s (interval $INTERVAL)" >&2
    exit 1
fi
[ "$other" -eq 0 ] && [ "$qfail" -eq 0 ]
