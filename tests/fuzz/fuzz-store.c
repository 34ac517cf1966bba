/* Fuzz target for what the store parses: user-written times (selectors'
 * TIME part) and the packed blobs it reads back from a database file, which
 * may be corrupted or hostile (a bug report's attachment). Byte 0 picks the
 * blob to replace in a real database built on first use: 0 a snapshot's
 * sample set, 1 a stack's location list, 2 a location's frames, 3 a symbol
 * cache entry, 4 the snapshot's packed function totals (function_totals_rest),
 * 5 a function's packed series over a span (function_series, store/series.c:
 * the database holds a closed span); byte 0 '6' (54, otherwise case 0, which
 * no seed uses) a group's stack series (stack_series, store/sseries.c),
 * compressed here; byte 0 '7' (55) the node's stack view (stack_views,
 * store/view.c; compressed here), read through store_stacks_load and
 * store_stacks_resolve with the snapshot's stacks, and asked whether it is
 * current as retention asks.
 * The rest of the input is the blob (compressed here when the table
 * stores it compressed). Loading must
 * return a profile or an error, never crash or run away. */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "store/store-internal.h" /* store_view_current */
#include "tests/store/gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char db_path[128];
static struct store *rd;
static sqlite3 *raw_db;
static int64_t snap_id, node_id;
static int64_t fs_fid; /* the function of the series row case 5 replaces */

static char dir_path[64];

static void cleanup(void)
{
    store_close(rd);
    sqlite3_close(raw_db);
    char path[160];
    static const char *suffix[] = { "", "-wal", "-shm" };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s%s", db_path, suffix[i]);
        unlink(path);
    }
    rmdir(dir_path);
}

static void build_db(void)
{
    char dir[] = "/tmp/hf-fuzz-store-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    snprintf(db_path, sizeof(db_path), "%s/f.db", dir);
    snprintf(dir_path, sizeof(dir_path), "%s", dir);
    struct store *w;
    if (store_open(db_path, STORE_OPEN_WRITE, &w, NULL) < 0)
        abort();
    struct store_node_info ni = { .name = "be-fuzz" };
    struct gen_params gp = { .seed = 5, .nstacks = 40, .nfuncs = 30, .nthreads = 2,
                             .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    struct profile_frame fr = { "f", "f.c", 1 };
    if (store_node_upsert(w, &ni, &node_id, NULL) < 0 ||
        store_snapshot_insert(w, node_id, 1000, p, NULL, 0, NULL, NULL, 0, &snap_id, NULL) < 0 ||
        store_symcache_put(w, "b1d", 0x10, &fr, 1, NULL) < 0)
        abort();
    profile_free(p);
    /* A span of the node's snapshots closes at 128 (store/series.c). */
    for (uint32_t h = 1; h < 128; h++) {
        gp.hour = h % 5;
        p = gen_profile(&gp, NULL, NULL);
        int64_t id;
        if (store_snapshot_insert(w, node_id, 1000 + h * 3600000, p, NULL, 0, NULL, NULL, 0, &id,
                                  NULL) < 0)
            abort();
        profile_free(p);
    }
    store_close(w);
    if (sqlite3_open(db_path, &raw_db) != SQLITE_OK ||
        store_open(db_path, STORE_OPEN_READ, &rd, NULL) < 0)
        abort();
    atexit(cleanup);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(raw_db, "SELECT function_id FROM function_series"
                                   " WHERE id = (SELECT min(id) FROM function_series)",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW)
        abort(); /* no span closed: case 5 would test nothing */
    fs_fid = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* Keep the originals to restore before each input. */
    if (sqlite3_exec(raw_db,
                     "CREATE TABLE keep_ss AS SELECT * FROM sample_sets;"
                     "CREATE TABLE keep_st AS SELECT * FROM stacks;"
                     "CREATE TABLE keep_lo AS SELECT * FROM locations;"
                     "CREATE TABLE keep_sc AS SELECT * FROM symbol_cache;"
                     "CREATE TABLE keep_ftr AS SELECT * FROM function_totals_rest;"
                     "CREATE TABLE keep_fs AS SELECT * FROM function_series;"
                     "CREATE TABLE keep_sts AS SELECT * FROM stack_series;"
                     "CREATE TABLE keep_sv AS SELECT * FROM stack_views;",
                     NULL, NULL, NULL) != SQLITE_OK)
        abort();
    if (sqlite3_prepare_v2(raw_db, "SELECT count(*) FROM stack_views", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 0) != 1)
        abort(); /* no view: case 7 would test nothing */
    sqlite3_finalize(st);
}

static int stacks_cb(const struct store_samples *ss, void *ctx)
{
    int64_t **ids = ctx;
    *ids = malloc((ss->n + 1) * sizeof(**ids));
    for (size_t i = 0; i < ss->n; i++)
        (*ids)[i] = ss->samples[i].stack;
    (*ids)[ss->n] = 0;
    return 0;
}

static void put_blob(const char *sql, const void *blob, size_t len, int64_t size)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(raw_db, sql, -1, &st, NULL) != SQLITE_OK)
        abort();
    sqlite3_bind_blob(st, 1, len ? blob : "", (int)len, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, size);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* The snapshot's packed function totals, whether or not it had any. */
static void put_ftr(const void *z, size_t zl, int64_t size)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(raw_db,
                           "INSERT OR REPLACE INTO function_totals_rest(snapshot_id, size, data)"
                           " VALUES (?1, ?2, ?3)",
                           -1, &st, NULL) != SQLITE_OK)
        abort();
    sqlite3_bind_int64(st, 1, snap_id);
    sqlite3_bind_int64(st, 2, size);
    sqlite3_bind_blob(st, 3, zl ? z : "", (int)zl, SQLITE_TRANSIENT);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* blob as the store keeps compressed blobs (malloc'd, *ret_len bytes). */
static void *zcompress(const void *blob, size_t len, size_t *ret_len)
{
    size_t bound = ZSTD_compressBound(len);
    void *z = malloc(bound + 1);
    size_t zl = ZSTD_compress(z, bound + 1, blob, len, 1);
    if (ZSTD_isError(zl))
        abort();
    *ret_len = zl;
    return z;
}

static int series_cb(const struct store_function_point *pts, size_t nf, void *ctx)
{
    for (size_t j = 0; j < nf; j++)
        *(int64_t *)ctx ^= pts[j].cum_space;
    return 0;
}

static int ft_cb(const struct store_function_total *t, void *ctx)
{
    *(size_t *)ctx += strlen(t->name);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!rd)
        build_db();
    /* Times, as a user would type them. */
    char text[128];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = 0;
    int64_t ms;
    if (store_time_parse(text, INT64_C(1763798400000), &ms) == 0) {
        char out[64];
        (void)store_time_format(ms, out, sizeof(out));
    }
    /* ... and as selectors (the parser the CLI and the API share). */
    struct hp_selector hs;
    struct hp_buf serr = HP_BUF_INIT(0);
    if (hp_selector_parse(text, INT64_C(1763798400000), &hs, &serr) == 0 && hs.node &&
        hs.node_len > strlen(text))
        abort();
    hp_buf_release(&serr);
    if (size < 1 || size > (1 << 20))
        return 0;
    if (sqlite3_exec(raw_db,
                     "PRAGMA synchronous = OFF; BEGIN;"
                     "DELETE FROM sample_sets; INSERT INTO sample_sets SELECT * FROM keep_ss;"
                     "DELETE FROM stacks; INSERT INTO stacks SELECT * FROM keep_st;"
                     "DELETE FROM locations; INSERT INTO locations SELECT * FROM keep_lo;"
                     "DELETE FROM symbol_cache; INSERT INTO symbol_cache SELECT * FROM keep_sc;"
                     "DELETE FROM function_totals_rest;"
                     " INSERT INTO function_totals_rest SELECT * FROM keep_ftr;"
                     "DELETE FROM function_series;"
                     " INSERT INTO function_series SELECT * FROM keep_fs;"
                     "DELETE FROM stack_series; INSERT INTO stack_series SELECT * FROM keep_sts;"
                     "DELETE FROM stack_views; INSERT INTO stack_views SELECT * FROM keep_sv;",
                     NULL, NULL, NULL) != SQLITE_OK)
        abort();
    const uint8_t *blob = data + 1;
    size_t len = size - 1;
    switch (data[0] == '6' ? 6 : data[0] == '7' ? 7 : data[0] % 6) {
    case 7: {
        size_t zl;
        void *z = zcompress(blob, len, &zl);
        put_blob("UPDATE stack_views SET data = ?1, size = ?2", z, zl, (int64_t)len);
        free(z);
        break;
    }
    case 6: {
        size_t zl;
        void *z = zcompress(blob, len, &zl);
        put_blob("UPDATE stack_series SET data = ?1, size = ?2"
                 " WHERE id = (SELECT min(id) FROM stack_series)", z, zl, (int64_t)len);
        free(z);
        break;
    }
    case 0:
    case 4: {
        size_t zl;
        void *z = zcompress(blob, len, &zl);
        if (data[0] % 5 == 0)
            put_blob("UPDATE sample_sets SET data = ?1, size = ?2, base_id = NULL", z, zl,
                     (int64_t)len);
        else
            put_ftr(z, zl, (int64_t)len);
        free(z);
        break;
    }
    case 1:
        put_blob("UPDATE stacks SET locs_packed = ?1 WHERE ?2 >= 0", blob, len, 0);
        break;
    case 2:
        put_blob("UPDATE locations SET frames_packed = ?1 WHERE ?2 >= 0", blob, len, 0);
        break;
    case 5:
        put_blob("UPDATE function_series SET data = ?1"
                 " WHERE id = (SELECT min(id) FROM function_series) AND ?2 >= 0",
                 blob, len, 0);
        break;
    default:
        put_blob("UPDATE symbol_cache SET frames_packed = ?1 WHERE ?2 >= 0", blob, len, 0);
        break;
    }
    if (sqlite3_exec(raw_db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        abort();
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (store_snapshot_load(rd, snap_id, &p, &err) == 0) {
        char *c = gen_canon(p);
        free(c);
        profile_free(p);
    }
    struct hp_arena a;
    hp_arena_init(&a);
    struct profile_frame *fr;
    uint32_t nf;
    if (store_symcache_get(rd, "b1d", 0x10, &a, &fr, &nf, &err) == 1 && nf)
        (void)strlen(fr[0].function ? fr[0].function : "");
    hp_arena_release(&a);
    size_t names = 0;
    if (store_function_totals(rd, snap_id, ft_cb, &names, &err) < 0)
        hp_buf_reset(&err);
    /* That function's trend, through the span's packed series. */
    int64_t sum = 0;
    if (store_series_functions(rd, node_id, 0, INT64_MAX, &fs_fid, 1, series_cb, &sum, &err) <
        0)
        hp_buf_reset(&err);
    /* The group's stack series: every run inside its members. */
    struct store_sseries ss;
    struct store_span *rows = NULL;
    size_t nrows = 0;
    if (store_sseries_spans(rd, node_id, &rows, &nrows, &err) == 0 && nrows &&
        store_sseries_get(rd, node_id, rows[0].first_id, &ss, &err) == 0) {
        for (size_t c = 0; c < ss.nchunks; c++) {
            const struct store_ss_chunk *k = &ss.chunks[c];
            for (size_t sl = 0; sl < k->nslots; sl++)
                for (uint32_t j = 0; j < k->slots[sl].nruns; j++) {
                    const struct store_ss_run *r = &k->runs[k->slots[sl].run + j];
                    if (k->slots[sl].run + j >= k->nruns || r->n == 0 ||
                        r->first + r->n > k->nmembers)
                        abort();
                    sum ^= r->raw[1];
                }
        }
        /* Replayed into a builder (a span's row made from its groups'):
         * every member once more. */
        struct store_sseries again;
        struct store_ssb *b = store_ssb_new(&again);
        size_t members = 0, members_again = 0;
        for (size_t c = 0; c < ss.nchunks; c++) {
            store_ssb_add_chunk(b, &ss.chunks[c]);
            members += ss.chunks[c].nmembers;
        }
        store_ssb_finish(b);
        for (size_t c = 0; c < again.nchunks; c++)
            members_again += again.chunks[c].nmembers;
        if (members_again != members)
            abort();
        store_sseries_release(&again);
        store_sseries_release(&ss);
    }
    free(rows);
    hp_buf_reset(&err);
    /* The snapshot's stacks through the node's stack view. */
    struct store_stack_view view;
    int64_t *ids = NULL;
    if (store_stack_view_get(rd, node_id, &view, &err) == 0 &&
        store_snapshots_samples(rd, &snap_id, 1, stacks_cb, &ids, &err) == 0 && ids) {
        size_t nids = 0;
        while (ids[nids])
            nids++;
        if (store_stacks_load(rd, snap_id, ids, nids, 0, &view, &p, &err) == 0) {
            char *c = gen_canon(p);
            free(c);
            profile_free(p);
        }
        hp_buf_reset(&err);
        /* Resolved for folding straight from the view: every stack and
         * name in range. */
        struct profile_resolved *res = NULL;
        if (store_stacks_resolve(rd, snap_id, ids, nids, 0, &view, &res, &err) == 0) {
            for (size_t i = 0; i < res->nstacks; i++)
                for (uint32_t j = res->stack_off[i]; j < res->stack_off[i + 1]; j++) {
                    if (res->locs[j] >= res->nlocs)
                        abort();
                    const struct profile_rloc *l = &res->loc[res->locs[j]];
                    if (l->name_off + l->nnames > res->nnames)
                        abort();
                    for (uint32_t q = 0; q < l->nnames; q++)
                        if (strlen(res->names[l->name_off + q].s) !=
                            res->names[l->name_off + q].len)
                            abort();
                }
            profile_resolved_free(res);
        }
    }
    free(ids);
    store_stack_view_release(&view);
    hp_buf_reset(&err);
    /* Whether the view is current (what retention asks, from its first
     * bytes): an answer or an error, whatever the bytes. */
    int cur = store_view_current(rd, node_id, &err);
    if (cur != 0 && cur != 1 && cur >= 0)
        abort();
    hp_buf_reset(&err);
    hp_buf_release(&err);
    return 0;
}
