/* `query leaks`, `query trend`, `query fleet`, `query discrepancy`: series
 * and fleet analyses. They read stored snapshots once the store is wired
 * into query_cli_load; until then (and for offline use) they take profile
 * files:
 *
 *   --files F [F ...]  profile files (until the next option)
 *   --dir DIR          every file in DIR, by name (except .figures and .rules)
 *   --step DURATION    give the files times DURATION apart, in order, from the
 *                      first file's modification time, instead of their own
 *   --node NAME        the node all files belong to
 *
 * A file's node is --node or the command's NODE (the files are that node's),
 * else its folder's name when the files span several folders (one folder per
 * node), else its name without extension (fleet: one file per node). Figures for a file (tracker totals, RSS, jemalloc
 * statistics) come from "<file>.figures" next to it when present, in
 * Prometheus, bvar or "name value" lines; --figures FILE adds figures to
 * every snapshot. --since DURATION keeps snapshots at most that old, counted
 * back from the newest one. */
#include "query/cli.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 100000

struct ainput {
    struct query_cli c;
    const char **files;
    size_t nfiles, files_cap;
    const char *dir;
    const char *node;      /* --node or the positional NODE */
    const char *figures;   /* --figures FILE */
    const char *rules;     /* --rules FILE */
    const char *function;  /* --function RE */
    const char *label;     /* --label k=v (store only) */
    int64_t step_s, since_s;
    int64_t t0;            /* first file's time: --step counts from it */
    double min_rate;
    bool fleet;            /* trend --fleet */
    /* loaded */
    struct hp_arena arena;
    struct profile **profiles;
    struct query_folded **folded;
    struct query_snapshot *snaps;
    size_t n;
};

static void ainput_release(struct ainput *in)
{
    for (size_t i = 0; i < in->n; i++) {
        query_folded_free(in->folded ? in->folded[i] : NULL);
        profile_free(in->profiles ? in->profiles[i] : NULL);
    }
    free(in->profiles);
    free(in->folded);
    free(in->snaps);
    free(in->files);
    hp_arena_release(&in->arena);
}

static char *arena_dup(struct hp_arena *a, const char *s, size_t n)
{
    char *d = hp_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static void add_file(struct ainput *in, const char *path)
{
    in->files = hp_xgrow(in->files, &in->files_cap, in->nfiles + 1, sizeof(*in->files));
    in->files[in->nfiles++] = path;
}

static int list_dir(struct ainput *in, struct hp_buf *err)
{
    DIR *d = opendir(in->dir);
    if (!d) {
        hp_err_printf(err, "--dir %s: %s", in->dir, strerror(errno));
        return HP_ERR(errno);
    }
    struct dirent *de;
    size_t first = in->nfiles;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || ends_with(de->d_name, ".figures") ||
            ends_with(de->d_name, ".rules"))
            continue;
        char *p = hp_xasprintf("%s/%s", in->dir, de->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && in->nfiles < MAX_FILES)
            add_file(in, arena_dup(&in->arena, p, strlen(p)));
        free(p);
    }
    closedir(d);
    qsort(in->files + first, in->nfiles - first, sizeof(*in->files), str_cmp);
    return 0;
}

static const char *node_of(struct ainput *in, const char *path, bool many_dirs)
{
    if (in->node)
        return in->node;
    char *tmp = hp_xstrdup(path);
    const char *name;
    if (many_dirs) {
        name = arena_dup(&in->arena, basename(dirname(tmp)), strlen(basename(dirname(tmp))));
    } else {
        const char *b = basename(tmp);
        const char *dot = strchr(b, '.');
        name = arena_dup(&in->arena, b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
    }
    free(tmp);
    return name;
}

static int load_figures(struct ainput *in, const char *path, struct query_figure **ret,
                        size_t *ret_n, struct hp_buf *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, 16u << 20, &data, &len, err);
    if (r < 0)
        return r;
    r = query_figures_parse(data, len, path, &in->arena, ret, ret_n, err);
    free(data);
    return r;
}

/* Parse, fold and attach figures and times to every file. */
static int ainput_load(struct ainput *in, struct hp_buf *err)
{
    if (in->dir) {
        int r = list_dir(in, err);
        if (r < 0)
            return r;
    }
    if (!in->nfiles) {
        hp_err_printf(err, "no snapshots: reading stored snapshots from %s is not wired yet; "
                           "give profile files with --files F... or --dir DIR",
                      in->c.db);
        return HP_ENOTFOUND;
    }
    struct query_figure *common = NULL;
    size_t ncommon = 0;
    if (in->figures) {
        int r = load_figures(in, in->figures, &common, &ncommon, err);
        if (r < 0)
            return r;
    }
    bool many_dirs = false;
    for (size_t i = 1; i < in->nfiles && !many_dirs; i++) {
        char *a = hp_xstrdup(in->files[0]), *b = hp_xstrdup(in->files[i]);
        many_dirs = strcmp(dirname(a), dirname(b)) != 0;
        free(a);
        free(b);
    }
    in->profiles = hp_xcalloc(in->nfiles, sizeof(*in->profiles));
    in->folded = hp_xcalloc(in->nfiles, sizeof(*in->folded));
    in->snaps = hp_xcalloc(in->nfiles, sizeof(*in->snaps));
    for (size_t i = 0; i < in->nfiles; i++) {
        const char *path = in->files[i];
        struct stat st;
        if (stat(path, &st) != 0) {
            hp_err_printf(err, "%s: %s", path, strerror(errno));
            return HP_ERR(errno);
        }
        int r = query_cli_load(&in->c, path, &in->profiles[in->n], err);
        if (r < 0)
            return r;
        in->n++;
        r = query_fold(in->profiles[in->n - 1], &in->c.qo, &in->folded[in->n - 1], err);
        if (r < 0)
            return r;
        struct query_snapshot *s = &in->snaps[in->n - 1];
        s->node = node_of(in, path, many_dirs);
        if (i == 0)
            in->t0 = (int64_t)st.st_mtime;
        s->time_s = in->step_s ? in->t0 + (int64_t)i * in->step_s : (int64_t)st.st_mtime;
        s->folded = in->folded[in->n - 1];
        char *side = hp_xasprintf("%s.figures", path);
        struct query_figure *own = NULL;
        size_t nown = 0;
        if (access(side, R_OK) == 0 && (r = load_figures(in, side, &own, &nown, err)) < 0) {
            free(side);
            return r;
        }
        free(side);
        struct query_figure *all = hp_arena_alloc(&in->arena,
                                                  (nown + ncommon + 1) * sizeof(*all));
        memcpy(all, own, nown * sizeof(*all));
        memcpy(all + nown, common, ncommon * sizeof(*all));
        s->figures = all;
        s->nfigures = nown + ncommon;
    }
    /* in->snaps[0..nfiles) are the snapshots in use from here on; profiles
     * and folded stay index-aligned with the load order for freeing. */
    in->nfiles = in->n;
    if (in->since_s > 0) {
        int64_t newest = INT64_MIN;
        for (size_t i = 0; i < in->n; i++)
            newest = HP_MAX(newest, in->snaps[i].time_s);
        size_t k = 0;
        for (size_t i = 0; i < in->n; i++)
            if (in->snaps[i].time_s >= newest - in->since_s)
                in->snaps[k++] = in->snaps[i];
        in->nfiles = k;
    }
    return 0;
}

/* Options shared by the four commands. 1 handled, 0 not, <0 usage error. */
static int aopt(struct ainput *in, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    int used;
    if (strcmp(a, "--files") == 0) {
        int k = *i + 1;
        for (; k < argc && strncmp(argv[k], "--", 2) != 0; k++)
            if (in->nfiles < MAX_FILES)
                add_file(in, argv[k]);
        if (k == *i + 1) {
            fprintf(stderr, "%s: --files needs at least one file\n", in->c.prog);
            return HP_EUSAGE;
        }
        *i = k;
        return 1;
    }
    static const char *valued[] = { "--dir",      "--step",     "--since", "--node",
                                    "--figures",  "--rules",    "--function",
                                    "--min-rate", "--label" };
    for (size_t k = 0; k < HP_ARRAY_SIZE(valued); k++) {
        if (strcmp(a, valued[k]) != 0)
            continue;
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", in->c.prog, a);
            return HP_EUSAGE;
        }
        const char *v = argv[*i + 1];
        *i += 2;
        switch (k) {
        case 0:
            in->dir = v;
            return 1;
        case 1:
        case 2: {
            int64_t d;
            if (hp_parse_duration(v, &d) < 0 || d <= 0) {
                fprintf(stderr, "%s: %s expects a duration like 90s, 15m, 1h, 7d; got \"%s\"\n",
                        in->c.prog, a, v);
                return HP_EUSAGE;
            }
            *(k == 1 ? &in->step_s : &in->since_s) = d;
            return 1;
        }
        case 3:
            in->node = v;
            return 1;
        case 4:
            in->figures = v;
            return 1;
        case 5:
            in->rules = v;
            return 1;
        case 6:
            in->function = v;
            return 1;
        case 7:
            if (hp_parse_double(v, &in->min_rate) < 0 || in->min_rate < 0) {
                fprintf(stderr, "%s: --min-rate expects bytes per hour, got \"%s\"\n",
                        in->c.prog, v);
                return HP_EUSAGE;
            }
            return 1;
        case 8:
            in->label = v;
            return 1;
        default:
            return 0;
        }
    }
    int h = query_cli_common_opt(&in->c, argc, argv, *i, &used);
    if (h == 1)
        *i += used;
    return h;
}

static const char files_help[] =
    "  --files F [F ...]   profile files (until the next option)\n"
    "  --dir DIR           every profile file in DIR, in name order\n"
    "  --step DURATION     space the files DURATION apart in the order given\n"
    "                      (default: their modification times)\n"
    "  --node NAME         the node the files belong to\n"
    "  --since DURATION    only snapshots this recent (back from the newest)\n"
    "  --figures FILE      node figures (Prometheus/bvar text) for every snapshot;\n"
    "                      \"<profile>.figures\" next to a file adds its own\n";

/* Parse argv; positional arguments go to *pos (up to max). Returns 0, 1 for
 * --help printed, <0 on usage errors (printed). */
static int aparse(struct ainput *in, int argc, char **argv, const char *usage, const char *help,
                  const char **pos, size_t max, size_t *ret_npos)
{
    size_t npos = 0;
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n\n%s\n%s%s", usage, help, files_help, query_cli_common_help);
            return 1;
        }
        if (strcmp(a, "--fleet") == 0) {
            in->fleet = true;
            i++;
            continue;
        }
        int h = aopt(in, argc, argv, &i);
        if (h < 0)
            return h;
        if (h == 1)
            continue;
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option %s\nusage: %s\n", in->c.prog, a, usage);
            return HP_EUSAGE;
        }
        if (npos == max) {
            fprintf(stderr, "%s: unexpected argument \"%s\"\nusage: %s\n", in->c.prog, a, usage);
            return HP_EUSAGE;
        }
        pos[npos++] = a;
        i++;
    }
    *ret_npos = npos;
    return 0;
}

static void ainput_init(struct ainput *in, const char *prog)
{
    memset(in, 0, sizeof(*in));
    query_cli_init(&in->c, prog);
    hp_arena_init(&in->arena);
}

static int finish(struct ainput *in, int r, struct hp_buf *out, struct hp_buf *err)
{
    int rc;
    if (r < 0)
        rc = query_cli_fail(&in->c, err->len ? err->data : hp_strerror(r));
    else
        rc = query_cli_write(out);
    hp_buf_release(out);
    hp_buf_release(err);
    ainput_release(in);
    return rc;
}

/* ---- leaks ---- */

int query_cmd_leaks(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query leaks");
    const char *usage = "query leaks [NODE] [--since 7d] (--files F... | --dir DIR) [--step 1h] "
                        "[--min-rate BYTES_PER_HOUR] [--format text|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "Stacks and functions whose in-use bytes grow steadily across snapshots:\n"
                   "growth per hour (least squares), share of rising steps, rank correlation\n"
                   "with time, share of the node's growth, and growth while the node's\n"
                   "query/load trackers sat near zero.\n",
                   pos, 1, &npos);
    if (r != 0) {
        ainput_release(&in);
        return r > 0 ? 0 : 2;
    }
    if (npos && !in.node)
        in.node = pos[0]; /* the files are this node's */
    if (in.c.qo.top == (size_t)-1)
        in.c.qo.top = in.c.format == QUERY_FORMAT_TEXT ? 20 : 0;
    if ((r = ainput_load(&in, &err)) < 0)
        return finish(&in, r, &out, &err);
    struct query_leak_opts lo;
    query_leak_opts_init(&lo);
    lo.sample = in.c.qo.sample;
    lo.min_rate = in.min_rate;
    lo.top = in.c.qo.top;
    /* Group by node, in first-seen order. */
    const char **nodes = hp_xcalloc(in.nfiles + 1, sizeof(*nodes));
    size_t nn = 0;
    for (size_t i = 0; i < in.nfiles; i++) {
        size_t k;
        for (k = 0; k < nn; k++)
            if (strcmp(nodes[k], in.snaps[i].node) == 0)
                break;
        if (k == nn && (!npos || strcmp(pos[0], in.snaps[i].node) == 0))
            nodes[nn++] = in.snaps[i].node;
    }
    struct query_leaks **res = hp_xcalloc(nn + 1, sizeof(*res));
    struct query_snapshot *group = hp_xcalloc(in.nfiles + 1, sizeof(*group));
    size_t nres = 0;
    for (size_t k = 0; k < nn && r >= 0; k++) {
        size_t g = 0;
        for (size_t i = 0; i < in.nfiles; i++)
            if (strcmp(in.snaps[i].node, nodes[k]) == 0)
                group[g++] = in.snaps[i];
        struct hp_buf e2 = HP_BUF_INIT(0);
        int rr = query_leaks_build(group, g, &lo, &res[nres], &e2);
        if (rr == 0)
            nres++;
        else if (nn == 1)
            hp_err_printf(&err, "%.*s", (int)e2.len, e2.data), r = rr;
        else
            fprintf(stderr, "%s: skipping %s: %.*s\n", in.c.prog, nodes[k], (int)e2.len, e2.data);
        hp_buf_release(&e2);
    }
    if (r >= 0 && nn == 0) {
        hp_err_printf(&err, "no snapshots of node %s", npos ? pos[0] : "?");
        r = HP_ENOTFOUND;
    }
    if (r >= 0) {
        if (in.c.format == QUERY_FORMAT_JSON)
            r = query_render_leaks_json((const struct query_leaks *const *)res, nres, &lo, &out);
        else if (in.c.format == QUERY_FORMAT_TEXT)
            r = query_render_leaks_text((const struct query_leaks *const *)res, nres, &lo, &out);
        else {
            hp_err_printf(&err, "--format %s is not available for leaks (text, json)",
                          query_format_name(in.c.format));
            r = HP_EUSAGE;
        }
    }
    for (size_t k = 0; k < nres; k++)
        query_leaks_free(res[k]);
    free(res);
    free(group);
    free(nodes);
    return finish(&in, r, &out, &err);
}

/* ---- trend ---- */

int query_cmd_trend(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query trend");
    const char *usage = "query trend NODE|--fleet [--since 7d] [--function REGEX] "
                        "(--files F... | --dir DIR) [--format text|csv|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "A series per snapshot: heap total, the node's own figures (trackers,\n"
                   "RSS, jemalloc statistics) and the cumulative bytes of functions matching\n"
                   "--function (default: the five largest at the newest snapshot).\n",
                   pos, 1, &npos);
    if (r != 0) {
        ainput_release(&in);
        return r > 0 ? 0 : 2;
    }
    if (!npos && !in.fleet) {
        fprintf(stderr, "%s: name a NODE or give --fleet\nusage: %s\n", in.c.prog, usage);
        ainput_release(&in);
        return 2;
    }
    if (npos && !in.node)
        in.node = pos[0];
    if ((r = ainput_load(&in, &err)) < 0)
        return finish(&in, r, &out, &err);
    size_t k = 0;
    for (size_t i = 0; i < in.nfiles; i++)
        if (in.fleet || strcmp(in.snaps[i].node, pos[0]) == 0)
            in.snaps[k++] = in.snaps[i];
    if (!k) {
        hp_err_printf(&err, "no snapshots of node %s", pos[0]);
        return finish(&in, HP_ENOTFOUND, &out, &err);
    }
    struct query_trend_opts to;
    query_trend_opts_init(&to);
    to.sample = in.c.qo.sample;
    to.function = in.function;
    struct query_trend *t = NULL;
    r = query_trend_build(in.snaps, k, &to, &t, &err);
    if (r == 0)
        r = query_render_trend(t, in.c.format, &out, &err);
    query_trend_free(t);
    return finish(&in, r, &out, &err);
}

/* ---- fleet ---- */

int query_cmd_fleet(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query fleet");
    const char *usage = "query fleet [--since T] [--label k=v] (--files F... | --dir DIR) "
                        "[--min-bytes B] [--format text|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "Every node's latest snapshot against the fleet: for the heap total, each\n"
                   "function and each stack, the median across nodes and the nodes far above\n"
                   "it (>= 2x the median, >= 64 MiB more, >= 3 robust standard deviations;\n"
                   "--min-rate sets the byte floor here).\n",
                   pos, 0, &npos);
    if (r != 0) {
        ainput_release(&in);
        return r > 0 ? 0 : 2;
    }
    if (in.label) {
        hp_err_printf(&err, "--label needs node labels from the store, which is not wired yet");
        return finish(&in, HP_EUSAGE, &out, &err);
    }
    if (in.c.qo.top == (size_t)-1)
        in.c.qo.top = in.c.format == QUERY_FORMAT_TEXT ? 30 : 0;
    if ((r = ainput_load(&in, &err)) < 0)
        return finish(&in, r, &out, &err);
    /* Latest snapshot per node. */
    size_t k = 0;
    for (size_t i = 0; i < in.nfiles; i++) {
        size_t j;
        for (j = 0; j < k; j++)
            if (strcmp(in.snaps[j].node, in.snaps[i].node) == 0)
                break;
        if (j == k)
            in.snaps[k++] = in.snaps[i];
        else if (in.snaps[i].time_s >= in.snaps[j].time_s)
            in.snaps[j] = in.snaps[i];
    }
    struct query_fleet_opts fo;
    query_fleet_opts_init(&fo);
    fo.sample = in.c.qo.sample;
    fo.top = in.c.qo.top;
    if (in.min_rate > 0)
        fo.min_bytes = in.min_rate;
    struct query_fleet *fl = NULL;
    r = query_fleet_build(in.snaps, k, &fo, &fl, &err);
    if (r == 0) {
        if (in.c.format == QUERY_FORMAT_JSON)
            r = query_render_fleet_json(fl, &fo, &out);
        else if (in.c.format == QUERY_FORMAT_TEXT)
            r = query_render_fleet_text(fl, &fo, &out);
        else {
            hp_err_printf(&err, "--format %s is not available for fleet (text, json)",
                          query_format_name(in.c.format));
            r = HP_EUSAGE;
        }
    }
    query_fleet_free(fl);
    return finish(&in, r, &out, &err);
}

/* ---- discrepancy ---- */

int query_cmd_discrepancy(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query discrepancy");
    const char *usage = "query discrepancy NODE [--rules FILE] (--files PROFILE | --dir DIR) "
                        "[--figures FILE] [--format text|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "The node's memory trackers next to its heap profile, per category, and\n"
                   "the ladder RSS -> jemalloc resident -> allocated -> heap profile ->\n"
                   "tracked with each gap named. Built-in rules know Doris and StarRocks\n"
                   "figure names; --rules FILE overrides or extends them (query/INTERNALS.md).\n",
                   pos, 1, &npos);
    if (r != 0) {
        ainput_release(&in);
        return r > 0 ? 0 : 2;
    }
    if (!npos) {
        fprintf(stderr, "%s: name a NODE\nusage: %s\n", in.c.prog, usage);
        ainput_release(&in);
        return 2;
    }
    if (!in.node)
        in.node = pos[0];
    struct query_rules *rules = NULL;
    if ((r = query_rules_builtin(&rules, &err)) < 0)
        return finish(&in, r, &out, &err);
    if (in.rules) {
        char *data = NULL;
        size_t len = 0;
        r = hp_file_read(in.rules, 1u << 20, &data, &len, &err);
        if (r == 0)
            r = query_rules_parse(rules, data, len, in.rules, &err);
        free(data);
        if (r < 0) {
            query_rules_free(rules);
            return finish(&in, r, &out, &err);
        }
    }
    if ((r = ainput_load(&in, &err)) < 0) {
        query_rules_free(rules);
        return finish(&in, r, &out, &err);
    }
    const struct query_snapshot *latest = NULL;
    for (size_t i = 0; i < in.nfiles; i++)
        if (strcmp(in.snaps[i].node, pos[0]) == 0 &&
            (!latest || in.snaps[i].time_s >= latest->time_s))
            latest = &in.snaps[i];
    if (!latest) {
        hp_err_printf(&err, "no snapshot of node %s", pos[0]);
        r = HP_ENOTFOUND;
    }
    struct query_discrepancy *d = NULL;
    if (r >= 0)
        r = query_discrepancy_build(latest->folded, latest->figures, latest->nfigures, rules, &d,
                                    &err);
    if (r >= 0) {
        if (latest->nfigures == 0)
            fprintf(stderr, "%s: note: no figures for %s (give --figures FILE or a "
                            "\"<profile>.figures\" file); only heap bytes are shown\n",
                    in.c.prog, pos[0]);
        if (in.c.format == QUERY_FORMAT_JSON)
            r = query_render_discrepancy_json(d, pos[0], &out);
        else if (in.c.format == QUERY_FORMAT_TEXT)
            r = query_render_discrepancy_text(d, pos[0], &out);
        else {
            hp_err_printf(&err, "--format %s is not available for discrepancy (text, json)",
                          query_format_name(in.c.format));
            r = HP_EUSAGE;
        }
    }
    query_discrepancy_free(d);
    query_rules_free(rules);
    return finish(&in, r, &out, &err);
}
