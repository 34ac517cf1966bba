/* Fixed-point number formatting for the text renderers' hot rows, byte for
 * byte what printf's "%.Nf" (N = 0, 1, 2) and hp_fmt_bytes/hp_fmt_count
 * write.
 *
 * Why not printf: `query top --top 0` writes five numbers on each of
 * ~14,000 rows; perf of a warm `query top --binary` (every address from the
 * on-disk symbol cache) put ~20% of its CPU time in glibc's float printing
 * (__printf_fp_l works in multi-precision arithmetic, then vfprintf's stream
 * machinery), more than symbolization itself.
 *
 * Exactness: printf rounds the exact binary value of the double to N
 * decimals, ties to even. Here y = x * 10^N is rounded once by the multiply,
 * so y alone cannot tell which side of a .5 the exact product lies on
 * (0.35 is 0.34999…, yet 0.35 * 10 rounds to 3.5). The candidate k =
 * floor(y) is right or one too low only when the exact product is within
 * half an ulp of k + 1, in which case k + 1 is the nearest integer anyway;
 * fma(x, 10^N, -(k + 0.5)) is the exact product minus the midpoint rounded
 * once, and a nonzero value never rounds to zero at these magnitudes, so its
 * sign says which way to round and zero means a true tie. Values whose
 * scaled magnitude reaches 2^52 (k + 0.5 no longer exact), NaN and infinity
 * go to snprintf. tests/query/test-numfmt.c compares every function here
 * with snprintf, hp_fmt_bytes and hp_fmt_count on ties, near-ties and
 * random values. */
#include "query/analysis-internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double pow10_tab[] = { 1.0, 10.0, 100.0 };

size_t query_fmt_fixed(double x, int prec, char *out, size_t outsz)
{
    if (prec < 0 || prec > 2 || !isfinite(x) || outsz < QUERY_FMT_MIN) {
        int n = snprintf(out, outsz, "%.*f", prec, x);
        return n < 0 ? 0 : (size_t)n < outsz ? (size_t)n : outsz - 1;
    }
    double scale = pow10_tab[prec], a = fabs(x);
    double y = a * scale;
    if (y >= 4503599627370496.0) { /* 2^52 */
        int n = snprintf(out, outsz, "%.*f", prec, x);
        return n < 0 ? 0 : (size_t)n < outsz ? (size_t)n : outsz - 1;
    }
    double k = floor(y);
    double d = fma(a, scale, -(k + 0.5));
    uint64_t q = (uint64_t)k;
    if (d > 0 || (d == 0 && (q & 1)))
        q++;
    /* Digits, least significant first, then reversed into out. */
    char tmp[32];
    size_t n = 0;
    for (int i = 0; i < prec; i++) {
        tmp[n++] = (char)('0' + q % 10);
        q /= 10;
    }
    if (prec)
        tmp[n++] = '.';
    do {
        tmp[n++] = (char)('0' + q % 10);
        q /= 10;
    } while (q);
    if (signbit(x)) /* printf keeps the sign of -0.0 and of what rounds to 0 */
        tmp[n++] = '-';
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

const char *query_fmt_bytes(double bytes, char *out, size_t outsz)
{
    /* hp_fmt_bytes's steps, in the same order, so the same double is
     * formatted. */
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double a = fabs(bytes), x = bytes;
    size_t u = 0;
    while (a >= 1024 && u + 1 < HP_ARRAY_SIZE(units)) {
        a /= 1024;
        x /= 1024;
        u++;
    }
    /* Past 1e15 PiB (and NaN) the number alone may not fit: printf's way. */
    if (outsz < QUERY_FMT_MIN || !(a < 1e15))
        return hp_fmt_bytes(bytes, out, outsz);
    bytes = x;
    size_t n = query_fmt_fixed(bytes, u == 0 ? 0 : a >= 100 ? 0 : a >= 10 ? 1 : 2, out, outsz);
    out[n++] = ' ';
    size_t k = strlen(units[u]);
    memcpy(out + n, units[u], k + 1);
    return out;
}

const char *query_fmt_count(double v, char *out, size_t outsz)
{
    static const char *units[] = { "", "k", "M", "G", "T" };
    double a = fabs(v), x = v;
    size_t u = 0;
    while (a >= 1000 && u + 1 < HP_ARRAY_SIZE(units)) {
        a /= 1000;
        x /= 1000;
        u++;
    }
    if (outsz < QUERY_FMT_MIN || !(a < 1e15))
        return hp_fmt_count(v, out, outsz);
    v = x;
    size_t n = query_fmt_fixed(v, u == 0 ? 0 : 1, out, outsz);
    memcpy(out + n, units[u], strlen(units[u]) + 1);
    return out;
}
