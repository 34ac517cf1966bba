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

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* Grow an array to hold at least `need` elements of `size` bytes. */
void *hp_xgrow(void *p, size_t *cap, size_t need, size_t size);
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
static inline uint64_t hp_hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
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
/* Insert or find: returns 1 if the key existed (*ret_val = old value), 0 if it
 * was inserted with `val` (*ret_val = val). */
int hp_map64_put(struct hp_map64 *m, uint64_t key, uint32_t val, uint32_t *ret_val);

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
struct hp_strtab {
    struct hp_arena *arena; /* borrowed */
    const char **slots;
    uint64_t *hashes;
    size_t cap, len;
};

void hp_strtab_init(struct hp_strtab *t, struct hp_arena *arena);
void hp_strtab_release(struct hp_strtab *t);
const char *hp_strtab_intern(struct hp_strtab *t, const char *s, size_t n);


/* ---- checked number parsing ---------------------------------------------
 * Each parses the whole of [s, s+n) and returns 0, or HP_EPARSE on an empty,
 * partial or overflowing number. */
int hp_parse_u64(const char *s, size_t n, uint64_t *ret) HP_MUST_CHECK;
int hp_parse_i64(const char *s, size_t n, int64_t *ret) HP_MUST_CHECK;
int hp_parse_hex64(const char *s, size_t n, uint64_t *ret) HP_MUST_CHECK;
int hp_parse_double(const char *s, double *ret) HP_MUST_CHECK;
/* Durations like 90s, 15m, 1h, 7d, 2w (bare numbers are seconds). */
int hp_parse_duration(const char *s, int64_t *ret_seconds) HP_MUST_CHECK;

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

/* ---- files ---------------------------------------------------------------- */
/* Read a whole file, refusing files over `cap` bytes (HP_ETOOBIG). The result
 * is NUL-terminated; free() it. */
int hp_file_read(const char *path, size_t cap, char **ret_data, size_t *ret_len,
                 struct hp_buf *err) HP_MUST_CHECK;

/* Monotonic and wall clocks. */
uint64_t hp_now_ns(void);
int64_t hp_wall_ms(void);

#endif
