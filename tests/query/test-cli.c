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
    /* Names do not matter here; symbolizing every file each run is slow
     * under the sanitizers. (test-stored reads symbolized profiles.) */
    argv[n++] = "--no-symbolize";
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
    assert_int_equal(run_query(c, svg, &out), 0);
    assert_non_null(strstr(out, "<svg"));
    assert_non_null(strstr(out, "</svg>"));
    free(out);
    const char *dot[] = { "diff", a, b, "--format", "dot", NULL };
    assert_int_equal(run_query(c, dot, &out), 1);
    free(out);
    free(a);
    free(b);
}

/* Two processes' dumps in one folder, named as jemalloc names them
 * (<prefix>.<pid>.<seq>.i.heap): the pid in the name splits lifetimes,
 * even where the heap did not fall. */
static void test_cli_leaks_lifetimes_from_dump_names(void **state)
{
    struct cli *c = *state;
    char *dir = qt_tmpdir();
    /* jemalloc's own names: <prefix>.<pid>.<seq>.i<interval seq>.heap */
    const char *a[] = { "jeprof.100.0.i0.heap", "jeprof.100.1.i1.heap", "jeprof.100.2.i2.heap",
                        "jeprof.100.3.i3.heap" };
    const char *b[] = { "jeprof.200.0.i0.heap", "jeprof.200.1.i1.heap", "jeprof.200.2.i2.heap",
                        "jeprof.200.3.i3.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, a, 4), 0);
    assert_int_equal(qt_jefixture_run(dir, 0, args, b, 4), 0);
    char *out;
    const char *leaks[] = { "leaks", "--dir", dir, "--step", "1h", "--format", "json", NULL };
    assert_int_equal(run_query(c, leaks, &out), 0);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    assert_non_null(root);
    json_t *n0 = json_array_get(json_object_get(root, "nodes"), 0);
    json_t *lts = json_object_get(n0, "lifetimes");
    assert_int_equal(json_array_size(lts), 2);
    json_t *l1 = json_array_get(lts, 1);
    assert_string_equal(json_string_value(json_object_get(l1, "restart")), "pid 100 -> 200");
    assert_int_equal(json_integer_value(json_object_get(l1, "snapshots")), 4);
    /* (Growth itself is tested on symbolized dumps in test-leaks.c; here
     * --no-symbolize leaves each process its own addresses.) */
    json_decref(root);
    free(out);
    qt_tmpdir_remove(dir);
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

    /* Without a NODE, a folder of snapshots is one node named after it. */
    const char *leaks_dir[] = { "leaks", "--dir", c->dir, "--step", "1h", "--format", "json",
                                NULL };
    assert_int_equal(run_query(c, leaks_dir, &out), 0);
    root = json_loads(out, 0, &je);
    assert_non_null(root);
    n0 = json_array_get(json_object_get(root, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n0, "node")), strrchr(c->dir, '/') + 1);
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

/* --help is printed from the option table, with each default read from the
 * variable the option sets: `query export --help` once said "default text"
 * while export wrote collapsed stacks. */
static void test_cli_help_says_what_it_does(void **state)
{
    struct cli *c = *state;
    char *out, *dflt, *collapsed;
    const char *help[] = { "export", "--help", NULL };
    assert_int_equal(run_query(c, help, &out), 0);
    assert_non_null(strstr(out, "usage: query export SNAP"));
    assert_non_null(strstr(out, "--format F"));
    assert_non_null(strstr(out, "(default collapsed)"));
    assert_null(strstr(out, "(default text)"));
    free(out);
    /* ...and that is what export does without --format. */
    char *s1 = qt_path(c->dir, "s1.heap");
    const char *plain[] = { "export", s1, NULL };
    const char *coll[] = { "export", s1, "--format", "collapsed", NULL };
    assert_int_equal(run_query(c, plain, &dflt), 0);
    assert_int_equal(run_query(c, coll, &collapsed), 0);
    assert_true(strlen(dflt) > 0);
    assert_string_equal(dflt, collapsed);
    free(dflt);
    free(collapsed);
    /* --format=text (the = spelling) is text, not overridden. */
    const char *text[] = { "export", s1, "--format=text", NULL };
    assert_int_equal(run_query(c, text, &out), 0);
    assert_non_null(strstr(out, "flat"));
    free(out);
    free(s1);

    const char *tophelp[] = { "top", "-h", NULL };
    assert_int_equal(run_query(c, tophelp, &out), 0);
    assert_non_null(strstr(out, "(default text)"));
    assert_non_null(strstr(out, "(default 30 for text, all otherwise)"));
    free(out);
    const char *leakhelp[] = { "leaks", "--help", NULL };
    assert_int_equal(run_query(c, leakhelp, &out), 0);
    assert_non_null(strstr(out, "(default 20 for text, all otherwise)"));
    assert_non_null(strstr(out, "--files F [F ...]"));
    /* Each command lists only the formats and options it takes. */
    assert_non_null(strstr(out, "--format F            text|json (default text)"));
    assert_null(strstr(out, "json|dot|svg|pprof"));
    assert_null(strstr(out, "nodefraction"));
    free(out);
    const char *trendhelp[] = { "trend", "--help", NULL };
    assert_int_equal(run_query(c, trendhelp, &out), 0);
    assert_non_null(strstr(out, "--format F            text|csv|json (default text)"));
    assert_null(strstr(out, "edgefraction"));
    free(out);
    const char *diffhelp[] = { "diff", "--help", NULL };
    assert_int_equal(run_query(c, diffhelp, &out), 0);
    assert_non_null(strstr(out, "--format F            text|collapsed|json|svg (default text)"));
    assert_null(strstr(out, "json|dot|svg|pprof"));
    free(out);
    const char *leakdot[] = { "leaks", "--nodefraction", "0.1", NULL };
    assert_int_equal(run_query(c, leakdot, &out), 2);
    free(out);
    const char *retainhelp[] = { "retain", "--help", NULL };
    assert_int_equal(run_query(c, retainhelp, &out), 0);
    assert_non_null(strstr(out, "--retain DURATION"));
    assert_non_null(strstr(out, "(default 90d)"));
    assert_non_null(strstr(out, "(default 7d)"));
    free(out);
    /* Usage errors exit 2 and print nothing on stdout. */
    const char *unknown[] = { "top", "--no-such-option", NULL };
    assert_int_equal(run_query(c, unknown, &out), 2);
    assert_string_equal(out, "");
    free(out);
    const char *badtop[] = { "top", "x", "--top", "many", NULL };
    assert_int_equal(run_query(c, badtop, &out), 2);
    free(out);
    const char *flagval[] = { "top", "x", "--lines=yes", NULL };
    assert_int_equal(run_query(c, flagval, &out), 2);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_diff_formats),
        cmocka_unit_test(test_cli_series_commands),
        cmocka_unit_test(test_cli_leaks_lifetimes_from_dump_names),
        cmocka_unit_test(test_cli_errors_are_clear),
        cmocka_unit_test(test_cli_help_says_what_it_does),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
