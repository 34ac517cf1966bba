/* `query top SNAP` and `query export SNAP --format F`: one profile, viewed
 * as a function table or exported whole. */
#include "query/cli.h"

#include <stdlib.h>
#include <string.h>

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

static int run(int argc, char **argv, const char *prog, bool export_mode)
{
    struct query_cli c;
    query_cli_init(&c, prog);
    const char *usage = export_mode
                            ? "query export SNAP --format collapsed|json|... [options]"
                            : "query top SNAP [--binary FILE | --symbols DIR] [--format F] "
                              "[options]";
    const char *sel = NULL;
    for (int i = 1; i < argc;) {
        int used;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\nSNAP is NODE, NODE@TIME, #ID or a profile file.\n\n%s", usage,
                   query_cli_common_help);
            return 0;
        }
        int h = query_cli_common_opt(&c, argc, argv, i, &used);
        if (h < 0)
            return 2;
        if (h == 1) {
            i += used;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "%s: unknown option %s\n", prog, argv[i]);
            return query_cli_usage(&c, usage);
        }
        if (sel) {
            fprintf(stderr, "%s: one snapshot expected, got \"%s\" and \"%s\"\n", prog, sel,
                    argv[i]);
            return 2;
        }
        sel = argv[i++];
    }
    if (!sel)
        return query_cli_usage(&c, usage);
    if (export_mode && c.format == QUERY_FORMAT_TEXT)
        c.format = QUERY_FORMAT_COLLAPSED;
    if (c.qo.top == (size_t)-1)
        c.qo.top = c.format == QUERY_FORMAT_TEXT ? 30 : 0;

    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    struct profile *p = NULL;
    int rc = 0;
    int r = query_cli_load(&c, sel, &p, &err);
    if (r == 0)
        r = render(&c, p, &out, &err);
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
