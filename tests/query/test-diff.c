/* query diff: numbers against jeprof --base on real jemalloc dumps, the
 * sampling-noise model, normalization and the output formats. */
#include <limits.h>
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

struct jeprof_row {
    long long flat, cum;
    unsigned long long addr;
};

/* Run `jeprof --text --show_bytes --addresses --base=A BIN B` and parse its
 * total and rows. */
static long long run_jeprof(const char *dir, const char *a, const char *b,
                            struct jeprof_row *rows, size_t cap, size_t *ret_n)
{
    char *pa = qt_path(dir, a), *pb = qt_path(dir, b), *out = qt_path(dir, "jeprof.txt");
    char *base = hp_xasprintf("--base=%s", pa);
    char *argv[] = { "jeprof", "--text", "--show_bytes", "--addresses", base,
                     (char *)qt_jefixture(), pb, NULL };
    assert_int_equal(qt_run(argv, NULL, out), 0);
    char *text = qt_slurp(out);
    long long total = LLONG_MIN;
    size_t n = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        long long t, fl, cu;
        double p1, p2, p3;
        unsigned long long addr;
        if (sscanf(line, "Total: %lld B", &t) == 1)
            total = t;
        else if (sscanf(line, " %lld %lf%% %lf%% %lld %lf%% %llx", &fl, &p1, &p2, &cu, &p3,
                        &addr) == 6 && n < cap)
            rows[n++] = (struct jeprof_row){ .flat = fl, .cum = cu, .addr = addr };
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    free(pa);
    free(pb);
    free(out);
    free(base);
    *ret_n = n;
    return total;
}

/* Flag the locations jeprof treats as the allocator's: its
 * RemoveUninterestingFrames names (malloc, calloc, ...), as jeprof itself
 * resolves them (`jeprof --raw` prints its symbol table). libjemalloc's own
 * locations are flagged by qt_flag_allocator. */
static void flag_like_jeprof(const char *dir, const char *heap, struct profile *p)
{
    static const char *skip[] = { "calloc", "cfree", "malloc", "free", "memalign",
                                  "posix_memalign", "aligned_alloc", "pvalloc", "valloc",
                                  "realloc", "mallocx", "rallocx", "xallocx", "dallocx",
                                  "sdallocx", "operator new", "operator new[]" };
    char *ph = qt_path(dir, heap), *out = qt_path(dir, "raw.txt");
    char *argv[] = { "jeprof", "--raw", (char *)qt_jefixture(), ph, NULL };
    /* jeprof prints the symbols, then exits 2 ("can only dump remote
     * profiles") for a local file. */
    assert_true(qt_run(argv, NULL, out) >= 0);
    char *text = qt_slurp(out);
    assert_non_null(strstr(text, "--- symbol"));
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "--- heap", 8) == 0)
            break;
        unsigned long long addr;
        int off = 0;
        if (sscanf(line, "0x%llx %n", &addr, &off) == 1 && off > 0) {
            char *name = line + off, *lt = strchr(name, '<');
            if (lt)
                *lt = '\0';
            for (size_t k = 0; k < HP_ARRAY_SIZE(skip); k++) {
                uint32_t loc;
                if (strcmp(name, skip[k]) == 0 && hp_map64_get(&p->loc_index, addr, &loc))
                    p->locs[loc].flags |= PROFILE_LOC_ALLOCATOR;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    free(ph);
    free(out);
}

static struct query_diff *diff_files(const char *dir, const char *a, const char *b,
                                     bool symbolize, bool normalize, struct profile **ret_pa,
                                     struct profile **ret_pb, struct query_folded **ret_fa,
                                     struct query_folded **ret_fb)
{
    char *pa = qt_path(dir, a), *pb = qt_path(dir, b);
    struct profile *A = qt_parse(pa), *B = qt_parse(pb);
    if (symbolize) {
        assert_true(qt_symbolize(A, qt_jefixture()) > 0);
        assert_true(qt_symbolize(B, qt_jefixture()) > 0);
    } else {
        qt_flag_allocator(A);
        qt_flag_allocator(B);
        flag_like_jeprof(dir, a, A);
        flag_like_jeprof(dir, b, B);
    }
    struct query_folded *fa = qt_fold(A), *fb = qt_fold(B);
    struct query_diff_opts o;
    query_diff_opts_init(&o);
    o.normalize = normalize;
    struct query_diff *d = NULL;
    assert_int_equal(query_diff_build(fa, fb, &o, &d), 0);
    free(pa);
    free(pb);
    *ret_pa = A;
    *ret_pb = B;
    *ret_fa = fa;
    *ret_fb = fb;
    return d;
}

static void free_all(struct query_diff *d, struct profile *A, struct profile *B,
                     struct query_folded *fa, struct query_folded *fb)
{
    query_diff_free(d);
    query_folded_free(fa);
    query_folded_free(fb);
    profile_free(A);
    profile_free(B);
}

/* Every jeprof row (one per address) must have the same flat and cum as
 * our row for that address; totals must agree. */
static void compare_with_jeprof(int lg_sample, const char *const *args)
{
    char *dir = qt_tmpdir();
    const char *dumps[] = { "a.heap", "b.heap" };
    assert_int_equal(qt_jefixture_run(dir, lg_sample, args, dumps, 2), 0);
    struct jeprof_row rows[512];
    size_t nrows = 0;
    long long jtotal = run_jeprof(dir, "a.heap", "b.heap", rows, 512, &nrows);
    assert_true(jtotal != LLONG_MIN);

    struct profile *A, *B;
    struct query_folded *fa, *fb;
    struct query_diff *d = diff_files(dir, "a.heap", "b.heap", false, false, &A, &B, &fa, &fb);
    /* jeprof prints "%d" of its float sum: truncation toward zero. */
    assert_true(llabs((long long)d->delta - jtotal) <= 1);
    assert_true(jtotal > 0);

    size_t compared = 0;
    for (size_t i = 0; i < nrows; i++) {
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "0x%016llx", rows[i].addr);
        const struct query_diff_row *r = NULL;
        for (size_t k = 0; k < d->nfuncs; k++)
            if (strncmp(d->funcs[k].name, prefix, strlen(prefix)) == 0) {
                r = &d->funcs[k];
                break;
            }
        if (!r)
            fail_msg("jeprof row for %s has no counterpart", prefix);
        if (llabs((long long)r->delta - rows[i].flat) > 1 ||
            llabs((long long)r->delta_cum - rows[i].cum) > 1)
            fail_msg("%s: jeprof flat %lld cum %lld, ours %.1f %.1f", prefix, rows[i].flat,
                     rows[i].cum, r->delta, r->delta_cum);
        compared++;
    }
    assert_true(compared >= 8);
    free_all(d, A, B, fa, fb);
    qt_tmpdir_remove(dir);
}

static void test_diff_matches_jeprof_exact(void **state)
{
    (void)state;
    const char *args[] = { "--threads", "6", NULL };
    compare_with_jeprof(0, args);
}

static void test_diff_matches_jeprof_sampled(void **state)
{
    (void)state;
    const char *args[] = { "--threads", "6", "--scale", "8", NULL };
    compare_with_jeprof(12, args);
}

/* The exact diff says no noise; on sampled dumps the growing paths stand out
 * and the same workload run twice differs by no more than the noise. */
static void test_diff_noise_flags(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *exact[] = { "e1.heap", "e2.heap" };
    const char *args[] = { "--threads", "6", "--scale", "4", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, exact, 2), 0);
    struct profile *A, *B;
    struct query_folded *fa, *fb;
    struct query_diff *d = diff_files(dir, "e1.heap", "e2.heap", true, false, &A, &B, &fa, &fb);
    assert_true(d->sigma == 0);
    assert_false(d->noise);
    free_all(d, A, B, fa, fb);
    /* A file against itself: no change, which is never beyond noise, even
     * with none (every allocation recorded). Before: "beyond sampling noise". */
    d = diff_files(dir, "e1.heap", "e1.heap", true, false, &A, &B, &fa, &fb);
    assert_true(d->delta == 0 && d->sigma == 0);
    assert_true(d->noise);
    for (size_t i = 0; i < d->nfuncs; i++)
        assert_true(d->funcs[i].noise && d->funcs[i].noise_cum);
    struct query_opts qo;
    query_opts_init(&qo);
    struct hp_buf txt = HP_BUF_INIT(0);
    assert_int_equal(query_render_diff_text(d, "a", "a", &qo, &txt), 0);
    hp_buf_append(&txt, "", 1);
    assert_null(strstr(txt.data, "beyond sampling noise"));
    assert_non_null(strstr(txt.data, "within sampling noise"));
    hp_buf_release(&txt);
    free_all(d, A, B, fa, fb);
    d = diff_files(dir, "e1.heap", "e2.heap", true, false, &A, &B, &fa, &fb);
    const struct query_diff_row *agg = query_diff_find_func(d, "agg_hash_table_resize");
    assert_non_null(agg);
    assert_false(agg->noise_cum);
    assert_true(agg->delta_cum > 1e6); /* one 1 MiB block per worker per round */
    free_all(d, A, B, fa, fb);

    /* Sampled growth: 1 MiB blocks are always recorded, the leak path's
     * small objects are sampled; both grow beyond the noise. */
    const char *sampled[] = { "s1.heap", "s2.heap", "s3.heap", "s4.heap" };
    assert_int_equal(qt_jefixture_run(dir, 13, args, sampled, 4), 0);
    d = diff_files(dir, "s1.heap", "s4.heap", true, false, &A, &B, &fa, &fb);
    assert_true(d->sigma > 0);
    assert_false(d->noise);
    agg = query_diff_find_func(d, "agg_hash_table_resize");
    assert_non_null(agg);
    assert_false(agg->noise_cum);
    free_all(d, A, B, fa, fb);

    /* The same workload in two processes: no real change. The total must
     * sit within 4 sigma (a false alarm has odds of about 1 in 16,000). */
    const char *one[] = { "x.heap" }, *two[] = { "y.heap" };
    assert_int_equal(qt_jefixture_run(dir, 13, args, one, 1), 0);
    assert_int_equal(qt_jefixture_run(dir, 13, args, two, 1), 0);
    d = diff_files(dir, "x.heap", "y.heap", true, false, &A, &B, &fa, &fb);
    assert_true(d->sigma > 0);
    assert_true(fabs(d->delta) < 4 * d->sigma);
    /* The small-object leak path is sampled: noise for it is non-zero. */
    const struct query_diff_row *leak = query_diff_find_func(d, "leak_tablet_schema");
    assert_non_null(leak);
    assert_true(leak->sigma_cum > 0);
    free_all(d, A, B, fa, fb);
    qt_tmpdir_remove(dir);
}

static void test_diff_normalize_shares(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *dumps[] = { "a.heap", "b.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, 2), 0);
    struct profile *A, *B;
    struct query_folded *fa, *fb;
    struct query_diff *d = diff_files(dir, "a.heap", "b.heap", true, true, &A, &B, &fa, &fb);
    double sum = 0;
    for (size_t i = 0; i < d->nstacks; i++) {
        const struct query_diff_row *r = &d->stacks[i];
        assert_true(fabs(r->delta - (r->b / d->b_total - r->a / d->a_total)) < 1e-12);
        sum += r->delta;
    }
    /* Shares sum to one on each side, so their differences sum to zero. */
    assert_true(fabs(sum) < 1e-9);
    const struct query_diff_row *leak = query_diff_find_func(d, "leak_tablet_schema");
    assert_non_null(leak);
    assert_true(fabs(leak->delta_cum -
                     (leak->b_cum / d->b_total - leak->a_cum / d->a_total)) < 1e-12);
    free_all(d, A, B, fa, fb);
    qt_tmpdir_remove(dir);
}

static void test_diff_collapsed_two_columns(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *dumps[] = { "a.heap", "b.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(dir, 10, args, dumps, 2), 0);
    struct profile *A, *B;
    struct query_folded *fa, *fb;
    struct query_diff *d = diff_files(dir, "a.heap", "b.heap", true, false, &A, &B, &fa, &fb);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_diff_collapsed(d, &out), 0);
    hp_buf_append(&out, "", 1);
    long long sa = 0, sb = 0;
    size_t lines = 0;
    bool saw_leak = false;
    for (char *line = out.data; line && *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        char *sp2 = strrchr(line, ' ');
        assert_non_null(sp2);
        *sp2 = '\0';
        char *sp1 = strrchr(line, ' ');
        assert_non_null(sp1);
        long long va = strtoll(sp1 + 1, NULL, 10), vb = strtoll(sp2 + 1, NULL, 10);
        sa += va;
        sb += vb;
        if (strstr(line, "leak_tablet_schema"))
            saw_leak = true;
        lines++;
        line = nl + 1;
    }
    assert_true(lines > 3);
    assert_true(saw_leak);
    assert_int_equal(sa, (long long)d->a_total);
    assert_int_equal(sb, (long long)d->b_total);
    hp_buf_release(&out);
    free_all(d, A, B, fa, fb);
    qt_tmpdir_remove(dir);
}

static void test_diff_json_and_text(void **state)
{
    (void)state;
    char *dir = qt_tmpdir();
    const char *dumps[] = { "a.heap", "b.heap" };
    const char *args[] = { "--threads", "3", NULL };
    assert_int_equal(qt_jefixture_run(dir, 0, args, dumps, 2), 0);
    struct profile *A, *B;
    struct query_folded *fa, *fb;
    struct query_diff *d = diff_files(dir, "a.heap", "b.heap", true, false, &A, &B, &fa, &fb);
    struct query_opts o;
    query_opts_init(&o);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_diff_json(d, "a.heap", "b.heap", &o, &out), 0);
    json_error_t je;
    json_t *root = json_loadb(out.data, out.len, 0, &je);
    assert_non_null(root);
    assert_true(fabs(json_real_value(json_object_get(root, "delta")) - d->delta) < 1e-6);
    json_t *funcs = json_object_get(root, "functions");
    assert_int_equal(json_array_size(funcs), d->nfuncs);
    bool found = false;
    for (size_t i = 0; i < json_array_size(funcs); i++) {
        json_t *f = json_array_get(funcs, i);
        if (strcmp(json_string_value(json_object_get(f, "name")), "agg_hash_table_resize") == 0)
            found = json_real_value(json_object_get(f, "delta_cum")) > 1e6 &&
                    json_is_false(json_object_get(f, "within_noise_cum"));
    }
    assert_true(found);
    json_decref(root);
    hp_buf_reset(&out);
    o.top = 5;
    assert_int_equal(query_render_diff_text(d, "a.heap", "b.heap", &o, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "agg_hash_table_resize"));
    assert_non_null(strstr(out.data, "every allocation recorded"));
    hp_buf_release(&out);
    free_all(d, A, B, fa, fb);
    qt_tmpdir_remove(dir);
}

/* The variance of one sample follows INTERNALS.md: v^2 (1 - q) / c. */
static void test_diff_sample_variance_formula(void **state)
{
    (void)state;
    struct profile *p = profile_new(PROFILE_FORMAT_JEMALLOC);
    p->scaling = PROFILE_SCALING_V2;
    p->period = 524288;
    uint32_t loc = profile_location_for_address(p, 0x1000);
    uint32_t st = profile_stack_add(p, &loc, 1);
    int64_t raw[PV_COUNT] = { 10, 10 * 4096, 0, 0 };
    struct profile_sample *s = profile_sample_add(p, st, 0, raw);
    profile_unsample(p);
    s = &p->samples[0];
    double var[PV_COUNT];
    query_sample_variance(p, s, var);
    double q = -expm1(-4096.0 / 524288.0);
    double bytes = 10 * 4096 / q;
    assert_true(fabs(s->value[PV_INUSE_SPACE] - bytes) < 1e-6 * bytes);
    assert_true(fabs(var[PV_INUSE_SPACE] - bytes * bytes * (1 - q) / 10) < 1e-6 * var[1]);
    assert_true(var[PV_ALLOC_SPACE] == 0);
    /* An absent stack: one allocation of that size. */
    double one = 4096 / q;
    assert_true(fabs(query_absent_variance(PROFILE_SCALING_V2, 524288, 4096, true) -
                     one * one * (1 - q)) < 1e-6 * one * one);
    /* Unsampled profiles carry no noise. */
    p->period = 1;
    query_sample_variance(p, s, var);
    assert_true(var[PV_INUSE_SPACE] == 0);
    assert_true(query_absent_variance(PROFILE_SCALING_V2, 1, 4096, true) == 0);
    profile_free(p);
}

/* A Go heap profile written at Go's default rate (Period 524288 in the
 * file): its rows carry sampling noise from that period, as go tool pprof
 * reads the file, instead of "every allocation recorded" and exact rows. */
static void test_diff_go_pprof_noise_from_period(void **state)
{
    (void)state;
    const char *dd = getenv("DATADIR");
    assert_non_null(dd);
    char *path = qt_path(dd, "go-heap-sampled.pb.gz");
    struct profile *p = qt_parse(path);
    assert_int_equal(p->period, 524288);
    struct query_folded *f = qt_fold(p);
    struct query_top *t = NULL;
    assert_int_equal(query_top_build(f, PV_INUSE_SPACE, &t), 0);
    struct query_opts qo;
    query_opts_init(&qo);
    struct hp_buf out = HP_BUF_INIT(0);
    assert_int_equal(query_render_top_text(p, f, t, &qo, &out), 0);
    hp_buf_append(&out, "", 1);
    assert_non_null(strstr(out.data, "sampled every 524288 bytes"));
    assert_null(strstr(out.data, "unsampled"));
    /* main.leakTabletSchema keeps 4096 x 4096 B in 4 KiB objects: about
     * 4096 x (1 - exp(-4096/524288)) = 32 recorded samples, so a relative
     * standard error near 1/sqrt(32). */
    double var[PV_COUNT] = { 0 };
    bool seen = false;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct profile_sample *s = &p->samples[i];
        if (s->value[PV_INUSE_OBJECTS] <= 0)
            continue;
        double avg = s->value[PV_INUSE_SPACE] / s->value[PV_INUSE_OBJECTS];
        if (avg < 4000 || avg > 4200)
            continue;
        query_sample_variance(p, s, var);
        double rel = sqrt(var[PV_INUSE_SPACE]) / s->value[PV_INUSE_SPACE];
        assert_true(rel > 0.1 && rel < 0.3);
        seen = true;
    }
    assert_true(seen);
    struct query_diff_opts o;
    query_diff_opts_init(&o);
    struct query_diff *d = NULL;
    assert_int_equal(query_diff_build(f, f, &o, &d), 0);
    assert_true(d->sigma > 0);
    assert_true(d->noise);
    size_t exact = 0;
    for (size_t i = 0; i < d->nfuncs; i++)
        exact += d->funcs[i].sigma_cum == 0;
    assert_true(exact < d->nfuncs);
    query_diff_free(d);
    hp_buf_release(&out);
    query_top_free(t);
    query_folded_free(f);
    profile_free(p);
    free(path);
}

/* A profile of named stacks, "root;...;leaf" each, 1 KB a stack. */
static struct profile *named_profile(const char *const *stacks, size_t n)
{
    struct profile *p = profile_new(PROFILE_FORMAT_COLLAPSED);
    for (size_t i = 0; i < n; i++) {
        uint32_t locs[16], nl = 0;
        /* Locations are leaf first in a stack. */
        const char *s = stacks[i], *end = s + strlen(s);
        while (end > s && nl < 16) {
            const char *semi = end;
            while (semi > s && semi[-1] != ';')
                semi--;
            locs[nl++] = profile_location_for_name(p, semi, (size_t)(end - semi));
            end = semi > s ? semi - 1 : s;
        }
        uint32_t st = profile_stack_add(p, locs, nl);
        const int64_t raw[PV_COUNT] = { [PV_INUSE_OBJECTS] = 1, [PV_INUSE_SPACE] = 1024 };
        (void)profile_sample_add(p, st, 0, raw);
    }
    profile_finish(p);
    return p;
}

/* The stack union translates a folded profile's names by their numbers in
 * it: a profile folded after another was freed (its struct likely at the
 * same address, its names numbered alike) gets its own names, not the
 * first one's. */
static void test_union_names_of_a_later_fold(void **state)
{
    (void)state;
    const char *a_stacks[] = { "main;alpha;beta", "main;gamma" };
    const char *b_stacks[] = { "start;delta;eps", "zeta;eta", "main;gamma" };
    struct qa_stacks u;
    qa_stacks_init(&u);
    struct profile *pa = named_profile(a_stacks, 2), *pb = named_profile(b_stacks, 3);
    struct query_folded *fa = qt_fold(pa);
    uint32_t ida[2];
    for (size_t e = 0; e < fa->nentries; e++)
        ida[e] = qa_stacks_add_entry(&u, fa, &fa->entries[e]);
    assert_int_equal(fa->nentries, 2);
    query_folded_free(fa);
    struct query_folded *fb = qt_fold(pb);
    assert_int_equal(fb->nentries, 3);
    for (size_t e = 0; e < fb->nentries; e++) {
        uint32_t id = qa_stacks_add_entry(&u, fb, &fb->entries[e]);
        const struct query_fold_entry *fe = &fb->entries[e];
        assert_int_equal(u.v[id].n, fe->n);
        const char *const *want = query_fold_frames(fb, fe);
        const char *const *got = qa_stack_frames(&u, id);
        for (uint32_t k = 0; k < fe->n; k++)
            assert_string_equal(got[k], want[k]);
        if (e == 2)
            assert_int_equal(id, ida[1]); /* main;gamma: one stack of the union */
        else
            assert_true(id >= 2);
    }
    assert_int_equal(u.n, 4);
    /* Functions numbered by name across both: main;gamma's leaf is one. */
    struct qa_funcs fn = { 0 };
    qa_funcs_build(&fn, &u);
    assert_string_equal(fn.name[fn.leaf[ida[1]]], "gamma");
    assert_int_equal(fn.n, 9); /* main alpha beta gamma start delta eps zeta eta */
    qa_funcs_release(&fn);
    query_folded_free(fb);
    profile_free(pa);
    profile_free(pb);
    qa_stacks_release(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff_sample_variance_formula),
        cmocka_unit_test(test_diff_matches_jeprof_exact),
        cmocka_unit_test(test_diff_matches_jeprof_sampled),
        cmocka_unit_test(test_diff_noise_flags),
        cmocka_unit_test(test_diff_go_pprof_noise_from_period),
        cmocka_unit_test(test_diff_normalize_shares),
        cmocka_unit_test(test_diff_collapsed_two_columns),
        cmocka_unit_test(test_diff_json_and_text),
        cmocka_unit_test(test_union_names_of_a_later_fold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
