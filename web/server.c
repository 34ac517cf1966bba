/* The h2o side of the web server: listener, connections, auth, static files,
 * and the hand-off of data requests to worker threads.
 *
 * Everything in this file runs on the loop thread. A data request becomes a
 * `struct job`: validated on the loop (web_api_prepare), run on a worker
 * (uv_queue_work -> web_api_run), answered back on the loop. The h2o request
 * may die while its job runs (the client hung up); a slot allocated in the
 * request's pool with a dispose callback tells the job so, and the result is
 * dropped instead of written to freed memory.
 *
 * A POST to /api/v1/nodes/NAME/snapshot is a job too, with a first phase on
 * the loop: the server's poller (web_config.poll_now) polls the node while
 * the job waits on the `polls` list, and its callback either answers (the
 * poll failed) or queues the job to read back the snapshot it stored. No
 * request body is ever read, for POST either.
 *
 * Shutdown, in order: close the listener, cancel queued jobs and wait for the
 * running ones and for the poller's callbacks, shut down every connection's socket so h2o closes it through
 * its own error path (h2o 2.2 cannot drop idle keep-alive connections
 * itself), then dispose the h2o context. We dispose it by hand rather than
 * with h2o_context_dispose() because that function calls uv_run() on the
 * loop, and uv_run is not reentrant: we are inside one of its callbacks. The
 * server struct is freed one loop iteration later, after libuv has run the
 * close callbacks of the timers h2o embedded in it. */
#include <h2o.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <uv.h>
#include <zlib.h>

#include "web/web-internal.h"

#define WEB_MAX_CONNECTIONS 1024
/* Whatever max_jobs is, /metrics (no token needed) may hold at most this
 * share of the workers, so a flood of it cannot starve data requests. */
#define WEB_METRICS_SHARE 4
#define WEB_GZIP_MIN 1024

struct conn {
    uv_tcp_t tcp; /* first: h2o's close callback hands us this handle */
    struct web_server *s;
    struct conn *prev, *next; /* newest first: the list's tail is the oldest */
    bool shut;
};

struct job {
    uv_work_t work;
    struct web_server *s;
    h2o_req_t *req;       /* NULL once h2o disposed the request */
    struct job **slot;    /* in req->pool; cleared when the job is done */
    struct job *prev, *next;  /* s->jobs, or s->polls while polling */
    bool metrics;
    bool gzip_ok;
    bool gzipped;
    uint64_t t0;
    struct web_stats stats; /* copy for /metrics, taken on the loop */
    struct web_request r;
};

struct web_handler {
    h2o_handler_t super;
    struct web_server *s;
    int kind;
};

enum { H_API, H_METRICS, H_STATIC_GUARD, H_NOTFOUND };

struct web_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listener_open;
    uv_timer_t final_timer;
    h2o_globalconf_t config;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    bool ctx_live;
    char *listen, *static_dir, *token, *allowed_hosts;
    char *static_real; /* realpath of static_dir: no file is served from outside it */
    unsigned max_jobs, metrics_running, max_conns;
    size_t max_body;
    const struct web_source_ops *src;
    void *src_ctx;
    int port;
    struct conn *conns, *oldest;
    size_t nconns;
    struct job *jobs;
    struct job *polls; /* POSTs waiting for the poller's callback */
    web_poll_now_fn *poll_now;
    void *poll_ctx;
    struct web_stats stats;
    struct web_verdicts *verdicts; /* /metrics' verdict series, cached per round */
    char *rules;                   /* web_config.rules, checked at start */
    bool stopping;
    web_server_stopped_cb *stopped_cb;
    void *stopped_arg;
};

const double web_latency_bounds[10] = { 0.001, 0.005, 0.01, 0.025, 0.05,
                                        0.1,   0.25,  0.5,  1,     5 };

/* The UI's files: the installed copy when there is one, else the source
 * tree's (a build run from its build folder). Both paths come from meson. */
const char *web_static_dir_default(void)
{
#if defined(WEB_STATIC_INSTALLED) && defined(WEB_STATIC_SRC)
    struct stat st;
    if (stat(WEB_STATIC_INSTALLED "/index.html", &st) == 0)
        return WEB_STATIC_INSTALLED;
    return WEB_STATIC_SRC;
#else
    return NULL;
#endif
}

void web_config_init(struct web_config *c)
{
    memset(c, 0, sizeof(*c));
    c->listen = "127.0.0.1:7070";
    c->static_dir = web_static_dir_default();
    c->max_jobs = 16;
    c->max_body = (size_t)256 << 20;
}

int web_token_read(const char *path, char **ret, struct hp_buf *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, 4096, &data, &len, err);
    if (r < 0)
        return r;
    size_t n = strcspn(data, "\r\n");
    while (n > 0 && (data[n - 1] == ' ' || data[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)data[i] <= 0x20 || (unsigned char)data[i] >= 0x7f) {
            hp_err_printf(err, "%s: the token must be printable ASCII without spaces", path);
            free(data);
            return HP_EPARSE;
        }
    if (n == 0) {
        hp_err_printf(err, "%s: empty token", path);
        free(data);
        return HP_EPARSE;
    }
    data[n] = '\0';
    *ret = data;
    return 0;
}

/* ---- responses ------------------------------------------------------------ */

static const char *reason_of(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Response";
    }
}

static void count_status(struct web_server *s, int status)
{
    int cls = status / 100;
    if (cls >= 1 && cls <= 5)
        s->stats.requests[cls]++;
}

static void body_dispose(void *p)
{
    free(*(char **)p);
}

static void add_header(h2o_req_t *req, const h2o_token_t *tok, const char *v)
{
    h2o_add_header(&req->pool, &req->res.headers, tok, NULL, v, strlen(v));
}

/* Send `body` (malloc'd, ownership taken; may be NULL when len is 0).
 * allow: the Allow header of a 405 (NULL: GET). */
static void respond(struct web_server *s, h2o_req_t *req, int status, const char *ctype,
                    char *body, size_t len, bool gzipped, const char *disposition,
                    const char *allow)
{
    static h2o_generator_t generator = { NULL, NULL };
    count_status(s, status);
    req->res.status = status;
    req->res.reason = reason_of(status);
    add_header(req, H2O_TOKEN_CONTENT_TYPE, ctype);
    add_header(req, H2O_TOKEN_CACHE_CONTROL, "no-store");
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"), 0,
                          NULL, H2O_STRLIT("nosniff"));
    add_header(req, H2O_TOKEN_VARY, "Accept-Encoding");
    if (gzipped)
        add_header(req, H2O_TOKEN_CONTENT_ENCODING, "gzip");
    if (disposition)
        add_header(req, H2O_TOKEN_CONTENT_DISPOSITION, disposition);
    if (status == 401)
        add_header(req, H2O_TOKEN_WWW_AUTHENTICATE, "Bearer realm=\"heapfleet\"");
    if (status == 405)
        add_header(req, H2O_TOKEN_ALLOW, allow ? allow : "GET");
    if (status == 503)
        add_header(req, H2O_TOKEN_RETRY_AFTER, "1");
    char **holder = h2o_mem_alloc_shared(&req->pool, sizeof(*holder), body_dispose);
    *holder = body;
    req->res.content_length = len;
    h2o_start_response(req, &generator);
    h2o_iovec_t iov = h2o_iovec_init(body ? body : "", len);
    h2o_send(req, &iov, 1, H2O_SEND_STATE_FINAL);
}

static void respond_error(struct web_server *s, h2o_req_t *req, int status, const char *msg)
{
    struct hp_buf b = HP_BUF_INIT(0);
    hp_buf_printf(&b, "{\"error\":");
    query_json_str(&b, msg);
    hp_buf_printf(&b, ",\"status\":%d}\n", status);
    size_t len;
    char *p = hp_buf_detach(&b, &len);
    respond(s, req, status, "application/json", p, len, false, NULL, NULL);
}

/* ---- auth ------------------------------------------------------------------ */

static bool token_ok(const struct web_server *s, h2o_req_t *req)
{
    if (!s->token)
        return true;
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
    if (i < 0)
        return false;
    h2o_iovec_t v = req->headers.entries[i].value;
    return hp_bearer_ok(s->token, strlen(s->token), v.base, v.len);
}

static bool accepts_gzip(h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_ACCEPT_ENCODING, -1);
    if (i < 0)
        return false;
    h2o_iovec_t v = req->headers.entries[i].value;
    for (size_t k = 0; k + 4 <= v.len; k++)
        if (strncasecmp(v.base + k, "gzip", 4) == 0)
            return true;
    return false;
}

/* ---- jobs ------------------------------------------------------------------- */

static void check_stop_progress(struct web_server *s);

/* The request's pool is going away (response done, or the client left):
 * the job must neither answer it nor touch the slot again. */
static void job_slot_dispose(void *p)
{
    struct job **slot = p;
    if (*slot) {
        (*slot)->req = NULL;
        (*slot)->slot = NULL;
    }
}

static void job_unlink(struct job *j)
{
    struct web_server *s = j->s;
    if (j->prev)
        j->prev->next = j->next;
    else
        s->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
}

static void job_free(struct job *j)
{
    if (j->slot)
        *j->slot = NULL;
    web_request_release(&j->r);
    free(j);
}

/* Compress a finished body on the worker (gzip wrapper, fast level): API
 * trees of big profiles are megabytes of repetitive JSON. */
static void job_gzip(struct job *j)
{
    struct hp_buf *b = &j->r.body;
    if (!j->gzip_ok || b->len < WEB_GZIP_MIN || j->r.status != 200)
        return;
    const char *ct = j->r.content_type;
    if (strncmp(ct, "application/json", 16) != 0 && strncmp(ct, "text/", 5) != 0)
        return;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    size_t cap = deflateBound(&z, (uLong)b->len);
    char *out = hp_xmalloc(cap);
    z.next_in = (Bytef *)b->data;
    z.avail_in = (uInt)b->len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    size_t outlen = cap - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END) {
        free(out);
        return;
    }
    hp_buf_release(b);
    b->data = out;
    b->len = outlen;
    b->alloc = cap;
    j->gzipped = true;
}

static void job_work_cb(uv_work_t *w)
{
    struct job *j = hp_container_of(w, struct job, work);
    if (j->metrics)
        web_metrics_run(&j->r, &j->stats);
    else
        web_api_run(&j->r);
    job_gzip(j);
}

static void observe_latency(struct web_server *s, uint64_t t0)
{
    double sec = (double)(hp_now_ns() - t0) / 1e9;
    for (size_t i = 0; i < HP_ARRAY_SIZE(web_latency_bounds); i++)
        if (sec <= web_latency_bounds[i])
            s->stats.lat_bucket[i]++;
    s->stats.lat_sum += sec;
    s->stats.lat_count++;
}

static void job_after_cb(uv_work_t *w, int status)
{
    struct job *j = hp_container_of(w, struct job, work);
    struct web_server *s = j->s;
    job_unlink(j);
    s->stats.jobs_running--;
    if (j->metrics)
        s->metrics_running--;
    if (j->req) {
        if (status == UV_ECANCELED) {
            respond_error(s, j->req, 503, "the server is shutting down");
        } else {
            size_t len;
            char *body = hp_buf_detach(&j->r.body, &len);
            respond(s, j->req, j->r.status, j->r.content_type, body, len, j->gzipped,
                    j->r.disposition, j->r.allow);
            observe_latency(s, j->t0);
        }
    }
    job_free(j);
    if (s->stopping)
        check_stop_progress(s);
}

static struct job *job_new(struct web_server *s, h2o_req_t *req, bool metrics)
{
    struct job *j = hp_xcalloc(1, sizeof(*j));
    j->s = s;
    j->metrics = metrics;
    j->t0 = hp_now_ns();
    j->gzip_ok = accepts_gzip(req);
    web_request_init(&j->r, s->src, s->src_ctx, s->max_body);
    j->r.verdicts = metrics ? s->verdicts : NULL;
    j->r.rules = s->rules;
    j->r.can_poll = s->poll_now != NULL;
    return j;
}

/* Route and validate; 0 when the answer is already sent (j freed). */
static int job_prepare(struct web_server *s, struct job *j, h2o_req_t *req)
{
    const char *path = req->path.base;
    size_t plen = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
    const char *q = req->query_at != SIZE_MAX ? req->path.base + req->query_at + 1 : NULL;
    size_t qlen = q ? req->path.len - req->query_at - 1 : 0;
    if (web_api_prepare(&j->r, path, plen, q, qlen) == 0) {
        size_t len;
        char *body = hp_buf_detach(&j->r.body, &len);
        respond(s, req, j->r.status, j->r.content_type, body, len, false, NULL, j->r.allow);
        job_free(j);
        return 0;
    }
    return 1;
}

/* The job answers req from now on: a slot in the request's pool tells it
 * when the client is gone. */
static void job_attach(struct job *j, h2o_req_t *req)
{
    j->req = req;
    j->slot = h2o_mem_alloc_shared(&req->pool, sizeof(*j->slot), job_slot_dispose);
    *j->slot = j;
}

/* Hand an attached job to a worker. */
static void job_queue(struct web_server *s, struct job *j)
{
    j->prev = NULL;
    j->next = s->jobs;
    if (s->jobs)
        s->jobs->prev = j;
    s->jobs = j;
    s->stats.jobs_running++;
    s->metrics_running += j->metrics;
    int r = uv_queue_work(s->loop, &j->work, job_work_cb, job_after_cb);
    if (r < 0) {
        h2o_req_t *req = j->req;
        job_unlink(j);
        s->stats.jobs_running--;
        s->metrics_running -= j->metrics;
        j->req = NULL;
        job_free(j);
        if (req)
            respond_error(s, req, 500, uv_strerror(r));
    }
}

static int start_job(struct web_server *s, h2o_req_t *req, bool metrics)
{
    struct job *j = job_new(s, req, metrics);
    if (!metrics) {
        if (job_prepare(s, j, req) == 0)
            return 0;
    } else {
        j->stats = s->stats;
        j->stats.connections_open = s->nconns;
    }
    /* Data requests and /metrics have separate budgets: a flood of the
     * unauthenticated /metrics fills only its own (a quarter as many). */
    unsigned metrics_cap = s->max_jobs / WEB_METRICS_SHARE ? s->max_jobs / WEB_METRICS_SHARE : 1;
    unsigned data_running = (unsigned)s->stats.jobs_running - s->metrics_running;
    if (metrics ? s->metrics_running >= metrics_cap : data_running >= s->max_jobs) {
        s->stats.jobs_rejected++;
        job_free(j);
        respond_error(s, req, 503, "too many requests in flight; retry shortly");
        return 0;
    }
    job_attach(j, req);
    job_queue(s, j);
    return 0;
}

/* ---- taking a snapshot now (POST /api/v1/nodes/NAME/snapshot) ---------------- */

static void poll_unlink(struct job *j)
{
    struct web_server *s = j->s;
    if (j->prev)
        j->prev->next = j->next;
    else
        s->polls = j->next;
    if (j->next)
        j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

/* Without a token, only a client on this machine may make the collector
 * poll: reading is harmless enough to open up with --allowed-host, making
 * the fleet dump its heaps is not. */
static bool peer_is_loopback(h2o_req_t *req)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t n = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
    if (n == 0)
        return false;
    if (ss.ss_family == AF_INET)
        return ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24 == 127;
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

/* A browser sends Origin with every POST. One that names another site is a
 * page elsewhere trying to make this server poll through the user's
 * browser (cross-site request forgery: a browser on this machine is a
 * loopback client). No Origin: not a browser's cross-site request. */
static bool origin_ok(h2o_req_t *req)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1);
    if (i < 0)
        return true;
    h2o_iovec_t v = req->headers.entries[i].value;
    static const char *const schemes[] = { "http://", "https://" };
    for (size_t k = 0; k < HP_ARRAY_SIZE(schemes); k++) {
        size_t sl = strlen(schemes[k]);
        if (v.len > sl && strncasecmp(v.base, schemes[k], sl) == 0)
            return v.len - sl == req->authority.len &&
                   strncasecmp(v.base + sl, req->authority.base, req->authority.len) == 0;
    }
    return false;
}

/* The poller's answer (loop thread): a failure is said in words (502: the
 * node failed, not this server), a success is read back on a worker. */
static void poll_done_cb(void *arg, const struct web_poll_outcome *o)
{
    struct job *j = arg;
    struct web_server *s = j->s;
    poll_unlink(j);
    if (!j->req) { /* the client left; the snapshot is stored all the same */
        job_free(j);
        if (s->stopping)
            check_stop_progress(s);
        return;
    }
    if (o->status == 0 && !s->stopping) {
        j->r.poll = *o;
        j->r.poll.error = NULL;
        job_queue(s, j);
        return;
    }
    char secs[32];
    snprintf(secs, sizeof(secs), "%.1f", (double)(o->finished_ms - o->started_ms) / 1000.0);
    if (o->status == HP_ERR(ECANCELED) || o->status == 0) {
        respond_error(s, j->req, 503,
                      o->status ? o->error
                                : "the snapshot was taken, but the server is shutting down");
    } else {
        struct hp_buf b = HP_BUF_INIT(0);
        hp_buf_puts(&b, "{\"error\":");
        char *msg = hp_xasprintf("%s: the poll failed: %s", j->r.p.node,
                                 o->error ? o->error : hp_strerror(o->status));
        query_json_str(&b, msg);
        free(msg);
        hp_buf_puts(&b, ",\"status\":502,\"node\":");
        query_json_str(&b, j->r.p.node);
        hp_buf_printf(&b, ",\"elapsed_ms\":%lld,\"attempts\":%zu,\"seconds\":%s}\n",
                      (long long)(o->finished_ms - o->started_ms), o->nattempts, secs);
        size_t len;
        char *body = hp_buf_detach(&b, &len);
        respond(s, j->req, 502, "application/json", body, len, false, NULL, NULL);
    }
    observe_latency(s, j->t0);
    job_free(j);
    if (s->stopping)
        check_stop_progress(s);
}

static int start_poll(struct web_server *s, h2o_req_t *req)
{
    struct job *j = job_new(s, req, false);
    j->r.post = true;
    if (job_prepare(s, j, req) == 0)
        return 0;
    const char *refuse = NULL;
    if (!s->token && !peer_is_loopback(req))
        refuse = "without a token, only clients on the collector's own machine (loopback) may "
                 "take a snapshot; set --token-file to allow others with the token";
    else if (!origin_ok(req))
        refuse = "a page from another site may not take snapshots here (Origin does not match "
                 "Host)";
    if (refuse) {
        job_free(j);
        respond_error(s, req, 403, refuse);
        return 0;
    }
    if (!s->poll_now) {
        job_free(j);
        respond_error(s, req, 501, "this server polls no nodes (hf-web serves files); the "
                                   "collector's own web server takes snapshots");
        return 0;
    }
    job_attach(j, req);
    j->next = s->polls;
    if (s->polls)
        s->polls->prev = j;
    s->polls = j;
    struct hp_buf err = HP_BUF_INIT(0);
    int rc = s->poll_now(s->poll_ctx, j->r.p.node, poll_done_cb, j, &err);
    if (rc < 0) {
        poll_unlink(j);
        int status = rc == HP_ENOTFOUND           ? 404
                     : rc == HP_ERR(EBUSY)        ? 409
                     : rc == HP_ERR(ECANCELED)    ? 503
                                                  : 500;
        respond_error(s, req, status, err.len ? err.data : hp_strerror(rc));
        job_free(j);
    }
    hp_buf_release(&err);
    return 0;
}

/* ---- handlers --------------------------------------------------------------- */

static bool method_is(h2o_req_t *req, const char *m)
{
    return h2o_memis(req->method.base, req->method.len, m, strlen(m));
}

/* The Host header's name part is an IP literal, localhost, or one of
 * --allowed-host (compared with and without its port). A DNS name that an
 * attacker controls can be pointed at 127.0.0.1 (DNS rebinding): a browser
 * then sends that name, and without a token nothing else stops it. */
static bool host_allowed(const struct web_server *s, h2o_req_t *req)
{
    if (s->token)
        return true;
    h2o_iovec_t hv = req->authority;
    if (hv.len == 0 || hv.len > 255)
        return false;
    char host[256];
    memcpy(host, hv.base, hv.len);
    host[hv.len] = '\0';
    char name[256];
    const char *end;
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end)
            return false;
        size_t n = (size_t)(end - host - 1);
        memcpy(name, host + 1, n);
        name[n] = '\0';
        struct in6_addr a6;
        return inet_pton(AF_INET6, name, &a6) == 1;
    }
    end = strchr(host, ':');
    size_t n = end ? (size_t)(end - host) : strlen(host);
    memcpy(name, host, n);
    name[n] = '\0';
    struct in_addr a4;
    if (inet_pton(AF_INET, name, &a4) == 1 || strcasecmp(name, "localhost") == 0)
        return true;
    if (!s->allowed_hosts)
        return false;
    for (const char *p = s->allowed_hosts; *p;) {
        size_t len = strcspn(p, ",");
        if ((len == strlen(host) && strncasecmp(p, host, len) == 0) ||
            (len == n && strncasecmp(p, name, len) == 0))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* The file the static handler would serve resolves (symlinks followed) to a
 * place inside the static folder. h2o's file handler follows symlinks, so a
 * link in the folder could otherwise serve any file the process can read. */
static bool static_path_inside(const struct web_server *s, h2o_iovec_t p)
{
    if (!s->static_real)
        return false;
    char *full = hp_xasprintf("%s%.*s", s->static_dir, (int)p.len, p.base);
    char *real = realpath(full, NULL);
    free(full);
    if (!real)
        return true; /* nothing there: h2o answers 404 itself */
    size_t rl = strlen(s->static_real);
    bool inside = strncmp(real, s->static_real, rl) == 0 && (real[rl] == '/' || real[rl] == '\0');
    free(real);
    return inside;
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct web_handler *h = (struct web_handler *)self;
    struct web_server *s = h->s;
    if (!host_allowed(s, req)) {
        respond_error(s, req, 403,
                      "this server answers only its own address as Host without a token "
                      "(see --allowed-host)");
        return 0;
    }
    if (h->kind == H_STATIC_GUARD) {
        /* Only GET/HEAD reach the file handler; it maps the normalized path
         * under static_dir and never above it (h2o drops "..", and we refuse
         * anything still containing it or a NUL). */
        if (!method_is(req, "GET") && !method_is(req, "HEAD")) {
            respond_error(s, req, 405, "only GET is supported");
            return 0;
        }
        h2o_iovec_t p = req->path_normalized;
        if (memchr(p.base, '\0', p.len) || h2o_strstr(p.base, p.len, H2O_STRLIT("..")) != SIZE_MAX ||
            h2o_strstr(p.base, p.len, H2O_STRLIT("/.")) != SIZE_MAX ||
            !static_path_inside(s, p)) {
            respond_error(s, req, 404, "no such file");
            return 0;
        }
        return -1; /* on to h2o's file handler */
    }
    if (h->kind == H_NOTFOUND) {
        respond_error(s, req, 404, "no such resource (the UI is not configured)");
        return 0;
    }
    /* POST only takes a snapshot (the route table says where); every other
     * API path and /metrics answer GET. */
    bool post = h->kind == H_API && method_is(req, "POST");
    if (!post && !method_is(req, "GET")) {
        static const char msg[] = "{\"error\":\"only GET is supported (and POST to "
                                  "/api/v1/nodes/NAME/snapshot)\",\"status\":405}\n";
        respond(s, req, 405, "application/json", hp_xstrdup(msg), sizeof(msg) - 1, false, NULL,
                h->kind == H_API ? "GET, POST" : "GET");
        return 0;
    }
    if (h->kind == H_API && !token_ok(s, req)) {
        respond_error(s, req, 401, "missing or wrong bearer token");
        return 0;
    }
    if (s->stopping) {
        respond_error(s, req, 503, "the server is shutting down");
        return 0;
    }
    if (post)
        return start_poll(s, req);
    return start_job(s, req, h->kind == H_METRICS);
}

static void add_handler(struct web_server *s, h2o_pathconf_t *pc, int kind)
{
    struct web_handler *h = (struct web_handler *)h2o_create_handler(pc, sizeof(*h));
    h->super.on_req = on_req;
    h->s = s;
    h->kind = kind;
}

/* ---- connections ------------------------------------------------------------ */

static void conn_closed_cb(uv_handle_t *handle)
{
    struct conn *c = (struct conn *)handle;
    struct web_server *s = c->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->oldest = c->prev;
    s->nconns--;
    free(c);
    if (s->stopping)
        check_stop_progress(s);
}

static void plain_close_cb(uv_handle_t *handle)
{
    free(handle);
}

static void on_accept(uv_stream_t *listener, int status)
{
    struct web_server *s = hp_container_of((uv_tcp_t *)listener, struct web_server, listener);
    if (status < 0 || s->stopping)
        return;
    struct conn *c = hp_xcalloc(1, sizeof(*c));
    c->s = s;
    if (uv_tcp_init(s->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, plain_close_cb);
        return;
    }
    /* At the cap, the oldest connection makes room (fair to newcomers: a
     * crowd of slow clients cannot lock everyone else out). Its socket is
     * shut down and h2o closes it through its own error path. */
    if (s->nconns >= s->max_conns) {
        struct conn *old = s->oldest;
        while (old && old->shut)
            old = old->prev;
        uv_os_fd_t fd;
        if (!old || uv_fileno((uv_handle_t *)&old->tcp, &fd) != 0) {
            uv_close((uv_handle_t *)&c->tcp, plain_close_cb);
            return;
        }
        (void)shutdown(fd, SHUT_RDWR);
        old->shut = true;
        s->stats.connections_evicted++;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    else
        s->oldest = c;
    s->conns = c;
    s->nconns++;
    s->stats.connections_total++;
    h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, conn_closed_cb);
    h2o_accept(&s->accept_ctx, sock);
}

/* ---- start / stop ----------------------------------------------------------- */

static void start_failed_closed_cb(uv_handle_t *h)
{
    struct web_server *s = hp_container_of((uv_tcp_t *)h, struct web_server, listener);
    free(s->token);
    free(s->static_dir);
    free(s->static_real);
    free(s->allowed_hosts);
    web_verdicts_free(s->verdicts);
    free(s->rules);
    free(s);
}

int web_server_start(uv_loop_t *loop, const struct web_config *cfg,
                     const struct web_source_ops *src, void *src_ctx, struct web_server **ret,
                     struct hp_buf *err)
{
    struct sockaddr_storage ss;
    int r = hp_hostport_parse(cfg->listen ? cfg->listen : "127.0.0.1:7070", "--listen", &ss, err);
    if (r < 0)
        return r;
    if (cfg->rules) {
        /* Refused here, once, rather than on every request. */
        struct query_rules *check = NULL;
        r = query_rules_builtin(&check, err);
        if (r == 0)
            r = query_rules_parse(check, cfg->rules, strlen(cfg->rules),
                                  cfg->rules_origin ? cfg->rules_origin : "--rules", err);
        query_rules_free(check);
        if (r < 0)
            return r;
    }
    struct web_server *s = hp_xcalloc(1, sizeof(*s));
    s->rules = cfg->rules ? hp_xstrdup(cfg->rules) : NULL;
    s->loop = loop;
    s->src = src;
    s->src_ctx = src_ctx;
    s->poll_now = cfg->poll_now;
    s->poll_ctx = cfg->poll_ctx;
    s->max_jobs = cfg->max_jobs ? cfg->max_jobs : 16;
    s->max_body = cfg->max_body ? cfg->max_body : (size_t)256 << 20;
    s->token = cfg->token ? hp_xstrdup(cfg->token) : NULL;
    s->static_dir = cfg->static_dir ? hp_xstrdup(cfg->static_dir) : NULL;
    s->static_real = cfg->static_dir ? realpath(cfg->static_dir, NULL) : NULL;
    s->allowed_hosts = cfg->allowed_hosts ? hp_xstrdup(cfg->allowed_hosts) : NULL;
    s->max_conns = cfg->max_connections ? cfg->max_connections : WEB_MAX_CONNECTIONS;
    s->stats.started_ms = (uint64_t)hp_wall_ms();
    s->verdicts = web_verdicts_new();

    r = uv_tcp_init(loop, &s->listener);
    if (r < 0) {
        hp_err_printf(err, "listen: %s", uv_strerror(r));
        free(s->token);
        free(s->static_dir);
        free(s->static_real);
        free(s->allowed_hosts);
        web_verdicts_free(s->verdicts);
    free(s->rules);
        free(s);
        return HP_ERR(EINVAL);
    }
    s->listener_open = true;
    r = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->listener, 128, on_accept);
    if (r < 0) {
        hp_err_printf(err, "listen on %s: %s", cfg->listen ? cfg->listen : "127.0.0.1:7070",
                      uv_strerror(r));
        /* Nothing of h2o exists yet; the stop path closes the listener and
         * frees s once libuv has run its close callback. */
        s->stopping = true;
        s->listener_open = false;
        uv_close((uv_handle_t *)&s->listener, start_failed_closed_cb);
        return r == UV_EADDRINUSE ? HP_ERR(EADDRINUSE) : HP_ERR(EINVAL);
    }
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);

    h2o_config_init(&s->config);
    s->config.server_name = h2o_iovec_init(H2O_STRLIT("heapfleet"));
    /* No route takes a body (the one POST takes none): a request body is
     * refused (413) from its Content-Length, before any of it is read or
     * buffered. */
    s->config.max_request_entity_size = 0;
    /* Headers must arrive, and idle keep-alive ends, within this. */
    s->config.http1.req_timeout = cfg->header_timeout_ms ? cfg->header_timeout_ms : 10000;
    h2o_hostconf_t *host =
        h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    /* h2o picks the first registered path that matches: specific ones first. */
    add_handler(s, h2o_config_register_path(host, "/api", 0), H_API);
    add_handler(s, h2o_config_register_path(host, "/metrics", 0), H_METRICS);
    h2o_pathconf_t *root = h2o_config_register_path(host, "/", 0);
    if (s->static_dir) {
        static const char *index_files[] = { "index.html", NULL };
        /* The UI loads only its own files and talks only to this server. */
        static h2o_iovec_t csp_name = { H2O_STRLIT("content-security-policy") };
        static h2o_iovec_t nosniff_name = { H2O_STRLIT("x-content-type-options") };
        static h2o_iovec_t referrer_name = { H2O_STRLIT("referrer-policy") };
        static h2o_headers_command_t cmds[] = {
            { H2O_HEADERS_CMD_SET, &csp_name,
              { H2O_STRLIT("default-src 'none'; script-src 'self'; connect-src 'self'; "
                           "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
                           "frame-ancestors 'none'; base-uri 'none'; form-action 'none'") } },
            { H2O_HEADERS_CMD_SET, &nosniff_name, { H2O_STRLIT("nosniff") } },
            { H2O_HEADERS_CMD_SET, &referrer_name, { H2O_STRLIT("no-referrer") } },
            { H2O_HEADERS_CMD_NULL, NULL, { NULL, 0 } },
        };
        add_handler(s, root, H_STATIC_GUARD);
        h2o_file_register(root, s->static_dir, index_files, NULL, 0);
        h2o_headers_register(root, cmds);
    } else {
        add_handler(s, root, H_NOTFOUND);
    }
    h2o_context_init(&s->ctx, loop, &s->config);
    s->ctx_live = true;
    s->accept_ctx.ctx = &s->ctx;
    s->accept_ctx.hosts = s->config.hosts;
    *ret = s;
    return 0;
}

int web_server_port(const struct web_server *s)
{
    return s->port;
}

static void final_closed_cb(uv_handle_t *h)
{
    struct web_server *s = hp_container_of((uv_timer_t *)h, struct web_server, final_timer);
    web_server_stopped_cb *cb = s->stopped_cb;
    void *arg = s->stopped_arg;
    free(s->token);
    free(s->static_dir);
    free(s->static_real);
    free(s->allowed_hosts);
    web_verdicts_free(s->verdicts);
    free(s->rules);
    free(s);
    if (cb)
        cb(arg);
}

static void final_timer_cb(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, final_closed_cb);
}

static void context_dispose(h2o_context_t *ctx);

/* Runs in the timers phase, never inside libuv's close phase: the handles
 * h2o closes here finish in this iteration's close phase, and the final
 * timer (1 ms, so not in this iteration's timer pass) frees the server in a
 * later one. */
static void dispose_timer_cb(uv_timer_t *t)
{
    struct web_server *s = hp_container_of(t, struct web_server, final_timer);
    context_dispose(&s->ctx);
    h2o_config_dispose(&s->config);
    uv_timer_start(&s->final_timer, final_timer_cb, 1, 0);
}

/* h2o_context_dispose() minus its nested uv_run (see the file comment). */
static void context_dispose(h2o_context_t *ctx)
{
    h2o_globalconf_t *config = ctx->globalconf;
    for (size_t i = 0; config->hosts[i] != NULL; ++i) {
        h2o_hostconf_t *hostconf = config->hosts[i];
        for (size_t j = 0; j != hostconf->paths.size; ++j)
            h2o_context_dispose_pathconf_context(ctx, hostconf->paths.entries + j);
        h2o_context_dispose_pathconf_context(ctx, &hostconf->fallback_path);
    }
    free(ctx->_pathconfs_inited.entries);
    free(ctx->_module_configs);
    /* request_shutdown linked HTTP/2's GOAWAY resend timer into
     * one_sec_timeout; with every connection gone it has nothing to do. */
    if (h2o_timeout_is_linked(&ctx->http2._graceful_shutdown_timeout))
        h2o_timeout_unlink(&ctx->http2._graceful_shutdown_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->zero_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->one_sec_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->hundred_ms_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->handshake_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->http1.req_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->http2.idle_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->http2.graceful_shutdown_timeout);
    h2o_timeout_dispose(ctx->loop, &ctx->proxy.io_timeout);
    h2o_filecache_destroy(ctx->filecache);
    ctx->filecache = NULL;
    for (size_t i = 0; i != ctx->storage.size; ++i)
        if (ctx->storage.entries[i].dispose)
            ctx->storage.entries[i].dispose(ctx->storage.entries[i].data);
    free(ctx->storage.entries);
    h2o_multithread_unregister_receiver(ctx->queue, &ctx->receivers.hostinfo_getaddr);
    h2o_multithread_destroy_queue(ctx->queue);
    if (ctx->_timestamp_cache.value != NULL)
        h2o_mem_release_shared(ctx->_timestamp_cache.value);
}

static void listener_closed_cb(uv_handle_t *h)
{
    struct web_server *s = hp_container_of((uv_tcp_t *)h, struct web_server, listener);
    s->listener_open = false;
    check_stop_progress(s);
}

static void check_stop_progress(struct web_server *s)
{
    if (!s->ctx_live || s->jobs || s->polls || s->listener_open)
        return;
    /* Running jobs are done: make every connection's next read fail so h2o
     * closes it itself (its conn state stays consistent). */
    for (struct conn *c = s->conns; c; c = c->next) {
        if (c->shut)
            continue;
        uv_os_fd_t fd;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
            (void)shutdown(fd, SHUT_RDWR);
        c->shut = true;
    }
    if (s->conns)
        return;
    s->ctx_live = false;
    uv_timer_init(s->loop, &s->final_timer);
    uv_timer_start(&s->final_timer, dispose_timer_cb, 0, 0);
}

void web_server_stop(struct web_server *s, web_server_stopped_cb *cb, void *arg)
{
    if (s->stopping)
        return;
    s->stopping = true;
    s->stopped_cb = cb;
    s->stopped_arg = arg;
    h2o_context_request_shutdown(&s->ctx);
    for (struct job *j = s->jobs; j; j = j->next)
        (void)uv_cancel((uv_req_t *)&j->work);
    uv_close((uv_handle_t *)&s->listener, listener_closed_cb);
}
