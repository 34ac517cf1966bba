/* SVG flame graph tests: real profiles (a jefixture dump made at test time,
 * the Go heap profile and jeprof --collapsed output in tests/data), names no
 * XML file may carry raw, a 100k-stack profile, and the differential mode.
 * Every output is checked for well-formedness with xmllint (libxml2-utils)
 * or, without it, Python's XML parser.
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
static const char *xml_checker; /* shell command prefix, or NULL */

static char *tmp_path(const char *name)
{
    return qt_path(tmpdir, name);
}

static int group_setup(void **state)
{
    (void)state;
    tmpdir = qt_tmpdir();
    je_dump = tmp_path("je.heap");
    static const char *const args[] = { "--threads", "3", "--rounds", "2", NULL };
    static const char *const dumps[] = { "je.heap" };
    if (qt_jefixture_run(tmpdir, 0, args, dumps, 1) != 0)
        return -1;
    if (system("xmllint --version >/dev/null 2>&1") == 0)
        xml_checker = "xmllint --noout";
    else if (system("python3 -c 'import xml.etree.ElementTree' >/dev/null 2>&1") == 0)
        xml_checker = "python3 -c 'import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])'";
    else
        fprintf(stderr, "note: neither xmllint (libxml2-utils) nor python3 is installed: "
                        "well-formedness is not checked\n");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    qt_tmpdir_remove(tmpdir);
    free(je_dump);
    return 0;
}

static void assert_wellformed(const struct hp_buf *svg, const char *name)
{
    char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(svg->data, 1, svg->len, f), svg->len);
    assert_int_equal(fclose(f), 0);
    if (xml_checker) {
        char *cmd = hp_xasprintf("%s '%s'", xml_checker, path);
        int rc = system(cmd);
        if (rc != 0)
            fprintf(stderr, "not well-formed: %s\n", cmd);
        assert_int_equal(rc, 0);
        free(cmd);
    }
    free(path);
}

static struct query_folded *fold_text(const char *text, const struct query_opts *o)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = ingest_parse(text, strlen(text), NULL, &p, &err);
    if (r)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    struct query_folded *f = NULL;
    assert_int_equal(query_fold(p, o, &f, &err), 0);
    /* The folded names live in f; the profile is only borrowed by f->source. */
    f->source = NULL;
    profile_free(p);
    hp_buf_release(&err);
    return f;
}

static struct query_folded *fold_file(const char *path, const struct query_opts *o,
                                      struct profile **ret_p)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = ingest_parse_file(path, NULL, &p, &err);
    if (r)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    struct query_folded *f = NULL;
    assert_int_equal(query_fold(p, o, &f, &err), 0);
    hp_buf_release(&err);
    *ret_p = p;
    return f;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

/* The fill of the frame whose title starts with `title`. */
static void fill_of(const char *svg, const char *title, char *out, size_t n)
{
    char *key = hp_xasprintf("<title>%s", title);
    const char *t = strstr(svg, key);
    free(key);
    assert_non_null(t);
    const char *f = strstr(t, "fill=\"");
    assert_non_null(f);
    f += 6;
    const char *e = strchr(f, '"');
    snprintf(out, n, "%.*s", (int)(e - f), f);
}

static void test_render_svg_go_profile(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    const char *d = getenv("DATADIR");
    char *path = hp_xasprintf("%s/go-heap.pb.gz", d ? d : "tests/data");
    struct profile *p;
    struct query_folded *f = fold_file(path, &o, &p);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    assert_wellformed(&out, "go.svg");
    /* Self-contained: inline style and script, no external references. */
    assert_non_null(strstr(out.data, "<style type=\"text/css\"><![CDATA["));
    assert_non_null(strstr(out.data, "<script type=\"text/ecmascript\"><![CDATA["));
    assert_null(strstr(out.data, "href="));
    assert_null(strstr(out.data, "src="));
    assert_non_null(strstr(out.data, "id=\"search\""));
    assert_non_null(strstr(out.data, "data-total=\"793888\""));
    /* Root and the known paths with bytes and shares in their tooltips. */
    assert_non_null(strstr(out.data, "<title>all\n775 KiB, 100.00%"));
    assert_non_null(strstr(out.data, "<title>main.newSegment\n512 KiB, 66.04%"));
    assert_non_null(strstr(out.data, "<title>main.leakTabletSchema\n256 KiB, 33.02%"));
    /* The inlined callee sits directly above its caller. */
    const char *seg = strstr(out.data, "<title>main.segmentCache\n");
    assert_non_null(seg);
    query_folded_free(f);
    profile_free(p);
    hp_buf_release(&out);
    free(path);
}

static void test_render_svg_jemalloc_dump(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    struct profile *p;
    struct query_folded *f = fold_file(je_dump, &o, &p);
    struct hp_buf out = HP_BUF_INIT(0);
    o.title = "jefixture <3 threads> & friends";
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    assert_wellformed(&out, "je.svg");
    assert_non_null(strstr(out.data, "jefixture &lt;3 threads&gt; &amp; friends"));
    assert_true(count(out.data, "<g class=\"f\"") >= 5);
    assert_non_null(strstr(out.data, " jefixture\n")); /* "0x... jefixture" frames */
    char *want = hp_xasprintf("data-total=\"%.0f\"", f->total[PV_INUSE_SPACE]);
    assert_non_null(strstr(out.data, want));
    free(want);
    query_folded_free(f);
    profile_free(p);
    hp_buf_release(&out);
}

/* Names with markup characters, invalid UTF-8, an encoded surrogate and a
 * control character: all become well-formed XML; valid multi-byte text
 * survives. */
static void test_render_svg_escapes_hostile_names(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = fold_text("main;a<b>&\"c';bad\xff\xfe;sur\xed\xa0\x80x;ctl\x01x;"
                                       "caf\xc3\xa9\xf0\x9f\x98\x80 1000\n"
                                       "main;]]>cdata 10\n",
                                       &o);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    assert_wellformed(&out, "hostile.svg");
    assert_non_null(strstr(out.data, "<title>a&lt;b&gt;&amp;&quot;c&#39;\n"));
    assert_non_null(strstr(out.data, "<title>bad\xef\xbf\xbd\xef\xbf\xbd\n"));
    assert_non_null(strstr(out.data, "<title>ctl\xef\xbf\xbdx\n"));
    assert_non_null(strstr(out.data, "<title>caf\xc3\xa9\xf0\x9f\x98\x80\n"));
    assert_non_null(strstr(out.data, "<title>]]&gt;cdata\n"));
    assert_null(strstr(out.data, "\xed\xa0\x80"));
    query_folded_free(f);
    hp_buf_release(&out);
}

/* 100,000 distinct stacks under 1,000 functions: frames narrower than the
 * threshold are merged, so the file stays small and well-formed. */
static void test_render_svg_large_profile_stays_bounded(void **state)
{
    (void)state;
    struct hp_buf text = HP_BUF_INIT(0);
    for (int i = 0; i < 100000; i++)
        hp_buf_printf(&text, "main;mod%d;fn%d;leaf%d %d\n", i % 50, i % 1000, i,
                      i % 100 == 0 ? 100000 : 1 + i % 37);
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = fold_text(text.data, &o);
    assert_int_equal(f->nentries, 100000);
    struct hp_buf out = HP_BUF_INIT(0);
    uint64_t t0 = hp_now_ns();
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    uint64_t t1 = hp_now_ns();
    size_t frames = count(out.data, "<g class=\"f\"");
    fprintf(stderr, "100k stacks: %zu frames drawn, %zu bytes, %.0f ms\n", frames, out.len,
            (double)(t1 - t0) / 1e6);
    assert_true(frames < 20000);
    assert_true(out.len < 8u << 20);
    assert_non_null(strstr(out.data, " small frames]\n"));
    /* The big leaves (every 100th) are drawn on their own. */
    assert_non_null(strstr(out.data, "<title>leaf0\n"));
    assert_non_null(strstr(out.data, "<title>leaf99900\n"));
    assert_wellformed(&out, "large.svg");
    query_folded_free(f);
    hp_buf_release(&out);
    hp_buf_release(&text);
}

static void test_render_svg_diff_colours_growth_and_shrink(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *a = fold_text("main;grow 100\nmain;shrink 100\nmain;same 100\n", &o);
    struct query_folded *b = fold_text("main;grow 300\nmain;shrink 50\nmain;same 100\n"
                                       "main;new 25\n",
                                       &o);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_svg_diff(a, b, &o, &out), 0);
    assert_wellformed(&out, "diff.svg");
    assert_non_null(strstr(out.data, "<title>grow\n300 B, 63.16%; was 100 B, change +200 B "
                                     "(+200.0%)"));
    assert_non_null(strstr(out.data, "<title>shrink\n50 B, 10.53%; was 100 B, change -50 B "
                                     "(-50.0%)"));
    assert_non_null(strstr(out.data, "A: 300 B, change +175 B"));
    char fill[64];
    fill_of(out.data, "grow\n", fill, sizeof(fill));
    assert_true(strncmp(fill, "rgb(255,", 8) == 0); /* red */
    fill_of(out.data, "shrink\n", fill, sizeof(fill));
    assert_non_null(strstr(fill, ",255)"));          /* blue */
    assert_true(strncmp(fill, "rgb(255,", 8) != 0);
    fill_of(out.data, "same\n", fill, sizeof(fill));
    assert_string_equal(fill, "rgb(230,230,230)");   /* unchanged */
    /* The largest growth is the deepest red. */
    char fill_new[64];
    fill_of(out.data, "grow\n", fill, sizeof(fill));
    fill_of(out.data, "new\n", fill_new, sizeof(fill_new));
    int r1, g1, b1, r2, g2, b2;
    assert_int_equal(sscanf(fill, "rgb(%d,%d,%d)", &r1, &g1, &b1), 3);
    assert_int_equal(sscanf(fill_new, "rgb(%d,%d,%d)", &r2, &g2, &b2), 3);
    assert_true(r1 == 255 && r2 == 255 && g1 < g2);
    query_folded_free(a);
    query_folded_free(b);
    hp_buf_release(&out);
}

/* Nothing left after --focus: still a valid (empty) graph. */
static void test_render_svg_empty_profile(void **state)
{
    (void)state;
    struct query_opts o;
    query_opts_init(&o);
    o.focus = "nothing-matches-this";
    struct query_folded *f = fold_text("main;a 10\n", &o);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    assert_wellformed(&out, "empty.svg");
    assert_int_equal(count(out.data, "<g class=\"f\""), 0);
    query_folded_free(f);
    hp_buf_release(&out);
}

/* The script, run by a real browser when one is installed: headless
 * Chromium loads the SVG with a probe script appended that types into the
 * search box and clicks a frame, then records what the page shows. */
static void test_render_svg_script_runs_in_browser(void **state)
{
    (void)state;
    if (system("chromium --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: chromium is not installed\n");
        skip();
    }
    struct query_opts o;
    query_opts_init(&o);
    const char *d = getenv("DATADIR");
    char *path = hp_xasprintf("%s/go-heap.pb.gz", d ? d : "tests/data");
    struct profile *p;
    struct query_folded *f = fold_file(path, &o, &p);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_svg(f, &o, &out), 0);
    assert_true(out.len > 7 && strcmp(out.data + out.len - 7, "</svg>\n") == 0);
    out.len -= 7;
    hp_buf_puts(&out,
                "<script type=\"text/ecmascript\"><![CDATA[\n"
                "(function(){var box=document.getElementById(\"search\");box.value=\"Segment\";\n"
                "box.dispatchEvent(new Event(\"input\"));\n"
                "var m=document.getElementById(\"matched\").textContent;\n"
                "function find(n){return Array.prototype.find.call(document.querySelectorAll("
                "\"g.f\"),function(g){return g.querySelector(\"title\").textContent.indexOf("
                "n+\"\\n\")===0;});}\n"
                "var g=find(\"main.segmentCache\");g.dispatchEvent(new MouseEvent(\"click\","
                "{bubbles:true}));\n"
                "document.documentElement.setAttribute(\"data-result\",m+\"|\"+g.querySelector("
                "\"rect\").getAttribute(\"width\")+\"|\"+find(\"main.leakTabletSchema\")"
                ".style.display+\"|\"+find(\"main.main\").getAttribute(\"class\"));})();\n"
                "]]></script>\n</svg>\n");
    assert_wellformed(&out, "browser.svg");
    char *svg = tmp_path("browser.svg");
    char *cmd = hp_xasprintf("timeout 60 chromium --headless --no-sandbox --disable-gpu "
                             "--user-data-dir='%s/chromium' --dump-dom 'file://%s' 2>/dev/null",
                             tmpdir, svg);
    FILE *pf = popen(cmd, "r");
    assert_non_null(pf);
    struct hp_buf dom = HP_BUF_INIT(0);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pf)) > 0)
        hp_buf_append(&dom, buf, n);
    pclose(pf);
    const char *res = dom.data ? strstr(dom.data, "data-result=\"") : NULL;
    if (!res) {
        fprintf(stderr, "skipped: chromium did not run the page\n");
    } else {
        /* Search: newSegment and segmentCache match, nested, counted once.
         * Zoom: the clicked frame fills the width, its sibling hides, its
         * caller stays as a greyed parent. */
        assert_non_null(strstr(res, "Matched: 66.04% (512.00 KiB)|1200.00|none|f parent\""));
    }
    hp_buf_release(&dom);
    free(cmd);
    free(svg);
    query_folded_free(f);
    profile_free(p);
    hp_buf_release(&out);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_svg_go_profile),
        cmocka_unit_test(test_render_svg_jemalloc_dump),
        cmocka_unit_test(test_render_svg_escapes_hostile_names),
        cmocka_unit_test(test_render_svg_large_profile_stays_bounded),
        cmocka_unit_test(test_render_svg_diff_colours_growth_and_shrink),
        cmocka_unit_test(test_render_svg_empty_profile),
        cmocka_unit_test(test_render_svg_script_runs_in_browser),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
