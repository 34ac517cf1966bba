/* read.c: everything that reads. Rebuilding a stored profile, the raw dump,
 * snapshot and node listings, selectors, trend series and statistics.
 *
 * Loading a snapshot reads its packed sample set, then the stacks, locations,
 * function and file names it needs. Those ids are fetched in a few range
 * scans (ids of one node's data are mostly contiguous, having been inserted
 * together) rather than one query per id: a 20k-stack profile loads in a
 * few dozen milliseconds. Stored bytes are never trusted: a packed value that
 * does not decode or names a missing row is reported as corruption. */
#include "store/store-internal.h"

#include <ctype.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Ids closer than this are fetched in one range scan. */
#define RANGE_GAP 64

/* Decoded blobs kept while one call reads a run of them (a node's sample
 * sets in time order): each is a delta on the one before, so with the
 * previous link at hand a read decompresses one blob instead of its whole
 * chain. Lives only for that call: an id's bytes never change within it. */
#define BLOB_CACHE_SLOTS 4

struct blob_cache {
    int64_t id[BLOB_CACHE_SLOTS];
    void *data[BLOB_CACHE_SLOTS];
    size_t len[BLOB_CACHE_SLOTS];
    unsigned next;
};

static bool blob_cache_get(const struct blob_cache *c, int64_t id, void **ret, size_t *ret_len)
{
    for (unsigned i = 0; c && i < BLOB_CACHE_SLOTS; i++)
        if (c->data[i] && c->id[i] == id) {
            *ret = hp_xmalloc(c->len[i] ? c->len[i] : 1);
            memcpy(*ret, c->data[i], c->len[i]);
            *ret_len = c->len[i];
            return true;
        }
    return false;
}

static void blob_cache_put(struct blob_cache *c, int64_t id, const void *data, size_t len)
{
    if (!c)
        return;
    unsigned i = c->next++ % BLOB_CACHE_SLOTS;
    free(c->data[i]);
    c->data[i] = hp_xmalloc(len ? len : 1);
    memcpy(c->data[i], data, len);
    c->len[i] = len;
    c->id[i] = id;
}

static void blob_cache_release(struct blob_cache *c)
{
    for (unsigned i = 0; i < BLOB_CACHE_SLOTS; i++)
        free(c->data[i]);
}

static int blob_load_depth(struct store *s, enum store_stmt_id get, int64_t id, int depth,
                           struct blob_cache *cache, void **ret, size_t *ret_len,
                           struct hp_buf *err)
{
    const char *what = get == STMT_RAW_GET ? "raw dump"
                       : get == STMT_SS_GET ? "sample set"
                                            : "packed function totals";
    if (depth > STORE_CHAIN_GUARD) {
        hp_err_printf(err, "%s: %s %lld: delta chain longer than %d links (a loop?)", s->path,
                      what, (long long)id, STORE_CHAIN_GUARD);
        return HP_ECORRUPT;
    }
    sqlite3_stmt *st;
    int r = store_stmt(s, get, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "reading a stored blob", err)) < 0)
        return r;
    if (r == 0 && depth == 0 && get == STMT_FTR_GET) {
        *ret = NULL; /* a snapshot without a packed rest */
        *ret_len = 0;
        return 0;
    }
    if (r == 0) {
        hp_err_printf(err, "%s: %s %lld is missing", s->path, what, (long long)id);
        return HP_ECORRUPT;
    }
    int64_t size = sqlite3_column_int64(st, 0);
    int64_t base_id = sqlite3_column_int64(st, 1);
    size_t zlen = (size_t)sqlite3_column_bytes(st, 2);
    void *z = hp_xmalloc(zlen ? zlen : 1);
    if (zlen)
        memcpy(z, sqlite3_column_blob(st, 2), zlen);
    sqlite3_reset(st);
    void *base = NULL, *out = NULL;
    size_t base_len = 0;
    if (size < 0 || base_id == id) {
        hp_err_printf(err, "%s: %s %lld has a bad header", s->path, what, (long long)id);
        r = HP_ECORRUPT;
        goto out;
    }
    if (base_id && !blob_cache_get(cache, base_id, &base, &base_len) &&
        (r = blob_load_depth(s, get, base_id, depth + 1, cache, &base, &base_len, err)) < 0)
        goto out;
    if ((r = store_zstd_decompress(s, z, zlen, base, base_len, (size_t)size, &out, err)) < 0)
        goto out;
    blob_cache_put(cache, id, out, (size_t)size);
    *ret = out;
    *ret_len = (size_t)size;
out:
    free(z);
    free(base);
    return r;
}

int store_blob_load(struct store *s, enum store_stmt_id get, int64_t id, void **ret,
                    size_t *ret_len, struct hp_buf *err)
{
    return blob_load_depth(s, get, id, 0, NULL, ret, ret_len, err);
}

/* ---- loading a profile ---------------------------------------------------- */

/* A set of database ids numbered densely in first-seen order, so the rows
 * fetched for them land in plain arrays. */
struct idset {
    struct hp_map64 map; /* id -> dense index (with a cache: the ids it lost) */
    int64_t *ids;
    size_t n, cap;
    /* Optional direct-mapped cache in front of the map: a stack's location
     * ids repeat across stacks and sit in a narrow id range, so most
     * lookups end here. An id lives in its slot until another id that
     * maps to the slot takes it, and only then goes to the map: a set
     * whose ids do not collide (a node's 16k locations) never hashes one
     * (a lookup and an insert an id were a twelfth of loading a 20k-stack
     * snapshot). */
    struct idset_slot {
        int64_t id;
        uint32_t v;
    } *cache;
};

#define IDSET_CACHE 16384

static uint32_t idset_add_slow(struct idset *set, int64_t id, struct idset_slot *slot)
{
    uint32_t v;
    if (slot) {
        /* Not in its slot: seen before only if a collision moved it to
         * the map. */
        if (set->map.len && hp_map64_get(&set->map, (uint64_t)id, &v))
            return v;
    } else if (hp_map64_get(&set->map, (uint64_t)id, &v)) {
        return v;
    }
    set->ids = hp_xgrow(set->ids, &set->cap, set->n + 1, sizeof(*set->ids));
    set->ids[set->n] = id;
    v = (uint32_t)set->n++;
    uint32_t old;
    if (slot) {
        if (slot->id) /* the slot's id makes room */
            (void)hp_map64_put(&set->map, (uint64_t)slot->id, slot->v, &old);
        *slot = (struct idset_slot){ id, v };
    } else {
        (void)hp_map64_put(&set->map, (uint64_t)id, v, &old);
    }
    return v;
}

/* Inline for the cache's hit, most of a node's location ids (a stack's
 * locations repeat the previous stacks'): called out of line, the call was
 * most of the cost. */
static inline uint32_t idset_add(struct idset *set, int64_t id)
{
    /* Real ids are > 0; anything else (corrupt data) bypasses the cache,
     * whose zeroed slots would otherwise match id 0. */
    struct idset_slot *slot =
        set->cache && id > 0 ? &set->cache[(uint64_t)id % IDSET_CACHE] : NULL;
    if (slot && slot->id == id)
        return slot->v;
    return idset_add_slow(set, id, slot);
}

static int64_t idset_find(const struct idset *set, int64_t id)
{
    const struct idset_slot *slot =
        set->cache && id > 0 ? &set->cache[(uint64_t)id % IDSET_CACHE] : NULL;
    if (slot && slot->id == id)
        return slot->v;
    uint32_t v;
    return hp_map64_get(&set->map, (uint64_t)id, &v) ? (int64_t)v : -1;
}

static void idset_release(struct idset *set)
{
    free(set->cache);
    hp_map64_release(&set->map);
    free(set->ids);
}

/* Fetch the rows of `range` (id BETWEEN ?1 AND ?2) for every id of the set
 * in a few range scans, calling cb(ctx, dense index, stmt) for each. The
 * set's ids are radix sorted with their dense indexes, and each scan's rows,
 * which come in id order, are matched by walking that list: a hash lookup
 * a row and qsort's comparator calls were a fifth of loading a node's
 * stacks for `query leaks`. */
typedef int (*range_row_cb)(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err);
/* Whether the row of dense index i is at hand already (from a stack view):
 * not fetched. */
typedef bool (*range_have_fn)(const void *ctx, size_t i);

static int range_fetch(struct store *s, enum store_stmt_id range, const struct idset *set,
                       range_have_fn have, range_row_cb cb, void *ctx, struct hp_buf *err)
{
    size_t n = 0;
    /* Signed order as unsigned keys: the sign bit flipped. */
    const uint64_t flip = UINT64_C(1) << 63;
    struct hp_sort_item *v = hp_xmalloc((set->n + 1) * sizeof(*v));
    for (size_t k = 0; k < set->n; k++)
        if (!have || !have(ctx, k))
            v[n++] = (struct hp_sort_item){ (uint64_t)set->ids[k] ^ flip, k };
    hp_radix_sort(v, n);
    int r = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j + 1 < n && (v[j + 1].key ^ flip) - (v[j].key ^ flip) <= RANGE_GAP)
            j++;
        sqlite3_stmt *st;
        if ((r = store_stmt(s, range, &st, err)) < 0)
            goto out;
        sqlite3_bind_int64(st, 1, (int64_t)(v[i].key ^ flip));
        sqlite3_bind_int64(st, 2, (int64_t)(v[j].key ^ flip));
        size_t k = i;
        while ((r = store_step_row(s, st, "loading a profile", err)) == 1) {
            uint64_t key = (uint64_t)sqlite3_column_int64(st, 0) ^ flip;
            while (k <= j && v[k].key < key)
                k++;
            if (k <= j && v[k].key == key && (r = cb(ctx, v[k].i, st, err)) < 0) {
                sqlite3_reset(st);
                goto out;
            }
        }
        if (r < 0)
            goto out;
        sqlite3_reset(st);
        i = j + 1;
    }
out:
    free(v);
    return r;
}

struct ld_stack {
    size_t off; /* into ld.stack_lids */
    uint32_t n;
    bool found;
    uint32_t pidx; /* profile stack index + 1 once added */
};

struct ld_loc {
    int64_t object_id;
    uint64_t address;
    uint32_t flags;
    size_t frame_off; /* into ld.frames */
    uint32_t nframes;
    bool found;
    uint32_t pidx; /* profile location index */
};

struct ld_frame {
    int64_t fid, file;
    int64_t fn_ix, file_ix; /* dense indexes into fn_names/file_names, -1 none */
    uint32_t line;
};

struct ld_name {
    const char *s; /* interned in the profile, NULL if missing */
};

struct ld_map {
    int64_t obj;
    uint64_t offset, end;
    size_t idx; /* into p->mappings */
};

struct loader {
    struct store *s;
    struct profile *p;
    int64_t snap_id;
    struct idset stackset, locset, fnset, fileset;
    struct ld_stack *stacks;
    uint32_t *stack_lids; /* dense location indexes */
    size_t nstack_lids, stack_lids_cap;
    struct ld_loc *locs;
    struct ld_frame *frames;
    size_t nframes, frames_cap;
    struct ld_name *fn_names, *file_names;
};

static int corrupt(struct loader *ld, const char *what, struct hp_buf *err)
{
    hp_err_printf(err, "%s: snapshot #%lld: %s", ld->s->path, (long long)ld->snap_id, what);
    return HP_ECORRUPT;
}

static int stack_row_cb(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err)
{
    struct loader *ld = ctx;
    struct store_unpack u = store_unpack_column(st, 1);
    uint64_t n = store_unpack_u64(&u);
    if (u.bad || n == 0 || n > (uint64_t)(u.end - u.p))
        return corrupt(ld, "a stored stack does not decode", err);
    ld->stack_lids = hp_xgrow(ld->stack_lids, &ld->stack_lids_cap, ld->nstack_lids + n,
                              sizeof(*ld->stack_lids));
    struct ld_stack *sk = &ld->stacks[i];
    sk->off = ld->nstack_lids;
    sk->n = (uint32_t)n;
    sk->found = true;
    for (uint64_t k = 0; k < n; k++)
        ld->stack_lids[ld->nstack_lids++] =
            idset_add(&ld->locset, (int64_t)store_unpack_u64(&u));
    if (u.bad)
        return corrupt(ld, "a stored stack does not decode", err);
    return 0;
}

static int loc_row_cb(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err)
{
    struct loader *ld = ctx;
    struct ld_loc *l = &ld->locs[i];
    l->object_id = sqlite3_column_int64(st, 1);
    l->address = (uint64_t)sqlite3_column_int64(st, 2);
    l->flags = (uint32_t)sqlite3_column_int64(st, 3);
    l->found = true;
    l->frame_off = ld->nframes;
    if (sqlite3_column_type(st, 4) == SQLITE_NULL)
        return 0;
    struct store_unpack u = store_unpack_column(st, 4);
    uint64_t n = store_unpack_u64(&u);
    if (u.bad || n > (uint64_t)(u.end - u.p))
        return corrupt(ld, "stored frames do not decode", err);
    ld->frames = hp_xgrow(ld->frames, &ld->frames_cap, ld->nframes + n, sizeof(*ld->frames));
    for (uint64_t k = 0; k < n; k++) {
        struct ld_frame *f = &ld->frames[ld->nframes++];
        f->fid = (int64_t)store_unpack_u64(&u);
        f->file = (int64_t)store_unpack_u64(&u);
        f->line = (uint32_t)store_unpack_u64(&u);
    }
    if (u.bad)
        return corrupt(ld, "stored frames do not decode", err);
    l->nframes = (uint32_t)n;
    return 0;
}

static int fn_row_cb(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err)
{
    struct loader *ld = ctx;
    const char *t = (const char *)sqlite3_column_text(st, 1);
    ld->fn_names[i].s = profile_intern(ld->p, t ? t : "", (size_t)sqlite3_column_bytes(st, 1));
    return 0;
}

static int file_row_cb(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err)
{
    struct loader *ld = ctx;
    const char *t = (const char *)sqlite3_column_text(st, 1);
    ld->file_names[i].s =
        profile_intern(ld->p, t ? t : "", (size_t)sqlite3_column_bytes(st, 1));
    return 0;
}

static const char *name_of(const struct idset *set, const struct ld_name *names, int64_t id)
{
    if (id <= 0)
        return NULL;
    int64_t k = idset_find(set, id);
    return k >= 0 ? names[k].s : NULL;
}

static int ld_map_cmp(const void *a, const void *b)
{
    const struct ld_map *x = a, *y = b;
    if (x->obj != y->obj)
        return x->obj < y->obj ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void loader_release(struct loader *ld)
{
    idset_release(&ld->stackset);
    idset_release(&ld->locset);
    idset_release(&ld->fnset);
    idset_release(&ld->fileset);
    free(ld->stacks);
    free(ld->stack_lids);
    free(ld->locs);
    free(ld->frames);
    free(ld->fn_names);
    free(ld->file_names);
}


/* ---- stack views (view.c): rows at hand instead of fetched ---- */

static bool stack_have(const void *ctx, size_t i)
{
    return ((const struct loader *)ctx)->stacks[i].found;
}

static bool loc_have(const void *ctx, size_t i)
{
    return ((const struct loader *)ctx)->locs[i].found;
}

static bool fn_have(const void *ctx, size_t i)
{
    return ((const struct loader *)ctx)->fn_names[i].s != NULL;
}

static bool file_have(const void *ctx, size_t i)
{
    return ((const struct loader *)ctx)->file_names[i].s != NULL;
}

/* An object's current location generation (0 before its first change). */
static int loc_gen(struct store *s, int64_t obj, uint64_t *ret, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_LOC_GEN_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, obj);
    r = store_step_row(s, st, "reading a location generation", err);
    *ret = r == 1 ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return r < 0 ? r : 0;
}

/* Whether a view's objects still have the location generations it copied
 * (1), or one of them moved since (0). */
static int objs_current(struct store *s, const struct store_view_obj *objs, size_t n,
                        struct hp_buf *err)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t gen;
        int r = loc_gen(s, objs[k].id, &gen, err);
        if (r < 0 || gen != objs[k].gen)
            return r < 0 ? r : 0;
    }
    return 1;
}

/* A view's recorded size is one zstd could have made of zlen bytes: a
 * larger one is a lie, and no buffer is sized by it. */
static bool view_size_ok(int64_t size, size_t zlen)
{
    return size > 0 && (uint64_t)size <= (uint64_t)zlen * 1024 + 4096;
}

/* The node's view sv decoded into *out, when it decodes and its objects'
 * locations did not change since it was written (1); else 0: its rows are
 * fetched instead, as for a node with no view. */
static int view_open(struct store *s, const struct store_stack_view *sv, struct store_view *out,
                     struct hp_buf *err)
{
    struct hp_buf e = HP_BUF_INIT(0);
    int r = store_view_unpack(sv->data, sv->len, out, &e);
    hp_buf_release(&e);
    if (r < 0)
        return 0;
    if ((r = objs_current(s, out->objs, out->nobjs, err)) != 1)
        store_view_release(out);
    return r;
}

int store_view_current(struct store *s, int64_t node_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_VIEW_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    if ((r = store_step_row(s, st, "reading a stack view", err)) != 1) {
        sqlite3_reset(st);
        return r < 0 ? r : HP_ENOTFOUND;
    }
    int64_t size = sqlite3_column_int64(st, 2);
    const void *z = sqlite3_column_blob(st, 3);
    size_t zlen = (size_t)sqlite3_column_bytes(st, 3);
    /* A view's objects are a few dozen pairs: its first 16 KB hold them,
     * decompressed in a block or two instead of the megabyte a 20k-stack
     * node's view is. All of it only when they do not fit. */
    size_t cap = 16384, got = 0;
    void *head = hp_xmalloc(cap);
    struct store_view_obj *objs = NULL;
    size_t nobjs = 0;
    int found = size > 0 && store_zstd_decompress_prefix(s, z, zlen, head, cap, &got) == 0
                    ? store_view_objs(head, got, &objs, &nobjs)
                    : -1;
    if (found == 0 && got == cap) {
        void *all = NULL;
        struct hp_buf e = HP_BUF_INIT(0);
        found = view_size_ok(size, zlen) &&
                        store_zstd_decompress(s, z, zlen, NULL, 0, (size_t)size, &all, &e) == 0
                    ? store_view_objs(all, (size_t)size, &objs, &nobjs)
                    : -1;
        hp_buf_release(&e);
        free(all);
    }
    sqlite3_reset(st);
    free(head);
    /* Damaged (does not decompress, or ends before its objects): not
     * current, so that it is written again. */
    r = found == 1 ? objs_current(s, objs, nobjs, err) : 0;
    free(objs);
    return r;
}

/* The stacks of the set that view v holds and no view before it did. A
 * view's locations get their dense indexes once (dense[]), not once per
 * stack that lists them. */
static void view_stacks(struct loader *ld, const struct store_view *v)
{
    uint32_t *dense = hp_xmalloc((v->nlocs + 1) * sizeof(*dense));
    memset(dense, 0xff, (v->nlocs + 1) * sizeof(*dense));
    for (size_t i = 0; i < v->nstacks; i++) {
        const struct store_view_stack *vs = &v->stacks[i];
        int64_t k = idset_find(&ld->stackset, vs->id);
        if (k < 0 || ld->stacks[k].found)
            continue;
        ld->stack_lids = hp_xgrow(ld->stack_lids, &ld->stack_lids_cap,
                                  ld->nstack_lids + vs->n, sizeof(*ld->stack_lids));
        struct ld_stack *sk = &ld->stacks[k];
        sk->off = ld->nstack_lids;
        sk->n = vs->n;
        sk->found = true;
        for (uint32_t j = 0; j < vs->n; j++) {
            uint32_t x = v->stack_locs[vs->off + j];
            if (dense[x] == UINT32_MAX)
                dense[x] = idset_add(&ld->locset, v->locs[x].id);
            ld->stack_lids[ld->nstack_lids++] = dense[x];
        }
    }
    free(dense);
}

static void view_locs(struct loader *ld, const struct store_view *v)
{
    for (size_t i = 0; i < v->nlocs; i++) {
        const struct store_view_loc *vl = &v->locs[i];
        int64_t k = idset_find(&ld->locset, vl->id);
        if (k < 0 || ld->locs[k].found)
            continue;
        struct ld_loc *l = &ld->locs[k];
        l->object_id = vl->object_id;
        l->address = vl->address;
        l->flags = vl->flags;
        l->found = true;
        l->frame_off = ld->nframes;
        l->nframes = vl->nframes;
        ld->frames = hp_xgrow(ld->frames, &ld->frames_cap, ld->nframes + vl->nframes,
                              sizeof(*ld->frames));
        for (uint32_t j = 0; j < vl->nframes; j++) {
            const struct store_view_frame *f = &v->frames[vl->frame_off + j];
            ld->frames[ld->nframes++] = (struct ld_frame){ .fid = f->fid, .file = f->file,
                                                           .line = f->line };
        }
    }
}

static void view_names(struct loader *ld, const struct idset *set, struct ld_name *names,
                       const struct store_view_name *vn, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t k = idset_find(set, vn[i].id);
        if (k >= 0 && !names[k].s)
            names[k].s = profile_intern(ld->p, vn[i].s, vn[i].len);
    }
}

/* The rows behind the set's stacks (ld->stackset, filled): stacks, their
 * locations and frames, the function names, and unless no_files the file
 * names; from the views what they hold, then the rest in range scans. */
static int loader_fetch(struct loader *ld, const struct store_view *views, size_t nviews,
                        bool no_files, struct hp_buf *err)
{
    struct store *s = ld->s;
    int r;
    ld->stacks = hp_xcalloc(ld->stackset.n + 1, sizeof(*ld->stacks));
    for (size_t v = 0; v < nviews; v++)
        view_stacks(ld, &views[v]);
    if ((r = range_fetch(s, STMT_STACKS_RANGE, &ld->stackset, nviews ? stack_have : NULL,
                         stack_row_cb, ld, err)) < 0)
        return r;
    for (size_t i = 0; i < ld->stackset.n; i++)
        if (!ld->stacks[i].found)
            return corrupt(ld, "a stack it names is missing", err);

    /* Locations and their frames. */
    ld->locs = hp_xcalloc(ld->locset.n + 1, sizeof(*ld->locs));
    for (size_t v = 0; v < nviews; v++)
        view_locs(ld, &views[v]);
    if ((r = range_fetch(s, STMT_LOCS_RANGE, &ld->locset, nviews ? loc_have : NULL, loc_row_cb,
                         ld, err)) < 0)
        return r;

    /* Function and file names: their ids repeat across locations too. */
    if (!ld->fnset.cache)
        ld->fnset.cache = hp_xcalloc(IDSET_CACHE, sizeof(*ld->fnset.cache));
    for (size_t i = 0; i < ld->nframes; i++) {
        struct ld_frame *f = &ld->frames[i];
        f->fn_ix = f->fid > 0 ? (int64_t)idset_add(&ld->fnset, f->fid) : -1;
        f->file_ix = f->file > 0 && !no_files ? (int64_t)idset_add(&ld->fileset, f->file) : -1;
    }
    for (size_t i = 0; i < ld->locset.n; i++) {
        if (!ld->locs[i].found)
            return corrupt(ld, "a location it names is missing", err);
        if (ld->locs[i].object_id == -1)
            (void)idset_add(&ld->fnset, (int64_t)ld->locs[i].address);
    }
    ld->fn_names = hp_xcalloc(ld->fnset.n + 1, sizeof(*ld->fn_names));
    ld->file_names = hp_xcalloc(ld->fileset.n + 1, sizeof(*ld->file_names));
    for (size_t v = 0; v < nviews; v++) {
        view_names(ld, &ld->fnset, ld->fn_names, views[v].fns, views[v].nfns);
        if (!no_files)
            view_names(ld, &ld->fileset, ld->file_names, views[v].files, views[v].nfiles);
    }
    if ((r = range_fetch(s, STMT_FUNCS_RANGE, &ld->fnset, nviews ? fn_have : NULL, fn_row_cb,
                         ld, err)) < 0 ||
        (r = range_fetch(s, STMT_FILES_RANGE, &ld->fileset, nviews ? file_have : NULL,
                         file_row_cb, ld, err)) < 0)
        return r;
    return 0;
}

/* Sorted order of a set's ids: rank[dense] = place, and the dense indexes
 * in id order into *ret_order. */
static void set_order(const struct idset *set, uint32_t **ret_rank, uint32_t **ret_order)
{
    struct hp_sort_item *v = hp_xmalloc((set->n + 1) * sizeof(*v));
    uint32_t *rank = hp_xmalloc((set->n + 1) * sizeof(*rank));
    uint32_t *order = hp_xmalloc((set->n + 1) * sizeof(*order));
    for (size_t k = 0; k < set->n; k++) /* ids of rows are > 0 */
        v[k] = (struct hp_sort_item){ (uint64_t)set->ids[k], k };
    hp_radix_sort(v, set->n);
    for (size_t k = 0; k < set->n; k++) {
        order[k] = (uint32_t)v[k].i;
        rank[v[k].i] = (uint32_t)k;
    }
    free(v);
    *ret_rank = rank;
    *ret_order = order;
}

static struct store_view_name *view_names_of(const struct idset *set, const struct ld_name *names,
                                             size_t *ret_n)
{
    uint32_t *rank, *order;
    set_order(set, &rank, &order);
    struct store_view_name *v = hp_xmalloc((set->n + 1) * sizeof(*v));
    size_t n = 0;
    for (size_t k = 0; k < set->n; k++) {
        const char *t = names[order[k]].s;
        if (t) /* a missing row stays missing: the loader finds no row either */
            v[n++] = (struct store_view_name){ set->ids[order[k]], t, strlen(t) };
    }
    free(rank);
    free(order);
    *ret_n = n;
    return v;
}

int store_view_build(struct store *s, const int64_t *stack_ids, size_t n, struct store_pack *out,
                     struct hp_buf *err)
{
    struct loader ld = { .s = s };
    struct store_view v = { 0 };
    uint32_t *lrank = NULL, *lorder = NULL;
    ld.p = profile_new(PROFILE_FORMAT_UNKNOWN); /* holds the names */
    ld.locset.cache = hp_xcalloc(IDSET_CACHE, sizeof(*ld.locset.cache));
    hp_map64_reserve(&ld.stackset.map, n);
    for (size_t i = 0; i < n; i++)
        if (stack_ids[i] > 0)
            (void)idset_add(&ld.stackset, stack_ids[i]);
    struct hp_buf e = HP_BUF_INIT(0);
    int r = loader_fetch(&ld, NULL, 0, false, &e);
    for (size_t i = 0; r == 0 && i < ld.locset.n; i++)
        if (ld.locs[i].object_id == -1 &&
            !name_of(&ld.fnset, ld.fn_names, (int64_t)ld.locs[i].address))
            r = HP_ECORRUPT; /* the loader calls this corrupt: it shall see the rows */
    if (r == HP_ECORRUPT || r == HP_ENOTFOUND) {
        r = 0; /* no view: readers fetch the rows, and say what is wrong */
        goto out;
    }
    if (r < 0) {
        hp_err_printf(err, "%.*s", (int)e.len, e.data ? e.data : "");
        goto out;
    }
    v.fns = view_names_of(&ld.fnset, ld.fn_names, &v.nfns);
    v.files = view_names_of(&ld.fileset, ld.file_names, &v.nfiles);

    /* Locations in id order, their objects with the current generations. */
    set_order(&ld.locset, &lrank, &lorder);
    v.nlocs = ld.locset.n;
    v.locs = hp_xmalloc((v.nlocs + 1) * sizeof(*v.locs));
    v.frames = hp_xmalloc((ld.nframes + 1) * sizeof(*v.frames));
    int64_t *objs = hp_xmalloc((v.nlocs + 1) * sizeof(*objs));
    for (size_t k = 0; k < v.nlocs; k++) {
        const struct ld_loc *l = &ld.locs[lorder[k]];
        v.locs[k] = (struct store_view_loc){ ld.locset.ids[lorder[k]], l->object_id, l->address,
                                             l->flags, (uint32_t)v.nframes, l->nframes };
        for (uint32_t j = 0; j < l->nframes; j++) {
            const struct ld_frame *f = &ld.frames[l->frame_off + j];
            v.frames[v.nframes++] = (struct store_view_frame){ f->fid, f->file, f->line };
        }
        objs[k] = l->object_id;
    }
    hp_qsort(objs, v.nlocs, sizeof(*objs), hp_cmp_i64);
    v.objs = hp_xmalloc((v.nlocs + 1) * sizeof(*v.objs));
    for (size_t k = 0; r == 0 && k < v.nlocs; k++)
        if (k == 0 || objs[k] != objs[k - 1]) {
            v.objs[v.nobjs].id = objs[k];
            r = loc_gen(s, objs[k], &v.objs[v.nobjs++].gen, err);
        }
    free(objs);
    if (r < 0)
        goto out;

    /* Stacks (store_view_pack orders them), their locations as places in
     * the view's. */
    v.nstacks = ld.stackset.n;
    v.stacks = hp_xmalloc((v.nstacks + 1) * sizeof(*v.stacks));
    v.stack_locs = hp_xmalloc((ld.nstack_lids + 1) * sizeof(*v.stack_locs));
    for (size_t k = 0; k < v.nstacks; k++) {
        const struct ld_stack *sk = &ld.stacks[k];
        v.stacks[k] = (struct store_view_stack){ ld.stackset.ids[k], (uint32_t)v.nstack_locs,
                                                 sk->n };
        for (uint32_t j = 0; j < sk->n; j++)
            v.stack_locs[v.nstack_locs++] = lrank[ld.stack_lids[sk->off + j]];
    }
    store_view_pack(&v, out);
    r = 1;
out:
    hp_buf_release(&e);
    free(lrank);
    free(lorder);
    store_view_release(&v); /* its names are the profile's */
    profile_free(ld.p);
    loader_release(&ld);
    return r;
}

static const char *unpack_opt_str(struct store_unpack *u, struct profile *p)
{
    if (!store_unpack_u64(u))
        return NULL;
    size_t n;
    const char *s = store_unpack_str(u, &n);
    if (memchr(s, 0, n))
        u->bad = true;
    return u->bad ? NULL : profile_intern(p, s, n);
}

/* Decode the packed sample set into p's header, mappings and threads, and
 * the sample list (stack ids not yet resolved). */
static int decode_sample_set(struct loader *ld, const void *blob, size_t len,
                             struct store_sample **ret_samples, size_t *ret_n, size_t *ret_nall,
                             int64_t **ret_mobj, struct hp_buf *err)
{
    struct store_unpack u = { blob, (const unsigned char *)blob + len, false };
    struct profile *p = ld->p;
    struct store_sample *sm = NULL;
    int64_t *mobj = NULL;
    if (store_unpack_u64(&u) != 1)
        return corrupt(ld, "unknown sample set version", err);
    uint64_t fmt = store_unpack_u64(&u), scaling = store_unpack_u64(&u);
    if (fmt > PROFILE_FORMAT_COLLAPSED || scaling > PROFILE_SCALING_V2)
        return corrupt(ld, "bad format or scaling in the sample set", err);
    p->format = (enum profile_format)fmt;
    p->scaling = (enum profile_scaling)scaling;
    p->period = store_unpack_u64(&u);
    p->has_alloc = store_unpack_u64(&u) != 0;
    p->has_header_totals = store_unpack_u64(&u) != 0;
    for (int v = 0; v < PV_COUNT; v++)
        p->header_raw[v] = store_unpack_i64(&u);
    p->time_ns = store_unpack_i64(&u);
    p->hint = unpack_opt_str(&u, p);
    for (int v = 0; v < PV_COUNT; v++)
        p->value_unit[v] = unpack_opt_str(&u, p);

    uint64_t nm = store_unpack_u64(&u);
    if (u.bad || nm > (uint64_t)(u.end - u.p))
        return corrupt(ld, "the sample set does not decode", err);
    mobj = hp_xcalloc(nm + 1, sizeof(*mobj));
    for (uint64_t i = 0; i < nm && !u.bad; i++) {
        struct profile_mapping m = { 0 };
        mobj[i] = (int64_t)store_unpack_u64(&u);
        m.start = store_unpack_u64(&u);
        m.limit = store_unpack_u64(&u);
        m.offset = store_unpack_u64(&u);
        m.inode = store_unpack_u64(&u);
        size_t n;
        const char *perms = store_unpack_str(&u, &n);
        memcpy(m.perms, perms, HP_MIN(n, sizeof(m.perms) - 1));
        m.flags = (uint32_t)store_unpack_u64(&u);
        const char *path = store_unpack_str(&u, &n);
        m.path = u.bad ? "" : profile_intern(p, path, n);
        m.build_id = unpack_opt_str(&u, p);
        if (!u.bad)
            profile_mapping_add(p, &m);
    }
    uint64_t nt = store_unpack_u64(&u);
    if (u.bad || nt > (uint64_t)(u.end - u.p))
        goto bad;
    for (uint64_t i = 0; i < nt && !u.bad; i++) {
        uint64_t id = store_unpack_u64(&u);
        const char *name = unpack_opt_str(&u, p);
        int64_t raw[PV_COUNT];
        for (int v = 0; v < PV_COUNT; v++)
            raw[v] = store_unpack_i64(&u);
        if (!u.bad)
            (void)profile_thread_add(p, id, name, name ? strlen(name) : 0, raw);
    }
    uint64_t ns = store_unpack_u64(&u);
    if (u.bad || ns > (uint64_t)(u.end - u.p))
        goto bad;
    /* Not zeroed: each sample is written whole below, up to where the
     * bytes stop (zeroing them was over a quarter of decoding the sets). */
    sm = hp_xmalloc((ns + 1) * sizeof(*sm));
    int64_t prev = 0;
    for (uint64_t i = 0; i < ns && !u.bad; i++) {
        /* Unsigned: a corrupt delta must not overflow a signed sum. */
        prev = (int64_t)((uint64_t)prev + (uint64_t)store_unpack_i64(&u));
        sm[i] = (struct store_sample){ .stack = prev };
        for (int v = 0; v < PV_COUNT; v++)
            sm[i].raw[v] = store_unpack_i64(&u);
    }
    uint64_t nts = store_unpack_u64(&u);
    if (u.bad || nts > (uint64_t)(u.end - u.p))
        goto bad;
    sm = hp_xrealloc(sm, (ns + nts + 1) * sizeof(*sm));
    prev = 0;
    for (uint64_t i = ns; i < ns + nts && !u.bad; i++) {
        /* Unsigned: a corrupt delta must not overflow a signed sum. */
        prev = (int64_t)((uint64_t)prev + (uint64_t)store_unpack_i64(&u));
        sm[i].stack = prev;
        sm[i].thread = (uint32_t)store_unpack_u64(&u);
        if (sm[i].thread == 0 || sm[i].thread > p->nthreads)
            u.bad = true;
        for (int v = 0; v < PV_COUNT; v++)
            sm[i].raw[v] = store_unpack_i64(&u);
    }
    if (u.bad || u.p != u.end)
        goto bad;
    *ret_samples = sm;
    *ret_n = (size_t)ns;
    *ret_nall = (size_t)(ns + nts);
    *ret_mobj = mobj;
    return 0;
bad:
    free(sm);
    free(mobj);
    return corrupt(ld, "the sample set does not decode", err);
}

int store_sample_set_refs(struct store *s, int64_t ss_id, const void *blob, size_t len,
                          struct hp_map64 *stacks, struct hp_map64 *objects, struct hp_buf *err)
{
    struct loader ld = { .s = s, .snap_id = ss_id };
    struct store_sample *sm = NULL;
    int64_t *mobj = NULL;
    size_t ns, nall;
    uint32_t old;
    ld.p = profile_new(PROFILE_FORMAT_UNKNOWN);
    int r = decode_sample_set(&ld, blob, len, &sm, &ns, &nall, &mobj, err);
    if (r == 0) {
        for (size_t i = 0; i < nall; i++)
            (void)hp_map64_put(stacks, (uint64_t)sm[i].stack, 1, &old);
        for (size_t i = 0; i < ld.p->nmappings; i++)
            if (mobj[i] > 0)
                (void)hp_map64_put(objects, (uint64_t)mobj[i], 1, &old);
    }
    free(sm);
    free(mobj);
    profile_free(ld.p);
    return r;
}

/* The decoded sample set of snapshot id (malloc'd). HP_ENOTFOUND for a
 * missing snapshot or one without a profile. */
static int snap_sample_set(struct store *s, int64_t id, struct blob_cache *cache, void **ret,
                           size_t *ret_len, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r;
    if ((r = store_stmt(s, STMT_SNAP_PROFILE, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "loading a snapshot", err)) < 0)
        return r;
    if (r == 0) {
        hp_err_printf(err, "%s: no snapshot #%lld", s->path, (long long)id);
        return HP_ENOTFOUND;
    }
    char status[32];
    store_col_text(st, 0, status, sizeof(status));
    int64_t ss_id = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    if (strcmp(status, "ok") != 0 || ss_id <= 0) {
        hp_err_printf(err, "%s: snapshot #%lld holds no profile (status %s)", s->path,
                      (long long)id, status);
        return HP_ENOTFOUND;
    }
    if (blob_cache_get(cache, ss_id, ret, ret_len))
        return 0;
    return blob_load_depth(s, STMT_SS_GET, ss_id, 0, cache, ret, ret_len, err);
}

struct ranked {
    double v;
    size_t i;
};

static int ranked_cmp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* store_snapshot_load_top's cut, before any stack is read: keep the `max`
 * heaviest all-threads samples sm[0..*ns) by `rank`, and the per-thread
 * samples sm[*ns..*nall) of their stacks, in stored order; what the rest
 * held (un-sampled with p's header) into *pr. */
static void prune_samples(const struct profile *p, struct store_sample *sm, size_t *ns,
                          size_t *nall, size_t max, enum profile_value rank,
                          struct store_pruned *pr)
{
    memset(pr, 0, sizeof(*pr));
    pr->stacks_total = (int64_t)*ns;
    if (!max || *ns <= max)
        return;
    struct ranked *rk = hp_xmalloc(*ns * sizeof(*rk));
    for (size_t i = 0; i < *ns; i++) {
        struct profile_sample ps = { 0 };
        memcpy(ps.raw, sm[i].raw, sizeof(ps.raw));
        profile_sample_unsample(p, &ps);
        rk[i] = (struct ranked){ ps.value[rank], i };
    }
    hp_qsort(rk, *ns, sizeof(*rk), ranked_cmp);
    bool *keep = hp_xcalloc(*ns, sizeof(*keep));
    for (size_t k = 0; k < max; k++)
        keep[rk[k].i] = true;
    free(rk);
    struct hp_map64 kept;
    hp_map64_init(&kept);
    size_t j = 0;
    for (size_t i = 0; i < *ns; i++) {
        if (keep[i]) {
            uint32_t old;
            (void)hp_map64_put(&kept, (uint64_t)sm[i].stack, 1, &old);
            sm[j++] = sm[i];
            continue;
        }
        struct profile_sample ps = { 0 };
        memcpy(ps.raw, sm[i].raw, sizeof(ps.raw));
        profile_sample_unsample(p, &ps);
        for (int v = 0; v < PV_COUNT; v++)
            pr->dropped[v] += ps.value[v];
        pr->stacks_dropped++;
    }
    size_t kept_ns = j;
    for (size_t i = *ns; i < *nall; i++) {
        uint32_t one;
        if (hp_map64_get(&kept, (uint64_t)sm[i].stack, &one))
            sm[j++] = sm[i];
    }
    hp_map64_release(&kept);
    free(keep);
    *ns = kept_ns;
    *nall = j;
}

/* A snapshot's mappings by (object, file offset), for stored addresses
 * (object-relative) back to runtime ones: *ret (malloc'd), their count. */
static size_t maps_build(const struct profile *p, const int64_t *mobj, struct ld_map **ret)
{
    struct ld_map *maps = hp_xcalloc(p->nmappings + 1, sizeof(*maps));
    size_t n = 0;
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if (mobj[i] > 0)
            maps[n++] = (struct ld_map){ mobj[i], m->offset, m->offset + (m->limit - m->start),
                                         i };
    }
    hp_qsort(maps, n, sizeof(*maps), ld_map_cmp);
    *ret = maps;
    return n;
}

/* Stored address addr of object obj as the snapshot's runtime address:
 * through its mapping of that object (mappings: the snapshot's, in the
 * order maps_build saw them), unchanged where it has none. */
static uint64_t runtime_address(const struct ld_map *maps, size_t nmaps,
                                const struct profile_mapping *mappings, int64_t obj,
                                uint64_t addr)
{
    if (obj <= 0)
        return addr;
    size_t lo = 0, hi = nmaps;
    struct ld_map key = { obj, addr, 0, 0 };
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ld_map_cmp(&maps[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && maps[lo - 1].obj == obj && addr < maps[lo - 1].end) {
        const struct profile_mapping *m = &mappings[maps[lo - 1].idx];
        return addr - m->offset + m->start;
    }
    return addr;
}

/* store_snapshot_load, or with `only` (n stack ids) store_stacks_load, or
 * with `max` store_snapshot_load_top: the snapshot's header and mappings
 * with one zero sample per stack of `only`, or its heaviest `max` stacks;
 * no_files: frames without file names. */
static int load_profile(struct store *s, int64_t id, const int64_t *only, size_t nonly,
                        size_t max, enum profile_value rank, struct store_pruned *pruned,
                        bool no_files, const struct store_view *views, size_t nviews,
                        struct profile **ret, struct hp_buf *err)
{
    struct loader ld = { .s = s, .snap_id = id };
    struct store_sample *sm = NULL;
    struct ld_map *maps = NULL;
    int64_t *mobj = NULL;
    void *blob = NULL;
    size_t blob_len, ns = 0, nall = 0;
    int r;

    if ((r = snap_sample_set(s, id, NULL, &blob, &blob_len, err)) < 0)
        return r;
    ld.p = profile_new(PROFILE_FORMAT_UNKNOWN);
    if ((r = decode_sample_set(&ld, blob, blob_len, &sm, &ns, &nall, &mobj, err)) < 0)
        goto out;
    free(blob);
    blob = NULL;
    if (pruned)
        prune_samples(ld.p, sm, &ns, &nall, max, rank, pruned);
    if (only) {
        sm = hp_xrealloc(sm, (nonly + 1) * sizeof(*sm));
        memset(sm, 0, (nonly + 1) * sizeof(*sm));
        for (size_t i = 0; i < nonly; i++)
            sm[i].stack = only[i];
        ns = nall = nonly;
    }

    /* Stacks: sample stack ids become dense indexes. */
    ld.locset.cache = hp_xcalloc(IDSET_CACHE, sizeof(*ld.locset.cache));
    hp_map64_reserve(&ld.stackset.map, nall);
    for (size_t i = 0; i < nall; i++)
        sm[i].stack = idset_add(&ld.stackset, sm[i].stack);
    if ((r = loader_fetch(&ld, views, nviews, no_files, err)) < 0)
        goto out;

    /* Runtime addresses back from (object, file-relative address) through
     * this snapshot's own mappings. */
    struct profile *p = ld.p;
    size_t nmaps = maps_build(p, mobj, &maps);
    struct profile_frame *pf = NULL;
    size_t pf_cap = 0;
    hp_map64_reserve(&p->loc_index, p->nlocs + ld.locset.n);
    for (size_t i = 0; i < ld.locset.n; i++) {
        struct ld_loc *l = &ld.locs[i];
        uint32_t idx;
        if (l->object_id == -1) {
            const char *name =
                name_of(&ld.fnset, ld.fn_names, (int64_t)l->address);
            if (!name) {
                free(pf);
                r = corrupt(&ld, "a named location has no name", err);
                goto out;
            }
            idx = profile_location_for_name(p, name, strlen(name));
        } else {
            uint64_t addr = runtime_address(maps, nmaps, p->mappings, l->object_id, l->address);
            idx = profile_location_for_address(p, addr);
        }
        l->pidx = idx;
        if (l->nframes && p->locs[idx].nframes == 0) {
            /* The names are already interned in p (fn_row_cb), so the frames
             * go straight into p->frames, as profile_location_set_frames
             * would put them, without hashing every name again. */
            p->frames = hp_xgrow(p->frames, &p->frames_cap, p->nframes + l->nframes,
                                 sizeof(*p->frames));
            for (uint32_t k = 0; k < l->nframes; k++) {
                const struct ld_frame *f = &ld.frames[l->frame_off + k];
                p->frames[p->nframes + k] = (struct profile_frame){
                    .function = f->fn_ix >= 0 ? ld.fn_names[f->fn_ix].s : NULL,
                    .file = f->file_ix >= 0 ? ld.file_names[f->file_ix].s : NULL,
                    .line = f->line,
                };
            }
            p->locs[idx].frame_off = (uint32_t)p->nframes;
            p->locs[idx].nframes = l->nframes;
            p->nframes += l->nframes;
        } else if (l->nframes) {
            pf = hp_xgrow(pf, &pf_cap, l->nframes, sizeof(*pf));
            for (uint32_t k = 0; k < l->nframes; k++) {
                const struct ld_frame *f = &ld.frames[l->frame_off + k];
                pf[k].function = f->fn_ix >= 0 ? ld.fn_names[f->fn_ix].s : NULL;
                pf[k].file = f->file_ix >= 0 ? ld.file_names[f->file_ix].s : NULL;
                pf[k].line = f->line;
            }
            profile_location_set_frames(p, idx, pf, l->nframes);
        }
        p->locs[idx].flags = l->flags;
    }
    free(pf);

    /* Stacks in order of first use, then samples: their arrays sized once
     * (grown by copies, they were a third of the fresh pages leaks over a
     * store touched). */
    uint32_t *tmp = NULL;
    size_t tmp_cap = 0;
    profile_reserve(p, ld.stackset.n, ld.nstack_lids, ns);
    for (size_t i = 0; i < nall; i++) {
        struct ld_stack *sk = &ld.stacks[sm[i].stack];
        if (!sk->pidx) {
            tmp = hp_xgrow(tmp, &tmp_cap, sk->n + 1, sizeof(*tmp));
            for (uint32_t j = 0; j < sk->n; j++)
                tmp[j] = ld.locs[ld.stack_lids[sk->off + j]].pidx;
            sk->pidx = profile_stack_add(p, tmp, sk->n) + 1;
        }
        (void)profile_sample_add(p, sk->pidx - 1, i < ns ? 0 : sm[i].thread, sm[i].raw);
    }
    free(tmp);
    profile_finish(p);
    *ret = p;
    ld.p = NULL;
    r = 0;
out:
    free(blob);
    free(sm);
    free(maps);
    free(mobj);
    profile_free(ld.p);
    loader_release(&ld);
    return r;
}

int store_snapshot_load(struct store *s, int64_t id, struct profile **ret, struct hp_buf *err)
{
    return load_profile(s, id, NULL, 0, 0, PV_INUSE_SPACE, NULL, false, NULL, 0, ret, err);
}

int store_snapshot_load_top(struct store *s, int64_t id, size_t max_stacks,
                            enum profile_value rank, struct profile **ret,
                            struct store_pruned *ret_pruned, struct hp_buf *err)
{
    struct store_pruned pr;
    int r = load_profile(s, id, NULL, 0, max_stacks, rank, &pr, false, NULL, 0, ret, err);
    if (r == 0 && ret_pruned)
        *ret_pruned = pr;
    return r;
}

/* A read transaction around a run of statements, unless one is open
 * (the caller's, or store_read_begin's): one consistent view, and SQLite
 * takes its file locks once instead of around each statement (they were
 * a tenth of reading a node's 720 sample sets, 3% of `query leaks`).
 * *own: this call opened it, and run_tx_end closes it. Nothing on
 * PostgreSQL. */
static int run_tx_begin(struct store *s, bool *own, struct hp_buf *err)
{
    *own = false;
#ifdef STORE_BACKEND_SQLITE
    if (!sqlite3_get_autocommit(s->db))
        return 0;
    int r = store_exec(s, "BEGIN", err);
    if (r < 0)
        return r;
    *own = true;
#else
    (void)s, (void)err;
#endif
    return 0;
}

static void run_tx_end(struct store *s, bool own, bool failed)
{
#ifdef STORE_BACKEND_SQLITE
    if (own && !sqlite3_get_autocommit(s->db)) /* read only: nothing to lose */
        (void)store_exec(s, failed ? "ROLLBACK" : "COMMIT", NULL);
#else
    (void)s, (void)own, (void)failed;
#endif
}

int store_stacks_load(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                      unsigned flags, const struct store_stack_view *sv,
                      struct profile **ret, struct hp_buf *err)
{
    /* The ranges of stacks, locations, functions and files are many
     * statements. */
    bool own;
    struct store_view view;
    int r = run_tx_begin(s, &own, err);
    if (r < 0)
        return r;
    int nviews = sv ? view_open(s, sv, &view, err) : 0;
    if ((r = nviews) >= 0) {
        r = load_profile(s, id, stack_ids, n, 0, PV_INUSE_SPACE, NULL,
                         (flags & STORE_STACKS_NO_FILES) != 0, nviews ? &view : NULL,
                         (size_t)nviews, ret, err);
        if (nviews)
            store_view_release(&view);
    }
    run_tx_end(s, own, r < 0);
    return r;
}

/* ---- stacks resolved for folding (store_stacks_resolve) ---- */

struct rsb {
    struct profile_resolved *r;
    size_t loc_cap, names_cap;
    /* runtime address -> location: a stack of the view and one fetched
     * may list one location; two locations at one address (the profile
     * would make them one) must label alike, or the view is not used. */
    struct hp_map64 by_addr;
};

static uint32_t rsb_loc(struct rsb *b, uint32_t flags)
{
    struct profile_resolved *r = b->r;
    r->loc = hp_xgrow(r->loc, &b->loc_cap, r->nlocs + 1, sizeof(*r->loc));
    r->loc[r->nlocs] = (struct profile_rloc){ flags, (uint32_t)r->nnames, 0, false };
    return (uint32_t)r->nlocs++;
}

/* A name of the location added last; copied into the arena unless `keep`
 * (it lives as long as the result). */
static void rsb_name(struct rsb *b, const char *s, size_t len, bool keep)
{
    struct profile_resolved *r = b->r;
    if (!keep)
        s = hp_arena_strndup(&r->arena, s, len);
    r->names = hp_xgrow(r->names, &b->names_cap, r->nnames + 1, sizeof(*r->names));
    r->names[r->nnames++] = (struct profile_rname){ s, len };
    r->loc[r->nlocs - 1].nnames++;
}

static bool rloc_same(const struct profile_resolved *r, uint32_t a, uint32_t b)
{
    const struct profile_rloc *x = &r->loc[a], *y = &r->loc[b];
    if (x->flags != y->flags || x->nnames != y->nnames)
        return false;
    for (uint32_t i = 0; i < x->nnames; i++) {
        const struct profile_rname *p = &r->names[x->name_off + i], *q = &r->names[y->name_off + i];
        if (p->len != q->len || memcmp(p->s, q->s, p->len) != 0)
            return false;
    }
    return true;
}

/* Location k just built at runtime address addr: the one already there
 * if it labels alike (k is dropped), else -1 (they differ: no view). */
static int64_t rsb_at(struct rsb *b, uint64_t addr, uint32_t k)
{
    uint32_t old;
    if (!hp_map64_put(&b->by_addr, addr, k, &old))
        return k;
    if (!rloc_same(b->r, old, k))
        return -1;
    b->r->nnames = b->r->loc[k].name_off; /* drop k */
    b->r->nlocs--;
    return old;
}

/* Location loc of profile p as a resolved one (its names point into p,
 * labels are copied); cache[loc]: its index + 1 once made. With check, an
 * address another location holds must label alike (-1 if not). */
static int64_t rloc_of_profile(struct rsb *b, const struct profile *p, uint32_t loc,
                               uint32_t *cache, bool check)
{
    if (cache[loc])
        return cache[loc] - 1;
    const struct profile_location *l = &p->locs[loc];
    uint32_t k = rsb_loc(b, l->flags), n = l->nframes ? l->nframes : 1;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t fi = l->nframes ? l->nframes - 1 - j : 0;
        char buf[512];
        const char *name = profile_frame_label(p, loc, fi, buf, sizeof(buf), true);
        rsb_name(b, name, strlen(name), name != buf);
        if (!(fi < l->nframes && p->frames[l->frame_off + fi].function))
            b->r->loc[k].by_address = true;
    }
    int64_t at = check && !(l->flags & PROFILE_LOC_NAMED) ? rsb_at(b, l->address, k) : k;
    if (at >= 0)
        cache[loc] = (uint32_t)at + 1;
    return at;
}

/* Stacks of profile p (sample i is stack i of the request) into r's
 * stacks at places[i] (or i), whose offsets are set. 1 where a location
 * (with check) labels otherwise than another at its address. */
static int resolved_from_profile(struct rsb *b, const struct profile *p, const uint32_t *places,
                                 bool check)
{
    struct profile_resolved *r = b->r;
    uint32_t *cache = hp_xcalloc(p->nlocs + 1, sizeof(*cache));
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < p->nsamples; i++) {
        const struct profile_stack *st = &p->stacks[p->samples[i].stack];
        const uint32_t *locs = profile_stack_locs(p, p->samples[i].stack);
        size_t at = places ? places[i] : i;
        uint32_t *dst = r->locs + r->stack_off[at]; /* st->n places there */
        for (uint32_t k = 0; k < st->n; k++) {
            int64_t x = rloc_of_profile(b, p, locs[k], cache, check);
            if (x < 0) {
                rc = 1;
                break;
            }
            dst[k] = (uint32_t)x;
        }
    }
    free(cache);
    return rc;
}

/* What resolving a view's locations needs (resolve_view). */
struct vres {
    struct rsb *b;
    const struct store_view *v;
    const struct ld_map *maps;
    const struct profile_mapping *pm;
    size_t nmaps;
    const struct profile *p0;    /* the snapshot's mappings, sorted */
    struct hp_map64 fn;          /* function id -> index in v->fns */
    uint32_t *loc_r;             /* view location -> resolved + 1 */
    struct profile_rname *fn_copy;
};

/* View location x as a resolved one: -1 where the view cannot serve (a
 * named location, a function name it lacks, an address another location
 * holds with other labels). */
static int64_t vres_loc(struct vres *c, uint32_t x)
{
    if (c->loc_r[x])
        return c->loc_r[x] - 1;
    const struct store_view *v = c->v;
    const struct store_view_loc *vl = &v->locs[x];
    if (vl->object_id == -1)
        return -1; /* a named location: the profile's way */
    struct rsb *b = c->b;
    uint64_t addr = runtime_address(c->maps, c->nmaps, c->pm, vl->object_id, vl->address);
    uint32_t mapping = UINT32_MAX; /* found when a frame is labelled by its address */
    uint32_t k = rsb_loc(b, vl->flags), nn = vl->nframes ? vl->nframes : 1;
    for (uint32_t q = 0; q < nn; q++) {
        /* Frames are innermost first: names outermost first. */
        uint32_t fi = vl->nframes ? vl->nframes - 1 - q : 0;
        int64_t fid = fi < vl->nframes ? v->frames[vl->frame_off + fi].fid : 0;
        if (fid > 0) {
            uint32_t fx;
            if (!hp_map64_get(&c->fn, (uint64_t)fid, &fx))
                return -1; /* its name is not in the view */
            if (!c->fn_copy[fx].s)
                c->fn_copy[fx] = (struct profile_rname){
                    hp_arena_strndup(&b->r->arena, v->fns[fx].s, v->fns[fx].len), v->fns[fx].len
                };
            rsb_name(b, c->fn_copy[fx].s, c->fn_copy[fx].len, true);
        } else {
            char buf[512];
            if (mapping == UINT32_MAX)
                mapping = profile_mapping_find(c->p0, addr);
            const char *l = profile_address_label(c->p0, addr, mapping, buf, sizeof(buf), true);
            rsb_name(b, l, strlen(l), false);
            b->r->loc[k].by_address = true;
        }
    }
    int64_t at = rsb_at(b, addr, k);
    if (at >= 0)
        c->loc_r[x] = (uint32_t)at + 1;
    return at;
}

/* The view path: 1 built, 0 the view cannot serve (see vres_loc): the
 * caller builds from a profile. */
static int resolve_view(struct store *s, int64_t id, const int64_t *ids, size_t n,
                        const struct store_view *v, struct rsb *b, struct hp_buf *err)
{
    struct profile_resolved *r = b->r;
    struct loader ld = { .s = s, .snap_id = id };
    void *blob = NULL;
    size_t blob_len, ns = 0, nall = 0;
    struct store_sample *sm = NULL;
    int64_t *mobj = NULL;
    struct ld_map *maps = NULL;
    struct profile_mapping *pm = NULL;
    struct hp_map64 vstack;
    hp_map64_init(&vstack);
    struct vres c = { .b = b, .v = v };
    hp_map64_init(&c.fn);
    int64_t *missing = NULL;
    uint32_t *missing_at = NULL, *vidx = NULL;
    struct profile *p2 = NULL;
    int rc;
    /* The snapshot's mappings, scaling and period: its sample set's head. */
    if ((rc = snap_sample_set(s, id, NULL, &blob, &blob_len, err)) < 0)
        return rc;
    ld.p = profile_new(PROFILE_FORMAT_UNKNOWN);
    if ((rc = decode_sample_set(&ld, blob, blob_len, &sm, &ns, &nall, &mobj, err)) < 0)
        goto out;
    struct profile *p0 = ld.p;
    r->scaling = p0->scaling;
    r->period = p0->period;
    size_t nmaps = maps_build(p0, mobj, &maps);
    /* The mappings in the order maps_build saw them: profile_finish sorts
     * p0's by start, which profile_mapping_find needs. */
    pm = hp_xmalloc((p0->nmappings + 1) * sizeof(*pm));
    memcpy(pm, p0->mappings, p0->nmappings * sizeof(*pm));
    profile_finish(p0); /* mappings sorted by start, as the profile's */
    c.maps = maps;
    c.pm = pm;
    c.nmaps = nmaps;
    c.p0 = p0;

    hp_map64_reserve(&vstack, v->nstacks);
    for (size_t i = 0; i < v->nstacks; i++) {
        uint32_t old;
        (void)hp_map64_put(&vstack, (uint64_t)v->stacks[i].id, (uint32_t)i, &old);
    }
    hp_map64_reserve(&c.fn, v->nfns);
    for (size_t i = 0; i < v->nfns; i++) {
        uint32_t old;
        (void)hp_map64_put(&c.fn, (uint64_t)v->fns[i].id, (uint32_t)i, &old);
    }
    c.loc_r = hp_xcalloc(v->nlocs + 1, sizeof(*c.loc_r));
    c.fn_copy = hp_xcalloc(v->nfns + 1, sizeof(*c.fn_copy));
    hp_map64_reserve(&b->by_addr, v->nlocs);
    /* Each stack's length (the view's, or its profile's), then their places
     * in the order asked. */
    vidx = hp_xmalloc((n + 1) * sizeof(*vidx));
    uint32_t *len = r->stack_off; /* lengths first, made offsets below */
    size_t nmissing = 0;
    missing = hp_xmalloc((n + 1) * sizeof(*missing));
    missing_at = hp_xmalloc((n + 1) * sizeof(*missing_at));
    for (size_t i = 0; i < n; i++) {
        uint32_t k;
        if (hp_map64_get(&vstack, (uint64_t)ids[i], &k)) {
            vidx[i] = k;
            len[i] = v->stacks[k].n;
        } else {
            vidx[i] = UINT32_MAX;
            missing_at[nmissing] = (uint32_t)i;
            missing[nmissing++] = ids[i];
        }
    }
    /* The rest (the open span's new stacks, mostly) from their profile, of
     * them only: new stacks bring new locations, which the view lacks. */
    if (nmissing) {
        if ((rc = load_profile(s, id, missing, nmissing, 0, PV_INUSE_SPACE, NULL, true, v, 1,
                               &p2, err)) < 0)
            goto out;
        for (size_t j = 0; j < nmissing; j++)
            len[missing_at[j]] = p2->stacks[p2->samples[j].stack].n;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = len[i];
        r->stack_off[i] = (uint32_t)total;
        total += l;
    }
    r->stack_off[n] = (uint32_t)total;
    r->locs = hp_xmalloc((total + 1) * sizeof(*r->locs));
    rc = 1;
    for (size_t i = 0; rc == 1 && i < n; i++) {
        if (vidx[i] == UINT32_MAX)
            continue;
        const struct store_view_stack *vs = &v->stacks[vidx[i]];
        uint32_t *dst = r->locs + r->stack_off[i];
        for (uint32_t j = 0; rc == 1 && j < vs->n; j++) {
            uint32_t vx = v->stack_locs[vs->off + j];
            int64_t x = c.loc_r[vx] ? (int64_t)c.loc_r[vx] - 1 : vres_loc(&c, vx);
            if (x < 0)
                rc = 0;
            else
                dst[j] = (uint32_t)x;
        }
    }
    if (rc == 1 && nmissing && p2 && resolved_from_profile(b, p2, missing_at, true) != 0)
        rc = 0;
    if (rc == 1) {
        r->profile = p2;
        p2 = NULL;
        r->from_view = true;
    }
out:
    free(blob);
    free(sm);
    free(mobj);
    free(maps);
    free(pm);
    free(vidx);
    free(c.loc_r);
    free(c.fn_copy);
    free(missing);
    free(missing_at);
    profile_free(p2);
    profile_free(ld.p);
    hp_map64_release(&vstack);
    hp_map64_release(&c.fn);
    loader_release(&ld);
    return rc;
}

static void resolved_reset(struct profile_resolved *r, struct rsb *b)
{
    r->nlocs = r->nnames = 0;
    free(r->locs);
    r->locs = NULL;
    profile_free(r->profile);
    r->profile = NULL;
    r->from_view = false;
    hp_arena_release(&r->arena);
    hp_arena_init(&r->arena);
    hp_map64_release(&b->by_addr);
    hp_map64_init(&b->by_addr);
}

int store_stacks_resolve(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                         unsigned flags, const struct store_stack_view *sv,
                         struct profile_resolved **ret, struct hp_buf *err)
{
    bool own;
    int r = run_tx_begin(s, &own, err);
    if (r < 0)
        return r;
    struct profile_resolved *res = hp_xcalloc(1, sizeof(*res));
    hp_arena_init(&res->arena);
    res->nstacks = n;
    res->stack_off = hp_xcalloc(n + 1, sizeof(*res->stack_off));
    struct rsb b = { .r = res };
    hp_map64_init(&b.by_addr);
    struct store_view view;
    int nviews = sv && !(flags & STORE_RESOLVE_NO_VIEW) ? view_open(s, sv, &view, err) : 0;
    r = nviews < 0 ? nviews : 0;
    if (nviews > 0) {
        r = resolve_view(s, id, stack_ids, n, &view, &b, err);
        if (r == 0)
            resolved_reset(res, &b);
    }
    if (r == 0) {
        /* From a profile of them all, as store_stacks_load gives it. */
        struct profile *p = NULL;
        r = load_profile(s, id, stack_ids, n, 0, PV_INUSE_SPACE, NULL, true,
                         nviews > 0 ? &view : NULL, nviews > 0, &p, err);
        if (r == 0) {
            size_t total = 0;
            for (size_t i = 0; i < n; i++) {
                res->stack_off[i] = (uint32_t)total;
                total += p->stacks[p->samples[i].stack].n;
            }
            res->stack_off[n] = (uint32_t)total;
            res->locs = hp_xmalloc((total + 1) * sizeof(*res->locs));
            res->scaling = p->scaling;
            res->period = p->period;
            (void)resolved_from_profile(&b, p, NULL, false);
            res->profile = p;
        }
    } else if (r == 1) {
        r = 0;
    }
    if (nviews > 0)
        store_view_release(&view);
    hp_map64_release(&b.by_addr);
    run_tx_end(s, own, r < 0);
    if (r < 0) {
        profile_resolved_free(res);
        return r;
    }
    *ret = res;
    return 0;
}

int store_stack_view_get(struct store *s, int64_t node_id, struct store_stack_view *ret,
                         struct hp_buf *err)
{
    sqlite3_stmt *st;
    memset(ret, 0, sizeof(*ret));
    int r = store_stmt(s, STMT_VIEW_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    if ((r = store_step_row(s, st, "reading a stack view", err)) == 1) {
        ret->first_id = sqlite3_column_int64(st, 0);
        ret->last_id = sqlite3_column_int64(st, 1);
        int64_t size = sqlite3_column_int64(st, 2);
        const void *z = sqlite3_column_blob(st, 3);
        size_t zlen = (size_t)sqlite3_column_bytes(st, 3);
        /* Derived: a view that does not decompress is no view (the rows are
         * read), and a size zstd could not have made is a lie. */
        struct hp_buf e = HP_BUF_INIT(0);
        if (!view_size_ok(size, zlen) ||
            store_zstd_decompress(s, z, zlen, NULL, 0, (size_t)size, &ret->data, &e) < 0)
            r = 0;
        else
            ret->len = (size_t)size;
        hp_buf_release(&e);
    }
    sqlite3_reset(st);
    return r < 0 ? r : r == 1 ? 0 : HP_ENOTFOUND;
}

/* How stored addresses become this snapshot's runtime addresses and
 * names: its mappings, with their objects, in stored order. */
uint64_t store_layout_hash(const struct profile *p, const int64_t *mobj)
{
    uint64_t h = hp_hash_bytes(&p->nmappings, sizeof(p->nmappings), 0x6c61796f7574u);
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        uint64_t v[5] = { (uint64_t)mobj[i], m->start, m->limit, m->offset, m->flags };
        h = hp_hash_bytes(v, sizeof(v), h);
        h = hp_hash_bytes(m->path ? m->path : "", m->path ? strlen(m->path) : 0, h);
    }
    return h;
}

int store_snapshots_samples(struct store *s, const int64_t *ids, size_t n, store_samples_cb cb,
                            void *ctx, struct hp_buf *err)
{
    struct blob_cache cache = { 0 };
    bool own;
    int r = run_tx_begin(s, &own, err);
    if (r < 0)
        return r;
    for (size_t k = 0; k < n && r == 0; k++) {
        struct loader ld = { .s = s, .snap_id = ids[k] };
        struct store_sample *sm = NULL;
        int64_t *mobj = NULL;
        void *blob = NULL;
        size_t blob_len, ns = 0, nall = 0;
        if ((r = snap_sample_set(s, ids[k], &cache, &blob, &blob_len, err)) < 0)
            break;
        ld.p = profile_new(PROFILE_FORMAT_UNKNOWN);
        r = decode_sample_set(&ld, blob, blob_len, &sm, &ns, &nall, &mobj, err);
        free(blob);
        if (r == 0) {
            struct store_samples ss = { .snapshot_id = ids[k], .profile = ld.p,
                                        .samples = sm, .n = ns,
                                        .layout = store_layout_hash(ld.p, mobj) };
            r = cb(&ss, ctx);
        }
        free(sm);
        free(mobj);
        profile_free(ld.p);
    }
    blob_cache_release(&cache);
    run_tx_end(s, own, r < 0);
    return r;
}

int store_snapshot_raw(struct store *s, int64_t id, void **ret_data, size_t *ret_len,
                       struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SNAP_GET_RAW, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "reading a snapshot", err)) < 0)
        return r;
    int64_t raw_id = r ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (r == 0) {
        hp_err_printf(err, "%s: no snapshot #%lld", s->path, (long long)id);
        return HP_ENOTFOUND;
    }
    if (raw_id <= 0) {
        hp_err_printf(err, "%s: snapshot #%lld kept no raw dump", s->path, (long long)id);
        return HP_ENOTFOUND;
    }
    return store_blob_load(s, STMT_RAW_GET, raw_id, ret_data, ret_len, err);
}

/* ---- snapshot info and listings ------------------------------------------- */

static int64_t col_ms(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col);
}

static enum profile_format format_from_name(const char *name)
{
    for (int f = PROFILE_FORMAT_JEMALLOC; f <= PROFILE_FORMAT_COLLAPSED; f++)
        if (strcmp(name, profile_format_name((enum profile_format)f)) == 0)
            return (enum profile_format)f;
    return PROFILE_FORMAT_UNKNOWN;
}

/* Columns of SNAP_INFO / SNAP_LIST. */
static void info_from_row(sqlite3_stmt *st, struct store_snapshot_info *si)
{
    memset(si, 0, sizeof(*si));
    si->id = sqlite3_column_int64(st, 0);
    si->node_id = sqlite3_column_int64(st, 1);
    store_col_text(st, 2, si->node, sizeof(si->node));
    si->taken_at = sqlite3_column_int64(st, 3);
    char status[32], fmt[32];
    store_col_text(st, 4, status, sizeof(status));
    if (store_status_parse(status, &si->status) < 0)
        si->status = STORE_STATUS_FETCH_FAILED;
    store_col_text(st, 5, si->error, sizeof(si->error));
    store_col_text(st, 6, fmt, sizeof(fmt));
    si->format = format_from_name(fmt);
    si->period = (uint64_t)sqlite3_column_int64(st, 7);
    for (int v = 0; v < PV_COUNT; v++)
        si->totals[v] = sqlite3_column_double(st, 8 + v);
    si->nsamples = sqlite3_column_int64(st, 12);
    si->raw_size = sqlite3_column_int64(st, 13);
    si->prof_active = sqlite3_column_type(st, 14) == SQLITE_NULL ? -1
                                                                  : sqlite3_column_int(st, 14);
    si->fetch_ms = col_ms(st, 15);
    si->parse_ms = col_ms(st, 16);
    si->symbolize_ms = col_ms(st, 17);
    si->store_ms = col_ms(st, 18);
}

int store_snapshot_info(struct store *s, int64_t id, struct store_snapshot_info *ret,
                        struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SNAP_INFO, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "reading a snapshot", err)) < 0)
        return r;
    if (r == 0) {
        hp_err_printf(err, "%s: no snapshot #%lld", s->path, (long long)id);
        return HP_ENOTFOUND;
    }
    info_from_row(st, ret);
    sqlite3_reset(st);
    return 0;
}

int store_snapshots_list(struct store *s, int64_t node_id, int64_t since_ms,
                         int64_t until_ms, bool with_failed, store_snapshot_cb cb, void *ctx,
                         struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SNAP_LIST, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, since_ms);
    sqlite3_bind_int64(st, 3, until_ms);
    sqlite3_bind_int(st, 4, with_failed);
    struct store_snapshot_info si;
    while ((r = store_step_row(s, st, "listing snapshots", err)) == 1) {
        info_from_row(st, &si);
        if ((r = cb(&si, ctx)) != 0)
            break;
    }
    sqlite3_reset(st);
    return r;
}

int store_snapshots_ok(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                       store_snapshot_cb cb, void *ctx, struct hp_buf *err)
{
    sqlite3_stmt *st;
    struct store_snapshot_info si;
    memset(&si, 0, sizeof(si));
    si.node_id = node_id;
    si.status = STORE_STATUS_OK;
    si.prof_active = -1;
    si.fetch_ms = si.parse_ms = si.symbolize_ms = si.store_ms = -1;
    int r = store_stmt(s, STMT_NODE_NAME, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    if ((r = store_step_row(s, st, "listing snapshots", err)) == 1)
        store_col_text(st, 0, si.node, sizeof(si.node));
    sqlite3_reset(st);
    if (r <= 0) /* no such node: no snapshots */
        return r;
    if ((r = store_stmt(s, STMT_SNAP_LIST_OK, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, since_ms);
    sqlite3_bind_int64(st, 3, until_ms);
    while ((r = store_step_row(s, st, "listing snapshots", err)) == 1) {
        si.id = sqlite3_column_int64(st, 0);
        si.taken_at = sqlite3_column_int64(st, 1);
        for (int v = 0; v < PV_COUNT; v++)
            si.totals[v] = sqlite3_column_double(st, 2 + v);
        if ((r = cb(&si, ctx)) != 0)
            break;
    }
    sqlite3_reset(st);
    return r;
}

int store_nodes_list(struct store *s, store_node_cb cb, void *ctx, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_NODES_LIST, &st, err);
    if (r < 0)
        return r;
    struct store_node_row row;
    while ((r = store_step_row(s, st, "listing nodes", err)) == 1) {
        memset(&row, 0, sizeof(row));
        row.id = sqlite3_column_int64(st, 0);
        store_col_text(st, 1, row.name, sizeof(row.name));
        store_col_text(st, 2, row.kind, sizeof(row.kind));
        store_col_text(st, 3, row.address, sizeof(row.address));
        store_col_text(st, 4, row.labels, sizeof(row.labels));
        row.nsnapshots = sqlite3_column_int64(st, 5);
        row.last_at = sqlite3_column_int64(st, 6);
        char status[32];
        store_col_text(st, 7, status, sizeof(status));
        if (store_status_parse(status, &row.last_status) < 0)
            row.last_status = STORE_STATUS_OK;
        store_col_text(st, 8, row.last_error, sizeof(row.last_error));
        row.last_ok_at = sqlite3_column_int64(st, 9);
        row.last_ok_id = sqlite3_column_int64(st, 10);
        for (int v = 0; v < PV_COUNT; v++)
            row.last_ok_totals[v] = sqlite3_column_double(st, 11 + v);
        if ((r = cb(&row, ctx)) != 0)
            break;
    }
    sqlite3_reset(st);
    return r;
}

int store_node_find(struct store *s, const char *name, int64_t *ret_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_NODE_FIND, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if ((r = store_step_row(s, st, "finding a node", err)) < 0)
        return r;
    if (r == 0) {
        hp_err_printf(err, "%s: no node named \"%s\"", s->path, name);
        return HP_ENOTFOUND;
    }
    *ret_id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return 0;
}

/* ---- times and selectors -------------------------------------------------- */

/* The parser itself is hp_time_parse (store/hp.c), shared with the web API. */
int store_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms)
{
    return hp_time_parse(text, now_ms, ret_ms) < 0 ? HP_EUSAGE : 0;
}

const char *store_time_format(int64_t ms, char *out, size_t outsz)
{
    return hp_time_format(ms, out, outsz);
}

int store_selector_resolve(struct store *s, const char *text, int64_t now_ms,
                           int64_t *ret_id, struct hp_buf *err)
{
    int r;
    sqlite3_stmt *st;
    if (text[0] == '#') {
        int64_t id;
        if (hp_parse_i64(text + 1, strlen(text + 1), &id) < 0 || id <= 0) {
            hp_err_printf(err, "\"%s\": expected #ID with a positive number", text);
            return HP_EUSAGE;
        }
        if ((r = store_stmt(s, STMT_SNAP_OK_EXISTS, &st, err)) < 0)
            return r;
        sqlite3_bind_int64(st, 1, id);
        if ((r = store_step_row(s, st, "resolving a selector", err)) < 0)
            return r;
        char status[32] = "";
        if (r)
            store_col_text(st, 0, status, sizeof(status));
        sqlite3_reset(st);
        if (r == 0) {
            hp_err_printf(err, "%s: no snapshot #%lld", s->path, (long long)id);
            return HP_ENOTFOUND;
        }
        if (strcmp(status, "ok") != 0) {
            hp_err_printf(err, "%s: snapshot #%lld holds no profile (status %s)", s->path,
                          (long long)id, status);
            return HP_ENOTFOUND;
        }
        *ret_id = id;
        return 0;
    }
    struct hp_selector sel;
    struct hp_buf perr = HP_BUF_INIT(0);
    if (hp_selector_parse(text, now_ms, &sel, &perr) < 0) {
        /* "x@y.heap" is a file name, not a selector, unless x is a node:
         * ENOTFOUND lets the caller try the path. */
        const char *at = strchr(text, '@');
        char *name = hp_xstrndup(text, at ? (size_t)(at - text) : strlen(text));
        int64_t nid;
        r = *name ? store_node_find(s, name, &nid, err) : HP_ENOTFOUND;
        free(name);
        if (r != HP_ENOTFOUND) {
            hp_err_printf(err, "%.*s", (int)perr.len, perr.data ? perr.data : "");
            r = HP_EUSAGE;
        }
        hp_buf_release(&perr);
        return r;
    }
    hp_buf_release(&perr);
    bool at = sel.has_time;
    char *node = hp_xstrndup(sel.node, sel.node_len);
    int64_t node_id, when = at ? sel.at_ms : INT64_MAX;
    if ((r = store_node_find(s, node, &node_id, err)) < 0)
        goto out;
    if ((r = store_stmt(s, STMT_SNAP_AT, &st, err)) < 0)
        goto out;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, when);
    if ((r = store_step_row(s, st, "resolving a selector", err)) < 0)
        goto out;
    if (r == 0) {
        char tbuf[40], obuf[40];
        sqlite3_stmt *ost;
        /* Before the oldest snapshot: say so with the oldest one's name,
         * so the user can ask again (or ask NODE@<=TIME knowingly). */
        if (at && store_stmt(s, STMT_SNAP_OLDEST, &ost, err) == 0) {
            sqlite3_bind_int64(ost, 1, node_id);
            if (store_step_row(s, ost, "resolving a selector", err) > 0) {
                hp_err_printf(err,
                              "%s: the oldest snapshot of node \"%s\" (#%lld at %s) is newer "
                              "than asked (%s): no stored profile at or before then",
                              s->path, node, (long long)sqlite3_column_int64(ost, 0),
                              store_time_format(sqlite3_column_int64(ost, 1), obuf,
                                                sizeof(obuf)),
                              store_time_format(when, tbuf, sizeof(tbuf)));
                sqlite3_reset(ost);
                r = HP_ENOTFOUND;
                goto out;
            }
            sqlite3_reset(ost);
        }
        if (at)
            hp_err_printf(err, "%s: node \"%s\" has no stored profile at or before %s",
                          s->path, node, store_time_format(when, tbuf, sizeof(tbuf)));
        else
            hp_err_printf(err, "%s: node \"%s\" has no stored profile yet", s->path, node);
        r = HP_ENOTFOUND;
        goto out;
    }
    *ret_id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    r = 0;
out:
    free(node);
    return r;
}

int store_snapshot_find_dump(struct store *s, int64_t node_id, const void *raw, size_t len,
                             int64_t *ret_id, int64_t *ret_taken_at_ms, struct hp_buf *err)
{
    unsigned char hash[16];
    int64_t raw_id;
    int r = store_raw_find(s, raw, len, hash, &raw_id, err);
    if (r <= 0)
        return r;
    sqlite3_stmt *st;
    if ((r = store_stmt(s, STMT_SNAP_BY_RAW, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, raw_id);
    r = store_step_row(s, st, "looking up a snapshot by its dump", err);
    if (r == 1) {
        *ret_id = sqlite3_column_int64(st, 0);
        *ret_taken_at_ms = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return r;
}

/* ---- series ----------------------------------------------------------------- */

int store_series_node(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                      const char *stat_name, struct store_point **ret_points, size_t *ret_n,
                      struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SERIES_NODE, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, since_ms);
    sqlite3_bind_int64(st, 3, until_ms);
    if (stat_name)
        sqlite3_bind_text(st, 4, stat_name, -1, SQLITE_STATIC);
    struct store_point *pts = NULL;
    size_t n = 0, cap = 0;
    while ((r = store_step_row(s, st, "reading a series", err)) == 1) {
        pts = hp_xgrow(pts, &cap, n + 1, sizeof(*pts));
        struct store_point *pt = &pts[n++];
        pt->snapshot_id = sqlite3_column_int64(st, 0);
        pt->taken_at = sqlite3_column_int64(st, 1);
        for (int v = 0; v < PV_COUNT; v++)
            pt->totals[v] = sqlite3_column_double(st, 2 + v);
        pt->stat = sqlite3_column_type(st, 6) == SQLITE_NULL ? NAN
                                                               : sqlite3_column_double(st, 6);
    }
    sqlite3_reset(st);
    if (r < 0) {
        free(pts);
        return r;
    }
    *ret_points = pts;
    *ret_n = n;
    return 0;
}

/* store_ft_rest_load through `cache` (may be NULL): a run of a node's
 * snapshots in time order decompresses one blob each. */
static int ft_rest_load_cached(struct store *s, int64_t snap_id, struct blob_cache *cache,
                               struct store_ft_entry **ret, size_t *ret_n, struct hp_buf *err)
{
    *ret = NULL;
    *ret_n = 0;
    void *raw = NULL;
    size_t size = 0;
    int r = blob_cache_get(cache, snap_id, &raw, &size)
                ? 0
                : blob_load_depth(s, STMT_FTR_GET, snap_id, 0, cache, &raw, &size, err);
    if (r < 0 || !raw)
        return r;
    struct store_unpack u = { raw, (const unsigned char *)raw + size, false };
    uint64_t n = store_unpack_u64(&u);
    /* Each entry takes at least 5 bytes. */
    if (u.bad || n > (uint64_t)size / 5) {
        free(raw);
        hp_err_printf(err, "%s: snapshot %lld: packed function totals say %llu functions in %zu "
                      "bytes", s->path, (long long)snap_id, (unsigned long long)n, size);
        return HP_ECORRUPT;
    }
    struct store_ft_entry *e = hp_xmalloc((n ? n : 1) * sizeof(*e));
    uint64_t fid = 0; /* unsigned: a hostile step must not overflow a signed sum */
    bool ids_bad = false;
    for (uint64_t i = 0; i < n; i++) {
        fid += store_unpack_u64(&u);
        ids_bad |= fid > INT64_MAX;
        e[i].function_id = (int64_t)(fid & INT64_MAX);
    }
    for (uint64_t i = 0; i < n; i++)
        e[i].flat_space = store_unpack_i64(&u);
    for (uint64_t i = 0; i < n; i++)
        e[i].cum_space = store_unpack_i64(&u);
    for (uint64_t i = 0; i < n; i++)
        e[i].flat_objects = store_unpack_i64(&u);
    for (uint64_t i = 0; i < n; i++)
        e[i].cum_objects = store_unpack_i64(&u);
    bool bad = u.bad || u.p != u.end || ids_bad;
    free(raw);
    if (bad) {
        free(e);
        hp_err_printf(err, "%s: snapshot %lld: packed function totals are %s", s->path,
                      (long long)snap_id, ids_bad ? "corrupt (a function id past 2^63)"
                                                  : "truncated");
        return HP_ECORRUPT;
    }
    *ret = e;
    *ret_n = (size_t)n;
    return 0;
}

int store_ft_rest_load(struct store *s, int64_t snap_id, struct store_ft_entry **ret,
                       size_t *ret_n, struct hp_buf *err)
{
    return ft_rest_load_cached(s, snap_id, NULL, ret, ret_n, err);
}

struct point_list {
    struct store_function_point *v;
    size_t n, cap;
};

static int point_add(const struct store_function_point *pts, size_t nf, void *ctx)
{
    struct point_list *pl = ctx;
    (void)nf;
    pl->v = hp_xgrow(pl->v, &pl->cap, pl->n + 1, sizeof(*pl->v));
    pl->v[pl->n++] = pts[0];
    return 0;
}

int store_series_function(struct store *s, int64_t node_id, const char *function,
                          int64_t since_ms, int64_t until_ms,
                          struct store_function_point **ret_points, size_t *ret_n,
                          struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_FUNCTION_FIND, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_text(st, 1, function, -1, SQLITE_STATIC);
    if ((r = store_step_row(s, st, "finding a function", err)) < 0)
        return r;
    if (r == 0) {
        hp_err_printf(err, "%s: no function named \"%s\" in any stored profile", s->path,
                      function);
        return HP_ENOTFOUND;
    }
    int64_t fid = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    struct point_list pl = { 0 };
    if ((r = store_series_functions(s, node_id, since_ms, until_ms, &fid, 1, point_add, &pl,
                                    err)) < 0) {
        free(pl.v);
        return r;
    }
    *ret_points = pl.v;
    *ret_n = pl.n;
    return 0;
}

int store_functions_list(struct store *s, store_function_name_cb cb, void *ctx,
                         struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_FUNCTIONS_ALL, &st, err);
    if (r < 0)
        return r;
    while ((r = store_step_row(s, st, "listing functions", err)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if ((r = cb(sqlite3_column_int64(st, 0), name ? name : "", ctx)) != 0)
            break;
    }
    sqlite3_reset(st);
    return r;
}

/* Entries e[0..n) (ascending ids) of the functions in fids[0..nf)
 * (ascending) into their points; returns how many were there. */
static size_t ft_merge(const struct store_ft_entry *e, size_t n, const int64_t *fids, size_t nf,
                       struct store_function_point *pts)
{
    size_t found = 0;
    for (size_t i = 0, j = 0; i < n && j < nf;) {
        if (e[i].function_id < fids[j]) {
            i++;
        } else if (e[i].function_id > fids[j]) {
            j++;
        } else {
            pts[j].flat_space = e[i].flat_space;
            pts[j].cum_space = e[i].cum_space;
            pts[j].flat_objects = e[i].flat_objects;
            pts[j].cum_objects = e[i].cum_objects;
            i++, j++;
            found++;
        }
    }
    return found;
}

/* Above this many functions a snapshot outside the spans has its rows read
 * in one scan; up to it, each function's rows by a join over a run of such
 * snapshots. */
#define SERIES_SCAN_FUNCTIONS 16

/* Snapshot pts[0].snapshot_id's rows of fids[0..nf), in one scan; those
 * without one set *ret_missing. */
static int ft_rows_scan(struct store *s, const int64_t *fids, size_t nf,
                        struct store_function_point *pts, struct store_ft_entry **rows,
                        size_t *rows_cap, bool *ret_missing, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_FT_BY_SNAP, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, pts[0].snapshot_id);
    size_t nrows = 0;
    while ((r = store_step_row(s, st, "reading function totals", err)) == 1) {
        *rows = hp_xgrow(*rows, rows_cap, nrows + 1, sizeof(**rows));
        (*rows)[nrows++] = (struct store_ft_entry){ sqlite3_column_int64(st, 0),
                                                    sqlite3_column_int64(st, 1),
                                                    sqlite3_column_int64(st, 2),
                                                    sqlite3_column_int64(st, 3),
                                                    sqlite3_column_int64(st, 4) };
    }
    sqlite3_reset(st);
    if (r < 0)
        return r;
    *ret_missing = ft_merge(*rows, nrows, fids, nf, pts) < nf;
    return 0;
}

/* (taken_at, id): the series' order. */
static int point_order(const struct store_function_point *a, int64_t taken_at, int64_t id)
{
    if (a->taken_at != taken_at)
        return a->taken_at < taken_at ? -1 : 1;
    return a->snapshot_id < id ? -1 : a->snapshot_id > id;
}

/* Function fid's rows for run[0..n), consecutive snapshots of the series,
 * by one join with the node's snapshots of the run's times (an index seek
 * a snapshot, but one statement: a round trip on PostgreSQL). found[i]:
 * run[i] has a row. A snapshot the join lists that is not in the run (one
 * in a span at the same time, or stored since) is passed over. */
static int ft_rows_join(struct store *s, int64_t node_id, int64_t fid,
                        struct store_function_point *run, size_t n, bool *found,
                        struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SERIES_FUNC, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, run[0].taken_at);
    sqlite3_bind_int64(st, 3, run[n - 1].taken_at);
    sqlite3_bind_int64(st, 4, fid);
    size_t i = 0;
    while ((r = store_step_row(s, st, "reading a series", err)) == 1) {
        int64_t id = sqlite3_column_int64(st, 0), at = sqlite3_column_int64(st, 1);
        while (i < n && point_order(&run[i], at, id) < 0)
            i++;
        if (i == n || point_order(&run[i], at, id) != 0 ||
            sqlite3_column_type(st, 2) == SQLITE_NULL)
            continue;
        run[i].flat_space = sqlite3_column_int64(st, 2);
        run[i].cum_space = sqlite3_column_int64(st, 3);
        run[i].flat_objects = sqlite3_column_int64(st, 4);
        run[i].cum_objects = sqlite3_column_int64(st, 5);
        found[i++] = true;
    }
    sqlite3_reset(st);
    return r;
}

/* The node's ok snapshots in [since, until] (ids and times, zeros), in the
 * series' order: their rows are read by other statements. */
static int series_snaps(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                        struct store_function_point **ret, size_t *ret_n, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SERIES_SNAPS, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, since_ms);
    sqlite3_bind_int64(st, 3, until_ms);
    size_t cap = 0;
    while ((r = store_step_row(s, st, "reading a series", err)) == 1) {
        *ret = hp_xgrow(*ret, &cap, *ret_n + 1, sizeof(**ret));
        (*ret)[(*ret_n)++] = (struct store_function_point){
            .snapshot_id = sqlite3_column_int64(st, 0), .taken_at = sqlite3_column_int64(st, 1)
        };
    }
    sqlite3_reset(st);
    return r;
}

/* The closed span holding snapshot id, or SIZE_MAX. */
static size_t span_find(const struct store_span *sp, size_t n, int64_t id)
{
    size_t i = hp_search_le_u64(sp, n, sizeof(*sp), offsetof(struct store_span, first_id),
                                (uint64_t)id);
    return i > 0 && sp[i - 1].last_id >= id ? i - 1 : SIZE_MAX;
}

/* Snapshot id's row among e[0..n) (ascending ids) into *pt; false when
 * there is none. */
static bool fs_find(const struct store_fs_entry *e, size_t n, int64_t id,
                    struct store_function_point *pt)
{
    size_t i = hp_search_le_u64(e, n, sizeof(*e), offsetof(struct store_fs_entry, snapshot_id),
                                (uint64_t)id);
    if (i == 0 || e[i - 1].snapshot_id != id)
        return false;
    pt->flat_space = e[i - 1].flat_space;
    pt->cum_space = e[i - 1].cum_space;
    pt->flat_objects = e[i - 1].flat_objects;
    pt->cum_objects = e[i - 1].cum_objects;
    return true;
}

/* Each function's rows in the span being read (series.c). */
struct fs_col {
    struct store_fs_entry *e;
    size_t n, cap;
};

/* Few functions' rows for a run of snapshots outside the spans, read by
 * joins: snaps[k0..k1), function j's points at pts[j * (k1 - k0)]. */
struct ft_run {
    size_t k0, k1;
    struct store_function_point *pts;
    bool *found;
    size_t cap;
};

/* Read the run of snapshots from k outside the spans (series.c) for
 * fids[0..nf) into *run. */
static int ft_run_read(struct store *s, int64_t node_id, const struct store_function_point *snaps,
                       size_t ns, size_t k, const struct store_span *spans, size_t nspans,
                       const int64_t *fids, size_t nf, struct ft_run *run, struct hp_buf *err)
{
    size_t k1 = k + 1;
    while (k1 < ns && span_find(spans, nspans, snaps[k1].snapshot_id) == SIZE_MAX)
        k1++;
    size_t len = k1 - k;
    if (run->cap < nf * len) {
        run->cap = nf * len;
        run->pts = hp_xrealloc(run->pts, run->cap * sizeof(*run->pts));
        run->found = hp_xrealloc(run->found, run->cap * sizeof(*run->found));
    }
    *run = (struct ft_run){ k, k1, run->pts, run->found, run->cap };
    int r = 0;
    for (size_t j = 0; r == 0 && j < nf; j++) {
        memcpy(run->pts + j * len, snaps + k, len * sizeof(*snaps));
        memset(run->found + j * len, 0, len * sizeof(*run->found));
        r = ft_rows_join(s, node_id, fids[j], run->pts + j * len, len, run->found + j * len,
                         err);
    }
    return r;
}

int store_series_functions(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                           const int64_t *fids, size_t nf, store_functions_cb cb, void *ctx,
                           struct hp_buf *err)
{
    bool own;
    int r = run_tx_begin(s, &own, err); /* one view for the statements below */
    if (r < 0)
        return r;
    /* A snapshot in a closed span (series.c) takes its rows from the
     * functions' packed series of that span, read once per span; one
     * outside (the newest, those of a dissolved span, a database written
     * before spans) from function_totals: for few functions a join over
     * each run of such snapshots (a statement a function and run), for
     * many one scan of each snapshot's rows. Either way a snapshot's
     * packed rest is read once, and only when one of the functions has no
     * row there (rows and rest hold disjoint functions). */
    struct store_function_point *row = hp_xmalloc((nf + 1) * sizeof(*row)), *snaps = NULL;
    struct fs_col *col = hp_xcalloc(nf + 1, sizeof(*col));
    struct store_span *spans = NULL;
    size_t ns = 0, nspans = 0, cur = SIZE_MAX;
    if ((r = series_snaps(s, node_id, since_ms, until_ms, &snaps, &ns, err)) == 0 && ns && nf)
        r = store_fseries_spans(s, node_id, &spans, &nspans, err);
    struct store_ft_entry *rows = NULL;
    size_t rows_cap = 0;
    struct ft_run run = { 0 };
    struct blob_cache cache = { 0 };
    for (size_t k = 0; r == 0 && nf && k < ns; k++) {
        int64_t id = snaps[k].snapshot_id;
        for (size_t j = 0; j < nf; j++)
            row[j] = snaps[k];
        bool missing = false;
        size_t sp = span_find(spans, nspans, id);
        if (sp != SIZE_MAX && sp != cur) {
            bool absent = false;
            for (size_t j = 0; r == 0 && j < nf; j++) {
                r = store_fseries_get(s, node_id, &spans[sp], fids[j], &col[j].e, &col[j].cap,
                                      &col[j].n, err);
                absent |= col[j].n == 0;
            }
            /* Without a read transaction (PostgreSQL), a function without
             * a row may be a span dissolved since the list was read; and a
             * packed series that does not decode is a damaged copy of
             * function_totals. Either way the span's snapshots read from
             * function_totals, the truth. */
            bool dead = r == HP_ECORRUPT;
            if (dead && err)
                hp_buf_reset(err);
            if (dead)
                r = 0;
            else if (r == 0 && absent)
                dead = (r = store_fseries_alive(s, node_id, &spans[sp], err)) == 0;
            if (r < 0)
                break;
            r = 0;
            if (dead)
                spans[sp].last_id = spans[sp].first_id - 1, sp = SIZE_MAX;
            cur = sp;
        }
        if (sp != SIZE_MAX) {
            for (size_t j = 0; j < nf; j++)
                missing |= !fs_find(col[j].e, col[j].n, id, &row[j]);
        } else if (nf <= SERIES_SCAN_FUNCTIONS) {
            if ((k < run.k0 || k >= run.k1) &&
                (r = ft_run_read(s, node_id, snaps, ns, k, spans, nspans, fids, nf, &run,
                                 err)) < 0)
                break;
            size_t len = run.k1 - run.k0, i = k - run.k0;
            for (size_t j = 0; j < nf; j++) {
                row[j] = run.pts[j * len + i];
                missing |= !run.found[j * len + i];
            }
        } else {
            r = ft_rows_scan(s, fids, nf, row, &rows, &rows_cap, &missing, err);
        }
        if (r == 0 && missing) {
            struct store_ft_entry *rest;
            size_t nrest;
            if ((r = ft_rest_load_cached(s, id, &cache, &rest, &nrest, err)) < 0)
                break;
            (void)ft_merge(rest, nrest, fids, nf, row);
            free(rest);
        }
        if (r == 0)
            r = cb(row, nf, ctx);
    }
    blob_cache_release(&cache);
    free(rows);
    free(run.pts);
    free(run.found);
    for (size_t j = 0; j < nf; j++)
        free(col[j].e);
    free(col);
    free(spans);
    free(row);
    free(snaps);
    run_tx_end(s, own, r < 0);
    return r;
}

static int ft_total_cmp(const void *a, const void *b)
{
    /* As SQL's ORDER BY cum_space DESC, name (BINARY collation). */
    const struct store_function_total *x = a, *y = b;
    if (x->cum_space != y->cum_space)
        return x->cum_space < y->cum_space ? 1 : -1;
    return strcmp(x->name, y->name);
}

int store_function_totals(struct store *s, int64_t snapshot_id, store_function_cb cb, void *ctx,
                          struct hp_buf *err)
{
    /* The rows and the packed rest, merged and ordered as one table. */
    struct hp_arena names;
    hp_arena_init(&names);
    struct store_function_total *all = NULL;
    size_t n = 0, cap = 0;
    struct store_ft_entry *rest = NULL;
    size_t nrest = 0;
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_FT_LIST, &st, err);
    if (r < 0)
        goto out;
    sqlite3_bind_int64(st, 1, snapshot_id);
    while ((r = store_step_row(s, st, "reading function totals", err)) == 1) {
        all = hp_xgrow(all, &cap, n + 1, sizeof(*all));
        struct store_function_total *row = &all[n++];
        row->function_id = sqlite3_column_int64(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        row->name = hp_arena_strdup(&names, name ? name : "");
        row->flat_space = sqlite3_column_int64(st, 2);
        row->cum_space = sqlite3_column_int64(st, 3);
        row->flat_objects = sqlite3_column_int64(st, 4);
        row->cum_objects = sqlite3_column_int64(st, 5);
    }
    sqlite3_reset(st);
    if (r < 0 || (r = store_ft_rest_load(s, snapshot_id, &rest, &nrest, err)) < 0)
        goto out;
    for (size_t i = 0; i < nrest; i++) {
        if ((r = store_stmt(s, STMT_FUNCTION_NAME, &st, err)) < 0)
            goto out;
        sqlite3_bind_int64(st, 1, rest[i].function_id);
        if ((r = store_step_row(s, st, "reading a function name", err)) < 0)
            goto out;
        if (r == 1) { /* as the join: a function without a name row is left out */
            const char *name = (const char *)sqlite3_column_text(st, 0);
            all = hp_xgrow(all, &cap, n + 1, sizeof(*all));
            all[n++] = (struct store_function_total){
                .function_id = rest[i].function_id,
                .name = hp_arena_strdup(&names, name ? name : ""),
                .flat_space = rest[i].flat_space,
                .cum_space = rest[i].cum_space,
                .flat_objects = rest[i].flat_objects,
                .cum_objects = rest[i].cum_objects,
            };
        }
        sqlite3_reset(st);
    }
    if (nrest)
        qsort(all, n, sizeof(*all), ft_total_cmp);
    r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = cb(&all[i], ctx);
out:
    free(rest);
    free(all);
    hp_arena_release(&names);
    return r;
}

int store_read_begin(struct store *s, struct hp_buf *err)
{
#ifdef STORE_BACKEND_SQLITE
    if (s->read_tx)
        return 0;
    if (s->batch || !sqlite3_get_autocommit(s->db)) {
        hp_err_printf(err, "%s: a read transaction inside a write transaction", s->path);
        return HP_EUSAGE;
    }
    int r = store_exec(s, "BEGIN", err);
    if (r < 0)
        return r;
    s->read_tx = true;
#else
    (void)s, (void)err;
#endif
    return 0;
}

void store_read_end(struct store *s)
{
#ifdef STORE_BACKEND_SQLITE
    if (!s->read_tx)
        return;
    s->read_tx = false;
    if (!sqlite3_get_autocommit(s->db))
        (void)store_exec(s, "COMMIT", NULL); /* read only: nothing to lose */
#else
    (void)s;
#endif
}

/* A statistic from columns col.. of a statistics listing (name, unit, value). */
static void stat_from_row(sqlite3_stmt *st, int col, struct store_stat *stat)
{
    stat->name = (const char *)sqlite3_column_text(st, col);
    stat->unit = (const char *)sqlite3_column_text(st, col + 1);
    if (stat->unit && !*stat->unit)
        stat->unit = NULL;
    stat->value = sqlite3_column_type(st, col + 2) == SQLITE_NULL
                      ? NAN
                      : sqlite3_column_double(st, col + 2);
}

int store_snapshot_stats(struct store *s, int64_t snapshot_id, store_stat_cb cb, void *ctx,
                         struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_STATS_LIST, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, snapshot_id);
    struct store_stat stat;
    while ((r = store_step_row(s, st, "reading statistics", err)) == 1) {
        stat_from_row(st, 0, &stat);
        if ((r = cb(&stat, ctx)) != 0)
            break;
    }
    sqlite3_reset(st);
    return r;
}

/* One row of store_node_stats, read before any is handed out. */
struct nstat_row {
    int64_t snapshot_id, seq;
    uint32_t name; /* dense index of its stat id */
    double value;
};

struct nstat_name {
    char *name, *unit; /* name NULL: no stat_names row for the id */
};

static int nstat_name_cb(void *ctx, size_t i, sqlite3_stmt *st, struct hp_buf *err)
{
    (void)err;
    struct nstat_name *names = ctx;
    const char *nm = (const char *)sqlite3_column_text(st, 1);
    const char *u = (const char *)sqlite3_column_text(st, 2);
    names[i].name = hp_xstrdup(nm ? nm : "");
    names[i].unit = u && *u ? hp_xstrdup(u) : NULL;
    return 0;
}

int store_node_stats(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                     store_stat_want_cb want, void *want_ctx, store_node_stat_cb cb, void *ctx,
                     struct hp_buf *err)
{
    /* The rows without their names, in no particular order: a join with
     * stat_names a row, and sorting in SQL, took 1.2 ms of a node's 720
     * snapshots (0.24 ms without). The names come in a range scan or two
     * (a node's statistics were named together), or with a filter from the
     * one read of all names that chose the wanted ones, and the rows are
     * put in snapshot and report order here. */
    sqlite3_stmt *st;
    struct nstat_row *rows = NULL;
    struct nstat_name *names = NULL;
    struct idset ids = { 0 };
    size_t n = 0, cap = 0;
    /* With a filter: the wanted names (each asked once) are the first of
     * the set's ids, their names kept from that read. Up to NSTAT_SOME of
     * them are looked for in SQL, so that the rows of the others never
     * leave SQLite (a node's dozens of figures a snapshot cost more to step
     * through than the rest of `query leaks`); the rows of more get ids of
     * their own here, without names, and are dropped below. */
    enum { NSTAT_SOME = 28 }; /* PostgreSQL's shim binds 32 parameters at most */
    struct nstat_name *wanted = NULL;
    size_t nwanted = 0, wanted_cap = 0;
    int r = 0;
    if (want) {
        if ((r = store_stmt(s, STMT_STAT_NAMES_ALL, &st, err)) < 0)
            return r;
        while ((r = store_step_row(s, st, "reading statistic names", err)) == 1) {
            const char *nm = (const char *)sqlite3_column_text(st, 1);
            if (want(nm ? nm : "", want_ctx)) {
                wanted = hp_xgrow(wanted, &wanted_cap, nwanted + 1, sizeof(*wanted));
                (void)nstat_name_cb(wanted, nwanted++, st, err);
                (void)idset_add(&ids, sqlite3_column_int64(st, 0));
            }
        }
        sqlite3_reset(st);
    }
    bool some = want && nwanted <= NSTAT_SOME;
    if (r == 0)
        r = store_stmt(s, some ? STMT_NODE_STATS_SOME : STMT_NODE_STATS_LIST, &st, err);
    if (r == 0) {
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, since_ms);
        sqlite3_bind_int64(st, 3, until_ms);
        for (int k = 0; some && k < NSTAT_SOME; k++) /* ids are positive: -1 is none */
            sqlite3_bind_int64(st, 4 + k, (size_t)k < nwanted ? ids.ids[k] : -1);
        while ((r = store_step_row(s, st, "reading statistics", err)) == 1) {
            rows = hp_xgrow(rows, &cap, n + 1, sizeof(*rows));
            rows[n++] = (struct nstat_row){
                sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                idset_add(&ids, sqlite3_column_int64(st, 2)),
                sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3)
            };
        }
        sqlite3_reset(st);
    }
    names = hp_xcalloc(ids.n + 1, sizeof(*names));
    if (want) {
        if (nwanted)
            memcpy(names, wanted, nwanted * sizeof(*names));
    } else if (r == 0) {
        r = range_fetch(s, STMT_STAT_NAMES_RANGE, &ids, NULL, nstat_name_cb, names, err);
    }
    /* The rows of named statistics only (wanted ones; without a filter, a
     * statistic without its name row is dropped, as the join did); then by
     * snapshot id and seq: radix sorts, seq first (stable). */
    struct hp_sort_item *v = hp_xmalloc((n + 1) * sizeof(*v));
    size_t nk = 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        if (names[rows[i].name].name)
            v[nk++].i = i;
    for (int pass = 0; r == 0 && pass < 2; pass++) {
        for (size_t i = 0; i < nk; i++) {
            size_t at = v[i].i;
            v[i].key = (uint64_t)(pass ? rows[at].snapshot_id : rows[at].seq) ^ UINT64_C(1) << 63;
        }
        hp_radix_sort(v, nk);
    }
    for (size_t i = 0; r == 0 && i < nk; i++) {
        const struct nstat_row *x = &rows[v[i].i];
        struct store_stat stat = { names[x->name].name, names[x->name].unit, x->value };
        r = cb(x->snapshot_id, &stat, ctx);
    }
    free(v);
    free(wanted); /* its names are names' */
    free(rows);
    for (size_t i = 0; i < ids.n; i++) {
        free(names[i].name);
        free(names[i].unit);
    }
    free(names);
    idset_release(&ids);
    return r;
}
