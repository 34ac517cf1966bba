/* heapfleet's one command-line option parser, table-driven after git's
 * parse-options: each executable describes its options once, in an array of
 * struct hp_opt, and the same array both parses argv and prints --help. The
 * help shows each option's default from the variable the option writes, read
 * before parsing, so what --help says is what the command does.
 *
 *   const char *db = "heapfleet.db";
 *   bool once = false;
 *   const struct hp_opt opts[] = {
 *       HP_OPT_STRING(0, "db", &db, "PATH", "database"),
 *       HP_OPT_BOOL(0, "once", &once, "one round, then exit"),
 *       HP_OPT_END(),
 *   };
 *   static const struct hp_opt_usage u = { "collector", "collector --nodes FILE", NULL, NULL };
 *   int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
 *   if (n < 0)
 *       return rc;      // --help printed (0) or a usage error printed (2)
 *   // argv[0..n) are the positional arguments, in order
 *
 * Accepted spellings: --name VALUE, --name=VALUE, -x VALUE, -h/--help (always
 * there), and "--" to end the options. Names are matched exactly (no unique
 * prefixes: a new option must never change what an old spelling means).
 *
 * Part of hp_dep (libc only). Thread context: any thread; the table and the
 * variables it points to belong to the caller. */
#ifndef HP_OPT_H
#define HP_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hp_buf;
struct hp_opt;

enum hp_opt_type {
    HP_OPT_TYPE_END,
    HP_OPT_TYPE_GROUP,    /* a heading in --help; help is the heading */
    HP_OPT_TYPE_FLAG,     /* bool *value = (defval != 0), takes no value */
    HP_OPT_TYPE_STRING,   /* const char **value = the argument */
    HP_OPT_TYPE_UINT,     /* unsigned integer of `size` bytes, in [min, max] */
    HP_OPT_TYPE_DOUBLE,   /* double in [min, max] */
    HP_OPT_TYPE_CALLBACK, /* cb(opt, arg) parses; show() prints the default */
};

enum {
    HP_OPT_NOARG = 1 << 0,     /* a callback that takes no value (arg is NULL) */
    HP_OPT_MULTI = 1 << 1,     /* a callback called for each following argument
                                  up to the next one that starts with '-' (>= 1) */
    HP_OPT_NODEFAULT = 1 << 2, /* --help shows no "(default ...)" for it */
};

/* Parse arg (NULL for HP_OPT_NOARG) into o->value. Returns 0, or <0 with
 * what was expected written to err ("a duration like 90s, 15m"); the parser
 * adds which option and value were refused. */
typedef int (*hp_opt_cb)(const struct hp_opt *o, const char *arg, struct hp_buf *err);
/* Append o's current value, as a user would type it, for "(default X)";
 * append nothing when there is no default worth showing. */
typedef void (*hp_opt_show_cb)(const struct hp_opt *o, struct hp_buf *out);

struct hp_opt {
    enum hp_opt_type type;
    char short_name;       /* 'h' for -h, or 0 */
    const char *long_name; /* "db" for --db, or NULL */
    void *value;
    size_t size;      /* HP_OPT_TYPE_UINT: sizeof(*value) (1, 2, 4 or 8) */
    const char *argh; /* the value's placeholder in --help ("FILE") */
    const char *help; /* NULL: accepted but not listed */
    int flags;
    double min, max; /* UINT and DOUBLE: accepted range */
    hp_opt_cb cb;
    hp_opt_show_cb show;
    intptr_t defval; /* FLAG: the value stored; CALLBACK: free for the callback */
};

#define HP_OPT_END() { .type = HP_OPT_TYPE_END }
#define HP_OPT_GROUP(h) { .type = HP_OPT_TYPE_GROUP, .help = (h) }
#define HP_OPT_FLAG(s, l, v, val, h)                                                          \
    { .type = HP_OPT_TYPE_FLAG, .short_name = (s), .long_name = (l), .value = (bool *)(v),     \
      .help = (h), .defval = (val) }
#define HP_OPT_BOOL(s, l, v, h) HP_OPT_FLAG(s, l, v, 1, h)
#define HP_OPT_STRING(s, l, v, a, h)                                                          \
    { .type = HP_OPT_TYPE_STRING, .short_name = (s), .long_name = (l),                        \
      .value = (const char **)(v), .argh = (a), .help = (h) }
#define HP_OPT_UINT(s, l, v, lo, hi, a, h)                                                    \
    { .type = HP_OPT_TYPE_UINT, .short_name = (s), .long_name = (l), .value = (v),            \
      .size = sizeof(*(v)), .argh = (a), .help = (h), .min = (lo), .max = (hi) }
#define HP_OPT_DOUBLE(s, l, v, lo, hi, a, h)                                                  \
    { .type = HP_OPT_TYPE_DOUBLE, .short_name = (s), .long_name = (l),                        \
      .value = (double *)(v), .argh = (a), .help = (h), .min = (lo), .max = (hi) }
#define HP_OPT_CALLBACK_F(s, l, v, a, h, c, sh, f, d)                                         \
    { .type = HP_OPT_TYPE_CALLBACK, .short_name = (s), .long_name = (l), .value = (v),        \
      .argh = (a), .help = (h), .cb = (c), .show = (sh), .flags = (f), .defval = (d) }
#define HP_OPT_CALLBACK(s, l, v, a, h, c, sh) HP_OPT_CALLBACK_F(s, l, v, a, h, c, sh, 0, 0)

/* Callbacks for values several executables take. */
/* int64_t *value: seconds from hp_parse_duration ("90d", "12h", "0"). */
int hp_opt_duration_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
void hp_opt_duration_show(const struct hp_opt *o, struct hp_buf *out);
/* struct hp_buf *value: the argument appended to a comma-joined list, one
 * name per use of the option (--allowed-host A --allowed-host B: "A,B");
 * an empty name or one with a comma is refused. */
int hp_opt_name_list_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
/* No value: --log-level LEVEL sets hp_log_set_level() at once. */
int hp_opt_log_level_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
#define HP_OPT_LOG_LEVEL()                                                                     \
    HP_OPT_CALLBACK_F(0, "log-level", NULL, "LEVEL", "error, warn, info (default) or debug",   \
                      hp_opt_log_level_cb, NULL, 0, 0)

/* What --help prints around the option table. */
struct hp_opt_usage {
    const char *prog;  /* "query top": prefixes every message */
    const char *usage; /* one or more lines without "usage: " */
    const char *text;  /* paragraph after the usage lines, or NULL */
    const char *after; /* text after the options (formats, signals), or NULL */
};

/* Parse argv[1..argc) against opts. Returns the number of positional
 * arguments, moved to argv[0..n) in order, or -1 when the caller should
 * return *ret_exit at once: 0 after --help, 2 after a usage error (unknown
 * option, missing or bad value). The help or the error ("query top: --top
 * x: expected a whole number from 0 to 1000000000", then the usage) goes to
 * msg when it is not NULL, else to stdout (help) or stderr (errors). */
int hp_opt_parse(const struct hp_opt_usage *u, const struct hp_opt *opts, int argc, char **argv,
                 struct hp_buf *msg, int *ret_exit);

/* Append the --help text for opts to out. */
void hp_opt_help(const struct hp_opt_usage *u, const struct hp_opt *opts, struct hp_buf *out);

/* Print "prog: message" and the usage lines to stderr; returns 2, the exit
 * code for usage errors (for checks the table cannot express, such as a
 * missing positional argument). */
int hp_opt_usage_error(const struct hp_opt_usage *u, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
