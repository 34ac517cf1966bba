/* Unit tests of the peer-facing helpers in store/hp.c: secret comparison,
 * listen addresses, node names, URL redaction and the regex budget. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <regex.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>

#include "store/hp.h"

static void test_hp_secret_equal_compares_whole(void **state)
{
    (void)state;
    assert_true(hp_secret_equal("s3cret", 6, "s3cret", 6));
    assert_false(hp_secret_equal("s3cret", 6, "s3cre", 5));
    assert_false(hp_secret_equal("s3cret", 6, "s3cret!", 7));
    assert_false(hp_secret_equal("s3cret", 6, "x3cret", 6));
    assert_false(hp_secret_equal("s3cret", 6, "s3crex", 6));
    assert_false(hp_secret_equal("s3cret", 6, "", 0));
}

static void test_hp_bearer_ok_scheme_and_token(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        bool ok;
    } cases[] = {
        { "Bearer s3cret", true },  { "bearer s3cret", true },  { "BEARER s3cret", true },
        { "Bearer s3cre", false },  { "Bearer s3cret ", false }, { "Basic s3cret", false },
        { "Bearers3cret", false },  { "s3cret", false },         { "", false },
        { "Bearer ", false },
    };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cases); i++)
        assert_int_equal(hp_bearer_ok("s3cret", 6, cases[i].header, strlen(cases[i].header)),
                         cases[i].ok);
}

static void test_hp_hostport_parse_forms(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(hp_hostport_parse("127.0.0.1:7070", "--listen", &ss, &err), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 7070);
    assert_true(hp_addr_is_loopback(&ss));
    /* localhost means the same for every server */
    assert_int_equal(hp_hostport_parse("localhost:0", "--listen", &ss, &err), 0);
    assert_true(hp_addr_is_loopback(&ss));
    assert_int_equal(hp_hostport_parse("[::1]:7071", "--listen", &ss, &err), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_true(hp_addr_is_loopback(&ss));
    assert_int_equal(hp_hostport_parse("0.0.0.0:7071", "--listen", &ss, &err), 0);
    assert_false(hp_addr_is_loopback(&ss));
    assert_int_equal(hp_hostport_parse("[::]:7071", "--listen", &ss, &err), 0);
    assert_false(hp_addr_is_loopback(&ss));
    assert_int_equal(hp_hostport_parse("10.1.2.3:1", "--listen", &ss, &err), 0);
    assert_false(hp_addr_is_loopback(&ss));
    hp_buf_reset(&err);
    assert_int_equal(hp_hostport_parse("db.example:80", "--listen", &ss, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "not a numeric"));
    hp_buf_reset(&err);
    assert_int_equal(hp_hostport_parse("127.0.0.1:70000", "--listen", &ss, &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "bad port"));
    assert_int_equal(hp_hostport_parse("7070", "--listen", &ss, &err), HP_EUSAGE);
    assert_int_equal(hp_hostport_parse(":7070", "--listen", &ss, &err), HP_EUSAGE);
    assert_int_equal(hp_hostport_parse("[::1:7070", "--listen", &ss, &err), HP_EUSAGE);
    hp_buf_release(&err);
}

static void test_hp_name_check_allowed_set(void **state)
{
    (void)state;
    size_t at = 99;
    assert_int_equal(hp_name_check("be-7.dc1:9040_a", 15, &at), 0);
    assert_int_equal(hp_name_check("be\r\nX-Evil: 1", 14, &at), HP_EPARSE);
    assert_int_equal(at, 2);
    assert_int_equal(hp_name_check("a/b", 3, &at), HP_EPARSE);
    assert_int_equal(at, 1);
    assert_int_equal(hp_name_check("<x>", 3, &at), HP_EPARSE);
    assert_int_equal(at, 0);
    assert_int_equal(hp_name_check("a\"b", 3, &at), HP_EPARSE);
    assert_int_equal(hp_name_check("", 0, &at), HP_EPARSE);
    char long_name[HP_NAME_MAX + 2];
    memset(long_name, 'a', sizeof(long_name));
    assert_int_equal(hp_name_check(long_name, HP_NAME_MAX, &at), 0);
    assert_int_equal(hp_name_check(long_name, HP_NAME_MAX + 1, &at), HP_EPARSE);
}

static void test_hp_url_redact_userinfo(void **state)
{
    (void)state;
    char *r = hp_url_redact("http://admin:pw@db1:8040/pprof/heap");
    assert_string_equal(r, "http://***@db1:8040/pprof/heap");
    free(r);
    r = hp_url_redact("https://a@b:p@ss@h/x?u=a@b");
    assert_string_equal(r, "https://***@h/x?u=a@b");
    free(r);
    r = hp_url_redact("http://db1:8040/x?who=a@b");
    assert_string_equal(r, "http://db1:8040/x?who=a@b");
    free(r);
    r = hp_url_redact("db1:8040");
    assert_string_equal(r, "db1:8040");
    free(r);
}

static void test_hp_regex_budget_refuses_blowups(void **state)
{
    (void)state;
    struct hp_buf err = HP_BUF_INIT(0);
    assert_int_equal(hp_regex_budget_check("^mallocx?$|je_.*arena", &err), 0);
    assert_int_equal(hp_regex_budget_check("[a-z]{1,30}(foo|bar){2}", &err), 0);
    assert_int_equal(hp_regex_budget_check("[]{}]{3}x\\{1000}", &err), 0);
    assert_int_equal(hp_regex_budget_check("a{255}", &err), 0);
    hp_buf_reset(&err);
    assert_int_equal(hp_regex_budget_check("((a{1000}){1000}){1000}", &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "repetition"));
    hp_buf_reset(&err);
    assert_int_equal(hp_regex_budget_check("((a{200}){200}){200}", &err), HP_EUSAGE);
    assert_non_null(strstr(err.data, "expensive"));
    assert_int_equal(hp_regex_budget_check("((x{100}){100}){3}", &err), HP_EUSAGE);
    char big[HP_REGEX_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(hp_regex_budget_check(big, &err), HP_EUSAGE);
    hp_buf_release(&err);
}

/* What the budget lets through compiles quickly (the point of it). */
static void test_hp_regex_budget_bounds_compile_time(void **state)
{
    (void)state;
    static const char *worst[] = { "((a{15}){15}){15}", "(a{255}){78}", "((x+){100}){100}" };
    struct hp_buf err = HP_BUF_INIT(0);
    for (size_t i = 0; i < HP_ARRAY_SIZE(worst); i++) {
        if (hp_regex_budget_check(worst[i], &err) < 0)
            continue;
        uint64_t t0 = hp_now_ns();
        regex_t re;
        int rc = regcomp(&re, worst[i], REG_EXTENDED | REG_NOSUB);
        if (rc == 0)
            regfree(&re);
        assert_true(hp_now_ns() - t0 < 2000000000ull);
    }
    hp_buf_release(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hp_secret_equal_compares_whole),
        cmocka_unit_test(test_hp_bearer_ok_scheme_and_token),
        cmocka_unit_test(test_hp_hostport_parse_forms),
        cmocka_unit_test(test_hp_name_check_allowed_set),
        cmocka_unit_test(test_hp_url_redact_userinfo),
        cmocka_unit_test(test_hp_regex_budget_refuses_blowups),
        cmocka_unit_test(test_hp_regex_budget_bounds_compile_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
