/* query fleet and trend on real jefixture dumps: the node that holds far
 * more along a path is named with the fleet median; series of totals,
 * figures and functions come out as text, CSV and JSON. */
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

#include "query/analysis-internal.h"
#include "tests/query/qtest.h"

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_fleet_median_matches_sorting(void **state)
{
    (void)state;
    uint64_t seed = 42;
    for (size_t n = 1; n < 200; n += 7) {
        double *v = hp_xmalloc(n * sizeof(*v)), *w = hp_xmalloc(n * sizeof(*w));
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            v[i] = (double)(seed >> 40 & 1023); /* many ties */
            w[i] = v[i];
        }
        hp_qsort(w, n, sizeof(*w), dbl_cmp);
        double want = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
        assert_true(qa_median(v, n) == want);
        free(v);
        free(w);
    }
}

#define NNODES 6

static void test_fleet_names_the_outlier(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    struct profile *p[NNODES];
    struct query_folded *f[NNODES];
    struct query_snapshot snaps[NNODES];
    static const char *nodes[NNODES] = { "be-1", "be-2", "be-3", "be-4", "be-17", "be-6" };
    for (int i = 0; i < NNODES; i++) {
        /* be-17 runs eight times the work of the others. */
        const char *args[] = { "--threads", "3", "--scale", i == 4 ? "8" : "1", NULL };
        char name[32];
        snprintf(name, sizeof(name), "n%d.heap", i);
        const char *dumps[] = { name };
        assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, 1), 0);
        char *path = qt_path(dir, name);
        p[i] = qt_parse(path);
        free(path);
        assert_true(qt_symbolize(p[i], qt_jefixture()) > 0);
        f[i] = qt_fold(p[i]);
        snaps[i] = (struct query_snapshot){ .node = nodes[i], .folded = f[i] };
    }
    struct query_fleet_opts o;
    query_fleet_opts_init(&o);
    o.min_bytes = 16 * 1024; /* the fixture's paths are small */
    struct query_fleet *fl = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_fleet_build(snaps, NNODES, &o, &fl, &err), 0);
    assert_int_equal(fl->nnodes, NNODES);
    bool leak = false;
    for (size_t i = 0; i < fl->nfuncs; i++) {
        if (strcmp(fl->funcs[i].node, "be-17") != 0)
            fail_msg("%s: %s %.0f median %.0f", fl->funcs[i].node, fl->funcs[i].name,
                     fl->funcs[i].value, fl->funcs[i].median);
        if (strcmp(fl->funcs[i].name, "leak_tablet_schema") == 0) {
            leak = true;
            assert_true(fl->funcs[i].value > 4 * fl->funcs[i].median);
            assert_int_equal(fl->funcs[i].nodes_with, NNODES);
        }
    }
    assert_true(leak);
    assert_true(fl->nstacks > 0);
    for (size_t i = 0; i < fl->nstacks; i++)
        assert_string_equal(fl->stacks[i].node, "be-17");
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_fleet_text(fl, &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "be-17 holds "));
    assert_non_null(strstr(out.data, " in leak_tablet_schema against a fleet median of "));
    hp_buf_reset(&out);
    assert_int_equal(query_render_fleet_json(fl, &o, &out), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_array_size(json_object_get(root, "functions")), fl->nfuncs);
    json_decref(root);
    hp_buf_release(&out);
    query_fleet_free(fl);

    /* The default 64 MiB floor: nothing this small stands out. */
    query_fleet_opts_init(&o);
    assert_int_equal(query_fleet_build(snaps, NNODES, &o, &fl, &err), 0);
    assert_int_equal(fl->nfuncs + fl->nstacks + fl->ntotals, 0);
    query_fleet_free(fl);
    assert_int_equal(query_fleet_build(snaps, 2, &o, &fl, &err), HP_EUSAGE);
    hp_buf_release(&err);
    for (int i = 0; i < NNODES; i++) {
        query_folded_free(f[i]);
        profile_free(p[i]);
    }
    qt_tmpdir_remove(dir);
}

#define NDUMPS 4

static void test_trend_series_and_formats(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *dumps[NDUMPS] = { "t1.heap", "t2.heap", "t3.heap", "t4.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, NDUMPS), 0);
    struct profile *p[NDUMPS];
    struct query_folded *f[NDUMPS];
    struct query_snapshot snaps[NDUMPS];
    struct query_figure figs[NDUMPS][1];
    for (int i = 0; i < NDUMPS; i++) {
        char *path = qt_path(dir, dumps[i]);
        p[i] = qt_parse(path);
        free(path);
        assert_true(qt_symbolize(p[i], qt_jefixture()) > 0);
        f[i] = qt_fold(p[i]);
        figs[i][0] = (struct query_figure){ "doris_be_memory_jemalloc_allocated_bytes",
                                            1e6 * (i + 1) };
        snaps[i] = (struct query_snapshot){ .node = "be-1", .time_s = 1700000000 + 3600 * i,
                                            .folded = f[i], .figures = figs[i],
                                            .nfigures = i == 2 ? 0 : 1 };
    }
    struct query_trend_opts o;
    query_trend_opts_init(&o);
    o.function = "^(leak_tablet_schema|agg_hash_table_resize)$";
    struct query_trend *t = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(query_trend_build(snaps, NDUMPS, &o, &t, &err), 0);
    assert_int_equal(t->nrows, NDUMPS);
    assert_int_equal(t->ncols, 4);
    assert_string_equal(t->cols[0], "heap_total");
    assert_string_equal(t->cols[1], "doris_be_memory_jemalloc_allocated_bytes");
    int leak_col = strcmp(t->cols[2], "fn:leak_tablet_schema") == 0 ? 2 : 3;
    assert_string_equal(t->cols[leak_col], "fn:leak_tablet_schema");
    for (size_t i = 1; i < NDUMPS; i++) {
        assert_true(t->cells[i * t->ncols + leak_col] > t->cells[(i - 1) * t->ncols + leak_col]);
        assert_true(fabs(t->cells[i * t->ncols] - f[i]->total[PV_INUSE_SPACE]) < 1e-6);
    }
    assert_true(isnan(t->cells[2 * t->ncols + 1])); /* no figure with the third dump */

    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_trend(t, QUERY_FORMAT_CSV, &out, &err), 0);
    hp_buf_append(&out, "", 1);
    assert_true(strncmp(out.data, "time,time_unix,node,heap_total,", 31) == 0);
    size_t lines = 0;
    for (char *c = out.data; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, NDUMPS + 1);
    assert_non_null(strstr(out.data, "2023-11-14T22:13:20Z,1700000000,be-1,"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_trend(t, QUERY_FORMAT_JSON, &out, &err), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_array_size(json_object_get(root, "rows")), NDUMPS);
    json_decref(root);
    hp_buf_reset(&out);
    /* issue 17: the default text table shows the main series and fits 100
     * columns; --series all shows every one, --series picks. */
    assert_int_equal(query_render_trend(t, QUERY_FORMAT_TEXT, &out, &err), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "heap "));
    assert_non_null(strstr(out.data, "allocated"));
    assert_null(strstr(out.data, "fn:leak_tablet_schema"));
    assert_non_null(strstr(out.data, "2 more series"));
    for (char *line = out.data, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1)
        assert_true(nl - line <= 100);
    hp_buf_reset(&out);
    assert_int_equal(query_render_trend_text(t, "all", &out, &err), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "fn:leak_tablet_schema"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_trend_text(t, "1,fn:leak_tablet_schema", &out, &err), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "[1] heap_total"));
    assert_non_null(strstr(out.data, "fn:leak_tablet_schema"));
    assert_null(strstr(out.data, "doris_be_memory_jemalloc_allocated_bytes"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_trend_text(t, "bogus", &out, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "no series \"bogus\""));
    hp_buf_reset(&err);
    assert_int_equal(query_render_trend(t, QUERY_FORMAT_SVG, &out, &err), HP_EUSAGE);
    hp_buf_release(&out);
    query_trend_free(t);

    /* Without --function: the top five at the newest snapshot. */
    query_trend_opts_init(&o);
    assert_int_equal(query_trend_build(snaps, NDUMPS, &o, &t, &err), 0);
    assert_int_equal(t->ncols, 1 + 1 + 5);
    query_trend_free(t);
    o.function = "(";
    assert_int_equal(query_trend_build(snaps, NDUMPS, &o, &t, &err), HP_EUSAGE);
    hp_buf_release(&err);
    for (int i = 0; i < NDUMPS; i++) {
        query_folded_free(f[i]);
        profile_free(p[i]);
    }
    qt_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fleet_median_matches_sorting),
        cmocka_unit_test(test_fleet_names_the_outlier),
        cmocka_unit_test(test_trend_series_and_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
