#!/bin/sh
# heapfleet's one entry point for a fresh Debian 12 machine (run as root from
# the repository):
#   sh deploy/run.sh demo [SECONDS]
#                           install what is missing, build, start the demo
#                           fleet on loopback (Doris, StarRocks, Databend and
#                           RisingWave look-alikes with 3 h of backdated
#                           history) and the collector (SQLite + web UI on
#                           127.0.0.1:7070), print the tour; until Ctrl-C or
#                           SECONDS
#   sh deploy/run.sh test   install what is missing, build with -Dwerror=true,
#                           run the whole suite, then again under ASan+UBSan,
#                           the 'threads' suite under ThreadSanitizer, and a
#                           timed libFuzzer run of every fuzz target
#                           (FUZZ_SECONDS each, default 5)
#   sh deploy/run.sh deps   only install the Debian packages
#   sh deploy/run.sh build  only build (into ./build)
set -eu
cd "$(dirname "$0")/.."

# Build and test dependencies, all from Debian 12. Some are not implied by
# the others although the build needs them: libh2o-dev's h2o.h includes
# OpenSSL headers without depending on libssl-dev, and jeprof runs file(1)
# to recognise 64-bit binaries (without it, it drops inlined frames).
# rustc builds the Rust fixtures (legacy and v0 mangling); clang and its
# runtime libraries build the libFuzzer targets. prometheus brings promtool,
# which checks deploy/heapfleet-alerts.yml (test alerts-promtool); the
# daemon it also ships is not used.
PACKAGES="gcc g++ meson ninja-build pkg-config
  libuv1-dev libcurl4-openssl-dev libsqlite3-dev libelf-dev libdwarf-dev
  libcmocka-dev libzstd-dev zlib1g-dev libiberty-dev libjansson-dev
  libprotobuf-c-dev protobuf-c-compiler libh2o-dev libssl-dev
  libjemalloc-dev libgoogle-perftools-dev
  binutils elfutils llvm graphviz golang-go sqlite3 curl ca-certificates perl
  jq openssl iproute2 systemd file rustc clang libclang-rt-14-dev python3
  time dwz valgrind libpq-dev postgresql-15 zstd prometheus"

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

# The browser tests drive Debian's Chromium with playwright-core from npm (its
# lock file is web/package-lock.json); no browser is ever downloaded.
web_test_deps() {
    need=""
    command -v node >/dev/null 2>&1 || need="$need nodejs"
    command -v npm >/dev/null 2>&1 || need="$need npm"
    [ -x /usr/bin/chromium ] || need="$need chromium"
    if [ -n "$need" ]; then
        say "installing for the browser tests:$need"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $need >/dev/null
    fi
    if [ -f web/package-lock.json ] && [ ! -d web/node_modules/playwright-core ]; then
        say "npm ci in web/ (playwright-core, no browser download)"
        # Quiet when it works; when it fails, say why (an unreachable
        # registry is the usual reason) instead of failing silently.
        npmlog=$(mktemp)
        if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix web --no-audit --no-fund \
            --loglevel=error >"$npmlog" 2>&1; then
            say "npm ci failed (registry $(npm config get registry 2>/dev/null)):"
            sed 's/^/  npm: /' "$npmlog" | tail -n 20 >&2
            say "the browser tests need playwright-core from npm; check the network or" \
                "set npm's registry/proxy, then run again"
            rm -f "$npmlog"
            exit 1
        fi
        rm -f "$npmlog"
    fi
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
# The plain and ASan suites' tests wait about half their time (rounds on a
# timer, PostgreSQL, child processes, a browser): one test more than there
# are cores keeps the cores busy. TSan's phase is one long test (store)
# beside short ones, and libFuzzer runs are all CPU: those run $jobs.
suite_jobs=$((jobs + 1))

# timed NAME COMMAND...: run a part of the test command and say how long it
# took, so the whole can be kept under its time budget.
timed() {
    name=$1
    shift
    t0=$(date +%s)
    rc=0
    "$@" || rc=$?
    say "time: $name $(($(date +%s) - t0))s"
    return $rc
}

suite() {
    meson test -C build-ci --num-processes "$suite_jobs" --print-errorlogs
}

# The bench smoke modes are left out here: they guard the benches' flags and
# paths, which the plain suite above already checks (it runs them too), and
# under ASan they cost ~3 minutes of the 20-minute budget.
asan() {
    build build-asan -Dwerror=true -Dtests=enabled -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debug &&
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            meson test -C build-asan --no-suite bench-smoke --num-processes "$suite_jobs" \
                --print-errorlogs
}

# The tests that run threads (symbolizer workers, the web server's worker
# pool, the collector answering HTTP while it polls) carry suite 'threads'.
# meson test builds what they need (139 of the 253 steps; the others are
# compiled with -Dwerror=true by the plain build and, -O0 -g as here, ASan's).
tsan() {
    if [ ! -f build-tsan/build.ninja ]; then
        meson setup build-tsan -Dwerror=true -Dtests=enabled -Db_sanitize=thread -Db_lundef=false \
            -Dbuildtype=debug >/dev/null || return
    fi
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 suppressions=$PWD/tests/tsan.supp" \
        meson test -C build-tsan --suite threads --num-processes "$jobs" --print-errorlogs
}

# Every fuzz target for FUZZ_SECONDS on top of its seed corpus (clang,
# libFuzzer, ASan+UBSan); a crash fails the run (tests/fuzz/run-timed.sh).
# Only the fuzz targets are built: meson test builds what its tests need,
# and the rest of the tree (~100 more compile steps, ~25 s here) would be
# compiled for nothing.
fuzz() {
    if [ ! -f build-fuzz/build.ninja ]; then
        CC=clang meson setup build-fuzz -Dfuzzing=true -Dtests=enabled \
            -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || return
    fi
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        FUZZ_SECONDS=${FUZZ_SECONDS:-5} \
        meson test -C build-fuzz --suite fuzz-timed --num-processes "$jobs" --print-errorlogs
}

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
    web_test_deps
    t_all=$(date +%s)
    say "build with -Dwerror=true and run the suite"
    timed build build build-ci -Dwerror=true -Dtests=enabled
    timed suite suite
    say "the same suite under AddressSanitizer + UndefinedBehaviorSanitizer"
    timed asan asan
    say "the 'threads' suite under ThreadSanitizer"
    timed tsan tsan
    say "timed libFuzzer runs of every fuzz target"
    timed fuzz fuzz
    say "time: test $(($(date +%s) - t_all))s"
    ;;
demo)
    deps
    build build
    demo=$(mktemp -d /tmp/heapfleet-demo.XXXXXX)
    # 127.0.0.1:7070 unless it is taken: then the next free port, said
    # below. HEAPFLEET_LISTEN is used as given.
    if [ -n "${HEAPFLEET_LISTEN:-}" ]; then
        listen=$HEAPFLEET_LISTEN
    else
        port=7070
        while [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; do
            port=$((port + 1))
            [ $port -lt 7170 ] || { say "no free port in 7070-7169"; exit 1; }
        done
        [ $port = 7070 ] || say "127.0.0.1:7070 is taken; using 127.0.0.1:$port"
        listen=127.0.0.1:$port
    fi
    say "starting the demo fleet on loopback in $demo (tests/demo/story.sh)"
    # ${2:-} seconds bounds the run (for scripts); without it, Ctrl-C stops.
    sh tests/demo/story.sh ./build "$demo" "$listen" "${2:-}"
    ./build/query/query nodes --db "$demo/heapfleet.db"
    ;;
*)
    sed -n '2,/^set -eu/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
