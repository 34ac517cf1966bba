/* The API's handlers: each reads through the data source and answers with
 * the query library, so a number on a web page is the number `query` prints.
 * The tree endpoint (flame graphs) and the diff view are built here from
 * query_fold's folded profile; everything else is query_* output wrapped in
 * JSON.
 *
 * Thread context: worker threads (called from web_api_run). Each request owns
 * its arena and body; the source is shared and thread-safe. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "web/web-internal.h"
#include "query/stored.h"

/* ---- helpers ------------------------------------------------------------------ */

static void reply_json(struct web_request *r, json_t *root)
{
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    hp_buf_reset(&r->body);
    if (!text || hp_buf_puts(&r->body, text) < 0 || hp_buf_puts(&r->body, "\n") < 0) {
        free(text);
        web_api_error(r, 500, "response larger than the configured cap");
        return;
    }
    free(text);
    r->status = 200;
    r->content_type = "application/json";
}

/* Copy `msg` with server paths taken out: a leading "/abs/path: " is
 * dropped, and any other absolute path (a word that starts with '/' and has
 * another '/' in it) is cut to its last part. The store and the query
 * library name their files in errors; a client has no business learning
 * where the database lives. */
static void scrub_paths(struct hp_buf *out, const char *msg)
{
    if (msg[0] == '/') {
        const char *sep = strstr(msg, ": ");
        if (sep && !memchr(msg, ' ', (size_t)(sep - msg)))
            msg = sep + 2;
    }
    for (const char *p = msg; *p;) {
        bool boundary = p == msg || strchr(" \t\"'(=", p[-1]);
        size_t run = strcspn(p, " \t\"':,)");
        const char *last = NULL;
        if (*p == '/' && boundary)
            for (const char *q = p + 1; q < p + run; q++)
                if (*q == '/')
                    last = q;
        if (last) {
            (void)hp_buf_append(out, last + 1, (size_t)(p + run - last - 1));
            p += run;
        } else {
            (void)hp_buf_append(out, p, 1);
            p++;
        }
    }
}

/* Map a source/query error to a response. A client's mistake (4xx) is said
 * in words without server paths; a server failure is logged in full and the
 * client only learns that it happened. */
static void reply_failure(struct web_request *r, int rc, const struct hp_buf *err)
{
    const char *msg = err->len ? err->data : hp_strerror(rc);
    int status = rc == HP_ENOTFOUND ? 404 : rc == HP_EPARSE || rc == HP_EUSAGE ? 400
                                          : rc == HP_ETOOBIG                   ? 413
                                                                               : 500;
    if (status == 500) {
        struct hp_buf v = HP_BUF_INIT(0);
        (void)hp_logfmt_value(&v, msg);
        hp_log_warn("web", "status=500 err=%s msg=\"request failed\"", v.data ? v.data : "");
        hp_buf_release(&v);
        web_api_error(r, 500, "internal error (%s); the server log has the details",
                      hp_strerror(rc));
        return;
    }
    struct hp_buf clean = HP_BUF_INIT(0);
    scrub_paths(&clean, msg);
    web_api_error(r, status, "%s", clean.data ? clean.data : "");
    hp_buf_release(&clean);
}

static json_t *jnum(double v)
{
    if (isnan(v))
        return json_null();
    if (fabs(v) < 9e15 && v == floor(v))
        return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *jstr(const char *s)
{
    return query_json_string(s);
}

static json_t *jtime(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char buf[40];
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static void set_fig(json_t *o, const char *k, double v)
{
    if (!isnan(v))
        json_object_set_new(o, k, jnum(v));
}

static const char *unit_of(enum profile_value v)
{
    return v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE ? "bytes" : "objects";
}

static json_t *snapshot_json(const struct web_snapshot_info *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(s->id));
    json_object_set_new(o, "node", jstr(s->node));
    char sel[32];
    snprintf(sel, sizeof(sel), "#%lld", (long long)s->id);
    json_object_set_new(o, "selector", json_string(sel));
    json_object_set_new(o, "time_ms", json_integer(s->time_ms));
    json_object_set_new(o, "time", jtime(s->time_ms));
    json_object_set_new(o, "format", jstr(s->format ? s->format : "unknown"));
    json_object_set_new(o, "raw_bytes", json_integer(s->raw_bytes));
    json_t *t = json_object();
    for (int i = 0; i < PV_COUNT; i++)
        json_object_set_new(t, profile_value_name((enum profile_value)i),
                            jnum(isnan(s->total[i]) ? NAN : round(s->total[i])));
    json_object_set_new(o, "totals", t);
    json_t *f = json_object();
    set_fig(f, "rss", s->fig.rss);
    set_fig(f, "jemalloc_allocated", s->fig.je_allocated);
    set_fig(f, "jemalloc_active", s->fig.je_active);
    set_fig(f, "jemalloc_resident", s->fig.je_resident);
    set_fig(f, "jemalloc_metadata", s->fig.je_metadata);
    set_fig(f, "jemalloc_retained", s->fig.je_retained);
    set_fig(f, "tracker_total", s->fig.tracker_total);
    set_fig(f, "symbolized_ratio", s->fig.symbolized_ratio);
    json_object_set_new(o, "figures", f);
    if (s->stacks_dropped > 0) {
        /* Over the source's view budget: what the view leaves out. */
        enum profile_value rk = s->pruned_rank;
        json_t *pr = json_object(), *dv = json_object();
        json_object_set_new(pr, "stacks_total", json_integer(s->stacks_total));
        json_object_set_new(pr, "stacks_kept", json_integer(s->stacks_total - s->stacks_dropped));
        json_object_set_new(pr, "stacks_dropped", json_integer(s->stacks_dropped));
        json_object_set_new(pr, "ranked_by", json_string(profile_value_name(rk)));
        for (int i = 0; i < PV_COUNT; i++)
            json_object_set_new(dv, profile_value_name((enum profile_value)i),
                                jnum(round(s->dropped[i])));
        json_object_set_new(pr, "dropped", dv);
        char amount[32];
        if (strcmp(unit_of(rk), "bytes") == 0)
            hp_fmt_bytes(s->dropped[rk], amount, sizeof(amount));
        else
            snprintf(amount, sizeof(amount), "%.0f objects", s->dropped[rk]);
        char *note = hp_xasprintf("%lld of %lld stacks dropped (the lightest by %s, over the "
                                  "view budget); they hold %s",
                                  (long long)s->stacks_dropped, (long long)s->stacks_total,
                                  profile_value_name(rk), amount);
        json_object_set_new(pr, "note", json_string(note));
        free(note);
        json_object_set_new(o, "pruned", pr);
    }
    if (s->ntrackers) {
        json_t *a = json_array();
        for (size_t i = 0; i < s->ntrackers; i++) {
            json_t *tr = json_object();
            json_object_set_new(tr, "name", jstr(s->trackers[i].name));
            json_object_set_new(tr, "bytes", jnum(s->trackers[i].bytes));
            json_array_append_new(a, tr);
        }
        json_object_set_new(o, "trackers", a);
    }
    return o;
}

static void figures_init_nan(struct web_snapshot_info *s)
{
    s->fig.rss = s->fig.je_allocated = s->fig.je_active = s->fig.je_resident = NAN;
    s->fig.je_metadata = s->fig.je_retained = s->fig.tracker_total = NAN;
    s->fig.symbolized_ratio = NAN;
    for (int i = 0; i < PV_COUNT; i++)
        s->total[i] = NAN;
}

static int load(struct web_request *r, const struct web_selector *sel,
                struct web_snapshot_info *info, struct profile **ret, struct hp_buf *err)
{
    if (!r->src->load_snapshot) {
        hp_err_printf(err, "this data source cannot load snapshots");
        return HP_EUSAGE;
    }
    memset(info, 0, sizeof(*info));
    figures_init_nan(info);
    return r->src->load_snapshot(r->src_ctx, sel, r->p.qo.sample, &r->arena, info, ret, err);
}

/* ---- nodes ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "growing": at least 3 points, the last over 10% above the first and most
 * steps up; a hint for the fleet page, not the leak analysis. */
static bool spark_growing(const double *v, size_t n)
{
    if (n < 3 || !(v[0] > 0) || !(v[n - 1] > v[0] * 1.1))
        return false;
    size_t ups = 0;
    for (size_t i = 1; i < n; i++)
        ups += v[i] >= v[i - 1];
    return ups * 4 >= (n - 1) * 3;
}

void web_h_nodes(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_node_info *nodes = NULL;
    size_t n = 0;
    if (!r->src->list_nodes) {
        web_api_error(r, 501, "this data source cannot list nodes");
        return;
    }
    int rc = r->src->list_nodes(r->src_ctx, &r->arena, &nodes, &n, &err);
    if (rc < 0) {
        reply_failure(r, rc, &err);
        hp_buf_release(&err);
        return;
    }
    double *totals = hp_xcalloc(n + 1, sizeof(*totals));
    size_t ntot = 0;
    double sum = 0;
    size_t failing = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].has_latest && !isnan(nodes[i].latest.total[PV_INUSE_SPACE])) {
            totals[ntot++] = nodes[i].latest.total[PV_INUSE_SPACE];
            sum += nodes[i].latest.total[PV_INUSE_SPACE];
        }
        failing += nodes[i].status && strcmp(nodes[i].status, "failing") == 0;
    }
    hp_qsort(totals, ntot, sizeof(*totals), cmp_double);
    double median = ntot ? (ntot % 2 ? totals[ntot / 2]
                                     : (totals[ntot / 2 - 1] + totals[ntot / 2]) / 2)
                         : NAN;
    json_t *arr = json_array();
    double *spark = hp_xcalloc(r->p.spark + 1, sizeof(*spark));
    for (size_t i = 0; i < n; i++) {
        const struct web_node_info *ni = &nodes[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", jstr(ni->name));
        json_object_set_new(o, "kind", jstr(ni->kind ? ni->kind : "unknown"));
        if (ni->address)
            json_object_set_new(o, "address", jstr(ni->address));
        json_object_set_new(o, "status", jstr(ni->status ? ni->status : "never"));
        json_object_set_new(o, "error", ni->error ? jstr(ni->error) : json_null());
        json_object_set_new(o, "last_attempt", jtime(ni->last_attempt_ms));
        json_object_set_new(o, "snapshots", json_integer(ni->nsnapshots));
        json_object_set_new(o, "latest", ni->has_latest ? snapshot_json(&ni->latest) : json_null());
        json_t *anom = json_array();
        if (ni->status && strcmp(ni->status, "failing") == 0)
            json_array_append_new(anom, json_string("failing"));
        size_t ns = 0;
        if (r->p.spark && r->src->list_snapshots) {
            struct web_snapshot_info *snaps = NULL;
            size_t nsnap = 0;
            hp_buf_reset(&err);
            if (r->src->list_snapshots(r->src_ctx, ni->name, 0, r->p.spark, &r->arena, &snaps,
                                       &nsnap, &err) == 0) {
                json_t *sp = json_array();
                for (size_t k = 0; k < nsnap && ns < r->p.spark; k++) {
                    double v = snaps[k].total[PV_INUSE_SPACE];
                    if (isnan(v))
                        continue;
                    spark[ns++] = v;
                    json_array_append_new(sp, jnum(round(v)));
                }
                json_object_set_new(o, "spark", sp);
            }
        }
        if (spark_growing(spark, ns))
            json_array_append_new(anom, json_string("growing"));
        if (ntot >= 3 && ni->has_latest && ni->latest.total[PV_INUSE_SPACE] > 2 * median)
            json_array_append_new(anom, json_string("outlier"));
        json_object_set_new(o, "anomalies", anom);
        json_array_append_new(arr, o);
    }
    json_t *root = json_object();
    json_t *fleet = json_object();
    json_object_set_new(fleet, "nodes", json_integer((json_int_t)n));
    json_object_set_new(fleet, "failing", json_integer((json_int_t)failing));
    json_object_set_new(fleet, "heap_total", jnum(round(sum)));
    json_object_set_new(fleet, "heap_median", jnum(isnan(median) ? NAN : round(median)));
    json_object_set_new(root, "fleet", fleet);
    json_object_set_new(root, "nodes", arr);
    free(totals);
    free(spark);
    hp_buf_release(&err);
    reply_json(r, root);
}

/* Thin n snapshots (oldest first) to about `points`: the time range is cut
 * into points/2 buckets and each keeps its smallest and largest heap total
 * (in time order), so spikes and dips survive; the first and last are always
 * kept. Marks keep[]. */
static double heap_of(const struct web_snapshot_info *s)
{
    return isnan(s->total[PV_INUSE_SPACE]) ? 0 : s->total[PV_INUSE_SPACE];
}

static void downsample(const struct web_snapshot_info *s, size_t n, size_t points, bool *keep)
{
    size_t buckets = HP_MAX(points / 2, (size_t)1);
    int64_t t0 = s[0].time_ms, span = s[n - 1].time_ms - t0;
    size_t i = 0;
    keep[0] = keep[n - 1] = true;
    for (size_t b = 0; b < buckets && i < n; b++) {
        int64_t end = b + 1 == buckets ? INT64_MAX
                                       : t0 + (int64_t)((double)span * (double)(b + 1) /
                                                        (double)buckets);
        size_t lo = SIZE_MAX, hi = SIZE_MAX;
        for (; i < n && s[i].time_ms <= end; i++) {
            double v = heap_of(&s[i]);
            if (lo == SIZE_MAX || v < heap_of(&s[lo]))
                lo = i;
            if (hi == SIZE_MAX || v > heap_of(&s[hi]))
                hi = i;
        }
        if (lo != SIZE_MAX)
            keep[lo] = keep[hi] = true;
    }
}

/* POST /api/v1/nodes/{node}/snapshot: the poller says the poll succeeded
 * and its record is committed; the snapshot is the node's newest taken at
 * or after the poll's start (one node is polled by one job at a time). */
void web_h_poll_result(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_snapshot_info *snaps = NULL;
    size_t n = 0;
    if (!r->src->list_snapshots) {
        web_api_error(r, 501, "this data source cannot list snapshots");
        return;
    }
    int rc = r->src->list_snapshots(r->src_ctx, r->p.node, r->poll.started_ms, 1, &r->arena,
                                    &snaps, &n, &err);
    if (rc < 0 && rc != HP_ENOTFOUND) {
        reply_failure(r, rc, &err);
        hp_buf_release(&err);
        return;
    }
    hp_buf_release(&err);
    json_t *root = json_object();
    json_object_set_new(root, "node", jstr(r->p.node));
    json_object_set_new(root, "status", json_string("ok"));
    json_object_set_new(root, "elapsed_ms",
                        json_integer((json_int_t)(r->poll.finished_ms - r->poll.started_ms)));
    json_object_set_new(root, "attempts", json_integer((json_int_t)r->poll.nattempts));
    if (rc == 0 && n == 1) {
        json_object_set_new(root, "snapshot", snapshot_json(&snaps[0]));
    } else {
        /* Polled and recorded, yet not readable here (retention took it
         * already, or the store answers from elsewhere): say so. */
        json_object_set_new(root, "snapshot", json_null());
        json_object_set_new(root, "note", json_string("the poll succeeded, but its snapshot "
                                                      "is not in the store this server reads"));
    }
    reply_json(r, root);
}

void web_h_snapshots(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_snapshot_info *snaps = NULL;
    size_t n = 0;
    if (!r->src->list_snapshots) {
        web_api_error(r, 501, "this data source cannot list snapshots");
        return;
    }
    /* With points=N every snapshot in range is read and thinned here, so a
     * chart never silently stops at the newest 1,000. */
    size_t limit = r->p.limit ? r->p.limit : r->p.points ? 100000 : 1000;
    int rc = r->src->list_snapshots(r->src_ctx, r->p.node, r->p.since_ms, limit, &r->arena,
                                    &snaps, &n, &err);
    if (rc < 0) {
        reply_failure(r, rc, &err);
        hp_buf_release(&err);
        return;
    }
    bool *keep = NULL;
    if (r->p.points && n > r->p.points) {
        keep = hp_xcalloc(n, sizeof(*keep));
        downsample(snaps, n, r->p.points, keep);
    }
    json_t *root = json_object();
    json_object_set_new(root, "node", jstr(r->p.node));
    json_object_set_new(root, "total", json_integer((json_int_t)n));
    json_object_set_new(root, "downsampled", json_boolean(keep != NULL));
    json_object_set_new(root, "limited", json_boolean(n == limit));
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        if (!keep || keep[i])
            json_array_append_new(arr, snapshot_json(&snaps[i]));
    json_object_set_new(root, "snapshots", arr);
    free(keep);
    hp_buf_release(&err);
    reply_json(r, root);
}

void web_h_snapshot(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_snapshot_info info;
    struct profile *p = NULL;
    int rc = load(r, &r->p.sel, &info, &p, &err);
    if (rc < 0) {
        reply_failure(r, rc, &err);
        hp_buf_release(&err);
        return;
    }
    json_t *root = snapshot_json(&info);
    json_t *pm = json_object();
    json_object_set_new(pm, "format", json_string(profile_format_name(p->format)));
    json_object_set_new(pm, "period", json_integer((json_int_t)p->period));
    json_object_set_new(pm, "stacks", json_integer((json_int_t)p->nsamples));
    json_object_set_new(pm, "locations", json_integer((json_int_t)p->nlocs));
    json_object_set_new(pm, "mappings", json_integer((json_int_t)p->nmappings));
    json_object_set_new(pm, "threads", json_integer((json_int_t)p->nthreads));
    json_object_set_new(pm, "has_alloc", json_boolean(p->has_alloc));
    size_t sym = 0;
    for (size_t i = 0; i < p->nlocs; i++)
        sym += (p->locs[i].flags & (PROFILE_LOC_SYMBOLIZED | PROFILE_LOC_NAMED)) != 0 ||
               p->locs[i].nframes > 0;
    json_object_set_new(pm, "symbolized_locations", json_integer((json_int_t)sym));
    if (p->hint)
        json_object_set_new(pm, "hint", jstr(p->hint));
    json_object_set_new(root, "profile", pm);
    /* Coverage by bytes, and per object left unnamed what every source
     * said: the note's lines as structured JSON (query/coverage.c). */
    json_object_set_new(root, "symbols", query_coverage_json(p));
    profile_free(p);
    hp_buf_release(&err);
    reply_json(r, root);
}

/* ---- top ---------------------------------------------------------------------------- */

/* Load, fold and rank one selector. On failure the response is already set. */
static int fold_one(struct web_request *r, const struct web_selector *sel,
                    struct web_snapshot_info *info, struct profile **ret_p,
                    struct query_folded **ret_f, struct query_top **ret_t)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    int rc = load(r, sel, info, &p, &err);
    if (rc == 0)
        rc = query_fold(p, &r->p.qo, &f, &err);
    if (rc == 0 && ret_t)
        rc = query_top_build(f, r->p.qo.sample, &t);
    if (rc < 0) {
        reply_failure(r, rc, &err);
        query_folded_free(f);
        profile_free(p);
        hp_buf_release(&err);
        return rc;
    }
    *ret_p = p;
    *ret_f = f;
    if (ret_t)
        *ret_t = t;
    hp_buf_release(&err);
    return 0;
}

void web_h_top(struct web_request *r)
{
    struct web_snapshot_info info;
    struct profile *p;
    struct query_folded *f;
    struct query_top *t;
    if (fold_one(r, &r->p.sel, &info, &p, &f, &t) < 0)
        return;
    enum profile_value v = r->p.qo.sample;
    size_t rows = r->p.qo.top ? HP_MIN(r->p.qo.top, t->n) : t->n;
    json_t *root = json_object();
    json_object_set_new(root, "snapshot", snapshot_json(&info));
    json_object_set_new(root, "sample", json_string(profile_value_name(v)));
    json_object_set_new(root, "unit", json_string(unit_of(v)));
    json_object_set_new(root, "total", jnum(round(f->total[v])));
    json_object_set_new(root, "functions_total", json_integer((json_int_t)t->n));
    json_t *arr = json_array();
    for (size_t i = 0; i < rows; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", jstr(t->funcs[i].name));
        json_object_set_new(o, "flat", jnum(round(t->funcs[i].flat[v])));
        json_object_set_new(o, "cum", jnum(round(t->funcs[i].cum[v])));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "functions", arr);
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
    reply_json(r, root);
}

/* ---- trees (flame graphs) --------------------------------------------------------- */

/* A call tree merged from one or two folded profiles (two for a diff: slot 0
 * is the base A, slot 1 the new B). Children are found by (parent, name id)
 * in one hash map; names are interned by content so both profiles share ids. */
struct tnode {
    uint32_t name;
    uint32_t child, sibling; /* first child, next sibling; 0 = none (0 is the root) */
    int64_t v[2];
};

struct tree {
    struct hp_arena arena;
    struct hp_strtab strs;
    struct hp_map64 name_ids; /* interned pointer -> id */
    const char **names;
    size_t nnames, names_cap;
    struct hp_map64 kids;     /* parent << 32 | name -> node */
    struct tnode *nodes;
    size_t n, cap;
};

static void tree_init(struct tree *t)
{
    memset(t, 0, sizeof(*t));
    hp_arena_init(&t->arena);
    hp_strtab_init(&t->strs, &t->arena);
    hp_map64_init(&t->name_ids);
    hp_map64_init(&t->kids);
}

static void tree_release(struct tree *t)
{
    hp_map64_release(&t->kids);
    hp_map64_release(&t->name_ids);
    hp_strtab_release(&t->strs);
    hp_arena_release(&t->arena);
    free(t->names);
    free(t->nodes);
}

static uint32_t tree_name(struct tree *t, const char *s)
{
    const char *k = hp_strtab_intern(&t->strs, s, strlen(s));
    uint32_t id;
    if (hp_map64_put(&t->name_ids, (uint64_t)(uintptr_t)k, (uint32_t)t->nnames, &id) == 0) {
        t->names = hp_xgrow(t->names, &t->names_cap, t->nnames + 1, sizeof(*t->names));
        t->names[t->nnames++] = k;
    }
    return id;
}

static uint32_t tree_node(struct tree *t, uint32_t name)
{
    t->nodes = hp_xgrow(t->nodes, &t->cap, t->n + 1, sizeof(*t->nodes));
    struct tnode *nd = &t->nodes[t->n];
    memset(nd, 0, sizeof(*nd));
    nd->name = name;
    return (uint32_t)t->n++;
}

static void tree_start(struct tree *t)
{
    tree_name(t, "all");
    tree_name(t, "(small frames)");
    tree_node(t, 0);
}

static void tree_add(struct tree *t, const struct query_folded *f, enum profile_value v, int slot)
{
    int64_t *ints = hp_xmalloc((f->nentries + 1) * sizeof(*ints));
    double *vals = hp_xmalloc((f->nentries + 1) * sizeof(*vals));
    for (size_t i = 0; i < f->nentries; i++)
        vals[i] = f->entries[i].value[v];
    query_round_preserving_sum(vals, f->nentries, ints);
    for (size_t i = 0; i < f->nentries; i++) {
        const struct query_fold_entry *e = &f->entries[i];
        const char *const *names = query_fold_frames(f, e);
        uint32_t cur = 0;
        t->nodes[0].v[slot] += ints[i];
        for (uint32_t k = 0; k < e->n; k++) {
            uint32_t name = tree_name(t, names[k]);
            uint64_t key = ((uint64_t)cur << 32) | name;
            uint32_t idx;
            if (!hp_map64_get(&t->kids, key, &idx)) {
                idx = tree_node(t, name);
                uint32_t dummy;
                (void)hp_map64_put(&t->kids, key, idx, &dummy);
                t->nodes[idx].sibling = t->nodes[cur].child;
                t->nodes[cur].child = idx;
            }
            t->nodes[idx].v[slot] += ints[i];
            cur = idx;
        }
    }
    free(ints);
    free(vals);
}

struct emit {
    struct tree *t;
    struct hp_buf *out;
    int slots;           /* 1 or 2 */
    int64_t min;         /* children below this (both slots) merge into one */
    uint32_t *scratch;   /* child lists for sorting */
    size_t scratch_cap;
    const char **sort_names;
};

static int cmp_child(const void *a, const void *b, void *arg)
{
    const struct emit *e = arg;
    const struct tnode *x = &e->t->nodes[*(const uint32_t *)a];
    const struct tnode *y = &e->t->nodes[*(const uint32_t *)b];
    return strcmp(e->t->names[x->name], e->t->names[y->name]);
}

static void emit_values(struct emit *e, uint32_t name, const int64_t v[2])
{
    if (e->slots == 2)
        hp_buf_printf(e->out, "{\"n\":%u,\"v\":%lld,\"b\":%lld", name, (long long)v[1],
                      (long long)v[0]);
    else
        hp_buf_printf(e->out, "{\"n\":%u,\"v\":%lld", name, (long long)v[0]);
}

/* Depth is bounded by the ingest frame cap (4096), so recursion is fine. */
static void emit_node(struct emit *e, uint32_t idx)
{
    struct tnode *nd = &e->t->nodes[idx];
    emit_values(e, nd->name, nd->v);
    size_t nkids = 0;
    for (uint32_t c = nd->child; c; c = e->t->nodes[c].sibling)
        nkids++;
    if (nkids) {
        /* Sort this node's children by name (flame graph order) in place:
         * rebuild the sibling chain from a sorted array. */
        uint32_t *arr = hp_xmalloc(nkids * sizeof(*arr));
        size_t k = 0;
        for (uint32_t c = nd->child; c; c = e->t->nodes[c].sibling)
            arr[k++] = c;
        qsort_r(arr, nkids, sizeof(*arr), cmp_child, e);
        hp_buf_puts(e->out, ",\"c\":[");
        bool first = true;
        int64_t small[2] = { 0, 0 };
        size_t nsmall = 0;
        for (k = 0; k < nkids; k++) {
            const struct tnode *c = &e->t->nodes[arr[k]];
            if (e->min > 0 && c->v[0] < e->min && (e->slots == 1 || c->v[1] < e->min)) {
                small[0] += c->v[0];
                small[1] += c->v[1];
                nsmall++;
                continue;
            }
            if (!first)
                hp_buf_puts(e->out, ",");
            first = false;
            emit_node(e, arr[k]);
        }
        if (nsmall) {
            if (!first)
                hp_buf_puts(e->out, ",");
            emit_values(e, 1, small);
            hp_buf_printf(e->out, ",\"m\":%zu}", nsmall);
        }
        hp_buf_puts(e->out, "]");
        free(arr);
    }
    hp_buf_puts(e->out, "}");
}

/* Append "names":[...],"root":{...} to out. */
static void tree_emit(struct tree *t, struct hp_buf *out, int slots, double prune)
{
    hp_buf_puts(out, "\"names\":[");
    for (size_t i = 0; i < t->nnames; i++) {
        if (i)
            hp_buf_puts(out, ",");
        query_json_str(out, t->names[i]);
    }
    hp_buf_puts(out, "],\"root\":");
    struct emit e = { .t = t, .out = out, .slots = slots };
    int64_t top = HP_MAX(t->nodes[0].v[0], slots == 2 ? t->nodes[0].v[1] : 0);
    e.min = prune > 0 ? (int64_t)(prune * (double)top) : 0;
    emit_node(&e, 0);
}

/* Wrap a jansson header object and a manually written tree into one body:
 * the header's closing brace is replaced by ",<tree>}". */
static void reply_with_tree(struct web_request *r, json_t *head, struct tree *t, int slots)
{
    char *text = json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(head);
    hp_buf_reset(&r->body);
    size_t len = text ? strlen(text) : 0;
    if (len < 2) {
        free(text);
        web_api_error(r, 500, "could not encode the response");
        return;
    }
    hp_buf_append(&r->body, text, len - 1);
    free(text);
    hp_buf_puts(&r->body, ",");
    tree_emit(t, &r->body, slots, r->p.prune);
    hp_buf_puts(&r->body, "}\n");
    r->status = 200;
}

void web_h_tree(struct web_request *r)
{
    struct web_snapshot_info info;
    struct profile *p;
    struct query_folded *f;
    if (fold_one(r, &r->p.sel, &info, &p, &f, NULL) < 0)
        return;
    enum profile_value v = r->p.qo.sample;
    struct tree t;
    tree_init(&t);
    tree_start(&t);
    tree_add(&t, f, v, 0);
    json_t *head = json_object();
    json_object_set_new(head, "snapshot", snapshot_json(&info));
    json_object_set_new(head, "sample", json_string(profile_value_name(v)));
    json_object_set_new(head, "unit", json_string(unit_of(v)));
    json_object_set_new(head, "total", json_integer(t.nodes[0].v[0]));
    json_object_set_new(head, "nodes", json_integer((json_int_t)t.n));
    reply_with_tree(r, head, &t, 1);
    tree_release(&t);
    query_folded_free(f);
    profile_free(p);
}

/* ---- diff -------------------------------------------------------------------------- */

/* /diff?format=F: the diff as `query diff A B --format F` prints it, naming
 * both snapshots (id, node, time) as the CLI does; `download=1` names the
 * file after both. */
static void diff_render(struct web_request *r, const struct query_diff *d,
                        const struct query_folded *fa, const struct query_folded *fb,
                        const struct web_snapshot_info *ia, const struct web_snapshot_info *ib)
{
    static const struct {
        enum query_format format;
        const char *content_type, *ext;
    } kinds[] = {
        { QUERY_FORMAT_TEXT, "text/plain; charset=utf-8", "txt" },
        { QUERY_FORMAT_COLLAPSED, "text/plain; charset=utf-8", "collapsed" },
        { QUERY_FORMAT_JSON, "application/json", "json" },
        { QUERY_FORMAT_SVG, "image/svg+xml", "svg" },
    };
    size_t k;
    for (k = 0; k < HP_ARRAY_SIZE(kinds); k++)
        if (kinds[k].format == r->p.format)
            break;
    if (k == HP_ARRAY_SIZE(kinds)) {
        web_api_error(r, 400, "format: a diff is text, collapsed, json or svg (not %s)",
                      query_format_name(r->p.format));
        return;
    }
    struct query_snapref ra, rb;
    memset(&ra, 0, sizeof(ra));
    memset(&rb, 0, sizeof(rb));
    ra.id = ia->id;
    snprintf(ra.node, sizeof(ra.node), "%s", ia->node ? ia->node : "");
    ra.time_ms = ia->time_ms;
    rb.id = ib->id;
    snprintf(rb.node, sizeof(rb.node), "%s", ib->node ? ib->node : "");
    rb.time_ms = ib->time_ms;
    /* The CLI's labels: "SELECTOR = node #id time", titled "B minus A". */
    char na[256], nb[256], la[384], lb[384], title[640];
    query_snapref_label(&ra, na, sizeof(na));
    query_snapref_label(&rb, nb, sizeof(nb));
    snprintf(la, sizeof(la), "%s = %s", r->p.a_text, na);
    snprintf(lb, sizeof(lb), "%s = %s", r->p.b_text, nb);
    snprintf(title, sizeof(title), "%s minus %s", nb, na);
    r->p.qo.snap = &ra;
    r->p.qo.snap_b = &rb;
    if (!r->p.qo.title)
        r->p.qo.title = title;
    hp_buf_reset(&r->body);
    int rc;
    switch (kinds[k].format) {
    case QUERY_FORMAT_TEXT:
        rc = query_render_diff_text(d, la, lb, &r->p.qo, &r->body);
        break;
    case QUERY_FORMAT_COLLAPSED:
        rc = query_render_diff_collapsed(d, &r->body);
        break;
    case QUERY_FORMAT_JSON:
        rc = query_render_diff_json(d, la, lb, &r->p.qo, &r->body);
        break;
    default:
        rc = query_render_svg_diff(fa, fb, &r->p.qo, &r->body);
        break;
    }
    r->p.qo.snap = NULL;
    r->p.qo.snap_b = NULL;
    r->p.qo.title = NULL;
    if (rc < 0) {
        web_api_error(r, 500, "rendering the diff as %s failed: %s", query_format_name(r->p.format),
                      hp_strerror(rc));
        return;
    }
    r->status = 200;
    r->content_type = kinds[k].content_type;
    if (r->p.download) {
        char *dn = hp_xasprintf("attachment; filename=\"diff-%s-%lld-%s-%lld.%s\"",
                                ia->node ? ia->node : "a", (long long)ia->id,
                                ib->node ? ib->node : "b", (long long)ib->id, kinds[k].ext);
        r->disposition = hp_arena_strdup(&r->arena, dn);
        free(dn);
    }
}

void web_h_diff(struct web_request *r)
{
    struct web_snapshot_info ia, ib;
    struct profile *pa = NULL, *pb = NULL;
    struct query_folded *fa = NULL, *fb = NULL;
    struct query_top *ta = NULL, *tb = NULL;
    if (fold_one(r, &r->p.a, &ia, &pa, &fa, &ta) < 0)
        return;
    if (fold_one(r, &r->p.b, &ib, &pb, &fb, &tb) < 0)
        goto out;
    enum profile_value v = r->p.qo.sample;
    /* The function table is query diff's (one query layer, two front ends):
     * B minus A per function, with each delta's sampling standard error. */
    struct query_diff_opts dopt;
    query_diff_opts_init(&dopt);
    dopt.sample = v;
    dopt.normalize = r->p.normalize;
    struct query_diff *d = NULL;
    if (query_diff_build(fa, fb, &dopt, &d) < 0) {
        web_api_error(r, 500, "diff failed");
        goto out;
    }
    if (r->p.has_format) {
        diff_render(r, d, fa, fb, &ia, &ib);
        query_diff_free(d);
        goto out;
    }
    size_t n = d->nfuncs;
    size_t shown = r->p.qo.top ? HP_MIN(r->p.qo.top, n) : HP_MIN((size_t)200, n);
    json_t *head = json_object();
    json_t *ja = json_object(), *jb = json_object();
    json_object_set_new(ja, "selector", jstr(r->p.a_text));
    json_object_set_new(ja, "snapshot", snapshot_json(&ia));
    json_object_set_new(ja, "total", jnum(round(fa->total[v])));
    json_object_set_new(jb, "selector", jstr(r->p.b_text));
    json_object_set_new(jb, "snapshot", snapshot_json(&ib));
    json_object_set_new(jb, "total", jnum(round(fb->total[v])));
    json_object_set_new(head, "a", ja);
    json_object_set_new(head, "b", jb);
    json_object_set_new(head, "sample", json_string(profile_value_name(v)));
    json_object_set_new(head, "unit", json_string(unit_of(v)));
    json_object_set_new(head, "delta", jnum(round(fb->total[v] - fa->total[v])));
    json_object_set_new(head, "sigma", jnum(round(d->sigma)));
    json_object_set_new(head, "noise", json_boolean(d->noise));
    json_object_set_new(head, "noise_sigmas", jnum(dopt.noise_sigmas));
    json_object_set_new(head, "normalize", json_boolean(dopt.normalize));
    json_object_set_new(head, "functions_total", json_integer((json_int_t)n));
    json_t *arr = json_array();
    for (size_t i = 0; i < shown; i++) {
        const struct query_diff_row *row = &d->funcs[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", jstr(row->name));
        json_object_set_new(o, "a_flat", jnum(round(row->a)));
        json_object_set_new(o, "b_flat", jnum(round(row->b)));
        /* normalize: deltas and sigmas are shares of each side's total. */
        bool sh = dopt.normalize;
        json_object_set_new(o, "delta_flat",
                            jnum(sh ? row->delta : round(row->b) - round(row->a)));
        json_object_set_new(o, "sigma_flat", jnum(sh ? row->sigma : round(row->sigma)));
        json_object_set_new(o, "noise_flat", json_boolean(row->noise));
        json_object_set_new(o, "a_cum", jnum(round(row->a_cum)));
        json_object_set_new(o, "b_cum", jnum(round(row->b_cum)));
        json_object_set_new(o, "delta_cum",
                            jnum(sh ? row->delta_cum : round(row->b_cum) - round(row->a_cum)));
        json_object_set_new(o, "sigma_cum", jnum(sh ? row->sigma_cum : round(row->sigma_cum)));
        json_object_set_new(o, "noise_cum", json_boolean(row->noise_cum));
        json_array_append_new(arr, o);
    }
    json_object_set_new(head, "functions", arr);
    query_diff_free(d);
    struct tree t;
    tree_init(&t);
    tree_start(&t);
    tree_add(&t, fa, v, 0);
    tree_add(&t, fb, v, 1);
    json_object_set_new(head, "nodes", json_integer((json_int_t)t.n));
    reply_with_tree(r, head, &t, 2);
    tree_release(&t);
out:
    query_top_free(ta);
    query_top_free(tb);
    query_folded_free(fa);
    query_folded_free(fb);
    profile_free(pa);
    profile_free(pb);
}

/* ---- profile exports ----------------------------------------------------------------- */

typedef int web_render_fn(const struct profile *p, const struct query_folded *f,
                          const struct query_top *t, const struct query_opts *o,
                          struct hp_buf *out);

static int render_collapsed(const struct profile *p, const struct query_folded *f,
                            const struct query_top *t, const struct query_opts *o,
                            struct hp_buf *out)
{
    (void)p, (void)t;
    return query_render_collapsed(f, o, out);
}

static int render_dot(const struct profile *p, const struct query_folded *f,
                      const struct query_top *t, const struct query_opts *o, struct hp_buf *out)
{
    (void)p;
    return query_render_dot(f, t, o, out);
}

static int render_svg(const struct profile *p, const struct query_folded *f,
                      const struct query_top *t, const struct query_opts *o, struct hp_buf *out)
{
    (void)p, (void)t;
    return query_render_svg(f, o, out);
}

static int render_pprof(const struct profile *p, const struct query_folded *f,
                        const struct query_top *t, const struct query_opts *o,
                        struct hp_buf *out)
{
    (void)f, (void)t;
    return query_render_pprof(p, o, out, NULL);
}

/* One table of export formats, one renderer each. */
static const struct {
    enum query_format format;
    const char *content_type;
    const char *ext;
    web_render_fn *fn;
} renderers[] = {
    { QUERY_FORMAT_TEXT, "text/plain; charset=utf-8", "txt", query_render_top_text },
    { QUERY_FORMAT_COLLAPSED, "text/plain; charset=utf-8", "collapsed", render_collapsed },
    { QUERY_FORMAT_JSON, "application/json", "json", query_render_json },
    { QUERY_FORMAT_DOT, "text/vnd.graphviz; charset=utf-8", "dot", render_dot },
    { QUERY_FORMAT_SVG, "image/svg+xml", "svg", render_svg },
    { QUERY_FORMAT_PPROF, "application/octet-stream", "pb.gz", render_pprof },
};

void web_h_profile(struct web_request *r)
{
    enum query_format fmt = r->p.has_format ? r->p.format : QUERY_FORMAT_JSON;
    size_t i;
    for (i = 0; i < HP_ARRAY_SIZE(renderers); i++)
        if (renderers[i].format == fmt)
            break;
    if (i == HP_ARRAY_SIZE(renderers)) { /* the parameter check admits only these */
        web_api_error(r, 500, "format %s: no renderer", query_format_name(fmt));
        return;
    }
    /* The CLI's defaults: 30 rows of text, everything otherwise. */
    bool top_given = r->p.qo.top != 0;
    if (!top_given && fmt == QUERY_FORMAT_TEXT)
        r->p.qo.top = 30;
    struct web_snapshot_info info;
    struct profile *p;
    struct query_folded *f;
    struct query_top *t;
    if (fold_one(r, &r->p.sel, &info, &p, &f, &t) < 0)
        return;
    /* Name the snapshot in every download (SVG and dot titles, pprof
     * comments, the text header, JSON "snapshot"), as the CLI does: a file
     * saved from the UI says which snapshot it was. */
    struct query_snapref ref;
    memset(&ref, 0, sizeof(ref));
    ref.id = info.id;
    snprintf(ref.node, sizeof(ref.node), "%s", info.node ? info.node : "");
    ref.time_ms = info.time_ms;
    char title[256];
    r->p.qo.snap = &ref;
    if (!r->p.qo.title)
        r->p.qo.title = query_snapref_label(&ref, title, sizeof(title));
    hp_buf_reset(&r->body);
    int rc = renderers[i].fn(p, f, t, &r->p.qo, &r->body);
    r->p.qo.snap = NULL;
    r->p.qo.title = NULL;
    if (rc < 0) {
        web_api_error(r, 500, "rendering %s failed: %s",
                      query_format_name(fmt), hp_strerror(rc));
    } else {
        r->status = 200;
        r->content_type = renderers[i].content_type;
        if (r->p.download) {
            char *d = hp_xasprintf("attachment; filename=\"%s-%lld.%s\"",
                                   info.node ? info.node : "snapshot", (long long)info.id,
                                   renderers[i].ext);
            r->disposition = hp_arena_strdup(&r->arena, d);
            free(d);
        }
    }
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
}

/* The raw dump, byte for byte as the node served it (jeprof input, a bug
 * report's attachment). */
void web_h_raw(struct web_request *r)
{
    if (!r->src->raw_dump) {
        web_api_error(r, 501, "this data source keeps no raw dumps (the collector's store "
                              "does)");
        return;
    }
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_snapshot_info info;
    void *data = NULL;
    size_t len = 0;
    memset(&info, 0, sizeof(info));
    int rc = r->src->raw_dump(r->src_ctx, &r->p.sel, &r->arena, &info, &data, &len, &err);
    if (rc < 0) {
        reply_failure(r, rc, &err);
    } else {
        hp_buf_reset(&r->body);
        (void)hp_buf_append(&r->body, data, len);
        r->status = 200;
        r->content_type = "application/octet-stream";
        if (r->p.download) {
            char *d = hp_xasprintf("attachment; filename=\"%s-%lld.heap\"",
                                   info.node ? info.node : "snapshot", (long long)info.id);
            r->disposition = hp_arena_strdup(&r->arena, d);
            free(d);
        }
    }
    free(data);
    hp_buf_release(&err);
}

void web_h_symbolization(struct web_request *r)
{
    if (!r->src->symbolization) {
        web_api_error(r, 501, "this data source keeps no symbolization status "
                              "(the collector's store does)");
        return;
    }
    struct hp_buf err = HP_BUF_INIT(0);
    hp_buf_reset(&r->body);
    int rc = r->src->symbolization(r->src_ctx, &r->body, &err);
    if (rc < 0)
        reply_failure(r, rc, &err);
    else
        r->status = 200;
    hp_buf_release(&err);
}

/* The tracker-versus-heap report of a node's latest snapshot: the query
 * library's built-in Doris/StarRocks rules against the figures the source
 * stored with it, printed as `query discrepancy NODE --format json` prints
 * it. (A rules file is a CLI option only: the API takes no file paths.) */
void web_h_discrepancy(struct web_request *r)
{
    struct web_selector sel = { .node = r->p.node };
    struct web_snapshot_info info;
    struct profile *p;
    struct query_folded *f;
    if (fold_one(r, &sel, &info, &p, &f, NULL) < 0)
        return;
    struct hp_buf err = HP_BUF_INIT(0);
    struct query_rules *rules = NULL;
    struct query_discrepancy *d = NULL;
    struct query_figure *figs = hp_arena_alloc(&r->arena, (info.nraw + 1) * sizeof(*figs));
    for (size_t i = 0; i < info.nraw; i++) {
        figs[i].name = info.raw[i].name;
        figs[i].value = info.raw[i].value;
    }
    /* The node's kind is told from its figures (query_rules_for_kind). */
    int rc = web_api_rules(r, NULL, figs, info.nraw, &rules, &err);
    if (rc == 0)
        rc = query_discrepancy_build(f, figs, info.nraw, rules, &d, &err);
    if (rc == 0) {
        d->snap = (struct query_snapref){ .id = info.id, .time_ms = info.time_ms };
        snprintf(d->snap.node, sizeof(d->snap.node), "%s", info.node ? info.node : "");
        hp_buf_reset(&r->body);
        rc = query_render_discrepancy_json(d, info.node, &r->body);
    }
    if (rc < 0) {
        reply_failure(r, rc, &err);
    } else {
        r->status = 200;
        r->content_type = "application/json";
    }
    query_discrepancy_free(d);
    query_rules_free(rules);
    hp_buf_release(&err);
    query_folded_free(f);
    profile_free(p);
}

static struct query_figure *figures_of(struct web_request *r, const struct web_snapshot_info *si)
{
    struct query_figure *figs = hp_arena_alloc(&r->arena, (si->nraw + 1) * sizeof(*figs));
    for (size_t i = 0; i < si->nraw; i++) {
        figs[i].name = si->raw[i].name;
        figs[i].value = si->raw[i].value;
    }
    return figs;
}

int web_api_rules(const struct web_request *r, const char *kind, const struct query_figure *figs,
                  size_t n, struct query_rules **ret, struct hp_buf *err)
{
    struct query_rules *rules = NULL;
    int rc = query_rules_for_kind(kind, figs, n, &rules, err);
    if (rc == 0 && r->rules)
        rc = query_rules_parse(rules, r->rules, strlen(r->rules), "--rules", err);
    if (rc < 0) {
        query_rules_free(rules);
        return rc;
    }
    *ret = rules;
    return 0;
}

int web_api_load_one(struct web_request *r, int64_t id, struct query_snapshot *ret_qs,
                     struct query_folded **ret_fold, struct hp_buf *err)
{
    struct web_selector sel = { .id = id };
    struct web_snapshot_info info;
    memset(&info, 0, sizeof(info));
    struct profile *p = NULL;
    *ret_fold = NULL;
    int rc = r->src->load_snapshot(r->src_ctx, &sel, r->p.qo.sample, &r->arena, &info, &p, err);
    if (rc == 0)
        rc = query_fold(p, &r->p.qo, ret_fold, err);
    /* Only the folded form is kept (nothing reads the profile afterwards). */
    profile_free(p);
    if (rc < 0)
        return rc;
    (*ret_fold)->source = NULL;
    *ret_qs = (struct query_snapshot){ .node = info.node, .time_s = info.time_ms / 1000,
                                       .id = info.id,
                                       .folded = *ret_fold,
                                       .figures = figures_of(r, &info),
                                       .nfigures = info.nraw };
    return 0;
}

int web_api_load_many(struct web_request *r, const int64_t *ids, size_t n, struct web_loaded *L,
                      struct hp_buf *err)
{
    L->folds = hp_xcalloc(n + 1, sizeof(*L->folds));
    L->qs = hp_xcalloc(n + 1, sizeof(*L->qs));
    L->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = web_api_load_one(r, ids[i], &L->qs[i], &L->folds[i], err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The snapshots as the series analyses take them, without a profile:
 * node, time, id, figures and stored totals. */
static void series_list(struct web_request *r, const struct web_snapshot_info *snaps, size_t n,
                        struct web_loaded *L)
{
    L->qs = hp_xcalloc(n + 1, sizeof(*L->qs));
    L->n = n;
    for (size_t i = 0; i < n; i++)
        L->qs[i] = (struct query_snapshot){ .node = snaps[i].node,
                                            .time_s = snaps[i].time_ms / 1000,
                                            .id = snaps[i].id,
                                            .figures = figures_of(r, &snaps[i]),
                                            .nfigures = snaps[i].nraw,
                                            .totals = snaps[i].total };
}

int web_api_load_series(struct web_request *r, const struct web_snapshot_info *snaps, size_t n,
                        struct web_loaded *L, struct hp_buf *err)
{
    if (!r->src->load_stored) {
        int64_t *ids = hp_xcalloc(n + 1, sizeof(*ids));
        for (size_t i = 0; i < n; i++)
            ids[i] = snaps[i].id;
        int rc = web_api_load_many(r, ids, n, L, err);
        free(ids);
        return rc;
    }
    series_list(r, snaps, n, L);
    return r->src->load_stored(r->src_ctx, &r->p.qo, L->qs, n, &L->stored, err);
}

void web_api_loaded_release(struct web_loaded *L)
{
    query_stored_free(L->stored);
    for (size_t i = 0; L->folds && i < L->n; i++)
        query_folded_free(L->folds[i]);
    free(L->qs);
    free(L->folds);
}

/* How a series analysis reads a node's snapshots. */
enum series_read {
    READ_PROFILES,  /* each loaded and folded */
    READ_STACK_IDS, /* leaks: stack ids and values (the source's load_stored) */
    READ_TOTALS,    /* trend: listed only; functions from the source's totals */
};

/* A node's snapshots (since, newest `limit`) loaded for a series analysis.
 * Where the source reads them without profiles (by stack ids, or only
 * their totals), no limit unless asked for: all since `since`, as `query
 * leaks` and `query trend` read them. */
static int load_node_series(struct web_request *r, size_t def_limit, enum series_read how,
                            struct web_loaded *L, struct hp_buf *err)
{
    struct web_snapshot_info *snaps = NULL;
    size_t n = 0;
    memset(L, 0, sizeof(*L));
    if (!r->src->list_snapshots || !r->src->load_snapshot) {
        hp_err_printf(err, "this data source cannot list and load snapshots");
        return HP_EUSAGE;
    }
    if ((how == READ_STACK_IDS && !r->src->load_stored) ||
        (how == READ_TOTALS && !r->src->trend_functions))
        how = READ_PROFILES;
    size_t limit = how != READ_PROFILES
                       ? r->p.limit
                       : (r->p.limit ? HP_MIN(r->p.limit, (size_t)500) : def_limit);
    int rc = r->src->list_snapshots(r->src_ctx, r->p.node, r->p.since_ms, limit, &r->arena,
                                    &snaps, &n, err);
    if (rc < 0)
        return rc;
    if (how == READ_STACK_IDS)
        return web_api_load_series(r, snaps, n, L, err);
    if (how == READ_TOTALS) {
        series_list(r, snaps, n, L);
        return 0;
    }
    int64_t *ids = hp_xcalloc(n + 1, sizeof(*ids));
    for (size_t i = 0; i < n; i++)
        ids[i] = snaps[i].id;
    rc = web_api_load_many(r, ids, n, L, err);
    free(ids);
    return rc;
}

static void reply_rendered(struct web_request *r, int rc, const struct hp_buf *err)
{
    if (rc < 0) {
        reply_failure(r, rc, err);
    } else {
        r->status = 200;
        r->content_type = "application/json";
    }
}

/* Leak suspects of one node: its snapshots since `since` (the newest
 * `limit`; by default all of them from a store, read by stack ids as
 * `query leaks` reads them; from a folder the newest 50, each loaded and
 * folded), then the query library's analysis and JSON, as `query leaks
 * NODE --format json` prints them. */
void web_h_leaks(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_loaded L;
    struct query_leaks *l = NULL;
    struct query_leak_opts lo;
    query_leak_opts_init(&lo);
    lo.sample = r->p.qo.sample;
    lo.top = r->p.qo.top;
    int rc = load_node_series(r, 50, READ_STACK_IDS, &L, &err);
    if (rc == 0)
        rc = query_leaks_build(L.qs, L.n, &lo, &l, &err);
    if (rc == 0) {
        hp_buf_reset(&r->body);
        rc = query_render_leaks_json((const struct query_leaks *const *)&l, 1, &lo, &r->body);
    }
    reply_rendered(r, rc, &err);
    query_leaks_free(l);
    web_api_loaded_release(&L);
    hp_buf_release(&err);
}

/* Time series of one node: heap total, its figures and the chosen functions
 * (`function` regex, else the top 5), as `query trend NODE --format json`. */
void web_h_trend(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_loaded L;
    struct query_trend *t = NULL;
    struct query_trend_opts to;
    query_trend_opts_init(&to);
    to.sample = r->p.qo.sample;
    to.function = r->p.function;
    /* From the store: function columns from its function totals, every
     * snapshot since `since` and no profile loaded, as `query trend`. */
    bool totals = r->src->trend_functions && query_stored_trend_ok(&r->p.qo);
    int rc = load_node_series(r, 200, totals ? READ_TOTALS : READ_PROFILES, &L, &err);
    if (rc == 0 && totals && L.n)
        rc = r->src->trend_functions(r->src_ctx, &r->p.qo, L.qs, L.n, &to, &L.stored, &err);
    if (rc == 0)
        rc = query_trend_build(L.qs, L.n, &to, &t, &err);
    if (rc == 0) {
        hp_buf_reset(&r->body);
        rc = query_render_trend(t, QUERY_FORMAT_JSON, &r->body, &err);
    }
    reply_rendered(r, rc, &err);
    query_trend_free(t);
    web_api_loaded_release(&L);
    hp_buf_release(&err);
}

/* Every node's latest snapshot against the fleet, as `query fleet --format
 * json`: nodes far above the median total, functions a node holds far more
 * of than the fleet median. Nodes whose latest snapshot is older than
 * `since` are left out. At most 2,000 nodes per request. One snapshot is
 * loaded and folded at a time, and only its stacks' values are kept: with
 * every profile held to the end, /fleet over 1,000 small nodes took the
 * collector from 43 to 340 MB (the soak), and a fleet of 20k-stack BEs
 * would take GBs. */
void web_h_fleet(struct web_request *r)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct web_node_info *nodes = NULL;
    size_t n = 0;
    struct query_fleet *f = NULL;
    struct query_fleet_opts fo;
    query_fleet_opts_init(&fo);
    fo.sample = r->p.qo.sample;
    fo.top = r->p.qo.top;
    int rc = r->src->list_nodes && r->src->load_snapshot
                 ? r->src->list_nodes(r->src_ctx, &r->arena, &nodes, &n, &err)
                 : HP_EUSAGE;
    int64_t *ids = hp_xcalloc(n + 1, sizeof(*ids));
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (nodes[i].has_latest && nodes[i].latest.time_ms >= r->p.since_ms)
            ids[k++] = nodes[i].latest.id;
    if (rc == 0 && k > 2000) {
        hp_err_printf(&err, "%zu nodes: more than this server compares in one request (2000)", k);
        rc = HP_ETOOBIG;
    }
    struct query_snapshot *qs = hp_xcalloc(k + 1, sizeof(*qs));
    struct query_fleet_acc *acc = rc == 0 ? query_fleet_begin(k, &fo) : NULL;
    for (size_t i = 0; rc == 0 && i < k; i++) {
        struct query_folded *fold = NULL;
        rc = web_api_load_one(r, ids[i], &qs[i], &fold, &err);
        if (rc == 0)
            query_fleet_add(acc, i, fold);
        query_folded_free(fold);
        qs[i].folded = NULL;
    }
    if (rc == 0) {
        rc = query_fleet_finish(acc, qs, k, &fo, &f, &err);
        acc = NULL;
    }
    if (rc == 0) {
        hp_buf_reset(&r->body);
        rc = query_render_fleet_json(f, &fo, &r->body);
    }
    reply_rendered(r, rc, &err);
    query_fleet_acc_free(acc);
    query_fleet_free(f);
    free(qs);
    free(ids);
    hp_buf_release(&err);
}
