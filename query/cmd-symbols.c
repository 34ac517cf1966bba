/* `query symbols`: the store's uploaded symbol files, for pipelines that
 * build BEs with debug info and ship them stripped.
 *
 *   query symbols add [--db PATH] [--reindex] FILE...
 *   query symbols list [--db PATH]
 *
 * add puts each file into the database itself (store.h, "uploaded symbol
 * files"), by its GNU build-id (a file without one is refused: nothing could
 * ever be checked against it) and its name (a separate debug file's ".debug"
 * dropped), for dumps that record no build-id (jemalloc's), whose candidates
 * are then checked against the dump's executable mappings. Both engines
 * alike: every collector and `query` sharing the database (an SQLite file
 * or PostgreSQL) mirrors the files into a local folder
 * (store_symfiles_sync) and symbolizes with them; the collector also
 * re-symbolizes, in the background, the snapshots that waited for them.
 *
 * list also says, per build, which nodes' snapshots use it (by the build-id
 * their mappings record, else by the file names that point at the build)
 * and how many of those are named, reading the newest USAGE_PER_NODE
 * snapshots of each node and their notes (query.h's grammar). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/sym/sym.h"
#include "query/cli.h"
#include "query/query.h"
#include "store/hp-opt.h"
#include "store/store.h"

char *query_symbols_dir(const char *db)
{
    return store_symfiles_dir_default(store_path_default(db));
}

int query_symbols_mirror(struct store *st, const char *db, char **ret_dir)
{
    char *dir = query_symbols_dir(db);
    if (!dir)
        return HP_ENOTFOUND;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_symfiles_sync(st, dir, NULL, &err);
    if (r < 0)
        fprintf(stderr, "query: the store's symbol files were not all copied to %s: %s\n",
                dir, err.data ? err.data : hp_strerror(r));
    hp_buf_release(&err);
    *ret_dir = dir;
    return 0;
}

struct stored_find {
    const char *build_id;
    bool found, has_debug;
};

static int stored_find_cb(const struct store_symfile *f, void *ctx)
{
    struct stored_find *c = ctx;
    if (strcmp(f->build_id, c->build_id) != 0)
        return 0;
    c->found = true;
    c->has_debug = f->has_debug;
    return 1;
}

static int add_one(struct store *st, const char *file, struct hp_buf *err)
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
    /* A stripped executable does not replace its debug file: both carry
     * the same build-id, and the debug file names more. */
    struct stored_find have = { .build_id = id.build_id };
    if ((r = store_symfiles_list(st, stored_find_cb, &have, err)) < 0)
        return r;
    if (have.found && have.has_debug && !id.has_debug_info) {
        printf("kept %s: the store already has it with debug info (%s has none)\n",
               id.build_id, file);
        return 0;
    }
    /* A separate debug file keeps its image's name only by convention
     * (doris_be.debug): name it after the image. */
    const char *base = strrchr(file, '/');
    char *name = hp_xstrdup(base ? base + 1 : file);
    size_t bl = strlen(name);
    if (bl > 6 && strcmp(name + bl - 6, ".debug") == 0)
        name[bl - 6] = '\0';
    struct store_symfile f = {
        .build_id = id.build_id,
        .name = name,
        .size = (int64_t)id.size,
        .has_debug = id.has_debug_info,
    };
    r = store_symfile_put(st, &f, file, err);
    if (r == 0)
        printf("added %s %s (%s, %llu bytes)\n", id.build_id, file,
               id.has_debug_info ? "with debug info" : "no debug info: symbol table only",
               (unsigned long long)id.size);
    free(name);
    return r;
}

static int cmd_add(int argc, char **argv)
{
    const char *db = NULL;
    bool reindex = false;
    static const struct hp_opt_usage u = {
        .prog = "query symbols add",
        .usage = "query symbols add [--db PATH] [--reindex] FILE...",
        .text = "Puts executables or separate debug files into the store (the SQLite file\n"
                "or PostgreSQL database itself), keyed by their build-id. Every collector\n"
                "and query sharing the store uses them when no --symbols is given, and\n"
                "collectors re-symbolize the snapshots that waited for them.\n",
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
    struct store *st = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(store_path_default(db), STORE_OPEN_WRITE, &st, &err);
    if (r < 0) {
        fprintf(stderr, "query symbols add: %s\n", err.data ? err.data : hp_strerror(r));
        hp_buf_release(&err);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        hp_buf_reset(&err);
        r = add_one(st, argv[i], &err);
        if (r < 0) {
            fprintf(stderr, "query symbols add: %s\n", err.len ? err.data : hp_strerror(r));
            failed++;
        }
    }
    hp_buf_release(&err);
    store_close(st);
    rc = failed ? 1 : 0;
    if (reindex && !failed) {
        /* reindex mirrors the store's files itself (no --symbols given). */
        char *args[] = { "reindex", "--db", (char *)store_path_default(db), NULL };
        rc = query_cmd_reindex(3, args);
    }
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
        .text = "Lists the store's symbol files: each build-id, its size, whether it has\n"
                "debug info, its name, and the nodes whose snapshots use it (the newest\n"
                "50 of each node) with how many of those are named.\n",
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
    struct usage use = { 0 };
    struct store_symfile *files = NULL;
    size_t nfiles = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(store_path_default(db), STORE_OPEN_READ, &use.st, &err);
    if (r == 0)
        r = store_symfiles_all(use.st, &files, &nfiles, &err);
    if (r < 0) {
        fprintf(stderr, "query symbols list: %s\n", err.data ? err.data : hp_strerror(r));
        hp_buf_release(&err);
        store_close(use.st);
        return 1;
    }
    hp_buf_release(&err);
    /* The snapshots, loaded once for every build. */
    if (nfiles && store_nodes_list(use.st, usage_node_cb, &use, NULL) < 0)
        use.n = 0;
    for (size_t i = 0; i < use.n; i++)
        if (store_snapshot_load(use.st, use.v[i].id, &use.v[i].p, NULL) < 0)
            use.v[i].p = NULL;
    printf("%-42s %12s  %-5s  %-16s %s\n", "BUILD-ID", "BYTES", "DEBUG", "NAME", "USED BY");
    for (size_t i = 0; i < nfiles; i++) {
        const struct store_symfile *f = &files[i];
        struct hp_buf used = HP_BUF_INIT(0);
        usage_of(&use, f->build_id, f->name, &used);
        printf("%-42s %12lld  %-5s  %-16s %s\n", f->build_id, (long long)f->size,
               f->has_debug ? "yes" : "no", f->name, used.data);
        hp_buf_release(&used);
    }
    fprintf(stderr, "%zu build%s in the store\n", nfiles, nfiles == 1 ? "" : "s");
    for (size_t i = 0; i < use.n; i++)
        profile_free(use.v[i].p);
    free(use.v);
    store_symfiles_free(files, nfiles);
    store_close(use.st);
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
