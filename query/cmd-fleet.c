/* cmd-fleet.c: `query collectors` (the collectors sharing a fleet through
 * PostgreSQL, their identity and health) and `query migrate` (an SQLite
 * store into PostgreSQL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/cli.h"
#include "store/hp-opt.h"
#include "store/store.h"

static int print_collector_cb(const struct store_collector_row *row, void *ctx)
{
    int64_t now = *(const int64_t *)ctx;
    char hb[40], started[40];
    store_time_format(row->heartbeat_at, hb, sizeof(hb));
    store_time_format(row->started_at, started, sizeof(started));
    printf("%-24s %-20s %8lld  %-7s  %-20s %7.1fs  %-20s %10lld %7lld %8lld %8lld %8lld  %s\n",
           row->id, row->host, (long long)row->pid, row->alive ? "alive" : row->stopped_at ? "stopped" : "dead", hb,
           (double)(now - row->heartbeat_at) / 1000.0, started, (long long)row->round_key,
           (long long)row->claimed, (long long)row->polls_ok, (long long)row->polls_failed,
           (long long)row->store_errors, row->last_error);
    return 0;
}

int query_cmd_collectors(int argc, char **argv)
{
    const char *db = store_path_default(NULL);
    const struct hp_opt_usage u = {
        .prog = "query collectors",
        .usage = "query collectors [--db postgresql://...]",
        .text = "Lists the collectors sharing the fleet through PostgreSQL: identity,\n"
                "whether their lease holds (alive; dead: its lease ran out; stopped: it\n"
                "stopped cleanly and gave its nodes up), last heartbeat, the round they\n"
                "last claimed and how many nodes, polls and store errors since start.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "db", &db, "URI", "PostgreSQL URI ($HEAPFLEET_DB sets the default)"),
        HP_OPT_END(),
    };
    int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (n < 0)
        return rc;
    if (n > 0)
        return hp_opt_usage_error(&u, "unexpected argument %s", argv[0]);
    struct store *s;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(db, STORE_OPEN_READ, &s, &err);
    if (r == 0) {
        int64_t now = hp_wall_ms();
        printf("%-24s %-20s %8s  %-7s  %-20s %8s  %-20s %10s %7s %8s %8s %8s  %s\n", "COLLECTOR",
               "HOST", "PID", "LEASE", "HEARTBEAT", "AGE", "STARTED", "ROUND", "CLAIMED", "OK",
               "FAILED", "STORE_ERR", "LAST ERROR");
        r = store_fleet_list(s, print_collector_cb, &now, &err);
        store_close(s);
    }
    if (r < 0)
        fprintf(stderr, "query collectors: %s\n", err.data ? err.data : hp_strerror(r));
    hp_buf_release(&err);
    return r < 0 ? 1 : 0;
}

static void migrate_progress_cb(const struct store_copy_table *t, void *ctx)
{
    (void)ctx;
    if (t->checked)
        printf("%-20s %12lld rows in the source, %12lld copied now, %12lld in the target: %s\n",
               t->table, (long long)t->source_rows, (long long)t->copied_rows,
               (long long)t->dest_rows, t->dest_rows == t->source_rows ? "ok" : "MISMATCH");
    else
        fprintf(stderr, "query migrate: %s: %lld of %lld rows\n", t->table,
                (long long)t->copied_rows, (long long)t->source_rows);
}

int query_cmd_migrate(int argc, char **argv)
{
    const char *from = NULL, *to = NULL;
    const struct hp_opt_usage u = {
        .prog = "query migrate",
        .usage = "query migrate --from heapfleet.db --to postgresql://...",
        .text = "Copies an SQLite store into PostgreSQL: raw dumps, call trees, figures,\n"
                "failed attempts and the symbol cache, ids kept. Resumable: run it again\n"
                "after an interruption and it continues where the target stops. Each\n"
                "table's row count is checked on both sides at the end.\n",
    };
    const struct hp_opt opts[] = {
        HP_OPT_STRING(0, "from", &from, "FILE", "the SQLite store"),
        HP_OPT_STRING(0, "to", &to, "URI", "the PostgreSQL database (postgresql://...)"),
        HP_OPT_END(),
    };
    int rc, n = hp_opt_parse(&u, opts, argc, argv, NULL, &rc);
    if (n < 0)
        return rc;
    if (n > 0)
        return hp_opt_usage_error(&u, "unexpected argument %s", argv[0]);
    if (!from || !to)
        return hp_opt_usage_error(&u, "--from and --to are both needed");
    if (store_is_postgres(from) || !store_is_postgres(to))
        return hp_opt_usage_error(&u, "--from is an SQLite file and --to a postgresql:// URI");
    struct store *src = NULL, *dst = NULL;
    struct hp_buf err = HP_BUF_INIT(0);
    int r = store_open(from, STORE_OPEN_READ, &src, &err);
    if (r == 0)
        r = store_open(to, STORE_OPEN_WRITE, &dst, &err);
    if (r == 0)
        r = store_copy(src, dst, migrate_progress_cb, NULL, &err);
    if (r < 0)
        fprintf(stderr, "query migrate: %s\n", err.data ? err.data : hp_strerror(r));
    else
        printf("migrated %s into %s: every table's row count matches\n", store_path(src),
               store_path(dst));
    store_close(dst);
    store_close(src);
    hp_buf_release(&err);
    return r < 0 ? 1 : 0;
}
