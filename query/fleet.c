/* fleet: every node's latest snapshot against the others.
 *
 * For the heap total, each function (cumulative bytes) and each stack, the
 * values across nodes (0 where a node lacks it) give a median and a median
 * absolute deviation; a node is far above when its value is at least
 * min_ratio x the median, exceeds it by min_bytes, and by mad_k robust
 * standard deviations (1.4826 x MAD). Medians and MADs come from
 * quickselect, so 1,000 nodes x thousands of functions stay well under a
 * second. */
#include "query/analysis-internal.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void query_fleet_opts_init(struct query_fleet_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sample = PV_INUSE_SPACE;
    o->min_ratio = 2.0;
    o->min_bytes = 64.0 * 1024 * 1024;
    o->mad_k = 3.0;
    o->stacks = true;
    o->top = 0;
}

struct fleet_priv {
    struct qa_stacks stacks;
    struct qa_funcs funcs;
};

struct row_sink {
    struct query_fleet_row *v;
    size_t n, cap;
};

/* Values of one row across nodes -> outlier rows. scratch holds n doubles. */
static void judge(const double *vals, size_t n, const struct query_snapshot *snaps,
                  const struct query_fleet_opts *o, double *scratch, const char *name,
                  const char *const *frames, uint32_t nframes, struct row_sink *out,
                  double *ret_median)
{
    size_t with = 0;
    double maxv = 0;
    for (size_t i = 0; i < n; i++) {
        scratch[i] = vals[i];
        with += vals[i] != 0;
        if (vals[i] > maxv)
            maxv = vals[i];
    }
    double med = qa_median(scratch, n);
    if (ret_median)
        *ret_median = med;
    /* Cheap exit: nothing can be far above. */
    if (maxv - med < o->min_bytes || maxv < o->min_ratio * med)
        return;
    for (size_t i = 0; i < n; i++)
        scratch[i] = fabs(vals[i] - med);
    double mad = qa_median(scratch, n);
    for (size_t i = 0; i < n; i++) {
        double x = vals[i], ex = x - med;
        if (ex < o->min_bytes || x < o->min_ratio * med || ex < o->mad_k * 1.4826 * mad)
            continue;
        out->v = hp_xgrow(out->v, &out->cap, out->n + 1, sizeof(*out->v));
        out->v[out->n++] = (struct query_fleet_row){ .name = name,
                                                     .frames = frames,
                                                     .nframes = nframes,
                                                     .node = snaps[i].node,
                                                     .value = x,
                                                     .median = med,
                                                     .mad = mad,
                                                     .nodes_with = with };
    }
}

static int excess_cmp(const void *a, const void *b)
{
    const struct query_fleet_row *x = a, *y = b;
    double ex = x->value - x->median, ey = y->value - y->median;
    if (ex != ey)
        return ex < ey ? 1 : -1;
    return 0;
}

struct fleet_trip {
    uint32_t id, node;
    double v;
};

struct query_fleet_acc {
    struct query_fleet *F;
    struct fleet_trip *trips;
    size_t ntrips, cap;
    double *totals;
    size_t n;
    enum profile_value v;
};

struct query_fleet_acc *query_fleet_begin(size_t n, const struct query_fleet_opts *o)
{
    struct query_fleet_acc *acc = hp_xcalloc(1, sizeof(*acc));
    acc->F = hp_xcalloc(1, sizeof(*acc->F));
    struct fleet_priv *pv = hp_xcalloc(1, sizeof(*pv));
    acc->F->priv = pv;
    acc->F->nnodes = n;
    qa_stacks_init(&pv->stacks);
    acc->totals = hp_xcalloc(n + 1, sizeof(*acc->totals));
    acc->n = n;
    acc->v = o->sample;
    return acc;
}

void query_fleet_add(struct query_fleet_acc *acc, size_t i, const struct query_folded *f)
{
    struct fleet_priv *pv = acc->F->priv;
    acc->totals[i] = f->total[acc->v];
    acc->trips = hp_xgrow(acc->trips, &acc->cap, acc->ntrips + f->nentries, sizeof(*acc->trips));
    for (size_t e = 0; e < f->nentries; e++)
        acc->trips[acc->ntrips++] = (struct fleet_trip){
            qa_stacks_add_entry(&pv->stacks, f, &f->entries[e]), (uint32_t)i,
            f->entries[e].value[acc->v]
        };
    /* Nothing of f is kept: the caller may free it now. */
    qa_stacks_forget_source(&pv->stacks);
}

void query_fleet_acc_free(struct query_fleet_acc *acc)
{
    if (!acc)
        return;
    query_fleet_free(acc->F);
    free(acc->trips);
    free(acc->totals);
    free(acc);
}

int query_fleet_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_fleet_opts *o, struct query_fleet **ret,
                      struct hp_buf *err)
{
    for (size_t i = 0; i < n; i++)
        if (!snaps[i].folded) {
            hp_err_printf(err, "fleet: node %s has no heap profile",
                          snaps[i].node ? snaps[i].node : "?");
            return HP_EUSAGE;
        }
    struct query_fleet_acc *acc = query_fleet_begin(n, o);
    for (size_t i = 0; i < n; i++)
        query_fleet_add(acc, i, snaps[i].folded);
    return query_fleet_finish(acc, snaps, n, o, ret, err);
}

int query_fleet_finish(struct query_fleet_acc *acc, const struct query_snapshot *snaps, size_t n,
                       const struct query_fleet_opts *o, struct query_fleet **ret,
                       struct hp_buf *err)
{
    if (n > acc->n)
        n = acc->n;
    acc->F->nnodes = n;
    if (n < 3) {
        hp_err_printf(err, "fleet: %zu nodes; a fleet median needs at least 3", n);
        query_fleet_acc_free(acc);
        return HP_EUSAGE;
    }
    struct query_fleet *F = acc->F;
    struct fleet_priv *pv = F->priv;
    struct fleet_trip *trips = acc->trips;
    size_t ntrips = acc->ntrips;
    double *totals = acc->totals;
    free(acc);
    double *scratch = hp_xmalloc(n * sizeof(*scratch));
    struct row_sink sink = { 0 };
    judge(totals, n, snaps, o, scratch, "heap total", NULL, 0, &sink, &F->total_median);
    F->totals = sink.v;
    F->ntotals = sink.n;
    memset(&sink, 0, sizeof(sink));

    qa_funcs_build(&pv->funcs, &pv->stacks);
    struct qa_funcs *fn = &pv->funcs;
    size_t nf = fn->n;
    double *m = hp_xcalloc(nf * n + 1, sizeof(*m));
    for (size_t k = 0; k < ntrips; k++) {
        uint32_t s = trips[k].id;
        for (uint32_t j = fn->stack_off[s]; j < fn->stack_off[s + 1]; j++)
            m[(size_t)fn->ids[j] * n + trips[k].node] += trips[k].v;
    }
    for (size_t f = 0; f < nf; f++)
        judge(m + f * n, n, snaps, o, scratch, fn->name[f], NULL, 0, &sink, NULL);
    free(m);
    F->funcs = sink.v;
    F->nfuncs = sink.n;
    memset(&sink, 0, sizeof(sink));

    size_t ns = pv->stacks.n;
    if (o->stacks && ns * n <= (size_t)64 << 20) {
        double *ms = hp_xcalloc(ns * n + 1, sizeof(*ms));
        for (size_t k = 0; k < ntrips; k++)
            ms[(size_t)trips[k].id * n + trips[k].node] += trips[k].v;
        for (size_t s = 0; s < ns; s++) {
            const char *const *frames = qa_stack_frames(&pv->stacks, (uint32_t)s);
            uint32_t nfr = pv->stacks.v[s].n;
            judge(ms + s * n, n, snaps, o, scratch, nfr ? frames[nfr - 1] : "", frames, nfr,
                  &sink, NULL);
        }
        free(ms);
    }
    F->stacks = sink.v;
    F->nstacks = sink.n;
    hp_qsort(F->totals, F->ntotals, sizeof(*F->totals), excess_cmp);
    hp_qsort(F->funcs, F->nfuncs, sizeof(*F->funcs), excess_cmp);
    hp_qsort(F->stacks, F->nstacks, sizeof(*F->stacks), excess_cmp);
    free(scratch);
    free(totals);
    free(trips);
    *ret = F;
    return 0;
}

void query_fleet_free(struct query_fleet *f)
{
    if (!f)
        return;
    struct fleet_priv *pv = f->priv;
    if (pv) {
        qa_funcs_release(&pv->funcs);
        qa_stacks_release(&pv->stacks);
        free(pv);
    }
    free(f->totals);
    free(f->funcs);
    free(f->stacks);
    free(f);
}

static void sentence(struct hp_buf *out, const struct query_fleet_row *r, size_t nnodes,
                     enum profile_value v, const char *what)
{
    char a[40], b[40];
    hp_buf_printf(out, "%s holds %s in %s against a fleet median of %s", r->node,
                  qa_fmt(v, r->value, a, sizeof(a)), what, qa_fmt(v, r->median, b, sizeof(b)));
    if (r->median > 0)
        hp_buf_printf(out, " (%.1fx", r->value / r->median);
    else
        hp_buf_puts(out, " (");
    hp_buf_printf(out, "%s%zu of %zu nodes have it)\n", r->median > 0 ? "; " : "", r->nodes_with,
                  nnodes);
}

int query_render_fleet_text(const struct query_fleet *f, const struct query_fleet_opts *o,
                            struct hp_buf *out)
{
    enum profile_value v = o->sample;
    char a[40];
    hp_buf_printf(out, "Fleet: %zu nodes, median heap total %s (%s)\n", f->nnodes,
                  qa_fmt(v, f->total_median, a, sizeof(a)), profile_value_name(v));
    hp_buf_printf(out, "Far above: >= %.1fx the median, and by >= %s and >= %.1f robust "
                       "standard deviations\n\n",
                  o->min_ratio, qa_fmt(v, o->min_bytes, a, sizeof(a)), o->mad_k);
    if (!f->ntotals && !f->nfuncs && !f->nstacks) {
        hp_buf_puts(out, "No node stands out.\n");
        return 0;
    }
    for (size_t i = 0; i < f->ntotals; i++)
        sentence(out, &f->totals[i], f->nnodes, v, "its heap");
    if (f->ntotals)
        hp_buf_puts(out, "\n");
    size_t rows = o->top ? HP_MIN(o->top, f->nfuncs) : f->nfuncs;
    for (size_t i = 0; i < rows; i++)
        sentence(out, &f->funcs[i], f->nnodes, v, f->funcs[i].name);
    if (rows < f->nfuncs)
        hp_buf_printf(out, "(%zu more function rows; --top 0 shows all)\n", f->nfuncs - rows);
    rows = o->top ? HP_MIN(o->top, f->nstacks) : f->nstacks;
    if (rows)
        hp_buf_puts(out, "\nStacks:\n");
    for (size_t i = 0; i < rows; i++) {
        const struct query_fleet_row *r = &f->stacks[i];
        char b[40];
        hp_buf_printf(out, "%s %s (median %s): ", r->node, qa_fmt(v, r->value, a, sizeof(a)),
                      qa_fmt(v, r->median, b, sizeof(b)));
        qa_stack_label(out, r->frames, r->nframes, 8);
        hp_buf_puts(out, "\n");
    }
    if (rows < f->nstacks)
        hp_buf_printf(out, "(%zu more stack rows; --top 0 shows all)\n", f->nstacks - rows);
    return 0;
}

static json_t *fleet_row_json(struct hp_arena *tmp, const struct query_fleet_row *r)
{
    json_t *j = json_object();
    json_object_set_new(j, "node", json_string(query_utf8_clean(tmp, r->node ? r->node : "")));
    if (r->frames) {
        json_t *fr = json_array();
        for (uint32_t k = 0; k < r->nframes; k++)
            json_array_append_new(fr, json_string(query_utf8_clean(tmp, r->frames[k])));
        json_object_set_new(j, "frames", fr);
    } else {
        json_object_set_new(j, "name", json_string(query_utf8_clean(tmp, r->name)));
    }
    json_object_set_new(j, "value", json_real(r->value));
    json_object_set_new(j, "median", json_real(r->median));
    json_object_set_new(j, "mad", json_real(r->mad));
    json_object_set_new(j, "nodes_with", json_integer((json_int_t)r->nodes_with));
    return j;
}

int query_render_fleet_json(const struct query_fleet *f, const struct query_fleet_opts *o,
                            struct hp_buf *out)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *root = json_object();
    json_object_set_new(root, "sample", json_string(profile_value_name(o->sample)));
    json_object_set_new(root, "nodes", json_integer((json_int_t)f->nnodes));
    json_object_set_new(root, "median_total", json_real(f->total_median));
    const struct {
        const char *key;
        const struct query_fleet_row *v;
        size_t n;
    } lists[] = { { "totals", f->totals, f->ntotals },
                  { "functions", f->funcs, f->nfuncs },
                  { "stacks", f->stacks, f->nstacks } };
    for (size_t l = 0; l < HP_ARRAY_SIZE(lists); l++) {
        json_t *a = json_array();
        size_t rows = o->top ? HP_MIN(o->top, lists[l].n) : lists[l].n;
        for (size_t i = 0; i < rows; i++)
            json_array_append_new(a, fleet_row_json(&tmp, &lists[l].v[i]));
        json_object_set_new(root, lists[l].key, a);
    }
    int r = qa_json_emit(root, out);
    hp_arena_release(&tmp); /* after: names may point into it */
    return r;
}
