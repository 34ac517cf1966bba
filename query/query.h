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

/* Which snapshot an output was made from, so that every output can name it:
 * a stored one (id > 0, node, time taken) or a file (path; time from the
 * dump or its mtime). */
struct query_snapref {
    int64_t id;        /* stored snapshot id; 0 for a file */
    char node[128];    /* "" for a file */
    int64_t time_ms;   /* when taken (stored) or the file's time; 0 unknown */
    const char *path;  /* the file, or NULL */
};

/* "#32 be-1 at 2026-11-23T19:00:00Z" or "a.heap (2026-11-23T19:00:00Z)" into
 * out; returns out. */
const char *query_snapref_label(const struct query_snapref *r, char *out, size_t outsz);

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
    const struct query_snapref *snap;   /* JSON "snapshot" (diff: side A); may be NULL */
    const struct query_snapref *snap_b; /* diff: side B */
};

void query_opts_init(struct query_opts *o);

/* ---- folded profile ---- */

struct query_fold_entry {
    uint32_t off;              /* first name index in folded.names */
    uint32_t n;                /* number of frames, root first */
    double value[PV_COUNT];    /* un-sampled sums */
    int64_t count;             /* raw records merged into this entry */
    double var[PV_COUNT];      /* sampling variance of value (query_sample_variance) */
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
    enum profile_scaling scaling; /* of the source, for noise floors (INTERNALS.md) */
    uint64_t period;
    uint64_t serial; /* this process's folds numbered from 1: a fold's identity,
                      * which its address is not once freed */
};

/* Fold a profile. HP_EPARSE (bad regex, message in err) or 0. */
int query_fold(const struct profile *p, const struct query_opts *o, struct query_folded **ret,
               struct hp_buf *err) HP_MUST_CHECK;
/* query_fold, and for each all-threads sample of p the index of the entry it
 * went to, or -1 where the options dropped it (*ret_entry_of: p->nsamples
 * entries, free()). What turns stored stacks into a dictionary for the
 * store's path of leaks (query_snapshot.dict). */
int query_fold_map(const struct profile *p, const struct query_opts *o,
                   struct query_folded **ret, int32_t **ret_entry_of,
                   struct hp_buf *err) HP_MUST_CHECK;
/* query_fold_map of stacks resolved by the store (store_stacks_resolve, profile.h):
 * the same dictionary and entry_of as query_fold_map gives for
 * store_stacks_load's profile of them, without building the profile. Only
 * for folding by function: no focus, ignore, no_inline or with_lines
 * (query_fold_resolved_ok). */
bool query_fold_resolved_ok(const struct query_opts *o);
int query_fold_map_resolved(const struct profile_resolved *r, const struct query_opts *o,
                            struct query_folded **ret, int32_t **ret_entry_of,
                            struct hp_buf *err) HP_MUST_CHECK;
/* Where stack i of r starts being folded: its first location (leaf first)
 * past the allocator's own frames, unless keep_allocator; the last one if
 * all are the allocator's. */
uint32_t query_resolved_first_kept(const struct profile_resolved *r, size_t i,
                                   bool keep_allocator);
/* Stacks given as their names by function, outermost first, allocator
 * frames trimmed, each name by its number in `names` (hp_strtab_id): stack
 * i is seq[i][0 .. len[i]), one of length 0 dropped (entry_of -1). The
 * dictionary and entry_of query_fold_map_resolved gives for stacks resolved
 * to the same names, which it interns in the same order: the stack
 * cache's way (query/stored.c), over stacks resolved for other nodes. */
int query_fold_map_ids(const struct hp_strtab *names, const uint32_t *const *seq,
                       const uint32_t *len, size_t n, enum profile_scaling scaling,
                       uint64_t period, struct query_folded **ret, int32_t **ret_entry_of);
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

/* ---- graph and binary renderers (render-pprof.c, render-dot.c, render-svg.c) ---- */

/* Gzipped pprof profile.proto of p (not of a folded profile: pprof keeps
 * addresses, mappings and line tables). Four sample types, the default being
 * o->sample; samples selected as query_fold selects them (allocator frames,
 * focus/ignore); values rounded so each column sums to its total truncated.
 * 0, HP_EUSAGE (bad regex; message in err) or another HP_E* code. */
int query_render_pprof(const struct profile *p, const struct query_opts *o, struct hp_buf *out,
                       struct hp_buf *err);

/* Graphviz call graph (jeprof --dot style): functions with flat and cum
 * values and shares, caller -> callee edges weighted by value, pruned by
 * o->nodefraction (cum share), o->top (node count, default 80) and
 * o->edgefraction; calls through hidden functions become dotted edges. */
int query_render_dot(const struct query_folded *f, const struct query_top *t,
                     const struct query_opts *o, struct hp_buf *out);

/* Self-contained interactive SVG flame graph (inline CSS and script: click to
 * zoom, regex search with matched share, hover details) of o->sample. Frames
 * narrower than 0.1 px are merged, so output size stays bounded on any
 * profile. Names are escaped (invalid UTF-8 becomes U+FFFD). */
int query_render_svg(const struct query_folded *f, const struct query_opts *o,
                     struct hp_buf *out);
/* Differential flame graph: widths from b (after), colour by b - a per frame
 * (red growth, blue shrinkage, shade by size of the change). Paths only in a
 * have no width and are not drawn; the header gives both totals. */
int query_render_svg_diff(const struct query_folded *a, const struct query_folded *b,
                          const struct query_opts *o, struct hp_buf *out);

/* Round values so they sum exactly to their sum truncated toward zero
 * (largest remainder first), writing integers into ret. */
void query_round_preserving_sum(const double *vals, size_t n, int64_t *ret);

/* hp_utf8_clean() under query's name (the renderers' callers use both). */
const char *query_utf8_clean(struct hp_arena *arena, const char *s);

/* JSON strings, written one way (jansson) everywhere: s (NULL: "") with
 * invalid UTF-8 replaced, as a jansson string (never NULL) or appended to
 * out quoted and escaped. */
struct json_t;
struct json_t *query_json_string(const char *s);
void query_json_str(struct hp_buf *out, const char *s);

/* ==== analysis: diff, leaks, fleet, trend, discrepancy ====================
 * The cores below work on in-memory inputs (folded profiles, arrays of
 * snapshots with named figures) so that files, the store and the web front
 * end feed them alike. The sampling math is in query/INTERNALS.md. */

/* Sampling variance of one sample's un-sampled values: for each (count,
 * bytes) pair, v^2 (1 - p) / c with c the recorded count and p = 1/scale the
 * probability that one allocation of the stack's average size was recorded.
 * 0 when every allocation was recorded (period 1) or nothing is sampled. */
void query_sample_variance(const struct profile *p, const struct profile_sample *s,
                           double ret[PV_COUNT]);
/* One value of a sample from its raw values: value v un-sampled as
 * profile_sample_unsample computes it, and its variance as
 * query_sample_variance gives it, to the bit, without the other values'
 * work (leaks over the store asks this of every changed sample). */
void query_sample_one(const struct profile *p, const int64_t raw[PV_COUNT], enum profile_value v,
                      double *ret_value, double *ret_var);

/* Variance of a value v whose only evidence is that it was *not* seen, in a
 * profile sampled with (scaling, period): one allocation of avg_size bytes,
 * un-sampled (INTERNALS.md, "absent stacks"). 0 when unsampled. */
double query_absent_variance(enum profile_scaling scaling, uint64_t period, double avg_size,
                             bool bytes);

/* A figure the node reports about itself next to a heap dump: a tracker
 * total, RSS, a jemalloc statistic. Names are those the node publishes
 * (Prometheus names such as doris_be_memory_jemalloc_allocated_bytes, bvar
 * names, memory-tracker rows as the collector stores them:
 * mem_tracker_current_bytes{type="overview",label="query"}). */
struct query_figure {
    const char *name;
    double value;
};

/* Parse figures from text: Prometheus exposition lines (`name{labels}
 * value`, labels dropped, '#' lines skipped), brpc bvar lines (`name : value`)
 * or `name value`. Names and the array live in `arena`. Later duplicates
 * win. HP_EPARSE with "origin:line: what" in err; at most 100,000 figures. */
int query_figures_parse(const char *text, size_t len, const char *origin, struct hp_arena *arena,
                        struct query_figure **ret, size_t *ret_n, struct hp_buf *err) HP_MUST_CHECK;

/* Figure by exact name; 1 found (*ret set), 0 not. */
int query_figure_find(const struct query_figure *figs, size_t n, const char *name,
                      double *ret);

/* ---- diff: B minus A ---- */

struct query_diff_opts {
    enum profile_value sample; /* default PV_INUSE_SPACE */
    bool normalize;            /* compare shares of each side's total */
    double noise_sigmas;       /* |delta| < k * sigma is "within noise"; default 2 */
};

void query_diff_opts_init(struct query_diff_opts *o);

/* One function or one stack of the union of both sides. Values are of the
 * chosen sample, un-sampled. `delta`/`sigma` are in bytes (or objects), or
 * in shares of each side's total when normalizing. */
struct query_diff_row {
    const char *name;            /* function rows: the function */
    const char *const *frames;   /* stack rows: frames, root first */
    uint32_t nframes;
    double a, b;                 /* flat (functions) or value (stacks) */
    double a_cum, b_cum;         /* functions; equal to a, b for stacks */
    double var_a, var_b;         /* sampling variance of a, b */
    double var_a_cum, var_b_cum;
    double delta, delta_cum;     /* b - a (or share difference) */
    double sigma, sigma_cum;     /* standard error of delta, delta_cum */
    bool noise, noise_cum;       /* within noise_sigmas standard errors */
};

struct query_diff {
    struct query_diff_opts opts;
    struct query_diff_row *funcs; /* by |delta| then |delta_cum|, then name */
    size_t nfuncs;
    struct query_diff_row *stacks; /* by |delta| */
    size_t nstacks;
    double a_total, b_total;       /* bytes (objects) of each side */
    double var_a_total, var_b_total;
    double delta, sigma;           /* b_total - a_total and its standard error */
    bool noise;
    void *priv;                    /* names and frames */
};

/* Diff two folded profiles (same sample options). Never fails on valid
 * input; HP_EUSAGE if o is inconsistent. */
int query_diff_build(const struct query_folded *a, const struct query_folded *b,
                     const struct query_diff_opts *o, struct query_diff **ret) HP_MUST_CHECK;
void query_diff_free(struct query_diff *d);
const struct query_diff_row *query_diff_find_func(const struct query_diff *d, const char *name);

/* Text: header, function table, stack table (o->top rows each). Labels name
 * the two sides ("be1@-24h", a file name). */
int query_render_diff_text(const struct query_diff *d, const char *a_label, const char *b_label,
                           const struct query_opts *o, struct hp_buf *out);
/* "frame;frame a_value b_value" lines (difffolded.pl / flamegraph.pl input),
 * each side rounded so its column sums to its truncated total. */
int query_render_diff_collapsed(const struct query_diff *d, struct hp_buf *out);
int query_render_diff_json(const struct query_diff *d, const char *a_label, const char *b_label,
                           const struct query_opts *o, struct hp_buf *out);

/* ---- series: snapshots of nodes over time ---- */

/* One snapshot as the series analyses see it. All pointers are borrowed. */
struct query_snapshot {
    const char *node;
    int64_t time_s;                    /* unix seconds */
    int64_t id;                        /* stored snapshot id; 0 for files */
    const char *path;                  /* the profile file, or NULL when stored */
    int64_t pid;                       /* process id when known (a jemalloc dump's
                                          name), else 0 */
    int64_t process_start_s;           /* process start (unix s) when known, else 0;
                                          a figure process_start_time_seconds serves too */
    const struct query_folded *folded; /* may be NULL: figures only */
    const struct query_figure *figures;
    size_t nfigures;
    /* The store's path (leaks): instead of a folded profile, values of the
     * chosen sample for entries of a shared dictionary `dict` (the distinct
     * stacks of the node, values ignored), as stored stacks are
     * deduplicated. Used when folded is NULL and dict is set. */
    const struct query_folded *dict;
    const uint32_t *ids;
    const double *id_values;
    size_t nids;
    /* Optional, with ids: each value's sampling variance (query_sample_variance
     * of the sample it came from; NULL: bounded by value x period) and the
     * snapshot's own sampling period (0: none known). With both, and ids in
     * the snapshot's sample order (one per sample, as query_fold_map maps
     * them), leaks answers exactly as from the folded profile. */
    const double *id_vars;
    uint64_t id_period;
    /* A stored snapshot's un-sampled totals per value (PV_COUNT), as the
     * store keeps them; NULL for files. trend's heap total without a
     * folded profile. */
    const double *totals;
    /* The store's path (leaks, query/stored.c): the node's whole history
     * as runs of equal values, shared by all its snapshots; this one is
     * snapshot series_t of it (leaks' order: time, then position). Used
     * when folded and dict are NULL; id_period gives the period. */
    const struct query_leak_series *series;
    uint32_t series_t;
};

/* One stack's value over snapshots t .. t + n - 1 (leaks' order) of a
 * node: the chosen value of entry `entry` of dicts[dict], summed over the
 * samples folded into it in each snapshot's sample order as query_fold
 * sums them, and its sampling variance. */
struct query_leak_run {
    uint32_t dict, entry, t, n;
    double value, var;
};
/* A node's history as runs: dicts in time order (one per stretch of
 * snapshots with one layout); runs in any order in which each entry's
 * runs come ascending and disjoint in t. A stack absent from a snapshot,
 * or 0 there, has no run covering it. */
struct query_leak_series {
    const struct query_folded *const *dicts;
    size_t ndicts;
    const struct query_leak_run *runs;
    size_t nruns;
    size_t nsnapshots;
};

/* ---- leaks ---- */

struct query_leak_opts {
    enum profile_value sample;  /* default PV_INUSE_SPACE */
    double min_rate;            /* bytes/hour below which nothing is reported (default 0) */
    double min_monotonic;       /* least share of rising steps among changing ones (0.5) */
    double min_spearman;        /* least rank correlation with time (0.8) */
    double max_step_share;      /* most of the rise one step may carry (0.5): a
                                   single jump is a step, not a steady leak */
    double min_share;           /* functions: least share of the rising stacks'
                                   growth worth a row (0.005) */
    double idle_bytes;          /* busy trackers above this are never idle (64 MiB) */
    double idle_share;          /* idle: busy trackers under this share of the process
                                   (RSS when known, else the heap) (0.05) */
    const char *const *busy_figures; /* figure names that are query/load trackers;
                                        NULL for the built-in Doris/StarRocks list */
    size_t top;                 /* rows per list (0 = all) */
};

void query_leak_opts_init(struct query_leak_opts *o);
/* Whether leaks with options o reads a node figure of this name: the busy
 * ones, the process's resident size, id, start time and uptime. A store's
 * node reports dozens of figures a snapshot; leaks needs these. */
bool query_leak_figure_wanted(const struct query_leak_opts *o, const char *name);

struct query_leak_row {
    const char *name;          /* function rows */
    const char *const *frames; /* stack rows: root first */
    uint32_t nframes;
    double first, last;        /* values at the first and last snapshot */
    double rate;               /* least-squares slope, bytes (objects) per hour */
    double r2;                 /* of the linear fit */
    double monotonic;          /* rising steps / changing steps */
    double spearman;           /* rank correlation of value with time */
    double step_share;         /* largest single rise / (last - first) */
    double share;              /* rate / the node's total rate (growth explained) */
    double idle_growth;        /* growth over steps where the node was idle */
    bool idle_flag;            /* grew while query/load trackers sat near zero */
    double cum_rate;           /* functions: slope of every stack through it (rate is
                                  its flat growth: what it allocates itself) */
};

/* One process lifetime of a node: a restart (a new pid, a new process start
 * time, or a heap that fell far beyond sampling noise) begins the next. */
struct query_lifetime {
    int64_t start_s;           /* time of its first snapshot */
    size_t first, npoints;     /* its snapshots, in time order */
    const char *reason;        /* why a restart was seen here; NULL for the first */
};

struct query_leaks {
    const char *node;
    size_t npoints;
    int64_t t0, t1;
    int64_t first_id, last_id; /* stored snapshot ids of the first and last; 0 for files */
    double total_first, total_last, total_rate, total_r2;
    size_t idle_steps, steps; /* steps within a lifetime, and those with both ends
                                 idle; idle unknown unless has_busy */
    bool has_busy;
    double idle_share, idle_bytes;    /* the idle rule applied (opts) */
    struct query_lifetime *lifetimes; /* fits are made within each, evidence pooled */
    size_t nlifetimes;
    struct query_leak_row *funcs; /* suspects by flat rate (what they allocate) */
    size_t nfuncs;
    struct query_leak_row *stacks;
    size_t nstacks;
    void *priv;
};

/* Leak suspects of one node from its snapshots (any order; sorted by time
 * inside), fitted within process lifetimes. HP_EUSAGE with fewer than 3
 * snapshots with profiles, or when they all carry one time. */
int query_leaks_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_leak_opts *o, struct query_leaks **ret,
                      struct hp_buf *err) HP_MUST_CHECK;
void query_leaks_free(struct query_leaks *l);
int query_render_leaks_text(const struct query_leaks *const *l, size_t n,
                            const struct query_leak_opts *o, struct hp_buf *out);
int query_render_leaks_json(const struct query_leaks *const *l, size_t n,
                            const struct query_leak_opts *o, struct hp_buf *out);

/* Least-squares slope (per unit of x), intercept-free R^2, share of rising
 * steps and Spearman's rank correlation of y with x. Exposed for tests. */
void query_trend_fit(const double *x, const double *y, size_t n, double *ret_slope,
                     double *ret_r2);
double query_spearman(const double *x, const double *y, size_t n);

/* ---- fleet: every node's latest snapshot against the others ---- */

struct query_fleet_opts {
    enum profile_value sample;
    double min_ratio;   /* outlier: value >= ratio x median (default 2) */
    double min_bytes;   /* and value - median >= this (default 64 MiB) */
    double mad_k;       /* and value - median >= k x 1.4826 MAD (default 3) */
    bool stacks;        /* also rank stacks, not only functions */
    size_t top;         /* outlier rows (0 = all) */
};

void query_fleet_opts_init(struct query_fleet_opts *o);

struct query_fleet_row {
    const char *name;          /* function, or leaf frame for stacks */
    const char *const *frames; /* stacks: root first */
    uint32_t nframes;
    const char *node;          /* the outlier node */
    double value, median, mad;
    size_t nodes_with;         /* nodes where the function/stack is present */
};

struct query_fleet {
    size_t nnodes;
    double total_median;
    struct query_fleet_row *totals; /* nodes far above the median heap total */
    size_t ntotals;
    struct query_fleet_row *funcs;  /* by value - median */
    size_t nfuncs;
    struct query_fleet_row *stacks;
    size_t nstacks;
    void *priv;
};

/* snaps: one (latest) snapshot per node, each with a folded profile. */
int query_fleet_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_fleet_opts *o, struct query_fleet **ret,
                      struct hp_buf *err) HP_MUST_CHECK;
void query_fleet_free(struct query_fleet *f);
/* The same in steps, for callers that cannot hold every folded profile at
 * once (the API over 1,000 nodes): begin for at most n nodes; add node i's
 * folded profile (kept by nothing afterwards: free it at once); finish with
 * the first n' <= n snapshots, each of 0..n'-1 added (their node names;
 * folded unused), which frees acc whatever it returns. query_fleet_acc_free
 * drops an unfinished one. */
struct query_fleet_acc;
struct query_fleet_acc *query_fleet_begin(size_t n, const struct query_fleet_opts *o);
void query_fleet_add(struct query_fleet_acc *acc, size_t i, const struct query_folded *f);
int query_fleet_finish(struct query_fleet_acc *acc, const struct query_snapshot *snaps, size_t n,
                       const struct query_fleet_opts *o, struct query_fleet **ret,
                       struct hp_buf *err) HP_MUST_CHECK;
void query_fleet_acc_free(struct query_fleet_acc *acc);
int query_render_fleet_text(const struct query_fleet *f, const struct query_fleet_opts *o,
                            struct hp_buf *out);
int query_render_fleet_json(const struct query_fleet *f, const struct query_fleet_opts *o,
                            struct hp_buf *out);

/* ---- trend: series of totals, figures and chosen functions ---- */

struct query_trend_opts {
    enum profile_value sample;
    const char *function;      /* POSIX ERE: functions to chart (cum); NULL = top 5 */
    size_t max_functions;      /* default 5 when function is NULL, 50 otherwise */
    /* Function columns chosen and filled by the caller (the store's
     * per-snapshot function totals: query_stored_trend_functions) instead
     * of computed from folded profiles: names[0..nfunctions) and values,
     * nfunctions per snapshot in the order of the snaps given to
     * query_trend_build (NAN where unknown). */
    bool functions_given;
    const char *const *names;
    const double *values;
    size_t nfunctions;
};

void query_trend_opts_init(struct query_trend_opts *o);

/* A table: one row per snapshot, columns heap total, figures, functions. */
struct query_trend {
    size_t nrows, ncols;
    const char **cols;         /* column names ("heap_total", figure names, "fn:<name>") */
    const char **row_node;     /* per row */
    int64_t *row_time;         /* per row */
    double *cells;             /* nrows x ncols, NAN when unknown */
    void *priv;
};

int query_trend_build(const struct query_snapshot *snaps, size_t n,
                      const struct query_trend_opts *o, struct query_trend **ret,
                      struct hp_buf *err) HP_MUST_CHECK;
void query_trend_free(struct query_trend *t);
/* format: text, csv or json. */
int query_render_trend(const struct query_trend *t, enum query_format format,
                       struct hp_buf *out, struct hp_buf *err);
/* The text table with the columns `series` picks: NULL for the main series
 * (heap total, RSS, jemalloc allocated, tracked total: what is present; fits
 * 100 columns), "all" for every column, else a comma-separated list of column
 * names or 1-based numbers. HP_EUSAGE (err names it) for an unknown one. */
int query_render_trend_text(const struct query_trend *t, const char *series,
                            struct hp_buf *out, struct hp_buf *err);

/* ---- discrepancy: the node's accounting against the heap profile ---- */

struct query_rules; /* categories (frame patterns -> tracker figures) and the ladder */

/* Built-in rules for Doris and StarRocks (both name sets; the first figure
 * alternative present wins). */
int query_rules_builtin(struct query_rules **ret, struct hp_buf *err) HP_MUST_CHECK;
/* Parse a rules file (format in query/INTERNALS.md) on top of `base` (may be
 * NULL): sections with a built-in name replace it, others are added.
 * HP_EPARSE with "file:line: what" in err. */
int query_rules_parse(struct query_rules *base, const char *text, size_t len,
                      const char *origin, struct hp_buf *err) HP_MUST_CHECK;
void query_rules_free(struct query_rules *r);
/* Built-in rules for one database kind (doris, starrocks, databend,
 * risingwave: each from its own trackers, query/README.md lists them). A
 * kind that says nothing (agent, url, NULL) is told from the figures
 * (doris_be_*, starrocks_be_*, databend_*, stream_memory_usage); failing
 * that, the Doris+StarRocks set of query_rules_builtin. */
int query_rules_for_kind(const char *kind, const struct query_figure *figs, size_t nfigs,
                         struct query_rules **ret, struct hp_buf *err) HP_MUST_CHECK;
/* The kind query_rules_for_kind would use (a static string), or NULL. */
const char *query_rules_kind_detect(const char *kind, const struct query_figure *figs,
                                    size_t nfigs);

enum query_verdict {
    QUERY_VERDICT_CONSISTENT = 0,
    QUERY_VERDICT_UNDER,       /* heap holds more than the tracker says */
    QUERY_VERDICT_OVER,        /* tracker says more than the heap holds */
    QUERY_VERDICT_IDLE_LEAK,   /* tracker near zero, heap holds a lot: possible leak */
    QUERY_VERDICT_NO_TRACKER,  /* no figure for this category */
};

const char *query_verdict_name(enum query_verdict v);

struct query_discrepancy_row {
    const char *category, *description;
    const char *tracker_name;  /* figure expression used, NULL if none */
    double tracker;            /* bytes, NAN when absent */
    double heap, heap_sigma;   /* heap-profile bytes of matching stacks */
    double tracker_share, heap_share; /* of tracked total, of heap total */
    double gap;                /* heap - tracker */
    enum query_verdict verdict;
    const char *top_frames[3]; /* matching frames holding the most bytes */
    double top_bytes[3];
    double allowance;          /* a gap up to this is "consistent" (noise, share, floor) */
    const char *why;           /* the verdict in one sentence, with its figures */
};

struct query_ladder_step {
    const char *name;   /* "rss", "jemalloc_resident", ... */
    const char *figure; /* figure used, or NULL */
    double value;       /* NAN when unknown */
    const char *gap_name; /* what the gap from the previous step is */
    double gap;         /* previous - this, NAN when either is unknown */
    bool inconsistent;  /* this step exceeds the one above beyond noise: the two
                           figures cannot both be right (gap is not a quantity) */
};

struct query_discrepancy {
    double heap_total, heap_sigma, tracked_total;
    const char *tracked_name;
    struct query_discrepancy_row *rows; /* categories, then "uncategorized" */
    size_t nrows;
    struct query_ladder_step ladder[8];
    size_t nladder;
    /* The Doris guide's own test, as a named finding: the query tracker
     * accounts for less than the stacks with query-operator frames hold
     * (beyond noise and the floor): the query tracker is inaccurate. The
     * "query" row, or NULL when the test passes or cannot be made. */
    const struct query_discrepancy_row *query_tracker_inaccurate;
    const char *finding_why; /* that finding in one sentence, or NULL */
    const char *rules_kind;  /* whose built-in rules were used ("doris"), or NULL */
    /* The snapshot the report is about (the caller sets it; id 0 and no
     * path: unnamed). Text names it on its first line, JSON as "snapshot". */
    struct query_snapref snap;
    void *priv;
};

int query_discrepancy_build(const struct query_folded *f, const struct query_figure *figs,
                            size_t nfigs, const struct query_rules *rules,
                            struct query_discrepancy **ret, struct hp_buf *err) HP_MUST_CHECK;
void query_discrepancy_free(struct query_discrepancy *d);
const struct query_discrepancy_row *query_discrepancy_find(const struct query_discrepancy *d,
                                                          const char *category);
int query_render_discrepancy_text(const struct query_discrepancy *d, const char *node,
                                  struct hp_buf *out);
int query_render_discrepancy_json(const struct query_discrepancy *d, const char *node,
                                  struct hp_buf *out);

/* ==== symbol coverage (coverage.c) ==========================================
 * How much of a profile is named, and why the rest is not. The collector
 * writes one line per object it could not name into the snapshot's note
 * (profile.hint, stored with the snapshot), in this grammar:
 *
 *   unnamed OBJECT (build-id ID): MESSAGE {tried: SOURCE: SAID | SOURCE: SAID}
 *
 * "(build-id ID)" is left out when no build-id is known and "{tried: ...}"
 * when no source was asked; SOURCE never holds ": ", neither part holds '|'
 * or a newline (sym.h's sym_object_status.tried). A re-derivation adds
 *
 *   re-symbolized TIME: now N% named (was M%)
 *
 * Lines are separated by '\n'; the first line may be the producer's own
 * hint. The web API parses the note into JSON with query_coverage_json. */

/* Share of in-use bytes whose every frame outside the allocator is named
 * (anonymous addresses and JIT code count as unnamed); NaN for a profile
 * with no in-use bytes. */
double query_named_ratio(const struct profile *p);

/* Append an "unnamed" line (tried may be NULL or ""). */
void query_note_unnamed_add(struct hp_buf *note, const char *object, const char *build_id,
                            const char *message, const char *tried);

struct query_source_answer {
    const char *source, *said;
};
struct query_unnamed {
    const char *object;
    const char *build_id; /* NULL when unknown */
    const char *message;
    struct query_source_answer *tried;
    size_t ntried;
};
/* The "unnamed" lines of a note, in order, allocated in `a`; *ret_n may be
 * 0. Lines that do not follow the grammar are skipped. */
void query_note_unnamed_parse(const char *note, struct hp_arena *a, struct query_unnamed **ret,
                              size_t *ret_n);

/* {"named_bytes_ratio": R|null, "unnamed": [{"object", "build_id"|null,
 * "message", "tried": [{"source", "said"}]}], "resymbolized": TEXT|null}
 * for profile p (its note parsed as above). New reference. */
struct json_t *query_coverage_json(const struct profile *p);

#endif
