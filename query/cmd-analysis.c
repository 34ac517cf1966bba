/* `query leaks`, `query trend`, `query fleet`, `query discrepancy`: series
 * and fleet analyses. They read stored snapshots (profiles as stored,
 * symbolized, with the statistics fetched alongside as figures) from --db,
 * or, for offline use, profile files:
 *
 *   --files F [F ...]  profile files (until the next option)
 *   --dir DIR          every file in DIR, by name (except .figures and .rules)
 *   --step DURATION    give the files times DURATION apart, in order, from the
 *                      first file's modification time, instead of their own
 *   --node NAME        the node all files belong to
 *
 * A file's node is --node or the command's NODE (the files are that node's),
 * else its folder's name when the files span several folders (one folder per
 * node) or for leaks and trend (a folder holds a node's series), else its
 * name without extension (fleet: one file per node). Figures for a file
 * (tracker totals, RSS, jemalloc statistics) come from "<file>.figures" next to it when present, in
 * Prometheus, bvar or "name value" lines; --figures FILE adds figures to
 * every snapshot. --since DURATION keeps snapshots at most that old: counted
 * back from now for stored snapshots, from the newest file for files.
 *
 * Leaks over the store read no profiles (query/stored.h, the path the web
 * API's /leaks takes too); the answer is the folded path's, bit for bit
 * (tests/query/test-stored.c compares them); HEAPFLEET_LEAKS_VIA=profiles
 * in the environment takes the folded path instead, for that comparison,
 * =samples reads every snapshot from its sample set, =uncached resolves
 * each node's stacks on their own (no stack cache, stored.h). */
#include "query/cli.h"
#include "query/stored.h"
#include "collector/ingest/ingest.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
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
    const char *kind;      /* --kind KIND (discrepancy's rules) */
    char store_kind[32];   /* the scope node's kind in the store, or "" */
    const char *function;  /* --function RE */
    const char *label;     /* --label k=v (store only) */
    int64_t step_s, since_s;
    int64_t t0;            /* first file's time: --step counts from it */
    double min_rate;
    unsigned jobs;         /* leaks: nodes analysed at once (--jobs; 0: one per core) */
    double min_bytes;      /* fleet: least excess over the median (--min-bytes) */
    bool fleet;            /* trend --fleet */
    const char *series_pick; /* trend --series */
    bool series;           /* leaks/trend: files of one folder are one node's series */
    /* What to read from the store when no files are given. */
    const char *scope_node; /* one node, or NULL for every node */
    bool latest_only;       /* each node's latest snapshot only */
    int64_t only_id;        /* > 0: that stored snapshot only (a NODE@TIME or #ID) */
    bool by_ids;            /* leaks: profiles are read per node (query_stored_fill) */
    /* leaks over a store: only the nodes are listed here; each node's
     * snapshots are listed by the worker that reads them (node_read). */
    bool per_node;
    struct stored_node {
        int64_t id;
        const char *name;
    } *nodes_in_scope;
    size_t nnodes_in_scope, nodes_in_scope_cap;
    int64_t since_ms;       /* --since as a time: snapshots taken from it on */
    unsigned stored_flags;  /* leaks: query_stored_fill's flags */
    bool stack_cache;       /* leaks: a stack cache per worker (stored.h) */
    /* The node figures the analysis reads (store_node_stats' filter), or
     * NULL for all of them. */
    store_stat_want_cb stat_want;
    void *stat_want_ctx;
    struct store *st;       /* open while by_ids */
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
    free(in->nodes_in_scope);
    store_close(in->st);
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
    DIR *d = hp_opendir(in->dir);
    if (!d) {
        hp_err_printf(err, "--dir %s: %s", in->dir, strerror(errno));
        return HP_ERR(errno);
    }
    struct dirent *de;
    size_t first = in->nfiles, skipped = 0;
    char *first_skipped = NULL;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || ends_with(de->d_name, ".figures") ||
            ends_with(de->d_name, ".rules"))
            continue;
        char *p = hp_xasprintf("%s/%s", in->dir, de->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && in->nfiles < MAX_FILES) {
            /* A database's log folder holds logs, .dot and .svg files too. */
            if (ingest_file_sniff(p) == 1)
                add_file(in, arena_dup(&in->arena, p, strlen(p)));
            else if (skipped++ == 0 || strcmp(de->d_name, first_skipped) < 0) {
                free(first_skipped);
                first_skipped = hp_xstrdup(de->d_name);
            }
        }
        free(p);
    }
    closedir(d);
    if (skipped)
        fprintf(stderr, "%s: --dir %s: skipped %zu files that are not profiles (%s%s)\n",
                in->c.prog, in->dir, skipped, first_skipped, skipped > 1 ? ", ..." : "");
    free(first_skipped);
    hp_qsort(in->files + first, in->nfiles - first, sizeof(*in->files), str_cmp);
    return 0;
}

static const char *node_of(struct ainput *in, const char *path, bool many_dirs)
{
    if (in->node)
        return in->node;
    char *tmp = hp_xstrdup(path);
    const char *name;
    if (many_dirs || in->series) {
        const char *b = basename(dirname(tmp)); /* dirname works in place: once */
        char *real = NULL, *tmp2 = NULL;
        if (!strcmp(b, ".") || !strcmp(b, "..") || !strcmp(b, "/")) {
            /* "a.heap" or "./a.heap": the folder's own name, not "." */
            tmp2 = hp_xstrdup(path);
            real = realpath(dirname(tmp2), NULL);
            if (real && strcmp(real, "/") != 0)
                b = basename(real);
        }
        if (!strcmp(b, ".") || !strcmp(b, "..") || !strcmp(b, "/")) {
            free(tmp2);
            tmp2 = hp_xstrdup(path);
            b = basename(tmp2); /* no folder name to use: the file's */
        }
        name = arena_dup(&in->arena, b, strlen(b));
        free(real);
        free(tmp2);
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

/* ---- stored snapshots ---- */

#define STORE_MAX_SNAPSHOTS 200000

struct pick {
    int64_t id, taken_at, node_id;
    const char *node;
    const double *totals; /* the snapshot's stored totals (PV_COUNT), or NULL */
};

struct pick_list {
    struct ainput *in;
    struct hp_arena *arena; /* the picks' names and totals */
    struct pick *v;
    size_t n, cap;
    int64_t since_ms;
    const char *label;
    size_t labelled; /* nodes that have the label */
    struct store *st;
    struct hp_buf *err;
};

static void pick_add(struct pick_list *pl, int64_t id, int64_t taken_at, int64_t node_id,
                     const char *node, const double *totals)
{
    if (pl->n >= STORE_MAX_SNAPSHOTS)
        return;
    double *tot = NULL;
    if (totals) {
        tot = hp_arena_alloc(pl->arena, PV_COUNT * sizeof(*tot));
        memcpy(tot, totals, PV_COUNT * sizeof(*tot));
    }
    /* A node's snapshots come together: its name is copied once. */
    const char *name = pl->n && strcmp(pl->v[pl->n - 1].node, node) == 0
                           ? pl->v[pl->n - 1].node
                           : arena_dup(pl->arena, node, strlen(node));
    pl->v = hp_xgrow(pl->v, &pl->cap, pl->n + 1, sizeof(*pl->v));
    pl->v[pl->n++] = (struct pick){ id, taken_at, node_id, name, tot };
}

static int snap_cb(const struct store_snapshot_info *row, void *ctx)
{
    struct pick_list *pl = ctx;
    if (row->status != STORE_STATUS_OK)
        return 0;
    if (pl->in->only_id > 0 && row->id != pl->in->only_id)
        return 0;
    if (pl->in->latest_only && pl->n && strcmp(pl->v[pl->n - 1].node, row->node) == 0)
        pl->n--; /* oldest first: keep replacing with the newer one */
    pick_add(pl, row->id, row->taken_at, row->node_id, row->node, row->totals);
    return 0;
}

/* " key=value " as a whole token of the node's labels. */
static bool has_label(const char *labels, const char *kv)
{
    size_t n = strlen(kv);
    for (const char *p = labels; (p = strstr(p, kv)) != NULL; p += n)
        if ((p == labels || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return true;
    return false;
}

static void node_in_scope_add(struct ainput *in, int64_t id, const char *name)
{
    in->nodes_in_scope = hp_xgrow(in->nodes_in_scope, &in->nodes_in_scope_cap,
                                  in->nnodes_in_scope + 1, sizeof(*in->nodes_in_scope));
    in->nodes_in_scope[in->nnodes_in_scope++] =
        (struct stored_node){ id, arena_dup(&in->arena, name, strlen(name)) };
}

static int node_cb(const struct store_node_row *row, void *ctx)
{
    struct pick_list *pl = ctx;
    if (pl->label && !has_label(row->labels, pl->label))
        return 0;
    pl->labelled++;
    if (pl->in->per_node) {
        node_in_scope_add(pl->in, row->id, row->name);
        return 0;
    }
    if (pl->in->latest_only) {
        if (row->last_ok_id > 0 && row->last_ok_at >= pl->since_ms)
            pick_add(pl, row->last_ok_id, row->last_ok_at, row->id, row->name, NULL);
        return 0;
    }
    return store_snapshots_list(pl->st, row->id, pl->since_ms, INT64_MAX, false, snap_cb, pl,
                                pl->err);
}

/* One node's statistics (store_node_stats), by snapshot id. */
struct node_figures {
    struct hp_arena *arena;
    int64_t *snap;             /* per figure: its snapshot */
    struct query_figure *fig;  /* names in arena */
    size_t n, cap, snap_cap;
    struct hp_strtab names;    /* in arena: a node reports the same few each time */
};

static int node_stat_cb(int64_t snapshot_id, const struct store_stat *stat, void *ctx)
{
    struct node_figures *nf = ctx;
    nf->snap = hp_xgrow(nf->snap, &nf->snap_cap, nf->n + 1, sizeof(*nf->snap));
    nf->fig = hp_xgrow(nf->fig, &nf->cap, nf->n + 1, sizeof(*nf->fig));
    nf->snap[nf->n] = snapshot_id;
    nf->fig[nf->n++] = (struct query_figure){
        hp_strtab_intern(&nf->names, stat->name, strlen(stat->name)), stat->value
    };
    return 0;
}

/* Snapshot id's figures among nf's (a copy in the arena); *ret_n of them. */
static struct query_figure *node_figures_of(const struct node_figures *nf, int64_t id,
                                            size_t *ret_n)
{
    /* Ids are positive: unsigned order is theirs. */
    size_t lo = hp_search_le_u64(nf->snap, nf->n, sizeof(*nf->snap), 0, (uint64_t)id - 1);
    size_t end = hp_search_le_u64(nf->snap, nf->n, sizeof(*nf->snap), 0, (uint64_t)id);
    struct query_figure *figs = hp_arena_alloc(nf->arena, (end - lo + 1) * sizeof(*figs));
    if (end > lo)
        memcpy(figs, nf->fig + lo, (end - lo) * sizeof(*figs));
    *ret_n = end - lo;
    return figs;
}

/* One node's picks v[0..n) as snapshots out[0..n), with figures from the
 * node's statistics over the picks' times in one statement (one a
 * snapshot was 8,760 round trips for a year of one node on PostgreSQL:
 * 1.4 s of a 1.6 s trend); unless in->by_ids, their profiles loaded and
 * folded into in->profiles and in->folded from *count on. *count: the
 * snapshots made. */
static int node_snaps(struct store *st, struct ainput *in, struct hp_arena *arena,
                      const struct pick *v, size_t n, struct query_snapshot *out, size_t *count,
                      struct hp_buf *err)
{
    struct node_figures nf = { .arena = arena };
    hp_strtab_init(&nf.names, arena);
    int64_t lo = v[0].taken_at, hi = lo;
    for (size_t i = 1; i < n; i++) {
        lo = HP_MIN(lo, v[i].taken_at);
        hi = HP_MAX(hi, v[i].taken_at);
    }
    int r = store_node_stats(st, v[0].node_id, lo, hi, in->stat_want, in->stat_want_ctx,
                             node_stat_cb, &nf, err);
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct query_folded *f = NULL;
        if (!in->by_ids) {
            if ((r = store_snapshot_load(st, v[i].id, &in->profiles[*count], err)) < 0)
                break;
            (*count)++;
            if ((r = query_fold(in->profiles[*count - 1], &in->c.qo, &in->folded[*count - 1],
                                err)) < 0)
                break;
            f = in->folded[*count - 1];
        } else {
            (*count)++; /* the profile is read later, a node at a time */
        }
        size_t nfig;
        struct query_figure *figs = node_figures_of(&nf, v[i].id, &nfig);
        out[i] = (struct query_snapshot){ .node = v[i].node,
                                          .id = v[i].id,
                                          .time_s = v[i].taken_at / 1000,
                                          .folded = f,
                                          .figures = figs,
                                          .nfigures = nfig,
                                          .totals = v[i].totals };
    }
    free(nf.snap);
    free(nf.fig);
    hp_strtab_release(&nf.names); /* the strings stay in arena */
    return r;
}

/* in->per_node: one node's stored snapshots in scope (ok, from
 * in->since_ms on) with their figures, names in arena, read over st (a
 * worker's connection). *ret_n may be 0. */
static int node_read(struct store *st, struct ainput *in, const struct stored_node *node,
                     struct hp_arena *arena, struct query_snapshot **ret, size_t *ret_n,
                     struct hp_buf *err)
{
    struct pick_list pl = { .in = in, .arena = arena, .err = err, .since_ms = in->since_ms };
    int r = store_snapshots_ok(st, node->id, in->since_ms, INT64_MAX, snap_cb, &pl, err);
    *ret = hp_xcalloc(pl.n + 1, sizeof(**ret));
    *ret_n = 0;
    if (r == 0 && pl.n)
        r = node_snaps(st, in, arena, pl.v, pl.n, *ret, ret_n, err);
    free(pl.v);
    return r;
}

static int no_snapshots(const struct ainput *in, struct hp_buf *err)
{
    hp_err_printf(err, "no stored snapshots%s%s%s in %s", in->scope_node ? " of " : "",
                  in->scope_node ? in->scope_node : "",
                  in->since_s ? " in the --since window" : "", in->c.db);
    return HP_ENOTFOUND;
}

static int kind_cb(const struct store_node_row *row, void *ctx)
{
    struct ainput *in = ctx;
    if (in->scope_node && strcmp(row->name, in->scope_node) == 0)
        snprintf(in->store_kind, sizeof(in->store_kind), "%s", row->kind);
    return 0;
}

/* Read the snapshots in scope from the database: profiles (stored
 * symbolized), folded with the command's options, and their statistics as
 * figures. --since counts back from now. With in->per_node, only the nodes
 * in scope (in->nodes_in_scope). */
static int load_store(struct ainput *in, struct hp_buf *err)
{
    struct store *st = NULL;
    struct pick_list pl = { .in = in, .arena = &in->arena, .err = err, .label = in->label };
    int r = store_open(in->c.db, STORE_OPEN_READ | STORE_OPEN_ONE_PASS, &st, err);
    if (r == HP_ENOTFOUND) {
        hp_buf_reset(err);
        hp_err_printf(err, "no database at %s (give --db PATH, or profile files with --files "
                           "F... or --dir DIR)",
                      in->c.db);
        return r;
    }
    if (r < 0)
        return r;
    pl.st = st;
    pl.since_ms = in->since_s > 0 ? hp_wall_ms() - in->since_s * 1000 : 0;
    in->since_ms = pl.since_ms;
    /* The listings and the statistics (a statement a node) in one read:
     * one view, and SQLite's locks taken once. */
    r = store_read_begin(st, err);
    if (r < 0) {
        /* said in err */
    } else if (in->scope_node) {
        int64_t node_id;
        r = store_node_find(st, in->scope_node, &node_id, err);
        if (r == HP_ENOTFOUND) {
            hp_buf_reset(err);
            hp_err_printf(err, "no node named \"%s\" in %s", in->scope_node, in->c.db);
            query_node_hint(st, in->scope_node, err);
        }
        if (r == 0 && in->per_node) {
            node_in_scope_add(in, node_id, in->scope_node);
        } else if (r == 0) {
            r = store_snapshots_list(st, node_id, pl.since_ms, INT64_MAX, false, snap_cb, &pl,
                                     err);
        }
        /* Its kind picks discrepancy's rules. */
        if (r == 0)
            r = store_nodes_list(st, kind_cb, in, err);
    } else {
        r = store_nodes_list(st, node_cb, &pl, err);
    }
    if (r == 0 && pl.n == 0 && pl.label && pl.labelled == 0) {
        hp_err_printf(err, "no node has the label %s in %s (labels are key=value words after "
                           "the address in the node list; `query nodes` shows them)",
                      pl.label, in->c.db);
        r = HP_ENOTFOUND;
    }
    if (r == 0 && pl.n == 0 && !in->per_node)
        r = no_snapshots(in, err);
    if (r == 0) {
        in->profiles = hp_xcalloc(pl.n, sizeof(*in->profiles));
        in->folded = hp_xcalloc(pl.n, sizeof(*in->folded));
        in->snaps = hp_xcalloc(pl.n, sizeof(*in->snaps));
    }
    /* Picks come node by node. */
    for (size_t i = 0, next; r == 0 && i < pl.n; i = next) {
        for (next = i; next < pl.n && pl.v[next].node_id == pl.v[i].node_id; next++)
            ;
        r = node_snaps(st, in, &in->arena, pl.v + i, next - i, in->snaps + i, &in->n, err);
    }
    in->nfiles = in->n;
    free(pl.v);
    store_read_end(st);
    if (in->by_ids && r == 0)
        in->st = st;
    else
        store_close(st);
    return r;
}

/* Parse, fold and attach figures and times to every file (or read the
 * store when no file is given). */
static int ainput_load(struct ainput *in, struct hp_buf *err)
{
    if (in->dir) {
        int r = list_dir(in, err);
        if (r < 0)
            return r;
    }
    if (!in->nfiles && !in->dir) {
        if (in->figures)
            fprintf(stderr, "%s: note: --figures applies to files; stored snapshots carry "
                            "their own figures\n",
                    in->c.prog);
        return load_store(in, err);
    }
    if (!in->nfiles) {
        hp_err_printf(err, "--dir %s: no profile files in it", in->dir);
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
        int r = query_cli_load(&in->c, path, &in->profiles[in->n], NULL, err);
        if (r < 0)
            return r;
        in->n++;
        r = query_fold(in->profiles[in->n - 1], &in->c.qo, &in->folded[in->n - 1], err);
        if (r < 0)
            return r;
        struct query_snapshot *s = &in->snaps[in->n - 1];
        s->node = node_of(in, path, many_dirs);
        int64_t name_time;
        query_cli_dump_name(path, &s->pid, &name_time);
        /* A time the dump's name states beats the file's mtime, which a
         * copy resets. */
        int64_t t_file = name_time > 0 ? name_time : (int64_t)st.st_mtime;
        if (i == 0)
            in->t0 = t_file;
        s->time_s = in->step_s ? in->t0 + (int64_t)i * in->step_s : t_file;
        s->folded = in->folded[in->n - 1];
        s->path = path;
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
        if (nown)
            memcpy(all, own, nown * sizeof(*all));
        if (ncommon)
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

static int files_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    struct ainput *in = o->value;
    if (in->nfiles < MAX_FILES)
        add_file(in, arg);
    return 0;
}

static int duration_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    int64_t d;
    if (hp_parse_duration(arg, &d) < 0 || d <= 0) {
        hp_err_printf(err, "expected a duration like 90s, 15m, 1h, 7d");
        return HP_EUSAGE;
    }
    *(int64_t *)o->value = d;
    return 0;
}

/* Parse argv with the options the four commands share; positional
 * arguments go to *pos (up to max). Returns 0, 1 for --help printed, <0 on
 * usage errors (printed). */
static int aparse(struct ainput *in, int argc, char **argv, const char *usage, const char *help,
                  const char **pos, size_t max, size_t *ret_npos)
{
    const struct hp_opt_usage u = { .prog = in->c.prog, .usage = usage, .text = help };
    /* Each command takes (and its --help lists) only its own analysis
     * options: the others have no name here. */
    const char *cmd = strrchr(in->c.prog, ' ') ? strrchr(in->c.prog, ' ') + 1 : in->c.prog;
#define ONLY(command, name) (strcmp(cmd, command) == 0 ? name : NULL)
    const struct hp_opt opts[] = {
        HP_OPT_GROUP("input:"),
        HP_OPT_CALLBACK_F(0, "files", in, "F [F ...]", "profile files (up to the next option)",
                          files_cb, NULL, HP_OPT_MULTI, 0),
        HP_OPT_STRING(0, "dir", &in->dir, "DIR", "every profile file in DIR, in name order"),
        HP_OPT_CALLBACK(0, "step", &in->step_s, "DURATION",
                        "space the files DURATION apart in the order given\n"
                        "(default: their modification times)",
                        duration_cb, NULL),
        HP_OPT_STRING(0, "node", &in->node, "NAME", "the node the files belong to"),
        HP_OPT_CALLBACK(0, "since", &in->since_s, "DURATION",
                        "only snapshots this recent (stored: back from now;\n"
                        "files: back from the newest)",
                        duration_cb, NULL),
        HP_OPT_STRING(0, "figures", &in->figures, "FILE",
                      "node figures (Prometheus/bvar text) for every snapshot;\n"
                      "\"<profile>.figures\" next to a file adds its own"),
        HP_OPT_GROUP("analysis:"),
        HP_OPT_BOOL(0, ONLY("trend", "fleet"), &in->fleet, "trend: every node, not one"),
        HP_OPT_STRING(0, ONLY("trend", "function"), &in->function, "RE", "trend: functions to follow"),
        HP_OPT_STRING(0, ONLY("trend", "series"), &in->series_pick, "LIST",
                      "trend: the text table's columns (default: heap, RSS,\n"
                      "allocated, tracked; all: every series; or names/numbers)"),
        HP_OPT_DOUBLE(0, ONLY("leaks", "min-rate"), &in->min_rate, 0, 1e18, "BYTES_PER_HOUR",
                      "leaks: least growth reported"),
        HP_OPT_UINT(0, ONLY("leaks", "jobs"), &in->jobs, 1, 64, "N",
                    "leaks: nodes of a store analysed at once, each over its\n"
                    "own connection (default: one per core, at most 8)"),
        HP_OPT_STRING(0, ONLY("fleet", "label"), &in->label, "K=V", "fleet: stored nodes with this label"),
        HP_OPT_DOUBLE(0, ONLY("fleet", "min-bytes"), &in->min_bytes, 0, 1e18, "B",
                      "fleet: least excess over the median (default 64 MiB)"),
        HP_OPT_STRING(0, ONLY("discrepancy", "rules"), &in->rules, "FILE",
                      "discrepancy: rules beside the built-in ones"),
        HP_OPT_STRING(0, ONLY("discrepancy", "kind"), &in->kind, "KIND",
                      "discrepancy: doris, starrocks, databend or risingwave\n"
                      "rules (default: told from the node's figures)"),
        QUERY_CLI_OPTS(&in->c, strcmp(cmd, "trend") == 0 ? "text|csv|json" : "text|json",
                       false),
        HP_OPT_END(),
    };
#undef ONLY
    int rc, n = query_cli_parse(&in->c, &u, opts, argc, argv, &rc);
    if (n < 0)
        return rc == 0 ? 1 : HP_EUSAGE;
    if ((size_t)n > max) {
        (void)hp_opt_usage_error(&u, "unexpected argument \"%s\"", argv[max]);
        return HP_EUSAGE;
    }
    for (int i = 0; i < n; i++)
        pos[i] = argv[i];
    *ret_npos = (size_t)n;
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

/* One node's leaks: its answer, or why there is none. */
struct leaks_node {
    struct query_leaks *res;
    int fill_rc;  /* < 0: reading the store failed (the command fails) */
    int build_rc; /* < 0: no answer for this node (too few snapshots...) */
    char *msg;
    size_t nsnaps; /* in->per_node: the snapshots read (none: not a word) */
    struct hp_arena arena; /* in->per_node: names in the answer */
};

/* Nodes analysed by workers, each over its own store connection: nodes
 * are independent, and `query leaks` over a fleet is one node after
 * another of reading series and fitting them (100 nodes x 720 hourly
 * snapshots: 3.6 s on one core). */
struct leaks_pool {
    struct ainput *in; /* read only while the workers run */
    const struct query_leak_opts *lo;
    const char **nodes;
    size_t nn;
    /* Node k's snapshots: in->snaps[member[off[k]] .. member[off[k + 1] - 1]];
     * with in->per_node, read by the worker (node_read). */
    const size_t *member, *off;
    atomic_size_t next;     /* the next node to take */
    struct leaks_node *out; /* per node */
};

/* Node k's snapshots (group: scratch for them), read over st (NULL: they
 * carry their folded profiles) and fitted. With in->per_node, the node's
 * list of snapshots and their figures are read here too, in the same read
 * transaction as its series: one view of the node, and listing a fleet's
 * snapshots (72,000 for 100 nodes x 720 h: a sixth of the command's wall
 * time on two cores) is shared among the workers. */
static void leaks_one(const struct leaks_pool *p, struct store *st,
                      struct query_stack_cache *cache, size_t k, struct query_snapshot *group,
                      struct leaks_node *ret)
{
    struct ainput *in = p->in;
    const struct query_leak_opts *lo = p->lo;
    size_t g = 0;
    struct hp_buf e = HP_BUF_INIT(0);
    struct query_snapshot *own = NULL;
    bool tx = false;
    if (in->per_node) {
        ret->fill_rc = store_read_begin(st, &e);
        tx = ret->fill_rc == 0;
        if (tx)
            ret->fill_rc = node_read(st, in, &in->nodes_in_scope[k], &ret->arena, &own, &g, &e);
        group = own;
        ret->nsnaps = g;
    } else {
        for (size_t i = p->off[k]; i < p->off[k + 1]; i++)
            group[g++] = in->snaps[p->member[i]];
    }
    struct query_stored *qs = NULL;
    if (ret->fill_rc == 0 && g && st)
        ret->fill_rc =
            query_stored_fill(st, &in->c.qo, group, g, in->stored_flags, cache, &qs, &e);
    if (ret->fill_rc == 0 && g)
        ret->build_rc = query_leaks_build(group, g, lo, &ret->res, &e);
    query_stored_free(qs);
    if (tx)
        store_read_end(st);
    free(own);
    if (e.len)
        ret->msg = hp_xstrndup(e.data, e.len);
    hp_buf_release(&e);
}

static void *leaks_worker(void *arg)
{
    struct leaks_pool *p = arg;
    const struct ainput *in = p->in;
    struct store *st = NULL;
    struct hp_buf e = HP_BUF_INIT(0);
    int orc = store_open(in->c.db, STORE_OPEN_READ | STORE_OPEN_ONE_PASS, &st, &e);
    struct query_snapshot *group = hp_xcalloc(in->nfiles + 1, sizeof(*group));
    struct query_stack_cache *cache = in->stack_cache ? query_stack_cache_new() : NULL;
    for (size_t k; (k = atomic_fetch_add(&p->next, 1)) < p->nn;) {
        if (orc < 0) {
            p->out[k] = (struct leaks_node){ .fill_rc = orc,
                                             .msg = hp_xstrndup(e.data ? e.data : "?",
                                                                e.data ? e.len : 1) };
            continue;
        }
        leaks_one(p, st, cache, k, group, &p->out[k]);
    }
    query_stack_cache_free(cache);
    free(group);
    store_close(st);
    hp_buf_release(&e);
    return NULL;
}

/* Every node's leaks into p->out: over the store by p->in->jobs workers
 * (0: one per core, at most 8), else (files, or one worker) here. */
static void leaks_pool_run(struct leaks_pool *p)
{
    struct ainput *in = p->in;
    p->out = hp_xcalloc(p->nn + 1, sizeof(*p->out));
    for (size_t k = 0; k < p->nn; k++)
        hp_arena_init(&p->out[k].arena);
    size_t jobs = in->jobs;
    if (!jobs) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = ncpu > 0 ? (size_t)HP_MIN(ncpu, 8) : 1;
    }
    jobs = HP_MIN(jobs, p->nn);
    pthread_t *tid = NULL;
    size_t started = 0;
    if (in->st && jobs > 1) {
        tid = hp_xcalloc(jobs, sizeof(*tid));
        atomic_init(&p->next, 0);
        for (; started < jobs; started++)
            if (pthread_create(&tid[started], NULL, leaks_worker, p) != 0)
                break; /* those started take every node */
    }
    if (!started) {
        struct query_snapshot *group = hp_xcalloc(in->nfiles + 1, sizeof(*group));
        struct query_stack_cache *cache =
            in->st && in->stack_cache ? query_stack_cache_new() : NULL;
        for (size_t k = 0; k < p->nn; k++)
            leaks_one(p, in->st, cache, k, group, &p->out[k]);
        query_stack_cache_free(cache);
        free(group);
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    free(tid);
}

/* A node of in->per_node's scope whose worker found no snapshot in it. */
static bool leaks_node_empty(const struct ainput *in, const struct leaks_node *ln)
{
    return in->per_node && ln->fill_rc == 0 && ln->nsnaps == 0;
}

static void leaks_pool_release(struct leaks_pool *p)
{
    for (size_t k = 0; k < p->nn; k++) {
        query_leaks_free(p->out[k].res);
        free(p->out[k].msg);
        hp_arena_release(&p->out[k].arena);
    }
    free(p->out);
}

static bool leak_figure_want(const char *name, void *ctx)
{
    return query_leak_figure_wanted(ctx, name);
}

int query_cmd_leaks(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query leaks");
    in.series = true;
    in.c.top_text = 20;
    const char *usage = "query leaks [NODE] [--since 7d] [--db PATH | --files F... | --dir DIR] "
                        "[--step 1h] "
                        "[--min-rate BYTES_PER_HOUR] [--jobs N] [--format text|json]";
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
    in.scope_node = npos ? pos[0] : NULL;
    const char *via = getenv("HEAPFLEET_LEAKS_VIA");
    in.by_ids = !(via && strcmp(via, "profiles") == 0);
    /* "samples": the store's path, every snapshot from its sample set. */
    in.stored_flags = via && strcmp(via, "samples") == 0 ? QUERY_STORED_SAMPLE_SETS : 0;
    /* "uncached": the store's path, each node's stacks resolved on their
     * own (no stack cache shared from node to node). */
    in.stack_cache = !(via && strcmp(via, "uncached") == 0);
    in.per_node = in.by_ids && !in.nfiles && !in.dir;
    struct query_leak_opts lo;
    query_leak_opts_init(&lo);
    /* A stored node's figures: only those leaks reads (a Doris or StarRocks
     * node reports dozens each time; reading them all took as long as the
     * rest of leaks over a store). */
    in.stat_want = leak_figure_want;
    in.stat_want_ctx = &lo;
    if ((r = ainput_load(&in, &err)) < 0)
        return finish(&in, r, &out, &err);
    lo.sample = in.c.qo.sample;
    lo.min_rate = in.min_rate;
    lo.top = in.c.qo.top;
    /* Group by node, in first-seen order: names interned (one pointer per
     * node), then the snapshots counted and placed per node. Comparing
     * each snapshot's name with every node's was 7 M strcmp calls for 100
     * nodes x 720 snapshots. */
    const char **nodes = hp_xcalloc(in.nfiles + in.nnodes_in_scope + 1, sizeof(*nodes));
    size_t nn = 0;
    for (size_t k = 0; k < in.nnodes_in_scope; k++)
        nodes[nn++] = in.nodes_in_scope[k].name; /* per_node: in the store's order */
    struct hp_strtab names;
    struct hp_map64 index; /* interned name -> node number + 1; 0: not asked for */
    hp_strtab_init(&names, &in.arena);
    hp_map64_init(&index);
    uint32_t *node_of_snap = hp_xmalloc((in.nfiles + 1) * sizeof(*node_of_snap));
    for (size_t i = 0; i < in.nfiles; i++) {
        const char *name = hp_strtab_intern(&names, in.snaps[i].node, strlen(in.snaps[i].node));
        uint32_t k;
        if (!hp_map64_get(&index, (uintptr_t)name, &k)) {
            k = 0;
            if (!npos || strcmp(pos[0], name) == 0) {
                nodes[nn++] = in.snaps[i].node;
                k = (uint32_t)nn;
            }
            (void)hp_map64_put(&index, (uintptr_t)name, k, &k);
        }
        node_of_snap[i] = k;
    }
    size_t *off = hp_xcalloc(nn + 2, sizeof(*off));
    size_t *member = hp_xmalloc((in.nfiles + 1) * sizeof(*member));
    for (size_t i = 0; i < in.nfiles; i++)
        if (node_of_snap[i])
            off[node_of_snap[i]]++; /* node k's count at off[k + 1] */
    for (size_t k = 1; k <= nn; k++)
        off[k] += off[k - 1];
    size_t *at = hp_xmalloc((nn + 1) * sizeof(*at)); /* next place per node */
    memcpy(at, off, (nn + 1) * sizeof(*at));
    for (size_t i = 0; i < in.nfiles; i++)
        if (node_of_snap[i])
            member[at[node_of_snap[i] - 1]++] = i;
    free(at);
    free(node_of_snap);
    hp_map64_release(&index);
    hp_strtab_release(&names);
    /* Every node's answer, then in node order (as one at a time would):
     * the first store failure ends the command, a node without enough
     * snapshots is skipped with a word (the answer when it is the only one). */
    struct leaks_pool pool = { .in = &in, .lo = &lo, .nodes = nodes, .nn = nn,
                               .member = member, .off = off };
    leaks_pool_run(&pool);
    /* per_node: nodes without a snapshot in scope are not part of the
     * answer, as when the snapshots were listed first. */
    size_t nwith = nn;
    for (size_t k = 0; k < nn; k++)
        nwith -= leaks_node_empty(&in, &pool.out[k]);
    struct query_leaks **res = hp_xcalloc(nn + 1, sizeof(*res));
    size_t nres = 0;
    for (size_t k = 0; k < nn && r >= 0; k++) {
        struct leaks_node *ln = &pool.out[k];
        if (leaks_node_empty(&in, ln)) {
            continue;
        } else if (ln->fill_rc < 0) {
            /* The store failed under us: no node's answer can be trusted. */
            hp_err_printf(&err, "%s", ln->msg ? ln->msg : "?");
            r = ln->fill_rc;
        } else if (ln->build_rc == 0) {
            res[nres++] = ln->res;
            ln->res = NULL;
        } else if (nwith == 1) {
            hp_err_printf(&err, "%s", ln->msg ? ln->msg : "?");
            r = ln->build_rc;
        } else {
            fprintf(stderr, "%s: skipping %s: %s\n", in.c.prog, nodes[k], ln->msg ? ln->msg : "?");
        }
    }
    free(member);
    free(off);
    if (r >= 0 && in.per_node && nwith == 0) {
        r = no_snapshots(&in, &err);
    } else if (r >= 0 && nn == 0) {
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
    leaks_pool_release(&pool); /* after rendering: the answers' names are in its arenas */
    free(nodes);
    return finish(&in, r, &out, &err);
}

/* ---- trend ---- */

int query_cmd_trend(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query trend");
    in.series = true;
    const char *usage = "query trend NODE|--fleet [--since 7d] [--function REGEX] [--series LIST] "
                        "[--db PATH | --files F... | --dir DIR] [--format text|csv|json]";
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
    in.scope_node = in.fleet ? NULL : pos[0];
    /* Stored snapshots: the function columns come from the store's
     * function totals, and no profile is loaded (a year of hourly
     * snapshots took 40 s and 19 GB loaded and folded). */
    const char *via = getenv("HEAPFLEET_TREND_VIA");
    in.by_ids = !in.nfiles && !in.dir && query_stored_trend_ok(&in.c.qo) &&
                !(via && strcmp(via, "profiles") == 0);
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
    struct query_stored *qs = NULL;
    if (in.st)
        r = query_stored_trend_functions(in.st, &in.c.qo, in.snaps, k, &to, &qs, &err);
    if (r == 0)
        r = query_trend_build(in.snaps, k, &to, &t, &err);
    if (r == 0 && in.c.format == QUERY_FORMAT_TEXT)
        r = query_render_trend_text(t, in.series_pick, &out, &err);
    else if (r == 0)
        r = query_render_trend(t, in.c.format, &out, &err);
    query_trend_free(t);
    query_stored_free(qs);
    return finish(&in, r, &out, &err);
}

/* ---- fleet ---- */

int query_cmd_fleet(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query fleet");
    const char *usage = "query fleet [--since T] [--label k=v] "
                        "[--db PATH | --files F... | --dir DIR] "
                        "[--min-bytes B] [--format text|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "Every node's latest snapshot against the fleet: for the heap total, each\n"
                   "function and each stack, the median across nodes and the nodes far above\n"
                   "it (>= 2x the median, >= --min-bytes more (default 64 MiB), and >= 3\n"
                   "robust standard deviations).\n",
                   pos, 0, &npos);
    if (r != 0) {
        ainput_release(&in);
        return r > 0 ? 0 : 2;
    }
    if (in.label && (in.nfiles || in.dir)) {
        hp_err_printf(&err, "--label selects stored nodes by their labels; files have none");
        return finish(&in, HP_EUSAGE, &out, &err);
    }
    in.latest_only = true;
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
    if (in.min_bytes > 0)
        fo.min_bytes = in.min_bytes;
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

/* A stored snapshot's selector (NODE@TIME, #ID) to its id (in->only_id)
 * and node name (out). */
static int resolve_selector(struct ainput *in, const char *sel, char *out, size_t outsz,
                            struct hp_buf *err)
{
    struct store *st = NULL;
    int r = store_open(in->c.db, STORE_OPEN_READ, &st, err);
    if (r < 0)
        return r;
    int64_t id;
    struct store_snapshot_info info;
    r = store_selector_resolve(st, sel, hp_wall_ms(), &id, err);
    if (r == 0)
        r = store_snapshot_info(st, id, &info, err);
    if (r == 0) {
        in->only_id = id;
        snprintf(out, outsz, "%s", info.node);
    }
    store_close(st);
    return r;
}

int query_cmd_discrepancy(int argc, char **argv)
{
    struct ainput in;
    ainput_init(&in, "query discrepancy");
    const char *usage = "query discrepancy NODE[@TIME]|#ID [--kind KIND] [--rules FILE] "
                        "[--db PATH | --files PROFILE | --dir DIR] "
                        "[--figures FILE] [--format text|json]";
    const char *pos[1];
    size_t npos = 0;
    struct hp_buf out = HP_BUF_INIT(0), err = HP_BUF_INIT(0);
    int r = aparse(&in, argc, argv, usage,
                   "The node's memory trackers next to its heap profile, per category, and\n"
                   "the ladder RSS -> jemalloc resident -> allocated -> heap profile ->\n"
                   "tracked with each gap named. Built-in rules per kind (Doris, StarRocks,\n"
                   "Databend, RisingWave; query/README.md); --rules FILE overrides or extends\n"
                   "them (query/INTERNALS.md).\n",
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
    /* NODE@TIME and #ID pick one stored snapshot, as top and diff take
     * them; a plain NODE is its latest. */
    char picked[128];
    const char *node = pos[0];
    if (!in.nfiles && !in.dir && (strchr(pos[0], '@') || pos[0][0] == '#')) {
        if ((r = resolve_selector(&in, pos[0], picked, sizeof(picked), &err)) < 0)
            return finish(&in, r, &out, &err);
        node = picked;
    }
    if (!in.node)
        in.node = node;
    in.scope_node = node;
    in.latest_only = true;
    if ((r = ainput_load(&in, &err)) < 0)
        return finish(&in, r, &out, &err);
    const struct query_snapshot *latest = NULL;
    for (size_t i = 0; i < in.nfiles; i++)
        if (strcmp(in.snaps[i].node, node) == 0 &&
            (!latest || in.snaps[i].time_s >= latest->time_s))
            latest = &in.snaps[i];
    if (!latest) {
        hp_err_printf(&err, "no snapshot of node %s", pos[0]);
        return finish(&in, HP_ENOTFOUND, &out, &err);
    }
    if (in.kind && (!query_rules_kind_detect(in.kind, NULL, 0) ||
                    strcmp(query_rules_kind_detect(in.kind, NULL, 0), in.kind) != 0)) {
        hp_err_printf(&err, "--kind \"%s\": expected doris, starrocks, databend or risingwave",
                      in.kind);
        return finish(&in, HP_EUSAGE, &out, &err);
    }
    /* The kind's own rules (--kind, else told from the figures), then the
     * rules file on top. */
    struct query_rules *rules = NULL;
    if ((r = query_rules_for_kind(in.kind ? in.kind : in.store_kind, latest->figures, latest->nfigures, &rules, &err)) < 0)
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
    struct query_discrepancy *d = NULL;
    if (r >= 0)
        r = query_discrepancy_build(latest->folded, latest->figures, latest->nfigures, rules, &d,
                                    &err);
    if (r >= 0) {
        d->snap = (struct query_snapref){ .id = latest->id, .time_ms = latest->time_s * 1000,
                                          .path = latest->path };
        snprintf(d->snap.node, sizeof(d->snap.node), "%s", latest->node ? latest->node : "");
        if (latest->nfigures == 0)
            fprintf(stderr, "%s: note: no figures for %s (give --figures FILE or a "
                            "\"<profile>.figures\" file); only heap bytes are shown\n",
                    in.c.prog, pos[0]);
        if (in.c.format == QUERY_FORMAT_JSON)
            r = query_render_discrepancy_json(d, node, &out);
        else if (in.c.format == QUERY_FORMAT_TEXT)
            r = query_render_discrepancy_text(d, node, &out);
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
