/* `query diff A B`: B minus A for two snapshots or profile files, as a
 * function table and a stack table, collapsed two-column output or JSON. */
#include "query/cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "query diff A B [--normalize] [--noise-sigmas K] [--format text|collapsed|json] [options]";

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
        /* Hook: the differential flame graph is drawn from both folded
         * sides, query_render_svg_diff(fa, fb, &c->qo, out), once the
         * renderer lands. */
    default:
        hp_err_printf(err, "--format %s is not available for diff yet (text, collapsed, json)",
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
    const char *sel[2] = { NULL, NULL }, *base = NULL;
    int nsel = 0;
    for (int i = 1; i < argc;) {
        int used;
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n\nB minus A. A and B are NODE, NODE@TIME, #ID or profile files.\n\n"
                   "  --normalize         compare shares of each side's total, not bytes\n"
                   "  --noise-sigmas K    deltas under K standard errors are marked ~ as\n"
                   "                      explainable by sampling alone (default 2)\n"
                   "  --base A            jeprof spelling: A is the base, the one argument B\n%s",
                   usage, query_cli_common_help);
            return 0;
        }
        if (strcmp(a, "--normalize") == 0) {
            dopts.normalize = true;
            i++;
            continue;
        }
        if (strcmp(a, "--noise-sigmas") == 0 || strcmp(a, "--base") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", c.prog, a);
                return 2;
            }
            if (a[2] == 'b') {
                base = argv[i + 1];
            } else if (hp_parse_double(argv[i + 1], &dopts.noise_sigmas) < 0 ||
                       dopts.noise_sigmas < 0 || dopts.noise_sigmas > 100) {
                fprintf(stderr, "%s: --noise-sigmas expects a number from 0 to 100, got \"%s\"\n",
                        c.prog, argv[i + 1]);
                return 2;
            }
            i += 2;
            continue;
        }
        int h = query_cli_common_opt(&c, argc, argv, i, &used);
        if (h < 0)
            return 2;
        if (h == 1) {
            i += used;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option %s\n", c.prog, a);
            return query_cli_usage(&c, usage);
        }
        if (nsel == 2) {
            fprintf(stderr, "%s: two snapshots expected, got a third: \"%s\"\n", c.prog, a);
            return 2;
        }
        sel[nsel++] = a;
        i++;
    }
    const char *A = base ? base : sel[0], *B = base ? sel[0] : sel[1];
    if (nsel != (base ? 1 : 2))
        A = B = NULL;
    if (!A || !B)
        return query_cli_usage(&c, usage);
    dopts.sample = c.qo.sample;
    if (c.qo.top == (size_t)-1)
        c.qo.top = c.format == QUERY_FORMAT_TEXT ? 30 : 0;

    struct hp_buf err = HP_BUF_INIT(0), out = HP_BUF_INIT(0);
    struct profile *pa = NULL, *pb = NULL;
    int rc = 0;
    int r = query_cli_load(&c, A, &pa, &err);
    if (r == 0)
        r = query_cli_load(&c, B, &pb, &err);
    if (r == 0)
        r = render(&c, &dopts, pa, pb, A, B, &out, &err);
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
