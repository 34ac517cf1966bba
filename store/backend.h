/* backend.h: one store.h, two database engines.
 *
 * The store's logic (write.c, read.c, retain.c, symcache.c) is written once
 * against a small part of SQLite's C API and compiled twice: once over
 * SQLite (store.c; STORE_BACKEND_SQLITE) and once over libpq (pg.c, whose
 * pg-shim.h maps those calls onto PostgreSQL; STORE_BACKEND_PG). Each
 * compilation gets its own names (sqlstore_*, pgstore_*) from the macros
 * below, and fills a struct store_backend; backend.c defines the public
 * store_* functions once and dispatches through s->be. Callers see only
 * store.h and never know which engine they talk to.
 *
 * Included by store-internal.h before store.h, so the declarations are
 * renamed with the definitions. Files compiled without a backend define
 * (backend.c, pack.c's shared helpers, store tests) see the plain names. */
#ifndef HP_STORE_BACKEND_H
#define HP_STORE_BACKEND_H

#if defined(STORE_BACKEND_PG)
#define STORE_BE(name) pgstore_##name
#elif defined(STORE_BACKEND_SQLITE)
#define STORE_BE(name) sqlstore_##name
#endif

#ifdef STORE_BE
/* store.h, per engine */
#define store_open STORE_BE(open)
#define store_close STORE_BE(close)
#define store_check STORE_BE(check)
#define store_usage_get STORE_BE(usage_get)
#define store_node_upsert STORE_BE(node_upsert)
#define store_node_find STORE_BE(node_find)
#define store_snapshot_insert STORE_BE(snapshot_insert)
#define store_snapshot_find_dump STORE_BE(snapshot_find_dump)
#define store_snapshot_attempt_record STORE_BE(snapshot_attempt_record)
#define store_snapshot_reindex STORE_BE(snapshot_reindex)
#define store_snapshot_stat_set STORE_BE(snapshot_stat_set)
#define store_snapshot_load STORE_BE(snapshot_load)
#define store_snapshots_samples STORE_BE(snapshots_samples)
#define store_stacks_load STORE_BE(stacks_load)
#define store_stacks_resolve STORE_BE(stacks_resolve)
#define store_snapshot_load_top STORE_BE(snapshot_load_top)
#define store_snapshot_raw STORE_BE(snapshot_raw)
#define store_snapshot_info STORE_BE(snapshot_info)
#define store_selector_resolve STORE_BE(selector_resolve)
#define store_nodes_list STORE_BE(nodes_list)
#define store_snapshots_list STORE_BE(snapshots_list)
#define store_snapshots_ok STORE_BE(snapshots_ok)
#define store_series_node STORE_BE(series_node)
#define store_function_totals STORE_BE(function_totals)
#define store_series_function STORE_BE(series_function)
#define store_functions_list STORE_BE(functions_list)
#define store_series_functions STORE_BE(series_functions)
#define store_snapshot_stats STORE_BE(snapshot_stats)
#define store_node_stats STORE_BE(node_stats)
#define store_sseries_spans STORE_BE(sseries_spans)
#define store_sseries_get STORE_BE(sseries_get)
#define store_stack_view_get STORE_BE(stack_view_get)
#define store_spans_fill STORE_BE(spans_fill)
#define store_read_begin STORE_BE(read_begin)
#define store_read_end STORE_BE(read_end)
#define store_retain STORE_BE(retain)
#define store_symcache_get STORE_BE(symcache_get)
#define store_symcache_put STORE_BE(symcache_put)
#define store_symfile_put STORE_BE(symfile_put)
#define store_symfiles_list STORE_BE(symfiles_list)
#define store_symfile_export STORE_BE(symfile_export)
#define store_batch_begin STORE_BE(batch_begin)
#define store_batch_commit STORE_BE(batch_commit)
#define store_batch_open STORE_BE(batch_open)
#define store_fleet_heartbeat STORE_BE(fleet_heartbeat)
#define store_fleet_claim STORE_BE(fleet_claim)
#define store_fleet_list STORE_BE(fleet_list)
#define store_fleet_claim_owner STORE_BE(fleet_claim_owner)
#define store_fleet_leave STORE_BE(fleet_leave)
#define store_ping STORE_BE(ping)
/* read.c's engine-free helpers are compiled twice too */
#define store_time_parse STORE_BE(time_parse)
#define store_time_format STORE_BE(time_format)
/* store-internal.h, per engine */
#define store_migrations STORE_BE(migrations)
#define store_nmigrations STORE_BE(nmigrations)
#define store_sqlite_error STORE_BE(db_error)
#define store_stmt STORE_BE(stmt)
#define store_step_done STORE_BE(step_done)
#define store_step_row STORE_BE(step_row)
#define store_exec STORE_BE(exec)
#define store_tx_begin STORE_BE(tx_begin)
#define store_tx_commit STORE_BE(tx_commit)
#define store_tx_rollback STORE_BE(tx_rollback)
#define store_col_text STORE_BE(col_text)
#define store_require_writer STORE_BE(require_writer)
#define store_stacks_find STORE_BE(stacks_find)
#define store_stacks_insert STORE_BE(stacks_insert)
#define store_stacks_hashes STORE_BE(stacks_hashes)
#define store_view_build STORE_BE(view_build)
#define store_view_current STORE_BE(view_current)
#define store_unpack_column STORE_BE(unpack_column)
#define store_raw_find STORE_BE(raw_find)
#define store_writer_free STORE_BE(writer_free)
#define store_writer_reset STORE_BE(writer_reset)
#define store_blob_release STORE_BE(blob_release)
#define store_blob_table STORE_BE(blob_table)
#define store_sample_set_refs STORE_BE(sample_set_refs)
#define store_blob_load STORE_BE(blob_load)
#define store_function_totals_delete STORE_BE(function_totals_delete)
#define store_ft_rest_load STORE_BE(ft_rest_load)
#define store_fseries_add STORE_BE(fseries_add)
#define store_writer_group_take STORE_BE(writer_group_take)
#define store_writer_group_drop STORE_BE(writer_group_drop)
#define store_layout_hash STORE_BE(layout_hash)
#define store_fseries_dissolve STORE_BE(fseries_dissolve)
#define store_fseries_spans STORE_BE(fseries_spans)
#define store_fseries_get STORE_BE(fseries_get)
#define store_fseries_alive STORE_BE(fseries_alive)
#define store_fseries_reindexed STORE_BE(fseries_reindexed)
#endif

#endif
