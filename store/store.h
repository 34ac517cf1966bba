/* store: heapfleet's database. One SQLite file (the embedded default) keeps
 * every raw dump exactly as fetched, the deduplicated symbolized call trees
 * derived from it, per-snapshot totals, node statistics and a symbol cache,
 * and answers the reads the query engine and the web front end need.
 *
 * This is the only public header of the module. No SQLite type or SQL text
 * crosses it: a PostgreSQL backend can be added behind the same functions.
 *
 * Model. A node is a process we profile (name unique). A snapshot is one
 * attempt to take a profile of a node at a time: either a stored profile
 * (status "ok") or a failed attempt with its error text. Every snapshot that
 * has raw bytes keeps them (zstd-compressed, content-addressed), committed in
 * the same transaction as anything derived from them, so a parser or
 * symbolizer fix can re-derive it later (store_snapshot_reindex).
 *
 * Times are Unix milliseconds (int64) unless a name says otherwise.
 *
 * Threads. A struct store is one connection and is used by one thread at a
 * time. A process has one writer (opened with STORE_OPEN_WRITE, typically on a
 * dedicated store thread); readers open their own handles (any number, any
 * thread) and see committed data while the writer works (WAL mode).
 *
 * Errors. Functions return 0 or a negative HP_E* code; `err` (may be NULL)
 * receives a sentence naming the database and what went wrong. Lookups return
 * HP_ENOTFOUND when the thing asked for does not exist. */
#ifndef HP_STORE_H
#define HP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

struct store;

/* ---- opening ------------------------------------------------------------- */

enum store_open_flags {
    STORE_OPEN_READ = 0,       /* read-only; the file must exist */
    STORE_OPEN_WRITE = 1 << 0, /* create if missing, migrate, allow writes */
    /* A reader that pages through its own cache instead of mapping the file
     * (SQLite): mapped pages count in the process's RSS, so a long-lived
     * process's RSS grew with what its reads had touched (a collector's). */
    STORE_OPEN_NO_MMAP = 1 << 1,
    /* A short reader that reads most pages once (query's analyses over a
     * fleet): a 4 MiB page cache instead of 32 MiB (SQLite). Filled with
     * pages it never reads again, the larger cache was half of the heap
     * of `query leaks --db`, and touching fresh memory is not free. */
    STORE_OPEN_ONE_PASS = 1 << 2,
};

/* The database path the CLI uses: `flag` (--db) if given, else
 * $HEAPFLEET_DB if set and non-empty, else "heapfleet.db". */
const char *store_path_default(const char *flag);

/* Open (and with STORE_OPEN_WRITE create and migrate) the database at path.
 * Refused with a clear message: a file that is not SQLite or is corrupted
 * (HP_ECORRUPT), an SQLite file that is not a heapfleet database
 * (HP_EMISMATCH), a database written by a newer heapfleet (HP_EVERSION), a
 * missing file for STORE_OPEN_READ (HP_ENOTFOUND). */
int store_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err)
    HP_MUST_CHECK;
/* True when path is a libpq URI (postgresql://… or postgres://…): the
 * PostgreSQL backend; anything else is an SQLite file. */
bool store_is_postgres(const char *path);
/* "sqlite" or "postgresql". */
const char *store_backend_name(const struct store *s);
/* Close; NULL is fine. */
void store_close(struct store *s);
const char *store_path(const struct store *s);
/* Schema version of the open database and the newest this build knows. */
int store_schema_version(const struct store *s);
int store_schema_version_latest(void);
/* PRAGMA integrity_check: 0 when "ok", HP_ECORRUPT with the first problems
 * in err otherwise. */
int store_check(struct store *s, struct hp_buf *err) HP_MUST_CHECK;
/* Does the database answer? 0, or <0 with err (PostgreSQL: a connection the
 * server closed is made again first, so 0 means writes can go on). */
int store_ping(struct store *s, struct hp_buf *err) HP_MUST_CHECK;

/* ---- nodes --------------------------------------------------------------- */

struct store_node_info {
    const char *name;    /* unique; required */
    const char *kind;    /* doris, starrocks, databend, agent, url; may be NULL */
    const char *address; /* host:port or URL; may be NULL */
    const char *labels;  /* "key=value key=value" as in be.list; may be NULL */
};

/* Insert the node or update its kind/address/labels (NULL fields are left as
 * they are). *ret_id is the node id. Writer only. */
int store_node_upsert(struct store *s, const struct store_node_info *n, int64_t *ret_id,
                      struct hp_buf *err) HP_MUST_CHECK;
/* Node id by name: 0 or HP_ENOTFOUND. */
int store_node_find(struct store *s, const char *name, int64_t *ret_id, struct hp_buf *err)
    HP_MUST_CHECK;

/* ---- snapshots: writing ---------------------------------------------------- */

/* What happened to one attempt. Stored as text (the names below) so plain SQL
 * reads well. */
enum store_status {
    STORE_STATUS_OK = 0,       /* profile stored */
    STORE_STATUS_FETCH_FAILED, /* connection, timeout or HTTP error */
    STORE_STATUS_PARSE_FAILED, /* bytes arrived but were not a profile */
    STORE_STATUS_TOO_BIG,      /* over the configured size limit */
    STORE_STATUS_INACTIVE,     /* profiling is not enabled on the node */
    STORE_STATUS_COUNT,
};
const char *store_status_name(enum store_status st);
int store_status_parse(const char *name, enum store_status *ret);

struct store_fetch_info {
    const char *source;  /* URL or file path the bytes came from; may be NULL */
    int prof_active;     /* 1 active, 0 inactive, -1 unknown */
    int64_t fetch_ms;    /* -1 when not measured */
    int64_t parse_ms;
    int64_t symbolize_ms;
};
#define STORE_FETCH_INFO_INIT                                                             \
    ((struct store_fetch_info){ .prof_active = -1, .fetch_ms = -1, .parse_ms = -1,        \
                                .symbolize_ms = -1 })

/* One figure the node reported besides the profile: memory tracker values,
 * RSS, jemalloc stats.*; name and unit exactly as the node reported them. */
struct store_stat {
    const char *name;
    const char *unit; /* "bytes", "count", ... or NULL */
    double value;
};

/* Write batching: between store_batch_begin and store_batch_commit every
 * store_snapshot_insert / store_snapshot_attempt_record (and symbol-cache
 * write) is a savepoint inside one transaction: an item that fails rolls
 * back alone, and the items become durable and visible to readers together
 * at store_batch_commit (one WAL commit for many snapshots: fewer page
 * writes per snapshot). Until then "returns 0" means "in the batch". Retention,
 * reindex and import must not run inside a batch. store_close commits an
 * open batch. Writer only. */
int store_batch_begin(struct store *s, struct hp_buf *err) HP_MUST_CHECK;
/* Commit the open batch (0 when none is open). An error means none of the
 * batch's items were stored. */
int store_batch_commit(struct store *s, struct hp_buf *err) HP_MUST_CHECK;
bool store_batch_open(const struct store *s);

/* Store one profile of node `node_id` taken at `taken_at_ms`: the raw bytes
 * (may be NULL/0 when the profile did not come from bytes), the profile
 * (finished and, if available, symbolized), the fetch info (may be NULL) and
 * `nstats` statistics. Everything goes in one transaction; when it returns 0
 * the snapshot is durable (WAL commit). On error nothing of it is stored.
 * Writer only. */
int store_snapshot_insert(struct store *s, int64_t node_id, int64_t taken_at_ms,
                          const struct profile *p, const void *raw, size_t raw_len,
                          const struct store_fetch_info *fi, const struct store_stat *stats,
                          size_t nstats, int64_t *ret_id, struct hp_buf *err) HP_MUST_CHECK;

/* A stored snapshot of node_id whose raw dump is byte for byte raw (found
 * by content hash, confirmed by comparing the bytes): 1 found (*ret_id and
 * *ret_taken_at_ms set), 0 none, <0 error. For import's duplicate check. */
int store_snapshot_find_dump(struct store *s, int64_t node_id, const void *raw, size_t len,
                             int64_t *ret_id, int64_t *ret_taken_at_ms,
                             struct hp_buf *err) HP_MUST_CHECK;

/* Record an attempt that produced no profile: status (not OK) and the error
 * text; raw bytes if some arrived (a parse failure keeps them so a parser fix
 * can re-derive the snapshot), statistics if any were fetched. Writer only. */
int store_snapshot_attempt_record(struct store *s, int64_t node_id, int64_t taken_at_ms,
                                  enum store_status status, const char *error,
                                  const void *raw, size_t raw_len,
                                  const struct store_fetch_info *fi,
                                  const struct store_stat *stats, size_t nstats,
                                  int64_t *ret_id, struct hp_buf *err) HP_MUST_CHECK;

/* Replace everything derived for snapshot `id` with profile p (re-parsed and
 * re-symbolized from its raw bytes); the raw bytes, time, node and statistics
 * stay. A failed attempt whose raw bytes now parse becomes "ok". Frames of
 * the profile's locations replace the stored ones. Writer only. */
int store_snapshot_reindex(struct store *s, int64_t id, const struct profile *p,
                           struct hp_buf *err) HP_MUST_CHECK;

/* Re-derive snapshot `id` from its raw bytes: reads them, asks cb for the
 * profile they give now (parsed and symbolized as the caller sees fit; cb
 * owns nothing after returning, *ret_profile is the caller's until
 * store_snapshot_rederive frees it), then store_snapshot_reindex. The one
 * loop `query reindex` and the collector's background re-symbolization
 * share. cb returns 0 with a profile, 1 to leave the snapshot as it is
 * (then this returns 1 too), or <0 with err. HP_ENOTFOUND when the snapshot
 * kept no raw bytes. Writer only, outside a batch. */
typedef int (*store_rederive_cb)(void *ctx, int64_t id, const void *raw, size_t len,
                                 struct profile **ret_profile, struct hp_buf *err);
int store_snapshot_rederive(struct store *s, int64_t id, store_rederive_cb cb, void *ctx,
                            struct hp_buf *err) HP_MUST_CHECK;

/* Set one statistic of snapshot `id` (its value replaced when the snapshot
 * has it, else appended after the others): figures derived by heapfleet
 * itself, such as heapfleet_symbolized_ratio after a re-symbolization.
 * Writer only, outside a batch. */
int store_snapshot_stat_set(struct store *s, int64_t id, const struct store_stat *stat,
                            struct hp_buf *err) HP_MUST_CHECK;

/* ---- snapshots: reading ----------------------------------------------------- */

struct store_snapshot_info {
    int64_t id;
    int64_t node_id;
    char node[128];
    int64_t taken_at; /* ms */
    enum store_status status;
    char error[256];            /* "" when none */
    enum profile_format format; /* UNKNOWN for failed attempts */
    uint64_t period;
    double totals[PV_COUNT];    /* un-sampled, all threads */
    int64_t nsamples;
    int64_t raw_size;           /* bytes as fetched; 0 if none kept */
    int prof_active;            /* 1, 0, -1 unknown */
    int64_t fetch_ms, parse_ms, symbolize_ms, store_ms; /* -1 unknown */
};

/* Rebuild the stored profile of snapshot `id`: samples, stacks, mappings,
 * threads and symbolized frames, finished and un-sampled exactly as when it
 * was inserted. HP_ENOTFOUND for a missing snapshot or one without profile
 * (failed attempt). *ret is owned by the caller (profile_free). */
int store_snapshot_load(struct store *s, int64_t id, struct profile **ret, struct hp_buf *err)
    HP_MUST_CHECK;
/* What store_snapshot_load_top left out. */
struct store_pruned {
    int64_t stacks_total;   /* the snapshot's all-threads samples (one per stack) */
    int64_t stacks_dropped; /* 0: nothing was left out */
    double dropped[PV_COUNT]; /* their un-sampled values */
};
/* store_snapshot_load for views with a budget: at most `max_stacks` stacks
 * (0: all), the heaviest by `rank` (un-sampled; ties: stored order), in
 * stored order, with their per-thread samples; *ret_pruned says what the
 * rest held. Memory and time go with max_stacks plus one small record per
 * stored sample (no stack, location or name of a dropped stack is read). */
int store_snapshot_load_top(struct store *s, int64_t id, size_t max_stacks,
                            enum profile_value rank, struct profile **ret,
                            struct store_pruned *ret_pruned, struct hp_buf *err) HP_MUST_CHECK;
/* The series analyses' path (query leaks): a snapshot's samples by stored
 * stack id, without rebuilding its stacks, and the stacks separately, once
 * for every snapshot that shares them.
 *
 * For each snapshot: `profile` holds its header (scaling, period, ...) and
 * mappings only, no samples, stacks or locations; `samples` its n
 * all-threads samples in stored order (the order store_snapshot_load gives
 * them), each a stored stack id and raw values (profile_sample_unsample
 * turns them into the loaded profile's values). `layout` identifies how the
 * snapshot turns stored addresses into runtime addresses and names (its
 * mappings): snapshots of equal layout give every stack the same frames
 * from store_stacks_load. */
struct store_sample {
    int64_t stack;
    uint32_t thread; /* 0 here */
    int64_t raw[PV_COUNT];
};
struct store_samples {
    int64_t snapshot_id;
    const struct profile *profile;
    const struct store_sample *samples;
    size_t n;
    uint64_t layout;
};
typedef int (*store_samples_cb)(const struct store_samples *ss, void *ctx);
/* Calls cb for each of the n snapshots ids, in that order; what cb is given
 * lives until it returns. A nonzero return from cb stops and is returned.
 * Snapshots of one node in time order share their delta chains' work: each
 * sample set is decompressed once. HP_ENOTFOUND when one holds no profile. */
int store_snapshots_samples(struct store *s, const int64_t *ids, size_t n, store_samples_cb cb,
                            void *ctx, struct hp_buf *err) HP_MUST_CHECK;
/* A profile of the n stored stacks stack_ids as snapshot `id` shows them
 * (locations, frames, runtime addresses through its mappings, exactly as
 * store_snapshot_load builds them): one all-threads sample per stack, in
 * the order given, with zero values. *ret: profile_free.
 * flags: STORE_STACKS_NO_FILES leaves the frames' file names out (NULL)
 * for callers that fold by function only (leaks: a node's files are
 * scattered over the shared files table, a tenth of the load). */
#define STORE_STACKS_NO_FILES 1u
/* A node's stack view (store/view.c): the stored rows that resolve the
 * stacks of its newest closed spans, snapshots first_id..last_id, as one
 * blob, written when a span closes. */
struct store_stack_view {
    int64_t first_id, last_id;
    void *data;
    size_t len;
};
/* The node's view (decompressed): 0, or HP_ENOTFOUND when it has none
 * (or one whose bytes do not decompress: derived, it is then no view). */
int store_stack_view_get(struct store *s, int64_t node_id, struct store_stack_view *ret,
                         struct hp_buf *err) HP_MUST_CHECK;
void store_stack_view_release(struct store_stack_view *v);
/* view: a stack view of the same store (store_stack_view_get), or NULL.
 * What it holds, unless its locations changed since it was written, is
 * taken from it; only the rest is fetched. The profile is the same either
 * way. */
int store_stacks_load(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                      unsigned flags, const struct store_stack_view *view,
                      struct profile **ret, struct hp_buf *err) HP_MUST_CHECK;
/* The same stacks resolved to what folding by function reads of them and
 * no more (struct profile_resolved, profile.h), stack i the i-th id: what
 * store_stacks_load's profile gives, built straight from a current view
 * where it holds the stacks (the rest through a profile of only them),
 * without a profile of them all. Where the view cannot serve (a named
 * location, a name it lacks, two locations at one address that label
 * differently), or with STORE_RESOLVE_NO_VIEW (tests compare the two),
 * from the profile of them all. *ret: profile_resolved_free. */
#define STORE_RESOLVE_NO_VIEW 2u
int store_stacks_resolve(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                         unsigned flags, const struct store_stack_view *view,
                         struct profile_resolved **ret, struct hp_buf *err) HP_MUST_CHECK;
/* Stack series (store/sseries.c): a node's consecutive snapshots as, per
 * stack, the runs of snapshots over which its raw values hold still, so
 * that reading them costs the changes, not every sample of every snapshot.
 *
 * A chunk's members are snapshots in the order they were added; its slots
 * are stacks (a stack a snapshot lists twice has two slots) in one order
 * that every member lists its samples in: a member's samples, in stored
 * order, are the slots with a run covering it, in slot order. Each slot's
 * runs are ascending and disjoint; a run holds the slot's raw values
 * (store_sample.raw) over members [first, first + n). */
struct store_ss_member {
    int64_t snapshot_id;
    uint64_t layout, period; /* store_samples.layout; the profile's period */
    uint32_t scaling;        /* enum profile_scaling */
};
struct store_ss_run {
    uint32_t first, n;
    int64_t raw[PV_COUNT];
};
struct store_ss_slot {
    int64_t stack;          /* stored stack id */
    uint32_t run, nruns;    /* its runs: runs[run .. run + nruns) */
};
struct store_ss_chunk {
    struct store_ss_member *members;
    size_t nmembers;
    struct store_ss_slot *slots;
    size_t nslots;
    struct store_ss_run *runs;
    size_t nruns;
};
struct store_sseries {
    struct store_ss_chunk *chunks;
    size_t nchunks;
    struct hp_arena arena;
};
void store_sseries_release(struct store_sseries *ss);
/* Build a series from snapshots' samples (store_snapshots_samples), added
 * in order; a snapshot whose sample order contradicts the chunk's starts a
 * new chunk. store_ssb_finish closes the last chunk into *out and frees b. */
struct store_ssb;
struct store_ssb *store_ssb_new(struct store_sseries *out);
void store_ssb_add(struct store_ssb *b, const struct store_samples *ss);
/* Add a built chunk's members, each as the samples it was built from (the
 * slots with a run over it, in slot order, with that run's values): a
 * span's groups become the span's series without their sample sets read
 * again. */
void store_ssb_add_chunk(struct store_ssb *b, const struct store_ss_chunk *c);
/* How often b renumbered its order (a slot found no room between two
 * others): a few times per chunk at most, whatever its size. */
uint64_t store_ssb_relabels(const struct store_ssb *b);
void store_ssb_finish(struct store_ssb *b);
/* Free b without closing its chunk (a builder given up: *out keeps the
 * chunks closed before, for store_sseries_release). */
void store_ssb_free(struct store_ssb *b);
/* The packed form (version, then chunks; varints; store_sseries_pack in
 * store-internal.h) is what stack_series rows hold, zstd-compressed. unpack
 * checks every count and run against the bytes and the members:
 * HP_ECORRUPT with the reason in err. */
int store_sseries_unpack(const void *data, size_t len, struct store_sseries *out,
                         struct hp_buf *err) HP_MUST_CHECK;

/* A closed span of a node's snapshots, ids first_id..last_id. */
struct store_span {
    int64_t first_id, last_id;
};
/* The node's closed spans that carry a stack series, ascending. *ret:
 * free(). */
int store_sseries_spans(struct store *s, int64_t node_id, struct store_span **ret,
                        size_t *ret_n, struct hp_buf *err) HP_MUST_CHECK;
/* The stack series of the node's span that starts at first_id (*ret:
 * store_sseries_release). HP_ENOTFOUND when it has none (any more);
 * HP_ECORRUPT when it does not decode. Its members are the node's ok
 * snapshots with ids in the span when it was written: a reader checks
 * them against the snapshots it reads. */
int store_sseries_get(struct store *s, int64_t node_id, int64_t first_id,
                      struct store_sseries *ret, struct hp_buf *err) HP_MUST_CHECK;

/* The raw bytes as fetched (malloc'd; free()). HP_ENOTFOUND if none kept. */
int store_snapshot_raw(struct store *s, int64_t id, void **ret_data, size_t *ret_len,
                       struct hp_buf *err) HP_MUST_CHECK;
int store_snapshot_info(struct store *s, int64_t id, struct store_snapshot_info *ret,
                        struct hp_buf *err) HP_MUST_CHECK;

/* Resolve a snapshot selector to the id of a stored profile (status ok):
 *   #ID        that snapshot
 *   NODE       the node's latest snapshot
 *   NODE@TIME  the node's latest snapshot at or before TIME: ISO 8601
 *              (2026-11-22T09:00:00Z, 2026-11-22 09:00, 2026-11-22, with
 *              Z or +hh:mm; no zone means UTC), or relative to `now_ms`
 *              (-6h, -2d, -90m, -1w; "now").
 * HP_ENOTFOUND when no node of that name exists (the caller may then try the
 * text as a file path) or when the node has no snapshot at or before TIME
 * (err says which); HP_EUSAGE for an unreadable TIME. */
int store_selector_resolve(struct store *s, const char *text, int64_t now_ms,
                           int64_t *ret_id, struct hp_buf *err) HP_MUST_CHECK;

/* Parse a time: ISO 8601 as above or relative to now_ms. 0 or HP_EUSAGE. */
int store_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms);
/* Format ms as "2026-11-22T09:00:00Z" (seconds precision) into out (>= 32). */
const char *store_time_format(int64_t ms, char *out, size_t outsz);

/* ---- listings -------------------------------------------------------------- */

struct store_node_row {
    int64_t id;
    char name[128];
    char kind[32];
    char address[256];
    char labels[256];
    int64_t nsnapshots;
    int64_t last_at;              /* last attempt, 0 if none */
    enum store_status last_status;
    char last_error[256];
    int64_t last_ok_at;           /* 0 if never */
    int64_t last_ok_id;
    double last_ok_totals[PV_COUNT];
};

/* Calls cb for each node, by name. A non-zero return from cb stops the walk
 * and is returned. */
typedef int (*store_node_cb)(const struct store_node_row *row, void *ctx);
int store_nodes_list(struct store *s, store_node_cb cb, void *ctx, struct hp_buf *err)
    HP_MUST_CHECK;

/* Snapshots of one node with since_ms <= taken_at <= until_ms (use 0 and
 * INT64_MAX for all), oldest first; failed attempts included when
 * `with_failed`. */
typedef int (*store_snapshot_cb)(const struct store_snapshot_info *row, void *ctx);
int store_snapshots_list(struct store *s, int64_t node_id, int64_t since_ms,
                         int64_t until_ms, bool with_failed, store_snapshot_cb cb, void *ctx,
                         struct hp_buf *err) HP_MUST_CHECK;
/* The same for an analysis over many snapshots: only the ok ones, and of
 * each only id, node_id, node, taken_at, status and totals (the rest
 * zero), read through the index of ok snapshots without the failure and
 * timing columns (listing 72,000 snapshots was a twentieth of `query
 * leaks --db` over 100 nodes). */
int store_snapshots_ok(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                       store_snapshot_cb cb, void *ctx, struct hp_buf *err) HP_MUST_CHECK;

/* ---- series for trends ------------------------------------------------------ */

/* One point of a node's series: a stored profile's totals and, when asked
 * for, the value of one statistic (NaN when the snapshot lacks it). */
struct store_point {
    int64_t snapshot_id;
    int64_t taken_at;
    double totals[PV_COUNT];
    double stat; /* NaN when none */
};

/* The node's ok snapshots in [since, until], oldest first. `stat_name` (may
 * be NULL) selects the statistic to put in each point. *ret_points is
 * malloc'd (free()). */
int store_series_node(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                      const char *stat_name, struct store_point **ret_points, size_t *ret_n,
                      struct hp_buf *err) HP_MUST_CHECK;

/* Per-function totals of one snapshot: flat (the function is the innermost
 * frame of the leaf) and cumulative (the function is anywhere on the stack,
 * counted once per stack), un-sampled in-use bytes and objects. Only
 * symbolized frames have functions; unsymbolized addresses are not counted
 * (reindex once symbols are found). */
struct store_function_total {
    int64_t function_id;
    const char *name; /* valid until the callback returns */
    int64_t flat_space, cum_space, flat_objects, cum_objects;
};
typedef int (*store_function_cb)(const struct store_function_total *row, void *ctx);
/* Function totals of a snapshot, largest cumulative bytes first. */
int store_function_totals(struct store *s, int64_t snapshot_id, store_function_cb cb, void *ctx,
                          struct hp_buf *err) HP_MUST_CHECK;

struct store_function_point {
    int64_t snapshot_id;
    int64_t taken_at;
    int64_t flat_space, cum_space, flat_objects, cum_objects; /* 0 when absent */
};
/* One function's totals over the node's ok snapshots in [since, until],
 * oldest first (a snapshot where the function does not appear gives zeros).
 * HP_ENOTFOUND when no function has that exact name. */
int store_series_function(struct store *s, int64_t node_id, const char *function,
                          int64_t since_ms, int64_t until_ms,
                          struct store_function_point **ret_points, size_t *ret_n,
                          struct hp_buf *err) HP_MUST_CHECK;

/* The totals of functions fids[0..nf) (ascending, distinct) over the
 * node's ok snapshots in [since, until], oldest first, in one pass: each
 * snapshot's rows and packed rest are read once however many functions are
 * asked for (a trend's --function expression may match thousands, and a
 * series each would read every snapshot's rest once per function). cb gets
 * each snapshot's nf points in fids' order (zeros where a function holds
 * nothing); a non-zero return stops the pass and is returned. */
typedef int (*store_functions_cb)(const struct store_function_point *pts, size_t nf,
                                  void *ctx);
int store_series_functions(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                           const int64_t *fids, size_t nf, store_functions_cb cb, void *ctx,
                           struct hp_buf *err) HP_MUST_CHECK;

/* Every function name the store knows (any node, any snapshot), by id:
 * what a trend's --function expression is matched against. */
typedef int (*store_function_name_cb)(int64_t function_id, const char *name, void *ctx);
int store_functions_list(struct store *s, store_function_name_cb cb, void *ctx,
                         struct hp_buf *err) HP_MUST_CHECK;

/* A reader's many small reads as one: on SQLite a read transaction (one
 * consistent view, and SQLite's file locks taken once instead of around
 * every statement: `query leaks` reads each snapshot's statistics, tens of
 * thousands of statements); nothing on PostgreSQL, where each statement is
 * its own round trip anyway. Not while a write transaction or batch is
 * open (HP_EUSAGE). store_read_end ends it (no-op without one). Any thread
 * that owns the handle. */
int store_read_begin(struct store *s, struct hp_buf *err) HP_MUST_CHECK;
void store_read_end(struct store *s);

/* Statistics of one snapshot, in the order the node reported them. */
typedef int (*store_stat_cb)(const struct store_stat *stat, void *ctx);
int store_snapshot_stats(struct store *s, int64_t snapshot_id, store_stat_cb cb, void *ctx,
                         struct hp_buf *err) HP_MUST_CHECK;
/* Statistics of every snapshot of a node taken in [since_ms, until_ms], by
 * snapshot id and then in the order the node reported them: one statement
 * (a round trip on PostgreSQL) where store_snapshot_stats takes one a
 * snapshot. With `want`, only the statistics whose name it wants (asked
 * once per name): a node reports dozens of memory figures each time and
 * an analysis may read a few. */
typedef int (*store_node_stat_cb)(int64_t snapshot_id, const struct store_stat *stat, void *ctx);
typedef bool (*store_stat_want_cb)(const char *name, void *ctx);
int store_node_stats(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                     store_stat_want_cb want, void *want_ctx, store_node_stat_cb cb, void *ctx,
                     struct hp_buf *err) HP_MUST_CHECK;

/* ---- retention -------------------------------------------------------------- */

struct store_retain_policy {
    int64_t retain_s; /* delete snapshots older than this; 0 keeps forever */
    int64_t thin_after_s; /* older than this keep one per UTC day per node (the
                           * last ok one); 0 disables thinning */
    int64_t vacuum_pages; /* pages to reclaim by incremental vacuum; 0 = all */
    /* Also delete the stacks, locations, functions, files, objects, stat
     * names and symbol-cache entries that no remaining snapshot references
     * (mark and sweep: reads every stored sample set, in one transaction
     * that holds the write lock; meant for `query retain`, not every round). */
    bool reclaim;
    bool dry_run; /* count what would go (in one transaction, rolled back) */
    /* Time for packing closed spans' stack series still in groups into one
     * row each (a store written before they were one row), newest first;
     * 0: a minute. What is left waits for the next retention. pack_max:
     * at most this many spans (0: no limit). */
    int64_t pack_budget_ms;
    int64_t pack_max;
};

struct store_retain_result {
    int64_t snapshots_deleted;
    int64_t raw_deleted;
    int64_t pages_freed;
    /* With reclaim: rows of the shared dictionaries deleted. */
    int64_t stacks_deleted, locations_deleted, names_deleted, objects_deleted,
        symbols_deleted;
    bool skipped; /* PostgreSQL: another process was retaining */
    /* Spans closed over snapshots none covered (a store written before
     * spans, history a retention thinned), and closed spans whose stack
     * series was packed into one row: what trends and leaks read. */
    int64_t spans_closed;
    /* Closed spans whose stack series is still in groups when packing
     * stopped (it stops after a minute; the next retention goes on). */
    int64_t spans_pack_left;
    /* Nodes' stack views (store/view.c) written where they were missing
     * or behind (a store written before them), stale (a location they
     * copied was symbolized later) or damaged, and nodes left without a
     * current one when the minute was up. */
    int64_t views_written, views_left;
};

/* Apply the policy relative to now_ms. On PostgreSQL one process at a time
 * retains (an advisory lock): another one's call returns 0 at once with
 * nothing done and ret->skipped set. Writer only; runs in bounded
 * transactions so readers and the collector are not blocked for long. A dry
 * run deletes inside one transaction and rolls it back: *ret says what
 * would go (pages_freed stays 0), the file is unchanged. */
int store_retain(struct store *s, const struct store_retain_policy *pol, int64_t now_ms,
                 struct store_retain_result *ret, struct hp_buf *err) HP_MUST_CHECK;

/* ---- symbol cache -------------------------------------------------------------- */

/* Frames the symbolizer found for (build-id, address relative to the
 * object's load bias). get: 1 found (frames and their strings are allocated
 * in `arena`, *ret_n may be 0 for "known to have no symbols"), 0 not cached,
 * <0 error. put replaces. Any handle (a writer for put). */
int store_symcache_get(struct store *s, const char *build_id, uint64_t address,
                       struct hp_arena *arena, struct profile_frame **ret_frames,
                       uint32_t *ret_n, struct hp_buf *err) HP_MUST_CHECK;
int store_symcache_put(struct store *s, const char *build_id, uint64_t address,
                       const struct profile_frame *frames, uint32_t n, struct hp_buf *err)
    HP_MUST_CHECK;

/* ---- uploaded symbol files ------------------------------------------------------
 *
 * Executables and separate debug files put into the store by `query symbols
 * add`, keyed by GNU build-id, so every collector and `query` sharing the
 * database (SQLite file or PostgreSQL) symbolizes with them. The symbolizer
 * reads files, so each process mirrors them into a local folder
 * (store_symfiles_sync) and uses that folder as its --symbols DIR. */

struct store_symfile {
    const char *build_id; /* lowercase hex */
    const char *name;     /* file name the dumps' mappings use ("doris_be") */
    int64_t size;         /* bytes */
    bool has_debug;       /* carries DWARF */
    int64_t added_at;     /* ms since the epoch */
};

/* Store the file at `path` as f (f->size is taken from the file; the
 * caller has checked that the file carries f->build_id). Streamed in
 * chunks: memory stays at a few MiB whatever the size. Replaces an earlier
 * file of the same build-id; the file is listed only once its every chunk
 * is stored, each chunk its own transaction, so collectors are not held up
 * for the whole upload. Writer only. 0 or <0 with err. */
int store_symfile_put(struct store *s, const struct store_symfile *f, const char *path,
                      struct hp_buf *err) HP_MUST_CHECK;
/* Every listed file, by build-id; cb returns non-zero to stop. Any handle. */
int store_symfiles_list(struct store *s, int (*cb)(const struct store_symfile *f, void *ctx),
                        void *ctx, struct hp_buf *err) HP_MUST_CHECK;
/* The same list as one malloc'ed array (names copied); free it with
 * store_symfiles_free. 0 or <0 with err. */
int store_symfiles_all(struct store *s, struct store_symfile **ret, size_t *ret_n,
                       struct hp_buf *err) HP_MUST_CHECK;
void store_symfiles_free(struct store_symfile *v, size_t n);
/* Write the stored bytes of `f` (as listed) to the open descriptor fd, a
 * chunk at a time. 0, HP_ECORRUPT when a chunk is missing or does not
 * decode, or another <0 with err. Any handle. */
int store_symfile_export(struct store *s, const struct store_symfile *f, int fd,
                         struct hp_buf *err) HP_MUST_CHECK;

/* Mirror the store's files into `dir` in the layout of --symbols DIR:
 * DIR/.build-id/xx/rest.debug by build-id and DIR/<name> a link to the
 * newest file of that name. Files already there with the listed size are
 * kept; new ones are written to a temporary name and renamed. *ret_added
 * (may be NULL): how many files were written. Files in DIR the store does
 * not list are left alone (an older heapfleet's uploads, or --symbols
 * content). 0 or <0 with err (a file that failed is named). */
int store_symfiles_sync(struct store *s, const char *dir, size_t *ret_added,
                        struct hp_buf *err) HP_MUST_CHECK;

/* The local folder a process mirrors the store `db` into: "<db>.symbols"
 * next to an SQLite file (where `query symbols add` put files before they
 * went into the database, so those keep working); for a PostgreSQL URI,
 * "$XDG_CACHE_HOME/heapfleet/symbols/<hash of the URI>" (else under
 * ~/.cache). malloc'ed; NULL when no home folder is known. */
char *store_symfiles_dir_default(const char *db);

/* ---- collectors sharing a fleet (PostgreSQL only) ----------------------------
 *
 * Any number of collectors with the same node list and the same PostgreSQL
 * database split the fleet between them. Each heartbeats its identity and
 * health every few seconds; it is alive while its last heartbeat is within
 * its lease. At each round (round_key: the round's start divided by the
 * interval, the same number on every collector) a collector claims the
 * nodes rendezvous hashing gives it among the live collectors, and only
 * those the database grants: a (node, round_key) claim is unique, so no node
 * is polled twice in a round however the collectors' views differ. A dead
 * collector stops heartbeating; after its lease the others' next round
 * hashes its nodes to them. One stopped cleanly says so (store_fleet_leave)
 * and its nodes move at the others' next round. On SQLite these return HP_EUSAGE (one collector
 * per SQLite file). Any handle opened for writing; one thread at a time. */
struct store_collector_row {
    char id[128];
    char host[128];
    int64_t pid;
    int64_t started_at, heartbeat_at; /* ms */
    int64_t lease_ms, interval_ms;
    int64_t round_key;                /* last round it claimed in */
    int64_t claimed;                  /* nodes it claimed in that round */
    int64_t polls_ok, polls_failed, store_errors; /* since it started */
    char last_error[256];
    int64_t stopped_at;               /* ms: it stopped cleanly (list only); 0 running */
    bool alive;                       /* heartbeat within its lease, not stopped (list only) */
};
/* Insert or refresh this collector's row (heartbeat_at = now). */
int store_fleet_heartbeat(struct store *s, const struct store_collector_row *me,
                          struct hp_buf *err) HP_MUST_CHECK;
/* Claim this collector's share of `names` (n nodes) for round_key: mine[i]
 * true for the nodes it must poll. Refreshes the heartbeat too. */
int store_fleet_claim(struct store *s, const struct store_collector_row *me, int64_t round_key,
                      const char *const *names, size_t n, bool *mine, struct hp_buf *err)
    HP_MUST_CHECK;
typedef int (*store_collector_cb)(const struct store_collector_row *row, void *ctx);
/* Every collector that ever heartbeated, by id. */
int store_fleet_list(struct store *s, store_collector_cb cb, void *ctx, struct hp_buf *err)
    HP_MUST_CHECK;
/* A clean stop: mark this collector stopped (stopped_at = now), so it is no
 * longer alive and the others' next round takes its nodes without waiting
 * for its lease to run out. Its claims of the rounds it already began stay
 * (a node is still never polled twice in one round). */
int store_fleet_leave(struct store *s, const struct store_collector_row *me, struct hp_buf *err)
    HP_MUST_CHECK;
/* Who polled a node in a round: the collector's id into out, 1 found, 0 none. */
int store_fleet_claim_owner(struct store *s, const char *node, int64_t round_key, char *out,
                            size_t outsz, struct hp_buf *err) HP_MUST_CHECK;

/* ---- copying a store (query migrate) ------------------------------------------
 *
 * Copy every row of an SQLite store into a PostgreSQL one (opened for
 * writing), table by table in dependency order, ids kept, in transactions of
 * a few thousand rows. Resumable: a table continues after the highest key
 * the destination already holds (rows are inserted with ON CONFLICT DO
 * NOTHING, so a batch cut short by a crash is simply done again). At the end
 * each table's row count must be the same on both sides, else HP_EMISMATCH
 * naming the table. cb (may be NULL) is called after each batch and once
 * per table when it is checked (checked = true). */
struct store_copy_table {
    const char *table;
    int64_t source_rows;   /* rows in the source table */
    int64_t copied_rows;   /* inserted by this run so far */
    int64_t dest_rows;     /* in the destination, when checked */
    bool checked;
};
typedef void (*store_copy_cb)(const struct store_copy_table *t, void *ctx);
int store_copy(struct store *from, struct store *to, store_copy_cb cb, void *ctx,
               struct hp_buf *err) HP_MUST_CHECK;

/* ---- size accounting ------------------------------------------------------- */

struct store_usage {
    int64_t file_bytes;    /* page_count * page_size */
    int64_t free_bytes;    /* freelist pages * page_size */
    int64_t raw_bytes;     /* compressed raw dumps */
    int64_t raw_orig_bytes; /* their sizes as fetched */
    int64_t snapshots, stacks, locations, functions;
};
int store_usage_get(struct store *s, struct store_usage *ret, struct hp_buf *err) HP_MUST_CHECK;

/* How this handle's writer found the stacks of the profiles it stored (since
 * it opened): in its cache, by the node's previous profile (read by id), by
 * hash lookups, or as new rows. For the benches and tests: a steady node's
 * stacks should come from the first two. */
struct store_write_counts {
    uint64_t stacks_cached, stacks_by_node, stacks_by_hash, stacks_inserted;
    /* Of those cached, the locations and stacks taken from the same place
     * in the node's previous snapshot (its key there the same) without a
     * cache lookup; and the names (of functions and files) whose ids came
     * from the same place in its previous profile. */
    uint64_t locations_by_place, stacks_by_place, names_by_place;
    /* Stack series of a completed group (or a closing span's last one)
     * taken from what the writer built as it stored their snapshots, rows
     * of a closing span's groups read back and replayed into its row, and
     * snapshots whose sample sets were read back to build series. */
    uint64_t sseries_groups_kept, sseries_rows_replayed, sseries_sets_read;
    /* Nodes whose bases (their previous snapshot's blobs, memo and group
     * builder) the writer did not hold and read back from the database. */
    uint64_t bases_loaded;
    /* Stacks whose function totals plan (which functions their samples
     * add to) came from the node's previous snapshot, not their frames. */
    uint64_t ft_plans_kept;
    /* Nodes whose function accumulators (and plans) were let go because
     * the functions their earlier builds named outnumbered those named now. */
    uint64_t ft_memos_dropped;
    /* Raw dumps also looked up by the hash stores wrote before version 2
     * of the content key (store_content_hash): only while such rows remain. */
    uint64_t raw_v1_lookups;
};
void store_write_counts_get(const struct store *s, struct store_write_counts *ret);

#endif
