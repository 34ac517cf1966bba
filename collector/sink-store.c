/* The SQLite sink: keeps every poll result in the store (store/store.h).
 *
 * Runs on a libuv worker thread; the daemon never calls record twice at once,
 * so the sink owns one writer connection and one symbolizer without locks.
 * Each fetched dump is symbolized here, once per binary: the symbolizer keeps
 * what it resolved in memory and in the store's symbol cache (keyed by
 * build-id), so the next hourly profile of the same binary resolves from the
 * cache. The raw dump is stored in the same transaction as everything derived
 * from it; a dump that did not parse is stored raw with its error, so a later
 * `query reindex` can re-derive it. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/collector-internal.h"
#include "collector/poll/poll.h"
#include "collector/sym/sym.h"
#include "store/profile.h"

struct store_sink {
    struct collector_sink base;
    struct store *st;
    struct symbolizer *sym;
    struct sym_cache_ops cache_ops;
    struct hp_arena cache_arena; /* strings of the last cache answer */
    uint64_t stored, failed;
    struct store_retain_policy retain;
    int64_t last_retain_ms; /* 0: not yet this run */
    size_t batched;         /* records in the open write batch */
    int64_t batch_t0_ms;    /* when it opened */
    /* Collectors sharing a fleet (PostgreSQL): a second connection for
     * claims, heartbeats and /metrics, which run beside record. */
    struct store *fleet;
    pthread_mutex_t fleet_mu;
    struct store_collector_row me; /* under fleet_mu */
    pthread_t hb_thread;
    pthread_cond_t hb_cond;
    bool hb_stop; /* under fleet_mu */
    uint64_t hb_ms;
};

/* Write batching (issue 20): up to BATCH_MAX records, or what BATCH_MS
 * brings, share one transaction (store_batch_begin): one WAL commit instead
 * of one per snapshot. The daemon flushes when no poll is in flight, so an
 * idle collector holds nothing uncommitted; a reader sees a snapshot at most
 * BATCH_MS after it was recorded in a busy round. */
#define BATCH_MAX 32
#define BATCH_MS 1000

/* Commit the open batch. 0, or <0 with err: its records were not stored. */
static int batch_commit(struct store_sink *s, struct hp_buf *err)
{
    size_t n = s->batched;
    s->batched = 0;
    if (!store_batch_open(s->st))
        return 0;
    int r = store_batch_commit(s->st, err);
    if (r < 0)
        hp_log_error("sink", "snapshots=%zu err=\"%s\" msg=\"a write batch was lost\"", n,
                     err->data ? err->data : "?");
    return r;
}

static void store_sink_flush(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    struct hp_buf err = HP_BUF_INIT(0);
    (void)batch_commit(s, &err);
    hp_buf_release(&err);
}

/* Retention runs on the store's own schedule: at most hourly, between two
 * records (the sink is the only writer, so this needs no lock), in bounded
 * transactions that keep readers going (store_retain). */
#define RETAIN_EVERY_MS (3600 * 1000)

static void maybe_retain(struct store_sink *s)
{
    if (!s->retain.retain_s && !s->retain.thin_after_s)
        return;
    int64_t now = hp_wall_ms();
    if (s->last_retain_ms && now - s->last_retain_ms < RETAIN_EVERY_MS)
        return;
    s->last_retain_ms = now;
    struct store_retain_result res;
    struct hp_buf err = HP_BUF_INIT(0);
    /* Retention runs its own transactions. */
    if (batch_commit(s, &err) < 0)
        hp_buf_reset(&err);
    if (store_retain(s->st, &s->retain, now, &res, &err) < 0)
        hp_log_warn("sink", "msg=\"retention failed: %s\"", err.data ? err.data : "?");
    else if (res.snapshots_deleted)
        hp_log_info("sink", "deleted=%lld pages_freed=%lld msg=\"retention\"",
                    (long long)res.snapshots_deleted, (long long)res.pages_freed);
    hp_buf_release(&err);
}

static int cache_load_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame **ret_frames, uint32_t *ret_n)
{
    struct store_sink *s = ctx;
    /* Frames of one answer live until the next call (sym.h's contract). */
    hp_arena_release(&s->cache_arena);
    struct profile_frame *frames = NULL;
    uint32_t n = 0;
    int r = store_symcache_get(s->st, build_id, vaddr, &s->cache_arena, &frames, &n, NULL);
    if (r == 1) {
        *ret_frames = frames;
        *ret_n = n;
    }
    return r;
}

static int cache_save_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame *frames, uint32_t n)
{
    struct store_sink *s = ctx;
    return store_symcache_put(s->st, build_id, vaddr, frames, n, NULL);
}

static const char *unit_of(const char *name)
{
    /* Units as the series name states them (Prometheus naming rules). */
    const char *brace = strchr(name, '{');
    size_t n = brace ? (size_t)(brace - name) : strlen(name);
    if (n >= 6 && memcmp(name + n - 6, "_bytes", 6) == 0)
        return "bytes";
    if (n >= 4 && memcmp(name + n - 4, "_num", 4) == 0)
        return "count";
    return NULL;
}

static enum store_status failure_status(const struct collector_result *r)
{
    if (r->dump && r->parse_error)
        return STORE_STATUS_PARSE_FAILED;
    if (r->status == HP_ETOOBIG)
        return STORE_STATUS_TOO_BIG;
    if (r->error && (strstr(r->error, "not enabled") || strstr(r->error, "not activ")))
        return STORE_STATUS_INACTIVE;
    return STORE_STATUS_FETCH_FAILED;
}

static void fleet_metrics(struct store_sink *s, struct hp_buf *out);

/* The store sink's own figures for /metrics: those of the collectors sharing
 * a fleet (PostgreSQL); nothing otherwise. The collector's health (rounds,
 * polls, poll times) is health.c's. */
void collector_storesink_metrics(struct collector_sink *base, struct hp_buf *out)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    if (s->fleet)
        fleet_metrics(s, out);
}

/* Coverage: the share of in-use bytes whose every frame outside the
 * allocator has a name (anonymous addresses, JIT code, count as unnamed).
 * NaN for an empty profile. */
static double named_ratio(const struct profile *p)
{
    double all = 0, named = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *sm = &p->samples[i];
        const struct profile_stack *stk = &p->stacks[sm->stack];
        double v = sm->value[PV_INUSE_SPACE];
        bool ok = true;
        for (uint32_t k = 0; k < stk->n && ok; k++) {
            const struct profile_location *l = &p->locs[p->stack_locs[stk->off + k]];
            if (!(l->flags & PROFILE_LOC_ALLOCATOR) && l->nframes == 0)
                ok = false;
        }
        all += v;
        if (ok)
            named += v;
    }
    return all > 0 ? named / all : NAN;
}

/* Each object left without names, with what every source said, into the
 * snapshot's hint (stored with it; shown by query, the API and the UI). */
static void unnamed_note(struct profile *p, const struct sym_stats *st)
{
    struct hp_buf b = HP_BUF_INIT(0);
    if (p->hint)
        hp_buf_puts(&b, p->hint);
    size_t n = 0;
    for (size_t i = 0; i < st->nobjects; i++) {
        const struct sym_object_status *o = &st->objects[i];
        if (o->used || o->addresses == 0 || o->resolved > 0 || strstr(o->message, "names only"))
            continue;
        if (n++ >= 8) /* the first few; the log has them all */
            continue;
        hp_buf_printf(&b, "%sunnamed %s%s%s%s: %s", b.len ? "; " : "", o->path,
                      o->build_id[0] ? " (build-id " : "", o->build_id,
                      o->build_id[0] ? ")" : "", o->message);
    }
    if (n > 8)
        hp_buf_printf(&b, "; and %zu more unnamed objects", n - 8);
    if (n)
        p->hint = profile_intern(p, b.data, b.len);
    hp_buf_release(&b);
}

static int store_sink_record(struct collector_sink *base, const struct collector_result *r,
                             struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    maybe_retain(s);
    const struct poll_node *node = r->node;
    struct hp_buf labels = HP_BUF_INIT(0);
    for (size_t i = 0; i < node->nlabels; i++)
        hp_buf_printf(&labels, "%s%s=%s", i ? " " : "", node->labels[i].key,
                      node->labels[i].value);
    struct store_node_info ni = {
        .name = node->name,
        .kind = poll_kind_name(node->kind),
        .address = node->addr,
        .labels = labels.data,
    };
    int64_t node_id = 0, snap_id = 0;
    struct store_stat *stats = NULL;
    size_t nstats = 0;
    if (!store_batch_open(s->st)) {
        struct hp_buf berr = HP_BUF_INIT(0);
        if (store_batch_begin(s->st, &berr) < 0) /* then one transaction per record */
            hp_log_warn("sink", "err=\"%s\" msg=\"cannot open a write batch\"",
                        berr.data ? berr.data : "?");
        else
            s->batch_t0_ms = hp_wall_ms();
        hp_buf_release(&berr);
    }
    int rc = store_node_upsert(s->st, &ni, &node_id, err);
    if (rc < 0)
        goto out;
    if (r->figures && r->figures->n) {
        stats = hp_xcalloc(r->figures->n, sizeof(*stats));
        for (size_t i = 0; i < r->figures->n; i++) {
            stats[nstats].name = r->figures->v[i].name;
            stats[nstats].unit = unit_of(r->figures->v[i].name);
            stats[nstats].value = r->figures->v[i].value;
            nstats++;
        }
    }
    struct store_fetch_info fi = STORE_FETCH_INFO_INIT;
    fi.source = r->dump_url;
    fi.fetch_ms = (int64_t)r->dump_ms;
    if (r->activated_ms)
        fi.prof_active = 1;
    if (r->status == 0 && r->profile) {
        /* The daemon hands the parsed profile over for this call; the sink
         * symbolizes it in place before storing (see daemon.h). */
        struct profile *p = (struct profile *)r->profile;
        uint64_t t0 = hp_now_ns();
        struct hp_buf serr = HP_BUF_INIT(0);
        struct sym_stats st;
        /* The node's agent (agent= on any node line) is asked for the
         * binaries this host does not have, with the node's token. */
        struct sym_node sn = { .name = node->name };
        char *agent_url = NULL;
        if (node->agent) {
            agent_url = hp_xasprintf("%s://%s", node->tls != POLL_TLS_NO ? "https" : "http",
                                     node->agent);
            sn.agent.url = agent_url;
            sn.agent.bearer = node->token;
            sn.agent.ca_file = node->ca_file; /* the node line's CA signs its agent too */
        }
        /* Doris and StarRocks BEs serve gperftools' symbol service: names
         * for what nothing else could name. */
        char *svc_url = NULL;
        if (node->kind == POLL_KIND_DORIS || node->kind == POLL_KIND_STARROCKS) {
            svc_url = hp_xasprintf("%s://%s/pprof/symbol",
                                   node->tls != POLL_TLS_NO ? "https" : "http", node->addr);
            sn.symbol_service.url = svc_url;
            sn.symbol_service.user = node->user;
            sn.symbol_service.password = node->password;
            sn.symbol_service.ca_file = node->ca_file;
        }
        int sr = sym_profile_node(s->sym, p, &sn, &st, &serr);
        free(agent_url);
        free(svc_url);
        if (sr == 0)
            unnamed_note(p, &st);
        /* Stored as a figure of the snapshot: query nodes, the API, the
         * pages and /metrics (heapfleet_node_symbolized_ratio) read it. */
        double ratio = named_ratio(p);
        if (!isnan(ratio)) {
            stats = hp_xrealloc(stats, (nstats + 1) * sizeof(*stats));
            stats[nstats++] = (struct store_stat){ "heapfleet_symbolized_ratio", "ratio", ratio };
        }
        if (sr == 0) {
            for (size_t i = 0; i < st.nobjects; i++)
                if (st.objects[i].status < 0 && st.objects[i].addresses > 0)
                    hp_log_debug("sink", "node=%s object=%s msg=\"%s\"", node->name,
                                 st.objects[i].path, st.objects[i].message);
        } else {
            hp_log_warn("sink", "node=%s msg=\"symbolization failed: %s\"", node->name,
                        serr.data ? serr.data : "");
        }
        hp_buf_release(&serr);
        fi.symbolize_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        rc = store_snapshot_insert(s->st, node_id, r->started_ms, p, r->dump, r->dump_len, &fi,
                                   stats, nstats, &snap_id, err);
        if (rc == 0)
            s->stored++;
    } else {
        struct hp_buf why = HP_BUF_INIT(0);
        hp_buf_puts(&why, r->parse_error ? r->parse_error : r->error ? r->error : "no dump");
        if (r->figures_error)
            hp_buf_printf(&why, "; figures: %s", r->figures_error);
        rc = store_snapshot_attempt_record(s->st, node_id, r->started_ms, failure_status(r),
                                           why.data, r->dump, r->dump_len, &fi, stats, nstats,
                                           &snap_id, err);
        hp_buf_release(&why);
        s->failed++;
    }
out:
    if (s->fleet) {
        pthread_mutex_lock(&s->fleet_mu);
        if (r->status == 0)
            s->me.polls_ok++;
        else
            s->me.polls_failed++;
        if (rc < 0) {
            s->me.store_errors++;
            snprintf(s->me.last_error, sizeof(s->me.last_error), "%s",
                     err && err->data ? err->data : "store error");
        }
        pthread_mutex_unlock(&s->fleet_mu);
    }
    free(stats);
    hp_buf_release(&labels);
    if (store_batch_open(s->st)) {
        s->batched++;
        /* delete_after_fetch deletes the node's copy once this returns:
         * the snapshot must be durable by then. */
        if (s->batched >= BATCH_MAX || hp_wall_ms() - s->batch_t0_ms >= BATCH_MS ||
            node->delete_after_fetch) {
            struct hp_buf cerr = HP_BUF_INIT(0);
            int cr = batch_commit(s, &cerr);
            if (cr < 0 && rc == 0) {
                hp_buf_reset(err);
                hp_buf_puts(err, cerr.data ? cerr.data : "write batch lost");
                rc = cr;
            }
            hp_buf_release(&cerr);
        }
    }
    return rc;
}

/* ---- collectors sharing a fleet (daemon.h: claim, heartbeat) ---- */

static int fleet_claim(struct collector_sink *base, int64_t round_key, const char *const *names,
                       size_t n, bool *mine, struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    pthread_mutex_lock(&s->fleet_mu);
    int r = store_fleet_claim(s->fleet, &s->me, round_key, names, n, mine, err);
    pthread_mutex_unlock(&s->fleet_mu);
    return r;
}

/* The lease: a heartbeat every lease/3 on this thread, until close. */
static void *fleet_heartbeat_main(void *arg)
{
    struct store_sink *s = arg;
    pthread_mutex_lock(&s->fleet_mu);
    while (!s->hb_stop) {
        struct hp_buf err = HP_BUF_INIT(0);
        if (store_fleet_heartbeat(s->fleet, &s->me, &err) < 0)
            hp_log_warn("sink", "collector=%s err=\"%s\" msg=\"heartbeat failed\"", s->me.id,
                        err.data ? err.data : "?");
        hp_buf_release(&err);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + s->hb_ms * 1000000u;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        while (!s->hb_stop && pthread_cond_timedwait(&s->hb_cond, &s->fleet_mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&s->fleet_mu);
    return NULL;
}

struct fleet_rows {
    struct store_collector_row *v;
    size_t n, cap;
};

static int fleet_rows_cb(const struct store_collector_row *row, void *ctx)
{
    struct fleet_rows *rows = ctx;
    rows->v = hp_xgrow(rows->v, &rows->cap, rows->n + 1, sizeof(*rows->v));
    rows->v[rows->n++] = *row;
    return 0;
}

/* This collector's identity, and every collector of the fleet as the
 * database knows them (ids are hp_name_check'ed: no quoting needed). */
static void fleet_metrics(struct store_sink *s, struct hp_buf *out)
{
    pthread_mutex_lock(&s->fleet_mu);
    hp_buf_printf(out,
                  "# HELP heapfleet_collector_info This collector among those sharing the "
                  "fleet.\n"
                  "# TYPE heapfleet_collector_info gauge\n"
                  "heapfleet_collector_info{collector=\"%s\",host=\"%s\",pid=\"%lld\"} 1\n"
                  "# HELP heapfleet_fleet_collector_up Collectors sharing the fleet: 1 while "
                  "their lease holds.\n"
                  "# TYPE heapfleet_fleet_collector_up gauge\n",
                  s->me.id, s->me.host, (long long)s->me.pid);
    struct hp_buf err = HP_BUF_INIT(0);
    struct fleet_rows rows = { 0 };
    if (store_fleet_list(s->fleet, fleet_rows_cb, &rows, &err) < 0)
        hp_buf_printf(out, "# fleet unavailable: %s\n", err.data ? err.data : "?");
    hp_buf_release(&err);
    /* One metric family at a time (the exposition format groups them). */
    int64_t now = hp_wall_ms();
    for (size_t i = 0; i < rows.n; i++)
        hp_buf_printf(out, "heapfleet_fleet_collector_up{collector=\"%s\",host=\"%s\"} %d\n",
                      rows.v[i].id, rows.v[i].host, rows.v[i].alive ? 1 : 0);
    hp_buf_puts(out, "# HELP heapfleet_fleet_collector_heartbeat_age_seconds Since the "
                     "collector's last heartbeat.\n"
                     "# TYPE heapfleet_fleet_collector_heartbeat_age_seconds gauge\n");
    for (size_t i = 0; i < rows.n; i++) {
        int64_t age = now - rows.v[i].heartbeat_at;
        hp_buf_printf(out,
                      "heapfleet_fleet_collector_heartbeat_age_seconds{collector=\"%s\"} %.3f\n",
                      rows.v[i].id, (double)(age > 0 ? age : 0) / 1000.0);
    }
    hp_buf_puts(out, "# HELP heapfleet_fleet_collector_claimed_nodes Nodes the collector "
                     "claimed in its last round.\n"
                     "# TYPE heapfleet_fleet_collector_claimed_nodes gauge\n");
    for (size_t i = 0; i < rows.n; i++)
        hp_buf_printf(out, "heapfleet_fleet_collector_claimed_nodes{collector=\"%s\"} %lld\n",
                      rows.v[i].id, (long long)rows.v[i].claimed);
    hp_buf_puts(out, "# HELP heapfleet_fleet_collector_polls_total Polls since the collector "
                     "started, by outcome.\n"
                     "# TYPE heapfleet_fleet_collector_polls_total counter\n");
    for (size_t i = 0; i < rows.n; i++)
        hp_buf_printf(out,
                      "heapfleet_fleet_collector_polls_total{collector=\"%s\",result=\"ok\"} "
                      "%lld\n"
                      "heapfleet_fleet_collector_polls_total{collector=\"%s\",result=\"failed\"} "
                      "%lld\n",
                      rows.v[i].id, (long long)rows.v[i].polls_ok, rows.v[i].id,
                      (long long)rows.v[i].polls_failed);
    hp_buf_puts(out, "# HELP heapfleet_fleet_collector_store_errors_total Records the "
                     "database refused since the collector started.\n"
                     "# TYPE heapfleet_fleet_collector_store_errors_total counter\n");
    for (size_t i = 0; i < rows.n; i++)
        hp_buf_printf(out,
                      "heapfleet_fleet_collector_store_errors_total{collector=\"%s\"} %lld\n",
                      rows.v[i].id, (long long)rows.v[i].store_errors);
    free(rows.v);
    pthread_mutex_unlock(&s->fleet_mu);
}

static void store_sink_close(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    store_sink_flush(base);
    hp_log_info("sink", "stored=%llu failed=%llu db=%s msg=\"closing the database\"",
                (unsigned long long)s->stored, (unsigned long long)s->failed,
                store_path(s->st));
    sym_free(s->sym);
    store_close(s->st);
    if (s->fleet) {
        pthread_mutex_lock(&s->fleet_mu);
        s->hb_stop = true;
        pthread_cond_signal(&s->hb_cond);
        pthread_mutex_unlock(&s->fleet_mu);
        pthread_join(s->hb_thread, NULL);
        pthread_cond_destroy(&s->hb_cond);
        store_close(s->fleet);
        pthread_mutex_destroy(&s->fleet_mu);
    }
    hp_arena_release(&s->cache_arena);
    free(s);
}

int collector_storesink_new(const char *db, const struct collector_sym_config *symcfg,
                            const struct store_retain_policy *retain,
                            struct collector_sink **ret, struct hp_buf *err)
{
    struct store *st = NULL;
    int r = store_open(db, STORE_OPEN_WRITE, &st, err);
    if (r < 0)
        return r;
    struct store_sink *s = hp_xcalloc(1, sizeof(*s));
    s->st = st;
    if (retain)
        s->retain = *retain;
    hp_arena_init(&s->cache_arena);
    s->cache_ops = (struct sym_cache_ops){
        .ctx = s,
        .load_cb = cache_load_cb,
        .save_cb = cache_save_cb,
    };
    struct sym_options so = {
        .binary = symcfg ? symcfg->binary : NULL,
        .symbols_dir = symcfg ? symcfg->symbols_dir : NULL,
        .servers = symcfg ? symcfg->servers : NULL,
        .nservers = symcfg ? symcfg->nservers : 0,
        .cache_dir = symcfg ? symcfg->cache_dir : NULL,
        .cache_ops = &s->cache_ops,
    };
    s->sym = sym_new(&so);
    s->base.record = store_sink_record;
    s->base.flush = store_sink_flush;
    s->base.close = store_sink_close;
    if (store_is_postgres(db)) {
        if ((r = store_open(db, STORE_OPEN_WRITE, &s->fleet, err)) < 0) {
            store_sink_close(&s->base);
            return r;
        }
        pthread_mutex_init(&s->fleet_mu, NULL);
        char host[64] = "localhost";
        (void)gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        snprintf(s->me.host, sizeof(s->me.host), "%s", host);
        s->me.pid = getpid();
        if (symcfg && symcfg->collector_id && *symcfg->collector_id)
            snprintf(s->me.id, sizeof(s->me.id), "%s", symcfg->collector_id);
        else
            snprintf(s->me.id, sizeof(s->me.id), "%s:%lld", host, (long long)s->me.pid);
        s->me.started_at = hp_wall_ms();
        s->me.lease_ms = (symcfg && symcfg->lease_s > 0 ? symcfg->lease_s : 30) * 1000;
        s->me.interval_ms = symcfg ? (int64_t)symcfg->interval_ms : 0;
        s->base.claim = fleet_claim;
        s->hb_ms = (uint64_t)HP_MAX(s->me.lease_ms / 3, 200);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->hb_cond, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&s->hb_thread, NULL, fleet_heartbeat_main, s) != 0) {
            hp_err_printf(err, "cannot start the heartbeat thread");
            pthread_cond_destroy(&s->hb_cond);
            store_close(s->fleet);
            s->fleet = NULL;
            pthread_mutex_destroy(&s->fleet_mu);
            store_sink_close(&s->base);
            return HP_ERR(EAGAIN);
        }
        hp_log_info("sink", "collector=%s lease_ms=%lld msg=\"sharing the fleet through "
                    "PostgreSQL\"", s->me.id, (long long)s->me.lease_ms);
    }
    *ret = &s->base;
    return 0;
}
