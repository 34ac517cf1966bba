/* The collector daemon: schedule, per-node state, worker hand-off, signals.
 *
 * Invariants:
 *  - Everything here runs on the loop thread except work_cb (a worker
 *    thread), which touches only its own job and the sink (under sink_mu).
 *  - A node is polled by at most one job at a time. A job holds one of the
 *    max_inflight slots from its first request until its result has been
 *    handed to the sink, so at most max_inflight dumps are in memory.
 *  - A job works on its own copy of the node's settings: a SIGHUP reload
 *    never changes a poll that is under way; the new settings (or the
 *    node's removal) take effect when the job ends.
 *  - Every job ends in the sink, whether it fetched a dump, failed, or was
 *    abandoned at shutdown: nothing a node did goes unrecorded.
 *
 * Shutdown order (SIGTERM/SIGINT, or the end of a --once round):
 *  (1) stop the round and node timers, drop queued nodes;
 *  (2) cancel the transfers in flight (their jobs are recorded as abandoned);
 *  (3) wait until every job has left the worker threads;
 *  (4) poll_fetcher_close (curl_multi_cleanup while socket contexts live);
 *  (5) uv_close every handle, close the sink;
 *  (6) run the loop until drained, then uv_loop_close() == 0. */
#include "collector/daemon.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "collector/poll/poll.h"
#include "store/profile.h"

#define SPREAD_MAX_MS (5u * 60 * 1000)
#define BACKOFF_MAX_MS (60u * 1000)
#define SHUTDOWN_GRACE_MS 8000u

void collector_config_default(struct collector_config *c)
{
    *c = (struct collector_config){
        .nodes_path = NULL,
        .interval_ms = 3600u * 1000,
        .spread_ms = -1,
        .max_inflight = 32,
        .retries = 2,
        .retry_base_ms = 1000,
        .connect_timeout_ms = 5000,
        .timeout_ms = 60000,
        .max_body = (uint64_t)512 << 20,
        .once = false,
        .strict = false,
        .progress = true,
    };
}

enum step {
    STEP_ACTIVATE,
    STEP_METRICS,
    STEP_TRACKER,
    STEP_VARS,
    STEP_PROC,
    STEP_DUMP,      /* raw dump from the node (starrocks, databend, url, agent newest) */
    STEP_DUMP_PATH, /* Doris /jeheap/dump: a path on the node */
    STEP_AGENT_FILE /* that path, through the agent */
};

static const char *const step_names[] = {
    [STEP_ACTIVATE] = "activate",   [STEP_METRICS] = "metrics",
    [STEP_TRACKER] = "tracker",     [STEP_VARS] = "vars",
    [STEP_PROC] = "proc",           [STEP_DUMP] = "dump",
    [STEP_DUMP_PATH] = "dump-path", [STEP_AGENT_FILE] = "agent-file",
};

enum dnode_state {
    DN_IDLE,
    DN_WAITING, /* its start time in this round has not come */
    DN_QUEUED,  /* waiting for a free slot */
    DN_BUSY,    /* a job is fetching, backing off or on a worker */
};

struct body {
    char *data;
    size_t len;
};

struct job;
struct daemon;

struct dnode {
    struct daemon *d;
    struct poll_node *cfg;      /* current settings (owned) */
    struct poll_node *next_cfg; /* from a reload, applied when idle (owned) */
    bool removed;               /* gone from the list: free when idle */
    enum dnode_state state;
    uv_timer_t timer; /* round start delay, then retry backoff */
    struct job *job;
    struct dnode *qnext;       /* slot queue */
    struct dnode *prev, *next; /* all nodes */
    int64_t activated_ms;      /* Doris: when profiling was switched on */
    char *activation_reply;
    uint32_t consecutive_failures;
    uint64_t last_dump_hash; /* of the last dump fetched; 0 if none */
    size_t last_dump_len;
};

struct job {
    struct dnode *dn;
    struct daemon *d;
    struct poll_node *node; /* copy of the settings at job start */
    uint64_t round;
    enum step plan[8];
    size_t nplan, cur;
    uint32_t attempt;
    int64_t started_ms;
    uint64_t t0_ns;

    struct collector_attempt *attempts; /* strings owned (cast away const when freeing) */
    size_t nattempts, attempts_cap;

    struct body metrics, tracker, vars, proc;
    struct body dump;
    char *dump_url, *dump_ctype, *remote_path;
    uint64_t dump_ms;
    bool activated_now;
    bool activate_old; /* the node 404'd the current route: try the older one */

    int status;
    char *error;
    struct hp_buf fig_err; /* figure steps that failed, "; " joined */

    /* worker side */
    uv_work_t work;
    struct profile *profile;
    char *parse_error;
    struct poll_figures figures;
    char *sink_error;
    /* summary kept for the log line after the profile is gone */
    size_t nsamples;
    double inuse_bytes;
    const char *format;
    size_t dump_len;
    size_t nfigures;
    uint64_t dump_hash;
    bool dump_unchanged;
};

struct daemon {
    uv_loop_t loop;
    const struct collector_config *cfg;
    struct collector_sink *sink;
    collector_parse_fn *parse;
    struct poll_fetcher *fetcher;
    uv_timer_t round_timer;
    uv_timer_t progress_timer;
    uv_timer_t grace_timer;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_mutex_t sink_mu;
    uint64_t spread_ms;

    struct dnode *nodes;
    size_t nnodes;
    struct dnode *qhead, *qtail;
    size_t active; /* slots in use */

    uint64_t round;
    uint64_t round_t0_ns;
    size_t round_total, round_pending, round_ok, round_failed, round_skipped;
    uint64_t round_bytes;
    uint64_t failed_total;

    bool stopping, closed, reloading;
    bool service_started;
    int signals_seen;
    uint64_t rng;
};

/* ---- small helpers ----------------------------------------------------- */

static uint64_t rng_next(struct daemon *d)
{
    /* xorshift64*: jitter only, not security. */
    d->rng ^= d->rng >> 12;
    d->rng ^= d->rng << 25;
    d->rng ^= d->rng >> 27;
    return d->rng * UINT64_C(2685821657736338717);
}

/* Uniform in [0, n). */
static uint64_t rng_below(struct daemon *d, uint64_t n)
{
    return n ? rng_next(d) % n : 0;
}

static void body_free(struct body *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static const char *scheme_of(const struct poll_node *n)
{
    return n->tls == POLL_TLS_NO ? "http" : "https";
}

/* ---- node list --------------------------------------------------------- */

static void dnode_close_cb(uv_handle_t *h)
{
    struct dnode *dn = hp_container_of((uv_timer_t *)h, struct dnode, timer);
    poll_node_free(dn->cfg);
    poll_node_free(dn->next_cfg);
    free(dn->activation_reply);
    free(dn);
}

static void dnode_unlink(struct daemon *d, struct dnode *dn)
{
    if (dn->prev)
        dn->prev->next = dn->next;
    else
        d->nodes = dn->next;
    if (dn->next)
        dn->next->prev = dn->prev;
    d->nnodes--;
}

static struct dnode *dnode_add(struct daemon *d, const struct poll_node *cfg)
{
    struct dnode *dn = hp_xcalloc(1, sizeof(*dn));
    dn->d = d;
    dn->cfg = poll_node_dup(cfg);
    int r = uv_timer_init(&d->loop, &dn->timer);
    if (r < 0) {
        hp_log_error("collector", "err=\"%s\" msg=\"uv_timer_init failed\"", uv_strerror(r));
        abort();
    }
    /* Append to keep the list order (and so the spread order) of the file. */
    struct dnode **pp = &d->nodes, *prev = NULL;
    while (*pp) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    dn->prev = prev;
    *pp = dn;
    d->nnodes++;
    return dn;
}

static struct dnode *dnode_find(struct daemon *d, const char *name)
{
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (!dn->removed && !strcmp(dn->cfg->name, name))
            return dn;
    return NULL;
}

/* Take a freshly loaded list: keep nodes by name, stage changed settings,
 * add new nodes, mark missing ones removed. Loop thread. */
static void nodes_apply(struct daemon *d, const struct poll_nodelist *l)
{
    size_t added = 0, changed = 0, removed = 0;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (dn->removed)
            continue;
        bool found = false;
        for (size_t i = 0; i < l->n && !found; i++)
            found = !strcmp(l->nodes[i].name, dn->cfg->name);
        if (!found) {
            dn->removed = true;
            removed++;
        }
    }
    for (size_t i = 0; i < l->n; i++) {
        struct dnode *dn = dnode_find(d, l->nodes[i].name);
        if (!dn) {
            dnode_add(d, &l->nodes[i]);
            added++;
            continue;
        }
        if (poll_node_equal(dn->cfg, &l->nodes[i]))
            continue;
        changed++;
        poll_node_free(dn->next_cfg);
        dn->next_cfg = poll_node_dup(&l->nodes[i]);
    }
    /* Idle nodes take their new settings (or leave) now; busy ones when done. */
    for (struct dnode *dn = d->nodes, *next; dn; dn = next) {
        next = dn->next;
        if (dn->state != DN_IDLE && dn->state != DN_WAITING)
            continue;
        if (dn->next_cfg) {
            poll_node_free(dn->cfg);
            dn->cfg = dn->next_cfg;
            dn->next_cfg = NULL;
        }
        if (dn->removed) {
            if (dn->state == DN_WAITING && d->round_pending)
                d->round_pending--;
            uv_timer_stop(&dn->timer);
            dnode_unlink(d, dn);
            uv_close((uv_handle_t *)&dn->timer, dnode_close_cb);
        }
    }
    if (d->round)
        hp_log_info("collector",
                    "nodes=%zu added=%zu changed=%zu removed=%zu msg=\"node list reloaded\"",
                    d->nnodes, added, changed, removed);
}

/* ---- jobs -------------------------------------------------------------- */

static void job_start_step(struct job *j);
static void job_done(struct job *j);
static void slot_release(struct daemon *d);
static void round_check_done(struct daemon *d);
static void shutdown_maybe_finish(struct daemon *d);

static void job_free(struct job *j)
{
    for (size_t i = 0; i < j->nattempts; i++) {
        free((char *)j->attempts[i].url);
        free((char *)j->attempts[i].error);
    }
    free(j->attempts);
    body_free(&j->metrics);
    body_free(&j->tracker);
    body_free(&j->vars);
    body_free(&j->proc);
    body_free(&j->dump);
    free(j->dump_url);
    free(j->dump_ctype);
    free(j->remote_path);
    free(j->error);
    hp_buf_release(&j->fig_err);
    profile_free(j->profile);
    free(j->parse_error);
    poll_figures_release(&j->figures);
    free(j->sink_error);
    poll_node_free(j->node);
    free(j);
}

static void job_plan(struct job *j)
{
    const struct poll_node *n = j->node;
    size_t k = 0;
    if (n->kind == POLL_KIND_DORIS && n->activate && j->dn->activated_ms == 0)
        j->plan[k++] = STEP_ACTIVATE;
    bool metrics = n->metrics != NULL || n->kind == POLL_KIND_STARROCKS ||
                   n->kind == POLL_KIND_DORIS || n->kind == POLL_KIND_DATABEND;
    if (metrics)
        j->plan[k++] = STEP_METRICS;
    if (n->kind == POLL_KIND_DORIS)
        j->plan[k++] = STEP_TRACKER;
    if (n->kind == POLL_KIND_DORIS && n->brpc)
        j->plan[k++] = STEP_VARS;
    if (n->kind == POLL_KIND_AGENT)
        j->plan[k++] = STEP_PROC;
    /* The dump comes last so the figures above describe the moment just
     * before it; a failed figure step never prevents the dump. */
    j->plan[k++] = n->kind == POLL_KIND_DORIS ? STEP_DUMP_PATH : STEP_DUMP;
    j->nplan = k;
}

static char *step_url(const struct job *j, enum step s)
{
    const struct poll_node *n = j->node;
    const char *sc = scheme_of(n);
    switch (s) {
    case STEP_ACTIVATE:
        return hp_xasprintf("%s://%s%s", sc, n->addr,
                            j->activate_old ? POLL_PATH_DORIS_ACTIVATE_OLD
                                            : POLL_PATH_DORIS_ACTIVATE);
    case STEP_METRICS:
        return hp_xasprintf("%s://%s%s", sc, n->metrics ? n->metrics : n->addr, POLL_PATH_METRICS);
    case STEP_TRACKER:
        return hp_xasprintf("%s://%s%s", sc, n->addr, POLL_PATH_DORIS_TRACKER);
    case STEP_VARS:
        return hp_xasprintf("%s://%s%s", sc, n->brpc, POLL_PATH_DORIS_VARS);
    case STEP_PROC:
    case STEP_DUMP:
        if (n->kind == POLL_KIND_AGENT) {
            const char *path = s == STEP_PROC ? POLL_AGENT_PATH_PROC : POLL_AGENT_PATH_NEWEST;
            if (n->process) {
                char *esc = poll_url_escape(n->process);
                char *u = hp_xasprintf("%s://%s%s?process=%s", sc, n->agent, path, esc);
                free(esc);
                return u;
            }
            return hp_xasprintf("%s://%s%s", sc, n->agent, path);
        }
        if (n->kind == POLL_KIND_URL)
            return hp_xstrdup(n->addr);
        if (n->kind == POLL_KIND_DATABEND)
            return hp_xasprintf("%s://%s%s", sc, n->addr, POLL_PATH_DATABEND_HEAP);
        return hp_xasprintf("%s://%s%s", sc, n->addr, POLL_PATH_STARROCKS_HEAP);
    case STEP_DUMP_PATH:
        return hp_xasprintf("%s://%s%s", sc, n->addr, POLL_PATH_DORIS_DUMP);
    case STEP_AGENT_FILE: {
        char *esc = poll_url_escape(j->remote_path);
        char *u = hp_xasprintf("%s://%s%s%s", sc, n->agent, POLL_AGENT_PATH_FILE, esc);
        free(esc);
        return u;
    }
    }
    return hp_xstrdup("");
}

static bool step_is_dump(enum step s)
{
    return s == STEP_DUMP || s == STEP_DUMP_PATH || s == STEP_AGENT_FILE;
}

static void job_record_attempt(struct job *j, enum step s, const char *url,
                               const struct poll_fetch_result *res, int status, const char *error)
{
    j->attempts = hp_xgrow(j->attempts, &j->attempts_cap, j->nattempts + 1, sizeof(*j->attempts));
    j->attempts[j->nattempts++] = (struct collector_attempt){
        .what = step_names[s],
        .url = hp_xstrdup(url),
        .attempt = j->attempt,
        .start_ms = hp_wall_ms() - (int64_t)res->elapsed_ms,
        .elapsed_ms = res->elapsed_ms,
        .http_code = res->http_code,
        .bytes = res->body_len,
        .status = status,
        .error = error && *error ? hp_xstrdup(error) : NULL,
    };
}

static void job_fail(struct job *j, int status, const char *fmt, ...) HP_PRINTF(3, 4);
static void job_fail(struct job *j, int status, const char *fmt, ...)
{
    struct hp_buf b = HP_BUF_INIT(0);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    free(j->error);
    size_t len;
    j->error = hp_buf_detach(&b, &len);
    j->status = status ? status : HP_EHTTP;
}

/* Why this body is not a heap dump, or NULL when it may be one. Content
 * types are not trusted either way (Doris labels plain text as JSON), so the
 * bytes decide; the type only sharpens the message. */
static const char *dump_sniff(const struct poll_fetch_result *res, char *why, size_t whysz)
{
    if (res->body_len == 0) {
        snprintf(why, whysz,
                 "empty dump: HTTP %ld with an empty body (the node's prof.dump failed; "
                 "is it running with MALLOC_CONF/JEMALLOC_CONF prof:true?)",
                 res->http_code);
        return why;
    }
    const char *b = res->body;
    size_t i = 0;
    while (i < res->body_len && i < 64 &&
           (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
        i++;
    bool html =
        strncasecmp(res->content_type, "text/html", 9) == 0 || (i < res->body_len && b[i] == '<');
    if (html) {
        char ex[120];
        size_t o = 0;
        for (size_t k = i; k < res->body_len && o + 1 < sizeof(ex) && k < i + 100; k++) {
            unsigned char ch = (unsigned char)b[k];
            ex[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
        }
        ex[o] = '\0';
        snprintf(why, whysz, "got an HTML page instead of a heap dump (Content-Type %s): %s",
                 res->content_type[0] ? res->content_type : "none", ex);
        return why;
    }
    return NULL;
}

static void backoff_cb(uv_timer_t *t)
{
    struct dnode *dn = hp_container_of(t, struct dnode, timer);
    struct job *j = dn->job;
    if (!j)
        return;
    if (j->d->stopping) {
        job_fail(j, HP_ERR(ECANCELED), "abandoned at shutdown while waiting to retry %s",
                 step_names[j->plan[j->cur]]);
        job_done(j);
        return;
    }
    job_start_step(j);
}

static void job_next_step(struct job *j)
{
    j->cur++;
    j->attempt = 1;
    if (j->cur >= j->nplan || j->d->stopping) {
        if (j->d->stopping && j->cur < j->nplan && !j->dump.data && j->status == 0)
            job_fail(j, HP_ERR(ECANCELED), "abandoned at shutdown before the dump was fetched");
        job_done(j);
        return;
    }
    job_start_step(j);
}

static void step_done_cb(struct poll_fetch_result *res, void *arg)
{
    struct job *j = arg;
    struct daemon *d = j->d;
    enum step s = j->plan[j->cur];
    char *url = step_url(j, s);
    char why[768], hint[1024];
    const char *fail = res->status < 0 ? res->error : NULL;
    int status = res->status;
    bool retryable = res->retryable;

    if (!fail && step_is_dump(s) && s != STEP_DUMP_PATH) {
        fail = dump_sniff(res, why, sizeof(why));
        if (fail) {
            status = HP_EFORMAT;
            retryable = res->body_len == 0; /* an empty dump may work next time */
        }
    }
    char *path = NULL;
    if (!fail && s == STEP_DUMP_PATH &&
        poll_doris_dump_path(res->body, res->body_len, &path) == 0) {
        char ex[160];
        size_t o = 0;
        for (size_t k = 0; k < res->body_len && o + 1 < sizeof(ex); k++) {
            unsigned char ch = (unsigned char)res->body[k];
            ex[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
        }
        ex[o] = '\0';
        snprintf(why, sizeof(why), "unexpected /jeheap/dump reply (no \"dump file path:\"): %s",
                 ex);
        fail = why;
        status = HP_EPARSE;
        retryable = false;
    }
    if (fail && s == STEP_DUMP_PATH && res->http_code == 500 && res->body &&
        strstr(res->body, "profiler is not enabled")) {
        snprintf(hint, sizeof(hint),
                 "%s (profiling is not active on the node: add activate=yes "
                 "to its line, or start it with prof_active:true)",
                 fail);
        fail = hint;
        retryable = false;
    }
    job_record_attempt(j, s, url, res, fail ? status : 0, fail);
    if (fail && s == STEP_ACTIVATE && res->http_code == 404 && !j->activate_old) {
        /* Older Doris releases name the switch /jeheap/prof/true. */
        j->activate_old = true;
        free(url);
        free(path);
        poll_fetch_result_free(res);
        job_start_step(j);
        return;
    }

    /* Only the dump is retried: figures are a snapshot beside it, and a node
     * that refuses /metrics would otherwise cost two backoffs before the
     * dump is even tried. */
    if (fail && status != HP_ERR(ECANCELED) && retryable && step_is_dump(s) &&
        j->attempt <= d->cfg->retries && !d->stopping) {
        /* Exponential backoff with full jitter in [base/2, base*1.5) * 2^(n-1). */
        uint64_t base = d->cfg->retry_base_ms << (j->attempt - 1);
        if (base > BACKOFF_MAX_MS)
            base = BACKOFF_MAX_MS;
        uint64_t delay = base / 2 + rng_below(d, base ? base : 1);
        if (HP_LOG_DEBUG <= hp_log_threshold) {
            struct hp_buf v = HP_BUF_INIT(0);
            (void)hp_logfmt_value(&v, fail);
            hp_log_debug("collector", "node=%s step=%s attempt=%u delay_ms=%llu err=%s msg=\"retrying\"",
                         j->node->name, step_names[s], j->attempt, (unsigned long long)delay,
                         v.data);
            hp_buf_release(&v);
        }
        j->attempt++;
        free(url);
        free(path);
        poll_fetch_result_free(res);
        (void)uv_timer_start(&j->dn->timer, backoff_cb, delay, 0);
        return;
    }

    if (fail) {
        if (status == HP_ERR(ECANCELED)) {
            job_fail(j, status, "%s", fail);
        } else if (!step_is_dump(s)) {
            /* Figures are a bonus: note the problem, keep going to the dump. */
            hp_err_printf(&j->fig_err, "%s: %s", step_names[s], fail);
        } else {
            job_fail(j, status, "%s", fail);
        }
        free(url);
        free(path);
        poll_fetch_result_free(res);
        if (step_is_dump(s) || status == HP_ERR(ECANCELED))
            job_done(j);
        else
            job_next_step(j);
        return;
    }

    size_t len = 0;
    switch (s) {
    case STEP_ACTIVATE: {
        j->activated_now = true;
        j->dn->activated_ms = hp_wall_ms();
        free(j->dn->activation_reply);
        size_t n = strcspn(res->body, "\r\n");
        j->dn->activation_reply = hp_xstrndup(res->body, HP_MIN(n, (size_t)200));
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, j->dn->activation_reply);
        hp_log_info("collector", "node=%s reply=%s msg=\"heap profiling activated\"",
                    j->node->name, v.data ? v.data : "\"\"");
        hp_buf_release(&v);
        break;
    }
    case STEP_METRICS:
        j->metrics.data = poll_fetch_result_detach_body(res, &j->metrics.len);
        break;
    case STEP_TRACKER:
        j->tracker.data = poll_fetch_result_detach_body(res, &j->tracker.len);
        break;
    case STEP_VARS:
        j->vars.data = poll_fetch_result_detach_body(res, &j->vars.len);
        break;
    case STEP_PROC:
        j->proc.data = poll_fetch_result_detach_body(res, &j->proc.len);
        break;
    case STEP_DUMP_PATH:
        j->remote_path = path;
        path = NULL;
        if (!j->node->agent) {
            job_fail(j, HP_ENOTFOUND,
                     "needs agent: the node wrote its dump to %s on its own disk, and Doris "
                     "cannot send the file over HTTP; add agent=HOST:PORT (the heapfleet agent "
                     "on that host) to fetch it",
                     j->remote_path);
            free(url);
            poll_fetch_result_free(res);
            job_done(j);
            return;
        }
        j->plan[j->nplan++] = STEP_AGENT_FILE;
        break;
    case STEP_DUMP:
    case STEP_AGENT_FILE:
        j->dump.data = poll_fetch_result_detach_body(res, &len);
        j->dump.len = len;
        j->dump_url = hp_xstrdup(url);
        j->dump_ctype = hp_xstrdup(res->content_type);
        j->dump_ms = res->elapsed_ms;
        break;
    }
    free(url);
    free(path);
    poll_fetch_result_free(res);
    job_next_step(j);
}

static void job_start_step(struct job *j)
{
    enum step s = j->plan[j->cur];
    const struct poll_node *n = j->node;
    char *url = step_url(j, s);
    bool to_agent = s == STEP_AGENT_FILE || n->kind == POLL_KIND_AGENT;
    struct poll_fetch_opts o = {
        .url = url,
        /* The node's credentials are for the node, never for its agent. */
        .user = to_agent ? NULL : n->user,
        .password = to_agent ? NULL : n->password,
        .tls_insecure = n->tls == POLL_TLS_INSECURE,
        .connect_timeout_ms = j->d->cfg->connect_timeout_ms,
        .total_timeout_ms = j->d->cfg->timeout_ms,
        .max_bytes =
            step_is_dump(s) ? j->d->cfg->max_body : HP_MIN(j->d->cfg->max_body, (uint64_t)64 << 20),
    };
    if (HP_LOG_DEBUG <= hp_log_threshold) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, url);
        hp_log_debug("collector", "node=%s step=%s attempt=%u url=%s msg=\"request\"", n->name,
                     step_names[s], j->attempt, v.data);
        hp_buf_release(&v);
    }
    int r = poll_fetch_start(j->d->fetcher, &o, step_done_cb, j);
    free(url);
    if (r < 0) {
        job_fail(j, r, "%s: cannot start the request: %s", step_names[s], hp_strerror(r));
        job_done(j);
    }
}

static void job_begin(struct dnode *dn)
{
    struct daemon *d = dn->d;
    struct job *j = hp_xcalloc(1, sizeof(*j));
    j->dn = dn;
    j->d = d;
    j->node = poll_node_dup(dn->cfg);
    j->round = d->round;
    j->attempt = 1;
    j->started_ms = hp_wall_ms();
    j->t0_ns = hp_now_ns();
    hp_buf_init(&j->fig_err, 0);
    dn->job = j;
    dn->state = DN_BUSY;
    job_plan(j);
    job_start_step(j);
}

/* ---- worker side ----------------------------------------------------------- */

static void work_cb(uv_work_t *w)
{
    struct job *j = hp_container_of(w, struct job, work);
    struct daemon *d = j->d;
    struct hp_buf err = HP_BUF_INIT(0);

    if (j->dump.data && d->parse) {
        int r = d->parse(j->dump.data, j->dump.len, &j->profile, &err);
        if (r < 0) {
            j->parse_error = hp_xstrdup(err.data ? err.data : hp_strerror(r));
            job_fail(j, r, "unparseable dump: %s", j->parse_error);
            j->profile = NULL;
        } else {
            double tot[PV_COUNT];
            profile_totals(j->profile, tot);
            j->nsamples = j->profile->nsamples;
            j->inuse_bytes = tot[PV_INUSE_SPACE];
            j->format = profile_format_name(j->profile->format);
        }
        hp_buf_reset(&err);
    }
    struct {
        struct body *b;
        const char *what;
        int (*fn)(const char *, size_t, struct poll_figures *, struct hp_buf *);
    } pages[] = {
        {&j->metrics, "metrics", poll_metrics_parse},
        {&j->tracker, "tracker", poll_tracker_parse},
        {&j->vars, "vars", poll_vars_parse},
        {&j->proc, "proc", poll_proc_parse},
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(pages); i++) {
        if (!pages[i].b->data)
            continue;
        if (pages[i].fn(pages[i].b->data, pages[i].b->len, &j->figures, &err) < 0)
            hp_err_printf(&j->fig_err, "%s: %s", pages[i].what, err.data ? err.data : "?");
        hp_buf_reset(&err);
    }

    if (j->dump.data) {
        /* The node's fields are only touched by its own job while it runs. */
        j->dump_hash = hp_hash_bytes(j->dump.data, j->dump.len, 0x6865617066) | 1;
        j->dump_unchanged =
            j->dn->last_dump_hash == j->dump_hash && j->dn->last_dump_len == j->dump.len;
    }
    struct collector_result res = {
        .node = j->node,
        .round = j->round,
        .started_ms = j->started_ms,
        .finished_ms = hp_wall_ms(),
        .status = j->status,
        .error = j->error,
        .dump = j->dump.data,
        .dump_len = j->dump.len,
        .dump_url = j->dump_url,
        .dump_content_type = j->dump_ctype,
        .remote_path = j->remote_path,
        .dump_ms = j->dump_ms,
        .dump_unchanged = j->dump_unchanged,
        .profile = j->profile,
        .parse_error = j->parse_error,
        .activated_ms = j->dn->activated_ms,
        .activation_reply = j->dn->activation_reply,
        .figures = &j->figures,
        .figures_error = j->fig_err.len ? j->fig_err.data : NULL,
        .attempts = j->attempts,
        .nattempts = j->nattempts,
    };
    if (d->sink) {
        uv_mutex_lock(&d->sink_mu);
        int r = d->sink->record(d->sink, &res, &err);
        uv_mutex_unlock(&d->sink_mu);
        if (r < 0)
            j->sink_error = hp_xstrdup(err.data ? err.data : hp_strerror(r));
    }
    hp_buf_release(&err);
    j->dump_len = j->dump.len;
    j->nfigures = j->figures.n;
    /* The raw bytes and the profile are kept by the sink now; free them here
     * so the loop thread never frees big structures. */
    profile_free(j->profile);
    j->profile = NULL;
    body_free(&j->dump);
    body_free(&j->metrics);
    body_free(&j->tracker);
    body_free(&j->vars);
    body_free(&j->proc);
    poll_figures_release(&j->figures);
}

static void after_work_cb(uv_work_t *w, int status)
{
    struct job *j = hp_container_of(w, struct job, work);
    struct daemon *d = j->d;
    struct dnode *dn = j->dn;
    uint64_t ms = (hp_now_ns() - j->t0_ns) / 1000000u;
    uint64_t bytes = 0;
    for (size_t i = 0; i < j->nattempts; i++)
        bytes += j->attempts[i].bytes;
    if (status == UV_ECANCELED && j->status == 0)
        job_fail(j, HP_ERR(ECANCELED), "abandoned at shutdown before it was processed");

    bool ok = j->status == 0;
    if (j->round == d->round) {
        d->round_bytes += bytes;
        if (ok)
            d->round_ok++;
        else
            d->round_failed++;
    }
    if (!ok)
        d->failed_total++;
    dn->consecutive_failures = ok ? 0 : dn->consecutive_failures + 1;
    if (j->dump_hash) {
        dn->last_dump_hash = j->dump_hash;
        dn->last_dump_len = j->dump_len;
    }
    if (ok) {
        char b1[32];
        hp_log_info("collector",
                    "node=%s kind=%s round=%llu status=ok ms=%llu dump_bytes=%zu format=%s "
                    "samples=%zu inuse=\"%s\" figures=%zu msg=\"snapshot\"",
                    j->node->name, poll_kind_name(j->node->kind), (unsigned long long)j->round,
                    (unsigned long long)ms, j->dump_len, j->format ? j->format : "unparsed",
                    j->nsamples, hp_fmt_bytes(j->inuse_bytes, b1, sizeof(b1)), j->nfigures);
        if (j->fig_err.len) {
            struct hp_buf v = HP_BUF_INIT(0);
            (void)hp_logfmt_value(&v, j->fig_err.data);
            hp_log_warn("collector", "node=%s err=%s msg=\"memory figures incomplete\"",
                        j->node->name, v.data);
            hp_buf_release(&v);
        }
    } else {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, j->error ? j->error : "?");
        hp_log_warn("collector",
                    "node=%s kind=%s round=%llu status=failed ms=%llu attempts=%zu "
                    "failed_in_a_row=%u err=%s msg=\"poll failed\"",
                    j->node->name, poll_kind_name(j->node->kind), (unsigned long long)j->round,
                    (unsigned long long)ms, j->nattempts, dn->consecutive_failures, v.data);
        hp_buf_release(&v);
    }
    if (j->sink_error) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, j->sink_error);
        hp_log_error("collector", "node=%s err=%s msg=\"could not record the snapshot\"",
                     j->node->name, v.data);
        hp_buf_release(&v);
    }
    uint64_t job_round = j->round;
    dn->job = NULL;
    dn->state = DN_IDLE;
    job_free(j);
    if (dn->next_cfg) {
        poll_node_free(dn->cfg);
        dn->cfg = dn->next_cfg;
        dn->next_cfg = NULL;
    }
    if (dn->removed) {
        dnode_unlink(d, dn);
        uv_close((uv_handle_t *)&dn->timer, dnode_close_cb);
    }
    if (job_round == d->round && d->round_pending)
        d->round_pending--;
    slot_release(d);
    round_check_done(d);
    shutdown_maybe_finish(d);
}

/* Hand the job to a worker thread: parse, read figures, record. */
static void job_done(struct job *j)
{
    if (j->status == 0 && !j->dump.data) /* never record "ok" without a dump */
        job_fail(j, HP_EHTTP, "no dump was fetched");
    int r = uv_queue_work(&j->d->loop, &j->work, work_cb, after_work_cb);
    if (r < 0) {
        hp_log_error("collector", "err=\"%s\" msg=\"uv_queue_work failed\"", uv_strerror(r));
        abort();
    }
}

/* ---- slots and the round ----------------------------------------------- */

static void slot_acquire_or_queue(struct dnode *dn)
{
    struct daemon *d = dn->d;
    if (d->active < d->cfg->max_inflight) {
        d->active++;
        job_begin(dn);
        return;
    }
    hp_log_debug("collector", "node=%s active=%zu msg=\"waiting for a free slot\"", dn->cfg->name,
                 d->active);
    dn->state = DN_QUEUED;
    dn->qnext = NULL;
    if (d->qtail)
        d->qtail->qnext = dn;
    else
        d->qhead = dn;
    d->qtail = dn;
}

static void slot_release(struct daemon *d)
{
    d->active--;
    while (d->qhead && !d->stopping && d->active < d->cfg->max_inflight) {
        struct dnode *dn = d->qhead;
        d->qhead = dn->qnext;
        if (!d->qhead)
            d->qtail = NULL;
        if (dn->removed) {
            /* Dropped from the list by a reload while it waited. */
            if (d->round_pending)
                d->round_pending--;
            dnode_unlink(d, dn);
            uv_close((uv_handle_t *)&dn->timer, dnode_close_cb);
            continue;
        }
        if (dn->next_cfg) {
            poll_node_free(dn->cfg);
            dn->cfg = dn->next_cfg;
            dn->next_cfg = NULL;
        }
        d->active++;
        job_begin(dn);
    }
}

static void start_cb(uv_timer_t *t)
{
    struct dnode *dn = hp_container_of(t, struct dnode, timer);
    if (dn->d->stopping || dn->state != DN_WAITING)
        return;
    slot_acquire_or_queue(dn);
}

static void round_log(struct daemon *d, bool final)
{
    double secs = (double)(hp_now_ns() - d->round_t0_ns) / 1e9;
    size_t done = d->round_ok + d->round_failed;
    char b1[32];
    hp_log_info("collector",
                "round=%llu nodes=%zu done=%zu ok=%zu failed=%zu skipped=%zu bytes=%llu "
                "secs=%.2f nodes_per_s=%.1f mb_per_s=%.1f msg=\"%s\"",
                (unsigned long long)d->round, d->round_total, done, d->round_ok, d->round_failed,
                d->round_skipped, (unsigned long long)d->round_bytes, secs,
                secs > 0 ? (double)done / secs : 0.0,
                secs > 0 ? (double)d->round_bytes / 1e6 / secs : 0.0,
                final ? "round finished" : "progress");
    if (final && d->cfg->once)
        fprintf(stdout, "round %llu: %zu nodes, %zu ok, %zu failed in %.2f s (%.1f nodes/s, %s)\n",
                (unsigned long long)d->round, d->round_total, d->round_ok, d->round_failed, secs,
                secs > 0 ? (double)done / secs : 0.0,
                hp_fmt_bytes((double)d->round_bytes, b1, sizeof(b1)));
}

static void progress_cb(uv_timer_t *t)
{
    struct daemon *d = hp_container_of(t, struct daemon, progress_timer);
    if (d->round_pending)
        round_log(d, false);
}

static void daemon_stop(struct daemon *d, const char *why);

static void round_check_done(struct daemon *d)
{
    if (d->round_pending || d->round == 0 || d->round_t0_ns == 0)
        return;
    round_log(d, true);
    d->round_t0_ns = 0;
    uv_timer_stop(&d->progress_timer);
    if (d->cfg->once && !d->stopping)
        daemon_stop(d, "round finished (--once)");
}

static void round_cb(uv_timer_t *t)
{
    struct daemon *d = hp_container_of(t, struct daemon, round_timer);
    if (d->stopping)
        return;
    if (d->round_t0_ns) {
        hp_log_warn("collector",
                    "round=%llu pending=%zu msg=\"previous round still running at the "
                    "next start; its busy nodes are skipped\"",
                    (unsigned long long)d->round, d->round_pending);
        round_log(d, true);
    }
    d->round++;
    d->round_t0_ns = hp_now_ns();
    d->round_total = d->round_pending = d->round_ok = d->round_failed = d->round_skipped = 0;
    d->round_bytes = 0;
    size_t n = 0;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (!dn->removed)
            n++;
    size_t i = 0;
    uint64_t slot = n ? d->spread_ms / n : 0;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (dn->removed)
            continue;
        d->round_total++;
        if (dn->state != DN_IDLE) {
            d->round_skipped++;
            hp_log_warn("collector", "node=%s msg=\"still busy from the previous round; skipped\"",
                        dn->cfg->name);
            i++;
            continue;
        }
        /* Node i starts at i/n of the spread window, plus jitter inside its
         * own slice, so 1,000 nodes never fire in the same second and the
         * order is stable from round to round. */
        uint64_t delay = d->spread_ms * i / (n ? n : 1) + rng_below(d, slot);
        dn->state = DN_WAITING;
        d->round_pending++;
        (void)uv_timer_start(&dn->timer, start_cb, delay, 0);
        i++;
    }
    hp_log_info("collector", "round=%llu nodes=%zu spread_ms=%llu msg=\"round started\"",
                (unsigned long long)d->round, d->round_total, (unsigned long long)d->spread_ms);
    if (d->cfg->progress)
        (void)uv_timer_start(&d->progress_timer, progress_cb, 2000, 2000);
    round_check_done(d);
}

/* ---- reload ----------------------------------------------------------------- */

struct reload {
    uv_work_t work;
    struct daemon *d;
    struct poll_nodelist *list;
    struct hp_buf err;
    size_t bad;
    int r;
};

static void reload_work_cb(uv_work_t *w)
{
    struct reload *rl = hp_container_of(w, struct reload, work);
    rl->r =
        poll_nodelist_load(rl->d->cfg->nodes_path, rl->d->cfg->strict ? POLL_NODELIST_STRICT : 0,
                           &rl->list, &rl->bad, &rl->err);
}

static void log_list_errors(const char *text, enum hp_log_level lvl)
{
    if (!text)
        return;
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, "\n");
        char *line = hp_xstrndup(p, n);
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, line);
        hp_log(lvl, "collector", "err=%s msg=\"bad node list line\"", v.data);
        hp_buf_release(&v);
        free(line);
        p += n;
        if (*p)
            p++;
    }
}

static void reload_after_cb(uv_work_t *w, int status)
{
    struct reload *rl = hp_container_of(w, struct reload, work);
    struct daemon *d = rl->d;
    d->reloading = false;
    if (status == 0 && rl->r == 0) {
        log_list_errors(rl->err.data, HP_LOG_WARN);
        if (!d->stopping)
            nodes_apply(d, rl->list);
    } else {
        log_list_errors(rl->err.data, HP_LOG_ERROR);
        hp_log_error("collector",
                     "path=%s err=\"%s\" msg=\"node list not reloaded; keeping the old one\"",
                     d->cfg->nodes_path, hp_strerror(rl->r));
    }
    poll_nodelist_free(rl->list);
    hp_buf_release(&rl->err);
    free(rl);
    shutdown_maybe_finish(d);
}

static void signal_cb(uv_signal_t *s, int signum)
{
    struct daemon *d = s->data;
    if (signum == SIGHUP) {
        if (d->reloading || d->stopping)
            return;
        hp_log_info("collector", "path=%s msg=\"SIGHUP: reloading the node list\"",
                    d->cfg->nodes_path);
        struct reload *rl = hp_xcalloc(1, sizeof(*rl));
        rl->d = d;
        hp_buf_init(&rl->err, 0);
        d->reloading = true;
        if (uv_queue_work(&d->loop, &rl->work, reload_work_cb, reload_after_cb) < 0) {
            d->reloading = false;
            free(rl);
        }
        return;
    }
    if (++d->signals_seen > 1) {
        hp_log_error("collector", "signal=%d msg=\"second signal: exiting now\"", signum);
        _exit(130);
    }
    daemon_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- shutdown ------------------------------------------------------------ */

static void grace_cb(uv_timer_t *t)
{
    struct daemon *d = hp_container_of(t, struct daemon, grace_timer);
    hp_log_error("collector",
                 "active=%zu msg=\"workers did not finish within the grace period; exiting\"",
                 d->active);
    _exit(3);
}

static void daemon_stop(struct daemon *d, const char *why)
{
    if (d->stopping)
        return;
    d->stopping = true;
    hp_log_info("collector", "reason=\"%s\" active=%zu msg=\"stopping\"", why, d->active);
    uv_timer_stop(&d->round_timer);
    uv_timer_stop(&d->progress_timer);
    /* Nodes waiting for their start time or a slot simply do not start. */
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (dn->state == DN_WAITING || dn->state == DN_QUEUED) {
            uv_timer_stop(&dn->timer);
            dn->state = DN_IDLE;
            if (d->round_pending)
                d->round_pending--;
        }
    }
    d->qhead = d->qtail = NULL;
    /* Jobs waiting to retry are abandoned now; transfers are cancelled. */
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (dn->job && uv_is_active((uv_handle_t *)&dn->timer)) {
            uv_timer_stop(&dn->timer);
            backoff_cb(&dn->timer);
        }
    poll_fetcher_cancel_all(d->fetcher);
    (void)uv_timer_start(&d->grace_timer, grace_cb, SHUTDOWN_GRACE_MS, 0);
    shutdown_maybe_finish(d);
}

static void shutdown_maybe_finish(struct daemon *d)
{
    if (!d->stopping || d->closed || d->active || d->reloading)
        return;
    d->closed = true;
    poll_fetcher_close(d->fetcher);
    d->fetcher = NULL;
    for (struct dnode *dn = d->nodes, *next; dn; dn = next) {
        next = dn->next;
        dnode_unlink(d, dn);
        uv_close((uv_handle_t *)&dn->timer, dnode_close_cb);
    }
    uv_close((uv_handle_t *)&d->round_timer, NULL);
    uv_close((uv_handle_t *)&d->progress_timer, NULL);
    uv_timer_stop(&d->grace_timer);
    uv_close((uv_handle_t *)&d->grace_timer, NULL);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    if (d->service_started) {
        d->cfg->service->stop(d->cfg->service);
        d->service_started = false;
    }
}

/* ---- run ------------------------------------------------------------------- */

int collector_daemon_run(const struct collector_config *cfg, struct collector_sink *sink,
                         collector_parse_fn *parse)
{
    int rc = 2;
    struct daemon *d = hp_xcalloc(1, sizeof(*d));
    struct poll_nodelist *list = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    bool loop_ready = false;
    d->cfg = cfg;
    d->sink = sink;
    d->parse = parse;
    d->rng = (uint64_t)hp_now_ns() ^ ((uint64_t)getpid() << 32) ^ UINT64_C(0x9e3779b97f4a7c15);
    if (cfg->spread_ms >= 0)
        d->spread_ms = (uint64_t)cfg->spread_ms;
    else
        d->spread_ms = cfg->once ? 0 : HP_MIN(cfg->interval_ms / 10, (uint64_t)SPREAD_MAX_MS);

    size_t bad = 0;
    int r = poll_nodelist_load(cfg->nodes_path, cfg->strict ? POLL_NODELIST_STRICT : 0, &list, &bad,
                               &err);
    if (err.len)
        fprintf(stderr, "%s\n", err.data);
    if (r < 0) {
        fprintf(stderr, "collector: %s: node list refused: %s%s\n", cfg->nodes_path, hp_strerror(r),
                cfg->strict && bad ? " (--strict and bad lines above)" : "");
        goto out;
    }
    if (bad)
        hp_log_warn("collector",
                    "path=%s bad_lines=%zu nodes=%zu msg=\"some node list lines were skipped\"",
                    cfg->nodes_path, bad, list->n);
    if (list->n == 0 && cfg->once) {
        fprintf(stderr, "collector: %s: no nodes to poll\n", cfg->nodes_path);
        goto out;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "collector: curl_global_init failed\n");
        goto out;
    }
    if (uv_loop_init(&d->loop) < 0 || uv_mutex_init(&d->sink_mu) < 0)
        goto out;
    loop_ready = true;
    r = poll_fetcher_new(&d->loop, cfg->max_inflight * 2, &d->fetcher);
    if (r < 0) {
        fprintf(stderr, "collector: cannot set up HTTP: %s\n", hp_strerror(r));
        goto out;
    }
    uv_timer_init(&d->loop, &d->round_timer);
    uv_timer_init(&d->loop, &d->progress_timer);
    uv_timer_init(&d->loop, &d->grace_timer);
    uv_unref((uv_handle_t *)&d->grace_timer);
    uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
    int signums[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < 3; i++) {
        uv_signal_init(&d->loop, sigs[i]);
        sigs[i]->data = d;
        uv_signal_start(sigs[i], signal_cb, signums[i]);
    }
    if (cfg->service) {
        hp_buf_reset(&err);
        r = cfg->service->start(cfg->service, &d->loop, &err);
        if (r < 0) {
            fprintf(stderr, "collector: %s\n", err.len ? err.data : hp_strerror(r));
            d->stopping = true;
            shutdown_maybe_finish(d); /* closes what was opened above */
            goto out;
        }
        d->service_started = true;
    }
    nodes_apply(d, list);
    poll_nodelist_free(list);
    list = NULL;
    hp_log_info("collector",
                "nodes=%zu interval_ms=%llu spread_ms=%llu max_inflight=%u once=%s msg=\"collector "
                "started\"",
                d->nnodes, (unsigned long long)cfg->interval_ms, (unsigned long long)d->spread_ms,
                cfg->max_inflight, cfg->once ? "yes" : "no");

    /* The first round starts now; later ones every interval. */
    if (cfg->once)
        uv_timer_start(&d->round_timer, round_cb, 0, 0);
    else
        uv_timer_start(&d->round_timer, round_cb, 0, cfg->interval_ms);

    uv_run(&d->loop, UV_RUN_DEFAULT);
    if (sink && sink->close) {
        sink->close(sink);
        sink = NULL;
    }
    rc = (cfg->once && (d->failed_total || d->round_ok == 0)) ? 1 : 0;
out:
    if (sink && sink->close)
        sink->close(sink);
    if (loop_ready) {
        if (!d->closed) /* startup failed after the loop existed */
            poll_fetcher_close(d->fetcher);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        int lr = uv_loop_close(&d->loop);
        if (lr != 0)
            hp_log_error("collector", "err=\"%s\" msg=\"loop closed with handles still open\"",
                         uv_strerror(lr));
        uv_mutex_destroy(&d->sink_mu);
        curl_global_cleanup();
    }
    poll_nodelist_free(list);
    hp_buf_release(&err);
    free(d);
    return rc;
}
