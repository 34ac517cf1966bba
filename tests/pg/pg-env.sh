# pg-env.sh: a throwaway PostgreSQL 15 for one test, sourced by the tests in
# tests/pg. pg_start DIR initdb's a cluster in DIR/data, listening only on
# a unix socket in DIR (no TCP port to collide with), and sets PGURI to a
# libpq URI for its database "heapfleet". When the suite runs as root the
# cluster runs as "nobody" (PostgreSQL refuses root); DIR is handed to it.
# pg_stop stops it (the tests trap EXIT to it); pg_restart restarts it.
# PG_SKIP (77, meson's skip) when no PostgreSQL binaries exist.
# PG_SERVER_OPTS: the server's settings; the tests' default trades
# durability for speed (a benchmark sets its own). PG_OPTS: more server
# options (-c name=value), for a test that needs them.
PG_SKIP=77
PG_SERVER_OPTS=${PG_SERVER_OPTS:--c fsync=off -c synchronous_commit=off -c max_connections=200}
PG_BIN=${PG_BIN:-}
if [ -z "$PG_BIN" ]; then
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && PG_BIN=$d
    done
fi

pg_as() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u nobody -- "$@"
    else
        "$@"
    fi
}

pg_start() {
    PG_DIR=$1
    if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
        echo "SKIP: no PostgreSQL server binaries (install postgresql-15)" >&2
        exit $PG_SKIP
    fi
    mkdir -p "$PG_DIR"
    if [ "$(id -u)" = 0 ]; then
        chmod a+x "$(dirname "$PG_DIR")"
        chown nobody "$PG_DIR"
    fi
    pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U heapfleet --no-sync \
        >"$PG_DIR/initdb.log" 2>&1 || { cat "$PG_DIR/initdb.log" >&2; return 1; }
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
        -o "-k $PG_DIR -c listen_addresses= $PG_SERVER_OPTS ${PG_OPTS:-}" \
        start >/dev/null || { cat "$PG_DIR/server.log" >&2; return 1; }
    pg_as "$PG_BIN/createdb" -h "$PG_DIR" -U heapfleet heapfleet
    PGURI="postgresql:///heapfleet?host=$PG_DIR&user=heapfleet"
    export PGURI
}

pg_psql() {
    "$PG_BIN/psql" -X -q -A -t -h "$PG_DIR" -U heapfleet -d heapfleet "$@"
}

pg_stop() {
    [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR/data" ] &&
        pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
    return 0
}

pg_restart() {
    pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 -m fast \
        -o "-k $PG_DIR -c listen_addresses= $PG_SERVER_OPTS ${PG_OPTS:-}" \
        restart >/dev/null
}
