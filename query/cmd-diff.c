/* `query diff A B`: B minus A for two snapshots or profile files, as a
 * function table and a stack table, collapsed two-column output or JSON. */
#include "query/cli.h"

#include <stdlib.h>
#include <string.h>

static int render(struct query_cli *c, const struct query_diff_opts *dopts, struct profile *pa,
                  struct profile *pb, const char *la, const char *lb, struct hp_buf *out,
                  struct hp_buf *err)
{
    struct query_folded *fa = NULL, *fb = NULL;
    struct query_diff *d = NULL;
    int r = query_fold(pa, &c->qo, &fa, err);
    if (r < 0)
        goto out;
    r = query_fold(pb, &c->qo, &fb, err);
    if (r < 0)
        goto out;
    if (pa->period != pb->period || pa->scaling != pb->scaling)
        fprintf(stderr,
                "%s: note: the two sides were sampled differently (period %llu and %llu); "
                "both are un-sampled before subtracting, noise figures account for each\n",
                c->prog, (unsigned long long)pa->period, (unsigned long long)pb->period);
    r = query_diff_build(fa, fb, dopts, &d);
    if (r < 0) {
        hp_err_printf(err, "bad diff options");
        goto out;
    }
    switch (c->format) {
    case QUERY_FORMAT_TEXT:
        r = query_render_diff_text(d, la, lb, &c->qo, out);
        break;
    case QUERY_FORMAT_COLLAPSED:
        r = query_render_diff_collapsed(d, out);
        break;
    case QUERY_FORMAT_JSON:
        r = query_render_diff_json(d, la, lb, &c->qo, out);
        break;
    case QUERY_FORMAT_SVG:
        /* The differential flame graph is drawn from both folded sides. */
        r = query_render_svg_diff(fa, fb, &c->qo, out);
        break;
    default:
        hp_err_printf(err, "--format %s is not available for diff (text, collapsed, json, svg)",
                      query_format_name(c->format));
        r = HP_EUSAGE;
        break;
    }
out:
    query_diff_free(d);
    query_folded_free(fa);
    query_folded_free(fb);
    return r;
}

int query_cmd_diff(int argc, char **argv)
{
    struct query_cli c;
    struct query_diff_opts dopts;
    query_cli_init(&c, "query diff");
    query_diff_opts_init(&dopts);
    const char *base = NULL;
    static const struct hp_opt_usage u = {
        .prog = "query diff",
        .usage = "query diff A B [--normalize] [--noise-sigmas K] "
                 "[--format text|collapsed|json|svg] [options]\n"
                 "query diff --base A B [options]",
        .text = "B minus A. A and B are NODE, NODE@TIME, #ID or profile files.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_BOOL(0, "normalize", &dopts.normalize,
                    "compare shares of each side's total, not bytes"),
        HP_OPT_DOUBLE(0, "noise-sigmas", &dopts.noise_sigmas, 0, 100, "K",
                      "deltas under K standard errors are marked ~ as\n"
                      "explainable by sampling alone"),
        HP_OPT_STRING(0, "base", &base, "A", "jeprof spelling: A is the base, the one argument B"),
        QUERY_CLI_OPTS(&c, "text|collapsed|json|svg", false),
        HP_OPT_END(),
    };
    int rc, nsel = query_cli_parse(&c, &u, opts, argc, argv, &rc);
    if (nsel < 0)
        return rc;
    const char *sel[2] = { nsel > 0 ? argv[0] : NULL, nsel > 1 ? argv[1] : NULL };
    const char *A = base ? base : sel[0], *B = base ? sel[0] : sel[1];
    if (nsel != (base ? 1 : 2))
        A = B = NULL;
    if (!A || !B)
        return hp_opt_usage_error(&u, "two snapshots expected (A B, or --base A B), got %d%s",
                                  nsel, base ? " and --base" : "");
    dopts.sample = c.qo.sample;

    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    struct profile *pa = NULL, *pb = NULL;
    struct query_snapref ra, rb;
    char la[384], lb[384], na[256], nb[256], title[640];
    int r = query_cli_load(&c, A, &pa, &ra, &err);
    if (r == 0)
        r = query_cli_load(&c, B, &pb, &rb, &err);
    if (r == 0) {
        /* Name the snapshots each side resolved to, not only the selector
         * given ("be-1@-3m" alone says nothing of which one it was). */
        query_snapref_label(&ra, na, sizeof(na));
        query_snapref_label(&rb, nb, sizeof(nb));
        if (ra.path)
            snprintf(la, sizeof(la), "%s", na);
        else
            snprintf(la, sizeof(la), "%s = %s", A, na);
        if (rb.path)
            snprintf(lb, sizeof(lb), "%s", nb);
        else
            snprintf(lb, sizeof(lb), "%s = %s", B, nb);
        c.qo.snap = &ra;
        c.qo.snap_b = &rb;
        if (!c.qo.title) {
            snprintf(title, sizeof(title), "%s minus %s", nb, na);
            c.qo.title = title;
        }
        r = render(&c, &dopts, pa, pb, la, lb, &out, &err);
    }
    if (r < 0)
        rc = query_cli_fail(&c, err.len ? err.data : hp_strerror(r));
    else
        rc = query_cli_write(&out);
    profile_free(pa);
    profile_free(pb);
    hp_buf_release(&err);
    hp_buf_release(&out);
    return rc;
}
