/* copy.c: store_copy, an SQLite store into a PostgreSQL one (query migrate).
 * Reads the source with SQLite directly and writes through pg.c's bulk
 * insert; compiled once, outside both engines' compilations (backend.h).
 *
 * Each batch (COPY_ROWS rows or COPY_BYTES bytes of values) is one
 * transaction on the destination, so what a crash leaves is a prefix of each
 * table in key order plus, at worst, nothing of the batch it was in: the
 * next run continues after the destination's highest key (>= for the
 * per-snapshot tables, whose key is not unique; ON CONFLICT DO NOTHING
 * absorbs the overlap). */
#include "store/store-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COPY_ROWS 2000
#define COPY_BYTES ((size_t)32 << 20)

struct copy_table {
    const char *name;
    const char *cols;
    int ncols;
    const char *key;   /* resume column; NULL: copy all (idempotent) */
    bool key_unique;   /* continue after (>) the highest key, else from it (>=) */
    bool identity;     /* an id column whose sequence must follow */
};

/* Dependency order: what a row refers to is copied before it. */
static const struct copy_table tables[] = {
    { "nodes", "id, name, kind, address, labels, created_at, updated_at", 7, "id", true, true },
    { "objects", "id, key, build_id, path", 4, "id", true, true },
    { "functions", "id, name", 2, "id", true, true },
    { "files", "id, path", 2, "id", true, true },
    { "stat_names", "id, name, unit", 3, "id", true, true },
    { "locations", "id, object_id, address, flags, frames_packed", 5, "id", true, true },
    /* Before the views that name generations (store/view.c): a view whose
     * generation is missing is only not used. */
    { "loc_gens", "object_id, gen", 2, "object_id", true, false },
    { "stacks", "id, hash, depth, locs_packed", 4, "id", true, true },
    { "raw_dumps", "id, hash, size, base_id, data", 5, "id", true, true },
    { "sample_sets", "id, size, base_id, data", 4, "id", true, true },
    { "snapshots",
      "id, node_id, taken_at, status, error, format, scaling, period, has_alloc, time_hint_ns,"
      " hint, inuse_objects, inuse_space, alloc_objects, alloc_space, nsamples, raw_id,"
      " raw_size, samples_id, source, prof_active, fetch_ms, parse_ms, symbolize_ms, store_ms",
      25, "id", true, true },
    { "function_totals",
      "snapshot_id, function_id, flat_space, cum_space, flat_objects, cum_objects", 6,
      "snapshot_id", false, false },
    { "function_totals_rest", "snapshot_id, size, base_id, data", 4, "snapshot_id", true,
      false },
    /* A function's series before the span that lists it (store/series.c):
     * a copy cut short leaves rows no span names, never a span short of
     * its rows. */
    { "function_series", "node_id, first_id, function_id, data", 4, "node_id", false, false },
    /* A stack series names its members; readers check them. */
    { "stack_series", "node_id, first_id, last_id, size, data", 5, "node_id", false, false },
    { "function_series_spans", "node_id, first_id, last_id, n, closed", 5, "node_id", false,
      false },
    /* A node's stack view (store/view.c): rows copied above, same ids. */
    { "stack_views", "node_id, first_id, last_id, size, data", 5, "node_id", true, false },
    { "node_stats", "snapshot_id, seq, stat_id, value", 4, "snapshot_id", false, false },
    { "symbol_cache", "build_id, address, frames_packed, created_at", 4, NULL, false, false },
    /* Chunks before the row that lists them (store/symfiles.c). */
    { "symbol_file_chunks", "build_id, seq, size, data", 4, NULL, false, false },
    { "symbol_files", "build_id, name, size, has_debug, nchunks, added_at", 6, NULL, false,
      false },
};

static int src_error(struct store *from, const char *what, struct hp_buf *err)
{
    hp_err_printf(err, "%s: %s: %s", from->path, what, sqlite3_errmsg(from->db));
    return HP_ESTORE;
}

static int src_count(struct store *from, const char *table, int64_t *ret, struct hp_buf *err)
{
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(from->db, sql, -1, &st, NULL) != SQLITE_OK)
        return src_error(from, "counting rows", err);
    int rc = sqlite3_step(st);
    *ret = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : src_error(from, "counting rows", err);
}

static void vals_release(struct store_copy_val *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].type == SQLITE_TEXT || v[i].type == SQLITE_BLOB)
            free((void *)v[i].p);
}

/* One batch into the destination, in its own transaction. */
static int flush(struct store *to, const struct copy_table *t, struct store_copy_val *vals,
                 size_t nrows, struct hp_buf *err)
{
    int r = pgstore_exec_sql(to, "BEGIN", err);
    if (r < 0)
        return r;
    pgstore_set_in_tx(to, true);
    if ((r = pgstore_copy_rows(to, t->name, t->cols, t->ncols, vals, nrows, err)) < 0 ||
        (r = pgstore_exec_sql(to, "COMMIT", err)) < 0) {
        (void)pgstore_exec_sql(to, "ROLLBACK", NULL);
        pgstore_set_in_tx(to, false);
        return r;
    }
    pgstore_set_in_tx(to, false);
    return 0;
}

static int copy_table(struct store *from, struct store *to, const struct copy_table *t,
                      struct store_copy_table *prog, store_copy_cb cb, void *ctx,
                      struct hp_buf *err)
{
    char sql[512];
    int64_t from_key = INT64_MIN;
    int r;
    if (t->key) {
        int64_t have;
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", t->name);
        if ((r = pgstore_query_int(to, sql, &have, err)) < 0)
            return r;
        if (have) {
            snprintf(sql, sizeof(sql), "SELECT max(%s) FROM %s", t->key, t->name);
            if ((r = pgstore_query_int(to, sql, &from_key, err)) < 0)
                return r;
        }
        snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE %s %s ?1 ORDER BY %s", t->cols,
                 t->name, t->key, t->key_unique ? ">" : ">=", t->key);
    } else {
        snprintf(sql, sizeof(sql), "SELECT %s FROM %s", t->cols, t->name);
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(from->db, sql, -1, &st, NULL) != SQLITE_OK)
        return src_error(from, "reading the source", err);
    if (t->key)
        sqlite3_bind_int64(st, 1, from_key);
    struct store_copy_val *vals = hp_xcalloc((size_t)COPY_ROWS * (size_t)t->ncols, sizeof(*vals));
    size_t nrows = 0, bytes = 0;
    int rc;
    r = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_copy_val *row = &vals[nrows * (size_t)t->ncols];
        for (int c = 0; c < t->ncols; c++) {
            struct store_copy_val *v = &row[c];
            v->type = sqlite3_column_type(st, c);
            switch (v->type) {
            case SQLITE_INTEGER:
                v->i = sqlite3_column_int64(st, c);
                break;
            case SQLITE_FLOAT:
                v->d = sqlite3_column_double(st, c);
                break;
            case SQLITE_TEXT: {
                const unsigned char *s = sqlite3_column_text(st, c);
                v->n = (size_t)sqlite3_column_bytes(st, c);
                char *copy = hp_xmalloc(v->n + 1);
                memcpy(copy, s ? (const char *)s : "", v->n);
                copy[v->n] = '\0';
                v->p = copy;
                break;
            }
            case SQLITE_BLOB: {
                v->n = (size_t)sqlite3_column_bytes(st, c);
                void *copy = hp_xmalloc(v->n ? v->n : 1);
                if (v->n)
                    memcpy(copy, sqlite3_column_blob(st, c), v->n);
                v->p = copy;
                break;
            }
            default:
                break;
            }
            bytes += v->n + 16;
        }
        nrows++;
        if (nrows == COPY_ROWS || bytes >= COPY_BYTES) {
            r = flush(to, t, vals, nrows, err);
            vals_release(vals, nrows * (size_t)t->ncols);
            memset(vals, 0, nrows * (size_t)t->ncols * sizeof(*vals));
            if (r < 0)
                break;
            prog->copied_rows += (int64_t)nrows;
            nrows = bytes = 0;
            if (cb)
                cb(prog, ctx);
        }
    }
    if (r == 0 && rc != SQLITE_DONE)
        r = src_error(from, "reading the source", err);
    if (r == 0 && nrows) {
        r = flush(to, t, vals, nrows, err);
        if (r == 0) {
            prog->copied_rows += (int64_t)nrows;
            if (cb)
                cb(prog, ctx);
        }
    }
    vals_release(vals, nrows * (size_t)t->ncols);
    free(vals);
    sqlite3_finalize(st);
    if (r == 0 && t->identity) {
        snprintf(sql, sizeof(sql),
                 "SELECT setval(pg_get_serial_sequence('%s', 'id'),"
                 " greatest((SELECT max(id) FROM %s), 1))",
                 t->name, t->name);
        int64_t ignored;
        r = pgstore_query_int(to, sql, &ignored, err);
    }
    return r;
}

int store_copy(struct store *from, struct store *to, store_copy_cb cb, void *ctx,
               struct hp_buf *err)
{
    if (from->be != &sqlstore_backend || to->be != &pgstore_backend || !to->writer) {
        hp_err_printf(err, "%s -> %s: copying goes from an SQLite store into a PostgreSQL one "
                           "opened for writing",
                      from->path, to->path);
        return HP_EUSAGE;
    }
    int r = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]) && r == 0; i++) {
        struct store_copy_table prog = { .table = tables[i].name };
        if ((r = src_count(from, tables[i].name, &prog.source_rows, err)) < 0 ||
            (r = copy_table(from, to, &tables[i], &prog, cb, ctx, err)) < 0)
            break;
        char sql[96];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", tables[i].name);
        if ((r = pgstore_query_int(to, sql, &prog.dest_rows, err)) < 0)
            break;
        prog.checked = true;
        if (cb)
            cb(&prog, ctx);
        if (prog.dest_rows != prog.source_rows) {
            hp_err_printf(err,
                          "%s: table %s has %lld rows, the source %s %lld: not the same store "
                          "(copy into an empty database, or the same source again)",
                          to->path, tables[i].name, (long long)prog.dest_rows, from->path,
                          (long long)prog.source_rows);
            r = HP_EMISMATCH;
        }
    }
    return r;
}
