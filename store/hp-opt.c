/* The table-driven option parser (see hp-opt.h). One pass over argv: options
 * are looked up in the table by exact name, values are checked by type
 * (range-checked numbers, or the option's own callback), and positional
 * arguments are compacted to the front of argv in their order. --help is
 * generated from the same table, with each default read from the variable
 * the option writes, so the two cannot drift apart. Nothing here allocates
 * except the message buffers, and nothing exits: the caller returns the
 * exit code it is given. */
#include "store/hp-opt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store/hp.h"

#define HELP_COLUMN 24 /* where the help text starts, as in git and man pages */

static bool takes_value(const struct hp_opt *o)
{
    if (o->type == HP_OPT_TYPE_FLAG)
        return false;
    if (o->type == HP_OPT_TYPE_CALLBACK && (o->flags & HP_OPT_NOARG))
        return false;
    return true;
}

static const struct hp_opt *find_long(const struct hp_opt *opts, const char *name, size_t n)
{
    for (const struct hp_opt *o = opts; o->type != HP_OPT_TYPE_END; o++)
        if (o->long_name && strlen(o->long_name) == n && memcmp(o->long_name, name, n) == 0)
            return o;
    return NULL;
}

static const struct hp_opt *find_short(const struct hp_opt *opts, char c)
{
    for (const struct hp_opt *o = opts; o->type != HP_OPT_TYPE_END; o++)
        if (o->short_name && o->short_name == c)
            return o;
    return NULL;
}

static void store_uint(const struct hp_opt *o, uint64_t v)
{
    switch (o->size) {
    case 1: {
        uint8_t x = (uint8_t)v;
        memcpy(o->value, &x, 1);
        break;
    }
    case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(o->value, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(o->value, &x, 4);
        break;
    }
    default:
        memcpy(o->value, &v, 8);
        break;
    }
}

static uint64_t load_uint(const struct hp_opt *o)
{
    switch (o->size) {
    case 1: {
        uint8_t x;
        memcpy(&x, o->value, 1);
        return x;
    }
    case 2: {
        uint16_t x;
        memcpy(&x, o->value, 2);
        return x;
    }
    case 4: {
        uint32_t x;
        memcpy(&x, o->value, 4);
        return x;
    }
    default: {
        uint64_t x;
        memcpy(&x, o->value, 8);
        return x;
    }
    }
}

/* Apply one value to o. 0, or <0 with what was expected in err. */
static int apply(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    switch (o->type) {
    case HP_OPT_TYPE_FLAG:
        *(bool *)o->value = o->defval != 0;
        return 0;
    case HP_OPT_TYPE_STRING:
        *(const char **)o->value = arg;
        return 0;
    case HP_OPT_TYPE_UINT: {
        uint64_t v;
        /* arg is NULL only for options that take no value; the check also
         * keeps GCC 12 at -O3 from warning that strlen may see NULL. */
        if (!arg || hp_parse_u64(arg, strlen(arg), &v) < 0 || (double)v < o->min || (double)v > o->max) {
            hp_err_printf(err, "expected a whole number from %.0f to %.0f", o->min, o->max);
            return HP_EUSAGE;
        }
        store_uint(o, v);
        return 0;
    }
    case HP_OPT_TYPE_DOUBLE: {
        double v;
        if (!arg || hp_parse_double(arg, &v) < 0 || !(v >= o->min && v <= o->max)) {
            hp_err_printf(err, "expected a number from %g to %g", o->min, o->max);
            return HP_EUSAGE;
        }
        *(double *)o->value = v;
        return 0;
    }
    case HP_OPT_TYPE_CALLBACK: {
        int r = o->cb(o, arg, err);
        if (r < 0 && (!err || !err->len))
            hp_err_printf(err, "%s", hp_strerror(r));
        return r < 0 ? r : 0;
    }
    default:
        return HP_EUSAGE;
    }
}

/* The current value of o as --help shows it, or nothing. */
static void show_default(const struct hp_opt *o, struct hp_buf *out)
{
    if (o->flags & HP_OPT_NODEFAULT || (!o->value && o->type != HP_OPT_TYPE_CALLBACK))
        return;
    switch (o->type) {
    case HP_OPT_TYPE_STRING: {
        const char *s = *(const char *const *)o->value;
        if (s && *s)
            (void)hp_buf_puts(out, s);
        break;
    }
    case HP_OPT_TYPE_UINT: {
        uint64_t v = load_uint(o);
        if (v)
            (void)hp_buf_printf(out, "%llu", (unsigned long long)v);
        break;
    }
    case HP_OPT_TYPE_DOUBLE: {
        double v = *(const double *)o->value;
        if (v != 0)
            (void)hp_buf_printf(out, "%g", v);
        break;
    }
    case HP_OPT_TYPE_CALLBACK:
        if (o->show)
            o->show(o, out);
        break;
    default:
        break;
    }
}

static void indent(struct hp_buf *out, size_t from, size_t to)
{
    for (size_t k = from; k < to; k++)
        (void)hp_buf_puts(out, " ");
}

static void help_line(const struct hp_opt *o, struct hp_buf *out)
{
    size_t start = out->len;
    (void)hp_buf_puts(out, "  ");
    if (o->short_name)
        (void)hp_buf_printf(out, "-%c%s", o->short_name, o->long_name ? ", " : "");
    if (o->long_name)
        (void)hp_buf_printf(out, "--%s", o->long_name);
    if (takes_value(o) && o->argh)
        (void)hp_buf_printf(out, " %s", o->argh);
    size_t w = out->len - start;
    if (w + 2 > HELP_COLUMN) {
        (void)hp_buf_puts(out, "\n");
        w = 0;
    }
    indent(out, w, HELP_COLUMN);
    /* Continuation lines of the help text line up under its first line. */
    for (const char *h = o->help; *h;) {
        const char *nl = strchr(h, '\n');
        size_t n = nl ? (size_t)(nl - h) : strlen(h);
        (void)hp_buf_append(out, h, n);
        h += n;
        if (*h == '\n' && h[1]) {
            (void)hp_buf_puts(out, "\n");
            indent(out, 0, HELP_COLUMN);
        }
        if (*h == '\n')
            h++;
    }
    struct hp_buf d = HP_BUF_INIT(0);
    show_default(o, &d);
    if (d.len)
        (void)hp_buf_printf(out, " (default %.*s)", (int)d.len, d.data);
    hp_buf_release(&d);
    (void)hp_buf_puts(out, "\n");
}

static void usage_lines(const struct hp_opt_usage *u, struct hp_buf *out)
{
    const char *lead = "usage: ";
    for (const char *s = u->usage; s && *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        (void)hp_buf_printf(out, "%s%.*s\n", lead, (int)n, s);
        lead = "   or: ";
        s += n + (nl != NULL);
    }
}

void hp_opt_help(const struct hp_opt_usage *u, const struct hp_opt *opts, struct hp_buf *out)
{
    usage_lines(u, out);
    if (u->text)
        (void)hp_buf_printf(out, "\n%s", u->text);
    (void)hp_buf_puts(out, "\n");
    bool first = true;
    for (const struct hp_opt *o = opts; o->type != HP_OPT_TYPE_END; o++) {
        if (o->type == HP_OPT_TYPE_GROUP)
            (void)hp_buf_printf(out, "%s%s\n", first ? "" : "\n", o->help ? o->help : "");
        first = false;
        if (o->type == HP_OPT_TYPE_GROUP)
            continue;
        if (o->help && (o->long_name || o->short_name))
            help_line(o, out);
    }
    if (!find_long(opts, "help", 4))
        (void)hp_buf_puts(out, "  -h, --help            this help\n");
    if (u->after)
        (void)hp_buf_printf(out, "\n%s", u->after);
}

static int fail(const struct hp_opt_usage *u, struct hp_buf *msg, int *ret_exit, const char *what)
{
    struct hp_buf b = HP_BUF_INIT(0);
    (void)hp_buf_printf(&b, "%s: %s\n", u->prog, what);
    usage_lines(u, &b);
    (void)hp_buf_printf(&b, "'%s --help' lists the options.\n", u->prog);
    if (msg)
        (void)hp_buf_append(msg, b.data, b.len);
    else
        fputs(b.data, stderr);
    hp_buf_release(&b);
    *ret_exit = 2;
    return -1;
}

int hp_opt_parse(const struct hp_opt_usage *u, const struct hp_opt *opts, int argc, char **argv,
                 struct hp_buf *msg, int *ret_exit)
{
    int npos = 0;
    bool only_pos = false;
    struct hp_buf e = HP_BUF_INIT(0), what = HP_BUF_INIT(0);
    int rc = -1;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            argv[npos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        const struct hp_opt *o;
        const char *eq = NULL;
        size_t namelen;
        if (a[1] == '-') {
            eq = strchr(a + 2, '=');
            namelen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
            o = find_long(opts, a + 2, namelen);
            namelen += 2;
        } else {
            o = a[2] == '\0' ? find_short(opts, a[1]) : NULL;
            namelen = strlen(a);
        }
        if (!o && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            struct hp_buf h = HP_BUF_INIT(0);
            hp_opt_help(u, opts, &h);
            if (msg)
                (void)hp_buf_append(msg, h.data, h.len);
            else
                fputs(h.data, stdout);
            hp_buf_release(&h);
            *ret_exit = 0;
            goto out;
        }
        if (!o || o->type == HP_OPT_TYPE_GROUP) {
            (void)hp_buf_printf(&what, "unknown option %.*s", (int)namelen, a);
            rc = fail(u, msg, ret_exit, what.data);
            goto out;
        }
        if (!takes_value(o)) {
            if (eq) {
                (void)hp_buf_printf(&what, "%.*s takes no value", (int)namelen, a);
                rc = fail(u, msg, ret_exit, what.data);
                goto out;
            }
            if (apply(o, NULL, &e) < 0) {
                (void)hp_buf_printf(&what, "%s: %s", a, e.data ? e.data : "refused");
                rc = fail(u, msg, ret_exit, what.data);
                goto out;
            }
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            (void)hp_buf_printf(&what, "%s needs a value%s%s", a, o->argh ? " " : "",
                                o->argh ? o->argh : "");
            rc = fail(u, msg, ret_exit, what.data);
            goto out;
        }
        for (;;) {
            if (apply(o, v, &e) < 0) {
                (void)hp_buf_printf(&what, "%.*s \"%s\": %s", (int)namelen, a, v,
                                    e.data ? e.data : "refused");
                rc = fail(u, msg, ret_exit, what.data);
                goto out;
            }
            /* HP_OPT_MULTI: "--files a b c --next" hands a, b and c over. */
            if (!(o->flags & HP_OPT_MULTI) || i + 1 >= argc || argv[i + 1][0] == '-')
                break;
            v = argv[++i];
        }
    }
    rc = npos;
out:
    hp_buf_release(&e);
    hp_buf_release(&what);
    return rc;
}

int hp_opt_duration_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    if (hp_parse_duration(arg, (int64_t *)o->value) < 0) {
        hp_err_printf(err, "expected a duration like 90s, 15m, 12h, 90d, 2w (0: off)");
        return HP_EUSAGE;
    }
    return 0;
}

void hp_opt_duration_show(const struct hp_opt *o, struct hp_buf *out)
{
    static const struct {
        int64_t s;
        char unit;
    } units[] = { { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' } };
    int64_t v = *(const int64_t *)o->value;
    if (v <= 0) {
        (void)hp_buf_puts(out, "0");
        return;
    }
    /* The largest unit that divides it: 90d, 36h, 90s (never weeks: 14d
     * reads better than 2w). */
    for (size_t i = 0; i < HP_ARRAY_SIZE(units); i++)
        if (v % units[i].s == 0) {
            (void)hp_buf_printf(out, "%lld%c", (long long)(v / units[i].s), units[i].unit);
            return;
        }
}

int hp_opt_name_list_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct hp_buf *b = o->value;
    if (!*arg || strchr(arg, ',')) {
        hp_err_printf(err, "expected one name (repeat the option for more)");
        return HP_EUSAGE;
    }
    return hp_buf_printf(b, "%s%s", b->len ? "," : "", arg);
}

int hp_opt_log_level_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    enum hp_log_level lvl;
    if (hp_log_level_parse(arg, &lvl) < 0) {
        hp_err_printf(err, "expected error, warn, info or debug");
        return HP_EUSAGE;
    }
    hp_log_set_level(lvl);
    return 0;
}

int hp_opt_usage_error(const struct hp_opt_usage *u, const char *fmt, ...)
{
    struct hp_buf b = HP_BUF_INIT(0);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    int rc;
    (void)fail(u, NULL, &rc, b.data ? b.data : "");
    hp_buf_release(&b);
    return rc;
}
