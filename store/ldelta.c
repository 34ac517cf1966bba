/* ldelta.c: a raw dump as a line delta of its node's previous dump.
 *
 * Successive heap dumps of one node repeat most of their lines: the stack
 * lines ("@ 0x… 0x…") of long-lived allocation sites, and the count lines of
 * stacks whose counts did not move. zstd with the previous dump as a prefix
 * and long-distance matching finds those repeats too, but it re-indexes the
 * whole previous dump for every new one: 6.2 ms for a 4.4 MB dump, a third
 * of a snapshot's ingest (tests/bench/store-bench). Here the unit is the
 * line: a line that equals the previous dump's line at the same place (the
 * common case) is confirmed with one memcmp, any other is looked up in a
 * table of the previous dump's lines, and what is left (changed counts, new
 * stacks) goes to zstd on its own, which no longer has megabytes to index.
 *
 * Encoding (a row of raw_dumps whose base_id is set, when it starts with
 * LDELTA_MAGIC; zstd frames start with 28 b5 2f fd, so the two never meet):
 *   "HFL" 0x01, then a zstd frame of:
 *   varint n; n literal lengths; n zigzagged line deltas; n line counts;
 *   varint tail length; then the literal bytes, all of them in order.
 * Sequence i copies its literal bytes, then `count` (>= 1) whole lines of
 * the base starting `delta` lines after the predicted one. The predicted
 * line is the one after the last copied line, moved on by one for each line
 * the literals held since (a changed line usually stands where its old one
 * stood), so deltas are mostly 0. Columns apart compress better.
 *
 * The decoder never trusts stored bytes: every length is checked against
 * what is left of the literals and of the output, every line range against
 * the base, and the output must be exactly the recorded size. */
#include "store/store-internal.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char LDELTA_MAGIC[4] = { 'H', 'F', 'L', 0x01 };
/* The literals are what changed (counts, new stacks): text that zstd's
 * level 3 packs 10% smaller than level 1, and they are a small part. */
#define LDELTA_LEVEL 3
#define LINE_PREFETCH 8 /* puts ahead that a base line's slot is fetched */

bool store_ldelta_is(const void *src, size_t len)
{
    return len >= sizeof(LDELTA_MAGIC) && memcmp(src, LDELTA_MAGIC, sizeof(LDELTA_MAGIC)) == 0;
}

/* Most lines a dump of `len` bytes may have for a line delta: a heap dump's
 * lines are 70-110 bytes long on average (jefixture's, the bench's); text
 * of much shorter lines (hostile, or not a dump) would make the tables (16
 * bytes a line, twice over, and 4) outgrow the text. */
static size_t lines_max(size_t len)
{
    return len / 16 + 64;
}

/* Offsets of the lines of `b`: line i is [off[i], off[i + 1]), ending with
 * its newline (the last line may have none), and with ret_hash each line's
 * hp_hash_bytes_wide into *ret_hash. NULL when there are more than
 * lines_max(len). One pass: newlines found 16 bytes at a time (a memchr
 * call a line cost more than its scan), each line hashed as it ends, while
 * its bytes are at hand (a second pass read the 4.4 MB of a dump from
 * memory again). */
static uint32_t *line_offsets(const unsigned char *b, size_t len, uint32_t *ret_n,
                              uint64_t **ret_hash)
{
    size_t max = lines_max(len), cap = len / 64 + 16, hcap = cap, n = 0;
    uint32_t *off = hp_xmalloc(cap * sizeof(*off));
    uint64_t *h = ret_hash ? hp_xmalloc(hcap * sizeof(*h)) : NULL;
    if (len)
        off[n++] = 0;
    const __m128i nl = _mm_set1_epi8('\n');
    for (size_t i = 0; i < len; i += 16) {
        unsigned m;
        if (len - i >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + i));
            m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        } else {
            m = 0;
            for (size_t k = i; k < len; k++)
                m |= (unsigned)(b[k] == '\n') << (k - i);
        }
        for (; m; m &= m - 1) {
            size_t at = i + (size_t)__builtin_ctz(m) + 1; /* the next line's start */
            if (at == len)
                break;
            if (n == max) {
                free(off);
                free(h);
                return NULL;
            }
            off = hp_xgrow(off, &cap, n + 2, sizeof(*off));
            if (h)
                h = hp_xgrow(h, &hcap, n + 2, sizeof(*h));
            if (h)
                h[n - 1] = hp_hash_bytes_wide(b + off[n - 1], at - off[n - 1], 0);
            off[n++] = (uint32_t)at;
        }
    }
    if (h && n)
        h[n - 1] = hp_hash_bytes_wide(b + off[n - 1], len - off[n - 1], 0);
    off[n] = (uint32_t)len;
    *ret_n = (uint32_t)n;
    if (ret_hash)
        *ret_hash = h;
    return off;
}

void store_lines_release(struct store_lines *l)
{
    free(l->off);
    free(l->hash);
    *l = (struct store_lines){ 0 };
}

bool store_lines_of(const void *text, size_t len, struct store_lines *out)
{
    *out = (struct store_lines){ 0 };
    if (len >= UINT32_MAX)
        return false;
    out->off = line_offsets(text, len, &out->n, &out->hash);
    if (!out->off)
        return false;
    out->len = len;
    out->known = true;
    return true;
}

/* A text's lines as the encoder meets them, each with its hash: known
 * already for the lines it copies from the base (the base's) and for the
 * lines it looked up; computed only for the few it could not. */
struct lines_out {
    struct store_lines *l;
    size_t cap, max;
};

static void lines_grow(struct lines_out *o)
{
    struct store_lines *l = o->l;
    o->cap = HP_MAX(o->cap * 2, (size_t)l->n + 2);
    l->off = hp_xrealloc(l->off, o->cap * sizeof(*l->off));
    l->hash = hp_xrealloc(l->hash, o->cap * sizeof(*l->hash));
}

/* Inline: a call a line was 1.7% of a steady snapshot's instructions. */
static inline void lines_add(struct lines_out *o, uint32_t at, uint64_t hash)
{
    struct store_lines *l = o->l;
    if (!l || l->n == o->max) {
        o->l = NULL; /* too many for a line delta: not kept */
        return;
    }
    if (l->n + 2 > o->cap)
        lines_grow(o);
    l->off[l->n] = at;
    l->hash[l->n++] = hash;
}

struct seq {
    uint32_t lit_off, lit; /* literal bytes [lit_off, lit_off + lit) */
    uint32_t count;        /* then this many base lines */
    int64_t delta;         /* from the predicted line */
};

int store_ldelta_encode(ZSTD_CCtx *c, const char *path, const void *src, size_t len,
                        const void *base, size_t base_len, const struct store_lines *base_lines,
                        struct store_lines *ret_lines, struct store_zbuf *reuse, void **ret,
                        size_t *ret_len, struct hp_buf *err)
{
    const unsigned char *s = src, *b = base;
    if (ret_lines)
        *ret_lines = (struct store_lines){ 0 };
    if (len >= UINT32_MAX || base_len >= UINT32_MAX)
        return 0;
    uint32_t nb;
    uint64_t *bh;
    uint32_t *bo;
    bool own = !base_lines || !base_lines->known || base_lines->len != base_len;
    if (own) {
        if (!(bo = line_offsets(b, base_len, &nb, &bh)))
            return 0;
    } else {
        bo = base_lines->off;
        bh = base_lines->hash;
        nb = base_lines->n;
    }
    struct lines_out lo = { .l = ret_lines, .max = lines_max(len) };
    if (ret_lines) { /* room for as many lines as the base has, and some */
        lo.cap = HP_MIN((size_t)nb + nb / 16 + 16, lo.max + 1);
        ret_lines->off = hp_xmalloc(lo.cap * sizeof(*ret_lines->off));
        ret_lines->hash = hp_xmalloc(lo.cap * sizeof(*ret_lines->hash));
    }
    /* Base lines by content; of equal lines the first (put keeps it). Each
     * slot fetched a few puts ahead: every put is a cache miss in a table
     * of 40,000 lines (a 4.4 MB dump), and were a fifth of the encoding. */
    struct hp_map64 lines;
    hp_map64_init(&lines);
    hp_map64_reserve(&lines, nb);
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t old;
        if (i + LINE_PREFETCH < nb)
            hp_map64_prefetch(&lines, bh[i + LINE_PREFETCH]);
        (void)hp_map64_put(&lines, bh[i], i, &old);
    }
    size_t nseq = 0, seq_cap = 0, lit_bytes = 0, max = lines_max(len);
    struct seq *seq = NULL;
    uint32_t next = 0; /* the predicted base line of the next line */
    size_t lit_at = 0; /* where the pending literal bytes start */
    int r = 1;
    for (size_t pos = 0; pos < len;) {
        const unsigned char *nl = memchr(s + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - s) + 1 : len, n = end - pos;
        uint32_t m = UINT32_MAX, i;
        uint64_t h = 0;
        if (next < nb && bo[next + 1] - bo[next] == n && memcmp(s + pos, b + bo[next], n) == 0)
            m = next;
        else if (hp_map64_get(&lines, h = hp_hash_bytes_wide(s + pos, n, 0), &i) &&
                 bo[i + 1] - bo[i] == n &&
                 memcmp(s + pos, b + bo[i], n) == 0)
            m = i;
        if (m == UINT32_MAX) { /* a literal line: its old one stood here */
            lines_add(&lo, (uint32_t)pos, h);
            pos = end;
            next++;
            continue;
        }
        lines_add(&lo, (uint32_t)pos, bh[m]);
        if (nseq == max) {
            r = 0;
            goto out;
        }
        /* Copy from line m on while the following lines match too. */
        size_t start = pos;
        uint32_t k = 1;
        pos = end;
        while (m + k < nb) {
            size_t bl = bo[m + k + 1] - bo[m + k];
            if (len - pos < bl || memcmp(s + pos, b + bo[m + k], bl) != 0)
                break;
            if (b[bo[m + k + 1] - 1] == '\n' || pos + bl == len)
                lines_add(&lo, (uint32_t)pos, bh[m + k]);
            else
                lo.l = NULL; /* the base's last line, without its newline, starts one of
                                src's: src's lines are not the copied ones */
            pos += bl;
            k++;
        }
        seq = hp_xgrow(seq, &seq_cap, nseq + 1, sizeof(*seq));
        seq[nseq++] = (struct seq){ .lit_off = (uint32_t)lit_at,
                                    .lit = (uint32_t)(start - lit_at),
                                    .count = k,
                                    .delta = (int64_t)m - (int64_t)next };
        lit_bytes += start - lit_at;
        lit_at = pos;
        next = m + k;
    }

    struct store_pack p = { 0 };
    size_t tail = len - lit_at;
    store_pack_reserve(&p, 3 * 10 * nseq + 20 + lit_bytes + tail);
    store_pack_u64(&p, nseq);
    for (size_t i = 0; i < nseq; i++)
        store_pack_u64(&p, seq[i].lit);
    for (size_t i = 0; i < nseq; i++)
        store_pack_i64(&p, seq[i].delta);
    for (size_t i = 0; i < nseq; i++)
        store_pack_u64(&p, seq[i].count);
    store_pack_u64(&p, tail);
    for (size_t i = 0; i < nseq; i++)
        store_pack_bytes(&p, s + seq[i].lit_off, seq[i].lit);
    store_pack_bytes(&p, s + lit_at, tail);

    size_t bound = sizeof(LDELTA_MAGIC) + ZSTD_compressBound(p.len);
    unsigned char *o = reuse ? store_zbuf_reserve(reuse, bound) : hp_xmalloc(bound);
    memcpy(o, LDELTA_MAGIC, sizeof(LDELTA_MAGIC));
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    size_t zr = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, LDELTA_LEVEL);
    if (!ZSTD_isError(zr))
        zr = ZSTD_compress2(c, o + sizeof(LDELTA_MAGIC), bound - sizeof(LDELTA_MAGIC), p.data,
                            p.len);
    store_pack_release(&p);
    if (ZSTD_isError(zr)) {
        hp_err_printf(err, "%s: compressing a line delta of %zu bytes: %s", path, len,
                      ZSTD_getErrorName(zr));
        if (!reuse)
            free(o);
        r = HP_ESTORE;
        goto out;
    }
    *ret = o;
    *ret_len = sizeof(LDELTA_MAGIC) + zr;
out:
    free(seq);
    hp_map64_release(&lines);
    if (own) {
        free(bo);
        free(bh);
    }
    if (ret_lines) {
        if (r == 1 && lo.l) { /* room for off[n]: lines_add keeps two places spare */
            ret_lines->off[ret_lines->n] = (uint32_t)len;
            ret_lines->len = len;
            ret_lines->known = true;
        } else {
            store_lines_release(ret_lines);
        }
    }
    return r;
}

/* A varint from [*p, end): false when the bytes end first or it runs past
 * 64 bits. */
static bool get_u64(const unsigned char **p, const unsigned char *end, uint64_t *ret)
{
    uint64_t v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char ch = *(*p)++;
        v |= (uint64_t)(ch & 0x7f) << shift;
        if (!(ch & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

/* Skip n varints: the start of the next column, or NULL when they run past
 * end. */
static const unsigned char *skip_column(const unsigned char *p, const unsigned char *end,
                                        uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v;
        if (!get_u64(&p, end, &v))
            return NULL;
    }
    return p;
}

int store_ldelta_decode(struct store *s, const void *src, size_t len, const void *base,
                        size_t base_len, size_t size, void **ret, struct hp_buf *err)
{
    if (!store_ldelta_is(src, len) || !base || base_len >= UINT32_MAX || size >= UINT32_MAX) {
        hp_err_printf(err, "%s: a line delta of %zu bytes without a usable base", s->path, size);
        return HP_ECORRUPT;
    }
    const unsigned char *z = (const unsigned char *)src + sizeof(LDELTA_MAGIC);
    size_t zlen = len - sizeof(LDELTA_MAGIC);
    /* The payload holds the literals, at most the output's bytes, and three
     * varints per sequence; each sequence copies at least one byte. */
    unsigned long long plen = ZSTD_getFrameContentSize(z, zlen);
    if (plen == ZSTD_CONTENTSIZE_ERROR || plen == ZSTD_CONTENTSIZE_UNKNOWN ||
        plen > (unsigned long long)size * 31 + 64) {
        hp_err_printf(err,
                      "%s: a line delta of %zu bytes: its payload's size is unreadable "
                      "or over %zu bytes",
                      s->path, size, size * 31 + 64);
        return HP_ECORRUPT;
    }
    uint32_t nb;
    uint32_t *bo = line_offsets(base, base_len, &nb, NULL);
    if (!bo) {
        hp_err_printf(err, "%s: a line delta's base has more than %zu lines", s->path,
                      lines_max(base_len));
        return HP_ECORRUPT;
    }
    void *pl = NULL;
    int r = store_zstd_decompress(s, z, zlen, NULL, 0, (size_t)plen, &pl, err);
    if (r < 0) {
        free(bo);
        return r;
    }
    const unsigned char *b = base, *p = pl, *pend = p + plen;
    unsigned char *out = hp_xmalloc(size ? size : 1);
    const char *what = NULL;
    uint64_t n = 0, i = 0, tail;
    const unsigned char *cl, *cd = NULL, *cc = NULL, *lit = NULL;
    if (!get_u64(&p, pend, &n) || n > (uint64_t)(pend - p) / 3)
        what = "sequence count";
    else if (!(cd = skip_column(cl = p, pend, n)))
        what = "literal lengths";
    else if (!(cc = skip_column(cd, pend, n)))
        what = "line deltas";
    else if (!(lit = skip_column(cc, pend, n)) || !get_u64(&lit, pend, &tail))
        what = "line counts";
    if (what)
        goto out;
    /* The columns side by side (their varints were checked above), the
     * literals after them to the payload's end. */
    size_t o = 0;
    int64_t next = 0;
    for (; i < n; i++) {
        uint64_t l = 0, dz = 0, k = 0;
        (void)get_u64(&cl, cd, &l);
        (void)get_u64(&cd, cc, &dz);
        (void)get_u64(&cc, pend, &k);
        if (l > (uint64_t)(pend - lit) || l > size - o) {
            what = "literal length";
            goto out;
        }
        memcpy(out + o, lit, l);
        for (const unsigned char *q = lit, *e = lit + l;
             (q = memchr(q, '\n', (size_t)(e - q))) != NULL; q++)
            next++;
        lit += l;
        o += l;
        int64_t d = (int64_t)(dz >> 1) ^ -(int64_t)(dz & 1);
        if (d < -next || d > (int64_t)nb - next || k == 0 || k > nb - (uint64_t)(next + d)) {
            what = "line range";
            goto out;
        }
        int64_t m = next + d;
        size_t bytes = bo[m + (int64_t)k] - bo[m];
        if (bytes > size - o) {
            what = "copy length";
            goto out;
        }
        memcpy(out + o, b + bo[m], bytes);
        o += bytes;
        next = m + (int64_t)k;
    }
    if (tail != (uint64_t)(pend - lit) || tail != size - o) {
        what = "length";
        goto out;
    }
    memcpy(out + o, lit, tail);
out:
    if (what) {
        hp_err_printf(err,
                      "%s: a line delta of %zu bytes: its %s is wrong (sequence "
                      "%llu of %llu)",
                      s->path, size, what, (unsigned long long)i, (unsigned long long)n);
        free(out);
        r = HP_ECORRUPT;
    } else {
        *ret = out;
    }
    free(bo);
    free(pl);
    return r;
}
