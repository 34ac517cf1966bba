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
    const struct query_leak_row *r = find_func(l, "leak_tablet_schema");
    assert_non_null(r);
    assert_true(r->monotonic == 1.0);
    assert_true(r->spearman > 0.99);
    assert_true(r->rate > 0);
    r = find_func(l, "agg_hash_table_resize");
    assert_non_null(r);
    /* Two workers keep one 1 MiB block per round each: about 2 MiB/h. */
    assert_true(fabs(r->rate - 2.0 * 1048576) < 0.05 * 2.0 * 1048576);
    assert_true(r->share > 0.5 && r->share < 1.0);
    /* The transient path frees all it allocates. */
    assert_int_equal(stacks_with(l, "hash_join_build"), 0);
    assert_null(find_func(l, "hash_join_build"));
    /* Pass-through callers fold into their callee: main only reaches the
     * leak through run_round. */
    const struct query_leak_row *m = find_func(l, "main");
    if (m)
        assert_non_null(m->via);

    struct query_leak_opts o;
    query_leak_opts_init(&o);
    struct hp_buf out = HP_BUF_INIT(0);
    const struct query_leaks *ls[] = { l };
    assert_int_equal(query_render_leaks_text(ls, 1, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "leak_tablet_schema"));
    assert_non_null(strstr(out.data, "agg_hash_table_resize"));
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
    const struct query_leak_row *r = find_func(l, "leak_tablet_schema");
    assert_non_null(r);
    assert_true(r->idle_flag);
    assert_true(r->idle_growth > 0);
    query_leaks_free(l);

    l = build(s, busy, 2);
    assert_true(l->has_busy);
    assert_int_equal(l->idle_steps, 0);
    r = find_func(l, "leak_tablet_schema");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leaks_statistics),
        cmocka_unit_test(test_leaks_names_growing_paths),
        cmocka_unit_test(test_leaks_flags_growth_while_idle),
        cmocka_unit_test(test_leaks_series_shapes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
