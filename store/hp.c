/* Shared primitives (see hp.h). Nothing here knows about profiles, SQLite,
 * HTTP or DWARF; it is the bottom layer every module links. */
#include "store/hp.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *hp_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define HP_ERR_CASE(name, val, msg)                                                       \
    case val:                                                                             \
        return msg;
        HP_ERRNO_MAP(HP_ERR_CASE)
#undef HP_ERR_CASE
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}

static void oom(size_t n)
{
    fprintf(stderr, "level=error comp=mem msg=\"out of memory allocating %zu bytes\"\n", n);
    abort();
}

void *hp_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *hp_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *hp_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

void *hp_xgrow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / size)
            oom(SIZE_MAX);
        ncap *= 2;
    }
    p = hp_xrealloc(p, ncap * size);
    *cap = ncap;
    return p;
}

char *hp_xstrdup(const char *s)
{
    return hp_xstrndup(s, strlen(s));
}

char *hp_xstrndup(const char *s, size_t n)
{
    char *p = hp_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *hp_xasprintf(const char *fmt, ...)
{
    struct hp_buf b = HP_BUF_INIT(0);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (!b.data)
        return hp_xstrdup("");
    return hp_buf_detach(&b, NULL);
}

/* ---- hp_buf ---- */

void hp_buf_init(struct hp_buf *b, size_t cap)
{
    *b = HP_BUF_INIT(cap);
}

void hp_buf_release(struct hp_buf *b)
{
    free(b->data);
    *b = HP_BUF_INIT(b->cap);
}

void hp_buf_reset(struct hp_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int buf_reserve(struct hp_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1)
        return HP_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (b->cap && need - 1 > b->cap)
        return HP_ETOOBIG;
    if (need > b->alloc) {
        size_t n = b->alloc ? b->alloc : 64;
        while (n < need)
            n = n > SIZE_MAX / 2 ? need : n * 2;
        b->data = hp_xrealloc(b->data, n);
        b->alloc = n;
    }
    return 0;
}

int hp_buf_append(struct hp_buf *b, const void *data, size_t n)
{
    int r = buf_reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int hp_buf_puts(struct hp_buf *b, const char *s)
{
    return hp_buf_append(b, s, strlen(s));
}

int hp_buf_vprintf(struct hp_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return HP_EPARSE;
    int r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int hp_buf_printf(struct hp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = hp_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

char *hp_buf_detach(struct hp_buf *b, size_t *ret_len)
{
    if (!b->data)
        (void)buf_reserve(b, 0), b->data[0] = '\0';
    char *p = b->data;
    if (ret_len)
        *ret_len = b->len;
    *b = HP_BUF_INIT(b->cap);
    return p;
}

void hp_err_printf(struct hp_buf *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (err->len)
        (void)hp_buf_puts(err, "; ");
    (void)hp_buf_vprintf(err, fmt, ap);
    va_end(ap);
}

/* ---- arena ---- */

struct hp_arena_chunk {
    struct hp_arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void hp_arena_init(struct hp_arena *a)
{
    a->head = NULL;
    a->used_total = 0;
}

void hp_arena_release(struct hp_arena *a)
{
    struct hp_arena_chunk *c = a->head;
    while (c) {
        struct hp_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    hp_arena_init(a);
}

void *hp_arena_alloc(struct hp_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct hp_arena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 32768 ? n : 65536 - sizeof(*c);
        struct hp_arena_chunk *nc = hp_xmalloc(sizeof(*nc) + sz);
        nc->size = sz;
        nc->used = 0;
        if (c && n > 32768) {
            /* Big block: put it behind the head so the head keeps its room. */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used_total += n;
    return p;
}

char *hp_arena_strndup(struct hp_arena *a, const char *s, size_t n)
{
    char *p = hp_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *hp_arena_strdup(struct hp_arena *a, const char *s)
{
    return hp_arena_strndup(a, s, strlen(s));
}

/* ---- hashing ---- */

uint64_t hp_hash_bytes(const void *data, size_t n, uint64_t seed)
{
    /* FNV-1a over 8-byte words, finished with a murmur mix: fast and good
     * enough for in-process tables (not for anything adversarial-critical:
     * tables grow at 50% load, so a collision storm costs time, not memory). */
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0x100000001b3);
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    while (n--) {
        h = (h ^ *p++) * UINT64_C(0x100000001b3);
    }
    return hp_hash_u64(h);
}

/* ---- map64 ---- */

void hp_map64_init(struct hp_map64 *m)
{
    memset(m, 0, sizeof(*m));
}

void hp_map64_release(struct hp_map64 *m)
{
    free(m->slots);
    hp_map64_init(m);
}

static void map64_rehash(struct hp_map64 *m, size_t ncap)
{
    struct hp_map64_slot *old = m->slots;
    size_t ocap = m->cap;
    m->slots = hp_xmalloc(ncap * sizeof(*m->slots));
    for (size_t i = 0; i < ncap; i++)
        m->slots[i].val = UINT32_MAX;
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].val == UINT32_MAX)
            continue;
        size_t j = hp_hash_u64(old[i].key) & (ncap - 1);
        while (m->slots[j].val != UINT32_MAX)
            j = (j + 1) & (ncap - 1);
        m->slots[j] = old[i];
    }
    free(old);
}

int hp_map64_put(struct hp_map64 *m, uint64_t key, uint32_t val, uint32_t *ret_val)
{
    if ((m->len + 1) * 2 > m->cap)
        map64_rehash(m, m->cap ? m->cap * 2 : 64);
    size_t j = hp_hash_u64(key) & (m->cap - 1);
    while (m->slots[j].val != UINT32_MAX) {
        if (m->slots[j].key == key) {
            *ret_val = m->slots[j].val;
            return 1;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j].key = key;
    m->slots[j].val = val;
    m->len++;
    *ret_val = val;
    return 0;
}

/* ---- strtab ---- */

void hp_strtab_init(struct hp_strtab *t, struct hp_arena *arena)
{
    memset(t, 0, sizeof(*t));
    t->arena = arena;
}

void hp_strtab_release(struct hp_strtab *t)
{
    free(t->slots);
    free(t->hashes);
    struct hp_arena *a = t->arena;
    memset(t, 0, sizeof(*t));
    t->arena = a;
}

const char *hp_strtab_intern(struct hp_strtab *t, const char *s, size_t n)
{
    if ((t->len + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 256;
        const char **ns = hp_xcalloc(ncap, sizeof(*ns));
        uint64_t *nh = hp_xmalloc(ncap * sizeof(*nh));
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i])
                continue;
            size_t j = t->hashes[i] & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = t->slots[i];
            nh[j] = t->hashes[i];
        }
        free(t->slots);
        free(t->hashes);
        t->slots = ns;
        t->hashes = nh;
        t->cap = ncap;
    }
    uint64_t h = hp_hash_bytes(s, n, 0);
    size_t j = h & (t->cap - 1);
    while (t->slots[j]) {
        if (t->hashes[j] == h && strncmp(t->slots[j], s, n) == 0 && t->slots[j][n] == '\0')
            return t->slots[j];
        j = (j + 1) & (t->cap - 1);
    }
    char *p = hp_arena_strndup(t->arena, s, n);
    t->slots[j] = p;
    t->hashes[j] = h;
    t->len++;
    return p;
}

/* ---- number parsing ---- */

int hp_parse_u64(const char *s, size_t n, uint64_t *ret)
{
    if (n == 0 || n > 20)
        return HP_EPARSE;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return HP_EPARSE;
        if (v > (UINT64_MAX - d) / 10)
            return HP_EPARSE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int hp_parse_i64(const char *s, size_t n, int64_t *ret)
{
    bool neg = n > 0 && s[0] == '-';
    uint64_t v;
    if (hp_parse_u64(s + neg, n - neg, &v) < 0)
        return HP_EPARSE;
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return HP_EPARSE;
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int hp_parse_hex64(const char *s, size_t n, uint64_t *ret)
{
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        n -= 2;
    }
    if (n == 0)
        return HP_EPARSE;
    while (n > 16 && *s == '0')
        s++, n--;
    if (n > 16)
        return HP_EPARSE;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = (unsigned char)s[i], d;
        if (c - '0' <= 9)
            d = c - '0';
        else if ((c | 0x20) - 'a' <= 5)
            d = (c | 0x20) - 'a' + 10;
        else
            return HP_EPARSE;
        v = (v << 4) | d;
    }
    *ret = v;
    return 0;
}

int hp_parse_double(const char *s, double *ret)
{
    if (!*s)
        return HP_EPARSE;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v))
        return HP_EPARSE;
    *ret = v;
    return 0;
}

int hp_parse_duration(const char *s, int64_t *ret_seconds)
{
    size_t n = strlen(s);
    if (n == 0)
        return HP_EPARSE;
    int64_t mult = 1;
    switch (s[n - 1]) {
    case 's':
        mult = 1, n--;
        break;
    case 'm':
        mult = 60, n--;
        break;
    case 'h':
        mult = 3600, n--;
        break;
    case 'd':
        mult = 86400, n--;
        break;
    case 'w':
        mult = 7 * 86400, n--;
        break;
    default:
        break;
    }
    uint64_t v;
    if (hp_parse_u64(s, n, &v) < 0 || v > (uint64_t)INT64_MAX / (uint64_t)mult)
        return HP_EPARSE;
    *ret_seconds = (int64_t)v * mult;
    return 0;
}

/* ---- units ---- */

const char *hp_fmt_bytes(double bytes, char *out, size_t outsz)
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double a = fabs(bytes);
    size_t u = 0;
    while (a >= 1024 && u + 1 < HP_ARRAY_SIZE(units)) {
        a /= 1024;
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, outsz, "%.0f B", bytes);
    else
        snprintf(out, outsz, a >= 100 ? "%.0f %s" : a >= 10 ? "%.1f %s" : "%.2f %s", bytes,
                 units[u]);
    return out;
}

const char *hp_fmt_count(double n, char *out, size_t outsz)
{
    static const char *units[] = { "", "k", "M", "G", "T" };
    double a = fabs(n);
    size_t u = 0;
    while (a >= 1000 && u + 1 < HP_ARRAY_SIZE(units)) {
        a /= 1000;
        n /= 1000;
        u++;
    }
    snprintf(out, outsz, u == 0 ? "%.0f%s" : "%.1f%s", n, units[u]);
    return out;
}

/* ---- logging ---- */

enum hp_log_level hp_log_threshold = HP_LOG_INFO;

void hp_log_set_level(enum hp_log_level lvl)
{
    hp_log_threshold = lvl;
}

int hp_log_level_parse(const char *s, enum hp_log_level *ret)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    for (size_t i = 0; i < HP_ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (enum hp_log_level)i;
            return 0;
        }
    return HP_EPARSE;
}

int hp_logfmt_value(struct hp_buf *b, const char *s)
{
    bool bare = *s != '\0';
    for (const char *p = s; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p >= 0x7f)
            bare = false;
    if (bare)
        return hp_buf_puts(b, s);
    int r = hp_buf_puts(b, "\"");
    for (const char *p = s; *p && r == 0; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            r = hp_buf_printf(b, "\\%c", c);
        else if (c == '\n')
            r = hp_buf_puts(b, "\\n");
        else if (c < ' ')
            r = hp_buf_printf(b, "\\x%02x", c);
        else
            r = hp_buf_append(b, p, 1);
    }
    return r ? r : hp_buf_puts(b, "\"");
}

void hp_log_emit(enum hp_log_level lvl, const char *comp, const char *fmt, ...)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    struct hp_buf line = HP_BUF_INIT(0);
    char ts[32];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    (void)hp_buf_printf(&line, "ts=%s.%03ldZ level=%s comp=%s ", ts, now.tv_nsec / 1000000,
                        names[lvl], comp);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(&line, fmt, ap);
    va_end(ap);
    (void)hp_buf_puts(&line, "\n");
    /* One write per line so lines from several threads never interleave. */
    ssize_t off = 0;
    while ((size_t)off < line.len) {
        ssize_t w = write(2, line.data + off, line.len - (size_t)off);
        if (w <= 0)
            break;
        off += w;
    }
    hp_buf_release(&line);
}

/* ---- files ---- */

int hp_file_read(const char *path, size_t cap, char **ret_data, size_t *ret_len,
                 struct hp_buf *err)
{
    int r = 0;
    struct hp_buf b = HP_BUF_INIT(cap);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r = HP_ERR(errno);
        hp_err_printf(err, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        r = HP_ERR(EISDIR);
        hp_err_printf(err, "%s: is a directory", path);
        goto out;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && cap && (uint64_t)st.st_size > cap) {
        r = HP_ETOOBIG;
        hp_err_printf(err, "%s: file is %lld bytes, over the limit of %zu", path,
                      (long long)st.st_size, cap);
        goto out;
    }
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = HP_ERR(errno);
            hp_err_printf(err, "%s: read failed: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if (hp_buf_append(&b, chunk, (size_t)n) < 0) {
            r = HP_ETOOBIG;
            hp_err_printf(err, "%s: file is over the limit of %zu bytes", path, cap);
            goto out;
        }
    }
    *ret_data = hp_buf_detach(&b, ret_len);
out:
    if (fd >= 0)
        close(fd);
    hp_buf_release(&b);
    return r;
}

uint64_t hp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t hp_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
