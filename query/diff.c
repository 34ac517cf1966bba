/* diff: B minus A over the union of both sides' stacks, at function and
 * stack level, with the sampling noise of every delta.
 *
 * Numbers are jeprof's: each side is un-sampled per stack first (as the
 * parsers did) and then subtracted stack by stack, which is what
 * `jeprof --base=A B` does (SubtractProfile after AdjustSamples). Function
 * rows are flat (leaf) and cumulative (once per stack) sums over the union.
 *
 * Noise: every stack's un-sampled value carries a variance (fold.c sums
 * query_sample_variance over the records merged into an entry); the two
 * sides are treated as independent, so var(delta) = var(a) + var(b). A stack
 * present on one side only gets a floor for the missing side: the variance of
 * one allocation of the stack's average size in that side's sampling
 * (INTERNALS.md §3 explains both choices). */
#include "query/analysis-internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Recorded samples behind an already un-sampled pprof row: Go (and pprof
 * producers modelled on it) record an allocation of `avg` bytes with
 * probability 1 - exp(-avg/period) and write count and bytes divided by
 * that probability (runtime/pprof scaleHeapSample), which is what go tool
 * pprof shows. Returns that probability. */
static double pprof_record_prob(uint64_t period, double avg)
{
    if (period <= 1 || !(avg > 0))
        return 1.0;
    return -expm1(-avg / (double)period);
}

/* The variance of one (count, bytes) pair: raw c, b; un-sampled values vc,
 * vb; scale the pair's profile_scale_factor (unused for pprof). What
 * query_sample_variance and query_sample_one share, so that both give the
 * same bits. */
static void pair_variance(const struct profile *p, int64_t c, int64_t b, double vc, double vb,
                          double scale, double ret[2])
{
    ret[0] = ret[1] = 0;
    if (c <= 0 || b <= 0)
        return;
    double q, recorded = (double)c;
    if (p->scaling == PROFILE_SCALING_NONE) {
        /* A pprof file states its period; its values are un-sampled
         * already (period 1, or none stated: every allocation). */
        q = pprof_record_prob(p->period, vb / vc);
        recorded = HP_MAX(1.0, vc * q);
    } else {
        q = scale > 1.0 ? 1.0 / scale : 1.0;
    }
    if (q >= 1.0)
        return;
    /* Binomial thinning: each of the N real allocations was recorded
     * with probability q; N^ = c/q has variance N(1-q)/q, estimated by
     * c(1-q)/q^2 = N^^2 (1-q)/c with c the recorded count. Bytes scale
     * with it. */
    ret[0] = vc * vc * (1.0 - q) / recorded;
    ret[1] = vb * vb * (1.0 - q) / recorded;
}

void query_sample_variance(const struct profile *p, const struct profile_sample *s,
                           double ret[PV_COUNT])
{
    for (int pair = 0; pair < PV_COUNT; pair += 2) {
        int64_t c = s->raw[pair], b = s->raw[pair + 1];
        double scale = p->scaling == PROFILE_SCALING_NONE || c <= 0 || b <= 0
                           ? 1.0
                           : profile_scale_factor(p->scaling, p->period, c, b);
        pair_variance(p, c, b, s->value[pair], s->value[pair + 1], scale, ret + pair);
    }
}

void query_sample_one(const struct profile *p, const int64_t raw[PV_COUNT], enum profile_value v,
                      double *ret_value, double *ret_var)
{
    int pair = (int)v & ~1;
    int64_t c = raw[pair], b = raw[pair + 1];
    /* profile_sample_unsample's factor; the variance's scale is the same
     * call with the same arguments, so it is computed once. */
    double f = profile_scale_factor(p->scaling, p->period, c, b);
    double vc = (double)c * f, vb = (double)b * f, var[2];
    pair_variance(p, c, b, vc, vb, f, var);
    *ret_value = (int)v == pair ? vc : vb;
    *ret_var = var[(int)v - pair];
}

double query_absent_variance(enum profile_scaling scaling, uint64_t period, double avg_size,
                             bool bytes)
{
    if (period <= 1 || !(avg_size > 0))
        return 0;
    if (scaling == PROFILE_SCALING_NONE) {
        /* pprof: one allocation of avg_size, un-sampled by its producer. */
        double q = pprof_record_prob(period, avg_size);
        double v = (bytes ? avg_size : 1.0) / q;
        return v * v * (1.0 - q);
    }
    int64_t sz = avg_size > 9e18 ? INT64_MAX : (int64_t)ceil(avg_size);
    double scale = profile_scale_factor(scaling, period, 1, sz);
    if (scale <= 1.0)
        return 0;
    double q = 1.0 / scale;
    double v = (bytes ? avg_size : 1.0) * scale;
    return v * v * (1.0 - q);
}

void query_diff_opts_init(struct query_diff_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->sample = PV_INUSE_SPACE;
    o->noise_sigmas = 2.0;
}

struct diff_priv {
    struct qa_stacks stacks;
    struct qa_funcs funcs;
};

struct side_val {
    double v, var;          /* value and variance of the chosen sample */
    double count_v, bytes_v; /* the pair's count and bytes, for the average size */
    bool present;
};

static double absent_floor(const struct query_folded *missing, const struct side_val *other,
                           enum profile_value v)
{
    if (!other->present || other->count_v <= 0)
        return 0;
    /* The chance that one allocation was recorded depends on its size, for
     * the objects sample too. */
    double avg = other->bytes_v / other->count_v;
    return query_absent_variance(missing->scaling, missing->period, avg, qa_is_bytes(v));
}

static void mark(struct query_diff_row *r, double k, bool normalize, double at, double bt)
{
    double da = r->a, db = r->b, dac = r->a_cum, dbc = r->b_cum;
    double va = r->var_a, vb = r->var_b, vac = r->var_a_cum, vbc = r->var_b_cum;
    if (normalize) {
        /* Shares; the totals' own noise is small next to a row's and is
         * left out (INTERNALS.md §3.4). */
        double ia = at ? 1.0 / at : 0, ib = bt ? 1.0 / bt : 0;
        da *= ia, dac *= ia, db *= ib, dbc *= ib;
        va *= ia * ia, vac *= ia * ia, vb *= ib * ib, vbc *= ib * ib;
    }
    r->delta = db - da;
    r->delta_cum = dbc - dac;
    r->sigma = sqrt(va + vb);
    r->sigma_cum = sqrt(vac + vbc);
    /* No change is never beyond noise; with no noise (every allocation
     * recorded) any other change is real. */
    r->noise = r->delta == 0 || fabs(r->delta) < k * r->sigma;
    r->noise_cum = r->delta_cum == 0 || fabs(r->delta_cum) < k * r->sigma_cum;
}

/* Rows in row order: |delta| descending, then |delta_cum| descending, then
 * name, then (qsort's merge sort being stable) their place. Sorting the
 * rows themselves with qsort cost a third of the diff (merge passes moving
 * 128-byte rows, over fresh pages); instead |delta| is radix sorted (its
 * IEEE bits order as integers: it is >= 0), only runs of equal |delta|
 * meet the full comparison, and each row then moves once, in place. */
struct row_key {
    double delta, delta_cum;
    const char *name;
    size_t i;
};

static int row_key_cmp(const void *x, const void *y)
{
    const struct row_key *a = x, *b = y;
    if (a->delta != b->delta)
        return a->delta < b->delta ? 1 : -1;
    if (a->delta_cum != b->delta_cum)
        return a->delta_cum < b->delta_cum ? 1 : -1;
    if (a->name && b->name) {
        int c = strcmp(a->name, b->name);
        if (c)
            return c;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

static void rows_sort(struct query_diff_row *rows, size_t n)
{
    if (n < 2)
        return;
    /* ~bits of |delta|: ascending keys, descending |delta| */
    struct hp_sort_item *v = hp_xmalloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        double x = fabs(rows[i].delta);
        uint64_t bits;
        memcpy(&bits, &x, sizeof(bits));
        v[i] = (struct hp_sort_item){ ~bits, i };
    }
    hp_radix_sort(v, n);
    /* Equal |delta|: the rest of the order. */
    struct row_key *run = NULL;
    size_t run_cap = 0;
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && v[b].key == v[a].key; b++)
            ;
        if (b - a < 2)
            continue;
        run = hp_xgrow(run, &run_cap, b - a, sizeof(*run));
        for (size_t j = a; j < b; j++) {
            const struct query_diff_row *r = &rows[v[j].i];
            run[j - a] = (struct row_key){ fabs(r->delta), fabs(r->delta_cum), r->name, v[j].i };
        }
        qsort(run, b - a, sizeof(*run), row_key_cmp);
        for (size_t j = a; j < b; j++)
            v[j].i = run[j - a].i;
    }
    free(run);
    /* Place in place, cycle by cycle (v[i].i: the row that goes to i; a
     * placed slot is marked with its own index). */
    for (size_t i = 0; i < n; i++) {
        if (v[i].i == i)
            continue;
        struct query_diff_row keep = rows[i];
        size_t j = i;
        while (v[j].i != i) {
            size_t from = v[j].i;
            rows[j] = rows[from];
            v[j].i = j;
            j = from;
        }
        rows[j] = keep;
        v[j].i = j;
    }
    free(v);
}

int query_diff_build(const struct query_folded *a, const struct query_folded *b,
                     const struct query_diff_opts *o, struct query_diff **ret)
{
    if ((unsigned)o->sample >= PV_COUNT || !(o->noise_sigmas >= 0))
        return HP_EUSAGE;
    enum profile_value v = o->sample;
    int cv = (int)v & ~1; /* the count of v's pair */
    struct query_diff *d = hp_xcalloc(1, sizeof(*d));
    struct diff_priv *pv = hp_xcalloc(1, sizeof(*pv));
    d->priv = pv;
    d->opts = *o;
    qa_stacks_init(&pv->stacks);
    qa_stacks_reserve(&pv->stacks, a->nentries + b->nentries, a->nnames + b->nnames);

    /* Union of stacks: ids from A first, then B's new ones. */
    size_t cap = a->nentries + b->nentries + 1;
    struct side_val *sa = hp_xcalloc(cap, sizeof(*sa));
    struct side_val *sb = hp_xcalloc(cap, sizeof(*sb));
    const struct query_folded *sides[2] = { a, b };
    struct side_val *vals[2] = { sa, sb };
    for (int side = 0; side < 2; side++) {
        const struct query_folded *f = sides[side];
        for (size_t i = 0; i < f->nentries; i++) {
            const struct query_fold_entry *e = &f->entries[i];
            uint32_t id = qa_stacks_add_entry(&pv->stacks, f, e);
            struct side_val *sv = &vals[side][id];
            sv->v += e->value[v];
            sv->var += e->var[v];
            sv->count_v += e->value[cv];
            sv->bytes_v += e->value[cv + 1];
            sv->present = true;
        }
    }
    size_t ns = pv->stacks.n;

    /* Floors for stacks missing on one side. */
    for (size_t i = 0; i < ns; i++) {
        if (!sa[i].present)
            sa[i].var = absent_floor(a, &sb[i], v);
        if (!sb[i].present)
            sb[i].var = absent_floor(b, &sa[i], v);
    }

    d->a_total = a->total[v];
    d->b_total = b->total[v];
    d->stacks = hp_xcalloc(ns + 1, sizeof(*d->stacks));
    d->nstacks = ns;
    for (size_t i = 0; i < ns; i++) {
        struct query_diff_row *r = &d->stacks[i];
        r->frames = qa_stack_frames(&pv->stacks, (uint32_t)i);
        r->nframes = pv->stacks.v[i].n;
        r->name = r->nframes ? r->frames[r->nframes - 1] : "";
        r->a = r->a_cum = sa[i].v;
        r->b = r->b_cum = sb[i].v;
        r->var_a = r->var_a_cum = sa[i].var;
        r->var_b = r->var_b_cum = sb[i].var;
        d->var_a_total += sa[i].var;
        d->var_b_total += sb[i].var;
        mark(r, o->noise_sigmas, o->normalize, d->a_total, d->b_total);
    }

    /* Functions. */
    qa_funcs_build(&pv->funcs, &pv->stacks);
    struct qa_funcs *fn = &pv->funcs;
    d->funcs = hp_xcalloc(fn->n + 1, sizeof(*d->funcs));
    d->nfuncs = fn->n;
    for (size_t i = 0; i < fn->n; i++)
        d->funcs[i].name = fn->name[i];
    for (size_t si = 0; si < ns; si++) {
        for (uint32_t k = fn->stack_off[si]; k < fn->stack_off[si + 1]; k++) {
            struct query_diff_row *r = &d->funcs[fn->ids[k]];
            r->a_cum += sa[si].v;
            r->b_cum += sb[si].v;
            r->var_a_cum += sa[si].var;
            r->var_b_cum += sb[si].var;
        }
        if (fn->leaf[si] != UINT32_MAX) {
            struct query_diff_row *r = &d->funcs[fn->leaf[si]];
            r->a += sa[si].v;
            r->b += sb[si].v;
            r->var_a += sa[si].var;
            r->var_b += sb[si].var;
        }
    }
    for (size_t i = 0; i < fn->n; i++)
        mark(&d->funcs[i], o->noise_sigmas, o->normalize, d->a_total, d->b_total);

    struct query_diff_row tot = { .a = d->a_total, .b = d->b_total, .a_cum = d->a_total,
                                  .b_cum = d->b_total, .var_a = d->var_a_total,
                                  .var_b = d->var_b_total, .var_a_cum = d->var_a_total,
                                  .var_b_cum = d->var_b_total };
    mark(&tot, o->noise_sigmas, false, 0, 0);
    d->delta = tot.delta;
    d->sigma = tot.sigma;
    d->noise = tot.noise;

    rows_sort(d->funcs, d->nfuncs);
    rows_sort(d->stacks, d->nstacks);
    free(sa);
    free(sb);
    *ret = d;
    return 0;
}

void query_diff_free(struct query_diff *d)
{
    if (!d)
        return;
    struct diff_priv *pv = d->priv;
    if (pv) {
        qa_funcs_release(&pv->funcs);
        qa_stacks_release(&pv->stacks);
        free(pv);
    }
    free(d->funcs);
    free(d->stacks);
    free(d);
}

const struct query_diff_row *query_diff_find_func(const struct query_diff *d, const char *name)
{
    for (size_t i = 0; i < d->nfuncs; i++)
        if (strcmp(d->funcs[i].name, name) == 0)
            return &d->funcs[i];
    return NULL;
}

/* ---- renderers ---- */

static const char *fmt_delta(const struct query_diff *d, double x, char *buf, size_t n)
{
    if (d->opts.normalize) {
        snprintf(buf, n, "%+.2fpp", 100.0 * x);
        return buf;
    }
    return qa_fmt_signed(d->opts.sample, x, buf, n);
}

static const char *fmt_sigma(const struct query_diff *d, double s, char *buf, size_t n)
{
    char tmp[32];
    if (s <= 0)
        return "exact";
    if (d->opts.normalize)
        snprintf(buf, n, "+/-%.2fpp", 100.0 * d->opts.noise_sigmas * s);
    else
        snprintf(buf, n, "+/-%s", qa_fmt(d->opts.sample, d->opts.noise_sigmas * s, tmp,
                                       sizeof(tmp)));
    return buf;
}

int query_render_diff_text(const struct query_diff *d, const char *a_label, const char *b_label,
                           const struct query_opts *o, struct hp_buf *out)
{
    enum profile_value v = d->opts.sample;
    char x[32], y[32], z[32], w[32], n[32];
    if (o->title)
        hp_buf_printf(out, "%s\n", o->title);
    hp_buf_printf(out, "Diff of %s: B minus A%s\n", profile_value_name(v),
                  d->opts.normalize ? ", as shares of each side's total (pp = percentage points)"
                                    : "");
    hp_buf_printf(out, "A: %-12s %s\n", qa_fmt(v, d->a_total, x, sizeof(x)), a_label);
    hp_buf_printf(out, "B: %-12s %s\n", qa_fmt(v, d->b_total, x, sizeof(x)), b_label);
    double rel = d->a_total ? 100.0 * d->delta / d->a_total : 0;
    if (d->sigma > 0)
        snprintf(y, sizeof(y), "+/-%s", qa_fmt(v, d->opts.noise_sigmas * d->sigma, z, sizeof(z)));
    hp_buf_printf(out, "Change: %s (%+.1f%%), sampling noise %s at %.0f sigma: %s\n",
                  qa_fmt_signed(v, d->delta, x, sizeof(x)), rel,
                  d->sigma > 0 ? y : "none (every allocation recorded)",
                  d->opts.noise_sigmas,
                  d->noise ? "within sampling noise" : "beyond sampling noise");
    hp_buf_puts(out, "Rows marked ~ could be sampling noise alone (|delta| < k sigma).\n\n");

    hp_buf_printf(out, "%12s %12s %7s %12s %12s %12s  %s\n", "delta flat", "delta cum",
                  "change%", "A cum", "B cum", "noise", "function");
    size_t rows = o->top ? HP_MIN(o->top, d->nfuncs) : d->nfuncs;
    for (size_t i = 0; i < rows; i++) {
        const struct query_diff_row *r = &d->funcs[i];
        double share = d->delta ? 100.0 * (r->b_cum - r->a_cum) / fabs(d->delta) : 0;
        hp_buf_printf(out, "%12s %12s %6.1f%% %12s %12s %12s %c%s\n",
                      fmt_delta(d, r->delta, x, sizeof(x)), fmt_delta(d, r->delta_cum, y,
                                                                      sizeof(y)),
                      share, qa_fmt(v, r->a_cum, z, sizeof(z)), qa_fmt(v, r->b_cum, w, sizeof(w)),
                      fmt_sigma(d, r->sigma_cum, n, sizeof(n)),
                      r->noise_cum ? '~' : ' ', r->name);
    }
    if (rows < d->nfuncs)
        hp_buf_printf(out, "(%zu more functions; --top 0 shows all)\n", d->nfuncs - rows);

    hp_buf_printf(out, "\n%12s %12s %12s %12s  %s\n", "delta", "A", "B", "noise",
                  "stack (leaf <- callers)");
    rows = o->top ? HP_MIN(o->top, d->nstacks) : d->nstacks;
    for (size_t i = 0; i < rows; i++) {
        const struct query_diff_row *r = &d->stacks[i];
        if (r->delta == 0 && r->a == r->b)
            break; /* sorted by |delta|: the rest did not change */
        hp_buf_printf(out, "%12s %12s %12s %12s %c", fmt_delta(d, r->delta, x, sizeof(x)),
                      qa_fmt(v, r->a, y, sizeof(y)), qa_fmt(v, r->b, z, sizeof(z)),
                      fmt_sigma(d, r->sigma, w, sizeof(w)), r->noise ? '~' : ' ');
        qa_stack_label(out, r->frames, r->nframes, 8);
        hp_buf_puts(out, "\n");
    }
    if (rows < d->nstacks)
        hp_buf_printf(out, "(%zu more stacks; --top 0 shows all)\n", d->nstacks - rows);
    return 0;
}

static void put_frames(struct hp_buf *out, const char *const *frames, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            hp_buf_append(out, ";", 1);
        size_t start = out->len;
        hp_buf_puts(out, frames[k]);
        /* ';', spaces before the values and newlines would break the
         * two-column line format. */
        for (size_t j = start; j < out->len; j++)
            if (out->data[j] == ';' || out->data[j] == '\n' || out->data[j] == '\r')
                out->data[j] = ':';
    }
}

int query_render_diff_collapsed(const struct query_diff *d, struct hp_buf *out)
{
    size_t n = d->nstacks;
    double *va = hp_xmalloc((n + 1) * sizeof(*va)), *vb = hp_xmalloc((n + 1) * sizeof(*vb));
    int64_t *ia = hp_xmalloc((n + 1) * sizeof(*ia)), *ib = hp_xmalloc((n + 1) * sizeof(*ib));
    for (size_t i = 0; i < n; i++) {
        va[i] = d->stacks[i].a;
        vb[i] = d->stacks[i].b;
    }
    query_round_preserving_sum(va, n, ia);
    query_round_preserving_sum(vb, n, ib);
    for (size_t i = 0; i < n; i++) {
        if (ia[i] == 0 && ib[i] == 0)
            continue;
        put_frames(out, d->stacks[i].frames, d->stacks[i].nframes);
        hp_buf_printf(out, " %lld %lld\n", (long long)ia[i], (long long)ib[i]);
    }
    free(va);
    free(vb);
    free(ia);
    free(ib);
    return 0;
}

static json_t *row_json(struct hp_arena *tmp, const struct query_diff_row *r, bool func)
{
    json_t *j = json_object();
    if (func) {
        json_object_set_new(j, "name", json_string(query_utf8_clean(tmp, r->name)));
    } else {
        json_t *fr = json_array();
        for (uint32_t k = 0; k < r->nframes; k++)
            json_array_append_new(fr, json_string(query_utf8_clean(tmp, r->frames[k])));
        json_object_set_new(j, "frames", fr);
    }
    json_object_set_new(j, "a", json_real(r->a));
    json_object_set_new(j, "b", json_real(r->b));
    json_object_set_new(j, "delta", json_real(r->delta));
    json_object_set_new(j, "sigma", json_real(r->sigma));
    json_object_set_new(j, "within_noise", json_boolean(r->noise));
    if (func) {
        json_object_set_new(j, "a_cum", json_real(r->a_cum));
        json_object_set_new(j, "b_cum", json_real(r->b_cum));
        json_object_set_new(j, "delta_cum", json_real(r->delta_cum));
        json_object_set_new(j, "sigma_cum", json_real(r->sigma_cum));
        json_object_set_new(j, "within_noise_cum", json_boolean(r->noise_cum));
    }
    return j;
}

int query_render_diff_json(const struct query_diff *d, const char *a_label, const char *b_label,
                           const struct query_opts *o, struct hp_buf *out)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *root = json_object();
    json_object_set_new(root, "sample", json_string(profile_value_name(d->opts.sample)));
    json_object_set_new(root, "normalize", json_boolean(d->opts.normalize));
    json_object_set_new(root, "noise_sigmas", json_real(d->opts.noise_sigmas));
    json_t *a = json_object(), *b = json_object();
    json_object_set_new(a, "label", json_string(query_utf8_clean(&tmp, a_label)));
    json_object_set_new(a, "total", json_real(d->a_total));
    json_object_set_new(a, "sigma", json_real(sqrt(d->var_a_total)));
    json_object_set_new(b, "label", json_string(query_utf8_clean(&tmp, b_label)));
    json_object_set_new(b, "total", json_real(d->b_total));
    json_object_set_new(b, "sigma", json_real(sqrt(d->var_b_total)));
    if (o->snap)
        json_object_set_new(a, "snapshot", query_snapref_json(o->snap));
    if (o->snap_b)
        json_object_set_new(b, "snapshot", query_snapref_json(o->snap_b));
    json_object_set_new(root, "a", a);
    json_object_set_new(root, "b", b);
    json_object_set_new(root, "delta", json_real(d->delta));
    json_object_set_new(root, "sigma", json_real(d->sigma));
    json_object_set_new(root, "within_noise", json_boolean(d->noise));
    json_t *funcs = json_array(), *stacks = json_array();
    size_t rows = o->top ? HP_MIN(o->top, d->nfuncs) : d->nfuncs;
    for (size_t i = 0; i < rows; i++)
        json_array_append_new(funcs, row_json(&tmp, &d->funcs[i], true));
    rows = o->top ? HP_MIN(o->top, d->nstacks) : d->nstacks;
    for (size_t i = 0; i < rows; i++)
        json_array_append_new(stacks, row_json(&tmp, &d->stacks[i], false));
    json_object_set_new(root, "functions", funcs);
    json_object_set_new(root, "stacks", stacks);
    int r = qa_json_emit(root, out);
    hp_arena_release(&tmp); /* after: names may point into it */
    return r;
}
