/* backend.c: the public store.h functions that touch a database, once for
 * both engines: store_open picks the engine from the location (a libpq URI
 * is PostgreSQL, anything else an SQLite file); the rest dispatch through
 * the handle's struct store_backend (backend.h). */
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

bool store_is_postgres(const char *path)
{
    return path && (strncmp(path, "postgresql://", 13) == 0 ||
                    strncmp(path, "postgres://", 11) == 0);
}

int sqlstore_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err);
int pgstore_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err);
int sqlstore_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms);
const char *sqlstore_time_format(int64_t ms, char *out, size_t outsz);

int store_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err)
{
    struct store *s = NULL;
    bool pg = store_is_postgres(path);
    int r = pg ? pgstore_open(path, flags, &s, err) : sqlstore_open(path, flags, &s, err);
    if (r < 0)
        return r;
    s->be = pg ? &pgstore_backend : &sqlstore_backend;
    *ret = s;
    return 0;
}

void store_write_counts_get(const struct store *s, struct store_write_counts *ret)
{
    *ret = s->counts;
}

int store_batch_begin(struct store *s, struct hp_buf *err)
{
    return s->be->batch_begin(s, err);
}

int store_batch_commit(struct store *s, struct hp_buf *err)
{
    return s->be->batch_commit(s, err);
}

bool store_batch_open(const struct store *s)
{
    return s->be->batch_open(s);
}

const char *store_backend_name(const struct store *s)
{
    return s->be->name;
}

void store_close(struct store *s)
{
    if (s)
        s->be->close(s);
}

int store_check(struct store *s, struct hp_buf *err)
{
    return s->be->check(s, err);
}

int store_ping(struct store *s, struct hp_buf *err)
{
    return s->be->ping(s, err);
}

int store_usage_get(struct store *s, struct store_usage *ret, struct hp_buf *err)
{
    return s->be->usage_get(s, ret, err);
}

int store_node_upsert(struct store *s, const struct store_node_info *n, int64_t *ret_id,
                      struct hp_buf *err)
{
    return s->be->node_upsert(s, n, ret_id, err);
}

int store_node_find(struct store *s, const char *name, int64_t *ret_id, struct hp_buf *err)
{
    return s->be->node_find(s, name, ret_id, err);
}

int store_snapshot_insert(struct store *s, int64_t node_id, int64_t taken_at_ms,
                          const struct profile *p, const void *raw, size_t raw_len,
                          const struct store_fetch_info *fi, const struct store_stat *stats,
                          size_t nstats, int64_t *ret_id, struct hp_buf *err)
{
    return s->be->snapshot_insert(s, node_id, taken_at_ms, p, raw, raw_len, fi, stats, nstats,
                                  ret_id, err);
}

int store_snapshot_find_dump(struct store *s, int64_t node_id, const void *raw, size_t len,
                             int64_t *ret_id, int64_t *ret_taken_at_ms, struct hp_buf *err)
{
    return s->be->snapshot_find_dump(s, node_id, raw, len, ret_id, ret_taken_at_ms, err);
}

int store_snapshot_attempt_record(struct store *s, int64_t node_id, int64_t taken_at_ms,
                                  enum store_status status, const char *error,
                                  const void *raw, size_t raw_len,
                                  const struct store_fetch_info *fi,
                                  const struct store_stat *stats, size_t nstats,
                                  int64_t *ret_id, struct hp_buf *err)
{
    return s->be->snapshot_attempt_record(s, node_id, taken_at_ms, status, error, raw, raw_len,
                                          fi, stats, nstats, ret_id, err);
}

int store_snapshot_reindex(struct store *s, int64_t id, const struct profile *p,
                           struct hp_buf *err)
{
    return s->be->snapshot_reindex(s, id, p, err);
}

int store_snapshot_stat_set(struct store *s, int64_t id, const struct store_stat *stat,
                            struct hp_buf *err)
{
    return s->be->snapshot_stat_set(s, id, stat, err);
}

/* Engine-free: raw bytes, the caller's derivation, reindex. */
int store_snapshot_rederive(struct store *s, int64_t id, store_rederive_cb cb, void *ctx,
                            struct hp_buf *err)
{
    void *raw = NULL;
    size_t len = 0;
    struct profile *p = NULL;
    int r = store_snapshot_raw(s, id, &raw, &len, err);
    if (r == 0)
        r = cb(ctx, id, raw, len, &p, err);
    if (r == 0)
        r = store_snapshot_reindex(s, id, p, err);
    profile_free(p);
    free(raw);
    return r;
}

int store_snapshot_load(struct store *s, int64_t id, struct profile **ret, struct hp_buf *err)
{
    return s->be->snapshot_load(s, id, ret, err);
}

int store_snapshots_samples(struct store *s, const int64_t *ids, size_t n, store_samples_cb cb,
                            void *ctx, struct hp_buf *err)
{
    return s->be->snapshots_samples(s, ids, n, cb, ctx, err);
}

int store_snapshot_load_top(struct store *s, int64_t id, size_t max_stacks,
                            enum profile_value rank, struct profile **ret,
                            struct store_pruned *ret_pruned, struct hp_buf *err)
{
    return s->be->snapshot_load_top(s, id, max_stacks, rank, ret, ret_pruned, err);
}

int store_stacks_load(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                      unsigned flags, const struct store_stack_view *view,
                      struct profile **ret, struct hp_buf *err)
{
    return s->be->stacks_load(s, id, stack_ids, n, flags, view, ret, err);
}

int store_stacks_resolve(struct store *s, int64_t id, const int64_t *stack_ids, size_t n,
                         unsigned flags, const struct store_stack_view *view,
                         struct profile_resolved **ret, struct hp_buf *err)
{
    return s->be->stacks_resolve(s, id, stack_ids, n, flags, view, ret, err);
}

int store_view_current(struct store *s, int64_t node_id, struct hp_buf *err)
{
    return s->be->view_current(s, node_id, err);
}

int store_stack_view_get(struct store *s, int64_t node_id, struct store_stack_view *ret,
                         struct hp_buf *err)
{
    return s->be->stack_view_get(s, node_id, ret, err);
}

void store_stack_view_release(struct store_stack_view *v)
{
    if (v) {
        free(v->data);
        memset(v, 0, sizeof(*v));
    }
}

int store_snapshot_raw(struct store *s, int64_t id, void **ret_data, size_t *ret_len,
                       struct hp_buf *err)
{
    return s->be->snapshot_raw(s, id, ret_data, ret_len, err);
}

int store_snapshot_info(struct store *s, int64_t id, struct store_snapshot_info *ret,
                        struct hp_buf *err)
{
    return s->be->snapshot_info(s, id, ret, err);
}

int store_selector_resolve(struct store *s, const char *text, int64_t now_ms, int64_t *ret_id,
                           struct hp_buf *err)
{
    return s->be->selector_resolve(s, text, now_ms, ret_id, err);
}

int store_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms)
{
    return sqlstore_time_parse(text, now_ms, ret_ms);
}

const char *store_time_format(int64_t ms, char *out, size_t outsz)
{
    return sqlstore_time_format(ms, out, outsz);
}

int store_nodes_list(struct store *s, store_node_cb cb, void *ctx, struct hp_buf *err)
{
    return s->be->nodes_list(s, cb, ctx, err);
}

int store_snapshots_list(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                         bool with_failed, store_snapshot_cb cb, void *ctx, struct hp_buf *err)
{
    return s->be->snapshots_list(s, node_id, since_ms, until_ms, with_failed, cb, ctx, err);
}

int store_snapshots_ok(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                       store_snapshot_cb cb, void *ctx, struct hp_buf *err)
{
    return s->be->snapshots_ok(s, node_id, since_ms, until_ms, cb, ctx, err);
}

int store_series_node(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                      const char *stat_name, struct store_point **ret_points, size_t *ret_n,
                      struct hp_buf *err)
{
    return s->be->series_node(s, node_id, since_ms, until_ms, stat_name, ret_points, ret_n,
                              err);
}

int store_function_totals(struct store *s, int64_t snapshot_id, store_function_cb cb, void *ctx,
                          struct hp_buf *err)
{
    return s->be->function_totals(s, snapshot_id, cb, ctx, err);
}

int store_series_function(struct store *s, int64_t node_id, const char *function,
                          int64_t since_ms, int64_t until_ms,
                          struct store_function_point **ret_points, size_t *ret_n,
                          struct hp_buf *err)
{
    return s->be->series_function(s, node_id, function, since_ms, until_ms, ret_points, ret_n,
                                  err);
}

int store_functions_list(struct store *s, store_function_name_cb cb, void *ctx,
                         struct hp_buf *err)
{
    return s->be->functions_list(s, cb, ctx, err);
}

int store_series_functions(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                           const int64_t *fids, size_t nf, store_functions_cb cb, void *ctx,
                           struct hp_buf *err)
{
    return s->be->series_functions(s, node_id, since_ms, until_ms, fids, nf, cb, ctx, err);
}

int store_read_begin(struct store *s, struct hp_buf *err)
{
    return s->be->read_begin(s, err);
}

void store_read_end(struct store *s)
{
    s->be->read_end(s);
}

int store_snapshot_stats(struct store *s, int64_t snapshot_id, store_stat_cb cb, void *ctx,
                         struct hp_buf *err)
{
    return s->be->snapshot_stats(s, snapshot_id, cb, ctx, err);
}

int store_node_stats(struct store *s, int64_t node_id, int64_t since_ms, int64_t until_ms,
                     store_stat_want_cb want, void *want_ctx, store_node_stat_cb cb, void *ctx,
                     struct hp_buf *err)
{
    return s->be->node_stats(s, node_id, since_ms, until_ms, want, want_ctx, cb, ctx, err);
}

int store_sseries_spans(struct store *s, int64_t node_id, struct store_span **ret,
                        size_t *ret_n, struct hp_buf *err)
{
    return s->be->sseries_spans(s, node_id, ret, ret_n, err);
}

int store_sseries_get(struct store *s, int64_t node_id, int64_t first_id,
                      struct store_sseries *ret, struct hp_buf *err)
{
    return s->be->sseries_get(s, node_id, first_id, ret, err);
}

int store_retain(struct store *s, const struct store_retain_policy *pol, int64_t now_ms,
                 struct store_retain_result *ret, struct hp_buf *err)
{
    return s->be->retain(s, pol, now_ms, ret, err);
}

int store_symcache_get(struct store *s, const char *build_id, uint64_t address,
                       struct hp_arena *arena, struct profile_frame **ret_frames,
                       uint32_t *ret_n, struct hp_buf *err)
{
    return s->be->symcache_get(s, build_id, address, arena, ret_frames, ret_n, err);
}

int store_symcache_put(struct store *s, const char *build_id, uint64_t address,
                       const struct profile_frame *frames, uint32_t n, struct hp_buf *err)
{
    return s->be->symcache_put(s, build_id, address, frames, n, err);
}

int store_symfile_put(struct store *s, const struct store_symfile *f, const char *path,
                      struct hp_buf *err)
{
    return s->be->symfile_put(s, f, path, err);
}

int store_symfiles_list(struct store *s, int (*cb)(const struct store_symfile *f, void *ctx),
                        void *ctx, struct hp_buf *err)
{
    return s->be->symfiles_list(s, cb, ctx, err);
}

int store_symfile_export(struct store *s, const struct store_symfile *f, int fd,
                         struct hp_buf *err)
{
    return s->be->symfile_export(s, f, fd, err);
}

static int fleet_unsupported(struct store *s, struct hp_buf *err)
{
    hp_err_printf(err,
                  "%s: collectors share a fleet through PostgreSQL only (--db "
                  "postgresql://...); an SQLite file has one collector",
                  s->path);
    return HP_EUSAGE;
}

int store_fleet_heartbeat(struct store *s, const struct store_collector_row *me,
                          struct hp_buf *err)
{
    return s->be->fleet_heartbeat ? s->be->fleet_heartbeat(s, me, err)
                                  : fleet_unsupported(s, err);
}

int store_fleet_claim(struct store *s, const struct store_collector_row *me, int64_t round_key,
                      const char *const *names, size_t n, bool *mine, struct hp_buf *err)
{
    return s->be->fleet_claim ? s->be->fleet_claim(s, me, round_key, names, n, mine, err)
                              : fleet_unsupported(s, err);
}

int store_fleet_list(struct store *s, store_collector_cb cb, void *ctx, struct hp_buf *err)
{
    return s->be->fleet_list ? s->be->fleet_list(s, cb, ctx, err) : fleet_unsupported(s, err);
}

int store_fleet_leave(struct store *s, const struct store_collector_row *me, struct hp_buf *err)
{
    return s->be->fleet_leave ? s->be->fleet_leave(s, me, err) : fleet_unsupported(s, err);
}

int store_fleet_claim_owner(struct store *s, const char *node, int64_t round_key, char *out,
                            size_t outsz, struct hp_buf *err)
{
    return s->be->fleet_claim_owner
               ? s->be->fleet_claim_owner(s, node, round_key, out, outsz, err)
               : fleet_unsupported(s, err);
}
