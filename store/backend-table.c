/* backend-table.c: the struct store_backend of one engine. Compiled once per
 * engine (backend.h), so each name below is that engine's function. */
#include "store/store-internal.h"

#ifdef STORE_BACKEND_PG
/* Write batching is SQLite's (one WAL commit for many snapshots). On
 * PostgreSQL every write transaction holds the fleet's write lock (pg.c), and
 * a batch would hold it for a second while other collectors wait: each
 * snapshot commits on its own, and the sink, seeing no batch open, does not
 * wait for a flush. */
static int pg_batch_begin(struct store *s, struct hp_buf *err)
{
    (void)s, (void)err;
    return 0;
}

static int pg_batch_commit(struct store *s, struct hp_buf *err)
{
    (void)s, (void)err;
    return 0;
}

static bool pg_batch_open(const struct store *s)
{
    (void)s;
    return false;
}

int pgstore_retain_exclusive(struct store *s, const struct store_retain_policy *pol,
                             int64_t now_ms, struct store_retain_result *ret,
                             struct hp_buf *err);
#endif

const struct store_backend STORE_BE(backend) = {
#ifdef STORE_BACKEND_PG
    .name = "postgresql",
#else
    .name = "sqlite",
#endif
    .close = store_close,
    .check = store_check,
    .ping = store_ping,
    .usage_get = store_usage_get,
    .node_upsert = store_node_upsert,
    .node_find = store_node_find,
    .snapshot_insert = store_snapshot_insert,
    .snapshot_find_dump = store_snapshot_find_dump,
    .snapshot_attempt_record = store_snapshot_attempt_record,
    .snapshot_reindex = store_snapshot_reindex,
    .snapshot_stat_set = store_snapshot_stat_set,
    .snapshot_load = store_snapshot_load,
    .snapshots_samples = store_snapshots_samples,
    .stacks_load = store_stacks_load,
    .stacks_resolve = store_stacks_resolve,
    .snapshot_load_top = store_snapshot_load_top,
    .snapshot_raw = store_snapshot_raw,
    .snapshot_info = store_snapshot_info,
    .selector_resolve = store_selector_resolve,
    .nodes_list = store_nodes_list,
    .snapshots_list = store_snapshots_list,
    .snapshots_ok = store_snapshots_ok,
    .series_node = store_series_node,
    .function_totals = store_function_totals,
    .series_function = store_series_function,
    .functions_list = store_functions_list,
    .series_functions = store_series_functions,
    .snapshot_stats = store_snapshot_stats,
    .node_stats = store_node_stats,
    .sseries_spans = store_sseries_spans,
    .sseries_get = store_sseries_get,
    .stack_view_get = store_stack_view_get,
    .view_current = store_view_current,
    .read_begin = store_read_begin,
    .read_end = store_read_end,
#ifdef STORE_BACKEND_PG
    .retain = pgstore_retain_exclusive,
    .fleet_heartbeat = store_fleet_heartbeat,
    .fleet_claim = store_fleet_claim,
    .fleet_list = store_fleet_list,
    .fleet_claim_owner = store_fleet_claim_owner,
    .fleet_leave = store_fleet_leave,
#else
    .retain = store_retain,
#endif
    .symcache_get = store_symcache_get,
    .symcache_put = store_symcache_put,
    .symfile_put = store_symfile_put,
    .symfiles_list = store_symfiles_list,
    .symfile_export = store_symfile_export,
#ifdef STORE_BACKEND_PG
    .batch_begin = pg_batch_begin,
    .batch_commit = pg_batch_commit,
    .batch_open = pg_batch_open,
#else
    .batch_begin = store_batch_begin,
    .batch_commit = store_batch_commit,
    .batch_open = store_batch_open,
#endif
};
