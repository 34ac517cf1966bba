/* query leaks: on six successive jefixture dumps the paths that keep memory
 * every round are named and the transient one is not; the statistics
 * behind the ranking; idle flagging from tracker figures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/query/qtest.h"

#define NDUMPS 6

struct series {
    char *dir;
    struct profile *p[NDUMPS];
    struct query_folded *f[NDUMPS];
};

static int setup(void **state)
{
    struct series *s = hp_xcalloc(1, sizeof(*s));
    s->dir = qt_tmpdir();
    const char *dumps[NDUMPS] = { "d1.heap", "d2.heap", "d3.heap",
                                  "d4.heap", "d5.heap", "d6.heap" };
    const char *args[] = { "--threads", "6", NULL };
    assert_int_equal(qt_jefixture_run(s->dir, 0, args, dumps, NDUMPS), 0);
    for (int i = 0; i < NDUMPS; i++) {
        char *path = qt_path(s->dir, dumps[i]);
        s->p[i] = qt_parse(path);
        free(path);
        assert_true(qt_symbolize(s->p[i], qt_jefixture()) > 0);
        s->f[i] = qt_fold(s->p[i]);
    }
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    struct series *s = *state;
    for (int i = 0; i < NDUMPS; i++) {
        query_folded_free(s->f[i]);
        profile_free(s->p[i]);
    }
    qt_tmpdir_remove(s->dir);
    free(s);
    return 0;
}

static bool stack_has(const struct query_leak_row *r, const char *name)
{
    for (uint32_t k = 0; k < r->nframes; k++)
        if (strcmp(r->frames[k], name) == 0)
            return true;
    return false;
}

static const struct query_leak_row *find_func(const struct query_leaks *l, const char *name)
{
    for (size_t i = 0; i < l->nfuncs; i++)
        if (strcmp(l->funcs[i].name, name) == 0)
            return &l->funcs[i];
    return NULL;
}

static size_t stacks_with(const struct query_leaks *l, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < l->nstacks; i++)
        n += stack_has(&l->stacks[i], name);
    return n;
}

static struct query_leaks *build(struct series *s, struct query_figure (*figs)[2], size_t nfigs)
{
    struct query_snapshot snaps[NDUMPS];
    /* Given out of order on purpose: the core sorts by time. */
    for (int i = 0; i < NDUMPS; i++) {
        int k = (i + 3) % NDUMPS;
        snaps[i] = (struct query_snapshot){ .node = "be-1", .time_s = 1700000000 + 3600 * k,
                                            .folded = s->f[k],
                                            .figures = figs ? figs[k] : NULL,
                                            .nfigures = figs ? nfigs : 0 };
    }
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, NDUMPS, &o, &l, &err), 0);
    hp_buf_release(&err);
    return l;
}

static void test_leaks_names_growing_paths(void **state)
{
    struct series *s = *state;
    struct query_leaks *l = build(s, NULL, 0);
    assert_int_equal(l->npoints, NDUMPS);
    assert_true(l->total_rate > 0);
    assert_false(l->has_busy);
    /* The paths that keep memory every round. */
    assert_true(stacks_with(l, "leak_tablet_schema") >= 2); /* workers and main thread */
    assert_true(stacks_with(l, "agg_hash_table_resize") >= 1);
    assert_true(stacks_with(l, "segment_cache_insert") >= 1);
    /* Functions rank by flat growth: every stack of this fixture allocates
     * through tracked_alloc, so it is the one suspect; its callers grow only
     * cumulatively and are never rows of their own. */
    const struct query_leak_row *r = find_func(l, "tracked_alloc");
    assert_non_null(r);
    assert_true(r->monotonic == 1.0);
    assert_true(r->spearman > 0.99);
    assert_true(r->rate > 0);
    assert_true(r->cum_rate >= r->rate * 0.999);
    assert_null(find_func(l, "leak_tablet_schema"));
    assert_null(find_func(l, "worker_main"));
    assert_null(find_func(l, "main"));
    /* Two workers keep one 1 MiB block per round each: about 2 MiB/h over
     * the stacks through agg_hash_table_resize. */
    double agg = 0;
    for (size_t i = 0; i < l->nstacks; i++)
        if (stack_has(&l->stacks[i], "agg_hash_table_resize"))
            agg += l->stacks[i].rate;
    assert_true(fabs(agg - 2.0 * 1048576) < 0.05 * 2.0 * 1048576);
    /* The transient path frees all it allocates. */
    assert_int_equal(stacks_with(l, "hash_join_build"), 0);
    assert_int_equal(l->nlifetimes, 1);

    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct hp_buf out = HP_BUF_INIT(0);
    const struct query_leaks *ls[] = { l };
    assert_int_equal(query_render_leaks_text(ls, 1, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "leak_tablet_schema"));
    assert_non_null(strstr(out.data, "agg_hash_table_resize"));
    assert_non_null(strstr(out.data, "Lifetimes: 1;"));
    assert_null(strstr(out.data, "hash_join_build"));
    assert_non_null(strstr(out.data, "Idle: unknown"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_leaks_json(ls, 1, &o, &out), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    json_t *n0 = json_array_get(json_object_get(root, "nodes"), 0);
    assert_int_equal(json_integer_value(json_object_get(n0, "snapshots")), NDUMPS);
    assert_true(json_array_size(json_object_get(n0, "stacks")) == l->nstacks);
    json_decref(root);
    hp_buf_release(&out);
    query_leaks_free(l);
}

static void test_leaks_flags_growth_while_idle(void **state)
{
    struct series *s = *state;
    struct query_figure idle[NDUMPS][2], busy[NDUMPS][2];
    for (int i = 0; i < NDUMPS; i++) {
        idle[i][0] = (struct query_figure){ "memory_query_trackers_sum_bytes", 0 };
        idle[i][1] = (struct query_figure){ "memory_load_trackers_sum_bytes", 1024 };
        busy[i][0] = (struct query_figure){ "starrocks_be_query_mem_bytes", 8e9 };
        busy[i][1] = (struct query_figure){ "unrelated", 0 };
    }
    struct query_leaks *l = build(s, idle, 2);
    assert_true(l->has_busy);
    assert_int_equal(l->idle_steps, NDUMPS - 1);
    const struct query_leak_row *r = find_func(l, "tracked_alloc");
    assert_non_null(r);
    assert_true(r->idle_flag);
    assert_true(r->idle_growth > 0);
    query_leaks_free(l);

    l = build(s, busy, 2);
    assert_true(l->has_busy);
    assert_int_equal(l->idle_steps, 0);
    query_leaks_free(l);

    /* Idle is relative to the node: a query tracker twice the heap is busy
     * although it is far under 64 MiB (before: "idle"). */
    struct query_figure twice[NDUMPS][2];
    for (int i = 0; i < NDUMPS; i++) {
        double heap = s->f[i]->total[PV_INUSE_SPACE];
        assert_true(2 * heap < 64.0 * 1024 * 1024);
        twice[i][0] = (struct query_figure){ "memory_query_trackers_sum_bytes", 2 * heap };
        twice[i][1] = (struct query_figure){ "memory_load_trackers_sum_bytes", 0 };
    }
    l = build(s, twice, 2);
    assert_true(l->has_busy);
    assert_int_equal(l->idle_steps, 0);
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct hp_buf out = HP_BUF_INIT(0);
    const struct query_leaks *ls[] = { l };
    assert_int_equal(query_render_leaks_text(ls, 1, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "Idle: 0 of 5 steps had query and load trackers under 5% of "
                                     "the process"));
    hp_buf_release(&out);
    r = find_func(l, "tracked_alloc");
    assert_non_null(r);
    assert_false(r->idle_flag);
    query_leaks_free(l);
}

/* The store's path: ids into a dictionary of real stacks, with series that
 * are steady (noisy), a sawtooth, a single step and a decline. */
static void test_leaks_series_shapes(void **state)
{
    struct series *s = *state;
    const struct query_folded *dict = s->f[NDUMPS - 1];
    assert_true(dict->nentries >= 4);
    enum { T = 48 };
    struct query_snapshot snaps[T];
    uint32_t ids[T][4];
    double vals[T][4];
    for (int t = 0; t < T; t++) {
        for (uint32_t k = 0; k < 4; k++)
            ids[t][k] = k;
        double noise = ((t * 7919) % 13 - 6) * 1000.0; /* deterministic jitter */
        vals[t][0] = 1e6 + 5e4 * t + noise;            /* steady growth */
        vals[t][1] = 1e6 + (t % 6) * 2e5;              /* sawtooth */
        vals[t][2] = t < T / 2 ? 1e6 : 5e6;             /* one step */
        vals[t][3] = 9e6 - 1e5 * t;                     /* shrinking */
        snaps[t] = (struct query_snapshot){ .node = "be-2", .time_s = 1800 * t, .dict = dict,
                                            .ids = ids[t], .id_values = vals[t], .nids = 4 };
    }
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, T, &o, &l, &err), 0);
    assert_int_equal(l->nstacks, 1);
    /* 5e4 per half hour: 1e5 per hour. */
    assert_true(fabs(l->stacks[0].rate - 1e5) < 2e3);
    assert_true(l->stacks[0].r2 > 0.99);
    query_leaks_free(l);

    /* Fewer than three snapshots: a clear refusal. */
    assert_int_equal(query_leaks_build(snaps, 2, &o, &l, &err), HP_EUSAGE);
    hp_buf_append(&err, "", 1);
    assert_non_null(strstr(err.data, "at least 3"));
    hp_buf_release(&err);
}

static void test_leaks_statistics(void **state)
{
    (void)state;
    double x[] = { 0, 1, 2, 3, 4 }, y[] = { 1, 3, 5, 7, 9 };
    double slope, r2;
    query_trend_fit(x, y, 5, &slope, &r2);
    assert_true(fabs(slope - 2) < 1e-12 && fabs(r2 - 1) < 1e-12);
    double y2[] = { 1, 100, 101, 1000, 1001 }; /* monotone but not linear */
    assert_true(fabs(query_spearman(x, y2, 5) - 1) < 1e-12);
    double y3[] = { 5, 4, 3, 2, 1 };
    assert_true(fabs(query_spearman(x, y3, 5) + 1) < 1e-12);
    double y4[] = { 1, 1, 1, 1, 1 };
    query_trend_fit(x, y4, 5, &slope, &r2);
    assert_true(slope == 0 && r2 == 0);
}

/* The core reads a stack's absent snapshots as 0 without visiting them
 * (its rows are sparse). Series with gaps at a lifetime's start, middle
 * and end, across a restart, with idle steps, given as stack ids against
 * one dictionary: every reported stack's figures are those of its dense
 * series, fitted here the plain way (per lifetime, every point). */
#define SP_T 30
#define SP_RESTART 15

struct sp_ref {
    double slope, r2, monotonic, step_share, idle_growth, first, last;
};

static void sp_dense(const double *y, const bool *idle, struct sp_ref *ref)
{
    size_t start[] = { 0, SP_RESTART, SP_T };
    double sxx = 0, sxy = 0, vyy = 0, rise = 0, max_up = 0, idle_growth = 0;
    size_t up = 0, down = 0;
    for (int k = 0; k < 2; k++) {
        size_t a = start[k], b = start[k + 1];
        double mx = 0, sy = 0, syy = 0;
        for (size_t t = a; t < b; t++)
            mx += (double)t / (double)(b - a);
        for (size_t t = a; t < b; t++) {
            double dx = (double)t - mx;
            sxx += dx * dx;
            sxy += dx * y[t];
            sy += y[t];
            syy += y[t] * y[t];
            if (t > a) {
                double d = y[t] - y[t - 1];
                max_up = d > max_up ? d : max_up;
                up += d > 0;
                down += d < 0;
                if (idle[t] && idle[t - 1])
                    idle_growth += d;
            }
        }
        vyy += syy - sy * sy / (double)(b - a);
        rise += y[b - 1] - y[a];
    }
    ref->slope = sxy / sxx;
    ref->r2 = vyy > 0 ? HP_MIN(1.0, sxy * sxy / (sxx * vyy)) : 0;
    ref->monotonic = up + down ? (double)up / (double)(up + down) : 0;
    ref->step_share = rise > 0 ? max_up / rise : 1;
    ref->idle_growth = idle_growth;
    ref->first = y[0];
    ref->last = y[SP_T - 1];
}

static bool sp_close(double a, double b)
{
    return fabs(a - b) <= 1e-9 * HP_MAX(1.0, HP_MAX(fabs(a), fabs(b)));
}

static void test_leaks_sparse_points_match_dense(void **state)
{
    struct series *s = *state;
    const struct query_folded *dict = s->f[NDUMPS - 1];
    size_t E = HP_MIN(dict->nentries, (size_t)4);
    assert_true(E >= 3);
    /* Entry 0: absent until hour 3 and again for the first two hours after
     * the restart; 1: absent at hours 8-9 and 27; 2: absent at hours
     * 0 and 15 (lifetimes' firsts) and 29 (the node's last); 3: absent at
     * 14 (the first lifetime's last). Each rises in all. */
    static double y[4][SP_T];
    for (size_t e = 0; e < E; e++)
        for (size_t t = 0; t < SP_T; t++) {
            size_t a = t < SP_RESTART ? 0 : SP_RESTART;
            double v = (1.0 + (double)e) * 1e8 + (5e7 + 1e6 * (double)e) * (double)(t - a) +
                       (double)((t * 7 + e * 3) % 5) * 1e6;
            bool absent = (e == 0 && (t < 3 || t == 15 || t == 16)) ||
                          (e == 1 && (t == 8 || t == 9 || t == 27)) ||
                          (e == 2 && (t == 0 || t == 15 || t == 29)) || (e == 3 && t == 14);
            y[e][t] = absent ? 0 : v;
        }
    static uint32_t ids[SP_T][4];
    static double vals[SP_T][4], vars[SP_T][4];
    static struct query_figure figs[SP_T][3];
    static bool idle[SP_T];
    struct query_snapshot snaps[SP_T];
    for (size_t t = 0; t < SP_T; t++) {
        size_t n = 0;
        for (size_t e = 0; e < E; e++)
            if (y[e][t] != 0) {
                ids[t][n] = (uint32_t)e;
                vals[t][n] = y[e][t];
                vars[t][n++] = 0; /* no sampling noise: only the shapes decide */
            }
        idle[t] = t >= 5 && t <= 12; /* trackers at 0 then, else well busy */
        figs[t][0] = (struct query_figure){ "memory_query_trackers_sum_bytes", idle[t] ? 0 : 1e10 };
        figs[t][1] = (struct query_figure){ "memory_load_trackers_sum_bytes", 0 };
        figs[t][2] = (struct query_figure){ "proc_pid", t < SP_RESTART ? 100 : 200 };
        snaps[t] = (struct query_snapshot){ .node = "be-1", .time_s = 1700000000 + 3600 * (int64_t)t,
                                            .dict = dict, .ids = ids[t], .id_values = vals[t],
                                            .id_vars = vars[t], .nids = n, .figures = figs[t],
                                            .nfigures = 3 };
    }
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    o.min_monotonic = 0; /* report every rising stack: the gaps make steps */
    o.min_spearman = -1;
    o.max_step_share = 1e9;
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, SP_T, &o, &l, &err), 0);
    assert_int_equal(l->nlifetimes, 2);
    assert_true(l->idle_steps > 0);
    struct sp_ref ref[4];
    for (size_t e = 0; e < E; e++)
        sp_dense(y[e], idle, &ref[e]);
    size_t matched = 0;
    for (size_t i = 0; i < l->nstacks; i++) {
        const struct query_leak_row *r = &l->stacks[i];
        bool found = false;
        for (size_t e = 0; e < E && !found; e++)
            found = sp_close(r->rate, ref[e].slope) && sp_close(r->r2, ref[e].r2) &&
                    sp_close(r->monotonic, ref[e].monotonic) &&
                    sp_close(r->step_share, ref[e].step_share) &&
                    sp_close(r->idle_growth, ref[e].idle_growth) && r->first == ref[e].first &&
                    r->last == ref[e].last;
        if (!found)
            fail_msg("stack row %zu (rate %g, monotonic %g, idle growth %g) matches no series",
                     i, r->rate, r->monotonic, r->idle_growth);
        matched++;
    }
    assert_int_equal(matched, E); /* every series rose: all reported */
    query_leaks_free(l);
    hp_buf_release(&err);
}

/* Folded dumps of one fresh jefixture process: NDUMPS rounds with `args`. */
static void lifetime_run(const char *dir, const char *tag, const char *const *args,
                         struct profile **ret_p, struct query_folded **ret_f)
{
    char names[NDUMPS][32];
    const char *dumps[NDUMPS];
    for (int i = 0; i < NDUMPS; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%d.heap", tag, i);
        dumps[i] = names[i];
    }
    assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, NDUMPS), 0);
    for (int i = 0; i < NDUMPS; i++) {
        char *path = qt_path(dir, dumps[i]);
        ret_p[i] = qt_parse(path);
        free(path);
        assert_true(qt_symbolize(ret_p[i], qt_jefixture()) > 0);
        ret_f[i] = qt_fold(ret_p[i]);
    }
}

/* An OOM-killed BE restarts from a small heap: six hourly snapshots of one
 * process, then six of the next, each growing. A fit across the restart
 * saw a fall and reported nothing; fitted within lifetimes the growth is
 * found, and the restart is named with where it begins. */
static void test_leaks_fits_within_lifetimes(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    struct profile *p[2 * NDUMPS];
    struct query_folded *f[2 * NDUMPS];
    const char *args[] = { "--threads", "3", "--scale", "4", NULL };
    lifetime_run(dir, "a", args, p, f);
    lifetime_run(dir, "b", args, p + NDUMPS, f + NDUMPS);
    struct query_snapshot snaps[2 * NDUMPS];
    for (int i = 0; i < 2 * NDUMPS; i++)
        snaps[i] = (struct query_snapshot){ .node = "be-9", .time_s = 1700000000 + 3600 * i,
                                            .folded = f[i] };
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, 2 * NDUMPS, &o, &l, &err), 0);
    assert_int_equal(l->nlifetimes, 2);
    assert_int_equal(l->lifetimes[1].first, NDUMPS);
    assert_int_equal(l->lifetimes[1].start_s, 1700000000 + 3600 * NDUMPS);
    assert_non_null(strstr(l->lifetimes[1].reason, "heap fell"));
    assert_int_equal(l->steps, 2 * NDUMPS - 2);
    assert_true(stacks_with(l, "leak_tablet_schema") >= 1);
    const struct query_leak_row *r = find_func(l, "tracked_alloc");
    assert_non_null(r);
    assert_true(r->spearman > 0.99);
    /* The rate is each lifetime's: about the per-hour growth of one run. */
    double per_round = (f[NDUMPS - 1]->total[PV_INUSE_SPACE] - f[0]->total[PV_INUSE_SPACE]) /
                       (NDUMPS - 1);
    assert_true(fabs(r->rate - per_round) < 0.1 * per_round);
    const struct query_leaks *ls[] = { l };
    assert_int_equal(query_render_leaks_text(ls, 1, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "Lifetimes: 2 (restarts: 2023-11-15T04:13:20Z, heap fell"));
    assert_null(strstr(out.data, "No steadily growing"));
    query_leaks_free(l);

    /* The process says so itself: a new pid is a restart even without a
     * fall, and the same pid is not one even with a fall. */
    for (int i = 0; i < 2 * NDUMPS; i++)
        snaps[i].pid = i < NDUMPS ? 100 : 200;
    assert_int_equal(query_leaks_build(snaps, 2 * NDUMPS, &o, &l, &err), 0);
    assert_int_equal(l->nlifetimes, 2);
    assert_string_equal(l->lifetimes[1].reason, "pid 100 -> 200");
    query_leaks_free(l);
    for (int i = 0; i < 2 * NDUMPS; i++)
        snaps[i].pid = 100;
    assert_int_equal(query_leaks_build(snaps, 2 * NDUMPS, &o, &l, &err), 0);
    assert_int_equal(l->nlifetimes, 1);
    query_leaks_free(l);

    /* Where no pid is known, the process start time the figures carry: the
     * agent's /proc (proc_start_time_seconds), the node's
     * process_start_time_seconds, or an uptime counted back from the
     * snapshot's time. The same start is one lifetime even across the fall;
     * a new one is a restart. */
    static const char *const names[] = { "proc_start_time_seconds", "process_start_time_seconds",
                                         "starrocks_be_process_uptime_seconds" };
    struct query_figure figs[2 * NDUMPS];
    for (size_t k = 0; k < HP_ARRAY_SIZE(names); k++) {
        bool uptime = k == 2;
        for (int same = 0; same < 2; same++) {
            for (int i = 0; i < 2 * NDUMPS; i++) {
                /* Two processes started at 1699990000 and at the second
                 * lifetime's first snapshot minus 5 minutes; uptimes carry
                 * 20 s of jitter, as fetched moments apart. */
                int64_t start = same || i < NDUMPS ? 1699990000
                                                   : 1700000000 + 3600 * NDUMPS - 300;
                figs[i].name = names[k];
                figs[i].value = uptime ? (double)(snaps[i].time_s - start) + (i % 2 ? 20 : -20)
                                       : (double)start;
                snaps[i].pid = 0;
                snaps[i].figures = &figs[i];
                snaps[i].nfigures = 1;
            }
            assert_int_equal(query_leaks_build(snaps, 2 * NDUMPS, &o, &l, &err), 0);
            if (same) {
                assert_int_equal(l->nlifetimes, 1);
            } else {
                assert_int_equal(l->nlifetimes, 2);
                assert_int_equal(l->lifetimes[1].first, NDUMPS);
                assert_non_null(strstr(l->lifetimes[1].reason, "process start time"));
            }
            query_leaks_free(l);
        }
    }
    for (int i = 0; i < 2 * NDUMPS; i++) {
        snaps[i].figures = NULL;
        snaps[i].nfigures = 0;
    }

    /* Files that share one time: a clear refusal, not "0 B/h". */
    for (int i = 0; i < NDUMPS; i++)
        snaps[i] = (struct query_snapshot){ .node = "be-9", .time_s = 1700000000,
                                            .folded = f[i] };
    hp_buf_reset(&err);
    assert_int_equal(query_leaks_build(snaps, NDUMPS, &o, &l, &err), HP_EUSAGE);
    hp_buf_append(&err, "", 1);
    assert_non_null(strstr(err.data, "same time 2023-11-14T22:13:20Z"));

    for (int i = 0; i < 2 * NDUMPS; i++) {
        query_folded_free(f[i]);
        profile_free(p[i]);
    }
    hp_buf_release(&err);
    hp_buf_release(&out);
    qt_tmpdir_remove(dir);
}

/* A handler calls two functions that call malloc themselves. Before, the
 * handler (cumulatively the sum of both) ranked first and the allocating
 * frames below it; now the allocating frames are the suspects, the
 * handler's growth is their cumulative figure, and it is no row. */
static void test_leaks_ranks_allocating_frames(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    struct profile *p[NDUMPS];
    struct query_folded *f[NDUMPS];
    const char *args[] = { "--threads", "3", "--direct", "64", NULL };
    lifetime_run(dir, "d", args, p, f);
    struct query_snapshot snaps[NDUMPS];
    for (int i = 0; i < NDUMPS; i++)
        snaps[i] = (struct query_snapshot){ .node = "be-3", .time_s = 1700000000 + 3600 * i,
                                            .folded = f[i] };
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, NDUMPS, &o, &l, &err), 0);
    assert_null(find_func(l, "http_handler"));
    assert_null(find_func(l, "run_round"));
    assert_null(find_func(l, "worker_main"));
    const struct query_leak_row *t = find_func(l, "tablet_schema_cache_grow");
    const struct query_leak_row *m = find_func(l, "make_payload");
    assert_non_null(t);
    assert_non_null(m);
    /* 64 x 8 KiB and 64 x 4 KiB a round (an hour). */
    assert_true(fabs(t->rate - 64 * 8192.0) < 0.02 * 64 * 8192.0);
    assert_true(fabs(m->rate - 64 * 4096.0) < 0.02 * 64 * 4096.0);
    assert_true(t->rate > m->rate);
    /* Its stack's suspect is the allocating frame, the leaf. */
    for (size_t i = 0; i < l->nstacks; i++)
        if (stack_has(&l->stacks[i], "http_handler"))
            assert_true(strcmp(l->stacks[i].name, "tablet_schema_cache_grow") == 0 ||
                        strcmp(l->stacks[i].name, "make_payload") == 0);
    const struct query_leaks *ls[] = { l };
    assert_int_equal(query_render_leaks_text(ls, 1, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_null(strstr(out.data, "http_handler\n"));
    assert_null(strstr(out.data, "pass-through"));
    query_leaks_free(l);
    for (int i = 0; i < NDUMPS; i++) {
        query_folded_free(f[i]);
        profile_free(p[i]);
    }
    hp_buf_release(&err);
    hp_buf_release(&out);
    qt_tmpdir_remove(dir);
}

/* Sampling noise is not growth. A steady cache of 256 KiB entries that
 * turns over two entries an hour, dumped with lg_prof_sample:16 (the demo's
 * sr-be-3): which entries happen to be sampled walks, and it walked up from
 * 45 to 48 of 48 over ten dumps, monotonic enough to be named a leak. Next
 * to it a real leak of the same blocks, a leak of 4 KiB objects, and 4 KiB
 * objects whose sampled count rose by ten in a hundred (one and a half
 * standard deviations). Dumps in jemalloc's own heap_v2 text, so the parser
 * and un-sampling run as in production. */
static void write_v2(const char *path, const int *counts, const uint64_t *sizes, size_t n)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    uint64_t tc = 0, tb = 0;
    for (size_t i = 0; i < n; i++)
        tc += (uint64_t)counts[i], tb += (uint64_t)counts[i] * sizes[i];
    fprintf(fp, "heap_v2/65536\n  t*: %llu: %llu [0: 0]\n", (unsigned long long)tc,
            (unsigned long long)tb);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, "@ 0x%zx1 0x%zx2 0x%zx3\n  t*: %d: %llu [0: 0]\n", i + 1, i + 1, i + 1,
                counts[i], (unsigned long long)((uint64_t)counts[i] * sizes[i]));
    fprintf(fp, "\nMAPPED_LIBRARIES:\n");
    fclose(fp);
}

static void test_leaks_sampling_walk_is_not_growth(void **state)
{
    (void)state;
    enum { T = 11, N = 4 };
    static const int walk[T] = { 45, 45, 46, 46, 46, 47, 47, 47, 48, 48, 48 };
    const uint64_t sizes[N] = { 256 << 10, 256 << 10, 4096, 4096 };
    char *dir = qt_tmpdir();
    struct profile *p[T];
    struct query_folded *f[T];
    struct query_snapshot snaps[T];
    for (int t = 0; t < T; t++) {
        int counts[N] = { walk[t], 24 + 2 * t, 100 + 10 * t, 100 + t };
        char name[32];
        snprintf(name, sizeof(name), "w%d.heap", t);
        char *path = qt_path(dir, name);
        write_v2(path, counts, sizes, N);
        p[t] = qt_parse(path);
        free(path);
        f[t] = qt_fold(p[t]);
        snaps[t] = (struct query_snapshot){ .node = "sr-be-3", .time_s = 1700000000 + 1080 * t,
                                            .folded = f[t] };
    }
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct query_leaks *l = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_leaks_build(snaps, T, &o, &l, &err), 0);
    /* Unsymbolized frames are named by address, the leaf first. */
    assert_int_equal(stacks_with(l, "0x0000000000000011"), 0); /* the walk */
    assert_int_equal(stacks_with(l, "0x0000000000000021"), 1); /* the leak of big blocks */
    assert_int_equal(stacks_with(l, "0x0000000000000031"), 1); /* the leak of small objects */
    assert_int_equal(stacks_with(l, "0x0000000000000041"), 0); /* small objects, noise-sized rise */
    assert_null(find_func(l, "0x0000000000000011"));
    assert_null(find_func(l, "0x0000000000000041"));
    assert_non_null(find_func(l, "0x0000000000000021"));
    assert_non_null(find_func(l, "0x0000000000000031"));
    query_leaks_free(l);
    for (int t = 0; t < T; t++) {
        query_folded_free(f[t]);
        profile_free(p[t]);
    }
    hp_buf_release(&err);
    qt_tmpdir_remove(dir);
}

/* The figures leaks reads of a stored node are the ones it asks the store
 * for (query_leak_figure_wanted): the busy trackers, the process's size,
 * id, start time and uptime; not the dozens of other memory figures a
 * node reports. A name leaks reads but does not ask for is lost. */
static void test_leaks_wants_the_figures_it_reads(void **state)
{
    (void)state;
    struct query_leak_opts o;
    query_leak_opts_init(&o);
    const char *read[] = {
        "memory_query_trackers_sum_bytes", "memory_load_trackers_sum_bytes",
        "doris_be_memory_query_trackers_sum_bytes", "doris_be_memory_load_trackers_sum_bytes",
        "starrocks_be_query_mem_bytes", "starrocks_be_load_mem_bytes",
        "mem_tracker_current_bytes{type=\"overview\",label=\"query\"}",
        "mem_tracker_current_bytes{type=\"overview\",label=\"load\"}",
        "process_rss_bytes", "process_resident_memory_bytes", "proc_pid",
        "process_start_time_seconds", "proc_start_time_seconds", "doris_be_uptime_seconds",
        "uptime_seconds",
    };
    for (size_t i = 0; i < sizeof(read) / sizeof(read[0]); i++)
        if (!query_leak_figure_wanted(&o, read[i]))
            fail_msg("not asked for: %s", read[i]);
    const char *other[] = {
        "doris_be_memory_jemalloc_allocated_bytes", "memory_metadata_trackers_sum_bytes",
        "mem_tracker_current_bytes{type=\"overview\",label=\"cache\"}",
        "starrocks_be_process_mem_bytes", "uptime_seconds{job=\"be\"}", "uptime_secs", "",
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        if (query_leak_figure_wanted(&o, other[i]))
            fail_msg("asked for: %s", other[i]);
    /* A busy list of the caller's replaces the built-in one. */
    const char *const mine[] = { "my_query_bytes", NULL };
    o.busy_figures = mine;
    assert_true(query_leak_figure_wanted(&o, "my_query_bytes"));
    assert_false(query_leak_figure_wanted(&o, "memory_query_trackers_sum_bytes"));
    assert_true(query_leak_figure_wanted(&o, "process_rss_bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaks_statistics),
        cmocka_unit_test(test_leaks_wants_the_figures_it_reads),
        cmocka_unit_test(test_leaks_names_growing_paths),
        cmocka_unit_test(test_leaks_flags_growth_while_idle),
        cmocka_unit_test(test_leaks_series_shapes),
        cmocka_unit_test(test_leaks_fits_within_lifetimes),
        cmocka_unit_test(test_leaks_ranks_allocating_frames),
        cmocka_unit_test(test_leaks_sampling_walk_is_not_growth),
        cmocka_unit_test(test_leaks_sparse_points_match_dense),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
