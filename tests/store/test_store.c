/* Unit tests of the store on real SQLite files in a temporary directory:
 * round trips (profile in, identical profile out), deduplication, opening
 * refusals, selectors and times, failed attempts, reindex, listings, series,
 * retention, the symbol cache and concurrent readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/gen.h"

#define HOUR_MS INT64_C(3600000)
#define DAY_MS (24 * HOUR_MS)
#define T0 INT64_C(1763798400000) /* 2025-11-22T08:00:00Z */

struct fx {
    char dir[64];
    char db[128];
    struct store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/hf-store-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(f->db, STORE_OPEN_WRITE, &f->s, &err);
    if (r < 0)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_close(f->s);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static int64_t node(struct store *s, const char *name)
{
    struct store_node_info ni = { .name = name, .kind = "doris", .address = "10.0.0.1:8040" };
    int64_t id = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_node_upsert(s, &ni, &id, &err), 0);
    hp_buf_release(&err);
    assert_true(id > 0);
    return id;
}

static int64_t put(struct store *s, int64_t node_id, int64_t at, const struct profile *p,
                   const char *raw, size_t raw_len)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t id = 0;
    int r = store_snapshot_insert(s, node_id, at, p, raw, raw_len, NULL, NULL, 0, &id, &err);
    if (r < 0)
        fprintf(stderr, "insert: %s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    return id;
}

static void assert_same_profile(const struct profile *a, const struct profile *b)
{
    char *ca = gen_canon(a), *cb = gen_canon(b);
    if (strcmp(ca, cb) != 0) {
        /* Show the first differing line. */
        const char *x = ca, *y = cb;
        while (*x && *x == *y)
            x++, y++;
        while (x > ca && x[-1] != '\n')
            x--, y--;
        fprintf(stderr, "in:  %.300s\nout: %.300s\n", x, y);
    }
    assert_string_equal(ca, cb);
    free(ca);
    free(cb);
}

static struct profile *load(struct store *s, int64_t id)
{
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_snapshot_load(s, id, &p, &err);
    if (r < 0)
        fprintf(stderr, "load: %s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    return p;
}

/* A small profile by hand: named and anonymous locations, an unsymbolized
 * one, threads, header totals, units, a mapping without build-id. */
static struct profile *handmade(void)
{
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    p->scaling = PROFILE_SCALING_V2;
    p->period = 524288;
    p->has_header_totals = true;
    p->header_raw[0] = 3;
    p->header_raw[1] = 3000;
    p->time_ns = 1763798400123456789;
    p->hint = profile_intern(p, "jemalloc 5.3", 12);
    p->value_unit[1] = profile_intern(p, "bytes", 5);
    struct profile_mapping m1 = { 0x555500000000, 0x555500100000, 0x1000, 77, "/bin/be",
                                  "deadbeef", "r-xp", PROFILE_MAP_EXEC };
    struct profile_mapping m2 = { 0x7f0000000000, 0x7f0000010000, 0, 0, "[vdso]", NULL, "r-xp",
                                  PROFILE_MAP_SPECIAL };
    profile_mapping_add(p, &m1);
    profile_mapping_add(p, &m2);
    uint32_t a = profile_location_for_address(p, 0x555500001234);
    uint32_t b = profile_location_for_address(p, 0x555500002000 - 1);
    uint32_t c = profile_location_for_address(p, 0x7f0000000100);
    uint32_t d = profile_location_for_address(p, 0x12345678); /* no mapping */
    struct profile_frame fa[2] = { { "inl_leaf", "a.h", 10 }, { "Outer::run()", "a.cc", 20 } };
    struct profile_frame fb[1] = { { "main", NULL, 0 } };
    profile_location_set_frames(p, a, fa, 2);
    profile_location_set_frames(p, b, fb, 1);
    p->locs[a].flags |= PROFILE_LOC_SYMBOLIZED;
    p->locs[b].flags |= PROFILE_LOC_SYMBOLIZED;
    uint32_t s1[] = { a, b }, s2[] = { c, d, b }, s3[] = { d };
    uint32_t t1 = profile_thread_add(p, 4242, "worker", 6, (int64_t[]){ 2, 2000, 0, 0 });
    uint32_t st1 = profile_stack_add(p, s1, 2), st2 = profile_stack_add(p, s2, 3),
             st3 = profile_stack_add(p, s3, 1);
    (void)profile_sample_add(p, st1, 0, (int64_t[]){ 1, 1000, 0, 0 });
    (void)profile_sample_add(p, st2, 0, (int64_t[]){ 1, 1500, 0, 0 });
    (void)profile_sample_add(p, st3, 0, (int64_t[]){ 1, 500, 0, 0 });
    (void)profile_sample_add(p, st1, t1, (int64_t[]){ 1, 1000, 0, 0 });
    (void)profile_sample_add(p, st2, t1, (int64_t[]){ 1, 1000, 0, 0 });
    uint32_t named = profile_location_for_name(p, "collapsed_fn", 12);
    uint32_t s4[] = { named, b };
    (void)profile_sample_add(p, profile_stack_add(p, s4, 2), 0, (int64_t[]){ 0, 0, 5, 50 });
    profile_finish(p);
    return p;
}

static void test_store_roundtrip_handmade(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct profile *in = handmade();
    int64_t id = put(f->s, n, T0, in, "raw bytes", 9);
    struct profile *out = load(f->s, id);
    assert_same_profile(in, out);
    profile_free(out);

    /* A reader on its own connection sees the same. */
    struct store *rd;
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, NULL), 0);
    out = load(rd, id);
    assert_same_profile(in, out);
    profile_free(out);
    void *raw;
    size_t raw_len;
    assert_int_equal(store_snapshot_raw(rd, id, &raw, &raw_len, NULL), 0);
    assert_int_equal(raw_len, 9);
    assert_memory_equal(raw, "raw bytes", 9);
    free(raw);
    store_close(rd);
    profile_free(in);
}

static void test_store_roundtrip_generated(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    /* Several hours of one node and another node with a different load
     * address: shared locations must still give each its own addresses. */
    for (uint32_t h = 0; h < 4; h++) {
        for (int k = 0; k < 2; k++) {
            struct gen_params gp = { .seed = 1, .nstacks = 600, .nfuncs = 300, .hour = h,
                                     .nthreads = 3, .symbolize = true,
                                     .load_bias = k ? 0x10000 : 0 };
            char *raw;
            size_t raw_len;
            struct profile *in = gen_profile(&gp, &raw, &raw_len);
            int64_t nn = k ? node(f->s, "be-2") : n;
            int64_t id = put(f->s, nn, T0 + h * HOUR_MS, in, raw, raw_len);
            struct profile *out = load(f->s, id);
            assert_same_profile(in, out);
            struct store_snapshot_info si;
            assert_int_equal(store_snapshot_info(f->s, id, &si, NULL), 0);
            double tot[PV_COUNT];
            profile_totals(in, tot);
            for (int v = 0; v < PV_COUNT; v++)
                assert_true(si.totals[v] == tot[v]);
            assert_int_equal(si.raw_size, raw_len);
            void *rb;
            size_t rl;
            assert_int_equal(store_snapshot_raw(f->s, id, &rb, &rl, NULL), 0);
            assert_int_equal(rl, raw_len);
            assert_memory_equal(rb, raw, raw_len);
            free(rb);
            profile_free(out);
            profile_free(in);
            free(raw);
        }
    }
    /* Unsymbolized input of another build round-trips too (frames stay
     * empty). */
    struct gen_params gp = { .seed = 9, .nstacks = 200, .nfuncs = 100 };
    struct profile *in = gen_profile(&gp, NULL, NULL);
    int64_t id = put(f->s, node(f->s, "be-3"), T0 + 10 * HOUR_MS, in, NULL, 0);
    struct profile *out = load(f->s, id);
    assert_same_profile(in, out);
    profile_free(out);
    /* The same addresses of the same build, symbolized in one snapshot, are
     * symbolized in every snapshot that shares them: frames belong to the
     * binary, not to the snapshot. */
    gp.symbolize = true;
    struct profile *sym = gen_profile(&gp, NULL, NULL);
    put(f->s, node(f->s, "be-3"), T0 + 11 * HOUR_MS, sym, NULL, 0);
    out = load(f->s, id);
    assert_same_profile(sym, out);
    profile_free(out);
    profile_free(sym);
    profile_free(in);
}

static void test_store_dedup_steady_node(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 2, .nstacks = 2000, .nfuncs = 500, .symbolize = true };
    char *raw;
    size_t raw_len;
    struct profile *p = gen_profile(&gp, &raw, &raw_len);
    put(f->s, n, T0, p, raw, raw_len);
    struct store_usage u1, u2;
    assert_int_equal(store_usage_get(f->s, &u1, NULL), 0);
    /* The same dump again: no new stacks, locations or raw bytes. */
    put(f->s, n, T0 + HOUR_MS, p, raw, raw_len);
    assert_int_equal(store_usage_get(f->s, &u2, NULL), 0);
    assert_int_equal(u1.stacks, u2.stacks);
    assert_int_equal(u1.locations, u2.locations);
    assert_int_equal(u1.raw_bytes, u2.raw_bytes);
    assert_int_equal(u2.snapshots, 2);
    profile_free(p);
    free(raw);
    /* The next hour differs a little: its raw dump is stored as a small
     * delta against the first. */
    gp.hour = 1;
    p = gen_profile(&gp, &raw, &raw_len);
    put(f->s, n, T0 + 2 * HOUR_MS, p, raw, raw_len);
    struct store_usage u3;
    assert_int_equal(store_usage_get(f->s, &u3, NULL), 0);
    assert_true(u3.raw_bytes - u2.raw_bytes < (int64_t)raw_len / 20);
    assert_true(u3.stacks - u2.stacks < 100);
    profile_free(p);
    free(raw);
}

static void test_store_open_refuses_bad_files(void **state)
{
    struct fx *f = *state;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *s = NULL;
    char path[160];

    /* Garbage. */
    snprintf(path, sizeof(path), "%s/garbage.db", f->dir);
    FILE *fp = fopen(path, "w");
    for (int i = 0; i < 300; i++)
        fputs("this is not a database, just text\n", fp);
    fclose(fp);
    assert_int_equal(store_open(path, STORE_OPEN_WRITE, &s, &err), HP_ECORRUPT);
    assert_non_null(strstr(err.data, "not an SQLite database"));
    hp_buf_reset(&err);
    assert_int_equal(store_open(path, STORE_OPEN_READ, &s, &err), HP_ECORRUPT);
    hp_buf_reset(&err);

    /* SQLite, but someone else's. */
    snprintf(path, sizeof(path), "%s/other.db", f->dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", NULL,
                                  NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(store_open(path, STORE_OPEN_WRITE, &s, &err), HP_EMISMATCH);
    assert_non_null(strstr(err.data, "not a heapfleet one"));
    hp_buf_reset(&err);

    /* From a newer heapfleet. */
    store_close(f->s);
    f->s = NULL;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &s, &err), HP_EVERSION);
    assert_non_null(strstr(err.data, "newer heapfleet"));
    hp_buf_reset(&err);
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", store_schema_version_latest());
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, &err), 0);

    /* Missing file, read-only. */
    snprintf(path, sizeof(path), "%s/missing.db", f->dir);
    assert_int_equal(store_open(path, STORE_OPEN_READ, &s, &err), HP_ENOTFOUND);
    assert_int_equal(access(path, F_OK), -1);
    hp_buf_reset(&err);

    /* A corrupted heapfleet database: overwrite pages in the middle. */
    snprintf(path, sizeof(path), "%s/corrupt.db", f->dir);
    struct store *w;
    assert_int_equal(store_open(path, STORE_OPEN_WRITE, &w, &err), 0);
    int64_t n = node(w, "be-1");
    struct gen_params gp = { .seed = 3, .nstacks = 400, .nfuncs = 200, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    int64_t id = put(w, n, T0, p, NULL, 0);
    store_close(w);
    fp = fopen(path, "r+");
    fseek(fp, 4096 * 3, SEEK_SET);
    for (int i = 0; i < 4096 * 4; i++)
        fputc(0xA5, fp);
    fclose(fp);
    int r = store_open(path, STORE_OPEN_READ, &s, &err);
    if (r == 0) {
        /* Corruption past the header shows on use, clearly. */
        struct profile *out = NULL;
        int lr = store_snapshot_load(s, id, &out, &err);
        int cr = store_check(s, &err);
        assert_true(lr == HP_ECORRUPT || cr == HP_ECORRUPT);
        profile_free(out);
        store_close(s);
    } else {
        assert_int_equal(r, HP_ECORRUPT);
    }
    assert_non_null(strstr(err.data, "corrupt"));
    profile_free(p);
    hp_buf_release(&err);
}

static void test_store_time_parse_forms(void **state)
{
    (void)state;
    int64_t ms;
    int64_t now = T0 + 123;
    assert_int_equal(store_time_parse("2025-11-22T08:00:00Z", now, &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(store_time_parse("2025-11-22 08:00", now, &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(store_time_parse("2025-11-22T10:00:00+02:00", now, &ms), 0);
    assert_int_equal(ms, T0);
    assert_int_equal(store_time_parse("2025-11-22T03:00:00.250-0500", now, &ms), 0);
    assert_int_equal(ms, T0 + 250);
    assert_int_equal(store_time_parse("2025-11-22", now, &ms), 0);
    assert_int_equal(ms, T0 - 8 * HOUR_MS);
    assert_int_equal(store_time_parse("-6h", now, &ms), 0);
    assert_int_equal(ms, now - 6 * HOUR_MS);
    assert_int_equal(store_time_parse("-2d", now, &ms), 0);
    assert_int_equal(ms, now - 2 * DAY_MS);
    assert_int_equal(store_time_parse("now", now, &ms), 0);
    assert_int_equal(ms, now);
    assert_int_equal(store_time_parse("2025-02-30", now, &ms), HP_EUSAGE);
    assert_int_equal(store_time_parse("yesterday", now, &ms), HP_EUSAGE);
    assert_int_equal(store_time_parse("-6x", now, &ms), HP_EUSAGE);
    assert_int_equal(store_time_parse("2025-11-22T08:00:00Zjunk", now, &ms), HP_EUSAGE);
    char buf[40];
    assert_string_equal(store_time_format(T0, buf, sizeof(buf)), "2025-11-22T08:00:00Z");
}

static void test_store_selector_resolves(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 4, .nstacks = 50, .nfuncs = 40, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    int64_t a = put(f->s, n, T0, p, NULL, 0);
    int64_t b = put(f->s, n, T0 + HOUR_MS, p, NULL, 0);
    int64_t fail;
    assert_int_equal(store_snapshot_attempt_record(f->s, n, T0 + 2 * HOUR_MS,
                                                   STORE_STATUS_FETCH_FAILED, "timeout", NULL,
                                                   0, NULL, NULL, 0, &fail, NULL),
                     0);
    int64_t now = T0 + 2 * HOUR_MS + 60000, id;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_selector_resolve(f->s, "be-1", now, &id, &err), 0);
    assert_int_equal(id, b); /* latest stored profile, not the failed attempt */
    assert_int_equal(store_selector_resolve(f->s, "be-1@-90m", now, &id, &err), 0);
    assert_int_equal(id, a);
    assert_int_equal(store_selector_resolve(f->s, "be-1@2025-11-22T08:30:00Z", now, &id, &err),
                     0);
    assert_int_equal(id, a);
    assert_int_equal(store_selector_resolve(f->s, "be-1@2025-11-22T09:00:00Z", now, &id, &err),
                     0);
    assert_int_equal(id, b);
    char sel[32];
    snprintf(sel, sizeof(sel), "#%lld", (long long)a);
    assert_int_equal(store_selector_resolve(f->s, sel, now, &id, &err), 0);
    assert_int_equal(id, a);
    /* No such node: ENOTFOUND so the caller can try a file path. */
    assert_int_equal(store_selector_resolve(f->s, "./dumps/a.heap", now, &id, &err),
                     HP_ENOTFOUND);
    assert_int_equal(store_selector_resolve(f->s, "x@y.heap", now, &id, &err), HP_ENOTFOUND);
    hp_buf_reset(&err);
    assert_int_equal(store_selector_resolve(f->s, "be-1@-1d", now, &id, &err), HP_ENOTFOUND);
    assert_non_null(strstr(err.data, "no stored profile at or before"));
    hp_buf_reset(&err);
    assert_int_equal(store_selector_resolve(f->s, "be-1@teatime", now, &id, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "teatime"));
    snprintf(sel, sizeof(sel), "#%lld", (long long)fail);
    assert_int_equal(store_selector_resolve(f->s, sel, now, &id, &err), HP_ENOTFOUND);
    assert_int_equal(store_selector_resolve(f->s, "#99999", now, &id, &err), HP_ENOTFOUND);
    assert_int_equal(store_selector_resolve(f->s, "#x", now, &id, &err), HP_EUSAGE);
    hp_buf_release(&err);
    profile_free(p);
}

struct collect {
    int n;
    struct store_node_row nodes[4];
    struct store_snapshot_info snaps[16];
};

static int node_cb(const struct store_node_row *row, void *ctx)
{
    struct collect *c = ctx;
    if (c->n < 4)
        c->nodes[c->n] = *row;
    c->n++;
    return 0;
}

static int snap_cb(const struct store_snapshot_info *row, void *ctx)
{
    struct collect *c = ctx;
    if (c->n < 16)
        c->snaps[c->n] = *row;
    c->n++;
    return 0;
}

static void test_store_attempts_and_listings(void **state)
{
    struct fx *f = *state;
    int64_t n1 = node(f->s, "be-1"), n2 = node(f->s, "be-2");
    struct gen_params gp = { .seed = 5, .nstacks = 80, .nfuncs = 50, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    struct store_fetch_info fi = STORE_FETCH_INFO_INIT;
    fi.source = "http://10.0.0.1:8040/pprof/heap";
    fi.fetch_ms = 120;
    fi.prof_active = 1;
    struct store_stat stats[] = { { "process_mem_tracker", "bytes", 123456789 },
                                  { "rss", "bytes", 2e9 },
                                  { "stats.allocated", NULL, 1e9 } };
    int64_t ok;
    assert_int_equal(store_snapshot_insert(f->s, n1, T0, p, "x", 1, &fi, stats, 3, &ok, NULL),
                     0);
    int64_t bad;
    const char garbage[] = "<html>502 Bad Gateway</html>";
    assert_int_equal(store_snapshot_attempt_record(f->s, n1, T0 + HOUR_MS,
                                                   STORE_STATUS_PARSE_FAILED,
                                                   "line 1: expected heap_v2", garbage,
                                                   sizeof(garbage) - 1, &fi, NULL, 0, &bad,
                                                   NULL),
                     0);
    /* The failed attempt kept its bytes for a later reindex. */
    void *raw;
    size_t rl;
    assert_int_equal(store_snapshot_raw(f->s, bad, &raw, &rl, NULL), 0);
    assert_int_equal(rl, sizeof(garbage) - 1);
    free(raw);

    struct collect c = { 0 };
    assert_int_equal(store_nodes_list(f->s, node_cb, &c, NULL), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.nodes[0].name, "be-1");
    assert_int_equal(c.nodes[0].nsnapshots, 2);
    assert_int_equal(c.nodes[0].last_status, STORE_STATUS_PARSE_FAILED);
    assert_string_equal(c.nodes[0].last_error, "line 1: expected heap_v2");
    assert_int_equal(c.nodes[0].last_ok_id, ok);
    assert_int_equal(c.nodes[0].last_ok_at, T0);
    assert_string_equal(c.nodes[1].name, "be-2");
    assert_int_equal(c.nodes[1].nsnapshots, 0);
    (void)n2;

    memset(&c, 0, sizeof(c));
    assert_int_equal(store_snapshots_list(f->s, n1, 0, INT64_MAX, true, snap_cb, &c, NULL), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.snaps[0].id, ok);
    assert_int_equal(c.snaps[0].status, STORE_STATUS_OK);
    assert_int_equal(c.snaps[0].format, PROFILE_FORMAT_JEMALLOC);
    assert_int_equal(c.snaps[0].fetch_ms, 120);
    assert_int_equal(c.snaps[0].prof_active, 1);
    assert_true(c.snaps[0].store_ms >= 0);
    assert_int_equal(c.snaps[1].status, STORE_STATUS_PARSE_FAILED);
    memset(&c, 0, sizeof(c));
    assert_int_equal(store_snapshots_list(f->s, n1, 0, INT64_MAX, false, snap_cb, &c, NULL), 0);
    assert_int_equal(c.n, 1);

    struct store_point *pts;
    size_t npts;
    assert_int_equal(store_series_node(f->s, n1, 0, INT64_MAX, "rss", &pts, &npts, NULL), 0);
    assert_int_equal(npts, 1);
    assert_true(pts[0].stat == 2e9);
    free(pts);
    assert_int_equal(store_series_node(f->s, n1, 0, INT64_MAX, NULL, &pts, &npts, NULL), 0);
    assert_true(isnan(pts[0].stat));
    free(pts);

    /* Reindex turns the failed attempt into a profile, keeping its bytes. */
    assert_int_equal(store_snapshot_reindex(f->s, bad, p, NULL), 0);
    struct profile *out = load(f->s, bad);
    assert_same_profile(p, out);
    profile_free(out);
    assert_int_equal(store_snapshot_raw(f->s, bad, &raw, &rl, NULL), 0);
    assert_memory_equal(raw, garbage, rl);
    free(raw);
    profile_free(p);
}

static int stat_cb(const struct store_stat *st, void *ctx)
{
    int *n = ctx;
    static const char *names[] = { "process_mem_tracker", "rss", "stats.allocated" };
    assert_string_equal(st->name, names[*n]);
    if (*n == 2)
        assert_null(st->unit);
    else
        assert_string_equal(st->unit, "bytes");
    (*n)++;
    return 0;
}

static void test_store_stats_in_order(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct store_stat stats[] = { { "process_mem_tracker", "bytes", 1 },
                                  { "rss", "bytes", 2 },
                                  { "stats.allocated", NULL, 3 } };
    int64_t id;
    assert_int_equal(store_snapshot_attempt_record(f->s, n, T0, STORE_STATUS_INACTIVE,
                                                   "prof.active is false", NULL, 0, NULL,
                                                   stats, 3, &id, NULL),
                     0);
    int cnt = 0;
    assert_int_equal(store_snapshot_stats(f->s, id, stat_cb, &cnt, NULL), 0);
    assert_int_equal(cnt, 3);
}

struct ftop {
    int n;
    char first[256];
    int64_t first_cum;
};

static int ft_cb(const struct store_function_total *t, void *ctx)
{
    struct ftop *c = ctx;
    if (c->n++ == 0) {
        snprintf(c->first, sizeof(c->first), "%s", t->name);
        c->first_cum = t->cum_space;
    }
    assert_true(t->flat_space <= t->cum_space);
    return 0;
}

static void test_store_function_totals_and_series(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct profile *p = handmade();
    int64_t ids[3];
    for (int h = 0; h < 3; h++)
        ids[h] = put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
    /* main() is on stacks st1 and st2 and the named one (inuse 0): cum is
     * the un-sampled in-use bytes of st1 + st2. */
    double want = p->samples[0].value[PV_INUSE_SPACE] + p->samples[1].value[PV_INUSE_SPACE];
    struct ftop c = { 0 };
    assert_int_equal(store_function_totals(f->s, ids[0], ft_cb, &c, NULL), 0);
    assert_string_equal(c.first, "main");
    assert_int_equal(c.first_cum, llround(want));
    struct store_function_point *pts;
    size_t npts;
    assert_int_equal(store_series_function(f->s, n, "inl_leaf", 0, INT64_MAX, &pts, &npts, NULL),
                     0);
    assert_int_equal(npts, 3);
    for (size_t i = 0; i < npts; i++) {
        assert_int_equal(pts[i].snapshot_id, ids[i]);
        assert_int_equal(pts[i].flat_space, llround(p->samples[0].value[PV_INUSE_SPACE]));
    }
    free(pts);
    assert_int_equal(store_series_function(f->s, n, "nope", 0, INT64_MAX, &pts, &npts, NULL),
                     HP_ENOTFOUND);
    profile_free(p);
}

static void test_store_retain_thins_and_reclaims(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    /* 20 days of snapshots every 4 hours. */
    int64_t now = T0 + 20 * DAY_MS;
    int count = 0;
    int64_t last_id = 0;
    for (int64_t t = T0; t < now; t += 4 * HOUR_MS) {
        struct gen_params gp = { .seed = 6, .nstacks = 100, .nfuncs = 60, .symbolize = true,
                                 .hour = (uint32_t)count };
        char *raw;
        size_t rl;
        struct profile *p = gen_profile(&gp, &raw, &rl);
        last_id = put(f->s, n, t, p, raw, rl);
        count++;
        profile_free(p);
        free(raw);
    }
    assert_int_equal(count, 120);
    struct store_retain_policy pol = { .retain_s = 15 * 86400, .thin_after_s = 7 * 86400 };
    struct store_retain_result res;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_retain(f->s, &pol, now, &res, &err);
    if (r < 0)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    /* Kept: the last 7 days at 6/day (42), days 7..15 one per day (8 or 9). */
    struct collect c = { 0 };
    assert_int_equal(store_snapshots_list(f->s, n, 0, INT64_MAX, true, snap_cb, &c, NULL), 0);
    int kept = c.n;
    assert_true(kept >= 42 + 8 && kept <= 42 + 9);
    assert_int_equal(res.snapshots_deleted, count - kept);
    assert_true(res.raw_deleted > 0);
    assert_true(res.pages_freed > 0);
    /* Everything left still loads (keyframes were kept where needed), and
     * a new insert after retention works. */
    c.n = 0;
    memset(&c, 0, sizeof(c));
    assert_int_equal(store_snapshots_list(f->s, n, 0, now - 7 * DAY_MS, true, snap_cb, &c, NULL),
                     0);
    for (int i = 0; i < c.n && i < 16; i++) {
        struct profile *p = load(f->s, c.snaps[i].id);
        void *raw;
        size_t rl;
        assert_int_equal(store_snapshot_raw(f->s, c.snaps[i].id, &raw, &rl, NULL), 0);
        free(raw);
        profile_free(p);
    }
    struct profile *p = load(f->s, last_id);
    put(f->s, n, now, p, NULL, 0);
    profile_free(p);
    assert_int_equal(store_check(f->s, &err), 0);
    hp_buf_release(&err);
}

static void test_store_symcache_roundtrip(void **state)
{
    struct fx *f = *state;
    struct profile_frame fr[2] = { { "inlined", "x.h", 3 }, { "outer", NULL, 0 } };
    assert_int_equal(store_symcache_put(f->s, "abcd", 0x1234, fr, 2, NULL), 0);
    assert_int_equal(store_symcache_put(f->s, "abcd", 0x9999, NULL, 0, NULL), 0);
    struct hp_arena a;
    hp_arena_init(&a);
    struct profile_frame *out;
    uint32_t n;
    assert_int_equal(store_symcache_get(f->s, "abcd", 0x1234, &a, &out, &n, NULL), 1);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].function, "inlined");
    assert_string_equal(out[0].file, "x.h");
    assert_int_equal(out[0].line, 3);
    assert_string_equal(out[1].function, "outer");
    assert_null(out[1].file);
    assert_int_equal(store_symcache_get(f->s, "abcd", 0x9999, &a, &out, &n, NULL), 1);
    assert_int_equal(n, 0);
    assert_int_equal(store_symcache_get(f->s, "abcd", 0x5555, &a, &out, &n, NULL), 0);
    assert_int_equal(store_symcache_get(f->s, "other", 0x1234, &a, &out, &n, NULL), 0);
    hp_arena_release(&a);
}

static void test_store_reader_sees_commits_during_writes(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct store *rd;
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, NULL), 0);
    struct gen_params gp = { .seed = 7, .nstacks = 100, .nfuncs = 50, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    int64_t a = put(f->s, n, T0, p, NULL, 0);
    int64_t id;
    assert_int_equal(store_selector_resolve(rd, "be-1", T0, &id, NULL), 0);
    assert_int_equal(id, a);
    /* Writers are refused on a read handle. */
    int64_t x;
    assert_int_equal(store_snapshot_insert(rd, n, T0, p, NULL, 0, NULL, NULL, 0, &x, NULL),
                     HP_EUSAGE);
    int64_t b = put(f->s, n, T0 + HOUR_MS, p, NULL, 0);
    assert_int_equal(store_selector_resolve(rd, "be-1", T0 + HOUR_MS, &id, NULL), 0);
    assert_int_equal(id, b);
    store_close(rd);
    profile_free(p);
}

static void test_store_writer_survives_foreign_retention(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    char *raw[2];
    size_t rl[2];
    struct profile *p[2];
    for (int i = 0; i < 2; i++) {
        struct gen_params gp = { .seed = 8, .nstacks = 300, .nfuncs = 100, .hour = (uint32_t)i,
                                 .symbolize = true };
        p[i] = gen_profile(&gp, &raw[i], &rl[i]);
    }
    /* This writer now caches the node's keyframes... */
    for (int h = 0; h < 3; h++)
        put(f->s, n, T0 + h * HOUR_MS, p[h % 2], raw[h % 2], rl[h % 2]);
    /* ...which another process's retention deletes. */
    struct store *other;
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &other, NULL), 0);
    struct store_retain_policy pol = { .retain_s = 30 * 86400 };
    struct store_retain_result res;
    assert_int_equal(store_retain(other, &pol, T0 + 100 * DAY_MS, &res, NULL), 0);
    assert_int_equal(res.snapshots_deleted, 3);
    store_close(other);
    /* New snapshots must not be stored against the vanished keyframes. */
    int64_t a = put(f->s, n, T0 + 100 * DAY_MS, p[1], raw[1], rl[1]);
    int64_t b = put(f->s, n, T0 + 100 * DAY_MS + HOUR_MS, p[0], raw[0], rl[0]);
    int64_t ids[2] = { a, b };
    for (int i = 0; i < 2; i++) {
        struct profile *out = load(f->s, ids[i]);
        assert_same_profile(p[1 - i], out);
        profile_free(out);
        void *rb;
        size_t len;
        assert_int_equal(store_snapshot_raw(f->s, ids[i], &rb, &len, NULL), 0);
        assert_int_equal(len, rl[1 - i]);
        assert_memory_equal(rb, raw[1 - i], len);
        free(rb);
    }
    for (int i = 0; i < 2; i++) {
        profile_free(p[i]);
        free(raw[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_roundtrip_handmade, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_roundtrip_generated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_dedup_steady_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_open_refuses_bad_files, setup, teardown),
        cmocka_unit_test(test_store_time_parse_forms),
        cmocka_unit_test_setup_teardown(test_store_selector_resolves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_attempts_and_listings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_stats_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_function_totals_and_series, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_retain_thins_and_reclaims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_symcache_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_reader_sees_commits_during_writes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_writer_survives_foreign_retention, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
