/* `query top SNAP` and `query export SNAP --format F`: one profile, viewed
 * as a function table or exported whole. */
#include "query/cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int render(struct query_cli *c, struct profile *p, struct hp_buf *out, struct hp_buf *err)
{
    struct query_folded *f = NULL;
    struct query_top *t = NULL;
    int r = query_fold(p, &c->qo, &f, err);
    if (r < 0)
        goto out;
    r = query_top_build(f, c->qo.sample, &t);
    if (r < 0)
        goto out;
    switch (c->format) {
    case QUERY_FORMAT_TEXT:
        r = query_render_top_text(p, f, t, &c->qo, out);
        break;
    case QUERY_FORMAT_COLLAPSED:
        r = query_render_collapsed(f, &c->qo, out);
        break;
    case QUERY_FORMAT_JSON:
        r = query_render_json(p, f, t, &c->qo, out);
        break;
    case QUERY_FORMAT_DOT:
        r = query_render_dot(f, t, &c->qo, out);
        break;
    case QUERY_FORMAT_SVG:
        r = query_render_svg(f, &c->qo, out);
        break;
    case QUERY_FORMAT_PPROF:
        r = query_render_pprof(p, &c->qo, out, err);
        break;
    default:
        hp_err_printf(err, "--format %s is not available for this command yet",
                      query_format_name(c->format));
        r = HP_EUSAGE;
        break;
    }
out:
    query_top_free(t);
    query_folded_free(f);
    return r;
}

/* export --raw: the dump as the node served it (a file: the file). */
static int export_raw(struct query_cli *c, const char *sel)
{
    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    struct stat st;
    void *data = NULL;
    size_t len = 0;
    int r, rc;
    if (stat(sel, &st) == 0 && S_ISREG(st.st_mode)) {
        char *d;
        r = hp_file_read(sel, SIZE_MAX, &d, &len, &err);
        data = d;
    } else {
        r = query_store_raw(c->db, sel, &data, &len, NULL, &err);
    }
    if (r < 0) {
        rc = query_cli_fail(c, err.len ? err.data : hp_strerror(r));
    } else {
        out.data = data; /* lent to the writer */
        out.len = len;
        rc = query_cli_write(&out);
    }
    free(data);
    hp_buf_release(&err);
    return rc;
}

static int run(int argc, char **argv, const char *prog, bool export_mode)
{
    struct query_cli c;
    bool raw = false;
    query_cli_init(&c, prog);
    /* export writes the whole profile: collapsed stacks unless told otherwise. */
    if (export_mode)
        c.format = QUERY_FORMAT_COLLAPSED;
    const struct hp_opt_usage u = {
        .prog = prog,
        .usage = export_mode ? "query export SNAP [--format collapsed|json|dot|svg|pprof] "
                               "[options]\nquery export SNAP --raw"
                             : "query top SNAP [--binary FILE | --symbols DIR] [--format F] "
                               "[options]",
        .text = export_mode ? "Writes one profile whole. SNAP is NODE, NODE@TIME, #ID or a "
                              "profile file.\n--raw writes the dump a stored snapshot was read "
                              "from, byte for byte as the\nnode served it (for jeprof, or a bug "
                              "report).\n"
                            : "The function table of one profile. SNAP is NODE, NODE@TIME, "
                              "#ID or a\nprofile file.\n",
    };
    const struct hp_opt opts[] = {
        QUERY_CLI_OPTS(&c, export_mode ? "collapsed|json|dot|svg|pprof"
                                       : "text|collapsed|json|dot|svg|pprof",
                       true),
        HP_OPT_BOOL(0, export_mode ? "raw" : NULL, &raw,
                    "the stored raw dump, byte for byte (no other option applies)"),
        HP_OPT_END(),
    };
    int rc, n = query_cli_parse(&c, &u, opts, argc, argv, &rc);
    if (n < 0)
        return rc;
    if (n != 1)
        return hp_opt_usage_error(&u, "one snapshot expected, got %d", n);
    const char *sel = argv[0];
    if (raw)
        return export_raw(&c, sel);

    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    struct profile *p = NULL;
    struct query_snapref ref;
    char title[256];
    int r = query_cli_load(&c, sel, &p, &ref, &err);
    if (r == 0) {
        /* Every output names the snapshot it shows: text, SVG and dot
         * headers and pprof comments through the title, JSON through
         * "snapshot". */
        c.qo.snap = &ref;
        if (!c.qo.title)
            c.qo.title = query_snapref_label(&ref, title, sizeof(title));
        r = render(&c, p, &out, &err);
    }
    if (r < 0)
        rc = query_cli_fail(&c, err.len ? err.data : hp_strerror(r));
    else
        rc = query_cli_write(&out);
    profile_free(p);
    hp_buf_release(&err);
    hp_buf_release(&out);
    return rc;
}

int query_cmd_top(int argc, char **argv)
{
    return run(argc, argv, "query top", false);
}

int query_cmd_export(int argc, char **argv)
{
    return run(argc, argv, "query export", true);
}
