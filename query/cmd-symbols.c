/* `query symbols`: the store's symbol folder, for pipelines that build BEs
 * with debug info and ship them stripped.
 *
 *   query symbols add [--db PATH] [--reindex] FILE...
 *   query symbols list [--db PATH]
 *
 * list also says, per build, which nodes' snapshots use it (by the build-id
 * their mappings record, else by the file names that point at the build)
 * and how many of those are named, reading the newest USAGE_PER_NODE
 * snapshots of each node and their notes (query.h's grammar).
 *
 * The folder sits next to the database (<db>.symbols) in the layout of
 * --symbols DIR: .build-id/xx/rest.debug holds each file by its GNU
 * build-id (a file without one is refused: nothing could ever be checked
 * against it), and <basename> points at the newest file of that name, for
 * dumps that record no build-id (jemalloc's), whose candidates are then
 * checked against the dump's executable mappings. The collector and
 * `query reindex` use the folder when no --symbols is given. Files are
 * copied to a temporary name and renamed, so a reader never sees half a
 * file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/sym/sym.h"
#include "query/cli.h"
#include "query/query.h"
#include "store/hp-opt.h"
#include "store/store.h"

char *query_symbols_dir(const char *db)
{
    return hp_xasprintf("%s.symbols", store_path_default(db));
}

static int copy_file(const char *from, const char *to, struct hp_buf *err)
{
    char *tmp = hp_xasprintf("%s.tmp.%ld", to, (long)getpid());
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
    if (in < 0) {
        hp_err_printf(err, "%s: %s", from, strerror(errno));
        r = HP_ERR(errno);
        goto out;
    }
    out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        hp_err_printf(err, "%s: %s", tmp, strerror(errno));
        r = HP_ERR(errno);
        goto out;
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0 || write(out, buf, (size_t)n) != n) {
            hp_err_printf(err, "copying %s: %s", from, strerror(errno));
            r = HP_ERR(EIO);
            goto out;
        }
    }
    if (close(out) != 0) {
        out = -1;
        hp_err_printf(err, "%s: %s", tmp, strerror(errno));
        r = HP_ERR(EIO);
        goto out;
    }
    out = -1;
    if (rename(tmp, to) != 0) {
        hp_err_printf(err, "%s: %s", to, strerror(errno));
        r = HP_ERR(errno);
    }
out:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

static int add_one(const char *dir, const char *file, struct hp_buf *err)
{
    struct sym_elf_identity id;
    int r = sym_elf_identity_read(file, &id, err);
    if (r < 0)
        return r;
    if (!id.build_id[0]) {
        hp_err_printf(err, "%s: has no GNU build-id (link with --build-id): it could never be "
                           "matched to a node's binary", file);
        return HP_EMISMATCH;
    }
    char *sub = hp_xasprintf("%s/.build-id/%.2s", dir, id.build_id);
    char *dest = hp_xasprintf("%s/%s.debug", sub, id.build_id + 2);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char *link = hp_xasprintf("%s/%s", dir, base);
    char *target = hp_xasprintf(".build-id/%.2s/%s.debug", id.build_id, id.build_id + 2);
    char *tmplink = hp_xasprintf("%s.tmp.%ld", link, (long)getpid());
    if ((r = hp_mkdir_p(sub)) < 0) {
        hp_err_printf(err, "%s: %s", sub, hp_strerror(r));
        goto out;
    }
    if ((r = copy_file(file, dest, err)) < 0)
        goto out;
    /* A separate debug file keeps its image's name only by convention
     * (doris_be.debug): name it after the image. */
    size_t bl = strlen(link);
    if (bl > 6 && strcmp(link + bl - 6, ".debug") == 0)
        link[bl - 6] = '\0';
    unlink(tmplink);
    if (symlink(target, tmplink) != 0 || rename(tmplink, link) != 0) {
        hp_err_printf(err, "%s: %s", link, strerror(errno));
        unlink(tmplink);
        r = HP_ERR(errno);
        goto out;
    }
    printf("added %s %s (%s, %llu bytes)\n", id.build_id, file,
           id.has_debug_info ? "with debug info" : "no debug info: symbol table only",
           (unsigned long long)id.size);
out:
    free(sub);
    free(dest);
    free(link);
    free(target);
    free(tmplink);
    return r;
}

static int cmd_add(int argc, char **argv)
{
    const char *db = NULL;
    bool reindex = false;
    static const struct hp_opt_usage u = {
        .prog = "query symbols add",
        .usage = "query symbols add [--db PATH] [--reindex] FILE...",
        .text = "Copies executables or separate debug files into the store's symbol folder\n"
                "(<db>.symbols), keyed by their build-id. The collector and query reindex\n"
                "use it when no --symbols is given.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "db", &db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_BOOL(0, "reindex", &reindex,
                    "then re-derive every stored snapshot from its raw dump with them"),
        HP_OPT_END(),
    };
    int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (n < 0)
        return rc;
    if (n == 0)
        return hp_opt_usage_error(&u, "no files given");
    char *dir = query_symbols_dir(db);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        struct hp_buf err = HP_BUF_INIT(0);
        int r = add_one(dir, argv[i], &err);
        if (r < 0) {
            fprintf(stderr, "query symbols add: %s\n", err.len ? err.data : hp_strerror(r));
            failed++;
        }
        hp_buf_release(&err);
    }
    rc = failed ? 1 : 0;
    if (reindex && !failed) {
        char *args[] = { "reindex", "--db", (char *)store_path_default(db), "--symbols", dir,
                         NULL };
        rc = query_cmd_reindex(5, args);
    }
    free(dir);
    return rc;
}


/* ---- which snapshots use a build ---- */

#define USAGE_PER_NODE 50

struct use_snap {
    char node[128];
    int64_t id;
    struct profile *p;
};

struct usage {
    struct store *st;
    struct use_snap *v;
    size_t n, cap;
    int64_t node_first; /* first index of the current node's snapshots */
};

static int usage_snap_cb(const struct store_snapshot_info *si, void *ctx)
{
    struct usage *u = ctx;
    if (si->status != STORE_STATUS_OK)
        return 0;
    u->v = hp_xgrow(u->v, &u->cap, u->n + 1, sizeof(*u->v));
    struct use_snap *e = &u->v[u->n++];
    snprintf(e->node, sizeof(e->node), "%s", si->node);
    e->id = si->id;
    e->p = NULL;
    return 0;
}

static int usage_node_cb(const struct store_node_row *row, void *ctx)
{
    struct usage *u = ctx;
    size_t first = u->n;
    if (store_snapshots_list(u->st, row->id, 0, INT64_MAX, false, usage_snap_cb, u, NULL) < 0)
        return 0;
    /* Oldest first: keep the newest USAGE_PER_NODE. */
    if (u->n - first > USAGE_PER_NODE) {
        size_t drop = u->n - first - USAGE_PER_NODE;
        memmove(&u->v[first], &u->v[first + drop], USAGE_PER_NODE * sizeof(*u->v));
        u->n = first + USAGE_PER_NODE;
    }
    return 0;
}

static const char *base_of(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Does snapshot p use the build (by build-id, else by one of its names)?
 * 1 uses it, 0 not; *ret_named: no "unnamed" note line for it. */
static int snap_uses(const struct profile *p, const char *bid, const char *names,
                     bool *ret_named)
{
    bool uses = false;
    for (size_t i = 0; i < p->nmappings && !uses; i++) {
        const struct profile_mapping *m = &p->mappings[i];
        if (m->build_id && *m->build_id) {
            uses = strcmp(m->build_id, bid) == 0;
            continue;
        }
        if (!m->path || !*m->path)
            continue;
        const char *b = base_of(m->path);
        size_t bl = strlen(b);
        for (const char *q = names; q && *q;) {
            const char *sp = strchr(q, ' ');
            size_t l = sp ? (size_t)(sp - q) : strlen(q);
            if (l == bl && memcmp(q, b, l) == 0)
                uses = true;
            q = sp ? sp + 1 : q + l;
        }
    }
    if (!uses)
        return 0;
    struct hp_arena a;
    hp_arena_init(&a);
    struct query_unnamed *un;
    size_t n;
    query_note_unnamed_parse(p->hint, &a, &un, &n);
    bool named = true;
    for (size_t i = 0; i < n; i++) {
        if (un[i].build_id ? strcmp(un[i].build_id, bid) == 0 : false)
            named = false;
        const char *b = base_of(un[i].object);
        size_t bl = strlen(b);
        for (const char *q = names; q && *q;) {
            const char *sp = strchr(q, ' ');
            size_t l = sp ? (size_t)(sp - q) : strlen(q);
            if (l == bl && memcmp(q, b, l) == 0 && !un[i].build_id)
                named = false;
            q = sp ? sp + 1 : q + l;
        }
    }
    hp_arena_release(&a);
    *ret_named = named;
    return 1;
}

/* "node used/named, ..." for one build into out ("-" when none). */
static void usage_of(struct usage *u, const char *bid, const char *names, struct hp_buf *out)
{
    size_t i = 0;
    while (i < u->n) {
        size_t j = i, used = 0, named = 0;
        for (; j < u->n && strcmp(u->v[j].node, u->v[i].node) == 0; j++) {
            bool nm;
            if (u->v[j].p && snap_uses(u->v[j].p, bid, names, &nm)) {
                used++;
                named += nm;
            }
        }
        if (used)
            hp_buf_printf(out, "%s%s %zu/%zu named", out->len ? ", " : "", u->v[i].node, named,
                          used);
        i = j;
    }
    if (!out->len)
        hp_buf_puts(out, "-");
}

static int cmd_list(int argc, char **argv)
{
    const char *db = NULL;
    static const struct hp_opt_usage u = {
        .prog = "query symbols list",
        .usage = "query symbols list [--db PATH]",
        .text = "Lists the store's symbol folder: each build-id, its size, whether it has\n"
                "debug info, the names that point at it, and the nodes whose snapshots\n"
                "use it (the newest 50 of each node) with how many of those are named.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "db", &db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_END(),
    };
    int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (n < 0)
        return rc;
    if (n > 0)
        return hp_opt_usage_error(&u, "unexpected argument \"%s\"", argv[0]);
    char *dir = query_symbols_dir(db);
    char *bid_dir = hp_xasprintf("%s/.build-id", dir);
    /* The snapshots, loaded once for every build. A store that cannot be
     * opened leaves the column at "-": the folder is still listed. */
    struct usage use = { 0 };
    if (store_open(store_path_default(db), STORE_OPEN_READ, &use.st, NULL) == 0) {
        if (store_nodes_list(use.st, usage_node_cb, &use, NULL) < 0)
            use.n = 0;
        for (size_t i = 0; i < use.n; i++)
            if (store_snapshot_load(use.st, use.v[i].id, &use.v[i].p, NULL) < 0)
                use.v[i].p = NULL;
    }
    printf("%-42s %12s  %-5s  %-16s %s\n", "BUILD-ID", "BYTES", "DEBUG", "NAMES", "USED BY");
    DIR *top = hp_opendir(bid_dir);
    size_t count = 0;
    for (struct dirent *a; top && (a = readdir(top)) != NULL;) {
        if (strlen(a->d_name) != 2)
            continue;
        char *sub = hp_xasprintf("%s/%s", bid_dir, a->d_name);
        DIR *d = hp_opendir(sub);
        for (struct dirent *b; d && (b = readdir(d)) != NULL;) {
            size_t bl = strlen(b->d_name);
            if (bl < 7 || strcmp(b->d_name + bl - 6, ".debug") != 0)
                continue;
            char *path = hp_xasprintf("%s/%s", sub, b->d_name);
            struct sym_elf_identity id;
            if (sym_elf_identity_read(path, &id, NULL) == 0) {
                char *target = hp_xasprintf(".build-id/%s/%s", a->d_name, b->d_name);
                struct hp_buf names = HP_BUF_INIT(0);
                DIR *t = hp_opendir(dir);
                for (struct dirent *c; t && (c = readdir(t)) != NULL;) {
                    char *lp = hp_xasprintf("%s/%s", dir, c->d_name);
                    char buf[512];
                    ssize_t ln = readlink(lp, buf, sizeof(buf) - 1);
                    if (ln > 0) {
                        buf[ln] = '\0';
                        if (strcmp(buf, target) == 0)
                            hp_buf_printf(&names, "%s%s", names.len ? " " : "", c->d_name);
                    }
                    free(lp);
                }
                if (t)
                    closedir(t);
                struct hp_buf used = HP_BUF_INIT(0);
                usage_of(&use, id.build_id, names.data, &used);
                printf("%-42s %12llu  %-5s  %-16s %s\n", id.build_id,
                       (unsigned long long)id.size, id.has_debug_info ? "yes" : "no",
                       names.len ? names.data : "-", used.data);
                hp_buf_release(&used);
                count++;
                hp_buf_release(&names);
                free(target);
            }
            free(path);
        }
        if (d)
            closedir(d);
        free(sub);
    }
    if (top)
        closedir(top);
    fprintf(stderr, "%zu build%s in %s\n", count, count == 1 ? "" : "s", dir);
    for (size_t i = 0; i < use.n; i++)
        profile_free(use.v[i].p);
    free(use.v);
    store_close(use.st);
    free(bid_dir);
    free(dir);
    return 0;
}

int query_cmd_symbols(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "add") == 0)
        return cmd_add(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "list") == 0)
        return cmd_list(argc - 1, argv + 1);
    fprintf(stderr, "usage: query symbols add [--db PATH] [--reindex] FILE...\n"
                    "       query symbols list [--db PATH]\n");
    return argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 2;
}
