/* store.c: opening a heapfleet database, migrations, the prepared statement
 * table, transactions and the translation of SQLite errors.
 *
 * Invariants: a database this build opens has application_id "HPFL" and a
 * user_version between 1 and the newest embedded migration; each migration
 * runs in its own IMMEDIATE transaction together with the user_version bump,
 * so a crash mid-migration leaves the previous version intact. Writers run in
 * WAL mode with incremental auto-vacuum (set before the first table exists,
 * the only time SQLite accepts it). */
#include "store/store-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *stmt_sql[STMT_COUNT] = {
#define STORE_STMT_SQL(name, sql) [STMT_##name] = sql,
    STORE_STMT_MAP(STORE_STMT_SQL)
#undef STORE_STMT_SQL
};

static const char *status_names[STORE_STATUS_COUNT] = {
    [STORE_STATUS_OK] = "ok",
    [STORE_STATUS_FETCH_FAILED] = "fetch_failed",
    [STORE_STATUS_PARSE_FAILED] = "parse_failed",
    [STORE_STATUS_TOO_BIG] = "too_big",
    [STORE_STATUS_INACTIVE] = "inactive",
};

const char *store_status_name(enum store_status st)
{
    return (unsigned)st < STORE_STATUS_COUNT ? status_names[st] : "unknown";
}

int store_status_parse(const char *name, enum store_status *ret)
{
    for (int i = 0; i < STORE_STATUS_COUNT; i++)
        if (name && strcmp(name, status_names[i]) == 0) {
            *ret = (enum store_status)i;
            return 0;
        }
    return HP_EPARSE;
}

const char *store_path_default(const char *flag)
{
    if (flag && *flag)
        return flag;
    const char *env = getenv("HEAPFLEET_DB");
    if (env && *env)
        return env;
    return "heapfleet.db";
}

const char *store_path(const struct store *s)
{
    return s->path;
}

int store_schema_version(const struct store *s)
{
    return s->version;
}

int store_schema_version_latest(void)
{
    return store_nmigrations;
}

int store_sqlite_error(struct store *s, int rc, const char *what, struct hp_buf *err)
{
    const char *msg = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    const char *path = s && s->path ? s->path : "database";
    int code;
    switch (rc & 0xff) {
    case SQLITE_FULL:
        hp_err_printf(err, "%s: %s: disk or database full (%s)", path, what, msg);
        return HP_ERR(ENOSPC);
    case SQLITE_NOTADB:
        hp_err_printf(err, "%s: not an SQLite database (%s)", path, msg);
        return HP_ECORRUPT;
    case SQLITE_CORRUPT:
        hp_err_printf(err, "%s: %s: database file is corrupted (%s)", path, what, msg);
        return HP_ECORRUPT;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
        code = HP_ERR(EACCES);
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        code = HP_ERR(EBUSY);
        break;
    case SQLITE_IOERR: {
        /* A size-limited file (EFBIG) or a full disk that SQLite did not
         * classify as SQLITE_FULL end up here; say which. */
        int e = s && s->db ? sqlite3_system_errno(s->db) : 0;
        if (e == ENOSPC || e == EFBIG || e == EDQUOT) {
            hp_err_printf(err, "%s: %s: %s (%s)", path, what,
                          e == EFBIG ? "file size limit reached" : "disk full", strerror(e));
            return HP_ERR(ENOSPC);
        }
        if (e)
            hp_err_printf(err, "%s: %s: %s (%s)", path, what, msg, strerror(e));
        else if (rc == SQLITE_IOERR_WRITE)
            /* SQLite keeps no errno for a refused write (EFBIG under a
             * file size limit); the likely causes are worth naming. */
            hp_err_printf(err, "%s: %s: %s (a write was refused: disk full or file size "
                          "limit?)", path, what, msg);
        else
            hp_err_printf(err, "%s: %s: %s", path, what, msg);
        return HP_ERR(EIO);
    }
    case SQLITE_NOMEM:
        code = HP_ERR(ENOMEM);
        break;
    default:
        code = HP_ESTORE;
        break;
    }
    hp_err_printf(err, "%s: %s: %s", path, what, msg);
    return code;
}

int store_stmt(struct store *s, enum store_stmt_id id, sqlite3_stmt **ret, struct hp_buf *err)
{
    sqlite3_stmt *st = s->stmts[id];
    if (!st) {
        int rc = sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st,
                                    NULL);
        if (rc != SQLITE_OK)
            return store_sqlite_error(s, rc, "preparing a statement", err);
        s->stmts[id] = st;
    } else {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    *ret = st;
    return 0;
}

int store_exec(struct store *s, const char *sql, struct hp_buf *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    sqlite3_free(msg);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "running SQL", err);
    return 0;
}

/* A statement per stack: in SQLite's process a step costs no round trip. */
int store_stacks_find(struct store *s, const int64_t *hashes, size_t n, int64_t *ret_ids,
                      struct hp_buf *err)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *st;
        int r = store_stmt(s, STMT_STACK_FIND, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, hashes[i]);
        if ((r = store_step_row(s, st, "looking up a stack", err)) < 0)
            return r;
        ret_ids[i] = r ? sqlite3_column_int64(st, 0) : 0;
        sqlite3_reset(st);
    }
    return 0;
}

/* Ids closer than this share one range scan: the rows between (other
 * nodes' stacks, inserted in between) cost less than another seek. */
#define STACK_RANGE_GAP 64

int store_stacks_hashes(struct store *s, const int64_t *ids, size_t n, int64_t *ret_hashes,
                        struct hp_buf *err)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && ids[j] - ids[j - 1] <= STACK_RANGE_GAP)
            j++;
        sqlite3_stmt *st;
        int r = store_stmt(s, STMT_STACK_RANGE, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, ids[i]);
        sqlite3_bind_int64(st, 2, ids[j - 1]);
        size_t k = i;
        while ((r = store_step_row(s, st, "reading stacks by id", err)) > 0) {
            int64_t id = sqlite3_column_int64(st, 0);
            while (k < j && ids[k] < id)
                ret_hashes[k++] = 0;
            if (k < j && ids[k] == id)
                ret_hashes[k++] = sqlite3_column_int64(st, 1);
        }
        sqlite3_reset(st);
        if (r < 0)
            return r;
        while (k < j)
            ret_hashes[k++] = 0;
        i = j;
    }
    return 0;
}

int store_stacks_insert(struct store *s, const int64_t *hashes, const int64_t *depths,
                        const unsigned char *data, const size_t *offs, size_t n,
                        int64_t *ret_ids, struct hp_buf *err)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *st;
        int r = store_stmt(s, STMT_STACK_INSERT, &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, hashes[i]);
        sqlite3_bind_int64(st, 2, depths[i]);
        sqlite3_bind_blob(st, 3, data + offs[i], (int)(offs[i + 1] - offs[i]), SQLITE_STATIC);
        if ((r = store_step_done(s, st, "inserting a stack", err)) < 0)
            return r;
        ret_ids[i] = sqlite3_last_insert_rowid(s->db);
    }
    return 0;
}

/* Inside a batch (store_batch_begin) each transaction is a savepoint of
 * the batch's one transaction: it commits or rolls back alone, and becomes
 * durable with the batch. */
int store_tx_begin(struct store *s, struct hp_buf *err)
{
    if (s->batch && sqlite3_get_autocommit(s->db)) {
        /* SQLite rolled the batch back (SQLITE_FULL, I/O errors): what
         * follows commits on its own; store_batch_commit reports the loss. */
        s->batch = false;
        s->batch_lost = true;
    }
    sqlite3_stmt *st;
    int r = store_stmt(s, s->batch ? STMT_SAVEPOINT : STMT_BEGIN, &st, err);
    return r < 0 ? r : store_step_done(s, st, "starting a transaction", err);
}

int store_tx_commit(struct store *s, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = store_stmt(s, s->batch ? STMT_SAVEPOINT_RELEASE : STMT_COMMIT, &st, err);
    if (r == 0)
        r = store_step_done(s, st, "committing", err);
    if (r < 0)
        store_tx_rollback(s);
    return r;
}

void store_tx_rollback(struct store *s)
{
    /* ROLLBACK may fail when SQLite already rolled back (e.g. after
     * SQLITE_FULL); then there is nothing left to undo. */
    if (!sqlite3_get_autocommit(s->db)) {
        sqlite3_stmt *st;
        if (!s->batch) {
            if (store_stmt(s, STMT_ROLLBACK, &st, NULL) == 0)
                (void)store_step_done(s, st, "rolling back", NULL);
        } else if (store_stmt(s, STMT_SAVEPOINT_ROLLBACK, &st, NULL) == 0 &&
                   store_step_done(s, st, "rolling back", NULL) == 0 &&
                   store_stmt(s, STMT_SAVEPOINT_RELEASE, &st, NULL) == 0) {
            (void)store_step_done(s, st, "rolling back", NULL);
        }
    }
    /* SQLite rolled the whole batch back (SQLITE_FULL, I/O errors): its
     * earlier items are gone too; store_batch_commit reports it. */
    store_writer_reset(s);
}

int store_batch_begin(struct store *s, struct hp_buf *err)
{
    int r = store_require_writer(s, "a write batch", err);
    if (r < 0)
        return r;
    if (s->batch) {
        hp_err_printf(err, "%s: a write batch is already open", s->path);
        return HP_EUSAGE;
    }
    if ((r = store_tx_begin(s, err)) < 0)
        return r;
    s->batch = true;
    return 0;
}

int store_batch_commit(struct store *s, struct hp_buf *err)
{
    bool lost = s->batch_lost;
    s->batch_lost = false;
    if (!s->batch && !lost)
        return 0;
    s->batch = false;
    if (lost || sqlite3_get_autocommit(s->db)) {
        store_writer_reset(s);
        hp_err_printf(err, "%s: the write batch was rolled back by an earlier error; its "
                           "snapshots were not stored", s->path);
        return HP_ESTORE;
    }
    return store_tx_commit(s, err);
}

bool store_batch_open(const struct store *s)
{
    return s->batch || s->batch_lost;
}

/* One integer from a PRAGMA (no parameters: the text is ours). */
static int pragma_int(struct store *s, const char *sql, int64_t *ret, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "reading the database header", err);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *ret = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        *ret = 0;
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_sqlite_error(s, rc, "reading the database header", err);
    return 0;
}

static int migrate(struct store *s, struct hp_buf *err)
{
    int r = 0;
    for (int i = 0; i < store_nmigrations; i++) {
        const struct store_migration *m = &store_migrations[i];
        if ((r = store_exec(s, "BEGIN IMMEDIATE", err)) < 0)
            return r;
        /* Re-read inside the write lock: another writer may have migrated. */
        int64_t v;
        if ((r = pragma_int(s, "PRAGMA user_version", &v, err)) < 0)
            goto fail;
        if (v >= m->version) {
            (void)store_exec(s, "COMMIT", NULL);
            continue;
        }
        char sql[96];
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; PRAGMA application_id = %d",
                 m->version, STORE_APPLICATION_ID);
        if ((r = store_exec(s, m->sql, err)) < 0) {
            hp_err_printf(err, " (migration %s)", m->name);
            goto fail;
        }
        if ((r = store_exec(s, sql, err)) < 0 || (r = store_exec(s, "COMMIT", err)) < 0)
            goto fail;
        hp_log_debug("store", "db=%s version=%d msg=\"migrated\"", s->path, m->version);
        s->version = m->version;
    }
    return 0;
fail:
    (void)store_exec(s, "ROLLBACK", NULL);
    return r;
}

int store_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err)
{
    struct store *s = hp_xcalloc(1, sizeof(*s));
    s->path = hp_xstrdup(path);
    s->writer = (flags & STORE_OPEN_WRITE) != 0;
    int r = 0;

    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (!s->writer || errno != ENOENT) {
            int e = errno;
            hp_err_printf(err, "%s: cannot open database: %s", path, strerror(e));
            r = e == ENOENT ? HP_ENOTFOUND : HP_ERR(e);
            goto out;
        }
    } else if (!S_ISREG(sb.st_mode)) {
        hp_err_printf(err, "%s: not a database file (not a regular file)", path);
        r = HP_EUSAGE;
        goto out;
    }

    int oflags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE |
                 (s->writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                            : SQLITE_OPEN_READONLY);
    int rc = sqlite3_open_v2(path, &s->db, oflags, NULL);
    if (rc != SQLITE_OK) {
        r = store_sqlite_error(s, rc, "cannot open database", err);
        goto out;
    }
    sqlite3_busy_timeout(s->db, 10000);

    /* The first read of the header tells SQLite files from anything else. */
    int64_t app_id, version, ntables;
    if ((r = pragma_int(s, "PRAGMA application_id", &app_id, err)) < 0 ||
        (r = pragma_int(s, "PRAGMA user_version", &version, err)) < 0 ||
        (r = pragma_int(s, "SELECT count(*) FROM sqlite_schema", &ntables, err)) < 0)
        goto out;
    bool empty = ntables == 0 && version == 0;
    if (!empty && app_id != STORE_APPLICATION_ID) {
        hp_err_printf(err,
                      "%s: an SQLite database, but not a heapfleet one (application_id %lld, "
                      "expected %d); refusing to touch it",
                      path, (long long)app_id, STORE_APPLICATION_ID);
        r = HP_EMISMATCH;
        goto out;
    }
    if (version > store_nmigrations) {
        hp_err_printf(err,
                      "%s: database schema version %lld was written by a newer heapfleet "
                      "(this one knows versions up to %d); upgrade heapfleet to use it",
                      path, (long long)version, store_nmigrations);
        r = HP_EVERSION;
        goto out;
    }
    s->version = (int)version;

    if (!s->writer) {
        if (version < store_nmigrations) {
            hp_err_printf(err,
                          "%s: database schema version %lld is older than this heapfleet's "
                          "%d; open it once for writing (collector or query import) to upgrade",
                          path, (long long)version, store_nmigrations);
            r = empty ? HP_ENOTFOUND : HP_EVERSION;
            goto out;
        }
        (void)store_exec(s,
                         flags & STORE_OPEN_NO_MMAP
                             ? "PRAGMA mmap_size = 0; PRAGMA cache_size = -32768"
                             : "PRAGMA mmap_size = 268435456; PRAGMA cache_size = -32768",
                         NULL);
        if (flags & STORE_OPEN_ONE_PASS)
            (void)store_exec(s, "PRAGMA cache_size = -4096", NULL);
        goto done;
    }

    /* auto_vacuum must be chosen before the first table is created. */
    if (empty && (r = store_exec(s, "PRAGMA auto_vacuum = INCREMENTAL", err)) < 0)
        goto out;
    {
        sqlite3_stmt *st;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(st);
            const unsigned char *mode = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
            if (rc == SQLITE_ROW && (!mode || strcmp((const char *)mode, "wal") != 0)) {
                hp_err_printf(err, "%s: cannot switch to WAL mode (journal mode is %s)", path,
                              mode ? (const char *)mode : "?");
                sqlite3_finalize(st);
                r = HP_ESTORE;
                goto out;
            }
            sqlite3_finalize(st);
        }
        if (rc != SQLITE_ROW && rc != SQLITE_OK) {
            r = store_sqlite_error(s, rc, "switching to WAL mode", err);
            goto out;
        }
    }
    /* synchronous=NORMAL in WAL mode: a commit survives a crash of the process
     * (the test kills writers with SIGKILL); a power cut may lose the last
     * commits but never corrupts the file. */
    /* The writer reads through its 32 MiB page cache, without mmap: mapped
     * pages count in the process's memory, and a writer's index seeks
     * touch the whole file, so its RSS grew with the database (543 MB in a
     * 1,000-node round); readers keep mmap for their scans. */
    if ((r = store_exec(s,
                        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;"
                        " PRAGMA cache_size = -32768; PRAGMA mmap_size = 0",
                        err)) < 0)
        goto out;
    if ((r = migrate(s, err)) < 0)
        goto out;

done:
    *ret = s;
    return 0;
out:
    store_close(s);
    return r;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    if (s->batch) {
        struct hp_buf err = HP_BUF_INIT(0);
        if (store_batch_commit(s, &err) < 0)
            hp_log_error("store", "db=%s err=\"%s\" msg=\"the last write batch was lost\"",
                         s->path, err.data ? err.data : "?");
        hp_buf_release(&err);
    }
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    store_writer_free(s->w);
    if (s->db && s->writer) {
        /* A checkpoint on close keeps the -wal file small for copies. */
        (void)sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    }
    sqlite3_close_v2(s->db);
    ZSTD_freeCCtx(s->cctx);
    ZSTD_freeCCtx(s->cctx_raw);
    free(s->raw_zbuf.data);
    ZSTD_freeDCtx(s->dctx);
    free(s->path);
    free(s);
}

int store_check(struct store *s, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA integrity_check(20)", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "checking integrity", err);
    int r = 0, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(st, 0);
        if (n++ == 0 && line && strcmp(line, "ok") == 0)
            continue;
        hp_err_printf(err, "%s%s: %s", r ? "; " : "", s->path, line ? line : "?");
        r = HP_ECORRUPT;
    }
    if (rc != SQLITE_DONE && r == 0)
        r = store_sqlite_error(s, rc, "checking integrity", err);
    sqlite3_finalize(st);
    return r;
}

int store_usage_get(struct store *s, struct store_usage *ret, struct hp_buf *err)
{
    struct store_usage u = { 0 };
    int64_t pages = 0, free_pages = 0, page_size = 0; /* GCC 12 -O3 cannot see through pragma_int */
    int r;
    if ((r = pragma_int(s, "PRAGMA page_count", &pages, err)) < 0 ||
        (r = pragma_int(s, "PRAGMA freelist_count", &free_pages, err)) < 0 ||
        (r = pragma_int(s, "PRAGMA page_size", &page_size, err)) < 0 ||
        (r = pragma_int(s, "SELECT coalesce(sum(length(data)), 0) FROM raw_dumps",
                        &u.raw_bytes, err)) < 0 ||
        (r = pragma_int(s, "SELECT coalesce(sum(size), 0) FROM raw_dumps", &u.raw_orig_bytes,
                        err)) < 0 ||
        (r = pragma_int(s, "SELECT count(*) FROM snapshots", &u.snapshots, err)) < 0 ||
        (r = pragma_int(s, "SELECT count(*) FROM stacks", &u.stacks, err)) < 0 ||
        (r = pragma_int(s, "SELECT count(*) FROM locations", &u.locations, err)) < 0 ||
        (r = pragma_int(s, "SELECT count(*) FROM functions", &u.functions, err)) < 0)
        return r;
    u.file_bytes = pages * page_size;
    u.free_bytes = free_pages * page_size;
    *ret = u;
    return 0;
}
