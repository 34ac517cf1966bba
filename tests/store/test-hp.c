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
        cmocka_unit_test(test_hp_map64_reserve_keeps_and_finds),
        cmocka_unit_test(test_hp_parse_hex64_uses_the_same_digits),
        cmocka_unit_test(test_hp_utf8_clean),
        cmocka_unit_test(test_hp_opendir_reuses_a_socket_number),
        cmocka_unit_test(test_hp_buf_prom_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
