/* query-bench: speed of the analysis cores on synthetic in-memory inputs
 * shaped like real fleets, and of `query leaks` over a database.
 *
 *   query-bench [--smoke] [diff|leaks|fleet|stored-leaks] [--query PATH]
 *               [--db PATH] [--write-heaps DIR]
 *
 * diff:  two profiles of 20,000 stacks (depth 24, 3,000 functions): fold
 *        both, then diff; goal < 20 ms for the diff (issue 18).
 * leaks: 100 nodes x 30 days of hourly snapshots (720), 1,000 stacks per
 *        node, fed as the store feeds them (stack ids into a per-node
 *        dictionary); the core alone, goal < 1 s in all.
 * fleet: 1,000 nodes, 400 stacks each out of a pool of 500; goal < 1 s.
 * stored-leaks: `query leaks --db` end to end (the query executable,
 *        --query PATH, its CPU time as a child, best of 3) over 100 nodes x
 *        720 hourly snapshots of 1,000-stack generated profiles
 *        (tests/store/gen.c); goal < 1 s. The database (--db, default
 *        /tmp/hf-query-bench-leaks.db, 1.8 GB) takes a quarter of an hour
 *        to write and is reused when it exists. Then the same over 10 nodes
 *        whose counts move 40% an hour (DB.churn40, a minute to write): the
 *        stored runs are short there; and over 10 nodes whose snapshots
 *        carry 50 node figures each (DB.figs50), as a Doris or StarRocks
 *        node's memory metrics make, where the main database has the two
 *        leaks reads: what a node's other figures cost it. Every node of
 *        the main database runs its own build of the binaries (nothing to
 *        share: the worst case); DB.builds2 is the same fleet on two builds
 *        (another 20 minutes to write), run with the stack cache and
 *        without it (HEAPFLEET_LEAKS_VIA=uncached) in turn. Also run
 *        without a command when --db is given.
 *
 * --smoke: the diff, and stored-leaks over 3 nodes x 24 h x 200 stacks in a
 * temporary folder: seconds; meson suite bench-smoke runs it.
 * --write-heaps DIR also writes the two diff profiles as jemalloc heap_v2
 * files (a.heap, b.heap) so tests/bench/query-bench.sh can time the `query`
 * executable against jeprof on the same input.
 *
 * Lines "RESULT<tab>figure<tab>value<tab>unit<tab>goal<tab>peer<tab>peer
 * value" are what tests/bench/run-all tabulates. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "query/query.h"
#include "store/store.h"
#include "tests/store/gen.h"

static double now_ms(void)
{
    struct timespec ts;
    /* CPU time: the bench machine is shared, and the cores are single-threaded,
     * so CPU time is the uncontended wall time. */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

#define DEPTH 24

/* Frames of pool stack k, leaf first: a shared root path, then a branch
 * that depends on k. Function f sits at address 0x400000 + 64 f. */
static size_t stack_funcs(uint64_t k, size_t nfuncs, uint32_t *out)
{
    size_t depth = 8 + (size_t)(mix(k) % (DEPTH - 8));
    for (size_t i = 0; i < depth; i++) {
        size_t level = depth - 1 - i; /* 0 = root */
        uint64_t h = level < 3 ? level : mix(k / (1 + (level < 8 ? 97 / level : 0)) * 131 + level);
        out[i] = (uint32_t)(h % nfuncs);
    }
    return depth;
}

struct synth {
    size_t nfuncs;
    const char **names; /* per function */
};

static void synth_init(struct synth *s, size_t nfuncs)
{
    s->nfuncs = nfuncs;
    s->names = hp_xmalloc(nfuncs * sizeof(*s->names));
    static const char *ns[] = { "doris::vectorized::", "doris::segment_v2::", "doris::",
                                "starrocks::pipeline::", "std::" };
    static const char *kinds[] = { "AggregationNode", "HashJoinNode", "TabletSchema",
                                   "ColumnReader", "MemTable", "PageCache", "ScanOperator",
                                   "vector<char>" };
    for (size_t f = 0; f < nfuncs; f++)
        s->names[f] = hp_xasprintf("%s%s%zu::method%zu()", ns[f % 5], kinds[(f / 5) % 8], f,
                                   f % 13);
}

static void synth_release(struct synth *s)
{
    for (size_t f = 0; f < s->nfuncs; f++)
        free((char *)s->names[f]);
    free(s->names);
}

/* A profile holding the given pool stacks with values from `salt`. */
static struct profile *synth_profile(const struct synth *s, const uint64_t *ks, size_t n,
                                     uint64_t salt, int64_t grow_on, FILE *heap)
{
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    p->scaling = PROFILE_SCALING_V2;
    p->period = 524288;
    uint32_t funcs[DEPTH], locs[DEPTH];
    if (heap)
        fprintf(heap, "heap_v2/524288\n  t*: 0: 0 [0: 0]\n");
    for (size_t i = 0; i < n; i++) {
        size_t d = stack_funcs(ks[i], s->nfuncs, funcs);
        for (size_t j = 0; j < d; j++) {
            uint64_t addr = 0x400000 + 64 * (uint64_t)funcs[j];
            uint32_t before = (uint32_t)p->nlocs;
            locs[j] = profile_location_for_address(p, addr);
            if (p->nlocs != before) {
                struct profile_frame fr = { .function = s->names[funcs[j]] };
                profile_location_set_frames(p, locs[j], &fr, 1);
            }
        }
        uint32_t st = profile_stack_add(p, locs, (uint32_t)d);
        uint64_t r = mix(ks[i] ^ salt);
        int64_t c = 1 + (int64_t)(r % 50);
        int64_t sz = 64 << (r >> 8) % 12;
        if (grow_on >= 0 && (int64_t)(ks[i] % 97) == grow_on)
            c *= 3;
        int64_t raw[PV_COUNT] = { c, c * sz, 0, 0 };
        profile_sample_add(p, st, 0, raw);
        if (heap) {
            fputc('@', heap);
            for (size_t j = 0; j < d; j++)
                fprintf(heap, " 0x%" PRIx64, (uint64_t)0x400000 + 64 * (uint64_t)funcs[j] +
                                                  (j ? 1 : 0));
            fprintf(heap, "\n  t*: %" PRId64 ": %" PRId64 " [0: 0]\n", c, c * sz);
        }
    }
    if (heap)
        fprintf(heap, "\nMAPPED_LIBRARIES:\n");
    profile_finish(p);
    return p;
}

static struct query_folded *fold(const struct profile *p)
{
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (query_fold(p, &o, &f, &err) < 0)
        abort();
    hp_buf_release(&err);
    return f;
}

static void bench_diff(const struct synth *s, const char *heapdir)
{
    enum { N = 20000 };
    uint64_t *ka = hp_xmalloc(N * sizeof(*ka)), *kb = hp_xmalloc(N * sizeof(*kb));
    for (size_t i = 0; i < N; i++) {
        ka[i] = i;
        kb[i] = i < N / 10 ? N + i : i; /* a tenth of the stacks differ */
    }
    FILE *fa = NULL, *fb = NULL;
    if (heapdir) {
        char *pa = hp_xasprintf("%s/a.heap", heapdir), *pb = hp_xasprintf("%s/b.heap", heapdir);
        fa = fopen(pa, "w");
        fb = fopen(pb, "w");
        if (!fa || !fb)
            abort();
        free(pa);
        free(pb);
    }
    struct profile *a = synth_profile(s, ka, N, 1, -1, fa);
    struct profile *b = synth_profile(s, kb, N, 2, 5, fb);
    if (fa)
        fclose(fa), fclose(fb);
    double t0 = now_ms();
    struct query_folded *xa = fold(a), *xb = fold(b);
    double t1 = now_ms();
    struct query_diff_opts o;
    query_diff_opts_init(&o);
    struct query_diff *d = NULL;
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double s0 = now_ms();
        if (query_diff_build(xa, xb, &o, &d) < 0)
            abort();
        double s1 = now_ms();
        if (s1 - s0 < best)
            best = s1 - s0;
        if (rep < 4)
            query_diff_free(d);
    }
    struct hp_buf out = HP_BUF_INIT(0);
    struct query_opts qo;
    query_opts_init(&qo);
    qo.top = 30;
    double r0 = now_ms();
    (void)query_render_diff_text(d, "a", "b", &qo, &out);
    double r1 = now_ms();
    printf("diff:  2 x %d stacks (%zu in the union, %zu functions): fold both %.1f ms, "
           "diff %.1f ms (best of 5; goal < 20 ms), text render %.1f ms\n",
           N, d->nstacks, d->nfuncs, t1 - t0, best, r1 - r0);
    printf("RESULT\tquery diff core, 2 x %d stacks\t%.1f\tms CPU\t< 20\t-\t-\n", N, best);
    hp_buf_release(&out);
    query_diff_free(d);
    query_folded_free(xa);
    query_folded_free(xb);
    profile_free(a);
    profile_free(b);
    free(ka);
    free(kb);
}

static void bench_leaks(const struct synth *s)
{
    enum { NODES = 100, T = 720, S = 1000 };
    uint64_t ks[S];
    uint32_t *ids = hp_xmalloc((size_t)T * S * sizeof(*ids));
    double *vals = hp_xmalloc((size_t)T * S * sizeof(*vals));
    struct query_snapshot *snaps = hp_xcalloc(T, sizeof(*snaps));
    double total = 0, worst = 0;
    size_t suspects = 0;
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    for (int node = 0; node < NODES; node++) {
        for (size_t i = 0; i < S; i++)
            ks[i] = (uint64_t)node * 7919 + i;
        struct profile *p = synth_profile(s, ks, S, (uint64_t)node, -1, NULL);
        struct query_folded *dict = fold(p);
        size_t ns = dict->nentries;
        for (size_t t = 0; t < T; t++) {
            for (size_t k = 0; k < ns; k++) {
                uint64_t r = mix(((uint64_t)node << 40) ^ (t << 20) ^ k);
                double base = dict->entries[k].value[PV_INUSE_SPACE];
                double noise = ((double)(r % 2001) - 1000.0) / 1000.0 * 0.2 * base;
                /* One stack in 200 leaks steadily. */
                double grow = k % 200 == 7 ? base * 0.01 * (double)t : 0;
                ids[t * S + k] = (uint32_t)k;
                vals[t * S + k] = base + noise + grow;
            }
            snaps[t] = (struct query_snapshot){ .node = "n", .time_s = 3600 * (int64_t)t,
                                                .dict = dict, .ids = ids + t * S,
                                                .id_values = vals + t * S, .nids = ns };
        }
        double t0 = now_ms();
        struct query_leaks *l = NULL;
        struct hp_buf err = HP_BUF_INIT(0);
        if (query_leaks_build(snaps, T, &o, &l, &err) < 0)
            abort();
        double t1 = now_ms();
        total += t1 - t0;
        worst = HP_MAX(worst, t1 - t0);
        suspects += l->nstacks;
        query_leaks_free(l);
        hp_buf_release(&err);
        query_folded_free(dict);
        profile_free(p);
    }
    printf("leaks: %d nodes x %d hourly snapshots x %d stacks: %.0f ms in all (goal < 1000 ms), "
           "worst node %.1f ms, %zu suspect stacks (expected %d)\n",
           NODES, T, S, total, worst, suspects, NODES * (S / 200));
    free(ids);
    free(vals);
    free(snaps);
}

static void bench_fleet(const struct synth *s)
{
    enum { NODES = 1000, S = 400, POOL = 500 };
    struct profile **ps = hp_xmalloc(NODES * sizeof(*ps));
    struct query_folded **fs = hp_xmalloc(NODES * sizeof(*fs));
    struct query_snapshot *snaps = hp_xcalloc(NODES, sizeof(*snaps));
    char **names = hp_xmalloc(NODES * sizeof(*names));
    uint64_t ks[S];
    for (int n = 0; n < NODES; n++) {
        for (size_t i = 0; i < S; i++)
            ks[i] = (uint64_t)(mix((uint64_t)n * S + i) % POOL);
        /* Nodes run the same code: most stacks are everywhere. Duplicated
         * pool picks fold together; that is fine. */
        ps[n] = synth_profile(s, ks, S, n == 17 ? 99 : 1, n == 17 ? 3 : -1, NULL);
        fs[n] = fold(ps[n]);
        names[n] = hp_xasprintf("be-%d", n);
        snaps[n] = (struct query_snapshot){ .node = names[n], .folded = fs[n] };
    }
    struct query_fleet_opts o;
    query_fleet_opts_init(&o);
    o.min_bytes = 1 << 20;
    double t0 = now_ms();
    struct query_fleet *fl = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    if (query_fleet_build(snaps, NODES, &o, &fl, &err) < 0)
        abort();
    double t1 = now_ms();
    printf("fleet: %d nodes x %d stacks (pool %d): %.0f ms (goal < 1000 ms), %zu function and "
           "%zu stack outlier rows\n",
           NODES, S, POOL, t1 - t0, fl->nfuncs, fl->nstacks);
    query_fleet_free(fl);
    hp_buf_release(&err);
    for (int n = 0; n < NODES; n++) {
        query_folded_free(fs[n]);
        profile_free(ps[n]);
        free(names[n]);
    }
    free(ps);
    free(fs);
    free(snaps);
    free(names);
}


/* ---- leaks over a database: `query leaks --db` end to end ---- */

/* What a bench database holds: `nodes` nodes x `hours` hourly snapshots of
 * `stacks`-stack symbolized profiles (tests/store/gen.c, drifting from hour
 * to hour); churn: the share (%) of counts that also move each hour; nfig:
 * node figures a snapshot; builds: 0, every node runs its own build of the
 * binaries (the fleet's worst case: nothing to share), else the nodes run
 * this many builds, node n build n % builds, as a fleet on a version or
 * two does. */
struct dbshape {
    int nodes, hours;
    uint32_t stacks;
    int churn, nfig, builds;
};

/* A database of shape `sh`, with the two tracker figures leaks reads for
 * "idle". Written once: an existing file is reused (the full size takes
 * minutes to write). */
static int stored_db(const char *db, const struct dbshape *sh)
{
    int nodes = sh->nodes, hours = sh->hours, churn = sh->churn, nfig = sh->nfig;
    uint32_t stacks = sh->stacks;
    struct stat sb;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *st = NULL;
    if (stat(db, &sb) == 0) {
        /* Written by an older heapfleet: opening it to write upgrades it
         * (readers refuse an older schema), and a retention that deletes
         * nothing packs the history written before spans into them (store
         * stack series), as `query retain` on the user's store would. */
        struct store_retain_policy keep_all = { 0 };
        struct store_retain_result rr;
        int r = store_open(db, STORE_OPEN_WRITE, &st, &err);
        if (r == 0 && (r = store_retain(st, &keep_all, 0, &rr, &err)) == 0 &&
            (rr.spans_closed || rr.views_written))
            printf("query-bench: %s: %lld spans of older snapshots packed, %lld nodes' stack"
                   " views written\n",
                   db, (long long)rr.spans_closed, (long long)rr.views_written);
        if (r < 0)
            fprintf(stderr, "query-bench: %s: %s\n", db, err.data ? err.data : "?");
        store_close(st);
        hp_buf_release(&err);
        return r < 0 ? -1 : 0;
    }
    char *tmp = hp_xasprintf("%s.tmp", db);
    unlink(tmp);
    if (store_open(tmp, STORE_OPEN_WRITE, &st, &err) < 0)
        goto fail;
    for (int n = 0; n < nodes; n++) {
        char name[32];
        snprintf(name, sizeof(name), "be-%d", n);
        struct store_node_info ni = { .name = name, .kind = "doris" };
        int64_t node;
        if (store_node_upsert(st, &ni, &node, &err) < 0 || store_batch_begin(st, &err) < 0)
            goto fail;
        for (int h = 0; h < hours; h++) {
            struct gen_params gp = { .seed = 1000 + (uint64_t)n, .nstacks = stacks,
                                     .nfuncs = 2000, .hour = (uint32_t)h, .symbolize = true,
                                     .build = sh->builds ? 1 + (uint64_t)(n % sh->builds) : 0 };
            char *raw;
            size_t raw_len;
            struct profile *p = gen_profile(&gp, &raw, &raw_len);
            /* churn: this share (%) of the counts also move by one each hour,
             * as short-lived allocations make a busy node's do (the demo's
             * dbnode, real jemalloc: 39% of values from one hour to the next). */
            for (size_t i = 0; churn && i < p->nsamples; i++) {
                uint64_t r = mix(((uint64_t)n << 40) ^ ((uint64_t)h << 20) ^ i);
                int64_t c = p->samples[i].raw[0];
                if ((int)(r % 100) < churn && c > 0) {
                    int64_t nc = HP_MAX(1, c + (int64_t)((r >> 8) % 3) - 1);
                    p->samples[i].raw[1] = p->samples[i].raw[1] / c * nc;
                    p->samples[i].raw[0] = nc;
                }
            }
            if (churn)
                profile_unsample(p);
            /* The two tracker figures leaks reads for "idle", then (nfig >
             * 2) the other memory figures a Doris or StarRocks node reports
             * each time, which leaks does not read. */
            struct store_stat stats[64] = {
                { "memory_query_trackers_sum_bytes", "bytes", (double)(h % 5) * 1e6 },
                { "memory_load_trackers_sum_bytes", "bytes", 0 },
            };
            char fig_names[64][48];
            for (int k = 2; k < nfig && k < 64; k++) {
                snprintf(fig_names[k], sizeof(fig_names[k]), "doris_be_memory_figure_%02d_bytes",
                         k);
                stats[k] = (struct store_stat){ fig_names[k], "bytes",
                                                (double)mix((uint64_t)(n * 7919 + h * 64 + k)) };
            }
            int64_t id;
            int r = store_snapshot_insert(st, node, INT64_C(1763798400000) + h * INT64_C(3600000),
                                          p, raw, raw_len, NULL, stats, (size_t)HP_MIN(nfig, 64),
                                          &id, &err);
            profile_free(p);
            free(raw);
            if (r < 0)
                goto fail;
            if (h % 64 == 63 && (store_batch_commit(st, &err) < 0 ||
                                 store_batch_begin(st, &err) < 0))
                goto fail;
        }
        if (store_batch_commit(st, &err) < 0)
            goto fail;
    }
    store_close(st);
    if (rename(tmp, db) < 0)
        abort();
    char *side = hp_xasprintf("%s-wal", tmp);
    unlink(side);
    free(side);
    side = hp_xasprintf("%s-shm", tmp);
    unlink(side);
    free(side);
    free(tmp);
    hp_buf_release(&err);
    return 0;
fail:
    fprintf(stderr, "query-bench: %s: %s\n", tmp, err.data ? err.data : "?");
    store_close(st);
    free(tmp);
    hp_buf_release(&err);
    return -1;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU seconds (user + system, every thread) of one run of argv, its stdout
 * into out; its wall time into *ret_wall when given. */
static double child_cpu_ms(char *const *argv, const char *out, double *ret_wall)
{
    double w0 = wall_ms();
    fflush(stdout); /* or the child's freopen writes our buffer a second time */
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        if (!freopen(out, "w", stdout))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "query-bench: %s failed\n", argv[0]);
        exit(1);
    }
    if (ret_wall)
        *ret_wall = wall_ms() - w0;
    return (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec / 1e3 +
           (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec / 1e3;
}

static int bench_stored_leaks(const char *query, const char *db, const struct dbshape *sh,
                              int runs, double goal_ms, double *ret_best)
{
    int nodes = sh->nodes, hours = sh->hours, churn = sh->churn, nfig = sh->nfig;
    uint32_t stacks = sh->stacks;
    if (stored_db(db, sh) < 0)
        return 1;
    char *out = hp_xasprintf("%s.leaks.txt", db);
    /* CPU time with one worker (the goal); wall time with one and with
     * the default (one per core, at most 8). */
    char *argv[] = { (char *)query, "leaks", "--db", (char *)db, "--top", "0", "--jobs", "1",
                     NULL };
    char *argv_n[] = { (char *)query, "leaks", "--db", (char *)db, "--top", "0", NULL };
    double best = 1e18, wall1 = 1e18, walln = 1e18, uncached = 1e18, w;
    for (int i = 0; i < runs; i++) {
        best = HP_MIN(best, child_cpu_ms(argv, out, &w));
        wall1 = HP_MIN(wall1, w);
        (void)child_cpu_ms(argv_n, out, &w);
        walln = HP_MIN(walln, w);
        if (sh->builds) {
            /* In turn, each node's stacks resolved on their own: what the
             * stack cache saves a fleet on a build or two. */
            setenv("HEAPFLEET_LEAKS_VIA", "uncached", 1);
            uncached = HP_MIN(uncached, child_cpu_ms(argv, out, NULL));
            unsetenv("HEAPFLEET_LEAKS_VIA");
        }
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char goal[48] = "";
    if (goal_ms > 0)
        snprintf(goal, sizeof(goal), "; goal < %.0f ms", goal_ms);
    char shape[64] = "";
    if (sh->builds)
        snprintf(shape, sizeof(shape), ", %d build%s shared by the nodes", sh->builds,
                 sh->builds > 1 ? "s" : "");
    else if (churn)
        snprintf(shape, sizeof(shape), ", counts moving hourly");
    else if (nfig > 2)
        snprintf(shape, sizeof(shape), ", %d node figures a snapshot", nfig);
    printf("leaks --db: %d nodes x %d hourly snapshots x %u stacks%s: %.0f ms CPU "
           "(best of %d%s); wall %.0f ms, %.0f ms with a worker per core (%ld)\n",
           nodes, hours, stacks, shape, best, runs, goal, wall1, walln, ncpu);
    if (ret_best)
        *ret_best = best;
    if (sh->builds) {
        printf("leaks --db, the same without the stack cache (each node's stacks resolved on "
               "their own): %.0f ms CPU; with it %.2fx of that\n",
               uncached, best / uncached);
        printf("RESULT\tquery leaks --db, %d nodes x %d h, %d builds shared\t%.0f\tms CPU\t"
               "< %.0f\tuncached, ms CPU\t%.0f\n",
               nodes, hours, sh->builds, best, goal_ms, uncached);
    } else if (nfig > 2) {
        printf("RESULT\tquery leaks --db, %d nodes x %d h, %d node figures a snapshot\t%.0f\t"
               "ms CPU\t-\t-\t-\n",
               nodes, hours, nfig, best);
    } else if (churn) {
        printf("RESULT\tquery leaks --db, %d nodes x %d h, %d%% of counts moving hourly\t%.0f\t"
               "ms CPU\t-\t-\t-\n",
               nodes, hours, churn, best);
    } else {
        printf("RESULT\tquery leaks --db, %d nodes x %d h x %u stacks\t%.0f\tms CPU\t< %.0f\t-\t-\n",
               nodes, hours, stacks, best, goal_ms);
        printf("RESULT\tquery leaks --db, same, wall, %ld cores\t%.0f\tms\t-\t--jobs 1, wall\t%.0f\n",
               ncpu, walln, wall1);
    }
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    /* The heap the query commands measured here run with (query/main.c:
     * diff, fleet, leaks), first thing. */
    hp_heap_prepare();
    const char *heapdir = NULL, *only = NULL, *query = "build/query/query", *db = NULL;
    bool smoke = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--write-heaps") == 0 && i + 1 < argc)
            heapdir = argv[++i];
        else if (strcmp(argv[i], "--query") == 0 && i + 1 < argc)
            query = argv[++i];
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db = argv[++i];
        else if (strcmp(argv[i], "--smoke") == 0)
            smoke = true;
        else if (!only && argv[i][0] != '-')
            only = argv[i]; /* diff, leaks, fleet or stored-leaks */
        else {
            fprintf(stderr, "usage: query-bench [--smoke] [diff|leaks|fleet|stored-leaks] "
                            "[--query PATH] [--db PATH] [--write-heaps DIR]\n");
            return 2;
        }
    }
    struct synth s;
    synth_init(&s, 3000);
    if (smoke) {
        /* A few seconds: the diff at full size, leaks end to end over a tiny
         * database in a temporary folder (removed). */
        char dir[] = "/tmp/hf-query-bench-XXXXXX";
        if (!mkdtemp(dir)) {
            perror("query-bench: mkdtemp");
            return 1;
        }
        char *path = hp_xasprintf("%s/leaks.db", dir);
        bench_diff(&s, NULL);
        const struct dbshape tiny = { 3, 24, 200, 0, 2, 0 };
        int r = bench_stored_leaks(query, path, &tiny, 1, 1000, NULL);
        char *cmd = hp_xasprintf("rm -rf '%s'", dir);
        if (system(cmd) != 0)
            r = 1;
        free(cmd);
        free(path);
        synth_release(&s);
        return r;
    }
    if (!only || strcmp(only, "diff") == 0 || heapdir)
        bench_diff(&s, heapdir);
    int r = 0;
    if (heapdir)
        goto out;
    if (!only || strcmp(only, "leaks") == 0)
        bench_leaks(&s);
    if (!only || strcmp(only, "fleet") == 0)
        bench_fleet(&s);
    if ((!only && db) || (only && strcmp(only, "stored-leaks") == 0)) {
        const char *path = db ? db : "/tmp/hf-query-bench-leaks.db";
        double main_ms = 0, figs_ms = 0;
        const struct dbshape full = { 100, 720, 1000, 0, 2, 0 }, churn40 = { 10, 720, 1000, 40, 2, 0 },
                             figs50 = { 10, 720, 1000, 0, 50, 0 }, fleet = { 100, 720, 1000, 0, 2, 2 };
        r = bench_stored_leaks(query, path, &full, 3, 1000, &main_ms);
        /* The same fleet on two builds of the binaries (the main database
         * gives each node its own: nothing a node resolved serves another). */
        char *shared = hp_xasprintf("%s.builds2", path);
        if (r == 0)
            r = bench_stored_leaks(query, shared, &fleet, 3, 1000, NULL);
        free(shared);
        /* The same shape where 40% of the counts move every hour, so runs
         * are short: a tenth of the nodes, no goal of its own. */
        char *churny = hp_xasprintf("%s.churn40", path);
        if (r == 0)
            r = bench_stored_leaks(query, churny, &churn40, 3, 0, NULL);
        free(churny);
        /* And where each snapshot carries 50 node figures, as a Doris or
         * StarRocks node's memory metrics make (the main database has the
         * two leaks reads): what the others cost a node, the two databases
         * run in turn (this host's speed moves within minutes). */
        char *figs = hp_xasprintf("%s.figs50", path);
        if (r == 0)
            r = bench_stored_leaks(query, figs, &figs50, 3, 0, &figs_ms);
        if (r == 0) {
            char *out = hp_xasprintf("%s.leaks.txt", figs);
            char *am[] = { (char *)query, "leaks", "--db", (char *)path, "--top", "0", "--jobs",
                           "1", NULL };
            char *af[] = { (char *)query, "leaks", "--db", figs, "--top", "0", "--jobs", "1",
                           NULL };
            main_ms = figs_ms = 1e18;
            for (int i = 0; i < 3; i++) {
                main_ms = HP_MIN(main_ms, child_cpu_ms(am, out, NULL));
                figs_ms = HP_MIN(figs_ms, child_cpu_ms(af, out, NULL));
            }
            printf("leaks --db, a node's CPU: %.1f ms with 2 node figures a snapshot, %.1f ms "
                   "with 50 (%.2fx; best of 3, run in turn)\n",
                   main_ms / 100, figs_ms / 10, (figs_ms / 10) / (main_ms / 100));
            printf("RESULT\tquery leaks --db, a node with 50 figures a snapshot against 2\t%.2f"
                   "\tx\t-\t2 figures, ms a node\t%.1f\n",
                   (figs_ms / 10) / (main_ms / 100), main_ms / 100);
            free(out);
        }
        free(figs);
    }
out:
    synth_release(&s);
    return r;
}
