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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <math.h>
#include <unistd.h>
#include <uv.h>

#include "query/query.h"
#include "web/folder/folder.h"

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

static const char *srv_rules; /* web_config.rules of the next server started */

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
    cfg.rules = srv_rules;
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
    char disposition[256];
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
    if (len > 20 && strncasecmp(p, "content-disposition:", 20) == 0)
        snprintf(r->disposition, sizeof(r->disposition), "%.*s",
                 (int)strcspn(p + 21, "\r\n"), p + 21);
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

/* The shared selector table (tests/data/selectors.tsv), which the CLI's
 * resolver runs too: the API answers 400 to exactly its error rows, and a
 * row with a time resolves to the snapshot at or before it (or 404). */
static void test_api_selector_table(void **state)
{
    (void)state;
    const char *path = getenv("HF_SELECTOR_TABLE");
    assert_non_null(path);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#' && (line[1] == ' ' || line[1] == '\n')) /* "# comment" */
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = '\0';
        char url[1024] = "/api/v1/snapshots/";
        size_t o = strlen(url);
        for (const char *c = line; *c && o + 4 < sizeof(url); c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                *c == '-' || *c == '.' || *c == '_')
                url[o++] = *c;
            else
                o += (size_t)snprintf(url + o, 4, "%%%02X", (unsigned char)*c);
        }
        url[o] = '\0';
        struct resp r = get(url);
        bool want_error = strcmp(tab + 1, "error") == 0;
        if (want_error ? r.status != 400 : (r.status != 200 && r.status != 404))
            fail_msg("GET %s (selector \"%s\", expected %s) -> %ld: %s", url, line, tab + 1,
                     r.status, r.body);
        free(r.body);
        rows++;
    }
    fclose(fp);
    assert_true(rows >= 30);
}

/* A snapshot's raw dump: a folder's files are raw dumps, so the file's
 * bytes, as a download named after the snapshot. */
static void test_api_raw_is_the_file(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof(path), "%s/be-3/d3.heap", datadir);
    char *want;
    size_t wlen;
    assert_int_equal(hp_file_read(path, (size_t)1 << 26, &want, &wlen, NULL), 0);
    struct resp r = get("/api/v1/snapshots/be-3/raw?download=1");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/octet-stream");
    assert_int_equal(r.len, wlen);
    assert_memory_equal(r.body, want, wlen);
    assert_non_null(strstr(r.disposition, "attachment; filename=\"be-3-"));
    free(r.body);
    r = get("/api/v1/snapshots/nosuch/raw");
    assert_int_equal(r.status, 404);
    free(r.body);
    free(want);
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
    /* The other exports, byte for byte what the CLI writes when given the
     * title the API gives them: the snapshot's id, node and time. */
    json_t *snap = get_json("/api/v1/snapshots/be-3", 200);
    char title[200];
    snprintf(title, sizeof(title), "#%lld be-3 at %s", (long long)jint(snap, "id"),
             json_string_value(json_object_get(snap, "time")));
    json_decref(snap);
    static const char *fmts[] = { "svg", "dot", "pprof", "text" };
    for (size_t k = 0; k < 4; k++) {
        /* (`export` has no text form; `top` prints the table) */
        snprintf(cmd, sizeof(cmd), "'%s' %s '%s/be-3/d3.heap' --format %s --title '%s'", q,
                 k == 3 ? "top" : "export", datadir, fmts[k], title);
        p = popen(cmd, "r");
        n = fread(cli, 1, (1 << 20) - 1, p);
        assert_int_equal(pclose(p), 0);
        char path[128];
        snprintf(path, sizeof(path), "/api/v1/snapshots/be-3/profile?format=%s", fmts[k]);
        r = get(path);
        assert_int_equal(r.status, 200);
        if (r.len != n || memcmp(r.body, cli, n) != 0)
            fprintf(stderr, "format %s: API %zu bytes, CLI %zu bytes\n", fmts[k], r.len, n);
        assert_int_equal(r.len, n);
        assert_memory_equal(r.body, cli, n);
        if (k != 2) /* pprof is gzipped */
            assert_non_null(memmem(r.body, r.len, title, strlen(title)));
        if (k == 0)
            assert_non_null(strstr(r.body, "<svg"));
        if (k == 1)
            assert_int_equal(strncmp(r.body, "digraph", 7), 0);
        if (k == 2)
            assert_true((unsigned char)r.body[0] == 0x1f && (unsigned char)r.body[1] == 0x8b);
        free(r.body);
    }
    /* format=json is the CLI's JSON document itself. */
    json_t *pj = get_json("/api/v1/snapshots/be-3/profile?format=json&top=5", 200);
    /* ... apart from which snapshot it names: the stored one here, the
     * file there. */
    json_t *ps = json_object_get(pj, "snapshot");
    assert_string_equal(json_string_value(json_object_get(ps, "node")), "be-3");
    assert_true(json_integer_value(json_object_get(ps, "id")) > 0);
    assert_non_null(json_string_value(json_object_get(ps, "time")));
    assert_non_null(json_object_get(cj, "snapshot"));
    json_object_del(pj, "snapshot");
    json_object_del(cj, "snapshot");
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

/* points=N thins on the server and says so; the first and the last stay. */
static void test_api_snapshots_points(void **state)
{
    (void)state;
    json_t *all = get_json("/api/v1/nodes/be-1/snapshots", 200);
    json_t *sa = json_object_get(all, "snapshots");
    assert_int_equal(jint(all, "total"), 4);
    assert_false(json_is_true(json_object_get(all, "downsampled")));
    json_t *j = get_json("/api/v1/nodes/be-1/snapshots?points=2", 200);
    json_t *s = json_object_get(j, "snapshots");
    assert_int_equal(jint(j, "total"), 4);
    assert_true(json_is_true(json_object_get(j, "downsampled")));
    assert_true(json_array_size(s) >= 2 && json_array_size(s) < 4);
    assert_int_equal(jint(json_array_get(s, 0), "id"), jint(json_array_get(sa, 0), "id"));
    assert_int_equal(jint(json_array_get(s, json_array_size(s) - 1), "id"),
                     jint(json_array_get(sa, 3), "id"));
    json_decref(j);
    j = get_json("/api/v1/nodes/be-1/snapshots?points=10", 200);
    assert_int_equal(json_array_size(json_object_get(j, "snapshots")), 4);
    assert_false(json_is_true(json_object_get(j, "downsampled")));
    json_decref(j);
    json_decref(all);
}

/* The diff as query diff prints it, naming both snapshots; normalize turns
 * deltas into shares. */
static void test_api_diff_formats_and_normalize(void **state)
{
    (void)state;
    struct resp r = get("/api/v1/diff?a=%231&b=%234&format=text&download=1");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "text/plain; charset=utf-8");
    assert_string_equal(r.disposition, "attachment; filename=\"diff-be-1-1-be-1-4.txt\"");
    assert_non_null(strstr(r.body, "#1"));
    assert_non_null(strstr(r.body, "#4"));
    free(r.body);
    r = get("/api/v1/diff?a=%231&b=%234&format=svg");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "image/svg+xml");
    assert_non_null(strstr(r.body, "<svg"));
    assert_non_null(strstr(r.body, "#4"));
    free(r.body);
    r = get("/api/v1/diff?a=%231&b=%234&format=collapsed");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "tracked_alloc"));
    free(r.body);
    json_t *j = get_json("/api/v1/diff?a=%231&b=%234&format=json", 200);
    json_decref(j);
    j = get_json("/api/v1/diff?a=%231&b=%234&normalize=1", 200);
    assert_true(json_is_true(json_object_get(j, "normalize")));
    json_t *fs = json_object_get(j, "functions");
    double sum = 0;
    for (size_t i = 0; i < json_array_size(fs); i++) {
        double d = json_number_value(json_object_get(json_array_get(fs, i), "delta_flat"));
        assert_true(d > -1.0 && d < 1.0); /* a share, not bytes */
        sum += d;
    }
    assert_true(sum > -1e-6 && sum < 1e-6); /* shares of both totals each sum to 1 */
    json_decref(j);
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
        "/api/v1/diff?a=be-1&b=be-2&normalize=maybe",
        "/api/v1/diff?a=be-1&b=be-2&format=pprof",     /* a diff has no pprof */
        "/api/v1/nodes/be-1/snapshots?points=1",
        "/api/v1/nodes/be-1/snapshots?points=10001",
        "/api/v1/snapshots/be-1/top?points=5",          /* not a /top parameter */
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
        "/api/v1/symbolization",
    };
    for (size_t i = 0; i < sizeof(pending) / sizeof(pending[0]); i++) {
        json_t *j = get_json(pending[i], 501);
        assert_non_null(json_string_value(json_object_get(j, "error")));
        json_decref(j);
    }
}

/* The discrepancy report is the query library's, over the node's latest
 * snapshot: jefixture's paths land in the built-in categories. */
static void test_api_discrepancy_categories(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/discrepancy?node=be-1", 200);
    assert_string_equal(json_string_value(json_object_get(j, "node")), "be-1");
    json_t *cats = json_object_get(j, "categories");
    bool query = false, meta = false;
    for (size_t i = 0; i < json_array_size(cats); i++) {
        json_t *c = json_array_get(cats, i);
        const char *name = json_string_value(json_object_get(c, "category"));
        double heap = json_number_value(json_object_get(c, "heap"));
        query |= strcmp(name, "query") == 0 && heap > 1000000;
        meta |= strcmp(name, "metadata") == 0 && heap > 0;
    }
    assert_true(query && meta);
    assert_true(json_array_size(json_object_get(j, "ladder")) > 0);
    json_decref(j);
    json_decref(get_json("/api/v1/discrepancy?node=be-4", 404)); /* no snapshot yet */
}

/* Leak suspects of a node from its snapshots: jefixture's leak path grows
 * every round, so the allocation site rises steadily. */
static void test_api_leaks_of_a_node(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/leaks?node=be-1", 200);
    json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n0, "node")), "be-1");
    assert_int_equal(jint(n0, "snapshots"), 4);
    json_t *f0 = json_array_get(json_object_get(n0, "functions"), 0);
    assert_string_equal(json_string_value(json_object_get(f0, "name")), "tracked_alloc");
    assert_true(json_number_value(json_object_get(f0, "rate_per_hour")) > 0);
    json_decref(j);
    json_decref(get_json("/api/v1/leaks", 400));           /* node is required */
    json_decref(get_json("/api/v1/leaks?node=be-4", 400)); /* no snapshots to analyse */
    json_decref(get_json("/api/v1/leaks?node=nosuch", 404));
}

/* Fleet comparison and trends: the query library's, over the source. */
static void test_api_fleet_and_trend(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/fleet", 200);
    assert_int_equal(jint(j, "nodes"), 3); /* be-4 has no snapshot */
    assert_true(json_is_array(json_object_get(j, "functions")));
    json_decref(j);
    j = get_json("/api/v1/trend?node=be-1&function=leak_tablet", 200);
    json_t *cols = json_object_get(j, "columns"), *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(cols), 2);
    assert_string_equal(json_string_value(json_array_get(cols, 0)), "heap_total");
    assert_int_equal(json_array_size(rows), 4);
    /* The leak path grows every round. */
    double prev = -1;
    for (size_t i = 0; i < 4; i++) {
        double v = json_number_value(json_array_get(
            json_object_get(json_array_get(rows, i), "values"), 1));
        assert_true(v > prev);
        prev = v;
    }
    json_decref(j);
    json_decref(get_json("/api/v1/trend", 400));
    json_decref(get_json("/api/v1/trend?node=be-1&function=%28", 400));
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

/* The value of the first sample line starting with `prefix`, or NAN. */
static double metric_value(const char *body, const char *prefix)
{
    for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            const char *sp = strchr(p + strlen(prefix), ' ');
            return sp ? strtod(sp + 1, NULL) : NAN;
        }
    return NAN;
}

/* Leak suspects and tracker disagreements as series on /metrics, computed
 * once per round: a second scrape reuses the first one's text, a new latest
 * snapshot makes the next scrape compute again. */
static void test_api_metrics_verdicts(void **state)
{
    (void)state;
    struct resp r = get("/metrics");
    assert_int_equal(r.status, 200);
    double suspects = metric_value(r.body, "heapfleet_leak_suspects{node=\"be-1\"}");
    double rate = metric_value(
        r.body, "heapfleet_leak_suspect_growth_bytes_per_hour{node=\"be-1\",function=\"tracked_alloc\"}");
    if (!(suspects >= 1) || !(rate > 0))
        fprintf(stderr, "%s\n", r.body);
    assert_true(suspects >= 1);
    assert_true(rate > 0);
    /* At most 3 suspects per node. */
    size_t rows = 0;
    for (const char *p = r.body; (p = strstr(p, "heapfleet_leak_suspect_growth_bytes_per_hour{node=\"be-1\"")); p++)
        rows++;
    assert_true(rows >= 1 && rows <= 3);
    /* be-3's StarRocks query tracker (1 MiB) against 3 MiB of query stacks. */
    assert_true(metric_value(r.body, "heapfleet_query_tracker_inaccurate{node=\"be-3\"}") == 1);
    assert_true(metric_value(r.body, "heapfleet_tracker_gap_bytes{node=\"be-3\",category=\"query\","
                                     "verdict=\"tracker under-counts\"}") > 1500000);
    assert_true(metric_value(r.body, "heapfleet_tracker_disagreements{node=\"be-3\"}") >= 1);
    assert_true(metric_value(r.body, "heapfleet_query_tracker_inaccurate{node=\"be-1\"}") == 0);
    double t1 = metric_value(r.body, "heapfleet_verdicts_computed_timestamp_seconds");
    assert_true(t1 > 0);
    free(r.body);
    /* Same round: the cached text. */
    r = get("/metrics");
    assert_true(metric_value(r.body, "heapfleet_verdicts_computed_timestamp_seconds") == t1);
    free(r.body);
    /* A new latest snapshot time on be-3: computed again (the folder source
     * rescans at most once a second, so wait for it with a deadline). */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "touch -d '-90 minutes' '%s/be-3/d3.heap'", datadir);
    assert_int_equal(system(cmd), 0);
    double t2 = t1;
    for (int i = 0; i < 100 && t2 == t1; i++) {
        usleep(100 * 1000);
        r = get("/metrics");
        t2 = metric_value(r.body, "heapfleet_verdicts_computed_timestamp_seconds");
        free(r.body);
    }
    assert_true(t2 > t1);
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

/* Clients that hang up while their job runs on a worker: the answer is
 * dropped (ASan would see a write into a freed request), the server goes on. */
static void test_api_client_gone_midway(void **state)
{
    (void)state;
    static const char req[] = "GET /api/v1/snapshots/be-1/tree HTTP/1.1\r\nHost: t\r\n\r\n"
                              "GET /api/v1/nodes?spark=4 HTTP/1.1\r\nHost: t\r\n\r\n";
    for (int i = 0; i < 30; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)main_srv.port) };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
        if (i % 2) /* half of them leave with a reset instead of a FIN */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){ 1, 0 }, sizeof(struct linger));
        close(fd);
    }
    /* The abandoned jobs still run (503 "too many in flight" meanwhile);
     * wait for them with a deadline. */
    uint64_t deadline = hp_now_ns() + UINT64_C(30000000000);
    struct resp r;
    for (;;) {
        r = get("/api/v1/nodes");
        if (r.status != 503 || hp_now_ns() > deadline)
            break;
        free(r.body);
        usleep(50000);
    }
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(j, "nodes")), 4);
    json_decref(j);
    free(r.body);
}

/* Several workers load the same raw dump at once (the folder source
 * symbolizes it): every answer is complete and identical. */
struct par {
    pthread_t t;
    const char *path;
    struct resp r;
};

static void *par_get(void *arg)
{
    struct par *p = arg;
    uint64_t deadline = hp_now_ns() + UINT64_C(30000000000);
    for (;;) {
        p->r = get(p->path);
        if (p->r.status != 503 || hp_now_ns() > deadline)
            break;
        free(p->r.body);
        usleep(20000);
    }
    return NULL;
}

static void test_api_concurrent_loads_of_a_raw_dump(void **state)
{
    (void)state;
    /* Raw dumps of two nodes, each asked for in several views at once. */
    static const char *paths[] = {
        "/api/v1/snapshots/be-3/top?top=3", "/api/v1/snapshots/be-3/tree",
        "/api/v1/snapshots/be-3", "/api/v1/snapshots/be-2@-150m/top?top=3",
        "/api/v1/snapshots/be-3@-150m/tree", "/api/v1/snapshots/be-2@-210m",
    };
    enum { N = 24 };
    for (int round = 0; round < 3; round++) {
        struct par ps[N];
        for (size_t i = 0; i < N; i++) {
            ps[i].path = paths[i % 6];
            pthread_create(&ps[i].t, NULL, par_get, &ps[i]);
        }
        for (size_t i = 0; i < N; i++)
            pthread_join(ps[i].t, NULL);
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(ps[i].r.status, 200);
            if (i >= 6)
                assert_string_equal(ps[i].r.body, ps[i % 6].r.body);
        }
        assert_non_null(strstr(ps[0].r.body, "\"format\":\"jemalloc\""));
        assert_non_null(strstr(ps[0].r.body, "tracked_alloc"));
        for (size_t i = 0; i < N; i++)
            free(ps[i].r.body);
    }
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
    /* A raw dump cannot be narrowed: the message says where to get it. */
    r = get_full(s.port, NULL, "/api/v1/snapshots/be-1/raw", NULL, false);
    assert_int_equal(r.status, 500);
    assert_non_null(strstr(r.body, "exceeds the server's cap of 600 bytes"));
    assert_non_null(strstr(r.body, "query export"));
    assert_null(strstr(r.body, "focus"));
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
    hp_buf_reset(&err);
    /* A rules file that does not parse is refused at start, saying where. */
    cfg.listen = "127.0.0.1:0";
    cfg.rules = "[query]\nmatch = (\n";
    cfg.rules_origin = "site.rules";
    assert_true(web_server_start(&loop, &cfg, &web_source_dir_ops, NULL, &s, &err) < 0);
    assert_non_null(strstr(err.data, "site.rules:1: [query] match: invalid regular expression"));
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    hp_buf_release(&err);
}

/* The server's rules (the collector's --rules) go on top of the kind's:
 * be-3's query category narrowed to the scan operator. */
static void test_api_rules_on_top_of_kind(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/discrepancy?node=be-3", 200);
    assert_string_equal(json_string_value(json_object_get(j, "rules_kind")), "starrocks");
    double wide = 0, narrow = 0;
    json_t *cats = json_object_get(j, "categories");
    for (size_t i = 0; i < json_array_size(cats); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(cats, i), "category")),
                   "query") == 0)
            wide = json_number_value(json_object_get(json_array_get(cats, i), "heap"));
    json_decref(j);
    struct srv s;
    srv_rules = "[query]\nmatch = scan_operator_next\ntracker = starrocks_be_query_mem_bytes\n";
    assert_int_equal(srv_start(&s, NULL), 0);
    srv_rules = NULL;
    struct resp r = get_full(s.port, NULL, "/api/v1/discrepancy?node=be-3", NULL, false);
    assert_int_equal(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    cats = json_object_get(j, "categories");
    for (size_t i = 0; i < json_array_size(cats); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(cats, i), "category")),
                   "query") == 0)
            narrow = json_number_value(json_object_get(json_array_get(cats, i), "heap"));
    json_decref(j);
    free(r.body);
    assert_int_equal(srv_stop(&s), 0);
    assert_true(wide > 1000000);
    assert_true(narrow > 0 && narrow < wide / 10);
}

/* Coverage in the API: the share of bytes named (here every dump's program
 * is on this host, so nearly all), and the unnamed objects as structured
 * JSON, parsed from the note lines the collector writes. */
static void test_api_snapshot_coverage_fields(void **state)
{
    (void)state;
    json_t *j = get_json("/api/v1/snapshots/be-1", 200);
    json_t *sym = json_object_get(j, "symbols");
    assert_non_null(sym);
    double r = json_number_value(json_object_get(sym, "named_bytes_ratio"));
    assert_true(r > 0.9 && r <= 1.0);
    assert_true(json_is_array(json_object_get(sym, "unnamed")));
    assert_true(json_is_null(json_object_get(sym, "resymbolized")));
    json_decref(j);

    /* The note grammar, written and read back as the API shows it. */
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    struct hp_buf note = HP_BUF_INIT(0);
    hp_buf_puts(&note, "jemalloc heap_v2");
    query_note_unnamed_add(&note, "/opt/be/bin/doris_be", "72c3a0", "no file found here; asked agent",
                           "maps path /opt/be/bin/doris_be: no such file | agent "
                           "http://be-1:8041: debuginfo not found, executable not found");
    query_note_unnamed_add(&note, "/usr/lib/libx.so", NULL, "no file found\nat all", NULL);
    hp_buf_puts(&note, "\nre-symbolized 2026-11-27T02:21:03Z: now 97% named (was 12%)");
    p->hint = profile_intern(p, note.data, note.len);
    json_t *c = query_coverage_json(p);
    assert_true(json_is_null(json_object_get(c, "named_bytes_ratio"))); /* no bytes */
    json_t *un = json_object_get(c, "unnamed");
    assert_int_equal(json_array_size(un), 2);
    json_t *u0 = json_array_get(un, 0), *u1 = json_array_get(un, 1);
    assert_string_equal(json_string_value(json_object_get(u0, "object")), "/opt/be/bin/doris_be");
    assert_string_equal(json_string_value(json_object_get(u0, "build_id")), "72c3a0");
    assert_string_equal(json_string_value(json_object_get(u0, "message")),
                        "no file found here; asked agent");
    json_t *t = json_object_get(u0, "tried");
    assert_int_equal(json_array_size(t), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(t, 0), "source")),
                        "maps path /opt/be/bin/doris_be");
    assert_string_equal(json_string_value(json_object_get(json_array_get(t, 0), "said")),
                        "no such file");
    assert_string_equal(json_string_value(json_object_get(json_array_get(t, 1), "source")),
                        "agent http://be-1:8041");
    assert_string_equal(json_string_value(json_object_get(json_array_get(t, 1), "said")),
                        "debuginfo not found, executable not found");
    assert_true(json_is_null(json_object_get(u1, "build_id")));
    assert_string_equal(json_string_value(json_object_get(u1, "message")), "no file found at all");
    assert_int_equal(json_array_size(json_object_get(u1, "tried")), 0);
    assert_string_equal(json_string_value(json_object_get(c, "resymbolized")),
                        "re-symbolized 2026-11-27T02:21:03Z: now 97% named (was 12%)");
    json_decref(c);
    hp_buf_release(&note);
    profile_free(p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as every libuv server must (see web.h) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_nodes_lists_fleet),
        cmocka_unit_test(test_api_snapshots_oldest_first),
        cmocka_unit_test(test_api_selectors_resolve),
        cmocka_unit_test(test_api_snapshot_coverage_fields),
        cmocka_unit_test(test_api_selector_table),
        cmocka_unit_test(test_api_top_same_as_cli),
        cmocka_unit_test(test_api_raw_is_the_file),
        cmocka_unit_test(test_api_tree_consistent),
        cmocka_unit_test(test_api_diff_totals),
        cmocka_unit_test(test_api_snapshots_points),
        cmocka_unit_test(test_api_diff_formats_and_normalize),
        cmocka_unit_test(test_api_bad_params_400),
        cmocka_unit_test(test_api_unknown_404_and_method_405),
        cmocka_unit_test(test_api_pending_501),
        cmocka_unit_test(test_api_discrepancy_categories),
        cmocka_unit_test(test_api_leaks_of_a_node),
        cmocka_unit_test(test_api_fleet_and_trend),
        cmocka_unit_test(test_api_download_names_file),
        cmocka_unit_test(test_api_token_401),
        cmocka_unit_test(test_api_static_no_traversal),
        cmocka_unit_test(test_api_metrics_format),
        cmocka_unit_test(test_api_metrics_verdicts),
        cmocka_unit_test(test_api_gzip_same_body),
        cmocka_unit_test(test_api_stop_with_idle_connections),
        cmocka_unit_test(test_api_client_gone_midway),
        cmocka_unit_test(test_api_concurrent_loads_of_a_raw_dump),
        cmocka_unit_test(test_api_body_cap_500),
        cmocka_unit_test(test_api_start_refuses_bad_listen),
        cmocka_unit_test(test_api_rules_on_top_of_kind),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
