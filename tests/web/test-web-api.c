/* API tests: the real server (h2o on a libuv loop in a thread) over a folder
 * of real jemalloc dumps made by jefixture at test time, driven over loopback
 * with libcurl. Checks status codes and bodies, the 400/401/404/405/501
 * paths, static files without traversal, the /metrics format, gzip, that the
 * API prints what the `query` CLI prints, and a clean stop (uv_loop_close()
 * returns 0 even with an idle keep-alive connection open).
 *
 * Environment (set by tests/web/meson.build): HF_JEFIXTURE, HF_MKDATA,
 * HF_QUERY (the query executable), HF_TMP (scratch folder). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "web/web.h"

struct srv {
    uv_loop_t loop;
    uv_async_t stop_async;
    pthread_t thread;
    struct web_server *server;
    struct web_source_dir *src;
    int port;
    bool stopped;
    int close_rc;
};

static char datadir[600], staticdir[600], tmpdir[400];
static struct srv main_srv;

static void stopped_cb(void *arg)
{
    struct srv *s = arg;
    s->stopped = true;
}

static void stop_async_cb(uv_async_t *a)
{
    struct srv *s = a->data;
    web_server_stop(s->server, stopped_cb, s);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_thread(void *arg)
{
    struct srv *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    s->close_rc = uv_loop_close(&s->loop);
    return NULL;
}

static int srv_start_cap(struct srv *s, const char *token, size_t max_body)
{
    memset(s, 0, sizeof(*s));
    struct hp_buf err = HP_BUF_INIT(0);
    if (web_source_dir_new(datadir, &s->src, &err) < 0)
        goto fail;
    uv_loop_init(&s->loop);
    struct web_config cfg;
    web_config_init(&cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.static_dir = staticdir;
    cfg.token = token;
    cfg.max_body = max_body;
    if (web_server_start(&s->loop, &cfg, &web_source_dir_ops, s->src, &s->server, &err) < 0)
        goto fail;
    s->port = web_server_port(s->server);
    uv_async_init(&s->loop, &s->stop_async, stop_async_cb);
    s->stop_async.data = s;
    pthread_create(&s->thread, NULL, loop_thread, s);
    hp_buf_release(&err);
    return 0;
fail:
    fprintf(stderr, "server start: %s\n", err.data ? err.data : "?");
    hp_buf_release(&err);
    return -1;
}

static int srv_start(struct srv *s, const char *token)
{
    return srv_start_cap(s, token, 0);
}

static int srv_stop(struct srv *s)
{
    uv_async_send(&s->stop_async);
    pthread_join(s->thread, NULL);
    web_source_dir_free(s->src);
    return s->stopped && s->close_rc == 0 ? 0 : -1;
}

/* ---- HTTP helpers ------------------------------------------------------------ */

struct resp {
    long status;
    char *body;
    size_t len;
    char ctype[128];
    char encoding[32];
};

static size_t write_cb(char *p, size_t sz, size_t n, void *ud)
{
    struct resp *r = ud;
    r->body = realloc(r->body, r->len + sz * n + 1);
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static size_t header_cb(char *p, size_t sz, size_t n, void *ud)
{
    struct resp *r = ud;
    size_t len = sz * n;
    if (len > 17 && strncasecmp(p, "content-encoding:", 17) == 0)
        snprintf(r->encoding, sizeof(r->encoding), "%.*s", (int)strcspn(p + 18, "\r\n"),
                 p + 18);
    return len;
}

/* GET path on the main server (or `port`); `hdr` is an extra header or NULL;
 * `raw` sends the path as is (no curl normalization). */
static struct resp get_full(int port, const char *method, const char *path, const char *hdr,
                            bool gzip)
{
    struct resp r = { 0 };
    r.body = calloc(1, 1);
    CURL *c = curl_easy_init();
    char url[4096];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    if (gzip)
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
    if (h)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode cr = curl_easy_perform(c);
    if (cr != CURLE_OK)
        fprintf(stderr, "GET %s: %s\n", path, curl_easy_strerror(cr));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        snprintf(r.ctype, sizeof(r.ctype), "%s", ct);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

static struct resp get(const char *path)
{
    return get_full(main_srv.port, NULL, path, NULL, false);
}

static json_t *get_json(const char *path, long want_status)
{
    struct resp r = get(path);
    if (r.status != want_status)
        fprintf(stderr, "GET %s -> %ld: %s\n", path, r.status, r.body);
    assert_int_equal(r.status, want_status);
    assert_string_equal(r.ctype, "application/json");
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    if (!j)
        fprintf(stderr, "GET %s: bad JSON: %s\n", path, je.text);
    assert_non_null(j);
    free(r.body);
    return j;
}

static int64_t jint(json_t *o, const char *path)
{
    json_t *v = json_object_get(o, path);
    assert_non_null(v);
    return json_integer_value(v);
}

/* ---- fixtures ------------------------------------------------------------------- */

static int group_setup(void **state)
{
    (void)state;
    const char *fx = getenv("HF_JEFIXTURE"), *mk = getenv("HF_MKDATA"), *tmp = getenv("HF_TMP");
    if (!fx || !mk || !tmp) {
        fprintf(stderr, "HF_JEFIXTURE, HF_MKDATA and HF_TMP must be set\n");
        return -1;
    }
    if (strlen(tmp) > 300)
        return -1;
    snprintf(tmpdir, sizeof(tmpdir), "%.300s/web-api", tmp);
    snprintf(datadir, sizeof(datadir), "%s/data", tmpdir);
    snprintf(staticdir, sizeof(staticdir), "%s/static", tmpdir);
    static char cmd[8192];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s/static/css' && '%s' '%s' '%s'",
             tmpdir, tmpdir, mk, fx, datadir);
    if (system(cmd) != 0)
        return -1;
    /* A UI folder with one page, and a secret right next to it that must
     * never be served. */
    snprintf(cmd, sizeof(cmd),
             "printf '<!doctype html><title>hf</title>' > '%s/index.html' && "
             "printf 'body{}' > '%s/css/a.css' && printf 'top secret' > '%s/secret.txt' && "
             "printf 'dot' > '%s/.hidden'",
             staticdir, staticdir, tmpdir, staticdir);
    if (system(cmd) != 0)
        return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return srv_start(&main_srv, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    int r = srv_stop(&main_srv);
    curl_global_cleanup();
    return r;
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_api_nodes_lists_fleet(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/nodes?spark=8", 200);
    json_t *nodes = json_object_get(j, "nodes");
    assert_int_equal(json_array_size(nodes), 4);
    json_t *be1 = json_array_get(nodes, 0), *be4 = json_array_get(nodes, 3);
    assert_string_equal(json_string_value(json_object_get(be1, "name")), "be-1");
    assert_string_equal(json_string_value(json_object_get(be1, "kind")), "doris");
    assert_string_equal(json_string_value(json_object_get(be1, "status")), "ok");
    assert_int_equal(jint(be1, "snapshots"), 4);
    json_t *latest = json_object_get(be1, "latest");
    assert_true(json_integer_value(json_object_get(json_object_get(latest, "totals"),
                                                   "inuse_space")) > 1000000);
    /* jefixture's leak path grows every round: the sparkline rises. */
    json_t *spark = json_object_get(be1, "spark");
    assert_int_equal(json_array_size(spark), 4);
    assert_true(json_integer_value(json_array_get(spark, 3)) >
                json_integer_value(json_array_get(spark, 0)));
    json_t *anom = json_object_get(be1, "anomalies");
    assert_string_equal(json_string_value(json_array_get(anom, 0)), "growing");
    assert_string_equal(json_string_value(json_object_get(be4, "status")), "failing");
    assert_string_equal(json_string_value(json_object_get(be4, "error")),
                        "connect to 127.0.0.1:8040 refused");
    assert_true(json_is_null(json_object_get(be4, "latest")));
    assert_int_equal(jint(json_object_get(j, "fleet"), "failing"), 1);
    json_decref(j);
}

static void test_api_snapshots_oldest_first(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/nodes/be-1/snapshots", 200);
    json_t *s = json_object_get(j, "snapshots");
    assert_int_equal(json_array_size(s), 4);
    int64_t prev = 0;
    for (size_t i = 0; i < 4; i++) {
        int64_t t = jint(json_array_get(s, i), "time_ms");
        assert_true(t > prev);
        prev = t;
    }
    json_decref(j);
    j = get_json("/api/v1/nodes/be-1/snapshots?limit=2", 200);
    assert_int_equal(json_array_size(json_object_get(j, "snapshots")), 2);
    json_decref(j);
    j = get_json("/api/v1/nodes/be-1/snapshots?since=150m", 200);
    assert_int_equal(json_array_size(json_object_get(j, "snapshots")), 2);
    json_decref(j);
    j = get_json("/api/v1/nodes/nosuch/snapshots", 404);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "nosuch"));
    json_decref(j);
}

static void test_api_selectors_resolve(void **state)
{
    (void)state;
    json_t *latest = get_json("/api/v1/snapshots/be-1", 200);
    json_t *byid = get_json("/api/v1/snapshots/%234", 200);
    assert_int_equal(jint(latest, "id"), jint(byid, "id"));
    /* be-1@-150m: the snapshot taken 3 hours ago (dumps are 1 h apart). */
    json_t *at = get_json("/api/v1/snapshots/be-1@-150m", 200);
    json_t *all = get_json("/api/v1/nodes/be-1/snapshots", 200);
    json_t *second = json_array_get(json_object_get(all, "snapshots"), 1);
    assert_int_equal(jint(at, "id"), jint(second, "id"));
    json_decref(latest);
    json_decref(byid);
    json_decref(at);
    json_decref(all);
    json_t *nf = get_json("/api/v1/snapshots/%23999/top", 404);
    json_decref(nf);
    nf = get_json("/api/v1/snapshots/be-1@2001-01-01T00:00:00Z/top", 404);
    json_decref(nf);
}

static void test_api_top_same_as_cli(void **state)
{
    (void)state;
    /* The collapsed export equals `query export FILE --format collapsed`
     * byte for byte, and the top table's numbers are the CLI's JSON's. */
    const char *q = getenv("HF_QUERY");
    assert_non_null(q);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s' export '%s/be-3/d3.heap' --format collapsed", q, datadir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *cli = calloc(1, 1 << 20);
    size_t n = fread(cli, 1, (1 << 20) - 1, p);
    assert_int_equal(pclose(p), 0);
    assert_true(n > 0);
    struct resp r = get("/api/v1/snapshots/be-3/profile?format=collapsed");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, n);
    assert_memory_equal(r.body, cli, n);
    free(r.body);

    snprintf(cmd, sizeof(cmd), "'%s' top '%s/be-3/d3.heap' --format json --top 5", q, datadir);
    p = popen(cmd, "r");
    n = fread(cli, 1, (1 << 20) - 1, p);
    cli[n] = '\0';
    assert_int_equal(pclose(p), 0);
    json_t *cj = json_loads(cli, 0, NULL);
    assert_non_null(cj);
    json_t *aj = get_json("/api/v1/snapshots/be-3/top?top=5", 200);
    assert_int_equal(jint(aj, "total"), jint(cj, "total"));
    json_t *cf = json_object_get(cj, "functions"), *af = json_object_get(aj, "functions");
    assert_int_equal(json_array_size(af), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *a = json_array_get(af, i), *c = json_array_get(cf, i);
        assert_string_equal(json_string_value(json_object_get(a, "name")),
                            json_string_value(json_object_get(c, "name")));
        assert_int_equal(jint(a, "flat"), jint(c, "flat"));
        assert_int_equal(jint(a, "cum"), jint(c, "cum"));
    }
    /* format=json is the CLI's JSON document itself. */
    json_t *pj = get_json("/api/v1/snapshots/be-3/profile?format=json&top=5", 200);
    assert_true(json_equal(pj, cj));
    json_decref(pj);
    json_decref(aj);
    json_decref(cj);
    free(cli);
}

static int64_t check_tree(json_t *node, int depth)
{
    int64_t v = json_integer_value(json_object_get(node, "v"));
    json_t *c = json_object_get(node, "c");
    int64_t sum = 0;
    for (size_t i = 0; c && i < json_array_size(c); i++)
        sum += check_tree(json_array_get(c, i), depth + 1);
    assert_true(sum <= v);
    assert_true(depth < 5000);
    return v;
}

static void test_api_tree_consistent(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/snapshots/be-1/tree", 200);
    json_t *root = json_object_get(j, "root");
    assert_int_equal(json_integer_value(json_object_get(root, "v")), jint(j, "total"));
    check_tree(root, 0);
    json_t *names = json_object_get(j, "names");
    assert_string_equal(json_string_value(json_array_get(names, 0)), "all");
    /* jefixture's paths are there by name (symbolized through jeprof). */
    bool found = false;
    for (size_t i = 0; i < json_array_size(names); i++)
        found |= strncmp(json_string_value(json_array_get(names, i)), "leak_tablet_schema", 18) == 0;
    assert_true(found);
    json_decref(j);
    /* focus keeps only matching stacks. */
    j = get_json("/api/v1/snapshots/be-1/tree?focus=segment_cache", 200);
    json_t *t = get_json("/api/v1/snapshots/be-1/top?top=0", 200);
    assert_true(jint(j, "total") > 0 && jint(j, "total") < jint(t, "total"));
    json_decref(j);
    json_decref(t);
    j = get_json("/api/v1/snapshots/be-1/tree?prune=0.05", 200);
    check_tree(json_object_get(j, "root"), 0);
    json_decref(j);
}

static void test_api_diff_totals(void **state)
{
    (void)state;
    json_t *a = get_json("/api/v1/snapshots/%231", 200);
    json_t *b = get_json("/api/v1/snapshots/%234", 200);
    json_t *d = get_json("/api/v1/diff?a=%231&b=%234", 200);
    int64_t ta = jint(json_object_get(a, "totals"), "inuse_space");
    int64_t tb = jint(json_object_get(b, "totals"), "inuse_space");
    assert_int_equal(jint(d, "delta"), tb - ta);
    json_t *root = json_object_get(d, "root");
    assert_int_equal(json_integer_value(json_object_get(root, "v")), tb);
    assert_int_equal(json_integer_value(json_object_get(root, "b")), ta);
    /* The biggest change is the leak path's allocation site. */
    json_t *f0 = json_array_get(json_object_get(d, "functions"), 0);
    assert_true(jint(f0, "delta_flat") > 0);
    json_decref(a);
    json_decref(b);
    json_decref(d);
    d = get_json("/api/v1/diff?a=be-1&b=be-2", 200);
    json_decref(d);
}

static void test_api_bad_params_400(void **state)
{
    (void)state;
    static const char *bad[] = {
        "/api/v1/snapshots/be%20one/top",              /* space in a node name */
        "/api/v1/snapshots/be-1@yesterday/top",        /* time */
        "/api/v1/snapshots/%23abc/top",                /* #ID */
        "/api/v1/snapshots/%230/top",                  /* #0 */
        "/api/v1/snapshots/.hidden/top",               /* leading dot */
        "/api/v1/snapshots/be-1/top?top=abc",
        "/api/v1/snapshots/be-1/top?top=100001",
        "/api/v1/snapshots/be-1/top?sample=heap",
        "/api/v1/snapshots/be-1/top?focus=%28",        /* unbalanced ( */
        "/api/v1/snapshots/be-1/top?bogus=1",
        "/api/v1/snapshots/be-1/top?top=1&top=2",
        "/api/v1/snapshots/be-1/top?focus=%zz",
        "/api/v1/snapshots/be-1/top?focus=a%00b",
        "/api/v1/snapshots/be-1/profile?format=csv",
        "/api/v1/snapshots/be-1/profile?format=exe",
        "/api/v1/snapshots/be-1/tree?prune=0.5",
        "/api/v1/nodes/be-1/snapshots?limit=0",
        "/api/v1/nodes/be-1/snapshots?since=soon",
        "/api/v1/nodes?spark=1000",
        "/api/v1/diff?a=be-1",
        "/api/v1/discrepancy",
        "/api/v1/trend?node=a%2Fb",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = get_json(bad[i], 400);
        const char *msg = json_string_value(json_object_get(j, "error"));
        assert_non_null(msg);
        assert_true(strlen(msg) > 5);
        json_decref(j);
    }
    /* Size caps: a 300-byte selector and a 300-byte regex. */
    char path[1024];
    char longs[301];
    memset(longs, 'a', 300);
    longs[300] = '\0';
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/top", longs);
    json_decref(get_json(path, 400));
    snprintf(path, sizeof(path), "/api/v1/snapshots/be-1/top?focus=%s", longs);
    json_t *j = get_json(path, 400);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "256"));
    json_decref(j);
}

static void test_api_unknown_404_and_method_405(void **state)
{
    (void)state;
    json_decref(get_json("/api/v1/nope", 404));
    json_decref(get_json("/api/v2/nodes", 404));
    json_decref(get_json("/api/v1/snapshots/be-1/top/extra", 404));
    struct resp r = get_full(main_srv.port, "POST", "/api/v1/nodes", NULL, false);
    assert_int_equal(r.status, 405);
    free(r.body);
    r = get_full(main_srv.port, "DELETE", "/metrics", NULL, false);
    assert_int_equal(r.status, 405);
    free(r.body);
}

static void test_api_pending_501(void **state)
{
    (void)state;
    static const char *pending[] = {
        "/api/v1/fleet", "/api/v1/leaks", "/api/v1/trend?node=be-1",
        "/api/v1/discrepancy?node=be-1", "/api/v1/symbolization",
        "/api/v1/snapshots/be-1/profile?format=pprof",
        "/api/v1/snapshots/be-1/profile?format=svg",
    };
    for (size_t i = 0; i < sizeof(pending) / sizeof(pending[0]); i++) {
        json_t *j = get_json(pending[i], 501);
        assert_non_null(json_string_value(json_object_get(j, "error")));
        json_decref(j);
    }
}

static void test_api_download_names_file(void **state)
{
    (void)state;
    struct resp r = get("/api/v1/snapshots/be-1/profile?format=text&download=1");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "text/plain; charset=utf-8");
    assert_non_null(strstr(r.body, "Total inuse_space"));
    free(r.body);
}

static void test_api_token_401(void **state)
{
    (void)state;
    struct srv s;
    assert_int_equal(srv_start(&s, "s3cret-token"), 0);
    struct resp r = get_full(s.port, NULL, "/api/v1/nodes", NULL, false);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "token"));
    free(r.body);
    r = get_full(s.port, NULL, "/api/v1/nodes", "Authorization: Bearer wrong", false);
    assert_int_equal(r.status, 401);
    free(r.body);
    r = get_full(s.port, NULL, "/api/v1/nodes", "Authorization: Bearer s3cret-token-longer",
                 false);
    assert_int_equal(r.status, 401);
    free(r.body);
    r = get_full(s.port, NULL, "/api/v1/nodes", "Authorization: Bearer s3cret-token", false);
    assert_int_equal(r.status, 200);
    free(r.body);
    r = get_full(s.port, NULL, "/metrics", NULL, false);
    assert_int_equal(r.status, 200);
    free(r.body);
    assert_int_equal(srv_stop(&s), 0);
}

static void test_api_static_no_traversal(void **state)
{
    (void)state;
    struct resp r = get("/");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<title>hf</title>"));
    free(r.body);
    r = get("/css/a.css");
    assert_int_equal(r.status, 200);
    free(r.body);
    static const char *bad[] = {
        "/../secret.txt",       "/css/../../secret.txt", "/%2e%2e/secret.txt",
        "/css/%2e%2e/%2e%2e/secret.txt", "/..%2fsecret.txt", "/.hidden",
        "/%2ehidden",           "/css/..%5c..%5csecret.txt", "/secret.txt",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = get(bad[i]);
        if (r.status == 200)
            fprintf(stderr, "served %s: %s\n", bad[i], r.body);
        assert_true(r.status == 404 || r.status == 400 || r.status == 403);
        assert_null(strstr(r.body, "top secret"));
        assert_null(strstr(r.body, "dot"));
        free(r.body);
    }
}

/* Prometheus text format rules, line by line: HELP then TYPE before a
 * family's samples, samples contiguous, valid names, parseable values. */
static void test_api_metrics_format(void **state)
{
    (void)state;
    struct resp r = get("/metrics");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/plain; version=0.0.4"));
    char *save = NULL;
    char fam[128] = "", done[64][128];
    size_t ndone = 0, samples = 0;
    bool typed = false;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            char name[128];
            assert_int_equal(sscanf(line + 7, "%127s", name), 1);
            for (size_t i = 0; i < ndone; i++)
                assert_string_not_equal(done[i], name); /* a family appears once */
            snprintf(fam, sizeof(fam), "%s", name);
            snprintf(done[ndone++], 128, "%s", name);
            typed = false;
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            assert_int_equal(sscanf(line + 7, "%127s %31s", name, type), 2);
            assert_string_equal(name, fam);
            assert_true(strcmp(type, "gauge") == 0 || strcmp(type, "counter") == 0 ||
                        strcmp(type, "histogram") == 0);
            typed = true;
            continue;
        }
        assert_true(line[0] != '#');
        assert_true(typed);
        size_t nl = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:0123456789");
        assert_true(nl > 0);
        assert_int_equal(strncmp(line, fam, strlen(fam)), 0);
        const char *rest = line + nl;
        if (*rest == '{') {
            const char *end = strrchr(rest, '}');
            assert_non_null(end);
            rest = end + 1;
        }
        assert_true(*rest == ' ');
        char *endp;
        double v = strtod(rest + 1, &endp);
        (void)v;
        assert_true(endp > rest + 1 && (*endp == '\0'));
        samples++;
    }
    assert_true(samples > 20);
    assert_true(ndone >= 10);
    free(r.body);
    r = get("/metrics");
    assert_non_null(strstr(r.body, "heapfleet_node_heap_inuse_bytes{node=\"be-1\"} "));
    assert_non_null(strstr(r.body, "heapfleet_node_up{node=\"be-4\",kind=\"doris\"} 0"));
    assert_non_null(strstr(r.body, "heapfleet_web_request_duration_seconds_bucket{le=\"+Inf\"}"));
    free(r.body);
}

static void test_api_gzip_same_body(void **state)
{
    (void)state;
    struct resp plain = get("/api/v1/snapshots/be-2/profile?format=json");
    struct resp gz = get_full(main_srv.port, NULL, "/api/v1/snapshots/be-2/profile?format=json",
                              NULL, true);
    assert_int_equal(gz.status, 200);
    assert_string_equal(gz.encoding, "gzip");
    assert_int_equal(plain.len, gz.len); /* curl decoded it */
    assert_memory_equal(plain.body, gz.body, plain.len);
    free(plain.body);
    free(gz.body);
}

/* Stop with a keep-alive connection idle and an HTTP/2 one: the loop must
 * empty and close (srv_stop checks uv_loop_close() == 0) promptly. */
static void test_api_stop_with_idle_connections(void **state)
{
    (void)state;
    struct srv s;
    assert_int_equal(srv_start(&s, NULL), 0);
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v1/nodes", s.port);
    struct resp r = { 0 };
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(c), CURLE_OK); /* connection stays open */
    CURL *c2 = curl_easy_init();
    curl_easy_setopt(c2, CURLOPT_URL, url);
    curl_easy_setopt(c2, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(c2, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c2, CURLOPT_WRITEDATA, &r);
    assert_int_equal(curl_easy_perform(c2), CURLE_OK);
    uint64_t t0 = hp_now_ns();
    assert_int_equal(srv_stop(&s), 0);
    double sec = (double)(hp_now_ns() - t0) / 1e9;
    assert_true(sec < 3.0);
    curl_easy_cleanup(c);
    curl_easy_cleanup(c2);
    free(r.body);
}

/* A response over the configured cap is refused whole, never cut short. */
static void test_api_body_cap_500(void **state)
{
    (void)state;
    struct srv s;
    assert_int_equal(srv_start_cap(&s, NULL, 600), 0);
    struct resp r = get_full(s.port, NULL, "/api/v1/snapshots/be-1/tree", NULL, false);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "exceeds the server's cap of 600 bytes"));
    free(r.body);
    r = get_full(s.port, NULL, "/api/v1/nodes/be-1/snapshots?limit=1", NULL, false);
    assert_int_equal(r.status, 200);
    free(r.body);
    assert_int_equal(srv_stop(&s), 0);
}

static void test_api_start_refuses_bad_listen(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct web_config cfg;
    web_config_init(&cfg);
    struct web_server *s = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    cfg.listen = "example.com:80";
    assert_true(web_server_start(&loop, &cfg, &web_source_dir_ops, NULL, &s, &err) < 0);
    assert_non_null(strstr(err.data, "numeric"));
    hp_buf_reset(&err);
    char busy[64];
    snprintf(busy, sizeof(busy), "127.0.0.1:%d", main_srv.port);
    cfg.listen = busy;
    assert_true(web_server_start(&loop, &cfg, &web_source_dir_ops, NULL, &s, &err) < 0);
    assert_non_null(strstr(err.data, "address already in use"));
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    hp_buf_release(&err);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as every libuv server must (see web.h) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_nodes_lists_fleet),
        cmocka_unit_test(test_api_snapshots_oldest_first),
        cmocka_unit_test(test_api_selectors_resolve),
        cmocka_unit_test(test_api_top_same_as_cli),
        cmocka_unit_test(test_api_tree_consistent),
        cmocka_unit_test(test_api_diff_totals),
        cmocka_unit_test(test_api_bad_params_400),
        cmocka_unit_test(test_api_unknown_404_and_method_405),
        cmocka_unit_test(test_api_pending_501),
        cmocka_unit_test(test_api_download_names_file),
        cmocka_unit_test(test_api_token_401),
        cmocka_unit_test(test_api_static_no_traversal),
        cmocka_unit_test(test_api_metrics_format),
        cmocka_unit_test(test_api_gzip_same_body),
        cmocka_unit_test(test_api_stop_with_idle_connections),
        cmocka_unit_test(test_api_body_cap_500),
        cmocka_unit_test(test_api_start_refuses_bad_listen),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
