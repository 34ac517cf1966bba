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

struct node_hint {
    const char *name;
    size_t best;
    char best_name[128];
};

static int node_hint_cb(const struct store_node_row *row, void *ctx)
{
    struct node_hint *h = ctx;
    size_t d = hp_edit_distance(h->name, row->name);
    if (d < h->best) {
        h->best = d;
        snprintf(h->best_name, sizeof(h->best_name), "%s", row->name);
    }
    return 0;
}

void query_node_hint(struct store *s, const char *name, struct hp_buf *err)
{
    /* Close means a third of the name or less, and at most 3 edits:
     * "be71" suggests "be-71", "db-1" does not suggest "be-17". */
    size_t len = strlen(name);
    struct node_hint h = { .name = name, .best = len / 3 < 3 ? len / 3 + 1 : 4 };
    struct hp_buf ignore = HP_BUF_INIT(0);
    if (store_nodes_list(s, node_hint_cb, &h, &ignore) == 0 && h.best_name[0])
        (void)(err && hp_buf_printf(err, " (did you mean \"%s\"?)", h.best_name));
    hp_buf_release(&ignore);
}

/* The stored snapshot `selector` names, as a profile (ret_p) or as the raw
 * dump it was read from (ret_raw). */
static int store_read(const char *db, const char *selector, struct profile **ret_p,
                      void **ret_raw, size_t *ret_raw_len, struct query_snapref *ret_ref,
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
    struct hp_selector hs;
    hp_buf_reset(&oerr);
    /* A raw dump is kept for failed attempts too (#ID only: the other
     * selectors name profiles, and the store resolves them). */
    if (!ret_p && hp_selector_parse(selector, hp_wall_ms(), &hs, NULL) == 0 && hs.id > 0) {
        id = hs.id;
        r = 0;
    } else {
        r = store_selector_resolve(s, selector, hp_wall_ms(), &id, &oerr);
    }
    bool named = r == 0; /* the selector names a snapshot */
    struct store_snapshot_info si;
    if (r == 0 && (ret_p || ret_ref))
        r = store_snapshot_info(s, id, &si, &oerr);
    if (r == 0)
        r = ret_p ? store_snapshot_load(s, id, ret_p, &oerr)
                  : store_snapshot_raw(s, id, ret_raw, ret_raw_len, &oerr);
    if (r == 0 && ret_ref) {
        memset(ret_ref, 0, sizeof(*ret_ref));
        ret_ref->id = id;
        snprintf(ret_ref->node, sizeof(ret_ref->node), "%s", si.node);
        ret_ref->time_ms = si.taken_at;
    }
    bool hint = r == HP_ENOTFOUND && !named && selector[0] != '#';
    if (r < 0) {
        /* The selector's own errors name it already. */
        const char *why = oerr.data ? oerr.data : hp_strerror(r);
        size_t sl = strlen(selector);
        bool says = why[0] == '"' && strncmp(why + 1, selector, sl) == 0 && why[sl + 1] == '"';
        hp_err_printf(err, "%s%s%s%s", says ? "" : "\"", says ? "" : selector,
                      says ? "" : "\": ", why);
        if (hint && err)
            (void)hp_buf_puts(err, " (and no such file)");
    }
    if (hint) {
        int64_t node_id;
        char node[128];
        size_t n = strcspn(selector, "@");
        snprintf(node, sizeof(node), "%.*s", (int)(n < sizeof(node) ? n : sizeof(node) - 1),
                 selector);
        hp_buf_reset(&oerr);
        if (store_node_find(s, node, &node_id, &oerr) == HP_ENOTFOUND)
            query_node_hint(s, node, err);
    }
out:
    store_close(s);
    hp_buf_release(&oerr);
    return r;
}

int query_store_load(const char *db, const char *selector, struct profile **ret,
                     struct query_snapref *ret_ref, struct hp_buf *err)
{
    return store_read(db, selector, ret, NULL, NULL, ret_ref, err);
}

int query_store_raw(const char *db, const char *selector, void **ret_data, size_t *ret_len,
                    struct query_snapref *ret_ref, struct hp_buf *err)
{
    return store_read(db, selector, NULL, ret_data, ret_len, ret_ref, err);
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
        DIR *d = hp_opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "%s: %s: %s\n", c->prog, argv[i], strerror(errno));
            goto fail;
        }
        size_t first = n, skipped = 0;
        char *first_skipped = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            char *path = hp_xasprintf("%s/%s", argv[i], de->d_name);
            bool reg = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
            if (reg && ingest_file_sniff(path) == 1) {
                v = hp_xgrow(v, &cap, n + 1, sizeof(*v));
                v[n++].path = path;
            } else {
                /* A Doris log folder holds be.INFO, .dot and .svg files beside
                 * the dumps: skipped, not stored as failed attempts. */
                if (reg && (skipped++ == 0 || strcmp(de->d_name, first_skipped) < 0)) {
                    free(first_skipped);
                    first_skipped = hp_xstrdup(de->d_name);
                }
                free(path);
            }
        }
        closedir(d);
        if (skipped)
            fprintf(stderr, "%s: %s: skipped %zu files that are not profiles (%s%s)\n", c->prog,
                    argv[i], skipped, first_skipped, skipped > 1 ? ", ..." : "");
        free(first_skipped);
        hp_qsort(v + first, n - first, sizeof(*v), cmp_path);
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

int query_cmd_import(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query import");
    const char *node = NULL, *time_text = NULL, *kind = NULL;
    const char *binary = NULL, *symbols = NULL;
    static const struct hp_opt_usage u = {
        .prog = "query import",
        .usage = "query import --node NAME [--time T] [--kind KIND] [--db PATH] FILE|DIR...",
        .text = "Loads profile files (jemalloc, gperftools, pprof, collapsed; a folder\n"
                "means every file in it) into the store as snapshots of NODE.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "node", &node, "NAME", "the node the dumps came from (created if new)"),
        HP_OPT_STRING(0, "time", &time_text, "T",
                      "when they were taken (ISO 8601 or -6h); default: the\n"
                      "dump's own time, else the file's modification time"),
        HP_OPT_STRING(0, "kind", &kind, "KIND",
                      "doris, starrocks, databend, agent or url (new nodes)"),
        HP_OPT_STRING(0, "binary", &binary, "FILE", "the profiled main executable"),
        HP_OPT_STRING(0, "symbols", &symbols, "DIR", "binaries and debug files"),
        HP_OPT_STRING(0, "db", &c.db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_END(),
    };
    int rc;
    int nfiles = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (nfiles < 0)
        return rc;
    char **files = argv;
    if (!node || nfiles == 0)
        return hp_opt_usage_error(&u, "%s", !node ? "--node NAME is required" : "no files given");
    rc = 2;
    size_t bad_at;
    if (hp_name_check(node, strlen(node), &bad_at) < 0) {
        fprintf(stderr,
                "%s: --node: byte %zu is not allowed (expected 1 to %d letters, digits and "
                "._:-)\n",
                c.prog, bad_at + 1, HP_NAME_MAX);
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
    size_t ok = 0, failed = 0, dups = 0, same_time = 0;
    int64_t first_at = 0;
    char first_tb[40];
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
        int64_t dup_id, dup_at;
        r = store_snapshot_find_dump(s, node_id, data, len, &dup_id, &dup_at, &err);
        if (r == 1) {
            /* The same bytes again (a second run of the same import): one
             * snapshot, or a fit would see two points where there is one. */
            char tb[40];
            fprintf(stderr, "%s%s: %s: already stored as #%lld %s@%s (same content); skipped\n",
                    tty ? "\n" : "", c.prog, path, (long long)dup_id, node,
                    store_time_format(dup_at, tb, sizeof(tb)));
            dups++;
            free(data);
            continue;
        }
        if (r < 0) {
            fail(&c, &err, r);
            free(data);
            failed++;
            break;
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
            (void)query_cli_symbolize(c.prog, binary, symbols, false, p, NULL);
            fi.symbolize_ms = (int64_t)((hp_now_ns() - t0) / 1000000);
        }
        /* The time: --time, else what the dump says (a pprof's time_nanos,
         * then a time its name states, as Doris' jeheap_dump.<time>), else
         * the file's mtime. The pid its name states goes with it as the
         * figure proc_pid, so leaks can tell this process from the next. */
        int64_t name_pid, name_time;
        query_cli_dump_name(path, &name_pid, &name_time);
        struct store_stat pid_stat = { "proc_pid", "count", (double)name_pid };
        size_t nstats = name_pid > 0;
        int64_t at = fixed_time ? fixed_time
                     : (r == 0 && p->time_ns > 0) ? p->time_ns / 1000000
                     : name_time > 0              ? name_time * 1000
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
            r = store_snapshot_insert(s, node_id, at, p, data, len, &fi, nstats ? &pid_stat : NULL,
                                      nstats, &id, &err);
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
            if (ok == 1)
                first_at = at;
            same_time += at == first_at;
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
    if (n > 1 || failed || dups)
        fprintf(stderr, "%s: %zu imported, %zu failed, %zu already stored (same content), into %s\n",
                c.prog, ok, failed, dups, c.db);
    if (same_time > 1)
        fprintf(stderr,
                "%s: note: %zu files got the same time %s (no time in the dumps, same mtime); "
                "leaks and trends need elapsed time: import them with --time each\n",
                c.prog, same_time, store_time_format(first_at, first_tb, sizeof(first_tb)));
    rc = failed ? 1 : 0;
out_store:
    hp_buf_release(&err);
    store_close(s);
out_list:
    for (size_t i = 0; i < n; i++)
        free(list[i].path);
    free(list);
out:
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

struct reindex_ctx {
    const char *prog, *binary, *symbols;
};

/* The profile a raw dump gives now: parsed and symbolized as `query` does. */
static int reindex_derive_cb(void *ctx, int64_t id, const void *raw, size_t len,
                             struct profile **ret, struct hp_buf *err)
{
    struct reindex_ctx *c = ctx;
    int r = ingest_parse(raw, len, NULL, ret, err);
    if (r == 0)
        (void)query_cli_symbolize(c->prog, c->binary, c->symbols, false, *ret, NULL);
    return r;
}

int query_cmd_reindex(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query reindex");
    struct id_list ids = { 0 }, nodes = { 0 };
    struct hp_buf err = HP_BUF_INIT(0);
    struct store *s = NULL;
    const char *binary = NULL, *symbols = NULL;
    static const struct hp_opt_usage u = {
        .prog = "query reindex",
        .usage = "query reindex [--db PATH] [SNAP...]",
        .text = "Re-parses the stored raw dumps of the snapshots named (NODE,\n"
                "NODE@TIME, #ID; all snapshots with raw bytes when none is named) and\n"
                "replaces what was derived from them. The raw bytes stay as they are.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "binary", &binary, "FILE", "the profiled main executable"),
        HP_OPT_STRING(0, "symbols", &symbols, "DIR", "binaries and debug files"),
        HP_OPT_STRING(0, "db", &c.db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_END(),
    };
    int rc, nsel = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (nsel < 0)
        return rc;
    char **sel = argv;
    rc = 1;
    char *store_syms = NULL;
    if (open_db(&c, STORE_OPEN_WRITE, &s) < 0)
        goto out;
    /* The store's files (query symbols add) when no --symbols is given,
     * mirrored into a local folder first. */
    if (!symbols && query_symbols_mirror(s, c.db, &store_syms) == 0)
        symbols = store_syms;
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
    struct reindex_ctx rc_ctx = { .prog = c.prog, .binary = binary, .symbols = symbols };
    for (size_t i = 0; i < ids.n; i++) {
        hp_buf_reset(&err);
        r = store_snapshot_rederive(s, ids.v[i], reindex_derive_cb, &rc_ctx, &err);
        if (r < 0) {
            fprintf(stderr, "%s: #%lld: %s\n", c.prog, (long long)ids.v[i],
                    err.data ? err.data : hp_strerror(r));
            failed++;
        } else {
            ok++;
        }
    }
    fprintf(stderr, "%s: %zu reindexed, %zu failed\n", c.prog, ok, failed);
    rc = failed ? 1 : 0;
out:
    free(store_syms);
    free(ids.v);
    free(nodes.v);
    hp_buf_release(&err);
    store_close(s);
    return rc;
}

/* ---- nodes and snapshots ------------------------------------------------------- */

static int ratio_cb(const struct store_stat *st, void *ctx)
{
    if (strcmp(st->name, "heapfleet_symbolized_ratio") == 0)
        *(double *)ctx = st->value;
    return 0;
}

/* One node of `query nodes`, with its stored snapshots and failed attempts
 * counted apart (a node that never answered has attempts, not snapshots). */
struct node_line {
    struct store_node_row row;
    int64_t ok, failed;
};

struct node_lines {
    struct node_line *v;
    size_t n, cap;
    struct store *s;
    struct hp_buf *err;
};

static int count_snap_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct node_line *l = ctx;
    if (si->status == STORE_STATUS_OK)
        l->ok++;
    else
        l->failed++;
    return 0;
}

static int collect_node_cb(const struct store_node_row *row, void *ctx)
{
    struct node_lines *nl = ctx;
    nl->v = hp_xgrow(nl->v, &nl->cap, nl->n + 1, sizeof(*nl->v));
    struct node_line *l = &nl->v[nl->n++];
    *l = (struct node_line){ .row = *row };
    return 0;
}

static void print_nodes(const struct node_lines *nl)
{
    /* Columns as wide as their widest cell: URL nodes have long addresses. */
    int wname = 4, waddr = 7;
    for (size_t i = 0; i < nl->n; i++) {
        int a = (int)strlen(nl->v[i].row.name), b = (int)strlen(nl->v[i].row.address);
        wname = a > wname ? a : wname;
        waddr = b > waddr ? b : waddr;
    }
    printf("%-*s  %-10s %-*s  %6s %6s  %-20s %-20s %10s %6s  %s\n", wname, "NODE", "KIND", waddr,
           "ADDRESS", "SNAPS", "FAILED", "LAST ATTEMPT", "LAST PROFILE", "INUSE", "NAMED",
           "STATUS");
    for (size_t i = 0; i < nl->n; i++) {
        const struct store_node_row *row = &nl->v[i].row;
        char last[40] = "-", ok[40] = "-", bytes[32] = "-", named[16] = "-";
        if (row->last_at)
            store_time_format(row->last_at, last, sizeof(last));
        if (row->last_ok_id) {
            store_time_format(row->last_ok_at, ok, sizeof(ok));
            fmt_bytes(row->last_ok_totals[PV_INUSE_SPACE], bytes, sizeof(bytes));
            /* Coverage: the share of the latest profile's bytes whose frames
             * are named. */
            double ratio = -1;
            if (store_snapshot_stats(nl->s, row->last_ok_id, ratio_cb, &ratio, NULL) == 0 &&
                ratio >= 0)
                snprintf(named, sizeof(named), "%.1f%%", ratio * 100);
        }
        printf("%-*s  %-10s %-*s  %6lld %6lld  %-20s %-20s %10s %6s  %s%s%s\n", wname, row->name,
               row->kind[0] ? row->kind : "-", waddr, row->address[0] ? row->address : "-",
               (long long)nl->v[i].ok, (long long)nl->v[i].failed, last, ok, bytes, named,
               row->nsnapshots ? store_status_name(row->last_status) : "-",
               row->last_error[0] ? ": " : "", row->last_error);
    }
}

/* Parse nodes/snapshots options; returns the number of positional
 * arguments (in argv[0..n)), or -1 with the exit code in *ret_exit. */
static int simple_opts(struct store_cli *c, int argc, char **argv, const char *usage,
                       const char *help, int max_pos, const char **since, bool *all,
                       int *ret_exit)
{
    const struct hp_opt_usage u = { .prog = c->prog, .usage = usage, .text = help };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "db", &c->db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        /* snapshots only: */
        HP_OPT_STRING(0, since ? "since" : NULL, since, "T",
                      "only from T on (ISO 8601 or relative like -7d)"),
        HP_OPT_BOOL(0, all ? "all" : NULL, all, "include failed attempts"),
        HP_OPT_END(),
    };
    int n = hp_opt_parse(&u, opts, argc, argv, NULL, ret_exit);
    if (n > max_pos) {
        *ret_exit = hp_opt_usage_error(&u, "unexpected argument %s", argv[max_pos]);
        return -1;
    }
    return n;
}

int query_cmd_nodes(int argc, char **argv)
{
    struct store_cli c;
    store_cli_init(&c, "query nodes");
    int rc;
    if (simple_opts(&c, argc, argv, "query nodes [--db PATH]",
                    "Lists the stored nodes with their last attempt and last profile;\n"
                    "SNAPS counts stored profiles, FAILED the attempts that got none.\n", 0,
                    NULL, NULL, &rc) < 0)
        return rc;
    struct store *s;
    if (open_db(&c, STORE_OPEN_READ, &s) < 0)
        return 1;
    struct hp_buf err = HP_BUF_INIT(0);
    struct node_lines nl = { .s = s, .err = &err };
    int r = store_nodes_list(s, collect_node_cb, &nl, &err);
    for (size_t i = 0; r == 0 && i < nl.n; i++)
        r = store_snapshots_list(s, nl.v[i].row.id, 0, INT64_MAX, true, count_snap_cb, &nl.v[i],
                                 &err);
    if (r < 0)
        fail(&c, &err, r);
    else
        print_nodes(&nl);
    free(nl.v);
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
    const char *since = NULL;
    bool all = false;
    int rc, npos = simple_opts(&c, argc, argv, usage, "Lists a node's snapshots, oldest first.\n",
                               1, &since, &all, &rc);
    if (npos < 0)
        return rc;
    if (npos != 1) {
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    const char *pos[1] = { argv[0] };
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
    const char *usage = "query retain [--retain 90d] [--thin-after 7d] [--dry-run] [--db PATH]";
    struct store_retain_policy pol = { .retain_s = 90 * 86400, .thin_after_s = 7 * 86400,
                                       .reclaim = true };
    const struct hp_opt_usage u = {
        .prog = c.prog,
        .usage = usage,
        .text = "Deletes snapshots older than --retain (0: keep all), keeps one\n"
                "per node per day after --thin-after (0: no thinning), and returns\n"
                "the space to the file system (stacks, locations and names that no\n"
                "remaining snapshot uses are deleted too). Snapshots that no span\n"
                "packs yet (history written before spans, thinned days) are packed\n"
                "in spans, which trends and leaks read fast; a closed span's stack\n"
                "series still in groups of 32 (written by an older heapfleet)\n"
                "becomes one row, every node's newest first, and nodes without a\n"
                "stack view (the rows leaks resolves their stacks from, in one\n"
                "read) get one: for a minute a run, the next run goes on.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_CALLBACK(0, "retain", &pol.retain_s, "DURATION", "delete snapshots older than this",
                        hp_opt_duration_cb, hp_opt_duration_show),
        HP_OPT_CALLBACK(0, "thin-after", &pol.thin_after_s, "DURATION",
                        "older snapshots: one per node per day", hp_opt_duration_cb,
                        hp_opt_duration_show),
        HP_OPT_BOOL(0, "dry-run", &pol.dry_run, "say what would be deleted; change nothing"),
        HP_OPT_STRING(0, "db", &c.db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_END(),
    };
    int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (n < 0)
        return rc;
    if (n > 0)
        return hp_opt_usage_error(&u, "unexpected argument %s", argv[0]);
    struct store *s;
    if (open_db(&c, STORE_OPEN_WRITE, &s) < 0)
        return 1;
    struct hp_buf err = HP_BUF_INIT(0);
    struct store_retain_result res;
    int r = store_retain(s, &pol, hp_wall_ms(), &res, &err);
    if (r < 0)
        fail(&c, &err, r);
    else if (res.skipped)
        printf("retention skipped: another process (a collector) is retaining this database "
               "now; nothing deleted\n");
    else if (pol.dry_run)
        printf("dry run: %lld snapshots would be deleted, %lld raw dumps freed; nothing "
               "changed\n",
               (long long)res.snapshots_deleted, (long long)res.raw_deleted);
    else
        printf("%lld snapshots deleted, %lld raw dumps freed, %lld stacks, %lld locations, "
               "%lld names, %lld objects and %lld symbol-cache entries no longer referenced "
               "deleted, %lld pages returned; %lld spans of older snapshots packed and "
               "%lld nodes' stack views written for trends and leaks\n",
               (long long)res.snapshots_deleted, (long long)res.raw_deleted,
               (long long)res.stacks_deleted, (long long)res.locations_deleted,
               (long long)res.names_deleted, (long long)res.objects_deleted,
               (long long)res.symbols_deleted, (long long)res.pages_freed,
               (long long)res.spans_closed, (long long)res.views_written);
    if (r >= 0 && !res.skipped && !pol.dry_run && res.spans_pack_left > 0)
        printf("%lld closed spans are still read in groups of 32 snapshots: packing stops "
               "after a minute, and the next retention goes on (they read correctly "
               "meanwhile, only slower)\n",
               (long long)res.spans_pack_left);
    if (r >= 0 && !res.skipped && !pol.dry_run && res.views_left > 0)
        printf("%lld nodes have no current stack view yet (none, or one whose locations "
               "were symbolized since): writing them stops after a minute, and the next "
               "retention goes on (leaks reads their stacks' rows meanwhile, only slower)\n",
               (long long)res.views_left);
    hp_buf_release(&err);
    store_close(s);
    return r < 0 ? 1 : 0;
}
