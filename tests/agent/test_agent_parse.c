/* Unit tests for the agent's parsers: dump file names of every database kind,
 * query strings, routes, /proc text and MAPPED_LIBRARIES paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/agent.h"

static int parse(const char *name, struct ingest_dumpname *d)
{
    return ingest_dumpname_parse(name, strlen(name), d);
}

static void test_dumpname_jemalloc_interval(void **state)
{
    struct ingest_dumpname d;
    /* The RisingWave docs' example names. */
    assert_int_equal(parse("compute-node.266187.116.i116.heap", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_JEMALLOC);
    assert_int_equal(d.trigger, INGEST_TRIGGER_INTERVAL);
    assert_int_equal(d.prefix_len, strlen("compute-node"));
    assert_int_equal(d.pid, 266187);
    assert_int_equal(d.seq, 116);
    assert_int_equal(d.trigger_seq, 116);
}

static void test_dumpname_jemalloc_triggers(void **state)
{
    struct ingest_dumpname d;
    assert_int_equal(parse("jeprof.12.3.m4.heap", &d), 1);
    assert_int_equal(d.trigger, INGEST_TRIGGER_MANUAL);
    assert_int_equal(parse("jeprof.12.3.u0.heap", &d), 1);
    assert_int_equal(d.trigger, INGEST_TRIGGER_GDUMP);
    assert_int_equal(parse("jeprof.12.7.f.heap", &d), 1);
    assert_int_equal(d.trigger, INGEST_TRIGGER_FINAL);
    assert_int_equal(d.seq, 7);
    assert_int_equal(d.trigger_seq, -1);
    /* Doris's JEMALLOC_PROF_PRFIX ends in '_' and may contain dots. */
    assert_int_equal(parse("jemalloc_heap_profile_.4321.0.i0.heap", &d), 1);
    assert_int_equal(d.prefix_len, strlen("jemalloc_heap_profile_"));
    assert_int_equal(d.pid, 4321);
    assert_int_equal(parse("a.b.c.9.8.i7.heap", &d), 1);
    assert_int_equal(d.prefix_len, 5);
    assert_int_equal(d.pid, 9);
}

static void test_dumpname_doris(void **state)
{
    struct ingest_dumpname d;
    assert_int_equal(parse("jeheap_dump.1700000000.4242.1804289383.heap", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_DORIS);
    assert_int_equal(d.time, 1700000000);
    assert_int_equal(d.pid, 4242);
    assert_int_equal(d.prefix_len, strlen("jeheap_dump"));
}

static void test_dumpname_risingwave(void **state)
{
    struct ingest_dumpname d;
    assert_int_equal(parse("2026-11-22-07-30-05.auto.heap", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_RISINGWAVE);
    assert_int_equal(d.trigger, INGEST_TRIGGER_AUTO);
    assert_int_equal(d.tm[0], 2026);
    assert_int_equal(d.tm[5], 5);
    assert_int_equal(d.pid, -1);
    assert_int_equal(parse("2026-11-22-07-30-05.manual.heap", &d), 1);
    assert_int_equal(d.trigger, INGEST_TRIGGER_MANUAL);
    /* Month 13 is not a RisingWave time: still a .heap file, generic kind. */
    assert_int_equal(parse("2026-13-22-07-30-05.auto.heap", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_HEAP);
}

static void test_dumpname_starrocks_and_generic(void **state)
{
    struct ingest_dumpname d;
    assert_int_equal(parse("heap_profile.777.1681692777", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_STARROCKS);
    assert_int_equal(d.pid, 777);
    assert_int_equal(parse("before-upgrade.heap", &d), 1);
    assert_int_equal(d.kind, INGEST_DUMP_HEAP);
    assert_int_equal(d.prefix_len, strlen("before-upgrade"));
}

static void test_dumpname_rejects_non_dumps(void **state)
{
    struct ingest_dumpname d;
    static const char *const no[] = {
        "be.INFO", "be.out", "..", ".", ".heap", ".hidden.heap", "heap_profile.x.1",
        "heap_profile.1", "x.heap.collapsed", "2026-11-22-07-30-05.auto.heap.collapsed", "",
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(no); i++)
        assert_int_equal(parse(no[i], &d), 0);
    assert_int_equal(ingest_dumpname_parse("a/b.heap", 8, &d), 0);
    assert_int_equal(ingest_dumpname_parse("a\0b.heap", 8, &d), 0);
    /* Would inject a header line or break JSON. */
    assert_int_equal(parse("x\r\nSet-Cookie: a.heap", &d), 0);
    assert_int_equal(parse("caf\xc3\xa9.heap", &d), 0);
    char longname[300];
    memset(longname, 'a', sizeof(longname));
    memcpy(longname + sizeof(longname) - 6, ".heap", 6);
    assert_int_equal(parse(longname, &d), 0);
}

static void test_query_decodes_values(void **state)
{
    char out[64];
    size_t n;
    const char *q = "a=1&name=jeprof.1.2.i3.heap&path=%2Ftmp%2Fx+y";
    assert_int_equal(agent_query_get(q, strlen(q), "name", out, sizeof(out), &n), 1);
    assert_string_equal(out, "jeprof.1.2.i3.heap");
    assert_int_equal(agent_query_get(q, strlen(q), "path", out, sizeof(out), &n), 1);
    assert_string_equal(out, "/tmp/x y");
    assert_int_equal(n, 8);
    assert_int_equal(agent_query_get(q, strlen(q), "nope", out, sizeof(out), &n), 0);
    /* Percent-encoded dots decode once; what they spell is judged later. */
    q = "name=%2e%2e%2fetc";
    assert_int_equal(agent_query_get(q, strlen(q), "name", out, sizeof(out), &n), 1);
    assert_string_equal(out, "../etc");
    q = "name=%252e%252e";
    assert_int_equal(agent_query_get(q, strlen(q), "name", out, sizeof(out), &n), 1);
    assert_string_equal(out, "%2e%2e");
}

static void test_query_rejects_malformed(void **state)
{
    char out[16];
    size_t n;
    static const char *const bad[] = { "name=%zz", "name=%2", "name=%", "name=a%00b",
                                       "name=a&name=b" };
    for (size_t i = 0; i < HP_ARRAY_SIZE(bad); i++)
        assert_true(agent_query_get(bad[i], strlen(bad[i]), "name", out, sizeof(out), &n) < 0);
    const char *q = "name=0123456789abcdefXYZ";
    assert_int_equal(agent_query_get(q, strlen(q), "name", out, sizeof(out), &n), HP_ETOOBIG);
}

static void test_route_matches_exactly(void **state)
{
    char id[AGENT_BUILD_ID_HEX_MAX + 1];
    assert_int_equal(agent_route_match("/dumps", 6, id), AGENT_ROUTE_DUMPS);
    assert_int_equal(agent_route_match("/dumps/newest", 13, id), AGENT_ROUTE_NEWEST);
    assert_int_equal(agent_route_match("/dumps/delete", 13, id), AGENT_ROUTE_DELETE);
    assert_int_equal(agent_route_match("/dumps/delete/", 14, id), AGENT_ROUTE_NONE);
    assert_int_equal(agent_route_match("/dumps/", 7, id), AGENT_ROUTE_NONE);
    assert_int_equal(agent_route_match("/dumps/../etc", 13, id), AGENT_ROUTE_NONE);
    assert_int_equal(agent_route_match("/dumps/%2e%2e", 13, id), AGENT_ROUTE_NONE);
    const char *p = "/buildid/ABCDEF0123/executable";
    assert_int_equal(agent_route_match(p, strlen(p), id), AGENT_ROUTE_BUILDID_EXEC);
    assert_string_equal(id, "abcdef0123");
    p = "/buildid/abcdef0123/debuginfo";
    assert_int_equal(agent_route_match(p, strlen(p), id), AGENT_ROUTE_BUILDID_DEBUG);
    p = "/buildid/abcdef012/executable"; /* odd length */
    assert_int_equal(agent_route_match(p, strlen(p), id), AGENT_ROUTE_NONE);
    p = "/buildid/abcdefgh/executable";
    assert_int_equal(agent_route_match(p, strlen(p), id), AGENT_ROUTE_NONE);
    p = "/buildid/abcdef01/source/x";
    assert_int_equal(agent_route_match(p, strlen(p), id), AGENT_ROUTE_NONE);
}

static void test_range_parse(void **state)
{
    uint64_t a = 7, b = 7;
#define RANGE(text, size) agent_range_parse(text, strlen(text), size, &a, &b)
    assert_int_equal(RANGE("bytes=100-", 1000), 1);
    assert_true(a == 100 && b == 1000);
    assert_int_equal(RANGE("bytes=0-0", 1000), 1);
    assert_true(a == 0 && b == 1);
    assert_int_equal(RANGE("bytes=10-5000", 1000), 1); /* clipped to the file */
    assert_true(a == 10 && b == 1000);
    assert_int_equal(RANGE("bytes=-10", 1000), 1);
    assert_true(a == 990 && b == 1000);
    assert_int_equal(RANGE("bytes=-5000", 1000), 1);
    assert_true(a == 0 && b == 1000);
    assert_int_equal(RANGE("bytes=1000-", 1000), -1);
    assert_int_equal(RANGE("bytes=-0", 1000), -1);
    assert_int_equal(RANGE("bytes=0-", 0), -1);
    a = b = 7;
    static const char *const ignored[] = { "bytes=", "bytes=-", "bytes=1-2,4-5", "items=1-2",
                                           "bytes=a-", "bytes=5-2", "bytes=1-x",
                                           "bytes=99999999999999999999-" };
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        assert_int_equal(RANGE(ignored[i], 1000), 0);
    assert_true(a == 7 && b == 7); /* untouched unless 1 */
#undef RANGE
}

static void test_proc_parses_status_and_rollup(void **state)
{
    static const char status[] = "Name:\tdoris_be\nUmask:\t0022\nState:\tS (sleeping)\n"
                                 "Pid:\t4242\nVmPeak:\t 9000 kB\nVmRSS:\t  1234 kB\n"
                                 "SigQ:\t0/63\nSigBlk:\t0000000000000000\nThreads:\t17\n";
    struct agent_proc_fields p;
    uint64_t v;
    agent_proc_parse(status, sizeof(status) - 1, &p);
    assert_string_equal(p.name, "doris_be");
    assert_int_equal(agent_proc_get(&p, "VmRSS", &v), 1);
    assert_int_equal(v, 1234 * 1024);
    assert_int_equal(agent_proc_get(&p, "Threads", &v), 1);
    assert_int_equal(v, 17);
    for (size_t i = 0; i < p.n; i++) /* kB lines are bytes, the rest counts */
        assert_int_equal(p.f[i].bytes, strncmp(p.f[i].key, "Vm", 2) == 0);
    assert_int_equal(agent_proc_get(&p, "Pid", &v), 1);
    assert_int_equal(v, 4242);
    assert_int_equal(agent_proc_get(&p, "SigQ", &v), 0);
    static const char rollup[] = "55d1c2a00000-7ffd2b7fe000 ---p 00000000 00:00 0   [rollup]\n"
                                 "Rss:              502964 kB\nPss:              497110 kB\n"
                                 "Pss_Anon:         480000 kB\n";
    agent_proc_parse(rollup, sizeof(rollup) - 1, &p);
    assert_int_equal(agent_proc_get(&p, "Pss", &v), 1);
    assert_int_equal(v, 497110ull * 1024);
    assert_int_equal(agent_proc_get(&p, "Pss_Anon", &v), 1);
    assert_int_equal(p.n, 3);
}

/* The start time from /proc/<pid>/stat and /proc/stat's btime; a command
 * name with spaces and parentheses does not shift the fields. */
static void test_proc_start_time(void **state)
{
    (void)state;
    static const char stat[] = "4242 (doris be) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 "
                               "20 0 17 0 123456 1000000 250 18446744073709551615\n";
    static const char sys[] = "cpu  1 2 3\nintr 5\nbtime 1763800000\nprocesses 99\n";
    double s = 0;
    assert_int_equal(agent_proc_start_time(stat, sizeof(stat) - 1, sys, sizeof(sys) - 1, 100, &s),
                     1);
    assert_true(s > 1763801234.5 && s < 1763801234.6);
    assert_int_equal(agent_proc_start_time(stat, sizeof(stat) - 1, "cpu 1\n", 6, 100, &s), 0);
    assert_int_equal(agent_proc_start_time("4242 (x) S 1 2", 14, sys, sizeof(sys) - 1, 100, &s), 0);
    assert_int_equal(agent_proc_start_time("no paren", 8, sys, sizeof(sys) - 1, 100, &s), 0);
}

struct collect {
    char paths[8][128];
    int n;
};

static int collect_cb(const char *path, void *arg)
{
    struct collect *c = arg;
    if (c->n < 8)
        snprintf(c->paths[c->n++], sizeof(c->paths[0]), "%s", path);
    return 0;
}

static void test_maps_paths_distinct(void **state)
{
    static const char maps[] =
        "55d1c2a00000-55d1c5e00000 r-xp 00000000 fd:01 1234   /opt/be/lib/doris_be\n"
        "55d1c5e00000-55d1c5f00000 r--p 03400000 fd:01 1234   /opt/be/lib/doris_be\n"
        "7f00-7f01 rw-p 00000000 00:00 0 \n"
        "7f01-7f02 r-xp 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 rw-s 00000000 00:01 7 /dev/zero (deleted)\n"
        "7fff7da14000-7fff7da35000 rw-p 00000000 00:00 0                          [stack]\n"
        "garbage line\n"
        "7f03-7f04 r-xp 00000000 fd:01 100 /opt/dir with space/lib.so";
    struct collect c = { .n = 0 };
    agent_maps_paths(maps, sizeof(maps) - 1, collect_cb, &c);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.paths[0], "/opt/be/lib/doris_be");
    assert_string_equal(c.paths[1], "/usr/lib/x86_64-linux-gnu/libc.so.6");
    assert_string_equal(c.paths[2], "/opt/dir with space/lib.so");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dumpname_jemalloc_interval),
        cmocka_unit_test(test_dumpname_jemalloc_triggers),
        cmocka_unit_test(test_dumpname_doris),
        cmocka_unit_test(test_dumpname_risingwave),
        cmocka_unit_test(test_dumpname_starrocks_and_generic),
        cmocka_unit_test(test_dumpname_rejects_non_dumps),
        cmocka_unit_test(test_query_decodes_values),
        cmocka_unit_test(test_query_rejects_malformed),
        cmocka_unit_test(test_route_matches_exactly),
        cmocka_unit_test(test_range_parse),
        cmocka_unit_test(test_proc_parses_status_and_rollup),
        cmocka_unit_test(test_proc_start_time),
        cmocka_unit_test(test_maps_paths_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
