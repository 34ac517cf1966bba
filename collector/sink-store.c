/* The SQLite sink: keeps every poll result in the store (store/store.h).
 *
 * Runs on a libuv worker thread; the daemon never calls record twice at once,
 * so the sink owns one writer connection and one symbolizer without locks.
 * Each fetched dump is symbolized here, once per binary: the symbolizer keeps
 * what it resolved in memory and in the store's symbol cache (keyed by
 * build-id), so the next hourly profile of the same binary resolves from the
 * cache. The raw dump is stored in the same transaction as everything derived
 * from it; a dump that did not parse is stored raw with its error, so a later
 * `query reindex` can re-derive it.
 *
 * Re-symbolization (issue 15): a snapshot stored with objects no source could
 * name is remembered, keyed by the object's build-id (or its file name when
 * the dump records none). A thread of the sink (resym_main) re-derives such
 * snapshots from their raw dumps when symbols may have arrived: at once when
 * the store's uploaded files (`query symbols add`, from any host: each pass
 * mirrors them into the local folder, store_symfiles_sync) or the symbol
 * folder changed, otherwise by asking every source again with backoff per
 * key (--resym-backoff, 1 min by default, doubling to 1 h: a node's agent
 * back, a debuginfod server answering, another collector's symbol cache). It parses and symbolizes with its own symbolizer and a
 * read-only connection, off the poll path; only the write (store_snapshot_
 * reindex and the coverage figure, the store's own re-derivation) takes the
 * sink's lock, a few milliseconds per snapshot, and at most RESYM_PER_PASS
 * snapshots are re-derived per pass. Raw dumps are never touched. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/collector-internal.h"
#include "collector/poll/poll.h"
#include "collector/ingest/ingest.h"
#include "collector/sym/sym.h"
#include "query/query.h"
#include "store/profile.h"

/* A node's remote sources, copied (the daemon may replace its node list). */
struct node_src {
    char *name, *agent_url, *bearer, *ca_file, *svc_url, *user, *password;
};

/* A stored snapshot with an object no source could name. */
struct resym_item {
    int64_t id;
    char *key;    /* build-id, file name, or "" (found at start: unknown) */
    double ratio; /* its named share when stored */
    struct node_src src;
};

/* Per key: when to ask again. */
struct resym_group {
    char *key;
    uint64_t next_ns, backoff_ns;
};

struct resym {
    pthread_t thread;
    bool started, stop, kick; /* under mu (stop also read atomically in a pass) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct resym_item *items; /* under mu (record adds) */
    size_t nitems, items_cap;
    /* The thread's own: */
    struct resym_group *groups;
    size_t ngroups, groups_cap;
    struct store *rd;       /* read-only connection */
    struct symbolizer *sym; /* its own, same sources as the sink's */
    struct sym_cache_ops cache_ops;
    struct hp_arena cache_arena;
    char *symbols_dir;
    int64_t folder_sig;
    bool seeded;
    bool mirror;            /* symbols_dir mirrors the store's uploaded files */
    uint64_t backoff_min_ns; /* the first wait of a key (--resym-backoff) */
    uint64_t mirror_err;    /* hash of the last sync error logged, 0 none */
};

struct store_sink {
    struct collector_sink base;
    pthread_mutex_t work_mu; /* st and the batch: record, flush, resym writes */
    struct resym resym;
    bool sym_forget; /* under work_mu: symbols arrived, polls ask again */
    struct store *st;
    struct symbolizer *sym;
    struct sym_cache_ops cache_ops;
    struct hp_arena cache_arena; /* strings of the last cache answer */
    /* Addresses the store's symbol cache answered, and those written to it
     * (under work_mu, like the symbolizer that calls the hooks): each
     * record logs its share, so a build symbolized once for the whole
     * fleet can be seen to be (read here, written by another collector). */
    uint64_t symcache_read, symcache_written;
    uint64_t stored, failed;
    struct store_retain_policy retain;
    int64_t last_retain_ms; /* 0: not yet this run */
    size_t batched;         /* records in the open write batch */
    uint64_t recorded;      /* record calls so far (under work_mu) */
    uint64_t settled;       /* of those, committed or lost (atomic: read by the loop) */
    /* The record calls of the last write batches that failed to commit,
     * (from, to]: the daemon must not log them as stored. */
    pthread_mutex_t lost_mu;
    struct {
        uint64_t from, to;
    } lost[16];
    size_t nlost; /* ever; lost[nlost % 16] is the next slot */
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
    if (!store_batch_open(s->st)) {
        __atomic_store_n(&s->settled, s->recorded, __ATOMIC_RELEASE);
        return 0;
    }
    int r = store_batch_commit(s->st, err);
    if (r < 0) {
        hp_log_error("sink", "snapshots=%zu err=\"%s\" msg=\"a write batch was lost\"", n,
                     err->data ? err->data : "?");
        pthread_mutex_lock(&s->lost_mu);
        s->lost[s->nlost % HP_ARRAY_SIZE(s->lost)].from = s->settled;
        s->lost[s->nlost % HP_ARRAY_SIZE(s->lost)].to = s->recorded;
        s->nlost++;
        pthread_mutex_unlock(&s->lost_mu);
    }
    __atomic_store_n(&s->settled, s->recorded, __ATOMIC_RELEASE);
    return r;
}

/* Loop thread: never waits. When the re-symbolization thread holds the
 * lock it has committed the batch already (and no record ran since). The end
 * of a round is also when that thread looks for work. */
static void store_sink_flush(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    if (pthread_mutex_trylock(&s->work_mu) == 0) {
        struct hp_buf err = HP_BUF_INIT(0);
        (void)batch_commit(s, &err);
        hp_buf_release(&err);
        pthread_mutex_unlock(&s->work_mu);
    }
    if (s->resym.started) {
        pthread_mutex_lock(&s->resym.mu);
        s->resym.kick = true;
        pthread_cond_signal(&s->resym.cond);
        pthread_mutex_unlock(&s->resym.mu);
    }
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
    else if (res.skipped) /* PostgreSQL: its advisory lock is held; again in an hour */
        hp_log_info("sink", "msg=\"retention skipped: another collector is retaining\"");
    else if (res.snapshots_deleted || res.spans_closed || res.views_written)
        hp_log_info("sink",
                    "deleted=%lld pages_freed=%lld spans_packed=%lld stack_views=%lld"
                    " msg=\"retention\"",
                    (long long)res.snapshots_deleted, (long long)res.pages_freed,
                    (long long)res.spans_closed, (long long)res.views_written);
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
        s->symcache_read++;
    }
    return r;
}

static int cache_save_cb(void *ctx, const char *build_id, uint64_t vaddr,
                         const struct profile_frame *frames, uint32_t n)
{
    struct store_sink *s = ctx;
    int r = store_symcache_put(s->st, build_id, vaddr, frames, n, NULL);
    if (r == 0)
        s->symcache_written++;
    return r;
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

static void node_src_free(struct node_src *n)
{
    free(n->name);
    free(n->agent_url);
    free(n->bearer);
    free(n->ca_file);
    free(n->svc_url);
    free(n->user);
    free(n->password);
}

static char *dup0(const char *s)
{
    return s ? hp_xstrdup(s) : NULL;
}

/* The node's agent (agent= on any node line) is asked for the binaries this
 * host does not have, with the node's token; Doris and StarRocks BEs serve
 * gperftools' symbol service: names for what nothing else could name. */
static void node_src_init(struct node_src *n, const struct poll_node *node)
{
    memset(n, 0, sizeof(*n));
    n->name = hp_xstrdup(node->name);
    const char *scheme = node->tls != POLL_TLS_NO ? "https" : "http";
    if (node->agent) {
        n->agent_url = hp_xasprintf("%s://%s", scheme, node->agent);
        n->bearer = dup0(node->token);
        n->ca_file = dup0(node->ca_file); /* the node line's CA signs its agent too */
    }
    if (node->kind == POLL_KIND_DORIS || node->kind == POLL_KIND_STARROCKS) {
        n->svc_url = hp_xasprintf("%s://%s/pprof/symbol", scheme, node->addr);
        n->user = dup0(node->user);
        n->password = dup0(node->password);
        if (!n->ca_file)
            n->ca_file = dup0(node->ca_file);
    }
}

/* The one symbolization of a stored profile, for polls and re-derivations
 * alike: names from every source, each unnamed object with what every
 * source said into the note (query.h's grammar; shown by query, the API and
 * the UI), and the named share of the bytes. 0, or <0 when nothing could be
 * attempted (logged). */
static int symbolize(struct symbolizer *sym, struct profile *p, const struct node_src *n,
                     struct sym_stats *ret_st, double *ret_ratio)
{
    struct sym_node sn = { .name = n->name };
    sn.agent.url = n->agent_url;
    sn.agent.bearer = n->bearer;
    sn.agent.ca_file = n->ca_file;
    sn.symbol_service.url = n->svc_url;
    sn.symbol_service.user = n->user;
    sn.symbol_service.password = n->password;
    sn.symbol_service.ca_file = n->ca_file;
    struct hp_buf serr = HP_BUF_INIT(0);
    int sr = sym_profile_node(sym, p, &sn, ret_st, &serr);
    if (sr == 0) {
        struct hp_buf b = HP_BUF_INIT(0);
        if (p->hint)
            hp_buf_puts(&b, p->hint);
        size_t count = 0;
        for (size_t i = 0; i < ret_st->nobjects; i++) {
            const struct sym_object_status *o = &ret_st->objects[i];
            if (o->used || o->addresses == 0 || o->resolved > 0 ||
                strstr(o->message, "names only"))
                continue;
            if (count++ < 8) /* the first few; the log has them all */
                query_note_unnamed_add(&b, o->path, o->build_id, o->message, o->tried);
            hp_log_debug("sink", "node=%s object=%s msg=\"%s\"", n->name, o->path, o->message);
        }
        if (count > 8)
            hp_buf_printf(&b, "\nand %zu more unnamed objects", count - 8);
        if (count)
            p->hint = profile_intern(p, b.data, b.len);
        hp_buf_release(&b);
    } else {
        memset(ret_st, 0, sizeof(*ret_st));
        hp_log_warn("sink", "node=%s msg=\"symbolization failed: %s\"", n->name,
                    serr.data ? serr.data : "");
    }
    hp_buf_release(&serr);
    *ret_ratio = query_named_ratio(p);
    return sr;
}

/* The key a snapshot waits under: the object's build-id, else its name. */
static const char *object_key(const struct sym_object_status *o)
{
    if (o->build_id && *o->build_id)
        return o->build_id;
    const char *b = strrchr(o->path, '/');
    return b ? b + 1 : o->path;
}

#define RESYM_MAX_ITEMS 4096

static void resym_note(struct store_sink *s, int64_t id, const char *key, double ratio,
                       const struct node_src *src)
{
    struct resym *rs = &s->resym;
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < rs->nitems; i++)
        if (rs->items[i].id == id && strcmp(rs->items[i].key, key) == 0) {
            pthread_mutex_unlock(&rs->mu);
            return;
        }
    if (rs->nitems >= RESYM_MAX_ITEMS) { /* the oldest goes */
        free(rs->items[0].key);
        node_src_free(&rs->items[0].src);
        memmove(rs->items, rs->items + 1, (rs->nitems - 1) * sizeof(*rs->items));
        rs->nitems--;
    }
    rs->items = hp_xgrow(rs->items, &rs->items_cap, rs->nitems + 1, sizeof(*rs->items));
    struct resym_item *it = &rs->items[rs->nitems++];
    it->id = id;
    it->key = hp_xstrdup(key);
    it->ratio = ratio;
    memset(&it->src, 0, sizeof(it->src));
    it->src.name = hp_xstrdup(src && src->name ? src->name : "?");
    if (src) {
        it->src.agent_url = dup0(src->agent_url);
        it->src.bearer = dup0(src->bearer);
        it->src.ca_file = dup0(src->ca_file);
        it->src.svc_url = dup0(src->svc_url);
        it->src.user = dup0(src->user);
        it->src.password = dup0(src->password);
    }
    pthread_mutex_unlock(&rs->mu);
}

static int record_locked(struct store_sink *s, const struct collector_result *r,
                         struct hp_buf *err)
{
    if (s->sym_forget) {
        s->sym_forget = false;
        sym_forget_failures(s->sym);
    }
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
        struct sym_stats st;
        struct node_src src;
        node_src_init(&src, node);
        double ratio;
        uint64_t read0 = s->symcache_read, written0 = s->symcache_written;
        int sr = symbolize(s->sym, p, &src, &st, &ratio);
        if (sr == 0)
            hp_log_debug("sink",
                         "node=%s locations=%zu resolved=%zu cache_hits=%zu symcache_read=%llu "
                         "symcache_written=%llu msg=\"symbolized\"",
                         node->name, st.locations, st.resolved, st.cache_hits,
                         (unsigned long long)(s->symcache_read - read0),
                         (unsigned long long)(s->symcache_written - written0));
        /* Stored as a figure of the snapshot: query nodes, the API, the
         * pages and /metrics (heapfleet_node_symbolized_ratio) read it. */
        if (!isnan(ratio)) {
            stats = hp_xrealloc(stats, (nstats + 1) * sizeof(*stats));
            stats[nstats++] = (struct store_stat){ "heapfleet_symbolized_ratio", "ratio", ratio };
        }
        fi.symbolize_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        rc = store_snapshot_insert(s->st, node_id, r->started_ms, p, r->dump, r->dump_len, &fi,
                                   stats, nstats, &snap_id, err);
        if (rc == 0 && sr == 0 && r->dump)
            for (size_t i = 0; i < st.nobjects; i++) {
                const struct sym_object_status *o = &st.objects[i];
                /* No file, or a file that named none of its addresses
                 * (stripped, its debug file not found yet). */
                if (o->addresses && !o->resolved && !strstr(o->message, "names only"))
                    resym_note(s, snap_id, object_key(o), ratio, &src);
            }
        node_src_free(&src);
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

static int store_sink_record(struct collector_sink *base, const struct collector_result *r,
                             struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    pthread_mutex_lock(&s->work_mu);
    /* Before this record counts: retention commits the open batch, which
     * settles every record counted so far. Counted first, this one was
     * settled before it was written, and the daemon logged it as stored
     * while its batch was still open (a kill then lost a logged snapshot:
     * tests/collector/it-first-logged.sh). */
    maybe_retain(s);
    s->recorded++;
    int rc = record_locked(s, r, err);
    /* Outside a batch the record committed (or failed) on its own. */
    if (!store_batch_open(s->st))
        __atomic_store_n(&s->settled, s->recorded, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->work_mu);
    return rc;
}

static uint64_t store_sink_settled(struct collector_sink *base)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    return __atomic_load_n(&s->settled, __ATOMIC_ACQUIRE);
}

static bool store_sink_lost(struct collector_sink *base, uint64_t n)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    bool lost = false;
    pthread_mutex_lock(&s->lost_mu);
    size_t k = s->nlost < HP_ARRAY_SIZE(s->lost) ? s->nlost : HP_ARRAY_SIZE(s->lost);
    for (size_t i = 0; i < k && !lost; i++)
        lost = n > s->lost[i].from && n <= s->lost[i].to;
    pthread_mutex_unlock(&s->lost_mu);
    return lost;
}

/* Worker: the store answers again (PostgreSQL: the writer's connection,
 * cut by a server restart, is made again here). */
static int store_sink_ready(struct collector_sink *base, struct hp_buf *err)
{
    struct store_sink *s = hp_container_of(base, struct store_sink, base);
    pthread_mutex_lock(&s->work_mu);
    int r = store_ping(s->st, err);
    pthread_mutex_unlock(&s->work_mu);
    return r;
}

/* ---- re-symbolization (see the file comment) ---- */

#define RESYM_PER_PASS 8
#define RESYM_WAKE_S 30
#define RESYM_WAKE_WAITING_S 2
#define RESYM_BACKOFF_MIN_NS (UINT64_C(60) * 1000000000)
#define RESYM_BACKOFF_MAX_NS (UINT64_C(3600) * 1000000000)
#define RESYM_SEED_DAYS 7
#define RESYM_SEED_MAX 256

/* Bring the local mirror of the store's uploaded symbol files up to date
 * (store_symfiles_sync); a failure is logged once until it changes. 0 or
 * <0; *ret_added files were written. */
static int mirror_sync(struct store *st, const char *dir, uint64_t *last_err,
                       size_t *ret_added)
{
    struct hp_buf err = HP_BUF_INIT(0);
    size_t added = 0;
    int r = store_symfiles_sync(st, dir, &added, &err);
    if (r < 0) {
        const char *m = err.data ? err.data : hp_strerror(r);
        uint64_t h = hp_hash_bytes(m, strlen(m), 1) | 1;
        if (h != *last_err)
            hp_log_warn("sink", "dir=%s err=\"%s\" msg=\"the store's symbol files were not all "
                        "copied to the local folder\"", dir, m);
        *last_err = h;
    } else {
        *last_err = 0;
    }
    if (added)
        hp_log_info("sink", "dir=%s files=%zu msg=\"symbol files from the store copied to the "
                    "local folder\"", dir, added);
    hp_buf_release(&err);
    *ret_added = added;
    return r;
}

/* The symbol folder's state: `query symbols add` renames a name link into
 * the folder and a file under .build-id/xx/, which moves these mtimes. */
static int64_t folder_sig(const char *dir)
{
    if (!dir)
        return 0;
    int64_t sig = 0;
    struct stat st;
    if (stat(dir, &st) == 0)
        sig += (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    char *b = hp_xasprintf("%s/.build-id", dir);
    if (stat(b, &st) == 0)
        sig += (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    free(b);
    return sig;
}

static struct resym_group *group_get(struct resym *rs, const char *key)
{
    for (size_t i = 0; i < rs->ngroups; i++)
        if (strcmp(rs->groups[i].key, key) == 0)
            return &rs->groups[i];
    rs->groups = hp_xgrow(rs->groups, &rs->groups_cap, rs->ngroups + 1, sizeof(*rs->groups));
    struct resym_group *g = &rs->groups[rs->ngroups++];
    g->key = hp_xstrdup(key);
    g->next_ns = 0;
    g->backoff_ns = rs->backoff_min_ns;
    return g;
}

struct seed_ctx {
    struct resym_item *v;
    size_t n, cap;
};

static int seed_snap_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct seed_ctx *c = ctx;
    if (si->status != STORE_STATUS_OK || si->raw_size <= 0)
        return 0;
    c->v = hp_xgrow(c->v, &c->cap, c->n + 1, sizeof(*c->v));
    memset(&c->v[c->n], 0, sizeof(c->v[c->n]));
    c->v[c->n].id = si->id;
    c->v[c->n].ratio = NAN;
    c->v[c->n].src.name = hp_xstrdup(si->node);
    c->n++;
    return 0;
}

static int stat_ratio_cb(const struct store_stat *st, void *ctx)
{
    if (strcmp(st->name, "heapfleet_symbolized_ratio") == 0)
        *(double *)ctx = st->value;
    return 0;
}

/* Snapshots of the last RESYM_SEED_DAYS whose named share is below 1, found
 * when the collector starts: they wait under key "" (their objects are not
 * known without loading them), with no node sources (local folders,
 * debuginfod and the store's cache only). */
static bool resym_stopping(struct resym *rs)
{
    pthread_mutex_lock(&rs->mu);
    bool stop = rs->stop;
    pthread_mutex_unlock(&rs->mu);
    return stop;
}

static int seed_node_cb(const struct store_node_row *row, void *ctx)
{
    struct store_sink *s = ctx;
    struct resym *rs = &s->resym;
    struct seed_ctx c = { 0 };
    /* The walk reads every snapshot of the window: a --once collector that
     * finished its round does not wait for it. */
    if (resym_stopping(rs))
        return 1;
    int64_t since = hp_wall_ms() - (int64_t)RESYM_SEED_DAYS * 86400 * 1000;
    if (store_snapshots_list(rs->rd, row->id, since, INT64_MAX, false, seed_snap_cb, &c,
                             NULL) < 0)
        hp_log_debug("sink", "node=%s msg=\"snapshots not listed for re-symbolization\"",
                     row->name);
    size_t taken = 0;
    for (size_t i = c.n; i-- > 0;) { /* newest first */
        double ratio = NAN;
        if (taken < RESYM_SEED_MAX &&
            store_snapshot_stats(rs->rd, c.v[i].id, stat_ratio_cb, &ratio, NULL) == 0 &&
            ratio < 0.999) {
            struct node_src src = { .name = c.v[i].src.name };
            resym_note(s, c.v[i].id, "", ratio, &src);
            taken++;
        }
        free(c.v[i].src.name);
    }
    free(c.v);
    return 0;
}

struct derive_ctx {
    struct resym *rs;
    const struct resym_item *it;
    double ratio; /* out */
};

/* Parse and symbolize a raw dump as a poll would; 1 when that names no
 * more bytes than the snapshot has (nothing to write). */
static int derive(struct derive_ctx *c, const void *raw, size_t len, struct profile **ret,
                  struct hp_buf *err)
{
    struct profile *p = NULL;
    int r = ingest_parse(raw, len, NULL, &p, err);
    if (r < 0)
        return r;
    struct sym_stats st;
    double ratio;
    (void)symbolize(c->rs->sym, p, &c->it->src, &st, &ratio);
    if (isnan(ratio) || !(ratio > (isnan(c->it->ratio) ? 0 : c->it->ratio) + 1e-9)) {
        profile_free(p);
        return 1;
    }
    char tb[40];
    struct hp_buf b = HP_BUF_INIT(0);
    if (p->hint)
        hp_buf_printf(&b, "%s\n", p->hint);
    hp_buf_printf(&b, "re-symbolized %s: now %.0f%% named", 
                  store_time_format(hp_wall_ms(), tb, sizeof(tb)), ratio * 100);
    if (!isnan(c->it->ratio))
        hp_buf_printf(&b, " (was %.0f%%)", c->it->ratio * 100);
    p->hint = profile_intern(p, b.data, b.len);
    hp_buf_release(&b);
    c->ratio = ratio;
    *ret = p;
    return 0;
}

/* Re-derive one snapshot: 1 done, 0 nothing better, <0 error (logged). */
static int resym_one(struct store_sink *s, const struct resym_item *it, double *ret_ratio)
{
    struct resym *rs = &s->resym;
    struct hp_buf err = HP_BUF_INIT(0);
    void *raw = NULL;
    size_t len = 0;
    struct profile *p = NULL;
    struct derive_ctx c = { .rs = rs, .it = it };
    int r = store_snapshot_raw(rs->rd, it->id, &raw, &len, &err);
    if (r == 0)
        r = derive(&c, raw, len, &p, &err);
    free(raw);
    if (r == 0) {
        /* The write: the store's own re-derivation, outside any batch. */
        pthread_mutex_lock(&s->work_mu);
        r = batch_commit(s, &err);
        if (r == 0)
            r = store_snapshot_reindex(s->st, it->id, p, &err);
        if (r == 0) {
            struct store_stat fig = { "heapfleet_symbolized_ratio", "ratio", c.ratio };
            r = store_snapshot_stat_set(s->st, it->id, &fig, &err);
        }
        s->sym_forget = true; /* the polls' symbolizer asks again too */
        pthread_mutex_unlock(&s->work_mu);
        if (r == 0) {
            *ret_ratio = c.ratio;
            r = 1;
        }
    } else if (r == 1) {
        r = 0;
    }
    if (r < 0)
        hp_log_warn("sink", "snapshot=%lld err=\"%s\" msg=\"re-symbolization failed\"",
                    (long long)it->id, err.data ? err.data : hp_strerror(r));
    profile_free(p);
    hp_buf_release(&err);
    return r;
}

/* Take the items of `key` out of the shared list. */
static size_t take_items(struct resym *rs, const char *key, struct resym_item **ret)
{
    pthread_mutex_lock(&rs->mu);
    struct resym_item *v = NULL;
    size_t n = 0, cap = 0, k = 0;
    for (size_t i = 0; i < rs->nitems; i++) {
        if (strcmp(rs->items[i].key, key) == 0) {
            v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
            v[n++] = rs->items[i];
        } else {
            rs->items[k++] = rs->items[i];
        }
    }
    rs->nitems = k;
    pthread_mutex_unlock(&rs->mu);
    *ret = v;
    return n;
}

static void put_items(struct resym *rs, struct resym_item *v, size_t n)
{
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < n; i++) {
        rs->items = hp_xgrow(rs->items, &rs->items_cap, rs->nitems + 1, sizeof(*rs->items));
        rs->items[rs->nitems++] = v[i];
    }
    pthread_mutex_unlock(&rs->mu);
}

static void item_free(struct resym_item *it)
{
    free(it->key);
    node_src_free(&it->src);
}

/* One pass: each key that is due is probed with its newest snapshot; when
 * that now names more, the key's snapshots are re-derived, RESYM_PER_PASS
 * at most per pass (the rest wait for the next). */
static void resym_pass(struct store_sink *s)
{
    struct resym *rs = &s->resym;
    /* Files uploaded into the store (by any host) since the last pass. */
    size_t synced = 0;
    if (rs->mirror)
        (void)mirror_sync(rs->rd, rs->symbols_dir, &rs->mirror_err, &synced);
    int64_t sig = folder_sig(rs->symbols_dir);
    bool folder_changed = sig != rs->folder_sig || synced > 0;
    rs->folder_sig = sig;
    /* Keys of the waiting items. */
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < rs->nitems; i++)
        (void)group_get(rs, rs->items[i].key);
    pthread_mutex_unlock(&rs->mu);
    size_t budget = RESYM_PER_PASS;
    uint64_t now = hp_now_ns();
    for (size_t g = 0; g < rs->ngroups && budget; g++) {
        struct resym_group *gr = &rs->groups[g];
        if (folder_changed)
            gr->next_ns = 0;
        if (now < gr->next_ns)
            continue;
        struct resym_item *v;
        size_t n = take_items(rs, gr->key, &v);
        if (n == 0)
            continue;
        /* Every source again, local folders included. */
        sym_forget_failures(rs->sym);
        size_t done = 0, i = n;
        double last = NAN;
        bool probed = false, better = false;
        /* stop is read here without mu (the pass runs unlocked). */
        while (i > 0 && budget && !__atomic_load_n(&rs->stop, __ATOMIC_RELAXED)) {
            struct resym_item *it = &v[--i]; /* newest first */
            double ratio = NAN; /* read only when r == 1; said so for -O3 */
            int r = resym_one(s, it, &ratio);
            budget--;
            if (r == 1) {
                done++;
                if (isnan(last))
                    last = ratio;
                better = true;
            }
            probed = true;
            hp_log_debug("sink", "snapshot=%lld build=%s result=%s msg=\"re-symbolization probe\"",
                         (long long)it->id, *gr->key ? gr->key : "unknown",
                         r == 1 ? "named more" : r == 0 ? "nothing more" : "failed");
            if (r == 0 && !better) { /* the probe named nothing more: it waits */
                i++;
                break;
            }
            item_free(it); /* re-derived, or as good as it gets, or failing */
        }
        if (done) {
            hp_log_info("sink", "build=%s snapshots=%zu named=%.3f msg=\"re-symbolized %zu "
                        "snapshot%s of build %s: now %.0f%% named\"",
                        *gr->key ? gr->key : "unknown", done, last, done, done == 1 ? "" : "s",
                        *gr->key ? gr->key : "(found at start)", last * 100);
        }
        if (better) {
            gr->next_ns = 0; /* the rest next pass */
            gr->backoff_ns = rs->backoff_min_ns;
        } else if (probed) {
            gr->next_ns = now + gr->backoff_ns;
            gr->backoff_ns = HP_MIN(gr->backoff_ns * 2, RESYM_BACKOFF_MAX_NS);
        }
        put_items(rs, v, i);
        free(v);
    }
}

static void *resym_main(void *arg)
{
    struct store_sink *s = arg;
    struct resym *rs = &s->resym;
    pthread_mutex_lock(&rs->mu);
    while (!rs->stop) {
        if (!rs->kick) {
            /* Often while snapshots wait: a pass with nothing due costs two
             * stat() calls of the symbol folder. */
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += rs->nitems ? RESYM_WAKE_WAITING_S : RESYM_WAKE_S;
            while (!rs->stop && !rs->kick &&
                   pthread_cond_timedwait(&rs->cond, &rs->mu, &until) == 0)
                ;
        }
        rs->kick = false;
        if (rs->stop)
            break;
        pthread_mutex_unlock(&rs->mu);
        if (!rs->seeded) {
            rs->seeded = true;
            if (store_nodes_list(rs->rd, seed_node_cb, s, NULL) < 0)
                hp_log_warn("sink", "msg=\"could not list the stored snapshots to re-symbolize\"");
        }
        resym_pass(s);
        pthread_mutex_lock(&rs->mu);
    }
    pthread_mutex_unlock(&rs->mu);
    return NULL;
}

static int rs_cache_load_cb(void *ctx, const char *build_id, uint64_t vaddr,
                            const struct profile_frame **ret_frames, uint32_t *ret_n)
{
    struct resym *rs = ctx;
    hp_arena_release(&rs->cache_arena);
    struct profile_frame *frames = NULL;
    uint32_t n = 0;
    int r = store_symcache_get(rs->rd, build_id, vaddr, &rs->cache_arena, &frames, &n, NULL);
    if (r == 1) {
        *ret_frames = frames;
        *ret_n = n;
    }
    return r;
}

/* Start the thread (after the sink is built). Failing to is logged, not
 * fatal: polls go on, re-symbolization is `query reindex`'s again. */
static void resym_start(struct store_sink *s, const char *db, const struct sym_options *so,
                        bool mirror, uint64_t backoff_ms)
{
    struct resym *rs = &s->resym;
    rs->backoff_min_ns = backoff_ms ? HP_MIN(backoff_ms * 1000000, RESYM_BACKOFF_MAX_NS)
                                    : RESYM_BACKOFF_MIN_NS;
    pthread_mutex_init(&rs->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rs->cond, &ca);
    pthread_condattr_destroy(&ca);
    struct hp_buf err = HP_BUF_INIT(0);
    /* Without mmap: the seed walk reads every snapshot of the last
     * RESYM_SEED_DAYS, and the pages it mapped stayed in the collector's RSS
     * (+10 MB at 2,000 snapshots, up to the 256 MB map at fleet scale). */
    if (store_open(db, STORE_OPEN_READ | STORE_OPEN_NO_MMAP, &rs->rd, &err) < 0) {
        hp_log_warn("sink", "err=\"%s\" msg=\"no background re-symbolization\"",
                    err.data ? err.data : "?");
        hp_buf_release(&err);
        return;
    }
    hp_buf_release(&err);
    hp_arena_init(&rs->cache_arena);
    /* Reads the store's cache; writes are the poll path's (one writer). */
    rs->cache_ops = (struct sym_cache_ops){ .ctx = rs, .load_cb = rs_cache_load_cb };
    struct sym_options o = *so;
    o.cache_ops = &rs->cache_ops;
    rs->sym = sym_new(&o);
    rs->symbols_dir = dup0(so->symbols_dir);
    rs->mirror = mirror && rs->symbols_dir;
    rs->folder_sig = folder_sig(rs->symbols_dir);
    rs->kick = true; /* the first pass at once: what was left unnamed before */
    if (pthread_create(&rs->thread, NULL, resym_main, s) != 0) {
        hp_log_warn("sink", "msg=\"cannot start the re-symbolization thread\"");
        return;
    }
    rs->started = true;
}

static void resym_stop(struct store_sink *s)
{
    struct resym *rs = &s->resym;
    bool was_started = rs->started;
    if (rs->started) {
        pthread_mutex_lock(&rs->mu);
        __atomic_store_n(&rs->stop, true, __ATOMIC_RELAXED);
        pthread_cond_signal(&rs->cond);
        pthread_mutex_unlock(&rs->mu);
        pthread_join(rs->thread, NULL);
        /* store_sink_flush (the close's last commit) must not kick it:
         * its mutex is destroyed below. */
        rs->started = false;
    }
    for (size_t i = 0; i < rs->nitems; i++)
        item_free(&rs->items[i]);
    free(rs->items);
    for (size_t i = 0; i < rs->ngroups; i++)
        free(rs->groups[i].key);
    free(rs->groups);
    sym_free(rs->sym);
    store_close(rs->rd);
    if (rs->rd || was_started)
        hp_arena_release(&rs->cache_arena);
    free(rs->symbols_dir);
    pthread_cond_destroy(&rs->cond);
    pthread_mutex_destroy(&rs->mu);
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
    resym_stop(s);
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
        /* A clean stop hands its nodes over at the others' next round
         * rather than after the lease (a crash still waits for it). */
        struct hp_buf err = HP_BUF_INIT(0);
        if (store_fleet_leave(s->fleet, &s->me, &err) < 0)
            hp_log_warn("sink", "collector=%s err=\"%s\" msg=\"could not mark the collector "
                        "stopped; its nodes move when its lease runs out\"", s->me.id,
                        err.data ? err.data : "?");
        else
            hp_log_info("sink", "collector=%s msg=\"stopped: its nodes go to the other "
                        "collectors at their next round\"", s->me.id);
        hp_buf_release(&err);
        store_close(s->fleet);
        pthread_mutex_destroy(&s->fleet_mu);
    }
    hp_arena_release(&s->cache_arena);
    pthread_mutex_destroy(&s->work_mu);
    pthread_mutex_destroy(&s->lost_mu);
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
    pthread_mutex_init(&s->work_mu, NULL);
    pthread_mutex_init(&s->lost_mu, NULL);
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
        .debuginfod_cache_max_bytes = symcfg ? symcfg->cache_max : 0,
        .cache_ops = &s->cache_ops,
    };
    /* The store's uploads before the first poll, so it finds them. */
    bool mirror = symcfg && symcfg->symbols_from_store && symcfg->symbols_dir;
    if (mirror) {
        uint64_t last_err = 0;
        size_t added;
        (void)mirror_sync(st, symcfg->symbols_dir, &last_err, &added);
    }
    s->sym = sym_new(&so);
    resym_start(s, db, &so, mirror, symcfg ? symcfg->resym_backoff_ms : 0);
    s->base.record = store_sink_record;
    s->base.flush = store_sink_flush;
    s->base.settled = store_sink_settled;
    s->base.lost = store_sink_lost;
    s->base.ready = store_sink_ready;
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
