/* Unit tests for collector/poll: the node list parser and the readers for
 * /metrics, /mem_tracker, /vars, agent /proc and Doris /jeheap/dump replies. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/poll/poll.h"

static struct poll_nodelist *parse_ok(const char *text, size_t *ret_bad, struct hp_buf *err)
{
    struct poll_nodelist *l = NULL;
    assert_int_equal(poll_nodelist_parse(text, strlen(text), "be.list", 0, &l, ret_bad, err), 0);
    assert_non_null(l);
    return l;
}

static void test_nodelist_parses_every_kind(void **state)
{
    const char *text = "# fleet\n"
                       "\n"
                       "starrocks 10.0.0.1:8040 name=sr-1 zone=a\n"
                       "doris 10.0.0.2:8040 name=be-2 agent=10.0.0.2:7071 activate=yes "
                       "brpc=10.0.0.2:8060   # trailing comment\n"
                       "databend [::1]:8080 metrics=127.0.0.1:7070\n"
                       "agent 10.0.0.4:7071 process=compute-node\n"
                       "url https://x.example/debug/heap?x=1 name=u\n"
                       "10.0.0.9:8040\n"
                       "http://bare.example:1/p name=bare\r\n";
    size_t bad = 99;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = parse_ok(text, &bad, &err);
    assert_int_equal(bad, 0);
    assert_int_equal(err.len, 0);
    assert_int_equal(l->n, 7);
    assert_int_equal(l->nodes[0].kind, POLL_KIND_STARROCKS);
    assert_string_equal(l->nodes[0].name, "sr-1");
    assert_int_equal(l->nodes[0].line, 3);
    assert_int_equal(l->nodes[0].nlabels, 1);
    assert_string_equal(l->nodes[0].labels[0].key, "zone");
    assert_string_equal(l->nodes[0].labels[0].value, "a");
    assert_int_equal(l->nodes[1].kind, POLL_KIND_DORIS);
    assert_true(l->nodes[1].activate);
    assert_string_equal(l->nodes[1].agent, "10.0.0.2:7071");
    assert_string_equal(l->nodes[1].brpc, "10.0.0.2:8060");
    assert_int_equal(l->nodes[2].kind, POLL_KIND_DATABEND);
    assert_string_equal(l->nodes[2].name, "[::1]:8080"); /* default name: the address */
    assert_string_equal(l->nodes[2].metrics, "127.0.0.1:7070");
    assert_int_equal(l->nodes[3].kind, POLL_KIND_AGENT);
    assert_string_equal(l->nodes[3].agent, "10.0.0.4:7071"); /* the agent is the address */
    assert_string_equal(l->nodes[3].process, "compute-node");
    assert_int_equal(l->nodes[4].kind, POLL_KIND_URL);
    assert_string_equal(l->nodes[4].addr, "https://x.example/debug/heap?x=1");
    assert_int_equal(l->nodes[5].kind, POLL_KIND_STARROCKS); /* kind defaults */
    assert_int_equal(l->nodes[6].kind, POLL_KIND_URL);       /* a bare URL */
    assert_string_equal(l->nodes[6].name, "bare");
    poll_nodelist_free(l);
    hp_buf_release(&err);
}

static void test_nodelist_bad_lines_reported_rest_loaded(void **state)
{
    const char *text = "starrocks 10.0.0.1:8040 name=a\n"
                       "dorris 10.0.0.2:8040\n"
                       "doris 10.0.0.3\n"
                       "doris 10.0.0.3:99999\n"
                       "starrocks 10.0.0.4:8040 pasword_file=/x user=u\n"
                       "starrocks 10.0.0.5:8040 name=a\n"
                       "starrocks 10.0.0.6:8040 activate=yes\n"
                       "url ftp://x/y\n"
                       "starrocks 10.0.0.7:8040 tls=maybe\n"
                       "databend 10.0.0.8:8080 name=ok2\n";
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = parse_ok(text, &bad, &err);
    assert_int_equal(l->n, 2);
    assert_string_equal(l->nodes[0].name, "a");
    assert_string_equal(l->nodes[1].name, "ok2");
    assert_int_equal(bad, 8);
    assert_non_null(strstr(err.data, "be.list:2: unknown kind \"dorris\" (expected doris, "
                                     "starrocks, databend, agent, url)"));
    assert_non_null(strstr(err.data, "be.list:3: bad address \"10.0.0.3\": missing :PORT"));
    assert_non_null(strstr(err.data, "be.list:4: bad address"));
    assert_non_null(strstr(err.data, "be.list:5: unknown option \"pasword_file\" (did you mean "
                                     "password_file=?)"));
    assert_non_null(strstr(err.data, "be.list:6: node name \"a\" already used on line 1"));
    assert_non_null(strstr(err.data, "be.list:7: activate=yes is only possible for doris"));
    assert_non_null(strstr(err.data, "be.list:8: bad address \"ftp://x/y\""));
    assert_non_null(strstr(err.data, "be.list:9: tls=maybe"));
    poll_nodelist_free(l);
    hp_buf_release(&err);
}

static void test_nodelist_strict_refuses(void **state)
{
    const char *text = "starrocks 10.0.0.1:8040\nbogus\n";
    struct poll_nodelist *l = NULL;
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(
        poll_nodelist_parse(text, strlen(text), "be.list", POLL_NODELIST_STRICT, &l, &bad, &err),
        HP_EPARSE);
    assert_null(l);
    assert_non_null(strstr(err.data, "be.list:2:"));
    hp_buf_release(&err);
}

static void test_nodelist_password_file_read(void **state)
{
    char path[] = "/tmp/hp-pw-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret\nignored\n", 15), 15);
    close(fd);
    char *text = hp_xasprintf("starrocks 10.0.0.1:8040 user=root password_file=%s\n"
                              "starrocks 10.0.0.2:8040 user=root password_file=/nonexistent/pw\n"
                              "starrocks 10.0.0.3:8040 password_file=%s\n",
                              path, path);
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = parse_ok(text, &bad, &err);
    assert_int_equal(l->n, 1);
    assert_string_equal(l->nodes[0].user, "root");
    assert_string_equal(l->nodes[0].password, "s3cret");
    assert_int_equal(bad, 2);
    assert_non_null(strstr(err.data, "be.list:2: password_file: /nonexistent/pw: cannot open"));
    assert_non_null(strstr(err.data, "be.list:3: password_file= without user="));
    poll_nodelist_free(l);
    hp_buf_release(&err);
    free(text);
    unlink(path);
}

static void test_nodelist_node_dup_equal(void **state)
{
    size_t bad;
    struct poll_nodelist *l = parse_ok("doris 1.2.3.4:8040 name=x agent=1.2.3.4:1 k=v\n"
                                       "doris 1.2.3.4:8040 name=y agent=1.2.3.4:2 k=v\n",
                                       &bad, NULL);
    struct poll_node *c = poll_node_dup(&l->nodes[0]);
    assert_true(poll_node_equal(c, &l->nodes[0]));
    assert_false(poll_node_equal(c, &l->nodes[1]));
    poll_node_free(c);
    poll_nodelist_free(l);
}

static void test_nodelist_long_and_binary_lines(void **state)
{
    size_t n = (1u << 20) + 10;
    char *text = hp_xmalloc(n + 64);
    memset(text, 'a', n);
    memcpy(text + n, "\nstarrocks 1.1.1.1:1\nx\0y:1\n", 27);
    struct poll_nodelist *l = NULL;
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_nodelist_parse(text, n + 27, "be.list", 0, &l, &bad, &err), 0);
    assert_int_equal(l->n, 1);
    assert_int_equal(bad, 2);
    assert_non_null(strstr(err.data, "be.list:1: line is"));
    assert_non_null(strstr(err.data, "be.list:3: NUL byte"));
    poll_nodelist_free(l);
    hp_buf_release(&err);
    free(text);
}

static void test_metrics_keeps_memory_series(void **state)
{
    const char *text = "# HELP starrocks_be_process_mem_bytes process memory\n"
                       "# TYPE starrocks_be_process_mem_bytes gauge\n"
                       "starrocks_be_process_mem_bytes 123456789012\n"
                       "starrocks_be_fragment_requests_total 17\n"
                       "starrocks_be_jemalloc_allocated_bytes{le=\"a}b\",x=\"q\\\"\"} 5.5e3\n"
                       "doris_be_memory_allocated_bytes 9007199254740993\r\n"
                       "process_resident_memory_bytes 1024 1700000000000\n"
                       "jemalloc_active_bytes NaN\n";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_metrics_parse(text, strlen(text), &f, &err), 0);
    assert_int_equal(f.n, 5);
    double v;
    assert_int_equal(poll_figures_get(&f, "starrocks_be_process_mem_bytes", &v), 1);
    assert_true(v == 123456789012.0);
    assert_int_equal(poll_figures_get(&f, "starrocks_be_fragment_requests_total", &v), 0);
    assert_int_equal(
        poll_figures_get(&f, "starrocks_be_jemalloc_allocated_bytes{le=\"a}b\",x=\"q\\\"\"}", &v),
        1);
    assert_true(v == 5500.0);
    assert_int_equal(poll_figures_get(&f, "doris_be_memory_allocated_bytes", &v), 1);
    assert_true(v == 9007199254740992.0); /* the nearest double; parsed as an integer */
    assert_int_equal(poll_figures_get(&f, "process_resident_memory_bytes", &v), 1);
    assert_true(v == 1024.0);
    assert_int_equal(f.v[0].source, POLL_FIG_METRICS);
    poll_figures_release(&f);
    hp_buf_release(&err);
}

static void test_metrics_bad_line_named_rest_kept(void **state)
{
    const char *text = "mem_a 1\n"
                       "mem_b{x=\"1\" 2\n"
                       "mem_c notanumber\n"
                       "9mem 1\n"
                       "mem_d 4\n";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_metrics_parse(text, strlen(text), &f, &err), HP_EPARSE);
    assert_int_equal(f.n, 2);
    assert_string_equal(err.data, "metrics line 2: unterminated label set (expected '}')");
    poll_figures_release(&f);
    hp_buf_release(&err);
}

static void test_metrics_caps_series(void **state)
{
    struct hp_buf text = HP_BUF_INIT(0);
    for (unsigned i = 0; i < POLL_FIGURES_MAX + 5; i++)
        assert_int_equal(hp_buf_printf(&text, "mem_%u 1\n", i), 0);
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_metrics_parse(text.data, text.len, &f, &err), HP_ETOOBIG);
    assert_int_equal(f.n, POLL_FIGURES_MAX);
    assert_non_null(strstr(err.data, "more than 4096 memory series"));
    poll_figures_release(&f);
    hp_buf_release(&err);
    hp_buf_release(&text);
}

static const char doris_tracker[] =
    "<html><body><table class='table'>\n"
    "<tr><th>Type</th><th>Label</th><th>Parent Label</th><th>Limit</th>"
    "<th>Current Consumption(Bytes)</th><th>Current Consumption(Normalize)</th>"
    "<th>Peak Consumption(Bytes)</th><th>Peak Consumption(Normalize)</th></tr>\n"
    "<tr><td>overview</td><td>process resident memory</td><td></td><td>none</td>"
    "<td>87369024</td><td>83.32 MB</td><td>92616000</td><td>88.33 MB</td></tr>\n"
    "<tr><td>global</td><td>Orphan &amp; \"Global\"</td><td></td><td>none</td>"
    "<td> 1024 </td><td>1 KB</td><td>2048</td><td>2 KB</td></tr>\n"
    "<tr><td>query</td><td>rounded</td><td></td><td>none</td><td>1.5 GB</td></tr>\n"
    "</table></body></html>";

static void test_tracker_reads_byte_columns(void **state)
{
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_tracker_parse(doris_tracker, strlen(doris_tracker), &f, &err), 0);
    assert_int_equal(f.n, 4);
    double v;
    assert_int_equal(poll_figures_get(&f,
                                      "mem_tracker_current_bytes{type=\"overview\",label=\"process "
                                      "resident memory\"}",
                                      &v),
                     1);
    assert_true(v == 87369024.0);
    assert_int_equal(
        poll_figures_get(
            &f, "mem_tracker_peak_bytes{type=\"global\",label=\"Orphan & \\\"Global\\\"\"}", &v),
        1);
    assert_true(v == 2048.0);
    assert_int_equal(f.v[0].source, POLL_FIG_TRACKER);
    poll_figures_release(&f);
    hp_buf_release(&err);
}

static void test_tracker_offline_and_rounded_pages(void **state)
{
    const char *offline = "<h2>mem_tracker webpage has been offline, please click <a "
                          "href=../profile>Process Profile</a></h2>";
    const char *starrocks = "<table><tr><th>level</th><th>Label</th><th>Parent</th><th>Limit</th>"
                            "<th>Current Consumption</th><th>Peak Consumption</th></tr>"
                            "<tr><td>1</td><td>process</td><td></td><td>10G</td><td>1.2G</td>"
                            "<td>2G</td></tr></table>";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_tracker_parse(offline, strlen(offline), &f, &err), HP_ENOTFOUND);
    assert_non_null(strstr(err.data, "offline"));
    hp_buf_release(&err);
    assert_int_equal(poll_tracker_parse(starrocks, strlen(starrocks), &f, &err), HP_ENOTFOUND);
    assert_non_null(strstr(err.data, "Current Consumption(Bytes)"));
    assert_int_equal(f.n, 0);
    hp_buf_release(&err);
}

static void test_vars_reads_numbers(void **state)
{
    const char *text = "memory_all_tracked_sum_bytes : 1878648\n"
                       "memory_query_trackers_sum_bytes: 626216\r\n"
                       "bthread_worker_usage : {\"a\":1}\n"
                       "no colon here\n";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_vars_parse(text, strlen(text), &f, &err), 0);
    assert_int_equal(f.n, 2);
    double v;
    assert_int_equal(poll_figures_get(&f, "memory_query_trackers_sum_bytes", &v), 1);
    assert_true(v == 626216.0);
    poll_figures_release(&f);
    assert_int_equal(poll_vars_parse("x : y\n", 6, &f, &err), HP_ENOTFOUND);
    hp_buf_release(&err);
}

static void test_proc_json(void **state)
{
    const char *j =
        "{\"pid\":12,\"comm\":\"x\",\"rss_bytes\":4096,\"jemalloc\":{\"allocated\":10}}";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_proc_parse(j, strlen(j), &f, &err), 0);
    double v;
    assert_int_equal(poll_figures_get(&f, "proc_rss_bytes", &v), 1);
    assert_true(v == 4096.0);
    assert_int_equal(poll_figures_get(&f, "proc_jemalloc_allocated", &v), 1);
    assert_int_equal(poll_figures_get(&f, "proc_comm", &v), 0);
    poll_figures_release(&f);
    assert_int_equal(poll_proc_parse("{\"a\":", 5, &f, &err), HP_EPARSE);
    assert_non_null(strstr(err.data, "proc JSON line 1"));
    hp_buf_release(&err);
}

static void test_memory_pick_prefers_exact_sources(void **state)
{
    const char *metrics = "doris_be_memory_allocated_bytes 1000\n"
                          "doris_be_memory_jemalloc_allocated_bytes 600\n"
                          "process_resident_memory_bytes 999\n";
    const char *vars = "memory_all_tracked_sum_bytes : 400\n";
    struct poll_figures f = {0};
    struct poll_memory m;
    assert_int_equal(poll_metrics_parse(metrics, strlen(metrics), &f, NULL), 0);
    assert_int_equal(poll_vars_parse(vars, strlen(vars), &f, NULL), 0);
    poll_memory_pick(&f, &m);
    assert_true(m.rss_bytes == 1000.0); /* Doris' RSS gauge first */
    assert_true(m.allocated_bytes == 600.0);
    assert_true(m.tracked_bytes == 400.0);
    poll_figures_release(&f);
    poll_memory_pick(&f, &m);
    assert_true(isnan(m.rss_bytes) && isnan(m.allocated_bytes) && isnan(m.tracked_bytes));
}

static void test_doris_dump_path(void **state)
{
    const char *ok = "jemalloc heap dump success, dump file path: "
                     "/opt/doris/log/jeheap_dump.1700000000.1234.42.heap\n";
    const char *old = "Jemalloc heap dump success, dump file path: /a/b.heap";
    const char *failed = "jemalloc heap dump failed\n";
    char *p = NULL;
    assert_int_equal(poll_doris_dump_path(ok, strlen(ok), &p), 1);
    assert_string_equal(p, "/opt/doris/log/jeheap_dump.1700000000.1234.42.heap");
    free(p);
    assert_int_equal(poll_doris_dump_path(old, strlen(old), &p), 1);
    assert_string_equal(p, "/a/b.heap");
    free(p);
    assert_int_equal(poll_doris_dump_path(failed, strlen(failed), &p), 0);
    assert_int_equal(poll_doris_dump_path("dump file path: relative", 24, &p), 0);
}

static void test_url_escape(void **state)
{
    char *e = poll_url_escape("/opt/doris log/x&y=1.heap");
    assert_string_equal(e, "/opt/doris%20log/x%26y%3D1.heap");
    free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodelist_parses_every_kind),
        cmocka_unit_test(test_nodelist_bad_lines_reported_rest_loaded),
        cmocka_unit_test(test_nodelist_strict_refuses),
        cmocka_unit_test(test_nodelist_password_file_read),
        cmocka_unit_test(test_nodelist_node_dup_equal),
        cmocka_unit_test(test_nodelist_long_and_binary_lines),
        cmocka_unit_test(test_metrics_keeps_memory_series),
        cmocka_unit_test(test_metrics_bad_line_named_rest_kept),
        cmocka_unit_test(test_metrics_caps_series),
        cmocka_unit_test(test_tracker_reads_byte_columns),
        cmocka_unit_test(test_tracker_offline_and_rounded_pages),
        cmocka_unit_test(test_vars_reads_numbers),
        cmocka_unit_test(test_proc_json),
        cmocka_unit_test(test_memory_pick_prefers_exact_sources),
        cmocka_unit_test(test_doris_dump_path),
        cmocka_unit_test(test_url_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
