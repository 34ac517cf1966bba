/* agent: the node-side helper that serves heap dump files, binaries by
 * build-id and process figures to the collector, read-only.
 *
 * This header is the module's one public interface. The pieces are plain
 * functions so that the parsers can be unit-tested and fuzzed without a
 * server: dump file names, query strings, /proc text, and the folder access
 * that decides what may be served at all. The HTTP server (server.c) and the
 * executable (main.c) wire them to one libuv loop.
 *
 * Thread context: everything here may be called from any thread unless a
 * comment says otherwise; struct agent_folders is read-only after
 * agent_folders_open() and may be shared by worker threads. */
#ifndef HP_AGENT_H
#define HP_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/ingest/ingest.h"
#include "store/hp.h"

/* ---- dump file names ----------------------------------------------------- */

#define AGENT_NAME_MAX 255 /* longest file name considered (NAME_MAX) */

/* ---- HTTP request pieces -------------------------------------------------- */

#define AGENT_QUERY_MAX 4096 /* longest query string and longest decoded value */

/* Find `key` in a query string (the part after '?', without it) and
 * percent-decode its value into out (NUL-terminated). Returns 1 found (value
 * length in *ret_len), 0 absent, HP_EPARSE on a malformed escape, a decoded
 * NUL byte or a repeated key (two values would let a proxy and this agent
 * disagree on which one counts), HP_ETOOBIG when the value exceeds outsz - 1. */
int agent_query_get(const char *qs, size_t qlen, const char *key, char *out, size_t outsz,
                    size_t *ret_len);

/* A Range request header (RFC 9110 14.2) for a file of `size` bytes: 1 and
 * [*ret_start, *ret_end) for one satisfiable range ("bytes=N-", "bytes=N-M",
 * "bytes=-N", the last N bytes); 0 when the header is to be ignored and the
 * whole file sent (not "bytes=", several ranges, malformed numbers: the
 * RFC lets a server ignore what it does not support); -1 when the range
 * starts at or past the end (416, with "Content-Range: bytes *\/size"). */
int agent_range_parse(const char *v, size_t n, uint64_t size, uint64_t *ret_start,
                      uint64_t *ret_end);

/* A route is chosen on the raw path, before any decoding, so an encoded
 * "%2e%2e" or "%2f" can never be turned into a different route. */
enum agent_route {
    AGENT_ROUTE_NONE,
    AGENT_ROUTE_HEALTH,
    AGENT_ROUTE_DUMPS,
    AGENT_ROUTE_NEWEST,
    AGENT_ROUTE_FILE,
    AGENT_ROUTE_IDENTITY,
    AGENT_ROUTE_PROC,
    AGENT_ROUTE_BUILDID_EXEC,
    AGENT_ROUTE_BUILDID_DEBUG,
    AGENT_ROUTE_DELETE, /* POST /dumps/delete?path=ABS: the collector stored it */
};

#define AGENT_BUILD_ID_HEX_MAX 128

/* Map a raw request path (without the query) to a route. For the buildid
 * routes the lowercase hex build-id is written to build_id (at least
 * AGENT_BUILD_ID_HEX_MAX + 1 bytes). Anything not matching exactly is
 * AGENT_ROUTE_NONE. */
enum agent_route agent_route_match(const char *path, size_t len, char *build_id);

/* ---- /proc figures -------------------------------------------------------- */

#define AGENT_PROC_FIELDS_MAX 64

struct agent_proc_field {
    char key[32];
    uint64_t value; /* bytes for "kB" lines, the bare number otherwise */
    bool bytes;     /* the line was in kB */
};

struct agent_proc_fields {
    struct agent_proc_field f[AGENT_PROC_FIELDS_MAX];
    size_t n;
    char name[32]; /* "Name:" line of /proc/<pid>/status, "" if none */
};

/* Parse the "Key:   123 kB" lines of /proc/<pid>/status or smaps_rollup.
 * Lines that are not of that shape (the smaps_rollup address header, "Name:",
 * signal masks in hex) are skipped; the first AGENT_PROC_FIELDS_MAX numeric
 * fields are kept. Never fails: garbage yields no fields. */
void agent_proc_parse(const char *text, size_t len, struct agent_proc_fields *ret);
/* 1 and *ret_value when key is present, else 0. */
int agent_proc_get(const struct agent_proc_fields *p, const char *key, uint64_t *ret_value);
/* The process start time from /proc/<pid>/stat (its 22nd field, clock
 * ticks after boot; the command name in parentheses may hold anything, so
 * fields count from the last ')') and /proc/stat's "btime" line (boot time,
 * Unix seconds): 1 and *ret_s (Unix seconds, fractional), 0 when either
 * text does not say. ticks_per_s is sysconf(_SC_CLK_TCK). */
int agent_proc_start_time(const char *stat, size_t stat_len, const char *sys_stat,
                          size_t sys_len, long ticks_per_s, double *ret_s);

/* ---- the served folders --------------------------------------------------- */

#define AGENT_FOLDERS_MAX 16
#define AGENT_LIST_MAX 4096 /* dumps listed per request */

struct agent_folder {
    char *path; /* realpath of the folder as configured */
    int fd;     /* O_DIRECTORY|O_PATH descriptor held for the life of the agent */
};

struct agent_folders {
    struct agent_folder dir[AGENT_FOLDERS_MAX];
    size_t n;
};

struct agent_dump {
    char name[AGENT_NAME_MAX + 1];
    size_t folder; /* index into agent_folders.dir */
    uint64_t size;
    int64_t mtime_ns;
    struct ingest_dumpname parsed;
};

/* Open each comma-separated folder (realpath, then O_DIRECTORY). */
int agent_folders_open(struct agent_folders *f, const char *csv, struct hp_buf *err);
void agent_folders_close(struct agent_folders *f);

/* List the dump files (regular files with one link whose names parse as
 * dumps; symlinks are never followed) in every folder, newest first (mtime, then name). At most
 * AGENT_LIST_MAX entries; *ret is malloc'ed, free() it. Blocking: worker
 * threads only. */
int agent_dumps_list(const struct agent_folders *f, struct agent_dump **ret, size_t *ret_n,
                     struct hp_buf *err);

/* Open a dump for reading by file name (any folder) or by absolute path
 * (its directory must resolve to a configured folder). Refuses, with
 * HP_ERR(EACCES), every name that is not a plain dump file name: "..", "/",
 * NUL, symlinks, non-regular files, files with several hard links, names
 * that are not dumps. HP_ENOTFOUND
 * when there is no such dump. On success *ret_fd is an open O_RDONLY
 * descriptor and *ret describes the file. Blocking: worker threads only. */
int agent_dump_open_name(const struct agent_folders *f, const char *name, int *ret_fd,
                         struct agent_dump *ret, struct hp_buf *err);
int agent_dump_open_path(const struct agent_folders *f, const char *path, int *ret_fd,
                         struct agent_dump *ret, struct hp_buf *err);

/* 1 when the dump looks finished (a jemalloc text dump whose tail holds the
 * "MAPPED_LIBRARIES:" trailer, or any other kind), 0 when it is still being
 * written. Reads at most the last 1 MiB. */
int agent_dump_complete(int fd, uint64_t size, const struct ingest_dumpname *dn);

/* Housekeeping: in each folder, delete all but the newest `keep` dumps of each
 * prefix (kind + prefix). Logs every deletion. Returns the number deleted or a
 * negative error. Blocking: worker threads only. */
int agent_dumps_prune(const struct agent_folders *f, unsigned keep, struct hp_buf *err);

/* Delete one dump the agent serves (the collector's delete_after_fetch=yes):
 * the same checks as serving it by path (absolute, no "."/".." components,
 * in a served folder, a dump file name, a regular file with one link), then
 * unlinked in its folder. 0, HP_ENOTFOUND, or a negative error (EACCES for
 * anything the agent would not serve) with err saying why. Blocking. */
int agent_dump_delete_path(const struct agent_folders *f, const char *path, struct hp_buf *err);

/* The --keep default: dumps kept per prefix in each folder. Doris writes a
 * new file on every /jeheap/dump and never deletes one; a collector polling
 * hourly has stored every dump long before 24 newer ones exist. */
#define AGENT_KEEP_DEFAULT 24

/* Extract the absolute file paths of /proc/<pid>/maps text (also the format
 * of a jemalloc dump's MAPPED_LIBRARIES tail). Calls cb for each distinct path
 * in order of first appearance; stops early when cb returns non-zero. Lines
 * that are not maps lines are skipped. */
void agent_maps_paths(const char *text, size_t len, int (*cb)(const char *path, void *arg),
                      void *arg);


#endif
