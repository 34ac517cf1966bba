/* retain.c: retention, thinning and space reclamation.
 *
 * Policy: snapshots older than `retain_s` go; older than `thin_after_s`, each
 * node keeps one ok snapshot per UTC day (the day's last). Deleting a
 * snapshot deletes its function totals, statistics, and its sample set and
 * raw dump unless another snapshot shares them (identical dumps). A row that
 * others were delta-compressed against is not kept for them: each such row
 * is re-encoded against the deleted row's own base first (its chain gets a
 * link shorter), so every remaining dump reads back byte for byte; only a
 * keyframe that several rows were compressed against stays while needed.
 * Stacks, locations, functions, files, objects and symbol-cache entries are
 * shared dictionaries: they stay unless the policy asks to reclaim them
 * (pol->reclaim), then a mark and sweep deletes those that no remaining
 * snapshot references (one transaction; it reads every sample set).
 *
 * Work runs in batches, one transaction each, so the collector's writes and
 * readers are never held up for long. Freed pages are returned to the file
 * system with incremental vacuum (the database is created with
 * auto_vacuum=INCREMENTAL). */
#include "store/store-internal.h"

#include <stdio.h>
#include <stdlib.h>

#define RETAIN_BATCH 256

static const struct store_blob_table blob_tables[] = {
    [STORE_BLOB_RAW] = { STMT_RAW_GET, STMT_RAW_LINK, STMT_RAW_EXISTS, STMT_RAW_REFS,
                         STMT_RAW_CHILDREN, STMT_RAW_REBASE, STMT_RAW_DELETE, "raw dump",
                         true },
    [STORE_BLOB_SS] = { STMT_SS_GET, STMT_SS_LINK, STMT_SS_EXISTS, STMT_SS_REFS,
                        STMT_SS_CHILDREN, STMT_SS_REBASE, STMT_SS_DELETE, "sample set",
                        false },
    [STORE_BLOB_FTR] = { STMT_FTR_GET, STMT_FTR_LINK, STMT_FTR_EXISTS, STMT_FTR_REFS,
                         STMT_FTR_CHILDREN, STMT_FTR_REBASE, STMT_FTR_DELETE,
                         "packed function totals", false },
};

const struct store_blob_table *store_blob_table(enum store_blob_kind kind)
{
    return &blob_tables[kind];
}

/* Query `id` with a one-column statement; *ret gets column 0 of each row,
 * up to cap. Returns the number of rows or <0. */
static int ids_query(struct store *s, enum store_stmt_id q, int64_t id, int64_t *ret, int cap,
                     int *ret_total, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, q, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    int n = 0, total = 0;
    while ((r = store_step_row(s, st, "following a delta chain", err)) == 1) {
        if (n < cap)
            ret[n++] = sqlite3_column_int64(st, 0);
        total++;
    }
    sqlite3_reset(st);
    if (r < 0)
        return r;
    *ret_total = total;
    return n;
}

/* Re-encode row `child` (compressed against `id`) against `base_id`, the
 * base of `id` (0: standalone), so that `id` can go. base_bytes are the
 * decompressed bytes of base_id. */
static int blob_rebase(struct store *s, const struct store_blob_table *t, int64_t child,
                       int64_t base_id, const void *base_bytes, size_t base_len,
                       struct hp_buf *err)
{
    void *bytes = NULL, *z = NULL;
    size_t len, zlen;
    int r;
    if ((r = store_blob_load(s, t->get, child, &bytes, &len, err)) < 0)
        return r;
    if ((r = store_zstd_compress(s, bytes, len, base_bytes, base_len, t->text, &z, &zlen,
                                 err)) < 0)
        goto out;
    sqlite3_stmt *st;
    if ((r = store_stmt(s, t->rebase, &st, err)) < 0)
        goto out;
    sqlite3_bind_int64(st, 1, child);
    if (base_id > 0)
        sqlite3_bind_int64(st, 2, base_id);
    sqlite3_bind_blob(st, 3, z, (int)zlen, SQLITE_STATIC);
    r = store_step_done(s, st, "re-encoding a delta", err);
out:
    free(bytes);
    free(z);
    return r;
}

int store_blob_release(struct store *s, enum store_blob_kind kind, int64_t id, bool drop,
                       struct hp_buf *err)
{
    const struct store_blob_table *t = store_blob_table(kind);
    int n = 0;
    while (id > 0) {
        int64_t v[1];
        int total, r;
        /* Still some snapshot's: stays. */
        if (!drop && (r = ids_query(s, t->refs, id, v, 1, &total, err)) < 0)
            return r;
        if (!drop && r == 1 && v[0])
            break;
        if ((r = ids_query(s, t->link, id, v, 1, &total, err)) < 0)
            return r;
        if (r == 0)
            break; /* already gone */
        int64_t base_id = v[0];
        /* Rows compressed against this one move down to its base (the
         * chain gets one link shorter); then it can go. A keyframe that
         * several rows were compressed against stays while they need it:
         * re-encoding each standalone would cost a full dump apiece. */
        int64_t kids[16];
        if (base_id == 0 && !drop) {
            if ((r = ids_query(s, t->children, id, kids, 2, &total, err)) < 0)
                return r;
            if (total > 1)
                break;
        }
        drop = false;
        for (;;) {
            int nk = ids_query(s, t->children, id, kids, 16, &total, err);
            if (nk < 0)
                return nk;
            if (nk == 0)
                break;
            void *bb = NULL;
            size_t blen = 0;
            if (base_id > 0 && (r = store_blob_load(s, t->get, base_id, &bb, &blen, err)) < 0)
                return r;
            for (int i = 0; i < nk && r >= 0; i++)
                r = blob_rebase(s, t, kids[i], base_id, bb, blen, err);
            free(bb);
            if (r < 0)
                return r;
        }
        sqlite3_stmt *st;
        if ((r = store_stmt(s, t->del, &st, err)) < 0)
            return r;
        sqlite3_bind_int64(st, 1, id);
        if ((r = store_step_done(s, st, "deleting a stored blob", err)) < 0)
            return r;
        n++;
        id = base_id; /* its base may now be free too */
    }
    return n;
}

static int snapshot_delete(struct store *s, int64_t id, int64_t *raw_deleted,
                           struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_fseries_dissolve(s, id, true, err); /* while the snapshot names its node */
    if (r < 0 || (r = store_stmt(s, STMT_SNAP_DELETE, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_row(s, st, "deleting a snapshot", err)) < 0)
        return r;
    if (r == 0)
        return 0;
    int64_t raw_id = sqlite3_column_int64(st, 0), ss_id = sqlite3_column_int64(st, 1);
    while ((r = store_step_row(s, st, "deleting a snapshot", err)) == 1)
        ;
    if (r < 0)
        return r;
    sqlite3_reset(st);
    if ((r = store_function_totals_delete(s, id, false, err)) < 0)
        return r;
    if ((r = store_stmt(s, STMT_STATS_DELETE, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_done(s, st, "deleting statistics", err)) < 0)
        return r;
    if ((r = store_blob_release(s, STORE_BLOB_SS, ss_id, false, err)) < 0)
        return r;
    if ((r = store_blob_release(s, STORE_BLOB_RAW, raw_id, false, err)) < 0)
        return r;
    *raw_deleted += r;
    return 1;
}

/* Delete, batch by batch, the snapshots `select` returns for `before`. */
static int delete_selected(struct store *s, enum store_stmt_id select, int64_t before,
                           bool dry_run, struct store_retain_result *res, struct hp_buf *err)
{
    int64_t ids[RETAIN_BATCH];
    for (;;) {
        int r;
        /* A dry run is already inside the caller's one transaction. */
        if (!dry_run && (r = store_tx_begin(s, err)) < 0)
            return r;
        sqlite3_stmt *st;
        size_t n = 0;
        if ((r = store_stmt(s, select, &st, err)) < 0)
            goto fail;
        sqlite3_bind_int64(st, 1, before);
        sqlite3_bind_int64(st, 2, RETAIN_BATCH);
        while ((r = store_step_row(s, st, "choosing snapshots to delete", err)) == 1)
            if (n < RETAIN_BATCH)
                ids[n++] = sqlite3_column_int64(st, 0);
        if (r < 0)
            goto fail;
        sqlite3_reset(st);
        for (size_t i = 0; i < n; i++) {
            if ((r = snapshot_delete(s, ids[i], &res->raw_deleted, err)) < 0)
                goto fail;
            res->snapshots_deleted += r;
        }
        if (!dry_run && (r = store_tx_commit(s, err)) < 0)
            return r;
        if (n < RETAIN_BATCH)
            return 0;
        continue;
    fail:
        if (!dry_run)
            store_tx_rollback(s);
        return r;
    }
}

/* ---- reclaiming the shared dictionaries (mark and sweep) ------------------ */

enum keep_kind { KEEP_STACK = 1, KEEP_LOC, KEEP_FUNC, KEEP_FILE, KEEP_OBJECT };

static void mark(struct hp_map64 *m, int64_t id)
{
    uint32_t old;
    if (id > 0)
        (void)hp_map64_put(m, (uint64_t)id, 1, &old);
}

/* Copy the marked ids into temp.keep under `kind`. */
static int keep_insert(struct store *s, const struct hp_map64 *m, enum keep_kind kind,
                       struct hp_buf *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO temp.keep(kind, id) VALUES (?1, ?2)",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "marking rows to keep", err);
    int r = 0;
    for (size_t j = 0; j < m->cap && r == 0; j++) {
        if (m->slots[j].val == UINT32_MAX)
            continue;
        sqlite3_bind_int(st, 1, kind);
        sqlite3_bind_int64(st, 2, (int64_t)m->slots[j].key);
        r = store_step_done(s, st, "marking rows to keep", err);
    }
    sqlite3_finalize(st);
    return r;
}

/* Run a DELETE; *ret_n += the rows it deleted. */
static int sweep(struct store *s, const char *sql, int64_t *ret_n, struct hp_buf *err)
{
    int r = store_exec(s, sql, err);
    if (r == 0)
        *ret_n += sqlite3_changes(s->db);
    return r;
}

/* Mark the stacks and objects of every sample set some snapshot holds. Rows
 * are read in id order; a row's decompressed bytes are kept until the row
 * compressed against it comes (chains are mostly linear), else the chain
 * is loaded. A row no snapshot holds any more (a keyframe kept as the base
 * of several kept rows: store_blob_release) is decompressed for its
 * children but marks nothing: its stacks are bytes of a dictionary then,
 * not a profile's, and the kept rows name their own. */
static int mark_sample_sets(struct store *s, struct hp_map64 *stacks, struct hp_map64 *objects,
                            struct hp_buf *err)
{
    struct prev {
        int64_t id;
        void *data;
        size_t len;
    } *prev = NULL;
    size_t nprev = 0, cap = 0;
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SS_ALL, &st, err);
    while (r >= 0 && (r = store_step_row(s, st, "reading sample sets", err)) == 1) {
        int64_t id = sqlite3_column_int64(st, 0), size = sqlite3_column_int64(st, 1);
        int64_t base_id = sqlite3_column_int64(st, 2);
        const void *z = sqlite3_column_blob(st, 3);
        size_t zlen = (size_t)sqlite3_column_bytes(st, 3);
        void *out = NULL;
        size_t i = 0;
        while (i < nprev && prev[i].id != base_id)
            i++;
        if (base_id == 0 || i < nprev) {
            if (size < 0) {
                hp_err_printf(err, "%s: sample set %lld has a bad header", s->path,
                              (long long)id);
                r = HP_ECORRUPT;
                break;
            }
            r = store_zstd_decompress(s, z, zlen, base_id ? prev[i].data : NULL,
                                      base_id ? prev[i].len : 0, (size_t)size, &out, err);
            if (i < nprev) { /* the base has had its successor */
                free(prev[i].data);
                prev[i] = prev[--nprev];
            }
        } else {
            size_t len; /* a second child of a base: load its chain */
            r = store_blob_load(s, STMT_SS_GET, id, &out, &len, err);
        }
        if (r < 0)
            break;
        if (sqlite3_column_int(st, 4))
            r = store_sample_set_refs(s, id, out, (size_t)size, stacks, objects, err);
        if (r < 0) {
            free(out);
            break;
        }
        prev = hp_xgrow(prev, &cap, nprev + 1, sizeof(*prev));
        prev[nprev++] = (struct prev){ id, out, (size_t)size };
    }
    if (r >= 0)
        r = 0;
    for (size_t i = 0; i < nprev; i++)
        free(prev[i].data);
    free(prev);
    return r;
}

static int reclaim(struct store *s, struct store_retain_result *res, struct hp_buf *err)
{
    struct hp_map64 stacks, objects, locs, funcs, files;
    hp_map64_init(&stacks);
    hp_map64_init(&objects);
    hp_map64_init(&locs);
    hp_map64_init(&funcs);
    hp_map64_init(&files);
    sqlite3_stmt *st;
    int r;
    if ((r = store_tx_begin(s, err)) < 0)
        goto out;
    if ((r = store_stmt(s, STMT_KEEP_CREATE, &st, err)) < 0 ||
        (r = store_step_done(s, st, "creating the mark table", err)) < 0 ||
        (r = store_exec(s, "DELETE FROM temp.keep", err)) < 0 ||
        (r = mark_sample_sets(s, &stacks, &objects, err)) < 0)
        goto fail;
    /* Stacks in use name their locations. */
    if ((r = store_stmt(s, STMT_STACKS_ALL, &st, err)) < 0)
        goto fail;
    while ((r = store_step_row(s, st, "reading stacks", err)) == 1) {
        uint32_t one;
        if (!hp_map64_get(&stacks, (uint64_t)sqlite3_column_int64(st, 0), &one))
            continue;
        struct store_unpack u = store_unpack_column(st, 1);
        uint64_t n = store_unpack_u64(&u);
        for (uint64_t i = 0; i < n && !u.bad; i++)
            mark(&locs, (int64_t)store_unpack_u64(&u));
    }
    if (r < 0)
        goto fail;
    /* Locations in use name their objects, functions and files. */
    if ((r = store_stmt(s, STMT_LOCS_ALL, &st, err)) < 0)
        goto fail;
    while ((r = store_step_row(s, st, "reading locations", err)) == 1) {
        uint32_t one;
        if (!hp_map64_get(&locs, (uint64_t)sqlite3_column_int64(st, 0), &one))
            continue;
        int64_t obj = sqlite3_column_int64(st, 1);
        if (obj == -1) /* named location: the address is a function id */
            mark(&funcs, sqlite3_column_int64(st, 2));
        mark(&objects, obj);
        struct store_unpack u = store_unpack_column(st, 3);
        uint64_t n = store_unpack_u64(&u);
        for (uint64_t i = 0; i < n && !u.bad; i++) {
            mark(&funcs, (int64_t)store_unpack_u64(&u));
            mark(&files, (int64_t)store_unpack_u64(&u));
            (void)store_unpack_u64(&u);
        }
    }
    if (r < 0)
        goto fail;
    if ((r = keep_insert(s, &stacks, KEEP_STACK, err)) < 0 ||
        (r = keep_insert(s, &locs, KEEP_LOC, err)) < 0 ||
        (r = keep_insert(s, &funcs, KEEP_FUNC, err)) < 0 ||
        (r = keep_insert(s, &files, KEEP_FILE, err)) < 0 ||
        (r = keep_insert(s, &objects, KEEP_OBJECT, err)) < 0)
        goto fail;
    /* kind numbers: enum keep_kind */
    if ((r = sweep(s, "DELETE FROM stacks WHERE id NOT IN"
                      " (SELECT id FROM temp.keep WHERE kind = 1)",
                   &res->stacks_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM locations WHERE id NOT IN"
                      " (SELECT id FROM temp.keep WHERE kind = 2)",
                   &res->locations_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM functions WHERE id NOT IN"
                      " (SELECT id FROM temp.keep WHERE kind = 3)"
                      " AND id NOT IN (SELECT function_id FROM function_totals)"
                      " AND id NOT IN (SELECT function_id FROM function_series)",
                   &res->names_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM files WHERE id NOT IN"
                      " (SELECT id FROM temp.keep WHERE kind = 4)",
                   &res->names_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM stat_names WHERE id NOT IN (SELECT stat_id FROM node_stats)",
                   &res->names_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM objects WHERE id NOT IN"
                      " (SELECT id FROM temp.keep WHERE kind = 5)",
                   &res->objects_deleted, err)) < 0 ||
        (r = sweep(s, "DELETE FROM symbol_cache WHERE build_id NOT IN"
                      " (SELECT build_id FROM objects WHERE build_id IS NOT NULL)",
                   &res->symbols_deleted, err)) < 0 ||
        (r = store_exec(s, "DELETE FROM temp.keep", err)) < 0)
        goto fail;
    r = store_tx_commit(s, err);
    goto out;
fail:
    store_tx_rollback(s);
out:
    hp_map64_release(&stacks);
    hp_map64_release(&objects);
    hp_map64_release(&locs);
    hp_map64_release(&funcs);
    hp_map64_release(&files);
    return r;
}

static int freelist(struct store *s, int64_t *ret, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA freelist_count", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "reading the free list", err);
    rc = sqlite3_step(st);
    *ret = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : store_sqlite_error(s, rc, "reading the free list", err);
}

int store_retain(struct store *s, const struct store_retain_policy *pol, int64_t now_ms,
                 struct store_retain_result *ret, struct hp_buf *err)
{
    struct store_retain_result res = { 0 };
    int r;
    if ((r = store_require_writer(s, "retention", err)) < 0)
        return r;
    bool dry = pol->dry_run;
    if (dry && (r = store_tx_begin(s, err)) < 0)
        return r;
    if (pol->retain_s > 0 && (r = delete_selected(s, STMT_RETAIN_OLD,
                                                  now_ms - pol->retain_s * 1000, dry, &res,
                                                  err)) < 0)
        goto out;
    if (pol->thin_after_s > 0 && (r = delete_selected(s, STMT_RETAIN_THIN,
                                                      now_ms - pol->thin_after_s * 1000, dry,
                                                      &res, err)) < 0)
        goto out;
    if (dry) {
        store_tx_rollback(s);
        dry = false;
        goto out;
    }
    /* Rows the writer cached may be gone. */
    store_writer_reset(s);
    if ((r = store_spans_fill(s, pol->pack_budget_ms, pol->pack_max, &res.spans_closed,
                              &res.spans_pack_left, &res.views_written, &res.views_left,
                              err)) < 0)
        goto out;
    store_writer_reset(s);
    if (pol->reclaim && (r = reclaim(s, &res, err)) < 0)
        goto out;
    int64_t before, after;
    if ((r = freelist(s, &before, err)) < 0)
        goto out;
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%lld)",
             (long long)(pol->vacuum_pages > 0 ? pol->vacuum_pages : 0));
    if ((r = store_exec(s, sql, err)) < 0 || (r = freelist(s, &after, err)) < 0)
        goto out;
    res.pages_freed = before - after;
out:
    if (dry)
        store_tx_rollback(s);
    store_writer_reset(s);
    if (r == 0 && ret)
        *ret = res;
    return r;
}
