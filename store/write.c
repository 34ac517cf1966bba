/* write.c: the writer. Nodes, snapshots (profile + raw dump + statistics in
 * one transaction), failed attempts, re-derivation after reindex.
 *
 * How a profile is stored (see migrations/0001-init.sql for the tables):
 *   - mappings name objects (by build-id, else node+inode+path);
 *   - each location becomes (object, file-relative address), deduplicated
 *     across snapshots and nodes, carrying its symbolized frames;
 *   - each stack becomes a row of location ids, deduplicated by hash;
 *   - the snapshot's own data (header fields, mappings, threads, samples with
 *     their raw values) is one packed blob in sample_sets, zstd-compressed
 *     against the node's previous blob; the raw dump as a line delta of the
 *     node's previous dump (ldelta.c), and the packed function totals (below) against
 *     the node's previous ones. A new keyframe (a standalone row) starts when
 *     a delta stops paying (over half the keyframe's own compressed size)
 *     or the chain reaches STORE_CHAIN_MAX links, so reading one row
 *     decompresses a bounded chain.
 *   - per-function flat/cumulative totals go to function_totals, one row per
 *     function above a share of the snapshot, the long tail packed into one
 *     blob per snapshot (function_totals_rest).
 *
 * The writer caches database ids of objects, functions, files, locations and
 * stacks so a steady node costs hash lookups, not queries. Caches are only
 * ever filled with ids of committed rows or rows of the open transaction;
 * a rollback drops them all (store_writer_reset). */
#include "store/store-internal.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_SET_VERSION 1
/* Nodes whose bases (struct node_base) the writer keeps, and one more slot
 * (the spare) for a node it does not keep (node_base). */
#define NODE_BASES 8
#define NODE_SLOTS (NODE_BASES + 1)
/* A kept node used within this many stores is not given up for another:
 * see node_base. */
#define NODE_KEEP_TICKS 1024
/* Stack ids the writer keeps (16-byte slots: about 32 MB at this size). */
#define STACK_CACHE_MAX ((size_t)1 << 20)
/* zstd's level for a packed function totals rest (ft_rest_insert) against
 * the node's previous one: level 3 took 1.1 ms of a steady 20k-stack
 * snapshot for 33.7 KB, level 2 0.65 ms for 34.6 KB (the mean over 11
 * successive rests of the store bench's profile). */
#define FTR_DELTA_LEVEL 2
/* How far past its place the previous snapshot's location list is searched
 * for a location (stacks_prefetch), and its name list for a name
 * (names_by_place). */
#define LOC_RESYNC 32
#define NAME_RESYNC 32
/* How many items ahead a loop over a profile prefetches its cache slots. */
#define WRITE_PREFETCH 8
/* Delta-compress only when base + data fit the zstd window (pack.c). */
#define DELTA_MAX_BYTES ((size_t)1 << 27)

/* string -> database id, exact (interned strings compared in full). */
struct name_ids {
    struct hp_arena arena;
    struct hp_strtab tab;
    uint32_t *ids; /* by the interned string's number (hp_strtab_id): id, 0 none yet */
    size_t nids;
};

/* What a node's next row is compressed against: its previous row while
 * the chain has room, else the chain's keyframe (both cached). */
struct blob_base {
    int64_t id; /* the previous row; 0: none */
    void *data;
    size_t len;
    int depth;    /* links from the previous row down to its keyframe */
    int64_t key_id; /* the keyframe (standalone row) */
    void *key_data;
    size_t key_len;
    size_t csize; /* the keyframe's compressed size */
    /* Raw dumps: the lines of data and of key_data, when the encoding of
     * that dump gave them (store_ldelta_encode): the next dump's line delta
     * then neither splits nor hashes its base again (7% of a steady 20k-stack
     * snapshot's ingest). Not known after a load from the database. */
    struct store_lines lines, key_lines;
};

/* What the writer's caches said of a profile before the write lock was
 * taken (stacks_prefetch): each location's id, each stack's hash over them
 * and its id. While the caches are the ones it read (s->writer_gen
 * unchanged: nothing dropped them, they only grew), store_locations and
 * store_stacks would find every one of these again, so they take them
 * from here instead of looking a steady node's locations and stacks up,
 * and hashing its stacks, a second time under the lock. */
#define PF_NO_HASH UINT64_MAX
struct prefetch {
    uint64_t gen;   /* s->writer_gen when looked up */
    int64_t *lid;   /* per location: cached id, 0 not cached; NULL: nothing prefetched */
    bool *lsym;     /* per location: cached as having its frames stored */
    uint64_t *hash; /* per stack: hash over lid, PF_NO_HASH when a location was not cached */
    uint32_t *sid;  /* per stack: its id from the cache or the lookup; 0 with a hash: none stored */
    int64_t *lobj;  /* per location: the key it was looked up by (node_memo), */
    uint64_t *laddr; /* lobj 0 when its object is not cached */
};

static void prefetch_release(struct prefetch *pf)
{
    free(pf->lid);
    free(pf->lsym);
    free(pf->hash);
    free(pf->sid);
    free(pf->lobj);
    free(pf->laddr);
    *pf = (struct prefetch){ 0 };
}

/* The names of a node's previous profile (copies), by their number there,
 * with the function and file ids they had, 0 where a name was not one: a
 * dump's next one names mostly the same functions and files in the same
 * order, so store_locations takes their ids from here where it looked
 * every name up in the writer's dictionaries (7,300 lookups, 1.4 ms of a
 * steady 20k-stack snapshot). */
struct node_names {
    struct hp_arena arena;
    const char **str;
    uint32_t *len, *fn, *file;
    size_t n;
};

static void node_names_clear(struct node_names *m)
{
    if (m->str)
        hp_arena_release(&m->arena);
    free(m->str);
    free(m->len);
    free(m->fn);
    free(m->file);
    *m = (struct node_names){ 0 };
}

/* A node's previous snapshot as the writer resolved it, by position:
 * successive dumps of one process list mostly the same locations and
 * stacks in the same order, so stacks_prefetch takes a location's id (and
 * whether its frames are stored) and a stack's id from the same place in
 * the previous snapshot when its key there is the same, where it looked up
 * three cache maps, most lookups a cache miss (a sixth of the writer's
 * thread on a steady 20k-stack node). It is that snapshot's prefetch, with
 * the ids it stored (node_memo_take); it lives in the writer, which a
 * reset drops, so its ids are those the caches hold. */
struct node_memo {
    struct prefetch pf; /* lid: every location's id; sid with hash: the stack's id */
    size_t nlocs, nstacks;
    struct node_names names;
};

static void node_memo_clear(struct node_memo *m)
{
    prefetch_release(&m->pf);
    node_names_clear(&m->names);
    *m = (struct node_memo){ 0 };
}

/* The stack series of the node's snapshots since its last group of the
 * open span completed (series.c), built as each is stored from the samples
 * the writer has at hand, so that completing a group (or closing a span)
 * does not read back and decode the sample sets just written: their
 * decoding was 4% of a steady 20k-stack node's ingest. Taken or dropped at
 * every group's end; a reset drops it with the writer. */
struct node_group {
    struct store_ssb *b; /* NULL: none */
    struct store_sseries out;
    int64_t *ids;
    size_t n, cap;
};

static void node_group_drop(struct node_group *g)
{
    if (g->b) {
        store_ssb_free(g->b); /* not closed: its chunk would only be thrown away */
        store_sseries_release(&g->out);
    }
    free(g->ids);
    *g = (struct node_group){ 0 };
}

/* What function_totals_insert computed for a node's previous snapshot,
 * so that the next one does not walk every frame of every stack again: a
 * stack lists its functions in the same frames from one dump to the next,
 * and that walk (a location, then its frames, then whether the function
 * counted for this stack already, at random places of a 20k-stack
 * profile) was the largest part of a steady snapshot's function totals.
 * Per stack, its plan: the accumulator its sample's flat value goes to,
 * then each of its functions once. A plan holds while every location of
 * the stack has the function ids (and allocator flag) it had: each
 * location's are hashed into a signature and compared with the previous
 * snapshot's for the same location id (found at its place, as
 * stacks_prefetch finds it, else by id among the rest); one that differs
 * drops every plan. Accumulators are numbered by function id for the
 * node's life in the writer. */
/* A snapshot's plans with what they were made from. Its own copies of the
 * location and stack ids: the node memo's (node_memo_take) exists only when
 * the snapshot's prefetch held, and keeps a stack's id only where its hash
 * was known. */
struct ft_plans {
    int64_t *lid;   /* per location: its id */
    uint64_t *lsig; /* per location: its signature */
    size_t nlocs;
    int64_t *sid;   /* per stack: its stored id */
    size_t *poff;   /* per stack: its plan, plan[poff[i] .. poff[i + 1]) */
    uint32_t *plan; /* a plan: the flat accumulator (UINT32_MAX: none), then the cumulative ones */
    size_t nstacks; /* 0: no plans */
};

struct ft_memo {
    struct hp_map64 slot_of; /* function id -> accumulator */
    int64_t *slot_fid;       /* per accumulator: its function id */
    size_t nslots, slots_cap;
    struct ft_plans prev; /* the previous snapshot's, by place */
};

static void ft_plans_release(struct ft_plans *pl)
{
    free(pl->lid);
    free(pl->lsig);
    free(pl->sid);
    free(pl->poff);
    free(pl->plan);
    *pl = (struct ft_plans){ 0 };
}

static void ft_memo_clear(struct ft_memo *m)
{
    ft_plans_release(&m->prev);
    hp_map64_release(&m->slot_of);
    free(m->slot_fid);
    *m = (struct ft_memo){ 0 };
}

struct node_base {
    int64_t node_id; /* 0: free slot */
    bool loaded;
    uint64_t used;
    struct blob_base blob[3]; /* by enum store_blob_kind */
    struct node_memo memo;
    struct ft_memo ft;
    struct node_group group;
};

struct store_writer {
    struct name_ids objects, functions, files, stat_names;
    struct hp_map64 obj_index; /* object id -> index into locmaps + 1 */
    struct hp_map64 *locmaps;  /* per object: address -> location id */
    size_t nlocmaps, locmaps_cap;
    struct hp_map64 symbolized; /* location id -> 1 when its frames are stored */
    struct hp_map64 stacks;     /* stack hash -> stack id */
    struct node_base bases[NODE_SLOTS]; /* the last one: the spare */
    uint64_t tick;
};

/* The writer's slot of node_id when it has one, without loading it
 * (node_base does that). */
static struct node_base *node_cached(struct store_writer *w, int64_t node_id)
{
    for (int i = 0; w && i < NODE_SLOTS; i++)
        if (w->bases[i].node_id == node_id)
            return &w->bases[i];
    return NULL;
}

static void name_ids_init(struct name_ids *n)
{
    hp_arena_init(&n->arena);
    hp_strtab_init(&n->tab, &n->arena);
    n->ids = NULL;
    n->nids = 0;
}

static void name_ids_release(struct name_ids *n)
{
    free(n->ids);
    hp_strtab_release(&n->tab);
    hp_arena_release(&n->arena);
}

static void blob_base_clear(struct blob_base *b)
{
    free(b->key_data);
    free(b->data);
    store_lines_release(&b->lines);
    store_lines_release(&b->key_lines);
    *b = (struct blob_base){ 0 };
}

static void lines_copy(struct store_lines *to, const struct store_lines *from)
{
    *to = (struct store_lines){ 0 };
    if (!from->known)
        return;
    *to = *from;
    to->off = hp_xmalloc(((size_t)from->n + 1) * sizeof(*to->off));
    memcpy(to->off, from->off, ((size_t)from->n + 1) * sizeof(*to->off));
    to->hash = hp_xmalloc(((size_t)from->n + 1) * sizeof(*to->hash));
    if (from->n)
        memcpy(to->hash, from->hash, (size_t)from->n * sizeof(*to->hash));
}

void store_writer_free(struct store_writer *w)
{
    if (!w)
        return;
    name_ids_release(&w->objects);
    name_ids_release(&w->functions);
    name_ids_release(&w->files);
    name_ids_release(&w->stat_names);
    hp_map64_release(&w->obj_index);
    for (size_t i = 0; i < w->nlocmaps; i++)
        hp_map64_release(&w->locmaps[i]);
    free(w->locmaps);
    hp_map64_release(&w->symbolized);
    hp_map64_release(&w->stacks);
    for (int i = 0; i < NODE_SLOTS; i++) {
        for (size_t k = 0; k < HP_ARRAY_SIZE(w->bases[i].blob); k++)
            blob_base_clear(&w->bases[i].blob[k]);
        node_memo_clear(&w->bases[i].memo);
        ft_memo_clear(&w->bases[i].ft);
        node_group_drop(&w->bases[i].group);
    }
    free(w);
}

static struct store_writer *writer_new(void)
{
    struct store_writer *w = hp_xcalloc(1, sizeof(*w));
    name_ids_init(&w->objects);
    name_ids_init(&w->functions);
    name_ids_init(&w->files);
    name_ids_init(&w->stat_names);
    hp_map64_init(&w->obj_index);
    hp_map64_init(&w->symbolized);
    hp_map64_init(&w->stacks);
    return w;
}

void store_writer_reset(struct store *s)
{
    store_writer_free(s->w);
    s->w = NULL;
    s->writer_gen++;
}

static struct store_writer *writer(struct store *s)
{
    if (!s->w)
        s->w = writer_new();
    return s->w;
}

/* Id of a dictionary row (functions, files, stat names, objects): from the
 * writer's cache under `key`, else found with `find` (binding
 * binds[0..nfind)), else inserted with `insert` (binding binds[0..ninsert);
 * a NULL bind is SQL NULL). The one find-or-insert of the writer. */
static int dict_id(struct store *s, struct name_ids *n, const char *key,
                   enum store_stmt_id find, enum store_stmt_id insert, const char *const *binds,
                   int nfind, int ninsert, const char *what, int64_t *ret, struct hp_buf *err)
{
    const char *interned = hp_strtab_intern(&n->tab, key, strlen(key));
    uint32_t sid = hp_strtab_id(&n->tab, interned);
    if (sid < n->nids && n->ids[sid]) {
        *ret = n->ids[sid];
        return 0;
    }
    sqlite3_stmt *st;
    int r;
    if ((r = store_stmt(s, find, &st, err)) < 0)
        return r;
    for (int i = 0; i < nfind; i++)
        sqlite3_bind_text(st, i + 1, binds[i], -1, SQLITE_STATIC);
    if ((r = store_step_row(s, st, what, err)) < 0)
        return r;
    int64_t id;
    if (r == 1) {
        id = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    } else {
        if ((r = store_stmt(s, insert, &st, err)) < 0)
            return r;
        for (int i = 0; i < ninsert; i++)
            if (binds[i])
                sqlite3_bind_text(st, i + 1, binds[i], -1, SQLITE_STATIC);
        if ((r = store_step_done(s, st, what, err)) < 0)
            return r;
        id = sqlite3_last_insert_rowid(s->db);
    }
    if (id <= 0 || id > UINT32_MAX) {
        hp_err_printf(err, "%s: %s: id %lld out of range", s->path, what, (long long)id);
        return HP_ESTORE;
    }
    if (sid >= n->nids) { /* room up to the table's last string, the new ones 0 */
        size_t had = n->nids;
        n->ids = hp_xgrow(n->ids, &n->nids, n->tab.len, sizeof(*n->ids));
        memset(n->ids + had, 0, (n->nids - had) * sizeof(*n->ids));
    }
    n->ids[sid] = (uint32_t)id;
    *ret = id;
    return 0;
}

/* Id of a function or file name. */
static int name_id(struct store *s, struct name_ids *n, enum store_stmt_id find,
                   enum store_stmt_id insert, const char *name, int64_t *ret,
                   struct hp_buf *err)
{
    const char *binds[] = { name };
    return dict_id(s, n, name, find, insert, binds, 1, 1, "storing a name", ret, err);
}

/* Id of a statistic's (name, unit); cached under "name\x1funit". */
static int stat_name_id(struct store *s, const char *name, const char *unit, int64_t *ret,
                        struct hp_buf *err)
{
    char *key = hp_xasprintf("%s\x1f%s", name, unit);
    const char *binds[] = { name, unit };
    int r = dict_id(s, &writer(s)->stat_names, key, STMT_STAT_NAME_FIND,
                    STMT_STAT_NAME_INSERT, binds, 2, 2, "storing a statistic name", ret, err);
    free(key);
    return r;
}

/* Id of a mapping's object: by build-id, else by node, inode and path. */
static char *object_key(int64_t node_id, const struct profile_mapping *m)
{
    if (m->build_id && *m->build_id)
        return hp_xasprintf("b:%s", m->build_id);
    return hp_xasprintf("p:%lld:%llu:%s", (long long)node_id, (unsigned long long)m->inode,
                        m->path);
}

/* The writer's cached id of a dictionary key; 0 when not cached. */
static int64_t dict_cached(struct name_ids *n, const char *key)
{
    const char *interned = hp_strtab_intern(&n->tab, key, strlen(key));
    uint32_t sid = hp_strtab_id(&n->tab, interned);
    return sid < n->nids ? n->ids[sid] : 0;
}

static int object_id(struct store *s, int64_t node_id, const struct profile_mapping *m,
                     int64_t *ret, struct hp_buf *err)
{
    bool by_build_id = m->build_id && *m->build_id;
    char *key = object_key(node_id, m);
    const char *binds[] = { key, by_build_id ? m->build_id : NULL, m->path };
    int r = dict_id(s, &writer(s)->objects, key, STMT_OBJECT_FIND, STMT_OBJECT_INSERT, binds,
                    1, 3, "storing an object", ret, err);
    free(key);
    return r;
}

/* The per-object address map for an object id (0 absolute, -1 named). */
static struct hp_map64 *locmap_for(struct store_writer *w, int64_t obj)
{
    uint64_t key = (uint64_t)obj;
    uint32_t idx;
    if (!hp_map64_get(&w->obj_index, key, &idx)) {
        w->locmaps = hp_xgrow(w->locmaps, &w->locmaps_cap, w->nlocmaps + 1,
                              sizeof(*w->locmaps));
        hp_map64_init(&w->locmaps[w->nlocmaps]);
        idx = (uint32_t)++w->nlocmaps;
        (void)hp_map64_put(&w->obj_index, key, idx, &idx);
    }
    return &w->locmaps[idx - 1];
}

/* Database id of a profile string (function name or file). A profile's
 * strings are numbered (profile_string_id), and by_sid, indexed by that
 * number, remembers each one's id (0: not looked up yet): a frame that
 * repeats a name costs an array read, not hashing its text again. */
static int profile_name_id(struct store *s, const struct profile *p, uint32_t *by_sid,
                           struct name_ids *n, enum store_stmt_id find,
                           enum store_stmt_id insert, const char *str, int64_t *ret,
                           struct hp_buf *err)
{
    uint32_t sid = profile_string_id(p, str);
    if (by_sid[sid]) {
        *ret = by_sid[sid];
        return 0;
    }
    int r = name_id(s, n, find, insert, str, ret, err);
    if (r == 0 && *ret > 0 && *ret <= UINT32_MAX)
        by_sid[sid] = (uint32_t)*ret;
    return r;
}

/* Function and file ids of a location's frames: fids/file_ids are indexed
 * like p->frames; fn_sid and file_sid as profile_name_id's by_sid. */
static int frames_ids(struct store *s, const struct profile *p, const struct profile_location *l,
                      uint32_t *fn_sid, uint32_t *file_sid, int64_t *fids, int64_t *file_ids,
                      struct hp_buf *err)
{
    struct store_writer *w = writer(s);
    for (uint32_t i = 0; i < l->nframes; i++) {
        uint32_t k = l->frame_off + i;
        const struct profile_frame *f = &p->frames[k];
        int r;
        fids[k] = file_ids[k] = 0;
        if (f->function &&
            (r = profile_name_id(s, p, fn_sid, &w->functions, STMT_FUNCTION_FIND,
                                 STMT_FUNCTION_INSERT, f->function, &fids[k], err)) < 0)
            return r;
        if (f->file && (r = profile_name_id(s, p, file_sid, &w->files, STMT_FILE_FIND,
                                            STMT_FILE_INSERT, f->file, &file_ids[k], err)) < 0)
            return r;
    }
    return 0;
}

/* frames_packed of a location: count, then (function id, file id, line). */
static void frames_pack(const struct profile *p, const struct profile_location *l,
                        const int64_t *fids, const int64_t *file_ids, struct store_pack *out)
{
    out->len = 0;
    store_pack_u64(out, l->nframes);
    for (uint32_t i = 0; i < l->nframes; i++) {
        uint32_t k = l->frame_off + i;
        store_pack_u64(out, (uint64_t)fids[k]);
        store_pack_u64(out, (uint64_t)file_ids[k]);
        store_pack_u64(out, p->frames[k].line);
    }
}

/* Everything derived from one profile, before the snapshot row exists. */
struct derived {
    int64_t *mobj;  /* per mapping: object id or 0 */
    int64_t *lid;   /* per location: location id */
    bool *lnew;     /* per location: inserted by this transaction */
    int64_t *fids;  /* per frame: function id or 0 */
    int64_t *file_ids; /* per frame: file id or 0 */
    uint32_t *fn_sid, *file_sid; /* per profile string: its function and file id or 0 */
    int64_t *sid;   /* per stack: stack id */
    int64_t ss_id;  /* sample set row */
    double totals[PV_COUNT];
};

/* pf when its ids may be used, else NULL. */
static const struct prefetch *prefetch_valid(const struct store *s, const struct prefetch *pf)
{
    return pf && pf->lid && s->w && pf->gen == s->writer_gen ? pf : NULL;
}

static void derived_release(struct derived *d)
{
    free(d->mobj);
    free(d->lid);
    free(d->lnew);
    free(d->fids);
    free(d->file_ids);
    free(d->fn_sid);
    free(d->file_sid);
    free(d->sid);
}

/* Location l's key in its object's address map, for the objects already
 * mapped (the ones to prefetch); false for named locations (keyed by a
 * function id found later) and for absolute addresses. */
static bool loc_key(const struct profile *p, const struct derived *d,
                    const struct profile_location *l, int64_t *ret_obj, uint64_t *ret_addr)
{
    if ((l->flags & PROFILE_LOC_NAMED) || !l->mapping || l->mapping > p->nmappings ||
        d->mobj[l->mapping - 1] <= 0)
        return false;
    const struct profile_mapping *m = &p->mappings[l->mapping - 1];
    *ret_obj = d->mobj[l->mapping - 1];
    *ret_addr = l->address - m->start + m->offset;
    return true;
}

/* Prefetch for location l (see WRITE_PREFETCH) its address map slot, or
 * with `found` (the slot was prefetched before) the slot of its location
 * id in the map of symbolized locations, looked up next. Only looks: an
 * object without a map yet gets none here. */
static void loc_prefetch(const struct store_writer *w, const struct profile *p,
                         const struct derived *d, const struct prefetch *pf, size_t i,
                         bool found)
{
    const struct profile_location *l = &p->locs[i];
    int64_t obj;
    uint64_t addr;
    uint32_t idx, id;
    if (pf && pf->lid[i]) {
        if (found && !pf->lsym[i])
            hp_map64_prefetch(&w->symbolized, (uint64_t)pf->lid[i]);
        return;
    }
    if (!loc_key(p, d, l, &obj, &addr) || !hp_map64_get(&w->obj_index, (uint64_t)obj, &idx))
        return;
    if (!found)
        hp_map64_prefetch(&w->locmaps[idx - 1], addr);
    else if (hp_map64_get(&w->locmaps[idx - 1], addr, &id))
        hp_map64_prefetch(&w->symbolized, id);
}

static bool mapping_is_object(const struct profile_mapping *m)
{
    return m->path && *m->path && !(m->flags & (PROFILE_MAP_ANON | PROFILE_MAP_SPECIAL));
}

/* by_fn/by_file (profile_name_id's by_sid) from the names of the node's
 * previous profile: both lists walked together, a name the previous one
 * lacks passed over, one it had and this one lacks stepped over within
 * NAME_RESYNC places. Equal names have equal ids. */
static uint64_t names_by_place(const struct profile *p, const struct node_names *prev,
                               uint32_t *by_fn, uint32_t *by_file)
{
    uint64_t found = 0;
    for (size_t k = 0, j = 0; k < p->strings.len && j < prev->n; k++) {
        const char *x = p->strings.by_id[k];
        size_t n = strlen(x), q = j, end = HP_MIN(prev->n, j + NAME_RESYNC);
        while (q < end && !(prev->len[q] == n && memcmp(prev->str[q], x, n) == 0))
            q++;
        if (q == end)
            continue;
        j = q + 1;
        by_fn[k] = prev->fn[q];
        by_file[k] = prev->file[q];
        found += by_fn[k] || by_file[k];
    }
    return found;
}

/* m: p's names with the ids d found for them (after the commit that made
 * those ids rows). */
static void node_names_take(struct node_names *m, const struct profile *p,
                            const struct derived *d)
{
    node_names_clear(m);
    if (!d->fn_sid)
        return;
    size_t n = p->strings.len;
    hp_arena_init(&m->arena);
    m->str = hp_xmalloc((n + 1) * sizeof(*m->str));
    m->len = hp_xmalloc((n + 1) * sizeof(*m->len));
    m->fn = hp_xmalloc((n + 1) * sizeof(*m->fn));
    m->file = hp_xmalloc((n + 1) * sizeof(*m->file));
    for (size_t k = 0; k < n; k++) {
        const char *x = p->strings.by_id[k];
        size_t len = strlen(x);
        char *c = hp_arena_alloc(&m->arena, len + 1);
        memcpy(c, x, len + 1);
        m->str[k] = c;
        m->len[k] = (uint32_t)HP_MIN(len, UINT32_MAX);
        m->fn[k] = d->fn_sid[k];
        m->file[k] = d->file_sid[k];
    }
    m->n = n;
}

static int store_locations(struct store *s, int64_t node_id, const struct profile *p,
                           bool force_frames, const struct prefetch *pf,
                           const struct node_names *prev, struct derived *d, struct hp_buf *err)
{
    struct store_writer *w = writer(s);
    struct store_pack fp = { 0 };
    int r = 0;
    d->mobj = hp_xcalloc(p->nmappings + 1, sizeof(*d->mobj));
    d->lid = hp_xcalloc(p->nlocs + 1, sizeof(*d->lid));
    d->lnew = hp_xcalloc(p->nlocs + 1, sizeof(*d->lnew));
    d->fids = hp_xcalloc(p->nframes + 1, sizeof(*d->fids));
    d->file_ids = hp_xcalloc(p->nframes + 1, sizeof(*d->file_ids));
    /* Ids of the profile's strings by their numbers, as functions and as
     * files (profile_name_id). */
    uint32_t *fn_sid = d->fn_sid = hp_xcalloc(p->strings.len + 1, sizeof(*fn_sid));
    uint32_t *file_sid = d->file_sid = hp_xcalloc(p->strings.len + 1, sizeof(*file_sid));
    if (prev)
        s->counts.names_by_place += names_by_place(p, prev, fn_sid, file_sid);
    for (size_t i = 0; i < p->nmappings; i++)
        if (mapping_is_object(&p->mappings[i]) &&
            (r = object_id(s, node_id, &p->mappings[i], &d->mobj[i], err)) < 0)
            goto out;

    for (size_t i = 0; i < p->nlocs; i++) {
        const struct profile_location *l = &p->locs[i];
        int64_t obj = 0;
        uint64_t addr = l->address;
        bool has_frames = l->nframes > 0 || (l->flags & PROFILE_LOC_SYMBOLIZED);
        if (i + WRITE_PREFETCH < p->nlocs)
            loc_prefetch(w, p, d, pf, i + WRITE_PREFETCH, false);
        if (i + WRITE_PREFETCH / 2 < p->nlocs)
            loc_prefetch(w, p, d, pf, i + WRITE_PREFETCH / 2, true);
        int64_t id = 0;
        bool stored_frames = false, cached = false, cached_frames = false;
        uint32_t one;
        if (pf && pf->lid[i]) {
            /* Neither its key nor its id need looking up again; when the
             * prefetch did not see its frames stored, look again (an
             * earlier location of this profile may have stored them). */
            id = pf->lid[i];
            cached = true;
            cached_frames = pf->lsym[i] || hp_map64_get(&w->symbolized, (uint64_t)id, &one);
        } else {
            if (l->flags & PROFILE_LOC_NAMED) {
                const char *name = l->nframes ? p->frames[l->frame_off].function : NULL;
                int64_t fid = 0;
                if (name &&
                    (r = profile_name_id(s, p, fn_sid, &w->functions, STMT_FUNCTION_FIND,
                                         STMT_FUNCTION_INSERT, name, &fid, err)) < 0)
                    goto out;
                obj = -1;
                addr = (uint64_t)fid;
            } else {
                (void)loc_key(p, d, l, &obj, &addr);
            }
            /* SQLite integers are signed; addresses round-trip through the cast. */
            uint32_t cid;
            if (hp_map64_get(locmap_for(w, obj), addr, &cid)) {
                id = cid;
                cached = true;
                cached_frames = hp_map64_get(&w->symbolized, (uint64_t)id, &one);
            } else {
                sqlite3_stmt *st;
                if ((r = store_stmt(s, STMT_LOC_FIND, &st, err)) < 0)
                    goto out;
                sqlite3_bind_int64(st, 1, obj);
                sqlite3_bind_int64(st, 2, (int64_t)addr);
                if ((r = store_step_row(s, st, "looking up a location", err)) < 0)
                    goto out;
                if (r == 1) {
                    id = sqlite3_column_int64(st, 0);
                    stored_frames = sqlite3_column_int(st, 2) != 0;
                    sqlite3_reset(st);
                }
                r = 0;
            }
        }
        if (cached)
            stored_frames = cached_frames;
        if ((r = frames_ids(s, p, l, fn_sid, file_sid, d->fids, d->file_ids, err)) < 0)
            goto out;
        if (has_frames && (id == 0 || !stored_frames || force_frames))
            frames_pack(p, l, d->fids, d->file_ids, &fp);
        if (id == 0) {
            sqlite3_stmt *st;
            if ((r = store_stmt(s, STMT_LOC_INSERT, &st, err)) < 0)
                goto out;
            sqlite3_bind_int64(st, 1, obj);
            sqlite3_bind_int64(st, 2, (int64_t)addr);
            sqlite3_bind_int64(st, 3, l->flags);
            if (has_frames)
                sqlite3_bind_blob(st, 4, fp.data, (int)fp.len, SQLITE_STATIC);
            if ((r = store_step_done(s, st, "inserting a location", err)) < 0)
                goto out;
            id = sqlite3_last_insert_rowid(s->db);
            stored_frames = has_frames;
            d->lnew[i] = true;
        } else if (has_frames && (!stored_frames || force_frames)) {
            /* Newer symbolization wins: a location first stored bare gets
             * its frames when a symbolized profile (or a reindex) brings them. */
            sqlite3_stmt *st;
            if ((r = store_stmt(s, STMT_LOC_UPDATE, &st, err)) < 0)
                goto out;
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, l->flags);
            sqlite3_bind_blob(st, 3, fp.data, (int)fp.len, SQLITE_STATIC);
            if ((r = store_step_done(s, st, "updating a location", err)) < 0)
                goto out;
            /* Stack views copied its old frames: they are stale now (view.c).
             * A prefetched id skipped working out its object. */
            int64_t gobj = obj;
            if (pf && pf->lid[i]) {
                uint64_t a;
                gobj = 0;
                if (l->flags & PROFILE_LOC_NAMED)
                    gobj = -1;
                else
                    (void)loc_key(p, d, l, &gobj, &a);
            }
            if ((r = store_stmt(s, STMT_LOC_GEN_BUMP, &st, err)) < 0)
                goto out;
            sqlite3_bind_int64(st, 1, gobj);
            if ((r = store_step_done(s, st, "marking a location's object changed", err)) < 0)
                goto out;
            stored_frames = true;
        }
        if (id <= 0 || id > UINT32_MAX) {
            hp_err_printf(err, "%s: location id %lld out of range", s->path, (long long)id);
            r = HP_ESTORE;
            goto out;
        }
        /* A cached id is in the maps already. */
        uint32_t old;
        if (!cached)
            (void)hp_map64_put(locmap_for(w, obj), addr, (uint32_t)id, &old);
        if (stored_frames && !cached_frames)
            (void)hp_map64_put(&w->symbolized, (uint64_t)id, 1, &old);
        d->lid[i] = id;
    }
out:
    store_pack_release(&fp);
    return r;
}

/* One stack's hash chain h over its location ids from place `from` on;
 * *known ends false if one of them is 0. */
static inline uint64_t stack_hash_more(const uint32_t *locs, uint32_t from, uint32_t to,
                                       const int64_t *lid, uint64_t h, bool *known)
{
    for (uint32_t j = from; j < to; j++) {
        uint64_t id = (uint64_t)lid[locs[j]];
        *known &= id != 0;
        h = hp_hash_word(h, id);
    }
    return h;
}

/* The hashes of stacks which[0 .. n) (which NULL: stacks 0 .. n) over
 * their location ids lid[] (the ids' bytes as 64-bit words through
 * hp_hash_bytes, stored in stacks.hash: packing waits until a stack is
 * new); 63 bits so each is a non-negative SQLite integer. ret[k] is stack
 * which[k]'s, PF_NO_HASH when one of its ids is 0 (not known). Four stacks
 * side by side: one hash is a chain of multiplications, each waiting on
 * the last, and four chains keep the multiplier busy (a steady node's 20k
 * stacks of 20 locations: about 0.7 -> 0.4 ms warm; 1.32 -> 0.94 ms from
 * a cold cache with the chains in scalars). */
static void stack_hashes(const struct profile *p, const int64_t *lid, const uint32_t *which,
                         size_t n, uint64_t *ret)
{
    const uint64_t seed = UINT64_C(0x5354414b);
    size_t k = 0;
    /* Four in step up to the shortest one's length, in scalars (kept in
     * arrays with a length test a place, the loop ran 24 instructions a
     * location id), then each one's rest. */
    for (; k + 4 <= n; k += 4) {
        uint32_t i[4];
        for (int q = 0; q < 4; q++)
            i[q] = which ? which[k + q] : (uint32_t)(k + q);
        const uint32_t *l0 = profile_stack_locs(p, i[0]), *l1 = profile_stack_locs(p, i[1]),
                       *l2 = profile_stack_locs(p, i[2]), *l3 = profile_stack_locs(p, i[3]);
        uint32_t n0 = p->stacks[i[0]].n, n1 = p->stacks[i[1]].n, n2 = p->stacks[i[2]].n,
                 n3 = p->stacks[i[3]].n, m = HP_MIN(HP_MIN(n0, n1), HP_MIN(n2, n3));
        uint64_t h0 = hp_hash_begin(seed), h1 = h0, h2 = h0, h3 = h0;
        bool k0 = true, k1 = true, k2 = true, k3 = true; /* every id known */
        for (uint32_t j = 0; j < m; j++) {
            uint64_t a = (uint64_t)lid[l0[j]], b = (uint64_t)lid[l1[j]],
                     c = (uint64_t)lid[l2[j]], d = (uint64_t)lid[l3[j]];
            k0 &= a != 0;
            k1 &= b != 0;
            k2 &= c != 0;
            k3 &= d != 0;
            h0 = hp_hash_word(h0, a);
            h1 = hp_hash_word(h1, b);
            h2 = hp_hash_word(h2, c);
            h3 = hp_hash_word(h3, d);
        }
        h0 = stack_hash_more(l0, m, n0, lid, h0, &k0);
        h1 = stack_hash_more(l1, m, n1, lid, h1, &k1);
        h2 = stack_hash_more(l2, m, n2, lid, h2, &k2);
        h3 = stack_hash_more(l3, m, n3, lid, h3, &k3);
        ret[k] = k0 ? hp_hash_end(h0) >> 1 : PF_NO_HASH;
        ret[k + 1] = k1 ? hp_hash_end(h1) >> 1 : PF_NO_HASH;
        ret[k + 2] = k2 ? hp_hash_end(h2) >> 1 : PF_NO_HASH;
        ret[k + 3] = k3 ? hp_hash_end(h3) >> 1 : PF_NO_HASH;
    }
    for (; k < n; k++) {
        uint32_t i = which ? which[k] : (uint32_t)k;
        bool known = true;
        uint64_t h = stack_hash_more(profile_stack_locs(p, i), 0, p->stacks[i].n, lid,
                                     hp_hash_begin(seed), &known);
        ret[k] = known ? hp_hash_end(h) >> 1 : PF_NO_HASH;
    }
}

/* Bounded: a fleet whose nodes share few stacks (3,000 nodes x 2,600 own
 * stacks in collector-bench) grew this map to most of the writer's memory.
 * When full, it starts over; a miss costs one index lookup. */
static void stack_cache_put(struct store_writer *w, uint64_t h, int64_t id)
{
    if (w->stacks.len >= STACK_CACHE_MAX) {
        hp_map64_release(&w->stacks);
        hp_map64_init(&w->stacks);
    }
    uint32_t old;
    (void)hp_map64_put(&w->stacks, h, (uint32_t)id, &old);
}

/* True when stack i names a location this transaction inserted: no stored
 * stack can (ids are not reused while a stack names them: retention keeps
 * every location a remaining stack names), so it need not be looked up. */
static bool stack_is_new(const struct profile *p, const struct derived *d, uint32_t i)
{
    const uint32_t *locs = profile_stack_locs(p, i);
    for (uint32_t j = 0; j < p->stacks[i].n; j++)
        if (d->lnew[locs[j]])
            return true;
    return false;
}

/* Stack ids for the hashes the cache missed (distinct, in profile order):
 * the stored ones found with one bulk lookup, the rest inserted in one bulk
 * insert, in order, so ids come out as one insert after another gives them.
 * On SQLite, a stack the prefetch looked up and did not find is not looked
 * up again. */
static int stacks_missed(struct store *s, const struct profile *p, const struct prefetch *pf,
                         const struct derived *d, const uint32_t *miss, const int64_t *mhash,
                         size_t nm, int64_t *ret_ids, struct hp_buf *err)
{
    int64_t *fhash = hp_xmalloc(nm * sizeof(*fhash));
    size_t *fat = hp_xmalloc(nm * sizeof(*fat));
    size_t nf = 0;
    for (size_t k = 0; k < nm; k++) {
        ret_ids[k] = 0;
        bool absent = false;
#ifdef STORE_BACKEND_SQLITE
        /* With pf valid no other connection committed since the prefetch
         * (writer_begin's data_version check): a stack it did not find is
         * still not there. PostgreSQL's epoch moves on deletions only, and
         * the collectors of a fleet insert stacks meanwhile. */
        absent = pf && pf->hash[miss[k]] != PF_NO_HASH && !pf->sid[miss[k]];
#endif
        if (!absent && !stack_is_new(p, d, miss[k])) {
            fat[nf] = k;
            fhash[nf++] = mhash[k];
        }
    }
    int64_t *fids = hp_xmalloc((nf + 1) * sizeof(*fids));
    int r = store_stacks_find(s, fhash, nf, fids, err);
    s->counts.stacks_by_hash += nf;
    for (size_t f = 0; r == 0 && f < nf; f++)
        ret_ids[fat[f]] = fids[f];
    free(fhash);
    free(fat);
    free(fids);
    if (r < 0)
        return r;
    size_t nnew = 0;
    for (size_t k = 0; k < nm; k++)
        nnew += ret_ids[k] == 0;
    if (!nnew)
        return 0;
    int64_t *nhash = hp_xmalloc(nnew * sizeof(*nhash));
    int64_t *depths = hp_xmalloc(nnew * sizeof(*depths));
    int64_t *nids = hp_xmalloc(nnew * sizeof(*nids));
    size_t *offs = hp_xmalloc((nnew + 1) * sizeof(*offs));
    struct store_pack sp = { 0 };
    size_t j = 0;
    for (size_t k = 0; k < nm; k++) {
        if (ret_ids[k])
            continue;
        const uint32_t *locs = profile_stack_locs(p, miss[k]);
        uint32_t n = p->stacks[miss[k]].n;
        nhash[j] = mhash[k];
        depths[j] = n;
        offs[j] = sp.len;
        store_pack_u64(&sp, n);
        for (uint32_t x = 0; x < n; x++)
            store_pack_u64(&sp, (uint64_t)d->lid[locs[x]]);
        j++;
    }
    offs[nnew] = sp.len;
    r = store_stacks_insert(s, nhash, depths, sp.data, offs, nnew, nids, err);
    s->counts.stacks_inserted += nnew;
    j = 0;
    for (size_t k = 0; r == 0 && k < nm; k++)
        if (!ret_ids[k])
            ret_ids[k] = nids[j++];
    free(nhash);
    free(depths);
    free(nids);
    free(offs);
    store_pack_release(&sp);
    return r;
}

/* The node's previous profile is read for its stacks when at least this
 * many, and at least half of the profile's, missed the cache: a node the
 * writer has not cached (a fleet bigger than the cache, a writer started
 * anew). A cached node's few misses are stacks new this hour, which that
 * profile cannot hold: reading its 20k stacks for them cost a steady
 * node's ingest. */
#define STACK_HINT_MIN 32

/* The stacks of the node's previous sample set (its cached base), hash ->
 * id in `hint`, read by id. A node's next profile is mostly the same stacks,
 * and the ids of one node's stacks sit in runs (inserted together), so this
 * reads a few ranges of the stacks table where looking the hashes up lands
 * each on its own page of the hash index: on a fleet whose nodes share few
 * stacks (each node's own objects, no build-ids), that index outgrows the
 * page cache and its lookups were a third of the round (issue 20). A base
 * that does not decode only loses the hint. */
static int stacks_hint(struct store *s, const struct blob_base *b, struct hp_map64 *hint,
                       struct hp_buf *err)
{
    const void *data = b->data ? b->data : b->key_data;
    size_t len = b->data ? b->len : b->key_len;
    if (!data || !len)
        return 0;
    struct hp_map64 ids, objs;
    hp_map64_init(&ids);
    hp_map64_init(&objs);
    struct hp_buf derr = HP_BUF_INIT(0);
    int r = 0;
    if (store_sample_set_refs(s, 0, data, len, &ids, &objs, &derr) == 0 && ids.len) {
        int64_t *v = hp_xmalloc(ids.len * sizeof(*v));
        int64_t *h = hp_xmalloc(ids.len * sizeof(*h));
        size_t n = 0;
        for (size_t i = 0; i < ids.cap; i++)
            if (ids.slots[i].val != UINT32_MAX && ids.slots[i].key > 0 &&
                ids.slots[i].key <= UINT32_MAX)
                v[n++] = (int64_t)ids.slots[i].key;
        hp_qsort(v, n, sizeof(*v), hp_cmp_i64);
        r = store_stacks_hashes(s, v, n, h, err);
        hp_map64_reserve(hint, n);
        uint32_t old;
        for (size_t i = 0; r == 0 && i < n; i++)
            if (h[i])
                (void)hp_map64_put(hint, (uint64_t)h[i], (uint32_t)v[i], &old);
        free(v);
        free(h);
    }
    hp_buf_release(&derr);
    hp_map64_release(&ids);
    hp_map64_release(&objs);
    return r;
}

static int store_stacks(struct store *s, const struct node_base *nb, const struct profile *p,
                        const struct prefetch *pf, struct derived *d, struct hp_buf *err)
{
    struct store_writer *w = writer(s);
    int r = 0;
    d->sid = hp_xcalloc(p->nstacks + 1, sizeof(*d->sid));
    /* Every stack's hash first, so the cache's slots can be prefetched a
     * few stacks ahead of their lookups: a steady node's stacks are all
     * cached, and the map (up to STACK_CACHE_MAX slots) misses the CPU
     * cache on nearly every one. */
    uint64_t *hashes = hp_xmalloc((p->nstacks + 1) * sizeof(*hashes));
    /* The cache's misses, each hash once (a profile may repeat one). */
    uint32_t *miss = hp_xmalloc((p->nstacks + 1) * sizeof(*miss));
    int64_t *mhash = hp_xmalloc((p->nstacks + 1) * sizeof(*mhash));
    int64_t *mids = NULL;
    size_t nm = 0;
    struct hp_map64 missed; /* hash -> index into miss */
    hp_map64_init(&missed);
    size_t nh = 0; /* the stacks to hash (in miss[], for now) */
    for (size_t i = 0; i < p->nstacks; i++) {
        if (p->stacks[i].n == 0) {
            /* Parsers refuse empty stacks; a caller that builds one is wrong. */
            hp_err_printf(err, "%s: stack %zu of the profile is empty", s->path, i);
            r = HP_EUSAGE;
            goto out;
        }
        if (pf && pf->hash[i] != PF_NO_HASH)
            hashes[i] = pf->hash[i];
        else
            miss[nh++] = (uint32_t)i;
    }
    if (nh) {
        uint64_t *h = hp_xmalloc(nh * sizeof(*h));
        stack_hashes(p, d->lid, miss, nh, h);
        for (size_t k = 0; k < nh; k++)
            hashes[miss[k]] = h[k];
        free(h);
    }
    for (size_t i = 0; i < p->nstacks; i++) {
        uint64_t h = hashes[i];
        if (i + WRITE_PREFETCH < p->nstacks && !(pf && pf->sid[i + WRITE_PREFETCH]))
            hp_map64_prefetch(&w->stacks, hashes[i + WRITE_PREFETCH]);
        uint32_t cached;
        if (pf && pf->sid[i]) {
            d->sid[i] = pf->sid[i];
            s->counts.stacks_cached++;
        } else if (hp_map64_get(&w->stacks, h, &cached)) {
            d->sid[i] = cached;
            s->counts.stacks_cached++;
        } else if (!hp_map64_put(&missed, h, (uint32_t)nm, &cached)) {
            miss[nm] = (uint32_t)i;
            mhash[nm++] = (int64_t)h;
        }
    }
    if (!nm)
        goto out;
    mids = hp_xcalloc(nm, sizeof(*mids));
    if (nm >= STACK_HINT_MIN && nm * 2 >= p->nstacks && nb) {
        struct hp_map64 hint;
        hp_map64_init(&hint);
        r = stacks_hint(s, &nb->blob[STORE_BLOB_SS], &hint, err);
        uint32_t id, old;
        /* Every stack the hint names, repeats included ... */
        for (size_t i = 0; r == 0 && i < p->nstacks; i++)
            if (!d->sid[i] && hp_map64_get(&hint, hashes[i], &id))
                d->sid[i] = id;
        /* ... leaves the misses: the rest are looked up by hash. */
        size_t kept = 0;
        for (size_t k = 0; r == 0 && k < nm; k++) {
            if (hp_map64_get(&hint, (uint64_t)mhash[k], &id)) {
                stack_cache_put(w, (uint64_t)mhash[k], id);
                s->counts.stacks_by_node++;
            } else {
                miss[kept] = miss[k];
                mhash[kept++] = mhash[k];
            }
        }
        hp_map64_release(&hint);
        if (r < 0)
            goto out;
        if (kept < nm) {
            hp_map64_release(&missed);
            hp_map64_init(&missed);
            for (size_t k = 0; k < kept; k++)
                (void)hp_map64_put(&missed, (uint64_t)mhash[k], (uint32_t)k, &old);
            nm = kept;
        }
        if (!nm)
            goto out;
    }
    if ((r = stacks_missed(s, p, pf, d, miss, mhash, nm, mids, err)) < 0)
        goto out;
    for (size_t k = 0; k < nm; k++) {
        if (mids[k] <= 0 || mids[k] > UINT32_MAX) {
            hp_err_printf(err, "%s: stack id %lld out of range", s->path, (long long)mids[k]);
            r = HP_ESTORE;
            goto out;
        }
        stack_cache_put(w, (uint64_t)mhash[k], mids[k]);
    }
    /* Every stack whose hash missed, repeats included. */
    for (size_t i = 0; i < p->nstacks; i++) {
        uint32_t k;
        if (!d->sid[i] && hp_map64_get(&missed, hashes[i], &k))
            d->sid[i] = mids[k];
    }
out:
    hp_map64_release(&missed);
    free(mids);
    free(mhash);
    free(miss);
    free(hashes);
    return r;
}

/* Before the write lock is taken: what the writer's caches know of the
 * profile (struct prefetch), and the ids of its stacks that the cache lacks
 * and the database has, with one lookup outside the write transaction, so
 * that the lock holder does not probe the index for them (on PostgreSQL
 * other collectors wait for it meanwhile). Only stacks whose locations the
 * cache knows; the ids are of committed rows, and writer_begin drops them
 * with the rest of the caches (which voids pf) when a deletion came
 * between. Nothing is written. */
static int stacks_prefetch(struct store *s, int64_t node_id, const struct profile *p,
                           struct prefetch *pf, struct hp_buf *err)
{
    struct store_writer *w = s->w;
    *pf = (struct prefetch){ .gen = s->writer_gen };
    if (!w || !p->nstacks)
        return 0;
    struct derived d = { .mobj = hp_xcalloc(p->nmappings + 1, sizeof(*d.mobj)),
                         .lid = hp_xcalloc(p->nlocs + 1, sizeof(*d.lid)) };
    pf->lsym = hp_xcalloc(p->nlocs + 1, sizeof(*pf->lsym));
    pf->hash = hp_xmalloc(p->nstacks * sizeof(*pf->hash));
    pf->sid = hp_xcalloc(p->nstacks, sizeof(*pf->sid));
    for (size_t i = 0; i < p->nmappings; i++) {
        if (!mapping_is_object(&p->mappings[i]))
            continue;
        char *key = object_key(node_id, &p->mappings[i]);
        d.mobj[i] = dict_cached(&w->objects, key);
        free(key);
    }
    /* Each location's address map and key, then its id, then whether its
     * frames are stored: three passes, each prefetching a few locations
     * ahead the slots it looks up (the maps of a steady node's 15k
     * locations miss the CPU cache on most lookups). */
    uint32_t *lm = hp_xcalloc(p->nlocs + 1, sizeof(*lm)); /* locmaps index + 1, 0: not cached */
    uint64_t *addr = pf->laddr = hp_xmalloc((p->nlocs + 1) * sizeof(*addr));
    int64_t *lobj = pf->lobj = hp_xcalloc(p->nlocs + 1, sizeof(*lobj));
    for (size_t i = 0; i < p->nlocs; i++) {
        const struct profile_location *l = &p->locs[i];
        int64_t obj = 0;
        addr[i] = l->address;
        if (l->flags & PROFILE_LOC_NAMED) {
            const char *name = l->nframes ? p->frames[l->frame_off].function : NULL;
            obj = -1;
            addr[i] = name ? (uint64_t)dict_cached(&w->functions, name) : 0;
            if (name && !addr[i])
                continue;
        } else if (!loc_key(p, &d, l, &obj, &addr[i]) && l->mapping &&
                   l->mapping <= p->nmappings && mapping_is_object(&p->mappings[l->mapping - 1])) {
            continue; /* its object is not cached */
        }
        if (hp_map64_get(&w->obj_index, (uint64_t)obj, &lm[i]))
            lobj[i] = obj;
    }
    /* The previous snapshot's location at the same place, when it is this
     * one (node_memo): its id and frames from there. The place is found
     * by walking both lists together: a dump numbers its locations as its
     * stacks first name them, so one new stack early in a dump moved every
     * later location by its new ones, and only 11% of a steady 20k-stack
     * node's locations stayed at their index. One the previous dump lacks
     * is passed over (looked up by its key below); one it had and this
     * one lacks is stepped over, within LOC_RESYNC places. */
    const struct node_base *cached = node_cached(w, node_id);
    const struct node_memo *mm = cached && cached->memo.pf.lid ? &cached->memo : NULL;
    size_t mlocs = mm ? mm->nlocs : 0;
    bool *known = hp_xcalloc(p->nlocs + 1, sizeof(*known));
    for (size_t i = 0, j = 0; i < p->nlocs && j < mlocs; i++) {
        if (!lobj[i])
            continue;
        size_t k = j, end = HP_MIN(mlocs, j + LOC_RESYNC);
        while (k < end && !(mm->pf.lobj[k] == lobj[i] && mm->pf.laddr[k] == addr[i]))
            k++;
        if (k == end)
            continue;
        j = k + 1;
        if (!mm->pf.lid[k])
            continue;
        d.lid[i] = mm->pf.lid[k];
        pf->lsym[i] = mm->pf.lsym[k];
        known[i] = true;
        s->counts.locations_by_place++;
    }
    for (size_t i = 0; i < p->nlocs; i++) {
        size_t a = i + WRITE_PREFETCH;
        uint32_t id;
        if (a < p->nlocs && lm[a] && !known[a])
            hp_map64_prefetch(&w->locmaps[lm[a] - 1], addr[a]);
        if (lm[i] && !known[i] && hp_map64_get(&w->locmaps[lm[i] - 1], addr[i], &id))
            d.lid[i] = id;
    }
    for (size_t i = 0; i < p->nlocs; i++) {
        size_t a = i + WRITE_PREFETCH;
        uint32_t one;
        if (a < p->nlocs && d.lid[a] && !pf->lsym[a])
            hp_map64_prefetch(&w->symbolized, (uint64_t)d.lid[a]);
        if (d.lid[i] && !pf->lsym[i])
            pf->lsym[i] = hp_map64_get(&w->symbolized, (uint64_t)d.lid[i], &one);
    }
    free(known);
    free(lm);
    /* Every stack's hash first (PF_NO_HASH where a location is not
     * cached), so that the cache's slots can be prefetched ahead of their
     * lookups (as store_stacks does). */
    stack_hashes(p, d.lid, NULL, p->nstacks, pf->hash);
    int64_t *mhash = hp_xmalloc(p->nstacks * sizeof(*mhash));
    size_t nm = 0;
    struct hp_map64 missed; /* hash -> index into mhash */
    hp_map64_init(&missed);
    size_t mstacks = mm ? HP_MIN(mm->nstacks, p->nstacks) : 0;
    for (size_t i = 0; i < p->nstacks; i++) {
        uint64_t h = pf->hash[i];
        uint32_t v;
        size_t a = i + WRITE_PREFETCH;
        if (a < p->nstacks && pf->hash[a] != PF_NO_HASH &&
            !(a < mstacks && mm->pf.hash[a] == pf->hash[a]))
            hp_map64_prefetch(&w->stacks, pf->hash[a]);
        if (h == PF_NO_HASH)
            continue;
        if (i < mstacks && mm->pf.hash[i] == h) { /* the previous snapshot's stack here */
            pf->sid[i] = mm->pf.sid[i];
            s->counts.stacks_by_place++;
        } else if (hp_map64_get(&w->stacks, h, &v)) {
            pf->sid[i] = v;
        } else if (!hp_map64_put(&missed, h, (uint32_t)nm, &v)) {
            mhash[nm++] = (int64_t)h;
        }
    }
    int r = 0;
    if (nm) {
        int64_t *ids = hp_xmalloc(nm * sizeof(*ids));
        r = store_stacks_find(s, mhash, nm, ids, err);
        s->counts.stacks_by_hash += nm;
        for (size_t k = 0; r == 0 && k < nm; k++)
            if (ids[k] > 0 && ids[k] <= UINT32_MAX)
                stack_cache_put(w, (uint64_t)mhash[k], ids[k]);
        for (size_t i = 0; r == 0 && i < p->nstacks; i++) {
            uint32_t k;
            if (pf->hash[i] == PF_NO_HASH || pf->sid[i] || !hp_map64_get(&missed, pf->hash[i], &k))
                continue;
            if (ids[k] > 0 && ids[k] <= UINT32_MAX)
                pf->sid[i] = (uint32_t)ids[k];
            else if (ids[k]) /* found but unusable: the writer finds it again and says so */
                pf->hash[i] = PF_NO_HASH;
        }
        free(ids);
    }
    hp_map64_release(&missed);
    free(mhash);
    free(d.mobj);
    pf->lid = d.lid;
    if (r < 0)
        prefetch_release(pf);
    return r;
}

static void pack_opt_str(struct store_pack *b, const char *str)
{
    store_pack_u64(b, str != NULL);
    if (str)
        store_pack_str(b, str);
}

static void pack_sample_set(const struct profile *p, const struct derived *d,
                            struct store_pack *b)
{
    store_pack_u64(b, SAMPLE_SET_VERSION);
    store_pack_u64(b, (uint64_t)p->format);
    store_pack_u64(b, (uint64_t)p->scaling);
    store_pack_u64(b, p->period);
    store_pack_u64(b, p->has_alloc);
    store_pack_u64(b, p->has_header_totals);
    for (int v = 0; v < PV_COUNT; v++)
        store_pack_i64(b, p->header_raw[v]);
    store_pack_i64(b, p->time_ns);
    pack_opt_str(b, p->hint);
    for (int v = 0; v < PV_COUNT; v++)
        pack_opt_str(b, p->value_unit[v]);

    store_pack_u64(b, p->nmappings);
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        store_pack_u64(b, (uint64_t)d->mobj[i]);
        store_pack_u64(b, m->start);
        store_pack_u64(b, m->limit);
        store_pack_u64(b, m->offset);
        store_pack_u64(b, m->inode);
        store_pack_str(b, m->perms);
        store_pack_u64(b, m->flags);
        store_pack_str(b, m->path);
        pack_opt_str(b, m->build_id);
    }
    store_pack_u64(b, p->nthreads);
    for (size_t i = 0; i < p->nthreads; i++) {
        const struct profile_thread *t = &p->threads[i];
        store_pack_u64(b, t->id);
        pack_opt_str(b, t->name);
        for (int v = 0; v < PV_COUNT; v++)
            store_pack_i64(b, t->raw[v]);
    }
    int64_t prev = 0;
    store_pack_u64(b, p->nsamples);
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *sm = &p->samples[i];
        store_pack_i64(b, d->sid[sm->stack] - prev);
        prev = d->sid[sm->stack];
        for (int v = 0; v < PV_COUNT; v++)
            store_pack_i64(b, sm->raw[v]);
    }
    prev = 0;
    store_pack_u64(b, p->nthread_samples);
    for (size_t i = 0; i < p->nthread_samples; i++) {
        const struct profile_sample *sm = &p->thread_samples[i];
        store_pack_i64(b, d->sid[sm->stack] - prev);
        prev = d->sid[sm->stack];
        store_pack_u64(b, sm->thread);
        for (int v = 0; v < PV_COUNT; v++)
            store_pack_i64(b, sm->raw[v]);
    }
}

/* 1 when row `id` still exists (checked inside the write transaction). */
static int row_exists(struct store *s, enum store_stmt_id stmt, int64_t id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, stmt, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    r = store_step_row(s, st, "checking a keyframe", err);
    sqlite3_reset(st);
    return r;
}

/* Fill `b` for the node whose last row is `id` of a blob table (raw_dumps,
 * sample_sets, function_totals_rest): the keyframe of its chain (bytes and
 * compressed size). The node's next row is compressed against the keyframe (depth 1): one
 * decompression, where loading the last row would decompress its whole
 * chain; a writer that keeps a node cached chains rows one after another.
 * id 0 leaves b empty. */
static int base_load(struct store *s, enum store_blob_kind kind, int64_t id,
                     struct blob_base *b, struct hp_buf *err)
{
    if (id <= 0)
        return 0;
    const struct store_blob_table *t = store_blob_table(kind);
    int depth = 0;
    int64_t link = id, root = id, csize = 0;
    while (link > 0) {
        sqlite3_stmt *st;
        int r = store_stmt(s, t->link, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, link);
        if ((r = store_step_row(s, st, "walking a delta chain", err)) < 0)
            return r;
        if (r == 0 || ++depth > STORE_CHAIN_GUARD) {
            sqlite3_reset(st);
            hp_err_printf(err, "%s: %s %lld: broken delta chain at row %lld", s->path,
                          t->what, (long long)id, (long long)link);
            return HP_ECORRUPT;
        }
        root = link;
        link = sqlite3_column_int64(st, 0);
        csize = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
    }
    int r = store_blob_load(s, t->get, root, &b->data, &b->len, err);
    if (r < 0)
        return r;
    b->id = b->key_id = root;
    b->key_data = hp_xmalloc(b->len ? b->len : 1);
    memcpy(b->key_data, b->data, b->len);
    b->key_len = b->len;
    b->depth = 0;
    b->csize = (size_t)HP_MAX(csize, 0);
    return 0;
}

/* The cache slot for a node, filled with its last blobs on first use
 * (from its latest ok snapshot). Another process (query retain,
 * reindex) may have deleted a cached row since: each use checks, under
 * the write lock, that every cached previous row and keyframe still
 * exists, and reloads otherwise. */
static int node_base(struct store *s, int64_t node_id, struct node_base **ret,
                     struct hp_buf *err)
{
    struct store_writer *w = writer(s);
    struct node_base *nb = node_cached(w, node_id), *victim = &w->bases[0];
    for (int i = 1; !nb && i < NODE_BASES; i++)
        if (w->bases[i].used < victim->used)
            victim = &w->bases[i];
    /* A fleet of more nodes than it keeps, stored in turn (a collector's
     * round), would have each node given up just before its turn came
     * again: every snapshot then read its node's bases back (8-12 ms of a
     * 20k-stack node's, and the memo and group builder lost: a snapshot
     * 38 ms where it is 20 with its base kept). A kept node used within
     * NODE_KEEP_TICKS stores stays; the others take turns in the spare. */
    if (!nb && victim->node_id && w->tick - victim->used < NODE_KEEP_TICKS)
        victim = &w->bases[NODE_BASES];
    if (!nb) {
        s->counts.bases_loaded++;
        nb = victim;
        nb->node_id = node_id;
        nb->loaded = false;
        node_memo_clear(&nb->memo);
        ft_memo_clear(&nb->ft);
        node_group_drop(&nb->group);
    }
    nb->used = ++w->tick;
    for (size_t k = 0; nb->loaded && k < HP_ARRAY_SIZE(nb->blob); k++) {
        const struct blob_base *b = &nb->blob[k];
        enum store_stmt_id exists = store_blob_table((enum store_blob_kind)k)->exists;
        int r1 = b->id ? row_exists(s, exists, b->id, err) : 1;
        int r2 = r1 > 0 && b->key_id ? row_exists(s, exists, b->key_id, err) : r1;
        if (r2 < 0)
            return r2;
        nb->loaded = r2 > 0;
    }
    if (!nb->loaded) {
        for (size_t k = 0; k < HP_ARRAY_SIZE(nb->blob); k++)
            blob_base_clear(&nb->blob[k]);
        sqlite3_stmt *st;
        int r = store_stmt(s, STMT_NODE_LAST_BLOBS, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, node_id);
        if ((r = store_step_row(s, st, "finding the node's last blobs", err)) < 0)
            return r;
        /* Columns in enum store_blob_kind order. */
        int64_t last[HP_ARRAY_SIZE(nb->blob)];
        for (size_t k = 0; k < HP_ARRAY_SIZE(last); k++)
            last[k] = r ? sqlite3_column_int64(st, (int)k) : 0;
        sqlite3_reset(st);
        for (size_t k = 0; k < HP_ARRAY_SIZE(last); k++)
            if ((r = base_load(s, (enum store_blob_kind)k, last[k], &nb->blob[k], err)) < 0)
                return r;
        nb->loaded = true;
    }
    *ret = nb;
    return 0;
}

/* Compress data against the node's previous row while its chain has room,
 * else against the chain's keyframe, when that pays (under half the
 * keyframe's own compressed size, 3/4 for packed function totals); else
 * store it standalone as a new keyframe. Insert it with `ins` (raw_dumps binds hash first,
 * function_totals_rest its key, the snapshot id); it becomes the base of
 * the node's next row. */
/* A blob compressed for its table: against the node's base (a delta) or
 * standalone (a new keyframe). */
struct blob_enc {
    void *z;
    size_t zlen;
    bool borrowed;   /* z is in a caller's reused buffer, not malloc'd */
    int64_t base_id; /* 0: a keyframe */
    int depth;
    struct store_lines lines; /* a raw dump's, when its encoding gave them */
};

static void blob_enc_free_z(struct blob_enc *e)
{
    if (!e->borrowed)
        free(e->z);
    e->z = NULL;
}

static void blob_enc_release(struct blob_enc *e)
{
    blob_enc_free_z(e);
    store_lines_release(&e->lines);
}

/* The compression half of blob_insert: reads `base`, writes nothing, so it
 * may run on another thread (with its own context) while the writer goes
 * on, as long as nothing changes `base` meanwhile. */
static int blob_encode(ZSTD_CCtx *c, const char *path, enum store_stmt_id ins, const void *data,
                       size_t len, const struct blob_base *base, struct store_zbuf *reuse,
                       struct blob_enc *e, struct hp_buf *err)
{
    *e = (struct blob_enc){ .borrowed = reuse != NULL };
    int r;
    bool chain = base->id && base->depth < STORE_CHAIN_MAX;
    const void *against = chain ? base->data : base->key_data;
    size_t against_len = chain ? base->len : base->key_len;
    int64_t against_id = chain ? base->id : base->key_id;
    if (against_id && against_len + len <= DELTA_MAX_BYTES) {
        if (ins == STMT_RAW_INSERT)
            r = store_text_compress_with(c, path, data, len, against, against_len,
                                         chain ? &base->lines : &base->key_lines, &e->lines,
                                         reuse, &e->z, &e->zlen, err);
        else
            r = store_zstd_compress_with(c, path, data, len, against, against_len, false,
                                         ins == STMT_FTR_INSERT ? FTR_DELTA_LEVEL : 0, reuse,
                                         &e->z, &e->zlen, err);
        if (r < 0)
            return r;
        /* Packed function totals change more from hour to hour than
         * dumps and sample sets (most cumulative values move a little): a
         * delta of them pays up to 3/4 of the keyframe (measured on a
         * 20k-stack profile: 25-28 KB against 57 KB standalone). */
        size_t pays = ins == STMT_FTR_INSERT ? base->csize * 3 / 4 : base->csize / 2;
        if (e->zlen <= pays || e->zlen < 256) {
            e->base_id = against_id;
            e->depth = chain ? base->depth + 1 : 1;
            return 0;
        }
        blob_enc_free_z(e); /* its lines stay: they are the dump's, however stored */
    }
    return store_zstd_compress_with(c, path, data, len, NULL, 0, ins == STMT_RAW_INSERT, 0, reuse,
                                    &e->z, &e->zlen, err);
}

/* The writing half: insert the encoded row (raw_dumps binds hash first,
 * function_totals_rest its key, the snapshot id); it becomes the base of
 * the node's next one. Frees e->z. */
static int blob_put(struct store *s, enum store_stmt_id ins, const unsigned char *hash,
                    int64_t key, const void *data, size_t len, struct blob_base *base,
                    struct blob_enc *e, int64_t *ret_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r;
    if ((r = store_stmt(s, ins, &st, err)) < 0)
        goto out;
    int col = 1;
    if (hash)
        sqlite3_bind_blob(st, col++, hash, 16, SQLITE_STATIC);
    if (key)
        sqlite3_bind_int64(st, col++, key);
    sqlite3_bind_int64(st, col++, (int64_t)len);
    if (e->base_id)
        sqlite3_bind_int64(st, col, e->base_id);
    col++;
    sqlite3_bind_blob(st, col, e->z, (int)e->zlen, SQLITE_STATIC);
    const char *what = hash  ? "storing a raw dump"
                       : key ? "storing function totals"
                             : "storing samples";
    if ((r = store_step_done(s, st, what, err)) < 0)
        goto out;
    int64_t id = key ? key : sqlite3_last_insert_rowid(s->db);
    struct blob_base next = { 0 };
    if (len <= DELTA_MAX_BYTES / 2) {
        next.id = id;
        /* Into the previous base's buffer (its compression is done): a
         * fresh one of a raw dump's megabytes took a page fault every
         * 4 KB of the copy, each snapshot. */
        next.data = hp_xrealloc(base->data, len ? len : 1);
        base->data = NULL;
        if (len)
            memcpy(next.data, data, len);
        next.len = len;
        next.depth = e->depth;
        if (e->lines.known) { /* data's: the encoding of these bytes gave them */
            assert(e->lines.len == len);
            next.lines = e->lines;
            e->lines = (struct store_lines){ 0 };
        }
        if (e->base_id) { /* same keyframe: take it over */
            next.key_id = base->key_id;
            next.key_len = base->key_len;
            next.key_data = base->key_data;
            base->key_data = NULL;
            next.key_lines = base->key_lines;
            base->key_lines = (struct store_lines){ 0 };
            next.csize = base->csize;
        } else {
            next.key_id = id;
            next.key_data = hp_xmalloc(len ? len : 1);
            if (len)
                memcpy(next.key_data, data, len);
            next.key_len = len;
            lines_copy(&next.key_lines, &next.lines);
            next.csize = e->zlen;
        }
    }
    blob_base_clear(base);
    *base = next;
    *ret_id = id;
out:
    blob_enc_release(e);
    return r;
}

static int blob_insert(struct store *s, enum store_stmt_id ins, const unsigned char *hash,
                       int64_t key, const void *data, size_t len, struct blob_base *base,
                       int64_t *ret_id, struct hp_buf *err)
{
    if (!s->cctx)
        s->cctx = ZSTD_createCCtx();
    if (!s->cctx)
        abort();
    struct blob_enc e;
    int r = blob_encode(s->cctx, s->path, ins, data, len, base, NULL, &e, err);
    if (r < 0)
        return r;
    return blob_put(s, ins, hash, key, data, len, base, &e, ret_id, err);
}

/* The row among those of content key `key` that holds exactly raw's
 * bytes: 1 (*ret_id), 0 none, <0 error. */
static int raw_match(struct store *s, const unsigned char key[16], const void *raw, size_t len,
                     int64_t *ret_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_RAW_FIND, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_blob(st, 1, key, 16, SQLITE_STATIC);
    int64_t cand[8];
    int ncand = 0;
    while ((r = store_step_row(s, st, "looking up a raw dump", err)) == 1)
        if (ncand < 8 && sqlite3_column_int64(st, 1) == (int64_t)len)
            cand[ncand++] = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (r < 0)
        return r;
    for (int i = 0; i < ncand; i++) {
        /* Same hash and size: confirm byte for byte. */
        void *old;
        size_t olen;
        if ((r = store_blob_load(s, STMT_RAW_GET, cand[i], &old, &olen, err)) < 0)
            return r;
        bool same = olen == len && memcmp(old, raw, len) == 0;
        free(old);
        if (same) {
            *ret_id = cand[i];
            return 1;
        }
    }
    return 0;
}

/* 1 when the store may still hold raw dumps keyed by version 1 of the
 * content key: its first row is one (store_content_hash). */
static int raw_v1_left(struct store *s, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_RAW_FIRST_HASH, &st, err);
    if (r < 0)
        return r;
    if ((r = store_step_row(s, st, "looking up the first raw dump", err)) == 1) {
        const unsigned char *k = sqlite3_column_blob(st, 0);
        r = sqlite3_column_bytes(st, 0) == 16 && k && !(k[15] & 0x80);
    }
    sqlite3_reset(st);
    return r;
}

int store_raw_find(struct store *s, const void *raw, size_t len, unsigned char ret_hash[16],
                   int64_t *ret_id, struct hp_buf *err)
{
    store_content_hash(raw, len, ret_hash);
    int r = raw_match(s, ret_hash, raw, len, ret_id, err);
    if (r != 0 || (r = raw_v1_left(s, err)) <= 0)
        return r;
    unsigned char v1[16];
    store_content_hash_v1(raw, len, v1);
    s->counts.raw_v1_lookups++;
    return raw_match(s, v1, raw, len, ret_id, err);
}

/* A raw dump this big is compressed on a thread of its own while the
 * writer derives and stores the profile (its stacks, samples and totals):
 * the two take about as long on a 1 MB dump, and on one thread they were
 * most of a round's serial time (issue 20). Smaller ones are not worth a
 * thread. */
#define RAW_THREAD_MIN_BYTES ((size_t)256 << 10)

/* The raw dump of the snapshot being stored, compressed meanwhile. */
struct raw_job {
    const char *path;
    ZSTD_CCtx *c;
    struct store_zbuf *zbuf;
    const void *raw;
    size_t len;
    const struct blob_base *base;
    unsigned char hash[16];
    bool todo;    /* new bytes: to encode and insert */
    bool started; /* on its thread */
    pthread_t thread;
    struct blob_enc enc;
    int r;
    struct hp_buf err;
};

static void *raw_job_main(void *arg)
{
    struct raw_job *j = arg;
    j->r = blob_encode(j->c, j->path, STMT_RAW_INSERT, j->raw, j->len, j->base, j->zbuf, &j->enc,
                       &j->err);
    return NULL;
}

/* Find the raw dump (identical bytes are stored once: *ret_id and nothing
 * to do), else start compressing it against the node's base, on a thread
 * when it is big. */
static int raw_begin(struct store *s, struct node_base *nb, const void *raw, size_t len,
                     struct raw_job *j, int64_t *ret_id, struct hp_buf *err)
{
    if (len > (size_t)INT32_MAX) {
        hp_err_printf(err, "%s: raw dump of %zu bytes is over SQLite's 2 GiB blob limit",
                      s->path, len);
        return HP_ETOOBIG;
    }
    int r = store_raw_find(s, raw, len, j->hash, ret_id, err);
    if (r != 0)
        return r < 0 ? r : 0;
    if (!s->cctx_raw)
        s->cctx_raw = ZSTD_createCCtx();
    if (!s->cctx_raw)
        abort();
    j->path = s->path;
    j->c = s->cctx_raw;
    j->zbuf = &s->raw_zbuf;
    j->raw = raw;
    j->len = len;
    j->base = &nb->blob[STORE_BLOB_RAW];
    struct hp_buf e0 = HP_BUF_INIT(0);
    j->err = e0;
    j->todo = true;
    if (len >= RAW_THREAD_MIN_BYTES && pthread_create(&j->thread, NULL, raw_job_main, j) == 0)
        j->started = true;
    else
        raw_job_main(j);
    return 0;
}

/* Wait for the compression; insert the row unless `abandon` (the snapshot
 * failed: only wait and free). */
static int raw_finish(struct store *s, struct node_base *nb, struct raw_job *j, bool abandon,
                      int64_t *ret_id, struct hp_buf *err)
{
    if (!j->todo)
        return 0;
    if (j->started)
        pthread_join(j->thread, NULL);
    j->todo = j->started = false;
    int r = j->r;
    if (r < 0 && !abandon)
        hp_err_printf(err, "%s", j->err.data ? j->err.data : hp_strerror(r));
    hp_buf_release(&j->err);
    if (r < 0 || abandon) {
        blob_enc_release(&j->enc);
        return r;
    }
    return blob_put(s, STMT_RAW_INSERT, j->hash, 0, j->raw, j->len, &nb->blob[STORE_BLOB_RAW],
                    &j->enc, ret_id, err);
}

/* Rounded and saturated: sums of hostile counts may exceed int64. */
static int64_t total_i64(double x)
{
    return hp_double_to_i64(round(x));
}

/* A function gets a function_totals row from this share of the snapshot's
 * in-use bytes or objects on (1/100); smaller ones go packed to
 * function_totals_rest (migrations/0002). */
#define FT_ROW_SHARE 100.0

/* The packed rest: varint count, the functions' id deltas (by id), then
 * each total for all of them in turn (flat_space, cum_space, flat_objects,
 * cum_objects; zigzag), zstd-compressed against the node's previous rest
 * (`base`), chained as sample sets are. */
static int ft_rest_insert(struct store *s, int64_t snap_id, const struct store_ft_entry *e,
                          size_t n, struct blob_base *base, struct hp_buf *err)
{
    /* In id order by a radix sort of the ids (function ids are > 0):
     * qsort's comparator calls were a twentieth of a steady snapshot's
     * function totals. */
    struct hp_sort_item *o = hp_xmalloc((n + 1) * sizeof(*o));
    for (size_t i = 0; i < n; i++)
        o[i] = (struct hp_sort_item){ (uint64_t)e[i].function_id, i };
    hp_radix_sort(o, n);
    struct store_pack b = { 0 };
    store_pack_u64(&b, n);
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        store_pack_u64(&b, (uint64_t)(e[o[i].i].function_id - prev));
        prev = e[o[i].i].function_id;
    }
    /* Column by column: most functions are not leaves (flat 0), and like
     * values next to each other compress better. */
    for (size_t i = 0; i < n; i++)
        store_pack_i64(&b, e[o[i].i].flat_space);
    for (size_t i = 0; i < n; i++)
        store_pack_i64(&b, e[o[i].i].cum_space);
    for (size_t i = 0; i < n; i++)
        store_pack_i64(&b, e[o[i].i].flat_objects);
    for (size_t i = 0; i < n; i++)
        store_pack_i64(&b, e[o[i].i].cum_objects);
    free(o);
    int64_t id;
    int r = blob_insert(s, STMT_FTR_INSERT, NULL, snap_id, b.data, b.len, base, &id, err);
    store_pack_release(&b);
    return r;
}

int store_function_totals_delete(struct store *s, int64_t snap_id, bool replace,
                                 struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_FT_DELETE, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, snap_id);
    if ((r = store_step_done(s, st, "deleting function totals", err)) < 0)
        return r;
    r = store_blob_release(s, STORE_BLOB_FTR, snap_id, replace, err);
    return r < 0 ? r : 0;
}

/* Where id is among prev[*j .. *j + LOC_RESYNC) (the next place of a list
 * walked beside the previous snapshot's, as stacks_prefetch walks its
 * locations; *j moves past it), or SIZE_MAX. */
static size_t at_place(const int64_t *prev, size_t n, size_t *j, int64_t id)
{
    size_t k = *j, end = HP_MIN(n, *j + LOC_RESYNC);
    while (k < end && prev[k] != id)
        k++;
    if (k == end)
        return SIZE_MAX;
    *j = k + 1;
    return k;
}

/* Accumulator of function id fid in m, a new one at the end. */
static uint32_t ft_slot(struct ft_memo *m, int64_t fid)
{
    uint32_t a;
    if (!hp_map64_put(&m->slot_of, (uint64_t)fid, (uint32_t)m->nslots, &a)) {
        m->slot_fid = hp_xgrow(m->slot_fid, &m->slots_cap, m->nslots + 1, sizeof(*m->slot_fid));
        m->slot_fid[m->nslots++] = fid;
    }
    return a;
}

/* Whether every location of p that the previous snapshot (prev) listed
 * has the function ids (and allocator flag) it had there, which its plans
 * were made with; lsig: each location's signature. */
static bool ft_locations_same(const struct ft_plans *prev, const struct profile *p,
                              const struct derived *d, uint64_t *lsig)
{
    bool same = true;
    bool *seen = prev->nstacks ? hp_xcalloc(prev->nlocs + 1, sizeof(*seen)) : NULL;
    uint32_t *other = prev->nstacks ? hp_xmalloc((p->nlocs + 1) * sizeof(*other)) : NULL;
    size_t nother = 0;
    for (size_t i = 0, j = 0; i < p->nlocs; i++) {
        const struct profile_location *l = &p->locs[i];
        uint64_t h = hp_hash_word(hp_hash_begin((l->flags & PROFILE_LOC_ALLOCATOR) != 0),
                                  l->nframes);
        for (uint32_t k = 0; k < l->nframes; k++)
            h = hp_hash_word(h, (uint64_t)d->fids[l->frame_off + k]);
        lsig[i] = hp_hash_end(h);
        if (!prev->nstacks)
            continue; /* no plans to keep */
        if (d->lid[i] <= 0) {
            same = false;
            continue;
        }
        /* At its place in the previous snapshot (most of a steady node's);
         * the others by id below. */
        size_t k = at_place(prev->lid, prev->nlocs, &j, d->lid[i]);
        if (k == SIZE_MAX) {
            other[nother++] = (uint32_t)i;
            continue;
        }
        seen[k] = true;
        same &= prev->lsig[k] == lsig[i];
    }
    if (same && nother) {
        struct hp_map64 at; /* location id -> place, of those not seen at theirs */
        hp_map64_init(&at);
        hp_map64_reserve(&at, nother);
        for (size_t k = 0; k < prev->nlocs; k++) {
            uint32_t old;
            if (!seen[k] && prev->lid[k] > 0)
                (void)hp_map64_put(&at, (uint64_t)prev->lid[k], (uint32_t)k, &old);
        }
        for (size_t q = 0; same && q < nother; q++) {
            uint32_t k;
            if (hp_map64_get(&at, (uint64_t)d->lid[other[q]], &k))
                same = prev->lsig[k] == lsig[other[q]];
        }
        hp_map64_release(&at);
    }
    free(seen);
    free(other);
    return same;
}

/* Making plans: per location, its frames' accumulators (looked up once a
 * location, when a stack being planned first lists it; the first one
 * UINT32_MAX when the innermost frame has no function); per accumulator,
 * 1 + the stack that listed it last. */
struct ft_build {
    struct ft_memo *m;
    struct ft_loc {
        uint32_t off, n; /* into la; n UINT32_MAX: not looked up yet */
    } *loc;
    uint32_t *la;
    size_t nla, la_cap;
    uint32_t *last;
    size_t nlast, last_cap;
    uint32_t *plan;
    size_t nplan, plan_cap;
};

static const struct ft_loc *ft_loc(struct ft_build *b, const struct profile *p,
                                   const struct derived *d, uint32_t li)
{
    struct ft_loc *fl = &b->loc[li];
    if (fl->n != UINT32_MAX)
        return fl;
    const struct profile_location *l = &p->locs[li];
    b->la = hp_xgrow(b->la, &b->la_cap, b->nla + l->nframes + 1, sizeof(*b->la));
    fl->off = (uint32_t)b->nla;
    for (uint32_t k = 0; k < l->nframes; k++) {
        int64_t fid = d->fids[l->frame_off + k];
        if (fid > 0)
            b->la[b->nla++] = ft_slot(b->m, fid);
        else if (k == 0)
            b->la[b->nla++] = UINT32_MAX;
    }
    fl->n = (uint32_t)(b->nla - fl->off);
    if (b->m->nslots > b->nlast) {
        b->last = hp_xgrow(b->last, &b->last_cap, b->m->nslots, sizeof(*b->last));
        memset(b->last + b->nlast, 0, (b->m->nslots - b->nlast) * sizeof(*b->last));
        b->nlast = b->m->nslots;
    }
    return fl;
}

/* Stack si's plan, appended to b->plan: its flat accumulator (the
 * innermost frame of its first location that is not the allocator's, when
 * that frame has a function), then each accumulator of its frames from
 * there on, once. */
static void ft_plan(struct ft_build *b, const struct profile *p, const struct derived *d,
                    uint32_t si)
{
    const uint32_t *locs = profile_stack_locs(p, si);
    uint32_t nl = p->stacks[si].n, j = 0;
    while (j < nl && (p->locs[locs[j]].flags & PROFILE_LOC_ALLOCATOR))
        j++;
    b->plan = hp_xgrow(b->plan, &b->plan_cap, b->nplan + 1, sizeof(*b->plan));
    size_t flat = b->nplan++;
    b->plan[flat] = UINT32_MAX;
    for (uint32_t first = j; j < nl; j++) {
        const struct ft_loc *fl = ft_loc(b, p, d, locs[j]);
        b->plan = hp_xgrow(b->plan, &b->plan_cap, b->nplan + fl->n, sizeof(*b->plan));
        for (uint32_t k = 0; k < fl->n; k++) {
            uint32_t a = b->la[fl->off + k];
            if (a == UINT32_MAX)
                continue;
            if (j == first && k == 0)
                b->plan[flat] = a;
            if (b->last[a] != si + 1) {
                b->last[a] = si + 1;
                b->plan[b->nplan++] = a;
            }
        }
    }
}

/* Per-function flat and cumulative totals of the all-threads samples.
 * Allocator frames (trimmed from leaves) and unsymbolized addresses do not
 * count; flat goes to the innermost frame of the first remaining location.
 * m: the node's plans (ft_memo), taken from the previous snapshot where
 * they hold and left for the next; NULL: none kept. */
static int function_totals_insert(struct store *s, int64_t snap_id, const struct profile *p,
                                  const struct derived *d, struct ft_memo *keep,
                                  struct blob_base *rest_base, struct hp_buf *err)
{
    struct ft_memo own = { 0 };
    struct ft_memo *m = keep ? keep : &own;
    int r = 0;
    /* A node upgraded again and again names new functions: the
     * accumulators of those it no longer names are let go when they are
     * more than those it does. */
    if (m->nslots > 2 * p->strings.len + 4096) {
        ft_memo_clear(m);
        s->counts.ft_memos_dropped++;
    }
    const struct ft_plans *prev = &m->prev;
    uint64_t *lsig = hp_xmalloc((p->nlocs + 1) * sizeof(*lsig));
    if (!ft_locations_same(prev, p, d, lsig))
        ft_plans_release(&m->prev);
    /* Each stack's plan: the previous snapshot's where the stack is at its
     * place there (as its locations, within LOC_RESYNC places), else made
     * from its locations. */
    struct ft_build b = { .m = m };
    /* Room for about as many plans as the previous snapshot's (growing
     * the array by copies cost a tenth of the plans' instructions). */
    size_t before = prev->nstacks ? prev->poff[prev->nstacks] : 0;
    b.plan_cap = before + before / 8 + 4 * (size_t)p->nstacks + 64;
    b.plan = hp_xmalloc(b.plan_cap * sizeof(*b.plan));
    b.loc = hp_xmalloc((p->nlocs + 1) * sizeof(*b.loc));
    for (size_t i = 0; i < p->nlocs; i++)
        b.loc[i].n = UINT32_MAX;
    size_t *poff = hp_xmalloc((p->nstacks + 1) * sizeof(*poff));
    for (size_t i = 0, j = 0; i < p->nstacks; i++) {
        poff[i] = b.nplan;
        size_t k = d->sid[i] > 0 ? at_place(prev->sid, prev->nstacks, &j, d->sid[i]) : SIZE_MAX;
        if (k != SIZE_MAX) {
            size_t n = prev->poff[k + 1] - prev->poff[k];
            b.plan = hp_xgrow(b.plan, &b.plan_cap, b.nplan + n, sizeof(*b.plan));
            memcpy(b.plan + b.nplan, prev->plan + prev->poff[k], n * sizeof(*b.plan));
            b.nplan += n;
            s->counts.ft_plans_kept++;
            continue;
        }
        ft_plan(&b, p, d, (uint32_t)i);
    }
    poff[p->nstacks] = b.nplan;
    /* The sums, in sample order as before plans (the same doubles): each
     * accumulator's flat values apart from the cumulative ones, which
     * every function of every sample adds to. */
    size_t n = m->nslots;
    struct acc {
        double flat_space, flat_objects;
    } *acc = hp_xcalloc(n + 1, sizeof(*acc));
    struct cum {
        double space, objects;
    } *cum = hp_xcalloc(n + 1, sizeof(*cum));
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *sm = &p->samples[i];
        const uint32_t *pl = b.plan + poff[sm->stack], *pe = b.plan + poff[sm->stack + 1];
        double vs = sm->value[PV_INUSE_SPACE], vo = sm->value[PV_INUSE_OBJECTS];
        if (pl[0] != UINT32_MAX) {
            acc[pl[0]].flat_space += vs;
            acc[pl[0]].flat_objects += vo;
        }
        for (pl++; pl < pe; pl++) {
            cum[*pl].space += vs;
            cum[*pl].objects += vo;
        }
    }
    /* Rows for the functions a top list or a trend reads (at least
     * 1/FT_ROW_SHARE of the in-use bytes or objects); the long tail packed
     * into one compressed blob (function_totals_rest, ordered by id). */
    double tot_s = fabs(d->totals[PV_INUSE_SPACE]), tot_o = fabs(d->totals[PV_INUSE_OBJECTS]);
    struct store_ft_entry *rest = NULL;
    size_t nrest = 0;
    if (n)
        rest = hp_xmalloc(n * sizeof(*rest));
    for (size_t i = 0; i < n; i++) {
        const struct acc *a = &acc[i];
        int64_t fid = m->slot_fid[i];
        int64_t cs = total_i64(cum[i].space), co = total_i64(cum[i].objects);
        if (cs == 0 && co == 0)
            continue;
        if (fabs(cum[i].space) * FT_ROW_SHARE < tot_s &&
            fabs(cum[i].objects) * FT_ROW_SHARE < tot_o) {
            rest[nrest++] = (struct store_ft_entry){ fid, total_i64(a->flat_space), cs,
                                                     total_i64(a->flat_objects), co };
            continue;
        }
        sqlite3_stmt *st;
        if ((r = store_stmt(s, STMT_FT_INSERT, &st, err)) < 0)
            goto out;
        sqlite3_bind_int64(st, 1, snap_id);
        sqlite3_bind_int64(st, 2, fid);
        sqlite3_bind_int64(st, 3, total_i64(a->flat_space));
        sqlite3_bind_int64(st, 4, cs);
        sqlite3_bind_int64(st, 5, total_i64(a->flat_objects));
        sqlite3_bind_int64(st, 6, co);
        if ((r = store_step_done(s, st, "storing function totals", err)) < 0)
            goto out;
    }
    if (nrest)
        r = ft_rest_insert(s, snap_id, rest, nrest, rest_base, err);
out:
    free(rest);
    free(cum);
    free(acc);
    free(b.loc);
    free(b.la);
    free(b.last);
    /* This snapshot's plans for the next one (a failed snapshot resets
     * the writer, and its memo with it). */
    struct ft_plans now = { .lsig = lsig, .nlocs = p->nlocs, .poff = poff, .plan = b.plan,
                            .nstacks = p->nstacks };
    if (keep) {
        now.lid = hp_xmalloc((p->nlocs + 1) * sizeof(*now.lid));
        memcpy(now.lid, d->lid, p->nlocs * sizeof(*now.lid));
        now.sid = hp_xmalloc((p->nstacks + 1) * sizeof(*now.sid));
        memcpy(now.sid, d->sid, p->nstacks * sizeof(*now.sid));
        ft_plans_release(&keep->prev);
        keep->prev = now;
    } else {
        ft_plans_release(&now);
        ft_memo_clear(&own);
    }
    return r;
}

/* After a commit: the snapshot's prefetch pf, with the ids d stored,
 * becomes node memo m (pf and d->lid are taken). A stack's id is kept
 * where its hash was known. No usable prefetch (the node's first snapshot
 * in this writer, or the caches were reset since): no memo. */
static void node_memo_take(struct node_memo *m, const struct profile *p, struct prefetch *pf,
                           struct derived *d)
{
    node_memo_clear(m);
    if (!pf || !pf->lobj)
        return;
    m->pf = *pf;
    *pf = (struct prefetch){ 0 };
    free(m->pf.lid);
    m->pf.lid = d->lid; /* every location's, the uncached ones' too */
    d->lid = NULL;
    m->nlocs = p->nlocs;
    m->nstacks = p->nstacks;
    for (size_t i = 0; i < p->nstacks; i++) {
        bool ok = m->pf.hash[i] != PF_NO_HASH && d->sid[i] > 0 && d->sid[i] <= UINT32_MAX;
        m->pf.hash[i] = ok ? m->pf.hash[i] : PF_NO_HASH;
        m->pf.sid[i] = ok ? (uint32_t)d->sid[i] : 0;
    }
}

/* Snapshot snap_id (profile p as stored: d) into its node's group builder,
 * as store_snapshots_samples would give it from its sample set. A builder
 * that outgrew a span (its groups were never taken) starts over. */
static void node_group_feed(struct node_group *g, int64_t snap_id, const struct profile *p,
                            const struct derived *d)
{
    if (g->n >= STORE_SPAN_SNAPSHOTS)
        node_group_drop(g);
    if (!g->b)
        g->b = store_ssb_new(&g->out);
    struct store_sample *sm = hp_xmalloc((p->nsamples + 1) * sizeof(*sm));
    for (size_t i = 0; i < p->nsamples; i++) {
        sm[i] = (struct store_sample){ .stack = d->sid[p->samples[i].stack] };
        memcpy(sm[i].raw, p->samples[i].raw, sizeof(sm[i].raw));
    }
    struct store_samples x = { .snapshot_id = snap_id, .profile = p, .samples = sm,
                               .n = p->nsamples, .layout = store_layout_hash(p, d->mobj) };
    store_ssb_add(g->b, &x);
    free(sm);
    g->ids = hp_xgrow(g->ids, &g->cap, g->n + 1, sizeof(*g->ids));
    g->ids[g->n++] = snap_id;
}

int store_writer_group_take(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                            struct store_sseries *out)
{
    struct node_base *nb = node_cached(s->w, node_id);
    struct node_group *g = nb ? &nb->group : NULL;
    if (!g || !g->b || g->n != n || memcmp(g->ids, ids, n * sizeof(*ids)) != 0)
        return 0;
    store_ssb_finish(g->b);
    *out = g->out;
    g->b = NULL;
    g->out = (struct store_sseries){ 0 };
    node_group_drop(g);
    return 1;
}

void store_writer_group_drop(struct store *s, int64_t node_id)
{
    for (int i = 0; s->w && i < NODE_SLOTS; i++)
        if (!node_id || s->w->bases[i].node_id == node_id)
            node_group_drop(&s->w->bases[i].group);
}

/* Locations, stacks and the sample set of a profile. */
static int derive(struct store *s, int64_t node_id, struct node_base *nb,
                  const struct profile *p, bool force_frames, const struct prefetch *pf,
                  struct derived *d, struct hp_buf *err)
{
    int r;
    pf = prefetch_valid(s, pf);
    if ((r = store_locations(s, node_id, p, force_frames, pf, nb ? &nb->memo.names : NULL, d,
                             err)) < 0 ||
        (r = store_stacks(s, nb, p, pf, d, err)) < 0)
        return r;
    struct store_pack b = { 0 };
    pack_sample_set(p, d, &b);
    r = blob_insert(s, STMT_SS_INSERT, NULL, 0, b.data, b.len, &nb->blob[STORE_BLOB_SS],
                    &d->ss_id, err);
    store_pack_release(&b);
    profile_totals(p, d->totals);
    return r;
}

static int stats_insert(struct store *s, int64_t snap_id, const struct store_stat *stats,
                        size_t nstats, struct hp_buf *err)
{
    for (size_t i = 0; i < nstats; i++) {
        int64_t sid;
        int r;
        if (!stats[i].name) {
            hp_err_printf(err, "%s: statistic %zu has no name", s->path, i);
            return HP_EUSAGE;
        }
        if ((r = stat_name_id(s, stats[i].name, stats[i].unit ? stats[i].unit : "", &sid,
                              err)) < 0)
            return r;
        sqlite3_stmt *st;
        if ((r = store_stmt(s, STMT_STAT_INSERT, &st, err)) < 0)
            return r;
        sqlite3_bind_int64(st, 1, snap_id);
        sqlite3_bind_int64(st, 2, (int64_t)i);
        sqlite3_bind_int64(st, 3, sid);
        if (isfinite(stats[i].value))
            sqlite3_bind_double(st, 4, stats[i].value);
        if ((r = store_step_done(s, st, "storing a statistic", err)) < 0)
            return r;
    }
    return 0;
}

/* Named parameters of SNAP_INSERT / SNAP_REDERIVE (unbound ones stay NULL). */
static int param(sqlite3_stmt *st, const char *name)
{
    int i = sqlite3_bind_parameter_index(st, name);
    assert(i > 0); /* a statement in store-internal.h lost the parameter */
    return i;
}

static void bind_i64(sqlite3_stmt *st, const char *name, int64_t v)
{
    sqlite3_bind_int64(st, param(st, name), v);
}

static void bind_text(sqlite3_stmt *st, const char *name, const char *v)
{
    if (v)
        sqlite3_bind_text(st, param(st, name), v, -1, SQLITE_STATIC);
}

static void bind_ms(sqlite3_stmt *st, const char *name, int64_t v)
{
    if (v >= 0)
        bind_i64(st, name, v);
}

/* The columns a profile decides (STORE_SNAP_PROFILE_VALUES), for a new
 * snapshot and for re-derivation alike. */
static void snapshot_bind_profile(sqlite3_stmt *st, const struct profile *p,
                                  const struct derived *d)
{
    static const char *const totals[PV_COUNT] = {
        [PV_INUSE_OBJECTS] = ":inuse_objects", [PV_INUSE_SPACE] = ":inuse_space",
        [PV_ALLOC_OBJECTS] = ":alloc_objects", [PV_ALLOC_SPACE] = ":alloc_space",
    };
    bind_text(st, ":format", profile_format_name(p->format));
    bind_i64(st, ":scaling", (int64_t)p->scaling);
    bind_i64(st, ":period", (int64_t)p->period);
    bind_i64(st, ":has_alloc", p->has_alloc);
    if (p->time_ns)
        bind_i64(st, ":time_hint_ns", p->time_ns);
    bind_text(st, ":hint", p->hint);
    for (int v = 0; v < PV_COUNT; v++)
        sqlite3_bind_double(st, param(st, totals[v]), d->totals[v]);
    bind_i64(st, ":nsamples", (int64_t)p->nsamples);
    bind_i64(st, ":samples_id", d->ss_id);
}

/* The snapshot row; p NULL for a failed attempt. */
static int snapshot_row(struct store *s, int64_t node_id, int64_t taken_at,
                        enum store_status status, const char *error, const struct profile *p,
                        const struct derived *d, int64_t raw_id, size_t raw_len,
                        const struct store_fetch_info *fi, int64_t store_ms, int64_t *ret_id,
                        struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SNAP_INSERT, &st, err);
    if (r < 0)
        return r;
    bind_i64(st, ":node_id", node_id);
    bind_i64(st, ":taken_at", taken_at);
    bind_text(st, ":status", store_status_name(status));
    bind_text(st, ":error", error);
    if (p)
        snapshot_bind_profile(st, p, d);
    if (raw_id) {
        bind_i64(st, ":raw_id", raw_id);
        bind_i64(st, ":raw_size", (int64_t)raw_len);
    }
    if (fi) {
        bind_text(st, ":source", fi->source);
        if (fi->prof_active >= 0)
            bind_i64(st, ":prof_active", fi->prof_active);
        bind_ms(st, ":fetch_ms", fi->fetch_ms);
        bind_ms(st, ":parse_ms", fi->parse_ms);
        bind_ms(st, ":symbolize_ms", fi->symbolize_ms);
    }
    bind_ms(st, ":store_ms", store_ms);
    if ((r = store_step_done(s, st, "storing a snapshot", err)) < 0)
        return r;
    *ret_id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

/* Start a write transaction. When another connection committed since this
 * one last wrote (query retain, reindex, import), rows the writer's caches
 * name may be gone (retention reclaims stacks, locations and names): the
 * caches start over. Checked under the write lock, so nothing can change
 * between the check and this transaction's writes. */
static int writer_begin(struct store *s, struct hp_buf *err)
{
    int r = store_tx_begin(s, err);
    if (r < 0)
        return r;
    sqlite3_stmt *st;
    if ((r = store_stmt(s, STMT_DATA_VERSION, &st, err)) < 0 ||
        (r = store_step_row(s, st, "reading the data version", err)) < 0) {
        store_tx_rollback(s);
        return r;
    }
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (v != s->data_version) {
        store_writer_reset(s);
        s->data_version = v;
    }
    return 0;
}

static int insert_common(struct store *s, int64_t node_id, int64_t taken_at,
                         enum store_status status, const char *error, const struct profile *p,
                         const void *raw, size_t raw_len, const struct store_fetch_info *fi,
                         const struct store_stat *stats, size_t nstats, int64_t *ret_id,
                         struct hp_buf *err)
{
    uint64_t t0 = hp_now_ns();
    struct derived d = { 0 };
    int64_t raw_id = 0, snap_id = 0;
    struct node_base *nb = NULL;
    struct raw_job rj = { 0 };
    struct prefetch pf = { 0 };
    int r;
    if ((r = store_require_writer(s, "storing a snapshot", err)) < 0)
        return r;
    if (p && (r = stacks_prefetch(s, node_id, p, &pf, err)) < 0)
        return r;
    if ((r = writer_begin(s, err)) < 0)
        goto out;
    if ((r = node_base(s, node_id, &nb, err)) < 0)
        goto fail;
    /* The raw dump is compressed while the profile is derived; its row
     * is in before the snapshot's, in the same transaction. */
    if (raw && raw_len && (r = raw_begin(s, nb, raw, raw_len, &rj, &raw_id, err)) < 0)
        goto fail;
    if (p && (r = derive(s, node_id, nb, p, false, &pf, &d, err)) < 0)
        goto fail;
    if ((r = raw_finish(s, nb, &rj, false, &raw_id, err)) < 0)
        goto fail;
    int64_t store_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
    if ((r = snapshot_row(s, node_id, taken_at, status, error, p, &d, raw_id, raw_len, fi,
                          store_ms, &snap_id, err)) < 0)
        goto fail;
    if (p)
        node_group_feed(&nb->group, snap_id, p, &d);
    if (p &&
        ((r = function_totals_insert(s, snap_id, p, &d, &nb->ft, &nb->blob[STORE_BLOB_FTR],
                                     err)) < 0 ||
         (r = store_fseries_add(s, node_id, snap_id, err)) < 0))
        goto fail;
    if ((r = stats_insert(s, snap_id, stats, nstats, err)) < 0)
        goto fail;
    if ((r = store_tx_commit(s, err)) < 0)
        goto out;
    *ret_id = snap_id;
    if (p) {
        node_memo_take(&nb->memo, p, prefetch_valid(s, &pf) ? &pf : NULL, &d);
        node_names_take(&nb->memo.names, p, &d);
    }
    goto out;
fail:
    (void)raw_finish(s, nb, &rj, true, &raw_id, err);
    store_tx_rollback(s);
out:
    derived_release(&d);
    prefetch_release(&pf);
    return r;
}

int store_snapshot_insert(struct store *s, int64_t node_id, int64_t taken_at_ms,
                          const struct profile *p, const void *raw, size_t raw_len,
                          const struct store_fetch_info *fi, const struct store_stat *stats,
                          size_t nstats, int64_t *ret_id, struct hp_buf *err)
{
    if (!p) {
        hp_err_printf(err, "%s: store_snapshot_insert needs a profile", s->path);
        return HP_EUSAGE;
    }
    return insert_common(s, node_id, taken_at_ms, STORE_STATUS_OK, NULL, p, raw, raw_len, fi,
                         stats, nstats, ret_id, err);
}

int store_snapshot_attempt_record(struct store *s, int64_t node_id, int64_t taken_at_ms,
                                  enum store_status status, const char *error,
                                  const void *raw, size_t raw_len,
                                  const struct store_fetch_info *fi,
                                  const struct store_stat *stats, size_t nstats,
                                  int64_t *ret_id, struct hp_buf *err)
{
    if (status == STORE_STATUS_OK || (unsigned)status >= STORE_STATUS_COUNT) {
        hp_err_printf(err, "%s: a failed attempt needs a failure status", s->path);
        return HP_EUSAGE;
    }
    return insert_common(s, node_id, taken_at_ms, status, error ? error : "", NULL, raw,
                         raw_len, fi, stats, nstats, ret_id, err);
}

int store_node_upsert(struct store *s, const struct store_node_info *n, int64_t *ret_id,
                      struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "adding a node", err)) < 0)
        return r;
    if (!n->name || !*n->name) {
        hp_err_printf(err, "%s: a node needs a name", s->path);
        return HP_EUSAGE;
    }
    sqlite3_stmt *st;
    if ((r = store_stmt(s, STMT_NODE_UPSERT, &st, err)) < 0)
        return r;
    sqlite3_bind_text(st, 1, n->name, -1, SQLITE_STATIC);
    if (n->kind)
        sqlite3_bind_text(st, 2, n->kind, -1, SQLITE_STATIC);
    if (n->address)
        sqlite3_bind_text(st, 3, n->address, -1, SQLITE_STATIC);
    if (n->labels)
        sqlite3_bind_text(st, 4, n->labels, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, hp_wall_ms());
    if ((r = store_step_row(s, st, "storing a node", err)) < 0)
        return r;
    int64_t id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    *ret_id = id;
    return 0;
}

int store_snapshot_stat_set(struct store *s, int64_t id, const struct store_stat *stat,
                            struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "setting a statistic", err)) < 0)
        return r;
    if ((r = writer_begin(s, err)) < 0)
        return r;
    int64_t sid;
    sqlite3_stmt *st;
    if ((r = stat_name_id(s, stat->name, stat->unit ? stat->unit : "", &sid, err)) < 0 ||
        (r = store_stmt(s, STMT_STAT_UPDATE, &st, err)) < 0)
        goto fail;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, sid);
    if (isfinite(stat->value))
        sqlite3_bind_double(st, 3, stat->value);
    if ((r = store_step_row(s, st, "updating a statistic", err)) < 0)
        goto fail;
    sqlite3_reset(st);
    if (r == 0) {
        if ((r = store_stmt(s, STMT_STAT_APPEND, &st, err)) < 0)
            goto fail;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, sid);
        if (isfinite(stat->value))
            sqlite3_bind_double(st, 3, stat->value);
        if ((r = store_step_done(s, st, "storing a statistic", err)) < 0)
            goto fail;
    }
    return store_tx_commit(s, err);
fail:
    store_tx_rollback(s);
    return r;
}

int store_snapshot_reindex(struct store *s, int64_t id, const struct profile *p,
                           struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "reindexing", err)) < 0)
        return r;
    struct derived d = { 0 };
    struct node_base *nb;
    if ((r = writer_begin(s, err)) < 0)
        return r;
    sqlite3_stmt *st;
    if ((r = store_stmt(s, STMT_SNAP_GET_RAW, &st, err)) < 0)
        goto fail;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "finding the snapshot", err)) < 0)
        goto fail;
    if (r == 0) {
        hp_err_printf(err, "%s: no snapshot #%lld", s->path, (long long)id);
        r = HP_ENOTFOUND;
        goto fail;
    }
    int64_t old_ss = sqlite3_column_int64(st, 1);
    int64_t node_id = sqlite3_column_int64(st, 2);
    sqlite3_reset(st);
    /* The old totals go before the node's bases are checked: its packed
     * rest may be one of them (rows chained on it are re-encoded). */
    if ((r = store_fseries_dissolve(s, id, false, err)) < 0 ||
        (r = store_function_totals_delete(s, id, true, err)) < 0 ||
        (r = node_base(s, node_id, &nb, err)) < 0 ||
        (r = derive(s, node_id, nb, p, true, NULL, &d, err)) < 0)
        goto fail;
    if ((r = store_stmt(s, STMT_SNAP_REDERIVE, &st, err)) < 0)
        goto fail;
    bind_i64(st, ":id", id);
    snapshot_bind_profile(st, p, &d);
    if ((r = store_step_done(s, st, "updating the snapshot", err)) < 0)
        goto fail;
    if ((r = function_totals_insert(s, id, p, &d, NULL, &nb->blob[STORE_BLOB_FTR], err)) < 0 ||
        (r = store_fseries_reindexed(s, id, err)) < 0)
        goto fail;
    if (old_ss && (r = store_blob_release(s, STORE_BLOB_SS, old_ss, false, err)) < 0)
        goto fail;
    if ((r = store_tx_commit(s, err)) < 0)
        goto out;
    /* The released sample set may have been the node's keyframe. */
    store_writer_reset(s);
    goto out;
fail:
    store_tx_rollback(s);
out:
    derived_release(&d);
    return r;
}
