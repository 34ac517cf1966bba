/* Profile parsers: bytes in, struct profile out.
 *
 * Formats are detected from content, never from a file name:
 *   jemalloc  "heap_v2/<period>" threaded dumps (prof.dump)
 *   gperftools "heap profile: ..." (heapprofile, heap_v2/N, heap/N, growth)
 *   pprof     profile.proto, gzipped or not
 *   collapsed "frame;frame;frame <value>" lines
 *
 * Parsing is streaming: feed chunks as they arrive (from curl or a file) and
 * finish at the end; text formats are processed a line at a time, so memory is
 * bounded by the limits below plus the profile being built. Every size that
 * comes from the input is capped; an input over a cap is refused with
 * HP_ETOOBIG, malformed input with HP_EPARSE, and `err` says where (line or
 * byte offset) and what was expected.
 *
 * Thread context: any thread; a parser is used by one thread at a time. */
#ifndef HP_INGEST_H
#define HP_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "store/hp.h"
#include "store/profile.h"

struct ingest_limits {
    size_t max_bytes;      /* whole input (after gunzip for pprof) */
    size_t max_line;       /* one text line */
    uint32_t max_frames;   /* frames in one stack */
    size_t max_stacks;     /* distinct stacks (samples) */
    size_t max_mappings;   /* MAPPED_LIBRARIES lines */
    size_t max_threads;    /* per-thread records in a jemalloc header */
};

/* 2 GiB input, 1 MiB lines, 4096 frames, 4M stacks, 64k mappings, 64k threads. */
void ingest_limits_default(struct ingest_limits *l);

/* Guess the format from the first bytes (at least 64 are best). */
enum profile_format ingest_detect(const void *data, size_t len);

struct ingest_parser;

/* lim may be NULL for the defaults. */
struct ingest_parser *ingest_parser_new(const struct ingest_limits *lim);
void ingest_parser_free(struct ingest_parser *ps);
/* Feed the next chunk. After an error every later call returns the same error. */
int ingest_parser_feed(struct ingest_parser *ps, const void *data, size_t len,
                       struct hp_buf *err) HP_MUST_CHECK;
/* End of input: on success *ret is a finished (mapped, un-sampled) profile
 * owned by the caller. */
int ingest_parser_finish(struct ingest_parser *ps, struct profile **ret,
                         struct hp_buf *err) HP_MUST_CHECK;

/* One-shot convenience: parse a whole buffer. */
int ingest_parse(const void *data, size_t len, const struct ingest_limits *lim,
                 struct profile **ret, struct hp_buf *err) HP_MUST_CHECK;
/* Whether a file's first bytes look like a profile this module reads
 * (ingest_detect on its first 4 KiB): 1 yes, 0 no (a log, a .dot or .svg
 * file, an empty file), <0 when it cannot be read. For folder imports that
 * must skip what a database writes beside its dumps. */
int ingest_file_sniff(const char *path);
/* Read and parse a file (size capped by lim->max_bytes). */
int ingest_parse_file(const char *path, const struct ingest_limits *lim, struct profile **ret,
                      struct hp_buf *err) HP_MUST_CHECK;

/* Parse one /proc/<pid>/maps line into m (strings point into `line`, which
 * must stay alive until the mapping is added to a profile; the path is
 * NUL-terminated in place, so line[len] must be writable). Returns 1 for a
 * mapping, 0 for a line that is not one (blank, build-id hints), <0 on error. */
int ingest_maps_line(char *line, size_t len, struct profile_mapping *m);

/* ---- dump file names (dumpname.c) ---------------------------------------- */

#define INGEST_DUMPNAME_MAX 255 /* longest file name considered (NAME_MAX) */

enum ingest_dump_kind {
    INGEST_DUMP_JEMALLOC,   /* <prefix>.<pid>.<seq>.<i|m|u><n>.heap, <prefix>.<pid>.<seq>.f.heap */
    INGEST_DUMP_DORIS,      /* jeheap_dump.<time>.<pid>.<rand>.heap (Doris /jeheap/dump) */
    INGEST_DUMP_RISINGWAVE, /* <YYYY-mm-dd-HH-MM-SS>.auto.heap / .manual.heap */
    INGEST_DUMP_STARROCKS,  /* heap_profile.<pid>.<rand> (StarRocks /pprof/heap leftovers) */
    INGEST_DUMP_HEAP,       /* any other <name>.heap (prof.dump with an explicit name) */
};

/* What jemalloc or the database says caused the dump. */
enum ingest_dump_trigger {
    INGEST_TRIGGER_NONE,
    INGEST_TRIGGER_INTERVAL, /* jemalloc 'i': lg_prof_interval */
    INGEST_TRIGGER_MANUAL,   /* jemalloc 'm' (prof.dump without a name), RisingWave manual */
    INGEST_TRIGGER_GDUMP,    /* jemalloc 'u': prof_gdump, a new high-water mark */
    INGEST_TRIGGER_FINAL,    /* jemalloc 'f': prof_final at exit */
    INGEST_TRIGGER_AUTO,     /* RisingWave auto dump at the memory threshold */
};

struct ingest_dumpname {
    enum ingest_dump_kind kind;
    enum ingest_dump_trigger trigger;
    size_t prefix_len; /* the name's first prefix_len bytes are its prefix ("" for RisingWave) */
    int64_t pid;       /* -1 when the name has none */
    int64_t seq;       /* jemalloc's dump sequence number, -1 when none */
    int64_t trigger_seq; /* the number after i/m/u, -1 when none */
    int64_t time;      /* Doris: unix seconds from the name; -1 when none */
    int tm[6];         /* RisingWave: year, month, day, hour, minute, second (node local time) */
};

/* Parse a dump file name (not a path). 1 and *ret filled when it is a heap
 * dump name the agent serves, 0 when it is not (log files, temp files, ".",
 * names with control characters or bytes outside printable ASCII), never an
 * error: every other name is simply not a dump. */
int ingest_dumpname_parse(const char *name, size_t len, struct ingest_dumpname *ret);
const char *ingest_dump_kind_name(enum ingest_dump_kind k);
const char *ingest_dump_trigger_name(enum ingest_dump_trigger t);

/* The unix time a dump's name says it was taken (Doris' jeheap_dump.<time>),
 * or -1: RisingWave's names carry the node's local time, whose zone the
 * name does not say, and other names carry no time. */
int64_t ingest_dumpname_time(const struct ingest_dumpname *d);

#endif
