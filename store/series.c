/* Per-function series in spans (migrations/0006-function-series.sql).
 *
 * function_totals is keyed by snapshot: a trend of one function over a
 * year of hourly snapshots found its 8,760 rows by as many index seeks, on
 * as many pages. Here a node's ok snapshots are grouped, as they come, into
 * spans of STORE_SPAN_SNAPSHOTS; when a span fills, each function with a
 * row in any of its snapshots gets one function_series row holding all of
 * them, so the trend reads a row per function and span.
 *
 * Invariants, which the reader (read.c, store_series_functions) relies on:
 * - a closed span [first_id, last_id] of a node holds the function_totals
 *   rows of every ok snapshot of that node with an id in that range, as
 *   they were when it closed;
 * - so any change to such a snapshot's totals (reindex) or its deletion
 *   (retention) dissolves the span first (store_fseries_dissolve), and its
 *   snapshots read from function_totals again;
 * - a span whose snapshot was reindexed turns stale: its snapshots all
 *   still exist, so it closes again, from their new rows, when its last
 *   snapshot is reindexed (a node's history re-symbolized in order) or
 *   when the node's open span closes; a deletion drops the span;
 * - so a span's last snapshot exists while the span does, and a new
 *   snapshot's id (the largest id + 1) never falls inside it.
 * The rows are derived; function_totals stays the truth. */
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

/* function_series_spans.closed */
enum { SPAN_OPEN = 0, SPAN_CLOSED = 1, SPAN_STALE = 2 };

/* One row read from function_totals while a span closes. */
struct fs_row {
    int64_t function_id;
    struct store_fs_entry e;
};

static int fs_row_cmp(const void *a, const void *b)
{
    const struct fs_row *x = a, *y = b;
    if (x->function_id != y->function_id)
        return x->function_id < y->function_id ? -1 : 1;
    return (x->e.snapshot_id > y->e.snapshot_id) - (x->e.snapshot_id < y->e.snapshot_id);
}

/* Rows r[0..n) of one function, ascending snapshot ids >= first: a count,
 * then per row its id's step from the previous (the first from first) and
 * its totals' steps from the previous row's (zigzag): a function whose
 * totals hold still costs five bytes a snapshot. */
static void fs_pack(const struct fs_row *r, size_t n, int64_t first, struct store_pack *b)
{
    store_pack_u64(b, n);
    struct store_fs_entry prev = { .snapshot_id = first };
    for (size_t i = 0; i < n; i++) {
        const struct store_fs_entry *e = &r[i].e;
        store_pack_u64(b, (uint64_t)(e->snapshot_id - prev.snapshot_id));
        store_pack_i64(b, (int64_t)((uint64_t)e->flat_space - (uint64_t)prev.flat_space));
        store_pack_i64(b, (int64_t)((uint64_t)e->cum_space - (uint64_t)prev.cum_space));
        store_pack_i64(b, (int64_t)((uint64_t)e->flat_objects - (uint64_t)prev.flat_objects));
        store_pack_i64(b, (int64_t)((uint64_t)e->cum_objects - (uint64_t)prev.cum_objects));
        prev = *e;
    }
}

/* Close node_id's span [first, last]: pack its snapshots' rows per function. */
static int span_close(struct store *s, int64_t node_id, int64_t first, int64_t last,
                      struct hp_buf *err)
{
    sqlite3_stmt *st;
    int64_t *ids = NULL;
    size_t nids = 0, ids_cap = 0, nrows = 0, rows_cap = 0;
    struct fs_row *rows = NULL;
    int r = store_stmt(s, STMT_FS_SPAN_MEMBERS, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    sqlite3_bind_int64(st, 3, last);
    while ((r = store_step_row(s, st, "listing a span's snapshots", err)) == 1) {
        ids = hp_xgrow(ids, &ids_cap, nids + 1, sizeof(*ids));
        ids[nids++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    for (size_t k = 0; r == 0 && k < nids; k++) {
        if ((r = store_stmt(s, STMT_FT_BY_SNAP, &st, err)) < 0)
            break;
        sqlite3_bind_int64(st, 1, ids[k]);
        while ((r = store_step_row(s, st, "reading function totals", err)) == 1) {
            rows = hp_xgrow(rows, &rows_cap, nrows + 1, sizeof(*rows));
            rows[nrows++] = (struct fs_row){
                sqlite3_column_int64(st, 0),
                { ids[k], sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
                  sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4) }
            };
        }
        sqlite3_reset(st);
    }
    if (r == 0 && nrows)
        qsort(rows, nrows, sizeof(*rows), fs_row_cmp);
    struct store_pack b = { 0 };
    for (size_t a = 0, z; r == 0 && a < nrows; a = z) {
        for (z = a + 1; z < nrows && rows[z].function_id == rows[a].function_id; z++)
            ;
        b.len = 0;
        fs_pack(rows + a, z - a, first, &b);
        if ((r = store_stmt(s, STMT_FS_INSERT, &st, err)) < 0)
            break;
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, first);
        sqlite3_bind_int64(st, 3, rows[a].function_id);
        sqlite3_bind_blob(st, 4, b.data, (int)b.len, SQLITE_STATIC);
        r = store_step_done(s, st, "storing a function's series", err);
    }
    store_pack_release(&b);
    free(rows);
    free(ids);
    if (r < 0)
        return r;
    if ((r = store_stmt(s, STMT_FS_SPAN_SET, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    sqlite3_bind_int64(st, 3, last);
    sqlite3_bind_int64(st, 4, (int64_t)nids);
    sqlite3_bind_int64(st, 5, SPAN_CLOSED);
    return store_step_done(s, st, "closing a span", err);
}

/* node_id's span whose first snapshot is the greatest <= id (the newest
 * span when id is INT64_MAX). Returns 1 with it, 0 when there is none. */
static int span_at(struct store *s, int64_t node_id, int64_t id, int64_t *first, int64_t *last,
                   int64_t *n, int *state, struct hp_buf *err)
{
    sqlite3_stmt *st;
    *first = *last = *n = 0;
    *state = SPAN_OPEN;
    int r = store_stmt(s, STMT_FS_SPAN_AT, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, id);
    if ((r = store_step_row(s, st, "finding a span", err)) == 1) {
        *first = sqlite3_column_int64(st, 0);
        *last = sqlite3_column_int64(st, 1);
        *n = sqlite3_column_int64(st, 2);
        *state = (int)sqlite3_column_int64(st, 3);
    }
    sqlite3_reset(st);
    return r;
}

/* Close node_id's stale spans again (their snapshots were reindexed):
 * every snapshot of a stale span still exists (a deletion drops the span). */
static int spans_reclose(struct store *s, int64_t node_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    struct store_fspan *stale = NULL;
    size_t n = 0, cap = 0;
    int r = store_stmt(s, STMT_FS_SPANS_STALE, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    while ((r = store_step_row(s, st, "reading spans", err)) == 1) {
        stale = hp_xgrow(stale, &cap, n + 1, sizeof(*stale));
        stale[n++] = (struct store_fspan){ sqlite3_column_int64(st, 0),
                                           sqlite3_column_int64(st, 1) };
    }
    sqlite3_reset(st);
    for (size_t i = 0; r == 0 && i < n; i++)
        r = span_close(s, node_id, stale[i].first_id, stale[i].last_id, err);
    free(stale);
    return r;
}

int store_fseries_add(struct store *s, int64_t node_id, int64_t snap_id, struct hp_buf *err)
{
    int64_t first, last, n;
    int state;
    int r = span_at(s, node_id, INT64_MAX, &first, &last, &n, &state, err);
    if (r < 0)
        return r;
    sqlite3_stmt *st;
    if (r == 0 || state != SPAN_OPEN) { /* a new span opens with this snapshot */
        if ((r = store_stmt(s, STMT_FS_SPAN_OPEN, &st, err)) < 0)
            return r;
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, snap_id);
        return store_step_done(s, st, "opening a span", err);
    }
    if (n + 1 >= STORE_SPAN_SNAPSHOTS)
        return (r = span_close(s, node_id, first, snap_id, err)) < 0
                   ? r
                   : spans_reclose(s, node_id, err);
    if ((r = store_stmt(s, STMT_FS_SPAN_SET, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    sqlite3_bind_int64(st, 3, snap_id);
    sqlite3_bind_int64(st, 4, n + 1);
    sqlite3_bind_int64(st, 5, SPAN_OPEN);
    return store_step_done(s, st, "growing a span", err);
}

/* The node of snapshot snap_id and the span holding it: 1 with them, 0
 * when the snapshot or its span is not there, or (members_only) when the
 * snapshot holds no profile, so that no span counts it. */
static int span_of_snapshot(struct store *s, int64_t snap_id, bool members_only,
                            int64_t *node_id, int64_t *first, int64_t *last, int *state,
                            struct hp_buf *err)
{
    sqlite3_stmt *st;
    *node_id = *first = *last = 0;
    *state = SPAN_OPEN;
    int r = store_stmt(s, STMT_SNAP_GET_RAW, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, snap_id);
    if ((r = store_step_row(s, st, "finding a snapshot's node", err)) == 1) {
        *node_id = sqlite3_column_int64(st, 2);
        if (members_only && sqlite3_column_int64(st, 1) <= 0)
            r = 0; /* a failed attempt */
    }
    sqlite3_reset(st);
    int64_t n;
    if (r == 1)
        r = span_at(s, *node_id, snap_id, first, last, &n, state, err);
    return r == 1 && *last < snap_id ? 0 : r;
}

static int span_exec(struct store *s, enum store_stmt_id id, int64_t node_id, int64_t first,
                     struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, id, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    return store_step_done(s, st, "dissolving a span", err);
}

int store_fseries_dissolve(struct store *s, int64_t snap_id, bool drop, struct hp_buf *err)
{
    int64_t node_id, first, last;
    /* A failed attempt that goes was no member; one that a reindex turns
     * into a profile becomes one. */
    int state, r = span_of_snapshot(s, snap_id, drop, &node_id, &first, &last, &state, err);
    if (r <= 0 || state == SPAN_OPEN)
        return r; /* the open span reads function_totals when it closes */
    if (state == SPAN_CLOSED && (r = span_exec(s, STMT_FS_DELETE, node_id, first, err)) < 0)
        return r;
    if (drop) /* a snapshot of the span is gone */
        return span_exec(s, STMT_FS_SPAN_DELETE, node_id, first, err);
    return span_exec(s, STMT_FS_SPAN_STALE, node_id, first, err);
}

int store_fseries_reindexed(struct store *s, int64_t snap_id, struct hp_buf *err)
{
    int64_t node_id, first, last;
    int state, r = span_of_snapshot(s, snap_id, false, &node_id, &first, &last, &state, err);
    if (r <= 0 || state != SPAN_STALE || last != snap_id)
        return r < 0 ? r : 0;
    return span_close(s, node_id, first, last, err);
}

int store_fseries_spans(struct store *s, int64_t node_id, struct store_fspan **ret,
                        size_t *ret_n, struct hp_buf *err)
{
    sqlite3_stmt *st;
    *ret = NULL;
    *ret_n = 0;
    int r = store_stmt(s, STMT_FS_SPANS, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    size_t cap = 0;
    while ((r = store_step_row(s, st, "reading spans", err)) == 1) {
        *ret = hp_xgrow(*ret, &cap, *ret_n + 1, sizeof(**ret));
        (*ret)[(*ret_n)++] = (struct store_fspan){ sqlite3_column_int64(st, 0),
                                                   sqlite3_column_int64(st, 1) };
    }
    sqlite3_reset(st);
    if (r < 0) {
        free(*ret);
        *ret = NULL;
        *ret_n = 0;
    }
    return r;
}

int store_fseries_alive(struct store *s, int64_t node_id, const struct store_fspan *sp,
                        struct hp_buf *err)
{
    int64_t first, last, n;
    int state;
    int r = span_at(s, node_id, sp->first_id, &first, &last, &n, &state, err);
    return r <= 0 ? r : first == sp->first_id && last == sp->last_id && state == SPAN_CLOSED;
}

int store_fseries_get(struct store *s, int64_t node_id, const struct store_fspan *sp,
                      int64_t fid, struct store_fs_entry **e, size_t *cap, size_t *ret_n,
                      struct hp_buf *err)
{
    sqlite3_stmt *st;
    *ret_n = 0;
    int r = store_stmt(s, STMT_FS_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, sp->first_id);
    sqlite3_bind_int64(st, 3, fid);
    if ((r = store_step_row(s, st, "reading a function's series", err)) <= 0) {
        sqlite3_reset(st);
        return r;
    }
    struct store_unpack u = store_unpack_column(st, 0);
    uint64_t n = store_unpack_u64(&u);
    /* Each row takes at least five bytes. */
    bool bad = u.bad || n > (uint64_t)(u.end - u.p) / 5;
    if (!bad)
        *e = hp_xgrow(*e, cap, (size_t)n + 1, sizeof(**e));
    struct store_fs_entry prev = { .snapshot_id = sp->first_id };
    for (uint64_t i = 0; !bad && i < n; i++) {
        struct store_fs_entry *x = &(*e)[i];
        x->snapshot_id = (int64_t)((uint64_t)prev.snapshot_id + store_unpack_u64(&u));
        x->flat_space = (int64_t)((uint64_t)prev.flat_space + (uint64_t)store_unpack_i64(&u));
        x->cum_space = (int64_t)((uint64_t)prev.cum_space + (uint64_t)store_unpack_i64(&u));
        x->flat_objects =
            (int64_t)((uint64_t)prev.flat_objects + (uint64_t)store_unpack_i64(&u));
        x->cum_objects = (int64_t)((uint64_t)prev.cum_objects + (uint64_t)store_unpack_i64(&u));
        /* Ascending, inside the span. */
        bad = u.bad || x->snapshot_id < prev.snapshot_id || x->snapshot_id > sp->last_id ||
              (i > 0 && x->snapshot_id == prev.snapshot_id);
        prev = *x;
    }
    bad = bad || u.p != u.end;
    sqlite3_reset(st);
    if (bad) {
        hp_err_printf(err, "%s: node %lld: the packed series of function %lld over snapshots "
                      "%lld..%lld does not decode",
                      s->path, (long long)node_id, (long long)fid, (long long)sp->first_id,
                      (long long)sp->last_id);
        return HP_ECORRUPT;
    }
    *ret_n = (size_t)n;
    return 0;
}
