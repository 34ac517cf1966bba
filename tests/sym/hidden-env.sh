# hidden-env.sh: the shared set-up of the tests where symbols must come from
# somewhere other than the collector's host (symbols-store.sh,
# resym-later.sh), sourced after they set $dir (a fresh folder). The node's
# program lives in $dir/node/bin; `hidden CMD` runs CMD where that folder is
# an empty tmpfs (a mount namespace), `hidden_bg CMD` the same as the
# program itself (for `... &`: $! is its pid). Processes added to $pids are
# killed on exit, and $cleanup_extra (a command) runs then; HP_KEEP keeps
# $dir.
pids=""
cleanup_extra=true
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    $cleanup_extra
    [ -n "${HP_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "--- $f"; tail -n 25 "$f"; done; exit 1; }
wait_for() { # file pattern [tenths, default 300]
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt "${3:-300}" ] || fail "timed out waiting for '$2' in $1"
        sleep 0.1
    done
}
# The port an agent logged it listens on.
port_of() { sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*listening.*/\1/p' "$1" | head -n 1; }
hidden() { unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$dir/node/bin" "$@"; }
hidden_bg() { exec unshare -m sh -c 'mount -t tmpfs none "$0" && exec "$@"' "$dir/node/bin" "$@"; }
