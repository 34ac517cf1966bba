/* store-bench: size and speed of the store against its targets (issue 18),
 * with the way people keep heap dumps today (one gzip'ed .heap file per
 * dump) run side by side as the baseline.
 *
 *   store-bench [--smoke] [--dir DIR] [--stacks N] [--hours N] [--trend-hours N]
 *               [--query PATH]
 *
 *  1. A steady node: N hourly 20k-stack dumps of one binary that drift a
 *     little (tests/store/gen.c writes them as jemalloc heap_v2 text).
 *     Prints bytes on disk per snapshot after the first as a share of the raw
 *     dump (target <= 2%) and of gzip -6 of the dump, and the ingest rate
 *     (target >= 50 snapshots/s on one core; profiles are generated before
 *     the clock starts, symbols come with them, as from a warm cache).
 *     Then a fleet of 12 such nodes (each its own binary) stored in turn
 *     for 5 rounds, as a collector's rounds store it: more nodes than the
 *     writer keeps bases for, so some are read back each round; prints the
 *     rate beside the single node's.
 *  2. `query top NODE@T` on a 20k-stack snapshot: resolve, load, fold and
 *     render the text table (target < 30 ms), beside `query top FILE`:
 *     parsing the same dump from its .heap file and the same fold/render.
 *  3. A trend over 8,760 hourly snapshots of one node: the node's totals and
 *     one function's cumulative bytes (target < 10 ms each). With --query,
 *     `query trend NODE` end to end (CPU time as a child, best of 3) over
 *     the last 720 snapshots, beside the same command through the folded
 *     profiles (HEAPFLEET_TREND_VIA=profiles), and over all of them.
 *  4. Retention of a year: 8,760 hourly 2k-stack snapshots (raw dumps kept)
 *     of a node whose code changes every 30 days (a release: other stacks,
 *     locations and functions), thinned to the last 90 days hourly and one a
 *     day before, with reclaim and incremental vacuum (store_retain as
 *     `query retain --reclaim` runs it). Prints the file and the rows before
 *     and after, and checks "reclaims everything": the stacks, locations and
 *     functions left are exactly those of a store that only ever held the
 *     kept snapshots.
 *
 * STORE_BENCH_KEEP=1 in the environment keeps the databases for a closer
 * look (parts 1 and 3: the steady node's and the year's; part 4: before
 * and after retention); else they are removed.
 *
 * Lines starting "RESULT<tab>" (figure, value, unit, goal, peer, peer's
 * value) are what tests/bench/run-all tabulates.
 *
 * --smoke: tiny sizes in a temporary directory (removed), a few seconds; CI
 * runs it (meson suite bench-smoke) so a changed API or a broken figure
 * fails there. The full run takes minutes and wants a quiet machine. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"
#include "store/store-internal.h" /* STORE_SSERIES_SNAPSHOTS, STORE_SPAN_SNAPSHOTS */
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
/* The stored bytes of the database's stack views (store/view.c). */
static int64_t view_bytes(const char *db)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    int64_t n = 0;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT coalesce(sum(length(data)), 0) FROM stack_views", -1, &st,
                           NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

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

/* What `query top` does once it has the profile: fold, rank, render. */
static size_t render_top(const struct profile *p)
{
    struct query_opts o;
    query_opts_init(&o);
    o.top = 30;
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    if (query_fold(p, &o, &f, &err) < 0 || query_top_build(f, o.sample, &t) < 0 ||
        query_render_top_text(p, f, t, &o, &out) < 0) {
        fprintf(stderr, "store-bench: top: %s\n", err.data ? err.data : "?");
        exit(1);
    }
    size_t n = out.len;
    query_top_free(t);
    query_folded_free(f);
    hp_buf_release(&out);
    hp_buf_release(&err);
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Where the ingest's mean goes: a steady snapshot (the median of those that
 * complete nothing), and what more a snapshot that completes a group of
 * the open span (its stack series) and one that closes a span (function
 * and stack series, the node's view) take, from cpu[h] of hour h (the
 * first snapshot opened the node's first span). */
static void ingest_breakdown(const double *cpu, uint32_t hours)
{
    double *steady = hp_xmalloc((hours + 1) * sizeof(*steady));
    size_t n = 0, ngroup = 0, nspan = 0;
    for (uint32_t h = 1; h < hours; h++)
        if ((h + 1) % STORE_SSERIES_SNAPSHOTS != 0)
            steady[n++] = cpu[h];
    if (!n) {
        free(steady);
        return;
    }
    qsort(steady, n, sizeof(*steady), cmp_double);
    double med = steady[n / 2], group = 0, span = 0;
    for (uint32_t h = 1; h < hours; h++) {
        if ((h + 1) % STORE_SPAN_SNAPSHOTS == 0) {
            span += cpu[h] - med;
            nspan++;
        } else if ((h + 1) % STORE_SSERIES_SNAPSHOTS == 0) {
            group += cpu[h] - med;
            ngroup++;
        }
    }
    printf("  of which: a steady snapshot %.1f ms (median); the first %.0f ms", med, cpu[0]);
    if (ngroup)
        printf("; a group of %d completing %.0f ms more", STORE_SSERIES_SNAPSHOTS,
               group / (double)ngroup);
    if (nspan)
        printf("; a span of %d closing %.0f ms more", STORE_SPAN_SNAPSHOTS, span / (double)nspan);
    if (ngroup && nspan)
        printf(" (%.1f ms a snapshot over a span)",
               (group / (double)ngroup * (STORE_SPAN_SNAPSHOTS / STORE_SSERIES_SNAPSHOTS - 1) +
                span / (double)nspan) /
                   STORE_SPAN_SNAPSHOTS);
    printf("\n");
    free(steady);
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU ms (user + system) of one run of argv with env added, stdout and
 * stderr to /dev/null; -1 when it failed. */
static double child_cpu_ms(char *const *argv, const char *env)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (env)
            putenv((char *)env);
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3 +
           (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
}

/* Best of `runs` of child_cpu_ms; -1 when any run failed. */
static double child_best_ms(char *const *argv, const char *env, int runs)
{
    double best = 1e18;
    for (int i = 0; i < runs; i++) {
        double ms = child_cpu_ms(argv, env);
        if (ms < 0)
            return -1;
        best = ms < best ? ms : best;
    }
    return best;
}

/* The snapshot of hour h of the retention year: release h / every (its
 * code), drift step h % 24. */
static struct profile *year_profile(uint32_t h, uint32_t every, char **raw, size_t *raw_len)
{
    struct gen_params gp = { .seed = 100 + h / every, .nstacks = 2000, .nfuncs = 1500,
                             .hour = h % 24, .symbolize = true };
    return gen_profile(&gp, raw, raw_len);
}

static void year_insert(struct store *s, int64_t node, uint32_t h, uint32_t every,
                        struct hp_buf *err)
{
    char *raw;
    size_t raw_len;
    struct profile *p = year_profile(h, every, &raw, &raw_len);
    int64_t id;
    if (store_snapshot_insert(s, node, T0 + h * HOUR_MS, p, raw, raw_len, NULL, NULL, 0, &id,
                              err) < 0)
        die("retention insert", err);
    profile_free(p);
    free(raw);
}

struct kept_hours {
    uint32_t *h;
    size_t n, cap;
};

static int kept_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct kept_hours *k = ctx;
    k->h = hp_xgrow(k->h, &k->cap, k->n + 1, sizeof(*k->h));
    k->h[k->n++] = (uint32_t)((si->taken_at - T0) / HOUR_MS);
    return 0;
}

static struct store_usage usage_of(const char *db, struct hp_buf *err)
{
    struct store *s;
    struct store_usage u;
    if (store_open(db, STORE_OPEN_WRITE, &s, err) < 0 || store_usage_get(s, &u, err) < 0)
        die("usage", err);
    store_close(s); /* checkpointed: the file is all of it */
    u.file_bytes = db_bytes(db);
    return u;
}

/* 4. Retention of a year; returns non-zero when what is left is not what a
 * store of the kept snapshots alone holds. */
static int bench_retention(const char *dir, uint32_t hours, struct hp_buf *err)
{
    uint32_t every = hours / 12 ? hours / 12 : 1; /* 730 h: a release a month */
    uint32_t thin_h = (uint32_t)((uint64_t)hours * 90 / 365);
    char db[600], fresh[600];
    snprintf(db, sizeof(db), "%s/store-bench-retain-%d.db", dir, (int)getpid());
    snprintf(fresh, sizeof(fresh), "%s/store-bench-kept-%d.db", dir, (int)getpid());
    struct store *s;
    int64_t node;
    struct store_node_info ni = { .name = "be-year", .kind = "doris" };
    if (store_open(db, STORE_OPEN_WRITE, &s, err) < 0 || store_node_upsert(s, &ni, &node, err) < 0)
        die("retention db", err);
    uint64_t t0 = hp_now_ns();
    for (uint32_t h = 0; h < hours; h++)
        year_insert(s, node, h, every, err);
    double fill_s = ms_since(t0) / 1000;
    store_close(s);
    struct store_usage before = usage_of(db, err);
    /* Thin: older than 90 days (of the year's end), one a day. */
    struct store_retain_policy pol = { .thin_after_s = (int64_t)thin_h * 3600, .reclaim = true };
    struct store_retain_result rr;
    if (store_open(db, STORE_OPEN_WRITE, &s, err) < 0)
        die("retention open", err);
    t0 = hp_now_ns();
    if (store_retain(s, &pol, T0 + (int64_t)hours * HOUR_MS, &rr, err) < 0)
        die("retain", err);
    double retain_s = ms_since(t0) / 1000;
    struct kept_hours kept = { 0 };
    if (store_snapshots_list(s, node, 0, INT64_MAX, false, kept_cb, &kept, err) < 0)
        die("list kept", err);
    store_close(s);
    struct store_usage after = usage_of(db, err);
    /* The same kept snapshots, in a store that never held the others. */
    if (store_open(fresh, STORE_OPEN_WRITE, &s, err) < 0 ||
        store_node_upsert(s, &ni, &node, err) < 0)
        die("fresh db", err);
    for (size_t i = 0; i < kept.n; i++)
        year_insert(s, node, kept.h[i], every, err);
    store_close(s);
    struct store_usage scratch = usage_of(fresh, err);
    bool same = after.stacks == scratch.stacks && after.locations == scratch.locations &&
                after.functions == scratch.functions && after.snapshots == (int64_t)kept.n;
    printf("== retention: %u hourly snapshots (a release every %u h) -> the last %u h hourly, "
           "one a day before ==\n",
           hours, every, thin_h);
    printf("(filled in %.1f s; retain with reclaim and vacuum took %.1f s)\n", fill_s, retain_s);
    printf("before: %lld snapshots, %lld stacks, %lld locations, %lld functions, %.1f MB\n",
           (long long)before.snapshots, (long long)before.stacks, (long long)before.locations,
           (long long)before.functions, before.file_bytes / 1e6);
    printf("after:  %lld snapshots, %lld stacks, %lld locations, %lld functions, %.1f MB "
           "(deleted %lld snapshots, %lld raw dumps, %lld stacks, %lld locations, %lld names; "
           "%lld pages freed)\n",
           (long long)after.snapshots, (long long)after.stacks, (long long)after.locations,
           (long long)after.functions, after.file_bytes / 1e6, (long long)rr.snapshots_deleted,
           (long long)rr.raw_deleted, (long long)rr.stacks_deleted,
           (long long)rr.locations_deleted, (long long)rr.names_deleted,
           (long long)rr.pages_freed);
    printf("a store that only ever held the kept snapshots: %lld stacks, %lld locations, %lld "
           "functions, %.1f MB: %s\n",
           (long long)scratch.stacks, (long long)scratch.locations, (long long)scratch.functions,
           scratch.file_bytes / 1e6,
           same ? "retention left exactly that" : "RETENTION LEFT SOMETHING ELSE");
    printf("RESULT\tretention, a year -> 90 days + daily: file\t%.1f\tMB\t< before\t"
           "before retention\t%.1f\n",
           after.file_bytes / 1e6, before.file_bytes / 1e6);
    printf("RESULT\tretention: dictionary rows left over a fresh store\t%lld\trows\t0\t-\t-\n",
           (long long)((after.stacks - scratch.stacks) + (after.locations - scratch.locations) +
                       (after.functions - scratch.functions)));
    free(kept.h);
    if (!getenv("STORE_BENCH_KEEP")) {
        unlink(db);
        unlink(fresh);
    }
    return same && after.file_bytes < before.file_bytes ? 0 : 1;
}

/* `store-bench --top-child DB HEAP RUNS OUT`: section 2 in a fresh process,
 * as `query top` runs (its heap settings first): `runs` times resolve,
 * load, fold and render the bench's snapshot, and (HEAP not empty) parse
 * the same dump from its file and fold and render it. Writes to OUT the
 * best wall and CPU ms, mean wall ms, output bytes, then the file's best
 * wall and CPU. */
static int top_child(const char *db, const char *heap, int runs, const char *out)
{
    hp_heap_prepare();
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *rd;
    if (store_open(db, STORE_OPEN_READ, &rd, &err) < 0)
        die("open reader", &err);
    char *raw = NULL;
    size_t raw_len = 0;
    if (*heap && hp_file_read(heap, SIZE_MAX, &raw, &raw_len, &err) < 0)
        die("read the dump", &err);
    double best = 1e9, sum = 0, cbest = 1e9, file_best = 1e9, file_cpu = 1e9;
    size_t out_len = 0;
    for (int i = 0; i < runs; i++) {
        uint64_t t0 = hp_now_ns();
        double c0 = cpu_ms();
        int64_t id;
        if (store_selector_resolve(rd, "be-steady@2025-11-23T20:30:00Z", (int64_t)time(NULL) * 1000,
                                   &id, &err) < 0)
            die("resolve", &err);
        struct profile *p;
        if (store_snapshot_load(rd, id, &p, &err) < 0)
            die("load", &err);
        out_len = render_top(p);
        profile_free(p);
        double ms = ms_since(t0), cms = cpu_ms() - c0;
        sum += ms;
        best = ms < best ? ms : best;
        cbest = cms < cbest ? cms : cbest;
        if (raw) {
            t0 = hp_now_ns();
            c0 = cpu_ms();
            if (ingest_parse(raw, raw_len, NULL, &p, &err) < 0)
                die("parse", &err);
            (void)render_top(p);
            profile_free(p);
            ms = ms_since(t0);
            cms = cpu_ms() - c0;
            file_best = ms < file_best ? ms : file_best;
            file_cpu = cms < file_cpu ? cms : file_cpu;
        }
    }
    FILE *f = fopen(out, "w");
    if (!f || fprintf(f, "%.3f %.3f %.3f %zu %.3f %.3f\n", best, cbest, sum / runs, out_len,
                      raw ? file_best : 0.0, raw ? file_cpu : 0.0) < 0 ||
        fclose(f) != 0) {
        fprintf(stderr, "store-bench: writing %s failed\n", out);
        return 1;
    }
    free(raw);
    store_close(rd);
    hp_buf_release(&err);
    return 0;
}

/* 1b. A fleet stored in turn, as a collector's round stores it: more
 * nodes than the writer keeps bases for (8), each its own binary. Prints
 * the CPU of a snapshot after the first round against the single node's
 * steady figure above, and how many nodes a round had their bases read
 * back. Returns the median, or < 0 on failure. */
static double bench_fleet(const char *dir, uint32_t nstacks, int nodes, int rounds,
                          double one_node_rate, struct hp_buf *err)
{
    char db[512];
    snprintf(db, sizeof(db), "%s/store-bench-fleet-%d.db", dir, (int)getpid());
    struct store *s;
    if (store_open(db, STORE_OPEN_WRITE, &s, err) < 0)
        die("open fleet db", err);
    int64_t *ids = hp_xcalloc((size_t)nodes, sizeof(*ids));
    for (int k = 0; k < nodes; k++) {
        char name[32];
        snprintf(name, sizeof(name), "be-fleet-%d", k);
        struct store_node_info ni = { .name = name, .kind = "doris" };
        if (store_node_upsert(s, &ni, &ids[k], err) < 0)
            die("fleet node", err);
    }
    double *cpu = hp_xcalloc((size_t)(nodes * rounds) + 1, sizeof(*cpu));
    size_t n = 0;
    struct store_write_counts c0, c1;
    for (int r = 0; r < rounds; r++) {
        if (r == 1)
            store_write_counts_get(s, &c0);
        for (int k = 0; k < nodes; k++) {
            struct gen_params gp = { .seed = 1000 + (uint32_t)k, .nstacks = nstacks,
                                     .nfuncs = 4000, .hour = (uint32_t)r, .symbolize = true };
            char *raw;
            size_t raw_len;
            struct profile *p = gen_profile(&gp, &raw, &raw_len);
            double c = cpu_ms();
            int64_t id;
            if (store_snapshot_insert(s, ids[k], T0 + r * HOUR_MS, p, raw, raw_len, NULL, NULL,
                                      0, &id, err) < 0)
                die("fleet insert", err);
            if (r > 0)
                cpu[n++] = cpu_ms() - c;
            profile_free(p);
            free(raw);
        }
    }
    store_write_counts_get(s, &c1);
    qsort(cpu, n, sizeof(*cpu), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += cpu[i];
    double median = n ? cpu[n / 2] : -1;
    printf("== a fleet of %d nodes of %u stacks stored in turn, %d rounds ==\n", nodes, nstacks,
           rounds);
    printf("a snapshot after the first round: %.1f ms CPU median, %.1f mean = %.1f snapshots/s;"
           " bases read back: %.1f nodes a round (the writer keeps 8)\n",
           median, n ? sum / (double)n : 0, n ? 1000.0 * (double)n / sum : 0,
           rounds > 1 ? (double)(c1.bases_loaded - c0.bases_loaded) / (rounds - 1) : 0);
    printf("RESULT\tingest, a fleet of %d nodes in turn, snapshots per CPU second\t%.1f\t/s\t"
           "-\tone node, /s\t%.1f\n",
           nodes, n ? 1000.0 * (double)n / sum : 0, one_node_rate);
    free(cpu);
    free(ids);
    store_close(s);
    if (!getenv("STORE_BENCH_KEEP"))
        for (int k = 0; k < 3; k++) {
            char *f = hp_xasprintf("%s%s", db, k == 0 ? "" : k == 1 ? "-wal" : "-shm");
            unlink(f);
            free(f);
        }
    return median;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    char smoke_dir[64] = "";
    /* 260 hours: two spans close (every 128 snapshots) inside the measured
     * ingest, with their function series and stack series rows. */
    uint32_t nstacks = 20000, hours = 260, trend_hours = 8760;
    const char *query = NULL; /* the query executable, for the trend end to end */
    int runs = 10;
    if (argc == 6 && strcmp(argv[1], "--top-child") == 0)
        return top_child(argv[2], argv[3], atoi(argv[4]), argv[5]);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--smoke") == 0) {
            nstacks = 500;
            hours = 4;
            trend_hours = 48;
            runs = 2;
            snprintf(smoke_dir, sizeof(smoke_dir), "/tmp/hf-store-bench-XXXXXX");
            if (!mkdtemp(smoke_dir)) {
                perror("store-bench: mkdtemp");
                return 1;
            }
            dir = smoke_dir;
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--stacks") == 0 && i + 1 < argc)
            nstacks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--hours") == 0 && i + 1 < argc)
            hours = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--trend-hours") == 0 && i + 1 < argc)
            trend_hours = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--query") == 0 && i + 1 < argc)
            query = argv[++i];
        else {
            fprintf(stderr, "usage: store-bench [--smoke] [--dir DIR] [--stacks N] [--hours N] "
                            "[--trend-hours N] [--query PATH]\n");
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
    double ingest_ms = 0, ingest_cpu = 0, gen_ms = 0;
    double *snap_cpu = hp_xcalloc(hours + 1, sizeof(*snap_cpu));
    char *keep_raw = NULL;
    size_t keep_len = 0;
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
        double c0 = cpu_ms();
        if (store_snapshot_insert(s, node, T0 + h * HOUR_MS, p, raw, raw_len, NULL, NULL, 0,
                                  &last_id, &err) < 0)
            die("insert", &err);
        ingest_ms += ms_since(t0);
        snap_cpu[h] = cpu_ms() - c0;
        ingest_cpu += snap_cpu[h];
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
        if (h == (hours > 37 ? 36 : hours - 1)) { /* the snapshot `top` reads below */
            free(keep_raw);
            keep_raw = raw;
            keep_len = raw_len;
        } else {
            free(raw);
        }
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
           "(target <= 2%%), %.2fx smaller than gzip'ed .heap files\n",
           per_snap, 100.0 * per_snap / raw_avg, gz_avg / per_snap);
    printf("rows: %lld stacks, %lld locations, %lld functions\n", (long long)u.stacks,
           (long long)u.locations, (long long)u.functions);
    printf("ingest: %.1f ms CPU per snapshot = %.1f snapshots/s on one core (target >= 50/s); "
           "%.1f ms wall; generating each profile took %.1f ms (not counted)\n",
           ingest_cpu / hours, 1000.0 * hours / ingest_cpu, ingest_ms / hours, gen_ms / hours);
    ingest_breakdown(snap_cpu, hours);
    free(snap_cpu);
    /* The node's stack view (store/view.c) is one row a node, written
     * again at each span close: in the per-snapshot figure above (spread
     * over these snapshots), once in a year. */
    double view = (double)view_bytes(db);
    double year = (double)after_first + 8759.0 * (per_snap - view / (hours - 1)) + view;
    printf("of which the node's stack view (one a node): %.2f MB\n", view / 1e6);
    printf("a year of this node's hourly snapshots: %.1f MB (%.1f MB if the view grew with"
           " them); 1,000 such nodes: %.1f GB\n",
           year / 1e6, ((double)after_first + 8759.0 * per_snap) / 1e6, year * 1000 / 1e9);
    printf("RESULT\tbytes per steady hourly snapshot (%% of raw)\t%.2f\t%%\t<= 2%%\t"
           "gzip -6 .heap\t%.2f\n",
           100.0 * per_snap / raw_avg, 100.0 * gz_avg / raw_avg);
    printf("RESULT\tingest, %u-stack snapshots per CPU second\t%.1f\t/s\t>= 50/s\t-\t-\n",
           nstacks, 1000.0 * hours / ingest_cpu);
    printf("RESULT\ta year of one node (8,760 snapshots)\t%.1f\tMB\t-\t-\t-\n", year / 1e6);
    double fleet_median = bench_fleet(dir, nstacks, smoke_dir[0] ? 10 : 12, smoke_dir[0] ? 3 : 5,
                                      1000.0 * hours / ingest_cpu, &err);

    /* 2. query top NODE@T against query top FILE: in a process of its own
     * (top_child), as `query top` runs, with its heap settings
     * (hp_heap_prepare) from the start. In this process, after the
     * ingest's hundreds of MB came and went, the figure moved by half with
     * glibc's trims and mmaps and with the order of the loader's
     * allocations, which the CLI never sees. */
    char heap_path[600];
    snprintf(heap_path, sizeof(heap_path), "%s.top.heap", db);
    if (keep_raw) {
        FILE *hf = fopen(heap_path, "wb");
        if (!hf || fwrite(keep_raw, 1, keep_len, hf) != keep_len || fclose(hf) != 0) {
            fprintf(stderr, "store-bench: writing %s failed\n", heap_path);
            return 1;
        }
    }
    double best = 0, cbest = 0, mean = 0, file_best = 0, file_cpu = 0;
    size_t out_len = 0;
    {
        char figs_path[600], nruns[16], *figs = NULL;
        size_t figs_len;
        snprintf(figs_path, sizeof(figs_path), "%s.top.out", db);
        snprintf(nruns, sizeof(nruns), "%d", runs);
        char *top_argv[] = { "/proc/self/exe", "--top-child", db, keep_raw ? heap_path : "",
                             nruns, figs_path, NULL };
        if (child_cpu_ms(top_argv, NULL) < 0 ||
            hp_file_read(figs_path, 4096, &figs, &figs_len, &err) < 0 ||
            sscanf(figs, "%lf %lf %lf %zu %lf %lf", &best, &cbest, &mean, &out_len, &file_best,
                   &file_cpu) != 6) {
            fprintf(stderr, "store-bench: the top child failed\n");
            return 1;
        }
        free(figs);
        unlink(figs_path);
    }
    unlink(heap_path);
    printf("== query top NODE@T on a %u-stack snapshot (resolve + load + fold + render) ==\n",
           nstacks);
    printf("from the store: best %.1f ms wall (%.1f ms CPU), mean %.1f ms over %d runs "
           "(target < 30 ms); %zu bytes of output\n",
           best, cbest, mean, runs, out_len);
    if (keep_raw)
        printf("from the .heap file (parse %zu bytes + same fold/render): best %.1f ms wall "
               "(%.1f ms CPU): the store is %.1fx faster\n",
               keep_len, file_best, file_cpu, file_cpu / cbest);
    printf("RESULT\tquery top NODE@T, %u stacks (CPU)\t%.1f\tms\t< 30 ms\tquery top FILE\t%.1f\n",
           nstacks, cbest, keep_raw ? file_cpu : 0.0);
    free(keep_raw);
    store_close(s);
    struct store *rd;

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
    printf("node totals series: %zu points in %.1f ms (target < 10 ms)\n", npts, nbest);
    printf("function series (%s): %zu points in %.1f ms (target < 10 ms)\n", fname, fpts,
           fbest);
    printf("RESULT\ttrend, node totals over %u snapshots\t%.2f\tms\t< 10 ms\t-\t-\n",
           trend_hours, nbest);
    printf("RESULT\ttrend, one function over %u snapshots\t%.2f\tms\t< 10 ms\t-\t-\n",
           trend_hours, fbest);
    /* `query trend NODE` as a user runs it: the last 720 snapshots (--since
     * counts back from now; the year ends at T0 + trend_hours) through the
     * stored function totals and through the folded profiles, then all. */
    double cli_month = 0, cli_month_prof = 0, cli_year = 0;
    uint32_t month = trend_hours < 720 ? trend_hours : 720;
    if (query) {
        int64_t first_ms = T0 + (int64_t)(trend_hours - month) * HOUR_MS;
        char since[32];
        snprintf(since, sizeof(since), "%llds",
                 (long long)((hp_wall_ms() - first_ms) / 1000 + 1));
        char *month_argv[] = { (char *)query, "trend", "be-year", "--since", since, "--db",
                               db2, "--format", "csv", NULL };
        char *year_argv[] = { (char *)query, "trend", "be-year", "--db", db2, "--format", "csv",
                              NULL };
        cli_month = child_best_ms(month_argv, NULL, 3);
        cli_month_prof = child_best_ms(month_argv, "HEAPFLEET_TREND_VIA=profiles", 1);
        cli_year = child_best_ms(year_argv, NULL, 3);
        printf("query trend be-year (top five functions), CPU: %u snapshots %.0f ms "
               "(through folded profiles: %.0f ms, %.0fx), %u snapshots %.0f ms\n",
               month, cli_month, cli_month_prof, cli_month > 0 ? cli_month_prof / cli_month : 0,
               trend_hours, cli_year);
        printf("RESULT\tquery trend NODE, %u snapshots (CLI, CPU)\t%.0f\tms\t-\t"
               "same via folded profiles\t%.0f\n",
               month, cli_month, cli_month_prof);
        if (month < trend_hours)
            printf("RESULT\tquery trend NODE, %u snapshots (CLI, CPU)\t%.0f\tms\t-\t-\t-\n",
                   trend_hours, cli_year);
    }
    int retention_bad = bench_retention(dir, trend_hours, &err);
    if (smoke_dir[0]) {
        /* The smoke run checks that every part produced its figure. */
        int bad = npts != trend_hours || fpts != trend_hours || out_len == 0 || per_snap <= 0 ||
                  retention_bad || !(fleet_median > 0) ||
                  (query && (cli_month <= 0 || cli_month_prof <= 0 || cli_year <= 0));
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", smoke_dir);
        if (system(cmd) != 0)
            bad = 1;
        hp_buf_release(&err);
        if (bad)
            fprintf(stderr, "store-bench: smoke run: a figure is missing\n");
        return bad;
    }
    /* As part 4's: a full run left 140 MB in /tmp each time. */
    if (getenv("STORE_BENCH_KEEP")) {
        printf("database files: %s (%lld bytes), %s (%lld bytes); remove them when done\n", db,
               (long long)db_bytes(db), db2, (long long)db_bytes(db2));
    } else {
        const char *files[] = { db, db2 };
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 3; k++) {
                char *f = hp_xasprintf("%s%s", files[i], k == 0 ? "" : k == 1 ? "-wal" : "-shm");
                unlink(f);
                free(f);
            }
    }
    hp_buf_release(&err);
    return 0;
}
