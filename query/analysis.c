/* Stack and function unions across folded profiles (analysis-internal.h),
 * and small numeric helpers the analyses share. */
#include "query/analysis-internal.h"

#include <jansson.h>

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
}

void qa_stacks_release(struct qa_stacks *s)
{
    free(s->names);
    free(s->name_ids);
    free(s->v);
    free(s->scratch_ids);
    free(s->xmap);
    hp_map64_release(&s->index);
    hp_strtab_release(&s->strings);
    hp_arena_release(&s->arena);
}

void qa_stacks_reserve(struct qa_stacks *s, size_t stacks, size_t names)
{
    s->v = hp_xgrow(s->v, &s->cap, stacks + 1, sizeof(*s->v));
    s->names = hp_xgrow(s->names, &s->names_cap, names + 1, sizeof(*s->names));
    s->name_ids = hp_xgrow(s->name_ids, &s->name_ids_cap, names + 1, sizeof(*s->name_ids));
    s->index_hint = stacks; /* the index is sized when first used */
}

void qa_stacks_forget_source(struct qa_stacks *s)
{
    s->xsrc = 0; /* no folded profile's serial */
    s->prev_src = NULL;
    s->prev_n = 0;
}

uint32_t qa_stacks_name(struct qa_stacks *s, const struct query_folded *f, const char *name)
{
    (void)f;
    return hp_strtab_id(&s->strings, hp_strtab_intern(&s->strings, name, strlen(name)));
}

/* s->xmap for f's names: cleared when f is not the profile translated
 * last (serials are never reused, addresses are), grown when f has names
 * the map has not. */
static void xmap_for(struct qa_stacks *s, const struct query_folded *f)
{
    size_t n = f->strings.len;
    if (s->xsrc != f->serial) {
        s->xsrc = f->serial;
        s->xmap_n = 0;
        s->prev_src = NULL;
        s->prev_n = 0;
    }
    if (n > s->xmap_n) {
        s->xmap = hp_xgrow(s->xmap, &s->xmap_cap, n, sizeof(*s->xmap));
        memset(s->xmap + s->xmap_n, 0, (n - s->xmap_n) * sizeof(*s->xmap));
        s->xmap_n = n;
    }
}

static uint64_t ids_hash(const uint32_t *ids, uint32_t n)
{
    return hp_hash_bytes(ids, n * sizeof(*ids), 0x5bd1e9955bd1e995u);
}

/* A new stack of the union, not indexed. */
static uint32_t stack_append(struct qa_stacks *s, const uint32_t *ids, uint32_t n)
{
    s->names = hp_xgrow(s->names, &s->names_cap, s->nnames + n, sizeof(*s->names));
    s->name_ids = hp_xgrow(s->name_ids, &s->name_ids_cap, s->nnames + n, sizeof(*s->name_ids));
    for (uint32_t j = 0; j < n; j++)
        s->names[s->nnames + j] = s->strings.by_id[ids[j]];
    memcpy(s->name_ids + s->nnames, ids, n * sizeof(*ids));
    s->v = hp_xgrow(s->v, &s->cap, s->n + 1, sizeof(*s->v));
    s->v[s->n] = (struct qa_stack){ .off = (uint32_t)s->nnames, .n = n };
    s->nnames += n;
    return (uint32_t)s->n++;
}

/* Stack sid into the index at the first free key from its hash. */
static void index_put(struct qa_stacks *s, uint32_t sid)
{
    const struct qa_stack *st = &s->v[sid];
    uint32_t old;
    for (uint64_t k = ids_hash(s->name_ids + st->off, st->n);; k++)
        if (!hp_map64_get(&s->index, k, &old)) {
            (void)hp_map64_put(&s->index, k, sid, &old);
            return;
        }
}

static uint32_t stacks_add(struct qa_stacks *s, const uint32_t *ids, uint32_t n)
{
    /* Stacks adopted unindexed (qa_stacks_adopt) are indexed now, in
     * order, at the keys adding them one by one would have given. */
    if (s->index_hint) {
        hp_map64_reserve(&s->index, s->index_hint);
        s->index_hint = 0;
    }
    for (; s->nindexed < s->n; s->nindexed++)
        index_put(s, (uint32_t)s->nindexed);
    uint64_t h = ids_hash(ids, n);
    for (uint64_t k = h;; k++) {
        uint32_t sid;
        if (!hp_map64_get(&s->index, k, &sid)) {
            uint32_t id = stack_append(s, ids, n);
            (void)hp_map64_put(&s->index, k, id, &sid);
            s->nindexed = s->n;
            return id;
        }
        const struct qa_stack *st = &s->v[sid];
        if (st->n == n && memcmp(s->name_ids + st->off, ids, n * sizeof(*ids)) == 0)
            return sid;
    }
}

/* The shared ids of entry e's frames into s->scratch_ids. */
static void entry_ids(struct qa_stacks *s, const struct query_folded *f,
                      const struct query_fold_entry *e)
{
    const char *const *src = query_fold_frames(f, e);
    xmap_for(s, f);
    s->scratch_ids = hp_xgrow(s->scratch_ids, &s->scratch_ids_cap, e->n + 1,
                              sizeof(*s->scratch_ids));
    /* Consecutive entries mostly share their root frames: the translated
     * prefix from the previous entry is still in scratch_ids. */
    uint32_t k = 0;
    if (s->prev_src)
        while (k < e->n && k < s->prev_n && src[k] == s->prev_src[k])
            k++;
    for (; k < e->n; k++) {
        uint32_t *x = &s->xmap[hp_strtab_id(&f->strings, src[k])];
        if (!*x)
            *x = qa_stacks_name(s, f, src[k]) + 1;
        s->scratch_ids[k] = *x - 1;
    }
    s->prev_src = src;
    s->prev_n = e->n;
}

void qa_stacks_adopt(struct qa_stacks *s, const struct query_folded *f)
{
    for (size_t i = 0; i < f->nentries; i++) {
        entry_ids(s, f, &f->entries[i]);
        (void)stack_append(s, s->scratch_ids, f->entries[i].n);
    }
}

uint32_t qa_stacks_add_entry(struct qa_stacks *s, const struct query_folded *f,
                             const struct query_fold_entry *e)
{
    entry_ids(s, f, e);
    return stacks_add(s, s->scratch_ids, e->n);
}

void qa_funcs_release(struct qa_funcs *fn)
{
    free(fn->stack_off);
    free(fn->ids);
    free(fn->leaf);
    memset(fn, 0, sizeof(*fn));
}

void qa_funcs_build(struct qa_funcs *fn, const struct qa_stacks *s)
{
    qa_funcs_release(fn);
    fn->name = s->strings.by_id;
    fn->n = s->strings.len;
    fn->nstacks = s->n;
    fn->stack_off = hp_xmalloc((s->n + 1) * sizeof(*fn->stack_off));
    fn->leaf = hp_xmalloc((s->n + 1) * sizeof(*fn->leaf));
    fn->ids = hp_xmalloc((s->nnames + 1) * sizeof(*fn->ids));
    uint32_t *stamp = hp_xcalloc(s->strings.len + 1, sizeof(*stamp));
    for (size_t si = 0; si < s->n; si++) {
        const uint32_t *ids = qa_stack_name_ids(s, (uint32_t)si);
        uint32_t n = s->v[si].n;
        fn->stack_off[si] = (uint32_t)fn->nids;
        fn->leaf[si] = n ? ids[n - 1] : UINT32_MAX;
        for (uint32_t k = 0; k < n; k++) {
            if (stamp[ids[k]] == si + 1)
                continue; /* recursion: once per stack */
            stamp[ids[k]] = (uint32_t)si + 1;
            fn->ids[fn->nids++] = ids[k];
        }
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
    /* The first byte before the call: leaks asks each of a node's
     * snapshots for half a dozen figures it mostly does not carry. */
    for (size_t i = 0; i < n; i++)
        if (figs[i].name && figs[i].name[0] == name[0] && strcmp(figs[i].name, name) == 0) {
            *ret = figs[i].value;
            return 1;
        }
    return 0;
}

json_t *query_json_string(const char *s)
{
    struct hp_arena tmp;
    hp_arena_init(&tmp);
    json_t *j = json_string(query_utf8_clean(&tmp, s ? s : ""));
    hp_arena_release(&tmp);
    return j ? j : json_string("");
}

void query_json_str(struct hp_buf *out, const char *s)
{
    json_t *j = query_json_string(s);
    char *text = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(j);
    hp_buf_puts(out, text ? text : "\"\"");
    free(text);
}

int qa_json_emit(json_t *root, struct hp_buf *out)
{
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (!text)
        return HP_EPARSE;
    hp_buf_puts(out, text);
    hp_buf_puts(out, "\n");
    free(text);
    return 0;
}
