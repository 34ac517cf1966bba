/* Shared plumbing of the `query` commands (see cli.h). */
#include "query/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "collector/ingest/ingest.h"
#include "collector/sym/sym.h"

const char query_cli_common_help[] =
    "  --format F          text|collapsed|json|dot|svg|pprof (default text)\n"
    "  --sample S          inuse_space|inuse_objects|alloc_space|alloc_objects\n"
    "  --inuse_space ...   jeprof spellings of --sample are accepted too\n"
    "  --binary FILE       the main executable the profile was taken from\n"
    "  --symbols DIR       folder of binaries/debug files (also .build-id/xx/rest.debug)\n"
    "  --no-symbolize      keep raw addresses\n"
    "  --no-inline         one frame per address (no inlined frames)\n"
    "  --lines             frame names carry file:line\n"
    "  --keep-allocator    keep jemalloc's own frames at the leaf end\n"
    "  --focus RE          only stacks with a frame matching RE (POSIX ERE)\n"
    "  --ignore RE         drop stacks with a frame matching RE\n"
    "  --top N             rows in tables (default 30 for text, all otherwise; 0 = all)\n"
    "  --nodefraction F    dot: hide functions under this share (default 0.005)\n"
    "  --edgefraction F    dot: hide calls under this share (default 0.001)\n"
    "  --db PATH           database (default $HEAPFLEET_DB or heapfleet.db)\n";

void query_cli_init(struct query_cli *c, const char *prog)
{
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    c->format = QUERY_FORMAT_TEXT;
    query_opts_init(&c->qo);
    c->qo.top = (size_t)-1; /* "not set": each command picks its default */
    const char *env = getenv("HEAPFLEET_DB");
    c->db = env && *env ? env : "heapfleet.db";
}

int query_cli_fail(const struct query_cli *c, const char *msg)
{
    fprintf(stderr, "%s: %s\n", c->prog, msg);
    return 1;
}

int query_cli_usage(const struct query_cli *c, const char *usage)
{
    fprintf(stderr, "usage: %s\n", usage);
    return 2;
}

static int need_arg(const struct query_cli *c, int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", c->prog, argv[i]);
        return HP_EUSAGE;
    }
    return 0;
}

int query_cli_common_opt(struct query_cli *c, int argc, char **argv, int i, int *ret_used)
{
    const char *a = argv[i];
    enum profile_value pv;
    *ret_used = 1;
    if (strncmp(a, "--", 2) == 0 && profile_value_parse(a + 2, &pv) == 0) {
        c->qo.sample = pv;
        return 1;
    }
    if (strcmp(a, "--no-inline") == 0) {
        c->qo.no_inline = true;
        return 1;
    }
    if (strcmp(a, "--no-symbolize") == 0) {
        c->no_symbolize = true;
        return 1;
    }
    if (strcmp(a, "--lines") == 0) {
        c->qo.with_lines = true;
        return 1;
    }
    if (strcmp(a, "--keep-allocator") == 0) {
        c->qo.keep_allocator = true;
        return 1;
    }
    static const char *valued[] = { "--format", "--sample", "--binary", "--symbols", "--focus",
                                    "--ignore", "--top", "--nodefraction", "--db",
                                    "--edgefraction" };
    size_t k;
    for (k = 0; k < HP_ARRAY_SIZE(valued); k++)
        if (strcmp(a, valued[k]) == 0)
            break;
    if (k == HP_ARRAY_SIZE(valued))
        return 0;
    if (need_arg(c, argc, argv, i) < 0)
        return HP_EUSAGE;
    const char *v = argv[i + 1];
    *ret_used = 2;
    switch (k) {
    case 0:
        if (query_format_parse(v, &c->format) < 0) {
            fprintf(stderr, "%s: unknown --format \"%s\" (expected text, collapsed, json, dot, "
                            "svg or pprof)\n",
                    c->prog, v);
            return HP_EUSAGE;
        }
        return 1;
    case 1:
        if (profile_value_parse(v, &c->qo.sample) < 0) {
            fprintf(stderr, "%s: unknown --sample \"%s\" (expected inuse_space, inuse_objects, "
                            "alloc_space or alloc_objects)\n",
                    c->prog, v);
            return HP_EUSAGE;
        }
        return 1;
    case 2:
        c->binary = v;
        return 1;
    case 3:
        c->symbols = v;
        return 1;
    case 4:
        c->qo.focus = v;
        return 1;
    case 5:
        c->qo.ignore = v;
        return 1;
    case 6: {
        uint64_t n;
        if (hp_parse_u64(v, strlen(v), &n) < 0 || n > 1000000000) {
            fprintf(stderr, "%s: --top expects a whole number, got \"%s\"\n", c->prog, v);
            return HP_EUSAGE;
        }
        c->qo.top = (size_t)n;
        return 1;
    }
    case 7: {
        double d;
        if (hp_parse_double(v, &d) < 0 || d < 0 || d > 1) {
            fprintf(stderr, "%s: --nodefraction expects a number from 0 to 1, got \"%s\"\n",
                    c->prog, v);
            return HP_EUSAGE;
        }
        c->qo.nodefraction = d;
        return 1;
    }
    case 8:
        c->db = v;
        return 1;
    case 9: {
        double d;
        if (hp_parse_double(v, &d) < 0 || d < 0 || d > 1) {
            fprintf(stderr, "%s: --edgefraction expects a number from 0 to 1, got \"%s\"\n",
                    c->prog, v);
            return HP_EUSAGE;
        }
        c->qo.edgefraction = d;
        return 1;
    }
    default:
        break;
    }
    return 0;
}

int query_cli_symbolize(const char *prog, const char *binary, const char *symbols,
                        struct profile *p, struct hp_buf *err)
{
    struct sym_options so = {
        .binary = binary,
        .symbols_dir = symbols,
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
    return r;
}

int query_cli_load(struct query_cli *c, const char *selector, struct profile **ret,
                   struct hp_buf *err)
{
    struct profile *p = NULL;
    struct stat st;
    int r;
    if (stat(selector, &st) == 0 && S_ISREG(st.st_mode)) {
        /* A profile file on disk: the offline `jeprof BINARY HEAP` path. */
        r = ingest_parse_file(selector, NULL, &p, err);
        if (r == 0 && !c->no_symbolize)
            r = query_cli_symbolize(c->prog, c->binary, c->symbols, p, err);
    } else if (strchr(selector, '/')) {
        hp_err_printf(err, "cannot read \"%s\": %s", selector,
                      stat(selector, &st) == 0 ? "not a regular file" : "no such file");
        return HP_ENOTFOUND;
    } else {
        /* A stored snapshot: NODE, NODE@TIME or #ID. Stored profiles come
         * back symbolized; --binary/--symbols re-symbolize them. */
        r = query_store_load(c->db, selector, &p, err);
        if (r == 0 && (c->binary || c->symbols))
            r = query_cli_symbolize(c->prog, c->binary, c->symbols, p, err);
    }
    if (r < 0) {
        profile_free(p);
        return r;
    }
    *ret = p;
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
