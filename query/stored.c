/* A node's stored snapshots for leaks as stack ids and values (stored.h).
 *
 * No profile is loaded: per snapshot, its samples as stored stack ids with
 * values (store_snapshots_samples), and per run of snapshots sharing a
 * layout (a process's lifetime, usually) the distinct stacks once, folded
 * into a dictionary (store_stacks_load, query_fold_map), so names are
 * resolved once per stack of a node rather than once per snapshot. The
 * answer is the folded path's, bit for bit (tests/query/test-stored.c
 * compares them): values are un-sampled and their variances computed
 * exactly as store_snapshot_load and query_fold compute them, and leaks
 * meets the stacks in the order the folded profiles would show them. */
#include "query/stored.h"
#include "query/query.h"
#include "store/store.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* One snapshot's all-threads samples, in stored order. */
struct idsnap {
    uint64_t layout, period;
    size_t n;
    uint32_t *ix;        /* per sample: its stack's index in the node */
    double *value, *var; /* the chosen value and its sampling variance */
};

/* What one node's snapshots are read into; released in one call. */
struct query_stored {
    struct hp_arena arena;
    enum profile_value v;
    struct idsnap *snaps;
    size_t n;
    /* The node's distinct stored stacks. */
    struct hp_map64 ix_of; /* stored stack id -> index */
    int64_t *stack_of;     /* index -> stored stack id */
    size_t nstacks, stacks_cap;
    /* The previous snapshot, by sample position: successive dumps of a node
     * list mostly the same stacks in the same order with the same counts,
     * so a sample equal to the one at its position before is looked up
     * and un-sampled no more. */
    struct prev_sample {
        uint32_t ix;
        int64_t raw[2]; /* the chosen value's pair */
        double value, var;
    } *prev;
    size_t nprev, prev_cap;
    int prev_scaling;
    uint64_t prev_period;
    /* Per stack index: the run (ids_run) that last met it, and its place
     * in that run's dictionary. */
    uint32_t *run_seen, *run_local;
    size_t run_cap;
    uint32_t run;
    struct query_folded **dicts;
    size_t ndicts, dicts_cap;
    /* trend (query_stored_trend_functions): the chosen functions' names
     * and values, nfunctions per snapshot. */
    const char **trend_names;
    double *trend_values;
};

static void stored_release(struct query_stored *nd)
{
    for (size_t i = 0; i < nd->ndicts; i++)
        query_folded_free(nd->dicts[i]);
    free(nd->dicts);
    free(nd->snaps);
    hp_map64_release(&nd->ix_of);
    free(nd->stack_of);
    free(nd->prev);
    free(nd->run_seen);
    free(nd->run_local);
    free(nd->trend_names);
    free(nd->trend_values);
    hp_arena_release(&nd->arena);
}

static int samples_cb(const struct store_samples *ss, void *ctx)
{
    struct query_stored *nd = ctx;
    const struct profile *p = ss->profile;
    struct idsnap *x = &nd->snaps[nd->n++];
    *x = (struct idsnap){ .layout = ss->layout, .period = p->period, .n = ss->n };
    x->ix = hp_arena_alloc(&nd->arena, (x->n + 1) * sizeof(*x->ix));
    x->value = hp_arena_alloc(&nd->arena, (x->n + 1) * sizeof(*x->value));
    x->var = hp_arena_alloc(&nd->arena, (x->n + 1) * sizeof(*x->var));
    bool same = nd->n > 1 && (int)p->scaling == nd->prev_scaling && p->period == nd->prev_period;
    size_t nprev = same ? nd->nprev : 0;
    nd->prev = hp_xgrow(nd->prev, &nd->prev_cap, x->n + 1, sizeof(*nd->prev));
    int pair = (int)nd->v & ~1; /* the pair (count, bytes) the value comes from */
    for (size_t i = 0; i < x->n; i++) {
        const struct store_sample *sm = &ss->samples[i];
        struct prev_sample *pv = &nd->prev[i];
        if (i < nprev && nd->stack_of[pv->ix] == sm->stack && pv->raw[0] == sm->raw[pair] &&
            pv->raw[1] == sm->raw[pair + 1]) {
            x->ix[i] = pv->ix;
            x->value[i] = pv->value;
            x->var[i] = pv->var;
            continue;
        }
        uint32_t ix;
        if (i < nprev && nd->stack_of[pv->ix] == sm->stack) {
            ix = pv->ix;
        } else if (hp_map64_put(&nd->ix_of, (uint64_t)sm->stack, (uint32_t)nd->nstacks, &ix) ==
                   0) {
            nd->stack_of = hp_xgrow(nd->stack_of, &nd->stacks_cap, nd->nstacks + 1,
                                    sizeof(*nd->stack_of));
            nd->stack_of[nd->nstacks++] = sm->stack;
        }
        /* Exactly what store_snapshot_load and query_fold compute, for
         * the chosen value only. */
        x->ix[i] = ix;
        query_sample_one(p, sm->raw, nd->v, &x->value[i], &x->var[i]);
        *pv = (struct prev_sample){ ix, { sm->raw[pair], sm->raw[pair + 1] }, x->value[i],
                                    x->var[i] };
    }
    nd->nprev = x->n;
    nd->prev_scaling = (int)p->scaling;
    nd->prev_period = p->period;
    return 0;
}

/* Snapshots idx[0..n) (consecutive in leaks' order) share a layout: their
 * distinct stacks, in order of first use, become one dictionary, folded as
 * their profiles would be, and each snapshot's samples become entries of it
 * (a sample the options drop is left out, as query_fold leaves it out).
 * Leaks then meets every stack in the order the folded profiles would show
 * it, which keeps its sums in the same order. */
static int ids_run(struct store *st, const struct query_opts *o, struct query_stored *nd,
                   struct query_snapshot *group, const size_t *idx, size_t nidx,
                   struct hp_buf *err)
{
    if (nd->run_cap < nd->nstacks + 1) {
        size_t old = nd->run_cap;
        nd->run_seen = hp_xgrow(nd->run_seen, &nd->run_cap, nd->nstacks + 1,
                                sizeof(*nd->run_seen));
        nd->run_local = hp_xrealloc(nd->run_local, nd->run_cap * sizeof(*nd->run_local));
        memset(nd->run_seen + old, 0, (nd->run_cap - old) * sizeof(*nd->run_seen));
    }
    uint32_t run = ++nd->run;
    int64_t *ids = hp_xmalloc((nd->nstacks + 1) * sizeof(*ids));
    size_t n = 0;
    for (size_t j = 0; j < nidx; j++) {
        const struct idsnap *x = &nd->snaps[idx[j]];
        for (size_t i = 0; i < x->n; i++) {
            uint32_t ix = x->ix[i];
            if (nd->run_seen[ix] != run) {
                nd->run_seen[ix] = run;
                nd->run_local[ix] = (uint32_t)n;
                ids[n++] = nd->stack_of[ix];
            }
        }
    }
    struct profile *p = NULL;
    struct query_folded *dict = NULL;
    int32_t *entry_of = NULL;
    int r = store_stacks_load(st, group[idx[0]].id, ids, n, &p, err);
    if (r == 0)
        r = query_fold_map(p, o, &dict, &entry_of, err);
    profile_free(p);
    free(ids);
    if (r < 0)
        return r;
    nd->dicts = hp_xgrow(nd->dicts, &nd->dicts_cap, nd->ndicts + 1, sizeof(*nd->dicts));
    nd->dicts[nd->ndicts++] = dict;
    for (size_t j = 0; j < nidx; j++) {
        struct idsnap *x = &nd->snaps[idx[j]];
        /* In place: entry k is written after sample i >= k was read. */
        size_t k = 0;
        for (size_t i = 0; i < x->n; i++) {
            int32_t e = entry_of[nd->run_local[x->ix[i]]];
            if (e < 0)
                continue;
            x->ix[k] = (uint32_t)e;
            x->value[k] = x->value[i];
            x->var[k++] = x->var[i];
        }
        struct query_snapshot *q = &group[idx[j]];
        q->dict = dict;
        q->ids = x->ix;
        q->id_values = x->value;
        q->id_vars = x->var;
        q->nids = k;
        q->id_period = x->period;
    }
    free(entry_of);
    return 0;
}

static int time_cmp(const void *a, const void *b, void *ctx)
{
    const struct query_snapshot *g = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (g[x].time_s != g[y].time_s)
        return g[x].time_s < g[y].time_s ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Read one node's stored snapshots (group) for leaks as dictionaries and
 * ids: in leaks' order (time, then position), one dictionary per run of
 * snapshots sharing a layout (a process's lifetime, usually: a restart
 * maps the binaries elsewhere). */
int query_stored_fill(struct store *st, const struct query_opts *o,
                      struct query_snapshot *group, size_t g, struct query_stored **ret,
                      struct hp_buf *err)
{
    struct query_stored *nd = hp_xcalloc(1, sizeof(*nd));
    hp_arena_init(&nd->arena);
    hp_map64_init(&nd->ix_of);
    nd->v = o->sample;
    nd->snaps = hp_xcalloc(g + 1, sizeof(*nd->snaps));
    int64_t *ids = hp_xmalloc((g + 1) * sizeof(*ids));
    size_t *ord = hp_xmalloc((g + 1) * sizeof(*ord));
    for (size_t t = 0; t < g; t++) {
        ids[t] = group[t].id;
        ord[t] = t;
    }
    int r = store_snapshots_samples(st, ids, g, samples_cb, nd, err);
    if (g > 1)
        qsort_r(ord, g, sizeof(*ord), time_cmp, group);
    for (size_t a = 0, b; r == 0 && a < g; a = b) {
        for (b = a + 1; b < g && nd->snaps[ord[b]].layout == nd->snaps[ord[a]].layout; b++)
            ;
        r = ids_run(st, o, nd, group, ord + a, b - a, err);
    }
    free(ord);
    free(ids);
    if (r < 0) {
        query_stored_free(nd);
        return r;
    }
    *ret = nd;
    return 0;
}

void query_stored_free(struct query_stored *nd)
{
    if (!nd)
        return;
    stored_release(nd);
    free(nd);
}

/* ---- trend's function columns from the store's function totals ---- */

bool query_stored_trend_ok(const struct query_opts *o)
{
    return (o->sample == PV_INUSE_SPACE || o->sample == PV_INUSE_OBJECTS) && !o->no_inline &&
           !o->keep_allocator && !o->with_lines && !(o->focus && *o->focus) &&
           !(o->ignore && *o->ignore);
}

/* A candidate function and what ranks it. */
struct tcand {
    int64_t id;
    const char *name; /* in the arena */
    double key;
};

struct tpick {
    struct hp_arena *arena;
    regex_t *re;
    enum profile_value v;
    struct hp_map64 of; /* function id -> index in c */
    struct tcand *c;
    size_t n, cap;
};

static struct tcand *tcand_get(struct tpick *tp, int64_t id, const char *name)
{
    uint32_t k;
    if (hp_map64_put(&tp->of, (uint64_t)id, (uint32_t)tp->n, &k) == 0) {
        tp->c = hp_xgrow(tp->c, &tp->cap, tp->n + 1, sizeof(*tp->c));
        tp->c[tp->n++] = (struct tcand){ id, hp_arena_strdup(tp->arena, name), 0 };
    }
    return &tp->c[k];
}

static int match_cb(int64_t id, const char *name, void *ctx)
{
    struct tpick *tp = ctx;
    if (regexec(tp->re, name, 0, NULL, 0) == 0)
        (void)tcand_get(tp, id, name);
    return 0;
}

static double point_value(const struct store_function_point *pt, enum profile_value v)
{
    return (double)(v == PV_INUSE_OBJECTS ? pt->cum_objects : pt->cum_space);
}

static int newest_cb(const struct store_function_total *row, void *ctx)
{
    struct tpick *tp = ctx;
    int64_t x = tp->v == PV_INUSE_OBJECTS ? row->cum_objects : row->cum_space;
    tcand_get(tp, row->function_id, row->name)->key += (double)x;
    return 0;
}

static int tcand_cmp(const void *a, const void *b)
{
    const struct tcand *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* One node of the snapshots: its id and time window. */
struct tnode {
    const char *name;
    int64_t id, since_ms, until_ms, newest_snap, newest_s;
};

/* The functions' series come from one pass over a node's snapshots
 * (store_series_functions): a function without a row in a snapshot is
 * looked up in its packed rest, and a pass decompresses that once per
 * snapshot for all the functions, where a series each did it once per
 * function (trend --fleet over 100 nodes x 720 snapshots: 17 s, most of
 * it decompressing the same blobs five times). */
struct pass_ctx {
    const struct hp_map64 *row_of;
    enum profile_value v;
    struct tcand *c;     /* the functions, ascending ids */
    size_t n;
    double *values;      /* NULL: maxima only, into c[].key */
    size_t stride;
    const uint32_t *col; /* per function: its column in values */
};

static int pass_cb(const struct store_function_point *pts, size_t nf, void *ctx)
{
    struct pass_ctx *pc = ctx;
    uint32_t row;
    if (!nf || !hp_map64_get(pc->row_of, (uint64_t)pts[0].snapshot_id, &row))
        return 0;
    for (size_t j = 0; j < nf; j++) {
        double x = point_value(&pts[j], pc->v);
        if (pc->values)
            pc->values[(size_t)row * pc->stride + pc->col[j]] = x;
        else
            pc->c[j].key = HP_MAX(pc->c[j].key, x);
    }
    return 0;
}

static int tcand_id_cmp(const void *a, const void *b)
{
    const struct tcand *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The series of functions c[0..n) on every node: their largest values
 * into c[].key when values is NULL, else function j's into column j. */
static int fill_columns(struct store *st, const struct tnode *nodes, size_t nn,
                        const struct hp_map64 *row_of, struct tcand *c, size_t n,
                        enum profile_value v, double *values, struct hp_buf *err)
{
    if (!n)
        return 0;
    /* By ascending id, as the pass wants them; columns stay in c's order. */
    struct tcand *byid = hp_xmalloc(n * sizeof(*byid));
    uint32_t *col = hp_xmalloc(n * sizeof(*col));
    int64_t *fids = hp_xmalloc(n * sizeof(*fids));
    memcpy(byid, c, n * sizeof(*byid));
    for (size_t j = 0; j < n; j++)
        byid[j].key = (double)j; /* its column, carried through the sort */
    hp_qsort(byid, n, sizeof(*byid), tcand_id_cmp);
    for (size_t j = 0; j < n; j++) {
        col[j] = (uint32_t)byid[j].key;
        byid[j].key = 0;
        fids[j] = byid[j].id;
    }
    struct pass_ctx pc = { row_of, v, byid, n, values, n, col };
    int r = 0;
    for (size_t k = 0; k < nn && r >= 0; k++)
        r = store_series_functions(st, nodes[k].id, nodes[k].since_ms, nodes[k].until_ms, fids,
                                   n, pass_cb, &pc, err);
    if (!values)
        for (size_t j = 0; j < n; j++)
            c[col[j]].key = byid[j].key;
    free(fids);
    free(col);
    free(byid);
    return r < 0 ? r : 0;
}

int query_stored_trend_functions(struct store *st, const struct query_opts *o,
                                 const struct query_snapshot *snaps, size_t n,
                                 struct query_trend_opts *t, struct query_stored **ret,
                                 struct hp_buf *err)
{
    struct query_stored *nd = hp_xcalloc(1, sizeof(*nd));
    hp_arena_init(&nd->arena);
    hp_map64_init(&nd->ix_of);
    struct tpick tp = { .arena = &nd->arena, .v = o->sample };
    hp_map64_init(&tp.of);
    struct hp_map64 row_of;
    hp_map64_init(&row_of);
    struct tnode *nodes = hp_xcalloc(n + 1, sizeof(*nodes));
    size_t nn = 0;
    regex_t re;
    bool has_re = t->function && *t->function;
    int r = 0;
    if (has_re) {
        int rc = regcomp(&re, t->function, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &re, msg, sizeof(msg));
            hp_err_printf(err, "--function \"%s\": invalid regular expression: %s",
                          t->function, msg);
            has_re = false;
            r = HP_EUSAGE;
            goto out;
        }
        tp.re = &re;
    }
    /* The nodes, each with the window of its snapshots and its newest. */
    for (size_t i = 0; i < n; i++) {
        uint32_t old;
        (void)hp_map64_put(&row_of, (uint64_t)snaps[i].id, (uint32_t)i, &old);
        /* A node's snapshots mostly come together: its own first. */
        size_t k = nn && strcmp(nodes[nn - 1].name, snaps[i].node) == 0 ? nn - 1 : 0;
        for (; k < nn; k++)
            if (strcmp(nodes[k].name, snaps[i].node) == 0)
                break;
        int64_t ms = snaps[i].time_s * 1000;
        if (k == nn) {
            nodes[nn++] = (struct tnode){ snaps[i].node, 0, ms, ms + 999, snaps[i].id,
                                          snaps[i].time_s };
            if ((r = store_node_find(st, snaps[i].node, &nodes[k].id, err)) < 0)
                goto out;
            continue;
        }
        nodes[k].since_ms = HP_MIN(nodes[k].since_ms, ms);
        nodes[k].until_ms = HP_MAX(nodes[k].until_ms, ms + 999);
        if (snaps[i].time_s >= nodes[k].newest_s) {
            nodes[k].newest_s = snaps[i].time_s;
            nodes[k].newest_snap = snaps[i].id;
        }
    }
    size_t maxf = t->max_functions ? t->max_functions : has_re ? 50 : 5;
    if (has_re) {
        /* Every function the expression matches, ranked by its largest
         * value in the window; those that never hold anything there are
         * not in these profiles. */
        if ((r = store_functions_list(st, match_cb, &tp, err)) < 0 ||
            (r = fill_columns(st, nodes, nn, &row_of, tp.c, tp.n, o->sample, NULL, err)) < 0)
            goto out;
        size_t keep = 0;
        for (size_t c = 0; c < tp.n; c++)
            if (tp.c[c].key > 0)
                tp.c[keep++] = tp.c[c];
        tp.n = keep;
    } else {
        for (size_t k = 0; k < nn; k++)
            if ((r = store_function_totals(st, nodes[k].newest_snap, newest_cb, &tp, err)) < 0)
                goto out;
    }
    hp_qsort(tp.c, tp.n, sizeof(*tp.c), tcand_cmp);
    size_t nf = HP_MIN(tp.n, maxf);
    nd->trend_names = hp_xcalloc(nf + 1, sizeof(*nd->trend_names));
    nd->trend_values = hp_xmalloc((n * nf + 1) * sizeof(*nd->trend_values));
    for (size_t i = 0; i < n * nf; i++)
        nd->trend_values[i] = NAN; /* a snapshot no series gave */
    for (size_t j = 0; j < nf; j++)
        nd->trend_names[j] = tp.c[j].name;
    if ((r = fill_columns(st, nodes, nn, &row_of, tp.c, nf, o->sample, nd->trend_values, err)) <
        0)
        goto out;
    t->functions_given = true;
    t->names = nd->trend_names;
    t->values = nd->trend_values;
    t->nfunctions = nf;
out:
    if (has_re)
        regfree(&re);
    free(nodes);
    free(tp.c);
    hp_map64_release(&tp.of);
    hp_map64_release(&row_of);
    if (r < 0) {
        query_stored_free(nd);
        return r;
    }
    *ret = nd;
    return 0;
}
