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
    assert_string_equal(l->nodes[2].name, "::1:8080"); /* default name: the address */
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
    /* The misspelt key is a warning outside --check/--strict: the node stays. */
    assert_int_equal(l->n, 3);
    assert_string_equal(l->nodes[0].name, "a");
    assert_string_equal(l->nodes[1].name, "10.0.0.4:8040");
    assert_null(l->nodes[1].password_file);
    assert_string_equal(l->nodes[2].name, "ok2");
    assert_int_equal(bad, 7);
    assert_int_equal(l->warnings, 1);
    assert_non_null(strstr(err.data, "be.list:2: unknown kind \"dorris\" (expected doris, "
                                     "starrocks, databend, agent, url, doris-fe, starrocks-fe)"));
    assert_non_null(strstr(err.data, "be.list:3: bad address \"10.0.0.3\": missing :PORT"));
    assert_non_null(strstr(err.data, "be.list:4: bad address"));
    assert_non_null(strstr(err.data, "be.list:5: warning: unknown option \"pasword_file\" "
                                     "ignored (did you mean password_file=?)"));
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

/* Node names are letters, digits and ._:- (issue 13): a name that could
 * break a header, a path or the UI is refused with its line; a url node's
 * credentials move out of its address; follow_redirects= is parsed. */
static void test_nodelist_hostile_names_and_urls(void **state)
{
    (void)state;
    const char *text = "starrocks 10.0.0.1:1 name=ok.1_a:b-c\n"
                       "starrocks 10.0.0.1:2 name=a\rSet-Cookie:x\n"
                       "starrocks 10.0.0.1:3 name=<script>\n"
                       "starrocks 10.0.0.1:4 name=../../etc\n"
                       "url http://admin:p%40ss@db.example:8040/pprof/heap\n"
                       "url http://u@db.example:8041/x follow_redirects=same-host\n"
                       "url http://a:b@db.example:8042/x user=c\n"
                       "starrocks 10.0.0.1:5 follow_redirects=sometimes\n";
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = NULL;
    assert_int_equal(poll_nodelist_parse(text, strlen(text), "be.list", 0, &l, &bad, &err), 0);
    assert_int_equal(bad, 5);
    assert_non_null(strstr(err.data, "be.list:2: name=: byte 2 (0x0d)"));
    assert_non_null(strstr(err.data, "be.list:3: name=: byte 1 (0x3c)"));
    assert_non_null(strstr(err.data, "be.list:4: name=: byte 3 (0x2f)"));
    assert_non_null(strstr(err.data, "be.list:7: credentials both in the URL and in user="));
    assert_non_null(strstr(err.data, "be.list:8: follow_redirects=sometimes"));
    assert_int_equal(l->n, 3);
    assert_string_equal(l->nodes[0].name, "ok.1_a:b-c");
    assert_int_equal(l->nodes[0].redirects, POLL_REDIRECT_NO);
    assert_string_equal(l->nodes[1].addr, "http://db.example:8040/pprof/heap");
    assert_string_equal(l->nodes[1].user, "admin");
    assert_string_equal(l->nodes[1].password, "p@ss");
    assert_string_equal(l->nodes[1].name, "db.example:8040_pprof_heap");
    assert_string_equal(l->nodes[2].addr, "http://db.example:8041/x");
    assert_string_equal(l->nodes[2].user, "u");
    assert_null(l->nodes[2].password);
    assert_int_equal(l->nodes[2].redirects, POLL_REDIRECT_SAME_HOST);
    poll_nodelist_free(l);
    hp_buf_release(&err);
}

/* Budgets on a node line (issue 13 item 8): sizes with K/M/G, counts in
 * range; a bad value is refused with its line; dup and equal see them. */
static void test_nodelist_budgets(void **state)
{
    (void)state;
    const char *text = "starrocks 10.0.0.1:1 name=a max_body=64M max_decoded=1G max_ratio=50 "
                       "max_stacks=1000 max_frames=64\n"
                       "starrocks 10.0.0.1:2 name=b\n"
                       "starrocks 10.0.0.1:3 name=c max_decoded=lots\n"
                       "starrocks 10.0.0.1:4 name=d max_ratio=0\n"
                       "starrocks 10.0.0.1:5 name=e max_frames=100001\n"
                       "starrocks 10.0.0.1:6 name=f max_body=0\n";
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = NULL;
    assert_int_equal(poll_nodelist_parse(text, strlen(text), "be.list", 0, &l, &bad, &err), 0);
    assert_int_equal(bad, 4);
    assert_non_null(strstr(err.data, "be.list:3: max_decoded=lots: expected a size"));
    assert_non_null(strstr(err.data, "be.list:4: max_ratio=0: expected a whole number from 1"));
    assert_non_null(strstr(err.data, "be.list:5: max_frames=100001"));
    assert_non_null(strstr(err.data, "be.list:6: max_body=0: expected a size"));
    assert_int_equal(l->n, 2);
    const struct poll_node *a = &l->nodes[0];
    assert_int_equal(a->max_body, 64u << 20);
    assert_int_equal(a->max_decoded, 1u << 30);
    assert_int_equal(a->max_ratio, 50);
    assert_int_equal(a->max_stacks, 1000);
    assert_int_equal(a->max_frames, 64);
    assert_int_equal(l->nodes[1].max_body, 0); /* the collector's flag decides */
    struct poll_node *c = poll_node_dup(a);
    assert_true(poll_node_equal(c, a));
    c->max_stacks++;
    assert_false(poll_node_equal(c, a));
    poll_node_free(c);
    poll_nodelist_free(l);
    hp_buf_release(&err);
}

/* Misspelt keys: errors under --check and --strict, warnings otherwise;
 * keys far from every option stay labels. A doris line without agent=
 * cannot fetch a byte, so --check refuses it. */
static void test_nodelist_typo_keys_and_unusable_lines(void **state)
{
    (void)state;
    const char *text = "starrocks 10.0.0.1:8040 nmae=be-1 rack=r7\n"
                       "starrocks 10.0.0.2:8040 name=be-2 tsl=yes\n"
                       "doris 10.0.0.3:8040 name=be-3\n"
                       "doris 10.0.0.4:8040 name=be-4 agent=10.0.0.4:7071\n";
    for (int mode = 0; mode < 3; mode++) {
        unsigned flags = mode == 0 ? 0 : mode == 1 ? POLL_NODELIST_CHECK : POLL_NODELIST_STRICT;
        struct poll_nodelist *l = NULL;
        size_t bad = 0;
        struct hp_buf err = HP_BUF_INIT(0);
        int r = poll_nodelist_parse(text, strlen(text), "be.list", flags, &l, &bad, &err);
        if (mode == 0) {
            assert_int_equal(r, 0);
            assert_int_equal(l->n, 4);
            assert_int_equal(bad, 0);
            assert_int_equal(l->warnings, 3);
            assert_non_null(strstr(err.data, "be.list:1: warning: unknown option \"nmae\" ignored "
                                             "(did you mean name=?)"));
            assert_non_null(strstr(err.data, "be.list:2: warning: unknown option \"tsl\" ignored "
                                             "(did you mean tls=?)"));
            assert_non_null(strstr(err.data, "be.list:3: warning: doris node \"be-3\" has no "
                                             "agent="));
            assert_int_equal(l->nodes[0].nlabels, 1); /* rack=r7 */
            assert_string_equal(l->nodes[0].labels[0].key, "rack");
        } else if (mode == 1) {
            assert_int_equal(r, 0);
            assert_int_equal(l->n, 1);
            assert_int_equal(bad, 3);
            assert_non_null(strstr(err.data, "be.list:1: unknown option \"nmae\" (did you mean "
                                             "name=?)"));
            assert_non_null(strstr(err.data, "be.list:3: doris node \"be-3\" has no agent="));
        } else {
            assert_int_equal(r, HP_EPARSE);
            assert_null(l);
            assert_non_null(strstr(err.data, "(did you mean tls=?)"));
        }
        poll_nodelist_free(l);
        hp_buf_release(&err);
    }
}

/* TLS per node: CA and client certificate files (checked at load), and
 * FE lines with their address list and backend options. */
static void test_nodelist_tls_and_fe_lines(void **state)
{
    (void)state;
    char path[] = "/tmp/hp-ca-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char *text = hp_xasprintf(
        "starrocks 10.0.0.1:8040 name=a ca_file=%s cert_file=%s key_file=%s\n"
        "starrocks 10.0.0.2:8040 name=b ca_file=/nonexistent/ca.pem\n"
        "starrocks 10.0.0.3:8040 name=c key_file=%s\n"
        "starrocks 10.0.0.4:8040 name=d tls=no ca_file=%s\n"
        "starrocks-fe 10.0.1.1:8030,10.0.1.2:8030 name=sr agent_port=7071 tls=insecure\n"
        "doris-fe 10.0.2.1:8030 agent_port=7071 delete_after_fetch=yes\n"
        "doris-fe 10.0.2.1:8030,:8030 name=x agent_port=7071\n"
        "starrocks 10.0.0.5:8040 name=e delete_after_fetch=yes\n"
        "starrocks 10.0.0.6:8040 name=f agent_port=7071\n",
        path, path, path, path, path);
    size_t bad = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct poll_nodelist *l = parse_ok(text, &bad, &err);
    assert_int_equal(l->n, 3);
    assert_string_equal(l->nodes[0].ca_file, path);
    assert_string_equal(l->nodes[0].key_file, path);
    assert_int_equal(l->nodes[0].tls, POLL_TLS_YES); /* implied by ca_file */
    assert_int_equal(l->nodes[1].kind, POLL_KIND_STARROCKS_FE);
    assert_string_equal(l->nodes[1].name, "sr");
    assert_string_equal(l->nodes[1].addr, "10.0.1.1:8030,10.0.1.2:8030");
    assert_int_equal(l->nodes[1].agent_port, 7071);
    assert_int_equal(l->nodes[2].kind, POLL_KIND_DORIS_FE);
    assert_string_equal(l->nodes[2].name, "fe"); /* the default prefix */
    assert_true(l->nodes[2].delete_after_fetch);
    assert_int_equal(bad, 6);
    assert_non_null(strstr(err.data, "be.list:2: ca_file=/nonexistent/ca.pem: cannot read it"));
    assert_non_null(strstr(err.data, "be.list:3: key_file= without cert_file="));
    assert_non_null(strstr(err.data, "be.list:4: ca_file=/cert_file= need TLS"));
    assert_non_null(strstr(err.data, "be.list:7: bad address"));
    assert_non_null(strstr(err.data, "be.list:8: delete_after_fetch= is for doris nodes"));
    assert_non_null(strstr(err.data, "be.list:9: agent_port= is for FE lines"));
    struct poll_node *c = poll_node_dup(&l->nodes[0]);
    assert_true(poll_node_equal(c, &l->nodes[0]));
    free(c->cert_file);
    c->cert_file = NULL;
    assert_false(poll_node_equal(c, &l->nodes[0]));
    poll_node_free(c);
    poll_nodelist_free(l);
    hp_buf_release(&err);
    free(text);
    unlink(path);
}

/* The FE's backends table in the shapes the FEs write it (column names
 * from their BackendsProcDir): objects, Doris 2.x rows in the envelope,
 * Doris 1.1 rows with the Cluster column; and answers that must fail. */
static void test_fe_backends_both_shapes(void **state)
{
    (void)state;
    const char *objects =
        "[{\"BackendId\":\"10001\",\"IP\":\"10.0.0.1\",\"HeartbeatPort\":\"9050\","
        "\"HttpPort\":\"8040\",\"LastHeartbeat\":\"2026-11-23 19:00:00\",\"Alive\":\"true\","
        "\"SystemDecommissioned\":\"false\",\"ClusterDecommissioned\":\"true\"},"
        "{\"BackendId\":10002,\"Host\":\"be-2.example\",\"HttpPort\":8041,\"Alive\":false}]";
    const char *doris2 =
        "{\"msg\":\"success\",\"code\":0,\"data\":["
        "[\"11001\",\"10.0.1.1\",\"9050\",\"9060\",\"8040\",\"8060\",\"8070\","
        "\"2026-11-23 10:00:00\",\"2026-11-23 19:00:00\",\"true\",\"true\",\"12\"]],\"count\":0}";
    const char *doris11 =
        "{\"code\":0,\"data\":[[\"12001\",\"default_cluster\",\"10.0.2.1\",\"h1\",\"9050\","
        "\"9060\",\"8040\",\"8060\",\"2026-11-23 10:00:00\",\"2026-11-23 19:00:00\","
        "\"false\",\"false\",\"false\",\"3\"]]}";
    struct poll_backend *b = NULL;
    size_t n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_fe_backends_parse(objects, strlen(objects), false, &b, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(b[0].id, "10001");
    assert_string_equal(b[0].host, "10.0.0.1");
    assert_int_equal(b[0].http_port, 8040);
    assert_true(b[0].alive && b[0].decommissioned);
    assert_string_equal(b[1].host, "be-2.example");
    assert_int_equal(b[1].http_port, 8041);
    assert_false(b[1].alive);
    /* Nodes: named by id, the FE line's options, agent at agent_port. */
    struct poll_node fe = { .kind = POLL_KIND_STARROCKS_FE, .name = "sr", .addr = "x:1",
                            .agent_port = 7071, .tls = POLL_TLS_INSECURE };
    struct poll_node *node = poll_fe_backend_node(&fe, &b[0]);
    assert_string_equal(node->name, "sr-be10001");
    assert_int_equal(node->kind, POLL_KIND_STARROCKS);
    assert_string_equal(node->addr, "10.0.0.1:8040");
    assert_string_equal(node->agent, "10.0.0.1:7071");
    assert_int_equal(node->tls, POLL_TLS_INSECURE);
    assert_int_equal(node->fe_state, POLL_FE_DECOMMISSIONED);
    assert_int_equal(node->nlabels, 2);
    poll_node_free(node);
    poll_backends_free(b, n);
    assert_int_equal(poll_fe_backends_parse(doris2, strlen(doris2), false, &b, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(b[0].host, "10.0.1.1");
    assert_int_equal(b[0].http_port, 8040);
    assert_true(b[0].alive && b[0].decommissioned);
    poll_backends_free(b, n);
    assert_int_equal(poll_fe_backends_parse(doris11, strlen(doris11), false, &b, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(b[0].id, "12001");
    assert_string_equal(b[0].host, "10.0.2.1");
    assert_int_equal(b[0].http_port, 8040);
    assert_false(b[0].alive);
    poll_backends_free(b, n);
    const char *cn = "[{\"ComputeNodeId\":\"20001\",\"IP\":\"10.0.3.1\",\"HttpPort\":\"8040\","
                     "\"Alive\":\"true\"}]";
    assert_int_equal(poll_fe_backends_parse(cn, strlen(cn), true, &b, &n, &err), 0);
    fe.kind = POLL_KIND_DORIS_FE;
    fe.agent_port = 0;
    node = poll_fe_backend_node(&fe, &b[0]);
    assert_string_equal(node->name, "sr-cn20001");
    assert_int_equal(node->kind, POLL_KIND_DORIS);
    assert_null(node->agent);
    poll_node_free(node);
    poll_backends_free(b, n);
    static const struct {
        const char *json, *needle;
    } bad[] = {
        { "<html>login</html>", "not JSON" },
        { "{\"code\":1,\"msg\":\"Access denied\"}", "code 1: Access denied" },
        { "{\"rows\":[]}", "expected an array" },
        { "[{\"BackendId\":\"x\",\"IP\":\"h\",\"HttpPort\":\"1\",\"Alive\":\"true\"}]",
          "row 1: BackendId" },
        { "[{\"BackendId\":\"1\",\"IP\":\"h h\",\"HttpPort\":\"1\",\"Alive\":\"true\"}]",
          "IP/Host" },
        { "[{\"BackendId\":\"1\",\"IP\":\"h\",\"HttpPort\":\"70000\",\"Alive\":\"true\"}]",
          "HttpPort" },
        { "[{\"BackendId\":\"1\",\"IP\":\"h\",\"HttpPort\":\"1\"}]", "Alive" },
        { "[[\"1\",\"h\",\"3\"]]", "no Alive column" },
        { "[7]", "neither an object nor an array" },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(bad); i++) {
        hp_buf_reset(&err);
        b = NULL;
        int r = poll_fe_backends_parse(bad[i].json, strlen(bad[i].json), false, &b, &n, &err);
        if (r == 0 || !strstr(err.data, bad[i].needle))
            fprintf(stderr, "case %zu: r=%d err=%s\n", i, r, err.data ? err.data : "");
        assert_true(r < 0);
        assert_null(b);
        assert_non_null(strstr(err.data, bad[i].needle));
    }
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
                       "jemalloc_active_bytes NaN\n"
                       "process_start_time_seconds 1763798400\n";
    struct poll_figures f = {0};
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(poll_metrics_parse(text, strlen(text), &f, &err), 0);
    assert_int_equal(f.n, 6);
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
    /* Not memory, but kept: the leak analysis splits lifetimes on it. */
    assert_int_equal(poll_figures_get(&f, "process_start_time_seconds", &v), 1);
    assert_true(v == 1763798400.0);
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
        cmocka_unit_test(test_nodelist_hostile_names_and_urls),
        cmocka_unit_test(test_nodelist_budgets),
        cmocka_unit_test(test_nodelist_typo_keys_and_unusable_lines),
        cmocka_unit_test(test_nodelist_tls_and_fe_lines),
        cmocka_unit_test(test_fe_backends_both_shapes),
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
