/* Statement helpers that read the same on both engines: stepping to the
 * end or to the next row with the engine's error in words, a text column,
 * the writer check. store/backend.h compiles this file once over SQLite and
 * once over libpq, where pg-shim.h makes each sqlite3_* call a pgq_* one. */
#include "store/store-internal.h"

#include <stdio.h>

int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct hp_buf *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        sqlite3_reset(st);
        return 0;
    }
    int r = store_sqlite_error(s, rc, what, err);
    sqlite3_reset(st);
    return r;
}

int store_step_row(struct store *s, sqlite3_stmt *st, const char *what, struct hp_buf *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    int r = store_sqlite_error(s, rc, what, err);
    sqlite3_reset(st);
    return r;
}

void store_col_text(sqlite3_stmt *st, int col, char *out, size_t outsz)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(out, outsz, "%s", t ? (const char *)t : "");
}

int store_ping(struct store *s, struct hp_buf *err)
{
    return store_exec(s, "SELECT 1", err);
}

int store_require_writer(struct store *s, const char *what, struct hp_buf *err)
{
    if (s->writer)
        return 0;
    hp_err_printf(err, "%s: %s needs a database opened for writing", s->path, what);
    return HP_EUSAGE;
}
