/* The `query` executable's shared plumbing: the command table, common
 * options, and loading a profile from a selector (a file path today; stored
 * snapshots through store/ once wired). Private to query/ executables. */
#ifndef HP_QUERY_CLI_H
#define HP_QUERY_CLI_H

#include <stdio.h>

#include "query/query.h"

struct query_cli {
    const char *prog;       /* "query top" etc., for messages */
    const char *binary;     /* --binary FILE */
    const char *symbols;    /* --symbols DIR */
    const char *db;         /* --db PATH (or $HEAPFLEET_DB) */
    bool no_symbolize;      /* --no-symbolize */
    enum query_format format;
    struct query_opts qo;
};

/* Options every profile command takes. Returns 1 if handled (and *ret_used
 * args consumed), 0 if not ours, <0 with a message printed on bad values. */
int query_cli_common_opt(struct query_cli *c, int argc, char **argv, int i, int *ret_used);
void query_cli_init(struct query_cli *c, const char *prog);
/* Load (and symbolize) the profile a selector names. */
int query_cli_load(struct query_cli *c, const char *selector, struct profile **ret,
                   struct hp_buf *err);
/* Symbolize p in place (files found from binary/symbols, the maps paths on
 * this host, /usr/lib/debug, debuginfod); objects that could not be used are
 * reported on stderr as warnings prefixed with prog. */
int query_cli_symbolize(const char *prog, const char *binary, const char *symbols,
                        struct profile *p, struct hp_buf *err);
/* Print an error "query top: <message>" to stderr; returns exit code 1. */
int query_cli_fail(const struct query_cli *c, const char *msg);
int query_cli_usage(const struct query_cli *c, const char *usage);
/* Write a buffer to stdout; 0 or 1 (exit code) on a write error. */
int query_cli_write(const struct hp_buf *b);

extern const char query_cli_common_help[];

int query_cmd_top(int argc, char **argv);
int query_cmd_export(int argc, char **argv);
int query_cmd_diff(int argc, char **argv);
int query_cmd_fleet(int argc, char **argv);
int query_cmd_trend(int argc, char **argv);
int query_cmd_leaks(int argc, char **argv);
int query_cmd_discrepancy(int argc, char **argv);

/* query/cmd-store.c: the store's commands, and loading a stored snapshot
 * (NODE, NODE@TIME, #ID) from database `db`; HP_ENOTFOUND when the
 * selector names nothing stored (err says so). */
int query_cmd_import(int argc, char **argv);
int query_cmd_reindex(int argc, char **argv);
int query_cmd_nodes(int argc, char **argv);
int query_cmd_snapshots(int argc, char **argv);
int query_cmd_retain(int argc, char **argv);
int query_store_load(const char *db, const char *selector, struct profile **ret,
                     struct hp_buf *err);

#endif
