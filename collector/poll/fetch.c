/* HTTP fetching: libcurl's multi socket API driven by the libuv loop.
 *
 * The wiring follows curl's docs/examples/multi-uv.c, hardened:
 *  - one uv_poll_t per socket, attached with curl_multi_assign and stopped
 *    synchronously on CURL_POLL_REMOVE (so a recycled fd never meets a stale
 *    watcher); its memory goes in the close callback;
 *  - the curl timer maps to one uv_timer_t, 0 ms becoming 1 ms so that
 *    curl_multi_socket_action is never re-entered from its own callback;
 *  - curl_multi_info_read is drained after every socket action;
 *  - every transfer is limited: http/https only (redirects too), connect and
 *    total timeouts, CURLOPT_MAXFILESIZE_LARGE for honest Content-Lengths and
 *    a write callback that stops at the cap for the rest;
 *  - curl_multi_cleanup runs while the poll contexts are still alive, since
 *    it may call the socket callback.
 *
 * This is the only file that sees CURLcode: it turns curl's failures into
 * HP_EHTTP/HP_ETOOBIG plus a sentence a person can act on. Loop thread only. */
#include "collector/poll/poll.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct poll_fetcher {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct fetch *active; /* doubly linked list of transfers in flight */
    size_t nactive;
    size_t pending_closes; /* timer + socket handles not yet closed */
    bool closing;
};

struct fetch {
    struct poll_fetcher *f;
    CURL *easy;
    struct fetch *prev, *next;
    poll_fetch_done_cb *cb;
    void *arg;
    struct hp_buf body;
    bool too_big;
    bool had_auth;
    uint64_t max_bytes;
    uint32_t total_timeout_ms;
    uint64_t t0_ns;
    struct curl_slist *headers;
    char errbuf[CURL_ERROR_SIZE];
};

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    struct poll_fetcher *f;
};

static void fetcher_unref(struct poll_fetcher *f)
{
    if (--f->pending_closes == 0 && f->closing)
        free(f);
}

static void sock_close_cb(uv_handle_t *h)
{
    struct sock_ctx *sc = hp_container_of((uv_poll_t *)h, struct sock_ctx, poll);
    struct poll_fetcher *f = sc->f;
    free(sc);
    fetcher_unref(f);
}

static void timer_close_cb(uv_handle_t *h)
{
    struct poll_fetcher *f = hp_container_of((uv_timer_t *)h, struct poll_fetcher, timer);
    fetcher_unref(f);
}

/* The failure in words, from curl's code, the error buffer and what arrived. */
static void describe_failure(struct fetch *fe, CURLcode code, struct poll_fetch_result *res)
{
    const char *detail = fe->errbuf[0] ? fe->errbuf : curl_easy_strerror(code);
    switch (code) {
    case CURLE_COULDNT_CONNECT:
        snprintf(res->error, sizeof(res->error), "connection refused or unreachable (%s)", detail);
        res->retryable = true;
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        snprintf(res->error, sizeof(res->error), "cannot resolve host (%s)", detail);
        res->retryable = true;
        break;
    case CURLE_OPERATION_TIMEDOUT:
        snprintf(res->error, sizeof(res->error),
                 "timeout after %.1f s with %zu body bytes received (%s)",
                 (double)res->elapsed_ms / 1000.0, fe->body.len, detail);
        res->retryable = true;
        break;
    case CURLE_GOT_NOTHING:
        snprintf(res->error, sizeof(res->error),
                 "no HTTP reply: the connection closed before a response (a TLS port needs "
                 "tls=yes) (%s)",
                 detail);
        res->retryable = true;
        break;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        snprintf(res->error, sizeof(res->error),
                 "connection closed mid-transfer after %zu body bytes (%s)", fe->body.len, detail);
        res->retryable = true;
        break;
    case CURLE_TOO_MANY_REDIRECTS:
        snprintf(res->error, sizeof(res->error), "redirect loop (%s)", detail);
        break;
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(res->error, sizeof(res->error),
                 "body larger than the %llu byte limit (announced by Content-Length)",
                 (unsigned long long)fe->max_bytes);
        res->status = HP_ETOOBIG;
        return;
    case CURLE_WRITE_ERROR:
        if (fe->too_big) {
            snprintf(res->error, sizeof(res->error),
                     "body larger than the %llu byte limit (stopped reading)",
                     (unsigned long long)fe->max_bytes);
            res->status = HP_ETOOBIG;
            return;
        }
        snprintf(res->error, sizeof(res->error), "write error (%s)", detail);
        break;
    case CURLE_BAD_CONTENT_ENCODING:
        snprintf(res->error, sizeof(res->error), "bad gzip/deflate body (%s)", detail);
        break;
    case CURLE_UNSUPPORTED_PROTOCOL:
        snprintf(res->error, sizeof(res->error), "protocol not allowed (%s)", detail);
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
        snprintf(res->error, sizeof(res->error), "TLS failure (%s)", detail);
        break;
    default:
        snprintf(res->error, sizeof(res->error), "%s", detail);
        res->retryable = true;
        break;
    }
    res->status = HP_EHTTP;
}

/* First bytes of a body, made printable, for an error message. */
static void body_excerpt(const char *body, size_t len, char *out, size_t outsz)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < outsz && i < 160; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch == '\n' || ch == '\r' || ch == '\t')
            ch = ' ';
        out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    if (len > 160 && o + 4 < outsz) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static void fetch_finish(struct fetch *fe, CURLcode code)
{
    struct poll_fetcher *f = fe->f;
    struct poll_fetch_result *res = hp_xcalloc(1, sizeof(*res));
    res->elapsed_ms = (hp_now_ns() - fe->t0_ns) / 1000000u;
    if (code != (CURLcode)-1) {
        long http = 0;
        curl_off_t v;
        char *ct = NULL, *eu = NULL;
        (void)curl_easy_getinfo(fe->easy, CURLINFO_RESPONSE_CODE, &http);
        res->http_code = http;
        if (curl_easy_getinfo(fe->easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
            snprintf(res->content_type, sizeof(res->content_type), "%s", ct);
        if (curl_easy_getinfo(fe->easy, CURLINFO_EFFECTIVE_URL, &eu) == CURLE_OK && eu)
            snprintf(res->effective_url, sizeof(res->effective_url), "%s", eu);
        if (curl_easy_getinfo(fe->easy, CURLINFO_CONNECT_TIME_T, &v) == CURLE_OK)
            res->connect_ms = (uint64_t)v / 1000u;
        if (curl_easy_getinfo(fe->easy, CURLINFO_SIZE_DOWNLOAD_T, &v) == CURLE_OK)
            res->wire_bytes = (uint64_t)v;
    }
    if (code == (CURLcode)-1) {
        res->status = HP_ERR(ECANCELED);
        snprintf(res->error, sizeof(res->error), "abandoned at shutdown after %.1f s",
                 (double)res->elapsed_ms / 1000.0);
    } else if (code != CURLE_OK) {
        describe_failure(fe, code, res);
    } else if (res->http_code < 200 || res->http_code > 299) {
        char ex[200];
        body_excerpt(fe->body.data ? fe->body.data : "", fe->body.len, ex, sizeof(ex));
        const char *hint = "";
        if (res->http_code == 401)
            hint = fe->had_auth ? " (the node refused user=/password_file=)"
                                : " (the node wants HTTP auth: add user= and password_file=)";
        else if (res->http_code == 403)
            hint = " (the user lacks the privilege; StarRocks needs OPERATE for /pprof)";
        else if (res->http_code == 404)
            hint = " (no such endpoint: is the node kind right, or the feature built in?)";
        snprintf(res->error, sizeof(res->error), "HTTP %ld%s%s%s", res->http_code, hint,
                 fe->body.len ? ": " : " with an empty body", fe->body.len ? ex : "");
        res->status = HP_EHTTP;
        res->retryable = res->http_code >= 500 || res->http_code == 429;
    }
    res->body = hp_buf_detach(&fe->body, &res->body_len);
    if (!res->body)
        res->body = hp_xcalloc(1, 1);

    /* Unlink before the callback: it may start new transfers. */
    if (fe->prev)
        fe->prev->next = fe->next;
    else
        f->active = fe->next;
    if (fe->next)
        fe->next->prev = fe->prev;
    f->nactive--;
    (void)curl_multi_remove_handle(f->multi, fe->easy);
    curl_easy_cleanup(fe->easy);
    curl_slist_free_all(fe->headers);
    poll_fetch_done_cb *cb = fe->cb;
    void *arg = fe->arg;
    free(fe);
    cb(res, arg);
}

static void drain_info(struct poll_fetcher *f)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(f->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct fetch *fe = NULL;
        (void)curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&fe);
        CURLcode code = msg->data.result;
        if (fe)
            fetch_finish(fe, code);
    }
}

static void socket_action(struct poll_fetcher *f, curl_socket_t fd, int events)
{
    int running;
    CURLMcode mc = curl_multi_socket_action(f->multi, fd, events, &running);
    if (mc != CURLM_OK)
        hp_log_error("poll", "err=%s msg=\"curl_multi_socket_action failed\"",
                     curl_multi_strerror(mc));
    drain_info(f);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *sc = hp_container_of(h, struct sock_ctx, poll);
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    socket_action(sc->f, sc->fd, flags);
}

static void timer_cb(uv_timer_t *t)
{
    struct poll_fetcher *f = hp_container_of(t, struct poll_fetcher, timer);
    socket_action(f, CURL_SOCKET_TIMEOUT, 0);
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct poll_fetcher *f = userp;
    if (timeout_ms < 0) {
        uv_timer_stop(&f->timer);
        return 0;
    }
    /* 0 means "as soon as possible", but not from inside this callback. */
    if (timeout_ms == 0)
        timeout_ms = 1;
    return uv_timer_start(&f->timer, timer_cb, (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
}

static int curl_socket_cb(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp)
{
    struct poll_fetcher *f = userp;
    struct sock_ctx *sc = socketp;
    if (action == CURL_POLL_REMOVE) {
        if (sc) {
            uv_poll_stop(&sc->poll);
            (void)curl_multi_assign(f->multi, s, NULL);
            uv_close((uv_handle_t *)&sc->poll, sock_close_cb);
        }
        return 0;
    }
    if (!sc) {
        sc = hp_xcalloc(1, sizeof(*sc));
        sc->fd = s;
        sc->f = f;
        int r = uv_poll_init_socket(f->loop, &sc->poll, s);
        if (r < 0) {
            hp_log_error("poll", "err=%s msg=\"uv_poll_init_socket failed\"", uv_strerror(r));
            free(sc);
            return -1;
        }
        f->pending_closes++;
        (void)curl_multi_assign(f->multi, s, sc);
    }
    int ev = 0;
    if (action == CURL_POLL_IN || action == CURL_POLL_INOUT)
        ev |= UV_READABLE;
    if (action == CURL_POLL_OUT || action == CURL_POLL_INOUT)
        ev |= UV_WRITABLE;
    int r = uv_poll_start(&sc->poll, ev, poll_cb);
    if (r < 0) {
        hp_log_error("poll", "err=%s msg=\"uv_poll_start failed\"", uv_strerror(r));
        return -1;
    }
    return 0;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct fetch *fe = userdata;
    size_t n = size * nmemb;
    if (hp_buf_append(&fe->body, ptr, n) < 0) {
        fe->too_big = true;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR */
    }
    return n;
}

/* Reserve the body buffer once when the server announces its size. */
static size_t header_cb(char *ptr, size_t size, size_t nitems, void *userdata)
{
    struct fetch *fe = userdata;
    size_t n = size * nitems;
    static const char cl[] = "content-length:";
    if (n > sizeof(cl) && strncasecmp(ptr, cl, sizeof(cl) - 1) == 0 && fe->body.len == 0) {
        const char *v = ptr + sizeof(cl) - 1;
        size_t vl = n - (sizeof(cl) - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        uint64_t want;
        if (hp_parse_u64(v, vl, &want) == 0 && want > 0 && want <= fe->max_bytes &&
            want <= ((uint64_t)64 << 20)) {
            /* Same invariants as hp_buf's own growth: alloc counts the NUL. */
            if (fe->body.alloc < want + 1) {
                fe->body.data = hp_xrealloc(fe->body.data, (size_t)want + 1);
                fe->body.alloc = (size_t)want + 1;
                fe->body.data[fe->body.len] = '\0';
            }
        }
    }
    return n;
}

int poll_fetcher_new(uv_loop_t *loop, uint32_t max_connections, struct poll_fetcher **ret)
{
    struct poll_fetcher *f = hp_xcalloc(1, sizeof(*f));
    f->loop = loop;
    f->multi = curl_multi_init();
    if (!f->multi) {
        free(f);
        return HP_EHTTP;
    }
    int r = uv_timer_init(loop, &f->timer);
    if (r < 0) {
        curl_multi_cleanup(f->multi);
        free(f);
        return r;
    }
    f->pending_closes = 1;
    (void)curl_multi_setopt(f->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    (void)curl_multi_setopt(f->multi, CURLMOPT_SOCKETDATA, f);
    (void)curl_multi_setopt(f->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    (void)curl_multi_setopt(f->multi, CURLMOPT_TIMERDATA, f);
    if (max_connections) {
        (void)curl_multi_setopt(f->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)max_connections);
        (void)curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, (long)max_connections);
    }
    (void)curl_multi_setopt(f->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 4L);
    *ret = f;
    return 0;
}

int poll_fetch_start(struct poll_fetcher *f, const struct poll_fetch_opts *o,
                     poll_fetch_done_cb *cb, void *arg)
{
    if (f->closing)
        return HP_ERR(ECANCELED);
    struct fetch *fe = hp_xcalloc(1, sizeof(*fe));
    fe->f = f;
    fe->cb = cb;
    fe->arg = arg;
    fe->max_bytes = o->max_bytes ? o->max_bytes : ((uint64_t)1 << 30);
    /* hp_buf's cap counts the data; the terminating NUL is extra. */
    hp_buf_init(&fe->body, (size_t)fe->max_bytes);
    fe->easy = curl_easy_init();
    if (!fe->easy) {
        free(fe);
        return HP_EHTTP;
    }
    CURL *e = fe->easy;
    CURLcode c = CURLE_OK;
#define SETOPT(opt, val)                                                                           \
    do {                                                                                           \
        if (c == CURLE_OK)                                                                         \
            c = curl_easy_setopt(e, opt, val);                                                     \
    } while (0)
    SETOPT(CURLOPT_URL, o->url);
    SETOPT(CURLOPT_PRIVATE, (void *)fe);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_FOLLOWLOCATION, 1L);
    SETOPT(CURLOPT_MAXREDIRS, 5L);
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_ACCEPT_ENCODING, ""); /* every encoding curl can decode */
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)(o->connect_timeout_ms ? o->connect_timeout_ms : 5000));
    SETOPT(CURLOPT_TIMEOUT_MS, (long)(o->total_timeout_ms ? o->total_timeout_ms : 60000));
    SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)fe->max_bytes);
    SETOPT(CURLOPT_WRITEFUNCTION, write_cb);
    SETOPT(CURLOPT_WRITEDATA, (void *)fe);
    SETOPT(CURLOPT_HEADERFUNCTION, header_cb);
    SETOPT(CURLOPT_HEADERDATA, (void *)fe);
    SETOPT(CURLOPT_ERRORBUFFER, fe->errbuf);
    SETOPT(CURLOPT_USERAGENT, "heapfleet-collector/0.1");
    SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
    if (o->user) {
        fe->had_auth = true;
        SETOPT(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        SETOPT(CURLOPT_USERNAME, o->user);
        SETOPT(CURLOPT_PASSWORD, o->password ? o->password : "");
    }
    if (o->tls_insecure) {
        SETOPT(CURLOPT_SSL_VERIFYPEER, 0L);
        SETOPT(CURLOPT_SSL_VERIFYHOST, 0L);
    }
#undef SETOPT
    if (c != CURLE_OK) {
        hp_log_error("poll", "url=%s err=\"%s\" msg=\"curl_easy_setopt failed\"", o->url,
                     curl_easy_strerror(c));
        curl_easy_cleanup(e);
        hp_buf_release(&fe->body);
        free(fe);
        return HP_EHTTP;
    }
    fe->t0_ns = hp_now_ns();
    CURLMcode mc = curl_multi_add_handle(f->multi, e);
    if (mc != CURLM_OK) {
        hp_log_error("poll", "err=%s msg=\"curl_multi_add_handle failed\"",
                     curl_multi_strerror(mc));
        curl_easy_cleanup(e);
        hp_buf_release(&fe->body);
        free(fe);
        return HP_EHTTP;
    }
    fe->next = f->active;
    if (f->active)
        f->active->prev = fe;
    f->active = fe;
    f->nactive++;
    return 0;
}

size_t poll_fetcher_active(const struct poll_fetcher *f)
{
    return f->nactive;
}

void poll_fetcher_cancel_all(struct poll_fetcher *f)
{
    while (f->active)
        fetch_finish(f->active, (CURLcode)-1);
}

void poll_fetcher_close(struct poll_fetcher *f)
{
    if (!f)
        return;
    poll_fetcher_cancel_all(f);
    /* curl_multi_cleanup may still call the socket callback (to remove
     * sockets of cached connections), so the poll contexts must be alive. */
    f->closing = true;
    curl_multi_cleanup(f->multi);
    f->multi = NULL;
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, timer_close_cb);
}

void poll_fetch_result_free(struct poll_fetch_result *r)
{
    if (!r)
        return;
    free(r->body);
    free(r);
}

char *poll_fetch_result_detach_body(struct poll_fetch_result *r, size_t *ret_len)
{
    char *b = r->body;
    *ret_len = r->body_len;
    r->body = NULL;
    r->body_len = 0;
    return b;
}

char *poll_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    struct hp_buf b = HP_BUF_INIT(0);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
            (void)hp_buf_append(&b, p, 1);
        } else {
            char enc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            (void)hp_buf_append(&b, enc, 3);
        }
    }
    size_t len;
    char *out = hp_buf_detach(&b, &len);
    return out ? out : hp_xstrdup("");
}
