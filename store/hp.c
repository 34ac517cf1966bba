/* Shared primitives (see hp.h). Nothing here knows about profiles, SQLite,
 * HTTP or DWARF; it is the bottom layer every module links. */
#include "store/hp.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
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

void *hp_xgrow_slow(void *p, size_t *cap, size_t need, size_t size)
{
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

/* ---- text ---- */

void hp_buf_prom_label(struct hp_buf *b, const char *s)
{
    hp_buf_puts(b, "\"");
    for (; s && *s; s++) {
        if (*s == '\\')
            hp_buf_puts(b, "\\\\");
        else if (*s == '"')
            hp_buf_puts(b, "\\\"");
        else if (*s == '\n')
            hp_buf_puts(b, "\\n");
        else
            hp_buf_append(b, s, 1);
    }
    hp_buf_puts(b, "\"");
}

const char *hp_utf8_clean(struct hp_arena *arena, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t bad = 0, len = 0;
    while (p[len]) {
        unsigned char c = p[len];
        size_t need = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3
                                                                                            : 9;
        if (need == 9 || (c >= 0x80 && c < 0xc2) || c > 0xf4) {
            bad++;
            len++;
            continue;
        }
        size_t k = 1;
        while (k <= need && (p[len + k] & 0xc0) == 0x80)
            k++;
        if (k <= need)
            bad++, k = 1;
        len += k;
    }
    if (!bad)
        return s;
    char *out = hp_arena_alloc(arena, len + bad * 2 + 1);
    size_t o = 0, i = 0;
    while (p[i]) {
        unsigned char c = p[i];
        size_t need = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3
                                                                                            : 9;
        size_t k = 1;
        if (need != 9 && !(c >= 0x80 && c < 0xc2) && c <= 0xf4) {
            while (k <= need && (p[i + k] & 0xc0) == 0x80)
                k++;
            if (k > need) {
                memcpy(out + o, p + i, k);
                o += k;
                i += k;
                continue;
            }
        }
        memcpy(out + o, "\xef\xbf\xbd", 3);
        o += 3;
        i += 1;
    }
    out[o] = '\0';
    return out;
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
    if (n) /* s may be NULL for an empty string (protobuf-c leaves it so) */
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
    uint64_t h = hp_hash_begin(seed);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = hp_hash_word(h, w);
        p += 8;
        n -= 8;
    }
    while (n--) {
        h = (h ^ *p++) * UINT64_C(0x100000001b3);
    }
    return hp_hash_end(h);
}

uint64_t hp_hash_bytes_wide(const void *data, size_t n, uint64_t seed)
{
    if (n < 8)
        return hp_hash_bytes(data, n, seed);
    const unsigned char *p = data, *end = p + n;
    uint64_t h0 = hp_hash_begin(seed ^ n), h1 = hp_hash_begin(seed ^ UINT64_C(0x9e3779b97f4a7c15)),
             h2 = hp_hash_begin(seed ^ UINT64_C(0xc2b2ae3d27d4eb4f)),
             h3 = hp_hash_begin(seed ^ UINT64_C(0x165667b19e3779f9));
    uint64_t w0, w1, w2, w3;
    for (; end - p > 32; p += 32) {
        memcpy(&w0, p, 8);
        memcpy(&w1, p + 8, 8);
        memcpy(&w2, p + 16, 8);
        memcpy(&w3, p + 24, 8);
        /* The words stay in general registers: vectorized (SSE2 has no
         * 64-bit multiply), the four multiplies became shifts and adds,
         * and the hash ran at half hp_hash_bytes' speed. */
        __asm__("" : "+r"(w0), "+r"(w1), "+r"(w2), "+r"(w3));
        h0 = hp_hash_word(h0, w0);
        h1 = hp_hash_word(h1, w1);
        h2 = hp_hash_word(h2, w2);
        h3 = hp_hash_word(h3, w3);
    }
    /* 1 to 32 bytes left: whole words, then the last 8 bytes of the input
     * (overlapping the words before; the length is in the hash). */
    if (p < end - 8) {
        memcpy(&w0, p, 8);
        h0 = hp_hash_word(h0, w0);
    }
    if (p + 8 < end - 8) {
        memcpy(&w1, p + 8, 8);
        h1 = hp_hash_word(h1, w1);
    }
    if (p + 16 < end - 8) {
        memcpy(&w2, p + 16, 8);
        h2 = hp_hash_word(h2, w2);
    }
    memcpy(&w3, end - 8, 8);
    h3 = hp_hash_word(h3, w3);
    return hp_hash_end(hp_hash_word(hp_hash_word(hp_hash_word(h0, h1), h2), h3));
}

/* ---- radix sort ---- */

void hp_radix_sort(struct hp_sort_item *v, size_t n)
{
    if (n < 2)
        return;
    /* Already in order (ids met in ascending order often are): done. */
    size_t i = 1;
    while (i < n && v[i - 1].key <= v[i].key)
        i++;
    if (i == n)
        return;
    /* Every byte's counts in one pass; a byte all keys share is skipped
     * (ids use the low three or four: counting per byte took eight passes
     * over the keys, a sort's larger part). */
    size_t (*count)[257] = hp_xcalloc(8, sizeof(*count));
    for (i = 0; i < n; i++) {
        uint64_t k = v[i].key;
        for (int d = 0; d < 8; d++)
            count[d][((k >> (8 * d)) & 0xff) + 1]++;
    }
    struct hp_sort_item *tmp = hp_xmalloc(n * sizeof(*tmp)), *a = v, *b = tmp;
    for (int d = 0; d < 8; d++) {
        int shift = 8 * d;
        size_t *c = count[d];
        if (c[((a[0].key >> shift) & 0xff) + 1] == n)
            continue;
        for (int x = 0; x < 256; x++)
            c[x + 1] += c[x];
        for (i = 0; i < n; i++)
            b[c[(a[i].key >> shift) & 0xff]++] = a[i];
        struct hp_sort_item *t = a;
        a = b;
        b = t;
    }
    if (a != v)
        memcpy(v, a, n * sizeof(*v));
    free(tmp);
    free(count);
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

void hp_map64_reserve(struct hp_map64 *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 64;
    while ((n + 1) * 2 > cap)
        cap *= 2;
    if (cap > m->cap)
        map64_rehash(m, cap);
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
    free(t->by_id);
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
    if (t->len >= UINT32_MAX) { /* 64 GB of strings and more: as out of memory */
        fprintf(stderr, "level=error comp=mem msg=\"more than 2^32 distinct strings\"\n");
        abort();
    }
    uint32_t id = (uint32_t)t->len;
    char *p = (char *)hp_arena_alloc(t->arena, sizeof(id) + n + 1) + sizeof(id);
    memcpy(p - sizeof(id), &id, sizeof(id)); /* hp_strtab_id */
    if (n) /* s may be NULL for an empty string (hp_arena_strndup) */
        memcpy(p, s, n);
    p[n] = '\0';
    t->by_id = hp_xgrow(t->by_id, &t->by_id_cap, t->len + 1, sizeof(*t->by_id));
    t->by_id[id] = p;
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

int hp_hex_digit(char c)
{
    unsigned u = (unsigned char)c;
    if (u - '0' <= 9)
        return (int)(u - '0');
    if ((u | 0x20) - 'a' <= 5)
        return (int)((u | 0x20) - 'a' + 10);
    return -1;
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
        int d = hp_hex_digit(s[i]);
        if (d < 0)
            return HP_EPARSE;
        v = (v << 4) | (unsigned)d;
    }
    *ret = v;
    return 0;
}

int hp_size_parse(const char *s, uint64_t *ret)
{
    size_t n = strlen(s);
    uint64_t mult = 1;
    if (n && (s[n - 1] == 'K' || s[n - 1] == 'k'))
        mult = 1 << 10, n--;
    else if (n && (s[n - 1] == 'M' || s[n - 1] == 'm'))
        mult = 1 << 20, n--;
    else if (n && (s[n - 1] == 'G' || s[n - 1] == 'g'))
        mult = 1 << 30, n--;
    uint64_t v;
    if (hp_parse_u64(s, n, &v) < 0 || v == 0 || v > UINT64_MAX / mult)
        return HP_EPARSE;
    *ret = v * mult;
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

DIR *hp_opendir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

int hp_mkdir_p(const char *path)
{
    char *t = hp_xstrdup(path);
    int r = 0;
    for (char *p = t + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(t, 0755) != 0 && errno != EEXIST) {
            r = HP_ERR(errno);
            break;
        }
        *p = c;
        if (c == '\0')
            break;
    }
    free(t);
    return r;
}

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

/* ---- sorted arrays -------------------------------------------------------- */

static uint64_t rec_u64(const void *base, size_t i, size_t size, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)base + i * size + off, sizeof(v));
    return v;
}

size_t hp_search_le_u64(const void *base, size_t n, size_t size, size_t off, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rec_u64(base, mid, size, off) <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void hp_interval_maxhi(const void *base, size_t n, size_t size, size_t off_hi, uint64_t *maxhi)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = rec_u64(base, i, size, off_hi);
        m = h > m ? h : m;
        maxhi[i] = m;
    }
}

size_t hp_interval_find(const void *base, size_t n, size_t size, size_t off_lo, size_t off_hi,
                        const uint64_t *maxhi, uint64_t key)
{
    /* Records [0, i) start at or before key; walk back while some record
     * at or before i - 1 still ends after key. */
    for (size_t i = hp_search_le_u64(base, n, size, off_lo, key); i > 0 && maxhi[i - 1] > key;
         i--) {
        if (key < rec_u64(base, i - 1, size, off_hi))
            return i - 1;
    }
    return SIZE_MAX;
}

/* ---- peers: secrets, addresses, names, patterns -------------------------- */

bool hp_secret_equal(const char *expected, size_t elen, const char *got, size_t glen)
{
    /* Every byte of the expected secret is visited whatever `got` holds; a
     * length mismatch is folded into the same accumulator. */
    unsigned char diff = (unsigned char)(elen != glen);
    for (size_t k = 0; k < elen; k++)
        diff |= (unsigned char)(expected[k] ^ (k < glen ? got[k] : 0));
    return diff == 0;
}

bool hp_bearer_ok(const char *token, size_t token_len, const char *value, size_t len)
{
    static const char scheme[] = "Bearer ";
    size_t n = sizeof(scheme) - 1;
    if (len < n || strncasecmp(value, scheme, n) != 0)
        return false;
    return hp_secret_equal(token, token_len, value + n, len - n);
}

int hp_hostport_parse(const char *s, const char *what, struct sockaddr_storage *ret,
                      struct hp_buf *err)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
        hp_err_printf(err, "%s \"%s\": expected HOST:PORT or [V6]:PORT (e.g. 127.0.0.1:7070)",
                      what, s);
        return HP_EUSAGE;
    }
    uint64_t port;
    if (hp_parse_u64(colon + 1, strlen(colon + 1), &port) < 0 || port > 65535) {
        hp_err_printf(err, "%s \"%s\": bad port (0-65535)", what, s);
        return HP_EUSAGE;
    }
    char host[INET6_ADDRSTRLEN + 1];
    size_t hlen = (size_t)(colon - s);
    const char *h = s;
    bool bracketed = hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']';
    if (bracketed)
        h++, hlen -= 2;
    if (hlen == 0 || hlen >= sizeof(host)) {
        hp_err_printf(err, "%s \"%s\": bad host", what, s);
        return HP_EUSAGE;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    if (strcmp(host, "localhost") == 0)
        memcpy(host, "127.0.0.1", 10);
    memset(ret, 0, sizeof(*ret));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ret;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ret;
    if (!bracketed && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return 0;
    }
    hp_err_printf(err, "%s \"%s\": \"%s\" is not a numeric IPv4/IPv6 address or localhost", what,
                  s, host);
    return HP_EUSAGE;
}

bool hp_addr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)ss;
        return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

int hp_name_check(const char *s, size_t n, size_t *ret_at)
{
    if (n == 0 || n > HP_NAME_MAX) {
        *ret_at = n > HP_NAME_MAX ? HP_NAME_MAX : 0;
        return HP_EPARSE;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) {
            *ret_at = i;
            return HP_EPARSE;
        }
    }
    return 0;
}

char *hp_url_redact(const char *url)
{
    const char *scheme = strstr(url, "://");
    const char *auth = scheme ? scheme + 3 : url;
    size_t alen = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + alen; p++)
        if (*p == '@')
            at = p; /* the last '@' ends the userinfo */
    if (!at)
        return hp_xstrdup(url);
    return hp_xasprintf("%.*s***%s", (int)(auth - url), url, at);
}

/* One level of the pattern while scanning: the cost so far and that of the
 * last element (what a following repetition multiplies). */
struct regex_frame {
    uint64_t cost, last;
};

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return (b && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

int hp_regex_budget_check(const char *pat, struct hp_buf *err)
{
    size_t n = strlen(pat);
    if (n > HP_REGEX_MAX) {
        hp_err_printf(err, "pattern longer than %d bytes", HP_REGEX_MAX);
        return HP_EUSAGE;
    }
    struct regex_frame st[64];
    size_t depth = 0;
    st[0] = (struct regex_frame){ 0, 0 };
    for (size_t i = 0; i < n; i++) {
        struct regex_frame *f = &st[depth];
        char c = pat[i];
        uint64_t factor = 0; /* a repetition when > 0 */
        if (c == '\\') {
            i += i + 1 < n;
            f->last = 1;
            f->cost++;
        } else if (c == '[') {
            size_t j = i + 1;
            if (j < n && pat[j] == '^')
                j++;
            if (j < n && pat[j] == ']')
                j++;
            while (j < n && pat[j] != ']') {
                if (pat[j] == '[' && j + 1 < n && strchr(":.=", pat[j + 1])) {
                    const char *end = strstr(pat + j + 2, (char[]){ pat[j + 1], ']', 0 });
                    j = end ? (size_t)(end - pat) + 2 : n;
                } else {
                    j++;
                }
            }
            i = j < n ? j : n;
            f->last = 1;
            f->cost++;
        } else if (c == '(') {
            if (depth + 1 >= HP_ARRAY_SIZE(st)) {
                hp_err_printf(err, "groups nested deeper than %zu", HP_ARRAY_SIZE(st) - 1);
                return HP_EUSAGE;
            }
            st[++depth] = (struct regex_frame){ 0, 0 };
        } else if (c == ')' && depth > 0) {
            uint64_t g = st[depth].cost + 1;
            depth--;
            st[depth].last = g;
            st[depth].cost += g;
        } else if (c == '|') {
            f->last = 0;
        } else if (c == '+') {
            factor = 2; /* regcomp turns a+ into aa* */
        } else if (c == '*' || c == '?') {
            /* no copies */
        } else if (c == '{') {
            size_t j = i + 1;
            uint64_t m = 0, hi = 0;
            bool comma = false, have_hi = false;
            for (; j < n && pat[j] != '}'; j++) {
                char d = pat[j];
                if (d == ',' && !comma) {
                    comma = true;
                } else if (d >= '0' && d <= '9') {
                    uint64_t *t = comma ? &hi : &m;
                    *t = *t * 10 + (uint64_t)(d - '0');
                    have_hi |= comma;
                    if (*t > HP_REGEX_MAX_REPEAT) {
                        hp_err_printf(err, "repetition count at byte %zu is over %d", i,
                                      HP_REGEX_MAX_REPEAT);
                        return HP_EUSAGE;
                    }
                } else {
                    break;
                }
            }
            if (j >= n || pat[j] != '}') {
                f->last = 1; /* a literal brace; regcomp decides */
                f->cost++;
                continue;
            }
            factor = have_hi ? hi : comma ? m + 1 : m;
            if (factor == 0)
                factor = 1;
            i = j;
        } else {
            f->last = 1;
            f->cost++;
        }
        if (factor > 1) {
            uint64_t grown = sat_mul(f->last, factor);
            f->cost = f->cost - f->last + grown;
            if (f->cost < grown)
                f->cost = UINT64_MAX;
            f->last = grown;
        }
        uint64_t total = 0;
        for (size_t k = 0; k <= depth; k++) {
            uint64_t mult = st[k].cost;
            total = total + mult < total ? UINT64_MAX : total + mult;
        }
        if (total > HP_REGEX_MAX_COST) {
            hp_err_printf(err, "pattern too expensive: repetitions expand it past %d elements "
                               "(at byte %zu)", HP_REGEX_MAX_COST, i);
            return HP_EUSAGE;
        }
    }
    return 0;
}

size_t hp_edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > 255 || nb > 255)
        return SIZE_MAX;
    /* One row of the Wagner-Fischer table at a time. */
    size_t row[256];
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* ---- times and selectors ---------------------------------------------------- */

static bool digits_n(const char **s, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*s)[i];
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    *s += n;
    *ret = v;
    return true;
}

int hp_time_parse(const char *text, int64_t now_ms, int64_t *ret_ms)
{
    if (!text || !*text)
        return HP_EPARSE;
    if (strcmp(text, "now") == 0) {
        *ret_ms = now_ms;
        return 0;
    }
    if (text[0] == '-') {
        int64_t sec;
        if (hp_parse_duration(text + 1, &sec) < 0 || sec > INT64_C(3650) * 86400)
            return HP_EPARSE;
        *ret_ms = now_ms - sec * 1000;
        return 0;
    }
    const char *p = text;
    int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
    if (!digits_n(&p, 4, &y) || *p++ != '-' || !digits_n(&p, 2, &mo) || *p++ != '-' ||
        !digits_n(&p, 2, &d))
        return HP_EPARSE;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!digits_n(&p, 2, &h) || *p++ != ':' || !digits_n(&p, 2, &mi))
            return HP_EPARSE;
        if (*p == ':') {
            p++;
            if (!digits_n(&p, 2, &sec))
                return HP_EPARSE;
            if (*p == '.' || *p == ',') {
                p++;
                int nd = 0;
                while (*p >= '0' && *p <= '9' && nd < 9) {
                    if (nd < 3)
                        ms = ms * 10 + (*p - '0');
                    p++, nd++;
                }
                if (nd == 0)
                    return HP_EPARSE;
                for (; nd < 3; nd++)
                    ms *= 10;
            }
        }
    }
    int64_t off_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
        if (!digits_n(&p, 2, &oh))
            return HP_EPARSE;
        if (*p == ':')
            p++;
        if (*p && !digits_n(&p, 2, &om))
            return HP_EPARSE;
        if (oh > 23 || om > 59)
            return HP_EPARSE;
        off_s = sign * (oh * 3600 + om * 60);
    }
    if (*p || y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
        mi > 59 || sec > 60)
        return HP_EPARSE;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    if (tm.tm_mday != d && sec != 60) /* 2026-02-31 normalized into March */
        return HP_EPARSE;
    *ret_ms = ((int64_t)t - off_s) * 1000 + ms;
    return 0;
}

const char *hp_time_format(int64_t ms, char *out, size_t outsz)
{
    time_t t = (time_t)(ms / 1000 - (ms % 1000 < 0));
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, outsz, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, outsz, "@%lld", (long long)ms);
    return out;
}

int hp_selector_parse(const char *text, int64_t now_ms, struct hp_selector *ret,
                      struct hp_buf *err)
{
    struct hp_selector sel;
    memset(&sel, 0, sizeof(sel));
    size_t n = strlen(text);
    if (n == 0 || n > HP_SELECTOR_MAX) {
        hp_err_printf(err, "selector must be 1 to %d characters (NODE, NODE@TIME or #ID)",
                      HP_SELECTOR_MAX);
        return HP_EPARSE;
    }
    if (text[0] == '#') {
        uint64_t id;
        if (hp_parse_u64(text + 1, n - 1, &id) < 0 || id == 0 || id > (UINT64_C(1) << 53)) {
            hp_err_printf(err, "\"%s\": expected #ID with a positive number", text);
            return HP_EPARSE;
        }
        sel.id = (int64_t)id;
        *ret = sel;
        return 0;
    }
    /* Node names never hold '@' (be.list names are [A-Za-z0-9._:-]), so
     * the first '@' ends the node. */
    const char *at = strchr(text, '@');
    sel.node = text;
    sel.node_len = at ? (size_t)(at - text) : n;
    if (sel.node_len == 0) {
        hp_err_printf(err, "\"%s\": no node before '@' (expected NODE@TIME)", text);
        return HP_EPARSE;
    }
    if (at) {
        const char *t = at + 1;
        if (t[0] == '<' && t[1] == '=') {
            sel.at_or_before = true;
            t += 2;
        }
        if (hp_time_parse(t, now_ms, &sel.at_ms) < 0) {
            hp_err_printf(err,
                          "\"%s\": unreadable time \"%.64s\" (expected ISO 8601 like "
                          "2026-11-22T09:00:00Z, or relative like -6h, -2d; NODE@<=TIME "
                          "for the latest at or before TIME)",
                          text, t);
            return HP_EPARSE;
        }
        sel.has_time = true;
        if (!sel.at_or_before && sel.at_ms > now_ms) {
            char a[40], b[40];
            hp_err_printf(err,
                          "\"%s\": %s is in the future (now is %s): the newest snapshot is "
                          "older than asked, as none was taken then; ask NODE@<=TIME for the "
                          "latest at or before it",
                          text, hp_time_format(sel.at_ms, a, sizeof(a)),
                          hp_time_format(now_ms, b, sizeof(b)));
            return HP_EPARSE;
        }
    }
    *ret = sel;
    return 0;
}

/* ---- heap of a short process ---- */

/* `query top` and `query export` are short processes that build one
 * profile's tables in a heap of tens of MB and exit: first-touch page
 * faults were a sixth of a warm `query top --binary` (one per 4 KiB:
 * 7,000 for sym-bench's profile; perf: exc_page_fault, clear_page,
 * realloc copying into fresh pages). So their heap comes from one brk
 * region of 64 MB, asked to be backed by transparent huge pages where the
 * system allows it (THP "madvise" or "always"; with "never" this is only
 * the larger brk steps), and nothing is handed back before exit: 7,000
 * faults become about 1,000, the run about a fifth faster (glibc's
 * glibc.malloc.hugetlb=1 tunable does the same; a program cannot set it
 * for itself). `query leaks` too: it reads 100 nodes' series one after
 * another, and each node's scratch was mapped and unmapped afresh (0.64 s
 * of system time in the leaks bench, 0.2-0.3 s so). `query diff` of two
 * 20k-stack dumps: 9,810 faults -> ~850, 0.09-0.10 -> 0.06-0.07 s of CPU;
 * `query fleet` over five of them: 16,364 -> ~1,400 faults, 0.17-0.19 ->
 * 0.14-0.15 s (and 68 -> 91 MB at most resident). Not for the store
 * commands, which run long. */
void hp_heap_prepare(void)
{
    const size_t pad = (size_t)64 << 20, huge = (size_t)2 << 20;
    if (!mallopt(M_MMAP_THRESHOLD, 256 << 20) || !mallopt(M_TRIM_THRESHOLD, 512 << 20) ||
        !mallopt(M_TOP_PAD, (int)pad))
        return;
    /* More than the top chunk holds: the brk heap grows by it and pad.
     * volatile, or the compiler drops the unused malloc/free pair. */
    void *volatile p = malloc(pad / 2);
    free(p);
    char *b = sbrk(0);
    size_t arena = mallinfo2().arena; /* bytes of the brk heap, which ends at b */
    if (b == (char *)-1 || arena == 0 || arena > (uintptr_t)b)
        return;
    uintptr_t lo = ((uintptr_t)b - arena + huge - 1) & ~(uintptr_t)(huge - 1);
    uintptr_t hi = (uintptr_t)b & ~(uintptr_t)(huge - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}
