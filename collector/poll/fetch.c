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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

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
    bool wire_over; /* too_big on the wire, not after decoding */
    bool had_auth;
    uint64_t max_bytes;
    uint32_t total_timeout_ms;
    uint64_t t0_ns;
    struct curl_slist *headers;
    enum poll_redirect redirects;
    unsigned nredirects;
    /* Content-Encoding is decoded here, not by curl: curl accepts a gzip
     * stream that ends early (the dump comes out silently truncated) and
     * has no ratio limit. */
    z_stream z;
    ZSTD_DStream *zs; /* Content-Encoding: zstd */
    bool z_on, z_done;
    uint64_t wire_in;
    uint64_t max_wire;   /* bytes on the wire */
    uint32_t max_ratio;  /* decoded / wire, past FETCH_BOMB_MIN */
    struct poll_membudget *budget;
    size_t charged;      /* bytes of budget this transfer holds */
    bool over_budget;
    char decode_err[200];
    char errbuf[CURL_ERROR_SIZE];
};

/* A body that decodes to more than max_ratio times its wire size, once
 * past FETCH_BOMB_MIN bytes, is refused as a decompression bomb (heap
 * profiles compress 5-30x). */
#define FETCH_BOMB_MIN ((uint64_t)16 << 20)
/* The largest zstd window a node may ask for: a frame header asking for
 * more would make the decoder allocate it (up to 2 GiB) before any check. */
#define FETCH_ZSTD_WINDOW_LOG_MAX 24

static void decoder_end(struct fetch *fe)
{
    if (fe->z_on && !fe->zs)
        inflateEnd(&fe->z);
    ZSTD_freeDStream(fe->zs);
    fe->zs = NULL;
    fe->z_on = fe->z_done = false;
    fe->wire_in = 0;
}

/* Charge the body's growth to the shared budget; false when it is spent. */
static bool budget_charge(struct fetch *fe)
{
    if (!fe->budget || fe->body.alloc <= fe->charged)
        return true;
    size_t add = fe->body.alloc - fe->charged;
    uint64_t was = atomic_fetch_add(&fe->budget->used, add);
    fe->charged += add;
    if (was + add > fe->budget->limit) {
        fe->over_budget = true;
        return false;
    }
    return true;
}

static void budget_release(struct fetch *fe)
{
    if (fe->budget && fe->charged)
        poll_membudget_release(fe->budget, fe->charged);
    fe->charged = 0;
}

void poll_membudget_charge(struct poll_membudget *b, uint64_t n)
{
    if (b)
        atomic_fetch_add(&b->used, n);
}

void poll_membudget_release(struct poll_membudget *b, uint64_t n)
{
    if (b)
        atomic_fetch_sub(&b->used, n);
}


#define FETCH_MAX_REDIRECTS 5

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
                 "body larger than the %llu byte limit (announced by Content-Length); "
                 "--max-body or the node's max_body= sets it",
                 (unsigned long long)fe->max_wire);
        res->status = HP_ETOOBIG;
        return;
    case CURLE_WRITE_ERROR:
        if (fe->decode_err[0]) {
            snprintf(res->error, sizeof(res->error), "%s", fe->decode_err);
            res->status = HP_ETOOBIG;
            if (strncmp(fe->decode_err, "bad ", 4) == 0)
                res->status = HP_EHTTP;
            return;
        }
        if (fe->over_budget) {
            snprintf(res->error, sizeof(res->error),
                     "the collector's in-flight byte budget (%llu bytes, --max-inflight-bytes) "
                     "is taken by nodes fetched at the same time: stopped this body at %zu "
                     "bytes",
                     (unsigned long long)fe->budget->limit, fe->body.len);
            res->status = HP_ETOOBIG;
            res->retryable = true;
            return;
        }
        if (fe->too_big && fe->z_on && !fe->wire_over) {
            snprintf(res->error, sizeof(res->error),
                     "decoded body larger than the %llu byte limit (max_decoded) after %llu "
                     "wire bytes (stopped reading)",
                     (unsigned long long)fe->max_bytes, (unsigned long long)fe->wire_in);
            res->status = HP_ETOOBIG;
            return;
        }
        if (fe->too_big) {
            snprintf(res->error, sizeof(res->error),
                     "body larger than the %llu byte limit (stopped reading); --max-body or "
                     "the node's max_body= sets it",
                     (unsigned long long)HP_MIN(fe->max_bytes, fe->max_wire));
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

/* The scheme, host and port of a URL, for comparing two of them. */
static int url_origin(const char *url, char **ret_scheme, char **ret_host, char **ret_port)
{
    CURLU *u = curl_url();
    if (!u)
        return -1;
    int r = -1;
    *ret_scheme = *ret_host = *ret_port = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, ret_scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, ret_host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, ret_port, CURLU_DEFAULT_PORT) == CURLUE_OK)
        r = 0;
    curl_url_cleanup(u);
    return r;
}

static bool str_same(const char *a, const char *b)
{
    return a && b && strcasecmp(a, b) == 0;
}

/* A 3xx arrived: under the node's policy, start the same transfer again at
 * the new location and return true; else describe why not in res (the body
 * is not kept: it is not a profile). Runs from drain_info, outside curl's
 * callbacks, so the handle may be removed and added again. */
static bool follow_redirect(struct fetch *fe, struct poll_fetch_result *res)
{
    char *loc = NULL, *from = NULL;
    (void)curl_easy_getinfo(fe->easy, CURLINFO_REDIRECT_URL, &loc);
    (void)curl_easy_getinfo(fe->easy, CURLINFO_EFFECTIVE_URL, &from);
    char shown[200];
    {
        char *red = hp_url_redact(loc ? loc : "");
        body_excerpt(red, strlen(red), shown, sizeof(shown));
        free(red);
    }
    if (!loc || !from) {
        snprintf(res->error, sizeof(res->error), "HTTP %ld redirect without a Location",
                 res->http_code);
        return false;
    }
    if (fe->redirects == POLL_REDIRECT_NO) {
        snprintf(res->error, sizeof(res->error),
                 "HTTP %ld redirect to %s not followed (add follow_redirects=same-host or yes "
                 "to the node's line)",
                 res->http_code, shown);
        return false;
    }
    if (fe->nredirects >= FETCH_MAX_REDIRECTS) {
        snprintf(res->error, sizeof(res->error), "more than %d redirects (last to %s)",
                 FETCH_MAX_REDIRECTS, shown);
        return false;
    }
    char *s1, *h1, *p1, *s2, *h2, *p2;
    bool ok1 = url_origin(from, &s1, &h1, &p1) == 0, ok2 = url_origin(loc, &s2, &h2, &p2) == 0;
    bool same_scheme = ok1 && ok2 && str_same(s1, s2);
    bool same_host = same_scheme && str_same(h1, h2) && str_same(p1, p2);
    curl_free(s1), curl_free(h1), curl_free(p1), curl_free(s2), curl_free(h2), curl_free(p2);
    if (!same_scheme) {
        snprintf(res->error, sizeof(res->error),
                 "HTTP %ld redirect to %s not followed: another scheme", res->http_code, shown);
        return false;
    }
    if (!same_host && fe->redirects != POLL_REDIRECT_YES) {
        snprintf(res->error, sizeof(res->error),
                 "HTTP %ld redirect to %s not followed: another host or port "
                 "(follow_redirects=same-host)",
                 res->http_code, shown);
        return false;
    }
    uint64_t spent = (hp_now_ns() - fe->t0_ns) / 1000000u;
    if (spent >= fe->total_timeout_ms) {
        snprintf(res->error, sizeof(res->error), "timed out while following redirects");
        return false;
    }
    struct poll_fetcher *f = fe->f;
    char *next = hp_xstrdup(loc); /* loc belongs to the handle */
    (void)curl_multi_remove_handle(f->multi, fe->easy);
    CURLcode c = curl_easy_setopt(fe->easy, CURLOPT_URL, next);
    free(next);
    if (!same_host && c == CURLE_OK) {
        /* The node's credentials are for the node only. */
        c = curl_easy_setopt(fe->easy, CURLOPT_USERNAME, NULL);
        if (c == CURLE_OK)
            c = curl_easy_setopt(fe->easy, CURLOPT_PASSWORD, NULL);
        if (c == CURLE_OK)
            c = curl_easy_setopt(fe->easy, CURLOPT_XOAUTH2_BEARER, NULL);
        if (c == CURLE_OK)
            c = curl_easy_setopt(fe->easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_NONE);
    }
    if (c == CURLE_OK)
        c = curl_easy_setopt(fe->easy, CURLOPT_TIMEOUT_MS, (long)(fe->total_timeout_ms - spent));
    if (c != CURLE_OK || curl_multi_add_handle(f->multi, fe->easy) != CURLM_OK) {
        snprintf(res->error, sizeof(res->error), "cannot follow the redirect to %s", shown);
        return false;
    }
    fe->nredirects++;
    decoder_end(fe);
    hp_buf_reset(&fe->body);
    fe->too_big = false;
    return true;
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
    } else if (fe->z_on && !fe->z_done && res->http_code >= 200 && res->http_code <= 299) {
        snprintf(res->error, sizeof(res->error),
                 "truncated %s body: the compressed stream ended early after %llu "
                 "wire bytes (%zu decoded)",
                 fe->zs ? "zstd" : "gzip/deflate", (unsigned long long)fe->wire_in,
                 fe->body.len);
        res->status = HP_EHTTP;
        res->retryable = true;
    } else if (res->http_code >= 300 && res->http_code <= 399) {
        if (follow_redirect(fe, res)) {
            free(res);
            return;
        }
        res->status = HP_EHTTP;
        hp_buf_reset(&fe->body);
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
    /* The caller accounts for the body it keeps (poll_membudget_charge). */
    budget_release(fe);

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
    decoder_end(fe);
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

/* Append decoded bytes, within the decoded cap, the ratio and the budget.
 * false: stop the transfer (the reason is in fe). */
static bool body_add(struct fetch *fe, const void *p, size_t n)
{
    if (hp_buf_append(&fe->body, p, n) < 0) {
        fe->too_big = true;
        return false;
    }
    if (!budget_charge(fe))
        return false;
    if (fe->z_on && fe->body.len > FETCH_BOMB_MIN && fe->body.len / fe->max_ratio > fe->wire_in) {
        snprintf(fe->decode_err, sizeof(fe->decode_err),
                 "decompression bomb: %llu wire bytes decoded to over %zu (more than %ux, "
                 "max_ratio)",
                 (unsigned long long)fe->wire_in, fe->body.len, fe->max_ratio);
        return false;
    }
    return true;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct fetch *fe = userdata;
    size_t n = size * nmemb;
    fe->wire_in += n;
    if (fe->wire_in > fe->max_wire) {
        fe->too_big = fe->wire_over = true;
        return 0;
    }
    if (!fe->z_on)
        return body_add(fe, ptr, n) ? n : 0;
    if (fe->z_done)
        return n; /* bytes after the end of the stream are ignored */
    unsigned char out[65536];
    if (fe->zs) {
        ZSTD_inBuffer in = { ptr, n, 0 };
        while (in.pos < in.size && !fe->z_done) {
            ZSTD_outBuffer o = { out, sizeof(out), 0 };
            size_t zr = ZSTD_decompressStream(fe->zs, &o, &in);
            if (ZSTD_isError(zr)) {
                snprintf(fe->decode_err, sizeof(fe->decode_err), "bad zstd body (%s%s)",
                         ZSTD_getErrorName(zr),
                         ZSTD_getErrorCode(zr) == ZSTD_error_frameParameter_windowTooLarge
                             ? ": asks for a window over 16 MiB"
                             : "");
                return 0;
            }
            if (!body_add(fe, out, o.pos))
                return 0;
            if (zr == 0)
                fe->z_done = true;
        }
        return n;
    }
    fe->z.next_in = (Bytef *)ptr;
    fe->z.avail_in = (uInt)n;
    while (fe->z.avail_in > 0 && !fe->z_done) {
        fe->z.next_out = out;
        fe->z.avail_out = sizeof(out);
        int zr = inflate(&fe->z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && fe->z.avail_out)) {
            snprintf(fe->decode_err, sizeof(fe->decode_err), "bad gzip/deflate body (%s)",
                     fe->z.msg ? fe->z.msg : "inflate failed");
            return 0;
        }
        if (!body_add(fe, out, sizeof(out) - fe->z.avail_out))
            return 0;
        if (zr == Z_STREAM_END)
            fe->z_done = true;
        if (zr == Z_BUF_ERROR)
            break;
    }
    return n;
}

/* Reserve the body buffer once when the server announces its size. */
static size_t header_cb(char *ptr, size_t size, size_t nitems, void *userdata)
{
    struct fetch *fe = userdata;
    size_t n = size * nitems;
    static const char cl[] = "content-length:";
    static const char ce[] = "content-encoding:";
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        decoder_end(fe); /* a new response (after a 1xx): its own encoding */
        fe->decode_err[0] = '\0';
    } else if (n > sizeof(ce) && strncasecmp(ptr, ce, sizeof(ce) - 1) == 0) {
        const char *v = ptr + sizeof(ce) - 1;
        size_t vl = n - (sizeof(ce) - 1);
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        bool gz = (vl == 4 && strncasecmp(v, "gzip", 4) == 0) ||
                  (vl == 6 && strncasecmp(v, "x-gzip", 6) == 0) ||
                  (vl == 7 && strncasecmp(v, "deflate", 7) == 0);
        bool zstd = vl == 4 && strncasecmp(v, "zstd", 4) == 0;
        if (zstd && !fe->z_on) {
            fe->zs = ZSTD_createDStream();
            if (!fe->zs || ZSTD_isError(ZSTD_DCtx_setParameter(fe->zs, ZSTD_d_windowLogMax,
                                                                FETCH_ZSTD_WINDOW_LOG_MAX)))
                return 0;
            fe->z_on = true;
        } else if (gz && !fe->z_on) {
            memset(&fe->z, 0, sizeof(fe->z));
            /* 15 + 32: a gzip or zlib header, detected */
            if (inflateInit2(&fe->z, 15 + 32) != Z_OK)
                return 0;
            fe->z_on = true;
        } else if (!gz && !zstd && !(vl == 8 && strncasecmp(v, "identity", 8) == 0)) {
            snprintf(fe->decode_err, sizeof(fe->decode_err),
                     "bad Content-Encoding \"%.*s\" (asked for gzip, deflate or zstd)",
                     (int)(vl > 40 ? 40 : vl), v);
            return 0;
        }
    }
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
                if (!budget_charge(fe))
                    return 0;
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
    fe->max_wire = o->max_bytes ? o->max_bytes : ((uint64_t)1 << 30);
    fe->max_bytes = o->max_decoded ? o->max_decoded : fe->max_wire;
    fe->max_ratio = o->max_ratio ? o->max_ratio : POLL_MAX_RATIO_DEFAULT;
    fe->budget = o->budget;
    fe->redirects = o->redirects;
    fe->total_timeout_ms = o->total_timeout_ms ? o->total_timeout_ms : 60000;
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
    /* Redirects are followed here, by follow_redirect(), under the node's
     * policy; curl itself never follows one. */
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    /* What write_cb can decode; curl passes the body through as sent. */
    SETOPT(CURLOPT_ACCEPT_ENCODING, "gzip, deflate, zstd");
    SETOPT(CURLOPT_HTTP_CONTENT_DECODING, 0L);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long)(o->connect_timeout_ms ? o->connect_timeout_ms : 5000));
    SETOPT(CURLOPT_TIMEOUT_MS, (long)(o->total_timeout_ms ? o->total_timeout_ms : 60000));
    SETOPT(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)fe->max_wire);
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
    if (o->bearer) {
        fe->had_auth = true;
        SETOPT(CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        SETOPT(CURLOPT_XOAUTH2_BEARER, o->bearer);
    }
    if (o->tls_insecure) {
        SETOPT(CURLOPT_SSL_VERIFYPEER, 0L);
        SETOPT(CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (o->ca_file)
        SETOPT(CURLOPT_CAINFO, o->ca_file);
    if (o->cert_file) {
        SETOPT(CURLOPT_SSLCERT, o->cert_file);
        SETOPT(CURLOPT_SSLKEY, o->key_file ? o->key_file : o->cert_file);
    }
    if (o->method && !strcmp(o->method, "POST")) {
        SETOPT(CURLOPT_POST, 1L);
        SETOPT(CURLOPT_POSTFIELDS, "");
        SETOPT(CURLOPT_POSTFIELDSIZE, 0L);
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
