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
