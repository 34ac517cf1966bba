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

#include <stddef.h>

#include "store/hp.h"

struct store;
struct query_opts;
struct query_snapshot;
struct query_stored;

/* Fill snaps[0..n), stored snapshots of one node (each with its id set),
 * for query_leaks_build: their samples as entries of per-lifetime
 * dictionaries (dict, ids, id_values, id_vars, nids, id_period), folded
 * with o as query_fold would fold their profiles, so leaks answers exactly
 * as from the folded profiles. The rest of each snapshot (node, time,
 * figures) is the caller's. What the snapshots now point into is *ret's:
 * free it with query_stored_free after the analysis. Returns 0 or a
 * negative HP_E* code with the store's message in err (*ret untouched). */
int query_stored_fill(struct store *st, const struct query_opts *o,
                      struct query_snapshot *snaps, size_t n, struct query_stored **ret,
                      struct hp_buf *err) HP_MUST_CHECK;
void query_stored_free(struct query_stored *qs);

#endif
