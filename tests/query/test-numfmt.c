/* query/numfmt.c: the text renderers' fixed-point formatting writes exactly
 * what snprintf "%.Nf", hp_fmt_bytes and hp_fmt_count write, on exact ties,
 * values one ulp either side of a tie, and random values (about ten
 * million comparisons). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "query/analysis-internal.h"

/* xorshift64*: a fixed sequence, so a failure reproduces. */
static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1du;
}

static unsigned long nchecked;

static void check_fixed(double x)
{
    for (int prec = 0; prec <= 2; prec++) {
        /* snprintf into a buffer of the same size: %.0f of 1e300 is cut
         * short by both alike. */
        char want[QUERY_FMT_MIN], got[QUERY_FMT_MIN];
        snprintf(want, sizeof(want), "%.*f", prec, x);
        size_t n = query_fmt_fixed(x, prec, got, sizeof(got));
        if (strcmp(want, got) != 0 || n != strlen(got))
            fail_msg("%%.%df of %a (%.17g): printf \"%s\", query_fmt_fixed \"%s\" (%zu)", prec,
                     x, x, want, got, n);
        nchecked++;
    }
}

static void check_units(double x)
{
    char want[QUERY_FMT_MIN], got[QUERY_FMT_MIN];
    hp_fmt_bytes(x, want, sizeof(want));
    query_fmt_bytes(x, got, sizeof(got));
    if (strcmp(want, got) != 0)
        fail_msg("bytes %.17g: hp_fmt_bytes \"%s\", query_fmt_bytes \"%s\"", x, want, got);
    hp_fmt_count(x, want, sizeof(want));
    query_fmt_count(x, got, sizeof(got));
    if (strcmp(want, got) != 0)
        fail_msg("count %.17g: hp_fmt_count \"%s\", query_fmt_count \"%s\"", x, want, got);
    nchecked += 2;
}

static void check_all(double x)
{
    check_fixed(x);
    check_fixed(-x);
    check_fixed(nextafter(x, 0));
    check_fixed(nextafter(x, INFINITY));
    check_units(x);
    check_units(nextafter(x, 0));
    check_units(nextafter(x, INFINITY));
}

/* The case the fast path exists to get right: 0.35 is 0.34999…, printf
 * writes 0.3, but 0.35 * 10 rounds to 3.5, which a naive round-half-even
 * of the scaled value takes to 4. */
static void test_numfmt_not_naive(void **state)
{
    (void)state;
    char buf[QUERY_FMT_MIN];
    assert_int_equal(nearbyint(0.35 * 10), 4);
    query_fmt_fixed(0.35, 1, buf, sizeof(buf));
    assert_string_equal(buf, "0.3");
    query_fmt_fixed(0.25, 1, buf, sizeof(buf)); /* an exact tie: to even */
    assert_string_equal(buf, "0.2");
    query_fmt_fixed(2.5, 0, buf, sizeof(buf));
    assert_string_equal(buf, "2");
    query_fmt_fixed(-0.0, 1, buf, sizeof(buf));
    assert_string_equal(buf, "-0.0");
}

static void test_numfmt_ties_and_neighbours(void **state)
{
    (void)state;
    /* Every k/200 up to 1,000 (the ties of %.2f and %.1f and %.0f among
     * them) with its neighbours, every k/8 (exact binary ties) up to 2^17,
     * and the unit boundaries hp_fmt_bytes switches precision at. */
    for (int k = 0; k <= 200000; k++)
        check_all(k / 200.0);
    for (int k = 0; k <= 1 << 20; k++)
        check_fixed(k / 8.0);
    for (int u = 0; u < 6; u++) {
        double base = pow(1024, u);
        const double at[] = { 1, 9.995, 9.999, 10, 99.95, 99.99, 100, 1023.5, 1024 };
        for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
            check_all(at[i] * base);
    }
    const double special[] = { 0.0, 1e-300, 4503599627370495.5, 4503599627370496.0, 1e17,
                               1e300, INFINITY, NAN };
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
        check_fixed(special[i]);
        check_fixed(-special[i]);
    }
}

static void test_numfmt_random(void **state)
{
    (void)state;
    for (int i = 0; i < 300000; i++) {
        uint64_t r = next();
        double x;
        switch (r & 3) {
        case 0: /* uniform over magnitudes 1e-3 .. 1e16 */
            x = pow(10, -3 + 19 * ((double)(r >> 11) / 9007199254740992.0));
            break;
        case 1: /* whole numbers, as byte and object counts are */
            x = (double)(r >> (11 + (r >> 4) % 40));
            break;
        case 2: /* percentages */
            x = 100.0 * (double)(r >> 11) / 9007199254740992.0;
            break;
        default: /* any finite double's bits */
            memcpy(&x, &r, sizeof(x));
            if (!isfinite(x))
                x = 1.5;
        }
        check_fixed(x);
        check_fixed(-x);
        check_units(x);
    }
    print_message("numfmt: %lu comparisons agree\n", nchecked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numfmt_not_naive),
        cmocka_unit_test(test_numfmt_ties_and_neighbours),
        cmocka_unit_test(test_numfmt_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
