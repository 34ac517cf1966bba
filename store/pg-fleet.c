/* pg-fleet.c: collectors sharing one fleet through PostgreSQL (store.h,
 * "collectors sharing a fleet"; tables in migrations-pg/0002-fleet.sql) and
 * retention by one process at a time.
 *
 * Who polls a node: among the live collectors (heartbeat within their
 * lease), the one with the highest hash of (collector id, node name)
 * (rendezvous hashing: when a collector comes or goes only its own share
 * moves). The hash only spreads the work; the guarantee is the claim row,
 * (node, round_key) unique, inserted before the node is polled. */
#include "store/store-internal.h"

#include <string.h>

/* "HPFL" + 3: retention. */
#define LOCK_RETAIN INT64_C(0x4850464c0003)
/* Claims of rounds older than this many intervals are deleted. */
#define CLAIMS_KEEP_ROUNDS 16

static int adhoc(struct store *s, const char *sql, sqlite3_stmt **ret, struct hp_buf *err)
{
    if (pgq_prepare(s, sql, ret) != SQLITE_OK)
        return store_sqlite_error(s, SQLITE_ERROR, "preparing a statement", err);
    return 0;
}

static int run(struct store *s, sqlite3_stmt *st, const char *what, struct hp_buf *err)
{
    int r = store_step_done(s, st, what, err);
    pgq_finalize(st);
    return r;
}

static int heartbeat(struct store *s, const struct store_collector_row *me, int64_t round_key,
                     int64_t claimed, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = adhoc(s,
                  "INSERT INTO collectors(id, host, pid, started_at, heartbeat_at, lease_ms,"
                  " interval_ms, round_key, claimed, polls_ok, polls_failed, store_errors,"
                  " last_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                  " ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
                  " started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,"
                  " lease_ms = excluded.lease_ms, interval_ms = excluded.interval_ms,"
                  " round_key = CASE WHEN ?8 > 0 THEN ?8 ELSE collectors.round_key END,"
                  " claimed = CASE WHEN ?8 > 0 THEN ?9 ELSE collectors.claimed END,"
                  " polls_ok = excluded.polls_ok, polls_failed = excluded.polls_failed,"
                  " store_errors = excluded.store_errors, last_error = excluded.last_error,"
                  " stopped_at = 0",
                  &st, err);
    if (r < 0)
        return r;
    pgq_bind_text(st, 1, me->id, -1, NULL);
    pgq_bind_text(st, 2, me->host, -1, NULL);
    pgq_bind_int64(st, 3, me->pid);
    pgq_bind_int64(st, 4, me->started_at);
    pgq_bind_int64(st, 5, hp_wall_ms());
    pgq_bind_int64(st, 6, me->lease_ms);
    pgq_bind_int64(st, 7, me->interval_ms);
    pgq_bind_int64(st, 8, round_key);
    pgq_bind_int64(st, 9, claimed);
    pgq_bind_int64(st, 10, me->polls_ok);
    pgq_bind_int64(st, 11, me->polls_failed);
    pgq_bind_int64(st, 12, me->store_errors);
    pgq_bind_text(st, 13, me->last_error, -1, NULL);
    return run(s, st, "recording the collector's heartbeat", err);
}

int store_fleet_heartbeat(struct store *s, const struct store_collector_row *me,
                          struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "a collector heartbeat", err)) < 0)
        return r;
    return heartbeat(s, me, 0, 0, err);
}

static uint64_t rendezvous(const char *collector, const char *node)
{
    uint64_t h = hp_hash_bytes(collector, strlen(collector), UINT64_C(0x52454e44));
    return hp_hash_bytes(node, strlen(node), h);
}

int store_fleet_claim(struct store *s, const struct store_collector_row *me, int64_t round_key,
                      const char *const *names, size_t n, bool *mine, struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "claiming nodes", err)) < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        mine[i] = false;
    int64_t now = hp_wall_ms();
    if ((r = heartbeat(s, me, 0, 0, err)) < 0)
        return r;

    /* The live collectors (this one included: it just heartbeated). */
    char **live = NULL;
    size_t nlive = 0, cap = 0;
    sqlite3_stmt *st;
    if ((r = adhoc(s, "SELECT id FROM collectors WHERE heartbeat_at >= ?1 - lease_ms"
                   " AND stopped_at = 0 ORDER BY id",
                   &st, err)) < 0)
        return r;
    pgq_bind_int64(st, 1, now);
    while ((r = store_step_row(s, st, "listing live collectors", err)) == 1) {
        live = hp_xgrow(live, &cap, nlive + 1, sizeof(*live));
        live[nlive++] = hp_xstrdup((const char *)pgq_column_text(st, 0));
    }
    pgq_finalize(st);
    struct hp_buf want = { 0 };
    size_t nwant = 0;
    if (r < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *best = me->id;
        uint64_t besth = 0;
        for (size_t c = 0; c < nlive; c++) {
            uint64_t h = rendezvous(live[c], names[i]);
            if (c == 0 || h > besth || (h == besth && strcmp(live[c], best) < 0)) {
                besth = h;
                best = live[c];
            }
        }
        if (strcmp(best, me->id) == 0) {
            hp_buf_printf(&want, "%s%s", nwant ? "\n" : "", names[i]);
            nwant++;
        }
    }
    int64_t claimed = 0;
    if (nwant) {
        /* Node names never hold a newline (hp_name_check). */
        if ((r = adhoc(s,
                       "INSERT INTO poll_claims(node, round_key, collector, claimed_at)"
                       " SELECT unnest(string_to_array(?1, E'\\n')), ?2, ?3, ?4"
                       " ON CONFLICT (node, round_key) DO NOTHING RETURNING node",
                       &st, err)) < 0)
            goto out;
        pgq_bind_text(st, 1, want.data, -1, NULL);
        pgq_bind_int64(st, 2, round_key);
        pgq_bind_text(st, 3, me->id, -1, NULL);
        pgq_bind_int64(st, 4, now);
        /* The result names the granted nodes; match them to names[]. */
        struct hp_arena arena;
        struct hp_strtab tab;
        hp_arena_init(&arena);
        hp_strtab_init(&tab, &arena);
        struct hp_map64 granted;
        hp_map64_init(&granted);
        while ((r = store_step_row(s, st, "claiming nodes", err)) == 1) {
            const char *name = (const char *)pgq_column_text(st, 0);
            const char *in = hp_strtab_intern(&tab, name, strlen(name));
            uint32_t old;
            (void)hp_map64_put(&granted, (uint64_t)(uintptr_t)in, 1, &old);
        }
        pgq_finalize(st);
        if (r == 0)
            for (size_t i = 0; i < n; i++) {
                const char *in = hp_strtab_intern(&tab, names[i], strlen(names[i]));
                uint32_t one;
                if (hp_map64_get(&granted, (uint64_t)(uintptr_t)in, &one) && !mine[i]) {
                    mine[i] = true;
                    claimed++;
                }
            }
        hp_map64_release(&granted);
        hp_strtab_release(&tab);
        hp_arena_release(&arena);
        if (r < 0)
            goto out;
    }
    if ((r = heartbeat(s, me, round_key, claimed, err)) < 0)
        goto out;
    if ((r = adhoc(s, "DELETE FROM poll_claims WHERE round_key < ?1", &st, err)) < 0)
        goto out;
    pgq_bind_int64(st, 1, round_key - CLAIMS_KEEP_ROUNDS);
    r = run(s, st, "deleting old claims", err);
out:
    for (size_t c = 0; c < nlive; c++)
        free(live[c]);
    free(live);
    hp_buf_release(&want);
    return r;
}

int store_fleet_list(struct store *s, store_collector_cb cb, void *ctx, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = adhoc(s,
                  "SELECT id, host, pid, started_at, heartbeat_at, lease_ms, interval_ms,"
                  " round_key, claimed, polls_ok, polls_failed, store_errors, last_error,"
                  " stopped_at FROM collectors ORDER BY id",
                  &st, err);
    if (r < 0)
        return r;
    int64_t now = hp_wall_ms();
    while ((r = store_step_row(s, st, "listing collectors", err)) == 1) {
        struct store_collector_row row = { 0 };
        store_col_text(st, 0, row.id, sizeof(row.id));
        store_col_text(st, 1, row.host, sizeof(row.host));
        row.pid = pgq_column_int64(st, 2);
        row.started_at = pgq_column_int64(st, 3);
        row.heartbeat_at = pgq_column_int64(st, 4);
        row.lease_ms = pgq_column_int64(st, 5);
        row.interval_ms = pgq_column_int64(st, 6);
        row.round_key = pgq_column_int64(st, 7);
        row.claimed = pgq_column_int64(st, 8);
        row.polls_ok = pgq_column_int64(st, 9);
        row.polls_failed = pgq_column_int64(st, 10);
        row.store_errors = pgq_column_int64(st, 11);
        store_col_text(st, 12, row.last_error, sizeof(row.last_error));
        row.stopped_at = pgq_column_int64(st, 13);
        row.alive = row.heartbeat_at >= now - row.lease_ms && row.stopped_at == 0;
        if ((r = cb(&row, ctx)) != 0)
            break;
    }
    pgq_finalize(st);
    return r < 0 ? r : r == 1 ? 0 : r;
}

int store_fleet_leave(struct store *s, const struct store_collector_row *me, struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "a collector's stop", err)) < 0)
        return r;
    /* Its last figures too: `query collectors` shows how it ended. */
    if ((r = heartbeat(s, me, 0, 0, err)) < 0)
        return r;
    sqlite3_stmt *st;
    if ((r = adhoc(s, "UPDATE collectors SET stopped_at = ?2 WHERE id = ?1", &st, err)) < 0)
        return r;
    pgq_bind_text(st, 1, me->id, -1, NULL);
    pgq_bind_int64(st, 2, hp_wall_ms());
    return run(s, st, "marking the collector stopped", err);
}

int store_fleet_claim_owner(struct store *s, const char *node, int64_t round_key, char *out,
                            size_t outsz, struct hp_buf *err)
{
    sqlite3_stmt *st;
    int r = adhoc(s, "SELECT collector FROM poll_claims WHERE node = ?1 AND round_key = ?2",
                  &st, err);
    if (r < 0)
        return r;
    pgq_bind_text(st, 1, node, -1, NULL);
    pgq_bind_int64(st, 2, round_key);
    if ((r = store_step_row(s, st, "reading a claim", err)) == 1)
        store_col_text(st, 0, out, outsz);
    pgq_finalize(st);
    return r;
}

int pgstore_retain_exclusive(struct store *s, const struct store_retain_policy *pol,
                             int64_t now_ms, struct store_retain_result *ret,
                             struct hp_buf *err);

int pgstore_retain_exclusive(struct store *s, const struct store_retain_policy *pol,
                             int64_t now_ms, struct store_retain_result *ret,
                             struct hp_buf *err)
{
    int r;
    if ((r = store_require_writer(s, "retention", err)) < 0)
        return r;
    sqlite3_stmt *st;
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", (long long)LOCK_RETAIN);
    if ((r = adhoc(s, sql, &st, err)) < 0)
        return r;
    if ((r = store_step_row(s, st, "taking the retention lock", err)) == 1)
        r = pgq_column_int64(st, 0) ? 1 : 0;
    pgq_finalize(st);
    if (r < 0)
        return r;
    if (r == 0) {
        /* Not an error: ret->skipped tells the caller, which says so
         * (library code returns, its caller logs once). */
        if (ret)
            *ret = (struct store_retain_result){ .skipped = true };
        return 0;
    }
    r = store_retain(s, pol, now_ms, ret, err);
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", (long long)LOCK_RETAIN);
    int r2 = store_exec(s, sql, r < 0 ? NULL : err);
    return r < 0 ? r : r2;
}
