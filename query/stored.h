/* The series analyses over the store: a node's stored snapshots read for
 * `leaks` as stack ids and values (no whole profiles), for every caller
 * that holds a store connection: the query CLI and the web API's store
 * source, so that both give the same answer from the same path.
 *
 * This is its own small module (DESIGN.md: query-store) because it builds
 * on both the query library, which knows nothing of the store, and the
 * store. Any thread that owns the connection may call it. */
#ifndef HP_QUERY_STORED_H
#define HP_QUERY_STORED_H

#include <stdbool.h>
#include <stddef.h>

#include "store/hp.h"

struct store;
struct query_opts;
struct query_snapshot;
struct query_stored;

/* Fill snaps[0..n), stored snapshots of one node (each with its id set),
 * for query_leaks_build: the node's history as one series (series,
 * series_t, id_period): runs of equal values of entries of per-lifetime
 * dictionaries, folded with o as query_fold would fold their profiles, so
 * leaks answers exactly as from the folded profiles. Closed spans are read
 * from their stack series (store.h), the other snapshots from their sample
 * sets. The rest of each snapshot (node, time, figures) is the caller's.
 * What the snapshots now point into is *ret's: free it with
 * query_stored_free after the analysis. Returns 0 or a negative HP_E*
 * code with the store's message in err (*ret untouched).
 * flags: QUERY_STORED_SAMPLE_SETS reads every snapshot from its sample set
 * (the stack series unused: what a test compares them with). */
#define QUERY_STORED_SAMPLE_SETS 1u
/* cache (NULL: none): the stack cache of the caller's thread, for a run
 * over many nodes (query_stack_cache_new). */
struct query_stack_cache;
int query_stored_fill(struct store *st, const struct query_opts *o,
                      struct query_snapshot *snaps, size_t n, unsigned flags,
                      struct query_stack_cache *cache, struct query_stored **ret,
                      struct hp_buf *err) HP_MUST_CHECK;

/* Stacks resolved and folded by function, kept from one node to the next.
 * Nodes that run one build of the binaries share their stored stacks (the
 * store keeps a location as its object and file-relative address), so a
 * fleet's stacks are resolved once a build, not once a node. A stack with
 * a frame labelled by its address is not kept (the label is where that
 * process mapped it). The cache gives itself up (and its memory) after a
 * few nodes of which hardly a stack was met before: a fleet whose nodes
 * share nothing pays a few nodes' copies for it, no more.
 *
 * A copy of names as they were when read: one command's run over a fleet,
 * not kept across commands (a location symbolized again afterwards would
 * not show). One per thread: it is not locked. */
struct query_stack_cache *query_stack_cache_new(void);
void query_stack_cache_free(struct query_stack_cache *c);
/* Stacks looked up and found, for tests and the bench. */
void query_stack_cache_counts(const struct query_stack_cache *c, size_t *ret_lookups,
                              size_t *ret_hits, bool *ret_gave_up);
void query_stored_free(struct query_stored *qs);
/* How many of the snapshots query_stored_fill read came from stored stack
 * series (closed spans' groups) and how many from their sample sets. */
void query_stored_counts(const struct query_stored *qs, size_t *ret_series,
                         size_t *ret_samples);

struct query_trend_opts;

/* Whether `query trend` can take its function columns from the store's
 * per-snapshot function totals under these options: in-use bytes or
 * objects of the default fold (inline frames, allocator frames trimmed,
 * no focus/ignore, function granularity), which is what the store keeps.
 * Otherwise the profiles must be loaded and folded. */
bool query_stored_trend_ok(const struct query_opts *o);

/* Choose and fill trend's function columns for stored snapshots
 * snaps[0..n) (any nodes; each with its id, node and time) from the
 * store's function totals, without loading a profile: the functions
 * t->function matches, by their largest value in the window (at most
 * t->max_functions, default 50), else the t->max_functions (default 5)
 * holding the most at each node's newest snapshot, as query_trend_build
 * chooses them from folded profiles; values per snapshot as the folded
 * profiles give them, to the whole byte or object. One difference: a
 * frame no symbol names (the folded path's "0x... lib.so") has no
 * function totals, so --function "." lists named functions only. Sets t's
 * functions_given, names, values and nfunctions, which point into *ret
 * (query_stored_free after the trend is built). Only where
 * query_stored_trend_ok(o). 0 or a negative HP_E* code with err set. */
int query_stored_trend_functions(struct store *st, const struct query_opts *o,
                                 const struct query_snapshot *snaps, size_t n,
                                 struct query_trend_opts *t, struct query_stored **ret,
                                 struct hp_buf *err) HP_MUST_CHECK;

#endif
