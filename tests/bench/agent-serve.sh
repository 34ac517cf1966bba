#!/bin/sh
# Benchmark: how fast the agent serves a large dump, side by side with peers
# serving the same file from the same disk cache on loopback:
#   python3 -m http.server (a plain static file server) and `cat` (no HTTP).
#   sh tests/bench/agent-serve.sh [--smoke] build/agent/agent [SIZE_MB]
# Prints MB/s per server and the agent's ratio to each, plus the agent's peak
# RSS (needs curl and python3).
# --smoke: a 1 MiB dump (SIZE_MB still overrides); fails when a server did
# not start or a figure is missing (CI runs it: suite bench-smoke).
set -eu
smoke=
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
agent=$(realpath "${1:?usage: agent-serve.sh [--smoke] AGENT [SIZE_MB]}")
if [ -n "$smoke" ]; then mb=${2:-1}; else mb=${2:-256}; fi
dir=$(mktemp -d /tmp/hf-agent-bench.XXXXXX)
apid=""
ppid_=""
cleanup() {
    [ -n "$apid" ] && kill "$apid" 2>/dev/null || true
    [ -n "$ppid_" ] && kill "$ppid_" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
name=jeprof.1.0.m0.heap
head -c $((mb * 1024 * 1024)) /dev/urandom > "$dir/$name"
printf '\nMAPPED_LIBRARIES:\n' >> "$dir/$name"
cat "$dir/$name" > /dev/null # warm the page cache for every contender

"$agent" --dumps "$dir" --listen 127.0.0.1:0 2> "$dir/agent.log" &
apid=$!
port=""
for _ in $(seq 50); do
    port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$dir/agent.log" | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "agent-serve: the agent did not start: $(tail -n 3 "$dir/agent.log")" >&2; exit 1; }
(cd "$dir" && exec python3 -u -m http.server 0 --bind 127.0.0.1 > "$dir/py.log" 2>&1) &
ppid_=$!
pyport=""
for _ in $(seq 50); do
    pyport=$(grep -o 'port [0-9]*' "$dir/py.log" | cut -d' ' -f2 || true)
    [ -n "$pyport" ] && break
    sleep 0.1
done
[ -n "$pyport" ] || { echo "agent-serve: python3 http.server did not start: $(tail -n 3 "$dir/py.log")" >&2; exit 1; }

best() { # URL -> best of 3 in MB/s
    b=0
    for _ in 1 2 3; do
        s=$(curl -sf -o /dev/null -w '%{speed_download}' "$1")
        b=$(echo "$s $b" | awk '{print ($1 > $2) ? $1 : $2}')
    done
    echo "$b" | awk '{printf "%.0f", $1 / 1048576}'
}
a=$(best "http://127.0.0.1:$port/dumps/newest")
p=$(best "http://127.0.0.1:$pyport/$name")
t0=$(date +%s.%N)
cat "$dir/$name" > /dev/null
t1=$(date +%s.%N)
c=$(echo "$t0 $t1 $mb" | awk '{printf "%.0f", $3 / ($2 - $1)}')
rss=$(awk '/VmHWM/{print $2 " " $3}' "/proc/$apid/status")
echo "file: $mb MiB, page cache warm, loopback, best of 3"
echo "agent /dumps/newest : $a MB/s (peak RSS $rss)"
echo "python3 http.server : $p MB/s   agent/python = $(echo "$a $p" | awk '{printf "%.2f", $1/$2}')"
echo "cat > /dev/null     : $c MB/s   agent/cat    = $(echo "$a $c" | awk '{printf "%.2f", $1/$2}')"
printf 'RESULT\tagent serving a %s MiB dump\t%s\tMB/s\t-\tpython3 http.server\t%s\n' "$mb" "$a" "$p"
