/* The agent's HTTP/1.1 server: h2o (libuv flavour) on one libuv loop.
 *
 * The loop thread only parses the request line (h2o), checks the token,
 * matches the route and decodes the query; everything that touches the file
 * system (listing folders, opening dumps, reading ELF notes and /proc) runs on
 * libuv's worker pool, and file bodies are streamed in 256 KiB uv_fs_read
 * chunks (at most MAX_CONNS buffers: 32 MiB), so a slow disk or a huge dump
 * never stalls other requests.
 *
 * Lifetime of a request: `struct reqctx` is malloc'ed per request and
 * referenced from a slot in h2o's request pool. h2o may dispose of the request
 * (client gone) while a work item or a read is in flight; the slot's dispose
 * callback then clears ctx->req, and whichever of {dispose, work done, read
 * done} comes last frees the context. Buffers handed to h2o_send live in the
 * context, which therefore outlives the final write (the pool is disposed
 * only after it completes).
 *
 * Limits: request head size is h2o's (H2O_MAX_REQLEN), bodies are refused
 * (GET/HEAD only, max_request_entity_size 0), query strings up to
 * AGENT_QUERY_MAX, MAX_CONNS connections and MAX_JOBS queued requests. */
#include "agent/agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <h2o.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 128
#define MAX_JOBS 64
#define CHUNK (256 * 1024) /* fewer thread-pool round trips; see tests/bench/agent-serve.sh */
#define TOKEN_MAX 4096
#define JSON_BODY_MAX (16u << 20)
#define INCOMPLETE_GRACE_NS (10ll * 1000000000)

struct agent {
    uv_loop_t loop;
    const struct agent_config *cfg;
    struct agent_folders folders;
    struct agent_binidx *bin;
    char *token;
    size_t token_len;
    h2o_globalconf_t h2o_config;
    h2o_context_t h2o_ctx;
    h2o_accept_ctx_t accept_ctx;
    SSL_CTX *ssl_ctx; /* --tls-cert: every connection is TLS */
    bool h2o_ready;
    uv_tcp_t listener;
    uv_signal_t sigint, sigterm;
    uv_timer_t keep_timer;
    uv_work_t keep_work;
    bool keep_busy;
    unsigned conns, jobs;
    /* Every open connection, newest first, and the oldest: at the cap the
     * oldest makes room, so a crowd of slow clients cannot lock the
     * collector and health probes out. */
    struct conn *conns_head, *conns_tail;
};

struct handler {
    h2o_handler_t super;
    struct agent *agent;
};

enum argkind { ARG_NONE, ARG_NAME, ARG_PATH };

struct reqctx {
    struct agent *agent;
    h2o_req_t *req; /* NULL once h2o disposed of the request */
    bool busy;      /* a work item or a read is in flight */
    bool stopped;   /* h2o stopped the response (client gone) */
    bool head;
    uv_work_t work;
    uv_fs_t fs;
    h2o_generator_t gen;
    enum agent_route route;
    char build_id[AGENT_BUILD_ID_HEX_MAX + 1];
    enum argkind argkind;
    char arg[AGENT_QUERY_MAX + 1];
    /* results of the work item */
    int status;
    const char *reason;
    char *body; /* JSON, malloc'ed */
    size_t body_len;
    int fd; /* >= 0: stream this file */
    uint64_t size, off;
    char dump_name[AGENT_NAME_MAX + 1];
    int64_t dump_mtime_ns;
    char *chunk;
};

struct slot {
    struct reqctx *c;
};

static void reqctx_free(struct reqctx *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->body);
    free(c->chunk);
    free(c);
}

static void slot_dispose_cb(void *p)
{
    struct slot *s = p;
    struct reqctx *c = s->c;
    c->req = NULL;
    if (!c->busy)
        reqctx_free(c);
}

/* ---- JSON helpers (worker side) ---- */

/* A JSON string for text that may not be UTF-8 (paths from a client or
 * from a dump's maps, /proc's process name, error messages quoting them):
 * jansson refuses invalid UTF-8, so such bytes become U+FFFD
 * (hp_utf8_clean) rather than failing the response. */
static json_t *json_text(const char *s)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *j = json_string(hp_utf8_clean(&tmp, s));
    hp_arena_release(&tmp);
    return j ? j : json_string("");
}

static void set_json(struct reqctx *c, int status, const char *reason, json_t *j)
{
    c->status = status;
    c->reason = reason;
    c->body = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!c->body) {
        hp_log_error("agent", "msg=\"out of memory formatting JSON\"");
        abort();
    }
    c->body_len = strlen(c->body);
    json_decref(j);
}

static void set_error(struct reqctx *c, int status, const char *reason, const char *msg)
{
    json_t *j = json_object();
    json_object_set_new(j, "error", json_text(msg));
    set_json(c, status, reason, j);
}

/* Map an HP_* error from folder access to a status. */
static void set_error_code(struct reqctx *c, int r, struct hp_buf *err)
{
    const char *msg = err->len ? err->data : hp_strerror(r);
    if (r == HP_ENOTFOUND || r == HP_ERR(ENOENT))
        set_error(c, 404, "Not Found", err->len ? msg : "no such dump");
    else if (r == HP_ERR(EACCES) || r == HP_ERR(EPERM) || r == HP_ERR(ELOOP))
        set_error(c, 403, "Forbidden", msg);
    else
        set_error(c, 500, "Internal Server Error", msg);
}

static json_t *dump_json(const struct agent *a, const struct agent_dump *d)
{
    const struct ingest_dumpname *p = &d->parsed;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_text(d->name));
    json_object_set_new(o, "folder", json_text(a->folders.dir[d->folder].path));
    char *path = hp_xasprintf("%s/%s", a->folders.dir[d->folder].path, d->name);
    json_object_set_new(o, "path", json_text(path));
    free(path);
    json_object_set_new(o, "size", json_integer((json_int_t)d->size));
    json_object_set_new(o, "mtime", json_integer(d->mtime_ns / 1000000000));
    json_object_set_new(o, "mtime_ns", json_integer(d->mtime_ns));
    json_object_set_new(o, "kind", json_string(ingest_dump_kind_name(p->kind)));
    json_object_set_new(o, "prefix", json_stringn(d->name, p->prefix_len));
    json_object_set_new(o, "trigger", json_string(ingest_dump_trigger_name(p->trigger)));
    json_object_set_new(o, "pid", p->pid >= 0 ? json_integer(p->pid) : json_null());
    json_object_set_new(o, "sequence", p->seq >= 0 ? json_integer(p->seq) : json_null());
    json_object_set_new(o, "trigger_sequence",
                        p->trigger_seq >= 0 ? json_integer(p->trigger_seq) : json_null());
    int64_t t = p->time;
    if (p->kind == INGEST_DUMP_RISINGWAVE) {
        /* RisingWave names carry the node's local time (chrono Local). */
        struct tm tm = { .tm_year = p->tm[0] - 1900, .tm_mon = p->tm[1] - 1, .tm_mday = p->tm[2],
                         .tm_hour = p->tm[3], .tm_min = p->tm[4], .tm_sec = p->tm[5],
                         .tm_isdst = -1 };
        time_t tt = mktime(&tm);
        t = tt == (time_t)-1 ? -1 : (int64_t)tt;
    }
    json_object_set_new(o, "time", t >= 0 ? json_integer(t) : json_null());
    return o;
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* ---- work items (worker threads) ---- */

static void work_dumps(struct reqctx *c)
{
    struct agent *a = c->agent;
    struct hp_buf err = HP_BUF_INIT(0);
    struct agent_dump *v = NULL;
    size_t n = 0;
    int r = agent_dumps_list(&a->folders, &v, &n, &err);
    if (r < 0) {
        set_error_code(c, r, &err);
        goto out;
    }
    json_t *root = json_object(), *arr = json_array(), *folders = json_array();
    for (size_t i = 0; i < a->folders.n; i++)
        json_array_append_new(folders, json_text(a->folders.dir[i].path));
    for (size_t i = 0; i < n; i++)
        if (c->argkind == ARG_NONE || has_prefix(v[i].name, c->arg))
            json_array_append_new(arr, dump_json(a, &v[i]));
    json_object_set_new(root, "folders", folders);
    json_object_set_new(root, "dumps", arr);
    json_object_set_new(root, "truncated", json_boolean(n == AGENT_LIST_MAX));
    set_json(c, 200, "OK", root);
out:
    free(v);
    hp_buf_release(&err);
}

static void take_file(struct reqctx *c, int fd, const struct agent_dump *d)
{
    c->fd = fd;
    c->size = d->size;
    c->status = 200;
    c->reason = "OK";
    memcpy(c->dump_name, d->name, sizeof(c->dump_name));
    c->dump_mtime_ns = d->mtime_ns;
}

static void work_newest(struct reqctx *c)
{
    struct agent *a = c->agent;
    struct hp_buf err = HP_BUF_INIT(0);
    struct agent_dump *v = NULL;
    size_t n = 0;
    int r = agent_dumps_list(&a->folders, &v, &n, &err);
    if (r < 0) {
        set_error_code(c, r, &err);
        goto out;
    }
    int64_t now = (int64_t)time(NULL) * 1000000000;
    for (size_t i = 0; i < n; i++) {
        if (c->argkind != ARG_NONE && !has_prefix(v[i].name, c->arg))
            continue;
        char *path = hp_xasprintf("%s/%s", a->folders.dir[v[i].folder].path, v[i].name);
        struct agent_dump d;
        int fd;
        r = agent_dump_open_path(&a->folders, path, &fd, &d, NULL);
        free(path);
        if (r < 0)
            continue; /* deleted since the listing */
        /* A dump jemalloc is still writing has no trailer yet: skip it for
         * the one before, unless it has looked unfinished for a while (then
         * it is a truncated dump and the parser will say so). */
        if (agent_dump_complete(fd, d.size, &d.parsed) == 0 &&
            now - d.mtime_ns < INCOMPLETE_GRACE_NS) {
            close(fd);
            continue;
        }
        take_file(c, fd, &d);
        goto out;
    }
    set_error(c, 404, "Not Found", c->argkind ? "no dump with that prefix" : "no dumps yet");
out:
    free(v);
    hp_buf_release(&err);
}

static void work_file(struct reqctx *c)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct agent_dump d;
    int fd;
    int r = c->argkind == ARG_NAME ? agent_dump_open_name(&c->agent->folders, c->arg, &fd, &d, &err)
                                   : agent_dump_open_path(&c->agent->folders, c->arg, &fd, &d, &err);
    if (r < 0)
        set_error_code(c, r, &err);
    else
        take_file(c, fd, &d);
    hp_buf_release(&err);
}

/* POST /dumps/delete?path=: only a dump this agent would serve by path. */
static void work_delete(struct reqctx *c)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int r = agent_dump_delete_path(&c->agent->folders, c->arg, &err);
    if (r < 0) {
        set_error_code(c, r, &err);
    } else {
        struct hp_buf kv = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&kv, c->arg);
        hp_log_info("agent", "file=%s msg=\"deleted a dump the collector stored\"", kv.data);
        hp_buf_release(&kv);
        json_t *o = json_object();
        json_object_set_new(o, "deleted", json_text(c->arg));
        set_json(c, 200, "OK", o);
    }
    hp_buf_release(&err);
}

static void work_identity(struct reqctx *c)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct sym_elf_identity id;
    int r = agent_binidx_identity(c->agent->bin, c->arg, &id, &err);
    if (r <= 0) {
        /* One answer for every path not served, whatever the reason (not
         * indexed, missing, unreadable, not ELF): the reply must not tell
         * a prober which files exist. The reason goes to the debug log. */
        if (r < 0 && HP_LOG_DEBUG <= hp_log_threshold) {
            struct hp_buf v = HP_BUF_INIT(0);
            (void)hp_logfmt_value(&v, err.len ? err.data : hp_strerror(r));
            hp_log_debug("agent", "err=%s msg=\"identity not served\"", v.data);
            hp_buf_release(&v);
        }
        set_error(c, 403, "Forbidden",
                  "not served: not a binary mapped by a running process this agent watches nor "
                  "under --binaries");
    } else {
        json_t *o = json_object();
        json_object_set_new(o, "path", json_text(c->arg));
        json_object_set_new(o, "build_id", json_text(id.build_id));
        json_object_set_new(o, "size", json_integer((json_int_t)id.size));
        json_object_set_new(o, "debuglink", json_text(id.debuglink));
        json_object_set_new(o, "has_debug_info", json_boolean(id.has_debug_info));
        json_object_set_new(o, "has_symtab", json_boolean(id.has_symtab));
        set_json(c, 200, "OK", o);
    }
    hp_buf_release(&err);
}

static void work_buildid(struct reqctx *c)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int fd;
    uint64_t size;
    bool dbg = c->route == AGENT_ROUTE_BUILDID_DEBUG;
    int r = agent_binidx_open(c->agent->bin, c->build_id, dbg, &fd, &size, &err);
    if (r == 0) {
        set_error(c, 404, "Not Found", dbg ? "no debug info for this build-id"
                                           : "no binary with this build-id");
    } else if (r < 0) {
        set_error_code(c, r == HP_EMISMATCH ? HP_ENOTFOUND : r, &err);
    } else {
        c->fd = fd;
        c->size = size;
        c->status = 200;
        c->reason = "OK";
    }
    hp_buf_release(&err);
}

/* The memory figures (the kB lines, in bytes) and the few counters worth
 * graphing; other numeric lines (Umask in octal, NSpid, TracerPid…) would
 * only mislead as plain numbers. */
static json_t *fields_json(const struct agent_proc_fields *p)
{
    static const char *const counters[] = { "Pid", "PPid", "Threads", "FDSize",
                                            "voluntary_ctxt_switches",
                                            "nonvoluntary_ctxt_switches" };
    json_t *o = json_object();
    for (size_t i = 0; i < p->n; i++) {
        bool keep = p->f[i].bytes;
        for (size_t k = 0; !keep && k < HP_ARRAY_SIZE(counters); k++)
            keep = strcmp(p->f[i].key, counters[k]) == 0;
        if (keep)
            json_object_set_new(o, p->f[i].key,
                                json_integer((json_int_t)HP_MIN(p->f[i].value, (uint64_t)INT64_MAX)));
    }
    return o;
}

/* The pid to report on: --pid-file, else the newest dump with a pid whose
 * process still runs. 0 and *ret_pid, or <0. */
static int proc_pick_pid(struct agent *a, int64_t *ret_pid, char *src, size_t srcsz,
                         struct hp_buf *err)
{
    if (a->cfg->pid_file) {
        int r = agent_pid_file_read(a->cfg->pid_file, ret_pid, err);
        if (r < 0)
            return r;
        snprintf(src, srcsz, "pid-file");
        return 0;
    }
    struct agent_dump *v = NULL;
    size_t n = 0;
    int r = agent_dumps_list(&a->folders, &v, &n, err);
    if (r < 0)
        return r;
    r = HP_ENOTFOUND;
    for (size_t i = 0; i < n; i++) {
        if (v[i].parsed.pid <= 0 || v[i].parsed.pid > INT32_MAX)
            continue;
        char p[64];
        snprintf(p, sizeof(p), "/proc/%lld", (long long)v[i].parsed.pid);
        if (access(p, F_OK) != 0)
            continue;
        *ret_pid = v[i].parsed.pid;
        snprintf(src, srcsz, "dump:%s", v[i].name);
        r = 0;
        break;
    }
    if (r < 0)
        hp_err_printf(err, "no running process found: no --pid-file and no dump names a live pid");
    free(v);
    return r;
}

static void work_proc(struct reqctx *c)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t pid;
    char src[AGENT_NAME_MAX + 16];
    char *text = NULL;
    size_t len = 0;
    struct agent_proc_fields *st = hp_xcalloc(1, sizeof(*st));
    struct agent_proc_fields *sm = hp_xcalloc(1, sizeof(*sm));
    int r = proc_pick_pid(c->agent, &pid, src, sizeof(src), &err);
    if (r < 0) {
        set_error_code(c, r, &err);
        goto out;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%lld/status", (long long)pid);
    r = hp_file_read(path, 1u << 16, &text, &len, &err);
    if (r < 0) {
        set_error_code(c, r == HP_ERR(ENOENT) ? HP_ENOTFOUND : r, &err);
        goto out;
    }
    agent_proc_parse(text, len, st);
    free(text);
    text = NULL;
    json_t *root = json_object();
    json_object_set_new(root, "pid", json_integer(pid));
    {
        /* When the process started (Unix seconds): the leak analysis
         * tells its lifetimes apart by it. */
        char *stat = NULL, *sys = NULL;
        size_t sl = 0, yl = 0;
        double start;
        snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
        hp_buf_reset(&err);
        if (hp_file_read(path, 1u << 16, &stat, &sl, &err) == 0 &&
            hp_file_read("/proc/stat", 1u << 20, &sys, &yl, &err) == 0 &&
            agent_proc_start_time(stat, sl, sys, yl, sysconf(_SC_CLK_TCK), &start))
            json_object_set_new(root, "start_time_seconds", json_real(start));
        free(stat);
        free(sys);
    }
    json_object_set_new(root, "pid_source", json_text(src));
    json_object_set_new(root, "name", json_text(st->name));
    json_object_set_new(root, "status", fields_json(st));
    uint64_t v;
    if (agent_proc_get(st, "VmRSS", &v))
        json_object_set_new(root, "rss_bytes", json_integer((json_int_t)v));
    if (agent_proc_get(st, "VmHWM", &v))
        json_object_set_new(root, "rss_peak_bytes", json_integer((json_int_t)v));
    /* smaps_rollup needs ptrace read access to the process; without it the
     * status figures are still worth returning. */
    snprintf(path, sizeof(path), "/proc/%lld/smaps_rollup", (long long)pid);
    hp_buf_reset(&err);
    r = hp_file_read(path, 1u << 16, &text, &len, &err);
    if (r < 0) {
        json_object_set_new(root, "smaps_rollup_error", json_text(err.data ? err.data : ""));
    } else {
        agent_proc_parse(text, len, sm);
        json_object_set_new(root, "smaps_rollup", fields_json(sm));
        if (agent_proc_get(sm, "Pss", &v))
            json_object_set_new(root, "pss_bytes", json_integer((json_int_t)v));
    }
    set_json(c, 200, "OK", root);
out:
    free(text);
    free(st);
    free(sm);
    hp_buf_release(&err);
}

static void work_cb(uv_work_t *w)
{
    struct reqctx *c = hp_container_of(w, struct reqctx, work);
    switch (c->route) {
    case AGENT_ROUTE_DUMPS:
        work_dumps(c);
        break;
    case AGENT_ROUTE_NEWEST:
        work_newest(c);
        break;
    case AGENT_ROUTE_FILE:
        work_file(c);
        break;
    case AGENT_ROUTE_DELETE:
        work_delete(c);
        break;
    case AGENT_ROUTE_IDENTITY:
        work_identity(c);
        break;
    case AGENT_ROUTE_PROC:
        work_proc(c);
        break;
    case AGENT_ROUTE_BUILDID_EXEC:
    case AGENT_ROUTE_BUILDID_DEBUG:
        work_buildid(c);
        break;
    default:
        set_error(c, 404, "Not Found", "no such endpoint");
        break;
    }
}

/* ---- responses (loop thread) ---- */

/* Refusals are logged: a 403 is what an attempt to read outside the folders
 * looks like, and operators want to see those. */
static void log_refusal(int status, const char *why)
{
    enum hp_log_level lvl = status == 403 || status == 401 ? HP_LOG_INFO : HP_LOG_DEBUG;
    if (lvl > hp_log_threshold)
        return;
    struct hp_buf v = HP_BUF_INIT(0);
    (void)hp_logfmt_value(&v, why);
    hp_log_emit(lvl, "agent", "status=%d why=%s msg=\"request refused\"", status, v.data ? v.data : "\"\"");
    hp_buf_release(&v);
}

static void add_header(h2o_req_t *req, const char *name, const char *value)
{
    h2o_iovec_t v = h2o_strdup(&req->pool, value, strlen(value));
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 0, NULL, v.base,
                          v.len);
}

static void send_inline(h2o_req_t *req, int status, const char *reason, const char *body,
                        size_t len)
{
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/json"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-store"));
    /* h2o_send_inline leaves the length unset (it also makes 304s); without
     * it replies go out chunked, which some clients (debuginfod's) dislike. */
    req->res.content_length = len;
    h2o_send_inline(req, body, len);
}

static void send_json_error(h2o_req_t *req, int status, const char *reason, const char *msg)
{
    json_t *j = json_object();
    json_object_set_new(j, "error", json_text(msg));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    send_inline(req, status, reason, s, strlen(s));
    free(s);
}

static void read_next(struct reqctx *c);

static void on_read_cb(uv_fs_t *fs)
{
    struct reqctx *c = hp_container_of(fs, struct reqctx, fs);
    ssize_t n = fs->result;
    uv_fs_req_cleanup(fs);
    c->busy = false;
    if (!c->req) {
        reqctx_free(c);
        return;
    }
    if (c->stopped)
        return;
    if (n <= 0) {
        /* The file shrank or the disk failed after the headers went out:
         * all that is left is to cut the response short. */
        log_refusal(500, n < 0 ? uv_strerror((int)n) : "file shrank while it was sent");
        h2o_send(c->req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    c->off += (uint64_t)n;
    h2o_iovec_t iov = h2o_iovec_init(c->chunk, (size_t)n);
    h2o_send(c->req, &iov, 1, c->off >= c->size ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void read_next(struct reqctx *c)
{
    size_t n = (size_t)HP_MIN((uint64_t)CHUNK, c->size - c->off);
    uv_buf_t b = uv_buf_init(c->chunk, (unsigned)n);
    int r = uv_fs_read(&c->agent->loop, &c->fs, c->fd, &b, 1, (int64_t)c->off, on_read_cb);
    if (r < 0) {
        h2o_send(c->req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    c->busy = true;
}

static void gen_proceed_cb(h2o_generator_t *g, h2o_req_t *req)
{
    struct reqctx *c = hp_container_of(g, struct reqctx, gen);
    read_next(c);
}

static void gen_stop_cb(h2o_generator_t *g, h2o_req_t *req)
{
    struct reqctx *c = hp_container_of(g, struct reqctx, gen);
    c->stopped = true;
}

static void start_stream(struct reqctx *c)
{
    h2o_req_t *req = c->req;
    char num[96];
    uint64_t total = c->size, start = 0, end = c->size;
    /* One byte range, so a collector cut off in the middle of a 2 GB
     * binary fetches only the rest. */
    ssize_t hi = h2o_find_header(&req->headers, H2O_TOKEN_RANGE, -1);
    int rr = hi >= 0 ? agent_range_parse(req->headers.entries[hi].value.base,
                                         req->headers.entries[hi].value.len, total, &start, &end)
                     : 0;
    if (rr < 0) {
        snprintf(num, sizeof(num), "bytes */%llu", (unsigned long long)total);
        add_header(req, "content-range", num);
        send_json_error(req, 416, "Range Not Satisfiable",
                        "the range starts at or past the end of the file");
        return;
    }
    req->res.status = rr ? 206 : 200;
    req->res.reason = rr ? "Partial Content" : "OK";
    c->off = start;
    c->size = end;
    req->res.content_length = end - start;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("application/octet-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCEPT_RANGES, NULL,
                   H2O_STRLIT("bytes"));
    if (rr) {
        snprintf(num, sizeof(num), "bytes %llu-%llu/%llu", (unsigned long long)start,
                 (unsigned long long)(end - 1), (unsigned long long)total);
        add_header(req, "content-range", num);
    }
    if (c->dump_name[0]) {
        add_header(req, "x-heapfleet-dump-name", c->dump_name);
        snprintf(num, sizeof(num), "%lld", (long long)c->dump_mtime_ns);
        add_header(req, "x-heapfleet-dump-mtime-ns", num);
    } else {
        snprintf(num, sizeof(num), "%llu", (unsigned long long)total);
        add_header(req, "x-debuginfod-size", num);
    }
    c->gen.proceed = gen_proceed_cb;
    c->gen.stop = gen_stop_cb;
    h2o_start_response(req, &c->gen);
    if (c->head || c->off >= c->size) {
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    c->chunk = hp_xmalloc(CHUNK);
    read_next(c);
}

static void after_work_cb(uv_work_t *w, int status)
{
    struct reqctx *c = hp_container_of(w, struct reqctx, work);
    c->agent->jobs--;
    c->busy = false;
    if (!c->req) {
        reqctx_free(c);
        return;
    }
    if (status < 0) {
        send_json_error(c->req, 503, "Service Unavailable", "shutting down");
        return;
    }
    if (c->status >= 400)
        log_refusal(c->status, c->body ? c->body : "");
    if (c->fd >= 0) {
        start_stream(c);
        return;
    }
    send_inline(c->req, c->status, c->reason, c->body, c->body_len);
}

/* ---- request entry (loop thread) ---- */

static bool token_ok(struct agent *a, h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (i < 0)
        return false;
    h2o_iovec_t v = req->headers.entries[i].value;
    return hp_bearer_ok(a->token, a->token_len, v.base, v.len);
}

static int on_req_cb(h2o_handler_t *self, h2o_req_t *req)
{
    struct agent *a = ((struct handler *)self)->agent;
    bool head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    bool post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    /* One write: POST /dumps/delete (the collector's delete_after_fetch).
     * Everything else is read-only. */
    bool delete_route = plen == 13 && memcmp(req->path.base, "/dumps/delete", 13) == 0;
    if (delete_route ? !post
                     : (!head && !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")))) {
        if (delete_route)
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("POST"));
        else
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL,
                           H2O_STRLIT("GET, HEAD"));
        send_json_error(req, 405, "Method Not Allowed",
                        delete_route ? "POST only" : "read-only: GET and HEAD only");
        return 0;
    }
    if (delete_route && !a->token) {
        /* Deleting is only for a collector that proves who it is. */
        log_refusal(403, "delete without --token-file");
        send_json_error(req, 403, "Forbidden",
                        "deleting dumps needs the agent to run with --token-file");
        return 0;
    }
    const char *qs = req->query_at != SIZE_MAX ? req->path.base + req->query_at + 1 : "";
    size_t qlen = req->query_at != SIZE_MAX ? req->path.len - req->query_at - 1 : 0;
    char build_id[AGENT_BUILD_ID_HEX_MAX + 1];
    enum agent_route route = agent_route_match(req->path.base, plen, build_id);
    if (route == AGENT_ROUTE_NONE) {
        send_json_error(req, 404, "Not Found", "no such endpoint");
        return 0;
    }
    if (a->token && route != AGENT_ROUTE_HEALTH && !token_ok(a, req)) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL,
                       H2O_STRLIT("Bearer"));
        log_refusal(401, "missing or wrong bearer token");
        send_json_error(req, 401, "Unauthorized", "missing or wrong bearer token");
        return 0;
    }
    if (route == AGENT_ROUTE_HEALTH) {
        static const char ok[] = "{\"status\":\"ok\"}";
        send_inline(req, 200, "OK", ok, sizeof(ok) - 1);
        return 0;
    }
    if (a->jobs >= MAX_JOBS) {
        send_json_error(req, 503, "Service Unavailable", "too many requests in flight");
        return 0;
    }

    struct reqctx *c = hp_xcalloc(1, sizeof(*c));
    c->agent = a;
    c->fd = -1;
    c->route = route;
    c->head = head;
    memcpy(c->build_id, build_id, sizeof(build_id));
    size_t vlen = 0;
    int r = 0;
    const char *bad = NULL;
    switch (route) {
    case AGENT_ROUTE_DUMPS:
    case AGENT_ROUTE_NEWEST:
        r = agent_query_get(qs, qlen, "prefix", c->arg, sizeof(c->arg), &vlen);
        if (r == 1)
            c->argkind = ARG_NAME;
        break;
    case AGENT_ROUTE_FILE: {
        char path[AGENT_QUERY_MAX + 1];
        int rn = agent_query_get(qs, qlen, "name", c->arg, sizeof(c->arg), &vlen);
        int rp = agent_query_get(qs, qlen, "path", path, sizeof(path), &vlen);
        r = rn < 0 ? rn : rp < 0 ? rp : 0;
        if (r == 0 && rn == rp)
            bad = "give exactly one of name= or path=";
        else if (rp == 1) {
            memcpy(c->arg, path, sizeof(path));
            c->argkind = ARG_PATH;
        } else
            c->argkind = ARG_NAME;
        break;
    }
    case AGENT_ROUTE_DELETE:
        r = agent_query_get(qs, qlen, "path", c->arg, sizeof(c->arg), &vlen);
        if (r == 0 || (r == 1 && c->arg[0] != '/'))
            bad = "path= must be an absolute path";
        c->argkind = ARG_PATH;
        break;
    case AGENT_ROUTE_IDENTITY:
        r = agent_query_get(qs, qlen, "path", c->arg, sizeof(c->arg), &vlen);
        if (r == 0 || (r == 1 && c->arg[0] != '/'))
            bad = "path= must be an absolute path";
        c->argkind = ARG_PATH;
        break;
    default:
        break;
    }
    if (r < 0 || bad) {
        send_json_error(req, 400, "Bad Request",
                        bad ? bad : r == HP_ETOOBIG ? "query value too long" : "malformed query string");
        free(c);
        return 0;
    }
    struct slot *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), slot_dispose_cb);
    s->c = c;
    c->req = req;
    c->busy = true;
    a->jobs++;
    if (uv_queue_work(&a->loop, &c->work, work_cb, after_work_cb) != 0) {
        a->jobs--;
        c->busy = false;
        send_json_error(req, 503, "Service Unavailable", "cannot queue work");
    }
    return 0;
}

/* ---- housekeeping ---- */

static void keep_work_cb(uv_work_t *w)
{
    struct agent *a = hp_container_of(w, struct agent, keep_work);
    struct hp_buf err = HP_BUF_INIT(0);
    int r = agent_dumps_prune(&a->folders, a->cfg->keep, &err);
    if (r < 0) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, err.len ? err.data : hp_strerror(r));
        hp_log_warn("agent", "err=%s msg=\"housekeeping failed\"", v.data);
        hp_buf_release(&v);
    }
    hp_buf_release(&err);
}

static void keep_done_cb(uv_work_t *w, int status)
{
    struct agent *a = hp_container_of(w, struct agent, keep_work);
    a->keep_busy = false;
}

static void keep_timer_cb(uv_timer_t *t)
{
    struct agent *a = hp_container_of(t, struct agent, keep_timer);
    if (a->keep_busy)
        return;
    if (uv_queue_work(&a->loop, &a->keep_work, keep_work_cb, keep_done_cb) == 0)
        a->keep_busy = true;
}

/* ---- connections ---- */

/* h2o_uv_socket_create() takes over handle->data, so the agent is found
 * through the struct that embeds the handle instead. */
struct conn {
    uv_tcp_t tcp;
    struct agent *agent;
    struct conn *prev, *next; /* newest first */
    bool shut;
};

static void conn_close_cb(uv_handle_t *h)
{
    struct conn *c = hp_container_of((uv_tcp_t *)h, struct conn, tcp);
    struct agent *a = c->agent;
    if (c->prev)
        c->prev->next = c->next;
    else if (a->conns_head == c)
        a->conns_head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else if (a->conns_tail == c)
        a->conns_tail = c->prev;
    a->conns--;
    free(c);
}

static void on_accept_cb(uv_stream_t *listener, int status)
{
    struct agent *a = listener->data;
    if (status != 0)
        return;
    struct conn *c = hp_xcalloc(1, sizeof(*c));
    uv_tcp_init(&a->loop, &c->tcp);
    c->agent = a;
    a->conns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
        return;
    }
    if (a->conns > MAX_CONNS) {
        struct conn *old = a->conns_tail;
        while (old && old->shut)
            old = old->prev;
        uv_os_fd_t fd;
        if (!old || uv_fileno((uv_handle_t *)&old->tcp, &fd) != 0) {
            uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
            return;
        }
        /* h2o sees the read fail and closes it through its own path. */
        (void)shutdown(fd, SHUT_RDWR);
        old->shut = true;
    }
    c->next = a->conns_head;
    if (a->conns_head)
        a->conns_head->prev = c;
    else
        a->conns_tail = c;
    a->conns_head = c;
    h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, conn_close_cb);
    h2o_accept(&a->accept_ctx, sock);
}

static void signal_cb(uv_signal_t *sig, int signum)
{
    struct agent *a = sig->data;
    hp_log_info("agent", "signal=%d msg=\"stopping\"", signum);
    uv_stop(&a->loop);
}

/* --tls-cert/--tls-key: a server context for TLS 1.2 and newer, the key
 * checked against the certificate now so a mismatch stops the start. */
static int tls_setup(struct agent *a, const struct agent_config *cfg, struct hp_buf *err)
{
    const char *key = cfg->tls_key ? cfg->tls_key : cfg->tls_cert;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        hp_err_printf(err, "TLS: cannot create a context");
        return HP_EUSAGE;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
    char why[256] = "";
    int r = 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
        ERR_error_string_n(ERR_get_error(), why, sizeof(why));
        hp_err_printf(err, "--tls-cert %s: %s", cfg->tls_cert, why);
        r = HP_EUSAGE;
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        ERR_error_string_n(ERR_get_error(), why, sizeof(why));
        hp_err_printf(err, "--tls-key %s: %s", key, why);
        r = HP_EUSAGE;
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        hp_err_printf(err, "--tls-key %s does not belong to --tls-cert %s", key, cfg->tls_cert);
        r = HP_EUSAGE;
    }
    ERR_clear_error();
    if (r < 0) {
        SSL_CTX_free(ctx);
        return r;
    }
    a->ssl_ctx = ctx;
    return 0;
}

static int read_token(struct agent *a, const char *path, struct hp_buf *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, TOKEN_MAX, &data, &len, err);
    if (r < 0)
        return r;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
        len--;
    if (len == 0) {
        free(data);
        hp_err_printf(err, "%s: token file is empty", path);
        return HP_EUSAGE;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)data[i] <= ' ' || data[i] == 0x7f) {
            free(data);
            hp_err_printf(err, "%s: token must be one line of printable characters", path);
            return HP_EUSAGE;
        }
    a->token = data;
    a->token_len = len;
    return 0;
}

/* An agent left running at exit stays reachable from here (leak checkers
 * then see memory still in use, not lost). */
static struct agent *abandoned;

int agent_run(const struct agent_config *cfg, struct hp_buf *err)
{
    struct agent *a = hp_xcalloc(1, sizeof(*a));
    struct sockaddr_storage addr;
    int r;
    a->cfg = cfg;
    r = uv_loop_init(&a->loop);
    if (r != 0) {
        hp_err_printf(err, "uv_loop_init: %s", uv_strerror(r));
        free(a);
        return HP_EUSAGE;
    }
    r = agent_folders_open(&a->folders, cfg->dumps, err);
    if (r < 0)
        goto out;
    if (cfg->token_file && (r = read_token(a, cfg->token_file, err)) < 0)
        goto out;
    r = hp_hostport_parse(cfg->listen, "--listen", &addr, err);
    if (r < 0)
        goto out;
    /* Anyone who reaches the port can read dumps and binaries: off this
     * host only with a token, or when the operator says so explicitly. */
    if (!a->token && !hp_addr_is_loopback(&addr) && !cfg->insecure_listen) {
        hp_err_printf(err, "--listen %s is reachable from other hosts and there is no "
                           "--token-file; give one (or --insecure-listen to allow it)",
                      cfg->listen);
        r = HP_EUSAGE;
        goto out;
    }
    a->bin = agent_binidx_new(&a->folders, cfg->binaries, cfg->pid_file);

    h2o_config_init(&a->h2o_config);
    a->h2o_config.max_request_entity_size = 0; /* read-only: any body is refused (413) */
    /* Headers (before any token check) and idle keep-alive end after this. */
    a->h2o_config.http1.req_timeout = 5000;
    a->h2o_config.server_name = h2o_iovec_init(H2O_STRLIT("heapfleet-agent"));
    h2o_hostconf_t *host = h2o_config_register_host(&a->h2o_config,
                                                    h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *pc = h2o_config_register_path(host, "/", 0);
    struct handler *h = (struct handler *)h2o_create_handler(pc, sizeof(*h));
    h->super.on_req = on_req_cb;
    h->agent = a;
    if (cfg->tls_cert) {
        r = tls_setup(a, cfg, err);
        if (r < 0)
            goto out;
    }
    h2o_context_init(&a->h2o_ctx, &a->loop, &a->h2o_config);
    a->accept_ctx.ctx = &a->h2o_ctx;
    a->accept_ctx.ssl_ctx = a->ssl_ctx; /* h2o runs the handshake on accept */
    a->accept_ctx.hosts = a->h2o_config.hosts;
    a->h2o_ready = true;

    uv_tcp_init(&a->loop, &a->listener);
    a->listener.data = a;
    r = uv_tcp_bind(&a->listener, (struct sockaddr *)&addr, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&a->listener, 128, on_accept_cb);
    if (r != 0) {
        hp_err_printf(err, "--listen %s: %s", cfg->listen, uv_strerror(r));
        r = HP_ERR(-r);
        goto out;
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    char ip[64] = "?";
    int port = 0;
    uv_tcp_getsockname(&a->listener, (struct sockaddr *)&bound, &blen);
    if (bound.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&bound, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&bound, ip, sizeof(ip));
        port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }

    uv_signal_init(&a->loop, &a->sigint);
    uv_signal_init(&a->loop, &a->sigterm);
    a->sigint.data = a->sigterm.data = a;
    uv_signal_start(&a->sigint, signal_cb, SIGINT);
    uv_signal_start(&a->sigterm, signal_cb, SIGTERM);
    signal(SIGPIPE, SIG_IGN);
    if (cfg->keep > 0) {
        uv_timer_init(&a->loop, &a->keep_timer);
        a->keep_timer.data = a;
        uv_timer_start(&a->keep_timer, keep_timer_cb, 0, (uint64_t)cfg->keep_every_s * 1000);
    }
    hp_log_info("agent", "addr=%s%s%s:%d folders=%zu token=%s tls=%s keep=%u msg=\"listening\"",
                bound.ss_family == AF_INET6 ? "[" : "", ip,
                bound.ss_family == AF_INET6 ? "]" : "", port, a->folders.n,
                a->token ? "yes" : "no", a->ssl_ctx ? "yes" : "no", cfg->keep);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    r = 0;
out:
    /* Orderly stop: our handles, then h2o's (its timers close in
     * h2o_context_dispose), then let close callbacks and in-flight work
     * finish. Connections still open after a second are abandoned: the
     * process is exiting anyway. */
    if (a->listener.data)
        uv_close((uv_handle_t *)&a->listener, NULL);
    if (a->sigint.data) {
        uv_close((uv_handle_t *)&a->sigint, NULL);
        uv_close((uv_handle_t *)&a->sigterm, NULL);
    }
    if (cfg->keep > 0 && a->keep_timer.data)
        uv_close((uv_handle_t *)&a->keep_timer, NULL);
    if (a->h2o_ready) {
        for (int i = 0; i < 100 && (a->conns > 0 || a->jobs > 0 || a->keep_busy); i++)
            uv_run(&a->loop, UV_RUN_NOWAIT), uv_sleep(10);
        if (a->conns > 0 || a->jobs > 0 || a->keep_busy) {
            /* A client still downloading after the grace period: h2o cannot
             * dispose of a context with live connections, and the process
             * is about to exit, so leave it all to the kernel. */
            hp_log_warn("agent", "connections=%u msg=\"exiting with transfers in flight\"",
                        a->conns);
            abandoned = a;
            return r;
        }
        h2o_context_dispose(&a->h2o_ctx);
        h2o_config_dispose(&a->h2o_config);
    }
    for (int i = 0; i < 100 && uv_run(&a->loop, UV_RUN_NOWAIT) != 0; i++)
        uv_sleep(10);
    if (uv_loop_close(&a->loop) != 0) {
        hp_log_warn("agent", "msg=\"loop still busy at exit\"");
        abandoned = a; /* handles still reference a: keep it rather than free under them */
        return r;
    }
    agent_binidx_free(a->bin);
    agent_folders_close(&a->folders);
    SSL_CTX_free(a->ssl_ctx);
    free(a->token);
    free(a);
    return r;
}
