/* heapfleet shared primitives: error codes, allocation, capped buffers, arenas,
 * hash maps, checked number parsing and logfmt logging.
 *
 * Every module may include this header; it depends on libc only. Out of memory
 * aborts with a log line (hp_xmalloc and friends), so callers never check for
 * NULL; every size that comes from outside the process is capped before it can
 * reach an allocation.
 *
 * Thread context: everything here may be called from any thread; an hp_buf,
 * hp_arena or hp_map must not be used from two threads at once. */
#ifndef HP_H
#define HP_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h> /* hp_hex_scan; a compiler header, no library */
#endif

#define HP_MUST_CHECK __attribute__((warn_unused_result))
#define HP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define HP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define hp_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- errors -------------------------------------------------------------
 * 0 is success; -1..-4095 are negated errno values (HP_ERR(errno)); project
 * codes start at -5000. One table generates the enum and hp_strerror(). */
#define HP_ERRNO_MAP(X)                                                                 \
    X(EPARSE, -5000, "malformed input")                                                 \
    X(ETOOBIG, -5001, "input exceeds configured limit")                                 \
    X(EHTTP, -5002, "transport or HTTP status failure")                                 \
    X(ESTORE, -5003, "database error")                                                  \
    X(EDWARF, -5004, "debug info error")                                                \
    X(EELF, -5005, "not a usable ELF file")                                             \
    X(EFORMAT, -5006, "unrecognized profile format")                                    \
    X(EMISMATCH, -5007, "file does not match the profile (build-id or size)")          \
    X(ENOTFOUND, -5008, "not found")                                                    \
    X(EUSAGE, -5009, "invalid arguments")                                               \
    X(EVERSION, -5010, "made by a newer heapfleet")                                     \
    X(ECORRUPT, -5011, "corrupted data")

enum hp_error {
#define HP_ERR_ENUM(name, val, msg) HP_##name = (val),
    HP_ERRNO_MAP(HP_ERR_ENUM)
#undef HP_ERR_ENUM
};

#define HP_ERR(e) (-(e))

/* Static description of an error code (never NULL). */
const char *hp_strerror(int err);

/* ---- allocation (aborts on out of memory) -------------------------------- */
void *hp_xmalloc(size_t n);
void *hp_xcalloc(size_t n, size_t size);
void *hp_xrealloc(void *p, size_t n);
/* Grow an array to hold at least `need` elements of `size` bytes. Inline
 * for the common case, room already there (a call each was 2% of the
 * instructions of `query leaks --db`, which grows arrays a run at a time). */
void *hp_xgrow_slow(void *p, size_t *cap, size_t need, size_t size);
static inline void *hp_xgrow(void *p, size_t *cap, size_t need, size_t size)
{
    return need <= *cap ? p : hp_xgrow_slow(p, cap, need, size);
}
char *hp_xstrdup(const char *s);
char *hp_xstrndup(const char *s, size_t n);
char *hp_xasprintf(const char *fmt, ...) HP_PRINTF(1, 2);

/* ---- capped growable byte buffer ----------------------------------------
 * Always NUL-terminated when len > 0 or after any append. An append that would
 * pass the cap returns HP_ETOOBIG and leaves the buffer unchanged. cap 0 means
 * "no cap" and is only for data we produce ourselves. */
struct hp_buf {
    char *data;
    size_t len;
    size_t alloc;
    size_t cap;
};

#define HP_BUF_INIT(c) ((struct hp_buf){ .data = NULL, .len = 0, .alloc = 0, .cap = (c) })
void hp_buf_init(struct hp_buf *b, size_t cap);
void hp_buf_release(struct hp_buf *b);
void hp_buf_reset(struct hp_buf *b);
int hp_buf_append(struct hp_buf *b, const void *data, size_t n);
int hp_buf_puts(struct hp_buf *b, const char *s);
int hp_buf_printf(struct hp_buf *b, const char *fmt, ...) HP_PRINTF(2, 3);
int hp_buf_vprintf(struct hp_buf *b, const char *fmt, va_list ap) HP_PRINTF(2, 0);
/* Hand the bytes over to the caller (free() them); the buffer is left empty. */
char *hp_buf_detach(struct hp_buf *b, size_t *ret_len);
/* Append an error message to an optional error buffer (NULL is fine). Error
 * buffers are uncapped and appended only on failure, so calls can chain. */
void hp_err_printf(struct hp_buf *err, const char *fmt, ...) HP_PRINTF(2, 3);
/* Copy s replacing invalid UTF-8 bytes with U+FFFD, so that names from
 * binaries, files or nodes with broken encodings still make valid JSON, SVG
 * or XML. Returns s itself when it is valid; else a string in `arena`. */
struct hp_arena;
const char *hp_utf8_clean(struct hp_arena *arena, const char *s);
/* Append s (NULL: "") as a quoted Prometheus label value: backslash, double
 * quote and newline escaped, as the text exposition format 0.0.4 wants. */
void hp_buf_prom_label(struct hp_buf *b, const char *s);
/* ---- arena: many small allocations freed together ------------------------ */
struct hp_arena_chunk;
struct hp_arena {
    struct hp_arena_chunk *head;
    size_t used_total; /* bytes handed out, for accounting */
};

void hp_arena_init(struct hp_arena *a);
void hp_arena_release(struct hp_arena *a);
void *hp_arena_alloc(struct hp_arena *a, size_t n); /* 16-byte aligned */
char *hp_arena_strndup(struct hp_arena *a, const char *s, size_t n);
char *hp_arena_strdup(struct hp_arena *a, const char *s);

/* ---- hashing ------------------------------------------------------------ */
uint64_t hp_hash_bytes(const void *data, size_t n, uint64_t seed);
/* A hash of bytes in four words at a time in four independent chains,
 * about three times hp_hash_bytes' speed on lines of a hundred bytes and
 * more (hp_hash_bytes' one chain waits on its multiply every word).
 * Stored (raw_dumps.hash, store_content_hash): it must not change
 * (test-hp pins values). */
uint64_t hp_hash_bytes_wide(const void *data, size_t n, uint64_t seed);
static inline uint64_t hp_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* hp_hash_bytes of whole 8-byte words, a word at a time, for callers that
 * gather the words or hash several inputs side by side:
 *   hp_hash_bytes(w, 8 * n, seed) ==
 *   hp_hash_end(hp_hash_word(... hp_hash_word(hp_hash_begin(seed), w[0]) ..., w[n - 1]))
 * with w's words as memcpy reads them. Stored values depend on it (the
 * store's stack hashes): it must not change. */
static inline uint64_t hp_hash_begin(uint64_t seed)
{
    return UINT64_C(0xcbf29ce484222325) ^ seed;
}

static inline uint64_t hp_hash_word(uint64_t h, uint64_t w)
{
    h = (h ^ w) * UINT64_C(0x100000001b3);
    return h ^ (h >> 29);
}

static inline uint64_t hp_hash_end(uint64_t h)
{
    return hp_hash_u64(h);
}

/* ---- hash map: uint64 key -> uint32 value, open addressing -------------- */
struct hp_map64_slot {
    uint64_t key;
    uint32_t val; /* UINT32_MAX marks an empty slot */
};

struct hp_map64 {
    struct hp_map64_slot *slots; /* key and value side by side: one cache miss per probe */
    size_t cap;                  /* power of two, 0 when empty */
    size_t len;
};

void hp_map64_init(struct hp_map64 *m);
void hp_map64_release(struct hp_map64 *m);
/* 1 found (value in *ret_val), 0 not found. Values must be < UINT32_MAX. */
static inline int hp_map64_get(const struct hp_map64 *m, uint64_t key, uint32_t *ret_val);
static inline void hp_map64_prefetch(const struct hp_map64 *m, uint64_t key);
/* Insert or find: returns 1 if the key existed (*ret_val = old value), 0 if it
 * was inserted with `val` (*ret_val = val). */
int hp_map64_put(struct hp_map64 *m, uint64_t key, uint32_t val, uint32_t *ret_val);
/* Room for n keys in all without growing (callers that know their size
 * skip the rehashes on the way there). */
void hp_map64_reserve(struct hp_map64 *m, size_t n);

/* Start loading the slot where key's search begins (a hint: harmless on a
 * map that changes before the lookup). Loops over many keys prefetch a few
 * ahead, so that the cache misses of big maps overlap. */
static inline void hp_map64_prefetch(const struct hp_map64 *m, uint64_t key)
{
    if (m->cap)
        __builtin_prefetch(&m->slots[hp_hash_u64(key) & (m->cap - 1)]);
}

static inline int hp_map64_get(const struct hp_map64 *m, uint64_t key, uint32_t *ret_val)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1, j = hp_hash_u64(key) & mask;
    for (;;) {
        const struct hp_map64_slot *s = &m->slots[j];
        if (s->val == UINT32_MAX)
            return 0;
        if (s->key == key) {
            *ret_val = s->val;
            return 1;
        }
        j = (j + 1) & mask;
    }
}

/* ---- string interning: each distinct string stored once in an arena ------ */
/* Strings are numbered 0, 1, ... in the order they are first interned:
 * by_id[id] is the string, and hp_strtab_id gives a string's number
 * without hashing it (stored in the 4 bytes before its first), so that
 * tables over a table's names are arrays, not hash maps. */
struct hp_strtab {
    struct hp_arena *arena; /* borrowed */
    const char **slots;
    uint64_t *hashes;
    size_t cap, len;
    const char **by_id; /* len strings */
    size_t by_id_cap;
};

void hp_strtab_init(struct hp_strtab *t, struct hp_arena *arena);
void hp_strtab_release(struct hp_strtab *t);
const char *hp_strtab_intern(struct hp_strtab *t, const char *s, size_t n);

/* The number of s, a string this table's hp_strtab_intern returned (any
 * other pointer is undefined behaviour). */
static inline uint32_t hp_strtab_id(const struct hp_strtab *t, const char *s)
{
    uint32_t id;
    memcpy(&id, s - sizeof(id), sizeof(id));
    (void)t;
    return id;
}


/* ---- checked number parsing ---------------------------------------------
 * Each parses the whole of [s, s+n) and returns 0, or HP_EPARSE on an empty,
 * partial or overflowing number. */
int hp_parse_u64(const char *s, size_t n, uint64_t *ret) HP_MUST_CHECK;
/* A byte size: digits with an optional K, M or G suffix (powers of 1024);
 * 0 and overflow are HP_EPARSE. */
int hp_size_parse(const char *s, uint64_t *ret) HP_MUST_CHECK;
int hp_parse_i64(const char *s, size_t n, int64_t *ret) HP_MUST_CHECK;
int hp_parse_hex64(const char *s, size_t n, uint64_t *ret) HP_MUST_CHECK;
/* The value of one hex digit (0-9, a-f, A-F), or -1. */
int hp_hex_digit(char c);

/* The run of hex digits (0-9, a-f, A-F, no "0x") that starts [s, s+n), for
 * readers that tokenize: *ret_len is set to the run's length (0 when s does
 * not start with a digit). Returns 0 with its value in *ret_v (0 for an
 * empty run), or HP_ETOOBIG when the value needs more than 64 bits; leading
 * zeros are fine. Unlike other ret_ parameters *ret_len is written in both
 * cases, so that a caller can quote the input after the run.
 *
 * Never reads outside [s, s+n). The profile readers decode millions of
 * addresses, so this works on many bytes at once: with SSE2 (every x86-64)
 * a run shorter than 16 digits with 16 bytes to read is classified and
 * converted in one 16-byte register; anything else goes 8 bytes at a time
 * in a 64-bit word (SWAR, hp__hex_scan_swar), where a run that ends within
 * the last 8 bytes is read by one load that ends at s+n. hp_hex_digit() is
 * the reference for what a digit is; tests/store/test-hp.c checks both
 * paths against it. (Measured on the parse bench's 12-digit addresses: the
 * SSE2 path 2.7 ns, a digit-at-a-time table loop 6.8 ns, SWAR 7.9 ns: the
 * word-wide nibble packing costs more than it saves at 12 digits, so SWAR
 * stays the portable path, not the fast one.) */
static inline int hp_hex_scan(const char *s, size_t n, size_t *ret_len, uint64_t *ret_v);
static inline int hp__hex_scan_swar(const char *s, size_t n, size_t *ret_len, uint64_t *ret_v);

#define HP__ONES UINT64_C(0x0101010101010101)
#define HP__HIGH (HP__ONES * 0x80)

/* Bytes s[0..7] as a word whose low byte is s[0], on any host. */
static inline uint64_t hp__load8(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* 0x80 in each byte of w that is a hex digit, 0 in the others. The adds
 * work on 7-bit bytes (bit 7 masked off first, bytes with it set are never
 * digits), so no carry crosses into the next byte. */
static inline uint64_t hp__hex8_digits(uint64_t w)
{
    uint64_t x = w & ~HP__HIGH;
    uint64_t dec = (x + HP__ONES * (0x80 - '0')) & ~(x + HP__ONES * (0x80 - '9' - 1));
    uint64_t l = x | HP__ONES * 0x20; /* 'A'..'F' -> 'a'..'f' */
    uint64_t alpha = (l + HP__ONES * (0x80 - 'a')) & ~(l + HP__ONES * (0x80 - 'f' - 1));
    return (dec | alpha) & ~w & HP__HIGH;
}

/* The value of the first k (1..8) bytes of w, all hex digits. */
static inline uint64_t hp__hex8_value(uint64_t w, unsigned k)
{
    /* Bit 6 is set in letters only; a letter's low nibble is its value
     * minus 9 ('a' is 0x61). */
    uint64_t letters = (w >> 6) & HP__ONES;
    uint64_t t = (w & HP__ONES * 0x0f) + letters * 9;
    /* Keep the k digits, the last one in the low byte; pack the nibbles. */
    t = __builtin_bswap64(t << (8 * (8 - k)));
    t = (t | (t >> 4)) & UINT64_C(0x00ff00ff00ff00ff);
    t = (t | (t >> 8)) & UINT64_C(0x0000ffff0000ffff);
    return (t | (t >> 16)) & UINT64_C(0x00000000ffffffff);
}

static inline int hp__hex_scan_swar(const char *s, size_t n, size_t *ret_len, uint64_t *ret_v)
{
    size_t pos = 0;
    uint64_t v = 0;
    for (;;) {
        size_t left = n - pos;
        uint64_t w;
        if (left >= 8) {
            w = hp__load8(s + pos);
        } else if (left == 0) {
            break;
        } else if (n >= 8) {
            w = hp__load8(s + n - 8) >> (8 * (8 - left)); /* zero bytes: not digits */
        } else {
            w = 0;
            for (size_t i = 0; i < left; i++)
                w |= (uint64_t)(unsigned char)s[pos + i] << (8 * i);
        }
        uint64_t stop = ~hp__hex8_digits(w) & HP__HIGH;
        unsigned k = stop ? (unsigned)__builtin_ctzll(stop) / 8 : 8;
        if (k) {
            v = (v << (4 * k)) | hp__hex8_value(w, k); /* k <= 8: no UB shift */
            pos += k;
        }
        if (k < 8)
            break;
    }
    *ret_len = pos;
    if (pos > 16) {
        /* Rare: more than 16 digits are fine as long as the extra ones are
         * leading zeros. */
        size_t z = 0;
        while (z < pos && s[z] == '0')
            z++;
        if (pos - z > 16)
            return HP_ETOOBIG;
        v = 0;
        for (size_t i = z; i < pos; i++)
            v = (v << 4) | (uint64_t)hp_hex_digit(s[i]);
    }
    *ret_v = v;
    return 0;
}

static inline int hp_hex_scan(const char *s, size_t n, size_t *ret_len, uint64_t *ret_v)
{
#ifdef __SSE2__
    if (n >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
        /* Signed compares: bytes >= 0x80 are negative, below '0'. */
        __m128i dec = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                    _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
        __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(lower, _mm_set1_epi8('a' - 1)),
                                      _mm_cmplt_epi8(lower, _mm_set1_epi8('f' + 1)));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(dec, alpha));
        unsigned len = (unsigned)__builtin_ctz(~mask); /* bit 16 of mask is clear */
        if (len < 16) {
            *ret_len = len;
            if (len == 0) {
                *ret_v = 0;
                return 0;
            }
            /* Nibble values, then byte pairs (first digit high), packed to
             * 8 bytes: the first digit's byte is the low one, so a byte
             * swap makes the number, and the shift drops the bytes after
             * the run. */
            __m128i nib = _mm_add_epi8(_mm_and_si128(v, _mm_set1_epi8(0x0f)),
                                       _mm_and_si128(alpha, _mm_set1_epi8(9)));
            __m128i pair = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(nib, _mm_set1_epi16(0xff)), 4),
                                        _mm_srli_epi16(nib, 8));
            uint64_t w = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(pair, pair));
            *ret_v = __builtin_bswap64(w) >> (4 * (16 - len));
            return 0;
        }
    }
#endif
    return hp__hex_scan_swar(s, n, ret_len, ret_v);
}
int hp_parse_double(const char *s, double *ret) HP_MUST_CHECK;
/* Durations like 90s, 15m, 1h, 7d, 2w (bare numbers are seconds). */
int hp_parse_duration(const char *s, int64_t *ret_seconds) HP_MUST_CHECK;

/* Edit distance (insertions, deletions, substitutions; each costs 1)
 * between two strings, for "did you mean" hints; strings longer than 255
 * bytes compare as far apart (returns SIZE_MAX). */
size_t hp_edit_distance(const char *a, const char *b);

/* ---- times and snapshot selectors: the one parser the CLI and the API share
 *
 * A time is "now", relative "-N[smhdw]" (at most 3650 days back), or ISO 8601
 * / RFC 3339: YYYY-MM-DD[(T|t| )HH:MM[:SS[(.|,)fraction]]][Z|z|(+|-)HH[:]MM],
 * UTC when no offset is given. Years 1970..9999, days that exist (no Feb 31),
 * offsets up to 23:59; fractions past milliseconds are dropped. */
int hp_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms) HP_MUST_CHECK;
/* "2026-11-22T09:00:00Z" (UTC, seconds) into out; returns out. */
const char *hp_time_format(int64_t ms, char *out, size_t outsz);

/* A snapshot selector: "#ID", "NODE" (its latest snapshot), "NODE@TIME"
 * (the snapshot at TIME: an error when TIME is later than now, as no
 * snapshot can be taken in the future) or "NODE@<=TIME" (the latest at or
 * before TIME, whatever TIME is). The node is [s, s + node_len) of the
 * text. HP_EPARSE with the reason in err. */
struct hp_selector {
    int64_t id;          /* #ID, else 0 */
    const char *node;    /* into the parsed text; NULL for #ID */
    size_t node_len;
    bool has_time;
    bool at_or_before;   /* "@<=": no check against now */
    int64_t at_ms;       /* with has_time */
};
#define HP_SELECTOR_MAX 256
int hp_selector_parse(const char *text, int64_t now_ms, struct hp_selector *ret,
                      struct hp_buf *err) HP_MUST_CHECK;

/* A double as int64, truncated toward zero and saturated at the range ends
 * (NaN gives 0): sums of hostile counts may exceed what int64 holds. */
static inline int64_t hp_double_to_i64(double x)
{
    if (!(x == x))
        return 0;
    if (x >= 9223372036854775807.0)
        return INT64_MAX;
    if (x <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)x;
}

/* a + b, saturated at INT64_MIN/INT64_MAX instead of overflowing: counts
 * come from nodes and files, and two records of INT64_MAX are valid input. */
static inline int64_t hp_i64_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* qsort that accepts an empty array with a NULL base (qsort's base is
 * declared nonnull, even for n == 0). */
static inline void hp_qsort(void *base, size_t n, size_t size,
                            int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* qsort comparator of int64_t, ascending. */
static inline int hp_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A key and the place it came from, for hp_radix_sort. */
struct hp_sort_item {
    uint64_t key;
    size_t i;
};

/* Sort v[0..n) by key, ascending and stable (equal keys keep their order):
 * least significant byte first, a byte that every key shares skipped. For
 * thousands of integer keys it is several times qsort's speed (no
 * comparator call per step). */
void hp_radix_sort(struct hp_sort_item *v, size_t n);

/* ---- sorted arrays -------------------------------------------------------- */
/* base holds n records of `size` bytes sorted by the uint64_t at byte offset
 * `off` of each. Returns how many records have a key <= `key`: the index one
 * past the last such record, 0 when there is none. */
size_t hp_search_le_u64(const void *base, size_t n, size_t size, size_t off, uint64_t key);
/* Interval lookup. Records are [lo, hi) ranges (uint64_t at off_lo and
 * off_hi), sorted by lo, possibly overlapping. hp_interval_maxhi() fills
 * maxhi[i] with the largest hi of records 0..i (n entries); then
 * hp_interval_find() returns the index of the record holding `key` with the
 * largest lo (the innermost of nested ranges), or SIZE_MAX. It looks back
 * only as far as an earlier range can still reach `key`: exact, with no
 * fixed look-back. */
void hp_interval_maxhi(const void *base, size_t n, size_t size, size_t off_hi, uint64_t *maxhi);
size_t hp_interval_find(const void *base, size_t n, size_t size, size_t off_lo, size_t off_hi,
                        const uint64_t *maxhi, uint64_t key);

/* ---- human units ---------------------------------------------------------- */
/* Format bytes as "1.5 GiB"/"312 B" into out (at least 32 bytes). */
const char *hp_fmt_bytes(double bytes, char *out, size_t outsz);
/* Format a count as "1.2M"/"950". */
const char *hp_fmt_count(double n, char *out, size_t outsz);

/* ---- logging: logfmt lines on stderr ------------------------------------- */
enum hp_log_level { HP_LOG_ERROR, HP_LOG_WARN, HP_LOG_INFO, HP_LOG_DEBUG };
extern enum hp_log_level hp_log_threshold;
void hp_log_set_level(enum hp_log_level lvl);
int hp_log_level_parse(const char *s, enum hp_log_level *ret);
/* `kv` is preformatted logfmt key=value pairs (may be empty); msg is quoted. */
void hp_log_emit(enum hp_log_level lvl, const char *comp, const char *fmt, ...) HP_PRINTF(3, 4);
#define hp_log(lvl, comp, ...)                                                            \
    do {                                                                                  \
        if ((lvl) <= hp_log_threshold)                                                    \
            hp_log_emit((lvl), (comp), __VA_ARGS__);                                      \
    } while (0)
#define hp_log_error(comp, ...) hp_log(HP_LOG_ERROR, comp, __VA_ARGS__)
#define hp_log_warn(comp, ...) hp_log(HP_LOG_WARN, comp, __VA_ARGS__)
#define hp_log_info(comp, ...) hp_log(HP_LOG_INFO, comp, __VA_ARGS__)
#define hp_log_debug(comp, ...) hp_log(HP_LOG_DEBUG, comp, __VA_ARGS__)
/* Append `s` to b as a logfmt value: bare when safe, else quoted and escaped. */
int hp_logfmt_value(struct hp_buf *b, const char *s);

/* ---- peers: secrets, addresses, names, patterns -------------------------- */
/* Compare a presented secret with the expected one in time that depends only
 * on the expected length (no early exit on the first wrong byte). */
bool hp_secret_equal(const char *expected, size_t elen, const char *got, size_t glen);
/* Does an Authorization header value [value, value+len) present `token` as
 * "Bearer <token>" (the scheme in any case, RFC 7235)? The token is compared
 * with hp_secret_equal. Both servers (the collector's web, the agent) check
 * their token with this one function. */
bool hp_bearer_ok(const char *token, size_t token_len, const char *value, size_t len);

/* Parse a listen address "HOST:PORT" or "[V6]:PORT" into `ret` (a struct
 * sockaddr_storage). HOST is numeric, or "localhost" (127.0.0.1) for every
 * server alike: a name would need a blocking resolver call. `what` names the
 * flag in errors ("--listen"). 0 or HP_EUSAGE with `err` set. */
struct sockaddr_storage;
int hp_hostport_parse(const char *s, const char *what, struct sockaddr_storage *ret,
                      struct hp_buf *err) HP_MUST_CHECK;
/* True when the address is 127.0.0.0/8 or ::1 (or ::ffff:127.x). */
bool hp_addr_is_loopback(const struct sockaddr_storage *ss);

/* Node names: 1 to HP_NAME_MAX of letters, digits and "._:-". Returns 0, or
 * HP_EPARSE with the offending byte's offset in *ret_at. */
#define HP_NAME_MAX 128
int hp_name_check(const char *s, size_t n, size_t *ret_at);

/* Copy of a URL with its userinfo ("user:pw@") replaced by "***@" for
 * display in logs, labels and the API. Plain host:port strings come back
 * unchanged. free() it. */
char *hp_url_redact(const char *url);

/* The budget every user-given regular expression must fit before anything
 * compiles it: at most HP_REGEX_MAX bytes, counted repetitions {m,n} up to
 * HP_REGEX_MAX_REPEAT, and an expanded size (atoms times the repetition
 * counts around them) up to HP_REGEX_MAX_COST. glibc's regcomp expands
 * counted repetitions, so ((a{1000}){1000}){1000} would take minutes and
 * gigabytes. 0 or HP_EUSAGE with the reason in `err`. */
#define HP_REGEX_MAX 4096
#define HP_REGEX_MAX_REPEAT 255
#define HP_REGEX_MAX_COST 20000
int hp_regex_budget_check(const char *pat, struct hp_buf *err);

/* ---- files ---------------------------------------------------------------- */
/* Read a whole file, refusing files over `cap` bytes (HP_ETOOBIG). The result
 * is NUL-terminated; free() it. */
int hp_file_read(const char *path, size_t cap, char **ret_data, size_t *ret_len,
                 struct hp_buf *err) HP_MUST_CHECK;

/* mkdir -p: create `path` and its missing parents (mode 0755). 0, or a
 * negated errno (HP_ERR) of the first mkdir that failed for another reason
 * than the folder existing. */
int hp_mkdir_p(const char *path) HP_MUST_CHECK;

/* opendir(3) by way of open(O_DIRECTORY | O_CLOEXEC) and fdopendir(3): the
 * descriptor is not inherited by children, and ThreadSanitizer sees the
 * descriptor being created. Its opendir interceptor does not, so a
 * closedir() on a number that a socket used a moment ago in another thread
 * is reported as a race on the descriptor (web/source-dir.c in the web
 * server's worker threads hit exactly that). NULL with errno set. */
DIR *hp_opendir(const char *path);

/* Monotonic and wall clocks. */
uint64_t hp_now_ns(void);
int64_t hp_wall_ms(void);

/* Heap settings for a short process that builds one profile's tables and
 * exits (`query top`, `export`, `diff`, `fleet`, `leaks`): one brk heap
 * grown 64 MB at a time, transparent huge pages asked for, nothing handed
 * back before exit. Call first thing. hp.c says why. */
void hp_heap_prepare(void);

#endif
