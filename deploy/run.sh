#!/bin/sh
# heapfleet's one entry point for a fresh Debian 12 machine (run as root from
# the repository):
#   sh deploy/run.sh demo   install what is missing, build, start demo nodes on
#                           loopback and the collector on heapfleet.db
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
  binutils elfutils llvm graphviz golang-go sqlite3 curl ca-certificates perl"

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
    say "making a real jemalloc heap profile in $demo"
    MALLOC_CONF=prof:true,lg_prof_sample:12 ./build/tests/fixtures/jefixture \
        --threads 6 --rounds 3 "$demo/demo.heap"
    ./build/query/query top "$demo/demo.heap"
    ;;
*)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
