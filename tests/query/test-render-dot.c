/* dot renderer tests: every graph is laid out by Graphviz's `dot -Tsvg`
 * (skipped with a note when Graphviz is missing), on real profiles (the Go
 * heap profile in tests/data, a jefixture dump made at test time) and on small
 * collapsed inputs that exercise pruning and escaping.
 *
 * Environment (set by meson): JEFIXTURE, DATADIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"
#include "tests/query/qtest.h"

static char *tmpdir;
static char *je_dump;
static bool have_dot;

static char *tmp_path(const char *name)
{
    return qt_path(tmpdir, name);
}

static int group_setup(void **state)
{
    (void)state;
    tmpdir = qt_tmpdir();
    je_dump = tmp_path("je.heap");
    static const char *const args[] = { "--threads", "2", "--rounds", "1", NULL };
    static const char *const dumps[] = { "je.heap" };
    if (qt_jefixture_run(tmpdir, 0, args, dumps, 1) != 0)
        return -1;
    have_dot = system("dot -V >/dev/null 2>&1") == 0;
    if (!have_dot)
        fprintf(stderr, "note: Graphviz `dot` is not installed: layouts are not checked\n");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    qt_tmpdir_remove(tmpdir);
    free(je_dump);
    return 0;
}

/* Lay the graph out with dot -Tsvg; returns the SVG (empty without dot). */
static void layout(const struct hp_buf *g, const char *name, struct hp_buf *svg)
{
    char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(g->data, 1, g->len, f), g->len);
    assert_int_equal(fclose(f), 0);
    if (have_dot) {
        char *cmd = hp_xasprintf("dot -Tsvg '%s' 2>&1", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
            hp_buf_append(svg, buf, n);
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || (svg->data && strstr(svg->data, "Error")))
            fprintf(stderr, "%s failed:\n%s\n", cmd, svg->data ? svg->data : "");
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_non_null(strstr(svg->data, "<svg"));
        free(cmd);
    }
    free(path);
}

struct graph {
    struct profile *p;
    struct query_folded *f;
    struct query_top *t;
    struct hp_buf dot;
};

static void graph_make(struct graph *g, struct profile *p, const struct query_opts *o)
{
    g->p = p;
    g->dot = HP_BUF_INIT(0);
    assert_int_equal(query_fold(p, o, &g->f, NULL), 0);
    assert_int_equal(query_top_build(g->f, o->sample, &g->t), 0);
    assert_int_equal(query_render_dot(g->f, g->t, o, &g->dot), 0);
}

static void graph_free(struct graph *g)
{
    query_top_free(g->t);
    query_folded_free(g->f);
    profile_free(g->p);
    hp_buf_release(&g->dot);
}

static struct profile *parse_text(const char *text)
{
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(ingest_parse(text, strlen(text), NULL, &p, &err), 0);
    hp_buf_release(&err);
    return p;
}

static struct profile *parse_path(const char *path)
{
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = ingest_parse_file(path, NULL, &p, &err);
    if (r)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    return p;
}

/* Node id of a function in the dot text ("N3 [label=\"name\\n..."), or 0. */
static int node_id(const char *dot, const char *name)
{
    char *key = hp_xasprintf(" [label=\"%s\\n", name);
    const char *s = strstr(dot, key);
    free(key);
    if (!s)
        return 0;
    while (s > dot && s[-1] != '\n')
        s--;
    int id = 0;
    return sscanf(s, "N%d", &id) == 1 ? id : 0;
}

/* The attribute list of the edge a -> b, or NULL. */
static const char *edge(const char *dot, int a, int b)
{
    char key[64];
    snprintf(key, sizeof(key), "\nN%d -> N%d [", a, b);
    const char *s = strstr(dot, key);
    return s ? s + strlen(key) : NULL;
}

static void test_render_dot_go_profile(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    const char *d = getenv("DATADIR");
    char *path = hp_xasprintf("%s/go-heap.pb.gz", d ? d : "tests/data");
    struct graph g;
    graph_make(&g, parse_path(path), &o);
    const char *dot = g.dot.data;
    assert_true(strncmp(dot, "digraph \"heapfleet; 775 KiB\" {", 30) == 0);
    assert_non_null(strstr(dot, "Total inuse_space: 775 KiB\\l"));
    /* Flat and cumulative figures with shares, jeprof's layout. */
    assert_non_null(strstr(dot, "[label=\"main.newSegment\\n512 KiB (66.0%)\\rof 512 KiB "
                                "(66.0%)\\r\""));
    assert_non_null(strstr(dot, "[label=\"main.main\\n6.00 KiB (0.8%)\\rof 774 KiB (99.8%)\\r\""));
    int mm = node_id(dot, "main.main"), lt = node_id(dot, "main.leakTabletSchema");
    int sc = node_id(dot, "main.segmentCache"), ns = node_id(dot, "main.newSegment");
    assert_true(mm && lt && sc && ns);
    const char *e = edge(dot, mm, lt);
    assert_non_null(e);
    assert_true(strncmp(e, "label=\" 256 KiB\"", 16) == 0);
    assert_non_null(edge(dot, sc, ns)); /* the inlined call is an edge too */
    assert_null(edge(dot, lt, mm));
    /* Tiny runtime functions fall under the 0.5% node fraction. */
    assert_int_equal(node_id(dot, "runtime.gcBgMarkWorker"), 0);
    assert_non_null(strstr(dot, "functions with cum < 3.88 KiB (0.5%)\\l"));
    struct hp_buf svg = HP_BUF_INIT(0);
    layout(&g.dot, "go.dot", &svg);
    if (have_dot) {
        assert_non_null(strstr(svg.data, "main.newSegment"));
        assert_non_null(strstr(svg.data, "main.leakTabletSchema"));
    }
    hp_buf_release(&svg);
    graph_free(&g);
    free(path);
}

static void test_render_dot_jemalloc_dump(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    o.sample = PV_INUSE_OBJECTS;
    struct graph g;
    graph_make(&g, parse_path(je_dump), &o);
    assert_non_null(strstr(g.dot.data, "Total inuse_objects: "));
    /* The top function by flat value is a node, labelled as query top
     * labels it ("0x... jefixture"-style until symbolized). */
    const char *top = g.t->funcs[0].name;
    assert_true(node_id(g.dot.data, top) > 0);
    assert_non_null(strstr(g.dot.data, " -> N"));
    struct hp_buf svg = HP_BUF_INIT(0);
    layout(&g.dot, "je.dot", &svg);
    if (have_dot)
        assert_non_null(strstr(svg.data, top));
    hp_buf_release(&svg);
    graph_free(&g);
}

/* Dropped functions between kept ones leave a dotted (residual) edge with the
 * full weight; small edges are dropped and counted in the legend. */
static void test_render_dot_prunes_nodes_and_edges(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    o.nodefraction = 0.5;
    struct graph g;
    graph_make(&g, parse_text("a;b;c 10\na;d;c 10\na;e;c 10\na;f 1\n"), &o);
    int a = node_id(g.dot.data, "a"), c = node_id(g.dot.data, "c");
    assert_true(a && c);
    assert_int_equal(node_id(g.dot.data, "b"), 0);
    assert_int_equal(node_id(g.dot.data, "f"), 0);
    const char *e = edge(g.dot.data, a, c);
    assert_non_null(e);
    assert_true(strncmp(e, "label=\" 30 B\"", 13) == 0);
    const char *end = strchr(e, '\n');
    assert_non_null(strstr(e, "style=dotted"));
    assert_true(strstr(e, "style=dotted") < end);
    assert_non_null(strstr(g.dot.data, "Showing 2 of 6 functions\\lDropped 4 functions"));
    struct hp_buf svg = HP_BUF_INIT(0);
    layout(&g.dot, "prune.dot", &svg);
    hp_buf_release(&svg);
    graph_free(&g);

    query_opts_init(&o);
    o.edgefraction = 0.05;
    graph_make(&g, parse_text("a;b 100\na;c 1\n"), &o);
    a = node_id(g.dot.data, "a");
    int b = node_id(g.dot.data, "b");
    c = node_id(g.dot.data, "c");
    assert_true(a && b && c);
    assert_non_null(edge(g.dot.data, a, b));
    assert_null(edge(g.dot.data, a, c));
    assert_non_null(strstr(g.dot.data, "Dropped 1 edges under "));
    assert_non_null(strstr(g.dot.data, " (5%)\\l"));
    graph_free(&g);

    /* --top caps the node count (jeprof's --nodecount). */
    query_opts_init(&o);
    o.top = 2;
    graph_make(&g, parse_text("a;b;c 10\na;d 5\n"), &o);
    assert_non_null(strstr(g.dot.data, "Showing 2 of 4 functions\\l"));
    assert_non_null(strstr(g.dot.data, "Dropped 2 more functions past the first 2\\l"));
    graph_free(&g);
}

/* Quotes, backslashes, braces and bytes that are not UTF-8 in names. */
static void test_render_dot_escapes_names(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    o.title = "node \"be-1\" {prod}";
    struct graph g;
    graph_make(&g,
               parse_text("main;std::map<K, V>::operator[](\"x\\\\y\");bad\xff name 100\n"
                          "main;f{} 50\n"),
               &o);
    assert_non_null(strstr(g.dot.data, "digraph \"node \\\"be-1\\\" {prod}; 150 B\""));
    assert_non_null(strstr(g.dot.data, "operator[](\\\"x\\\\\\\\y\\\")"));
    assert_non_null(strstr(g.dot.data, "bad\xef\xbf\xbd name"));
    struct hp_buf svg = HP_BUF_INIT(0);
    layout(&g.dot, "escape.dot", &svg);
    if (have_dot)
        assert_non_null(strstr(svg.data, "std::map&lt;K, V&gt;::operator[]"));
    hp_buf_release(&svg);
    graph_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_dot_go_profile),
        cmocka_unit_test(test_render_dot_jemalloc_dump),
        cmocka_unit_test(test_render_dot_prunes_nodes_and_edges),
        cmocka_unit_test(test_render_dot_escapes_names),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
