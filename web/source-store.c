/* The store-backed data source: what the collector serves from its SQLite
 * file (store/store.h), through the same operations as the folder source.
 *
 * Source callbacks run on libuv worker threads, possibly several at once. An
 * SQLite connection must not be used by two threads at the same time, so the
 * source keeps a small pool of read-only connections, each guarded by its own
 * mutex; a request takes the first free one (or waits for one). The collector's
 * writer has its own connection; WAL lets these readers run while it writes. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/stored.h"
#include "store/store.h"
#include "web/web.h"

#define POOL 4

struct web_source_store {
    char *path;
    pthread_mutex_t mu[POOL];
    struct store *conn[POOL]; /* opened lazily */
    pthread_mutex_t pick;
    unsigned next;
    uint64_t max_stacks; /* view budget; 0 none */
};

void web_source_store_set_max_stacks(struct web_source_store *w, uint64_t max_stacks)
{
    w->max_stacks = max_stacks;
}

int web_source_store_new(const char *db, struct web_source_store **ret, struct hp_buf *err)
{
    /* Open once now so a bad path is reported at startup, not per request. */
    struct store *s = NULL;
    int r = store_open(db, STORE_OPEN_READ, &s, err);
    if (r < 0)
        return r;
    struct web_source_store *w = hp_xcalloc(1, sizeof(*w));
    w->path = hp_xstrdup(db);
    for (int i = 0; i < POOL; i++)
        pthread_mutex_init(&w->mu[i], NULL);
    pthread_mutex_init(&w->pick, NULL);
    w->conn[0] = s;
    *ret = w;
    return 0;
}

void web_source_store_free(struct web_source_store *w)
{
    if (!w)
        return;
    for (int i = 0; i < POOL; i++) {
        store_close(w->conn[i]);
        pthread_mutex_destroy(&w->mu[i]);
    }
    pthread_mutex_destroy(&w->pick);
    free(w->path);
    free(w);
}

/* Take a connection (locked); release with put_conn. */
static int get_conn(struct web_source_store *w, unsigned *ret_slot, struct hp_buf *err)
{
    unsigned slot = POOL;
    for (unsigned i = 0; i < POOL; i++)
        if (pthread_mutex_trylock(&w->mu[i]) == 0) {
            slot = i;
            break;
        }
    if (slot == POOL) {
        pthread_mutex_lock(&w->pick);
        slot = w->next++ % POOL;
        pthread_mutex_unlock(&w->pick);
        pthread_mutex_lock(&w->mu[slot]);
    }
    if (!w->conn[slot]) {
        int r = store_open(w->path, STORE_OPEN_READ, &w->conn[slot], err);
        if (r < 0) {
            pthread_mutex_unlock(&w->mu[slot]);
            return r;
        }
    }
    *ret_slot = slot;
    return 0;
}

static void put_conn(struct web_source_store *w, unsigned slot)
{
    pthread_mutex_unlock(&w->mu[slot]);
}

/* Drop the leading "DATABASE: " from a store's message. The store names its
 * database first in every error (right for the CLI and the log), and a web
 * client is not told where the database lives. api.c's scrub_paths drops a
 * leading absolute path, which covered an SQLite file given by its full path
 * only: a relative one, or a PostgreSQL URI (redacted, but with its socket
 * folder, database and user), went out to the client, so one request got a
 * different answer on each engine. Called with the connection still held. */
static void unname_store(const struct store *s, struct hp_buf *err)
{
    const char *name = store_path(s);
    size_t n = name ? strlen(name) : 0;
    if (!err || !err->data || n == 0 || err->len < n + 2 || memcmp(err->data, name, n) != 0 ||
        memcmp(err->data + n, ": ", 2) != 0)
        return;
    memmove(err->data, err->data + n + 2, err->len - n - 2 + 1);
    err->len -= n + 2;
}

static bool name_ends(const char *name, const char *suffix)
{
    const char *brace = strchr(name, '{');
    size_t n = brace ? (size_t)(brace - name) : strlen(name), k = strlen(suffix);
    return n >= k && memcmp(name + n - k, suffix, k) == 0;
}

/* Figures by the names the databases use (reference/databases-and-formats.md):
 * RSS from process_resident_memory_bytes, the agent's /proc or Doris'
 * memory_allocated_bytes (which is VmRSS); jemalloc stats.* from
 * *jemalloc_<stat>_bytes; the tracker total from Doris' bvar
 * memory_all_tracked_sum_bytes or StarRocks' process_mem_bytes. */
struct figure_ctx {
    struct web_figures *fig;
    struct hp_arena *a;
    struct web_tracker *trk;
    size_t ntrk, cap;
    struct web_raw_figure *raw;
    size_t nraw, rawcap;
};

/* Room for one more element of size `size` in an arena array of *n used
 * and *cap allocated (doubling; the old copy stays in the arena). */
static void *arena_grow(struct hp_arena *a, void *v, size_t n, size_t *cap, size_t size,
                        size_t first)
{
    if (n < *cap)
        return v;
    size_t ncap = *cap ? *cap * 2 : first;
    void *nv = hp_arena_alloc(a, ncap * size);
    if (n)
        memcpy(nv, v, n * size);
    *cap = ncap;
    return nv;
}

static int figure_cb(const struct store_stat *st, void *ctx)
{
    struct figure_ctx *c = ctx;
    struct web_figures *f = c->fig;
    const char *n = st->name;
    /* Every figure as published, for the discrepancy rules. */
    c->raw = arena_grow(c->a, c->raw, c->nraw, &c->rawcap, sizeof(*c->raw), 32);
    c->raw[c->nraw].name = hp_arena_strdup(c->a, n);
    c->raw[c->nraw].value = st->value;
    c->nraw++;
    if (name_ends(n, "process_resident_memory_bytes") || name_ends(n, "proc_rss_bytes") ||
        name_ends(n, "doris_be_memory_allocated_bytes"))
        f->rss = st->value;
    else if (name_ends(n, "jemalloc_allocated_bytes"))
        f->je_allocated = st->value;
    else if (name_ends(n, "jemalloc_active_bytes"))
        f->je_active = st->value;
    else if (name_ends(n, "jemalloc_resident_bytes"))
        f->je_resident = st->value;
    else if (name_ends(n, "jemalloc_metadata_bytes"))
        f->je_metadata = st->value;
    else if (name_ends(n, "jemalloc_retained_bytes"))
        f->je_retained = st->value;
    else if (strcmp(n, "heapfleet_symbolized_ratio") == 0)
        f->symbolized_ratio = st->value;
    else if (name_ends(n, "memory_all_tracked_sum_bytes") ||
             name_ends(n, "starrocks_be_process_mem_bytes"))
        f->tracker_total = st->value;
    /* Tracker rows: Doris /mem_tracker current bytes and bvar sums, StarRocks
     * per-pool *_mem_bytes. */
    if (strncmp(n, "mem_tracker_current_bytes", 25) == 0 ||
        (strncmp(n, "memory_", 7) == 0 && name_ends(n, "_trackers_sum_bytes")) ||
        (strncmp(n, "starrocks_be_", 13) == 0 && name_ends(n, "_mem_bytes"))) {
        c->trk = arena_grow(c->a, c->trk, c->ntrk, &c->cap, sizeof(*c->trk), 16);
        c->trk[c->ntrk].name = hp_arena_strdup(c->a, n);
        c->trk[c->ntrk].bytes = st->value;
        c->ntrk++;
    }
    return 0;
}

/* The figures gathered in c into out. */
static void figures_set(const struct figure_ctx *c, struct web_snapshot_info *out)
{
    out->trackers = c->trk;
    out->ntrackers = c->ntrk;
    out->raw = c->nraw ? c->raw : NULL;
    out->nraw = c->nraw;
}

/* out from si, its figures read when `figures` (else left for the caller,
 * NAN and none). */
static void info_from_store(struct store *s, const struct store_snapshot_info *si,
                            struct hp_arena *a, bool figures, struct web_snapshot_info *out)
{
    memset(out, 0, sizeof(*out));
    out->id = si->id;
    out->node = hp_arena_strdup(a, si->node);
    out->time_ms = si->taken_at;
    out->format = profile_format_name(si->format);
    out->raw_bytes = si->raw_size;
    for (int v = 0; v < PV_COUNT; v++)
        out->total[v] = si->status == STORE_STATUS_OK ? si->totals[v] : NAN;
    struct web_figures *f = &out->fig;
    f->rss = f->je_allocated = f->je_active = f->je_resident = f->je_metadata =
        f->je_retained = f->tracker_total = f->symbolized_ratio = NAN;
    struct figure_ctx fc = { .fig = f, .a = a };
    if (figures && store_snapshot_stats(s, si->id, figure_cb, &fc, NULL) < 0)
        fc.ntrk = fc.nraw = 0; /* figures are optional: a snapshot without them still shows */
    figures_set(&fc, out);
}

/* Snapshots' figures from one listing of their node's statistics. */
struct figures_batch {
    const int64_t *ids;   /* the snapshots, ascending */
    const size_t *at;     /* per id: its place in fc */
    struct figure_ctx *fc;
    size_t n;
};

static int batch_stat_cb(int64_t snapshot_id, const struct store_stat *st, void *ctx)
{
    const struct figures_batch *b = ctx;
    size_t i = hp_search_le_u64(b->ids, b->n, sizeof(*b->ids), 0, (uint64_t)snapshot_id);
    return i > 0 && b->ids[i - 1] == snapshot_id ? figure_cb(st, &b->fc[b->at[i - 1]]) : 0;
}

struct id_at {
    int64_t id;
    size_t at;
};

static int id_at_cmp(const void *x, const void *y)
{
    const struct id_at *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* out[0..n) (si's, of node node_id) get their figures from one statement
 * (one a snapshot was 24,000 for /nodes?spark=24 over 1,000 nodes, each a
 * round trip on PostgreSQL). */
static void figures_of_node(struct store *s, int64_t node_id,
                            const struct store_snapshot_info *si, size_t n, struct hp_arena *a,
                            struct web_snapshot_info *out)
{
    if (!n)
        return;
    struct id_at *ord = hp_xmalloc(n * sizeof(*ord));
    int64_t *ids = hp_xmalloc(n * sizeof(*ids));
    size_t *at = hp_xmalloc(n * sizeof(*at));
    struct figure_ctx *fc = hp_xcalloc(n, sizeof(*fc));
    int64_t lo = si[0].taken_at, hi = lo;
    for (size_t i = 0; i < n; i++) {
        ord[i] = (struct id_at){ si[i].id, i };
        fc[i] = (struct figure_ctx){ .fig = &out[i].fig, .a = a };
        lo = HP_MIN(lo, si[i].taken_at);
        hi = HP_MAX(hi, si[i].taken_at);
    }
    qsort(ord, n, sizeof(*ord), id_at_cmp);
    for (size_t i = 0; i < n; i++) {
        ids[i] = ord[i].id;
        at[i] = ord[i].at;
    }
    struct figures_batch b = { ids, at, fc, n };
    bool ok = store_node_stats(s, node_id, lo, hi, NULL, NULL, batch_stat_cb, &b, NULL) == 0;
    for (size_t i = 0; i < n; i++) {
        if (!ok) /* figures are optional: the snapshots still show */
            fc[i].ntrk = fc[i].nraw = 0;
        figures_set(&fc[i], &out[i]);
    }
    free(fc);
    free(at);
    free(ids);
    free(ord);
}

/* ---- list nodes ---- */

struct nodes_ctx {
    struct store *s;
    struct hp_arena *a;
    struct web_node_info *v;
    size_t n, cap;
};

static int node_cb(const struct store_node_row *row, void *ctx)
{
    struct nodes_ctx *c = ctx;
    c->v = hp_xgrow(c->v, &c->cap, c->n + 1, sizeof(*c->v));
    struct web_node_info *ni = &c->v[c->n++];
    memset(ni, 0, sizeof(*ni));
    ni->name = hp_arena_strdup(c->a, row->name);
    ni->kind = hp_arena_strdup(c->a, row->kind[0] ? row->kind : "file");
    ni->address = row->address[0] ? hp_arena_strdup(c->a, row->address) : NULL;
    ni->status = row->last_at == 0                       ? "never"
                 : row->last_status == STORE_STATUS_OK ? "ok"
                                                       : "failing";
    ni->error = row->last_error[0] ? hp_arena_strdup(c->a, row->last_error) : NULL;
    ni->last_attempt_ms = row->last_at;
    ni->nsnapshots = row->nsnapshots;
    if (row->last_ok_id) {
        struct store_snapshot_info si;
        if (store_snapshot_info(c->s, row->last_ok_id, &si, NULL) == 0) {
            info_from_store(c->s, &si, c->a, true, &ni->latest);
            ni->has_latest = true;
        }
    }
    return 0;
}

static int list_nodes(void *ctx, struct hp_arena *a, struct web_node_info **ret, size_t *ret_n,
                      struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    struct nodes_ctx c = { .s = w->conn[slot], .a = a };
    r = store_nodes_list(w->conn[slot], node_cb, &c, err);
    if (r < 0)
        unname_store(w->conn[slot], err);
    put_conn(w, slot);
    if (r < 0) {
        free(c.v);
        return r;
    }
    /* Hand the array over in the caller's arena. */
    struct web_node_info *out = hp_arena_alloc(a, (c.n ? c.n : 1) * sizeof(*out));
    if (c.n)
        memcpy(out, c.v, c.n * sizeof(*out));
    free(c.v);
    *ret = out;
    *ret_n = c.n;
    return 0;
}

/* ---- list snapshots ---- */

struct snaps_ctx {
    struct store_snapshot_info *v;
    size_t n, cap;
};

static int snap_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct snaps_ctx *c = ctx;
    c->v = hp_xgrow(c->v, &c->cap, c->n + 1, sizeof(*c->v));
    c->v[c->n++] = *si;
    return 0;
}

static int list_snapshots(void *ctx, const char *node, int64_t since_ms, size_t limit,
                          struct hp_arena *a, struct web_snapshot_info **ret, size_t *ret_n,
                          struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    struct store *s = w->conn[slot];
    int64_t node_id;
    struct snaps_ctx c = { 0 };
    r = store_node_find(s, node, &node_id, err);
    if (r == 0)
        r = store_snapshots_list(s, node_id, since_ms ? since_ms : INT64_MIN, INT64_MAX, false,
                                 snap_cb, &c, err);
    if (r == 0) {
        size_t first = limit && c.n > limit ? c.n - limit : 0;
        struct web_snapshot_info *out = hp_arena_alloc(a, (c.n - first + 1) * sizeof(*out));
        for (size_t i = first; i < c.n; i++)
            info_from_store(s, &c.v[i], a, false, &out[i - first]);
        figures_of_node(s, node_id, c.v + first, c.n - first, a, out);
        *ret = out;
        *ret_n = c.n - first;
    } else if (r < 0) {
        unname_store(s, err);
    }
    put_conn(w, slot);
    free(c.v);
    return r;
}

/* ---- load one snapshot ---- */

/* The snapshot a parsed selector names, over s: its id and info. any_id:
 * #ID as it is, a failed attempt's too (the store's resolver names
 * profiles only). */
static int snapshot_of(struct store *s, const struct web_selector *sel, bool any_id,
                       int64_t *ret_id, struct store_snapshot_info *ret_si, struct hp_buf *err)
{
    char text[256], when[32];
    int64_t id = sel->id;
    int r = 0;
    if (sel->node || !any_id) {
        if (!sel->node)
            snprintf(text, sizeof(text), "#%lld", (long long)sel->id);
        else if (sel->at_ms)
            snprintf(text, sizeof(text), "%s@%s", sel->node,
                     store_time_format(sel->at_ms, when, sizeof(when)));
        else
            snprintf(text, sizeof(text), "%s", sel->node);
        r = store_selector_resolve(s, text, hp_wall_ms(), &id, err);
    }
    if (r == 0)
        r = store_snapshot_info(s, id, ret_si, err);
    if (r == 0)
        *ret_id = id;
    return r;
}

static int load_snapshot(void *ctx, const struct web_selector *sel, enum profile_value rank,
                         struct hp_arena *a, struct web_snapshot_info *ret_info,
                         struct profile **ret_profile, struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    struct store *s = w->conn[slot];
    int64_t id = 0;
    struct profile *p = NULL;
    struct store_snapshot_info si;
    struct store_pruned pr = { 0 };
    r = snapshot_of(s, sel, false, &id, &si, err);
    /* Over the view budget (--max-view-stacks) only the heaviest stacks are
     * read and drawn: the view stays bounded in time and memory, and says
     * what it left out (web/API.md, "pruned"). */
    if (r == 0)
        r = store_snapshot_load_top(s, id, (size_t)w->max_stacks, rank, &p, &pr, err);
    if (r == 0) {
        info_from_store(s, &si, a, true, ret_info);
        ret_info->stacks_total = pr.stacks_total;
        ret_info->stacks_dropped = pr.stacks_dropped;
        memcpy(ret_info->dropped, pr.dropped, sizeof(pr.dropped));
        ret_info->pruned_rank = rank;
    } else if (r < 0)
        unname_store(s, err);
    put_conn(w, slot);
    if (r < 0)
        return r;
    *ret_profile = p;
    return 0;
}

static int raw_dump(void *ctx, const struct web_selector *sel, struct hp_arena *a,
                    struct web_snapshot_info *ret_info, void **ret_data, size_t *ret_len,
                    struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    struct store *s = w->conn[slot];
    int64_t id = 0;
    struct store_snapshot_info si;
    r = snapshot_of(s, sel, true, &id, &si, err);
    if (r == 0)
        r = store_snapshot_raw(s, id, ret_data, ret_len, err);
    if (r == 0)
        info_from_store(s, &si, a, false, ret_info);
    else
        unname_store(s, err);
    put_conn(w, slot);
    return r;
}

/* ---- a node's snapshots for leaks, by stack ids ---- */

static int load_stored(void *ctx, const struct query_opts *o, struct query_snapshot *snaps,
                       size_t n, struct query_stored **ret, struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    r = query_stored_fill(w->conn[slot], o, snaps, n, 0, NULL, ret, err);
    if (r < 0)
        unname_store(w->conn[slot], err);
    put_conn(w, slot);
    return r;
}

static int trend_functions(void *ctx, const struct query_opts *o,
                           const struct query_snapshot *snaps, size_t n,
                           struct query_trend_opts *t, struct query_stored **ret,
                           struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    r = query_stored_trend_functions(w->conn[slot], o, snaps, n, t, ret, err);
    if (r < 0)
        unname_store(w->conn[slot], err);
    put_conn(w, slot);
    return r;
}

static int symbolization(void *ctx, struct hp_buf *out, struct hp_buf *err)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    int r = get_conn(w, &slot, err);
    if (r < 0)
        return r;
    struct store_usage u;
    r = store_usage_get(w->conn[slot], &u, err);
    if (r < 0)
        unname_store(w->conn[slot], err);
    put_conn(w, slot);
    if (r < 0)
        return r;
    hp_buf_printf(out,
                  "{\"snapshots\": %lld, \"stacks\": %lld, \"locations\": %lld, "
                  "\"functions\": %lld, \"note\": \"stored profiles are symbolized when they "
                  "are fetched or imported; `query reindex` re-symbolizes them\"}",
                  (long long)u.snapshots, (long long)u.stacks, (long long)u.locations,
                  (long long)u.functions);
    return 0;
}

static int metrics(void *ctx, struct hp_buf *out)
{
    struct web_source_store *w = ctx;
    unsigned slot;
    if (get_conn(w, &slot, NULL) < 0)
        return 0;
    struct store_usage u;
    int r = store_usage_get(w->conn[slot], &u, NULL);
    put_conn(w, slot);
    if (r < 0)
        return 0;
    hp_buf_printf(out,
                  "# HELP heapfleet_store_bytes Size of the SQLite database file.\n"
                  "# TYPE heapfleet_store_bytes gauge\n"
                  "heapfleet_store_bytes %lld\n"
                  "# HELP heapfleet_store_raw_bytes Raw dumps as fetched, and compressed.\n"
                  "# TYPE heapfleet_store_raw_bytes gauge\n"
                  "heapfleet_store_raw_bytes{form=\"fetched\"} %lld\n"
                  "heapfleet_store_raw_bytes{form=\"stored\"} %lld\n"
                  "# HELP heapfleet_store_snapshots Snapshots kept.\n"
                  "# TYPE heapfleet_store_snapshots gauge\n"
                  "heapfleet_store_snapshots %lld\n",
                  (long long)u.file_bytes, (long long)u.raw_orig_bytes, (long long)u.raw_bytes,
                  (long long)u.snapshots);
    return 0;
}

const struct web_source_ops web_source_store_ops = {
    .list_nodes = list_nodes,
    .list_snapshots = list_snapshots,
    .load_snapshot = load_snapshot,
    .load_stored = load_stored,
    .trend_functions = trend_functions,
    .raw_dump = raw_dump,
    .symbolization = symbolization,
    .metrics = metrics,
};
