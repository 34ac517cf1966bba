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
#ifdef __GLIBC__
#include <malloc.h>
#endif
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
/* A poll whose snapshot the store lost (a PostgreSQL restart, a failed
 * commit) is polled again in its round, at most this many times, once the
 * store answers (asked every STORE_PROBE_MS), and not after the first three
 * quarters of the round (its polls would run into the next one). */
#define STORE_RETRY_MAX 2
#define STORE_PROBE_MS 500u
#define STORE_RETRY_ONCE_MS 30000u

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
        .max_decoded = (uint64_t)512 << 20,
        .max_ratio = POLL_MAX_RATIO_DEFAULT,
        .max_inflight_bytes = (uint64_t)2 << 30,
        .max_stacks = 500000,
        .max_frames = 1024,
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
    struct poll_membudget *charged; /* the budget len is charged to, or NULL */
};

struct job;
struct collector_daemon;

struct dnode {
    struct collector_daemon *d;
    struct poll_node *cfg;      /* current settings (owned) */
    struct poll_node *next_cfg; /* from a reload, applied when idle (owned) */
    bool removed;               /* gone from the list: free when idle */
    bool not_mine;              /* shared fleet: another collector polls it this round */
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
    /* collector_daemon_poll_now: told when the next job of this node ends
     * (set only while the node is queued or busy with that job). */
    collector_poll_done_cb *waiter_cb;
    void *waiter_arg;
    bool off_round; /* that job was asked for outside the schedule */
    bool fresh;     /* added by the last reload or discovery, not yet polled */
    bool store_wait;       /* DN_WAITING to poll again once the store answers */
    uint8_t store_retries; /* polls again this round after the store lost one */
};

struct job {
    struct dnode *dn;
    struct collector_daemon *d;
    struct poll_node *node; /* copy of the settings at job start */
    uint64_t round;
    bool off_round; /* asked for outside the schedule: not the round's */
    bool awaited;   /* someone waits for it: flush the sink after recording */
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
    uint64_t record_seq; /* which sink record call took it (daemon_record) */
};

/* An FE line and what it last said about its backends. */
struct fe_entry {
    struct poll_node *cfg;
    struct poll_backend *backends; /* from the last answer; kept when the FE fails */
    size_t nbackends;
    bool busy;
    bool answered; /* at least once since it was listed */
};

struct collector_daemon {
    uv_loop_t loop;
    const struct collector_config *cfg;
    struct collector_sink *sink;
    collector_parse_fn *parse;
    struct poll_fetcher *fetcher;
    struct poll_membudget membudget; /* cfg->max_inflight_bytes */
    uv_timer_t round_timer;
    uv_timer_t progress_timer;
    uv_timer_t unlogged_timer; /* looks again while snapshot lines wait */
    uv_timer_t grace_timer;
    size_t fleet_pending;       /* claims in flight (shared fleets) */
    uv_timer_t retry_timer;     /* asks the store again (nodes store_wait) */
    bool probe_pending;         /* sink->ready in flight */
    /* Shared fleets: the first round runs at start, in the round already
     * under way (its key, until claimed; 0 none), then the timer is set on
     * the interval's multiples (realign). */
    int64_t first_round_key;
    bool realign;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_mutex_t sink_mu;
    uint64_t records; /* sink record calls so far (under sink_mu) */
    /* "snapshot" log lines of polls whose record is not settled yet
     * (collector_sink.settled): loop thread only, oldest first. */
    struct unlogged {
        uint64_t seq;
        char *line;
        uint64_t round; /* the poll's, and whether it counts in it */
        bool counts;
        uint64_t at_ns; /* when it was queued (hp_now_ns) */
    } *unlogged;
    size_t nunlogged, unlogged_cap;
    uint64_t spread_ms;

    struct dnode *nodes;
    size_t nnodes;
    struct poll_nodelist *listed; /* the node list as loaded, FE lines included */
    struct fe_entry *fes;
    size_t nfes;
    size_t fe_pending;     /* discoveries in flight */
    size_t deletes_pending; /* delete_after_fetch requests in flight: the round waits */
    bool round_waiting_fe; /* a round starts when they are done */
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

static uint64_t rng_next(struct collector_daemon *d)
{
    /* xorshift64*: jitter only, not security. */
    d->rng ^= d->rng >> 12;
    d->rng ^= d->rng << 25;
    d->rng ^= d->rng >> 27;
    return d->rng * UINT64_C(2685821657736338717);
}

/* Uniform in [0, n). */
static uint64_t rng_below(struct collector_daemon *d, uint64_t n)
{
    return n ? rng_next(d) % n : 0;
}

/* A string as one logfmt value (bare, or quoted and escaped), in the
 * caller's buffer; cut to LOGQ_MAX with "..." so one log line stays one
 * line of bounded size. The daemon's one place for it. */
#define LOGQ_MAX 1024
struct logq {
    char s[LOGQ_MAX];
};

static const char *logq(struct logq *q, const char *v)
{
    struct hp_buf b = HP_BUF_INIT(0);
    if (hp_logfmt_value(&b, v ? v : "") < 0 || !b.data) {
        hp_buf_release(&b);
        return "\"\"";
    }
    if (b.len < sizeof(q->s)) {
        memcpy(q->s, b.data, b.len + 1);
    } else {
        size_t keep = sizeof(q->s) - 5;
        while (keep > 0 && b.data[keep - 1] == '\\')
            keep--; /* never leave a dangling escape */
        memcpy(q->s, b.data, keep);
        memcpy(q->s + keep, "...\"", 5);
        if (q->s[0] != '"') /* a bare value got long: it had no specials, quote it */
            q->s[keep + 3] = '\0';
    }
    hp_buf_release(&b);
    return q->s;
}

static void body_free(struct body *b)
{
    if (b->charged && b->data)
        poll_membudget_release(b->charged, b->len);
    b->charged = NULL;
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

static void dnode_unlink(struct collector_daemon *d, struct dnode *dn)
{
    if (dn->prev)
        dn->prev->next = dn->next;
    else
        d->nodes = dn->next;
    if (dn->next)
        dn->next->prev = dn->prev;
    d->nnodes--;
}

static struct dnode *dnode_add(struct collector_daemon *d, const struct poll_node *cfg)
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

static struct dnode *dnode_find(struct collector_daemon *d, const char *name)
{
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (!dn->removed && !strcmp(dn->cfg->name, name))
            return dn;
    return NULL;
}

/* Tell whoever asked for this node's poll how it ended, once. */
static void dnode_tell_waiter(struct dnode *dn, const struct collector_poll_outcome *o)
{
    collector_poll_done_cb *cb = dn->waiter_cb;
    void *arg = dn->waiter_arg;
    dn->waiter_cb = NULL;
    dn->waiter_arg = NULL;
    if (cb)
        cb(arg, o);
}

/* A poll asked for that will not run (it waited for a slot). */
static void dnode_tell_cancelled(struct dnode *dn, const char *why)
{
    int64_t now = hp_wall_ms();
    struct collector_poll_outcome o = {
        .node = dn->cfg->name,
        .status = HP_ERR(ECANCELED),
        .error = why,
        .started_ms = now,
        .finished_ms = now,
    };
    dn->off_round = false;
    dnode_tell_waiter(dn, &o);
}

/* Take a freshly loaded list: keep nodes by name, stage changed settings,
 * add new nodes, mark missing ones removed. Loop thread. */
static void slot_acquire_or_queue(struct dnode *dn);

/* A node that joins between rounds (a SIGHUP reload, an FE naming a new
 * backend) is polled now rather than at the next round, which may be an
 * hour away: a poll of its own outside the schedule, as
 * collector_daemon_poll_now makes. Not before the first round (it polls
 * every node), not while a round is about to start (it will), and not when
 * collectors share the fleet through the database (the claims decide who
 * polls a node). */
static void nodes_first_poll(struct collector_daemon *d)
{
    if (!d->round || d->round_waiting_fe || d->stopping || (d->sink && d->sink->claim))
        return;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (!dn->fresh)
            continue;
        dn->fresh = false;
        if (dn->removed || dn->state != DN_IDLE)
            continue;
        hp_log_info("collector", "node=%s msg=\"new node: polling it now, not at the next "
                                 "round\"",
                    dn->cfg->name);
        dn->off_round = true;
        slot_acquire_or_queue(dn);
    }
}

static void nodes_apply(struct collector_daemon *d, const struct poll_nodelist *l)
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
            dnode_add(d, &l->nodes[i])->fresh = true;
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
    if (added)
        nodes_first_poll(d);
}

/* ---- FE discovery -------------------------------------------------------- */

static void fe_entries_free(struct fe_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        poll_node_free(v[i].cfg);
        poll_backends_free(v[i].backends, v[i].nbackends);
    }
    free(v);
}

/* The nodes to poll: the listed ones, then each FE line's backends as its
 * last answer gave them (a name already listed wins). Loop thread. */
static void nodes_merge_apply(struct collector_daemon *d)
{
    const struct poll_nodelist *l = d->listed;
    struct poll_nodelist m = {0};
    size_t cap = 0, nlisted = 0;
    for (size_t i = 0; l && i < l->n; i++) {
        if (poll_kind_is_fe(l->nodes[i].kind))
            continue;
        m.nodes = hp_xgrow(m.nodes, &cap, m.n + 1, sizeof(*m.nodes));
        m.nodes[m.n++] = l->nodes[i]; /* borrowed: not freed below */
        nlisted++;
    }
    for (size_t f = 0; f < d->nfes; f++) {
        const struct fe_entry *fe = &d->fes[f];
        for (size_t b = 0; b < fe->nbackends; b++) {
            struct poll_node *n = poll_fe_backend_node(fe->cfg, &fe->backends[b]);
            bool clash = false;
            for (size_t k = 0; k < m.n && !clash; k++)
                clash = !strcmp(m.nodes[k].name, n->name);
            if (clash) {
                hp_log_warn("collector", "fe=%s node=%s msg=\"discovered backend has the name of "
                                         "a listed node; the listed one is kept\"",
                            fe->cfg->name, n->name);
                poll_node_free(n);
                continue;
            }
            m.nodes = hp_xgrow(m.nodes, &cap, m.n + 1, sizeof(*m.nodes));
            m.nodes[m.n++] = *n;
            free(n); /* members now owned by m.nodes[] */
        }
    }
    nodes_apply(d, &m);
    for (size_t i = nlisted; i < m.n; i++) {
        struct poll_node *n = hp_xcalloc(1, sizeof(*n));
        *n = m.nodes[i];
        poll_node_free(n);
    }
    free(m.nodes);
}

/* Take a freshly loaded list (owned): FE lines keep what they discovered
 * while their name stays, then the merged node set is applied. */
static void nodes_take_list(struct collector_daemon *d, struct poll_nodelist *l)
{
    size_t nf = 0;
    for (size_t i = 0; i < l->n; i++)
        nf += poll_kind_is_fe(l->nodes[i].kind);
    struct fe_entry *fes = nf ? hp_xcalloc(nf, sizeof(*fes)) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (!poll_kind_is_fe(l->nodes[i].kind))
            continue;
        struct fe_entry *e = &fes[k++];
        e->cfg = poll_node_dup(&l->nodes[i]);
        for (size_t o = 0; o < d->nfes; o++)
            if (!strcmp(d->fes[o].cfg->name, e->cfg->name)) {
                e->backends = d->fes[o].backends;
                e->nbackends = d->fes[o].nbackends;
                e->busy = d->fes[o].busy;
                e->answered = d->fes[o].answered;
                d->fes[o].backends = NULL;
                d->fes[o].nbackends = 0;
            }
    }
    fe_entries_free(d->fes, d->nfes);
    d->fes = fes;
    d->nfes = nf;
    poll_nodelist_free(d->listed);
    d->listed = l;
    nodes_merge_apply(d);
}

static void round_begin(struct collector_daemon *d);
static void round_claim_or_begin(struct collector_daemon *d);
static void shutdown_maybe_finish(struct collector_daemon *d);

/* An FE failure is recorded on the FE line's own name, so `query nodes`
 * shows it next to the backends; the store is written off the loop. */
struct fe_failure {
    uv_work_t work;
    struct collector_daemon *d;
    struct poll_node *fe;
    char *error;
    uint64_t round;
    int64_t at_ms;
};

/* Worker thread: one result to the health figures and the sink (one
 * record at a time: sinks need no locks of their own). */
static int daemon_record(struct collector_daemon *d, const struct collector_result *res,
                         bool flush, uint64_t *ret_seq, struct hp_buf *err)
{
    if (d->cfg->health)
        collector_health_note(d->cfg->health, res);
    if (!d->sink)
        return 0;
    uv_mutex_lock(&d->sink_mu);
    int r = d->sink->record(d->sink, res, err);
    if (ret_seq)
        *ret_seq = ++d->records;
    else
        d->records++;
    /* Someone waits to read what was just recorded: make it visible now
     * rather than when the batch fills or the daemon goes idle. */
    if (flush && d->sink->flush)
        d->sink->flush(d->sink);
    uv_mutex_unlock(&d->sink_mu);
    return r;
}

static void fe_failure_work_cb(uv_work_t *w)
{
    struct fe_failure *ff = hp_container_of(w, struct fe_failure, work);
    struct collector_result res = {
        .node = ff->fe,
        .round = ff->round,
        .started_ms = ff->at_ms,
        .finished_ms = hp_wall_ms(),
        .status = HP_EHTTP,
        .error = ff->error,
    };
    struct hp_buf err = HP_BUF_INIT(0);
    int r = daemon_record(ff->d, &res, false, NULL, &err);
    if (r < 0)
        hp_log_error("collector", "fe=%s err=\"%s\" msg=\"could not record the FE failure\"",
                     ff->fe->name, err.data ? err.data : hp_strerror(r));
    hp_buf_release(&err);
}

static void fe_failure_after_cb(uv_work_t *w, int status)
{
    (void)status;
    struct fe_failure *ff = hp_container_of(w, struct fe_failure, work);
    poll_node_free(ff->fe);
    free(ff->error);
    free(ff);
}

struct fe_ctx {
    struct collector_daemon *d;
    char *name;
    int64_t started_ms;
};

static void fe_done_cb(struct poll_fe_result *res, void *arg)
{
    struct fe_ctx *c = arg;
    struct collector_daemon *d = c->d;
    struct fe_entry *e = NULL;
    for (size_t i = 0; i < d->nfes; i++)
        if (!strcmp(d->fes[i].cfg->name, c->name))
            e = &d->fes[i];
    if (e)
        e->busy = false;
    if (e && res->status == 0) {
        size_t dead = 0, decom = 0;
        for (size_t i = 0; i < res->n; i++) {
            dead += !res->backends[i].alive;
            decom += res->backends[i].decommissioned;
        }
        hp_log_info("collector",
                    "fe=%s answered_by=%s backends=%zu dead=%zu decommissioned=%zu "
                    "msg=\"backends discovered\"",
                    e->cfg->name, res->answered_by ? res->answered_by : "?", res->n, dead, decom);
        poll_backends_free(e->backends, e->nbackends);
        e->backends = res->backends;
        e->nbackends = res->n;
        e->answered = true;
        res->backends = NULL;
        res->n = 0;
    } else if (e && res->status != -ECANCELED) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, res->error);
        hp_log_error("collector",
                     "fe=%s known_backends=%zu err=%s msg=\"FE discovery failed; keeping the "
                     "backends it named before\"",
                     e->cfg->name, e->nbackends, v.data);
        hp_buf_release(&v);
        if (d->sink && !d->stopping) {
            struct fe_failure *ff = hp_xcalloc(1, sizeof(*ff));
            ff->d = d;
            ff->fe = poll_node_dup(e->cfg);
            ff->error = hp_xasprintf("FE discovery failed: %s", res->error);
            ff->round = d->round + 1;
            ff->at_ms = c->started_ms;
            if (uv_queue_work(&d->loop, &ff->work, fe_failure_work_cb, fe_failure_after_cb) < 0)
                fe_failure_after_cb(&ff->work, 0);
        }
    }
    poll_fe_result_release(res);
    free(c->name);
    free(c);
    if (d->fe_pending)
        d->fe_pending--;
    if (d->fe_pending)
        return;
    if (!d->stopping)
        nodes_merge_apply(d);
    if (d->round_waiting_fe) {
        d->round_waiting_fe = false;
        if (!d->stopping)
            round_begin(d);
    }
    shutdown_maybe_finish(d);
}

/* Ask every FE line that is not already being asked. Loop thread. */
static void fe_discover_all(struct collector_daemon *d)
{
    for (size_t i = 0; i < d->nfes; i++) {
        struct fe_entry *e = &d->fes[i];
        if (e->busy)
            continue;
        struct fe_ctx *c = hp_xcalloc(1, sizeof(*c));
        c->d = d;
        c->name = hp_xstrdup(e->cfg->name);
        c->started_ms = hp_wall_ms();
        e->busy = true;
        d->fe_pending++;
        int r = poll_fe_discover(d->fetcher, e->cfg, d->cfg->timeout_ms, fe_done_cb, c);
        if (r < 0) {
            e->busy = false;
            d->fe_pending--;
            free(c->name);
            free(c);
            hp_log_error("collector", "fe=%s err=\"%s\" msg=\"cannot ask the FE\"",
                         e->cfg->name, hp_strerror(r));
        }
    }
}

/* ---- jobs -------------------------------------------------------------- */

static void job_start_step(struct job *j);
static void job_done(struct job *j);
static void slot_release(struct collector_daemon *d);
static void round_check_done(struct collector_daemon *d);
static void shutdown_maybe_finish(struct collector_daemon *d);

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
            if (n->process && s == STEP_DUMP) {
                char *esc = poll_url_escape(n->process);
                char *u = hp_xasprintf("%s://%s%s?prefix=%s", sc, n->agent, path, esc);
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

/* How one finished step is judged: its failure in words (NULL when it
 * succeeded), the error code, whether another try may help, and the dump
 * path a Doris /jeheap/dump reply named. The message buffers live here so
 * `fail` may point into them. */
struct step_outcome {
    const char *fail;
    int status;
    bool retryable;
    char *path;
    char why[768], hint[1024];
};

/* What the loop does once a step's result has been released. */
enum step_next { NEXT_STEP, NEXT_REPEAT, NEXT_RETRY, NEXT_DONE };

/* Classify: a transport/HTTP failure, a body that is no dump, a Doris
 * reply without its path, profiling switched off on the node. */
static void step_classify(enum step s, const struct poll_fetch_result *res,
                          struct step_outcome *o)
{
    o->fail = res->status < 0 ? res->error : NULL;
    o->status = res->status;
    o->retryable = res->retryable;
    o->path = NULL;
    if (!o->fail && step_is_dump(s) && s != STEP_DUMP_PATH) {
        o->fail = dump_sniff(res, o->why, sizeof(o->why));
        if (o->fail) {
            o->status = HP_EFORMAT;
            o->retryable = res->body_len == 0; /* an empty dump may work next time */
        }
    }
    if (!o->fail && s == STEP_DUMP_PATH &&
        poll_doris_dump_path(res->body, res->body_len, &o->path) == 0) {
        char ex[160];
        size_t n = 0;
        for (size_t k = 0; k < res->body_len && n + 1 < sizeof(ex); k++) {
            unsigned char ch = (unsigned char)res->body[k];
            ex[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
        }
        ex[n] = '\0';
        snprintf(o->why, sizeof(o->why),
                 "unexpected /jeheap/dump reply (no \"dump file path:\"): %s", ex);
        o->fail = o->why;
        o->status = HP_EPARSE;
        o->retryable = false;
    }
    if (o->fail && s == STEP_DUMP_PATH && res->http_code == 500 && res->body &&
        strstr(res->body, "profiler is not enabled")) {
        snprintf(o->hint, sizeof(o->hint),
                 "%s (profiling is not active on the node: add activate=yes "
                 "to its line, or start it with prof_active:true)",
                 o->fail);
        o->fail = o->hint;
        o->retryable = false;
    }
}

/* Retry: only the dump is retried (figures are a snapshot beside it, and a
 * node that refuses /metrics would otherwise cost two backoffs before the
 * dump is even tried). True with the backoff delay when it should be. */
static bool step_retry(struct job *j, enum step s, const struct step_outcome *o,
                       uint64_t *ret_delay)
{
    struct collector_daemon *d = j->d;
    if (!o->fail || o->status == HP_ERR(ECANCELED) || !o->retryable || !step_is_dump(s) ||
        j->attempt > d->cfg->retries || d->stopping)
        return false;
    /* Exponential backoff with full jitter in [base/2, base*1.5) * 2^(n-1). */
    uint64_t base = d->cfg->retry_base_ms << (j->attempt - 1);
    if (base > BACKOFF_MAX_MS)
        base = BACKOFF_MAX_MS;
    uint64_t delay = base / 2 + rng_below(d, base ? base : 1);
    struct logq q;
    hp_log_debug("collector", "node=%s step=%s attempt=%u delay_ms=%llu err=%s msg=\"retrying\"",
                 j->node->name, step_names[s], j->attempt, (unsigned long long)delay,
                 logq(&q, o->fail));
    *ret_delay = delay;
    return true;
}

/* A failure that is not retried: the dump's ends the job; a figure page's
 * is noted and the job goes on to the dump. */
static enum step_next step_give_up(struct job *j, enum step s, const struct step_outcome *o)
{
    if (o->status == HP_ERR(ECANCELED) || step_is_dump(s)) {
        job_fail(j, o->status, "%s", o->fail);
        return NEXT_DONE;
    }
    hp_err_printf(&j->fig_err, "%s: %s", step_names[s], o->fail); /* figures are a bonus */
    return NEXT_STEP;
}

/* Keep what a successful step brought. */
static enum step_next step_keep(struct job *j, enum step s, struct poll_fetch_result *res,
                                const char *url, struct step_outcome *o)
{
    size_t len = 0;
    switch (s) {
    case STEP_ACTIVATE: {
        j->activated_now = true;
        j->dn->activated_ms = hp_wall_ms();
        free(j->dn->activation_reply);
        size_t n = strcspn(res->body, "\r\n");
        j->dn->activation_reply = hp_xstrndup(res->body, HP_MIN(n, (size_t)200));
        struct logq q;
        hp_log_info("collector", "node=%s reply=%s msg=\"heap profiling activated\"",
                    j->node->name, logq(&q, j->dn->activation_reply));
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
        j->remote_path = o->path;
        o->path = NULL;
        if (!j->node->agent) {
            job_fail(j, HP_ENOTFOUND,
                     "needs agent: the node wrote its dump to %s on its own disk, and Doris "
                     "cannot send the file over HTTP; add agent=HOST:PORT (the heapfleet agent "
                     "on that host) to fetch it",
                     j->remote_path);
            return NEXT_DONE;
        }
        j->plan[j->nplan++] = STEP_AGENT_FILE;
        break;
    case STEP_DUMP:
    case STEP_AGENT_FILE:
        j->dump.data = poll_fetch_result_detach_body(res, &len);
        j->dump.len = len;
        /* Held until the worker is done with it: still the round's bytes. */
        poll_membudget_charge(&j->d->membudget, len);
        j->dump.charged = &j->d->membudget;
        j->dump_url = hp_xstrdup(url);
        j->dump_ctype = hp_xstrdup(res->content_type);
        j->dump_ms = res->elapsed_ms;
        break;
    }
    return NEXT_STEP;
}

/* One step's transfer ended: classify -> retry -> keep, one cleanup. */
static void step_done_cb(struct poll_fetch_result *res, void *arg)
{
    struct job *j = arg;
    enum step s = j->plan[j->cur];
    char *url = step_url(j, s);
    struct step_outcome o;
    enum step_next next;
    uint64_t delay = 0;

    step_classify(s, res, &o);
    job_record_attempt(j, s, url, res, o.fail ? o.status : 0, o.fail);
    if (o.fail && s == STEP_ACTIVATE && res->http_code == 404 && !j->activate_old) {
        /* Older Doris releases name the switch /jeheap/prof/true. */
        j->activate_old = true;
        next = NEXT_REPEAT;
        goto out;
    }
    if (step_retry(j, s, &o, &delay)) {
        j->attempt++;
        next = NEXT_RETRY;
        goto out;
    }
    next = o.fail ? step_give_up(j, s, &o) : step_keep(j, s, res, url, &o);
out:
    free(url);
    free(o.path);
    poll_fetch_result_free(res);
    switch (next) {
    case NEXT_STEP:
        job_next_step(j);
        break;
    case NEXT_REPEAT:
        job_start_step(j);
        break;
    case NEXT_RETRY:
        (void)uv_timer_start(&j->dn->timer, backoff_cb, delay, 0);
        break;
    case NEXT_DONE:
        job_done(j);
        break;
    }
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
        .bearer = to_agent ? n->token : NULL,
        .tls_insecure = n->tls == POLL_TLS_INSECURE,
        .redirects = n->redirects,
        .ca_file = n->ca_file,
        .cert_file = n->cert_file,
        .key_file = n->key_file,
        .connect_timeout_ms = j->d->cfg->connect_timeout_ms,
        .total_timeout_ms = j->d->cfg->timeout_ms,
        .max_bytes = step_is_dump(s) ? n->max_body ? n->max_body : j->d->cfg->max_body
                                     : HP_MIN(j->d->cfg->max_body, (uint64_t)64 << 20),
        .max_decoded = step_is_dump(s) ? n->max_decoded ? n->max_decoded : j->d->cfg->max_decoded
                                       : HP_MIN(j->d->cfg->max_decoded, (uint64_t)64 << 20),
        .max_ratio = n->max_ratio ? n->max_ratio : j->d->cfg->max_ratio,
        .budget = &j->d->membudget,
    };
    struct logq q;
    hp_log_debug("collector", "node=%s step=%s attempt=%u url=%s msg=\"request\"", n->name,
                 step_names[s], j->attempt, logq(&q, url));
    int r = poll_fetch_start(j->d->fetcher, &o, step_done_cb, j);
    free(url);
    if (r < 0) {
        job_fail(j, r, "%s: cannot start the request: %s", step_names[s], hp_strerror(r));
        job_done(j);
    }
}

static void job_begin(struct dnode *dn)
{
    struct collector_daemon *d = dn->d;
    struct job *j = hp_xcalloc(1, sizeof(*j));
    j->dn = dn;
    j->d = d;
    j->node = poll_node_dup(dn->cfg);
    j->round = d->round;
    j->off_round = dn->off_round;
    j->awaited = dn->waiter_cb != NULL;
    j->attempt = 1;
    j->started_ms = hp_wall_ms();
    j->t0_ns = hp_now_ns();
    hp_buf_init(&j->fig_err, 0);
    dn->job = j;
    dn->state = DN_BUSY;
    if (j->node->fe_state == POLL_FE_DEAD) {
        /* Listed with its status, not polled: a dead BE only times out. */
        job_fail(j, HP_ENOTFOUND, "the FE %s reports this backend Alive=false; not polled",
                 j->node->fe_line ? j->node->fe_line : "");
        job_done(j);
        return;
    }
    job_plan(j);
    job_start_step(j);
}

/* ---- worker side ----------------------------------------------------------- */

static void work_cb(uv_work_t *w)
{
    struct job *j = hp_container_of(w, struct job, work);
    struct collector_daemon *d = j->d;
    struct hp_buf err = HP_BUF_INIT(0);

    if (j->dump.data && d->parse) {
        const struct collector_parse_limits lim = {
            .max_stacks = j->node->max_stacks ? j->node->max_stacks : d->cfg->max_stacks,
            .max_frames = j->node->max_frames ? j->node->max_frames : d->cfg->max_frames,
        };
        int r = d->parse(j->dump.data, j->dump.len, &lim, &j->profile, &err);
        if (r < 0) {
            j->parse_error = hp_xstrdup(err.data ? err.data : hp_strerror(r));
            job_fail(j, r, "unparseable dump: %s", j->parse_error);
            j->profile = NULL;
            /* Not a profile at all (a login page, another service's answer):
             * the error's short escaped excerpt is all that is kept. A broken
             * profile is kept raw, for the bug report. */
            if (r == HP_EFORMAT)
                body_free(&j->dump);
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
    int r = daemon_record(d, &res, j->awaited, &j->record_seq, &err);
    if (r < 0)
        j->sink_error = hp_xstrdup(err.data ? err.data : hp_strerror(r));
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

/* delete_after_fetch=yes: once the dump is stored, ask the agent to delete
 * it from the BE host (Doris never deletes its /jeheap/dump files). Fire
 * and log: a failure only leaves the file for the agent's --keep. */
struct delete_ctx {
    struct collector_daemon *d;
    char *node;
    char *path;
};

static void delete_done_cb(struct poll_fetch_result *res, void *arg)
{
    struct delete_ctx *c = arg;
    struct logq qf, qe;
    if (res->status == 0)
        hp_log_info("collector", "node=%s file=%s msg=\"agent deleted the stored dump\"", c->node,
                    logq(&qf, c->path));
    else if (res->status != -ECANCELED)
        hp_log_warn("collector", "node=%s file=%s err=%s msg=\"agent did not delete the dump\"",
                    c->node, logq(&qf, c->path),
                    logq(&qe, res->error[0] ? res->error : hp_strerror(res->status)));
    poll_fetch_result_free(res);
    struct collector_daemon *d = c->d;
    free(c->node);
    free(c->path);
    free(c);
    d->deletes_pending--;
    round_check_done(d);
}

static void delete_after_fetch(struct collector_daemon *d, const struct job *j)
{
    const struct poll_node *n = j->node;
    if (!n->delete_after_fetch || !n->agent || !j->remote_path || d->stopping || !d->fetcher)
        return;
    char *esc = poll_url_escape(j->remote_path);
    char *url = hp_xasprintf("%s://%s%s%s", scheme_of(n), n->agent, POLL_AGENT_PATH_DELETE, esc);
    free(esc);
    struct delete_ctx *c = hp_xcalloc(1, sizeof(*c));
    c->d = d;
    c->node = hp_xstrdup(n->name);
    c->path = hp_xstrdup(j->remote_path);
    struct poll_fetch_opts o = {
        .url = url,
        .bearer = n->token,
        .method = "POST",
        .tls_insecure = n->tls == POLL_TLS_INSECURE,
        .ca_file = n->ca_file,
        .cert_file = n->cert_file,
        .key_file = n->key_file,
        .connect_timeout_ms = d->cfg->connect_timeout_ms,
        .total_timeout_ms = d->cfg->timeout_ms,
        .max_bytes = 64 << 10,
    };
    d->deletes_pending++;
    if (poll_fetch_start(d->fetcher, &o, delete_done_cb, c) < 0) {
        d->deletes_pending--;
        hp_log_warn("collector", "node=%s msg=\"cannot ask the agent to delete the dump\"",
                    n->name);
        free(c->node);
        free(c->path);
        free(c);
    }
    free(url);
}

/* ---- polls the store lost: again in their round ------------------------ */

static void round_check_done(struct collector_daemon *d);
static void shutdown_maybe_finish(struct collector_daemon *d);
static void store_probe(struct collector_daemon *d);

/* How long into a round a lost poll may still be made again: three
 * quarters of the interval (--once: STORE_RETRY_ONCE_MS, not a whole
 * interval of waiting for a database that is gone). */
static uint64_t store_retry_budget_ns(const struct collector_daemon *d)
{
    uint64_t ms = d->cfg->once || !d->cfg->interval_ms ? STORE_RETRY_ONCE_MS
                                                       : d->cfg->interval_ms / 4 * 3;
    return ms * 1000000u;
}

/* May a poll of `round` whose snapshot the store lost be made again? Only
 * one the current round counts, while that round is in its first three
 * quarters, STORE_RETRY_MAX times per node and round. */
static bool store_retry_allowed(const struct collector_daemon *d, const struct dnode *dn,
                                uint64_t round, bool counts)
{
    if (!dn || !counts || d->stopping || dn->removed || round != d->round || !d->round_t0_ns ||
        dn->store_retries >= STORE_RETRY_MAX)
        return false;
    return hp_now_ns() - d->round_t0_ns < store_retry_budget_ns(d);
}

/* The node (idle, pending in its round again) waits for the store. */
static void store_retry_start(struct collector_daemon *d, struct dnode *dn)
{
    dn->store_retries++;
    dn->store_wait = true;
    dn->state = DN_WAITING;
    hp_log_warn("collector",
                "node=%s round=%llu retry=%u msg=\"the store lost this poll's snapshot; polling "
                "the node again in this round once the store answers\"",
                dn->cfg->name, (unsigned long long)d->round, (unsigned)dn->store_retries);
    store_probe(d);
}

/* The nodes still waiting for the store are failures of their round. */
static void store_wait_give_up(struct collector_daemon *d, const char *why)
{
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (!dn->store_wait)
            continue;
        dn->store_wait = false;
        if (dn->state != DN_WAITING)
            continue;
        dn->state = DN_IDLE;
        d->round_failed++;
        d->failed_total++;
        if (d->round_pending)
            d->round_pending--;
        hp_log_error("collector", "node=%s round=%llu status=not_stored msg=\"not polled again: %s\"",
                     dn->cfg->name, (unsigned long long)d->round, why);
        dnode_tell_cancelled(dn, why);
    }
}

static void retry_timer_cb(uv_timer_t *t)
{
    store_probe(hp_container_of(t, struct collector_daemon, retry_timer));
}

struct store_probe {
    uv_work_t work;
    struct collector_daemon *d;
    int r;
    struct hp_buf err;
};

static void store_probe_work_cb(uv_work_t *w)
{
    struct store_probe *p = hp_container_of(w, struct store_probe, work);
    struct collector_sink *sink = p->d->sink;
    p->r = sink && sink->ready ? sink->ready(sink, &p->err) : 0;
}

static void store_probe_after_cb(uv_work_t *w, int status)
{
    struct store_probe *p = hp_container_of(w, struct store_probe, work);
    struct collector_daemon *d = p->d;
    d->probe_pending = false;
    if (!d->stopping && status == 0 && p->r == 0) {
        for (struct dnode *dn = d->nodes; dn; dn = dn->next)
            if (dn->store_wait && dn->state == DN_WAITING) {
                dn->store_wait = false;
                slot_acquire_or_queue(dn);
            }
    } else if (!d->stopping) {
        if (!d->round_t0_ns || hp_now_ns() - d->round_t0_ns >= store_retry_budget_ns(d)) {
            struct hp_buf why = HP_BUF_INIT(0);
            hp_buf_printf(&why, "the store did not answer within the round (%s)",
                          p->err.data ? p->err.data : hp_strerror(p->r));
            store_wait_give_up(d, why.data);
            hp_buf_release(&why);
            round_check_done(d);
        } else {
            hp_log_debug("collector", "err=\"%s\" msg=\"the store does not answer yet\"",
                         p->err.data ? p->err.data : "?");
            (void)uv_timer_start(&d->retry_timer, retry_timer_cb, STORE_PROBE_MS, 0);
        }
    }
    hp_buf_release(&p->err);
    free(p);
    shutdown_maybe_finish(d);
}

/* Ask the sink (on a worker) whether the store takes writes again. */
static void store_probe(struct collector_daemon *d)
{
    if (d->probe_pending || d->stopping || uv_is_active((uv_handle_t *)&d->retry_timer))
        return;
    struct store_probe *p = hp_xcalloc(1, sizeof(*p));
    p->d = d;
    hp_buf_init(&p->err, 0);
    d->probe_pending = true;
    if (uv_queue_work(&d->loop, &p->work, store_probe_work_cb, store_probe_after_cb) < 0) {
        hp_log_error("collector", "msg=\"uv_queue_work failed\"");
        abort();
    }
}

static void unlogged_cb(uv_timer_t *t);

/* Log the "snapshot" lines of polls whose record the sink has settled
 * (committed, or reported lost with its batch); keep the rest until it has.
 * Loop thread. */
static void snapshot_log_settled(struct collector_daemon *d)
{
    uint64_t settled = d->sink && d->sink->settled ? d->sink->settled(d->sink) : UINT64_MAX;
    size_t k = 0;
    for (; k < d->nunlogged && d->unlogged[k].seq <= settled; k++) {
        if (d->sink && d->sink->lost && d->sink->lost(d->sink, d->unlogged[k].seq)) {
            /* Its write batch failed to commit (the sink said why). */
            const char *at = d->unlogged[k].line + strlen("node=");
            char *name = hp_xstrndup(at, strcspn(at, " "));
            hp_log_error("collector", "node=%s status=not_stored msg=\"snapshot lost with "
                                      "its write batch\"",
                         name);
            /* It counted as stored in its round: now it is pending again. */
            struct dnode *dn = dnode_find(d, name);
            if (store_retry_allowed(d, dn, d->unlogged[k].round, d->unlogged[k].counts) &&
                dn->state == DN_IDLE) {
                if (d->round_ok)
                    d->round_ok--;
                d->round_pending++;
                store_retry_start(d, dn);
            }
            free(name);
        } else {
            hp_log_info("collector", "%s", d->unlogged[k].line);
        }
        free(d->unlogged[k].line);
    }
    if (k)
        memmove(d->unlogged, d->unlogged + k, (d->nunlogged - k) * sizeof(*d->unlogged));
    d->nunlogged -= k;
    /* A batch the sink commits on another thread (its re-symbolization
     * pass commits before writing) settles lines while no poll ends. */
    if (d->nunlogged && !d->stopping && d->sink)
        (void)uv_timer_start(&d->unlogged_timer, unlogged_cb, 250, 0);
}

/* How long a finished poll's record may wait in an open write batch while
 * other polls are still in flight (the sink's own bound, BATCH_MS, is only
 * checked when a record arrives): one node hanging until its timeout kept
 * the round's snapshots unlogged and unseen by readers for that long. */
#define UNLOGGED_FLUSH_MS 1000

static void unlogged_cb(uv_timer_t *t)
{
    struct collector_daemon *d = hp_container_of(t, struct collector_daemon, unlogged_timer);
    /* Never waits: a worker holding the sink is recording, and that
     * record commits a batch this old itself. */
    if (d->nunlogged && d->sink && d->sink->flush &&
        hp_now_ns() - d->unlogged[0].at_ns >= UNLOGGED_FLUSH_MS * 1000000u &&
        uv_mutex_trylock(&d->sink_mu) == 0) {
        d->sink->flush(d->sink);
        uv_mutex_unlock(&d->sink_mu);
    }
    snapshot_log_settled(d);
}

/* A poll's "snapshot" line (owned), logged once its record is durable:
 * a crash between the two must not leave a line for a snapshot the store
 * does not have. */
static void snapshot_log(struct collector_daemon *d, const struct job *j, char *line)
{
    d->unlogged = hp_xgrow(d->unlogged, &d->unlogged_cap, d->nunlogged + 1, sizeof(*d->unlogged));
    d->unlogged[d->nunlogged++] =
        (struct unlogged){ j->record_seq, line, j->round, !j->off_round, hp_now_ns() };
    snapshot_log_settled(d);
}

static void after_work_cb(uv_work_t *w, int status)
{
    struct logq q;
    struct job *j = hp_container_of(w, struct job, work);
    struct collector_daemon *d = j->d;
    struct dnode *dn = j->dn;
    uint64_t ms = (hp_now_ns() - j->t0_ns) / 1000000u;
    uint64_t bytes = 0;
    for (size_t i = 0; i < j->nattempts; i++)
        bytes += j->attempts[i].bytes;
    if (status == UV_ECANCELED && j->status == 0)
        job_fail(j, HP_ERR(ECANCELED), "abandoned at shutdown before it was processed");

    bool ok = j->status == 0;
    /* A dump fetched but not stored (the database went away mid-round) is
     * a failure of the round: its summary and the "snapshot" lines must not
     * claim what the store does not have. The node itself answered, so its
     * failures in a row are not counted up. */
    bool stored = ok && !j->sink_error;
    /* ... unless the node is polled again in the round once the store
     * answers: then the round waits for that poll instead. */
    bool again = ok && j->sink_error && store_retry_allowed(d, dn, j->round, !j->off_round);
    if (j->round == d->round && !j->off_round && !again) {
        d->round_bytes += bytes;
        if (stored)
            d->round_ok++;
        else
            d->round_failed++;
    }
    if (!stored && !again) /* --once exits 1 */
        d->failed_total++;
    dn->consecutive_failures = ok ? 0 : dn->consecutive_failures + 1;
    if (j->dump_hash) {
        dn->last_dump_hash = j->dump_hash;
        dn->last_dump_len = j->dump_len;
    }
    if (stored) {
        char b1[32];
        char *line = hp_xasprintf(
            "node=%s kind=%s round=%llu status=ok ms=%llu dump_bytes=%zu format=%s "
            "samples=%zu inuse=\"%s\" figures=%zu msg=\"snapshot\"",
            j->node->name, poll_kind_name(j->node->kind), (unsigned long long)j->round,
            (unsigned long long)ms, j->dump_len, j->format ? j->format : "unparsed", j->nsamples,
            hp_fmt_bytes(j->inuse_bytes, b1, sizeof(b1)), j->nfigures);
        snapshot_log(d, j, line);
        if (j->fig_err.len) {
            hp_log_warn("collector", "node=%s err=%s msg=\"memory figures incomplete\"",
                        j->node->name, logq(&q, j->fig_err.data));
        }
    } else if (!ok) {
        hp_log_warn("collector",
                    "node=%s kind=%s round=%llu status=failed ms=%llu attempts=%zu "
                    "failed_in_a_row=%u err=%s msg=\"poll failed\"",
                    j->node->name, poll_kind_name(j->node->kind), (unsigned long long)j->round,
                    (unsigned long long)ms, j->nattempts, dn->consecutive_failures,
                    logq(&q, j->error ? j->error : "?"));
    }
    if (j->sink_error)
        hp_log_error("collector",
                     "node=%s kind=%s round=%llu status=%s ms=%llu err=%s "
                     "msg=\"could not record the snapshot\"",
                     j->node->name, poll_kind_name(j->node->kind), (unsigned long long)j->round,
                     ok ? "not_stored" : "failed", (unsigned long long)ms,
                     logq(&q, j->sink_error));
    if (ok && !j->sink_error && d->sink)
        delete_after_fetch(d, j);
    uint64_t job_round = j->round;
    bool job_counts = !j->off_round;
    dn->job = NULL;
    dn->state = DN_IDLE;
    if (dn->waiter_cb && !again) { /* else told when the poll made again ends */
        int st = ok && j->sink_error ? HP_ESTORE : j->status;
        const char *why = j->error;
        if (ok && j->sink_error)
            why = "the dump was fetched but could not be stored (the collector's log says why)";
        struct collector_poll_outcome o = {
            .node = j->node->name,
            .status = st,
            .error = st ? (why ? why : hp_strerror(st)) : NULL,
            .started_ms = j->started_ms,
            .finished_ms = hp_wall_ms(),
            .nattempts = j->nattempts,
        };
        dnode_tell_waiter(dn, &o);
    }
    dn->off_round = false;
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
    if (again)
        store_retry_start(d, dn); /* still pending in its round */
    else if (job_round == d->round && job_counts && d->round_pending)
        d->round_pending--;
    slot_release(d);
    if (d->active == 0 && d->sink && d->sink->flush) {
        /* Idle: what the sink batched becomes durable now, not at the next
         * poll (and before a --once round reports itself finished). */
        uv_mutex_lock(&d->sink_mu);
        d->sink->flush(d->sink);
        uv_mutex_unlock(&d->sink_mu);
    }
    snapshot_log_settled(d);
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
    struct collector_daemon *d = dn->d;
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

static void slot_release(struct collector_daemon *d)
{
    d->active--;
    while (d->qhead && !d->stopping && d->active < d->cfg->max_inflight) {
        struct dnode *dn = d->qhead;
        d->qhead = dn->qnext;
        if (!d->qhead)
            d->qtail = NULL;
        if (dn->removed) {
            /* Dropped from the list by a reload while it waited. */
            if (d->round_pending && !dn->off_round)
                d->round_pending--;
            dnode_tell_cancelled(dn, "the node was removed from the node list");
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

static void round_log(struct collector_daemon *d, bool final)
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
    struct collector_daemon *d = hp_container_of(t, struct collector_daemon, progress_timer);
    if (d->round_pending)
        round_log(d, false);
}

static void daemon_stop(struct collector_daemon *d, const char *why);

static void round_check_done(struct collector_daemon *d)
{
    if (d->round_pending || d->deletes_pending || d->round == 0 || d->round_t0_ns == 0)
        return;
    round_log(d, true);
#ifdef __GLIBC__
    /* Give back what the round's dumps and parses left free in the
     * arenas, not only at their tops (see main.c on arenas). */
    (void)malloc_trim(0);
#endif
    d->round_t0_ns = 0;
    uv_timer_stop(&d->progress_timer);
    if (d->cfg->once && !d->stopping)
        daemon_stop(d, "round finished (--once)");
}

/* ---- shared fleets: claims and heartbeats (daemon.h, collector_sink) ---- */

struct fleet_work {
    uv_work_t work;
    struct collector_daemon *d;
    int64_t round_key;
    char **names;
    bool *mine;
    size_t n;
    int r;
    struct hp_buf err;
};

static void fleet_work_cb(uv_work_t *w)
{
    struct fleet_work *fw = hp_container_of(w, struct fleet_work, work);
    struct collector_sink *sink = fw->d->sink;
    fw->r = sink->claim(sink, fw->round_key, (const char *const *)fw->names, fw->n, fw->mine,
                        &fw->err);
}

static void fleet_after_cb(uv_work_t *w, int status)
{
    struct fleet_work *fw = hp_container_of(w, struct fleet_work, work);
    struct collector_daemon *d = fw->d;
    d->fleet_pending--;
    if (status == 0 && fw->r < 0)
        hp_log_warn("collector",
                    "round_key=%lld err=\"%s\" msg=\"claiming this round's nodes failed; "
                    "polling none\"",
                    (long long)fw->round_key, fw->err.data ? fw->err.data : "?");
    {
        /* Nodes listed since the claim went out were not claimed: skipped. */
        for (struct dnode *dn = d->nodes; dn; dn = dn->next)
            dn->not_mine = true;
        size_t mine = 0;
        for (size_t i = 0; i < fw->n; i++) {
            struct dnode *dn = status == 0 && fw->r == 0 && fw->mine[i]
                                   ? dnode_find(d, fw->names[i])
                                   : NULL;
            if (dn) {
                dn->not_mine = false;
                mine++;
            }
        }
        hp_log_info("collector", "round_key=%lld nodes=%zu mine=%zu msg=\"claimed\"",
                    (long long)fw->round_key, fw->n, mine);
        if (!d->stopping)
            round_begin(d);
    }
    for (size_t i = 0; i < fw->n; i++)
        free(fw->names[i]);
    free(fw->names);
    free(fw->mine);
    hp_buf_release(&fw->err);
    free(fw);
    shutdown_maybe_finish(d);
}

static void fleet_queue(struct collector_daemon *d, struct fleet_work *fw)
{
    fw->d = d;
    hp_buf_init(&fw->err, 0);
    d->fleet_pending++;
    int r = uv_queue_work(&d->loop, &fw->work, fleet_work_cb, fleet_after_cb);
    if (r < 0) {
        hp_log_error("collector", "err=\"%s\" msg=\"uv_queue_work failed\"", uv_strerror(r));
        abort();
    }
}

/* The round's number among collectors sharing the fleet: rounds start on
 * multiples of the interval (collector_daemon_run aligns them). A timer may
 * fire a little early (the wall clock and the loop's clock differ) or late
 * (a loaded machine): a quarter interval early to three quarters late still
 * names the same round. */
static int64_t round_key_now(const struct collector_daemon *d)
{
    int64_t iv = (int64_t)(d->cfg->interval_ms ? d->cfg->interval_ms : 1);
    return (hp_wall_ms() + iv / 4) / iv;
}

static void round_claim_or_begin(struct collector_daemon *d)
{
    if (!d->sink || !d->sink->claim) {
        round_begin(d);
        return;
    }
    struct fleet_work *fw = hp_xcalloc(1, sizeof(*fw));
    fw->round_key = d->first_round_key ? d->first_round_key : round_key_now(d);
    d->first_round_key = 0;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (!dn->removed)
            fw->n++;
    fw->names = hp_xcalloc(fw->n + 1, sizeof(*fw->names));
    fw->mine = hp_xcalloc(fw->n + 1, sizeof(*fw->mine));
    size_t i = 0;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next)
        if (!dn->removed)
            fw->names[i++] = hp_xstrdup(dn->cfg->name);
    fleet_queue(d, fw);
}

/* Every round asks the FEs first; the round starts when they answered or
 * failed (a failed FE keeps its backends). */
static void round_cb(uv_timer_t *t)
{
    struct collector_daemon *d = hp_container_of(t, struct collector_daemon, round_timer);
    if (d->stopping)
        return;
    if (d->realign) { /* the first round: the next ones on the interval's multiples */
        d->realign = false;
        uint64_t iv = d->cfg->interval_ms;
        uv_timer_start(&d->round_timer, round_cb, iv - (uint64_t)hp_wall_ms() % iv, iv);
    }
    if (d->nfes) {
        d->round_waiting_fe = true;
        fe_discover_all(d);
        if (d->fe_pending)
            return;
        d->round_waiting_fe = false;
    }
    round_claim_or_begin(d);
}

static void round_begin(struct collector_daemon *d)
{
    store_wait_give_up(d, "the next round started first");
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
        if (dn->not_mine) { /* another collector polls it this round */
            dn->not_mine = false;
            i++;
            continue;
        }
        d->round_total++;
        dn->store_retries = 0;
        if (dn->state != DN_IDLE) {
            d->round_skipped++;
            hp_log_warn("collector",
                        "node=%s msg=\"still busy (the previous round, or a poll on request); "
                        "skipped\"",
                        dn->cfg->name);
            i++;
            continue;
        }
        /* Node i starts at i/n of the spread window, plus jitter inside its
         * own slice, so 1,000 nodes never fire in the same second and the
         * order is stable from round to round. */
        uint64_t delay = d->spread_ms * i / (n ? n : 1) + rng_below(d, slot);
        dn->state = DN_WAITING;
        dn->fresh = false; /* the round polls it */
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

/* ---- polls on request (collector_daemon_poll_now) ------------------------ */

/* " (did you mean \"be-17\"?)" when a node's name is close to `name`:
 * a third of the name or less and at most 3 edits, as the query CLI's. */
static void node_hint(struct collector_daemon *d, const char *name, struct hp_buf *err)
{
    size_t len = strlen(name);
    size_t best = len / 3 < 3 ? len / 3 + 1 : 4;
    const char *best_name = NULL;
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (dn->removed)
            continue;
        size_t dist = hp_edit_distance(name, dn->cfg->name);
        if (dist < best) {
            best = dist;
            best_name = dn->cfg->name;
        }
    }
    if (best_name)
        (void)hp_buf_printf(err, " (did you mean \"%s\"?)", best_name);
}

int collector_daemon_poll_now(struct collector_daemon *d, const char *node,
                              collector_poll_done_cb *cb, void *arg, struct hp_buf *err)
{
    if (d->stopping) {
        hp_err_printf(err, "the collector is stopping");
        return HP_ERR(ECANCELED);
    }
    struct dnode *dn = dnode_find(d, node);
    if (!dn) {
        bool fe = false;
        for (size_t i = 0; i < d->nfes && !fe; i++)
            fe = !strcmp(d->fes[i].cfg->name, node);
        if (fe) {
            hp_err_printf(err, "\"%s\" is an FE line: it names backends, it has no heap of "
                               "its own to poll",
                          node);
        } else {
            hp_err_printf(err, "no node \"%s\" in the node list", node);
            node_hint(d, node, err);
        }
        return HP_ENOTFOUND;
    }
    if (dn->state == DN_BUSY) {
        int64_t ago = dn->job ? (hp_wall_ms() - dn->job->started_ms) / 1000 : 0;
        hp_err_printf(err, "a poll of %s is already running (started %lld s ago); its snapshot "
                           "will be in the node's list when it ends",
                      dn->cfg->name, (long long)(ago > 0 ? ago : 0));
        return HP_ERR(EBUSY);
    }
    if (dn->state == DN_QUEUED) {
        hp_err_printf(err, "a poll of %s is already waiting for a free slot (%zu polls "
                           "running, --max-inflight %u)",
                      dn->cfg->name, d->active, d->cfg->max_inflight);
        return HP_ERR(EBUSY);
    }
    /* A node waiting for its start in this round starts now: that is the
     * round's poll, only earlier. An idle one gets a poll of its own. */
    if (dn->state == DN_WAITING)
        uv_timer_stop(&dn->timer);
    else
        dn->off_round = true;
    dn->waiter_cb = cb;
    dn->waiter_arg = arg;
    hp_log_info("collector", "node=%s off_round=%s msg=\"poll requested\"", dn->cfg->name,
                dn->off_round ? "yes" : "no");
    slot_acquire_or_queue(dn);
    return 0;
}

/* ---- reload ----------------------------------------------------------------- */

struct reload {
    uv_work_t work;
    struct collector_daemon *d;
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
        struct logq q;
        hp_log(lvl, "collector", "err=%s msg=\"bad node list line\"", logq(&q, line));
        free(line);
        p += n;
        if (*p)
            p++;
    }
}

static void reload_after_cb(uv_work_t *w, int status)
{
    struct reload *rl = hp_container_of(w, struct reload, work);
    struct collector_daemon *d = rl->d;
    d->reloading = false;
    if (status == 0 && rl->r == 0) {
        log_list_errors(rl->err.data, HP_LOG_WARN);
        if (!d->stopping) {
            nodes_take_list(d, rl->list);
            rl->list = NULL;
            fe_discover_all(d); /* SIGHUP asks the FEs again */
        }
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
    struct collector_daemon *d = s->data;
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
    struct collector_daemon *d = hp_container_of(t, struct collector_daemon, grace_timer);
    hp_log_error("collector",
                 "active=%zu msg=\"workers did not finish within the grace period; exiting\"",
                 d->active);
    _exit(3);
}

static void daemon_stop(struct collector_daemon *d, const char *why)
{
    if (d->stopping)
        return;
    d->stopping = true;
    hp_log_info("collector", "reason=\"%s\" active=%zu msg=\"stopping\"", why, d->active);
    uv_timer_stop(&d->round_timer);
    uv_timer_stop(&d->progress_timer);
    uv_timer_stop(&d->unlogged_timer); /* the close settles the rest */
    uv_timer_stop(&d->retry_timer);
    /* Nodes waiting for their start time or a slot simply do not start. */
    for (struct dnode *dn = d->nodes; dn; dn = dn->next) {
        if (dn->state == DN_WAITING || dn->state == DN_QUEUED) {
            uv_timer_stop(&dn->timer);
            dn->state = DN_IDLE;
            dn->store_wait = false;
            if (d->round_pending && !dn->off_round)
                d->round_pending--;
            dnode_tell_cancelled(dn, "the collector is stopping");
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

static void shutdown_maybe_finish(struct collector_daemon *d)
{
    if (!d->stopping || d->closed || d->active || d->reloading || d->fleet_pending ||
        d->probe_pending)
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
    uv_close((uv_handle_t *)&d->unlogged_timer, NULL);
    uv_close((uv_handle_t *)&d->retry_timer, NULL);
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
    struct collector_daemon *d = hp_xcalloc(1, sizeof(*d));
    struct poll_nodelist *list = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    bool loop_ready = false;
    d->cfg = cfg;
    d->sink = sink;
    d->parse = parse;
    d->membudget.limit = cfg->max_inflight_bytes ? cfg->max_inflight_bytes : UINT64_MAX;
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
    uv_timer_init(&d->loop, &d->unlogged_timer);
    uv_timer_init(&d->loop, &d->retry_timer);
    uv_timer_init(&d->loop, &d->grace_timer);
    uv_unref((uv_handle_t *)&d->grace_timer);
    uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
    int signums[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < 3; i++) {
        uv_signal_init(&d->loop, sigs[i]);
        sigs[i]->data = d;
        uv_signal_start(sigs[i], signal_cb, signums[i]);
    }
    /* A client that resets its connection while the web server writes to it
     * must cost an EPIPE on that socket, not the process (exit 141). */
    signal(SIGPIPE, SIG_IGN);
    if (cfg->service) {
        hp_buf_reset(&err);
        r = cfg->service->start(cfg->service, &d->loop, d, &err);
        if (r < 0) {
            fprintf(stderr, "collector: %s\n", err.len ? err.data : hp_strerror(r));
            d->stopping = true;
            shutdown_maybe_finish(d); /* closes what was opened above */
            goto out;
        }
        d->service_started = true;
    }
    nodes_take_list(d, list);
    list = NULL;
    hp_log_info("collector",
                "nodes=%zu interval_ms=%llu spread_ms=%llu max_inflight=%u once=%s msg=\"collector "
                "started\"",
                d->nnodes, (unsigned long long)cfg->interval_ms, (unsigned long long)d->spread_ms,
                cfg->max_inflight, cfg->once ? "yes" : "no");

    /* The first round starts now; later ones every interval. Collectors
     * sharing a fleet run later rounds on multiples of the interval, so
     * their rounds (and round keys) line up. Their first round starts now
     * too (a collector started or taking over with --interval 1h must not be
     * blind for up to an hour), as part of the round already under way: it
     * claims under that round's key, and the database grants no node another
     * collector claimed in it (never twice in a round). With less than a
     * quarter of that round left (its polls would run into the next one) it
     * waits for the next multiple instead: at most a quarter interval. */
    uint64_t iv = cfg->interval_ms;
    if (cfg->once || !iv) {
        uv_timer_start(&d->round_timer, round_cb, 0, 0);
    } else if (sink && sink->claim) {
        int64_t now = hp_wall_ms();
        uint64_t left = iv - (uint64_t)now % iv;
        if (left >= iv / 4) {
            d->first_round_key = now / (int64_t)iv;
            d->realign = true;
            uv_timer_start(&d->round_timer, round_cb, 0, 0);
        } else {
            uv_timer_start(&d->round_timer, round_cb, left, iv);
        }
    } else {
        uv_timer_start(&d->round_timer, round_cb, 0, iv);
    }

    uv_run(&d->loop, UV_RUN_DEFAULT);
    if (sink && sink->close) {
        sink->close(sink); /* commits the last batch (or says it was lost) */
        sink = NULL;
    }
    d->sink = NULL; /* closed: what is left was settled by the close */
    snapshot_log_settled(d);
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
    poll_nodelist_free(d->listed);
    fe_entries_free(d->fes, d->nfes);
    for (size_t i = 0; i < d->nunlogged; i++)
        free(d->unlogged[i].line);
    free(d->unlogged);
    hp_buf_release(&err);
    free(d);
    return rc;
}
