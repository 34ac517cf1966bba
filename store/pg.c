/* pg.c: the PostgreSQL engine of the store (backend.h). Opening a libpq
 * URI, the schema's migrations (store/migrations-pg/), the statement table
 * in PostgreSQL's dialect, transactions, error translation and the
 * sqlite3_* subset of pg-shim.h that write.c, read.c, retain.c and
 * symcache.c run on here.
 *
 * Invariants:
 *   - One write transaction at a time across every process on the database,
 *     as SQLite's BEGIN IMMEDIATE gives: tx_begin takes a transaction-level
 *     advisory lock. Collectors sharing a fleet therefore never race on the
 *     deduplicated tables (functions, locations, stacks, ...); each one's
 *     fetching, parsing and symbolizing still run in parallel.
 *   - The writer's id caches are valid while no row they may name was
 *     deleted: a statement trigger on every such table advances the
 *     sequence hf_epoch, which the writer reads where SQLite's
 *     PRAGMA data_version would be read.
 *   - A lost connection is re-established before the next statement outside
 *     a transaction; inside one the transaction fails (and is rolled back by
 *     the server), never continued half on a new connection. */
#include "store/store-internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pg_type oids (catalog/pg_type_d.h is in the server headers only). */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_OID 26
#define OID_FLOAT4 700
#define OID_FLOAT8 701

/* Advisory lock keys ("HPFL" + a purpose). */
#define LOCK_WRITE INT64_C(0x4850464c0001)
#define LOCK_MIGRATE INT64_C(0x4850464c0002)

struct store_pg {
    PGconn *conn;
    char *uri; /* as given (may hold a password): only for connecting */
    bool in_tx;
    int64_t last_id, changes;
    char msg[512]; /* the last error's text */
};

/* ---- the statement table in PostgreSQL's dialect ---- */

static const char *const stmt_sql_sqlite[STMT_COUNT] = {
#define STORE_STMT_SQL(name, sql) [STMT_##name] = sql,
    STORE_STMT_MAP(STORE_STMT_SQL)
#undef STORE_STMT_SQL
};

/* Statements whose SQLite text PostgreSQL does not take. */
static const char *stmt_override(enum store_stmt_id id)
{
    switch (id) {
    case STMT_BEGIN:
        return "BEGIN";
    case STMT_NODE_UPSERT: /* DO UPDATE names the old row by its table */
        return "INSERT INTO nodes(name, kind, address, labels, created_at, updated_at)"
               " VALUES (?1, coalesce(?2, ''), coalesce(?3, ''), coalesce(?4, ''), ?5, ?5)"
               " ON CONFLICT(name) DO UPDATE SET kind = coalesce(?2, nodes.kind),"
               " address = coalesce(?3, nodes.address), labels = coalesce(?4, nodes.labels),"
               " updated_at = ?5 RETURNING id";
    case STMT_DATA_VERSION:
        return "SELECT last_value FROM hf_epoch";
    case STMT_SYMCACHE_PUT:
        return "INSERT INTO symbol_cache(build_id, address, frames_packed, created_at)"
               " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (build_id, address) DO UPDATE SET"
               " frames_packed = excluded.frames_packed, created_at = excluded.created_at";
    case STMT_RETAIN_THIN:
        return "SELECT id FROM (SELECT id, status, row_number() OVER (PARTITION BY node_id,"
               " taken_at / 86400000, status = 'ok' ORDER BY taken_at DESC, id DESC) AS rn"
               " FROM snapshots WHERE taken_at < ?1) AS t"
               " WHERE NOT (status = 'ok' AND rn = 1) LIMIT ?2";
    case STMT_KEEP_CREATE:
        return "CREATE TEMP TABLE IF NOT EXISTS keep(kind integer NOT NULL,"
               " id bigint NOT NULL, PRIMARY KEY (kind, id))";
    default:
        return NULL;
    }
}

/* Tables whose rows have an id the writer needs back after an INSERT. */
static bool table_has_id(const char *sql)
{
    static const char *const tables[] = { "raw_dumps", "sample_sets", "objects", "functions",
                                          "files", "locations", "stacks", "stat_names",
                                          "snapshots" };
    const char *p = sql + strlen("INSERT INTO ");
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        size_t n = strlen(tables[i]);
        if (strncmp(p, tables[i], n) == 0 && (p[n] == '(' || p[n] == ' '))
            return true;
    }
    return false;
}

static void free_names(sqlite3_stmt *st)
{
    for (int i = 0; i < PGQ_MAX_PARAMS; i++) {
        free(st->names[i]);
        st->names[i] = NULL;
    }
}

/* SQLite's SQL to PostgreSQL's: ?N -> $N, :name -> $k (k by first
 * appearance), "temp." -> "pg_temp.", INSERT OR IGNORE -> ON CONFLICT DO
 * NOTHING, PRAGMAs (storage tuning without a PostgreSQL meaning) -> a
 * query of 0, RETURNING id appended to INSERTs into tables with an id.
 * Quoted text is copied untouched. -1 when the statement has too many
 * parameters (a programming error). */
static int translate(const char *in, sqlite3_stmt *st)
{
    struct hp_buf b = { 0 };
    bool ignore = false;
    if (strncmp(in, "PRAGMA", 6) == 0) {
        st->sql = hp_xstrdup("SELECT 0::bigint");
        return 0;
    }
    if (strncmp(in, "INSERT OR IGNORE INTO ", 22) == 0) {
        hp_buf_puts(&b, "INSERT INTO ");
        in += 22;
        ignore = true;
    }
    int nparams = 0;
    for (const char *p = in; *p;) {
        if (*p == '\'') {
            const char *q = strchr(p + 1, '\'');
            size_t n = q ? (size_t)(q - p) + 1 : strlen(p);
            hp_buf_append(&b, p, n);
            p += n;
        } else if (*p == '?' && isdigit((unsigned char)p[1])) {
            char *end;
            long k = strtol(p + 1, &end, 10);
            if (k < 1 || k > PGQ_MAX_PARAMS)
                goto fail;
            hp_buf_printf(&b, "$%ld", k);
            nparams = HP_MAX(nparams, (int)k);
            p = end;
        } else if (*p == ':' && (isalpha((unsigned char)p[1]) || p[1] == '_') &&
                   (p == in || p[-1] != ':')) {
            const char *q = p + 1;
            while (isalnum((unsigned char)*q) || *q == '_')
                q++;
            int k = 0;
            while (k < PGQ_MAX_PARAMS && st->names[k] &&
                   !(strlen(st->names[k]) == (size_t)(q - p) &&
                     memcmp(st->names[k], p, (size_t)(q - p)) == 0))
                k++;
            if (k == PGQ_MAX_PARAMS)
                goto fail;
            if (!st->names[k]) {
                st->names[k] = hp_xmalloc((size_t)(q - p) + 1);
                memcpy(st->names[k], p, (size_t)(q - p));
                st->names[k][q - p] = '\0';
            }
            hp_buf_printf(&b, "$%d", k + 1);
            nparams = HP_MAX(nparams, k + 1);
            p = q;
        } else if (strncmp(p, "temp.", 5) == 0 && (p == in || !isalnum((unsigned char)p[-1]))) {
            hp_buf_puts(&b, "pg_temp.");
            p += 5;
        } else {
            hp_buf_append(&b, p, 1);
            p++;
        }
    }
    if (ignore)
        hp_buf_puts(&b, " ON CONFLICT DO NOTHING");
    const char *sql = (b.data ? b.data : "");
    if (strncmp(sql, "INSERT INTO ", 12) == 0 && !strstr(sql, "RETURNING") &&
        table_has_id(sql)) {
        hp_buf_puts(&b, " RETURNING id");
        st->returns_id = true;
    }
    st->sql = hp_xstrdup((b.data ? b.data : ""));
    st->nparams = nparams;
    hp_buf_release(&b);
    return 0;
fail:
    hp_buf_release(&b);
    free_names(st);
    return -1;
}

static sqlite3_stmt *stmt_new(struct store *s, const char *sqlite_sql)
{
    sqlite3_stmt *st = hp_xcalloc(1, sizeof(*st));
    st->s = s;
    if (translate(sqlite_sql, st) < 0) {
        free(st);
        return NULL;
    }
    return st;
}

/* ---- errors ---- */

static void note_error(struct store *s, const char *what_failed)
{
    const char *m = what_failed && *what_failed ? what_failed : "unknown error";
    snprintf(s->pg->msg, sizeof(s->pg->msg), "%s", m);
    /* libpq messages end in a newline (and may span lines): one line. */
    for (char *p = s->pg->msg; *p; p++)
        if (*p == '\n')
            *p = p[1] ? ' ' : '\0';
}

int store_sqlite_error(struct store *s, int rc, const char *what, struct hp_buf *err)
{
    const char *path = s && s->path ? s->path : "database";
    const char *msg = s && s->pg && s->pg->msg[0] ? s->pg->msg : "error";
    int code;
    switch (rc & 0xff) {
    case SQLITE_FULL:
        hp_err_printf(err, "%s: %s: disk or database full (%s)", path, what, msg);
        return HP_ERR(ENOSPC);
    case SQLITE_BUSY:
        code = HP_ERR(EBUSY);
        break;
    case SQLITE_IOERR:
        code = HP_ERR(EIO);
        break;
    case SQLITE_NOMEM:
        code = HP_ERR(ENOMEM);
        break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
        code = HP_ERR(EACCES);
        break;
    default:
        code = HP_ESTORE;
        break;
    }
    hp_err_printf(err, "%s: %s: %s", path, what, msg);
    return code;
}

/* SQLite's result code for a failed PGresult (NULL: the connection). */
static int result_code(struct store *s, PGresult *res)
{
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    note_error(s, primary ? primary : PQerrorMessage(s->pg->conn));
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!state || PQstatus(s->pg->conn) != CONNECTION_OK || strncmp(state, "08", 2) == 0 ||
        strncmp(state, "57P", 3) == 0)
        return SQLITE_IOERR;
    if (strcmp(state, "53100") == 0)
        return SQLITE_FULL;
    if (strcmp(state, "53200") == 0)
        return SQLITE_NOMEM;
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
        strcmp(state, "55P03") == 0)
        return SQLITE_BUSY;
    if (strcmp(state, "25006") == 0 || strcmp(state, "42501") == 0)
        return SQLITE_READONLY;
    return SQLITE_ERROR;
}

/* Before a statement: a connection lost outside a transaction is made
 * again (the server restarted); inside one the transaction is lost. */
static int conn_ready(struct store *s)
{
    if (PQstatus(s->pg->conn) == CONNECTION_OK)
        return SQLITE_OK;
    if (s->pg->in_tx) {
        note_error(s, "connection to the server lost inside a transaction");
        return SQLITE_IOERR;
    }
    PQreset(s->pg->conn);
    if (PQstatus(s->pg->conn) != CONNECTION_OK) {
        note_error(s, PQerrorMessage(s->pg->conn));
        return SQLITE_IOERR;
    }
    hp_log_info("store", "db=%s msg=\"reconnected to PostgreSQL\"", s->path);
    return SQLITE_OK;
}

/* One statement with parameters, results in binary; *ret_res on success
 * (the caller clears it), else the error for `what`. */
static int exec_params(struct store *s, const char *sql, int n, const char *const *vals,
                       const int *lens, const int *fmts, const char *what, PGresult **ret_res,
                       struct hp_buf *err)
{
    int rc = conn_ready(s);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, what, err);
    PGresult *res = PQexecParams(s->pg->conn, sql, n, NULL, vals, lens, fmts, 1);
    ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
        rc = result_code(s, res);
        PQclear(res);
        return store_sqlite_error(s, rc, what, err);
    }
    *ret_res = res;
    return 0;
}

/* ---- pg-shim.h ---- */

static bool param_ok(sqlite3_stmt *st, int i)
{
    if (i < 1 || i > st->nparams)
        return false;
    free(st->owned[i - 1]);
    st->owned[i - 1] = NULL;
    return true;
}

int pgq_bind_int64(sqlite3_stmt *st, int i, int64_t v)
{
    if (!param_ok(st, i))
        return SQLITE_RANGE;
    snprintf(st->num[i - 1], sizeof(st->num[0]), "%lld", (long long)v);
    st->vals[i - 1] = st->num[i - 1];
    st->lens[i - 1] = 0;
    st->fmts[i - 1] = 0;
    return SQLITE_OK;
}

int pgq_bind_double(sqlite3_stmt *st, int i, double v)
{
    if (!param_ok(st, i))
        return SQLITE_RANGE;
    if (isnan(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "NaN");
    else if (isinf(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%sInfinity", v < 0 ? "-" : "");
    else
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%.17g", v);
    st->vals[i - 1] = st->num[i - 1];
    st->lens[i - 1] = 0;
    st->fmts[i - 1] = 0;
    return SQLITE_OK;
}

int pgq_bind_text(sqlite3_stmt *st, int i, const char *v, int n, void (*destructor)(void *))
{
    (void)destructor; /* SQLITE_STATIC everywhere in the store */
    if (!param_ok(st, i))
        return SQLITE_RANGE;
    if (v && n >= 0) {
        st->owned[i - 1] = hp_xmalloc((size_t)n + 1);
        memcpy(st->owned[i - 1], v, (size_t)n);
        st->owned[i - 1][n] = '\0';
        v = st->owned[i - 1];
    }
    st->vals[i - 1] = v;
    st->lens[i - 1] = 0;
    st->fmts[i - 1] = 0;
    return SQLITE_OK;
}

int pgq_bind_blob(sqlite3_stmt *st, int i, const void *v, int n, void (*destructor)(void *))
{
    (void)destructor;
    if (!param_ok(st, i))
        return SQLITE_RANGE;
    /* A zero-length blob is not NULL. */
    st->vals[i - 1] = v ? v : "";
    st->lens[i - 1] = n;
    st->fmts[i - 1] = 1;
    return SQLITE_OK;
}

int pgq_bind_parameter_index(sqlite3_stmt *st, const char *name)
{
    for (int k = 0; k < PGQ_MAX_PARAMS && st->names[k]; k++)
        if (strcmp(st->names[k], name) == 0)
            return k + 1;
    return 0;
}

int pgq_step(sqlite3_stmt *st)
{
    struct store *s = st->s;
    if (!st->res) {
        int rc = conn_ready(s);
        if (rc != SQLITE_OK)
            return rc;
        PGresult *res = PQexecParams(s->pg->conn, st->sql, st->nparams, NULL, st->vals,
                                     st->lens, st->fmts, 1);
        ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
            rc = result_code(s, res);
            PQclear(res);
            return rc;
        }
        st->res = res;
        st->nrows = PQntuples(res);
        st->row = -1;
        const char *n = PQcmdTuples(res);
        s->pg->changes = n && *n ? strtoll(n, NULL, 10) : 0;
        if (st->returns_id) {
            if (st->nrows == 1)
                s->pg->last_id = pgq_column_int64(&(sqlite3_stmt){ .res = res, .row = 0, .nrows = 1 }, 0);
            st->row = st->nrows; /* the id is not a row for the caller */
        }
    }
    if (st->row + 1 < st->nrows) {
        st->row++;
        return SQLITE_ROW;
    }
    st->row = st->nrows;
    return SQLITE_DONE;
}

int pgq_reset(sqlite3_stmt *st)
{
    PQclear(st->res);
    st->res = NULL;
    st->nrows = 0;
    st->row = -1;
    return SQLITE_OK;
}

static void clear_bindings(sqlite3_stmt *st)
{
    for (int i = 0; i < PGQ_MAX_PARAMS; i++) {
        free(st->owned[i]);
        st->owned[i] = NULL;
        st->vals[i] = NULL;
        st->lens[i] = 0;
        st->fmts[i] = 0;
    }
}

static void stmt_free(sqlite3_stmt *st)
{
    if (!st)
        return;
    pgq_reset(st);
    clear_bindings(st);
    free_names(st);
    free(st->sql);
    free(st);
}

int pgq_finalize(sqlite3_stmt *st)
{
    stmt_free(st);
    return SQLITE_OK;
}

static bool cell(sqlite3_stmt *st, int col)
{
    return st->res && st->row >= 0 && st->row < st->nrows && col >= 0 &&
           col < PQnfields(st->res) && !PQgetisnull(st->res, st->row, col);
}

static uint64_t be_u64(const unsigned char *p, int len)
{
    uint64_t v = 0;
    for (int i = 0; i < len; i++)
        v = v << 8 | p[i];
    return v;
}

int64_t pgq_column_int64(sqlite3_stmt *st, int col)
{
    if (!cell(st, col))
        return 0;
    const unsigned char *v = (const unsigned char *)PQgetvalue(st->res, st->row, col);
    int len = PQgetlength(st->res, st->row, col);
    switch (PQftype(st->res, col)) {
    case OID_INT8:
        return len == 8 ? (int64_t)be_u64(v, 8) : 0;
    case OID_INT4:
    case OID_OID:
        return len == 4 ? (int64_t)(int32_t)(uint32_t)be_u64(v, 4) : 0;
    case OID_INT2:
        return len == 2 ? (int64_t)(int16_t)(uint16_t)be_u64(v, 2) : 0;
    case OID_BOOL:
        return len == 1 && v[0];
    case OID_FLOAT8:
    case OID_FLOAT4:
        return (int64_t)pgq_column_double(st, col);
    default:
        return strtoll((const char *)v, NULL, 10);
    }
}

double pgq_column_double(sqlite3_stmt *st, int col)
{
    if (!cell(st, col))
        return 0;
    const unsigned char *v = (const unsigned char *)PQgetvalue(st->res, st->row, col);
    int len = PQgetlength(st->res, st->row, col);
    switch (PQftype(st->res, col)) {
    case OID_FLOAT8: {
        if (len != 8)
            return 0;
        uint64_t bits = be_u64(v, 8);
        double d;
        memcpy(&d, &bits, sizeof(d));
        return d;
    }
    case OID_FLOAT4: {
        if (len != 4)
            return 0;
        uint32_t bits = (uint32_t)be_u64(v, 4);
        float f;
        memcpy(&f, &bits, sizeof(f));
        return f;
    }
    case OID_INT8:
    case OID_INT4:
    case OID_INT2:
    case OID_BOOL:
    case OID_OID:
        return (double)pgq_column_int64(st, col);
    default:
        return strtod((const char *)v, NULL);
    }
}

const unsigned char *pgq_column_text(sqlite3_stmt *st, int col)
{
    if (!cell(st, col))
        return NULL;
    switch (PQftype(st->res, col)) {
    case OID_INT8:
    case OID_INT4:
    case OID_INT2:
    case OID_BOOL:
    case OID_OID:
        snprintf(st->scratch, sizeof(st->scratch), "%lld",
                 (long long)pgq_column_int64(st, col));
        return (const unsigned char *)st->scratch;
    case OID_FLOAT8:
    case OID_FLOAT4:
        snprintf(st->scratch, sizeof(st->scratch), "%.17g", pgq_column_double(st, col));
        return (const unsigned char *)st->scratch;
    default:
        /* libpq ends binary values with a NUL too */
        return (const unsigned char *)PQgetvalue(st->res, st->row, col);
    }
}

const void *pgq_column_blob(sqlite3_stmt *st, int col)
{
    if (!cell(st, col))
        return NULL;
    return PQgetvalue(st->res, st->row, col);
}

int pgq_column_bytes(sqlite3_stmt *st, int col)
{
    if (!cell(st, col))
        return 0;
    Oid t = PQftype(st->res, col);
    if (t == OID_BYTEA || t == 25 || t == 1043 || t == 1042 || t == 19 || t == 705)
        return PQgetlength(st->res, st->row, col);
    return (int)strlen((const char *)pgq_column_text(st, col));
}

int pgq_column_type(sqlite3_stmt *st, int col)
{
    return cell(st, col) ? SQLITE_INTEGER : SQLITE_NULL;
}

int pgq_prepare(struct store *s, const char *sql, sqlite3_stmt **ret)
{
    sqlite3_stmt *st = stmt_new(s, sql);
    if (!st) {
        note_error(s, "a statement has too many parameters");
        return SQLITE_ERROR;
    }
    st->adhoc = true;
    *ret = st;
    return SQLITE_OK;
}

int64_t pgq_last_insert_rowid(struct store *s)
{
    return s->pg->last_id;
}

int64_t pgq_changes(struct store *s)
{
    return s->pg->changes;
}

/* ---- store-internal.h, on PostgreSQL ---- */

int store_stmt(struct store *s, enum store_stmt_id id, sqlite3_stmt **ret, struct hp_buf *err)
{
    sqlite3_stmt *st = s->stmts[id];
    if (!st) {
        const char *sql = stmt_override(id);
        st = stmt_new(s, sql ? sql : stmt_sql_sqlite[id]);
        if (!st) {
            hp_err_printf(err, "%s: statement %d has too many parameters", s->path, (int)id);
            return HP_ESTORE;
        }
        s->stmts[id] = st;
    } else {
        pgq_reset(st);
        clear_bindings(st);
    }
    *ret = st;
    return 0;
}

/* ---- stacks in bulk (store-internal.h) ---- */

/* "{v0,v1,...}": a bigint[] parameter in text. */
static void int_array(struct hp_buf *b, const int64_t *v, size_t n)
{
    hp_buf_puts(b, "{");
    for (size_t i = 0; i < n; i++)
        hp_buf_printf(b, "%s%lld", i ? "," : "", (long long)v[i]);
    hp_buf_puts(b, "}");
}

/* ret_ids[i] from the (hash, id) rows of res, for hashes[0..n) (or any
 * (key, value) rows: values by key). */
static void ids_by_hash(PGresult *res, const int64_t *hashes, size_t n, int64_t *ret_ids)
{
    struct hp_map64 at; /* hash -> index */
    hp_map64_init(&at);
    hp_map64_reserve(&at, n);
    uint32_t k;
    for (size_t i = 0; i < n; i++)
        (void)hp_map64_put(&at, (uint64_t)hashes[i], (uint32_t)i, &k);
    for (int row = 0; row < PQntuples(res); row++) {
        sqlite3_stmt st = { .res = res, .row = row, .nrows = PQntuples(res) };
        if (hp_map64_get(&at, (uint64_t)pgq_column_int64(&st, 0), &k))
            ret_ids[k] = pgq_column_int64(&st, 1);
    }
    hp_map64_release(&at);
}

/* ret[i] for keys[i] (distinct) from a query of (key, value) rows whose
 * $1 is the keys as a bigint[]; 0 for a key without a row. */
static int values_by_key(struct store *s, const char *sql, const char *what,
                         const int64_t *keys, size_t n, int64_t *ret, struct hp_buf *err)
{
    memset(ret, 0, n * sizeof(*ret));
    if (!n)
        return 0;
    struct hp_buf arr = HP_BUF_INIT(0);
    int_array(&arr, keys, n);
    const char *vals[] = { arr.data };
    PGresult *res = NULL;
    int r = exec_params(s, sql, 1, vals, NULL, NULL, what, &res, err);
    if (r == 0)
        ids_by_hash(res, keys, n, ret);
    PQclear(res);
    hp_buf_release(&arr);
    return r;
}

int store_stacks_find(struct store *s, const int64_t *hashes, size_t n, int64_t *ret_ids,
                      struct hp_buf *err)
{
    return values_by_key(s, "SELECT hash, id FROM stacks WHERE hash = ANY($1::bigint[])",
                         "looking up stacks", hashes, n, ret_ids, err);
}

int store_stacks_hashes(struct store *s, const int64_t *ids, size_t n, int64_t *ret_hashes,
                        struct hp_buf *err)
{
    return values_by_key(s, "SELECT id, hash FROM stacks WHERE id = ANY($1::bigint[])",
                         "reading stacks by id", ids, n, ret_hashes, err);
}

/* One INSERT of every row, numbered so the identity column counts them in
 * order; the packed location ids travel as one binary bytea, cut up by
 * offset on the server. */
int store_stacks_insert(struct store *s, const int64_t *hashes, const int64_t *depths,
                        const unsigned char *data, const size_t *offs, size_t n,
                        int64_t *ret_ids, struct hp_buf *err)
{
    if (!n)
        return 0;
    if (offs[n] > INT32_MAX) {
        hp_err_printf(err, "%s: %zu bytes of new stacks in one profile", s->path, offs[n]);
        return HP_ETOOBIG;
    }
    int64_t *at = hp_xmalloc(2 * n * sizeof(*at));
    for (size_t i = 0; i < n; i++) {
        at[i] = (int64_t)offs[i];
        at[n + i] = (int64_t)(offs[i + 1] - offs[i]);
    }
    struct hp_buf a[4] = { HP_BUF_INIT(0), HP_BUF_INIT(0), HP_BUF_INIT(0), HP_BUF_INIT(0) };
    int_array(&a[0], hashes, n);
    int_array(&a[1], depths, n);
    int_array(&a[2], at, n);
    int_array(&a[3], at + n, n);
    const char *vals[] = { a[0].data, a[1].data, a[2].data, a[3].data,
                           data ? (const char *)data : "" };
    int lens[] = { 0, 0, 0, 0, (int)offs[n] };
    int fmts[] = { 0, 0, 0, 0, 1 };
    PGresult *res = NULL;
    int r = exec_params(s,
                        "INSERT INTO stacks(hash, depth, locs_packed)"
                        " SELECT h, d, substring($5::bytea FROM o::int + 1 FOR l::int)"
                        " FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[])"
                        " WITH ORDINALITY AS t(h, d, o, l, k) ORDER BY k RETURNING hash, id",
                        5, vals, lens, fmts, "inserting stacks", &res, err);
    if (r == 0) {
        memset(ret_ids, 0, n * sizeof(*ret_ids));
        ids_by_hash(res, hashes, n, ret_ids);
    }
    PQclear(res);
    for (int i = 0; i < 4; i++)
        hp_buf_release(&a[i]);
    free(at);
    return r;
}

/* SQL without parameters, possibly several statements (migrations). */
static int exec_raw(struct store *s, const char *sql, const char *what, struct hp_buf *err)
{
    int rc = conn_ready(s);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, what, err);
    PGresult *res = PQexec(s->pg->conn, sql);
    ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
        rc = result_code(s, res);
        PQclear(res);
        return store_sqlite_error(s, rc, what, err);
    }
    const char *n = PQcmdTuples(res);
    s->pg->changes = n && *n ? strtoll(n, NULL, 10) : 0;
    PQclear(res);
    return 0;
}

int store_exec(struct store *s, const char *sql, struct hp_buf *err)
{
    sqlite3_stmt st = { 0 };
    if (translate(sql, &st) < 0) {
        hp_err_printf(err, "%s: running SQL: too many parameters", s->path);
        return HP_ESTORE;
    }
    int r = exec_raw(s, st.sql, "running SQL", err);
    free(st.sql);
    free_names(&st);
    return r;
}

int store_tx_begin(struct store *s, struct hp_buf *err)
{
    if (s->pg->in_tx) {
        hp_err_printf(err, "%s: a transaction is already open", s->path);
        return HP_ESTORE;
    }
    int r = exec_raw(s, "BEGIN", "starting a transaction", err);
    if (r < 0)
        return r;
    s->pg->in_tx = true;
    if (s->writer) {
        char sql[64];
        snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld)", (long long)LOCK_WRITE);
        if ((r = exec_raw(s, sql, "taking the write lock", err)) < 0) {
            store_tx_rollback(s);
            return r;
        }
    }
    return 0;
}

int store_tx_commit(struct store *s, struct hp_buf *err)
{
    int r = exec_raw(s, "COMMIT", "committing", err);
    if (r < 0) {
        store_tx_rollback(s);
        return r;
    }
    s->pg->in_tx = false;
    return 0;
}

void store_tx_rollback(struct store *s)
{
    if (s->pg->in_tx && PQstatus(s->pg->conn) == CONNECTION_OK)
        (void)exec_raw(s, "ROLLBACK", "rolling back", NULL);
    s->pg->in_tx = false;
    store_writer_reset(s);
}

struct store_unpack store_unpack_column(sqlite3_stmt *st, int col)
{
    const unsigned char *p = pgq_column_blob(st, col);
    int n = pgq_column_bytes(st, col);
    if (!p || n <= 0)
        return (struct store_unpack){ 0 };
    return (struct store_unpack){ .p = p, .end = p + n };
}

/* ---- opening ---- */

static void notice_quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* "relation already exists, skipping" and the like */
}

/* One integer from a query without parameters; *ret 0 for no row. */
static int query_int(struct store *s, const char *sql, int64_t *ret, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int rc = pgq_prepare(s, sql, &st);
    if (rc != SQLITE_OK)
        return store_sqlite_error(s, rc, "reading the database", err);
    rc = pgq_step(st);
    *ret = rc == SQLITE_ROW ? pgq_column_int64(st, 0) : 0;
    stmt_free(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_sqlite_error(s, rc, "reading the database", err);
    return 0;
}

static int migrate(struct store *s, struct hp_buf *err)
{
    char sql[128];
    int r;
    if ((r = exec_raw(s, "BEGIN", "migrating", err)) < 0)
        return r;
    s->pg->in_tx = true;
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(%lld)", (long long)LOCK_MIGRATE);
    if ((r = exec_raw(s, sql, "migrating", err)) < 0 ||
        (r = exec_raw(s,
                      "CREATE TABLE IF NOT EXISTS heapfleet_meta (key text PRIMARY KEY,"
                      " value text NOT NULL)",
                      "migrating", err)) < 0)
        goto fail;
    int64_t v;
    if ((r = query_int(s,
                       "SELECT coalesce((SELECT value::bigint FROM heapfleet_meta"
                       " WHERE key = 'schema_version'), 0)",
                       &v, err)) < 0)
        goto fail;
    for (int i = 0; i < store_nmigrations; i++) {
        const struct store_migration *m = &store_migrations[i];
        if (v >= m->version)
            continue;
        if ((r = exec_raw(s, m->sql, "migrating", err)) < 0) {
            hp_err_printf(err, " (migration %s)", m->name);
            goto fail;
        }
        snprintf(sql, sizeof(sql),
                 "INSERT INTO heapfleet_meta VALUES ('schema_version', '%d')"
                 " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 m->version);
        if ((r = exec_raw(s, sql, "migrating", err)) < 0)
            goto fail;
        hp_log_debug("store", "db=%s version=%d msg=\"migrated\"", s->path, m->version);
        v = m->version;
    }
    if ((r = exec_raw(s, "COMMIT", "migrating", err)) < 0)
        goto fail;
    s->pg->in_tx = false;
    s->version = (int)v;
    return 0;
fail:
    store_tx_rollback(s);
    return r;
}

int store_open(const char *path, unsigned flags, struct store **ret, struct hp_buf *err)
{
    struct store *s = hp_xcalloc(1, sizeof(*s));
    s->pg = hp_xcalloc(1, sizeof(*s->pg));
    s->pg->uri = hp_xstrdup(path);
    s->path = hp_url_redact(path);
    s->writer = (flags & STORE_OPEN_WRITE) != 0;
    int r = 0;

    s->pg->conn = PQconnectdb(path);
    if (!s->pg->conn || PQstatus(s->pg->conn) != CONNECTION_OK) {
        note_error(s, s->pg->conn ? PQerrorMessage(s->pg->conn) : "out of memory");
        hp_err_printf(err, "%s: cannot connect to PostgreSQL: %s", s->path, s->pg->msg);
        r = HP_ERR(ECONNREFUSED);
        goto out;
    }
    PQsetNoticeProcessor(s->pg->conn, notice_quiet, NULL);
    /* Same text order as SQLite's (bytes) whatever the database's locale;
     * the schema's columns say COLLATE "C" too. A writer waits for the
     * write lock at most a minute, as SQLite's busy timeout bounds it. */
    if ((r = exec_raw(s,
                      s->writer ? "SET lock_timeout = '60s'; SET statement_timeout = 0"
                                : "SET default_transaction_read_only = on",
                      "setting up the session", err)) < 0)
        goto out;

    int64_t has_meta, has_other;
    if ((r = query_int(s, "SELECT (to_regclass('heapfleet_meta') IS NOT NULL)::int", &has_meta,
                       err)) < 0 ||
        (r = query_int(s,
                       "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
                       " AND tablename IN ('nodes', 'snapshots')",
                       &has_other, err)) < 0)
        goto out;
    if (!has_meta && has_other) {
        hp_err_printf(err,
                      "%s: a PostgreSQL database with tables named like heapfleet's but no "
                      "heapfleet_meta table: not a heapfleet database; refusing to touch it",
                      s->path);
        r = HP_EMISMATCH;
        goto out;
    }
    int64_t version = 0;
    if (has_meta &&
        (r = query_int(s,
                       "SELECT coalesce((SELECT value::bigint FROM heapfleet_meta"
                       " WHERE key = 'schema_version'), 0)",
                       &version, err)) < 0)
        goto out;
    if (version > store_nmigrations) {
        hp_err_printf(err,
                      "%s: database schema version %lld was written by a newer heapfleet "
                      "(this one knows versions up to %d); upgrade heapfleet to use it",
                      s->path, (long long)version, store_nmigrations);
        r = HP_EVERSION;
        goto out;
    }
    s->version = (int)version;
    if (!s->writer) {
        if (version < store_nmigrations) {
            hp_err_printf(err,
                          "%s: database schema version %lld is older than this heapfleet's "
                          "%d; open it once for writing (collector or query import) to upgrade",
                          s->path, (long long)version, store_nmigrations);
            r = version == 0 ? HP_ENOTFOUND : HP_EVERSION;
            goto out;
        }
    } else if ((r = migrate(s, err)) < 0) {
        goto out;
    }
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
    for (int i = 0; i < STMT_COUNT; i++)
        stmt_free(s->stmts[i]);
    store_writer_free(s->w);
    if (s->pg) {
        if (s->pg->conn)
            PQfinish(s->pg->conn);
        free(s->pg->uri);
        free(s->pg);
    }
    ZSTD_freeCCtx(s->cctx);
    ZSTD_freeCCtx(s->cctx_raw);
    free(s->raw_zbuf.data);
    ZSTD_freeDCtx(s->dctx);
    free(s->path);
    free(s);
}

int store_check(struct store *s, struct hp_buf *err)
{
    /* PostgreSQL checks its own pages; what is ours to check is that the
     * delta chains and references hold. */
    int64_t broken;
    int r = query_int(s,
                      "SELECT (SELECT count(*) FROM snapshots s WHERE s.raw_id IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM raw_dumps r WHERE r.id = s.raw_id))"
                      " + (SELECT count(*) FROM snapshots s WHERE s.samples_id IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM sample_sets t WHERE t.id = s.samples_id))"
                      " + (SELECT count(*) FROM raw_dumps r WHERE r.base_id IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM raw_dumps b WHERE b.id = r.base_id))"
                      " + (SELECT count(*) FROM sample_sets r WHERE r.base_id IS NOT NULL"
                      " AND NOT EXISTS (SELECT 1 FROM sample_sets b WHERE b.id = r.base_id))",
                      &broken, err);
    if (r < 0)
        return r;
    if (broken) {
        hp_err_printf(err, "%s: %lld references to missing raw dumps or sample sets", s->path,
                      (long long)broken);
        return HP_ECORRUPT;
    }
    return 0;
}

int store_usage_get(struct store *s, struct store_usage *ret, struct hp_buf *err)
{
    struct store_usage u = { 0 };
    int r;
    if ((r = query_int(s, "SELECT pg_database_size(current_database())", &u.file_bytes,
                       err)) < 0 ||
        (r = query_int(s, "SELECT coalesce(sum(length(data)), 0)::bigint FROM raw_dumps",
                       &u.raw_bytes, err)) < 0 ||
        (r = query_int(s, "SELECT coalesce(sum(size), 0)::bigint FROM raw_dumps",
                       &u.raw_orig_bytes, err)) < 0 ||
        (r = query_int(s, "SELECT count(*) FROM snapshots", &u.snapshots, err)) < 0 ||
        (r = query_int(s, "SELECT count(*) FROM stacks", &u.stacks, err)) < 0 ||
        (r = query_int(s, "SELECT count(*) FROM locations", &u.locations, err)) < 0 ||
        (r = query_int(s, "SELECT count(*) FROM functions", &u.functions, err)) < 0)
        return r;
    *ret = u;
    return 0;
}

/* ---- bulk rows for store_copy (copy.c) ---- */

int pgstore_copy_rows(struct store *s, const char *table, const char *cols, int ncols,
                      const struct store_copy_val *vals, size_t nrows, struct hp_buf *err)
{
    if (!nrows)
        return 0;
    size_t np = nrows * (size_t)ncols;
    struct hp_buf sql = HP_BUF_INIT(0);
    hp_buf_printf(&sql, "INSERT INTO %s(%s) VALUES ", table, cols);
    const char **pv = hp_xcalloc(np, sizeof(*pv));
    int *pl = hp_xcalloc(np, sizeof(*pl));
    int *pf = hp_xcalloc(np, sizeof(*pf));
    char (*num)[32] = hp_xcalloc(np, sizeof(*num));
    for (size_t r = 0; r < nrows; r++) {
        hp_buf_puts(&sql, r ? ", (" : "(");
        for (int c = 0; c < ncols; c++) {
            size_t k = r * (size_t)ncols + (size_t)c;
            const struct store_copy_val *v = &vals[k];
            hp_buf_printf(&sql, "%s$%zu", c ? ", " : "", k + 1);
            switch (v->type) {
            case SQLITE_INTEGER:
                snprintf(num[k], sizeof(num[k]), "%lld", (long long)v->i);
                pv[k] = num[k];
                break;
            case SQLITE_FLOAT:
                if (isnan(v->d))
                    snprintf(num[k], sizeof(num[k]), "NaN");
                else if (isinf(v->d))
                    snprintf(num[k], sizeof(num[k]), "%sInfinity", v->d < 0 ? "-" : "");
                else
                    snprintf(num[k], sizeof(num[k]), "%.17g", v->d);
                pv[k] = num[k];
                break;
            case SQLITE_TEXT:
                pv[k] = v->p;
                break;
            case SQLITE_BLOB:
                pv[k] = v->p ? v->p : "";
                pl[k] = (int)v->n;
                pf[k] = 1;
                break;
            default: /* NULL */
                break;
            }
        }
        hp_buf_puts(&sql, ")");
    }
    hp_buf_puts(&sql, " ON CONFLICT DO NOTHING");
    char what[96];
    snprintf(what, sizeof(what), "copying rows into %s", table);
    PGresult *res = NULL;
    int r = exec_params(s, sql.data, (int)np, pv, pl, pf, what, &res, err);
    PQclear(res);
    free(pv);
    free(pl);
    free(pf);
    free(num);
    hp_buf_release(&sql);
    return r;
}

int pgstore_query_int(struct store *s, const char *sql, int64_t *ret, struct hp_buf *err)
{
    return query_int(s, sql, ret, err);
}

int pgstore_exec_sql(struct store *s, const char *sql, struct hp_buf *err)
{
    return exec_raw(s, sql, "running SQL", err);
}

void pgstore_set_in_tx(struct store *s, bool in_tx)
{
    s->pg->in_tx = in_tx;
}
