#!/bin/bash
# Integration test: the real `collector` binary against real fixture nodes
# (fakenode: a jemalloc-linked process serving its own prof.dump output) on
# loopback, well-behaved and misbehaving, checked through what the collector
# recorded (DIR/snapshots.jsonl and the raw dumps).
#
#   it-collector.sh COLLECTOR FAKENODE [CASE...]
#
# Cases: mixed (one --once round over every kind and failure mode), nodelist
# (bad lines, --strict), limits (--max-inflight, --spread), daemon (SIGHUP
# reload, SIGTERM with a transfer in flight), unchanged (a repeated dump is
# recognised and not stored twice), tls (https via openssl s_server), tlsca
# (a private CA and a client certificate), batch (an idle daemon has
# committed its write batch), fe (FE
# discovery against fake-fe.py), fe_rows (an FE answering in positional rows,
# SIGHUP re-discovery, a backend leaving; needs QUERY=path of `query` in the
# environment). Needs jq. Waits use deadlines, never bare sleeps.
# tests/collector/meson.build runs the cases as two tests: a new case goes
# in one of its lists.
set -u
COLLECTOR=$1
FAKENODE=$2
shift 2
CASES=${*:-mixed nodelist limits daemon unchanged batch tls tlsca fe fe_rows}

WORK=$(mktemp -d /tmp/hp-it-collector.XXXXXX)
PIDS=()
fails=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$fails" -eq 0 ] && [ -z "${HP_KEEP:-}" ]; then rm -rf "$WORK"; else echo "# work dir kept: $WORK"; fi
}
trap cleanup EXIT

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
    local d=$1
    shift
    if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# wait_for SECONDS COMMAND...: poll a condition until a deadline.
wait_for() {
    local limit=$1
    shift
    local end=$((SECONDS + limit))
    while ! "$@"; do
        [ $SECONDS -ge "$end" ] && return 1
        sleep 0.05
    done
    return 0
}
# start_fakenode DIR SPEC...: start one fakenode, wait for its node list.
start_fakenode() {
    local dir=$1
    shift
    mkdir -p "$dir"
    "$FAKENODE" --list "$dir/be.list" --dir "$dir/dumps" "$@" >"$dir/ports.txt" 2>"$dir/fakenode.err" &
    PIDS+=($!)
    wait_for 10 test -s "$dir/be.list" || { not_ok "fakenode started ($(cat "$dir/fakenode.err"))"; return 1; }
}
# rec FILE NODE FILTER: jq FILTER over NODE's last record.
rec() { jq -r --arg n "$2" "select(.node == \$n) | $3" "$1" | tail -n 1; }

case_mixed() {
    local d=$WORK/mixed
    start_fakenode "$d" starrocks doris databend agent url starrocks:gzip starrocks:auth \
        doris:inactive doris:noagent starrocks:refuse starrocks:hang starrocks:trickle \
        starrocks:close starrocks:500 starrocks:empty starrocks:garbage starrocks:huge \
        starrocks:flood starrocks:html starrocks:redirect databend:500 doris:old doris:notactive || return
    # Two more lines for the same nodes: wrong credentials, and none at all.
    echo nope >"$d/wrong-password"
    sed -n "s|name=starrocks-auth user=heapfleet password_file=[^ ]*|name=starrocks-badauth user=heapfleet password_file=$d/wrong-password|p" "$d/be.list" >>"$d/be.list"
    sed -n "s|name=starrocks-auth user=heapfleet password_file=[^ ]*|name=starrocks-noauth|p" "$d/be.list" >>"$d/be.list"
    local t0=$SECONDS
    "$COLLECTOR" --nodes "$d/be.list" --once --out "$d/out" --timeout 2s --retries 1 \
        --retry-base 50ms --max-body 8M >"$d/stdout" 2>"$d/stderr"
    local rc=$?
    local J=$d/out/snapshots.jsonl
    # One jq pass (jq starts slowly): "node<TAB>key<TAB>value" for every fact checked.
    declare -A V
    while IFS=$'\t' read -r node key value; do
        V["$node|$key"]=$value
    done < <(jq -r '
        def facts: {
            status, error: (.error // ""), file: (.dump.file // ""),
            bytes: (.dump.bytes // 0), format: (.profile.format // ""),
            samples: (.profile.samples // 0), dump: (.dump == null | not),
            sr_mem: ((.figures.starrocks_be_process_mem_bytes // 0) > 0 and
                     (.figures.starrocks_be_jemalloc_allocated_bytes // 0) > 0),
            sr_other: (.figures | has("starrocks_be_fragment_requests_total")),
            doris_figs: ((.figures.doris_be_memory_allocated_bytes // 0) > 0 and
                ((.figures["mem_tracker_current_bytes{type=\"overview\",label=\"process resident memory\"}"]) // 0) > 0 and
                (.figures.memory_all_tracked_sum_bytes // 0) > 0),
            via_agent: ((.remote_path // "" | startswith("/")) and
                        (.dump.url // "" | contains("/dumps/file?path="))),
            activated: (.activated_at != null and ([.attempts[].what] | index("activate") != null)),
            databend_figs: ((.figures.databend_process_resident_memory_bytes // 0) > 0),
            proc_figs: ((.figures.proc_rss_bytes // 0) > 0),
            mem3: ((.memory.rss_bytes // 0) > 0 and (.memory.allocated_bytes // 0) > 0 and
                   (.memory.tracked_bytes // 0) > 0),
            dump_attempts: ([.attempts[] | select(.what == "dump")] | length),
            last_http: (.attempts[-1].http), last_err: (.attempts[-1].error // "")
        };
        .node as $n | facts | to_entries[] | [$n, .key, (.value | tostring)] | @tsv' "$J")
    v() { echo "${V["$1|$2"]:-}"; }
    check "mixed: --once exits 1 when a node failed (rc=$rc)" test "$rc" -eq 1
    check "mixed: round took $((SECONDS - t0)) s (< 20 s with hanging nodes)" test $((SECONDS - t0)) -lt 20
    check "mixed: summary line on stdout" grep -q "25 nodes, 9 ok, 16 failed" "$d/stdout"
    check "mixed: one record per node" test "$(cut -d'|' -f1 <<<"$(printf '%s\n' "${!V[@]}")" | sort -u | wc -l)" -eq 25 -a "$(wc -l <"$J")" -eq 25
    check "mixed: loop closed cleanly" bash -c "! grep -q 'loop closed with handles' '$d/stderr'"

    for n in starrocks-ok doris-ok databend-ok agent-ok url-ok starrocks-gzip starrocks-auth doris-inactive doris-old; do
        local file bytes
        file=$(v "$n" file)
        bytes=$(v "$n" bytes)
        check "$n: status ok ($(v "$n" error))" test "$(v "$n" status)" = ok
        check "$n: raw dump stored as received ($bytes bytes)" \
            test -f "$d/out/$file" -a "$(stat -c %s "$d/out/$file" 2>/dev/null)" = "$bytes"
        check "$n: dump is a real jemalloc heap_v2 profile" bash -c "head -c 8 '$d/out/$file' | grep -q '^heap_v2/'"
        check "$n: parsed ($(v "$n" format), $(v "$n" samples) samples)" test "$(v "$n" format)" = jemalloc -a "$(v "$n" samples)" -gt 0
        check "$n: last.json is the latest attempt" grep -q '"status":"ok"' "$d/out/$n/last.json"
    done

    check "starrocks: memory metrics kept" test "$(v starrocks-ok sr_mem)" = true
    check "starrocks: other metrics dropped" test "$(v starrocks-ok sr_other)" = false
    check "doris: RSS metric, tracker table and bvars read" test "$(v doris-ok doris_figs)" = true
    check "doris: dump fetched through the agent from the node's path" test "$(v doris-ok via_agent)" = true
    check "doris: activate=yes switched profiling on and was recorded" test "$(v doris-inactive activated)" = true
    check "doris: older releases switched on with /jeheap/prof/true" test "$(v doris-old activated)" = true
    check "doris: RSS, allocator and tracker totals picked" test "$(v doris-ok mem3)" = true
    check "databend: process figures read" test "$(v databend-ok databend_figs)" = true
    check "agent: /proc figures read" test "$(v agent-ok proc_figs)" = true
    check "gzip: body decoded before storing" bash -c "head -c 8 '$d/out/$(v starrocks-gzip file)' | grep -q '^heap_v2/'"

    expect_err() { # NODE REGEX
        local e
        e=$(v "$1" error)
        check "$1: failed with \"$e\"" bash -c "[ \"$(v "$1" status)\" = failed ] && grep -Eq -- \"\$0\" <<<\"\$1\"" "$2" "$e"
    }
    expect_err starrocks-refuse 'connection refused'
    expect_err starrocks-hang '^timeout after 2\.0 s with 0 body bytes'
    expect_err starrocks-trickle '^timeout after 2\.0 s with [0-9]+ body bytes'
    expect_err starrocks-close 'connection closed mid-transfer after [0-9]+ body bytes'
    expect_err starrocks-500 '^HTTP 500: jemalloc heap dump failed'
    expect_err databend-500 '^HTTP 500: jemalloc heap dump failed'
    expect_err starrocks-empty '^empty dump: HTTP 200 with an empty body'
    expect_err starrocks-garbage '^unparseable dump: .*line 3'
    expect_err starrocks-huge 'larger than the 8388608 byte limit \(announced by Content-Length\)'
    expect_err starrocks-flood 'larger than the 8388608 byte limit \(stopped reading\)'
    expect_err starrocks-html 'HTML page instead of a heap dump \(Content-Type text/html'
    expect_err starrocks-redirect '^HTTP 302 redirect to http://127\.0\.0\.1:[0-9]*/pprof/heap not followed \(add follow_redirects='
    expect_err doris-notactive '^HTTP 500: Jemalloc heap profiler is not enabled.*add activate=yes'
    expect_err starrocks-badauth '^HTTP 401 \(the node refused user=/password_file=\)'
    expect_err starrocks-noauth '^HTTP 401 \(the node wants HTTP auth: add user= and password_file=\)'
    expect_err doris-noagent '^needs agent: the node wrote its dump to /.*add agent=HOST:PORT'
    check "500: retried once (2 dump attempts)" test "$(v starrocks-500 dump_attempts)" = 2
    check "html: not retried (1 dump attempt)" test "$(v starrocks-html dump_attempts)" = 1
    check "500: attempt records carry HTTP code and error" bash -c "[ '$(v starrocks-500 last_http)' = 500 ] && [[ '$(v starrocks-500 last_err)' == 'HTTP 500'* ]]"
    check "failed node's raw dump not stored" test "$(v starrocks-empty dump)" = false
    check "a failure is logged in logfmt" grep -q 'level=warn comp=collector node=starrocks-refuse .*status=failed' "$d/stderr"
}

case_nodelist() {
    local d=$WORK/nodelist
    start_fakenode "$d" starrocks || return
    { echo "dorris 127.0.0.1:1 name=typo"; echo "starrocks nope"; cat "$d/be.list"; } >"$d/bad.list"
    "$COLLECTOR" --nodes "$d/bad.list" --once --out "$d/out" >"$d/stdout" 2>"$d/stderr"
    local rc=$?
    check "nodelist: bad lines skipped, the rest polled (rc=$rc)" test "$rc" -eq 0
    check "nodelist: bad kind reported with file and line" grep -q 'bad.list:1: unknown kind "dorris" (expected doris, starrocks, databend, agent, url, doris-fe, starrocks-fe)' "$d/stderr"
    check "nodelist: bad address reported with file and line" grep -q 'bad.list:2: bad address "nope": missing :PORT' "$d/stderr"
    check "nodelist: good node polled" grep -q "1 nodes, 1 ok, 0 failed" "$d/stdout"
    "$COLLECTOR" --nodes "$d/bad.list" --once --strict --out "$d/out2" >/dev/null 2>"$d/stderr2"
    rc=$?
    check "nodelist: --strict refuses the file (rc=$rc)" test "$rc" -eq 2
    check "nodelist: --strict says why" grep -q "node list refused" "$d/stderr2"
    "$COLLECTOR" --nodes "$d/bad.list" --check >"$d/check.out" 2>"$d/check.err"
    rc=$?
    check "nodelist: --check exits 1 on bad lines (rc=$rc)" test "$rc" -eq 1
    check "nodelist: --check lists the good node and counts" grep -q "bad.list: 1 nodes, 2 bad lines" "$d/check.out"
    "$COLLECTOR" --nodes "$d/missing.list" --once --out "$d/out3" >/dev/null 2>"$d/stderr3"
    rc=$?
    check "nodelist: missing file is a startup error (rc=$rc)" test "$rc" -eq 2
}

case_daemon() {
    local d=$WORK/daemon
    start_fakenode "$d" starrocks databend starrocks:hang || return
    grep starrocks-ok "$d/be.list" >"$d/run.list"
    local J=$d/out/snapshots.jsonl
    "$COLLECTOR" --nodes "$d/run.list" --interval 1s --spread 0 --timeout 30s --out "$d/out" \
        >"$d/stdout" 2>"$d/stderr" &
    local C=$!
    PIDS+=($C)
    check "daemon: first round starts at startup" wait_for 10 grep -qs '"starrocks-ok"' "$J"
    cp "$d/be.list" "$d/run.list"
    kill -HUP "$C"
    check "daemon: SIGHUP reload logged" wait_for 10 grep -qs 'msg="node list reloaded"' "$d/stderr"
    check "daemon: node added by the reload is polled" wait_for 10 grep -qs '"databend-ok"' "$J"
    check "daemon: rounds repeat on the interval" wait_for 10 bash -c "[ \$(grep -c '\"starrocks-ok\"' '$J') -ge 3 ]"
    grep -v databend-ok "$d/be.list" >"$d/run.list"
    kill -HUP "$C"
    check "daemon: a node removed from the list is dropped" wait_for 10 grep -qs 'removed=1 msg="node list reloaded"' "$d/stderr"
    # The hanging node now has a transfer in flight (30 s timeout).
    check "daemon: hanging node in flight" wait_for 10 bash -c "grep -q 'round=.*nodes=3' '$d/stderr'"
    local t0
    t0=$(date +%s%N)
    kill -TERM "$C"
    local rc
    wait "$C"
    rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    check "daemon: SIGTERM exits 0 (rc=$rc)" test "$rc" -eq 0
    check "daemon: SIGTERM stopped in ${ms} ms (< 3000)" test "$ms" -lt 3000
    check "daemon: the abandoned transfer is recorded" test "$(rec "$J" starrocks-hang .error | grep -c 'abandoned at shutdown')" -eq 1
    check "daemon: loop closed cleanly" bash -c "! grep -q 'loop closed with handles' '$d/stderr'"
}

# Largest number of jobs running at once, from each record's first attempt
# start to its last attempt's end (ms since the epoch, from the records).
max_overlap() {
    jq -r '[.attempts[0].start, (.attempts[-1].start), (.attempts[-1].ms)] | @tsv' "$1" |
        while IFS=$'\t' read -r s e ms; do
            echo "$(date -d "$s" +%s%3N) 1"
            echo "$(($(date -d "$e" +%s%3N) + ms)) -1"
        done | sort -n -k1,1 -k2,2n | awk '{ c += $2; if (c > m) m = c } END { print m }'
}

case_limits() {
    local d=$WORK/limits
    start_fakenode "$d" starrocks:hangx6 || return
    local t0
    t0=$(date +%s%N)
    "$COLLECTOR" --nodes "$d/be.list" --once --out "$d/out" --timeout 1s --retries 0 \
        --max-inflight 2 >"$d/stdout" 2>"$d/stderr"
    local ms=$((($(date +%s%N) - t0) / 1000000))
    local m
    m=$(max_overlap "$d/out/snapshots.jsonl")
    check "limits: --max-inflight 2 ran at most 2 nodes at once (saw $m)" test "$m" -le 2 -a "$m" -ge 1
    check "limits: 6 one-second timeouts, 2 at a time, took ${ms} ms (3 waves)" test "$ms" -ge 2900 -a "$ms" -lt 6000

    local e=$WORK/spread
    start_fakenode "$e" starrocksx5 || return
    "$COLLECTOR" --nodes "$e/be.list" --once --out "$e/out" --spread 2s >"$e/stdout" 2>"$e/stderr"
    local first last
    first=$(jq -r '.attempts[0].start' "$e/out/snapshots.jsonl" | sort | head -n 1)
    last=$(jq -r '.attempts[0].start' "$e/out/snapshots.jsonl" | sort | tail -n 1)
    local span=$(($(date -d "$last" +%s%3N) - $(date -d "$first" +%s%3N)))
    check "spread: 5 nodes over --spread 2s started across ${span} ms (1000..2400)" test "$span" -ge 1000 -a "$span" -le 2400
}

case_unchanged() {
    local d=$WORK/unchanged
    start_fakenode "$d" --cache agent || return
    local J=$d/out/snapshots.jsonl
    "$COLLECTOR" --nodes "$d/be.list" --interval 1s --spread 0 --out "$d/out" \
        >"$d/stdout" 2>"$d/stderr" &
    local C=$!
    PIDS+=($C)
    check "unchanged: two rounds recorded" wait_for 10 bash -c "[ \$(cat '$J' 2>/dev/null | grep -c .) -ge 2 ]"
    kill -TERM "$C"
    wait "$C"
    check "unchanged: the repeat is marked unchanged and names the first file" \
        test "$(jq -s '.[0].dump.unchanged == false and .[1].dump.unchanged == true and .[0].dump.file == .[1].dump.file' "$J")" = true
    check "unchanged: the dump was written once" test "$(ls "$d/out/agent-ok/"*.heap | wc -l)" -eq 1
}

# Write batching: the store sink keeps up to 32 snapshots in one
# transaction; a daemon that has nothing more to poll (the next round is an
# hour away) must have committed them all, readable from another process.
case_batch() {
    local d=$WORK/batch
    command -v sqlite3 >/dev/null || { ok "batch: skipped (no sqlite3)"; return; }
    start_fakenode "$d" --cache starrocksx3 || return
    "$COLLECTOR" --nodes "$d/be.list" --interval 1h --spread 0 --db "$d/hf.db" --listen off \
        --no-progress >"$d/stdout" 2>"$d/stderr" &
    local C=$!
    PIDS+=($C)
    local q="SELECT count(*) FROM snapshots WHERE status = 'ok'"
    check "batch: an idle daemon has committed its round" \
        wait_for 60 bash -c "[ \"\$(sqlite3 -cmd '.timeout 2000' '$d/hf.db' \"$q\" 2>/dev/null)\" = 3 ]"
    check "batch: the daemon is still running (the round was not committed by exiting)" \
        kill -0 "$C"
    kill -TERM "$C"
    wait "$C" 2>/dev/null
}

# https through a real TLS server: openssl s_server -WWW serves files, so a
# jefixture dump saved as www/pprof/heap looks like a StarRocks node.
case_tls() {
    local d=$WORK/tls
    command -v openssl >/dev/null && command -v ss >/dev/null || { ok "tls: skipped (no openssl or ss)"; return; }
    local jefixture
    jefixture=$(dirname "$FAKENODE")/../fixtures/jefixture
    mkdir -p "$d/www/pprof"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/key.pem" -out "$d/cert.pem" -days 1 \
        -subj /CN=localhost 2>/dev/null
    MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" "$d/www/pprof/heap" || { not_ok "tls: jefixture"; return; }
    echo "starrocks_be_process_mem_bytes 123" >"$d/www/metrics"
    (cd "$d/www" && exec openssl s_server -accept 127.0.0.1:0 -WWW -cert ../cert.pem -key ../key.pem -quiet) \
        >/dev/null 2>&1 &
    local S=$!
    PIDS+=($S)
    local port=
    port_of_s() { port=$(ss -ltnpH 2>/dev/null | grep "pid=$S," | awk '{ sub(".*:", "", $4); print $4 }'); [ -n "$port" ]; }
    wait_for 10 port_of_s || { not_ok "tls: openssl s_server listening"; return; }
    printf 'starrocks 127.0.0.1:%s name=tls-insecure tls=insecure\nstarrocks 127.0.0.1:%s name=tls-verify tls=yes\nstarrocks 127.0.0.1:%s name=plain-to-tls\n' \
        "$port" "$port" "$port" >"$d/be.list"
    "$COLLECTOR" --nodes "$d/be.list" --once --out "$d/out" --retries 0 --timeout 3s --max-inflight 1 \
        >"$d/stdout" 2>"$d/stderr"
    local J=$d/out/snapshots.jsonl
    check "tls: tls=insecure fetched and parsed the dump over https" test "$(rec "$J" tls-insecure '.status + " " + .profile.format + " " + (.figures.starrocks_be_process_mem_bytes | tostring)')" = "ok jemalloc 123"
    check "tls: tls=yes refuses a self-signed certificate" bash -c "grep -q '^TLS failure (SSL certificate problem' <<<\"\$0\"" "$(rec "$J" tls-verify .error)"
    check "tls: plain http to a TLS port is explained" bash -c "grep -q 'a TLS port needs tls=yes' <<<\"\$0\"" "$(rec "$J" plain-to-tls .error)"
}

# TLS with a private CA (openssl-generated): the node's certificate is
# checked against ca_file=, and a server that demands a client certificate
# gets the one in cert_file=/key_file=.
case_tlsca() {
    local d=$WORK/tlsca
    command -v openssl >/dev/null && command -v ss >/dev/null || { ok "tlsca: skipped (no openssl or ss)"; return; }
    local jefixture
    jefixture=$(dirname "$FAKENODE")/../fixtures/jefixture
    mkdir -p "$d/www/pprof"
    (
        cd "$d" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=heapfleet-test-ca
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1
        printf 'subjectAltName=IP:127.0.0.1\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile server.ext
        openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=collector
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1
    ) >"$d/openssl.log" 2>&1 || { not_ok "tlsca: openssl made the CA and certificates"; return; }
    MALLOC_CONF=prof:true,lg_prof_sample:0 "$jefixture" "$d/www/pprof/heap" || { not_ok "tlsca: jefixture"; return; }
    echo "starrocks_be_process_mem_bytes 123" >"$d/www/metrics"
    (cd "$d/www" && exec openssl s_server -accept 127.0.0.1:0 -WWW -cert ../server.pem -key ../server.key \
        -CAfile ../ca.pem -Verify 1 -verify_return_error -quiet) >"$d/s_server.log" 2>&1 &
    local S=$!
    PIDS+=($S)
    local port=
    port_of_s() { port=$(ss -ltnpH 2>/dev/null | grep "pid=$S," | awk '{ sub(".*:", "", $4); print $4 }'); [ -n "$port" ]; }
    wait_for 10 port_of_s || { not_ok "tlsca: openssl s_server listening"; return; }
    {
        printf 'starrocks 127.0.0.1:%s name=ca-client ca_file=%s cert_file=%s key_file=%s\n' "$port" "$d/ca.pem" "$d/client.pem" "$d/client.key"
        printf 'starrocks 127.0.0.1:%s name=ca-no-client ca_file=%s\n' "$port" "$d/ca.pem"
        printf 'starrocks 127.0.0.1:%s name=no-ca cert_file=%s key_file=%s tls=yes\n' "$port" "$d/client.pem" "$d/client.key"
    } >"$d/be.list"
    "$COLLECTOR" --nodes "$d/be.list" --once --out "$d/out" --retries 0 --timeout 5s --max-inflight 1 \
        >"$d/stdout" 2>"$d/stderr"
    local J=$d/out/snapshots.jsonl
    check "tlsca: CA-checked TLS with a client certificate fetched and parsed the dump" test "$(rec "$J" ca-client '.status + " " + .profile.format')" = "ok jemalloc"
    check "tlsca: without a client certificate the server refuses" test "$(rec "$J" ca-no-client .status)" != ok
    check "tlsca: without ca_file the private CA is not trusted" bash -c "grep -q 'SSL certificate problem' <<<\"\$0\"" "$(rec "$J" no-ca .error)"
}

# FE discovery against a fake FE (a real HTTP server with basic auth) whose
# backends are fakenodes: an HA pair whose first address is down, alive,
# dead and decommissioned backends, a StarRocks CN, a Doris FE in the old
# positional shape with a wrong password, and an FE that dies between rounds
# (its backends stay, its failure is recorded under the FE line's name).
case_fe() {
    local d=$WORK/fe
    local FAKEFE
    FAKEFE=$(dirname "${BASH_SOURCE[0]}")/fake-fe.py
    command -v python3 >/dev/null || { ok "fe: skipped (no python3)"; return; }
    start_fakenode "$d" starrocks starrocks || return
    local p1 p2
    p1=$(awk 'NR == 1 { print $4 }' "$d/ports.txt")
    p2=$(awk 'NR == 2 { print $4 }' "$d/ports.txt")
    printf '10001 127.0.0.1 %s true false\n10002 127.0.0.1 %s false false\n10003 127.0.0.1 %s true true\n' \
        "$p1" "$p2" "$p2" >"$d/backends.txt"
    printf '20001 127.0.0.1 %s true false\n' "$p1" >"$d/cns.txt"
    echo s3cret >"$d/pw"
    python3 "$FAKEFE" "$d/fe.port" objects root s3cret "$d/backends.txt" "$d/cns.txt" 2>"$d/fe.err" &
    local FE=$!
    PIDS+=($FE)
    python3 "$FAKEFE" "$d/fe2.port" doris11-rows root other "$d/backends.txt" 2>"$d/fe2.err" &
    PIDS+=($!)
    wait_for 60 test -s "$d/fe.port" || { not_ok "fe: fake FE started"; return; }
    wait_for 60 test -s "$d/fe2.port" || { not_ok "fe: second fake FE started"; return; }
    local down
    down=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    printf 'starrocks-fe 127.0.0.1:%s,127.0.0.1:%s user=root password_file=%s name=sr\n' \
        "$down" "$(cat "$d/fe.port")" "$d/pw" >"$d/be.list"
    "$COLLECTOR" --nodes "$d/be.list" --check >"$d/check.out" 2>"$d/check.err"
    local rc=$?
    check "fe: --check exits 0 when discovery worked" test "$rc" -eq 0
    check "fe: --check says which FE of the HA pair answered" grep -q "answered by 127.0.0.1:$(cat "$d/fe.port"): 4 backends" "$d/check.out"
    check "fe: --check names backends by id at their HttpPort" grep -qP "\tsr-be10001\tstarrocks\t127.0.0.1:$p1\$" "$d/check.out"
    check "fe: --check marks the dead backend" grep -q "sr-be10002.*fe_status=dead" "$d/check.out"
    check "fe: --check marks the decommissioned backend" grep -q "sr-be10003.*fe_status=decommissioned" "$d/check.out"
    check "fe: --check lists the compute node" grep -q "sr-cn20001" "$d/check.out"
    printf 'doris-fe 127.0.0.1:%s user=root password_file=%s name=dc agent_port=7071\n' \
        "$(cat "$d/fe2.port")" "$d/pw" >"$d/bad.list"
    "$COLLECTOR" --nodes "$d/bad.list" --check >"$d/check2.out" 2>&1
    rc=$?
    check "fe: --check fails when the FE refuses the password" test "$rc" -eq 1
    check "fe: --check says which FE failed and how" grep -q "discovery FAILED: 127.0.0.1:$(cat "$d/fe2.port"): HTTP 401" "$d/check2.out"
    # Rounds: discovered nodes polled, then the FE dies and they stay.
    "$COLLECTOR" --nodes "$d/be.list" --interval 1s --spread 0 --timeout 5s --retries 0 \
        --out "$d/out" >"$d/stdout" 2>"$d/stderr" &
    local C=$!
    PIDS+=($C)
    local J=$d/out/snapshots.jsonl
    check "fe: a discovered backend is polled and stored" wait_for 20 bash -c "[ \"\$(jq -r 'select(.node == \"sr-be10001\") | .status' '$J' 2>/dev/null | head -n 1)\" = ok ]"
    check "fe: the dead backend is recorded as not polled" wait_for 10 bash -c "jq -r 'select(.node == \"sr-be10002\") | .error' '$J' | grep -q 'Alive=false; not polled'"
    check "fe: the decommissioned backend is labelled" wait_for 10 bash -c "jq -r 'select(.node == \"sr-be10003\") | .labels.fe_status' '$J' | grep -q decommissioned"
    kill "$FE"
    local before
    before=$(jq -r 'select(.node == "sr-be10001") | .status' "$J" | wc -l)
    check "fe: an FE failure is recorded on the FE line" wait_for 20 bash -c "jq -r 'select(.node == \"sr\") | .error' '$J' | grep -q 'FE discovery failed'"
    check "fe: known backends are still polled while the FE is down" wait_for 20 bash -c "[ \$(jq -r 'select(.node == \"sr-be10001\") | .status' '$J' | wc -l) -ge $((before + 2)) ]"
    kill -TERM "$C"
    wait "$C" 2>/dev/null
}

# An FE answering in Doris' positional rows (with the {"code":0} envelope):
# its backends are polled; a SIGHUP asks the FE again (the interval is an
# hour: no round would), a backend that joined is polled at once, and one
# that left keeps its stored history.
case_fe_rows() {
    local d=$WORK/fe-rows
    local FAKEFE
    FAKEFE=$(dirname "${BASH_SOURCE[0]}")/fake-fe.py
    [ -n "${QUERY:-}" ] || { ok "fe-rows: skipped (QUERY not set)"; return; }
    start_fakenode "$d" starrocks starrocks || return
    local p1 p2
    p1=$(awk 'NR == 1 { print $4 }' "$d/ports.txt")
    p2=$(awk 'NR == 2 { print $4 }' "$d/ports.txt")
    printf '10001 127.0.0.1 %s true false\n' "$p1" >"$d/backends.txt"
    echo s3cret >"$d/pw"
    python3 "$FAKEFE" "$d/fe.port" doris-rows root s3cret "$d/backends.txt" 2>"$d/fe.err" &
    PIDS+=($!)
    wait_for 60 test -s "$d/fe.port" || { not_ok "fe-rows: fake FE started"; return; }
    printf 'starrocks-fe 127.0.0.1:%s user=root password_file=%s name=dr\n' \
        "$(cat "$d/fe.port")" "$d/pw" >"$d/be.list"
    "$COLLECTOR" --nodes "$d/be.list" --interval 1h --spread 0 --timeout 5s --retries 0 \
        --db "$d/h.db" --listen off >"$d/stdout" 2>"$d/stderr" &
    local C=$!
    PIDS+=($C)
    stored() { "$QUERY" snapshots "$1" --db "$d/h.db" 2>/dev/null | grep -c ' ok '; }
    check "fe-rows: a backend from positional rows is polled and stored" \
        wait_for 30 bash -c "[ \"\$('$QUERY' snapshots dr-be10001 --db '$d/h.db' 2>/dev/null | grep -c ' ok ')\" -ge 1 ]"
    # The cluster changes: 10001 leaves, 10004 joins.
    printf '10004 127.0.0.1 %s true false\n' "$p2" >"$d/backends.txt.new"
    mv "$d/backends.txt.new" "$d/backends.txt"
    kill -HUP "$C"
    check "fe-rows: SIGHUP asks the FE again: one backend joined, one left" \
        wait_for 30 grep -q 'added=1 changed=0 removed=1 msg="node list reloaded"' "$d/stderr"
    check "fe-rows: the backend that joined is polled now, not at the next round" \
        wait_for 30 bash -c "[ \"\$('$QUERY' snapshots dr-be10004 --db '$d/h.db' 2>/dev/null | grep -c ' ok ')\" -ge 1 ]"
    check "fe-rows: the backend that left keeps its history" test "$(stored dr-be10001)" -ge 1
    "$QUERY" nodes --db "$d/h.db" >"$d/nodes.txt" 2>&1
    check "fe-rows: query nodes still lists the backend that left" grep -q "^dr-be10001 " "$d/nodes.txt"
    kill -TERM "$C"
    wait "$C" 2>/dev/null
}

command -v jq >/dev/null || { echo "1..0 # SKIP jq not installed"; exit 77; }
for c in $CASES; do "case_$c"; done
[ "$fails" -eq 0 ] || echo "# $fails check(s) failed"
exit $((fails > 0))
