#!/bin/sh
# The demo's tour in a browser (issue 17, "Done when"): runs tests/demo/
# story.sh (real nodes, agent, collector and its UI on loopback), waits until
# the story has happened (databend-q-1 restarted and polled again), then
# walks the tour in headless Chromium (demo-e2e.mjs). Screenshots land in
# OUTDIR/artifacts; with HF_DOCS_SHOTS=DIR the README's screenshots are
# written there too.
#
#   run-demo-e2e.sh STORY_SH BUILD_DIR NODE_MODULES_DIR OUTDIR
#
# Exits 77 (meson: SKIP) with the reason when chromium, node or
# playwright-core (npm ci --prefix web) is missing.
set -eu
story=$1 build=$2 nm=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../web/browser-check.sh"
browser_check demo-e2e "$nm"

rm -rf "$out"
mkdir -p "$out/artifacts" "$out/work"
# The live part polls every 10 s (the demo's 30 s would only make the
# browser wait); the restart comes 10 s into it; the story runs until killed
# (at most 600 s).
POLL_INTERVAL=${POLL_INTERVAL:-10s} RESTART_AFTER=${RESTART_AFTER:-10} HISTORY=${HISTORY:-12} \
    sh "$story" "$build" "$out/work" 127.0.0.1:0 600 >"$out/story.out" 2>&1 &
story_pid=$!
stop_story() {
    kill -TERM "$story_pid" 2>/dev/null || true
    wait "$story_pid" 2>/dev/null || true
}
trap stop_story EXIT
i=0
while [ ! -s "$out/work/url" ]; do
    i=$((i + 1))
    if [ $i -ge 3000 ] || ! kill -0 "$story_pid" 2>/dev/null; then
        echo "the demo did not start:"
        tail -30 "$out/story.out"
        exit 1
    fi
    sleep 0.1
done
url=$(cat "$out/work/url")
echo "demo UI at $url (story output: $out/story.out)"
rc=0
NODE_PATH="$nm" node "$here/demo-e2e.mjs" "$url" "$out/artifacts" "$chrome" "$nm" \
    "${HF_DOCS_SHOTS:-}" || rc=$?
[ $rc = 0 ] || tail -20 "$out/story.out"
exit $rc
