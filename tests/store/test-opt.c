/* The table-driven option parser (store/hp-opt.h): every value type, the
 * spellings it accepts, the errors it gives, and --help read from the same
 * table with defaults taken from the variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "store/hp-opt.h"
#include "store/hp.h"

struct vals {
    bool once, progress;
    const char *db;
    uint32_t n32;
    size_t nsz;
    double frac;
    int64_t retain;
    char seen[256];
    size_t nseen;
};

static int collect_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct vals *v = o->value;
    if (strcmp(arg, "bad") == 0) {
        hp_err_printf(err, "expected anything but bad");
        return HP_EUSAGE;
    }
    size_t n = strlen(arg);
    if (v->nseen + n + 2 < sizeof(v->seen)) {
        memcpy(v->seen + v->nseen, arg, n);
        v->nseen += n;
        v->seen[v->nseen++] = ',';
        v->seen[v->nseen] = '\0';
    }
    return 0;
}

static const struct hp_opt_usage usage = {
    .prog = "tool",
    .usage = "tool [options] FILE...\ntool --once",
    .text = "Does a thing.\n",
    .after = "More words.\n",
};

/* Parse a NULL-terminated list; argv is copied so positionals can move. */
static int parse(struct vals *v, const char *const *args, struct hp_buf *msg, int *ret_exit,
                 char **ret_argv)
{
    const struct hp_opt opts[] = {
        HP_OPT_BOOL('1', "once", &v->once, "one round"),
        HP_OPT_FLAG(0, "no-progress", &v->progress, 0, "quiet"),
        HP_OPT_STRING(0, "db", &v->db, "PATH", "database"),
        HP_OPT_UINT('n', "count", &v->n32, 1, 100, "N", "how many"),
        HP_OPT_UINT(0, "size", &v->nsz, 0, 1e9, "N", "rows"),
        HP_OPT_DOUBLE(0, "frac", &v->frac, 0, 1, "F", "a share\nof the total"),
        HP_OPT_CALLBACK(0, "retain", &v->retain, "DUR", "keep this long", hp_opt_duration_cb,
                        hp_opt_duration_show),
        HP_OPT_GROUP("more:"),
        HP_OPT_CALLBACK_F(0, "files", v, "F [F ...]", "files", collect_cb, NULL, HP_OPT_MULTI, 0),
        HP_OPT_CALLBACK_F(0, "hidden", v, NULL, NULL, collect_cb, NULL, 0, 0),
        HP_OPT_END(),
    };
    int argc = 0;
    ret_argv[argc++] = "tool";
    for (size_t i = 0; args[i]; i++)
        ret_argv[argc++] = (char *)args[i];
    ret_argv[argc] = NULL;
    return hp_opt_parse(&usage, opts, argc, ret_argv, msg, ret_exit);
}

static void vals_init(struct vals *v)
{
    memset(v, 0, sizeof(*v));
    v->progress = true;
    v->db = "heapfleet.db";
    v->n32 = 32;
    v->frac = 0.005;
    v->retain = 90 * 86400;
}

static void test_opt_parse_every_type(void **state)
{
    struct vals v;
    vals_init(&v);
    char *argv[32];
    int rc = -7;
    const char *args[] = { "a", "--once", "--no-progress", "--db", "x.db", "-n", "7",
                           "--size=12", "b", "--frac", "0.5", "--retain", "12h",
                           "--files", "f1", "f2", "--hidden", "h", "--", "--c", NULL };
    int n = parse(&v, args, NULL, &rc, argv);
    assert_int_equal(n, 3);
    assert_string_equal(argv[0], "a");
    assert_string_equal(argv[1], "b");
    assert_string_equal(argv[2], "--c"); /* after "--" everything is positional */
    assert_int_equal(rc, -7);            /* untouched on success */
    assert_true(v.once);
    assert_false(v.progress);
    assert_string_equal(v.db, "x.db");
    assert_int_equal(v.n32, 7);
    assert_int_equal(v.nsz, 12);
    assert_true(v.frac == 0.5);
    assert_int_equal(v.retain, 12 * 3600);
    assert_string_equal(v.seen, "f1,f2,h,");

    /* "-" alone is a positional (stdin), and short options work. */
    vals_init(&v);
    const char *args2[] = { "-", "-1", NULL };
    assert_int_equal(parse(&v, args2, NULL, &rc, argv), 1);
    assert_string_equal(argv[0], "-");
    assert_true(v.once);
}

static void expect_error(const char *const *args, const char *want)
{
    struct vals v;
    vals_init(&v);
    char *argv[32];
    int rc = -7;
    struct hp_buf msg = HP_BUF_INIT(0);
    assert_int_equal(parse(&v, args, &msg, &rc, argv), -1);
    assert_int_equal(rc, 2);
    assert_non_null(msg.data);
    if (!strstr(msg.data, want))
        fail_msg("expected \"%s\" in:\n%s", want, msg.data);
    assert_non_null(strstr(msg.data, "usage: tool [options] FILE...\n   or: tool --once\n"));
    hp_buf_release(&msg);
}

static void test_opt_errors_say_what_and_where(void **state)
{
    expect_error((const char *[]){ "--nope", NULL }, "tool: unknown option --nope\n");
    expect_error((const char *[]){ "--nope=3", NULL }, "tool: unknown option --nope\n");
    expect_error((const char *[]){ "-x", NULL }, "tool: unknown option -x\n");
    expect_error((const char *[]){ "--db", NULL }, "tool: --db needs a value PATH\n");
    expect_error((const char *[]){ "--once=yes", NULL }, "tool: --once takes no value\n");
    expect_error((const char *[]){ "--count", "0", NULL },
                 "tool: --count \"0\": expected a whole number from 1 to 100\n");
    expect_error((const char *[]){ "--count", "101", NULL }, "from 1 to 100");
    expect_error((const char *[]){ "--count", "7x", NULL }, "from 1 to 100");
    expect_error((const char *[]){ "--count", "-1", NULL }, "from 1 to 100");
    expect_error((const char *[]){ "--frac=2", NULL },
                 "tool: --frac \"2\": expected a number from 0 to 1\n");
    expect_error((const char *[]){ "--frac", "nan", NULL }, "from 0 to 1");
    expect_error((const char *[]){ "--retain", "soon", NULL },
                 "tool: --retain \"soon\": expected a duration");
    expect_error((const char *[]){ "--files", "ok", "bad", NULL },
                 "tool: --files \"bad\": expected anything but bad\n");
    expect_error((const char *[]){ "--files", NULL }, "--files needs a value");
    /* Exact names only: a prefix is not an abbreviation. */
    expect_error((const char *[]){ "--on", NULL }, "unknown option --on");
    /* A group heading is not an option. */
    expect_error((const char *[]){ "--more:", NULL }, "unknown option");
}

static void test_opt_help_reads_defaults_from_the_variables(void **state)
{
    struct vals v;
    vals_init(&v);
    char *argv[32];
    int rc = -7;
    struct hp_buf msg = HP_BUF_INIT(0);
    assert_int_equal(parse(&v, (const char *[]){ "--db", "first.db", "--help", NULL }, &msg, &rc,
                           argv),
                     -1);
    assert_int_equal(rc, 0);
    const char *want = "usage: tool [options] FILE...\n"
                       "   or: tool --once\n"
                       "\n"
                       "Does a thing.\n"
                       "\n"
                       "  -1, --once            one round\n"
                       "  --no-progress         quiet\n"
                       "  --db PATH             database (default first.db)\n"
                       "  -n, --count N         how many (default 32)\n"
                       "  --size N              rows\n"
                       "  --frac F              a share\n"
                       "                        of the total (default 0.005)\n"
                       "  --retain DUR          keep this long (default 90d)\n"
                       "\n"
                       "more:\n"
                       "  --files F [F ...]     files\n"
                       "  -h, --help            this help\n"
                       "\n"
                       "More words.\n";
    assert_string_equal(msg.data, want);
    hp_buf_release(&msg);

    /* The default shown follows the variable: change it, the help changes. */
    vals_init(&v);
    v.retain = 36 * 3600;
    v.n32 = 5;
    assert_int_equal(parse(&v, (const char *[]){ "-h", NULL }, &msg, &rc, argv), -1);
    assert_non_null(strstr(msg.data, "keep this long (default 36h)"));
    assert_non_null(strstr(msg.data, "how many (default 5)"));
    hp_buf_release(&msg);
}

/* --allowed-host A --allowed-host B: "A,B"; an empty name or a comma is
 * refused (a comma would smuggle a second name into one value). */
static void test_opt_name_list(void **state)
{
    (void)state;
    struct hp_buf list = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    const struct hp_opt opts[] = {
        HP_OPT_CALLBACK(0, "allowed-host", &list, "NAME", "names", hp_opt_name_list_cb, NULL),
        HP_OPT_END(),
    };
    static const struct hp_opt_usage u = { "t", "t [options]", NULL, NULL };
    char *argv[] = { "t", "--allowed-host", "a.example", "--allowed-host=b", NULL };
    int rc, n = hp_opt_parse(&u, opts, 4, argv, &err, &rc);
    assert_int_equal(n, 0);
    assert_string_equal(list.data, "a.example,b");
    for (size_t i = 0; i < 2; i++) {
        const char *bad = i ? "c,d" : "";
        hp_buf_reset(&err);
        assert_true(hp_opt_name_list_cb(&opts[0], bad, &err) < 0);
        assert_non_null(strstr(err.data, "expected one name"));
    }
    assert_string_equal(list.data, "a.example,b");
    hp_buf_release(&list);
    hp_buf_release(&err);
}

static void test_opt_duration_show(void **state)
{
    int64_t secs;
    const struct hp_opt o = HP_OPT_CALLBACK(0, "d", &secs, "D", "d", hp_opt_duration_cb,
                                            hp_opt_duration_show);
    static const struct {
        const char *in, *shown;
    } cases[] = { { "90d", "90d" }, { "2w", "14d" }, { "90s", "90s" }, { "120", "2m" },
                  { "0", "0" },     { "36h", "36h" } };
    for (size_t i = 0; i < HP_ARRAY_SIZE(cases); i++) {
        struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
        assert_int_equal(hp_opt_duration_cb(&o, cases[i].in, &err), 0);
        hp_opt_duration_show(&o, &out);
        assert_string_equal(out.data, cases[i].shown);
        hp_buf_release(&out);
        hp_buf_release(&err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opt_parse_every_type),
        cmocka_unit_test(test_opt_errors_say_what_and_where),
        cmocka_unit_test(test_opt_help_reads_defaults_from_the_variables),
        cmocka_unit_test(test_opt_duration_show),
        cmocka_unit_test(test_opt_name_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
