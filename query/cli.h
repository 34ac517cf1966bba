/* The `query` executable's shared plumbing: the command table, common
 * options, and loading a profile from a selector (a file path today; stored
 * snapshots through store/ once wired). Private to query/ executables. */
#ifndef HP_QUERY_CLI_H
#define HP_QUERY_CLI_H

#include <stdio.h>

#include "query/query.h"
#include "store/hp-opt.h"

struct store;

struct query_cli {
    const char *prog;       /* "query top" etc., for messages */
    const char *binary;     /* --binary FILE */
    const char *symbols;    /* --symbols DIR */
    const char *db;         /* --db PATH (or $HEAPFLEET_DB) */
    bool no_symbolize;      /* --no-symbolize */
    bool no_cache;          /* --no-cache: no on-disk symbol cache */
    enum query_format format;
    unsigned top_text;      /* --top default for text output (30; leaks 20) */
    struct query_opts qo;
};

/* Set the defaults: text format, inuse_space, --db from $HEAPFLEET_DB. A
 * command changes c's fields before building its option table, and --help
 * shows what it set. */
void query_cli_init(struct query_cli *c, const char *prog);
/* hp_opt_parse, then the --top default for the chosen format. */
int query_cli_parse(struct query_cli *c, const struct hp_opt_usage *u, const struct hp_opt *opts,
                    int argc, char **argv, int *ret_exit);

int query_cli_format_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
void query_cli_format_show(const struct hp_opt *o, struct hp_buf *out);
int query_cli_sample_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
void query_cli_sample_show(const struct hp_opt *o, struct hp_buf *out);
int query_cli_top_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err);
void query_cli_top_show(const struct hp_opt *o, struct hp_buf *out);

/* The options every profile command takes, as entries of an hp_opt table
 * (c is a struct query_cli *). `formats` is the --help text of the formats
 * the command writes ("text|json"); `dot` false leaves out the dot-only
 * options (their names are NULL, so they are neither listed nor taken). */
#define QUERY_CLI_OPTS(c, formats, dot)                                                       \
    HP_OPT_GROUP("profile options:"),                                                          \
    HP_OPT_CALLBACK(0, "format", &(c)->format, "F", formats,                                   \
                    query_cli_format_cb, query_cli_format_show),                               \
    HP_OPT_CALLBACK(0, "sample", &(c)->qo.sample, "S",                                         \
                    "inuse_space|inuse_objects|alloc_space|alloc_objects",                    \
                    query_cli_sample_cb, query_cli_sample_show),                               \
    HP_OPT_CALLBACK_F(0, "inuse_space", &(c)->qo.sample, NULL,                                 \
                      "jeprof spelling of --sample inuse_space (also --inuse_objects,\n"     \
                      "--alloc_space, --alloc_objects)",    \
                      query_cli_sample_cb, NULL, HP_OPT_NOARG, 0),                             \
    HP_OPT_CALLBACK_F(0, "inuse_objects", &(c)->qo.sample, NULL, NULL, query_cli_sample_cb,    \
                      NULL, HP_OPT_NOARG, 0),                                                  \
    HP_OPT_CALLBACK_F(0, "alloc_space", &(c)->qo.sample, NULL, NULL, query_cli_sample_cb,      \
                      NULL, HP_OPT_NOARG, 0),                                                  \
    HP_OPT_CALLBACK_F(0, "alloc_objects", &(c)->qo.sample, NULL, NULL, query_cli_sample_cb,    \
                      NULL, HP_OPT_NOARG, 0),                                                  \
    HP_OPT_STRING(0, "binary", &(c)->binary, "FILE",                                          \
                  "the main executable the profile was taken from"),                          \
    HP_OPT_STRING(0, "symbols", &(c)->symbols, "DIR",                                         \
                  "folder of binaries/debug files (also .build-id/xx/rest.debug)"),           \
    HP_OPT_BOOL(0, "no-symbolize", &(c)->no_symbolize, "keep raw addresses"),                 \
    HP_OPT_BOOL(0, "no-cache", &(c)->no_cache,                                                \
                "neither read nor write the symbol cache\n"                                   \
                "($XDG_CACHE_HOME/heapfleet/sym, else ~/.cache/heapfleet/sym)"),              \
    HP_OPT_BOOL(0, "no-inline", &(c)->qo.no_inline, "one frame per address (no inlined frames)"), \
    HP_OPT_BOOL(0, "lines", &(c)->qo.with_lines, "frame names carry file:line"),              \
    HP_OPT_BOOL(0, "keep-allocator", &(c)->qo.keep_allocator,                                 \
                "keep jemalloc's own frames at the leaf end"),                                \
    HP_OPT_STRING(0, "focus", &(c)->qo.focus, "RE",                                           \
                  "only stacks with a frame matching RE (POSIX ERE)"),                        \
    HP_OPT_STRING(0, "ignore", &(c)->qo.ignore, "RE", "drop stacks with a frame matching RE"), \
    HP_OPT_CALLBACK(0, "top", (c), "N", "rows in tables (0 = all)", query_cli_top_cb,          \
                    query_cli_top_show),                                                       \
    HP_OPT_DOUBLE(0, (dot) ? "nodefraction" : NULL, &(c)->qo.nodefraction, 0, 1, "F",         \
                  "dot: hide functions under this share"),                                    \
    HP_OPT_DOUBLE(0, (dot) ? "edgefraction" : NULL, &(c)->qo.edgefraction, 0, 1, "F",         \
                  "dot: hide calls under this share"),                                        \
    HP_OPT_STRING(0, "title", &(c)->qo.title, "TEXT",                                         \
                  "title of text, SVG and dot outputs and pprof comment (default:\n"        \
                  "the snapshot's id, node and time, or the file and its time)"),              \
    HP_OPT_STRING(0, "db", &(c)->db, "PATH", "SQLite file or postgresql:// URI ($HEAPFLEET_DB sets the default)")

/* Load (and symbolize) the profile a selector names; ret_ref (may be NULL)
 * says which snapshot or file it was. */
/* What a dump file's name says (ingest_dumpname_parse on its last path
 * component): the pid, 0 when it names none, and the unix time, -1 when it
 * states none (ingest_dumpname_time). */
void query_cli_dump_name(const char *path, int64_t *ret_pid, int64_t *ret_time);

int query_cli_load(struct query_cli *c, const char *selector, struct profile **ret,
                   struct query_snapref *ret_ref, struct hp_buf *err);
/* Symbolize p in place (files found from binary/symbols, the maps paths on
 * this host, /usr/lib/debug, debuginfod); objects that could not be used are
 * reported on stderr as warnings prefixed with prog. Answers are read from
 * and written to the on-disk symbol cache (keyed by build-id) unless
 * no_cache. */
int query_cli_symbolize(const char *prog, const char *binary, const char *symbols,
                        bool no_cache, struct profile *p, struct hp_buf *err);
/* After reading a profile file: warn on stderr about lines the reader
 * skipped, and refuse (HP_EUSAGE, err lists the values the file has) a
 * --sample value the file does not carry. */
int query_cli_check_values(const char *prog, const char *path, const struct profile *p,
                           enum profile_value sample, struct hp_buf *err);
/* Print an error "query top: <message>" to stderr; returns exit code 1. */
int query_cli_fail(const struct query_cli *c, const char *msg);
/* Write a buffer to stdout; 0 or 1 (exit code) on a write error. */
int query_cli_write(const struct hp_buf *b);

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
/* query symbols add|list (cmd-symbols.c). */
int query_cmd_symbols(int argc, char **argv);
/* The local folder the store `db` (NULL: the default) mirrors its uploaded
 * symbol files into (store_symfiles_dir_default), malloc'ed, or NULL. */
char *query_symbols_dir(const char *db);
/* Mirror the open store's uploaded symbol files into that folder (a
 * failure is said on stderr: what was copied is still used). 0 with
 * *ret_dir (malloc'ed), or HP_ENOTFOUND when there is no such folder. */
int query_symbols_mirror(struct store *st, const char *db, char **ret_dir);
int query_cmd_nodes(int argc, char **argv);
int query_cmd_collectors(int argc, char **argv);
int query_cmd_migrate(int argc, char **argv);
int query_cmd_snapshots(int argc, char **argv);
int query_cmd_retain(int argc, char **argv);
int query_store_load(const char *db, const char *selector, struct profile **ret,
                     struct query_snapref *ret_ref, struct hp_buf *err);
/* The raw dump a stored snapshot was read from, byte for byte as the node
 * served it (*ret_data malloc'd); HP_ENOTFOUND also when it kept none. */
int query_store_raw(const char *db, const char *selector, void **ret_data, size_t *ret_len,
                    struct query_snapref *ret_ref, struct hp_buf *err);

/* When NAME is not a node of the open store S, appends " (did you mean
 * \"be-17\"?)" to err for the closest stored name within a few edits
 * (nothing when none is close). */
void query_node_hint(struct store *s, const char *name, struct hp_buf *err);

#endif
