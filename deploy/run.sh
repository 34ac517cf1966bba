#!/bin/sh
# heapfleet's one entry point for a fresh Debian 12 machine (run as root from
# the repository):
#   sh deploy/run.sh demo [SECONDS]
#                           install what is missing, build, start demo nodes on
#                           loopback and the collector (SQLite + web UI on
#                           127.0.0.1:7070) until Ctrl-C or SECONDS
#   sh deploy/run.sh test   install what is missing, build with -Dwerror=true,
#                           run the whole suite, then again under ASan+UBSan
#   sh deploy/run.sh deps   only install the Debian packages
#   sh deploy/run.sh build  only build (into ./build)
set -eu
cd "$(dirname "$0")/.."

# Build and test dependencies, all from Debian 12.
PACKAGES="gcc g++ meson ninja-build pkg-config
  libuv1-dev libcurl4-openssl-dev libsqlite3-dev libelf-dev libdwarf-dev
  libcmocka-dev libzstd-dev zlib1g-dev libiberty-dev libjansson-dev
  libprotobuf-c-dev protobuf-c-compiler libh2o-dev
  libjemalloc-dev libgoogle-perftools-dev
  binutils elfutils llvm graphviz golang-go sqlite3 curl ca-certificates perl
  jq openssl iproute2 systemd"

say() { printf '%s\n' "heapfleet: $*" >&2; }

deps() {
    missing=""
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        say "all Debian packages present"
        return 0
    fi
    say "installing:$missing"
    if [ "$(id -u)" != 0 ]; then
        say "need root to install packages (run as root or install them yourself)"
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

build() { # builddir [meson options...]
    dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >/dev/null
    fi
    ninja -C "$dir"
}

jobs=$(nproc 2>/dev/null || echo 2)

case "${1:-}" in
deps)
    deps
    ;;
build)
    deps
    build build
    ;;
test)
    deps
    say "build with -Dwerror=true and run the suite"
    build build-ci -Dwerror=true -Dtests=enabled
    meson test -C build-ci --num-processes "$jobs" --print-errorlogs
    say "the same suite under AddressSanitizer + UndefinedBehaviorSanitizer"
    build build-asan -Dwerror=true -Dtests=enabled -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debug
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        meson test -C build-asan --num-processes "$jobs" --print-errorlogs
    ;;
demo)
    deps
    build build
    demo=$(mktemp -d /tmp/heapfleet-demo.XXXXXX)
    listen=${HEAPFLEET_LISTEN:-127.0.0.1:7070}
    say "starting demo nodes on loopback (every kind, real jemalloc dumps) in $demo"
    ./build/tests/collector/fakenode demo --nodes 6 --list "$demo/be.list" --dir "$demo/nodes" \
        >"$demo/nodes.txt" 2>"$demo/nodes.log" &
    nodes=$!
    trap 'kill $nodes 2>/dev/null' EXIT INT TERM
    i=0
    while ! grep -q '^ready' "$demo/nodes.txt" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 100 ] || { say "demo nodes did not start: $(cat "$demo/nodes.log")"; exit 1; }
        sleep 0.1
    done
    say "collector: polling every minute into $demo/heapfleet.db; UI at http://$listen/"
    say "try: ./build/query/query nodes --db $demo/heapfleet.db"
    say "     ./build/query/query top starrocks-1 --db $demo/heapfleet.db"
    # ${2:-} seconds bounds the run (for scripts); without it, Ctrl-C stops.
    if [ -n "${2:-}" ]; then
        timeout --signal=TERM "$2" ./build/collector/bin/collector --nodes "$demo/be.list" \
            --interval 1m --spread 2s --db "$demo/heapfleet.db" --listen "$listen" || true
    else
        ./build/collector/bin/collector --nodes "$demo/be.list" --interval 1m --spread 2s \
            --db "$demo/heapfleet.db" --listen "$listen"
    fi
    ./build/query/query nodes --db "$demo/heapfleet.db"
    ;;
*)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
