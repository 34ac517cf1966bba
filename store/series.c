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

static int ssb_cb(const struct store_samples *ss, void *ctx)
{
    store_ssb_add(ctx, ss);
    return 0;
}

/* Node node_id's (first_id, last_id) rows of statement `list` (?1 the
 * node; with a range, first <= last, ?2 and ?3 its ends) into *ret
 * (free()), in its order; on error none. */
static int spans_query(struct store *s, enum store_stmt_id list, int64_t node_id, int64_t first,
                       int64_t last, struct store_span **ret, size_t *ret_n, struct hp_buf *err)
{
    sqlite3_stmt *st;
    size_t cap = 0;
    *ret = NULL;
    *ret_n = 0;
    int r = store_stmt(s, list, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    if (first <= last) {
        sqlite3_bind_int64(st, 2, first);
        sqlite3_bind_int64(st, 3, last);
    }
    while ((r = store_step_row(s, st, "reading spans", err)) == 1) {
        *ret = hp_xgrow(*ret, &cap, *ret_n + 1, sizeof(**ret));
        (*ret)[(*ret_n)++] = (struct store_span){ sqlite3_column_int64(st, 0),
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

static int spans_list(struct store *s, enum store_stmt_id list, int64_t node_id,
                      struct store_span **ret, size_t *ret_n, struct hp_buf *err)
{
    return spans_query(s, list, node_id, 1, 0, ret, ret_n, err);
}

/* Row `first` of node_id, replayed into b when its members are exactly
 * ids[0..n)'s first ones: 1 with *used of them, 0 when it does not serve
 * (it does not decode, or holds other members). */
static int row_replay(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                      struct store_ssb *b, size_t *used, struct hp_buf *err)
{
    struct store_sseries ss;
    struct hp_buf e = HP_BUF_INIT(0);
    int r = store_sseries_get(s, node_id, ids[0], &ss, &e);
    if (r == HP_ECORRUPT || r == HP_ENOTFOUND)
        r = 0; /* its snapshots are read from their sample sets */
    else if (r < 0)
        hp_err_printf(err, "%.*s", (int)e.len, e.data ? e.data : "");
    else {
        size_t m = 0;
        bool same = true;
        for (size_t c = 0; c < ss.nchunks && same; c++)
            for (size_t k = 0; k < ss.chunks[c].nmembers && same; k++, m++)
                same = m < n && ss.chunks[c].members[k].snapshot_id == ids[m];
        if (same && m > 0) {
            for (size_t c = 0; c < ss.nchunks; c++)
                store_ssb_add_chunk(b, &ss.chunks[c]);
            *used = m;
            s->counts.sseries_rows_replayed++;
            r = 1;
        }
        store_sseries_release(&ss);
    }
    hp_buf_release(&e);
    return r;
}

/* Feed b the samples of ids[0..n), in order: the members of a stored row
 * that holds exactly the next of them (a group of the span being closed)
 * replayed from it, the others as the writer built them (the group just
 * completed, the span's last group) or read from their sample sets.
 * Closing a span read 128 sample sets of which its groups held 96 already:
 * 2.6 ms a snapshot of a 20k-stack node's ingest. (A builder of the whole
 * span fed next to the group's, taken at the close instead of replaying
 * the groups' rows, saved as many instructions at the close as it added
 * to every snapshot: 2.3 M.) */
static int sseries_feed(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                        struct store_ssb *b, struct hp_buf *err)
{
    struct store_span *rows;
    size_t nrows, j = 0;
    /* the node's rows that start among them */
    int r = spans_query(s, STMT_SS_SERIES_SPANS_IN, node_id, ids[0], ids[n - 1], &rows, &nrows,
                        err);
    for (size_t k = 0, z; r == 0 && k < n; k = z) {
        while (j < nrows && rows[j].first_id < ids[k])
            j++;
        size_t used = 0;
        if (j < nrows && rows[j].first_id == ids[k] &&
            (r = row_replay(s, node_id, ids + k, n - k, b, &used, err)) != 0) {
            z = k + used;
            r = r < 0 ? r : 0;
            continue;
        }
        /* Up to where the next row begins. */
        for (z = k + 1; z < n; z++) {
            while (j < nrows && rows[j].first_id < ids[z])
                j++;
            if (j < nrows && rows[j].first_id == ids[z])
                break;
        }
        /* Built as the writer stored them (the group just completed), or
         * from their sample sets. */
        struct store_sseries built;
        if (store_writer_group_take(s, node_id, ids + k, z - k, &built)) {
            for (size_t c = 0; c < built.nchunks; c++)
                store_ssb_add_chunk(b, &built.chunks[c]);
            store_sseries_release(&built);
            s->counts.sseries_groups_kept++;
            continue;
        }
        r = store_snapshots_samples(s, ids + k, z - k, ssb_cb, b, err);
        s->counts.sseries_sets_read += z - k;
    }
    free(rows);
    return r;
}

/* The stack series (sseries.c) of snapshots ids[0..n) (a group of a
 * span's members, or a closed span's), in place of the node's rows that
 * start among them: 1, or 0 when a member's sample set is missing or
 * damaged, which writes nothing and keeps those rows (still true for
 * their own members: a span whose last group cannot be built keeps its
 * first three); readers read the other sample sets, and say what is
 * wrong. The series is derived, and an insert must not fail for it. */
static int sseries_write(struct store *s, int64_t node_id, const int64_t *ids, size_t nids,
                         struct hp_buf *err)
{
    sqlite3_stmt *st;
    struct store_sseries ss;
    struct store_ssb *b = store_ssb_new(&ss);
    struct hp_buf e = HP_BUF_INIT(0);
    int r = sseries_feed(s, node_id, ids, nids, b, &e);
    store_ssb_finish(b);
    if (r == HP_ENOTFOUND || r == HP_ECORRUPT)
        r = 0; /* no series: the sample sets are read (and blamed) instead */
    else if (r < 0)
        hp_err_printf(err, "%.*s", (int)e.len, e.data ? e.data : "");
    else
        r = 1;
    hp_buf_release(&e);
    int built = r;
    if (built > 0 && (r = store_stmt(s, STMT_SS_SERIES_DELETE_IN, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, ids[0]);
        sqlite3_bind_int64(st, 3, ids[nids - 1]);
        r = store_step_done(s, st, "replacing a stack series", err);
    }
    if (r < 0 || built <= 0) {
        store_sseries_release(&ss);
        return r < 0 ? r : 0;
    }
    struct store_pack pk = { 0 };
    store_sseries_pack(&ss, &pk);
    store_sseries_release(&ss);
    void *z = NULL;
    size_t zlen = 0;
    if ((r = store_zstd_compress_hot(s, pk.data, pk.len, &z, &zlen, err)) == 0 &&
        (r = store_stmt(s, STMT_SS_SERIES_INSERT, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, ids[0]);
        sqlite3_bind_int64(st, 3, ids[nids - 1]);
        sqlite3_bind_int64(st, 4, (int64_t)pk.len);
        sqlite3_bind_blob(st, 5, z, (int)zlen, SQLITE_STATIC);
        r = store_step_done(s, st, "storing a stack series", err);
    }
    free(z);
    store_pack_release(&pk);
    return r < 0 ? r : 1;
}

/* The members of node_id's span [first, last], ascending. */
static int span_members(struct store *s, int64_t node_id, int64_t first, int64_t last,
                        int64_t **ret, size_t *ret_n, struct hp_buf *err)
{
    sqlite3_stmt *st;
    size_t cap = 0;
    *ret = NULL;
    *ret_n = 0;
    int r = store_stmt(s, STMT_FS_SPAN_MEMBERS, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    sqlite3_bind_int64(st, 3, last);
    while ((r = store_step_row(s, st, "listing a span's snapshots", err)) == 1) {
        *ret = hp_xgrow(*ret, &cap, *ret_n + 1, sizeof(**ret));
        (*ret)[(*ret_n)++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    return r;
}

/* 1 when node_id has a stack series row for exactly [first, last]. */
static int sseries_has(struct store *s, int64_t node_id, int64_t first, int64_t last,
                       struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_SS_SERIES_HAS, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    r = store_step_row(s, st, "finding a stack series", err);
    bool have = r == 1 && sqlite3_column_int64(st, 0) == last;
    sqlite3_reset(st);
    return r < 0 ? r : have;
}

/* Stack series rows for the open span's members ids[0..n), in groups of
 * STORE_SSERIES_SNAPSHOTS from its first: every complete group, each
 * unless a row for exactly that group is there (a row goes when one of
 * its snapshots changes). */
static int sseries_groups(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                          struct hp_buf *err)
{
    int r = 0;
    for (size_t a = 0; r == 0 && a + STORE_SSERIES_SNAPSHOTS <= n;
         a += STORE_SSERIES_SNAPSHOTS) {
        const int64_t *g = ids + a;
        if ((r = sseries_has(s, node_id, g[0], g[STORE_SSERIES_SNAPSHOTS - 1], err)) == 0)
            r = sseries_write(s, node_id, g, STORE_SSERIES_SNAPSHOTS, err);
        r = r < 0 ? r : 0;
    }
    return r;
}

/* A closed span's stack series: one row for all its members ids[0..n),
 * in place of its groups' rows (replayed from them, sseries_feed), unless
 * a row for exactly the span is there (0); 1 when it wrote one. A reader's
 * work goes with the rows it reads: a stack that holds still over the span
 * is one run, not one a group, and its slot is read once (leaks bench, 100
 * nodes x 720 h: rows of 32 snapshots 1.53 s of CPU, of 128 1.33 s). */
static int sseries_span(struct store *s, int64_t node_id, const int64_t *ids, size_t n,
                        struct hp_buf *err)
{
    int r = n ? sseries_has(s, node_id, ids[0], ids[n - 1], err) : 1;
    if (r != 0)
        return r < 0 ? r : 0;
    return sseries_write(s, node_id, ids, n, err);
}

/* Node node_id's stack view (view.c) written again: the rows resolving
 * the stacks of its newest STORE_VIEW_SPANS closed spans, from their
 * stack series rows (a span without one adds nothing: its stacks are
 * fetched, as before views). No view when a row is missing. */
static int view_write(struct store *s, int64_t node_id, struct hp_buf *err)
{
    sqlite3_stmt *st;
    struct store_span *sp;
    size_t nsp, n = 0, cap = 0;
    int64_t *ids = NULL, first = 0, last = 0;
    int r = spans_list(s, STMT_FS_SPANS, node_id, &sp, &nsp, err);
    for (size_t i = nsp > STORE_VIEW_SPANS ? nsp - STORE_VIEW_SPANS : 0; r == 0 && i < nsp; i++) {
        struct store_sseries ss;
        struct hp_buf e = HP_BUF_INIT(0);
        int g = store_sseries_get(s, node_id, sp[i].first_id, &ss, &e);
        if (g < 0 && g != HP_ENOTFOUND && g != HP_ECORRUPT)
            hp_err_printf(err, "%.*s", (int)e.len, e.data ? e.data : "");
        hp_buf_release(&e);
        if (g == HP_ENOTFOUND || g == HP_ECORRUPT)
            continue; /* no series there: its stacks are fetched */
        if (g < 0) {
            r = g;
            break;
        }
        if (!first)
            first = sp[i].first_id;
        last = sp[i].last_id;
        for (size_t c = 0; c < ss.nchunks; c++) {
            ids = hp_xgrow(ids, &cap, n + ss.chunks[c].nslots + 1, sizeof(*ids));
            for (size_t k = 0; k < ss.chunks[c].nslots; k++)
                ids[n++] = ss.chunks[c].slots[k].stack;
        }
        store_sseries_release(&ss);
    }
    free(sp);
    if (r == 0 && n) {
        /* ~120k ids for a 20k-stack node: a radix sort, where qsort's
         * comparator calls were 7% of a span close */
        struct hp_sort_item *v = hp_xmalloc(n * sizeof(*v));
        for (size_t k = 0; k < n; k++)
            v[k] = (struct hp_sort_item){ (uint64_t)ids[k], 0 };
        hp_radix_sort(v, n);
        size_t m = 1;
        ids[0] = (int64_t)v[0].key;
        for (size_t k = 1; k < n; k++)
            if (v[k].key != v[k - 1].key)
                ids[m++] = (int64_t)v[k].key;
        n = m;
        free(v);
    }
    struct store_pack pk = { 0 };
    void *z = NULL;
    size_t zlen = 0;
    int built = r == 0 && n ? store_view_build(s, ids, n, &pk, err) : r;
    free(ids);
    /* Compressed: a 20k-stack node's view is 3.7 MB, 1.4 MB so (it is one
     * a node, but the steady node's bytes per snapshot went 1.73 -> 2.05%
     * of its raw dump with it raw); with plain literals (store_zstd_compress_hot),
     * decoded faster for a few more bytes. */
    if (built > 0 && (r = store_zstd_compress_hot(s, pk.data, pk.len, &z, &zlen, err)) < 0)
        built = r;
    if (built > 0 && (r = store_stmt(s, STMT_VIEW_PUT, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, node_id);
        sqlite3_bind_int64(st, 2, first);
        sqlite3_bind_int64(st, 3, last);
        sqlite3_bind_int64(st, 4, (int64_t)pk.len);
        sqlite3_bind_blob(st, 5, z, (int)zlen, SQLITE_STATIC);
        r = store_step_done(s, st, "storing a stack view", err);
    } else if (built == 0 && (r = store_stmt(s, STMT_VIEW_DROP, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, node_id);
        r = store_step_done(s, st, "dropping a stack view", err);
    } else if (built < 0) {
        r = built;
    }
    store_pack_release(&pk);
    free(z);
    return r;
}

/* Close node_id's span [first, last]: pack its snapshots' rows per function. */
static int span_close(struct store *s, int64_t node_id, int64_t first, int64_t last,
                      struct hp_buf *err)
{
    sqlite3_stmt *st;
    int64_t *ids;
    size_t nids, nrows = 0, rows_cap = 0;
    struct fs_row *rows = NULL;
    int r = span_members(s, node_id, first, last, &ids, &nids, err);
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
    if (r == 0 && (r = sseries_span(s, node_id, ids, nids, err)) > 0)
        r = 0;
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
    if ((r = store_step_done(s, st, "closing a span", err)) < 0)
        return r;
    return view_write(s, node_id, err);
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
    struct store_span *stale;
    size_t n;
    int r = spans_list(s, STMT_FS_SPANS_STALE, node_id, &stale, &n, err);
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
    if (n + 1 >= STORE_SPAN_SNAPSHOTS) {
        r = span_close(s, node_id, first, snap_id, err);
        store_writer_group_drop(s, node_id); /* taken, or not what it held */
        return r < 0 ? r : spans_reclose(s, node_id, err);
    }
    if ((r = store_stmt(s, STMT_FS_SPAN_SET, &st, err)) < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first);
    sqlite3_bind_int64(st, 3, snap_id);
    sqlite3_bind_int64(st, 4, n + 1);
    sqlite3_bind_int64(st, 5, SPAN_OPEN);
    if ((r = store_step_done(s, st, "growing a span", err)) < 0 ||
        (n + 1) % STORE_SSERIES_SNAPSHOTS != 0)
        return r;
    /* A group of the open span is complete: its stack series. */
    int64_t *ids;
    size_t nids;
    if ((r = span_members(s, node_id, first, snap_id, &ids, &nids, err)) == 0)
        r = sseries_groups(s, node_id, ids, nids, err);
    free(ids);
    store_writer_group_drop(s, node_id); /* taken, or not what it held */
    return r;
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
    /* A member changes (re-derived) or goes: what the writer built of the
     * open group's samples may be of it. */
    store_writer_group_drop(s, 0);
    /* A failed attempt that goes was no member; one that a reindex turns
     * into a profile becomes one. */
    int state, r = span_of_snapshot(s, snap_id, drop, &node_id, &first, &last, &state, err);
    /* The node's stack view copied its stacks' rows, which need not
     * outlive it now: the view goes (the next span close writes one). */
    if (r >= 0 && node_id > 0) {
        sqlite3_stmt *st;
        int v = store_stmt(s, STMT_VIEW_DROP_AT, &st, err);
        if (v == 0) {
            sqlite3_bind_int64(st, 1, node_id);
            sqlite3_bind_int64(st, 2, snap_id);
            v = store_step_done(s, st, "dropping a stack view", err);
        }
        if (v < 0)
            return v;
    }
    /* Its samples change (reindex) or go: the stack series row holding
     * them goes, in any span (the others' rows stay true). */
    if (r > 0 && (r = span_exec(s, STMT_SS_SERIES_DROP_AT, node_id, snap_id, err)) == 0)
        r = 1;
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

int store_fseries_spans(struct store *s, int64_t node_id, struct store_span **ret,
                        size_t *ret_n, struct hp_buf *err)
{
    return spans_list(s, STMT_FS_SPANS, node_id, ret, ret_n, err);
}

int store_fseries_alive(struct store *s, int64_t node_id, const struct store_span *sp,
                        struct hp_buf *err)
{
    int64_t first, last, n;
    int state;
    int r = span_at(s, node_id, sp->first_id, &first, &last, &n, &state, err);
    return r <= 0 ? r : first == sp->first_id && last == sp->last_id && state == SPAN_CLOSED;
}

int store_fseries_get(struct store *s, int64_t node_id, const struct store_span *sp,
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

int store_sseries_spans(struct store *s, int64_t node_id, struct store_span **ret,
                        size_t *ret_n, struct hp_buf *err)
{
    return spans_list(s, STMT_SS_SERIES_SPANS, node_id, ret, ret_n, err);
}

int store_sseries_get(struct store *s, int64_t node_id, int64_t first_id,
                      struct store_sseries *ret, struct hp_buf *err)
{
    sqlite3_stmt *st;
    memset(ret, 0, sizeof(*ret));
    int r = store_stmt(s, STMT_SS_SERIES_GET, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    sqlite3_bind_int64(st, 2, first_id);
    if ((r = store_step_row(s, st, "reading a stack series", err)) <= 0) {
        sqlite3_reset(st);
        return r < 0 ? r : HP_ENOTFOUND;
    }
    int64_t size = sqlite3_column_int64(st, 0);
    const void *z = sqlite3_column_blob(st, 1);
    size_t zlen = (size_t)sqlite3_column_bytes(st, 1);
    void *data = NULL;
    struct hp_buf e = HP_BUF_INIT(0);
    /* A row claims its size: more than zstd could have made of it is a lie. */
    if (size <= 0 || (uint64_t)size > (uint64_t)zlen * 1024 + 4096)
        r = HP_ECORRUPT, hp_err_printf(&e, "a stored size of %lld bytes", (long long)size);
    else
        r = store_zstd_decompress(s, z, zlen, NULL, 0, (size_t)size, &data, &e);
    sqlite3_reset(st);
    if (r == 0)
        r = store_sseries_unpack(data, (size_t)size, ret, &e);
    free(data);
    if (r < 0)
        hp_err_printf(err, "%s: node %lld: the stack series of snapshots from #%lld: %.*s",
                      s->path, (long long)node_id, (long long)first_id, (int)e.len,
                      e.data ? e.data : "");
    hp_buf_release(&e);
    return r < 0 ? (r == HP_ESTORE ? r : HP_ECORRUPT) : 0;
}

/* A closed span whose stack series is not one row, to pack (rank: 0 for
 * the node's newest such span, 1 for the next older, ...). */
struct to_pack {
    int64_t node_id, first, last;
    uint32_t rank;
};

/* Closed spans of node_id whose stack series is not one row (written in
 * groups before a closed span's became one row, or dropped by a reindex
 * and not rewritten) onto *v. The spans and the rows come in one
 * statement each and are compared here: a query a span would be a round
 * trip a span on PostgreSQL, at every retention, for every node's year. */
static int node_unpacked(struct store *s, int64_t node_id, struct to_pack **v, size_t *n,
                         size_t *cap, struct hp_buf *err)
{
    struct store_span *sp, *rows = NULL;
    size_t nsp, nrows = 0, j = 0, n0 = *n;
    int r = spans_list(s, STMT_FS_SPANS, node_id, &sp, &nsp, err);
    if (r == 0)
        r = spans_list(s, STMT_SS_SERIES_SPANS, node_id, &rows, &nrows, err);
    for (size_t i = 0; r == 0 && i < nsp; i++) {
        while (j < nrows && rows[j].first_id < sp[i].first_id)
            j++;
        if (j < nrows && rows[j].first_id == sp[i].first_id && rows[j].last_id == sp[i].last_id)
            continue; /* one row, the span's */
        *v = hp_xgrow(*v, cap, *n + 1, sizeof(**v));
        (*v)[(*n)++] = (struct to_pack){ node_id, sp[i].first_id, sp[i].last_id, 0 };
    }
    /* Newest first: spans ascend. */
    for (size_t i = n0; i < *n; i++)
        (*v)[i].rank = (uint32_t)(*n - 1 - i);
    free(sp);
    free(rows);
    return r;
}

static int pack_cmp(const void *a, const void *b)
{
    const struct to_pack *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->node_id > y->node_id) - (x->node_id < y->node_id);
}

/* Pack the spans of v[0..n) into one row each, every node's newest first
 * (what leaks over recent days reads), a transaction each, until budget_ms
 * have passed or max are done: a store written before closed spans
 * had one row holds every closed span in groups, and packing it all at
 * once is about 14 ms a span of 1,000-stack snapshots (an hour for a year
 * of 3,000 nodes). Those rows still serve meanwhile; the next retention
 * goes on. *ret_packed: rows written; *ret_left: spans not reached. */
static int spans_pack(struct store *s, struct to_pack *v, size_t n, int64_t budget_ms,
                      size_t max, int64_t *ret_packed, int64_t *ret_left, size_t *ret_done,
                      struct hp_buf *err)
{
    int r = 0;
    size_t i = 0;
    uint64_t t0 = hp_now_ns();
    hp_qsort(v, n, sizeof(*v), pack_cmp);
    for (; r == 0 && i < n; i++) {
        if (i >= max || (int64_t)((hp_now_ns() - t0) / 1000000) >= budget_ms)
            break;
        int64_t *ids = NULL;
        size_t nids = 0;
        if ((r = store_tx_begin(s, err)) < 0)
            break;
        r = span_members(s, v[i].node_id, v[i].first, v[i].last, &ids, &nids, err);
        bool wrote = false;
        if (r == 0 && (r = sseries_span(s, v[i].node_id, ids, nids, err)) > 0) {
            wrote = true;
            r = 0;
        }
        free(ids);
        if (r == 0 && (r = store_tx_commit(s, err)) == 0)
            *ret_packed += wrote;
        else if (r < 0)
            store_tx_rollback(s);
    }
    *ret_left = r == 0 ? (int64_t)(n - i) : 0;
    *ret_done = i;
    return r;
}

static int view_range(struct store *s, int64_t node_id, int64_t *ret_last, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, STMT_VIEW_RANGE, &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, node_id);
    r = store_step_row(s, st, "reading a stack view's range", err);
    *ret_last = r == 1 ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
    return r;
}

/* Stack views written again where they are missing or behind the node's
 * newest closed span (a store written before views), stale (a location
 * they copied changed since: symbolized later; leaks reads the rows until
 * then) or damaged, or where packing just made a span's series one row
 * (packed[0..npacked)), a transaction a node, until the deadline
 * (hp_now_ns). */
static int views_fill(struct store *s, const int64_t *nodes, size_t n,
                      const struct to_pack *packed, size_t npacked, uint64_t deadline,
                      int64_t *ret_views, int64_t *ret_left, struct hp_buf *err)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        bool again = false;
        for (size_t k = 0; k < npacked && !again; k++)
            again = packed[k].node_id == nodes[i];
        struct store_span *sp;
        size_t nsp;
        int64_t vlast;
        if ((r = spans_list(s, STMT_FS_SPANS, nodes[i], &sp, &nsp, err)) < 0)
            break;
        int64_t newest = nsp ? sp[nsp - 1].last_id : 0;
        free(sp);
        if ((r = view_range(s, nodes[i], &vlast, err)) < 0)
            break;
        bool has = r == 1;
        r = 0;
        if (!nsp)
            continue;
        if (has && vlast >= newest && !again) {
            /* Its first bytes only: a few dozen generations to compare. */
            int cur = store_view_current(s, nodes[i], err);
            if (cur < 0 && cur != HP_ENOTFOUND) {
                r = cur;
                break;
            }
            if (cur == 1)
                continue;
        }
        if (hp_now_ns() >= deadline) {
            r = 0;
            ++*ret_left;
            continue;
        }
        if ((r = store_tx_begin(s, err)) < 0)
            break;
        if ((r = view_write(s, nodes[i], err)) == 0 && (r = store_tx_commit(s, err)) == 0)
            ++*ret_views;
        else if (r < 0)
            store_tx_rollback(s);
    }
    return r;
}

/* Node node_id's ok snapshots that no span covers (a store written before
 * spans, history whose span a retention dropped), in spans: full spans,
 * and where nothing follows, the rest as the node's open span; a shorter
 * closed span where a span follows. One transaction per span. */
static int node_fill(struct store *s, int64_t node_id, int64_t *ret_closed, struct hp_buf *err)
{
    sqlite3_stmt *st;
    struct store_span *sp;
    int64_t *ids = NULL;
    size_t nsp, nids = 0;
    int r = spans_list(s, STMT_FS_SPANS_ALL, node_id, &sp, &nsp, err);
    if (r == 0)
        r = span_members(s, node_id, INT64_MIN, INT64_MAX, &ids, &nids, err);
    /* Walk the ids against the spans: gaps of uncovered ids. */
    size_t k = 0;
    for (size_t a = 0, b; r == 0 && a < nids; a = b) {
        while (k < nsp && sp[k].last_id < ids[a])
            k++;
        if (k < nsp && sp[k].first_id <= ids[a]) {
            b = a + 1; /* covered */
            continue;
        }
        /* Uncovered from a up to the next span (k), or the end. */
        for (b = a; b < nids && !(k < nsp && ids[b] >= sp[k].first_id); b++)
            ;
        bool tail = k == nsp;
        for (size_t c = a; r == 0 && c < b; c += STORE_SPAN_SNAPSHOTS) {
            size_t n = HP_MIN((size_t)STORE_SPAN_SNAPSHOTS, b - c);
            bool open = tail && c + n == b && n < STORE_SPAN_SNAPSHOTS;
            if ((r = store_tx_begin(s, err)) < 0)
                break;
            if ((r = store_stmt(s, STMT_FS_SPAN_OPEN, &st, err)) == 0) {
                sqlite3_bind_int64(st, 1, node_id);
                sqlite3_bind_int64(st, 2, ids[c]);
                r = store_step_done(s, st, "opening a span", err);
            }
            if (r == 0 && open && (r = store_stmt(s, STMT_FS_SPAN_SET, &st, err)) == 0) {
                sqlite3_bind_int64(st, 1, node_id);
                sqlite3_bind_int64(st, 2, ids[c]);
                sqlite3_bind_int64(st, 3, ids[c + n - 1]);
                sqlite3_bind_int64(st, 4, (int64_t)n);
                sqlite3_bind_int64(st, 5, SPAN_OPEN);
                if ((r = store_step_done(s, st, "growing a span", err)) == 0)
                    r = sseries_groups(s, node_id, ids + c, n, err);
            } else if (r == 0 && !open) {
                r = span_close(s, node_id, ids[c], ids[c + n - 1], err);
                *ret_closed += r == 0;
            }
            if (r == 0)
                r = store_tx_commit(s, err);
            else
                store_tx_rollback(s);
        }
    }
    free(sp);
    free(ids);
    return r;
}

int store_spans_fill(struct store *s, int64_t budget_ms, int64_t max_spans, int64_t *ret_closed,
                     int64_t *ret_pack_left, int64_t *ret_views, int64_t *ret_views_left,
                     struct hp_buf *err)
{
    sqlite3_stmt *st;
    int64_t *nodes = NULL;
    struct to_pack *pk = NULL;
    size_t n = 0, cap = 0, npk = 0, pk_cap = 0;
    *ret_closed = 0;
    *ret_pack_left = 0;
    *ret_views = 0;
    *ret_views_left = 0;
    int r = store_stmt(s, STMT_FS_NODE_IDS, &st, err);
    if (r < 0)
        return r;
    while ((r = store_step_row(s, st, "listing nodes", err)) == 1) {
        nodes = hp_xgrow(nodes, &cap, n + 1, sizeof(*nodes));
        nodes[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    for (size_t i = 0; r == 0 && i < n; i++)
        r = node_fill(s, nodes[i], ret_closed, err);
    for (size_t i = 0; r == 0 && i < n; i++)
        r = node_unpacked(s, nodes[i], &pk, &npk, &pk_cap, err);
    size_t done = 0;
    uint64_t t0 = hp_now_ns();
    budget_ms = budget_ms > 0 ? budget_ms : STORE_PACK_BUDGET_MS;
    if (r == 0)
        r = spans_pack(s, pk, npk, budget_ms, max_spans > 0 ? (size_t)max_spans : npk,
                       ret_closed, ret_pack_left, &done, err);
    if (r == 0)
        r = views_fill(s, nodes, n, pk, done, t0 + (uint64_t)budget_ms * 1000000u, ret_views,
                       ret_views_left, err);
    free(pk);
    free(nodes);
    return r;
}
