/* A closed span's stack view: its stacks as the rows that resolve them.
 *
 * `query leaks` over the store resolves each node's distinct stacks once
 * (store_stacks_load): the stacks' rows, their locations' rows and the
 * function and file names, three to four range scans and about 13,000 rows
 * a node on the leaks bench, a third of the command's instructions, most
 * of them inside SQLite (~1,000 instructions a row). A view is those rows
 * for one closed span's stacks, packed into one blob of its stack_series
 * row when the row is written (series.c): the loader takes from the views
 * it is given what they hold and fetches only the rest (read.c).
 *
 * A view is a copy of rows, so it is right as long as they are. Stacks,
 * function and file names never change once written; a location changes
 * when it is symbolized again (a location first stored bare gets frames,
 * or a reindex): each such update bumps its object's generation
 * (loc_gens), a view lists the generations of the objects it holds
 * locations of, and a view whose generations are not the current ones is
 * not used. The rows it copies cannot go while it exists: it goes with its
 * stack_series row, which goes with its members, whose sample sets keep
 * those rows referenced (retention sweeps only unreferenced ones).
 *
 * Packed (varints; ids ascending, each as the difference from the one
 * before, first from 0):
 *   version
 *   objects:   n, then (object id zigzag, generation)
 *   functions: n, then (id delta, name length, name)
 *   files:     n, then (id delta, path length, path)
 *   locations: n, then (id delta, object id zigzag, address, flags,
 *              frames n, then (function id, file id, line) each)
 *   stacks:    n, then (id as the difference from the one before, zigzag;
 *              `keep`, `new`: the stack's locations are `new` indexes into
 *              the view's locations, leaf first, then the last `keep` of
 *              the stack before; keep + new >= 1)
 * Stacks go in the order of their locations read from the root, so that
 * each shares most of its callers with the one before: the leaks bench's
 * 4,166 stacks of 20 frames took 148 KB as plain lists, most of a view.
 * Engine-free: the writer packs (read.c builds the rows), the loader and
 * the fuzz target unpack. */
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

#define VIEW_VERSION 1

/* Stacks by their locations read from the root (the last first). */
static int root_first_cmp(const void *a, const void *b, void *ctx)
{
    const struct store_view *v = ctx;
    const struct store_view_stack *x = &v->stacks[*(const uint32_t *)a],
                                  *y = &v->stacks[*(const uint32_t *)b];
    const uint32_t *lx = v->stack_locs + x->off, *ly = v->stack_locs + y->off;
    for (uint32_t i = 1; i <= x->n && i <= y->n; i++)
        if (lx[x->n - i] != ly[y->n - i])
            return lx[x->n - i] < ly[y->n - i] ? -1 : 1;
    return (x->n > y->n) - (x->n < y->n);
}

static void pack_names(struct store_pack *b, const struct store_view_name *v, size_t n)
{
    store_pack_u64(b, n);
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        store_pack_u64(b, (uint64_t)(v[i].id - prev));
        prev = v[i].id;
        store_pack_u64(b, v[i].len);
        store_pack_bytes(b, v[i].s, v[i].len);
    }
}

void store_view_pack(const struct store_view *v, struct store_pack *b)
{
    store_pack_u64(b, VIEW_VERSION);
    store_pack_u64(b, v->nobjs);
    for (size_t i = 0; i < v->nobjs; i++) {
        store_pack_i64(b, v->objs[i].id);
        store_pack_u64(b, v->objs[i].gen);
    }
    pack_names(b, v->fns, v->nfns);
    pack_names(b, v->files, v->nfiles);
    store_pack_u64(b, v->nlocs);
    int64_t prev = 0;
    for (size_t i = 0; i < v->nlocs; i++) {
        const struct store_view_loc *l = &v->locs[i];
        store_pack_u64(b, (uint64_t)(l->id - prev));
        prev = l->id;
        store_pack_i64(b, l->object_id);
        store_pack_u64(b, l->address);
        store_pack_u64(b, l->flags);
        store_pack_u64(b, l->nframes);
        for (uint32_t k = 0; k < l->nframes; k++) {
            const struct store_view_frame *f = &v->frames[l->frame_off + k];
            store_pack_u64(b, (uint64_t)f->fid);
            store_pack_u64(b, (uint64_t)f->file);
            store_pack_u64(b, f->line);
        }
    }
    uint32_t *order = hp_xmalloc((v->nstacks + 1) * sizeof(*order));
    for (size_t i = 0; i < v->nstacks; i++)
        order[i] = (uint32_t)i;
    if (v->nstacks > 1)
        qsort_r(order, v->nstacks, sizeof(*order), root_first_cmp, (void *)v);
    store_pack_u64(b, v->nstacks);
    prev = 0;
    const struct store_view_stack *before = NULL;
    for (size_t i = 0; i < v->nstacks; i++) {
        const struct store_view_stack *sk = &v->stacks[order[i]];
        store_pack_i64(b, sk->id - prev);
        prev = sk->id;
        uint32_t keep = 0;
        while (before && keep < sk->n && keep < before->n &&
               v->stack_locs[sk->off + sk->n - 1 - keep] ==
                   v->stack_locs[before->off + before->n - 1 - keep])
            keep++;
        store_pack_u64(b, keep);
        store_pack_u64(b, sk->n - keep);
        for (uint32_t k = 0; k < sk->n - keep; k++)
            store_pack_u64(b, v->stack_locs[sk->off + k]);
        before = sk;
    }
    free(order);
}

/* A count of entries of at least `min_bytes` bytes each: no more than the
 * bytes left could hold (a hostile count must not size an allocation). */
static bool count_ok(struct store_unpack *u, uint64_t n, size_t min_bytes)
{
    return !u->bad && n <= (uint64_t)(u->end - u->p) / min_bytes;
}

/* An id after prev: a positive difference that does not overflow. */
static bool next_id(struct store_unpack *u, int64_t *prev)
{
    uint64_t d = store_unpack_u64(u);
    if (d == 0 || d > (uint64_t)INT64_MAX - (uint64_t)*prev)
        return false;
    *prev += (int64_t)d;
    return true;
}

static const char *unpack_names(struct store_unpack *u, struct store_view_name **ret,
                                size_t *ret_n)
{
    uint64_t n = store_unpack_u64(u);
    if (!count_ok(u, n, 2))
        return "a name count larger than the view";
    struct store_view_name *v = hp_xmalloc((n + 1) * sizeof(*v));
    *ret = v;
    *ret_n = (size_t)n;
    int64_t prev = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!next_id(u, &prev))
            return "name ids out of order";
        v[i].id = prev;
        v[i].s = store_unpack_str(u, &v[i].len);
        if (u->bad)
            return "a name runs past the end";
    }
    return NULL;
}

static const char UNKNOWN_VERSION[] = "an unknown version";

/* Version and objects, the head of a view; NULL, or what is wrong. */
static const char *unpack_head(struct store_unpack *u, struct store_view *v)
{
    if (store_unpack_u64(u) != VIEW_VERSION)
        return UNKNOWN_VERSION;
    uint64_t n = store_unpack_u64(u);
    if (!count_ok(u, n, 2))
        return "an object count larger than the view";
    v->objs = hp_xmalloc((n + 1) * sizeof(*v->objs));
    v->nobjs = (size_t)n;
    for (uint64_t i = 0; i < n; i++) {
        v->objs[i].id = store_unpack_i64(u);
        v->objs[i].gen = store_unpack_u64(u);
    }
    return u->bad ? "it runs past the end" : NULL;
}

int store_view_objs(const void *data, size_t len, struct store_view_obj **ret, size_t *ret_n)
{
    struct store_view v = { 0 };
    struct store_unpack u = { data, (const unsigned char *)data + len, false };
    const char *why = unpack_head(&u, &v);
    *ret = NULL;
    *ret_n = 0;
    if (why) {
        free(v.objs);
        /* Not a view; else its bytes end too soon (a count beyond them
         * too: of a prefix, that proves nothing). */
        return why == UNKNOWN_VERSION ? -1 : 0;
    }
    *ret = v.objs;
    *ret_n = v.nobjs;
    return 1;
}

static const char *unpack(struct store_unpack *u, struct store_view *v)
{
    /* Kept locations cost no bytes: what stacks may add up to, so that a
     * hostile view (every stack the one before and one more) cannot ask
     * for memory by the square of its size. Real ones hold about one
     * location per byte. */
    const size_t max_locs =
        HP_MIN(64 * (size_t)(u->end - u->p) + ((size_t)1 << 20), (size_t)UINT32_MAX - 1);
    const char *why;
    if ((why = unpack_head(u, v)) || (why = unpack_names(u, &v->fns, &v->nfns)) ||
        (why = unpack_names(u, &v->files, &v->nfiles)))
        return why;
    uint64_t n = store_unpack_u64(u);
    if (!count_ok(u, n, 5))
        return "a location count larger than the view";
    v->locs = hp_xmalloc((n + 1) * sizeof(*v->locs));
    v->nlocs = (size_t)n;
    /* Sized for what real views hold (a frame or two a location, twenty
     * locations a stack), so that they are seldom grown by copies. */
    size_t frames_cap = 0;
    v->frames = hp_xgrow(v->frames, &frames_cap, 2 * (size_t)n + 1, sizeof(*v->frames));
    int64_t prev = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct store_view_loc *l = &v->locs[i];
        if (!next_id(u, &prev))
            return "location ids out of order";
        l->id = prev;
        l->object_id = store_unpack_i64(u);
        l->address = store_unpack_u64(u);
        uint64_t flags = store_unpack_u64(u), nf = store_unpack_u64(u);
        if (flags > UINT32_MAX || !count_ok(u, nf, 3))
            return "a location does not decode";
        l->flags = (uint32_t)flags;
        l->frame_off = (uint32_t)v->nframes;
        l->nframes = (uint32_t)nf;
        v->frames = hp_xgrow(v->frames, &frames_cap, v->nframes + nf + 1, sizeof(*v->frames));
        for (uint64_t k = 0; k < nf; k++) {
            struct store_view_frame *f = &v->frames[v->nframes++];
            uint64_t fid = store_unpack_u64(u), file = store_unpack_u64(u),
                     line = store_unpack_u64(u);
            if (fid > INT64_MAX || file > INT64_MAX || line > UINT32_MAX)
                return "a frame does not decode";
            *f = (struct store_view_frame){ (int64_t)fid, (int64_t)file, (uint32_t)line };
        }
        if (u->bad)
            return "a location runs past the end";
    }
    n = store_unpack_u64(u);
    if (!count_ok(u, n, 3))
        return "a stack count larger than the view";
    v->stacks = hp_xmalloc((n + 1) * sizeof(*v->stacks));
    v->nstacks = (size_t)n;
    size_t locs_cap = 0;
    v->stack_locs = hp_xgrow(v->stack_locs, &locs_cap,
                             HP_MIN(24 * (size_t)n, 2 * (size_t)(u->end - u->p)) + 1,
                             sizeof(*v->stack_locs));
    prev = 0;
    const struct store_view_stack *before = NULL;
    for (uint64_t i = 0; i < n; i++) {
        struct store_view_stack *sk = &v->stacks[i];
        int64_t d = store_unpack_i64(u);
        if (d > 0 ? prev > INT64_MAX - d : prev + d <= 0)
            return "a stack id out of range";
        prev += d;
        uint64_t keep = store_unpack_u64(u), fresh = store_unpack_u64(u);
        /* A stack is at most as long as the bytes are (a kept location
         * costs none, but each came from a byte of a stack before). */
        if (u->bad || keep > (before ? before->n : 0) || keep + fresh == 0 ||
            !count_ok(u, fresh, 1))
            return "a stack does not decode";
        if (keep + fresh > max_locs - v->nstack_locs)
            return "stacks longer than a view of its size holds";
        sk->id = prev;
        sk->off = (uint32_t)v->nstack_locs;
        sk->n = (uint32_t)(keep + fresh);
        v->stack_locs = hp_xgrow(v->stack_locs, &locs_cap, v->nstack_locs + sk->n + 1,
                                 sizeof(*v->stack_locs));
        for (uint64_t k = 0; k < fresh; k++) {
            uint64_t j = store_unpack_u64(u);
            if (j >= v->nlocs)
                return "a stack names a location the view does not hold";
            v->stack_locs[v->nstack_locs++] = (uint32_t)j;
        }
        if (keep) /* before's locations did not move: the array only grew */
            memcpy(v->stack_locs + v->nstack_locs,
                   v->stack_locs + before->off + before->n - keep, keep * sizeof(uint32_t));
        v->nstack_locs += keep;
        if (u->bad)
            return "a stack runs past the end";
        before = sk;
    }
    if (u->bad)
        return "it runs past the end";
    if (u->p != u->end)
        return "bytes after its end";
    return NULL;
}

int store_view_unpack(const void *data, size_t len, struct store_view *out, struct hp_buf *err)
{
    memset(out, 0, sizeof(*out));
    struct store_unpack u = { data, (const unsigned char *)data + len, false };
    const char *why = len ? unpack(&u, out) : "no bytes";
    if (!why)
        return 0;
    hp_err_printf(err, "a stack view does not decode: %s (at byte %zu of %zu)", why,
                  (size_t)(u.p - (const unsigned char *)data), len);
    store_view_release(out);
    return HP_ECORRUPT;
}

void store_view_release(struct store_view *v)
{
    if (!v)
        return;
    free(v->objs);
    free(v->fns);
    free(v->files);
    free(v->locs);
    free(v->frames);
    free(v->stacks);
    free(v->stack_locs);
    memset(v, 0, sizeof(*v));
}
