/* The store's varints (store/pack.c, store-internal.h): every value reads
 * back, whatever its length and wherever it sits against the end of the
 * bytes (the reader has a path without a bounds check a byte where four
 * bytes are left), and bytes that end inside a number, or a number longer
 * than ten bytes, are marked bad, never read past. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/store-internal.h"

/* Values at every length's edges (7 bits a byte), and their neighbours. */
static size_t edge_values(uint64_t *v)
{
    size_t n = 0;
    for (int bits = 0; bits <= 64; bits += 7) {
        uint64_t top = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        v[n++] = top;
        if (top < UINT64_MAX)
            v[n++] = top + 1;
        if (top > 0)
            v[n++] = top - 1;
    }
    v[n++] = UINT64_MAX;
    return n;
}

/* Each value packed alone, then with 0-9 bytes after it: it reads back
 * and the reader stops right after it. */
static void test_varints_read_back_at_every_length(void **state)
{
    (void)state;
    uint64_t v[64];
    size_t n = edge_values(v);
    for (size_t i = 0; i < n; i++)
        for (size_t pad = 0; pad < 10; pad++) {
            struct store_pack b = { 0 };
            store_pack_u64(&b, v[i]);
            size_t len = b.len;
            for (size_t k = 0; k < pad; k++)
                store_pack_bytes(&b, "\x01", 1);
            struct store_unpack u = { b.data, b.data + b.len, false };
            assert_int_equal(store_unpack_u64(&u), v[i]);
            assert_false(u.bad);
            assert_ptr_equal(u.p, b.data + len);
            store_pack_release(&b);
        }
    /* Signed values through zigzag, and a run of mixed lengths. */
    struct store_pack b = { 0 };
    uint64_t x = 88172645463325252u;
    int64_t want[2000];
    for (size_t i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        want[i] = (int64_t)(x >> (x % 63 + 1)) * (i % 2 ? -1 : 1); /* shifts 1-63 */
        store_pack_i64(&b, want[i]);
    }
    struct store_unpack u = { b.data, b.data + b.len, false };
    for (size_t i = 0; i < 2000; i++)
        assert_int_equal(store_unpack_i64(&u), want[i]);
    assert_false(u.bad);
    assert_ptr_equal(u.p, b.data + b.len);
    store_pack_release(&b);
}

/* A number cut anywhere before its last byte is bad, and the reader never
 * goes past the end; so is a number of eleven bytes. */
static void test_varints_cut_short_or_too_long_are_bad(void **state)
{
    (void)state;
    uint64_t v[64];
    size_t n = edge_values(v);
    for (size_t i = 0; i < n; i++) {
        struct store_pack b = { 0 };
        store_pack_u64(&b, v[i]);
        for (size_t cut = 0; cut < b.len; cut++) {
            /* cut bytes exactly (one for none): ASan stops a read past them */
            unsigned char *copy = malloc(cut ? cut : 1);
            memcpy(copy, b.data, cut);
            struct store_unpack u = { copy, copy + cut, false };
            assert_int_equal(store_unpack_u64(&u), 0);
            assert_true(u.bad);
            assert_true(u.p <= copy + cut);
            free(copy);
        }
        store_pack_release(&b);
    }
    unsigned char eleven[12];
    memset(eleven, 0x80, 11);
    eleven[11] = 0x01;
    struct store_unpack u = { eleven, eleven + sizeof(eleven), false };
    (void)store_unpack_u64(&u);
    assert_true(u.bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varints_read_back_at_every_length),
        cmocka_unit_test(test_varints_cut_short_or_too_long_are_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
