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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon.h"
#include "collector/poll/poll.h"
#include "collector/sym/sym.h"
#include "store/profile.h"
#include "store/store.h"

/* The collector's own health, for GET /metrics: counted here because the
 * sink sees every result; read by the web server's worker threads. */
static const double fetch_buckets[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
#define NBUCKETS (sizeof(fetch_buckets) / sizeof(fetch_buckets[0]))

struct node_health {
    char *name;
    uint64_t ok, failed;
};

struct health {
    pthread_mutex_t mu;
    uint64_t rounds;
    struct node_health *nodes;
    size_t nnodes, cap;
    uint64_t bucket[NBUCKETS + 1]; /* last: +Inf */
    double sum_s;
    uint64_t count;
};

struct store_sink {
    struct collector_sink base;
    struct health health;
    struct store *st;
    struct symbolizer *sym;
    struct sym_cache_ops cache_ops;
    struct hp_arena cache_arena; /* strings of the last cache answer */
    uint64_t stored, failed;
    struct store_retain_policy retain;
    int64_t last_retain_ms; /* 0: not yet this run */
};

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

static void health_note(struct health *h, const struct collector_result *r)
{
    pthread_mutex_lock(&h->mu);
    if (r->round > h->rounds)
        h->rounds = r->round;
    struct node_health *nh = NULL;
    for (size_t i = 0; i < h->nnodes && !nh; i++)
        if (strcmp(h->nodes[i].name, r->node->name) == 0)
            nh = &h->nodes[i];
    if (!nh) {
        h->nodes = hp_xgrow(h->nodes, &h->cap, h->nnodes + 1, sizeof(*h->nodes));
        nh = &h->nodes[h->nnodes++];
        nh->name = hp_xstrdup(r->node->name);
        nh->ok = nh->failed = 0;
    }
    if (r->status == 0)
        nh->ok++;
    else
        nh->failed++;
    double secs = (double)(r->finished_ms - r->started_ms) / 1000.0;
    size_t b = 0;
    while (b < NBUCKETS && secs > fetch_buckets[b])
        b++;
    h->bucket[b]++;
    h->sum_s += secs;
    h->count++;
    pthread_mutex_unlock(&h->mu);
}

void collector_storesink_metrics(struct collector_sink *base, struct hp_buf *out)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    struct health *h = &s->health;
    pthread_mutex_lock(&h->mu);
    hp_buf_printf(out,
                  "# HELP heapfleet_collector_rounds_total Polling rounds started.\n"
                  "# TYPE heapfleet_collector_rounds_total counter\n"
                  "heapfleet_collector_rounds_total %llu\n",
                  (unsigned long long)h->rounds);
    hp_buf_puts(out, "# HELP heapfleet_collector_polls_total Polls of each node by outcome.\n"
                     "# TYPE heapfleet_collector_polls_total counter\n");
    for (size_t i = 0; i < h->nnodes; i++) {
        struct hp_buf name = HP_BUF_INIT(0);
        for (const char *c = h->nodes[i].name; *c; c++) {
            if (*c == '"' || *c == '\\')
                hp_buf_append(&name, "\\", 1);
            if (*c == '\n')
                hp_buf_puts(&name, "\\n");
            else
                hp_buf_append(&name, c, 1);
        }
        hp_buf_printf(out,
                      "heapfleet_collector_polls_total{node=\"%s\",result=\"ok\"} %llu\n"
                      "heapfleet_collector_polls_total{node=\"%s\",result=\"failed\"} %llu\n",
                      name.data, (unsigned long long)h->nodes[i].ok, name.data,
                      (unsigned long long)h->nodes[i].failed);
        hp_buf_release(&name);
    }
    hp_buf_puts(out, "# HELP heapfleet_collector_poll_seconds Time to poll one node (dump and "
                     "figures).\n"
                     "# TYPE heapfleet_collector_poll_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t b = 0; b < NBUCKETS; b++) {
        cum += h->bucket[b];
        hp_buf_printf(out, "heapfleet_collector_poll_seconds_bucket{le=\"%g\"} %llu\n",
                      fetch_buckets[b], (unsigned long long)cum);
    }
    cum += h->bucket[NBUCKETS];
    hp_buf_printf(out,
                  "heapfleet_collector_poll_seconds_bucket{le=\"+Inf\"} %llu\n"
                  "heapfleet_collector_poll_seconds_sum %.3f\n"
                  "heapfleet_collector_poll_seconds_count %llu\n",
                  (unsigned long long)cum, h->sum_s, (unsigned long long)h->count);
    pthread_mutex_unlock(&h->mu);
}

static int store_sink_record(struct collector_sink *base, const struct collector_result *r,
                             struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    health_note(&s->health, r);
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
        if (sym_profile(s->sym, p, &st, &serr) == 0) {
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
    free(stats);
    hp_buf_release(&labels);
    return rc;
}

static void store_sink_close(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    hp_log_info("sink", "stored=%llu failed=%llu db=%s msg=\"closing the database\"",
                (unsigned long long)s->stored, (unsigned long long)s->failed,
                store_path(s->st));
    sym_free(s->sym);
    store_close(s->st);
    for (size_t i = 0; i < s->health.nnodes; i++)
        free(s->health.nodes[i].name);
    free(s->health.nodes);
    pthread_mutex_destroy(&s->health.mu);
    hp_arena_release(&s->cache_arena);
    free(s);
}

int collector_storesink_new(const char *db, const struct collector_sym_config *symcfg,
                            struct collector_sink **ret, struct hp_buf *err)
{
    struct store *st = NULL;
    int r = store_open(db, STORE_OPEN_WRITE, &st, err);
    if (r < 0)
        return r;
    struct store_sink *s = hp_xcalloc(1, sizeof(*s));
    s->st = st;
    if (symcfg) {
        s->retain.retain_s = symcfg->retain_s;
        s->retain.thin_after_s = symcfg->thin_after_s;
    }
    pthread_mutex_init(&s->health.mu, NULL);
    hp_arena_init(&s->cache_arena);
    s->cache_ops = (struct sym_cache_ops){
        .ctx = s,
        .load_cb = cache_load_cb,
        .save_cb = cache_save_cb,
    };
    struct sym_options so = {
        .binary = symcfg ? symcfg->binary : NULL,
        .symbols_dir = symcfg ? symcfg->symbols_dir : NULL,
        .cache_ops = &s->cache_ops,
    };
    s->sym = sym_new(&so);
    s->base.record = store_sink_record;
    s->base.close = store_sink_close;
    *ret = &s->base;
    return 0;
}
