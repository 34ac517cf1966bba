/* store/ldelta.c, the raw dumps' line deltas: every text reads back byte for
 * byte, the same as through zstd with the base as a prefix (what it replaced,
 * and what rows written before it still hold); bad stored bytes are an error
 * that says what is wrong, never a crash or wrong bytes of the wrong size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/profile.h"
#include "store/store-internal.h"
#include "tests/store/gen.h"

struct fx {
    struct store s; /* what decoding uses of a store: its path and zstd context */
    ZSTD_CCtx *c;
    unsigned lines_given, lines_carried; /* by both_ways: encodings that gave lines, and
                                            that then used a base's given lines */
};

static int setup(void **state)
{
    struct fx *f = hp_xcalloc(1, sizeof(*f));
    f->s.path = "test.db";
    f->c = ZSTD_createCCtx();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    ZSTD_freeDCtx(f->s.dctx);
    ZSTD_freeCCtx(f->c);
    free(f);
    return 0;
}

/* Stored bytes z (a line delta or not, as `ldelta` says) must decode to
 * src against base; frees z. */
static void assert_reads_back(struct fx *f, void *z, size_t zlen, bool ldelta, const char *src,
                              size_t len, const char *base, size_t base_len)
{
    void *out = NULL;
    assert_true(store_ldelta_is(z, zlen) == ldelta);
    assert_int_equal(store_zstd_decompress(&f->s, z, zlen, base, base_len, len, &out, NULL), 0);
    assert_memory_equal(out, src, len);
    free(out);
    free(z);
}

/* Encode src against base both ways, as a line delta and as zstd with the
 * base as a prefix; both must decode to src. Returns the line delta's size
 * (0: declined, and then the text way wrote zstd). */
static size_t both_ways(struct fx *f, const char *src, size_t len, const char *base,
                        size_t base_len)
{
    void *z = NULL;
    size_t zlen = 0, ld = 0;
    struct store_lines got, want, carried;
    int r = store_ldelta_encode(f->c, "test.db", src, len, base, base_len, NULL, &got, NULL, &z,
                                &zlen, NULL);
    assert_true(r == 0 || r == 1);
    if (r == 1) {
        ld = zlen;
        /* src's lines come back as splitting and hashing src gives them
         * (or not at all: a base's last line without its newline that
         * starts a line of src) */
        bool split = store_lines_of(src, len, &want);
        if (got.known) {
            f->lines_given++;
            assert_true(split);
            assert_int_equal(got.n, want.n);
            assert_int_equal(got.len, len);
            assert_memory_equal(got.off, want.off, ((size_t)want.n + 1) * sizeof(*want.off));
            if (want.n)
                assert_memory_equal(got.hash, want.hash, want.n * sizeof(*want.hash));
        }
        store_lines_release(&want);
        /* with the base's lines as an encoding gave them (the base encoded
         * against src), the same bytes */
        void *z2 = NULL;
        size_t zlen2 = 0;
        void *zb = NULL;
        size_t zblen = 0;
        if (store_ldelta_encode(f->c, "test.db", base, base_len, src, len, NULL, &carried, NULL,
                                &zb, &zblen, NULL) == 1) {
            free(zb);
            assert_int_equal(store_ldelta_encode(f->c, "test.db", src, len, base, base_len,
                                                 &carried, NULL, NULL, &z2, &zlen2, NULL),
                             1);
            assert_int_equal(zlen2, zlen);
            assert_memory_equal(z2, z, zlen);
            free(z2);
            f->lines_carried += carried.known;
            store_lines_release(&carried);
        }
        store_lines_release(&got);
        assert_reads_back(f, z, zlen, true, src, len, base, base_len);
    }
    /* What store_zstd_compress_with writes for text: the same, or zstd when
     * the line delta declined; for other data, zstd with the base as a
     * prefix (rows written before line deltas). */
    for (int text = 1; text >= 0; text--) {
        assert_int_equal(store_zstd_compress_with(f->c, "test.db", src, len, base, base_len,
                                                  text, 0, NULL, &z, &zlen, NULL),
                         0);
        assert_reads_back(f, z, zlen, text && r == 1, src, len, base, base_len);
    }
    return ld;
}

static size_t both_ways_str(struct fx *f, const char *src, const char *base)
{
    return both_ways(f, src, strlen(src), base, strlen(base));
}

static void test_ldelta_edges_read_back_exact(void **state)
{
    struct fx *f = *state;
    static const char *const cases[][2] = {
        { "a\nb\nc\n", "a\nb\nc\n" },             /* the same */
        { "", "a\nb\n" },                         /* empty */
        { "a\nb\nc", "a\nb\nc\n" },               /* no final newline */
        { "a\nb\nc\n", "a\nb\nc" },               /* the base has none */
        { "c\nb\na\n", "a\nb\nc\n" },             /* reordered */
        { "a\na\na\nb\n", "a\nb\n" },             /* repeated */
        { "a\nx\nc\n", "a\nb\nc\n" },             /* one changed */
        { "a\nc\n", "a\nb\nc\n" },                /* one removed */
        { "a\nb\nb2\nb3\nc\n", "a\nb\nc\n" },     /* inserted */
        { "\n\n\n", "\n" },                       /* empty lines */
        { "new\nlines\nonly\n", "old\nones\n" },  /* nothing shared */
        { "a\nb", "a\nbc" },                      /* a prefix of the base's last line */
        { "  t*: 1: 2 [0: 0]\n@ 0x1 0x2\n", "@ 0x1 0x2\n  t*: 1: 2 [0: 0]\n" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_true(both_ways_str(f, cases[i][0], cases[i][1]) > 0);
    /* all but "the base has none": its last line, without the newline,
     * is copied as the start of a line of src */
    assert_int_equal(f->lines_given, sizeof(cases) / sizeof(cases[0]) - 1);
    /* Binary: NULs and no newlines at all. */
    char bin[300], bbin[300];
    for (size_t i = 0; i < sizeof(bin); i++) {
        bin[i] = (char)(i * 7);
        bbin[i] = (char)(i * 7 + (i % 50 == 0));
    }
    (void)both_ways(f, bin, sizeof(bin), bbin, sizeof(bbin));
}

/* Text of many short lines is not a heap dump: no line delta (its tables
 * would outgrow the text), zstd instead. */
static void test_ldelta_declines_short_lines(void **state)
{
    struct fx *f = *state;
    size_t n = 1 << 16;
    char *a = hp_xmalloc(n), *b = hp_xmalloc(n);
    /* A base of empty lines. */
    memset(a, 'y', n);
    a[n - 1] = '\n';
    memset(b, '\n', n);
    assert_int_equal(both_ways(f, a, n, b, n), 0);
    /* A base of two lines, text where every other line is one of them:
     * a sequence per 4 bytes. */
    memcpy(b, "x\n", 2);
    memset(b + 2, 'y', n - 3);
    b[n - 1] = '\n';
    for (size_t i = 0; i < n; i += 4)
        memcpy(a + i, "x\nz\n", 4);
    assert_int_equal(both_ways(f, a, n, b, n), 0);
    /* The same with long lines between: a line delta. */
    memset(a, 'q', n);
    for (size_t i = 0; i < n; i += 1024)
        memcpy(a + i, "x\n", 2);
    a[n - 1] = '\n';
    assert_true(both_ways(f, a, n, b, n) > 0);
    free(a);
    free(b);
}

/* Random edits of random text: inserted, deleted, changed and moved lines,
 * lines without a final newline; the delta against the base, both ways. */
static void test_ldelta_random_edits_read_back_exact(void **state)
{
    struct fx *f = *state;
    uint64_t seed = 7;
    int deltas = 0;
#define RND() (seed = seed * 6364136223846793005u + 1442695040888963407u, seed >> 33)
    for (int round = 0; round < 300; round++) {
        struct hp_buf base = HP_BUF_INIT(0), src = HP_BUF_INIT(0);
        uint32_t lines = (uint32_t)(RND() % 200);
        for (uint32_t i = 0; i < lines; i++)
            (void)hp_buf_printf(&base, "line %u of %u: %llu\n", i, lines,
                                (unsigned long long)(RND() % 5));
        if (RND() % 4 == 0)
            (void)hp_buf_puts(&base, "no newline");
        /* Walk the base's lines and edit. */
        const char *p = base.data ? base.data : "", *e = p + base.len;
        while (p < e) {
            const char *nl = memchr(p, '\n', (size_t)(e - p));
            size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(e - p);
            switch (RND() % 10) {
            case 0: /* deleted */
                break;
            case 1: /* changed */
                (void)hp_buf_printf(&src, "changed %llu\n", (unsigned long long)RND());
                break;
            case 2: /* inserted before */
                (void)hp_buf_printf(&src, "inserted %llu\n", (unsigned long long)(RND() % 3));
                (void)hp_buf_append(&src, p, n);
                break;
            case 3: /* a line from elsewhere in the base */
                (void)hp_buf_append(&src, base.data + (RND() % base.len), 1);
                (void)hp_buf_append(&src, p, n);
                break;
            default:
                (void)hp_buf_append(&src, p, n);
            }
            p += n;
        }
        if (RND() % 3 == 0 && src.len)
            src.len--; /* cut the final newline or character */
        if (base.len)
            deltas += both_ways(f, src.data ? src.data : "", src.len, base.data, base.len) > 0;
        hp_buf_release(&base);
        hp_buf_release(&src);
    }
    assert_true(deltas > 250); /* the rounds with a base, nearly all */
#undef RND
}

/* Two hours of a steady 20,000-stack node, as the store-bench writes them:
 * the line delta is smaller than zstd's. */
static void test_ldelta_heap_dumps(void **state)
{
    struct fx *f = *state;
    char *raw[2];
    size_t len[2];
    for (uint32_t h = 0; h < 2; h++) {
        struct gen_params gp = { .seed = 42, .nstacks = 20000, .nfuncs = 4000, .hour = h,
                                 .nthreads = 4, .symbolize = true };
        profile_free(gen_profile(&gp, &raw[h], &len[h]));
    }
    size_t ld = both_ways(f, raw[1], len[1], raw[0], len[0]);
    assert_int_equal(f->lines_given, 1);
    assert_int_equal(f->lines_carried, 1);
    void *z;
    size_t zlen;
    assert_int_equal(store_zstd_compress_with(f->c, "test.db", raw[1], len[1], raw[0], len[0],
                                              false, 0, NULL, &z, &zlen, NULL),
                     0);
    free(z);
    assert_true(ld > 0);
    assert_true(ld < zlen);
    assert_true(ld < len[1] / 100);
    free(raw[0]);
    free(raw[1]);
}

/* A stored line delta whose payload is built here, field by field. */
static void *crafted(struct fx *f, const uint64_t *v, size_t nv, const char *lit, size_t *ret_len)
{
    struct store_pack p = { 0 };
    for (size_t i = 0; i < nv; i++)
        store_pack_u64(&p, v[i]);
    store_pack_bytes(&p, lit, strlen(lit));
    size_t bound = 4 + ZSTD_compressBound(p.len);
    unsigned char *out = hp_xmalloc(bound);
    memcpy(out, "HFL\x01", 4);
    size_t zr = ZSTD_compressCCtx(f->c, out + 4, bound - 4, p.data, p.len, 3);
    assert_false(ZSTD_isError(zr));
    store_pack_release(&p);
    *ret_len = 4 + zr;
    return out;
}

static void assert_corrupt(struct fx *f, const void *z, size_t zlen, const char *base,
                           size_t size, const char *says)
{
    struct hp_buf err = HP_BUF_INIT(0);
    void *out = (void *)0x1;
    assert_int_equal(store_zstd_decompress(&f->s, z, zlen, base, strlen(base), size, &out, &err),
                     HP_ECORRUPT);
    assert_ptr_equal(out, (void *)0x1); /* written only on success */
    if (!strstr(err.data, says))
        fail_msg("\"%s\" does not say \"%s\"", err.data, says);
    hp_buf_release(&err);
}

static void test_ldelta_bad_bytes_are_errors(void **state)
{
    struct fx *f = *state;
    const char *base = "a\nb\nc\n";
    size_t zlen;
    void *z;
    /* The good one: literal "x\n", then lines 1 and 2 of the base ("b\nc\n"
     * is one line on from the predicted line 1: delta 0), no tail. */
    uint64_t good[] = { 1, 2, 0, 2, 0 };
    z = crafted(f, good, 5, "x\n", &zlen);
    {
        void *out;
        assert_int_equal(store_zstd_decompress(&f->s, z, zlen, base, 6, 6, &out, NULL), 0);
        assert_memory_equal(out, "x\nb\nc\n", 6);
        free(out);
    }
    assert_corrupt(f, z, zlen, base, 7, "length");       /* recorded size too big */
    assert_corrupt(f, z, zlen, base, 5, "copy length");  /* too small */
    assert_corrupt(f, z, zlen - 1, base, 6, "decompressing"); /* truncated frame */
    free(z);
    uint64_t past_end[] = { 1, 0, 2 * 3, 1, 0 };        /* line 3 of a 3-line base */
    z = crafted(f, past_end, 5, "", &zlen);
    assert_corrupt(f, z, zlen, base, 2, "line range");
    free(z);
    uint64_t before_start[] = { 1, 0, 1, 1, 0 };        /* line -1 */
    z = crafted(f, before_start, 5, "", &zlen);
    assert_corrupt(f, z, zlen, base, 2, "line range");
    free(z);
    uint64_t no_lines[] = { 1, 0, 0, 0, 0 };            /* copies nothing */
    z = crafted(f, no_lines, 5, "", &zlen);
    assert_corrupt(f, z, zlen, base, 0, "line range");
    free(z);
    uint64_t long_literal[] = { 1, 9, 0, 1, 0 };        /* more than the literals hold */
    z = crafted(f, long_literal, 5, "x\n", &zlen);
    assert_corrupt(f, z, zlen, base, 13, "literal length");
    free(z);
    uint64_t many[] = { 1000 };                         /* more sequences than bytes */
    z = crafted(f, many, 1, "", &zlen);
    assert_corrupt(f, z, zlen, base, 6, "sequence count");
    free(z);
    uint64_t tail_short[] = { 0, 5 };                   /* tail says 5, holds 2 */
    z = crafted(f, tail_short, 2, "x\n", &zlen);
    assert_corrupt(f, z, zlen, base, 5, "length");
    free(z);
    /* A delta read without its base. */
    z = crafted(f, good, 5, "x\n", &zlen);
    struct hp_buf err = HP_BUF_INIT(0);
    void *out;
    assert_int_equal(store_ldelta_decode(&f->s, z, zlen, NULL, 0, 6, &out, &err), HP_ECORRUPT);
    assert_non_null(strstr(err.data, "base"));
    hp_buf_release(&err);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ldelta_edges_read_back_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ldelta_declines_short_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ldelta_random_edits_read_back_exact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ldelta_heap_dumps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ldelta_bad_bytes_are_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
