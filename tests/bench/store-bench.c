/* store-bench: size and speed of the store against its targets (issue 4),
 * with the way people keep heap dumps today (one gzip'ed .heap file per
 * dump) run side by side as the baseline.
 *
 *   store-bench [--dir DIR] [--stacks N] [--hours N] [--trend-hours N]
 *
 *  1. A steady node: N hourly 20k-stack dumps of one binary that drift a
 *     little (tests/store/gen.c writes them as jemalloc heap_v2 text).
 *     Prints bytes on disk per snapshot after the first as a share of the raw
 *     dump (target <= 5%) and of gzip -6 of the dump, and the ingest rate
 *     (target >= 50 snapshots/s on one core; profiles are generated before
 *     the clock starts, symbols come with them, as from a warm cache).
 *  2. Loading one 20k-stack snapshot and aggregating a flat top (target
 *     < 50 ms), against parsing nothing at all: the time is the store's.
 *  3. A trend over 8,760 hourly snapshots of one node: the node's totals and
 *     one function's cumulative bytes (target < 100 ms each).
 *
 * Not part of `meson test`: it takes a minute and wants a quiet machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "store/store.h"
#include "tests/store/gen.h"

#define HOUR_MS INT64_C(3600000)
#define T0 INT64_C(1763798400000)

static double ms_since(uint64_t t0)
{
    return (double)(hp_now_ns() - t0) / 1e6;
}

static int64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* Database bytes: main file plus WAL (checkpointed by the caller). */
static int64_t db_bytes(const char *db)
{
    char wal[600];
    snprintf(wal, sizeof(wal), "%s-wal", db);
    return file_size(db) + file_size(wal);
}

static void die(const char *what, struct hp_buf *err)
{
    fprintf(stderr, "store-bench: %s: %s\n", what, err->data ? err->data : "?");
    exit(1);
}

static size_t gzip_size(const char *data, size_t len)
{
    uLongf out = compressBound(len);
    unsigned char *buf = malloc(out);
    if (!buf || compress2(buf, &out, (const Bytef *)data, len, 6) != Z_OK)
        abort();
    free(buf);
    return out;
}

static int64_t flat_top(const struct profile *p)
{
    /* A flat top: un-sampled in-use bytes by leaf function, what `query top`
     * computes first. */
    struct hp_map64 idx;
    hp_map64_init(&idx);
    double *acc = calloc(p->nframes + 1, sizeof(*acc));
    uint32_t n = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *s = &p->samples[i];
        const uint32_t *locs = profile_stack_locs(p, s->stack);
        uint32_t k = 0;
        while (k + 1 < p->stacks[s->stack].n && (p->locs[locs[k]].flags & PROFILE_LOC_ALLOCATOR))
            k++;
        const struct profile_location *l = &p->locs[locs[k]];
        uint64_t key = l->nframes ? (uint64_t)(uintptr_t)p->frames[l->frame_off].function
                                  : l->address;
        uint32_t v;
        if (!hp_map64_get(&idx, key, &v))
            (void)hp_map64_put(&idx, key, v = n++, &v);
        acc[v] += s->value[PV_INUSE_SPACE];
    }
    double best = 0;
    for (uint32_t i = 0; i < n; i++)
        if (acc[i] > best)
            best = acc[i];
    free(acc);
    hp_map64_release(&idx);
    return (int64_t)best;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    uint32_t nstacks = 20000, hours = 120, trend_hours = 8760;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--stacks") == 0 && i + 1 < argc)
            nstacks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--hours") == 0 && i + 1 < argc)
            hours = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--trend-hours") == 0 && i + 1 < argc)
            trend_hours = (uint32_t)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: store-bench [--dir DIR] [--stacks N] [--hours N] "
                            "[--trend-hours N]\n");
            return 2;
        }
    }
    char db[512];
    snprintf(db, sizeof(db), "%s/store-bench-%d.db", dir, (int)getpid());
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *s;
    if (store_open(db, STORE_OPEN_WRITE, &s, &err) < 0)
        die("open", &err);
    int64_t node;
    struct store_node_info ni = { .name = "be-steady", .kind = "doris" };
    if (store_node_upsert(s, &ni, &node, &err) < 0)
        die("node", &err);

    /* 1. steady node */
    printf("== steady node: %u hourly snapshots of %u stacks ==\n", hours, nstacks);
    double ingest_ms = 0, gen_ms = 0;
    int64_t raw_total = 0, gz_total = 0, after_first = 0, raw_first = 0;
    int64_t last_id = 0;
    for (uint32_t h = 0; h < hours; h++) {
        struct gen_params gp = { .seed = 42, .nstacks = nstacks, .nfuncs = 4000, .hour = h,
                                 .nthreads = 0, .symbolize = true };
        char *raw;
        size_t raw_len;
        uint64_t g0 = hp_now_ns();
        struct profile *p = gen_profile(&gp, &raw, &raw_len);
        gen_ms += ms_since(g0);
        uint64_t t0 = hp_now_ns();
        if (store_snapshot_insert(s, node, T0 + h * HOUR_MS, p, raw, raw_len, NULL, NULL, 0,
                                  &last_id, &err) < 0)
            die("insert", &err);
        ingest_ms += ms_since(t0);
        if (h == 0) {
            store_close(s); /* checkpoint, so the file holds the first snapshot */
            if (store_open(db, STORE_OPEN_WRITE, &s, &err) < 0)
                die("reopen", &err);
            after_first = db_bytes(db);
            raw_first = (int64_t)raw_len;
        } else {
            raw_total += (int64_t)raw_len;
            gz_total += (int64_t)gzip_size(raw, raw_len);
        }
        profile_free(p);
        free(raw);
    }
    store_close(s);
    if (store_open(db, STORE_OPEN_WRITE, &s, &err) < 0)
        die("reopen", &err);
    int64_t total = db_bytes(db);
    double per_snap = (double)(total - after_first) / (hours - 1);
    double raw_avg = (double)raw_total / (hours - 1), gz_avg = (double)gz_total / (hours - 1);
    struct store_usage u;
    if (store_usage_get(s, &u, &err) < 0)
        die("usage", &err);
    printf("raw dump: %.0f bytes (first %lld); gzip -6 of it: %.0f bytes\n", raw_avg,
           (long long)raw_first, gz_avg);
    printf("database: %lld bytes after the first snapshot, %lld after %u\n",
           (long long)after_first, (long long)total, hours);
    printf("bytes on disk per snapshot after the first: %.0f = %.2f%% of the raw dump "
           "(target <= 5%%), %.2fx smaller than gzip'ed .heap files\n",
           per_snap, 100.0 * per_snap / raw_avg, gz_avg / per_snap);
    printf("rows: %lld stacks, %lld locations, %lld functions\n", (long long)u.stacks,
           (long long)u.locations, (long long)u.functions);
    printf("ingest: %.1f ms per snapshot = %.1f snapshots/s (target >= 50/s); "
           "generating each profile took %.1f ms (not counted)\n",
           ingest_ms / hours, 1000.0 * hours / ingest_ms, gen_ms / hours);

    /* 2. load + top */
    double best = 1e9, sum = 0;
    int runs = 10;
    int64_t top = 0;
    struct store *rd;
    if (store_open(db, STORE_OPEN_READ, &rd, &err) < 0)
        die("open reader", &err);
    for (int i = 0; i < runs; i++) {
        uint64_t t0 = hp_now_ns();
        int64_t id;
        if (store_selector_resolve(rd, "be-steady@2025-11-23T12:00:00Z", T0, &id, &err) < 0)
            die("resolve", &err);
        struct profile *p;
        if (store_snapshot_load(rd, id, &p, &err) < 0)
            die("load", &err);
        top = flat_top(p);
        profile_free(p);
        double ms = ms_since(t0);
        sum += ms;
        if (ms < best)
            best = ms;
    }
    printf("== top NODE@T on a %u-stack snapshot (resolve + load + flat top) ==\n", nstacks);
    printf("load+top: best %.1f ms, mean %.1f ms over %d runs (target < 50 ms); top "
           "function %lld bytes\n",
           best, sum / runs, runs, (long long)top);
    store_close(rd);
    store_close(s);

    /* 3. trend over a year of hourly snapshots (2k-stack profiles keep the
     * setup short; the trend reads per-snapshot rows, not stacks). */
    char db2[600];
    snprintf(db2, sizeof(db2), "%s/store-bench-trend-%d.db", dir, (int)getpid());
    if (store_open(db2, STORE_OPEN_WRITE, &s, &err) < 0)
        die("open trend db", &err);
    ni.name = "be-year";
    if (store_node_upsert(s, &ni, &node, &err) < 0)
        die("node", &err);
    struct profile *variants[24];
    for (int v = 0; v < 24; v++) {
        struct gen_params gp = { .seed = 7, .nstacks = 2000, .nfuncs = 1500,
                                 .hour = (uint32_t)v, .symbolize = true };
        variants[v] = gen_profile(&gp, NULL, NULL);
    }
    uint64_t t0 = hp_now_ns();
    for (uint32_t h = 0; h < trend_hours; h++) {
        int64_t id;
        if (store_snapshot_insert(s, node, T0 + h * HOUR_MS, variants[h % 24], NULL, 0, NULL,
                                  NULL, 0, &id, &err) < 0)
            die("insert", &err);
    }
    double fill = ms_since(t0);
    for (int v = 0; v < 24; v++)
        profile_free(variants[v]);
    /* The function with the most cumulative bytes in the last snapshot. */
    char fname[512] = "";
    {
        struct store_point *pts;
        size_t n;
        if (store_series_node(s, node, 0, INT64_MAX, NULL, &pts, &n, &err) < 0)
            die("series", &err);
        int64_t last = pts[n - 1].snapshot_id;
        free(pts);
        struct profile *p;
        if (store_snapshot_load(s, last, &p, &err) < 0)
            die("load", &err);
        for (size_t i = 0; i < p->nframes && !fname[0]; i++)
            if (p->frames[i].function && strncmp(p->frames[i].function, "je_", 3) != 0)
                snprintf(fname, sizeof(fname), "%s", p->frames[i].function);
        profile_free(p);
    }
    store_close(s);
    if (store_open(db2, STORE_OPEN_READ, &rd, &err) < 0)
        die("open reader", &err);
    double nbest = 1e9, fbest = 1e9;
    size_t npts = 0, fpts = 0;
    for (int i = 0; i < runs; i++) {
        uint64_t a = hp_now_ns();
        struct store_point *pts;
        if (store_series_node(rd, node, 0, INT64_MAX, "rss", &pts, &npts, &err) < 0)
            die("series", &err);
        free(pts);
        double ms = ms_since(a);
        nbest = ms < nbest ? ms : nbest;
        a = hp_now_ns();
        struct store_function_point *fp;
        if (store_series_function(rd, node, fname, 0, INT64_MAX, &fp, &fpts, &err) < 0)
            die("function series", &err);
        free(fp);
        ms = ms_since(a);
        fbest = ms < fbest ? ms : fbest;
    }
    store_close(rd);
    printf("== trend over %u hourly snapshots of one node ==\n", trend_hours);
    printf("(filled in %.1f s: %.0f snapshots/s of 2k stacks)\n", fill / 1000,
           trend_hours * 1000.0 / fill);
    printf("node totals series: %zu points in %.1f ms (target < 100 ms)\n", npts, nbest);
    printf("function series (%s): %zu points in %.1f ms (target < 100 ms)\n", fname, fpts,
           fbest);
    printf("database files: %s (%lld bytes), %s (%lld bytes); remove them when done\n", db,
           (long long)db_bytes(db), db2, (long long)db_bytes(db2));
    hp_buf_release(&err);
    return 0;
}
