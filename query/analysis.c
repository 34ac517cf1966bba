/* Stack and function unions across folded profiles (analysis-internal.h),
 * and small numeric helpers the analyses share. */
#include "query/analysis-internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qa_stacks_init(struct qa_stacks *s)
{
    memset(s, 0, sizeof(*s));
    hp_arena_init(&s->arena);
    hp_strtab_init(&s->strings, &s->arena);
    hp_map64_init(&s->index);
    hp_map64_init(&s->xlat);
}

void qa_stacks_release(struct qa_stacks *s)
{
    free(s->names);
    free(s->v);
    free(s->xlat_names);
    free(s->scratch);
    hp_map64_release(&s->index);
    hp_map64_release(&s->xlat);
    hp_strtab_release(&s->strings);
    hp_arena_release(&s->arena);
}

const char *qa_stacks_name(struct qa_stacks *s, const struct query_folded *f, const char *name)
{
    /* Every folded profile added stays alive until the union is released
     * (analysis-internal.h), so a name pointer identifies its string across
     * all of them and one cache serves them all. */
    (void)f;
    uint32_t idx;
    if (hp_map64_get(&s->xlat, (uint64_t)(uintptr_t)name, &idx))
        return s->xlat_names[idx];
    const char *shared = hp_strtab_intern(&s->strings, name, strlen(name));
    s->xlat_names = hp_xgrow(s->xlat_names, &s->xlat_cap, s->nxlat + 1, sizeof(*s->xlat_names));
    s->xlat_names[s->nxlat] = shared;
    (void)hp_map64_put(&s->xlat, (uint64_t)(uintptr_t)name, (uint32_t)s->nxlat, &idx);
    s->nxlat++;
    return shared;
}

uint32_t qa_stacks_add(struct qa_stacks *s, const char *const *names, uint32_t n)
{
    uint64_t h = hp_hash_bytes(names, n * sizeof(*names), 0x5bd1e9955bd1e995u);
    for (uint64_t k = h;; k++) {
        uint32_t id;
        if (!hp_map64_get(&s->index, k, &id)) {
            s->names = hp_xgrow(s->names, &s->names_cap, s->nnames + n, sizeof(*s->names));
            memcpy(s->names + s->nnames, names, n * sizeof(*names));
            s->v = hp_xgrow(s->v, &s->cap, s->n + 1, sizeof(*s->v));
            s->v[s->n] = (struct qa_stack){ .off = (uint32_t)s->nnames, .n = n };
            s->nnames += n;
            (void)hp_map64_put(&s->index, k, (uint32_t)s->n, &id);
            return (uint32_t)s->n++;
        }
        const struct qa_stack *st = &s->v[id];
        if (st->n == n && memcmp(s->names + st->off, names, n * sizeof(*names)) == 0)
            return id;
    }
}

uint32_t qa_stacks_add_entry(struct qa_stacks *s, const struct query_folded *f,
                             const struct query_fold_entry *e)
{
    const char *const *src = query_fold_frames(f, e);
    s->scratch = hp_xgrow(s->scratch, &s->scratch_cap, e->n + 1, sizeof(*s->scratch));
    for (uint32_t k = 0; k < e->n; k++)
        s->scratch[k] = qa_stacks_name(s, f, src[k]);
    return qa_stacks_add(s, s->scratch, e->n);
}

void qa_funcs_release(struct qa_funcs *fn)
{
    free(fn->name);
    free(fn->stack_off);
    free(fn->ids);
    free(fn->leaf);
    hp_map64_release(&fn->index);
    memset(fn, 0, sizeof(*fn));
}

void qa_funcs_build(struct qa_funcs *fn, const struct qa_stacks *s)
{
    qa_funcs_release(fn);
    hp_map64_init(&fn->index);
    fn->nstacks = s->n;
    fn->stack_off = hp_xmalloc((s->n + 1) * sizeof(*fn->stack_off));
    fn->leaf = hp_xmalloc((s->n + 1) * sizeof(*fn->leaf));
    uint32_t *stamp = NULL;
    size_t stamp_cap = 0;
    for (size_t si = 0; si < s->n; si++) {
        const char *const *names = qa_stack_frames(s, (uint32_t)si);
        uint32_t n = s->v[si].n;
        fn->stack_off[si] = (uint32_t)fn->nids;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t id;
            if (!hp_map64_get(&fn->index, (uint64_t)(uintptr_t)names[k], &id)) {
                fn->name = hp_xgrow(fn->name, &fn->cap, fn->n + 1, sizeof(*fn->name));
                id = (uint32_t)fn->n;
                fn->name[fn->n++] = names[k];
                (void)hp_map64_put(&fn->index, (uint64_t)(uintptr_t)names[k], id, &id);
                stamp = hp_xgrow(stamp, &stamp_cap, fn->n, sizeof(*stamp));
                stamp[id] = 0;
            }
            if (k == n - 1)
                fn->leaf[si] = id;
            if (stamp[id] == si + 1)
                continue; /* recursion: once per stack */
            stamp[id] = (uint32_t)si + 1;
            fn->ids = hp_xgrow(fn->ids, &fn->ids_cap, fn->nids + 1, sizeof(*fn->ids));
            fn->ids[fn->nids++] = id;
        }
        if (n == 0)
            fn->leaf[si] = UINT32_MAX;
    }
    fn->stack_off[s->n] = (uint32_t)fn->nids;
    free(stamp);
}

/* k-th smallest of v[0..n) (reorders v); Hoare partitioning. Values are
 * finite (un-sampled byte figures). */
static double select_k(double *v, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (hi > lo) {
        double pivot = v[lo + (hi - lo) / 2];
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

double qa_median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    double hi = select_k(v, n, n / 2);
    if (n % 2)
        return hi;
    /* The largest of the lower half. */
    double lo = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo)
            lo = v[i];
    return (lo + hi) / 2;
}

void qa_stack_label(struct hp_buf *out, const char *const *frames, uint32_t n, uint32_t max)
{
    uint32_t shown = 0;
    for (uint32_t k = n; k-- > 0;) {
        if (shown == max) {
            hp_buf_printf(out, " <- ... (%u more)", k + 1);
            break;
        }
        if (shown)
            hp_buf_puts(out, " <- ");
        hp_buf_puts(out, frames[k]);
        shown++;
    }
}

const char *qa_fmt_signed(enum profile_value v, double x, char *buf, size_t n)
{
    char tmp[32];
    qa_fmt(v, fabs(x), tmp, sizeof(tmp));
    snprintf(buf, n, "%s%s", x < 0 ? "-" : x > 0 ? "+" : "", tmp);
    return buf;
}

int query_figure_find(const struct query_figure *figs, size_t n, const char *name, double *ret)
{
    for (size_t i = 0; i < n; i++)
        if (figs[i].name && strcmp(figs[i].name, name) == 0) {
            *ret = figs[i].value;
            return 1;
        }
    return 0;
}
