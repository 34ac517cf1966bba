/* retain.c: retention, thinning and space reclamation.
 *
 * Policy: snapshots older than `retain_s` go; older than `thin_after_s`, each
 * node keeps one ok snapshot per UTC day (the day's last). Deleting a
 * snapshot deletes its function totals, statistics, and its sample set and
 * raw dump unless another snapshot shares them (identical dumps) or another
 * row was delta-compressed against them (keyframes stay while needed).
 * Stacks, locations, functions and files are shared dictionaries and stay:
 * a steady fleet adds few, and they are what makes new snapshots cheap.
 *
 * Work runs in batches, one transaction each, so the collector's writes and
 * readers are never held up for long. Freed pages are returned to the file
 * system with incremental vacuum (the database is created with
 * auto_vacuum=INCREMENTAL). */
#include "store/store-internal.h"

#include <stdio.h>
#include <stdlib.h>

#define RETAIN_BATCH 256

int store_blob_release(struct store *s, bool raw, int64_t id, struct hp_buf *err)
{
    int n = 0;
    while (id > 0) {
        sqlite3_stmt *st;
        int r = store_stmt(s, raw ? STMT_RAW_RELEASE : STMT_SS_RELEASE, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, id);
        if ((r = store_step_row(s, st, "releasing a stored blob", err)) < 0)
            return r;
        if (r == 0)
            break;
        n++;
        id = sqlite3_column_int64(st, 0); /* its base may now be free too */
        /* Finish the DELETE ... RETURNING statement before the next one. */
        while ((r = store_step_row(s, st, "releasing a stored blob", err)) == 1)
            ;
        if (r < 0)
            return r;
        sqlite3_reset(st);
    }
    return n;
}

static int snapshot_delete(struct store *s, int64_t id, int64_t *raw_deleted,
                           struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SNAP_DELETE, &st, err);
    if (r < 0)
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
    if ((r = store_stmt(s, STMT_FT_DELETE, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_done(s, st, "deleting function totals", err)) < 0)
        return r;
    if ((r = store_stmt(s, STMT_STATS_DELETE, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, id);
    if ((r = store_step_done(s, st, "deleting statistics", err)) < 0)
        return r;
    if ((r = store_blob_release(s, false, ss_id, err)) < 0)
        return r;
    if ((r = store_blob_release(s, true, raw_id, err)) < 0)
        return r;
    *raw_deleted += r;
    return 1;
}

/* Delete, batch by batch, the snapshots `select` returns for `before`. */
static int delete_selected(struct store *s, enum store_stmt_id select, int64_t before,
                           struct store_retain_result *res, struct hp_buf *err)
{
    int64_t ids[RETAIN_BATCH];
    for (;;) {
        int r;
        if ((r = store_tx_begin(s, err)) < 0)
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
        if ((r = store_tx_commit(s, err)) < 0)
            return r;
        if (n < RETAIN_BATCH)
            return 0;
        continue;
    fail:
        store_tx_rollback(s);
        return r;
    }
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
    if (pol->retain_s > 0 &&
        (r = delete_selected(s, STMT_RETAIN_OLD, now_ms - pol->retain_s * 1000, &res, err)) < 0)
        goto out;
    if (pol->thin_after_s > 0 &&
        (r = delete_selected(s, STMT_RETAIN_THIN, now_ms - pol->thin_after_s * 1000, &res,
                             err)) < 0)
        goto out;
    /* Keyframes the writer cached may be gone. */
    store_writer_reset(s);
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
    store_writer_reset(s);
    if (r == 0 && ret)
        *ret = res;
    return r;
}
