/* Internal to query/: the union of stacks across several folded profiles,
 * shared by diff, leaks, fleet, trend and discrepancy.
 *
 * Folded profiles intern their frame names in their own tables, so the same
 * name has a different pointer in each. A qa_stacks re-interns names once per
 * distinct (profile, name) pair and gives every distinct name sequence a
 * small id, so that analyses index dense arrays by stack id and function id
 * instead of hashing strings in their inner loops.
 *
 * Every folded profile added must stay alive until qa_stacks_release: name
 * pointers are cached, and a freed profile's addresses could be reused. */
#ifndef HP_QUERY_ANALYSIS_INTERNAL_H
#define HP_QUERY_ANALYSIS_INTERNAL_H

#include "query/query.h"

struct qa_stack {
    uint32_t off; /* first name in qa_stacks.names */
    uint32_t n;   /* frames, root first */
};

struct qa_stacks {
    struct hp_arena arena;
    struct hp_strtab strings;
    const char **names;
    size_t nnames, names_cap;
    struct qa_stack *v;
    size_t n, cap;
    struct hp_map64 index; /* sequence hash (probed) -> stack id */
    /* Name translation: source name pointer -> shared name. */
    struct hp_map64 xlat; /* source name pointer -> index into xlat_names */
    const char **xlat_names;
    size_t nxlat, xlat_cap;
    const char **scratch;
    size_t scratch_cap;
};

void qa_stacks_init(struct qa_stacks *s);
void qa_stacks_release(struct qa_stacks *s);
/* The shared pointer for a name of folded profile f. */
const char *qa_stacks_name(struct qa_stacks *s, const struct query_folded *f, const char *name);
/* Id of entry e of f (added on first sight). */
uint32_t qa_stacks_add_entry(struct qa_stacks *s, const struct query_folded *f,
                             const struct query_fold_entry *e);
/* Id of a sequence of already shared names (root first). */
uint32_t qa_stacks_add(struct qa_stacks *s, const char *const *names, uint32_t n);
static inline const char *const *qa_stack_frames(const struct qa_stacks *s, uint32_t id)
{
    return s->names + s->v[id].off;
}

/* Functions of a stack union: every distinct name gets an id; each stack
 * lists its distinct functions once (so recursion counts cum once) and its
 * leaf. */
struct qa_funcs {
    const char **name; /* by function id */
    size_t n, cap;
    struct hp_map64 index;  /* name pointer -> id */
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
