/* Helpers for the query tests: run the jefixture program to get real
 * jemalloc dumps, run real tools (jeprof, addr2line) and read their output,
 * and name a profile's frames with addr2line until heapfleet's own
 * symbolizer is wired into these tests. */
#ifndef HP_TESTS_QTEST_H
#define HP_TESTS_QTEST_H

#include <stdbool.h>
#include <stddef.h>

#include "query/query.h"

/* A fresh temporary directory (removed, with everything in it, by
 * qt_tmpdir_remove, which also frees the string). */
char *qt_tmpdir(void);
void qt_tmpdir_remove(char *dir);
/* "<dir>/<name>", malloc'd. */
char *qt_path(const char *dir, const char *name);

/* Run argv with extra environment entries ("K=V", NULL-terminated list or
 * NULL), stdout to out_path (or /dev/null when NULL). Returns the exit
 * status, or -1 if it could not run. */
int qt_run(char *const argv[], char *const env[], const char *out_path);

/* The jefixture executable ($JEFIXTURE, set by meson). */
const char *qt_jefixture(void);

/* Run jefixture with MALLOC_CONF=prof:true,lg_prof_sample:<lg> and extra
 * arguments (NULL-terminated), writing dumps named in `dumps` into dir.
 * Returns 0 on success. */
int qt_jefixture_run(const char *dir, int lg_sample, const char *const *args,
                     const char *const *dumps, size_t ndumps);

/* The same with a whole MALLOC_CONF value (e.g. "prof:true,prof_accum:true"). */
int qt_jefixture_conf(const char *dir, const char *malloc_conf, const char *const *args,
                      const char *const *dumps, size_t ndumps);

/* Parse a profile file; fails the test on error. */
struct profile *qt_parse(const char *path);

/* Flag locations inside libjemalloc as the allocator's own (what the
 * symbolizer will do), name the locations inside `binary` with
 * `addr2line -f -e binary`, and those in other objects "object+0xoffset"
 * (stable across processes). Returns the number named by addr2line. */
size_t qt_symbolize(struct profile *p, const char *binary);

/* Only flag libjemalloc's locations as the allocator's own. */
void qt_flag_allocator(struct profile *p);

/* Fold with default options (inuse_space), asserting success. */
struct query_folded *qt_fold(const struct profile *p);

/* Read a whole file into a NUL-terminated string (malloc'd). */
char *qt_slurp(const char *path);

#endif
