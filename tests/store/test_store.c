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
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/gen.h"

#define HOUR_MS INT64_C(3600000)
#define DAY_MS (24 * HOUR_MS)
#define T0 INT64_C(1763798400000) /* 2025-11-22T08:00:00Z */
/* test_store_retain_thinning_reclaims_dictionaries: hours of history and
 * stacks per profile. */
#define RELEASE_HOURS 500u
#define RELEASE_STACKS 200u

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

/* hp_search_le_u64 and the interval lookup that replaced the symbolizer's
 * binary searches with fixed look-backs: nested and overlapping ranges
 * farther back than any fixed window are found, gaps are not. */
struct iv_rec {
    uint32_t tag;
    uint64_t lo, hi;
};

static void test_hp_sorted_search_and_intervals(void **state)
{
    (void)state;
    uint64_t keys[] = { 10, 20, 20, 30 };
    assert_int_equal(hp_search_le_u64(keys, 4, sizeof(keys[0]), 0, 5), 0);
    assert_int_equal(hp_search_le_u64(keys, 4, sizeof(keys[0]), 0, 10), 1);
    assert_int_equal(hp_search_le_u64(keys, 4, sizeof(keys[0]), 0, 20), 3);
    assert_int_equal(hp_search_le_u64(keys, 4, sizeof(keys[0]), 0, 99), 4);
    assert_int_equal(hp_search_le_u64(NULL, 0, sizeof(keys[0]), 0, 99), 0);

    /* One long range [0, 1000) followed by 40 short disjoint ones
     * [100 + 10k, 105 + 10k): an address in a gap between the short ones
     * belongs to the long range, 40 records back (the old look-back was 16). */
    struct iv_rec r[41];
    r[0] = (struct iv_rec){ 0, 0, 1000 };
    for (uint32_t k = 0; k < 40; k++)
        r[k + 1] = (struct iv_rec){ k + 1, 100 + 10 * k, 105 + 10 * k };
    uint64_t maxhi[41];
    size_t olo = offsetof(struct iv_rec, lo), ohi = offsetof(struct iv_rec, hi);
    hp_interval_maxhi(r, 41, sizeof(r[0]), ohi, maxhi);
    assert_int_equal(maxhi[40], 1000);
    assert_int_equal(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 50), 0);
    assert_int_equal(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 102), 1);
    assert_int_equal(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 494), 40);
    assert_int_equal(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 495), 0);
    assert_int_equal(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 999), 0);
    assert_true(hp_interval_find(r, 41, sizeof(r[0]), olo, ohi, maxhi, 1000) == SIZE_MAX);
    /* Disjoint ranges with a gap: the gap finds nothing. */
    struct iv_rec d[2] = { { 0, 10, 20 }, { 1, 30, 40 } };
    uint64_t dm[2];
    hp_interval_maxhi(d, 2, sizeof(d[0]), ohi, dm);
    assert_true(hp_interval_find(d, 2, sizeof(d[0]), olo, ohi, dm, 25) == SIZE_MAX);
    assert_true(hp_interval_find(d, 2, sizeof(d[0]), olo, ohi, dm, 5) == SIZE_MAX);
    assert_int_equal(hp_interval_find(d, 2, sizeof(d[0]), olo, ohi, dm, 39), 1);
    assert_true(hp_interval_find(d, 0, sizeof(d[0]), olo, ohi, dm, 39) == SIZE_MAX);
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

    /* A new build on the node (another binary, other stacks): a delta would
     * not pay, so its dump starts a new keyframe, after a reopen too. */
    store_close(f->s);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
    gp.seed = 3;
    p = gen_profile(&gp, &raw, &raw_len);
    int64_t id = put(f->s, n, T0 + 3 * HOUR_MS, p, raw, raw_len);
    struct profile *out = load(f->s, id);
    assert_same_profile(p, out);
    profile_free(out);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT r.base_id IS NULL, ss.base_id IS NULL FROM "
                                        "snapshots s JOIN raw_dumps r ON r.id = s.raw_id JOIN "
                                        "sample_sets ss ON ss.id = s.samples_id WHERE s.id = ?1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(st, 1, id);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    assert_int_equal(sqlite3_column_int(st, 1), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
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

static void test_hp_edit_distance_counts(void **state)
{
    (void)state;
    assert_int_equal(hp_edit_distance("", ""), 0);
    assert_int_equal(hp_edit_distance("be-17", "be-17"), 0);
    assert_int_equal(hp_edit_distance("be-71", "be-17"), 2);  /* two substitutions */
    assert_int_equal(hp_edit_distance("be17", "be-17"), 1);   /* one insertion */
    assert_int_equal(hp_edit_distance("be-177", "be-17"), 1); /* one deletion */
    assert_int_equal(hp_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(hp_edit_distance("", "abc"), 3);
    char big[300];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_true(hp_edit_distance(big, "x") == SIZE_MAX);
}

/* store/hp.h's saturating add: at both ends, and exact in between. */
static void test_hp_i64_add_sat(void **state)
{
    (void)state;
    assert_true(hp_i64_add_sat(INT64_MAX, INT64_MAX) == INT64_MAX);
    assert_true(hp_i64_add_sat(INT64_MAX, 1) == INT64_MAX);
    assert_true(hp_i64_add_sat(INT64_MIN, -1) == INT64_MIN);
    assert_true(hp_i64_add_sat(INT64_MIN, INT64_MAX) == -1);
    assert_true(hp_i64_add_sat(INT64_MAX - 5, 5) == INT64_MAX);
    assert_true(hp_i64_add_sat(-7, 3) == -4);
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

/* The shared selector table (tests/data/selectors.tsv): hp_selector_parse
 * gives each row's time, and the CLI's resolver refuses exactly the error
 * rows with HP_EUSAGE (others resolve or are not found). */
static void test_store_selector_table(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 5, .nstacks = 50, .nfuncs = 40, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    (void)put(f->s, n, T0, p, NULL, 0);
    const char *path = getenv("HF_SELECTOR_TABLE");
    assert_non_null(path);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    const int64_t now = INT64_C(1795435200000); /* 2026-11-23T12:00:00Z */
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#' && (line[1] == ' ' || line[1] == '\n')) /* "# comment" */
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = '\0';
        const char *sel = line, *want = tab + 1;
        struct hp_selector hs;
        struct hp_buf err = HP_BUF_INIT(0);
        int rp = hp_selector_parse(sel, now, &hs, &err);
        int64_t id;
        int rr = store_selector_resolve(f->s, sel, now, &id, &err);
        if (strcmp(want, "error") == 0) {
            if (rp == 0 || rr != HP_EUSAGE)
                fail_msg("selector \"%s\" should be refused (parse %d, resolve %d)", sel, rp,
                         rr);
            assert_true(err.len > 0);
        } else {
            if (rp != 0 || rr == HP_EUSAGE)
                fail_msg("selector \"%s\" refused: %.*s", sel, (int)err.len,
                         err.data ? err.data : "");
            if (strcmp(want, "latest") == 0) {
                assert_false(hs.has_time);
                assert_int_equal(hs.id, 0);
            } else if (strncmp(want, "id:", 3) == 0) {
                assert_int_equal(hs.id, strtoll(want + 3, NULL, 10));
            } else {
                assert_true(hs.has_time);
                if (hs.at_ms != strtoll(want, NULL, 10))
                    fail_msg("selector \"%s\": %lld, expected %s", sel, (long long)hs.at_ms,
                             want);
            }
        }
        hp_buf_release(&err);
        rows++;
    }
    fclose(fp);
    assert_true(rows >= 30);
    profile_free(p);
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
    assert_non_null(strstr(err.data, "is newer than asked"));
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

struct node_stat_seen {
    int64_t snap[16];
    double value[16];
    int n;
};

static int node_stat_cb(int64_t snapshot_id, const struct store_stat *st, void *ctx)
{
    struct node_stat_seen *s = ctx;
    assert_true(s->n < 16);
    s->snap[s->n] = snapshot_id;
    s->value[s->n++] = st->value;
    return 0;
}

/* A node's statistics in one call: every snapshot of that node in the
 * window, by snapshot, each in the order reported; not another node's. */
static void test_store_node_stats_one_call(void **state)
{
    struct fx *f = *state;
    int64_t a = node(f->s, "be-a"), b = node(f->s, "be-b"), id[4];
    for (int k = 0; k < 4; k++) {
        struct store_stat stats[] = { { "rss", "bytes", 10.0 * k + 1 },
                                      { "stats.allocated", NULL, 10.0 * k + 2 } };
        assert_int_equal(store_snapshot_attempt_record(f->s, k == 2 ? b : a, T0 + k * HOUR_MS,
                                                       STORE_STATUS_INACTIVE, "off", NULL, 0,
                                                       NULL, stats, 2, &id[k], NULL),
                         0);
    }
    struct node_stat_seen seen = { 0 };
    assert_int_equal(store_node_stats(f->s, a, T0 + HOUR_MS, T0 + 3 * HOUR_MS, node_stat_cb,
                                      &seen, NULL),
                     0);
    /* Snapshots 1 and 3 of be-a (0 is before the window, 2 is be-b's). */
    assert_int_equal(seen.n, 4);
    int64_t want_snap[] = { id[1], id[1], id[3], id[3] };
    double want_value[] = { 11, 12, 31, 32 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(seen.snap[i], want_snap[i]);
        assert_true(seen.value[i] == want_value[i]);
    }
}

struct snap_rows {
    struct store_snapshot_info v[8];
    int n;
};

static int snap_rows_cb(const struct store_snapshot_info *row, void *ctx)
{
    struct snap_rows *r = ctx;
    assert_true(r->n < 8);
    r->v[r->n++] = *row;
    return 0;
}

/* store_snapshots_ok: the node's ok snapshots in the window, in time order
 * (a late import among them), with what store_snapshots_list says of each;
 * not its failed attempts, not another node's. */
static void test_store_snapshots_ok_as_the_list_says(void **state)
{
    struct fx *f = *state;
    int64_t a = node(f->s, "be-ok"), b = node(f->s, "be-other");
    const int64_t at[4] = { T0 + 2 * HOUR_MS, T0, T0 + 3 * HOUR_MS, T0 + HOUR_MS };
    for (int k = 0; k < 4; k++) {
        struct gen_params gp = { .seed = 3, .nstacks = 20, .nfuncs = 20, .hour = (uint32_t)k,
                                 .symbolize = true };
        struct profile *p = gen_profile(&gp, NULL, NULL);
        (void)put(f->s, k == 2 ? b : a, at[k], p, NULL, 0);
        profile_free(p);
    }
    int64_t failed;
    assert_int_equal(store_snapshot_attempt_record(f->s, a, T0 + HOUR_MS / 2,
                                                   STORE_STATUS_FETCH_FAILED, "refused", NULL, 0,
                                                   NULL, NULL, 0, &failed, NULL),
                     0);
    struct snap_rows list = { 0 }, ok = { 0 };
    assert_int_equal(store_snapshots_list(f->s, a, T0 + HOUR_MS / 2, INT64_MAX, false,
                                          snap_rows_cb, &list, NULL),
                     0);
    assert_int_equal(store_snapshots_ok(f->s, a, T0 + HOUR_MS / 2, INT64_MAX, snap_rows_cb, &ok,
                                        NULL),
                     0);
    assert_int_equal(list.n, 2); /* T0 + 1 h (imported last), T0 + 2 h */
    assert_int_equal(ok.n, list.n);
    assert_true(list.v[0].taken_at < list.v[1].taken_at && list.v[0].id > list.v[1].id);
    for (int i = 0; i < ok.n; i++) {
        assert_int_equal(ok.v[i].id, list.v[i].id);
        assert_int_equal(ok.v[i].node_id, a);
        assert_string_equal(ok.v[i].node, "be-ok");
        assert_int_equal(ok.v[i].taken_at, list.v[i].taken_at);
        assert_int_equal(ok.v[i].status, STORE_STATUS_OK);
        assert_memory_equal(ok.v[i].totals, list.v[i].totals, sizeof(ok.v[i].totals));
        assert_true(ok.v[i].totals[PV_INUSE_SPACE] > 0);
    }
    struct snap_rows none = { 0 };
    assert_int_equal(store_snapshots_ok(f->s, 999999, 0, INT64_MAX, snap_rows_cb, &none, NULL), 0);
    assert_int_equal(none.n, 0);
}

struct node_stat_named {
    int64_t snap[16];
    char name[16][32];
    int n;
};

static int node_stat_name_cb(int64_t snapshot_id, const struct store_stat *st, void *ctx)
{
    struct node_stat_named *s = ctx;
    assert_true(s->n < 16);
    s->snap[s->n] = snapshot_id;
    snprintf(s->name[s->n++], sizeof(s->name[0]), "%s:%s", st->name, st->unit ? st->unit : "-");
    return 0;
}

/* By snapshot id even where a snapshot's time is earlier than an older
 * id's (a dump imported late), and each snapshot's in the order it reported
 * them (not by name, not by the names' ids). */
static void test_store_node_stats_by_id_then_report_order(void **state)
{
    struct fx *f = *state;
    int64_t a = node(f->s, "be-a"), id[3];
    const int64_t at[3] = { T0, T0 + 2 * HOUR_MS, T0 + HOUR_MS };
    for (int k = 0; k < 3; k++) {
        /* Names first met in this order; snapshot 1 reports them reversed. */
        struct store_stat fwd[] = { { "zeta", "bytes", 1 }, { "alpha", NULL, 2 },
                                    { "mid", "count", 3 } };
        struct store_stat rev[] = { fwd[2], fwd[1], fwd[0] };
        assert_int_equal(store_snapshot_attempt_record(f->s, a, at[k], STORE_STATUS_INACTIVE,
                                                       "off", NULL, 0, NULL, k == 1 ? rev : fwd,
                                                       3, &id[k], NULL),
                         0);
    }
    struct node_stat_named seen = { 0 };
    assert_int_equal(store_node_stats(f->s, a, T0, T0 + 2 * HOUR_MS, node_stat_name_cb, &seen,
                                      NULL),
                     0);
    assert_int_equal(seen.n, 9);
    const char *want[9] = { "zeta:bytes", "alpha:-", "mid:count",  /* id[0] */
                            "mid:count",  "alpha:-", "zeta:bytes", /* id[1], reversed */
                            "zeta:bytes", "alpha:-", "mid:count" }; /* id[2], taken first */
    for (int i = 0; i < 9; i++) {
        assert_int_equal(seen.snap[i], id[i / 3]);
        assert_string_equal(seen.name[i], want[i]);
    }
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

static int64_t count_rows(const char *db, const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

/* The oracle for function totals, computed here from the profile alone:
 * per function name, flat (innermost frame of the first non-allocator
 * location) and cumulative (each sample once) in-use bytes and objects. */
struct ft_want {
    const char *name;
    double flat_space, cum_space, flat_objects, cum_objects;
    size_t last;
    bool seen;
};

static struct ft_want *ft_oracle(const struct profile *p, size_t *ret_n)
{
    struct ft_want *w = NULL;
    size_t n = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *sm = &p->samples[i];
        const uint32_t *locs = profile_stack_locs(p, sm->stack);
        bool leaf = true;
        for (uint32_t j = 0; j < p->stacks[sm->stack].n; j++) {
            const struct profile_location *l = &p->locs[locs[j]];
            if (leaf && (l->flags & PROFILE_LOC_ALLOCATOR))
                continue;
            for (uint32_t k = 0; k < l->nframes; k++) {
                const char *fn = p->frames[l->frame_off + k].function;
                if (!fn)
                    continue;
                struct ft_want *e = NULL;
                for (size_t x = 0; x < n && !e; x++)
                    if (strcmp(w[x].name, fn) == 0)
                        e = &w[x];
                if (!e) {
                    w = realloc(w, (n + 1) * sizeof(*w));
                    e = &w[n++];
                    *e = (struct ft_want){ .name = fn };
                }
                if (leaf && k == 0) {
                    e->flat_space += sm->value[PV_INUSE_SPACE];
                    e->flat_objects += sm->value[PV_INUSE_OBJECTS];
                }
                if (!e->seen || e->last != i) {
                    e->seen = true;
                    e->last = i;
                    e->cum_space += sm->value[PV_INUSE_SPACE];
                    e->cum_objects += sm->value[PV_INUSE_OBJECTS];
                }
            }
            leaf = false;
        }
    }
    *ret_n = n;
    return w;
}

struct ft_got {
    struct ft_want *want;
    size_t nwant, n;
    int64_t prev_cum;
    char prev_name[256];
};

static int ft_check_cb(const struct store_function_total *t, void *ctx)
{
    struct ft_got *g = ctx;
    /* Ordered as before: largest cumulative bytes first, then by name. */
    if (g->n)
        assert_true(t->cum_space < g->prev_cum ||
                    (t->cum_space == g->prev_cum && strcmp(g->prev_name, t->name) < 0));
    g->prev_cum = t->cum_space;
    snprintf(g->prev_name, sizeof(g->prev_name), "%s", t->name);
    struct ft_want *e = NULL;
    for (size_t x = 0; x < g->nwant && !e; x++)
        if (strcmp(g->want[x].name, t->name) == 0)
            e = &g->want[x];
    assert_non_null(e);
    assert_int_equal(t->flat_space, llround(e->flat_space));
    assert_int_equal(t->cum_space, llround(e->cum_space));
    assert_int_equal(t->flat_objects, llround(e->flat_objects));
    assert_int_equal(t->cum_objects, llround(e->cum_objects));
    g->n++;
    return 0;
}

/* A profile with thousands of functions: the long tail of small ones is
 * packed (issue 18: ~120 KB of rows per snapshot before), and every answer
 * is still exact: the whole top list, and a tail function's trend. */
static void test_store_function_totals_packed_tail(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 11, .nstacks = 3000, .nfuncs = 2000, .symbolize = true };
    struct profile *ps[2];
    int64_t ids[2];
    for (int h = 0; h < 2; h++) {
        gp.hour = (uint32_t)h;
        char *raw;
        size_t rl;
        ps[h] = gen_profile(&gp, &raw, &rl);
        ids[h] = put(f->s, n, T0 + h * HOUR_MS, ps[h], raw, rl);
        free(raw);
    }
    size_t nwant;
    struct ft_want *want = ft_oracle(ps[1], &nwant);
    assert_true(nwant > 1000);
    struct ft_got g = { .want = want, .nwant = nwant };
    assert_int_equal(store_function_totals(f->s, ids[1], ft_check_cb, &g, NULL), 0);
    size_t nonzero = 0;
    for (size_t i = 0; i < nwant; i++)
        nonzero += llround(want[i].cum_space) != 0 || llround(want[i].cum_objects) != 0;
    assert_int_equal(g.n, nonzero);
    /* Most functions are below the row share: a few rows per snapshot. */
    int64_t rows = count_rows(f->db, "SELECT count(*) FROM function_totals");
    assert_true(rows < (int64_t)nwant / 2);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_totals_rest"), 2);

    /* The smallest function with a value: its trend comes from the packed
     * rest, exact in both snapshots. */
    size_t small = SIZE_MAX;
    for (size_t i = 0; i < nwant; i++)
        if (llround(want[i].cum_space) > 0 &&
            (small == SIZE_MAX || want[i].cum_space < want[small].cum_space))
            small = i;
    assert_true(small != SIZE_MAX);
    struct store_function_point *pts;
    size_t npts;
    assert_int_equal(
        store_series_function(f->s, n, want[small].name, 0, INT64_MAX, &pts, &npts, NULL), 0);
    assert_int_equal(npts, 2);
    assert_int_equal(pts[1].snapshot_id, ids[1]);
    assert_int_equal(pts[1].cum_space, llround(want[small].cum_space));
    assert_int_equal(pts[1].flat_space, llround(want[small].flat_space));
    assert_int_equal(pts[1].cum_objects, llround(want[small].cum_objects));
    size_t n0;
    struct ft_want *want0 = ft_oracle(ps[0], &n0);
    int64_t cum0 = 0;
    for (size_t i = 0; i < n0; i++)
        if (strcmp(want0[i].name, want[small].name) == 0)
            cum0 = llround(want0[i].cum_space);
    assert_int_equal(pts[0].cum_space, cum0);
    free(pts);

    /* Deleting the snapshots takes their packed rests along. */
    struct store_retain_policy pol = { .retain_s = 1 };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &pol, T0 + 30 * DAY_MS, &res, NULL), 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_totals_rest"), 0);
    free(want0);
    free(want);
    profile_free(ps[0]);
    profile_free(ps[1]);
}

/* A database from before the series index (migrations/0003: a node's ok
 * snapshots by time) is upgraded by the first writer: the index appears,
 * the version moves on, and a function's trend answers as before, every
 * point of it. A reader refuses the old schema until then. */
static int first_name_cb(const struct store_function_total *row, void *ctx)
{
    char *name = ctx;
    if (!name[0])
        snprintf(name, 512, "%s", row->name);
    return 0;
}

static void test_store_upgrade_adds_series_indexes(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1"), last = 0;
    struct gen_params gp = { .seed = 5, .nstacks = 400, .nfuncs = 300, .symbolize = true };
    for (int h = 0; h < 6; h++) {
        gp.hour = (uint32_t)h;
        struct profile *p = gen_profile(&gp, NULL, NULL);
        last = put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    char fn[512] = ""; /* the largest function: it has a row in every snapshot */
    assert_int_equal(store_function_totals(f->s, last, first_name_cb, fn, NULL), 0);
    assert_true(fn[0] != '\0');
    struct store_function_point *before, *after;
    size_t nb, na;
    assert_int_equal(store_series_function(f->s, n, fn, 0, INT64_MAX, &before, &nb, NULL), 0);
    assert_int_equal(nb, 6);
    store_close(f->s);
    f->s = NULL;

    /* What the previous heapfleet wrote: version 2, no such indexes (nor
     * what later versions add: the symbol file tables,
     * function_totals_rest.base_id, the function and stack series; the trended function has rows, so its
     * rest, chained here, is not read). */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX snapshots_node_ok_time;"
                                  " DROP TABLE symbol_files; DROP TABLE symbol_file_chunks;"
                                  " DROP INDEX function_totals_rest_base;"
                                  " ALTER TABLE function_totals_rest DROP COLUMN base_id;"
                                  " DROP TABLE function_series; DROP TABLE function_series_spans;"
                                  " DROP TABLE stack_series;"
                                  " PRAGMA user_version = 2",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    const char *has = "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name ="
                      " 'snapshots_node_ok_time'";
    assert_int_equal(count_rows(f->db, has), 0);
    struct store *rd = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, &err), HP_EVERSION);
    assert_non_null(strstr(err.data, "open it once for writing"));
    hp_buf_release(&err);

    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
    assert_int_equal(count_rows(f->db, has), 1);
    assert_int_equal(count_rows(f->db, "PRAGMA user_version"), store_schema_version_latest());
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, NULL), 0);
    assert_int_equal(store_series_function(rd, n, fn, 0, INT64_MAX, &after, &na, NULL), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(after, before, nb * sizeof(*before));
    store_close(rd);
    free(before);
    free(after);
}

/* ---- per-function series in spans (store/series.c) ---- */

#define SPAN 128 /* snapshots in a closed span: STORE_SPAN_SNAPSHOTS */

struct ft_oracle {
    const int64_t *fids;
    size_t nf;
    struct store_function_point *row; /* nf */
};

static int ft_oracle_cb(const struct store_function_total *t, void *ctx)
{
    struct ft_oracle *o = ctx;
    for (size_t j = 0; j < o->nf; j++)
        if (o->fids[j] == t->function_id) {
            o->row[j].flat_space = t->flat_space;
            o->row[j].cum_space = t->cum_space;
            o->row[j].flat_objects = t->flat_objects;
            o->row[j].cum_objects = t->cum_objects;
        }
    return 0;
}

struct series_got {
    size_t nf, n, cap;
    struct store_function_point *v; /* n rows of nf */
};

static int series_got_cb(const struct store_function_point *pts, size_t nf, void *ctx)
{
    struct series_got *g = ctx;
    g->v = hp_xgrow(g->v, &g->cap, (g->n + 1) * nf, sizeof(*g->v));
    memcpy(g->v + g->n * nf, pts, nf * sizeof(*pts));
    g->n++;
    return 0;
}

/* store_series_functions over [since, until] equals, point for point, what
 * each snapshot's own function table (rows and packed rest, read without
 * the spans) says. Returns the points compared. */
static size_t assert_series_as_tables(struct store *s, int64_t node_id, const int64_t *fids,
                                      size_t nf, int64_t since, int64_t until)
{
    struct series_got g = { .nf = nf };
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_series_functions(s, node_id, since, until, fids, nf, series_got_cb, &g, &err);
    if (r < 0)
        fprintf(stderr, "series: %s\n", err.data);
    assert_int_equal(r, 0);
    struct store_point *pts;
    size_t n;
    assert_int_equal(store_series_node(s, node_id, since, until, NULL, &pts, &n, NULL), 0);
    assert_int_equal(g.n, n);
    struct store_function_point *want = calloc(nf + 1, sizeof(*want));
    for (size_t k = 0; k < n; k++) {
        for (size_t j = 0; j < nf; j++)
            want[j] = (struct store_function_point){ .snapshot_id = pts[k].snapshot_id,
                                                     .taken_at = pts[k].taken_at };
        struct ft_oracle o = { fids, nf, want };
        assert_int_equal(store_function_totals(s, pts[k].snapshot_id, ft_oracle_cb, &o, NULL),
                         0);
        assert_memory_equal(g.v + k * nf, want, nf * sizeof(*want));
    }
    free(want);
    free(pts);
    free(g.v);
    hp_buf_release(&err);
    return n;
}


/* ---- stack series (store/sseries.c) ---- */

/* Member m of chunk c as the samples it lists: the slots with a run
 * covering it, in slot order. */
static size_t chunk_member_samples(const struct store_ss_chunk *c, uint32_t m,
                                   struct store_sample *out)
{
    size_t n = 0;
    for (size_t s = 0; s < c->nslots; s++)
        for (uint32_t j = 0; j < c->slots[s].nruns; j++) {
            const struct store_ss_run *r = &c->runs[c->slots[s].run + j];
            if (r->first <= m && m < r->first + r->n) {
                out[n] = (struct store_sample){ .stack = c->slots[s].stack };
                memcpy(out[n].raw, r->raw, sizeof(r->raw));
                n++;
            }
        }
    return n;
}

struct ss_oracle {
    const struct store_sseries *ss;
    size_t chunk, member;
    size_t checked;
};

static int ss_oracle_cb(const struct store_samples *x, void *ctx)
{
    struct ss_oracle *o = ctx;
    const struct store_ss_chunk *c = &o->ss->chunks[o->chunk];
    const struct store_ss_member *m = &c->members[o->member];
    assert_int_equal(m->snapshot_id, x->snapshot_id);
    assert_int_equal(m->layout, x->layout);
    assert_int_equal(m->period, x->profile->period);
    assert_int_equal(m->scaling, (uint32_t)x->profile->scaling);
    struct store_sample *got = calloc(c->nslots + 1, sizeof(*got));
    size_t n = chunk_member_samples(c, (uint32_t)o->member, got);
    assert_int_equal(n, x->n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(got[i].stack, x->samples[i].stack);
        assert_memory_equal(got[i].raw, x->samples[i].raw, sizeof(got[i].raw));
    }
    free(got);
    o->checked++;
    if (++o->member == c->nmembers) {
        o->member = 0;
        o->chunk++;
    }
    return 0;
}

/* Every stack series row of the node lists, member by member, exactly its
 * sample sets, and its members are the node's ok snapshots in its range.
 * Returns the rows checked. */
static size_t assert_sseries_as_sample_sets(struct store *s, const char *db, int64_t node_id)
{
    struct store_span *rows;
    size_t nrows;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_sseries_spans(s, node_id, &rows, &nrows, &err), 0);
    for (size_t i = 0; i < nrows; i++) {
        struct store_sseries ss;
        int r = store_sseries_get(s, node_id, rows[i].first_id, &ss, &err);
        if (r < 0)
            fail_msg("%s", err.data);
        size_t nm = 0;
        for (size_t c = 0; c < ss.nchunks; c++)
            nm += ss.chunks[c].nmembers;
        int64_t *ids = calloc(nm + 1, sizeof(*ids));
        size_t k = 0;
        for (size_t c = 0; c < ss.nchunks; c++)
            for (size_t m = 0; m < ss.chunks[c].nmembers; m++)
                ids[k++] = ss.chunks[c].members[m].snapshot_id;
        assert_int_equal(ids[0], rows[i].first_id);
        assert_int_equal(ids[nm - 1], rows[i].last_id);
        char sql[200];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM snapshots WHERE node_id = %lld AND"
                 " status = 'ok' AND id BETWEEN %lld AND %lld", (long long)node_id,
                 (long long)rows[i].first_id, (long long)rows[i].last_id);
        assert_int_equal(count_rows(db, sql), (int64_t)nm);
        struct ss_oracle o = { &ss, 0, 0, 0 };
        assert_int_equal(store_snapshots_samples(s, ids, nm, ss_oracle_cb, &o, &err), 0);
        assert_int_equal(o.checked, nm);
        free(ids);
        store_sseries_release(&ss);
    }
    free(rows);
    hp_buf_release(&err);
    return nrows;
}

/* A closed span's stack series is one row. A store whose closed spans
 * hold group rows (written before that) or none (a reindex dropped it)
 * gets one row per closed span from a retention that deletes nothing, and
 * the rows read as the sample sets they came from. */
static void test_store_retain_packs_a_closed_spans_series_in_one_row(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-pack");
    enum { H = 2 * SPAN + 5 };
    int64_t ids[H];
    for (int h = 0; h < H; h++) {
        struct gen_params gp = { .seed = 9, .nstacks = 60, .nfuncs = 50,
                                 .hour = (uint32_t)(h % 13), .symbolize = true };
        struct profile *p = gen_profile(&gp, NULL, NULL);
        ids[h] = put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    const char *exact = "SELECT count(*) FROM function_series_spans p WHERE p.closed = 1"
                        " AND (SELECT count(*) FROM stack_series s WHERE s.node_id = p.node_id"
                        " AND s.first_id BETWEEN p.first_id AND p.last_id) = 1"
                        " AND EXISTS (SELECT 1 FROM stack_series s WHERE s.node_id = p.node_id"
                        " AND s.first_id = p.first_id AND s.last_id = p.last_id)";
    assert_int_equal(count_rows(f->db, exact), 2);
    /* The first span as an older heapfleet left it: rows for its first two
     * groups of 32 (their bytes do not matter: they go), the second
     * span's row gone. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    char sql[600];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE ss_one AS SELECT * FROM stack_series WHERE first_id = %lld;"
             " DELETE FROM stack_series WHERE first_id IN (%lld, %lld);"
             " INSERT INTO stack_series(node_id, first_id, last_id, size, data)"
             " SELECT node_id, %lld, %lld, size, data FROM ss_one UNION ALL"
             " SELECT node_id, %lld, %lld, size, data FROM ss_one; DROP TABLE ss_one",
             (long long)ids[0], (long long)ids[0], (long long)ids[SPAN], (long long)ids[0],
             (long long)ids[31], (long long)ids[32], (long long)ids[63]);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(count_rows(f->db, exact), 0);
    struct store_retain_policy keep_all = { 0 };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &keep_all, T0 + H * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.snapshots_deleted, 0);
    assert_int_equal(res.spans_closed, 2);
    assert_int_equal(count_rows(f->db, exact), 2);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stack_series"), 2);
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 2);
    /* Nothing left to pack: the next retention rewrites nothing. */
    assert_int_equal(store_retain(f->s, &keep_all, T0 + H * HOUR_MS, &res, NULL), 0);
    assert_int_equal(res.spans_closed, 0);
}

/* The builder keeps one order per chunk: a snapshot listing a stack
 * before one it followed starts a new chunk; a stack listed twice gets two
 * slots; runs hold still values; every member reads back as it was. */
static void test_store_sseries_builder(void **state)
{
    (void)state;
    enum { NS = 7 };
    /* Each member's (stack, count) list, in its order; counts double as
     * bytes. */
    static const int64_t lists[NS][6][2] = {
        { { 10, 1 }, { 20, 1 }, { 30, 1 } },
        { { 10, 1 }, { 15, 4 }, { 20, 2 }, { 30, 1 } }, /* 15 new, between */
        { { 10, 1 }, { 20, 2 }, { 30, 1 } },             /* 15 gone */
        { { 10, 1 }, { 20, 2 }, { 20, 5 }, { 30, 1 } },  /* 20 twice */
        { { 30, 1 }, { 10, 1 } },                        /* 30 before 10: new chunk */
        { { 30, 1 }, { 10, 2 } },
        { { 30, 1 }, { 10, 2 }, { 40, 9 } },
    };
    static const size_t lens[NS] = { 3, 4, 3, 4, 2, 2, 3 };
    struct store_sseries ss;
    struct store_ssb *b = store_ssb_new(&ss);
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    p->period = 524288;
    p->scaling = PROFILE_SCALING_V2;
    for (size_t m = 0; m < NS; m++) {
        struct store_sample sm[6] = { 0 };
        for (size_t i = 0; i < lens[m]; i++) {
            sm[i].stack = lists[m][i][0];
            sm[i].raw[0] = lists[m][i][1];
            sm[i].raw[1] = lists[m][i][1] * 100;
        }
        struct store_samples x = { .snapshot_id = (int64_t)m + 1, .profile = p, .samples = sm,
                                   .n = lens[m], .layout = 7 };
        store_ssb_add(b, &x);
    }
    store_ssb_finish(b);
    assert_int_equal(ss.nchunks, 2);
    assert_int_equal(ss.chunks[0].nmembers, 4);
    assert_int_equal(ss.chunks[1].nmembers, 3);
    /* 10, 15, 20, 20', 30: the second listing of 20 right after the first. */
    assert_int_equal(ss.chunks[0].nslots, 5);
    static const int64_t order[5] = { 10, 15, 20, 20, 30 };
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(ss.chunks[0].slots[i].stack, order[i]);
    /* 10 and 30 hold still over the chunk: one run each. */
    assert_int_equal(ss.chunks[0].slots[0].nruns, 1);
    assert_int_equal(ss.chunks[0].runs[ss.chunks[0].slots[0].run].n, 4);
    assert_int_equal(ss.chunks[0].slots[2].nruns, 2); /* 20: 1, then 2 from member 1 */
    size_t m0 = 0;
    for (size_t c = 0; c < ss.nchunks; c++)
        for (uint32_t m = 0; m < ss.chunks[c].nmembers; m++, m0++) {
            struct store_sample got[8];
            size_t n = chunk_member_samples(&ss.chunks[c], m, got);
            assert_int_equal(n, lens[m0]);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(got[i].stack, lists[m0][i][0]);
                assert_int_equal(got[i].raw[0], lists[m0][i][1]);
                assert_int_equal(got[i].raw[1], lists[m0][i][1] * 100);
            }
            assert_int_equal(ss.chunks[c].members[m].period, 524288);
        }
    store_sseries_release(&ss);
    profile_free(p);
}

static void test_store_function_series_spans_read_as_tables(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-spans");
    enum { H = 2 * SPAN + 40 };
    int64_t ids[H];
    for (int h = 0; h < H; h++) {
        /* Functions come and go across the hours (and in and out of the
         * packed rest). */
        struct gen_params gp = { .seed = 7, .nstacks = 300, .nfuncs = 200,
                                 .hour = (uint32_t)(h % 29), .symbolize = true };
        struct profile *p = gen_profile(&gp, NULL, NULL);
        ids[h] = put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    /* Two spans closed, the newest 40 snapshots in the open one. */
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 1"), 2);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 0 AND n = 40"), 1);
    /* Stack series: one row per closed span, and the open span's one
     * complete group of 32; each reads as its sample sets. */
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 2 + 1);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM stack_series s"
                                       " JOIN function_series_spans p ON p.node_id = s.node_id"
                                       " AND p.first_id = s.first_id AND p.last_id = s.last_id"
                                       " WHERE p.closed = 1"),
                     2);
    /* Every function ever stored, in rows or only in the rest. */
    int64_t nfun = count_rows(f->db, "SELECT count(*) FROM functions");
    assert_true(nfun > 20);
    int64_t *all = calloc((size_t)nfun, sizeof(*all));
    for (int64_t i = 0; i < nfun; i++)
        all[i] = i + 1;
    assert_int_equal(count_rows(f->db, "SELECT max(id) FROM functions"), nfun);
    int64_t few[3] = { 1, nfun / 2, nfun };
    int64_t until = T0 + H * HOUR_MS;
    /* Few functions (index seeks outside the spans) and many (scans). */
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX), H);
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, 0, INT64_MAX), H);
    /* A window cutting through both spans. */
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, T0 + 100 * HOUR_MS,
                                             T0 + 200 * HOUR_MS),
                     101);

    /* A packed series that does not decode is a damaged copy: the span's
     * snapshots read from function_totals. */
    sqlite3 *dbc;
    assert_int_equal(sqlite3_open(f->db, &dbc), SQLITE_OK);
    assert_int_equal(sqlite3_exec(dbc, "CREATE TABLE fs_saved AS SELECT * FROM function_series;"
                                       " UPDATE function_series SET data = x'ff05'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX), H);
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, 0, INT64_MAX), H);
    struct store_function_point *pts; /* and without a buffer for messages */
    size_t npts;
    char fn0[512] = "";
    assert_int_equal(store_function_totals(f->s, ids[0], first_name_cb, fn0, NULL), 0);
    assert_int_equal(store_series_function(f->s, n, fn0, 0, INT64_MAX, &pts, &npts, NULL), 0);
    assert_int_equal(npts, H);
    free(pts);
    assert_int_equal(sqlite3_exec(dbc, "DELETE FROM function_series;"
                                       " INSERT INTO function_series SELECT * FROM fs_saved;"
                                       " DROP TABLE fs_saved",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(dbc);

    /* The spans are what is read: with the covered snapshots' rows gone
     * from function_totals, the series still has them. */
    struct store_function_point *before, *after;
    size_t nb, na;
    char fname[512] = "";
    assert_int_equal(store_function_totals(f->s, ids[10], first_name_cb, fname, NULL), 0);
    assert_int_equal(store_series_function(f->s, n, fname, 0, until, &before, &nb, NULL), 0);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    char sql[200];
    snprintf(sql, sizeof(sql), "CREATE TABLE ft_saved AS SELECT * FROM function_totals"
             " WHERE snapshot_id <= %lld; DELETE FROM function_totals WHERE snapshot_id <= %lld",
             (long long)ids[2 * SPAN - 1],
             (long long)ids[2 * SPAN - 1]);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(store_series_function(f->s, n, fname, 0, until, &after, &na, NULL), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(after, before, nb * sizeof(*before));
    free(after);
    assert_int_equal(sqlite3_exec(db, "INSERT INTO function_totals SELECT * FROM ft_saved;"
                                      " DROP TABLE ft_saved", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);

    /* A reindexed snapshot makes its span stale (its totals are new), and
     * the series follows the new totals; reindexing the span's last one
     * closes it again, from the new rows. */
    struct gen_params gp = { .seed = 8, .nstacks = 300, .nfuncs = 200, .hour = 3,
                             .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    assert_int_equal(store_snapshot_reindex(f->s, ids[5], p, NULL), 0);
    assert_int_equal(store_snapshot_reindex(f->s, ids[SPAN + 5], p, NULL), 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 2"), 2);
    /* A reindexed snapshot's row goes (its samples are new): both closed
     * spans' rows; the open span's group stays. */
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 1);
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, 0, INT64_MAX), H);
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX), H);
    assert_int_equal(store_snapshot_reindex(f->s, ids[SPAN - 1], p, NULL), 0);
    profile_free(p);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 1"), 1);
    /* Closed again: its row is back, one for the span. */
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 2);
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, 0, INT64_MAX), H);
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX), H);

    /* Retention deletes from the first span: it goes, and nothing is
     * left that names a deleted snapshot (the second stays stale); its
     * remaining snapshots, which no span covers now, retention packs in a
     * (shorter) span of their own. */
    struct store_retain_policy pol = { .retain_s = (H - 30) * 3600, .reclaim = true };
    struct store_retain_result res;
    assert_int_equal(store_retain(f->s, &pol, until, &res, NULL), 0);
    assert_true(res.snapshots_deleted >= 29);
    assert_int_equal(res.spans_closed, 1);
    char first_kept[160];
    snprintf(first_kept, sizeof(first_kept), "SELECT count(*) FROM function_series_spans"
             " WHERE closed = 1 AND first_id = (SELECT min(id) FROM snapshots) AND last_id = %lld"
             " AND n = %lld", (long long)ids[SPAN - 1], (long long)(SPAN - res.snapshots_deleted));
    assert_int_equal(count_rows(f->db, first_kept), 1);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 1"), 1);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series WHERE first_id <"
                                       " (SELECT min(id) FROM snapshots)"), 0);
    /* The shorter span's row, and the open span's group. */
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 2);
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX),
                     (size_t)(H - res.snapshots_deleted));
    /* New snapshots fill the open span on and close it, and the stale
     * span closes again with it. */
    for (int h = H; h < H + SPAN; h++) {
        gp.hour = (uint32_t)(h % 29);
        p = gen_profile(&gp, NULL, NULL);
        (void)put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_series_spans"
                                       " WHERE closed = 1"), 3);
    /* Ids reclaimed since name no function: their series is all zeros. */
    nfun = count_rows(f->db, "SELECT max(id) FROM functions");
    all = realloc(all, (size_t)nfun * sizeof(*all));
    for (int64_t i = 0; i < nfun; i++)
        all[i] = i + 1;
    /* A dump imported late, older than all: the newest id, the first in
     * time, outside every span. */
    gp.hour = 11;
    p = gen_profile(&gp, NULL, NULL);
    (void)put(f->s, n, T0 - HOUR_MS, p, NULL, 0);
    profile_free(p);
    size_t kept = (size_t)(H - res.snapshots_deleted) + SPAN + 1;
    /* A row per closed span (three), and the open span's complete group. */
    assert_int_equal(assert_sseries_as_sample_sets(f->s, f->db, n), 4);
    assert_int_equal(assert_series_as_tables(f->s, n, all, (size_t)nfun, 0, INT64_MAX), kept);
    assert_int_equal(assert_series_as_tables(f->s, n, few, 3, 0, INT64_MAX), kept);
    free(before);
    free(all);
}

/* A write batch: its snapshots are one transaction (a reader sees none of
 * them until the commit), and an item that fails rolls back alone. */
static void test_store_batch(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 4, .nstacks = 80, .nfuncs = 50, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    struct store *rd;
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, NULL), 0);
    assert_int_equal(store_batch_begin(f->s, NULL), 0);
    assert_true(store_batch_open(f->s));
    int64_t a = put(f->s, n, T0, p, "raw one", 7);
    /* A statistic without a name fails after the snapshot row was written. */
    struct store_stat bad = { .name = NULL, .value = 1 };
    int64_t id = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_snapshot_insert(f->s, n, T0 + HOUR_MS, p, "raw two", 7, NULL, &bad,
                                           1, &id, &err),
                     HP_EUSAGE);
    int64_t b = put(f->s, n, T0 + 2 * HOUR_MS, p, "raw three", 9);
    assert_true(a > 0 && b > a);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM snapshots"), 0);
    assert_int_equal(store_batch_commit(f->s, &err), 0);
    assert_false(store_batch_open(f->s));
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM snapshots"), 2);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM raw_dumps"), 2);
    struct profile *out = load(rd, b);
    assert_same_profile(p, out);
    profile_free(out);
    /* No batch open: commit is a no-op; inserts commit one by one again. */
    assert_int_equal(store_batch_commit(f->s, &err), 0);
    put(f->s, n, T0 + 3 * HOUR_MS, p, NULL, 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM snapshots"), 3);
    /* store_close commits a batch left open. */
    assert_int_equal(store_batch_begin(f->s, NULL), 0);
    put(f->s, n, T0 + 4 * HOUR_MS, p, NULL, 0);
    store_close(f->s);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM snapshots"), 4);
    assert_int_equal(store_check(f->s, &err), 0);
    store_close(rd);
    hp_buf_release(&err);
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

/* Longest delta chain (links down to a standalone row) of any row. */
static int max_chain_by(const char *db, const char *table, const char *key)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    char *sql = hp_xasprintf(
        "WITH RECURSIVE c(id, base, d) AS (SELECT %s, base_id, 0 FROM %s"
        " UNION ALL SELECT c.id, t.base_id, c.d + 1 FROM c JOIN %s t ON t.%s = c.base"
        " WHERE c.d < 1000) SELECT max(d) FROM c",
        key, table, table, key);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int d = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    free(sql);
    return d;
}

static int max_chain(const char *db, const char *table)
{
    return max_chain_by(db, table, "id");
}

/* The raw dump of hour h in the chain tests: a drifting profile's text and
 * a line that makes every dump distinct (no two rows are shared). */
static char *chain_raw(uint32_t h, struct profile **ret_p, size_t *ret_len)
{
    struct gen_params gp = { .seed = 9, .nstacks = 300, .nfuncs = 120, .symbolize = true,
                             .hour = h };
    char *raw;
    size_t rl;
    struct profile *p = gen_profile(&gp, &raw, &rl);
    char *out = hp_xasprintf("%s# hour %u\n", raw, h);
    free(raw);
    *ret_len = strlen(out);
    if (ret_p)
        *ret_p = p;
    else
        profile_free(p);
    return out;
}

static void assert_raw_is(struct store *s, int64_t id, uint32_t h)
{
    size_t want_len;
    char *want = chain_raw(h, NULL, &want_len);
    void *got;
    size_t got_len;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_snapshot_raw(s, id, &got, &got_len, &err);
    if (r < 0)
        fprintf(stderr, "raw of #%lld: %s\n", (long long)id, err.data);
    assert_int_equal(r, 0);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);
    hp_buf_release(&err);
}

static int totals_line_cb(const struct store_function_total *t, void *ctx)
{
    struct hp_buf *b = ctx;
    hp_buf_printf(b, "%s\t%lld %lld %lld %lld\n", t->name, (long long)t->flat_space,
                  (long long)t->cum_space, (long long)t->flat_objects,
                  (long long)t->cum_objects);
    return 0;
}

/* Every function total of a snapshot (its rows and its packed rest), one
 * line each. */
static char *totals_text(struct store *s, int64_t id)
{
    struct hp_buf b = HP_BUF_INIT(0);
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_function_totals(s, id, totals_line_cb, &b, &err);
    if (r < 0)
        fprintf(stderr, "function totals of #%lld: %s\n", (long long)id, err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    char *out = hp_xstrdup(b.data ? b.data : "");
    hp_buf_release(&b);
    return out;
}

/* The totals of hour h's profile as a database holding only it stores them
 * (its packed rest standalone, no chain): what every chained copy must
 * read back. */
static char *totals_alone(const struct fx *f, uint32_t h)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/alone.db", f->dir);
    struct store *s;
    assert_int_equal(store_open(path, STORE_OPEN_WRITE, &s, NULL), 0);
    struct profile *p;
    size_t rl;
    char *raw = chain_raw(h, &p, &rl);
    int64_t id = put(s, node(s, "be-chain"), T0 + h * HOUR_MS, p, raw, rl);
    char *out = totals_text(s, id);
    profile_free(p);
    free(raw);
    store_close(s);
    char side[224];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
    return out;
}

static void assert_totals_are(struct store *s, int64_t id, char *const *want)
{
    char *got = totals_text(s, id);
    assert_string_equal(got, *want);
    free(got);
}

/* Each dump is a delta against the node's previous one; chains stay within
 * STORE_CHAIN_MAX (24) links, then restart from the keyframe; every dump reads back byte for byte, also
 * after a reopen, and after retention took links out of the chains. */
static void test_store_delta_chains_read_back_exact(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-chain");
    enum { HOURS = 80 };
    int64_t ids[HOURS];
    for (uint32_t h = 0; h < HOURS; h++) {
        struct profile *p;
        size_t rl;
        char *raw = chain_raw(h, &p, &rl);
        ids[h] = put(f->s, n, T0 + h * HOUR_MS, p, raw, rl);
        profile_free(p);
        free(raw);
        if (h == 30) { /* a writer that reopens continues the chain */
            store_close(f->s);
            assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
        }
    }
    int depth = max_chain(f->db, "raw_dumps");
    assert_true(depth > 1);   /* against the previous dump, not one keyframe */
    assert_true(depth <= 24); /* bounded */
    assert_true(max_chain(f->db, "sample_sets") <= 24);
    /* The packed function totals are chained the same way. */
    int ft_depth = max_chain_by(f->db, "function_totals_rest", "snapshot_id");
    assert_true(ft_depth > 1);
    assert_true(ft_depth <= 24);
    assert_int_equal(count_rows(f->db, "SELECT count(*) FROM function_totals_rest"), HOURS);
    char *want[HOURS];
    for (uint32_t h = 0; h < HOURS; h++) {
        want[h] = totals_alone(f, h);
        assert_true(strlen(want[h]) > 0);
    }
    for (uint32_t h = 0; h < HOURS; h++) {
        assert_raw_is(f->s, ids[h], h);
        assert_totals_are(f->s, ids[h], &want[h]);
    }
    /* A reindex replaces one snapshot's totals in the middle of a chain
     * (with another hour's profile: other totals): rows chained on it are
     * re-encoded, the others read as before. */
    {
        struct profile *p;
        size_t rl;
        char *raw = chain_raw(HOURS - 1, &p, &rl);
        assert_int_equal(store_snapshot_reindex(f->s, ids[40], p, NULL), 0);
        profile_free(p);
        free(raw);
        free(want[40]);
        want[40] = hp_xstrdup(want[HOURS - 1]);
    }
    for (uint32_t h = 0; h < HOURS; h++)
        assert_totals_are(f->s, ids[h], &want[h]);

    /* Thin the first two days to one per day, and drop the first 10 hours:
     * rows in the middle and at the root of chains go. */
    struct store_retain_policy pol = { .retain_s = (HOURS - 10) * 3600,
                                       .thin_after_s = (HOURS - 48) * 3600 };
    struct store_retain_result res;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_retain(f->s, &pol, T0 + HOURS * HOUR_MS, &res, &err);
    if (r < 0)
        fprintf(stderr, "retain: %s\n", err.data);
    assert_int_equal(r, 0);
    assert_true(res.snapshots_deleted > 30);
    int kept = 0;
    for (uint32_t h = 0; h < HOURS; h++) {
        struct store_snapshot_info si;
        if (store_snapshot_info(f->s, ids[h], &si, NULL) < 0)
            continue;
        assert_raw_is(f->s, ids[h], h);
        assert_totals_are(f->s, ids[h], &want[h]);
        kept++;
    }
    assert_int_equal(kept, HOURS - (int)res.snapshots_deleted);
    /* A function's trend (the reader's blob cache over the chain) reads the
     * same values as the totals of each snapshot. */
    for (int k = 0; k < 2; k++) {
        char fn[512];
        uint32_t h = k ? HOURS - 1 : HOURS - 20;
        char *last = want[h] + strlen(want[h]) - 1; /* its final newline */
        while (last > want[h] && last[-1] != '\n')
            last--;
        /* The snapshot's smallest function: one of the packed rest. */
        assert_int_equal(sscanf(last, "%511[^\t]", fn), 1);
        struct store_function_point *pts;
        size_t npts;
        assert_int_equal(store_series_function(f->s, n, fn, 0, INT64_MAX, &pts, &npts, NULL), 0);
        assert_int_equal(npts, (size_t)kept);
        for (size_t i = 0; i < npts; i++) {
            uint32_t ph = (uint32_t)((pts[i].taken_at - T0) / HOUR_MS);
            assert_true(ph < HOURS);
            char line[640];
            snprintf(line, sizeof(line), "\n%s\t%lld %lld %lld %lld\n", fn,
                     (long long)pts[i].flat_space, (long long)pts[i].cum_space,
                     (long long)pts[i].flat_objects, (long long)pts[i].cum_objects);
            char *in = hp_xasprintf("\n%s", want[ph]);
            bool zero = pts[i].flat_space == 0 && pts[i].cum_space == 0 &&
                        pts[i].flat_objects == 0 && pts[i].cum_objects == 0;
            /* A function missing from a snapshot's totals reads as zeros. */
            char *needle = hp_xasprintf("\n%s\t", fn);
            assert_true(strstr(in, line) != NULL || (zero && !strstr(in, needle)));
            free(needle);
            free(in);
        }
        free(pts);
    }
    for (uint32_t h = 0; h < HOURS; h++)
        free(want[h]);
    /* Deleted snapshots' rows went, except a keyframe that several
     * remaining rows are compressed against (one per chain, 80 rows make
     * at most 4 chains of 24 links). */
    assert_true(count_rows(f->db, "SELECT count(*) FROM raw_dumps") <= kept + 4);
    assert_true(count_rows(f->db, "SELECT count(*) FROM sample_sets") <= kept + 4);
    assert_true(count_rows(f->db, "SELECT count(*) FROM function_totals_rest") <= kept + 4);
    assert_true(count_rows(f->db, "SELECT count(*) FROM raw_dumps") < HOURS - 30);
    assert_int_equal(store_check(f->s, &err), 0);
    hp_buf_release(&err);
}

static int count_cb(const struct store_snapshot_info *si, void *ctx)
{
    (void)si;
    ++*(int *)ctx;
    return 0;
}

static int reader_count(struct store *rd, int64_t node_id)
{
    int n = 0;
    assert_int_equal(store_snapshots_list(rd, node_id, 0, INT64_MAX, false, count_cb, &n, NULL),
                     0);
    return n;
}

/* store_read_begin: a reader's statements share one view (what `query
 * leaks` relies on to take SQLite's locks once) until store_read_end; it is
 * refused inside a write batch. */
static void test_store_read_tx_one_view(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-read");
    struct gen_params gp = { .seed = 3, .nstacks = 50, .nfuncs = 20, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    put(f->s, n, T0, p, NULL, 0);
    struct store *rd;
    assert_int_equal(store_open(f->db, STORE_OPEN_READ, &rd, NULL), 0);
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(store_read_begin(rd, &err), 0);
    assert_int_equal(store_read_begin(rd, &err), 0); /* already open: fine */
    assert_int_equal(reader_count(rd, n), 1);
    put(f->s, n, T0 + HOUR_MS, p, NULL, 0);
    assert_int_equal(reader_count(rd, n), 1); /* the view it began with */
    store_read_end(rd);
    assert_int_equal(reader_count(rd, n), 2);
    store_read_end(rd); /* none open: nothing */
    store_close(rd);
    /* Not inside a writer's batch. */
    assert_int_equal(store_batch_begin(f->s, &err), 0);
    put(f->s, n, T0 + 2 * HOUR_MS, p, NULL, 0);
    hp_buf_reset(&err);
    assert_int_equal(store_read_begin(f->s, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "read transaction"));
    assert_int_equal(store_batch_commit(f->s, &err), 0);
    profile_free(p);
    hp_buf_release(&err);
}

/* Retention with reclaim: after the snapshots of an old build are gone, its
 * stacks, locations, functions, files, objects and symbol-cache entries are
 * gone too (the dictionaries equal those of a database that only ever held
 * the new build), the file shrinks, and the new build's snapshots load. */
static void test_store_retain_reclaims_dictionaries(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct profile *keep[6] = { 0 };
    int64_t keep_id[6];
    for (int h = 0; h < 60; h++) {
        bool old = h < 54;
        struct gen_params gp = { .seed = old ? 21 : 22, .nstacks = 400, .nfuncs = 300,
                                 .symbolize = true, .hour = (uint32_t)h };
        char *raw;
        size_t rl;
        struct profile *p = gen_profile(&gp, &raw, &rl);
        const char *bid = old ? "0ld0ld" : "4e4e4e";
        for (size_t i = 0; i < p->nmappings; i++)
            if (i == 0)
                p->mappings[i].build_id = profile_intern(p, bid, strlen(bid));
        int64_t id = put(f->s, n, T0 + h * HOUR_MS, p, raw, rl);
        free(raw);
        if (old) {
            profile_free(p);
        } else {
            keep[h - 54] = p;
            keep_id[h - 54] = id;
        }
    }
    struct profile_frame fr = { "f", "f.c", 1 };
    assert_int_equal(store_symcache_put(f->s, "0ld0ld", 0x10, &fr, 1, NULL), 0);
    assert_int_equal(store_symcache_put(f->s, "4e4e4e", 0x10, &fr, 1, NULL), 0);

    /* The reference: a database that only ever held the new build. */
    char *ref_db = hp_xasprintf("%s/ref.db", f->dir);
    struct store *ref;
    assert_int_equal(store_open(ref_db, STORE_OPEN_WRITE, &ref, NULL), 0);
    int64_t rn = node(ref, "be-1");
    for (int i = 0; i < 6; i++)
        put(ref, rn, T0 + (54 + i) * HOUR_MS, keep[i], NULL, 0);
    struct store_usage want, before, after;
    assert_int_equal(store_usage_get(ref, &want, NULL), 0);
    store_close(ref);

    assert_int_equal(store_usage_get(f->s, &before, NULL), 0);
    /* Another process (query retain) reclaims, while this writer's caches
     * still name the old build's rows. */
    struct store *other;
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &other, NULL), 0);
    struct store_retain_policy pol = { .retain_s = 6 * 3600, .reclaim = true };
    struct store_retain_result res;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_retain(other, &pol, T0 + 60 * HOUR_MS, &res, &err);
    store_close(other);
    if (r < 0)
        fprintf(stderr, "retain: %s\n", err.data);
    assert_int_equal(r, 0);
    assert_int_equal(res.snapshots_deleted, 54);
    assert_true(res.stacks_deleted > 0 && res.locations_deleted > 0 && res.names_deleted > 0);
    assert_true(res.objects_deleted >= 1); /* the old build (and libraries it alone mapped) */
    assert_int_equal(res.symbols_deleted, 1);
    assert_int_equal(store_usage_get(f->s, &after, NULL), 0);
    assert_int_equal(after.stacks, want.stacks);
    assert_int_equal(after.locations, want.locations);
    assert_int_equal(after.functions, want.functions);
    assert_true(after.file_bytes < before.file_bytes / 2);
    struct hp_arena a;
    hp_arena_init(&a);
    struct profile_frame *out;
    uint32_t nf;
    assert_int_equal(store_symcache_get(f->s, "0ld0ld", 0x10, &a, &out, &nf, NULL), 0);
    assert_int_equal(store_symcache_get(f->s, "4e4e4e", 0x10, &a, &out, &nf, NULL), 1);
    hp_arena_release(&a);
    for (int i = 0; i < 6; i++) {
        struct profile *p = load(f->s, keep_id[i]);
        assert_same_profile(keep[i], p);
        profile_free(p);
        profile_free(keep[i]);
    }
    /* A new snapshot of the old build after the sweep is stored whole: the
     * writer did not reuse the ids of rows the sweep deleted. */
    struct gen_params gp = { .seed = 21, .nstacks = 400, .nfuncs = 300, .symbolize = true };
    struct profile *p = gen_profile(&gp, NULL, NULL);
    int64_t id = put(f->s, n, T0 + 61 * HOUR_MS, p, NULL, 0);
    struct profile *back = load(f->s, id);
    assert_same_profile(p, back);
    profile_free(back);
    profile_free(p);
    assert_int_equal(store_check(f->s, &err), 0);
    hp_buf_release(&err);
    free(ref_db);
}

/* Hour h of the thinned history below: its release's code, drift h % 24. */
static struct profile *release_profile(uint32_t h, uint32_t every, char **raw, size_t *raw_len)
{
    struct gen_params gp = { .seed = 300 + h / every, .nstacks = RELEASE_STACKS, .nfuncs = 150,
                             .hour = h % 24, .symbolize = true };
    return gen_profile(&gp, raw, raw_len);
}

struct kept_ids {
    uint32_t h[4096];
    int64_t id[4096];
    size_t n;
};

static int kept_ids_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct kept_ids *k = ctx;
    assert_true(k->n < HP_ARRAY_SIZE(k->h));
    k->id[k->n] = si->id;
    k->h[k->n++] = (uint32_t)((si->taken_at - T0) / HOUR_MS);
    return 0;
}

/* Thinning with reclaim keeps no dictionary row for a deleted snapshot: a
 * keyframe sample set that several kept rows were compressed against stays
 * as their base (re-encoding each would cost a full set apiece), but it is
 * nobody's profile any more, and the sweep marked its stacks as in use
 * (store-bench's year: 190 stacks, 150 locations and 12 functions more than
 * a store that only ever held the kept snapshots). Now the dictionaries are
 * exactly that store's, and every kept snapshot reads back. */
static void test_store_retain_thinning_reclaims_dictionaries(void **state)
{
    struct fx *f = *state;
    const uint32_t hours = RELEASE_HOURS, every = hours / 12, thin_h = hours * 90 / 365;
    int64_t n = node(f->s, "be-1");
    assert_int_equal(store_batch_begin(f->s, NULL), 0);
    for (uint32_t h = 0; h < hours; h++) {
        char *raw;
        size_t rl;
        struct profile *p = release_profile(h, every, &raw, &rl);
        put(f->s, n, T0 + h * HOUR_MS, p, raw, rl);
        profile_free(p);
        free(raw);
        if (h % 64 == 63) {
            assert_int_equal(store_batch_commit(f->s, NULL), 0);
            assert_int_equal(store_batch_begin(f->s, NULL), 0);
        }
    }
    assert_int_equal(store_batch_commit(f->s, NULL), 0);
    struct store_retain_policy pol = { .thin_after_s = (int64_t)thin_h * 3600, .reclaim = true };
    struct store_retain_result res;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_retain(f->s, &pol, T0 + (int64_t)hours * HOUR_MS, &res, &err);
    if (r < 0)
        fprintf(stderr, "retain: %s\n", err.data);
    assert_int_equal(r, 0);
    assert_true(res.snapshots_deleted > hours / 2 && res.stacks_deleted > 0);
    struct kept_ids *kept = hp_xcalloc(1, sizeof(*kept));
    assert_int_equal(store_snapshots_list(f->s, n, 0, INT64_MAX, false, kept_ids_cb, kept, NULL),
                     0);
    /* The reference: a database that only ever held the kept snapshots. */
    char *ref_db = hp_xasprintf("%s/ref.db", f->dir);
    struct store *ref;
    assert_int_equal(store_open(ref_db, STORE_OPEN_WRITE, &ref, NULL), 0);
    int64_t rn = node(ref, "be-1");
    for (size_t i = 0; i < kept->n; i++) {
        struct profile *p = release_profile(kept->h[i], every, NULL, NULL);
        put(ref, rn, T0 + kept->h[i] * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    struct store_usage want, after;
    assert_int_equal(store_usage_get(ref, &want, NULL), 0);
    store_close(ref);
    assert_int_equal(store_usage_get(f->s, &after, NULL), 0);
    assert_int_equal(after.snapshots, (int64_t)kept->n);
    assert_int_equal(after.stacks, want.stacks);
    assert_int_equal(after.locations, want.locations);
    assert_int_equal(after.functions, want.functions);
    /* Every kept snapshot, including those whose base is a deleted one's. */
    for (size_t i = 0; i < kept->n; i++) {
        struct profile *p = load(f->s, kept->id[i]);
        struct profile *w = release_profile(kept->h[i], every, NULL, NULL);
        assert_same_profile(w, p);
        profile_free(w);
        profile_free(p);
    }
    assert_int_equal(store_check(f->s, &err), 0);
    hp_buf_release(&err);
    unlink(ref_db);
    free(ref_db);
    free(kept);
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

/* Issue 20: a writer that has not cached a node's stacks (a collector
 * started anew, or a fleet too big for its cache) finds them by the node's
 * previous profile, read by id, and not by one hash-index lookup per stack,
 * which landed each on its own page once the index outgrew the page cache
 * (a third of a 1,000-node round). More nodes than the writer keeps bases
 * for, so most bases are reloaded from the database. The ids must be the
 * ones the hash lookups give: every profile reads back exact, and no stack
 * is stored twice. */
static void test_store_stacks_found_by_node_history(void **state)
{
    struct fx *f = *state;
    enum { NODES = 12, STACKS = 300 };
    int64_t ids[NODES];
    struct store_usage u1, u2;
    for (int i = 0; i < NODES; i++) {
        char name[16];
        snprintf(name, sizeof(name), "be-%d", i);
        int64_t n = node(f->s, name);
        struct gen_params gp = { .seed = 40 + (uint64_t)i, .nstacks = STACKS, .nfuncs = 120,
                                 .symbolize = true };
        char *raw;
        size_t rl;
        struct profile *p = gen_profile(&gp, &raw, &rl);
        (void)put(f->s, n, T0, p, raw, rl);
        profile_free(p);
        free(raw);
        ids[i] = n;
    }
    assert_int_equal(store_usage_get(f->s, &u1, NULL), 0);
    store_close(f->s);
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &f->s, NULL), 0);
    size_t total = 0;
    for (int i = 0; i < NODES; i++) {
        struct gen_params gp = { .seed = 40 + (uint64_t)i, .nstacks = STACKS, .nfuncs = 120,
                                 .hour = 1, .symbolize = true };
        char *raw;
        size_t rl;
        struct profile *p = gen_profile(&gp, &raw, &rl);
        int64_t id = put(f->s, ids[i], T0 + HOUR_MS, p, raw, rl);
        struct profile *out = load(f->s, id);
        assert_same_profile(p, out);
        profile_free(out);
        total += p->nstacks;
        profile_free(p);
        free(raw);
    }
    struct store_write_counts c;
    store_write_counts_get(f->s, &c);
    assert_int_equal(store_usage_get(f->s, &u2, NULL), 0);
    /* Every stack found or stored (a stack on a location new this hour is
     * inserted without a lookup); those the hour added are new rows. */
    assert_true(c.stacks_cached + c.stacks_by_node + c.stacks_by_hash + c.stacks_inserted >=
                total);
    assert_int_equal(u2.stacks - u1.stacks, (int64_t)c.stacks_inserted);
    /* Nearly all came from the node's previous profile. */
    assert_true(c.stacks_by_node >= total * 9 / 10);
    assert_true(c.stacks_by_hash <= total / 10);
}

/* The writer looks a profile's locations and stacks up in its caches
 * before it takes the write lock and uses what it found under the lock.
 * When another process's retention reclaims those rows in between, the
 * caches start over (writer_begin) and so must what was looked up: the
 * same profile stored again gets rows that exist, and reads back. */
static void test_store_writer_after_foreign_reclaim(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    struct gen_params gp = { .seed = 9, .nstacks = 300, .nfuncs = 100, .symbolize = true };
    char *raw;
    size_t rl;
    struct profile *p = gen_profile(&gp, &raw, &rl);
    for (int h = 0; h < 2; h++) /* the second finds everything in the caches */
        (void)put(f->s, n, T0 + h * HOUR_MS, p, raw, rl);
    struct store *other;
    assert_int_equal(store_open(f->db, STORE_OPEN_WRITE, &other, NULL), 0);
    struct store_retain_policy pol = { .retain_s = 30 * 86400, .reclaim = true };
    struct store_retain_result res;
    assert_int_equal(store_retain(other, &pol, T0 + 100 * DAY_MS, &res, NULL), 0);
    assert_int_equal(res.snapshots_deleted, 2);
    struct store_usage u;
    assert_int_equal(store_usage_get(other, &u, NULL), 0);
    assert_int_equal(u.stacks, 0);
    assert_int_equal(u.locations, 0);
    store_close(other);
    int64_t id = put(f->s, n, T0 + 100 * DAY_MS, p, raw, rl);
    struct profile *out = load(f->s, id);
    assert_same_profile(p, out);
    profile_free(out);
    assert_int_equal(store_usage_get(f->s, &u, NULL), 0);
    assert_int_equal(u.stacks, (int64_t)p->nstacks);
    profile_free(p);
    free(raw);
}

static uint64_t test_varint(const unsigned char **p, const unsigned char *end)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    fail_msg("bad varint in locs_packed");
    return 0;
}

/* stacks.hash is what databases already hold: hp_hash_bytes over the
 * stack's location ids as 64-bit words, seed "STAK", the top bit dropped.
 * The writer computes it several stacks at a time and, for a node it has
 * cached, before the write lock; every stored stack, from either path
 * (the first snapshot, the next hour's new stacks), must still hash as a
 * database written before does, or a lookup would miss its stack. */
static void test_store_stack_hashes_as_stored_before(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-hash");
    for (uint32_t h = 0; h < 2; h++) {
        struct gen_params gp = { .seed = 11, .nstacks = 203, .nfuncs = 60, .hour = h,
                                 .symbolize = true };
        struct profile *p = gen_profile(&gp, NULL, NULL);
        (void)put(f->s, n, T0 + h * HOUR_MS, p, NULL, 0);
        profile_free(p);
    }
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT hash, depth, locs_packed FROM stacks", -1,
                                        &st, NULL),
                     SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *b = sqlite3_column_blob(st, 2);
        const unsigned char *end = b + sqlite3_column_bytes(st, 2);
        uint64_t depth = test_varint(&b, end);
        assert_int_equal(depth, (uint64_t)sqlite3_column_int64(st, 1));
        int64_t *ids = calloc(depth + 1, sizeof(*ids));
        assert_non_null(ids);
        for (uint64_t j = 0; j < depth; j++)
            ids[j] = (int64_t)test_varint(&b, end);
        uint64_t want = hp_hash_bytes(ids, depth * sizeof(*ids), UINT64_C(0x5354414b)) >> 1;
        assert_int_equal((uint64_t)sqlite3_column_int64(st, 0), want);
        free(ids);
        rows++;
    }
    assert_true(rows > 203); /* both snapshots' stacks, some new in the second */
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* A big raw dump is compressed on a thread while the profile is stored
 * (issue 20). When the profile fails half way, that work is waited for and
 * dropped: nothing of the snapshot is stored, nothing leaks (ASan), and
 * the node's next snapshot stores and reads back exact (its dump a delta on
 * the last one stored, not on the one that failed). */
static void test_store_failed_snapshot_drops_its_raw_dump(void **state)
{
    struct fx *f = *state;
    int64_t n = node(f->s, "be-1");
    char *raw[3];
    size_t rl[3];
    struct profile *p[3];
    for (int i = 0; i < 3; i++) {
        struct gen_params gp = { .seed = 9, .nstacks = 3000, .nfuncs = 300, .hour = (uint32_t)i,
                                 .symbolize = true };
        p[i] = gen_profile(&gp, &raw[i], &rl[i]);
    }
    assert_true(rl[1] >= 256 << 10); /* big enough for the thread */
    int64_t first = put(f->s, n, T0, p[0], raw[0], rl[0]);
    struct store_usage u1, u2;
    assert_int_equal(store_usage_get(f->s, &u1, NULL), 0);
    /* An empty stack, which the writer refuses after the raw dump started. */
    uint32_t keep = p[1]->stacks[p[1]->nstacks - 1].n;
    p[1]->stacks[p[1]->nstacks - 1].n = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t id = 0;
    assert_true(store_snapshot_insert(f->s, n, T0 + HOUR_MS, p[1], raw[1], rl[1], NULL, NULL, 0,
                                      &id, &err) < 0);
    assert_non_null(strstr(err.data, "empty"));
    hp_buf_release(&err);
    p[1]->stacks[p[1]->nstacks - 1].n = keep;
    assert_int_equal(store_usage_get(f->s, &u2, NULL), 0);
    assert_int_equal(u2.snapshots, u1.snapshots);
    assert_int_equal(u2.raw_bytes, u1.raw_bytes);
    int64_t next = put(f->s, n, T0 + 2 * HOUR_MS, p[2], raw[2], rl[2]);
    int64_t ids[2] = { first, next };
    int which[2] = { 0, 2 };
    for (int i = 0; i < 2; i++) {
        struct profile *out = load(f->s, ids[i]);
        assert_same_profile(p[which[i]], out);
        profile_free(out);
        void *rb;
        size_t len;
        assert_int_equal(store_snapshot_raw(f->s, ids[i], &rb, &len, NULL), 0);
        assert_int_equal(len, rl[which[i]]);
        assert_memory_equal(rb, raw[which[i]], len);
        free(rb);
    }
    for (int i = 0; i < 3; i++) {
        profile_free(p[i]);
        free(raw[i]);
    }
}

/* hp_mkdir_p: parents created, an existing folder is fine, a file in the
 * way is an error (ENOTDIR/EEXIST), never silently "done". */
static void test_hp_mkdir_p_creates_parents(void **state)
{
    struct fx *f = *state;
    char path[256], file[256];
    snprintf(path, sizeof(path), "%s/a/b/c", f->dir);
    assert_int_equal(hp_mkdir_p(path), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(hp_mkdir_p(path), 0);
    snprintf(file, sizeof(file), "%s/a/f", f->dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/a/f/x", f->dir);
    assert_true(hp_mkdir_p(path) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hp_sorted_search_and_intervals),
        cmocka_unit_test_setup_teardown(test_store_roundtrip_handmade, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_roundtrip_generated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_dedup_steady_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_stack_hashes_as_stored_before, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_writer_after_foreign_reclaim, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_open_refuses_bad_files, setup, teardown),
        cmocka_unit_test(test_store_time_parse_forms),
        cmocka_unit_test(test_hp_i64_add_sat),
        cmocka_unit_test_setup_teardown(test_store_selector_resolves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_selector_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_attempts_and_listings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_stats_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_node_stats_one_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_snapshots_ok_as_the_list_says, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_node_stats_by_id_then_report_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_function_totals_and_series, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_function_totals_packed_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_upgrade_adds_series_indexes, setup, teardown),
        cmocka_unit_test(test_store_sseries_builder),
        cmocka_unit_test_setup_teardown(test_store_function_series_spans_read_as_tables, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_retain_packs_a_closed_spans_series_in_one_row,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_retain_thins_and_reclaims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_delta_chains_read_back_exact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_read_tx_one_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_retain_thinning_reclaims_dictionaries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_retain_reclaims_dictionaries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_symcache_roundtrip, setup, teardown),
        cmocka_unit_test(test_hp_edit_distance_counts),
        cmocka_unit_test_setup_teardown(test_store_reader_sees_commits_during_writes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_writer_survives_foreign_retention, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_stacks_found_by_node_history, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_store_failed_snapshot_drops_its_raw_dump, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hp_mkdir_p_creates_parents, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
