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
. "$here/browser-check.sh"
browser_check web-e2e "$nm"

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
# node-0000 has a long history: 1,200 more snapshots, one every 5 minutes
# ending 3 hours ago, with one spike and one dip, for the chart's
# server-side thinning (it must keep both).
perl -e 'my ($d, $now) = @ARGV;
    for my $i (0 .. 1199) {
        my $v = 1000000 + 1000 * ($i % 50);
        $v = 9000000 if $i == 613;
        $v = 10 if $i == 877;
        my $f = sprintf("%s/h%04d.collapsed", $d, $i);
        open(my $fh, ">", $f) or die "$f: $!";
        print $fh "clone3;start_thread;worker_main;tracked_alloc $v\n";
        close($fh);
        my $t = $now - 3 * 3600 - (1199 - $i) * 300;
        utime($t, $t, $f) or die "$f: $!";
    }' "$out/fleet/node-0000" "$(date +%s)"

start_server() { # DIR LOGPREFIX [ARGS] -> sets port, pid
    d=$1 name=$2
    shift 2
    "$hfweb" --dir "$d" --listen 127.0.0.1:0 "$@" > "$out/$name.out" 2> "$out/$name.err" &
    pid=$!
    n=0
    while ! grep -q "listening on" "$out/$name.out" 2>/dev/null; do
        n=$((n + 1))
        [ $n -lt 100 ] || { echo "hf-web did not start"; cat "$out/$name.err"; exit 1; }
        sleep 0.1
    done
    port=$(sed -n 's/.*:\([0-9]*\)\/$/\1/p' "$out/$name.out")
}
echo "data ready in $(( $(date +%s) - t0 )) s"
start_server "$out/data" web
pid1=$pid port1=$port
start_server "$out/fleet" fleet
pid2=$pid port2=$port
printf 'e2e-token-%s\n' "$$" > "$out/token"
start_server "$out/data" token --token-file "$out/token"
pid3=$pid port3=$port

rc=0
NODE_PATH="$nm" node "$here/e2e.mjs" "$port1" "$port2" "$out/artifacts" "$chrome" "$nm" \
    "$port3" "$(cat "$out/token")" "$out/data" || rc=$?

# Both servers must stop cleanly on SIGTERM (hf-web exits 1 when its loop
# does not close).
for p in $pid1 $pid2 $pid3; do
    kill -TERM "$p"
    if ! wait "$p"; then
        echo "hf-web (pid $p) did not stop cleanly"
        rc=1
    fi
done
cat "$out/web.err" "$out/fleet.err" "$out/token.err" | grep -v 'level=info' || true
exit $rc
