/* Parser tests on real profiles made at test time by the fixture programs
 * (jefixture: jemalloc heap_v2; tcfixture: gperftools), plus hostile input.
 *
 * Environment (set by meson): JEFIXTURE, TCFIXTURE = fixture executables;
 * DATADIR = tests/data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "query/query.h"

static char tmpdir[256];

static void run_or_die(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
        fail();
    }
}

static char *path_in_tmp(const char *name)
{
    return hp_xasprintf("%s/%s", tmpdir, name);
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

static int parse_buf(const char *text, size_t len, struct profile **ret, struct hp_buf *err)
{
    return ingest_parse(text, len, NULL, ret, err);
}

/* Fixture dumps shared by the tests: exact (lg_prof_sample:0, prof_accum)
 * with a baseline, and a sampled one. */
static char *exact_base, *exact_last, *exact_expect, *sampled;

static int group_setup(void **state)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/hf-ingest-XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    const char *jf = getenv("JEFIXTURE");
    if (!jf)
        return -1;
    exact_base = path_in_tmp("base.heap");
    exact_last = path_in_tmp("last.heap");
    exact_expect = path_in_tmp("expect.txt");
    sampled = path_in_tmp("sampled.heap");
    char *mid = path_in_tmp("mid.heap");
    char *cmd = hp_xasprintf("MALLOC_CONF=prof:true,lg_prof_sample:0,prof_accum:true %s "
                             "--threads 4 --rounds 2 --baseline %s --expect %s %s %s",
                             jf, exact_base, exact_expect, mid, exact_last);
    run_or_die(cmd);
    free(cmd);
    cmd = hp_xasprintf("MALLOC_CONF=prof:true,lg_prof_sample:12 %s --threads 6 --rounds 4 %s",
                       jf, sampled);
    run_or_die(cmd);
    free(cmd);
    free(mid);
    return 0;
}

static int group_teardown(void **state)
{
    char *cmd = hp_xasprintf("rm -rf '%s'", tmpdir);
    (void)system(cmd);
    free(cmd);
    free(exact_base);
    free(exact_last);
    free(exact_expect);
    free(sampled);
    return 0;
}

static void read_expect(const char *path, long long v[4])
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3]), 4);
    fclose(f);
}

/* With every allocation recorded, last dump minus the baseline is exactly
 * what the fixture says it allocated, for all four sample types. */
static void test_jemalloc_totals_exact(void **state)
{
    struct profile *base = parse_ok(exact_base), *last = parse_ok(exact_last);
    long long want[4];
    read_expect(exact_expect, want);
    double tb[PV_COUNT], tl[PV_COUNT];
    profile_totals(base, tb);
    profile_totals(last, tl);
    assert_int_equal(last->format, PROFILE_FORMAT_JEMALLOC);
    assert_int_equal(last->period, 1);
    assert_true(last->has_alloc);
    for (int v = 0; v < PV_COUNT; v++) {
        if (tl[v] - tb[v] != (double)want[v])
            fprintf(stderr, "%s: dump says %.0f, fixture counted %lld\n",
                    profile_value_name((enum profile_value)v), tl[v] - tb[v], want[v]);
        assert_true(tl[v] - tb[v] == (double)want[v]);
    }
    profile_free(base);
    profile_free(last);
}

/* Per-thread records add up to each stack's all-threads record, and the
 * fixture's thread names come through. */
static void test_jemalloc_threads(void **state)
{
    struct profile *p = parse_ok(exact_last);
    assert_true(p->nthreads >= 5);
    bool named = false;
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].name && strncmp(p->threads[i].name, "worker-", 7) == 0)
            named = true;
    assert_true(named);
    int64_t *sum = hp_xcalloc(p->nstacks, sizeof(*sum));
    for (size_t i = 0; i < p->nthread_samples; i++) {
        assert_true(p->thread_samples[i].thread >= 1 && p->thread_samples[i].thread <= p->nthreads);
        sum[p->thread_samples[i].stack] += p->thread_samples[i].raw[PV_INUSE_SPACE];
    }
    for (size_t i = 0; i < p->nsamples; i++)
        assert_int_equal(sum[p->samples[i].stack], p->samples[i].raw[PV_INUSE_SPACE]);
    free(sum);
    profile_free(p);
}

/* Mappings come from MAPPED_LIBRARIES; the fixture's own code and jemalloc
 * are mapped executable, and every stack address finds its mapping. */
static void test_jemalloc_mappings(void **state)
{
    struct profile *p = parse_ok(exact_last);
    assert_true(p->nmappings > 5);
    bool self = false, je = false;
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if (!(m->flags & PROFILE_MAP_EXEC))
            continue;
        if (strstr(m->path, "jefixture"))
            self = true;
        if (strstr(m->path, "libjemalloc"))
            je = true;
    }
    assert_true(self);
    assert_true(je);
    for (size_t i = 0; i < p->nlocs; i++)
        assert_true(p->locs[i].mapping > 0);
    profile_free(p);
}

/* Sampled dumps: each record is scaled by 1/(1-exp(-(s/n)/R)), in-use and
 * alloc pairs separately, as jeprof's AdjustSamples does. */
static void test_jemalloc_unsample_formula(void **state)
{
    struct profile *p = parse_ok(sampled);
    assert_int_equal(p->period, 4096);
    assert_int_equal(p->scaling, PROFILE_SCALING_V2);
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *s = &p->samples[i];
        double n = (double)s->raw[PV_INUSE_OBJECTS], b = (double)s->raw[PV_INUSE_SPACE];
        double want_b = b, want_n = n;
        if (n > 0 && b > 0) {
            double f = 1.0 / (1.0 - exp(-(b / n) / 4096.0));
            want_b = b * f;
            want_n = n * f;
        }
        assert_true(fabs(s->value[PV_INUSE_SPACE] - want_b) <= 1e-6 * (want_b + 1));
        assert_true(fabs(s->value[PV_INUSE_OBJECTS] - want_n) <= 1e-6 * (want_n + 1));
    }
    double t[PV_COUNT];
    profile_totals(p, t);
    /* Un-sampling only ever scales up. */
    int64_t raw = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        raw += p->samples[i].raw[PV_INUSE_SPACE];
    assert_true(t[PV_INUSE_SPACE] >= (double)raw);
    profile_free(p);
}

/* Feeding one byte at a time gives the same profile as one call. */
static void test_streaming_byte_by_byte(void **state)
{
    char *data;
    size_t len;
    assert_int_equal(hp_file_read(exact_last, 0, &data, &len, NULL), 0);
    struct ingest_parser *ps = ingest_parser_new(NULL);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(ingest_parser_feed(ps, data + i, 1, NULL), 0);
    struct profile *a = NULL;
    assert_int_equal(ingest_parser_finish(ps, &a, NULL), 0);
    ingest_parser_free(ps);
    struct profile *b = parse_ok(exact_last);
    assert_int_equal(a->nsamples, b->nsamples);
    assert_int_equal(a->nlocs, b->nlocs);
    assert_int_equal(a->nmappings, b->nmappings);
    double ta[PV_COUNT], tb[PV_COUNT];
    profile_totals(a, ta);
    profile_totals(b, tb);
    for (int v = 0; v < PV_COUNT; v++)
        assert_true(ta[v] == tb[v]);
    profile_free(a);
    profile_free(b);
    free(data);
}

/* Caller addresses are adjusted by one, the leaf is not (jeprof's
 * FixCallerAddresses). */
static void test_jemalloc_caller_adjust(void **state)
{
    const char *text = "heap_v2/1\n"
                       "  t*: 1: 64 [0: 0]\n"
                       "@ 0x1000 0x2000 0x3000\n"
                       "  t*: 1: 64 [0: 0]\n"
                       "\nMAPPED_LIBRARIES:\n"
                       "00001000-00004000 r-xp 00000000 08:01 42 /usr/bin/db (deleted)\n";
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(parse_buf(text, strlen(text), &p, &err), 0);
    const uint32_t *locs = profile_stack_locs(p, 0);
    assert_int_equal(p->locs[locs[0]].address, 0x1000);
    assert_int_equal(p->locs[locs[1]].address, 0x1fff);
    assert_int_equal(p->locs[locs[2]].address, 0x2fff);
    assert_int_equal(p->nmappings, 1);
    assert_string_equal(p->mappings[0].path, "/usr/bin/db");
    assert_true(p->mappings[0].flags & PROFILE_MAP_DELETED);
    profile_free(p);
    hp_buf_release(&err);
}

/* Only memory code can run from, and the files it belongs to, become
 * mappings: a BE's maps section holds thousands of anonymous lines (thread
 * stacks and guards, jemalloc's extents, [heap], [stack]) that no frame
 * falls in and that change every hour. Kept, every stored snapshot
 * carried them and had a layout of its own (leaks over 3 nodes x 720
 * hourly dumps with 3,000 such lines: 101 -> 478 ms CPU). A dump whose
 * threads came and went since the last one has the same mappings. */
static void test_jemalloc_maps_keep_code_only(void **state)
{
    const char *head = "heap_v2/1\n"
                       "  t*: 1: 64 [0: 0]\n"
                       "@ 0x401010 0x7ffc000fe100\n"
                       "  t*: 1: 64 [0: 0]\n"
                       "\nMAPPED_LIBRARIES:\n"
                       "00400000-00401000 r--p 00000000 08:01 42 /usr/bin/db\n"
                       "00401000-00404000 r-xp 00001000 08:01 42 /usr/bin/db\n"
                       "00404000-00405000 rw-p 00004000 08:01 42 /usr/bin/db\n"
                       "01000000-02000000 rw-p 00000000 00:00 0 [heap]\n"
                       "7e0000000000-7e0000001000 rwxp 00000000 00:00 0 \n";
    const char *threads[2] = {
        "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n"
        "7f0000800000-7f0000801000 ---p 00000000 00:00 0 \n",
        "7f0000000000-7f0000c00000 rw-p 00000000 00:00 0 \n"
        "7f0000c00000-7f0000c01000 ---p 00000000 00:00 0 \n"
        "7f1000000000-7f1000800000 rw-p 00000000 00:00 0 \n"
        "7f1000800000-7f1000801000 ---p 00000000 00:00 0 \n",
    };
    const char *tail = "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n"
                       "7ffc000fe000-7ffc00100000 r-xp 00000000 00:00 0 [vdso]\n";
    struct profile *p[2];
    for (int k = 0; k < 2; k++) {
        char *text = hp_xasprintf("%s%s%s", head, threads[k], tail);
        struct hp_buf err = HP_BUF_INIT(0);
        assert_int_equal(parse_buf(text, strlen(text), &p[k], &err), 0);
        hp_buf_release(&err);
        free(text);
    }
    /* /usr/bin/db's three, the anonymous executable one (JIT code), [vdso]. */
    assert_int_equal(p[0]->nmappings, 5);
    assert_int_equal(p[1]->nmappings, 5);
    for (size_t i = 0; i < 5; i++) {
        const struct profile_mapping *a = &p[0]->mappings[i], *b = &p[1]->mappings[i];
        assert_true(a->start == b->start && a->limit == b->limit);
        assert_string_equal(a->path, b->path);
        assert_true((a->flags & PROFILE_MAP_EXEC) || a->path[0] == '/');
    }
    /* Both frames still find their mappings (the binary and [vdso]). */
    const uint32_t *locs = profile_stack_locs(p[0], 0);
    assert_true(p[0]->locs[locs[0]].mapping > 0 && p[0]->locs[locs[1]].mapping > 0);
    profile_free(p[0]);
    profile_free(p[1]);
}

/* gperftools headers follow jeprof's rules. */
static void test_gperf_headers(void **state)
{
    static const struct {
        const char *header;
        enum profile_scaling scaling;
        uint64_t period;
    } cases[] = {
        { "heap profile:   2:   128 [  2:   128] @ heapprofile", PROFILE_SCALING_NONE, 1 },
        { "heap profile:   2:   128 [  2:   128] @ heap_v2/524288", PROFILE_SCALING_V2, 524288 },
        { "heap profile:   2:   128 [  4:   256] @ heap/1048576", PROFILE_SCALING_V1, 524288 },
        { "heap profile:   2:   128 [  4:   256] @ growth", PROFILE_SCALING_NONE, 1 },
        { "heap profile:   2:   128 [  2:   128]", PROFILE_SCALING_V1, 131072 },
        { "heap profile:   2:   128 [  4:   256]", PROFILE_SCALING_NONE, 1 },
        { "heap profile:   2:   128 [  2:   128] @ heap_v2", PROFILE_SCALING_V2, 131072 },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cases); i++) {
        char *text = hp_xasprintf("%s\n   2:   128 [  2:   128] @ 0x10 0x20\n", cases[i].header);
        struct profile *p = NULL;
        struct hp_buf err = HP_BUF_INIT(0);
        int r = parse_buf(text, strlen(text), &p, &err);
        if (r)
            fprintf(stderr, "%s: %s\n", cases[i].header, err.data);
        assert_int_equal(r, 0);
        assert_int_equal(p->format, PROFILE_FORMAT_GPERF);
        assert_int_equal(p->scaling, cases[i].scaling);
        assert_int_equal(p->period, cases[i].period);
        profile_free(p);
        hp_buf_release(&err);
        free(text);
    }
}

/* Real gperftools profiles from tcmalloc: the heap profiler (unsampled)
 * counts exactly what the program kept, plus its own vector. */
static void test_gperf_real_heapprofile(void **state)
{
    const char *tf = getenv("TCFIXTURE");
    if (!tf || !*tf) {
        fprintf(stderr, "skipped: tcmalloc fixture not built (libgoogle-perftools-dev missing)\n");
        skip();
    }
    char *out = path_in_tmp("tc.heap");
    char *cmd = hp_xasprintf("HEAPPROFILE=%s/tcunused %s heapprofile %s 2>/dev/null", tmpdir, tf,
                             out);
    run_or_die(cmd);
    free(cmd);
    struct profile *p = parse_ok(out);
    char *ex = hp_xasprintf("%s.expect", out);
    FILE *f = fopen(ex, "r");
    assert_non_null(f);
    long long objs, bytes;
    assert_int_equal(fscanf(f, "%lld %lld", &objs, &bytes), 2);
    fclose(f);
    double t[PV_COUNT];
    profile_totals(p, t);
    assert_int_equal(p->scaling, PROFILE_SCALING_NONE);
    /* Besides what the fixture kept, the profile holds its std::vector
     * (24-byte object, 800000-byte reserve) and at most tcmalloc's own 1 MiB
     * buffer for the profile text. */
    double extra = t[PV_INUSE_SPACE] - (double)bytes;
    assert_true(extra >= 800024 && extra <= 800024 + 1048576);
    assert_true(t[PV_INUSE_OBJECTS] >= (double)objs);
    assert_true(t[PV_INUSE_SPACE] == (double)p->header_raw[PV_INUSE_SPACE]);
    profile_free(p);
    free(ex);
    free(out);
}

/* Collapsed stacks: root first in, leaf first in the model, and rendered
 * back out identically (sums preserved, repeated stacks merged). */
static void test_collapsed_roundtrip(void **state)
{
    const char *text = "main;run;HashJoin::build 1000\n"
                       "main;run;Agg::insert 250\n"
                       "main;idle 5\n"
                       "main;run;HashJoin::build 24\n";
    struct profile *p = NULL;
    assert_int_equal(parse_buf(text, strlen(text), &p, NULL), 0);
    assert_int_equal(p->format, PROFILE_FORMAT_COLLAPSED);
    const uint32_t *locs = profile_stack_locs(p, 0);
    char buf[64];
    assert_string_equal(profile_frame_label(p, locs[0], 0, buf, sizeof(buf), false),
                        "HashJoin::build");
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_collapsed(f, &o, &out), 0);
    assert_non_null(strstr(out.data, "main;run;HashJoin::build 1024\n"));
    assert_non_null(strstr(out.data, "main;run;Agg::insert 250\n"));
    assert_non_null(strstr(out.data, "main;idle 5\n"));
    assert_true(f->total[PV_INUSE_SPACE] == 1279);
    hp_buf_release(&out);
    query_folded_free(f);
    profile_free(p);
}

static void test_detect(void **state)
{
    assert_int_equal(ingest_detect("heap_v2/524288\n", 15), PROFILE_FORMAT_JEMALLOC);
    assert_int_equal(ingest_detect("heap profile: 1: 2 [3: 4] @ heapprofile\n", 40),
                     PROFILE_FORMAT_GPERF);
    assert_int_equal(ingest_detect("\x1f\x8b\x08", 3), PROFILE_FORMAT_PPROF);
    assert_int_equal(ingest_detect("a;b;c 12\n", 9), PROFILE_FORMAT_COLLAPSED);
    assert_int_equal(ingest_detect("<html>hello</html>\n", 19), PROFILE_FORMAT_UNKNOWN);
}

/* Hostile input: each case must fail with the stated code and a message
 * that names the place, never crash. */
static void test_bad_input_messages(void **state)
{
    static const struct {
        const char *text;
        int code;
        const char *needle;
    } cases[] = {
        { "", HP_EPARSE, "empty input" },
        { "<html>500 Internal Server Error</html>\n", HP_EFORMAT, "unrecognized profile format" },
        { "heap_v2/0\n", HP_EPARSE, "line 1" },
        { "heap_v2/abc\n", HP_EPARSE, "positive period" },
        { "heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0x10\n  t*: x: 2 [0: 0]\n", HP_EPARSE, "line 4" },
        { "heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0x10 0xZZ\n", HP_EPARSE, "hexadecimal" },
        { "heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0x10\n", HP_EPARSE, "truncated" },
        { "heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0x10\n  t*: 1: 2 [0: 0]\n", HP_EPARSE,
          "MAPPED_LIBRARIES" },
        { "heap_v2/1\n@ 0x10\n  t*: 99999999999999999999: 2 [0: 0]\n", HP_EPARSE, "2^63" },
        { "heap_v2/1\n@ 0x10\n@ 0x20\n", HP_EPARSE, "no \"t*:\"" },
        { "heap_v2/1\ngarbage here\n", HP_EPARSE, "line 2" },
        { "heap profile: 1: x [1: 2] @ heapprofile\n", HP_EPARSE, "line 1" },
        { "heap profile: 1: 2 [1: 2] @ heapprofile\n 1: 2 [1: 2] 0x10\n", HP_EPARSE, "line 2" },
        /* Collapsed: bad lines are skipped; only a file without any valid
         * line fails, naming the first bad one. */
        { "# c\nno value here\n", HP_EPARSE, "line 2: \"no value here\"" },
        { "x 99999999999999999999999\n", HP_EPARSE, "line 1: \"x 9999" },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cases); i++) {
        struct profile *p = NULL;
        struct hp_buf err = HP_BUF_INIT(0);
        int r = parse_buf(cases[i].text, strlen(cases[i].text), &p, &err);
        if (r != cases[i].code || !err.data || !strstr(err.data, cases[i].needle))
            fprintf(stderr, "case %zu: r=%d err=%s\n", i, r, err.data ? err.data : "(none)");
        assert_int_equal(r, cases[i].code);
        assert_null(p);
        assert_non_null(strstr(err.data, cases[i].needle));
        hp_buf_release(&err);
    }
}

/* A 10^6-frame stack is refused at the frame cap, with bounded memory. */
static void test_bad_input_huge_stack(void **state)
{
    struct hp_buf b = HP_BUF_INIT(0);
    hp_buf_puts(&b, "heap_v2/1\n  t*: 1: 2 [0: 0]\n@");
    for (int i = 0; i < 1000000; i++)
        hp_buf_puts(&b, " 0x7f0012345678");
    hp_buf_puts(&b, "\n  t*: 1: 2 [0: 0]\n");
    struct hp_buf err = HP_BUF_INIT(0);
    struct profile *p = NULL;
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_line = 64 << 20;
    int r = ingest_parse(b.data, b.len, &lim, &p, &err);
    assert_int_equal(r, HP_ETOOBIG);
    assert_non_null(strstr(err.data, "frames"));
    assert_non_null(strstr(err.data, "line 3"));
    /* With the default line cap the same input stops even earlier. */
    hp_buf_reset(&err);
    r = ingest_parse(b.data, b.len, NULL, &p, &err);
    assert_int_equal(r, HP_ETOOBIG);
    assert_non_null(strstr(err.data, "longer than the limit"));
    hp_buf_release(&err);
    hp_buf_release(&b);
}

/* Truncating a real dump anywhere never crashes; cuts inside the stacks are
 * reported as errors (or, at a record boundary, as a missing maps section). */
static void test_bad_input_truncations(void **state)
{
    char *data;
    size_t len;
    assert_int_equal(hp_file_read(exact_last, 0, &data, &len, NULL), 0);
    const char *maps = strstr(data, "MAPPED_LIBRARIES:");
    assert_non_null(maps);
    size_t maps_off = (size_t)(maps - data);
    size_t step = len / 97 + 1;
    for (size_t cut = 0; cut < len; cut += step) {
        struct profile *p = NULL;
        struct hp_buf err = HP_BUF_INIT(0);
        int r = ingest_parse(data, cut, NULL, &p, &err);
        if (cut < maps_off) {
            assert_true(r < 0);
            assert_non_null(err.data);
        }
        profile_free(p);
        hp_buf_release(&err);
    }
    free(data);
}

/* Names that are not UTF-8 survive parsing and make valid JSON (U+FFFD). */
static void test_non_utf8_names(void **state)
{
    const char text[] = "main;caf\xe9;bad\xff\xfe 42\n";
    struct profile *p = NULL;
    assert_int_equal(parse_buf(text, sizeof(text) - 1, &p, NULL), 0);
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    assert_int_equal(query_top_build(f, o.sample, &t), 0);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_json(p, f, t, &o, &out), 0);
    assert_non_null(strstr(out.data, "caf\xef\xbf\xbd"));
    assert_null(strstr(out.data, "\xff"));
    hp_buf_release(&out);
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
}

/* Counts that each fit int64 but whose sums do not: found by the fuzzer.
 * Output saturates instead of overflowing. */
static void test_huge_values_saturate(void **state)
{
    const char text[] = "a;b 9000000000000000000\na;c 9000000000000000000\n";
    struct profile *p = NULL;
    assert_int_equal(parse_buf(text, sizeof(text) - 1, &p, NULL), 0);
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    assert_int_equal(query_top_build(f, o.sample, &t), 0);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_json(p, f, t, &o, &out), 0);
    assert_non_null(strstr(out.data, "\"total\": 9223372036854775807"));
    hp_buf_reset(&out);
    assert_int_equal(query_render_collapsed(f, &o, &out), 0);
    assert_non_null(strstr(out.data, "a;b 9000000000000000000\n"));
    hp_buf_release(&out);
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
}

/* Two records of INT64_MAX bytes each: the parser's check of the header
 * total against the sum of the records saturates instead of overflowing
 * (UBSan found the overflow); the saturated sum equals the header's. */
static void test_jemalloc_huge_records_saturate(void **state)
{
    const char text[] = "heap_v2/524288\n"
                        "  t*: 2: 9223372036854775807 [0: 0]\n"
                        "@ 0x1000\n"
                        "  t*: 1: 9223372036854775807 [0: 0]\n"
                        "@ 0x2000\n"
                        "  t*: 1: 9223372036854775807 [0: 0]\n"
                        "\nMAPPED_LIBRARIES:\n";
    struct profile *p = NULL;
    assert_int_equal(parse_buf(text, sizeof(text) - 1, &p, NULL), 0);
    assert_int_equal(p->nsamples, 2);
    assert_non_null(p->hint);
    assert_non_null(strstr(p->hint, "header total equals the sum"));
    profile_free(p);
}

static void test_limits_total_bytes(void **state)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = 100;
    struct ingest_parser *ps = ingest_parser_new(&lim);
    char chunk[64];
    memset(chunk, 'a', sizeof(chunk));
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(ingest_parser_feed(ps, "heap_v2/1\n", 10, &err), 0);
    int r = 0;
    for (int i = 0; i < 4 && r == 0; i++)
        r = ingest_parser_feed(ps, chunk, sizeof(chunk), &err);
    assert_int_equal(r, HP_ETOOBIG);
    assert_non_null(strstr(err.data, "limit of 100 bytes"));
    /* Sticky: later calls return the same error. */
    assert_int_equal(ingest_parser_feed(ps, "x", 1, NULL), HP_ETOOBIG);
    struct profile *p = NULL;
    assert_int_equal(ingest_parser_finish(ps, &p, NULL), HP_ETOOBIG);
    ingest_parser_free(ps);
    hp_buf_release(&err);
}

static void test_maps_lines(void **state)
{
    char l1[] = "7f0a1c000000-7f0a1c021000 rw-p 00000000 00:00 0 ";
    char l2[] = "55d1c2a00000-55d1c5e00000 r-xp 00001000 fd:01 1234   /opt/my be/doris_be";
    char l3[] = "7ffd4d1f3000-7ffd4d1f5000 r-xp 00000000 00:00 0                          [vdso]";
    char l4[] = "not a maps line";
    struct profile_mapping m;
    assert_int_equal(ingest_maps_line(l1, strlen(l1), &m), 1);
    assert_true(m.flags & PROFILE_MAP_ANON);
    assert_int_equal(ingest_maps_line(l2, strlen(l2), &m), 1);
    assert_string_equal(m.path, "/opt/my be/doris_be");
    assert_int_equal(m.offset, 0x1000);
    assert_int_equal(m.start, 0x55d1c2a00000);
    assert_true(m.flags & PROFILE_MAP_EXEC);
    assert_int_equal(ingest_maps_line(l3, strlen(l3), &m), 1);
    assert_true(m.flags & PROFILE_MAP_SPECIAL);
    assert_int_equal(ingest_maps_line(l4, strlen(l4), &m), 0);
}

/* The collapsed output of a fixture dump sums exactly to the total. */
static void test_collapsed_sums_to_total(void **state)
{
    struct profile *p = parse_ok(sampled);
    struct query_opts o;
    query_opts_init(&o);
    struct query_folded *f = NULL;
    assert_int_equal(query_fold(p, &o, &f, NULL), 0);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_collapsed(f, &o, &out), 0);
    long long sum = 0;
    for (char *line = out.data; line && *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        char *sp = strrchr(line, ' ');
        assert_non_null(sp);
        sum += strtoll(sp + 1, NULL, 10);
        line = nl + 1;
    }
    assert_int_equal(sum, (long long)f->total[PV_INUSE_SPACE]);
    hp_buf_release(&out);
    query_folded_free(f);
    profile_free(p);
}

static int64_t total_raw(const struct profile *p, int v)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        t += p->samples[i].raw[v];
    return t;
}

static double total_value(const struct profile *p, int v)
{
    double t = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        t += p->samples[i].value[v];
    return t;
}

/* Go's runtime/pprof text heap profile (debug=1), shaped like the ones Go
 * writes: heap/2*MemProfileRate, an allocation without a stack, frame
 * comments and the MemStats trailer. Before: "stack has no addresses". */
static const char go_legacy[] =
    "heap profile: 3: 4384 [7: 16680] @ heap/1048576\n"
    "1: 288 [2: 296] @\n"
    "1: 4096 [4: 16384] @ 0x4a1b2c 0x4a0f10 0x43c7e1\n"
    "#\t0x4a1b2b\tmain.grow+0x4b\t\t/src/app/main.go:21\n"
    "#\t0x4a0f0f\tmain.main+0x2f\t\t/src/app/main.go:12\n"
    "\n"
    "1: 0 [1: 0] @ 0x4a1c90 0x4a0f10\n"
    "\n"
    "# runtime.MemStats\n"
    "# Alloc = 1234567\n"
    "# NumGC = 2\n";

static void test_go_legacy_empty_stack_and_scaling(void **state)
{
    (void)state;
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = parse_buf(go_legacy, strlen(go_legacy), &p, &err);
    if (r)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    assert_int_equal(p->nsamples, 3);
    /* go pprof: "heap" is Poisson-scaled at half the stated period. */
    assert_int_equal(p->scaling, PROFILE_SCALING_V2);
    assert_int_equal(p->period, 524288);
    bool found = false;
    char buf[64];
    for (size_t i = 0; i < p->nsamples; i++) {
        const uint32_t *locs = profile_stack_locs(p, p->samples[i].stack);
        if (!strcmp(profile_frame_label(p, locs[0], 0, buf, sizeof(buf), false), "<no stack>")) {
            found = true;
            assert_int_equal(p->samples[i].raw[PV_INUSE_SPACE], 288);
            double scale = 1.0 / (1.0 - exp(-288.0 / 524288.0));
            assert_true(fabs(p->samples[i].value[PV_INUSE_SPACE] - 288.0 * scale) < 1e-6);
        }
    }
    assert_true(found);
    assert_int_equal(total_raw(p, PV_ALLOC_SPACE), 16680);
    assert_true(total_value(p, PV_INUSE_SPACE) > 4384.0 * 100); /* scaled, not raw */
    profile_free(p);
    /* A gperftools "heap/N" file without Go marks keeps jeprof's v1 rule. */
    const char *gp = "heap profile: 1: 4096 [1: 4096] @ heap/1048576\n"
                     "1: 4096 [1: 4096] @ 0x400100 0x400200\n";
    assert_int_equal(parse_buf(gp, strlen(gp), &p, NULL), 0);
    assert_int_equal(p->scaling, PROFILE_SCALING_V1);
    profile_free(p);
    hp_buf_release(&err);
}

/* Collapsed stacks with comments and junk, as flamegraph.pl accepts them:
 * skipped with a count. Before: the first bad line refused the file (and a
 * leading comment made it "unrecognized"). */
static void test_collapsed_skips_comments_and_invalid_lines(void **state)
{
    (void)state;
    const char *text = "# collapsed by some tool\n"
                       "// another comment\n"
                       "main;run;build 1000\n"
                       "invalid line\n"
                       "main;idle 24\n";
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(parse_buf(text, strlen(text), &p, &err), 0);
    assert_int_equal(p->format, PROFILE_FORMAT_COLLAPSED);
    assert_int_equal(p->lines_skipped, 3);
    assert_string_equal(p->skipped_first, "invalid line 4: \"invalid line\"");
    assert_int_equal(total_raw(p, PV_INUSE_SPACE), 1024);
    profile_free(p);
    p = NULL;
    /* Fed a byte at a time, the comments still decide nothing too early. */
    struct ingest_parser *ps = ingest_parser_new(NULL);
    for (size_t i = 0; i < strlen(text); i++)
        assert_int_equal(ingest_parser_feed(ps, text + i, 1, &err), 0);
    assert_int_equal(ingest_parser_finish(ps, &p, &err), 0);
    assert_int_equal(total_raw(p, PV_INUSE_SPACE), 1024);
    profile_free(p);
    ingest_parser_free(ps);
    /* No valid line: the message names the first bad line. */
    const char *bad = "# only a comment\ninvalid line\nstill not a stack\n";
    p = NULL;
    assert_int_equal(parse_buf(bad, strlen(bad), &p, &err), HP_EPARSE);
    assert_null(p);
    assert_non_null(strstr(err.data, "line 2: \"invalid line\""));
    assert_null(strstr(err.data, "unrecognized"));
    hp_buf_release(&err);
}

/* The legacy "--- Memory map: ---" section in the brief form go pprof reads
 * (range, permissions, file); before: 0 mappings. */
static void test_gperf_memory_map_section(void **state)
{
    (void)state;
    const char *text = "heap profile:    2:    8192 [    3:    12288] @ heapprofile\n"
                       "     2:     8192 [     3:    12288] @ 0x00400a1c 0x7f0000000100\n"
                       "\n"
                       "--- Memory map: ---\n"
                       "  00400000-00fcb000: /usr/local/bin/server\n"
                       "  7f0000000000-7f0000100000 r-xp /lib/x86_64-linux-gnu/libc.so.6 @ 1000\n"
                       "  7f0000200000-7f0000300000 rw-p /lib/x86_64-linux-gnu/libc.so.6\n";
    struct profile *p = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = parse_buf(text, strlen(text), &p, &err);
    if (r)
        fprintf(stderr, "%s\n", err.data);
    assert_int_equal(r, 0);
    assert_int_equal(p->nmappings, 3);
    bool server = false, libc = false;
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if (!strcmp(m->path, "/usr/local/bin/server")) {
            server = true;
            assert_true(m->start == 0x400000 && m->limit == 0xfcb000);
            assert_true(m->flags & PROFILE_MAP_EXEC);
        }
        if (m->start == 0x7f0000000000) {
            libc = true;
            assert_string_equal(m->path, "/lib/x86_64-linux-gnu/libc.so.6");
            assert_true(m->offset == 0x1000);
        }
    }
    assert_true(server && libc);
    profile_free(p);
    hp_buf_release(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jemalloc_totals_exact),
        cmocka_unit_test(test_jemalloc_threads),
        cmocka_unit_test(test_jemalloc_mappings),
        cmocka_unit_test(test_jemalloc_unsample_formula),
        cmocka_unit_test(test_streaming_byte_by_byte),
        cmocka_unit_test(test_jemalloc_caller_adjust),
        cmocka_unit_test(test_jemalloc_maps_keep_code_only),
        cmocka_unit_test(test_gperf_headers),
        cmocka_unit_test(test_gperf_real_heapprofile),
        cmocka_unit_test(test_collapsed_roundtrip),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_bad_input_messages),
        cmocka_unit_test(test_bad_input_huge_stack),
        cmocka_unit_test(test_bad_input_truncations),
        cmocka_unit_test(test_non_utf8_names),
        cmocka_unit_test(test_huge_values_saturate),
        cmocka_unit_test(test_jemalloc_huge_records_saturate),
        cmocka_unit_test(test_limits_total_bytes),
        cmocka_unit_test(test_maps_lines),
        cmocka_unit_test(test_collapsed_sums_to_total),
        cmocka_unit_test(test_go_legacy_empty_stack_and_scaling),
        cmocka_unit_test(test_collapsed_skips_comments_and_invalid_lines),
        cmocka_unit_test(test_gperf_memory_map_section),
    };
    return cmocka_run_group_tests_name("ingest", tests, group_setup, group_teardown);
}
