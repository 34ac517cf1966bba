/* Internal to query/: the union of stacks across several folded profiles,
 * shared by diff, leaks, fleet, trend and discrepancy.
 *
 * Folded profiles intern their frame names in their own tables, so the same
 * name has a different pointer in each. A qa_stacks re-interns names once per
 * distinct (profile, name) pair and gives every distinct name sequence a
 * small id, so that analyses index dense arrays by stack id and function id
 * instead of hashing strings in their inner loops.
 *
 * Every folded profile added must stay alive until qa_stacks_release or
 * qa_stacks_forget_source: name pointers are cached, and a freed profile's
 * addresses could be reused. */
#ifndef HP_QUERY_ANALYSIS_INTERNAL_H
#define HP_QUERY_ANALYSIS_INTERNAL_H

#include "query/query.h"

struct json_t;

/* Write a JSON document (pretty, keys in insertion order, doubles round-trip
 * exactly) and a newline to out; takes the reference to root. HP_EPARSE if
 * jansson could not serialize it. */
int qa_json_emit(struct json_t *root, struct hp_buf *out);

/* {"id":…,"node":…,"time":…[,"path":…]} naming a snapshot (render.c). */
struct json_t *query_snapref_json(const struct query_snapref *r);

/* Fixed-point formatting for the text renderers' hot rows (numfmt.c): the
 * same bytes as snprintf "%.*f" with prec 0-2, hp_fmt_bytes and
 * hp_fmt_count, without printf's multi-precision path. Buffers of at least
 * QUERY_FMT_MIN bytes take the fast path (whose output is at most 24 bytes);
 * smaller ones and values printf writes longer get snprintf, cut short alike.
 * query_fmt_fixed returns the length written. */
#define QUERY_FMT_MIN 40
size_t query_fmt_fixed(double x, int prec, char *out, size_t outsz);
const char *query_fmt_bytes(double bytes, char *out, size_t outsz);
const char *query_fmt_count(double n, char *out, size_t outsz);

struct qa_stack {
    uint32_t off; /* first name in qa_stacks.names */
    uint32_t n;   /* frames, root first */
};

struct qa_stacks {
    struct hp_arena arena;
    struct hp_strtab strings; /* shared names: a name's id is its number here */
    const char **names;     /* frames of all stacks, root first per stack */
    uint32_t *name_ids;     /* parallel to names: the name's id */
    size_t nnames, names_cap, name_ids_cap;
    struct qa_stack *v;
    size_t n, cap;
    struct hp_map64 index; /* sequence hash (probed) -> stack id */
    size_t nindexed;       /* stacks v[0 .. nindexed) are in index */
    size_t index_hint;     /* stacks to size it for (qa_stacks_reserve) */
    /* Name translation of the folded profile added last (query_folded
     * serial xsrc): its name number (hp_strtab_id) -> shared id + 1, 0
     * not seen yet. A union of a node's stacks translates hundreds of
     * thousands of frames of a few thousand names: an array read each. */
    uint32_t *xmap;
    size_t xmap_n, xmap_cap;
    uint64_t xsrc;
    uint32_t *scratch_ids;
    size_t scratch_ids_cap;
    const char *const *prev_src; /* frames of the entry last added, and */
    uint32_t prev_n;             /* their count: scratch_ids holds their translation */
};

void qa_stacks_init(struct qa_stacks *s);
/* Forget the folded profiles added so far (the name-pointer cache and the
 * previous entry's frames), so they may be freed; later adds re-intern. */
void qa_stacks_forget_source(struct qa_stacks *s);
/* Room for `stacks` stacks of `names` frames in all (upper bounds), so a
 * union of known size is built without growing its arrays and maps. */
void qa_stacks_reserve(struct qa_stacks *s, size_t stacks, size_t names);
void qa_stacks_release(struct qa_stacks *s);
/* Every entry of folded profile f added to an empty union, in entry
 * order (stack id = entry index): a folded profile's entries are distinct
 * sequences already, so none is looked up; the index is built only if
 * another profile is added later. */
void qa_stacks_adopt(struct qa_stacks *s, const struct query_folded *f);
/* The shared id of a name of folded profile f (strings.by_id[id] is the
 * name). */
uint32_t qa_stacks_name(struct qa_stacks *s, const struct query_folded *f, const char *name);
/* Id of entry e of f (added on first sight). */
uint32_t qa_stacks_add_entry(struct qa_stacks *s, const struct query_folded *f,
                             const struct query_fold_entry *e);
static inline const char *const *qa_stack_frames(const struct qa_stacks *s, uint32_t id)
{
    return s->names + s->v[id].off;
}
static inline const uint32_t *qa_stack_name_ids(const struct qa_stacks *s, uint32_t id)
{
    return s->name_ids + s->v[id].off;
}

/* Functions of a stack union: a function's id is its name's id in the
 * qa_stacks; each stack lists its distinct functions once (so recursion
 * counts cum once) and its leaf. */
struct qa_funcs {
    const char *const *name; /* by function id (the stacks' strings.by_id) */
    size_t n;
    uint32_t *stack_off;    /* per stack: first id in ids; stack_off[nstacks] = end */
    uint32_t *ids;
    size_t nids, ids_cap;
    uint32_t *leaf;         /* per stack: function id of its leaf */
    size_t nstacks;
};

/* Build for stacks [0, s->n). Can be called again after more stacks were
 * added; it rebuilds. */
void qa_funcs_build(struct qa_funcs *fn, const struct qa_stacks *s);
void qa_funcs_release(struct qa_funcs *fn);

/* Median of v[0..n) (reorders v). 0 for n == 0. */
double qa_median(double *v, size_t n);

/* "leaf <- caller <- caller ..." with at most max frames, into out. */
void qa_stack_label(struct hp_buf *out, const char *const *frames, uint32_t n, uint32_t max);

static inline bool qa_is_bytes(enum profile_value v)
{
    return v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE;
}

static inline const char *qa_fmt(enum profile_value v, double x, char *buf, size_t n)
{
    return qa_is_bytes(v) ? hp_fmt_bytes(x, buf, n) : hp_fmt_count(x, buf, n);
}

/* Signed human value: "+1.5 MiB", "-312 B". */
const char *qa_fmt_signed(enum profile_value v, double x, char *buf, size_t n);

#endif
