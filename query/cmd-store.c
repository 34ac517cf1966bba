/* The `query` commands that manage the store: import, reindex, nodes,
 * snapshots, retain; and query_store_load(), which turns a stored-snapshot
 * selector into a profile for every other command.
 *
 * These live in query/ rather than store/ because import and reindex need
 * the parsers (collector/ingest), which store/ must not include. */
#include "query/cli.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/ingest/ingest.h"
#include "store/store.h"

/* Largest file import reads whole (the parsers cap what they accept). */
#define IMPORT_MAX_BYTES ((size_t)2 << 30)

int query_store_load(const char *db, const char *selector, struct profile **ret,
                     struct hp_buf *err)
{
    struct store *s = NULL;
    struct hp_buf oerr = HP_BUF_INIT(0);
    int r = store_open(db, STORE_OPEN_READ, &s, &oerr);
    if (r == HP_ENOTFOUND) {
        hp_err_printf(err, "\"%s\": no such file, and no database at %s to look it up in",
                      selector, db);
        goto out;
    }
    if (r < 0) {
        hp_err_printf(err, "%s", oerr.data);
        goto out;
    }
    int64_t id;
    hp_buf_reset(&oerr);
    r = store_selector_resolve(s, selector, hp_wall_ms(), &id, &oerr);
    if (r == 0)
        r = store_snapshot_load(s, id, ret, &oerr);
    if (r < 0)
        hp_err_printf(err, "\"%s\": %s%s", selector, oerr.data ? oerr.data : hp_strerror(r),
                      r == HP_ENOTFOUND && selector[0] != '#' ? " (and no such file)" : "");
out:
    store_close(s);
    hp_buf_release(&oerr);
    return r;
}

/* ---- helpers ------------------------------------------------------------------ */

struct store_cli {
    const char *prog;
    const char *db;
};

static void store_cli_init(struct store_cli *c, const char *prog)
{
    c->prog = prog;
    c->db = store_path_default(NULL);
}

static int fail(const struct store_cli *c, const struct hp_buf *err, int r)
{
    fprintf(stderr, "%s: %s\n", c->prog, err->data ? err->data : hp_strerror(r));
    return 1;
}

static int open_db(const struct store_cli *c, unsigned flags, struct store **ret)
{
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(c->db, flags, ret, &err);
    if (r < 0)
        fail(c, &err, r);
    hp_buf_release(&err);
    return r;
}

static const char *fmt_bytes(double v, char *out, size_t n)
{
    return hp_fmt_bytes(v, out, n);
}

/* ---- import --------------------------------------------------------------------- */

struct import_file {
    char *path;
};

static int cmp_path(const void *a, const void *b)
{
    return strcmp(((const struct import_file *)a)->path, ((const struct import_file *)b)->path);
}

/* Expand FILE arguments: a folder (RisingWave and Databend write dumps into
 * one) contributes its regular files, sorted by name. */
static int collect_files(const struct store_cli *c, int argc, char **argv,
                         struct import_file **ret, size_t *ret_n)
{
    struct import_file *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "%s: %s: %s\n", c->prog, argv[i], strerror(errno));
            goto fail;
        }
        if (!S_ISDIR(sb.st_mode)) {
            v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
            v[n++].path = hp_xstrdup(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "%s: %s: %s\n", c->prog, argv[i], strerror(errno));
            goto fail;
        }
        size_t first = n;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char *path = hp_xasprintf("%s/%s", argv[i], de->d_name);
            if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
                v[n++].path = path;
            } else {
                free(path);
            }
        }
        closedir(d);
        qsort(v + first, n - first, sizeof(*v), cmp_path);
    }
    *ret = v;
    *ret_n = n;
    return 0;
fail:
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
    return -1;
}

static const char import_usage[] =
    "query import --node NAME [--time T] [--kind KIND] [--db PATH] FILE|DIR...";

int query_cmd_import(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query import");
    const char *node = NULL, *time_text = NULL, *kind = NULL;
    const char *binary = NULL, *symbols = NULL;
    int nfiles = 0;
    char **files = hp_xcalloc((size_t)argc + 1, sizeof(*files));
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n\n"
                   "Loads profile files (jemalloc, gperftools, pprof, collapsed; a folder\n"
                   "means every file in it) into the store as snapshots of NODE.\n\n"
                   "  --node NAME   the node the dumps came from (created if new)\n"
                   "  --time T      when they were taken (ISO 8601 or -6h); default: the\n"
                   "                dump's own time, else the file's modification time\n"
                   "  --kind KIND   doris, starrocks, databend, agent or url (new nodes)\n"
                   "  --binary FILE, --symbols DIR  where to find the profiled binaries\n"
                   "  --db PATH     database (default $HEAPFLEET_DB or heapfleet.db)\n",
                   import_usage);
            rc = 0;
            goto out;
        }
        if (strcmp(a, "--binary") == 0 || strcmp(a, "--symbols") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", c.prog, a);
                goto out;
            }
            *(a[2] == 'b' ? &binary : &symbols) = argv[++i];
            continue;
        }
        if ((strcmp(a, "--node") == 0 || strcmp(a, "--time") == 0 ||
             strcmp(a, "--kind") == 0 || strcmp(a, "--db") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", c.prog, a);
                goto out;
            }
            const char *v = argv[++i];
            if (a[2] == 'n')
                node = v;
            else if (a[2] == 't')
                time_text = v;
            else if (a[2] == 'k')
                kind = v;
            else
                c.db = v;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option %s\nusage: %s\n", c.prog, a, import_usage);
            goto out;
        }
        files[nfiles++] = argv[i];
    }
    if (!node || nfiles == 0) {
        fprintf(stderr, "usage: %s\n", import_usage);
        goto out;
    }
    int64_t fixed_time = 0;
    if (time_text && store_time_parse(time_text, hp_wall_ms(), &fixed_time) < 0) {
        fprintf(stderr,
                "%s: --time \"%s\": expected ISO 8601 (2026-11-22T09:00:00Z) or relative "
                "(-6h)\n",
                c.prog, time_text);
        goto out;
    }
    struct import_file *list = NULL;
    size_t n = 0;
    if (collect_files(&c, nfiles, files, &list, &n) < 0) {
        rc = 1;
        goto out;
    }
    struct store *s = NULL;
    rc = 1;
    if (open_db(&c, STORE_OPEN_WRITE, &s) < 0)
        goto out_list;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store_node_info ni = { .name = node, .kind = kind };
    int64_t node_id;
    if (store_node_upsert(s, &ni, &node_id, &err) < 0) {
        fail(&c, &err, HP_ESTORE);
        goto out_store;
    }
    bool tty = isatty(STDERR_FILENO);
    size_t ok = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        const char *path = list[i].path;
        char *data = NULL;
        size_t len = 0;
        struct profile *p = NULL;
        hp_buf_reset(&err);
        struct stat sb;
        int64_t mtime_ms = stat(path, &sb) == 0 ? (int64_t)sb.st_mtim.tv_sec * 1000 +
                                                      sb.st_mtim.tv_nsec / 1000000
                                                : hp_wall_ms();
        int r = hp_file_read(path, IMPORT_MAX_BYTES, &data, &len, &err);
        if (r < 0) {
            fprintf(stderr, "%s%s: %s\n", tty ? "\n" : "", c.prog, err.data);
            failed++;
            continue;
        }
        struct store_fetch_info fi = STORE_FETCH_INFO_INIT;
        fi.source = path;
        uint64_t t0 = hp_now_ns();
        r = ingest_parse(data, len, NULL, &p, &err);
        fi.parse_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        if (r == 0) {
            /* Stored call trees are symbolized once, here, so every later
             * query on them reads names without touching a binary. */
            t0 = hp_now_ns();
            (void)query_cli_symbolize(c.prog, binary, symbols, p, NULL);
            fi.symbolize_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        }
        int64_t at = fixed_time ? fixed_time
                     : (r == 0 && p->time_ns > 0) ? p->time_ns / 1000000
                                                  : mtime_ms;
        int64_t id = 0;
        if (r < 0) {
            /* Keep the bytes and the error: a parser fix can reindex it. */
            char *msg = hp_xasprintf("%s: %s", path, err.data ? err.data : hp_strerror(r));
            hp_buf_reset(&err);
            enum store_status st =
                r == HP_ETOOBIG ? STORE_STATUS_TOO_BIG : STORE_STATUS_PARSE_FAILED;
            int r2 = store_snapshot_attempt_record(s, node_id, at, st, msg, data, len, &fi,
                                                   NULL, 0, &id, &err);
            fprintf(stderr, "%s%s: %s%s\n", tty ? "\n" : "", c.prog, msg,
                    r2 == 0 ? " (raw bytes kept as a failed attempt)" : "");
            free(msg);
            failed++;
            if (r2 < 0) {
                fail(&c, &err, r2);
                free(data);
                break;
            }
        } else {
            r = store_snapshot_insert(s, node_id, at, p, data, len, &fi, NULL, 0, &id, &err);
            if (r < 0) {
                fprintf(stderr, "%s%s: %s: %s\n", tty ? "\n" : "", c.prog, path, err.data);
                failed++;
                profile_free(p);
                free(data);
                if (r == HP_ERR(ENOSPC) || r == HP_ECORRUPT || r == HP_ERR(EIO))
                    break; /* the next file would fail the same way */
                continue;
            }
            ok++;
            char tb[40], bb[32];
            double tot[PV_COUNT];
            profile_totals(p, tot);
            if (tty)
                fprintf(stderr, "\r[%zu/%zu] %s", i + 1, n, path);
            else if (n > 1)
                fprintf(stderr, "[%zu/%zu] ", i + 1, n);
            if (!tty || n == 1)
                fprintf(stderr, "%s -> #%lld %s@%s (%zu stacks, %s in use)\n", path,
                        (long long)id, node, store_time_format(at, tb, sizeof(tb)),
                        p->nsamples, fmt_bytes(tot[PV_INUSE_SPACE], bb, sizeof(bb)));
        }
        profile_free(p);
        free(data);
    }
    if (tty && n > 1)
        fprintf(stderr, "\n");
    if (n > 1 || failed)
        fprintf(stderr, "%s: %zu imported, %zu failed, into %s\n", c.prog, ok, failed, c.db);
    rc = failed ? 1 : 0;
out_store:
    hp_buf_release(&err);
    store_close(s);
out_list:
    for (size_t i = 0; i < n; i++)
        free(list[i].path);
    free(list);
out:
    free(files);
    return rc;
}

/* ---- reindex ------------------------------------------------------------------- */

struct id_list {
    int64_t *v;
    size_t n, cap;
};

static int collect_raw_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct id_list *l = ctx;
    if (si->raw_size > 0) {
        l->v = hp_xgrow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
        l->v[l->n++] = si->id;
    }
    return 0;
}

static int collect_nodes_cb(const struct store_node_row *row, void *ctx)
{
    struct id_list *l = ctx;
    l->v = hp_xgrow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
    l->v[l->n++] = row->id;
    return 0;
}

static const char reindex_usage[] = "query reindex [--db PATH] [SNAP...]";

int query_cmd_reindex(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query reindex");
    struct id_list ids = { 0 }, nodes = { 0 };
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *s = NULL;
    int rc = 2, nsel = 0;
    char **sel = hp_xcalloc((size_t)argc + 1, sizeof(*sel));
    const char *binary = NULL, *symbols = NULL;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--binary") == 0 || strcmp(argv[i], "--symbols") == 0) &&
            i + 1 < argc) {
            *(argv[i][2] == 'b' ? &binary : &symbols) = argv[i + 1];
            i++;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\nRe-parses the stored raw dumps of the snapshots named (NODE,\n"
                   "NODE@TIME, #ID; all snapshots with raw bytes when none is named) and\n"
                   "replaces what was derived from them. The raw bytes stay as they are.\n",
                   reindex_usage);
            rc = 0;
            goto out;
        }
        if (strcmp(argv[i], "--db") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: --db needs a value\n", c.prog);
                goto out;
            }
            c.db = argv[++i];
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "%s: unknown option %s\nusage: %s\n", c.prog, argv[i],
                    reindex_usage);
            goto out;
        }
        sel[nsel++] = argv[i];
    }
    rc = 1;
    if (open_db(&c, STORE_OPEN_WRITE, &s) < 0)
        goto out;
    int r;
    if (nsel == 0) {
        if ((r = store_nodes_list(s, collect_nodes_cb, &nodes, &err)) < 0) {
            fail(&c, &err, r);
            goto out;
        }
        for (size_t i = 0; i < nodes.n; i++)
            if ((r = store_snapshots_list(s, nodes.v[i], INT64_MIN, INT64_MAX, true,
                                          collect_raw_cb, &ids, &err)) < 0) {
                fail(&c, &err, r);
                goto out;
            }
    }
    for (int i = 0; i < nsel; i++) {
        int64_t id;
        /* Failed attempts count here (they are what a parser fix is for),
         * so #ID is taken as it is. */
        if (sel[i][0] == '#' && hp_parse_i64(sel[i] + 1, strlen(sel[i] + 1), &id) == 0) {
            ids.v = hp_xgrow(ids.v, &ids.cap, ids.n + 1, sizeof(*ids.v));
            ids.v[ids.n++] = id;
            continue;
        }
        if ((r = store_selector_resolve(s, sel[i], hp_wall_ms(), &id, &err)) < 0) {
            fail(&c, &err, r);
            goto out;
        }
        ids.v = hp_xgrow(ids.v, &ids.cap, ids.n + 1, sizeof(*ids.v));
        ids.v[ids.n++] = id;
    }
    size_t ok = 0, failed = 0;
    for (size_t i = 0; i < ids.n; i++) {
        void *raw = NULL;
        size_t len;
        struct profile *p = NULL;
        hp_buf_reset(&err);
        r = store_snapshot_raw(s, ids.v[i], &raw, &len, &err);
        if (r == 0)
            r = ingest_parse(raw, len, NULL, &p, &err);
        if (r == 0)
            (void)query_cli_symbolize(c.prog, binary, symbols, p, NULL);
        if (r == 0)
            r = store_snapshot_reindex(s, ids.v[i], p, &err);
        if (r < 0) {
            fprintf(stderr, "%s: #%lld: %s\n", c.prog, (long long)ids.v[i],
                    err.data ? err.data : hp_strerror(r));
            failed++;
        } else {
            ok++;
        }
        profile_free(p);
        free(raw);
    }
    fprintf(stderr, "%s: %zu reindexed, %zu failed\n", c.prog, ok, failed);
    rc = failed ? 1 : 0;
out:
    free(sel);
    free(ids.v);
    free(nodes.v);
    hp_buf_release(&err);
    store_close(s);
    return rc;
}

/* ---- nodes and snapshots ------------------------------------------------------- */

static int print_node_cb(const struct store_node_row *row, void *ctx)
{
    (void)ctx;
    char last[40] = "-", ok[40] = "-", bytes[32] = "-";
    if (row->last_at)
        store_time_format(row->last_at, last, sizeof(last));
    if (row->last_ok_id) {
        store_time_format(row->last_ok_at, ok, sizeof(ok));
        fmt_bytes(row->last_ok_totals[PV_INUSE_SPACE], bytes, sizeof(bytes));
    }
    printf("%-24s %-10s %-22s %6lld  %-20s %-20s %10s  %s%s%s\n", row->name,
           row->kind[0] ? row->kind : "-", row->address[0] ? row->address : "-",
           (long long)row->nsnapshots, last, ok, bytes,
           row->nsnapshots ? store_status_name(row->last_status) : "-",
           row->last_error[0] ? ": " : "", row->last_error);
    return 0;
}

static int simple_opts(struct store_cli *c, int argc, char **argv, const char *usage,
                       const char *help, char **ret_pos, int max_pos, int *ret_npos,
                       const char **since, bool *all)
{
    *ret_npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n\n%s", usage, help);
            return 0;
        }
        if (strcmp(a, "--db") == 0 || (since && strcmp(a, "--since") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: %s needs a value\n", c->prog, a);
                return 2;
            }
            if (a[2] == 'd')
                c->db = argv[++i];
            else
                *since = argv[++i];
            continue;
        }
        if (all && strcmp(a, "--all") == 0) {
            *all = true;
            continue;
        }
        if ((a[0] == '-' && a[1]) || *ret_npos >= max_pos) {
            fprintf(stderr, "%s: unexpected argument %s\nusage: %s\n", c->prog, a, usage);
            return 2;
        }
        ret_pos[(*ret_npos)++] = argv[i];
    }
    return -1;
}

int query_cmd_nodes(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query nodes");
    char *pos[1];
    int npos;
    int h = simple_opts(&c, argc, argv, "query nodes [--db PATH]",
                        "Lists the stored nodes with their last attempt and last profile.\n",
                        pos, 0, &npos, NULL, NULL);
    if (h >= 0)
        return h;
    struct store *s;
    if (open_db(&c, STORE_OPEN_READ, &s) < 0)
        return 1;
    struct hp_buf err = HP_BUF_INIT(0);
    printf("%-24s %-10s %-22s %6s  %-20s %-20s %10s  %s\n", "NODE", "KIND", "ADDRESS", "SNAPS",
           "LAST ATTEMPT", "LAST PROFILE", "INUSE", "STATUS");
    int r = store_nodes_list(s, print_node_cb, NULL, &err);
    if (r < 0)
        fail(&c, &err, r);
    hp_buf_release(&err);
    store_close(s);
    return r < 0 ? 1 : 0;
}

static int print_snap_cb(const struct store_snapshot_info *si, void *ctx)
{
    (void)ctx;
    char t[40], sp[32], raw[32], objs[32];
    store_time_format(si->taken_at, t, sizeof(t));
    bool ok = si->status == STORE_STATUS_OK;
    printf("%8lld  %-20s  %-12s %-10s %10s %10s %8lld %10s",
           (long long)si->id, t, store_status_name(si->status),
           ok ? profile_format_name(si->format) : "-",
           ok ? fmt_bytes(si->totals[PV_INUSE_SPACE], sp, sizeof(sp)) : "-",
           ok ? hp_fmt_count(si->totals[PV_INUSE_OBJECTS], objs, sizeof(objs)) : "-",
           (long long)si->nsamples, si->raw_size ? fmt_bytes((double)si->raw_size, raw,
                                                             sizeof(raw))
                                                 : "-");
    if (si->error[0])
        printf("  %s", si->error);
    printf("\n");
    return 0;
}

int query_cmd_snapshots(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query snapshots");
    const char *usage = "query snapshots NODE [--since T] [--all] [--db PATH]";
    char *pos[1];
    int npos;
    const char *since = NULL;
    bool all = false;
    int h = simple_opts(&c, argc, argv, usage,
                        "Lists a node's snapshots, oldest first.\n\n"
                        "  --since T   only from T on (ISO 8601 or relative like -7d)\n"
                        "  --all       include failed attempts\n"
                        "  --db PATH   database (default $HEAPFLEET_DB or heapfleet.db)\n",
                        pos, 1, &npos, &since, &all);
    if (h >= 0)
        return h;
    if (npos != 1) {
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    int64_t since_ms = INT64_MIN;
    if (since && store_time_parse(since, hp_wall_ms(), &since_ms) < 0) {
        fprintf(stderr, "%s: --since \"%s\": expected ISO 8601 or relative like -7d\n", c.prog,
                since);
        return 2;
    }
    struct store *s;
    if (open_db(&c, STORE_OPEN_READ, &s) < 0)
        return 1;
    struct hp_buf err = HP_BUF_INIT(0);
    int64_t node_id;
    int r = store_node_find(s, pos[0], &node_id, &err);
    if (r == 0) {
        printf("%8s  %-20s  %-12s %-10s %10s %10s %8s %10s\n", "ID", "TIME", "STATUS", "FORMAT",
               "INUSE", "OBJECTS", "STACKS", "RAW");
        r = store_snapshots_list(s, node_id, since_ms, INT64_MAX, all, print_snap_cb, NULL,
                                 &err);
    }
    if (r < 0)
        fail(&c, &err, r);
    hp_buf_release(&err);
    store_close(s);
    return r < 0 ? 1 : 0;
}

/* ---- retain ---------------------------------------------------------------------- */

int query_cmd_retain(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query retain");
    const char *usage = "query retain [--retain 90d] [--thin-after 7d] [--db PATH]";
    struct store_retain_policy pol = { .retain_s = 90 * 86400, .thin_after_s = 7 * 86400 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s\n\nDeletes snapshots older than --retain (0: keep all), keeps one\n"
                   "per node per day after --thin-after (0: no thinning), and returns\n"
                   "the space to the file system.\n",
                   usage);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: unexpected argument %s\nusage: %s\n", c.prog, a, usage);
            return 2;
        }
        const char *v = argv[++i];
        int64_t *dst = strcmp(a, "--retain") == 0       ? &pol.retain_s
                       : strcmp(a, "--thin-after") == 0 ? &pol.thin_after_s
                                                        : NULL;
        if (strcmp(a, "--db") == 0) {
            c.db = v;
            continue;
        }
        if (!dst) {
            fprintf(stderr, "%s: unknown option %s\nusage: %s\n", c.prog, a, usage);
            return 2;
        }
        if (hp_parse_duration(v, dst) < 0) {
            fprintf(stderr, "%s: %s \"%s\": expected a duration like 90d, 12h, 2w\n", c.prog, a,
                    v);
            return 2;
        }
    }
    struct store *s;
    if (open_db(&c, STORE_OPEN_WRITE, &s) < 0)
        return 1;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store_retain_result res;
    int r = store_retain(s, &pol, hp_wall_ms(), &res, &err);
    if (r < 0)
        fail(&c, &err, r);
    else
        printf("%lld snapshots deleted, %lld raw dumps freed, %lld pages returned\n",
               (long long)res.snapshots_deleted, (long long)res.raw_deleted,
               (long long)res.pages_freed);
    hp_buf_release(&err);
    store_close(s);
    return r < 0 ? 1 : 0;
}
