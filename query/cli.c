/* Shared plumbing of the `query` commands (see cli.h). */
#include "query/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "collector/ingest/ingest.h"
#include "collector/sym/sym.h"

/* ---- the options every profile command takes (QUERY_CLI_OPTS) ---- */

int query_cli_format_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    if (query_format_parse(arg, (enum query_format *)o->value) < 0) {
        hp_err_printf(err, "expected text, collapsed, json, dot, svg, pprof or csv");
        return HP_EUSAGE;
    }
    return 0;
}

void query_cli_format_show(const struct hp_opt *o, struct hp_buf *out)
{
    (void)hp_buf_puts(out, query_format_name(*(const enum query_format *)o->value));
}

int query_cli_sample_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    /* --inuse_space and friends (jeprof's spellings) carry the value in the
     * option's own name. */
    if (o->flags & HP_OPT_NOARG)
        arg = o->long_name;
    if (profile_value_parse(arg, (enum profile_value *)o->value) < 0) {
        hp_err_printf(err, "expected inuse_space, inuse_objects, alloc_space or alloc_objects");
        return HP_EUSAGE;
    }
    return 0;
}

void query_cli_sample_show(const struct hp_opt *o, struct hp_buf *out)
{
    (void)hp_buf_puts(out, profile_value_name(*(const enum profile_value *)o->value));
}

int query_cli_top_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct query_cli *c = o->value;
    uint64_t n;
    if (hp_parse_u64(arg, strlen(arg), &n) < 0 || n > 1000000000) {
        hp_err_printf(err, "expected a whole number (0 = all rows)");
        return HP_EUSAGE;
    }
    c->qo.top = (size_t)n;
    return 0;
}

void query_cli_top_show(const struct hp_opt *o, struct hp_buf *out)
{
    const struct query_cli *c = o->value;
    (void)hp_buf_printf(out, "%u for text, all otherwise", c->top_text);
}

void query_cli_init(struct query_cli *c, const char *prog)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    c->format = QUERY_FORMAT_TEXT;
    c->top_text = 30;
    query_opts_init(&c->qo);
    c->qo.top = (size_t)-1; /* "not set": query_cli_parse picks the default */
    const char *env = getenv("HEAPFLEET_DB");
    c->db = env && *env ? env : "heapfleet.db";
}

int query_cli_parse(struct query_cli *c, const struct hp_opt_usage *u, const struct hp_opt *opts,
                    int argc, char **argv, int *ret_exit)
{
    int n = hp_opt_parse(u, opts, argc, argv, NULL, ret_exit);
    struct stat sb;
    if (n >= 0 && c->symbols && (stat(c->symbols, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        /* A folder that is not there would silently leave every frame
         * unsymbolized: say so instead. */
        fprintf(stderr, "%s: --symbols \"%s\": %s (expected a folder of binaries and debug "
                        "files)\n",
                c->prog, c->symbols, stat(c->symbols, &sb) != 0 ? strerror(errno) : "not a folder");
        *ret_exit = 2;
        return -1;
    }
    if (n >= 0 && c->qo.top == (size_t)-1)
        c->qo.top = c->format == QUERY_FORMAT_TEXT ? c->top_text : 0;
    return n;
}

int query_cli_fail(const struct query_cli *c, const char *msg)
{
    fprintf(stderr, "%s: %s\n", c->prog, msg);
    return 1;
}

int query_cli_symbolize(const char *prog, const char *binary, const char *symbols,
                        bool no_cache, struct profile *p, struct hp_buf *err)
{
    /* A second `query top FILE --binary B` reads its answers from the
     * on-disk cache (by build-id) instead of parsing the DWARF again. */
    struct sym_file_cache *fc = no_cache ? NULL : sym_file_cache_new(NULL, 0);
    struct sym_options so = {
        .binary = binary,
        .symbols_dir = symbols,
        .cache_ops = fc ? sym_file_cache_ops(fc) : NULL,
    };
    struct symbolizer *s = sym_new(&so);
    struct sym_stats st;
    struct hp_buf warn = HP_BUF_INIT(0);
    int r = sym_profile(s, p, &st, &warn);
    if (r == 0) {
        for (size_t i = 0; i < st.nobjects; i++) {
            const struct sym_object_status *o = &st.objects[i];
            if (o->status < 0 && o->addresses > 0)
                fprintf(stderr, "%s: warning: %s: %s (%u addresses left unsymbolized)\n",
                        prog, o->path, o->message, o->addresses);
            else if (o->message && strstr(o->message, "not used: "))
                fprintf(stderr, "%s: warning: %s: %s\n", prog, o->path, o->message);
        }
    } else {
        hp_err_printf(err, "symbolization failed: %s", warn.len ? warn.data : hp_strerror(r));
    }
    hp_buf_release(&warn);
    sym_free(s);
    sym_file_cache_free(fc);
    return r;
}

int query_cli_check_values(const char *prog, const char *path, const struct profile *p,
                           enum profile_value sample, struct hp_buf *err)
{
    if (p->lines_skipped)
        fprintf(stderr, "%s: warning: %s: skipped %llu lines that are not stacks (first: %s)\n",
                prog, path, (unsigned long long)p->lines_skipped,
                p->skipped_first ? p->skipped_first : "?");
    if (p->values_present == 0 || (p->values_present & (1u << sample)))
        return 0;
    struct hp_buf have = HP_BUF_INIT(0);
    for (int v = 0; v < PV_COUNT; v++)
        if (p->values_present & (1u << v))
            (void)hp_buf_printf(&have, "%s%s", have.len ? ", " : "",
                                profile_value_name((enum profile_value)v));
    hp_err_printf(err, "%s has no %s values (it has: %s); choose one with --sample", path,
                  profile_value_name(sample), have.data ? have.data : "none");
    hp_buf_release(&have);
    return HP_EUSAGE;
}

int query_cli_load(struct query_cli *c, const char *selector, struct profile **ret,
                   struct query_snapref *ret_ref, struct hp_buf *err)
{
    struct profile *p = NULL;
    struct stat st;
    struct query_snapref ref;
    memset(&ref, 0, sizeof(ref));
    int r;
    if (stat(selector, &st) == 0 && S_ISREG(st.st_mode)) {
        /* A profile file on disk: the offline `jeprof BINARY HEAP` path. */
        r = ingest_parse_file(selector, NULL, &p, err);
        if (r == 0)
            r = query_cli_check_values(c->prog, selector, p, c->qo.sample, err);
        ref.path = selector;
        ref.time_ms = r == 0 && p->time_ns > 0
                          ? p->time_ns / 1000000
                          : (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        if (r == 0 && !c->no_symbolize)
            r = query_cli_symbolize(c->prog, c->binary, c->symbols, c->no_cache, p, err);
    } else if (strchr(selector, '/')) {
        hp_err_printf(err, "cannot read \"%s\": %s", selector,
                      stat(selector, &st) == 0 ? "not a regular file" : "no such file");
        return HP_ENOTFOUND;
    } else {
        /* A stored snapshot: NODE, NODE@TIME or #ID. Stored profiles come
         * back symbolized; --binary/--symbols re-symbolize them. */
        r = query_store_load(c->db, selector, &p, &ref, err);
        if (r == 0 && (c->binary || c->symbols))
            r = query_cli_symbolize(c->prog, c->binary, c->symbols, c->no_cache, p, err);
    }
    if (r < 0) {
        profile_free(p);
        return r;
    }
    *ret = p;
    if (ret_ref)
        *ret_ref = ref;
    return 0;
}

int query_cli_write(const struct hp_buf *b)
{
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len)
        goto fail;
    if (fflush(stdout) != 0)
        goto fail;
    return 0;
fail:
    if (errno == EPIPE)
        return 0;
    fprintf(stderr, "query: writing output failed: %s\n", strerror(errno));
    return 1;
}

void query_cli_dump_name(const char *path, int64_t *ret_pid, int64_t *ret_time)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    struct ingest_dumpname d;
    *ret_pid = 0;
    *ret_time = -1;
    if (ingest_dumpname_parse(base, strlen(base), &d) != 1)
        return;
    *ret_pid = d.pid > 0 ? d.pid : 0;
    *ret_time = ingest_dumpname_time(&d);
}
