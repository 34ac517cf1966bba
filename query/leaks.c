/* leaks: stacks and functions whose in-use bytes grow steadily across one
 * node's snapshots.
 *
 * A node's history is first cut into process lifetimes (a new pid, a new
 * process start time, or where nothing says, a heap total that fell to
 * under half by more than six sampling standard errors): a BE that was
 * OOM-killed starts over from a small heap, and a fit across the restart
 * sees a fall where each lifetime grew. Within lifetimes, per stack, the
 * series y(t) (0 where the stack is absent) gets a least-squares slope in
 * bytes per hour with one intercept per lifetime, the R^2 of that fit, the
 * share of rising steps among steps that change, and Spearman's rank
 * correlation of y with time (per lifetime of 3+ snapshots, averaged); a
 * suspect rises (slope > min_rate, summed lifetime rises > 0), mostly in
 * steps (monotonic >= min_monotonic), along a line more than by chance
 * (R^2 > 0.25) and in rank order (spearman >= min_spearman), without one
 * jump carrying most of the rise (step_share <= max_step_share), by more
 * than sampling alone moves it (the rise over 3 standard deviations of the
 * lifetimes' first and last values). Sampled dumps make step-to-step
 * changes noisy, so the rank correlation is the main test and the share of
 * rising steps only a guard.
 *
 * Functions are ranked by flat growth, the stacks they are the leaf of
 * (what they allocate themselves; the folding trimmed allocator frames
 * from the leaf end), with the cumulative rate beside it: a pass-through
 * caller such as a thread's entry carries all growth cumulatively and
 * none flat. Since a slope is linear, a function's slope is the sum of its
 * stacks' slopes, so only functions whose summed slope passes are given a
 * full series (which keeps 30 days x 100 nodes fast). Idle: steps where
 * the node's query and load trackers both sat at or under idle_bytes;
 * growth in those steps is what a leak looks like, since no query holds
 * memory then. */
#include "query/analysis-internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Query and load tracker figures as Doris (bvar, Prometheus) and StarRocks
 * (Prometheus) publish them, and Doris memory-tracker page rows as the
 * collector stores them. */
static const char *const default_busy[] = {
    "memory_query_trackers_sum_bytes",
    "memory_load_trackers_sum_bytes",
    "doris_be_memory_query_trackers_sum_bytes",
    "doris_be_memory_load_trackers_sum_bytes",
    "starrocks_be_query_mem_bytes",
    "starrocks_be_load_mem_bytes",
    "mem_tracker_current_bytes{type=\"overview\",label=\"query\"}",
    "mem_tracker_current_bytes{type=\"overview\",label=\"load\"}",
    NULL,
};

/* The other figures leaks reads of a snapshot (query_leak_figure_wanted):
 * the process's resident size (leaks_idle), its id and start time
 * (restart_reason), and a `*uptime_seconds` (uptime_figure). */
static const char fig_rss[] = "process_rss_bytes";
static const char fig_rss_prom[] = "process_resident_memory_bytes";
static const char fig_pid[] = "proc_pid";
static const char *const fig_start[] = { "process_start_time_seconds", "proc_start_time_seconds" };

static bool uptime_figure(const char *n)
{
    size_t nl = strlen(n);
    return nl >= 14 && strcmp(n + nl - 14, "uptime_seconds") == 0 && !strchr(n, '{');
}

bool query_leak_figure_wanted(const struct query_leak_opts *o, const char *name)
{
    const char *const *busy = o->busy_figures ? o->busy_figures : default_busy;
    for (size_t i = 0; busy[i]; i++)
        if (strcmp(busy[i], name) == 0)
            return true;
    if (strcmp(name, fig_rss) == 0 || strcmp(name, fig_rss_prom) == 0 ||
        strcmp(name, fig_pid) == 0 || uptime_figure(name))
        return true;
    for (size_t i = 0; i < HP_ARRAY_SIZE(fig_start); i++)
        if (strcmp(name, fig_start[i]) == 0)
            return true;
    return false;
}

void query_leak_opts_init(struct query_leak_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sample = PV_INUSE_SPACE;
    o->min_rate = 0;
    o->min_monotonic = 0.5;
    o->min_spearman = 0.8;
    o->max_step_share = 0.5;
    o->min_share = 0.005;
    o->idle_bytes = 64.0 * 1024 * 1024;
    o->idle_share = 0.05;
    o->top = 0;
}

void query_trend_fit(const double *x, const double *y, size_t n, double *ret_slope,
                     double *ret_r2)
{
    double sx = 0, sy = 0;
    for (size_t i = 0; i < n; i++)
        sx += x[i], sy += y[i];
    double mx = n ? sx / (double)n : 0, my = n ? sy / (double)n : 0;
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx, sxy += dx * dy, syy += dy * dy;
    }
    *ret_slope = sxx > 0 ? sxy / sxx : 0;
    *ret_r2 = sxx > 0 && syy > 0 ? (sxy * sxy) / (sxx * syy) : 0;
}

struct rank_item {
    double v;
    size_t i;
};

static int rank_cmp(const void *a, const void *b)
{
    const struct rank_item *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Ranks with ties averaged, 1-based. */
static void ranks(const double *v, size_t n, double *ret, struct rank_item *tmp)
{
    for (size_t i = 0; i < n; i++)
        tmp[i] = (struct rank_item){ v[i], i };
    hp_qsort(tmp, n, sizeof(*tmp), rank_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && tmp[j + 1].v == tmp[i].v)
            j++;
        double r = (double)(i + j) / 2.0 + 1.0;
        for (size_t k = i; k <= j; k++)
            ret[tmp[k].i] = r;
        i = j + 1;
    }
}

static double pearson(const double *x, const double *y, size_t n)
{
    double slope, r2;
    query_trend_fit(x, y, n, &slope, &r2);
    double r = sqrt(r2);
    return slope < 0 ? -r : r;
}

/* Spearman with x's ranks already known (every series of a node shares x). */
static double spearman_rx(const double *rx, const double *y, size_t n, double *ry,
                          struct rank_item *tmp)
{
    ranks(y, n, ry, tmp);
    return pearson(rx, ry, n);
}

double query_spearman(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return 0;
    double *rx = hp_xmalloc(n * sizeof(*rx)), *ry = hp_xmalloc(n * sizeof(*ry));
    struct rank_item *tmp = hp_xmalloc(n * sizeof(*tmp));
    ranks(x, n, rx, tmp);
    ranks(y, n, ry, tmp);
    double r = pearson(rx, ry, n);
    free(rx);
    free(ry);
    free(tmp);
    return r;
}

struct leaks_priv {
    struct hp_arena arena; /* lifetimes and their reasons */
    struct qa_stacks stacks;
    struct qa_funcs funcs;
};

struct series_stats {
    double slope, r2, monotonic, idle_growth, step_share, rise;
};

/* A node's history cut into process lifetimes. Every fit is made within
 * lifetimes: x and y are centred on their lifetime's means (a regression
 * with one intercept per lifetime), steps across a restart are not steps,
 * and the rise is the sum of each lifetime's rise. One slope for all
 * lifetimes is right for a leak, which grows at the rate the workload
 * drives, whatever the heap started from. */
struct segs {
    size_t n;         /* lifetimes */
    size_t *start;    /* n + 1 entries: first snapshot of each, then T */
    double *dx;       /* per snapshot: x minus its lifetime's mean x */
    bool *first;      /* per snapshot: starts a lifetime */
    double sxx;       /* sum of dx^2 */
};

/* Zeroed scratch from the build's arena (STYLE: one arena per unit of work). */
static void *scratch(struct hp_arena *a, size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - 64) / size)
        return hp_xcalloc(n, size); /* reports the overflow and aborts */
    void *p = hp_arena_alloc(a, n * size + 1);
    memset(p, 0, n * size + 1);
    return p;
}

static void segs_build(struct segs *g, const double *x, const bool *restart, size_t T,
                       struct hp_arena *a)
{
    g->start = scratch(a, T + 1, sizeof(*g->start));
    g->dx = scratch(a, T, sizeof(*g->dx));
    g->first = scratch(a, T, sizeof(*g->first));
    g->n = 0;
    for (size_t t = 0; t < T; t++)
        if (t == 0 || restart[t]) {
            g->first[t] = true;
            g->start[g->n++] = t;
        }
    g->start[g->n] = T;
    g->sxx = 0;
    for (size_t k = 0; k < g->n; k++) {
        double sx = 0;
        for (size_t t = g->start[k]; t < g->start[k + 1]; t++)
            sx += x[t];
        double mx = sx / (double)(g->start[k + 1] - g->start[k]);
        for (size_t t = g->start[k]; t < g->start[k + 1]; t++) {
            g->dx[t] = x[t] - mx;
            g->sxx += g->dx[t] * g->dx[t];
        }
    }
}

/* Within-lifetime slope and R^2, rising/falling steps, idle growth, largest
 * rise and the summed rise of one series y over all snapshots. */
static void series_stats(const struct segs *g, const double *y, const bool *idle,
                         struct series_stats *st)
{
    double sxy = 0, vyy = 0, idle_growth = 0, max_up = 0, rise = 0;
    size_t up = 0, down = 0;
    for (size_t k = 0; k < g->n; k++) {
        size_t a = g->start[k], b = g->start[k + 1];
        double sy = 0, syy = 0;
        for (size_t t = a; t < b; t++) {
            double v = y[t];
            sy += v;
            syy += v * v;
            sxy += g->dx[t] * v;
            if (t > a) {
                double d = v - y[t - 1];
                max_up = d > max_up ? d : max_up;
                up += d > 0;
                down += d < 0;
                if (idle && idle[t] && idle[t - 1])
                    idle_growth += d;
            }
        }
        vyy += syy - sy * sy / (double)(b - a);
        rise += y[b - 1] - y[a];
    }
    st->slope = g->sxx > 0 ? sxy / g->sxx : 0;
    st->r2 = g->sxx > 0 && vyy > 0 ? HP_MIN(1.0, (sxy * sxy) / (g->sxx * vyy)) : 0;
    st->monotonic = up + down ? (double)up / (double)(up + down) : 0;
    st->idle_growth = idle_growth;
    st->rise = rise;
    st->step_share = rise > 0 ? max_up / rise : 1;
}

/* The same statistics accumulated from a stack's runs (runs_stats). */
struct acc {
    double vyy, sxy, rise, max_up, idle_growth;
    uint32_t up, down;
};

/* One step of a series, from prev to v (a step within a lifetime). */
static inline void acc_step(struct acc *p, double prev, double v, bool idle_step)
{
    double d = v - prev;
    p->max_up = d > p->max_up ? d : p->max_up;
    p->up += d > 0;
    p->down += d < 0;
    if (idle_step)
        p->idle_growth += d;
}

static bool passes(const struct series_stats *st, const struct query_leak_opts *o)
{
    return st->slope > 0 && st->slope >= o->min_rate && st->rise > 0 &&
           st->monotonic >= o->min_monotonic && st->step_share <= o->max_step_share &&
           st->r2 > 0.25;
}

/* The rise within lifetimes against the sampling noise of the values it
 * is made of (var: the summed variance of each lifetime's first and last
 * value): more than LEAK_NOISE_Z standard deviations, or no sampling. */
#define LEAK_NOISE_Z 3.0

static bool beyond_noise(const struct series_stats *st, double var)
{
    return st->rise > LEAK_NOISE_Z * sqrt(var);
}

static int leak_cmp(const void *a, const void *b)
{
    const struct query_leak_row *x = a, *y = b;
    if (x->rate != y->rate)
        return x->rate < y->rate ? 1 : -1;
    if (x->cum_rate != y->cum_rate)
        return x->cum_rate < y->cum_rate ? 1 : -1;
    if (x->name && y->name)
        return strcmp(x->name, y->name);
    return 0;
}

struct order_item {
    int64_t t;
    size_t i;
};

static int order_cmp(const void *a, const void *b)
{
    const struct order_item *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

struct rank_scratch {
    double *rx, *ry;
    struct rank_item *tmp;
};

/* Spearman's rank correlation within each lifetime of at least 3
 * snapshots, averaged with weights by snapshot count; 0 when no lifetime
 * is long enough to rank. */
static double spearman_segs(const struct segs *g, const double *x, const double *y,
                            struct rank_scratch *rs)
{
    double sum = 0, w = 0;
    for (size_t k = 0; k < g->n; k++) {
        size_t a = g->start[k], n = g->start[k + 1] - a;
        if (n < 3)
            continue;
        ranks(x + a, n, rs->rx, rs->tmp);
        sum += (double)n * spearman_rx(rs->rx, y + a, n, rs->ry, rs->tmp);
        w += (double)n;
    }
    return w > 0 ? sum / w : 0;
}

static void fill_row(struct query_leak_row *r, const struct series_stats *st,
                     struct rank_scratch *rs, const struct segs *g, const double *x,
                     const double *y, size_t n, double total_rate, bool flag_idle,
                     const struct query_leak_opts *o)
{
    r->first = y[0];
    r->last = y[n - 1];
    r->rate = st->slope;
    r->r2 = st->r2;
    r->monotonic = st->monotonic;
    r->step_share = st->step_share;
    r->spearman = spearman_segs(g, x, y, rs);
    r->share = total_rate > 0 ? st->slope / total_rate : 0;
    r->idle_growth = st->idle_growth;
    /* Growth during idle steps that is more than noise-sized: at least a
     * tenth of the series' whole rise. */
    r->idle_flag = flag_idle && st->idle_growth > 0 && st->idle_growth >= 0.1 * st->rise &&
                   st->idle_growth > o->min_rate;
}

/* Why snapshot b starts a new process lifetime after a, or NULL. The
 * process says so when it can (its pid, its start time); only where
 * nothing says is a heap total that fell to under half, by more than six
 * standard errors of sampling, taken as a restart. */
/* The process id of a snapshot: its dump's name, else the agent's /proc. */
static int64_t snap_pid(const struct query_snapshot *s)
{
    double x;
    if (s->pid > 0)
        return s->pid;
    if (query_figure_find(s->figures, s->nfigures, fig_pid, &x) && x > 0 && x < 1e15)
        return (int64_t)x;
    return 0;
}

/* When the process started (Unix seconds), and how precisely that is
 * known, or 0: the snapshot's own, the Prometheus client convention
 * process_start_time_seconds (the node's /metrics), the agent's
 * /proc/<pid>/stat (proc_start_time_seconds), else a `*uptime_seconds`
 * figure counted back from the snapshot's time (to within a minute: the
 * figure and the dump are fetched moments apart). */
static double snap_start(const struct query_snapshot *s, double *ret_slack)
{
    double x;
    *ret_slack = 1;
    if (s->process_start_s > 0)
        return (double)s->process_start_s;
    for (size_t i = 0; i < HP_ARRAY_SIZE(fig_start); i++)
        if (query_figure_find(s->figures, s->nfigures, fig_start[i], &x) && x > 0)
            return x;
    for (size_t i = 0; i < s->nfigures; i++) {
        const char *n = s->figures[i].name;
        if (n && uptime_figure(n) && s->figures[i].value >= 0) {
            *ret_slack = 60;
            return (double)s->time_s - s->figures[i].value;
        }
    }
    return 0;
}

static const char *restart_reason(const struct query_snapshot *a, const struct query_snapshot *b,
                                  double total_a, double total_b, enum profile_value v,
                                  struct hp_arena *ar)
{
    char buf[160], fa[40], fb[40];
    int64_t pa = snap_pid(a), pb = snap_pid(b);
    if (pa > 0 && pb > 0) {
        if (pa == pb)
            return NULL;
        snprintf(buf, sizeof(buf), "pid %lld -> %lld", (long long)pa, (long long)pb);
        return hp_arena_strdup(ar, buf);
    }
    double slack_a, slack_b;
    double sa = snap_start(a, &slack_a), sb = snap_start(b, &slack_b);
    if (sa > 0 && sb > 0) {
        if (fabs(sa - sb) <= HP_MAX(slack_a, slack_b))
            return NULL;
        snprintf(buf, sizeof(buf), "process start time %s -> %s",
                 hp_time_format((int64_t)sa * 1000, fa, sizeof(fa)),
                 hp_time_format((int64_t)sb * 1000, fb, sizeof(fb)));
        return hp_arena_strdup(ar, buf);
    }
    /* Un-sampled totals of a sampled profile: the variance of a total of
     * bytes is about total x period (INTERNALS.md); 0 when exact. */
    uint64_t p = a->folded ? a->folded->period : a->id_period;
    double period = p > 1 ? (double)p : 0;
    double sigma = qa_is_bytes(v) ? sqrt(total_a * period) : sqrt(total_a);
    if (total_b < 0.5 * total_a && total_a - total_b > 6 * sigma) {
        snprintf(buf, sizeof(buf), "heap fell from %s to %s", qa_fmt(v, total_a, fa, sizeof(fa)),
                 qa_fmt(v, total_b, fb, sizeof(fb)));
        return hp_arena_strdup(ar, buf);
    }
    return NULL;
}

/* One build's state, passed from pass to pass. Everything but L and pv (the
 * result) is scratch in sa, released in one call at the end. */
struct leaks_build {
    const struct query_snapshot *snaps;
    const struct query_leak_opts *o;
    enum profile_value v;
    struct query_leaks *L;
    struct leaks_priv *pv;
    struct hp_arena sa;
    struct order_item *ord; /* usable snapshots, oldest first */
    size_t T, S;            /* snapshots, stacks */
    double *x;              /* hours since the first snapshot */
    double *total;          /* heap total per snapshot */
    double *busy;           /* summed busy figures per snapshot */
    bool *busy_known, *idle;
    size_t nbusy_known;
    uint32_t **eid;  /* folded snapshots: entry -> stack id */
    uint32_t **dmap; /* dict snapshots: dict entry -> stack id */
    /* The store's series (query_leak_series), when given: per dictionary,
     * entry -> stack id. */
    const struct query_leak_series *ser;
    uint32_t **smap;
    /* Every stack's series as runs of equal non-zero values, ascending:
     * stack s's are runs[roff[s] .. roff[s + 1]). A stack absent from a
     * snapshot, or 0 there, has no run there. Every pass from the totals
     * on reads these, whatever the input was, so that the store's series
     * and the folded profiles give the same figures to the last bit. */
    struct crun {
        uint32_t t0, t1; /* snapshots [t0, t1) */
        double v;
    } *runs;
    double *rvar; /* the store's series: each run's variance (leaks_noise) */
    uint32_t *roff;
    size_t nruns;
    double *pdx; /* T + 1: prefix sums of g.dx */
    /* One snapshot's row of values, sparse: cur[s] for the stacks in
     * touched[0..n) (the rest are 0). A node's stacks come and go (a
     * quarter of them in any one snapshot, or fewer), so a dense T x S
     * table would be mostly zeros, written, read and paged in for nothing;
     * rows are rebuilt from the snapshots instead, once per pass. */
    double *cur;
    uint32_t *touched;
    uint32_t *stamp; /* cur[s] is in the row when stamp[s] is the row's mark */
    bool *idle_step; /* per snapshot: the step into it is idle */
    struct segs g;   /* process lifetimes */
    double *nvar;    /* per stack: sampling variance of its rise */
    double *var_row; /* per stack: one snapshot's variances (id_vars), zeroed */
    double total_rate;
    double *slope;   /* per stack */
    /* Stacks passing all but the rank test: pre[0..npre), their statistics
     * and series (npre rows of T); pre_of: per stack, its place or -1. */
    uint32_t *pre;
    int32_t *pre_of;
    struct series_stats *pre_st;
    double *pre_y;
    size_t npre;
    /* Functions given a full series: cand[0..ncand) (function ids), per
     * function its place or -1, their series (fyt: T rows of ncand),
     * variances and cumulative rates (per function). */
    uint32_t *cand;
    int32_t *cand_of;
    double *fy, *fvar, *cum;
    size_t ncand;
    struct rank_scratch rs;
    bool flag_idle;
};

/* The snapshots with a heap profile, oldest first: at least 3, and not all
 * at one time. */
static int leaks_order(struct leaks_build *b, size_t n, struct hp_buf *err)
{
    const struct query_snapshot *snaps = b->snaps;
    const char *node = n && snaps[0].node ? snaps[0].node : "";
    struct order_item *ord = b->ord = scratch(&b->sa, n + 1, sizeof(*ord));
    size_t T = 0;
    for (size_t i = 0; i < n; i++)
        if (snaps[i].folded || (snaps[i].dict && snaps[i].ids) || snaps[i].series)
            ord[T++] = (struct order_item){ snaps[i].time_s, i };
    b->T = T;
    if (T < 3) {
        hp_err_printf(err, "leaks%s%s: %zu snapshots with a heap profile; at least 3 are needed "
                           "to tell steady growth from a step",
                      *node ? " for " : "", node, T);
        return HP_EUSAGE;
    }
    hp_qsort(ord, T, sizeof(*ord), order_cmp);
    /* The store's series numbers the snapshots in this same order; all of
     * them or none carry it. */
    b->ser = snaps[ord[0].i].series;
    for (size_t t = 0; t < T; t++) {
        const struct query_snapshot *s = &snaps[ord[t].i];
        if (s->series != b->ser || (b->ser && (s->series_t != t || b->ser->nsnapshots != T))) {
            hp_err_printf(err, "leaks%s%s: snapshot %zu of %zu does not match the node's "
                               "stored series (a reader's mistake, not the data's)",
                          *node ? " for " : "", node, t + 1, T);
            return HP_ECORRUPT;
        }
    }
    if (ord[0].t == ord[T - 1].t) {
        char tb[40];
        hp_err_printf(err, "leaks%s%s: all %zu snapshots carry the same time %s; a growth rate "
                           "needs elapsed time (give each file its time, e.g. with --time or "
                           "--step, or import dumps whose names or mtimes differ)",
                      *node ? " for " : "", node, T,
                      hp_time_format(ord[0].t * 1000, tb, sizeof(tb)));
        return HP_EUSAGE;
    }
    return 0;
}

/* Pass 1: stack ids (the union over snapshots), times, busy figures. */
static void leaks_index(struct leaks_build *b)
{
    struct query_leaks *L = b->L;
    struct leaks_priv *pv = b->pv;
    struct hp_arena *sa = &b->sa;
    size_t T = b->T;
    b->x = scratch(sa, T, sizeof(*b->x));
    b->total = scratch(sa, T, sizeof(*b->total));
    b->busy = scratch(sa, T, sizeof(*b->busy));
    b->idle = scratch(sa, T, sizeof(*b->idle));
    b->busy_known = scratch(sa, T, sizeof(bool));
    b->eid = scratch(sa, T, sizeof(*b->eid));
    b->dmap = scratch(sa, T, sizeof(*b->dmap));
    const struct query_folded **dicts = scratch(sa, T, sizeof(*dicts));
    uint32_t **dict_maps = scratch(sa, T, sizeof(*dict_maps));
    size_t ndicts = 0;
    const char *const *busy_names = b->o->busy_figures ? b->o->busy_figures : default_busy;
    if (b->ser) {
        /* The store's dictionaries, in time order as a pass over the
         * snapshots would meet them. */
        b->smap = scratch(sa, b->ser->ndicts, sizeof(*b->smap));
        size_t ne = 0, nn = 0;
        for (size_t d = 0; d < b->ser->ndicts; d++) {
            ne += b->ser->dicts[d]->nentries;
            nn += b->ser->dicts[d]->nnames;
        }
        qa_stacks_reserve(&pv->stacks, ne, nn);
        for (size_t d = 0; d < b->ser->ndicts; d++) {
            const struct query_folded *f = b->ser->dicts[d];
            b->smap[d] = scratch(sa, f->nentries, sizeof(uint32_t));
            if (d == 0) {
                /* The first is taken whole: its entries are distinct, each
                 * a stack of its own (hashing them was 7% of leaks over a
                 * store, and a node has one dictionary but after restarts
                 * that mapped its binaries elsewhere). */
                qa_stacks_adopt(&pv->stacks, f);
                for (size_t e = 0; e < f->nentries; e++)
                    b->smap[d][e] = (uint32_t)e;
                continue;
            }
            for (size_t e = 0; e < f->nentries; e++)
                b->smap[d][e] = qa_stacks_add_entry(&pv->stacks, f, &f->entries[e]);
        }
    }
    for (size_t t = 0; t < T; t++) {
        const struct query_snapshot *s = &b->snaps[b->ord[t].i];
        b->x[t] = (double)(s->time_s - L->t0) / 3600.0;
        bool known = false;
        for (size_t k = 0; busy_names[k]; k++) {
            double fv;
            if (query_figure_find(s->figures, s->nfigures, busy_names[k], &fv)) {
                b->busy[t] += fv;
                known = true;
            }
        }
        if (known)
            b->nbusy_known++;
        b->busy_known[t] = known;
        if (b->ser)
            continue;
        if (s->folded) {
            const struct query_folded *f = s->folded;
            b->eid[t] = scratch(sa, f->nentries, sizeof(**b->eid));
            for (size_t e = 0; e < f->nentries; e++)
                b->eid[t][e] = qa_stacks_add_entry(&pv->stacks, f, &f->entries[e]);
            continue;
        }
        size_t d;
        for (d = 0; d < ndicts; d++)
            if (dicts[d] == s->dict)
                break;
        if (d == ndicts) {
            dicts[d] = s->dict;
            dict_maps[d] = scratch(sa, s->dict->nentries, sizeof(uint32_t));
            for (size_t e = 0; e < s->dict->nentries; e++)
                dict_maps[d][e] = qa_stacks_add_entry(&pv->stacks, s->dict,
                                                      &s->dict->entries[e]);
            ndicts++;
        }
        b->dmap[t] = dict_maps[d];
    }
    b->S = pv->stacks.n;
}

static inline void row_add(struct leaks_build *b, uint32_t s, uint32_t mark, double v,
                           size_t *n)
{
    if (b->stamp[s] != mark) {
        b->stamp[s] = mark;
        b->touched[(*n)++] = s;
        b->cur[s] = 0.0 + v; /* what 0 += v gives, to the bit */
    } else {
        b->cur[s] += v;
    }
}

/* Snapshot t's row into cur/touched, summed per stack in the order its
 * values come, as a dense row would sum them. Returns the number of stacks
 * touched. pass numbers the passes over the rows (1, 2, ...), so that
 * stale marks never match. */
static size_t row_build(struct leaks_build *b, size_t t, size_t pass)
{
    const struct query_snapshot *s = &b->snaps[b->ord[t].i];
    uint32_t mark = (uint32_t)((pass - 1) * b->T + t + 1);
    size_t n = 0;
    if (s->folded) {
        for (size_t e = 0; e < s->folded->nentries; e++)
            row_add(b, b->eid[t][e], mark, s->folded->entries[e].value[b->v], &n);
    } else {
        for (size_t i = 0; i < s->nids; i++)
            if (s->ids[i] < s->dict->nentries)
                row_add(b, b->dmap[t][s->ids[i]], mark, s->id_values[i], &n);
    }
    return n;
}

/* One pass over the rows (pass 1 or 2) cutting each stack's non-zero
 * points into runs of one value: without `at`, counts each stack's runs
 * into off[s + 1]; with it, writes them at b->runs[at[s]++]. next and
 * lastv: per stack, 1 + the place of its last point and that value. */
static void rows_runs(struct leaks_build *b, size_t pass, uint32_t *next, double *lastv,
                      uint32_t *off, uint32_t *at)
{
    memset(next, 0, (b->S + 1) * sizeof(*next));
    for (size_t t = 0; t < b->T; t++) {
        size_t k = row_build(b, t, pass);
        for (size_t i = 0; i < k; i++) {
            uint32_t s = b->touched[i];
            double v = b->cur[s];
            if (v == 0)
                continue;
            bool goes_on = t > 0 && next[s] == t && lastv[s] == v; /* from t - 1 */
            if (!at)
                off[s + 1] += !goes_on;
            else if (goes_on)
                b->runs[at[s] - 1].t1++;
            else
                b->runs[at[s]++] = (struct crun){ (uint32_t)t, (uint32_t)t + 1, v };
            next[s] = (uint32_t)t + 1;
            lastv[s] = v;
        }
    }
}

/* Pass 2: every stack's runs. From the store's series, checked: each
 * stack's runs ascending and disjoint within the snapshots. From rows, a
 * run grows while a stack keeps its value from one snapshot to the next. */
static int leaks_runs(struct leaks_build *b, struct hp_buf *err)
{
    size_t T = b->T, S = b->S;
    if (b->ser) {
        /* Counted per stack, then placed: each stack's in the order given. */
        const struct query_leak_series *q = b->ser;
        uint32_t *off = b->roff = scratch(&b->sa, S + 1, sizeof(*b->roff));
        /* One dictionary (no restart mapped the binaries elsewhere) is taken
         * whole (leaks_index): its entry e is stack e, no map to look up. */
        const bool whole = q->ndicts == 1;
        for (size_t i = 0; i < q->nruns; i++) {
            const struct query_leak_run *x = &q->runs[i];
            if (x->dict >= q->ndicts || x->entry >= q->dicts[x->dict]->nentries ||
                x->n == 0 || x->t >= T || x->n > T - x->t) {
                hp_err_printf(err, "leaks: a stored series run out of place (a reader's "
                                   "mistake, not the data's)");
                return HP_ECORRUPT;
            }
            off[(whole ? x->entry : b->smap[x->dict][x->entry]) + 1] += x->value != 0;
        }
        for (size_t s = 0; s < S; s++)
            off[s + 1] += off[s];
        uint32_t *at = hp_xmalloc((S + 1) * sizeof(*at));
        memcpy(at, off, (S + 1) * sizeof(*at));
        b->nruns = off[S];
        b->runs = hp_arena_alloc(&b->sa, (b->nruns + 1) * sizeof(*b->runs));
        b->rvar = hp_arena_alloc(&b->sa, (b->nruns + 1) * sizeof(*b->rvar));
        for (size_t i = 0; i < q->nruns; i++) {
            const struct query_leak_run *x = &q->runs[i];
            if (x->value == 0)
                continue;
            uint32_t k = at[whole ? x->entry : b->smap[x->dict][x->entry]]++;
            b->runs[k] = (struct crun){ x->t, x->t + x->n, x->value };
            b->rvar[k] = x->var;
        }
        free(at);
        for (size_t s = 0; s < S; s++)
            for (uint32_t i = off[s] + 1; i < off[s + 1]; i++)
                if (b->runs[i].t0 < b->runs[i - 1].t1) {
                    hp_err_printf(err, "leaks: stored series runs overlap (a reader's "
                                       "mistake, not the data's)");
                    return HP_ECORRUPT;
                }
        return 0;
    }
    /* From rows: counted per stack in one pass, placed in a second, so
     * that only the runs themselves are written (a node whose values move
     * every snapshot has as many runs as points). */
    b->cur = scratch(&b->sa, S + 1, sizeof(*b->cur));
    b->touched = scratch(&b->sa, S + 1, sizeof(*b->touched));
    b->stamp = scratch(&b->sa, S + 1, sizeof(*b->stamp));
    uint32_t *off = b->roff = scratch(&b->sa, S + 1, sizeof(*b->roff));
    uint32_t *next = scratch(&b->sa, S + 1, sizeof(*next));
    double *lastv = scratch(&b->sa, S + 1, sizeof(*lastv));
    rows_runs(b, 1, next, lastv, off, NULL);
    for (size_t s = 0; s < S; s++)
        off[s + 1] += off[s];
    b->nruns = off[S];
    b->runs = hp_arena_alloc(&b->sa, (b->nruns + 1) * sizeof(*b->runs));
    uint32_t *at = scratch(&b->sa, S + 1, sizeof(*at));
    memcpy(at, off, (S + 1) * sizeof(*at));
    rows_runs(b, 2, next, lastv, off, at);
    return 0;
}

/* Stack s's runs added into y (dense, T snapshots). */
static void runs_add(const struct leaks_build *b, size_t s, double *y)
{
    for (uint32_t i = b->roff[s]; i < b->roff[s + 1]; i++) {
        const struct crun *r = &b->runs[i];
        double v = r->v, *p = y + r->t0, *end = y + r->t1;
        /* Four at a time (what the vectorizer would do at -O3; each point
         * gets its one addition, in the same order, so the sums are the
         * same to the bit): these loops were a twentieth of leaks. */
        for (; end - p >= 4; p += 4) {
            p[0] += v;
            p[1] += v;
            p[2] += v;
            p[3] += v;
        }
        for (; p < end; p++)
            *p += v;
    }
}

/* Heap totals: each snapshot's stacks' values, added in stack order. */
static void leaks_values(struct leaks_build *b)
{
    for (size_t s = 0; s < b->S; s++)
        runs_add(b, s, b->total);
}

/* Adjacent runs of one value become one: the store's series cuts runs
 * where its chunks and groups end, and the figures below depend on the
 * runs, so both inputs reach them in this one form (runs from rows are
 * built whole). */
static void leaks_merge(struct leaks_build *b)
{
    if (!b->ser)
        return; /* runs from rows are whole already */
    size_t k = 0;
    for (size_t s = 0; s < b->S; s++) {
        uint32_t a = b->roff[s], z = b->roff[s + 1];
        b->roff[s] = (uint32_t)k;
        for (uint32_t i = a; i < z; i++) {
            const struct crun *r = &b->runs[i];
            if (k > b->roff[s] && b->runs[k - 1].t1 == r->t0 && b->runs[k - 1].v == r->v)
                b->runs[k - 1].t1 = r->t1;
            else
                b->runs[k++] = *r;
        }
    }
    b->roff[b->S] = (uint32_t)k;
    b->nruns = k;
}

/* Idle is relative to the node: query and load trackers under
 * idle_share of the process (its RSS when a figure gives it, else the
 * heap), and never above idle_bytes. A small node whose query tracker
 * is twice its heap is busy, whatever 64 MiB says. */
static void leaks_idle(struct leaks_build *b)
{
    struct query_leaks *L = b->L;
    const struct query_leak_opts *o = b->o;
    L->has_busy = b->nbusy_known == b->T;
    for (size_t t = 0; t < b->T && L->has_busy; t++) {
        const struct query_snapshot *s = &b->snaps[b->ord[t].i];
        double process = b->total[t], rss;
        if ((query_figure_find(s->figures, s->nfigures, fig_rss, &rss) ||
             query_figure_find(s->figures, s->nfigures, fig_rss_prom, &rss)) &&
            rss > process)
            process = rss;
        b->idle[t] = b->busy_known[t] && b->busy[t] <= HP_MIN(o->idle_bytes, o->idle_share * process);
    }
    L->idle_share = o->idle_share;
    L->idle_bytes = o->idle_bytes;
}

/* Process lifetimes, with the reason each one after the first began. */
static void leaks_lifetimes(struct leaks_build *b)
{
    struct query_leaks *L = b->L;
    struct segs *g = &b->g;
    size_t T = b->T;
    bool *restart = scratch(&b->sa, T, sizeof(*restart));
    const char **why = scratch(&b->sa, T, sizeof(*why));
    for (size_t t = 1; t < T; t++) {
        why[t] = restart_reason(&b->snaps[b->ord[t - 1].i], &b->snaps[b->ord[t].i],
                                b->total[t - 1], b->total[t], b->v, &b->pv->arena);
        restart[t] = why[t] != NULL;
    }
    segs_build(g, b->x, restart, T, &b->sa);
    L->nlifetimes = g->n;
    L->lifetimes = scratch(&b->pv->arena, g->n, sizeof(*L->lifetimes));
    for (size_t k = 0; k < g->n; k++) {
        struct query_lifetime *lt = &L->lifetimes[k];
        lt->first = g->start[k];
        lt->npoints = g->start[k + 1] - g->start[k];
        lt->start_s = b->ord[g->start[k]].t;
        lt->reason = why[g->start[k]];
    }
    for (size_t t = 1; t < T; t++)
        if (!g->first[t]) {
            L->steps++;
            L->idle_steps += b->idle[t] && b->idle[t - 1];
        }
}

/* Sampling noise of each stack's rise: the variance of its first and
 * last value in every lifetime (INTERNALS.md §2; the sets of objects
 * behind two dumps may be disjoint, so the variances add). A cache that
 * keeps its size while its entries turn over is re-sampled entry by
 * entry: its estimate walks, and can walk up for hours. Only a rise
 * well beyond that walk is growth. */
static void leaks_noise(struct leaks_build *b)
{
    const struct segs *g = &b->g;
    enum profile_value v = b->v;
    double *nvar = b->nvar = scratch(&b->sa, b->S, sizeof(*nvar));
    b->var_row = scratch(&b->sa, b->S, sizeof(*b->var_row));
    if (b->ser) {
        /* Each run carries its value's variance (the store's series): per
         * stack, the lifetimes' ends in order, as the pass below adds. */
        for (size_t s = 0; s < b->S; s++) {
            uint32_t j = b->roff[s], z = b->roff[s + 1];
            for (size_t k = 0; k < g->n && j < z; k++) {
                size_t ends[2] = { g->start[k], g->start[k + 1] - 1 };
                for (size_t e = 0; e < (ends[0] == ends[1] ? 1u : 2u); e++) {
                    while (j < z && b->runs[j].t1 <= ends[e])
                        j++;
                    if (j < z && b->runs[j].t0 <= ends[e])
                        nvar[s] += b->rvar[j];
                }
            }
        }
        return;
    }
    for (size_t k = 0; k < g->n; k++) {
        size_t ends[2] = { g->start[k], g->start[k + 1] - 1 };
        for (size_t j = 0; j < (ends[0] == ends[1] ? 1u : 2u); j++) {
            size_t t = ends[j];
            const struct query_snapshot *s = &b->snaps[b->ord[t].i];
            if (s->folded) {
                for (size_t e = 0; e < s->folded->nentries; e++)
                    nvar[b->eid[t][e]] += s->folded->entries[e].var[v];
                continue;
            }
            if (s->id_vars) {
                /* Each sample's own variance, summed per stack first as
                 * query_fold sums an entry's, so the figures are the
                 * folded path's to the last bit. */
                double *row = b->var_row;
                for (size_t i = 0; i < s->nids; i++)
                    if (s->ids[i] < s->dict->nentries)
                        row[b->dmap[t][s->ids[i]]] += s->id_vars[i];
                for (size_t i = 0; i < s->nids; i++)
                    if (s->ids[i] < s->dict->nentries) {
                        uint32_t sk = b->dmap[t][s->ids[i]];
                        nvar[sk] += row[sk];
                        row[sk] = 0; /* once per stack; and clean for the next */
                    }
                continue;
            }
            /* Values only: the small-object bound, value x period for
             * bytes (INTERNALS.md §2), which no object size exceeds. */
            double period = s->dict->period > 1 ? (double)s->dict->period : 0;
            for (size_t i = 0; i < s->nids; i++)
                if (s->ids[i] < s->dict->nentries && s->id_values[i] > 0)
                    nvar[b->dmap[t][s->ids[i]]] +=
                        qa_is_bytes(v) ? s->id_values[i] * period
                                       : (period > 0 ? s->id_values[i] : 0);
        }
    }
}

/* The heap total's own fit, against which each suspect's share is given. */
static void leaks_total(struct leaks_build *b)
{
    struct query_leaks *L = b->L;
    struct series_stats tot;
    series_stats(&b->g, b->total, b->idle, &tot);
    L->total_first = b->total[0];
    L->total_last = b->total[b->T - 1];
    L->total_rate = tot.slope;
    L->total_r2 = tot.r2;
    b->total_rate = tot.slope;
}

/* The statistics of one stack from its runs r[0..n) (ascending, disjoint,
 * maximal, none 0): what a pass over its dense series y (0 outside the
 * runs) would compute, lifetime by lifetime, with each run's points taken
 * at once: sum y = v x len, sum y^2 = v^2 x len, sum dx y = v x (sum of
 * dx over the run), and steps only where a run starts or ends. */
static void runs_stats(const struct leaks_build *b, const struct crun *r, size_t n,
                       struct series_stats *st)
{
    const struct segs *g = &b->g;
    const double *pdx = b->pdx;
    const bool *idle_step = b->idle_step;
    struct acc p = { 0 };
    size_t j = 0;
    for (size_t k = 0; k < g->n; k++) {
        uint32_t a = (uint32_t)g->start[k], z = (uint32_t)g->start[k + 1];
        double sy = 0, syy = 0, first = 0, prev = 0;
        uint32_t prev_end = a;
        while (j < n && r[j].t1 <= a)
            j++;
        size_t i = j;
        for (; i < n && r[i].t0 < z; i++) {
            uint32_t t0 = HP_MAX(r[i].t0, a), t1 = HP_MIN(r[i].t1, z);
            double v = r[i].v, len = (double)(t1 - t0);
            if (t0 > a) {
                if (prev != 0 && prev_end < t0) {
                    acc_step(&p, prev, 0, idle_step[prev_end]); /* down to 0 */
                    prev = 0;
                }
                acc_step(&p, prev, v, idle_step[t0]);
            } else {
                first = v;
            }
            sy += v * len;
            syy += v * v * len;
            p.sxy += v * (pdx[t1] - pdx[t0]);
            prev = v;
            prev_end = t1;
        }
        if (prev != 0 && prev_end < z)
            acc_step(&p, prev, 0, idle_step[prev_end]);
        double last = prev_end == z ? prev : 0;
        p.vyy += syy - sy * sy / (double)(z - a);
        p.rise += last - first;
        /* A run across the restart goes on in the next lifetime. */
        j = i > j && r[i - 1].t1 > z ? i - 1 : i;
    }
    st->slope = g->sxx > 0 ? p.sxy / g->sxx : 0;
    st->r2 = g->sxx > 0 && p.vyy > 0 ? HP_MIN(1.0, (p.sxy * p.sxy) / (g->sxx * p.vyy)) : 0;
    st->monotonic = p.up + p.down ? (double)p.up / (double)(p.up + p.down) : 0;
    st->idle_growth = p.idle_growth;
    st->rise = p.rise;
    st->step_share = p.rise > 0 ? p.max_up / p.rise : 1;
}

/* Pass 3: every stack's statistics from its runs. Stacks that pass all
 * but the rank test (which needs the whole series) are noted in b->pre,
 * their statistics in b->pre_st. */
static void leaks_stacks(struct leaks_build *b)
{
    const struct segs *g = &b->g;
    size_t T = b->T, S = b->S;
    bool *idle_step = b->idle_step = scratch(&b->sa, T, sizeof(*idle_step));
    for (size_t t = 1; t < T; t++)
        idle_step[t] = !g->first[t] && b->idle[t] && b->idle[t - 1];
    b->pdx = scratch(&b->sa, T + 1, sizeof(*b->pdx));
    for (size_t t = 0; t < T; t++)
        b->pdx[t + 1] = b->pdx[t] + g->dx[t];
    b->slope = scratch(&b->sa, S, sizeof(*b->slope));
    b->pre_of = scratch(&b->sa, S, sizeof(*b->pre_of));
    b->pre = scratch(&b->sa, S, sizeof(*b->pre));
    b->pre_st = scratch(&b->sa, S, sizeof(*b->pre_st));
    b->npre = 0;
    for (size_t s = 0; s < S; s++) {
        struct series_stats st;
        runs_stats(b, b->runs + b->roff[s], b->roff[s + 1] - b->roff[s], &st);
        b->slope[s] = st.slope;
        b->pre_of[s] = -1;
        if (!passes(&st, b->o) || !beyond_noise(&st, b->nvar[s]))
            continue;
        b->pre_of[s] = (int32_t)b->npre;
        b->pre_st[b->npre] = st;
        b->pre[b->npre++] = (uint32_t)s;
    }
}

/* Functions, ranked by flat growth: the series of the stacks a function
 * is the leaf of, i.e. what it allocates itself. A pass-through caller
 * (worker_main, an HTTP handler) allocates nothing itself and is never a
 * suspect; its cumulative rate (every stack through it, by linearity of
 * the slope) is shown beside each suspect's own. Here: the functions that
 * get a full series. */
static void leaks_funcs(struct leaks_build *b)
{
    struct leaks_priv *pv = b->pv;
    const struct query_leak_opts *o = b->o;
    struct hp_arena *sa = &b->sa;
    size_t S = b->S;
    qa_funcs_build(&pv->funcs, &pv->stacks);
    struct qa_funcs *fn = &pv->funcs;
    double *flat = scratch(sa, fn->n, sizeof(*flat));
    b->cum = scratch(sa, fn->n, sizeof(*b->cum));
    double gross = 0; /* sum of the rising stacks' rates */
    for (size_t s = 0; s < S; s++) {
        for (uint32_t k = fn->stack_off[s]; k < fn->stack_off[s + 1]; k++)
            b->cum[fn->ids[k]] += b->slope[s];
        flat[fn->leaf[s]] += b->slope[s];
        if (b->slope[s] > 0)
            gross += b->slope[s];
    }
    int32_t *cand_of = b->cand_of = scratch(sa, fn->n, sizeof(*cand_of));
    b->cand = scratch(sa, fn->n, sizeof(*b->cand));
    b->ncand = 0;
    for (size_t f = 0; f < fn->n; f++) {
        cand_of[f] = -1;
        /* A full series only for functions that could be reported: rising,
         * above min_rate, carrying at least min_share of the rising stacks'
         * growth (known without the series, the slope being linear). */
        if (flat[f] > 0 && flat[f] >= o->min_rate && flat[f] >= o->min_share * gross) {
            cand_of[f] = (int32_t)b->ncand;
            b->cand[b->ncand++] = (uint32_t)f;
        }
    }
    b->fvar = scratch(sa, b->ncand, sizeof(*b->fvar)); /* stacks sample independently */
    for (size_t s = 0; s < S; s++)
        if (cand_of[fn->leaf[s]] >= 0)
            b->fvar[cand_of[fn->leaf[s]]] += b->nvar[s];
}

/* Pass 4: the full series of the stacks noted in leaks_stacks and of the
 * candidate functions (fy: ncand rows of T), from the runs. Each
 * function's value sums its stacks in stack order. */
static void leaks_series(struct leaks_build *b)
{
    const struct qa_funcs *fn = &b->pv->funcs;
    size_t T = b->T, S = b->S, ncand = b->ncand;
    b->pre_y = scratch(&b->sa, b->npre * T, sizeof(*b->pre_y));
    b->fy = scratch(&b->sa, ncand * T, sizeof(*b->fy));
    for (size_t q = 0; q < b->npre; q++)
        runs_add(b, b->pre[q], b->pre_y + q * T);
    for (size_t s = 0; s < S; s++) {
        int32_t c = b->cand_of[fn->leaf[s]];
        if (c >= 0)
            runs_add(b, s, b->fy + (size_t)c * T);
    }
}

/* Pass 5: the rank test, and the rows of the stacks and functions that
 * pass it. */
static void leaks_rows(struct leaks_build *b)
{
    struct query_leaks *L = b->L;
    struct leaks_priv *pv = b->pv;
    const struct query_leak_opts *o = b->o;
    const struct segs *g = &b->g;
    size_t T = b->T;
    b->rs = (struct rank_scratch){ scratch(&b->sa, T, sizeof(double)),
                                   scratch(&b->sa, T, sizeof(double)),
                                   scratch(&b->sa, T, sizeof(struct rank_item)) };
    b->flag_idle = L->idle_steps > 0;
    size_t cap = 0;
    for (size_t q = 0; q < b->npre; q++) {
        size_t s = b->pre[q];
        struct query_leak_row r = { 0 };
        fill_row(&r, &b->pre_st[q], &b->rs, g, b->x, b->pre_y + q * T, T, b->total_rate,
                 b->flag_idle, o);
        if (r.spearman < o->min_spearman)
            continue;
        r.frames = qa_stack_frames(&pv->stacks, (uint32_t)s);
        r.nframes = pv->stacks.v[s].n;
        r.name = r.nframes ? r.frames[r.nframes - 1] : "";
        r.cum_rate = r.rate;
        L->stacks = hp_xgrow(L->stacks, &cap, L->nstacks + 1, sizeof(*L->stacks));
        L->stacks[L->nstacks++] = r;
    }
    double *series = scratch(&b->sa, T, sizeof(*series));
    cap = 0;
    for (size_t c = 0; c < b->ncand; c++) {
        memcpy(series, b->fy + c * T, T * sizeof(*series));
        struct series_stats st;
        series_stats(g, series, b->idle, &st);
        if (!passes(&st, o) || !beyond_noise(&st, b->fvar[c]))
            continue;
        struct query_leak_row r = { 0 };
        fill_row(&r, &st, &b->rs, g, b->x, series, T, b->total_rate, b->flag_idle, o);
        if (r.spearman < o->min_spearman)
            continue;
        r.name = pv->funcs.name[b->cand[c]];
        r.cum_rate = b->cum[b->cand[c]];
        L->funcs = hp_xgrow(L->funcs, &cap, L->nfuncs + 1, sizeof(*L->funcs));
        L->funcs[L->nfuncs++] = r;
    }
}

/* The rows outlive the build; the union of the node's stacks and the
 * function index do not. An answer keeps the names its rows show, copied
 * once each: `query leaks --db` holds every node's answer until it prints,
 * and with the union that was about 3 MB a node (100 nodes x 1,000
 * stacks: 330 MB, most of it never shown). */
static void leaks_keep_rows(struct leaks_priv *pv, struct query_leaks *L)
{
    struct hp_strtab keep;
    hp_strtab_init(&keep, &pv->arena);
    for (size_t i = 0; i < L->nstacks; i++) {
        struct query_leak_row *r = &L->stacks[i];
        const char **f = hp_arena_alloc(&pv->arena, (r->nframes + 1) * sizeof(*f));
        for (uint32_t k = 0; k < r->nframes; k++)
            f[k] = hp_strtab_intern(&keep, r->frames[k], strlen(r->frames[k]));
        r->frames = f;
        r->name = r->nframes ? f[r->nframes - 1] : "";
    }
    for (size_t i = 0; i < L->nfuncs; i++)
        L->funcs[i].name = hp_strtab_intern(&keep, L->funcs[i].name, strlen(L->funcs[i].name));
    hp_strtab_release(&keep);
    qa_funcs_release(&pv->funcs);
    qa_stacks_release(&pv->stacks);
    qa_stacks_init(&pv->stacks);
}

int query_leaks_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_leak_opts *o, struct query_leaks **ret,
                      struct hp_buf *err)
{
    if ((unsigned)o->sample >= PV_COUNT) {
        hp_err_printf(err, "leaks: bad sample");
        return HP_EUSAGE;
    }
    struct leaks_build b = { .snaps = snaps, .o = o, .v = o->sample };
    hp_arena_init(&b.sa); /* scratch of this build, freed in one call */
    int rc = leaks_order(&b, n, err);
    if (rc < 0) {
        hp_arena_release(&b.sa);
        return rc;
    }
    size_t T = b.T;
    struct query_leaks *L = b.L = hp_xcalloc(1, sizeof(*L));
    struct leaks_priv *pv = b.pv = hp_xcalloc(1, sizeof(*pv));
    L->priv = pv;
    hp_arena_init(&pv->arena);
    qa_stacks_init(&pv->stacks);
    L->node = snaps[b.ord[0].i].node;
    L->npoints = T;
    L->t0 = b.ord[0].t;
    L->t1 = b.ord[T - 1].t;
    L->first_id = snaps[b.ord[0].i].id;
    L->last_id = snaps[b.ord[T - 1].i].id;

    leaks_index(&b);
    if ((rc = leaks_runs(&b, err)) < 0) {
        hp_arena_release(&b.sa);
        query_leaks_free(L);
        return rc;
    }
    leaks_values(&b);
    leaks_idle(&b);
    leaks_lifetimes(&b);
    leaks_noise(&b);
    leaks_merge(&b);
    leaks_total(&b);
    leaks_stacks(&b);
    leaks_funcs(&b);
    leaks_series(&b);
    leaks_rows(&b);

    hp_qsort(L->stacks, L->nstacks, sizeof(*L->stacks), leak_cmp);
    hp_qsort(L->funcs, L->nfuncs, sizeof(*L->funcs), leak_cmp);
    leaks_keep_rows(pv, L);
    hp_arena_release(&b.sa);
    *ret = L;
    return 0;
}

void query_leaks_free(struct query_leaks *l)
{
    if (!l)
        return;
    struct leaks_priv *pv = l->priv;
    if (pv) {
        qa_funcs_release(&pv->funcs);
        qa_stacks_release(&pv->stacks);
        hp_arena_release(&pv->arena);
        free(pv);
    }
    free(l->funcs);
    free(l->stacks);
    free(l);
}

/* ---- renderers ---- */

static void fmt_rate(enum profile_value v, double rate, char *buf, size_t n)
{
    char tmp[32];
    snprintf(buf, n, "%s/h", qa_fmt_signed(v, rate, tmp, sizeof(tmp)));
}

int query_render_leaks_text(const struct query_leaks *const *ls, size_t n,
                            const struct query_leak_opts *o, struct hp_buf *out)
{
    enum profile_value v = o->sample;
    char a[40], b[40], c[40], d[40];
    for (size_t li = 0; li < n; li++) {
        const struct query_leaks *l = ls[li];
        if (li)
            hp_buf_puts(out, "\n");
        double hours = (double)(l->t1 - l->t0) / 3600.0;
        fmt_rate(v, l->total_rate, c, sizeof(c));
        hp_buf_printf(out, "Node %s: %zu snapshots over %.1f h; heap %s -> %s (%s within "
                           "lifetimes, R^2 %.2f)\n",
                      l->node ? l->node : "(files)", l->npoints, hours,
                      qa_fmt(v, l->total_first, a, sizeof(a)),
                      qa_fmt(v, l->total_last, b, sizeof(b)), c, l->total_r2);
        /* Which snapshots: the first and the last, by id where stored. */
        hp_buf_printf(out, "Snapshots: ");
        if (l->first_id > 0)
            hp_buf_printf(out, "#%lld at ", (long long)l->first_id);
        hp_buf_printf(out, "%s to ", hp_time_format(l->t0 * 1000, a, sizeof(a)));
        if (l->last_id > 0)
            hp_buf_printf(out, "#%lld at ", (long long)l->last_id);
        hp_buf_printf(out, "%s\n", hp_time_format(l->t1 * 1000, a, sizeof(a)));
        hp_buf_printf(out, "Lifetimes: %zu", l->nlifetimes);
        if (l->nlifetimes > 1) {
            hp_buf_puts(out, " (restarts:");
            for (size_t k = 1; k < l->nlifetimes; k++)
                hp_buf_printf(out, "%s %s, %s", k > 1 ? ";" : "",
                              hp_time_format(l->lifetimes[k].start_s * 1000, a, sizeof(a)),
                              l->lifetimes[k].reason);
            hp_buf_puts(out, ")");
        }
        hp_buf_puts(out, "; growth is fitted within each\n");
        if (!l->has_busy)
            hp_buf_puts(out, "Idle: unknown (no query/load tracker figures with these "
                             "snapshots)\n");
        else
            hp_buf_printf(out,
                          "Idle: %zu of %zu steps had query and load trackers under %.0f%% of "
                          "the process (RSS, else the heap; at most %s)\n",
                          l->idle_steps, l->steps, 100.0 * l->idle_share,
                          qa_fmt(PV_INUSE_SPACE, l->idle_bytes, a, sizeof(a)));
        if (!l->nfuncs && !l->nstacks) {
            hp_buf_puts(out, "No steadily growing stacks.\n");
            continue;
        }
        hp_buf_printf(out, "\n%14s %14s %7s %6s %6s %12s %12s  %s\n", "flat growth",
                      "cum growth", "share", "rising", "rank-r", "first", "last",
                      "function (allocates itself)");
        size_t rows = o->top ? HP_MIN(o->top, l->nfuncs) : l->nfuncs;
        for (size_t i = 0; i < rows; i++) {
            const struct query_leak_row *r = &l->funcs[i];
            fmt_rate(v, r->rate, c, sizeof(c));
            fmt_rate(v, r->cum_rate, d, sizeof(d));
            hp_buf_printf(out, "%14s %14s %6.1f%% %5.0f%% %6.2f %12s %12s  %s%s\n", c, d,
                          100.0 * r->share, 100.0 * r->monotonic, r->spearman,
                          qa_fmt(v, r->first, a, sizeof(a)), qa_fmt(v, r->last, b, sizeof(b)),
                          r->name, r->idle_flag ? "  [grows while idle]" : "");
        }
        if (rows < l->nfuncs)
            hp_buf_printf(out, "(%zu more functions; --top 0 shows all)\n", l->nfuncs - rows);
        hp_buf_printf(out, "\n%14s %7s %6s %6s %12s  %s\n", "growth", "share", "rising",
                      "rank-r", "last", "stack (suspect <- callers)");
        rows = o->top ? HP_MIN(o->top, l->nstacks) : l->nstacks;
        for (size_t i = 0; i < rows; i++) {
            const struct query_leak_row *r = &l->stacks[i];
            fmt_rate(v, r->rate, c, sizeof(c));
            hp_buf_printf(out, "%14s %6.1f%% %5.0f%% %6.2f %12s  ", c, 100.0 * r->share,
                          100.0 * r->monotonic, r->spearman, qa_fmt(v, r->last, a, sizeof(a)));
            qa_stack_label(out, r->frames, r->nframes, 8);
            hp_buf_puts(out, r->idle_flag ? "  [grows while idle]\n" : "\n");
        }
        if (rows < l->nstacks)
            hp_buf_printf(out, "(%zu more stacks; --top 0 shows all)\n", l->nstacks - rows);
    }
    return 0;
}

static json_t *leak_json(struct hp_arena *tmp, const struct query_leak_row *r, bool func)
{
    json_t *j = json_object();
    if (func) {
        json_object_set_new(j, "name", json_string(query_utf8_clean(tmp, r->name)));
        json_object_set_new(j, "cum_rate_per_hour", json_real(r->cum_rate));
    } else {
        json_t *fr = json_array();
        for (uint32_t k = 0; k < r->nframes; k++)
            json_array_append_new(fr, json_string(query_utf8_clean(tmp, r->frames[k])));
        json_object_set_new(j, "frames", fr);
    }
    json_object_set_new(j, "rate_per_hour", json_real(r->rate));
    json_object_set_new(j, "r2", json_real(r->r2));
    json_object_set_new(j, "monotonic", json_real(r->monotonic));
    json_object_set_new(j, "spearman", json_real(r->spearman));
    json_object_set_new(j, "step_share", json_real(r->step_share));
    json_object_set_new(j, "share", json_real(r->share));
    json_object_set_new(j, "first", json_real(r->first));
    json_object_set_new(j, "last", json_real(r->last));
    json_object_set_new(j, "idle_growth", json_real(r->idle_growth));
    json_object_set_new(j, "grows_while_idle", json_boolean(r->idle_flag));
    return j;
}

int query_render_leaks_json(const struct query_leaks *const *ls, size_t n,
                            const struct query_leak_opts *o, struct hp_buf *out)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *root = json_object();
    json_object_set_new(root, "sample", json_string(profile_value_name(o->sample)));
    json_t *nodes = json_array();
    for (size_t li = 0; li < n; li++) {
        const struct query_leaks *l = ls[li];
        json_t *jn = json_object(), *lts = json_array();
        json_object_set_new(jn, "node", l->node ? json_string(query_utf8_clean(&tmp, l->node))
                                                : json_null());
        json_object_set_new(jn, "snapshots", json_integer((json_int_t)l->npoints));
        json_object_set_new(jn, "from", json_integer(l->t0));
        json_object_set_new(jn, "to", json_integer(l->t1));
        for (int k = 0; k < 2; k++) {
            char tb[40];
            json_t *js = json_object();
            int64_t id = k ? l->last_id : l->first_id, t = k ? l->t1 : l->t0;
            json_object_set_new(js, "id", id > 0 ? json_integer(id) : json_null());
            json_object_set_new(js, "node", l->node ? json_string(query_utf8_clean(&tmp, l->node))
                                                    : json_null());
            json_object_set_new(js, "time", json_string(hp_time_format(t * 1000, tb, sizeof(tb))));
            json_object_set_new(jn, k ? "last_snapshot" : "first_snapshot", js);
        }
        json_object_set_new(jn, "total_first", json_real(l->total_first));
        json_object_set_new(jn, "total_last", json_real(l->total_last));
        json_object_set_new(jn, "total_rate_per_hour", json_real(l->total_rate));
        json_object_set_new(jn, "idle_known", json_boolean(l->has_busy));
        json_object_set_new(jn, "idle_steps", json_integer((json_int_t)l->idle_steps));
        json_object_set_new(jn, "steps", json_integer((json_int_t)l->steps));
        json_object_set_new(jn, "idle_rule", json_pack("{s:f, s:f}", "share_of_process",
                                                       l->idle_share, "max_bytes", l->idle_bytes));
        for (size_t k = 0; k < l->nlifetimes; k++) {
            const struct query_lifetime *lt = &l->lifetimes[k];
            json_t *jl = json_object();
            json_object_set_new(jl, "start", json_integer(lt->start_s));
            json_object_set_new(jl, "snapshots", json_integer((json_int_t)lt->npoints));
            json_object_set_new(jl, "restart", lt->reason ? json_string(lt->reason)
                                                          : json_null());
            json_array_append_new(lts, jl);
        }
        json_object_set_new(jn, "lifetimes", lts);
        json_t *fa = json_array(), *sa = json_array();
        size_t rows = o->top ? HP_MIN(o->top, l->nfuncs) : l->nfuncs;
        for (size_t i = 0; i < rows; i++)
            json_array_append_new(fa, leak_json(&tmp, &l->funcs[i], true));
        rows = o->top ? HP_MIN(o->top, l->nstacks) : l->nstacks;
        for (size_t i = 0; i < rows; i++)
            json_array_append_new(sa, leak_json(&tmp, &l->stacks[i], false));
        json_object_set_new(jn, "functions", fa);
        json_object_set_new(jn, "stacks", sa);
        json_array_append_new(nodes, jn);
    }
    json_object_set_new(root, "nodes", nodes);
    int r = qa_json_emit(root, out);
    hp_arena_release(&tmp); /* after: names may point into it */
    return r;
}
