/* Parser driver: format detection, line splitting, limits and messages.
 *
 * Bytes arrive in chunks of any size. Until the format is known they are held
 * in `head` (at most the first line, capped). Text formats are then split into
 * lines here and handed to the format's line reader one at a time; a line
 * split across chunks waits in `carry`, capped at max_line. Binary formats
 * (pprof) accumulate in `body`, capped at max_bytes, and are parsed at the
 * end. The first error sticks: later feeds return it without work. */
#include "collector/ingest/ingest-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ingest_limits_default(struct ingest_limits *l)
{
    *l = (struct ingest_limits){
        .max_bytes = (size_t)2 << 30,
        .max_line = (size_t)1 << 20,
        .max_frames = 4096,
        .max_stacks = (size_t)4 << 20,
        .max_mappings = 65536,
        .max_threads = 65536,
    };
}

static bool starts_with(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* A collapsed line ends in blanks and digits after at least one other byte. */
static bool looks_collapsed(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    size_t d = n;
    while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
        d--;
    if (d == n || d < 2 || s[d - 1] != ' ')
        return false;
    for (size_t i = 0; i < d; i++)
        if (s[i] == '\0')
            return false;
    return true;
}

static bool is_comment_line(const char *s, size_t n)
{
    return (n >= 1 && s[0] == '#') || (n >= 2 && s[0] == '/' && s[1] == '/');
}

/* Offset past a byte-order mark, blank lines and comment lines ("# ...",
 * "// ..."); *ret_comments tells whether any comment was skipped. The last
 * line is only skipped when it is complete. */
static size_t skip_text_preamble(const char *s, size_t len, bool *ret_comments)
{
    size_t i = 0;
    *ret_comments = false;
    if (len >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    for (;;) {
        while (i < len && (s[i] == '\n' || s[i] == '\r'))
            i++;
        const char *nl = memchr(s + i, '\n', len - i);
        if (!nl || !is_comment_line(s + i, (size_t)(nl - (s + i))))
            return i;
        *ret_comments = true;
        i = (size_t)(nl - s) + 1;
    }
}

/* An uncompressed profile.proto: the first fields (up to four, within the
 * bytes we have) carry profile.proto field numbers 1..14 with their wire types.
 * Writers differ in which field comes first (Go starts with period_type, tag
 * 0x5a; others with sample_type, 0x0a), so one byte is not enough; text
 * formats were ruled out before this is asked. */
static bool looks_profile_proto(const unsigned char *s, size_t len)
{
    size_t off = 0;
    int fields = 0;
    while (off < len && fields < 4) {
        unsigned key = s[off++];
        if (key & 0x80)
            return false; /* field numbers 1..14 fit one tag byte */
        unsigned f = key >> 3, wt = key & 7;
        bool len_delim = f <= 6 || f == 11 || (f == 13 && wt == 2);
        if (f < 1 || f > 14 || wt != (len_delim ? 2u : 0u))
            return false;
        uint64_t v = 0;
        unsigned shift = 0;
        for (;;) {
            if (off >= len)
                return true; /* ran out of what we hold: plausible so far */
            unsigned char b = s[off++];
            if (shift >= 63)
                return false;
            v |= (uint64_t)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80))
                break;
        }
        if (len_delim) {
            if (v >= len - off)
                return true;
            off += (size_t)v;
        }
        fields++;
    }
    return fields > 0;
}

enum profile_format ingest_detect(const void *data, size_t len)
{
    const char *s = data;
    if (len >= 2 && (unsigned char)s[0] == 0x1f && (unsigned char)s[1] == 0x8b)
        return PROFILE_FORMAT_PPROF;
    if (starts_with(s, len, "heap_v2/"))
        return PROFILE_FORMAT_JEMALLOC;
    if (starts_with(s, len, "heap profile:"))
        return PROFILE_FORMAT_GPERF;
    /* Skip a UTF-8 byte-order mark, leading blank lines and comment lines
     * for text checks. Of the formats read here only collapsed stacks carry
     * comments, so a file that opens with one is read as collapsed stacks
     * (its bad lines are then counted and named, not refused wholesale). */
    bool comments;
    size_t i = skip_text_preamble(s, len, &comments);
    const char *nl = memchr(s + i, '\n', len - i);
    size_t first = nl ? (size_t)(nl - (s + i)) : len - i;
    if (first > 0 && looks_collapsed(s + i, first))
        return PROFILE_FORMAT_COLLAPSED;
    if (comments || is_comment_line(s + i, first))
        return PROFILE_FORMAT_COLLAPSED;
    if (looks_profile_proto((const unsigned char *)s, len))
        return PROFILE_FORMAT_PPROF;
    return PROFILE_FORMAT_UNKNOWN;
}

struct ingest_parser *ingest_parser_new(const struct ingest_limits *lim)
{
    struct ingest_parser *ps = hp_xcalloc(1, sizeof(*ps));
    if (lim)
        ps->lim = *lim;
    else
        ingest_limits_default(&ps->lim);
    hp_buf_init(&ps->head, 4096);
    hp_buf_init(&ps->carry, ps->lim.max_line);
    hp_buf_init(&ps->body, ps->lim.max_bytes);
    hp_map64_init(&ps->thread_ids);
    memset(ps->loc_cache_idx, 0xff, sizeof(ps->loc_cache_idx));
    return ps;
}

void ingest_parser_free(struct ingest_parser *ps)
{
    if (!ps)
        return;
    profile_free(ps->p);
    hp_buf_release(&ps->head);
    hp_buf_release(&ps->carry);
    hp_buf_release(&ps->body);
    hp_map64_release(&ps->thread_ids);
    free(ps->locbuf);
    free(ps->addrbuf);
    free(ps->pending);
    free(ps);
}

const char *ingest__excerpt(const char *s, size_t n, char *out, size_t outsz)
{
    size_t o = 0;
    size_t lim = n > 40 ? 40 : n;
    for (size_t i = 0; i < lim && o + 5 < outsz; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= ' ' && c < 0x7f && c != '"' && c != '\\') {
            out[o++] = (char)c;
        } else {
            static const char hex[] = "0123456789abcdef";
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (n > lim && o + 4 < outsz) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

int ingest__error(struct ingest_parser *ps, struct hp_buf *err, int code, const char *fmt, ...)
{
    if (err) {
        if (err->len)
            (void)hp_buf_puts(err, "; ");
        if (ps->lineno)
            (void)hp_buf_printf(err, "%s profile, line %llu (byte %llu): ",
                                profile_format_name(ps->fmt), (unsigned long long)ps->lineno,
                                (unsigned long long)ps->offset);
        else
            (void)hp_buf_printf(err, "%s profile, byte %llu: ", profile_format_name(ps->fmt),
                                (unsigned long long)ps->offset);
        va_list ap;
        va_start(ap, fmt);
        (void)hp_buf_vprintf(err, fmt, ap);
        va_end(ap);
    }
    ps->status = code;
    return code;
}

static int begin_format(struct ingest_parser *ps, struct hp_buf *err)
{
    ps->p = profile_new(ps->fmt);
    switch (ps->fmt) {
    case PROFILE_FORMAT_JEMALLOC:
        return ingest__jemalloc_begin(ps, err);
    case PROFILE_FORMAT_GPERF:
        return ingest__gperf_begin(ps, err);
    case PROFILE_FORMAT_COLLAPSED:
        return ingest__collapsed_begin(ps, err);
    case PROFILE_FORMAT_PPROF:
        return 0;
    case PROFILE_FORMAT_UNKNOWN:
        break;
    }
    char ex[200];
    return ingest__error(ps, err, HP_EFORMAT,
                         "unrecognized profile format: expected a jemalloc dump (\"heap_v2/N\"), "
                         "a gperftools heap profile (\"heap profile: ...\"), a pprof "
                         "protobuf (gzipped or not) or collapsed stacks (\"a;b;c 123\"); "
                         "input starts with \"%s\"",
                         ingest__excerpt(ps->head.data ? ps->head.data : "", ps->head.len, ex,
                                         sizeof(ex)));
}

static int handle_line(struct ingest_parser *ps, const char *line, size_t len,
                       struct hp_buf *err)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    ps->lineno++;
    int r = ps->line(ps, line, len, err);
    if (r < 0 && ps->status == 0)
        ps->status = r;
    return r;
}

/* Split text into lines; an incomplete tail goes to `carry`. */
static int feed_text(struct ingest_parser *ps, const char *s, size_t n, struct hp_buf *err)
{
    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        if (!nl) {
            if (hp_buf_append(&ps->carry, s, n) < 0)
                return ingest__error(ps, err, HP_ETOOBIG,
                                     "line is longer than the limit of %zu bytes",
                                     ps->lim.max_line);
            return 0;
        }
        size_t k = (size_t)(nl - s);
        int r;
        if (ps->carry.len) {
            if (hp_buf_append(&ps->carry, s, k) < 0)
                return ingest__error(ps, err, HP_ETOOBIG,
                                     "line is longer than the limit of %zu bytes",
                                     ps->lim.max_line);
            r = handle_line(ps, ps->carry.data, ps->carry.len, err);
            ps->offset += ps->carry.len + 1;
            hp_buf_reset(&ps->carry);
        } else {
            if (k > ps->lim.max_line)
                return ingest__error(ps, err, HP_ETOOBIG,
                                     "line is longer than the limit of %zu bytes",
                                     ps->lim.max_line);
            r = handle_line(ps, s, k, err);
            ps->offset += k + 1;
        }
        if (r < 0)
            return r;
        s += k + 1;
        n -= k + 1;
    }
    return 0;
}

static int feed_known(struct ingest_parser *ps, const char *s, size_t n, struct hp_buf *err)
{
    if (ps->fmt == PROFILE_FORMAT_PPROF) {
        if (hp_buf_append(&ps->body, s, n) < 0)
            return ingest__error(ps, err, HP_ETOOBIG, "input is over the limit of %zu bytes",
                                 ps->lim.max_bytes);
        return 0;
    }
    return feed_text(ps, s, n, err);
}

/* Decide the format from what `head` holds, then replay it. */
static int detect_and_replay(struct ingest_parser *ps, struct hp_buf *err)
{
    ps->fmt = ingest_detect(ps->head.data ? ps->head.data : "", ps->head.len);
    int r = begin_format(ps, err);
    if (r < 0)
        return r;
    struct hp_buf h = ps->head;
    ps->head = HP_BUF_INIT(0);
    r = h.len ? feed_known(ps, h.data, h.len, err) : 0;
    hp_buf_release(&h);
    return r;
}

int ingest_parser_feed(struct ingest_parser *ps, const void *data, size_t len,
                       struct hp_buf *err)
{
    if (ps->status < 0)
        return ps->status;
    if (ps->finished)
        return ingest__error(ps, err, HP_EUSAGE, "data fed after the end of input");
    const char *s = data;
    if ((uint64_t)len > ps->lim.max_bytes - HP_MIN(ps->fed, ps->lim.max_bytes))
        return ingest__error(ps, err, HP_ETOOBIG, "input is over the limit of %zu bytes",
                             ps->lim.max_bytes);
    ps->fed += len;
    if (ps->fmt != PROFILE_FORMAT_UNKNOWN)
        return feed_known(ps, s, len, err);
    /* Hold bytes until the first line is complete (or 4 KiB arrived): the
     * first line decides the format. */
    size_t room = ps->head.cap - ps->head.len;
    size_t take = HP_MIN(room, len);
    (void)hp_buf_append(&ps->head, s, take);
    bool comments;
    size_t pre = skip_text_preamble(ps->head.data, ps->head.len, &comments);
    bool decided = ps->head.len == ps->head.cap ||
                   memchr(ps->head.data + pre, '\n', ps->head.len - pre) ||
                   (ps->head.len >= 2 && (unsigned char)ps->head.data[0] == 0x1f);
    if (!decided)
        return 0;
    int r = detect_and_replay(ps, err);
    if (r < 0)
        return r;
    return take < len ? feed_known(ps, s + take, len - take, err) : 0;
}

int ingest_parser_finish(struct ingest_parser *ps, struct profile **ret, struct hp_buf *err)
{
    if (ps->status < 0)
        return ps->status;
    if (ps->finished)
        return ingest__error(ps, err, HP_EUSAGE, "parser already finished");
    int r = 0;
    if (ps->fmt == PROFILE_FORMAT_UNKNOWN) {
        if (ps->head.len == 0)
            return ingest__error(ps, err, HP_EPARSE, "empty input: expected a heap profile");
        r = detect_and_replay(ps, err);
        if (r < 0)
            return r;
    }
    ps->finished = true;
    if (ps->fmt == PROFILE_FORMAT_PPROF) {
        r = ingest__pprof_parse(ps, (const uint8_t *)ps->body.data, ps->body.len, err);
        if (r < 0)
            return ps->status = r;
    } else if (ps->carry.len) {
        r = handle_line(ps, ps->carry.data, ps->carry.len, err);
        ps->offset += ps->carry.len;
        hp_buf_reset(&ps->carry);
        if (r < 0)
            return r;
    }
    ingest__stack_flush(ps);
    if (ps->end) {
        r = ps->end(ps, err);
        if (r < 0)
            return ps->status = r;
    }
    profile_finish(ps->p);
    *ret = ps->p;
    ps->p = NULL;
    return 0;
}

int ingest_parse(const void *data, size_t len, const struct ingest_limits *lim,
                 struct profile **ret, struct hp_buf *err)
{
    struct ingest_parser *ps = ingest_parser_new(lim);
    int r = ingest_parser_feed(ps, data, len, err);
    if (r == 0)
        r = ingest_parser_finish(ps, ret, err);
    ingest_parser_free(ps);
    return r;
}

int ingest_file_sniff(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return HP_ERR(errno);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return n > 0 && ingest_detect(buf, n) != PROFILE_FORMAT_UNKNOWN;
}

int ingest_parse_file(const char *path, const struct ingest_limits *lim, struct profile **ret,
                      struct hp_buf *err)
{
    struct ingest_limits def;
    if (!lim) {
        ingest_limits_default(&def);
        lim = &def;
    }
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, lim->max_bytes, &data, &len, err);
    if (r < 0)
        return r;
    struct hp_buf local = HP_BUF_INIT(0);
    r = ingest_parse(data, len, lim, ret, &local);
    if (r < 0 && err)
        hp_err_printf(err, "%s: %s", path, local.data ? local.data : hp_strerror(r));
    hp_buf_release(&local);
    free(data);
    return r;
}

/* ---- helpers shared by the text readers ---- */

static inline const char *skip_blanks(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

static int parse_num(const char **sp, const char *end, int64_t *ret)
{
    const char *s = *sp;
    const char *d = s;
    uint64_t v = 0;
    if (end - s >= 8) {
        /* The first 8 bytes at once (SWAR). A byte is a digit when its
         * high nibble is 3 and adding 6 keeps it so; the add may carry out
         * of a non-digit byte, but only into the bytes after it. */
        uint64_t w = hp__load8(s);
        uint64_t nd = ((w & HP__ONES * 0xf0) ^ HP__ONES * 0x30) |
                      (((w + HP__ONES * 0x06) & HP__ONES * 0xf0) ^ HP__ONES * 0x30);
        unsigned k = nd ? (unsigned)__builtin_ctzll(nd) / 8 : 8;
        if (k == 0)
            return HP_EPARSE;
        /* Digits to the top bytes (zeros before them), then pairs, fours,
         * eight (the 8-digit conversion of Lemire's "Fast number parsing"). */
        uint64_t t = (w & HP__ONES * 0x0f) << (8 * (8 - k));
        t = t * 10 + (t >> 8);
        t = ((t & UINT64_C(0x000000ff000000ff)) * (100 + (UINT64_C(1000000) << 32)) +
             ((t >> 16) & UINT64_C(0x000000ff000000ff)) * (1 + (UINT64_C(10000) << 32))) >>
            32;
        v = t;
        d = s + k;
        if (k < 8) {
            *ret = (int64_t)v;
            *sp = d;
            return 0;
        }
    }
    /* Up to 18 digits cannot overflow, so the common case needs no check
     * per digit; longer numbers take the checked path. */
    const char *fast_end = end - s > 18 ? s + 18 : end;
    while (d < fast_end && (unsigned)(*d - '0') <= 9)
        v = v * 10 + (unsigned)(*d++ - '0');
    while (d < end && (unsigned)(*d - '0') <= 9) {
        unsigned dig = (unsigned)(*d - '0');
        if (v > ((uint64_t)INT64_MAX - dig) / 10)
            return HP_ETOOBIG;
        v = v * 10 + dig;
        d++;
    }
    if (d == s)
        return HP_EPARSE;
    *ret = (int64_t)v;
    *sp = d;
    return 0;
}

int ingest__counts(const char *s, size_t n, int64_t raw[PV_COUNT], size_t *ret_end)
{
    const char *p = s, *end = s + n;
    int64_t v[PV_COUNT];
    int r;
    p = skip_blanks(p, end);
    if ((r = parse_num(&p, end, &v[0])) < 0)
        return r;
    if (p >= end || *p++ != ':')
        return HP_EPARSE;
    p = skip_blanks(p, end);
    if ((r = parse_num(&p, end, &v[1])) < 0)
        return r;
    p = skip_blanks(p, end);
    if (p >= end || *p++ != '[')
        return HP_EPARSE;
    p = skip_blanks(p, end);
    if ((r = parse_num(&p, end, &v[2])) < 0)
        return r;
    if (p >= end || *p++ != ':')
        return HP_EPARSE;
    p = skip_blanks(p, end);
    if ((r = parse_num(&p, end, &v[3])) < 0)
        return r;
    p = skip_blanks(p, end);
    if (p >= end || *p++ != ']')
        return HP_EPARSE;
    memcpy(raw, v, sizeof(v));
    *ret_end = (size_t)(p - s);
    return 0;
}

/* Location of an address, through a small direct-mapped cache in front of
 * the profile's hash table: the same call sites recur across stacks (thread
 * roots, executor loops, allocator entry points), and a hit costs one
 * compare instead of a hash probe into a table that may not be in cache. */
static inline uint32_t location_cached(struct ingest_parser *ps, uint64_t addr)
{
    size_t slot = (size_t)((addr ^ (addr >> 12)) & (INGEST_LOC_CACHE - 1));
    if (ps->loc_cache_addr[slot] == addr && ps->loc_cache_idx[slot] != UINT32_MAX)
        return ps->loc_cache_idx[slot];
    uint32_t idx = profile_location_for_address(ps->p, addr);
    ps->loc_cache_addr[slot] = addr;
    ps->loc_cache_idx[slot] = idx;
    return idx;
}

void ingest__stack_flush(struct ingest_parser *ps)
{
    if (!ps->pending_n)
        return;
    uint32_t *locs = ps->p->stack_locs + ps->p->stacks[ps->pending_stack].off;
    for (uint32_t i = 0; i < ps->pending_n; i++)
        locs[i] = location_cached(ps, ps->pending[i]);
    ps->pending_n = 0;
}

int ingest__stack_from_hex(struct ingest_parser *ps, const char *s, size_t n,
                           uint32_t *ret_stack, struct hp_buf *err)
{
    const char *p = s, *end = s + n;
    uint32_t count = 0;
    for (;;) {
        p = skip_blanks(p, end);
        if (p >= end)
            break;
        if (count >= ps->lim.max_frames)
            return ingest__error(ps, err, HP_ETOOBIG,
                                 "stack has more than %u frames (the limit)",
                                 ps->lim.max_frames);
        if (end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
            p += 2;
        size_t digits;
        uint64_t v;
        int r = hp_hex_scan(p, (size_t)(end - p), &digits, &v);
        p += digits;
        /* More than 64 bits of value, no digits, or a digit run that ends
         * in something other than a blank or the end of the line. */
        if (r < 0 || digits == 0 || (p < end && *p != ' ' && *p != '\t'))
            goto bad;
        /* jeprof's FixCallerAddresses: a caller's address is a return
         * address; the call instruction is the byte before it. */
        if (count > 0 && v > 0)
            v--;
        if (count == ps->addrbuf_cap)
            ps->addrbuf = hp_xgrow(ps->addrbuf, &ps->addrbuf_cap, count + 1,
                                   sizeof(*ps->addrbuf));
        ps->addrbuf[count++] = v;
    }
    if (count == 0)
        return ingest__error(ps, err, HP_EPARSE, "stack has no addresses");
    if (ps->p->nstacks >= ps->lim.max_stacks)
        return ingest__error(ps, err, HP_ETOOBIG, "profile has more than %zu stacks (the limit)",
                             ps->lim.max_stacks);
    /* A big profile's location table does not fit in cache, and waiting for
     * its misses was most of the parser's time. So this stack's hash slots
     * are only prefetched now, and its locations looked up after the next
     * stack line has been read (its counts lines parsed meanwhile); the
     * previous stack's are looked up here, their slots prefetched a stack
     * ago. Addresses that the location cache holds need no prefetch. */
    const struct hp_map64 *m = &ps->p->loc_index;
    if (m->cap)
        for (uint32_t i = 0; i < count; i++) {
            uint64_t a = ps->addrbuf[i];
            size_t slot = (size_t)((a ^ (a >> 12)) & (INGEST_LOC_CACHE - 1));
            if (ps->loc_cache_addr[slot] != a)
                hp_map64_prefetch(m, a);
        }
    ingest__stack_flush(ps);
    uint32_t st = profile_stack_add_unset(ps->p, count);
    /* The addresses just read become the pending ones. */
    uint64_t *t = ps->pending;
    size_t tcap = ps->pending_cap;
    ps->pending = ps->addrbuf;
    ps->pending_cap = ps->addrbuf_cap;
    ps->addrbuf = t;
    ps->addrbuf_cap = tcap;
    ps->pending_n = count;
    ps->pending_stack = st;
    *ret_stack = st;
    return 0;
bad:;
    char ex[200];
    return ingest__error(ps, err, HP_EPARSE, "expected a hexadecimal address, got \"%s\"",
                         ingest__excerpt(p, (size_t)(end - p), ex, sizeof(ex)));
}

int ingest__maps_line(struct ingest_parser *ps, const char *line, size_t len,
                      struct hp_buf *err)
{
    struct profile_mapping m;
    char path[4096];
    if (len >= sizeof(path))
        return 0; /* no real maps line is this long; ignore rather than fail */
    memcpy(path, line, len);
    path[len] = '\0';
    int r = ingest_maps_line(path, len, &m);
    if (r <= 0)
        return 0; /* maps sections carry other lines too (build=, blank) */
    /* Memory no code runs from, [heap], [stack] and anonymous data (a
     * BE's thread stacks and jemalloc's extents: thousands of lines that
     * come and go every hour), holds no frame of a stack: kept, it made
     * every stored sample set carry it, and every snapshot a layout of its
     * own. The raw dump keeps the lines. */
    if (!(m.flags & PROFILE_MAP_EXEC) && (m.flags & (PROFILE_MAP_ANON | PROFILE_MAP_SPECIAL)))
        return 0;
    if (ps->p->nmappings >= ps->lim.max_mappings)
        return ingest__error(ps, err, HP_ETOOBIG, "more than %zu mapping lines (the limit)",
                             ps->lim.max_mappings);
    profile_mapping_add(ps->p, &m);
    return 0;
}
