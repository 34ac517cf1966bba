/* A web data source over a folder of profile files, for development, demos
 * and tests: DIR/NODE/FILE is one snapshot of NODE taken at FILE's mtime.
 *
 * Optional per node: DIR/NODE/.kind (one word: doris, starrocks, ...) and
 * DIR/NODE/.error (the node's last failure in words; its presence marks the
 * node "failing"), so the UI's fleet states can be exercised without a
 * collector. Dotfiles are never snapshots. FILE.figures beside a profile
 * holds its node figures (Prometheus, bvar or `name value` lines, as
 * `query --files` reads them), which discrepancy and /metrics use.
 *
 * Invariants: entries (one per NODE/FILE ever seen) are only appended, so a
 * snapshot's id (index + 1) is stable while the source lives; a rescan runs
 * at most once a second; totals are computed by parsing the file and cached
 * until its size or mtime changes. One mutex guards everything; parsing runs
 * outside it so requests for different files proceed in parallel. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "collector/sym/sym.h"
#include "query/query.h"
#include "web/folder/folder.h"

#define DIR_MAX_NODES 100000
#define DIR_MAX_FILES 100000
#define DIR_MAX_FILE_BYTES ((size_t)1 << 30)
#define DIR_RESCAN_NS 1000000000ull

struct dentry {
    char *node, *file, *path;
    int64_t mtime_ms, size;
    bool have_totals;
    double total[PV_COUNT];
    const char *format; /* static string */
};

struct dnode {
    char *name;
    char kind[33];
    char *error;
    uint32_t *snaps; /* entry indexes, oldest first */
    size_t n, cap;
};

struct web_source_dir {
    char *dir;
    pthread_mutex_t mu;
    struct dentry *e;
    size_t ne, ecap;
    struct hp_map64 by_key; /* hash of "node/file" -> entry index */
    struct dnode *nodes;
    size_t nn;
    uint64_t scanned_ns;
    bool scanned;
    pthread_mutex_t sym_mu; /* guards sym; taken without mu held */
    struct symbolizer *sym; /* created on first use */
};

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':'))
            return false;
    }
    return true;
}

static void nodes_free(struct dnode *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(nodes[i].name);
        free(nodes[i].error);
        free(nodes[i].snaps);
    }
    free(nodes);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_snap_r(const void *a, const void *b, void *arg)
{
    const struct web_source_dir *d = arg;
    const struct dentry *x = &d->e[*(const uint32_t *)a], *y = &d->e[*(const uint32_t *)b];
    if (x->mtime_ms != y->mtime_ms)
        return x->mtime_ms < y->mtime_ms ? -1 : 1;
    return strcmp(x->file, y->file);
}

struct fileinfo {
    char *name;
    int64_t mtime_ms, size;
};

static int cmp_file(const void *a, const void *b)
{
    const struct fileinfo *x = a, *y = b;
    if (x->mtime_ms != y->mtime_ms)
        return x->mtime_ms < y->mtime_ms ? -1 : 1;
    return strcmp(x->name, y->name);
}

static uint32_t entry_for(struct web_source_dir *d, const char *node, const char *file)
{
    char *key = hp_xasprintf("%s/%s", node, file);
    uint64_t h = hp_hash_bytes(key, strlen(key), 0x68656170);
    uint32_t idx;
    if (hp_map64_put(&d->by_key, h, (uint32_t)d->ne, &idx) == 1) {
        free(key);
        return idx; /* a 64-bit hash collision between two paths is ignored */
    }
    d->e = hp_xgrow(d->e, &d->ecap, d->ne + 1, sizeof(*d->e));
    struct dentry *e = &d->e[d->ne];
    memset(e, 0, sizeof(*e));
    e->node = hp_xstrdup(node);
    e->file = hp_xstrdup(file);
    e->path = hp_xasprintf("%s/%s", d->dir, key);
    free(key);
    return (uint32_t)d->ne++;
}

/* Read a small text file's first line into out (NUL-terminated). */
static bool read_line(const char *path, char *out, size_t outsz)
{
    char *data = NULL;
    size_t len = 0;
    if (hp_file_read(path, 4096, &data, &len, NULL) < 0)
        return false;
    size_t n = strcspn(data, "\r\n");
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, data, n);
    out[n] = '\0';
    free(data);
    return n > 0;
}

/* Rescan the folder (mutex held). */
static int scan(struct web_source_dir *d, struct hp_buf *err)
{
    uint64_t now = hp_now_ns();
    if (d->scanned && now - d->scanned_ns < DIR_RESCAN_NS)
        return 0;
    DIR *top = hp_opendir(d->dir);
    if (!top) {
        hp_err_printf(err, "%s: %s", d->dir, strerror(errno));
        return HP_ERR(errno);
    }
    char **names = NULL;
    size_t nnames = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(top)) != NULL && nnames < DIR_MAX_NODES) {
        if (!name_ok(de->d_name))
            continue;
        char *p = hp_xasprintf("%s/%s", d->dir, de->d_name);
        struct stat st;
        bool isdir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
        free(p);
        if (!isdir)
            continue;
        names = hp_xgrow(names, &cap, nnames + 1, sizeof(*names));
        names[nnames++] = hp_xstrdup(de->d_name);
    }
    closedir(top);
    hp_qsort(names, nnames, sizeof(*names), cmp_str);
    struct dnode *nodes = hp_xcalloc(nnames + 1, sizeof(*nodes));
    for (size_t i = 0; i < nnames; i++) {
        struct dnode *nd = &nodes[i];
        nd->name = names[i];
        char *ndir = hp_xasprintf("%s/%s", d->dir, nd->name);
        char *kp = hp_xasprintf("%s/.kind", ndir);
        if (!read_line(kp, nd->kind, sizeof(nd->kind)))
            memcpy(nd->kind, "dir", 4);
        free(kp);
        char *ep = hp_xasprintf("%s/.error", ndir);
        char ebuf[512];
        if (read_line(ep, ebuf, sizeof(ebuf)))
            nd->error = hp_xstrdup(ebuf);
        free(ep);
        /* Collect first, then register in time order, so that new files get
         * ids in the order they were taken (readdir order is arbitrary). */
        struct fileinfo *files = NULL;
        size_t nfiles = 0, fcap = 0;
        DIR *sub = hp_opendir(ndir);
        while (sub && (de = readdir(sub)) != NULL && nfiles < DIR_MAX_FILES) {
            size_t dl = strlen(de->d_name);
            if (de->d_name[0] == '.' || (dl > 8 && strcmp(de->d_name + dl - 8, ".figures") == 0))
                continue;
            char *fp = hp_xasprintf("%s/%s", ndir, de->d_name);
            struct stat st;
            bool ok = stat(fp, &st) == 0 && S_ISREG(st.st_mode);
            free(fp);
            if (!ok)
                continue;
            files = hp_xgrow(files, &fcap, nfiles + 1, sizeof(*files));
            files[nfiles].name = hp_xstrdup(de->d_name);
            files[nfiles].mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
            files[nfiles].size = (int64_t)st.st_size;
            nfiles++;
        }
        if (nfiles)
            hp_qsort(files, nfiles, sizeof(*files), cmp_file);
        for (size_t k = 0; k < nfiles; k++) {
            uint32_t idx = entry_for(d, nd->name, files[k].name);
            struct dentry *e = &d->e[idx];
            if (e->mtime_ms != files[k].mtime_ms || e->size != files[k].size)
                e->have_totals = false;
            e->mtime_ms = files[k].mtime_ms;
            e->size = files[k].size;
            nd->snaps = hp_xgrow(nd->snaps, &nd->cap, nd->n + 1, sizeof(*nd->snaps));
            nd->snaps[nd->n++] = idx;
            free(files[k].name);
        }
        free(files);
        if (sub)
            closedir(sub);
        free(ndir);
        if (nd->n)
            qsort_r(nd->snaps, nd->n, sizeof(*nd->snaps), cmp_snap_r, d);
    }
    free(names);
    nodes_free(d->nodes, d->nn);
    d->nodes = nodes;
    d->nn = nnames;
    d->scanned = true;
    d->scanned_ns = now;
    return 0;
}

static struct dnode *find_node(struct web_source_dir *d, const char *name)
{
    size_t lo = 0, hi = d->nn;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(d->nodes[mid].name, name);
        if (c == 0)
            return &d->nodes[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int parse_entry(const char *path, struct profile **ret, struct hp_buf *err)
{
    struct ingest_limits lim;
    ingest_limits_default(&lim);
    lim.max_bytes = DIR_MAX_FILE_BYTES;
    return ingest_parse_file(path, &lim, ret, err);
}

static void store_totals(struct web_source_dir *d, uint32_t idx, const struct profile *p,
                         int64_t mtime, int64_t size)
{
    struct dentry *e = &d->e[idx];
    if (e->mtime_ms != mtime || e->size != size)
        return; /* changed while we parsed: leave it for the next look */
    profile_totals(p, e->total);
    e->format = profile_format_name(p->format);
    e->have_totals = true;
}

/* Make sure the listed entries have totals: parse outside the lock. A file
 * that fails to parse keeps NaN totals (the node page shows the gap). */
static void ensure_totals(struct web_source_dir *d, const uint32_t *idx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&d->mu);
        struct dentry *e = &d->e[idx[i]];
        bool need = !e->have_totals;
        char *path = need ? hp_xstrdup(e->path) : NULL;
        int64_t mt = e->mtime_ms, sz = e->size;
        pthread_mutex_unlock(&d->mu);
        if (!need)
            continue;
        struct profile *p = NULL;
        if (parse_entry(path, &p, NULL) == 0) {
            pthread_mutex_lock(&d->mu);
            store_totals(d, idx[i], p, mt, sz);
            pthread_mutex_unlock(&d->mu);
            profile_free(p);
        }
        free(path);
    }
}

static void info_fill(const struct web_source_dir *d, uint32_t idx, struct hp_arena *a,
                      struct web_snapshot_info *s)
{
    const struct dentry *e = &d->e[idx];
    memset(s, 0, sizeof(*s));
    s->id = (int64_t)idx + 1;
    s->node = hp_arena_strdup(a, e->node);
    s->time_ms = e->mtime_ms;
    s->format = e->format ? e->format : NULL;
    s->raw_bytes = e->size;
    for (int k = 0; k < PV_COUNT; k++)
        s->total[k] = e->have_totals ? e->total[k] : NAN;
    s->fig.rss = s->fig.je_allocated = s->fig.je_active = s->fig.je_resident = NAN;
    s->fig.je_metadata = s->fig.je_retained = s->fig.tracker_total = NAN;
    s->fig.symbolized_ratio = NAN;
}

/* ---- ops ------------------------------------------------------------------------- */

static int dir_list_nodes(void *ctx, struct hp_arena *a, struct web_node_info **ret,
                          size_t *ret_n, struct hp_buf *err)
{
    struct web_source_dir *d = ctx;
    pthread_mutex_lock(&d->mu);
    int r = scan(d, err);
    size_t n = d->nn;
    uint32_t *latest = hp_xcalloc(n + 1, sizeof(*latest));
    size_t nl = 0;
    for (size_t i = 0; r == 0 && i < n; i++)
        if (d->nodes[i].n)
            latest[nl++] = d->nodes[i].snaps[d->nodes[i].n - 1];
    pthread_mutex_unlock(&d->mu);
    if (r < 0) {
        free(latest);
        return r;
    }
    ensure_totals(d, latest, nl);
    pthread_mutex_lock(&d->mu);
    n = HP_MIN(n, d->nn); /* a rescan in between may have changed the list */
    struct web_node_info *out = hp_arena_alloc(a, (n + 1) * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        const struct dnode *nd = &d->nodes[i];
        struct web_node_info *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->name = hp_arena_strdup(a, nd->name);
        o->kind = hp_arena_strdup(a, nd->kind);
        o->nsnapshots = (int64_t)nd->n;
        o->error = nd->error ? hp_arena_strdup(a, nd->error) : NULL;
        o->status = nd->error ? "failing" : nd->n ? "ok" : "never";
        if (nd->n) {
            o->has_latest = true;
            info_fill(d, nd->snaps[nd->n - 1], a, &o->latest);
            o->last_attempt_ms = o->latest.time_ms;
        }
    }
    pthread_mutex_unlock(&d->mu);
    free(latest);
    *ret = out;
    *ret_n = n;
    return 0;
}

static int dir_list_snapshots(void *ctx, const char *node, int64_t since_ms, size_t limit,
                              struct hp_arena *a, struct web_snapshot_info **ret, size_t *ret_n,
                              struct hp_buf *err)
{
    struct web_source_dir *d = ctx;
    pthread_mutex_lock(&d->mu);
    int r = scan(d, err);
    struct dnode *nd = r == 0 ? find_node(d, node) : NULL;
    if (r == 0 && !nd) {
        hp_err_printf(err, "no node \"%s\"", node);
        r = HP_ENOTFOUND;
    }
    uint32_t *sel = NULL;
    size_t n = 0;
    if (r == 0) {
        size_t first = 0;
        while (first < nd->n && d->e[nd->snaps[first]].mtime_ms < since_ms)
            first++;
        if (limit && nd->n - first > limit)
            first = nd->n - limit;
        n = nd->n - first;
        sel = hp_xcalloc(n + 1, sizeof(*sel));
        if (n)
            memcpy(sel, nd->snaps + first, n * sizeof(*sel));
    }
    pthread_mutex_unlock(&d->mu);
    if (r < 0)
        return r;
    ensure_totals(d, sel, n);
    struct web_snapshot_info *out = hp_arena_alloc(a, (n + 1) * sizeof(*out));
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < n; i++)
        info_fill(d, sel[i], a, &out[i]);
    pthread_mutex_unlock(&d->mu);
    free(sel);
    *ret = out;
    *ret_n = n;
    return 0;
}

/* FILE.figures, when present and readable, as the snapshot's raw figures;
 * a file that does not parse is ignored (the profile is still served). */
static void figures_fill(const char *path, struct hp_arena *a, struct web_snapshot_info *info)
{
    char *fp = hp_xasprintf("%s.figures", path), *text = NULL;
    size_t len = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    struct query_figure *figs = NULL;
    size_t n = 0;
    if (access(fp, R_OK) == 0 && hp_file_read(fp, 1u << 20, &text, &len, &err) == 0 &&
        query_figures_parse(text, len, fp, a, &figs, &n, &err) == 0 && n) {
        info->raw = hp_arena_alloc(a, n * sizeof(*info->raw));
        for (size_t i = 0; i < n; i++)
            info->raw[i] = (struct web_raw_figure){ figs[i].name, figs[i].value };
        info->nraw = n;
    }
    free(text);
    free(fp);
    hp_buf_release(&err);
}

/* The entry a selector names: its index, path (malloc'd), time and size;
 * HP_ENOTFOUND (err says why) when none. */
static int entry_find(struct web_source_dir *d, const struct web_selector *sel,
                      int64_t *ret_idx, char **ret_path, int64_t *ret_mtime, int64_t *ret_size,
                      struct hp_buf *err)
{
    pthread_mutex_lock(&d->mu);
    int r = scan(d, err);
    int64_t idx = -1;
    if (r == 0 && sel->id) {
        if (sel->id <= (int64_t)d->ne)
            idx = sel->id - 1;
        else
            hp_err_printf(err, "no snapshot #%lld", (long long)sel->id);
    } else if (r == 0) {
        struct dnode *nd = find_node(d, sel->node);
        if (!nd) {
            hp_err_printf(err, "no node \"%s\"", sel->node);
        } else {
            for (size_t i = nd->n; i-- > 0;)
                if (!sel->at_ms || d->e[nd->snaps[i]].mtime_ms <= sel->at_ms) {
                    idx = nd->snaps[i];
                    break;
                }
            if (idx < 0)
                hp_err_printf(err, "node \"%s\" has no snapshot %s", sel->node,
                              sel->at_ms ? "at or before that time" : "yet");
        }
    }
    if (r == 0 && idx >= 0) {
        *ret_idx = idx;
        *ret_path = hp_xstrdup(d->e[idx].path);
        *ret_mtime = d->e[idx].mtime_ms;
        *ret_size = d->e[idx].size;
    }
    pthread_mutex_unlock(&d->mu);
    return r < 0 ? r : idx < 0 ? HP_ENOTFOUND : 0;
}

static int dir_load(void *ctx, const struct web_selector *sel, enum profile_value rank,
                    struct hp_arena *a, struct web_snapshot_info *ret_info,
                    struct profile **ret_profile, struct hp_buf *err)
{
    (void)rank; /* a folder's files are parsed whole (the parser has its caps) */
    struct web_source_dir *d = ctx;
    int64_t idx, mt, sz;
    char *path;
    int r = entry_find(d, sel, &idx, &path, &mt, &sz, err);
    if (r < 0)
        return r;
    struct profile *p = NULL;
    struct hp_buf perr = HP_BUF_INIT(0);
    r = parse_entry(path, &p, &perr);
    if (r < 0) {
        hp_err_printf(err, "snapshot #%lld (%s): %s", (long long)idx + 1, path,
                      perr.len ? perr.data : hp_strerror(r));
        hp_buf_release(&perr);
        free(path);
        return r == HP_ENOTFOUND ? HP_ECORRUPT : r;
    }
    hp_buf_release(&perr);
    /* Files are raw dumps: symbolize with the binaries their maps name on
     * this host, as `query top FILE` does, so both front ends agree. One
     * symbolizer for the source, used under its own lock: sym.h allows one
     * thread at a time, it caches what it read for the next request, and
     * symbolizers running in parallel on several worker threads corrupted
     * the heap (seen as "free(): invalid next size" with three concurrent
     * requests for one raw dump; tests/web e2e and web-api cover it). */
    pthread_mutex_lock(&d->sym_mu);
    if (!d->sym)
        d->sym = sym_new(NULL);
    (void)sym_profile(d->sym, p, NULL, NULL);
    pthread_mutex_unlock(&d->sym_mu);
    pthread_mutex_lock(&d->mu);
    store_totals(d, (uint32_t)idx, p, mt, sz);
    info_fill(d, (uint32_t)idx, a, ret_info);
    pthread_mutex_unlock(&d->mu);
    figures_fill(path, a, ret_info);
    free(path);
    *ret_profile = p;
    return 0;
}

/* A folder's files are raw dumps: the file's bytes. */
static int dir_raw(void *ctx, const struct web_selector *sel, struct hp_arena *a,
                   struct web_snapshot_info *ret_info, void **ret_data, size_t *ret_len,
                   struct hp_buf *err)
{
    struct web_source_dir *d = ctx;
    int64_t idx, mt, sz;
    char *path, *data;
    size_t len;
    int r = entry_find(d, sel, &idx, &path, &mt, &sz, err);
    if (r < 0)
        return r;
    r = hp_file_read(path, DIR_MAX_FILE_BYTES, &data, &len, err);
    free(path);
    if (r < 0)
        return r;
    pthread_mutex_lock(&d->mu);
    info_fill(d, (uint32_t)idx, a, ret_info);
    pthread_mutex_unlock(&d->mu);
    *ret_data = data;
    *ret_len = len;
    return 0;
}

const struct web_source_ops web_source_dir_ops = {
    .list_nodes = dir_list_nodes,
    .list_snapshots = dir_list_snapshots,
    .load_snapshot = dir_load,
    .raw_dump = dir_raw,
    .symbolization = NULL,
    .metrics = NULL,
};

int web_source_dir_new(const char *dir, struct web_source_dir **ret, struct hp_buf *err)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        hp_err_printf(err, "%s: not a folder", dir);
        return HP_ENOTFOUND;
    }
    struct web_source_dir *d = hp_xcalloc(1, sizeof(*d));
    d->dir = hp_xstrdup(dir);
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->sym_mu, NULL);
    hp_map64_init(&d->by_key);
    *ret = d;
    return 0;
}

void web_source_dir_free(struct web_source_dir *d)
{
    if (!d)
        return;
    nodes_free(d->nodes, d->nn);
    for (size_t i = 0; i < d->ne; i++) {
        free(d->e[i].node);
        free(d->e[i].file);
        free(d->e[i].path);
    }
    free(d->e);
    hp_map64_release(&d->by_key);
    sym_free(d->sym);
    pthread_mutex_destroy(&d->sym_mu);
    pthread_mutex_destroy(&d->mu);
    free(d->dir);
    free(d);
}
