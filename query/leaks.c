/* leaks: stacks and functions whose in-use bytes grow steadily across one
 * node's snapshots.
 *
 * Per stack the series y(t) (0 where the stack is absent) gets a
 * least-squares slope in bytes per hour, the R^2 of that line, the share of
 * rising steps among steps that change, and Spearman's rank correlation of y
 * with time; a suspect rises (slope > min_rate, last > first), mostly in
 * steps (monotonic >= min_monotonic), along a line more than by chance
 * (R^2 > 0.25) and in rank order (spearman >= min_spearman), without one jump
 * carrying most of the rise (step_share <= max_step_share). Sampled dumps
 * make step-to-step changes noisy, so the rank correlation over the whole
 * window is the main test and the share of rising steps only a guard.
 * Function series are sums of their stacks' series; since a slope is
 * linear, a function's slope is the sum of its stacks' slopes, so only
 * functions whose summed slope passes are given a full series (which keeps
 * 30 days x 100 nodes fast). Idle: steps where the node's query and
 * load trackers both sat at or under idle_bytes; growth in those steps is
 * what a leak looks like, since no query holds memory then. */
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
    struct qa_stacks stacks;
    struct qa_funcs funcs;
};

struct series_stats {
    double slope, r2, monotonic, idle_growth, step_share;
};

/* x's own sums, shared by every series of a node. */
struct xstats {
    double mx, sxx;
};

static void xstats_init(struct xstats *xs, const double *x, size_t n)
{
    double sx = 0;
    for (size_t i = 0; i < n; i++)
        sx += x[i];
    xs->mx = sx / (double)n;
    xs->sxx = 0;
    for (size_t i = 0; i < n; i++)
        xs->sxx += (x[i] - xs->mx) * (x[i] - xs->mx);
}

/* One pass: slope and R^2 from running sums (x centred, so the sums stay
 * well conditioned), rising/falling steps, idle growth, largest rise. */
static void series_stats(const struct xstats *xs, const double *x, const double *y,
                         const bool *idle, size_t n, struct series_stats *st)
{
    double sy = 0, syy = 0, sxy = 0, idle_growth = 0, max_up = 0;
    size_t up = 0, down = 0;
    for (size_t t = 0; t < n; t++) {
        double v = y[t];
        sy += v;
        syy += v * v;
        sxy += (x[t] - xs->mx) * v;
        if (t) {
            double d = v - y[t - 1];
            if (d > max_up)
                max_up = d;
            if (d > 0)
                up++;
            else if (d < 0)
                down++;
            if (idle && idle[t] && idle[t - 1])
                idle_growth += d;
        }
    }
    double vyy = syy - sy * sy / (double)n;
    st->slope = xs->sxx > 0 ? sxy / xs->sxx : 0;
    st->r2 = xs->sxx > 0 && vyy > 0 ? HP_MIN(1.0, (sxy * sxy) / (xs->sxx * vyy)) : 0;
    st->monotonic = up + down ? (double)up / (double)(up + down) : 0;
    st->idle_growth = idle_growth;
    double rise = y[n - 1] - y[0];
    st->step_share = rise > 0 ? max_up / rise : 1;
}

/* The same statistics accumulated one snapshot row at a time for all
 * stacks at once (snapshot-major data, sequential access). */
struct acc {
    double sy, syy, sxy, prev, max_up, idle_growth;
    uint32_t up, down;
};

static void acc_row(struct acc *a, const double *row, size_t S, size_t t, double dx,
                    bool idle_step)
{
    for (size_t s = 0; s < S; s++) {
        double v = row[s];
        struct acc *p = &a[s];
        p->sy += v;
        p->syy += v * v;
        p->sxy += dx * v;
        if (t) {
            double d = v - p->prev;
            p->max_up = d > p->max_up ? d : p->max_up;
            p->up += d > 0;
            p->down += d < 0;
            if (idle_step)
                p->idle_growth += d;
        }
        p->prev = v;
    }
}

static void acc_finish(const struct acc *a, const struct xstats *xs, size_t n, double first,
                       double last, struct series_stats *st)
{
    double vyy = a->syy - a->sy * a->sy / (double)n;
    st->slope = xs->sxx > 0 ? a->sxy / xs->sxx : 0;
    st->r2 = xs->sxx > 0 && vyy > 0 ? HP_MIN(1.0, (a->sxy * a->sxy) / (xs->sxx * vyy)) : 0;
    st->monotonic = a->up + a->down ? (double)a->up / (double)(a->up + a->down) : 0;
    st->idle_growth = a->idle_growth;
    double rise = last - first;
    st->step_share = rise > 0 ? a->max_up / rise : 1;
}

static bool passes(const struct series_stats *st, double first, double last,
                   const struct query_leak_opts *o)
{
    return st->slope > 0 && st->slope >= o->min_rate && last > first &&
           st->monotonic >= o->min_monotonic && st->step_share <= o->max_step_share &&
           st->r2 > 0.25;
}

static int leak_cmp(const void *a, const void *b)
{
    const struct query_leak_row *x = a, *y = b;
    if (x->rate != y->rate)
        return x->rate < y->rate ? 1 : -1;
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

static void fill_row(struct query_leak_row *r, const struct series_stats *st,
                     struct rank_scratch *rs, const double *y, size_t n, double total_rate,
                     bool flag_idle, const struct query_leak_opts *o)
{
    r->first = y[0];
    r->last = y[n - 1];
    r->rate = st->slope;
    r->r2 = st->r2;
    r->monotonic = st->monotonic;
    r->step_share = st->step_share;
    r->spearman = spearman_rx(rs->rx, y, n, rs->ry, rs->tmp);
    r->share = total_rate > 0 ? st->slope / total_rate : 0;
    r->idle_growth = st->idle_growth;
    /* Growth during idle steps that is more than noise-sized: at least a
     * tenth of the series' whole rise. */
    r->idle_flag = flag_idle && st->idle_growth > 0 &&
                   st->idle_growth >= 0.1 * (y[n - 1] - y[0]) && st->idle_growth > o->min_rate;
}

int query_leaks_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_leak_opts *o, struct query_leaks **ret,
                      struct hp_buf *err)
{
    enum profile_value v = o->sample;
    if ((unsigned)v >= PV_COUNT) {
        hp_err_printf(err, "leaks: bad sample");
        return HP_EUSAGE;
    }
    struct order_item *ord = hp_xmalloc((n + 1) * sizeof(*ord));
    size_t T = 0;
    for (size_t i = 0; i < n; i++)
        if (snaps[i].folded || (snaps[i].dict && snaps[i].ids))
            ord[T++] = (struct order_item){ snaps[i].time_s, i };
    if (T < 3) {
        hp_err_printf(err, "leaks%s%s: %zu snapshots with a heap profile; at least 3 are needed "
                           "to tell steady growth from a step",
                      n && snaps[0].node ? " for " : "", n && snaps[0].node ? snaps[0].node : "",
                      T);
        free(ord);
        return HP_EUSAGE;
    }
    hp_qsort(ord, T, sizeof(*ord), order_cmp);

    struct query_leaks *L = hp_xcalloc(1, sizeof(*L));
    struct leaks_priv *pv = hp_xcalloc(1, sizeof(*pv));
    L->priv = pv;
    qa_stacks_init(&pv->stacks);
    L->node = snaps[ord[0].i].node;
    L->npoints = T;
    L->t0 = ord[0].t;
    L->t1 = ord[T - 1].t;

    /* Pass 1: stack ids (the union over snapshots), times, idle steps. */
    double *x = hp_xmalloc(T * sizeof(*x)), *total = hp_xcalloc(T, sizeof(*total));
    double *busy = hp_xcalloc(T, sizeof(*busy));
    bool *idle = hp_xcalloc(T, sizeof(*idle));
    uint32_t **eid = hp_xcalloc(T, sizeof(*eid)); /* folded snapshots: entry -> id */
    struct dict_ids {
        const struct query_folded *dict;
        uint32_t *map;
    } *dicts = NULL;
    size_t ndicts = 0, dicts_cap = 0;
    uint32_t **dmap = hp_xcalloc(T, sizeof(*dmap)); /* dict snapshots: dict entry -> id */
    const char *const *busy_names = o->busy_figures ? o->busy_figures : default_busy;
    size_t nbusy_known = 0;
    for (size_t t = 0; t < T; t++) {
        const struct query_snapshot *s = &snaps[ord[t].i];
        x[t] = (double)(s->time_s - L->t0) / 3600.0;
        bool known = false;
        for (size_t k = 0; busy_names[k]; k++) {
            double fv;
            if (query_figure_find(s->figures, s->nfigures, busy_names[k], &fv)) {
                busy[t] += fv;
                known = true;
            }
        }
        if (known) {
            nbusy_known++;
            idle[t] = busy[t] <= o->idle_bytes;
        }
        if (s->folded) {
            const struct query_folded *f = s->folded;
            eid[t] = hp_xmalloc((f->nentries + 1) * sizeof(**eid));
            for (size_t e = 0; e < f->nentries; e++)
                eid[t][e] = qa_stacks_add_entry(&pv->stacks, f, &f->entries[e]);
            total[t] = f->total[v];
            continue;
        }
        size_t d;
        for (d = 0; d < ndicts; d++)
            if (dicts[d].dict == s->dict)
                break;
        if (d == ndicts) {
            dicts = hp_xgrow(dicts, &dicts_cap, ndicts + 1, sizeof(*dicts));
            dicts[ndicts].dict = s->dict;
            dicts[ndicts].map = hp_xmalloc((s->dict->nentries + 1) * sizeof(uint32_t));
            for (size_t e = 0; e < s->dict->nentries; e++)
                dicts[ndicts].map[e] = qa_stacks_add_entry(&pv->stacks, s->dict,
                                                           &s->dict->entries[e]);
            ndicts++;
        }
        dmap[t] = dicts[d].map;
    }
    L->has_busy = nbusy_known == T;
    if (!L->has_busy)
        memset(idle, 0, T * sizeof(*idle));
    L->steps = T - 1;
    for (size_t t = 1; t < T; t++)
        L->idle_steps += idle[t] && idle[t - 1];

    /* Pass 2: values, snapshot-major (one row of S per snapshot, written in
     * the order values arrive), and every stack's statistics accumulated
     * row by row, so no pass strides across memory. */
    size_t S = pv->stacks.n;
    double *yt = hp_xcalloc(S * T + 1, sizeof(*yt));
    for (size_t t = 0; t < T; t++) {
        const struct query_snapshot *s = &snaps[ord[t].i];
        double *row = yt + t * S;
        if (s->folded) {
            for (size_t e = 0; e < s->folded->nentries; e++)
                row[eid[t][e]] += s->folded->entries[e].value[v];
        } else {
            for (size_t k = 0; k < s->nids; k++) {
                if (s->ids[k] >= s->dict->nentries)
                    continue;
                row[dmap[t][s->ids[k]]] += s->id_values[k];
                total[t] += s->id_values[k];
            }
        }
    }
    for (size_t t = 0; t < T; t++)
        free(eid[t]);
    free(eid);
    free(dmap);
    for (size_t d = 0; d < ndicts; d++)
        free(dicts[d].map);
    free(dicts);

    struct xstats xs;
    xstats_init(&xs, x, T);
    struct series_stats tot;
    series_stats(&xs, x, total, idle, T, &tot);
    L->total_first = total[0];
    L->total_last = total[T - 1];
    L->total_rate = tot.slope;
    L->total_r2 = tot.r2;
    double total_rate = tot.slope;

    struct acc *acc = hp_xcalloc(S + 1, sizeof(*acc));
    for (size_t t = 0; t < T; t++)
        acc_row(acc, yt + t * S, S, t, x[t] - xs.mx, t && idle[t] && idle[t - 1]);
    struct rank_scratch rs = { hp_xmalloc(T * sizeof(double)), hp_xmalloc(T * sizeof(double)),
                               hp_xmalloc(T * sizeof(struct rank_item)) };
    ranks(x, T, rs.rx, rs.tmp);
    double *series = hp_xmalloc(T * sizeof(*series));

    /* Stacks. */
    double *slope = hp_xcalloc(S + 1, sizeof(*slope));
    double gross = 0; /* sum of the rising stacks' rates */
    size_t cap = 0;
    for (size_t s = 0; s < S; s++) {
        struct series_stats st;
        acc_finish(&acc[s], &xs, T, yt[s], yt[(T - 1) * S + s], &st);
        slope[s] = st.slope;
        if (st.slope > 0)
            gross += st.slope;
        if (!passes(&st, yt[s], yt[(T - 1) * S + s], o))
            continue;
        for (size_t t = 0; t < T; t++)
            series[t] = yt[t * S + s];
        struct query_leak_row r = { 0 };
        fill_row(&r, &st, &rs, series, T, total_rate, L->idle_steps > 0, o);
        if (r.spearman < o->min_spearman)
            continue;
        r.frames = qa_stack_frames(&pv->stacks, (uint32_t)s);
        r.nframes = pv->stacks.v[s].n;
        r.name = r.nframes ? r.frames[r.nframes - 1] : "";
        L->stacks = hp_xgrow(L->stacks, &cap, L->nstacks + 1, sizeof(*L->stacks));
        L->stacks[L->nstacks++] = r;
    }

    /* Functions: slope by linearity, full series for the ones that may pass. */
    qa_funcs_build(&pv->funcs, &pv->stacks);
    struct qa_funcs *fn = &pv->funcs;
    double *fslope = hp_xcalloc(fn->n + 1, sizeof(*fslope));
    for (size_t s = 0; s < S; s++)
        for (uint32_t k = fn->stack_off[s]; k < fn->stack_off[s + 1]; k++)
            fslope[fn->ids[k]] += slope[s];
    uint32_t *cand = hp_xmalloc((fn->n + 1) * sizeof(*cand));
    int32_t *cand_of = hp_xmalloc((fn->n + 1) * sizeof(*cand_of));
    size_t ncand = 0;
    for (size_t f = 0; f < fn->n; f++) {
        cand_of[f] = -1;
        /* A full series only for functions that could be reported: rising,
         * above min_rate, and carrying at least min_share of the rising
         * stacks' growth (a function is a sum of stacks, so its rate is
         * known without its series). */
        if (fslope[f] > 0 && fslope[f] >= o->min_rate && fslope[f] >= o->min_share * gross) {
            cand_of[f] = (int32_t)ncand;
            cand[ncand++] = (uint32_t)f;
        }
    }
    /* Candidates with the same set of stacks (a chain of frames that always
     * appear together: main -> run_round, the root frames of every thread)
     * share one series. The set's signature is a running hash of stack ids,
     * stacks being visited in id order. */
    uint64_t *sig = hp_xcalloc(ncand + 1, sizeof(*sig));
    uint32_t *nst = hp_xcalloc(ncand + 1, sizeof(*nst));
    for (size_t s = 0; s < S; s++)
        for (uint32_t k = fn->stack_off[s]; k < fn->stack_off[s + 1]; k++) {
            int32_t c = cand_of[fn->ids[k]];
            if (c >= 0) {
                sig[c] = hp_hash_u64(sig[c] ^ (s + 1));
                nst[c]++;
            }
        }
    uint32_t *rep = hp_xmalloc((ncand + 1) * sizeof(*rep)); /* series index */
    struct hp_map64 sigmap;
    hp_map64_init(&sigmap);
    size_t nseries = 0;
    for (size_t c = 0; c < ncand; c++) {
        uint32_t idx;
        uint64_t key = sig[c] ^ ((uint64_t)nst[c] << 40);
        if (!hp_map64_put(&sigmap, key, (uint32_t)nseries, &idx))
            nseries++;
        rep[c] = idx;
    }
    hp_map64_release(&sigmap);
    /* (stack, series) pairs, each series fed once per stack. */
    struct pair {
        uint32_t s, series;
    } *pairs = NULL;
    size_t npairs = 0, pairs_cap = 0;
    uint32_t *seen = hp_xcalloc(nseries + 1, sizeof(*seen));
    for (size_t s = 0; s < S; s++)
        for (uint32_t k = fn->stack_off[s]; k < fn->stack_off[s + 1]; k++) {
            int32_t c = cand_of[fn->ids[k]];
            if (c < 0 || seen[rep[c]] == s + 1)
                continue;
            seen[rep[c]] = (uint32_t)s + 1;
            pairs = hp_xgrow(pairs, &pairs_cap, npairs + 1, sizeof(*pairs));
            pairs[npairs++] = (struct pair){ (uint32_t)s, rep[c] };
        }
    free(seen);
    free(sig);
    free(nst);
    double *fyt = hp_xcalloc(nseries * T + 1, sizeof(*fyt)); /* snapshot-major too */
    for (size_t t = 0; t < T; t++) {
        const double *row = yt + t * S;
        double *frow = fyt + t * nseries;
        for (size_t k = 0; k < npairs; k++)
            frow[pairs[k].series] += row[pairs[k].s];
    }
    free(pairs);
    cap = 0;
    int32_t *row_of = hp_xmalloc((fn->n + 1) * sizeof(*row_of));
    for (size_t f = 0; f < fn->n; f++)
        row_of[f] = -1;
    for (size_t c = 0; c < ncand; c++) {
        for (size_t t = 0; t < T; t++)
            series[t] = fyt[t * nseries + rep[c]];
        struct series_stats st;
        series_stats(&xs, x, series, idle, T, &st);
        if (!passes(&st, series[0], series[T - 1], o))
            continue;
        struct query_leak_row r = { 0 };
        fill_row(&r, &st, &rs, series, T, total_rate, L->idle_steps > 0, o);
        if (r.spearman < o->min_spearman)
            continue;
        r.name = fn->name[cand[c]];
        row_of[cand[c]] = (int32_t)L->nfuncs;
        L->funcs = hp_xgrow(L->funcs, &cap, L->nfuncs + 1, sizeof(*L->funcs));
        L->funcs[L->nfuncs++] = r;
    }

    /* Pass-through callers: F whose growth is >= 90% carried by one callee G
     * (the frame right after F in its growing stacks) with G's own growth at
     * most 1.1 x F's, i.e. G is specific to F (main -> run_round). */
    if (L->nfuncs > 1) {
        struct hp_map64 pair;
        hp_map64_init(&pair);
        double *pair_slope = NULL;
        size_t npair = 0, pair_cap = 0;
        uint32_t *pair_g = NULL, *pair_f = NULL;
        size_t pg_cap = 0, pf_cap = 0;
        for (size_t s = 0; s < S; s++) {
            if (slope[s] <= 0)
                continue;
            const uint32_t *nid = qa_stack_name_ids(&pv->stacks, (uint32_t)s);
            uint32_t nn = pv->stacks.v[s].n;
            for (uint32_t k = 0; k + 1 < nn; k++) {
                uint32_t f = nid[k], g = nid[k + 1];
                if (row_of[f] < 0 || f == g)
                    continue;
                uint64_t key = ((uint64_t)f << 32) | g;
                uint32_t idx;
                if (!hp_map64_put(&pair, key, (uint32_t)npair, &idx)) {
                    pair_slope = hp_xgrow(pair_slope, &pair_cap, npair + 1, sizeof(*pair_slope));
                    pair_g = hp_xgrow(pair_g, &pg_cap, npair + 1, sizeof(*pair_g));
                    pair_f = hp_xgrow(pair_f, &pf_cap, npair + 1, sizeof(*pair_f));
                    pair_slope[npair] = 0;
                    pair_g[npair] = g;
                    pair_f[npair] = f;
                    npair++;
                }
                pair_slope[idx] += slope[s];
            }
        }
        for (size_t p = 0; p < npair; p++) {
            uint32_t f = pair_f[p], g = pair_g[p];
            if (pair_slope[p] >= 0.9 * fslope[f] && fslope[g] <= 1.1 * fslope[f] &&
                row_of[g] >= 0)
                L->funcs[row_of[f]].via = fn->name[g];
        }
        free(pair_slope);
        free(pair_g);
        free(pair_f);
        hp_map64_release(&pair);
    }

    hp_qsort(L->stacks, L->nstacks, sizeof(*L->stacks), leak_cmp);
    hp_qsort(L->funcs, L->nfuncs, sizeof(*L->funcs), leak_cmp);
    free(rs.rx);
    free(rs.ry);
    free(rs.tmp);
    free(series);
    free(acc);
    free(rep);
    free(row_of);
    free(cand);
    free(cand_of);
    free(fyt);
    free(fslope);
    free(slope);
    free(yt);
    free(x);
    free(total);
    free(busy);
    free(idle);
    free(ord);
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
    char a[40], b[40], c[40];
    for (size_t li = 0; li < n; li++) {
        const struct query_leaks *l = ls[li];
        if (li)
            hp_buf_puts(out, "\n");
        double hours = (double)(l->t1 - l->t0) / 3600.0;
        fmt_rate(v, l->total_rate, c, sizeof(c));
        hp_buf_printf(out, "Node %s: %zu snapshots over %.1f h; heap %s -> %s (%s, R^2 %.2f)\n",
                      l->node ? l->node : "(files)", l->npoints, hours,
                      qa_fmt(v, l->total_first, a, sizeof(a)),
                      qa_fmt(v, l->total_last, b, sizeof(b)), c, l->total_r2);
        if (!l->has_busy)
            hp_buf_puts(out, "Idle: unknown (no query/load tracker figures with these "
                             "snapshots)\n");
        else
            hp_buf_printf(out, "Idle: %zu of %zu steps had query and load trackers near zero\n",
                          l->idle_steps, l->steps);
        size_t shown = 0;
        for (size_t i = 0; i < l->nfuncs; i++)
            shown += l->funcs[i].via == NULL;
        if (!l->nfuncs && !l->nstacks) {
            hp_buf_puts(out, "No steadily growing stacks.\n");
            continue;
        }
        hp_buf_printf(out, "\n%14s %7s %6s %6s %12s %12s  %s\n", "growth", "share", "rising",
                      "rank-r", "first", "last", "function");
        size_t rows = 0;
        for (size_t i = 0; i < l->nfuncs && (!o->top || rows < o->top); i++) {
            const struct query_leak_row *r = &l->funcs[i];
            if (r->via)
                continue;
            fmt_rate(v, r->rate, c, sizeof(c));
            hp_buf_printf(out, "%14s %6.1f%% %5.0f%% %6.2f %12s %12s  %s%s\n", c,
                          100.0 * r->share, 100.0 * r->monotonic, r->spearman,
                          qa_fmt(v, r->first, a, sizeof(a)), qa_fmt(v, r->last, b, sizeof(b)),
                          r->name, r->idle_flag ? "  [grows while idle]" : "");
            rows++;
        }
        if (shown > rows)
            hp_buf_printf(out, "(%zu more functions; --top 0 shows all)\n", shown - rows);
        if (l->nfuncs > shown)
            hp_buf_printf(out, "(%zu pass-through callers folded into their callee)\n",
                          l->nfuncs - shown);
        hp_buf_printf(out, "\n%14s %7s %6s %6s %12s  %s\n", "growth", "share", "rising",
                      "rank-r", "last", "stack (leaf <- callers)");
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
        if (r->via)
            json_object_set_new(j, "via", json_string(query_utf8_clean(tmp, r->via)));
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
        json_t *jn = json_object();
        json_object_set_new(jn, "node", l->node ? json_string(query_utf8_clean(&tmp, l->node))
                                                : json_null());
        json_object_set_new(jn, "snapshots", json_integer((json_int_t)l->npoints));
        json_object_set_new(jn, "from", json_integer(l->t0));
        json_object_set_new(jn, "to", json_integer(l->t1));
        json_object_set_new(jn, "total_first", json_real(l->total_first));
        json_object_set_new(jn, "total_last", json_real(l->total_last));
        json_object_set_new(jn, "total_rate_per_hour", json_real(l->total_rate));
        json_object_set_new(jn, "idle_known", json_boolean(l->has_busy));
        json_object_set_new(jn, "idle_steps", json_integer((json_int_t)l->idle_steps));
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
