#!/bin/sh
# Browser end-to-end test of heapfleet's UI: real jemalloc dumps (jefixture),
# the real server (hf-web), Debian's chromium driven by playwright-core.
#
#   run-e2e.sh HF_WEB JEFIXTURE MKDATA NODE_MODULES_DIR OUTDIR
#
# Exits 77 (meson: SKIP) with the reason on stdout and stderr when chromium,
# node or playwright-core (npm ci in web/) is missing. Screenshots land in
# OUTDIR/artifacts.
set -eu
hfweb=$1 fx=$2 mkdata=$3 nm=$4 out=$5
here=$(cd "$(dirname "$0")" && pwd)
skip() {
    echo "SKIP web-e2e: $*"
    echo "SKIP web-e2e: $*" >&2
    exit 77
}
chrome=${HF_CHROMIUM:-/usr/bin/chromium}
[ -x "$chrome" ] || skip "no chromium at $chrome (apt-get install chromium)"
command -v node >/dev/null 2>&1 || skip "no node on PATH (apt-get install nodejs)"
[ -f "$nm/playwright-core/package.json" ] || skip "no $nm/playwright-core (run: npm ci --prefix web)"

rm -rf "$out"
mkdir -p "$out/artifacts"
t0=$(date +%s)
"$mkdata" "$fx" "$out/data"

# A node with a big symbolized profile: 100k distinct frames, to keep the
# flame graph honest about speed (names derived from jefixture's paths).
mkdir -p "$out/data/be-big"
echo starrocks > "$out/data/be-big/.kind"
awk 'BEGIN {
    srand(7);
    for (s = 0; s < 20000; s++) {
        line = "clone3;start_thread;worker_main";
        for (d = 0; d < 12; d++) {
            sh = 8 - d; if (sh < 0) sh = 0;
            line = line ";fragment_" int(s / (2 ^ sh)) "_" d;
        }
        print line ";tracked_alloc " (1 + int(rand() * 100000));
    }
}' > "$out/data/be-big/big.collapsed"

# A 1,000-node fleet for the fleet page's speed (few processes: tee writes
# every copy).
mkdir -p "$out/fleet"
src=$(ls "$out/data/be-1/"* | head -n 1)
src2=$(ls "$out/data/be-1/"* | tail -n 1)
dirs=$(seq -f "$out/fleet/node-%04g" 0 999)
mkdir $dirs
tee $(for d in $dirs; do echo "$d/a.collapsed"; done) < "$src" > /dev/null
tee $(for d in $dirs; do echo "$d/b.collapsed"; done) < "$src2" > /dev/null
touch -d "-2 hours" $(for d in $dirs; do echo "$d/a.collapsed"; done)

start_server() { # DIR LOGPREFIX -> sets port, pid
    "$hfweb" --dir "$1" --listen 127.0.0.1:0 > "$out/$2.out" 2> "$out/$2.err" &
    pid=$!
    n=0
    while ! grep -q "listening on" "$out/$2.out" 2>/dev/null; do
        n=$((n + 1))
        [ $n -lt 100 ] || { echo "hf-web did not start"; cat "$out/$2.err"; exit 1; }
        sleep 0.1
    done
    port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$out/$2.out")
}
echo "data ready in $(( $(date +%s) - t0 )) s"
start_server "$out/data" web
pid1=$pid port1=$port
start_server "$out/fleet" fleet
pid2=$pid port2=$port

rc=0
NODE_PATH="$nm" node "$here/e2e.mjs" "$port1" "$port2" "$out/artifacts" "$chrome" "$nm" || rc=$?

# Both servers must stop cleanly on SIGTERM (hf-web exits 1 when its loop
# does not close).
for p in $pid1 $pid2; do
    kill -TERM "$p"
    if ! wait "$p"; then
        echo "hf-web (pid $p) did not stop cleanly"
        rc=1
    fi
done
cat "$out/web.err" "$out/fleet.err" | grep -v 'level=info' || true
exit $rc
