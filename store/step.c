/* Stepping a prepared statement to its end or to its next row, with the
 * engine's error in words: one text for both engines (store/backend.h
 * compiles it once over SQLite and once over libpq, where pg-shim.h makes
 * each sqlite3_* call a pgq_* one). */
#include "store/store-internal.h"

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
