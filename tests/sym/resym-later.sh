#!/bin/sh
# Symbols that arrive after the snapshot was stored, from the sources the
# collector asks by itself (issue 15): the running collector re-derives the
# stored snapshot from its raw dump in the background, logs it, and the
# snapshot's note says so.
#   agent:      the node's agent (agent= on a url node line) is down when
#               the dump is stored (the program hidden from the collector by
#               a mount namespace), then comes back on the same port;
#   debuginfod: the program on the collector's host is stripped (no
#               symbols, no DWARF) and the --debuginfod server answers 404
#               for its debug file, then serves it.
# usage: resym-later.sh agent|debuginfod AGENT COLLECTOR QUERY JEFIXTURE
set -eu
mode=$1
agent=$(realpath "$2") collector=$(realpath "$3") query=$(realpath "$4") jefixture=$(realpath "$5")
if [ "$mode" = agent ] && ! unshare -m true 2>/dev/null; then
    echo "SKIP: unshare -m not permitted here"
    exit 77
fi
dir=$(mktemp -d /tmp/hfresym.XXXXXX)
. "$(cd "$(dirname "$0")" && pwd)/hidden-env.sh"
# debuginfod: the program stays visible (stripped) to the collector.
if [ "$mode" != agent ]; then
    hidden() { "$@"; }
    hidden_bg() { exec "$@"; }
fi
export HOME="$dir/home" DEBUGINFOD_URLS=""
mkdir -p "$dir/node/bin" "$dir/rw" "$dir/empty" "$dir/cache" "$dir/home" "$dir/dbgd"
cp "$jefixture" "$dir/node/bin/jefixture"
MALLOC_CONF=prof:true,lg_prof_sample:0 "$dir/node/bin/jefixture" "$dir/rw/compute-node.4242.0.i0.heap"
bid=$(readelf -n "$jefixture" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')

# The dumps come from an agent without the program (--binaries not given).
"$agent" --dumps "$dir/rw" --listen 127.0.0.1:0 > "$dir/dumps-agent.log" 2>&1 &
pids="$pids $!"
wait_for "$dir/dumps-agent.log" 'msg="listening"'
dport=$(port_of "$dir/dumps-agent.log")
node="url http://127.0.0.1:$dport/dumps/newest?prefix=compute-node name=cn-1"
extra=""
case $mode in
agent)
    # A port for the symbol agent: taken by one that is then stopped.
    "$agent" --dumps "$dir/empty" --listen 127.0.0.1:0 > "$dir/probe.log" 2>&1 &
    ppid=$!
    wait_for "$dir/probe.log" 'msg="listening"'
    sport=$(port_of "$dir/probe.log")
    kill "$ppid"
    wait "$ppid" 2>/dev/null || true
    node="$node agent=127.0.0.1:$sport"
    ;;
debuginfod)
    # The collector sees a program with no names at all; the debug file
    # (symbols and DWARF) only ever comes from the server.
    objcopy --only-keep-debug "$jefixture" "$dir/jefixture.debug"
    strip --strip-all -o "$dir/stripped" "$jefixture"
    mv "$dir/stripped" "$dir/node/bin/jefixture"
    python3 - "$dir/dbgd" "$dir/dbgd.port" > "$dir/debuginfod.log" 2>&1 <<'EOF' &
import http.server, os, sys
root, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        path = os.path.join(root, parts[1], parts[2]) if len(parts) == 3 and parts[0] == "buildid" else ""
        if not path or not os.path.isfile(path):
            print("404", self.path, flush=True)
            self.send_error(404)
            return
        data = open(path, "rb").read()
        print("200", self.path, flush=True)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(portfile + ".tmp", "w").write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
EOF
    pids="$pids $!"
    i=0
    until [ -s "$dir/dbgd.port" ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the debuginfod server did not start"
        sleep 0.1
    done
    extra="--debuginfod http://127.0.0.1:$(cat "$dir/dbgd.port")"
    ;;
*) fail "mode $mode (expected agent or debuginfod)" ;;
esac
echo "$node" > "$dir/be.list"

# shellcheck disable=SC2086
hidden_bg "$collector" --nodes "$dir/be.list" --interval 1h --spread 0 --db "$dir/hf.db" \
    --listen off --symbol-cache "$dir/cache" --resym-backoff 1s $extra --log-level debug \
    > "$dir/collector.log" 2>&1 &
cpid=$!
pids="$pids $cpid"
wait_for "$dir/collector.log" 'msg="round finished"' 600
hidden "$query" top '#1' --db "$dir/hf.db" --top 0 > "$dir/before.txt" 2>&1 ||
    fail "query top failed: $(cat "$dir/before.txt")"
grep -q tracked_alloc "$dir/before.txt" && fail "named before the source had the program"
# Asked again (--resym-backoff 1s) while the source still has nothing.
wait_for "$dir/collector.log" 'result=nothing more msg="re-symbolization probe"'

case $mode in
agent)
    "$agent" --dumps "$dir/empty" --listen "127.0.0.1:$sport" --binaries "$dir/node/bin" \
        > "$dir/symbol-agent.log" 2>&1 &
    pids="$pids $!"
    wait_for "$dir/symbol-agent.log" 'msg="listening"'
    ;;
debuginfod)
    grep -q "^404 /buildid/$bid/debuginfo" "$dir/debuginfod.log" ||
        fail "the collector did not ask the server for the debug file"
    mkdir -p "$dir/dbgd/$bid"
    cp "$dir/jefixture.debug" "$dir/dbgd/$bid/debuginfo"
    ;;
esac

# Within 30 s: a source that failed is asked again after --resym-backoff,
# not after the symbolizer's own minute-long skip of a failing server.
wait_for "$dir/collector.log" 're-symbolized 1 snapshot of build [^ ]*: now [0-9]*% named' 300
hidden "$query" top '#1' --db "$dir/hf.db" --top 0 > "$dir/after.txt" 2>&1 || fail "query top failed"
grep -q tracked_alloc "$dir/after.txt" ||
    fail "not named once the $mode had the program: $(head -n 12 "$dir/after.txt")"
grep -q 're-symbolized .*now [0-9]*% named (was [0-9]*%)' "$dir/after.txt" ||
    fail "the snapshot does not say it was re-symbolized: $(grep -A3 Note "$dir/after.txt")"
echo "ok ($mode): the stored snapshot was re-symbolized in the background once the $mode had the program"
