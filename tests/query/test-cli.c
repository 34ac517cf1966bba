/* The `query` executable's analysis commands on real dumps: exit codes,
 * output shapes and error messages a user sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/query/qtest.h"

struct cli {
    char *dir;  /* dumps */
    char *odir; /* command output */
};

static const char *query_exe(void)
{
    const char *p = getenv("QUERY_EXE");
    assert_non_null(p);
    return p;
}

/* Run query with args; stdout into *ret_out (malloc'd), stderr appended to
 * the same file after it when merge_err. Returns the exit status. */
static int run_query(struct cli *c, const char *const *args, char **ret_out)
{
    char *argv[64];
    size_t n = 0;
    argv[n++] = (char *)query_exe();
    for (size_t i = 0; args[i] && n < 60; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char *out = qt_path(c->odir, "out.txt");
    int rc = qt_run(argv, NULL, out);
    *ret_out = qt_slurp(out);
    free(out);
    return rc;
}

static int setup(void **state)
{
    struct cli *c = hp_xcalloc(1, sizeof(*c));
    c->dir = qt_tmpdir();
    c->odir = qt_tmpdir();
    const char *dumps[] = { "s1.heap", "s2.heap", "s3.heap", "s4.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(c->dir, 0, args, dumps, 4), 0);
    char *fig = qt_path(c->dir, "s4.heap.figures");
    FILE *f = fopen(fig, "w");
    assert_non_null(f);
    fputs("# TYPE doris_be_memory_jemalloc_allocated_bytes gauge\n"
          "doris_be_memory_jemalloc_allocated_bytes 99999999\n"
          "memory_query_trackers_sum_bytes : 0\n",
          f);
    fclose(f);
    free(fig);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct cli *c = *state;
    qt_tmpdir_remove(c->dir);
    qt_tmpdir_remove(c->odir);
    free(c);
    return 0;
}

static void test_cli_diff_formats(void **state)
{
    struct cli *c = *state;
    char *a = qt_path(c->dir, "s1.heap"), *b = qt_path(c->dir, "s4.heap"), *out;
    const char *collapsed[] = { "diff", a, b, "--format", "collapsed", NULL };
    assert_int_equal(run_query(c, collapsed, &out), 0);
    /* "frames a b": the last two fields are integers. */
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    *nl = '\0';
    char *sp = strrchr(out, ' ');
    assert_non_null(sp);
    *sp = '\0';
    assert_non_null(strrchr(out, ' '));
    free(out);
    const char *json[] = { "diff", "--base", a, b, "--format", "json", "--normalize", NULL };
    assert_int_equal(run_query(c, json, &out), 0);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    assert_non_null(root);
    assert_true(json_is_true(json_object_get(root, "normalize")));
    json_decref(root);
    free(out);
    const char *text[] = { "diff", a, b, NULL };
    assert_int_equal(run_query(c, text, &out), 0);
    assert_non_null(strstr(out, "Diff of inuse_space: B minus A"));
    free(out);
    const char *one[] = { "diff", a, NULL };
    assert_int_equal(run_query(c, one, &out), 2);
    free(out);
    const char *svg[] = { "diff", a, b, "--format", "svg", NULL };
    assert_int_equal(run_query(c, svg, &out), 1);
    free(out);
    free(a);
    free(b);
}

static void test_cli_series_commands(void **state)
{
    struct cli *c = *state;
    char *out;
    const char *leaks[] = { "leaks", "be-1", "--dir", c->dir, "--step", "1h", "--format", "json",
                            NULL };
    assert_int_equal(run_query(c, leaks, &out), 0);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    assert_non_null(root);
    json_t *n0 = json_array_get(json_object_get(root, "nodes"), 0);
    assert_int_equal(json_integer_value(json_object_get(n0, "snapshots")), 4);
    assert_true(json_array_size(json_object_get(n0, "stacks")) > 0);
    json_decref(root);
    free(out);

    const char *trend[] = { "trend", "be-1", "--dir", c->dir, "--step", "1h", "--format", "csv",
                            NULL };
    assert_int_equal(run_query(c, trend, &out), 0);
    assert_non_null(strstr(out, "doris_be_memory_jemalloc_allocated_bytes"));
    assert_non_null(strstr(out, ",99999999"));
    free(out);

    const char *disc[] = { "discrepancy", "be-1", "--dir", c->dir, "--format", "json", NULL };
    assert_int_equal(run_query(c, disc, &out), 0);
    root = json_loads(out, 0, &je);
    assert_non_null(root);
    json_t *lad = json_object_get(root, "ladder");
    assert_true(json_array_size(lad) >= 5);
    json_decref(root);
    free(out);

    char *s1 = qt_path(c->dir, "s1.heap"), *s2 = qt_path(c->dir, "s2.heap"),
         *s3 = qt_path(c->dir, "s3.heap");
    const char *fleet[] = { "fleet", "--files", s1, s2, s3, "--format", "json", NULL };
    assert_int_equal(run_query(c, fleet, &out), 0);
    root = json_loads(out, 0, &je);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "nodes")), 3);
    json_decref(root);
    free(out);
    free(s1);
    free(s2);
    free(s3);
}

static void test_cli_errors_are_clear(void **state)
{
    struct cli *c = *state;
    char *out;
    /* Without files: the store is not wired yet, and the message says what
     * to do instead. (stderr goes to /dev/null in qt_run; the exit code
     * is what a script sees.) */
    const char *nofiles[] = { "leaks", "be-1", NULL };
    assert_int_equal(run_query(c, nofiles, &out), 1);
    free(out);
    const char *badsince[] = { "leaks", "--since", "soon", "--dir", c->dir, NULL };
    assert_int_equal(run_query(c, badsince, &out), 2);
    free(out);
    const char *badre[] = { "trend", "be-1", "--dir", c->dir, "--function", "(", NULL };
    assert_int_equal(run_query(c, badre, &out), 1);
    free(out);
    char *rules = qt_path(c->odir, "bad.rules");
    FILE *f = fopen(rules, "w");
    assert_non_null(f);
    fputs("[query]\nmatch = (\n", f);
    fclose(f);
    const char *badrules[] = { "discrepancy", "be-1", "--dir", c->dir, "--rules", rules, NULL };
    assert_int_equal(run_query(c, badrules, &out), 1);
    free(out);
    unlink(rules);
    free(rules);
    const char *trendnode[] = { "trend", "--dir", c->dir, NULL };
    assert_int_equal(run_query(c, trendnode, &out), 2);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_diff_formats),
        cmocka_unit_test(test_cli_series_commands),
        cmocka_unit_test(test_cli_errors_are_clear),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
