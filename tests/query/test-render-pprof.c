/* pprof writer tests. The profiles are real: a jemalloc dump made at test
 * time by jefixture (MALLOC_CONF=prof:true,lg_prof_sample:0,prof_accum:true,
 * so every figure is exact) and the Go heap profile in tests/data. The output
 * is read back by our reader and, when Go is installed, by `go tool pprof
 * -top`, whose totals and per-function figures must equal `query top`'s.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"
#include "tests/query/qtest.h"

static char *tmpdir;
static char *je_dump, *je_sampled;
static bool have_go;

static char *tmp_path(const char *name)
{
    return qt_path(tmpdir, name);
}

static char *data_path(const char *name)
{
    const char *d = getenv("DATADIR");
    return hp_xasprintf("%s/%s", d ? d : "tests/data", name);
}

static struct profile *parse_ok(const char *path)
{
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int r = ingest_parse_file(path, NULL, &p, &err);
    if (r != 0)
        fprintf(stderr, "parse %s: %s\n", path, err.data ? err.data : hp_strerror(r));
    assert_int_equal(r, 0);
    hp_buf_release(&err);
    return p;
}

/* Run a shell command and capture its stdout; returns the exit status. */
static int capture(const char *cmd, struct hp_buf *out)
{
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        (void)hp_buf_append(out, buf, n);
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const struct hp_buf *b)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
    assert_int_equal(fclose(f), 0);
}

static int group_setup(void **state)
{
    (void)state;
    tmpdir = qt_tmpdir();
    je_dump = tmp_path("je.heap");
    static const char *const args[] = { "--threads", "4", "--rounds", "2", NULL };
    static const char *const exact[] = { "je.heap" }, *const sampled[] = { "sampled.heap" };
    if (qt_jefixture_conf(tmpdir, "prof:true,lg_prof_sample:0,prof_accum:true", args, exact,
                          1) != 0)
        return -1;
    /* A sampled dump, as nodes write them: un-sampled values are fractional. */
    je_sampled = tmp_path("sampled.heap");
    if (qt_jefixture_conf(tmpdir, "prof:true,lg_prof_sample:10,prof_accum:true", args, sampled,
                          1) != 0)
        return -1;
    /* go wants writable cache and module folders; keep them in the temp dir
     * (`go tool pprof` itself needs no network). */
    char *gocache = tmp_path("gocache"), *gopath = tmp_path("gopath");
    setenv("GOCACHE", gocache, 1);
    setenv("GOPATH", gopath, 1);
    setenv("HOME", tmpdir, 1);
    unsetenv("GOFLAGS");
    free(gocache);
    free(gopath);
    have_go = system("go version >/dev/null 2>&1") == 0;
    if (!have_go)
        fprintf(stderr, "note: `go` is not installed (Debian package golang-go): the "
                        "go tool pprof comparisons are skipped\n");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    qt_tmpdir_remove(tmpdir);
    free(je_dump);
    free(je_sampled);
    return 0;
}

static void export_pprof(const struct profile *p, const struct query_opts *o, const char *path)
{
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = query_render_pprof(p, o, &out, &err);
    if (r != 0)
        fprintf(stderr, "render: %s\n", err.data ? err.data : hp_strerror(r));
    assert_int_equal(r, 0);
    assert_true(out.len > 20);
    assert_int_equal((unsigned char)out.data[0], 0x1f); /* gzipped */
    assert_int_equal((unsigned char)out.data[1], 0x8b);
    write_file(path, &out);
    hp_buf_release(&out);
    hp_buf_release(&err);
}

static void totals_int(const struct profile *p, int64_t ret[PV_COUNT])
{
    double t[PV_COUNT];
    profile_totals(p, t);
    for (int v = 0; v < PV_COUNT; v++)
        ret[v] = (int64_t)t[v];
}

/* Written, read back: the same totals (each column sums to its truncated
 * total), stacks, addresses, mappings with build-ids, period and time. */
static void test_render_pprof_roundtrip_keeps_model(void **state)
{
    (void)state;
    struct profile *p = parse_ok(je_dump);
    assert_true(p->nmappings > 0);
    p->mappings[0].build_id = profile_intern(p, "0123456789abcdef", 16);
    p->time_ns = INT64_C(1763800000123456789);
    struct query_opts o;
    query_opts_init(&o);
    char *path = tmp_path("roundtrip.pb.gz");
    export_pprof(p, &o, path);
    struct profile *q = parse_ok(path);
    assert_int_equal(q->format, PROFILE_FORMAT_PPROF);
    int64_t tp[PV_COUNT], tq[PV_COUNT];
    totals_int(p, tp);
    totals_int(q, tq);
    assert_true(tp[PV_INUSE_SPACE] > 0 && tp[PV_ALLOC_SPACE] >= tp[PV_INUSE_SPACE]);
    assert_memory_equal(tp, tq, sizeof(tp));
    assert_int_equal(p->nsamples, q->nsamples);
    assert_true(q->has_alloc);
    assert_int_equal(q->time_ns, p->time_ns);
    assert_int_equal(q->period, p->period);
    assert_int_equal(q->nmappings, p->nmappings);
    for (size_t i = 0; i < p->nmappings; i++) {
        assert_int_equal(q->mappings[i].start, p->mappings[i].start);
        assert_int_equal(q->mappings[i].limit, p->mappings[i].limit);
        assert_int_equal(q->mappings[i].offset, p->mappings[i].offset);
        assert_string_equal(q->mappings[i].path, p->mappings[i].path);
    }
    assert_string_equal(q->mappings[0].build_id, "0123456789abcdef");
    /* Every sample's address sequence survives, in order. */
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_stack *sp = &p->stacks[p->samples[i].stack];
        const struct profile_stack *sq = &q->stacks[q->samples[i].stack];
        assert_int_equal(sp->n, sq->n);
        for (uint32_t k = 0; k < sp->n; k++) {
            const struct profile_location *lp = &p->locs[profile_stack_locs(p, p->samples[i].stack)[k]];
            const struct profile_location *lq = &q->locs[profile_stack_locs(q, q->samples[i].stack)[k]];
            assert_int_equal(lp->address, lq->address);
            assert_int_equal(lp->mapping, lq->mapping);
        }
    }
    profile_free(q);
    profile_free(p);
    free(path);
}

/* --focus/--ignore select the same stacks query_fold selects; a bad
 * expression is a usage error with a message. */
static void test_render_pprof_applies_focus_and_ignore(void **state)
{
    (void)state;
    char *go = data_path("go-heap.pb.gz");
    struct profile *p = parse_ok(go);
    free(go);
    struct query_opts o;
    query_opts_init(&o);
    o.ignore = "newSegment";
    struct query_folded *f = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    char *path = tmp_path("ignore.pb.gz");
    export_pprof(p, &o, path);
    struct profile *q = parse_ok(path);
    int64_t tq[PV_COUNT];
    totals_int(q, tq);
    assert_int_equal(tq[PV_INUSE_SPACE], (int64_t)f->total[PV_INUSE_SPACE]);
    assert_int_equal(tq[PV_INUSE_SPACE], 793888 - 524288);
    query_folded_free(f);
    profile_free(q);
    o.ignore = NULL;
    o.focus = "(unclosed";
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    assert_int_equal(query_render_pprof(p, &o, &out, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "--focus \"(unclosed\": invalid regular expression"));
    hp_buf_release(&out);
    hp_buf_release(&err);
    profile_free(p);
    free(path);
}

/* Inlined frames are Line entries, innermost first; --no-inline keeps only
 * the function the address is in. */
static void test_render_pprof_inline_frames(void **state)
{
    (void)state;
    char *go = data_path("go-heap.pb.gz");
    struct profile *p = parse_ok(go);
    free(go);
    struct query_opts o;
    query_opts_init(&o);
    for (int no_inline = 0; no_inline < 2; no_inline++) {
        o.no_inline = no_inline;
        char *path = tmp_path(no_inline ? "noinline.pb.gz" : "inline.pb.gz");
        export_pprof(p, &o, path);
        struct profile *q = parse_ok(path);
        bool found = false;
        for (size_t i = 0; i < q->nlocs; i++) {
            const struct profile_location *l = &q->locs[i];
            if (!l->nframes ||
                strcmp(q->frames[l->frame_off + l->nframes - 1].function, "main.segmentCache"))
                continue;
            if (l->nframes == 1 && !no_inline)
                continue; /* the call site in main.main's frame is another location */
            found = true;
            if (no_inline) {
                assert_int_equal(l->nframes, 1);
            } else {
                assert_int_equal(l->nframes, 2);
                assert_string_equal(q->frames[l->frame_off].function, "main.newSegment");
                assert_int_equal(q->frames[l->frame_off].line, 27);
                assert_non_null(strstr(q->frames[l->frame_off].file, "goheap.go"));
            }
        }
        assert_true(found);
        profile_free(q);
        free(path);
    }
    profile_free(p);
}

/* ---- go tool pprof ---- */

struct go_row {
    char name[512];
    int64_t flat, cum;
};

struct go_top {
    int64_t total;
    char type[64];
    struct go_row *rows;
    size_t n;
};

/* Parse `go tool pprof -top -unit=B` output. */
static void parse_go_top(const char *text, struct go_top *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->total = -1;
    size_t cap = 0;
    bool in_rows = false;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof(buf), "%.*s", (int)HP_MIN(len, sizeof(buf) - 1), line);
        const char *of;
        if (strncmp(buf, "Type: ", 6) == 0)
            snprintf(ret->type, sizeof(ret->type), "%.63s", buf + 6);
        else if (strncmp(buf, "Showing nodes accounting for", 28) == 0 &&
                 (of = strstr(buf, "% of ")))
            ret->total = strtoll(of + 5, NULL, 10);
        else if (strstr(buf, "flat%") && strstr(buf, "cum%"))
            in_rows = true;
        else if (in_rows) {
            char flat[64], fp[32], sp[32], cum[64], cp[32];
            int name_at = 0;
            if (sscanf(buf, "%63s %31s %31s %63s %31s %n", flat, fp, sp, cum, cp, &name_at) == 5 &&
                name_at > 0) {
                ret->rows = hp_xgrow(ret->rows, &cap, ret->n + 1, sizeof(*ret->rows));
                struct go_row *r = &ret->rows[ret->n++];
                r->flat = strtoll(flat, NULL, 10);
                r->cum = strtoll(cum, NULL, 10);
                snprintf(r->name, sizeof(r->name), "%.511s", buf + name_at);
                /* pprof marks inlined functions; query names them plainly. */
                char *inl = strstr(r->name, " (inline)");
                if (inl)
                    *inl = '\0';
            }
        }
        line = nl ? nl + 1 : NULL;
    }
}

static void go_top(const char *file, const char *extra, enum profile_value v, struct go_top *ret)
{
    char *cmd = hp_xasprintf("go tool pprof -top -symbolize=none -unit=B -nodefraction=0 "
                             "-nodecount=100000 %s%s%s '%s' 2>&1",
                             extra, v < PV_COUNT ? " -sample_index=" : "",
                             v < PV_COUNT ? profile_value_name(v) : "", file);
    struct hp_buf out = HP_BUF_INIT(0);
    int rc = capture(cmd, &out);
    if (rc != 0)
        fprintf(stderr, "%s\n%s\n", cmd, out.data ? out.data : "");
    assert_int_equal(rc, 0);
    parse_go_top(out.data ? out.data : "", ret);
    if (ret->total < 0)
        fprintf(stderr, "%s\n%s\n", cmd, out.data ? out.data : "");
    hp_buf_release(&out);
    free(cmd);
}

static const struct go_row *go_find(const struct go_top *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->rows[i].name, name) == 0)
            return &g->rows[i];
    return NULL;
}

/* query's label for an unsymbolized location, "0x<16 hex> object", as
 * pprof -addresses prints it: "<16 hex> [object]". */
static void pprof_label(const char *ours, char *out, size_t n)
{
    const char *sp = strchr(ours, ' ');
    if (strncmp(ours, "0x", 2) == 0 && sp)
        snprintf(out, n, "%.*s [%s]", (int)(sp - ours - 2), ours + 2, sp + 1);
    else if (strncmp(ours, "0x", 2) == 0)
        snprintf(out, n, "%s", ours + 2);
    else
        snprintf(out, n, "%s", ours);
}

/* Compare `query top` (fold + top of p) with go tool pprof's table. */
static void compare_with_go(const struct profile *p, const struct go_top *g, enum profile_value v,
                            bool addresses)
{
    struct query_opts o;
    query_opts_init(&o);
    o.sample = v;
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    assert_int_equal(query_top_build(f, v, &t), 0);
    int64_t total = (int64_t)t->total[v];
    if (g->total != total)
        fprintf(stderr, "%s: go tool pprof total %lld, query %lld\n", profile_value_name(v),
                (long long)g->total, (long long)total);
    assert_int_equal(g->total, total);
    size_t checked = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct query_func *fn = &t->funcs[i];
        char label[600];
        if (addresses)
            pprof_label(fn->name, label, sizeof(label));
        else
            snprintf(label, sizeof(label), "%s", fn->name);
        const struct go_row *r = go_find(g, label);
        if (fn->flat[v] == 0 && fn->cum[v] == 0)
            continue;
        if (!r)
            fprintf(stderr, "%s: \"%s\" missing from go tool pprof's table\n",
                    profile_value_name(v), label);
        assert_non_null(r);
        /* Un-sampled values are exact here (period 1), so integers match. */
        if (r->flat != (int64_t)fn->flat[v] || r->cum != (int64_t)fn->cum[v])
            fprintf(stderr, "%s: %s flat %lld/%lld cum %lld/%lld (pprof/query)\n",
                    profile_value_name(v), label, (long long)r->flat, (long long)fn->flat[v],
                    (long long)r->cum, (long long)fn->cum[v]);
        assert_int_equal(r->flat, (int64_t)fn->flat[v]);
        assert_int_equal(r->cum, (int64_t)fn->cum[v]);
        checked++;
    }
    assert_true(checked > 0 || total == 0);
    /* The top function by flat is the same one. */
    if (g->n && t->n && t->funcs[0].flat[v] > 0) {
        char label[600];
        if (addresses)
            pprof_label(t->funcs[0].name, label, sizeof(label));
        else
            snprintf(label, sizeof(label), "%s", t->funcs[0].name);
        assert_string_equal(g->rows[0].name, label);
    }
    query_top_free(t);
    query_folded_free(f);
}

/* The jemalloc fixture dump: unsymbolized, so pprof -addresses (one row per
 * location, labelled by address and object) against query's address rows,
 * for all four sample types. */
static void test_render_pprof_go_tool_matches_top_jemalloc(void **state)
{
    (void)state;
    if (!have_go) {
        fprintf(stderr, "skipped: go is not installed\n");
        skip();
    }
    struct profile *p = parse_ok(je_dump);
    struct query_opts o;
    query_opts_init(&o);
    char *path = tmp_path("je.pb.gz");
    export_pprof(p, &o, path);
    for (int v = 0; v < PV_COUNT; v++) {
        struct go_top g;
        go_top(path, "-addresses", (enum profile_value)v, &g);
        assert_string_equal(g.type, profile_value_name((enum profile_value)v));
        compare_with_go(p, &g, (enum profile_value)v, true);
        free(g.rows);
    }
    profile_free(p);
    free(path);
}

/* A symbolized profile (Go's own heap profile, inlined frames included):
 * function rows by name, and the export reads in go tool pprof exactly as
 * the original Go-written file does. The default sample type is --sample. */
static void test_render_pprof_go_tool_matches_top_symbolized(void **state)
{
    (void)state;
    if (!have_go) {
        fprintf(stderr, "skipped: go is not installed\n");
        skip();
    }
    char *orig = data_path("go-heap.pb.gz");
    struct profile *p = parse_ok(orig);
    struct query_opts o;
    query_opts_init(&o);
    o.sample = PV_ALLOC_SPACE;
    char *path = tmp_path("go.pb.gz");
    export_pprof(p, &o, path);
    struct go_top dflt;
    go_top(path, "", PV_COUNT, &dflt);
    assert_string_equal(dflt.type, "alloc_space");
    free(dflt.rows);
    for (int v = 0; v < PV_COUNT; v++) {
        struct go_top g, go_orig;
        go_top(path, "", (enum profile_value)v, &g);
        compare_with_go(p, &g, (enum profile_value)v, false);
        go_top(orig, "", (enum profile_value)v, &go_orig);
        assert_int_equal(g.total, go_orig.total);
        assert_int_equal(g.n, go_orig.n);
        for (size_t i = 0; i < g.n; i++) {
            assert_string_equal(g.rows[i].name, go_orig.rows[i].name);
            assert_int_equal(g.rows[i].flat, go_orig.rows[i].flat);
            assert_int_equal(g.rows[i].cum, go_orig.rows[i].cum);
        }
        free(g.rows);
        free(go_orig.rows);
    }
    profile_free(p);
    free(path);
    free(orig);
}

/* Name-only locations (collapsed input: no addresses, no mappings) still make
 * a profile go tool pprof reads with the same total. pprof shortens C++-like
 * names ("f<...>" becomes "f"), so rows are compared by value only. */
static void test_render_pprof_go_tool_reads_collapsed_export(void **state)
{
    (void)state;
    if (!have_go) {
        fprintf(stderr, "skipped: go is not installed\n");
        skip();
    }
    char *src = data_path("jefixture.collapsed");
    struct profile *p = parse_ok(src);
    struct query_opts o;
    query_opts_init(&o);
    char *path = tmp_path("collapsed.pb.gz");
    export_pprof(p, &o, path);
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    assert_int_equal(query_top_build(f, PV_INUSE_SPACE, &t), 0);
    struct go_top g;
    go_top(path, "", PV_INUSE_SPACE, &g);
    assert_int_equal(g.total, 281216);
    assert_int_equal(g.total, (int64_t)t->total[PV_INUSE_SPACE]);
    assert_true(g.n > 0);
    assert_int_equal(g.rows[0].flat, (int64_t)t->funcs[0].flat[PV_INUSE_SPACE]);
    assert_true(strncmp(t->funcs[0].name, g.rows[0].name, strlen(g.rows[0].name)) == 0);
    free(g.rows);
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
    free(path);
    free(src);
}

/* A sampled dump: each column's integers sum to the truncated total, so go
 * tool pprof's total equals query's exactly; a function's flat value may
 * differ from query's unrounded one by under one unit per stack. */
static void test_render_pprof_go_tool_matches_sampled_totals(void **state)
{
    (void)state;
    if (!have_go) {
        fprintf(stderr, "skipped: go is not installed\n");
        skip();
    }
    struct profile *p = parse_ok(je_sampled);
    assert_int_equal(p->scaling, PROFILE_SCALING_V2);
    assert_true(p->period > 1);
    struct query_opts o;
    query_opts_init(&o);
    char *path = tmp_path("sampled.pb.gz");
    export_pprof(p, &o, path);
    for (int v = 0; v < PV_COUNT; v++) {
        struct query_opts ov = o;
        ov.sample = (enum profile_value)v;
        struct query_folded *f = NULL;
        struct query_top *t = NULL;
        assert_int_equal(query_fold(p, &ov, &f, NULL), 0);
        assert_int_equal(query_top_build(f, ov.sample, &t), 0);
        struct go_top g;
        go_top(path, "-addresses", ov.sample, &g);
        assert_int_equal(g.total, (int64_t)t->total[v]);
        assert_true(g.total > 0);
        for (size_t i = 0; i < t->n && i < 10; i++) {
            char label[600];
            pprof_label(t->funcs[i].name, label, sizeof(label));
            const struct go_row *r = go_find(&g, label);
            assert_non_null(r);
            double diff = (double)r->flat - t->funcs[i].flat[v];
            assert_true(diff > -(double)p->nsamples && diff < (double)p->nsamples);
        }
        free(g.rows);
        query_top_free(t);
        query_folded_free(f);
    }
    profile_free(p);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_pprof_roundtrip_keeps_model),
        cmocka_unit_test(test_render_pprof_applies_focus_and_ignore),
        cmocka_unit_test(test_render_pprof_inline_frames),
        cmocka_unit_test(test_render_pprof_go_tool_matches_top_jemalloc),
        cmocka_unit_test(test_render_pprof_go_tool_matches_sampled_totals),
        cmocka_unit_test(test_render_pprof_go_tool_matches_top_symbolized),
        cmocka_unit_test(test_render_pprof_go_tool_reads_collapsed_export),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
