/* pg-shim.h: the part of SQLite's C API the store's logic uses, on libpq.
 * Included (by store-internal.h) only in the PostgreSQL compilation of
 * write.c, read.c, retain.c and symcache.c (backend.h), after <sqlite3.h>,
 * so the SQLITE_* codes keep their values and each sqlite3_* call below
 * becomes a pgq_* call of pg.c.
 *
 * A statement (struct sqlite3_stmt, complete only here) holds its SQL in
 * PostgreSQL's dialect ($n parameters; pg.c translates ?n and :name once),
 * its bound parameters (numbers and text as text, blobs as binary bytea)
 * and, once stepped, the whole PGresult in binary format; sqlite3_step
 * walks its rows. An INSERT into a table with an id gets "RETURNING id"
 * appended, which is how sqlite3_last_insert_rowid is answered. */
#ifndef HP_STORE_PG_SHIM_H
#define HP_STORE_PG_SHIM_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

struct store;

#define PGQ_MAX_PARAMS 32

struct sqlite3_stmt {
    struct store *s;
    char *sql;            /* PostgreSQL dialect */
    int nparams;
    char *names[PGQ_MAX_PARAMS]; /* ":name" of $i+1, NULL for numbered */
    const char *vals[PGQ_MAX_PARAMS];
    int lens[PGQ_MAX_PARAMS];
    int fmts[PGQ_MAX_PARAMS];
    char num[PGQ_MAX_PARAMS][32]; /* text of bound numbers */
    char *owned[PGQ_MAX_PARAMS];  /* copies of text bound with a length */
    bool returns_id;      /* "RETURNING id" was appended: not a row for the caller */
    bool adhoc;           /* from sqlite3_prepare_v2: freed by sqlite3_finalize */
    PGresult *res;
    int nrows, row;
    char scratch[64];     /* sqlite3_column_text of a number */
};

int pgq_bind_int64(sqlite3_stmt *st, int i, int64_t v);
int pgq_bind_double(sqlite3_stmt *st, int i, double v);
int pgq_bind_text(sqlite3_stmt *st, int i, const char *v, int n, void (*destructor)(void *));
int pgq_bind_blob(sqlite3_stmt *st, int i, const void *v, int n, void (*destructor)(void *));
int pgq_bind_parameter_index(sqlite3_stmt *st, const char *name);
int pgq_step(sqlite3_stmt *st);
int pgq_reset(sqlite3_stmt *st);
int pgq_finalize(sqlite3_stmt *st);
int64_t pgq_column_int64(sqlite3_stmt *st, int col);
double pgq_column_double(sqlite3_stmt *st, int col);
const unsigned char *pgq_column_text(sqlite3_stmt *st, int col);
const void *pgq_column_blob(sqlite3_stmt *st, int col);
int pgq_column_bytes(sqlite3_stmt *st, int col);
int pgq_column_type(sqlite3_stmt *st, int col);
int pgq_prepare(struct store *s, const char *sql, sqlite3_stmt **ret);
int64_t pgq_last_insert_rowid(struct store *s);
int64_t pgq_changes(struct store *s);

#define sqlite3_bind_int64 pgq_bind_int64
#define sqlite3_bind_int(st, i, v) pgq_bind_int64((st), (i), (int64_t)(v))
#define sqlite3_bind_double pgq_bind_double
#define sqlite3_bind_text pgq_bind_text
#define sqlite3_bind_blob pgq_bind_blob
#define sqlite3_bind_parameter_index pgq_bind_parameter_index
#define sqlite3_step pgq_step
#define sqlite3_reset pgq_reset
#define sqlite3_finalize pgq_finalize
#define sqlite3_column_int64 pgq_column_int64
#define sqlite3_column_int(st, c) ((int)pgq_column_int64((st), (c)))
#define sqlite3_column_double pgq_column_double
#define sqlite3_column_text pgq_column_text
#define sqlite3_column_blob pgq_column_blob
#define sqlite3_column_bytes pgq_column_bytes
#define sqlite3_column_type pgq_column_type
/* Every use passes the store's own handle (s->db): the connection is s->pg. */
#define sqlite3_prepare_v2(db, sql, n, ret, tail) pgq_prepare(s, (sql), (ret))
#define sqlite3_last_insert_rowid(db) pgq_last_insert_rowid(s)
#define sqlite3_changes(db) ((int)pgq_changes(s))

#endif
