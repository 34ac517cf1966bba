/* Shared primitives of store/hp.h that several modules use in place of
 * their own copies: hex digits (URL decoding in web/ and agent/, build-ids,
 * hp_parse_hex64) and the UTF-8 cleaner (query's renderers, the collector's
 * --out lines, the agent's JSON). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/hp.h"

static void test_hp_hex_digit_every_byte(void **state)
{
    for (int c = 0; c < 256; c++) {
        int want = -1;
        if (c >= '0' && c <= '9')
            want = c - '0';
        else if (c >= 'a' && c <= 'f')
            want = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            want = c - 'A' + 10;
        if (hp_hex_digit((char)c) != want)
            fail_msg("byte 0x%02x: got %d, want %d", c, hp_hex_digit((char)c), want);
    }
}

static void test_hp_parse_hex64_uses_the_same_digits(void **state)
{
    uint64_t v;
    assert_int_equal(hp_parse_hex64("0xDeadBeef", 10, &v), 0);
    assert_int_equal(v, 0xdeadbeefu);
    assert_int_equal(hp_parse_hex64("ffffffffffffffff", 16, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(hp_parse_hex64("1g", 2, &v), HP_EPARSE);
    assert_int_equal(hp_parse_hex64("1:", 2, &v), HP_EPARSE); /* ':' is '0' + 10 */
    assert_int_equal(hp_parse_hex64("1G", 2, &v), HP_EPARSE);
    assert_int_equal(hp_parse_hex64("0x", 2, &v), HP_EPARSE);
}

/* hp_hex_scan's reference: one digit at a time with hp_hex_digit(). */
static int ref_hex_scan(const char *s, size_t n, size_t *ret_len, uint64_t *ret_v)
{
    size_t len = 0;
    while (len < n && hp_hex_digit(s[len]) >= 0)
        len++;
    *ret_len = len;
    size_t z = 0;
    while (z < len && s[z] == '0')
        z++;
    if (len - z > 16)
        return HP_ETOOBIG;
    uint64_t v = 0;
    for (size_t i = z; i < len; i++)
        v = (v << 4) | (uint64_t)hp_hex_digit(s[i]);
    *ret_v = v;
    return 0;
}

/* Scan [str, str+n) with both of hp_hex_scan's paths and the reference.
 * The bytes sit at the end of an allocation of exactly n bytes (so the
 * sanitizer builds catch a read past the end) at every offset 0..15 from
 * a 16-byte boundary, and between hex digits in a larger buffer (so any
 * build sees a read outside [s, s+n) change the result). */
static void hex_check(const char *str, size_t n)
{
    size_t rlen;
    uint64_t rv = 0;
    int rr = ref_hex_scan(str, n, &rlen, &rv);
    for (int path = 0; path < 2; path++) {
        for (size_t off = 0; off < 16; off++) {
            char *block = malloc(off + n + 1);
            assert_non_null(block);
            char *exact = block + off;
            memcpy(exact, str, n);
            char *guarded = malloc(n + 32);
            assert_non_null(guarded);
            memset(guarded, 'f', n + 32);
            memcpy(guarded + 16, str, n);
            char *bufs[2] = { exact, guarded + 16 };
            for (int b = 0; b < 2; b++) {
                size_t len = 12345;
                uint64_t v = 77;
                int r = path ? hp__hex_scan_swar(bufs[b], n, &len, &v)
                             : hp_hex_scan(bufs[b], n, &len, &v);
                if (r != rr || len != rlen || (r == 0 && v != rv))
                    fail_msg("%s path, \"%.*s\" (n %zu, offset %zu, %s): got r %d len %zu "
                             "v %llx, want r %d len %zu v %llx",
                             path ? "SWAR" : "main", (int)n, str, n, off,
                             b ? "guarded" : "exact end", r, len, (unsigned long long)v, rr,
                             rlen, (unsigned long long)rv);
            }
            free(guarded);
            free(block);
        }
    }
}

/* The same string alone, then followed by more input as a reader sees it
 * (blank and next address, end of line), so that runs shorter and longer
 * than the 8- and 16-byte loads take every path. */
static void hex_check_tails(const char *str)
{
    static const char *const tails[] = { "", " ", " 0x7fbd84aa2630", "\n", "\r\n@ 0x1", "g" };
    char buf[256];
    for (size_t t = 0; t < HP_ARRAY_SIZE(tails); t++) {
        int k = snprintf(buf, sizeof(buf), "%s%s", str, tails[t]);
        assert_true(k >= 0 && (size_t)k < sizeof(buf));
        for (size_t n = 0; n <= (size_t)k; n++)
            hex_check(buf, n); /* every cut: unaligned ends */
    }
}

static void test_hp_hex_scan_matches_scalar_decode(void **state)
{
    (void)state;
    static const char digits[] = "0123456789abcdefABCDEF";
    char s[64];
    /* Every digit alone, and at every position of a 16-digit number. */
    for (size_t d = 0; d < sizeof(digits) - 1; d++) {
        s[0] = digits[d];
        s[1] = '\0';
        hex_check_tails(s);
        for (size_t pos = 0; pos < 16; pos++) {
            memset(s, '5', 16);
            s[16] = '\0';
            s[pos] = digits[d];
            hex_check(s, 16);
            hex_check(s, 17); /* with its NUL: a non-digit at 16 */
        }
    }
    /* 1..20 digits, mixed case, from a fixed pseudo-random sequence. */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 40; round++)
        for (size_t len = 1; len <= 20; len++) {
            for (size_t i = 0; i < len; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                s[i] = digits[x % (sizeof(digits) - 1)];
            }
            s[len] = '\0';
            if (round < 2)
                hex_check_tails(s);
            else
                hex_check(s, len);
        }
    /* A byte that is not a digit at every position of a 24-byte run. */
    for (int c = 0; c < 256; c++) {
        if (hp_hex_digit((char)c) >= 0)
            continue;
        for (size_t pos = 0; pos < 24; pos++) {
            memcpy(s, "0123456789abcdefABCDEF01", 24);
            s[pos] = (char)c;
            hex_check(s, 24);
            hex_check(s, pos + 1); /* ends right after it */
        }
    }
    /* The 64-bit edge; leading zeros do not count. */
    static const char *const edge[] = {
        "ffffffffffffffff",  "FFFFFFFFFFFFFFFF",    "8000000000000000",
        "10000000000000000", "fffffffffffffffff",   "0ffffffffffffffff",
        "000000000000000000000000000000000000000000ffffffffffffffff",
        "00000000000000000000000000000000000000000",  "000000000000000000001",
        "0000000000000000000000000000000000000000100000000000000000",
        "7fffffffffffffff0", "0x1", "x", "",
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(edge); i++)
        hex_check_tails(edge[i]);
    size_t len = 0;
    uint64_t v = 0;
    assert_int_equal(hp_hex_scan("ffffffffffffffff ", 17, &len, &v), 0);
    assert_true(len == 16 && v == UINT64_MAX);
    assert_int_equal(hp_hex_scan("10000000000000000 0x1", 21, &len, &v), HP_ETOOBIG);
    assert_int_equal(len, 17);
    assert_int_equal(hp_hex_scan("00000000000000000000001", 23, &len, &v), 0);
    assert_true(len == 23 && v == 1);
    assert_int_equal(hp_hex_scan("7fbd84aa2630 0x7fbd84aa2d21", 27, &len, &v), 0);
    assert_true(len == 12 && v == 0x7fbd84aa2630u);
}

static void test_hp_utf8_clean(void **state)
{
    struct hp_arena a;
    hp_arena_init(&a);
    const char *ok = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x98";
    assert_ptr_equal(hp_utf8_clean(&a, ok), ok); /* valid: returned as is */
    static const struct {
        const char *in, *want;
    } cases[] = {
        { "a\xffz", "a\xef\xbf\xbdz" },                /* never valid */
        { "\xc3", "\xef\xbf\xbd" },                    /* truncated */
        { "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },    /* overlong */
        { "\xe2\x82x", "\xef\xbf\xbd\xef\xbf\xbdx" },  /* cut short */
        { "\xf5\x80\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cases); i++)
        assert_string_equal(hp_utf8_clean(&a, cases[i].in), cases[i].want);
    hp_arena_release(&a);
}

/* libuv closes sockets with syscall(SYS_close), which ThreadSanitizer does
 * not see; when a worker thread then opened a folder on the same descriptor
 * number with opendir(3) (not seen as a creation either), the closedir(3)
 * was reported as a race with the loop thread's last read of the socket
 * (web-api under TSan, web/source-dir.c). This replays that: a thread reads
 * a socket and closes it behind TSan's back, tells us over a raw pipe (no
 * happens-before edge), and we open and close a folder that gets the same
 * number. Under TSan it fails with the plain opendir(); elsewhere it checks
 * that hp_opendir() lists a folder and sets close-on-exec. */
struct sock_thread {
    int sv[2];
    int pipe_w;
};

static void *sock_reader(void *arg)
{
    struct sock_thread *t = arg;
    char c;
    if (read(t->sv[0], &c, 1) != 1) /* intercepted: TSan marks the read */
        abort();
    syscall(SYS_close, t->sv[0]);
    syscall(SYS_close, t->sv[1]);
    char one = 1;
    syscall(SYS_write, t->pipe_w, &one, 1);
    return NULL;
}

static void test_hp_opendir_reuses_a_socket_number(void **state)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct sock_thread t = {.pipe_w = p[1]};
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, t.sv), 0);
    assert_int_equal(write(t.sv[1], "x", 1), 1);
    int sock_fd = t.sv[0];
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sock_reader, &t), 0);
    char c;
    while (syscall(SYS_read, p[0], &c, 1) != 1)
        ;
    DIR *d = hp_opendir(".");
    assert_non_null(d);
    /* The lowest free number: the socket's (its peer's is free too). */
    assert_int_equal(dirfd(d), sock_fd);
    assert_true(fcntl(dirfd(d), F_GETFD) & FD_CLOEXEC);
    bool saw_dot = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        saw_dot |= strcmp(de->d_name, ".") == 0;
    assert_true(saw_dot);
    closedir(d);
    pthread_join(th, NULL);
    close(p[0]);
    close(p[1]);
    errno = 0;
    assert_null(hp_opendir("/nonexistent-heapfleet-dir"));
    assert_int_equal(errno, ENOENT);
}

/* Prometheus label values (web/metrics.c and the collector's health). */
/* hp_hash_bytes word by word (what the store's stack hashes use) is
 * hp_hash_bytes, and hp_hash_bytes is what databases hold: a stored stack
 * hash made by an older build must still be found. */
static void test_hp_hash_steps_match_bytes(void **state)
{
    (void)state;
    uint64_t w[37];
    for (size_t i = 0; i < HP_ARRAY_SIZE(w); i++)
        w[i] = hp_hash_u64(i + 1) ^ (i << 40);
    for (size_t n = 0; n <= HP_ARRAY_SIZE(w); n++) {
        uint64_t h = hp_hash_begin(0x5354414b);
        for (size_t i = 0; i < n; i++)
            h = hp_hash_word(h, w[i]);
        assert_int_equal(hp_hash_end(h), hp_hash_bytes(w, n * 8, 0x5354414b));
    }
    /* Pinned: the stack hash of location ids 1, 2, 3, as stacks.hash holds it. */
    const int64_t ids[] = { 1, 2, 3 };
    assert_int_equal(hp_hash_bytes(ids, sizeof(ids), 0x5354414b) >> 1,
                     UINT64_C(0x3370c4630680bf8a));
}

/* The wide hash reads every byte of every length: each byte changed, at
 * each place, changes it (the tail's overlapping word included), and the
 * same bytes at another alignment hash the same. */
static void test_hp_hash_bytes_wide_reads_every_byte(void **state)
{
    (void)state;
    unsigned char buf[200], moved[208];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(hp_hash_u64(i) >> 17);
    for (size_t n = 0; n <= 130; n++) {
        uint64_t h = hp_hash_bytes_wide(buf, n, 7);
        memcpy(moved + 3, buf, n);
        assert_int_equal(hp_hash_bytes_wide(moved + 3, n, 7), h);
        if (n)
            assert_true(hp_hash_bytes_wide(buf, n - 1, 7) != h); /* the length counts */
        for (size_t at = 0; at < n; at++) {
            buf[at] ^= 0x20;
            assert_true(hp_hash_bytes_wide(buf, n, 7) != h);
            buf[at] ^= 0x20;
        }
    }
}

/* Pinned: raw_dumps.hash holds hp_hash_bytes_wide (store_content_hash),
 * so its values must not change from version to version; these are the
 * content keys' hashes (seed 0x9e3779b97f4a7c15) of a few inputs, the
 * short one through hp_hash_bytes, the longer ones through all four chains
 * and the tail. */
static void test_hp_hash_bytes_wide_is_pinned(void **state)
{
    (void)state;
    const uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);
    assert_int_equal(hp_hash_bytes_wide("", 0, seed), UINT64_C(0x6bcb9d63eb8eab8b));
    const char *a = "heap_v2/524288\n", *b = "@ 0x1 0x2 0x3\n  t*: 1: 1024 [0: 0]\n";
    assert_int_equal(hp_hash_bytes_wide(a, strlen(a), seed), UINT64_C(0xa978fb9cd6e45090));
    assert_int_equal(hp_hash_bytes_wide(b, strlen(b), seed), UINT64_C(0x66beb24f6508ff5a));
    unsigned char c[100];
    for (int i = 0; i < 100; i++)
        c[i] = (unsigned char)(i * 7 + 1);
    assert_int_equal(hp_hash_bytes_wide(c, sizeof(c), seed), UINT64_C(0x86f8d8e4a1359e9c));
}

static void test_hp_map64_reserve_keeps_and_finds(void **state)
{
    (void)state;
    struct hp_map64 m;
    uint32_t v;
    hp_map64_init(&m);
    hp_map64_reserve(&m, 0);
    assert_int_equal(hp_map64_put(&m, 7, 70, &v), 0);
    hp_map64_reserve(&m, 5000); /* rehashes: what was in stays */
    size_t cap = m.cap;
    assert_true(hp_map64_get(&m, 7, &v) && v == 70);
    for (uint64_t k = 100; k < 5100; k++)
        assert_int_equal(hp_map64_put(&m, k, (uint32_t)k, &v), 0);
    assert_int_equal(m.cap, cap); /* no growth on the way */
    for (uint64_t k = 100; k < 5100; k++)
        assert_true(hp_map64_get(&m, k, &v) && v == (uint32_t)k);
    hp_map64_release(&m);
}

static int sort_item_cmp(const void *a, const void *b)
{
    const struct hp_sort_item *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* stable: the original place */
}

/* hp_radix_sort orders as a stable comparison sort does, with keys that
 * differ in any byte, share bytes, repeat, have the top bit set, come in
 * order already, or all but one in order. */
/* Interned strings are numbered in the order first seen; a string's
 * number reads back from its pointer alone, through the table's growth
 * (the slots rehash, the numbers and pointers stay). */
static void test_hp_strtab_numbers_strings(void **state)
{
    (void)state;
    struct hp_arena a;
    hp_arena_init(&a);
    struct hp_strtab t;
    hp_strtab_init(&t, &a);
    enum { N = 5000 };
    const char **first = calloc(N, sizeof(*first));
    assert_non_null(first);
    for (int i = 0; i < N; i++) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "name-%d", i * 7919 % N);
        first[i] = hp_strtab_intern(&t, buf, (size_t)n);
        assert_int_equal(hp_strtab_id(&t, first[i]), i);
        assert_ptr_equal(t.by_id[i], first[i]);
    }
    assert_int_equal(t.len, N);
    for (int i = 0; i < N; i++) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "name-%d", i * 7919 % N);
        const char *again = hp_strtab_intern(&t, buf, (size_t)n);
        assert_ptr_equal(again, first[i]); /* no new string, no new number */
        assert_int_equal(hp_strtab_id(&t, again), i);
        assert_string_equal(again, buf);
    }
    assert_int_equal(t.len, N);
    const char *empty = hp_strtab_intern(&t, NULL, 0);
    assert_string_equal(empty, "");
    assert_int_equal(hp_strtab_id(&t, empty), N);
    free(first);
    hp_strtab_release(&t);
    hp_arena_release(&a);
}

static void test_hp_radix_sort_matches_a_stable_sort(void **state)
{
    (void)state;
    uint64_t x = 88172645463325252u;
    for (size_t n = 0; n < 3000; n = n * 2 + 1) {
        for (int shape = 0; shape < 6; shape++) {
            struct hp_sort_item *v = hp_xmalloc((n + 1) * sizeof(*v));
            struct hp_sort_item *w = hp_xmalloc((n + 1) * sizeof(*w));
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
                uint64_t k = shape == 0   ? x
                             : shape == 1 ? x % 7                        /* repeats */
                             : shape == 2 ? (x & 0xff00) | UINT64_C(1) << 63 /* shared bytes */
                             : shape == 3 ? n - i                        /* descending */
                             : shape == 4 ? i / 3                        /* in order, repeats */
                                          : i + (i == n / 2 ? n : 0);    /* one out of order */
                v[i] = w[i] = (struct hp_sort_item){ k, i };
            }
            hp_radix_sort(v, n);
            if (n)
                qsort(w, n, sizeof(*w), sort_item_cmp);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(v[i].key, w[i].key);
                assert_int_equal(v[i].i, w[i].i);
            }
            free(v);
            free(w);
        }
    }
}

static void test_hp_buf_prom_label(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        { "be-1", "\"be-1\"" },
        { "", "\"\"" },
        { NULL, "\"\"" },
        { "a\\b\"c\nd", "\"a\\\\b\\\"c\\nd\"" },
        { "\"\"", "\"\\\"\\\"\"" },
        { "tab\there", "\"tab\there\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct hp_buf b = HP_BUF_INIT(0);
        hp_buf_prom_label(&b, cases[i].in);
        assert_string_equal(b.data, cases[i].out);
        hp_buf_release(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hp_hex_digit_every_byte),
        cmocka_unit_test(test_hp_hash_steps_match_bytes),
        cmocka_unit_test(test_hp_map64_reserve_keeps_and_finds),
        cmocka_unit_test(test_hp_radix_sort_matches_a_stable_sort),
        cmocka_unit_test(test_hp_strtab_numbers_strings),
        cmocka_unit_test(test_hp_hash_bytes_wide_reads_every_byte),
        cmocka_unit_test(test_hp_hash_bytes_wide_is_pinned),
        cmocka_unit_test(test_hp_parse_hex64_uses_the_same_digits),
        cmocka_unit_test(test_hp_hex_scan_matches_scalar_decode),
        cmocka_unit_test(test_hp_utf8_clean),
        cmocka_unit_test(test_hp_opendir_reuses_a_socket_number),
        cmocka_unit_test(test_hp_buf_prom_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
