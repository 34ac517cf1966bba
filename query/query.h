/* query: the analysis library and its renderers.
 *
 * Everything here works on the profile model (store/profile.h), whatever
 * produced it: a parsed file, a stored snapshot or a merge of several. It never
 * fetches, parses raw bytes or symbolizes; the `query` executable wires those.
 *
 * The central derived form is the *folded* profile: every sample's stack
 * turned into frame names, root first, with allocator frames trimmed from the
 * leaf end and inlined frames expanded (unless no_inline), identical name
 * sequences merged. Top tables, collapsed output, flame graphs, trees and dot
 * graphs are all views of it.
 *
 * Thread context: any thread; objects are used by one thread at a time. */
#ifndef HP_QUERY_H
#define HP_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

enum query_format {
    QUERY_FORMAT_TEXT = 0,
    QUERY_FORMAT_COLLAPSED,
    QUERY_FORMAT_JSON,
    QUERY_FORMAT_DOT,
    QUERY_FORMAT_SVG,
    QUERY_FORMAT_PPROF,
    QUERY_FORMAT_CSV,
};

int query_format_parse(const char *s, enum query_format *ret);
const char *query_format_name(enum query_format f);

struct query_opts {
    enum profile_value sample; /* default PV_INUSE_SPACE */
    bool no_inline;            /* one frame per location (the outermost function) */
    bool keep_allocator;       /* keep frames flagged PROFILE_LOC_ALLOCATOR */
    bool with_lines;           /* frame names carry " file:line" (granularity lines) */
    const char *focus;         /* POSIX ERE: keep stacks with a matching frame */
    const char *ignore;        /* POSIX ERE: drop stacks with a matching frame */
    size_t top;                /* rows in tables (0 = all) */
    double nodefraction;       /* dot/svg: hide nodes under this share (default 0.005) */
    double edgefraction;       /* dot: hide edges under this share (default 0.001) */
    const char *title;         /* shown in text/svg/dot headers; NULL for none */
};

void query_opts_init(struct query_opts *o);

/* ---- folded profile ---- */

struct query_fold_entry {
    uint32_t off;              /* first name index in folded.names */
    uint32_t n;                /* number of frames, root first */
    double value[PV_COUNT];    /* un-sampled sums */
    int64_t count;             /* raw records merged into this entry */
};

struct query_folded {
    struct hp_arena arena;
    struct hp_strtab strings;  /* frame names */
    const char **names;        /* frames of all entries, root first per entry */
    size_t nnames, names_cap;
    struct query_fold_entry *entries;
    size_t nentries, entries_cap;
    double total[PV_COUNT];    /* over kept entries */
    struct hp_map64 index;     /* hash of name sequence -> entry (chained by probe) */
    /* Frame details for JSON/pprof: name -> first file:line seen. */
    const struct profile *source; /* borrowed; may be NULL after merges */
};

/* Fold a profile. HP_EPARSE (bad regex, message in err) or 0. */
int query_fold(const struct profile *p, const struct query_opts *o, struct query_folded **ret,
               struct hp_buf *err) HP_MUST_CHECK;
void query_folded_free(struct query_folded *f);
static inline const char *const *query_fold_frames(const struct query_folded *f,
                                                   const struct query_fold_entry *e)
{
    return f->names + e->off;
}

/* ---- function table (top) ---- */

struct query_func {
    const char *name;
    double flat[PV_COUNT]; /* in frames at the leaf end */
    double cum[PV_COUNT];  /* in stacks through the function (counted once per stack) */
};

struct query_top {
    struct query_func *funcs; /* sorted by flat of the chosen sample, then cum, then name */
    size_t n;
    double total[PV_COUNT];
    enum profile_value sample;
};

int query_top_build(const struct query_folded *f, enum profile_value sort_by,
                    struct query_top **ret) HP_MUST_CHECK;
void query_top_free(struct query_top *t);
/* Look a function up by exact name; NULL if absent. */
const struct query_func *query_top_find(const struct query_top *t, const char *name);

/* ---- renderers (append to out) ---- */

/* "a;b;c 123" lines, values rounded so they sum to the total truncated to an
 * integer, the figure jeprof prints as "Total: N B". */
int query_render_collapsed(const struct query_folded *f, const struct query_opts *o,
                           struct hp_buf *out);
/* jeprof-like table with a header describing the profile. */
int query_render_top_text(const struct profile *p, const struct query_folded *f,
                          const struct query_top *t, const struct query_opts *o,
                          struct hp_buf *out);
/* JSON document: profile meta, totals, functions, stacks with frames. */
int query_render_json(const struct profile *p, const struct query_folded *f,
                      const struct query_top *t, const struct query_opts *o,
                      struct hp_buf *out);

/* Round values so they sum exactly to their sum truncated toward zero
 * (largest remainder first), writing integers into ret. */
void query_round_preserving_sum(const double *vals, size_t n, int64_t *ret);

/* Copy s replacing invalid UTF-8 bytes with U+FFFD, so that names from
 * binaries or files with broken encodings still make valid JSON/SVG/XML.
 * Returns s itself when it is valid; else a string in `arena`. */
const char *query_utf8_clean(struct hp_arena *arena, const char *s);

#endif
