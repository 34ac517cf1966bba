/* Private to collector/ingest/: the parser state shared by the format
 * readers. The driver (ingest.c) detects the format, splits input into lines
 * for text formats, and tracks line numbers and byte offsets for messages. */
#ifndef HP_INGEST_INTERNAL_H
#define HP_INGEST_INTERNAL_H

#include "collector/ingest/ingest.h"

struct ingest_parser;

/* A text format reader: one call per line (no '\n', no trailing '\r'). */
typedef int ingest_line_fn(struct ingest_parser *ps, const char *line, size_t len,
                           struct hp_buf *err);
/* Called once at end of input, before profile_finish(). */
typedef int ingest_end_fn(struct ingest_parser *ps, struct hp_buf *err);

struct ingest_parser {
    struct ingest_limits lim;
    struct profile *p;
    enum profile_format fmt; /* UNKNOWN until detected */
    int status;              /* sticky: first error */
    bool finished;

    uint64_t lineno; /* number of the line being handled, 1-based */
    uint64_t offset; /* byte offset of that line's first byte */
    uint64_t fed;    /* bytes fed so far */

    struct hp_buf head;  /* bytes held until the format is known */
    struct hp_buf carry; /* an incomplete line (text formats) */
    struct hp_buf body;  /* the whole input (binary formats) */

    ingest_line_fn *line;
    ingest_end_fn *end;

    /* Shared text-reader state. */
    bool in_maps;        /* inside MAPPED_LIBRARIES / Memory map */
    bool header_done;    /* the header line was read */
    bool stack_open;     /* a jemalloc '@' line awaits its t*: line */
    bool go_legacy;      /* gperftools-style text written by Go's runtime/pprof */
    uint64_t valid_lines; /* collapsed: stack lines read */
    uint64_t bad_lines;   /* collapsed: comment and invalid lines skipped */
    uint64_t first_bad_line;
    bool first_bad_is_comment;
    char first_bad[120];  /* excerpt of that line */
    uint32_t cur_stack;  /* the stack of the last '@' line */
    uint32_t *locbuf;    /* scratch for one stack's locations */
    size_t locbuf_cap;
    uint64_t *addrbuf;   /* scratch for one stack's addresses */
    size_t addrbuf_cap;
    /* The last address stack read, its locations not yet looked up: they
     * are looked up when the next one has been read (its hash slots
     * prefetched meanwhile), or by ingest__stack_flush(). */
    uint64_t *pending;
    size_t pending_cap;
    uint32_t pending_n;     /* 0: nothing pending */
    uint32_t pending_stack; /* its stack index */
    struct hp_map64 thread_ids; /* jemalloc thread uid -> thread index */

#define INGEST_LOC_CACHE 4096
    uint64_t loc_cache_addr[INGEST_LOC_CACHE]; /* address -> location, direct-mapped */
    uint32_t loc_cache_idx[INGEST_LOC_CACHE];  /* UINT32_MAX: empty slot */
};

/* Format readers (one file each). `begin` sets ps->line/ps->end. */
int ingest__jemalloc_begin(struct ingest_parser *ps, struct hp_buf *err);
int ingest__gperf_begin(struct ingest_parser *ps, struct hp_buf *err);
int ingest__collapsed_begin(struct ingest_parser *ps, struct hp_buf *err);
/* Binary: the whole (possibly gzipped) input at once. */
int ingest__pprof_parse(struct ingest_parser *ps, const uint8_t *data, size_t len,
                        struct hp_buf *err);

/* Shared helpers for the text readers. */
int ingest__error(struct ingest_parser *ps, struct hp_buf *err, int code, const char *fmt, ...)
    HP_PRINTF(4, 5);
/* Parse hex addresses separated by blanks into a new stack (caller addresses
 * minus one, as jeprof does). */
int ingest__stack_from_hex(struct ingest_parser *ps, const char *s, size_t n,
                           uint32_t *ret_stack, struct hp_buf *err);
/* Look up the locations of a stack ingest__stack_from_hex() left pending.
 * Readers call it before they add a location of their own (so locations
 * are numbered in input order); the driver calls it at the end. */
void ingest__stack_flush(struct ingest_parser *ps);
/* "<count>: <bytes> [<count>: <bytes>]" -> raw[4]; *ret_end points after ']'. */
int ingest__counts(const char *s, size_t n, int64_t raw[PV_COUNT], size_t *ret_end);
/* A MAPPED_LIBRARIES / maps line. */
int ingest__maps_line(struct ingest_parser *ps, const char *line, size_t len,
                      struct hp_buf *err);
/* Quote up to 40 bytes of input for an error message (escapes non-printables). */
const char *ingest__excerpt(const char *s, size_t n, char *out, size_t outsz);

#endif
