/* Integration tests for the agent: the real `agent` executable on loopback,
 * serving real jemalloc dumps that jefixture writes at test time (interval
 * dumps with jemalloc's own names, plus dumps named the way Doris, RisingWave
 * and StarRocks name theirs), fetched with libcurl.
 *
 *   test_agent_http AGENT_EXE JEFIXTURE_EXE
 *
 * Every agent started here is stopped with SIGTERM and must exit 0, so a
 * crash or (under ASan) a leak in the agent fails the test that started it. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/sym/sym.h"
#include "store/hp.h"

extern char **environ;

static const char *agent_exe, *fixture_exe;
static char tmp[256];
static char jem[300], misc[300], outside[300], alias[300];
static pid_t jem_pid;

struct agent_proc {
    pid_t pid;
    int port;
    char log[400];
};

static struct agent_proc main_agent;

/* ---- helpers ---- */

static bool wait_until(bool (*cond)(void *), void *arg, int timeout_ms)
{
    uint64_t end = hp_now_ns() + (uint64_t)timeout_ms * 1000000;
    while (hp_now_ns() < end) {
        if (cond(arg))
            return true;
        usleep(20000);
    }
    return cond(arg);
}

/* Run jefixture with MALLOC_CONF, wait for it; its pid in *ret_pid. */
static void run_fixture(const char *malloc_conf, char *const dumps[], pid_t *ret_pid)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)fixture_exe;
    argv[n++] = "--rounds";
    argv[n++] = "2";
    argv[n++] = "--threads";
    argv[n++] = "2";
    for (int i = 0; dumps[i]; i++) {
        assert_true(n < (int)HP_ARRAY_SIZE(argv) - 1);
        argv[n++] = dumps[i];
    }
    argv[n] = NULL;
    char *conf = hp_xasprintf("MALLOC_CONF=%s", malloc_conf);
    char *envp[] = { conf, NULL };
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, fixture_exe, NULL, NULL, argv, envp), 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(conf);
    if (ret_pid)
        *ret_pid = pid;
}

static bool log_has_port(void *arg)
{
    struct agent_proc *a = arg;
    char *data = NULL;
    size_t len;
    if (hp_file_read(a->log, 1 << 20, &data, &len, NULL) < 0)
        return false;
    const char *p = strstr(data, "msg=\"listening\"") ? strstr(data, "addr=127.0.0.1:") : NULL;
    if (p)
        a->port = (int)strtol(p + strlen("addr=127.0.0.1:"), NULL, 10);
    free(data);
    return p != NULL;
}

static void start_agent(struct agent_proc *a, const char *name, const char *const extra[])
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)agent_exe;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    for (int i = 0; extra[i]; i++) {
        assert_true(n < (int)HP_ARRAY_SIZE(argv) - 1);
        argv[n++] = (char *)extra[i];
    }
    argv[n] = NULL;
    snprintf(a->log, sizeof(a->log), "%s/%s.log", tmp, name);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, a->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_int_equal(posix_spawn(&a->pid, agent_exe, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    a->port = 0;
    assert_true(wait_until(log_has_port, a, 10000));
    assert_true(a->port > 0);
}

static void stop_agent(struct agent_proc *a)
{
    int st;
    kill(a->pid, SIGTERM);
    assert_int_equal(waitpid(a->pid, &st, 0), a->pid);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        char *data = NULL;
        size_t len;
        if (hp_file_read(a->log, 1 << 20, &data, &len, NULL) == 0)
            fprintf(stderr, "agent log:\n%s\n", data);
        free(data);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

struct resp {
    long status;
    struct hp_buf body;
    struct hp_buf headers;
};

static size_t body_cb(char *p, size_t sz, size_t n, void *arg)
{
    return hp_buf_append(arg, p, sz * n) == 0 ? sz * n : 0;
}

/* GET http://127.0.0.1:port + target, with an optional bearer token. */
/* GET with a token (or NULL) and one more header line (or NULL). */
static void http_get_h(const struct agent_proc *a, const char *target, const char *token,
                       const char *header, struct resp *r)
{
    char *url = hp_xasprintf("http://127.0.0.1:%d%s", a->port, target);
    r->body = HP_BUF_INIT(256u << 20);
    r->headers = HP_BUF_INIT(1u << 20);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char *auth = token ? hp_xasprintf("Authorization: Bearer %s", token) : NULL;
    if (auth)
        h = curl_slist_append(h, auth);
    if (header)
        h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L); /* send "../" as written */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, body_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        fprintf(stderr, "GET %s: %s\n", url, curl_easy_strerror(cc));
    assert_int_equal(cc, CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    free(auth);
    free(url);
}

static void http_get(const struct agent_proc *a, const char *target, const char *token,
                     struct resp *r)
{
    http_get_h(a, target, token, NULL, r);
}

static void resp_release(struct resp *r)
{
    hp_buf_release(&r->body);
    hp_buf_release(&r->headers);
}

static json_t *get_json(const struct agent_proc *a, const char *target, long want_status)
{
    struct resp r;
    http_get(a, target, NULL, &r);
    if (r.status != want_status)
        fprintf(stderr, "GET %s: %ld %s\n", target, r.status, r.body.data ? r.body.data : "");
    assert_int_equal(r.status, want_status);
    json_error_t je;
    json_t *j = json_loadb(r.body.data, r.body.len, 0, &je);
    assert_non_null(j);
    resp_release(&r);
    return j;
}

static void assert_body_is_file(const struct resp *r, const char *path)
{
    char *data = NULL;
    size_t len;
    assert_int_equal(hp_file_read(path, 256u << 20, &data, &len, NULL), 0);
    assert_int_equal(r->body.len, len);
    assert_memory_equal(r->body.data, data, len);
    free(data);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int count_prefix(const char *dir, const char *prefix)
{
    char *cmd = hp_xasprintf("ls -1 '%s' | grep -c '^%s' || true", dir, prefix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    free(cmd);
    return n;
}

/* ---- fixture folders ---- */

static int group_setup(void **state)
{
    snprintf(tmp, sizeof(tmp), "/tmp/hf-agent-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(jem, sizeof(jem), "%s/jem", tmp);
    snprintf(misc, sizeof(misc), "%s/misc", tmp);
    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    snprintf(alias, sizeof(alias), "%s/misc-alias", tmp);
    mkdir(jem, 0755);
    mkdir(misc, 0755);
    mkdir(outside, 0755);

    /* Interval dumps named by jemalloc itself: <jem>/cn.<pid>.<seq>.i<n>.heap */
    char *conf = hp_xasprintf("prof:true,lg_prof_sample:0,lg_prof_interval:18,prof_prefix:%s/cn", jem);
    char *last = hp_xasprintf("%s/last.heap", outside);
    char *d1[] = { last, NULL };
    run_fixture(conf, d1, &jem_pid);
    free(conf);
    free(last);

    /* Dumps named as Doris, RisingWave and StarRocks name them. */
    char *doris = hp_xasprintf("%s/jeheap_dump.1700000000.4242.1804289383.heap", misc);
    char *rw = hp_xasprintf("%s/2026-11-22-07-30-05.auto.heap", misc);
    char *sr = hp_xasprintf("%s/heap_profile.4243.1681692777", misc);
    char *out = hp_xasprintf("%s/jeprof.1.0.m0.heap", outside);
    char *d2[] = { doris, rw, sr, out, NULL };
    run_fixture("prof:true,lg_prof_sample:0", d2, NULL);

    /* Things that must never be served. */
    char *p = hp_xasprintf("%s/be.INFO", misc);
    write_file(p, "secret log line\n");
    free(p);
    p = hp_xasprintf("%s/evil.heap", misc);
    if (symlink("/etc/passwd", p) != 0)
        return -1;
    free(p);
    p = hp_xasprintf("%s/link-inside.heap", misc);
    if (symlink(doris, p) != 0)
        return -1;
    free(p);
    p = hp_xasprintf("%s/up", misc);
    if (symlink(outside, p) != 0)
        return -1;
    free(p);
    /* A hard link into the folder of a dump-named file from outside. */
    p = hp_xasprintf("%s/jeprof.2.0.m0.heap", misc);
    if (link(out, p) != 0)
        return -1;
    free(p);
    /* An alias of the folder, as ${DORIS_HOME}/log often is. */
    if (symlink(misc, alias) != 0)
        return -1;
    free(doris);
    free(rw);
    free(sr);
    free(out);

    p = hp_xasprintf("%s/test.pid", tmp);
    char pidtext[32];
    snprintf(pidtext, sizeof(pidtext), "%d\n", (int)getpid());
    write_file(p, pidtext);
    char *dumps = hp_xasprintf("%s,%s", jem, misc);
    /* The fixtures have exited: their program is served through
     * --binaries; libc through this process (the --pid-file), which maps
     * the same one. */
    char fixture_real[4096];
    if (!realpath(fixture_exe, fixture_real))
        return -1;
    const char *args[] = { "--dumps", dumps, "--pid-file", p, "--binaries", fixture_real, NULL };
    start_agent(&main_agent, "main", args);
    free(dumps);
    free(p);
    return 0;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int group_teardown(void **state)
{
    if (main_agent.pid > 0)
        stop_agent(&main_agent);
    if (!getenv("HF_KEEP_TMP"))
        nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- tests ---- */

static json_t *find_dump(json_t *dumps, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(dumps, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
            return d;
    }
    return NULL;
}

static void test_agent_http_lists_every_kind(void **state)
{
    json_t *j = get_json(&main_agent, "/dumps", 200);
    json_t *dumps = json_object_get(j, "dumps");
    size_t i;
    json_t *d;
    int njem = 0;
    json_array_foreach(dumps, i, d)
    {
        const char *kind = json_string_value(json_object_get(d, "kind"));
        const char *path = json_string_value(json_object_get(d, "path"));
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(json_integer_value(json_object_get(d, "size")), st.st_size);
        if (strcmp(kind, "jemalloc") == 0) {
            njem++;
            assert_int_equal(json_integer_value(json_object_get(d, "pid")), jem_pid);
            assert_string_equal(json_string_value(json_object_get(d, "prefix")), "cn");
            assert_string_equal(json_string_value(json_object_get(d, "trigger")), "interval");
        }
    }
    assert_true(njem >= 2);
    assert_int_equal(njem, count_prefix(jem, "cn."));

    d = find_dump(dumps, "jeheap_dump.1700000000.4242.1804289383.heap");
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "doris");
    assert_int_equal(json_integer_value(json_object_get(d, "pid")), 4242);
    assert_int_equal(json_integer_value(json_object_get(d, "time")), 1700000000);
    d = find_dump(dumps, "2026-11-22-07-30-05.auto.heap");
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "risingwave");
    assert_string_equal(json_string_value(json_object_get(d, "trigger")), "auto");
    d = find_dump(dumps, "heap_profile.4243.1681692777");
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "starrocks");
    /* Logs, symlinks and folders are not dumps. */
    assert_null(find_dump(dumps, "be.INFO"));
    assert_null(find_dump(dumps, "evil.heap"));
    assert_null(find_dump(dumps, "link-inside.heap"));
    assert_int_equal(json_array_size(dumps), (size_t)njem + 3);
    json_decref(j);

    j = get_json(&main_agent, "/dumps?prefix=jeheap", 200);
    assert_int_equal(json_array_size(json_object_get(j, "dumps")), 1);
    json_decref(j);
}

static void test_agent_http_newest_is_last_interval_dump(void **state)
{
    /* The highest sequence number jemalloc gave is the newest dump. */
    json_t *j = get_json(&main_agent, "/dumps?prefix=cn.", 200);
    json_t *dumps = json_object_get(j, "dumps"), *d;
    size_t i;
    int64_t best = -1;
    char path[600] = "", name[300] = "";
    json_array_foreach(dumps, i, d)
    {
        int64_t seq = json_integer_value(json_object_get(d, "sequence"));
        if (seq > best) {
            best = seq;
            snprintf(path, sizeof(path), "%s", json_string_value(json_object_get(d, "path")));
            snprintf(name, sizeof(name), "%s", json_string_value(json_object_get(d, "name")));
        }
    }
    json_decref(j);
    assert_true(best >= 1);
    struct resp r;
    http_get(&main_agent, "/dumps/newest?prefix=cn.", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, path);
    assert_non_null(strstr(r.headers.data, name));
    assert_true(r.body.len > 8 && memcmp(r.body.data, "heap_v2/", 8) == 0);
    resp_release(&r);

    http_get(&main_agent, "/dumps/newest?prefix=nothing-like-this", NULL, &r);
    assert_int_equal(r.status, 404);
    resp_release(&r);
}

static void test_agent_http_file_by_name_and_path(void **state)
{
    struct resp r;
    char *file = hp_xasprintf("%s/jeheap_dump.1700000000.4242.1804289383.heap", misc);
    http_get(&main_agent, "/dumps/file?name=jeheap_dump.1700000000.4242.1804289383.heap", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, file);
    resp_release(&r);

    /* The path form, as the collector uses it with what Doris's /jeheap/dump
     * returned; percent-encoded slashes are what curl --data-urlencode sends. */
    char *t = hp_xasprintf("/dumps/file?path=%s", file);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, file);
    resp_release(&r);
    free(t);
    CURL *c = curl_easy_init();
    char *enc = curl_easy_escape(c, file, 0);
    t = hp_xasprintf("/dumps/file?path=%s", enc);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, file);
    resp_release(&r);
    free(t);
    curl_free(enc);
    curl_easy_cleanup(c);

    /* Through a symlinked alias of the folder (${DORIS_HOME}/log). */
    t = hp_xasprintf("/dumps/file?path=%s/jeheap_dump.1700000000.4242.1804289383.heap", alias);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, file);
    resp_release(&r);
    free(t);

    http_get(&main_agent, "/dumps/file?name=jeprof.9.9.m9.heap", NULL, &r);
    assert_int_equal(r.status, 404);
    resp_release(&r);
    free(file);
}

static void test_agent_http_traversal_refused(void **state)
{
    char *attacks[] = {
        hp_xasprintf("/dumps/file?name=../../../../../../etc/passwd"),
        hp_xasprintf("/dumps/file?name=..%%2F..%%2F..%%2F..%%2Fetc%%2Fpasswd"),
        hp_xasprintf("/dumps/file?name=%%2e%%2e%%2f%%2e%%2e%%2f%%2e%%2e%%2fetc%%2fpasswd"),
        hp_xasprintf("/dumps/file?name=%%252e%%252e%%252f%%252e%%252e%%252fetc%%252fpasswd"),
        hp_xasprintf("/dumps/file?name=.."),
        hp_xasprintf("/dumps/file?name=be.INFO"),
        hp_xasprintf("/dumps/file?name=evil.heap"),
        hp_xasprintf("/dumps/file?name=link-inside.heap"),
        hp_xasprintf("/dumps/file?name=jeprof.2.0.m0.heap"),
        hp_xasprintf("/dumps/file?path=%s/jeprof.2.0.m0.heap", misc),
        hp_xasprintf("/dumps/file?name=up"),
        hp_xasprintf("/dumps/file?path=/etc/passwd"),
        hp_xasprintf("/dumps/file?path=%s/be.INFO", misc),
        hp_xasprintf("/dumps/file?path=%s/evil.heap", misc),
        hp_xasprintf("/dumps/file?path=%s/../outside/jeprof.1.0.m0.heap", misc),
        hp_xasprintf("/dumps/file?path=%s/%%2e%%2e/outside/jeprof.1.0.m0.heap", misc),
        hp_xasprintf("/dumps/file?path=%s/up/jeprof.1.0.m0.heap", misc),
        hp_xasprintf("/dumps/file?path=%s/jeprof.1.0.m0.heap", outside),
        hp_xasprintf("/dumps/file?path=%s/./jeheap_dump.1700000000.4242.1804289383.heap", misc),
        hp_xasprintf("/dumps/file?path=%s//jeheap_dump.1700000000.4242.1804289383.heap", misc),
        hp_xasprintf("/dumps/file?path=relative/jeprof.1.0.m0.heap"),
        hp_xasprintf("/dumps/file?path=%s", misc),
        hp_xasprintf("/dumps/../../../etc/passwd"),
        hp_xasprintf("/dumps/%%2e%%2e/%%2e%%2e/etc/passwd"),
        hp_xasprintf("/dumps/file/../../etc/passwd"),
        hp_xasprintf("/%%2e%%2e/%%2e%%2e/etc/passwd"),
        hp_xasprintf("/identity?path=/etc/passwd"),
        hp_xasprintf("/identity?path=%s/be.INFO", misc),
        /* Not UTF-8: must not break the JSON error reply. */
        hp_xasprintf("/dumps/file?path=/%%ff%%fe/jeprof.1.0.m0.heap"),
        hp_xasprintf("/dumps/file?name=%%ff.heap"),
        hp_xasprintf("/identity?path=/%%c3%%28"),
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(attacks); i++) {
        struct resp r;
        http_get(&main_agent, attacks[i], NULL, &r);
        if (r.status != 403 && r.status != 404)
            fprintf(stderr, "attack %zu %s -> %ld\n", i, attacks[i], r.status);
        assert_true(r.status == 403 || r.status == 404);
        assert_null(r.body.data ? strstr(r.body.data, "root:") : NULL);
        assert_null(r.body.data ? strstr(r.body.data, "secret log") : NULL);
        assert_null(r.body.data ? strstr(r.body.data, "heap_v2") : NULL);
        resp_release(&r);
        free(attacks[i]);
    }
}

static void test_agent_http_bad_requests_400(void **state)
{
    static const char *const bad[] = {
        "/dumps/file?name=%zz",       "/dumps/file?name=a%00.heap", "/dumps/file",
        "/dumps/file?name=a&path=/b", "/dumps/file?name=a&name=b",  "/identity",
        "/identity?path=relative",
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(bad); i++) {
        struct resp r;
        http_get(&main_agent, bad[i], NULL, &r);
        if (r.status != 400)
            fprintf(stderr, "%s -> %ld\n", bad[i], r.status);
        assert_int_equal(r.status, 400);
        /* JSON errors carry a length, so the connection stays usable. */
        assert_non_null(strcasestr(r.headers.data, "content-length:"));
        assert_non_null(strstr(r.body.data, "\"error\""));
        resp_release(&r);
    }
}

/* Oversized request heads and query strings are refused without harm. */
static void test_agent_http_request_size_bounded(void **state)
{
    /* A query value over AGENT_QUERY_MAX (4096). */
    struct hp_buf t = HP_BUF_INIT(0);
    assert_int_equal(hp_buf_puts(&t, "/dumps/file?name="), 0);
    for (int i = 0; i < 5000; i++)
        assert_int_equal(hp_buf_puts(&t, "a"), 0);
    struct resp r;
    http_get(&main_agent, t.data, NULL, &r);
    assert_int_equal(r.status, 400);
    resp_release(&r);
    hp_buf_release(&t);

    /* A 1 MiB request head, written raw: h2o refuses it (H2O_MAX_REQLEN)
     * or drops the connection; never a 200. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)main_agent.port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    static const char head[] = "GET /dumps HTTP/1.1\r\nHost: x\r\nX-Big: ";
    assert_true(write(fd, head, sizeof(head) - 1) > 0);
    char *junk = hp_xmalloc(1 << 16);
    memset(junk, 'a', 1 << 16);
    for (int i = 0; i < 16; i++)
        if (write(fd, junk, 1 << 16) <= 0)
            break; /* the agent closed on us: fine */
    free(junk);
    char buf[512] = "";
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    if (poll(&pfd, 1, 5000) > 0) {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        buf[n > 0 ? n : 0] = '\0';
    }
    close(fd);
    assert_null(strstr(buf, " 200 "));
    http_get(&main_agent, "/health", NULL, &r);
    assert_int_equal(r.status, 200);
    resp_release(&r);
}

static void readelf_build_id(const char *path, char *out, size_t outsz)
{
    char *cmd = hp_xasprintf("readelf -n '%s'", path);
    FILE *p = popen(cmd, "r");
    char line[512];
    out[0] = '\0';
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) {
        const char *k = strstr(line, "Build ID: ");
        if (k) {
            snprintf(out, outsz, "%s", k + strlen("Build ID: "));
            out[strcspn(out, "\n")] = '\0';
        }
    }
    pclose(p);
    free(cmd);
}

static void test_agent_http_identity_matches_readelf(void **state)
{
    char want[256];
    char real[4096];
    assert_non_null(realpath(fixture_exe, real));
    readelf_build_id(real, want, sizeof(want));
    assert_true(strlen(want) >= 16);
    char *t = hp_xasprintf("/identity?path=%s", real);
    json_t *j = get_json(&main_agent, t, 200);
    free(t);
    assert_string_equal(json_string_value(json_object_get(j, "build_id")), want);
    struct stat st;
    assert_int_equal(stat(real, &st), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "size")), st.st_size);
    assert_true(json_is_true(json_object_get(j, "has_debug_info")));
    json_decref(j);
}

static void test_agent_http_buildid_serves_binary(void **state)
{
    char real[4096], id[256];
    assert_non_null(realpath(fixture_exe, real));
    readelf_build_id(real, id, sizeof(id));
    struct resp r;
    char *t = hp_xasprintf("/buildid/%s/executable", id);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, real);
    /* What a debuginfod client (elfutils, the collector) checks. */
    struct sym_elf_identity got;
    assert_int_equal(sym_elf_identity_mem(r.body.data, r.body.len, &got, NULL), 0);
    assert_string_equal(got.build_id, id);
    resp_release(&r);
    free(t);
    /* Built with -g, so the binary is its own debuginfo. */
    t = hp_xasprintf("/buildid/%s/debuginfo", id);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, real);
    resp_release(&r);
    free(t);
    http_get(&main_agent, "/buildid/00112233445566778899aabbccddeeff00112233/executable", NULL, &r);
    assert_int_equal(r.status, 404);
    resp_release(&r);
}

/* Range requests on a build's file (issue 15: a collector cut off in the
 * middle of a big binary resumes): one range gives 206 with those bytes
 * and Content-Range; a start past the end 416; several ranges or garbage
 * are ignored (the whole file, 200). */
static void test_agent_http_buildid_range(void **state)
{
    char real[4096], id[256];
    assert_non_null(realpath(fixture_exe, real));
    readelf_build_id(real, id, sizeof(id));
    char *data = NULL;
    size_t len;
    assert_int_equal(hp_file_read(real, 256u << 20, &data, &len, NULL), 0);
    assert_true(len > 5000);
    char *t = hp_xasprintf("/buildid/%s/executable", id);
    struct resp r;
    http_get_h(&main_agent, t, NULL, "Range: bytes=1000-", &r);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.body.len, len - 1000);
    assert_memory_equal(r.body.data, data + 1000, len - 1000);
    char want[128];
    snprintf(want, sizeof(want), "content-range: bytes 1000-%zu/%zu", len - 1, len);
    assert_non_null(strcasestr(r.headers.data, want));
    resp_release(&r);

    http_get_h(&main_agent, t, NULL, "Range: bytes=10-19", &r);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.body.len, 10);
    assert_memory_equal(r.body.data, data + 10, 10);
    resp_release(&r);

    http_get_h(&main_agent, t, NULL, "Range: bytes=-100", &r);
    assert_int_equal(r.status, 206);
    assert_int_equal(r.body.len, 100);
    assert_memory_equal(r.body.data, data + len - 100, 100);
    resp_release(&r);

    char *past = hp_xasprintf("Range: bytes=%zu-", len);
    http_get_h(&main_agent, t, NULL, past, &r);
    assert_int_equal(r.status, 416);
    snprintf(want, sizeof(want), "content-range: bytes */%zu", len);
    assert_non_null(strcasestr(r.headers.data, want));
    resp_release(&r);
    free(past);

    static const char *const ignored[] = { "Range: bytes=0-1,5-9", "Range: items=0-4",
                                           "Range: bytes=x-", "Range: bytes=9-2" };
    for (size_t i = 0; i < HP_ARRAY_SIZE(ignored); i++) {
        http_get_h(&main_agent, t, NULL, ignored[i], &r);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body.len, len);
        resp_release(&r);
    }
    free(t);
    free(data);
}

/* A shared library named in the dumps' MAPPED_LIBRARIES (libc, ~2 MB) comes
 * back by build-id byte for byte: several 256 KiB chunks through uv_fs_read. */
/* The path of the libc the fixture mapped, as its dump recorded it. */
static void mapped_libc(char *path, size_t pathsz)
{
    char *first = NULL;
    size_t len;
    json_t *j = get_json(&main_agent, "/dumps?prefix=cn.", 200);
    const char *dump = json_string_value(
        json_object_get(json_array_get(json_object_get(j, "dumps"), 0), "path"));
    assert_int_equal(hp_file_read(dump, 64u << 20, &first, &len, NULL), 0);
    json_decref(j);
    const char *m = strstr(first, "MAPPED_LIBRARIES:");
    assert_non_null(m);
    const char *libc = strstr(m, "/libc.so.6");
    assert_non_null(libc);
    const char *start = libc;
    while (start > m && start[-1] != ' ')
        start--;
    snprintf(path, pathsz, "%.*s", (int)(libc + strlen("/libc.so.6") - start), start);
    free(first);
}

static void test_agent_http_buildid_serves_mapped_library(void **state)
{
    char path[512];
    json_t *j;
    mapped_libc(path, sizeof(path));
    char id[256];
    readelf_build_id(path, id, sizeof(id));
    assert_true(strlen(id) >= 16);
    char *t = hp_xasprintf("/identity?path=%s", path);
    j = get_json(&main_agent, t, 200);
    assert_string_equal(json_string_value(json_object_get(j, "build_id")), id);
    json_decref(j);
    free(t);
    struct resp r;
    t = hp_xasprintf("/buildid/%s/executable", id);
    http_get(&main_agent, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(r.body.len > 4 * 256 * 1024);
    assert_body_is_file(&r, path);
    resp_release(&r);
    free(t);
}

struct served_ctx {
    const struct agent_proc *a;
    const char *target;
    long status;
};

static bool status_is(void *arg)
{
    struct served_ctx *c = arg;
    struct resp r;
    http_get(c->a, c->target, NULL, &r);
    bool ok = r.status == c->status;
    resp_release(&r);
    return ok;
}

/* Issue 13 item 11: a dump's MAPPED_LIBRARIES (anyone who can write into the
 * folder writes it) serves nothing. A 0600 ELF file outside the folders
 * that a planted dump names is refused exactly like a missing file and a
 * file no dump names, by path and by build-id; a file a watched running
 * process maps is served while the process runs, and no longer after. */
static void test_agent_http_serves_only_live_maps(void **state)
{
    char *dir = hp_xasprintf("%s/live", tmp);
    char *secret = hp_xasprintf("%s/secret.elf", outside);
    char fixture_real[4096], id[256];
    assert_non_null(realpath(fixture_exe, fixture_real));
    assert_int_equal(mkdir(dir, 0755), 0);
    char *cmd = hp_xasprintf("cp '%s' '%s' && chmod 600 '%s'", fixture_real, secret, secret);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    readelf_build_id(secret, id, sizeof(id));
    /* A process to watch: sleep maps its own program. */
    pid_t sl;
    char *sargv[] = { "sleep", "60", NULL };
    assert_int_equal(posix_spawnp(&sl, "sleep", NULL, NULL, sargv, environ), 0);
    char sleep_path[4096];
    char *exe = hp_xasprintf("/proc/%d/exe", (int)sl);
    /* posix_spawn returns once the child has exec'd. */
    ssize_t n = readlink(exe, sleep_path, sizeof(sleep_path) - 1);
    assert_true(n > 0);
    sleep_path[n] = '\0';
    free(exe);
    assert_true(n > 0);
    /* A planted dump in the folder, named with the sleeping pid, mapping
     * the secret and a missing file. */
    char *dump = hp_xasprintf("%s/jeprof.%d.0.m0.heap", dir, (int)sl);
    char *text = hp_xasprintf("heap_v2/524288\n  t*: 1: 100 [0: 0]\n@ 0x1\n  t*: 1: 100 [0: 0]\n\n"
                              "MAPPED_LIBRARIES:\n"
                              "00400000-00401000 r-xp 00000000 08:01 1 %s\n"
                              "00400000-00401000 r-xp 00000000 08:01 2 %s/missing.so\n",
                              secret, outside);
    write_file(dump, text);
    free(text);
    struct agent_proc a;
    const char *args[] = { "--dumps", dir, NULL };
    start_agent(&a, "live", args);

    struct resp r1, r2, r3;
    char *t1 = hp_xasprintf("/identity?path=%s", secret);
    char *t2 = hp_xasprintf("/identity?path=%s/missing.so", outside);
    http_get(&a, t1, NULL, &r1);
    http_get(&a, t2, NULL, &r2);
    http_get(&a, "/identity?path=/etc/shadow", NULL, &r3);
    assert_int_equal(r1.status, 403);
    assert_int_equal(r2.status, r1.status);
    assert_int_equal(r3.status, r1.status);
    assert_int_equal(r1.body.len, r2.body.len);
    assert_memory_equal(r1.body.data, r2.body.data, r1.body.len);
    assert_int_equal(r1.body.len, r3.body.len);
    assert_memory_equal(r1.body.data, r3.body.data, r1.body.len);
    resp_release(&r1);
    resp_release(&r2);
    resp_release(&r3);
    /* By build-id: the secret's is as unknown as one nobody has. */
    char *b1 = hp_xasprintf("/buildid/%s/executable", id);
    http_get(&a, b1, NULL, &r1);
    http_get(&a, "/buildid/00112233445566778899aabbccddeeff00112233/executable", NULL, &r2);
    assert_int_equal(r1.status, 404);
    assert_int_equal(r2.status, r1.status);
    assert_int_equal(r1.body.len, r2.body.len);
    assert_memory_equal(r1.body.data, r2.body.data, r1.body.len);
    resp_release(&r1);
    resp_release(&r2);

    /* What the watched process maps is served while it runs. */
    char *t3 = hp_xasprintf("/identity?path=%s", sleep_path);
    struct served_ctx c = { &a, t3, 200 };
    assert_true(status_is(&c));
    kill(sl, SIGKILL);
    int st;
    assert_int_equal(waitpid(sl, &st, 0), sl);
    c.status = 403;
    assert_true(wait_until(status_is, &c, 10000)); /* refreshed every 2 s */

    stop_agent(&a);
    free(t1);
    free(t2);
    free(t3);
    free(b1);
    free(dump);
    free(secret);
    free(dir);
}

static size_t abort_after_first_cb(char *p, size_t sz, size_t n, void *arg)
{
    return 0; /* curl aborts the transfer: the agent sees the client vanish */
}

/* Clients that go away mid-download or only ask for headers leave the agent
 * serving everyone else (and, under ASan, without leaks or stale reads). */
static void test_agent_http_client_abort_and_head(void **state)
{
    char real[512], id[256];
    mapped_libc(real, sizeof(real));
    readelf_build_id(real, id, sizeof(id));
    char *url = hp_xasprintf("http://127.0.0.1:%d/buildid/%s/executable", main_agent.port, id);
    for (int i = 0; i < 8; i++) {
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, abort_after_first_cb);
        assert_int_equal(curl_easy_perform(c), CURLE_WRITE_ERROR);
        curl_easy_cleanup(c);
    }
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    long status = 0;
    curl_off_t cl = -1;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    curl_easy_cleanup(c);
    struct stat st;
    assert_int_equal(stat(real, &st), 0);
    assert_int_equal(status, 200);
    assert_int_equal(cl, st.st_size);
    free(url);
    struct resp r;
    http_get(&main_agent, "/health", NULL, &r);
    assert_int_equal(r.status, 200);
    resp_release(&r);
}

/* Run a shell command, return its first output line (trailing newline cut). */
static bool sh_line(const char *cmd, char *out, size_t outsz)
{
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (!p)
        return false;
    bool ok = fgets(out, (int)outsz, p) != NULL;
    int st = pclose(p);
    out[strcspn(out, "\n")] = '\0';
    return ok && st == 0 && out[0];
}

/* --binaries with a stripped binary and its separate debug file, fetched by
 * a real debuginfod client (LLVM's llvm-debuginfod-find) from the agent. */
static void test_agent_http_debuginfod_client(void **state)
{
    char tool[256], line[1024];
    if (!sh_line("command -v llvm-debuginfod-find || command -v llvm-debuginfod-find-14", tool,
                 sizeof(tool))) {
        printf("SKIP part: llvm-debuginfod-find not installed\n");
        tool[0] = '\0';
    }
    char *bins = hp_xasprintf("%s/bins", tmp), *empty = hp_xasprintf("%s/empty", tmp);
    mkdir(bins, 0755);
    mkdir(empty, 0755);
    char *cmd = hp_xasprintf("objcopy --only-keep-debug '%s' '%s/app.debug' && "
                             "objcopy --strip-debug --add-gnu-debuglink='%s/app.debug' '%s' '%s/app'"
                             " && echo ok",
                             fixture_exe, bins, bins, fixture_exe, bins);
    assert_true(sh_line(cmd, line, sizeof(line)));
    free(cmd);
    char *app = hp_xasprintf("%s/app", bins), *dbg = hp_xasprintf("%s/app.debug", bins);
    char id[256];
    readelf_build_id(app, id, sizeof(id));
    assert_true(strlen(id) >= 16);

    struct agent_proc a;
    const char *args[] = { "--dumps", empty, "--binaries", bins, NULL };
    start_agent(&a, "binaries", args);
    struct resp r;
    char *t = hp_xasprintf("/buildid/%s/executable", id);
    http_get(&a, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, app);
    resp_release(&r);
    free(t);
    t = hp_xasprintf("/buildid/%s/debuginfo", id);
    http_get(&a, t, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, dbg);
    struct sym_elf_identity got;
    assert_int_equal(sym_elf_identity_mem(r.body.data, r.body.len, &got, NULL), 0);
    assert_true(got.has_debug_info);
    resp_release(&r);
    free(t);
    /* The stripped binary is known by path too. */
    t = hp_xasprintf("/identity?path=%s", app);
    json_t *j = get_json(&a, t, 200);
    assert_string_equal(json_string_value(json_object_get(j, "debuglink")), "app.debug");
    assert_false(json_is_true(json_object_get(j, "has_debug_info")));
    json_decref(j);
    free(t);

    if (tool[0]) {
        static const char *const what[] = { "--executable", "--debuginfo" };
        for (int i = 0; i < 2; i++) {
            cmd = hp_xasprintf("DEBUGINFOD_URLS=http://127.0.0.1:%d DEBUGINFOD_CACHE_PATH=%s/dcache"
                               " '%s' %s %s",
                               a.port, tmp, tool, what[i], id);
            assert_true(sh_line(cmd, line, sizeof(line)));
            free(cmd);
            char *x = NULL, *y = NULL;
            size_t xl, yl;
            assert_int_equal(hp_file_read(line, 64u << 20, &x, &xl, NULL), 0);
            assert_int_equal(hp_file_read(i == 0 ? app : dbg, 64u << 20, &y, &yl, NULL), 0);
            assert_int_equal(xl, yl);
            assert_memory_equal(x, y, xl);
            free(x);
            free(y);
        }
        /* An unknown build-id is a miss for the client, not a crash. */
        cmd = hp_xasprintf("DEBUGINFOD_URLS=http://127.0.0.1:%d DEBUGINFOD_CACHE_PATH=%s/dcache"
                           " '%s' --executable 00112233445566778899 2>/dev/null",
                           a.port, tmp, tool);
        assert_false(sh_line(cmd, line, sizeof(line)));
        free(cmd);
    }
    stop_agent(&a);
    free(app);
    free(dbg);
    free(bins);
    free(empty);
}

/* SIGTERM while a client is stuck mid-download (it never reads): the agent
 * still exits 0 within its grace period. */
static void test_agent_http_stops_with_stalled_client(void **state)
{
    char libc[512], id[256];
    mapped_libc(libc, sizeof(libc));
    readelf_build_id(libc, id, sizeof(id));
    struct agent_proc a;
    const char *args[] = { "--dumps", jem, NULL };
    start_agent(&a, "stalled", args);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)a.port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char *req = hp_xasprintf("GET /buildid/%s/executable HTTP/1.1\r\nHost: x\r\n\r\n", id);
    assert_true(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    free(req);
    char buf[64];
    assert_true(read(fd, buf, sizeof(buf)) > 0); /* the response has started */
    uint64_t t0 = hp_now_ns();
    stop_agent(&a);
    assert_true(hp_now_ns() - t0 < 5ull * 1000000000);
    close(fd);
}

static void test_agent_http_proc_from_pid_file(void **state)
{
    json_t *j = get_json(&main_agent, "/proc", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), getpid());
    assert_string_equal(json_string_value(json_object_get(j, "pid_source")), "pid-file");
    json_int_t rss = json_integer_value(json_object_get(j, "rss_bytes"));
    assert_true(rss > 1024 * 1024);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "status"), "Pid")),
                     getpid());
    json_t *stj = json_object_get(j, "status");
    assert_true(json_integer_value(json_object_get(stj, "Threads")) >= 1);
    assert_null(json_object_get(stj, "Umask")); /* octal, not a figure */
    /* When this process started, within a few seconds of what
     * clock_gettime says now minus its run time so far. */
    double start = json_number_value(json_object_get(j, "start_time_seconds"));
    double now = (double)hp_wall_ms() / 1000.0;
    assert_true(start > now - 3600 && start <= now + 2);
    json_t *sm = json_object_get(j, "smaps_rollup");
    assert_non_null(sm);
    assert_true(json_integer_value(json_object_get(sm, "Rss")) > 0);
    json_decref(j);
}

static void test_agent_http_token_required(void **state)
{
    struct agent_proc a;
    char *tok = hp_xasprintf("%s/token", tmp);
    write_file(tok, "s3cret-Token_42\n");
    const char *args[] = { "--dumps", jem, "--token-file", tok, NULL };
    start_agent(&a, "token", args);
    struct resp r;
    http_get(&a, "/dumps", NULL, &r);
    assert_int_equal(r.status, 401);
    resp_release(&r);
    http_get(&a, "/dumps", "wrong", &r);
    assert_int_equal(r.status, 401);
    resp_release(&r);
    http_get(&a, "/dumps", "s3cret-Token_4", &r);
    assert_int_equal(r.status, 401);
    resp_release(&r);
    http_get(&a, "/dumps/newest", "s3cret-Token_421", &r);
    assert_int_equal(r.status, 401);
    resp_release(&r);
    http_get(&a, "/dumps", "s3cret-Token_42", &r);
    assert_int_equal(r.status, 200);
    resp_release(&r);
    http_get(&a, "/dumps/newest", "s3cret-Token_42", &r);
    assert_int_equal(r.status, 200);
    resp_release(&r);
    http_get(&a, "/health", NULL, &r);
    assert_int_equal(r.status, 200);
    resp_release(&r);
    stop_agent(&a);
    free(tok);
}

struct dircount {
    const char *dir;
    int want;
};

static bool dir_has(void *arg)
{
    struct dircount *d = arg;
    return count_prefix(d->dir, "") == d->want;
}

static void test_agent_http_keep_prunes_oldest(void **state)
{
    char *kd = hp_xasprintf("%s/keep", tmp);
    mkdir(kd, 0755);
    char *names[] = {
        hp_xasprintf("%s/jeprof.100.0.m0.heap", kd), hp_xasprintf("%s/jeprof.100.1.m1.heap", kd),
        hp_xasprintf("%s/jeprof.100.2.m2.heap", kd), hp_xasprintf("%s/jeprof.100.3.m3.heap", kd),
        hp_xasprintf("%s/other.7.0.i0.heap", kd),    hp_xasprintf("%s/other.7.1.i1.heap", kd),
        hp_xasprintf("%s/other.7.2.i2.heap", kd),
        hp_xasprintf("%s/2026-01-01-00-00-00.manual.heap", kd),
        hp_xasprintf("%s/2026-01-01-00-00-01.auto.heap", kd),
        hp_xasprintf("%s/2026-01-01-00-00-02.auto.heap", kd),
        hp_xasprintf("%s/2026-01-01-00-00-03.auto.heap", kd),
        NULL,
    };
    run_fixture("prof:true,lg_prof_sample:0", names, NULL);
    char *notes = hp_xasprintf("%s/notes.txt", kd);
    write_file(notes, "not a dump\n");
    struct agent_proc a;
    const char *args[] = { "--dumps", kd, "--keep", "2", "--keep-every", "1s", NULL };
    start_agent(&a, "keep", args);
    struct dircount dc = { kd, 8 };
    assert_true(wait_until(dir_has, &dc, 10000));
    stop_agent(&a);
    static const char *const kept[] = { "jeprof.100.2.m2.heap", "jeprof.100.3.m3.heap",
                                        "other.7.1.i1.heap", "other.7.2.i2.heap", "notes.txt",
                                        /* RisingWave: manual dumps are their own group */
                                        "2026-01-01-00-00-00.manual.heap",
                                        "2026-01-01-00-00-02.auto.heap",
                                        "2026-01-01-00-00-03.auto.heap" };
    for (size_t i = 0; i < HP_ARRAY_SIZE(kept); i++) {
        char *p = hp_xasprintf("%s/%s", kd, kept[i]);
        assert_int_equal(access(p, F_OK), 0);
        free(p);
    }
    char *log = NULL;
    size_t len;
    assert_int_equal(hp_file_read(a.log, 1 << 20, &log, &len, NULL), 0);
    int deletions = 0;
    for (const char *p = log; (p = strstr(p, "msg=\"deleted old dump\"")) != NULL; p++)
        deletions++;
    assert_int_equal(deletions, 4);
    assert_non_null(strstr(log, "file=jeprof.100.0.m0.heap"));
    free(log);
    for (int i = 0; names[i]; i++)
        free(names[i]);
    free(notes);
    free(kd);
}

static void set_age(const char *path, int seconds_ago)
{
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= seconds_ago;
    ts[1] = ts[0];
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* A dump jemalloc is still writing (no MAPPED_LIBRARIES trailer yet) is not
 * "newest" while it is fresh; once it has looked unfinished for a while it is
 * served anyway, so a truncated dump is reported by the parser, not hidden. */
static void test_agent_http_newest_skips_dump_being_written(void **state)
{
    char *pd = hp_xasprintf("%s/partial", tmp);
    mkdir(pd, 0755);
    char *done = hp_xasprintf("%s/jeprof.5.0.m0.heap", pd);
    char *partial = hp_xasprintf("%s/jeprof.5.1.m1.heap", pd);
    char *d[] = { done, NULL };
    run_fixture("prof:true,lg_prof_sample:0", d, NULL);
    char *data = NULL;
    size_t len;
    assert_int_equal(hp_file_read(done, 64u << 20, &data, &len, NULL), 0);
    const char *m = strstr(data, "MAPPED_LIBRARIES:");
    assert_non_null(m);
    FILE *f = fopen(partial, "w");
    assert_non_null(f);
    fwrite(data, 1, (size_t)(m - data) / 2, f);
    fclose(f);
    set_age(done, 120);
    struct agent_proc a;
    const char *args[] = { "--dumps", pd, NULL };
    start_agent(&a, "partial", args);
    struct resp r;
    http_get(&a, "/dumps/newest", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, done);
    resp_release(&r);
    set_age(partial, 60);
    http_get(&a, "/dumps/newest", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_body_is_file(&r, partial);
    resp_release(&r);
    stop_agent(&a);
    free(data);
    free(done);
    free(partial);
    free(pd);
}

struct running {
    struct agent_proc *a;
    pid_t pid;
};

static bool dumps_of_pid_listed(void *arg)
{
    struct running *r = arg;
    struct resp x;
    http_get(r->a, "/dumps", NULL, &x);
    char *want = hp_xasprintf("\"pid\":%d", (int)r->pid);
    bool ok = x.status == 200 && x.body.data && strstr(x.body.data, want);
    free(want);
    resp_release(&x);
    return ok;
}

static void test_agent_http_serves_running_fixture(void **state)
{
    /* The fixture writes interval dumps into the folder, then blocks writing
     * its last dump into a FIFO: it stays alive while we query the agent. */
    char *rd = hp_xasprintf("%s/running", tmp);
    char *fifo = hp_xasprintf("%s/last.fifo", tmp);
    mkdir(rd, 0755);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct agent_proc a;
    const char *args[] = { "--dumps", rd, NULL };
    start_agent(&a, "running", args);
    char *conf = hp_xasprintf("MALLOC_CONF=prof:true,lg_prof_sample:0,lg_prof_interval:18,prof_prefix:%s/compute-node", rd);
    char *envp[] = { conf, NULL };
    char *argv[] = { (char *)fixture_exe, "--rounds", "2", fifo, NULL };
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, fixture_exe, NULL, NULL, argv, envp), 0);
    struct running run = { &a, pid };
    assert_true(wait_until(dumps_of_pid_listed, &run, 10000));
    int st;
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0); /* still running */

    json_t *j = get_json(&a, "/proc", 200);
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), pid);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "jefixture");
    assert_true(json_integer_value(json_object_get(j, "rss_bytes")) > 0);
    json_decref(j);
    struct resp r;
    http_get(&a, "/dumps/newest?prefix=compute-node", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_true(r.body.len > 8 && memcmp(r.body.data, "heap_v2/", 8) == 0);
    assert_non_null(memmem(r.body.data, r.body.len, "MAPPED_LIBRARIES:", 17));
    resp_release(&r);

    /* Release the fixture: read its last dump from the FIFO. */
    int fd = open(fifo, O_RDONLY);
    assert_true(fd >= 0);
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Gone: /proc now says so instead of describing a stale pid. */
    json_t *gone = get_json(&a, "/proc", 404);
    json_decref(gone);
    stop_agent(&a);
    free(conf);
    free(rd);
    free(fifo);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s AGENT_EXE JEFIXTURE_EXE\n", argv[0]);
        return 2;
    }
    agent_exe = argv[1];
    fixture_exe = argv[2];
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_http_lists_every_kind),
        cmocka_unit_test(test_agent_http_newest_is_last_interval_dump),
        cmocka_unit_test(test_agent_http_file_by_name_and_path),
        cmocka_unit_test(test_agent_http_traversal_refused),
        cmocka_unit_test(test_agent_http_bad_requests_400),
        cmocka_unit_test(test_agent_http_request_size_bounded),
        cmocka_unit_test(test_agent_http_identity_matches_readelf),
        cmocka_unit_test(test_agent_http_buildid_serves_binary),
        cmocka_unit_test(test_agent_http_buildid_serves_mapped_library),
        cmocka_unit_test(test_agent_http_serves_only_live_maps),
        cmocka_unit_test(test_agent_http_client_abort_and_head),
        cmocka_unit_test(test_agent_http_buildid_range),
        cmocka_unit_test(test_agent_http_debuginfod_client),
        cmocka_unit_test(test_agent_http_stops_with_stalled_client),
        cmocka_unit_test(test_agent_http_proc_from_pid_file),
        cmocka_unit_test(test_agent_http_token_required),
        cmocka_unit_test(test_agent_http_keep_prunes_oldest),
        cmocka_unit_test(test_agent_http_newest_skips_dump_being_written),
        cmocka_unit_test(test_agent_http_serves_running_fixture),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    curl_global_cleanup();
    return rc;
}
